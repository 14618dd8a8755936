//! `splitprover run`, `submit`, `fetch` and `status`: the long-lived service and its local
//! clients.
//!
//! The transport is a Unix stream socket with one JSON object per line (`crate::protocol`:
//! [`Request`] in, [`Response`] out); the job core ([`Pipeline`]) knows nothing about it, so
//! another transport (gRPC) can sit beside it.
//!
//! The service keeps every accepted job in its journal (`crate::journal`) before it answers
//! `Accepted`, and maps the journal's ids (the ones clients see) to the pipeline's handles. A
//! collector thread records each outcome in the journal, then wakes the clients waiting for it.
//! At start, every accepted, unfinished job of the journal is submitted again.
//!
//! Stopping (SIGTERM, SIGINT): the socket goes away at once, requests on open connections are
//! refused, the pipeline drains for `stop_grace_s` (in-flight partitions are proved), outcomes
//! are journaled, clients still waiting are told that their job stays queued for the next
//! start, then the pipeline shuts down (children stopped, cgroups removed) and `run` returns 0.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;
use kernels::circuits::AnyCircuit;

use crate::cli::{CancelArgs, FetchArgs, RunArgs, StatusArgs, SubmitArgs};
use crate::config::{Config, FaultsConfig, ServiceConfig};
use crate::journal::{self, JobState, Journal, JournalJob};
use crate::notify::Notifier;
use crate::pipeline::{JobHandle, JobOptions, Pipeline, PipelineError, PipelineStatus};
use crate::protocol::{hex, unhex, write_line, Client, Request, Response};
use crate::request_file;

/// The service's limits and timings, from `[service]`.
#[derive(Clone, Debug)]
struct Limits {
    max_connections: usize,
    max_queued_jobs: u64,
    max_line_bytes: usize,
    idle_timeout: Duration,
    max_request_bytes: u64,
    max_partitions: u32,
    stop_grace: Duration,
    fetched_retention: Duration,
    result_retention: Duration,
}

impl Limits {
    /// From `[service]`, and the request limits from `[faults]` (the pipeline's, applied here
    /// before anything is journaled).
    fn new(c: &ServiceConfig, faults: &FaultsConfig) -> Self {
        Limits {
            max_connections: c.max_connections,
            max_queued_jobs: c.max_queued_jobs,
            max_line_bytes: c.max_line_bytes,
            idle_timeout: Duration::from_secs(c.idle_timeout_s.max(1)),
            max_request_bytes: faults.max_request_bytes.0,
            max_partitions: faults.max_partitions.max(1),
            stop_grace: Duration::from_secs(c.stop_grace_s),
            fetched_retention: Duration::from_secs(c.fetched_retention_s),
            result_retention: Duration::from_secs(c.result_retention_s),
        }
    }
}

/// A write to a client that does not read gives up after this long.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Jobs the pipeline holds, by journal id.
#[derive(Default)]
struct Live {
    handles: BTreeMap<u64, JobHandle>,
    /// Pipeline id → journal id (status shows journal ids).
    by_pipeline: HashMap<u64, u64>,
    /// Submissions between the queue check and the pipeline's answer.
    reserved: u64,
}

/// The running service, shared by the connection threads and the collector.
struct Service {
    pipeline: Pipeline,
    journal: Mutex<Journal>,
    live: Mutex<Live>,
    /// Signalled when a job's outcome is journaled and when the service closes.
    changed: Condvar,
    limits: Limits,
    /// New requests are refused (set on SIGTERM).
    stopping: AtomicBool,
    /// Clients still waiting are answered and let go (set once the drain is over).
    closing: AtomicBool,
    connections: AtomicUsize,
    next_conn: AtomicU64,
    /// Open connections, to end their reads when the service stops.
    conns: Mutex<HashMap<u64, UnixStream>>,
}

fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Who is on the other end of a connection (`SO_PEERCRED`).
#[derive(Clone, Copy, Debug)]
struct Peer {
    pid: i32,
    uid: u32,
    gid: u32,
}

impl Peer {
    fn of(conn: &UnixStream) -> Option<Peer> {
        let c = rustix::net::sockopt::get_socket_peercred(conn).ok()?;
        Some(Peer {
            pid: rustix::process::Pid::as_raw(Some(c.pid)),
            uid: c.uid.as_raw(),
            gid: c.gid.as_raw(),
        })
    }
}

/// A refusal sent to the client as [`Response::Error`].
type Refusal = String;

