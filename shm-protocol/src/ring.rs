//! [`Ring`]: the slot ring laid over a [`Region`], and the handles that own its slots.
//!
//! # Design
//!
//! A ring is a fixed array of slots. Each slot has a header (in the slot table) and a data span
//! (in the data area) big enough for one synthesized circuit. Slots come in up to eight sizes
//! (slot classes, [`RingConfig::with_classes`]); a producer asks for the bytes its circuit needs
//! and takes the smallest free slot that fits, a larger one when the fitting class is full. Ownership of a slot is decided by
//! one 64-bit state word per slot (`state:3 | meta:1 | owner pid:23 | generation:37`, drawn in
//! the crate docs); every change of owner is a compare-and-swap on that word, and the CAS is the
//! lock: whoever installs a word owns the slot until it installs the next one.
//!
//! ```text
//!            acquire_free              publish                claim_ready
//!   FREE ───────────────────▶ WRITING ─────────▶ READY ────────────────────▶ CLAIMED
//!    ▲   ◀─── abandon / drop ───┘      ▲  ▲     ◀──── release / drop ──────┘  │
//!    │         reclaim(dead producer)  │  └───── reclaim(dead consumer) ──────┘ │ complete
//!    │                                 │ retry                                  ▼
//!    └──────────── free ◀── DONE(collector) ◀── take_done ── DONE(unowned) ◀────┘
//! ```
//!
//! | state | owner field | who may touch the slot's memory | if that process dies |
//! |---|---|---|---|
//! | FREE | 0 | nobody | nothing to do |
//! | WRITING | producer pid | the producer writes meta, layout, payload | `reclaim` → FREE; the launcher re-queues the job named in the report (meta is known once `begin` ran) |
//! | READY | 0 | nobody writes; a snapshot may read meta | nothing to do: the synthesis waits for a consumer |
//! | CLAIMED | consumer pid | the consumer reads the payload, writes the result area | `reclaim` → READY: proved again by another consumer, no synthesis redone |
//! | DONE, owner 0 | 0 | nobody | nothing to do |
//! | DONE, owned | collector pid | the collector (launcher) reads the result | `reclaim` → DONE, owner 0: collected again |
//!
//! What each transition means:
//! - `acquire_free` (FREE → WRITING): a producer takes an empty slot; blocks when none is free,
//!   which is the backpressure on synthesis.
//! - `begin` (WRITING → WRITING with M set): meta and array layout are written and stable, so a
//!   status display or a reclaim can name the job.
//! - `publish` (WRITING → READY): the payload is complete and valid (the producer runs the same
//!   validator the consumer will); it gets a ticket, and READY slots are claimed lowest ticket
//!   first: highest claim priority ([`SlotWriter::set_claim_priority`]), then oldest publish
//!   (the ticket's layout is in `state`).
//! - `claim_ready` (READY → CLAIMED), `complete` (CLAIMED → DONE), `release` (CLAIMED → READY).
//! - `take_done` (DONE → DONE owned), `free` (DONE → FREE), `retry` (DONE → READY).
//!
//! Why stale handles are harmless: every transition increments the generation, and every handle
//! ([`SlotWriter`], [`ClaimedSlot`], [`DoneSlot`]) remembers the exact word it installed. Its next
//! transition is a CAS from that word, so once the slot was reclaimed (or moved on in any way)
//! the CAS fails and the handle gets [`ErrorKind::StaleSlot`] — a producer that was presumed dead
//! cannot publish into a slot that now belongs to someone else, and a consumer cannot complete a
//! slot that was requeued. Handles also check the word before writing the result area. What the
//! word cannot stop is a *live* process scribbling on payload memory it no longer owns; this is
//! why `reclaim_owner` is only for owners known dead (the launcher reaped them), and
//! `reclaim_dead` checks liveness first.
//!
//! # Waiting
//!
//! Three futex event words live in the ring header: FREE, READY and DONE. A transition that
//! produces a slot in one of those states increments that event's sequence number and, only if
//! its waiter count is non-zero, issues `FUTEX_WAKE` for all waiters. A waiter registers
//! (waiters += 1), reads the sequence number, scans the slots once more, and only then sleeps in
//! `FUTEX_WAIT` on the number it read. All three operations on each side are `SeqCst`, so either
//! the waker sees the waiter registered (and wakes it), or the waiter's scan sees the transition
//! (and does not sleep); a wake between scan and sleep changes the sequence number, so the
//! kernel refuses to put the waiter to sleep. The futexes are shared (not `PRIVATE`): they work
//! across processes on the same mapping. The uncontended paths make no system call at all.
//! A process killed while waiting leaves its registration behind; wakers then issue one
//! `FUTEX_WAKE` that finds nobody — a wasted system call, never a lost wake-up.

mod claim;
mod config;
mod status;
mod writer;

pub use claim::{Bitmap, ClaimedSlot, DoneSlot, SlotView, WitnessView};
pub use config::{RingConfig, SlotClass};
pub use status::{pid_alive, ReclaimReport, ReclaimedSlot, SlotSnapshot, StateCounts};
pub use writer::{Published, SlotPartsMut, SlotWriter, WitnessPartsMut};

use std::fmt;
use std::time::{Duration, Instant};

use rustix::thread::futex;

use crate::error::{Error, ErrorKind, Result, SlotField};
use crate::layout::{
    EventWord, RingHeader, ShmSafe, SlotHeader, LAYOUT_VERSION, MAGIC, MAX_SLOT_CLASSES,
    RESULT_CAPACITY, RING_HEADER_BYTES, SLOT_ALIGN, SLOT_HEADER_BYTES,
};
use crate::pages::PageKind;
use crate::region::Region;
#[cfg(doc)]
use crate::slot::SlotCapacity;
use crate::slot::{
    check_bit_values, check_densities, check_geometry, RawSlotLayout, SlotLayout, SlotMeta,
};
use crate::state::{self, SlotState, SlotTable, Word, MAX_OWNER};
use crate::sync::Ordering;
use config::{ClassSpan, Geometry};

/// The slot ring. Cheap to share between threads (`&Ring` or `Arc<Ring>`); every process maps
/// the same region and opens its own `Ring` over it.
pub struct Ring {
    region: Region,
    slot_count: usize,
    /// The slot classes, smallest first (1..=[`MAX_SLOT_CLASSES`]).
    classes: Vec<ClassSpan>,
}

impl fmt::Debug for Ring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ring")
            .field("slot_count", &self.slot_count)
            .field("classes", &self.config().classes())
            .field("page_kind", &self.region.page_kind())
            .finish()
    }
}

impl SlotTable for Ring {
    fn slot_count(&self) -> usize {
        self.slot_count
    }
    fn ctl(&self, index: usize) -> &state::SlotCtl {
        &self.slot_header(index).ctl
    }
    fn next_ticket(&self) -> u64 {
        // Relaxed: tickets only need to be unique and increasing; the publish CAS orders them.
        self.header().ticket.fetch_add(1, Ordering::Relaxed)
    }
}

#[derive(Clone, Copy)]
enum Event {
    Free = 0,
    Ready = 1,
    Done = 2,
}

impl Event {
    fn name(self) -> &'static str {
        match self {
            Event::Free => "free",
            Event::Ready => "ready",
            Event::Done => "done",
        }
    }
}

fn check_owner(owner: u32) -> Result<u32> {
    if owner == 0 || owner > MAX_OWNER {
        return Err(ErrorKind::InvalidOwner {
            owner,
            max: MAX_OWNER,
        }
        .into());
    }
    Ok(owner)
}

/// This process's id, the usual `owner` argument.
pub fn current_owner() -> u32 {
    std::process::id()
}

