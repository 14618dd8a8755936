//! Our own CUDA prover (backend `gpu`): the SRS resident in device memory, everything per proof
//! on the GPU (`kernels/cuda/gpu_prover.cu`, over sppark's NTT and Pippenger MSMs).
//!
//! - [`GpuBackend::new`] uploads an SRS image's five queries (H, L, A, B_G1, B_G2) to the current
//!   device once, page-locking the image for the copy when CUDA accepts the mapping (a memfd
//!   mapping shared with the launcher is accepted). The image is not kept: the launcher's shared
//!   copy stays the only one on the host, and a restarted gpu-proc uploads it again.
//! - A proof copies a/b/c, the assignment and the density bitmaps to the device; the quotient
//!   (NTTs), the density gathers and the five MSMs run there. The host only blinds the five
//!   sums with `r` and `s` ([`BlindingKey`]), which is why the bytes equal the CPU backend's.
//! - [`GpuBackend::prove_components`] returns the sums with per-phase timings, for the check
//!   example and the bit-exactness suite.
//!
//! Every input is checked against the SRS lengths before the call into C++ (as for the
//! supraseal-c2 backend), and the C++ side checks the lengths again; CUDA failures come back as
//! [`ErrorKind::Cuda`] values.

use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use bellperson::groth16::{prepare_verifying_key, verify_proof, PreparedVerifyingKey};
use blstrs::{Bls12, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};

use super::cuda::{check_circuit, current_device, gpu_count, is_no_gpu, is_sticky};
use super::{Assignment, Backend, BlindingKey, Components, Density, Proof};
use crate::srs::{SrsLengths, SrsView};
use crate::{Error, ErrorKind};

/// The C++ side's types, mirrored field for field (`kernels/cuda/gpu_prover.cu`).
mod ffi {
    use super::*;

    /// Opaque `GpuContext`.
    #[repr(C)]
    pub struct Context {
        _private: [u8; 0],
    }

    #[repr(C)]
    pub struct Srs {
        pub h: *const G1Affine,
        pub n_h: usize,
        pub l: *const G1Affine,
        pub n_l: usize,
        pub a: *const G1Affine,
        pub n_a: usize,
        pub b_g1: *const G1Affine,
        pub n_b: usize,
        pub b_g2: *const G2Affine,
        pub n_inputs: usize,
    }

    #[repr(C)]
    pub struct Density {
        pub words: *const u64,
        pub bit_len: usize,
        pub popcount: usize,
    }

    #[repr(C)]
    pub struct Assignment {
        pub a: *const Scalar,
        pub b: *const Scalar,
        pub c: *const Scalar,
        pub abc_len: usize,
        pub input: *const Scalar,
        pub input_len: usize,
        pub aux: *const Scalar,
        pub aux_len: usize,
        pub a_aux: Density,
        pub b_input: Density,
        pub b_aux: Density,
    }

    /// Jacobian points: blstrs' projective points are `repr(transparent)` over blst's
    /// `blst_p1`/`blst_p2`, which is sppark's `jacobian_t` layout.
    #[repr(C)]
    pub struct Components {
        pub h: G1Projective,
        pub l: G1Projective,
        pub a: G1Projective,
        pub b_g1: G1Projective,
        pub b_g2: G2Projective,
    }

    #[repr(C)]
    #[derive(Default)]
    pub struct Upload {
        pub resident_bytes: usize,
        pub scratch_bytes: usize,
        pub upload_ms: f64,
        pub pinned: c_int,
    }

    extern "C" {
        pub fn splitprover_gpu_create(
            srs: *const Srs,
            image: *const c_void,
            image_len: usize,
            device: c_int,
            out: *mut *mut Context,
            stats: *mut Upload,
        ) -> sppark::Error;
        pub fn splitprover_gpu_destroy(ctx: *mut Context);
        pub fn splitprover_gpu_prove(
            ctx: *mut Context,
            asg: *const Assignment,
            out: *mut Components,
            phases: *mut super::Phases,
        ) -> sppark::Error;
    }
}

/// Milliseconds per phase of one GPU proof (host clock; each phase ends with a stream sync).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Phases {
    /// a/b/c, the assignment and the bitmaps copied to the device.
    pub copy_in: f64,
    /// The quotient's NTTs and the pointwise arithmetic.
    pub ntt: f64,
    /// The density gathers of A's and B's scalars.
    pub gather: f64,
    /// H's MSM.
    pub msm_h: f64,
    /// L's MSM.
    pub msm_l: f64,
    /// A's MSM.
    pub msm_a: f64,
    /// B's MSM in G1.
    pub msm_b_g1: f64,
    /// B's MSM in G2.
    pub msm_b_g2: f64,
    /// The whole call.
    pub total: f64,
}

