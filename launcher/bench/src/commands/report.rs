//! `splitprover report DIR`: renders what a bench wrote into DIR.
//!
//! From `sweep.json` (a [`SweepReport`]): the sweep table on stdout, and in DIR
//! - `report.md`: the table as Markdown, the notes, the recommended config sections and the
//!   images;
//! - `throughput.svg`: proofs per minute against jobs in flight, one line per mode, layout and
//!   neighbour state (dashed: with the noisy neighbour);
//! - `gpu-inflation.svg`: GPU time per partition over the same start's GPU-only run, the same
//!   lines (1.0: the GPU side as fast as alone);
//! - `latency.svg`: p99 job latency, the same lines;
//! - `waterfalls.svg`: the waterfalls of the highest concurrency, each mode side by side,
//!   quiet above and with the neighbour below, at the recommended layout (else the first).
//!
//! Without `sweep.json`, the tables of `bench.json` / `bench-filecoin.json` (rows of an older
//! bench) are printed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use crate::chart::{line_chart, side_by_side, sweep_series};
use crate::report::{self, BenchRow, SweepReport, SweepRow};
use crate::timeline::Timeline;

/// `splitprover report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The `--out-dir` of a `splitprover bench`, or TIMELINE logs (the `.timeline` files a
    /// bench writes there, or any log holding `TIMELINE` lines): one table row each, with the
    /// steady rate.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

/// The files [`render_dir`] wrote.
#[derive(Debug)]
pub struct Written {
    /// The table, as text.
    pub table: String,
    /// Every file written.
    pub files: Vec<PathBuf>,
}

