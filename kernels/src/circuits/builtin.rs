//! Built-in circuits for tests and benches, named by a [`CircuitSpec`].
//!
//! | spec | circuit | public inputs |
//! |---|---|---|
//! | `sha-chain:N` | [`ShaChain`]: N chained `sha256_block_no_padding` blocks (38 → 2^20 domain) | the final digest, multipacked (2) |
//! | `pubinputs:K` | [`PubInputs`]: a MiMC-like cube chain exposing K intermediate values | K |
//! | `bits:N` | [`Bits`]: N witness bits, boolean-decomposed from 64-bit words (mostly 0/1 assignments) | 1 (the sum of the words) |
//! | `porep-like:K` | [`PorepLike`]: the shape of one 32 GiB-sector PoRep C2 partition divided by K (1: full size), its bits the only 0/1 assignments (25 %), the other values distinct | the partition's 327 divided by K (at least 1) |
//! | `porep-bits:K` | [`PorepLike`] with a real partition's share of 0/1 aux (90.8 %): the same shape, more of its aux copies of its bits | as `porep-like:K` |
//!
//! Witnesses derive deterministically from a `u64` seed (ChaCha20), and [`CircuitSpec::public_inputs`]
//! computes the public inputs natively, so a verifier can check a proof from the seed alone.

use std::fmt;
use std::str::FromStr;

use bellpepper_core::boolean::{AllocatedBit, Boolean};
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError, Variable};
use bellperson::gadgets::multipack;
use bellperson::gadgets::sha256::sha256_block_no_padding;
use blstrs::Scalar;
use ff::Field;
use rand_core::{RngCore, SeedableRng};

use crate::synth::{circuit_shape, synthesize};
use crate::types::{AssignmentSink, CircuitShape};
use crate::{Error, ErrorKind};

fn rng(seed: u64) -> rand_chacha::ChaCha20Rng {
    rand_chacha::ChaCha20Rng::seed_from_u64(seed)
}

/// A chain of SHA-256 compression blocks: block 0 hashes 512 witness bits; block `i + 1` hashes
/// `digest_i || digest_(i-1)` (with `digest_(-1)` the second half of the witness). The last
/// digest is the public input (multipacked into 2 field elements).
#[derive(Clone, Debug)]
pub struct ShaChain {
    /// Number of blocks (>= 1).
    pub blocks: usize,
    /// The witness seed; `None` for parameter generation.
    pub seed: Option<u64>,
}

impl ShaChain {
    fn witness_bytes(seed: u64) -> [u8; 64] {
        let mut b = [0u8; 64];
        rng(seed).fill_bytes(&mut b);
        b
    }

    /// The final digest, computed natively.
    pub fn digest(blocks: usize, seed: u64) -> [u8; 32] {
        let x0 = Self::witness_bytes(seed);
        let mut block = x0;
        let mut prev: [u8; 32] = x0[32..].try_into().unwrap_or([0; 32]);
        let mut digest = [0u8; 32];
        for _ in 0..blocks {
            let mut state = IV;
            sha2::compress256(&mut state, &[block.into()]);
            for (i, w) in state.iter().enumerate() {
                digest[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
            }
            block[..32].copy_from_slice(&digest);
            block[32..].copy_from_slice(&prev);
            prev = digest;
        }
        digest
    }
}

const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

impl Circuit<Scalar> for ShaChain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let bits = self
            .seed
            .map(|s| multipack::bytes_to_bits(&Self::witness_bytes(s)));
        let mut cur = (0..512)
            .map(|i| {
                let v = bits.as_ref().map(|b| b[i]);
                Ok(Boolean::from(AllocatedBit::alloc(
                    cs.namespace(|| format!("bit {i}")),
                    v,
                )?))
            })
            .collect::<Result<Vec<_>, SynthesisError>>()?;
        let mut prev = cur[256..].to_vec();
        let mut digest = Vec::new();
        for i in 0..self.blocks {
            digest = sha256_block_no_padding(cs.namespace(|| format!("block {i}")), &cur)?;
            cur = digest.iter().chain(prev.iter()).cloned().collect();
            prev = digest.clone();
        }
        multipack::pack_into_inputs(cs.namespace(|| "digest"), &digest)
    }
}

