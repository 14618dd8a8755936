//! The service behind the `splitprover` CLI: it creates the shared-memory ring and the SRS
//! images, starts synth-proc and the gpu-procs pinned to their own cores, supervises them, owns
//! the jobs, and serves cuzk's gRPC API. No subcommand lives here: the `splitprover` package
//! (the binary) and `splitprover-bench` (the measurements) are written against this library.
//!
//! - [`pipeline::Pipeline`]: the running split pipeline (ring, SRS, children, job table);
//!   [`pipeline::child`] starts and restarts one child;
//! - [`jobs`]: the job table, pure bookkeeping; [`service::Service`]: the jobs below any
//!   transport, with their [`journal`], and the service's lifecycle
//!   ([`service::lifecycle`]: open, start, serve, stop); [`api`]: cuzk's gRPC API (server and
//!   client); [`metrics`]: the Prometheus text;
//! - [`pinning`]: cpu lists, layouts and pinning (cgroup v2, cgroup v1, affinity);
//! - [`r1cs`]: the circuits' pre-compiled matrices; [`srs`]: the SRS files and images;
//! - [`config::Config`]: the config file, plain data at the bottom (it imports nothing from
//!   `api`, `service`, `pipeline`); [`args::PipelineArgs`]: the pipeline flags every
//!   pipeline-starting command shares (the CLI's and the bench's); [`settings`]: the one
//!   resolver of both into a [`pipeline::PipelineSettings`] (and of `[service]` into a
//!   [`service::lifecycle::ServiceSettings`]); [`env`](mod@env): every environment variable;
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
pub mod args;
pub mod config;
pub mod env;
pub use pipeline::jobs;
pub mod journal;
pub mod metrics;
pub mod notify;
pub mod pinning;
pub mod pipeline;
pub mod r1cs;
pub mod request_file;
mod ring;
pub mod service;
pub mod settings;
pub mod srs;
mod sync;
