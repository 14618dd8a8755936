//! The long-lived service's job core, below any transport: accepted jobs in the journal, the
//! pipeline's handles, idempotent submission, waiting with a timeout, cancellation, status.
//! `crate::api` puts the cuzk gRPC API on top of it; [`lifecycle`] (open, start, serve,
//! stop) runs both, and `splitprover run` calls it. (The lifecycle imports the API, which
//! imports this module: it is a child of this module that this module never imports.)
//!
//! # One job id
//! A job's id is its journal row's: the service journals a job first, then submits it to the
//! pipeline under that id ([`JobOptions::id`]), at acceptance and when it is re-queued after a
//! restart; the pipeline's status, the logs (`job = <id>`) and every lookup use it. The request
//! id (the client's idempotency key, or `job-<id>` when it sent none) is an alias that
//! [`Service::resolve`] turns into the id; it is what cuzk's API calls the job id.
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

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kernels::circuits::AnyCircuit;
use tokio::sync::watch;

use crate::journal::{self, JobState, Journal, JournalError, JournalJob};
use crate::metrics::Metrics;
use crate::pipeline::{
    JobHandle, JobOptions, JobTimes, Pipeline, PipelineError, PipelineStatus, SrsEvicted, SrsLoaded,
};

pub mod lifecycle;

/// Why the service refused or could not answer: the pipeline's error, the journal's, or a
/// reason of the service's own. `crate::api::server::code` maps each to one gRPC status code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// A reason of the service's own.
    #[error(transparent)]
    Service(#[from] Reason),
    /// The pipeline refused the job or the operation (a bad request, a circuit it does not
    /// serve, a busy SRS, ...), or stopped.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// The journal failed.
    #[error(transparent)]
    Journal(#[from] JournalError),
}

/// The service's own reasons to refuse or fail a call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Reason {
    /// The service is stopping: a new request is refused.
    #[error(
        "the service is shutting down: request refused\nhint: send it again once the service is back"
    )]
    ShuttingDown,
    /// The service stopped while a client waited for a job, which stays accepted.
    #[error(
        "the service is shutting down: job `{0}` stays queued and runs after the next start\n\
         hint: ask for it again then (AwaitProof `{0}`)"
    )]
    Closing(String),
    /// The limit of accepted, unfinished jobs was reached.
    #[error("busy: {queued} jobs queued (at most {max}); try again later")]
    Busy {
        /// Jobs queued now.
        queued: u64,
        /// `[service] max_queued_jobs`.
        max: u64,
    },
    /// A job name (request id, `job-N`, `N`) that names no job.
    #[error("unknown job `{0}`: never accepted here, or its result expired")]
    UnknownJob(String),
    /// A cancel of a job that has ended (its state, when the journal has it yet).
    #[error("job `{job}` has already ended{}", .state.map(|s| format!(" ({})", s.as_str())).unwrap_or_default())]
    Ended {
        /// The job, by its request id.
        job: String,
        /// How it ended.
        state: Option<JobState>,
    },
    /// A client's request id of the service's own form.
    #[error(
        "request_id `{0}`: ids of the form `job-N` are the service's own (given to jobs \
         submitted without one); choose another"
    )]
    ReservedRequestId(String),
    /// A submission that names neither a proof kind nor a circuit.
    #[error(
        "proof_kind is UNSPECIFIED and no circuit is named\nhint: set proof_kind \
         (POREP_SEAL_COMMIT, SNAP_DEALS_UPDATE, WINDOW_POST_PARTITION, WINNING_POST)"
    )]
    NoProofKind,
    /// A `Prove` without its submission.
    #[error("ProveRequest without `submit`")]
    NoSubmit,
    /// The worker thread that ran the call failed (panicked).
    #[error("worker failed: {0}")]
    Worker(tokio::task::JoinError),
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
    /// The job's id (the journal's, the pipeline's).
    pub id: u64,
    /// Its alias, what cuzk's API calls the job id: the client's request id, or `job-<id>`.
    pub request_id: String,
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

/// The service's limits and timings, from `[service]` (`crate::settings::limits`; the request's
/// size and partition count are the pipeline's: [`Pipeline::admit`]).
#[derive(Clone, Debug)]
pub struct Limits {
    /// Accepted, unfinished jobs at most.
    pub max_queued_jobs: u64,
    /// A fetched result is kept this long.
    pub fetched_retention: Duration,
    /// An unfetched result is kept this long.
    pub result_retention: Duration,
}

