//! The job table: which partitions of which job are where, independent of processes and transport.
//!
//! A job is a circuit spec, its request (`kernels::job`: a seed and a partition count for a
//! built-in circuit, a proof request for Filecoin) and a number of partitions. Each partition moves
//! `Pending → Synthesizing → InRing → Done`, or the whole job fails with the first reason reported.
//! The table is pure bookkeeping: the pipeline feeds it what the children report and asks it what to
//! re-send after a crash, which is why it can be tested without a single process. A failure is a
//! value ([`JobFailure`], [`AttemptFailure`]) until someone turns it into text.
//!
//! Each partition counts its failed attempts ([`JobTable::attempt_failed`]): its prover or
//! synthesizer died or was killed past a deadline while holding it, its proof did not verify, or
//! its DONE slot did not match the table. Below the limit the partition is retried; at the limit
//! the job fails with every reason collected, so one poison partition ends its own job and
//! nothing else.
//!
//! Pending partitions are handed out in priority order ([`JobTable::take_pending`]: priority
//! descending, then job id, then partition) and at most as many as the caller asks for, so the
//! pipeline can keep synth-proc's queue short and let a later, more urgent job overtake.
//! [`JobTable::cancel`] ends a job at once; results that arrive for it later are ignored like
//! those of any ended job.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::{Duration, Instant};

use shm_protocol::control::{JobRequest, SynthRequest};

pub use super::failure::{AttemptFailure, JobFailure};

/// Priorities on cuzk's scale (`cuzk.v1.Priority`): higher partitions are handed to synth-proc
/// first. [`PRIORITY_UNSPECIFIED`] takes the kind's default ([`default_priority`]).
pub const PRIORITY_UNSPECIFIED: i32 = 0;
/// Low.
pub const PRIORITY_LOW: i32 = 1;
/// Normal: PoRep, SnapDeals and built-in circuits by default.
pub const PRIORITY_NORMAL: i32 = 2;
/// High: WindowPoSt by default.
pub const PRIORITY_HIGH: i32 = 3;
/// Critical: WinningPoSt by default.
pub const PRIORITY_CRITICAL: i32 = 4;

/// The default priority of a circuit spec (`post:StackedDrgWinning…` CRITICAL,
/// `post:StackedDrgWindow…` HIGH, everything else NORMAL), as cuzk decides for UNSPECIFIED.
pub fn default_priority(circuit: &str) -> i32 {
    match circuit.strip_prefix("post:") {
        Some(k) if k.contains("Winning") => PRIORITY_CRITICAL,
        Some(k) if k.contains("Window") => PRIORITY_HIGH,
        _ => PRIORITY_NORMAL,
    }
}

/// The priority a job runs at: `asked` when it is on the scale (1..=4), the circuit's default
/// when unspecified (0); `None` for anything else.
pub fn effective_priority(circuit: &str, asked: i64) -> Option<i32> {
    match asked {
        0 => Some(default_priority(circuit)),
        1..=4 => Some(asked as i32),
        _ => None,
    }
}

/// What a client asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSpec {
    /// Circuit spec, for example `sha-chain:2`.
    pub circuit: String,
    /// Identifier of the circuit and its SRS.
    pub circuit_id: u64,
    /// Number of partitions (independent circuits) in the job.
    pub partitions: u32,
    /// Where synth-proc finds the job's request bytes (inline, or the job's sealed memfd that
    /// the pipeline sends with every request of the job).
    pub request: JobRequest,
    /// Its partitions travel in witness-only slots (`SynthRequest::witness`, issue 31).
    pub witness: bool,
}

/// The slot of a partition the ring holds but whose `Published` message was lost with synth-proc.
pub const UNKNOWN_SLOT: u32 = u32::MAX;

/// Where one partition is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionState {
    /// Not yet handed to synth-proc.
    Pending,
    /// Handed to synth-proc, not yet published.
    Synthesizing,
    /// Published into a slot; a gpu-proc will prove it.
    InRing {
        /// Slot index ([`UNKNOWN_SLOT`] when the ring held it while synth-proc died, before its
        /// `Published` message arrived).
        slot: u32,
        /// The slot's generation when it was published (READY).
        generation: u64,
    },
    /// Proof received.
    Done,
}

/// The end of a job.
#[derive(Clone, Debug)]
pub struct JobOutcome {
    /// Job id.
    pub job_id: u64,
    /// What was asked.
    pub spec: JobSpec,
    /// The proof of every partition in order (192 bytes each), or why the job failed.
    pub result: Result<Vec<Vec<u8>>, JobFailure>,
    /// Time from submission to outcome.
    pub elapsed: Duration,
    /// Where that time went.
    pub times: JobTimes,
}

/// Where a job's time went, summed over its partitions (what cuzk's `AwaitProofResponse` and
/// the metrics report). Partitions run in parallel, so the sums can exceed the job's wall time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JobTimes {
    /// From submission to the first synthesis start.
    pub queue_wait: Duration,
    /// Synthesis, every partition.
    pub synthesis: Duration,
    /// GPU proving, every partition (a batch's time shared by its slots).
    pub gpu: Duration,
    /// Checking the proofs in the launcher.
    pub verify: Duration,
}

