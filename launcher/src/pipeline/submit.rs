//! Jobs in, partitions out: admission (the checks before anything per job is allocated),
//! submission (the request opened and checked once, its public inputs computed, its bytes sealed,
//! all without the core lock), the job's place in the core ([`Core::accept`]), cancellation,
//! and the bounded, priority-ordered hand-out of partitions to synth-proc ([`Core::pump_synth`]).

use std::os::fd::AsFd;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use blstrs::Scalar;
use kernels::circuits::AnyCircuit;
use shm_protocol::control::{EventKind, JobRequest, TimelineEvent, ToSynth, NO_SLOT};
use shm_protocol::request::SealedRequest;

use super::child::{OutboxRefused, Outgoing, Role, ToChild};
use super::machine::{Core, LiveJob};
use super::settings::JobOptions;
use super::{Pipeline, PipelineError, Result, EXPRESS_LANE, SRS_CONFIRM_TIMEOUT};
use crate::jobs::{JobOutcome, JobSpec};
use crate::sync::lock;

/// Requests up to this size travel inline in the synthesis requests (a built-in circuit's is 12
/// bytes); larger ones (Filecoin requests) in a sealed memfd. See `control::JobRequest`.
const INLINE_REQUEST_MAX: usize = 256;

/// What [`Pipeline::cancel`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cancelled {
    /// Some partition of the job had been handed to synth-proc.
    pub was_running: bool,
}

/// A submitted job: its id and where its outcome arrives.
pub struct JobHandle {
    /// Job id.
    pub id: u64,
    rx: mpsc::Receiver<JobOutcome>,
}

impl JobHandle {
    /// Waits for the outcome. [`PipelineError::Stopped`] when the pipeline stopped (or its
    /// dispatcher failed) before the job ended.
    pub fn wait(self) -> Result<JobOutcome> {
        self.rx.recv().map_err(|_| PipelineError::Stopped)
    }

    /// Waits at most `timeout`.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<Option<JobOutcome>> {
        match self.rx.recv_timeout(timeout) {
            Ok(o) => Ok(Some(o)),
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(PipelineError::Stopped),
        }
    }
}

/// A job opened and checked, ready for the core.
pub(super) struct NewJob {
    /// What the job table keeps.
    pub(super) spec: JobSpec,
    /// Its resolved priority.
    pub(super) priority: i32,
    /// The public inputs of every partition.
    pub(super) inputs: Vec<Vec<Scalar>>,
    /// Its sealed request, when it does not travel inline.
    pub(super) memfd: Option<SealedRequest>,
    /// The id its caller gives it ([`JobOptions::id`]); `None`: the next automatic one.
    pub(super) id: Option<u64>,
}

impl NewJob {
    /// Opens `request` through `circuit` (of id `circuit_id`) and checks it: partitions within
    /// `max_partitions`, every partition's public inputs; seals the bytes in a memfd when they
    /// do not travel inline. Takes no lock: a Filecoin request's checks take time.
    pub(super) fn open(
        circuit: AnyCircuit,
        circuit_id: u64,
        request: &[u8],
        priority: i32,
        max_partitions: u32,
    ) -> Result<NewJob> {
        // A Filecoin job's count follows from its proof type and request (bounded by the
        // request size limit); the same cap applies once it is opened.
        let job = kernels::job::open(&circuit, request).map_err(PipelineError::Request)?;
        if job.partitions() > max_partitions as usize {
            return Err(PipelineError::PartitionLimit {
                circuit,
                asked: job.partitions(),
                max: max_partitions,
            });
        }
        let inputs: Vec<Vec<Scalar>> = (0..job.partitions())
            .map(|k| job.public_inputs(k))
            .collect::<Result<_, _>>()
            .map_err(PipelineError::Request)?;
        let partitions = u32::try_from(job.partitions())
            .map_err(|_| PipelineError::TooManyPartitions(job.partitions()))?;
        drop(job);
        let (request, memfd) = if request.len() <= INLINE_REQUEST_MAX {
            (JobRequest::Inline(request.to_vec()), None)
        } else {
            let memfd = SealedRequest::create(&circuit.to_string(), request)
                .map_err(PipelineError::Handoff)?;
            (JobRequest::Memfd { len: memfd.len() }, Some(memfd))
        };
        Ok(NewJob {
            spec: JobSpec {
                circuit: circuit.to_string(),
                circuit_id,
                partitions,
                request,
                // Set when the core takes the job: it knows how the circuit travels.
                witness: false,
            },
            priority,
            inputs,
            memfd,
            id: None,
        })
    }
}