/// Rounds between two exposed values of [`PubInputs`].
pub const PUB_ROUNDS: usize = 16;

/// A MiMC-like chain `x <- (x + c_r)^3` over the field; after every [`PUB_ROUNDS`] rounds the
/// current `x` becomes a public input (K of them).
#[derive(Clone, Debug)]
pub struct PubInputs {
    /// Public outputs (>= 1).
    pub outputs: usize,
    /// The witness seed; `None` for parameter generation.
    pub seed: Option<u64>,
}

fn round_constant(i: usize) -> Scalar {
    Scalar::from((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

impl PubInputs {
    /// The public outputs, computed natively.
    pub fn outputs_for(outputs: usize, seed: u64) -> Vec<Scalar> {
        let mut x = Scalar::random(rng(seed));
        let mut out = Vec::with_capacity(outputs);
        for o in 0..outputs {
            for r in 0..PUB_ROUNDS {
                let t = x + round_constant(o * PUB_ROUNDS + r);
                x = t.square() * t;
            }
            out.push(x);
        }
        out
    }
}

impl Circuit<Scalar> for PubInputs {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut xv = self.seed.map(|s| Scalar::random(rng(s)));
        let mut x = cs.alloc(|| "x0", || xv.ok_or(SynthesisError::AssignmentMissing))?;
        for o in 0..self.outputs {
            for r in 0..PUB_ROUNDS {
                let c = round_constant(o * PUB_ROUNDS + r);
                let tv = xv.map(|v| v + c);
                let sq_v = tv.map(|t| t.square());
                let sq = cs.alloc(
                    || format!("sq {o} {r}"),
                    || sq_v.ok_or(SynthesisError::AssignmentMissing),
                )?;
                cs.enforce(
                    || format!("square {o} {r}"),
                    |lc| lc + x + (c, CS::one()),
                    |lc| lc + x + (c, CS::one()),
                    |lc| lc + sq,
                );
                xv = sq_v.zip(tv).map(|(s, t)| s * t);
                let next = cs.alloc(
                    || format!("cube {o} {r}"),
                    || xv.ok_or(SynthesisError::AssignmentMissing),
                )?;
                cs.enforce(
                    || format!("cube constraint {o} {r}"),
                    |lc| lc + sq,
                    |lc| lc + x + (c, CS::one()),
                    |lc| lc + next,
                );
                x = next;
            }
            let out = cs.alloc_input(
                || format!("out {o}"),
                || xv.ok_or(SynthesisError::AssignmentMissing),
            )?;
            cs.enforce(
                || format!("expose {o}"),
                |lc| lc + x,
                |lc| lc + CS::one(),
                |lc| lc + out,
            );
        }
        Ok(())
    }
}

/// `bits` witness bits in 64-bit words: each word is allocated, decomposed into boolean-constrained
/// bits and recomposed; the sum of the words is the one public input.
#[derive(Clone, Debug)]
pub struct Bits {
    /// Number of bits (>= 1).
    pub bits: usize,
    /// The witness seed; `None` for parameter generation.
    pub seed: Option<u64>,
}

impl Bits {
    fn words(bits: usize, seed: u64) -> Vec<u64> {
        let mut r = rng(seed);
        (0..bits.div_ceil(64))
            .map(|j| {
                let len = (bits - 64 * j).min(64);
                let v = r.next_u64();
                if len == 64 {
                    v
                } else {
                    v & ((1u64 << len) - 1)
                }
            })
            .collect()
    }

    /// The public input, computed natively.
    pub fn sum_for(bits: usize, seed: u64) -> Scalar {
        Self::words(bits, seed).into_iter().map(Scalar::from).sum()
    }
}

impl Circuit<Scalar> for Bits {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let words = self.seed.map(|s| Self::words(self.bits, s));
        let mut total = bellpepper_core::LinearCombination::zero();
        for j in 0..self.bits.div_ceil(64) {
            let len = (self.bits - 64 * j).min(64);
            let wv = words.as_ref().map(|w| w[j]);
            let num = cs.alloc(
                || format!("word {j}"),
                || {
                    wv.map(Scalar::from)
                        .ok_or(SynthesisError::AssignmentMissing)
                },
            )?;
            let mut lc = bellpepper_core::LinearCombination::zero();
            let mut coeff = Scalar::ONE;
            for i in 0..len {
                let b = AllocatedBit::alloc(
                    cs.namespace(|| format!("w{j} b{i}")),
                    wv.map(|w| w >> i & 1 == 1),
                )?;
                lc = lc + (coeff, b.get_variable());
                coeff = coeff.double();
            }
            cs.enforce(
                || format!("pack {j}"),
                |_| lc,
                |l| l + CS::one(),
                |l| l + num,
            );
            total = total + num;
        }
        let sum = words.map(|w| w.into_iter().map(Scalar::from).sum::<Scalar>());
        let input = cs.alloc_input(|| "sum", || sum.ok_or(SynthesisError::AssignmentMissing))?;
        cs.enforce(
            || "sum constraint",
            |_| total,
            |l| l + CS::one(),
            |l| l + input,
        );
        Ok(())
    }
}

/// The shape of a circuit in the terms the prover's cost follows: what [`PorepLike`] copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionShape {
    /// Constraints, without the one-per-input constraints.
    pub constraints: usize,
    /// Aux variables.
    pub aux: usize,
    /// Public inputs, without the leading `ONE`.
    pub inputs: usize,
    /// Aux variables that appear in B (the B-in-G1/G2 queries' aux part).
    pub b_aux: usize,
}

