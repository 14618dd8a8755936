//! The isolation experiments: the in-process pipeline and the split pipeline side by side on
//! the same workload, kernels, backend and cores, over
//! - cpuset layouts ([`super::layout`]: gpu-proc core counts, SMT placements) and synthesis
//!   concurrencies: one started pipeline per layout, concurrency and mode;
//! - client concurrency: `c` closed-loop clients, each submitting a job, waiting for its proof,
//!   checking it ([`Workload::verify`]) and submitting the next; a level at `c` proves
//!   `min(max_proofs, per_client × c)` jobs (every level if `per_client` is 0: `max_proofs`);
//! - a noisy neighbour ([`super::hog`]) on the synthesis cpus, off and on.
//!
//! On each start, before the levels: `warm_up` unmeasured jobs, then the mode's GPU-only
//! capacity (the split's gpu-procs paused while `gpu_only_proofs` jobs are synthesized into the
//! ring, then resumed: row `gpu-only`; the in-process prover paused the same way: row
//! `prove-only`), whose mean GPU time per partition is the baseline of the start's rows
//! ([`SweepRow::gpu_vs_gpu_only`]).
//!
//! The in-process pipeline gets the same cores as the split one (the layout's synth-proc and
//! gpu-proc cpus together, [`InProcessOptions::cpus`]), as many synthesis threads as synth-proc
//! has workers, and a channel bounded so that synthesizing plus ready partitions never exceed
//! the ring's slots. An in-process start whose threads, cpus and neighbour cpus were already
//! measured at an earlier layout is not measured again.
//!
//! Every level writes its TIMELINE log, Chrome trace and waterfall to the output dir; the row
//! names the log ([`SweepRow::timeline`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;
use kernels::Backend;
use launcher::pinning::CpuList;
use launcher::pipeline::{JobHandle, Pipeline, PipelineSettings};
use shm_protocol::control::TimelineEvent;

use super::hog::Hog;
use super::layout::LayoutChoice;
use super::local::{self, InProcess, InProcessOptions};
use super::workload::{proof_bytes, Workload};
use crate::report::{self, BenchRow, SweepRow, TimelineStats};
use crate::synthesis::Synthesizer;
use crate::timeline::Timeline;

/// A pipeline shape the sweep measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// [`local::InProcess`]: synthesis threads and the prover in this process.
    InProcess,
    /// synth-proc and gpu-proc as pinned processes, through the ring.
    Split,
}

impl Mode {
    /// The row's mode name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::InProcess => "inprocess",
            Mode::Split => "split",
        }
    }

    /// The mode name of its GPU-only capacity row.
    pub fn capacity_name(self) -> &'static str {
        match self {
            Mode::InProcess => "prove-only",
            Mode::Split => "gpu-only",
        }
    }
}

/// What one sweep measures.
#[derive(Clone, Debug)]
pub struct SweepPlan {
    /// The modes, in order, at each layout.
    pub modes: Vec<Mode>,
    /// Modes measured for their GPU-only capacity only (no levels).
    pub capacity_only: Vec<Mode>,
    /// Jobs of each start's GPU-only capacity run; 0: none (no baseline, no inflation column).
    pub gpu_only_proofs: usize,
    /// The layouts.
    pub layouts: Vec<LayoutChoice>,
    /// Synthesis concurrencies (0: one worker per synthesis cpu).
    pub synth: Vec<usize>,
    /// Client concurrencies (jobs in flight), in order.
    pub clients: Vec<usize>,
    /// Neighbour states, in order (`false`: none, `true`: the hog).
    pub neighbour: Vec<bool>,
    /// Jobs of a level at most.
    pub max_proofs: usize,
    /// Jobs per client of a level (see the module doc); 0: `max_proofs` at every level.
    pub per_client: usize,
    /// MiB per hog thread (default: [`super::hog::default_mib`]).
    pub hog_mib: Option<usize>,
    /// Where the hog runs (default: the layout's synthesis cpus).
    pub hog_cpus: Option<CpuList>,
    /// Unmeasured jobs at each start.
    pub warm_up: usize,
    /// Partitions per backend call (the in-process prover's; the split's is in its settings).
    pub batch: usize,
    /// Where the timelines and waterfalls go.
    pub out_dir: PathBuf,
    /// This executable (the hog is its hidden subcommand).
    pub program: PathBuf,
}

