//! Our own GPU prover (backend `gpu`) against the CPU backend: the same proof bytes for the same
//! SRS, assignment, `r` and `s`, and the same five unblinded sums.
//!
//! Without a GPU the tests that need one print `no GPU: skipping ...` and return (CI has none);
//! `SPLITPROVER_TEST_REQUIRE_GPU=1` turns the skip into a failure on GPU machines.
#![cfg(feature = "cuda")]

use blstrs::Scalar;
use ff::Field;
use kernels::backend::cuda::gpu_count;
use kernels::backend::gpu::GpuBackend;
use kernels::circuits::CircuitSpec;
use kernels::srs::{AlignedBytes, SrsImage, SrsView};
use kernels::synth::{OwnedAssignment, VecSink};
use kernels::{Backend, CpuBackend, ErrorKind, Proof};
use rand::SeedableRng;

fn have_gpu(test: &str) -> bool {
    let n = gpu_count().expect("gpu_count reports no GPU as 0, never as an error");
    if n == 0 {
        assert!(
            std::env::var_os("SPLITPROVER_TEST_REQUIRE_GPU").is_none(),
            "SPLITPROVER_TEST_REQUIRE_GPU is set but there is no GPU for {test}"
        );
        println!("no GPU: skipping {test}");
        return false;
    }
    true
}

fn image_for(spec: &CircuitSpec, seed: u64) -> AlignedBytes {
    let params =
        kernels::paramgen::generate_parameters_seeded(spec.circuit(None), seed, &|_| {}).unwrap();
    SrsImage::from_parameters(&params, spec.circuit_id()).unwrap()
}

fn synthesize(spec: &CircuitSpec, seed: u64) -> OwnedAssignment {
    spec.synthesize_into(seed, VecSink::new()).unwrap().finish()
}

fn bytes(p: &Proof) -> Vec<u8> {
    let mut out = Vec::with_capacity(192);
    p.write(&mut out).unwrap();
    out
}

#[test]
fn without_a_gpu_the_backend_is_a_typed_error() {
    let spec: CircuitSpec = "pubinputs:2".parse().unwrap();
    let image = image_for(&spec, 1);
    let view = SrsView::new(image.as_ref()).unwrap();
    match GpuBackend::new(&view) {
        Ok(backend) => {
            assert!(gpu_count().unwrap() > 0, "opened {backend:?} without a GPU");
            let r = backend.residency();
            assert!(r.srs_bytes > 0 && r.scratch_bytes > 0, "{r:?}");
        }
        Err(e) => {
            assert_eq!(gpu_count().unwrap(), 0, "a good SRS failed to upload: {e}");
            assert!(matches!(e.kind(), ErrorKind::NoGpu), "{e}");
        }
    }
}

#[test]
fn gpu_proofs_equal_cpu_proofs_bit_for_bit() {
    if !have_gpu("gpu_proofs_equal_cpu_proofs_bit_for_bit") {
        return;
    }
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
    // Inputs only, bits only (0/1 scalars everywhere), and a SHA-256 chain at 2^15.
    for spec in ["pubinputs:8", "bits:300", "sha-chain:1"] {
        let spec: CircuitSpec = spec.parse().unwrap();
        let image = image_for(&spec, 3);
        let cpu = CpuBackend::new(&image).unwrap();
        let gpu = GpuBackend::new(&SrsView::new(image.as_ref()).unwrap()).unwrap();
        for seed in 1..=3 {
            let owned = synthesize(&spec, seed);
            let asg = owned.as_assignment();
            let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
            let ours = gpu.prove_batch(&[asg], &[r], &[s]).unwrap().remove(0);
            let theirs = cpu.prove_batch(&[asg], &[r], &[s]).unwrap().remove(0);
            assert_eq!(bytes(&ours), bytes(&theirs), "{spec} seed {seed}");
            let inputs = spec.public_inputs(seed).unwrap();
            assert!(gpu.verify(&ours, &inputs).unwrap(), "{spec} seed {seed}");
            let (sums, phases) = gpu.prove_components(&asg).unwrap();
            assert_eq!(sums, cpu.components(&asg).unwrap(), "{spec} seed {seed}");
            assert!(phases.total > 0.0, "{phases:?}");
        }
        // r = s = 0 isolates the sums: A = alpha + a, C = h + l.
        let owned = synthesize(&spec, 9);
        let asg = owned.as_assignment();
        let z = [Scalar::ZERO];
        let ours = gpu.prove_batch(&[asg], &z, &z).unwrap().remove(0);
        let theirs = cpu.prove_batch(&[asg], &z, &z).unwrap().remove(0);
        assert_eq!(bytes(&ours), bytes(&theirs), "{spec} with r = s = 0");
    }
}

#[test]
fn a_mismatched_circuit_is_an_error_and_the_backend_keeps_serving() {
    if !have_gpu("a_mismatched_circuit_is_an_error_and_the_backend_keeps_serving") {
        return;
    }
    let spec: CircuitSpec = "bits:64".parse().unwrap();
    let image = image_for(&spec, 5);
    let gpu = GpuBackend::new(&SrsView::new(image.as_ref()).unwrap()).unwrap();
    let other: CircuitSpec = "bits:65".parse().unwrap();
    let wrong = synthesize(&other, 1);
    let one = [Scalar::ONE];
    let err = gpu
        .prove_batch(&[wrong.as_assignment()], &one, &one)
        .unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ErrorKind::ShapeMismatch { .. } | ErrorKind::InvalidDensity { .. }
        ),
        "{err}"
    );
    let good = synthesize(&spec, 1);
    let err = gpu
        .prove_batch(&[good.as_assignment()], &one, &[])
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::ShapeMismatch { .. }),
        "{err}"
    );
    let proof = gpu
        .prove_batch(&[good.as_assignment()], &one, &one)
        .unwrap()
        .remove(0);
    assert!(gpu.verify(&proof, &spec.public_inputs(1).unwrap()).unwrap());
}

#[test]
fn the_gpu_generator_gives_the_cpu_generators_parameters() {
    if !have_gpu("the_gpu_generator_gives_the_cpu_generators_parameters") {
        return;
    }
    use kernels::paramgen::{generate_parameters_seeded_on, GenDevice};
    // Inputs, zero and non-zero A/B scalars, and G2 points; bits:1100 makes the G1 queries
    // longer than the comb table's smallest window (1,024 points), so `w` is 9 there.
    for (spec, seed) in [("pubinputs:3", 4), ("bits:1100", 9)] {
        let spec: CircuitSpec = spec.parse().unwrap();
        let gpu = generate_parameters_seeded_on(spec.circuit(None), seed, GenDevice::Gpu, &|_| {})
            .unwrap();
        let cpu = generate_parameters_seeded_on(spec.circuit(None), seed, GenDevice::Cpu, &|_| {})
            .unwrap();
        assert_eq!(gpu.h.len(), cpu.h.len(), "{spec}");
        assert!(gpu == cpu, "{spec}: the GPU generator's parameters differ");
    }
}

#[test]
fn the_gpu_generator_without_a_gpu_says_so() {
    if gpu_count().unwrap() > 0 {
        println!("a GPU is present: the no-GPU error is not reachable here");
        return;
    }
    use kernels::paramgen::{generate_parameters_seeded_on, GenDevice};
    let spec: CircuitSpec = "bits:8".parse().unwrap();
    let Err(err) = generate_parameters_seeded_on(spec.circuit(None), 1, GenDevice::Gpu, &|_| {})
    else {
        panic!("the GPU generator ran without a GPU");
    };
    assert!(matches!(err.kind(), ErrorKind::NoGpu), "{err}");
}
