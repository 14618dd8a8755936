//! The slot state machine: the packed state word and every transition on it.
//!
//! This module is the part of the ring that loom model-checks (see the `loom_tests` module at the
//! bottom and the design comment of [`crate::ring`]). It knows nothing about shared memory: it
//! works on any [`SlotTable`], which the ring implements over its mapping and the loom tests
//! implement over a heap array.
//!
//! # The state word (one `u64` per slot)
//!
//! ```text
//!  63                                   27 26                    4   3   2      0
//! +---------------------------------------+------------------------+---+--------+
//! |        generation (37 bits)           |   owner pid (23 bits)  | M | state  |
//! +---------------------------------------+------------------------+---+--------+
//! ```
//!
//! * `state`: FREE=0, WRITING=1, READY=2, CLAIMED=3, DONE=4 (5..7 never written).
//! * `M`: the slot's meta (job id, partition, circuit id, attempt) and array layout are written and
//!   stable; set by `begin`, kept through READY/CLAIMED/DONE, cleared on the way to FREE.
//! * `owner`: the pid holding the slot (WRITING, CLAIMED, DONE being collected) or 0. Linux pids
//!   are at most `PID_MAX_LIMIT` = 2^22, so 23 bits hold every pid.
//! * `generation`: incremented by every successful transition, so a word value is never repeated
//!   (until 2^37 transitions of one slot) and a handle that remembers the word it installed can
//!   tell whether it still owns the slot: every transition is a compare-and-swap from exactly that
//!   word (crossbeam's array queue packs its lap into a stamp the same way).
//!
//! # The ticket (the second `u64` of a slot's control words): claim order
//!
//! ```text
//!  63            56 55                                                        0
//! +----------------+-----------------------------------------------------------+
//! | 255 - priority |            publish sequence number (56 bits)              |
//! +----------------+-----------------------------------------------------------+
//! ```
//!
//! Consumers claim the READY slot with the lowest ticket: the highest claim priority first, then
//! the oldest publish (FIFO within a priority). Why the priority lives in the ticket rather than
//! in a field of its own: the claim order is decided from what a consumer reads after the
//! Acquire load of a READY word, and the ticket is already written before the Release CAS of
//! `publish` and read there, so the order needs no new atomic, no new ordering argument and no
//! change of the ring layout; one comparison of one number decides it, so the scan stays as it
//! was; and every way back to READY (`release`, `reclaim_owner`, `retry`) leaves the ticket as it
//! is, so a requeued slot keeps both its priority and its place in line. 56 bits of sequence
//! wrap after 7·10^16 publishes (two thousand years at a million a second).

use std::fmt;

use crate::sync::{AtomicU64, Ordering};

/// The state of one slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SlotState {
    /// Empty; any producer may acquire it.
    Free = 0,
    /// Owned by a producer that is writing a synthesized circuit into it.
    Writing = 1,
    /// Holds a complete circuit; any consumer may claim it.
    Ready = 2,
    /// Owned by a consumer that is proving it.
    Claimed = 3,
    /// Holds a result; the job owner collects it and frees the slot.
    Done = 4,
}

impl SlotState {
    /// All states, in lifecycle order.
    pub const ALL: [SlotState; 5] = [
        SlotState::Free,
        SlotState::Writing,
        SlotState::Ready,
        SlotState::Claimed,
        SlotState::Done,
    ];

    fn from_bits(bits: u64) -> Option<SlotState> {
        Some(match bits {
            0 => SlotState::Free,
            1 => SlotState::Writing,
            2 => SlotState::Ready,
            3 => SlotState::Claimed,
            4 => SlotState::Done,
            _ => return None,
        })
    }

    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            SlotState::Free => "free",
            SlotState::Writing => "writing",
            SlotState::Ready => "ready",
            SlotState::Claimed => "claimed",
            SlotState::Done => "done",
        }
    }
}

