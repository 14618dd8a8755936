//! The split pipeline as one value: the ring, the SRS images, the supervised children and the job
//! table. `demo`, `prove`, `bench` and the service all drive a [`Pipeline`].
//!
//! One dispatcher thread owns the reaction to everything the children do (published, proved,
//! died, restarted); clients call [`Pipeline::submit`] from any thread and wait on the returned
//! [`JobHandle`]. The crash promise of DESIGN.md is implemented here:
//! - gpu-proc dies → its CLAIMED slots go back to READY (`Ring::reclaim_owner`), the supervisor
//!   restarts it, the new one (or another gpu-proc) proves them; nothing is synthesized again;
//! - synth-proc dies → its WRITING slots go back to FREE; every partition it had been given that
//!   the ring does not hold is sent again to the restarted synth-proc;
//! - a gpu-proc whose batch runs past its progress deadline (`max(floor, factor × the circuit's
//!   measured proving time per slot × batch)`, or the first-proof deadline before any
//!   measurement; known from its GPU_CLAIM / GPU_END events) is killed, and so is a synth-proc
//!   whose synthesis of a partition runs past its own deadline (same rule over SYNTH_START /
//!   SYNTH_END): a hung call cannot hold its slots while the heartbeat thread keeps beating;
//! - every death or kill of the process holding a partition's slot, a proof that does not verify
//!   and a DONE slot that does not match the job table count one failed attempt of that
//!   partition; after [`FaultSettings::max_attempts`] its job fails with every reason, its other
//!   partitions are dropped and its READY slots freed (`Ring::claim_ready_at` +
//!   `ClaimedSlot::discard`), so a poison slot cannot kill gpu-procs forever. One job never turns
//!   the pipeline fatal;
//! - a child that served once is restarted forever with a capped exponential back-off; a
//!   gpu-proc that keeps failing is shown `down` and the others take the work (any gpu-proc
//!   claims any slot). Only a child that never served (a bad configuration) is given up: the
//!   pipeline turns fatal when synth-proc or every gpu-proc is given up.
//!
//! Sends to the children never block under the pipeline's lock: each child has a bounded
//! [`Outbox`](outbox::Outbox) drained by its own writer thread; a synthesis request that does not
//! fit stays `Pending` in the job table and is sent on a later tick. Proofs are checked off the
//! lock too, on a small verifier pool (`verify`); a job is delivered only when every partition's
//! proof verified.
//! A panic of the dispatcher thread is contained: the pipeline turns fatal with its message
//! (`dispatch`), so nothing accepts jobs that are never dispatched.
//!
//! Hand-out to synth-proc is bounded: at most `synth_concurrency + synth_lookahead` partitions
//! are at synth-proc (sent, not yet published or failed) at once; the rest wait in the job table
//! in priority order, so a CRITICAL job submitted behind a long queue is synthesized next, a
//! drain holds back everything not yet sent, and [`Pipeline::cancel`] takes queued work back
//! without asking synth-proc. GPU claims follow the same priorities: each
//! [`SynthRequest`](shm_protocol::control::SynthRequest) carries its job's priority, synth-proc
//! publishes the slot at it, and gpu-procs claim READY slots highest priority first, then oldest
//! (`SlotWriter::set_claim_priority`), so an urgent partition overtakes READY NORMAL work at the
//! next claim (a running GPU call is not preempted). Client-controlled sizes are checked before
//! anything proportional to them is allocated: partitions per job
//! ([`FaultSettings::max_partitions`]) and request files ([`read_request_file`]: `O_NOFOLLOW |
//! O_NONBLOCK`, regular files only, size checked against [`FaultSettings::max_request_bytes`]
//! before a bounded read). The timeline keeps at most [`FaultSettings::timeline_events`] events
//! when a bound is set.
//!
//! A configured circuit's SRS can be dropped and loaded again while serving
//! ([`Pipeline::evict_srs`], [`Pipeline::preload_srs`], `srs_set`): an evict is refused while
//! jobs of the circuit are live, and a job whose SRS was evicted loads it first.
//!
//! # Files
//! - `core/`: the state machine without I/O or locks (`Core`: events in, actions
//!   out): `events` (what it reacts to), `machine` (child lifecycle, messages, liveness),
//!   `handout` (jobs in, partitions to synth-proc), `results` (DONE slots, proof checks,
//!   attempts, outcomes), `srs` (the SRS set and residency), `stats` (timeline, batches,
//!   measured times), `jobs` (the job table), `failure` (why a job or an attempt failed, as
//!   values), `rules` (deadlines, attempts, limits);
//! - the shell around it: `hub` (the core behind the pipeline's one lock, with the children's
//!   outboxes and the jobs' waiters: carries out messages and outcomes), `dispatch` (the
//!   dispatcher thread: events in, kills, checks and SRS reads out), `verify` (the verifier
//!   pool), `child` (one child's supervisor and outbox), `srs_set` (the SRS calls and the
//!   gpu-procs' spawn hook), `submit` (admission, submission, cancel), `drain` (the first half
//!   of a graceful stop), `settings`, `start` (starting, and putting the parts together),
//!   `status`, `memory` (the host memory model);
//! - tests: `fake` (fake children: a world around a bare core, and a pipeline over fake
//!   children) and `tests` (the core's transitions, the dispatcher and the verifier pool).

