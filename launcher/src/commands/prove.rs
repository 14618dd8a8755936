//! `splitprover prove`: one job through the split pipeline, proof written to a file.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use ff::PrimeField;

use crate::cli::ProveArgs;
use crate::pipeline::Pipeline;

/// Runs one job.
pub fn run(args: ProveArgs) -> anyhow::Result<ExitCode> {
    let spec = super::parse_spec(&args.circuit)?;
    let settings = super::settings_from_args(&args.pipeline, &spec, args.srs.as_deref())?;
    let pipeline = Pipeline::start(settings)?;
    pipeline.wait_ready(Duration::from_secs(300))?;
    let outcome = pipeline.submit(&spec.to_string(), args.seed, args.partitions)?.wait()?;
    pipeline.shutdown();
    let proofs = match outcome.result {
        Ok(p) => p,
        Err(e) => anyhow::bail!("job {} failed: {e}", outcome.job_id),
    };
    write_outputs(&args.out, &spec, args.seed, &proofs)?;
    eprintln!(
        "proved `{spec}` ({} partition(s)) in {:.2}s: {}",
        proofs.len(),
        outcome.elapsed.as_secs_f64(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes the concatenated proofs to `out` and the public inputs (hex, little-endian field
/// representation, one list per partition) to `<out>.inputs.json`.
pub fn write_outputs(
    out: &std::path::Path,
    spec: &kernels::circuits::CircuitSpec,
    seed: u64,
    proofs: &[Vec<u8>],
) -> anyhow::Result<()> {
    let bytes: Vec<u8> = proofs.concat();
    std::fs::write(out, &bytes).with_context(|| format!("cannot write `{}`", out.display()))?;
    let inputs: Vec<Vec<String>> = (0..proofs.len() as u64)
        .map(|p| {
            spec.public_inputs(seed.wrapping_add(p))
                .map(|v| v.iter().map(|s| hex(s.to_repr().as_ref())).collect())
        })
        .collect::<Result<_, _>>()?;
    let json = serde_json::json!({ "circuit": spec.to_string(), "seed": seed, "public_inputs": inputs });
    let path = inputs_path(out);
    std::fs::write(&path, serde_json::to_vec_pretty(&json)?).with_context(|| format!("cannot write `{}`", path.display()))?;
    Ok(())
}

/// `<out>.inputs.json`.
pub fn inputs_path(out: &std::path::Path) -> std::path::PathBuf {
    let mut s = out.as_os_str().to_owned();
    s.push(".inputs.json");
    s.into()
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
