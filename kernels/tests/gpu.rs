//! Our own GPU prover (backend `gpu`) against the CPU backend: the same proof bytes for the same
//! SRS, assignment, `r` and `s`, and the same five unblinded sums, one proof per call and in
//! batches (with and without the copies of the next proof overlapping the current one).
//!
//! Without a GPU the tests that need one print `no GPU: skipping ...` and return (CI has none);
//! `SPLITPROVER_TEST_REQUIRE_GPU=1` turns the skip into a failure on GPU machines. The sizing of
//! the MSM scratch, the final reduction's window weights and the device finishing's arithmetic
//! (run on the host from the same C++ templates) are host code and tested everywhere.
#![cfg(feature = "cuda")]

use blstrs::{G1Projective, G2Projective, Scalar};
use ff::Field;
use group::Group;
use kernels::backend::blind::{device_reference, DeviceBlind};
use kernels::backend::cuda::gpu_count;
use kernels::backend::gpu::{
    device_finish_check, msm_cover, msm_plan, tail_size, window_weight_mismatches, GpuBackend,
    GpuOptions,
};
use kernels::backend::Components;
use kernels::circuits::CircuitSpec;
use kernels::paramgen::limbs;
use kernels::srs::{AlignedBytes, SrsImage, SrsView};
use kernels::synth::{OwnedAssignment, VecSink};
use kernels::{Backend, CpuBackend, ErrorKind, Proof};
use rand::SeedableRng;
use std::sync::Arc;

fn have_gpu(test: &str) -> bool {
    kernels::backend::cuda::gpu_for_test(test)
}

fn image_for(spec: &CircuitSpec, seed: u64) -> AlignedBytes {
    let params =
        kernels::paramgen::generate_parameters_seeded(spec.circuit(None), seed, &|_| {}).unwrap();
    SrsImage::from_parameters(&params, spec.circuit_id()).unwrap()
}

fn synthesize(spec: &CircuitSpec, seed: u64) -> OwnedAssignment {
    spec.synthesize_into(seed, VecSink::new()).unwrap().finish()
}

/// Witness-only synthesis of `spec` for each seed, against its recorded matrices.
fn pack_witnesses(
    spec: &CircuitSpec,
    matrices: &kernels::witness::CircuitMatrices,
    seeds: &[u64],
) -> Vec<kernels::witness::PackedWitness> {
    seeds
        .iter()
        .map(|&seed| {
            kernels::witness::PackedWitness::synthesize(
                spec.circuit(Some(seed)),
                matrices.r1cs(),
                matrices.witness_layout(),
            )
            .unwrap()
        })
        .collect()
}

fn witness_views(
    packed: &[kernels::witness::PackedWitness],
) -> Vec<kernels::WitnessAssignment<'_>> {
    packed
        .iter()
        .map(|p| kernels::WitnessAssignment {
            input: &p.input,
            bit_values: &p.bit_values,
            non_bits: &p.non_bits,
        })
        .collect()
}

/// What the budget tests compare the `gpu` backend with: a circuit's parameters made on the
/// GPU (seed 7) as a shared image, seeds 1, 2 and 3 synthesized, a random `r` and `s` each
/// (from `rng_seed`), and the CPU backend's proofs of them.
struct BudgetCase {
    spec: CircuitSpec,
    image: std::sync::Arc<AlignedBytes>,
    lens: kernels::srs::SrsLengths,
    full: Vec<OwnedAssignment>,
    r: Vec<Scalar>,
    s: Vec<Scalar>,
    want: Vec<Proof>,
}

fn budget_case(text: &str, rng_seed: u64) -> BudgetCase {
    use kernels::paramgen::{generate_parameters_seeded_on, GenDevice};
    let spec: CircuitSpec = text.parse().unwrap();
    let params =
        generate_parameters_seeded_on(spec.circuit(None), 7, GenDevice::Gpu, &|_| {}).unwrap();
    let image = std::sync::Arc::new(SrsImage::from_parameters(&params, spec.circuit_id()).unwrap());
    let lens = SrsView::new((*image).as_ref()).unwrap().lengths();
    let cpu = CpuBackend::new(image.as_ref().as_ref()).unwrap();
    let full: Vec<OwnedAssignment> = [1u64, 2, 3].iter().map(|&s| synthesize(&spec, s)).collect();
    let asgs: Vec<_> = full.iter().map(OwnedAssignment::as_assignment).collect();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(rng_seed);
    let r: Vec<Scalar> = asgs.iter().map(|_| Scalar::random(&mut rng)).collect();
    let s: Vec<Scalar> = asgs.iter().map(|_| Scalar::random(&mut rng)).collect();
    let want = cpu.prove_batch(&asgs, &r, &s).unwrap();
    BudgetCase {
        spec,
        image,
        lens,
        full,
        r,
        s,
        want,
    }
}

/// The `memory_budget` under which a context plans `allocation` bytes: a budget bounds the
/// process's whole device footprint, so what the device uses now (this process's CUDA context)
/// and the runtime's margin come on top ([`kernels::backend::plan::allocation_budget`]).
fn footprint(allocation: u64) -> u64 {
    let info = kernels::backend::cuda::device_info().unwrap();
    allocation + (info.total_bytes - info.free_bytes) + kernels::backend::plan::FOOTPRINT_MARGIN
}

