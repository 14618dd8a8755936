//! Status and recovery: [`Ring::snapshot`], [`Ring::counts`], the reclaims and their reports.

use std::fmt;

use super::{Event, Ring};
use crate::slot::SlotMeta;
use crate::state::{self, SlotState, SlotTable, Word};
use crate::sync::Ordering;

/// One slot as seen by [`Ring::snapshot`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotSnapshot {
    /// Slot index.
    pub index: usize,
    /// The state; `None` for an undecodable word.
    pub state: Option<SlotState>,
    /// Generation of the state word.
    pub generation: u64,
    /// Owning pid, if any.
    pub owner: Option<u32>,
    /// Meta, once `begin` ran and if it was read consistently.
    pub meta: Option<SlotMeta>,
    /// Bytes of the slot's data span (its class's size).
    pub slot_bytes: u64,
}

/// Number of slots per state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateCounts {
    /// FREE slots.
    pub free: usize,
    /// WRITING slots.
    pub writing: usize,
    /// READY slots.
    pub ready: usize,
    /// CLAIMED slots.
    pub claimed: usize,
    /// DONE slots.
    pub done: usize,
    /// Slots with an undecodable state word.
    pub corrupt: usize,
}

impl fmt::Display for StateCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "free {} writing {} ready {} claimed {} done {}",
            self.free, self.writing, self.ready, self.claimed, self.done
        )?;
        if self.corrupt != 0 {
            write!(f, " corrupt {}", self.corrupt)?;
        }
        Ok(())
    }
}

/// One slot moved by a reclaim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReclaimedSlot {
    /// Slot index.
    pub index: usize,
    /// The dead owner.
    pub owner: u32,
    /// The state it was taken from.
    pub from: SlotState,
    /// Generation of the new state word.
    pub generation: u64,
    /// The job in the slot. `None` for a WRITING slot whose producer died before (or during)
    /// `begin`: the launcher then re-queues from its own record of what it assigned to that
    /// producer.
    pub meta: Option<SlotMeta>,
}

/// What [`Ring::reclaim_owner`] / [`Ring::reclaim_dead`] moved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReclaimReport {
    /// WRITING slots returned to FREE: re-queue these jobs' partitions.
    pub writing_freed: Vec<ReclaimedSlot>,
    /// CLAIMED slots returned to READY: they will be proved again.
    pub claimed_requeued: Vec<ReclaimedSlot>,
    /// DONE slots whose collector died, left DONE for collection.
    pub done_released: Vec<ReclaimedSlot>,
}

impl ReclaimReport {
    /// Nothing was reclaimed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slots reclaimed.
    pub fn len(&self) -> usize {
        self.writing_freed.len() + self.claimed_requeued.len() + self.done_released.len()
    }

    fn merge(&mut self, other: ReclaimReport) {
        self.writing_freed.extend(other.writing_freed);
        self.claimed_requeued.extend(other.claimed_requeued);
        self.done_released.extend(other.done_released);
    }
}

/// Whether process `pid` is alive: it exists and is not a zombie. A pid can be reused after the
/// process was reaped, so a launcher should reclaim its children's slots as soon as it reaps
/// them ([`Ring::reclaim_owner`]); this check is for the sweep after a restart.
pub fn pid_alive(pid: u32) -> bool {
    let Some(p) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    match rustix::process::test_kill_process(p) {
        Err(rustix::io::Errno::SRCH) => false,
        // Ok, or EPERM: it exists (owned by another user). Zombies pass kill(0) too.
        _ => match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => {
                let state = stat
                    .rsplit_once(')')
                    .and_then(|(_, rest)| rest.trim_start().chars().next());
                !matches!(state, Some('Z' | 'X'))
            }
            Err(_) => true,
        },
    }
}

impl Ring {
    /// One line per slot: state, generation, owner and (when stable) meta.
    pub fn snapshot(&self) -> Vec<SlotSnapshot> {
        (0..self.slot_count)
            .map(|index| {
                let (word, meta) = self.read_meta_consistent(index);
                SlotSnapshot {
                    index,
                    state: word.state(),
                    generation: word.generation(),
                    owner: (word.owner() != 0).then_some(word.owner()),
                    meta,
                    slot_bytes: self.slot_capacity(index),
                }
            })
            .collect()
    }

