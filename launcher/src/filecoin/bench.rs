//! `splitprover bench --filecoin porep:…`: PoRep C2 of a real sealed sector, in one run,
//! - `stock`: filecoin-proofs-api `seal_commit_phase2` (bellperson; this build links no fil GPU
//!   code, so it is its CPU path);
//! - `monolithic`: our synthesis then our backend (`--backend`), in process, one partition at a
//!   time (`kernels::filecoin::prove_job`);
//! - `split`: the split pipeline (synth-proc and gpu-proc as pinned processes), `-n` jobs with
//!   `-j` in flight;
//! - `api`: the cuzk gRPC API against the pipeline's own submit path, and WinningPoSt behind
//!   PoRep ([`super::api_bench`]).
//!
//! The sector is sealed first (PC1, PC2, C1 through filecoin-proofs-api, timed), its parameters
//! generated into the parameter cache with the fast generator if missing (timed). Every proof of
//! every mode is checked with `verify_seal`; a refused proof fails the bench.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use kernels::circuits::AnyCircuit;
use kernels::filecoin::{self, fixture, ParamFiles, ProofKind};

use super::api_bench::ApiFigures;
use crate::cli::BenchArgs;
use crate::pipeline::PipelineSettings;
use crate::report::{self, BenchRow};
use crate::timeline::Timeline;

/// What the Filecoin bench needs besides the pipeline settings.
pub struct FilecoinBench {
    /// The proof kind (PoRep only).
    pub kind: ProofKind,
    /// Modes: `stock`, `monolithic`, `split`.
    pub modes: Vec<String>,
    /// Proofs of the monolithic and split modes.
    pub proofs: usize,
    /// Runs of the stock prover.
    pub stock_runs: usize,
    /// Jobs in flight in the split mode.
    pub clients: usize,
    /// Parameter cache dir.
    pub param_cache: PathBuf,
    /// Where the sector is sealed (kept between runs: a sealed sector is reused).
    pub work_dir: PathBuf,
    /// Rounds each way of the `api` mode.
    pub api_rounds: usize,
    /// PoRep jobs queued ahead of the WinningPoSt in the `api` mode.
    pub api_queued: usize,
}

/// One measured mode.
pub struct FilecoinRow {
    /// The row as the other benches print it (wall, s/proof, ...).
    pub row: BenchRow,
    /// Every proof's latency, seconds.
    pub latencies: Vec<f64>,
}