/// The share of a real 32 GiB-sector PoRep partition's aux variables that are 0/1, per mille:
/// 90.8 % by the witness analysis of `porep:StackedDrg32GiBV1_1` (`splitprover shape`,
/// benchmarks/2026-12-06-h100-feed/NOTES.md).
pub const POREP_32GIB_BIT_PERMILLE: usize = 908;

/// One partition of a 32 GiB-sector PoRep C2 (`porep:StackedDrg32GiBV1_1`), measured with
/// `splitprover shape porep:StackedDrg32GiBV1_1` (benchmarks/2026-12-02-dev/NOTES.md).
pub const POREP_32GIB_PARTITION: PartitionShape = PartitionShape {
    constraints: 130_278_541,
    aux: 130_169_893,
    inputs: 327,
    b_aux: 33_112_281,
};

/// A synthetic circuit with the shape of [`POREP_32GIB_PARTITION`] divided by `scale` (at
/// least one public input): as many constraints, aux variables and public inputs, and the same share of
/// aux in B, so the SRS, the slot and every MSM have a real partition's sizes, and its public
/// inputs are computed natively. Its bits (25 % of the aux) are its only 0/1 values: the other
/// aux values are distinct, random-looking field elements, so every MSM sees scalars spread as a
/// real witness's Poseidon values are (a real partition's SHA-256 bits make more of its values
/// 0 or 1, so this errs on the slow side).
/// Not a PoRep: its proofs are checked against its own verifying key.
///
/// With `real_bits` (`porep-bits:K`) the share of 0/1 aux is a real partition's instead
/// ([`POREP_32GIB_BIT_PERMILLE`]: SHA-256 makes most of it bits): after the bits come copies of
/// them, each `c * 1 = b_x` (in A, not in B), and the chain takes the aux left. Same shape, same
/// matrices' sizes; the MSMs see a real witness's mix of 0/1 and full scalars.
///
/// Built from: `b_aux` witness bits, each `b * b = b` (A, B and C use it); the other aux
/// variables a chain `m_j = b_x + c * m_{j-1}` (`m_{-1}` a bit) with `c` from a fixed table, each
/// `m_j * 1 = b_x + c * m_{j-1}` (in A, not in B); each public input the sum of a window of bits;
/// extra repeats of those constraints to reach the constraint count exactly.
///
/// The chain matters: with `m = b_x + c * b_y` (its first version) the non-0/1 values took only
/// 128 distinct values, and a Pippenger bucket accumulation, one thread per bucket, serialised
/// ~375,000 additions per bucket, many times a real witness's GPU time
/// (benchmarks/2026-12-02-h200/NOTES.md).
#[derive(Clone, Debug)]
pub struct PorepLike {
    /// The divisor (>= 1).
    pub scale: usize,
    /// The witness seed; `None` for parameter generation.
    pub seed: Option<u64>,
    /// A real partition's share of 0/1 aux (`porep-bits:K`) instead of only the B-side bits.
    pub real_bits: bool,
}

