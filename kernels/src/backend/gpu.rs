//! Our own CUDA prover (backend `gpu`): the SRS resident in device memory, everything per proof
//! on the GPU (`kernels/cuda/gpu_prover.cu`, over sppark's NTT and Pippenger kernels).
//!
//! - [`GpuBackend::new`] uploads an SRS image's five queries (H, L, A, B_G1, B_G2) to the current
//!   device once, page-locking the image for the copy when CUDA accepts the mapping (a memfd
//!   mapping shared with the launcher is accepted), and allocates every buffer a proof needs:
//!   two input sets where the device has the room ([`Residency::input_sets`]), so that in a
//!   batch the next proof's inputs are copied while the current proof computes. The image is not
//!   kept: the launcher's shared copy stays the only one on the host, and a restarted gpu-proc
//!   uploads it again.
//! - A proof copies a/b/c, the assignment and the density bitmaps to the device; the quotient
//!   (NTTs), the density gathers, the 0/1 splits, the five MSMs and their final reductions run
//!   there; each of a/b/c's NTTs starts as soon as its own vector has landed. The front half
//!   (NTTs, gathers, splits, the H MSM) is one CUDA graph launch per proof
//!   ([`GpuOptions::graphs`]); so is the back half (the other four MSMs and the final sums),
//!   whose shape follows the split counts: each tail MSM runs over its count rounded up to a
//!   sixteenth of its power of two, zeros past the count, so that proofs of one circuit share a
//!   few shapes, each captured once it has come twice. The L, A, B_G1 and B_G2 MSMs run before
//!   the H MSM, so that their final sums are reduced while H's runs, on a side stream.
//! - Finishing a proof ([`GpuOptions::device_finish`]): from 2^20 up the side stream also
//!   combines those four MSMs' window sums (chains of a few hundred doublings at single-thread
//!   latency, hidden behind the H MSM) and blinds them (`pa`, `pb1`, `pb2`, `r`, `s` of
//!   [`DeviceBlind`], two fixed-base products computed by the host, [`Blinder::device_input`]);
//!   the host combines H's windows and adds them to C ([`Blinder::proof_from_device`]). Below
//!   2^20 the H MSM is too short to hide the chains and the host combines every MSM's window
//!   sums (H's and L's in one chain) and blinds the five sums with `r` and `s` ([`Blinder`]:
//!   the group elements of [`BlindingKey::proof`] with fewer multiplications). Either way the
//!   bytes equal the CPU backend's; in a batch the host's part runs while the device proves
//!   the next proof, and the host waits on the device once per proof.
//! - [`GpuBackend::prove_components`] and [`GpuBackend::prove_components_batch`] return the sums
//!   with per-phase timings from CUDA events ([`Phases`]), for the check example and the
//!   bit-exactness suite.
//!
//! Every input is checked against the SRS lengths before the call into C++ (as for the
//! supraseal-c2 backend), and the C++ side checks the lengths again; CUDA failures come back as
//! [`ErrorKind::Cuda`] values, sticky ones as [`ErrorKind::DeviceLost`].

use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::Arc;

