//! The pipeline's core with fake children (`fake`), no processes. The `Core` tests are
//! single-threaded and step by step: each event is delivered by the test, the time is the test's,
//! and what the core sends or asks for is read back exactly. The `Pipeline` tests run the real
//! dispatcher and verifier pool over the same fakes; they wait on channels, never on time.

use std::sync::{mpsc, Arc};
use std::time::Duration;

use shm_protocol::control::{FromChild, JobRequest, SynthRequest, ToSynth};
use shm_protocol::fault::Faults;

use super::child::{Role, ToChild};
use super::fake::{self, proof_of, Accept, FakePipeline, Gate, World, SYNTH_PID};
use super::machine::{Action, Rules};
use super::verify::Groth16;
use super::{
    AttemptFailure, ChildLoss, FaultSettings, Holding, JobFailure, JobOptions, PipelineError,
    PRIORITY_CRITICAL, PRIORITY_LOW, PRIORITY_NORMAL,
};

fn ids(reqs: &[SynthRequest]) -> Vec<(u64, u32)> {
    reqs.iter().map(|r| (r.job_id, r.partition)).collect()
}

fn normal() -> JobOptions {
    JobOptions::default()
}

fn with_attempts(max_attempts: u32) -> Rules {
    Rules {
        faults: FaultSettings {
            max_attempts,
            ..FaultSettings::default()
        },
        ..fake::rules()
    }
}

#[test]
fn a_job_goes_from_submit_to_hand_out_to_the_ring_to_its_waiter_once_every_proof_verified() {
    let mut w = World::new(fake::rules());
    w.start_synth();
    w.start_gpu(0);
    let h = w.submit(7, 2, normal());
    // Handed out: one `Synthesize` per partition, carrying the job's request.
    let reqs = w.handed_out();
    assert_eq!(ids(&reqs), vec![(h.id, 0), (h.id, 1)]);
    let request = kernels::job::BuiltinRequest {
        seed: 7,
        partitions: 2,
    }
    .to_bytes();
    for r in &reqs {
        assert_eq!(r.request, JobRequest::Inline(request.clone()));
        assert_eq!(
            (r.circuit.as_str(), r.priority),
            (fake::CIRCUIT, PRIORITY_NORMAL)
        );
        assert!(!r.express);
    }
    assert_eq!(w.core.jobs.outstanding(), 2);
    // Published: READY in the ring, no longer at synth-proc.
    for r in &reqs {
        w.publish(r);
    }
    assert_eq!(w.ring.counts().ready, 2);
    assert_eq!(w.core.jobs.outstanding(), 0);
    assert_eq!(w.core.jobs.summaries()[0].in_ring, 2);
    // Claimed and proved: the DONE slots are freed at once, their proofs go to the check with
    // the partition's public inputs.
    w.prove(0);
    w.prove(0);
    assert_eq!(w.ring.counts().free, 4);
    let tasks = w.checks();
    assert_eq!(tasks.len(), 2);
    let job = kernels::job::open(&fake::CIRCUIT.parse().unwrap(), &request).unwrap();
    for t in &tasks {
        assert_eq!(t.inputs, job.public_inputs(t.partition as usize).unwrap());
        assert_eq!(t.proof, proof_of(t.job_id, t.partition));
    }
    assert_eq!(w.core.verifying, 2);
    // Delivered only once every partition verified, proofs in partition order.
    let mut tasks = tasks.into_iter();
    assert!(h.wait_timeout(Duration::ZERO).unwrap().is_none());
    w.check(tasks.next().unwrap(), &Accept);
    assert!(h.wait_timeout(Duration::ZERO).unwrap().is_none());
    w.check(tasks.next().unwrap(), &Accept);
    let outcome = h.wait_timeout(Duration::ZERO).unwrap().expect("delivered");
    assert_eq!(
        outcome.result.unwrap(),
        vec![proof_of(h.id, 0), proof_of(h.id, 1)]
    );
    assert!(outcome.times.verify > Duration::ZERO);
    assert_eq!((w.core.jobs.live(), w.core.verifying), (0, 0));
    assert_eq!(w.core.jobs.counters().succeeded, 1);
}

