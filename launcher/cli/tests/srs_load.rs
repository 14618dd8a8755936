//! Loading and dropping a circuit's SRS while the pipeline serves (issue 11, cuzk's `PreloadSRS`
//! and `EvictSRS`), with real processes: what each process maps is read from
//! `/proc/<pid>/maps` and `/proc/<pid>/fd`, not taken from the pipeline's word.

mod common;
use common::{pipeline_settings, serial};

use std::time::{Duration, Instant};

use launcher::pipeline::child::{kill, Role};
use launcher::pipeline::{ChildState, Pipeline, PipelineError, SrsTier};

const CIRCUIT: &str = "sha-chain:1";

fn start() -> Pipeline {
    let mut s = pipeline_settings(CIRCUIT);
    s.slots = 2;
    let p = Pipeline::start(s).unwrap();
    p.wait_ready(Duration::from_secs(60)).unwrap();
    p
}

/// Mappings and open descriptors of an SRS memfd in process `pid` (`self` for the launcher,
/// which is this test process).
fn srs_refs(pid: &str) -> (usize, usize) {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mapped = maps
        .lines()
        .filter(|l| l.contains("memfd:splitprover-srs"))
        .count();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().contains("memfd:splitprover-srs"))
        .count();
    (mapped, fds)
}

fn gpu_pid(p: &Pipeline) -> String {
    p.pids()[&Role::Gpu(0)].to_string()
}

fn tier(p: &Pipeline) -> SrsTier {
    let lines = p.srs_status();
    assert_eq!(lines.len(), 1, "{lines:?}");
    lines[0].tier
}

fn prove_one(p: &Pipeline, seed: u64) {
    let outcome = p
        .submit(CIRCUIT, seed, 1)
        .unwrap()
        .wait_timeout(Duration::from_secs(120))
        .unwrap()
        .expect("the job finishes");
    // The pipeline verifies every proof before it delivers it (`verify` is on).
    let proofs = outcome.result.expect("the job is proved and verified");
    assert_eq!(proofs.len(), 1);
    assert_eq!(proofs[0].len(), 192);
}

#[test]
fn evict_unmaps_the_srs_everywhere_and_status_shows_it_cold() {
    let _g = serial();
    let p = start();
    let lines = p.srs_status();
    assert_eq!(lines.len(), 1);
    let line = &lines[0];
    assert_eq!(
        (line.circuit.as_str(), line.circuit_id.as_str()),
        (CIRCUIT, CIRCUIT)
    );
    assert_eq!((line.tier, line.ref_count), (SrsTier::Hot, 0));
    assert!(line.size_bytes > 0);
    let size = line.size_bytes;
    let gpu = gpu_pid(&p);
    assert_eq!(srs_refs(&gpu).0, 1, "gpu-proc maps the SRS at start");
    assert!(srs_refs("self").0 >= 1, "the launcher maps the SRS");
    assert_eq!(
        p.status().srs,
        p.srs_status(),
        "status carries the SRS lines"
    );

    let evicted = p.evict_srs(CIRCUIT).unwrap();
    assert!(evicted.was_loaded);
    assert_eq!(evicted.freed_bytes, size);
    let line = &p.srs_status()[0];
    assert_eq!((line.tier, line.size_bytes), (SrsTier::Cold, 0));
    assert_eq!(gpu_pid(&p), gpu, "the same gpu-proc, still serving");
    assert_eq!(
        srs_refs(&gpu),
        (0, 0),
        "gpu-proc holds no mapping or descriptor"
    );
    assert_eq!(srs_refs("self"), (0, 0), "the launcher's memfd is gone");

    let again = p.evict_srs(CIRCUIT).unwrap();
    assert_eq!((again.was_loaded, again.freed_bytes), (false, 0));
    p.shutdown();
}

#[test]
fn preload_makes_it_hot_and_a_second_preload_finds_it_loaded() {
    let _g = serial();
    let p = start();
    let first = p.preload_srs(CIRCUIT).unwrap();
    assert!(first.already_loaded, "loaded at start");
    let size = first.bytes;
    p.evict_srs(CIRCUIT).unwrap();
    assert_eq!(tier(&p), SrsTier::Cold);

    let loaded = p.preload_srs(CIRCUIT).unwrap();
    assert!(!loaded.already_loaded);
    assert_eq!(loaded.bytes, size);
    assert_eq!(tier(&p), SrsTier::Hot);
    assert_eq!(p.srs_status()[0].size_bytes, size);
    let gpu = gpu_pid(&p);
    assert_eq!(
        srs_refs(&gpu),
        (1, 1),
        "gpu-proc maps the image it was sent (its region keeps the descriptor)"
    );
    let again = p.preload_srs(CIRCUIT).unwrap();
    assert!(again.already_loaded);
    assert_eq!(again.bytes, size);
    assert_eq!(srs_refs(&gpu), (1, 1), "mapped once, not twice");
    prove_one(&p, 3);
    p.shutdown();
}

