//! Groth16 provers that work from borrowed assignments (what a ring slot holds), SRS tooling,
//! built-in circuits and Filecoin's proofs.
//!
//! - [`types`]: the floor, the plain types every other module shares ([`Assignment`],
//!   [`types::CircuitShape`], [`types::AssignmentSink`], [`Error`]); it imports nothing of the
//!   crate, and every module's imports run down to it.
//! - [`synth`]: [`synth::ProvingCs`] synthesizes a bellperson circuit into any
//!   [`synth::AssignmentSink`] (a ring slot, or [`synth::VecSink`]) exactly as bellperson's prover
//!   does; [`synth::circuit_shape`] counts a circuit.
//! - [`r1cs`]: pre-compiled constraint systems: A, B and C recorded once per circuit shape, then
//!   per proof a witness-only pass and three parallel sparse products ([`r1cs::R1cs`]).
//! - [`witness`]: witness-only assignments: which aux variables are bits (from the matrices
//!   alone, [`witness::WitnessLayout`]), packing a synthesis as it comes
//!   ([`witness::WitnessSink`]) and expanding it back for a prover ([`witness::expand`]).
//! - [`backend`]: the [`Backend`] trait (prove a batch of [`Assignment`]s sharing one SRS) and
//!   [`CpuBackend`], bit-exact with `bellperson::groth16::create_proof`.
//! - [`srs`]: the flat SRS image ([`srs::SrsView`], zero-copy over any 64-byte aligned bytes, e.g.
//!   a shared mapping) and bellperson's `.params` file format (read, write, stream into an image).
//! - [`paramgen`]: a fast random parameter generator with progress reporting.
//! - [`circuits`]: [`circuits::AnyCircuit`], the circuit a job names: a built-in circuit
//!   ([`circuits::builtin`], named by a [`circuits::CircuitSpec`]: `sha-chain:38`,
//!   `pubinputs:8`, `bits:4096`) or a Filecoin proof kind.
//! - [`job`]: the [`job::Job`] trait (a circuit plus request bytes: partitions and their public
//!   inputs) that the pipeline schedules, for built-in circuits and Filecoin alike
//!   ([`job::open`], the one place that picks the family).
//! - `filecoin` (feature `filecoin`; without it a stand-in that refuses Filecoin specs): PoRep
//!   C2 from a C1 output, WinningPoSt and WindowPoSt from vanilla proofs, SnapDeals from
//!   partition proofs, each a checked request made a job by one generic `FilecoinJob`; circuits
//!   built by the fil crates, proved by this crate's backends, bytes accepted by
//!   filecoin-proofs' verifiers; local test parameters under the official parameter cache
//!   names. Feature `fixtures`: test and bench data (`filecoin::fixture`).
//!
//! # Example
//!
//! ```
//! use kernels::circuits::CircuitSpec;
//! use kernels::srs::SrsImage;
//! use kernels::{Backend, CpuBackend};
//!
//! let spec: CircuitSpec = "pubinputs:2".parse()?;
//! // Random parameters (seeded), laid out as an SRS image.
//! let params = kernels::paramgen::generate_parameters_seeded(spec.circuit(None), 7, &|_| {})?;
//! let image = SrsImage::from_parameters(&params, spec.circuit_id())?;
//! let backend = CpuBackend::new(image)?;
//!
//! // Synthesize into plain Vecs and prove.
//! let seed = 42;
//! let assignment = spec.synthesize_into(seed, kernels::synth::VecSink::new())?.finish();
//! let r = blstrs::Scalar::from(3u64);
//! let s = blstrs::Scalar::from(4u64);
//! let proofs = backend.prove_batch(&[assignment.as_assignment()], &[r], &[s])?;
//! assert!(backend.verify(&proofs[0], &spec.public_inputs(seed)?)?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod backend;
pub mod circuits;
// Without the feature, a stand-in whose `ProofKind` has no value and whose parsing says the
// build has no Filecoin support: the rest of the workspace names Filecoin without a `cfg`.
#[cfg_attr(not(feature = "filecoin"), path = "filecoin/disabled.rs")]
pub mod filecoin;
mod fixed_base;
pub mod job;
mod msm;
pub mod ntt;
pub mod paramgen;
pub mod r1cs;
pub mod srs;
pub mod synth;
pub mod types;
pub mod witness;

pub use backend::cpu::CpuBackend;
pub use backend::Backend;
pub use types::{panic_message, Assignment, Density, Error, ErrorKind, Proof, WitnessAssignment};
