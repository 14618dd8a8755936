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
    let mut sink = synthesize_witness(circuit, sink, r1cs.shape)?;
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
/// into `sink` (no evaluation, no density), checked against `shape` (the circuit's matrices').
/// What a witness-only slot holds ([`crate::witness`]): the prover computes a, b and c from the
/// same matrices.
pub fn synthesize_witness<C: Circuit<Scalar>, S: AssignmentSink>(
    circuit: C,
    sink: S,
    shape: CircuitShape,
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
    if found != shape {
        return Err(ErrorKind::R1csMismatch {
            expected: shape,
            found,
        }
        .into());
    }
    Ok(cs.sink)
}

#[cfg(test)]
mod tests {
    use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
    use bellperson::gadgets::num::AllocatedNum;
    use bellperson::gadgets::sha256::{sha256_block_no_padding, sha256_compression_function};
    use bellperson::gadgets::uint32::UInt32;
    use neptune::circuit::poseidon_hash;
    use neptune::poseidon::PoseidonConstants;
    use neptune::{Arity, Poseidon};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use typenum::{U11, U2, U8};

    use super::*;
    use crate::synth::{circuit_shape, synthesize, VecSink};

    /// Chained SHA-256 compressions over blocks whose bits are each a constant or allocated
    /// (a share per block from none to all), from the IV or from an allocated state: the
    /// constant-folding paths of the gadgets, patched in vendor/bellperson (PATCHES.md). The
    /// digest's values must be native SHA-256's.
    #[derive(Clone)]
    struct Compressions {
        seed: u64,
    }

    impl Circuit<Scalar> for Compressions {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
            let mut native: [u32; 8] = [
                0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
                0x5be0cd19,
            ];
            let mut state: Option<Vec<UInt32>> = None;
            if rng.gen_bool(0.5) {
                native = rng.gen();
                let words = native
                    .iter()
                    .enumerate()
                    .map(|(i, &w)| UInt32::alloc(cs.namespace(|| format!("state {i}")), Some(w)))
                    .collect::<Result<Vec<_>, _>>()?;
                state = Some(words);
            }
            for (b, constant_share) in [0.0, 0.5, 0.9, 1.0].into_iter().enumerate() {
                let mut bytes = [0u8; 64];
                rng.fill(&mut bytes[..]);
                let mut bits = Vec::with_capacity(512);
                for (j, byte) in bytes.iter().enumerate() {
                    for k in 0..8 {
                        let v = byte >> (7 - k) & 1 == 1;
                        bits.push(if rng.gen_bool(constant_share) {
                            Boolean::constant(v)
                        } else {
                            let n = format!("block {b} bit {}", 8 * j + k);
                            Boolean::from(AllocatedBit::alloc(cs.namespace(|| n), Some(v))?)
                        });
                    }
                }
                sha2::compress256(&mut native, &[bytes.into()]);
                let out = match &state {
                    Some(words) => sha256_compression_function(
                        cs.namespace(|| format!("block {b}")),
                        &bits,
                        words,
                    )?,
                    None => sha256_block_no_padding(cs.namespace(|| format!("block {b}")), &bits)?
                        .chunks(32)
                        .map(UInt32::from_bits_be)
                        .collect(),
                };
                for (w, word) in out.iter().enumerate() {
                    let value = word.clone().into_bits_be().iter().fold(0u32, |acc, bit| {
                        acc << 1 | u32::from(bit.get_value().expect("a value"))
                    });
                    assert_eq!(value, native[w], "seed {} block {b} word {w}", self.seed);
                }
                state = Some(out);
            }
            Ok(())
        }
    }

    /// The full synthesis satisfies every constraint, and the witness pass gives its witness.
    fn assert_same_witness<C: Circuit<Scalar> + Clone>(circuit: C, seed: u64) {
        let full = synthesize(circuit.clone(), VecSink::new())
            .unwrap()
            .finish();
        for (i, ((a, b), c)) in full.a.iter().zip(&full.b).zip(&full.c).enumerate() {
            assert_eq!(*a * b, *c, "seed {seed}: constraint {i} is not satisfied");
        }
        let shape = circuit_shape(circuit.clone()).unwrap();
        let witness = synthesize_witness(circuit, VecSink::new(), shape)
            .unwrap()
            .finish();
        assert_eq!(witness.input, full.input, "seed {seed}");
        assert_eq!(witness.aux, full.aux, "seed {seed}");
    }

    #[test]
    fn sha256_gadgets_satisfy_their_constraints_and_the_witness_pass_equals_the_full_one() {
        for seed in 0..6 {
            assert_same_witness(Compressions { seed }, seed);
        }
    }

    /// Poseidon hashes of the arities Filecoin's trees and columns use, over allocated
    /// preimages: the values must be neptune's native hash's. The witness pass skips the MDS
    /// products' linear combinations (vendor/neptune/PATCHES.md), the full synthesis builds them.
    #[derive(Clone)]
    struct Poseidons {
        seed: u64,
    }

    fn poseidon_one<A: Arity<Scalar>, CS: ConstraintSystem<Scalar>>(
        cs: &mut CS,
        rng: &mut ChaCha8Rng,
        seed: u64,
    ) -> Result<(), SynthesisError> {
        let constants = PoseidonConstants::<Scalar, A>::new();
        let preimage: Vec<Scalar> = (0..A::to_usize())
            .map(|_| Scalar::random(&mut *rng))
            .collect();
        let nums = preimage
            .iter()
            .enumerate()
            .map(|(i, &v)| AllocatedNum::alloc(cs.namespace(|| format!("preimage {i}")), || Ok(v)))
            .collect::<Result<Vec<_>, _>>()?;
        let out = poseidon_hash(cs.namespace(|| "hash"), nums, &constants)?;
        let native = Poseidon::new_with_preimage(&preimage, &constants).hash();
        // (the counting pass calls no value's closure: it has none)
        if let Some(value) = out.get_value() {
            assert_eq!(value, native, "seed {seed} arity {}", A::to_usize());
        }
        Ok(())
    }

    impl Circuit<Scalar> for Poseidons {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
            poseidon_one::<U2, _>(&mut cs.namespace(|| "arity 2"), &mut rng, self.seed)?;
            poseidon_one::<U8, _>(&mut cs.namespace(|| "arity 8"), &mut rng, self.seed)?;
            poseidon_one::<U11, _>(&mut cs.namespace(|| "arity 11"), &mut rng, self.seed)
        }
    }

    #[test]
    fn poseidon_gadgets_satisfy_their_constraints_and_the_witness_pass_equals_the_full_one() {
        for seed in 0..3 {
            assert_same_witness(Poseidons { seed }, seed);
        }
    }

    /// bellman's and bellperson's own count for one compression of 512 allocated bits.
    #[test]
    fn one_compression_of_allocated_bits_has_upstreams_constraint_count() {
        struct Block;
        impl Circuit<Scalar> for Block {
            fn synthesize<CS: ConstraintSystem<Scalar>>(
                self,
                cs: &mut CS,
            ) -> Result<(), SynthesisError> {
                let bits = (0..512)
                    .map(|i| {
                        AllocatedBit::alloc(cs.namespace(|| format!("bit {i}")), Some(i % 3 == 0))
                            .map(Boolean::from)
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                sha256_block_no_padding(cs.namespace(|| "block"), &bits).map(drop)
            }
        }
        assert_eq!(circuit_shape(Block).unwrap().constraints, 512 + 25_840);
    }
}