impl SweepPlan {
    /// Jobs of a level at concurrency `clients`.
    pub fn proofs_for(&self, clients: usize) -> usize {
        let n = self.max_proofs.max(1);
        if self.per_client == 0 {
            n
        } else {
            n.min(self.per_client.saturating_mul(clients.max(1)))
        }
    }
}

/// Runs the sweep on `workload`: `base` is the split pipeline's settings (its circuit the
/// workload's), `backend` the in-process modes' prover (needed when the plan has
/// [`Mode::InProcess`]) and `synthesis` how they synthesize (as `base` says the split pipeline
/// does). Returns every row in the order measured, and notes.
pub fn run(
    plan: &SweepPlan,
    base: &PipelineSettings,
    workload: &Workload,
    backend: Option<&dyn Backend>,
    synthesis: &Synthesizer,
) -> anyhow::Result<(Vec<SweepRow>, Vec<String>)> {
    std::fs::create_dir_all(&plan.out_dir)
        .with_context(|| format!("cannot create `{}`", plan.out_dir.display()))?;
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let tickets = AtomicU64::new(0);
    let mut measured_inprocess: Vec<(usize, CpuList, CpuList, String)> = Vec::new();
    let parts = workload.partitions().max(1);
    let top_clients = plan.clients.iter().copied().max().unwrap_or(1);
    for layout in &plan.layouts {
        for &synth in &plan.synth {
            let threads = if synth == 0 {
                layout.synth.len()
            } else {
                synth
            };
            let slots = base.slots.max(plan.gpu_only_proofs * parts);
            if slots < threads + 1 {
                notes.push(format!(
                    "{}: {slots} ring slots for {threads} synthesis workers: synthesis is held \
                     back by the ring (raise --slots)",
                    layout.name
                ));
            }
            let hog_cpus = plan
                .hog_cpus
                .clone()
                .unwrap_or_else(|| layout.synth.clone());
            let ctx = Ctx {
                plan,
                workload,
                layout,
                threads,
                hog_cpus,
                tickets: &tickets,
            };
            for &mode in &plan.modes {
                match mode {
                    Mode::InProcess => {
                        let backend = backend.context("the in-process mode needs a backend")?;
                        let key = (
                            threads,
                            layout.all(),
                            if plan.neighbour.contains(&true) {
                                ctx.hog_cpus.clone()
                            } else {
                                CpuList::new()
                            },
                        );
                        if let Some(m) = measured_inprocess
                            .iter()
                            .find(|m| (m.0, &m.1, &m.2) == (key.0, &key.1, &key.2))
                        {
                            notes.push(format!(
                                "inprocess at `{}`: the same threads and cpus as at `{}`: not \
                                 measured again",
                                layout.name, m.3
                            ));
                            continue;
                        }
                        measured_inprocess.push((key.0, key.1, key.2, layout.name.clone()));
                        let opts = InProcessOptions {
                            synth_threads: threads,
                            max_batch: plan.batch.max(1),
                            queue_depth: slots.saturating_sub(threads).max(1),
                            cpus: Some(layout.all()),
                        };
                        let out = local::with_inprocess(
                            backend,
                            synthesis,
                            workload.circuit(),
                            &opts,
                            |ip| ctx.measure(&InProcessEngine { ip }, Mode::InProcess),
                        )
                        .context("the in-process pipeline")??;
                        rows.extend(out);
                    }
                    Mode::Split => {
                        let mut s = base.clone();
                        s.slots = slots;
                        s.synth_concurrency = synth;
                        s.synth_cpus = Some(layout.synth.clone());
                        anyhow::ensure!(
                            s.gpus.len() == layout.gpus.len(),
                            "layout `{}` has {} gpu-procs, the settings {}",
                            layout.name,
                            layout.gpus.len(),
                            s.gpus.len()
                        );
                        for (g, cpus) in s.gpus.iter_mut().zip(&layout.gpus) {
                            g.cpus = Some(cpus.clone());
                        }
                        let pipeline = Pipeline::start(s)?;
                        pipeline.wait_ready(Duration::from_secs(900))?;
                        let engine = SplitEngine {
                            pipeline: &pipeline,
                        };
                        let out = ctx.measure(&engine, Mode::Split);
                        pipeline.shutdown();
                        rows.extend(out?);
                    }
                }
            }
        }
    }
    if top_clients > plan.max_proofs {
        notes.push(format!(
            "-n {} is below the highest concurrency {top_clients}: that level ran with {} \
             clients",
            plan.max_proofs, plan.max_proofs
        ));
    }
    Ok((rows, notes))
}

