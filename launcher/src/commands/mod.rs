//! One module per subcommand.

pub mod bench;
pub mod demo;
pub mod prove;
pub mod service;
pub mod srs;

use anyhow::Context;
use kernels::circuits::CircuitSpec;

use crate::cli::PipelineArgs;
use crate::cpuset::PinChoice;
use crate::pipeline::{GpuSetting, PipelineSettings};

/// Resolves the shared pipeline flags into settings for one circuit.
pub fn settings_from_args(
    args: &PipelineArgs,
    spec: &CircuitSpec,
    srs: Option<&std::path::Path>,
) -> anyhow::Result<PipelineSettings> {
    let cache = args.cache_dir.clone().unwrap_or_else(crate::env::cache_dir);
    let params = crate::srs::resolve(spec, srs, &cache)?;
    let mut s = PipelineSettings::for_circuit(*spec, params)?;
    s.slots = args.slots;
    s.huge_pages = crate::ring::parse_huge_pages(&args.huge_pages)?;
    s.pin = args.pin.parse::<PinChoice>().map_err(|e| anyhow::anyhow!("--pin: {e}"))?;
    s.gpu_cores = args.gpu_cores;
    s.synth_concurrency = args.synth_concurrency;
    anyhow::ensure!(args.gpus >= 1, "--gpus must be at least 1");
    anyhow::ensure!(
        matches!(args.backend.as_str(), "cpu" | "cuda"),
        "--backend `{}` is unknown: use `cpu` or `cuda`",
        args.backend
    );
    s.gpus = (0..args.gpus as u32)
        .map(|device| GpuSetting { device, backend: args.backend.clone(), batch: args.batch.max(1), cpus: None })
        .collect();
    Ok(s)
}

/// Parses a circuit spec with a message naming it.
pub fn parse_spec(text: &str) -> anyhow::Result<CircuitSpec> {
    text.parse().with_context(|| format!("bad circuit spec `{text}`"))
}
