//! The CPU backend against bellperson 0.27's `create_proof`: same SRS, same r and s, same bytes.

use bellperson::groth16::{create_proof, prepare_verifying_key, verify_proof, Parameters};
use blstrs::{Bls12, Scalar};
use ff::Field;
use kernels::circuits::CircuitSpec;
use kernels::paramgen::generate_parameters_seeded;
use kernels::srs::SrsImage;
use kernels::synth::{synthesize_owned, OwnedAssignment};
use kernels::{Backend, CpuBackend, ErrorKind, Proof};
use rand_chacha::rand_core::SeedableRng;

fn setup(spec: &str) -> (CircuitSpec, Parameters<Bls12>, CpuBackend) {
    let spec: CircuitSpec = spec.parse().unwrap();
    let params = generate_parameters_seeded(spec.circuit(None), 11, &|_| {}).unwrap();
    let image = SrsImage::from_parameters(&params, spec.circuit_id()).unwrap();
    let backend = CpuBackend::new(image).unwrap();
    (spec, params, backend)
}

fn bytes(p: &Proof) -> Vec<u8> {
    let mut v = Vec::new();
    p.write(&mut v).unwrap();
    v
}

fn check_bit_exact(spec: &str, seeds: &[u64]) {
    let (spec, params, backend) = setup(spec);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(99);
    let owned: Vec<OwnedAssignment> = seeds
        .iter()
        .map(|&seed| {
            spec.synthesize_into(seed, kernels::synth::VecSink::new())
                .unwrap()
                .finish()
        })
        .collect();
    let batch: Vec<_> = owned.iter().map(|o| o.as_assignment()).collect();
    let r: Vec<Scalar> = seeds.iter().map(|_| Scalar::random(&mut rng)).collect();
    let s: Vec<Scalar> = seeds.iter().map(|_| Scalar::random(&mut rng)).collect();
    let ours = backend.prove_batch(&batch, &r, &s).unwrap();
    let pvk = prepare_verifying_key(&params.vk);
    for (i, &seed) in seeds.iter().enumerate() {
        let theirs = create_proof(spec.circuit(Some(seed)), &params, r[i], s[i]).unwrap();
        assert_eq!(
            bytes(&ours[i]),
            bytes(&theirs),
            "{spec} seed {seed}: proof bytes differ from bellperson"
        );
        let inputs = spec.public_inputs(seed).unwrap();
        assert!(
            verify_proof(&pvk, &ours[i], &inputs).unwrap(),
            "{spec} seed {seed}: does not verify"
        );
        assert!(backend.verify(&ours[i], &inputs).unwrap());
        // wrong public inputs are rejected
        let mut bad = inputs.clone();
        bad[0] += Scalar::ONE;
        assert!(!backend.verify(&ours[i], &bad).unwrap());
    }
}

#[test]
fn sha_chain_is_bit_exact_with_bellperson() {
    check_bit_exact("sha-chain:1", &[1]);
}

#[test]
fn public_inputs_circuit_is_bit_exact_batched() {
    check_bit_exact("pubinputs:6", &[1, 2, 3]);
}

#[test]
fn boolean_heavy_circuit_is_bit_exact() {
    check_bit_exact("bits:3000", &[5, 6]);
}

#[test]
fn synthesize_matches_between_sinks_and_spec() {
    let spec: CircuitSpec = "pubinputs:2".parse().unwrap();
    let a = spec
        .synthesize_into(4, kernels::synth::VecSink::new())
        .unwrap()
        .finish();
    let b = synthesize_owned(spec.circuit(Some(4))).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.shape(), spec.shape().unwrap());
}