use bellperson::groth16::{prepare_verifying_key, verify_proof, PreparedVerifyingKey};
use blstrs::{Bls12, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::Group;

use super::blind::{Blinder, DeviceBlind, DeviceSums};
use super::cuda::{check_circuit, current_device, gpu_count, sppark_error};
use super::{Backend, BlindingKey, Components};
use crate::srs::{SrsLengths, SrsView};
use crate::types::{Assignment, Density, Proof, WitnessAssignment};
use crate::witness::CircuitMatrices;
use crate::{Error, ErrorKind};

pub(super) mod checks;
mod timing;
mod witness;
pub use checks::{
    device_finish_check, msm_cover, msm_plan, msm_plan_with, tail_size, window_weight_mismatches,
    MsmPlan,
};
use timing::thread_cpu_ms;
pub use timing::{BatchTimes, Phases};
pub use witness::{matrices_device_bytes, witness_check};

/// The C++ side's types, mirrored field for field (`kernels/cuda/gpu_layout.cuh`).
pub(super) mod ffi;

/// How [`GpuBackend::with_options`] sets up the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuOptions {
    /// Two input sets where device memory allows, so that a batch's copies overlap the
    /// previous proof (default); `false` keeps one set (every copy waits for the previous proof).
    pub overlap: bool,
    /// The H MSM's window size in bits (10 to 18); `None` takes sppark's choice for the H
    /// query's length (12 bits at 2^20).
    pub h_window_bits: Option<u32>,
    /// The chunks the H MSM's points are taken in (1 to 64); `None` takes sppark's choice (4 at
    /// 2^20). With the points resident, chunks only bound the digit memory.
    pub h_chunks: Option<u32>,
    /// Each proof's front half (NTTs, gathers, splits, H MSM) as one CUDA graph, captured once
    /// per input set and replayed (default): one launch instead of some eighty, which is most
    /// of the host's CPU time per proof. `false` launches kernel by kernel (same results).
    pub graphs: bool,
    /// Where a proof is finished (the window sums of L, A, B_G1 and B_G2 combined, and blinded):
    /// `Some(true)` on the device, `Some(false)` on the host, `None` (default) on the device from
    /// a 2^20 domain up, where the H MSM hides the device's chains. Same bytes either way.
    pub device_finish: Option<bool>,
    /// Whether the L, A, B_G1 and B_G2 MSMs run on a stream of their own beside the quotient's
    /// NTTs (the NTTs are bound by memory, the MSMs by multiplication), the H MSM waiting for
    /// both: `Some(true)` wherever the layout is not compact, `Some(false)` never (after the
    /// NTTs, in the back half's graph where graphs are on), `None` (default) from a 2^26
    /// domain up. Same bytes either way.
    pub msms_beside_ntts: Option<bool>,
    /// The process's whole device footprint, bytes (`[[gpu]] memory_budget`: what `nvidia-smi`
    /// shows, the CUDA context included); `None`: what the device has free. The context and
    /// [`super::plan::FOOTPRINT_MARGIN`] come off it, and it is capped at what the device has
    /// free less [`super::plan::RUNTIME_HEADROOM`] ([`super::plan::allocation_budget`]). The
    /// layout is planned within the rest
    /// ([`super::plan`]): fewer input sets, then the H MSM in more chunks, then part of the
    /// SRS streamed from the host image for every proof ([`GpuBackend::with_image`] only), then
    /// the compact layout, then the witness matrices' rows streamed too, else refused.
    pub memory_budget: Option<u64>,
    /// The matrices of the circuit proved from witness-only slots, uploaded at its first such
    /// proof ([`matrices_device_bytes`]): the plan leaves them their share of the budget, or
    /// streams their rows where nothing else fits (zeros: none planned).
    pub matrices: super::MatricesBytes,
}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions {
            overlap: true,
            h_window_bits: None,
            h_chunks: None,
            graphs: true,
            device_finish: None,
            msms_beside_ntts: None,
            memory_budget: None,
            matrices: super::MatricesBytes::default(),
        }
    }
}

/// What [`GpuBackend::new`] measured and holds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Residency {
    /// SRS bytes resident in device memory.
    pub srs_bytes: u64,
    /// Every other device buffer: input sets, gathers, splits, MSM scratch and accumulators.
    pub scratch_bytes: u64,
    /// Milliseconds the SRS upload took.
    pub upload_ms: f64,
    /// Whether the image was page-locked for the upload (DMA speed) or copied from pageable
    /// memory.
    pub pinned: bool,
    /// Input sets allocated: 2 when a batch's copies overlap the previous proof.
    pub input_sets: u32,
    /// The H MSM's window size in bits.
    pub h_window_bits: u32,
    /// The chunks the H MSM takes its points in.
    pub h_chunks: u32,
    /// Whether the device finishes every proof ([`GpuOptions::device_finish`]).
    pub device_finish: bool,
    /// The budget the layout was planned for ([`GpuOptions::memory_budget`]), bytes.
    pub budget_bytes: u64,
    /// What the plan allocates, bytes (at most `budget_bytes`).
    pub planned_bytes: u64,
    /// SRS bytes not resident: copied from the page-locked host image for every proof.
    pub streamed_bytes: u64,
    /// The two staging buffers the streamed points go through, bytes (0: nothing streams).
    pub stage_bytes: u64,
    /// The host-to-device rate one staging buffer's copy got at set-up, GB/s (0: nothing
    /// streams).
    pub stream_gbps: f64,
    /// The compact layout's tail piece, points ([`super::plan::SrsResidency::piece`]; 0: the
    /// full layout).
    pub piece: u64,
    /// The witness matrices planned in the budget ([`GpuOptions::matrices`]).
    pub matrices: super::MatricesBytes,
    /// Whether their rows stream for every witness-only proof (the plan's lever 5).
    pub matrices_streamed: bool,
}