impl fmt::Display for SlotState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A slot state, or `corrupt` when a state word does not decode (only a foreign writer can do that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateName {
    /// A decodable state.
    State(SlotState),
    /// An undecodable state word.
    Corrupt,
}

impl fmt::Display for StateName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateName::State(s) => s.fmt(f),
            StateName::Corrupt => f.write_str("corrupt"),
        }
    }
}

const STATE_MASK: u64 = 0b111;
const META_BIT: u64 = 1 << 3;
const OWNER_SHIFT: u32 = 4;
const OWNER_BITS: u32 = 23;
const GEN_SHIFT: u32 = OWNER_SHIFT + OWNER_BITS;
const GEN_BITS: u32 = 64 - GEN_SHIFT;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;

/// The largest owner id (pid) a state word can hold.
pub const MAX_OWNER: u32 = (1 << OWNER_BITS) - 1;

const _: () = assert!(GEN_BITS == 37, "layout of the state word changed");

/// A decoded state word. Plain data; the atomic lives in [`SlotCtl`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word(pub(crate) u64);

impl Word {
    pub(crate) fn new(state: SlotState, meta: bool, owner: u32, generation: u64) -> Word {
        debug_assert!(owner <= MAX_OWNER);
        Word(
            state as u64
                | if meta { META_BIT } else { 0 }
                | (u64::from(owner) << OWNER_SHIFT)
                | ((generation & GEN_MASK) << GEN_SHIFT),
        )
    }

    pub(crate) fn state(self) -> Option<SlotState> {
        SlotState::from_bits(self.0 & STATE_MASK)
    }

    pub(crate) fn is(self, state: SlotState) -> bool {
        self.state() == Some(state)
    }

    pub(crate) fn state_name(self) -> StateName {
        match self.state() {
            Some(s) => StateName::State(s),
            None => StateName::Corrupt,
        }
    }

    pub(crate) fn has_meta(self) -> bool {
        self.0 & META_BIT != 0
    }

    pub(crate) fn owner(self) -> u32 {
        // The mask keeps 23 bits, so the value fits a u32.
        ((self.0 >> OWNER_SHIFT) & u64::from(MAX_OWNER)) as u32
    }

    pub(crate) fn generation(self) -> u64 {
        self.0 >> GEN_SHIFT
    }

    /// The word that follows `self` in a transition to `state`: generation + 1 (wrapping in
    /// 37 bits).
    pub(crate) fn successor(self, state: SlotState, meta: bool, owner: u32) -> Word {
        Word::new(state, meta, owner, self.generation().wrapping_add(1))
    }
}

impl fmt::Debug for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Word({} meta={} owner={} gen={})",
            self.state_name(),
            self.has_meta(),
            self.owner(),
            self.generation()
        )
    }
}

/// The control words of one slot. In the mapping it is the first 16 bytes of the slot header.
#[repr(C)]
pub(crate) struct SlotCtl {
    /// The packed state word.
    pub(crate) word: AtomicU64,
    /// Publish order: a READY slot with a lower ticket was published earlier and is claimed first.
    pub(crate) ticket: AtomicU64,
}

impl SlotCtl {
    #[cfg(test)]
    pub(crate) fn new(word: Word) -> SlotCtl {
        SlotCtl {
            word: AtomicU64::new(word.0),
            ticket: AtomicU64::new(0),
        }
    }

    pub(crate) fn load(&self) -> Word {
        // Acquire: a word observed here comes with the writes its installer released (the
        // ticket of a READY slot, the meta of a slot with M set) — pairs with the AcqRel CAS in
        // `transition`.
        Word(self.word.load(Ordering::Acquire))
    }

