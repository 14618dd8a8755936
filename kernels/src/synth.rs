//! Synthesis into borrowed storage.
//!
//! [`ProvingCs`] is a `ConstraintSystem` that reproduces bellperson 0.27's private
//! `ProvingAssignment` value for value, but writes through an [`AssignmentSink`] instead of
//! owning `Vec`s, so synth-proc can synthesize straight into a ring slot. [`synthesize`] runs the
//! complete bellperson sequence:
//!
//! 1. allocate the input `ONE` first;
//! 2. run the circuit;
//! 3. add one constraint `input_i * 0 = 0` per input (including `ONE`), which gives the A query
//!    full density over inputs.
//!
//! `enforce` evaluates each linear combination as bellperson's `lc::eval_with_trackers` does: a
//! term with a zero coefficient is skipped and does not touch a density; A marks aux density only,
//! B marks input and aux densities, C marks none.
//!
//! [`ShapeCs`] is the counting pass: it never calls the witness closures, so it is cheap.

use bellpepper_core::{
    Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable,
};
use blstrs::Scalar;
use ff::{Field, PrimeField};

// The floor's synthesis types, where synthesis's users have always found them.
use crate::types::Assignment;
pub use crate::types::{AssignmentSink, CircuitShape, DensityBits, DensityKind, Evaluations};
use crate::Error;

fn out_of_range(what: &str, index: usize, len: usize) -> SynthesisError {
    SynthesisError::IoError(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("{what} index {index} out of range (len {len})"),
    ))
}

/// A complete assignment in plain `Vec`s, the result of synthesizing into a [`VecSink`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnedAssignment {
    /// A evaluations.
    pub a: Vec<Scalar>,
    /// B evaluations.
    pub b: Vec<Scalar>,
    /// C evaluations.
    pub c: Vec<Scalar>,
    /// Inputs, first is ONE.
    pub input: Vec<Scalar>,
    /// Aux values.
    pub aux: Vec<Scalar>,
    /// A over aux.
    pub a_aux_density: DensityBits,
    /// B over inputs.
    pub b_input_density: DensityBits,
    /// B over aux.
    pub b_aux_density: DensityBits,
}

impl OwnedAssignment {
    /// Borrows it as the prover input.
    pub fn as_assignment(&self) -> Assignment<'_> {
        Assignment {
            a: &self.a,
            b: &self.b,
            c: &self.c,
            input: &self.input,
            aux: &self.aux,
            a_aux_density: self.a_aux_density.as_density(),
            b_input_density: self.b_input_density.as_density(),
            b_aux_density: self.b_aux_density.as_density(),
        }
    }

    /// The shape of this assignment.
    pub fn shape(&self) -> CircuitShape {
        CircuitShape {
            inputs: self.input.len(),
            aux: self.aux.len(),
            constraints: self.a.len().saturating_sub(self.input.len()),
        }
    }
}

/// An [`AssignmentSink`] over plain `Vec`s, optionally bounded like a slot would be.
#[derive(Clone, Debug, Default)]
pub struct VecSink {
    data: OwnedAssignment,
    limit: Option<CircuitShape>,
}

impl VecSink {
    /// An unbounded sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// A sink that refuses more than `shape` holds (inputs, aux, and `shape.n()` constraints),
    /// as a fixed-size slot does; it reserves that much up front.
    pub fn with_limit(shape: CircuitShape) -> Self {
        let mut data = OwnedAssignment::default();
        data.a.reserve_exact(shape.n());
        data.b.reserve_exact(shape.n());
        data.c.reserve_exact(shape.n());
        data.input.reserve_exact(shape.inputs);
        data.aux.reserve_exact(shape.aux);
        Self {
            data,
            limit: Some(shape),
        }
    }

    /// The assignment written so far.
    pub fn finish(self) -> OwnedAssignment {
        self.data
    }
}

fn full(what: &str, limit: usize) -> SynthesisError {
    SynthesisError::IoError(std::io::Error::new(
        std::io::ErrorKind::OutOfMemory,
        format!("sink full: more than {limit} {what}"),
    ))
}

impl AssignmentSink for VecSink {
    fn push_input(&mut self, value: Scalar) -> Result<(), SynthesisError> {
        if let Some(l) = self.limit {
            if self.data.input.len() >= l.inputs {
                return Err(full("inputs", l.inputs));
            }
        }
        self.data.input.push(value);
        self.data.b_input_density.push();
        Ok(())
    }

    fn push_aux(&mut self, value: Scalar) -> Result<(), SynthesisError> {
        if let Some(l) = self.limit {
            if self.data.aux.len() >= l.aux {
                return Err(full("aux variables", l.aux));
            }
        }
        self.data.aux.push(value);
        self.data.a_aux_density.push();
        self.data.b_aux_density.push();
        Ok(())
    }

