//! `splitprover bench --filecoin KIND`: a real Filecoin proof, in one run, every way we have:
//! - `stock`: filecoin-proofs-api `seal_commit_phase2` (bellperson; this build links no fil GPU
//!   code, so it is its CPU path); PoRep only;
//! - `monolithic`: ours one at a time: each partition synthesized, then proved by our backend
//!   (`--backend`), in this process ([`local::run_monolithic`], batch 1);
//! - `inprocess`, `split`, `gpu-only`: the isolation sweep ([`crate::sweep`]): the
//!   in-process pipeline and the split pipeline on the same cores, over the sweep's layouts,
//!   synthesis and client concurrencies and neighbour states, each start's GPU-only capacity the
//!   baseline of its GPU time column;
//! - `api`: the cuzk gRPC API against the pipeline's own submit path, and WinningPoSt behind
//!   PoRep ([`super::api_bench`]); PoRep only.
//!
//! The request is made first, as the Filecoin tests make theirs (`kernels::filecoin::fixture`):
//! PoRep: a sector sealed (PC1, PC2, C1 through filecoin-proofs-api), its C1 output, or read
//! back from the record an earlier run left in `OUT_DIR/filecoin-work/sector/`
//! (`fixture::seal_sector_once`; a record made on another machine can be put there); above
//! 512 MiB without a record (sealing would take hours), a sparse CC sector's C1
//! (`fixture::sparse_cc_sector`: only the challenged nodes computed; it has no replica, so the
//! `api` mode, which proves WinningPoSt over the replica, refuses it); PoSt: a
//! sector of the same size sealed, the PoSt request over it (WindowPoSt: one partition);
//! SnapDeals: a CC sector sealed and updated with random data, the update request. Its
//! parameters are generated into the parameter cache with the fast generator if missing. Every
//! proof of every mode is checked with filecoin-proofs' own verifier (`verify_seal`,
//! `verify_winning_post` / `verify_window_post`, `verify_empty_sector_update_proof`); a refused
//! proof fails the bench.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use kernels::circuits::AnyCircuit;
use kernels::filecoin::{self, fixture, ParamFiles, ProofKind, RegisteredSealProof};
use kernels::Backend;
use launcher::api::curio;
use launcher::pinning::CpuList;

use crate::commands::bench::{
    finish, job_spans, plain_row, sweep_plan, write_run_files, BenchArgs,
};
use crate::layout::Topology;
use crate::local;
use crate::report::{self, SweepReport, SweepRow};
use crate::sweep::{self, Mode};
use crate::synthesis::Synthesizer;
use crate::timeline::Timeline;
use crate::workload::{proof_bytes, Verifier, Workload};

/// The modes `--filecoin-modes` takes.
pub const MODES: [&str; 6] = [
    "stock",
    "monolithic",
    "inprocess",
    "split",
    "gpu-only",
    "api",
];

/// A request of the bench and what checks its proofs.
pub struct Request {
    /// The request bytes (a C1 output, a PoSt or SnapDeals request as JSON).
    pub bytes: Vec<u8>,
    /// filecoin-proofs' verifier for it.
    pub verify: Verifier,
    /// The sealed sector of a PoRep request (what `stock` and `api` need).
    pub sector: Option<fixture::SealedSector>,
    /// What was made, in words.
    pub what: String,
}

/// The interactive seal proof (`…V1_1`) of a sector size: the sector a PoSt or an update is
/// made over.
fn seal_proof_for(sector_size: u64) -> anyhow::Result<RegisteredSealProof> {
    (0..20)
        .filter_map(|n| curio::seal_proof(n).ok())
        .find(|p| {
            let kind = ProofKind::PoRep(*p);
            kind.sector_size() == sector_size && kind.to_string().ends_with("V1_1")
        })
        .with_context(|| format!("no seal proof of a {sector_size}-byte sector"))
}

/// PoRep sectors larger than this (bytes) are not sealed by the bench: without a sector record,
/// their C1 output is a sparse CC sector's (`fixture::sparse_cc_sector`).
const SPARSE_ABOVE: u64 = 512 << 20;