impl Core {
    /// Takes an opened job into the table (refused when the pipeline is fatal, or when the id
    /// it is given is live); its partitions are handed out as the window allows.
    pub(super) fn accept(&mut self, job: NewJob) -> Result<JobHandle> {
        if let Some(f) = &self.fatal {
            return Err(PipelineError::Fatal(f.clone()));
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
                    return Err(PipelineError::JobIdTaken(id));
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
        let (tx, rx) = mpsc::channel();
        self.waiters.insert(id, tx);
        self.pump_synth();
        Ok(JobHandle { id, rx })
    }

    /// Cancels a live job (see [`Pipeline::cancel`]).
    pub(super) fn cancel(&mut self, job_id: u64) -> Result<Cancelled> {
        let (outcome, was_running) = self
            .jobs
            .cancel(job_id)
            .ok_or(PipelineError::UnknownJob(job_id))?;
        tracing::info!(job = job_id, was_running, "job cancelled");
        self.counters.cancelled += 1;
        if was_running {
            // synth-proc drops the job's partitions it has not started. Best effort: a full
            // queue or a dead synth-proc only means they are synthesized and freed unproved.
            if let Some(o) = self
                .children
                .get(&Role::Synth)
                .and_then(|info| info.outbox.as_ref())
            {
                let _ = o.try_send_msg(ToSynth::Cancel { job_id });
            }
        }
        // Failed outcomes free the job's READY slots (`discard_orphans`).
        self.deliver(outcome);
        self.pump_synth();
        Ok(Cancelled { was_running })
    }

    /// Sends pending partitions to synth-proc in priority order, if one is running, while fewer
    /// than `synth_window` are there, without blocking: what does not fit in its queue stays
    /// pending for a later tick.
    pub(super) fn pump_synth(&mut self) {
        if self.holding {
            return;
        }
        let Some(outbox) = self
            .children
            .get(&Role::Synth)
            .and_then(|info| info.outbox.as_ref())
        else {
            return;
        };
        // The express lane first (HIGH/CRITICAL, beside synth-proc's queue), then the window.
        let mut requests = self.jobs.take_express(EXPRESS_LANE);
        let room = self
            .rules
            .synth_window
            .saturating_sub(self.jobs.outstanding());
        requests.extend(self.jobs.take_pending(room));
        let mut unsent = Vec::new();
        let mut handouts = Vec::new();
        let mut refused = None;
        for req in requests {
            if refused.is_some() {
                unsent.push(req);
                continue;
            }
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
            let kept = req.clone();
            let handout =
                TimelineEvent::now(EventKind::SynthHandout, req.job_id, req.partition, NO_SLOT);
            let msg = Outgoing {
                msg: ToChild::Synth(ToSynth::Synthesize(req)),
                fd,
            };
            match outbox.try_send(msg) {
                Ok(()) => handouts.push(handout),
                Err(why) => {
                    refused = Some(why);
                    unsent.push(kept);
                }
            }
        }
        for e in handouts {
            self.progress.record(e);
        }
        if !unsent.is_empty() {
            self.counters.sends_deferred += unsent.len() as u64;
            if refused == Some(OutboxRefused::Closed) {
                tracing::warn!("synth-proc's control channel is closed; requests kept pending");
            }
            self.jobs.unsend(&unsent);
        }
        let outstanding = self.jobs.outstanding() as u64;
        self.counters.synth_outstanding_max = self.counters.synth_outstanding_max.max(outstanding);
    }
}

impl Pipeline {
    /// Accepts a job: `circuit` and its request bytes (`kernels::job`). The request is opened
    /// here, through the job, and checked (a Filecoin request is parsed and its vanilla proofs
    /// verified; the public inputs of every partition are computed for the proof checks), so a
    /// bad one is refused at once with the reason, before anything is queued. The bytes are
    /// read from the caller once: synth-proc gets them inline (small requests) or in a sealed
    /// memfd, so the job does not depend on any file after this returns. Errors for a circuit
    /// this pipeline does not serve or a pipeline that gave up; everything later arrives as the
    /// job's outcome.
    pub fn submit_job(&self, circuit: AnyCircuit, request: &[u8]) -> Result<JobHandle> {
        self.submit_job_with(circuit, request, JobOptions::default())
    }

