//! What a slot carries: meta, capacities, lengths, results, and the validator that checks a slot
//! header before any of its offsets is used.
//!
//! The validator works on a copy of the header fields ([`RawSlotLayout`]), taken once; nothing is
//! re-read from shared memory after it passed, so a process that scribbles on a header while it
//! is being checked cannot make the consumer use an unchecked value.

use std::ops::Range;

use crate::error::{ErrorKind, FieldProblem, Result, SlotField};
use crate::layout::{round_up, slot_offsets, ARRAY_ALIGN, RESULT_CAPACITY};

/// Size of one field element (blstrs `Scalar`) in bytes.
pub const SCALAR_BYTES: u64 = 32;
/// Size of one density bitmap word in bytes.
pub const WORD_BYTES: u64 = 8;

/// Who a slot's contents belong to. Written by the producer in `begin`; opaque to this crate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SlotMeta {
    /// The job this circuit belongs to.
    pub job_id: u64,
    /// Which circuit shape / SRS the slot needs (chosen by the launcher).
    pub circuit_id: u64,
    /// Partition index within the job.
    pub partition: u32,
    /// Failed tries of this slot: 0 when published; `Ring::reclaim_owner` adds one each time the
    /// consumer holding it died. A gpu-proc proves a slot whose `attempt` is not 0 alone, so a
    /// slot that kills its prover cannot take the other slots of a batch down with it again.
    pub attempt: u32,
}

/// The three density bitmaps of a slot (bellperson's `DensityTracker`s: `u64` words, least
/// significant bit first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Density {
    /// A over aux: one bit per aux variable.
    AAux,
    /// B over inputs: one bit per input.
    BInput,
    /// B over aux: one bit per aux variable.
    BAux,
}

impl Density {
    /// All three, in layout order.
    pub const ALL: [Density; 3] = [Density::AAux, Density::BInput, Density::BAux];

    pub(crate) fn index(self) -> usize {
        match self {
            Density::AAux => 0,
            Density::BInput => 1,
            Density::BAux => 2,
        }
    }

    /// The header field of this bitmap.
    pub fn field(self) -> SlotField {
        SlotField::ARRAYS[5 + self.index()]
    }
}

/// Capacities reserved by `begin`: upper bounds of the final lengths.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlotCapacity {
    /// Rows of a, b and c (constraints + inputs).
    pub n: usize,
    /// Input assignment length (the first input is ONE).
    pub inputs: usize,
    /// Aux assignment length.
    pub aux: usize,
}

impl SlotCapacity {
    /// Element capacities of the eight arrays in layout order (bitmaps in words).
    pub(crate) fn capacities(&self) -> [u64; 8] {
        let (n, i, x) = (self.n as u64, self.inputs as u64, self.aux as u64);
        [
            n,
            n,
            n,
            i,
            x,
            x.div_ceil(64),
            i.div_ceil(64),
            x.div_ceil(64),
        ]
    }

    /// Offsets of the eight arrays packed in layout order, each aligned to [`ARRAY_ALIGN`], and
    /// the total bytes; `None` on overflow.
    pub(crate) fn plan(&self) -> Option<([u64; 8], [u64; 8], u64)> {
        let caps = self.capacities();
        let mut offsets = [0u64; 8];
        let mut at = 0u64;
        for (k, &cap) in caps.iter().enumerate() {
            offsets[k] = at;
            let bytes = cap.checked_mul(if k < 5 { SCALAR_BYTES } else { WORD_BYTES })?;
            at = round_up(at.checked_add(bytes)?, ARRAY_ALIGN)?;
        }
        Some((offsets, caps, at))
    }

    /// Bytes of slot data these capacities need: size `RingConfig::slot_bytes` with it.
    /// `None` if the sizes overflow.
    pub fn slot_bytes(&self) -> Option<u64> {
        self.plan().map(|(_, _, total)| total)
    }
}

/// The final lengths, given to `publish`. Bit lengths of the bitmaps follow from them (A-aux and
/// B-aux have `aux` bits, B-input has `inputs` bits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlotLengths {
    /// Rows of a, b and c.
    pub n: usize,
    /// Input assignment length.
    pub inputs: usize,
    /// Aux assignment length.
    pub aux: usize,
    /// Set bits of the A-aux bitmap.
    pub a_aux_popcount: u64,
    /// Set bits of the B-input bitmap.
    pub b_input_popcount: u64,
    /// Set bits of the B-aux bitmap.
    pub b_aux_popcount: u64,
}

/// What a slot carries, recorded in its header by `begin` / `begin_witness`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SlotKind {
    /// a, b, c, the input and aux assignments and the three density bitmaps: what every backend
    /// proves from.
    #[default]
    Full,
    /// The witness alone: the inputs, the bit variables' values packed one bit each, the other
    /// aux values; the prover computes a, b, c and the densities from the circuit's
    /// pre-compiled matrices (which aux variables are bits is a property of those matrices).
    Witness,
}

impl SlotKind {
    /// The header word of this kind.
    pub(crate) fn word(self) -> u32 {
        match self {
            SlotKind::Full => 0,
            SlotKind::Witness => 1,
        }
    }

    fn from_word(word: u32) -> Option<SlotKind> {
        match word {
            0 => Some(SlotKind::Full),
            1 => Some(SlotKind::Witness),
            _ => None,
        }
    }
}

/// Capacities of a witness slot, reserved by `begin_witness`: upper bounds of the final
/// lengths.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WitnessCapacity {
    /// Input assignment length (the first input is ONE).
    pub inputs: usize,
    /// Aux variables that are bits: one bit each.
    pub bits: usize,
    /// The other aux variables: one scalar each.
    pub non_bits: usize,
}