/// Makes a request of `kind` in `work` (sectors sealed there), as the Filecoin tests do.
pub fn make_request(kind: ProofKind, work: &Path) -> anyhow::Result<Request> {
    let t = Instant::now();
    let req = match kind {
        ProofKind::PoRep(proof) => {
            let dir = work.join("sector");
            let record = fixture::sector_record_path(&dir, 4242);
            // sealing above 512 MiB takes hours: without a record, a sparse CC sector's C1
            let sparse = !record.exists() && kind.sector_size() > SPARSE_ABOVE;
            let (sector, sealed) = if sparse {
                let s = fixture::sparse_cc_sector(proof, 4242, 11)
                    .with_context(|| format!("making a sparse {kind} C1 output"))?;
                (s, false)
            } else {
                fixture::seal_sector_once(proof, &dir, 4242, 11)
                    .with_context(|| format!("sealing a {kind} sector"))?
            };
            let check = sector.clone();
            Request {
                bytes: sector.c1_json.clone(),
                verify: Box::new(move |p: &[u8]| -> anyhow::Result<bool> {
                    Ok(check.verify(p, None)?)
                }),
                sector: Some(sector),
                what: if sparse {
                    format!(
                        "sparse CC sector's C1 made without sealing (no record `{}`; sealing \
                         this size takes hours)",
                        record.display()
                    )
                } else if sealed {
                    "sector sealed (PC1, PC2, C1)".into()
                } else {
                    format!(
                        "sector read from its record `{}` (sealed before)",
                        fixture::sector_record_path(&dir, 4242).display()
                    )
                },
            }
        }
        ProofKind::PoSt(proof) => {
            let seal = seal_proof_for(kind.sector_size())?;
            let sector = fixture::seal_sector(seal, &work.join("post-sector"), 4300, 12)
                .with_context(|| format!("sealing a {} sector", ProofKind::PoRep(seal)))?;
            let post = fixture::post_request(proof, &[sector], fixture::randomness(21))
                .with_context(|| format!("making a {kind} request"))?;
            let partitions = post.partitions()?;
            Request {
                bytes: post.json.clone(),
                what: format!(
                    "sector sealed, PoSt request made ({partitions} partition{})",
                    if partitions == 1 { "" } else { "s" }
                ),
                verify: Box::new(move |p: &[u8]| -> anyhow::Result<bool> { Ok(post.verify(p)?) }),
                sector: None,
            }
        }
        ProofKind::SnapDeals(proof) => {
            let seal = seal_proof_for(kind.sector_size())?;
            let cc = fixture::seal_cc_sector(seal, &work.join("snap-sector"), 4400, 13)
                .with_context(|| format!("sealing a {} CC sector", ProofKind::PoRep(seal)))?;
            let snap = fixture::snap_request(proof, &cc, &work.join("snap-update"), 23)
                .with_context(|| format!("making a {kind} request"))?;
            let partitions = snap.partitions();
            Request {
                bytes: snap.json.clone(),
                what: format!(
                    "CC sector sealed and updated ({partitions} partition{})",
                    if partitions == 1 { "" } else { "s" }
                ),
                verify: Box::new(move |p: &[u8]| -> anyhow::Result<bool> { Ok(snap.verify(p)?) }),
                sector: None,
            }
        }
    };
    eprintln!("{kind}: {} in {:.1} s", req.what, t.elapsed().as_secs_f64());
    Ok(req)
}

/// Whether `path` looks like a parameter cache holding `kind` (for messages).
pub fn describe_cache(kind: ProofKind, dir: &Path) -> String {
    match ParamFiles::for_kind(kind, dir) {
        Ok(f) if f.params.is_file() => format!("{} (present)", f.params.display()),
        Ok(f) => format!("{} (to generate)", f.params.display()),
        Err(e) => e.to_string(),
    }
}

/// The request bytes of a Filecoin `circuit`, made in `work` as [`make_request`] makes them
/// (for `splitprover synth-bench`); filecoin-proofs' parent cache goes there too unless set.
pub fn request_bytes(circuit: &AnyCircuit, work: &Path) -> anyhow::Result<Vec<u8>> {
    let kind = circuit
        .filecoin()
        .with_context(|| format!("`{circuit}` is not a Filecoin proof kind"))?;
    let parents = work.join("parents");
    std::fs::create_dir_all(&parents)?;
    if std::env::var_os("FIL_PROOFS_PARENT_CACHE").is_none() {
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", &parents);
    }
    Ok(make_request(kind, work)?.bytes)
}