/// The planner's request for this device, one input set, the backend's H MSM choices.
fn one_set_request() -> kernels::backend::plan::PlanRequest {
    use kernels::backend::cuda::{current_device, multiprocessors};
    kernels::backend::plan::PlanRequest {
        sms: multiprocessors(current_device().unwrap()).unwrap(),
        budget: 0,
        overlap: false,
        h_window_bits: 0,
        h_chunks: None,
        matrices: Default::default(),
    }
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
    // Inputs only, bits only (0/1 scalars everywhere), a domain of exactly 2^10 (1,017
    // constraints and 2 inputs), and a SHA-256 chain at 2^15.
    // Each finished on the host and on the device (the default below 2^20 is the host).
    for (spec, device_finish) in ["pubinputs:8", "bits:300", "bits:1000", "sha-chain:1"]
        .into_iter()
        .flat_map(|s| [(s, false), (s, true)])
    {
        let spec: CircuitSpec = spec.parse().unwrap();
        let image = image_for(&spec, 3);
        let cpu = CpuBackend::new(&image).unwrap();
        let options = GpuOptions {
            device_finish: Some(device_finish),
            ..GpuOptions::default()
        };
        let gpu =
            GpuBackend::with_options(&SrsView::new(image.as_ref()).unwrap(), options).unwrap();
        assert_eq!(gpu.residency().device_finish, device_finish);
        let spec_line = format!("{spec} finished on the device: {device_finish}");
        for seed in 1..=3 {
            let owned = synthesize(&spec, seed);
            let asg = owned.as_assignment();
            let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
            let ours = gpu.prove_batch(&[asg], &[r], &[s]).unwrap().remove(0);
            let theirs = cpu.prove_batch(&[asg], &[r], &[s]).unwrap().remove(0);
            assert_eq!(bytes(&ours), bytes(&theirs), "{spec_line} seed {seed}");
            let inputs = spec.public_inputs(seed).unwrap();
            assert!(
                gpu.verify(&ours, &inputs).unwrap(),
                "{spec_line} seed {seed}"
            );
            let (sums, phases) = gpu.prove_components(&asg).unwrap();
            assert_eq!(
                sums,
                cpu.components(&asg).unwrap(),
                "{spec_line} seed {seed}"
            );
            assert!(phases.compute > 0.0, "{phases:?}");
            assert!(phases.span >= phases.compute, "{phases:?}");
        }
        // r = s = 0 isolates the sums: A = alpha + a, C = h + l.
        let owned = synthesize(&spec, 9);
        let asg = owned.as_assignment();
        let z = [Scalar::ZERO];
        let ours = gpu.prove_batch(&[asg], &z, &z).unwrap().remove(0);
        let theirs = cpu.prove_batch(&[asg], &z, &z).unwrap().remove(0);
        assert_eq!(bytes(&ours), bytes(&theirs), "{spec_line} with r = s = 0");
    }
}

/// `sum_y w[y] 2^(y wbits)` plus the last element (the ones), by scalar multiplications.
fn weighted<G: Group<Scalar = Scalar> + std::iter::Sum>(w: &[G], wbits: u32) -> G {
    let two = Scalar::from(2u64);
    let (ones, windows) = w.split_last().unwrap();
    windows
        .iter()
        .enumerate()
        .map(|(y, p)| *p * two.pow_vartime([y as u64 * u64::from(wbits)]))
        .sum::<G>()
        + ones
}

/// The device's finishing (`sp_side`), run on the host from the same C++ templates, against
/// its contract in blstrs' arithmetic (`device_reference`): window sums combined with their
/// weights `2^(y wbits)` and the ones added, the blinding points added, `x = l + s a + r b1`,
/// affine with the identity as blst encodes it. Windows of several sizes and counts (none:
/// the ones alone), identity windows and sums, zero and edge scalars. Needs no GPU.
#[test]
fn device_finishing_arithmetic_meets_its_contract() {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(17);
    let cases: [([u32; 4], [u32; 4]); 5] = [
        ([20, 22, 26, 20], [13, 12, 10, 13]),
        ([0, 1, 2, 0], [16, 16, 16, 16]),
        ([19, 19, 19, 19], [14, 14, 14, 14]),
        ([15, 17, 15, 15], [17, 15, 17, 17]),
        ([3, 0, 3, 2], [10, 18, 10, 10]),
    ];
    for (case, (nwins, wbits)) in cases.into_iter().enumerate() {
        let mut g1: Vec<G1Projective> = Vec::new();
        for (j, n) in nwins[..3].iter().enumerate() {
            for y in 0..=*n {
                // identity windows in some places, as sparse tails give
                let p = if (case + j + y as usize) % 7 == 3 {
                    G1Projective::identity()
                } else {
                    G1Projective::random(&mut rng)
                };
                g1.push(p);
            }
        }
        let g2: Vec<G2Projective> = (0..=nwins[3])
            .map(|y| {
                if (case + y as usize) % 5 == 1 {
                    G2Projective::identity()
                } else {
                    G2Projective::random(&mut rng)
                }
            })
            .collect();
        let (l_end, a_end) = (
            nwins[0] as usize + 1,
            nwins[0] as usize + nwins[1] as usize + 2,
        );
        let c = Components {
            h: G1Projective::identity(),
            l: weighted(&g1[..l_end], wbits[0]),
            a: weighted(&g1[l_end..a_end], wbits[1]),
            b_g1: weighted(&g1[a_end..], wbits[2]),
            b_g2: weighted(&g2, wbits[3]),
        };
        let inputs = [
            DeviceBlind::default(),
            DeviceBlind {
                r: limbs(&Scalar::random(&mut rng)),
                s: limbs(&-Scalar::ONE),
                pa: G1Projective::random(&mut rng),
                pb1: G1Projective::random(&mut rng),
                pb2: G2Projective::random(&mut rng),
            },
            DeviceBlind {
                r: limbs(&Scalar::ONE),
                s: limbs(&Scalar::random(&mut rng)),
                // A's sum cancelled: a = identity, so s a is the identity too
                pa: -c.a,
                pb1: G1Projective::random(&mut rng),
                pb2: -c.b_g2,
            },
        ];
        for (k, input) in inputs.iter().enumerate() {
            let got = device_finish_check(&g1, &g2, nwins, wbits, input).unwrap();
            assert_eq!(got, device_reference(&c, input), "case {case}, input {k}");
        }
    }
    // runs of the wrong length are refused, not read past
    assert!(
        device_finish_check(&[], &[], [1, 1, 1, 1], [10; 4], &DeviceBlind::default()).is_none()
    );
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
    // one bad circuit fails its whole batch, before anything runs
    let two = [Scalar::ONE, Scalar::ONE];
    let err = gpu
        .prove_batch(&[good.as_assignment(), wrong.as_assignment()], &two, &two)
        .unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ErrorKind::ShapeMismatch { .. } | ErrorKind::InvalidDensity { .. }
        ),
        "{err}"
    );
    let proof = gpu
        .prove_batch(&[good.as_assignment()], &one, &one)
        .unwrap()
        .remove(0);
    assert!(gpu.verify(&proof, &spec.public_inputs(1).unwrap()).unwrap());
}

