//! splitprover's measurements, beside the service library (`launcher`) and written against
//! it: the `bench`, `report`, `synth-bench` and hidden `hog` subcommands of the `splitprover`
//! binary ([`commands`], their clap arguments with them), and what they measure with. The
//! service never uses this crate.
//!
//! - [`local`]: the modes that run inside this process: monolithic, the in-process pipeline
//!   ([`local::InProcess`], what cuzk does), the synthesis-only and prove-only capacities;
//! - [`sweep`]: the in-process and split pipelines side by side, each with its GPU-only
//!   capacity, over cpuset layouts, synthesis and client concurrency, with and without a noisy
//!   neighbour ([`hog`]), one started pipeline per layout;
//! - [`synthesis::Synthesizer`]: how the in-process modes synthesize (in full, or through the
//!   circuit's pre-compiled matrices, as the split pipeline of the same run does): made once per
//!   bench run and passed down; every synthesis inside this process goes through
//!   [`synthesis::Synthesizer::synthesize_partition`];
//! - [`workload::Workload`]: what is proved (built-in circuits or a Filecoin request) and its
//!   verifier;
//! - [`layout`]: SMT topology, the layouts swept and the one recommended;
//! - [`timeline::Timeline`]: the events of a run from every process, rendered as a `TIMELINE`
//!   log, a Chrome trace and waterfalls; [`report`]: the statistics and tables made from it
//!   ([`report::TimelineStats`], [`report::BenchRow`], [`report::SweepReport`]); [`chart`]: the
//!   SVG charts of `splitprover report`;
//! - `filecoin` (feature `filecoin`): `bench --filecoin` and its gRPC API bench.
//!
//! # Example
//!
//! ```no_run
//! use splitprover_bench::local::{builtin_jobs, run_monolithic};
//! use splitprover_bench::report::{render_table, BenchRow, TimelineStats};
//! use splitprover_bench::synthesis::Synthesizer;
//!
//! # fn demo(backend: &dyn kernels::Backend) -> anyhow::Result<()> {
//! let jobs = builtin_jobs("sha-chain:1".parse()?, 4, 0)?;
//! let run = run_monolithic(backend, &Synthesizer::full(), &jobs, 1, &|_| {})?;
//! let stats = TimelineStats::from_timeline(&run.timeline);
//! print!("{}", render_table(&[BenchRow::from_stats("batch 1", "monolithic", &stats)]));
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod chart;
pub mod commands;
#[cfg(feature = "filecoin")]
pub mod filecoin;
pub mod hog;
pub mod layout;
pub mod local;
pub mod report;
pub mod sweep;
mod sync;
pub mod synthesis;
pub mod timeline;
pub mod workload;

use launcher::pinning::CpuList;

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
