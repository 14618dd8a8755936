//! `splitprover run`, `submit`, `fetch`, `cancel` and `status`: the long-lived service and its
//! clients.
//!
//! `run` is a thin caller of the library's lifecycle (`launcher::service::lifecycle`:
//! [`Starter`], `Running`): it loads and resolves the config, starts the service, turns SIGTERM and SIGINT
//! into its stop flag, and exits 0 after a stop, 1 when the pipeline could not go on (so that
//! systemd, `Restart=on-failure`, starts it again). The other commands are clients of the API.

use std::process::ExitCode;

use anyhow::Context;
use launcher::api::access::ClientTls;
use launcher::api::client::Client;
use launcher::api::{pb, Endpoint};
use launcher::config::Config;
use launcher::journal;
use launcher::pipeline::memory::gib;
use launcher::pipeline::PipelineStatus;
use launcher::service::lifecycle::{Exit, Starter};
use shm_protocol::layout::PROOF_BYTES;

use crate::cli::{CancelArgs, FetchArgs, RunArgs, StatusArgs, SubmitArgs, TlsArgs};

/// `splitprover run`.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let config = Config::load(&args.config)?;
    // Listen settings and the journal are checked before minutes of SRS loading.
    let service = launcher::settings::service(&config).map_err(|e| e.in_file(&args.config))?;
    let starter = Starter::open(service)?;
    let running = starter.start(launcher::settings::from_config(&config)?)?;
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, running.stop_flag())
            .context("cannot install signal handlers")?;
    }
    Ok(match running.serve()? {
        Exit::Stopped => ExitCode::SUCCESS,
        Exit::Fatal(_) => ExitCode::FAILURE,
    })
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
        Some(file) => send(&mut c, file_request(&args, file)?, 0)?,
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

/// The submission of a request file: its proof kind found from its bytes (or the flags), in
/// Curio's form with `--curio-miner-id`.
fn file_request(
    args: &SubmitArgs,
    file: &std::path::Path,
) -> anyhow::Result<pb::SubmitProofRequest> {
    anyhow::ensure!(
        args.jobs == 1,
        "--jobs applies to built-in circuits; send one request file per job"
    );
    let bytes = launcher::request_file::read(
        file,
        launcher::pipeline::FaultSettings::default().max_request_bytes,
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
    Ok(match curio_miner {
        #[cfg(feature = "filecoin")]
        Some(miner) => super::curio::porep_request(bytes, kind, miner, args.request_id.clone())?,
        _ => pb::SubmitProofRequest {
            request_id: args.request_id.clone().unwrap_or_default(),
            priority: args.priority as i32,
            circuit: kernels::circuits::AnyCircuit::Filecoin(kind).to_string(),
            request: bytes,
            ..Default::default()
        },
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