/// What [`GpuBackend::new`] measured and holds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Residency {
    /// SRS bytes resident in device memory.
    pub srs_bytes: u64,
    /// Per-proof device buffers (a/b/c, assignment, gathers), beside the MSMs' buckets.
    pub scratch_bytes: u64,
    /// Milliseconds the SRS upload took.
    pub upload_ms: f64,
    /// Whether the image was page-locked for the upload (DMA speed) or copied from pageable
    /// memory.
    pub pinned: bool,
}

/// The `gpu` backend: one SRS resident on one CUDA device.
pub struct GpuBackend {
    ctx: NonNull<ffi::Context>,
    lens: SrsLengths,
    key: BlindingKey,
    pvk: PreparedVerifyingKey<Bls12>,
    residency: Residency,
}

// SAFETY: the context is only reached through `splitprover_gpu_prove`, which serializes on the
// context's own mutex, and `splitprover_gpu_destroy` in `Drop` (exclusive access); the device
// memory it owns is not tied to the creating thread (the runtime's primary context is
// process-wide, and every entry point selects the context's device first).
unsafe impl Send for GpuBackend {}
// SAFETY: as for Send: concurrent `prove_batch` calls serialize inside the C++ context.
unsafe impl Sync for GpuBackend {}

impl std::fmt::Debug for GpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBackend")
            .field("lens", &self.lens)
            .field("residency", &self.residency)
            .finish_non_exhaustive()
    }
}

pub(crate) fn sppark_error(e: sppark::Error, what: &str) -> Error {
    if is_no_gpu(e.code) {
        return ErrorKind::NoGpu.into();
    }
    if is_sticky(e.code) {
        return ErrorKind::DeviceLost(format!(
            "{what}: {} (cuda error {})",
            String::from(&e),
            e.code
        ))
        .into();
    }
    ErrorKind::Cuda(format!(
        "{what}: {} (cuda error {})",
        String::from(&e),
        e.code
    ))
    .into()
}

impl GpuBackend {
    /// Uploads the SRS in `srs` to the current CUDA device and allocates what a proof needs.
    ///
    /// Errors: [`ErrorKind::NoGpu`] without a device or driver; [`ErrorKind::Cuda`] when the
    /// device refuses (out of device memory, with the sizes).
    pub fn new(srs: &SrsView<'_>) -> Result<Self, Error> {
        if gpu_count()? == 0 {
            return Err(ErrorKind::NoGpu.into());
        }
        let lens = srs.lengths();
        if lens.h < 2 {
            return Err(Error::shape("H query points (at least 2)", 2, lens.h));
        }
        if lens.b_g1 != lens.b_g2 {
            return Err(Error::shape(
                "B_G2 points (one per B_G1 point)",
                lens.b_g1,
                lens.b_g2,
            ));
        }
        // The views are empty where the layout would not hold (never, after SrsView::new):
        // refuse rather than hand C++ a pointer shorter than its length.
        let got = [
            srs.h().len(),
            srs.l().len(),
            srs.a().len(),
            srs.b_g1().len(),
        ];
        if got != [lens.h, lens.l, lens.a, lens.b_g1] || srs.b_g2().len() != lens.b_g2 {
            return Err(Error::format("SRS image arrays shorter than its lengths"));
        }
        let raw = ffi::Srs {
            h: srs.h().as_ptr(),
            n_h: lens.h,
            l: srs.l().as_ptr(),
            n_l: lens.l,
            a: srs.a().as_ptr(),
            n_a: lens.a,
            b_g1: srs.b_g1().as_ptr(),
            n_b: lens.b_g1,
            b_g2: srs.b_g2().as_ptr(),
            n_inputs: lens.ic,
        };
        let device = current_device()?;
        let image = srs.as_bytes();
        let mut ctx: *mut ffi::Context = std::ptr::null_mut();
        let mut stats = ffi::Upload::default();
        // SAFETY: `raw`'s pointers cover the arrays of `srs` with the lengths given (SrsView
        // checked the layout), `image` is the whole image they lie in, both live across the call
        // (the C++ side copies and keeps no host pointer); `ctx` and `stats` are writable.
        let err = unsafe {
            ffi::splitprover_gpu_create(
                &raw,
                image.as_ptr().cast(),
                image.len(),
                device,
                &mut ctx,
                &mut stats,
            )
        };
        if err.code != 0 {
            return Err(sppark_error(err, "uploading the SRS to the GPU"));
        }
        let ctx = NonNull::new(ctx)
            .ok_or_else(|| Error::from(ErrorKind::Cuda("the GPU prover gave no context".into())))?;
        let residency = Residency {
            srs_bytes: stats.resident_bytes as u64,
            scratch_bytes: stats.scratch_bytes as u64,
            upload_ms: stats.upload_ms,
            pinned: stats.pinned != 0,
        };
        tracing::info!(
            ?lens,
            srs_bytes = residency.srs_bytes,
            scratch_bytes = residency.scratch_bytes,
            upload_ms = residency.upload_ms as u64,
            pinned = residency.pinned,
            "gpu backend: SRS resident on the device"
        );
        Ok(GpuBackend {
            ctx,
            lens,
            key: BlindingKey::of(srs),
            pvk: prepare_verifying_key(&srs.verifying_key()),
            residency,
        })
    }