#[test]
fn a_gpu_proc_that_dies_holding_a_slot_costs_an_attempt_and_its_job_fails_at_the_limit() {
    let mut w = World::new(with_attempts(2));
    w.start_synth();
    let first = w.start_gpu(0);
    let h = w.submit(1, 1, normal());
    let req = w.handed_out().remove(0);
    w.publish(&req);
    // It claims the slot and dies holding it.
    w.ring.try_claim_ready(first).unwrap().unwrap().leak();
    w.event(fake::exited(Role::Gpu(0), first, "killed by signal 9"));
    assert_eq!(w.ring.counts().ready, 1, "requeued in the ring");
    assert!(w.handed_out().is_empty(), "not synthesized again");
    assert_eq!(w.core.jobs.attempts(h.id, 0), 1);
    let c = w.core.counters;
    assert_eq!(
        (c.child_exits, c.slots_requeued, c.failed_attempts),
        (1, 1, 1)
    );
    assert!(h.wait_timeout(Duration::ZERO).unwrap().is_none());
    // Restarted, it dies on the same slot again: the second attempt is the last.
    let second = w.start_gpu(0);
    w.ring.try_claim_ready(second).unwrap().unwrap().leak();
    w.event(fake::exited(Role::Gpu(0), second, "killed by signal 9"));
    let lost = AttemptFailure::Lost {
        why: ChildLoss::Died {
            role: Role::Gpu(0),
            status: "killed by signal 9".into(),
        },
        doing: Holding::Proving,
    };
    let outcome = h.wait_timeout(Duration::ZERO).unwrap().expect("failed");
    assert_eq!(
        outcome.result.unwrap_err(),
        JobFailure::Attempts {
            partition: 0,
            reasons: vec![lost.clone(), lost]
        }
    );
    // Its slot, READY again, is taken out of the ring unproved.
    assert_eq!(w.ring.counts().free, 4);
    assert_eq!(w.core.counters.slots_discarded, 1);
    assert_eq!(w.core.jobs.counters().failed, 1);
}

#[test]
fn a_synth_proc_that_dies_frees_its_writing_slot_and_gets_again_what_the_ring_does_not_hold() {
    let mut w = World::new(fake::rules());
    w.start_synth();
    w.start_gpu(0);
    let h = w.submit(3, 3, normal());
    let reqs = w.handed_out();
    assert_eq!(ids(&reqs), vec![(h.id, 0), (h.id, 1)], "a window of two");
    // Partition 0's slot is being written when synth-proc dies; partition 1 was published,
    // its message lost with the process.
    fake::write(&w.ring, &reqs[0]).leak();
    let _lost = fake::publish(&w.ring, &reqs[1]);
    w.event(fake::exited(Role::Synth, SYNTH_PID, "killed by signal 9"));
    assert_eq!(w.ring.counts().free, 3, "its WRITING slot is free again");
    assert_eq!(w.core.counters.slots_freed, 1);
    assert_eq!(w.core.jobs.attempts(h.id, 0), 1, "it held partition 0");
    assert_eq!(w.core.jobs.attempts(h.id, 1), 0);
    // Restarted: partitions 0 and 2 are handed out; 1 is proved from the ring.
    w.start_synth();
    assert_eq!(ids(&w.handed_out()), vec![(h.id, 0), (h.id, 2)]);
    assert_eq!(w.prove(0), (h.id, 1));
    assert_eq!(w.checks().len(), 1);
}

#[test]
fn a_cancel_takes_back_queued_work_tells_synth_proc_frees_ready_slots_and_drops_late_results() {
    let mut w = World::new(fake::rules());
    w.start_synth();
    w.start_gpu(0);
    let running = w.submit(1, 3, normal());
    let mut reqs = w.handed_out();
    // Partition 0 published makes room for partition 2.
    w.publish(&reqs[0]);
    reqs.extend(w.handed_out());
    assert_eq!(
        ids(&reqs),
        vec![(running.id, 0), (running.id, 1), (running.id, 2)]
    );
    let queued = w.submit(2, 1, normal());
    assert!(w.handed_out().is_empty(), "the window is full");
    // A job nothing of which was handed out: synth-proc is not asked.
    assert!(!w.core.cancel(queued.id).unwrap().was_running);
    assert_eq!(queued.wait().unwrap().result, Err(JobFailure::Cancelled));
    assert!(w.synth_inbox().is_empty());
    // A running job: synth-proc drops what it has not started, the READY slot is freed.
    assert!(w.core.cancel(running.id).unwrap().was_running);
    assert_eq!(
        w.synth_inbox(),
        vec![ToChild::Synth(ToSynth::Cancel { job_id: running.id })]
    );
    let running_id = running.id;
    assert_eq!(running.wait().unwrap().result, Err(JobFailure::Cancelled));
    assert_eq!(w.ring.counts().free, 4);
    assert_eq!(w.core.counters.slots_discarded, 1);
    // Partitions 1 and 2 are still at synth-proc and count against the window until they are
    // published; then their slots are freed unproved.
    assert_eq!(w.core.jobs.outstanding(), 2);
    w.publish(&reqs[1]);
    w.publish(&reqs[2]);
    assert_eq!(w.core.jobs.outstanding(), 0);
    assert_eq!(w.core.counters.slots_discarded, 3);
    assert_eq!(w.ring.counts().free, 4);
    assert!(matches!(
        w.core.cancel(running_id),
        Err(PipelineError::UnknownJob(_))
    ));
    assert_eq!(w.core.counters.cancelled, 2);
}

