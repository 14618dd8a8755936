//! Witness-only assignments: the inputs and the aux values with the 0/1 ones packed as bits, and
//! everything else a prover needs computed from the circuit's pre-compiled matrices.
//!
//! A full assignment ([`crate::synth::OwnedAssignment`], a full ring slot) holds `a`, `b` and `c`
//! (three `n`-element arrays of 32-byte scalars) beside the witness: at a 32 GiB PoRep partition
//! that is 12.5 GiB of a 15.6 GiB slot. They are `A·w`, `B·w` and `C·w`, so a prover that holds
//! the matrices ([`R1cs`]) needs the witness `w` alone; and most of a witness is bits.
//!
//! **Which aux variables are bits** is read from the matrices alone, once per circuit
//! ([`WitnessLayout::of`]; [`crate::r1cs::measure`] counts them without recording): a variable `x`
//! is a bit when some row of the R1CS is
//! - `k x · d (1 - x) = 0` or `d (1 - x) · k x = 0` for non-zero `k`, `d` (bellpepper's
//!   `AllocatedBit::alloc` writes `(1 - x)·x = 0`), or
//! - `k_a x · k_b x = k_c x` with `k_c = k_a k_b` non-zero (`x·x = x`, what `porep-like` writes).
//!
//! Either holds in a satisfying witness only for `x` in {0, 1}. Near misses are not bits
//! (`2x·x = x` admits 1/2; `x·y = x` and `(1 - x)·x = y` bind another variable).
//!
//! Most bits of a SHA-256 circuit have no such row: `AllocatedBit::xor` writes
//! `2a · b = a + b - c`, `and` writes `a · b = c`, SHA-256's `ch` and `maj` similar rows. So a
//! row also shows a variable `z` to be a bit when every other variable in it is a bit already
//! shown and, for each of their 0/1 values, the row fixes `z` to 0 or 1 (it is linear in `z` with
//! a non-zero coefficient; at most five variables, so at most 16 cases). The rows are read once,
//! in order, each knowing only the bits shown by the rows before it (gadgets constrain their
//! operands before their outputs); [`crate::r1cs::measure`] reads them the same way, so it
//! counts exactly the bits [`WitnessLayout::of`] finds. In the 2 KiB PoRep partition this finds
//! nearly every 0/1 value; the one-row forms alone found a quarter of the aux variables.
//!
//! **The packed form** ([`PackedWitness`], or a ring slot's witness arrays): the inputs as
//! scalars; the values of the bit variables in aux order, one bit each (`u64` words, least
//! significant bit first: bit `j` is the `j`-th bit variable); the other aux values as scalars in
//! aux order. [`WitnessSink`] packs a synthesis straight into borrowed arrays as the values come
//! (a bit variable holding anything but 0 or 1 is an error naming it: the witness does not
//! satisfy the circuit); [`unpack_witness`] and [`expand`] undo it.
//!
//! **The rank table** ([`WitnessLayout::bits_before`]): for every 64 aux variables, how many bit
//! variables come before them. With it, the place of aux variable `i` in either packed array is
//! one table read and one popcount, so unpacking runs in parallel (and ports to a device kernel
//! as one thread per word); it is one `u64` per 64 variables, not an index per variable.
//!
//! ```
//! use kernels::circuits::{AnyCircuit, CircuitSpec};
//! use kernels::witness::{expand, PackedWitness, WitnessLayout};
//!
//! let spec: CircuitSpec = "bits:100".parse()?;
//! let r1cs = AnyCircuit::from(spec).compile()?;
//! let layout = WitnessLayout::of(&r1cs);
//! assert_eq!(layout.bits(), 100);
//! let packed = PackedWitness::synthesize(spec.circuit(Some(7)), &r1cs, &layout)?;
//! let full = kernels::synth::synthesize_owned(spec.circuit(Some(7)))?;
//! let expanded = expand(&r1cs, &layout, &packed.input, &packed.bit_values, &packed.non_bits)?;
//! assert_eq!(expanded.aux, full.aux);
//! assert_eq!((expanded.a, expanded.b, expanded.c), (full.a, full.b, full.c));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use bellpepper_core::{Circuit, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use crate::r1cs::R1cs;
use crate::synth::Synthesis;
use crate::types::{Assignment, Density};
use crate::types::{AssignmentSink, Evaluations};
use crate::Error;

/// Words of the bitmaps per parallel unpacking task (64 variables each).
const WORDS_PER_TASK: usize = 1 << 10;

/// Which aux variables of a circuit are bits, and the rank table that places each aux variable
/// in the packed arrays. Computed once per circuit ([`WitnessLayout::of`]); a pure function of
/// the matrices, so a producer and a consumer holding the same matrices agree on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WitnessLayout {
    inputs: usize,
    aux: usize,
    bits: usize,
    /// One bit per aux variable: set for a bit variable.
    is_bit: Vec<u64>,
    /// `bits_before[w]`: bit variables among aux `0..64 w`; one entry more than `is_bit`.
    bits_before: Vec<u64>,
}

