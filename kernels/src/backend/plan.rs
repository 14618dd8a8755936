//! The `gpu` backend's device-memory plan: what a context allocates for an SRS, and the choices
//! that make it fit a memory budget (`[[gpu]] memory_budget`, default what the device has free).
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
//! Every SRS query stays resident: a plan that cannot hold the SRS, the scratch and one input
//! set is refused with the numbers (streaming the SRS from the host is the next lever; it is not
//! built yet).

use super::gpu::ffi;
use crate::srs::SrsLengths;
use crate::{Error, ErrorKind};

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
}

impl DeviceLayout {
    /// The layout for an SRS of `lens` on a device of `sms` multiprocessors, with the H MSM's
    /// window size and chunks (`0`: the backend's choice).
    pub fn of(lens: &SrsLengths, sms: u32, h_window_bits: u32, h_chunks: u32) -> DeviceLayout {
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
        // and writes one plain struct through `out`; both live across the call.
        unsafe {
            ffi::splitprover_gpu_layout(
                &srs,
                sms.min(i32::MAX as u32) as i32,
                h_window_bits,
                h_chunks,
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
        }
    }

    /// The SRS's points, every query.
    pub fn srs(&self) -> u64 {
        self.srs_h + self.srs_l + self.srs_a + self.srs_b_g1 + self.srs_b_g2
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
    /// The budget planned for, bytes.
    pub budget: u64,
}

impl DevicePlan {
    /// The device memory the plan takes.
    pub fn bytes(&self) -> u64 {
        self.layout.total(self.input_sets)
    }

    /// One line for logs and `status`: `SRS 47.4 GiB resident, scratch 30.1 GiB, 1 input set of
    /// 16.9 GiB, H MSM 8 chunks: 94.4 GiB of a 95.0 GiB budget`.
    pub fn describe(&self) -> String {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        format!(
            "SRS {:.1} GiB resident, scratch {:.1} GiB, {} input set{} of {:.1} GiB, H MSM {} \
             chunk{} of {}-bit windows: {:.1} GiB of a {:.1} GiB budget",
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
}

/// The H MSM's chunk counts the planner tries after the backend's own choice.
const CHUNK_STEPS: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];

/// Plans a context for an SRS of `lens` within `req.budget`: the backend's own layout where it
/// fits (two input sets where asked and affordable), else the fewest H chunks that fit.
///
/// Errors: [`ErrorKind::Cuda`] naming what the SRS, the scratch and one input set need against
/// the budget, when even the smallest layout does not fit.
pub fn plan(lens: &SrsLengths, req: &PlanRequest) -> Result<DevicePlan, Error> {
    let first = DeviceLayout::of(lens, req.sms, req.h_window_bits, req.h_chunks.unwrap_or(0));
    let mut layouts = vec![first];
    if req.h_chunks.is_none() {
        layouts.extend(
            CHUNK_STEPS
                .iter()
                .filter(|&&c| c > first.h_chunks)
                .map(|&c| DeviceLayout::of(lens, req.sms, req.h_window_bits, c)),
        );
    }
    for layout in &layouts {
        if layout.total(1) > req.budget {
            continue;
        }
        let two = req.overlap && layout.total(2) + layout.reserve <= req.budget;
        return Ok(DevicePlan {
            layout: *layout,
            input_sets: if two { 2 } else { 1 },
            budget: req.budget,
        });
    }
    let least = layouts
        .iter()
        .min_by_key(|l| l.total(1))
        .copied()
        .unwrap_or(first);
    let gib = |b: u64| format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64);
    Err(ErrorKind::Cuda(format!(
        "the SRS needs {} of device memory and a proof at least {} more ({} of scratch with \
         the H MSM in {} chunks, {} for one input set), but the budget is {}\nhint: raise \
         `memory_budget` in `[[gpu]]` (default: what the device has free), or use a device \
         with more memory",
        gib(least.srs()),
        gib(least.once + least.set),
        gib(least.once),
        least.h_chunks,
        gib(least.set),
        gib(req.budget),
    ))
    .into())
}

#[cfg(test)]
mod tests {
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
        // A given chunk count is kept: then it does not fit.
        let fixed = PlanRequest {
            h_chunks: Some(own.h_chunks),
            ..request(budget)
        };
        assert!(plan(&lens, &fixed).is_err());
    }

    #[test]
    fn a_budget_under_the_srs_is_refused_with_the_numbers() {
        let lens = porep_32g();
        let e = plan(&lens, &request(40 * GIB)).unwrap_err().to_string();
        assert!(e.contains("the SRS needs 44."), "{e}");
        assert!(e.contains("but the budget is 40.00 GiB"), "{e}");
        assert!(e.contains("hint: raise `memory_budget`"), "{e}");
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
        // Below the SRS, the smallest scratch and one input set: refused.
        let e = plan(&lens, &request(75 * GIB)).unwrap_err().to_string();
        assert!(e.contains("but the budget is 75.00 GiB"), "{e}");
    }
}
