//! The core's fixed rules ([`Rules`]), from the settings: deadlines, attempts, limits
//! ([`FaultSettings`]), liveness and the hand-out window.

use std::time::Duration;

use shm_protocol::fault::Faults;

use super::events::Role;

/// The core's fixed rules, from the settings.
pub(crate) struct Rules {
    /// Deadlines, attempts and limits.
    pub(crate) faults: FaultSettings,
    /// Check every proof before it is delivered.
    pub(crate) verify: bool,
    /// A child silent this long is killed.
    pub(crate) heartbeat_timeout: Duration,
    /// Partitions at synth-proc at once, at most (`synth_concurrency + synth_lookahead`).
    pub(crate) synth_window: usize,
    /// gpu-procs configured.
    pub(crate) gpu_roles: Vec<Role>,
    /// Test faults meant for the launcher itself (`dispatcher-panic`); empty unless
    /// `shm_protocol::fault::ENABLED`.
    pub(crate) injected: Faults,
}

/// Fault containment: progress deadlines, attempts, limits and the timeline bound.
#[derive(Clone, Debug)]
pub struct FaultSettings {
    /// Failed attempts of one partition after which its job fails.
    pub max_attempts: u32,
    /// A batch (or a synthesis) may take this many times the circuit's measured time.
    pub deadline_factor: f64,
    /// A deadline is never shorter than this.
    pub deadline_floor: Duration,
    /// A gpu-proc's deadline for a batch before that circuit's proving time was measured.
    pub first_proof_deadline: Duration,
    /// synth-proc's deadline for a partition before that circuit's synthesis time was measured.
    pub first_synthesis_deadline: Duration,
    /// Partitions one job may have (checked before anything per partition is allocated).
    pub max_partitions: u32,
    /// Largest request accepted (given to a submit or read from a file), in bytes.
    pub max_request_bytes: u64,
    /// Timeline events kept (the oldest dropped first); `None`: all of them.
    pub timeline_events: Option<usize>,
    /// Messages queued per child before a synthesis request waits in the job table.
    pub outbox: usize,
}

impl Default for FaultSettings {
    fn default() -> Self {
        FaultSettings {
            max_attempts: 2,
            deadline_factor: 5.0,
            deadline_floor: Duration::from_secs(60),
            first_proof_deadline: Duration::from_secs(1800),
            first_synthesis_deadline: Duration::from_secs(1800),
            max_partitions: 4096,
            // A 64 GiB-sector C1 output is well below this.
            max_request_bytes: 1 << 30,
            timeline_events: None,
            outbox: 64,
        }
    }
}

impl FaultSettings {
    /// The deadline of work measured at `per_unit` (if measured) × `units`.
    pub(crate) fn deadline(
        &self,
        per_unit: Option<Duration>,
        units: usize,
        first: Duration,
    ) -> Duration {
        match per_unit {
            Some(d) => d
                .mul_f64(self.deadline_factor.max(1.0) * units.max(1) as f64)
                .max(self.deadline_floor),
            None => first,
        }
    }
}
