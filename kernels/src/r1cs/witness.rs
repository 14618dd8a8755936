//! The per-proof pass of a pre-compiled synthesis: [`WitnessCs`] computes the witness and only
//! counts the constraints, then [`R1cs::evaluate`] writes the three products
//! ([`synthesize_compiled`]).

use std::io;

use bellpepper_core::{
    Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable,
};
use blstrs::Scalar;
use ff::Field;

use super::R1cs;
use crate::types::{AssignmentSink, CircuitShape};
use crate::{Error, ErrorKind};

/// The witness-only constraint system of [`synthesize_compiled`]: `alloc` computes each value
/// and pushes it into the sink, `enforce` only counts (its closures are never called).
///
/// It counts the variables itself, so a sink that keeps no aux slice (the packing
/// [`crate::witness::WitnessSink`]) serves it as well as one that does.
pub struct WitnessCs<S: AssignmentSink> {
    sink: S,
    inputs: usize,
    aux: usize,
    constraints: usize,
    /// The first error the sink gave: `enforce` cannot return one.
    error: Option<SynthesisError>,
}

impl<S: AssignmentSink> WitnessCs<S> {
    /// Wraps a sink.
    pub fn new(sink: S) -> Self {
        WitnessCs {
            sink,
            inputs: 0,
            aux: 0,
            constraints: 0,
            error: None,
        }
    }

    fn allocate(
        &mut self,
        f: impl FnOnce() -> Result<Scalar, SynthesisError>,
        input: bool,
    ) -> Result<Variable, SynthesisError> {
        if self.error.is_some() {
            return Err(SynthesisError::IoError(io::Error::other(
                "assignment sink failed earlier in this synthesis",
            )));
        }
        let value = f()?;
        let pushed = if input {
            self.sink.push_input(value)
        } else {
            self.sink.push_aux(value)
        };
        if let Err(e) = pushed {
            self.error = Some(SynthesisError::IoError(io::Error::other(e.to_string())));
            return Err(e);
        }
        Ok(Variable(if input {
            self.inputs += 1;
            Index::Input(self.inputs - 1)
        } else {
            self.aux += 1;
            Index::Aux(self.aux - 1)
        }))
    }
}

impl<S: AssignmentSink> ConstraintSystem<Scalar> for WitnessCs<S> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.allocate(f, false)
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.allocate(f, true)
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.constraints += 1;
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }

    /// A witness generator in bellpepper's sense: gadgets may skip building the linear
    /// combinations only `enforce` would read (the vendored bellperson's SHA-256 does). They
    /// still enforce as often: the count is checked against the matrices.
    fn is_witness_generator(&self) -> bool {
        true
    }

    fn extend_inputs(&mut self, new_inputs: &[Scalar]) {
        for &v in new_inputs {
            if self.allocate(|| Ok(v), true).is_err() {
                return;
            }
        }
    }

    fn extend_aux(&mut self, new_aux: &[Scalar]) {
        for &v in new_aux {
            if self.allocate(|| Ok(v), false).is_err() {
                return;
            }
        }
    }

    fn allocate_empty(
        &mut self,
        _aux_n: usize,
        _inputs_n: usize,
    ) -> (&mut [Scalar], &mut [Scalar]) {
        unsupported("allocate_empty")
    }

    fn allocate_empty_inputs(&mut self, _n: usize) -> &mut [Scalar] {
        unsupported("allocate_empty_inputs")
    }

    fn allocate_empty_aux(&mut self, _n: usize) -> &mut [Scalar] {
        unsupported("allocate_empty_aux")
    }

    fn inputs_slice(&self) -> &[Scalar] {
        self.sink.inputs()
    }

    fn aux_slice(&self) -> &[Scalar] {
        self.sink.aux()
    }
}

/// Gadgets that fill uninitialised witness storage in place are not supported (no circuit
/// served uses one): a panic that the synthesis workers catch, failing that synthesis alone.
fn unsupported(what: &str) -> ! {
    panic!("the pre-compiled synthesis does not support `{what}` (a witness-generator gadget that fills storage in place); use the full synthesis for this circuit")
}

/// Synthesizes `circuit` into `sink` through its pre-compiled matrices: the witness pass, then
/// the three products written into the sink in parallel and the density bitmaps copied. The same
/// bytes as [`crate::synth::synthesize`] writes for the same witness.
pub fn synthesize_compiled<C: Circuit<Scalar>, S: AssignmentSink>(
    circuit: C,
    sink: S,
    r1cs: &R1cs,
) -> Result<S, Error> {
    if sink.witness_only() {
        return Err(SynthesisError::IoError(io::Error::other(
            "a witness-only sink takes the witness pass only (`Synthesis::Witness`), not the \
             products",
        ))
        .into());
    }
    let mut sink = synthesize_witness(circuit, sink, r1cs)?;
    let d = &r1cs.densities;
    let popcounts = [d[0].popcount, d[1].popcount, d[2].popcount].map(|p| p as u64);
    let out = sink.evaluations(r1cs.shape.n(), popcounts)?;
    r1cs.evaluate(out.input, out.aux, out.a, out.b, out.c)?;
    for (dst, src, what) in [
        (&mut *out.density_a_aux, &d[0], "A-aux density words"),
        (&mut *out.density_b_input, &d[1], "B-input density words"),
        (&mut *out.density_b_aux, &d[2], "B-aux density words"),
    ] {
        let dst = dst
            .get_mut(..src.words.len())
            .ok_or_else(|| Error::shape(what, src.words.len(), 0))?;
        dst.copy_from_slice(&src.words);
    }
    Ok(sink)
}

/// The witness pass of [`synthesize_compiled`] alone: `ONE`, then the circuit's values pushed
/// into `sink` (no evaluation, no density), checked against the shape of `r1cs`. What a
/// witness-only slot holds ([`crate::witness`]): the prover computes a, b and c from the same
/// matrices.
pub fn synthesize_witness<C: Circuit<Scalar>, S: AssignmentSink>(
    circuit: C,
    sink: S,
    r1cs: &R1cs,
) -> Result<S, Error> {
    let mut cs = WitnessCs::new(sink);
    let run = (|| {
        cs.alloc_input(|| "", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut cs)
    })();
    if let Some(e) = cs.error.take() {
        return Err(e.into());
    }
    run?;
    let found = CircuitShape {
        inputs: cs.inputs,
        aux: cs.aux,
        constraints: cs.constraints,
    };
    if found != r1cs.shape {
        return Err(ErrorKind::R1csMismatch {
            expected: r1cs.shape,
            found,
        }
        .into());
    }
    Ok(cs.sink)
}
