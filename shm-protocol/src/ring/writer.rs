//! The producer's handle: [`SlotWriter`] owns a WRITING slot, lays it out, and publishes it.

use std::fmt;
use std::mem::ManuallyDrop;

use blstrs::Scalar;

use super::{hand_over, shm_slice_mut, stale, still_owned, Event, Ring};
use crate::error::{ErrorKind, Result, SlotField};
use crate::slot::{
    check_geometry, Density, RawSlotLayout, SlotCapacity, SlotKind, SlotLayout, SlotLengths,
    SlotMeta, WitnessCapacity, WitnessLengths,
};
use crate::state::{self, SlotState, SlotTable, Word};
use crate::sync::Ordering;

/// A WRITING slot owned by this process. Dropping it without [`SlotWriter::publish`] returns
/// the slot to FREE.
#[must_use = "dropping a writer frees the slot again"]
pub struct SlotWriter<'r> {
    pub(super) ring: &'r Ring,
    pub(super) index: usize,
    pub(super) word: Word,
    pub(super) plan: Option<SlotLayout>,
    /// Claim priority the slot is published at (see [`SlotWriter::set_claim_priority`]).
    pub(super) priority: u8,
}

/// Mutable views of all arrays of a slot being written, disjoint from one another.
#[derive(Debug)]
pub struct SlotPartsMut<'a> {
    /// `a` evaluations, capacity `n`.
    pub a: &'a mut [Scalar],
    /// `b` evaluations, capacity `n`.
    pub b: &'a mut [Scalar],
    /// `c` evaluations, capacity `n`.
    pub c: &'a mut [Scalar],
    /// Input assignment, capacity `inputs`.
    pub input: &'a mut [Scalar],
    /// Aux assignment, capacity `aux`.
    pub aux: &'a mut [Scalar],
    /// A-over-aux bitmap words (zeroed by `begin`).
    pub density_a_aux: &'a mut [u64],
    /// B-over-input bitmap words (zeroed by `begin`).
    pub density_b_input: &'a mut [u64],
    /// B-over-aux bitmap words (zeroed by `begin`).
    pub density_b_aux: &'a mut [u64],
}

/// Mutable views of a witness slot's three arrays, disjoint from one another.
#[derive(Debug)]
pub struct WitnessPartsMut<'a> {
    /// Input assignment, capacity `inputs`.
    pub input: &'a mut [Scalar],
    /// The bit variables' values, one bit each in aux order (zeroed by `begin_witness`).
    pub bit_values: &'a mut [u64],
    /// The other aux values in aux order, capacity `non_bits`.
    pub non_bits: &'a mut [Scalar],
}

/// Where a published slot is: its index and the generation of its READY word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Published {
    /// Slot index.
    pub index: usize,
    /// Generation of the READY state word.
    pub generation: u64,
}

impl<'r> SlotWriter<'r> {
    /// Slot index.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Generation of the state word this handle holds.
    pub fn generation(&self) -> u64 {
        self.word.generation()
    }

    /// Records `meta` and lays out the arrays of a full slot for `caps` (packed, 64-byte
    /// aligned), zeroing the three bitmaps. The scalar arrays are not cleared: they hold whatever
    /// the previous user left. Fails if the arrays do not fit the slot, or if called twice (or
    /// after [`SlotWriter::begin_witness`]).
    pub fn begin(&mut self, meta: SlotMeta, caps: SlotCapacity) -> Result<()> {
        let plan = RawSlotLayout::full(&caps)
            .ok_or_else(|| ErrorKind::InvalidConfig(format!("capacities {caps:?} overflow")))?;
        self.begin_with(meta, plan)
    }

    /// Records `meta` and lays out the arrays of a witness slot for `caps` (packed, 64-byte
    /// aligned): the inputs, the bit values (zeroed) and the non-bit aux values. Fails as
    /// [`SlotWriter::begin`] does.
    pub fn begin_witness(&mut self, meta: SlotMeta, caps: WitnessCapacity) -> Result<()> {
        let plan = RawSlotLayout::witness(&caps)
            .ok_or_else(|| ErrorKind::InvalidConfig(format!("capacities {caps:?} overflow")))?;
        self.begin_with(meta, plan)
    }

