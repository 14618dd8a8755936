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
use super::cuda::{check_circuit, current_device, gpu_count, is_no_gpu, is_sticky};
use super::{Assignment, Backend, BlindingKey, Components, Density, Proof, WitnessAssignment};
use crate::srs::{SrsLengths, SrsView};
use crate::witness::CircuitMatrices;
use crate::{Error, ErrorKind};

mod witness;
pub use witness::{matrices_device_bytes, witness_check};

/// The C++ side's types, mirrored field for field (`kernels/cuda/gpu_layout.cuh`).
pub(super) mod ffi {
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
        /// A witness-only assignment's packed aux (`witness` 1): bit values and non-bits.
        pub bit_values: *const u64,
        pub bit_words: usize,
        pub non_bits: *const Scalar,
        pub non_bits_len: usize,
        pub witness: u32,
        pub pad: u32,
    }
    const _: () = assert!(std::mem::size_of::<Assignment>() == 176);

    /// `sp_matrices`: a circuit's matrices and witness layout, host arrays.
    #[repr(C)]
    pub struct Matrices {
        pub row_start: [*const u64; 3],
        pub terms: [*const u64; 3],
        pub nnz: [u64; 3],
        pub rows: u64,
        pub coeffs: *const Scalar,
        pub n_coeffs: u64,
        pub is_bit: *const u64,
        pub bits_before: *const u64,
        pub aux_words: u64,
        pub n_inputs: u64,
        pub n_aux: u64,
        pub n_bits: u64,
        pub density: [*const u64; 3],
        pub popcount: [u64; 3],
    }
    const _: () = assert!(std::mem::size_of::<Matrices>() == 192);

    /// Jacobian points: blstrs' projective points are `repr(transparent)` over blst's
    /// `blst_p1`/`blst_p2`, which is sppark's `jacobian_t` layout. `dev` and `finished`: what
    /// the device's finishing returned (`sp_dev_sums`; affine points are `blst_p1_affine` /
    /// `blst_p2_affine`, which blstrs' affine points wrap).
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct Components {
        pub h: G1Projective,
        pub l: G1Projective,
        pub a: G1Projective,
        pub b_g1: G1Projective,
        pub b_g2: G2Projective,
        pub dev: DeviceSums,
        pub finished: u32,
        pub pad: u32,
    }

    // `sp_components`: four G1 and one G2 Jacobian point, `sp_dev_sums`, two words.
    const _: () = assert!(std::mem::size_of::<Components>() == 4 * 144 + 288 + 576 + 8);

    pub use super::super::plan::SrsResidency;

    #[repr(C)]
    pub struct Options {
        pub double_buffer: c_int,
        pub wbits_h: u32,
        pub chunks_h: u32,
        pub no_graphs: c_int,
        pub finish: c_int,
        pub res: SrsResidency,
    }

    #[repr(C)]
    pub struct BatchTimes {
        pub gpu: f64,
        pub input_sets: u32,
        pub front_graphs: u32,
        pub back_graphs: u32,
        pub graph_error: [std::ffi::c_char; 200],
    }

    impl Default for BatchTimes {
        fn default() -> Self {
            BatchTimes {
                gpu: 0.0,
                input_sets: 0,
                front_graphs: 0,
                back_graphs: 0,
                graph_error: [0; 200],
            }
        }
    }

    /// `sp_layout_bytes`: what a context allocates (see `super::super::plan`).
    #[repr(C)]
    #[derive(Default)]
    pub struct LayoutBytes {
        pub srs_h: usize,
        pub srs_l: usize,
        pub srs_a: usize,
        pub srs_b_g1: usize,
        pub srs_b_g2: usize,
        pub set: usize,
        pub once: usize,
        pub h_digits: usize,
        pub reserve: usize,
        pub wbits_h: u32,
        pub chunks_h: u32,
        pub resident: [usize; 5],
        pub streamed: usize,
        pub stage: usize,
        pub piece: usize,
    }

    #[repr(C)]
    #[derive(Default)]
    pub struct Upload {
        pub resident_bytes: usize,
        pub scratch_bytes: usize,
        pub upload_ms: f64,
        pub pinned: c_int,
        pub input_sets: c_int,
        pub wbits_h: u32,
        pub chunks_h: u32,
        pub device_finish: c_int,
        pub streamed_bytes: usize,
        pub stream_gbps: f64,
    }

    /// Called by the C++ side once per proof, in order, with its five sums.
    ///
    /// # Safety
    ///
    /// The C++ side calls it on the thread that called `splitprover_gpu_prove_batch`, one call at
    /// a time, with the `user` pointer it was given and `sums` pointing to its output element
    /// `index`, fully written and alive for the call.
    pub type OnProof =
        unsafe extern "C" fn(user: *mut c_void, index: usize, sums: *const Components);

    // SAFETY: each declaration matches its `extern "C"` definition in kernels/cuda/gpu_prover.cu,
    // and every struct passed by pointer above is `#[repr(C)]` with the C++ struct's fields in
    // order (the `size_of` assertions above pin the sizes the C++ side was written for).
    extern "C" {
        pub fn splitprover_gpu_create(
            srs: *const Srs,
            image: *const c_void,
            image_len: usize,
            device: c_int,
            opts: *const Options,
            out: *mut *mut Context,
            stats: *mut Upload,
        ) -> sppark::Error;
        pub fn splitprover_gpu_destroy(ctx: *mut Context);
        pub fn splitprover_gpu_set_matrices(
            ctx: *mut Context,
            m: *const Matrices,
            streamed: c_int,
            bytes: *mut usize,
        ) -> sppark::Error;
        pub fn splitprover_gpu_witness_check(
            m: *const Matrices,
            input: *const Scalar,
            bit_values: *const u64,
            non_bits: *const Scalar,
            stage_bytes: usize,
            aux: *mut Scalar,
            abc: *mut Scalar,
        ) -> usize;
        pub fn splitprover_gpu_prove_batch(
            ctx: *mut Context,
            asgs: *const Assignment,
            n: usize,
            blind: *const DeviceBlind,
            out: *mut Components,
            phases: *mut super::Phases,
            times: *mut BatchTimes,
            on_proof: Option<OnProof>,
            user: *mut c_void,
            host_sums: *mut Components,
        ) -> sppark::Error;
        pub fn splitprover_gpu_msm_plan(
            n: usize,
            wbits: u32,
            chunks: u32,
            out: *mut super::MsmPlan,
        );
        pub fn splitprover_gpu_msm_cover(n: usize, out: *mut super::MsmPlan);
        pub fn splitprover_gpu_layout(
            srs: *const Srs,
            sms: c_int,
            wbits_h: u32,
            chunks_h: u32,
            res: *const SrsResidency,
            out: *mut LayoutBytes,
        );
        pub fn splitprover_gpu_streamed_total(ctx: *const Context) -> u64;
        pub fn splitprover_gpu_matrices_bytes(m: *const Matrices, streamed: c_int) -> usize;
        pub fn splitprover_gpu_tail_size(big: usize, cap: usize) -> usize;
        pub fn splitprover_gpu_window_check(seed: u64) -> u32;
        pub fn splitprover_gpu_side_check(
            w1: *const G1Projective,
            w2: *const G2Projective,
            nwins: *const u32,
            wbits: *const u32,
            blind: *const DeviceBlind,
            out: *mut DeviceSums,
        );
    }
}

