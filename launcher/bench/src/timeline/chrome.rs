//! The Chrome/Perfetto trace view ([`Timeline::chrome_trace`]).

use std::collections::BTreeMap;

use serde_json::{json, Value};
use shm_protocol::control::EventKind;

use super::{Span, SynthPhases, Timeline, NO_SLOT};

const SYNTH_TID_BASE: u64 = 1;
const GPU_TID: u64 = 0;
/// Lanes of ring waits with no slot start here (slot lanes use the slot index as tid); trace
/// viewers read tids as 32-bit integers, so stay well below that.
const QUEUE_TID_BASE: u64 = 1 << 20;
const RING_PID: u32 = 0;

impl Timeline {
    /// The timeline as a Chrome/Perfetto trace (`{"traceEvents": [...]}`; open it in
    /// `ui.perfetto.dev` or `chrome://tracing`).
    ///
    /// Synthesis intervals are `X` events on lanes of their process, one lane per concurrent
    /// worker (intervals packed greedily onto the lowest free lane); GPU batches are `X` events on
    /// a `gpu` lane of their process; ring waits are on a separate `ring` process (pid 0) with one
    /// lane per slot (or packed lanes where no slot is known); `PROOF_DONE` is an instant `i`.
    /// Processes and lanes are named with `M` metadata events. Timestamps are microseconds since
    /// the first event.
    pub fn chrome_trace(&self) -> Value {
        let t0 = self.first_ns().unwrap_or(0);
        let us = |t: u64| (t.saturating_sub(t0)) as f64 / 1e3;
        let iv = self.intervals();
        let mut trace = Vec::new();

        // Name every process after what it recorded.
        let mut roles: BTreeMap<u32, (bool, bool)> = BTreeMap::new();
        for e in &self.events {
            let r = roles.entry(e.pid).or_default();
            match e.kind {
                EventKind::SynthTaken
                | EventKind::SynthStart
                | EventKind::WitnessEnd
                | EventKind::SynthEnd
                | EventKind::SlotPublish => r.0 = true,
                EventKind::GpuClaim | EventKind::GpuStart | EventKind::GpuEnd => r.1 = true,
                // The launcher's own events.
                EventKind::JobQueued | EventKind::SynthHandout | EventKind::ProofDone => {}
            }
        }
        for (&pid, &(synth, gpu)) in &roles {
            let role = match (synth, gpu) {
                (true, true) => "in-process prover",
                (true, false) => "synth-proc",
                (false, true) => "gpu-proc",
                (false, false) => "launcher",
            };
            trace.push(meta("process_name", pid, 0, &format!("{role} (pid {pid})")));
        }

        // Synthesis: lanes per process.
        let mut by_pid: BTreeMap<u32, Vec<Span>> = BTreeMap::new();
        let mut phases: BTreeMap<u32, Vec<SynthPhases>> = BTreeMap::new();
        for (s, p) in iv.synth.iter().zip(&iv.phases) {
            by_pid.entry(s.pid).or_default().push(*s);
            phases.entry(s.pid).or_default().push(*p);
        }
        for (pid, spans) in by_pid {
            let lanes = pack_lanes(&spans);
            let mut named = vec![false; lanes.iter().max().map_or(0, |m| m + 1)];
            let ms = |ns: Option<u64>| ns.map(|ns| ns as f64 / 1e6);
            for ((s, lane), p) in spans.iter().zip(lanes).zip(&phases[&pid]) {
                let tid = SYNTH_TID_BASE + lane as u64;
                if !named[lane] {
                    named[lane] = true;
                    trace.push(meta(
                        "thread_name",
                        pid,
                        tid,
                        &format!("synth worker {lane}"),
                    ));
                }
                trace.push(json!({
                    "name": format!("synth j{} p{}", s.job_id, s.partition),
                    "cat": "synth", "ph": "X", "pid": pid, "tid": tid,
                    "ts": us(s.start_ns), "dur": s.duration_ns() as f64 / 1e3,
                    "args": {"job": s.job_id, "partition": s.partition, "thread": p.tid,
                             "slot_wait_ms": ms(p.slot_wait_ns()),
                             "witness_ms": ms(p.witness_ns()),
                             "products_ms": ms(p.products_ns())},
                }));
            }
        }

        // GPU batches: one lane per GPU process.
        let mut gpu_named = std::collections::BTreeSet::new();
        for b in &iv.batches {
            if gpu_named.insert(b.pid) {
                trace.push(meta("thread_name", b.pid, GPU_TID, "gpu"));
            }
            let members: Vec<String> = b
                .members
                .iter()
                .map(|(j, p)| format!("j{j} p{p}"))
                .collect();
            trace.push(json!({
                "name": format!("gpu batch of {}", b.members.len()),
                "cat": "gpu", "ph": "X", "pid": b.pid, "tid": GPU_TID,
                "ts": us(b.start_ns), "dur": b.duration_ns() as f64 / 1e3,
                "args": {"partitions": members},
            }));
        }

        // Ring waits: a lane per slot, packed lanes for waits with no slot.
        if !iv.ring_wait.is_empty() {
            trace.push(meta(
                "process_name",
                RING_PID,
                0,
                "ring (waiting for the gpu)",
            ));
            let (slotted, free): (Vec<Span>, Vec<Span>) =
                iv.ring_wait.iter().partition(|s| s.slot != NO_SLOT);
            let mut slot_named = std::collections::BTreeSet::new();
            let mut lane_of = Vec::with_capacity(iv.ring_wait.len());
            for s in &slotted {
                let tid = u64::from(s.slot).min(QUEUE_TID_BASE - 1);
                if slot_named.insert(s.slot) {
                    trace.push(meta(
                        "thread_name",
                        RING_PID,
                        tid,
                        &format!("slot {}", s.slot),
                    ));
                }
                lane_of.push((*s, tid));
            }
            let lanes = pack_lanes(&free);
            let mut named = vec![false; lanes.iter().max().map_or(0, |m| m + 1)];
            for (s, lane) in free.iter().zip(lanes) {
                let tid = QUEUE_TID_BASE + lane as u64;
                if !named[lane] {
                    named[lane] = true;
                    trace.push(meta("thread_name", RING_PID, tid, &format!("queue {lane}")));
                }
                lane_of.push((*s, tid));
            }
            for (s, tid) in lane_of {
                trace.push(json!({
                    "name": format!("wait j{} p{}", s.job_id, s.partition),
                    "cat": "ring", "ph": "X", "pid": RING_PID, "tid": tid,
                    "ts": us(s.start_ns), "dur": s.duration_ns() as f64 / 1e3,
                    "args": {"job": s.job_id, "partition": s.partition},
                }));
            }
        }

        for e in self
            .events
            .iter()
            .filter(|e| e.kind == EventKind::ProofDone)
        {
            trace.push(json!({
                "name": format!("proof j{} p{}", e.job_id, e.partition),
                "cat": "proof", "ph": "i", "s": "p", "pid": e.pid, "tid": GPU_TID,
                "ts": us(e.t_ns),
                "args": {"job": e.job_id, "partition": e.partition},
            }));
        }
        json!({ "traceEvents": trace, "displayTimeUnit": "ms" })
    }
}

