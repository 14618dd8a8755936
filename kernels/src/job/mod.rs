//! Jobs: what the split pipeline schedules, whatever the circuit family.
//!
//! A job is a circuit ([`AnyCircuit`]) plus its request bytes. [`open`] checks the bytes and
//! returns a [`Job`]: `N` partitions, each synthesizable into any [`AssignmentSink`] (a ring slot
//! in synth-proc, a [`crate::synth::VecSink`] in process) with its public inputs (what the
//! launcher verifies each partition's proof against). A job's proof is its partitions' 192-byte
//! proofs in order (`filecoin::assemble_proof` for Filecoin).
//!
//! Two families implement it:
//! - built-in circuits (`sha-chain`, `pubinputs`, `bits`): the request is a [`BuiltinRequest`]
//!   (a seed and a partition count, 12 bytes); partition `k` uses the witness of seed `seed + k`;
//! - Filecoin (`porep:`, `post:`, `snap:`): the request is a C1 output, a PoSt or a SnapDeals
//!   request (`crate::filecoin`; without the feature `filecoin` opening one is an error saying
//!   so).
//!
//! synth-proc, gpu-proc and the launcher handle jobs only through this module.
//!
//! # Example
//!
//! ```
//! use kernels::job::{self, BuiltinRequest};
//!
//! let circuit = "pubinputs:2".parse()?;
//! let request = BuiltinRequest { seed: 7, partitions: 2 }.to_bytes();
//! let job = job::open(&circuit, &request)?;
//! assert_eq!(job.partitions(), 2);
//! let mut sink = kernels::synth::VecSink::new();
//! job.synthesize_partition(1, &mut sink)?;
//! assert_eq!(sink.finish().input.len(), job.public_inputs(1)?.len() + 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use blstrs::Scalar;

use crate::circuits::{AnyCircuit, CircuitSpec};
use crate::r1cs::R1cs;
use crate::synth::{Synthesis, VecSink};
use crate::types::{AssignmentSink, Error, ErrorKind};

mod open;

// The one place that picks a circuit's family, in its own file above both families' jobs.
pub use open::{filecoin_request_kind, open};

/// A checked request of one circuit family, split into partitions (one Groth16 proof each).
///
/// Object-safe and `Send + Sync`: one opened job serves the synthesis workers of a synth-proc at
/// once.
pub trait Job: Send + Sync {
    /// The circuit (and so the SRS) every partition uses.
    fn circuit(&self) -> AnyCircuit;
    /// Number of partitions.
    fn partitions(&self) -> usize;
    /// Synthesizes partition `k` into `sink`, as bellperson's prover does.
    fn synthesize_partition(&self, k: usize, sink: &mut dyn AssignmentSink) -> Result<(), Error> {
        self.synthesize_partition_with(k, sink, Synthesis::Full)
    }
    /// Synthesizes partition `k` into `sink` the way `how` says (the same bytes either way).
    fn synthesize_partition_with(
        &self,
        k: usize,
        sink: &mut dyn AssignmentSink,
        how: Synthesis<'_>,
    ) -> Result<(), Error>;
    /// The public inputs of partition `k` (without the leading ONE), as the verifier computes
    /// them.
    fn public_inputs(&self, k: usize) -> Result<Vec<Scalar>, Error>;
}

/// Synthesizes every partition of `job` both ways (in full, and through `r1cs`) and compares
/// the results: an error names the first partition and array that differ.
pub fn check_compiled(job: &dyn Job, r1cs: &R1cs) -> Result<(), Error> {
    for k in 0..job.partitions() {
        let mut full = VecSink::new();
        job.synthesize_partition(k, &mut full)?;
        let mut fast = VecSink::new();
        job.synthesize_partition_with(k, &mut fast, Synthesis::Compiled(r1cs))?;
        let (full, fast) = (full.finish(), fast.finish());
        let differs = [
            ("a", full.a == fast.a),
            ("b", full.b == fast.b),
            ("c", full.c == fast.c),
            ("input", full.input == fast.input),
            ("aux", full.aux == fast.aux),
            ("A-aux density", full.a_aux_density == fast.a_aux_density),
            (
                "B-input density",
                full.b_input_density == fast.b_input_density,
            ),
            ("B-aux density", full.b_aux_density == fast.b_aux_density),
        ]
        .into_iter()
        .find(|(_, same)| !same);
        if let Some((what, _)) = differs {
            return Err(ErrorKind::R1csFormat(format!(
                "partition {k} of `{}`: the pre-compiled synthesis gives another {what}",
                job.circuit()
            ))
            .into());
        }
    }
    Ok(())
}

/// The request of a built-in circuit: the seed of partition 0 and the number of partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuiltinRequest {
    /// Seed of partition 0; partition `k` uses `seed + k` (wrapping).
    pub seed: u64,
    /// Number of partitions, at least 1.
    pub partitions: u32,
}

