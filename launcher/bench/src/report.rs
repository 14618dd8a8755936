//! Benchmark statistics and the table an operator compares.
//!
//! [`TimelineStats::from_timeline`] measures one run from its [`Timeline`] (the definitions are on
//! each field); [`BenchRow`] is one configuration's line of the table printed by
//! [`render_table`] and written by [`rows_to_json`]; [`ratio_line`] states how close the split
//! pipeline comes to the slower of its two capacities.
//!
//! A sweep (`splitprover bench --sweep-clients ...`, [`crate::sweep`]) writes a
//! [`SweepReport`]: one [`SweepRow`] per mode, layout, neighbour and client concurrency (a
//! [`BenchRow`] plus those coordinates, the GPU time relative to GPU-only and the job latency
//! [`percentile`]s), rendered by [`render_sweep_table`] and, with charts, by `splitprover
//! report`.
//!
//! ```
//! use splitprover_bench::report::{render_table, BenchRow, TimelineStats};
//! use splitprover_bench::timeline::Timeline;
//! use shm_protocol::control::{EventKind, TimelineEvent};
//!
//! let ev = |kind, t_ms: u64| TimelineEvent {
//!     kind, job_id: 1, partition: 0, slot: 0, pid: 7, tid: 0, t_ns: t_ms * 1_000_000,
//! };
//! let t = Timeline::from_events([
//!     ev(EventKind::SynthStart, 0),
//!     ev(EventKind::SynthEnd, 800),
//!     ev(EventKind::GpuStart, 800),
//!     ev(EventKind::GpuEnd, 1000),
//!     ev(EventKind::ProofDone, 1000),
//! ]);
//! let stats = TimelineStats::from_timeline(&t);
//! assert_eq!(stats.proofs, 1);
//! assert!((stats.wall_s - 1.0).abs() < 1e-9);
//! let row = BenchRow::from_stats("batch 1", "monolithic", &stats);
//! assert!(render_table(&[row]).contains("monolithic"));
//! ```

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use shm_protocol::control::{EventKind, TimelineEvent};

use crate::timeline::{ns_to_s, union, Timeline};

/// Idle gaps of the GPU: the time between consecutive busy intervals (the union of all GPU
/// intervals, so overlapping batches or several GPUs count as one busy device).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct GapStats {
    /// Number of gaps (busy intervals − 1, or 0).
    pub count: usize,
    /// Sum of the gaps, seconds.
    pub total_s: f64,
    /// Mean gap, seconds.
    pub mean_s: Option<f64>,
    /// Largest gap, seconds.
    pub max_s: Option<f64>,
    /// Median gap (nearest rank), seconds.
    pub p50_s: Option<f64>,
}

/// What one run measured. Undefined quantities (no GPU events, nothing finished) are `None`, so
/// an empty or partial timeline gives a value, never a panic or a NaN.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimelineStats {
    /// Distinct (job, partition) pairs with a `PROOF_DONE`.
    pub proofs: usize,
    /// `SYNTH_START` events (a partition retried after a crash counts twice).
    pub syntheses_started: usize,
    /// Completed syntheses (`SYNTH_START` → `SYNTH_END`).
    pub syntheses: usize,
    /// GPU batches (partitions proved together share one).
    pub gpu_batches: usize,
    /// Wall span: first `SYNTH_START` (else the first event) → last `PROOF_DONE` (else the last
    /// event), seconds.
    pub wall_s: f64,
    /// `proofs / wall_s`.
    pub proofs_per_s: Option<f64>,
    /// `wall_s / proofs`.
    pub s_per_proof: Option<f64>,
    /// `60 × proofs_per_s`.
    pub proofs_per_min: Option<f64>,
    /// Seconds per proof in steady state: between the completions at one quarter and three
    /// quarters of the run (sorted `PROOF_DONE` times `t[3n/4] - t[n/4]` over `3n/4 - n/4`
    /// proofs), so the pipeline's fill before the first proof and its drain are left out;
    /// `None` under [`STEADY_MIN_PROOFS`] proofs.
    pub steady_s_per_proof: Option<f64>,
    /// Completed syntheses per second of wall span (the capacity figure of a synthesis-only run).
    pub syntheses_per_s: Option<f64>,
    /// Union of the GPU intervals, seconds.
    pub gpu_busy_s: f64,
    /// First `GPU_START` → last `GPU_END`, seconds.
    pub gpu_span_s: f64,
    /// `gpu_busy_s` as a percentage of `gpu_span_s`: how well the GPU is fed once it has started.
    pub gpu_busy_pct_of_gpu_span: Option<f64>,
    /// The GPU's busy time within the wall span, as a percentage of `wall_s` (includes the time
    /// before the first batch and after the last).
    pub gpu_busy_pct_of_wall: Option<f64>,
    /// Idle gaps between consecutive GPU busy intervals.
    pub idle_gaps: GapStats,
    /// Mean completed synthesis time per partition, seconds.
    pub mean_synth_s: Option<f64>,
    /// Where the syntheses' time went, phase by phase.
    pub synth_phases: PhaseStats,
    /// Syntheses that began on a thread still inside another synthesis
    /// ([`crate::timeline::Intervals::nested_syntheses`]); 0 in a healthy pipeline.
    pub nested_syntheses: usize,
    /// Mean GPU time per proof: each batch's length divided among its partitions, seconds.
    pub mean_gpu_s: Option<f64>,
    /// Mean partitions per GPU batch.
    pub mean_batch: Option<f64>,
    /// GPU time by batch size, smallest first (see [`BatchSizeGpu`]).
    pub gpu_by_batch: Vec<BatchSizeGpu>,
    /// Mean time in the ring (`SLOT_PUBLISH` → `GPU_CLAIM`), seconds.
    pub mean_ring_wait_s: Option<f64>,
    /// End events that had no open start (see [`crate::timeline`]'s pairing rules).
    pub unpaired_ends: usize,
}

/// Median and 99th percentile (nearest rank) of one phase over the syntheses that recorded it,
/// seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Median.
    pub p50_s: Option<f64>,
    /// 99th percentile.
    pub p99_s: Option<f64>,
}

impl Percentiles {
    fn of_ns(ns: impl Iterator<Item = u64>) -> Self {
        let v: Vec<f64> = ns.map(ns_to_s).collect();
        Percentiles {
            p50_s: percentile(&v, 50.0),
            p99_s: percentile(&v, 99.0),
        }
    }
}