/// Coefficients of [`PorepLike`]'s mixed variables.
const MIX_COEFFS: usize = 64;

impl PorepLike {
    /// The shape for `scale`.
    pub fn shape_for(scale: usize) -> PartitionShape {
        let full = POREP_32GIB_PARTITION;
        let scale = scale.max(1);
        let b_aux = (full.b_aux / scale).max(1);
        let aux = (full.aux / scale).max(b_aux);
        let inputs = (full.inputs / scale).clamp(1, b_aux);
        // Every aux variable constrained (parameter generation refuses an unconstrained one).
        PartitionShape {
            constraints: (full.constraints / scale).max(aux + inputs),
            aux,
            inputs,
            b_aux,
        }
    }

    fn bits(shape: &PartitionShape, seed: u64) -> Vec<bool> {
        let mut r = rng(seed);
        let mut out = Vec::with_capacity(shape.b_aux);
        while out.len() < shape.b_aux {
            let w = r.next_u64();
            out.extend(
                (0..64)
                    .map(|i| w >> i & 1 == 1)
                    .take(shape.b_aux - out.len()),
            );
        }
        out
    }

    /// How many copies of bits follow the bits: with `real_bits`, enough for
    /// [`POREP_32GIB_BIT_PERMILLE`] of the aux to be 0/1.
    pub fn copies_for(shape: &PartitionShape, real_bits: bool) -> usize {
        if !real_bits {
            return 0;
        }
        (shape.aux * POREP_32GIB_BIT_PERMILLE / 1000)
            .saturating_sub(shape.b_aux)
            .min(shape.aux - shape.b_aux)
    }

    /// The bit copy `k` copies.
    fn copied(shape: &PartitionShape, k: usize) -> usize {
        (k.wrapping_mul(13) + 5) % shape.b_aux
    }

    fn window(shape: &PartitionShape, k: usize) -> std::ops::Range<usize> {
        let w = shape.b_aux / shape.inputs;
        k * w..(k + 1) * w
    }

    /// Mixed variable `j`'s bit `x`, the bit `y` that starts the chain (read by `j = 0` only)
    /// and its coefficient.
    fn mix(shape: &PartitionShape, j: usize) -> (usize, usize, Scalar) {
        let x = j % shape.b_aux;
        let y = (j.wrapping_mul(7) + 3) % shape.b_aux;
        (x, y, round_constant(1_000 + j % MIX_COEFFS))
    }

    /// The public inputs, computed natively.
    pub fn inputs_for(scale: usize, seed: u64) -> Vec<Scalar> {
        let shape = Self::shape_for(scale);
        let bits = Self::bits(&shape, seed);
        (0..shape.inputs)
            .map(|k| {
                Scalar::from(bits[Self::window(&shape, k)].iter().filter(|b| **b).count() as u64)
            })
            .collect()
    }
}