impl Ring {
    /// Lays a new ring over a fresh region: writes the header and all slot headers (FREE,
    /// generation 0) and finally the layout version.
    pub fn create(region: Region, config: RingConfig) -> Result<Ring> {
        let Geometry {
            spans,
            data_offset,
            total,
        } = config.geometry()?;
        if (region.len() as u64) < total {
            return Err(ErrorKind::TooSmall {
                need: total,
                have: region.len() as u64,
            }
            .into());
        }
        let largest = spans.last().map_or(0, |c| c.stride);
        let ring = Ring {
            region,
            slot_count: config.slot_count() as usize,
            classes: spans,
        };
        let h = ring.header();
        // Relaxed: nobody else can read the header before the version store below.
        if h.version.load(Ordering::Relaxed) != 0 {
            return Err(ErrorKind::BadHeader {
                field: "version",
                reason: "the region already holds a ring".into(),
            }
            .into());
        }
        // Relaxed (all stores up to the version): published by the Release store of `version`.
        h.magic.store(MAGIC, Ordering::Relaxed);
        h.header_bytes
            .store(RING_HEADER_BYTES as u32, Ordering::Relaxed);
        h.slot_header_bytes
            .store(SLOT_HEADER_BYTES as u32, Ordering::Relaxed); // Relaxed: published by the Release store of `version`
        h.slot_count
            .store(ring.slot_count as u32, Ordering::Relaxed); // Relaxed: published by the Release store of `version`
        h.slot_bytes.store(largest, Ordering::Relaxed);
        h.class_count
            .store(ring.classes.len() as u32, Ordering::Relaxed); // Relaxed: published by the Release store of `version`
        for (word, class) in h.classes.iter().zip(&ring.classes) {
            word.slot_count.store(class.count as u32, Ordering::Relaxed); // Relaxed: published by the Release store of `version`
            word.slot_bytes.store(class.stride, Ordering::Relaxed);
        }
        h.slots_offset
            .store(RING_HEADER_BYTES as u64, Ordering::Relaxed); // Relaxed: published by the Release store of `version`
        h.data_offset.store(data_offset, Ordering::Relaxed);
        h.ring_bytes.store(total, Ordering::Relaxed);
        h.page_kind
            .store(ring.region.page_kind().code(), Ordering::Relaxed); // Relaxed: published by the Release store of `version`
        h.result_capacity
            .store(RESULT_CAPACITY as u32, Ordering::Relaxed);
        h.epoch.store(0, Ordering::Relaxed);
        h.ticket.store(0, Ordering::Relaxed); // Relaxed: published by the Release store of `version`
        for i in 0..ring.slot_count {
            let s = ring.slot_header(i);
            s.ctl
                .word
                .store(Word::new(SlotState::Free, false, 0, 0).0, Ordering::Relaxed); // Relaxed: published by the Release store of `version`
            s.ctl.ticket.store(0, Ordering::Relaxed);
        }
        // ===================== SYNC POINT =====================
        // Release: the version is written last; an opener that reads it non-zero with Acquire
        // sees every header field and slot word stored above.
        h.version.store(LAYOUT_VERSION, Ordering::Release);
        tracing::info!(
            slots = ring.slot_count,
            classes = ?ring.config().classes(),
            ring_bytes = total,
            page_kind = %ring.region.page_kind(),
            "ring created"
        );
        Ok(ring)
    }