#[test]
fn gpu_batches_equal_cpu_proofs_with_and_without_overlap() {
    if !have_gpu("gpu_batches_equal_cpu_proofs_with_and_without_overlap") {
        return;
    }
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(11);
    for spec in ["bits:300", "sha-chain:1"] {
        let spec: CircuitSpec = spec.parse().unwrap();
        let image = image_for(&spec, 4);
        let cpu = CpuBackend::new(&image).unwrap();
        let owned: Vec<OwnedAssignment> = (1..=5).map(|seed| synthesize(&spec, seed)).collect();
        let asgs: Vec<_> = owned.iter().map(|o| o.as_assignment()).collect();
        let r: Vec<Scalar> = (0..5).map(|_| Scalar::random(&mut rng)).collect();
        let s: Vec<Scalar> = (0..5).map(|_| Scalar::random(&mut rng)).collect();
        let want: Vec<Vec<u8>> = asgs
            .iter()
            .zip(r.iter().zip(&s))
            .map(|(a, (r, s))| bytes(&cpu.prove_batch(&[*a], &[*r], &[*s]).unwrap()[0]))
            .collect();
        let sums: Vec<_> = asgs.iter().map(|a| cpu.components(a).unwrap()).collect();
        // (two input sets, finished on the device, L/A/B MSMs beside the NTTs)
        for (overlap, device_finish, beside) in [
            (true, false, false),
            (false, false, false),
            (true, true, false),
            (false, true, false),
            (true, true, true),
            (false, false, true),
        ] {
            let options = GpuOptions {
                overlap,
                device_finish: Some(device_finish),
                msms_beside_ntts: Some(beside),
                ..GpuOptions::default()
            };
            let gpu =
                GpuBackend::with_options(&SrsView::new(image.as_ref()).unwrap(), options).unwrap();
            let sets = gpu.residency().input_sets;
            assert_eq!(sets, if overlap { 2 } else { 1 }, "{spec}");
            // the whole batch, then its odd-sized and single tails
            for range in [0..5, 1..4, 4..5] {
                let got = gpu
                    .prove_batch(&asgs[range.clone()], &r[range.clone()], &s[range.clone()])
                    .unwrap();
                for (i, p) in range.clone().zip(&got) {
                    assert_eq!(
                        bytes(p),
                        want[i],
                        "{spec} overlap {overlap} device finish {device_finish} beside \
                         {beside} proof {i}"
                    );
                }
                let (got, times) = gpu.prove_components_batch(&asgs[range.clone()]).unwrap();
                assert_eq!(times.input_sets, sets);
                assert!(times.gpu_ms > 0.0, "{times:?}");
                for (i, (c, phases)) in range.clone().zip(&got) {
                    assert_eq!(
                        *c, sums[i],
                        "{spec} overlap {overlap} device finish {device_finish} beside \
                         {beside} sums {i}"
                    );
                    assert!(phases.compute > 0.0, "{phases:?}");
                }
            }
            let inputs = spec.public_inputs(3).unwrap();
            let p = gpu.prove_batch(&asgs[2..3], &r[2..3], &s[2..3]).unwrap();
            assert!(gpu.verify(&p[0], &inputs).unwrap());
        }
    }
}

