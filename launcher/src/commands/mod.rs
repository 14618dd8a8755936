//! One module per subcommand.

pub mod bench;
pub mod demo;
pub mod prove;
pub mod service;
pub mod settings;
pub mod srs;

pub use settings::{for_circuit as settings_for, from_args as settings_from_args};

use anyhow::Context;
use kernels::circuits::{AnyCircuit, CircuitSpec};

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