#[test]
fn a_verdict_for_a_job_that_ended_meanwhile_is_a_duplicate() {
    let mut w = World::new(fake::rules());
    w.start_synth();
    w.start_gpu(0);
    let h = w.submit(1, 1, normal());
    let req = w.handed_out().remove(0);
    w.publish(&req);
    w.prove(0);
    let task = w.checks().remove(0);
    w.core.cancel(h.id).unwrap();
    w.check(task, &Accept);
    assert_eq!(w.core.jobs.counters().duplicate_results, 1);
    assert_eq!(w.core.verifying, 0);
    assert_eq!(h.wait().unwrap().result, Err(JobFailure::Cancelled));
}

#[test]
fn partitions_go_out_highest_priority_first_and_urgent_ones_overtake_in_the_express_lane() {
    let mut w = World::new(Rules {
        synth_window: 1,
        ..fake::rules()
    });
    w.start_gpu(0);
    // Queued before synth-proc is up: the NORMAL job goes before the older LOW one.
    let low = w.submit(
        1,
        1,
        JobOptions {
            priority: PRIORITY_LOW,
            ..Default::default()
        },
    );
    let normal = w.submit(2, 2, normal());
    w.start_synth();
    let mut order = w.handed_out();
    assert_eq!(ids(&order), vec![(normal.id, 0)]);
    // A CRITICAL job while the window is full: its partition goes at once, on the express lane.
    let critical = w.submit(
        3,
        1,
        JobOptions {
            priority: PRIORITY_CRITICAL,
            ..Default::default()
        },
    );
    let urgent = w.handed_out();
    assert_eq!(ids(&urgent), vec![(critical.id, 0)]);
    assert!(urgent[0].express && urgent[0].priority == PRIORITY_CRITICAL);
    order.extend(urgent);
    // Each publish makes room for the next, in priority order.
    let mut next = 0;
    while next < order.len() {
        let r = order[next].clone();
        w.publish(&r);
        order.extend(w.handed_out());
        next += 1;
    }
    assert_eq!(
        ids(&order),
        vec![
            (normal.id, 0),
            (critical.id, 0),
            (normal.id, 1),
            (low.id, 0)
        ]
    );
    assert!(order.iter().filter(|r| r.express).count() == 1);
    // The GPU claims follow the slots' priorities: the CRITICAL partition first.
    assert_eq!(w.prove(0), (critical.id, 0));
}

#[test]
fn a_proof_that_does_not_verify_costs_an_attempt_and_its_partition_is_synthesized_again() {
    let mut w = World::new(with_attempts(2));
    w.start_synth();
    w.start_gpu(0);
    let h = w.submit(1, 1, normal());
    for attempt in 1..=2 {
        let reqs = w.handed_out();
        assert_eq!(ids(&reqs), vec![(h.id, 0)], "attempt {attempt}");
        w.publish(&reqs[0]);
        w.prove(0);
        // The real check: the fake bytes are no proof.
        let task = w.checks().remove(0);
        w.check(task, &Groth16);
    }
    let outcome = h.wait_timeout(Duration::ZERO).unwrap().expect("failed");
    let Err(JobFailure::Attempts { partition, reasons }) = outcome.result else {
        panic!("{:?}", outcome.result);
    };
    assert_eq!(partition, 0);
    assert!(
        reasons
            .iter()
            .all(|r| matches!(r, AttemptFailure::Rejected(_))),
        "{reasons:?}"
    );
}

