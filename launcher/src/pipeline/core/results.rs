//! The end of a partition's path, as [`Core`] transitions: DONE slots taken and cross-checked
//! against the job table, proofs handed to the verifier pool and their verdicts applied, failed
//! attempts counted, outcomes delivered to the waiters, READY slots of ended jobs freed unproved.
//!
//! Order: a DONE slot is freed as soon as its result is read (the ring never waits for a check);
//! its proof is stored with the job only when its verdict says it verified, so a job's outcome
//! carries only verified proofs and is sent once, when the last partition verified. A proof that
//! does not verify fails one attempt and its partition is synthesized again. A result or verdict
//! for a job that ended meanwhile (cancelled, failed) is counted as a duplicate and dropped.

use shm_protocol::control::{EventKind, TimelineEvent, NO_SLOT};
use shm_protocol::{SlotResult, SlotState};

use super::events::ProofRejection;
use super::events::{Verdict, VerifyTask};
use super::failure::AttemptFailure;
use super::jobs::{Attempt, JobOutcome, Phase};
use super::machine::Core;
use super::Action;

impl Core {
    /// Hands a job's outcome to its waiter ([`Action::Deliver`]) and forgets the job.
    pub(crate) fn deliver(&mut self, outcome: JobOutcome) {
        // The request memfd goes with the job.
        self.live.remove(&outcome.job_id);
        for p in 0..outcome.spec.partitions {
            self.progress.record(TimelineEvent::now(
                EventKind::ProofDone,
                outcome.job_id,
                p,
                NO_SLOT,
            ));
        }
        match &outcome.result {
            Ok(_) => tracing::info!(
                job = outcome.job_id,
                ms = outcome.elapsed.as_millis() as u64,
                "job done"
            ),
            Err(e) => tracing::warn!(job = outcome.job_id, "job failed: {e}"),
        }
        let failed = outcome.result.is_err();
        self.act(Action::Deliver(outcome));
        if failed {
            self.discard_orphans();
        }
    }

