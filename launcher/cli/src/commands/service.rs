//! `splitprover run`, `submit`, `fetch`, `cancel` and `status`: the long-lived service and its
//! clients.
//!
//! `run` starts the pipeline, opens the journal, and serves cuzk's gRPC API (`launcher::api`) on
//! the configured Unix socket, on every address of `[service] listen`, and Prometheus text on
//! `metrics_listen`. The other commands are clients of that same API.
//!
//! Stopping (SIGTERM, SIGINT): the listeners close at once, new submissions are refused, the
//! pipeline drains for `stop_grace_s` (in-flight partitions are proved), outcomes are journaled,
//! clients still waiting are told that their job stays queued for the next start, then the
//! pipeline shuts down (children stopped, cgroups removed) and `run` returns 0.
//!
//! A pipeline that cannot go on (`Pipeline::fatal`: its dispatcher panicked, or a role was given
//! up) is not served on: the watchdog is no longer fed, and `run` stops the same way without the
//! drain and returns 1, so that systemd (`Restart=on-failure`) starts it again; the journal
//! re-queues the accepted jobs at that start.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;
use launcher::api::access::ClientTls;
use launcher::api::client::Client;
use launcher::api::server::{serve_tcp, serve_unix, ServerTask, Serving, TcpAccess};
use launcher::api::{pb, Endpoint};
use launcher::config::Config;
use launcher::journal::{self, Journal};
use launcher::metrics::Metrics;
use launcher::notify::Notifier;
use launcher::pipeline::memory::gib;
use launcher::pipeline::{Pipeline, PipelineStatus};
use launcher::service::{Limits, Service};
use shm_protocol::layout::PROOF_BYTES;

use crate::cli::{CancelArgs, FetchArgs, RunArgs, StatusArgs, SubmitArgs, TlsArgs};