/// A started pipeline, as the clients see it.
trait Engine: Sync {
    /// A job on its way.
    type Pending: Send;
    /// Submits job `i` of `workload`.
    fn submit(&self, workload: &Workload, i: u64) -> anyhow::Result<Self::Pending>;
    /// Waits for its partitions' proof bytes.
    fn wait(&self, pending: Self::Pending) -> anyhow::Result<Vec<Vec<u8>>>;
    /// The events since the last call.
    fn take_events(&self) -> Vec<TimelineEvent>;
    /// Stops proving (synthesized partitions wait).
    fn pause(&self) -> anyhow::Result<()>;
    /// Proves again.
    fn resume(&self) -> anyhow::Result<()>;
    /// Synthesized partitions waiting for the paused prover; an error when the pipeline broke.
    fn waiting(&self) -> anyhow::Result<usize>;
    /// CPU seconds (user + system) the prover processes used so far, where they can be read
    /// (the split pipeline's gpu-procs); the in-process prover shares its process and has none.
    fn prover_cpu_s(&self) -> Option<f64> {
        None
    }
}

/// User + system CPU seconds of process `pid`, every thread: its CPU-time clock
/// (`clock_getcpuclockid`, nanoseconds), or `/proc/PID/stat`'s clock ticks where that clock cannot
/// be read. The ticks (10 ms) are too coarse for a level of one job in flight, where a gpu-proc
/// that finishes its proofs on the device spends a few tens of ms in all.
fn process_cpu_s(pid: u32) -> Option<f64> {
    process_cpu_clock_s(pid).or_else(|| process_cpu_ticks_s(pid))
}

/// `pid`'s CPU-time clock, in seconds.
fn process_cpu_clock_s(pid: u32) -> Option<f64> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `clock` is a live, writable clockid_t for the duration of the call.
    if unsafe { libc::clock_getcpuclockid(pid, &mut clock) } != 0 {
        return None;
    }
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a live, writable timespec for the duration of the call.
    if unsafe { libc::clock_gettime(clock, &mut now) } != 0 {
        return None;
    }
    Some(now.tv_sec as f64 + now.tv_nsec as f64 * 1e-9)
}

/// `pid`'s user + system clock ticks (`/proc/PID/stat`, fields 14 and 15), in seconds.
fn process_cpu_ticks_s(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: fields count from after it.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf reads a constant of the system; no memory is passed.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| ticks as f64 / hz as f64)
}

struct SplitEngine<'a> {
    pipeline: &'a Pipeline,
}

impl Engine for SplitEngine<'_> {
    type Pending = JobHandle;

    fn submit(&self, workload: &Workload, i: u64) -> anyhow::Result<JobHandle> {
        Ok(self
            .pipeline
            .submit_job(workload.circuit(), &workload.request(i))?)
    }

    fn wait(&self, pending: JobHandle) -> anyhow::Result<Vec<Vec<u8>>> {
        let o = pending.wait()?;
        o.result
            .map_err(|e| anyhow::anyhow!("job {} failed: {e}", o.job_id))
    }

    fn take_events(&self) -> Vec<TimelineEvent> {
        self.pipeline.take_timeline()
    }

    fn pause(&self) -> anyhow::Result<()> {
        Ok(self.pipeline.pause_gpus(Duration::from_secs(60))?)
    }

    fn resume(&self) -> anyhow::Result<()> {
        Ok(self.pipeline.resume_gpus()?)
    }

    fn waiting(&self) -> anyhow::Result<usize> {
        if let Some(f) = self.pipeline.status().fatal {
            anyhow::bail!("{f}");
        }
        Ok(self.pipeline.ring().counts().ready)
    }

    fn prover_cpu_s(&self) -> Option<f64> {
        let status = self.pipeline.status();
        let pids: Vec<u32> = status
            .children
            .iter()
            .filter(|c| c.role.starts_with("gpu-proc"))
            .filter_map(|c| c.pid)
            .collect();
        (!pids.is_empty())
            .then(|| pids.iter().map(|&p| process_cpu_s(p)).sum::<Option<f64>>())
            .flatten()
    }
}

struct InProcessEngine<'a, 'b> {
    ip: &'a InProcess<'b>,
}

impl Engine for InProcessEngine<'_, '_> {
    type Pending = local::InProcessHandle;