impl WitnessCapacity {
    /// Element capacities of the three arrays in layout order (the bit values in words).
    pub(crate) fn capacities(&self) -> [u64; 3] {
        [
            self.inputs as u64,
            (self.bits as u64).div_ceil(64),
            self.non_bits as u64,
        ]
    }

    /// Offsets of the three arrays packed in layout order, each aligned to [`ARRAY_ALIGN`], and
    /// the total bytes; `None` on overflow.
    pub(crate) fn plan(&self) -> Option<([u64; 3], [u64; 3], u64)> {
        let caps = self.capacities();
        let mut offsets = [0u64; 3];
        let mut at = 0u64;
        for (k, &cap) in caps.iter().enumerate() {
            offsets[k] = at;
            let bytes = cap.checked_mul(WITNESS_SIZES[k])?;
            at = round_up(at.checked_add(bytes)?, ARRAY_ALIGN)?;
        }
        Some((offsets, caps, at))
    }

    /// Bytes of slot data these capacities need: size `RingConfig::slot_bytes` with it.
    /// `None` if the sizes overflow.
    pub fn slot_bytes(&self) -> Option<u64> {
        self.plan().map(|(_, _, total)| total)
    }
}

/// Bytes per element of the three witness arrays.
const WITNESS_SIZES: [u64; 3] = [SCALAR_BYTES, WORD_BYTES, SCALAR_BYTES];

/// The final lengths of a witness slot, given to `publish_witness`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WitnessLengths {
    /// Input assignment length.
    pub inputs: usize,
    /// Bit variables: bits of the bit values.
    pub bits: usize,
    /// Non-bit aux values.
    pub non_bits: usize,
    /// Bit variables that are 1 (the bit values' popcount, recounted by the validator).
    pub ones: u64,
}

impl WitnessLengths {
    /// Aux variables: bits and non-bits.
    pub fn aux(&self) -> usize {
        self.bits + self.non_bits
    }
}

/// What a consumer reports for a slot; stored in the slot's result area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotResult<'a> {
    /// The proof bytes (192 for a Groth16 proof over BLS12-381).
    Proof(&'a [u8]),
    /// Proving failed; the reason (cut to the result area at a character boundary).
    Failed(&'a str),
}

pub(crate) const RESULT_PROOF: u32 = 1;
pub(crate) const RESULT_FAILED: u32 = 2;

impl SlotResult<'_> {
    /// Status word and bytes to store; errors if a proof does not fit.
    pub(crate) fn encode(&self) -> Result<(u32, &[u8])> {
        match *self {
            SlotResult::Proof(bytes) if bytes.len() > RESULT_CAPACITY => {
                Err(ErrorKind::ResultTooLarge {
                    len: bytes.len(),
                    capacity: RESULT_CAPACITY,
                }
                .into())
            }
            SlotResult::Proof(bytes) => Ok((RESULT_PROOF, bytes)),
            SlotResult::Failed(msg) => {
                let mut end = msg.len().min(RESULT_CAPACITY);
                while !msg.is_char_boundary(end) {
                    end -= 1;
                }
                Ok((RESULT_FAILED, &msg.as_bytes()[..end]))
            }
        }
    }

    /// Decodes a stored result, checking status, length and UTF-8.
    pub(crate) fn decode(
        index: usize,
        status: u32,
        len: u32,
        area: &[u8],
    ) -> Result<SlotResult<'_>> {
        let len = len as usize;
        if len > area.len() {
            return Err(invalid(
                index,
                SlotField::ResultLen,
                FieldProblem::LengthExceedsCapacity {
                    len: len as u64,
                    capacity: area.len() as u64,
                },
            ));
        }
        let bytes = &area[..len];
        match status {
            RESULT_PROOF => Ok(SlotResult::Proof(bytes)),
            RESULT_FAILED => std::str::from_utf8(bytes)
                .map(SlotResult::Failed)
                .map_err(|_| invalid(index, SlotField::Result, FieldProblem::NotUtf8)),
            other => Err(invalid(
                index,
                SlotField::ResultStatus,
                FieldProblem::BadValue(other.into()),
            )),
        }
    }
}

/// The layout fields of a slot header, copied out of the header once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RawSlotLayout {
    /// The kind word (0 full, 1 witness).
    pub(crate) kind: u32,
    pub(crate) offsets: [u64; 8],
    pub(crate) capacities: [u64; 8],
    /// n, inputs, aux.
    pub(crate) lengths: [u64; 3],
    pub(crate) density_bits: [u64; 3],
    pub(crate) popcounts: [u64; 3],
    pub(crate) witness_offsets: [u64; 3],
    pub(crate) witness_capacities: [u64; 3],
    /// Inputs, bits, non-bits.
    pub(crate) witness_lengths: [u64; 3],
    pub(crate) witness_ones: u64,
}

impl RawSlotLayout {
    /// The plan `begin` lays out for `caps`, lengths at the capacities.
    pub(crate) fn full(caps: &SlotCapacity) -> Option<(RawSlotLayout, u64)> {
        let (offsets, capacities, total) = caps.plan()?;
        let (n, i, x) = (caps.n as u64, caps.inputs as u64, caps.aux as u64);
        let raw = RawSlotLayout {
            kind: SlotKind::Full.word(),
            offsets,
            capacities,
            lengths: [n, i, x],
            density_bits: [x, i, x],
            ..RawSlotLayout::default()
        };
        Some((raw, total))
    }

    /// The plan `begin_witness` lays out for `caps`, lengths at the capacities.
    pub(crate) fn witness(caps: &WitnessCapacity) -> Option<(RawSlotLayout, u64)> {
        let (witness_offsets, witness_capacities, total) = caps.plan()?;
        let raw = RawSlotLayout {
            kind: SlotKind::Witness.word(),
            witness_offsets,
            witness_capacities,
            witness_lengths: [caps.inputs as u64, caps.bits as u64, caps.non_bits as u64],
            ..RawSlotLayout::default()
        };
        Some((raw, total))
    }
}