#[test]
fn every_h_window_size_and_chunking_gives_the_same_proof() {
    if !have_gpu("every_h_window_size_and_chunking_gives_the_same_proof") {
        return;
    }
    let spec: CircuitSpec = "sha-chain:1".parse().unwrap();
    let image = image_for(&spec, 6);
    let cpu = CpuBackend::new(&image).unwrap();
    let owned = synthesize(&spec, 2);
    let asg = owned.as_assignment();
    let (r, s) = ([Scalar::from(5u64)], [Scalar::from(7u64)]);
    let want = bytes(&cpu.prove_batch(&[asg], &r, &s).unwrap()[0]);
    for (w, chunks) in [
        (10, None),
        (11, None),
        (13, None),
        (15, None),
        (18, None),
        (10, Some(1)),
        (10, Some(3)),
        (12, Some(7)),
    ] {
        let options = GpuOptions {
            h_window_bits: Some(w),
            h_chunks: chunks,
            ..GpuOptions::default()
        };
        let gpu =
            GpuBackend::with_options(&SrsView::new(image.as_ref()).unwrap(), options).unwrap();
        assert_eq!(gpu.residency().h_window_bits, w);
        if let Some(c) = chunks {
            assert_eq!(gpu.residency().h_chunks, c);
        }
        let got = gpu.prove_batch(&[asg], &r, &s).unwrap();
        assert_eq!(bytes(&got[0]), want, "H window {w} bits, chunks {chunks:?}");
    }
    let view = SrsView::new(image.as_ref()).unwrap();
    let bad = GpuOptions {
        h_window_bits: Some(9),
        ..GpuOptions::default()
    };
    assert!(matches!(
        GpuBackend::with_options(&view, bad).unwrap_err().kind(),
        ErrorKind::ShapeMismatch { .. }
    ));
}

/// The device's final reduction against sppark's host-side reduction of the same device buckets
/// (with several chunks, tails and plain MSMs), and both against the CPU backend's sums.
#[test]
fn device_final_sums_equal_spparks_host_reduction() {
    if !have_gpu("device_final_sums_equal_spparks_host_reduction") {
        return;
    }
    for (spec, chunks) in [
        ("bits:300", None),
        ("sha-chain:1", None),
        ("sha-chain:1", Some(3)),
    ] {
        let spec: CircuitSpec = spec.parse().unwrap();
        let image = image_for(&spec, 8);
        let cpu = CpuBackend::new(&image).unwrap();
        let options = GpuOptions {
            h_chunks: chunks,
            ..GpuOptions::default()
        };
        let gpu =
            GpuBackend::with_options(&SrsView::new(image.as_ref()).unwrap(), options).unwrap();
        let owned: Vec<OwnedAssignment> = (1..=3).map(|seed| synthesize(&spec, seed)).collect();
        let asgs: Vec<_> = owned.iter().map(|o| o.as_assignment()).collect();
        for (i, (device, host)) in gpu
            .prove_components_checked(&asgs)
            .unwrap()
            .iter()
            .enumerate()
        {
            let want = cpu.components(&asgs[i]).unwrap();
            assert_eq!(
                host, &want,
                "{spec} {chunks:?} {i}: sppark's host reduction"
            );
            assert_eq!(device, host, "{spec} {chunks:?} {i}: device final sums");
        }
    }
}

/// sppark's own choices for a few shapes (its `msm_t` constructor and `invoke`).
#[test]
fn msm_plans_are_spparks() {
    let p = msm_plan((1 << 20) - 1, 0);
    assert_eq!(
        (p.wbits, p.nwins, p.batch, p.stride),
        (12, 22, 4, 1 << 18),
        "{p:?}"
    );
    let p = msm_plan(52_000, 0);
    assert_eq!((p.wbits, p.nwins, p.batch), (10, 26, 1), "{p:?}");
    let p = msm_plan(100, 0);
    assert_eq!(
        (p.wbits, p.nwins, p.batch, p.stride),
        (10, 26, 1, 128),
        "{p:?}"
    );
    let p = msm_plan(1 << 27, 0);
    assert_eq!((p.wbits, p.nwins), (18, 15), "{p:?}");
    assert_eq!(p.batch * p.stride, 1 << 27, "{p:?}");
    let p = msm_plan((1 << 20) - 1, 14);
    assert_eq!((p.wbits, p.nwins, p.batch), (14, 19, 1), "{p:?}");
    assert_eq!(p.digits, 19 * (1 << 20), "{p:?}");
}