/// Runs the bench and returns one row per mode, plus the timeline of the split run.
pub fn run(
    bench: &FilecoinBench,
    settings: PipelineSettings,
) -> anyhow::Result<(Vec<FilecoinRow>, Option<Timeline>, Option<ApiFigures>)> {
    let ProofKind::PoRep(proof) = bench.kind else {
        anyhow::bail!(
            "the Filecoin bench measures PoRep C2 (`porep:…`), not `{}`",
            bench.kind
        );
    };
    let kind = bench.kind;
    std::fs::create_dir_all(&bench.param_cache)?;
    let parents = bench.work_dir.join("parents");
    std::fs::create_dir_all(&parents)?;
    // filecoin-proofs reads its settings once per process: before any call. The children inherit
    // them.
    std::env::set_var(crate::env::FIL_PROOFS_PARAMETER_CACHE, &bench.param_cache);
    if std::env::var_os("FIL_PROOFS_PARENT_CACHE").is_none() {
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", &parents);
    }

    let t = Instant::now();
    let bar = crate::srs::GenBar::new(true);
    let (files, generated) =
        filecoin::ensure_parameters(kind, &bench.param_cache, 17, &|p| bar.update(p))?;
    bar.finish();
    eprintln!(
        "{kind}: parameters ready in {:.1} s (generated: {generated})",
        t.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    let sector = fixture::seal_sector(proof, &bench.work_dir.join("sector"), 4242, 11)
        .with_context(|| format!("sealing a {kind} sector"))?;
    eprintln!(
        "{kind}: sealed (PC1, PC2, C1) in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let c1_path = bench.work_dir.join("c1.json");
    std::fs::write(&c1_path, &sector.c1_json)?;
    let check = |what: &str, proof: &[u8]| -> anyhow::Result<()> {
        anyhow::ensure!(
            sector.verify(proof, None)?,
            "{what}: verify_seal refused the proof"
        );
        Ok(())
    };

    let mut rows = Vec::new();
    let has = |m: &str| bench.modes.iter().any(|x| x == m);
    if has("stock") {
        let mut lat = Vec::new();
        let started = Instant::now();
        for _ in 0..bench.stock_runs.max(1) {
            let t = Instant::now();
            let proof = sector.stock_c2()?;
            lat.push(t.elapsed().as_secs_f64());
            check("stock", &proof)?;
        }
        rows.push(plain_row(
            "filecoin-proofs seal_commit_phase2 (bellperson CPU)",
            "stock",
            started.elapsed(),
            lat,
        ));
    }
    if has("monolithic") {
        let backend = gpu_proc::open_backend_from_file(
            settings.gpus[0].backend,
            &files.params,
            files.circuit_id(),
            &kind.to_string(),
        )?;
        let job = filecoin::open_job(kind, &sector.c1_json)?;
        let mut lat = Vec::new();
        let started = Instant::now();
        for _ in 0..bench.proofs.max(1) {
            let t = Instant::now();
            let proof = filecoin::prove_job(&*job, backend.as_ref(), &mut rand::thread_rng())?;
            lat.push(t.elapsed().as_secs_f64());
            check("monolithic", &proof)?;
        }
        let cfg = format!("ours in process, {} backend", backend.name());
        rows.push(plain_row(&cfg, "monolithic", started.elapsed(), lat));
    }
    let mut api = None;
    if has("api") {
        api = Some(super::api_bench::run(
            settings.clone(),
            kind,
            &files.params,
            &sector,
            &bench.param_cache,
            &bench.work_dir,
            bench.proofs.max(1),
            bench.clients,
            bench.api_rounds,
            bench.api_queued,
        )?);
    }
    let mut timeline = None;
    if has("split") {
        let mut s = settings;
        s.circuits = vec![crate::pipeline::CircuitSetting {
            spec: AnyCircuit::Filecoin(kind),
            params: files.params.clone(),
        }];
        let pipeline = crate::pipeline::Pipeline::start(s)?;
        pipeline.wait_ready(Duration::from_secs(900))?;
        let status = pipeline.status();
        // One warm-up job (CUDA initialised, SRS loaded, request cache warm), not measured.
        let warm = pipeline
            .submit_request(Some(kind), None, &c1_path)?
            .wait()?;
        check(
            "split warm-up",
            &warm
                .result
                .map_err(|e| anyhow::anyhow!("warm-up job failed: {e}"))?
                .concat(),
        )?;
        let _ = pipeline.take_timeline();
        let bar = report::progress_bar(bench.proofs.max(1), "split");
        let started = Instant::now();
        // Closed-loop clients, `-j` of them: each submits a job, waits for it, checks it and
        // submits the next, so that one slow job holds back only its own client (a single loop
        // waiting in submission order starved the pipeline behind its oldest job).
        let total = bench.proofs.max(1);
        let next = std::sync::atomic::AtomicUsize::new(0);
        let lat = std::sync::Mutex::new(Vec::with_capacity(total));
        std::thread::scope(|scope| -> anyhow::Result<()> {
            let clients: Vec<_> = (0..bench.clients.clamp(1, total))
                .map(|_| {
                    scope.spawn(|| -> anyhow::Result<()> {
                        while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < total {
                            let o = pipeline
                                .submit_request(Some(kind), None, &c1_path)?
                                .wait()?;
                            let proofs = o
                                .result
                                .map_err(|e| anyhow::anyhow!("job {} failed: {e}", o.job_id))?;
                            check("split", &proofs.concat())?;
                            let mut lat = lat.lock().unwrap_or_else(|p| p.into_inner());
                            lat.push(o.elapsed.as_secs_f64());
                            bar.set_position(lat.len() as u64);
                        }
                        Ok(())
                    })
                })
                .collect();
            for c in clients {
                c.join()
                    .map_err(|_| anyhow::anyhow!("a bench client panicked"))??;
            }
            Ok(())
        })?;
        let lat = lat.into_inner().unwrap_or_else(|p| p.into_inner());
        bar.finish_and_clear();
        let wall = started.elapsed();
        let tl = Timeline::from_events(pipeline.take_timeline());
        pipeline.shutdown();
        let synth = status.children.iter().find(|c| c.role == "synth-proc");
        let gpu = status
            .children
            .iter()
            .find(|c| c.role.starts_with("gpu-proc"));
        let cfg = format!(
            "synth cpus {} / gpu cpus {}, -j {}",
            synth.and_then(|c| c.cpus.clone()).unwrap_or_default(),
            gpu.and_then(|c| c.cpus.clone()).unwrap_or_default(),
            bench.clients
        );
        let stats = report::TimelineStats::from_timeline(&tl);
        let mut row = BenchRow::from_stats(&cfg, "split", &stats);
        // The pipeline's wall is the clients' (warm-up excluded).
        row.wall_s = wall.as_secs_f64();
        row.s_per_proof = Some(wall.as_secs_f64() / lat.len() as f64);
        row.proofs_per_s = Some(lat.len() as f64 / wall.as_secs_f64());
        row.proofs_per_min = row.proofs_per_s.map(|p| p * 60.0);
        rows.push(FilecoinRow {
            row,
            latencies: lat,
        });
        timeline = Some(tl);
    }
    Ok((rows, timeline, api))
}

fn plain_row(config: &str, mode: &str, wall: Duration, latencies: Vec<f64>) -> FilecoinRow {
    let n = latencies.len();
    let wall_s = wall.as_secs_f64();
    let mut row = BenchRow::from_stats(
        config,
        mode,
        &report::TimelineStats::from_timeline(&Timeline::from_events(Vec::new())),
    );
    row.proofs = n;
    row.wall_s = wall_s;
    row.s_per_proof = Some(wall_s / n as f64);
    row.proofs_per_s = Some(n as f64 / wall_s);
    row.proofs_per_min = Some(60.0 * n as f64 / wall_s);
    FilecoinRow { row, latencies }
}

/// The latency line of a row: min / median / max seconds.
pub fn latency_line(latencies: &[f64]) -> String {
    let mut v = latencies.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => "-".into(),
        n => format!("{:.2} / {:.2} / {:.2} s", v[0], v[n / 2], v[n - 1]),
    }
}

/// Whether `path` looks like a parameter cache holding `kind` (for messages).
pub fn describe_cache(kind: ProofKind, dir: &Path) -> String {
    match ParamFiles::for_kind(kind, dir) {
        Ok(f) if f.params.is_file() => format!("{} (present)", f.params.display()),
        Ok(f) => format!("{} (to generate)", f.params.display()),
        Err(e) => e.to_string(),
    }
}

/// `splitprover bench --filecoin KIND`: the Filecoin PoRep C2 bench.
pub fn run_command(args: &BenchArgs, kind: &str) -> anyhow::Result<ExitCode> {
    let kind: kernels::filecoin::ProofKind = kind
        .parse()
        .with_context(|| format!("--filecoin `{kind}`"))?;
    let modes: Vec<String> = args
        .filecoin_modes
        .split(',')
        .map(|m| m.trim().to_owned())
        .collect();
    for m in &modes {
        anyhow::ensure!(
            matches!(m.as_str(), "stock" | "monolithic" | "split" | "api"),
            "unknown mode `{m}`: use stock, monolithic, split, api"
        );
    }
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("cannot create `{}`", args.out_dir.display()))?;
    let bench = FilecoinBench {
        kind,
        modes,
        proofs: args.proofs,
        stock_runs: args.stock_runs,
        clients: args.clients,
        param_cache: args
            .param_cache
            .clone()
            .unwrap_or_else(crate::env::param_cache_dir),
        work_dir: args.out_dir.join("filecoin-work"),
        api_rounds: args.api_rounds,
        api_queued: args.api_queued,
    };
    eprintln!("parameters: {}", describe_cache(kind, &bench.param_cache));
    // The pipeline's settings; its circuit is set by the bench once the parameters exist.
    let placeholder = kernels::circuits::AnyCircuit::Filecoin(kind);
    let settings = crate::commands::settings_for(&args.pipeline, placeholder, PathBuf::new())?;
    let (rows, timeline, api) = run(&bench, settings)?;
    let table: Vec<BenchRow> = rows.iter().map(|r| r.row.clone()).collect();
    println!("{kind}");
    println!("{}", report::render_table(&table));
    for r in &rows {
        println!(
            "  {:<11} latency min / median / max: {}",
            r.row.mode,
            latency_line(&r.latencies)
        );
    }
    let per = |m: &str| {
        rows.iter()
            .find(|r| r.row.mode == m)
            .and_then(|r| r.row.s_per_proof)
    };
    if let Some(stock) = per("stock") {
        for m in ["monolithic", "split"] {
            if let Some(x) = per(m) {
                println!("  stock / {m} time per proof = {:.2}x", stock / x);
            }
        }
    }
    if let Some(tl) = timeline {
        let base = args.out_dir.join(format!(
            "filecoin-split-{}",
            kind.to_string().replace(':', "-")
        ));
        let mut log = Vec::new();
        tl.write_log(&mut log)?;
        std::fs::write(base.with_extension("timeline"), log)?;
        std::fs::write(base.with_extension("svg"), tl.waterfall_svg())?;
    }
    if let Some(api) = &api {
        println!("gRPC API against the local path (one pipeline, alternating rounds)");
        print!("{}", api.render());
        std::fs::write(args.out_dir.join("bench-filecoin-api.txt"), api.render())?;
    }
    let path = args.out_dir.join("bench-filecoin.json");
    std::fs::write(
        &path,
        serde_json::to_vec_pretty(&report::rows_to_json(&table))?,
    )?;
    eprintln!("wrote {}", path.display());
    Ok(ExitCode::SUCCESS)
}