/// A slot layout that passed validation: every range lies inside the slot span, is aligned and
/// overlaps no other, and lengths, bit lengths and popcounts agree. The arrays of the other
/// kind are empty (length and capacity 0, whatever the header said: they are never read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotLayout {
    kind: SlotKind,
    offsets: [u64; 8],
    capacities: [u64; 8],
    lengths: [u64; 3],
    popcounts: [u64; 3],
    witness_offsets: [u64; 3],
    witness_capacities: [u64; 3],
    witness_lengths: [u64; 3],
    witness_ones: u64,
}

impl SlotLayout {
    /// What the slot carries.
    pub fn kind(&self) -> SlotKind {
        self.kind
    }
    /// Rows of a, b and c (0 in a witness slot).
    pub fn n(&self) -> usize {
        self.lengths[0] as usize
    }
    /// Input assignment length of a full slot (0 in a witness slot: see
    /// [`SlotLayout::witness`]).
    pub fn inputs(&self) -> usize {
        self.lengths[1] as usize
    }
    /// Aux assignment length of a full slot (0 in a witness slot).
    pub fn aux(&self) -> usize {
        self.lengths[2] as usize
    }

    /// A witness slot's lengths; `None` for a full slot.
    pub fn witness(&self) -> Option<WitnessLengths> {
        (self.kind == SlotKind::Witness).then(|| {
            let [inputs, bits, non_bits] = self.witness_lengths.map(|v| v as usize);
            WitnessLengths {
                inputs,
                bits,
                non_bits,
                ones: self.witness_ones,
            }
        })
    }

    /// Elements (words for bitmaps) of `field` that hold data; 0 for an array of the other
    /// kind and for a field that is no array.
    pub fn len(&self, field: SlotField) -> usize {
        let v = match field {
            SlotField::A | SlotField::B | SlotField::C => self.lengths[0],
            SlotField::Input => self.lengths[1],
            SlotField::Aux => self.lengths[2],
            SlotField::DensityAAux | SlotField::DensityBAux => self.lengths[2].div_ceil(64),
            SlotField::DensityBInput => self.lengths[1].div_ceil(64),
            SlotField::WitnessInput => self.witness_lengths[0],
            SlotField::BitValues => self.witness_lengths[1].div_ceil(64),
            SlotField::NonBits => self.witness_lengths[2],
            _ => 0,
        };
        v as usize
    }

    /// Bit length of a bitmap.
    pub fn bit_len(&self, which: Density) -> u64 {
        match which {
            Density::BInput => self.lengths[1],
            Density::AAux | Density::BAux => self.lengths[2],
        }
    }

    /// Popcount of a bitmap (recounted by the validator).
    pub fn popcount(&self, which: Density) -> u64 {
        self.popcounts[which.index()]
    }

    /// Byte range of the data of `field` inside the slot span (empty for a field that holds
    /// none).
    pub fn data_range(&self, field: SlotField) -> Range<usize> {
        let start = self.offset(field);
        start..start + self.len(field) * element_bytes(field) as usize
    }

    /// Byte offset of `field` inside the slot span (0 for a field that is no array).
    pub(crate) fn offset(&self, field: SlotField) -> usize {
        match array_slot(field) {
            Some((false, k)) => self.offsets[k] as usize,
            Some((true, k)) => self.witness_offsets[k] as usize,
            None => 0,
        }
    }

    /// Capacity of `field` (elements or words).
    pub(crate) fn capacity(&self, field: SlotField) -> usize {
        match array_slot(field) {
            Some((false, k)) => self.capacities[k] as usize,
            Some((true, k)) => self.witness_capacities[k] as usize,
            None => 0,
        }
    }
}

/// Where `field` is among the arrays: (a witness array?, its index); `None` for a field that is
/// no array.
fn array_slot(field: SlotField) -> Option<(bool, usize)> {
    if let Some(k) = SlotField::ARRAYS.iter().position(|&f| f == field) {
        return Some((false, k));
    }
    SlotField::WITNESS_ARRAYS
        .iter()
        .position(|&f| f == field)
        .map(|k| (true, k))
}

/// Bytes per element of an array field (8 for bitmaps, 32 for scalars).
fn element_bytes(field: SlotField) -> u64 {
    match field {
        SlotField::DensityAAux
        | SlotField::DensityBInput
        | SlotField::DensityBAux
        | SlotField::BitValues => WORD_BYTES,
        _ => SCALAR_BYTES,
    }
}

fn invalid(index: usize, field: SlotField, problem: FieldProblem) -> crate::Error {
    ErrorKind::InvalidSlot {
        index,
        field,
        problem,
    }
    .into()
}

/// Checks that each of `fields` (at `offsets`, `caps` elements of `sizes` bytes) is aligned,
/// lies inside a span of `slot_bytes` and overlaps no other.
fn check_spans(
    fields: &[SlotField],
    offsets: &[u64],
    caps: &[u64],
    slot_bytes: u64,
    index: usize,
) -> Result<()> {
    let mut spans: Vec<(u64, u64, SlotField)> = Vec::with_capacity(fields.len());
    for (k, &field) in fields.iter().enumerate() {
        let (offset, cap) = (offsets[k], caps[k]);
        if offset % ARRAY_ALIGN != 0 {
            return Err(invalid(
                index,
                field,
                FieldProblem::Misaligned {
                    offset,
                    align: ARRAY_ALIGN,
                },
            ));
        }
        let bytes = cap.checked_mul(element_bytes(field));
        let end = bytes.and_then(|b| offset.checked_add(b));
        match end {
            Some(end) if end <= slot_bytes => {
                if end > offset {
                    spans.push((offset, end, field));
                }
            }
            _ => {
                return Err(invalid(
                    index,
                    field,
                    FieldProblem::OutOfBounds {
                        offset,
                        bytes,
                        limit: slot_bytes,
                    },
                ))
            }
        }
    }
    spans.sort_unstable_by_key(|&(start, end, _)| (start, end));
    for pair in spans.windows(2) {
        if pair[1].0 < pair[0].1 {
            return Err(invalid(index, pair[1].2, FieldProblem::Overlaps(pair[0].2)));
        }
    }
    Ok(())
}

