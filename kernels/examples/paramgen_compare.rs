//! Times the fast parameter generator against bellperson's `generate_random_parameters` on the
//! same circuit, same cores, one run, and checks that both produce the same parameters.
//!
//! `cargo run --release -p kernels --example paramgen_compare -- sha-chain:2`

use std::time::Instant;

use bellperson::groth16::generate_random_parameters;
use blstrs::Bls12;
use kernels::circuits::CircuitSpec;
use rand_chacha::rand_core::SeedableRng;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let spec: CircuitSpec = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "sha-chain:2".into())
        .parse()?;
    let shape = spec.shape()?;
    println!(
        "circuit {spec}: {} constraints, {} inputs, {} aux, domain 2^{}; {} rayon threads",
        shape.constraints,
        shape.inputs,
        shape.aux,
        shape.log_domain_size(),
        rayon::current_num_threads()
    );

    let t = Instant::now();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    let ours = kernels::paramgen::generate_parameters(spec.circuit(None), &mut rng, &|_| {})?;
    let t_ours = t.elapsed().as_secs_f64();
    println!("kernels::paramgen::generate_parameters: {t_ours:.2} s");

    let t = Instant::now();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    let theirs = generate_random_parameters::<Bls12, _, _>(spec.circuit(None), &mut rng)?;
    let t_theirs = t.elapsed().as_secs_f64();
    println!("bellperson generate_random_parameters: {t_theirs:.2} s");

    println!(
        "speedup: {:.1}x; identical parameters: {}",
        t_theirs / t_ours,
        ours == theirs
    );
    Ok(())
}
