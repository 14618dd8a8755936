//! Fault containment (issue 10) with real processes: a gpu-proc hung inside a proof, a partition
//! that kills gpu-proc every time, a panicking synthesis, a slot whose metadata names another
//! job, a frozen synth-proc, absurd client
//! sizes and request files, the sealed SRS. The faults are provoked through `SPLITPROVER_FAULT`
//! (`shm_protocol::fault`), which the test build of the children acts on.

mod common;
use common::{pipeline_settings, serial, srs_for};

use std::path::PathBuf;
use std::time::{Duration, Instant};

use launcher::pipeline::child::{kill, Role};
use launcher::pipeline::{ChildState, JobHandle, Pipeline, PipelineSettings};
use shm_protocol::fault::FAULT_ENV;

const CIRCUIT: &str = "sha-chain:1";

fn settings(fault: Option<&str>) -> PipelineSettings {
    let mut s = pipeline_settings(CIRCUIT);
    if let Some(f) = fault {
        s.child_env.push((FAULT_ENV.to_owned(), f.to_owned()));
    }
    s
}

fn start(s: PipelineSettings) -> Pipeline {
    let p = Pipeline::start(s).unwrap();
    p.wait_ready(Duration::from_secs(60)).unwrap();
    p
}

fn outcome(h: JobHandle, limit: Duration) -> Result<Vec<Vec<u8>>, String> {
    let id = h.id;
    h.wait_timeout(limit)
        .unwrap()
        .unwrap_or_else(|| panic!("job {id} got no outcome within {limit:?}"))
        .result
        .map_err(|e| e.to_string())
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

#[test]
fn a_gpu_proc_hung_inside_a_proof_is_killed_at_its_deadline_and_the_next_job_succeeds() {
    let _g = serial();
    // Job 1 is proved normally (its time measured); every proof of job 2 hangs forever while
    // the heartbeat thread keeps beating.
    let mut s = settings(Some("gpu-hang@job=2"));
    s.faults.deadline_floor = Duration::from_secs(2);
    s.faults.deadline_factor = 3.0;
    s.faults.first_proof_deadline = Duration::from_secs(120);
    s.heartbeat_timeout = Duration::from_secs(600);
    let p = start(s);
    outcome(p.submit(CIRCUIT, 1, 1).unwrap(), Duration::from_secs(120)).expect("job 1");
    let gpu = p.pids()[&Role::Gpu(0)];
    let t = Instant::now();
    let hung = p.submit(CIRCUIT, 2, 1).unwrap();
    assert_eq!(hung.id, 2);
    let e = outcome(hung, Duration::from_secs(120)).expect_err("job 2 hangs every time");
    assert!(
        e.contains("partition 0 failed 2 times") && e.contains("deadline"),
        "{e}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(60),
        "two deadlines of a few seconds took {:?}",
        t.elapsed()
    );
    let status = p.status();
    assert_eq!(status.counters.deadline_kills, 2, "{status:?}");
    assert_eq!(status.counters.hung_kills, 0, "the heartbeats kept coming");
    // The poison slot is gone from the ring; the next job is proved by a new gpu-proc.
    outcome(p.submit(CIRCUIT, 3, 1).unwrap(), Duration::from_secs(120)).expect("job 3");
    assert_ne!(p.pids()[&Role::Gpu(0)], gpu, "a new gpu-proc serves");
    let status = p.status();
    assert!(status.fatal.is_none(), "{status:?}");
    assert_eq!(status.slots.free, status.ring_slots, "{status:?}");
    p.shutdown();
}

#[test]
fn a_synthesis_stuck_past_its_deadline_kills_synth_proc_and_fails_its_job_after_k_attempts() {
    let _g = serial();
    let mut s = settings(Some("synth-hang@job=2"));
    s.faults.deadline_floor = Duration::from_secs(2);
    s.faults.deadline_factor = 3.0;
    s.faults.first_synthesis_deadline = Duration::from_secs(120);
    s.heartbeat_timeout = Duration::from_secs(600);
    let p = start(s);
    outcome(p.submit(CIRCUIT, 1, 1).unwrap(), Duration::from_secs(120)).expect("job 1");
    let e = outcome(p.submit(CIRCUIT, 2, 1).unwrap(), Duration::from_secs(120))
        .expect_err("job 2's synthesis hangs every time");
    assert!(
        e.contains("partition 0 failed 2 times")
            && e.contains("synth-proc ran past its deadline")
            && e.contains("while synthesizing it"),
        "{e}"
    );
    outcome(p.submit(CIRCUIT, 3, 1).unwrap(), Duration::from_secs(120)).expect("job 3");
    let status = p.status();
    assert_eq!(status.counters.deadline_kills, 2, "{status:?}");
    assert_eq!(status.counters.hung_kills, 0, "{status:?}");
    assert!(status.fatal.is_none(), "{status:?}");
    p.shutdown();
}

#[test]
fn a_partition_that_kills_gpu_proc_every_time_fails_its_job_after_k_attempts_only() {
    let _g = serial();
    let mut s = settings(Some("gpu-abort@partition=1"));
    s.faults.max_attempts = 3;
    s.slots = 2;
    let p = start(s);
    // Partition 1 of job 1 aborts gpu-proc whenever it is claimed.
    let poison = p.submit(CIRCUIT, 10, 2).unwrap();
    let e = outcome(poison, Duration::from_secs(120)).expect_err("partition 1 is poison");
    assert!(
        e.contains("partition 1 failed 3 times")
            && e.contains("attempt 3: gpu-proc[0] died (killed by signal 9) while proving it"),
        "{e}"
    );
    // The pipeline is not fatal, the slot is not proved again, the next jobs succeed.
    let handles: Vec<_> = (0..3)
        .map(|i| p.submit(CIRCUIT, 20 + i, 1).unwrap())
        .collect();
    for h in handles {
        outcome(h, Duration::from_secs(120)).expect("a job of partition 0 only");
    }
    let status = p.status();
    assert!(status.fatal.is_none(), "{status:?}");
    assert_eq!(status.counters.child_exits, 3, "{status:?}");
    assert_eq!(status.counters.failed_attempts, 3, "{status:?}");
    let gpu = status
        .children
        .iter()
        .find(|c| c.role == "gpu-proc[0]")
        .unwrap();
    assert_eq!(gpu.state, ChildState::Up, "{status:?}");
    assert_eq!(status.slots.ready + status.slots.claimed, 0, "{status:?}");
    p.shutdown();
}

#[test]
fn a_panicking_synthesis_fails_its_job_and_synth_proc_keeps_serving() {
    let _g = serial();
    let p = start(settings(Some("synth-panic@job=2")));
    outcome(p.submit(CIRCUIT, 1, 1).unwrap(), Duration::from_secs(120)).expect("job 1");
    let synth = p.pids()[&Role::Synth];
    let e = outcome(p.submit(CIRCUIT, 2, 2).unwrap(), Duration::from_secs(120))
        .expect_err("job 2 panics");
    assert!(e.contains("synthesis panicked"), "{e}");
    assert!(e.contains("fault injection"), "{e}");
    outcome(p.submit(CIRCUIT, 3, 1).unwrap(), Duration::from_secs(120)).expect("job 3");
    assert_eq!(
        p.pids()[&Role::Synth],
        synth,
        "synth-proc was not restarted"
    );
    let status = p.status();
    assert_eq!(status.counters.child_exits, 0, "{status:?}");
    // The panicking syntheses' slots went back to FREE.
    assert_eq!(status.slots.free, status.ring_slots, "{status:?}");
    p.shutdown();
}

#[test]
fn a_done_slot_whose_metadata_names_another_job_is_refused_and_its_partition_retried() {
    let _g = serial();
    // Every slot synth-proc fills for job 2 claims to belong to job 1,000,002: its proofs are
    // valid proofs of job 2's circuit, but the launcher must not take a child's word for whose
    // they are. Each such slot is refused, the partition that was published in it is
    // synthesized again, and after the attempts run out job 2 fails with the reasons.
    let p = start(settings(Some("synth-mislabel@job=2")));
    outcome(p.submit(CIRCUIT, 1, 1).unwrap(), Duration::from_secs(120)).expect("job 1");
    let e = outcome(p.submit(CIRCUIT, 2, 1).unwrap(), Duration::from_secs(120))
        .expect_err("job 2's slots are always refused");
    assert!(
        e.contains("partition 0 failed 2 times") && e.contains("job 1000002"),
        "{e}"
    );
    outcome(p.submit(CIRCUIT, 3, 1).unwrap(), Duration::from_secs(120)).expect("job 3");
    let status = p.status();
    assert_eq!(status.counters.mismatched_results, 2, "{status:?}");
    assert!(status.fatal.is_none(), "{status:?}");
    assert_eq!(status.slots.free, status.ring_slots, "{status:?}");
    p.shutdown();
}

#[test]
fn absurd_partition_counts_and_request_files_are_refused_at_once() {
    let _g = serial();
    let p = start(settings(None));
    let t = Instant::now();
    let e = p
        .submit(CIRCUIT, 1, 4_000_000_000)
        .err()
        .expect("4e9 partitions are refused");
    let msg = error_chain(&e);
    assert!(
        msg.contains("4000000000 partitions") && msg.contains("at most 4096"),
        "{msg}"
    );
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let real = dir.path().join("real.json");
    std::fs::write(&real, b"{}").unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    for (path, expect) in [
        (PathBuf::from("/dev/zero"), "a character device"),
        (fifo, "a FIFO"),
        (link, "a symbolic link"),
        (dir.path().to_owned(), "a directory"),
    ] {
        let e = p
            .submit_request(None, None, &path)
            .err()
            .unwrap_or_else(|| panic!("{} must be refused", path.display()));
        let msg = error_chain(&e);
        assert!(
            msg.contains(&path.display().to_string()) && msg.contains(expect),
            "{msg}"
        );
    }
    // Size is checked before reading.
    let big = dir.path().join("big");
    std::fs::write(&big, vec![b' '; 4096]).unwrap();
    let e = launcher::pipeline::read_request_file(&big, 100).unwrap_err();
    assert!(e.to_string().contains("4096 bytes"), "{e}");
    assert_eq!(
        launcher::pipeline::read_request_file(&real, 100).unwrap(),
        b"{}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "refusals took {:?}",
        t.elapsed()
    );
    // Still serving.
    outcome(p.submit(CIRCUIT, 5, 1).unwrap(), Duration::from_secs(120)).expect("a normal job");
    assert!(p.status().fatal.is_none());
    p.shutdown();
}

#[test]
fn a_frozen_synth_proc_with_thousands_of_requests_pending_does_not_block_status_or_submit() {
    let _g = serial();
    let mut s = settings(None);
    s.heartbeat_timeout = Duration::from_secs(600);
    // The hand-out to synth-proc is bounded (issue 11); a window far wider than synth-proc's
    // outbox still fills that queue, so requests that do not fit stay pending in the table.
    s.synth_lookahead = Some(5000);
    let p = start(s);
    let synth = p.pids()[&Role::Synth];
    kill(synth, libc::SIGSTOP);
    let mut handles = Vec::new();
    let mut slowest = Duration::ZERO;
    for i in 0..2000u64 {
        let t = Instant::now();
        handles.push(p.submit(CIRCUIT, 1000 + i, 1).unwrap());
        slowest = slowest.max(t.elapsed());
        if i % 100 == 99 {
            let t = Instant::now();
            let status = p.status();
            slowest = slowest.max(t.elapsed());
            assert_eq!(status.jobs.len() as u64, i + 1);
        }
    }
    assert!(
        slowest < Duration::from_secs(1),
        "a submit or status took {slowest:?} while synth-proc was frozen"
    );
    assert!(
        p.status().counters.sends_deferred > 0,
        "the queue filled up"
    );
    // Thawed, it serves again; then a stop fails what is left, cleanly.
    kill(synth, libc::SIGCONT);
    let first: Vec<_> = handles.drain(..3).collect();
    for h in first {
        outcome(h, Duration::from_secs(120)).expect("an early job");
    }
    p.shutdown();
    for h in handles {
        if let Err(e) = outcome(h, Duration::from_secs(5)) {
            assert!(e.contains("shut down"), "{e}");
        }
    }
}

#[test]
fn the_srs_memfd_is_sealed_against_writes() {
    use std::os::fd::AsRawFd;
    let spec: kernels::circuits::AnyCircuit = CIRCUIT.parse().unwrap();
    let shape = spec.shape().unwrap();
    let srs = launcher::srs::SharedSrs::load(
        &spec,
        spec.circuit_id().unwrap(),
        &shape,
        &srs_for(CIRCUIT),
        shm_protocol::HugePagePolicy::Plain,
    )
    .unwrap();
    assert!(srs.region.is_write_sealed());
    let fd = srs.region.fd().as_raw_fd();
    let len = srs.region.len();
    // SAFETY: pwrite of one byte from a live buffer to a descriptor we own.
    let wrote = unsafe { libc::pwrite(fd, b"x".as_ptr().cast(), 1, 0) };
    assert_eq!(wrote, -1, "write(2) to the SRS memfd must fail");
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::EPERM)
    );
    // SAFETY: a fresh mapping request; on success it is unmapped right away.
    let writable = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    assert_eq!(
        writable,
        libc::MAP_FAILED,
        "a writable shared mapping must be refused"
    );
    // SAFETY: as above, read-only.
    let readable = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    assert_ne!(readable, libc::MAP_FAILED, "read-only mapping works");
    // SAFETY: the mapping made just above, not used after.
    unsafe { libc::munmap(readable, len) };
    // The image still reads as a valid SRS.
    srs.view().unwrap();
}