/// The `gpu` backend: one SRS resident on one CUDA device.
pub struct GpuBackend {
    ctx: NonNull<ffi::Context>,
    lens: SrsLengths,
    key: Blinder,
    pvk: PreparedVerifyingKey<Bls12>,
    /// The graph capture failure was logged (once per backend).
    graph_warned: std::sync::atomic::AtomicBool,
    residency: Residency,
    /// The matrices on the device (witness-only proofs).
    matrices: std::sync::Mutex<Option<witness::HeldMatrices>>,
    /// The SRS image the context streams points from (page-locked by it): dropped after the
    /// context (`Drop` destroys the context first).
    _image: Option<SharedImage>,
}

/// An SRS image a backend can keep: the gpu-proc's mapping of the launcher's memfd, or an image
/// read from a file.
pub type SharedImage = std::sync::Arc<dyn AsRef<[u8]> + Send + Sync>;

// SAFETY: the context is only reached through `splitprover_gpu_prove_batch`, which serializes on
// the context's own mutex, and `splitprover_gpu_destroy` in `Drop` (exclusive access); the device
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

impl From<ffi::Components> for Components {
    fn from(c: ffi::Components) -> Self {
        Components {
            h: c.h,
            l: c.l,
            a: c.a,
            b_g1: c.b_g1,
            b_g2: c.b_g2,
        }
    }
}

fn identity_components() -> ffi::Components {
    ffi::Components {
        h: G1Projective::identity(),
        l: G1Projective::identity(),
        a: G1Projective::identity(),
        b_g1: G1Projective::identity(),
        b_g2: G2Projective::identity(),
        dev: DeviceSums::default(),
        finished: 0,
        pad: 0,
    }
}

/// What the per-proof callback blinds with, and where it puts the proofs.
struct Blinding<'a> {
    key: &'a Blinder,
    r: &'a [Scalar],
    s: &'a [Scalar],
    proofs: Vec<Option<Proof>>,
    /// The calling thread's CPU milliseconds blinding each proof.
    cpu_ms: Vec<f64>,
    panicked: bool,
}

