//! What the core reacts to, as plain values: which child ([`Role`]), what its supervisor reports
//! of it ([`ChildEvent`]), a proof's verdict ([`Verdict`]), the dispatcher's [`Event`]s that
//! carry them, and how the messages the core asked for went ([`Settled`]); and the values the
//! core hands out with its actions: a message for a child ([`ToChild`]) and a proof to check
//! ([`VerifyTask`]).
//!
//! Nothing here holds a channel, a socket or a process: the supervisors (`child`), the verifier
//! pool (`verify`) and the dispatcher (`dispatch`) build these values and hand them to the core.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bellperson::groth16::PreparedVerifyingKey;
use blstrs::{Bls12, Scalar};
use shm_protocol::control::{FromChild, ToGpu, ToSynth};

use crate::pinning::CpuList;

/// Which child.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// The synthesis process.
    Synth,
    /// The gpu-proc of this device index.
    Gpu(u32),
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Role::Synth => f.write_str("synth-proc"),
            Role::Gpu(i) => write!(f, "gpu-proc[{i}]"),
        }
    }
}

/// What the supervisors report to the pipeline.
#[derive(Debug)]
pub enum ChildEvent {
    /// A child was started.
    Started {
        /// Which.
        role: Role,
        /// Its pid.
        pid: u32,
        /// Whether it can be sent messages (`false`: its writer thread could not start, and the
        /// child was killed). The outbox itself stays with the dispatcher.
        reachable: bool,
        /// The cpus it was verified to run on (from `/proc/PID/status`).
        cpus: Option<CpuList>,
    },
    /// A message from a child.
    Message {
        /// Which.
        role: Role,
        /// Its pid.
        pid: u32,
        /// What it said.
        msg: FromChild,
    },
    /// A child exited or was killed.
    Exited {
        /// Which.
        role: Role,
        /// Its pid.
        pid: u32,
        /// How it ended.
        status: String,
        /// The last lines it wrote to stderr.
        stderr_tail: Vec<String>,
        /// Whether the supervisor will start it again.
        restarting: bool,
    },
    /// A child that served before keeps dying at restart: shown down, still restarted.
    Down {
        /// Which.
        role: Role,
        /// Why.
        reason: String,
    },
    /// A child that never served could not be started, refused its configuration or
    /// crash-looped before serving: the role is given up.
    GaveUp {
        /// Which.
        role: Role,
        /// Why.
        reason: String,
    },
}

/// What the dispatcher hands the core ([`Core::on`](super::Core::on)).
#[derive(Debug)]
pub(crate) enum Event {
    /// A supervisor's report of its child.
    Child(ChildEvent),
    /// A proof checked by the verifier pool.
    Verified(Verdict),
    /// The children are stopped: collect the last results and end.
    Stop,
}

/// One proof to check.
pub struct VerifyTask {
    /// Its job.
    pub job_id: u64,
    /// Its partition.
    pub partition: u32,
    /// The proof bytes as the DONE slot held them.
    pub proof: Vec<u8>,
    /// The partition's public inputs, computed when the job was accepted.
    pub inputs: Vec<Scalar>,
    /// The circuit's prepared verifying key.
    pub pvk: Arc<PreparedVerifyingKey<Bls12>>,
}

/// A proof checked: what comes back to the core.
#[derive(Debug)]
pub struct Verdict {
    /// Its job.
    pub job_id: u64,
    /// Its partition.
    pub partition: u32,
    /// The proof bytes (delivered with the job when they verified).
    pub proof: Vec<u8>,
    /// Verified, or why not.
    pub result: Result<(), ProofRejection>,
    /// How long the check took (the job's `verify` time).
    pub took: Duration,
}

/// A message for a child: launcher → synth-proc or launcher → gpu-proc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToChild {
    /// For synth-proc.
    Synth(ToSynth),
    /// For a gpu-proc.
    Gpu(ToGpu),
}

impl From<ToSynth> for ToChild {
    fn from(m: ToSynth) -> ToChild {
        ToChild::Synth(m)
    }
}

impl From<ToGpu> for ToChild {
    fn from(m: ToGpu) -> ToChild {
        ToChild::Gpu(m)
    }
}

/// Why a message for a child was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutboxRefused {
    /// The queue is full (the child reads slowly or is frozen): keep the message for later.
    Full,
    /// The writer ended (the child's socket failed: it is dying), or the child has none.
    Closed,
}

/// How one message the core asked for ([`Action::Send`](super::Action::Send)) went: queued for
/// the child, or refused (the core keeps what it must send again).
#[derive(Debug)]
pub(crate) struct Settled {
    /// The child it was for.
    pub(crate) role: Role,
    /// The message.
    pub(crate) msg: ToChild,
    /// Queued, or why not.
    pub(crate) result: Result<(), OutboxRefused>,
}

/// Why the launcher refused a proof.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProofRejection {
    /// The pairing check failed: `the proof does not verify`.
    DoesNotVerify,
    /// The bytes are not a proof: `malformed proof: WHY`.
    Malformed(String),
    /// The verifier failed: `verification error: WHY`.
    Error(String),
    /// The slot names a circuit this pipeline does not serve:
    /// `slot carries unknown circuit id 0x…`.
    UnknownCircuit(u64),
    /// The job has no such partition: `partition K is out of range`.
    NoSuchPartition(u32),
}

impl fmt::Display for ProofRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProofRejection::DoesNotVerify => f.write_str("the proof does not verify"),
            ProofRejection::Malformed(why) => write!(f, "malformed proof: {why}"),
            ProofRejection::Error(why) => write!(f, "verification error: {why}"),
            ProofRejection::UnknownCircuit(id) => {
                write!(f, "slot carries unknown circuit id {id:#x}")
            }
            ProofRejection::NoSuchPartition(p) => write!(f, "partition {p} is out of range"),
        }
    }
}
