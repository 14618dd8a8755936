//! Pipeline settings, resolved in one place before any work starts: from the command line's
//! shared pipeline flags ([`from_args`], [`for_circuit`]) or from a config file
//! ([`from_config`]). Everything after this works from a `PipelineSettings`.
//!
//! ```no_run
//! use clap::Parser;
//! use launcher::args::PipelineArgs;
//!
//! #[derive(Parser)]
//! struct Demo {
//!     #[command(flatten)]
//!     pipeline: PipelineArgs,
//! }
//!
//! let args = Demo::parse_from(["demo", "--huge-pages", "none"]);
//! let spec = launcher::settings::parse_spec("sha-chain:1")?;
//! let settings = launcher::settings::from_args(&args.pipeline, &spec, None)?;
//! launcher::pipeline::Pipeline::start(settings)?.shutdown();
//! # Ok::<(), anyhow::Error>(())
//! ```

use anyhow::Context;
use kernels::circuits::{AnyCircuit, CircuitSpec};

use crate::args::PipelineArgs;
use crate::config::Config;
use crate::pinning::{CpuList, PinChoice};
use crate::pipeline::{CircuitSetting, GpuSetting, PipelineSettings};

/// Parses a circuit spec with a message naming it.
pub fn parse_spec(text: &str) -> anyhow::Result<CircuitSpec> {
    text.parse()
        .with_context(|| format!("bad circuit spec `{text}`"))
}

/// Resolves the shared pipeline flags into settings for one built-in circuit (its SRS `srs`, or
/// the cached one, generated on first use).
pub fn from_args(
    args: &PipelineArgs,
    spec: &CircuitSpec,
    srs: Option<&std::path::Path>,
) -> anyhow::Result<PipelineSettings> {
    let cache = args.cache_dir.clone().unwrap_or_else(crate::env::cache_dir);
    let params = crate::srs::resolve(spec, srs, &cache)?;
    for_circuit(args, AnyCircuit::Builtin(*spec), params)
}

/// Resolves the shared pipeline flags into settings for one circuit whose SRS file is `params`.
pub fn for_circuit(
    args: &PipelineArgs,
    spec: AnyCircuit,
    params: std::path::PathBuf,
) -> anyhow::Result<PipelineSettings> {
    let mut s = PipelineSettings::for_circuit(spec, params)?;
    s.slots = args.slots;
    s.huge_pages = crate::ring::parse_huge_pages(&args.huge_pages)?;
    s.pin = args
        .pin
        .parse::<PinChoice>()
        .map_err(|e| anyhow::anyhow!("--pin: {e}"))?;
    s.gpu_cores = args.gpu_cores.unwrap_or_else(|| {
        crate::pinning::default_gpu_cores(&[args.backend], allowed_cpus(), args.gpus)
    });
    s.synth_concurrency = args.synth_concurrency;
    s.synth_lookahead = args.synth_lookahead;
    s.synthesis = crate::r1cs::SynthesisSettings {
        precompiled: args.synthesis == crate::args::SynthesisMode::Precompiled,
        cache_dir: Some(args.cache_dir.clone().unwrap_or_else(crate::env::cache_dir)),
        budget_bytes: crate::r1cs::default_budget(),
        worker_bytes: crate::r1cs::DEFAULT_WORKER_BYTES,
        witness_slots: args.witness_slots,
    };
    anyhow::ensure!(args.gpus >= 1, "--gpus must be at least 1");
    s.gpus = (0..args.gpus as u32)
        .map(|device| GpuSetting {
            device,
            backend: args.backend,
            batch: args.batch.max(1),
            cpus: None,
            memory_budget: args.gpu_memory_budget.map(|b| b.0),
        })
        .collect();
    Ok(s)
}

/// The cpus this process may use (what the automatic layout shares out); 1 if unreadable (the
/// layout then says what is wrong).
pub fn allowed_cpus() -> usize {
    crate::pinning::CpuList::allowed().map_or(1, |c| c.len())
}

/// Resolves a config file into pipeline settings.
pub fn from_config(config: &Config) -> anyhow::Result<PipelineSettings> {
    anyhow::ensure!(
        !config.circuit.is_empty(),
        "the config names no circuit\nhint: add a [[circuit]] table with `spec` (and `srs`)"
    );
    let mut circuits = Vec::new();
    for c in &config.circuit {
        let spec: AnyCircuit = c
            .spec
            .parse()
            .with_context(|| format!("bad circuit spec `{}`", c.spec))?;
        let params = crate::srs::resolve_any(
            &spec,
            c.srs.as_deref(),
            &config.cache_dir,
            &config.param_cache,
        )?;
        circuits.push(CircuitSetting {
            spec,
            params,
            slots: c.slots,
        });
    }
    let mut s = PipelineSettings::for_circuit(circuits[0].spec, circuits[0].params.clone())?;
    s.circuits = circuits;
    s.slots = config.ring.slots;
    s.slot_bytes = match (config.ring.slot_bytes, config.ring.ring_bytes) {
        (Some(b), _) => Some(b.0),
        (None, Some(r)) => Some(r.0 / config.ring.slots as u64),
        (None, None) => None,
    };
    s.huge_pages = config.ring.huge_page_policy()?;
    s.pin = config.pin_choice()?;
    s.gpu_cores = config.cpus.gpu_cores.unwrap_or_else(|| {
        let backends: Vec<_> = config.gpu.iter().map(|g| g.backend).collect();
        crate::pinning::default_gpu_cores(&backends, allowed_cpus(), config.gpu.len())
    });
    s.synth_cpus = config
        .cpus
        .synth
        .as_deref()
        .map(str::parse::<CpuList>)
        .transpose()?;
    s.synth_concurrency = config.synthesis.concurrency;
    s.synth_lookahead = config.synthesis.lookahead;
    s.synthesis = crate::r1cs::SynthesisSettings {
        precompiled: config.synthesis.precompiled,
        cache_dir: Some(config.cache_dir.clone()),
        budget_bytes: config
            .synthesis
            .matrices_budget
            .map_or_else(crate::r1cs::default_budget, |b| b.0),
        worker_bytes: config
            .synthesis
            .worker_memory
            .map_or(crate::r1cs::DEFAULT_WORKER_BYTES, |b| b.0),
        witness_slots: config.synthesis.witness_slots,
    };
    s.faults = config.faults.settings();
    s.gpus = config
        .gpu
        .iter()
        .map(|g| {
            Ok(GpuSetting {
                device: g.device,
                backend: g.backend,
                batch: g.batch,
                cpus: g.cpus.as_deref().map(str::parse::<CpuList>).transpose()?,
                memory_budget: g.memory_budget.map(|b| b.0),
            })
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(s)
}
