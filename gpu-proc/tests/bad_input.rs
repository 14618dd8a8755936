//! A bad slot or a panicking backend fails its own job and nothing else: the same prover goes on
//! to prove the next slot.

use std::collections::HashMap;

use gpu_proc::Prover;
use kernels::circuits::CircuitSpec;
use kernels::job::BuiltinRequest;
use kernels::{Assignment, Backend, CpuBackend, Proof};
use shm_protocol::control::{JobRequest, SynthRequest};
use shm_protocol::layout::{RING_HEADER_BYTES, SLOT_HEADER_BYTES};
use shm_protocol::{current_owner, HugePagePolicy, Region, Ring, RingConfig, SlotResult};

const CIRCUIT: &str = "pubinputs:2";

fn ring_with_ready_slots(spec: &CircuitSpec, slots: u32) -> Ring {
    let caps = synth_proc::capacity_for(&spec.shape().unwrap());
    let config = RingConfig::uniform(slots, caps.slot_bytes().unwrap());
    let region = Region::create(
        "gpu-proc-test",
        config.region_bytes().unwrap(),
        HugePagePolicy::Plain,
    )
    .unwrap();
    let ring = Ring::create(region, config).unwrap();
    let mut shapes = synth_proc::ShapeCache::default();
    for p in 0..slots {
        let req = SynthRequest {
            job_id: 1,
            partition: p,
            circuit: spec.to_string(),
            circuit_id: spec.circuit_id(),
            // Partition p of a job of seed 10: the witness of seed 10 + p.
            request: JobRequest::Inline(
                BuiltinRequest {
                    seed: 10,
                    partitions: slots,
                }
                .to_bytes(),
            ),
            priority: 2,
            express: false,
            witness: false,
        };
        synth_proc::synthesize_request(&ring, &mut shapes, &req, None, None).unwrap();
    }
    ring
}

fn cpu_prover(spec: &CircuitSpec) -> (Prover, CpuBackend) {
    let params =
        kernels::paramgen::generate_parameters_seeded(spec.circuit(None), 3, &|_| {}).unwrap();
    let image = kernels::srs::SrsImage::from_parameters(&params, spec.circuit_id()).unwrap();
    let check = CpuBackend::new(
        kernels::srs::SrsImage::from_parameters(&params, spec.circuit_id()).unwrap(),
    )
    .unwrap();
    let mut backends: HashMap<u64, (String, Box<dyn Backend>)> = HashMap::new();
    backends.insert(
        spec.circuit_id(),
        (spec.to_string(), Box::new(CpuBackend::new(image).unwrap())),
    );
    (Prover::from_backends(backends), check)
}

fn collect(ring: &Ring) -> Vec<(u32, Result<Vec<u8>, String>)> {
    let mut out = Vec::new();
    while let Some(done) = ring.try_take_done(current_owner()).unwrap() {
        let r = match done.result().unwrap() {
            SlotResult::Proof(p) => Ok(p.to_vec()),
            SlotResult::Failed(m) => Err(m.to_owned()),
        };
        out.push((done.meta().partition, r));
        done.free().unwrap();
    }
    out.sort_by_key(|(p, _)| *p);
    out
}

#[test]
fn a_slot_with_a_corrupt_header_fails_alone_and_the_next_slot_is_proved() {
    let spec: CircuitSpec = CIRCUIT.parse().unwrap();
    let ring = ring_with_ready_slots(&spec, 2);
    // Point slot 0's `a` array far outside its span, as a scribbling process might.
    let header = RING_HEADER_BYTES; // slot 0's header
    let offsets_a = header + 64;
    // SAFETY: the test owns the only mapping of this private ring and no handle is alive.
    unsafe {
        let p = ring.region().as_mut_ptr().add(offsets_a).cast::<u64>();
        p.write_unaligned(1 << 40);
    }
    const { assert!(SLOT_HEADER_BYTES > 64 + 8) };
    let (prover, check) = cpu_prover(&spec);
    let me = current_owner();
    let claims = vec![
        ring.try_claim_ready(me).unwrap().unwrap(),
        ring.try_claim_ready(me).unwrap().unwrap(),
    ];
    let outcomes = prover.prove_claimed(claims).unwrap();
    assert_eq!(outcomes.len(), 2);
    let results = collect(&ring);
    assert_eq!(results.len(), 2);
    let bad = results[0].1.as_ref().unwrap_err();
    assert!(bad.starts_with("bad slot:"), "{bad}");
    let proof = results[1].1.as_ref().expect("the good slot is proved");
    let proof = Proof::read(&proof[..]).unwrap();
    assert!(check
        .verify(&proof, &spec.public_inputs(11).unwrap())
        .unwrap());
    assert_eq!(ring.counts().free, 2);
}

