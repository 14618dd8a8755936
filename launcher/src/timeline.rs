//! The proof timeline: events from every process, and the views made from them.
//!
//! Every process of a run records [`TimelineEvent`]s (`SYNTH_START`, `SYNTH_END`, `SLOT_PUBLISH`,
//! `GPU_CLAIM`, `GPU_START`, `GPU_END`, `PROOF_DONE`) stamped with `CLOCK_MONOTONIC`, which is one
//! clock for all processes of a host. The launcher collects them into a [`Timeline`] and renders:
//!
//! - a `TIMELINE` log, one line per event ([`Timeline::write_log`], read back by
//!   [`Timeline::parse_log`]);
//! - a Chrome/Perfetto trace ([`Timeline::chrome_trace`]) with a lane per synthesis worker, per GPU
//!   process and per ring slot;
//! - a waterfall image ([`Timeline::waterfall_svg`]) and its terminal version
//!   ([`Timeline::ascii_waterfall`]): one row per (job, partition) showing synthesis, the wait in
//!   the ring and the GPU.
//!
//! The statistics made from the same intervals live in [`crate::report`].
//!
//! # Pairing rules
//!
//! [`Timeline::intervals`] turns events into intervals per (job, partition), in time order:
//! a start opens an interval and the next matching end closes it. A start that is followed by
//! another start of the same kind (a partition retried after its process died) is abandoned: the
//! retry is counted as a second attempt, only completed intervals have a duration. An end with no
//! open start is counted in [`Intervals::unpaired_ends`] and otherwise ignored, so partial or odd
//! timelines never panic. A ring wait runs from `SLOT_PUBLISH` to the next `GPU_CLAIM`; a claim
//! stamped up to [`CLAIM_SKEW_NS`] before its publish (the two come from different processes)
//! counts as a zero wait, and a claim with no publish (a re-claim after a restart) ends nothing.
//!
//! ```
//! use launcher::timeline::Timeline;
//! use shm_protocol::control::{EventKind, TimelineEvent};
//!
//! let ev = |kind, t_ns| TimelineEvent { kind, job_id: 1, partition: 0, slot: 0, pid: 7, t_ns };
//! let mut t = Timeline::new();
//! t.extend([
//!     ev(EventKind::SynthStart, 0),
//!     ev(EventKind::SynthEnd, 2_000_000),
//!     ev(EventKind::GpuStart, 2_500_000),
//!     ev(EventKind::GpuEnd, 3_000_000),
//!     ev(EventKind::ProofDone, 3_100_000),
//! ]);
//! let mut log = Vec::new();
//! t.write_log(&mut log).unwrap();
//! let back = Timeline::parse_log(std::str::from_utf8(&log).unwrap()).unwrap();
//! assert_eq!(back.events(), t.events());
//! assert!(t.ascii_waterfall(40).contains("GPU busy"));
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::{self, Write};

use serde_json::{json, Value};
use shm_protocol::control::{EventKind, TimelineEvent};

/// Every event kind, in the order of a proof's path.
pub const ALL_KINDS: [EventKind; 7] = [
    EventKind::SynthStart,
    EventKind::SynthEnd,
    EventKind::SlotPublish,
    EventKind::GpuClaim,
    EventKind::GpuStart,
    EventKind::GpuEnd,
    EventKind::ProofDone,
];

/// The `slot` value of an event that involves no ring slot.
pub const NO_SLOT: u32 = u32::MAX;

/// A `GPU_CLAIM` stamped at most this long before the `SLOT_PUBLISH` of the same partition is
/// paired with it as a zero wait: a producer that stamps the publish after making the slot
/// READY can be overtaken by the consumer's stamp.
pub const CLAIM_SKEW_NS: u64 = 10_000_000;

/// Rows drawn at most by [`Timeline::ascii_waterfall`]; the rest are summarised in one line.
pub const ASCII_MAX_ROWS: usize = 48;

/// Parses a kind from its `TIMELINE` log name (`SYNTH_START`, ...).
pub fn kind_from_str(name: &str) -> Option<EventKind> {
    ALL_KINDS.into_iter().find(|k| k.as_str() == name)
}

/// A `TIMELINE` log line that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("timeline log line {line}: {kind}")]
pub struct ParseError {
    /// 1-based line number in the log.
    pub line: usize,
    /// What was wrong with it.
    pub kind: ParseErrorKind,
}

/// What was wrong with a `TIMELINE` log line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// The word after `TIMELINE` is not an event kind.
    #[error("unknown event kind `{0}`")]
    UnknownKind(String),
    /// A `key=value` field is missing.
    #[error("missing field `{0}`")]
    MissingField(&'static str),
    /// A field's value is not a number (or `-` for `slot`).
    #[error("bad value `{value}` for field `{field}`")]
    BadValue {
        /// Field name.
        field: &'static str,
        /// The text found.
        value: String,
    },
}

