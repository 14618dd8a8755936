//! `cuzk.v1.ProvingEngine` served from the [`Service`]: every RPC real.
//!
//! Error mapping, as cuzk's (and a step further), in one place ([`code`]; every RPC's error is
//! a [`ServiceError`] turned into a status by [`status`]): a request that cannot be proved (bad
//! kind, bad payload, bad circuit, a reused `job-N` id) → `INVALID_ARGUMENT` naming the reason;
//! an unknown job or SRS name → `NOT_FOUND`; the queue at its limit → `RESOURCE_EXHAUSTED`; a
//! circuit this service has no SRS for, an SRS in use, or a cancel of an ended job →
//! `FAILED_PRECONDITION`; stopping → `UNAVAILABLE`; the journal or the pipeline failing →
//! `INTERNAL`. A proof that failed is not an RPC error: `OK` with status `FAILED` and
//! `error_message`.
//!
//! Blocking work (the journal's fsync'd commits, opening a C1 output of tens of MB) runs on
//! tokio's blocking pool; waiting for a job is a `watch` channel the service bumps after each
//! journaled batch of outcomes, so a waiting client holds no thread, and a client that goes
//! away (its call cancelled) leaves nothing behind.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio_stream::StreamExt as _;
use tonic::transport::server::{Connected, Router};
use tonic::{Request, Response, Status};

use super::pb::{self, proving_engine_server::ProvingEngine};
use crate::pipeline::PipelineError;
use crate::service::{Ended, Reason, Service, ServiceError};

/// The gRPC face of the service.
#[derive(Clone)]
pub struct Engine {
    service: Arc<Service>,
}

impl Engine {
    /// Serves `service`.
    pub fn new(service: Arc<Service>) -> Self {
        Engine { service }
    }

    /// The tonic service, with message limits of `max_message_bytes` both ways.
    pub fn into_server(
        self,
        max_message_bytes: usize,
    ) -> pb::proving_engine_server::ProvingEngineServer<Engine> {
        pb::proving_engine_server::ProvingEngineServer::new(self)
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes)
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Service) -> Result<T, ServiceError> + Send + 'static,
    ) -> Result<T, Status> {
        let service = self.service.clone();
        tokio::task::spawn_blocking(move || f(&service))
            .await
            .map_err(|e| status(Reason::Worker(e).into()))?
            .map_err(status)
    }

    async fn submit(
        &self,
        r: pb::SubmitProofRequest,
        peer: String,
    ) -> Result<crate::service::Accepted, Status> {
        let kind = r.proof_kind;
        let rid = r.request_id.clone();
        let accepted = self
            .blocking(move |s| s.submit(super::submission(r)?))
            .await;
        match &accepted {
            Ok(a) => tracing::info!(
                %peer,
                job = a.id,
                request_id = %a.request_id,
                proof_kind = kind,
                existing = a.existing,
                queue_position = a.queue_position,
                "submit"
            ),
            Err(e) => tracing::info!(
                %peer,
                request_id = %rid,
                proof_kind = kind,
                "submit refused: {}",
                e.message()
            ),
        }
        accepted
    }

    /// Waits for job `id` (named `job_id` by the client) to end, at most `timeout` (`None`: no
    /// limit).
    async fn wait(
        &self,
        id: u64,
        job_id: String,
        timeout: Option<Duration>,
    ) -> Result<pb::AwaitProofResponse, Status> {
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        let mut changed = self.service.watch_ended();
        loop {
            changed.borrow_and_update();
            if let Some(ended) = self.blocking(move |s| s.ended(id)).await? {
                return Ok(answer(job_id, &ended));
            }
            if self.service.is_closing() {
                return Err(status(Reason::Closing(job_id).into()));
            }
            let woke = match deadline {
                Some(d) => match tokio::time::timeout_at(d, changed.changed()).await {
                    Ok(r) => r,
                    Err(_) => {
                        return Ok(pb::AwaitProofResponse {
                            job_id,
                            status: pb::await_proof_response::Status::Timeout as i32,
                            ..Default::default()
                        })
                    }
                },
                None => changed.changed().await,
            };
            if woke.is_err() {
                // The service is gone (dropped after its drain).
                return Err(status(Reason::Closing(job_id).into()));
            }
        }
    }
}

