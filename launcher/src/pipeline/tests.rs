//! The pipeline's core with fake children (`fake`), no processes. The `Core` tests are
//! single-threaded and step by step: each event is delivered by the test, the time is the test's,
//! and what the core sends or asks for is read back exactly. The `Pipeline` tests run the real
//! dispatcher and verifier pool over the same fakes; they wait on channels, never on time.

use std::sync::{mpsc, Arc};
use std::time::Duration;

use shm_protocol::control::{
    EventKind, FromChild, JobRequest, SynthRequest, TimelineEvent, ToGpu, ToSynth, NO_SLOT,
};
use shm_protocol::fault::Faults;

use super::core::{
    Action, ChildEvent, OutboxRefused, Refusal, Role, Rules, SrsTier, SrsToLoad, ToChild,
};
use super::dispatch::read_srs;
use super::fake::{self, proof_of, Accept, FakePipeline, Gate, World, SYNTH_PID};
use super::hub::Hub;
use super::outbox::Outbox;
use super::verify::Groth16;
use super::{
    AttemptFailure, ChildLoss, ChildState, FaultSettings, Holding, JobFailure, JobOptions,
    PipelineError, PRIORITY_CRITICAL, PRIORITY_LOW, PRIORITY_NORMAL,
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
    assert!(!w.cancel(queued.id).unwrap().was_running);
    assert_eq!(queued.wait().unwrap().result, Err(JobFailure::Cancelled));
    assert!(w.synth_inbox().is_empty());
    // A running job: synth-proc drops what it has not started, the READY slot is freed.
    assert!(w.cancel(running.id).unwrap().was_running);
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
        w.cancel(running_id),
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
    w.cancel(h.id).unwrap();
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
    w.tick();
    assert_eq!(w.kills(), vec![(Role::Gpu(0), gpu)]);
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

fn two_gpus() -> Rules {
    Rules {
        gpu_roles: vec![Role::Gpu(0), Role::Gpu(1)],
        ..fake::rules()
    }
}

/// The tier and size `status` shows for [`fake::CIRCUIT`]'s SRS.
fn tier(w: &World) -> (SrsTier, u64) {
    let line = w.core.srs_lines().remove(0);
    (line.tier, line.size_bytes)
}

/// The SRS reads the core asked for since the last call.
fn srs_reads(w: &mut World) -> Vec<SrsToLoad> {
    w.actions()
        .into_iter()
        .filter_map(|a| match a {
            Action::LoadSrs(load) => Some(load),
            _ => None,
        })
        .collect()
}

#[test]
fn an_srs_preloaded_while_serving_is_read_once_sent_to_every_gpu_proc_and_evicted_when_no_job_uses_it(
) {
    let (spec, id) = fake::circuit();
    let mut w = World::with_srs(two_gpus(), false);
    w.start_synth();
    w.start_gpu(0);
    w.start_gpu(1);
    assert_eq!(tier(&w), (SrsTier::Cold, 0));
    // Cold: the core asks for the file to be read, and sends nothing yet.
    assert_eq!(w.step(|c| c.want_srs(spec, id)), Ok(None));
    let mut reads = srs_reads(&mut w);
    assert_eq!(reads.len(), 1);
    let load = reads.remove(0);
    assert_eq!((load.spec, load.circuit_id), (spec, id));
    assert!(w.gpu_inbox(0).is_empty());
    let image = read_srs(&load).unwrap();
    let bytes = image.bytes;
    assert_eq!(w.step(|c| c.srs_read(image)), bytes);
    // Every gpu-proc is sent it once, its answer awaited.
    let sent = ToChild::Gpu(ToGpu::LoadSrs {
        circuit_id: id,
        circuit: spec.to_string(),
        params_path: load.params.clone(),
    });
    assert_eq!(w.gpu_inbox(0), vec![sent.clone()]);
    assert_eq!(w.gpu_inbox(1), vec![sent]);
    assert_eq!(tier(&w), (SrsTier::Warm, bytes));
    w.tick();
    assert!(
        w.gpu_inbox(0).is_empty(),
        "not sent twice before its answer"
    );
    w.gpu_says(
        0,
        FromChild::SrsLoaded {
            circuit_id: id,
            error: None,
        },
    );
    assert_eq!(
        tier(&w),
        (SrsTier::Warm, bytes),
        "one gpu-proc has not mapped it"
    );
    w.gpu_says(
        1,
        FromChild::SrsLoaded {
            circuit_id: id,
            error: None,
        },
    );
    assert_eq!(tier(&w), (SrsTier::Hot, bytes));
    // Loaded already: nothing is read or sent again.
    assert_eq!(w.step(|c| c.want_srs(spec, id)), Ok(Some(bytes)));
    assert!(srs_reads(&mut w).is_empty());
    assert!(w.gpu_inbox(0).is_empty() && w.gpu_inbox(1).is_empty());
    // An evict waits for no live job of the circuit.
    let h = w.submit(1, 1, normal());
    assert_eq!(w.core.srs_lines()[0].ref_count, 1);
    let refused = w.step(|c| c.evict_srs(spec, id)).map(|_| ());
    assert_eq!(
        refused,
        Err(Refusal::SrsInUse {
            circuit: spec,
            jobs: 1
        })
    );
    assert!(w.gpu_inbox(0).is_empty());
    w.cancel(h.id).unwrap();
    let removed = w.step(|c| c.evict_srs(spec, id)).unwrap();
    assert_eq!(removed.map(|s| s.bytes), Some(bytes));
    assert_eq!(tier(&w), (SrsTier::Cold, 0));
    let evict = ToChild::Gpu(ToGpu::EvictSrs { circuit_id: id });
    assert_eq!(w.gpu_inbox(0), vec![evict.clone()]);
    assert_eq!(w.gpu_inbox(1), vec![evict]);
    for d in [0, 1] {
        w.gpu_says(d, FromChild::SrsEvicted { circuit_id: id });
    }
    for info in w.core.children.values() {
        if let Some(gpu) = &info.srs {
            assert!(gpu.mapped.is_empty() && gpu.evicting.is_empty());
        }
    }
    // Nothing left to evict.
    assert!(w.step(|c| c.evict_srs(spec, id)).unwrap().is_none());
    assert!(w.gpu_inbox(0).is_empty());
}

#[test]
fn an_srs_load_a_full_queue_refused_goes_on_a_tick_and_one_a_gpu_proc_refused_waits_for_the_next_preload(
) {
    let (spec, id) = fake::circuit();
    let mut w = World::with_srs(fake::rules(), false);
    w.start_gpu(0);
    w.room(Role::Gpu(0), Some(0));
    assert_eq!(w.step(|c| c.want_srs(spec, id)), Ok(None));
    let image = read_srs(&srs_reads(&mut w).remove(0)).unwrap();
    w.step(|c| c.srs_read(image));
    let gpu = |w: &World| {
        let g = w.core.children[&Role::Gpu(0)].srs.as_ref().unwrap();
        (g.loading.contains(&id), g.refused.contains_key(&id))
    };
    assert_eq!(gpu(&w), (false, false), "refused by the queue: not pending");
    w.tick();
    assert_eq!(gpu(&w), (false, false));
    // Room again: the next tick sends it.
    w.room(Role::Gpu(0), None);
    w.tick();
    assert!(matches!(
        w.gpu_inbox(0)[..],
        [ToChild::Gpu(ToGpu::LoadSrs { circuit_id, .. })] if circuit_id == id
    ));
    assert_eq!(gpu(&w), (true, false));
    // The gpu-proc cannot map it: not sent again on ticks...
    w.gpu_says(
        0,
        FromChild::SrsLoaded {
            circuit_id: id,
            error: Some("out of memory".into()),
        },
    );
    assert_eq!(gpu(&w), (false, true));
    w.tick();
    assert!(w.gpu_inbox(0).is_empty());
    assert_eq!(tier(&w).0, SrsTier::Warm);
    // ...until the next preload asks again.
    assert!(w.step(|c| c.want_srs(spec, id)).unwrap().is_some());
    assert_eq!(w.gpu_inbox(0).len(), 1);
    w.gpu_says(
        0,
        FromChild::SrsLoaded {
            circuit_id: id,
            error: None,
        },
    );
    assert_eq!(tier(&w).0, SrsTier::Hot);
}

#[test]
fn a_gpu_proc_maps_what_its_start_was_given_and_its_hello_sends_what_changed_since() {
    let (spec, id) = fake::circuit();
    // Loaded when it starts: given at start, nothing sent at its hello.
    let mut w = World::with_srs(fake::rules(), true);
    w.start_gpu(0);
    assert!(w.gpu_inbox(0).is_empty());
    assert_eq!(tier(&w).0, SrsTier::Hot);
    // Evicted between its start and its hello: the hello sends the evict.
    let first = w.gpu(0);
    w.event(fake::exited(Role::Gpu(0), first, "killed by signal 9"));
    w.spawn_gpu(0);
    w.step(|c| c.evict_srs(spec, id)).unwrap();
    assert!(w.gpu_inbox(0).is_empty(), "not serving before its hello");
    w.gpu_hello(0);
    assert_eq!(
        w.gpu_inbox(0),
        vec![ToChild::Gpu(ToGpu::EvictSrs { circuit_id: id })]
    );
    // Loaded between a start and its hello: the hello sends the load.
    let second = w.gpu(0);
    w.event(fake::exited(Role::Gpu(0), second, "killed by signal 9"));
    w.spawn_gpu(0);
    w.step(|c| c.want_srs(spec, id)).unwrap();
    let image = read_srs(&srs_reads(&mut w).remove(0)).unwrap();
    w.step(|c| c.srs_read(image));
    assert!(w.gpu_inbox(0).is_empty());
    w.gpu_hello(0);
    assert!(matches!(
        w.gpu_inbox(0)[..],
        [ToChild::Gpu(ToGpu::LoadSrs { circuit_id, .. })] if circuit_id == id
    ));
}

#[test]
fn a_gpu_proc_past_its_proving_deadline_is_killed_once_and_its_partition_fails_an_attempt_saying_so(
) {
    let deadline = Duration::from_secs(10);
    let mut w = World::new(Rules {
        faults: FaultSettings {
            max_attempts: 1,
            first_proof_deadline: deadline,
            ..FaultSettings::default()
        },
        ..fake::rules()
    });
    w.start_synth();
    let gpu = w.start_gpu(0);
    let h = w.submit(1, 1, normal());
    let req = w.handed_out().remove(0);
    w.publish(&req);
    let claimed = w.ring.try_claim_ready(gpu).unwrap().unwrap();
    let slot = claimed.index() as u32;
    claimed.leak();
    w.gpu_says(
        0,
        FromChild::Event(TimelineEvent::now(EventKind::GpuClaim, h.id, 0, slot)),
    );
    w.now += Duration::from_secs(9);
    w.tick();
    assert!(w.kills().is_empty(), "within its deadline");
    w.now += Duration::from_secs(2);
    w.tick();
    assert_eq!(w.kills(), vec![(Role::Gpu(0), gpu)]);
    assert_eq!(w.core.counters.deadline_kills, 1);
    w.tick();
    assert!(w.kills().is_empty(), "once per batch");
    w.event(fake::exited(Role::Gpu(0), gpu, "killed by signal 9"));
    let why = AttemptFailure::Lost {
        why: ChildLoss::ProvingLate {
            role: Role::Gpu(0),
            deadline,
        },
        doing: Holding::Proving,
    };
    let outcome = h.wait_timeout(Duration::ZERO).unwrap().expect("failed");
    assert_eq!(
        outcome.result.unwrap_err(),
        JobFailure::Attempts {
            partition: 0,
            reasons: vec![why]
        }
    );
}

#[test]
fn a_synthesis_past_its_deadline_kills_synth_proc_and_only_that_partition_fails_an_attempt() {
    let deadline = Duration::from_secs(10);
    let mut w = World::new(Rules {
        faults: FaultSettings {
            first_synthesis_deadline: deadline,
            ..FaultSettings::default()
        },
        ..fake::rules()
    });
    w.start_synth();
    w.start_gpu(0);
    let h = w.submit(1, 2, normal());
    let reqs = w.handed_out();
    assert_eq!(ids(&reqs), vec![(h.id, 0), (h.id, 1)]);
    for r in &reqs {
        fake::write(&w.ring, r).leak();
    }
    let start = |p| FromChild::Event(TimelineEvent::now(EventKind::SynthStart, h.id, p, NO_SLOT));
    w.synth_says(start(0));
    w.now += Duration::from_secs(5);
    w.synth_says(start(1));
    w.now += Duration::from_secs(6);
    w.tick();
    assert_eq!(w.kills(), vec![(Role::Synth, SYNTH_PID)]);
    assert_eq!(
        w.core.children[&Role::Synth].kill_reason,
        Some(ChildLoss::SynthesisLate {
            deadline,
            job: h.id,
            partition: 0
        })
    );
    w.event(fake::exited(Role::Synth, SYNTH_PID, "killed by signal 9"));
    assert_eq!(w.ring.counts().free, 4);
    assert_eq!(w.core.jobs.attempts(h.id, 0), 1, "the late one");
    assert_eq!(w.core.jobs.attempts(h.id, 1), 0, "cut short, not its fault");
    // Restarted, both are synthesized again.
    w.start_synth();
    assert_eq!(ids(&w.handed_out()), vec![(h.id, 0), (h.id, 1)]);
}

#[test]
fn a_pause_goes_to_every_gpu_proc_that_is_up_and_a_resume_forgets_the_confirmations() {
    let mut w = World::new(two_gpus());
    w.start_gpu(0);
    w.start_gpu(1);
    w.step(|c| c.tell_gpus(ToGpu::Pause));
    for d in [0, 1] {
        assert_eq!(w.gpu_inbox(d), vec![ToChild::Gpu(ToGpu::Pause)]);
    }
    assert!(!w.core.paused_all(2));
    w.gpu_says(0, FromChild::Paused);
    assert!(!w.core.paused_all(2), "one confirmed");
    w.gpu_says(1, FromChild::Paused);
    assert!(w.core.paused_all(2));
    w.step(|c| c.tell_gpus(ToGpu::Resume));
    assert!(!w.core.paused_all(1));
    for d in [0, 1] {
        assert_eq!(w.gpu_inbox(d), vec![ToChild::Gpu(ToGpu::Resume)]);
    }
    // A gpu-proc that is down is not sent anything.
    let pid = w.gpu(1);
    w.event(fake::exited(Role::Gpu(1), pid, "killed by signal 9"));
    w.step(|c| c.tell_gpus(ToGpu::Pause));
    assert_eq!(w.gpu_inbox(0), vec![ToChild::Gpu(ToGpu::Pause)]);
    assert!(!w.core.is_reachable(Role::Gpu(1)));
}

#[test]
fn a_drain_holds_back_what_synth_proc_was_not_sent_and_lets_the_rest_finish() {
    let mut w = World::new(fake::rules());
    w.start_synth();
    w.start_gpu(0);
    let h = w.submit(1, 3, normal());
    let reqs = w.handed_out();
    assert_eq!(reqs.len(), 2, "a window of two");
    w.step(|c| c.hold());
    // Room at synth-proc, and nothing goes.
    w.publish(&reqs[0]);
    w.tick();
    assert!(w.handed_out().is_empty());
    assert_eq!(w.core.jobs.pending(), 1);
    // A restarted synth-proc gets nothing either; what it had goes back to pending.
    w.event(fake::exited(Role::Synth, SYNTH_PID, "killed by signal 9"));
    w.start_synth();
    assert!(w.handed_out().is_empty());
    assert_eq!(w.core.jobs.pending(), 2);
    // What is in the ring is proved and checked as usual.
    assert_eq!(w.prove(0), (h.id, 0));
    let task = w.checks().remove(0);
    w.check(task, &Accept);
    assert_eq!(w.core.verifying, 0);
    // The shutdown after it fails the job.
    w.step(|c| c.shut_down());
    assert_eq!(h.wait().unwrap().result, Err(JobFailure::ShutDown));
}

#[test]
fn a_stop_tells_every_child_to_exit_and_their_exits_cost_no_attempt() {
    let mut w = World::new(fake::rules());
    w.start_synth();
    let gpu = w.start_gpu(0);
    let h = w.submit(1, 1, normal());
    let req = w.handed_out().remove(0);
    w.publish(&req);
    w.ring.try_claim_ready(gpu).unwrap().unwrap().leak();
    w.step(|c| c.stop());
    assert_eq!(w.synth_inbox(), vec![ToChild::Synth(ToSynth::Shutdown)]);
    assert_eq!(w.gpu_inbox(0), vec![ToChild::Gpu(ToGpu::Shutdown)]);
    w.event(fake::exited(Role::Gpu(0), gpu, "exited normally"));
    assert_eq!(w.core.jobs.attempts(h.id, 0), 0);
    assert_eq!(w.core.counters.failed_attempts, 0);
    // One that starts meanwhile is told at once.
    w.start_gpu(0);
    assert_eq!(w.gpu_inbox(0), vec![ToChild::Gpu(ToGpu::Shutdown)]);
    // Given up while stopping: not fatal.
    w.event(ChildEvent::GaveUp {
        role: Role::Synth,
        reason: "cannot start".into(),
    });
    assert!(w.core.fatal.is_none());
    w.step(|c| c.shut_down());
    assert_eq!(h.wait().unwrap().result, Err(JobFailure::ShutDown));
}

#[test]
fn a_child_down_is_shown_and_still_served_and_the_last_gpu_proc_given_up_fails_every_job() {
    let mut w = World::new(two_gpus());
    w.start_synth();
    w.start_gpu(0);
    w.start_gpu(1);
    let h = w.submit(1, 1, normal());
    // Down: shown, nothing fails, and its next hello clears it.
    w.event(ChildEvent::Down {
        role: Role::Gpu(1),
        reason: "died 9 times in a row".into(),
    });
    let info = &w.core.children[&Role::Gpu(1)];
    assert_eq!(info.down.as_deref(), Some("died 9 times in a row"));
    assert_eq!(info.state(true), ChildState::Down);
    assert!(w.core.fatal.is_none());
    w.gpu_hello(1);
    assert!(w.core.children[&Role::Gpu(1)].down.is_none());
    // One gpu-proc given up: the other takes the work.
    w.event(ChildEvent::GaveUp {
        role: Role::Gpu(1),
        reason: "no device".into(),
    });
    assert_eq!(
        w.core.children[&Role::Gpu(1)].state(false),
        ChildState::GivenUp
    );
    assert!(w.core.fatal.is_none());
    assert!(h.wait_timeout(Duration::ZERO).unwrap().is_none());
    // The last one: fatal, every live job fails, submissions are refused.
    w.event(ChildEvent::GaveUp {
        role: Role::Gpu(0),
        reason: "no device either".into(),
    });
    assert_eq!(w.core.fatal.as_deref(), Some("no device either"));
    assert_eq!(
        h.wait().unwrap().result,
        Err(JobFailure::RoleGaveUp {
            role: Role::Gpu(0),
            reason: "no device either".into()
        })
    );
    match w.try_submit(2, 1, normal()) {
        Err(PipelineError::Fatal(why)) => assert_eq!(why, "no device either"),
        Err(e) => panic!("{e}"),
        Ok(h) => panic!("job {} accepted by a fatal pipeline", h.id),
    }
}

#[test]
fn synth_proc_given_up_is_fatal_and_fails_every_live_job() {
    let mut w = World::new(fake::rules());
    w.start_synth();
    w.start_gpu(0);
    let h = w.submit(1, 2, normal());
    w.event(ChildEvent::GaveUp {
        role: Role::Synth,
        reason: "cannot start".into(),
    });
    assert_eq!(w.core.fatal.as_deref(), Some("cannot start"));
    assert!(matches!(
        h.wait().unwrap().result,
        Err(JobFailure::RoleGaveUp {
            role: Role::Synth,
            ..
        })
    ));
    // After a dispatcher panic nothing is delivered at shutdown: the journal keeps the jobs.
    let mut w = World::new(fake::rules());
    let h = w.submit(3, 1, normal());
    w.core.dispatcher_panicked("boom".into());
    w.step(|c| c.shut_down());
    assert!(h.wait_timeout(Duration::ZERO).unwrap().is_none());
    assert_eq!(w.core.jobs.live(), 1);
}

#[test]
fn requests_a_full_synth_queue_refused_stay_pending_in_order_and_go_on_the_next_tick() {
    let mut w = World::new(fake::rules());
    w.start_synth();
    w.start_gpu(0);
    w.room(Role::Synth, Some(1));
    let h = w.submit(1, 2, normal());
    assert_eq!(ids(&w.handed_out()), vec![(h.id, 0)]);
    assert_eq!(w.core.counters.sends_deferred, 1);
    assert_eq!((w.core.jobs.outstanding(), w.core.jobs.pending()), (1, 1));
    assert_eq!(w.core.counters.synth_outstanding_max, 1);
    w.tick();
    assert_eq!(ids(&w.handed_out()), vec![(h.id, 1)]);
    let handouts = w
        .core
        .progress
        .timeline
        .iter()
        .filter(|e| e.kind == EventKind::SynthHandout)
        .count();
    assert_eq!(handouts, 2, "one per request queued");
    assert_eq!(w.core.counters.synth_outstanding_max, 2);
}

#[test]
fn the_hub_queues_messages_in_order_and_tries_no_request_after_one_refused() {
    let w = World::new(fake::rules());
    let mut hub = Hub::new(w.core);
    let now = w.now;
    let (outbox, inbox) = Outbox::capture(1);
    hub.outbox(Role::Synth, Some(outbox));
    hub.apply(|c| c.on_event(fake::started(Role::Synth, SYNTH_PID), now));
    let done = hub.apply(|c| c.accept(fake::job(1, 2, normal())));
    let id = done.value.unwrap();
    assert_eq!(done.refused, vec![(Role::Synth, OutboxRefused::Full)]);
    let sent: Vec<(u64, u32)> = inbox
        .try_iter()
        .filter_map(|o| match o.msg {
            ToChild::Synth(ToSynth::Synthesize(r)) => Some((r.job_id, r.partition)),
            _ => None,
        })
        .collect();
    assert_eq!(sent, vec![(id, 0)]);
    assert_eq!(hub.core.jobs.pending(), 1);
    // Its waiter gets the outcome the core asks to deliver; synth-proc is told.
    let rx = hub.wait_for(id);
    let done = hub.apply(|c| c.cancel(id));
    assert_eq!(done.value, Ok(true));
    assert!(done.refused.is_empty());
    assert_eq!(rx.recv().unwrap().result, Err(JobFailure::Cancelled));
    assert_eq!(
        inbox.try_recv().unwrap().msg,
        ToChild::Synth(ToSynth::Cancel { job_id: id })
    );
    // The next job's request goes.
    let done = hub.apply(|c| c.accept(fake::job(2, 1, normal())));
    assert!(done.refused.is_empty());
    let next = done.value.unwrap();
    assert!(matches!(
        inbox.try_recv().unwrap().msg,
        ToChild::Synth(ToSynth::Synthesize(r)) if (r.job_id, r.partition) == (next, 0)
    ));
}