#[derive(Debug)]
struct Job {
    spec: JobSpec,
    partitions: Vec<PartitionState>,
    proofs: Vec<Option<Vec<u8>>>,
    /// Failed attempts per partition, with their reasons (allocated on the first failure).
    attempts: BTreeMap<u32, Vec<AttemptFailure>>,
    submitted: Instant,
    /// Its place in the hand-out order (already resolved: never unspecified).
    priority: i32,
    /// Some partition was handed to synth-proc at least once.
    handed_out: bool,
    times: JobTimes,
}

impl Job {
    fn outcome(self, job_id: u64, result: Result<Vec<Vec<u8>>, JobFailure>) -> JobOutcome {
        JobOutcome {
            job_id,
            elapsed: self.submitted.elapsed(),
            times: self.times,
            spec: self.spec,
            result,
        }
    }
}

/// A phase of a job's time ([`JobTable::add_time`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Synthesis of one partition.
    Synthesis,
    /// Proving of one partition.
    Gpu,
    /// Checking one proof.
    Verify,
}

/// What [`JobTable::attempt_failed`] decided.
#[derive(Debug)]
pub enum Attempt {
    /// The job is gone or the partition already has its proof: nothing to do.
    Ignored,
    /// The partition is retried (`attempts` failures so far).
    Retry {
        /// Failed attempts so far.
        attempts: u32,
    },
    /// The limit was reached: the job failed (its outcome, with every reason).
    JobFailed(JobOutcome),
}

/// Counters the tests and `status` read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobCounters {
    /// Jobs accepted.
    pub submitted: u64,
    /// Jobs finished with every proof.
    pub succeeded: u64,
    /// Jobs failed.
    pub failed: u64,
    /// Synthesis requests sent, re-sends after a crash included.
    pub syntheses_requested: u64,
    /// Results that arrived for a partition already done or a job already ended (ignored).
    pub duplicate_results: u64,
    /// DONE slots refused because they did not match the table (see [`JobTable::check_done`]).
    pub mismatched_results: u64,
    /// Jobs cancelled ([`JobTable::cancel`]; not counted as failed).
    pub cancelled: u64,
}

/// One job as `status` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSummary {
    /// Job id.
    pub job_id: u64,
    /// Circuit spec.
    pub circuit: String,
    /// Partitions done out of all.
    pub done: usize,
    /// Partitions in total.
    pub partitions: usize,
    /// Partitions waiting in the ring.
    pub in_ring: usize,
    /// Its priority (cuzk's scale, resolved).
    pub priority: i32,
    /// Some partition was handed to synth-proc.
    pub running: bool,
}

/// All live jobs.
#[derive(Debug, Default)]
pub struct JobTable {
    next_id: u64,
    jobs: BTreeMap<u64, Job>,
    /// Live jobs in hand-out order: priority descending, then id.
    order: BTreeSet<(Reverse<i32>, u64)>,
    /// Partitions of ended jobs (cancelled, failed) that synth-proc still holds: they count
    /// against the hand-out bound until synth-proc publishes or fails them, or dies.
    abandoned: HashSet<(u64, u32)>,
    /// Partitions handed to synth-proc's express worker ([`JobTable::take_express`]).
    express: HashSet<(u64, u32)>,
    counters: JobCounters,
}

impl JobTable {
    /// An empty table whose first job id is `first_id` (lets a restarted launcher avoid reusing ids).
    pub fn new(first_id: u64) -> Self {
        JobTable {
            next_id: first_id.max(1),
            ..Default::default()
        }
    }

    /// Accepts a job at its circuit's default priority; returns its id. Its partitions are
    /// `Pending` until [`JobTable::take_pending`].
    pub fn submit(&mut self, spec: JobSpec) -> u64 {
        let priority = default_priority(&spec.circuit);
        self.submit_at(spec, priority)
    }

    /// [`JobTable::submit`] at `priority` (higher is handed out first).
    pub fn submit_at(&mut self, spec: JobSpec, priority: i32) -> u64 {
        let id = self.next_id;
        let accepted = self.submit_as(id, spec, priority);
        debug_assert!(accepted, "the next id is above every id given");
        id
    }

    /// [`JobTable::submit_at`] under the caller's `id` (the service's journal id) instead of the
    /// next one; automatic ids come after it from then on. The caller gives an id once (the
    /// journal never reuses one), so no late result of an ended job reaches a new one. `false`,
    /// and nothing accepted, when a job with `id` is live.
    #[must_use]
    pub fn submit_as(&mut self, id: u64, spec: JobSpec, priority: i32) -> bool {
        if self.jobs.contains_key(&id) {
            return false;
        }
        self.next_id = self.next_id.max(id.saturating_add(1));
        let n = spec.partitions as usize;
        self.jobs.insert(
            id,
            Job {
                spec,
                partitions: vec![PartitionState::Pending; n],
                proofs: vec![None; n],
                attempts: BTreeMap::new(),
                submitted: Instant::now(),
                priority,
                handed_out: false,
                times: JobTimes::default(),
            },
        );
        self.order.insert((Reverse(priority), id));
        self.counters.submitted += 1;
        true
    }

