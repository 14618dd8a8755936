//! The C++ side's types and entry points, mirrored field for field
//! (`kernels/cuda/gpu_layout.cuh`, `witness.cuh`, `gpu_prover.cu`).

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

/// Which SRS points a context keeps on the device (`sp_residency`): per query (H, L, A, B_G1,
/// B_G2, as `plan::QUERIES`) a prefix of `resident[q]` points (at least the query's length: all of
/// it); the rest streams for every proof through two staging buffers of `stage_bytes` each.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrsResidency {
    /// Points kept per query.
    pub resident: [usize; 5],
    /// Each staging buffer, bytes (raised to one chunk of 65,536 G2 points, 12 MiB).
    pub stage_bytes: usize,
    /// `0`: the full layout. Otherwise the compact one (module text, lever 4): one input set
    /// with two domain vectors that also hold A's and B's scalars, and the tails of the 0/1
    /// split taken in pieces of this many points (rounded up to whole tiles of 65,536 points,
    /// at most 256 pieces a query).
    pub piece: usize,
    /// Non-zero: a witness-only circuit's matrix rows stream through the staging buffers
    /// (lever 5), which are then allocated even where every query is resident.
    pub matrices: usize,
}

impl SrsResidency {
    /// Every query resident, nothing streamed.
    pub const ALL: SrsResidency = SrsResidency {
        resident: [usize::MAX; 5],
        stage_bytes: 0,
        piece: 0,
        matrices: 0,
    };

    /// Every query streamed through staging buffers of `stage_bytes`.
    pub fn none(stage_bytes: usize) -> SrsResidency {
        SrsResidency {
            resident: [0; 5],
            stage_bytes,
            piece: 0,
            matrices: 0,
        }
    }
}

#[repr(C)]
pub struct Options {
    pub double_buffer: c_int,
    pub wbits_h: u32,
    pub chunks_h: u32,
    pub no_graphs: c_int,
    pub finish: c_int,
    pub beside: c_int,
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
pub type OnProof = unsafe extern "C" fn(user: *mut c_void, index: usize, sums: *const Components);

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
    pub fn splitprover_gpu_msm_plan(n: usize, wbits: u32, chunks: u32, out: *mut super::MsmPlan);
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