/// Events from all processes of a run, kept sorted by `t_ns`; events with the same time are
/// ordered along a proof's path ([`ALL_KINDS`] order: a `SLOT_PUBLISH` before the `GPU_CLAIM`
/// stamped in the same nanosecond by another process), then by arrival.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timeline {
    events: Vec<TimelineEvent>,
}

/// A closed interval of one (job, partition): synthesis, ring wait or GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Job id.
    pub job_id: u64,
    /// Partition index.
    pub partition: u32,
    /// Slot of the closing event ([`NO_SLOT`] where none).
    pub slot: u32,
    /// Process that recorded the opening event.
    pub pid: u32,
    /// Start, monotonic ns.
    pub start_ns: u64,
    /// End, monotonic ns (never before `start_ns`).
    pub end_ns: u64,
}

impl Span {
    /// Length in nanoseconds.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }

    /// Length in seconds.
    pub fn duration_s(&self) -> f64 {
        ns_to_s(self.duration_ns())
    }
}

/// Partitions proved together: GPU spans of one process with the same start and end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuBatch {
    /// The GPU process.
    pub pid: u32,
    /// Start, monotonic ns.
    pub start_ns: u64,
    /// End, monotonic ns.
    pub end_ns: u64,
    /// (job, partition) of every member, in event order.
    pub members: Vec<(u64, u32)>,
}

impl GpuBatch {
    /// Length in nanoseconds.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

/// The intervals of a timeline (see the module's pairing rules).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Intervals {
    /// (job, partition) keys in order of their first event: the waterfall's rows.
    pub rows: Vec<(u64, u32)>,
    /// Completed syntheses.
    pub synth: Vec<Span>,
    /// `SYNTH_START` events, completed or not (a retried partition counts twice).
    pub synth_started: usize,
    /// Time in the ring: `SLOT_PUBLISH` → the next `GPU_CLAIM`.
    pub ring_wait: Vec<Span>,
    /// Completed GPU intervals, one per partition (members of a batch share start and end).
    pub gpu: Vec<Span>,
    /// GPU batches, in start order.
    pub batches: Vec<GpuBatch>,
    /// `PROOF_DONE` events, the first one per (job, partition).
    pub proofs_done: Vec<TimelineEvent>,
    /// End events with no open start (ignored otherwise).
    pub unpaired_ends: usize,
}

impl Timeline {
    /// An empty timeline.
    pub fn new() -> Self {
        Self::default()
    }

    /// A timeline holding `events` (in any order).
    pub fn from_events(events: impl IntoIterator<Item = TimelineEvent>) -> Self {
        let mut t = Self::new();
        t.extend(events);
        t
    }

    /// Adds one event at its place in time order (cheap when events arrive roughly in order).
    pub fn push(&mut self, event: TimelineEvent) {
        let key = order_key(&event);
        let at = self.events.partition_point(|e| order_key(e) <= key);
        self.events.insert(at, event);
    }

    /// Adds many events.
    pub fn extend(&mut self, events: impl IntoIterator<Item = TimelineEvent>) {
        self.events.extend(events);
        // Stable: equal keys keep their arrival order.
        self.events.sort_by_key(order_key);
    }

    /// All events, sorted by time (see [`Timeline`] for ties).
    pub fn events(&self) -> &[TimelineEvent] {
        &self.events
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether there are no events.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Time of the first event, monotonic ns.
    pub fn first_ns(&self) -> Option<u64> {
        self.events.first().map(|e| e.t_ns)
    }

    /// Time of the last event, monotonic ns.
    pub fn last_ns(&self) -> Option<u64> {
        self.events.last().map(|e| e.t_ns)
    }

    /// Writes one line per event:
    /// `TIMELINE SYNTH_START job=1 part=0 slot=3 pid=4242 t_ns=123456789` (`slot=-` where no slot).
    pub fn write_log<W: Write>(&self, mut w: W) -> io::Result<()> {
        for e in &self.events {
            writeln!(w, "{}", log_line(e))?;
        }
        Ok(())
    }

    /// Reads a log written by [`Timeline::write_log`]. Lines that do not start with `TIMELINE`
    /// (other log output interleaved with it) are skipped; a `TIMELINE` line that cannot be read
    /// is an error naming the line.
    pub fn parse_log(text: &str) -> Result<Timeline, ParseError> {
        let mut events = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let mut words = line.split_whitespace();
            if words.next() != Some("TIMELINE") {
                continue;
            }
            let e = parse_fields(words).map_err(|kind| ParseError { line: i + 1, kind })?;
            events.push(e);
        }
        Ok(Timeline::from_events(events))
    }

