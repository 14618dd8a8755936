//! The `splitprover` command line, behind a thin `main`: [`cli::Cli`] (clap) with one variant
//! per subcommand, [`run`] to parse and dispatch. The service's subcommands and their clients
//! live in [`commands`] and are written against the `launcher` library; the measuring
//! subcommands (`bench`, `report`, `synth-bench`, the hidden `hog`) are `splitprover_bench`'s,
//! their arguments embedded in [`cli::Command`]. The hidden `synth-proc` and `gpu-proc`
//! subcommands run the children the pipeline starts from this same binary.
//!
//! # Example
//!
//! ```no_run
//! use clap::Parser;
//! use splitprover::cli::{Cli, Command};
//!
//! let cli = Cli::parse_from(["splitprover", "demo", "-n", "2", "--huge-pages", "none"]);
//! let Command::Demo(args) = cli.command else { unreachable!() };
//! let code = splitprover::commands::demo::run(args)?;
//! # Ok::<(), anyhow::Error>(())
//! ```
#![deny(missing_docs)]

pub mod cli;
pub mod commands;
mod dispatch;
mod logging;

pub use dispatch::run;
