//! The `#[repr(C)]` structures that live in the mapping, with compile-time size and offset checks.
//!
//! The byte layout is drawn in the crate docs ([`crate`]). Every field other than padding and the
//! result bytes is an atomic, so any process may read any field at any time without undefined
//! behaviour; which process may *write* a field is decided by the slot state (see [`crate::ring`]).

use std::cell::UnsafeCell;
use std::mem::{align_of, offset_of, size_of};
use std::sync::atomic::{AtomicU32, AtomicU64};

use blstrs::Scalar;

use crate::state::SlotCtl;

/// `"SPRVRING"` read as a little-endian `u64`: the first word of every ring.
pub const MAGIC: u64 = u64::from_le_bytes(*b"SPRVRING");
/// The layout version this build writes and reads. 0 means "not initialised yet".
pub const LAYOUT_VERSION: u32 = 3;
/// Bytes of the ring header at offset 0.
pub const RING_HEADER_BYTES: usize = 4096;
/// Bytes of one slot header in the table that follows the ring header.
pub const SLOT_HEADER_BYTES: usize = 8192;
/// Offset of the result bytes inside a slot header.
pub const RESULT_OFFSET: usize = 4096;
/// Bytes of the result area of a slot (a proof is [`PROOF_BYTES`]; the rest is room for a
/// message).
pub const RESULT_CAPACITY: usize = SLOT_HEADER_BYTES - RESULT_OFFSET;
/// Bytes of one Groth16 proof over BLS12-381 (compressed A, B, C): a partition's result, and
/// each partition's share of a job's proof bytes.
pub const PROOF_BYTES: usize = 192;
/// Alignment of every array inside a slot's data span (a cache line).
pub const ARRAY_ALIGN: u64 = 64;
/// Alignment of the data area and of each slot's data span (a small page).
pub const SLOT_ALIGN: u64 = 4096;
/// The most slots a ring may have.
pub const MAX_SLOTS: u32 = 1 << 16;
/// The most slot classes (slot sizes) a ring may have.
pub const MAX_SLOT_CLASSES: usize = 8;

/// Types that may be placed in (or read out of) the shared mapping.
///
/// # Safety
///
/// An implementor must be:
/// - `#[repr(C)]` or `#[repr(transparent)]` over types that are themselves `ShmSafe`, so that
///   every process compiled from this crate agrees on its layout;
/// - free of pointers and references: the mapping has a different address in every process, so
///   the layout refers to memory by offsets only;
/// - valid for every bit pattern, because another process may write anything;
/// - mutable through `&self` only by atomics or an `UnsafeCell` whose accesses the slot protocol
///   orders.
pub unsafe trait ShmSafe: Sized {}

// SAFETY: plain integers: every bit pattern is valid, no pointers.
unsafe impl ShmSafe for u8 {}
// SAFETY: as above.
unsafe impl ShmSafe for u64 {}
// SAFETY: blstrs `Scalar` is `#[repr(transparent)]` over `blst_fr`, a `#[repr(C)]` struct of
// `[u64; 4]` (checked by size/align below): no pointers, every bit pattern is a value (a
// non-canonical one gives a wrong proof, never undefined behaviour).
unsafe impl ShmSafe for Scalar {}
// SAFETY: repr(C), atomics and byte padding only.
unsafe impl ShmSafe for RingHeader {}
// SAFETY: repr(C), atomics and byte padding only.
unsafe impl ShmSafe for SlotClassWord {}
// SAFETY: repr(C), atomics, byte padding and an UnsafeCell of bytes accessed only by the
// slot's owner (CLAIMED writes it, the DONE collector reads it).
unsafe impl ShmSafe for SlotHeader {}

const _: () = assert!(size_of::<Scalar>() == 32 && align_of::<Scalar>() == 8);

/// One futex event word per waited-on condition, alone on its cache line.
#[repr(C, align(64))]
pub(crate) struct EventWord {
    /// Incremented by every transition that may satisfy a waiter; the futex word.
    pub(crate) seq: AtomicU32,
    /// Processes/threads currently inside a wait on `seq` (wakes are skipped when 0).
    pub(crate) waiters: AtomicU32,
    _pad: [u8; 56],
}

