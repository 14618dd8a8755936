//! `splitprover submit --curio-miner-id N`: a PoRep C1 output sent exactly as Curio's cuzk client
//! sends it (cuzk's `SubmitProofRequest` envelope: `proof_kind` POREP_SEAL_COMMIT, `sector_size`,
//! `registered_proof` as the Go ABI number, `sector_number`, `miner_id`, `vanilla_proof` the
//! lotus-bench `Commit2In` JSON), instead of this project's own `circuit` + `request` fields. So
//! the service's Curio path (the envelope's translation and its consistency checks) is what a
//! test or a benchmark exercises.

use anyhow::Context;
use kernels::filecoin::{porep, ProofKind};
use launcher::api::{curio, pb};

/// Curio's request for the C1 output `c1` (a `Commit2In` JSON, which names the sector number)
/// of `kind`, for miner `miner_id`.
pub fn porep_request(
    c1: Vec<u8>,
    kind: ProofKind,
    miner_id: u64,
    request_id: Option<String>,
) -> anyhow::Result<pb::SubmitProofRequest> {
    let ProofKind::PoRep(proof) = kind else {
        anyhow::bail!("--curio-miner-id sends PoRep C1 outputs only (this request is `{kind}`)");
    };
    let sector = porep::commit2in_fields(&c1)?
        .and_then(|f| f.sector_num)
        .context(
            "Curio sends the C1 output in lotus-bench's `Commit2In` JSON, which names the sector \
             (`SectorNum`); this file is not one\nhint: `splitprover sparse-c1` writes that form",
        )?;
    Ok(pb::SubmitProofRequest {
        // Curio's own request id pattern.
        request_id: request_id.unwrap_or_else(|| format!("porep-{miner_id}-{sector}")),
        proof_kind: pb::ProofKind::PorepSealCommit as i32,
        sector_size: kind.sector_size(),
        registered_proof: curio::seal_number(proof)
            .with_context(|| format!("`{kind}` has no Go ABI number"))?,
        priority: pb::Priority::Normal as i32,
        vanilla_proof: c1,
        sector_number: sector,
        miner_id,
        ..Default::default()
    })
}