/// `splitprover report DIR` or `splitprover report LOG...`.
pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    if args.paths.iter().all(|p| p.is_file()) {
        print!("{}", report::render_table(&log_rows(&args.paths)?));
        return Ok(ExitCode::SUCCESS);
    }
    let [dir] = args.paths.as_slice() else {
        anyhow::bail!(
            "give one bench directory, or TIMELINE log files only ({} paths given)",
            args.paths.len()
        );
    };
    if dir.join("sweep.json").is_file() {
        let w = render_dir(dir)?;
        print!("{}", w.table);
        for f in &w.files {
            eprintln!("wrote {}", f.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut found = false;
    for name in ["bench.json", "bench-filecoin.json"] {
        let path = dir.join(name);
        if let Ok(bytes) = std::fs::read(&path) {
            let rows: Vec<BenchRow> = serde_json::from_slice(&bytes)
                .with_context(|| format!("`{}` is not a bench table", path.display()))?;
            println!("{name}");
            print!("{}", report::render_table(&rows));
            found = true;
        }
    }
    anyhow::ensure!(
        found,
        "`{}` holds no sweep.json, bench.json or bench-filecoin.json\nhint: give the --out-dir \
         of a `splitprover bench`",
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// One row per TIMELINE log: its file name, mode `log`, the figures of its events.
pub fn log_rows(paths: &[PathBuf]) -> anyhow::Result<Vec<BenchRow>> {
    paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read `{}`", path.display()))?;
            let timeline = Timeline::parse_log(&text)
                .with_context(|| format!("`{}` is not a TIMELINE log", path.display()))?;
            anyhow::ensure!(
                !timeline.is_empty(),
                "`{}` holds no TIMELINE line",
                path.display()
            );
            let name = path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            let stats = report::TimelineStats::from_timeline(&timeline);
            Ok(BenchRow::from_stats(name, "log", &stats))
        })
        .collect()
}

/// Reads `dir/sweep.json` and writes the report files (see the module doc).
pub fn render_dir(dir: &Path) -> anyhow::Result<Written> {
    let path = dir.join("sweep.json");
    let bytes =
        std::fs::read(&path).with_context(|| format!("cannot read `{}`", path.display()))?;
    let sweep: SweepReport = serde_json::from_slice(&bytes)
        .with_context(|| format!("`{}` is not a sweep report", path.display()))?;
    let rows = &sweep.rows;
    let mut files = Vec::new();
    let mut write = |name: &str, text: String| -> anyhow::Result<()> {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("cannot write `{}`", p.display()))?;
        files.push(p);
        Ok(())
    };
    let title = |what: &str| format!("{what}: {}, backend {}", sweep.workload, sweep.backend);
    write(
        "throughput.svg",
        line_chart(
            &title("throughput"),
            "jobs in flight (closed-loop clients)",
            "proofs per minute",
            &sweep_series(rows, |r| r.row.proofs_per_min),
            None,
        ),
    )?;
    write(
        "gpu-inflation.svg",
        line_chart(
            &title("GPU time per partition / GPU-only"),
            "jobs in flight (closed-loop clients)",
            "GPU time relative to GPU-only",
            &sweep_series(rows, |r| r.gpu_vs_gpu_only),
            Some((1.0, "GPU only")),
        ),
    )?;
    write(
        "latency.svg",
        line_chart(
            &title("p99 job latency"),
            "jobs in flight (closed-loop clients)",
            "p99 latency, seconds",
            &sweep_series(rows, |r| r.latency_p99_s),
            None,
        ),
    )?;
    let (panels, columns) = waterfall_panels(dir, &sweep)?;
    write("waterfalls.svg", side_by_side(&panels, columns))?;
    let table = format!(
        "{} (backend {}; {})\n{}",
        sweep.workload,
        sweep.backend,
        sweep.machine,
        report::render_sweep_table(rows)
    );
    let mut md = format!(
        "# {}\n\nBackend `{}`; {}.\n\n",
        sweep.workload, sweep.backend, sweep.machine
    );
    if !sweep.command.is_empty() {
        md.push_str(&format!("```\n{}\n```\n\n", sweep.command));
    }
    md.push_str(&report::sweep_markdown(rows));
    if !sweep.notes.is_empty() {
        md.push_str("\nNotes:\n");
        for n in &sweep.notes {
            md.push_str(&format!("- {n}\n"));
        }
    }
    if let Some(r) = &sweep.recommendation {
        md.push_str(&format!("\nRecommended config:\n\n```toml\n{r}```\n"));
    }
    md.push_str(
        "\n![throughput](throughput.svg)\n![GPU-time inflation](gpu-inflation.svg)\n\
         ![p99 latency](latency.svg)\n![waterfalls](waterfalls.svg)\n",
    );
    write("report.md", md)?;
    Ok(Written { table, files })
}

/// The waterfalls shown side by side: at the recommended layout (else the first split row's,
/// else the first row's) and synthesis workers, the highest concurrency, a column per mode,
/// a row per neighbour state.
fn waterfall_panels(
    dir: &Path,
    sweep: &SweepReport,
) -> anyhow::Result<(Vec<(String, Timeline)>, usize)> {
    let rows: Vec<&SweepRow> = sweep.rows.iter().filter(|r| r.clients > 0).collect();
    let anchor = recommended_row(sweep)
        .or_else(|| rows.iter().copied().find(|r| r.row.mode == "split"))
        .or_else(|| rows.first().copied());
    let Some(anchor) = anchor else {
        return Ok((Vec::new(), 1));
    };
    let same: Vec<&SweepRow> = rows
        .iter()
        .copied()
        .filter(|r| r.layout == anchor.layout && r.synth_threads == anchor.synth_threads)
        .collect();
    let top = same.iter().map(|r| r.clients).max().unwrap_or(0);
    let mut modes: Vec<&str> = Vec::new();
    for r in &same {
        if !modes.contains(&r.row.mode.as_str()) {
            modes.push(&r.row.mode);
        }
    }
    let mut panels = Vec::new();
    for neighbour in [false, true] {
        for mode in &modes {
            let Some(r) = same
                .iter()
                .find(|r| r.clients == top && r.neighbour == neighbour && r.row.mode == *mode)
            else {
                continue;
            };
            let Some(file) = &r.timeline else { continue };
            let path = dir.join(file);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read `{}`", path.display()))?;
            let t = Timeline::parse_log(&text)
                .with_context(|| format!("`{}` is not a TIMELINE log", path.display()))?;
            panels.push((
                format!(
                    "{mode}, {}, -j {top}{}: {:.3} s/proof",
                    r.layout,
                    if neighbour { ", hog" } else { "" },
                    r.row.s_per_proof.unwrap_or(f64::NAN)
                ),
                t,
            ));
        }
    }
    Ok((panels, modes.len().max(1)))
}

/// The row the recommendation was made from (its first line names the layout).
fn recommended_row(sweep: &SweepReport) -> Option<&SweepRow> {
    let text = sweep.recommendation.as_deref()?;
    sweep
        .rows
        .iter()
        .filter(|r| r.row.mode == "split" && !r.neighbour)
        .find(|r| {
            text.contains(&format!(
                "layout: {} ({},",
                r.layout,
                report::plural(r.synth_threads, "synthesis worker")
            ))
        })
}