    /// Compare-and-swap `expected` → `next`. Returns `next` on success, the word found on failure.
    pub(crate) fn transition(&self, expected: Word, next: Word) -> Result<Word, Word> {
        // ===================== SYNC POINT =====================
        // Every ownership hand-over of a slot is this CAS. It enforces order of:
        //  * the releasing side's writes to the slot (payload and layout before READY, the result
        //    before DONE, the reads of the previous owner before FREE) before
        //  * the acquiring side's accesses (the consumer's reads after CLAIMED, the collector's
        //    read of the result after taking DONE, the next producer's writes after WRITING).
        // Success AcqRel: Release hands our writes over, Acquire takes the previous owner's.
        // Failure Acquire: the word found is used to retry or to report a stale handle, and its
        // ticket/meta may be read next.
        self.word
            .compare_exchange(expected.0, next.0, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| next)
            .map_err(Word)
    }
}

/// The slots a state machine runs over.
pub(crate) trait SlotTable {
    fn slot_count(&self) -> usize;
    fn ctl(&self, index: usize) -> &SlotCtl;
    /// A fresh, increasing publish ticket.
    fn next_ticket(&self) -> u64;
}

/// FREE → WRITING(owner) on the first free slot of `range` (one slot class of the ring; the
/// end is clamped to the table).
pub(crate) fn try_take_free<T: SlotTable + ?Sized>(
    table: &T,
    owner: u32,
    range: std::ops::Range<usize>,
) -> Option<(usize, Word)> {
    let end = range.end.min(table.slot_count());
    (range.start..end).find_map(|index| try_take(table, owner, index))
}

/// FREE → WRITING(owner) on slot `index` if it is free.
fn try_take<T: SlotTable + ?Sized>(table: &T, owner: u32, index: usize) -> Option<(usize, Word)> {
    let ctl = table.ctl(index);
    let mut word = ctl.load();
    while word.is(SlotState::Free) {
        match ctl.transition(word, word.successor(SlotState::Writing, false, owner)) {
            Ok(new) => return Some((index, new)),
            Err(found) => word = found,
        }
    }
    None
}

/// Bits of a ticket that hold the publish sequence number; the byte above holds the claim rank.
const SEQ_BITS: u32 = 56;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

/// The ticket of a slot published with claim `priority` (higher is claimed first) as the `seq`-th
/// publish: lower tickets are claimed first (see the module docs).
pub(crate) fn claim_ticket(priority: u8, seq: u64) -> u64 {
    (u64::from(u8::MAX - priority) << SEQ_BITS) | (seq & SEQ_MASK)
}

/// The claim priority a ticket was made with.
#[cfg(test)]
pub(crate) fn ticket_priority(ticket: u64) -> u8 {
    // The shift leaves the top byte only, so the value fits a u8.
    u8::MAX - (ticket >> SEQ_BITS) as u8
}

/// The READY slot with the lowest ticket (highest priority, then oldest) → CLAIMED(owner).
/// `O(slots)` per attempt; retried only when another party won the race for the chosen slot,
/// i.e. made progress.
pub(crate) fn try_take_ready<T: SlotTable + ?Sized>(
    table: &T,
    owner: u32,
) -> Option<(usize, Word)> {
    loop {
        let mut best: Option<(usize, Word, u64)> = None;
        for index in 0..table.slot_count() {
            let ctl = table.ctl(index);
            let word = ctl.load();
            if word.is(SlotState::Ready) {
                // Relaxed: the Acquire load above ordered the ticket written before READY was
                // released; a newer ticket read here only changes the order, and the CAS below
                // fails if the slot moved on.
                let ticket = ctl.ticket.load(Ordering::Relaxed);
                if best.is_none_or(|(_, _, t)| ticket < t) {
                    best = Some((index, word, ticket));
                }
            }
        }
        let (index, word, _) = best?;
        if let Ok(new) = table
            .ctl(index)
            .transition(word, word.successor(SlotState::Claimed, true, owner))
        {
            return Some((index, new));
        }
    }
}