    fn push_constraint(&mut self, a: Scalar, b: Scalar, c: Scalar) -> Result<(), SynthesisError> {
        if let Some(l) = self.limit {
            if self.data.a.len() >= l.n() {
                return Err(full("constraints", l.n()));
            }
        }
        self.data.a.push(a);
        self.data.b.push(b);
        self.data.c.push(c);
        Ok(())
    }

    fn set_density(&mut self, kind: DensityKind, index: usize) -> Result<(), SynthesisError> {
        match kind {
            DensityKind::AAux => self.data.a_aux_density.set(index),
            DensityKind::BInput => self.data.b_input_density.set(index),
            DensityKind::BAux => self.data.b_aux_density.set(index),
        }
    }

    fn inputs(&self) -> &[Scalar] {
        &self.data.input
    }

    fn aux(&self) -> &[Scalar] {
        &self.data.aux
    }

    fn evaluations(
        &mut self,
        n: usize,
        popcounts: [u64; 3],
    ) -> Result<Evaluations<'_>, SynthesisError> {
        if let Some(l) = self.limit {
            if n > l.n() {
                return Err(full("constraints", l.n()));
            }
        }
        let d = &mut self.data;
        for v in [&mut d.a, &mut d.b, &mut d.c] {
            v.resize(n, Scalar::ZERO);
        }
        d.a_aux_density.popcount = popcounts[0] as usize;
        d.b_input_density.popcount = popcounts[1] as usize;
        d.b_aux_density.popcount = popcounts[2] as usize;
        Ok(Evaluations {
            input: &d.input,
            aux: &d.aux,
            a: &mut d.a,
            b: &mut d.b,
            c: &mut d.c,
            density_a_aux: &mut d.a_aux_density.words,
            density_b_input: &mut d.b_input_density.words,
            density_b_aux: &mut d.b_aux_density.words,
        })
    }
}

/// A `ConstraintSystem` writing into an [`AssignmentSink`] exactly what bellperson's
/// `ProvingAssignment` would hold.
///
/// `enforce` cannot return an error, so the first error (a full sink, a variable of another
/// constraint system) is kept and every later call fails fast; [`ProvingCs::finish`] reports it.
pub struct ProvingCs<S: AssignmentSink> {
    sink: S,
    error: Option<SynthesisError>,
    failed: bool,
}

impl<S: AssignmentSink> ProvingCs<S> {
    /// Wraps a sink. Nothing is allocated: call [`synthesize`] for the full sequence.
    pub fn new(sink: S) -> Self {
        Self {
            sink,
            error: None,
            failed: false,
        }
    }

    /// The sink, or the first error met while writing into it.
    pub fn finish(self) -> Result<S, SynthesisError> {
        match (self.error, self.failed) {
            (Some(e), _) => Err(e),
            (None, true) => Err(SynthesisError::IoError(std::io::Error::other(
                "assignment sink failed earlier in this synthesis",
            ))),
            (None, false) => Ok(self.sink),
        }
    }

    fn fail(&mut self, e: SynthesisError) {
        if !self.failed {
            self.failed = true;
            self.error = Some(e);
        }
    }

    fn pending(&mut self) -> SynthesisError {
        self.error.take().unwrap_or_else(|| {
            SynthesisError::IoError(std::io::Error::other(
                "assignment sink failed earlier in this synthesis",
            ))
        })
    }

    /// `lc::eval_with_trackers`: skips zero coefficients, marks densities for the others.
    fn eval(
        &mut self,
        lc: &LinearCombination<Scalar>,
        input_density: Option<DensityKind>,
        aux_density: Option<DensityKind>,
    ) -> Result<Scalar, SynthesisError> {
        let mut acc = Scalar::ZERO;
        for (&index, coeff) in lc.iter_inputs() {
            if coeff.is_zero_vartime() {
                continue;
            }
            let inputs = self.sink.inputs();
            let mut tmp = *inputs
                .get(index)
                .ok_or_else(|| out_of_range("input", index, inputs.len()))?;
            if *coeff != Scalar::ONE {
                tmp *= coeff;
            }
            acc += tmp;
            if let Some(kind) = input_density {
                self.sink.set_density(kind, index)?;
            }
        }
        for (&index, coeff) in lc.iter_aux() {
            if coeff.is_zero_vartime() {
                continue;
            }
            let aux = self.sink.aux();
            let mut tmp = *aux
                .get(index)
                .ok_or_else(|| out_of_range("aux", index, aux.len()))?;
            if *coeff != Scalar::ONE {
                tmp *= coeff;
            }
            acc += tmp;
            if let Some(kind) = aux_density {
                self.sink.set_density(kind, index)?;
            }
        }
        Ok(acc)
    }

