//! `splitprover bench`: the measured modes (see "Measuring" in the design notes).
//!
//! - [`local`]: the modes that run inside this process: monolithic, the in-process pipeline
//!   ([`local::InProcess`], what cuzk does), the synthesis-only and prove-only capacities;
//! - [`sweep`]: the in-process and split pipelines side by side, each with its GPU-only
//!   capacity, over cpuset layouts, synthesis and client concurrency, with and without a noisy
//!   neighbour ([`hog`]), one started pipeline per layout;
//! - [`workload`]: what is proved (built-in circuits or a Filecoin request) and its verifier;
//! - [`layout`]: SMT topology, the layouts swept and the one recommended;
//! - [`chart`]: the SVG charts of `splitprover report`.
//!
//! Every synthesis done inside this process goes through [`synthesize_partition`].

pub mod chart;
pub mod hog;
pub mod layout;
pub mod local;
pub mod sweep;
pub mod workload;

use kernels::circuits::AnyCircuit;
use kernels::job::Job;
use kernels::synth::AssignmentSink;

use crate::pinning::CpuList;

/// Synthesizes partition `k` of `job` into `sink`: the one function through which every
/// in-process bench mode (monolithic, the in-process pipeline, the capacities, built-in and
/// Filecoin alike) synthesizes, so that a change of how synthesis is done (a pre-compiled
/// constraint system, say) is made here once and every in-process row measures it.
pub fn synthesize_partition(
    job: &dyn Job,
    k: usize,
    sink: &mut dyn AssignmentSink,
) -> Result<(), kernels::Error> {
    match compiled(&job.circuit()) {
        Some(r1cs) => {
            job.synthesize_partition_with(k, sink, kernels::synth::Synthesis::Compiled(&r1cs))
        }
        None => job.synthesize_partition(k, sink),
    }
}

/// The bench's in-process syntheses: how they synthesize, and the matrices of each circuit.
/// Set once by [`use_synthesis`] before a bench runs; until then (and for a circuit whose
/// matrices could not be had) synthesis is full.
static SYNTHESIS: std::sync::Mutex<Option<InProcessSynthesis>> = std::sync::Mutex::new(None);

struct InProcessSynthesis {
    settings: crate::r1cs::SynthesisSettings,
    /// By circuit id; `None`: full synthesis (and why, logged once).
    matrices: std::collections::HashMap<u64, Option<std::sync::Arc<kernels::r1cs::R1cs>>>,
}

/// Makes every in-process synthesis of this process synthesize as `settings` say (the split
/// pipeline of the same bench uses the same settings), and gets the matrices of `circuit`
/// ready now, outside any timed run: from the cache the split pipeline uses, or recorded.
pub fn use_synthesis(settings: &crate::r1cs::SynthesisSettings, circuit: &AnyCircuit) {
    let mut guard = SYNTHESIS.lock().unwrap_or_else(|e| e.into_inner());
    *guard = Some(InProcessSynthesis {
        settings: settings.clone(),
        matrices: Default::default(),
    });
    drop(guard);
    let _ = compiled(circuit);
}

fn compiled(circuit: &AnyCircuit) -> Option<std::sync::Arc<kernels::r1cs::R1cs>> {
    let mut guard = SYNTHESIS.lock().unwrap_or_else(|e| e.into_inner());
    let state = guard.as_mut()?;
    if !state.settings.precompiled {
        return None;
    }
    let id = circuit.circuit_id().ok()?;
    if let Some(m) = state.matrices.get(&id) {
        return m.clone();
    }
    let opened = circuit
        .shape()
        .map_err(|e| e.to_string())
        .and_then(|shape| {
            crate::r1cs::load_or_record(
                circuit,
                id,
                &shape,
                state.settings.cache_dir.as_deref(),
                state.settings.budget_bytes,
            )
        })
        .and_then(|shared| shared.open().map_err(|e| e.to_string()));
    let entry = match opened {
        Ok(r1cs) => Some(std::sync::Arc::new(r1cs)),
        Err(why) => {
            tracing::warn!(%circuit, "in-process syntheses are full: {why}");
            None
        }
    };
    state.matrices.insert(id, entry.clone());
    entry
}

/// Restricts the calling thread to `cpus` (`sched_setaffinity` on the thread). Threads it
/// starts afterwards inherit the set.
pub fn pin_current_thread(cpus: &CpuList) -> std::io::Result<()> {
    let mut set = rustix::process::CpuSet::new();
    for cpu in cpus.iter() {
        let cpu = cpu as usize;
        if cpu >= rustix::process::CpuSet::MAX_CPU {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "cpu {cpu} is above the highest cpu a thread can be pinned to here ({})",
                    rustix::process::CpuSet::MAX_CPU - 1
                ),
            ));
        }
        set.set(cpu);
    }
    if cpus.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "an empty cpu list",
        ));
    }
    rustix::process::sched_setaffinity(None, &set).map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_the_current_thread_is_read_back() {
        let allowed = CpuList::allowed().unwrap();
        let first = CpuList::from_cpus([allowed.iter().next().unwrap()]).unwrap();
        std::thread::spawn(move || {
            pin_current_thread(&first).unwrap();
            assert_eq!(CpuList::allowed().unwrap(), first);
            assert!(pin_current_thread(&CpuList::new()).is_err());
            let huge = CpuList::from_cpus([8000]).unwrap();
            let e = pin_current_thread(&huge).unwrap_err();
            assert!(e.to_string().contains("cpu 8000"), "{e}");
        })
        .join()
        .unwrap();
    }
}
