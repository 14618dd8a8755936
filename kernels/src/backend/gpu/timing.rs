//! What a `gpu` backend proof and batch measured: device phases from CUDA events, the batch's
//! span, and the calling thread's CPU time.

use super::*;

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

/// CPU milliseconds of the calling thread so far.
pub(super) fn thread_cpu_ms() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 * 1e3 + t.tv_nsec as f64 / 1e6
}