    /// Opens the ring another process created in `region`, validating the header.
    pub fn open(region: Region) -> Result<Ring> {
        let have = region.len() as u64;
        if have < RING_HEADER_BYTES as u64 {
            return Err(ErrorKind::TooSmall {
                need: RING_HEADER_BYTES as u64,
                have,
            }
            .into());
        }
        // SAFETY: the region holds at least a ring header, its base is page aligned, and
        // `RingHeader` is `ShmSafe` (all atomics), so any bytes are a valid value.
        let h = unsafe { &*region.as_ptr().cast::<RingHeader>() };
        // Acquire: pairs with the creator's Release store of the version (see `create`).
        let version = h.version.load(Ordering::Acquire);
        if version == 0 {
            return Err(ErrorKind::NotInitialised.into());
        }
        // Relaxed (all header loads below): ordered by the Acquire load of `version`.
        let magic = h.magic.load(Ordering::Relaxed);
        if magic != MAGIC {
            return Err(ErrorKind::BadMagic {
                expected: MAGIC,
                found: magic,
            }
            .into());
        }
        if version != LAYOUT_VERSION {
            return Err(ErrorKind::VersionMismatch {
                expected: LAYOUT_VERSION,
                found: version,
            }
            .into());
        }
        let bad = |field: &'static str, reason: String| {
            Error::from(ErrorKind::BadHeader { field, reason })
        };
        let header_bytes = h.header_bytes.load(Ordering::Relaxed); // Relaxed: ordered by the Acquire load of `version`
        if header_bytes as usize != RING_HEADER_BYTES {
            return Err(bad(
                "header_bytes",
                format!("{header_bytes}, expected {RING_HEADER_BYTES}"),
            ));
        }
        let shb = h.slot_header_bytes.load(Ordering::Relaxed); // Relaxed: ordered by the Acquire load of `version`
        if shb as usize != SLOT_HEADER_BYTES {
            return Err(bad(
                "slot_header_bytes",
                format!("{shb}, expected {SLOT_HEADER_BYTES}"),
            ));
        }
        let rc = h.result_capacity.load(Ordering::Relaxed); // Relaxed: ordered by the Acquire load of `version`
        if rc as usize != RESULT_CAPACITY {
            return Err(bad(
                "result_capacity",
                format!("{rc}, expected {RESULT_CAPACITY}"),
            ));
        }
        let class_count = h.class_count.load(Ordering::Relaxed) as usize; // Relaxed: ordered by the Acquire load of `version`
        if !(1..=MAX_SLOT_CLASSES).contains(&class_count) {
            return Err(bad(
                "class_count",
                format!("{class_count} is not in 1..={MAX_SLOT_CLASSES}"),
            ));
        }
        let mut classes = Vec::with_capacity(class_count);
        for (k, word) in h.classes[..class_count].iter().enumerate() {
            let class = SlotClass {
                slot_count: word.slot_count.load(Ordering::Relaxed), // Relaxed: ordered by the Acquire load of `version`
                slot_bytes: word.slot_bytes.load(Ordering::Relaxed),
            };
            if class.slot_count == 0 || class.slot_bytes % SLOT_ALIGN != 0 || class.slot_bytes == 0
            {
                return Err(bad(
                    "classes",
                    format!(
                        "class {k}: {} slots of {} bytes (expected at least one slot, a \
                         non-zero multiple of {SLOT_ALIGN})",
                        class.slot_count, class.slot_bytes
                    ),
                ));
            }
            classes.push(class);
        }
        let config = RingConfig::from_classes(&classes);
        let Geometry {
            spans,
            data_offset,
            total,
        } = config
            .geometry()
            .map_err(|e| bad("classes", e.to_string()))?;
        let count = h.slot_count.load(Ordering::Relaxed); // Relaxed: ordered by the Acquire load of `version`
        if u64::from(count) != config.slot_count() {
            return Err(bad(
                "slot_count",
                format!("{count}, but the classes hold {}", config.slot_count()),
            ));
        }
        let largest = spans.last().map_or(0, |c| c.stride);
        let sb = h.slot_bytes.load(Ordering::Relaxed); // Relaxed: ordered by the Acquire load of `version`
        if sb != largest {
            return Err(bad(
                "slot_bytes",
                format!("{sb}, but the largest class has {largest}"),
            ));
        }
        let so = h.slots_offset.load(Ordering::Relaxed); // Relaxed: ordered by the Acquire load of `version`
        if so != RING_HEADER_BYTES as u64 {
            return Err(bad(
                "slots_offset",
                format!("{so}, expected {RING_HEADER_BYTES}"),
            ));
        }
        let dof = h.data_offset.load(Ordering::Relaxed); // Relaxed: ordered by the Acquire load of `version`
        if dof != data_offset {
            return Err(bad("data_offset", format!("{dof}, expected {data_offset}")));
        }
        let rb = h.ring_bytes.load(Ordering::Relaxed); // Relaxed: ordered by the Acquire load of `version`
        if rb != total {
            return Err(bad("ring_bytes", format!("{rb}, expected {total}")));
        }
        if have < total {
            return Err(ErrorKind::TooSmall { need: total, have }.into());
        }
        let ring = Ring {
            region,
            slot_count: count as usize,
            classes: spans,
        };
        tracing::info!(
            slots = ring.slot_count,
            classes = ?ring.config().classes(),
            epoch = ring.epoch(),
            page_kind = %ring.region.page_kind(),
            "ring opened"
        );
        Ok(ring)
    }

    fn header(&self) -> &RingHeader {
        // SAFETY: `create`/`open` checked the region holds the header at offset 0 (page
        // aligned, so 64-byte aligned); `RingHeader: ShmSafe`; the region lives as long as self.
        unsafe { shm_ref(self.region.as_ptr(), 0) }
    }

    fn slot_header(&self, index: usize) -> &SlotHeader {
        assert!(
            index < self.slot_count,
            "slot index {index} checked by every caller"
        );
        // SAFETY: the slot table lies inside the region (checked against `ring_bytes`), each
        // header is 8192-byte aligned relative to the page-aligned base, `SlotHeader: ShmSafe`.
        unsafe {
            shm_ref(
                self.region.as_ptr(),
                RING_HEADER_BYTES + index * SLOT_HEADER_BYTES,
            )
        }
    }

    /// The class slot `index` belongs to.
    fn class_of(&self, index: usize) -> &ClassSpan {
        assert!(
            index < self.slot_count,
            "slot index {index} checked by every caller"
        );
        self.classes
            .iter()
            .find(|c| index < c.first + c.count)
            .expect("the classes cover every slot index (geometry)")
    }

    /// Base of slot `index`'s data span in this process.
    fn slot_data(&self, index: usize) -> *mut u8 {
        let class = self.class_of(index);
        let offset = class.offset + (index - class.first) as u64 * class.stride;
        // SAFETY: the class's spans lie inside the region (geometry checked against
        // `ring_bytes` and the region's length), and `index` is one of the class's slots.
        unsafe { self.region.as_mut_ptr().add(offset as usize) }
    }

    /// Bytes of slot `index`'s data span (its class's size). Panics on an index out of range.
    pub fn slot_capacity(&self, index: usize) -> u64 {
        self.class_of(index).stride
    }

    fn check_index(&self, index: usize) -> Result<()> {
        if index >= self.slot_count {
            return Err(ErrorKind::SlotOutOfRange {
                index,
                slot_count: self.slot_count,
            }
            .into());
        }
        Ok(())
    }

    /// The region under the ring (for its fd, to pass to children).
    pub fn region(&self) -> &Region {
        &self.region
    }

    /// Gives the region back.
    pub fn into_region(self) -> Region {
        self.region
    }

    /// Base and length of the whole mapping in this process (to page-lock it once with
    /// `cudaHostRegister`).
    pub fn mapping(&self) -> (*const u8, usize) {
        (self.region.as_ptr(), self.region.len())
    }

    /// The ring's shape (slot bytes as rounded).
    pub fn config(&self) -> RingConfig {
        let classes: Vec<SlotClass> = self
            .classes
            .iter()
            .map(|c| SlotClass {
                slot_count: c.count as u32,
                slot_bytes: c.stride,
            })
            .collect();
        RingConfig::from_classes(&classes)
    }

    /// Number of slots.
    pub fn slot_count(&self) -> usize {
        self.slot_count
    }

    /// Bytes of the largest slots' data spans (every slot's, in a ring of one class).
    pub fn slot_bytes(&self) -> u64 {
        self.classes.last().map_or(0, |c| c.stride)
    }

    /// Page kind of the region.
    pub fn page_kind(&self) -> PageKind {
        self.region.page_kind()
    }

    /// The launcher epoch stored in the header.
    pub fn epoch(&self) -> u64 {
        // Acquire: pairs with `bump_epoch`; an epoch seen here comes after the launcher's
        // recovery work that preceded the bump.
        self.header().epoch.load(Ordering::Acquire)
    }

    /// Increments the epoch (the launcher does this on each restart) and returns the new value.
    pub fn bump_epoch(&self) -> u64 {
        // AcqRel: publishes the caller's recovery (reclaims) to readers of the new epoch.
        self.header().epoch.fetch_add(1, Ordering::AcqRel) + 1
    }

    // ----- producer side -----

    /// Takes a FREE slot of at least `need` data bytes for writing without blocking: the
    /// smallest such slot that is free (a slot of a larger class when the fitting class is
    /// full). `need` is what the arrays take ([`SlotCapacity::slot_bytes`]; 0 takes any slot).
    /// Errors with [`ErrorKind::NoSlotFits`] when no class is big enough, since no wait would
    /// help.
    pub fn try_acquire_free(&self, owner: u32, need: u64) -> Result<Option<SlotWriter<'_>>> {
        let owner = check_owner(owner)?;
        let largest = self.slot_bytes();
        if need > largest {
            return Err(ErrorKind::NoSlotFits { need, largest }.into());
        }
        Ok(self
            .classes
            .iter()
            .filter(|c| c.stride >= need)
            .find_map(|c| state::try_take_free(self, owner, c.first..c.first + c.count))
            .map(|(index, word)| SlotWriter {
                ring: self,
                index,
                word,
                plan: None,
                priority: 0,
            }))
    }

    /// Takes a FREE slot of at least `need` data bytes for writing (as
    /// [`Ring::try_acquire_free`]), sleeping until one is free or `timeout` passes (`None`:
    /// wait forever). This is the backpressure on producers.
    pub fn acquire_free(
        &self,
        owner: u32,
        need: u64,
        timeout: Option<Duration>,
    ) -> Result<SlotWriter<'_>> {
        check_owner(owner)?;
        // `wait_for` returns the first attempt's error at once: a `NoSlotFits` never waits.
        self.wait_for(Event::Free, timeout, || self.try_acquire_free(owner, need))
    }

    // ----- consumer side -----

    /// Claims the READY slot of highest claim priority, the oldest of those, without blocking
    /// (use it to gather a batch).
    pub fn try_claim_ready(&self, owner: u32) -> Result<Option<ClaimedSlot<'_>>> {
        let owner = check_owner(owner)?;
        Ok(
            state::try_take_ready(self, owner).map(|(index, word)| ClaimedSlot {
                ring: self,
                index,
                word,
            }),
        )
    }

    /// Claims the READY slot of highest claim priority (the oldest of those), sleeping until one
    /// is ready or `timeout` passes.
    pub fn claim_ready(&self, owner: u32, timeout: Option<Duration>) -> Result<ClaimedSlot<'_>> {
        check_owner(owner)?;
        self.wait_for(Event::Ready, timeout, || self.try_claim_ready(owner))
    }

    /// Claims READY slot `index` if it still holds `generation` (as seen in a
    /// [`Ring::snapshot`]); `Ok(None)` when it moved on. The launcher uses it to take a slot
    /// whose job ended (a poison slot after its job failed) out of the ring
    /// ([`ClaimedSlot::discard`]) before a gpu-proc proves it again.
    pub fn claim_ready_at(
        &self,
        owner: u32,
        index: usize,
        generation: u64,
    ) -> Result<Option<ClaimedSlot<'_>>> {
        let owner = check_owner(owner)?;
        self.check_index(index)?;
        let ctl = self.ctl(index);
        let word = ctl.load();
        if !word.is(SlotState::Ready) || word.generation() != generation {
            return Ok(None);
        }
        Ok(ctl
            .transition(word, word.successor(SlotState::Claimed, true, owner))
            .ok()
            .map(|word| ClaimedSlot {
                ring: self,
                index,
                word,
            }))
    }

    // ----- job owner side -----

    /// Takes any unowned DONE slot to collect its result, without blocking.
    pub fn try_take_done(&self, owner: u32) -> Result<Option<DoneSlot<'_>>> {
        let owner = check_owner(owner)?;
        Ok(
            state::try_take_done(self, owner).map(|(index, word)| DoneSlot {
                ring: self,
                index,
                word,
            }),
        )
    }

    /// Takes any unowned DONE slot, sleeping until one exists or `timeout` passes.
    pub fn take_next_done(&self, owner: u32, timeout: Option<Duration>) -> Result<DoneSlot<'_>> {
        check_owner(owner)?;
        self.wait_for(Event::Done, timeout, || self.try_take_done(owner))
    }

    /// Takes the DONE slot `index` if it still has `generation` (as seen in a
    /// [`Ring::snapshot`]) and nobody is collecting it.
    pub fn take_done(&self, owner: u32, index: usize, generation: u64) -> Result<DoneSlot<'_>> {
        let owner = check_owner(owner)?;
        self.check_index(index)?;
        let ctl = self.ctl(index);
        let word = ctl.load();
        let expected = Word::new(SlotState::Done, true, 0, generation);
        if word != expected {
            return Err(stale(index, expected, word));
        }
        let word = ctl
            .transition(expected, expected.successor(SlotState::Done, true, owner))
            .map_err(|found| stale(index, expected, found))?;
        Ok(DoneSlot {
            ring: self,
            index,
            word,
        })
    }

    /// Sleeps until some slot is DONE and not being collected, or `timeout` passes. Returns
    /// whether such a slot exists.
    pub fn wait_done(&self, timeout: Option<Duration>) -> Result<bool> {
        let any_done = || {
            Ok((0..self.slot_count)
                .any(|i| {
                    let w = self.ctl(i).load();
                    w.is(SlotState::Done) && w.owner() == 0
                })
                .then_some(()))
        };
        match self.wait_for(Event::Done, timeout, any_done) {
            Ok(()) => Ok(true),
            Err(e) if e.is_timeout() => Ok(false),
            Err(e) => Err(e),
        }
    }

    // ----- internals -----

    fn read_meta(&self, index: usize) -> SlotMeta {
        let h = self.slot_header(index);
        // Relaxed: meta is published by the CAS that set M; callers validate by re-reading or
        // CASing the state word.
        SlotMeta {
            job_id: h.job_id.load(Ordering::Relaxed),
            circuit_id: h.circuit_id.load(Ordering::Relaxed), // Relaxed: validated by the caller (word re-check or CAS)
            partition: h.partition.load(Ordering::Relaxed),
            attempt: h.attempt.load(Ordering::Relaxed),
        }
    }

    fn read_raw_layout(&self, index: usize) -> RawSlotLayout {
        let h = self.slot_header(index);
        // Relaxed (every load here): the caller owns the slot; its Acquire CAS ordered these
        // fields, and a foreign scribbler can only make them fail validation, not race it —
        // they are read once into this copy.
        let arr = |a: &[std::sync::atomic::AtomicU64], out: &mut [u64]| {
            for (o, x) in out.iter_mut().zip(a) {
                *o = x.load(Ordering::Relaxed); // Relaxed: ordered by the owner's Acquire CAS
            }
        };
        let mut raw = RawSlotLayout {
            kind: h.kind.load(Ordering::Relaxed), // Relaxed: ordered by the owner's Acquire CAS
            witness_ones: h.witness_ones.load(Ordering::Relaxed), // Relaxed: as above
            ..RawSlotLayout::default()
        };
        arr(&h.offsets, &mut raw.offsets);
        arr(&h.capacities, &mut raw.capacities);
        arr(&h.lengths, &mut raw.lengths);
        arr(&h.density_bits, &mut raw.density_bits);
        arr(&h.popcounts, &mut raw.popcounts);
        arr(&h.witness_offsets, &mut raw.witness_offsets);
        arr(&h.witness_capacities, &mut raw.witness_capacities);
        arr(&h.witness_lengths, &mut raw.witness_lengths);
        raw
    }

    /// Stores every layout field of `raw` into slot `index`'s header.
    fn store_raw_layout(&self, index: usize, raw: &RawSlotLayout) {
        let h = self.slot_header(index);
        // Relaxed (every store here): the writer owns the slot; the Release CAS that follows
        // (setting M in `begin`, READY in `publish`) publishes them.
        let arr = |a: &[std::sync::atomic::AtomicU64], v: &[u64]| {
            for (x, &v) in a.iter().zip(v) {
                x.store(v, Ordering::Relaxed); // Relaxed: published by the following Release CAS
            }
        };
        h.kind.store(raw.kind, Ordering::Relaxed); // Relaxed: as above
        arr(&h.offsets, &raw.offsets);
        arr(&h.capacities, &raw.capacities);
        arr(&h.lengths, &raw.lengths);
        arr(&h.density_bits, &raw.density_bits);
        arr(&h.popcounts, &raw.popcounts);
        arr(&h.witness_offsets, &raw.witness_offsets);
        arr(&h.witness_capacities, &raw.witness_capacities);
        arr(&h.witness_lengths, &raw.witness_lengths);
        h.witness_ones.store(raw.witness_ones, Ordering::Relaxed); // Relaxed: as above
    }

    /// The validator: copy the header once, check geometry against the slot span, recount
    /// bitmaps.
    fn validate_slot(&self, index: usize) -> Result<SlotLayout> {
        let layout = check_geometry(
            &self.read_raw_layout(index),
            self.slot_capacity(index),
            index,
        )?;
        let base = self.slot_data(index);
        let words = |f: SlotField| {
            // SAFETY: `check_geometry` proved the bitmap's range lies inside this slot's span,
            // 64-byte aligned; `u64: ShmSafe`; the caller owns the slot (no writer).
            unsafe { shm_slice::<u64>(base, layout.offset(f), layout.len(f)) }
        };
        check_densities(&layout, index, |which| words(which.field()))?;
        check_bit_values(&layout, index, words(SlotField::BitValues))?;
        Ok(layout)
    }

    fn notify(&self, event: Event) {
        let ev = &self.header().events[event as usize];
        // ===================== SYNC POINT =====================
        // SeqCst increment, then SeqCst load of the waiter count, against the waiter's SeqCst
        // register-then-read in `wait_for`: in the single SeqCst order either we see the waiter
        // (and wake it) or it reads our increment, which happens after our transition CAS, so
        // its re-scan sees the slot.
        ev.seq.fetch_add(1, Ordering::SeqCst);
        // SeqCst: see the SYNC POINT above.
        if ev.waiters.load(Ordering::SeqCst) != 0 {
            // Shared (not PRIVATE) futex: waiters may be other processes.
            if let Err(e) = futex::wake(&ev.seq, futex::Flags::empty(), i32::MAX as u32) {
                tracing::warn!(event = event.name(), "futex wake failed: {e}");
            }
        }
    }

    fn wait_for<T>(
        &self,
        event: Event,
        timeout: Option<Duration>,
        mut attempt: impl FnMut() -> Result<Option<T>>,
    ) -> Result<T> {
        if let Some(v) = attempt()? {
            return Ok(v);
        }
        let start = Instant::now();
        let deadline = timeout.and_then(|t| start.checked_add(t));
        let ev = &self.header().events[event as usize];
        loop {
            let _registered = Registered::new(ev);
            // SeqCst: after registering (see `notify`'s SYNC POINT).
            let seen = ev.seq.load(Ordering::SeqCst);
            if let Some(v) = attempt()? {
                return Ok(v);
            }
            // `None` when waiting forever (or the deadline overflowed: as good as forever).
            let remaining = match deadline {
                None => None,
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(ErrorKind::Timeout {
                            what: event.name(),
                            waited: now - start,
                        }
                        .into());
                    }
                    Some(d - now)
                }
            };
            let ts = remaining.map(|r| futex::Timespec {
                tv_sec: r.as_secs().min(i64::MAX as u64) as i64,
                tv_nsec: i64::from(r.subsec_nanos()),
            });
            match futex::wait(&ev.seq, futex::Flags::empty(), seen, ts) {
                Ok(()) => {}
                Err(e)
                    if e == rustix::io::Errno::AGAIN
                        || e == rustix::io::Errno::INTR
                        || e == rustix::io::Errno::TIMEDOUT => {}
                Err(e) => return Err(Error::io("futex_wait", e)),
            }
        }
    }
}