impl WitnessLayout {
    /// The layout of the circuit of `r1cs` (one pass over its rows, in order).
    pub fn of(r1cs: &R1cs) -> WitnessLayout {
        let shape = r1cs.shape();
        Self::from_is_bit(shape.inputs, shape.aux, r1cs.boolean_aux())
            .expect("`R1cs::boolean_aux` marks aux variables only")
    }

    /// A layout from its bitmap: `is_bit` has one bit per aux variable (`aux.div_ceil(64)` words,
    /// no bit set past `aux`).
    pub fn from_is_bit(
        inputs: usize,
        aux: usize,
        is_bit: Vec<u64>,
    ) -> Result<WitnessLayout, Error> {
        if is_bit.len() != aux.div_ceil(64) {
            return Err(Error::shape(
                "words of the bit-variable bitmap",
                aux.div_ceil(64),
                is_bit.len(),
            ));
        }
        if aux % 64 != 0 && is_bit.last().is_some_and(|w| w >> (aux % 64) != 0) {
            return Err(crate::ErrorKind::R1csFormat(format!(
                "the bit-variable bitmap marks variables past the {aux} aux variables"
            ))
            .into());
        }
        let mut bits_before = Vec::with_capacity(is_bit.len() + 1);
        let mut bits = 0u64;
        bits_before.push(0);
        for w in &is_bit {
            bits += u64::from(w.count_ones());
            bits_before.push(bits);
        }
        Ok(WitnessLayout {
            inputs,
            aux,
            bits: bits as usize,
            is_bit,
            bits_before,
        })
    }

    /// Inputs, `ONE` included.
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    /// Aux variables.
    pub fn aux(&self) -> usize {
        self.aux
    }

    /// Aux variables that are bits.
    pub fn bits(&self) -> usize {
        self.bits
    }

    /// Aux variables kept as field elements.
    pub fn non_bits(&self) -> usize {
        self.aux - self.bits
    }

    /// Whether aux variable `i` is a bit (`false` past the aux variables).
    pub fn is_bit(&self, i: usize) -> bool {
        self.is_bit
            .get(i / 64)
            .is_some_and(|w| w >> (i % 64) & 1 == 1)
    }

    /// The bitmap of bit variables: one bit per aux variable, `u64` words, least significant
    /// bit first.
    pub fn is_bit_words(&self) -> &[u64] {
        &self.is_bit
    }

    /// The rank table: entry `w` counts the bit variables among aux `0..64 w` (one entry per
    /// word of [`WitnessLayout::is_bit_words`], and a last one: [`WitnessLayout::bits`]). Aux
    /// variable `i` is bit number `bits_before[i / 64] + popcount(is_bit[i / 64] & below(i))` if
    /// it is a bit, else non-bit number `i - ` that.
    pub fn bits_before(&self) -> &[u64] {
        &self.bits_before
    }

    /// Bit variables among aux `0..i` (`i <= aux`).
    pub fn bit_rank(&self, i: usize) -> usize {
        let (w, b) = (i / 64, i % 64);
        let below = match self.is_bit.get(w) {
            Some(word) if b > 0 => (word & ((1u64 << b) - 1)).count_ones() as u64,
            _ => 0,
        };
        (self.bits_before[w.min(self.is_bit.len())] + below) as usize
    }

    /// Words of the packed bit values.
    pub fn bit_value_words(&self) -> usize {
        self.bits.div_ceil(64)
    }
}

/// A circuit's matrices and, from its first use on, its witness layout (one pass over the
/// matrices, made once): what a process serving witness-only assignments keeps per circuit.
pub struct CircuitMatrices {
    r1cs: R1cs,
    layout: std::sync::OnceLock<WitnessLayout>,
}

impl CircuitMatrices {
    /// Serves `r1cs`.
    pub fn new(r1cs: R1cs) -> Self {
        CircuitMatrices {
            r1cs,
            layout: std::sync::OnceLock::new(),
        }
    }

    /// The matrices.
    pub fn r1cs(&self) -> &R1cs {
        &self.r1cs
    }

    /// The witness layout, computed on first use (other callers wait for it).
    pub fn witness_layout(&self) -> &WitnessLayout {
        self.layout.get_or_init(|| {
            let t = std::time::Instant::now();
            let layout = WitnessLayout::of(&self.r1cs);
            tracing::info!(
                circuit_id = format_args!("{:#x}", self.r1cs.circuit_id()),
                bits = layout.bits(),
                non_bits = layout.non_bits(),
                secs = t.elapsed().as_secs_f64(),
                "witness layout computed"
            );
            layout
        })
    }
}

impl std::fmt::Debug for CircuitMatrices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CircuitMatrices")
            .field("r1cs", &self.r1cs)
            .field(
                "layout",
                &self.layout.get().map(|l| (l.bits(), l.non_bits())),
            )
            .finish()
    }
}

/// The three arrays of a packed witness, borrowed for a [`WitnessSink`] to fill (a ring slot's,
/// or a [`PackedWitness`]'s).
#[derive(Debug)]
pub struct WitnessParts<'a> {
    /// The inputs (`ONE` first).
    pub input: &'a mut [Scalar],
    /// The bit variables' values, one bit each in aux order.
    pub bit_values: &'a mut [u64],
    /// The other aux values, in aux order.
    pub non_bits: &'a mut [Scalar],
}

