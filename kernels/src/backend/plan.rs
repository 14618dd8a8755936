//! The `gpu` backend's device-memory plan: what a context allocates for an SRS, and the choices
//! that make it fit a memory budget (`[[gpu]] memory_budget`, default what the device has free
//! less [`RUNTIME_HEADROOM`]).
//!
//! The figures come from the CUDA side's own layout function (`splitprover_gpu_layout`, the
//! arithmetic `splitprover_gpu_create` allocates by), so the plan cannot drift from what is
//! allocated; it runs on the host without a GPU.
//!
//! The levers, in the order they are given up (each costs speed, none changes a proof's bytes):
//! 1. the second input set (a batch's copies overlapping the previous proof), taken only when
//!    it fits with [`DeviceLayout::reserve`] to spare;
//! 2. the H MSM's digit memory: its points are resident, so by default all of them are taken in
//!    one chunk, whose digits (windows × points × 4 bytes: 10 GB at a 2^27 domain) are the
//!    largest scratch; taking them in 2, 4, ... 64 chunks divides that by the chunk count.
//!
//! 3. SRS residency: the rest of the SRS is streamed for every proof from the launcher's
//!    page-locked shared image through two staging buffers, each chunk's copy overlapping the
//!    MSM over the previous one. Queries give up their residency from the end of their points,
//!    in the order H, B_G2, B_G1, A, L: H's Pippenger does the most work per point (a sort
//!    and a bucket accumulation per window), so its copies hide behind its own compute and,
//!    H running last, its first chunks are copied while the other four MSMs run; B_G2's
//!    points are twice the bytes for G2 additions that cost about three times a G1 one; L, A
//!    and B_G1 are mostly batch additions of points whose scalar is one, one addition per 96
//!    bytes copied, so streaming them is bound by the copy. Of the staging sizes that fit (1 GiB
//!    down to 12 MiB a buffer), the one whose plan costs a proof the least by a cost model
//!    fitted to the GPU runs in benchmarks/2026-12-06-h100-fullscale/NOTES.md (`streaming_cost`: the copies not hidden, and the
//!    H chunks, each of which sorts its digits again; a streamed H chunk fits a staging buffer,
//!    so smaller buffers mean more chunks, but leave more of a small SRS resident).
//!
//! 4. the compact layout, where even the full layout with every query streamed does not fit
//!    (a 2^27 partition under 36 GiB: a 24 GB card): one input set of two domain vectors
//!    instead of three and A's and B's scalars gathered into them (c is made, or copied from the
//!    slot, after a * b, in b's place; the scalars once the quotient is made), and the 0/1
//!    split's tails taken in pieces, each summed by a Pippenger of its own. It costs a proof a
//!    copy of c that no longer overlaps, launches kernel by kernel, and a Pippenger per piece;
//!    the piece size and staging are chosen by the same cost model (a piece's Pippenger
//!    integrates its buckets again, which an H chunk no longer does). At 2^27 it saves about
//!    8 GiB in the input set and up to 9 GiB of tails.
//!
//! 5. the matrices' rows, where a circuit proved from witness-only slots has its matrices
//!    planned in the budget ([`PlanRequest::matrices`]) and levers 1 to 4 do not fit beside
//!    them: A's, B's and C's CSR offsets and terms (6 GiB at 2^27) stay in host memory,
//!    page-locked, and every proof copies them through the staging buffers, chunk by chunk
//!    before each product, the coefficients, bitmaps and density words staying resident. Taken
//!    last: the copies are not hidden (the products read each term once), and where a budget
//!    holds either, the SRS streams cheaper per byte.
//!
//! A plan that cannot hold the compact layout's scratch and input set with the smallest
//! pieces and staging buffers, every query and the matrices' rows streamed, is refused with
//! the numbers.

use super::gpu::checks::msm_plan_with;
use super::gpu::ffi;
// The residency the planner decides, a C struct the context reads.
pub use super::gpu::ffi::SrsResidency;
use super::MatricesBytes;
use crate::srs::SrsLengths;
use crate::{Error, ErrorKind};

/// Device memory a plan leaves to the CUDA runtime beside what the layout allocates: the NTT
/// twiddle tables sppark allocates at the first proof, the kernels' local memory, the 2 MiB
/// granularity of each allocation. A budget is capped at the device's free memory less this;
/// a plan that left much less ran out at the first 2^27 proof
/// (benchmarks/2026-12-06-h100-fullscale/NOTES.md).
/// The same amount the CUDA side keeps free beside a second input set
/// ([`DeviceLayout::reserve`]).
pub const RUNTIME_HEADROOM: u64 = 1 << 30;

/// Device memory left, under a `memory_budget`, for what the runtime allocates after the plan
/// (sppark's NTT twiddle tables at the first proof, the kernels' local memory, the allocations'
/// rounding): the budget bounds the whole footprint `nvidia-smi` shows for the process, and the
/// CUDA context, already created when the plan is made, is counted apart
/// ([`allocation_budget`]). Half of it was not enough for a 32 GiB PoRep partition at a 24 GiB
/// budget (BENCHMARKS.md has the footprints measured under budgets).
pub const FOOTPRINT_MARGIN: u64 = 512 << 20;

/// The bytes a plan may allocate on a device with `total` bytes of which `free` are free now
/// (the CUDA context of this process already created):
/// - no budget: what is free less [`RUNTIME_HEADROOM`];
/// - a budget: the budget is the process's whole device footprint, so what the device already
///   uses (this process's context; on a shared card also the others' memory, which only makes
///   the plan smaller) and [`FOOTPRINT_MARGIN`] come off it; never more than the first.
pub fn allocation_budget(budget: Option<u64>, total: u64, free: u64) -> u64 {
    let cap = free.saturating_sub(RUNTIME_HEADROOM);
    match budget {
        None => cap,
        Some(b) => {
            let in_use = total.saturating_sub(free);
            b.saturating_sub(in_use)
                .saturating_sub(FOOTPRINT_MARGIN)
                .min(cap)
        }
    }
}

