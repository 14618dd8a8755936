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
    job.synthesize_partition(k, sink)
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