/// The running service.
pub struct Service {
    pipeline: Pipeline,
    journal: Mutex<Journal>,
    /// The pipeline's handles of the jobs it holds, by id.
    live: Mutex<BTreeMap<u64, JobHandle>>,
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
            live: Mutex::new(BTreeMap::new()),
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
        if self.stopping.load(Ordering::Acquire) {
            // Acquire: pairs with the Release store in `shutdown` (the flag convention).
            return Err(Reason::ShuttingDown.into());
        }
        let _one = guard(&self.submitting);
        let request_id = s.request_id.filter(|r| !r.is_empty());
        if let Some(rid) = &request_id {
            let mut journal = guard(&self.journal);
            if let Some(id) = journal.find(rid)? {
                match journal.state_of(id)? {
                    // No proof came of it: Curio retries a failed proof with the same request
                    // id, and must get a new attempt, not the old failure.
                    Some(JobState::Failed | JobState::Cancelled) => {
                        journal.release_request_id(id)?;
                        tracing::info!(job = id, request_id = %rid, "request id retried after its job ended without a proof");
                    }
                    _ => {
                        drop(journal);
                        return Ok(Accepted {
                            id,
                            request_id: rid.clone(),
                            existing: true,
                            queue_position: self.queue_position(id),
                        });
                    }
                }
            }
            if rid.starts_with("job-") {
                return Err(Reason::ReservedRequestId(rid.clone()).into());
            }
        }
        // The request's size and partition count, before the queue cap and the journal (the
        // pipeline's submit checks them again).
        self.pipeline
            .admit(&s.circuit, &s.request)
            .map_err(refused)?;
        let queued = guard(&self.live).len() as u64;
        let max = self.limits.max_queued_jobs;
        if queued >= max {
            return Err(Reason::Busy { queued, max }.into());
        }
        let spec = s.circuit.to_string();
        let priority = crate::jobs::effective_priority(&spec, s.priority)
            .ok_or(PipelineError::BadPriority(s.priority))?;
        // The journal keeps the resolved priority: re-queued in the order it runs in.
        let id = guard(&self.journal).accept_as(
            &spec,
            priority.into(),
            &s.request,
            request_id.as_deref(),
        )?;
        // The journal's id is the job's id in the pipeline.
        let options = JobOptions {
            priority,
            id: Some(id),
        };
        match self
            .pipeline
            .submit_job_with(s.circuit, &s.request, options)
        {
            Ok(handle) => {
                guard(&self.live).insert(id, handle);
                self.metrics.accepted(&spec);
                Ok(Accepted {
                    id,
                    request_id: request_id.unwrap_or_else(|| journal::generated_request_id(id)),
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

    /// Live jobs that run before job `id` (0 when it is not live).
    fn queue_position(&self, id: u64) -> u32 {
        self.pipeline
            .jobs_ahead(id)
            .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// The id of the job `name` names: its request id (the client's, or `job-<id>`), or the id
    /// itself (`17`; `job-17` names job 17 whatever its request id).
    pub fn resolve(&self, name: &str) -> Result<u64, ServiceError> {
        let journal = guard(&self.journal);
        if let Some(id) = journal.find(name)? {
            return Ok(id);
        }
        // `job-N` is never a client's request id (refused at submit), so it is the id too.
        let number = name.strip_prefix("job-").unwrap_or(name).parse::<u64>();
        if let Ok(id) = number {
            if journal.state_of(id)?.is_some() {
                return Ok(id);
            }
        }
        Err(Reason::UnknownJob(name.to_owned()).into())
    }

    /// The job's end if it has ended (then marked fetched), `None` while it runs.
    ///
    /// A job the pipeline still holds has not ended for its waiters: `collect` journals an
    /// outcome before it lets go of the handle, and wakes the waiters after. So a live job
    /// costs no journal read (every batch of outcomes wakes every waiter); the row, proofs
    /// included, is read once the job has left `live`.
    pub fn ended(&self, id: u64) -> Result<Option<Ended>, ServiceError> {
        if guard(&self.live).contains_key(&id) {
            return Ok(None);
        }
        let row = guard(&self.journal).get(id)?;
        let Some(row) = row else {
            return Err(Reason::UnknownJob(id.to_string()).into());
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
        // Acquire: pairs with the Release store in `close` (the flag convention).
        self.closing.load(Ordering::Acquire)
    }

    /// Cancels a live job; returns whether any partition of it had started.
    pub fn cancel(&self, id: u64) -> Result<bool, ServiceError> {
        if !guard(&self.live).contains_key(&id) {
            let row = guard(&self.journal).get(id)?;
            return Err(match row {
                None => Reason::UnknownJob(id.to_string()),
                Some(row) => Reason::Ended {
                    job: row.request_id,
                    state: Some(row.state),
                },
            }
            .into());
        }
        // Held across the cancel: `collect` journals the outcome only after the row is
        // `cancelled`, and `finish` leaves a row that is no longer accepted alone.
        let mut journal = guard(&self.journal);
        let answer = match self.pipeline.cancel(id) {
            Ok(c) => {
                if let Err(e) = journal.cancel(id) {
                    tracing::error!(job = id, "cannot journal the cancel: {e}");
                }
                Ok(c.was_running)
            }
            // Its outcome is on its way to `collect`.
            Err(PipelineError::UnknownJob(_)) => Err(Reason::Ended {
                job: journal
                    .get_request_id(id)
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| journal::generated_request_id(id)),
                state: None,
            }
            .into()),
            Err(e) => Err(e.into()),
        };
        drop(journal);
        self.collect();
        answer
    }

    /// Submits every accepted, unfinished job of the journal again (at start).
    pub fn requeue(&self) -> Result<usize, ServiceError> {
        let ids = guard(&self.journal).unfinished()?;
        let n = ids.len();
        for id in ids {
            // One request in memory at a time.
            let row = match guard(&self.journal).get(id) {
                Ok(Some(row)) => row,
                Ok(None) => continue,
                Err(e) => {
                    tracing::error!(job = id, "cannot re-queue: {e}");
                    guard(&self.journal)
                        .finish(id, Err(&format!("cannot re-queue after a restart: {e}")))?;
                    continue;
                }
            };
            let handle = row
                .circuit
                .parse::<AnyCircuit>()
                .map_err(|e| format!("bad circuit `{}` in the journal: {e}", row.circuit))
                .and_then(|c| {
                    // Rows written before priorities were on cuzk's scale are brought onto it.
                    let options = JobOptions {
                        priority: row.priority.clamp(0, 4) as i32,
                        // Under its own id again.
                        id: Some(row.id),
                    };
                    self.pipeline
                        .submit_job_with(c, &row.request, options)
                        .map_err(|e| e.to_string())
                });
            match handle {
                Ok(h) => {
                    guard(&self.live).insert(row.id, h);
                }
                Err(e) => {
                    tracing::warn!(job = row.id, "cannot re-queue: {e}");
                    guard(&self.journal).finish(
                        row.id,
                        Err(&format!("cannot re-queue after a restart: {e}")),
                    )?;
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
            for (&id, h) in live.iter() {
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
            live.remove(&id);
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

    /// The pipeline's status (its job ids are the journal's).
    pub fn status(&self) -> PipelineStatus {
        self.pipeline.status()
    }

    /// The request id of job `id` (cuzk's status shows them).
    pub fn request_id(&self, id: u64) -> String {
        guard(&self.journal)
            .get_request_id(id)
            .ok()
            .flatten()
            .unwrap_or_else(|| journal::generated_request_id(id))
    }

    /// Stop accepting requests.
    pub fn stop_accepting(&self) {
        // The flag convention: stored Release, loaded Acquire.
        self.stopping.store(true, Ordering::Release); // flags: stored Release, loaded Acquire
    }

    /// Let every waiter go (after the drain).
    pub fn close(&self) {
        // The watch channel wakes the waiters.
        self.closing.store(true, Ordering::Release); // flags: stored Release, loaded Acquire
        self.ended.send_modify(|n| *n += 1);
    }

    /// Accepted, unfinished jobs in the journal.
    pub fn unfinished(&self) -> u64 {
        guard(&self.journal).count_unfinished().unwrap_or(0)
    }

    /// The largest job id ever given.
    pub fn last_id(&self) -> Result<u64, ServiceError> {
        Ok(guard(&self.journal).last_id()?)
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

impl Service {
    /// Loads a configured circuit's SRS (its spec or cuzk name: `porep-32g`) so the next proof
    /// does not wait for it.
    pub fn preload_srs(&self, circuit_id: &str) -> Result<SrsLoaded, ServiceError> {
        self.pipeline.preload_srs(circuit_id).map_err(refused)
    }

    /// Unloads a configured circuit's SRS; refused while jobs of it are live.
    pub fn evict_srs(&self, circuit_id: &str) -> Result<SrsEvicted, ServiceError> {
        self.pipeline.evict_srs(circuit_id).map_err(refused)
    }
}

/// The service error of a call the pipeline refused: a pipeline that stopped is the service
/// shutting down.
fn refused(e: PipelineError) -> ServiceError {
    match e {
        PipelineError::Stopped => Reason::ShuttingDown.into(),
        e => e.into(),
    }
}