/// Checks the geometry of `raw` against a slot span of `slot_bytes`; touches no memory. Only
/// the fields of the slot's kind are read: the other kind's arrays come out empty.
pub(crate) fn check_geometry(
    raw: &RawSlotLayout,
    slot_bytes: u64,
    index: usize,
) -> Result<SlotLayout> {
    match SlotKind::from_word(raw.kind) {
        Some(SlotKind::Full) => check_full_geometry(raw, slot_bytes, index),
        Some(SlotKind::Witness) => check_witness_geometry(raw, slot_bytes, index),
        None => Err(invalid(
            index,
            SlotField::Kind,
            FieldProblem::BadValue(raw.kind.into()),
        )),
    }
}

fn check_full_geometry(raw: &RawSlotLayout, slot_bytes: u64, index: usize) -> Result<SlotLayout> {
    check_spans(
        &SlotField::ARRAYS,
        &raw.offsets,
        &raw.capacities,
        slot_bytes,
        index,
    )?;
    let [n, inputs, aux] = raw.lengths;
    let caps = &raw.capacities;
    for (k, len) in [n, n, n, inputs, aux].into_iter().enumerate() {
        if len > caps[k] {
            return Err(invalid(
                index,
                SlotField::ARRAYS[k],
                FieldProblem::LengthExceedsCapacity {
                    len,
                    capacity: caps[k],
                },
            ));
        }
    }
    if inputs > n {
        return Err(invalid(
            index,
            SlotField::Input,
            FieldProblem::InputsExceedN { inputs, n },
        ));
    }
    for which in Density::ALL {
        let d = which.index();
        let expected = if which == Density::BInput {
            inputs
        } else {
            aux
        };
        let field = which.field();
        let bits = raw.density_bits[d];
        if bits != expected {
            return Err(invalid(
                index,
                field,
                FieldProblem::BitLength { bits, expected },
            ));
        }
        let needed = bits.div_ceil(64);
        if caps[5 + d] < needed {
            return Err(invalid(
                index,
                field,
                FieldProblem::WordCapacity {
                    words: caps[5 + d],
                    needed,
                },
            ));
        }
        if raw.popcounts[d] > bits {
            return Err(invalid(
                index,
                field,
                FieldProblem::Popcount {
                    recorded: raw.popcounts[d],
                    actual: bits,
                },
            ));
        }
    }
    Ok(SlotLayout {
        kind: SlotKind::Full,
        offsets: raw.offsets,
        capacities: raw.capacities,
        lengths: raw.lengths,
        popcounts: raw.popcounts,
        witness_offsets: [0; 3],
        witness_capacities: [0; 3],
        witness_lengths: [0; 3],
        witness_ones: 0,
    })
}

fn check_witness_geometry(
    raw: &RawSlotLayout,
    slot_bytes: u64,
    index: usize,
) -> Result<SlotLayout> {
    let caps = &raw.witness_capacities;
    check_spans(
        &SlotField::WITNESS_ARRAYS,
        &raw.witness_offsets,
        caps,
        slot_bytes,
        index,
    )?;
    let [inputs, bits, non_bits] = raw.witness_lengths;
    for (len, k) in [(inputs, 0), (non_bits, 2)] {
        if len > caps[k] {
            return Err(invalid(
                index,
                SlotField::WITNESS_ARRAYS[k],
                FieldProblem::LengthExceedsCapacity {
                    len,
                    capacity: caps[k],
                },
            ));
        }
    }
    let needed = bits.div_ceil(64);
    if caps[1] < needed {
        return Err(invalid(
            index,
            SlotField::BitValues,
            FieldProblem::WordCapacity {
                words: caps[1],
                needed,
            },
        ));
    }
    if raw.witness_ones > bits {
        return Err(invalid(
            index,
            SlotField::BitValues,
            FieldProblem::Popcount {
                recorded: raw.witness_ones,
                actual: bits,
            },
        ));
    }
    Ok(SlotLayout {
        kind: SlotKind::Witness,
        offsets: [0; 8],
        capacities: [0; 8],
        lengths: [0; 3],
        popcounts: [0; 3],
        witness_offsets: raw.witness_offsets,
        witness_capacities: raw.witness_capacities,
        witness_lengths: raw.witness_lengths,
        witness_ones: raw.witness_ones,
    })
}

/// Checks one bitmap's data words: no bit set past `bits`, popcount `recorded`.
fn check_bitmap(
    index: usize,
    field: SlotField,
    bits: u64,
    recorded: u64,
    words: &[u64],
) -> Result<()> {
    let tail = bits % 64;
    if tail != 0 {
        if let Some(last) = words.last() {
            if last >> tail != 0 {
                return Err(invalid(index, field, FieldProblem::TrailingBits));
            }
        }
    }
    let actual: u64 = words.iter().map(|x| u64::from(x.count_ones())).sum();
    if actual != recorded {
        return Err(invalid(
            index,
            field,
            FieldProblem::Popcount { recorded, actual },
        ));
    }
    Ok(())
}