/// The ring header at offset 0 of the mapping.
#[repr(C, align(64))]
pub(crate) struct RingHeader {
    pub(crate) magic: AtomicU64,
    /// Written last by the creator (Release); 0 = not initialised.
    pub(crate) version: AtomicU32,
    pub(crate) header_bytes: AtomicU32,
    pub(crate) slot_header_bytes: AtomicU32,
    pub(crate) slot_count: AtomicU32,
    /// The stride of slot data spans (a multiple of [`SLOT_ALIGN`]).
    pub(crate) slot_bytes: AtomicU64,
    pub(crate) slots_offset: AtomicU64,
    pub(crate) data_offset: AtomicU64,
    pub(crate) ring_bytes: AtomicU64,
    pub(crate) page_kind: AtomicU32,
    pub(crate) result_capacity: AtomicU32,
    /// Bumped by the launcher on every restart.
    pub(crate) epoch: AtomicU64,
    /// The next publish ticket.
    pub(crate) ticket: AtomicU64,
    _pad0: [u8; 48],
    /// FREE, READY and DONE events, in that order.
    pub(crate) events: [EventWord; 3],
    /// Slot classes in use (1..=[`MAX_SLOT_CLASSES`]).
    pub(crate) class_count: AtomicU32,
    _pad1: [u8; 60],
    /// The slot classes, smallest stride first: the slots of class 0 come first in the slot
    /// table and the data area, then those of class 1, and so on.
    pub(crate) classes: [SlotClassWord; MAX_SLOT_CLASSES],
    _reserved: [u8; RING_HEADER_BYTES - 512],
}

/// One slot class in the ring header: `slot_count` slots whose data spans are `slot_bytes` each.
#[repr(C)]
pub(crate) struct SlotClassWord {
    pub(crate) slot_count: AtomicU32,
    _pad: [u8; 4],
    /// A multiple of [`SLOT_ALIGN`].
    pub(crate) slot_bytes: AtomicU64,
}

/// One slot header. Offsets in it are relative to the start of the slot's own data span, so a
/// header can never name memory of another slot.
#[repr(C, align(64))]
pub(crate) struct SlotHeader {
    pub(crate) ctl: SlotCtl,
    pub(crate) job_id: AtomicU64,
    pub(crate) circuit_id: AtomicU64,
    pub(crate) partition: AtomicU32,
    pub(crate) attempt: AtomicU32,
    /// What the slot carries: 0 = full (the eight arrays below), 1 = witness (the three witness
    /// arrays further down); anything else is invalid.
    pub(crate) kind: AtomicU32,
    _pad0: [u8; 20],
    /// Byte offsets of a, b, c, input, aux, density A-aux, B-input, B-aux (a full slot; 0 in a
    /// witness slot, as every field of the full arrays).
    pub(crate) offsets: [AtomicU64; 8],
    /// Capacities of the same arrays: elements for the five scalar arrays, words for bitmaps.
    pub(crate) capacities: [AtomicU64; 8],
    /// n, inputs, aux.
    pub(crate) lengths: [AtomicU64; 3],
    /// Bit lengths of the three bitmaps.
    pub(crate) density_bits: [AtomicU64; 3],
    /// Popcounts of the three bitmaps.
    pub(crate) popcounts: [AtomicU64; 3],
    /// Byte offsets of a witness slot's input, bit values and non-bit values (0 in a full slot,
    /// as every witness field).
    pub(crate) witness_offsets: [AtomicU64; 3],
    /// Their capacities: elements, words, elements.
    pub(crate) witness_capacities: [AtomicU64; 3],
    /// Inputs, bit variables (bits of the bit values), non-bit aux values.
    pub(crate) witness_lengths: [AtomicU64; 3],
    /// Popcount of the bit values (bit variables that are 1).
    pub(crate) witness_ones: AtomicU64,
    _pad1: [u8; 168],
    /// 1 = proof, 2 = failed (message); anything else is invalid.
    pub(crate) result_status: AtomicU32,
    pub(crate) result_len: AtomicU32,
    _reserved: [u8; RESULT_OFFSET - 520],
    pub(crate) result: UnsafeCell<[u8; RESULT_CAPACITY]>,
}