/// Milliseconds of one GPU proof, from CUDA events recorded on the device's streams (device
/// time, not host clocks); `host_sums` is the host's share.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Phases {
    /// Copy stream: a/b/c (zero-padded), the assignment and the bitmaps copied to the device.
    pub copy_in: f64,
    /// The quotient's NTTs and the pointwise arithmetic.
    pub ntt: f64,
    /// The density gathers of A's and B's scalars and the 0/1 splits of L, A and B.
    pub gather: f64,
    /// H's MSM.
    pub msm_h: f64,
    /// L's MSM (batch addition of the ones, Pippenger over the rest).
    pub msm_l: f64,
    /// A's MSM.
    pub msm_a: f64,
    /// B's MSM in G1.
    pub msm_b_g1: f64,
    /// B's MSM in G2.
    pub msm_b_g2: f64,
    /// The five MSMs' final reductions on the device and their copy to the host.
    pub final_sums: f64,
    /// The compute stream's time for this proof: NTTs to the sums copied back.
    pub compute: f64,
    /// From the start of this proof's copies to its sums copied back (a proof alone: its GPU
    /// time; in a batch its copies overlap the previous proof).
    pub span: f64,
    /// Host clock: combining the five MSMs' window sums.
    pub host_sums: f64,
    /// CPU time of the calling thread, milliseconds: queueing the proof's copies, kernels and
    /// events (one graph launch for the front half, [`GpuOptions::graphs`]).
    pub cpu_issue: f64,
    /// The same thread's CPU time in its two waits on the device (the split counts, the sums).
    pub cpu_wait: f64,
    /// Combining the window sums and reading the phase times, after the wait.
    pub cpu_finish: f64,
    /// Blinding the sums into the proof (on the Rust side: [`Blinder`], or, finished on the
    /// device, [`Blinder::device_input`] before the call and [`Blinder::proof_from_device`]).
    pub cpu_blind: f64,
    /// The side stream, concurrent with the H MSM: the L, A, B_G1 and B_G2 MSMs' final sums
    /// and, finished on the device, their window chains and blinding.
    pub side: f64,
    /// The streaming stream (an SRS partly resident, [`GpuOptions::memory_budget`]): from the
    /// proof's first chunk copy to its last chunk landed, overlapping its MSMs; 0 when nothing
    /// streams.
    pub stream: f64,
}

