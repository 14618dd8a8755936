//! Pre-compiled constraint systems through the split pipeline (real processes): synth-proc
//! synthesizes through matrices the launcher recorded, cached and shared in a sealed memfd;
//! every proof is verified by the launcher; a damaged cache file is recorded again; matrices
//! over the budget fall back to the full synthesis; a restarted synth-proc maps them again.

mod common;
use common::{cli, pipeline_settings, serial};

use std::time::Duration;

use launcher::pipeline::child::{kill, Role};
use launcher::pipeline::{Pipeline, PipelineSettings};
use launcher::r1cs::SynthesisSettings;

fn settings(circuit: &str, cache: &std::path::Path) -> PipelineSettings {
    let mut s = pipeline_settings(circuit);
    s.synthesis = SynthesisSettings {
        precompiled: true,
        cache_dir: Some(cache.to_owned()),
        budget_bytes: 1 << 30,
        worker_bytes: launcher::r1cs::DEFAULT_WORKER_BYTES,
        witness_slots: false,
    };
    s
}

/// Runs `jobs` jobs of `partitions` partitions on `p`; every one must succeed (the launcher
/// verified each partition's proof).
fn prove_all(p: &Pipeline, circuit: &str, jobs: u64, partitions: u32) {
    let handles: Vec<_> = (0..jobs)
        .map(|i| p.submit(circuit, 500 + i, partitions).unwrap())
        .collect();
    for h in handles {
        let o = h.wait().unwrap();
        let proofs = o
            .result
            .unwrap_or_else(|e| panic!("job {} failed: {e}", o.job_id));
        assert_eq!(proofs.len(), partitions as usize);
    }
}

fn plan(p: &Pipeline) -> String {
    let s = p.status();
    assert_eq!(s.synthesis.len(), 1, "{:?}", s.synthesis);
    let rendered = splitprover::commands::service::render_status(&s);
    assert!(rendered.contains("synthesis: "), "{rendered}");
    s.synthesis[0].1.clone()
}

fn synth_detail(p: &Pipeline) -> String {
    let s = p.status();
    s.children
        .iter()
        .find(|c| c.role == "synth-proc")
        .map(|c| c.detail.clone())
        .unwrap()
}

#[test]
fn the_pipeline_synthesizes_through_recorded_then_cached_matrices_and_every_proof_verifies() {
    let _g = serial();
    let cache = tempfile::tempdir().unwrap();
    let circuit = "sha-chain:1";

    // First start: recorded from the blank circuit, written to the cache.
    let p = Pipeline::start(settings(circuit, cache.path())).unwrap();
    p.wait_ready(Duration::from_secs(60)).unwrap();
    let first = plan(&p);
    assert!(
        first.starts_with("pre-compiled") && first.contains("recorded"),
        "{first}"
    );
    assert!(
        synth_detail(&p).contains("1 circuit(s) pre-compiled"),
        "{}",
        synth_detail(&p)
    );
    prove_all(&p, circuit, 3, 2);

    // synth-proc killed: the restarted one maps the same memfd again.
    let pid = p
        .status()
        .children
        .iter()
        .find(|c| c.role == "synth-proc")
        .and_then(|c| c.pid)
        .unwrap();
    kill(pid, libc::SIGKILL);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while p
        .status()
        .children
        .iter()
        .any(|c| c.role == Role::Synth.to_string() && (c.pid == Some(pid) || c.pid.is_none()))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "synth-proc did not restart"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    p.wait_ready(Duration::from_secs(60)).unwrap();
    assert!(
        synth_detail(&p).contains("1 circuit(s) pre-compiled"),
        "{}",
        synth_detail(&p)
    );
    prove_all(&p, circuit, 2, 1);
    p.shutdown();

    // Second start: read from the cache.
    let file = launcher::r1cs::cache_file(
        cache.path(),
        &circuit.parse().unwrap(),
        circuit
            .parse::<kernels::circuits::AnyCircuit>()
            .unwrap()
            .circuit_id()
            .unwrap(),
    );
    assert!(file.exists(), "{}", file.display());
    let p = Pipeline::start(settings(circuit, cache.path())).unwrap();
    p.wait_ready(Duration::from_secs(60)).unwrap();
    let second = plan(&p);
    assert!(second.contains("cached"), "{second}");
    prove_all(&p, circuit, 2, 1);
    p.shutdown();

    // A damaged cache file is recorded again (and the proofs still verify).
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 1;
    bytes[last / 2] ^= 0x10;
    std::fs::write(&file, &bytes).unwrap();
    let p = Pipeline::start(settings(circuit, cache.path())).unwrap();
    p.wait_ready(Duration::from_secs(60)).unwrap();
    let third = plan(&p);
    assert!(third.contains("recorded"), "{third}");
    prove_all(&p, circuit, 2, 1);
    p.shutdown();
    let reread = std::fs::read(&file).unwrap();
    assert_ne!(reread, bytes, "the damaged file was not replaced");
}