/// What a context allocates for one SRS, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceLayout {
    /// The H query's points.
    pub srs_h: u64,
    /// The L query's points.
    pub srs_l: u64,
    /// The A query's points.
    pub srs_a: u64,
    /// The B query's points in G1.
    pub srs_b_g1: u64,
    /// The B query's points in G2.
    pub srs_b_g2: u64,
    /// One input set: a, b, c (then h), the assignment, the density words.
    pub set: u64,
    /// The scratch allocated once: gathers, 0/1 splits, tails, MSM buckets, digits, sums.
    pub once: u64,
    /// The H MSM's digits, included in `once`.
    pub h_digits: u64,
    /// Device memory a second input set must leave free (NTT twiddles, the runtime).
    pub reserve: u64,
    /// The H MSM's window size in bits.
    pub h_window_bits: u32,
    /// The chunks the H MSM takes its points in.
    pub h_chunks: u32,
    /// Points kept resident per query (H, L, A, B_G1, B_G2): a prefix of each.
    pub resident_points: [u64; 5],
    /// The query lengths, for [`DeviceLayout::streams`].
    pub points: [u64; 5],
    /// SRS bytes copied from the host image for every proof.
    pub streamed: u64,
    /// The two staging buffers the streamed points go through (included in `once`).
    pub stage: u64,
    /// The compact layout's tail piece, points (`0`: the full layout; [`SrsResidency::piece`]).
    pub piece: u64,
    /// The staging buffers also carry the matrices' rows ([`SrsResidency::matrices`]).
    pub matrices_staged: bool,
}

/// The SRS queries in the order [`DeviceLayout::resident_points`] lists them.
pub const QUERIES: [&str; 5] = ["H", "L", "A", "B_G1", "B_G2"];

/// The bytes of one point of each query (G1 affine, and B_G2's G2 affine).
pub const POINT_BYTES: [u64; 5] = [96, 96, 96, 96, 192];

/// The order queries give up residency in (indices into [`QUERIES`]); see the module's text.
const STREAM_ORDER: [usize; 5] = [0, 4, 3, 2, 1];

/// Staging buffer sizes tried, largest first.
const STAGE_STEPS: [u64; 7] = [
    1 << 30,
    512 << 20,
    256 << 20,
    128 << 20,
    64 << 20,
    32 << 20,
    12 << 20,
];

impl DeviceLayout {
    /// The layout for an SRS of `lens` on a device of `sms` multiprocessors, with the H MSM's
    /// window size and chunks (`0`: the backend's choice), every query resident.
    pub fn of(lens: &SrsLengths, sms: u32, h_window_bits: u32, h_chunks: u32) -> DeviceLayout {
        Self::with_residency(lens, sms, h_window_bits, h_chunks, &SrsResidency::ALL)
    }

    /// [`DeviceLayout::of`] keeping `res.resident[q]` points of query `q` resident (rounded
    /// down to whole chunks of `res.stage_bytes`) and streaming the rest.
    pub fn with_residency(
        lens: &SrsLengths,
        sms: u32,
        h_window_bits: u32,
        h_chunks: u32,
        res: &SrsResidency,
    ) -> DeviceLayout {
        let srs = ffi::Srs {
            h: std::ptr::null(),
            n_h: lens.h,
            l: std::ptr::null(),
            n_l: lens.l,
            a: std::ptr::null(),
            n_a: lens.a,
            b_g1: std::ptr::null(),
            n_b: lens.b_g1,
            b_g2: std::ptr::null(),
            n_inputs: lens.ic,
        };
        let mut out = ffi::LayoutBytes::default();
        // SAFETY: a host-only function that reads the lengths of `srs` (never its pointers)
        // and `res`, and writes one plain struct through `out`; all live across the call.
        unsafe {
            ffi::splitprover_gpu_layout(
                &srs,
                sms.min(i32::MAX as u32) as i32,
                h_window_bits,
                h_chunks,
                res,
                &mut out,
            )
        };
        DeviceLayout {
            srs_h: out.srs_h as u64,
            srs_l: out.srs_l as u64,
            srs_a: out.srs_a as u64,
            srs_b_g1: out.srs_b_g1 as u64,
            srs_b_g2: out.srs_b_g2 as u64,
            set: out.set as u64,
            once: out.once as u64,
            h_digits: out.h_digits as u64,
            reserve: out.reserve as u64,
            h_window_bits: out.wbits_h,
            h_chunks: out.chunks_h,
            resident_points: out.resident.map(|p| p as u64),
            points: [lens.h, lens.l, lens.a, lens.b_g1, lens.b_g2].map(|p| p as u64),
            streamed: out.streamed as u64,
            stage: out.stage as u64,
            piece: out.piece as u64,
            matrices_staged: res.matrices != 0,
        }
    }

    /// The SRS's resident points, every query.
    pub fn srs(&self) -> u64 {
        self.srs_h + self.srs_l + self.srs_a + self.srs_b_g1 + self.srs_b_g2
    }

    /// Whether part of the SRS streams from the host.
    pub fn streams(&self) -> bool {
        self.resident_points != self.points
    }

    /// The residency to create a context with.
    pub fn residency(&self) -> SrsResidency {
        SrsResidency {
            resident: self.resident_points.map(|p| p as usize),
            stage_bytes: (self.stage / 2) as usize,
            piece: self.piece as usize,
            matrices: usize::from(self.matrices_staged),
        }
    }

    /// What proving needs with `sets` input sets.
    pub fn total(&self, sets: u32) -> u64 {
        self.srs() + self.once + u64::from(sets) * self.set
    }
}

/// How a context is set up within a budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevicePlan {
    /// The layout chosen.
    pub layout: DeviceLayout,
    /// Input sets: 2 when a batch's copies overlap the previous proof.
    pub input_sets: u32,
    /// The budget planned for, bytes (the matrices' share included).
    pub budget: u64,
    /// The witness-only circuit's matrices planned beside the SRS ([`PlanRequest::matrices`]).
    pub matrices: MatricesBytes,
}

impl DevicePlan {
    /// Whether the matrices' rows stream for every proof (lever 5) instead of staying
    /// resident: the layout's staging buffers carry them.
    pub fn matrices_streamed(&self) -> bool {
        self.layout.matrices_staged
    }

    /// The device memory the plan takes, the matrices' share included.
    pub fn bytes(&self) -> u64 {
        self.layout.total(self.input_sets) + self.matrices.device(self.matrices_streamed())
    }