    /// The checks of [`Pipeline::submit_job`] that need no job: the request's size, and a
    /// built-in job's partition count (it names it: refused before the job, or anything per
    /// partition, exists). A caller that records a job before submitting it (the service's
    /// journal) asks here first; the submit runs the same checks again. Errors with
    /// [`PipelineError::RequestTooLarge`] or [`PipelineError::PartitionLimit`]; a request that
    /// does not parse is left to the submit, which refuses it with the reason.
    pub fn admit(&self, circuit: &AnyCircuit, request: &[u8]) -> Result<()> {
        let (max_request_bytes, max_partitions) = {
            let core = lock(&self.core);
            let f = &core.rules.faults;
            (f.max_request_bytes, f.max_partitions)
        };
        admission(circuit, request, max_request_bytes, max_partitions)
    }

    /// [`Pipeline::submit_job`] with options (its priority, its id). Errors for a priority off
    /// the scale, and for a given id that is live.
    pub fn submit_job_with(
        &self,
        circuit: AnyCircuit,
        request: &[u8],
        options: JobOptions,
    ) -> Result<JobHandle> {
        let t = Instant::now();
        let priority =
            crate::jobs::effective_priority(&circuit.to_string(), options.priority.into())
                .ok_or(PipelineError::BadPriority(options.priority.into()))?;
        let circuit_id = circuit
            .circuit_id()
            .map_err(|source| PipelineError::Circuit {
                spec: circuit,
                cause: source,
            })?;
        let (max_request_bytes, max_partitions) = {
            let core = lock(&self.core);
            if let Some(f) = &core.fatal {
                return Err(PipelineError::Fatal(f.clone()));
            }
            if !core.circuits.contains_key(&circuit_id) {
                return Err(PipelineError::Unserved(circuit));
            }
            let f = &core.rules.faults;
            (f.max_request_bytes, f.max_partitions)
        };
        admission(&circuit, request, max_request_bytes, max_partitions)?;
        let job = NewJob {
            id: options.id,
            ..NewJob::open(circuit, circuit_id, request, priority, max_partitions)?
        };
        tracing::debug!(%circuit, partitions = job.spec.partitions, bytes = request.len(), secs = t.elapsed().as_secs_f64(), "job accepted");
        // An evicted SRS is loaded again first; held until the job is in the table, so no evict
        // runs between the check and the job.
        let _srs_ops = lock(&self.srs_ops);
        if lock(&self.srs).get(circuit_id).is_none() {
            tracing::info!(%circuit, "SRS evicted: loading it for a job");
            self.load_srs(circuit, circuit_id, SRS_CONFIRM_TIMEOUT)?;
        }
        lock(&self.core).accept(job)
    }

    /// [`Pipeline::submit_job`] for a built-in circuit: partition `p` is proved with the witness
    /// of `seed + p`.
    pub fn submit(&self, circuit: &str, seed: u64, partitions: u32) -> Result<JobHandle> {
        let circuit: AnyCircuit = circuit.parse().map_err(|source| PipelineError::BadSpec {
            spec: circuit.to_owned(),
            cause: source,
        })?;
        if circuit.builtin().is_none() {
            return Err(PipelineError::NotSeeded(circuit));
        }
        let request = kernels::job::BuiltinRequest { seed, partitions };
        self.submit_job(circuit, &request.to_bytes())
    }

