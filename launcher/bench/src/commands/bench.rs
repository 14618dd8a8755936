//! `splitprover bench`: monolithic, in-process and split proving of the same circuit with the same
//! kernels on the same machine, plus the two capacities alone, in one invocation; and the
//! isolation sweep ([`crate::sweep`]): cpuset layouts, synthesis and client concurrency,
//! with and without a noisy neighbour, for the in-process and split pipelines. Prints the table,
//! the ratios and the recommended `[cpus]` layout; writes `sweep.json` (rendered by
//! `splitprover report`, which the bench runs at its end), `bench.json` (the rows as the older
//! table), and the TIMELINE log, a Chrome/Perfetto trace and an SVG waterfall per run.
//!
//! The Filecoin bench (`--filecoin`, `crate::filecoin::bench`) uses the same sweep through
//! [`sweep_plan`] and [`finish`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use launcher::args::PipelineArgs;
use launcher::pinning::CpuList;

use crate::layout::{self, Smt, Topology};
use crate::local;
use crate::report::{self, BenchRow, SweepReport, SweepRow, TimelineStats};
use crate::sweep::{self, Mode, SweepPlan};
use crate::synthesis::Synthesizer;
use crate::timeline::Timeline;
use crate::workload::{proof_bytes, Workload};

/// `splitprover bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Circuit spec.
    #[arg(long, default_value = "sha-chain:1")]
    pub circuit: String,
    /// Proofs per mode.
    #[arg(short = 'n', long, default_value_t = 6)]
    pub proofs: usize,
    /// Jobs of the monolithic and synthesis-only modes (default: -n); they take a job at a
    /// time, so a few are enough.
    #[arg(long)]
    pub monolithic_proofs: Option<usize>,
    /// Jobs of each GPU-only capacity run (every partition needs its own ring slot; default:
    /// min(-n, 48)).
    #[arg(long)]
    pub gpu_only_proofs: Option<usize>,
    /// Client concurrency: jobs in flight in the in-process and split modes (closed-loop
    /// clients).
    #[arg(short = 'j', long, default_value_t = 4)]
    pub clients: usize,
    /// Modes to run, comma separated: monolithic, inprocess, split, synth-only, gpu-only.
    #[arg(long, default_value = "monolithic,inprocess,split,synth-only,gpu-only")]
    pub modes: String,
    /// Sweep: gpu-proc core counts, comma separated (default: --gpu-cores); each is a layout
    /// (the in-process mode gets the same cpus in all: synth-proc's and the gpu-procs').
    #[arg(long)]
    pub sweep_gpu_cores: Option<String>,
    /// Sweep: synthesis concurrencies (synth-proc's workers, the in-process synthesis threads),
    /// comma separated; 0 is one per synthesis cpu (default: --synth-concurrency).
    #[arg(long)]
    pub sweep_synth: Option<String>,
    /// Sweep: client concurrencies, jobs in flight, comma separated (default: -j); one started
    /// pipeline serves every level.
    #[arg(long)]
    pub sweep_clients: Option<String>,
    /// Sweep: where the gpu-procs' cpus sit on the SMT siblings, comma separated: `auto` (the
    /// top cpus), `together` (whole physical cores), `apart` (one sibling of each core, the
    /// other synthesizes). Read from sysfs; without SMT only `auto` is measured.
    #[arg(long, default_value = "auto")]
    pub sweep_smt: String,
    /// The noisy neighbour: `off`, `on`, or `both` (every level without, then with, a
    /// memory-bandwidth and cache hog on the synthesis cpus, started and killed by the bench).
    #[arg(long, default_value = "off")]
    pub noisy_neighbour: String,
    /// MiB each hog thread streams over (default: together twice the last-level cache, at
    /// least 64 each).
    #[arg(long)]
    pub hog_mib: Option<usize>,
    /// The hog's cpus (default: each layout's synthesis cpus).
    #[arg(long)]
    pub hog_cpus: Option<String>,
    /// Jobs per client of a sweep level: a level with `c` jobs in flight proves
    /// `min(-n, per-client × c)` jobs; 0: `-n` at every level.
    #[arg(long, default_value_t = 0)]
    pub per_client: usize,
    /// Unmeasured jobs at each start of a pipeline (in-process or split) before its rows.
    #[arg(long, default_value_t = 1)]
    pub warm_up: usize,
    /// Where to write TIMELINE logs, traces, waterfalls and the table as JSON.
    #[arg(long, default_value = "bench-out")]
    pub out_dir: PathBuf,
    /// SRS file (default: the cache, generated if missing).
    #[arg(long)]
    pub srs: Option<PathBuf>,
    /// A Filecoin proof instead of a built-in circuit: PoRep C2 (`porep:StackedDrg2KiBV1_1`,
    /// `porep:StackedDrg512MiBV1_1`), WinningPoSt / WindowPoSt
    /// (`post:StackedDrgWindow2KiBV1_2`), SnapDeals (`snap:StackedDrg2KiBV1`): the sectors and
    /// the request are made as the Filecoin tests make them, parameters generated if missing,
    /// and `--filecoin-modes` measured in one run.
    #[cfg(feature = "filecoin")]
    #[arg(long)]
    pub filecoin: Option<String>,
    /// Modes of the Filecoin bench: stock (filecoin-proofs `seal_commit_phase2`, PoRep only),
    /// monolithic (ours in process, one partition at a time), inprocess (the in-process
    /// pipeline), split, gpu-only (each pipeline's GPU-only capacity, the baseline of the GPU
    /// time column); api: the gRPC API against the local path (PoRep only).
    #[cfg(feature = "filecoin")]
    #[arg(long, default_value = "stock,monolithic,inprocess,split,gpu-only")]
    pub filecoin_modes: String,
    /// Rounds each way (local, API) of the Filecoin bench's `api` mode, `-n` proofs each.
    #[cfg(feature = "filecoin")]
    #[arg(long, default_value_t = 5)]
    pub api_rounds: usize,
    /// PoRep C2 jobs queued ahead of the WinningPoSt in the `api` mode.
    #[cfg(feature = "filecoin")]
    #[arg(long, default_value_t = 20)]
    pub api_queued: usize,
    /// Runs of the stock prover in the Filecoin bench.
    #[cfg(feature = "filecoin")]
    #[arg(long, default_value_t = 2)]
    pub stock_runs: usize,
    /// Filecoin parameter cache dir.
    #[cfg(feature = "filecoin")]
    #[arg(long, env = launcher::env::FIL_PROOFS_PARAMETER_CACHE)]
    pub param_cache: Option<PathBuf>,
    /// Pipeline options (backend, batch, cores...).
    #[command(flatten)]
    pub pipeline: PipelineArgs,
}

