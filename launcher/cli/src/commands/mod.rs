//! One module per subcommand.

pub mod bench;
pub mod demo;
pub mod prove;
pub mod report;
pub mod service;
pub mod settings;
pub mod shape;
pub mod srs;
pub mod synth_bench;

pub use settings::{for_circuit as settings_for, from_args as settings_from_args};

use anyhow::Context;
use kernels::circuits::CircuitSpec;

/// Parses a circuit spec with a message naming it.
pub fn parse_spec(text: &str) -> anyhow::Result<CircuitSpec> {
    text.parse()
        .with_context(|| format!("bad circuit spec `{text}`"))
}

/// The `--proof-type` and request-flag choices of a Filecoin request (`porep`, `post`, `snap`),
/// parsed: what `kernels::job::filecoin_request_kind` checks the request against.
pub fn request_choice(
    proof_type: Option<&str>,
    family: Option<&str>,
) -> anyhow::Result<(
    Option<kernels::filecoin::ProofKind>,
    Option<kernels::circuits::ProofFamily>,
)> {
    let kind = proof_type
        .map(|k| k.parse().with_context(|| format!("bad proof type `{k}`")))
        .transpose()?;
    let family = family
        .map(|f| {
            kernels::circuits::ProofFamily::from_prefix(f)
                .with_context(|| format!("unknown request family `{f}` (porep, post or snap)"))
        })
        .transpose()?;
    Ok((kind, family))
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