    /// Removes a live job from the table.
    fn remove(&mut self, job_id: u64) -> Option<Job> {
        let job = self.jobs.remove(&job_id)?;
        self.order.remove(&(Reverse(job.priority), job_id));
        for (p, state) in job.partitions.iter().enumerate() {
            if *state == PartitionState::Synthesizing {
                self.abandoned.insert((job_id, p as u32));
            }
        }
        Some(job)
    }

    /// synth-proc is done with a partition (published or failed it): one fewer at synth-proc
    /// when its job has ended.
    pub fn synth_ended(&mut self, job_id: u64, partition: u32) {
        self.abandoned.remove(&(job_id, partition));
    }

    /// At most `limit` `Pending` partitions as requests, now marked `Synthesizing`: the highest
    /// priority first, then the oldest job, then partition order.
    pub fn take_pending(&mut self, limit: usize) -> Vec<SynthRequest> {
        let mut out = Vec::new();
        if limit == 0 {
            return out;
        }
        'jobs: for &(_, job_id) in &self.order {
            let Some(job) = self.jobs.get_mut(&job_id) else {
                continue;
            };
            for (p, state) in job.partitions.iter_mut().enumerate() {
                if *state == PartitionState::Pending {
                    *state = PartitionState::Synthesizing;
                    job.handed_out = true;
                    out.push(request(job_id, &job.spec, p as u32, job.priority));
                    if out.len() >= limit {
                        break 'jobs;
                    }
                }
            }
        }
        self.counters.syntheses_requested += out.len() as u64;
        out
    }

    /// At most `lane` partitions in synth-proc's express lane: `Pending` partitions of HIGH or
    /// CRITICAL jobs (highest first, then oldest), now `Synthesizing`, their requests marked
    /// `express`. They start at once on synth-proc's express worker instead of waiting behind
    /// the partitions queued there: the lane is what lets a WinningPoSt overtake PoRep work that
    /// synth-proc already holds.
    pub fn take_express(&mut self, lane: usize) -> Vec<SynthRequest> {
        // Still in the lane: partitions synthesizing for a live job, or abandoned at synth-proc.
        let jobs = &self.jobs;
        let abandoned = &self.abandoned;
        self.express.retain(|&(job, p)| {
            abandoned.contains(&(job, p))
                || jobs.get(&job).is_some_and(|j| {
                    j.partitions.get(p as usize) == Some(&PartitionState::Synthesizing)
                })
        });
        let mut out = Vec::new();
        let room = lane.saturating_sub(self.express.len());
        if room == 0 {
            return out;
        }
        'jobs: for &(Reverse(priority), job_id) in &self.order {
            if priority < PRIORITY_HIGH {
                break;
            }
            let Some(job) = self.jobs.get_mut(&job_id) else {
                continue;
            };
            for (p, state) in job.partitions.iter_mut().enumerate() {
                if *state == PartitionState::Pending {
                    *state = PartitionState::Synthesizing;
                    job.handed_out = true;
                    let mut req = request(job_id, &job.spec, p as u32, job.priority);
                    req.express = true;
                    self.express.insert((job_id, p as u32));
                    out.push(req);
                    if out.len() >= room {
                        break 'jobs;
                    }
                }
            }
        }
        self.counters.syntheses_requested += out.len() as u64;
        out
    }

    /// Partitions handed to synth-proc and not yet published or failed: those `Synthesizing`
    /// and those of ended jobs synth-proc still holds.
    pub fn outstanding(&self) -> usize {
        self.jobs
            .values()
            .map(|j| {
                j.partitions
                    .iter()
                    .filter(|s| **s == PartitionState::Synthesizing)
                    .count()
            })
            .sum::<usize>()
            + self.abandoned.len()
    }

    /// Partitions not yet handed to synth-proc (`Pending`).
    pub fn pending(&self) -> usize {
        self.jobs
            .values()
            .map(|j| {
                j.partitions
                    .iter()
                    .filter(|s| **s == PartitionState::Pending)
                    .count()
            })
            .sum()
    }

    /// Cancels a live job: it leaves the table at once (results that arrive for it later are
    /// ignored as duplicates) and its outcome is [`JobFailure::Cancelled`]. Also returns whether any of
    /// its partitions had been handed to synth-proc. `None`: no such live job.
    pub fn cancel(&mut self, job_id: u64) -> Option<(JobOutcome, bool)> {
        let job = self.remove(job_id)?;
        self.counters.cancelled += 1;
        let was_running = job.handed_out;
        Some((job.outcome(job_id, Err(JobFailure::Cancelled)), was_running))
    }

    /// Whether `job_id` was accepted by this table and has ended (succeeded, failed or
    /// cancelled).
    pub fn ended(&self, job_id: u64) -> bool {
        job_id < self.next_id && !self.jobs.contains_key(&job_id)
    }

    /// synth-proc died: every partition it had not published goes back to `Pending`, except those
    /// the ring still holds (`in_ring`: (job, partition) of slots READY, CLAIMED or DONE).
    pub fn synth_lost(&mut self, in_ring: &HashSet<(u64, u32)>) {
        self.abandoned.clear();
        for (&job_id, job) in &mut self.jobs {
            for (p, state) in job.partitions.iter_mut().enumerate() {
                if *state == PartitionState::Synthesizing {
                    *state = if in_ring.contains(&(job_id, p as u32)) {
                        PartitionState::InRing {
                            slot: UNKNOWN_SLOT,
                            generation: 0,
                        }
                    } else {
                        PartitionState::Pending
                    };
                }
            }
        }
    }

    /// synth-proc published a partition in `slot` at `generation`.
    pub fn published(&mut self, job_id: u64, partition: u32, slot: u32, generation: u64) {
        self.synth_ended(job_id, partition);
        if let Some(state) = self.partition_mut(job_id, partition) {
            if *state != PartitionState::Done {
                *state = PartitionState::InRing { slot, generation };
            }
        }
    }

    /// Checks a DONE slot against this table before its result is taken: the job and partition
    /// it names exist, the circuit is the job's, and where the table knows the slot the partition
    /// was published in, it is this slot at an earlier generation. A slot's metadata is written
    /// by a child, so a mismatch (a stale or misdirected slot) must never reach a job. The
    /// `Published` message may still be on its way (it comes from synth-proc, the slot from a
    /// gpu-proc), so a partition not yet marked in the ring passes on the other checks.
    pub fn check_done(
        &self,
        job_id: u64,
        partition: u32,
        circuit_id: u64,
        slot: u32,
        generation: u64,
    ) -> Result<(), String> {
        let Some(job) = self.jobs.get(&job_id) else {
            return Err(format!(
                "slot {slot} names job {job_id}, which is not in the table"
            ));
        };
        let Some(state) = job.partitions.get(partition as usize) else {
            return Err(format!(
                "slot {slot} names partition {partition} of job {job_id}, which has {}",
                job.partitions.len()
            ));
        };
        if job.spec.circuit_id != circuit_id {
            return Err(format!(
                "slot {slot} carries circuit {circuit_id:#x}, job {job_id} is circuit {:#x}",
                job.spec.circuit_id
            ));
        }
        match *state {
            PartitionState::InRing {
                slot: known,
                generation: published,
            } if known != UNKNOWN_SLOT && (known != slot || generation <= published) => {
                Err(format!(
                    "job {job_id} partition {partition} was published in slot {known} at \
                     generation {published}, not found in slot {slot} at generation {generation}"
                ))
            }
            _ => Ok(()),
        }
    }

    /// The partition the table knows was published in `slot` at a generation before
    /// `generation`: what a DONE slot at `generation` must hold, whatever its metadata says.
    /// Scans every live partition: called only for a refused slot.
    pub fn occupant(&self, slot: u32, generation: u64) -> Option<(u64, u32)> {
        self.jobs.iter().find_map(|(&id, job)| {
            job.partitions
                .iter()
                .position(|s| {
                    matches!(*s, PartitionState::InRing { slot: k, generation: p }
                        if k == slot && p < generation)
                })
                .map(|k| (id, k as u32))
        })
    }

    /// A partition's result (proof bytes, or the reason a child gave for failing it). Returns the
    /// job's outcome when this result ends the job: its last proof, or its first failure.
    pub fn result(
        &mut self,
        job_id: u64,
        partition: u32,
        result: Result<Vec<u8>, String>,
    ) -> Option<JobOutcome> {
        let Some(job) = self.jobs.get_mut(&job_id) else {
            self.counters.duplicate_results += 1;
            return None;
        };
        let p = partition as usize;
        if p >= job.partitions.len() || job.partitions[p] == PartitionState::Done {
            self.counters.duplicate_results += 1;
            return None;
        }
        match result {
            Err(reason) => {
                let job = self.remove(job_id)?;
                self.counters.failed += 1;
                Some(job.outcome(job_id, Err(JobFailure::Partition { partition, reason })))
            }
            Ok(proof) => {
                job.partitions[p] = PartitionState::Done;
                job.proofs[p] = Some(proof);
                if job.partitions.iter().all(|s| *s == PartitionState::Done) {
                    let mut job = self.remove(job_id)?;
                    self.counters.succeeded += 1;
                    let proofs = std::mem::take(&mut job.proofs)
                        .into_iter()
                        .map(|p| p.unwrap_or_default())
                        .collect();
                    Some(job.outcome(job_id, Ok(proofs)))
                } else {
                    None
                }
            }
        }
    }

    /// One attempt of `partition` of `job_id` failed for `reason`. Below `max_attempts` failures
    /// the partition is retried: with `resynthesize` it goes back to `Pending` (its synthesis is
    /// gone: a refused proof or slot), else it keeps its state (the ring still holds it, READY
    /// again, or synth-proc's loss re-queues it). At `max_attempts` the job fails with every
    /// reason collected.
    pub fn attempt_failed(
        &mut self,
        job_id: u64,
        partition: u32,
        reason: AttemptFailure,
        max_attempts: u32,
        resynthesize: bool,
    ) -> Attempt {
        let Some(job) = self.jobs.get_mut(&job_id) else {
            return Attempt::Ignored;
        };
        let Some(state) = job.partitions.get_mut(partition as usize) else {
            return Attempt::Ignored;
        };
        if *state == PartitionState::Done {
            return Attempt::Ignored;
        }
        let reasons = job.attempts.entry(partition).or_default();
        reasons.push(reason);
        let attempts = reasons.len() as u32;
        if attempts < max_attempts.max(1) {
            if resynthesize {
                *state = PartitionState::Pending;
            }
            return Attempt::Retry { attempts };
        }
        let Some(mut job) = self.remove(job_id) else {
            return Attempt::Ignored;
        };
        let reasons = job.attempts.remove(&partition).unwrap_or_default();
        self.counters.failed += 1;
        Attempt::JobFailed(job.outcome(job_id, Err(JobFailure::Attempts { partition, reasons })))
    }

    /// Failed attempts of a partition so far.
    pub fn attempts(&self, job_id: u64, partition: u32) -> u32 {
        self.jobs
            .get(&job_id)
            .and_then(|j| j.attempts.get(&partition))
            .map_or(0, |r| r.len() as u32)
    }

    /// Whether `partition` of `job_id` still waits for its proof (the job is live and the
    /// partition not done).
    pub fn waiting(&self, job_id: u64, partition: u32) -> bool {
        self.jobs
            .get(&job_id)
            .and_then(|j| j.partitions.get(partition as usize))
            .is_some_and(|s| *s != PartitionState::Done)
    }

    /// The circuit id of a live job.
    pub fn circuit_id(&self, job_id: u64) -> Option<u64> {
        self.jobs.get(&job_id).map(|j| j.spec.circuit_id)
    }

    /// The circuit spec of a live job.
    pub fn circuit(&self, job_id: u64) -> Option<&str> {
        self.jobs.get(&job_id).map(|j| j.spec.circuit.as_str())
    }

    /// Puts requests taken by [`JobTable::take_pending`] but not delivered to synth-proc (its
    /// queue was full) back to `Pending`, to be taken again later.
    pub fn unsend(&mut self, requests: &[SynthRequest]) {
        for r in requests {
            if let Some(state) = self.partition_mut(r.job_id, r.partition) {
                if *state == PartitionState::Synthesizing {
                    *state = PartitionState::Pending;
                    self.counters.syntheses_requested =
                        self.counters.syntheses_requested.saturating_sub(1);
                }
            }
        }
    }

    /// Fails a whole job (a role given up, the pipeline shut down).
    pub fn fail(&mut self, job_id: u64, reason: JobFailure) -> Option<JobOutcome> {
        let job = self.remove(job_id)?;
        self.counters.failed += 1;
        Some(job.outcome(job_id, Err(reason)))
    }

    /// Whether the job is still live.
    pub fn contains(&self, job_id: u64) -> bool {
        self.jobs.contains_key(&job_id)
    }

    /// Jobs still live.
    pub fn live(&self) -> usize {
        self.jobs.len()
    }

    /// The counters, to update from the dispatcher.
    pub fn counters_mut(&mut self) -> &mut JobCounters {
        &mut self.counters
    }

    /// The counters.
    pub fn counters(&self) -> JobCounters {
        self.counters
    }

    /// Live jobs handed out before live job `job_id` (a higher priority, or the same and
    /// older); `None` when it is not live. Counted in the hand-out order, nothing built.
    pub fn ahead_of(&self, job_id: u64) -> Option<usize> {
        let priority = self.jobs.get(&job_id)?.priority;
        Some(self.order.range(..(Reverse(priority), job_id)).count())
    }

    /// One line per live job.
    pub fn summaries(&self) -> Vec<JobSummary> {
        self.jobs
            .iter()
            .map(|(&job_id, job)| JobSummary {
                job_id,
                circuit: job.spec.circuit.clone(),
                done: job
                    .partitions
                    .iter()
                    .filter(|s| **s == PartitionState::Done)
                    .count(),
                partitions: job.partitions.len(),
                in_ring: job
                    .partitions
                    .iter()
                    .filter(|s| matches!(s, PartitionState::InRing { .. }))
                    .count(),
                priority: job.priority,
                running: job.handed_out,
            })
            .collect()
    }

    /// Adds `took` to a live job's `phase`; the first synthesis start also ends its queue wait.
    pub fn add_time(&mut self, job_id: u64, phase: Phase, took: Duration) {
        if let Some(job) = self.jobs.get_mut(&job_id) {
            let t = &mut job.times;
            match phase {
                Phase::Synthesis => t.synthesis += took,
                Phase::Gpu => t.gpu += took,
                Phase::Verify => t.verify += took,
            }
        }
    }

    /// A partition of `job_id` started its synthesis: the first one ends the job's queue wait.
    pub fn synthesis_started(&mut self, job_id: u64) {
        if let Some(job) = self.jobs.get_mut(&job_id) {
            if job.times.queue_wait.is_zero() {
                job.times.queue_wait = job.submitted.elapsed().max(Duration::from_nanos(1));
            }
        }
    }

    fn partition_mut(&mut self, job_id: u64, partition: u32) -> Option<&mut PartitionState> {
        self.jobs
            .get_mut(&job_id)?
            .partitions
            .get_mut(partition as usize)
    }
}