/// `splitprover hog` (hidden).
#[derive(Debug, Args)]
pub struct HogArgs {
    /// Cpus, one pinned thread each (kernel list syntax).
    #[arg(long)]
    pub cpus: String,
    /// MiB each thread streams over (default: together twice the last-level cache, at least
    /// 64 each).
    #[arg(long)]
    pub mib: Option<usize>,
    /// Stop after this many seconds (default: when killed or when the parent is gone).
    #[arg(long)]
    pub seconds: Option<f64>,
}

/// A comma-separated list of numbers, or `[default]`.
pub fn list(text: Option<&str>, default: usize) -> anyhow::Result<Vec<usize>> {
    match text {
        None => Ok(vec![default]),
        Some(t) => t
            .split(',')
            .map(|v| {
                v.trim()
                    .parse::<usize>()
                    .with_context(|| format!("bad number `{v}` in `{t}`"))
            })
            .collect(),
    }
}

/// `--noisy-neighbour`: the neighbour states of every level.
pub fn neighbour_states(text: &str) -> anyhow::Result<Vec<bool>> {
    match text.trim() {
        "off" => Ok(vec![false]),
        "on" => Ok(vec![true]),
        "both" => Ok(vec![false, true]),
        other => anyhow::bail!("--noisy-neighbour `{other}`: use off, on or both"),
    }
}