/// An unowned DONE slot → DONE owned by `owner` (being collected).
pub(crate) fn try_take_done<T: SlotTable + ?Sized>(table: &T, owner: u32) -> Option<(usize, Word)> {
    for index in 0..table.slot_count() {
        let ctl = table.ctl(index);
        let mut word = ctl.load();
        while word.is(SlotState::Done) && word.owner() == 0 {
            match ctl.transition(word, word.successor(SlotState::Done, true, owner)) {
                Ok(new) => return Some((index, new)),
                Err(found) => word = found,
            }
        }
    }
    None
}

/// WRITING(expected) → READY with a fresh ticket at claim `priority` (higher is claimed first).
pub(crate) fn publish<T: SlotTable + ?Sized>(
    table: &T,
    index: usize,
    expected: Word,
    priority: u8,
) -> Result<Word, Word> {
    let ctl = table.ctl(index);
    let ticket = claim_ticket(priority, table.next_ticket());
    // Relaxed: the ticket is published by the Release half of the CAS below; if the CAS fails
    // the slot is not ours and the ticket is overwritten by whoever publishes it next.
    ctl.ticket.store(ticket, Ordering::Relaxed);
    ctl.transition(expected, expected.successor(SlotState::Ready, true, 0))
}

/// One slot moved by [`reclaim_owner`].
pub(crate) struct Reclaimed<X> {
    pub(crate) index: usize,
    pub(crate) from: Word,
    pub(crate) to: Word,
    pub(crate) peeked: X,
}