fn request(job_id: u64, spec: &JobSpec, partition: u32, priority: i32) -> SynthRequest {
    SynthRequest {
        job_id,
        partition,
        circuit: spec.circuit.clone(),
        circuit_id: spec.circuit_id,
        request: spec.request.clone(),
        priority,
        express: false,
        witness: spec.witness,
    }
}

#[cfg(test)]
mod tests {
    use super::super::events::Role;
    use super::super::failure::{ChildLoss, Holding};
    use super::*;

    fn spec(partitions: u32) -> JobSpec {
        JobSpec {
            circuit: "sha-chain:1".into(),
            circuit_id: 9,
            partitions,
            request: JobRequest::Inline(
                kernels::job::BuiltinRequest {
                    seed: 100,
                    partitions,
                }
                .to_bytes(),
            ),
            witness: false,
        }
    }

    #[test]
    fn a_given_id_is_the_jobs_id_automatic_ids_follow_it_and_a_live_one_is_refused() {
        let mut t = JobTable::new(1);
        assert_eq!(t.submit(spec(1)), 1);
        // The service's journal ids: given, not necessarily in order (re-queued by priority).
        assert!(t.submit_as(17, spec(2), PRIORITY_NORMAL));
        assert!(t.submit_as(9, spec(1), PRIORITY_HIGH));
        assert_eq!(t.circuit_id(17), Some(9));
        assert_eq!(t.ahead_of(17), Some(2));
        // Automatic ids never meet a given one.
        assert_eq!(t.submit(spec(1)), 18);
        // A live id is refused and nothing changes.
        let before = t.counters();
        assert!(!t.submit_as(17, spec(5), PRIORITY_CRITICAL));
        assert_eq!(t.counters(), before);
        assert_eq!(
            t.summaries()
                .iter()
                .find(|j| j.job_id == 17)
                .unwrap()
                .partitions,
            2
        );
        // Once it has ended it is no longer live (the caller never gives it again).
        assert!(t.cancel(17).is_some());
        assert!(t.ended(17));
        assert_eq!(t.submit(spec(1)), 19);
    }