fn meta(name: &str, pid: u32, tid: u64, value: &str) -> Value {
    json!({ "name": name, "ph": "M", "pid": pid, "tid": tid, "args": { "name": value } })
}

/// Packs intervals onto lanes so that no two overlapping ones share a lane; returns each
/// interval's lane (the lowest free one when it starts).
fn pack_lanes(spans: &[Span]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by_key(|&i| (spans[i].start_ns, spans[i].end_ns));
    let mut lane_end: Vec<u64> = Vec::new();
    let mut lanes = vec![0; spans.len()];
    for i in order {
        let s = &spans[i];
        let lane = match lane_end.iter().position(|&end| end <= s.start_ns) {
            Some(l) => l,
            None => {
                lane_end.push(0);
                lane_end.len() - 1
            }
        };
        lane_end[lane] = s.end_ns;
        lanes[i] = lane;
    }
    lanes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::tests::sample;

    #[test]
    fn chrome_trace_has_lanes_batches_and_names() {
        let v = sample().chrome_trace();
        let evs = v["traceEvents"].as_array().unwrap();
        let by = |ph: &str, cat: &str| -> Vec<&Value> {
            evs.iter()
                .filter(|e| e["ph"] == ph && (cat.is_empty() || e["cat"] == cat))
                .collect()
        };
        // Two syntheses overlap in pid 10: two worker lanes; the third reuses lane 0.
        let synth = by("X", "synth");
        assert_eq!(synth.len(), 3);
        let tids: Vec<u64> = synth.iter().map(|e| e["tid"].as_u64().unwrap()).collect();
        assert_eq!(
            tids.iter().collect::<std::collections::BTreeSet<_>>().len(),
            2
        );
        let gpu = by("X", "gpu");
        assert_eq!(gpu.len(), 2);
        assert_eq!(gpu[0]["pid"], 20);
        assert_eq!(gpu[0]["ts"].as_f64().unwrap(), 130_000.0);
        assert_eq!(gpu[0]["dur"].as_f64().unwrap(), 40_000.0);
        assert_eq!(gpu[0]["args"]["partitions"].as_array().unwrap().len(), 2);
        assert_eq!(by("X", "ring").len(), 3);
        assert_eq!(by("i", "proof").len(), 3);
        let names: Vec<&str> = by("M", "")
            .iter()
            .filter(|e| e["name"] == "process_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"synth-proc (pid 10)"), "{names:?}");
        assert!(names.contains(&"gpu-proc (pid 20)"), "{names:?}");
        assert!(names.contains(&"launcher (pid 1)"), "{names:?}");
        // Timestamps are relative to the first event.
        assert_eq!(synth[0]["ts"].as_f64().unwrap(), 0.0);
        // It is plain JSON.
        let text = serde_json::to_string(&v).unwrap();
        assert!(serde_json::from_str::<Value>(&text).is_ok());
    }
}