/// The response for an ended job.
fn answer(job_id: String, e: &Ended) -> pb::AwaitProofResponse {
    use crate::journal::JobState;
    use pb::await_proof_response::Status as S;
    let times = e.times();
    let ms = |d: Duration| d.as_millis() as u64;
    pb::AwaitProofResponse {
        job_id,
        status: match e.row.state {
            JobState::Succeeded => S::Completed,
            JobState::Failed => S::Failed,
            JobState::Cancelled => S::Cancelled,
            JobState::Accepted => S::Unknown,
        } as i32,
        proof: e.row.proofs.concat(),
        error_message: e.row.error.clone().unwrap_or_default(),
        queue_wait_ms: ms(times.queue_wait),
        // The SRS is resident in shared memory before a job is accepted.
        srs_load_ms: 0,
        synthesis_ms: ms(times.synthesis),
        gpu_compute_ms: ms(times.gpu),
        total_ms: e.total_ms(),
        verify_ms: ms(times.verify),
        partitions: e.row.proofs.len() as u32,
    }
}

/// The gRPC code of a service error: the one place errors meet the wire.
pub fn code(e: &ServiceError) -> tonic::Code {
    use tonic::Code;
    match e {
        ServiceError::Service(r) => match r {
            Reason::ShuttingDown | Reason::Closing(_) => Code::Unavailable,
            Reason::Busy { .. } => Code::ResourceExhausted,
            Reason::UnknownJob(_) => Code::NotFound,
            Reason::Ended { .. } => Code::FailedPrecondition,
            Reason::ReservedRequestId(_) | Reason::NoProofKind | Reason::NoSubmit => {
                Code::InvalidArgument
            }
            Reason::Worker(_) => Code::Internal,
        },
        ServiceError::Pipeline(p) => match p {
            PipelineError::BadSpec { .. }
            | PipelineError::NotSeeded(_)
            | PipelineError::Request(_)
            | PipelineError::BadPriority(_)
            | PipelineError::TooManyPartitions(_)
            | PipelineError::PartitionLimit { .. }
            | PipelineError::RequestTooLarge { .. }
            | PipelineError::RequestFileRefused(_)
            | PipelineError::RequestFile { .. } => Code::InvalidArgument,
            PipelineError::UnknownJob(_) | PipelineError::UnknownSrs { .. } => Code::NotFound,
            PipelineError::Unserved(_) | PipelineError::SrsInUse { .. } => Code::FailedPrecondition,
            PipelineError::Stopped => Code::Unavailable,
            // The ids are the service's (its journal's): a clash is its fault, not the client's.
            PipelineError::JobIdTaken(_) => Code::Internal,
            // A pipeline that gave up, a child or the SRS failing, start-up errors.
            _ => Code::Internal,
        },
        ServiceError::Journal(_) => Code::Internal,
    }
}

/// The gRPC status of a service error: [`code`], and the error's message.
pub fn status(e: ServiceError) -> Status {
    Status::new(code(&e), e.to_string())
}

/// Who called: a Unix socket's peer credentials (`SO_PEERCRED`), else the TCP address.
fn peer<T>(r: &Request<T>) -> String {
    let uds = r
        .extensions()
        .get::<tonic::transport::server::UdsConnectInfo>()
        .and_then(|i| i.peer_cred);
    match (uds, r.remote_addr()) {
        (Some(c), _) => format!(
            "peer_pid={} peer_uid={} peer_gid={}",
            c.pid().unwrap_or(-1),
            c.uid(),
            c.gid()
        ),
        (None, Some(a)) => format!("peer_addr={a}"),
        (None, None) => "unknown".into(),
    }
}

fn timeout_of(ms: u64) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(ms))
}

#[tonic::async_trait]
impl ProvingEngine for Engine {
    async fn submit_proof(
        &self,
        request: Request<pb::SubmitProofRequest>,
    ) -> Result<Response<pb::SubmitProofResponse>, Status> {
        let peer = peer(&request);
        let a = self.submit(request.into_inner(), peer).await?;
        Ok(Response::new(pb::SubmitProofResponse {
            job_id: a.request_id,
            queue_position: a.queue_position,
            assigned_gpu: String::new(),
            existing: a.existing,
        }))
    }

