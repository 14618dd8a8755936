//! [`Pipeline::drain`]: the first half of a graceful stop. The service calls it on SIGTERM before
//! [`Pipeline::shutdown`], so partitions already synthesized (or being synthesized) are proved
//! instead of thrown away, within a grace period.
//!
//! How new work is held back: `Core::pump_synth` sends nothing once `Core::hold` was called,
//! so pending partitions stay `Pending` (a synth-proc restarted during the drain gets none
//! either). What synth-proc had already been sent still runs: at most `synth_concurrency +
//! synth_lookahead` partitions (the bounded hand-out), so the drain waits for those, what is in
//! the ring and the proofs on the verifier pool, not for the whole queue. Partitions held back
//! stay `Pending` in the job table and are failed by `shutdown`; the service's journal keeps
//! their jobs as accepted, so they run again after the next start.

use std::thread;
use std::time::{Duration, Instant};

use super::Pipeline;
use crate::sync::lock;

/// How a drain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainReport {
    /// No slot was WRITING, READY or CLAIMED and no proof was being checked any more (else the
    /// grace ran out, or the pipeline had given up).
    pub quiet: bool,
    /// Slots still WRITING, READY or CLAIMED, and proofs still being checked, at the end.
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
    /// CLAIMED and no proof is being checked, or `grace` has passed, or the pipeline gave up. Jobs that complete meanwhile are
    /// delivered as usual. Call [`Pipeline::shutdown`] next: the pipeline accepts jobs after a
    /// drain but does not synthesize them.
    pub fn drain(&self, grace: Duration) -> DrainReport {
        let start = Instant::now();
        let mut quiet_polls = 0;
        let report = loop {
            let (in_flight, fatal) = {
                let mut hub = lock(&self.hub);
                hub.core.hold();
                let c = self.ring.counts();
                (
                    c.writing + c.ready + c.claimed + hub.core.verifying,
                    hub.core.fatal.is_some(),
                )
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
        tracing::info!(
            quiet = report.quiet,
            in_flight = report.in_flight,
            secs = report.waited.as_secs_f64(),
            "pipeline drained"
        );
        report
    }
}