/// Device time of one call over a batch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BatchTimes {
    /// Milliseconds from the first proof's copies to the last proof's sums copied back.
    pub gpu_ms: f64,
    /// Input sets in use: 2 when the copies overlapped the previous proof's computation.
    pub input_sets: u32,
    /// Proofs whose front half (NTTs, gathers, splits, H MSM) ran as one CUDA graph launch.
    pub front_graphs: u32,
    /// Proofs whose back half (L, A, B_G1, B_G2 MSMs and final sums) ran as one CUDA graph
    /// launch: a shape (the padded tail sizes) is captured the second time it comes.
    pub back_graphs: u32,
    /// Why the context stopped capturing graphs (a failed capture: it launches kernel by
    /// kernel from then on, with the same results); `None` while it uses them or when
    /// [`GpuOptions::graphs`] is off.
    pub graph_error: Option<String>,
}

impl From<&ffi::BatchTimes> for BatchTimes {
    fn from(t: &ffi::BatchTimes) -> Self {
        let bytes: Vec<u8> = t
            .graph_error
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        BatchTimes {
            gpu_ms: t.gpu,
            input_sets: t.input_sets,
            front_graphs: t.front_graphs,
            back_graphs: t.back_graphs,
            graph_error: (!bytes.is_empty()).then(|| String::from_utf8_lossy(&bytes).into_owned()),
        }
    }
}

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
    /// Device memory the context may take, bytes (`[[gpu]] memory_budget`); `None`: what the
    /// device has free. Capped at what it has free less [`super::plan::RUNTIME_HEADROOM`]. The
    /// layout is planned within it
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

/// One Pippenger run's shape as the `gpu` backend plans it (sppark's choice for `n` points):
/// exposed for the no-GPU sizing tests.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MsmPlan {
    /// Points.
    pub n: usize,
    /// Window size in bits.
    pub wbits: u32,
    /// Windows.
    pub nwins: u32,
    /// Chunks the points are taken in.
    pub batch: usize,
    /// Points per chunk.
    pub stride: usize,
    /// Bucket (and histogram) entries.
    pub buckets: usize,
    /// Digit entries (`nwins * stride`).
    pub digits: usize,
    /// Sort scratch entries (`2 * stride`).
    pub temps: usize,
}

/// The plan of an MSM over `n` points (`window_bits` 0: sppark's window size).
pub fn msm_plan(n: usize, window_bits: u32) -> MsmPlan {
    msm_plan_with(n, window_bits, 0)
}

