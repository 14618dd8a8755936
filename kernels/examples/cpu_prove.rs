//! CPU prover timing on a built-in circuit: synthesis, then `CpuBackend::prove_batch`, then
//! verification of every proof. Parameters come from the fast generator (seeded), or from a
//! bellperson `.params` file.
//!
//! ```text
//! cargo run --release -p kernels --example cpu_prove -- [--bellperson] SPEC [BATCH] [ITERS] [PARAMS_FILE]
//! cargo run --release -p kernels --example cpu_prove -- sha-chain:2 1 3     # 2^16
//! cargo run --release -p kernels --example cpu_prove -- sha-chain:38 1 3    # 2^20
//! ```
//!
//! `--bellperson` also times `bellperson::groth16::create_proof` on the same circuits, parameters
//! and randomness and checks that the proofs are identical.

use std::time::Instant;

use blstrs::Scalar;
use ff::Field;
use kernels::circuits::CircuitSpec;
use kernels::srs::SrsImage;
use kernels::synth::VecSink;
use kernels::{Backend, CpuBackend};
use rand_chacha::rand_core::SeedableRng;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let all: Vec<String> = std::env::args().collect();
    let compare = all.iter().any(|a| a == "--bellperson");
    let args: Vec<String> = all.into_iter().filter(|a| a != "--bellperson").collect();
    let spec: CircuitSpec = args
        .get(1)
        .map(String::as_str)
        .unwrap_or("sha-chain:1")
        .parse()?;
    let batch: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(1);
    let iters: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(3);
    let shape = spec.shape()?;
    println!(
        "circuit {spec}: {} constraints, {} aux, domain 2^{}; batch {batch}; {} rayon threads",
        shape.constraints,
        shape.aux,
        shape.log_domain_size(),
        rayon::current_num_threads()
    );

    let t = Instant::now();
    let image = match args.get(4) {
        Some(path) => {
            SrsImage::from_params_file(std::path::Path::new(path), spec.circuit_id(), false)?
        }
        None => {
            let params =
                kernels::paramgen::generate_parameters_seeded(spec.circuit(None), 1, &|_| {})?;
            SrsImage::from_parameters(&params, spec.circuit_id())?
        }
    };
    let params = compare
        .then(|| kernels::srs::SrsView::new(image.as_ref()).map(|v| v.to_parameters()))
        .transpose()?;
    println!(
        "parameters: {:.2} s ({} MiB image)",
        t.elapsed().as_secs_f64(),
        image.as_ref().len() >> 20
    );
    let backend = CpuBackend::new(image)?;
    backend.srs()?.check_shape(&shape)?;

    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    for it in 0..iters {
        let seeds: Vec<u64> = (0..batch as u64).map(|i| 1000 * it as u64 + i).collect();
        let t = Instant::now();
        let owned: Vec<_> = seeds
            .iter()
            .map(|&s| {
                spec.synthesize_into(s, VecSink::with_limit(shape))
                    .map(VecSink::finish)
            })
            .collect::<Result<_, _>>()?;
        let t_synth = t.elapsed().as_secs_f64();
        let asg: Vec<_> = owned.iter().map(|o| o.as_assignment()).collect();
        let r: Vec<Scalar> = seeds.iter().map(|_| Scalar::random(&mut rng)).collect();
        let s: Vec<Scalar> = seeds.iter().map(|_| Scalar::random(&mut rng)).collect();
        let t = Instant::now();
        let proofs = backend.prove_batch(&asg, &r, &s)?;
        let t_prove = t.elapsed().as_secs_f64();
        for (p, &seed) in proofs.iter().zip(&seeds) {
            if !backend.verify(p, &spec.public_inputs(seed)?)? {
                return Err("a proof did not verify".into());
            }
        }
        println!(
            "iter {it}: synthesis {t_synth:.3} s, prove {t_prove:.3} s ({:.3} s/proof), all verified",
            t_prove / batch as f64
        );
        if let Some(params) = &params {
            let circuits: Vec<_> = seeds.iter().map(|&s| spec.circuit(Some(s))).collect();
            let t = Instant::now();
            let theirs =
                bellperson::groth16::create_proof_batch(circuits, params, r.clone(), s.clone())?;
            let t_theirs = t.elapsed().as_secs_f64();
            println!(
                "iter {it}: bellperson create_proof_batch (synthesis + prove) {t_theirs:.3} s; identical proofs: {}",
                theirs == proofs
            );
        }
    }
    Ok(())
}