/// A synthesis's phases ([`crate::timeline::SynthPhases`]), each over the syntheses that
/// recorded it: the hand-out and worker waits exist in the split pipeline only, the witness and
/// products for the pre-compiled synthesis only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseStats {
    /// `SYNTH_START` → `SYNTH_END`: the synthesis itself.
    pub synthesis: Percentiles,
    /// `JOB_QUEUED` → `SYNTH_HANDOUT`: waiting in the launcher to be handed out.
    pub handout_wait: Percentiles,
    /// `SYNTH_HANDOUT` → `SYNTH_TAKEN`: waiting in synth-proc for a worker.
    pub worker_wait: Percentiles,
    /// `SYNTH_TAKEN` → `SYNTH_START`: waiting for a free ring slot.
    pub slot_wait: Percentiles,
    /// `SYNTH_START` → `WITNESS_END`: the witness pass.
    pub witness: Percentiles,
    /// `WITNESS_END` → `SYNTH_END`: the sparse products.
    pub products: Percentiles,
}

impl PhaseStats {
    /// The phases of `phases`.
    pub fn of(phases: &[crate::timeline::SynthPhases]) -> Self {
        let of = |f: fn(&crate::timeline::SynthPhases) -> Option<u64>| {
            Percentiles::of_ns(phases.iter().filter_map(f))
        };
        PhaseStats {
            synthesis: of(|p| Some(p.synthesis_ns())),
            handout_wait: of(|p| p.handout_wait_ns()),
            worker_wait: of(|p| p.worker_wait_ns()),
            slot_wait: of(|p| p.slot_wait_ns()),
            witness: of(|p| p.witness_ns()),
            products: of(|p| p.products_ns()),
        }
    }

    /// One line: `synthesis p50 0.176 / p99 0.201 s; hand-out wait ...` (phases not recorded
    /// left out).
    pub fn line(&self) -> String {
        let mut parts = Vec::new();
        for (name, p) in [
            ("synthesis", self.synthesis),
            ("hand-out wait", self.handout_wait),
            ("worker wait", self.worker_wait),
            ("slot wait", self.slot_wait),
            ("witness", self.witness),
            ("products", self.products),
        ] {
            if let (Some(a), Some(b)) = (p.p50_s, p.p99_s) {
                parts.push(format!("{name} p50 {a:.3} / p99 {b:.3}"));
            }
        }
        if parts.is_empty() {
            "no synthesis completed".to_string()
        } else {
            format!("{} s", parts.join("; "))
        }
    }
}

/// The GPU batches of one size: a batch of one pays its copies and the host's finish alone,
/// while in a batch of ten the next proof's copies overlap the current one's MSMs, so GPU time
/// per partition depends on the batch size, and two runs compare fairly only size for size.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchSizeGpu {
    /// Partitions per batch.
    pub size: usize,
    /// Batches of this size.
    pub batches: usize,
    /// Their summed length divided among their partitions, seconds.
    pub mean_gpu_s: f64,
}

impl TimelineStats {
    /// Measures a timeline.
    pub fn from_timeline(timeline: &Timeline) -> Self {
        let iv = timeline.intervals();
        let events = timeline.events();
        let first_synth = events
            .iter()
            .find(|e| e.kind == EventKind::SynthStart)
            .map(|e| e.t_ns);
        let last_done = events
            .iter()
            .rev()
            .find(|e| e.kind == EventKind::ProofDone)
            .map(|e| e.t_ns);
        let start = first_synth.or(timeline.first_ns());
        let end = last_done.or(timeline.last_ns());
        let (wall_start, wall_end) = match (start, end) {
            (Some(a), Some(b)) if b >= a => (a, b),
            _ => (0, 0),
        };
        let wall_ns = wall_end - wall_start;
        let wall_s = ns_to_s(wall_ns);
        let proofs = iv.proofs_done.len();
        let per_wall = |count: usize| (wall_ns > 0 && count > 0).then(|| count as f64 / wall_s);
        let proofs_per_s = per_wall(proofs);
        let steady_s_per_proof = steady_rate(&iv.proofs_done);

        let busy = union(iv.batches.iter().map(|b| (b.start_ns, b.end_ns)));
        let busy_ns: u64 = busy.iter().map(|(a, b)| b - a).sum();
        let gpu_span_ns = match (busy.first(), busy.last()) {
            (Some(f), Some(l)) => l.1 - f.0,
            _ => 0,
        };
        let busy_in_wall_ns: u64 = busy
            .iter()
            .map(|&(a, b)| b.min(wall_end).saturating_sub(a.max(wall_start)))
            .sum();
        let gaps: Vec<u64> = busy.windows(2).map(|w| w[1].0 - w[0].1).collect();
        let idle_gaps = gap_stats(&gaps);

        let proofs_in_batches: usize = iv.batches.iter().map(|b| b.members.len()).sum();
        let batch_ns: u64 = iv.batches.iter().map(|b| b.duration_ns()).sum();
        let mut by_size: std::collections::BTreeMap<usize, (usize, u64)> = Default::default();
        for b in &iv.batches {
            let e = by_size.entry(b.members.len()).or_default();
            e.0 += 1;
            e.1 += b.duration_ns();
        }
        let gpu_by_batch = by_size
            .into_iter()
            .filter(|&(size, _)| size > 0)
            .map(|(size, (batches, ns))| BatchSizeGpu {
                size,
                batches,
                mean_gpu_s: ns_to_s(ns) / (size * batches) as f64,
            })
            .collect();

        TimelineStats {
            proofs,
            syntheses_started: iv.synth_started,
            syntheses: iv.synth.len(),
            gpu_batches: iv.batches.len(),
            wall_s,
            proofs_per_s,
            s_per_proof: proofs_per_s.map(|r| 1.0 / r),
            proofs_per_min: proofs_per_s.map(|r| 60.0 * r),
            steady_s_per_proof,
            syntheses_per_s: per_wall(iv.synth.len()),
            gpu_busy_s: ns_to_s(busy_ns),
            gpu_span_s: ns_to_s(gpu_span_ns),
            gpu_busy_pct_of_gpu_span: (gpu_span_ns > 0)
                .then(|| 100.0 * busy_ns as f64 / gpu_span_ns as f64),
            gpu_busy_pct_of_wall: (wall_ns > 0 && !busy.is_empty())
                .then(|| 100.0 * busy_in_wall_ns as f64 / wall_ns as f64),
            idle_gaps,
            mean_synth_s: mean(iv.synth.iter().map(|s| s.duration_s())),
            synth_phases: PhaseStats::of(&iv.phases),
            nested_syntheses: iv.nested_syntheses(),
            mean_gpu_s: (proofs_in_batches > 0)
                .then(|| ns_to_s(batch_ns) / proofs_in_batches as f64),
            mean_batch: (!iv.batches.is_empty())
                .then(|| proofs_in_batches as f64 / iv.batches.len() as f64),
            gpu_by_batch,
            mean_ring_wait_s: mean(iv.ring_wait.iter().map(|s| s.duration_s())),
            unpaired_ends: iv.unpaired_ends,
        }
    }
}