    /// Pairs the events into intervals (see the module's pairing rules).
    pub fn intervals(&self) -> Intervals {
        let mut out = Intervals::default();
        #[derive(Default)]
        struct Open {
            synth: Option<TimelineEvent>,
            publish: Option<TimelineEvent>,
            early_claim: Option<TimelineEvent>,
            gpu: Option<TimelineEvent>,
            done: bool,
        }
        let mut open: HashMap<(u64, u32), Open> = HashMap::new();
        for e in &self.events {
            let key = (e.job_id, e.partition);
            let o = open.entry(key).or_insert_with(|| {
                out.rows.push(key);
                Open::default()
            });
            let close = |start: Option<TimelineEvent>, unpaired: &mut usize| match start {
                Some(s) => Some(Span {
                    job_id: e.job_id,
                    partition: e.partition,
                    slot: e.slot,
                    pid: s.pid,
                    start_ns: s.t_ns,
                    end_ns: e.t_ns.max(s.t_ns),
                }),
                None => {
                    *unpaired += 1;
                    None
                }
            };
            match e.kind {
                EventKind::SynthStart => {
                    out.synth_started += 1;
                    o.synth = Some(*e);
                }
                EventKind::SynthEnd => {
                    out.synth
                        .extend(close(o.synth.take(), &mut out.unpaired_ends));
                }
                EventKind::SlotPublish => match o.early_claim.take() {
                    // The consumer's stamp came first (see `CLAIM_SKEW_NS`): no wait.
                    Some(c) if e.t_ns - c.t_ns <= CLAIM_SKEW_NS => out.ring_wait.push(Span {
                        job_id: e.job_id,
                        partition: e.partition,
                        slot: c.slot,
                        pid: e.pid,
                        start_ns: c.t_ns,
                        end_ns: c.t_ns,
                    }),
                    _ => o.publish = Some(*e),
                },
                EventKind::GpuClaim => match o.publish.take() {
                    Some(s) => out.ring_wait.extend(close(Some(s), &mut out.unpaired_ends)),
                    // Either a re-claim after a GPU process restart (the first claim already
                    // ended the wait) or a claim stamped just before its publish.
                    None => o.early_claim = Some(*e),
                },
                EventKind::GpuStart => o.gpu = Some(*e),
                EventKind::GpuEnd => {
                    out.gpu.extend(close(o.gpu.take(), &mut out.unpaired_ends));
                }
                EventKind::ProofDone => {
                    if !o.done {
                        o.done = true;
                        out.proofs_done.push(*e);
                    }
                }
            }
        }
        let mut batches: BTreeMap<(u64, u64, u32), GpuBatch> = BTreeMap::new();
        for s in &out.gpu {
            batches
                .entry((s.start_ns, s.end_ns, s.pid))
                .or_insert_with(|| GpuBatch {
                    pid: s.pid,
                    start_ns: s.start_ns,
                    end_ns: s.end_ns,
                    members: Vec::new(),
                })
                .members
                .push((s.job_id, s.partition));
        }
        out.batches = batches.into_values().collect();
        out
    }

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
                EventKind::SynthStart | EventKind::SynthEnd | EventKind::SlotPublish => r.0 = true,
                EventKind::GpuClaim | EventKind::GpuStart | EventKind::GpuEnd => r.1 = true,
                EventKind::ProofDone => {}
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
        for s in &iv.synth {
            by_pid.entry(s.pid).or_default().push(*s);
        }
        for (pid, spans) in by_pid {
            let lanes = pack_lanes(&spans);
            let mut named = vec![false; lanes.iter().max().map_or(0, |m| m + 1)];
            for (s, lane) in spans.iter().zip(lanes) {
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
                    "args": {"job": s.job_id, "partition": s.partition},
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

    /// The waterfall as an SVG image: one row per (job, partition) with bars for synthesis, the
    /// wait in the ring and the GPU, a tick for `PROOF_DONE`, an aggregated "GPU busy" row, a time
    /// axis with labelled ticks and a legend.
    pub fn waterfall_svg(&self) -> String {
        let iv = self.intervals();
        let t0 = self.first_ns().unwrap_or(0);
        let span_ns = self.last_ns().unwrap_or(0).saturating_sub(t0).max(1);
        let rows = iv.rows.len();
        let row_h: f64 = if rows <= 200 {
            14.0
        } else {
            (2800.0 / rows as f64).max(2.0)
        };
        let label_w = 120.0;
        let plot_w = 900.0;
        let top = 50.0;
        let rows_h = row_h * rows as f64;
        let busy_y = top + rows_h + 6.0;
        let busy_h = 14.0;
        let axis_y = busy_y + busy_h + 4.0;
        let width = label_w + plot_w + 20.0;
        let height = axis_y + 60.0;
        let x = |t: u64| label_w + t.saturating_sub(t0) as f64 / span_ns as f64 * plot_w;

        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
        );
        let _ = writeln!(
            s,
            r#"<rect x="0" y="0" width="{width:.0}" height="{height:.0}" fill="white"/>"#
        );
        let _ = writeln!(
            s,
            r#"<text x="{label_w}" y="16" font-size="13">{}</text>"#,
            xml_escape(&format!(
                "proof waterfall: {} rows, {} gpu batches, {:.3} s",
                rows,
                iv.batches.len(),
                ns_to_s(span_ns)
            ))
        );
        // Legend.
        for (i, (name, color)) in [
            ("synthesis", SYNTH_COLOR),
            ("ring wait", WAIT_COLOR),
            ("gpu", GPU_COLOR),
            ("proof done", DONE_COLOR),
        ]
        .into_iter()
        .enumerate()
        {
            let lx = label_w + i as f64 * 110.0;
            let _ = writeln!(
                s,
                r#"<rect x="{lx}" y="26" width="12" height="10" fill="{color}"/><text x="{}" y="35">{name}</text>"#,
                lx + 16.0
            );
        }

        let row_index: HashMap<(u64, u32), usize> =
            iv.rows.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let bar = |s: &mut String, span: &Span, color: &str, shrink: f64| {
            let Some(&r) = row_index.get(&(span.job_id, span.partition)) else {
                return;
            };
            let y = top + r as f64 * row_h + shrink;
            let x0 = x(span.start_ns);
            let w = (x(span.end_ns) - x0).max(0.5);
            let h = (row_h - 2.0 * shrink - 1.0).max(1.0);
            let _ = writeln!(
                s,
                r#"<rect x="{x0:.2}" y="{y:.2}" width="{w:.2}" height="{h:.2}" fill="{color}"/>"#
            );
        };
        let shrink = if row_h >= 6.0 { 1.0 } else { 0.0 };
        for sp in &iv.ring_wait {
            bar(&mut s, sp, WAIT_COLOR, shrink * 3.0);
        }
        for sp in &iv.synth {
            bar(&mut s, sp, SYNTH_COLOR, shrink);
        }
        for sp in &iv.gpu {
            bar(&mut s, sp, GPU_COLOR, shrink);
        }
        for e in &iv.proofs_done {
            if let Some(&r) = row_index.get(&(e.job_id, e.partition)) {
                let _ = writeln!(
                    s,
                    r#"<rect x="{:.2}" y="{:.2}" width="2" height="{:.2}" fill="{DONE_COLOR}"/>"#,
                    x(e.t_ns) - 1.0,
                    top + r as f64 * row_h,
                    (row_h - 1.0).max(1.0)
                );
            }
        }
        if row_h >= 10.0 {
            for (i, (job, part)) in iv.rows.iter().enumerate() {
                let _ = writeln!(
                    s,
                    r#"<text x="{:.0}" y="{:.2}" text-anchor="end">job {job} p{part}</text>"#,
                    label_w - 6.0,
                    top + i as f64 * row_h + row_h - 3.0
                );
            }
        }
        // Aggregated GPU busy row.
        let _ = writeln!(
            s,
            r#"<text x="{:.0}" y="{:.2}" text-anchor="end">GPU busy</text>"#,
            label_w - 6.0,
            busy_y + busy_h - 3.0
        );
        let _ = writeln!(
            s,
            r#"<rect x="{label_w}" y="{busy_y:.2}" width="{plot_w}" height="{busy_h}" fill="{IDLE_COLOR}"/>"#
        );
        for (a, b) in union(iv.batches.iter().map(|b| (b.start_ns, b.end_ns))) {
            let _ = writeln!(
                s,
                r#"<rect x="{:.2}" y="{busy_y:.2}" width="{:.2}" height="{busy_h}" fill="{GPU_COLOR}"/>"#,
                x(a),
                (x(b) - x(a)).max(0.5)
            );
        }
        // Time axis.
        let _ = writeln!(
            s,
            r#"<line x1="{label_w}" y1="{axis_y:.2}" x2="{:.0}" y2="{axis_y:.2}" stroke="black"/>"#,
            label_w + plot_w
        );
        let span_s = ns_to_s(span_ns);
        let step = nice_step(span_s / 8.0);
        let mut k = 0u64;
        loop {
            let t = k as f64 * step;
            if t > span_s * 1.0001 {
                break;
            }
            let tx = label_w + t / span_s * plot_w;
            let _ = writeln!(
                s,
                r#"<line x1="{tx:.2}" y1="{top}" x2="{tx:.2}" y2="{:.2}" stroke="rgb(0,0,0)" stroke-opacity="0.12"/><line x1="{tx:.2}" y1="{axis_y:.2}" x2="{tx:.2}" y2="{:.2}" stroke="black"/><text x="{tx:.2}" y="{:.2}" text-anchor="middle">{}</text>"#,
                axis_y,
                axis_y + 5.0,
                axis_y + 18.0,
                format_time(t, step)
            );
            k += 1;
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.0}" y="{:.2}" text-anchor="middle">time since the first event</text>"#,
            label_w + plot_w / 2.0,
            axis_y + 36.0
        );
        s.push_str("</svg>\n");
        s
    }

