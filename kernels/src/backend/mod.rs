//! The `Backend` concept: prove a batch of synthesized circuits that share one SRS.
//!
//! Implementations: [`cpu::CpuBackend`] (the reference, bit-exact with bellperson's CPU prover)
//! and, with the `cuda` feature, the supraseal-c2 backend in `cuda`.

pub mod blind;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;

#[cfg(feature = "cuda")]
pub mod gpu;
#[cfg(feature = "cuda")]
pub mod plan;

/// What a backend planned in device memory ([`Backend::device_memory`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceMemory {
    /// SRS bytes resident (the `gpu` backend's uploaded queries).
    pub srs_bytes: u64,
    /// Bytes its plan allocates, with the matrices of witness-only proofs once resident.
    pub planned_bytes: u64,
    /// The budget it planned within (`[[gpu]] memory_budget`, or what the device had free).
    pub budget_bytes: u64,
    /// Bytes its plan does not keep resident: SRS points copied from the page-locked host image
    /// in chunks for every proof (the `gpu` backend under a budget smaller than the SRS), and
    /// where they stream too the matrices' rows of a witness-only proof.
    pub streamed_bytes: u64,
    /// Bytes copied from host memory so far, every proof's chunks summed.
    pub streamed_total_bytes: u64,
}

/// A witness-only circuit's matrices in the `gpu` backend's device memory (its plan's share of
/// the budget, `gpu::matrices_device_bytes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatricesBytes {
    /// What stays on the device in any plan: the coefficient table, the witness layout's bitmap
    /// and rank table, the density words.
    pub fixed: u64,
    /// A's, B's and C's CSR offsets and terms: on the device, or (a budget they do not fit)
    /// copied from host memory for every proof through the SRS staging buffers.
    pub rows: u64,
}

impl MatricesBytes {
    /// Device bytes with the rows resident or streamed.
    pub fn device(&self, rows_streamed: bool) -> u64 {
        self.fixed + if rows_streamed { 0 } else { self.rows }
    }
}

/// Several circuits' matrices planned beside one SRS.
impl std::iter::Sum for MatricesBytes {
    fn sum<I: Iterator<Item = MatricesBytes>>(iter: I) -> MatricesBytes {
        iter.fold(MatricesBytes::default(), |a, b| MatricesBytes {
            fixed: a.fixed + b.fixed,
            rows: a.rows + b.rows,
        })
    }
}

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use group::Curve;

pub use cpu::Components;

use crate::srs::SrsView;
// The floor's assignment types, where a backend's users have always found them.
pub use crate::types::{Assignment, Density, Proof, WitnessAssignment};
use crate::Error;

/// The verifying-key points that blind a proof: what turns the five unblinded sums
/// ([`Components`]) into a proof for given `r` and `s`, in bellperson's order of terms (the affine
/// result is unique, so every backend that gets the sums right gives the same bytes).
#[derive(Clone, Copy, Debug)]
pub struct BlindingKey {
    alpha_g1: G1Affine,
    beta_g1: G1Affine,
    delta_g1: G1Affine,
    beta_g2: G2Affine,
    delta_g2: G2Affine,
}

impl BlindingKey {
    /// The points of `srs`'s verifying key.
    pub fn of(srs: &SrsView<'_>) -> Self {
        BlindingKey {
            alpha_g1: srs.alpha_g1(),
            beta_g1: srs.beta_g1(),
            delta_g1: srs.delta_g1(),
            beta_g2: srs.beta_g2(),
            delta_g2: srs.delta_g2(),
        }
    }

    /// `A = alpha + a + r delta`, `B = beta + b_g2 + s delta`,
    /// `C = s a + r b_g1 + r s delta + s alpha + r beta + h + l`.
    pub fn proof(&self, c: &Components, r: Scalar, s: Scalar) -> Proof {
        let delta_g1 = G1Projective::from(self.delta_g1);
        let g_a = delta_g1 * r + self.alpha_g1 + c.a;
        let g_b = G2Projective::from(self.delta_g2) * s + self.beta_g2 + c.b_g2;
        let g_c = c.a * s
            + c.b_g1 * r
            + delta_g1 * (r * s)
            + G1Projective::from(self.alpha_g1) * s
            + G1Projective::from(self.beta_g1) * r
            + c.h
            + c.l;
        Proof {
            a: g_a.to_affine(),
            b: g_b.to_affine(),
            c: g_c.to_affine(),
        }
    }
}

/// Checks that a batch has one `r` and one `s` per circuit (every backend's first check).
pub fn check_randomness(batch: &[Assignment<'_>], r: &[Scalar], s: &[Scalar]) -> Result<(), Error> {
    if r.len() != batch.len() {
        return Err(Error::shape(
            "randomness `r` values (one per circuit)",
            batch.len(),
            r.len(),
        ));
    }
    if s.len() != batch.len() {
        return Err(Error::shape(
            "randomness `s` values (one per circuit)",
            batch.len(),
            s.len(),
        ));
    }
    Ok(())
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

    /// What this backend holds and planned in device memory, for status; zeros for backends
    /// that keep nothing there (the CPU one, supraseal-c2, which streams its points on every
    /// call).
    fn device_memory(&self) -> DeviceMemory {
        DeviceMemory::default()
    }

    /// Proves witness-only assignments (issue 31) of `matrices`' circuit with its randomness
    /// `r[i]`, `s[i]`, computing the full assignment where this backend proves (the `gpu`
    /// backend: on the device). `None`: this backend takes full assignments only, and the
    /// caller expands each witness on the host ([`crate::witness::expand`]) and calls
    /// [`Backend::prove_batch`]. Same bytes either way.
    fn prove_witness_batch(
        &self,
        _batch: &[WitnessAssignment<'_>],
        _matrices: &std::sync::Arc<crate::witness::CircuitMatrices>,
        _r: &[Scalar],
        _s: &[Scalar],
    ) -> Option<Result<Vec<Proof>, crate::Error>> {
        None
    }

    /// Drops what this backend shares beyond its own value, before it is dropped for good (an
    /// evicted SRS): the CUDA backend's SRS sits in supraseal's process-wide cache, which would
    /// keep its pinned memory after the backend is gone. Nothing for backends that own all
    /// they hold.
    fn release(&self) {}
}
