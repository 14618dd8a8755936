//! The proof timeline: events from every process, and the views made from them.
//!
//! Every process of a run records [`TimelineEvent`]s (`JOB_QUEUED`, `SYNTH_HANDOUT`,
//! `SYNTH_TAKEN`, `SYNTH_START`, `WITNESS_END`, `SYNTH_END`, `SLOT_PUBLISH`, `GPU_CLAIM`,
//! `GPU_START`, `GPU_END`, `PROOF_DONE`) stamped with `CLOCK_MONOTONIC`, which is one clock for
//! all processes of a host, and with the recording thread's id. The launcher collects them into a [`Timeline`] and renders:
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
//! use splitprover_bench::timeline::Timeline;
//! use shm_protocol::control::{EventKind, TimelineEvent};
//!
//! let ev = |kind, t_ns| TimelineEvent { kind, job_id: 1, partition: 0, slot: 0, pid: 7, tid: 0, t_ns };
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
//!
//! # Files
//!
//! This file holds the model: the events kept in time order, their pairing into [`Intervals`],
//! and the helpers shared by the views. Each view has its own file: `log` (the `TIMELINE` log
//! and its parser), `chrome` (the Chrome/Perfetto trace), `svg` (the SVG waterfall) and `ascii`
//! (the terminal waterfall).

use std::collections::{BTreeMap, HashMap};

use shm_protocol::control::{EventKind, TimelineEvent};

mod ascii;
mod chrome;
mod log;
mod svg;

pub use ascii::ASCII_MAX_ROWS;
pub use log::{kind_from_str, ParseError, ParseErrorKind};

/// Every event kind, in the order of a proof's path.
pub const ALL_KINDS: [EventKind; 11] = [
    EventKind::JobQueued,
    EventKind::SynthHandout,
    EventKind::SynthTaken,
    EventKind::SynthStart,
    EventKind::WitnessEnd,
    EventKind::SynthEnd,
    EventKind::SlotPublish,
    EventKind::GpuClaim,
    EventKind::GpuStart,
    EventKind::GpuEnd,
    EventKind::ProofDone,
];

pub use shm_protocol::control::NO_SLOT;

/// A `GPU_CLAIM` stamped at most this long before the `SLOT_PUBLISH` of the same partition is
/// paired with it as a zero wait: a producer that stamps the publish after making the slot
/// READY can be overtaken by the consumer's stamp.
pub const CLAIM_SKEW_NS: u64 = 10_000_000;

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

/// The phases of one completed synthesis, from the events of its attempt that completed
/// (monotonic ns; `None` where the event was not recorded: `WITNESS_END` exists for the
/// pre-compiled synthesis only, the launcher's events only in the split pipeline).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SynthPhases {
    /// Job id.
    pub job_id: u64,
    /// Partition index.
    pub partition: u32,
    /// Process that synthesized it.
    pub pid: u32,
    /// Thread that synthesized it (0: not recorded).
    pub tid: u32,
    /// `JOB_QUEUED`: the launcher accepted the partition.
    pub queued_ns: Option<u64>,
    /// `SYNTH_HANDOUT`: the launcher sent it to synth-proc.
    pub handout_ns: Option<u64>,
    /// `SYNTH_TAKEN`: a synthesis worker took it and began waiting for a slot.
    pub taken_ns: Option<u64>,
    /// `SYNTH_START`: its slot was reserved.
    pub start_ns: u64,
    /// `WITNESS_END`: the witness pass ended and the products began.
    pub witness_end_ns: Option<u64>,
    /// `SYNTH_END`.
    pub end_ns: u64,
}

impl SynthPhases {
    /// Waiting in the launcher to be handed out (`JOB_QUEUED` → `SYNTH_HANDOUT`), ns.
    pub fn handout_wait_ns(&self) -> Option<u64> {
        Some(self.handout_ns?.saturating_sub(self.queued_ns?))
    }