    fn enforce_lcs(
        &mut self,
        a: &LinearCombination<Scalar>,
        b: &LinearCombination<Scalar>,
        c: &LinearCombination<Scalar>,
    ) -> Result<(), SynthesisError> {
        // Inputs have full density in the A query (the `x * 0 = 0` constraints).
        let a = self.eval(a, None, Some(DensityKind::AAux))?;
        let b = self.eval(b, Some(DensityKind::BInput), Some(DensityKind::BAux))?;
        // No C query: C is evaluated without densities.
        let c = self.eval(c, None, None)?;
        self.sink.push_constraint(a, b, c)
    }
}

impl<S: AssignmentSink> ProvingCs<S> {
    /// `alloc` and `alloc_input`: push the value into the sink; a refusal stops the synthesis.
    fn allocate(
        &mut self,
        f: impl FnOnce() -> Result<Scalar, SynthesisError>,
        input: bool,
    ) -> Result<Variable, SynthesisError> {
        if self.failed {
            return Err(self.pending());
        }
        let value = f()?;
        let pushed = if input {
            self.sink.push_input(value)
        } else {
            self.sink.push_aux(value)
        };
        if let Err(e) = pushed {
            self.failed = true;
            return Err(e);
        }
        Ok(Variable(if input {
            Index::Input(self.sink.inputs().len() - 1)
        } else {
            Index::Aux(self.sink.aux().len() - 1)
        }))
    }
}

impl<S: AssignmentSink> ConstraintSystem<Scalar> for ProvingCs<S> {
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

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        if self.failed {
            return;
        }
        let a = a(LinearCombination::zero());
        let b = b(LinearCombination::zero());
        let c = c(LinearCombination::zero());
        if let Err(e) = self.enforce_lcs(&a, &b, &c) {
            self.fail(e);
        }
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
}

/// Synthesizes `circuit` into `sink` with bellperson's complete prover sequence (`ONE` first,
/// then the circuit, then `input_i * 0 = 0` for every input) and returns the filled sink.
pub fn synthesize<C: Circuit<Scalar>, S: AssignmentSink>(circuit: C, sink: S) -> Result<S, Error> {
    if sink.witness_only() {
        return Err(SynthesisError::IoError(std::io::Error::other(
            "a witness-only sink takes the witness pass only (`Synthesis::Witness`), not a full \
             synthesis",
        ))
        .into());
    }
    let mut cs = ProvingCs::new(sink);
    let run = (|| {
        cs.alloc_input(|| "", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut cs)?;
        for i in 0..cs.sink.inputs().len() {
            cs.enforce(|| "", |lc| lc + Variable(Index::Input(i)), |lc| lc, |lc| lc);
        }
        Ok::<(), SynthesisError>(())
    })();
    match run {
        // An error kept by the sink is the cause; the circuit's error is its echo.
        Err(e) => Err(cs.error.take().unwrap_or(e).into()),
        Ok(()) => Ok(cs.finish()?),
    }
}

/// How a synthesis computes the a/b/c evaluations.
#[derive(Clone, Copy, Debug, Default)]
pub enum Synthesis<'a> {
    /// Every linear combination built and evaluated, as bellperson's prover does
    /// ([`synthesize`]).
    #[default]
    Full,
    /// The witness only, then the circuit's pre-compiled matrices
    /// ([`crate::r1cs::synthesize_compiled`]).
    Compiled(&'a crate::r1cs::R1cs),
    /// The witness only, checked against the circuit's shape (its matrices' or a counting
    /// pass's), and nothing else ([`crate::r1cs::synthesize_witness`]): for a witness-only sink
    /// ([`crate::witness::WitnessSink`]), whose prover computes a, b and c itself.
    Witness(CircuitShape),
}

/// [`synthesize`], [`crate::r1cs::synthesize_compiled`] or
/// [`crate::r1cs::synthesize_witness`], as `how` says: the first two write the same bytes.
pub fn synthesize_with<C: Circuit<Scalar>, S: AssignmentSink>(
    circuit: C,
    sink: S,
    how: Synthesis<'_>,
) -> Result<S, Error> {
    match how {
        Synthesis::Full => synthesize(circuit, sink),
        Synthesis::Compiled(r1cs) => crate::r1cs::synthesize_compiled(circuit, sink, r1cs),
        Synthesis::Witness(shape) => crate::r1cs::synthesize_witness(circuit, sink, shape),
    }
}

/// Synthesizes into a fresh [`VecSink`] and returns the owned assignment.
pub fn synthesize_owned<C: Circuit<Scalar>>(circuit: C) -> Result<OwnedAssignment, Error> {
    Ok(synthesize(circuit, VecSink::new())?.finish())
}

