//! [`Pipeline::drain`]: the first half of a graceful stop. The service calls it on SIGTERM before
//! [`Pipeline::shutdown`], so partitions already synthesized (or being synthesized) are proved
//! instead of thrown away, within a grace period.
//!
//! How new work is held back: synthesis requests reach synth-proc only through its control
//! sender in the core (`Core::pump_synth` returns at once without one). The drain parks that
//! sender for its duration, so nothing new is sent, and puts it back at the end, so `shutdown`
//! can still tell synth-proc to exit. A synth-proc restarted during the drain gets a new sender
//! (and the pending partitions once, as `Started` pumps them); the next poll parks it again.
//! What synth-proc had already been sent still runs: it is in flight (synth-proc has no message to
//! cancel a queued synthesis, and the pipeline sends every pending partition as soon as it is
//! submitted), so under a steady load the drain usually ends with the grace, having proved what
//! the grace allowed. Partitions held back stay
//! `Pending` in the job table and are failed by `shutdown`; the service's journal keeps their jobs
//! as accepted, so they run again after the next start.

use std::thread;
use std::time::{Duration, Instant};

use super::child::Role;
use super::{lock, Pipeline};

/// How a drain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainReport {
    /// No slot was WRITING, READY or CLAIMED any more (else the grace ran out, or the pipeline
    /// had given up).
    pub quiet: bool,
    /// Slots still WRITING, READY or CLAIMED at the end.
    pub in_flight: usize,
    /// How long it took.
    pub waited: Duration,
}

/// Polls between ring checks.
const POLL: Duration = Duration::from_millis(50);
/// Consecutive quiet polls needed: a gpu-proc that has just freed a slot and a synth-proc about
/// to claim the next one would otherwise look quiet for a moment.
const QUIET_POLLS: u32 = 3;

impl Pipeline {
    /// Stops handing partitions to synth-proc and waits until no slot is WRITING, READY or
    /// CLAIMED, or `grace` has passed, or the pipeline gave up. Jobs that complete meanwhile are
    /// delivered as usual. Call [`Pipeline::shutdown`] next: the pipeline accepts jobs after a
    /// drain but does not synthesize them.
    pub fn drain(&self, grace: Duration) -> DrainReport {
        let start = Instant::now();
        let mut parked = None;
        let mut quiet_polls = 0;
        let report = loop {
            let (in_flight, fatal) = {
                let mut core = lock(&self.core);
                if let Some(info) = core.children.get_mut(&Role::Synth) {
                    if let Some(sender) = info.sender.take() {
                        parked = Some(sender);
                    }
                }
                let c = self.ring.counts();
                (c.writing + c.ready + c.claimed, core.fatal.is_some())
            };
            quiet_polls = if in_flight == 0 { quiet_polls + 1 } else { 0 };
            let waited = start.elapsed();
            if quiet_polls >= QUIET_POLLS || fatal || waited >= grace {
                break DrainReport {
                    quiet: in_flight == 0,
                    in_flight,
                    waited,
                };
            }
            thread::sleep(POLL.min(grace.saturating_sub(waited)));
        };
        // Give the sender back (unless a restarted synth-proc has a newer one), so `shutdown`
        // reaches synth-proc.
        let mut core = lock(&self.core);
        if let (Some(info), Some(sender)) = (core.children.get_mut(&Role::Synth), parked) {
            if info.sender.is_none() && info.pid.is_some() {
                info.sender = Some(sender);
            }
        }
        tracing::info!(
            quiet = report.quiet,
            in_flight = report.in_flight,
            secs = report.waited.as_secs_f64(),
            "pipeline drained"
        );
        report
    }
}

impl Pipeline {
    /// [`Pipeline::shutdown`] for a pipeline that is still shared: tells every child to exit and
    /// waits for it (up to 20 s each, then SIGKILL), which removes their cgroups. The dispatcher
    /// ends once the children are gone and is joined when the pipeline is dropped; live jobs are
    /// not failed here (the service's journal keeps them). The service uses it when a client
    /// thread still holds the pipeline at the end of a stop.
    pub fn stop_children(&self) {
        let supervisors: Vec<super::child::Supervisor> = {
            let mut sups = self.supervisors.lock().unwrap_or_else(|e| e.into_inner());
            for s in sups.iter() {
                s.request_stop();
            }
            sups.drain(..).collect()
        };
        {
            let mut core = lock(&self.core);
            core.stopping = true;
            for (role, info) in core.children.iter_mut() {
                if let Some(s) = info.sender.as_mut() {
                    let _ = match role {
                        Role::Synth => s.send(&shm_protocol::control::ToSynth::Shutdown),
                        Role::Gpu(_) => s.send(&shm_protocol::control::ToGpu::Shutdown),
                    };
                }
            }
        }
        for s in supervisors {
            s.stop(Duration::from_secs(20));
        }
    }
}