    /// The waterfall for a terminal, `width` columns of time: one row per (job, partition) with
    /// `s` synthesis, `.` waiting in the ring, `G` GPU (the strongest state in a column wins), `|`
    /// where the proof was done; then a `GPU busy` row (`#` busy the whole column, `+` part of it)
    /// and a time axis. At most [`ASCII_MAX_ROWS`] rows are drawn.
    pub fn ascii_waterfall(&self, width: usize) -> String {
        let width = width.max(10);
        let iv = self.intervals();
        let mut out = String::new();
        let (Some(t0), Some(t1)) = (self.first_ns(), self.last_ns()) else {
            out.push_str("(empty timeline)\n");
            return out;
        };
        let span = (t1 - t0).max(1) as f64;
        let col = |t: u64| {
            (((t.saturating_sub(t0)) as f64 / span * width as f64) as usize).min(width - 1)
        };
        let labels: Vec<String> = iv.rows.iter().map(|(j, p)| format!("j{j} p{p}")).collect();
        let label_w = labels
            .iter()
            .map(|l| l.len())
            .max()
            .unwrap_or(0)
            .max("GPU busy".len());

        let mut grid: Vec<Vec<u8>> = vec![vec![b' '; width]; iv.rows.len()];
        let row_index: HashMap<(u64, u32), usize> =
            iv.rows.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let rank = |c: u8| match c {
            b'G' => 3,
            b's' => 2,
            b'.' => 1,
            _ => 0,
        };
        let mut paint = |sp: &Span, c: u8| {
            if let Some(&r) = row_index.get(&(sp.job_id, sp.partition)) {
                for cell in &mut grid[r][col(sp.start_ns)..=col(sp.end_ns)] {
                    if rank(c) > rank(*cell) {
                        *cell = c;
                    }
                }
            }
        };
        iv.ring_wait.iter().for_each(|sp| paint(sp, b'.'));
        iv.synth.iter().for_each(|sp| paint(sp, b's'));
        iv.gpu.iter().for_each(|sp| paint(sp, b'G'));
        for e in &iv.proofs_done {
            if let Some(&r) = row_index.get(&(e.job_id, e.partition)) {
                let c = &mut grid[r][col(e.t_ns)];
                if *c == b' ' {
                    *c = b'|';
                }
            }
        }
        for (r, (label, cells)) in labels.iter().zip(&grid).enumerate() {
            if r == ASCII_MAX_ROWS {
                let _ = writeln!(
                    out,
                    "{:>label_w$} ({} more rows not shown)",
                    "...",
                    grid.len() - r
                );
                break;
            }
            let _ = writeln!(
                out,
                "{label:>label_w$} |{}|",
                String::from_utf8_lossy(cells)
            );
        }
        // GPU busy: fraction of each column covered by the union of GPU intervals.
        let mut busy = vec![0.0f64; width];
        let col_ns = span / width as f64;
        for (a, b) in union(iv.batches.iter().map(|b| (b.start_ns, b.end_ns))) {
            let (a, b) = ((a - t0) as f64, (b - t0) as f64);
            let first = ((a / col_ns) as usize).min(width - 1);
            let last = ((b / col_ns) as usize).min(width - 1);
            for (c, cell) in busy.iter_mut().enumerate().take(last + 1).skip(first) {
                let lo = a.max(c as f64 * col_ns);
                let hi = b.min((c + 1) as f64 * col_ns);
                *cell += (hi - lo).max(0.0) / col_ns;
            }
        }
        let lane: String = busy
            .iter()
            .map(|f| {
                if *f >= 0.95 {
                    '#'
                } else if *f > 0.0 {
                    '+'
                } else {
                    ' '
                }
            })
            .collect();
        let _ = writeln!(out, "{:>label_w$} |{lane}|", "GPU busy");
        let end = format!("{:.3} s", span / 1e9);
        let _ = writeln!(
            out,
            "{:>label_w$}  0 s{end:>w$}",
            "",
            w = width.saturating_sub(3)
        );
        let _ = writeln!(
            out,
            "{:>label_w$}  s synthesis  . ring wait  G gpu  | proof done",
            ""
        );
        out
    }
}