/// What a [`WitnessSink`] wrote: the lengths of its arrays and the number of bit variables that
/// are 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WitnessCounts {
    /// Inputs.
    pub inputs: usize,
    /// Bit variables (bits of the bit-value array).
    pub bits: usize,
    /// Non-bit aux values.
    pub non_bits: usize,
    /// Bit variables whose value is 1 (the bit-value array's popcount).
    pub ones: u64,
}

/// An [`AssignmentSink`] for the witness pass ([`Synthesis::Witness`]) that packs the witness
/// into borrowed arrays as it comes: inputs as they are, bit variables into the bit-value array
/// (each word is cleared when its first bit is written, so the arrays need no clearing), the
/// other aux values into the non-bit array. It refuses constraints, densities and evaluations,
/// and keeps no aux slice (see [`AssignmentSink`]).
pub struct WitnessSink<'a> {
    parts: WitnessParts<'a>,
    layout: &'a WitnessLayout,
    counts: WitnessCounts,
    aux: usize,
}

impl<'a> WitnessSink<'a> {
    /// A sink writing into `parts` by `layout`.
    pub fn new(parts: WitnessParts<'a>, layout: &'a WitnessLayout) -> Self {
        WitnessSink {
            parts,
            layout,
            counts: WitnessCounts::default(),
            aux: 0,
        }
    }

    /// What was written so far.
    pub fn counts(&self) -> WitnessCounts {
        self.counts
    }
}

fn sink_full(what: &str, capacity: usize) -> SynthesisError {
    SynthesisError::IoError(std::io::Error::new(
        std::io::ErrorKind::OutOfMemory,
        format!(
            "witness full: more than {capacity} {what} (the circuit is larger than its layout)"
        ),
    ))
}

fn no_evaluations() -> SynthesisError {
    SynthesisError::IoError(std::io::Error::other(
        "a witness-only sink takes the witness pass only (`Synthesis::Witness`), no constraint",
    ))
}

impl AssignmentSink for WitnessSink<'_> {
    fn push_input(&mut self, value: Scalar) -> Result<(), SynthesisError> {
        let cap = self.parts.input.len();
        *self
            .parts
            .input
            .get_mut(self.counts.inputs)
            .ok_or_else(|| sink_full("inputs", cap))? = value;
        self.counts.inputs += 1;
        Ok(())
    }

    fn push_aux(&mut self, value: Scalar) -> Result<(), SynthesisError> {
        let i = self.aux;
        if i >= self.layout.aux {
            return Err(sink_full("aux variables", self.layout.aux));
        }
        let c = &mut self.counts;
        if self.layout.is_bit(i) {
            let one = if value == Scalar::ZERO {
                0
            } else if value == Scalar::ONE {
                1
            } else {
                return Err(SynthesisError::IoError(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "aux variable {i} is boolean in the circuit's matrices but its value is \
                         neither 0 nor 1: the witness does not satisfy the circuit"
                    ),
                )));
            };
            let cap = self.parts.bit_values.len();
            let word = self
                .parts
                .bit_values
                .get_mut(c.bits / 64)
                .ok_or_else(|| sink_full("bit variables", 64 * cap))?;
            if c.bits % 64 == 0 {
                *word = 0;
            }
            *word |= one << (c.bits % 64);
            c.bits += 1;
            c.ones += one;
        } else {
            let cap = self.parts.non_bits.len();
            *self
                .parts
                .non_bits
                .get_mut(c.non_bits)
                .ok_or_else(|| sink_full("non-bit aux values", cap))? = value;
            c.non_bits += 1;
        }
        self.aux += 1;
        Ok(())
    }

    fn push_constraint(&mut self, _: Scalar, _: Scalar, _: Scalar) -> Result<(), SynthesisError> {
        Err(no_evaluations())
    }

    fn set_density(
        &mut self,
        _: crate::types::DensityKind,
        _: usize,
    ) -> Result<(), SynthesisError> {
        Err(no_evaluations())
    }

    fn inputs(&self) -> &[Scalar] {
        &self.parts.input[..self.counts.inputs]
    }

    fn aux(&self) -> &[Scalar] {
        &[]
    }

    fn evaluations(&mut self, _: usize, _: [u64; 3]) -> Result<Evaluations<'_>, SynthesisError> {
        Err(no_evaluations())
    }

    fn witness_only(&self) -> bool {
        true
    }
}

/// A packed witness in plain `Vec`s (tests, in-process use): what a witness-only slot holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackedWitness {
    /// The inputs (`ONE` first).
    pub input: Vec<Scalar>,
    /// The bit variables' values, one bit each in aux order.
    pub bit_values: Vec<u64>,
    /// The other aux values, in aux order.
    pub non_bits: Vec<Scalar>,
    /// Bit variables whose value is 1.
    pub ones: u64,
}