struct Panicking;

impl Backend for Panicking {
    fn name(&self) -> &'static str {
        "panicking"
    }
    fn prove_batch(
        &self,
        _: &[Assignment<'_>],
        _: &[blstrs::Scalar],
        _: &[blstrs::Scalar],
    ) -> Result<Vec<Proof>, kernels::Error> {
        panic!("CUDA error 700: an illegal memory access was encountered")
    }
}

#[test]
fn a_backend_panic_fails_the_batch_with_the_message_and_the_process_goes_on() {
    let spec: CircuitSpec = CIRCUIT.parse().unwrap();
    let ring = ring_with_ready_slots(&spec, 2);
    let mut backends: HashMap<u64, (String, Box<dyn Backend>)> = HashMap::new();
    backends.insert(spec.circuit_id(), (spec.to_string(), Box::new(Panicking)));
    let prover = Prover::from_backends(backends);
    let me = current_owner();
    let claims = vec![ring.try_claim_ready(me).unwrap().unwrap()];
    prover.prove_claimed(claims).unwrap();
    let r = collect(&ring);
    let msg = r[0].1.as_ref().unwrap_err();
    assert!(
        msg.contains("panicked") && msg.contains("illegal memory access"),
        "{msg}"
    );
    // The next slot is served by a working prover in the same process.
    let (good, check) = cpu_prover(&spec);
    good.prove_claimed(vec![ring.try_claim_ready(me).unwrap().unwrap()])
        .unwrap();
    let r = collect(&ring);
    let proof = Proof::read(&r[0].1.as_ref().unwrap()[..]).unwrap();
    assert!(check
        .verify(&proof, &spec.public_inputs(11).unwrap())
        .unwrap());
}

#[test]
fn a_slot_of_a_circuit_without_srs_fails_with_the_circuit_id() {
    let spec: CircuitSpec = CIRCUIT.parse().unwrap();
    let ring = ring_with_ready_slots(&spec, 1);
    let prover = Prover::from_backends(HashMap::new());
    prover
        .prove_claimed(vec![ring
            .try_claim_ready(current_owner())
            .unwrap()
            .unwrap()])
        .unwrap();
    let r = collect(&ring);
    assert!(
        r[0].1
            .as_ref()
            .unwrap_err()
            .contains("no SRS for circuit id"),
        "{:?}",
        r[0].1
    );
}

struct ContextLost;

impl Backend for ContextLost {
    fn name(&self) -> &'static str {
        "lost"
    }
    fn prove_batch(
        &self,
        _: &[Assignment<'_>],
        _: &[blstrs::Scalar],
        _: &[blstrs::Scalar],
    ) -> Result<Vec<Proof>, kernels::Error> {
        Err(kernels::ErrorKind::DeviceLost(
            "proving on the GPU: an illegal memory access was encountered (cuda error 700)".into(),
        )
        .into())
    }
}

#[test]
fn a_lost_gpu_context_fails_no_slot_and_leaves_the_claims_for_the_launcher() {
    let spec: CircuitSpec = CIRCUIT.parse().unwrap();
    let ring = ring_with_ready_slots(&spec, 2);
    let mut backends: HashMap<u64, (String, Box<dyn Backend>)> = HashMap::new();
    backends.insert(spec.circuit_id(), (spec.to_string(), Box::new(ContextLost)));
    let prover = Prover::from_backends(backends);
    let me = current_owner();
    let claims = vec![
        ring.try_claim_ready(me).unwrap().unwrap(),
        ring.try_claim_ready(me).unwrap().unwrap(),
    ];
    let err = prover.prove_claimed(claims).unwrap_err();
    assert!(matches!(err, gpu_proc::Error::DeviceLost(_)), "{err}");
    assert!(err.to_string().contains("illegal memory access"), "{err}");
    // No slot was failed: both are still claimed, as if the process had died holding them.
    assert!(collect(&ring).is_empty());
    let counts = ring.counts();
    assert_eq!(counts.claimed, 2, "{counts:?}");
}
