//! Issue 31: a partition synthesized into a witness slot (inputs and packed aux values only) and
//! proved through gpu-proc's host path (expanded from the circuit's matrices, then the CPU
//! backend) gives the proof bytes of the same partition synthesized into a full slot, and
//! bellperson's, for the same SRS, `r` and `s`. A witness slot that lies about its sizes, or whose
//! circuit's matrices this gpu-proc lacks, fails alone with a message, never a panic.

use std::collections::HashMap;

use blstrs::{Bls12, Scalar};
use gpu_proc::Prover;
use kernels::circuits::CircuitSpec;
use kernels::job::BuiltinRequest;
use kernels::witness::WitnessLayout;
use kernels::{Backend, CpuBackend, Proof};
use shm_protocol::control::{JobRequest, SynthRequest};
use shm_protocol::{
    current_owner, HugePagePolicy, Region, Ring, RingConfig, SlotKind, SlotMeta, SlotResult,
    WitnessLengths,
};

fn proof_bytes(p: &Proof) -> Vec<u8> {
    let mut v = Vec::new();
    p.write(&mut v).unwrap();
    v
}

fn request(spec: &CircuitSpec, seed: u64, witness: bool) -> SynthRequest {
    SynthRequest {
        job_id: seed,
        partition: 0,
        circuit: spec.to_string(),
        circuit_id: spec.circuit_id(),
        request: JobRequest::Inline(
            BuiltinRequest {
                seed,
                partitions: 1,
            }
            .to_bytes(),
        ),
        priority: 2,
        express: false,
        witness,
    }
}

/// A private ring of `slots` slots, each large enough for a full slot of `spec`.
fn ring_for(spec: &CircuitSpec, slots: u32) -> Ring {
    let caps = synth_proc::capacity_for(&spec.shape().unwrap());
    let config = RingConfig::uniform(slots, caps.slot_bytes().unwrap());
    let region = Region::create(
        "witness-slots",
        config.region_bytes().unwrap(),
        HugePagePolicy::Plain,
    )
    .unwrap();
    Ring::create(region, config).unwrap()
}

/// A CPU prover of `spec` over `params`, with the circuit's matrices when `matrices`.
fn prover(
    spec: &CircuitSpec,
    params: &bellperson::groth16::Parameters<Bls12>,
    matrices: bool,
) -> Prover {
    let image = kernels::srs::SrsImage::from_parameters(params, spec.circuit_id()).unwrap();
    let mut backends: HashMap<u64, (String, Box<dyn Backend>)> = HashMap::new();
    backends.insert(
        spec.circuit_id(),
        (spec.to_string(), Box::new(CpuBackend::new(image).unwrap())),
    );
    let prover = Prover::from_backends(backends);
    if matrices {
        prover.add_matrices(
            kernels::circuits::AnyCircuit::from(*spec)
                .compile()
                .unwrap(),
        );
        assert_eq!(prover.matrix_ids(), vec![spec.circuit_id()]);
    }
    prover
}

/// Claims every READY slot, proves them in one batch with fixed `(r, s)` per slot (in claim
/// order) and returns each slot's result by job id.
fn prove_all(
    ring: &Ring,
    prover: &Prover,
    rs: &[(Scalar, Scalar)],
) -> Vec<(u64, Result<Vec<u8>, String>)> {
    let me = current_owner();
    let mut claims = Vec::new();
    while let Some(c) = ring.try_claim_ready(me).unwrap() {
        claims.push(c);
    }
    let mut next = rs.iter().copied();
    prover
        .prove_claimed_with(claims, &mut || next.next().expect("one (r, s) per proof"))
        .unwrap();
    let mut out = Vec::new();
    while let Some(done) = ring.try_take_done(me).unwrap() {
        let r = match done.result().unwrap() {
            SlotResult::Proof(p) => Ok(p.to_vec()),
            SlotResult::Failed(m) => Err(m.to_owned()),
        };
        out.push((done.meta().job_id, r));
        done.free().unwrap();
    }
    out.sort_by_key(|(job, _)| *job);
    out
}