const SYNTH_TID_BASE: u64 = 1;
const GPU_TID: u64 = 0;
/// Lanes of ring waits with no slot start here (slot lanes use the slot index as tid); trace
/// viewers read tids as 32-bit integers, so stay well below that.
const QUEUE_TID_BASE: u64 = 1 << 20;
const RING_PID: u32 = 0;
const SYNTH_COLOR: &str = "#4e79a7";
const WAIT_COLOR: &str = "#c9c3bd";
const GPU_COLOR: &str = "#f28e2b";
const DONE_COLOR: &str = "#2ca02c";
const IDLE_COLOR: &str = "#eeeeee";

/// Sort key of an event: time, then the kind's place on a proof's path.
fn order_key(e: &TimelineEvent) -> (u64, usize) {
    let rank = ALL_KINDS
        .iter()
        .position(|k| *k == e.kind)
        .unwrap_or(ALL_KINDS.len());
    (e.t_ns, rank)
}

/// Nanoseconds to seconds.
pub fn ns_to_s(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Merges intervals `(start, end)` into disjoint sorted ones (their union).
pub fn union(intervals: impl IntoIterator<Item = (u64, u64)>) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = intervals.into_iter().filter(|(a, b)| b >= a).collect();
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

fn log_line(e: &TimelineEvent) -> String {
    let slot = if e.slot == NO_SLOT {
        "-".to_string()
    } else {
        e.slot.to_string()
    };
    format!(
        "TIMELINE {} job={} part={} slot={} pid={} t_ns={}",
        e.kind.as_str(),
        e.job_id,
        e.partition,
        slot,
        e.pid,
        e.t_ns
    )
}

fn parse_fields<'a>(
    mut words: impl Iterator<Item = &'a str>,
) -> Result<TimelineEvent, ParseErrorKind> {
    let name = words.next().ok_or(ParseErrorKind::MissingField("kind"))?;
    let kind = kind_from_str(name).ok_or_else(|| ParseErrorKind::UnknownKind(name.to_string()))?;
    let fields: HashMap<&str, &str> = words.filter_map(|w| w.split_once('=')).collect();
    fn num<T: std::str::FromStr>(
        fields: &HashMap<&str, &str>,
        field: &'static str,
    ) -> Result<T, ParseErrorKind> {
        let v = fields
            .get(field)
            .ok_or(ParseErrorKind::MissingField(field))?;
        v.parse().map_err(|_| ParseErrorKind::BadValue {
            field,
            value: v.to_string(),
        })
    }
    let slot = match fields.get("slot") {
        Some(&"-") => NO_SLOT,
        _ => num(&fields, "slot")?,
    };
    Ok(TimelineEvent {
        kind,
        job_id: num(&fields, "job")?,
        partition: num(&fields, "part")?,
        slot,
        pid: num(&fields, "pid")?,
        t_ns: num(&fields, "t_ns")?,
    })
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

/// A round step (1, 2 or 5 × 10^k) of at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw > 0.0 && raw.is_finite()) {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

fn format_time(t_s: f64, step_s: f64) -> String {
    if step_s >= 1.0 {
        format!("{t_s:.0} s")
    } else if step_s >= 0.1 {
        format!("{t_s:.1} s")
    } else if step_s >= 0.001 {
        format!("{:.0} ms", t_s * 1e3)
    } else {
        format!("{:.0} µs", t_s * 1e6)
    }
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An event for hand-built timelines (times in ms for readability).
    pub(crate) fn ev(kind: EventKind, job: u64, part: u32, pid: u32, t_ms: u64) -> TimelineEvent {
        TimelineEvent {
            kind,
            job_id: job,
            partition: part,
            slot: part,
            pid,
            t_ns: t_ms * 1_000_000,
        }
    }

    /// Two partitions: synthesized in parallel by pid 10, proved as one GPU batch by pid 20, then
    /// a third proved alone.
    pub(crate) fn sample() -> Timeline {
        use EventKind::*;
        Timeline::from_events([
            ev(SynthStart, 1, 0, 10, 0),
            ev(SynthStart, 1, 1, 10, 0),
            ev(SynthEnd, 1, 0, 10, 100),
            ev(SlotPublish, 1, 0, 10, 100),
            ev(SynthEnd, 1, 1, 10, 120),
            ev(SlotPublish, 1, 1, 10, 120),
            ev(GpuClaim, 1, 0, 20, 130),
            ev(GpuClaim, 1, 1, 20, 130),
            ev(GpuStart, 1, 0, 20, 130),
            ev(GpuStart, 1, 1, 20, 130),
            ev(SynthStart, 2, 0, 10, 130),
            ev(GpuEnd, 1, 0, 20, 170),
            ev(GpuEnd, 1, 1, 20, 170),
            ev(ProofDone, 1, 0, 1, 171),
            ev(ProofDone, 1, 1, 1, 171),
            ev(SynthEnd, 2, 0, 10, 230),
            ev(SlotPublish, 2, 0, 10, 230),
            ev(GpuClaim, 2, 0, 20, 240),
            ev(GpuStart, 2, 0, 20, 240),
            ev(GpuEnd, 2, 0, 20, 260),
            ev(ProofDone, 2, 0, 1, 262),
        ])
    }

    #[test]
    fn log_round_trips_and_skips_other_lines() {
        let mut t = sample();
        t.push(TimelineEvent {
            slot: NO_SLOT,
            ..ev(EventKind::ProofDone, 9, 3, 1, 300)
        });
        let mut buf = Vec::new();
        t.write_log(&mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(text.lines().all(|l| l.starts_with("TIMELINE ")));
        assert!(
            text.contains("TIMELINE PROOF_DONE job=9 part=3 slot=- pid=1 t_ns=300000000"),
            "{text}"
        );
        let mixed = format!("INFO something else\n{text}\n\n");
        assert_eq!(Timeline::parse_log(&mixed).unwrap(), t);
    }

    #[test]
    fn bad_log_lines_name_the_problem() {
        let err = Timeline::parse_log("x\nTIMELINE NOPE job=1").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(matches!(err.kind, ParseErrorKind::UnknownKind(ref k) if k == "NOPE"));
        let err = Timeline::parse_log("TIMELINE GPU_END job=1 part=0 slot=2 pid=3").unwrap_err();
        assert!(err.to_string().contains("missing field `t_ns`"), "{err}");
        let err =
            Timeline::parse_log("TIMELINE GPU_END job=x part=0 slot=2 pid=3 t_ns=1").unwrap_err();
        assert!(
            matches!(err.kind, ParseErrorKind::BadValue { field: "job", .. }),
            "{err}"
        );
    }

    #[test]
    fn push_keeps_time_order() {
        let mut t = Timeline::new();
        t.push(ev(EventKind::GpuEnd, 1, 0, 1, 30));
        t.push(ev(EventKind::SynthStart, 1, 0, 1, 10));
        t.push(ev(EventKind::GpuStart, 1, 0, 1, 20));
        t.push(ev(EventKind::ProofDone, 1, 0, 1, 30));
        let kinds: Vec<_> = t.events().iter().map(|e| e.kind).collect();
        use EventKind::*;
        assert_eq!(kinds, [SynthStart, GpuStart, GpuEnd, ProofDone]);
    }

    #[test]
    fn equal_times_follow_the_path_order() {
        use EventKind::*;
        // The GPU process's stream arrives first, with the same stamps as synth-proc's.
        let mut t = Timeline::from_events([ev(GpuClaim, 1, 0, 2, 5), ev(GpuStart, 1, 0, 2, 5)]);
        t.extend([ev(SynthEnd, 1, 0, 1, 5), ev(SlotPublish, 1, 0, 1, 5)]);
        t.push(ev(SynthStart, 1, 0, 1, 5));
        let kinds: Vec<_> = t.events().iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [SynthStart, SynthEnd, SlotPublish, GpuClaim, GpuStart]
        );
        assert_eq!(t.intervals().ring_wait.len(), 1);
    }

    #[test]
    fn a_claim_stamped_before_its_publish_is_a_zero_wait() {
        use EventKind::*;
        let t = Timeline::from_events([
            ev(SynthEnd, 1, 0, 1, 10),
            TimelineEvent {
                t_ns: 10_000_010,
                ..ev(GpuClaim, 1, 0, 2, 0)
            },
            TimelineEvent {
                t_ns: 10_000_020,
                ..ev(SlotPublish, 1, 0, 1, 0)
            },
            // Far apart: a stale re-claim does not pair with a later publish.
            ev(GpuClaim, 2, 0, 2, 10),
            ev(SlotPublish, 2, 0, 1, 50),
            ev(GpuClaim, 2, 0, 2, 60),
        ]);
        let waits: Vec<(u64, u64)> = t
            .intervals()
            .ring_wait
            .iter()
            .map(|w| (w.job_id, w.duration_ns()))
            .collect();
        assert_eq!(waits, [(1, 0), (2, 10_000_000)]);
    }

    #[test]
    fn intervals_pair_starts_and_ends() {
        let iv = sample().intervals();
        assert_eq!(iv.rows, [(1, 0), (1, 1), (2, 0)]);
        assert_eq!(iv.synth_started, 3);
        let synth: Vec<u64> = iv
            .synth
            .iter()
            .map(|s| s.duration_ns() / 1_000_000)
            .collect();
        assert_eq!(synth, [100, 120, 100]);
        let wait: Vec<u64> = iv
            .ring_wait
            .iter()
            .map(|s| s.duration_ns() / 1_000_000)
            .collect();
        assert_eq!(wait, [30, 10, 10]);
        assert_eq!(iv.gpu.len(), 3);
        assert_eq!(iv.batches.len(), 2);
        assert_eq!(iv.batches[0].members, [(1, 0), (1, 1)]);
        assert_eq!(iv.batches[1].members, [(2, 0)]);
        assert_eq!(iv.proofs_done.len(), 3);
        assert_eq!(iv.unpaired_ends, 0);
    }

    #[test]
    fn retries_and_orphans_do_not_confuse_pairing() {
        use EventKind::*;
        let t = Timeline::from_events([
            // synth-proc 10 dies mid-synthesis, 11 redoes it.
            ev(SynthStart, 1, 0, 10, 0),
            ev(SynthStart, 1, 0, 11, 50),
            ev(SynthEnd, 1, 0, 11, 80),
            ev(SlotPublish, 1, 0, 11, 80),
            // gpu-proc 20 dies mid-proof, 21 reclaims the slot.
            ev(GpuClaim, 1, 0, 20, 90),
            ev(GpuStart, 1, 0, 20, 90),
            ev(GpuClaim, 1, 0, 21, 200),
            ev(GpuStart, 1, 0, 21, 200),
            ev(GpuEnd, 1, 0, 21, 240),
            ev(ProofDone, 1, 0, 1, 241),
            ev(ProofDone, 1, 0, 1, 242),
            // An end nobody started.
            ev(GpuEnd, 5, 0, 21, 250),
        ]);
        let iv = t.intervals();
        assert_eq!(iv.synth_started, 2);
        assert_eq!(iv.synth.len(), 1);
        assert_eq!(
            (iv.synth[0].pid, iv.synth[0].duration_ns()),
            (11, 30_000_000)
        );
        assert_eq!(iv.ring_wait.len(), 1);
        assert_eq!(iv.ring_wait[0].duration_ns(), 10_000_000);
        assert_eq!(iv.gpu.len(), 1);
        assert_eq!((iv.gpu[0].pid, iv.gpu[0].duration_ns()), (21, 40_000_000));
        assert_eq!(iv.proofs_done.len(), 1);
        assert_eq!(iv.unpaired_ends, 1);
    }

    #[test]
    fn union_merges_overlaps() {
        assert_eq!(
            union([(5, 7), (0, 2), (1, 3), (3, 4), (9, 9)]),
            [(0, 4), (5, 7), (9, 9)]
        );
        assert!(union([]).is_empty());
    }

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

    #[test]
    fn svg_is_well_formed_and_has_every_bar() {
        let svg = sample().waterfall_svg();
        let doc = roxmltree::Document::parse(&svg).expect("well-formed svg");
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg");
        let rects = root.descendants().filter(|n| n.has_tag_name("rect"));
        let fill = |c: &str| {
            rects
                .clone()
                .filter(|n| n.attribute("fill") == Some(c))
                .count()
        };
        // Legend swatch + bars.
        assert_eq!(fill(SYNTH_COLOR), 1 + 3);
        assert_eq!(fill(WAIT_COLOR), 1 + 3);
        assert_eq!(fill(GPU_COLOR), 1 + 3 + 2); // + two busy-lane blocks
        assert_eq!(fill(DONE_COLOR), 1 + 3);
        let texts: Vec<String> = root
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(str::to_string))
            .collect();
        assert!(texts.iter().any(|t| t == "job 2 p0"), "{texts:?}");
        assert!(texts.iter().any(|t| t == "0 ms"), "{texts:?}");
        assert!(texts.iter().any(|t| t == "GPU busy"), "{texts:?}");
        // An empty timeline still gives a valid image.
        roxmltree::Document::parse(&Timeline::new().waterfall_svg()).unwrap();
    }

    #[test]
    fn ascii_waterfall_shape() {
        let text = sample().ascii_waterfall(52);
        let lines: Vec<&str> = text.lines().collect();
        // 3 rows, GPU busy, axis, legend.
        assert_eq!(lines.len(), 6, "{text}");
        for l in &lines[..4] {
            assert!(l.chars().filter(|c| *c == '|').count() >= 2, "{l}");
            let inner = l.split_once('|').unwrap().1;
            assert_eq!(inner.chars().count(), 52 + 1, "{l}");
        }
        let row0 = lines[0].split_once('|').unwrap().1;
        let s0 = row0.find('s').unwrap();
        let g0 = row0.find('G').unwrap();
        assert!(s0 < g0, "{row0}");
        assert!(row0[s0..g0].contains('.'), "{row0}");
        assert!(lines[3].starts_with("GPU busy"), "{text}");
        let busy = lines[3].split_once('|').unwrap().1;
        // GPU busy 40 + 20 ms of 262 ms ≈ 23 % of the columns.
        let cols = busy.chars().filter(|c| *c == '#' || *c == '+').count();
        assert!((10..=16).contains(&cols), "{busy}");
        assert_eq!(Timeline::new().ascii_waterfall(40), "(empty timeline)\n");
    }

    #[test]
    fn ascii_waterfall_caps_rows() {
        use EventKind::*;
        let events =
            (0..100u64).flat_map(|j| [ev(SynthStart, j, 0, 1, j), ev(SynthEnd, j, 0, 1, j + 5)]);
        let text = Timeline::from_events(events).ascii_waterfall(20);
        assert!(text.contains("(52 more rows not shown)"), "{text}");
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(0.3), 0.5);
        assert_eq!(nice_step(1.0), 1.0);
        assert_eq!(nice_step(12.0), 20.0);
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(format_time(0.25, 0.05), "250 ms");
    }
}