#[test]
fn mismatched_inputs_are_errors_not_panics() {
    let (spec, _params, backend) = setup("pubinputs:2");
    let owned = spec
        .synthesize_into(1, kernels::synth::VecSink::new())
        .unwrap()
        .finish();
    let one = [Scalar::ONE];
    let ok = owned.as_assignment();

    // r/s count
    let err = backend.prove_batch(&[ok], &one, &[]).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::ShapeMismatch { .. }),
        "{err}"
    );

    // short b
    let mut bad = ok;
    bad.b = &owned.b[1..];
    let err = backend.prove_batch(&[bad], &one, &one).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::ShapeMismatch { .. }),
        "{err}"
    );

    // density claiming a wrong popcount
    let mut bad = ok;
    bad.a_aux_density.popcount += 1;
    let err = backend.prove_batch(&[bad], &one, &one).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::InvalidDensity { .. }),
        "{err}"
    );

    // density with too few words
    let mut bad = ok;
    bad.b_aux_density.words = &[];
    let err = backend.prove_batch(&[bad], &one, &one).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::InvalidDensity { .. }),
        "{err}"
    );

    // a circuit of another size against this SRS
    let other: CircuitSpec = "pubinputs:3".parse().unwrap();
    let o = other
        .synthesize_into(1, kernels::synth::VecSink::new())
        .unwrap()
        .finish();
    let err = backend
        .prove_batch(&[o.as_assignment()], &one, &one)
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::ShapeMismatch { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("shape mismatch"), "{err}");
}

#[test]
fn backend_works_over_a_shared_arc_mapping() {
    // Any `AsRef<[u8]>` works: here an `Arc` around an aligned buffer, as gpu-proc holds a mapping.
    struct Shared(std::sync::Arc<kernels::srs::AlignedBytes>);
    impl AsRef<[u8]> for Shared {
        fn as_ref(&self) -> &[u8] {
            self.0.as_ref().as_ref()
        }
    }
    let spec: CircuitSpec = "bits:128".parse().unwrap();
    let params = generate_parameters_seeded(spec.circuit(None), 3, &|_| {}).unwrap();
    let image = std::sync::Arc::new(SrsImage::from_parameters(&params, spec.circuit_id()).unwrap());
    let a = CpuBackend::new(Shared(image.clone())).unwrap();
    let b = CpuBackend::new(Shared(image)).unwrap();
    let owned = spec
        .synthesize_into(8, kernels::synth::VecSink::new())
        .unwrap()
        .finish();
    let r = [Scalar::from(5u64)];
    let s = [Scalar::from(6u64)];
    let pa = a.prove_batch(&[owned.as_assignment()], &r, &s).unwrap();
    let pb = b.prove_batch(&[owned.as_assignment()], &r, &s).unwrap();
    assert_eq!(pa, pb);
    assert!(a.verify(&pa[0], &spec.public_inputs(8).unwrap()).unwrap());
    assert_eq!(a.srs().unwrap().circuit_id(), spec.circuit_id());
}

/// The unblinded components assemble into the proof exactly as the Groth16 formulas say; the
/// CUDA diagnostics (`examples/cuda_diag.rs`) rely on this to compare provers component by
/// component.
#[test]
fn components_assemble_into_the_proof() {
    use blstrs::{G1Projective, G2Projective};
    use group::Curve;
    let (spec, _params, backend) = setup("pubinputs:4");
    let owned = spec
        .synthesize_into(3, kernels::synth::VecSink::new())
        .unwrap()
        .finish();
    let asg = owned.as_assignment();
    let c = backend.components(&asg).unwrap();
    let srs = backend.srs().unwrap();
    let (zero, one) = (Scalar::ZERO, Scalar::ONE);
    let p00 = backend
        .prove_batch(&[asg], &[zero], &[zero])
        .unwrap()
        .remove(0);
    assert_eq!(
        p00.a,
        (G1Projective::from(srs.alpha_g1()) + c.a).to_affine()
    );
    assert_eq!(
        p00.b,
        (G2Projective::from(srs.beta_g2()) + c.b_g2).to_affine()
    );
    assert_eq!(p00.c, (c.h + c.l).to_affine());
    let p10 = backend
        .prove_batch(&[asg], &[one], &[zero])
        .unwrap()
        .remove(0);
    let b1 = G1Projective::from(p10.c) - G1Projective::from(p00.c) - srs.beta_g1();
    assert_eq!(b1.to_affine(), c.b_g1.to_affine());
    // A quotient of zero: the H component is the identity.
    let zeros = vec![Scalar::ZERO; asg.a.len()];
    let mut no_abc = asg;
    no_abc.a = &zeros;
    no_abc.b = &zeros;
    no_abc.c = &zeros;
    assert_eq!(
        backend.components(&no_abc).unwrap().h,
        <G1Projective as group::Group>::identity()
    );
}