    #[test]
    fn a_job_completes_when_every_partition_has_a_proof_in_order() {
        let mut t = JobTable::new(1);
        let id = t.submit(spec(3));
        let reqs = t.take_pending(usize::MAX);
        assert_eq!(reqs.len(), 3);
        // Every request carries the job's request; partition 2 of a seed-100 job is proved with
        // seed 102 (`kernels::job` tests that).
        assert_eq!(reqs[2].partition, 2);
        assert_eq!(reqs[2].request, spec(3).request);
        assert!(
            t.take_pending(usize::MAX).is_empty(),
            "requests are handed out once"
        );
        t.published(id, 1, 4, 17);
        assert!(t.result(id, 1, Ok(vec![1])).is_none());
        assert!(t.result(id, 0, Ok(vec![0])).is_none());
        let out = t
            .result(id, 2, Ok(vec![2]))
            .expect("last partition ends the job");
        assert_eq!(out.result.unwrap(), vec![vec![0], vec![1], vec![2]]);
        assert_eq!(t.live(), 0);
        assert_eq!(t.counters().succeeded, 1);
    }

    #[test]
    fn done_slots_are_checked_against_the_table() {
        let mut t = JobTable::new(1);
        let id = t.submit(spec(2));
        let circuit = spec(2).circuit_id;
        t.take_pending(usize::MAX);
        t.published(id, 0, 3, 10);
        // The slot it was published in, later: fine.
        t.check_done(id, 0, circuit, 3, 12).unwrap();
        // Another slot, or not later than the publish: a stale or misdirected slot.
        assert!(t
            .check_done(id, 0, circuit, 4, 12)
            .unwrap_err()
            .contains("slot 3"));
        assert!(t.check_done(id, 0, circuit, 3, 10).is_err());
        // Another circuit, an unknown job or partition.
        assert!(t
            .check_done(id, 0, circuit ^ 1, 3, 12)
            .unwrap_err()
            .contains("circuit"));
        assert!(t.check_done(id + 9, 0, circuit, 3, 12).is_err());
        assert!(t.check_done(id, 2, circuit, 3, 12).is_err());
        // Whatever a refused slot names, the table knows what it holds.
        assert_eq!(t.occupant(3, 12), Some((id, 0)));
        assert_eq!(t.occupant(3, 10), None, "not later than the publish");
        assert_eq!(t.occupant(4, 12), None);
        // Partition 1's `Published` may still be on its way: it passes on the other checks.
        t.check_done(id, 1, circuit, 6, 2).unwrap();
        // Known to be in the ring, its slot lost with synth-proc: passes too.
        t.synth_lost(&[(id, 1)].into_iter().collect());
        t.check_done(id, 1, circuit, 6, 2).unwrap();
    }

