//! `splitprover sparse-c1`: a valid PoRep C1 output of a committed-capacity sector of any size,
//! in seconds, without sealing (`kernels::filecoin::fixture::sparse_cc_sector`), written in the
//! JSON Curio sends, so any client (ours, Curio's) can send it to a C2 prover. Test and benchmark
//! data only: the replica it commits to does not exist.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use kernels::filecoin::fixture::{sparse_cc_sector, PROVER_MINER_ID};
use kernels::filecoin::ProofKind;

use crate::cli::SparseC1Args;

/// Runs `splitprover sparse-c1`.
pub fn run(args: SparseC1Args) -> anyhow::Result<ExitCode> {
    let kind: ProofKind = args
        .proof_type
        .parse()
        .with_context(|| format!("bad proof type `{}`", args.proof_type))?;
    let ProofKind::PoRep(proof) = kind else {
        anyhow::bail!("`{kind}` is not a PoRep proof type (porep:StackedDrg…V1_1)");
    };
    let t = Instant::now();
    let sector = sparse_cc_sector(proof, args.sector_number, args.seed)
        .with_context(|| format!("making a sparse {kind} C1 output"))?;
    let bytes = match args.form.as_str() {
        "api" => sector.c1_json.clone(),
        _ => sector.commit2in_json(),
    };
    std::fs::write(&args.out, &bytes)
        .with_context(|| format!("cannot write `{}`", args.out.display()))?;
    eprintln!(
        "{kind}: sparse CC sector {} made in {:.2} s, {} bytes written to `{}`",
        args.sector_number,
        t.elapsed().as_secs_f64(),
        bytes.len(),
        args.out.display()
    );
    println!("sector_number {}", args.sector_number);
    println!("miner_id {PROVER_MINER_ID}");
    println!("comm_r {}", super::hex(&sector.comm_r));
    println!("comm_d {}", super::hex(&sector.comm_d));
    Ok(ExitCode::SUCCESS)
}