    /// How many slots are in each state.
    pub fn counts(&self) -> StateCounts {
        let mut c = StateCounts::default();
        for i in 0..self.slot_count {
            match self.ctl(i).load().state() {
                Some(SlotState::Free) => c.free += 1,
                Some(SlotState::Writing) => c.writing += 1,
                Some(SlotState::Ready) => c.ready += 1,
                Some(SlotState::Claimed) => c.claimed += 1,
                Some(SlotState::Done) => c.done += 1,
                None => c.corrupt += 1,
            }
        }
        c
    }

    /// Takes every slot owned by `owner` back: WRITING → FREE, CLAIMED → READY (the synthesis is
    /// kept, its meta's `attempt` bumped so consumers prove it alone next time: it may be what
    /// killed its prover), DONE being collected → DONE. Idempotent. Only call it for an owner
    /// that is dead (reaped): a live one could still write the memory it held.
    pub fn reclaim_owner(&self, owner: u32) -> ReclaimReport {
        let moved = state::reclaim_owner(self, owner, |index, word| {
            if word.has_meta() && word.is(SlotState::Claimed) {
                // The owner is dead, so nobody else writes this CLAIMED slot's header; the
                // Release CAS to READY that follows publishes the bump to the next consumer.
                // (If that CAS fails and is retried, the count goes up twice: consumers only
                // test it against 0.)
                self.slot_header(index)
                    .attempt
                    .fetch_add(1, Ordering::Relaxed);
            }
            if word.has_meta() {
                // The Acquire load that saw M set ordered the meta stores before these reads.
                // Meta is rewritten only after the slot left `word` through another CAS on the
                // same word; then the CAS that follows fails (two RMWs cannot both read `word`)
                // and this read is discarded.
                Some(self.read_meta(index))
            } else {
                None
            }
        });
        let mut report = ReclaimReport::default();
        let (mut free, mut ready, mut done) = (false, false, false);
        for m in moved {
            let slot = ReclaimedSlot {
                index: m.index,
                owner,
                from: m.from.state().unwrap_or(SlotState::Free),
                generation: m.to.generation(),
                meta: m.peeked,
            };
            tracing::warn!(
                slot = slot.index,
                owner,
                from = %slot.from,
                job_id = slot.meta.map(|m| m.job_id),
                partition = slot.meta.map(|m| m.partition),
                "reclaimed slot of dead owner"
            );
            match slot.from {
                SlotState::Writing => {
                    free = true;
                    report.writing_freed.push(slot)
                }
                SlotState::Claimed => {
                    ready = true;
                    report.claimed_requeued.push(slot)
                }
                _ => {
                    done = true;
                    report.done_released.push(slot)
                }
            }
        }
        if free {
            self.notify(Event::Free);
        }
        if ready {
            self.notify(Event::Ready);
        }
        if done {
            self.notify(Event::Done);
        }
        report
    }

    /// Reclaims the slots of every owner that is no longer alive ([`pid_alive`]); the sweep a
    /// launcher runs after restarting or on a timer. Never reclaims this process's own slots.
    pub fn reclaim_dead(&self) -> ReclaimReport {
        let me = std::process::id();
        let mut owners: Vec<u32> = (0..self.slot_count)
            .map(|i| self.ctl(i).load().owner())
            .collect();
        owners.sort_unstable();
        owners.dedup();
        let mut report = ReclaimReport::default();
        for owner in owners {
            if owner != 0 && owner != me && !pid_alive(owner) {
                report.merge(self.reclaim_owner(owner));
            }
        }
        report
    }

    /// Seqlock-style read: the meta is returned only if the state word (with M set) did not
    /// change around the read.
    fn read_meta_consistent(&self, index: usize) -> (Word, Option<SlotMeta>) {
        let ctl = self.ctl(index);
        let mut word = ctl.load();
        for _ in 0..4 {
            if !word.has_meta() {
                return (word, None);
            }
            let meta = self.read_meta(index);
            // ===================== SYNC POINT =====================
            // Acquire fence: orders the meta loads above before the re-load of the word, pairing
            // with the Release fence in `begin` (after taking the slot, before writing meta). If a
            // meta load saw a newer producer's value, the re-load sees that producer's word.
            std::sync::atomic::fence(Ordering::Acquire);
            let again = ctl.load();
            if again == word {
                return (word, Some(meta));
            }
            word = again;
        }
        (word, None)
    }
}