/// `splitprover bench --filecoin KIND`.
pub fn run_command(args: &BenchArgs, kind: &str) -> anyhow::Result<ExitCode> {
    let kind: ProofKind = kind
        .parse()
        .with_context(|| format!("--filecoin `{kind}`"))?;
    let (modes, mut notes) = parse_modes(&args.filecoin_modes, kind)?;
    let has = |m: &str| modes.iter().any(|x| x == m);
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("cannot create `{}`", args.out_dir.display()))?;
    let param_cache = args
        .param_cache
        .clone()
        .unwrap_or_else(launcher::env::param_cache_dir);
    let work_dir = args.out_dir.join("filecoin-work");
    let files = prepare_parameters(kind, &param_cache, &work_dir)?;
    let request = make_request(kind, &work_dir)?;
    let sector = request.sector.clone();
    let circuit = AnyCircuit::Filecoin(kind);
    let workload = Workload::fixed(
        circuit,
        &files.params,
        kind.to_string(),
        request.bytes,
        request.verify,
    )?;
    let settings = launcher::settings::for_circuit(&args.pipeline, circuit, files.params.clone())?;
    // How the in-process modes synthesize: as the split pipeline does, the matrices got ready
    // now, outside any timed run.
    let synthesis = Synthesizer::new(&settings.synthesis, &circuit);
    let n = args.proofs.max(1);
    let topology = Topology::read(&CpuList::allowed()?);
    let mut sweep_modes = Vec::new();
    if has("inprocess") {
        sweep_modes.push(Mode::InProcess);
    }
    if has("split") || has("gpu-only") {
        sweep_modes.push(Mode::Split);
    }
    let (mut plan, layout_notes) = sweep_plan(
        args,
        sweep_modes,
        has("gpu-only"),
        settings.gpus.len(),
        &topology,
        &args.out_dir,
    )?;
    if !has("split") {
        plan.capacity_only.push(Mode::Split);
    }
    notes.extend(layout_notes);
    let mut rows = Vec::new();
    let mut extra = Vec::new();

    if let (true, Some(sector)) = (has("stock"), &sector) {
        rows.push(stock_row(sector, &workload, args.stock_runs)?);
    }
    let backend = if has("monolithic") || has("inprocess") {
        Some(gpu_proc::open_backend_from_file(
            args.pipeline.backend,
            &files.params,
            files.circuit_id(),
            &kind.to_string(),
        )?)
    } else {
        None
    };
    if let (true, Some(backend)) = (has("monolithic"), &backend) {
        let n = args.monolithic_proofs.unwrap_or(n).max(1);
        rows.push(monolithic_row(
            backend.as_ref(),
            &synthesis,
            &workload,
            n,
            &args.out_dir,
        )?);
    }
    if !plan.modes.is_empty() {
        let (sweep_rows, sweep_notes) =
            sweep::run(&plan, &settings, &workload, backend.as_deref(), &synthesis)?;
        rows.extend(sweep_rows);
        notes.extend(sweep_notes);
    }
    drop(backend);
    if let (true, Some(sector)) = (has("api"), &sector) {
        let api = super::api_bench::run(
            settings.clone(),
            kind,
            &files.params,
            sector,
            &param_cache,
            &work_dir,
            n,
            args.clients,
            args.api_rounds,
            args.api_queued,
        )?;
        extra.push("gRPC API against the local path (one pipeline, alternating rounds)".into());
        extra.push(api.render());
        std::fs::write(args.out_dir.join("bench-filecoin-api.txt"), api.render())?;
    }
    extra.extend(stock_ratios(&rows));
    let report = SweepReport {
        workload: kind.to_string(),
        backend: args.pipeline.backend.to_string(),
        machine: topology.describe(),
        rows,
        notes,
        ..Default::default()
    };
    finish(
        &args.out_dir,
        "bench-filecoin.json",
        report,
        args.pipeline.batch.max(1),
        &extra,
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `--filecoin-modes` checked, and the notes on modes that do not apply to `kind`.
fn parse_modes(text: &str, kind: ProofKind) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let modes: Vec<String> = text.split(',').map(|m| m.trim().to_owned()).collect();
    for m in &modes {
        anyhow::ensure!(
            MODES.contains(&m.as_str()),
            "unknown mode `{m}`: use {}",
            MODES.join(", ")
        );
    }
    let porep = matches!(kind, ProofKind::PoRep(_));
    let mut notes = Vec::new();
    for m in ["stock", "api"] {
        if modes.iter().any(|x| x == m) && !porep {
            notes.push(format!(
                "mode `{m}` measures PoRep only: skipped for `{kind}`"
            ));
        }
    }
    Ok((modes, notes))
}

