//! The long-lived service's job core, below any transport: accepted jobs in the journal, the
//! pipeline's handles, idempotent submission, waiting with a timeout, cancellation, status.
//! `crate::api` puts the cuzk gRPC API on top of it; `splitprover run`
//! (`commands::service`) starts both.
//!
//! # The promises
//! - A job is acknowledged only once its row, request bytes included, is in the journal
//!   (`crate::journal`): it survives a restart of the service and runs after it.
//! - A request id names one job: a submission whose request id is already in the journal
//!   attaches to that job (queued, running, or succeeded and not yet expired) and never queues a
//!   second proof; only a job that ended without a proof (failed, cancelled) gives its request
//!   id to a new attempt, as Curio's retries expect. Submissions are serialized, so two
//!   concurrent retries cannot both queue.
//! - Every outcome is journaled (with where its time went) before any waiter is woken, so an
//!   answer a client got can be asked for again after a restart until it expires.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kernels::circuits::AnyCircuit;
use tokio::sync::watch;

use crate::config::ServiceConfig;
use crate::journal::{self, JobState, Journal, JournalJob};
use crate::metrics::Metrics;
use crate::pipeline::{
    JobHandle, JobOptions, JobTimes, Pipeline, PipelineError, PipelineStatus, SrsEvicted, SrsLoaded,
};

/// Why the service refused or could not answer; each maps to one gRPC status code.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The request is malformed or names something that cannot be proved.
    #[error("{0}")]
    InvalidArgument(String),
    /// No such job (never accepted here, or its result expired).
    #[error("{0}")]
    NotFound(String),
    /// A limit was reached; try again later.
    #[error("{0}")]
    Busy(String),
    /// The operation does not apply in the job's or circuit's state.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The service is stopping.
    #[error("the service is shutting down: request refused\nhint: send it again once the service is back")]
    ShuttingDown,
    /// Something on the service's side failed (journal, pipeline).
    #[error("{0}")]
    Internal(String),
}

/// A job to accept.
#[derive(Clone, Debug)]
pub struct Submission {
    /// What proves it.
    pub circuit: AnyCircuit,
    /// Its request bytes (`kernels::job`).
    pub request: Vec<u8>,
    /// cuzk's scale; 0 takes the kind's default.
    pub priority: i64,
    /// The client's idempotency key; `None` (or empty): `job-<id>`.
    pub request_id: Option<String>,
}

/// What [`Service::submit`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// The journal's id.
    pub id: u64,
    /// The id clients use (the request id).
    pub job_id: String,
    /// The request id named a job accepted before: nothing new was queued.
    pub existing: bool,
    /// Live jobs that run before it (higher or equal priority, older).
    pub queue_position: u32,
}

/// A job that ended, as the journal has it.
#[derive(Clone, Debug)]
pub struct Ended {
    /// The journal row.
    pub row: JournalJob,
}

impl Ended {
    /// Milliseconds from acceptance to the end.
    pub fn total_ms(&self) -> u64 {
        self.row
            .finished_at
            .map_or(0, |f| f.saturating_sub(self.row.submitted_at).max(0) as u64)
    }

    /// Where its time went (zero for rows from before the journal kept it).
    pub fn times(&self) -> JobTimes {
        self.row.times.unwrap_or_default()
    }
}

/// The service's limits and timings, from `[service]` (the request's size and partition count
/// are the pipeline's: [`Pipeline::admit`]).
#[derive(Clone, Debug)]
pub struct Limits {
    /// Accepted, unfinished jobs at most.
    pub max_queued_jobs: u64,
    /// A fetched result is kept this long.
    pub fetched_retention: Duration,
    /// An unfetched result is kept this long.
    pub result_retention: Duration,
}

impl Limits {
    /// From the configuration.
    pub fn new(c: &ServiceConfig) -> Self {
        Limits {
            max_queued_jobs: c.max_queued_jobs,
            fetched_retention: Duration::from_secs(c.fetched_retention_s),
            result_retention: Duration::from_secs(c.result_retention_s),
        }
    }
}