/// Fewer proofs than this give no steady rate: the middle half would hold too few completions.
pub const STEADY_MIN_PROOFS: usize = 8;

/// Seconds per completion over the middle half of the completions `done` (see
/// [`TimelineStats::steady_s_per_proof`]).
fn steady_rate(done: &[TimelineEvent]) -> Option<f64> {
    let n = done.len();
    if n < STEADY_MIN_PROOFS {
        return None;
    }
    // A `Timeline` keeps its events in time order, so its completions are already sorted.
    debug_assert!(done.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
    let (lo, hi) = (n / 4, 3 * n / 4);
    Some(ns_to_s(done[hi].t_ns - done[lo].t_ns) / (hi - lo) as f64)
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, sum) = values.fold((0usize, 0.0), |(n, s), v| (n + 1, s + v));
    (n > 0).then(|| sum / n as f64)
}

fn gap_stats(gaps_ns: &[u64]) -> GapStats {
    let mut sorted = gaps_ns.to_vec();
    sorted.sort_unstable();
    let total: u64 = sorted.iter().sum();
    GapStats {
        count: sorted.len(),
        total_s: ns_to_s(total),
        mean_s: (!sorted.is_empty()).then(|| ns_to_s(total) / sorted.len() as f64),
        max_s: sorted.last().map(|&g| ns_to_s(g)),
        // Nearest rank: the ceil(n/2)-th smallest.
        p50_s: (!sorted.is_empty()).then(|| ns_to_s(sorted[sorted.len().div_ceil(2) - 1])),
    }
}

/// One configuration's line of the bench table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchRow {
    /// What was varied (`batch 10`, `gpu 2 cores / synth 14`, ...).
    pub config: String,
    /// `monolithic`, `inprocess`, `split`, `synth-only`, `gpu-only`.
    pub mode: String,
    /// Units completed: proofs, or syntheses for a synthesis-only capacity row.
    pub proofs: usize,
    /// Wall span, seconds.
    pub wall_s: f64,
    /// Seconds per unit.
    pub s_per_proof: Option<f64>,
    /// Seconds per proof in steady state ([`TimelineStats::steady_s_per_proof`]); `None` for a
    /// synthesis-only row and for tables written before it existed.
    #[serde(default)]
    pub steady_s_per_proof: Option<f64>,
    /// Units per second.
    pub proofs_per_s: Option<f64>,
    /// Units per minute.
    pub proofs_per_min: Option<f64>,
    /// GPU busy % over the span from the first GPU start to the last GPU end.
    pub gpu_busy_pct: Option<f64>,
    /// GPU busy % over the whole wall span.
    pub gpu_busy_pct_wall: Option<f64>,
    /// Mean GPU time per proof, seconds.
    pub mean_gpu_s: Option<f64>,
    /// Mean synthesis time per partition, seconds.
    pub mean_synth_s: Option<f64>,
    /// The syntheses' phases; empty for tables written before they were recorded.
    #[serde(default)]
    pub synth_phases: PhaseStats,
    /// Syntheses nested in another on one thread (see [`TimelineStats::nested_syntheses`]).
    #[serde(default)]
    pub nested_syntheses: usize,
    /// Mean GPU idle gap, seconds.
    pub mean_idle_gap_s: Option<f64>,
    /// Largest GPU idle gap, seconds.
    pub max_idle_gap_s: Option<f64>,
    /// Mean time in the ring, seconds.
    pub mean_ring_wait_s: Option<f64>,
    /// Mean partitions per GPU batch.
    pub mean_batch: Option<f64>,
    /// GPU time by batch size.
    #[serde(default)]
    pub gpu_by_batch: Vec<BatchSizeGpu>,
}

impl BenchRow {
    /// A row whose unit is the proof.
    pub fn from_stats(
        config: impl Into<String>,
        mode: impl Into<String>,
        s: &TimelineStats,
    ) -> Self {
        BenchRow {
            config: config.into(),
            mode: mode.into(),
            proofs: s.proofs,
            wall_s: s.wall_s,
            s_per_proof: s.s_per_proof,
            steady_s_per_proof: s.steady_s_per_proof,
            proofs_per_s: s.proofs_per_s,
            proofs_per_min: s.proofs_per_min,
            gpu_busy_pct: s.gpu_busy_pct_of_gpu_span,
            gpu_busy_pct_wall: s.gpu_busy_pct_of_wall,
            mean_gpu_s: s.mean_gpu_s,
            mean_synth_s: s.mean_synth_s,
            synth_phases: s.synth_phases,
            nested_syntheses: s.nested_syntheses,
            mean_idle_gap_s: s.idle_gaps.mean_s,
            max_idle_gap_s: s.idle_gaps.max_s,
            mean_ring_wait_s: s.mean_ring_wait_s,
            mean_batch: s.mean_batch,
            gpu_by_batch: s.gpu_by_batch.clone(),
        }
    }

    /// A synthesis-only capacity row: its unit is the completed synthesis (no proof is made).
    pub fn from_synth_stats(
        config: impl Into<String>,
        mode: impl Into<String>,
        s: &TimelineStats,
    ) -> Self {
        let rate = s.syntheses_per_s;
        BenchRow {
            proofs: s.syntheses,
            s_per_proof: rate.map(|r| 1.0 / r),
            steady_s_per_proof: None,
            proofs_per_s: rate,
            proofs_per_min: rate.map(|r| 60.0 * r),
            ..BenchRow::from_stats(config, mode, s)
        }
    }
}