impl PackedWitness {
    /// Runs `fill` with a [`WitnessSink`] over arrays sized for `layout` and keeps what it
    /// wrote (a job's partition: `job.synthesize_partition_with(k, sink, Synthesis::Witness(..))`).
    pub fn fill(
        layout: &WitnessLayout,
        fill: impl FnOnce(&mut WitnessSink<'_>) -> Result<(), Error>,
    ) -> Result<PackedWitness, Error> {
        let mut input = vec![Scalar::ZERO; layout.inputs];
        let mut bit_values = vec![0u64; layout.bit_value_words()];
        let mut non_bits = vec![Scalar::ZERO; layout.non_bits()];
        let parts = WitnessParts {
            input: &mut input,
            bit_values: &mut bit_values,
            non_bits: &mut non_bits,
        };
        let mut sink = WitnessSink::new(parts, layout);
        fill(&mut sink)?;
        let c = sink.counts();
        input.truncate(c.inputs);
        bit_values.truncate(c.bits.div_ceil(64));
        non_bits.truncate(c.non_bits);
        Ok(PackedWitness {
            input,
            bit_values,
            non_bits,
            ones: c.ones,
        })
    }

    /// Packs a synthesized assignment's inputs and aux values.
    pub fn pack(
        layout: &WitnessLayout,
        input: &[Scalar],
        aux: &[Scalar],
    ) -> Result<PackedWitness, Error> {
        Self::fill(layout, |sink| {
            for &v in input {
                sink.push_input(v)?;
            }
            for &v in aux {
                sink.push_aux(v)?;
            }
            Ok(())
        })
    }

    /// Synthesizes `circuit`'s witness straight into packed form ([`Synthesis::Witness`]).
    pub fn synthesize<C: Circuit<Scalar>>(
        circuit: C,
        r1cs: &R1cs,
        layout: &WitnessLayout,
    ) -> Result<PackedWitness, Error> {
        Self::fill(layout, |sink| {
            crate::synth::synthesize_with(circuit, sink, Synthesis::Witness(r1cs.shape())).map(drop)
        })
    }
}

/// Unpacks a packed witness's aux values into `aux` (`layout.aux()` of them), in parallel on the
/// current rayon pool. Every length must be `layout`'s: `bit_values` has
/// [`WitnessLayout::bit_value_words`] words, `non_bits` [`WitnessLayout::non_bits`] values.
pub fn unpack_witness(
    layout: &WitnessLayout,
    bit_values: &[u64],
    non_bits: &[Scalar],
    aux: &mut [Scalar],
) -> Result<(), Error> {
    for (what, expected, found) in [
        ("aux variables", layout.aux, aux.len()),
        (
            "bit-value words",
            layout.bit_value_words(),
            bit_values.len(),
        ),
        ("non-bit aux values", layout.non_bits(), non_bits.len()),
    ] {
        if found != expected {
            return Err(Error::shape(what, expected, found));
        }
    }
    aux.par_chunks_mut(64 * WORDS_PER_TASK)
        .enumerate()
        .for_each(|(task, out)| {
            let first = task * WORDS_PER_TASK;
            // The counts before this task's first variable, from the rank table; the lengths
            // checked above keep every index below in range.
            let mut bit = layout.bits_before[first] as usize;
            let mut non = 64 * first - bit;
            for (j, o) in out.iter_mut().enumerate() {
                let i = 64 * first + j;
                if layout.is_bit[i / 64] >> (i % 64) & 1 == 1 {
                    *o = if bit_values[bit / 64] >> (bit % 64) & 1 == 1 {
                        Scalar::ONE
                    } else {
                        Scalar::ZERO
                    };
                    bit += 1;
                } else {
                    *o = non_bits[non];
                    non += 1;
                }
            }
        });
    Ok(())
}

/// A packed witness expanded for a prover: the aux values and `a = A·w`, `b = B·w`, `c = C·w`;
/// the inputs stay where they were and the densities are the matrices'.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expanded {
    /// A evaluations, `n` of them.
    pub a: Vec<Scalar>,
    /// B evaluations.
    pub b: Vec<Scalar>,
    /// C evaluations.
    pub c: Vec<Scalar>,
    /// The aux values, unpacked.
    pub aux: Vec<Scalar>,
}

impl Expanded {
    /// The prover's input: these arrays, `input` (the packed witness's inputs) and the densities
    /// of `r1cs` (the matrices it was expanded with).
    pub fn assignment<'a>(&'a self, input: &'a [Scalar], r1cs: &'a R1cs) -> Assignment<'a> {
        let d = |k: usize| {
            let b = &r1cs.densities()[k];
            Density {
                words: &b.words,
                bit_len: b.bit_len,
                popcount: b.popcount,
            }
        };
        Assignment {
            a: &self.a,
            b: &self.b,
            c: &self.c,
            input,
            aux: &self.aux,
            a_aux_density: d(0),
            b_input_density: d(1),
            b_aux_density: d(2),
        }
    }
}

