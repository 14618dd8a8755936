//! Fast random Groth16 parameters (an SRS for tests and benches; never for production).
//!
//! Same mathematics and the same randomness as bellperson's `generate_random_parameters`: with
//! the same RNG state the output is identical, point for point. What makes it faster:
//! - the QAP is evaluated at tau during synthesis (Lagrange coefficients from one inverse NTT
//!   of the powers of tau, as bellperson does), instead of building per-variable term lists;
//! - fixed-base multiplications use a signed-digit comb table (no doublings at all: about
//!   `256 / w` mixed additions per point, `w` up to 12) instead of wNAF (255 doublings each);
//! - projective results are normalised with one batch inversion per chunk (blst), where
//!   bellperson's `batch_normalize` falls back to one inversion per point.
//!
//! - with [`GenDevice::Gpu`] (feature `cuda`) the fixed-base multiplications run on the GPU
//!   (module `gpu`): the same comb table, one thread per scalar, the same affine points.
//!
//! Progress is reported through a callback (no terminal code here).

use std::sync::atomic::{AtomicU64, Ordering};

use bellpepper_core::{
    Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable,
};
use bellperson::groth16::{Parameters, VerifyingKey};
use blstrs::{Bls12, G1Projective, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use rand_core::{RngCore, SeedableRng};
use rayon::prelude::*;

use crate::ntt::{intt, powers, Domain};
use crate::synth::circuit_shape;
use crate::Error;

/// A phase of parameter generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GenPhase {
    /// Counting the circuit and evaluating its QAP at tau.
    Synthesis,
    /// Building fixed-base tables.
    Tables,
    /// Fixed-base multiplications (H, IC, L, A, B in G1 and G2).
    Exponentiations,
    /// Done.
    Done,
}

/// A progress report: `done` of `total` units of `phase`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenProgress {
    /// Current phase.
    pub phase: GenPhase,
    /// Units done.
    pub done: u64,
    /// Units in the phase.
    pub total: u64,
}

/// Where the fixed-base multiplications run. The toxic waste, the QAP evaluation and the comb
/// tables are computed on the host either way, so both give the same parameters for the same
/// RNG state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GenDevice {
    /// Host threads (rayon).
    #[default]
    Cpu,
    /// The current CUDA device (feature `cuda`; an error without it or without a GPU).
    Gpu,
}

impl std::str::FromStr for GenDevice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cpu" => Ok(Self::Cpu),
            "gpu" => Ok(Self::Gpu),
            other => Err(format!("unknown device `{other}`: use cpu or gpu")),
        }
    }
}

#[cfg(feature = "cuda")]
mod gpu;

#[cfg(not(feature = "cuda"))]
fn no_cuda() -> Error {
    crate::ErrorKind::Cuda(
        "generating parameters on the GPU needs a build with the `cuda` feature".into(),
    )
    .into()
}

pub use crate::fixed_base::limbs;
use crate::fixed_base::{g1_mul_all, g1_table, g2_mul_all, g2_table, window_for};

/// Evaluates the QAP polynomials of every variable at tau while the circuit synthesizes.
struct EvalCs<'l> {
    lagrange: &'l [Scalar],
    constraints: usize,
    /// (at, bt, ct) per input and per aux variable.
    inputs: Vec<[Scalar; 3]>,
    aux: Vec<[Scalar; 3]>,
    error: Option<SynthesisError>,
}

impl EvalCs<'_> {
    fn add(&mut self, lc: &LinearCombination<Scalar>, which: usize, l: Scalar) {
        for (var, coeff) in lc.iter() {
            let slot = match var.get_unchecked() {
                Index::Input(i) => self.inputs.get_mut(i),
                Index::Aux(i) => self.aux.get_mut(i),
            };
            match slot {
                Some(s) => s[which] += *coeff * l,
                None => {
                    self.error
                        .get_or_insert(SynthesisError::IoError(std::io::Error::new(
                            std::io::ErrorKind::InvalidInput,
                            "variable index out of range",
                        )));
                }
            }
        }
    }
}

