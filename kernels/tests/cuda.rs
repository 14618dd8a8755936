//! The CUDA backend against bellperson's CPU prover and the crate's CPU backend.
//!
//! Tests that need a GPU print `no GPU: skipping ...` and return where there is none (CI); the
//! parameter-file checks run everywhere, because they happen before any GPU work.
#![cfg(feature = "cuda")]

use std::path::Path;

use bellperson::groth16::Parameters;
use blstrs::{Bls12, Scalar};
use ff::Field;
use kernels::backend::cuda::{gpu_count, page_lock, CudaBackend};
use kernels::circuits::CircuitSpec;
use kernels::srs::{write_params_file, SrsImage};
use kernels::synth::{OwnedAssignment, VecSink};
use kernels::{Backend, CpuBackend, ErrorKind, Proof};
use rand::SeedableRng;

/// True when a GPU is present; otherwise says the test is skipped (a failure with
/// `SPLITPROVER_TEST_REQUIRE_GPU` set).
fn have_gpu(test: &str) -> bool {
    kernels::backend::cuda::gpu_for_test(test)
}

fn params_for(spec: &CircuitSpec, seed: u64) -> Parameters<Bls12> {
    kernels::paramgen::generate_parameters_seeded(spec.circuit(None), seed, &|_| {}).unwrap()
}

fn write_params(dir: &Path, spec: &CircuitSpec, params: &Parameters<Bls12>) -> std::path::PathBuf {
    let path = dir.join(format!("{}.params", spec.to_string().replace(':', "-")));
    write_params_file(&path, params).unwrap();
    path
}

fn synthesize(spec: &CircuitSpec, seed: u64) -> OwnedAssignment {
    spec.synthesize_into(seed, VecSink::new()).unwrap().finish()
}

fn proof_bytes(p: &Proof) -> Vec<u8> {
    let mut out = Vec::with_capacity(192);
    p.write(&mut out).unwrap();
    out
}

fn randomness(n: usize, seed: u64) -> (Vec<Scalar>, Vec<Scalar>) {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng)))
        .unzip()
}

#[test]
fn bad_params_files_fail_before_any_gpu_work() {
    let dir = tempfile::tempdir().unwrap();
    let spec: CircuitSpec = "pubinputs:2".parse().unwrap();
    let path = write_params(dir.path(), &spec, &params_for(&spec, 3));
    let bytes = std::fs::read(&path).unwrap();

    let short = dir.path().join("short.params");
    std::fs::write(&short, &bytes[..bytes.len() - 1]).unwrap();
    let err = CudaBackend::open(&short).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Truncated(_)), "{err}");

    let missing = dir.path().join("missing.params");
    let err = CudaBackend::open(&missing).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Io(_)), "{err}");

    match CudaBackend::open(&path) {
        Ok(backend) => assert!(gpu_count().unwrap() > 0, "opened {backend:?} without a GPU"),
        Err(err) => {
            assert_eq!(gpu_count().unwrap(), 0, "a good file failed to open: {err}");
            assert!(matches!(err.kind(), ErrorKind::NoGpu), "{err}");
        }
    }
}

/// Every built-in circuit kind, batch of 3: bit-exact with bellperson's `create_proof` and with
/// the CPU backend, and verified.
#[test]
fn proofs_match_bellperson_bit_for_bit() {
    if !have_gpu("proofs_match_bellperson_bit_for_bit") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for spec in ["sha-chain:1", "pubinputs:5", "bits:3000"] {
        let spec: CircuitSpec = spec.parse().unwrap();
        let params = params_for(&spec, 11);
        let cuda = CudaBackend::open(write_params(dir.path(), &spec, &params)).unwrap();
        let cpu = CpuBackend::new(SrsImage::from_parameters(&params, spec.circuit_id()).unwrap())
            .unwrap();

        let seeds = [1u64, 2, 3];
        let owned: Vec<OwnedAssignment> = seeds.iter().map(|&s| synthesize(&spec, s)).collect();
        let batch: Vec<_> = owned.iter().map(OwnedAssignment::as_assignment).collect();
        let (r, s) = randomness(seeds.len(), 99);

        let gpu_proofs = cuda.prove_batch(&batch, &r, &s).unwrap();
        let cpu_proofs = cpu.prove_batch(&batch, &r, &s).unwrap();
        assert_eq!(gpu_proofs.len(), seeds.len());
        for (i, &seed) in seeds.iter().enumerate() {
            let reference =
                bellperson::groth16::create_proof(spec.circuit(Some(seed)), &params, r[i], s[i])
                    .unwrap();
            assert_eq!(
                proof_bytes(&gpu_proofs[i]),
                proof_bytes(&reference),
                "{spec} seed {seed}: cuda vs bellperson"
            );
            assert_eq!(
                proof_bytes(&gpu_proofs[i]),
                proof_bytes(&cpu_proofs[i]),
                "{spec} seed {seed}: cuda vs cpu"
            );
            let inputs = spec.public_inputs(seed).unwrap();
            assert!(
                cuda.verify(&gpu_proofs[i], &inputs).unwrap(),
                "{spec} seed {seed}: does not verify"
            );
            let mut wrong = inputs.clone();
            wrong[0] += Scalar::ONE;
            assert!(
                !cuda.verify(&gpu_proofs[i], &wrong).unwrap(),
                "{spec} seed {seed}: verifies wrong inputs"
            );
        }
        println!("{spec}: {} proofs bit-exact and verified", seeds.len());
    }
}