impl Circuit<Scalar> for PorepLike {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let shape = Self::shape_for(self.scale);
        let values = self.seed.map(|s| Self::bits(&shape, s));
        let value = |i: usize| values.as_ref().map(|v| v[i]);
        let scalar = |b: bool| if b { Scalar::ONE } else { Scalar::ZERO };
        let mut bits = Vec::with_capacity(shape.b_aux);
        for i in 0..shape.b_aux {
            let v = value(i);
            let b = cs.alloc(
                || format!("bit {i}"),
                || v.map(scalar).ok_or(SynthesisError::AssignmentMissing),
            )?;
            cs.enforce(
                || format!("boolean {i}"),
                |lc| lc + b,
                |lc| lc + b,
                |lc| lc + b,
            );
            bits.push(b);
        }
        // Constraints left for the copies, the mixed variables and the repeats, after the bits
        // and inputs.
        let mut left = shape.constraints - shape.b_aux - shape.inputs;
        let copies = Self::copies_for(&shape, self.real_bits);
        for k in 0..copies {
            let x = Self::copied(&shape, k);
            let v = value(x);
            let c = cs.alloc(
                || format!("copy {k}"),
                || v.map(scalar).ok_or(SynthesisError::AssignmentMissing),
            )?;
            // `shape_for` leaves a constraint for every aux variable: `left` >= `copies`
            cs.enforce(
                || format!("copy constraint {k}"),
                |lc| lc + c,
                |lc| lc + CS::one(),
                |lc| lc + bits[x],
            );
            left -= 1;
        }
        let mixed = shape.aux - shape.b_aux - copies;
        let mut mix: Vec<Variable> = Vec::with_capacity(mixed);
        // The chain's previous variable and value (`m_{-1}`: bit `y` of `j = 0`).
        let (_, y0, _) = Self::mix(&shape, 0);
        let mut prev_value = value(y0).map(scalar);
        for j in 0..mixed {
            let (x, _, c) = Self::mix(&shape, j);
            let prev = mix.last().copied().unwrap_or(bits[y0]);
            let v = value(x).zip(prev_value).map(|(x, p)| scalar(x) + c * p);
            let m = cs.alloc(
                || format!("mix {j}"),
                || v.ok_or(SynthesisError::AssignmentMissing),
            )?;
            // `shape_for` leaves a constraint for each; the check only keeps the count exact.
            if left > 0 {
                cs.enforce(
                    || format!("mix constraint {j}"),
                    |lc| lc + m,
                    |lc| lc + CS::one(),
                    |lc| lc + bits[x] + (c, prev),
                );
                left -= 1;
            }
            mix.push(m);
            prev_value = v;
        }
        for k in 0..shape.inputs {
            let window = Self::window(&shape, k);
            let v = values
                .as_ref()
                .map(|v| Scalar::from(v[window.clone()].iter().filter(|b| **b).count() as u64));
            let input = cs.alloc_input(
                || format!("input {k}"),
                || v.ok_or(SynthesisError::AssignmentMissing),
            )?;
            cs.enforce(
                || format!("window {k}"),
                |lc| window.clone().fold(lc, |lc, i| lc + bits[i]),
                |lc| lc + CS::one(),
                |lc| lc + input,
            );
        }
        let mut j = 0;
        while left > 0 {
            let i = j % mixed.max(1);
            let (x, y, c) = Self::mix(&shape, i);
            match mix.get(i) {
                Some(&m) => {
                    let prev = if i == 0 { bits[y] } else { mix[i - 1] };
                    cs.enforce(
                        || format!("repeat {j}"),
                        |lc| lc + m,
                        |lc| lc + CS::one(),
                        |lc| lc + bits[x] + (c, prev),
                    )
                }
                None => cs.enforce(
                    || format!("repeat {j}"),
                    |lc| lc + bits[x],
                    |lc| lc + bits[x],
                    |lc| lc + bits[x],
                ),
            }
            left -= 1;
            j += 1;
        }
        Ok(())
    }
}

/// A built-in circuit with its size knob, parsed from `sha-chain:N`, `pubinputs:K` or `bits:N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CircuitSpec {
    /// [`ShaChain`] with this many blocks.
    ShaChain {
        /// Blocks.
        blocks: usize,
    },
    /// [`PubInputs`] with this many public outputs.
    PubInputs {
        /// Public outputs.
        outputs: usize,
    },
    /// [`Bits`] with this many bits.
    Bits {
        /// Bits.
        bits: usize,
    },
    /// [`PorepLike`]: a 32 GiB-sector PoRep partition's shape divided by this.
    PorepLike {
        /// The divisor.
        scale: usize,
    },
    /// [`PorepLike`] with a real partition's share of 0/1 aux (`real_bits`).
    PorepBits {
        /// The divisor.
        scale: usize,
    },
}