/// Moves every slot owned by `owner` out of its hands: WRITING → FREE, CLAIMED → READY (the
/// synthesis is kept, its old ticket keeps its place in line), DONE(owner) → DONE(unowned).
/// `peek` runs before each CAS and sees the word it will replace; a successful CAS proves the
/// slot did not change while it looked. Idempotent: a second call finds nothing owned.
pub(crate) fn reclaim_owner<T: SlotTable + ?Sized, X>(
    table: &T,
    owner: u32,
    mut peek: impl FnMut(usize, Word) -> X,
) -> Vec<Reclaimed<X>> {
    let mut moved = Vec::new();
    if owner == 0 {
        return moved;
    }
    for index in 0..table.slot_count() {
        let ctl = table.ctl(index);
        let mut word = ctl.load();
        while word.owner() == owner {
            let to = match word.state() {
                Some(SlotState::Writing) => word.successor(SlotState::Free, false, 0),
                Some(SlotState::Claimed) => word.successor(SlotState::Ready, true, 0),
                Some(SlotState::Done) => word.successor(SlotState::Done, true, 0),
                // FREE and READY are never owned; a corrupt word is left for a human.
                _ => break,
            };
            let peeked = peek(index, word);
            match ctl.transition(word, to) {
                Ok(to) => {
                    moved.push(Reclaimed {
                        index,
                        from: word,
                        to,
                        peeked,
                    });
                    break;
                }
                Err(found) => word = found,
            }
        }
    }
    moved
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64 as StdU64;

    struct Table(Vec<SlotCtl>, StdU64);
    impl SlotTable for Table {
        fn slot_count(&self) -> usize {
            self.0.len()
        }
        fn ctl(&self, index: usize) -> &SlotCtl {
            &self.0[index]
        }
        fn next_ticket(&self) -> u64 {
            // Relaxed: tickets only need to be unique and increasing.
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        }
    }
    fn table(n: usize) -> Table {
        Table(
            (0..n)
                .map(|_| SlotCtl::new(Word::new(SlotState::Free, false, 0, 0)))
                .collect(),
            StdU64::new(0),
        )
    }

    #[test]
    fn word_round_trips_every_field() {
        let w = Word::new(SlotState::Claimed, true, MAX_OWNER, GEN_MASK);
        assert_eq!(w.state(), Some(SlotState::Claimed));
        assert!(w.has_meta());
        assert_eq!(w.owner(), MAX_OWNER);
        assert_eq!(w.generation(), GEN_MASK);
        let next = w.successor(SlotState::Done, false, 7);
        assert_eq!(next.generation(), 0, "generation wraps inside its 37 bits");
        assert_eq!(
            (next.state(), next.has_meta(), next.owner()),
            (Some(SlotState::Done), false, 7)
        );
        assert_eq!(Word(5).state(), None);
        assert_eq!(Word(7).state_name(), StateName::Corrupt);
    }

    #[test]
    fn ready_slots_are_claimed_oldest_first() {
        let t = table(3);
        let mut writers: Vec<_> = (0..3)
            .map(|_| try_take_free(&t, 9, 0..usize::MAX).unwrap())
            .collect();
        assert!(try_take_free(&t, 9, 0..usize::MAX).is_none());
        // publish in the order 2, 0, 1
        for &i in &[2usize, 0, 1] {
            let (index, word) = writers[i];
            writers[i].1 = publish(&t, index, word, 0).unwrap();
        }
        let order: Vec<usize> = (0..3).map(|_| try_take_ready(&t, 5).unwrap().0).collect();
        assert_eq!(order, vec![writers[2].0, writers[0].0, writers[1].0]);
        assert!(try_take_ready(&t, 5).is_none());
    }

    #[test]
    fn higher_priority_is_claimed_first_and_equal_priority_stays_fifo() {
        let t = table(5);
        // published in this order, with these claim priorities
        let prios = [2u8, 2, 4, 2, 4];
        let mut slots = Vec::new();
        for &p in &prios {
            let (index, word) = try_take_free(&t, 9, 0..usize::MAX).unwrap();
            publish(&t, index, word, p).unwrap();
            slots.push(index);
        }
        let order: Vec<usize> = (0..5).map(|_| try_take_ready(&t, 5).unwrap().0).collect();
        // the later priority-4 slots overtake the older priority-2 ones; each priority is FIFO
        assert_eq!(
            order,
            vec![slots[2], slots[4], slots[0], slots[1], slots[3]]
        );
        assert!(try_take_ready(&t, 5).is_none());
    }

    #[test]
    fn a_requeued_slot_keeps_its_priority_and_place() {
        let t = table(3);
        let publish_at = |p: u8| {
            let (index, word) = try_take_free(&t, 9, 0..usize::MAX).unwrap();
            publish(&t, index, word, p).unwrap();
            index
        };
        let (low, high, high2) = (publish_at(1), publish_at(3), publish_at(3));
        let (claimed, _) = try_take_ready(&t, 5).unwrap();
        assert_eq!(claimed, high);
        // its prover dies: CLAIMED → READY with the old ticket, still ahead of the rest
        assert_eq!(reclaim_owner(&t, 5, |_, _| ()).len(), 1);
        assert_eq!(
            ticket_priority(t.ctl(high).ticket.load(Ordering::Relaxed)),
            3
        );
        let order: Vec<usize> = (0..3).map(|_| try_take_ready(&t, 6).unwrap().0).collect();
        assert_eq!(order, vec![high, high2, low]);
    }

    #[test]
    fn tickets_order_by_priority_then_sequence() {
        assert!(claim_ticket(4, 1_000) < claim_ticket(3, 0));
        assert!(claim_ticket(2, 7) < claim_ticket(2, 8));
        assert!(claim_ticket(u8::MAX, SEQ_MASK) < claim_ticket(0, 0));
        for p in [0u8, 1, 2, 4, u8::MAX] {
            assert_eq!(ticket_priority(claim_ticket(p, 12345)), p);
        }
        // the sequence stays in its 56 bits: a wrap cannot change the priority
        assert_eq!(ticket_priority(claim_ticket(2, u64::MAX)), 2);
    }

    #[test]
    fn stale_word_cannot_transition_after_reclaim() {
        let t = table(1);
        let (i, w) = try_take_free(&t, 42, 0..usize::MAX).unwrap();
        let moved = reclaim_owner(&t, 42, |_, w| w);
        assert_eq!(moved.len(), 1);
        assert!(moved[0].to.is(SlotState::Free));
        assert!(
            publish(&t, i, w, 0).is_err(),
            "the dead owner's handle is stale"
        );
        assert!(
            reclaim_owner(&t, 42, |_, _| ()).is_empty(),
            "reclaim is idempotent"
        );
        // the slot is usable again and the generation moved on
        let (_, w2) = try_take_free(&t, 43, 0..usize::MAX).unwrap();
        assert_eq!(w2.generation(), w.generation() + 2);
    }

    #[test]
    fn claimed_reclaims_to_ready_and_done_to_unowned() {
        let t = table(2);
        let (i, w) = try_take_free(&t, 1, 0..usize::MAX).unwrap();
        publish(&t, i, w, 0).unwrap();
        let (ci, cw) = try_take_ready(&t, 2).unwrap();
        assert_eq!(reclaim_owner(&t, 2, |_, _| ()).len(), 1);
        assert!(t.ctl(ci).load().is(SlotState::Ready));
        assert!(t
            .ctl(ci)
            .transition(cw, cw.successor(SlotState::Done, true, 0))
            .is_err());
        let (ci, cw) = try_take_ready(&t, 3).unwrap();
        let done = t
            .ctl(ci)
            .transition(cw, cw.successor(SlotState::Done, true, 0))
            .unwrap();
        assert_eq!(done.owner(), 0);
        let (di, _) = try_take_done(&t, 4).unwrap();
        assert!(
            try_take_done(&t, 5).is_none(),
            "an owned DONE slot is not taken twice"
        );
        assert_eq!(reclaim_owner(&t, 4, |_, _| ()).len(), 1);
        assert_eq!(t.ctl(di).load().owner(), 0);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model checks of the transitions above. Run with
    //! `RUSTFLAGS="--cfg loom" cargo test -p shm-protocol --release --lib loom`.
    //! The payload and result areas are loom `UnsafeCell`s, so loom also proves that every
    //! access to slot memory is ordered by the state word (no data race).
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    struct Table {
        ctl: Vec<SlotCtl>,
        payload: Vec<UnsafeCell<u64>>,
        result: Vec<UnsafeCell<u64>>,
        ticket: AtomicU64,
    }

    impl SlotTable for Table {
        fn slot_count(&self) -> usize {
            self.ctl.len()
        }
        fn ctl(&self, index: usize) -> &SlotCtl {
            &self.ctl[index]
        }
        fn next_ticket(&self) -> u64 {
            // Relaxed: tickets only need to be unique and increasing.
            self.ticket.fetch_add(1, Ordering::Relaxed)
        }
    }

    fn table(n: usize) -> Arc<Table> {
        Arc::new(Table {
            ctl: (0..n)
                .map(|_| SlotCtl::new(Word::new(SlotState::Free, false, 0, 0)))
                .collect(),
            payload: (0..n).map(|_| UnsafeCell::new(0)).collect(),
            result: (0..n).map(|_| UnsafeCell::new(0)).collect(),
            ticket: AtomicU64::new(0),
        })
    }

    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut b = loom::model::Builder::new();
        if b.preemption_bound.is_none() {
            b.preemption_bound = Some(2);
        }
        b.check(f);
    }

    /// A producer: acquire (spinning with yields; the futex wait is not modelled), write, publish.
    fn produce(t: &Table, owner: u32, value: u64) {
        produce_at(t, owner, value, 0)
    }

    /// [`produce`] at claim `priority`.
    fn produce_at(t: &Table, owner: u32, value: u64, priority: u8) {
        let (i, w) = loop {
            if let Some(got) = try_take_free(t, owner, 0..usize::MAX) {
                break got;
            }
            thread::yield_now();
        };
        // SAFETY: in the loom model, WRITING(owner) makes this thread the only one touching the payload.
        t.payload[i].with_mut(|p| unsafe { *p = value });
        publish(t, i, w, priority).expect("a live producer's publish cannot fail");
    }

    /// A consumer: claim, read, complete with the value read. Gives up after `tries` empty
    /// scans (an unbounded spin would make the model infinite); the test drains what is left.
    fn consume(t: &Table, owner: u32, tries: usize) -> Option<u64> {
        let (i, w) = (0..tries).find_map(|k| {
            if k > 0 {
                thread::yield_now();
            }
            try_take_ready(t, owner)
        })?;
        // SAFETY: in the loom model, CLAIMED(owner) makes this thread the only one touching the slot.
        let v = t.payload[i].with(|p| unsafe { *p });
        // SAFETY: in the loom model, as above, this thread alone writes the claimed slot's result.
        t.result[i].with_mut(|r| unsafe { *r = v });
        t.ctl(i)
            .transition(w, w.successor(SlotState::Done, true, 0))
            .expect("live consumer");
        Some(v)
    }

    #[test]
    fn loom_two_producers_two_consumers() {
        model(|| {
            let t = table(2);
            let p: Vec<_> = [(11, 100), (12, 200)]
                .into_iter()
                .map(|(o, v)| {
                    let t = t.clone();
                    thread::spawn(move || produce(&t, o, v))
                })
                .collect();
            let c = {
                let t = t.clone();
                thread::spawn(move || consume(&t, 21, 2))
            };
            let mut got: Vec<u64> = consume(&t, 22, 2).into_iter().collect();
            got.extend(c.join().unwrap());
            for h in p {
                h.join().unwrap();
            }
            // whatever the consumers gave up on is still READY, not lost
            while let Some(v) = consume(&t, 23, 1) {
                got.push(v);
            }
            got.sort();
            assert_eq!(got, [100, 200], "each item consumed exactly once");
            for i in 0..2 {
                let w = t.ctl(i).load();
                assert!(w.is(SlotState::Done) && w.owner() == 0);
                assert_eq!(w.generation(), 4, "FREE→WRITING→READY→CLAIMED→DONE");
                // SAFETY: in the loom model, all threads joined.
                let r = t.result[i].with(|r| unsafe { *r });
                // SAFETY: in the loom model, all threads joined.
                let p = t.payload[i].with(|p| unsafe { *p });
                assert_eq!(r, p, "the result belongs to the slot's own payload");
            }
        });
    }

    #[test]
    fn loom_claims_follow_priority_then_publish_order() {
        model(|| {
            let t = table(3);
            // Two producers race (so either publishes first) at different priorities while a
            // consumer may already claim whatever is READY; a third, low-priority item was
            // published before all of them.
            produce_at(&t, 10, 1, 1);
            let p: Vec<_> = [(11, 2u64, 3u8), (12, 3, 3)]
                .into_iter()
                .map(|(o, v, prio)| {
                    let t = t.clone();
                    thread::spawn(move || produce_at(&t, o, v, prio))
                })
                .collect();
            let c = {
                let t = t.clone();
                thread::spawn(move || consume(&t, 21, 1))
            };
            let early = c.join().unwrap();
            for h in p {
                h.join().unwrap();
            }
            let mut rest = Vec::new();
            while let Some(v) = consume(&t, 22, 1) {
                rest.push(v);
            }
            // Once every producer is done, the claims go priority 3 (in either publish order)
            // before priority 1: the low item is always last, whatever the early claim took.
            if let Some(pos) = rest.iter().position(|&v| v == 1) {
                assert_eq!(pos, rest.len() - 1, "the low-priority item is claimed last");
            }
            let mut all: Vec<u64> = early.into_iter().chain(rest.iter().copied()).collect();
            all.sort();
            assert_eq!(all, [1, 2, 3], "each item consumed exactly once");
        });
    }

    #[test]
    fn loom_producer_dies_mid_write_and_is_reclaimed() {
        model(|| {
            let t = table(2);
            // producer 11 acquires, writes half and dies: the thread ends holding WRITING.
            let dying = {
                let t = t.clone();
                thread::spawn(move || {
                    let (i, w) =
                        try_take_free(&*t, 11, 0..usize::MAX).expect("2 free slots, 2 producers");
                    // SAFETY: in the loom model, WRITING(11).
                    t.payload[i].with_mut(|p| unsafe { *p = 111 });
                    (i, w)
                })
            };
            let healthy = {
                let t = t.clone();
                thread::spawn(move || produce(&t, 12, 200))
            };
            let consumer = {
                let t = t.clone();
                thread::spawn(move || consume(&t, 21, 2))
            };
            // The launcher learns of the death (join = waitpid) and reclaims while the others run.
            let (dead_index, dead_word) = dying.join().unwrap();
            let moved = reclaim_owner(&*t, 11, |_, w| w);
            assert_eq!(moved.len(), 1, "the dead producer's slot is reclaimed");
            assert_eq!((moved[0].index, moved[0].from), (dead_index, dead_word));
            // the dead owner's handle is stale: its publish fails even if replayed now
            assert!(publish(&*t, dead_index, dead_word, 0).is_err());
            let mut got: Vec<u64> = consumer.join().unwrap().into_iter().collect();
            healthy.join().unwrap();
            while let Some(v) = consume(&t, 22, 1) {
                got.push(v);
            }
            assert_eq!(
                got,
                [200],
                "only the healthy item is consumed, exactly once"
            );
            let states: Vec<_> = (0..2).map(|i| t.ctl(i).load()).collect();
            assert_eq!(states.iter().filter(|w| w.is(SlotState::Done)).count(), 1);
            assert_eq!(states.iter().filter(|w| w.is(SlotState::Free)).count(), 1);
        });
    }

    #[test]
    fn loom_consumer_dies_mid_claim_and_is_reclaimed() {
        model(|| {
            let t = table(1);
            produce(&t, 11, 7);
            // consumer 21 claims, reads and dies holding CLAIMED (or finds nothing: 22 was first)
            let dying = {
                let t = t.clone();
                thread::spawn(move || {
                    let (i, w) = try_take_ready(&*t, 21)?;
                    // SAFETY: in the loom model, CLAIMED(21).
                    let v = t.payload[i].with(|p| unsafe { *p });
                    assert_eq!(v, 7);
                    Some((i, w))
                })
            };
            // consumer 22 claims whatever is READY until the slot is DONE
            let other = {
                let t = t.clone();
                thread::spawn(move || loop {
                    if let Some((i, w)) = try_take_ready(&*t, 22) {
                        // SAFETY: in the loom model, CLAIMED(22): this thread alone reads the payload.
                        let v = t.payload[i].with(|p| unsafe { *p });
                        // SAFETY: in the loom model, CLAIMED(22): this thread alone writes the result.
                        t.result[i].with_mut(|r| unsafe { *r = v + 2000 });
                        t.ctl(i)
                            .transition(w, w.successor(SlotState::Done, true, 0))
                            .unwrap();
                        return;
                    }
                    thread::yield_now();
                })
            };
            let dead = dying.join().unwrap();
            let moved = reclaim_owner(&*t, 21, |_, _| ());
            assert_eq!(moved.len(), usize::from(dead.is_some()));
            if let Some((i, w)) = dead {
                // synthesis kept: CLAIMED went back to READY, and the stale handle cannot finish
                assert!(moved[0].to.is(SlotState::Ready));
                assert!(t
                    .ctl(i)
                    .transition(w, w.successor(SlotState::Done, true, 0))
                    .is_err());
            }
            other.join().unwrap();
            let w = t.ctl(0).load();
            assert!(w.is(SlotState::Done) && w.owner() == 0);
            // SAFETY: in the loom model, joined; nobody else touches the slot.
            let result = t.result[0].with(|r| unsafe { *r });
            assert_eq!(result, 2007, "completed exactly once, by 22");
        });
    }
}
