//! One module per subcommand.

pub mod bench;
pub mod demo;
pub mod prove;
pub mod service;
pub mod srs;

use anyhow::Context;
use kernels::circuits::{AnyCircuit, CircuitSpec};

use crate::cli::PipelineArgs;
use crate::pinning::PinChoice;
use crate::pipeline::{GpuSetting, PipelineSettings};

/// Resolves the shared pipeline flags into settings for one built-in circuit (its SRS `srs`, or
/// the cached one, generated on first use).
pub fn settings_from_args(
    args: &PipelineArgs,
    spec: &CircuitSpec,
    srs: Option<&std::path::Path>,
) -> anyhow::Result<PipelineSettings> {
    let cache = args.cache_dir.clone().unwrap_or_else(crate::env::cache_dir);
    let params = crate::srs::resolve(spec, srs, &cache)?;
    settings_for(args, AnyCircuit::Builtin(*spec), params)
}

/// Resolves the shared pipeline flags into settings for one circuit whose SRS file is `params`.
pub fn settings_for(
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
    s.gpu_cores = args.gpu_cores;
    s.synth_concurrency = args.synth_concurrency;
    anyhow::ensure!(args.gpus >= 1, "--gpus must be at least 1");
    s.gpus = (0..args.gpus as u32)
        .map(|device| GpuSetting {
            device,
            backend: args.backend,
            batch: args.batch.max(1),
            cpus: None,
        })
        .collect();
    Ok(s)
}

/// Parses a circuit spec with a message naming it.
pub fn parse_spec(text: &str) -> anyhow::Result<CircuitSpec> {
    text.parse()
        .with_context(|| format!("bad circuit spec `{text}`"))
}

/// The proof kind of a Filecoin request: `proof_type` if given, else read from the request; either
/// way it must be of `family` (`porep`, `post`, `snap`: the flag the file came with), so
/// `--post snap.json` is refused instead of proving something else.
/// `bytes` is the file's content (read once by the caller, which submits the same bytes).
pub fn request_kind(
    path: &std::path::Path,
    bytes: &[u8],
    proof_type: Option<&str>,
    family: Option<&str>,
) -> anyhow::Result<kernels::filecoin::ProofKind> {
    use kernels::filecoin::{self, ProofFamily, ProofKind};
    let kind: ProofKind = match proof_type {
        Some(k) => k.parse().with_context(|| format!("bad proof type `{k}`"))?,
        None => filecoin::detect_kind(bytes).with_context(|| format!("`{}`", path.display()))?,
    };
    let expected = match family {
        None => return Ok(kind),
        Some("porep") => ProofFamily::PoRep,
        Some("post") => ProofFamily::PoSt,
        Some("snap") => ProofFamily::SnapDeals,
        Some(other) => anyhow::bail!("unknown request family `{other}` (porep, post or snap)"),
    };
    anyhow::ensure!(
        kind.family() == expected,
        "`{}` is {} (`{kind}`), not {expected}\nhint: use --{} for it",
        path.display(),
        kind.family(),
        match kind.family() {
            ProofFamily::PoRep => "porep-c1",
            ProofFamily::PoSt => "post",
            ProofFamily::SnapDeals => "snap",
        }
    );
    Ok(kind)
}

/// Reads a Filecoin request file, once.
pub fn read_request(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read proof request `{}`", path.display()))
}

/// Submits a Filecoin request file: read once, its kind checked ([`request_kind`]), the same
/// bytes handed to the pipeline. Errors name the file.
pub fn submit_request_file(
    pipeline: &crate::pipeline::Pipeline,
    path: &std::path::Path,
    proof_type: Option<&str>,
    family: Option<&str>,
) -> anyhow::Result<crate::pipeline::JobHandle> {
    let bytes = read_request(path)?;
    let kind = request_kind(path, &bytes, proof_type, family)?;
    pipeline
        .submit_job(AnyCircuit::Filecoin(kind), &bytes)
        .with_context(|| format!("proof request `{}`", path.display()))
}
