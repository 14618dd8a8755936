//! One module per subcommand (the measuring ones are `splitprover_bench::commands`).

#[cfg(feature = "filecoin")]
pub mod c1;
#[cfg(feature = "filecoin")]
pub mod curio;
pub mod demo;
#[cfg(feature = "filecoin")]
pub mod params;
pub mod prove;
pub mod service;
pub mod shape;
pub mod srs;
#[cfg(feature = "filecoin")]
pub mod verify;

use anyhow::Context;

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
