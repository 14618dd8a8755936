//! `splitprover run`, `submit` and `status`: the long-lived service and its local clients.
//!
//! The transport is a Unix stream socket with one JSON object per line (`crate::protocol`:
//! [`Request`] in, [`Response`] out); the job core ([`Pipeline`]) knows nothing about it, so
//! another transport (gRPC) can sit beside it.

use std::io::{BufRead, BufReader};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use anyhow::Context;

use crate::cli::{RunArgs, StatusArgs, SubmitArgs};
use crate::config::Config;
use crate::notify::Notifier;
use crate::pipeline::{JobHandle, Pipeline, PipelineStatus};
use crate::protocol::{hex, unhex, write_line, Client, Request, Response};

/// `splitprover run`.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let settings = super::settings::from_config(&config)?;
    let pipeline = Arc::new(Pipeline::start(settings)?);
    pipeline.wait_ready(Duration::from_secs(600))?;
    let socket = config.socket.clone();
    let listener = bind(&socket)?;
    let notifier = Notifier::from_env().unwrap_or_else(|e| {
        tracing::warn!("systemd notify unavailable: {e}");
        Notifier::disabled()
    });
    let status = pipeline.status();
    let _ = notifier.ready();
    let _ = notifier.status(&format!(
        "serving on {}; pinning {}; ring {}",
        socket.display(),
        status.pin_mode,
        status.ring_pages
    ));
    tracing::info!(socket = %socket.display(), "service ready");
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }
    if let Ok(Some(interval)) = crate::notify::watchdog_interval() {
        let (pipeline, stop) = (pipeline.clone(), stop.clone());
        let notifier = Notifier::from_env().unwrap_or_else(|_| Notifier::disabled());
        thread::spawn(move || {
            // Ping at half the interval while the pipeline can still prove.
            while !stop.load(Ordering::Acquire) {
                // plain flag
                if pipeline.status().fatal.is_none() {
                    let _ = notifier.watchdog();
                }
                thread::sleep(interval / 2);
            }
        });
    }
    listener.set_nonblocking(true)?;
    while !stop.load(Ordering::Acquire) {
        // plain flag
        match listener.accept() {
            Ok((conn, _)) => {
                let pipeline = pipeline.clone();
                thread::spawn(move || {
                    if let Err(e) = serve_client(&pipeline, conn) {
                        tracing::debug!("client: {e:#}");
                    }
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(50))
            }
            Err(e) => return Err(e).context("accepting a client"),
        }
    }
    tracing::info!("stopping");
    let _ = notifier.stopping();
    let _ = std::fs::remove_file(&socket);
    match Arc::try_unwrap(pipeline) {
        Ok(p) => p.shutdown(),
        Err(p) => drop(p),
    }
    Ok(ExitCode::SUCCESS)
}

fn bind(socket: &Path) -> anyhow::Result<UnixListener> {
    if let Some(dir) = socket.parent() {
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
    UnixListener::bind(socket).with_context(|| format!("cannot listen on `{}`", socket.display()))
}

fn serve_client(pipeline: &Pipeline, conn: UnixStream) -> anyhow::Result<()> {
    conn.set_nonblocking(false)?;
    let mut out = conn.try_clone()?;
    for line in BufReader::new(conn).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let request: Request = match serde_json::from_str(&line) {
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
        match request {
            Request::Status => {
                write_line(&mut out, &Response::Status(Box::new(pipeline.status())))?
            }
            Request::Submit {
                circuit,
                seed,
                partitions,
                wait,
            } => answer_job(
                &mut out,
                pipeline
                    .submit(&circuit, seed, partitions)
                    .map_err(Into::into),
                wait,
            )?,
            Request::SubmitRequest {
                path,
                kind,
                family,
                wait,
            } => answer_job(
                &mut out,
                super::request_choice(kind.as_deref(), family.as_deref())
                    .and_then(|(kind, family)| Ok(pipeline.submit_request(kind, family, &path)?)),
                wait,
            )?,
        }
    }
    Ok(())
}

/// Answers a submission: accepted (then, with `wait`, the outcome) or the refusal.
fn answer_job(
    out: &mut UnixStream,
    handle: anyhow::Result<JobHandle>,
    wait: bool,
) -> anyhow::Result<()> {
    let handle = match handle {
        Err(e) => {
            return Ok(write_line(
                out,
                &Response::Error {
                    message: format!("{e:#}"),
                },
            )?)
        }
        Ok(h) => h,
    };
    write_line(out, &Response::Accepted { job_id: handle.id })?;
    if wait {
        let o = handle.wait()?;
        let (proofs, error) = match o.result {
            Ok(p) => (p.iter().map(|b| hex(b)).collect(), None),
            Err(e) => (Vec::new(), Some(e)),
        };
        write_line(
            out,
            &Response::Finished {
                job_id: o.job_id,
                proofs,
                error,
                elapsed_ms: o.elapsed.as_millis() as u64,
            },
        )?;
    }
    Ok(())
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
                })?;
                clients.push(accepted(c, seed)?);
            }
        }
    }
    if !wait {
        return Ok(ExitCode::SUCCESS);
    }
    let mut failed = 0;
    for (mut c, seed) in clients {
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
fn accepted(mut c: Client, seed: u64) -> anyhow::Result<(Client, u64)> {
    match c.recv()? {
        Response::Accepted { job_id } => {
            eprintln!("job {job_id} accepted");
            Ok((c, seed))
        }
        Response::Error { message } => anyhow::bail!("refused: {message}"),
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
    let k = &s.counters;
    let _ = writeln!(
        o,
        "jobs:      {} live, {} submitted, {} succeeded, {} failed; {} syntheses, {} slots re-queued after crashes",
        s.jobs.len(),
        k.submitted,
        k.succeeded,
        k.failed,
        k.syntheses_requested,
        k.slots_requeued
    );
    for j in &s.jobs {
        let _ = writeln!(
            o,
            "  job {:<6} {:<16} {}/{} done, {} in ring",
            j.job_id, j.circuit, j.done, j.partitions, j.in_ring
        );
    }
    if let Some(f) = &s.fatal {
        let _ = writeln!(o, "FATAL: {f}");
    }
    o
}