/// Expands a packed witness on the host: unpacks the aux values ([`unpack_witness`]) and
/// evaluates the matrices ([`R1cs::evaluate`], rows in parallel). `layout` must be
/// [`WitnessLayout::of`] these matrices; every length must be theirs. The assignment it gives
/// ([`Expanded::assignment`]) is byte for byte the full synthesis's.
pub fn expand(
    r1cs: &R1cs,
    layout: &WitnessLayout,
    input: &[Scalar],
    bit_values: &[u64],
    non_bits: &[Scalar],
) -> Result<Expanded, Error> {
    let shape = r1cs.shape();
    if (layout.inputs, layout.aux) != (shape.inputs, shape.aux) {
        return Err(Error::shape(
            "aux variables of the witness layout (made for other matrices)",
            shape.aux,
            layout.aux,
        ));
    }
    if input.len() != shape.inputs {
        return Err(Error::shape("inputs", shape.inputs, input.len()));
    }
    let mut aux = vec![Scalar::ZERO; shape.aux];
    unpack_witness(layout, bit_values, non_bits, &mut aux)?;
    let n = shape.n();
    let (mut a, mut b, mut c) = (
        vec![Scalar::ZERO; n],
        vec![Scalar::ZERO; n],
        vec![Scalar::ZERO; n],
    );
    r1cs.evaluate(input, &aux, &mut a, &mut b, &mut c)?;
    Ok(Expanded { a, b, c, aux })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuits::AnyCircuit;
    use crate::circuits::CircuitSpec;
    use crate::r1cs::bits::small_int;
    use crate::r1cs::{measure, record};
    use crate::synth::synthesize_owned;
    use bellpepper_core::{ConstraintSystem, LinearCombination, Variable};

    /// A hand-made circuit: `vars` aux variables with the given values, and the constraints
    /// `rows` builds over them (`CS::one()` is passed as `one`).
    struct Rows {
        values: Vec<u64>,
        #[allow(clippy::type_complexity)]
        rows: Vec<Box<dyn Fn(&[Variable], Variable) -> [LinearCombination<Scalar>; 3]>>,
    }

    impl Circuit<Scalar> for Rows {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            let vars: Vec<Variable> = self
                .values
                .iter()
                .enumerate()
                .map(|(i, &v)| cs.alloc(|| format!("v{i}"), || Ok(Scalar::from(v))))
                .collect::<Result<_, _>>()?;
            for (k, row) in self.rows.iter().enumerate() {
                let [a, b, c] = row(&vars, CS::one());
                cs.enforce(|| format!("row {k}"), |_| a, |_| b, |_| c);
            }
            Ok(())
        }
    }

    type Row = Box<dyn Fn(&[Variable], Variable) -> [LinearCombination<Scalar>; 3]>;

    fn lc() -> LinearCombination<Scalar> {
        LinearCombination::zero()
    }

    fn two() -> Scalar {
        Scalar::from(2u64)
    }

    /// One row per case over variables 0..8; each case names the variable it should make a bit.
    fn cases() -> Vec<(&'static str, Row, Option<usize>)> {
        vec![
            (
                "(1 - x)·x = 0",
                Box::new(|v: &[Variable], one| [lc() + one - v[0], lc() + v[0], lc()]),
                Some(0),
            ),
            (
                "x·(1 - x) = 0",
                Box::new(|v: &[Variable], one| [lc() + v[1], lc() + one - v[1], lc()]),
                Some(1),
            ),
            (
                "x·x = x",
                Box::new(|v: &[Variable], _| [lc() + v[2], lc() + v[2], lc() + v[2]]),
                Some(2),
            ),
            (
                "2x·3(1 - x) = 0",
                Box::new(|v: &[Variable], one| {
                    [
                        lc() + (two(), v[3]),
                        lc() + (Scalar::from(3u64), one) - (Scalar::from(3u64), v[3]),
                        lc(),
                    ]
                }),
                Some(3),
            ),
            (
                "2x·x = x (x is 0 or 1/2)",
                Box::new(|v: &[Variable], _| [lc() + (two(), v[4]), lc() + v[4], lc() + v[4]]),
                None,
            ),
            (
                "x·y = x",
                Box::new(|v: &[Variable], _| [lc() + v[5], lc() + v[6], lc() + v[5]]),
                None,
            ),
            (
                "(1 - x)·x = y",
                Box::new(|v: &[Variable], one| [lc() + one - v[5], lc() + v[5], lc() + v[6]]),
                None,
            ),
            (
                "(1 - 2x)·x = 0",
                Box::new(|v: &[Variable], one| [lc() + one - (two(), v[7]), lc() + v[7], lc()]),
                None,
            ),
            (
                "(1 - x)·y = 0",
                Box::new(|v: &[Variable], one| [lc() + one - v[6], lc() + v[7], lc()]),
                None,
            ),
            (
                "(x - y)·x = 0",
                Box::new(|v: &[Variable], _| [lc() + v[6] - v[7], lc() + v[6], lc()]),
                None,
            ),
            (
                "0x·x = 0 (zero terms are dropped: 0 = 0)",
                Box::new(|v: &[Variable], one| {
                    [lc() + (Scalar::ZERO, v[8]), lc() + one - v[8], lc()]
                }),
                None,
            ),
        ]
    }

    fn rows_circuit(values: Vec<u64>, rows: Vec<Row>) -> Rows {
        Rows { values, rows }
    }

    /// The layout of `c`'s recorded matrices.
    fn layout_of(c: Rows) -> WitnessLayout {
        let r1cs = R1cs::from_bytes(Box::new(record(c, None).unwrap().encode(1))).unwrap();
        WitnessLayout::of(&r1cs)
    }

    fn only_cases() -> Vec<Row> {
        cases().into_iter().map(|(_, r, _)| r).collect()
    }

    #[test]
    fn both_boolean_forms_are_found_and_near_misses_are_not() {
        let cases = cases();
        let expected: Vec<usize> = cases.iter().filter_map(|(_, _, x)| *x).collect();
        let layout = layout_of(rows_circuit(vec![0; 9], only_cases()));
        let m = measure(rows_circuit(vec![0; 9], only_cases())).unwrap();
        assert_eq!(layout.aux(), 9);
        for (name, _, bit) in &cases {
            if let Some(x) = bit {
                assert!(layout.is_bit(*x), "{name}: variable {x} is a bit");
            }
        }
        let found: Vec<usize> = (0..9).filter(|&i| layout.is_bit(i)).collect();
        assert_eq!(found, expected, "only the boolean rows make bits");
        assert_eq!(m.bit_aux, expected.len(), "`measure` counts the same");
        assert_eq!(layout.bits(), 4);
        assert_eq!(layout.non_bits(), 5);
        assert_eq!(layout.bits_before(), &[0, 4]);
        assert_eq!(
            (0..=9).map(|i| layout.bit_rank(i)).collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 4, 4, 4, 4, 4, 4]
        );
    }

    /// A row shows a bit when it fixes its one unknown variable to 0 or 1 from bits shown by the
    /// rows before it; `measure` counts the same.
    #[test]
    fn bits_follow_from_bits_row_by_row() {
        let rows = || -> Vec<Row> {
            vec![
                // 0: c = a + b - 2ab (xor) before a and b are bits: nothing yet.
                Box::new(|v: &[Variable], _| {
                    [lc() + (two(), v[0]), lc() + v[1], lc() + v[0] + v[1] - v[2]]
                }),
                // 1, 2: a and b are bits.
                Box::new(|v: &[Variable], one| [lc() + one - v[0], lc() + v[0], lc()]),
                Box::new(|v: &[Variable], _| [lc() + v[1], lc() + v[1], lc() + v[1]]),
                // 3: d = a xor b.
                Box::new(|v: &[Variable], _| {
                    [lc() + (two(), v[0]), lc() + v[1], lc() + v[0] + v[1] - v[3]]
                }),
                // 4: e = a and d.
                Box::new(|v: &[Variable], _| [lc() + v[0], lc() + v[3], lc() + v[4]]),
                // 5: f = (a - b) d + b (a `ch`-like row: z in C with another term).
                Box::new(|v: &[Variable], _| [lc() + v[0] - v[1], lc() + v[3], lc() + v[5] - v[1]]),
                // 6: g·1 = a + b: g may be 2.
                Box::new(|v: &[Variable], one| [lc() + v[6], lc() + one, lc() + v[0] + v[1]]),
                // 7: h·(a + 1) = 1: h is 1 or 1/2.
                Box::new(|v: &[Variable], one| [lc() + v[7], lc() + v[0] + one, lc() + one]),
                // 8: i·a = 0: i is free when a is 0.
                Box::new(|v: &[Variable], _| [lc() + v[8], lc() + v[0], lc()]),
                // 9: j = a xor k, with k unknown: two unknowns.
                Box::new(|v: &[Variable], _| {
                    [
                        lc() + (two(), v[0]),
                        lc() + v[10],
                        lc() + v[0] + v[10] - v[9],
                    ]
                }),
            ]
        };
        let layout = layout_of(rows_circuit(vec![0; 11], rows()));
        let found: Vec<usize> = (0..11).filter(|&i| layout.is_bit(i)).collect();
        assert_eq!(found, vec![0, 1, 3, 4, 5], "a, b, then d, e, f");
        assert_eq!(
            measure(rows_circuit(vec![0; 11], rows())).unwrap().bit_aux,
            5
        );
        // The xor of row 0 comes before a and b are shown to be bits: c is not (one pass).
        assert!(!layout.is_bit(2));
    }

    #[test]
    fn small_coefficients_are_read_as_integers() {
        for m in [0i64, 1, -1, 2, -2, 1 << 39, -(1 << 39) + 1, (1 << 40) - 1] {
            let c = if m < 0 {
                -Scalar::from(m.unsigned_abs())
            } else {
                Scalar::from(m as u64)
            };
            assert_eq!(small_int(&c), Some(m), "{m}");
        }
        assert_eq!(small_int(&Scalar::from(1u64 << 40)), None);
        assert_eq!(small_int(&Scalar::from(2u64).invert().unwrap()), None);
    }

    /// The built-in circuits allocate their bits the documented way: sha-chain:1 through
    /// `AllocatedBit::alloc` (its SHA-256 and the 512 input bits), porep-like through `b·b = b`
    /// for exactly its `b_aux` bits.
    #[test]
    fn builtin_circuits_have_the_bits_they_allocate() {
        let porep: CircuitSpec = "porep-like:16384".parse().unwrap();
        let r1cs = AnyCircuit::from(porep).compile().unwrap();
        let layout = WitnessLayout::of(&r1cs);
        let shape = crate::circuits::PorepLike::shape_for(16384);
        assert_eq!(layout.bits(), shape.b_aux);
        assert!(
            (0..shape.b_aux).all(|i| layout.is_bit(i)),
            "bits come first"
        );
        assert_eq!(layout.non_bits(), shape.aux - shape.b_aux);
        assert_eq!(measure(porep.circuit(None)).unwrap().bit_aux, shape.b_aux);

        // porep-bits: its copies of bits (`c * 1 = b`) are found bits too
        let real: CircuitSpec = "porep-bits:16384".parse().unwrap();
        let layout = WitnessLayout::of(&AnyCircuit::from(real).compile().unwrap());
        let copies = crate::circuits::PorepLike::copies_for(&shape, true);
        assert!(copies > 0);
        assert_eq!(layout.bits(), shape.b_aux + copies);
        assert!((0..shape.b_aux + copies).all(|i| layout.is_bit(i)));

        let bits: CircuitSpec = "bits:130".parse().unwrap();
        let layout = WitnessLayout::of(&AnyCircuit::from(bits).compile().unwrap());
        // Three words, each followed by its bits (64, 64, 2): the words are not bits.
        assert_eq!(layout.bits(), 130);
        assert_eq!(layout.aux(), 133);
        assert!(!layout.is_bit(0) && layout.is_bit(1) && !layout.is_bit(65));

        let chain: CircuitSpec = "sha-chain:1".parse().unwrap();
        let r1cs = AnyCircuit::from(chain).compile().unwrap();
        let layout = WitnessLayout::of(&r1cs);
        // Every aux value of a satisfying witness is 0 or 1 at a bit variable: the full
        // synthesis says which values are 0/1, a superset of the bits found.
        let full = synthesize_owned(chain.circuit(Some(3))).unwrap();
        for i in 0..layout.aux() {
            if layout.is_bit(i) {
                assert!(
                    full.aux[i] == Scalar::ZERO || full.aux[i] == Scalar::ONE,
                    "{i}"
                );
            }
        }
        // The 512 message bits, one boolean row each, are the first 512 aux variables.
        assert!((0..512).all(|i| layout.is_bit(i)));
        assert_eq!(measure(chain.circuit(None)).unwrap().bit_aux, layout.bits());
        // SHA-256's `xor`, `and`, `ch` and `maj` outputs have no boolean row of their own: the
        // rows that compute them from bits show them (a quarter of the aux without them).
        let zero_one = full
            .aux
            .iter()
            .filter(|v| **v == Scalar::ZERO || **v == Scalar::ONE)
            .count();
        eprintln!(
            "sha-chain:1: {} bit variables, {zero_one} 0/1 values of {} aux",
            layout.bits(),
            layout.aux()
        );
        assert!(layout.bits() > layout.aux() * 9 / 10, "{}", layout.bits());
    }

    #[test]
    fn pack_and_unpack_round_trip_real_witnesses_byte_for_byte() {
        for (text, seeds) in [
            ("sha-chain:1", [1u64, 2]),
            ("bits:700", [3, 4]),
            ("porep-like:16384", [5, 6]),
            ("pubinputs:4", [7, 8]),
        ] {
            let spec: CircuitSpec = text.parse().unwrap();
            let r1cs = AnyCircuit::from(spec).compile().unwrap();
            let layout = WitnessLayout::of(&r1cs);
            for seed in seeds {
                let full = synthesize_owned(spec.circuit(Some(seed))).unwrap();
                let packed = PackedWitness::pack(&layout, &full.input, &full.aux).unwrap();
                let direct =
                    PackedWitness::synthesize(spec.circuit(Some(seed)), &r1cs, &layout).unwrap();
                assert_eq!(packed, direct, "{text}: the sink packs as `pack` does");
                assert_eq!(packed.input, full.input);
                assert_eq!(packed.non_bits.len(), layout.non_bits());
                let ones = full
                    .aux
                    .iter()
                    .enumerate()
                    .filter(|(i, v)| layout.is_bit(*i) && **v == Scalar::ONE)
                    .count();
                assert_eq!(packed.ones, ones as u64, "{text}");
                let mut aux = vec![Scalar::from(99u64); layout.aux()];
                unpack_witness(&layout, &packed.bit_values, &packed.non_bits, &mut aux).unwrap();
                assert_eq!(aux, full.aux, "{text} seed {seed}");
                let e = expand(
                    &r1cs,
                    &layout,
                    &packed.input,
                    &packed.bit_values,
                    &packed.non_bits,
                )
                .unwrap();
                assert_eq!((&e.a, &e.b, &e.c), (&full.a, &full.b, &full.c), "{text}");
                let a = e.assignment(&packed.input, &r1cs);
                assert_eq!(a.a_aux_density.words, &full.a_aux_density.words[..]);
                assert_eq!(a.b_aux_density.popcount, full.b_aux_density.popcount);
            }
        }
    }

    #[test]
    fn unpacking_spans_several_tasks() {
        // 64 × 1024 × 2 + 5 variables: three tasks, every third one a bit.
        let aux = 64 * WORDS_PER_TASK * 2 + 5;
        let mut is_bit = vec![0u64; aux.div_ceil(64)];
        for i in (0..aux).step_by(3) {
            is_bit[i / 64] |= 1 << (i % 64);
        }
        let layout = WitnessLayout::from_is_bit(1, aux, is_bit).unwrap();
        let values: Vec<Scalar> = (0..aux)
            .map(|i| {
                if i % 3 == 0 {
                    Scalar::from((i / 3 % 2) as u64)
                } else {
                    Scalar::from(i as u64 + 7)
                }
            })
            .collect();
        let packed = PackedWitness::pack(&layout, &[Scalar::ONE], &values).unwrap();
        let mut out = vec![Scalar::ZERO; aux];
        unpack_witness(&layout, &packed.bit_values, &packed.non_bits, &mut out).unwrap();
        assert_eq!(out, values);
        assert_eq!(layout.bit_rank(aux), layout.bits());
    }

    #[test]
    fn a_bit_variable_holding_another_value_is_refused_with_its_index() {
        let rows = || -> Vec<Row> {
            vec![
                Box::new(|v: &[Variable], _| [lc() + v[0], lc() + v[0], lc() + v[0]]),
                Box::new(|v: &[Variable], one| [lc() + one - v[2], lc() + v[2], lc()]),
            ]
        };
        let r1cs = R1cs::from_bytes(Box::new(
            record(rows_circuit(vec![0; 3], rows()), None)
                .unwrap()
                .encode(1),
        ))
        .unwrap();
        let layout = WitnessLayout::of(&r1cs);
        assert_eq!(layout.bits(), 2);
        let ok =
            PackedWitness::synthesize(rows_circuit(vec![1, 5, 0], rows()), &r1cs, &layout).unwrap();
        assert_eq!((ok.bit_values.clone(), ok.ones), (vec![0b01], 1));
        assert_eq!(ok.non_bits, vec![Scalar::from(5u64)]);
        let e = PackedWitness::synthesize(rows_circuit(vec![1, 5, 2], rows()), &r1cs, &layout)
            .unwrap_err();
        assert!(e.to_string().contains("aux variable 2 is boolean"), "{e}");
        let e = PackedWitness::pack(&layout, &[Scalar::ONE], &[-Scalar::ONE]).unwrap_err();
        assert!(e.to_string().contains("aux variable 0 is boolean"), "{e}");
    }

    #[test]
    fn wrong_lengths_are_errors_not_panics() {
        let spec: CircuitSpec = "bits:70".parse().unwrap();
        let r1cs = AnyCircuit::from(spec).compile().unwrap();
        let layout = WitnessLayout::of(&r1cs);
        let p = PackedWitness::synthesize(spec.circuit(Some(1)), &r1cs, &layout).unwrap();
        let mut aux = vec![Scalar::ZERO; layout.aux()];
        assert!(unpack_witness(&layout, &p.bit_values[..1], &p.non_bits, &mut aux).is_err());
        assert!(unpack_witness(&layout, &p.bit_values, &p.non_bits[1..], &mut aux).is_err());
        assert!(unpack_witness(&layout, &p.bit_values, &p.non_bits, &mut aux[1..]).is_err());
        assert!(expand(&r1cs, &layout, &p.input[1..], &p.bit_values, &p.non_bits).is_err());
        let other = WitnessLayout::of(
            &AnyCircuit::from("bits:71".parse::<CircuitSpec>().unwrap())
                .compile()
                .unwrap(),
        );
        assert!(expand(&r1cs, &other, &p.input, &p.bit_values, &p.non_bits).is_err());
        assert!(WitnessLayout::from_is_bit(1, 3, vec![0b1000]).is_err());
        assert!(WitnessLayout::from_is_bit(1, 3, vec![]).is_err());
        // A witness sink refuses the full synthesis: it takes no constraint.
        let (mut input, mut bits, mut non_bits) = (
            vec![Scalar::ZERO; layout.inputs()],
            vec![0; layout.bit_value_words()],
            vec![Scalar::ZERO; layout.non_bits()],
        );
        let parts = WitnessParts {
            input: &mut input,
            bit_values: &mut bits,
            non_bits: &mut non_bits,
        };
        let mut sink = WitnessSink::new(parts, &layout);
        for how in [Synthesis::Full, Synthesis::Compiled(&r1cs)] {
            let e = crate::synth::synthesize_with(spec.circuit(Some(1)), &mut sink, how)
                .err()
                .unwrap();
            assert!(e.to_string().contains("witness pass only"), "{e}");
        }
        // And a witness pass that does not fit is an error naming what overflowed.
        let e = PackedWitness::synthesize(
            "bits:71".parse::<CircuitSpec>().unwrap().circuit(Some(1)),
            &r1cs,
            &layout,
        )
        .unwrap_err();
        assert!(e.to_string().contains("witness full"), "{e}");
    }
}