/// [`msm_plan`] with the points taken in `chunks` chunks (`0`: sppark's choice), as a streamed
/// H query takes them.
pub fn msm_plan_with(n: usize, window_bits: u32, chunks: u32) -> MsmPlan {
    let mut out = MsmPlan::default();
    // SAFETY: a host-only function of three integers writing one plain struct through `out`.
    unsafe { ffi::splitprover_gpu_msm_plan(n, window_bits, chunks, &mut out) };
    out
}

/// The largest `buckets`, `digits`, `temps` and `stride` of [`msm_plan`] over every `m <= n`
/// (what the backend allocates for a query of `n` points: its plain MSM and every tail MSM).
pub fn msm_cover(n: usize) -> MsmPlan {
    let mut out = MsmPlan::default();
    // SAFETY: as for `msm_plan`.
    unsafe { ffi::splitprover_gpu_msm_cover(n, &mut out) };
    out
}

/// The size a tail MSM over `big` scalars of a query of `2 cap` or `2 cap + 1` runs at: `big`
/// rounded up to a sixteenth of its power of two, at most `cap` (zeros past `big`), so that
/// proofs of one circuit share a few back-half shapes, each one CUDA graph.
pub fn tail_size(big: usize, cap: usize) -> usize {
    // SAFETY: a host-only function of two integers.
    unsafe { ffi::splitprover_gpu_tail_size(big, cap) }
}

/// The device's finishing arithmetic (`sp_side`) run on the host with the same C++ templates:
/// the window sums of L, A and B_G1 (`g1`: three runs of `nwins[j] + 1` points, each run's last
/// the ones) and of B_G2 (`g2`), with `input`. For the no-GPU tests, against
/// [`super::blind::device_reference`]. `None` when the runs are not that long.
pub fn device_finish_check(
    g1: &[G1Projective],
    g2: &[G2Projective],
    nwins: [u32; 4],
    wbits: [u32; 4],
    input: &DeviceBlind,
) -> Option<DeviceSums> {
    let need1: usize = nwins[..3].iter().map(|&n| n as usize + 1).sum();
    if g1.len() != need1 || g2.len() != nwins[3] as usize + 1 || nwins.iter().any(|&n| n > 64) {
        return None;
    }
    let mut out = DeviceSums::default();
    // SAFETY: host-only code reading `need1` G1 and `nwins[3] + 1` G2 points (checked above),
    // four window counts and sizes and one input, and writing one `DeviceSums`.
    unsafe {
        ffi::splitprover_gpu_side_check(
            g1.as_ptr(),
            g2.as_ptr(),
            nwins.as_ptr(),
            wbits.as_ptr(),
            input,
            &mut out,
        )
    };
    Some(out)
}

/// Mismatches between sppark's host-side window integration and the per-segment weights the
/// device's final reduction uses, checked over integers for every window size (0: the identity
/// holds). For the no-GPU tests.
pub fn window_weight_mismatches(seed: u64) -> u32 {
    // SAFETY: a host-only function of one integer.
    unsafe { ffi::splitprover_gpu_window_check(seed) }
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

/// A C++ error value as ours: "no GPU", a sticky CUDA error (the process's context is lost), or
/// another CUDA failure. sppark's `CUDA_OK` reports negated CUDA codes; both signs are taken.
pub(crate) fn sppark_error(e: sppark::Error, what: &str) -> Error {
    let code = e.code.wrapping_abs();
    if is_no_gpu(code) {
        return ErrorKind::NoGpu.into();
    }
    let text = format!("{what}: {} (cuda error {code})", String::from(&e));
    if is_sticky(code) {
        return ErrorKind::DeviceLost(text).into();
    }
    ErrorKind::Cuda(text).into()
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

/// CPU milliseconds of the calling thread so far.
fn thread_cpu_ms() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 * 1e3 + t.tv_nsec as f64 / 1e6
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
        let free = super::cuda::device_info()?.free_bytes;
        let plan = super::plan::plan(
            &lens,
            &super::plan::PlanRequest {
                sms: super::cuda::multiprocessors(device)?,
                budget: options
                    .memory_budget
                    .unwrap_or(free)
                    .min(free.saturating_sub(super::plan::RUNTIME_HEADROOM)),
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
            matrices_streamed: plan.matrices_streamed,
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
