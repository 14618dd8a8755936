//! Monolithic mode ([`run_monolithic`]): synthesize a batch, prove it, repeat; nothing
//! overlaps.

use std::sync::Arc;

use kernels::job::Job;
use kernels::Backend;
use rayon::prelude::*;

use super::steps::{prove, synth_one, Synthesized};
use super::{at_least_one, common_shape, work_items, Error, LocalRun, ProvedCircuit};
use crate::synthesis::Synthesizer;
use crate::timeline::Timeline;

/// Monolithic mode: synthesize `batch` partitions of `jobs` (in job, partition order) in
/// parallel on the rayon pool, then prove them in one backend call; repeat until every
/// partition is proved (the last batch may be smaller). Batch 1 proves one partition at a time,
/// synthesis then proof. `progress` is called on this thread with the number of proofs done
/// after each batch.
pub fn run_monolithic(
    backend: &dyn Backend,
    synthesis: &Synthesizer,
    jobs: &[Arc<dyn Job>],
    batch: usize,
    progress: &dyn Fn(usize),
) -> Result<LocalRun, Error> {
    at_least_one("batch", batch)?;
    let Some(shape) = common_shape(jobs)? else {
        return Ok(LocalRun::default());
    };
    let mut run = LocalRun::default();
    let mut events = Vec::new();
    for chunk in work_items(jobs).chunks(batch) {
        let ready: Vec<Synthesized> = chunk
            .par_iter()
            .map(|&(j, k)| synth_one(synthesis, &*jobs[j], shape, j as u64, k))
            .collect::<Result<_, _>>()?;
        for r in &ready {
            events.extend_from_slice(&r.events);
        }
        let members: Vec<_> = chunk
            .iter()
            .zip(&ready)
            .map(|(&(j, k), r)| (j as u64, k as u32, &r.assignment))
            .collect();
        let proofs = prove(backend, &members, &mut events)?;
        run.proofs.extend(
            chunk
                .iter()
                .zip(proofs)
                .map(|(&(j, k), proof)| ProvedCircuit {
                    job_id: j as u64,
                    job: j,
                    partition: k as u32,
                    proof,
                }),
        );
        progress(run.proofs.len());
    }
    run.timeline = Timeline::from_events(events);
    Ok(run)
}