    /// `begin` for a planned layout (`raw`, its lengths at the capacities) of `total` bytes.
    fn begin_with(&mut self, meta: SlotMeta, (raw, total): (RawSlotLayout, u64)) -> Result<()> {
        if self.plan.is_some() {
            return Err(ErrorKind::Protocol {
                index: self.index,
                what: "`begin` called twice",
            }
            .into());
        }
        let have = self.ring.slot_capacity(self.index);
        if total > have {
            return Err(ErrorKind::SlotTooSmall { need: total, have }.into());
        }
        still_owned(self.ring, self.index, self.word)?;
        let h = self.ring.slot_header(self.index);
        // ===================== SYNC POINT =====================
        // Release fence: orders our acquisition of the slot (the FREE → WRITING CAS) before the
        // meta stores below, pairing with the Acquire fence in `read_meta_consistent`.
        std::sync::atomic::fence(Ordering::Release);
        // Relaxed (every store here): published by the Release CAS that sets M below, and
        // again by the one in `publish`.
        h.job_id.store(meta.job_id, Ordering::Relaxed);
        h.circuit_id.store(meta.circuit_id, Ordering::Relaxed);
        h.partition.store(meta.partition, Ordering::Relaxed); // Relaxed: published by the CAS that sets M
        h.attempt.store(meta.attempt, Ordering::Relaxed);
        // The offsets and capacities; every length, bit length and popcount 0 until `publish`.
        self.ring.store_raw_layout(
            self.index,
            &RawSlotLayout {
                lengths: [0; 3],
                density_bits: [0; 3],
                popcounts: [0; 3],
                witness_lengths: [0; 3],
                witness_ones: 0,
                ..raw
            },
        );
        let plan = check_geometry(&raw, have, self.index)?;
        let base = self.ring.slot_data(self.index);
        let bitmaps = match plan.kind() {
            SlotKind::Full => &SlotField::ARRAYS[5..],
            SlotKind::Witness => &SlotField::WITNESS_ARRAYS[1..2],
        };
        for &f in bitmaps {
            // SAFETY: the plan was validated against this slot's span; WRITING(us) makes the
            // span ours alone.
            unsafe { shm_slice_mut::<u64>(base, plan.offset(f), plan.capacity(f)) }.fill(0);
        }
        let next = self
            .word
            .successor(SlotState::Writing, true, self.word.owner());
        self.word = self
            .ring
            .ctl(self.index)
            .transition(self.word, next)
            .map_err(|found| stale(self.index, self.word, found))?;
        self.plan = Some(plan);
        Ok(())
    }

    /// The plan of a begun slot of `kind`; a protocol error before `begin` or for the other
    /// kind.
    fn plan_of(&self, kind: SlotKind) -> Result<SlotLayout> {
        match self.plan {
            None => Err(ErrorKind::Protocol {
                index: self.index,
                what: "arrays used before `begin`",
            }
            .into()),
            Some(plan) if plan.kind() != kind => Err(ErrorKind::Protocol {
                index: self.index,
                what: match kind {
                    SlotKind::Full => "full arrays asked of a witness slot",
                    SlotKind::Witness => "witness arrays asked of a full slot",
                },
            }
            .into()),
            Some(plan) => Ok(plan),
        }
    }

