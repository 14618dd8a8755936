//! synth-proc's scheduling, through its real serving loop: no synthesis waits on another.
//!
//! Regression test for issue 30 ("The GPU never waits"): syntheses were tasks of a rayon pool
//! whose workers also ran the pre-compiled products; a worker waiting in `join` for a stolen
//! chunk took the next queued synthesis and ran it to the end before its own could return, so
//! two syntheses overlapped on one thread. The serving loop reports every synthesis's
//! `SYNTH_START` and `SYNTH_END` with the thread that recorded them; on one thread they must
//! never overlap. Nothing is timed.

use std::collections::HashMap;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kernels::circuits::CircuitSpec;
use kernels::job::BuiltinRequest;
use shm_protocol::control::{
    self, EventKind, FromChild, JobRequest, SynthConfig, SynthRequest, TimelineEvent, ToSynth,
};
use shm_protocol::{current_owner, HugePagePolicy, Region, Ring, RingConfig};

/// Partitions synthesized; enough that, with syntheses queued behind every worker, a worker
/// waiting in its products' `join` would find one to take.
const PARTITIONS: u32 = 24;

#[test]
fn no_synthesis_runs_inside_another_on_one_thread_and_every_phase_is_reported() {
    // Four products tasks per synthesis (`ROWS_PER_TASK` rows each): chunks get stolen.
    let spec: CircuitSpec = "sha-chain:3".parse().unwrap();
    let r1cs = kernels::circuits::AnyCircuit::from(spec).compile().unwrap();
    let mut compiled = synth_proc::CompiledCircuits::default();
    compiled.insert(r1cs);

    let caps = synth_proc::capacity_for(&spec.shape().unwrap());
    let config = RingConfig::uniform(6, caps.slot_bytes().unwrap());
    let region = Region::create(
        "scheduling",
        config.region_bytes().unwrap(),
        HugePagePolicy::Plain,
    )
    .unwrap();
    let ring = Arc::new(Ring::create(region, config).unwrap());

    // The GPU side: frees every slot synth-proc publishes.
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = {
        let (ring, stop) = (ring.clone(), stop.clone());
        std::thread::spawn(move || {
            let owner = current_owner();
            // Acquire: pairs with the Release store at the end of the test.
            while !stop.load(Ordering::Acquire) {
                match ring.claim_ready(owner, Some(Duration::from_millis(50))) {
                    Ok(slot) => slot.discard().unwrap(),
                    Err(e) if e.is_timeout() => {}
                    Err(e) => panic!("claiming a slot: {e}"),
                }
            }
        })
    };

    let (ours, theirs) = UnixStream::pair().unwrap();
    let server = {
        let ring = ring.clone();
        std::thread::spawn(move || {
            synth_proc::serve(
                ring,
                theirs,
                SynthConfig {
                    concurrency: 2,
                    r1cs: Vec::new(),
                },
                compiled,
            )
        })
    };
    let (mut tx, mut rx) = control::channel(ours).unwrap();
    for partition in 0..PARTITIONS {
        tx.send(&ToSynth::Synthesize(SynthRequest {
            job_id: 1,
            partition,
            circuit: spec.to_string(),
            circuit_id: spec.circuit_id(),
            request: JobRequest::Inline(
                BuiltinRequest {
                    seed: 3,
                    partitions: PARTITIONS,
                }
                .to_bytes(),
            ),
            priority: 2,
            express: false,
            witness: false,
        }))
        .unwrap();
    }

    let mut events: Vec<TimelineEvent> = Vec::new();
    let mut published = 0;
    let deadline = Instant::now() + Duration::from_secs(600);
    while published < PARTITIONS {
        assert!(Instant::now() < deadline, "synth-proc did not finish");
        match rx.recv::<FromChild>().unwrap() {
            Some(FromChild::Published { .. }) => published += 1,
            Some(FromChild::Event(e)) => events.push(e),
            Some(FromChild::SynthFailed { error, .. }) => panic!("a synthesis failed: {error}"),
            Some(_) => {}
            None => panic!("synth-proc closed its channel"),
        }
    }
    tx.send(&ToSynth::Shutdown).unwrap();
    server.join().unwrap().unwrap();
    // Release: the consumer's Acquire load ends its loop.
    stop.store(true, Ordering::Release);
    consumer.join().unwrap();

    // Every synthesis reports its phases, each from the thread that ran it.
    let mut by_partition: HashMap<u32, HashMap<EventKind, TimelineEvent>> = HashMap::new();
    for e in &events {
        by_partition
            .entry(e.partition)
            .or_default()
            .insert(e.kind, *e);
    }
    assert_eq!(by_partition.len(), PARTITIONS as usize);
    let mut spans: HashMap<u32, Vec<(u64, u64, u32)>> = HashMap::new();
    for (partition, kinds) in &by_partition {
        let at = |k: EventKind| {
            kinds
                .get(&k)
                .unwrap_or_else(|| panic!("partition {partition}: no {}", k.as_str()))
        };
        let (taken, start, witness, end) = (
            at(EventKind::SynthTaken),
            at(EventKind::SynthStart),
            at(EventKind::WitnessEnd),
            at(EventKind::SynthEnd),
        );
        assert!(taken.t_ns <= start.t_ns && start.t_ns <= witness.t_ns);
        assert!(witness.t_ns <= end.t_ns);
        assert_ne!(start.tid, 0);
        assert_eq!(
            [taken.tid, end.tid],
            [start.tid, start.tid],
            "partition {partition}: one synthesis, one thread"
        );
        spans
            .entry(start.tid)
            .or_default()
            .push((start.t_ns, end.t_ns, *partition));
    }
    // The workers are the configured two (the express lane took nothing).
    assert!(spans.len() <= 2, "{} threads synthesized", spans.len());
    let mut nested = Vec::new();
    for (tid, spans) in &mut spans {
        spans.sort_unstable();
        for w in spans.windows(2) {
            if w[1].0 < w[0].1 {
                nested.push(format!(
                    "thread {tid}: partition {} began inside partition {}",
                    w[1].2, w[0].2
                ));
            }
        }
    }
    assert!(nested.is_empty(), "nested syntheses: {nested:#?}");
}