/// The bench table: one aligned line per row, text left-aligned, numbers right-aligned, `-` where
/// a figure is undefined.
pub fn render_table(rows: &[BenchRow]) -> String {
    let header = [
        "config",
        "mode",
        "proofs",
        "wall s",
        "s/proof",
        "steady s/proof",
        "proofs/min",
        "gpu busy %",
        "busy % wall",
        "mean gpu s",
        "mean synth s",
        "synth p50",
        "synth p99",
        "nested",
        "mean idle gap s",
        "max idle gap s",
        "ring wait s",
    ];
    let opt = |v: Option<f64>, digits: usize| {
        v.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
    };
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.config.clone(),
                r.mode.clone(),
                r.proofs.to_string(),
                format!("{:.2}", r.wall_s),
                opt(r.s_per_proof, 4),
                opt(r.steady_s_per_proof, 4),
                opt(r.proofs_per_min, 1),
                opt(r.gpu_busy_pct, 1),
                opt(r.gpu_busy_pct_wall, 1),
                opt(r.mean_gpu_s, 4),
                opt(r.mean_synth_s, 4),
                opt(r.synth_phases.synthesis.p50_s, 4),
                opt(r.synth_phases.synthesis.p99_s, 4),
                r.nested_syntheses.to_string(),
                opt(r.mean_idle_gap_s, 4),
                opt(r.max_idle_gap_s, 4),
                opt(r.mean_ring_wait_s, 4),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            cells
                .iter()
                .map(|r| r[c].chars().count())
                .chain([header[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let text_cols = 2;
    let line = |out: &mut String, row: &[String]| {
        let mut l = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                l.push_str("  ");
            }
            let w = widths[c];
            if c < text_cols {
                let _ = write!(l, "{cell:<w$}");
            } else {
                let _ = write!(l, "{cell:>w$}");
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    let mut out = String::new();
    line(&mut out, &header.map(String::from));
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    line(&mut out, &rule);
    for r in &cells {
        line(&mut out, r);
    }
    out
}

/// A progress bar on stderr for a bench mode of `total` units (hidden when stderr is not a
/// terminal); pass `&|done| bar.set_position(done as u64)` as the mode's progress callback.
pub fn progress_bar(total: usize, label: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg:>14} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec}, eta {eta})",
    ) {
        bar.set_style(style);
    }
    bar.set_message(label.to_string());
    bar
}

/// The rows as a JSON array of objects (field names as in [`BenchRow`], `null` where undefined).
pub fn rows_to_json(rows: &[BenchRow]) -> serde_json::Value {
    serde_json::Value::Array(
        rows.iter()
            .map(|r| serde_json::to_value(r).unwrap_or(serde_json::Value::Null))
            .collect(),
    )
}

/// Throughput of `split` over the smallest capacity throughput; `None` when a figure is missing.
pub fn capacity_ratio<'a>(
    split: &BenchRow,
    capacities: &'a [BenchRow],
) -> Option<(f64, &'a BenchRow)> {
    let min = capacities
        .iter()
        .filter_map(|c| c.proofs_per_s.filter(|r| *r > 0.0).map(|r| (r, c)))
        .min_by(|a, b| a.0.total_cmp(&b.0))?;
    split.proofs_per_s.map(|s| (s / min.0, min.1))
}

/// `split / min(capacities) = x.xx whole run, y.yy steady (split 5.10/s, min: synth-only
/// 5.20/s)`, or a line saying which figure is missing. The steady figure is the split row's
/// steady rate ([`TimelineStats::steady_s_per_proof`]: the pipeline's fill and drain left out)
/// over the same capacity.
pub fn ratio_line(split: &BenchRow, capacities: &[BenchRow]) -> String {
    match capacity_ratio(split, capacities) {
        Some((ratio, min)) => {
            let steady = match (split.steady_s_per_proof, min.proofs_per_s) {
                (Some(s), Some(c)) if s > 0.0 && c > 0.0 => format!("{:.2}", 1.0 / s / c),
                _ => "-".to_string(),
            };
            format!(
                "split / min(capacities) = {ratio:.2} whole run, {steady} steady (split {:.3}/s, \
                 min: {} {:.3}/s)",
                split.proofs_per_s.unwrap_or(0.0),
                min.mode,
                min.proofs_per_s.unwrap_or(0.0)
            )
        }
        None => "split / min(capacities) = - (a throughput is missing)".to_string(),
    }
}

/// `a / b` of two optional figures, where both are positive.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// `n` and `word`, plural unless `n` is 1 (`1 worker`, `2 workers`).
pub fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// The `p`-th percentile of `values` by nearest rank (the smallest value with at least `p` %
/// of the values at or below it); `None` for no values or `p` outside `(0, 100]`. NaNs sort
/// last.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() || !(p > 0.0 && p <= 100.0) {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = (p / 100.0 * v.len() as f64).ceil() as usize;
    v.get(rank.clamp(1, v.len()) - 1).copied()
}