/// Blinds proof `index` as soon as its sums are on the host (the device proves the next one
/// meanwhile). A panic is caught here and reported after the call: none crosses into C++.
///
/// # Safety
///
/// - `user` is a `Blinding` borrowed mutably for the duration of the call and not otherwise
///   reached meanwhile;
/// - `sums` points to a valid, initialised `ffi::Components`.
unsafe extern "C" fn blind_one(user: *mut c_void, index: usize, sums: *const ffi::Components) {
    // SAFETY: `user` is the `Blinding` that `prove_batch_timed` passed for this call and keeps
    // borrowed mutably and otherwise untouched until the call returns; the C++ side calls back
    // on the calling thread, one call at a time.
    let state = unsafe { &mut *user.cast::<Blinding<'_>>() };
    // SAFETY: `sums` points to the C++ side's output element `index`, fully written before the
    // call and alive for its duration.
    let raw = unsafe { *sums };
    let (Some(r), Some(s)) = (state.r.get(index), state.s.get(index)) else {
        state.panicked = true;
        return;
    };
    let key = state.key;
    let t0 = thread_cpu_ms();
    let blind = || {
        if raw.finished != 0 {
            Blinder::proof_from_device(&raw.h, &raw.dev)
        } else {
            key.proof(&Components::from(raw), *r, *s)
        }
    };
    match catch_unwind(AssertUnwindSafe(blind)) {
        Ok(p) => {
            if let Some(slot) = state.proofs.get_mut(index) {
                *slot = Some(p);
            }
        }
        Err(_) => state.panicked = true,
    }
    if let Some(ms) = state.cpu_ms.get_mut(index) {
        *ms += thread_cpu_ms() - t0;
    }
}

impl GpuBackend {
    /// Uploads the SRS in `srs` to the current CUDA device and allocates what a proof needs,
    /// with the default [`GpuOptions`].
    ///
    /// Errors: [`ErrorKind::NoGpu`] without a device or driver; [`ErrorKind::Cuda`] when the
    /// device refuses (out of device memory, with the sizes).
    pub fn new(srs: &SrsView<'_>) -> Result<Self, Error> {
        Self::with_options(srs, GpuOptions::default())
    }

    /// [`GpuBackend::new`] with `options` (input double-buffering, the H window size). Every
    /// SRS query is resident: a budget that would stream part of it is refused (the backend
    /// does not keep `srs`; [`GpuBackend::with_image`] does).
    pub fn with_options(srs: &SrsView<'_>, options: GpuOptions) -> Result<Self, Error> {
        Self::create(srs, options, None)
    }

    /// [`GpuBackend::with_options`] over an image the backend keeps: under a budget smaller
    /// than the SRS the points that are not resident are copied from it for every proof, and
    /// it stays page-locked (`cudaHostRegister`, no second host copy) while the backend lives.
    /// An image the plan does not stream from is dropped once uploaded.
    pub fn with_image(image: SharedImage, options: GpuOptions) -> Result<Self, Error> {
        let bytes: &[u8] = (*image).as_ref();
        let view = SrsView::new(bytes)?;
        // `create` keeps the Arc (whose bytes do not move) when the context reads them later.
        Self::create(&view, options, Some(image.clone()))
    }

    fn create(
        srs: &SrsView<'_>,
        options: GpuOptions,
        keep: Option<SharedImage>,
    ) -> Result<Self, Error> {
        if gpu_count()? == 0 {
            return Err(ErrorKind::NoGpu.into());
        }
        let wbits_h = options.h_window_bits.unwrap_or(0);
        if wbits_h != 0 && !(10..=18).contains(&wbits_h) {
            return Err(Error::shape(
                "H MSM window bits (10 to 18)",
                12,
                wbits_h as usize,
            ));
        }
        let chunks_h = options.h_chunks.unwrap_or(0);
        if options.h_chunks.is_some() && !(1..=64).contains(&chunks_h) {
            return Err(Error::shape("H MSM chunks (1 to 64)", 4, chunks_h as usize));
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
        let info = super::cuda::device_info()?;
        let plan = super::plan::plan(
            &lens,
            &super::plan::PlanRequest {
                sms: super::cuda::multiprocessors(device)?,
                budget: super::plan::allocation_budget(
                    options.memory_budget,
                    info.total_bytes,
                    info.free_bytes,
                ),
                overlap: options.overlap,
                h_window_bits: wbits_h,
                h_chunks: options.h_chunks,
                matrices: options.matrices,
            },
        )?;
        let streams = plan.layout.streams();
        if streams && keep.is_none() {
            return Err(ErrorKind::Cuda(format!(
                "the plan streams part of the SRS ({}), which needs an image the backend keeps \
                 (GpuBackend::with_image)",
                plan.describe()
            ))
            .into());
        }
        tracing::debug!(plan = %plan.describe(), "gpu backend: device memory planned");
        let opts = ffi::Options {
            double_buffer: c_int::from(plan.input_sets == 2),
            wbits_h: plan.layout.h_window_bits,
            chunks_h: plan.layout.h_chunks,
            no_graphs: c_int::from(!options.graphs),
            finish: match options.device_finish {
                None => 0,
                Some(true) => 1,
                Some(false) => 2,
            },
            beside: match options.msms_beside_ntts {
                None => 0,
                Some(true) => 1,
                Some(false) => 2,
            },
            res: plan.layout.residency(),
        };
        let image = srs.as_bytes();
        let mut ctx: *mut ffi::Context = std::ptr::null_mut();
        let mut stats = ffi::Upload::default();
        // SAFETY: `raw`'s pointers cover the arrays of `srs` with the lengths given (SrsView
        // checked the layout), `image` is the whole image they lie in, both live across the call;
        // the C++ side keeps them only when the plan streams, and then `keep` (the image's
        // owner) is stored in the backend, which destroys the context before dropping it. `opts`
        // is read, `ctx` and `stats` are writable.
        let err = unsafe {
            ffi::splitprover_gpu_create(
                &raw,
                image.as_ptr().cast(),
                image.len(),
                device,
                &opts,
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
            input_sets: stats.input_sets.max(0) as u32,
            h_window_bits: stats.wbits_h,
            h_chunks: stats.chunks_h,
            device_finish: stats.device_finish != 0,
            budget_bytes: plan.budget,
            planned_bytes: plan.bytes(),
            streamed_bytes: stats.streamed_bytes as u64,
            stage_bytes: plan.layout.stage,
            stream_gbps: stats.stream_gbps,
            piece: plan.layout.piece,
            matrices: plan.matrices,
            matrices_streamed: plan.matrices_streamed(),
        };
        tracing::info!(
            ?lens,
            srs_bytes = residency.srs_bytes,
            scratch_bytes = residency.scratch_bytes,
            upload_ms = residency.upload_ms as u64,
            pinned = residency.pinned,
            input_sets = residency.input_sets,
            h_window_bits = residency.h_window_bits,
            h_chunks = residency.h_chunks,
            device_finish = residency.device_finish,
            plan = %plan.describe(),
            "gpu backend: SRS resident on the device"
        );
        Ok(GpuBackend {
            ctx,
            lens,
            key: Blinder::new(BlindingKey::of(srs)),
            pvk: prepare_verifying_key(&srs.verifying_key()),
            graph_warned: Default::default(),
            residency,
            matrices: Default::default(),
            _image: if streams { keep } else { None },
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
        let (mut v, _) = self.prove_components_batch(std::slice::from_ref(asg))?;
        v.pop()
            .ok_or_else(|| ErrorKind::Cuda("the GPU prover returned no sums".into()).into())
    }

    /// The five unblinded sums of every circuit of `batch`, proved in one call (copies of
    /// the next circuit overlapping the current one), with each proof's phases and the batch's
    /// device time.
    pub fn prove_components_batch(
        &self,
        batch: &[Assignment<'_>],
    ) -> Result<(Vec<(Components, Phases)>, BatchTimes), Error> {
        let (sums, phases, times, _) = self.run_batch(batch, None, None, false)?;
        Ok((
            sums.into_iter().map(Components::from).zip(phases).collect(),
            times,
        ))
    }

    /// Proofs of `batch` with `r[i]`, `s[i]`, each blinded on the host while the device
    /// proves the next, with each proof's phases and the batch's device time.
    pub fn prove_batch_timed(
        &self,
        batch: &[Assignment<'_>],
        r: &[Scalar],
        s: &[Scalar],
    ) -> Result<(Vec<Proof>, Vec<Phases>, BatchTimes), Error> {
        super::check_randomness(batch, r, s)?;
        let raw = self.raw_full(batch)?;
        // SAFETY: `raw_full` checked that each element's pointers cover the lengths it states,
        // in `batch`'s slices, which outlive the call.
        unsafe { self.prove_raw_timed(&raw, r, s) }
    }

    /// [`GpuBackend::prove_batch_timed`] over assignments in the C++ layout.
    ///
    /// # Safety
    ///
    /// Every element of `raw` points at arrays as long as its lengths say (its density words
    /// `bit_len` bits with the popcounts given), alive across the call; `r` and `s` hold one
    /// value per element.
    unsafe fn prove_raw_timed(
        &self,
        raw: &[ffi::Assignment],
        r: &[Scalar],
        s: &[Scalar],
    ) -> Result<(Vec<Proof>, Vec<Phases>, BatchTimes), Error> {
        // finished on the device, the host's share of the blinding comes first: its two
        // fixed-base products per proof, counted with the rest of the blinding
        let mut cpu_ms = vec![0.0; raw.len()];
        let inputs: Option<Vec<DeviceBlind>> = self.residency.device_finish.then(|| {
            r.iter()
                .zip(s)
                .zip(&mut cpu_ms)
                .map(|((r, s), ms)| {
                    let t0 = thread_cpu_ms();
                    let input = self.key.device_input(r, s);
                    *ms = thread_cpu_ms() - t0;
                    input
                })
                .collect()
        });
        let mut state = Blinding {
            key: &self.key,
            r,
            s,
            proofs: vec![None; raw.len()],
            cpu_ms,
            panicked: false,
        };
        // SAFETY: forwarded to the caller.
        let (_, mut phases, times, _) =
            unsafe { self.run_raw(raw, inputs.as_deref(), Some(&mut state), false) }?;
        for (p, ms) in phases.iter_mut().zip(&state.cpu_ms) {
            p.cpu_blind = *ms;
        }
        if state.panicked {
            return Err(ErrorKind::Cuda("blinding a proof panicked".into()).into());
        }
        let proofs = state
            .proofs
            .into_iter()
            .collect::<Option<Vec<Proof>>>()
            .ok_or_else(|| Error::from(ErrorKind::Cuda("a proof was not blinded".into())))?;
        Ok((proofs, phases, times))
    }

    /// A diagnostic: for every circuit of `batch`, its five sums as the device reduces them (what
    /// a proof uses) and the same device buckets and partial sums reduced on the host the way
    /// sppark's own `collect` does. Where the two differ, the device's final reduction is at
    /// fault; where both differ from the CPU backend's sums, what comes before it. Each proof
    /// waits for the device before the next starts.
    pub fn prove_components_checked(
        &self,
        batch: &[Assignment<'_>],
    ) -> Result<Vec<(Components, Components)>, Error> {
        let (sums, _, _, host) = self.run_batch(batch, None, None, true)?;
        Ok(sums
            .into_iter()
            .zip(host)
            .map(|(d, h)| (Components::from(d), Components::from(h)))
            .collect())
    }

    /// `inputs`: one [`DeviceBlind`] per circuit when the device finishes and blinds (`None`:
    /// the plain sums).
    fn run_batch(
        &self,
        batch: &[Assignment<'_>],
        inputs: Option<&[DeviceBlind]>,
        blinding: Option<&mut Blinding<'_>>,
        host_sums: bool,
    ) -> Result<RunOutput, Error> {
        let raw = self.raw_full(batch)?;
        // SAFETY: `raw_full` checked that each element's pointers cover the lengths it states,
        // in `batch`'s slices, which outlive the call.
        unsafe { self.run_raw(&raw, inputs, blinding, host_sums) }
    }

    /// `batch` in the C++ layout, each circuit checked against the SRS first.
    fn raw_full(&self, batch: &[Assignment<'_>]) -> Result<Vec<ffi::Assignment>, Error> {
        for asg in batch {
            check_circuit(&self.lens, asg)?;
        }
        fn density(d: &Density<'_>) -> ffi::Density {
            ffi::Density {
                words: d.words.as_ptr(),
                bit_len: d.bit_len,
                popcount: d.popcount,
            }
        }
        let raw: Vec<ffi::Assignment> = batch
            .iter()
            .map(|asg| ffi::Assignment {
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
                bit_values: std::ptr::null(),
                bit_words: 0,
                non_bits: std::ptr::null(),
                non_bits_len: 0,
                witness: 0,
                pad: 0,
            })
            .collect();
        Ok(raw)
    }

    /// Runs `raw` on the device (see [`GpuBackend::run_batch`]).
    ///
    /// # Safety
    ///
    /// As [`GpuBackend::prove_raw_timed`]: every element of `raw` points at arrays as long as
    /// its lengths say, alive across the call.
    unsafe fn run_raw(
        &self,
        raw: &[ffi::Assignment],
        inputs: Option<&[DeviceBlind]>,
        blinding: Option<&mut Blinding<'_>>,
        host_sums: bool,
    ) -> Result<RunOutput, Error> {
        if inputs.is_some_and(|i| i.len() != raw.len()) {
            return Err(Error::shape(
                "device blinding inputs (one per circuit)",
                raw.len(),
                inputs.map_or(0, <[DeviceBlind]>::len),
            ));
        }
        let mut out = vec![identity_components(); raw.len()];
        let mut host = if host_sums {
            vec![identity_components(); raw.len()]
        } else {
            Vec::new()
        };
        let mut phases = vec![Phases::default(); raw.len()];
        let mut times = ffi::BatchTimes::default();
        let (on_proof, user): (Option<ffi::OnProof>, *mut c_void) = match blinding {
            Some(state) => (
                Some(blind_one as ffi::OnProof),
                (state as *mut Blinding<'_>).cast(),
            ),
            None => (None, std::ptr::null_mut()),
        };
        let host_ptr = if host_sums {
            host.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: the caller's contract: every element of `raw` covers what its lengths say and
        // its bitmaps hold `bit_len` bits with the popcounts given (the C++ side reads exactly
        // that much, and re-checks the lengths against the SRS and the matrices), alive across
        // the call; `out` and `phases` hold `raw.len()` writable elements of the
        // C++ layouts; `inputs` is null or holds `raw.len()` elements (checked above) in the
        // C++ layout of `sp_blind`; `user` is null or the `Blinding` that `blind_one` expects,
        // borrowed mutably for the whole call; `host` is empty (null: no diagnostic) or holds
        // `raw.len()` writable elements.
        let err = unsafe {
            ffi::splitprover_gpu_prove_batch(
                self.ctx.as_ptr(),
                raw.as_ptr(),
                raw.len(),
                inputs.map_or(std::ptr::null(), <[DeviceBlind]>::as_ptr),
                out.as_mut_ptr(),
                phases.as_mut_ptr(),
                &mut times,
                on_proof,
                user,
                host_ptr,
            )
        };
        if err.code != 0 {
            return Err(sppark_error(err, "proving on the GPU"));
        }
        let times = BatchTimes::from(&times);
        if let Some(why) = &times.graph_error {
            if !self
                .graph_warned
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!("the GPU prover launches kernel by kernel from now on: {why}");
            }
        }
        Ok((out, phases, times, host))
    }
}

/// The device's sums, the phases, the batch's time and the diagnostic's host-reduced sums.
type RunOutput = (
    Vec<ffi::Components>,
    Vec<Phases>,
    BatchTimes,
    Vec<ffi::Components>,
);

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

    fn device_memory(&self) -> super::DeviceMemory {
        let r = &self.residency;
        let held = self.matrices_bytes();
        // matrices the plan did not count are added once uploaded; streamed rows count once
        // the matrices are held (witness-only proofs copy them)
        let unplanned = if r.matrices == Default::default() {
            held
        } else {
            0
        };
        let rows = if r.matrices_streamed && held > 0 {
            r.matrices.rows
        } else {
            0
        };
        super::DeviceMemory {
            srs_bytes: r.srs_bytes,
            planned_bytes: r.planned_bytes + unplanned,
            budget_bytes: r.budget_bytes,
            streamed_bytes: r.streamed_bytes + rows,
            // SAFETY: the context is alive (destroyed only in Drop); the call reads an atomic.
            streamed_total_bytes: unsafe { ffi::splitprover_gpu_streamed_total(self.ctx.as_ptr()) },
        }
    }

    fn prove_batch(
        &self,
        batch: &[Assignment<'_>],
        r: &[Scalar],
        s: &[Scalar],
    ) -> Result<Vec<Proof>, Error> {
        let (proofs, phases, times) = self.prove_batch_timed(batch, r, s)?;
        tracing::debug!(n = proofs.len(), ?times, ?phases, "gpu batch");
        Ok(proofs)
    }

    fn prove_witness_batch(
        &self,
        batch: &[WitnessAssignment<'_>],
        matrices: &Arc<CircuitMatrices>,
        r: &[Scalar],
        s: &[Scalar],
    ) -> Option<Result<Vec<Proof>, Error>> {
        Some(self.prove_witness_batch_timed(batch, matrices, r, s).map(
            |(proofs, phases, times)| {
                tracing::debug!(n = proofs.len(), ?times, ?phases, "gpu witness batch");
                proofs
            },
        ))
    }
}
