//! PoRep C2 for a 2 KiB sector on this machine: seal (PC1, PC2, C1 with filecoin-proofs), generate
//! local parameters with the fast generator, then prove C2 from the C1 output with our CPU backend
//! (and the CUDA backend when built with `--features filecoin,cuda` and a GPU is present) and with
//! stock `filecoin_proofs::seal_commit_phase2`, in one run; every proof is checked with
//! `verify_seal`. Prints one line per prover.
//!
//!     cargo run --release -p kernels --features filecoin[,cuda] --example porep_c2 -- [ITERS] [DIR]

use std::path::PathBuf;
use std::time::Instant;

use filecoin_proofs::{
    add_piece, generate_piece_commitment, seal_commit_phase1, seal_commit_phase2, seal_pre_commit_phase1,
    seal_pre_commit_phase2, verify_seal, PaddedBytesAmount, SectorShape2KiB, UnpaddedBytesAmount,
};
use kernels::filecoin::{generate_porep_parameters, porep_config, ApiVersion, PoRepC2};
use kernels::srs::SrsImage;
use kernels::{Backend, CpuBackend};
use rand::{Rng, SeedableRng};
use storage_proofs_core::sector::SectorId;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let iters: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(3);
    let dir = PathBuf::from(args.next().unwrap_or_else(|| "porep-c2-work".into()));
    std::fs::create_dir_all(dir.join("params"))?;
    std::fs::create_dir_all(dir.join("parents"))?;
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", dir.join("params"));
    std::env::set_var("FIL_PROOFS_PARENT_CACHE", dir.join("parents"));

    let (prover_id, sector) = ([9u8; 32], SectorId::from(4242));
    let config = porep_config(2048, [5; 32], ApiVersion::V1_2_0)?;
    let t = Instant::now();
    let (files, _) = generate_porep_parameters::<SectorShape2KiB>(&config, &dir.join("params"), 17, &|_| {})?;
    println!("parameters (fast generator): {:.1} s", t.elapsed().as_secs_f64());

    // Seal a 2 KiB sector of random data.
    let t = Instant::now();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(11);
    let unpadded = UnpaddedBytesAmount::from(PaddedBytesAmount(2048));
    let data: Vec<u8> = (0..u64::from(unpadded)).map(|_| rng.gen()).collect();
    let piece = generate_piece_commitment(&data[..], unpadded)?;
    let work = tempfile::tempdir_in(&dir)?;
    let (staged, sealed, cache) = (work.path().join("staged"), work.path().join("sealed"), work.path().join("cache"));
    std::fs::create_dir_all(&cache)?;
    std::fs::write(&sealed, [])?;
    add_piece(&data[..], std::fs::File::create(&staged)?, unpadded, &[])?;
    let (ticket, seed): ([u8; 32], [u8; 32]) = (rng.gen(), rng.gen());
    let pieces = [piece];
    let pc1 = seal_pre_commit_phase1::<_, _, _, SectorShape2KiB>(
        &config, &cache, &staged, &sealed, prover_id, sector, ticket, &pieces,
    )?;
    let pc2 = seal_pre_commit_phase2(&config, pc1, &cache, &sealed)?;
    let (comm_r, comm_d) = (pc2.comm_r, pc2.comm_d);
    let c1 = seal_commit_phase1::<_, SectorShape2KiB>(&config, &cache, &sealed, prover_id, sector, ticket, seed, pc2, &pieces)?;
    println!("seal (PC1, PC2, C1): {:.2} s", t.elapsed().as_secs_f64());
    let c1_json = serde_json::to_vec(&c1)?;
    let check = |proof: &[u8]| verify_seal::<SectorShape2KiB>(&config, comm_r, comm_d, prover_id, sector, ticket, seed, proof);

    let job = PoRepC2::<SectorShape2KiB>::from_json(&config, &c1_json)?;
    let image = SrsImage::from_params_file(&files.params, files.circuit_id(), false)?;
    let run = |backend: &dyn Fn() -> Result<(Vec<u8>, &'static str), Box<dyn std::error::Error>>| {
        for i in 0..iters {
            let t = Instant::now();
            let (proof, name) = backend()?;
            let secs = t.elapsed().as_secs_f64();
            println!("C2 ours ({name}) run {i}: {secs:.2} s (synthesis + prove), verify_seal = {}", check(&proof)?);
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    };
    let cpu = CpuBackend::new(image)?;
    run(&|| Ok((job.prove(&cpu, &mut rand::thread_rng())?, cpu.name())))?;
    #[cfg(feature = "cuda")]
    if kernels::backend::cuda::gpu_count()? > 0 {
        let cuda = kernels::backend::cuda::CudaBackend::open(&files.params)?;
        run(&|| Ok((job.prove(&cuda, &mut rand::thread_rng())?, cuda.name())))?;
    }
    for i in 0..iters.min(2) {
        let t = Instant::now();
        let c1_again: filecoin_proofs::SealCommitPhase1Output<SectorShape2KiB> = serde_json::from_slice(&c1_json)?;
        let out = seal_commit_phase2(&config, c1_again, prover_id, sector)?;
        let secs = t.elapsed().as_secs_f64();
        println!("C2 stock filecoin-proofs (bellperson CPU) run {i}: {secs:.2} s, verify_seal = {}", check(&out.proof)?);
    }
    Ok(())
}