    /// [`Pipeline::submit_job`] for a Filecoin proof request file (a C1 output in any of its
    /// forms, a PoSt or a SnapDeals request), of `kind` or of the kind it names, which must be
    /// of `family` when one is given (`kernels::job::filecoin_request_kind`). The file is read
    /// once, here; deleting or changing it afterwards does not affect the job. Errors name the
    /// file. The outcome's proofs, concatenated in order, are the proof bytes filecoin-proofs
    /// writes.
    pub fn submit_request(
        &self,
        kind: Option<kernels::filecoin::ProofKind>,
        family: Option<kernels::circuits::ProofFamily>,
        path: &std::path::Path,
    ) -> Result<JobHandle> {
        let named = |source: PipelineError| PipelineError::RequestFile {
            path: path.to_owned(),
            cause: Box::new(source),
        };
        let max = lock(&self.core).rules.faults.max_request_bytes;
        let bytes = read_request_file(path, max).map_err(named)?;
        let kind = kernels::job::filecoin_request_kind(&bytes, kind, family)
            .map_err(|e| named(PipelineError::Request(e)))?;
        self.submit_job(AnyCircuit::Filecoin(kind), &bytes)
            .map_err(named)
    }

    /// Cancels a live job: its partitions not yet handed to synth-proc are dropped, synth-proc
    /// drops those it has not started (`ToSynth::Cancel`), its READY slots are freed unproved,
    /// and what synth-proc or a gpu-proc is still doing for it is dropped when it arrives; its
    /// waiter gets the outcome [`JobFailure::Cancelled`](super::JobFailure::Cancelled). Errors
    /// with [`PipelineError::UnknownJob`] for a job that is not live.
    pub fn cancel(&self, job_id: u64) -> Result<Cancelled> {
        lock(&self.core).cancel(job_id)
    }

    /// Live jobs that run before live job `job_id` (a higher priority, or the same and older);
    /// `None` when it is not live. A count under the core lock: nothing else is built.
    pub fn jobs_ahead(&self, job_id: u64) -> Option<usize> {
        lock(&self.core).jobs.ahead_of(job_id)
    }
}

/// [`Pipeline::admit`]'s checks against the limits `max_request_bytes` and `max_partitions`.
fn admission(
    circuit: &AnyCircuit,
    request: &[u8],
    max_request_bytes: u64,
    max_partitions: u32,
) -> Result<()> {
    if request.len() as u64 > max_request_bytes {
        return Err(PipelineError::RequestTooLarge {
            bytes: request.len(),
            max: max_request_bytes,
        });
    }
    if circuit.builtin().is_some() {
        // A request that does not parse is refused by `kernels::job::open`, with the reason.
        if let Ok(r) = kernels::job::BuiltinRequest::from_bytes(request) {
            if r.partitions > max_partitions {
                return Err(PipelineError::PartitionLimit {
                    circuit: *circuit,
                    asked: r.partitions as usize,
                    max: max_partitions,
                });
            }
        }
    }
    Ok(())
}

/// Reads a request file for a job as the launcher ([`crate::request_file::read`]: no symlink,
/// no FIFO or device, at most `max` bytes, checked before reading).
pub fn read_request_file(path: &std::path::Path, max: u64) -> Result<Vec<u8>> {
    crate::request_file::read(path, max, crate::request_file::Reader::Launcher)
        .map_err(PipelineError::RequestFileRefused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_refuses_large_requests_and_named_partition_counts_over_the_limit() {
        let bits: AnyCircuit = "bits:8".parse().unwrap();
        let req = |partitions| {
            kernels::job::BuiltinRequest {
                seed: 1,
                partitions,
            }
            .to_bytes()
        };
        assert!(admission(&bits, &req(4), 12, 4).is_ok());
        assert!(matches!(
            admission(&bits, &req(5), 12, 4),
            Err(PipelineError::PartitionLimit {
                asked: 5,
                max: 4,
                ..
            })
        ));
        assert!(matches!(
            admission(&bits, &req(1), 11, 4),
            Err(PipelineError::RequestTooLarge { bytes: 12, max: 11 })
        ));
        // Left to the submit, which opens the job and says why.
        assert!(admission(&bits, b"short", 12, 4).is_ok());
    }
}
