//! The `gpu` backend's host-side arithmetic, exposed for the planner and the no-GPU tests: the
//! MSM shapes it plans (sppark's choices), the tail sizes, and the device's final reduction and
//! window weights checked on the host from the same C++ code.

use super::*;

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