impl BuiltinRequest {
    /// Bytes in the encoded form.
    pub const LEN: usize = 12;

    /// The encoded form: the seed and the partition count, little-endian.
    pub fn to_bytes(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::LEN);
        out.extend_from_slice(&self.seed.to_le_bytes());
        out.extend_from_slice(&self.partitions.to_le_bytes());
        out
    }

    /// Decodes [`BuiltinRequest::to_bytes`]; another length is an error.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        if bytes.len() != Self::LEN {
            return Err(ErrorKind::InvalidRequest(format!(
                "a built-in circuit's request is {} bytes (seed, partitions), not {}",
                Self::LEN,
                bytes.len()
            ))
            .into());
        }
        let (seed, partitions) = bytes.split_at(8);
        Ok(BuiltinRequest {
            seed: u64::from_le_bytes(seed.try_into().expect("8 bytes")),
            partitions: u32::from_le_bytes(partitions.try_into().expect("4 bytes")),
        })
    }
}

/// A job of a built-in circuit: partition `k` is the circuit with the witness of `seed + k`.
#[derive(Clone, Copy, Debug)]
pub struct BuiltinJob {
    spec: CircuitSpec,
    request: BuiltinRequest,
}

impl BuiltinJob {
    /// The job; at least one partition.
    pub fn new(spec: CircuitSpec, request: BuiltinRequest) -> Result<Self, Error> {
        if request.partitions == 0 {
            return Err(ErrorKind::InvalidRequest(format!(
                "a `{spec}` job needs at least one partition"
            ))
            .into());
        }
        Ok(BuiltinJob { spec, request })
    }

    /// The seed of partition `k`.
    pub fn seed_of(&self, k: usize) -> Result<u64, Error> {
        if k >= self.partitions() {
            return Err(ErrorKind::InvalidRequest(format!(
                "partition {k} out of range (the job has {})",
                self.partitions()
            ))
            .into());
        }
        Ok(self.request.seed.wrapping_add(k as u64))
    }
}

impl Job for BuiltinJob {
    fn circuit(&self) -> AnyCircuit {
        AnyCircuit::Builtin(self.spec)
    }

    fn partitions(&self) -> usize {
        self.request.partitions as usize
    }

    fn synthesize_partition_with(
        &self,
        k: usize,
        sink: &mut dyn AssignmentSink,
        how: Synthesis<'_>,
    ) -> Result<(), Error> {
        let seed = self.seed_of(k)?;
        crate::synth::synthesize_with(self.spec.circuit(Some(seed)), sink, how)?;
        Ok(())
    }

    fn public_inputs(&self, k: usize) -> Result<Vec<Scalar>, Error> {
        self.spec.public_inputs(self.seed_of(k)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::VecSink;

    #[test]
    fn builtin_requests_round_trip_and_bad_ones_are_refused() {
        let r = BuiltinRequest {
            seed: u64::MAX - 1,
            partitions: 3,
        };
        assert_eq!(BuiltinRequest::from_bytes(&r.to_bytes()).unwrap(), r);
        let e = BuiltinRequest::from_bytes(&r.to_bytes()[..5]).unwrap_err();
        assert!(e.to_string().contains("not 5"), "{e}");
        let circuit: AnyCircuit = "bits:8".parse().unwrap();
        let zero = BuiltinRequest {
            seed: 1,
            partitions: 0,
        };
        let e = open(&circuit, &zero.to_bytes()).err().unwrap();
        assert!(e.to_string().contains("at least one partition"), "{e}");
    }

    #[test]
    fn a_builtin_job_through_the_trait_uses_seed_plus_k_for_partition_k() {
        let spec: CircuitSpec = "sha-chain:1".parse().unwrap();
        let request = BuiltinRequest {
            seed: 100,
            partitions: 3,
        };
        let job = open(&spec.into(), &request.to_bytes()).unwrap();
        assert_eq!(job.circuit(), AnyCircuit::Builtin(spec));
        assert_eq!(job.partitions(), 3);
        for k in 0..3 {
            let seed = 100 + k as u64;
            assert_eq!(
                job.public_inputs(k).unwrap(),
                spec.public_inputs(seed).unwrap()
            );
            let mut sink = VecSink::new();
            job.synthesize_partition(k, &mut sink).unwrap();
            let expected = spec.synthesize_into(seed, VecSink::new()).unwrap().finish();
            let got = sink.finish();
            assert_eq!((got.input, got.aux), (expected.input, expected.aux));
        }
        // The seed wraps like before.
        let wrap = BuiltinJob::new(
            spec,
            BuiltinRequest {
                seed: u64::MAX,
                partitions: 2,
            },
        )
        .unwrap();
        assert_eq!(wrap.seed_of(1).unwrap(), 0);
        let e = job.public_inputs(3).unwrap_err();
        assert!(e.to_string().contains("partition 3 out of range"), "{e}");
        let e = job
            .synthesize_partition(3, &mut VecSink::new())
            .unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
    }
}
