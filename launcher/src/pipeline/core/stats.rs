//! What the pipeline measures while it runs: the timeline (bounded), the batches and syntheses in
//! progress (the progress deadlines' clock), the circuits' measured proving and synthesis times
//! (moving averages), each gpu-proc's device and busy time, and where each job's time went
//! (filled by the transitions in `tracking.rs`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use shm_protocol::control::TimelineEvent;

use super::events::Role;

/// The measurements of one pipeline.
#[derive(Default)]
pub(crate) struct Progress {
    /// Timeline events, the oldest dropped first beyond `timeline_bound`.
    pub(crate) timeline: VecDeque<TimelineEvent>,
    /// [`FaultSettings::timeline_events`](super::FaultSettings::timeline_events).
    pub(crate) timeline_bound: Option<usize>,
    /// gpu-procs' batches in progress.
    pub(crate) batches: HashMap<Role, Batch>,
    /// Syntheses in progress by (job, partition).
    pub(crate) syntheses: HashMap<(u64, u32), Synthesis>,
    /// Measured proving time per slot, by circuit id (moving average).
    pub(crate) prove_time: HashMap<u64, Duration>,
    /// Measured synthesis time per partition, by circuit id (moving average).
    pub(crate) synth_time: HashMap<u64, Duration>,
    /// What each gpu-proc reported of its device, and its busy time.
    pub(crate) gpu_devices: HashMap<Role, GpuDevice>,
}

/// A gpu-proc's batch in progress, from its GPU_CLAIM events to its GPU_END events.
pub(crate) struct Batch {
    pub(crate) since: Instant,
    /// The job and circuit spec of its first claim (what `status` shows as current).
    pub(crate) job: u64,
    pub(crate) circuit_name: Option<String>,
    pub(crate) circuit: Option<u64>,
    pub(crate) slots: HashSet<(u64, u32)>,
    /// Slots proved together (fixed at GPU_START).
    pub(crate) size: usize,
    pub(crate) start_ns: Option<u64>,
}

/// A synthesis in progress, from SYNTH_START to SYNTH_END (or its failure).
pub(crate) struct Synthesis {
    pub(crate) since: Instant,
    pub(crate) start_ns: u64,
    pub(crate) circuit: Option<u64>,
}

/// A gpu-proc's last `FromChild::Device` report and its busy time so far.
#[derive(Default)]
pub(crate) struct GpuDevice {
    pub(crate) name: String,
    pub(crate) vram_total_bytes: u64,
    pub(crate) vram_free_bytes: u64,
    pub(crate) srs_device_bytes: u64,
    pub(crate) planned_device_bytes: u64,
    pub(crate) device_budget_bytes: u64,
    pub(crate) srs_streamed_bytes: u64,
    pub(crate) srs_streamed_total_bytes: u64,
    pub(crate) busy_ns: u64,
}

impl Progress {
    /// Appends a timeline event within the bound.
    pub(crate) fn record(&mut self, e: TimelineEvent) {
        push_bounded(&mut self.timeline, e, self.timeline_bound);
    }

    /// A child of `role` is gone (exited, or killed past a deadline): its work in progress is
    /// no longer timed.
    pub(crate) fn forget(&mut self, role: Role) {
        match role {
            Role::Synth => self.syntheses.clear(),
            Role::Gpu(_) => {
                self.batches.remove(&role);
            }
        }
    }
}