/// One row of a sweep: a mode at one layout, synthesis concurrency, neighbour state and client
/// concurrency. `row.proofs` counts jobs and `row.s_per_proof` is the clients' wall time per
/// job (first submission to last proof); the GPU and synthesis means are per partition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    /// The figures every bench row has.
    #[serde(flatten)]
    pub row: BenchRow,
    /// The layout's name (`gpu 2 cores`, `gpu 2 cores, SMT apart`).
    pub layout: String,
    /// synth-proc's cpus in this layout (the in-process pipeline runs on these and the
    /// gpu-procs').
    pub synth_cpus: String,
    /// Each gpu-proc's cpus, `;` between gpu-procs.
    pub gpu_cpus: String,
    /// Synthesis workers (synth-proc's pool, the in-process pipeline's threads).
    pub synth_threads: usize,
    /// Jobs in flight (closed-loop clients); 0 for a GPU-only capacity row.
    pub clients: usize,
    /// Whether the noisy neighbour ran on the synthesis cpus.
    pub neighbour: bool,
    /// The neighbour as it ran (`hog on cpus 0-13, 96 MiB per thread`).
    #[serde(default)]
    pub neighbour_detail: Option<String>,
    /// Mean GPU time per partition of this mode's GPU-only capacity run on the same start.
    #[serde(default)]
    pub gpu_only_mean_gpu_s: Option<f64>,
    /// `row.mean_gpu_s / gpu_only_mean_gpu_s`: how much the GPU side slows down under load.
    #[serde(default)]
    pub gpu_vs_gpu_only: Option<f64>,
    /// The same ratio size for size: this row's batches of each size that the GPU-only run
    /// also made, against that run's GPU time per partition at the same size (see
    /// [`BatchSizeGpu`]: a row fed one partition at a time is not slowed by its neighbours for
    /// paying its copies alone).
    #[serde(default)]
    pub gpu_vs_gpu_only_same_batch: Option<f64>,
    /// The share of this row's partitions that `gpu_vs_gpu_only_same_batch` covers, percent.
    #[serde(default)]
    pub same_batch_pct: Option<f64>,
    /// Median job latency (submission to proof), seconds.
    #[serde(default)]
    pub latency_p50_s: Option<f64>,
    /// 99th percentile job latency, seconds.
    #[serde(default)]
    pub latency_p99_s: Option<f64>,
    /// Mean job latency, seconds.
    #[serde(default)]
    pub latency_mean_s: Option<f64>,
    /// The row's TIMELINE log, a file name in the bench's output dir.
    #[serde(default)]
    pub timeline: Option<String>,
    /// CPU seconds (user + system) the prover processes spent per partition proved (the split
    /// pipeline's gpu-procs: everything the host does for a proof besides synthesis).
    #[serde(default)]
    pub prover_cpu_s_per_partition: Option<f64>,
    /// `prover_cpu_s_per_partition / row.mean_gpu_s`.
    #[serde(default)]
    pub prover_cpu_vs_gpu: Option<f64>,
}

impl SweepRow {
    /// A row of `layout` with the figures of `row` and everything else empty.
    pub fn new(row: BenchRow, layout: impl Into<String>) -> Self {
        SweepRow {
            row,
            layout: layout.into(),
            synth_cpus: String::new(),
            gpu_cpus: String::new(),
            synth_threads: 0,
            clients: 0,
            neighbour: false,
            neighbour_detail: None,
            gpu_only_mean_gpu_s: None,
            gpu_vs_gpu_only: None,
            gpu_vs_gpu_only_same_batch: None,
            same_batch_pct: None,
            latency_p50_s: None,
            latency_p99_s: None,
            latency_mean_s: None,
            timeline: None,
            prover_cpu_s_per_partition: None,
            prover_cpu_vs_gpu: None,
        }
    }

    /// Sets the latency figures from every job's latency, seconds.
    pub fn with_latencies(mut self, latencies: &[f64]) -> Self {
        self.latency_p50_s = percentile(latencies, 50.0);
        self.latency_p99_s = percentile(latencies, 99.0);
        self.latency_mean_s = mean(latencies.iter().copied());
        self
    }

    /// Sets the GPU-only baseline (its mean GPU time per partition and its batches by size)
    /// and the ratios to it.
    pub fn with_baseline(mut self, baseline: Option<(f64, &[BatchSizeGpu])>) -> Self {
        self.gpu_only_mean_gpu_s = baseline.map(|b| b.0);
        self.gpu_vs_gpu_only = match (self.row.mean_gpu_s, baseline) {
            (Some(a), Some((b, _))) if b > 0.0 => Some(a / b),
            _ => None,
        };
        let (mut ours, mut theirs, mut covered) = (0.0, 0.0, 0usize);
        for b in &self.row.gpu_by_batch {
            let same = baseline.and_then(|(_, by)| by.iter().find(|g| g.size == b.size));
            if let Some(g) = same.filter(|g| g.mean_gpu_s > 0.0) {
                let n = b.size * b.batches;
                ours += b.mean_gpu_s * n as f64;
                theirs += g.mean_gpu_s * n as f64;
                covered += n;
            }
        }
        let all: usize = self
            .row
            .gpu_by_batch
            .iter()
            .map(|b| b.size * b.batches)
            .sum();
        if covered > 0 && theirs > 0.0 {
            self.gpu_vs_gpu_only_same_batch = Some(ours / theirs);
            self.same_batch_pct = Some(100.0 * covered as f64 / all as f64);
        }
        self
    }
}

/// What a sweep wrote (`sweep.json`): the rows and what they were measured on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    /// What was proved (`porep:StackedDrg2KiBV1_1`).
    pub workload: String,
    /// The prover backend.
    pub backend: String,
    /// The machine's cpus and SMT siblings, in words.
    pub machine: String,
    /// The command line.
    #[serde(default)]
    pub command: String,
    /// Every row, in the order measured.
    pub rows: Vec<SweepRow>,
    /// Layouts skipped and why, and other remarks.
    #[serde(default)]
    pub notes: Vec<String>,
    /// The config sections of the best split row ([`crate::layout::recommend`]).
    #[serde(default)]
    pub recommendation: Option<String>,
}

/// The sweep table: one aligned line per row (`-` where a figure is undefined; `-j` 0 is a
/// GPU-only capacity row).
pub fn render_sweep_table(rows: &[SweepRow]) -> String {
    let header = [
        "layout",
        "mode",
        "neighbour",
        "-j",
        "synth",
        "jobs",
        "s/proof",
        "steady",
        "proofs/min",
        "gpu busy %",
        "gpu s/part",
        "gpu/gpu-only",
        "same batch",
        "p50 s",
        "p99 s",
        "synth s",
        "synth p50",
        "synth p99",
        "nested",
        "cpu/gpu",
    ];
    let opt = |v: Option<f64>, digits: usize| {
        v.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
    };
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.layout.clone(),
                r.row.mode.clone(),
                if r.neighbour { "hog" } else { "-" }.to_string(),
                r.clients.to_string(),
                r.synth_threads.to_string(),
                r.row.proofs.to_string(),
                opt(r.row.s_per_proof, 4),
                opt(r.row.steady_s_per_proof, 4),
                opt(r.row.proofs_per_min, 1),
                opt(r.row.gpu_busy_pct, 1),
                opt(r.row.mean_gpu_s, 4),
                opt(r.gpu_vs_gpu_only, 3),
                same_batch(r, "-"),
                opt(r.latency_p50_s, 2),
                opt(r.latency_p99_s, 2),
                opt(r.row.mean_synth_s, 3),
                opt(r.row.synth_phases.synthesis.p50_s, 3),
                opt(r.row.synth_phases.synthesis.p99_s, 3),
                r.row.nested_syntheses.to_string(),
                opt(r.prover_cpu_vs_gpu, 3),
            ]
        })
        .collect();
    aligned(&header, &cells, 3)
}