    fn submit(&self, workload: &Workload, i: u64) -> anyhow::Result<local::InProcessHandle> {
        // Opened from the request bytes for every job, as a service opens what it receives.
        Ok(self.ip.submit(workload.open(i)?)?)
    }

    fn wait(&self, pending: local::InProcessHandle) -> anyhow::Result<Vec<Vec<u8>>> {
        pending.wait()?.proofs.iter().map(proof_bytes).collect()
    }

    fn take_events(&self) -> Vec<TimelineEvent> {
        self.ip.take_timeline()
    }

    fn pause(&self) -> anyhow::Result<()> {
        self.ip.pause_prover();
        Ok(())
    }

    fn resume(&self) -> anyhow::Result<()> {
        self.ip.resume_prover();
        Ok(())
    }

    fn waiting(&self) -> anyhow::Result<usize> {
        anyhow::ensure!(
            self.ip.failures() == 0,
            "a job failed in the in-process pipeline"
        );
        Ok(self.ip.held())
    }
}

/// What one level measured.
struct Level {
    wall: Duration,
    latencies: Vec<f64>,
    timeline: Timeline,
    /// CPU seconds the prover processes used during the level, where known.
    prover_cpu_s: Option<f64>,
}

/// `total` jobs through `engine` by `clients` closed-loop clients; every proof checked.
fn level<E: Engine>(
    engine: &E,
    workload: &Workload,
    tickets: &AtomicU64,
    total: usize,
    clients: usize,
    label: &str,
) -> anyhow::Result<Level> {
    let _ = engine.take_events();
    let cpu_before = engine.prover_cpu_s();
    let bar = report::progress_bar(total, label);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let done: Mutex<Vec<(f64, f64)>> = Mutex::new(Vec::with_capacity(total));
    let started = Instant::now();
    std::thread::scope(|s| -> anyhow::Result<()> {
        let threads: Vec<_> = (0..clients.clamp(1, total.max(1)))
            .map(|_| {
                s.spawn(|| -> anyhow::Result<()> {
                    // Acquire: the flag convention (stored Release below). Relaxed: a ticket
                    // counter, each value taken once, no memory depends on it.
                    while !failed.load(Ordering::Acquire)
                        && next.fetch_add(1, Ordering::Relaxed) < total
                    {
                        let i = tickets.fetch_add(1, Ordering::Relaxed);
                        let t = Instant::now();
                        let result = engine
                            .submit(workload, i)
                            .and_then(|p| engine.wait(p))
                            .and_then(|proofs| {
                                let latency = t.elapsed().as_secs_f64();
                                let at = started.elapsed().as_secs_f64();
                                workload.verify(i, &proofs)?;
                                Ok((latency, at))
                            });
                        match result {
                            Ok(v) => {
                                let mut d = done.lock().unwrap_or_else(|p| p.into_inner());
                                d.push(v);
                                bar.set_position(d.len() as u64);
                            }
                            Err(e) => {
                                failed.store(true, Ordering::Release); // the flag convention
                                return Err(e);
                            }
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        let mut first = Ok(());
        for t in threads {
            let r = t
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("a bench client panicked")));
            if first.is_ok() {
                first = r;
            }
        }
        first
    })?;
    bar.finish_and_clear();
    let done = done.into_inner().unwrap_or_else(|p| p.into_inner());
    let wall = done.iter().map(|d| d.1).fold(0.0, f64::max);
    let prover_cpu_s = match (cpu_before, engine.prover_cpu_s()) {
        // A gpu-proc restarted meanwhile reads lower: no figure then.
        (Some(a), Some(b)) if b >= a => Some(b - a),
        _ => None,
    };
    Ok(Level {
        wall: Duration::from_secs_f64(wall),
        latencies: done.iter().map(|d| d.0).collect(),
        timeline: Timeline::from_events(engine.take_events()),
        prover_cpu_s,
    })
}

/// One layout, synthesis concurrency and neighbour cpus of the sweep.
struct Ctx<'a> {
    plan: &'a SweepPlan,
    workload: &'a Workload,
    layout: &'a LayoutChoice,
    threads: usize,
    hog_cpus: CpuList,
    tickets: &'a AtomicU64,
}

impl Ctx<'_> {
    /// Everything measured on one start of `mode`: warm-up, the GPU-only capacity, then every
    /// neighbour state and client concurrency.
    fn measure<E: Engine>(&self, engine: &E, mode: Mode) -> anyhow::Result<Vec<SweepRow>> {
        let plan = self.plan;
        let mut rows = Vec::new();
        if plan.warm_up > 0 {
            level(
                engine,
                self.workload,
                self.tickets,
                plan.warm_up,
                plan.warm_up,
                "warm-up",
            )?;
        }
        let mut baseline = None;
        if plan.gpu_only_proofs > 0 {
            let (timeline, latencies) = self.gpu_only(engine, plan.gpu_only_proofs)?;
            let stats = TimelineStats::from_timeline(&timeline);
            baseline = stats.mean_gpu_s.map(|m| (m, stats.gpu_by_batch.clone()));
            let row = self.row(
                mode.capacity_name(),
                0,
                None,
                Level {
                    wall: Duration::from_secs_f64(stats.gpu_span_s.max(stats.wall_s)),
                    latencies,
                    timeline,
                    prover_cpu_s: None,
                },
                None,
            )?;
            rows.push(row);
        }
        let neighbours: &[bool] = if plan.capacity_only.contains(&mode) {
            &[]
        } else {
            &plan.neighbour
        };
        for &neighbour in neighbours {
            let hog = if neighbour {
                let mib = plan
                    .hog_mib
                    .unwrap_or_else(|| super::hog::default_mib(&self.hog_cpus));
                Some(Hog::start(&plan.program, &self.hog_cpus, mib)?)
            } else {
                None
            };
            for &c in &plan.clients {
                let label = format!(
                    "{} -j {c}{}",
                    mode.name(),
                    if neighbour { " hog" } else { "" }
                );
                let total = plan.proofs_for(c);
                let l = level(engine, self.workload, self.tickets, total, c, &label)?;
                // A level of fewer jobs than clients runs with one client per job.
                let c = c.min(total);
                rows.push(self.row(mode.name(), c, hog.as_ref(), l, baseline.as_ref())?);
            }
            drop(hog);
        }
        Ok(rows)
    }

    /// The GPU-only capacity on this start: the prover paused while `n` jobs are synthesized,
    /// then resumed; only the proving is in the timeline. Returns it and the job latencies
    /// from resume.
    fn gpu_only<E: Engine>(&self, engine: &E, n: usize) -> anyhow::Result<(Timeline, Vec<f64>)> {
        let want = n * self.workload.partitions();
        engine.pause()?;
        let submitted: anyhow::Result<Vec<(u64, E::Pending)>> = (0..n)
            .map(|_| {
                // Relaxed: a ticket counter.
                let i = self.tickets.fetch_add(1, Ordering::Relaxed);
                engine.submit(self.workload, i).map(|p| (i, p))
            })
            .collect();
        let filled = submitted.and_then(|s| {
            let deadline = Instant::now() + Duration::from_secs(3600);
            while engine.waiting()? < want {
                anyhow::ensure!(
                    Instant::now() < deadline,
                    "synthesis did not fill the prover's queue in time"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(s)
        });
        let _ = engine.take_events();
        let t = Instant::now();
        engine.resume()?;
        let mut latencies = Vec::with_capacity(n);
        let bar = report::progress_bar(n, "gpu-only");
        for (done, (i, p)) in filled?.into_iter().enumerate() {
            let proofs = engine.wait(p)?;
            latencies.push(t.elapsed().as_secs_f64());
            self.workload.verify(i, &proofs)?;
            bar.set_position(done as u64 + 1);
        }
        bar.finish_and_clear();
        Ok((Timeline::from_events(engine.take_events()), latencies))
    }

    /// A row of `mode` at concurrency `clients` (0: a capacity row), its files written.
    fn row(
        &self,
        mode: &str,
        clients: usize,
        hog: Option<&Hog>,
        level: Level,
        baseline: Option<&(f64, Vec<report::BatchSizeGpu>)>,
    ) -> anyhow::Result<SweepRow> {
        let l = self.layout;
        let timeline = &level.timeline;
        let config = format!(
            "synth cpus {} / gpu cpus {}, {}{}{}",
            l.synth,
            l.gpu_text(),
            report::plural(self.threads, "worker"),
            if clients > 0 {
                format!(", -j {clients}")
            } else {
                String::new()
            },
            if hog.is_some() { ", hog" } else { "" }
        );
        let slug: String = format!(
            "sweep-{mode}-{}-w{}-{}-j{clients}",
            l.name,
            self.threads,
            if hog.is_some() { "hog" } else { "quiet" }
        )
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
        let base = self.plan.out_dir.join(&slug);
        let mut log = Vec::new();
        timeline.write_log(&mut log)?;
        std::fs::write(base.with_extension("timeline"), log)?;
        std::fs::write(
            base.with_extension("trace.json"),
            serde_json::to_vec(&timeline.chrome_trace())?,
        )?;
        std::fs::write(base.with_extension("svg"), timeline.waterfall_svg())?;
        let stats = TimelineStats::from_timeline(timeline);
        let mut row = BenchRow::from_stats(config, mode, &stats);
        let jobs = level.latencies.len();
        let wall = level.wall.as_secs_f64();
        row.proofs = jobs;
        row.wall_s = wall;
        let rate = (jobs > 0 && wall > 0.0).then(|| jobs as f64 / wall);
        row.proofs_per_s = rate;
        row.s_per_proof = rate.map(|r| 1.0 / r);
        row.proofs_per_min = rate.map(|r| 60.0 * r);
        let mut r =
            SweepRow::new(row, &l.name).with_baseline(baseline.map(|(m, by)| (*m, by.as_slice())));
        if clients > 0 {
            // A capacity row has no client, so no job latency.
            r = r.with_latencies(&level.latencies);
        }
        r.synth_cpus = l.synth.to_string();
        r.gpu_cpus = l.gpu_text();
        r.synth_threads = self.threads;
        r.clients = clients;
        r.neighbour = hog.is_some();
        r.neighbour_detail = hog.map(|h| h.detail.clone());
        r.timeline = Some(format!("{slug}.timeline"));
        let partitions = (jobs * self.workload.partitions()) as f64;
        r.prover_cpu_s_per_partition = level
            .prover_cpu_s
            .filter(|_| partitions > 0.0)
            .map(|cpu| cpu / partitions);
        r.prover_cpu_vs_gpu = match (r.prover_cpu_s_per_partition, r.row.mean_gpu_s) {
            (Some(cpu), Some(gpu)) if gpu > 0.0 => Some(cpu / gpu),
            _ => None,
        };
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_prove_per_client_jobs_up_to_the_cap() {
        let plan = SweepPlan {
            modes: vec![Mode::Split],
            capacity_only: Vec::new(),
            gpu_only_proofs: 0,
            layouts: Vec::new(),
            synth: vec![0],
            clients: vec![1, 2, 4, 8, 16],
            neighbour: vec![false],
            max_proofs: 24,
            per_client: 3,
            hog_mib: None,
            hog_cpus: None,
            warm_up: 1,
            batch: 1,
            out_dir: PathBuf::new(),
            program: PathBuf::new(),
        };
        let n: Vec<usize> = plan.clients.iter().map(|&c| plan.proofs_for(c)).collect();
        assert_eq!(n, [3, 6, 12, 24, 24]);
        let all = SweepPlan {
            per_client: 0,
            ..plan.clone()
        };
        assert_eq!(all.proofs_for(1), 24);
        assert_eq!(Mode::InProcess.capacity_name(), "prove-only");
    }

    #[test]
    fn another_process_cpu_time_reads_to_below_a_tick() {
        // A child that spins on its CPU: the nanosecond clock and the ticks measure the same
        // time, the clock to below a tick's 10 ms.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("spawn sh");
        let pid = child.id();
        let start = std::time::Instant::now();
        let mut read = None;
        while start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
            let before = process_cpu_ticks_s(pid).expect("the child's /proc stat");
            let clock = process_cpu_clock_s(pid).expect("the child's CPU-time clock");
            let after = process_cpu_ticks_s(pid).expect("the child's /proc stat");
            if before >= 0.05 {
                read = Some((before, clock, after));
                break;
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        let (before, clock, after) = read.expect("the child ran 50 ms of CPU within 20 s");
        // The ticks are the clock's time cut down to whole ticks: read between them, the clock
        // is at least the first and within a little of the second (the kernel scales the
        // ticks' user/system split from the clock, which can leave them a tick behind it on a
        // loaded machine: two ticks of slack, seen at 1.05 ticks in CI).
        assert!(
            before <= clock + 1e-6,
            "ticks {before} s, then clock {clock} s"
        );
        assert!(
            clock < after + 0.0201,
            "clock {clock} s, then ticks {after} s"
        );
        assert!((clock * 100.0).fract() != 0.0, "{clock} s is whole ticks");
        assert!(process_cpu_s(u32::MAX).is_none());
    }
}
