//! Launcher-side scheduling with real processes (issue 11, items CancelProof and Priorities at the
//! pipeline level): the bounded hand-out to synth-proc, priorities overtaking queued work, and
//! cancellation of queued and running jobs.

mod common;
use common::{pipeline_settings, serial};

use std::time::{Duration, Instant};

use launcher::pipeline::{
    JobFailure, JobHandle, JobOptions, Pipeline, PipelineError, PipelineSettings, PRIORITY_CRITICAL,
};
use shm_protocol::control::EventKind;

const CIRCUIT: &str = "sha-chain:1";
const LIMIT: Duration = Duration::from_secs(300);

/// One synthesis at a time, a small ring.
fn settings(lookahead: Option<usize>) -> PipelineSettings {
    let mut s = pipeline_settings(CIRCUIT);
    s.slots = 2;
    s.synth_concurrency = 1;
    s.synth_lookahead = lookahead;
    s
}

fn start(lookahead: Option<usize>) -> Pipeline {
    let p = Pipeline::start(settings(lookahead)).unwrap();
    p.wait_ready(Duration::from_secs(120)).unwrap();
    p
}

fn submit(p: &Pipeline, seed: u64, partitions: u32, priority: i32) -> JobHandle {
    let request = kernels::job::BuiltinRequest { seed, partitions };
    p.submit_job_with(
        CIRCUIT.parse().unwrap(),
        &request.to_bytes(),
        JobOptions {
            priority,
            ..Default::default()
        },
    )
    .unwrap()
}

fn proved(h: JobHandle) {
    let id = h.id;
    let o = h
        .wait_timeout(LIMIT)
        .unwrap()
        .unwrap_or_else(|| panic!("job {id} timed out"));
    let proofs = o.result.unwrap_or_else(|e| panic!("job {id} failed: {e}"));
    assert!(proofs.iter().all(|p| p.len() == 192));
}

fn cancelled(h: JobHandle) {
    let id = h.id;
    let o = h
        .wait_timeout(LIMIT)
        .unwrap()
        .unwrap_or_else(|| panic!("job {id} timed out"));
    assert_eq!(o.result.unwrap_err(), JobFailure::Cancelled, "job {id}");
}

