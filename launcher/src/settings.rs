//! Settings, resolved in one place before any work starts. A config file ([`from_config`]) and
//! the command line's shared pipeline flags ([`from_args`], [`for_circuit`]: the flags are
//! first written as the file would say them) go through one resolver into a
//! [`PipelineSettings`]; [`service`] resolves a file's `[service]` into the service's
//! [`ServiceSettings`]. Everything after this works from those.
//!
//! The modules below this one: [`crate::config`] (plain data), [`crate::args`] (the flags);
//! the ones it resolves into: `pipeline`, `service`, `api` (endpoints, allow-lists).
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

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use kernels::circuits::{AnyCircuit, CircuitSpec};

use crate::api::access::AllowList;
use crate::api::Endpoint;
use crate::args::{PipelineArgs, SynthesisMode};
use crate::config::{Config, ConfigError, FaultsConfig, GpuConfig, ServiceConfig, SynthesisConfig};
use crate::pinning::{CpuList, PinChoice};
use crate::pipeline::{CircuitSetting, FaultSettings, GpuSetting, PipelineSettings};
use crate::service::lifecycle::ServiceSettings;
use crate::service::Limits;

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
    srs: Option<&Path>,
) -> anyhow::Result<PipelineSettings> {
    let config = args_config(args)?;
    let params = crate::srs::resolve(spec, srs, &config.cache_dir)?;
    resolve(&config, one_circuit(AnyCircuit::Builtin(*spec), params))
}

/// Resolves the shared pipeline flags into settings for one circuit whose SRS file is `params`.
pub fn for_circuit(
    args: &PipelineArgs,
    spec: AnyCircuit,
    params: PathBuf,
) -> anyhow::Result<PipelineSettings> {
    resolve(&args_config(args)?, one_circuit(spec, params))
}

/// Resolves a config file into pipeline settings (each circuit's SRS found, or generated for a
/// built-in circuit on first use).
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
    resolve(config, circuits)
}

/// The cpus this process may use (what the automatic layout shares out); 1 if unreadable (the
/// layout then says what is wrong).
pub fn allowed_cpus() -> usize {
    crate::pinning::CpuList::allowed().map_or(1, |c| c.len())
}

fn one_circuit(spec: AnyCircuit, params: PathBuf) -> Vec<CircuitSetting> {
    vec![CircuitSetting {
        spec,
        params,
        slots: 0,
    }]
}

/// The shared pipeline flags as a config file would say them (a one-shot command's file); the
/// flags' own checks, with the flags' names.
fn args_config(args: &PipelineArgs) -> anyhow::Result<Config> {
    crate::ring::parse_huge_pages(&args.huge_pages)?;
    args.pin
        .parse::<PinChoice>()
        .map_err(|e| anyhow::anyhow!("--pin: {e}"))?;
    anyhow::ensure!(args.gpus >= 1, "--gpus must be at least 1");
    let mut c = Config::one_shot();
    c.cache_dir = args.cache_dir.clone().unwrap_or_else(crate::env::cache_dir);
    c.ring.slots = args.slots;
    c.ring.huge_pages = args.huge_pages.clone();
    c.cpus.mode = args.pin.clone();
    c.cpus.gpu_cores = args.gpu_cores;
    c.synthesis = SynthesisConfig {
        concurrency: args.synth_concurrency,
        lookahead: args.synth_lookahead,
        precompiled: args.synthesis == SynthesisMode::Precompiled,
        witness_slots: args.witness_slots,
        ..SynthesisConfig::default()
    };
    c.gpu = (0..args.gpus as u32)
        .map(|device| GpuConfig {
            device,
            backend: args.backend,
            cpus: None,
            batch: args.batch.max(1),
            memory_budget: args.gpu_memory_budget,
        })
        .collect();
    Ok(c)
}

