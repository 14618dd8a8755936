//! The launcher behind the `splitprover` CLI: it creates the shared-memory ring and the SRS
//! images, starts synth-proc and the gpu-procs pinned to their own cores, supervises them, and owns
//! the jobs.
//!
//! - [`pipeline::Pipeline`]: the running split pipeline (ring, SRS, children, job table);
//!   [`pipeline::child`] starts and restarts one child;
//! - [`jobs`]: the job table, pure bookkeeping;
//! - [`pinning`]: cpu lists, layouts and pinning (cgroup v2, cgroup v1, affinity);
//! - [`timeline`], [`report`], [`bench`](mod@bench): measuring;
//! - [`cli`], [`commands`], [`config`], [`env`](mod@env): the command line and its settings;
//! - [`notify`]: systemd notification.
//!
//! # Example
//!
//! ```no_run
//! use launcher::pipeline::{Pipeline, PipelineSettings};
//!
//! let spec = "sha-chain:1".parse()?;
//! let params = launcher::srs::resolve(&spec, None, &launcher::env::cache_dir())?;
//! let pipeline = Pipeline::start(PipelineSettings::for_circuit(spec, params)?)?;
//! let outcome = pipeline.submit("sha-chain:1", 7, 1)?.wait()?;
//! assert!(outcome.result.is_ok());
//! pipeline.shutdown();
//! # Ok::<(), anyhow::Error>(())
//! ```
#![deny(missing_docs)]

pub mod api;
pub mod bench;
pub mod cli;
pub mod commands;
pub mod config;
pub mod env;
#[cfg(feature = "filecoin")]
pub mod filecoin;
pub mod jobs;
pub mod journal;
mod logging;
pub mod metrics;
pub mod notify;
pub mod pinning;
pub mod pipeline;
pub mod r1cs;
pub mod report;
pub mod request_file;
pub mod ring;
pub mod service;
pub mod srs;
mod sync;
pub mod timeline;
