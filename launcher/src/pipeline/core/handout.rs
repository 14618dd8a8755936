//! Jobs in, partitions out, as [`Core`] transitions: a job opened and checked by the shell takes
//! its place in the core ([`Core::accept`]), a cancel takes it back ([`Core::cancel`]), and
//! [`Core::pump_synth`] hands pending partitions to synth-proc, bounded and in priority order,
//! as [`Action::Send`]s; [`Core::settle`] keeps pending what synth-proc's queue refused.

use std::os::fd::AsFd;

use blstrs::Scalar;
use shm_protocol::control::{EventKind, JobRequest, TimelineEvent, ToSynth, NO_SLOT};
use shm_protocol::request::SealedRequest;

use super::events::{OutboxRefused, Role, Settled, ToChild};
use super::failure::Refusal;
use super::jobs::JobSpec;
use super::machine::{Core, LiveJob};
#[cfg(doc)]
use super::Action;

/// HIGH/CRITICAL partitions at once in synth-proc's express lane (its one express worker runs
/// one, the next waits there, so the worker never idles between two).
pub const EXPRESS_LANE: usize = 2;

/// A job opened and checked, ready for the core.
pub(crate) struct NewJob {
    /// What the job table keeps.
    pub(crate) spec: JobSpec,
    /// Its resolved priority.
    pub(crate) priority: i32,
    /// The public inputs of every partition.
    pub(crate) inputs: Vec<Vec<Scalar>>,
    /// Its sealed request, when it does not travel inline.
    pub(crate) memfd: Option<SealedRequest>,
    /// The id its caller gives it (`JobOptions::id`); `None`: the next automatic one.
    pub(crate) id: Option<u64>,
}

impl Core {
    /// Takes an opened job into the table (refused when the pipeline is fatal, or when the id
    /// it is given is live) and returns its id; its partitions are handed out as the window
    /// allows.
    pub(crate) fn accept(&mut self, job: NewJob) -> Result<u64, Refusal> {
        if let Some(f) = &self.fatal {
            return Err(Refusal::Fatal(f.clone()));
        }
        let partitions = job.spec.partitions;
        let mut job = job;
        job.spec.witness = self
            .circuits
            .get(&job.spec.circuit_id)
            .is_some_and(|c| c.witness);
        let id = match job.id {
            None => self.jobs.submit_at(job.spec, job.priority),
            Some(id) => {
                if !self.jobs.submit_as(id, job.spec, job.priority) {
                    return Err(Refusal::JobIdTaken(id));
                }
                id
            }
        };
        self.live.insert(
            id,
            LiveJob {
                inputs: job.inputs,
                memfd: job.memfd,
            },
        );
        for p in 0..partitions {
            self.progress
                .record(TimelineEvent::now(EventKind::JobQueued, id, p, NO_SLOT));
        }
        self.pump_synth();
        Ok(id)
    }

    /// Cancels a live job: its outcome is delivered at once, synth-proc is told to drop what it
    /// has not started (when some partition was handed to it). Returns whether some partition
    /// had been handed out.
    pub(crate) fn cancel(&mut self, job_id: u64) -> Result<bool, Refusal> {
        let (outcome, was_running) = self
            .jobs
            .cancel(job_id)
            .ok_or(Refusal::UnknownJob(job_id))?;
        tracing::info!(job = job_id, was_running, "job cancelled");
        self.counters.cancelled += 1;
        if was_running && self.is_reachable(Role::Synth) {
            // synth-proc drops the job's partitions it has not started. Best effort: a full
            // queue or a dead synth-proc only means they are synthesized and freed unproved.
            self.send(Role::Synth, ToSynth::Cancel { job_id }, None);
        }
        // Failed outcomes free the job's READY slots (`discard_orphans`).
        self.deliver(outcome);
        self.pump_synth();
        Ok(was_running)
    }

    /// Whether `role` is up and can be sent messages.
    pub(crate) fn is_reachable(&self, role: Role) -> bool {
        self.children.get(&role).is_some_and(|info| info.reachable)
    }

    /// Hands pending partitions to synth-proc in priority order, if one is running, while fewer
    /// than `synth_window` are there, as [`Action::Send`]s; what its queue refuses is kept
    /// pending for a later tick ([`Core::settle`]).
    pub(crate) fn pump_synth(&mut self) {
        if self.holding || !self.is_reachable(Role::Synth) {
            return;
        }
        // The express lane first (HIGH/CRITICAL, beside synth-proc's queue), then the window.
        let mut requests = self.jobs.take_express(EXPRESS_LANE);
        let room = self
            .rules
            .synth_window
            .saturating_sub(self.jobs.outstanding());
        requests.extend(self.jobs.take_pending(room));
        if requests.is_empty() {
            self.note_outstanding();
            return;
        }
        for req in requests {
            // A duplicate of the job's memfd for the writer thread: the job may end before it is
            // sent. Without its memfd synth-proc fails the partition, naming what is missing.
            let fd = match &req.request {
                JobRequest::Memfd { .. } => self
                    .live
                    .get(&req.job_id)
                    .and_then(|j| j.memfd.as_ref())
                    .and_then(|m| m.fd().as_fd().try_clone_to_owned().ok()),
                JobRequest::Inline(_) => None,
            };
            self.send(Role::Synth, ToSynth::Synthesize(req), fd);
        }
    }

    /// How the messages asked for went: a synthesis request queued is handed out (its timeline
    /// event recorded), one refused goes back to pending (sent on a later tick); an SRS load or
    /// evict refused is sent again at the next reconcile. Other messages are best effort.
    pub(crate) fn settle(&mut self, settled: Vec<Settled>) {
        let mut handouts = Vec::new();
        let mut unsent = Vec::new();
        let mut closed = false;
        for Settled { role, msg, result } in settled {
            match (msg, result) {
                (ToChild::Synth(ToSynth::Synthesize(req)), Ok(())) => handouts.push(
                    TimelineEvent::now(EventKind::SynthHandout, req.job_id, req.partition, NO_SLOT),
                ),
                (ToChild::Synth(ToSynth::Synthesize(req)), Err(why)) => {
                    closed |= why == OutboxRefused::Closed;
                    unsent.push(req);
                }
                (msg, Err(why)) => self.unsent_srs(role, &msg, why),
                (_, Ok(())) => {}
            }
        }
        let had_handouts = !handouts.is_empty() || !unsent.is_empty();
        for e in handouts {
            self.progress.record(e);
        }
        if !unsent.is_empty() {
            self.counters.sends_deferred += unsent.len() as u64;
            if closed {
                tracing::warn!("synth-proc's control channel is closed; requests kept pending");
            }
            self.jobs.unsend(&unsent);
        }
        if had_handouts {
            self.note_outstanding();
        }
    }

    /// Keeps the most partitions ever at synth-proc at once.
    fn note_outstanding(&mut self) {
        let outstanding = self.jobs.outstanding() as u64;
        self.counters.synth_outstanding_max = self.counters.synth_outstanding_max.max(outstanding);
    }
}