#[test]
fn matrices_over_the_budget_fall_back_to_the_full_synthesis_and_off_means_off() {
    let _g = serial();
    let cache = tempfile::tempdir().unwrap();
    let circuit = "pubinputs:3";
    let mut s = settings(circuit, cache.path());
    s.synthesis.budget_bytes = 4096;
    let p = Pipeline::start(s).unwrap();
    p.wait_ready(Duration::from_secs(60)).unwrap();
    let plan_over = plan(&p);
    assert!(
        plan_over.starts_with("full") && plan_over.contains("exceed the budget"),
        "{plan_over}"
    );
    assert!(
        !synth_detail(&p).contains("pre-compiled"),
        "{}",
        synth_detail(&p)
    );
    prove_all(&p, circuit, 2, 2);
    p.shutdown();

    let mut s = settings(circuit, cache.path());
    s.synthesis.precompiled = false;
    let p = Pipeline::start(s).unwrap();
    p.wait_ready(Duration::from_secs(60)).unwrap();
    let off = plan(&p);
    assert!(off.starts_with("full") && off.contains("off"), "{off}");
    prove_all(&p, circuit, 2, 2);
    p.shutdown();
    assert!(
        !launcher::r1cs::cache_file(
            cache.path(),
            &circuit.parse().unwrap(),
            circuit
                .parse::<kernels::circuits::AnyCircuit>()
                .unwrap()
                .circuit_id()
                .unwrap()
        )
        .exists(),
        "nothing was to be cached"
    );
}

#[test]
fn synth_bench_times_both_paths_and_says_they_agree() {
    let (code, out, err) = cli(
        &[
            "synth-bench",
            "pubinputs:3",
            "--iters",
            "1",
            "--threads",
            "1,2",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("both paths give the same bytes"), "{err}");
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("| pubinputs:3 |"))
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    let (code, _, err) = cli(&["synth-bench", "sha-chain:1", "--threads", "0"], &[]);
    assert_ne!(code, 0);
    assert!(err.contains("--threads"), "{err}");
}

#[test]
fn synth_bench_times_the_witness_pass_with_and_without_matrices() {
    for extra in [&[][..], &["--no-matrices"][..]] {
        let mut args = vec![
            "synth-bench",
            "sha-chain:1",
            "--profile",
            "witness",
            "--iters",
            "1",
        ];
        args.extend_from_slice(extra);
        let (code, out, err) = cli(&args, &[]);
        assert_eq!(code, 0, "{extra:?}: {err}");
        let line = out
            .lines()
            .find(|l| l.starts_with("sha-chain:1 witness: "))
            .unwrap_or_else(|| panic!("{extra:?}: {out}"));
        let kept = if extra.is_empty() {
            "packed"
        } else {
            "kept as field elements"
        };
        assert!(line.contains(kept), "{line}");
    }
    let (code, _, err) = cli(&["synth-bench", "sha-chain:1", "--no-matrices"], &[]);
    assert_ne!(code, 0);
    assert!(
        err.contains("--no-matrices goes with `--profile witness`"),
        "{err}"
    );
    let (code, _, err) = cli(&["synth-bench", "sha-chain:1", "--profile", "fast"], &[]);
    assert_ne!(code, 0);
    assert!(err.contains("--profile"), "{err}");
}

#[test]
fn witness_slots_carry_the_witness_alone_and_every_proof_verifies() {
    let _g = serial();
    let cache = tempfile::tempdir().unwrap();
    let circuit = "sha-chain:1";
    let full = {
        let p = Pipeline::start(settings(circuit, cache.path())).unwrap();
        let bytes = p.status().slot_bytes;
        p.shutdown();
        bytes
    };
    let mut s = settings(circuit, cache.path());
    s.synthesis.witness_slots = true;
    let p = Pipeline::start(s).unwrap();
    p.wait_ready(Duration::from_secs(60)).unwrap();
    let witness = p.status().slot_bytes;
    eprintln!("slot bytes: full {full}, witness {witness}");
    // sha-chain's aux variables are nearly all bits: packed, the slot is a small part of a full
    // one (a, b, c and the assignment as field elements).
    assert!(
        witness * 8 < full,
        "witness slot {witness} B, full {full} B"
    );
    prove_all(&p, circuit, 3, 2);

    // gpu-proc killed: the restarted one is given the matrices again, after its SRS.
    let gpu = |p: &Pipeline| {
        p.status()
            .children
            .iter()
            .find(|c| c.role != Role::Synth.to_string())
            .and_then(|c| c.pid)
    };
    let pid = gpu(&p).unwrap();
    kill(pid, libc::SIGKILL);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while gpu(&p).is_none_or(|now| now == pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "gpu-proc did not restart"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    p.wait_ready(Duration::from_secs(60)).unwrap();
    prove_all(&p, circuit, 2, 2);
    let counters = p.status().counters;
    p.shutdown();
    assert_eq!(counters.failed, 0, "{counters:?}");
}