#[test]
fn a_witness_slot_proves_to_the_full_slots_bytes_and_bellpersons() {
    for (text, seed) in [
        ("sha-chain:1", 5u64),
        ("bits:700", 7),
        ("porep-like:16384", 8),
        ("pubinputs:4", 6),
    ] {
        let spec: CircuitSpec = text.parse().unwrap();
        let r1cs = kernels::circuits::AnyCircuit::from(spec).compile().unwrap();
        let layout = WitnessLayout::of(&r1cs);
        let params =
            kernels::paramgen::generate_parameters_seeded(spec.circuit(None), 11, &|_| {}).unwrap();
        let ring = ring_for(&spec, 2);
        let mut shapes = synth_proc::ShapeCache::default();
        // Job `seed`: a full slot; job `seed + 100`: a witness slot of the same partition
        // (both requests carry `seed` as the witness seed).
        synth_proc::synthesize_request(
            &ring,
            &mut shapes,
            &request(&spec, seed, false),
            None,
            Some(&r1cs),
        )
        .unwrap();
        let mut wreq = request(&spec, seed, true);
        wreq.job_id = seed + 100;
        synth_proc::synthesize_request(&ring, &mut shapes, &wreq, None, Some(&r1cs)).unwrap();
        let kinds: Vec<SlotKind> = ring
            .snapshot()
            .iter()
            .map(|s| {
                let c = ring.claim_ready_at(current_owner(), s.index, s.generation);
                let c = c.unwrap().expect("both slots are READY");
                let kind = c.view().unwrap().kind();
                c.release().unwrap();
                kind
            })
            .collect();
        assert_eq!(kinds, vec![SlotKind::Full, SlotKind::Witness], "{text}");
        let wbytes = synth_proc::witness_capacity_for(&layout)
            .slot_bytes()
            .unwrap();
        let fbytes = synth_proc::capacity_for(&spec.shape().unwrap())
            .slot_bytes()
            .unwrap();
        eprintln!(
            "{text}: {} of {} aux are bits; witness slot {wbytes} bytes, full slot {fbytes}",
            layout.bits(),
            layout.aux()
        );
        assert!(wbytes * 2 < fbytes, "{text}");

        let (r, s) = (Scalar::from(1234u64), Scalar::from(5678u64));
        let results = prove_all(&ring, &prover(&spec, &params, true), &[(r, s), (r, s)]);
        let theirs = bellperson::groth16::create_proof::<Bls12, _, _>(
            spec.circuit(Some(seed)),
            &params,
            r,
            s,
        )
        .unwrap();
        let theirs = proof_bytes(&theirs);
        assert_eq!(results.len(), 2, "{text}");
        for (job, result) in results {
            assert_eq!(
                result.as_ref().expect("proved"),
                &theirs,
                "{text}: job {job} (witness: {})",
                job > seed
            );
        }
        let check = CpuBackend::new(
            kernels::srs::SrsImage::from_parameters(&params, spec.circuit_id()).unwrap(),
        )
        .unwrap();
        assert!(check
            .verify(
                &Proof::read(&theirs[..]).unwrap(),
                &spec.public_inputs(seed).unwrap()
            )
            .unwrap());
    }
}

#[test]
fn a_witness_slot_without_matrices_fails_alone_and_the_full_slot_beside_it_is_proved() {
    let spec: CircuitSpec = "bits:130".parse().unwrap();
    let r1cs = kernels::circuits::AnyCircuit::from(spec).compile().unwrap();
    let params =
        kernels::paramgen::generate_parameters_seeded(spec.circuit(None), 3, &|_| {}).unwrap();
    let ring = ring_for(&spec, 2);
    let mut shapes = synth_proc::ShapeCache::default();
    synth_proc::synthesize_request(
        &ring,
        &mut shapes,
        &request(&spec, 1, true),
        None,
        Some(&r1cs),
    )
    .unwrap();
    synth_proc::synthesize_request(&ring, &mut shapes, &request(&spec, 2, false), None, None)
        .unwrap();
    let one = (Scalar::from(1u64), Scalar::from(2u64));
    let results = prove_all(&ring, &prover(&spec, &params, false), &[one, one]);
    let msg = results[0].1.as_ref().unwrap_err();
    assert!(
        msg.contains("pre-compiled matrices") && msg.contains("hint:"),
        "{msg}"
    );
    let proof = Proof::read(&results[1].1.as_ref().expect("the full slot")[..]).unwrap();
    let check = CpuBackend::new(
        kernels::srs::SrsImage::from_parameters(&params, spec.circuit_id()).unwrap(),
    )
    .unwrap();
    assert!(check
        .verify(&proof, &spec.public_inputs(2).unwrap())
        .unwrap());
}