#[test]
fn a_silent_child_is_killed_and_what_it_held_fails_an_attempt_saying_why() {
    let mut w = World::new(with_attempts(1));
    w.start_synth();
    let gpu = w.start_gpu(0);
    let h = w.submit(1, 1, normal());
    let req = w.handed_out().remove(0);
    w.publish(&req);
    w.ring.try_claim_ready(gpu).unwrap().unwrap().leak();
    // Past the heartbeat timeout; synth-proc beat meanwhile, the gpu-proc did not.
    w.now += Duration::from_secs(61);
    w.synth_says(FromChild::Heartbeat);
    w.core.on_tick(w.now);
    let kills: Vec<(Role, u32)> = w
        .actions()
        .into_iter()
        .filter_map(|a| match a {
            Action::Kill { role, pid } => Some((role, pid)),
            Action::Verify(_) => None,
        })
        .collect();
    assert_eq!(kills, vec![(Role::Gpu(0), gpu)]);
    assert_eq!(w.core.counters.hung_kills, 1);
    // Its exit, once killed, names the kill.
    w.event(fake::exited(Role::Gpu(0), gpu, "killed by signal 9"));
    let outcome = h.wait_timeout(Duration::ZERO).unwrap().expect("failed");
    let why = AttemptFailure::Lost {
        why: ChildLoss::Silent { role: Role::Gpu(0) },
        doing: Holding::Proving,
    };
    assert_eq!(
        outcome.result.unwrap_err(),
        JobFailure::Attempts {
            partition: 0,
            reasons: vec![why]
        }
    );
}

/// Runs `f` on another thread; `None` if it has not answered within a minute (it waits on a
/// lock it should not: the test then fails instead of hanging).
fn answers<T: Send>(f: impl FnOnce() -> T + Send, release: impl FnOnce()) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(move || {
            let _ = tx.send(f());
        });
        let got = rx.recv_timeout(Duration::from_secs(60)).ok();
        release();
        got
    })
}

#[test]
fn status_and_submit_answer_while_a_proof_is_being_checked() {
    let (gate, entered, open) = Gate::new();
    let f = FakePipeline::start(gate, Faults::default());
    let synth = f.start_synth();
    let gpu = f.start_gpu();
    let p = &f.pipeline;
    let h = p.submit(fake::CIRCUIT, 5, 1).unwrap();
    let req = synth.next_request();
    f.event(fake::message(
        Role::Synth,
        SYNTH_PID,
        fake::publish(&f.ring, &req),
    ));
    let (proved, _) = fake::prove(&f.ring, gpu);
    f.event(fake::message(Role::Gpu(0), gpu, proved));
    // The check has started and is held.
    assert_eq!(entered.recv().unwrap(), (h.id, 0));
    let open_gate = || open.send(()).unwrap();
    let (status, second) = answers(|| (p.status(), p.submit(fake::CIRCUIT, 6, 1)), open_gate)
        .expect("status and submit waited behind the proof check");
    assert!(status.fatal.is_none());
    assert_eq!(
        status.jobs.iter().map(|j| j.job_id).collect::<Vec<_>>(),
        vec![h.id]
    );
    assert_eq!(second.unwrap().id, h.id + 1);
    // Let go, the proof is delivered.
    let id = h.id;
    let outcome = h.wait().unwrap();
    assert_eq!(outcome.result.unwrap(), vec![proof_of(id, 0)]);
}

#[test]
fn a_panic_of_the_dispatcher_turns_the_pipeline_fatal_and_submit_refuses() {
    let faults = Faults::parse("dispatcher-panic@job=1").unwrap();
    let f = FakePipeline::start(Arc::new(Accept), faults);
    let synth = f.start_synth();
    let p = &f.pipeline;
    let h = p.submit(fake::CIRCUIT, 5, 1).unwrap();
    assert_eq!(h.id, 1);
    let req = synth.next_request();
    // Its `Published` makes the dispatcher panic.
    f.event(fake::message(
        Role::Synth,
        SYNTH_PID,
        fake::publish(&f.ring, &req),
    ));
    // The waiter is let go without an outcome: the job did not fail (a journal keeps it).
    assert!(matches!(h.wait(), Err(PipelineError::Stopped)));
    let fatal = p.fatal().expect("fatal");
    assert!(
        fatal.contains(
            "the dispatcher panicked: injected fault `dispatcher-panic` at job 1 partition 0"
        ),
        "{fatal}"
    );
    let status = p.status();
    assert_eq!(status.fatal.as_deref(), Some(fatal.as_str()));
    assert_eq!(status.jobs.len(), 1, "still accepted");
    match p.submit(fake::CIRCUIT, 6, 1) {
        Err(PipelineError::Fatal(why)) => assert_eq!(why, fatal),
        Err(e) => panic!("{e}"),
        Ok(h) => panic!("job {} accepted by a fatal pipeline", h.id),
    }
}