/// A batch that does not fit the SRS is a typed error and leaves the backend usable.
#[test]
fn mismatched_batches_are_errors_not_crashes() {
    if !have_gpu("mismatched_batches_are_errors_not_crashes") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec: CircuitSpec = "pubinputs:4".parse().unwrap();
    let params = params_for(&spec, 5);
    let cuda = CudaBackend::open(write_params(dir.path(), &spec, &params)).unwrap();

    let other: CircuitSpec = "pubinputs:3".parse().unwrap();
    let wrong = synthesize(&other, 1);
    let right = synthesize(&spec, 1);
    let (r, s) = randomness(2, 1);
    let err = cuda
        .prove_batch(&[right.as_assignment(), wrong.as_assignment()], &r, &s)
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::ShapeMismatch { .. }),
        "{err}"
    );
    let err = cuda
        .prove_batch(&[right.as_assignment()], &r, &s[..1])
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::ShapeMismatch { .. }),
        "{err}"
    );
    let mut bad_density = right.clone();
    bad_density.b_aux_density.popcount += 1;
    let err = cuda
        .prove_batch(&[bad_density.as_assignment()], &r[..1], &s[..1])
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::InvalidDensity { .. }),
        "{err}"
    );

    let proofs = cuda
        .prove_batch(&[right.as_assignment()], &r[..1], &s[..1])
        .unwrap();
    assert!(cuda
        .verify(&proofs[0], &spec.public_inputs(1).unwrap())
        .unwrap());
    assert!(cuda.prove_batch(&[], &[], &[]).unwrap().is_empty());
}

/// Page-locking: a second registration of the same range is refused, the lock is released on
/// drop, and proving from page-locked assignments gives the same proofs.
#[test]
fn page_locked_assignments_prove_the_same() {
    if !have_gpu("page_locked_assignments_prove_the_same") {
        return;
    }
    let mut buf = vec![0u8; 4 << 20];
    // SAFETY: `buf` outlives every lock taken on it in this block; locks are dropped in order.
    unsafe {
        let lock = page_lock(buf.as_mut_ptr(), buf.len()).unwrap();
        assert_eq!(lock.len(), buf.len());
        let again = page_lock(buf.as_mut_ptr(), buf.len()).unwrap_err();
        assert!(matches!(again.kind(), ErrorKind::Cuda(_)), "{again}");
        drop(lock);
        drop(page_lock(buf.as_mut_ptr(), buf.len()).unwrap());
    }

    let dir = tempfile::tempdir().unwrap();
    let spec: CircuitSpec = "sha-chain:1".parse().unwrap();
    let params = params_for(&spec, 8);
    let cuda = CudaBackend::open(write_params(dir.path(), &spec, &params)).unwrap();
    let owned = synthesize(&spec, 4);
    let (r, s) = randomness(1, 4);
    let pageable = cuda.prove_batch(&[owned.as_assignment()], &r, &s).unwrap();

    // One buffer holding a, b, c, input and aux back to back, page-locked once, as gpu-proc
    // locks its ring mapping.
    let owned = [owned];
    let pinned = kernels::backend::cuda::PinnedAssignments::new(&owned).unwrap();
    let locked = cuda.prove_batch(&pinned.views(&owned), &r, &s).unwrap();
    drop(pinned);
    assert_eq!(proof_bytes(&pageable[0]), proof_bytes(&locked[0]));
    assert!(cuda
        .verify(&locked[0], &spec.public_inputs(4).unwrap())
        .unwrap());
}

/// The supraseal-c2 linked into the binary is our patched copy (vendor/supraseal-c2): the one
/// whose batch additions are ordered across CUDA streams. Without it, proofs of large circuits do
/// not verify (benchmarks/2026-11-30-h200/NOTES.md). Needs no GPU.
#[test]
fn supraseal_is_the_patched_copy() {
    assert_eq!(
        kernels::backend::cuda::supraseal_patch_level(),
        kernels::backend::cuda::SUPRASEAL_PATCH_LEVEL
    );
}
