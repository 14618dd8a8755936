//! `splitprover prove`: one job through the split pipeline, proof written to a file.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use ff::PrimeField;
use launcher::pipeline::Pipeline;

use crate::cli::ProveArgs;

/// Runs one job.
pub fn run(args: ProveArgs) -> anyhow::Result<ExitCode> {
    if let Some(request) = args.request.request_file() {
        return prove_request(&args, request);
    }
    let circuit = args
        .circuit
        .as_deref()
        .context("--circuit is required without a request file")?;
    let spec = launcher::settings::parse_spec(circuit)?;
    let settings = launcher::settings::from_args(&args.pipeline, &spec, args.srs.as_deref())?;
    let pipeline = Pipeline::start(settings)?;
    pipeline.wait_ready(Duration::from_secs(300))?;
    let outcome = pipeline
        .submit(&spec.to_string(), args.seed, args.partitions)?
        .wait()?;
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

/// Proves one Filecoin request (its kind from `--proof-type` or the request itself). The file
/// is read once.
fn prove_request(args: &ProveArgs, request: &std::path::Path) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(request)
        .with_context(|| format!("cannot read proof request `{}`", request.display()))?;
    let (kind, family) =
        super::request_choice(args.request.proof_type.as_deref(), args.request.family())?;
    let kind = kernels::job::filecoin_request_kind(&bytes, kind, family)
        .with_context(|| format!("proof request `{}`", request.display()))?;
    let spec = kernels::circuits::AnyCircuit::Filecoin(kind);
    let param_cache = args
        .param_cache
        .clone()
        .unwrap_or_else(launcher::env::param_cache_dir);
    let cache = args
        .pipeline
        .cache_dir
        .clone()
        .unwrap_or_else(launcher::env::cache_dir);
    let params = launcher::srs::resolve_any(&spec, args.srs.as_deref(), &cache, &param_cache)?;
    let settings = launcher::settings::for_circuit(&args.pipeline, spec, params)?;
    let pipeline = Pipeline::start(settings)?;
    pipeline.wait_ready(Duration::from_secs(600))?;
    let outcome = pipeline
        .submit_job(spec, &bytes)
        .with_context(|| format!("proof request `{}`", request.display()))?
        .wait()?;
    pipeline.shutdown();
    let proofs = match outcome.result {
        Ok(p) => p,
        Err(e) => anyhow::bail!("job {} ({kind}) failed: {e}", outcome.job_id),
    };
    write_proof(&args.out, &proofs)?;
    eprintln!(
        "proved `{kind}` ({} partition(s)) in {:.2}s: {}",
        proofs.len(),
        outcome.elapsed.as_secs_f64(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes the partitions' proofs, concatenated in order, to `out`: for a Filecoin request, the
/// proof bytes filecoin-proofs writes. Through a temporary file and a rename.
pub fn write_proof(out: &std::path::Path, proofs: &[Vec<u8>]) -> anyhow::Result<()> {
    let tmp = out.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, proofs.concat())
        .with_context(|| format!("cannot write `{}`", tmp.display()))?;
    std::fs::rename(&tmp, out).with_context(|| format!("cannot write `{}`", out.display()))
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
                .map(|v| v.iter().map(|s| super::hex(s.to_repr().as_ref())).collect())
        })
        .collect::<Result<_, _>>()?;
    let json =
        serde_json::json!({ "circuit": spec.to_string(), "seed": seed, "public_inputs": inputs });
    let path = inputs_path(out);
    std::fs::write(&path, serde_json::to_vec_pretty(&json)?)
        .with_context(|| format!("cannot write `{}`", path.display()))?;
    Ok(())
}

/// `<out>.inputs.json`.
pub fn inputs_path(out: &std::path::Path) -> std::path::PathBuf {
    let mut s = out.as_os_str().to_owned();
    s.push(".inputs.json");
    s.into()
}
