//! The floor: the plain types every other module of the crate shares, and the crate's error.
//! Nothing here imports anything of the crate outside this module, so the imports of the
//! crate run one way, down to here; a reader starts here.
//!
//! - [`Assignment`] (with its [`Density`] bitmaps): a synthesized circuit as a prover borrows
//!   it, from a `Vec` or a ring slot; [`WitnessAssignment`]: a witness-only one;
//!   [`DensityBits`]: an owned, growable bitmap; [`Proof`]: what every backend returns.
//! - [`CircuitShape`]: a circuit's size; [`DensityKind`]: which bitmap a bit belongs to.
//! - [`AssignmentSink`]: where a synthesis writes (a slot, a `Vec`, a packed witness), with
//!   [`Evaluations`], its arrays lent for a bulk write.
//! - [`ProofFamily`]: a Filecoin proof family (PoRep, PoSt, SnapDeals), named in every build.
//! - [`Error`], [`ErrorKind`], [`panic_message`].

mod assignment;
mod error;
mod family;
mod shape;
mod sink;

pub use assignment::{Assignment, Density, DensityBits, Proof, WitnessAssignment};
pub use error::{panic_message, Error, ErrorKind};
pub use family::{ProofFamily, FILECOIN_PREFIXES};
pub use shape::{CircuitShape, DensityKind};
pub use sink::{AssignmentSink, Evaluations};
