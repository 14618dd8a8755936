//! What [`Pipeline::status`] shows: serializable snapshots of the ring, the children, the jobs,
//! the counters and the SRS images (the service sends them as JSON, `splitprover status`
//! renders them), and the snapshot's assembly from the core.

use super::core::jobs::{JobCounters, JobSummary};
use super::core::ChildInfo;
pub use super::core::{Counters, GpuLine, SrsLine};
use super::memory::ring_text;
use super::Pipeline;
use crate::sync::lock;
#[cfg(doc)]
use shm_protocol::control::FromChild;
use shm_protocol::StateCounts;

/// A child as `status` shows it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ChildStatus {
    /// `synth-proc` or `gpu-proc[i]`.
    pub role: String,
    /// Running pid.
    pub pid: Option<u32>,
    /// Cores it was verified to run on.
    pub cpus: Option<String>,
    /// What it said at start.
    pub detail: String,
    /// Starts after the first.
    pub restarts: u32,
    /// How the last one ended.
    pub last_exit: Option<String>,
    /// Up, restarting, down or given up.
    #[serde(default)]
    pub state: ChildState,
}

/// Where a child is, as `status` shows it (serialized, and displayed, as `up`, `restarting`,
/// `down`, `given up`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ChildState {
    /// Running.
    #[default]
    #[serde(rename = "up")]
    Up,
    /// Between a death and its restart.
    #[serde(rename = "restarting")]
    Restarting,
    /// Keeps failing at restart; still retried, its work goes to the others.
    #[serde(rename = "down")]
    Down,
    /// Never started (a bad configuration): not retried.
    #[serde(rename = "given up")]
    GivenUp,
}

impl ChildState {
    /// The word `status` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            ChildState::Up => "up",
            ChildState::Restarting => "restarting",
            ChildState::Down => "down",
            ChildState::GivenUp => "given up",
        }
    }
}

impl std::fmt::Display for ChildState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One size of ring slot in a status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SlotClassLine {
    /// Slots of this size.
    pub slots: usize,
    /// Bytes of each slot's data.
    pub slot_bytes: u64,
}

impl PipelineStatus {
    /// Bytes of all slots' data (the ring's page-locked part).
    pub fn ring_data_bytes(&self) -> u64 {
        if self.slot_classes.is_empty() {
            return self.ring_slots as u64 * self.slot_bytes;
        }
        self.slot_classes
            .iter()
            .map(|c| c.slots as u64 * c.slot_bytes)
            .sum()
    }

    /// The slot sizes as text ([`ring_text`]): `3 slots x 15.61 GiB + 8 slots x 112.0 MiB`.
    pub fn ring_text(&self) -> String {
        if self.slot_classes.is_empty() {
            return ring_text([(self.ring_slots, self.slot_bytes)]);
        }
        ring_text(self.slot_classes.iter().map(|c| (c.slots, c.slot_bytes)))
    }
}

/// A snapshot of the whole pipeline.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct PipelineStatus {
    /// Pinning mode in use.
    pub pin_mode: String,
    /// Page kind of the ring.
    pub ring_pages: String,
    /// Slots in all.
    pub ring_slots: usize,
    /// Bytes of the largest slots (every slot's in a ring of one slot size).
    pub slot_bytes: u64,
    /// The ring's slot sizes, smallest first.
    #[serde(default)]
    pub slot_classes: Vec<SlotClassLine>,
    /// Slots by state.
    pub slots: SlotCounts,
    /// The children.
    pub children: Vec<ChildStatus>,
    /// Live jobs.
    pub jobs: Vec<JobLine>,
    /// Counters.
    pub counters: Counters,
    /// Why the pipeline cannot go on, if it cannot.
    pub fatal: Option<String>,
    /// Every configured circuit's SRS: tier, size, live jobs.
    #[serde(default)]
    pub srs: Vec<SrsLine>,
    /// One line per gpu-proc, by ordinal: its device and what it proves now (cuzk's
    /// `GetStatus` GPU list).
    #[serde(default)]
    pub gpus: Vec<GpuLine>,
    /// How each configured circuit is synthesized: (circuit, plan), e.g. `pre-compiled, 12 MiB,
    /// cached` or `full (why)`.
    #[serde(default)]
    pub synthesis: Vec<(String, String)>,
}

/// Slots by state (serializable copy of [`StateCounts`]).
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
#[allow(missing_docs)]
pub struct SlotCounts {
    pub free: usize,
    pub writing: usize,
    pub ready: usize,
    pub claimed: usize,
    pub done: usize,
}