/// A gpu-proc's device and work, as `status` shows it. The device comes from the gpu-proc's
/// [`FromChild::Device`](shm_protocol::control::FromChild::Device) reports (empty name and zero memory until the first one); the current
/// job from its timeline: set at its batch's first GPU_CLAIM, cleared at the batch's last
/// GPU_END or when it dies.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct GpuLine {
    /// The gpu-proc's device index.
    pub ordinal: u32,
    /// Its role (`gpu-proc[0]`).
    pub role: String,
    /// Device name (`NVIDIA H200`, `CPU backend (<model>, N threads)`).
    pub name: String,
    /// Device memory in bytes (0 for the CPU backend).
    pub vram_total_bytes: u64,
    /// Device memory free at its last report (after its last batch), in bytes.
    pub vram_free_bytes: u64,
    /// SRS bytes resident in device memory at its last report (the `gpu` backend's; 0 for
    /// backends that keep none there).
    pub srs_device_bytes: u64,
    /// Device memory its backends planned (SRS, scratch, input sets, resident matrices) at its
    /// last report; 0 for backends that plan none.
    pub planned_device_bytes: u64,
    /// The budget they planned within (`[[gpu]] memory_budget`, or what the device had free).
    pub device_budget_bytes: u64,
    /// Bytes not kept resident, copied from page-locked host memory for every proof (the `gpu`
    /// backend under a budget smaller than the SRS: SRS points, and the witness matrices' rows
    /// where they stream too), at its last report.
    pub srs_streamed_bytes: u64,
    /// Bytes copied from host memory so far (every proof's, summed), at its last report.
    pub srs_streamed_total_bytes: u64,
    /// The job of the batch it is proving now (the first claimed, when a batch mixes jobs).
    pub current_job: Option<u64>,
    /// That job's circuit spec.
    pub current_circuit: Option<String>,
    /// GPU-busy time of its finished batches (GPU_START to GPU_END), ns, since the pipeline
    /// started: busy ratio = Δbusy_ns / Δwall time.
    pub busy_ns: u64,
}

/// Counters (serializable copy of [`JobCounters`](super::jobs::JobCounters) plus crash counts).
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
#[allow(missing_docs)]
pub struct Counters {
    pub submitted: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub syntheses_requested: u64,
    /// Syntheses synth-proc started (SYNTH_START events), those cut short by a crash included.
    pub syntheses_started: u64,
    pub duplicate_results: u64,
    /// DONE slots refused because they did not match the job table.
    pub mismatched_results: u64,
    pub child_exits: u64,
    pub slots_requeued: u64,
    pub slots_freed: u64,
    /// Children killed for missing heartbeats.
    pub hung_kills: u64,
    /// Children killed for running past a progress deadline.
    pub deadline_kills: u64,
    /// Failed attempts of partitions (retried, or ending their job at the limit).
    pub failed_attempts: u64,
    /// READY slots of ended jobs taken out of the ring unproved.
    pub slots_discarded: u64,
    /// Times a synthesis request was kept back in the job table because synth-proc's queue was
    /// full (a request kept back over several ticks counts once per tick).
    pub sends_deferred: u64,
    /// Jobs cancelled.
    pub cancelled: u64,
    /// Partitions at synth-proc now (sent, not yet published or failed): at most
    /// `synth_window`.
    pub synth_outstanding: u64,
    /// Partitions waiting in the job table to be handed to synth-proc, now.
    pub synth_pending: u64,
    /// The hand-out bound: `synth_concurrency + synth_lookahead`.
    pub synth_window: u64,
    /// The most partitions ever at synth-proc at once.
    pub synth_outstanding_max: u64,
}

/// Appends `e`, dropping the oldest events beyond `max` (`None`: no bound; `Some(0)`: keep none).
pub(crate) fn push_bounded<T>(events: &mut VecDeque<T>, e: T, max: Option<usize>) {
    if let Some(max) = max {
        if max == 0 {
            return;
        }
        while events.len() >= max {
            events.pop_front();
        }
    }
    events.push_back(e);
}

/// Moves a moving average a third of the way to `sample`.
pub(crate) fn average(avg: &mut Duration, sample: Duration) {
    *avg = avg.mul_f64(2.0 / 3.0) + sample.mul_f64(1.0 / 3.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_timeline_keeps_the_last_events() {
        let mut q = VecDeque::new();
        for i in 0..10 {
            push_bounded(&mut q, i, Some(3));
        }
        assert_eq!(q.iter().copied().collect::<Vec<_>>(), vec![7, 8, 9]);
        let mut all = VecDeque::new();
        for i in 0..10 {
            push_bounded(&mut all, i, None);
        }
        assert_eq!(all.len(), 10);
        push_bounded(&mut q, 1, Some(0));
        assert_eq!(q.len(), 3, "a bound of 0 records nothing");
    }

    #[test]
    fn the_average_moves_a_third_of_the_way() {
        let mut avg = Duration::from_millis(300);
        average(&mut avg, Duration::from_millis(600));
        assert_eq!(avg, Duration::from_millis(400));
    }
}
