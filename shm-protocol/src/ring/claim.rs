//! The consumer's and the collector's handles: [`ClaimedSlot`] and its [`SlotView`], [`DoneSlot`].

use std::fmt;
use std::mem::ManuallyDrop;

use blstrs::Scalar;

use super::{hand_over, shm_slice, still_owned, Event, Ring};
#[cfg(doc)]
use crate::error::ErrorKind;
use crate::error::{Result, SlotField};
use crate::slot::{Density, SlotKind, SlotLayout, SlotMeta, SlotResult};
use crate::state::{SlotState, Word};
use crate::sync::Ordering;

/// A CLAIMED slot owned by this process. Dropping it without [`ClaimedSlot::complete`] puts the
/// slot back to READY.
#[must_use = "dropping a claimed slot releases it to READY"]
pub struct ClaimedSlot<'r> {
    pub(super) ring: &'r Ring,
    pub(super) index: usize,
    pub(super) word: Word,
}

/// A validated, zero-copy view of a claimed slot's payload.
#[derive(Debug, Clone, Copy)]
pub struct SlotView<'a> {
    meta: SlotMeta,
    layout: SlotLayout,
    base: *const u8,
    _slot: std::marker::PhantomData<&'a ClaimedSlot<'a>>,
}

/// A density bitmap as stored: words, bit length, popcount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bitmap<'a> {
    /// `ceil(bit_len / 64)` words, least significant bit first.
    pub words: &'a [u64],
    /// Number of valid bits.
    pub bit_len: u64,
    /// Set bits (recounted by the validator).
    pub popcount: u64,
}

/// A witness slot's arrays, validated: the inputs, the bit values (one bit per bit variable, in
/// aux order; `bit_len` bits, `popcount` of them 1, recounted) and the non-bit aux values in aux
/// order. Which aux variables are bits is the circuit's (its matrices say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WitnessView<'a> {
    /// Input assignment (first element is ONE by convention; not checked).
    pub input: &'a [Scalar],
    /// The bit variables' values.
    pub bit_values: Bitmap<'a>,
    /// The non-bit aux values.
    pub non_bits: &'a [Scalar],
}

// SAFETY: a view is a set of shared slices into a claimed slot (like `&[Scalar]`): it can be
// sent to and shared with other threads while the claim it borrows lives.
unsafe impl Send for SlotView<'_> {}
// SAFETY: as above.
unsafe impl Sync for SlotView<'_> {}

impl<'a> SlotView<'a> {
    fn scalars(&self, f: SlotField) -> &'a [Scalar] {
        // SAFETY: the layout passed `check_geometry` against this slot's span (inside the
        // region, 64-byte aligned); the slot is CLAIMED by the handle this view borrows, so no
        // protocol-abiding process writes it while the view lives.
        unsafe { shm_slice(self.base, self.layout.offset(f), self.layout.len(f)) }
    }

    /// Meta written by the producer.
    pub fn meta(&self) -> SlotMeta {
        self.meta
    }
    /// What the slot carries. A witness slot's full arrays (a, b, c, input, aux, densities) are
    /// empty: see [`SlotView::witness`].
    pub fn kind(&self) -> SlotKind {
        self.layout.kind()
    }
    /// A witness slot's arrays; `None` for a full slot.
    pub fn witness(&self) -> Option<WitnessView<'a>> {
        let w = self.layout.witness()?;
        let f = SlotField::BitValues;
        Some(WitnessView {
            input: self.scalars(SlotField::WitnessInput),
            bit_values: Bitmap {
                // SAFETY: as in `scalars`.
                words: unsafe { shm_slice(self.base, self.layout.offset(f), self.layout.len(f)) },
                bit_len: w.bits as u64,
                popcount: w.ones,
            },
            non_bits: self.scalars(SlotField::NonBits),
        })
    }
    /// The validated layout.
    pub fn layout(&self) -> &SlotLayout {
        &self.layout
    }
    /// `a`, `n` elements.
    pub fn a(&self) -> &'a [Scalar] {
        self.scalars(SlotField::A)
    }
    /// `b`, `n` elements.
    pub fn b(&self) -> &'a [Scalar] {
        self.scalars(SlotField::B)
    }
    /// `c`, `n` elements.
    pub fn c(&self) -> &'a [Scalar] {
        self.scalars(SlotField::C)
    }
    /// Input assignment (first element is ONE by convention; not checked).
    pub fn input(&self) -> &'a [Scalar] {
        self.scalars(SlotField::Input)
    }
    /// Aux assignment.
    pub fn aux(&self) -> &'a [Scalar] {
        self.scalars(SlotField::Aux)
    }
    /// A density bitmap.
    pub fn density(&self, which: Density) -> Bitmap<'a> {
        let f = which.field();
        Bitmap {
            // SAFETY: as in `scalars`.
            words: unsafe { shm_slice(self.base, self.layout.offset(f), self.layout.len(f)) },
            bit_len: self.layout.bit_len(which),
            popcount: self.layout.popcount(which),
        }
    }
}

impl<'r> ClaimedSlot<'r> {
    /// Slot index.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Generation of the state word this handle holds.
    pub fn generation(&self) -> u64 {
        self.word.generation()
    }

    /// The slot's meta.
    pub fn meta(&self) -> SlotMeta {
        self.ring.read_meta(self.index)
    }

