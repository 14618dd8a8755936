//! The `Backend` concept: prove a batch of synthesized circuits that share one SRS.

use blstrs::{Bls12, Scalar};

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

/// A Groth16 prover bound to one SRS.
pub trait Backend: Send + Sync {
    /// Short name for logs and status (`cpu`, `cuda`).
    fn name(&self) -> &'static str;

    /// Proves every circuit of `batch` with its randomness `r[i]`, `s[i]`.
    ///
    /// Every circuit must have the shape the SRS was made for; a mismatch is an error, never a
    /// panic.
    fn prove_batch(
        &self,
        batch: &[Assignment<'_>],
        r: &[Scalar],
        s: &[Scalar],
    ) -> Result<Vec<Proof>, crate::Error>;
}