    /// Waiting in synth-proc's queue for a worker (`SYNTH_HANDOUT` → `SYNTH_TAKEN`), ns.
    pub fn worker_wait_ns(&self) -> Option<u64> {
        Some(self.taken_ns?.saturating_sub(self.handout_ns?))
    }

    /// Waiting for a free ring slot (`SYNTH_TAKEN` → `SYNTH_START`), ns.
    pub fn slot_wait_ns(&self) -> Option<u64> {
        Some(self.start_ns.saturating_sub(self.taken_ns?))
    }

    /// The witness pass (`SYNTH_START` → `WITNESS_END`), ns.
    pub fn witness_ns(&self) -> Option<u64> {
        Some(self.witness_end_ns?.saturating_sub(self.start_ns))
    }

    /// The products (`WITNESS_END` → `SYNTH_END`), ns.
    pub fn products_ns(&self) -> Option<u64> {
        Some(self.end_ns.saturating_sub(self.witness_end_ns?))
    }

    /// The synthesis itself (`SYNTH_START` → `SYNTH_END`), ns.
    pub fn synthesis_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// The intervals of a timeline (see the module's pairing rules).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Intervals {
    /// (job, partition) keys in order of their first event: the waterfall's rows.
    pub rows: Vec<(u64, u32)>,
    /// Completed syntheses.
    pub synth: Vec<Span>,
    /// The phases of every completed synthesis, in the order of `synth`.
    pub phases: Vec<SynthPhases>,
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

