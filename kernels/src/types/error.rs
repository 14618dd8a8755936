//! The crate's error type: an [`Error`] carrying a `#[non_exhaustive]` [`ErrorKind`].

use bellpepper_core::SynthesisError;

/// An error of the kernels crate. [`Error::kind`] says what went wrong.
#[derive(Debug, thiserror::Error)]
#[error("{kind}")]
pub struct Error {
    kind: ErrorKind,
}

impl Error {
    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// Consumes the error, returning its kind.
    pub fn into_kind(self) -> ErrorKind {
        self.kind
    }

    pub(crate) fn shape(what: &'static str, expected: usize, found: usize) -> Self {
        ErrorKind::ShapeMismatch {
            what,
            expected,
            found,
        }
        .into()
    }

    pub(crate) fn format(what: impl Into<String>) -> Self {
        ErrorKind::SrsFormat(what.into()).into()
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Self { kind }
    }
}

impl From<SynthesisError> for Error {
    fn from(e: SynthesisError) -> Self {
        ErrorKind::Synthesis(e).into()
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            ErrorKind::Truncated(e.to_string()).into()
        } else {
            ErrorKind::Io(e).into()
        }
    }
}

/// The kinds of [`Error`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The circuit failed to synthesize, or an assignment sink refused a value.
    #[error("synthesis failed: {0}")]
    Synthesis(SynthesisError),
    /// A length in an assignment, a batch or an SRS does not match what it must be.
    #[error("shape mismatch: {what} is {found}, expected {expected}")]
    ShapeMismatch {
        /// Which length.
        what: &'static str,
        /// The length required.
        expected: usize,
        /// The length found.
        found: usize,
    },
    /// A density bitmap is inconsistent (too few words, set bits past its end, wrong popcount).
    #[error("invalid density bitmap `{what}`: {reason}")]
    InvalidDensity {
        /// Which bitmap.
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The SRS has an identity `delta` (a subversion attempt or a corrupt file).
    #[error("the SRS contains the point at infinity where it must not")]
    UnexpectedIdentity,
    /// The bytes do not start with the SRS image magic.
    #[error("not an SRS image: bad magic")]
    BadMagic,
    /// The SRS image was written by another format version (0: not initialised yet).
    #[error("SRS image version {found} is not supported (expected {expected})")]
    VersionMismatch {
        /// The version this build reads.
        expected: u32,
        /// The version found in the header.
        found: u32,
    },
    /// The SRS memory is not 64-byte aligned.
    #[error("SRS image memory is not 64-byte aligned (address % 64 = {0})")]
    Misaligned(usize),
    /// A file or image ended before the data it announced.
    #[error("truncated SRS data: {0}")]
    Truncated(String),
    /// The SRS data is malformed (bad offsets, invalid points, inconsistent lengths).
    #[error("malformed SRS data: {0}")]
    SrsFormat(String),
    /// A circuit spec string could not be parsed.
    #[error("invalid circuit spec `{spec}`: {reason}")]
    InvalidSpec {
        /// The string given.
        spec: String,
        /// Why it was refused.
        reason: String,
    },
    /// No CUDA device (or no driver) is available to this process.
    #[error("no CUDA GPU available")]
    NoGpu,
    /// The CUDA runtime or supraseal-c2 reported an error.
    #[error("cuda error: {0}")]
    Cuda(String),
    /// A sticky CUDA error (an illegal address, a failed launch, an uncorrectable ECC error):
    /// the process's CUDA context is unusable from now on, and only a new process gets a new
    /// one.
    #[error("the GPU context is lost (the process must restart): {0}")]
    DeviceLost(String),
    /// A pre-compiled constraint system's encoding is malformed (bad magic or version, counts
    /// that do not add up, a damaged checksum, a term outside the circuit).
    #[error("malformed pre-compiled constraint system: {0}")]
    R1csFormat(String),
    /// Recording a circuit's matrices would take more memory than allowed.
    #[error(
        "the pre-compiled constraint system outgrew its budget of {limit} bytes ({bytes} bytes \
         after {constraints} constraints)"
    )]
    R1csOverBudget {
        /// The budget.
        limit: u64,
        /// Constraints recorded when it was exceeded.
        constraints: usize,
        /// Bytes at that point.
        bytes: u64,
    },
    /// A circuit's witness pass does not have the shape of the pre-compiled matrices given for
    /// it.
    #[error(
        "the circuit has {found:?} but its pre-compiled matrices have {expected:?}: they belong \
         to another circuit shape"
    )]
    R1csMismatch {
        /// The matrices' shape.
        expected: super::shape::CircuitShape,
        /// What the witness pass allocated and enforced.
        found: super::shape::CircuitShape,
    },
    /// An I/O error while reading or writing parameters.
    #[error("i/o error: {0}")]
    Io(std::io::Error),
    /// A Filecoin C1 output (`SealCommitPhase1Output`) is malformed, truncated, of another
    /// sector size or proof type, or its vanilla proofs do not verify.
    #[error("invalid C1 output: {0}")]
    InvalidC1(String),
    /// A Filecoin proof configuration is unsupported or inconsistent (sector size, tree shape,
    /// partition index, non-interactive PoRep).
    #[error("unsupported porep config: {0}")]
    PoRepConfig(String),
    /// The parameters of a Filecoin circuit are not in the parameter cache.
    #[error("{0}")]
    MissingParameters(String),
    /// A Filecoin PoSt or SnapDeals proof request is malformed, of another proof type or
    /// sector, or its vanilla proofs do not verify.
    #[error("invalid proof request: {0}")]
    InvalidRequest(String),
    /// The Filecoin proof crates reported an error (or panicked) while building parameters,
    /// circuits or public inputs.
    #[error("filecoin-proofs error: {0}")]
    Filecoin(String),
}

/// The message of a caught panic (`panic!` with a literal or a formatted string), or
/// `a panic without a message`: the one place every process turns a panic into the text of
/// the error that reports it.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message")
}
