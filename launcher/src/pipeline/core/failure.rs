//! What ends a job, or one attempt of one of its partitions, and why the core refused a
//! client's call ([`Refusal`]), as values. The pipeline carries them up to where they become
//! text (the journal, the gRPC API, logs); `Display` gives the words those have always shown, so
//! a client or a journal row sees the same text as before.

use std::fmt;
use std::time::Duration;

use kernels::circuits::AnyCircuit;

use super::events::{ProofRejection, Role};

/// Why a job ended without its proofs (the error of
/// [`JobOutcome::result`](super::jobs::JobOutcome::result)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobFailure {
    /// A client cancelled it: `cancelled`.
    Cancelled,
    /// A partition failed where it was made: synth-proc could not synthesize it, or its prover
    /// wrote a failure into its slot: `partition K: REASON`.
    Partition {
        /// The partition.
        partition: u32,
        /// The child's reason.
        reason: String,
    },
    /// A partition failed its last allowed attempt
    /// ([`FaultSettings::max_attempts`](super::FaultSettings::max_attempts)):
    /// `partition K failed N times: attempt 1: …; attempt 2: …`.
    Attempts {
        /// The partition.
        partition: u32,
        /// Every failed attempt, in order.
        reasons: Vec<AttemptFailure>,
    },
    /// A child role was given up and nothing can take its work: `ROLE cannot run: REASON`.
    RoleGaveUp {
        /// The role.
        role: Role,
        /// Why it was given up.
        reason: String,
    },
    /// The pipeline shut down first: `the pipeline shut down before the job finished`.
    ShutDown,
}

impl fmt::Display for JobFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobFailure::Cancelled => f.write_str("cancelled"),
            JobFailure::Partition { partition, reason } => {
                write!(f, "partition {partition}: {reason}")
            }
            JobFailure::Attempts { partition, reasons } => {
                write!(f, "partition {partition} failed {} times: ", reasons.len())?;
                for (i, r) in reasons.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "attempt {}: {r}", i + 1)?;
                }
                Ok(())
            }
            JobFailure::RoleGaveUp { role, reason } => write!(f, "{role} cannot run: {reason}"),
            JobFailure::ShutDown => f.write_str("the pipeline shut down before the job finished"),
        }
    }
}

/// Why one attempt of a partition failed (it is retried below the limit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttemptFailure {
    /// The process holding it died or was killed: `WHY while proving it`.
    Lost {
        /// What happened to the process.
        why: ChildLoss,
        /// What it was doing with the partition.
        doing: Holding,
    },
    /// The launcher's check refused its proof.
    Rejected(ProofRejection),
    /// Its DONE slot did not match the job table: `its done slot was refused: WHY`.
    SlotRefused(String),
}

impl fmt::Display for AttemptFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttemptFailure::Lost { why, doing } => write!(f, "{why} {doing}"),
            AttemptFailure::Rejected(r) => r.fmt(f),
            AttemptFailure::SlotRefused(why) => write!(f, "its done slot was refused: {why}"),
        }
    }
}

/// How a child was lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChildLoss {
    /// It died on its own: `ROLE died (STATUS)`.
    Died {
        /// The child.
        role: Role,
        /// How it ended (`killed by signal 9`).
        status: String,
    },
    /// It stopped beating and the pipeline killed it: `ROLE stopped beating and was killed`.
    Silent {
        /// The child.
        role: Role,
    },
    /// A gpu-proc's batch ran past its progress deadline and the pipeline killed it:
    /// `ROLE ran past its deadline of D proving it and was killed`.
    ProvingLate {
        /// The gpu-proc.
        role: Role,
        /// The deadline.
        deadline: Duration,
    },
    /// A synthesis ran past its progress deadline and the pipeline killed synth-proc:
    /// `synth-proc ran past its deadline of D synthesizing job J partition P and was killed`.
    SynthesisLate {
        /// The deadline.
        deadline: Duration,
        /// The job of the late synthesis.
        job: u64,
        /// Its partition.
        partition: u32,
    },
}

impl fmt::Display for ChildLoss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChildLoss::Died { role, status } => write!(f, "{role} died ({status})"),
            ChildLoss::Silent { role } => write!(f, "{role} stopped beating and was killed"),
            ChildLoss::ProvingLate { role, deadline } => write!(
                f,
                "{role} ran past its deadline of {deadline:?} proving it and was killed"
            ),
            ChildLoss::SynthesisLate {
                deadline,
                job,
                partition,
            } => write!(
                f,
                "synth-proc ran past its deadline of {deadline:?} synthesizing job {job} \
                 partition {partition} and was killed"
            ),
        }
    }
}

/// What a lost child was doing with a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holding {
    /// It held its slot CLAIMED: `while proving it`.
    Proving,
    /// It held its slot WRITING: `while synthesizing it`.
    Synthesizing,
}

impl fmt::Display for Holding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Holding::Proving => "while proving it",
            Holding::Synthesizing => "while synthesizing it",
        })
    }
}

/// Why the core refused a call from a client thread (the shell names it as a
/// `PipelineError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// The pipeline cannot go on.
    #[error("{0}")]
    Fatal(String),
    /// A job of this id is live.
    #[error("job id {0} is live")]
    JobIdTaken(u64),
    /// No live job has this id.
    #[error("no live job {0}")]
    UnknownJob(u64),
    /// Jobs of the circuit are live.
    #[error("{jobs} live jobs use the SRS of `{circuit}`")]
    SrsInUse {
        /// The circuit.
        circuit: AnyCircuit,
        /// How many.
        jobs: u32,
    },
    /// The circuit is not configured.
    #[error("circuit `{0}` is not served")]
    Unserved(AnyCircuit),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_read_as_they_always_did() {
        assert_eq!(JobFailure::Cancelled.to_string(), "cancelled");
        assert_eq!(
            JobFailure::Partition {
                partition: 0,
                reason: "bad slot: a offset".into()
            }
            .to_string(),
            "partition 0: bad slot: a offset"
        );
        let died = AttemptFailure::Lost {
            why: ChildLoss::Died {
                role: Role::Gpu(0),
                status: "killed by signal 9".into(),
            },
            doing: Holding::Proving,
        };
        let late = AttemptFailure::Lost {
            why: ChildLoss::SynthesisLate {
                deadline: Duration::from_secs(60),
                job: 3,
                partition: 1,
            },
            doing: Holding::Synthesizing,
        };
        assert_eq!(
            JobFailure::Attempts {
                partition: 1,
                reasons: vec![died, late],
            }
            .to_string(),
            "partition 1 failed 2 times: attempt 1: gpu-proc[0] died (killed by signal 9) while \
             proving it; attempt 2: synth-proc ran past its deadline of 60s synthesizing job 3 \
             partition 1 and was killed while synthesizing it"
        );
        assert_eq!(
            JobFailure::RoleGaveUp {
                role: Role::Synth,
                reason: "no".into()
            }
            .to_string(),
            "synth-proc cannot run: no"
        );
        assert_eq!(
            AttemptFailure::Rejected(ProofRejection::UnknownCircuit(255)).to_string(),
            "slot carries unknown circuit id 0xff"
        );
        assert_eq!(
            AttemptFailure::SlotRefused("slot 3 names job 9".into()).to_string(),
            "its done slot was refused: slot 3 names job 9"
        );
    }
}
