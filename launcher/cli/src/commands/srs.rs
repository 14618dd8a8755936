//! `splitprover srs generate|check|preload|evict`.

use std::process::ExitCode;

use anyhow::Context;
use kernels::circuits::CircuitSpec;

use crate::cli::SrsCommand;

/// Runs an `srs` subcommand.
pub fn run(cmd: SrsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        SrsCommand::Generate {
            circuit,
            out,
            seed,
            device,
        } => {
            let spec: CircuitSpec = circuit
                .parse()
                .with_context(|| format!("bad circuit spec `{circuit}`"))?;
            launcher::srs::generate_on(
                &spec,
                seed.unwrap_or_else(rand::random),
                device,
                &out,
                true,
            )?;
            println!("{}", out.display());
            Ok(ExitCode::SUCCESS)
        }
        SrsCommand::Check { file, circuit } => {
            let lens = kernels::srs::scan_params_file(&file)
                .with_context(|| format!("SRS `{}`", file.display()))?;
            println!("{}: {lens:?}", file.display());
            if let Some(c) = circuit {
                let spec: CircuitSpec = c
                    .parse()
                    .with_context(|| format!("bad circuit spec `{c}`"))?;
                let shape = spec.shape()?;
                lens.check_shape(&shape).with_context(|| {
                    format!("`{}` does not fit circuit `{spec}`", file.display())
                })?;
                println!("fits `{spec}` ({shape:?})");
            }
            Ok(ExitCode::SUCCESS)
        }
        SrsCommand::Preload { circuit, socket } => {
            let mut c = super::service::client(socket.as_deref())?;
            let r = c.preload_srs(&circuit)?;
            if r.already_loaded {
                eprintln!("`{circuit}`: already loaded ({} bytes)", r.size_bytes);
            } else {
                eprintln!(
                    "`{circuit}`: loaded {} bytes in {} ms",
                    r.size_bytes, r.load_time_ms
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        SrsCommand::Evict { circuit, socket } => {
            let mut c = super::service::client(socket.as_deref())?;
            let r = c.evict_srs(&circuit)?;
            if r.was_loaded {
                eprintln!("`{circuit}`: unloaded, {} bytes freed", r.freed_bytes);
            } else {
                eprintln!("`{circuit}`: was not loaded");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