impl Service {
    /// Records an accepted job, then hands it to the pipeline; the answer is its journal id.
    fn submit(&self, circuit: AnyCircuit, request: &[u8], priority: i64) -> Result<u64, Refusal> {
        if self.stopping.load(Ordering::Relaxed) {
            // Relaxed: a plain flag, nothing is published through it.
            return Err(shutting_down());
        }
        {
            let mut live = guard(&self.live);
            let queued = live.handles.len() as u64 + live.reserved;
            if queued >= self.limits.max_queued_jobs {
                return Err(format!(
                    "busy: {queued} jobs queued (at most {}); try again later",
                    self.limits.max_queued_jobs
                ));
            }
            live.reserved += 1;
        }
        let result = self.submit_reserved(circuit, request, priority);
        guard(&self.live).reserved -= 1;
        result
    }

    fn submit_reserved(
        &self,
        circuit: AnyCircuit,
        request: &[u8],
        priority: i64,
    ) -> Result<u64, Refusal> {
        let priority = crate::jobs::effective_priority(&circuit.to_string(), priority)
            .ok_or_else(|| PipelineError::BadPriority(priority).to_string())?;
        // The journal keeps the resolved priority: re-queued in the order it runs in.
        let id = guard(&self.journal)
            .accept(&circuit.to_string(), priority.into(), request)
            .map_err(|e| format!("cannot record the job: {e}"))?;
        match self
            .pipeline
            .submit_job_with(circuit, request, JobOptions { priority })
        {
            Ok(handle) => {
                let mut live = guard(&self.live);
                live.by_pipeline.insert(handle.id, id);
                live.handles.insert(id, handle);
                Ok(id)
            }
            Err(e) => {
                // Never acknowledged: the row goes (its id is not reused).
                if let Err(f) = guard(&self.journal).forget(id) {
                    tracing::error!(job = id, "{f}");
                }
                Err(format!("{:#}", anyhow::Error::from(e)))
            }
        }
    }