#[test]
fn a_job_after_an_evict_loads_the_srs_first_and_is_proved() {
    let _g = serial();
    let p = start();
    p.evict_srs(CIRCUIT).unwrap();
    assert_eq!(tier(&p), SrsTier::Cold);
    prove_one(&p, 11);
    assert_eq!(tier(&p), SrsTier::Hot);
    assert_eq!(srs_refs(&gpu_pid(&p)).0, 1);
    // A circuit the pipeline was not configured with stays an error, for jobs and SRS calls.
    let Err(e) = p.submit("sha-chain:2", 1, 1) else {
        panic!("a job of an unconfigured circuit is refused");
    };
    assert!(matches!(e, PipelineError::Unserved(_)), "{e}");
    let e = p.preload_srs("porep-32g").unwrap_err();
    assert!(matches!(e, PipelineError::UnknownSrs { .. }), "{e}");
    assert!(e.to_string().contains("`sha-chain:1`"), "{e}");
    p.shutdown();
}

#[test]
fn evict_is_refused_while_a_job_of_the_circuit_is_live() {
    let _g = serial();
    let p = start();
    // Paused gpu-procs keep the job live (synthesized, never proved) for as long as needed.
    p.pause_gpus(Duration::from_secs(30)).unwrap();
    let job = p.submit(CIRCUIT, 5, 1).unwrap();
    let e = p.evict_srs(CIRCUIT).unwrap_err();
    assert!(
        matches!(e, PipelineError::SrsInUse { jobs: 1, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("1 live job"), "{e}");
    let line = &p.srs_status()[0];
    assert_eq!((line.tier, line.ref_count), (SrsTier::Hot, 1));
    p.resume_gpus().unwrap();
    let outcome = job
        .wait_timeout(Duration::from_secs(120))
        .unwrap()
        .expect("the job finishes");
    outcome
        .result
        .expect("proved: the refused evict took nothing away");
    assert_eq!(p.srs_status()[0].ref_count, 0);
    assert!(p.evict_srs(CIRCUIT).unwrap().was_loaded);
    p.shutdown();
}

/// Waits until gpu-proc[0] is a process other than `old` and serving with the SRS in `want`.
fn wait_restarted(p: &Pipeline, old: &str, want: SrsTier) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let up =
            p.status().children.iter().any(|c| {
                c.role == "gpu-proc[0]" && c.state == ChildState::Up && !c.detail.is_empty()
            });
        if let Some(pid) = p.pids().get(&Role::Gpu(0)) {
            if pid.to_string() != old && up && tier(p) == want {
                return pid.to_string();
            }
        }
        assert!(
            Instant::now() < deadline,
            "gpu-proc did not come back: {:?}",
            p.status()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_gpu_proc_restarted_after_a_preload_or_an_evict_starts_with_the_srs_set_of_that_moment() {
    let _g = serial();
    let p = start();
    p.evict_srs(CIRCUIT).unwrap();
    let old = gpu_pid(&p);
    kill(old.parse().unwrap(), libc::SIGKILL);
    let gpu = wait_restarted(&p, &old, SrsTier::Cold);
    assert_eq!(srs_refs(&gpu), (0, 0), "started without the evicted SRS");

    assert!(!p.preload_srs(CIRCUIT).unwrap().already_loaded);
    kill(gpu.parse().unwrap(), libc::SIGKILL);
    let gpu = wait_restarted(&p, &gpu, SrsTier::Hot);
    assert_eq!(srs_refs(&gpu).0, 1, "started with the preloaded SRS mapped");
    prove_one(&p, 21);
    p.shutdown();
}

#[test]
fn a_preload_answers_only_once_every_serving_gpu_proc_mapped_it_and_is_warm_until_then() {
    let _g = serial();
    let p = start();
    p.evict_srs(CIRCUIT).unwrap();
    let gpu = gpu_pid(&p);
    // A stopped gpu-proc cannot answer (its heartbeat timeout is a minute away).
    kill(gpu.parse().unwrap(), libc::SIGSTOP);
    std::thread::scope(|scope| {
        let preload = scope.spawn(|| p.preload_srs(CIRCUIT));
        let deadline = Instant::now() + Duration::from_secs(60);
        while tier(&p) != SrsTier::Warm {
            assert!(Instant::now() < deadline, "{:?}", p.srs_status());
            std::thread::sleep(Duration::from_millis(10));
        }
        // In the launcher's memory, not yet mapped by the gpu-proc: the preload waits.
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !preload.is_finished(),
            "answered before the gpu-proc mapped it"
        );
        assert_eq!(tier(&p), SrsTier::Warm);
        assert_eq!(srs_refs(&gpu).0, 0);
        kill(gpu.parse().unwrap(), libc::SIGCONT);
        let loaded = preload.join().unwrap().unwrap();
        assert!(!loaded.already_loaded);
    });
    assert_eq!(tier(&p), SrsTier::Hot);
    assert_eq!(
        gpu_pid(&p),
        gpu,
        "the same process, which mapped it when it went on"
    );
    assert_eq!(srs_refs(&gpu).0, 1);
    prove_one(&p, 31);
    p.shutdown();
}