    /// Takes READY slots whose partition nobody waits for any more (their job ended) out of the
    /// ring, so no gpu-proc proves (or dies on) them again.
    pub(crate) fn discard_orphans(&mut self) {
        let owner = shm_protocol::current_owner();
        let ring = self.ring.clone();
        for s in ring.snapshot() {
            let (Some(SlotState::Ready), Some(meta)) = (s.state, s.meta) else {
                continue;
            };
            if self.jobs.waiting(meta.job_id, meta.partition) {
                continue;
            }
            match ring.claim_ready_at(owner, s.index, s.generation) {
                Ok(Some(claimed)) => {
                    let m = claimed.meta();
                    if self.jobs.waiting(m.job_id, m.partition) {
                        // Rewritten since the snapshot: someone waits for this one.
                        let _ = claimed.release();
                        continue;
                    }
                    match claimed.discard() {
                        Ok(()) => {
                            tracing::info!(
                                slot = s.index,
                                job = m.job_id,
                                partition = m.partition,
                                "slot of an ended job freed unproved"
                            );
                            self.counters.slots_discarded += 1;
                        }
                        Err(e) => tracing::warn!(slot = s.index, "cannot free a slot: {e}"),
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(slot = s.index, "cannot claim a slot to free it: {e}"),
            }
        }
    }

    /// One failed attempt of a partition (see [`JobTable::attempt_failed`](super::jobs::JobTable::attempt_failed)).
    pub(crate) fn attempt_failed(
        &mut self,
        job_id: u64,
        partition: u32,
        reason: AttemptFailure,
        resynthesize: bool,
    ) {
        let max = self.rules.faults.max_attempts;
        let text = reason.to_string();
        match self
            .jobs
            .attempt_failed(job_id, partition, reason, max, resynthesize)
        {
            Attempt::Ignored => {}
            Attempt::Retry { attempts } => {
                self.counters.failed_attempts += 1;
                tracing::warn!(
                    job = job_id,
                    partition,
                    attempts,
                    max,
                    "attempt failed, retrying: {text}"
                );
                if resynthesize {
                    self.pump_synth();
                }
            }
            Attempt::JobFailed(outcome) => {
                self.counters.failed_attempts += 1;
                self.deliver(outcome);
            }
        }
    }

    /// Collects every DONE slot: frees it, checks it against the job table, and hands its proof
    /// to the check (or stores a failure with its job).
    pub(crate) fn sweep_done(&mut self) {
        let owner = shm_protocol::current_owner();
        let ring = self.ring.clone();
        loop {
            let done = match ring.try_take_done(owner) {
                Ok(Some(d)) => d,
                Ok(None) => break,
                Err(e) => {
                    tracing::error!("collecting done slots: {e}");
                    break;
                }
            };
            let meta = done.meta();
            let (slot, generation) = (done.index() as u32, done.generation());
            if self.jobs.ended(meta.job_id) && self.jobs.occupant(slot, generation).is_none() {
                // The result of a job that ended (cancelled, or failed) while this slot was
                // CLAIMED: nobody waits for it, and the table knows no other partition in it.
                if let Err(e) = done.free() {
                    tracing::error!("freeing a done slot: {e}");
                }
                tracing::debug!(
                    slot,
                    job = meta.job_id,
                    partition = meta.partition,
                    "result of an ended job dropped"
                );
                self.jobs.counters_mut().duplicate_results += 1;
                continue;
            }
            let result = match done.result() {
                Ok(SlotResult::Proof(bytes)) => Ok(bytes.to_vec()),
                Ok(SlotResult::Failed(msg)) => Err(msg.to_owned()),
                Err(e) => Err(format!("unreadable result in slot {}: {e}", done.index())),
            };
            if let Err(e) = done.free() {
                tracing::error!("freeing a done slot: {e}");
            }
            if let Err(e) = self.jobs.check_done(
                meta.job_id,
                meta.partition,
                meta.circuit_id,
                slot,
                generation,
            ) {
                tracing::error!("done slot refused: {e}");
                self.jobs.counters_mut().mismatched_results += 1;
                let reason = AttemptFailure::SlotRefused(e);
                // The slot's metadata is a child's word: the partition that was published in
                // this slot is what it held, and that one is synthesized again (the partition
                // the metadata names, if any, has a slot of its own). Before the `Published` of
                // what it held arrives nobody knows it: the refusal waits for that message.
                match self.jobs.occupant(slot, generation) {
                    Some((job, partition)) => self.attempt_failed(job, partition, reason, true),
                    None => {
                        self.refused_done.insert(slot, (generation, reason));
                    }
                }
                continue;
            }
            match result {
                Ok(proof) => self.check_proof(meta.job_id, meta.partition, meta.circuit_id, proof),
                Err(e) => {
                    if let Some(outcome) = self.jobs.result(meta.job_id, meta.partition, Err(e)) {
                        self.deliver(outcome);
                    }
                }
            }
        }
    }

    /// Hands a proof to the verifier pool (`Action::Verify`), or settles it at once: unchecked
    /// when checks are off, a duplicate when its job is no longer live, refused when the slot
    /// names a circuit or partition the job does not have.
    fn check_proof(&mut self, job_id: u64, partition: u32, circuit_id: u64, proof: Vec<u8>) {
        if !self.rules.verify {
            return self.proved(job_id, partition, proof);
        }
        let Some(entry) = self.circuits.get(&circuit_id) else {
            let why = ProofRejection::UnknownCircuit(circuit_id);
            return self.attempt_failed(job_id, partition, AttemptFailure::Rejected(why), true);
        };
        // A job no longer live has ended: this result is a duplicate the job table ignores.
        let Some(live) = self.live.get(&job_id) else {
            return self.proved(job_id, partition, proof);
        };
        let Some(inputs) = live.inputs.get(partition as usize) else {
            let why = ProofRejection::NoSuchPartition(partition);
            return self.attempt_failed(job_id, partition, AttemptFailure::Rejected(why), true);
        };
        let task = VerifyTask {
            job_id,
            partition,
            proof,
            inputs: inputs.clone(),
            pvk: entry.pvk.clone(),
        };
        self.verifying += 1;
        self.act(Action::Verify(task));
    }

    /// A proof's verdict came back from the verifier pool.
    pub(crate) fn on_verdict(&mut self, v: Verdict) {
        self.verifying = self.verifying.saturating_sub(1);
        self.jobs.add_time(v.job_id, Phase::Verify, v.took);
        match v.result {
            Ok(()) => self.proved(v.job_id, v.partition, v.proof),
            Err(why) => {
                self.attempt_failed(v.job_id, v.partition, AttemptFailure::Rejected(why), true)
            }
        }
    }

    /// A partition's proof is settled: stored with its job, which is delivered when it was the
    /// last one (a duplicate, or one of an ended job, is counted and dropped).
    fn proved(&mut self, job_id: u64, partition: u32, proof: Vec<u8>) {
        if let Some(outcome) = self.jobs.result(job_id, partition, Ok(proof)) {
            self.deliver(outcome);
        }
    }
}