    /// Submits every accepted, unfinished job of the journal again (at start).
    fn requeue(&self) -> anyhow::Result<usize> {
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
                    let priority = row.priority.clamp(0, 4) as i32;
                    self.pipeline
                        .submit_job_with(c, &row.request, JobOptions { priority })
                        .map_err(|e| format!("{:#}", anyhow::Error::from(e)))
                });
            match handle {
                Ok(h) => {
                    let mut live = guard(&self.live);
                    live.by_pipeline.insert(h.id, row.id);
                    live.handles.insert(row.id, h);
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

    /// Cancels a live job (see [`Request::Cancel`]).
    fn cancel(&self, id: u64) -> Response {
        let Some(pipeline_id) = guard(&self.live).handles.get(&id).map(|h| h.id) else {
            return Response::Error {
                message: format!(
                    "job {id} is not queued or running (unknown, already ended, or cancelled)"
                ),
            };
        };
        // Held across the cancel: `collect` journals the outcome only after the row is
        // `cancelled`, and `finish` leaves a row that is no longer accepted alone.
        let mut journal = guard(&self.journal);
        let answer = match self.pipeline.cancel(pipeline_id) {
            Ok(c) => {
                if let Err(e) = journal.cancel(id) {
                    tracing::error!(job = id, "cannot journal the cancel: {e}");
                }
                Response::Cancelled {
                    job_id: id,
                    was_running: c.was_running,
                }
            }
            // Its outcome is on its way to `collect`.
            Err(PipelineError::UnknownJob(_)) => Response::Error {
                message: format!("job {id} has already ended"),
            },
            Err(e) => Response::Error {
                message: format!("job {id}: {e}"),
            },
        };
        drop(journal);
        self.collect();
        answer
    }

    /// Journals every outcome that arrived, then wakes the waiting clients.
    fn collect(&self) {
        let mut ended = Vec::new();
        {
            let live = guard(&self.live);
            for (&id, h) in &live.handles {
                match h.wait_timeout(Duration::ZERO) {
                    Ok(Some(o)) => ended.push((id, o.result)),
                    Ok(None) => {}
                    // The pipeline stopped: the job stays accepted, for the next start.
                    Err(_) => {}
                }
            }
        }
        if ended.is_empty() {
            return;
        }
        {
            let mut journal = guard(&self.journal);
            for (id, result) in &ended {
                let outcome = match result {
                    Ok(proofs) => Ok(&proofs[..]),
                    Err(e) => Err(e.as_str()),
                };
                if let Err(e) = journal.finish(*id, outcome) {
                    // Left live: recorded at the next start, when it runs again.
                    tracing::error!(job = id, "cannot journal the outcome: {e}");
                }
            }
        }
        let mut live = guard(&self.live);
        for (id, _) in ended {
            if let Some(h) = live.handles.remove(&id) {
                live.by_pipeline.remove(&h.id);
            }
        }
        self.changed.notify_all();
    }

    /// Waits until job `id` is no longer live; `None` when the service closes first.
    fn wait_ended(&self, id: u64) -> Option<()> {
        let mut live = guard(&self.live);
        while live.handles.contains_key(&id) {
            if self.closing.load(Ordering::Relaxed) {
                // Relaxed: a plain flag; the condvar's mutex orders the rest.
                return None;
            }
            live = self
                .changed
                .wait_timeout(live, Duration::from_millis(500))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        Some(())
    }

    /// The answer for a journaled job: `Finished` (then marked fetched) or `Queued`.
    fn answer_for(&self, id: u64) -> Response {
        let row = match guard(&self.journal).get(id) {
            Ok(Some(r)) => r,
            Ok(None) => {
                return Response::Error {
                    message: format!(
                        "unknown job {id}: never accepted here, or its result expired"
                    ),
                }
            }
            Err(e) => {
                return Response::Error {
                    message: e.to_string(),
                }
            }
        };
        if row.state == JobState::Accepted {
            return Response::Queued { job_id: id };
        }
        if let Err(e) = guard(&self.journal).mark_fetched(id) {
            tracing::warn!(job = id, "{e}");
        }
        finished(&row)
    }

    /// Answers one submission: accepted (then, with `wait`, the outcome) or the refusal.
    fn answer_submit(
        &self,
        out: &mut UnixStream,
        submitted: Result<u64, Refusal>,
        wait: bool,
    ) -> anyhow::Result<()> {
        let id = match submitted {
            Ok(id) => id,
            Err(message) => return Ok(write_line(out, &Response::Error { message })?),
        };
        write_line(out, &Response::Accepted { job_id: id })?;
        if wait {
            self.answer_wait(out, id)?;
        }
        Ok(())
    }

    fn answer_wait(&self, out: &mut UnixStream, id: u64) -> anyhow::Result<()> {
        let answer = match self.wait_ended(id) {
            Some(()) => self.answer_for(id),
            None => Response::Error {
                message: format!(
                    "the service is shutting down: job {id} stays queued and runs after the \
                     next start\nhint: fetch it then with `splitprover fetch {id} --wait`"
                ),
            },
        };
        write_line(out, &answer)?;
        Ok(())
    }

    /// `status`, with the pipeline's job ids replaced by the journal's.
    fn status(&self) -> PipelineStatus {
        let mut s = self.pipeline.status();
        let live = guard(&self.live);
        for j in &mut s.jobs {
            if let Some(&id) = live.by_pipeline.get(&j.job_id) {
                j.job_id = id;
            }
        }
        s
    }

    /// Reads and answers one client's requests until it closes, stays silent too long, sends a
    /// line over the limit, or the service stops.
    fn serve(&self, conn: UnixStream, peer: Option<Peer>) -> anyhow::Result<()> {
        conn.set_nonblocking(false)?;
        conn.set_read_timeout(Some(self.limits.idle_timeout))?;
        conn.set_write_timeout(Some(WRITE_TIMEOUT))?;
        let mut out = conn.try_clone()?;
        let mut reader = BufReader::new(conn);
        let max = self.limits.max_line_bytes;
        loop {
            let mut line = Vec::new();
            match (&mut reader)
                .take(max as u64 + 1)
                .read_until(b'\n', &mut line)
            {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    let message = format!(
                        "idle for {} s: closing the connection",
                        self.limits.idle_timeout.as_secs()
                    );
                    let _ = write_line(&mut out, &Response::Error { message });
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            }
            // A complete line holds at most `max` bytes before its newline.
            if line.len() > max && line.last() != Some(&b'\n') {
                let message =
                    format!("request line longer than {max} bytes: closing the connection");
                let _ = write_line(&mut out, &Response::Error { message });
                return Ok(());
            }
            let text = String::from_utf8_lossy(&line);
            if text.trim().is_empty() {
                continue;
            }
            if self.stopping.load(Ordering::Relaxed) {
                // Relaxed: a plain flag.
                write_line(
                    &mut out,
                    &Response::Error {
                        message: shutting_down(),
                    },
                )?;
                return Ok(());
            }
            let request: Request = match serde_json::from_str(&text) {
                Ok(r) => r,
                Err(e) => {
                    write_line(
                        &mut out,
                        &Response::Error {
                            message: format!("bad request: {e}"),
                        },
                    )?;
                    continue;
                }
            };
            let (pid, uid, gid) = peer.map_or((-1, u32::MAX, u32::MAX), |p| (p.pid, p.uid, p.gid));
            tracing::info!(
                peer_pid = pid,
                peer_uid = uid,
                peer_gid = gid,
                request = request_name(&request),
                "client request"
            );
            match request {
                Request::Status => {
                    write_line(&mut out, &Response::Status(Box::new(self.status())))?
                }
                Request::Submit {
                    circuit,
                    seed,
                    partitions,
                    wait,
                    priority,
                } => {
                    let submitted = self
                        .builtin_request(&circuit, seed, partitions)
                        .and_then(|(c, bytes)| self.submit(c, &bytes, priority));
                    self.answer_submit(&mut out, submitted, wait)?
                }
                Request::SubmitRequest {
                    path,
                    kind,
                    family,
                    wait,
                    priority,
                } => {
                    let submitted = self
                        .file_request(&path, kind.as_deref(), family.as_deref(), peer)
                        .and_then(|(c, bytes)| self.submit(c, &bytes, priority));
                    self.answer_submit(&mut out, submitted, wait)?
                }
                Request::Cancel { job_id } => write_line(&mut out, &self.cancel(job_id))?,
                Request::Fetch { job_id, wait } => {
                    if wait {
                        self.answer_wait(&mut out, job_id)?
                    } else {
                        write_line(&mut out, &self.answer_for(job_id))?
                    }
                }
            }
        }
    }

    /// The request bytes of a built-in circuit's job, checked against the partition limit here
    /// too (the pipeline checks it again): an absurd count is refused before the queue cap and
    /// before anything is journaled.
    fn builtin_request(
        &self,
        circuit: &str,
        seed: u64,
        partitions: u32,
    ) -> Result<(AnyCircuit, Vec<u8>), Refusal> {
        let spec: AnyCircuit = circuit
            .parse()
            .map_err(|e| format!("bad circuit spec `{circuit}`: {e}"))?;
        if spec.builtin().is_none() {
            return Err(format!(
                "`{circuit}` needs a request file\nhint: send it with --porep-c1, --post or --snap"
            ));
        }
        if partitions > self.limits.max_partitions {
            return Err(format!(
                "too many partitions: {partitions} (at most {} per job, `max_partitions` in \
                 [faults])",
                self.limits.max_partitions
            ));
        }
        let request = kernels::job::BuiltinRequest { seed, partitions };
        Ok((spec, request.to_bytes()))
    }

    /// A Filecoin request file named by a client, read once (see [`request_file::read`]).
    fn file_request(
        &self,
        path: &Path,
        kind: Option<&str>,
        family: Option<&str>,
        peer: Option<Peer>,
    ) -> Result<(AnyCircuit, Vec<u8>), Refusal> {
        let (kind, family) = super::request_choice(kind, family).map_err(|e| format!("{e:#}"))?;
        let Some(peer) = peer else {
            return Err(format!(
                "proof request `{}`: cannot be checked: the client's credentials are unknown",
                path.display()
            ));
        };
        let reader = request_file::Reader::Client {
            uid: peer.uid,
            gid: peer.gid,
        };
        let bytes = request_file::read(path, self.limits.max_request_bytes, reader)
            .map_err(|e| format!("proof request `{}`: {e}", path.display()))?;
        let kind = kernels::job::filecoin_request_kind(&bytes, kind, family)
            .map_err(|e| format!("proof request `{}`: {e}", path.display()))?;
        Ok((AnyCircuit::Filecoin(kind), bytes))
    }
}

fn shutting_down() -> String {
    "the service is shutting down: request refused\nhint: send it again once the service is back"
        .into()
}

fn request_name(r: &Request) -> &'static str {
    match r {
        Request::Submit { .. } => "submit",
        Request::SubmitRequest { .. } => "submit-request",
        Request::Fetch { .. } => "fetch",
        Request::Status => "status",
        Request::Cancel { .. } => "cancel",
    }
}

/// `Finished` for a finished row.
fn finished(row: &JournalJob) -> Response {
    let elapsed_ms = row
        .finished_at
        .map_or(0, |f| f.saturating_sub(row.submitted_at).max(0) as u64);
    Response::Finished {
        job_id: row.id,
        proofs: row.proofs.iter().map(|p| hex(p)).collect(),
        error: match row.state {
            JobState::Failed | JobState::Cancelled => Some(row.error.clone().unwrap_or_default()),
            _ => None,
        },
        elapsed_ms,
    }
}

/// Counts a connection while its thread runs, and lets the service end its reads at stop.
struct ConnGuard {
    service: Arc<Service>,
    id: u64,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        guard(&self.service.conns).remove(&self.id);
        // Relaxed: a counter; nothing else is published through it.
        self.service.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `splitprover run`.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let limits = Limits::new(&config.service, &config.faults);
    // Socket settings are checked before minutes of SRS loading.
    let mode = config.service.socket_mode()?;
    let gid = config
        .service
        .socket_group
        .as_deref()
        .map(|g| group_id(g).map(|id| (g, id)))
        .transpose()?;
    let socket = config.socket.clone();
    let journal_path = config
        .service
        .journal
        .clone()
        .unwrap_or_else(|| crate::env::journal_path(&socket));
    // The journal first: a corrupt one stops the start before minutes of SRS loading.
    let journal = Journal::open(&journal_path)?;
    for old in journal::set_aside(&journal_path) {
        tracing::warn!(
            "a corrupt job journal was moved aside to `{}`: its jobs were not re-queued",
            old.display()
        );
    }
    let settings = super::settings::from_config(&config)?;
    let pipeline = Pipeline::start(settings)?;
    pipeline.wait_ready(Duration::from_secs(600))?;
    let service = Arc::new(Service {
        pipeline,
        journal: Mutex::new(journal),
        live: Mutex::new(Live::default()),
        changed: Condvar::new(),
        limits: limits.clone(),
        stopping: AtomicBool::new(false),
        closing: AtomicBool::new(false),
        connections: AtomicUsize::new(0),
        next_conn: AtomicU64::new(0),
        conns: Mutex::new(HashMap::new()),
    });
    let requeued = service.requeue()?;
    let last_id = guard(&service.journal).last_id()?;
    tracing::info!(journal = %journal_path.display(), requeued, last_id, "job journal open");
    let listener = bind(&socket, mode, gid)?;
    let notifier = Notifier::from_env().unwrap_or_else(|e| {
        tracing::warn!("systemd notify unavailable: {e}");
        Notifier::disabled()
    });
    let status = service.pipeline.status();
    let _ = notifier.ready();
    let _ = notifier.status(&format!(
        "serving on {}; pinning {}; ring {}; {requeued} jobs re-queued",
        socket.display(),
        status.pin_mode,
        status.ring_pages
    ));
    tracing::info!(socket = %socket.display(), "service ready");
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }
    // The watchdog holds the service weakly, so the pipeline can be shut down on stop.
    let watchdog = match crate::notify::watchdog_interval() {
        Ok(Some(interval)) => {
            let (weak, stop) = (Arc::downgrade(&service), stop.clone());
            let notifier = Notifier::from_env().unwrap_or_else(|_| Notifier::disabled());
            Some(thread::spawn(move || {
                watchdog_loop(weak, &stop, &notifier, interval)
            }))
        }
        _ => None,
    };
    let collector_stop = Arc::new(AtomicBool::new(false));
    let collector = {
        let (service, stop) = (service.clone(), collector_stop.clone());
        thread::Builder::new()
            .name("collector".into())
            .spawn(move || collector_loop(&service, &stop))
            .context("cannot start the collector thread")?
    };
    accept_loop(&service, &listener, &stop);

    // Graceful stop.
    let grace = limits.stop_grace;
    tracing::info!(
        grace_s = grace.as_secs(),
        "stopping: no new requests; in-flight partitions finish"
    );
    let _ = notifier.stopping();
    drop(listener);
    let _ = std::fs::remove_file(&socket);
    // Relaxed: plain flags (the condvar and mutexes order what follows).
    service.stopping.store(true, Ordering::Relaxed);
    for c in guard(&service.conns).values() {
        // Idle connections end their read at once; waiting ones are answered below.
        let _ = c.shutdown(std::net::Shutdown::Read);
    }
    let report = service.pipeline.drain(grace);
    // The last outcomes are journaled before the waiting clients are answered.
    collector_stop.store(true, Ordering::Relaxed);
    let _ = collector.join();
    service.closing.store(true, Ordering::Relaxed);
    service.changed.notify_all();
    let deadline = Instant::now() + Duration::from_secs(5);
    while service.connections.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    if let Some(w) = watchdog {
        let _ = w.join();
    }
    let queued = guard(&service.journal).count_unfinished().unwrap_or(0);
    match Arc::try_unwrap(service) {
        Ok(s) => {
            let Service { pipeline, live, .. } = s;
            // Outcomes of the shutdown (jobs cut short) must not reach the journal: drop the
            // handles first, the jobs stay accepted.
            drop(live);
            pipeline.shutdown();
            tracing::info!("pipeline shut down: children stopped, cgroups removed");
        }
        Err(service) => {
            // A client that does not read its answer holds a thread (for at most the write
            // timeout): stop the children without waiting for it.
            tracing::warn!("a client thread is still running; stopping the children anyway");
            service.pipeline.stop_children();
        }
    }
    tracing::info!(
        drained = report.quiet,
        queued,
        "stopped; accepted jobs not finished run after the next start"
    );
    Ok(ExitCode::SUCCESS)
}