    /// What the upload measured and what stays resident.
    pub fn residency(&self) -> Residency {
        self.residency
    }

    /// The lengths of the resident SRS.
    pub fn lengths(&self) -> &SrsLengths {
        &self.lens
    }

    /// Verifies a proof against this SRS's verifying key; `public_inputs` excludes the ONE.
    pub fn verify(&self, proof: &Proof, public_inputs: &[Scalar]) -> Result<bool, Error> {
        Ok(verify_proof(&self.pvk, proof, public_inputs)?)
    }

    /// The five unblinded sums of one circuit, computed on the GPU, with the phase timings.
    pub fn prove_components(&self, asg: &Assignment<'_>) -> Result<(Components, Phases), Error> {
        check_circuit(&self.lens, asg)?;
        fn density(d: &Density<'_>) -> ffi::Density {
            ffi::Density {
                words: d.words.as_ptr(),
                bit_len: d.bit_len,
                popcount: d.popcount,
            }
        }
        let raw = ffi::Assignment {
            a: asg.a.as_ptr(),
            b: asg.b.as_ptr(),
            c: asg.c.as_ptr(),
            abc_len: asg.a.len(),
            input: asg.input.as_ptr(),
            input_len: asg.input.len(),
            aux: asg.aux.as_ptr(),
            aux_len: asg.aux.len(),
            a_aux: density(&asg.a_aux_density),
            b_input: density(&asg.b_input_density),
            b_aux: density(&asg.b_aux_density),
        };
        let mut out = MaybeUninit::<ffi::Components>::zeroed();
        let mut phases = Phases::default();
        // SAFETY: `check_circuit` established that every slice covers what the lengths in `raw`
        // say and that the bitmaps hold `bit_len` bits with the popcounts given (the C++ side
        // reads exactly that much, and re-checks the lengths against the SRS); the slices
        // outlive the call; `out` and `phases` are writable and of the C++ layouts.
        let err = unsafe {
            ffi::splitprover_gpu_prove(self.ctx.as_ptr(), &raw, out.as_mut_ptr(), &mut phases)
        };
        if err.code != 0 {
            return Err(sppark_error(err, "proving on the GPU"));
        }
        // SAFETY: zero-initialised and then written by the C++ side; every bit pattern is a
        // value of these plain-data point types (a wrong one fails verification, nothing more).
        let out = unsafe { out.assume_init() };
        Ok((
            Components {
                h: out.h,
                l: out.l,
                a: out.a,
                b_g1: out.b_g1,
                b_g2: out.b_g2,
            },
            phases,
        ))
    }
}

impl Drop for GpuBackend {
    fn drop(&mut self) {
        // SAFETY: the context came from `splitprover_gpu_create`, is destroyed once, here, and
        // `&mut self` means no call is in flight.
        unsafe { ffi::splitprover_gpu_destroy(self.ctx.as_ptr()) };
    }
}

impl Backend for GpuBackend {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn device_bytes(&self) -> u64 {
        self.residency.srs_bytes
    }

    fn prove_batch(
        &self,
        batch: &[Assignment<'_>],
        r: &[Scalar],
        s: &[Scalar],
    ) -> Result<Vec<Proof>, Error> {
        super::check_randomness(batch, r, s)?;
        batch
            .iter()
            .zip(r.iter().zip(s))
            .map(|(asg, (r, s))| {
                let (components, phases) = self.prove_components(asg)?;
                tracing::debug!(?phases, "gpu proof");
                Ok(self.key.proof(&components, *r, *s))
            })
            .collect()
    }
}