    async fn await_proof(
        &self,
        request: Request<pb::AwaitProofRequest>,
    ) -> Result<Response<pb::AwaitProofResponse>, Status> {
        let r = request.into_inner();
        let job_id = r.job_id.clone();
        let id = self.blocking(move |s| s.resolve(&r.job_id)).await?;
        Ok(Response::new(
            self.wait(id, job_id, timeout_of(r.timeout_ms)).await?,
        ))
    }

    async fn prove(
        &self,
        request: Request<pb::ProveRequest>,
    ) -> Result<Response<pb::ProveResponse>, Status> {
        let peer = peer(&request);
        let submit = request
            .into_inner()
            .submit
            .ok_or_else(|| status(Reason::NoSubmit.into()))?;
        let a = self.submit(submit, peer).await?;
        // A retried Prove (after the client's own timeout) attaches here to the running job.
        let result = self.wait(a.id, a.request_id, None).await?;
        Ok(Response::new(pb::ProveResponse {
            result: Some(result),
        }))
    }

    async fn cancel_proof(
        &self,
        request: Request<pb::CancelProofRequest>,
    ) -> Result<Response<pb::CancelProofResponse>, Status> {
        let job_id = request.into_inner().job_id;
        let was_running = self
            .blocking(move |s| {
                let id = s.resolve(&job_id)?;
                s.cancel(id)
            })
            .await?;
        Ok(Response::new(pb::CancelProofResponse { was_running }))
    }

    async fn get_status(
        &self,
        _: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        Ok(Response::new(self.blocking(|s| Ok(status_of(s))).await?))
    }

    async fn get_metrics(
        &self,
        _: Request<pb::GetMetricsRequest>,
    ) -> Result<Response<pb::GetMetricsResponse>, Status> {
        let prometheus_text = self
            .blocking(|s| Ok(s.metrics().render(&s.status(), s.uptime())))
            .await?;
        Ok(Response::new(pb::GetMetricsResponse { prometheus_text }))
    }

    async fn preload_srs(
        &self,
        request: Request<pb::PreloadSrsRequest>,
    ) -> Result<Response<pb::PreloadSrsResponse>, Status> {
        let circuit_id = request.into_inner().circuit_id;
        let loaded = self.blocking(move |s| s.preload_srs(&circuit_id)).await?;
        Ok(Response::new(pb::PreloadSrsResponse {
            already_loaded: loaded.already_loaded,
            load_time_ms: loaded.load_ms,
            size_bytes: loaded.bytes,
        }))
    }

    async fn evict_srs(
        &self,
        request: Request<pb::EvictSrsRequest>,
    ) -> Result<Response<pb::EvictSrsResponse>, Status> {
        let circuit_id = request.into_inner().circuit_id;
        let evicted = self.blocking(move |s| s.evict_srs(&circuit_id)).await?;
        Ok(Response::new(pb::EvictSrsResponse {
            was_loaded: evicted.was_loaded,
            freed_bytes: evicted.freed_bytes,
        }))
    }
}

/// cuzk's status message, with the whole pipeline status as JSON beside it.
fn status_of(s: &Service) -> pb::GetStatusResponse {
    use crate::metrics::proof_kind_label;
    let status = s.status();
    let mut queues: std::collections::BTreeMap<&'static str, pb::QueueStatus> = Default::default();
    for j in &status.jobs {
        let label = proof_kind_label(&j.circuit);
        let q = queues.entry(label).or_insert_with(|| pb::QueueStatus {
            proof_kind: label.into(),
            ..Default::default()
        });
        if j.running {
            q.in_progress += 1;
        } else {
            q.pending += 1;
        }
    }
    let (completed, failed) = s.metrics().totals();
    let gpus = gpu_lines(s, &status);
    let loaded_srs = srs_lines(&status);
    let srs_bytes: u64 = loaded_srs.iter().map(|l| l.size_bytes).sum();
    pb::GetStatusResponse {
        gpus,
        loaded_srs,
        queues: queues.into_values().collect(),
        total_proofs_completed: completed,
        total_proofs_failed: failed,
        uptime_seconds: s.uptime().as_secs(),
        pinned_memory_bytes: status.ring_data_bytes() + srs_bytes,
        pinned_memory_limit_bytes: huge_page_pool_bytes(),
        pipeline_json: serde_json::to_string(&status).unwrap_or_default(),
    }
}

