//! Running a parsed command line: each subcommand handed to its module.

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::commands;

/// Parses the command line and runs it; an error is printed (`error: ...`) and exits 2.
pub fn run() -> ExitCode {
    use splitprover_bench::commands as bench;
    let cli = Cli::parse();
    if matches!(cli.command, Command::Demo(_))
        && std::env::var_os(launcher::env::SPLITPROVER_LOG).is_none()
    {
        // The demo prints its own summary; keep the logs (ours and the children's, who inherit
        // the variable) to warnings. This runs before any thread is started.
        std::env::set_var(launcher::env::SPLITPROVER_LOG, "warn");
    }
    crate::logging::init(matches!(cli.command, Command::SynthProc | Command::GpuProc));
    let result = match cli.command {
        Command::Demo(a) => commands::demo::run(a),
        Command::Prove(a) => commands::prove::run(a),
        #[cfg(feature = "filecoin")]
        Command::Bench(a) if a.filecoin.is_some() => {
            let kind = a.filecoin.clone().unwrap_or_default();
            splitprover_bench::filecoin::bench::run_command(&a, &kind)
        }
        Command::Bench(a) => bench::bench::run(*a),
        Command::Report(a) => bench::report::run(a),
        Command::SynthBench(a) => {
            #[cfg(feature = "filecoin")]
            let filecoin: bench::synth_bench::FilecoinRequests<'_> =
                Some(&splitprover_bench::filecoin::bench::request_bytes);
            #[cfg(not(feature = "filecoin"))]
            let filecoin: bench::synth_bench::FilecoinRequests<'_> = None;
            bench::synth_bench::run(a, filecoin)
        }
        Command::Shape(a) => commands::shape::run(a),
        Command::Hog(a) => bench::bench::hog(a),
        Command::Run(a) => commands::service::run(a),
        Command::Submit(a) => commands::service::submit(a),
        Command::Fetch(a) => commands::service::fetch(a),
        Command::Cancel(a) => commands::service::cancel(a),
        Command::Status(a) => commands::service::status(a),
        Command::Srs(c) => commands::srs::run(c),
        #[cfg(feature = "filecoin")]
        Command::Params(c) => commands::params::run(c),
        #[cfg(feature = "filecoin")]
        Command::Verify(a) => commands::verify::run(a),
        #[cfg(feature = "filecoin")]
        Command::SparseC1(a) => commands::c1::run(a),
        Command::SynthProc => synth_proc::run_from_env()
            .map(|()| ExitCode::SUCCESS)
            .map_err(anyhow::Error::from),
        Command::GpuProc => gpu_proc::run_from_env()
            .map(|()| ExitCode::SUCCESS)
            .map_err(anyhow::Error::from),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