/// `splitprover run`.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let limits = Limits::new(&config.service);
    // Listen settings are checked before minutes of SRS loading.
    let mode = config.service.socket_mode()?;
    let gid = config
        .service
        .socket_group
        .as_deref()
        .map(|g| group_id(g).map(|id| (g, id)))
        .transpose()?;
    let socket = config.socket.clone();
    let mut endpoints = vec![Endpoint::Unix(socket.clone())];
    for l in &config.service.listen {
        let e: Endpoint = l.parse()?;
        if !endpoints.contains(&e) {
            endpoints.push(e);
        }
    }
    let first_byte_timeout = Duration::from_secs(config.service.first_byte_timeout_s);
    let access = TcpAccess {
        allow: config.service.allow_list()?,
        tls: config
            .service
            .tls
            .as_ref()
            .map(|t| t.server(first_byte_timeout))
            .transpose()?,
        first_byte_timeout,
    };
    let metrics_listen = config.service.metrics_listen.clone();
    let max_message = config.service.max_message_bytes;
    let max_connections = config.service.max_connections.max(1);
    let journal_path = config
        .service
        .journal
        .clone()
        .unwrap_or_else(|| launcher::env::journal_path(&socket));
    // The journal first: a corrupt one stops the start before minutes of SRS loading.
    let journal = Journal::open(&journal_path)?;
    for old in journal::set_aside(&journal_path) {
        tracing::warn!(
            "a corrupt job journal was moved aside to `{}`: its jobs were not re-queued",
            old.display()
        );
    }
    let settings = launcher::settings::from_config(&config)?;
    let pipeline = Pipeline::start(settings)?;
    pipeline.wait_ready(Duration::from_secs(600))?;
    let service = Arc::new(Service::new(pipeline, journal, limits, Metrics::new()));
    let requeued = service.requeue()?;
    let last_id = service.last_id()?;
    tracing::info!(journal = %journal_path.display(), requeued, last_id, "job journal open");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("api")
        .enable_all()
        .build()
        .context("cannot start the API runtime")?;
    let (stop_servers, servers_stop) = tokio::sync::watch::channel(false);
    let serving = Serving {
        max_message_bytes: max_message,
        max_connections,
        open: Arc::new(AtomicUsize::new(0)),
    };
    let mut servers = Vec::new();
    let mut unix_paths = Vec::new();
    for endpoint in &endpoints {
        let (service, stop) = (service.clone(), servers_stop.clone());
        let server = match endpoint {
            Endpoint::Unix(path) => {
                let listener = bind(path, mode, gid)?;
                unix_paths.push(path.clone());
                serve_unix(rt.handle(), listener, service, &serving, stop)
                    .with_context(|| format!("cannot serve on `{}`", path.display()))?
            }
            Endpoint::Tcp(addr) => {
                let listener = rt
                    .block_on(tokio::net::TcpListener::bind(addr.as_str()))
                    .with_context(|| format!("cannot listen on `{addr}`"))?;
                serve_tcp(rt.handle(), listener, service, &serving, &access, stop)
                    .with_context(|| format!("cannot serve on `{addr}` (TLS settings)"))?
            }
        };
        match endpoint {
            Endpoint::Tcp(_) => tracing::info!(
                %endpoint,
                allow = %access.allow,
                tls = access.tls.is_some(),
                "serving the cuzk API"
            ),
            Endpoint::Unix(_) => tracing::info!(%endpoint, "serving the cuzk API"),
        }
        servers.push(server);
    }
    if let Some(addr) = &metrics_listen {
        let listener = rt
            .block_on(tokio::net::TcpListener::bind(addr.as_str()))
            .with_context(|| format!("cannot listen on `{addr}` (metrics_listen)"))?;
        let weak = Arc::downgrade(&service);
        let render = Arc::new(move || match weak.upgrade() {
            Some(s) => s.metrics().render(&s.status(), s.uptime()),
            None => String::new(),
        });
        rt.spawn(launcher::metrics::serve_http(
            listener,
            render,
            servers_stop.clone(),
        ));
        tracing::info!(%addr, "serving Prometheus metrics at /metrics");
    }
    let notifier = Notifier::from_env().unwrap_or_else(|e| {
        tracing::warn!("systemd notify unavailable: {e}");
        Notifier::disabled()
    });
    let status = service.pipeline().status();
    let _ = notifier.ready();
    let listening: Vec<String> = endpoints.iter().map(|e| e.to_string()).collect();
    let _ = notifier.status(&format!(
        "serving on {}; pinning {}; ring {}; {requeued} jobs re-queued",
        listening.join(", "),
        status.pin_mode,
        status.ring_pages
    ));
    tracing::info!(socket = %socket.display(), "service ready");
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }
    // The watchdog holds the service weakly, so the pipeline can be shut down on stop.
    let watchdog = match launcher::notify::watchdog_interval() {
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
    // Served until a signal, or until the pipeline cannot go on.
    let fatal = loop {
        // Acquire: pairs with signal-hook's store of the flag (a plain flag).
        if stop.load(Ordering::Acquire) {
            break None;
        }
        if let Some(why) = service.pipeline().fatal() {
            break Some(why);
        }
        thread::sleep(Duration::from_millis(50));
    };

    let grace = Duration::from_secs(config.service.stop_grace_s);
    match &fatal {
        None => tracing::info!(
            grace_s = grace.as_secs(),
            "stopping: no new requests; in-flight partitions finish"
        ),
        Some(why) => {
            tracing::error!(
                "the pipeline cannot go on: {why}; stopping with an error so that the service \
                 is restarted (accepted jobs stay in the journal and run after the restart)"
            );
            // The watchdog thread ends on it (and had stopped pinging at the fatal status).
            stop.store(true, Ordering::Release); // Release: pairs with the watchdog's Acquire load
        }
    }
    let _ = notifier.stopping();
    service.stop_accepting();
    // No new connections; calls in progress go on (waiters are answered below).
    let _ = stop_servers.send(true);
    for p in &unix_paths {
        let _ = std::fs::remove_file(p);
    }
    // A fatal pipeline dispatches nothing: there is nothing to drain.
    let report = fatal.is_none().then(|| service.pipeline().drain(grace));
    // The last outcomes are journaled before the waiting clients are answered.
    collector_stop.store(true, Ordering::Release); // flags: stored Release, loaded Acquire
    let _ = collector.join();
    service.close();
    rt.block_on(async {
        let all = futures_join(servers);
        let _ = tokio::time::timeout(Duration::from_secs(5), all).await;
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    if let Some(w) = watchdog {
        let _ = w.join();
    }
    let queued = service.unfinished();
    match Arc::try_unwrap(service) {
        Ok(s) => {
            s.shutdown();
            tracing::info!("pipeline shut down: children stopped, cgroups removed");
        }
        Err(service) => {
            // A call still holds the service: stop the children without waiting for it.
            tracing::warn!("a client call is still running; stopping the children anyway");
            service.pipeline().stop_children();
        }
    }
    tracing::info!(
        drained = report.is_some_and(|r| r.quiet),
        queued,
        "stopped; accepted jobs not finished run after the next start"
    );
    Ok(match fatal {
        None => ExitCode::SUCCESS,
        Some(_) => ExitCode::FAILURE,
    })
}

/// Waits for every server task.
async fn futures_join(servers: Vec<ServerTask>) {
    for s in servers {
        match s.await {
            Ok(Err(e)) => tracing::warn!("API server: {e}"),
            Err(e) => tracing::warn!("API server task: {e}"),
            Ok(Ok(())) => {}
        }
    }
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
            if s.pipeline().status().fatal.is_none() {
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
        // The flag convention: stored Release, loaded Acquire.
        if stop.load(Ordering::Acquire) {
            return;
        }
        if expired.elapsed() >= EXPIRE_EVERY {
            expired = Instant::now();
            service.expire();
        }
        if trimmed.elapsed() >= TIMELINE_EVERY {
            // The service never reads the timeline: keep it from growing without bound.
            trimmed = Instant::now();
            drop(service.pipeline().take_timeline());
        }
        thread::sleep(TICK);
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

/// The endpoint a client command talks to: `--socket` / `SPLITPROVER_SOCKET`, else the default
/// socket.
fn endpoint_of(explicit: Option<&str>) -> anyhow::Result<Endpoint> {
    match explicit {
        Some(e) => Ok(e.parse()?),
        None => Ok(Endpoint::Unix(launcher::env::socket_path())),
    }
}

/// A client of the service `--socket` names.
pub fn client(socket: Option<&str>) -> anyhow::Result<Client> {
    Ok(Client::connect(&endpoint_of(socket)?)?)
}

/// A client of the service `--socket` names, over TLS when `--tls-*` say so.
fn tls_client(socket: Option<&str>, tls: &TlsArgs) -> anyhow::Result<Client> {
    let endpoint = endpoint_of(socket)?;
    Ok(Client::connect_with(
        &endpoint,
        launcher::api::DEFAULT_MAX_MESSAGE_BYTES,
        &client_tls(tls),
    )?)
}

fn client_tls(tls: &TlsArgs) -> ClientTls {
    ClientTls {
        ca: tls.tls_ca.clone(),
        cert: tls.tls_cert.clone(),
        key: tls.tls_key.clone(),
        domain: None,
    }
}

/// The job id a user typed: `7` is short for `job-7`, which names job 7 whatever its request id.
fn job_id_of(typed: &str) -> String {
    match typed.parse::<u64>() {
        Ok(n) => journal::generated_request_id(n),
        Err(_) => typed.to_owned(),
    }
}

/// `splitprover submit`.
pub fn submit(args: SubmitArgs) -> anyhow::Result<ExitCode> {
    let endpoint = endpoint_of(args.socket.as_deref())?;
    let wait = args.wait || args.out_dir.is_some() || args.out.is_some();
    if let Some(d) = &args.out_dir {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create `{}`", d.display()))?;
    }
    let request_file = args.request.request_file();
    let mut c = Client::connect_with(
        &endpoint,
        launcher::api::DEFAULT_MAX_MESSAGE_BYTES,
        &client_tls(&args.tls),
    )?;
    // (job id, seed) per job.
    let mut jobs = Vec::new();
    let mut send = |c: &mut Client, r: pb::SubmitProofRequest, seed: u64| {
        let a = c.submit(r).map_err(|e| anyhow::anyhow!("refused: {e}"))?;
        let again = if a.existing {
            " (the request id's job, accepted before)"
        } else {
            ""
        };
        eprintln!("job {} accepted{again}", a.job_id);
        jobs.push((a.job_id, seed));
        anyhow::Ok(())
    };
    match &request_file {
        Some(file) => {
            anyhow::ensure!(
                args.jobs == 1,
                "--jobs applies to built-in circuits; send one request file per job"
            );
            let bytes = launcher::request_file::read(
                file,
                launcher::config::FaultsConfig::default()
                    .max_request_bytes
                    .0,
                launcher::request_file::Reader::Launcher,
            )
            .with_context(|| format!("proof request `{}`", file.display()))?;
            let (kind, family) =
                super::request_choice(args.request.proof_type.as_deref(), args.request.family())?;
            let kind = kernels::job::filecoin_request_kind(&bytes, kind, family)
                .with_context(|| format!("proof request `{}`", file.display()))?;
            #[cfg(feature = "filecoin")]
            let curio_miner = args.curio_miner_id;
            #[cfg(not(feature = "filecoin"))]
            let curio_miner: Option<u64> = None;
            let r = match curio_miner {
                #[cfg(feature = "filecoin")]
                Some(miner) => {
                    super::curio::porep_request(bytes, kind, miner, args.request_id.clone())?
                }
                _ => pb::SubmitProofRequest {
                    request_id: args.request_id.clone().unwrap_or_default(),
                    priority: args.priority as i32,
                    circuit: kernels::circuits::AnyCircuit::Filecoin(kind).to_string(),
                    request: bytes,
                    ..Default::default()
                },
            };
            send(&mut c, r, 0)?;
        }
        None => {
            let circuit = args
                .circuit
                .clone()
                .context("nothing to prove\nhint: give --circuit SPEC, or a request file with --porep-c1/--post/--snap")?;
            anyhow::ensure!(
                args.request_id.is_none() || args.jobs == 1,
                "--request-id names one job; drop it or --jobs"
            );
            for i in 0..args.jobs {
                let seed = args.seed + 1000 * i as u64;
                let request = kernels::job::BuiltinRequest {
                    seed,
                    partitions: args.partitions,
                };
                let r = pb::SubmitProofRequest {
                    request_id: args.request_id.clone().unwrap_or_default(),
                    priority: args.priority.clamp(i32::MIN.into(), i32::MAX.into()) as i32,
                    circuit: circuit.clone(),
                    request: request.to_bytes(),
                    ..Default::default()
                };
                send(&mut c, r, seed)?;
            }
        }
    }
    if !wait {
        return Ok(ExitCode::SUCCESS);
    }
    let mut failed = 0;
    for (job_id, seed) in jobs {
        let a = c.await_proof(&job_id, 0)?;
        if a.status != pb::await_proof_response::Status::Completed as i32 {
            failed += 1;
            eprintln!(
                "job {job_id} {}: {}",
                status_word(a.status),
                a.error_message
            );
            continue;
        }
        let bytes = split_proofs(&a.proof);
        let path = match (&args.out, &args.out_dir) {
            (Some(out), _) => Some(out.clone()),
            (None, Some(dir)) => Some(dir.join(format!("{job_id}.proof"))),
            (None, None) => None,
        };
        if let Some(path) = path {
            match (&request_file, &args.circuit) {
                (Some(_), _) => super::prove::write_proof(&path, &bytes)?,
                (None, Some(circuit)) => super::prove::write_outputs(
                    &path,
                    &launcher::settings::parse_spec(circuit)?,
                    seed,
                    &bytes,
                )?,
                (None, None) => unreachable!("checked before sending"),
            }
            println!("{}", path.display());
        }
        eprintln!("job {job_id} done in {:.2}s", a.total_ms as f64 / 1000.0);
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Proof bytes per partition ([`PROOF_BYTES`] each) from an `AwaitProofResponse`'s
/// concatenation.
fn split_proofs(proof: &[u8]) -> Vec<Vec<u8>> {
    proof.chunks(PROOF_BYTES).map(<[u8]>::to_vec).collect()
}

fn status_word(status: i32) -> &'static str {
    use pb::await_proof_response::Status as S;
    match S::try_from(status) {
        Ok(S::Completed) => "done",
        Ok(S::Failed) => "failed",
        Ok(S::Cancelled) => "was cancelled",
        Ok(S::Timeout) => "is still running",
        _ => "is in an unknown state",
    }
}

/// `splitprover fetch`.
pub fn fetch(args: FetchArgs) -> anyhow::Result<ExitCode> {
    let mut c = tls_client(args.socket.as_deref(), &args.tls)?;
    let job_id = job_id_of(&args.job);
    // Without --wait: answer at once (1 ms is the shortest wait the API has).
    let a = c.await_proof(&job_id, if args.wait { 0 } else { 1 })?;
    use pb::await_proof_response::Status as S;
    match S::try_from(a.status) {
        Ok(S::Completed) => {
            let bytes = split_proofs(&a.proof);
            match &args.out {
                Some(out) => {
                    super::prove::write_proof(out, &bytes)?;
                    println!("{}", out.display());
                }
                None => println!("{}", super::hex(&a.proof)),
            }
            eprintln!("job {job_id} done in {:.2}s", a.total_ms as f64 / 1000.0);
            Ok(ExitCode::SUCCESS)
        }
        Ok(S::Timeout) => {
            eprintln!("job {job_id} is queued\nhint: add --wait to wait for it");
            Ok(ExitCode::from(3))
        }
        _ => {
            eprintln!(
                "job {job_id} {}: {}",
                status_word(a.status),
                a.error_message
            );
            Ok(ExitCode::from(1))
        }
    }
}

/// `splitprover cancel`.
pub fn cancel(args: CancelArgs) -> anyhow::Result<ExitCode> {
    let mut c = tls_client(args.socket.as_deref(), &args.tls)?;
    let job_id = job_id_of(&args.job);
    let was_running = c.cancel(&job_id)?;
    let what = if was_running { "running" } else { "queued" };
    eprintln!("job {job_id} cancelled (it was {what})");
    Ok(ExitCode::SUCCESS)
}

/// `splitprover status`.
pub fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let mut c = tls_client(args.socket.as_deref(), &args.tls)?;
    let answer = c.status()?;
    let s: PipelineStatus = serde_json::from_str(&answer.pipeline_json)
        .context("the service's status has no pipeline part")?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", render_status(&s));
    let _ = api_lines(&answer);
    Ok(ExitCode::SUCCESS)
}

/// The API's SRS and queue lines and totals, under the pipeline's status.
fn api_lines(a: &pb::GetStatusResponse) -> std::fmt::Result {
    use std::fmt::Write as _;
    let mut o = String::new();
    for l in &a.loaded_srs {
        let tier = pb::srs_status::Tier::try_from(l.tier)
            .map(|t| t.as_str_name())
            .unwrap_or("?");
        writeln!(
            o,
            "srs:       {:<24} {:<4} {:>8} MiB, {} live jobs",
            l.circuit_id,
            tier,
            l.size_bytes >> 20,
            l.ref_count
        )?;
    }
    for q in &a.queues {
        writeln!(
            o,
            "queue:     {:<13} {} pending, {} in progress",
            q.proof_kind, q.pending, q.in_progress
        )?;
    }
    writeln!(
        o,
        "totals:    {} proofs completed, {} failed; up {} s",
        a.total_proofs_completed, a.total_proofs_failed, a.uptime_seconds
    )?;
    print!("{o}");
    Ok(())
}

/// The text form of a status.
pub fn render_status(s: &PipelineStatus) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(o, "pinning:   {}", s.pin_mode);
    let _ = writeln!(o, "ring:      {}, {}", s.ring_text(), s.ring_pages);
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
                "VRAM {} of {} MiB free{}{}{}",
                g.vram_free_bytes >> 20,
                g.vram_total_bytes >> 20,
                match g.srs_device_bytes {
                    0 => String::new(),
                    b => format!(", SRS resident {} MiB", b >> 20),
                },
                match g.srs_streamed_bytes {
                    0 => String::new(),
                    b => format!(
                        ", {} streamed from host memory per proof ({} so far)",
                        gib(b),
                        gib(g.srs_streamed_total_bytes)
                    ),
                },
                match g.device_budget_bytes {
                    0 => String::new(),
                    b => format!(
                        ", planned {} MiB of a {} MiB budget",
                        g.planned_device_bytes >> 20,
                        b >> 20
                    ),
                }
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
    for (circuit, plan) in &s.synthesis {
        let _ = writeln!(o, "synthesis: {circuit:<24} {plan}");
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

#[cfg(test)]
mod tests {
    use super::*;
    use launcher::pipeline::GpuLine;

    fn status_of(gpus: Vec<GpuLine>) -> PipelineStatus {
        PipelineStatus {
            ring_slots: 1,
            slot_bytes: 1 << 20,
            gpus,
            ..PipelineStatus::default()
        }
    }

    #[test]
    fn a_gpu_line_shows_its_budget_and_the_srs_streamed_only_when_some_is() {
        let one_gib = 1u64 << 30;
        let mut g = GpuLine {
            ordinal: 0,
            role: "gpu-proc[0]".into(),
            name: "NVIDIA H100".into(),
            vram_total_bytes: 80 * one_gib,
            vram_free_bytes: 60 * one_gib,
            srs_device_bytes: 8 * one_gib,
            planned_device_bytes: 20 * one_gib,
            device_budget_bytes: 22 * one_gib,
            ..GpuLine::default()
        };
        let resident = render_status(&status_of(vec![g.clone()]));
        assert!(
            resident.contains(
                "VRAM 61440 of 81920 MiB free, SRS resident 8192 MiB, \
                 planned 20480 MiB of a 22528 MiB budget; idle"
            ),
            "{resident}"
        );
        assert!(!resident.contains("streamed"), "{resident}");
        g.srs_streamed_bytes = 12 * one_gib;
        g.srs_streamed_total_bytes = 1_200 * one_gib;
        let streamed = render_status(&status_of(vec![g]));
        assert!(
            streamed.contains(
                ", SRS resident 8192 MiB, 12.00 GiB streamed from host memory per proof \
                 (1200.00 GiB so far), planned 20480 MiB"
            ),
            "{streamed}"
        );
    }
}