/// Jobs the pipeline holds, by journal id.
#[derive(Default)]
struct Live {
    handles: BTreeMap<u64, JobHandle>,
    /// Pipeline id → journal id (status shows journal ids).
    by_pipeline: HashMap<u64, u64>,
}

/// The running service.
pub struct Service {
    pipeline: Pipeline,
    journal: Mutex<Journal>,
    live: Mutex<Live>,
    /// One submission at a time: the request-id lookup and the acceptance are one step.
    submitting: Mutex<()>,
    /// Bumped after each batch of outcomes is journaled, and when the service closes.
    ended: watch::Sender<u64>,
    limits: Limits,
    /// New requests are refused (set on SIGTERM).
    stopping: AtomicBool,
    /// Waiters are let go (set once the drain is over).
    closing: AtomicBool,
    started: Instant,
    metrics: Metrics,
}

fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Service {
    /// A service over a started pipeline and an open journal.
    pub fn new(pipeline: Pipeline, journal: Journal, limits: Limits, metrics: Metrics) -> Self {
        Service {
            pipeline,
            journal: Mutex::new(journal),
            live: Mutex::new(Live::default()),
            submitting: Mutex::new(()),
            ended: watch::Sender::new(0),
            limits,
            stopping: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            started: Instant::now(),
            metrics,
        }
    }

    /// The pipeline.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Time since the service started.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Accepts a job (or finds the one its request id names).
    pub fn submit(&self, s: Submission) -> Result<Accepted, ServiceError> {
        if self.stopping.load(Ordering::Relaxed) {
            // Relaxed: a plain flag, nothing is published through it.
            return Err(ServiceError::ShuttingDown);
        }
        let _one = guard(&self.submitting);
        let request_id = s.request_id.filter(|r| !r.is_empty());
        if let Some(rid) = &request_id {
            let mut journal = guard(&self.journal);
            if let Some(id) = journal.find(rid).map_err(internal)? {
                match journal.state_of(id).map_err(internal)? {
                    // No proof came of it: Curio retries a failed proof with the same request
                    // id, and must get a new attempt, not the old failure.
                    Some(JobState::Failed | JobState::Cancelled) => {
                        journal.release_request_id(id).map_err(internal)?;
                        tracing::info!(request_id = %rid, old = id, "request id retried after its job ended without a proof");
                    }
                    _ => {
                        drop(journal);
                        return Ok(Accepted {
                            id,
                            job_id: rid.clone(),
                            existing: true,
                            queue_position: self.queue_position(id),
                        });
                    }
                }
            }
            if rid.starts_with("job-") {
                return Err(ServiceError::InvalidArgument(format!(
                    "request_id `{rid}`: ids of the form `job-N` are the service's own (given to \
                     jobs submitted without one); choose another"
                )));
            }
        }
        // The request's size and partition count, before the queue cap and the journal (the
        // pipeline's submit checks them again).
        self.pipeline
            .admit(&s.circuit, &s.request)
            .map_err(refused)?;
        let queued = guard(&self.live).handles.len() as u64;
        if queued >= self.limits.max_queued_jobs {
            return Err(ServiceError::Busy(format!(
                "busy: {queued} jobs queued (at most {}); try again later",
                self.limits.max_queued_jobs
            )));
        }
        let spec = s.circuit.to_string();
        let priority = crate::jobs::effective_priority(&spec, s.priority).ok_or_else(|| {
            ServiceError::InvalidArgument(PipelineError::BadPriority(s.priority).to_string())
        })?;
        // The journal keeps the resolved priority: re-queued in the order it runs in.
        let id = guard(&self.journal)
            .accept_as(&spec, priority.into(), &s.request, request_id.as_deref())
            .map_err(|e| ServiceError::Internal(format!("cannot record the job: {e}")))?;
        match self
            .pipeline
            .submit_job_with(s.circuit, &s.request, JobOptions { priority })
        {
            Ok(handle) => {
                {
                    let mut live = guard(&self.live);
                    live.by_pipeline.insert(handle.id, id);
                    live.handles.insert(id, handle);
                }
                self.metrics.accepted(&spec);
                Ok(Accepted {
                    id,
                    job_id: request_id.unwrap_or_else(|| journal::generated_request_id(id)),
                    existing: false,
                    queue_position: self.queue_position(id),
                })
            }
            Err(e) => {
                // Never acknowledged: the row goes (its id is not reused).
                if let Err(f) = guard(&self.journal).forget(id) {
                    tracing::error!(job = id, "{f}");
                }
                Err(refused(e))
            }
        }
    }

    /// Live jobs that run before journal job `id`.
    fn queue_position(&self, id: u64) -> u32 {
        let Some(pipeline_id) = guard(&self.live).handles.get(&id).map(|h| h.id) else {
            return 0;
        };
        self.pipeline
            .jobs_ahead(pipeline_id)
            .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// The journal id of the job `job_id` names: a request id, or a bare number for
    /// `job-<number>`.
    pub fn resolve(&self, job_id: &str) -> Result<u64, ServiceError> {
        let journal = guard(&self.journal);
        let found = match journal.find(job_id).map_err(internal)? {
            Some(id) => Some(id),
            None => match job_id.parse::<u64>() {
                Ok(n) => journal
                    .find(&journal::generated_request_id(n))
                    .map_err(internal)?,
                Err(_) => None,
            },
        };
        found.ok_or_else(|| {
            ServiceError::NotFound(format!(
                "unknown job `{job_id}`: never accepted here, or its result expired"
            ))
        })
    }

    /// The job's end if it has ended (then marked fetched), `None` while it runs.
    ///
    /// A job the pipeline still holds has not ended for its waiters: `collect` journals an
    /// outcome before it lets go of the handle, and wakes the waiters after. So a live job
    /// costs no journal read (every batch of outcomes wakes every waiter); the row, proofs
    /// included, is read once the job has left `live`.
    pub fn ended(&self, id: u64) -> Result<Option<Ended>, ServiceError> {
        if guard(&self.live).handles.contains_key(&id) {
            return Ok(None);
        }
        let row = guard(&self.journal).get(id).map_err(internal)?;
        let Some(row) = row else {
            return Err(ServiceError::NotFound(format!(
                "unknown job {id}: never accepted here, or its result expired"
            )));
        };
        if row.state == JobState::Accepted {
            return Ok(None);
        }
        if let Err(e) = guard(&self.journal).mark_fetched(id) {
            tracing::warn!(job = id, "{e}");
        }
        Ok(Some(Ended { row }))
    }

    /// A receiver that changes whenever outcomes were journaled, and when the service closes.
    pub fn watch_ended(&self) -> watch::Receiver<u64> {
        self.ended.subscribe()
    }

    /// The service no longer answers waiters (stopping, drain over).
    pub fn is_closing(&self) -> bool {
        // Relaxed: a plain flag; the watch channel orders the rest.
        self.closing.load(Ordering::Relaxed)
    }

    /// Cancels a live job; returns whether any partition of it had started.
    pub fn cancel(&self, id: u64) -> Result<bool, ServiceError> {
        let Some(pipeline_id) = guard(&self.live).handles.get(&id).map(|h| h.id) else {
            let state = guard(&self.journal).get(id).map_err(internal)?;
            return Err(match state {
                None => ServiceError::NotFound(format!(
                    "unknown job {id}: never accepted here, or its result expired"
                )),
                Some(row) => ServiceError::FailedPrecondition(format!(
                    "job `{}` has already ended ({})",
                    row.request_id,
                    row.state.as_str()
                )),
            });
        };
        // Held across the cancel: `collect` journals the outcome only after the row is
        // `cancelled`, and `finish` leaves a row that is no longer accepted alone.
        let mut journal = guard(&self.journal);
        let answer = match self.pipeline.cancel(pipeline_id) {
            Ok(c) => {
                if let Err(e) = journal.cancel(id) {
                    tracing::error!(job = id, "cannot journal the cancel: {e}");
                }
                Ok(c.was_running)
            }
            // Its outcome is on its way to `collect`.
            Err(PipelineError::UnknownJob(_)) => Err(ServiceError::FailedPrecondition(format!(
                "job {id} has already ended"
            ))),
            Err(e) => Err(ServiceError::Internal(format!("job {id}: {e}"))),
        };
        drop(journal);
        self.collect();
        answer
    }

    /// Submits every accepted, unfinished job of the journal again (at start).
    pub fn requeue(&self) -> Result<usize, ServiceError> {
        let ids = guard(&self.journal).unfinished().map_err(internal)?;
        let n = ids.len();
        for id in ids {
            // One request in memory at a time.
            let row = match guard(&self.journal).get(id) {
                Ok(Some(row)) => row,
                Ok(None) => continue,
                Err(e) => {
                    tracing::error!(job = id, "cannot re-queue: {e}");
                    guard(&self.journal)
                        .finish(id, Err(&format!("cannot re-queue after a restart: {e}")))
                        .map_err(internal)?;
                    continue;
                }
            };
            let handle = row
                .circuit
                .parse::<AnyCircuit>()
                .map_err(|e| format!("bad circuit `{}` in the journal: {e}", row.circuit))
                .and_then(|c| {
                    // Rows written before priorities were on cuzk's scale are brought onto it.
                    let priority = row.priority.clamp(0, 4) as i32;
                    self.pipeline
                        .submit_job_with(c, &row.request, JobOptions { priority })
                        .map_err(|e| e.to_string())
                });
            match handle {
                Ok(h) => {
                    let mut live = guard(&self.live);
                    live.by_pipeline.insert(h.id, row.id);
                    live.handles.insert(row.id, h);
                }
                Err(e) => {
                    tracing::warn!(job = row.id, "cannot re-queue: {e}");
                    guard(&self.journal)
                        .finish(
                            row.id,
                            Err(&format!("cannot re-queue after a restart: {e}")),
                        )
                        .map_err(internal)?;
                }
            }
        }
        Ok(n)
    }

    /// Journals every outcome that arrived, then wakes the waiters.
    pub fn collect(&self) {
        let mut ended = Vec::new();
        {
            let live = guard(&self.live);
            for (&id, h) in &live.handles {
                // Err: the pipeline stopped; the job stays accepted, for the next start.
                if let Ok(Some(o)) = h.wait_timeout(Duration::ZERO) {
                    ended.push((id, o));
                }
            }
        }
        if ended.is_empty() {
            return;
        }
        {
            let mut journal = guard(&self.journal);
            for (id, o) in &ended {
                let failure;
                let outcome = match &o.result {
                    Ok(proofs) => Ok(&proofs[..]),
                    Err(e) => {
                        failure = e.to_string();
                        Err(failure.as_str())
                    }
                };
                if let Err(e) = journal.finish_timed(*id, outcome, Some(&o.times)) {
                    // Left live: recorded at the next start, when it runs again.
                    tracing::error!(job = id, "cannot journal the outcome: {e}");
                }
                self.metrics.ended(o);
            }
        }
        let mut live = guard(&self.live);
        for (id, _) in ended {
            if let Some(h) = live.handles.remove(&id) {
                live.by_pipeline.remove(&h.id);
            }
        }
        drop(live);
        self.ended.send_modify(|n| *n += 1);
    }

    /// Removes expired results from the journal.
    pub fn expire(&self) {
        let l = &self.limits;
        match guard(&self.journal).expire(
            journal::now_ms(),
            l.fetched_retention,
            l.result_retention,
        ) {
            Ok(0) => {}
            Ok(n) => tracing::info!(removed = n, "expired results removed from the journal"),
            Err(e) => tracing::warn!("{e}"),
        }
    }

    /// The pipeline's status, with its job ids replaced by the journal's.
    pub fn status(&self) -> PipelineStatus {
        let mut s = self.pipeline.status();
        let live = guard(&self.live);
        for j in &mut s.jobs {
            if let Some(&id) = live.by_pipeline.get(&j.job_id) {
                j.job_id = id;
            }
        }
        for g in &mut s.gpus {
            g.current_job = g
                .current_job
                .and_then(|j| live.by_pipeline.get(&j).copied());
        }
        s
    }

    /// The request id of a live job (status shows them), by journal id.
    pub fn request_id(&self, id: u64) -> String {
        guard(&self.journal)
            .get_request_id(id)
            .ok()
            .flatten()
            .unwrap_or_else(|| journal::generated_request_id(id))
    }

    /// Stop accepting requests.
    pub fn stop_accepting(&self) {
        // Relaxed: a plain flag.
        self.stopping.store(true, Ordering::Relaxed);
    }

    /// Let every waiter go (after the drain).
    pub fn close(&self) {
        // Relaxed: a plain flag; the watch channel wakes the waiters.
        self.closing.store(true, Ordering::Relaxed);
        self.ended.send_modify(|n| *n += 1);
    }

    /// Accepted, unfinished jobs in the journal.
    pub fn unfinished(&self) -> u64 {
        guard(&self.journal).count_unfinished().unwrap_or(0)
    }

    /// The largest job id ever given.
    pub fn last_id(&self) -> Result<u64, ServiceError> {
        guard(&self.journal).last_id().map_err(internal)
    }

    /// Drops the pipeline's handles, then shuts the pipeline down (children stopped, cgroups
    /// removed). Outcomes of the shutdown (jobs cut short) never reach the journal: the jobs
    /// stay accepted for the next start.
    pub fn shutdown(self) {
        let Service { pipeline, live, .. } = self;
        drop(live);
        pipeline.shutdown();
    }
}

/// The service error of a submission the pipeline refused.
fn refused(e: PipelineError) -> ServiceError {
    match e {
        PipelineError::Stopped => ServiceError::ShuttingDown,
        e @ (PipelineError::BadSpec { .. }
        | PipelineError::NotSeeded(_)
        | PipelineError::Request(_)
        | PipelineError::BadPriority(_)
        | PipelineError::TooManyPartitions(_)
        | PipelineError::PartitionLimit { .. }
        | PipelineError::RequestTooLarge { .. }
        | PipelineError::RequestFileRefused(_)
        | PipelineError::RequestFile { .. }) => ServiceError::InvalidArgument(e.to_string()),
        e @ PipelineError::Unserved(_) => ServiceError::FailedPrecondition(e.to_string()),
        e => ServiceError::Internal(e.to_string()),
    }
}

fn internal(e: impl std::fmt::Display) -> ServiceError {
    ServiceError::Internal(e.to_string())
}

impl Service {
    /// Loads a configured circuit's SRS (its spec or cuzk name: `porep-32g`) so the next proof
    /// does not wait for it.
    pub fn preload_srs(&self, circuit_id: &str) -> Result<SrsLoaded, ServiceError> {
        self.pipeline.preload_srs(circuit_id).map_err(srs_error)
    }

    /// Unloads a configured circuit's SRS; refused while jobs of it are live.
    pub fn evict_srs(&self, circuit_id: &str) -> Result<SrsEvicted, ServiceError> {
        self.pipeline.evict_srs(circuit_id).map_err(srs_error)
    }
}

fn srs_error(e: PipelineError) -> ServiceError {
    match e {
        e @ PipelineError::UnknownSrs { .. } => ServiceError::NotFound(e.to_string()),
        e @ PipelineError::SrsInUse { .. } => ServiceError::FailedPrecondition(e.to_string()),
        PipelineError::Stopped => ServiceError::ShuttingDown,
        e => ServiceError::Internal(e.to_string()),
    }
}
