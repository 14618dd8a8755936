//! A synthesized circuit as a prover borrows it (a Vec or a ring slot), checked before use.

use bellpepper_core::SynthesisError;
use blstrs::{Bls12, Scalar};

use super::error::{Error, ErrorKind};
use super::shape::CircuitShape;

/// Proof type produced by every backend: bellperson's, so `Proof::write` gives the 192-byte
/// serialization filecoin-proofs uses.
pub type Proof = bellperson::groth16::Proof<Bls12>;

/// A density bitmap as bellperson's `DensityTracker` keeps it: 64-bit words, least significant bit
/// first, `bit_len` meaningful bits, `popcount` of them set.
#[derive(Clone, Copy, Debug)]
pub struct Density<'a> {
    /// The words; `words.len() * 64 >= bit_len`.
    pub words: &'a [u64],
    /// Number of meaningful bits.
    pub bit_len: usize,
    /// Number of set bits among the meaningful ones.
    pub popcount: usize,
}

/// Everything a Groth16 prover needs after synthesis of one circuit (bellperson's private
/// `ProvingAssignment`), borrowed from wherever it lives (a Vec or a ring slot).
#[derive(Clone, Copy, Debug)]
pub struct Assignment<'a> {
    /// Evaluations of the A polynomial, `n` = constraints + inputs elements.
    pub a: &'a [Scalar],
    /// Evaluations of the B polynomial, `n` elements.
    pub b: &'a [Scalar],
    /// Evaluations of the C polynomial, `n` elements.
    pub c: &'a [Scalar],
    /// Input assignment; the first element is ONE.
    pub input: &'a [Scalar],
    /// Auxiliary assignment.
    pub aux: &'a [Scalar],
    /// Density of A over aux variables.
    pub a_aux_density: Density<'a>,
    /// Density of B over input variables.
    pub b_input_density: Density<'a>,
    /// Density of B over aux variables.
    pub b_aux_density: Density<'a>,
}

/// A witness-only assignment as a witness slot holds it ([`crate::witness`]'s packed form):
/// the inputs (`ONE` first), the bit variables' values one bit each, the other aux values.
#[derive(Clone, Copy, Debug)]
pub struct WitnessAssignment<'a> {
    /// Input assignment; the first element is ONE.
    pub input: &'a [Scalar],
    /// The bit variables' values in aux order, `u64` words, least significant bit first.
    pub bit_values: &'a [u64],
    /// The other aux values, in aux order.
    pub non_bits: &'a [Scalar],
}

impl Density<'_> {
    /// Checks the bitmap against its claimed length and popcount: enough words, no bit set past
    /// `bit_len`, `popcount` equal to the set bits. Costs one pass over the words.
    pub fn validate(&self, what: &'static str, bit_len: usize) -> Result<(), Error> {
        let bad = |reason: String| -> Error { ErrorKind::InvalidDensity { what, reason }.into() };
        if self.bit_len != bit_len {
            return Err(bad(format!("{} bits, expected {bit_len}", self.bit_len)));
        }
        let need = bit_len.div_ceil(64);
        if self.words.len() < need {
            return Err(bad(format!(
                "{} words for {bit_len} bits",
                self.words.len()
            )));
        }
        let words = &self.words[..need];
        if bit_len % 64 != 0 {
            if let Some(last) = words.last() {
                if last >> (bit_len % 64) != 0 {
                    return Err(bad("bits set past the end".into()));
                }
            }
        }
        let count: usize = words.iter().map(|w| w.count_ones() as usize).sum();
        if count != self.popcount {
            return Err(bad(format!(
                "popcount {} but {count} bits set",
                self.popcount
            )));
        }
        Ok(())
    }

    /// Whether bit `i` is set (false past the words).
    #[inline]
    pub fn get(&self, i: usize) -> bool {
        self.words
            .get(i / 64)
            .is_some_and(|w| w >> (i % 64) & 1 == 1)
    }
}

impl Assignment<'_> {
    /// Checks every length and bitmap for consistency and returns the shape. Never panics.
    pub fn validate(&self) -> Result<CircuitShape, Error> {
        let n = self.a.len();
        if self.b.len() != n {
            return Err(Error::shape("b evaluations", n, self.b.len()));
        }
        if self.c.len() != n {
            return Err(Error::shape("c evaluations", n, self.c.len()));
        }
        if self.input.is_empty() {
            return Err(Error::shape("inputs (ONE at least)", 1, 0));
        }
        if n < self.input.len() {
            return Err(Error::shape(
                "a/b/c evaluations (at least one per input)",
                self.input.len(),
                n,
            ));
        }
        self.a_aux_density.validate("a_aux", self.aux.len())?;
        self.b_input_density.validate("b_input", self.input.len())?;
        self.b_aux_density.validate("b_aux", self.aux.len())?;
        Ok(CircuitShape {
            inputs: self.input.len(),
            aux: self.aux.len(),
            constraints: n - self.input.len(),
        })
    }
}

/// A growable density bitmap in bellperson's layout (u64 words, least significant bit first).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DensityBits {
    /// The words.
    pub words: Vec<u64>,
    /// Meaningful bits.
    pub bit_len: usize,
    /// Set bits.
    pub popcount: usize,
}

impl DensityBits {
    /// Appends a cleared bit.
    pub(crate) fn push(&mut self) {
        if self.bit_len % 64 == 0 {
            self.words.push(0);
        }
        self.bit_len += 1;
    }

    /// Sets bit `index` (appended before) and counts it once.
    pub(crate) fn set(&mut self, index: usize) -> Result<(), SynthesisError> {
        if index >= self.bit_len {
            return Err(SynthesisError::IoError(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "density bit index {index} out of range (len {})",
                    self.bit_len
                ),
            )));
        }
        let (w, b) = (index / 64, index % 64);
        if self.words[w] >> b & 1 == 0 {
            self.words[w] |= 1 << b;
            self.popcount += 1;
        }
        Ok(())
    }

    /// Borrowed view.
    pub fn as_density(&self) -> Density<'_> {
        Density {
            words: &self.words,
            bit_len: self.bit_len,
            popcount: self.popcount,
        }
    }
}