    /// Pairs the events into intervals (see the module's pairing rules).
    pub fn intervals(&self) -> Intervals {
        let mut out = Intervals::default();
        #[derive(Default)]
        struct Open {
            queued: Option<u64>,
            handout: Option<u64>,
            taken: Option<u64>,
            witness_end: Option<u64>,
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
                EventKind::JobQueued => o.queued = Some(e.t_ns),
                // A retry is handed out again: its phases start over from that hand-out.
                EventKind::SynthHandout => {
                    o.handout = Some(e.t_ns);
                    o.taken = None;
                }
                EventKind::SynthTaken => o.taken = Some(e.t_ns),
                EventKind::SynthStart => {
                    out.synth_started += 1;
                    o.synth = Some(*e);
                    o.witness_end = None;
                }
                EventKind::WitnessEnd => o.witness_end = Some(e.t_ns),
                EventKind::SynthEnd => {
                    let start = o.synth.take();
                    if let Some(span) = close(start, &mut out.unpaired_ends) {
                        let s = start.expect("a span closes an open start");
                        out.phases.push(SynthPhases {
                            job_id: e.job_id,
                            partition: e.partition,
                            pid: s.pid,
                            tid: s.tid,
                            queued_ns: o.queued,
                            handout_ns: o.handout.take(),
                            taken_ns: o.taken.take(),
                            start_ns: span.start_ns,
                            witness_end_ns: o.witness_end.take().filter(|&w| w >= s.t_ns),
                            end_ns: span.end_ns,
                        });
                        out.synth.push(span);
                    }
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
}

impl Intervals {
    /// Syntheses that began on a thread while another synthesis recorded on the same thread
    /// (same process, same thread id) was still running: each such synthesis waited for a whole
    /// other one to finish before its own could (issue 30). Zero in a healthy pipeline; events
    /// without a thread id are not counted.
    pub fn nested_syntheses(&self) -> usize {
        let mut by_thread: HashMap<(u32, u32), Vec<(u64, u64)>> = HashMap::new();
        for p in self.phases.iter().filter(|p| p.tid != 0) {
            by_thread
                .entry((p.pid, p.tid))
                .or_default()
                .push((p.start_ns, p.end_ns));
        }
        let mut nested = 0;
        for spans in by_thread.values_mut() {
            spans.sort_unstable();
            let mut open_until = 0;
            for &(start, end) in spans.iter() {
                if start < open_until {
                    nested += 1;
                }
                open_until = open_until.max(end);
            }
        }
        nested
    }
}

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
            tid: 0,
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
    fn a_synthesis_has_its_phases_and_a_retry_starts_them_over() {
        use EventKind::*;
        let on = |e: TimelineEvent, tid| TimelineEvent { tid, ..e };
        let t = Timeline::from_events([
            ev(JobQueued, 1, 0, 1, 0),
            ev(SynthHandout, 1, 0, 1, 10),
            on(ev(SynthTaken, 1, 0, 2, 15), 7),
            on(ev(SynthStart, 1, 0, 2, 20), 7),
            // synth-proc died here; the launcher hands the partition out again.
            ev(SynthHandout, 1, 0, 1, 100),
            on(ev(SynthTaken, 1, 0, 3, 130), 8),
            on(ev(SynthStart, 1, 0, 3, 160), 8),
            on(ev(WitnessEnd, 1, 0, 3, 200), 8),
            on(ev(SynthEnd, 1, 0, 3, 260), 8),
            // A full synthesis: no witness phase, no launcher events (in-process).
            on(ev(SynthStart, 2, 0, 4, 0), 9),
            on(ev(SynthEnd, 2, 0, 4, 50), 9),
        ]);
        let iv = t.intervals();
        assert_eq!(iv.synth_started, 3);
        assert_eq!(iv.phases.len(), 2);
        let p = iv.phases.iter().find(|p| p.job_id == 1).unwrap();
        let ms = |ns: Option<u64>| ns.map(|ns| ns / 1_000_000);
        assert_eq!((p.pid, p.tid), (3, 8));
        assert_eq!(ms(p.handout_wait_ns()), Some(100));
        assert_eq!(ms(p.worker_wait_ns()), Some(30));
        assert_eq!(ms(p.slot_wait_ns()), Some(30));
        assert_eq!(ms(p.witness_ns()), Some(40));
        assert_eq!(ms(p.products_ns()), Some(60));
        assert_eq!(p.synthesis_ns() / 1_000_000, 100);
        let q = iv.phases.iter().find(|p| p.job_id == 2).unwrap();
        assert_eq!(
            (q.handout_wait_ns(), q.witness_ns(), q.products_ns()),
            (None, None, None)
        );
        assert_eq!(q.synthesis_ns() / 1_000_000, 50);
        assert_eq!(iv.nested_syntheses(), 0);
    }

    #[test]
    fn a_synthesis_begun_inside_another_on_the_same_thread_is_nested() {
        use EventKind::*;
        let on = |e: TimelineEvent, tid| TimelineEvent { tid, ..e };
        let t = Timeline::from_events([
            // Thread 5 runs partition 0; its products' join picks up partition 1.
            on(ev(SynthStart, 1, 0, 2, 0), 5),
            on(ev(SynthStart, 1, 1, 2, 10), 5),
            on(ev(SynthEnd, 1, 1, 2, 90), 5),
            on(ev(SynthEnd, 1, 0, 2, 100), 5),
            // Overlapping in time but on other threads, or on another process's thread 5,
            // or on a thread not recorded: not nested.
            on(ev(SynthStart, 1, 2, 2, 20), 6),
            on(ev(SynthEnd, 1, 2, 2, 80), 6),
            on(ev(SynthStart, 1, 3, 3, 20), 5),
            on(ev(SynthEnd, 1, 3, 3, 80), 5),
            ev(SynthStart, 1, 4, 2, 20),
            ev(SynthEnd, 1, 4, 2, 80),
            ev(SynthStart, 1, 5, 2, 20),
            ev(SynthEnd, 1, 5, 2, 80),
            // One after the other on thread 5: not nested.
            on(ev(SynthStart, 1, 6, 2, 100), 5),
            on(ev(SynthEnd, 1, 6, 2, 120), 5),
        ]);
        assert_eq!(t.intervals().nested_syntheses(), 1);
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
}
