//! The one error type of this crate: an [`Error`] wrapping a `#[non_exhaustive]` [`ErrorKind`].

use std::fmt;
use std::io;

use crate::pages::PageKind;
use crate::state::{SlotState, StateName};

/// An error from a shared-memory operation; inspect it with [`Error::kind`].
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct Error(#[from] Box<ErrorKind>);

impl Error {
    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.0
    }

    /// Unwraps the kind.
    pub fn into_kind(self) -> ErrorKind {
        *self.0
    }

    pub(crate) fn io(op: &'static str, source: impl Into<io::Error>) -> Self {
        ErrorKind::Io {
            op,
            source: source.into(),
        }
        .into()
    }

    /// `true` when this error says a handle no longer owns its slot.
    pub fn is_stale(&self) -> bool {
        matches!(*self.0, ErrorKind::StaleSlot { .. })
    }

    /// `true` when this error is a timeout of a blocking wait.
    pub fn is_timeout(&self) -> bool {
        matches!(*self.0, ErrorKind::Timeout { .. })
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Error(Box::new(kind))
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The kinds of [`Error`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A system call failed.
    #[error("`{op}` failed: {source}")]
    Io {
        /// The operation, e.g. `memfd_create`.
        op: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The huge-page policy asked for a page kind that could not be provided.
    #[error("{requested} requested but unavailable: {reason}\nhint: reserve huge pages (`/proc/sys/vm/nr_hugepages`) or use the `auto` policy")]
    PagesUnavailable {
        /// The page kind the policy required.
        requested: PageKind,
        /// Why the last attempt failed.
        reason: String,
    },
    /// A size, count or owner given by the caller is not acceptable.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// An inherited file descriptor is not a region this crate can map.
    #[error("invalid region: {0}")]
    InvalidRegion(String),
    /// The region is smaller than the layout needs.
    #[error("region too small: need {need} bytes, have {have}")]
    TooSmall {
        /// Bytes required.
        need: u64,
        /// Bytes available.
        have: u64,
    },
    /// The ring header's layout version is 0: the creator has not finished initialising it.
    #[error("ring not initialised (layout version is 0)")]
    NotInitialised,
    /// The ring header does not start with the expected magic number.
    #[error("bad magic {found:#018x} in ring header, expected {expected:#018x}")]
    BadMagic {
        /// The magic this build expects.
        expected: u64,
        /// The magic found.
        found: u64,
    },
    /// The ring was written by a build with another layout version.
    #[error("ring layout version {found}, this build reads version {expected}")]
    VersionMismatch {
        /// The version this build reads.
        expected: u32,
        /// The version found.
        found: u32,
    },
    /// A ring header field is inconsistent.
    #[error("bad ring header field `{field}`: {reason}")]
    BadHeader {
        /// The header field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A slot index beyond the ring.
    #[error("slot {index} out of range, the ring has {slot_count} slots")]
    SlotOutOfRange {
        /// The index asked for.
        index: usize,
        /// Slots in the ring.
        slot_count: usize,
    },
    /// The handle no longer owns its slot: the slot was reclaimed (its owner was presumed dead)
    /// or moved on; the generation counter differs.
    #[error("stale handle for slot {index}: expected {expected_state} generation {expected_generation}, found {found_state} generation {found_generation}")]
    StaleSlot {
        /// The slot.
        index: usize,
        /// The state the handle expected.
        expected_state: SlotState,
        /// The generation the handle holds.
        expected_generation: u64,
        /// The state found (or `corrupt` for an undecodable word).
        found_state: StateName,
        /// The generation found.
        found_generation: u64,
    },
    /// A blocking wait ran out of time.
    #[error("timed out after {waited:?} waiting for a {what} slot")]
    Timeout {
        /// What was waited for: `free`, `ready`, `done`.
        what: &'static str,
        /// How long.
        waited: std::time::Duration,
    },
    /// No slot class of the ring is big enough for a request: waiting would never end.
    #[error("no slot of this ring fits {need} bytes: its largest slots have {largest}\nhint: size the ring's slot classes for every circuit it serves (`SlotCapacity::slot_bytes`)")]
    NoSlotFits {
        /// Bytes asked for.
        need: u64,
        /// Bytes of the ring's largest slots.
        largest: u64,
    },
    /// The arrays asked for do not fit in one slot.
    #[error("slot too small: the arrays need {need} bytes, a slot has {have}\nhint: size slots with `SlotCapacity::slot_bytes`")]
    SlotTooSmall {
        /// Bytes needed.
        need: u64,
        /// Bytes in a slot.
        have: u64,
    },
    /// `begin` was called twice, or an array was asked for before `begin`.
    #[error("slot {index}: {what}")]
    Protocol {
        /// The slot.
        index: usize,
        /// The misuse.
        what: &'static str,
    },
    /// A slot header field failed validation.
    #[error("slot {index}: field `{field}` {problem}")]
    InvalidSlot {
        /// The slot (or `usize::MAX` for a detached header image).
        index: usize,
        /// The offending field.
        field: SlotField,
        /// What is wrong with it.
        problem: FieldProblem,
    },
    /// A proof result larger than the slot's result area.
    #[error("result of {len} bytes does not fit the {capacity}-byte result area")]
    ResultTooLarge {
        /// Bytes offered.
        len: usize,
        /// Bytes available.
        capacity: usize,
    },
    /// An owner id of 0 or above the largest Linux pid.
    #[error("owner {owner} is not a valid pid (1..={max})")]
    InvalidOwner {
        /// The owner given.
        owner: u32,
        /// The largest owner the state word can hold.
        max: u32,
    },
}

/// A field of the slot header, named in validation errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SlotField {
    /// The `a` evaluations.
    A,
    /// The `b` evaluations.
    B,
    /// The `c` evaluations.
    C,
    /// The input assignment.
    Input,
    /// The aux assignment.
    Aux,
    /// The A-over-aux density bitmap.
    DensityAAux,
    /// The B-over-input density bitmap.
    DensityBInput,
    /// The B-over-aux density bitmap.
    DensityBAux,
    /// The slot kind word (full or witness).
    Kind,
    /// A witness slot's input assignment.
    WitnessInput,
    /// A witness slot's bit values (one bit per bit variable).
    BitValues,
    /// A witness slot's non-bit aux values.
    NonBits,
    /// The result status word.
    ResultStatus,
    /// The result length.
    ResultLen,
    /// The result bytes.
    Result,
    /// The header image as a whole.
    Header,
}

impl SlotField {
    /// The eight arrays of a slot, in layout order.
    pub const ARRAYS: [SlotField; 8] = [
        SlotField::A,
        SlotField::B,
        SlotField::C,
        SlotField::Input,
        SlotField::Aux,
        SlotField::DensityAAux,
        SlotField::DensityBInput,
        SlotField::DensityBAux,
    ];

    /// The three arrays of a witness slot, in layout order.
    pub const WITNESS_ARRAYS: [SlotField; 3] = [
        SlotField::WitnessInput,
        SlotField::BitValues,
        SlotField::NonBits,
    ];

    /// The field's name as the header docs spell it.
    pub fn name(self) -> &'static str {
        match self {
            SlotField::A => "a",
            SlotField::B => "b",
            SlotField::C => "c",
            SlotField::Input => "input",
            SlotField::Aux => "aux",
            SlotField::DensityAAux => "density_a_aux",
            SlotField::DensityBInput => "density_b_input",
            SlotField::DensityBAux => "density_b_aux",
            SlotField::Kind => "kind",
            SlotField::WitnessInput => "witness_input",
            SlotField::BitValues => "bit_values",
            SlotField::NonBits => "non_bits",
            SlotField::ResultStatus => "result_status",
            SlotField::ResultLen => "result_len",
            SlotField::Result => "result",
            SlotField::Header => "header",
        }
    }
}

impl fmt::Display for SlotField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What is wrong with a [`SlotField`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FieldProblem {
    /// The offset is not a multiple of the array alignment.
    Misaligned {
        /// The offset.
        offset: u64,
        /// The required alignment.
        align: u64,
    },
    /// The array's capacity reaches past the slot (or overflows).
    OutOfBounds {
        /// The offset.
        offset: u64,
        /// Bytes the capacity covers.
        bytes: Option<u64>,
        /// The slot size.
        limit: u64,
    },
    /// The array's capacity overlaps another array.
    Overlaps(SlotField),
    /// A length larger than the capacity reserved for it.
    LengthExceedsCapacity {
        /// The length.
        len: u64,
        /// The capacity.
        capacity: u64,
    },
    /// A bitmap bit length different from the length of the array it describes.
    BitLength {
        /// The bit length recorded.
        bits: u64,
        /// The bit length required.
        expected: u64,
    },
    /// A bitmap whose word capacity cannot hold its bits.
    WordCapacity {
        /// Words reserved.
        words: u64,
        /// Words needed.
        needed: u64,
    },
    /// The recorded popcount differs from the bitmap's.
    Popcount {
        /// The popcount recorded.
        recorded: u64,
        /// The popcount counted.
        actual: u64,
    },
    /// Bits set past the bit length in the last word.
    TrailingBits,
    /// More inputs than constraint rows: `n` must be at least `inputs`.
    InputsExceedN {
        /// The inputs.
        inputs: u64,
        /// The rows.
        n: u64,
    },
    /// An undefined value.
    BadValue(u64),
    /// A failure message that is not UTF-8.
    NotUtf8,
    /// A header image shorter than the header.
    Truncated {
        /// Bytes given.
        len: usize,
        /// Bytes needed.
        need: usize,
    },
}

impl fmt::Display for FieldProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldProblem::Misaligned { offset, align } => {
                write!(f, "offset {offset} is not a multiple of {align}")
            }
            FieldProblem::OutOfBounds {
                offset,
                bytes: Some(bytes),
                limit,
            } => {
                write!(
                    f,
                    "spans {offset}..{} past the {limit}-byte slot",
                    offset.saturating_add(*bytes)
                )
            }
            FieldProblem::OutOfBounds {
                offset,
                bytes: None,
                limit,
            } => {
                write!(
                    f,
                    "at offset {offset} has a capacity that overflows (slot is {limit} bytes)"
                )
            }
            FieldProblem::Overlaps(other) => write!(f, "overlaps `{other}`"),
            FieldProblem::LengthExceedsCapacity { len, capacity } => {
                write!(f, "length {len} exceeds capacity {capacity}")
            }
            FieldProblem::BitLength { bits, expected } => {
                write!(f, "has {bits} bits, expected {expected}")
            }
            FieldProblem::WordCapacity { words, needed } => {
                write!(f, "has {words} words, needs {needed}")
            }
            FieldProblem::Popcount { recorded, actual } => {
                write!(f, "popcount recorded as {recorded}, counted {actual}")
            }
            FieldProblem::TrailingBits => f.write_str("has bits set past its bit length"),
            FieldProblem::InputsExceedN { inputs, n } => {
                write!(f, "has {inputs} inputs but only {n} rows")
            }
            FieldProblem::BadValue(v) => write!(f, "has undefined value {v}"),
            FieldProblem::NotUtf8 => f.write_str("is not UTF-8"),
            FieldProblem::Truncated { len, need } => {
                write!(f, "image is {len} bytes, needs {need}")
            }
        }
    }
}
