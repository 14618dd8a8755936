//! The timeline and report path as the bench uses it: events from several processes arriving
//! out of order, a TIMELINE log written and read back, statistics, the table, the JSON rows, the
//! trace and both waterfalls.

use shm_protocol::control::{EventKind, TimelineEvent};
use splitprover_bench::report::{ratio_line, render_table, rows_to_json, BenchRow, TimelineStats};
use splitprover_bench::timeline::Timeline;

const SYNTH: u32 = 100;
const SYNTH_RESTARTED: u32 = 101;
const GPU: u32 = 200;
const LAUNCHER: u32 = 1;

fn ev(kind: EventKind, job: u64, slot: u32, pid: u32, t_ms: u64) -> TimelineEvent {
    // Offset like a real monotonic clock: relative times must not depend on it.
    TimelineEvent {
        kind,
        job_id: job,
        partition: 0,
        slot,
        pid,
        tid: 0,
        t_ns: 5_000_000_000 + t_ms * 1_000_000,
    }
}

/// Four jobs through a split pipeline: two synthesized at a time, each synthesis 100 ms, the GPU
/// proving one at a time for 40 ms; synth-proc is killed during job 3's first attempt.
fn split_run() -> (Vec<TimelineEvent>, Vec<TimelineEvent>, Vec<TimelineEvent>) {
    use EventKind::*;
    let mut synth = Vec::new();
    let mut gpu = Vec::new();
    let mut launcher = Vec::new();
    let plan = [
        // job, slot, synth pid, synth start, gpu start
        (0, 0, SYNTH, 0, 100),
        (1, 1, SYNTH, 0, 140),
        (2, 0, SYNTH, 140, 240),
        (3, 1, SYNTH_RESTARTED, 300, 400),
    ];
    synth.push(ev(SynthStart, 3, 1, SYNTH, 180)); // the attempt that dies
    for (job, slot, pid, s, g) in plan {
        synth.push(ev(SynthStart, job, slot, pid, s));
        synth.push(ev(SynthEnd, job, slot, pid, s + 100));
        synth.push(ev(SlotPublish, job, slot, pid, s + 100));
        gpu.push(ev(GpuClaim, job, slot, GPU, g));
        gpu.push(ev(GpuStart, job, slot, GPU, g));
        gpu.push(ev(GpuEnd, job, slot, GPU, g + 40));
        launcher.push(ev(ProofDone, job, slot, LAUNCHER, g + 41));
    }
    (synth, gpu, launcher)
}

#[test]
fn a_split_run_measured_end_to_end() {
    let (synth, gpu, launcher) = split_run();
    // The launcher receives the streams in whatever order the channels deliver them.
    let mut timeline = Timeline::new();
    timeline.extend(gpu);
    for e in launcher {
        timeline.push(e);
    }
    timeline.extend(synth);
    assert!(timeline.events().windows(2).all(|w| w[0].t_ns <= w[1].t_ns));

    let mut log = Vec::new();
    timeline.write_log(&mut log).unwrap();
    let log = String::from_utf8(log).unwrap();
    assert_eq!(log.lines().count(), timeline.len());
    let back = Timeline::parse_log(&log).unwrap();
    assert_eq!(back, timeline);

    let s = TimelineStats::from_timeline(&back);
    assert_eq!(s.proofs, 4);
    assert_eq!((s.syntheses_started, s.syntheses), (5, 4));
    // Wall: first SYNTH_START (0) → last PROOF_DONE (441 ms).
    assert!((s.wall_s - 0.441).abs() < 1e-9);
    assert!((s.s_per_proof.unwrap() - 0.441 / 4.0).abs() < 1e-9);
    // GPU: 100–180 merged (two back-to-back proofs), 240–280, 400–440; gaps 60 and 120 ms.
    assert!((s.gpu_busy_s - 0.160).abs() < 1e-9);
    assert!((s.gpu_span_s - 0.340).abs() < 1e-9);
    assert_eq!(s.idle_gaps.count, 2);
    assert!((s.idle_gaps.max_s.unwrap() - 0.120).abs() < 1e-9);
    assert!((s.idle_gaps.mean_s.unwrap() - 0.090).abs() < 1e-9);
    assert!((s.mean_gpu_s.unwrap() - 0.040).abs() < 1e-9);
    assert!((s.mean_synth_s.unwrap() - 0.100).abs() < 1e-9);
    // Ring waits 0, 40, 0, 0 ms.
    assert!((s.mean_ring_wait_s.unwrap() - 0.010).abs() < 1e-9);

    let split = BenchRow::from_stats("gpu 2 cores / synth 14", "split", &s);
    let synth_cap = BenchRow {
        proofs_per_s: Some(10.0),
        ..BenchRow::from_stats("14 cores", "synth-only", &s)
    };
    let table = render_table(&[split.clone(), synth_cap.clone()]);
    assert!(
        table
            .lines()
            .nth(2)
            .unwrap()
            .starts_with("gpu 2 cores / synth 14  split"),
        "{table}"
    );
    let json = rows_to_json(std::slice::from_ref(&split));
    assert_eq!(json[0]["proofs"], 4);
    assert!(ratio_line(&split, &[synth_cap]).starts_with("split / min(capacities) = 0.91"));

    let trace = back.chrome_trace();
    let events = trace["traceEvents"].as_array().unwrap();
    let pids: std::collections::BTreeSet<u64> = events
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["pid"].as_u64().unwrap())
        .collect();
    // Both synth-procs, the gpu-proc and the ring pseudo-process.
    assert_eq!(
        pids,
        [0, SYNTH as u64, SYNTH_RESTARTED as u64, GPU as u64]
            .into_iter()
            .collect()
    );

    let svg = back.waterfall_svg();
    roxmltree::Document::parse(&svg).expect("the waterfall is well-formed XML");
    let ascii = back.ascii_waterfall(60);
    assert_eq!(
        ascii.lines().filter(|l| l.contains(" p0 |")).count(),
        4,
        "{ascii}"
    );
}