    #[test]
    fn a_failure_ends_the_job_and_later_results_are_ignored() {
        let mut t = JobTable::new(1);
        let id = t.submit(spec(2));
        t.take_pending(usize::MAX);
        let out = t.result(id, 0, Err("bad slot: a offset".into())).unwrap();
        assert_eq!(
            out.result.unwrap_err(),
            JobFailure::Partition {
                partition: 0,
                reason: "bad slot: a offset".into()
            }
        );
        assert!(t.result(id, 1, Ok(vec![1])).is_none());
        assert_eq!(t.counters().duplicate_results, 1);
        assert_eq!(t.counters().failed, 1);
    }

    #[test]
    fn synth_crash_resends_only_partitions_the_ring_does_not_hold() {
        let mut t = JobTable::new(1);
        let id = t.submit(spec(4));
        t.take_pending(usize::MAX);
        // Partition 0 is known READY; partition 1 was published but its message was lost with
        // the process.
        t.published(id, 0, 0, 5);
        let in_ring: HashSet<_> = [(id, 0), (id, 1)].into_iter().collect();
        t.synth_lost(&in_ring);
        let again: Vec<u32> = t
            .take_pending(usize::MAX)
            .iter()
            .map(|r| r.partition)
            .collect();
        assert_eq!(again, vec![2, 3]);
        assert_eq!(t.counters().syntheses_requested, 6);
    }