impl From<StateCounts> for SlotCounts {
    fn from(c: StateCounts) -> Self {
        SlotCounts {
            free: c.free,
            writing: c.writing,
            ready: c.ready,
            claimed: c.claimed,
            done: c.done,
        }
    }
}

/// A live job (serializable copy of [`JobSummary`]).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[allow(missing_docs)]
pub struct JobLine {
    pub job_id: u64,
    pub circuit: String,
    pub done: usize,
    pub partitions: usize,
    pub in_ring: usize,
    #[serde(default)]
    pub priority: i32,
    /// Some partition was handed to synth-proc.
    #[serde(default)]
    pub running: bool,
}

impl From<JobSummary> for JobLine {
    fn from(j: JobSummary) -> Self {
        JobLine {
            job_id: j.job_id,
            circuit: j.circuit,
            done: j.done,
            partitions: j.partitions,
            in_ring: j.in_ring,
            priority: j.priority,
            running: j.running,
        }
    }
}

impl ChildInfo {
    /// Its state, `running` when a process of it is up now.
    pub(super) fn state(&self, running: bool) -> ChildState {
        if self.gave_up.is_some() {
            ChildState::GivenUp
        } else if self.down.is_some() {
            ChildState::Down
        } else if running {
            ChildState::Up
        } else {
            ChildState::Restarting
        }
    }
}

impl Pipeline {
    /// A snapshot for `status`.
    pub fn status(&self) -> PipelineStatus {
        let hub = lock(&self.hub);
        let core = &hub.core;
        let sups = lock(&self.supervisors);
        let mut children: Vec<ChildStatus> = sups
            .iter()
            .map(|s| {
                let info = core.children.get(&s.role());
                ChildStatus {
                    role: s.role().to_string(),
                    pid: s.pid(),
                    cpus: info.and_then(|i| i.cpus.as_ref().map(|c| c.to_string())),
                    detail: info.map(|i| i.detail.clone()).unwrap_or_default(),
                    restarts: info.map(|i| i.starts.saturating_sub(1)).unwrap_or(0),
                    last_exit: info.and_then(|i| i.last_exit.clone()),
                    state: match info {
                        Some(i) => i.state(s.pid().is_some()),
                        None if s.pid().is_some() => ChildState::Up,
                        None => ChildState::Restarting,
                    },
                }
            })
            .collect();
        children.sort_by(|a, b| a.role.cmp(&b.role));
        let c = core.jobs.counters();
        PipelineStatus {
            pin_mode: self.pin_mode.to_string(),
            ring_pages: self.ring.page_kind().to_string(),
            ring_slots: self.ring.slot_count(),
            slot_bytes: self.ring.slot_bytes(),
            slot_classes: self
                .ring
                .config()
                .classes()
                .iter()
                .map(|c| SlotClassLine {
                    slots: c.slot_count as usize,
                    slot_bytes: c.slot_bytes,
                })
                .collect(),
            slots: self.ring.counts().into(),
            children,
            jobs: core
                .jobs
                .summaries()
                .into_iter()
                .map(JobLine::from)
                .collect(),
            counters: Counters {
                submitted: c.submitted,
                succeeded: c.succeeded,
                failed: c.failed,
                syntheses_requested: c.syntheses_requested,
                duplicate_results: c.duplicate_results,
                mismatched_results: c.mismatched_results,
                synth_outstanding: core.jobs.outstanding() as u64,
                synth_pending: core.jobs.pending() as u64,
                synth_window: core.rules.synth_window as u64,
                ..core.counters
            },
            fatal: core.fatal.clone(),
            gpus: core.gpu_lines(),
            srs: core.srs_lines(),
            synthesis: self
                .synthesis
                .iter()
                .map(|(spec, plan)| (spec.to_string(), plan.to_string()))
                .collect(),
        }
    }

    /// The job counters.
    pub fn counters(&self) -> JobCounters {
        lock(&self.hub).core.jobs.counters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_reads_largest_first_and_a_child_state_as_its_word() {
        let gib = 1u64 << 30;
        assert_eq!(
            ring_text([(8, 100 << 20), (5, 16 * gib)]),
            "5 slots x 16.00 GiB + 8 slots x 100.0 MiB"
        );
        let one = PipelineStatus {
            ring_slots: 4,
            slot_bytes: 3 * gib,
            ..PipelineStatus::default()
        };
        assert_eq!(one.ring_text(), "4 slots x 3.00 GiB");
        assert_eq!(ChildState::GivenUp.to_string(), "given up");
        assert_eq!(
            serde_json::to_string(&ChildState::GivenUp).unwrap(),
            "\"given up\""
        );
        let back: ChildState = serde_json::from_str("\"down\"").unwrap();
        assert_eq!(back, ChildState::Down);
    }
}
