//! Jobs in: admission (the checks before anything per job is allocated), submission (the request
//! opened and checked once, its public inputs computed, its bytes sealed, all without the
//! pipeline's lock), then the job handed to the core (`Core::accept`, which hands its
//! partitions to synth-proc) with a waiter for its outcome; cancellation.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use blstrs::Scalar;
use kernels::circuits::AnyCircuit;
use shm_protocol::control::JobRequest;
use shm_protocol::request::SealedRequest;

use super::core::jobs::{JobOutcome, JobSpec};
use super::core::NewJob;
use super::settings::JobOptions;
use super::{Pipeline, PipelineError, Result, SRS_CONFIRM_TIMEOUT};
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
    pub(super) rx: mpsc::Receiver<JobOutcome>,
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
            let hub = lock(&self.hub);
            let f = &hub.core.rules.faults;
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
            super::jobs::effective_priority(&circuit.to_string(), options.priority.into())
                .ok_or(PipelineError::BadPriority(options.priority.into()))?;
        let circuit_id = circuit
            .circuit_id()
            .map_err(|source| PipelineError::Circuit {
                spec: circuit,
                cause: source,
            })?;
        let (max_request_bytes, max_partitions) = {
            let hub = lock(&self.hub);
            let core = &hub.core;
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
        if !lock(&self.hub).core.srs_is_loaded(circuit_id) {
            tracing::info!(%circuit, "SRS evicted: loading it for a job");
            self.load_srs(circuit, circuit_id, SRS_CONFIRM_TIMEOUT)?;
        }
        self.accept(job)
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
        let max = lock(&self.hub).core.rules.faults.max_request_bytes;
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
        let was_running = self.apply(|core| core.cancel(job_id)).value?;
        Ok(Cancelled { was_running })
    }

    /// Hands an opened job to the core, with a waiter for its outcome.
    pub(super) fn accept(&self, job: NewJob) -> Result<JobHandle> {
        let (done, rx) = {
            let mut hub = lock(&self.hub);
            let done = hub.apply(|core| core.accept(job));
            // Nothing of the job is delivered before this: its waiter is there in time.
            let rx = done.value.as_ref().ok().map(|id| hub.wait_for(*id));
            (done, rx)
        };
        let id = self.finish(done).value?;
        let rx = rx.ok_or(PipelineError::UnknownJob(id))?;
        Ok(JobHandle { id, rx })
    }

    /// Live jobs that run before live job `job_id` (a higher priority, or the same and older);
    /// `None` when it is not live. A count under the pipeline's lock: nothing else is built.
    pub fn jobs_ahead(&self, job_id: u64) -> Option<usize> {
        lock(&self.hub).core.jobs.ahead_of(job_id)
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