    fn died() -> AttemptFailure {
        AttemptFailure::Lost {
            why: ChildLoss::Died {
                role: Role::Gpu(0),
                status: "killed by signal 9".into(),
            },
            doing: Holding::Proving,
        }
    }

    fn late() -> AttemptFailure {
        AttemptFailure::Lost {
            why: ChildLoss::ProvingLate {
                role: Role::Gpu(0),
                deadline: std::time::Duration::from_secs(60),
            },
            doing: Holding::Proving,
        }
    }

    fn refused() -> AttemptFailure {
        AttemptFailure::Rejected(super::super::events::ProofRejection::DoesNotVerify)
    }

    #[test]
    fn a_partition_is_retried_until_its_attempts_run_out_then_its_job_fails_with_every_reason() {
        let mut t = JobTable::new(1);
        let id = t.submit(spec(2));
        t.take_pending(usize::MAX);
        t.published(id, 1, 2, 4);
        // First failure: retried, keeping its place in the ring.
        assert!(matches!(
            t.attempt_failed(id, 1, died(), 2, false),
            Attempt::Retry { attempts: 1 }
        ));
        assert_eq!(t.attempts(id, 1), 1);
        assert!(t.take_pending(usize::MAX).is_empty(), "still in the ring");
        // A refused proof: re-synthesized.
        assert!(matches!(
            t.attempt_failed(id, 0, refused(), 3, true),
            Attempt::Retry { attempts: 1 }
        ));
        assert_eq!(
            t.take_pending(usize::MAX)
                .iter()
                .map(|r| r.partition)
                .collect::<Vec<_>>(),
            vec![0]
        );
        // Second failure of partition 1 with K = 2: the job fails, naming both reasons.
        let Attempt::JobFailed(out) = t.attempt_failed(id, 1, late(), 2, false) else {
            panic!("the job must fail at the limit");
        };
        assert_eq!(
            out.result.unwrap_err(),
            JobFailure::Attempts {
                partition: 1,
                reasons: vec![died(), late()]
            }
        );
        assert_eq!((t.live(), t.counters().failed), (0, 1));
        // Later failures of the ended job are ignored.
        assert!(matches!(
            t.attempt_failed(id, 0, late(), 2, false),
            Attempt::Ignored
        ));
    }

    #[test]
    fn requests_that_could_not_be_sent_are_taken_again() {
        let mut t = JobTable::new(1);
        let id = t.submit(spec(3));
        let reqs = t.take_pending(usize::MAX);
        t.unsend(&reqs[1..]);
        assert_eq!(
            t.take_pending(usize::MAX)
                .iter()
                .map(|r| (r.job_id, r.partition))
                .collect::<Vec<_>>(),
            vec![(id, 1), (id, 2)]
        );
        assert_eq!(t.counters().syntheses_requested, 3);
    }

    #[test]
    fn duplicate_proof_for_a_done_partition_is_counted_not_used() {
        let mut t = JobTable::new(1);
        let id = t.submit(spec(2));
        t.take_pending(usize::MAX);
        assert!(t.result(id, 0, Ok(vec![7])).is_none());
        assert!(t.result(id, 0, Ok(vec![8])).is_none());
        let out = t.result(id, 1, Ok(vec![9])).unwrap();
        assert_eq!(out.result.unwrap()[0], vec![7]);
        assert_eq!(t.counters().duplicate_results, 1);
    }

    #[test]
    fn jobs_ahead_are_those_of_higher_priority_then_older_ones() {
        let mut t = JobTable::new(1);
        let a = t.submit(spec(1));
        let b = t.submit_at(spec(1), PRIORITY_LOW);
        let c = t.submit_at(spec(1), PRIORITY_CRITICAL);
        let d = t.submit(spec(1));
        assert_eq!(t.ahead_of(c), Some(0));
        assert_eq!(t.ahead_of(a), Some(1));
        assert_eq!(t.ahead_of(d), Some(2));
        assert_eq!(t.ahead_of(b), Some(3));
        t.cancel(a).unwrap();
        assert_eq!(t.ahead_of(a), None, "an ended job is not live");
        assert_eq!(t.ahead_of(d), Some(1));
        assert_eq!(t.ahead_of(b), Some(2));
        assert_eq!(t.ahead_of(99), None);
    }

    fn ids(reqs: &[SynthRequest]) -> Vec<(u64, u32)> {
        reqs.iter().map(|r| (r.job_id, r.partition)).collect()
    }