fn watchdog_loop(
    service: Weak<Service>,
    stop: &AtomicBool,
    notifier: &Notifier,
    interval: Duration,
) {
    // Ping at half the interval while the pipeline can still prove.
    let step = Duration::from_millis(100);
    let mut last = None::<Instant>;
    // Acquire pairs with signal-hook's store of the flag (a plain flag).
    while !stop.load(Ordering::Acquire) {
        if last.is_none_or(|t| t.elapsed() >= interval / 2) {
            let Some(s) = service.upgrade() else { return };
            if s.pipeline.status().fatal.is_none() {
                let _ = notifier.watchdog();
            }
            last = Some(Instant::now());
        }
        thread::sleep(step);
    }
}

fn collector_loop(service: &Service, stop: &AtomicBool) {
    const TICK: Duration = Duration::from_millis(20);
    const EXPIRE_EVERY: Duration = Duration::from_secs(60);
    const TIMELINE_EVERY: Duration = Duration::from_secs(10);
    let (mut expired, mut trimmed) = (Instant::now() - EXPIRE_EVERY, Instant::now());
    loop {
        service.collect();
        // Relaxed: a plain flag.
        if stop.load(Ordering::Relaxed) {
            return;
        }
        if expired.elapsed() >= EXPIRE_EVERY {
            expired = Instant::now();
            let l = &service.limits;
            match guard(&service.journal).expire(
                journal::now_ms(),
                l.fetched_retention,
                l.result_retention,
            ) {
                Ok(0) => {}
                Ok(n) => tracing::info!(removed = n, "expired results removed from the journal"),
                Err(e) => tracing::warn!("{e}"),
            }
        }
        if trimmed.elapsed() >= TIMELINE_EVERY {
            // The service never reads the timeline: keep it from growing without bound.
            trimmed = Instant::now();
            drop(service.pipeline.take_timeline());
        }
        thread::sleep(TICK);
    }
}