    /// One line for logs and `status`: `SRS 47.4 GiB resident, scratch 30.1 GiB, 1 input set of
    /// 16.9 GiB, H MSM 8 chunks: 94.4 GiB of a 95.0 GiB budget`; a streaming plan says what
    /// streams: `SRS 30.2 GiB resident, 14.0 GiB streamed per proof (H 61 %, B_G2 100 %)
    /// through 2 x 512 MiB, ...`.
    pub fn describe(&self) -> String {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let streamed = if self.layout.streams() {
            let parts: Vec<String> = (0..5)
                .filter(|&q| self.layout.resident_points[q] < self.layout.points[q])
                .map(|q| {
                    let n = self.layout.points[q];
                    let off = n - self.layout.resident_points[q];
                    format!("{} {:.0} %", QUERIES[q], 100.0 * off as f64 / n as f64)
                })
                .collect();
            format!(
                ", {:.1} GiB streamed per proof ({}) through 2 x {} MiB",
                gib(self.layout.streamed),
                parts.join(", "),
                (self.layout.stage / 2) >> 20
            )
        } else {
            String::new()
        };
        let compact = if self.layout.piece == 0 {
            String::new()
        } else {
            format!(
                " compact (c after a * b, A's and B's scalars in it, tails in pieces of {} \
                 points)",
                self.layout.piece
            )
        };
        let matrices = match (self.matrices.rows, self.matrices_streamed()) {
            (0, _) => String::new(),
            (rows, true) => format!(
                ", matrices {:.2} GiB resident and their {:.1} GiB of rows streamed per proof",
                gib(self.matrices.fixed),
                gib(rows)
            ),
            (_, false) => format!(", matrices {:.1} GiB", gib(self.matrices.device(false))),
        };
        format!(
            "SRS {:.1} GiB resident{streamed}, scratch {:.1} GiB, {} input set{}{compact} of \
             {:.1} GiB, H MSM {} chunk{} of {}-bit windows{matrices}: {:.1} GiB of a {:.1} GiB \
             budget",
            gib(self.layout.srs()),
            gib(self.layout.once),
            self.input_sets,
            if self.input_sets == 1 { "" } else { "s" },
            gib(self.layout.set),
            self.layout.h_chunks,
            if self.layout.h_chunks == 1 { "" } else { "s" },
            self.layout.h_window_bits,
            gib(self.bytes()),
            gib(self.budget),
        )
    }
}

/// What [`plan`] is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanRequest {
    /// The device's multiprocessors.
    pub sms: u32,
    /// Bytes the plan may take.
    pub budget: u64,
    /// Whether a second input set is wanted (`GpuOptions::overlap`).
    pub overlap: bool,
    /// The H MSM's window size in bits, `0`: the backend's choice.
    pub h_window_bits: u32,
    /// The H MSM's chunks, `None`: the backend's choice, more where the budget needs it; a
    /// given count is kept.
    pub h_chunks: Option<u32>,
    /// The matrices of the circuit proved from witness-only slots, planned within the budget
    /// (zeros: none).
    pub matrices: MatricesBytes,
}

/// The H MSM's chunk counts the planner tries after the backend's own choice.
const CHUNK_STEPS: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];

/// Seconds per GiB of SRS streamed that a proof loses: the part of the copies not hidden
/// behind the MSMs. Fitted as a partition's extra GPU time with every query streamed over the
/// GiB it streamed (the run in benchmarks/2026-12-06-h100-tiers/NOTES.md); only its ratio to the other
/// costs matters, since plans are compared, never timed, with it.
const STREAM_SECONDS_PER_GIB: f64 = 0.204 / 22.1;

/// Seconds a chunk of a Pippenger costs per bucket of each of its windows: each chunk sorts its
/// digits into every window's buckets again (its chunks add into the same buckets and are
/// integrated once). Fitted as the extra GPU time of an H MSM taken in more chunks, less what
/// its extra streaming costs ([`STREAM_SECONDS_PER_GIB`]), over the chunks added times its
/// windows times their buckets (`gpu_check --phases` at 2^27; the run in
/// benchmarks/2026-12-06-h100-one-integration/NOTES.md).
const CHUNK_BUCKET_SECONDS: f64 = 0.238 / (36.0 * 15.0 * 131_072.0);

/// Seconds one row integration costs per bucket of each window: a Pippenger's integration of
/// its buckets, one block per window. Fitted as [`CHUNK_BUCKET_SECONDS`] is, from the same
/// chunks added to a build that integrated once a chunk, less their copies and their sorting
/// (the run in benchmarks/2026-12-06-h100-one-integration/NOTES.md).
const INTEGRATE_BUCKET_SECONDS: f64 = (0.816 - 0.238) / (36.0 * 15.0 * 131_072.0);

/// What a streaming plan of `lens` is expected to add to a proof's GPU time, seconds: its
/// streamed bytes and its H chunks (the staging size bounds a streamed H chunk, so smaller
/// buffers mean more chunks), each sorting into the buckets of every window of the H MSM's
/// plan. Only compared between plans of one SRS and budget.
fn streaming_cost(lens: &SrsLengths, l: &DeviceLayout) -> f64 {
    let h = msm_plan_with(lens.h, l.h_window_bits, l.h_chunks);
    l.streamed as f64 / (1u64 << 30) as f64 * STREAM_SECONDS_PER_GIB
        + f64::from(l.h_chunks) * h.buckets as f64 * CHUNK_BUCKET_SECONDS
}

/// Every query resident: the backend's own layout, then (unless `req.h_chunks` fixes them) the
/// H MSM in more chunks; staging buffers for the matrices' rows where `matrices` is non-zero.
fn resident_layouts(lens: &SrsLengths, req: &PlanRequest, matrices: usize) -> Vec<DeviceLayout> {
    let res = SrsResidency {
        matrices,
        stage_bytes: if matrices != 0 {
            STAGE_STEPS[2] as usize
        } else {
            0
        },
        ..SrsResidency::ALL
    };
    let of = |c| DeviceLayout::with_residency(lens, req.sms, req.h_window_bits, c, &res);
    let first = of(req.h_chunks.unwrap_or(0));
    let mut layouts = vec![first];
    if req.h_chunks.is_none() {
        layouts.extend(
            CHUNK_STEPS
                .iter()
                .filter(|&&c| c > first.h_chunks)
                .map(|&c| of(c)),
        );
    }
    layouts
}

/// The H chunking streaming starts from: the given one, else the resident layouts' that needs
/// the least scratch (lever 2 taken in full).
fn streaming_h_chunks(layouts: &[DeviceLayout], req: &PlanRequest) -> u32 {
    req.h_chunks.unwrap_or_else(|| {
        layouts
            .iter()
            .min_by_key(|l| l.total(1))
            .map_or(0, |l| l.h_chunks)
    })
}

