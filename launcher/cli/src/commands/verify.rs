//! `splitprover verify`: PoRep C2 proofs checked with filecoin-proofs' own `verify_seal`, the
//! check Curio makes on what a prover returns. Every proof is checked; the exit status is 1 if
//! any is refused.

use std::process::ExitCode;

use anyhow::Context;
use kernels::filecoin::porep;

use crate::cli::VerifyArgs;

/// Runs `splitprover verify`.
pub fn run(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    if let Some(dir) = &args.param_cache {
        // filecoin-proofs reads its settings once, at its first call: this runs before any.
        std::env::set_var(launcher::env::FIL_PROOFS_PARAMETER_CACHE, dir);
    }
    let c1 = std::fs::read(&args.porep_c1)
        .with_context(|| format!("cannot read `{}`", args.porep_c1.display()))?;
    let mut refused = 0;
    for path in &args.proofs {
        let proof =
            std::fs::read(path).with_context(|| format!("cannot read `{}`", path.display()))?;
        let ok = porep::verify_seal(&c1, &proof, args.miner_id, args.sector_number)
            .with_context(|| format!("checking `{}`", path.display()))?;
        println!(
            "{}: {}",
            path.display(),
            if ok { "verified" } else { "REFUSED" }
        );
        refused += usize::from(!ok);
    }
    Ok(if refused == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
