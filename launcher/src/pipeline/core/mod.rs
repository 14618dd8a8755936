//! The pipeline's core: a state machine over the ring, the job table, the SRS set and the
//! children's states. It contains no thread, channel, socket, process or lock: it takes events
//! with the time they arrived (its deadlines and liveness run on that time; only the timeline's
//! stamps read the clock) and returns [`Action`]s for every effect, which the shell around it
//! (`hub`, `dispatch`, `child`, `verify`) carries out.
//!
//! A reader starts at `events` (what the core reacts to) and `Action` (what it asks for), then
//! `machine` ([`Core`]: child lifecycle, messages, liveness), `handout` (jobs in, partitions to
//! synth-proc), `results` (DONE slots, proof checks, attempts, outcomes), `srs` (SRS residency),
//! `stats` (timeline and measured times), `jobs` (the job table, pure bookkeeping), `failure`
//! (why a job or an attempt failed, as values) and `rules` (the settings the core obeys).
//!
//! **Architecture Invariant:** nothing here imports from the shell (`dispatch`, `child`, `hub`,
//! `verify`, `start`): the import graph runs one way, from the shell into the core. The core's
//! tests (`pipeline::fake`'s `World`, `pipeline::tests`) drive it with fake children and read its
//! actions as values.

mod events;
mod failure;
mod handout;
pub mod jobs;
mod machine;
mod residency;
mod results;
mod rules;
mod srs;
mod stats;
mod tracking;

use std::os::fd::OwnedFd;

pub use events::{ChildEvent, OutboxRefused, ProofRejection, Role, ToChild, Verdict, VerifyTask};
pub(crate) use events::{Event, Settled};
pub(crate) use failure::Refusal;
pub use failure::{AttemptFailure, ChildLoss, Holding, JobFailure};
pub(crate) use handout::NewJob;
pub use handout::EXPRESS_LANE;
pub(crate) use machine::{ChildInfo, CircuitEntry, Core};
pub use rules::FaultSettings;
pub(crate) use rules::Rules;
pub(crate) use srs::{GpuSrs, SrsSet};
pub use srs::{SrsLine, SrsTier};
pub use stats::{Counters, GpuLine};

use jobs::JobOutcome;
use kernels::circuits::AnyCircuit;
use kernels::synth::CircuitShape;

/// What the core asks of the world around it. The shell queues messages and hands outcomes to
/// their waiters at once, under the pipeline's lock (so the messages for one child keep their
/// order, and a refused one is reported back before anything else happens:
/// [`Core::settle`]); it kills, checks and reads files after the lock is released.
#[derive(Debug)]
pub(crate) enum Action {
    /// Queue a message for a child on its bounded outbox, without blocking, and report how it
    /// went ([`Core::settle`]).
    Send {
        /// For which child.
        role: Role,
        /// What.
        msg: ToChild,
        /// A descriptor that travels with it (`SCM_RIGHTS`: a request memfd, an SRS image).
        fd: Option<OwnedFd>,
    },
    /// Hand a job's outcome to its waiter (the job is no longer live in the core).
    Deliver(JobOutcome),
    /// Kill a child (SIGKILL): it stopped beating or ran past a deadline. Its supervisor
    /// reports the exit, which reclaims its slots.
    Kill {
        /// Which.
        role: Role,
        /// Its process.
        pid: u32,
    },
    /// Check a proof on the verifier pool; its verdict comes back as `Event::Verified`.
    Verify(VerifyTask),
    /// Read and check a circuit's SRS file into a shared-memory image, then give it to the core
    /// ([`Core::srs_read`]), which sends it to the gpu-procs.
    LoadSrs(SrsToLoad),
}

/// What reading a circuit's SRS needs ([`Action::LoadSrs`]).
#[derive(Clone, Debug)]
pub(crate) struct SrsToLoad {
    /// The circuit.
    pub(crate) spec: AnyCircuit,
    /// Its id.
    pub(crate) circuit_id: u64,
    /// Its shape, checked against the file.
    pub(crate) shape: CircuitShape,
    /// The `.params` file.
    pub(crate) params: std::path::PathBuf,
}

impl std::fmt::Debug for VerifyTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifyTask")
            .field("job_id", &self.job_id)
            .field("partition", &self.partition)
            .finish_non_exhaustive()
    }
}
