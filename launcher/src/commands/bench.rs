//! `splitprover bench`: monolithic, in-process and split proving of the same circuit with the same
//! kernels on the same machine, plus the two capacities alone, in one invocation; and a sweep of
//! cpuset splits and concurrencies for the split mode. Prints one table row per configuration
//! and writes the TIMELINE log, a Chrome/Perfetto trace and an SVG waterfall per run.

use std::process::ExitCode;

use anyhow::Context;

use crate::bench::{local, split};
use crate::cli::BenchArgs;
use crate::report::{self, BenchRow, TimelineStats};
use crate::timeline::Timeline;

fn list(text: Option<&str>, default: usize) -> anyhow::Result<Vec<usize>> {
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

/// Runs the bench.
pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let spec = super::parse_spec(&args.circuit)?;
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
    let base = super::settings_from_args(&args.pipeline, &spec, args.srs.as_deref())?;
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("cannot create `{}`", args.out_dir.display()))?;
    let n = args.proofs.max(1);
    let batch = args.pipeline.batch.max(1);
    let mut rows: Vec<BenchRow> = Vec::new();
    let has = |m: &str| modes.iter().any(|x| x == m);
    let params = base.circuits[0].params.clone();
    // The split mode's synth-proc gets every core the gpu-procs do not; the in-process modes get
    // as many synthesis threads, so every mode synthesizes with the same parallelism.
    let synth_threads = match args.pipeline.synth_concurrency {
        0 => crate::pinning::CpuList::allowed()?
            .len()
            .saturating_sub(args.pipeline.gpu_cores * args.pipeline.gpus)
            .max(1),
        n => n,
    };

    if has("monolithic") || has("inprocess") {
        let backend = gpu_proc::open_backend_from_file(
            args.pipeline.backend,
            &params,
            spec.circuit_id(),
            &spec.to_string(),
        )?;
        if has("monolithic") {
            let bar = report::progress_bar(n, "monolithic");
            let run = local::run_monolithic(backend.as_ref(), &spec, n, batch, &|d| {
                bar.set_position(d as u64)
            })?;
            bar.finish_and_clear();
            rows.push(record(
                &args,
                &format!("batch {batch}"),
                "monolithic",
                &run.timeline,
                false,
            )?);
        }
        if has("inprocess") {
            let opts = local::InProcessOptions {
                synth_threads,
                max_batch: batch,
                queue_depth: args.clients.max(1),
            };
            let bar = report::progress_bar(n, "inprocess");
            let run = local::run_inprocess(backend.as_ref(), &spec, n, &opts, &|d| {
                bar.set_position(d as u64)
            })?;
            bar.finish_and_clear();
            rows.push(record(
                &args,
                &format!("synth {} threads", opts.synth_threads),
                "inprocess",
                &run.timeline,
                false,
            )?);
        }
    }
    if has("synth-only") {
        let threads = synth_threads;
        let bar = report::progress_bar(n, "synth-only");
        let run = local::run_synth_only(&spec, n, threads, &|d| bar.set_position(d as u64))?;
        bar.finish_and_clear();
        rows.push(record(
            &args,
            &format!("{threads} threads"),
            "synth-only",
            &run.timeline,
            true,
        )?);
    }
    // Split rows paired with their own GPU-only capacity (same gpu-proc cores).
    let mut pairs: Vec<(usize, Option<usize>)> = Vec::new();
    for gpu_cores in list(args.sweep_gpu_cores.as_deref(), args.pipeline.gpu_cores)? {
        let mut s = base.clone();
        s.gpu_cores = gpu_cores;
        let mut gpu_row = None;
        if has("gpu-only") {
            let bar = report::progress_bar(args.gpu_only_proofs.unwrap_or(n.min(48)), "gpu-only");
            let m = args.gpu_only_proofs.unwrap_or(n.min(48)).max(1);
            let run = split::run_gpu_only(s.clone(), m, batch, &|d| bar.set_position(d as u64))?;
            bar.finish_and_clear();
            check_outcomes(&run)?;
            let cfg = format!("gpu {gpu_cores} cores, batch {batch}");
            rows.push(record(&args, &cfg, "gpu-only", &run.timeline, false)?);
            gpu_row = Some(rows.len() - 1);
        }
        if has("split") {
            for synth in list(args.sweep_synth.as_deref(), args.pipeline.synth_concurrency)? {
                let mut s = s.clone();
                s.synth_concurrency = synth;
                let bar = report::progress_bar(n, "split");
                let run = split::run_split(s, n, args.clients, &|d| bar.set_position(d as u64))?;
                bar.finish_and_clear();
                check_outcomes(&run)?;
                let synth_proc = run.status.children.iter().find(|c| c.role == "synth-proc");
                let synth_cpus = synth_proc.and_then(|c| c.cpus.clone()).unwrap_or_default();
                let workers = synth_proc
                    .and_then(|c| c.detail.split(": ").nth(1).map(str::to_owned))
                    .unwrap_or_else(|| synth.to_string());
                let cfg = format!(
                    "gpu {gpu_cores} cores / synth cpus {synth_cpus}, {workers}, -j {}",
                    args.clients
                );
                rows.push(record(&args, &cfg, "split", &run.timeline, false)?);
                pairs.push((rows.len() - 1, gpu_row));
            }
        }
    }

    println!("{}", report::render_table(&rows));
    let synth_row = rows.iter().find(|r| r.mode == "synth-only").cloned();
    let mono = rows.iter().find(|r| r.mode == "monolithic").cloned();
    for (split_i, gpu_i) in pairs {
        let split_row = &rows[split_i];
        println!("{}:", split_row.config);
        let caps: Vec<BenchRow> = synth_row
            .iter()
            .cloned()
            .chain(gpu_i.map(|i| rows[i].clone()))
            .collect();
        if !caps.is_empty() {
            println!("  {}", report::ratio_line(split_row, &caps));
        }
        if let Some(mono) = &mono {
            if let (Some(a), Some(b)) = (split_row.proofs_per_s, mono.proofs_per_s) {
                println!("  split / monolithic throughput = {:.2}", a / b);
            }
        }
        if let Some(gpu) = gpu_i.map(|i| &rows[i]) {
            if let (Some(a), Some(b)) = (split_row.mean_gpu_s, gpu.mean_gpu_s) {
                println!("  GPU time per proof split / gpu-only = {:.3}", a / b);
            }
        }
    }
    let json = report::rows_to_json(&rows);
    let path = args.out_dir.join("bench.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&json)?)?;
    eprintln!(
        "wrote {} and per-run TIMELINE logs, traces and waterfalls",
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn check_outcomes(run: &split::SplitRun) -> anyhow::Result<()> {
    for o in &run.outcomes {
        if let Err(e) = &o.result {
            anyhow::bail!("job {} failed during the bench: {e}", o.job_id);
        }
    }
    Ok(())
}

fn record(
    args: &BenchArgs,
    config: &str,
    mode: &str,
    timeline: &Timeline,
    synth_only: bool,
) -> anyhow::Result<BenchRow> {
    let stats = TimelineStats::from_timeline(timeline);
    let slug: String = format!("{mode}-{config}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let base = args.out_dir.join(slug);
    let mut log = Vec::new();
    timeline.write_log(&mut log)?;
    std::fs::write(base.with_extension("timeline"), log)?;
    std::fs::write(
        base.with_extension("trace.json"),
        serde_json::to_vec(&timeline.chrome_trace())?,
    )?;
    std::fs::write(base.with_extension("svg"), timeline.waterfall_svg())?;
    Ok(if synth_only {
        BenchRow::from_synth_stats(config, mode, &stats)
    } else {
        BenchRow::from_stats(config, mode, &stats)
    })
}