#[test]
fn a_witness_request_without_matrices_in_synth_proc_makes_a_full_slot() {
    let spec: CircuitSpec = "pubinputs:2".parse().unwrap();
    let ring = ring_for(&spec, 1);
    synth_proc::synthesize_request(
        &ring,
        &mut synth_proc::ShapeCache::default(),
        &request(&spec, 4, true),
        None,
        None,
    )
    .unwrap();
    let c = ring.try_claim_ready(current_owner()).unwrap().unwrap();
    assert_eq!(c.view().unwrap().kind(), SlotKind::Full);
}

/// Witness slots whose header is self-consistent (the ring's validator passes it) but whose
/// sizes are not the circuit's: each fails with a message, the prover keeps serving.
#[test]
fn a_witness_slot_whose_sizes_lie_is_refused_without_a_panic() {
    let spec: CircuitSpec = "bits:130".parse().unwrap();
    let r1cs = kernels::circuits::AnyCircuit::from(spec).compile().unwrap();
    let layout = WitnessLayout::of(&r1cs);
    let params =
        kernels::paramgen::generate_parameters_seeded(spec.circuit(None), 3, &|_| {}).unwrap();
    let prover = prover(&spec, &params, true);
    let ring = ring_for(&spec, 4);
    let good = synth_proc::witness_capacity_for(&layout);
    let me = current_owner();
    let lies = [
        // One bit variable more, one non-bit fewer: the same aux count, another split.
        shm_protocol::WitnessCapacity {
            bits: good.bits + 1,
            non_bits: good.non_bits - 1,
            ..good
        },
        // Fewer non-bit values than the circuit has.
        shm_protocol::WitnessCapacity {
            non_bits: good.non_bits - 1,
            ..good
        },
        // An input too many.
        shm_protocol::WitnessCapacity {
            inputs: good.inputs + 1,
            ..good
        },
    ];
    for (k, caps) in lies.into_iter().enumerate() {
        let mut w = ring.acquire_free(me, 0, None).unwrap();
        w.begin_witness(
            SlotMeta {
                job_id: k as u64,
                circuit_id: spec.circuit_id(),
                ..SlotMeta::default()
            },
            caps,
        )
        .unwrap();
        w.publish_witness(WitnessLengths {
            inputs: caps.inputs,
            bits: caps.bits,
            non_bits: caps.non_bits,
            ones: 0,
        })
        .unwrap();
    }
    // And a good one after them, proved by the same prover.
    synth_proc::synthesize_request(
        &ring,
        &mut synth_proc::ShapeCache::default(),
        &SynthRequest {
            job_id: 3,
            ..request(&spec, 9, true)
        },
        None,
        Some(&r1cs),
    )
    .unwrap();
    let rs = [(Scalar::from(5u64), Scalar::from(6u64)); 4];
    let results = prove_all(&ring, &prover, &rs);
    assert_eq!(results.len(), 4);
    for (job, r) in &results[..3] {
        let msg = r.as_ref().unwrap_err();
        assert!(msg.contains("bad witness slot"), "lie {job}: {msg}");
    }
    let proof = Proof::read(&results[3].1.as_ref().expect("the good slot")[..]).unwrap();
    let check = CpuBackend::new(
        kernels::srs::SrsImage::from_parameters(&params, spec.circuit_id()).unwrap(),
    )
    .unwrap();
    assert!(check
        .verify(&proof, &spec.public_inputs(9).unwrap())
        .unwrap());
}