/// The scratch sized for a query of n points covers its plain MSM and every tail MSM (m <= n).
#[test]
fn msm_scratch_covers_every_smaller_msm() {
    let check = |c: &kernels::backend::gpu::MsmPlan, m: usize| {
        let p = msm_plan(m, 0);
        assert!(
            c.buckets >= p.buckets && c.digits >= p.digits && c.temps >= p.temps,
            "n {} m {m}: cover {c:?} plan {p:?}",
            c.n
        );
    };
    for n in [1, 31, 193, 1000, 40_000, 131_071] {
        let c = msm_cover(n);
        for m in 1..=n {
            check(&c, m);
        }
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    for n in [(1 << 20) - 1, 5_000_000, (1 << 23) + 17, (1 << 27) + 12_345] {
        let c = msm_cover(n);
        let check = |m: usize| check(&c, m);
        check(n);
        for k in 1..usize::BITS - n.leading_zeros() {
            let t = 1usize << k;
            for base in [t, t * 2 / 3] {
                for d in 0..64 {
                    for m in [base.saturating_sub(d), base + d] {
                        if (1..=n).contains(&m) {
                            check(m);
                        }
                    }
                }
            }
        }
        for _ in 0..20_000 {
            check(rand::Rng::gen_range(&mut rng, 1..=n));
        }
    }
}

/// A tail MSM runs over its count padded by less than a sixteenth, never past the half of its
/// query that the tail buffers hold, and the counts of one power of two share at most seventeen
/// sizes (2^k + j 2^k / 16 for j = 0..=16: so few back-half shapes per query and octave).
#[test]
fn tail_sizes_pad_little_and_stay_in_the_tail_buffers() {
    assert_eq!(tail_size(0, 100), 0);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
    let mut bigs: Vec<usize> = (1..5000).collect();
    bigs.extend((0..20_000).map(|_| rand::Rng::gen_range(&mut rng, 1..1usize << 27)));
    for k in 4..27 {
        bigs.extend([(1usize << k) - 1, 1 << k, (1 << k) + 1]);
    }
    for big in bigs {
        for cap in [big, big + 1, big + big / 32, 2 * big] {
            let t = tail_size(big, cap);
            assert!(t >= big && t <= cap, "big {big} cap {cap}: {t}");
            assert!(
                t - big <= big / 16,
                "big {big} cap {cap}: {t} pads too much"
            );
        }
    }
    for k in [4u32, 10, 20, 23] {
        let lo = 1usize << k;
        let mut sizes: Vec<usize> = (lo..2 * lo)
            .step_by((lo / 4096).max(1))
            .map(|b| tail_size(b, usize::MAX))
            .collect();
        sizes.dedup();
        assert!(sizes.len() <= 17, "2^{k}: {} sizes", sizes.len());
    }
}

/// The device's final reduction weighs each of integrate's segment sums on its own; over
/// integers it must give what sppark's sequential host loop gives, for every window size.
#[test]
fn final_reduction_weights_match_spparks_window_integration() {
    for seed in [1, 2, 0x5eed] {
        assert_eq!(window_weight_mismatches(seed), 0, "seed {seed}");
    }
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

/// `params generate --device gpu` for a Filecoin kind (issue 42): the 2 KiB PoRep's `.params`,
/// `.vk` and `.meta`, generated on the GPU and on the CPU from the same seed into two parameter
/// caches, are the same bytes under the same official names.
#[cfg(feature = "filecoin")]
#[test]
fn the_gpu_generator_writes_the_cpu_generators_filecoin_files() {
    if !have_gpu("the_gpu_generator_writes_the_cpu_generators_filecoin_files") {
        return;
    }
    use kernels::filecoin::{generate_parameters, ProofKind};
    use kernels::paramgen::GenDevice;
    let kind: ProofKind = "porep:StackedDrg2KiBV1_1".parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut written = Vec::new();
    for device in [GenDevice::Gpu, GenDevice::Cpu] {
        let cache = dir.path().join(format!("{device:?}"));
        let t = std::time::Instant::now();
        let (files, _) = generate_parameters(kind, &cache, 23, device, &|_| {}).unwrap();
        println!("{kind} on {device:?}: {:.1} s", t.elapsed().as_secs_f64());
        written.push(files);
    }
    let (gpu, cpu) = (&written[0], &written[1]);
    for (g, c) in [
        (&gpu.params, &cpu.params),
        (&gpu.vk, &cpu.vk),
        (&gpu.meta, &cpu.meta),
    ] {
        assert_eq!(g.file_name(), c.file_name());
        let (g_bytes, c_bytes) = (std::fs::read(g).unwrap(), std::fs::read(c).unwrap());
        assert!(!g_bytes.is_empty(), "{}", g.display());
        assert!(
            g_bytes == c_bytes,
            "{} differs between GPU and CPU",
            g.display()
        );
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

/// Witness-only proofs (issue 31): the packed witness unpacked and multiplied by the resident
/// matrices on the device prove to the CPU backend's bytes for the full assignment, alone and in
/// a batch, finished on the host and on the device; a batch's next witness overlaps the current
/// proof. Another circuit's matrices are refused by the context.
#[test]
fn witness_only_proofs_equal_full_proofs_bit_for_bit() {
    use kernels::witness::{CircuitMatrices, PackedWitness};
    use kernels::WitnessAssignment;
    if !have_gpu("witness_only_proofs_equal_full_proofs_bit_for_bit") {
        return;
    }
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(31);
    for (text, device_finish) in ["pubinputs:4", "bits:700", "sha-chain:1", "porep-like:16384"]
        .into_iter()
        .flat_map(|s| [(s, false), (s, true)])
    {
        let spec: CircuitSpec = text.parse().unwrap();
        let image = image_for(&spec, 3);
        let cpu = CpuBackend::new(&image).unwrap();
        let options = GpuOptions {
            device_finish: Some(device_finish),
            ..GpuOptions::default()
        };
        let gpu =
            GpuBackend::with_options(&SrsView::new(image.as_ref()).unwrap(), options).unwrap();
        let matrices = Arc::new(CircuitMatrices::new(
            kernels::circuits::AnyCircuit::from(spec).compile().unwrap(),
        ));
        let seeds = [1u64, 2, 3];
        let packed = pack_witnesses(&spec, &matrices, &seeds);
        let witnesses = witness_views(&packed);
        let full: Vec<OwnedAssignment> = seeds.iter().map(|&s| synthesize(&spec, s)).collect();
        let r: Vec<Scalar> = seeds.iter().map(|_| Scalar::random(&mut rng)).collect();
        let s: Vec<Scalar> = seeds.iter().map(|_| Scalar::random(&mut rng)).collect();
        let asgs: Vec<_> = full.iter().map(OwnedAssignment::as_assignment).collect();
        let want = cpu.prove_batch(&asgs, &r, &s).unwrap();
        let case = format!("{text} finished on the device: {device_finish}");
        // One at a time, then the three in one batch.
        for i in 0..seeds.len() {
            let got = gpu
                .prove_witness_batch(&witnesses[i..=i], &matrices, &r[i..=i], &s[i..=i])
                .expect("the gpu backend proves witnesses")
                .unwrap();
            assert_eq!(bytes(&got[0]), bytes(&want[i]), "{case}, seed {}", seeds[i]);
        }
        let got = gpu
            .prove_witness_batch(&witnesses, &matrices, &r, &s)
            .unwrap()
            .unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(bytes(g), bytes(w), "{case}, batch member {i}");
        }
        // Full and witness-only proofs share the context.
        let again = gpu.prove_batch(&asgs[..1], &r[..1], &s[..1]).unwrap();
        assert_eq!(
            bytes(&again[0]),
            bytes(&want[0]),
            "{case}: a full proof after"
        );
        // what the plan reserves for them is what the upload took
        assert_eq!(
            gpu.matrices_bytes(),
            kernels::backend::gpu::matrices_device_bytes(matrices.r1cs()).device(false),
            "{text}"
        );
    }
    // A context serves one circuit's matrices.
    let spec: CircuitSpec = "bits:700".parse().unwrap();
    let other: CircuitSpec = "bits:701".parse().unwrap();
    let image = image_for(&spec, 3);
    let gpu = GpuBackend::new(&SrsView::new(image.as_ref()).unwrap()).unwrap();
    let m = Arc::new(CircuitMatrices::new(
        kernels::circuits::AnyCircuit::from(spec).compile().unwrap(),
    ));
    let o = Arc::new(CircuitMatrices::new(
        kernels::circuits::AnyCircuit::from(other)
            .compile()
            .unwrap(),
    ));
    let p = PackedWitness::synthesize(spec.circuit(Some(1)), m.r1cs(), m.witness_layout()).unwrap();
    let w = WitnessAssignment {
        input: &p.input,
        bit_values: &p.bit_values,
        non_bits: &p.non_bits,
    };
    let one = [Scalar::ONE];
    gpu.prove_witness_batch(&[w], &m, &one, &one)
        .unwrap()
        .unwrap();
    let e = gpu
        .prove_witness_batch(&[w], &o, &one, &one)
        .unwrap()
        .unwrap_err();
    assert!(
        e.to_string().contains("holds the matrices of circuit"),
        "{e}"
    );
}

/// A device memory budget (issue 32) is planned within: below the default plan the context
/// takes one input set, then the H MSM in more chunks or the compact layout (the 0/1 split's
/// tails in pieces), whichever the planner finds cheaper; the device's free memory drops by about
/// what the plan says; the proofs stay the CPU backend's bytes; a budget that cannot hold the
/// SRS is refused by a backend that does not keep the image (`with_options`), and names the
/// constructor that streams.
#[test]
fn a_memory_budget_is_planned_within_and_what_cannot_fit_is_refused() {
    use kernels::backend::cuda::device_info;
    if !have_gpu("a_memory_budget_is_planned_within_and_what_cannot_fit_is_refused") {
        return;
    }
    let spec: CircuitSpec = "porep-like:16384".parse().unwrap();
    let image = image_for(&spec, 5);
    let view = SrsView::new(image.as_ref()).unwrap();
    let cpu = CpuBackend::new(&image).unwrap();
    let default = GpuBackend::new(&view).unwrap().residency();
    let full: Vec<OwnedAssignment> = [1u64, 2].iter().map(|&s| synthesize(&spec, s)).collect();
    let asgs: Vec<_> = full.iter().map(OwnedAssignment::as_assignment).collect();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(32);
    let r: Vec<Scalar> = asgs.iter().map(|_| Scalar::random(&mut rng)).collect();
    let s: Vec<Scalar> = asgs.iter().map(|_| Scalar::random(&mut rng)).collect();
    let want = cpu.prove_batch(&asgs, &r, &s).unwrap();
    let mut budget = default.planned_bytes - 1;
    let mut last = default;
    for step in 0..3 {
        let options = GpuOptions {
            memory_budget: Some(footprint(budget)),
            ..GpuOptions::default()
        };
        let before = device_info().unwrap().free_bytes;
        let gpu = match GpuBackend::with_options(&view, options) {
            Ok(gpu) => gpu,
            Err(e) => {
                // Past the smallest resident layout: refused, naming the streaming constructor
                // (or, for an SRS smaller than the staging buffers, the planner's numbers).
                let text = e.to_string();
                assert!(
                    step > 0,
                    "the first step below the default must fit: {text}"
                );
                assert!(
                    text.contains("GpuBackend::with_image") || text.contains("memory_budget"),
                    "{text}"
                );
                break;
            }
        };
        let used = before.saturating_sub(device_info().unwrap().free_bytes);
        let res = gpu.residency();
        eprintln!(
            "budget {budget} B: planned {} B, device free memory dropped {used} B, {} input \
             set(s), H MSM in {} chunk(s)",
            res.planned_bytes, res.input_sets, res.h_chunks
        );
        assert!(res.planned_bytes <= budget, "{res:?}");
        let compacter = res.piece != 0 && (last.piece == 0 || res.piece < last.piece);
        assert!(
            res.input_sets < last.input_sets || res.h_chunks > last.h_chunks || compacter,
            "a smaller budget, a smaller layout (one input set, more H chunks or smaller \
             pieces): {res:?} after {last:?}"
        );
        // What the device gave is the plan, give or take the allocator's rounding.
        assert!(
            used <= res.planned_bytes + (res.planned_bytes >> 4) + (64 << 20),
            "planned {} B, took {used} B",
            res.planned_bytes
        );
        let got = gpu.prove_batch(&asgs, &r, &s).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(bytes(g), bytes(w), "budget {budget}: proof {i}");
        }
        last = res;
        budget = res.planned_bytes - 1;
    }
    let Err(e) = GpuBackend::with_options(
        &view,
        GpuOptions {
            memory_budget: Some(footprint(default.srs_bytes / 2)),
            ..GpuOptions::default()
        },
    ) else {
        panic!("half the SRS cannot fit");
    };
    let text = e.to_string();
    assert!(
        text.contains("streams part of the SRS") || text.contains("memory_budget"),
        "{text}"
    );
}

/// Under a budget smaller than the SRS (issue 32) the `gpu` backend keeps what fits resident and
/// streams the rest from the page-locked image for every proof, chunk by chunk: the proofs are
/// the CPU backend's bytes with part of the SRS streamed, with every query streamed through the
/// smallest staging buffers (several chunks per query: the split batch additions accumulate,
/// the tails gather chunk by chunk, H's Pippenger takes a chunk per staging buffer), and in a
/// batch of three (the copies overlapping the previous proof). Two circuits: one of mostly bits
/// (the 0/1 split and its tails), one with most scalars big (plain Pippengers over the queries).
#[test]
fn under_a_budget_below_the_srs_the_rest_streams_and_the_proofs_stay_the_same() {
    use kernels::backend::plan::smallest;
    if !have_gpu("under_a_budget_below_the_srs_the_rest_streams_and_the_proofs_stay_the_same") {
        return;
    }
    for text in ["sha-chain:16", "porep-like:256"] {
        let BudgetCase {
            image,
            lens,
            full,
            r,
            s,
            want,
            ..
        } = budget_case(text, 33);
        let asgs: Vec<_> = full.iter().map(OwnedAssignment::as_assignment).collect();
        let view = SrsView::new((*image).as_ref()).unwrap();
        let resident = GpuBackend::new(&view).unwrap().residency();
        // Every query streamed through the smallest staging buffers: the least a proof takes.
        let least = smallest(&lens, &one_set_request()).total(1);
        // Above it by three quarters of the SRS: below every all-resident layout (the smallest
        // of which needs the whole SRS beside about what `least` holds, less its staging), so
        // the planner keeps part of the SRS and streams the rest. (A budget taken from an
        // all-resident layout less part of H fits by smaller H windows and more chunks instead.)
        let part = least + resident.srs_bytes / 4 * 3;
        for (what, budget, beside) in [
            ("part of the SRS", part, false),
            ("everything", least, false),
            ("part of the SRS", part, true),
            ("everything", least, true),
        ] {
            let what = if beside {
                format!("{what} (MSMs beside the NTTs)")
            } else {
                what.to_string()
            };
            let options = GpuOptions {
                memory_budget: Some(footprint(budget)),
                overlap: false,
                msms_beside_ntts: Some(beside),
                ..GpuOptions::default()
            };
            let gpu = GpuBackend::with_image(image.clone(), options).unwrap();
            let res = gpu.residency();
            let memory = gpu.device_memory();
            eprintln!(
                "{text}, {what} streamed: {} B resident, {} B streamed per proof through {} B of \
                 staging at {:.1} GB/s, planned {} B of a {budget} B budget",
                res.srs_bytes,
                res.streamed_bytes,
                res.stage_bytes,
                res.stream_gbps,
                res.planned_bytes
            );
            assert!(res.planned_bytes <= budget, "{res:?}");
            assert!(res.streamed_bytes > 0 && res.stage_bytes > 0, "{res:?}");
            assert_eq!(memory.streamed_bytes, res.streamed_bytes);
            assert_eq!(memory.streamed_total_bytes, 0);
            if what.starts_with("everything") {
                assert_eq!(res.srs_bytes, 0, "{res:?}");
                assert_eq!(res.streamed_bytes, resident.srs_bytes);
            } else {
                assert!(
                    res.srs_bytes > 0 && res.srs_bytes < resident.srs_bytes,
                    "{res:?}"
                );
            }
            let got = gpu.prove_batch(&asgs, &r, &s).unwrap();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(bytes(g), bytes(w), "{text}, {what} streamed: proof {i}");
            }
            // one proof alone, too (no overlap with a neighbour)
            let one = gpu.prove_batch(&asgs[..1], &r[..1], &s[..1]).unwrap();
            assert_eq!(
                bytes(&one[0]),
                bytes(&want[0]),
                "{text}, {what} streamed: alone"
            );
            // every proof copied its streamed bytes, no more (the prefixes are whole chunks)
            let total = gpu.device_memory().streamed_total_bytes;
            assert_eq!(total, 4 * res.streamed_bytes, "after 4 proofs of {res:?}");
        }
    }
}

/// Under a budget below the full layout's least (issue 32: a 2^27 partition on a 24 or 16 GB
/// card), the compact layout: two domain vectors (c made after a * b in b's place, A's and B's
/// scalars gathered there once the quotient is made), the 0/1 split's tails in pieces. The
/// proofs are the CPU backend's bytes, from full slots (c copied from the slot after a * b) and
/// from witness-only ones (c the matrices' product), alone and in a batch of three: at the
/// least a proof takes (the smallest pieces, every query streamed) and just under the full
/// layout's least. At the least, L's and A's tails exceed half a piece, so they go in pieces:
/// bits:2500000 has its big scalars spread (1.5 % of every piece: each piece gathers a tail of
/// its own), porep-bits:256 has them at the end (its last piece, 94 % big, takes a plain
/// Pippenger, the others only their ones); porep-like:256's queries are mostly big (plain
/// Pippengers over scalars in the input set); sha-chain:16's, bits. Third, the least with the
/// witness matrices planned in the budget: only their fixed part fits beside the compact
/// layout, so their rows stream through the staging buffers for every witness-only proof (the
/// plan's lever 5), which copies them as the counter shows; a byte less is refused.
#[test]
fn under_the_full_layouts_least_the_compact_layout_proves_the_same_bytes() {
    use kernels::backend::plan::{smallest, smallest_compact};
    use kernels::witness::CircuitMatrices;
    if !have_gpu("under_the_full_layouts_least_the_compact_layout_proves_the_same_bytes") {
        return;
    }
    let request = one_set_request();
    for text in [
        "bits:2500000",
        "porep-bits:256",
        "porep-like:256",
        "sha-chain:16",
    ] {
        let BudgetCase {
            spec,
            image,
            lens,
            full,
            r,
            s,
            want,
        } = budget_case(text, 35);
        let asgs: Vec<_> = full.iter().map(OwnedAssignment::as_assignment).collect();
        let seeds = [1u64, 2, 3];
        let matrices = Arc::new(CircuitMatrices::new(
            kernels::circuits::AnyCircuit::from(spec).compile().unwrap(),
        ));
        let packed = pack_witnesses(&spec, &matrices, &seeds);
        let witnesses = witness_views(&packed);
        let m = kernels::backend::gpu::matrices_device_bytes(matrices.r1cs());
        let least = smallest_compact(&lens, &request);
        let full_least = smallest(&lens, &request).total(1);
        assert!(least.total(1) < full_least, "{text}");
        let rows_streamed = least.total(1) + m.fixed;
        let refused = GpuOptions {
            memory_budget: Some(footprint(rows_streamed - 1)),
            matrices: m,
            overlap: false,
            ..GpuOptions::default()
        };
        let e = GpuBackend::with_image(image.clone(), refused).unwrap_err();
        assert!(e.to_string().contains("witness matrices"), "{text}: {e}");
        for (what, budget) in [
            ("least", least.total(1) + m.device(false)),
            ("under the full", full_least - 1 + m.device(false)),
            ("least, matrix rows streamed", rows_streamed),
        ] {
            let options = GpuOptions {
                memory_budget: Some(footprint(budget)),
                matrices: m,
                overlap: false,
                ..GpuOptions::default()
            };
            let gpu = GpuBackend::with_image(image.clone(), options).unwrap();
            let res = gpu.residency();
            eprintln!(
                "{text}, {what}: compact, tails in pieces of {} points, {} B resident, {} B \
                 streamed per proof, matrix rows streamed: {}, planned {} B of a {budget} B \
                 budget",
                res.piece,
                res.srs_bytes,
                res.streamed_bytes,
                res.matrices_streamed,
                res.planned_bytes
            );
            assert!(res.piece > 0 && res.input_sets == 1, "{res:?}");
            assert!(res.planned_bytes <= budget, "{res:?}");
            assert_eq!(res.matrices_streamed, what.contains("rows"), "{res:?}");
            if what.starts_with("least") {
                assert_eq!((res.srs_bytes, res.piece), (0, least.piece), "{res:?}");
            }
            let case = format!("{text}, {what}");
            let got = gpu.prove_batch(&asgs, &r, &s).unwrap();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(bytes(g), bytes(w), "{case}: proof {i}");
            }
            let one = gpu.prove_batch(&asgs[1..2], &r[1..2], &s[1..2]).unwrap();
            assert_eq!(bytes(&one[0]), bytes(&want[1]), "{case}: alone");
            let after_full = gpu.device_memory().streamed_total_bytes;
            let got = gpu
                .prove_witness_batch(&witnesses, &matrices, &r, &s)
                .expect("the gpu backend proves witnesses")
                .unwrap();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(bytes(g), bytes(w), "{case}: witness-only proof {i}");
            }
            let one = gpu
                .prove_witness_batch(&witnesses[2..], &matrices, &r[2..], &s[2..])
                .unwrap()
                .unwrap();
            assert_eq!(
                bytes(&one[0]),
                bytes(&want[2]),
                "{case}: witness-only, alone"
            );
            // the 4 witness-only proofs copied what the 4 full ones did and the rows too (each
            // chunk's offsets repeat its last row's end: a few bytes more)
            let copied = gpu.device_memory().streamed_total_bytes - after_full;
            let rows = if res.matrices_streamed { m.rows } else { 0 };
            assert!(
                copied >= after_full + 4 * rows && copied <= after_full + 4 * rows + rows / 16,
                "{case}: {copied} B copied by the witness-only proofs, {after_full} B by the \
                 full ones, rows {rows} B"
            );
            assert_eq!(
                gpu.device_memory().streamed_bytes,
                res.streamed_bytes + rows,
                "{case}"
            );
        }
    }
}