/// `gpu_vs_gpu_only_same_batch` and the share it covers (`0.998 (31%)`), `none` where undefined.
fn same_batch(r: &SweepRow, none: &str) -> String {
    match (r.gpu_vs_gpu_only_same_batch, r.same_batch_pct) {
        (Some(x), Some(p)) => format!("{x:.3} ({p:.0}%)"),
        _ => none.to_string(),
    }
}

/// `header` and `cells` as aligned columns, the first `text_cols` left-aligned, the others
/// right-aligned, with a rule under the header.
fn aligned(header: &[&str], cells: &[Vec<String>], text_cols: usize) -> String {
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            cells
                .iter()
                .map(|r| r[c].chars().count())
                .chain([header[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |out: &mut String, row: &[String]| {
        let mut l = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                l.push_str("  ");
            }
            let w = widths[c];
            if c < text_cols {
                let _ = write!(l, "{cell:<w$}");
            } else {
                let _ = write!(l, "{cell:>w$}");
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    let mut out = String::new();
    line(
        &mut out,
        &header.iter().map(|h| h.to_string()).collect::<Vec<_>>(),
    );
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    line(&mut out, &rule);
    for r in cells {
        line(&mut out, r);
    }
    out
}

/// The sweep table as Markdown (for `report.md` and BENCHMARKS.md).
pub fn sweep_markdown(rows: &[SweepRow]) -> String {
    let mut out = String::from(
        "| layout | mode | neighbour | jobs in flight | synth workers | jobs | s/proof | \
         steady s/proof | proofs/min | GPU busy % | GPU s/partition | GPU / GPU-only | \
         same batch size (share) | p50 s | p99 s | mean synth s | synth p50 / p99 s | \
         nested syntheses | prover CPU / GPU |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let opt = |v: Option<f64>, digits: usize| {
        v.map_or_else(|| "–".to_string(), |v| format!("{v:.digits$}"))
    };
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} |",
            r.layout.replace('|', "/"),
            r.row.mode,
            if r.neighbour { "hog" } else { "–" },
            if r.clients == 0 {
                "capacity".to_string()
            } else {
                r.clients.to_string()
            },
            r.synth_threads,
            r.row.proofs,
            opt(r.row.s_per_proof, 4),
            opt(r.row.steady_s_per_proof, 4),
            opt(r.row.proofs_per_min, 1),
            opt(r.row.gpu_busy_pct, 1),
            opt(r.row.mean_gpu_s, 4),
            opt(r.gpu_vs_gpu_only, 3),
            same_batch(r, "–"),
            opt(r.latency_p50_s, 2),
            opt(r.latency_p99_s, 2),
            opt(r.row.mean_synth_s, 3),
            opt(r.row.synth_phases.synthesis.p50_s, 3),
            opt(r.row.synth_phases.synthesis.p99_s, 3),
            r.row.nested_syntheses,
            opt(r.prover_cpu_vs_gpu, 3),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::tests::{ev, sample};
    use crate::timeline::Timeline;
    use EventKind::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn phase_percentiles_count_only_the_syntheses_that_recorded_the_phase() {
        // Four syntheses of 100, 200, 300 and 1000 ms; the first two pre-compiled (a witness
        // pass of 40 ms each).
        let mut events = Vec::new();
        for (part, ms) in [(0u32, 100u64), (1, 200), (2, 300), (3, 1000)] {
            let t0 = u64::from(part) * 2000;
            events.push(ev(SynthStart, 1, part, 10, t0));
            if part < 2 {
                events.push(ev(WitnessEnd, 1, part, 10, t0 + 40));
            }
            events.push(ev(SynthEnd, 1, part, 10, t0 + ms));
        }
        let s = TimelineStats::from_timeline(&Timeline::from_events(events));
        let p = s.synth_phases;
        assert!(close(p.synthesis.p50_s.unwrap(), 0.2));
        assert!(close(p.synthesis.p99_s.unwrap(), 1.0));
        assert!(close(p.witness.p50_s.unwrap(), 0.04));
        // 60 and 160 ms of products: the median is the first by nearest rank.
        assert!(close(p.products.p50_s.unwrap(), 0.06));
        assert!(close(p.products.p99_s.unwrap(), 0.16));
        assert_eq!(p.slot_wait, Percentiles::default());
        assert_eq!(s.nested_syntheses, 0);
        let line = p.line();
        assert!(
            line.starts_with("synthesis p50 0.200 / p99 1.000"),
            "{line}"
        );
        assert!(!line.contains("slot wait"), "{line}");
    }

    #[test]
    fn stats_of_a_known_timeline() {
        let s = TimelineStats::from_timeline(&sample());
        assert_eq!(
            (s.proofs, s.syntheses_started, s.syntheses, s.gpu_batches),
            (3, 3, 3, 2)
        );
        // First SYNTH_START at 0 → last PROOF_DONE at 262 ms.
        assert!(close(s.wall_s, 0.262));
        assert!(close(s.proofs_per_s.unwrap(), 3.0 / 0.262));
        assert!(close(s.s_per_proof.unwrap(), 0.262 / 3.0));
        assert!(close(s.proofs_per_min.unwrap(), 180.0 / 0.262));
        // GPU busy 130–170 and 240–260: 60 ms over a GPU span of 130 ms and a wall of 262 ms.
        assert!(close(s.gpu_busy_s, 0.060));
        assert!(close(s.gpu_span_s, 0.130));
        assert!(close(s.gpu_busy_pct_of_gpu_span.unwrap(), 6000.0 / 130.0));
        assert!(close(s.gpu_busy_pct_of_wall.unwrap(), 6000.0 / 262.0));
        assert_eq!(s.idle_gaps.count, 1);
        assert!(close(s.idle_gaps.mean_s.unwrap(), 0.070));
        assert!(close(s.idle_gaps.max_s.unwrap(), 0.070));
        assert!(close(s.idle_gaps.p50_s.unwrap(), 0.070));
        // Synthesis 100, 120, 100 ms.
        assert!(close(s.mean_synth_s.unwrap(), 0.320 / 3.0));
        // Batch of 2 in 40 ms and of 1 in 20 ms: 60 ms over 3 proofs.
        assert!(close(s.mean_gpu_s.unwrap(), 0.020));
        assert!(close(s.mean_batch.unwrap(), 1.5));
        // Ring waits 30, 10, 10 ms.
        assert!(close(s.mean_ring_wait_s.unwrap(), 0.050 / 3.0));
    }

    #[test]
    fn gaps_percentiles() {
        let g = gap_stats(&[5_000_000, 1_000_000, 3_000_000, 9_000_000]);
        assert_eq!(g.count, 4);
        assert!(close(g.total_s, 0.018));
        assert!(close(g.mean_s.unwrap(), 0.0045));
        assert!(close(g.max_s.unwrap(), 0.009));
        assert!(close(g.p50_s.unwrap(), 0.003));
        assert_eq!(gap_stats(&[]), GapStats::default());
    }

    #[test]
    fn overlapping_gpu_intervals_count_once() {
        let t = Timeline::from_events([
            ev(SynthStart, 1, 0, 1, 0),
            ev(GpuStart, 1, 0, 2, 100),
            ev(GpuStart, 2, 0, 3, 150),
            ev(GpuEnd, 1, 0, 2, 200),
            ev(GpuEnd, 2, 0, 3, 250),
            ev(GpuStart, 3, 0, 2, 300),
            ev(GpuEnd, 3, 0, 2, 400),
            ev(ProofDone, 3, 0, 9, 400),
        ]);
        let s = TimelineStats::from_timeline(&t);
        assert!(close(s.gpu_busy_s, 0.250));
        assert!(close(s.gpu_span_s, 0.300));
        assert_eq!(s.idle_gaps.count, 1);
        assert!(close(s.idle_gaps.max_s.unwrap(), 0.050));
        assert!(close(s.mean_gpu_s.unwrap(), 0.300 / 3.0));
        assert!(close(s.gpu_busy_pct_of_wall.unwrap(), 62.5));
    }

    #[test]
    fn empty_and_partial_timelines_do_not_panic() {
        let s = TimelineStats::from_timeline(&Timeline::new());
        assert_eq!(s, TimelineStats::default());
        let partial = Timeline::from_events([
            ev(GpuEnd, 1, 0, 2, 10),
            ev(SynthStart, 1, 0, 1, 20),
            ev(ProofDone, 7, 0, 9, 5),
        ]);
        let s = TimelineStats::from_timeline(&partial);
        assert_eq!((s.proofs, s.syntheses_started, s.syntheses), (1, 1, 0));
        assert_eq!(s.unpaired_ends, 1);
        // Last PROOF_DONE (5 ms) is before the first SYNTH_START (20 ms): no span.
        assert_eq!(s.wall_s, 0.0);
        assert_eq!(s.proofs_per_s, None);
        assert_eq!(s.mean_gpu_s, None);
        assert_eq!(s.gpu_busy_pct_of_gpu_span, None);
        let row = BenchRow::from_stats("c", "m", &s);
        assert!(render_table(&[row]).contains(" - "));
    }

    #[test]
    fn synth_only_rows_count_syntheses() {
        let t = Timeline::from_events([
            ev(SynthStart, 1, 0, 1, 0),
            ev(SynthStart, 2, 0, 1, 0),
            ev(SynthEnd, 1, 0, 1, 400),
            ev(SynthEnd, 2, 0, 1, 500),
        ]);
        let s = TimelineStats::from_timeline(&t);
        assert_eq!(s.proofs, 0);
        assert!(close(s.wall_s, 0.5));
        let row = BenchRow::from_synth_stats("16 cores", "synth-only", &s);
        assert_eq!(row.proofs, 2);
        assert!(close(row.proofs_per_s.unwrap(), 4.0));
        assert!(close(row.s_per_proof.unwrap(), 0.25));
        assert_eq!(row.gpu_busy_pct, None);
    }

    #[test]
    fn steady_rate_leaves_out_fill_and_drain() {
        // 12 proofs: the first after 1 s of fill, then one per 100 ms, the last after a 2 s
        // drain. The middle half (completions 3 to 9) runs at 100 ms each.
        let mut events = vec![ev(SynthStart, 0, 0, 1, 0)];
        let mut t = 1000;
        for j in 0..12u64 {
            events.push(ev(ProofDone, j, 0, 1, t));
            t += if j == 10 { 2000 } else { 100 };
        }
        let s = TimelineStats::from_timeline(&Timeline::from_events(events.clone()));
        assert_eq!(s.proofs, 12);
        assert!(close(s.steady_s_per_proof.unwrap(), 0.100));
        assert!(s.s_per_proof.unwrap() > 0.3);
        let row = BenchRow::from_stats("c", "split", &s);
        assert_eq!(row.steady_s_per_proof, s.steady_s_per_proof);
        // Under 8 proofs there is no steady rate.
        events.truncate(1 + STEADY_MIN_PROOFS - 1);
        let s = TimelineStats::from_timeline(&Timeline::from_events(events));
        assert_eq!(s.steady_s_per_proof, None);
        // A table written before the field existed still reads.
        let mut v = serde_json::to_value(&row).unwrap();
        v.as_object_mut().unwrap().remove("steady_s_per_proof");
        let back: BenchRow = serde_json::from_value(v).unwrap();
        assert_eq!(back.steady_s_per_proof, None);
    }

    #[test]
    fn table_is_aligned() {
        let a = BenchRow::from_stats(
            "batch 10",
            "monolithic",
            &TimelineStats::from_timeline(&sample()),
        );
        let b = BenchRow::from_stats("gpu 2 cores / synth 14", "split", &TimelineStats::default());
        let table = render_table(&[a, b]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4, "{table}");
        assert!(lines[0].starts_with("config"));
        assert!(lines[1].chars().all(|c| c == '-' || c == ' '));
        // The `mode` column starts at the same place on every line.
        let mode_at = lines[0].find("mode").unwrap();
        assert_eq!(&lines[2][mode_at..mode_at + 10], "monolithic");
        assert_eq!(&lines[3][mode_at..mode_at + 5], "split");
        // Numbers are right-aligned: the `s/proof` column ends at the same place.
        let end = lines[0].find("s/proof").unwrap() + "s/proof".len();
        assert_eq!(&lines[2][end - 6..end], "0.0873");
        assert_eq!(&lines[3][end - 1..end], "-");
    }

    #[test]
    fn json_rows_and_ratio() {
        let split = BenchRow {
            proofs_per_s: Some(4.9),
            ..BenchRow::from_stats("c", "split", &TimelineStats::default())
        };
        let synth = BenchRow {
            proofs_per_s: Some(5.0),
            ..BenchRow::from_stats("c", "synth-only", &TimelineStats::default())
        };
        let gpu = BenchRow {
            proofs_per_s: Some(7.0),
            ..BenchRow::from_stats("c", "gpu-only", &TimelineStats::default())
        };
        let v = rows_to_json(&[split.clone(), synth.clone()]);
        assert_eq!(v[0]["mode"], "split");
        assert_eq!(v[1]["proofs_per_s"], 5.0);
        assert!(v[0]["mean_gpu_s"].is_null());
        let caps = [synth.clone(), gpu.clone()];
        let (r, min) = capacity_ratio(&split, &caps).unwrap();
        assert!(close(r, 0.98));
        assert_eq!(min.mode, "synth-only");
        let line = ratio_line(&split, &[gpu, synth]);
        assert!(line.starts_with("split / min(capacities) = 0.98"), "{line}");
        assert!(ratio_line(&split, &[]).contains("missing"));
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let v = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(percentile(&v, 50.0), Some(3.0));
        assert_eq!(percentile(&v, 20.0), Some(1.0));
        assert_eq!(percentile(&v, 21.0), Some(2.0));
        assert_eq!(percentile(&v, 99.0), Some(5.0));
        assert_eq!(percentile(&v, 100.0), Some(5.0));
        // 100 values 1..=100: p99 is the 99th, p50 the 50th.
        let h: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(percentile(&h, 99.0), Some(99.0));
        assert_eq!(percentile(&h, 50.0), Some(50.0));
        assert_eq!(percentile(&h, 0.5), Some(1.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&v, 0.0), None);
        assert_eq!(percentile(&v, 101.0), None);
        assert_eq!(percentile(&v, f64::NAN), None);
        // A NaN sorts last.
        assert_eq!(percentile(&[f64::NAN, 1.0], 50.0), Some(1.0));
    }

    /// GPU time per partition by batch size, and the ratio to a baseline taken size for size
    /// over the sizes both runs made.
    #[test]
    fn gpu_time_compares_size_for_size() {
        let stats = TimelineStats::from_timeline(&sample());
        let sizes: Vec<(usize, usize)> = stats
            .gpu_by_batch
            .iter()
            .map(|b| (b.size, b.batches))
            .collect();
        assert_eq!(sizes, [(1, 1), (2, 1)]);
        let by = |v: &[(usize, usize, f64)]| -> Vec<BatchSizeGpu> {
            v.iter()
                .map(|&(size, batches, mean_gpu_s)| BatchSizeGpu {
                    size,
                    batches,
                    mean_gpu_s,
                })
                .collect()
        };
        // 15 singles at 23 ms and 3 batches of ten at 19.5 ms; the GPU-only run made batches
        // of ten (19.6 ms) and one of eight.
        let row = BenchRow {
            mean_gpu_s: Some((15.0 * 0.023 + 30.0 * 0.0195) / 45.0),
            gpu_by_batch: by(&[(1, 15, 0.023), (10, 3, 0.0195)]),
            ..BenchRow::from_stats("c", "split", &TimelineStats::default())
        };
        let base = by(&[(8, 1, 0.0197), (10, 4, 0.0196)]);
        let r = SweepRow::new(row.clone(), "l").with_baseline(Some((0.0196, &base)));
        assert!(r.gpu_vs_gpu_only.unwrap() > 1.05);
        assert!(close(
            r.gpu_vs_gpu_only_same_batch.unwrap(),
            0.0195 / 0.0196
        ));
        assert!(close(r.same_batch_pct.unwrap(), 100.0 * 30.0 / 45.0));
        assert!(render_sweep_table(std::slice::from_ref(&r)).contains("0.995 (67%)"));
        // No size in common: no same-batch ratio.
        let r = SweepRow::new(row, "l").with_baseline(Some((0.0196, &base[..1])));
        assert_eq!(
            (r.gpu_vs_gpu_only_same_batch, r.same_batch_pct),
            (None, None)
        );
    }

    #[test]
    fn sweep_rows_round_trip_through_json_and_render() {
        let stats = TimelineStats::from_timeline(&sample());
        let mut r = SweepRow::new(BenchRow::from_stats("c", "split", &stats), "gpu 1 core")
            .with_latencies(&[0.5, 0.25, 1.0, 0.75])
            .with_baseline(Some((0.010, &[])));
        r.clients = 4;
        r.neighbour = true;
        assert_eq!(r.latency_p50_s, Some(0.5));
        assert_eq!(r.latency_p99_s, Some(1.0));
        assert_eq!(r.latency_mean_s, Some(0.625));
        // mean GPU 20 ms over a 10 ms baseline.
        assert!(close(r.gpu_vs_gpu_only.unwrap(), 2.0));
        assert_eq!(
            SweepRow::new(r.row.clone(), "x")
                .with_baseline(None)
                .gpu_vs_gpu_only,
            None
        );
        let report = SweepReport {
            workload: "pubinputs:2".into(),
            rows: vec![r.clone()],
            ..Default::default()
        };
        let json = serde_json::to_value(&report).unwrap();
        // The BenchRow fields are flattened into the row.
        assert_eq!(json["rows"][0]["mode"], "split");
        assert_eq!(json["rows"][0]["clients"], 4);
        let back: SweepReport = serde_json::from_value(json).unwrap();
        assert_eq!(back, report);
        let table = render_sweep_table(&[r.clone()]);
        assert!(table.lines().nth(2).unwrap().contains("hog"), "{table}");
        assert!(table.contains("2.000"), "{table}");
        let md = sweep_markdown(&[r]);
        assert_eq!(md.lines().count(), 3, "{md}");
        assert!(md
            .lines()
            .nth(2)
            .unwrap()
            .starts_with("| gpu 1 core | split | hog | 4 |"));
    }
}