    #[test]
    fn pending_partitions_go_out_by_priority_then_age_and_at_most_the_limit() {
        let mut t = JobTable::new(1);
        let a = t.submit(spec(2));
        let b = t.submit_at(spec(1), PRIORITY_LOW);
        let c = t.submit_at(spec(2), PRIORITY_CRITICAL);
        let d = t.submit_at(spec(1), PRIORITY_CRITICAL);
        assert_eq!(ids(&t.take_pending(0)), vec![]);
        let first = t.take_pending(3);
        assert_eq!(ids(&first), vec![(c, 0), (c, 1), (d, 0)]);
        assert!(
            first.iter().all(|r| r.priority == PRIORITY_CRITICAL),
            "requests carry their job's priority to the GPU claim"
        );
        assert_eq!(t.outstanding(), 3);
        assert_eq!(t.pending(), 3);
        // A partition sent back (synth-proc lost it) keeps its job's place.
        t.synth_lost(&HashSet::new());
        assert_eq!(t.outstanding(), 0);
        assert_eq!(ids(&t.take_pending(1)), vec![(c, 0)]);
        assert_eq!(
            ids(&t.take_pending(usize::MAX)),
            vec![(c, 1), (d, 0), (a, 0), (a, 1), (b, 0)]
        );
        assert_eq!((t.outstanding(), t.pending()), (6, 0));
        t.published(a, 0, 1, 2);
        assert_eq!(t.outstanding(), 5);
    }

    #[test]
    fn default_priorities_follow_the_proof_kind_and_the_scale_is_checked() {
        assert_eq!(
            default_priority("post:StackedDrgWinning2KiBV1"),
            PRIORITY_CRITICAL
        );
        assert_eq!(
            default_priority("post:StackedDrgWindow2KiBV1_2"),
            PRIORITY_HIGH
        );
        assert_eq!(
            default_priority("porep:StackedDrg2KiBV1_1"),
            PRIORITY_NORMAL
        );
        assert_eq!(default_priority("sha-chain:1"), PRIORITY_NORMAL);
        assert_eq!(effective_priority("sha-chain:1", 0), Some(PRIORITY_NORMAL));
        assert_eq!(effective_priority("sha-chain:1", 1), Some(PRIORITY_LOW));
        assert_eq!(
            effective_priority("post:StackedDrgWinning2KiBV1", 0),
            Some(4)
        );
        assert_eq!(effective_priority("sha-chain:1", 5), None);
        assert_eq!(effective_priority("sha-chain:1", -1), None);
    }

    #[test]
    fn a_cancelled_job_leaves_the_table_and_its_late_results_are_ignored() {
        let mut t = JobTable::new(1);
        let queued = t.submit(spec(2));
        let (out, was_running) = t.cancel(queued).unwrap();
        assert!(!was_running);
        assert_eq!(out.result.unwrap_err(), JobFailure::Cancelled);
        assert!(t.ended(queued) && !t.ended(queued + 1));
        assert!(t.cancel(queued).is_none(), "only once");
        let running = t.submit(spec(2));
        assert_eq!(ids(&t.take_pending(1)), vec![(running, 0)]);
        let (_, was_running) = t.cancel(running).unwrap();
        assert!(was_running);
        assert!(t.take_pending(usize::MAX).is_empty());
        // synth-proc still holds its partition 0: it counts until published or failed.
        assert_eq!(t.outstanding(), 1);
        t.synth_ended(running, 0);
        assert_eq!(t.outstanding(), 0);
        let failing = t.submit(spec(2));
        t.take_pending(usize::MAX);
        t.published(failing, 1, 0, 1);
        t.fail(failing, JobFailure::ShutDown).unwrap();
        assert_eq!(t.outstanding(), 1, "partition 0 is still at synth-proc");
        t.published(failing, 0, 1, 1);
        assert_eq!(t.outstanding(), 0);
        let lost = t.submit(spec(1));
        t.take_pending(usize::MAX);
        t.cancel(lost).unwrap();
        t.synth_lost(&HashSet::new());
        assert_eq!(t.outstanding(), 0, "a dead synth-proc holds nothing");
        assert!(t.result(running, 0, Ok(vec![1])).is_none());
        let c = t.counters();
        assert_eq!((c.cancelled, c.failed, c.duplicate_results), (3, 1, 1));
        assert_eq!(t.live(), 0);
    }

    #[test]
    fn the_express_lane_takes_only_high_and_critical_partitions_a_few_at_a_time() {
        let mut t = JobTable::new(1);
        let normal = t.submit_at(spec(3), PRIORITY_NORMAL);
        let window = t.submit_at(spec(3), PRIORITY_HIGH);
        let winning = t.submit_at(spec(1), PRIORITY_CRITICAL);
        let lane = t.take_express(2);
        let got: Vec<(u64, u32, bool)> = lane
            .iter()
            .map(|r| (r.job_id, r.partition, r.express))
            .collect();
        assert_eq!(got, vec![(winning, 0, true), (window, 0, true)]);
        // Full: nothing more until one leaves the lane.
        assert!(t.take_express(2).is_empty());
        t.published(winning, 0, 0, 1);
        let next: Vec<(u64, u32)> = t
            .take_express(2)
            .iter()
            .map(|r| (r.job_id, r.partition))
            .collect();
        assert_eq!(next, vec![(window, 1)]);
        // The window hands out the rest, NORMAL included, never marked express.
        let rest = t.take_pending(10);
        assert!(rest.iter().all(|r| !r.express));
        assert_eq!(
            rest.iter()
                .map(|r| (r.job_id, r.partition))
                .collect::<Vec<_>>(),
            vec![(window, 2), (normal, 0), (normal, 1), (normal, 2)]
        );
    }
}
