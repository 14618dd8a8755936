//! Where a synthesis writes: the sink contract every synthesis pass and every slot keeps.

use bellpepper_core::SynthesisError;
use blstrs::Scalar;

use super::shape::DensityKind;

/// Storage that a synthesis writes into: a ring slot, or plain `Vec`s ([`VecSink`]).
///
/// Contract (what [`ProvingCs`] relies on):
/// - `push_input` appends an input value and a cleared bit to the B-input density;
/// - `push_aux` appends an aux value and a cleared bit to both the A-aux and B-aux densities;
/// - `set_density` sets a bit that was appended before and counts it in the popcount once (a bit
///   that is already set stays set and is not counted again);
/// - `inputs()`/`aux()` return every value pushed so far, in order;
/// - `evaluations(n, popcounts)` (the pre-compiled path, [`crate::r1cs`]) sets the evaluations'
///   length to `n` and the densities' popcounts, and lends every array at once: the caller
///   overwrites all of `a`, `b`, `c` and the density words of the variables pushed so far;
/// - any method may refuse with an error (a full slot): synthesis then stops with that error.
///
/// A witness-only sink ([`crate::witness::WitnessSink`]) serves only the witness pass
/// ([`Synthesis::Witness`]): it refuses constraints, densities and evaluations, and keeps no aux
/// slice (`aux()` is empty; it packs the values as they come).
pub trait AssignmentSink: Send {
    /// Appends an input value.
    fn push_input(&mut self, value: Scalar) -> Result<(), SynthesisError>;
    /// Appends an aux value.
    fn push_aux(&mut self, value: Scalar) -> Result<(), SynthesisError>;
    /// Appends the evaluations of one constraint.
    fn push_constraint(&mut self, a: Scalar, b: Scalar, c: Scalar) -> Result<(), SynthesisError>;
    /// Marks variable `index` as used in the density `kind`.
    fn set_density(&mut self, kind: DensityKind, index: usize) -> Result<(), SynthesisError>;
    /// The inputs pushed so far.
    fn inputs(&self) -> &[Scalar];
    /// The aux values pushed so far.
    fn aux(&self) -> &[Scalar];
    /// Every array at once, for a bulk write of `n` evaluations whose densities count
    /// `popcounts` (A over aux, B over inputs, B over aux) set bits.
    fn evaluations(
        &mut self,
        n: usize,
        popcounts: [u64; 3],
    ) -> Result<Evaluations<'_>, SynthesisError>;
    /// Whether this sink takes the witness pass only (see above); `false` unless it says so.
    fn witness_only(&self) -> bool {
        false
    }
}

/// A sink's arrays lent for a bulk write ([`AssignmentSink::evaluations`]).
pub struct Evaluations<'a> {
    /// The inputs pushed.
    pub input: &'a [Scalar],
    /// The aux values pushed.
    pub aux: &'a [Scalar],
    /// A evaluations, `n` of them.
    pub a: &'a mut [Scalar],
    /// B evaluations.
    pub b: &'a mut [Scalar],
    /// C evaluations.
    pub c: &'a mut [Scalar],
    /// A-over-aux density words (at least one bit per aux value).
    pub density_a_aux: &'a mut [u64],
    /// B-over-inputs density words.
    pub density_b_input: &'a mut [u64],
    /// B-over-aux density words.
    pub density_b_aux: &'a mut [u64],
}

/// A borrowed sink is a sink: lets callers synthesize into `&mut dyn AssignmentSink` (the
/// Filecoin jobs are type-erased over their tree shape, so their sink is too).
impl<S: AssignmentSink + ?Sized> AssignmentSink for &mut S {
    fn push_input(&mut self, value: Scalar) -> Result<(), SynthesisError> {
        (**self).push_input(value)
    }
    fn push_aux(&mut self, value: Scalar) -> Result<(), SynthesisError> {
        (**self).push_aux(value)
    }
    fn push_constraint(&mut self, a: Scalar, b: Scalar, c: Scalar) -> Result<(), SynthesisError> {
        (**self).push_constraint(a, b, c)
    }
    fn set_density(&mut self, kind: DensityKind, index: usize) -> Result<(), SynthesisError> {
        (**self).set_density(kind, index)
    }
    fn inputs(&self) -> &[Scalar] {
        (**self).inputs()
    }
    fn aux(&self) -> &[Scalar] {
        (**self).aux()
    }
    fn evaluations(
        &mut self,
        n: usize,
        popcounts: [u64; 3],
    ) -> Result<Evaluations<'_>, SynthesisError> {
        (**self).evaluations(n, popcounts)
    }
    fn witness_only(&self) -> bool {
        (**self).witness_only()
    }
}