    /// Validates the slot header against the slot span and returns zero-copy views. Every
    /// offset, length, bit length and popcount is checked; a bad header is an
    /// [`ErrorKind::InvalidSlot`] naming the field (fail the job with it and keep serving).
    pub fn view(&self) -> Result<SlotView<'_>> {
        still_owned(self.ring, self.index, self.word)?;
        let layout = self.ring.validate_slot(self.index)?;
        Ok(SlotView {
            meta: self.meta(),
            layout,
            base: self.ring.slot_data(self.index),
            _slot: std::marker::PhantomData,
        })
    }

    /// Stores `result` in the slot's result area and makes it DONE (waking collectors).
    pub fn complete(self, result: SlotResult<'_>) -> Result<()> {
        let this = ManuallyDrop::new(self);
        let r = this.complete_inner(result);
        if r.is_err() {
            // Not stale (that returns before touching anything) → give the slot back to READY.
            let _ = this.release_inner();
        }
        r
    }

    fn complete_inner(&self, result: SlotResult<'_>) -> Result<()> {
        let (status, bytes) = result.encode()?;
        still_owned(self.ring, self.index, self.word)?;
        let h = self.ring.slot_header(self.index);
        // SAFETY: the result area is RESULT_CAPACITY bytes inside the slot header and `bytes`
        // fits (checked by `encode`); CLAIMED(us) gives this handle the area alone.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), h.result.get().cast::<u8>(), bytes.len())
        };
        // Relaxed: published by the Release CAS to DONE below.
        h.result_status.store(status, Ordering::Relaxed);
        // Relaxed: as above. `encode` bounds the length by RESULT_CAPACITY (4096).
        h.result_len.store(bytes.len() as u32, Ordering::Relaxed);
        self.move_to(SlotState::Done, true, Event::Done)
    }

    /// Drops the synthesis without proving it: the slot goes back to FREE (waking producers).
    /// For a slot whose job has ended.
    pub fn discard(self) -> Result<()> {
        let this = ManuallyDrop::new(self);
        this.move_to(SlotState::Free, false, Event::Free)
    }

    /// Gives the slot back to READY for another consumer.
    pub fn release(self) -> Result<()> {
        ManuallyDrop::new(self).release_inner()
    }

    fn release_inner(&self) -> Result<()> {
        self.move_to(SlotState::Ready, true, Event::Ready)
    }

    fn move_to(&self, state: SlotState, meta: bool, event: Event) -> Result<()> {
        hand_over(self.ring, self.index, self.word, state, meta, event)
    }

    /// Forgets the handle, leaving the slot CLAIMED as if this process died here: for crash
    /// tests, and for a prover whose GPU context is lost (it exits next; the launcher reclaims
    /// and requeues the slot).
    pub fn leak(self) {
        std::mem::forget(self);
    }
}

impl Drop for ClaimedSlot<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.release_inner() {
            tracing::debug!(slot = self.index, "dropped claim was already stale: {e}");
        }
    }
}

impl fmt::Debug for ClaimedSlot<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClaimedSlot")
            .field("index", &self.index)
            .field("word", &self.word)
            .finish()
    }
}

/// A DONE slot being collected by this process. Dropping it without [`DoneSlot::free`] leaves
/// it DONE for another collection.
#[must_use = "dropping a done slot leaves it DONE"]
pub struct DoneSlot<'r> {
    pub(super) ring: &'r Ring,
    pub(super) index: usize,
    pub(super) word: Word,
}

impl<'r> DoneSlot<'r> {
    /// Slot index.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Generation of the state word this handle holds (every transition increments it).
    pub fn generation(&self) -> u64 {
        self.word.generation()
    }

    /// The slot's meta.
    pub fn meta(&self) -> SlotMeta {
        self.ring.read_meta(self.index)
    }

    /// The result the consumer stored, validated (status, length, UTF-8 of a message).
    pub fn result(&self) -> Result<SlotResult<'_>> {
        still_owned(self.ring, self.index, self.word)?;
        let h = self.ring.slot_header(self.index);
        // Relaxed: ordered by the Acquire CAS that took the slot after the consumer's Release.
        let status = h.result_status.load(Ordering::Relaxed);
        // Relaxed: as above.
        let len = h.result_len.load(Ordering::Relaxed);
        // SAFETY: the result area lies in the slot header; DONE(us) means nobody writes it.
        let area: &[u8] = unsafe { &*h.result.get() };
        SlotResult::decode(self.index, status, len, area)
    }

    /// Frees the slot (→ FREE, waking producers) and returns its meta.
    pub fn free(self) -> Result<SlotMeta> {
        let this = ManuallyDrop::new(self);
        let meta = this.meta();
        this.move_to(SlotState::Free, false, Event::Free)?;
        Ok(meta)
    }

    /// Puts the slot back to READY to be proved again (e.g. after a GPU failure), keeping the
    /// synthesis.
    pub fn retry(self) -> Result<()> {
        ManuallyDrop::new(self).move_to(SlotState::Ready, true, Event::Ready)
    }

    fn move_to(&self, state: SlotState, meta: bool, event: Event) -> Result<()> {
        hand_over(self.ring, self.index, self.word, state, meta, event)
    }

    /// Forgets the handle, leaving the slot DONE and owned, as if this process died here.
    pub fn leak(self) {
        std::mem::forget(self);
    }
}

impl Drop for DoneSlot<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.move_to(SlotState::Done, true, Event::Done) {
            tracing::debug!(
                slot = self.index,
                "dropped done handle was already stale: {e}"
            );
        }
    }
}

impl fmt::Debug for DoneSlot<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DoneSlot")
            .field("index", &self.index)
            .field("word", &self.word)
            .finish()
    }
}