#[test]
fn a_gpu_proc_that_cannot_restart_is_shown_down_and_the_other_takes_the_work() {
    use std::os::unix::fs::PermissionsExt;
    let _g = serial();
    // The children run through a wrapper that fails a gpu-proc's start (before it serves, as a
    // CUDA init error would) while the flag file exists.
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("broken");
    let wrapper = dir.path().join("splitprover-wrapper");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nif [ \"$1\" = gpu-proc ] && [ -e '{}' ]; then\n  echo 'simulated \
             device init failure' >&2\n  exit 3\nfi\nexec '{}' \"$@\"\n",
            flag.display(),
            env!("CARGO_BIN_EXE_splitprover")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut s = settings(None);
    s.program = wrapper;
    s.restart.max_quick_failures = 2;
    let cpus = launcher::pinning::CpuList::allowed().unwrap();
    s.synth_cpus = Some(cpus.clone());
    let mut second = s.gpus[0].clone();
    second.device = 1;
    s.gpus.push(second);
    for g in &mut s.gpus {
        g.cpus = Some(cpus.clone());
    }
    let p = start(s);
    let state = |p: &Pipeline, role: &str| {
        let status = p.status();
        status
            .children
            .iter()
            .find(|c| c.role == role)
            .map(|c| c.state.to_string())
            .unwrap()
    };
    let wait_state = |p: &Pipeline, role: &str, want: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while state(p, role) != want {
            assert!(
                Instant::now() < deadline,
                "{role} never became {want}: {:?}",
                p.status()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    std::fs::write(&flag, b"").unwrap();
    kill(p.pids()[&Role::Gpu(1)], libc::SIGKILL);
    wait_state(&p, "gpu-proc[1]", "down");
    let status = p.status();
    assert!(status.fatal.is_none(), "{status:?}");
    assert_eq!(state(&p, "gpu-proc[0]"), "up");
    let handles: Vec<_> = (0..3)
        .map(|i| p.submit(CIRCUIT, 60 + i, 1).unwrap())
        .collect();
    for h in handles {
        outcome(h, Duration::from_secs(120)).expect("gpu-proc[0] proves it");
    }
    // The fault clears: it comes back by itself.
    std::fs::remove_file(&flag).unwrap();
    wait_state(&p, "gpu-proc[1]", "up");
    outcome(p.submit(CIRCUIT, 70, 2).unwrap(), Duration::from_secs(120)).expect("both serve");
    p.shutdown();
}

#[test]
fn a_poison_slot_batched_with_another_job_fails_only_its_own_job() {
    let _g = serial();
    let mut s = settings(Some("gpu-abort@job=2"));
    s.gpus[0].batch = 2;
    s.slots = 2;
    let p = start(s);
    // Both jobs wait READY, so gpu-proc claims them in one batch, which job 2 kills.
    p.pause_gpus(Duration::from_secs(30)).unwrap();
    let innocent = p.submit(CIRCUIT, 1, 1).unwrap();
    let poison = p.submit(CIRCUIT, 2, 1).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while p.status().slots.ready < 2 {
        assert!(Instant::now() < deadline, "{:?}", p.status());
        std::thread::sleep(Duration::from_millis(20));
    }
    p.resume_gpus().unwrap();
    // Requeued slots are proved alone: job 1 succeeds on its second try, job 2 fails alone.
    outcome(innocent, Duration::from_secs(120)).expect("job 1 only shared a batch");
    let e = outcome(poison, Duration::from_secs(120)).expect_err("job 2 is poison");
    assert!(e.contains("partition 0 failed 2 times"), "{e}");
    let status = p.status();
    assert_eq!(status.counters.child_exits, 2, "{status:?}");
    assert!(status.fatal.is_none(), "{status:?}");
    p.shutdown();
}
