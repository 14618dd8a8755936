//! What the pipeline measures while it runs: the timeline (bounded), the batches and syntheses in
//! progress (the progress deadlines' clock), the circuits' measured proving and synthesis times
//! (moving averages), each gpu-proc's device and busy time, and where each job's time went
//! ([`Core::track`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use shm_protocol::control::{EventKind, TimelineEvent};

use super::child::Role;
use super::machine::Core;
use super::status::GpuLine;
use crate::jobs::Phase;

/// The measurements of one pipeline.
#[derive(Default)]
pub(super) struct Progress {
    /// Timeline events, the oldest dropped first beyond `timeline_bound`.
    pub(super) timeline: VecDeque<TimelineEvent>,
    /// [`FaultSettings::timeline_events`](super::FaultSettings::timeline_events).
    pub(super) timeline_bound: Option<usize>,
    /// gpu-procs' batches in progress.
    pub(super) batches: HashMap<Role, Batch>,
    /// Syntheses in progress by (job, partition).
    pub(super) syntheses: HashMap<(u64, u32), Synthesis>,
    /// Measured proving time per slot, by circuit id (moving average).
    pub(super) prove_time: HashMap<u64, Duration>,
    /// Measured synthesis time per partition, by circuit id (moving average).
    pub(super) synth_time: HashMap<u64, Duration>,
    /// What each gpu-proc reported of its device, and its busy time.
    pub(super) gpu_devices: HashMap<Role, GpuDevice>,
}

/// A gpu-proc's batch in progress, from its GPU_CLAIM events to its GPU_END events.
pub(super) struct Batch {
    pub(super) since: Instant,
    /// The job and circuit spec of its first claim (what `status` shows as current).
    pub(super) job: u64,
    pub(super) circuit_name: Option<String>,
    pub(super) circuit: Option<u64>,
    pub(super) slots: HashSet<(u64, u32)>,
    /// Slots proved together (fixed at GPU_START).
    pub(super) size: usize,
    pub(super) start_ns: Option<u64>,
}

/// A synthesis in progress, from SYNTH_START to SYNTH_END (or its failure).
pub(super) struct Synthesis {
    pub(super) since: Instant,
    pub(super) start_ns: u64,
    pub(super) circuit: Option<u64>,
}

/// A gpu-proc's last `FromChild::Device` report and its busy time so far.
#[derive(Default)]
pub(super) struct GpuDevice {
    pub(super) name: String,
    pub(super) vram_total_bytes: u64,
    pub(super) vram_free_bytes: u64,
    pub(super) srs_device_bytes: u64,
    pub(super) planned_device_bytes: u64,
    pub(super) device_budget_bytes: u64,
    pub(super) srs_streamed_bytes: u64,
    pub(super) srs_streamed_total_bytes: u64,
    pub(super) busy_ns: u64,
}

impl Progress {
    /// Appends a timeline event within the bound.
    pub(super) fn record(&mut self, e: TimelineEvent) {
        push_bounded(&mut self.timeline, e, self.timeline_bound);
    }

    /// A child of `role` is gone (exited, or killed past a deadline): its work in progress is
    /// no longer timed.
    pub(super) fn forget(&mut self, role: Role) {
        match role {
            Role::Synth => self.syntheses.clear(),
            Role::Gpu(_) => {
                self.batches.remove(&role);
            }
        }
    }
}

