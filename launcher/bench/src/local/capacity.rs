//! The capacity modes: synthesis only ([`run_synth_only`], the GPU idle) and proving only
//! ([`run_prove_only`], on partitions synthesized beforehand).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;

use kernels::job::Job;
use kernels::synth::CircuitShape;
use kernels::Backend;
use launcher::pinning::CpuList;
use rayon::prelude::*;
use shm_protocol::control::TimelineEvent;

use super::pin::{pin_or_log, RayonPin};
use super::steps::{prove, synth_one, Synthesized};
use super::{at_least_one, common_shape, invalid, work_items, Error, LocalRun, ProvedCircuit};
use crate::synthesis::Synthesizer;
use crate::timeline::Timeline;

/// Synthesis capacity: `threads` threads synthesize every partition of `jobs` with nothing
/// proving, each partition dropped once done. `progress` is called on this thread with the
/// number of syntheses done. The timeline has `SYNTH_START`/`SYNTH_END` only; measure it with
/// [`crate::report::BenchRow::from_synth_stats`].
pub fn run_synth_only(
    synthesis: &Synthesizer,
    jobs: &[Arc<dyn Job>],
    threads: usize,
    cpus: Option<&CpuList>,
    progress: &dyn Fn(usize),
) -> Result<LocalRun, Error> {
    at_least_one("threads", threads)?;
    let Some(shape) = common_shape(jobs)? else {
        return Ok(LocalRun::default());
    };
    // The synthesis threads and the rayon pool their products run on get the synthesis cpus
    // alone, as synth-proc's workers do: unpinned, a capacity measured on a 16-core host with
    // 10 synthesis cpus counted all 16 (1.6x too high on an H200 host,
    // benchmarks/2026-12-02-h200/NOTES.md).
    let _pinned = RayonPin::to(cpus)?;
    synth_only_pinned(synthesis, jobs, threads, shape, cpus, progress)
}

fn synth_only_pinned(
    synthesis: &Synthesizer,
    jobs: &[Arc<dyn Job>],
    threads: usize,
    shape: CircuitShape,
    cpus: Option<&CpuList>,
    progress: &dyn Fn(usize),
) -> Result<LocalRun, Error> {
    let items = work_items(jobs);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<Result<Vec<TimelineEvent>, Error>>();
    let mut events = Vec::new();
    let result = thread::scope(|scope| {
        let workers: Result<Vec<_>, _> = (0..threads)
            .map(|i| {
                let tx = tx.clone();
                let (next, stop, items) = (&next, &stop, &items);
                thread::Builder::new()
                    .name(format!("synth-{i}"))
                    .spawn_scoped(scope, move || {
                        pin_or_log(cpus);
                        // Acquire: pairs with the Release store of a failure below.
                        while !stop.load(Ordering::Acquire) {
                            // Relaxed: a ticket counter; each value is taken once, no other
                            // memory depends on it.
                            let t = next.fetch_add(1, Ordering::Relaxed);
                            let Some(&(j, k)) = items.get(t) else {
                                break;
                            };
                            let done =
                                synth_one(synthesis, &*jobs[j], shape, j as u64, k).map(|r| {
                                    // Not handed to any prover: keep start and end only.
                                    let mut ev = r.events;
                                    ev.truncate(2);
                                    ev
                                });
                            let failed = done.is_err();
                            if tx.send(done).is_err() || failed {
                                break;
                            }
                        }
                    })
            })
            .collect();
        drop(tx);
        let mut outcome = workers
            .map(|_| ())
            .map_err(|_| invalid("threads", "cannot spawn a synthesis thread"));
        let mut done = 0;
        if outcome.is_ok() {
            for msg in rx.iter() {
                match msg {
                    Ok(ev) => {
                        events.extend(ev);
                        done += 1;
                        progress(done);
                    }
                    Err(e) => {
                        // Release: the workers' Acquire load stops them.
                        stop.store(true, Ordering::Release);
                        outcome = Err(e);
                        break;
                    }
                }
            }
        }
        outcome
    });
    result?;
    Ok(LocalRun {
        timeline: Timeline::from_events(events),
        proofs: Vec::new(),
    })
}

/// Proving capacity: synthesize the first `batch.min(partitions)` partitions of `jobs` first
/// (not recorded), then make `n` proofs in batches of `batch`, cycling through those partitions
/// (proof `i` has job id `i` in the events and proves pre-synthesized partition
/// `i % batch`). `progress` is called with the number of proofs done after each batch.
pub fn run_prove_only(
    backend: &dyn Backend,
    synthesis: &Synthesizer,
    jobs: &[Arc<dyn Job>],
    n: usize,
    batch: usize,
    progress: &dyn Fn(usize),
) -> Result<LocalRun, Error> {
    at_least_one("batch", batch)?;
    let Some(shape) = common_shape(jobs)? else {
        return Ok(LocalRun::default());
    };
    let items = work_items(jobs);
    let distinct = batch.min(items.len()).max(1);
    let pool: Vec<((usize, usize), Synthesized)> = items[..distinct.min(items.len())]
        .par_iter()
        .map(|&(j, k)| synth_one(synthesis, &*jobs[j], shape, j as u64, k).map(|s| ((j, k), s)))
        .collect::<Result<_, _>>()?;
    let mut run = LocalRun::default();
    let mut events = Vec::new();
    let mut next = 0usize;
    while next < n && !pool.is_empty() {
        let ids: Vec<usize> = (next..next + batch.min(n - next)).collect();
        let members: Vec<_> = ids
            .iter()
            .map(|&i| {
                let ((_, k), s) = &pool[i % pool.len()];
                (i as u64, *k as u32, &s.assignment)
            })
            .collect();
        let proofs = prove(backend, &members, &mut events)?;
        run.proofs.extend(ids.iter().zip(proofs).map(|(&i, proof)| {
            let ((j, k), _) = &pool[i % pool.len()];
            ProvedCircuit {
                job_id: i as u64,
                job: *j,
                partition: *k as u32,
                proof,
            }
        }));
        next += ids.len();
        progress(next);
    }
    run.timeline = Timeline::from_events(events);
    Ok(run)
}
