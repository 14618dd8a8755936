//! Synthesis straight into a ring slot gives the proofs bellperson gives for the same circuit,
//! SRS, `r` and `s`, byte for byte.

use blstrs::{Bls12, Scalar};
use kernels::circuits::CircuitSpec;
use kernels::job::BuiltinRequest;
use kernels::{Assignment, Backend, CpuBackend, Density};
use shm_protocol::control::{JobRequest, SynthRequest};
use shm_protocol::{current_owner, HugePagePolicy, Region, Ring, RingConfig};

fn proof_bytes(p: &kernels::Proof) -> Vec<u8> {
    let mut v = Vec::new();
    p.write(&mut v).unwrap();
    v
}

#[test]
fn proofs_from_slots_are_bellpersons_for_every_builtin_circuit() {
    // The full synthesis, the pre-compiled one, and the pre-compiled one into a slot with room
    // to spare (its density words past the circuit's stay zero).
    let cases = [
        ("sha-chain:1", 5u64),
        ("pubinputs:4", 6),
        ("bits:700", 7),
        ("porep-like:16384", 8),
    ]
    .into_iter()
    .flat_map(|(t, seed)| {
        [
            (t, seed, false, 0),
            (t, seed, true, 0),
            (t, seed, true, 130),
        ]
    });
    for (text, seed, compiled, spare) in cases {
        let text_case = format!("{text} compiled={compiled} spare={spare}");
        let text = text_case.as_str();
        let spec: CircuitSpec = text_case.split(' ').next().unwrap().parse().unwrap();
        let r1cs = compiled.then(|| kernels::circuits::AnyCircuit::from(spec).compile().unwrap());
        let params =
            kernels::paramgen::generate_parameters_seeded(spec.circuit(None), 11, &|_| {}).unwrap();
        let backend = CpuBackend::new(
            kernels::srs::SrsImage::from_parameters(&params, spec.circuit_id()).unwrap(),
        )
        .unwrap();

        let mut caps = synth_proc::capacity_for(&spec.shape().unwrap());
        caps.aux += spare;
        caps.n += spare;
        let config = RingConfig::uniform(1, caps.slot_bytes().unwrap());
        let region = Region::create(
            "slot-proofs",
            config.region_bytes().unwrap(),
            HugePagePolicy::Plain,
        )
        .unwrap();
        let ring = Ring::create(region, config).unwrap();
        let req = SynthRequest {
            job_id: 1,
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
            witness: false,
        };
        synth_proc::synthesize_request(
            &ring,
            &mut synth_proc::ShapeCache::default(),
            &req,
            None,
            r1cs.as_ref(),
        )
        .unwrap();

        let claimed = ring.claim_ready(current_owner(), None).unwrap();
        let view = claimed.view().unwrap();
        let d = |w: shm_protocol::Density| {
            let b = view.density(w);
            Density {
                words: b.words,
                bit_len: b.bit_len as usize,
                popcount: b.popcount as usize,
            }
        };
        let assignment = Assignment {
            a: view.a(),
            b: view.b(),
            c: view.c(),
            input: view.input(),
            aux: view.aux(),
            a_aux_density: d(shm_protocol::Density::AAux),
            b_input_density: d(shm_protocol::Density::BInput),
            b_aux_density: d(shm_protocol::Density::BAux),
        };
        let (r, s) = (Scalar::from(1234u64), Scalar::from(5678u64));
        let ours = backend.prove_batch(&[assignment], &[r], &[s]).unwrap();
        let theirs = bellperson::groth16::create_proof::<Bls12, _, _>(
            spec.circuit(Some(seed)),
            &params,
            r,
            s,
        )
        .unwrap();
        assert_eq!(proof_bytes(&ours[0]), proof_bytes(&theirs), "{text}");
        assert!(
            backend
                .verify(&ours[0], &spec.public_inputs(seed).unwrap())
                .unwrap(),
            "{text}"
        );
    }
}

#[test]
fn a_circuit_larger_than_its_slot_is_an_error_and_the_slot_goes_back_to_free() {
    let spec: CircuitSpec = "pubinputs:4".parse().unwrap();
    let shape = spec.shape().unwrap();
    let mut caps = synth_proc::capacity_for(&shape);
    caps.aux -= 1; // one aux variable short
    let config = RingConfig::uniform(1, caps.slot_bytes().unwrap());
    let region = Region::create(
        "slot-full",
        config.region_bytes().unwrap(),
        HugePagePolicy::Plain,
    )
    .unwrap();
    let ring = Ring::create(region, config).unwrap();
    {
        let mut w = ring.acquire_free(current_owner(), 0, None).unwrap();
        w.begin(shm_protocol::SlotMeta::default(), caps).unwrap();
        let sink = synth_proc::SlotSink::new(w.parts_mut().unwrap());
        let err = spec
            .synthesize_into(3, sink)
            .err()
            .expect("the slot is too small");
        assert!(err.to_string().contains("slot full"), "{err}");
    }
    assert_eq!(
        ring.counts().free,
        1,
        "the dropped writer returned the slot"
    );
}