impl Core {
    /// Follows a child's progress from its timeline events (the deadlines' clock) and charges
    /// the jobs' phases; `now` is when the event arrived.
    pub(super) fn track(&mut self, role: Role, e: &TimelineEvent, now: Instant) {
        let key = (e.job_id, e.partition);
        let progress = &mut self.progress;
        match e.kind {
            EventKind::GpuClaim => {
                let circuit = self.jobs.circuit_id(e.job_id);
                let circuit_name = self.jobs.circuit(e.job_id).map(str::to_owned);
                let batch = progress.batches.entry(role).or_insert_with(|| Batch {
                    since: now,
                    job: e.job_id,
                    circuit_name,
                    circuit,
                    slots: HashSet::new(),
                    size: 0,
                    start_ns: None,
                });
                batch.slots.insert(key);
            }
            EventKind::GpuStart => {
                if let Some(b) = progress.batches.get_mut(&role) {
                    if b.start_ns.is_none() {
                        b.start_ns = Some(e.t_ns);
                        b.size = b.slots.len().max(1);
                    }
                }
            }
            EventKind::GpuEnd => {
                let Some(b) = progress.batches.get_mut(&role) else {
                    return;
                };
                if let Some(start) = b.start_ns {
                    let share = e.t_ns.saturating_sub(start) / b.size.max(1) as u64;
                    self.jobs
                        .add_time(e.job_id, Phase::Gpu, Duration::from_nanos(share));
                }
                b.slots.remove(&key);
                if !b.slots.is_empty() {
                    return;
                }
                let Some(b) = progress.batches.remove(&role) else {
                    return;
                };
                if let Some(start) = b.start_ns {
                    progress.gpu_devices.entry(role).or_default().busy_ns +=
                        e.t_ns.saturating_sub(start);
                }
                if let (Some(circuit), Some(start)) = (b.circuit, b.start_ns) {
                    let per_slot =
                        Duration::from_nanos(e.t_ns.saturating_sub(start) / b.size.max(1) as u64);
                    average(
                        progress.prove_time.entry(circuit).or_insert(per_slot),
                        per_slot,
                    );
                }
            }
            EventKind::SynthStart => {
                self.jobs.synthesis_started(e.job_id);
                let circuit = self.jobs.circuit_id(e.job_id);
                progress.syntheses.insert(
                    key,
                    Synthesis {
                        since: now,
                        start_ns: e.t_ns,
                        circuit,
                    },
                );
            }
            EventKind::SynthEnd => {
                if let Some(s) = progress.syntheses.remove(&key) {
                    let took = Duration::from_nanos(e.t_ns.saturating_sub(s.start_ns));
                    self.jobs.add_time(e.job_id, Phase::Synthesis, took);
                    if let Some(circuit) = s.circuit {
                        average(progress.synth_time.entry(circuit).or_insert(took), took);
                    }
                }
            }
            _ => {}
        }
    }

    /// One [`GpuLine`] per configured gpu-proc, by ordinal.
    pub(super) fn gpu_lines(&self) -> Vec<GpuLine> {
        let mut lines: Vec<GpuLine> = self
            .rules
            .gpu_roles
            .iter()
            .map(|&role| {
                let ordinal = match role {
                    Role::Gpu(i) => i,
                    Role::Synth => u32::MAX,
                };
                let device = self.progress.gpu_devices.get(&role);
                let batch = self.progress.batches.get(&role);
                GpuLine {
                    ordinal,
                    role: role.to_string(),
                    name: device.map(|d| d.name.clone()).unwrap_or_default(),
                    vram_total_bytes: device.map_or(0, |d| d.vram_total_bytes),
                    vram_free_bytes: device.map_or(0, |d| d.vram_free_bytes),
                    srs_device_bytes: device.map_or(0, |d| d.srs_device_bytes),
                    planned_device_bytes: device.map_or(0, |d| d.planned_device_bytes),
                    device_budget_bytes: device.map_or(0, |d| d.device_budget_bytes),
                    srs_streamed_bytes: device.map_or(0, |d| d.srs_streamed_bytes),
                    srs_streamed_total_bytes: device.map_or(0, |d| d.srs_streamed_total_bytes),
                    current_job: batch.map(|b| b.job),
                    current_circuit: batch.and_then(|b| b.circuit_name.clone()),
                    busy_ns: device.map_or(0, |d| d.busy_ns),
                }
            })
            .collect();
        lines.sort_by_key(|l| l.ordinal);
        lines
    }
}

/// Appends `e`, dropping the oldest events beyond `max` (`None`: no bound; `Some(0)`: keep none).
pub(super) fn push_bounded<T>(events: &mut VecDeque<T>, e: T, max: Option<usize>) {
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
pub(super) fn average(avg: &mut Duration, sample: Duration) {
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