/// A registration in an event's waiter count, removed on drop.
struct Registered<'a>(&'a EventWord);

impl<'a> Registered<'a> {
    fn new(ev: &'a EventWord) -> Self {
        // SeqCst: see `Ring::notify`'s SYNC POINT.
        ev.waiters.fetch_add(1, Ordering::SeqCst);
        Registered(ev)
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        // Relaxed: leaving only makes wakers skip a wake that would find nobody; a waker that
        // still sees us issues one useless wake.
        self.0.waiters.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A reference to a `T` at `offset` of the mapping.
///
/// # Safety
///
/// `offset..offset + size_of::<T>()` lies inside the mapping, `base + offset` is aligned for `T`,
/// and the mapping outlives `'a`.
unsafe fn shm_ref<'a, T: ShmSafe>(base: *const u8, offset: usize) -> &'a T {
    // SAFETY: the caller's contract; any bytes are a valid `T` (`ShmSafe`).
    unsafe { &*base.add(offset).cast::<T>() }
}

/// A shared slice of `len` `T`s at `offset` from `base`.
///
/// # Safety
///
/// The range lies in the mapping, is aligned for `T`, nobody writes it while the slice lives,
/// and the mapping outlives `'a`.
unsafe fn shm_slice<'a, T: ShmSafe>(base: *const u8, offset: usize, len: usize) -> &'a [T] {
    // SAFETY: the caller's contract; any bytes are valid `T`s (`ShmSafe`).
    unsafe { std::slice::from_raw_parts(base.add(offset).cast::<T>(), len) }
}

/// A mutable slice of `len` `T`s at `offset` from `base`.
///
/// # Safety
///
/// As [`shm_slice`], and nobody else reads or writes the range while the slice lives.
unsafe fn shm_slice_mut<'a, T: ShmSafe>(base: *mut u8, offset: usize, len: usize) -> &'a mut [T] {
    // SAFETY: the caller's contract; any bytes are valid `T`s (`ShmSafe`).
    unsafe { std::slice::from_raw_parts_mut(base.add(offset).cast::<T>(), len) }
}

fn stale(index: usize, expected: Word, found: Word) -> Error {
    ErrorKind::StaleSlot {
        index,
        expected_state: expected.state().unwrap_or(SlotState::Free),
        expected_generation: expected.generation(),
        found_state: found.state_name(),
        found_generation: found.generation(),
    }
    .into()
}

/// Moves the slot a handle holds at `word` to `state`, unowned (`meta`: whether its meta stays
/// valid), and wakes `event`'s waiters. A stale handle gets [`ErrorKind::StaleSlot`] and moves
/// nothing.
fn hand_over(
    ring: &Ring,
    index: usize,
    word: Word,
    state: SlotState,
    meta: bool,
    event: Event,
) -> Result<()> {
    let next = word.successor(state, meta, 0);
    ring.ctl(index)
        .transition(word, next)
        .map_err(|found| stale(index, word, found))?;
    ring.notify(event);
    Ok(())
}

/// Checks `word` is still what the handle installed.
fn still_owned(ring: &Ring, index: usize, word: Word) -> Result<()> {
    let found = ring.ctl(index).load();
    if found != word {
        return Err(stale(index, word, found));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::round_up;
    use crate::pages::HugePagePolicy;
    use crate::slot::{
        Density, SlotCapacity, SlotKind, SlotLengths, SlotResult, WitnessCapacity, WitnessLengths,
    };
    use blstrs::Scalar;
    use std::sync::atomic::AtomicU64;

    const ME: u32 = 4242;
    const CAPS: SlotCapacity = SlotCapacity {
        n: 16,
        inputs: 3,
        aux: 70,
    };

    fn ring(slots: u32) -> Ring {
        ring_of(
            "ring-test",
            RingConfig::uniform(slots, CAPS.slot_bytes().unwrap()),
        )
    }

    /// A ring of `config` in a plain-page region named `name`.
    fn ring_of(name: &str, config: RingConfig) -> Ring {
        let region =
            Region::create(name, config.region_bytes().unwrap(), HugePagePolicy::Plain).unwrap();
        Ring::create(region, config).unwrap()
    }

    fn meta(job: u64) -> SlotMeta {
        SlotMeta {
            job_id: job,
            circuit_id: 9,
            partition: (job % 10) as u32,
            attempt: 0,
        }
    }

    fn lengths() -> SlotLengths {
        SlotLengths {
            n: 16,
            inputs: 3,
            aux: 70,
            ..SlotLengths::default()
        }
    }

    /// Writes a slot whose contents derive from `job` and publishes it.
    fn produce(ring: &Ring, job: u64) -> Published {
        let mut w = ring
            .acquire_free(ME, 0, Some(Duration::from_secs(5)))
            .unwrap();
        w.begin(meta(job), CAPS).unwrap();
        let p = w.parts_mut().unwrap();
        for (k, s) in p.a.iter_mut().chain(p.aux.iter_mut()).enumerate() {
            *s = Scalar::from(job * 1000 + k as u64);
        }
        p.density_a_aux[1] = 0b11; // bits 64, 65 of 70
        p.density_b_input[0] = 0b101;
        w.publish(SlotLengths {
            a_aux_popcount: 2,
            b_input_popcount: 2,
            ..lengths()
        })
        .unwrap()
    }

    fn kind<T: fmt::Debug>(r: Result<T>) -> ErrorKind {
        r.unwrap_err().into_kind()
    }

    #[test]
    fn full_cycle_moves_payload_and_result() {
        let ring = ring(2);
        let p = produce(&ring, 5);
        assert_eq!(p.generation, 3, "FREE→WRITING→(begin)→READY");
        let c = ring.try_claim_ready(ME).unwrap().unwrap();
        let v = c.view().unwrap();
        assert_eq!(v.meta(), meta(5));
        assert_eq!((v.a().len(), v.input().len(), v.aux().len()), (16, 3, 70));
        assert_eq!(v.a()[3], Scalar::from(5003u64));
        assert_eq!(v.aux()[0], Scalar::from(5016u64));
        let d = v.density(Density::AAux);
        assert_eq!((d.words, d.bit_len, d.popcount), (&[0, 0b11][..], 70, 2));
        assert_eq!(v.density(Density::BInput).popcount, 2);
        assert_eq!(
            ring.counts(),
            StateCounts {
                free: 1,
                claimed: 1,
                ..StateCounts::default()
            }
        );
        c.complete(SlotResult::Failed("gpu on fire")).unwrap();
        assert!(ring.wait_done(Some(Duration::ZERO)).unwrap());
        let done = ring.try_take_done(ME).unwrap().unwrap();
        assert!(ring.try_take_done(ME).unwrap().is_none());
        assert_eq!(done.result().unwrap(), SlotResult::Failed("gpu on fire"));
        assert_eq!(done.free().unwrap(), meta(5));
        assert_eq!(ring.counts().free, 2);
    }

    #[test]
    fn a_slot_requeued_after_its_prover_died_carries_a_higher_attempt() {
        let ring = ring(2);
        produce(&ring, 3);
        let dead = 999_999;
        let c = ring.try_claim_ready(dead).unwrap().unwrap();
        assert_eq!(c.meta().attempt, 0);
        c.leak();
        let report = ring.reclaim_owner(dead);
        assert_eq!(report.claimed_requeued[0].meta.unwrap().attempt, 1);
        assert_eq!(ring.try_claim_ready(ME).unwrap().unwrap().meta().attempt, 1);
    }

    #[test]
    fn a_ready_slot_of_an_ended_job_is_claimed_by_index_and_discarded_to_free() {
        let ring = ring(2);
        let p = produce(&ring, 7);
        // A stale generation, or a slot that is not READY, is not claimed.
        assert!(ring
            .claim_ready_at(ME, p.index, p.generation + 1)
            .unwrap()
            .is_none());
        assert!(ring.claim_ready_at(ME, 1, 0).unwrap().is_none());
        let c = ring
            .claim_ready_at(ME, p.index, p.generation)
            .unwrap()
            .unwrap();
        assert_eq!(c.meta(), meta(7));
        c.discard().unwrap();
        let counts = ring.counts();
        assert_eq!((counts.free, counts.ready), (2, 0));
        assert!(ring.try_claim_ready(ME).unwrap().is_none(), "never proved");
        // The freed slot is written again as usual.
        produce(&ring, 8);
        assert_eq!(ring.try_claim_ready(ME).unwrap().unwrap().meta(), meta(8));
    }

    /// Sizes of the two classes of [`two_sizes`]: the small one fits `SMALL`, the large `CAPS`.
    const SMALL: SlotCapacity = SlotCapacity {
        n: 4,
        inputs: 1,
        aux: 2,
    };
    const BIG: SlotCapacity = SlotCapacity {
        n: 300,
        inputs: 3,
        aux: 200,
    };

    /// A ring of two small slots and one large one.
    fn two_sizes() -> Ring {
        let config = RingConfig::with_classes(&[
            SlotClass {
                slot_count: 1,
                slot_bytes: BIG.slot_bytes().unwrap(),
            },
            SlotClass {
                slot_count: 2,
                slot_bytes: SMALL.slot_bytes().unwrap(),
            },
        ])
        .unwrap();
        ring_of("ring-classes", config)
    }

    #[test]
    fn classes_are_sorted_merged_and_checked() {
        let c = |slot_count, slot_bytes| SlotClass {
            slot_count,
            slot_bytes,
        };
        let config =
            RingConfig::with_classes(&[c(1, 10_000), c(2, 100), c(0, 1 << 30), c(3, 4096)])
                .unwrap();
        // 100 and 4096 both round to one page: one class of 5 slots; the empty class is gone.
        assert_eq!(config.classes(), &[c(5, 4096), c(1, 12_288)]);
        assert_eq!(config.slot_count(), 6);
        assert_eq!(config.slot_bytes(), 12_288);
        assert_eq!(config.data_bytes().unwrap(), 5 * 4096 + 12_288);
        assert_eq!(
            config.region_bytes().unwrap(),
            RING_HEADER_BYTES + 6 * SLOT_HEADER_BYTES + 5 * 4096 + 12_288
        );
        let invalid = |r: Result<RingConfig>| matches!(kind(r), ErrorKind::InvalidConfig(_));
        assert!(invalid(RingConfig::with_classes(&[])));
        assert!(invalid(RingConfig::with_classes(&[c(0, 4096)])));
        let nine: Vec<_> = (1..=9).map(|k| c(1, k * 4096)).collect();
        assert!(invalid(RingConfig::with_classes(&nine)));
        assert!(invalid(RingConfig::with_classes(&[c(1, u64::MAX)])));
        // The uniform ring is one class.
        assert_eq!(RingConfig::uniform(3, 5000).classes(), &[c(3, 5000)]);
    }

    #[test]
    fn a_producer_gets_the_smallest_free_slot_that_fits() {
        let ring = two_sizes();
        let small = SMALL.slot_bytes().unwrap();
        let big = BIG.slot_bytes().unwrap();
        assert_eq!(ring.slot_count(), 3);
        assert_eq!(ring.slot_bytes(), round_up(big, SLOT_ALIGN).unwrap());
        assert_eq!(ring.slot_capacity(0), 4096);
        assert_eq!(ring.slot_capacity(2), ring.slot_bytes());
        // Small requests fill the small class first, then spill into the large slot.
        let w0 = ring.try_acquire_free(ME, small).unwrap().unwrap();
        let w1 = ring.try_acquire_free(ME, small).unwrap().unwrap();
        assert_eq!((w0.index(), w1.index()), (0, 1));
        // A large request never gets a small slot.
        let w2 = ring.try_acquire_free(ME, big).unwrap().unwrap();
        assert_eq!(w2.index(), 2);
        assert!(ring.try_acquire_free(ME, small).unwrap().is_none());
        drop(w2);
        let mut spilled = ring.try_acquire_free(ME, small).unwrap().unwrap();
        assert_eq!(
            spilled.index(),
            2,
            "a small request spills into the large slot"
        );
        drop(w0);
        assert!(
            ring.try_acquire_free(ME, big).unwrap().is_none(),
            "the free small slot does not fit"
        );
        // Each slot lays out its arrays inside its own span: the small slot refuses BIG.
        spilled.begin(meta(1), BIG).unwrap();
        let mut w = ring.try_acquire_free(ME, 0).unwrap().unwrap();
        assert_eq!(w.index(), 0);
        assert!(matches!(
            kind(w.begin(meta(2), BIG)),
            ErrorKind::SlotTooSmall { have: 4096, .. }
        ));
        drop(w);
        // Written, published, claimed and viewed in the large slot, as in a uniform ring.
        let p = spilled.parts_mut().unwrap();
        p.a[299] = Scalar::from(7u64);
        spilled
            .publish(SlotLengths {
                n: 300,
                inputs: 3,
                aux: 200,
                ..SlotLengths::default()
            })
            .unwrap();
        let claimed = ring.try_claim_ready(ME).unwrap().unwrap();
        assert_eq!(claimed.index(), 2);
        assert_eq!(claimed.view().unwrap().a()[299], Scalar::from(7u64));
        let snap = ring.snapshot();
        assert_eq!(
            snap.iter().map(|s| s.slot_bytes).collect::<Vec<_>>(),
            vec![4096, 4096, ring.slot_bytes()]
        );
    }

    #[test]
    fn a_request_no_slot_fits_fails_at_once() {
        let ring = two_sizes();
        let too_big = ring.slot_bytes() + 1;
        assert!(matches!(
            kind(ring.try_acquire_free(ME, too_big)),
            ErrorKind::NoSlotFits { need, largest } if need == too_big && largest == ring.slot_bytes()
        ));
        // The blocking call does not wait for a slot that can never come.
        let t = Instant::now();
        assert!(matches!(
            kind(ring.acquire_free(ME, too_big, None)),
            ErrorKind::NoSlotFits { .. }
        ));
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_ring_of_several_sizes_opens_with_its_classes() {
        let ring = two_sizes();
        let dup = ring.region().fd().try_clone_to_owned().unwrap();
        // SAFETY: a region made by `create`, used by this test only.
        let opened = Ring::open(unsafe { Region::from_inherited_fd(dup) }.unwrap()).unwrap();
        assert_eq!(opened.config(), ring.config());
        assert_eq!(opened.config().classes().len(), 2);
        assert_eq!(opened.slot_capacity(1), 4096);
        // Data spans do not overlap: the last byte of slot 1 is before the first of slot 2.
        let base = |r: &Ring, i| r.slot_data(i) as usize - r.region().as_ptr() as usize;
        assert_eq!(base(&opened, 1) + 4096, base(&opened, 2));
        assert_eq!(base(&opened, 0), base(&ring, 0));
        assert_eq!(
            base(&opened, 2) as u64 + opened.slot_capacity(2),
            opened.config().region_bytes().unwrap() as u64
        );
    }

    #[test]
    fn open_validates_the_header() {
        let ring = ring(3);
        let dup = ring.region().fd().try_clone_to_owned().unwrap();
        // SAFETY: a region made by `create`, used by this test only.
        let opened = Ring::open(unsafe { Region::from_inherited_fd(dup) }.unwrap()).unwrap();
        assert_eq!(opened.config(), ring.config());
        produce(&ring, 1);
        assert_eq!(
            opened.try_claim_ready(ME).unwrap().unwrap().meta(),
            meta(1),
            "same memory"
        );

        let reopen = |tamper: &dyn Fn(&RingHeader)| {
            let dup = ring.region().fd().try_clone_to_owned().unwrap();
            // SAFETY: as above.
            let region = unsafe { Region::from_inherited_fd(dup) }.unwrap();
            // SAFETY: the header of this test's ring.
            tamper(unsafe { shm_ref::<RingHeader>(region.as_ptr(), 0) });
            let r = Ring::open(region).map(|_| ());
            // SAFETY: as above; restore what the tamper changed.
            let h = unsafe { shm_ref::<RingHeader>(ring.region().as_ptr(), 0) };
            h.magic.store(MAGIC, Ordering::Relaxed);
            h.version.store(LAYOUT_VERSION, Ordering::Relaxed); // Relaxed: single-threaded test setup
            h.slot_count.store(3, Ordering::Relaxed);
            h.class_count.store(1, Ordering::Relaxed); // Relaxed: single-threaded test setup
            h.classes[0].slot_count.store(3, Ordering::Relaxed);
            h.classes[0]
                .slot_bytes
                .store(ring.slot_bytes(), Ordering::Relaxed); // Relaxed: single-threaded test setup
            kind(r)
        };
        assert!(matches!(
            reopen(&|h| h.version.store(0, Ordering::Relaxed)),
            ErrorKind::NotInitialised
        )); // Relaxed: single-threaded test setup
        assert!(matches!(
            reopen(&|h| h.version.store(1, Ordering::Relaxed)),
            ErrorKind::VersionMismatch { found: 1, .. }
        ));
        assert!(matches!(
            reopen(&|h| h.magic.store(1, Ordering::Relaxed)),
            ErrorKind::BadMagic { found: 1, .. }
        ));
        // Relaxed (every tamper): single-threaded test setup.
        type Tamper<'a> = &'a dyn Fn(&RingHeader);
        let bad_headers: [(Tamper<'_>, &str); 7] = [
            (&|h| h.slot_count.store(4, Ordering::Relaxed), "slot_count"),
            (
                &|h| h.classes[0].slot_count.store(4, Ordering::Relaxed),
                "slot_count",
            ),
            (
                &|h| h.class_count.store(0, Ordering::Relaxed),
                "class_count",
            ),
            (
                &|h| h.class_count.store(9, Ordering::Relaxed),
                "class_count",
            ),
            (
                &|h| h.classes[0].slot_bytes.store(4097, Ordering::Relaxed),
                "classes",
            ),
            (
                // Two classes whose sizes do not grow: the geometry refuses them.
                &|h| {
                    h.class_count.store(2, Ordering::Relaxed);
                    h.classes[0].slot_count.store(2, Ordering::Relaxed);
                    h.classes[1].slot_count.store(1, Ordering::Relaxed);
                    h.classes[1].slot_bytes.store(4096, Ordering::Relaxed);
                },
                "classes",
            ),
            (&|h| h.slot_count.store(0, Ordering::Relaxed), "slot_count"),
        ];
        for (k, (tamper, want)) in bad_headers.into_iter().enumerate() {
            match reopen(tamper) {
                ErrorKind::BadHeader { field, .. } => assert_eq!(field, want, "tamper {k}"),
                other => panic!("tamper {k}: {other:?}"),
            }
        }

        let small = Region::create("small", 4096, HugePagePolicy::Plain).unwrap();
        assert!(matches!(kind(Ring::open(small)), ErrorKind::NotInitialised));
        let small = Region::create("small", 4096, HugePagePolicy::Plain).unwrap();
        assert!(matches!(
            kind(Ring::create(small, ring.config())),
            ErrorKind::TooSmall { .. }
        ));
    }

    #[test]
    fn stale_handles_cannot_touch_reclaimed_slots() {
        let ring = ring(2);
        // a producer dies mid-write
        let mut w = ring.try_acquire_free(ME, 0).unwrap().unwrap();
        w.begin(meta(1), CAPS).unwrap();
        let (index, gen) = (w.index(), w.generation());
        let stale_writer = SlotWriter {
            ring: &ring,
            index,
            word: w.word,
            plan: w.plan,
            priority: 0,
        };
        w.leak();
        let report = ring.reclaim_owner(ME);
        assert_eq!(report.writing_freed.len(), 1);
        assert_eq!(report.writing_freed[0].meta, Some(meta(1)));
        assert_eq!(report.writing_freed[0].generation, gen + 1);
        assert!(ring.reclaim_owner(ME).is_empty(), "idempotent");
        let e = stale_writer.publish(lengths()).unwrap_err();
        assert!(e.is_stale(), "{e}");
        assert_eq!(ring.counts().free, 2);

        // a consumer dies mid-claim: the synthesis is kept
        produce(&ring, 2);
        let c = ring.try_claim_ready(ME).unwrap().unwrap();
        let stale_claim = ClaimedSlot {
            ring: &ring,
            index: c.index,
            word: c.word,
        };
        c.leak();
        let report = ring.reclaim_owner(ME);
        assert_eq!(report.claimed_requeued.len(), 1);
        assert_eq!(report.claimed_requeued[0].meta.unwrap().job_id, 2);
        assert!(stale_claim.view().unwrap_err().is_stale());
        assert!(stale_claim
            .complete(SlotResult::Proof(&[0; 192]))
            .unwrap_err()
            .is_stale());
        let again = ring.try_claim_ready(7).unwrap().unwrap();
        assert_eq!(again.view().unwrap().a()[1], Scalar::from(2001u64));
        again.complete(SlotResult::Proof(&[1; 192])).unwrap();

        // a collector dies mid-collection
        ring.try_take_done(ME).unwrap().unwrap().leak();
        assert!(ring.try_take_done(8).unwrap().is_none());
        assert_eq!(ring.reclaim_owner(ME).done_released.len(), 1);
        assert!(ring.try_take_done(8).unwrap().is_some());
    }

    #[test]
    fn dropped_handles_give_slots_back() {
        let ring = ring(1);
        drop(ring.try_acquire_free(ME, 0).unwrap().unwrap());
        assert_eq!(ring.counts().free, 1);
        produce(&ring, 3);
        drop(ring.try_claim_ready(ME).unwrap().unwrap());
        assert_eq!(ring.counts().ready, 1);
        ring.try_claim_ready(ME)
            .unwrap()
            .unwrap()
            .complete(SlotResult::Proof(&[]))
            .unwrap();
        drop(ring.try_take_done(ME).unwrap().unwrap());
        assert_eq!(ring.counts().done, 1);
        let snap = ring.snapshot();
        assert_eq!(snap[0].state, Some(SlotState::Done));
        assert_eq!((snap[0].owner, snap[0].meta), (None, Some(meta(3))));
        ring.try_take_done(ME).unwrap().unwrap().retry().unwrap();
        assert_eq!(ring.counts().ready, 1, "retry keeps the synthesis");
    }

    #[test]
    fn protocol_misuse_is_an_error() {
        let ring = ring(1);
        let mut w = ring.try_acquire_free(ME, 0).unwrap().unwrap();
        assert!(matches!(kind(w.a_mut()), ErrorKind::Protocol { .. }));
        let big = SlotCapacity { n: 1 << 20, ..CAPS };
        assert!(matches!(
            kind(w.begin(meta(0), big)),
            ErrorKind::SlotTooSmall { .. }
        ));
        w.begin(meta(0), CAPS).unwrap();
        assert!(matches!(
            kind(w.begin(meta(0), CAPS)),
            ErrorKind::Protocol { .. }
        ));
        w.density_mut(Density::BAux).unwrap()[0] = 1;
        // popcount recorded wrong: publish fails with the consumer's error and frees the slot
        let e = w.publish(lengths()).unwrap_err();
        assert!(
            matches!(
                e.kind(),
                ErrorKind::InvalidSlot {
                    field: SlotField::DensityBAux,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(ring.counts().free, 1);
        let mut w = ring.try_acquire_free(ME, 0).unwrap().unwrap();
        w.begin(meta(0), CAPS).unwrap();
        assert_eq!(
            w.density_mut(Density::BAux).unwrap()[0],
            0,
            "begin zeroes bitmaps"
        );
        let e = w.publish(SlotLengths { n: 17, ..lengths() }).unwrap_err();
        assert!(
            matches!(
                e.kind(),
                ErrorKind::InvalidSlot {
                    field: SlotField::A,
                    ..
                }
            ),
            "{e}"
        );
        assert!(matches!(
            kind(ring.try_acquire_free(0, 0)),
            ErrorKind::InvalidOwner { .. }
        ));
        assert!(matches!(
            kind(ring.try_claim_ready(MAX_OWNER + 1)),
            ErrorKind::InvalidOwner { .. }
        ));
        assert!(matches!(
            kind(ring.take_done(ME, 5, 0)),
            ErrorKind::SlotOutOfRange { .. }
        ));
        assert!(kind(ring.take_done(ME, 0, 0)).to_string().contains("stale"));
    }

    #[test]
    fn consumer_rejects_a_corrupted_header() {
        let ring = ring(1);
        produce(&ring, 4);
        let c = ring.try_claim_ready(ME).unwrap().unwrap();
        let h = ring.slot_header(c.index());
        let cases: [(&AtomicU64, u64, SlotField); 3] = [
            (&h.offsets[2], 1 << 40, SlotField::C),
            (&h.offsets[3], 64, SlotField::Input),
            (&h.lengths[1], 17, SlotField::Input),
        ];
        for (cell, bad, field) in cases {
            let good = cell.swap(bad, Ordering::Relaxed); // Relaxed: single-threaded test setup
            let e = c.view().unwrap_err();
            assert!(
                matches!(e.kind(), ErrorKind::InvalidSlot { field: f, .. } if *f == field),
                "{e}"
            );
            cell.store(good, Ordering::Relaxed); // Relaxed: single-threaded test setup
        }
        c.view().unwrap();
    }

    const WCAPS: WitnessCapacity = WitnessCapacity {
        inputs: 3,
        bits: 100,
        non_bits: 20,
    };

    fn witness_lengths() -> WitnessLengths {
        WitnessLengths {
            inputs: 3,
            bits: 100,
            non_bits: 20,
            ones: 4,
        }
    }

    /// Writes a witness slot whose contents derive from `job` and publishes it.
    fn produce_witness(ring: &Ring, job: u64) -> Published {
        let mut w = ring
            .acquire_free(
                ME,
                WCAPS.slot_bytes().unwrap(),
                Some(Duration::from_secs(5)),
            )
            .unwrap();
        w.begin_witness(meta(job), WCAPS).unwrap();
        let p = w.witness_parts_mut().unwrap();
        assert_eq!(
            (p.input.len(), p.bit_values.len(), p.non_bits.len()),
            (3, 2, 20)
        );
        assert_eq!(p.bit_values, &[0, 0], "begin_witness zeroes the bit values");
        for (k, s) in p.input.iter_mut().chain(p.non_bits.iter_mut()).enumerate() {
            *s = Scalar::from(job * 1000 + k as u64);
        }
        p.bit_values[0] = 0b1011;
        p.bit_values[1] = 1 << 35; // bit 99, the last
        w.publish_witness(witness_lengths()).unwrap()
    }

    #[test]
    fn a_witness_slot_carries_its_three_arrays_and_no_full_ones() {
        let ring = ring(2);
        assert!(WCAPS.slot_bytes().unwrap() < CAPS.slot_bytes().unwrap());
        produce_witness(&ring, 6);
        let c = ring.try_claim_ready(ME).unwrap().unwrap();
        let v = c.view().unwrap();
        assert_eq!((v.meta(), v.kind()), (meta(6), SlotKind::Witness));
        assert_eq!(v.layout().witness(), Some(witness_lengths()));
        let w = v.witness().unwrap();
        assert_eq!(w.input, &[6000u64, 6001, 6002].map(Scalar::from)[..]);
        assert_eq!(w.non_bits.len(), 20);
        assert_eq!(w.non_bits[19], Scalar::from(6022u64));
        assert_eq!(
            (
                w.bit_values.words,
                w.bit_values.bit_len,
                w.bit_values.popcount
            ),
            (&[0b1011, 1 << 35][..], 100, 4)
        );
        assert!(v.a().is_empty() && v.input().is_empty() && v.aux().is_empty());
        assert!(v.density(Density::AAux).words.is_empty());
        c.complete(SlotResult::Proof(&[2; 192])).unwrap();
        let done = ring.try_take_done(ME).unwrap().unwrap();
        assert_eq!(done.result().unwrap(), SlotResult::Proof(&[2; 192]));
        done.free().unwrap();
        // The same slot serves a full synthesis next: `begin` clears the witness fields.
        produce(&ring, 7);
        let c = ring.try_claim_ready(ME).unwrap().unwrap();
        let v = c.view().unwrap();
        assert_eq!((v.kind(), v.witness()), (SlotKind::Full, None));
        assert_eq!(v.a()[3], Scalar::from(7003u64));
        c.complete(SlotResult::Proof(&[])).unwrap();
        ring.try_take_done(ME).unwrap().unwrap().free().unwrap();
        // And a witness one again after it.
        produce_witness(&ring, 8);
        let c = ring.try_claim_ready(ME).unwrap().unwrap();
        assert_eq!(
            c.view().unwrap().witness().unwrap().non_bits[0],
            Scalar::from(8003u64)
        );
    }

    #[test]
    fn consumer_rejects_every_corrupted_witness_field_by_name() {
        let ring = ring(1);
        produce_witness(&ring, 4);
        let c = ring.try_claim_ready(ME).unwrap().unwrap();
        let h = ring.slot_header(c.index());
        let cases: [(&AtomicU64, u64, SlotField); 13] = [
            (&h.witness_offsets[0], 1 << 40, SlotField::WitnessInput),
            (&h.witness_offsets[1], 8, SlotField::BitValues),
            (&h.witness_offsets[2], 0, SlotField::NonBits),
            (&h.witness_capacities[0], u64::MAX, SlotField::WitnessInput),
            (&h.witness_capacities[1], 1, SlotField::BitValues),
            (&h.witness_capacities[2], 1 << 40, SlotField::NonBits),
            (&h.witness_lengths[0], 4, SlotField::WitnessInput),
            (&h.witness_lengths[1], 129, SlotField::BitValues),
            // Fewer bits than the words hold set: bit 99 is past the 65th.
            (&h.witness_lengths[1], 65, SlotField::BitValues),
            (&h.witness_lengths[2], 21, SlotField::NonBits),
            (&h.witness_lengths[2], u64::MAX, SlotField::NonBits),
            (&h.witness_ones, 5, SlotField::BitValues),
            (&h.witness_ones, 101, SlotField::BitValues),
        ];
        for (k, (cell, bad, field)) in cases.into_iter().enumerate() {
            let good = cell.swap(bad, Ordering::Relaxed); // Relaxed: single-threaded test setup
            let e = c.view().unwrap_err();
            assert!(
                matches!(e.kind(), ErrorKind::InvalidSlot { field: f, .. } if *f == field),
                "case {k}: {e}"
            );
            assert!(e.to_string().contains(field.name()), "case {k}: {e}");
            cell.store(good, Ordering::Relaxed); // Relaxed: single-threaded test setup
        }
        for bad in [2, 7, u32::MAX] {
            h.kind.store(bad, Ordering::Relaxed); // Relaxed: single-threaded test setup
            let e = c.view().unwrap_err();
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::InvalidSlot {
                        field: SlotField::Kind,
                        ..
                    }
                ),
                "{e}"
            );
        }
        // Flipped to full, the slot reads as an empty full slot (its full fields are 0): nothing
        // outside the span is reachable, and a prover refuses an empty assignment.
        h.kind.store(0, Ordering::Relaxed); // Relaxed: single-threaded test setup
        let v = c.view().unwrap();
        assert_eq!((v.layout().n(), v.witness()), (0, None));
        h.kind.store(1, Ordering::Relaxed); // Relaxed: single-threaded test setup
        c.view().unwrap();
    }

    #[test]
    fn the_arrays_and_publish_of_the_other_kind_are_refused() {
        let ring = ring(1);
        let mut w = ring.try_acquire_free(ME, 0).unwrap().unwrap();
        assert!(matches!(
            kind(w.witness_parts_mut()),
            ErrorKind::Protocol { .. }
        ));
        w.begin_witness(meta(1), WCAPS).unwrap();
        assert!(matches!(
            kind(w.begin(meta(1), CAPS)),
            ErrorKind::Protocol { .. }
        ));
        assert!(kind(w.parts_mut())
            .to_string()
            .contains("full arrays asked of a witness slot"));
        let e = w.publish(lengths()).unwrap_err();
        assert!(e.to_string().contains("publish_witness"), "{e}");
        assert_eq!(ring.counts().free, 1, "the refused publish freed the slot");
        let mut w = ring.try_acquire_free(ME, 0).unwrap().unwrap();
        w.begin(meta(2), CAPS).unwrap();
        assert!(kind(w.witness_parts_mut())
            .to_string()
            .contains("witness arrays asked of a full slot"));
        let e = w.publish_witness(witness_lengths()).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Protocol { .. }), "{e}");
        assert_eq!(ring.counts().free, 1);
        // A witness slot that does not fit is refused like a full one.
        let mut w = ring.try_acquire_free(ME, 0).unwrap().unwrap();
        let huge = WitnessCapacity {
            non_bits: 1 << 20,
            ..WCAPS
        };
        assert!(matches!(
            kind(w.begin_witness(meta(3), huge)),
            ErrorKind::SlotTooSmall { .. }
        ));
        // Lengths that lie at publish: the producer gets the consumer's error, the slot is freed.
        w.begin_witness(meta(3), WCAPS).unwrap();
        w.witness_parts_mut().unwrap().bit_values[0] = 1;
        let e = w
            .publish_witness(WitnessLengths {
                ones: 0,
                ..witness_lengths()
            })
            .unwrap_err();
        assert!(
            matches!(
                e.kind(),
                ErrorKind::InvalidSlot {
                    field: SlotField::BitValues,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(ring.counts().free, 1);
    }

    #[test]
    fn ready_slots_are_claimed_in_publish_order() {
        let ring = ring(4);
        for job in [10, 11, 12] {
            produce(&ring, job);
        }
        let first = ring.try_claim_ready(ME).unwrap().unwrap();
        assert_eq!(first.meta().job_id, 10);
        first.release().unwrap();
        let order: Vec<u64> = (0..3)
            .map(|_| {
                let c = ring.try_claim_ready(ME).unwrap().unwrap();
                let j = c.meta().job_id;
                c.leak();
                j
            })
            .collect();
        assert_eq!(order, vec![10, 11, 12], "a released slot keeps its place");
    }

    #[test]
    fn waits_time_out_and_wake_across_threads() {
        let ring = ring(1);
        let w = ring.try_acquire_free(ME, 0).unwrap().unwrap();
        let t0 = Instant::now();
        let e = ring
            .acquire_free(ME, 0, Some(Duration::from_millis(30)))
            .unwrap_err();
        assert!(
            e.is_timeout() && t0.elapsed() >= Duration::from_millis(30),
            "{e}"
        );
        assert!(!ring.wait_done(Some(Duration::from_millis(1))).unwrap());
        drop(w);
        std::thread::scope(|s| {
            let consumer = s.spawn(|| {
                let c = ring.claim_ready(ME, Some(Duration::from_secs(10))).unwrap();
                let job = c.meta().job_id;
                c.complete(SlotResult::Proof(&job.to_le_bytes())).unwrap();
                job
            });
            std::thread::sleep(Duration::from_millis(50));
            produce(&ring, 77);
            let done = ring
                .take_next_done(ME, Some(Duration::from_secs(10)))
                .unwrap();
            assert_eq!(
                done.result().unwrap(),
                SlotResult::Proof(&77u64.to_le_bytes())
            );
            done.free().unwrap();
            assert_eq!(consumer.join().unwrap(), 77);
        });
    }

    #[test]
    fn many_threads_move_every_item_exactly_once() {
        let ring = ring(3);
        let jobs = 400u64;
        let seen: Vec<AtomicU64> = (0..jobs).map(|_| AtomicU64::new(0)).collect();
        std::thread::scope(|s| {
            for p in 0..2u64 {
                let ring = &ring;
                s.spawn(move || {
                    for job in (p..jobs).step_by(2) {
                        produce(ring, job);
                    }
                });
            }
            for _ in 0..2 {
                let ring = &ring;
                s.spawn(move || loop {
                    let c = match ring.claim_ready(ME, Some(Duration::from_millis(300))) {
                        Ok(c) => c,
                        Err(e) if e.is_timeout() => return,
                        Err(e) => panic!("{e}"),
                    };
                    let v = c.view().unwrap();
                    let job = v.meta().job_id;
                    assert_eq!(v.aux()[69], Scalar::from(job * 1000 + 85));
                    c.complete(SlotResult::Proof(&job.to_le_bytes())).unwrap();
                });
            }
            let mut collected = 0;
            while collected < jobs {
                let d = ring
                    .take_next_done(ME, Some(Duration::from_secs(20)))
                    .unwrap();
                let SlotResult::Proof(bytes) = d.result().unwrap() else {
                    panic!("failed result")
                };
                let job = u64::from_le_bytes(bytes.try_into().unwrap());
                assert_eq!(d.free().unwrap().job_id, job);
                seen[job as usize].fetch_add(1, Ordering::Relaxed); // Relaxed: single-threaded test setup
                collected += 1;
            }
        });
        assert!(
            seen.iter().all(|c| c.load(Ordering::Relaxed) == 1),
            "each job exactly once"
        ); // Relaxed: single-threaded test setup
    }

    #[test]
    fn reclaim_dead_only_takes_dead_owners() {
        let ring = ring(3);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        assert!(!pid_alive(dead));
        assert!(pid_alive(std::process::id()));
        ring.try_acquire_free(dead, 0).unwrap().unwrap().leak();
        ring.try_acquire_free(std::process::id(), 0)
            .unwrap()
            .unwrap()
            .leak();
        let report = ring.reclaim_dead();
        assert_eq!(report.writing_freed.len(), 1);
        assert_eq!(report.writing_freed[0].owner, dead);
        assert_eq!(report.writing_freed[0].meta, None, "died before begin");
        assert_eq!(ring.counts().writing, 1);
        assert_eq!((ring.epoch(), ring.bump_epoch(), ring.epoch()), (0, 1, 1));
    }
}