/// Any built-in circuit, as one type (what [`CircuitSpec::circuit`] returns).
#[derive(Clone, Debug)]
pub enum SpecCircuit {
    /// See [`ShaChain`].
    ShaChain(ShaChain),
    /// See [`PubInputs`].
    PubInputs(PubInputs),
    /// See [`Bits`].
    Bits(Bits),
    /// See [`PorepLike`].
    PorepLike(PorepLike),
}

impl Circuit<Scalar> for SpecCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        match self {
            Self::ShaChain(c) => c.synthesize(cs),
            Self::PubInputs(c) => c.synthesize(cs),
            Self::Bits(c) => c.synthesize(cs),
            Self::PorepLike(c) => c.synthesize(cs),
        }
    }
}

impl CircuitSpec {
    /// The circuit, with the witness of `seed` (`None`: no witness, for parameter generation).
    pub fn circuit(&self, seed: Option<u64>) -> SpecCircuit {
        match *self {
            Self::ShaChain { blocks } => SpecCircuit::ShaChain(ShaChain { blocks, seed }),
            Self::PubInputs { outputs } => SpecCircuit::PubInputs(PubInputs { outputs, seed }),
            Self::Bits { bits } => SpecCircuit::Bits(Bits { bits, seed }),
            Self::PorepLike { scale } => SpecCircuit::PorepLike(PorepLike {
                scale,
                seed,
                real_bits: false,
            }),
            Self::PorepBits { scale } => SpecCircuit::PorepLike(PorepLike {
                scale,
                seed,
                real_bits: true,
            }),
        }
    }

    /// The shape the prover sees (counting pass; no witness is computed).
    pub fn shape(&self) -> Result<CircuitShape, Error> {
        circuit_shape(self.circuit(None))
    }

    /// The public inputs for `seed` (without the leading ONE), computed natively.
    pub fn public_inputs(&self, seed: u64) -> Result<Vec<Scalar>, Error> {
        Ok(match *self {
            Self::ShaChain { blocks } => {
                let bits = multipack::bytes_to_bits(&ShaChain::digest(blocks, seed));
                multipack::compute_multipacking(&bits)
            }
            Self::PubInputs { outputs } => PubInputs::outputs_for(outputs, seed),
            Self::Bits { bits } => vec![Bits::sum_for(bits, seed)],
            Self::PorepLike { scale } | Self::PorepBits { scale } => {
                PorepLike::inputs_for(scale, seed)
            }
        })
    }

    /// Synthesizes the circuit with the witness of `seed` into `sink` (bellperson's prover
    /// sequence, see [`crate::synth::synthesize`]).
    pub fn synthesize_into<S: AssignmentSink>(&self, seed: u64, sink: S) -> Result<S, Error> {
        synthesize(self.circuit(Some(seed)), sink)
    }

    /// A stable 64-bit id of this spec (FNV-1a of a versioned canonical string): the same on
    /// every build and host, used to match SRS images and files to circuits and ring slots.
    pub fn circuit_id(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in format!("splitprover-circuit-v1:{self}").bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    }
}

impl fmt::Display for CircuitSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ShaChain { blocks } => write!(f, "sha-chain:{blocks}"),
            Self::PubInputs { outputs } => write!(f, "pubinputs:{outputs}"),
            Self::Bits { bits } => write!(f, "bits:{bits}"),
            Self::PorepLike { scale } => write!(f, "porep-like:{scale}"),
            Self::PorepBits { scale } => write!(f, "porep-bits:{scale}"),
        }
    }
}