/// The one resolver: a config (a file's, or the flags') and its circuits, their SRS found.
fn resolve(config: &Config, circuits: Vec<CircuitSetting>) -> anyhow::Result<PipelineSettings> {
    let first = circuits.first().context("no circuit to serve")?;
    let mut s = PipelineSettings::for_circuit(first.spec, first.params.clone())?;
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
    s.faults = faults(&config.faults);
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

/// `[faults]` resolved: a key left out takes [`FaultSettings::default`]'s value.
pub fn faults(f: &FaultsConfig) -> FaultSettings {
    let d = FaultSettings::default();
    FaultSettings {
        max_attempts: f.max_attempts.unwrap_or(d.max_attempts).max(1),
        deadline_factor: f.deadline_factor.unwrap_or(d.deadline_factor),
        deadline_floor: f
            .deadline_floor_secs
            .map_or(d.deadline_floor, Duration::from_secs),
        first_proof_deadline: f
            .first_proof_deadline_secs
            .map_or(d.first_proof_deadline, Duration::from_secs),
        first_synthesis_deadline: f
            .first_synthesis_deadline_secs
            .map_or(d.first_synthesis_deadline, Duration::from_secs),
        max_partitions: f.max_partitions.unwrap_or(d.max_partitions),
        max_request_bytes: f.max_request_bytes.map_or(d.max_request_bytes, |b| b.0),
        timeline_events: f.timeline_events.or(d.timeline_events),
        ..d
    }
}

/// `[service]` limits resolved.
pub fn limits(c: &ServiceConfig) -> Limits {
    Limits {
        max_queued_jobs: c.max_queued_jobs,
        fetched_retention: Duration::from_secs(c.fetched_retention_s),
        result_retention: Duration::from_secs(c.result_retention_s),
    }
}

/// Resolves a config file's `socket` and `[service]` into the service's settings: the
/// addresses, the allow-list, the journal's path (default: `crate::env::journal_path`), the
/// limits. Errors name the key; [`ConfigError::in_file`] adds the file.
pub fn service(config: &Config) -> Result<ServiceSettings, ConfigError> {
    let c = &config.service;
    let mut endpoints = vec![Endpoint::Unix(config.socket.clone())];
    for l in &c.listen {
        let e: Endpoint = l
            .parse()
            .map_err(|e| ConfigError::Invalid(format!("[service] listen: {e}")))?;
        if !endpoints.contains(&e) {
            endpoints.push(e);
        }
    }
    if let Some(m) = &c.metrics_listen {
        if !matches!(m.parse::<Endpoint>(), Ok(Endpoint::Tcp(_))) {
            return Err(ConfigError::Invalid(format!(
                "[service] metrics_listen `{m}`: expected `host:port`"
            )));
        }
    }
    let allow = AllowList::parse(&c.allow).map_err(|e| ConfigError::Invalid(e.to_string()))?;
    Ok(ServiceSettings {
        socket: config.socket.clone(),
        socket_mode: c.socket_mode()?,
        socket_group: c.socket_group.clone(),
        endpoints,
        allow,
        tls: c.tls.clone(),
        first_byte_timeout: Duration::from_secs(c.first_byte_timeout_s),
        metrics_listen: c.metrics_listen.clone(),
        max_message_bytes: c
            .max_message_bytes
            .unwrap_or(crate::api::DEFAULT_MAX_MESSAGE_BYTES),
        max_connections: c.max_connections.max(1),
        journal: c
            .journal
            .clone()
            .unwrap_or_else(|| crate::env::journal_path(&config.socket)),
        stop_grace: Duration::from_secs(c.stop_grace_s),
        limits: limits(c),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_allow_list_parses_and_bad_networks_and_addresses_are_refused() {
        let c = Config::parse("[service]\n").unwrap();
        let s = service(&c).unwrap();
        assert_eq!(s.allow, AllowList::loopback());
        assert_eq!(s.endpoints, vec![Endpoint::Unix(c.socket.clone())]);
        assert_eq!(s.max_message_bytes, crate::api::DEFAULT_MAX_MESSAGE_BYTES);
        let c = Config::parse("[service]\nallow = [\"10.0.0.0/8\", \"::1/128\"]\n").unwrap();
        assert!(service(&c).unwrap().allow.admits([10, 9, 8, 7].into()));
        let refused = |text: &str| {
            let e = service(&Config::parse(text).unwrap()).unwrap_err();
            format!("{:#}", e.in_file(Path::new("/etc/x.toml")))
        };
        let e = refused("[service]\nallow = [\"10.0.0.0/40\"]\n");
        assert!(
            e.contains("10.0.0.0/40") && e.contains("/etc/x.toml"),
            "{e}"
        );
        let e = refused("[service]\nlisten = [\"ftp://x\"]\n");
        assert!(e.contains("[service] listen"), "{e}");
        let e = refused("[service]\nmetrics_listen = \"/run/m.sock\"\n");
        assert!(e.contains("metrics_listen"), "{e}");
    }

    #[test]
    fn a_file_keeps_a_bounded_timeline_and_the_flags_all_of_it() {
        let file = faults(&Config::parse("").unwrap().faults);
        assert_eq!(
            file.timeline_events,
            Some(crate::config::SERVICE_TIMELINE_EVENTS)
        );
        assert_eq!(faults(&Config::one_shot().faults).timeline_events, None);
        let d = FaultSettings::default();
        assert_eq!(file.max_attempts, d.max_attempts);
        assert_eq!(file.max_request_bytes, d.max_request_bytes);
        let f = faults(
            &Config::parse("[faults]\nmax_attempts = 0\n")
                .unwrap()
                .faults,
        );
        assert_eq!(f.max_attempts, 1);
    }

    #[test]
    fn witness_slots_and_a_gpu_memory_budget_reach_the_pipeline_settings() {
        let with_circuit = Config::parse(
            "[synthesis]\nwitness_slots = true\n[[gpu]]\nmemory_budget = \"22GiB\"\n\
             [[circuit]]\nspec = \"pubinputs:4\"\n",
        )
        .unwrap();
        let s = from_config(&with_circuit).unwrap();
        assert!(s.synthesis.witness_slots);
        assert_eq!(s.gpus[0].memory_budget, Some(22 << 30));
    }

    #[test]
    fn the_flags_and_the_file_resolve_alike() {
        use clap::Parser;
        #[derive(Parser)]
        struct Flags {
            #[command(flatten)]
            pipeline: PipelineArgs,
        }
        let dir = std::env::temp_dir();
        let flags = Flags::parse_from([
            "x",
            "--gpus",
            "2",
            "--slots",
            "3",
            "--huge-pages",
            "none",
            "--synth-concurrency",
            "5",
            "--gpu-cores",
            "1",
            "--cache-dir",
            dir.to_str().unwrap(),
        ]);
        let spec: AnyCircuit = "pubinputs:4".parse().unwrap();
        let a = for_circuit(&flags.pipeline, spec, "/p".into()).unwrap();
        let file = Config::parse(&format!(
            "cache_dir = {dir:?}\n[ring]\nslots = 3\nhuge_pages = \"none\"\n\
             [cpus]\ngpu_cores = 1\n[synthesis]\nconcurrency = 5\n\
             [[gpu]]\ndevice = 0\n[[gpu]]\ndevice = 1\n[faults]\ntimeline_events = 7\n"
        ))
        .unwrap();
        let f = resolve(&file, one_circuit(spec, "/p".into())).unwrap();
        assert_eq!(format!("{:?}", a.gpus), format!("{:?}", f.gpus));
        assert_eq!((a.slots, a.gpu_cores, a.synth_concurrency), (3, 1, 5));
        assert_eq!((f.slots, f.gpu_cores, f.synth_concurrency), (3, 1, 5));
        assert_eq!(a.synthesis.cache_dir, f.synthesis.cache_dir);
        assert_eq!(a.faults.timeline_events, None);
        assert_eq!(f.faults.timeline_events, Some(7));
        let bad = Flags::parse_from(["x", "--gpus", "0"]);
        let e = for_circuit(&bad.pipeline, spec, "/p".into()).unwrap_err();
        assert!(e.to_string().contains("--gpus"), "{e}");
    }
}