    /// Mutable views of a witness slot's three arrays at their capacities. Fails before
    /// [`SlotWriter::begin_witness`], for a full slot, or once the handle is stale.
    pub fn witness_parts_mut(&mut self) -> Result<WitnessPartsMut<'_>> {
        let plan = self.plan_of(SlotKind::Witness)?;
        still_owned(self.ring, self.index, self.word)?;
        let base = self.ring.slot_data(self.index);
        // SAFETY: (all three slices) the plan was validated against this slot's span (inside
        // the region, 64-byte aligned, pairwise disjoint); WRITING(us) gives this handle the
        // span alone, and `&mut self` keeps the slices unique in this process.
        unsafe {
            let s = |f: SlotField| shm_slice_mut::<Scalar>(base, plan.offset(f), plan.capacity(f));
            Ok(WitnessPartsMut {
                input: s(SlotField::WitnessInput),
                bit_values: shm_slice_mut::<u64>(
                    base,
                    plan.offset(SlotField::BitValues),
                    plan.capacity(SlotField::BitValues),
                ),
                non_bits: s(SlotField::NonBits),
            })
        }
    }

    /// Mutable views of all arrays of a full slot at their capacities. Fails before `begin`, for
    /// a witness slot, or once the handle is stale.
    pub fn parts_mut(&mut self) -> Result<SlotPartsMut<'_>> {
        let plan = self.plan_of(SlotKind::Full)?;
        still_owned(self.ring, self.index, self.word)?;
        let base = self.ring.slot_data(self.index);
        // SAFETY: (all eight slices) the plan was validated against this slot's span (inside the
        // region, 64-byte aligned, pairwise disjoint); WRITING(us) gives this handle the span
        // alone, and `&mut self` keeps the slices unique in this process.
        unsafe {
            let s = |f: SlotField| shm_slice_mut::<Scalar>(base, plan.offset(f), plan.capacity(f));
            let w = |f: SlotField| shm_slice_mut::<u64>(base, plan.offset(f), plan.capacity(f));
            Ok(SlotPartsMut {
                a: s(SlotField::A),
                b: s(SlotField::B),
                c: s(SlotField::C),
                input: s(SlotField::Input),
                aux: s(SlotField::Aux),
                density_a_aux: w(SlotField::DensityAAux),
                density_b_input: w(SlotField::DensityBInput),
                density_b_aux: w(SlotField::DensityBAux),
            })
        }
    }

    /// `a` at capacity `n`.
    pub fn a_mut(&mut self) -> Result<&mut [Scalar]> {
        self.parts_mut().map(|p| p.a)
    }
    /// `b` at capacity `n`.
    pub fn b_mut(&mut self) -> Result<&mut [Scalar]> {
        self.parts_mut().map(|p| p.b)
    }
    /// `c` at capacity `n`.
    pub fn c_mut(&mut self) -> Result<&mut [Scalar]> {
        self.parts_mut().map(|p| p.c)
    }
    /// Input assignment at capacity `inputs`.
    pub fn input_mut(&mut self) -> Result<&mut [Scalar]> {
        self.parts_mut().map(|p| p.input)
    }
    /// Aux assignment at capacity `aux`.
    pub fn aux_mut(&mut self) -> Result<&mut [Scalar]> {
        self.parts_mut().map(|p| p.aux)
    }
    /// A bitmap's words at capacity.
    pub fn density_mut(&mut self, which: Density) -> Result<&mut [u64]> {
        self.parts_mut().map(|p| match which {
            Density::AAux => p.density_a_aux,
            Density::BInput => p.density_b_input,
            Density::BAux => p.density_b_aux,
        })
    }

    /// Popcount of a bitmap's first `bits` bits, for producers that do not track it.
    pub fn popcount(&mut self, which: Density, bits: usize) -> Result<u64> {
        let words = self.density_mut(which)?;
        let full = (bits / 64).min(words.len());
        let mut count: u64 = words[..full]
            .iter()
            .map(|w| u64::from(w.count_ones()))
            .sum();
        if bits % 64 != 0 && full < words.len() {
            count += u64::from((words[full] & ((1u64 << (bits % 64)) - 1)).count_ones());
        }
        Ok(count)
    }

    /// Sets the claim priority the slot will be published at: consumers claim READY slots with
    /// the highest priority first, then the oldest publish first (FIFO within a priority). 0,
    /// the default, is claimed after every other priority. The launcher passes its job priority
    /// (cuzk's scale, 1 LOW … 4 CRITICAL).
    pub fn set_claim_priority(&mut self, priority: u8) {
        self.priority = priority;
    }

    /// Records a full slot's final lengths, validates the slot exactly as a consumer will, and
    /// makes it READY (waking consumers). On any error the slot goes back to FREE.
    pub fn publish(self, lengths: SlotLengths) -> Result<Published> {
        let this = ManuallyDrop::new(self);
        let result = this.publish_inner(lengths);
        if result.is_err() {
            let _ = this.abandon_inner();
        }
        result
    }

    /// Records a witness slot's final lengths, validates it exactly as a consumer will (the bit
    /// values recounted), and makes it READY. On any error the slot goes back to FREE.
    pub fn publish_witness(self, lengths: WitnessLengths) -> Result<Published> {
        let this = ManuallyDrop::new(self);
        let result = this.publish_witness_inner(lengths);
        if result.is_err() {
            let _ = this.abandon_inner();
        }
        result
    }

    fn publish_witness_inner(&self, lengths: WitnessLengths) -> Result<Published> {
        self.plan_of(SlotKind::Witness)?;
        still_owned(self.ring, self.index, self.word)?;
        let h = self.ring.slot_header(self.index);
        let w = [lengths.inputs, lengths.bits, lengths.non_bits];
        for (x, v) in h.witness_lengths.iter().zip(w) {
            x.store(v as u64, Ordering::Relaxed); // Relaxed: published by the Release CAS in `state::publish`
        }
        h.witness_ones.store(lengths.ones, Ordering::Relaxed); // Relaxed: as above
        self.make_ready()
    }

    /// Validates the slot as a consumer will and moves it WRITING → READY.
    fn make_ready(&self) -> Result<Published> {
        self.ring.validate_slot(self.index)?;
        let word = state::publish(self.ring, self.index, self.word, self.priority)
            .map_err(|found| stale(self.index, self.word, found))?;
        self.ring.notify(Event::Ready);
        Ok(Published {
            index: self.index,
            generation: word.generation(),
        })
    }

    fn publish_inner(&self, lengths: SlotLengths) -> Result<Published> {
        match self.plan {
            None => {
                return Err(ErrorKind::Protocol {
                    index: self.index,
                    what: "`publish` before `begin`",
                }
                .into())
            }
            Some(plan) if plan.kind() == SlotKind::Witness => {
                return Err(ErrorKind::Protocol {
                    index: self.index,
                    what: "`publish` of a witness slot: use `publish_witness`",
                }
                .into())
            }
            Some(_) => {}
        }
        still_owned(self.ring, self.index, self.word)?;
        let h = self.ring.slot_header(self.index);
        let (n, i, x) = (lengths.n as u64, lengths.inputs as u64, lengths.aux as u64);
        // Relaxed (every store here): published by the Release CAS in `state::publish`.
        for (k, v) in [n, i, x].into_iter().enumerate() {
            h.lengths[k].store(v, Ordering::Relaxed);
        }
        for (k, v) in [x, i, x].into_iter().enumerate() {
            h.density_bits[k].store(v, Ordering::Relaxed); // Relaxed: published by the Release CAS in `state::publish`
        }
        let pops = [
            lengths.a_aux_popcount,
            lengths.b_input_popcount,
            lengths.b_aux_popcount,
        ];
        for (k, v) in pops.into_iter().enumerate() {
            h.popcounts[k].store(v, Ordering::Relaxed); // Relaxed: published by the Release CAS in `state::publish`
        }
        self.make_ready()
    }

    /// Gives the slot back unpublished (→ FREE), waking producers.
    pub fn abandon(self) -> Result<()> {
        ManuallyDrop::new(self).abandon_inner()
    }

    fn abandon_inner(&self) -> Result<()> {
        hand_over(
            self.ring,
            self.index,
            self.word,
            SlotState::Free,
            false,
            Event::Free,
        )
    }

    /// Forgets the handle and leaves the slot WRITING, exactly as if this process had died
    /// here; only [`Ring::reclaim_owner`] recovers it. For crash tests.
    pub fn leak(self) {
        std::mem::forget(self);
    }
}

impl Drop for SlotWriter<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.abandon_inner() {
            tracing::debug!(slot = self.index, "dropped writer was already stale: {e}");
        }
    }
}

impl fmt::Debug for SlotWriter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotWriter")
            .field("index", &self.index)
            .field("word", &self.word)
            .finish()
    }
}
