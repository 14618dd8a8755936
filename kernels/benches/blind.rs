//! Host CPU of blinding one proof (criterion): the GPU backend's `Blinder` against the shared
//! `BlindingKey::proof`, the host's share when the device finishes the proof (its input before,
//! C's last addition after), and the group operations they are made of, on random sums.

use blstrs::{G1Projective, G2Projective, Scalar};
use criterion::{criterion_group, criterion_main, Criterion};
use ff::Field;
use group::{Curve, Group};
use kernels::backend::blind::{device_reference, Blinder};
use kernels::backend::{BlindingKey, Components};
use kernels::circuits::CircuitSpec;
use kernels::srs::{SrsImage, SrsView};
use rand_chacha::rand_core::SeedableRng;

fn blind(c: &mut Criterion) {
    let spec: CircuitSpec = "pubinputs:2".parse().expect("spec");
    let params = kernels::paramgen::generate_parameters_seeded(spec.circuit(None), 1, &|_| {})
        .expect("params");
    let image = SrsImage::from_parameters(&params, spec.circuit_id()).expect("image");
    let key = BlindingKey::of(&SrsView::new(image.as_ref()).expect("view"));
    let blinder = Blinder::new(key);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let sums = Components {
        h: G1Projective::random(&mut rng),
        l: G1Projective::random(&mut rng),
        a: G1Projective::random(&mut rng),
        b_g1: G1Projective::random(&mut rng),
        b_g2: G2Projective::random(&mut rng),
    };
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));

    let mut group = c.benchmark_group("blind");
    group.bench_function("blinder", |b| b.iter(|| blinder.proof(&sums, r, s)));
    group.bench_function("blinding_key", |b| b.iter(|| key.proof(&sums, r, s)));
    // finished on the device: the host computes the input, then adds H's sum to C
    group.bench_function("device_input", |b| b.iter(|| blinder.device_input(&r, &s)));
    let dev = device_reference(&sums, &blinder.device_input(&r, &s));
    group.bench_function("proof_from_device", |b| {
        b.iter(|| Blinder::proof_from_device(&sums.h, &dev))
    });
    group.bench_function("g1_mul", |b| b.iter(|| sums.a * r));
    group.bench_function("g1_two_muls", |b| b.iter(|| sums.a * r + sums.b_g1 * s));
    group.bench_function("g1_mul2", |b| {
        b.iter(|| kernels::backend::blind::mul2(&sums.a, &r, &sums.b_g1, &s))
    });
    group.bench_function("g2_mul", |b| b.iter(|| sums.b_g2 * r));
    group.bench_function("g1_to_affine", |b| b.iter(|| sums.a.to_affine()));
    group.bench_function("g2_to_affine", |b| b.iter(|| sums.b_g2.to_affine()));
    group.bench_function("g1_255_doublings", |b| {
        b.iter(|| {
            let mut p = sums.a;
            for _ in 0..255 {
                p = p.double();
            }
            p
        })
    });
    group.bench_function("g2_255_doublings", |b| {
        b.iter(|| {
            let mut p = sums.b_g2;
            for _ in 0..255 {
                p = p.double();
            }
            p
        })
    });
    group.finish();
}

criterion_group!(benches, blind);
criterion_main!(benches);
