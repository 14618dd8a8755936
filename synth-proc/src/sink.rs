//! [`SlotSink`]: the `AssignmentSink` that writes a synthesis straight into a WRITING slot.

use bellpepper_core::SynthesisError;
use blstrs::Scalar;
use kernels::synth::{AssignmentSink, DensityKind, Evaluations};
use shm_protocol::{SlotLengths, SlotPartsMut};

/// Appends a synthesis into the arrays of one slot; a full array is an error, never a write past
/// the capacity `begin` reserved.
pub struct SlotSink<'a> {
    parts: SlotPartsMut<'a>,
    n: usize,
    inputs: usize,
    aux: usize,
    popcounts: [u64; 3],
    witness_end_ns: Option<u64>,
}

impl<'a> SlotSink<'a> {
    /// A sink over freshly begun slot arrays (bitmaps zeroed).
    pub fn new(parts: SlotPartsMut<'a>) -> Self {
        SlotSink {
            parts,
            n: 0,
            inputs: 0,
            aux: 0,
            popcounts: [0; 3],
            witness_end_ns: None,
        }
    }

    /// When the witness pass ended and the products began (`CLOCK_MONOTONIC` ns): the moment
    /// the pre-compiled synthesis asked for the evaluations' arrays; `None` for a full synthesis.
    pub fn witness_end_ns(&self) -> Option<u64> {
        self.witness_end_ns
    }

    /// The lengths to publish.
    pub fn lengths(&self) -> SlotLengths {
        SlotLengths {
            n: self.n,
            inputs: self.inputs,
            aux: self.aux,
            a_aux_popcount: self.popcounts[0],
            b_input_popcount: self.popcounts[1],
            b_aux_popcount: self.popcounts[2],
        }
    }
}

fn full(what: &str, capacity: usize) -> SynthesisError {
    SynthesisError::IoError(std::io::Error::new(
        std::io::ErrorKind::OutOfMemory,
        format!(
            "slot full: more than {capacity} {what} (the circuit is larger than its shape said)"
        ),
    ))
}

impl AssignmentSink for SlotSink<'_> {
    fn push_input(&mut self, value: Scalar) -> Result<(), SynthesisError> {
        let cap = self.parts.input.len();
        *self
            .parts
            .input
            .get_mut(self.inputs)
            .ok_or_else(|| full("inputs", cap))? = value;
        self.inputs += 1;
        Ok(())
    }

    fn push_aux(&mut self, value: Scalar) -> Result<(), SynthesisError> {
        let cap = self.parts.aux.len();
        *self
            .parts
            .aux
            .get_mut(self.aux)
            .ok_or_else(|| full("aux variables", cap))? = value;
        self.aux += 1;
        Ok(())
    }

    fn push_constraint(&mut self, a: Scalar, b: Scalar, c: Scalar) -> Result<(), SynthesisError> {
        let i = self.n;
        let cap = self.parts.a.len();
        if i >= cap || i >= self.parts.b.len() || i >= self.parts.c.len() {
            return Err(full("constraints", cap));
        }
        self.parts.a[i] = a;
        self.parts.b[i] = b;
        self.parts.c[i] = c;
        self.n += 1;
        Ok(())
    }

    fn set_density(&mut self, kind: DensityKind, index: usize) -> Result<(), SynthesisError> {
        let (words, bits, k) = match kind {
            DensityKind::AAux => (&mut *self.parts.density_a_aux, self.aux, 0),
            DensityKind::BInput => (&mut *self.parts.density_b_input, self.inputs, 1),
            DensityKind::BAux => (&mut *self.parts.density_b_aux, self.aux, 2),
        };
        if index >= bits {
            return Err(SynthesisError::IoError(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "density bit {index} set before its variable was allocated ({bits} allocated)"
                ),
            )));
        }
        let (w, b) = (index / 64, index % 64);
        let word = words.get_mut(w).ok_or_else(|| full("density words", w))?;
        if *word >> b & 1 == 0 {
            *word |= 1 << b;
            self.popcounts[k] += 1;
        }
        Ok(())
    }

    fn inputs(&self) -> &[Scalar] {
        &self.parts.input[..self.inputs]
    }

    fn aux(&self) -> &[Scalar] {
        &self.parts.aux[..self.aux]
    }

    fn evaluations(
        &mut self,
        n: usize,
        popcounts: [u64; 3],
    ) -> Result<Evaluations<'_>, SynthesisError> {
        let cap = self
            .parts
            .a
            .len()
            .min(self.parts.b.len())
            .min(self.parts.c.len());
        if n > cap {
            return Err(full("constraints", cap));
        }
        self.n = n;
        self.popcounts = popcounts;
        self.witness_end_ns = Some(shm_protocol::control::monotonic_ns());
        let p = &mut self.parts;
        Ok(Evaluations {
            input: &p.input[..self.inputs],
            aux: &p.aux[..self.aux],
            a: &mut p.a[..n],
            b: &mut p.b[..n],
            c: &mut p.c[..n],
            density_a_aux: &mut *p.density_a_aux,
            density_b_input: &mut *p.density_b_input,
            density_b_aux: &mut *p.density_b_aux,
        })
    }
}