/// The least device memory the full layout takes for a proof of `lens`: every query streamed
/// through the smallest staging buffers, the H MSM chunked as [`plan`] streams it. [`plan`]
/// fits any budget of at least its `total(1)` without the compact layout.
pub fn smallest(lens: &SrsLengths, req: &PlanRequest) -> DeviceLayout {
    smallest_with(lens, req, 0)
}

/// The least device memory any plan takes for a proof of `lens`: the compact layout with its
/// smallest tail pieces and every query streamed through the smallest staging buffers.
/// [`plan`] fits any budget of at least its `total(1)` and refuses a smaller one.
pub fn smallest_compact(lens: &SrsLengths, req: &PlanRequest) -> DeviceLayout {
    smallest_with(lens, req, PIECE_LEAST)
}

fn smallest_with(lens: &SrsLengths, req: &PlanRequest, piece: usize) -> DeviceLayout {
    let layouts = resident_layouts(lens, req, 0);
    let stage = STAGE_STEPS[STAGE_STEPS.len() - 1] as usize;
    DeviceLayout::with_residency(
        lens,
        req.sms,
        req.h_window_bits,
        streaming_h_chunks(&layouts, req),
        &SrsResidency {
            piece,
            ..SrsResidency::none(stage)
        },
    )
}

/// The least tail piece of the compact layout, points: one tile of the split's prefix sums
/// (the CUDA side rounds a piece up to whole tiles, and to at most 256 pieces a query).
const PIECE_LEAST: usize = 1 << 16;

/// The tail pieces the compact layout tries, points, largest first: a whole query (one piece:
/// the full layout's tails), then halves down to [`PIECE_LEAST`].
fn piece_steps(lens: &SrsLengths) -> Vec<usize> {
    let whole = lens.l.max(lens.a).max(lens.b_g1).max(1);
    let mut steps = vec![whole];
    let mut p = (whole.next_power_of_two() / 2).max(PIECE_LEAST);
    while p >= PIECE_LEAST && p < *steps.last().unwrap_or(&usize::MAX) {
        steps.push(p);
        p /= 2;
    }
    steps
}

/// What the compact layout's tail pieces add to a proof's GPU time, seconds: every piece after a
/// query's first runs a Pippenger of its own, which sorts its digits and integrates the buckets
/// of every window again ([`CHUNK_BUCKET_SECONDS`], [`INTEGRATE_BUCKET_SECONDS`]; at most a
/// tail of half the piece). Only compared between plans of one SRS and budget.
fn pieces_cost(lens: &SrsLengths, piece: u64) -> f64 {
    if piece == 0 {
        return 0.0;
    }
    // L, A, B_G1 and B_G2
    [lens.l, lens.a, lens.b_g1, lens.b_g2]
        .iter()
        .map(|&n| {
            let n = n as u64;
            let pieces = n.div_ceil(piece).max(1);
            let tail = msm_plan_with((piece.min(n) / 2) as usize, 0, 0);
            (pieces - 1) as f64
                * tail.buckets as f64
                * (CHUNK_BUCKET_SECONDS + INTEGRATE_BUCKET_SECONDS)
        })
        .sum()
}

/// The plan a layout gives within `req.budget`, if it fits: two input sets where asked and
/// affordable (never in the compact layout, which has one).
fn fitting(layout: &DeviceLayout, req: &PlanRequest) -> Option<DevicePlan> {
    (layout.total(1) <= req.budget).then(|| {
        let two =
            req.overlap && layout.piece == 0 && layout.total(2) + layout.reserve <= req.budget;
        DevicePlan {
            layout: *layout,
            input_sets: if two { 2 } else { 1 },
            budget: req.budget,
            matrices: MatricesBytes::default(),
        }
    })
}

/// Of the staging sizes that fit with tail pieces of `piece` points (`0`: the full layout),
/// the plan expected to cost a proof the least ([`streaming_cost`], [`pieces_cost`]): larger
/// buffers mean fewer H chunks (each sorts its digits again), smaller ones leave more of the
/// SRS resident. With its cost.
fn cheapest_streaming(
    lens: &SrsLengths,
    req: &PlanRequest,
    h_chunks: u32,
    piece: usize,
    matrices: usize,
) -> Option<(f64, DevicePlan)> {
    let mut best: Option<(f64, DevicePlan)> = None;
    for stage in STAGE_STEPS {
        let mut res = SrsResidency {
            stage_bytes: stage as usize,
            piece,
            matrices,
            ..SrsResidency::ALL
        };
        let mut layout =
            DeviceLayout::with_residency(lens, req.sms, req.h_window_bits, h_chunks, &res);
        // Each query in turn gives up what the budget is over by, again while it still holds
        // points (the first streamed query brings the staging buffers, and a streamed H its
        // chunking, into the sums).
        'queries: for q in STREAM_ORDER {
            loop {
                let over = layout.total(1).saturating_sub(req.budget);
                if over == 0 {
                    break 'queries;
                }
                let point = POINT_BYTES[q];
                let keep = (layout.resident_points[q] * point).saturating_sub(over) / point;
                if layout.resident_points[q] == 0 || keep as usize >= res.resident[q] {
                    break;
                }
                res.resident[q] = keep as usize;
                layout =
                    DeviceLayout::with_residency(lens, req.sms, req.h_window_bits, h_chunks, &res);
            }
        }
        if let Some(p) = fitting(&layout, req) {
            let cost = streaming_cost(lens, &p.layout) + pieces_cost(lens, p.layout.piece);
            // ties go to the larger buffers, tried first
            if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                best = Some((cost, p));
            }
        }
    }
    best
}