/// Recounts a witness slot's bit values (`words`: exactly their data words, as located by
/// `layout`); nothing to check in a full slot.
pub(crate) fn check_bit_values(layout: &SlotLayout, index: usize, words: &[u64]) -> Result<()> {
    match layout.witness() {
        Some(w) => check_bitmap(index, SlotField::BitValues, w.bits as u64, w.ones, words),
        None => Ok(()),
    }
}

/// Recounts every density bitmap: popcount equal to the recorded one, no bit set past the bit
/// length. `words(which)` returns exactly the data words of that bitmap (as located by
/// `layout`; empty in a witness slot).
pub(crate) fn check_densities<'a>(
    layout: &SlotLayout,
    index: usize,
    mut words: impl FnMut(Density) -> &'a [u64],
) -> Result<()> {
    for which in Density::ALL {
        check_bitmap(
            index,
            which.field(),
            layout.bit_len(which),
            layout.popcount(which),
            words(which),
        )?;
    }
    Ok(())
}

/// Decodes and validates a detached slot header image against the slot's data span.
///
/// `header` is the byte image of a slot header as it lies in the mapping (native byte order, at
/// least the 4096 control bytes); `span` is the slot's data span as words. This is the decoder the
/// ring runs on every `view`, exposed for fuzzing and for tools that inspect a dumped ring. It
/// never panics and never reads outside `header` or `span`: every problem is an
/// [`ErrorKind::InvalidSlot`] naming the field.
pub fn check_slot_image(header: &[u8], span: &[u64]) -> Result<(SlotMeta, SlotLayout)> {
    let need = slot_offsets::CONTROL_BYTES;
    if header.len() < need {
        return Err(invalid(
            usize::MAX,
            SlotField::Header,
            FieldProblem::Truncated {
                len: header.len(),
                need,
            },
        ));
    }
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&header[at..at + 8]);
        u64::from_ne_bytes(b)
    };
    let u32_at = |at: usize| {
        let mut b = [0u8; 4];
        b.copy_from_slice(&header[at..at + 4]);
        u32::from_ne_bytes(b)
    };
    let arr = |at: usize, out: &mut [u64]| {
        for (k, v) in out.iter_mut().enumerate() {
            *v = u64_at(at + 8 * k);
        }
    };
    let meta = SlotMeta {
        job_id: u64_at(slot_offsets::JOB_ID),
        circuit_id: u64_at(slot_offsets::CIRCUIT_ID),
        partition: u32_at(slot_offsets::PARTITION),
        attempt: u32_at(slot_offsets::ATTEMPT),
    };
    let mut raw = RawSlotLayout {
        kind: u32_at(slot_offsets::KIND),
        witness_ones: u64_at(slot_offsets::WITNESS_ONES),
        ..RawSlotLayout::default()
    };
    arr(slot_offsets::OFFSETS, &mut raw.offsets);
    arr(slot_offsets::CAPACITIES, &mut raw.capacities);
    arr(slot_offsets::LENGTHS, &mut raw.lengths);
    arr(slot_offsets::DENSITY_BITS, &mut raw.density_bits);
    arr(slot_offsets::POPCOUNTS, &mut raw.popcounts);
    arr(slot_offsets::WITNESS_OFFSETS, &mut raw.witness_offsets);
    arr(
        slot_offsets::WITNESS_CAPACITIES,
        &mut raw.witness_capacities,
    );
    arr(slot_offsets::WITNESS_LENGTHS, &mut raw.witness_lengths);
    let span_bytes = (span.len() as u64).saturating_mul(WORD_BYTES);
    let layout = check_geometry(&raw, span_bytes, usize::MAX)?;
    // The geometry check placed every bitmap inside the span at an 8-aligned offset.
    let words = |field: SlotField| {
        let start = layout.offset(field) / WORD_BYTES as usize;
        &span[start..start + layout.len(field)]
    };
    check_densities(&layout, usize::MAX, |which| words(which.field()))?;
    check_bit_values(&layout, usize::MAX, words(SlotField::BitValues))?;
    Ok((meta, layout))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn good(caps: SlotCapacity) -> (RawSlotLayout, u64) {
        RawSlotLayout::full(&caps).unwrap()
    }

    fn good_witness(caps: WitnessCapacity) -> (RawSlotLayout, u64) {
        RawSlotLayout::witness(&caps).unwrap()
    }

    /// The header image of `raw` (every layout field at its offset, the rest zero).
    fn image_of(raw: &RawSlotLayout) -> Vec<u8> {
        let mut img = vec![0u8; 8192];
        let put = |img: &mut Vec<u8>, at: usize, v: &[u64]| {
            for (k, x) in v.iter().enumerate() {
                img[at + 8 * k..at + 8 * k + 8].copy_from_slice(&x.to_ne_bytes());
            }
        };
        img[slot_offsets::KIND..slot_offsets::KIND + 4].copy_from_slice(&raw.kind.to_ne_bytes());
        put(&mut img, slot_offsets::OFFSETS, &raw.offsets);
        put(&mut img, slot_offsets::CAPACITIES, &raw.capacities);
        put(&mut img, slot_offsets::LENGTHS, &raw.lengths);
        put(&mut img, slot_offsets::DENSITY_BITS, &raw.density_bits);
        put(&mut img, slot_offsets::POPCOUNTS, &raw.popcounts);
        put(
            &mut img,
            slot_offsets::WITNESS_OFFSETS,
            &raw.witness_offsets,
        );
        put(
            &mut img,
            slot_offsets::WITNESS_CAPACITIES,
            &raw.witness_capacities,
        );
        put(
            &mut img,
            slot_offsets::WITNESS_LENGTHS,
            &raw.witness_lengths,
        );
        put(&mut img, slot_offsets::WITNESS_ONES, &[raw.witness_ones]);
        img
    }

    fn kind(e: crate::Error) -> (SlotField, FieldProblem) {
        match e.into_kind() {
            ErrorKind::InvalidSlot { field, problem, .. } => (field, problem),
            other => panic!("unexpected error kind {other:?}"),
        }
    }

    #[test]
    fn planned_layout_validates() {
        let caps = SlotCapacity {
            n: 100,
            inputs: 3,
            aux: 70,
        };
        let (raw, total) = good(caps);
        assert_eq!(total % ARRAY_ALIGN, 0);
        assert_eq!(raw.offsets[1], 3200, "b follows a");
        let l = check_geometry(&raw, total, 0).unwrap();
        assert_eq!((l.n(), l.inputs(), l.aux()), (100, 3, 70));
        assert_eq!(l.len(SlotField::DensityAAux), 2);
        assert_eq!(l.data_range(SlotField::C), 6400..9600);
        let end = raw.offsets[7] + raw.capacities[7] * WORD_BYTES;
        assert!(check_geometry(&raw, end, 0).is_ok());
        assert_eq!(
            check_geometry(&raw, end - 1, 0)
                .map_err(kind)
                .unwrap_err()
                .0,
            SlotField::DensityBAux
        );
    }

    #[test]
    fn each_rule_names_its_field() {
        let caps = SlotCapacity {
            n: 64,
            inputs: 2,
            aux: 130,
        };
        let (raw, total) = good(caps);
        let check = |f: &dyn Fn(&mut RawSlotLayout)| {
            let mut r = raw;
            f(&mut r);
            kind(check_geometry(&r, total, 3).unwrap_err())
        };
        assert_eq!(
            check(&|r| r.offsets[2] += 8).1,
            FieldProblem::Misaligned {
                offset: raw.offsets[2] + 8,
                align: 64
            }
        );
        assert_eq!(
            check(&|r| r.offsets[1] = raw.offsets[0]),
            (SlotField::B, FieldProblem::Overlaps(SlotField::A))
        );
        assert_eq!(check(&|r| r.capacities[4] = u64::MAX).0, SlotField::Aux);
        assert_eq!(check(&|r| r.lengths[0] = 65).0, SlotField::A);
        assert_eq!(check(&|r| r.lengths[1] = 3).0, SlotField::Input);
        assert_eq!(
            check(&|r| {
                r.lengths = [1, 2, 130];
            })
            .1,
            FieldProblem::InputsExceedN { inputs: 2, n: 1 }
        );
        assert_eq!(
            check(&|r| r.density_bits[1] = 1),
            (
                SlotField::DensityBInput,
                FieldProblem::BitLength {
                    bits: 1,
                    expected: 2
                }
            )
        );
        assert_eq!(
            check(&|r| r.capacities[7] = 2),
            (
                SlotField::DensityBAux,
                FieldProblem::WordCapacity {
                    words: 2,
                    needed: 3
                }
            )
        );
        assert_eq!(check(&|r| r.popcounts[0] = 131).0, SlotField::DensityAAux);
    }

    #[test]
    fn a_witness_plan_validates_and_each_rule_names_its_field() {
        let caps = WitnessCapacity {
            inputs: 3,
            bits: 130,
            non_bits: 70,
        };
        let (raw, total) = good_witness(caps);
        assert_eq!(
            raw.witness_offsets,
            [0, 128, 192],
            "input, bit values, non-bits"
        );
        assert_eq!(total, 192 + 70 * 32);
        assert_eq!(caps.slot_bytes(), Some(total));
        let l = check_geometry(&raw, total, 0).unwrap();
        assert_eq!(l.kind(), SlotKind::Witness);
        assert_eq!((l.n(), l.inputs(), l.aux()), (0, 0, 0), "no full arrays");
        assert_eq!(l.witness().unwrap().aux(), 200);
        assert_eq!(l.data_range(SlotField::BitValues), 128..152);
        assert_eq!(l.data_range(SlotField::NonBits), 192..192 + 70 * 32);
        assert!(l.data_range(SlotField::A).is_empty());
        let check = |f: &dyn Fn(&mut RawSlotLayout)| {
            let mut r = raw;
            f(&mut r);
            kind(check_geometry(&r, total, 3).unwrap_err())
        };
        assert_eq!(
            check(&|r| r.kind = 2),
            (SlotField::Kind, FieldProblem::BadValue(2))
        );
        assert_eq!(
            check(&|r| r.witness_offsets[1] += 8),
            (
                SlotField::BitValues,
                FieldProblem::Misaligned {
                    offset: 136,
                    align: 64
                }
            )
        );
        assert_eq!(
            check(&|r| r.witness_offsets[2] = 128),
            (
                SlotField::NonBits,
                FieldProblem::Overlaps(SlotField::BitValues)
            )
        );
        assert_eq!(
            check(&|r| r.witness_capacities[2] = 71).0,
            SlotField::NonBits,
            "past the span"
        );
        assert_eq!(
            check(&|r| r.witness_capacities[0] = u64::MAX).0,
            SlotField::WitnessInput
        );
        assert_eq!(
            check(&|r| r.witness_lengths[0] = 4),
            (
                SlotField::WitnessInput,
                FieldProblem::LengthExceedsCapacity {
                    len: 4,
                    capacity: 3
                }
            )
        );
        assert_eq!(
            check(&|r| r.witness_lengths[1] = 193),
            (
                SlotField::BitValues,
                FieldProblem::WordCapacity {
                    words: 3,
                    needed: 4
                }
            )
        );
        assert_eq!(check(&|r| r.witness_lengths[2] = 71).0, SlotField::NonBits);
        assert_eq!(
            check(&|r| r.witness_ones = 131),
            (
                SlotField::BitValues,
                FieldProblem::Popcount {
                    recorded: 131,
                    actual: 130
                }
            )
        );
        // The full fields of a witness slot are never read: garbage there changes nothing.
        let mut r = raw;
        r.offsets[0] = 1;
        r.lengths = [u64::MAX; 3];
        assert_eq!(check_geometry(&r, total, 0).unwrap(), l);
        // And a full slot's witness fields likewise.
        let (mut full, total) = good(SlotCapacity {
            n: 4,
            inputs: 1,
            aux: 2,
        });
        let fl = check_geometry(&full, total, 0).unwrap();
        full.witness_offsets[0] = 3;
        full.witness_lengths[1] = u64::MAX;
        assert_eq!(check_geometry(&full, total, 0).unwrap(), fl);
        assert_eq!(fl.witness(), None);
    }

    #[test]
    fn bit_values_are_recounted() {
        let (mut raw, total) = good_witness(WitnessCapacity {
            inputs: 1,
            bits: 70,
            non_bits: 1,
        });
        raw.witness_ones = 3;
        let l = check_geometry(&raw, total, 0).unwrap();
        check_bit_values(&l, 0, &[0b101, 0b1]).unwrap();
        assert_eq!(
            kind(check_bit_values(&l, 0, &[0b101, 0b1000001]).unwrap_err()),
            (SlotField::BitValues, FieldProblem::TrailingBits)
        );
        assert_eq!(
            kind(check_bit_values(&l, 0, &[0b111, 0b1]).unwrap_err()),
            (
                SlotField::BitValues,
                FieldProblem::Popcount {
                    recorded: 3,
                    actual: 4
                }
            )
        );
        // Nothing to recount in a full slot.
        let (full, total) = good(SlotCapacity {
            n: 1,
            inputs: 1,
            aux: 1,
        });
        check_bit_values(&check_geometry(&full, total, 0).unwrap(), 0, &[7]).unwrap();
    }

    #[test]
    fn densities_are_recounted() {
        let caps = SlotCapacity {
            n: 8,
            inputs: 3,
            aux: 65,
        };
        let (mut raw, _) = good(caps);
        raw.popcounts = [2, 1, 0];
        let l = check_geometry(&raw, 1 << 20, 0).unwrap();
        let a = [0b11u64, 0];
        let bi = [0b100u64];
        let ok = |w: Density| -> &[u64] {
            match w {
                Density::AAux => &a,
                Density::BInput => &bi,
                Density::BAux => &[0, 0],
            }
        };
        check_densities(&l, 0, ok).unwrap();
        let bad_tail = [0b11u64, 0b10];
        let e = check_densities(
            &l,
            0,
            |w| if w == Density::AAux { &bad_tail } else { ok(w) },
        );
        assert_eq!(
            kind(e.unwrap_err()),
            (SlotField::DensityAAux, FieldProblem::TrailingBits)
        );
        let e = check_densities(&l, 0, |w| {
            if w == Density::BInput {
                &[0b1100]
            } else {
                ok(w)
            }
        });
        assert_eq!(
            kind(e.unwrap_err()),
            (SlotField::DensityBInput, FieldProblem::TrailingBits)
        );
        let e = check_densities(&l, 0, |w| if w == Density::BAux { &[1, 0] } else { ok(w) });
        assert_eq!(
            kind(e.unwrap_err()).1,
            FieldProblem::Popcount {
                recorded: 0,
                actual: 1
            }
        );
    }

    #[test]
    fn results_round_trip_and_reject_garbage() {
        let (s, b) = SlotResult::Proof(&[7; 192]).encode().unwrap();
        assert_eq!(
            SlotResult::decode(0, s, 192, b).unwrap(),
            SlotResult::Proof(&[7; 192])
        );
        assert!(SlotResult::Proof(&[0; RESULT_CAPACITY + 1])
            .encode()
            .is_err());
        let long = "é".repeat(RESULT_CAPACITY);
        let failed = SlotResult::Failed(&long);
        let (s, b) = failed.encode().unwrap();
        assert!(b.len() <= RESULT_CAPACITY);
        assert!(matches!(
            SlotResult::decode(0, s, b.len() as u32, b).unwrap(),
            SlotResult::Failed(_)
        ));
        assert_eq!(
            kind(SlotResult::decode(1, 9, 0, &[]).unwrap_err()).0,
            SlotField::ResultStatus
        );
        assert_eq!(
            kind(SlotResult::decode(1, 2, 2, &[0xff, 0xfe]).unwrap_err()).1,
            FieldProblem::NotUtf8
        );
        assert_eq!(
            kind(SlotResult::decode(1, 1, 5, &[0; 4]).unwrap_err()).0,
            SlotField::ResultLen
        );
    }

    #[test]
    fn image_shorter_than_header_is_an_error() {
        let e = check_slot_image(&[0; 100], &[]).unwrap_err();
        assert!(matches!(
            e.kind(),
            ErrorKind::InvalidSlot {
                field: SlotField::Header,
                ..
            }
        ));
        // an all-zero header describes an empty slot, which is valid
        let (meta, layout) = check_slot_image(&[0; 8192], &[]).unwrap();
        assert_eq!((meta, layout.n()), (SlotMeta::default(), 0));
    }

    /// Values that exercise the edges: small, aligned, near the span, huge.
    fn field_value() -> impl Strategy<Value = u64> {
        prop_oneof![
            0u64..200,
            (0u64..64).prop_map(|k| k * 64),
            Just(u64::MAX),
            Just(u64::MAX / 32 + 1),
            any::<u64>(),
        ]
    }

    /// A kind word: mostly the two defined ones (so the rest of the header is exercised), some
    /// garbage.
    fn kind_word() -> impl Strategy<Value = u32> {
        prop_oneof![4 => Just(0u32), 4 => Just(1u32), 1 => any::<u32>()]
    }

    fn header_image() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::collection::vec(field_value(), 35),
            kind_word(),
            prop::collection::vec(any::<u8>(), 0..64),
            any::<bool>(),
        )
            .prop_map(|(fields, kind, noise, truncate)| {
                let mut img = vec![0u8; 8192];
                // The 25 full-layout words from `OFFSETS`, then the 10 witness words.
                for (k, v) in fields.iter().enumerate() {
                    let at = if k < 25 {
                        slot_offsets::OFFSETS + 8 * k
                    } else {
                        slot_offsets::WITNESS_OFFSETS + 8 * (k - 25)
                    };
                    img[at..at + 8].copy_from_slice(&v.to_ne_bytes());
                }
                img[slot_offsets::KIND..slot_offsets::KIND + 4]
                    .copy_from_slice(&kind.to_ne_bytes());
                let len = img.len();
                for (k, b) in noise.iter().enumerate() {
                    img[(k * 97) % len] ^= b;
                }
                if truncate {
                    img.truncate(fields[0] as usize % 8192);
                }
                img
            })
    }

    /// 2,000 cases, times `SPLITPROVER_FUZZ_SCALE` (default 1) for a longer hunt outside CI.
    fn fuzz_config() -> ProptestConfig {
        let scale = std::env::var("SPLITPROVER_FUZZ_SCALE").map_or(1, |s| s.parse().unwrap_or(1));
        ProptestConfig {
            cases: 2000u32.saturating_mul(scale).max(2000),
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    }

    proptest! {
        #![proptest_config(fuzz_config())]

        /// Fuzzes the decoder/validator with random header bytes: it never panics and never
        /// reads out of bounds, and whatever it accepts really lies inside the span.
        #[test]
        fn random_headers_only_give_typed_errors(img in header_image(), span_words in 0usize..4096, fill in any::<u64>()) {
            let span: Vec<u64> = (0..span_words as u64).map(|k| k.wrapping_mul(fill)).collect();
            match check_slot_image(&img, &span) {
                Ok((_, layout)) => {
                    for f in SlotField::ARRAYS.into_iter().chain(SlotField::WITNESS_ARRAYS) {
                        prop_assert!(layout.data_range(f).end <= span_words * 8);
                    }
                }
                Err(e) => prop_assert!(matches!(e.kind(), ErrorKind::InvalidSlot { .. }), "{e}"),
            }
        }

        /// A valid layout with random bitmaps validates iff the recorded popcounts match.
        #[test]
        fn popcounts_are_checked(n in 1usize..300, inputs in 1usize..40, aux in 0usize..300, seed in any::<u64>(), lie in any::<bool>()) {
            let caps = SlotCapacity { n: n.max(inputs), inputs, aux };
            let (mut raw, total) = good(caps);
            let mut span = vec![0u64; (total / 8) as usize];
            let mut x = seed | 1;
            for which in Density::ALL {
                let k = 5 + which.index();
                let bits = raw.density_bits[which.index()];
                let start = (raw.offsets[k] / 8) as usize;
                let mut count = 0;
                for w in 0..bits.div_ceil(64) as usize {
                    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                    let valid = if (w as u64 + 1) * 64 <= bits { u64::MAX } else { (1u64 << (bits % 64)) - 1 };
                    span[start + w] = x & valid;
                    count += u64::from((x & valid).count_ones());
                }
                raw.popcounts[which.index()] = count;
            }
            if lie && raw.density_bits[2] > 0 {
                raw.popcounts[2] = raw.popcounts[2].wrapping_add(1) % (raw.density_bits[2] + 1);
            }
            let r = check_slot_image(&image_of(&raw), &span);
            prop_assert_eq!(r.is_ok(), !(lie && raw.density_bits[2] > 0), "{:?}", r.err());
        }

        /// A valid witness layout with random bit values validates iff the recorded `ones`
        /// matches and no bit is set past `bits`; its arrays lie where the plan put them.
        #[test]
        fn witness_bit_values_are_checked(inputs in 1usize..40, bits in 0usize..400, non_bits in 0usize..300, seed in any::<u64>(), lie in 0u8..3) {
            let caps = WitnessCapacity { inputs, bits, non_bits };
            let (mut raw, total) = good_witness(caps);
            let mut span = vec![0u64; (total / 8) as usize];
            let start = (raw.witness_offsets[1] / 8) as usize;
            let mut x = seed | 1;
            let mut ones = 0;
            for w in 0..bits.div_ceil(64) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                let valid = if (w + 1) * 64 <= bits { u64::MAX } else { (1u64 << (bits % 64)) - 1 };
                span[start + w] = x & valid;
                ones += u64::from((x & valid).count_ones());
            }
            raw.witness_ones = ones;
            let mut bad = false;
            if lie == 1 && bits > 0 {
                raw.witness_ones = (ones + 1) % (bits as u64 + 1);
                bad = true;
            }
            if lie == 2 && bits % 64 != 0 {
                span[start + bits / 64] |= 1 << 63;
                bad = true;
            }
            match check_slot_image(&image_of(&raw), &span) {
                Ok((_, layout)) => {
                    prop_assert!(!bad);
                    prop_assert_eq!(layout.kind(), SlotKind::Witness);
                    prop_assert_eq!(layout.witness(), Some(WitnessLengths { inputs, bits, non_bits, ones }));
                    prop_assert_eq!(layout.len(SlotField::BitValues), bits.div_ceil(64));
                    for f in SlotField::ARRAYS {
                        prop_assert!(layout.data_range(f).is_empty());
                    }
                    for f in SlotField::WITNESS_ARRAYS {
                        prop_assert!(layout.data_range(f).end as u64 <= total);
                    }
                }
                Err(e) => {
                    prop_assert!(bad, "{}", e);
                    prop_assert!(matches!(e.kind(), ErrorKind::InvalidSlot { field: SlotField::BitValues, .. }), "{}", e);
                }
            }
        }
    }
}
