//! A circuit's size and the density bitmaps' names: what a synthesis counts and a slot must hold.

/// Which density bitmap a bit belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DensityKind {
    /// A over aux variables.
    AAux,
    /// B over input variables.
    BInput,
    /// B over aux variables.
    BAux,
}

/// The size of a synthesized circuit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CircuitShape {
    /// Inputs, including the leading `ONE`.
    pub inputs: usize,
    /// Aux variables.
    pub aux: usize,
    /// Constraints of the circuit itself, without the one-per-input constraints.
    pub constraints: usize,
}

impl CircuitShape {
    /// Length of the a/b/c evaluations: constraints plus one per input.
    pub fn n(&self) -> usize {
        self.constraints + self.inputs
    }

    /// Radix-2 evaluation domain size: the smallest power of two `>= n()`.
    pub fn domain_size(&self) -> usize {
        self.n().next_power_of_two()
    }

    /// log2 of [`Self::domain_size`].
    pub fn log_domain_size(&self) -> u32 {
        self.domain_size().trailing_zeros()
    }
}