/// The huge-page pool of the host (`HugePages_Total` × `Hugepagesize`), 0 when unknown.
fn huge_page_pool_bytes() -> u64 {
    let Ok(info) = std::fs::read_to_string("/proc/meminfo") else {
        return 0;
    };
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    match (field("HugePages_Total:"), field("Hugepagesize:")) {
        (Some(n), Some(kib)) => n * kib * 1024,
        _ => 0,
    }
}

/// How a listener serves the API: the message limit and the connections it lets in.
#[derive(Clone, Debug)]
pub struct Serving {
    /// Message limit both ways.
    pub max_message_bytes: usize,
    /// Open connections at most, over every listener that shares `open`; one more is closed at
    /// once.
    pub max_connections: usize,
    /// Connections open now.
    pub open: Arc<AtomicUsize>,
}

/// A running server: it ends once its stop watch turns `true` and its calls are answered.
pub type ServerTask = tokio::task::JoinHandle<Result<(), tonic::transport::Error>>;

/// The API of `service` behind a tonic server (HTTP/2 keepalive: a dead peer's connection is
/// closed).
fn router(service: Arc<Service>, max_message_bytes: usize) -> Router {
    router_on(
        tonic::transport::Server::builder(),
        service,
        max_message_bytes,
    )
}

/// [`router`] from a `builder` (one with TLS settings).
fn router_on(
    builder: tonic::transport::Server,
    service: Arc<Service>,
    max_message_bytes: usize,
) -> Router {
    builder
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .add_service(Engine::new(service).into_server(max_message_bytes))
}

/// Serves `service` on the bound Unix socket `listener`, on runtime `rt`, until `stop` turns
/// `true` (the listener closes then; calls in progress go on). Errors when the listener cannot
/// be registered with the runtime.
pub fn serve_unix(
    rt: &tokio::runtime::Handle,
    listener: std::os::unix::net::UnixListener,
    service: Arc<Service>,
    serving: &Serving,
    stop: watch::Receiver<bool>,
) -> std::io::Result<ServerTask> {
    listener.set_nonblocking(true)?;
    let _entered = rt.enter();
    let listener = tokio::net::UnixListener::from_std(listener)?;
    let (open, max) = (serving.open.clone(), serving.max_connections);
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener)
        .filter_map(move |c| accepted(c).and_then(|s| admit(s, &open, max)));
    let router = router(service, serving.max_message_bytes);
    Ok(rt.spawn(router.serve_with_incoming_shutdown(incoming, stopped(stop))))
}

/// Who a TCP listener lets in (see [`super::access`]).
pub struct TcpAccess {
    /// The client networks admitted.
    pub allow: super::access::AllowList,
    /// TLS on every connection (and client certificates, where it names a CA); `None`: plain.
    pub tls: Option<tonic::transport::ServerTlsConfig>,
    /// A new connection must send its first bytes within this.
    pub first_byte_timeout: Duration,
}

/// [`serve_unix`] on a TCP `listener` (no Nagle delay: answers are small), for the peers
/// `access` admits: one outside its allow-list is closed at accept, logged and counted in the
/// service's metrics, as is one that stays silent past the deadline. Errors when the TLS
/// settings are refused.
pub fn serve_tcp(
    rt: &tokio::runtime::Handle,
    listener: tokio::net::TcpListener,
    service: Arc<Service>,
    serving: &Serving,
    access: &TcpAccess,
    stop: watch::Receiver<bool>,
) -> Result<ServerTask, tonic::transport::Error> {
    let (open, max) = (serving.open.clone(), serving.max_connections);
    let metrics = service.metrics().clone();
    let (allow, deadline) = (access.allow.clone(), access.first_byte_timeout);
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).filter_map(move |c| {
        let s: tokio::net::TcpStream = accepted(c)?;
        let peer = s.peer_addr().ok();
        if !peer.is_some_and(|p| allow.admits(p.ip())) {
            let peer = peer.map_or_else(|| "unknown".into(), |p| p.to_string());
            tracing::warn!(%peer, allow = %allow, "connection refused: peer not in [service] allow");
            metrics.connection_refused("not_allowed");
            return None;
        }
        let _ = s.set_nodelay(true);
        let silent = {
            let metrics = metrics.clone();
            Box::new(move || {
                tracing::warn!(?peer, "connection closed: it sent nothing before the deadline");
                metrics.connection_refused("silent");
            })
        };
        let s = super::access::FirstByteDeadline::new(s, deadline, silent);
        let admitted = admit(s, &open, max);
        if admitted.is_none() {
            metrics.connection_refused("too_many");
        }
        admitted
    });
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = &access.tls {
        builder = builder.tls_config(tls.clone())?;
    }
    let router = router_on(builder, service, serving.max_message_bytes);
    Ok(rt.spawn(router.serve_with_incoming_shutdown(incoming, stopped(stop))))
}