/// Waits until every slot is FREE again.
fn ring_free(p: &Pipeline) {
    let deadline = Instant::now() + LIMIT;
    loop {
        let c = p.ring().counts();
        if c.free == p.ring().slot_count() {
            return;
        }
        assert!(Instant::now() < deadline, "ring never all FREE: {c:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_critical_job_overtakes_queued_normal_jobs() {
    let _g = serial();
    let p = start(None);
    let normal: Vec<JobHandle> = (0..12).map(|i| submit(&p, 100 + i, 1, 0)).collect();
    let critical = submit(&p, 900, 1, PRIORITY_CRITICAL);
    let critical_id = critical.id;
    let normal_ids: Vec<u64> = normal.iter().map(|h| h.id).collect();
    proved(critical);
    for h in normal {
        proved(h);
    }
    // Completion order, from the outcomes' PROOF_DONE events.
    let order: Vec<u64> = p
        .take_timeline()
        .into_iter()
        .filter(|e| e.kind == EventKind::ProofDone)
        .map(|e| e.job_id)
        .collect();
    assert_eq!(order.len(), 13, "{order:?}");
    let at = order.iter().position(|&j| j == critical_id).unwrap();
    let after = order[at + 1..]
        .iter()
        .filter(|j| normal_ids.contains(j))
        .count();
    assert!(
        after >= 8,
        "the critical job {critical_id} finished before only {after} normal jobs: {order:?}"
    );
    p.shutdown();
}

#[test]
fn synth_proc_never_holds_more_than_concurrency_plus_lookahead() {
    let _g = serial();
    let p = start(Some(2));
    let handles: Vec<JobHandle> = (0..6).map(|i| submit(&p, 200 + i, 2, 0)).collect();
    let mut held_back = false;
    let deadline = Instant::now() + LIMIT;
    loop {
        let c = p.status().counters;
        assert_eq!(c.synth_window, 3);
        assert!(c.synth_outstanding <= 3, "{c:?}");
        held_back |= c.synth_pending > 0;
        if c.succeeded == 6 {
            break;
        }
        assert!(Instant::now() < deadline, "jobs did not finish: {c:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    for h in handles {
        proved(h);
    }
    let c = p.status().counters;
    assert!(
        held_back,
        "12 partitions were never held back in the job table"
    );
    assert!(
        (1..=3).contains(&c.synth_outstanding_max),
        "most at synth-proc at once: {}",
        c.synth_outstanding_max
    );
    // Each partition was handed out once: none lost, none repeated.
    assert_eq!((c.syntheses_requested, c.syntheses_started), (12, 12));
    p.shutdown();
}

#[test]
fn cancelling_a_queued_job_drops_it_before_synthesis_and_the_next_job_is_fine() {
    let _g = serial();
    let p = start(None);
    let ahead: Vec<JobHandle> = (0..4).map(|i| submit(&p, 300 + i, 1, 0)).collect();
    // Three partitions behind four jobs, with room for two at synth-proc: never handed out.
    let queued = submit(&p, 400, 3, 0);
    let c = p.cancel(queued.id).unwrap();
    assert!(!c.was_running);
    cancelled(queued);
    for h in ahead {
        proved(h);
    }
    proved(submit(&p, 500, 1, 0));
    ring_free(&p);
    let c = p.status().counters;
    assert_eq!(c.cancelled, 1);
    assert_eq!(c.failed, 0);
    assert_eq!(
        c.syntheses_requested, 5,
        "the cancelled job was never synthesized"
    );
    p.shutdown();
}

#[test]
fn cancelling_a_running_job_delivers_no_proof_frees_its_slots_and_the_next_job_is_fine() {
    let _g = serial();
    let p = start(None);
    let running = submit(&p, 600, 4, 0);
    // Wait until synth-proc has started on it.
    let deadline = Instant::now() + LIMIT;
    while p.status().counters.syntheses_started == 0 {
        assert!(Instant::now() < deadline, "synthesis never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    let c = p.cancel(running.id).unwrap();
    assert!(c.was_running);
    cancelled(running);
    ring_free(&p);
    let next = submit(&p, 700, 2, 0);
    proved(next);
    ring_free(&p);
    let s = p.status();
    assert_eq!((s.counters.cancelled, s.counters.failed), (1, 0));
    assert_eq!(
        s.counters.mismatched_results, 0,
        "late results are not refusals"
    );
    // What synth-proc still held of the cancelled job counted against the bound.
    assert!(
        s.counters.synth_outstanding_max <= 2,
        "{}",
        s.counters.synth_outstanding_max
    );
    assert_eq!(s.counters.synth_outstanding, 0);
    assert!(s.jobs.is_empty(), "{:?}", s.jobs);
    p.shutdown();
}

#[test]
fn cancelling_an_unknown_or_finished_job_is_an_error() {
    let _g = serial();
    let p = start(None);
    assert!(matches!(
        p.cancel(9999),
        Err(PipelineError::UnknownJob(9999))
    ));
    let h = submit(&p, 800, 1, 0);
    let id = h.id;
    proved(h);
    assert!(matches!(p.cancel(id), Err(PipelineError::UnknownJob(i)) if i == id));
    assert!(matches!(
        p.submit_job_with(
            CIRCUIT.parse().unwrap(),
            &kernels::job::BuiltinRequest {
                seed: 1,
                partitions: 1
            }
            .to_bytes(),
            JobOptions {
                priority: 9,
                ..Default::default()
            }
        ),
        Err(PipelineError::BadPriority(9))
    ));
    p.shutdown();
}

/// Polls `what` until it holds, at most [`LIMIT`].
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + LIMIT;
    while !cond() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn synth_proc_drops_the_partitions_of_a_cancelled_job_it_has_not_started() {
    let _g = serial();
    let p = start(None);
    // The GPUs stop claiming: a two-partition job fills both slots, and the next job's
    // partitions wait at synth-proc for a free slot.
    p.pause_gpus(Duration::from_secs(60)).unwrap();
    let first = submit(&p, 1000, 2, 0);
    until("both slots READY", || p.ring().counts().ready == 2);
    let blocked = submit(&p, 1100, 3, 0);
    assert_eq!(p.status().counters.synth_outstanding, 2);
    let c = p.cancel(blocked.id).unwrap();
    assert!(c.was_running);
    cancelled(blocked);
    // synth-proc answers for both while the GPUs are still paused: nothing was synthesized.
    until("synth-proc gave back the cancelled partitions", || {
        p.status().counters.synth_outstanding == 0
    });
    p.resume_gpus().unwrap();
    proved(first);
    proved(submit(&p, 1200, 1, 0));
    ring_free(&p);
    let c = p.status().counters;
    assert_eq!(
        c.syntheses_started, 3,
        "the cancelled job's partitions were never synthesized"
    );
    assert_eq!(c.failed, 0);
    p.shutdown();
}