pub mod child;
mod core;
mod dispatch;
mod drain;
mod error;
mod hub;
mod mail;
pub mod memory;
mod outbox;
mod settings;
mod srs_set;
mod start;
mod status;
mod submit;
mod verify;

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use kernels::circuits::AnyCircuit;
use shm_protocol::control::{TimelineEvent, ToGpu};
use shm_protocol::Ring;

pub use self::core::jobs;
pub use self::core::EXPRESS_LANE;
pub use self::core::{
    AttemptFailure, ChildLoss, FaultSettings, Holding, JobFailure, ProofRejection,
};
use self::core::{Core, Event, Role};
pub use self::core::{SrsLine, SrsTier};
use child::Supervisor;
pub use error::PipelineError;
use hub::{Applied, Hub, Unlocked};
use mail::Mail;
pub use memory::ring_text;
pub use settings::{CircuitSetting, GpuSetting, JobOptions, PipelineSettings};
pub use srs_set::{SrsEvicted, SrsLoaded};
pub use status::{
    ChildState, ChildStatus, Counters, GpuLine, JobLine, PipelineStatus, SlotClassLine, SlotCounts,
};
pub use submit::{read_request_file, Cancelled, JobHandle};

pub use self::core::jobs::{
    JobTimes, PRIORITY_CRITICAL, PRIORITY_HIGH, PRIORITY_LOW, PRIORITY_NORMAL, PRIORITY_UNSPECIFIED,
};
use crate::pinning::PinMode;
use crate::sync::lock;

/// How long [`Pipeline::preload_srs`] and [`Pipeline::evict_srs`] wait for every gpu-proc to
/// confirm (the CUDA backend opens its SRS in the background, so a load is confirmed quickly).
pub const SRS_CONFIRM_TIMEOUT: Duration = Duration::from_secs(600);

/// Result of the pipeline's API.
pub type Result<T, E = PipelineError> = std::result::Result<T, E>;

/// The running split pipeline.
pub struct Pipeline {
    /// The core (which owns the SRS images in shared memory) with the children's outboxes and
    /// the jobs' waiters: the pipeline's one lock.
    hub: Arc<Mutex<Hub>>,
    supervisors: Mutex<Vec<Supervisor>>,
    dispatcher: Option<thread::JoinHandle<()>>,
    /// The dispatcher's channel, for its `Stop` and the proof checks a client thread's
    /// transition asks for.
    events: mpsc::Sender<Mail>,
    ring: Arc<Ring>,
    pin_mode: PinMode,
    /// Held by a preload, an evict, and a submit from its SRS check until its job is in the
    /// table: a job never finds its SRS evicted under it. Taken before the hub's lock.
    srs_ops: Mutex<()>,
    /// The circuits' pre-compiled constraint systems (synth-proc maps their memfds).
    r1cs: Vec<crate::r1cs::SharedR1cs>,
    /// How each circuit is synthesized, in the settings' order.
    synthesis: Vec<(AnyCircuit, crate::r1cs::Plan)>,
}

impl Pipeline {
    /// The pre-compiled constraint system of `circuit_id`, if it is synthesized through one
    /// (for syntheses in this process: [`crate::r1cs::SharedR1cs::open`]).
    pub fn precompiled(&self, circuit_id: u64) -> Option<&crate::r1cs::SharedR1cs> {
        self.r1cs.iter().find(|r| r.circuit_id == circuit_id)
    }

    /// Runs `transition` on the core from a client thread: messages and outcomes are carried
    /// out under the lock ([`Hub::apply`]); after it, a kill is sent at once and a proof check
    /// goes to the dispatcher (its verifier pool). SRS files to read are returned to the caller,
    /// with the transition's value and what the children's outboxes refused.
    fn apply<T>(&self, transition: impl FnOnce(&mut Core) -> T) -> Applied<T> {
        let done = lock(&self.hub).apply(transition);
        self.finish(done)
    }

