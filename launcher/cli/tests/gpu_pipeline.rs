//! The GPU side of the pipeline with real processes (issue 11, items GetStatus and Priorities):
//! READY slots are claimed highest priority first, then oldest; `status` lists every gpu-proc
//! with its device, the job it proves now and its busy time.

mod common;
use common::{pipeline_settings, serial};

use std::time::{Duration, Instant};

use launcher::pipeline::child::{kill, Role};
use launcher::pipeline::{
    JobHandle, JobOptions, Pipeline, PipelineSettings, PipelineStatus, PRIORITY_CRITICAL,
};
use shm_protocol::control::EventKind;
use shm_protocol::fault::FAULT_ENV;

const CIRCUIT: &str = "sha-chain:1";
const LIMIT: Duration = Duration::from_secs(300);

/// One gpu-proc proving one slot per call, one synthesis at a time, a ring with room for all.
fn settings() -> PipelineSettings {
    let mut s = pipeline_settings(CIRCUIT);
    s.slots = 6;
    s.synth_concurrency = 1;
    assert_eq!(s.gpus.len(), 1);
    s.gpus[0].batch = 1;
    s
}

fn start(s: PipelineSettings) -> Pipeline {
    let p = Pipeline::start(s).unwrap();
    p.wait_ready(Duration::from_secs(120)).unwrap();
    p
}

fn submit(p: &Pipeline, seed: u64, priority: i32) -> JobHandle {
    let request = kernels::job::BuiltinRequest {
        seed,
        partitions: 1,
    };
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

/// Polls `status` until `done` holds for it.
fn wait_status(p: &Pipeline, what: &str, done: impl Fn(&PipelineStatus) -> bool) -> PipelineStatus {
    let deadline = Instant::now() + LIMIT;
    loop {
        let s = p.status();
        if done(&s) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: never happened; last status {s:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_critical_ready_slot_is_claimed_before_older_normal_ones() {
    let _g = serial();
    let p = start(settings());
    p.pause_gpus(Duration::from_secs(60)).unwrap();
    // Four NORMAL jobs synthesized while no GPU claims: four READY slots, oldest first.
    let normal: Vec<JobHandle> = (0..4).map(|i| submit(&p, 100 + i, 0)).collect();
    wait_status(&p, "4 READY slots", |s| s.slots.ready == 4);
    // Then a CRITICAL one, published last.
    let critical = submit(&p, 900, PRIORITY_CRITICAL);
    wait_status(&p, "5 READY slots", |s| s.slots.ready == 5);
    let critical_id = critical.id;
    let normal_ids: Vec<u64> = normal.iter().map(|h| h.id).collect();
    p.resume_gpus().unwrap();
    proved(critical);
    for h in normal {
        proved(h);
    }
    let starts: Vec<u64> = p
        .take_timeline()
        .into_iter()
        .filter(|e| e.kind == EventKind::GpuStart)
        .map(|e| e.job_id)
        .collect();
    // The CRITICAL partition overtakes every NORMAL one at the claim; NORMAL ones stay FIFO.
    let mut want = vec![critical_id];
    want.extend(&normal_ids);
    assert_eq!(starts, want, "GPU_START order by job");
    p.shutdown();
}

#[test]
fn status_lists_each_gpu_with_its_device_current_job_and_busy_time() {
    let _g = serial();
    let mut s = settings();
    // Job 2 hangs inside its proof (the heartbeat goes on), so it stays current; no deadline
    // kills it while the test looks.
    s.child_env
        .push((FAULT_ENV.to_owned(), "gpu-hang@job=2".to_owned()));
    s.faults.deadline_floor = Duration::from_secs(3600);
    s.faults.first_proof_deadline = Duration::from_secs(3600);
    let p = start(s);

    let first = submit(&p, 1, 0);
    assert_eq!(first.id, 1, "the fault names job 2: ids start at 1");
    proved(first);
    let st = p.status();
    assert_eq!(st.gpus.len(), 1, "{:?}", st.gpus);
    let g = &st.gpus[0];
    assert_eq!((g.ordinal, g.role.as_str()), (0, "gpu-proc[0]"));
    assert!(
        g.name.starts_with("CPU backend (") && g.name.ends_with(" threads)"),
        "{}",
        g.name
    );
    assert_eq!((g.vram_total_bytes, g.vram_free_bytes), (0, 0));
    assert_eq!(
        g.srs_device_bytes, 0,
        "the CPU backend keeps no SRS on a device"
    );
    assert_eq!(g.current_job, None, "idle after its batch");
    assert!(g.busy_ns > 0, "job 1 was proved: {g:?}");
    let busy = g.busy_ns;
    let rendered = splitprover::commands::service::render_status(&st);
    assert!(rendered.contains("CPU backend ("), "{rendered}");

    let hanging = submit(&p, 2, 0);
    assert_eq!(hanging.id, 2);
    let st = wait_status(&p, "job 2 on the GPU", |s| {
        s.gpus.first().and_then(|g| g.current_job) == Some(2)
    });
    let g = &st.gpus[0];
    assert_eq!(g.current_circuit.as_deref(), Some(CIRCUIT));
    assert_eq!(g.busy_ns, busy, "a batch counts once it ends");
    let rendered = splitprover::commands::service::render_status(&st);
    assert!(
        rendered.contains("proving job 2 (sha-chain:1)"),
        "{rendered}"
    );

    // Clean up: the hung gpu-proc would only go after the shutdown's grace.
    p.cancel(2).unwrap();
    if let Some(&pid) = p.pids().get(&Role::Gpu(0)) {
        kill(pid, libc::SIGKILL);
    }
    drop(hanging);
    p.shutdown();
}