/// Offsets of the slot header fields that a header image is decoded from.
pub(crate) mod slot_offsets {
    use super::*;
    pub(crate) const JOB_ID: usize = offset_of!(SlotHeader, job_id);
    pub(crate) const CIRCUIT_ID: usize = offset_of!(SlotHeader, circuit_id);
    pub(crate) const PARTITION: usize = offset_of!(SlotHeader, partition);
    pub(crate) const ATTEMPT: usize = offset_of!(SlotHeader, attempt);
    pub(crate) const OFFSETS: usize = offset_of!(SlotHeader, offsets);
    pub(crate) const CAPACITIES: usize = offset_of!(SlotHeader, capacities);
    pub(crate) const LENGTHS: usize = offset_of!(SlotHeader, lengths);
    pub(crate) const DENSITY_BITS: usize = offset_of!(SlotHeader, density_bits);
    pub(crate) const POPCOUNTS: usize = offset_of!(SlotHeader, popcounts);
    pub(crate) const KIND: usize = offset_of!(SlotHeader, kind);
    pub(crate) const WITNESS_OFFSETS: usize = offset_of!(SlotHeader, witness_offsets);
    pub(crate) const WITNESS_CAPACITIES: usize = offset_of!(SlotHeader, witness_capacities);
    pub(crate) const WITNESS_LENGTHS: usize = offset_of!(SlotHeader, witness_lengths);
    pub(crate) const WITNESS_ONES: usize = offset_of!(SlotHeader, witness_ones);
    /// Bytes of the header that describe the slot (everything before the result area).
    pub(crate) const CONTROL_BYTES: usize = RESULT_OFFSET;
}

// Compile-time checks: the drawing in the crate docs is the truth, and these keep it so.
const _: () = {
    assert!(size_of::<EventWord>() == 64);
    assert!(size_of::<SlotCtl>() == 16);
    assert!(size_of::<RingHeader>() == RING_HEADER_BYTES);
    assert!(offset_of!(RingHeader, magic) == 0);
    assert!(offset_of!(RingHeader, version) == 8);
    assert!(offset_of!(RingHeader, slot_count) == 20);
    assert!(offset_of!(RingHeader, slot_bytes) == 24);
    assert!(offset_of!(RingHeader, data_offset) == 40);
    assert!(offset_of!(RingHeader, epoch) == 64);
    assert!(offset_of!(RingHeader, ticket) == 72);
    assert!(offset_of!(RingHeader, events) == 128);
    assert!(offset_of!(RingHeader, class_count) == 320);
    assert!(offset_of!(RingHeader, classes) == 384);
    assert!(size_of::<SlotClassWord>() == 16);
    assert!(size_of::<SlotHeader>() == SLOT_HEADER_BYTES);
    assert!(offset_of!(SlotHeader, ctl) == 0);
    assert!(offset_of!(SlotHeader, job_id) == 16);
    assert!(offset_of!(SlotHeader, partition) == 32);
    assert!(offset_of!(SlotHeader, attempt) == 36);
    assert!(offset_of!(SlotHeader, kind) == 40);
    assert!(offset_of!(SlotHeader, offsets) == 64);
    assert!(offset_of!(SlotHeader, capacities) == 128);
    assert!(offset_of!(SlotHeader, lengths) == 192);
    assert!(offset_of!(SlotHeader, density_bits) == 216);
    assert!(offset_of!(SlotHeader, popcounts) == 240);
    assert!(offset_of!(SlotHeader, witness_offsets) == 264);
    assert!(offset_of!(SlotHeader, witness_capacities) == 288);
    assert!(offset_of!(SlotHeader, witness_lengths) == 312);
    assert!(offset_of!(SlotHeader, witness_ones) == 336);
    assert!(offset_of!(SlotHeader, result_status) == 512);
    assert!(offset_of!(SlotHeader, result_len) == 516);
    assert!(offset_of!(SlotHeader, result) == RESULT_OFFSET);
    assert!(PROOF_BYTES <= RESULT_CAPACITY);
    assert!(RING_HEADER_BYTES as u64 % SLOT_ALIGN == 0);
    assert!(SLOT_HEADER_BYTES as u64 % SLOT_ALIGN == 0);
    assert!(SLOT_ALIGN % ARRAY_ALIGN == 0);
};

/// Rounds `v` up to a multiple of the power of two `align`; `None` on overflow.
pub(crate) const fn round_up(v: u64, align: u64) -> Option<u64> {
    match v.checked_add(align - 1) {
        Some(x) => Some(x & !(align - 1)),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_up_is_exact_and_checked() {
        assert_eq!(round_up(0, 64), Some(0));
        assert_eq!(round_up(1, 64), Some(64));
        assert_eq!(round_up(64, 64), Some(64));
        assert_eq!(round_up(4097, 4096), Some(8192));
        assert_eq!(round_up(u64::MAX, 64), None);
    }

    #[test]
    fn magic_spells_the_format() {
        assert_eq!(&MAGIC.to_le_bytes(), b"SPRVRING");
        assert_eq!(RESULT_CAPACITY, 4096);
    }
}