/// The sweep of the bench flags for `modes` (the in-process and split pipelines, in the order
/// given) and `gpu_procs` gpu-procs, over this machine's cpus; notes on what its layouts left
/// out. `gpu_only` measures each start's GPU-only capacity (`--gpu-only-proofs`, default
/// min(-n, 48) jobs).
pub fn sweep_plan(
    args: &BenchArgs,
    modes: Vec<Mode>,
    gpu_only: bool,
    gpu_procs: usize,
    topology: &Topology,
    out_dir: &Path,
) -> anyhow::Result<(SweepPlan, Vec<String>)> {
    let n = args.proofs.max(1);
    let smt: Vec<Smt> = args
        .sweep_smt
        .split(',')
        .map(|s| s.parse::<Smt>().map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<_>>()
        .context("--sweep-smt")?;
    let default_cores = args.pipeline.gpu_cores.unwrap_or_else(|| {
        launcher::pinning::default_gpu_cores(
            &[args.pipeline.backend],
            launcher::settings::allowed_cpus(),
            gpu_procs,
        )
    });
    let gpu_cores = list(args.sweep_gpu_cores.as_deref(), default_cores)?;
    let (layouts, notes) = layout::layouts(topology, gpu_procs, &gpu_cores, &smt)?;
    let hog_cpus = args
        .hog_cpus
        .as_deref()
        .map(|c| {
            c.parse::<CpuList>()
                .with_context(|| format!("--hog-cpus `{c}`"))
        })
        .transpose()?;
    let plan = SweepPlan {
        modes,
        capacity_only: Vec::new(),
        gpu_only_proofs: if gpu_only {
            args.gpu_only_proofs.unwrap_or(n.min(48))
        } else {
            0
        },
        layouts,
        synth: list(args.sweep_synth.as_deref(), args.pipeline.synth_concurrency)?,
        clients: list(args.sweep_clients.as_deref(), args.clients)?,
        neighbour: neighbour_states(&args.noisy_neighbour)?,
        max_proofs: n,
        per_client: args.per_client,
        hog_mib: args.hog_mib,
        hog_cpus,
        warm_up: args.warm_up,
        batch: args.pipeline.batch.max(1),
        out_dir: out_dir.to_owned(),
        program: std::env::current_exe().context("cannot find the splitprover executable")?,
    };
    anyhow::ensure!(
        plan.clients.iter().all(|&c| c >= 1),
        "--sweep-clients: every concurrency must be at least 1"
    );
    Ok((plan, notes))
}

/// A row of a mode run once in this process, unpinned (monolithic, synthesis-only, stock):
/// layout `this process`, the figures of `timeline` (or of `wall` and `latencies` where it
/// has none).
pub fn plain_row(
    config: &str,
    mode: &str,
    timeline: &Timeline,
    wall_s: Option<f64>,
    latencies: &[f64],
    synth_only: bool,
) -> anyhow::Result<SweepRow> {
    let stats = TimelineStats::from_timeline(timeline);
    let mut row = if synth_only {
        BenchRow::from_synth_stats(config, mode, &stats)
    } else {
        BenchRow::from_stats(config, mode, &stats)
    };
    if let Some(wall) = wall_s {
        let jobs = latencies.len();
        row.proofs = jobs;
        row.wall_s = wall;
        let rate = (jobs > 0 && wall > 0.0).then(|| jobs as f64 / wall);
        row.proofs_per_s = rate;
        row.s_per_proof = rate.map(|r| 1.0 / r);
        row.proofs_per_min = rate.map(|r| 60.0 * r);
    }
    let mut r = SweepRow::new(row, "this process").with_latencies(latencies);
    r.synth_cpus = CpuList::allowed()?.to_string();
    r.synth_threads = rayon::current_num_threads();
    r.clients = if synth_only { 0 } else { 1 };
    Ok(r)
}

/// Each job's time from its first synthesis start to its last proof, seconds (the latency of
/// a job in the one-at-a-time modes).
pub fn job_spans(timeline: &Timeline) -> Vec<f64> {
    let mut spans: HashMap<u64, (u64, u64)> = HashMap::new();
    for e in timeline.events() {
        let s = spans.entry(e.job_id).or_insert((u64::MAX, 0));
        match e.kind {
            shm_protocol::control::EventKind::SynthStart => s.0 = s.0.min(e.t_ns),
            shm_protocol::control::EventKind::ProofDone => s.1 = s.1.max(e.t_ns),
            _ => {}
        }
    }
    let mut v: Vec<(u64, f64)> = spans
        .into_iter()
        .filter(|(_, (a, b))| *b >= *a && *a != u64::MAX)
        .map(|(j, (a, b))| (j, (b - a) as f64 / 1e9))
        .collect();
    v.sort_by_key(|(j, _)| *j);
    v.into_iter().map(|(_, s)| s).collect()
}

/// Writes a local run's TIMELINE log, trace and waterfall as `<out_dir>/<slug of mode-config>`
/// and returns the log's file name.
pub fn write_run_files(
    out_dir: &Path,
    mode: &str,
    config: &str,
    timeline: &Timeline,
) -> anyhow::Result<String> {
    let slug: String = format!("{mode}-{config}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let base = out_dir.join(&slug);
    let mut log = Vec::new();
    timeline.write_log(&mut log)?;
    std::fs::write(base.with_extension("timeline"), log)?;
    std::fs::write(
        base.with_extension("trace.json"),
        serde_json::to_vec(&timeline.chrome_trace())?,
    )?;
    std::fs::write(base.with_extension("svg"), timeline.waterfall_svg())?;
    Ok(format!("{slug}.timeline"))
}

/// The end of every bench: prints the table, the ratios, `extra` lines and the recommended
/// config, writes `sweep.json` and the rows as the older table (`json_name`) in `out_dir` and
/// renders the report there.
pub fn finish(
    out_dir: &Path,
    json_name: &str,
    mut report: SweepReport,
    batch: usize,
    extra: &[String],
) -> anyhow::Result<()> {
    report.recommendation = layout::recommend(&report.rows, &report.backend, batch);
    report.command = std::env::args().collect::<Vec<_>>().join(" ");
    let path = out_dir.join("sweep.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&report)?)?;
    let table: Vec<BenchRow> = report.rows.iter().map(|r| r.row.clone()).collect();
    std::fs::write(
        out_dir.join(json_name),
        serde_json::to_vec_pretty(&report::rows_to_json(&table))?,
    )?;
    let written = crate::commands::report::render_dir(out_dir)?;
    println!("{}", written.table);
    for line in ratio_lines(&report.rows).iter().chain(extra) {
        println!("{line}");
    }
    for n in &report.notes {
        println!("note: {n}");
    }
    match &report.recommendation {
        Some(r) => {
            println!("\nthe layout to put in the config (best split row, no neighbour):\n{r}")
        }
        None => println!(
            "\nno split row without the noisy neighbour was measured: no layout to recommend"
        ),
    }
    eprintln!(
        "wrote {} and the report ({} files), the TIMELINE logs, traces and waterfalls",
        path.display(),
        written.files.len()
    );
    Ok(())
}

/// For each split row: split / min(capacities) with its layout's GPU-only row and the
/// synthesis-only row, split / monolithic and split / in-process throughput at the same layout
/// and concurrency.
fn ratio_lines(rows: &[SweepRow]) -> Vec<String> {
    let mut out = Vec::new();
    let synth_only = rows.iter().find(|r| r.row.mode == "synth-only");
    let mono = rows.iter().find(|r| r.row.mode == "monolithic");
    for s in rows.iter().filter(|r| r.row.mode == "split") {
        out.push(format!(
            "split, {}, {}, -j {}{}:",
            s.layout,
            report::plural(s.synth_threads, "worker"),
            s.clients,
            if s.neighbour { ", hog" } else { "" }
        ));
        let gpu = rows.iter().find(|r| {
            r.row.mode == "gpu-only" && r.layout == s.layout && r.synth_threads == s.synth_threads
        });
        let caps: Vec<BenchRow> = synth_only
            .iter()
            .chain(gpu.iter())
            .map(|r| r.row.clone())
            .collect();
        if !caps.is_empty() {
            out.push(format!("  {}", report::ratio_line(&s.row, &caps)));
        }
        let per = |r: &SweepRow| r.row.proofs_per_s;
        if let (Some(a), Some(b)) = (per(s), mono.and_then(per)) {
            out.push(format!("  split / monolithic throughput = {:.2}", a / b));
        }
        let inproc = rows.iter().find(|r| {
            r.row.mode == "inprocess"
                && r.synth_threads == s.synth_threads
                && r.clients == s.clients
                && r.neighbour == s.neighbour
                && r.synth_cpus.parse::<CpuList>().ok() == s.synth_cpus.parse::<CpuList>().ok()
        });
        if let (Some(a), Some(b)) = (per(s), inproc.and_then(per)) {
            let steady = |r: &SweepRow| r.row.steady_s_per_proof.map(|t| 1.0 / t);
            let steady = report::ratio(steady(s), inproc.and_then(steady))
                .map_or_else(|| "-".to_string(), |x| format!("{x:.2}"));
            out.push(format!(
                "  split / inprocess throughput = {:.2} whole run, {steady} steady",
                a / b
            ));
        }
        if let Some(i) = inproc {
            let (sp, ip) = (&s.row.synth_phases.synthesis, &i.row.synth_phases.synthesis);
            let x = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
            out.push(format!(
                "  synthesis time split / inprocess = {} p50, {} p99 (target <= 1.05)",
                x(report::ratio(sp.p50_s, ip.p50_s)),
                x(report::ratio(sp.p99_s, ip.p99_s)),
            ));
        }
        out.push(format!(
            "  synth-proc phases: {}",
            s.row.synth_phases.line()
        ));
        if s.row.nested_syntheses > 0 {
            out.push(format!(
                "  warning: {} syntheses began inside another on the same thread",
                s.row.nested_syntheses
            ));
        }
        if let Some(g) = s.gpu_vs_gpu_only {
            let same = match (s.gpu_vs_gpu_only_same_batch, s.same_batch_pct) {
                (Some(x), Some(p)) => {
                    format!(" ({x:.3} at equal batch sizes, over {p:.0}% of the partitions)")
                }
                _ => String::new(),
            };
            out.push(format!(
                "  GPU time per partition split / gpu-only = {g:.3}{same}"
            ));
            let sizes: Vec<String> = s
                .row
                .gpu_by_batch
                .iter()
                .map(|b| format!("{}x{} {:.4}", b.batches, b.size, b.mean_gpu_s))
                .collect();
            if !sizes.is_empty() {
                out.push(format!(
                    "  split batches (count x size, GPU s/partition): {}",
                    sizes.join(", ")
                ));
            }
        }
    }
    out
}

/// Runs the bench of a built-in circuit.
pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let spec = launcher::settings::parse_spec(&args.circuit)?;
    let modes: Vec<String> = args.modes.split(',').map(|m| m.trim().to_owned()).collect();
    for m in &modes {
        anyhow::ensure!(
            matches!(
                m.as_str(),
                "monolithic" | "inprocess" | "split" | "synth-only" | "gpu-only"
            ),
            "unknown mode `{m}`: use monolithic, inprocess, split, synth-only, gpu-only"
        );
    }
    let has = |m: &str| modes.iter().any(|x| x == m);
    let base = launcher::settings::from_args(&args.pipeline, &spec, args.srs.as_deref())?;
    // How the in-process modes synthesize: as the split pipeline does, the matrices got ready
    // now, outside any timed run.
    let synthesis = Synthesizer::new(
        &base.synthesis,
        &kernels::circuits::AnyCircuit::Builtin(spec),
    );
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("cannot create `{}`", args.out_dir.display()))?;
    let n = args.proofs.max(1);
    let batch = args.pipeline.batch.max(1);
    let params = base.circuits[0].params.clone();
    let workload = Workload::builtin(spec, &params, 1)?;
    let topology = Topology::read(&CpuList::allowed()?);
    let mut sweep_modes = Vec::new();
    if has("inprocess") {
        sweep_modes.push(Mode::InProcess);
    }
    if has("split") || has("gpu-only") {
        sweep_modes.push(Mode::Split);
    }
    let (mut plan, mut notes) = sweep_plan(
        &args,
        sweep_modes,
        has("gpu-only"),
        base.gpus.len(),
        &topology,
        &args.out_dir,
    )?;
    if !has("split") {
        // `gpu-only` alone asks for the split pipeline's capacity, not for its rows.
        plan.capacity_only.push(Mode::Split);
    }
    // The one-at-a-time modes synthesize with as many threads as the first layout's
    // synth-proc has workers, so every mode synthesizes with the same parallelism.
    let synth_threads = match args.pipeline.synth_concurrency {
        0 => plan.layouts[0].synth.len(),
        n => n,
    };
    let mut rows: Vec<SweepRow> = Vec::new();
    let backend = if has("monolithic") || has("inprocess") {
        Some(gpu_proc::open_backend_from_file(
            args.pipeline.backend,
            &params,
            spec.circuit_id(),
            &spec.to_string(),
        )?)
    } else {
        None
    };
    let one_at_a_time = args.monolithic_proofs.unwrap_or(n).max(1);
    if let (true, Some(backend)) = (has("monolithic"), &backend) {
        let n = one_at_a_time;
        let jobs: Vec<Arc<dyn kernels::job::Job>> = (0..n as u64)
            .map(|i| workload.open(i))
            .collect::<anyhow::Result<_>>()?;
        let bar = report::progress_bar(n, "monolithic");
        let run = local::run_monolithic(backend.as_ref(), &synthesis, &jobs, batch, &|d| {
            bar.set_position(d as u64)
        })?;
        bar.finish_and_clear();
        for p in &run.proofs {
            workload.verify(p.job_id, &[proof_bytes(&p.proof)?])?;
        }
        let config = format!("batch {batch}");
        let mut r = plain_row(
            &config,
            "monolithic",
            &run.timeline,
            None,
            &job_spans(&run.timeline),
            false,
        )?;
        r.timeline = Some(write_run_files(
            &args.out_dir,
            "monolithic",
            &config,
            &run.timeline,
        )?);
        rows.push(r);
    }
    if has("synth-only") {
        // A capacity needs every worker busy for most of the run: at least four jobs per
        // worker (8 jobs on 10 workers measured one synthesis each, with no contention).
        let n = one_at_a_time
            .max(4 * synth_threads)
            .min(n.max(one_at_a_time));
        let jobs: Vec<Arc<dyn kernels::job::Job>> = (0..n as u64)
            .map(|i| workload.open(i))
            .collect::<anyhow::Result<_>>()?;
        let bar = report::progress_bar(n, "synth-only");
        let run = local::run_synth_only(
            &synthesis,
            &jobs,
            synth_threads,
            Some(&plan.layouts[0].synth),
            &|d| bar.set_position(d as u64),
        )?;
        bar.finish_and_clear();
        let config = format!("{synth_threads} threads");
        let mut r = plain_row(&config, "synth-only", &run.timeline, None, &[], true)?;
        r.synth_threads = synth_threads;
        r.synth_cpus = plan.layouts[0].synth.to_string();
        r.timeline = Some(write_run_files(
            &args.out_dir,
            "synth-only",
            &config,
            &run.timeline,
        )?);
        rows.push(r);
    }
    if !plan.modes.is_empty() {
        let (sweep_rows, sweep_notes) =
            sweep::run(&plan, &base, &workload, backend.as_deref(), &synthesis)?;
        rows.extend(sweep_rows);
        notes.extend(sweep_notes);
    }
    let report = SweepReport {
        workload: spec.to_string(),
        backend: args.pipeline.backend.to_string(),
        machine: topology.describe(),
        rows,
        notes,
        ..Default::default()
    };
    finish(&args.out_dir, "bench.json", report, batch, &[])?;
    Ok(ExitCode::SUCCESS)
}

/// `splitprover hog`: the noisy neighbour ([`crate::hog`]).
pub fn hog(args: HogArgs) -> anyhow::Result<ExitCode> {
    let cpus: CpuList = args
        .cpus
        .parse()
        .with_context(|| format!("--cpus `{}`", args.cpus))?;
    let mib = args.mib.unwrap_or_else(|| crate::hog::default_mib(&cpus));
    crate::hog::run(&cpus, mib, args.seconds)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shm_protocol::control::{EventKind, TimelineEvent};

    #[test]
    fn flags_parse() {
        assert_eq!(list(Some("1, 2,16"), 4).unwrap(), [1, 2, 16]);
        assert_eq!(list(None, 4).unwrap(), [4]);
        assert!(list(Some("1,x"), 4).is_err());
        assert_eq!(neighbour_states("both").unwrap(), [false, true]);
        assert_eq!(neighbour_states("on").unwrap(), [true]);
        assert!(neighbour_states("loud").is_err());
    }

    #[test]
    fn job_spans_run_from_first_synthesis_to_last_proof() {
        let ev = |kind, job, ms: u64| TimelineEvent {
            kind,
            job_id: job,
            partition: 0,
            slot: 0,
            pid: 1,
            tid: 0,
            t_ns: ms * 1_000_000,
        };
        let t = Timeline::from_events([
            ev(EventKind::SynthStart, 2, 100),
            ev(EventKind::SynthStart, 1, 0),
            ev(EventKind::ProofDone, 1, 250),
            ev(EventKind::ProofDone, 2, 400),
            ev(EventKind::SynthStart, 3, 500),
        ]);
        assert_eq!(job_spans(&t), [0.25, 0.3]);
    }
}