impl ConstraintSystem<Scalar> for EvalCs<'_> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push([Scalar::ZERO; 3]);
        Ok(Variable(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs.push([Scalar::ZERO; 3]);
        Ok(Variable(Index::Input(self.inputs.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let Some(&l) = self.lagrange.get(self.constraints) else {
            self.error
                .get_or_insert(SynthesisError::IoError(std::io::Error::other(
                    "circuit made more constraints than in its counting pass",
                )));
            return;
        };
        self.add(&a(LinearCombination::zero()), 0, l);
        self.add(&b(LinearCombination::zero()), 1, l);
        self.add(&c(LinearCombination::zero()), 2, l);
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

/// Random parameters for `circuit`, drawing the toxic waste from `rng` in bellperson's order
/// (g1, g2, alpha, beta, gamma, delta, tau): for the same RNG state the result equals
/// `bellperson::groth16::generate_random_parameters`.
///
/// The circuit is synthesized twice (count, then evaluate), hence `Clone`. `progress` is called
/// from worker threads (hence `Sync`), often: keep it cheap (the CLI throttles its rendering).
pub fn generate_parameters<C, R>(
    circuit: C,
    rng: &mut R,
    progress: &(dyn Fn(GenProgress) + Sync),
) -> Result<Parameters<Bls12>, Error>
where
    C: Circuit<Scalar> + Clone,
    R: RngCore,
{
    generate_parameters_on(circuit, rng, GenDevice::Cpu, progress)
}

/// [`generate_parameters`] with the multiplications on `device`: the same result.
pub fn generate_parameters_on<C, R>(
    circuit: C,
    rng: &mut R,
    device: GenDevice,
    progress: &(dyn Fn(GenProgress) + Sync),
) -> Result<Parameters<Bls12>, Error>
where
    C: Circuit<Scalar> + Clone,
    R: RngCore,
{
    let g1 = G1Projective::random(&mut *rng);
    let g2 = G2Projective::random(&mut *rng);
    let alpha = Scalar::random(&mut *rng);
    let beta = Scalar::random(&mut *rng);
    let gamma = Scalar::random(&mut *rng);
    let delta = Scalar::random(&mut *rng);
    let tau = Scalar::random(&mut *rng);
    generate_with_trapdoor_on(
        circuit,
        Trapdoor {
            g1,
            g2,
            alpha,
            beta,
            gamma,
            delta,
            tau,
        },
        device,
        progress,
    )
}

/// [`generate_parameters`] with a ChaCha20 RNG seeded from `seed`: reproducible.
pub fn generate_parameters_seeded<C: Circuit<Scalar> + Clone>(
    circuit: C,
    seed: u64,
    progress: &(dyn Fn(GenProgress) + Sync),
) -> Result<Parameters<Bls12>, Error> {
    generate_parameters_seeded_on(circuit, seed, GenDevice::Cpu, progress)
}

/// [`generate_parameters_seeded`] with the multiplications on `device`: the same result.
pub fn generate_parameters_seeded_on<C: Circuit<Scalar> + Clone>(
    circuit: C,
    seed: u64,
    device: GenDevice,
    progress: &(dyn Fn(GenProgress) + Sync),
) -> Result<Parameters<Bls12>, Error> {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    generate_parameters_on(circuit, &mut rng, device, progress)
}

/// The toxic waste.
#[derive(Clone, Copy, Debug)]
pub struct Trapdoor {
    /// G1 generator used.
    pub g1: G1Projective,
    /// G2 generator used.
    pub g2: G2Projective,
    /// alpha.
    pub alpha: Scalar,
    /// beta.
    pub beta: Scalar,
    /// gamma.
    pub gamma: Scalar,
    /// delta.
    pub delta: Scalar,
    /// tau.
    pub tau: Scalar,
}

/// Parameters for a given trapdoor (bellperson's `generate_parameters`).
pub fn generate_with_trapdoor<C: Circuit<Scalar> + Clone>(
    circuit: C,
    t: Trapdoor,
    progress: &(dyn Fn(GenProgress) + Sync),
) -> Result<Parameters<Bls12>, Error> {
    generate_with_trapdoor_on(circuit, t, GenDevice::Cpu, progress)
}

/// [`generate_with_trapdoor`] with the multiplications on `device`: the same result.
pub fn generate_with_trapdoor_on<C: Circuit<Scalar> + Clone>(
    circuit: C,
    t: Trapdoor,
    device: GenDevice,
    progress: &(dyn Fn(GenProgress) + Sync),
) -> Result<Parameters<Bls12>, Error> {
    // Refused before the (long) synthesis, not after it.
    #[cfg(not(feature = "cuda"))]
    if device == GenDevice::Gpu {
        return Err(no_cuda());
    }
    let shape = circuit_shape(circuit.clone())?;
    let n = shape.n();
    progress(GenProgress {
        phase: GenPhase::Synthesis,
        done: 0,
        total: n as u64,
    });
    let d = Domain::for_len(n)?;
    let gamma_inv: Scalar =
        Option::from(t.gamma.invert()).ok_or(SynthesisError::UnexpectedIdentity)?;
    let delta_inv: Scalar =
        Option::from(t.delta.invert()).ok_or(SynthesisError::UnexpectedIdentity)?;

    // Powers of tau; H scalars tau^i z(tau) / delta; Lagrange coefficients by an inverse NTT.
    let pows = powers(t.tau, Scalar::ONE, d.m);
    let coeff = d.z(&t.tau) * delta_inv;
    if bool::from(coeff.is_zero()) {
        return Err(SynthesisError::UnexpectedIdentity.into());
    }
    let h_sc: Vec<Scalar> = pows[..d.m - 1].par_iter().map(|p| *p * coeff).collect();
    let mut lagrange = pows;
    intt(&mut lagrange, &d);

    let mut cs = EvalCs {
        lagrange: &lagrange,
        constraints: 0,
        inputs: Vec::with_capacity(shape.inputs),
        aux: Vec::with_capacity(shape.aux),
        error: None,
    };
    cs.alloc_input(|| "", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    for i in 0..cs.inputs.len() {
        cs.enforce(|| "", |lc| lc + Variable(Index::Input(i)), |lc| lc, |lc| lc);
    }
    if let Some(e) = cs.error.take() {
        return Err(e.into());
    }
    if cs.constraints != n || cs.inputs.len() != shape.inputs || cs.aux.len() != shape.aux {
        return Err(Error::shape(
            "constraints in the second synthesis",
            n,
            cs.constraints,
        ));
    }
    progress(GenProgress {
        phase: GenPhase::Synthesis,
        done: n as u64,
        total: n as u64,
    });
    let EvalCs { inputs, aux, .. } = cs;
    drop(lagrange);

    // Scalars of every query.
    let ext = |v: &[[Scalar; 3]], inv: Scalar| -> Vec<Scalar> {
        v.par_iter()
            .map(|[at, bt, ct]| (*at * t.beta + *bt * t.alpha + ct) * inv)
            .collect()
    };
    let ic_sc = ext(&inputs, gamma_inv);
    let l_sc = ext(&aux, delta_inv);
    if l_sc.par_iter().any(|e| bool::from(e.is_zero())) {
        return Err(SynthesisError::UnconstrainedVariable.into());
    }
    let nonzero = |which: usize| -> Vec<Scalar> {
        inputs
            .par_iter()
            .chain(aux.par_iter())
            .map(|v| v[which])
            .filter(|s| !bool::from(s.is_zero()))
            .collect()
    };
    let a_sc = nonzero(0);
    let b_sc = nonzero(1);
    drop((inputs, aux));

    let g1_count = h_sc.len() + ic_sc.len() + l_sc.len() + a_sc.len() + b_sc.len();
    // A G2 multiplication costs about three G1 ones.
    let total = (g1_count + 3 * b_sc.len()) as u64;
    progress(GenProgress {
        phase: GenPhase::Tables,
        done: 0,
        total: 2,
    });
    let (t1, t2) = rayon::join(
        || g1_table(t.g1, window_for(g1_count)),
        || g2_table(t.g2, window_for(b_sc.len())),
    );
    progress(GenProgress {
        phase: GenPhase::Tables,
        done: 2,
        total: 2,
    });

    let done = AtomicU64::new(0);
    let tick = |units: u64| {
        // Relaxed: a progress counter, nothing is ordered by it.
        let d = done.fetch_add(units, Ordering::Relaxed) + units;
        progress(GenProgress {
            phase: GenPhase::Exponentiations,
            done: d,
            total,
        });
    };
    let tick3 = |units: u64| tick(3 * units);
    let (h, ic, l, a, b_g1, b_g2) = match device {
        GenDevice::Cpu => (
            g1_mul_all(&t1, &h_sc, &tick),
            g1_mul_all(&t1, &ic_sc, &tick),
            g1_mul_all(&t1, &l_sc, &tick),
            g1_mul_all(&t1, &a_sc, &tick),
            g1_mul_all(&t1, &b_sc, &tick),
            g2_mul_all(&t2, &b_sc, &tick3),
        ),
        #[cfg(feature = "cuda")]
        GenDevice::Gpu => {
            let g1 = |sc: &[Scalar]| {
                let v = gpu::g1_mul_all(&t1, sc)?;
                tick(sc.len() as u64);
                Ok::<_, Error>(v)
            };
            let g2 = gpu::g2_mul_all(&t2, &b_sc)?;
            tick3(b_sc.len() as u64);
            (
                g1(&h_sc)?,
                g1(&ic_sc)?,
                g1(&l_sc)?,
                g1(&a_sc)?,
                g1(&b_sc)?,
                g2,
            )
        }
        #[cfg(not(feature = "cuda"))]
        GenDevice::Gpu => return Err(no_cuda()),
    };

    let g1 = t.g1.to_affine();
    let g2 = t.g2.to_affine();
    let vk = VerifyingKey::<Bls12> {
        alpha_g1: (g1 * t.alpha).to_affine(),
        beta_g1: (g1 * t.beta).to_affine(),
        beta_g2: (g2 * t.beta).to_affine(),
        gamma_g2: (g2 * t.gamma).to_affine(),
        delta_g1: (g1 * t.delta).to_affine(),
        delta_g2: (g2 * t.delta).to_affine(),
        ic,
    };
    progress(GenProgress {
        phase: GenPhase::Done,
        done: total,
        total,
    });
    tracing::info!(
        n,
        domain = d.m,
        g1 = g1_count,
        g2 = b_sc.len(),
        "generated random parameters"
    );
    Ok(Parameters {
        vk,
        h: h.into(),
        l: l.into(),
        a: a.into(),
        b_g1: b_g1.into(),
        b_g2: b_g2.into(),
    })
}