/// The parameter cache and filecoin-proofs' settings (set before any call, inherited by the
/// children), then `kind`'s parameters, generated if missing.
fn prepare_parameters(
    kind: ProofKind,
    param_cache: &Path,
    work_dir: &Path,
) -> anyhow::Result<ParamFiles> {
    eprintln!("parameters: {}", describe_cache(kind, param_cache));
    std::fs::create_dir_all(param_cache)?;
    let parents = work_dir.join("parents");
    std::fs::create_dir_all(&parents)?;
    // filecoin-proofs reads its settings once per process: before any call. The children
    // inherit them.
    std::env::set_var(launcher::env::FIL_PROOFS_PARAMETER_CACHE, param_cache);
    if std::env::var_os("FIL_PROOFS_PARENT_CACHE").is_none() {
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", &parents);
    }
    let t = Instant::now();
    let bar = launcher::srs::GenBar::new(true);
    let (files, generated) =
        filecoin::ensure_parameters(kind, param_cache, 17, &|p| bar.update(p))?;
    bar.finish();
    eprintln!(
        "{kind}: parameters ready in {:.1} s (generated: {generated})",
        t.elapsed().as_secs_f64()
    );
    Ok(files)
}

/// `stock`: filecoin-proofs' own `seal_commit_phase2`, `runs` times, every proof checked.
fn stock_row(
    sector: &fixture::SealedSector,
    workload: &Workload,
    runs: usize,
) -> anyhow::Result<SweepRow> {
    let mut lat = Vec::new();
    let started = Instant::now();
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let proof = sector.stock_c2()?;
        lat.push(t.elapsed().as_secs_f64());
        workload
            .verify(
                0,
                &proof
                    .chunks(filecoin::PARTITION_PROOF_LEN)
                    .map(<[u8]>::to_vec)
                    .collect::<Vec<_>>(),
            )
            .context("stock")?;
    }
    plain_row(
        "filecoin-proofs seal_commit_phase2 (bellperson CPU)",
        "stock",
        &Timeline::new(),
        Some(started.elapsed().as_secs_f64()),
        &lat,
        false,
    )
}

/// `monolithic`: the request opened once and proved `n` times, one partition at a time, every
/// proof checked; its timeline written beside the report.
fn monolithic_row(
    backend: &dyn Backend,
    synthesis: &Synthesizer,
    workload: &Workload,
    n: usize,
    out_dir: &Path,
) -> anyhow::Result<SweepRow> {
    let job = workload.open(0)?;
    let jobs: Vec<Arc<dyn kernels::job::Job>> = vec![job; n];
    let bar = report::progress_bar(n * workload.partitions(), "monolithic");
    let run = local::run_monolithic(backend, synthesis, &jobs, 1, &|d| {
        bar.set_position(d as u64)
    })?;
    bar.finish_and_clear();
    for (j, _) in jobs.iter().enumerate() {
        let proofs = run
            .proofs
            .iter()
            .filter(|p| p.job == j)
            .map(|p| proof_bytes(&p.proof))
            .collect::<anyhow::Result<Vec<_>>>()?;
        workload.verify(j as u64, &proofs).context("monolithic")?;
    }
    let spans = job_spans(&run.timeline);
    let wall = run.timeline.first_ns().zip(run.timeline.last_ns());
    let config = format!("ours one at a time, {} backend", backend.name());
    let mut r = plain_row(
        &config,
        "monolithic",
        &run.timeline,
        wall.map(|(a, b)| (b - a) as f64 / 1e9),
        &spans,
        false,
    )?;
    r.timeline = Some(write_run_files(
        out_dir,
        "monolithic",
        &config,
        &run.timeline,
    )?);
    Ok(r)
}

/// The stock row's time per proof against each of ours.
fn stock_ratios(rows: &[SweepRow]) -> Vec<String> {
    let Some(stock) = rows
        .iter()
        .find(|r| r.row.mode == "stock")
        .and_then(|r| r.row.s_per_proof)
    else {
        return Vec::new();
    };
    rows.iter()
        .filter(|r| r.row.mode != "stock" && r.clients > 0)
        .filter_map(|r| {
            let x = r.row.s_per_proof?;
            Some(format!(
                "stock / {}{} time per proof = {:.2}x",
                r.row.mode,
                if r.row.mode == "monolithic" {
                    String::new()
                } else {
                    format!(
                        " ({}, -j {}{})",
                        r.layout,
                        r.clients,
                        if r.neighbour { ", hog" } else { "" }
                    )
                },
                stock / x
            ))
        })
        .collect()
}