    /// The part of [`Pipeline::apply`] after the lock.
    fn finish<T>(&self, mut done: Applied<T>) -> Applied<T> {
        let mut loads = Vec::new();
        for action in done.later.drain(..) {
            match action {
                Unlocked::Kill { role, pid } => {
                    tracing::debug!(%role, pid, "killing");
                    child::kill(pid, libc::SIGKILL);
                }
                Unlocked::Verify(task) => {
                    // A dispatcher that ended has no pool: the pipeline is stopping.
                    let _ = self.events.send(Mail::Perform(Unlocked::Verify(task)));
                }
                Unlocked::LoadSrs(load) => loads.push(Unlocked::LoadSrs(load)),
            }
        }
        done.later = loads;
        done
    }

    /// Makes every gpu-proc stop claiming slots and waits until each has confirmed (a restarted
    /// gpu-proc starts unpaused). GPU-only capacity runs fill the ring meanwhile.
    pub fn pause_gpus(&self, timeout: Duration) -> Result<()> {
        self.send_gpus(ToGpu::Pause)?;
        let gpus = lock(&self.supervisors).len() - 1;
        let deadline = Instant::now() + timeout;
        while !lock(&self.hub).core.paused_all(gpus) {
            if Instant::now() >= deadline {
                return Err(PipelineError::PauseTimeout(timeout));
            }
            thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    /// Lets every gpu-proc claim slots again.
    pub fn resume_gpus(&self) -> Result<()> {
        self.send_gpus(ToGpu::Resume)
    }

    fn send_gpus(&self, msg: ToGpu) -> Result<()> {
        let done = self.apply(|core| core.tell_gpus(msg));
        match done.refused.first() {
            Some(&(role, why)) => Err(PipelineError::Unreachable {
                role,
                cause: std::io::Error::other(match why {
                    child::OutboxRefused::Full => "its message queue is full",
                    child::OutboxRefused::Closed => "its control channel is closed",
                }),
            }),
            None => Ok(()),
        }
    }

    /// Waits until every child said hello (or `timeout`); errors with the reason a child gave up.
    pub fn wait_ready(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let hub = lock(&self.hub);
                let core = &hub.core;
                if let Some(f) = &core.fatal {
                    return Err(PipelineError::Fatal(f.clone()));
                }
                // At start every child must come up: one given up is a configuration error.
                if let Some(f) = core.children.values().find_map(|c| c.gave_up.as_ref()) {
                    return Err(PipelineError::Fatal(f.clone()));
                }
                let sups = lock(&self.supervisors);
                let ready = sups.iter().all(|s| {
                    core.children
                        .get(&s.role())
                        .is_some_and(|c| !c.detail.is_empty() && c.pid.is_some())
                });
                if ready {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(PipelineError::StartTimeout(timeout));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Pids of the running children by role (tests use this to kill them).
    pub fn pids(&self) -> HashMap<Role, u32> {
        lock(&self.supervisors)
            .iter()
            .filter_map(|s| s.pid().map(|p| (s.role(), p)))
            .collect()
    }

    /// Why the pipeline cannot go on (a role given up, its dispatcher panicked), if it cannot.
    /// The service exits on it, so that systemd restarts it.
    pub fn fatal(&self) -> Option<String> {
        lock(&self.hub).core.fatal.clone()
    }

    /// Takes the timeline events recorded so far (the last [`FaultSettings::timeline_events`]
    /// when bounded).
    pub fn take_timeline(&self) -> Vec<TimelineEvent> {
        lock(&self.hub).core.progress.timeline.drain(..).collect()
    }

    /// The ring (tests and benches look at it).
    pub fn ring(&self) -> &Arc<Ring> {
        &self.ring
    }

    /// Asks every child to finish and exit, waits for them, fails the jobs still live.
    pub fn shutdown(mut self) {
        self.stop_all();
    }

    /// [`Pipeline::shutdown`] for a pipeline that is still shared: tells every child to exit and
    /// waits for it (up to 20 s each, then SIGKILL), which removes their cgroups. The dispatcher
    /// then collects the last results and ends; it is joined when the pipeline is dropped. Live
    /// jobs are not failed here (the service's journal keeps them). The service uses it when a
    /// client thread still holds the pipeline at the end of a stop.
    pub fn stop_children(&self) {
        for s in lock(&self.supervisors).iter() {
            s.request_stop();
        }
        // A full queue: the supervisor kills the child after its grace.
        self.apply(Core::stop);
        let sups: Vec<Supervisor> = lock(&self.supervisors).drain(..).collect();
        for s in sups {
            s.stop(Duration::from_secs(20));
        }
        // After the children's last events (one channel: they arrive first). A dispatcher that
        // ended already (it panicked) is not there to receive it.
        let _ = self.events.send(Mail::Event(Event::Stop));
    }

    fn stop_all(&mut self) {
        self.stop_children();
        if let Some(d) = self.dispatcher.take() {
            let _ = d.join();
        }
        self.apply(Core::shut_down);
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        if self.dispatcher.is_some() {
            self.stop_all();
        }
    }
}