/// The counting pass: a `ConstraintSystem` that only counts (witness closures are not called).
#[derive(Clone, Debug, Default)]
pub struct ShapeCs {
    inputs: usize,
    aux: usize,
    constraints: usize,
}

impl ConstraintSystem<Scalar> for ShapeCs {
    type Root = Self;

    fn new() -> Self {
        Self::default()
    }

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux += 1;
        Ok(Variable(Index::Aux(self.aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs += 1;
        Ok(Variable(Index::Input(self.inputs - 1)))
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
}

/// Counts the shape of `circuit` as the prover will see it (`ONE` included).
pub fn circuit_shape<C: Circuit<Scalar>>(circuit: C) -> Result<CircuitShape, Error> {
    let mut cs = ShapeCs {
        inputs: 1,
        ..ShapeCs::default()
    };
    circuit.synthesize(&mut cs)?;
    let shape = CircuitShape {
        inputs: cs.inputs,
        aux: cs.aux,
        constraints: cs.constraints,
    };
    if shape.log_domain_size() >= Scalar::S {
        return Err(SynthesisError::PolynomialDegreeTooLarge.into());
    }
    Ok(shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// x * y = z with x, y private and z public; a zero-coefficient term and a repeated term.
    #[derive(Clone)]
    struct Mul;
    impl Circuit<Scalar> for Mul {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            let x = cs.alloc(|| "x", || Ok(Scalar::from(3u64)))?;
            let y = cs.alloc(|| "y", || Ok(Scalar::from(5u64)))?;
            let unused = cs.alloc(|| "u", || Ok(Scalar::from(7u64)))?;
            let z = cs.alloc_input(|| "z", || Ok(Scalar::from(15u64)))?;
            cs.enforce(
                || "mul",
                |lc| lc + x + (Scalar::ZERO, unused),
                |lc| lc + y,
                |lc| lc + z,
            );
            cs.enforce(
                || "u",
                |lc| lc + unused,
                |lc| lc + CS::one(),
                |lc| lc + unused,
            );
            Ok(())
        }
    }

    #[test]
    fn proving_cs_follows_bellperson_sequence() {
        let a = synthesize_owned(Mul).unwrap();
        assert_eq!(a.input, vec![Scalar::ONE, Scalar::from(15u64)]);
        assert_eq!(a.aux.len(), 3);
        // 2 circuit constraints + 2 input constraints
        assert_eq!(a.a.len(), 4);
        assert_eq!(a.a[0], Scalar::from(3u64));
        assert_eq!(a.b[0], Scalar::from(5u64));
        assert_eq!(a.c[0], Scalar::from(15u64));
        assert_eq!(a.a[2], Scalar::ONE);
        assert_eq!(a.a[3], Scalar::from(15u64));
        assert_eq!(a.b[3], Scalar::ZERO);
        // zero coefficient: `unused` not marked by constraint 0, but by constraint 1
        assert_eq!(a.a_aux_density.words, vec![0b101]);
        assert_eq!(a.a_aux_density.popcount, 2);
        assert_eq!(a.b_aux_density.words, vec![0b010]);
        assert_eq!(a.b_input_density.words, vec![0b01]);
        assert_eq!(a.b_input_density.popcount, 1);
        let shape = circuit_shape(Mul).unwrap();
        assert_eq!(shape, a.shape());
        assert_eq!(shape.n(), 4);
        assert_eq!(shape.domain_size(), 4);
    }

    #[test]
    fn full_sink_is_an_error() {
        let shape = circuit_shape(Mul).unwrap();
        for small in [
            CircuitShape { aux: 2, ..shape },
            CircuitShape { inputs: 1, ..shape },
            CircuitShape {
                constraints: 1,
                ..shape
            },
        ] {
            let err = synthesize(Mul, VecSink::with_limit(small)).unwrap_err();
            assert!(err.to_string().contains("sink full"), "{err}");
        }
        assert!(synthesize(Mul, VecSink::with_limit(shape)).is_ok());
    }

    #[test]
    fn foreign_variable_is_an_error() {
        struct Foreign;
        impl Circuit<Scalar> for Foreign {
            fn synthesize<CS: ConstraintSystem<Scalar>>(
                self,
                cs: &mut CS,
            ) -> Result<(), SynthesisError> {
                let v = Variable(Index::Aux(99));
                cs.enforce(|| "bad", |lc| lc + v, |lc| lc, |lc| lc);
                Ok(())
            }
        }
        let err = synthesize_owned(Foreign).unwrap_err();
        assert!(err.to_string().contains("out of range"), "{err}");
    }
}