/// Plans a context for an SRS of `lens` and the matrices `req.matrices` within `req.budget`:
/// the backend's own layout where it fits (two input sets where asked and affordable), else the
/// fewest H chunks that fit, else the least of the SRS streamed, else the compact layout, each
/// beside the resident matrices; else the same with the matrices' rows streamed (lever 5,
/// module text).
///
/// Errors: [`ErrorKind::Cuda`] naming what the scratch, one input set and the matrices need
/// against the budget, when even the compact layout with every query and the matrices' rows
/// streamed does not fit.
pub fn plan(lens: &SrsLengths, req: &PlanRequest) -> Result<DevicePlan, Error> {
    let m = req.matrices;
    let levers = |rows_streamed: bool| {
        let share = PlanRequest {
            budget: req.budget.saturating_sub(m.device(rows_streamed)),
            ..*req
        };
        plan_srs(lens, &share, usize::from(rows_streamed)).map(|p| DevicePlan {
            budget: req.budget,
            matrices: m,
            ..p
        })
    };
    if let Some(p) = levers(false) {
        return Ok(p);
    }
    if m.rows > 0 {
        if let Some(p) = levers(true) {
            return Ok(p);
        }
    }
    let least = smallest_compact(lens, req);
    let gib = |b: u64| format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64);
    let matrices = if m.rows > 0 {
        format!(
            ", {} for the witness matrices with their {} of rows streamed",
            gib(m.fixed),
            gib(m.rows)
        )
    } else {
        String::new()
    };
    Err(ErrorKind::Cuda(format!(
        "a proof needs at least {} of device memory ({} of scratch with the H MSM in {} \
         chunks and tails in pieces of {} points, {} for one input set of the compact layout, \
         {} of the SRS kept resident, {} of it streamed from the host for every proof{matrices}), \
         but the budget is {}\nhint: raise `memory_budget` in `[[gpu]]` (default: what the \
         device has free less 1 GiB), or use a device with more memory",
        gib(least.total(1) + m.fixed),
        gib(least.once),
        least.h_chunks,
        least.piece,
        gib(least.set),
        gib(least.srs()),
        gib(least.streamed),
        gib(req.budget),
    ))
    .into())
}

