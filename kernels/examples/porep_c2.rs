//! PoRep C2 on this machine, in process: seal a sector (PC1, PC2, C1 through filecoin-proofs-api),
//! make sure local parameters exist (fast generator), then prove C2 from the C1 output with our
//! CPU backend (and the CUDA backend when built with `--features filecoin,cuda` and a GPU is
//! present) and with stock filecoin-proofs-api `seal_commit_phase2`, in one run; every proof is
//! checked with `verify_seal`. Prints one line per prover. (The split pipeline's figure comes from
//! `splitprover bench --porep`.)
//!
//!     cargo run --release -p kernels --features filecoin[,cuda] --example porep_c2 -- \
//!         [ITERS] [DIR] [PROOF, default StackedDrg2KiBV1_1]

use std::path::PathBuf;
use std::time::Instant;

use filecoin_proofs_api::{seal, SectorId};
use kernels::filecoin::{self, fixture, ProofKind};
use kernels::srs::SrsImage;
use kernels::{Backend, CpuBackend};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let iters: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(3);
    let dir = PathBuf::from(args.next().unwrap_or_else(|| "porep-c2-work".into()));
    let kind: ProofKind = format!(
        "porep:{}",
        args.next().unwrap_or_else(|| "StackedDrg2KiBV1_1".into())
    )
    .parse()?;
    let ProofKind::PoRep(proof) = kind else {
        unreachable!("parsed as porep")
    };
    std::fs::create_dir_all(dir.join("params"))?;
    std::fs::create_dir_all(dir.join("parents"))?;
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", dir.join("params"));
    std::env::set_var("FIL_PROOFS_PARENT_CACHE", dir.join("parents"));

    let t = Instant::now();
    let (files, generated) = filecoin::ensure_parameters(kind, dir.join("params"), 17, &|_| {})?;
    println!(
        "parameters (fast generator, generated: {generated}): {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let sector = fixture::seal_sector(proof, &dir.join("sector"), 4242, 11)?;
    println!(
        "seal {kind} (PC1, PC2, C1): {:.2} s",
        t.elapsed().as_secs_f64()
    );

    let job = filecoin::open_job(kind, &sector.c1_json)?;
    let image = SrsImage::from_params_file(&files.params, files.circuit_id(), false)?;
    let run = |backend: &dyn Fn()
        -> Result<(Vec<u8>, &'static str), Box<dyn std::error::Error>>| {
        for i in 0..iters {
            let t = Instant::now();
            let (proof, name) = backend()?;
            let secs = t.elapsed().as_secs_f64();
            println!(
                "C2 ours ({name}) run {i}: {secs:.2} s (synthesis + prove), verify_seal = {}",
                sector.verify(&proof, None)?
            );
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    };
    let cpu = CpuBackend::new(image)?;
    run(&|| {
        Ok((
            filecoin::prove_job(&*job, &cpu, &mut rand::thread_rng())?,
            cpu.name(),
        ))
    })?;
    #[cfg(feature = "cuda")]
    if kernels::backend::cuda::gpu_count()? > 0 {
        let cuda = kernels::backend::cuda::CudaBackend::open(&files.params)?;
        run(&|| {
            Ok((
                filecoin::prove_job(&*job, &cuda, &mut rand::thread_rng())?,
                cuda.name(),
            ))
        })?;
    }
    for i in 0..iters.min(2) {
        let t = Instant::now();
        let c1: seal::SealCommitPhase1Output = serde_json::from_slice(&sector.c1_json)?;
        let out = seal::seal_commit_phase2(c1, sector.prover_id, SectorId::from(sector.sector_id))?;
        let secs = t.elapsed().as_secs_f64();
        println!(
            "C2 stock filecoin-proofs (bellperson CPU) run {i}: {secs:.2} s, verify_seal = {}",
            sector.verify(&out.proof, None)?
        );
    }
    Ok(())
}