impl FromStr for CircuitSpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = |reason: String| -> Error {
            ErrorKind::InvalidSpec {
                spec: s.to_string(),
                reason,
            }
            .into()
        };
        let (kind, arg) = s.split_once(':').ok_or_else(|| {
            bad(
                "expected `KIND:N` with KIND one of `sha-chain`, `pubinputs`, `bits`, \
                 `porep-like`, `porep-bits`"
                    .into(),
            )
        })?;
        let n: usize = arg
            .trim()
            .parse()
            .map_err(|_| bad(format!("`{arg}` is not a non-negative integer")))?;
        let check = |max: usize| {
            if n == 0 || n > max {
                Err(bad(format!("{n} is out of range 1..={max}")))
            } else {
                Ok(n)
            }
        };
        match kind.trim() {
            "sha-chain" => Ok(Self::ShaChain {
                blocks: check(1 << 12)?,
            }),
            "pubinputs" => Ok(Self::PubInputs {
                outputs: check(1 << 16)?,
            }),
            "bits" => Ok(Self::Bits {
                bits: check(1 << 26)?,
            }),
            "porep-like" => Ok(Self::PorepLike {
                scale: check(1 << 20)?,
            }),
            "porep-bits" => Ok(Self::PorepBits {
                scale: check(1 << 20)?,
            }),
            other => Err(bad(format!(
                "unknown circuit `{other}` (expected `sha-chain`, `pubinputs`, `bits`, \
                 `porep-like` or `porep-bits`)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellpepper_core::test_cs::TestConstraintSystem;

    #[test]
    fn specs_parse_and_round_trip() {
        for s in ["sha-chain:38", "pubinputs:8", "bits:4096"] {
            let spec: CircuitSpec = s.parse().unwrap();
            assert_eq!(spec.to_string(), s);
        }
        for bad in [
            "",
            "sha-chain",
            "sha-chain:",
            "sha-chain:0",
            "sha-chain:-1",
            "nope:3",
            "bits:x",
            "bits:999999999999",
        ] {
            let err = bad.parse::<CircuitSpec>().unwrap_err();
            assert!(matches!(err.kind(), ErrorKind::InvalidSpec { .. }), "{bad}");
            assert!(err.to_string().contains("invalid circuit spec"), "{err}");
        }
        let a: CircuitSpec = "bits:64".parse().unwrap();
        let b: CircuitSpec = "bits:65".parse().unwrap();
        assert_ne!(a.circuit_id(), b.circuit_id());
        assert_eq!(
            a.circuit_id(),
            "bits:64".parse::<CircuitSpec>().unwrap().circuit_id()
        );
    }

    fn satisfied_with_inputs(spec: CircuitSpec, seed: u64) {
        let mut cs = TestConstraintSystem::<Scalar>::new();
        spec.circuit(Some(seed)).synthesize(&mut cs).unwrap();
        assert!(cs.is_satisfied(), "{spec}: {:?}", cs.which_is_unsatisfied());
        let inputs = spec.public_inputs(seed).unwrap();
        assert!(cs.verify(&inputs), "{spec}: public inputs differ");
        let shape = spec.shape().unwrap();
        assert_eq!(shape.inputs, inputs.len() + 1);
        assert_eq!(shape.constraints, cs.num_constraints());
    }

    #[test]
    fn circuits_are_satisfied_and_inputs_match() {
        satisfied_with_inputs("sha-chain:2".parse().unwrap(), 3);
        satisfied_with_inputs("pubinputs:3".parse().unwrap(), 4);
        satisfied_with_inputs("bits:100".parse().unwrap(), 5);
        // Fewer bits than inputs, no mixed variables, repeats: the small corners of the family.
        for scale in [1 << 20, 1 << 18, 65_536, 8_192] {
            satisfied_with_inputs(CircuitSpec::PorepLike { scale }, 6);
        }
    }

    #[test]
    fn porep_bits_has_the_same_shape_and_a_real_partitions_share_of_bits() {
        for scale in [1 << 20, 65_536, 8_192] {
            satisfied_with_inputs(CircuitSpec::PorepBits { scale }, 7);
        }
        let scale = 4_096;
        let spec: CircuitSpec = "porep-bits:4096".parse().unwrap();
        assert_eq!(spec, CircuitSpec::PorepBits { scale });
        assert_eq!(spec.to_string(), "porep-bits:4096");
        assert_ne!(
            spec.circuit_id(),
            CircuitSpec::PorepLike { scale }.circuit_id()
        );
        let want = PorepLike::shape_for(scale);
        let m = crate::r1cs::measure(spec.circuit(None)).unwrap();
        assert_eq!(
            (m.shape.constraints, m.shape.aux, m.shape.inputs, m.b_aux),
            (want.constraints, want.aux, want.inputs + 1, want.b_aux)
        );
        // the witness: 90.8 % of the aux 0/1, the rest distinct
        let asg = spec
            .synthesize_into(5, crate::synth::VecSink::new())
            .unwrap()
            .finish();
        let zero_one = asg
            .aux
            .iter()
            .filter(|v| **v == Scalar::ZERO || **v == Scalar::ONE)
            .count();
        let share = zero_one as f64 / asg.aux.len() as f64;
        assert!((0.905..0.915).contains(&share), "{share}");
        let bits = want.b_aux + PorepLike::copies_for(&want, true);
        let rest: std::collections::HashSet<[u8; 32]> = asg.aux[bits..]
            .iter()
            .map(ff::PrimeField::to_repr)
            .collect();
        assert!(rest.len() * 100 >= (asg.aux.len() - bits) * 99);
        assert_eq!(PorepLike::copies_for(&want, false), 0);
    }

    #[test]
    fn porep_likes_values_beyond_its_bits_are_distinct() {
        // A Pippenger bucket accumulation serialises every point of a repeated scalar: the
        // values an MSM sees must be spread, as a real witness's are.
        let spec = CircuitSpec::PorepLike { scale: 4_096 };
        let shape = PorepLike::shape_for(4_096);
        let asg = spec
            .synthesize_into(5, crate::synth::VecSink::new())
            .unwrap()
            .finish();
        let mixed = &asg.aux[shape.b_aux..];
        assert_eq!(mixed.len(), shape.aux - shape.b_aux);
        let distinct: std::collections::HashSet<[u8; 32]> =
            mixed.iter().map(ff::PrimeField::to_repr).collect();
        // (The chain may meet a value twice at its start, while it is still small.)
        assert!(
            distinct.len() * 1000 >= mixed.len() * 999,
            "{} distinct of {}",
            distinct.len(),
            mixed.len()
        );
        let bits = &asg.aux[..shape.b_aux];
        assert!(bits.iter().all(|b| *b == Scalar::ZERO || *b == Scalar::ONE));
    }

    #[test]
    fn porep_like_has_the_partition_shape_divided() {
        for scale in [4_096, 100_000] {
            let want = PorepLike::shape_for(scale);
            let spec = CircuitSpec::PorepLike { scale };
            let m = crate::r1cs::measure(spec.circuit(None)).unwrap();
            assert_eq!(m.shape.constraints, want.constraints, "{scale}");
            assert_eq!(m.shape.aux, want.aux, "{scale}");
            assert_eq!(m.shape.inputs, want.inputs + 1, "{scale}");
            assert_eq!(m.b_aux, want.b_aux, "{scale}");
            let full = POREP_32GIB_PARTITION;
            let ratio = |a: usize, b: usize| a as f64 / b as f64;
            assert!(
                (ratio(m.b_aux, m.shape.aux) - ratio(full.b_aux, full.aux)).abs() < 0.01,
                "{scale}: B density {}",
                ratio(m.b_aux, m.shape.aux)
            );
        }
        assert_eq!(PorepLike::shape_for(1), POREP_32GIB_PARTITION);
        assert_eq!(
            "porep-like:1024"
                .parse::<CircuitSpec>()
                .unwrap()
                .to_string(),
            "porep-like:1024"
        );
        assert!("porep-like:0".parse::<CircuitSpec>().is_err());
    }
}
