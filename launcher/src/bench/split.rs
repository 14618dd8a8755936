//! The split mode measured: jobs through a real [`Pipeline`] (synth-proc and gpu-proc as pinned
//! processes, handing over through the ring), and the GPU-only capacity on pre-synthesized slots.

use std::collections::VecDeque;
use std::time::Duration;

use crate::jobs::JobOutcome;
use crate::pipeline::{Pipeline, PipelineSettings};
use crate::timeline::Timeline;

/// What a split run produced.
pub struct SplitRun {
    /// Every event of every process.
    pub timeline: Timeline,
    /// Every job's outcome, in completion order.
    pub outcomes: Vec<JobOutcome>,
    /// Pinning, page kind and cpus as the pipeline reported them at start.
    pub status: crate::pipeline::PipelineStatus,
}

/// Proves `n` one-partition jobs of the pipeline's first circuit with at most `clients` jobs in
/// flight (the client concurrency), as a proving farm's scheduler would submit them.
pub fn run_split(
    settings: PipelineSettings,
    n: usize,
    clients: usize,
    progress: &dyn Fn(usize),
) -> anyhow::Result<SplitRun> {
    let circuit = settings.circuits[0].spec.to_string();
    let pipeline = Pipeline::start(settings)?;
    pipeline.wait_ready(Duration::from_secs(600))?;
    let status = pipeline.status();
    let _ = pipeline.take_timeline();
    let mut in_flight = VecDeque::new();
    let mut outcomes = Vec::with_capacity(n);
    let mut next = 0usize;
    while outcomes.len() < n {
        while next < n && in_flight.len() < clients.max(1) {
            in_flight.push_back(pipeline.submit(&circuit, 10_000 + next as u64, 1)?);
            next += 1;
        }
        let handle = in_flight.pop_front().expect("a job is in flight");
        outcomes.push(handle.wait()?);
        progress(outcomes.len());
    }
    let timeline = Timeline::from_events(pipeline.take_timeline());
    pipeline.shutdown();
    Ok(SplitRun {
        timeline,
        outcomes,
        status,
    })
}

/// GPU-only capacity on pre-synthesized slots: after `warm_up` jobs have gone through (CUDA
/// initialised, SRS loaded), the gpu-procs are paused, `n` jobs are synthesized into the ring,
/// and the gpu-procs resume and prove them from their slots. Only that proving is measured. The
/// ring needs at least `n` slots.
pub fn run_gpu_only(
    mut settings: PipelineSettings,
    n: usize,
    warm_up: usize,
    progress: &dyn Fn(usize),
) -> anyhow::Result<SplitRun> {
    settings.slots = settings.slots.max(n).max(warm_up);
    let circuit = settings.circuits[0].spec.to_string();
    let pipeline = Pipeline::start(settings)?;
    pipeline.wait_ready(Duration::from_secs(600))?;
    let warm: Vec<_> = (0..warm_up)
        .map(|i| pipeline.submit(&circuit, 30_000 + i as u64, 1))
        .collect::<Result<Vec<_>, _>>()?;
    for h in warm {
        if let Err(e) = h.wait()?.result {
            anyhow::bail!("warm-up job failed: {e}");
        }
    }
    pipeline.pause_gpus(Duration::from_secs(60))?;
    let handles = (0..n)
        .map(|i| pipeline.submit(&circuit, 20_000 + i as u64, 1))
        .collect::<Result<Vec<_>, _>>()?;
    // Wait until every job sits READY in the ring.
    let deadline = std::time::Instant::now() + Duration::from_secs(3600);
    while pipeline.ring().counts().ready < n {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "synthesis did not fill the ring in time"
        );
        if let Some(f) = pipeline.status().fatal {
            anyhow::bail!("{f}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = pipeline.status();
    let _ = pipeline.take_timeline();
    pipeline.resume_gpus()?;
    let mut outcomes = Vec::with_capacity(n);
    for h in handles {
        outcomes.push(h.wait()?);
        progress(outcomes.len());
    }
    let timeline = Timeline::from_events(pipeline.take_timeline());
    pipeline.shutdown();
    Ok(SplitRun {
        timeline,
        outcomes,
        status,
    })
}