async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// A connection the listener accepted; accept errors (EMFILE, a connection aborted before it
/// was taken) are logged, never the end of the service.
fn accepted<T>(c: std::io::Result<T>) -> Option<T> {
    match c {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::warn!("accepting a client: {e}; retrying");
            None
        }
    }
}

/// `io` counted against `max` open connections, or dropped (closed) when that many are open.
fn admit<T>(io: T, open: &Arc<AtomicUsize>, max: usize) -> Option<std::io::Result<Counted<T>>> {
    match Counted::admit(io, open, max) {
        Ok(c) => Some(Ok(c)),
        Err(_) => {
            tracing::warn!(max_connections = max, "connection refused: too many open");
            None
        }
    }
}

/// A connection counted against `max_connections` while it is open.
pub struct Counted<T> {
    inner: T,
    open: Arc<AtomicUsize>,
}

impl<T> Counted<T> {
    /// Counts `inner` in `open`, or gives it back when `open` is at `max`.
    pub fn admit(inner: T, open: &Arc<AtomicUsize>, max: usize) -> Result<Counted<T>, T> {
        // AcqRel: the count is the only shared state; no other memory is published through it.
        let prev = open.fetch_add(1, Ordering::AcqRel);
        if prev >= max {
            open.fetch_sub(1, Ordering::AcqRel);
            return Err(inner);
        }
        Ok(Counted {
            inner,
            open: open.clone(),
        })
    }
}

