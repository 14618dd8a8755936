//! `splitprover params generate|check`: Filecoin parameters in the parameter cache, under the
//! official names, so filecoin-proofs' verifiers and production `.params` work unchanged.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use kernels::filecoin::{self, ParamFiles, ProofKind};
use kernels::paramgen::GenDevice;

use crate::cli::ParamsCommand;

/// Runs a `params` subcommand.
pub fn run(cmd: ParamsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ParamsCommand::Generate {
            kinds,
            param_cache,
            seed,
            force,
            device,
        } => {
            let dir = param_cache.unwrap_or_else(launcher::env::param_cache_dir);
            for kind in parse_kinds(&kinds)? {
                let files = ParamFiles::for_kind(kind, &dir)?;
                if !force && files.params.is_file() && files.vk.is_file() {
                    eprintln!(
                        "{kind}: already present: {} (use --force to replace)",
                        files.params.display()
                    );
                    continue;
                }
                let t = Instant::now();
                let shape = kind.shape()?;
                eprintln!(
                    "{kind}: generating local test parameters ({} constraints, {} inputs) on the {} into `{}`",
                    shape.constraints,
                    shape.inputs,
                    match device {
                        GenDevice::Cpu => "CPU",
                        GenDevice::Gpu => "GPU",
                    },
                    dir.display()
                );
                let bar = launcher::srs::GenBar::new(true);
                let seed = seed.unwrap_or_else(rand::random);
                let (files, _) =
                    filecoin::generate_parameters(kind, &dir, seed, device, &|p| bar.update(p))
                        .with_context(|| format!("generating parameters for `{kind}`"))?;
                bar.finish();
                eprintln!("{kind}: done in {:.1} s", t.elapsed().as_secs_f64());
                println!("{}", files.params.display());
                println!("{}", files.vk.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        ParamsCommand::Check { kinds, param_cache } => {
            let dir: PathBuf = param_cache.unwrap_or_else(launcher::env::param_cache_dir);
            let mut bad = 0;
            for kind in parse_kinds(&kinds)? {
                match check(kind, &dir) {
                    Ok(line) => println!("{kind}: {line}"),
                    Err(e) => {
                        bad += 1;
                        println!("{kind}: {e:#}");
                    }
                }
            }
            Ok(if bad == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

fn parse_kinds(kinds: &[String]) -> anyhow::Result<Vec<ProofKind>> {
    kinds
        .iter()
        .map(|k| {
            k.parse::<ProofKind>()
                .with_context(|| format!("bad proof kind `{k}`"))
        })
        .collect()
}

fn check(kind: ProofKind, dir: &std::path::Path) -> anyhow::Result<String> {
    let files = ParamFiles::for_kind(kind, dir)?;
    files.check_present(kind)?;
    anyhow::ensure!(
        files.vk.is_file(),
        "`{}` is missing (filecoin-proofs' verifiers need it)",
        files.vk.display()
    );
    files.check_pair()?;
    let lens = kernels::srs::scan_params_file(&files.params)
        .with_context(|| format!("`{}`", files.params.display()))?;
    let shape = kind.shape()?;
    lens.check_shape(&shape)
        .with_context(|| format!("`{}` does not fit `{kind}`", files.params.display()))?;
    Ok(format!(
        "ok: {} ({} constraints)",
        files.params.display(),
        shape.constraints
    ))
}