fn accept_loop(service: &Arc<Service>, listener: &UnixListener, stop: &AtomicBool) {
    let mut last_warning = None::<Instant>;
    // Acquire pairs with signal-hook's store of the flag (a plain flag).
    while !stop.load(Ordering::Acquire) {
        let conn = match listener.accept() {
            Ok((conn, _)) => conn,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(10));
                continue;
            }
            Err(e) => {
                // EMFILE, ENFILE, ENOBUFS, ENOMEM or a connection aborted before it was taken:
                // never the end of the service.
                let resource = matches!(
                    e.raw_os_error(),
                    Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                );
                if last_warning.is_none_or(|t: Instant| t.elapsed() >= Duration::from_secs(10)) {
                    tracing::warn!("accepting a client: {e}; retrying");
                    last_warning = Some(Instant::now());
                }
                thread::sleep(if resource {
                    Duration::from_millis(200)
                } else {
                    Duration::from_millis(10)
                });
                continue;
            }
        };
        let peer = Peer::of(&conn);
        // Relaxed: a counter, only this thread increments it.
        if service.connections.load(Ordering::Relaxed) >= service.limits.max_connections {
            let mut conn = conn;
            let _ = conn.set_write_timeout(Some(Duration::from_millis(100)));
            let _ = write_line(
                &mut conn,
                &Response::Error {
                    message: format!(
                        "busy: {} connections open (at most {}); try again later",
                        service.limits.max_connections, service.limits.max_connections
                    ),
                },
            );
            continue;
        }
        let id = service.next_conn.fetch_add(1, Ordering::Relaxed); // Relaxed: a unique number
        if let Ok(c) = conn.try_clone() {
            guard(&service.conns).insert(id, c);
        }
        service.connections.fetch_add(1, Ordering::Relaxed); // Relaxed: a counter
        let conn_guard = ConnGuard {
            service: service.clone(),
            id,
        };
        let spawned = thread::Builder::new().name("client".into()).spawn(move || {
            let g = conn_guard;
            if let Err(e) = g.service.serve(conn, peer) {
                tracing::debug!("client: {e:#}");
            }
        });
        if let Err(e) = spawned {
            // The guard went with the closure and was dropped: the count is right.
            tracing::warn!("cannot start a client thread: {e}");
            thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Listens on `socket` with the configured mode and group. The socket is bound under a
/// temporary name, given its permissions, then renamed into place, so no client ever sees it
/// with the umask's permissions.
fn bind(socket: &Path, mode: u32, group: Option<(&str, u32)>) -> anyhow::Result<UnixListener> {
    if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create `{}`", dir.display()))?;
    }
    if socket.exists() {
        if UnixStream::connect(socket).is_ok() {
            anyhow::bail!("another service is listening on `{}`", socket.display());
        }
        std::fs::remove_file(socket)
            .with_context(|| format!("cannot remove stale socket `{}`", socket.display()))?;
    }
    let mut tmp = socket.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp)
        .with_context(|| format!("cannot listen on `{}`", socket.display()))?;
    let placed = (|| -> anyhow::Result<()> {
        if let Some((name, gid)) = group {
            std::os::unix::fs::chown(&tmp, None, Some(gid))
                .with_context(|| format!("cannot give `{}` to group `{name}`", socket.display()))?;
        }
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("cannot set the mode of `{}`", socket.display()))?;
        std::fs::rename(&tmp, socket)
            .with_context(|| format!("cannot move the socket to `{}`", socket.display()))?;
        Ok(())
    })();
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// The id of group `name`.
fn group_id(name: &str) -> anyhow::Result<u32> {
    let cname = std::ffi::CString::new(name)
        .with_context(|| format!("bad group name `{name}` for `socket_group`"))?;
    let mut buf = vec![0u8; 16 << 10];
    // SAFETY: `group` is plain data that getgrnam_r fills; all-zero is a valid value of it.
    let mut group: libc::group = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call: `cname` is NUL-terminated, `buf` is writable
    // for `buf.len()` bytes and outlives the call, `group` and `found` are live locals.
    let rc = unsafe {
        libc::getgrnam_r(
            cname.as_ptr(),
            &mut group,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 {
        anyhow::bail!(
            "cannot look up group `{name}` for `socket_group`: {}",
            std::io::Error::from_raw_os_error(rc)
        );
    }
    if found.is_null() {
        anyhow::bail!("unknown group `{name}` (`socket_group` in [service])\nhint: create it with `groupadd {name}` or name another");
    }
    Ok(group.gr_gid)
}

fn socket_of(explicit: Option<PathBuf>) -> PathBuf {
    explicit.unwrap_or_else(crate::env::socket_path)
}

/// `splitprover submit`.
pub fn submit(args: SubmitArgs) -> anyhow::Result<ExitCode> {
    let socket = socket_of(args.socket.clone());
    let wait = args.wait || args.out_dir.is_some() || args.out.is_some();
    if let Some(d) = &args.out_dir {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create `{}`", d.display()))?;
    }
    let request_file = args.request.request_file();
    // One connection per job so they run concurrently.
    let mut clients = Vec::new();
    match &request_file {
        Some(file) => {
            anyhow::ensure!(
                args.jobs == 1,
                "--jobs applies to built-in circuits; send one request file per job"
            );
            let path = std::fs::canonicalize(file)
                .with_context(|| format!("proof request `{}`", file.display()))?;
            let mut c = Client::connect(&socket)?;
            c.send(&Request::SubmitRequest {
                path,
                kind: args.request.proof_type.clone(),
                family: args.request.family().map(str::to_owned),
                wait,
                priority: args.priority,
            })?;
            clients.push(accepted(c, 0)?);
        }
        None => {
            let circuit = args
                .circuit
                .clone()
                .context("nothing to prove\nhint: give --circuit SPEC, or a request file with --porep-c1/--post/--snap")?;
            for i in 0..args.jobs {
                let seed = args.seed + 1000 * i as u64;
                let mut c = Client::connect(&socket)?;
                c.send(&Request::Submit {
                    circuit: circuit.clone(),
                    seed,
                    partitions: args.partitions,
                    wait,
                    priority: args.priority,
                })?;
                clients.push(accepted(c, seed)?);
            }
        }
    }
    if !wait {
        return Ok(ExitCode::SUCCESS);
    }
    let mut failed = 0;
    for (mut c, seed, id) in clients {
        match c.recv()? {
            Response::Finished {
                job_id,
                proofs,
                error: None,
                elapsed_ms,
            } => {
                let bytes: Vec<Vec<u8>> =
                    proofs.iter().map(|p| unhex(p)).collect::<Result<_, _>>()?;
                let path = match (&args.out, &args.out_dir) {
                    (Some(out), _) => Some(out.clone()),
                    (None, Some(dir)) => Some(dir.join(format!("job-{job_id}.proof"))),
                    (None, None) => None,
                };
                if let Some(path) = path {
                    match (&request_file, &args.circuit) {
                        (Some(_), _) => super::prove::write_proof(&path, &bytes)?,
                        (None, Some(circuit)) => super::prove::write_outputs(
                            &path,
                            &super::parse_spec(circuit)?,
                            seed,
                            &bytes,
                        )?,
                        (None, None) => unreachable!("checked before sending"),
                    }
                    println!("{}", path.display());
                }
                eprintln!("job {job_id} done in {:.2}s", elapsed_ms as f64 / 1000.0);
            }
            Response::Finished {
                job_id,
                error: Some(e),
                ..
            } => {
                failed += 1;
                eprintln!("job {job_id} failed: {e}");
            }
            Response::Error { message } => {
                failed += 1;
                eprintln!("job {id}: {message}");
            }
            other => anyhow::bail!("unexpected answer {other:?}"),
        }
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Reads the service's first answer to a submission.
fn accepted(mut c: Client, seed: u64) -> anyhow::Result<(Client, u64, u64)> {
    match c.recv()? {
        Response::Accepted { job_id } => {
            eprintln!("job {job_id} accepted");
            Ok((c, seed, job_id))
        }
        Response::Error { message } => anyhow::bail!("refused: {message}"),
        other => anyhow::bail!("unexpected answer {other:?}"),
    }
}

/// `splitprover fetch`.
pub fn fetch(args: FetchArgs) -> anyhow::Result<ExitCode> {
    let mut c = Client::connect(&socket_of(args.socket))?;
    c.send(&Request::Fetch {
        job_id: args.job,
        wait: args.wait,
    })?;
    match c.recv()? {
        Response::Finished {
            job_id,
            proofs,
            error: None,
            elapsed_ms,
        } => {
            let bytes: Vec<Vec<u8>> = proofs.iter().map(|p| unhex(p)).collect::<Result<_, _>>()?;
            match &args.out {
                Some(out) => {
                    super::prove::write_proof(out, &bytes)?;
                    println!("{}", out.display());
                }
                None => println!("{}", hex(&bytes.concat())),
            }
            eprintln!("job {job_id} done in {:.2}s", elapsed_ms as f64 / 1000.0);
            Ok(ExitCode::SUCCESS)
        }
        Response::Finished {
            job_id,
            error: Some(e),
            ..
        } => {
            eprintln!("job {job_id} failed: {e}");
            Ok(ExitCode::from(1))
        }
        Response::Queued { job_id } => {
            eprintln!("job {job_id} is queued\nhint: add --wait to wait for it");
            Ok(ExitCode::from(3))
        }
        Response::Error { message } => anyhow::bail!("{message}"),
        other => anyhow::bail!("unexpected answer {other:?}"),
    }
}

/// `splitprover cancel`.
pub fn cancel(args: CancelArgs) -> anyhow::Result<ExitCode> {
    let mut c = Client::connect(&socket_of(args.socket))?;
    c.send(&Request::Cancel { job_id: args.job })?;
    match c.recv()? {
        Response::Cancelled {
            job_id,
            was_running,
        } => {
            let what = if was_running { "running" } else { "queued" };
            eprintln!("job {job_id} cancelled (it was {what})");
            Ok(ExitCode::SUCCESS)
        }
        Response::Error { message } => anyhow::bail!("{message}"),
        other => anyhow::bail!("unexpected answer {other:?}"),
    }
}

/// `splitprover status`.
pub fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let mut c = Client::connect(&socket_of(args.socket))?;
    c.send(&Request::Status)?;
    let s = match c.recv()? {
        Response::Status(s) => s,
        other => anyhow::bail!("unexpected answer {other:?}"),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", render_status(&s));
    Ok(ExitCode::SUCCESS)
}

/// The text form of a status.
pub fn render_status(s: &PipelineStatus) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(o, "pinning:   {}", s.pin_mode);
    let _ = writeln!(
        o,
        "ring:      {} slots x {} MiB, {}",
        s.ring_slots,
        s.slot_bytes >> 20,
        s.ring_pages
    );
    let sl = &s.slots;
    let _ = writeln!(
        o,
        "slots:     free {} writing {} ready {} claimed {} done {}",
        sl.free, sl.writing, sl.ready, sl.claimed, sl.done
    );
    for c in &s.children {
        let _ = writeln!(
            o,
            "{:<13} pid {:<8} cpus {:<10} restarts {:<3} {}{}",
            c.role,
            c.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            c.cpus.clone().unwrap_or_else(|| "-".into()),
            c.restarts,
            c.detail,
            c.last_exit
                .as_ref()
                .map(|e| format!(" (last exit: {e})"))
                .unwrap_or_default()
        );
    }
    for g in &s.gpus {
        let vram = if g.vram_total_bytes == 0 {
            "no VRAM".to_owned()
        } else {
            format!(
                "VRAM {} of {} MiB free",
                g.vram_free_bytes >> 20,
                g.vram_total_bytes >> 20
            )
        };
        let now = match (g.current_job, &g.current_circuit) {
            (Some(j), Some(c)) => format!("proving job {j} ({c})"),
            (Some(j), None) => format!("proving job {j}"),
            _ => "idle".to_owned(),
        };
        let name = if g.name.is_empty() {
            "(not reported yet)"
        } else {
            &g.name
        };
        let _ = writeln!(
            o,
            "gpu {:<9} {}: {}; {}, busy {:.1} s",
            g.ordinal,
            name,
            vram,
            now,
            g.busy_ns as f64 / 1e9
        );
    }
    let k = &s.counters;
    let _ = writeln!(
        o,
        "jobs:      {} live, {} submitted, {} succeeded, {} failed, {} cancelled; {} syntheses, {} slots re-queued after crashes",
        s.jobs.len(),
        k.submitted,
        k.succeeded,
        k.failed,
        k.cancelled,
        k.syntheses_requested,
        k.slots_requeued
    );
    let _ = writeln!(
        o,
        "hand-out:  {} partitions at synth-proc (at most {}), {} waiting in priority order",
        k.synth_outstanding, k.synth_window, k.synth_pending
    );
    for j in &s.jobs {
        let _ = writeln!(
            o,
            "  job {:<6} {:<16} priority {} {}/{} done, {} in ring",
            j.job_id, j.circuit, j.priority, j.done, j.partitions, j.in_ring
        );
    }
    if let Some(f) = &s.fatal {
        let _ = writeln!(o, "FATAL: {f}");
    }
    o
}