impl<T> Drop for Counted<T> {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Counted<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Counted<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<T: Connected> Connected for Counted<T> {
    type ConnectInfo = T::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

/// cuzk's GPU lines: each gpu-proc's device and the job it proves now.
fn gpu_lines(s: &Service, status: &crate::pipeline::PipelineStatus) -> Vec<pb::GpuStatus> {
    status
        .gpus
        .iter()
        .map(|g| pb::GpuStatus {
            ordinal: g.ordinal,
            name: g.name.clone(),
            vram_total_bytes: g.vram_total_bytes,
            vram_free_bytes: g.vram_free_bytes,
            srs_device_bytes: g.srs_device_bytes,
            planned_device_bytes: g.planned_device_bytes,
            device_budget_bytes: g.device_budget_bytes,
            srs_streamed_bytes: g.srs_streamed_bytes,
            srs_streamed_total_bytes: g.srs_streamed_total_bytes,
            current_job_id: g.current_job.map(|id| s.request_id(id)).unwrap_or_default(),
            current_proof_kind: g
                .current_circuit
                .as_deref()
                .map(|c| crate::metrics::proof_kind_label(c).to_owned())
                .unwrap_or_default(),
        })
        .collect()
}

/// cuzk's SRS lines: every configured circuit, loaded or not.
fn srs_lines(status: &crate::pipeline::PipelineStatus) -> Vec<pb::SrsStatus> {
    use crate::pipeline::SrsTier;
    use pb::srs_status::Tier;
    status
        .srs
        .iter()
        .map(|l| pb::SrsStatus {
            circuit_id: l.circuit_id.clone(),
            tier: match l.tier {
                SrsTier::Hot => Tier::Hot,
                SrsTier::Warm => Tier::Warm,
                SrsTier::Cold => Tier::Cold,
            } as i32,
            size_bytes: l.size_bytes,
            ref_count: l.ref_count,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use kernels::circuits::AnyCircuit;
    use tonic::Code;

    use super::*;
    use crate::journal::{JobState, JournalError};

    /// A `JoinError`, as a worker thread that failed gives it.
    fn join_error() -> tokio::task::JoinError {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let task = tokio::spawn(std::future::pending::<()>());
            task.abort();
            task.await.unwrap_err()
        })
    }

    #[test]
    fn every_service_error_has_its_grpc_code() {
        let circuit: AnyCircuit = "sha-chain:1".parse().unwrap();
        let bad = || "no-such-circuit:1".parse::<AnyCircuit>().unwrap_err();
        let table: Vec<(ServiceError, Code)> = vec![
            // The service's own reasons.
            (Reason::ShuttingDown.into(), Code::Unavailable),
            (Reason::Closing("job-3".into()).into(), Code::Unavailable),
            (
                Reason::Busy { queued: 4, max: 4 }.into(),
                Code::ResourceExhausted,
            ),
            (Reason::UnknownJob("nope".into()).into(), Code::NotFound),
            (
                Reason::Ended {
                    job: "job-3".into(),
                    state: Some(JobState::Cancelled),
                }
                .into(),
                Code::FailedPrecondition,
            ),
            (
                Reason::ReservedRequestId("job-9".into()).into(),
                Code::InvalidArgument,
            ),
            (Reason::NoProofKind.into(), Code::InvalidArgument),
            (Reason::NoSubmit.into(), Code::InvalidArgument),
            (Reason::Worker(join_error()).into(), Code::Internal),
            // The pipeline's.
            (
                PipelineError::BadSpec {
                    spec: "no-such-circuit:1".into(),
                    cause: bad(),
                }
                .into(),
                Code::InvalidArgument,
            ),
            (
                PipelineError::NotSeeded(circuit).into(),
                Code::InvalidArgument,
            ),
            (PipelineError::Request(bad()).into(), Code::InvalidArgument),
            (PipelineError::BadPriority(7).into(), Code::InvalidArgument),
            (
                PipelineError::TooManyPartitions(1 << 40).into(),
                Code::InvalidArgument,
            ),
            (
                PipelineError::PartitionLimit {
                    circuit,
                    asked: 9,
                    max: 8,
                }
                .into(),
                Code::InvalidArgument,
            ),
            (
                PipelineError::RequestTooLarge { bytes: 9, max: 8 }.into(),
                Code::InvalidArgument,
            ),
            (
                PipelineError::RequestFile {
                    path: "c1.json".into(),
                    cause: Box::new(PipelineError::Request(bad())),
                }
                .into(),
                Code::InvalidArgument,
            ),
            (PipelineError::UnknownJob(3).into(), Code::NotFound),
            (
                PipelineError::UnknownSrs {
                    id: "porep-32g".into(),
                    configured: "sha-chain:1".into(),
                }
                .into(),
                Code::NotFound,
            ),
            (
                PipelineError::Unserved(circuit).into(),
                Code::FailedPrecondition,
            ),
            (
                PipelineError::SrsInUse { circuit, jobs: 1 }.into(),
                Code::FailedPrecondition,
            ),
            (PipelineError::Stopped.into(), Code::Unavailable),
            (PipelineError::JobIdTaken(3).into(), Code::Internal),
            (
                PipelineError::Fatal("gave up".into()).into(),
                Code::Internal,
            ),
            // The journal's.
            (
                JournalError::BadResult {
                    path: PathBuf::from("jobs.sqlite"),
                    id: 3,
                }
                .into(),
                Code::Internal,
            ),
        ];
        for (e, expected) in table {
            let shown = e.to_string();
            assert_eq!(code(&e), expected, "{shown}");
            // The status carries the error's own message.
            let s = status(e);
            assert_eq!((s.code(), s.message()), (expected, shown.as_str()));
        }
    }

    #[test]
    fn messages_read_as_before() {
        let e: ServiceError = Reason::Ended {
            job: "job-3".into(),
            state: Some(JobState::Cancelled),
        }
        .into();
        assert_eq!(e.to_string(), "job `job-3` has already ended (cancelled)");
        let e: ServiceError = Reason::Ended {
            job: "job-3".into(),
            state: None,
        }
        .into();
        assert_eq!(e.to_string(), "job `job-3` has already ended");
        let e: ServiceError = Reason::Closing("porep-1-2".into()).into();
        assert!(
            e.to_string()
                .ends_with("\nhint: ask for it again then (AwaitProof `porep-1-2`)"),
            "{e}"
        );
        let e: ServiceError = PipelineError::BadPriority(7).into();
        assert!(
            e.to_string().starts_with("priority 7 is not on the scale"),
            "{e}"
        );
    }
}