/// Levers 1 to 4 for the SRS within `req.budget` (the matrices' share taken out), the staging
/// buffers also carrying the matrices' rows where `matrices` is non-zero.
fn plan_srs(lens: &SrsLengths, req: &PlanRequest, matrices: usize) -> Option<DevicePlan> {
    let layouts = resident_layouts(lens, req, matrices);
    if let Some(p) = layouts.iter().find_map(|l| fitting(l, req)) {
        return Some(p);
    }
    let h_chunks = streaming_h_chunks(&layouts, req);
    if let Some((_, p)) = cheapest_streaming(lens, req, h_chunks, 0, matrices) {
        return Some(p);
    }
    // The compact layout: of every piece size, the plan expected to cost the least.
    piece_steps(lens)
        .into_iter()
        .filter_map(|piece| cheapest_streaming(lens, req, h_chunks, piece, matrices))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_budget_bounds_the_whole_footprint_the_context_included() {
        const MIB: u64 = 1 << 20;
        let (total, context) = (80 * GIB, 530 * MIB);
        let free = total - context;
        // No budget: what is free less the runtime's headroom.
        assert_eq!(
            allocation_budget(None, total, free),
            free - RUNTIME_HEADROOM
        );
        // A 24 GiB budget: the context and the runtime's margin come off it, so the context,
        // the plan and the margin add up to the budget.
        let b = 24 * GIB;
        let a = allocation_budget(Some(b), total, free);
        assert_eq!(context + a + FOOTPRINT_MARGIN, b);
        // Never more than the free memory allows.
        assert_eq!(
            allocation_budget(Some(200 * GIB), total, free),
            free - RUNTIME_HEADROOM
        );
        // Another process's memory on the card only makes the plan smaller.
        let shared = allocation_budget(Some(b), total, free - 2 * GIB);
        assert_eq!(shared, a - 2 * GIB);
        // A budget below what is in use already leaves nothing (the plan then refuses).
        assert_eq!(allocation_budget(Some(context), total, free), 0);
    }

    use super::*;

    /// A full-size 32 GiB PoRep partition's SRS (`porep-like:1`): 2^27 H points.
    fn porep_32g() -> SrsLengths {
        SrsLengths {
            h: (1 << 27) - 1,
            l: 130_169_893,
            a: 130_170_221,
            b_g1: 33_112_281,
            b_g2: 33_112_281,
            ic: 328,
        }
    }

    fn sha38() -> SrsLengths {
        SrsLengths {
            h: (1 << 20) - 1,
            l: 981_000,
            a: 981_001,
            b_g1: 700_000,
            b_g2: 700_000,
            ic: 2,
        }
    }

    const GIB: u64 = 1 << 30;
    const H100_SMS: u32 = 132;

    fn request(budget: u64) -> PlanRequest {
        PlanRequest {
            sms: H100_SMS,
            budget,
            overlap: true,
            h_window_bits: 0,
            h_chunks: None,
            matrices: MatricesBytes::default(),
        }
    }

    #[test]
    fn the_layout_adds_up_and_points_are_their_affine_sizes() {
        let lens = porep_32g();
        let l = DeviceLayout::of(&lens, H100_SMS, 0, 0);
        assert_eq!(l.srs_h, lens.h as u64 * 96);
        assert_eq!(l.srs_b_g2, lens.b_g2 as u64 * 192);
        assert_eq!(
            l.srs(),
            l.srs_h + l.srs_l + l.srs_a + l.srs_b_g1 + l.srs_b_g2
        );
        // a, b, c over the 2^27 domain plus the assignment, at least.
        assert!(l.set >= (3 << 27) * 32 + (lens.l as u64 + 328) * 32);
        assert!(l.h_digits > 0 && l.h_digits < l.once);
        assert_eq!(l.total(2) - l.total(1), l.set);
        // The 44 GiB SRS of a 32 GiB sector.
        assert!((44 * GIB..45 * GIB).contains(&l.srs()), "{}", l.srs());
        // the runtime's headroom is the one the CUDA side keeps beside a second set
        assert_eq!(l.reserve, RUNTIME_HEADROOM);
    }

    #[test]
    fn more_h_chunks_divide_the_digits_and_nothing_else() {
        let lens = porep_32g();
        let one = DeviceLayout::of(&lens, H100_SMS, 14, 1);
        let eight = DeviceLayout::of(&lens, H100_SMS, 14, 8);
        assert_eq!((one.h_chunks, eight.h_chunks), (1, 8));
        assert!(eight.h_digits * 7 < one.h_digits, "{one:?} {eight:?}");
        assert_eq!(one.srs(), eight.srs());
        assert_eq!(one.set, eight.set);
        assert!(eight.once < one.once);
    }

    #[test]
    fn a_roomy_budget_keeps_the_backends_layout_and_both_input_sets() {
        let lens = sha38();
        let own = DeviceLayout::of(&lens, H100_SMS, 0, 0);
        let p = plan(&lens, &request(80 * GIB)).unwrap();
        assert_eq!(p.layout, own);
        assert_eq!(p.input_sets, 2);
        assert!(p.bytes() <= p.budget);
        // Without overlap: one set.
        let p = plan(
            &lens,
            &PlanRequest {
                overlap: false,
                ..request(80 * GIB)
            },
        )
        .unwrap();
        assert_eq!(p.input_sets, 1);
        assert!(p.describe().contains("1 input set of"), "{}", p.describe());
    }

    #[test]
    fn a_tight_budget_gives_up_the_second_set_first_then_takes_the_h_msm_in_chunks() {
        let lens = porep_32g();
        let own = DeviceLayout::of(&lens, H100_SMS, 0, 0);
        // Room for one set only: the backend's own layout with one set.
        let p = plan(&lens, &request(own.total(1) + own.set / 2)).unwrap();
        assert_eq!((p.layout, p.input_sets), (own, 1));
        // Less than that: more H chunks, the fewest that fit.
        let budget = own.total(1) - own.h_digits / 2;
        let p = plan(&lens, &request(budget)).unwrap();
        assert!(p.layout.h_chunks > own.h_chunks);
        assert!(p.bytes() <= budget);
        let fewer = DeviceLayout::of(&lens, H100_SMS, 0, p.layout.h_chunks / 2);
        assert!(
            p.layout.h_chunks / 2 <= own.h_chunks || fewer.total(1) > budget,
            "a smaller chunk count would have fit"
        );
        // A given chunk count is kept: then part of the SRS streams instead.
        let fixed = PlanRequest {
            h_chunks: Some(own.h_chunks),
            ..request(budget)
        };
        let p = plan(&lens, &fixed).unwrap();
        assert!(
            p.layout.streams() && p.bytes() <= budget,
            "{}",
            p.describe()
        );
    }

    /// Streams, in the order they give up residency.
    fn streamed_queries(l: &DeviceLayout) -> Vec<&'static str> {
        STREAM_ORDER
            .iter()
            .filter(|&&q| l.resident_points[q] < l.points[q])
            .map(|&q| QUERIES[q])
            .collect()
    }

    #[test]
    fn under_the_srs_h_streams_first_then_b_g2_b_g1_a_l_each_only_what_it_must() {
        let lens = porep_32g();
        let mut last_streamed = 0;
        let mut last_count = 0;
        for budget_gib in [75, 71, 70, 60, 50, 45, 40, 36] {
            let budget = budget_gib * GIB;
            let p = plan(&lens, &request(budget)).unwrap();
            let l = &p.layout;
            let streamed = streamed_queries(l);
            println!("{budget_gib} GiB: {} ({streamed:?})", p.describe());
            assert!(p.bytes() <= budget, "{}", p.describe());
            assert!(l.streams(), "{}", p.describe());
            assert_eq!(p.input_sets, 1);
            // a prefix of the order: a query streams only once those before it stream whole
            assert_eq!(
                streamed[..],
                ["H", "B_G2", "B_G1", "A", "L"][..streamed.len()]
            );
            for &q in &STREAM_ORDER[..streamed.len() - 1] {
                assert_eq!(l.resident_points[q], 0, "{}", QUERIES[q]);
            }
            // what streams is what is not resident, and the SRS is all accounted for
            assert_eq!(
                l.srs() + l.streamed,
                DeviceLayout::of(&lens, H100_SMS, 0, 0).srs()
            );
            assert!(l.streamed >= last_streamed && streamed.len() >= last_count);
            // staging buffers of at most 1 GiB, more than the smallest where the SRS is large
            assert!(
                l.stage <= 2 << 30 && l.stage > 2 * (12 << 20),
                "{}",
                p.describe()
            );
            last_streamed = l.streamed;
            last_count = streamed.len();
        }
        // A 32 GiB partition on an 80 GB H100 beside its witness matrices (6.8 GiB): a part
        // of H streams, the rest stays.
        let p = plan(&lens, &request(78 * GIB - 7 * GIB)).unwrap();
        assert_eq!(streamed_queries(&p.layout), ["H"], "{}", p.describe());
        assert!(p.layout.resident_points[0] > 0);
        assert!(
            p.describe().contains("streamed per proof (H "),
            "{}",
            p.describe()
        );
    }

    #[test]
    fn streamed_prefixes_are_whole_chunks_and_h_chunks_fit_a_staging_buffer() {
        let lens = porep_32g();
        for stage in [12 << 20, 100 << 20, 1 << 30] {
            let res = SrsResidency {
                resident: [50_000_000, 70_000_000, 1_000_000, 5, usize::MAX],
                stage_bytes: stage,
                piece: 0,
                matrices: 0,
            };
            let l = DeviceLayout::with_residency(&lens, H100_SMS, 0, 0, &res);
            let g1 = (stage / 96) as u64 / 65_536 * 65_536;
            for q in 1..4 {
                assert_eq!(l.resident_points[q] % g1, 0, "{q}: {l:?}");
                assert!(l.resident_points[q] <= res.resident[q] as u64);
                assert!(l.resident_points[q] + g1 > res.resident[q] as u64);
            }
            assert_eq!(l.resident_points[4], l.points[4]);
            // H's chunks hold at most a staging buffer's points; its prefix is whole chunks
            let h = super::msm_plan_with(lens.h, l.h_window_bits, l.h_chunks);
            assert!(h.stride as u64 <= g1, "{h:?}");
            assert_eq!(l.resident_points[0] % h.stride as u64, 0);
            assert!(l.stage >= 2 * 65_536 * 192 && l.stage <= 2 * stage.max(65_536 * 192) as u64);
            let streamed: u64 = (0..5)
                .map(|q| (l.points[q] - l.resident_points[q]) * POINT_BYTES[q])
                .sum();
            assert_eq!(l.streamed, streamed);
        }
    }

    #[test]
    fn the_staging_size_trades_the_bytes_streamed_against_the_h_chunks() {
        let lens = porep_32g();
        // An 80 GB H100's default budget beside a 2^27 partition's matrices
        // (benchmarks/2026-12-06-h100-fullscale/NOTES.md):
        // of the staging sizes that fit, 2 x 1020 MiB (H in about 13 chunks) costs
        // less than 2 x 510 MiB (about 25 chunks), though it streams about 1 GiB more.
        let p = plan(&lens, &request(72_508 << 20)).unwrap();
        let l = p.layout;
        assert_eq!(l.stage, 2 * (1020 << 20), "{}", p.describe());
        assert!(l.h_chunks <= 14, "{}", p.describe());
        let half = DeviceLayout::with_residency(
            &lens,
            H100_SMS,
            0,
            0,
            &SrsResidency {
                resident: [0, usize::MAX, usize::MAX, usize::MAX, usize::MAX],
                stage_bytes: 510 << 20,
                piece: 0,
                matrices: 0,
            },
        );
        assert!(half.h_chunks > l.h_chunks);
        // the model itself: more chunks cost, and so do more bytes
        let more_chunks = DeviceLayout {
            h_chunks: l.h_chunks * 2,
            ..l
        };
        let more_bytes = DeviceLayout {
            streamed: l.streamed + GIB,
            ..l
        };
        let cost = |l: &DeviceLayout| streaming_cost(&lens, l);
        assert!(cost(&more_chunks) > cost(&l));
        assert!(cost(&more_bytes) > cost(&l));
    }

    #[test]
    fn between_the_least_and_the_whole_srs_a_small_srs_stays_partly_resident() {
        let lens = sha38();
        let least = smallest(&lens, &request(0));
        let srs = DeviceLayout::of(&lens, H100_SMS, 0, 0).srs();
        for quarters in 1..4 {
            let budget = least.total(1) + srs / 4 * quarters;
            let p = plan(&lens, &request(budget)).unwrap();
            let l = p.layout;
            assert!(p.bytes() <= budget, "{}", p.describe());
            assert!(l.streamed > 0 && l.srs() > 0, "{}", p.describe());
            assert_eq!(l.srs() + l.streamed, srs);
        }
    }

    /// `porep-like:2`: half a 32 GiB partition (lengths rounded).
    fn porep_2_26() -> SrsLengths {
        SrsLengths {
            h: (1 << 26) - 1,
            l: 65_084_946,
            a: 65_085_110,
            b_g1: 16_556_140,
            b_g2: 16_556_140,
            ic: 164,
        }
    }

    #[test]
    fn a_2_26_partition_fits_24_gib_by_streaming_and_16_gib_compact() {
        let lens = porep_2_26();
        let p = plan(&lens, &request(24 * GIB)).unwrap();
        println!("24 GiB: {}", p.describe());
        assert!(p.layout.streams() && p.bytes() <= 24 * GIB);
        assert_eq!(p.layout.piece, 0, "the full layout fits: {}", p.describe());
        let p = plan(&lens, &request(16 * GIB)).unwrap();
        println!("16 GiB: {}", p.describe());
        assert!(
            p.layout.piece > 0 && p.bytes() <= 16 * GIB,
            "{}",
            p.describe()
        );
        assert_eq!(p.input_sets, 1);
        assert!(
            p.describe().contains("compact (c after a * b"),
            "{}",
            p.describe()
        );
        // below the full layout's least, above the compact one's
        assert!(smallest(&lens, &request(0)).total(1) > 16 * GIB);
    }

    #[test]
    fn a_32_gib_partition_plans_compact_under_24_and_16_gib() {
        let lens = porep_32g();
        let whole = DeviceLayout::of(&lens, H100_SMS, 0, 0).srs();
        // 24 GiB, and 24 GiB less the witness path's matrices (6.2 GiB at 2^27); 16 GiB
        for budget in [24 * GIB, 24 * GIB - (6_349 << 20), 16 * GIB] {
            let p = plan(&lens, &request(budget)).unwrap();
            println!("{:.1} GiB: {}", budget as f64 / GIB as f64, p.describe());
            assert!(p.layout.piece > 0, "{}", p.describe());
            assert!(p.bytes() <= budget && p.input_sets == 1, "{}", p.describe());
            assert_eq!(p.layout.srs() + p.layout.streamed, whole);
        }
        // at 24 GiB part of the SRS stays resident; the tails are in pieces of whole tiles
        let p = plan(&lens, &request(24 * GIB)).unwrap();
        assert!(p.layout.srs() > 0, "{}", p.describe());
        assert_eq!(p.layout.piece % 65_536, 0);
    }

    #[test]
    fn the_compact_input_set_holds_two_domain_vectors_and_the_gathered_scalars() {
        let lens = porep_32g();
        let full = smallest(&lens, &request(0));
        let least = smallest_compact(&lens, &request(0));
        let domain = 1u64 << 27;
        let words = (2 * lens.l.div_ceil(64) + lens.ic.div_ceil(64)) as u64 * 8;
        let set = (domain
            + domain.max(lens.a as u64)
            + lens.b_g1 as u64
            + lens.ic as u64
            + lens.l as u64)
            * 32
            + words;
        assert_eq!(least.set, set);
        assert_eq!(full.set - least.set, (domain - lens.b_g1 as u64) * 32);
        // no scalar buffers of their own, tails of half a piece (65,536 points rounded up to
        // at most 256 pieces a query: 524,288 at 2^27)
        assert_eq!(least.piece, 524_288);
        let tails = |n: u64, nb: u64| (n / 2 + 1) * (32 + 96) + (nb / 2 + 1) * 192;
        let full_tails = tails(lens.a as u64, lens.b_g1 as u64);
        let least_tails = tails(least.piece, least.piece);
        let scalars = (lens.a + lens.b_g1) as u64 * 32;
        assert_eq!(
            full.once - least.once,
            scalars + full_tails - least_tails,
            "{full:?} {least:?}"
        );
        // the least a 2^27 proof takes now: under 16 GiB
        println!(
            "the least at 2^27: full layout {:.2} GiB, compact {:.2} GiB",
            full.total(1) as f64 / GIB as f64,
            least.total(1) as f64 / GIB as f64
        );
        assert!(
            least.total(1) < 16 * GIB,
            "{}",
            least.total(1) as f64 / GIB as f64
        );
        assert!(full.total(1) > 32 * GIB);
    }

    #[test]
    fn more_tail_pieces_cost_more_and_a_whole_query_costs_nothing() {
        let lens = porep_32g();
        let steps = piece_steps(&lens);
        assert_eq!(steps[0], lens.a);
        assert_eq!(*steps.last().unwrap(), PIECE_LEAST);
        assert!(steps.windows(2).all(|w| w[0] > w[1]), "{steps:?}");
        assert_eq!(pieces_cost(&lens, 0), 0.0);
        assert_eq!(pieces_cost(&lens, lens.a as u64), 0.0);
        let costs: Vec<f64> = steps[1..]
            .iter()
            .map(|&p| pieces_cost(&lens, p as u64))
            .collect();
        assert!(costs.windows(2).all(|c| c[0] < c[1]), "{costs:?}");
    }

    #[test]
    fn under_the_scratch_and_one_input_set_the_plan_is_refused_with_the_numbers() {
        let lens = porep_32g();
        // the compact layout, every query streamed through the smallest buffers: the least a
        // proof can take
        let least = smallest_compact(&lens, &request(0));
        assert_eq!(least.srs(), 0);
        let e = plan(&lens, &request(least.total(1) - 1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("a proof needs at least"), "{e}");
        assert!(e.contains("0.00 GiB of the SRS kept resident"), "{e}");
        assert!(e.contains("tails in pieces of 524288 points"), "{e}");
        assert!(e.contains("hint: raise `memory_budget`"), "{e}");
        // at that budget exactly: everything streams
        let p = plan(&lens, &request(least.total(1))).unwrap();
        assert_eq!(p.layout.srs(), 0, "{}", p.describe());
        assert_eq!(p.layout.piece, least.piece, "{}", p.describe());
        // and at the full layout's least, the full layout
        let full = smallest(&lens, &request(0));
        let p = plan(&lens, &request(full.total(1))).unwrap();
        assert_eq!(p.layout.piece, 0, "{}", p.describe());
    }

    /// porep-bits:1's matrices on the device (`splitprover shape`, `matrices_device_bytes`):
    /// the coefficients, bitmaps and density words, and 6.2 GiB of rows.
    fn porep_32g_matrices() -> MatricesBytes {
        MatricesBytes {
            fixed: 64 << 20,
            rows: 6_600_000_000,
        }
    }

    fn with_matrices(budget: u64) -> PlanRequest {
        PlanRequest {
            matrices: porep_32g_matrices(),
            ..request(budget)
        }
    }

    #[test]
    fn the_matrices_rows_stream_only_where_nothing_else_fits_beside_them() {
        let lens = porep_32g();
        let m = porep_32g_matrices();
        // A roomy budget and 24 GiB hold the rows: only the SRS gives way.
        for budget in [80 * GIB, 24 * GIB] {
            let p = plan(&lens, &with_matrices(budget)).unwrap();
            assert!(!p.matrices_streamed(), "{}", p.describe());
            assert_eq!(p.bytes(), p.layout.total(p.input_sets) + m.fixed + m.rows);
            assert!(p.bytes() <= budget, "{}", p.describe());
            assert!(
                p.describe().contains(", matrices 6.2 GiB:"),
                "{}",
                p.describe()
            );
        }
        // 16 GiB: the compact layout's least (15.05 GiB) and the rows do not fit together, so
        // the rows stream; the plan takes the budget without them.
        let p = plan(&lens, &with_matrices(16 * GIB)).unwrap();
        assert!(
            p.matrices_streamed() && p.layout.piece > 0,
            "{}",
            p.describe()
        );
        assert!(
            p.layout.stage > 0 && p.layout.matrices_staged,
            "{}",
            p.describe()
        );
        assert_eq!(p.bytes(), p.layout.total(1) + m.fixed);
        assert!(p.bytes() <= 16 * GIB, "{}", p.describe());
        assert_eq!(p.layout.residency().matrices, 1);
        assert!(
            p.describe().contains("6.1 GiB of rows streamed per proof"),
            "{}",
            p.describe()
        );
        // The least is the compact layout's and the fixed part; a byte less is refused, and
        // the refusal names the matrices.
        let least = smallest_compact(&lens, &request(0)).total(1) + m.fixed;
        let p = plan(&lens, &with_matrices(least)).unwrap();
        assert!(
            p.matrices_streamed() && p.layout.srs() == 0,
            "{}",
            p.describe()
        );
        let e = plan(&lens, &with_matrices(least - 1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("for the witness matrices with their"), "{e}");
        assert!(e.contains(&format!(
            "{:.2} GiB of device memory",
            least as f64 / GIB as f64
        )));
    }

    #[test]
    fn where_only_the_rows_do_not_fit_the_srs_stays_resident_and_staging_carries_them() {
        // A small SRS and matrices whose rows are larger than the budget: every query stays
        // resident, and staging buffers are allocated for the rows alone.
        let lens = sha38();
        let m = MatricesBytes {
            fixed: 1 << 20,
            rows: 40 * GIB,
        };
        let req = PlanRequest {
            matrices: m,
            ..request(8 * GIB)
        };
        let p = plan(&lens, &req).unwrap();
        assert!(p.matrices_streamed(), "{}", p.describe());
        assert!(
            !p.layout.streams() && p.layout.stage > 0,
            "{}",
            p.describe()
        );
        assert!(p.bytes() <= 8 * GIB, "{}", p.describe());
        // Without the staging flag the same residency allocates no staging.
        let plain = DeviceLayout::of(&lens, H100_SMS, p.layout.h_window_bits, p.layout.h_chunks);
        assert_eq!(plain.stage, 0);
        assert_eq!(p.layout.once, plain.once + p.layout.stage);
    }

    #[test]
    fn a_32_gib_partition_fits_an_80_gb_h100_with_one_input_set_and_the_h_msm_in_chunks() {
        // The backend's own layout (two input sets, the H MSM's digits for all 2^27 points at
        // once) needs about 106 GB; an 80 GB H100 has about 78 GiB free. Planned: one input set
        // and the H MSM in 8 chunks, every SRS query still resident.
        let lens = porep_32g();
        let own = DeviceLayout::of(&lens, H100_SMS, 0, 0);
        let gib = |b: u64| b as f64 / GIB as f64;
        for l in [own].into_iter().chain(
            CHUNK_STEPS
                .iter()
                .map(|&c| DeviceLayout::of(&lens, H100_SMS, 0, c)),
        ) {
            println!(
                "H MSM {} chunk(s) of {}-bit windows: SRS {:.2} GiB, once {:.2} GiB, set {:.2} \
                 GiB, one set {:.2} GiB, two sets {:.2} GiB",
                l.h_chunks,
                l.h_window_bits,
                gib(l.srs()),
                gib(l.once),
                gib(l.set),
                gib(l.total(1)),
                gib(l.total(2))
            );
        }
        assert!(own.total(2) > 95 * GIB, "{:.1} GiB", gib(own.total(2)));
        let p = plan(&lens, &request(78 * GIB)).unwrap();
        assert_eq!(p.input_sets, 1);
        assert_eq!(p.layout.h_chunks, 8, "{}", p.describe());
        assert!(p.bytes() <= 78 * GIB);
        assert!(p.describe().contains("H MSM 8 chunks"), "{}", p.describe());
        assert!(!p.layout.streams());
        // Below the SRS, the smallest scratch and one input set: part of the SRS streams.
        let p = plan(&lens, &request(75 * GIB)).unwrap();
        assert!(p.layout.streams(), "{}", p.describe());
    }
}
