//! The one Filecoin job: any checked request ([`ProofRequest`]: PoRep C2, PoSt, SnapDeals) as
//! a [`Job`], with its partitions checked, counted, synthesized and proved the same way; and
//! opening a request of any kind as one.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use blstrs::Scalar;
use ff::Field;
use rand_core::RngCore;

use super::{
    assemble_proof, check_partition, detect_kind, porep, post, update, ProofKind, ProofRequest,
    RequestVisitor,
};
use crate::backend::Backend;
use crate::circuits::AnyCircuit;
use crate::job::Job;
use crate::synth::{Synthesis, VecSink};
use crate::types::{AssignmentSink, CircuitShape, Error, ErrorKind};

/// A Filecoin job: a checked request ([`ProofRequest`]) with everything needed to build and
/// prove its partitions.
pub struct FilecoinJob<R: ProofRequest> {
    request: R,
}

impl<R: ProofRequest> FilecoinJob<R> {
    /// The job of a checked request.
    pub fn new(request: R) -> Self {
        FilecoinJob { request }
    }

    /// The checked request.
    pub fn request(&self) -> &R {
        &self.request
    }

    /// Number of partitions (one Groth16 proof each).
    pub fn partitions(&self) -> usize {
        self.request.partitions()
    }

    /// The circuit of partition `k`, exactly as filecoin-proofs' prover builds it.
    pub fn circuit(&self, k: usize) -> Result<R::Circuit, Error> {
        check_partition(k, self.partitions())?;
        self.request.partition_circuit(k)
    }

    /// The public inputs of partition `k` (without the leading ONE), as the verifier computes
    /// them.
    pub fn public_inputs(&self, k: usize) -> Result<Vec<Scalar>, Error> {
        check_partition(k, self.partitions())?;
        self.request.partition_inputs(k)
    }

    /// The shape of partition `k` (a counting pass, no witness): what a slot must hold.
    pub fn shape(&self, k: usize) -> Result<CircuitShape, Error> {
        crate::synth::circuit_shape(self.circuit(k)?)
    }

    /// Synthesizes partition `k` into `sink` (bellperson's prover sequence).
    pub fn synthesize_partition<S: AssignmentSink>(&self, k: usize, sink: S) -> Result<S, Error> {
        crate::synth::synthesize(self.circuit(k)?, sink)
    }

    /// Proves every partition with `backend` (see [`prove_job`]) and returns the proof bytes
    /// filecoin-proofs writes: the partitions' proofs concatenated.
    pub fn prove<B: Backend, G: RngCore>(
        &self,
        backend: &B,
        rng: &mut G,
    ) -> Result<Vec<u8>, Error> {
        prove_job(self, backend, rng)
    }
}

impl<R: ProofRequest> Job for FilecoinJob<R> {
    fn circuit(&self) -> AnyCircuit {
        AnyCircuit::Filecoin(self.request.kind())
    }

    fn partitions(&self) -> usize {
        self.request.partitions()
    }

    fn synthesize_partition_with(
        &self,
        k: usize,
        sink: &mut dyn AssignmentSink,
        how: Synthesis<'_>,
    ) -> Result<(), Error> {
        let circuit = self.circuit(k)?;
        // The vanilla proofs were verified, so the circuit's own assertions hold; a panic would
        // still be an error, not a crash of the worker.
        catch_unwind(AssertUnwindSafe(|| {
            crate::synth::synthesize_with(circuit, &mut *sink, how).map(drop)
        }))
        .unwrap_or_else(|_| {
            Err(ErrorKind::Filecoin(format!(
                "the `{}` circuit of partition {k} panicked during synthesis",
                self.request.kind()
            ))
            .into())
        })
    }

    fn public_inputs(&self, k: usize) -> Result<Vec<Scalar>, Error> {
        FilecoinJob::public_inputs(self, k)
    }
}

/// Boxes a checked request of any tree shape as a job.
struct Boxed;

impl RequestVisitor for Boxed {
    type Out = Box<dyn Job>;
    fn visit<R: ProofRequest>(self, request: R) -> Result<Box<dyn Job>, Error> {
        Ok(Box::new(FilecoinJob::new(request)))
    }
}

/// Opens a proof request of `kind`: parses it, checks it (vanilla proofs verified) and returns
/// the job. Errors name the problem (truncated or malformed JSON, another proof type or sector,
/// vanilla proofs that do not verify).
pub fn open_job(kind: ProofKind, input: &[u8]) -> Result<Box<dyn Job>, Error> {
    kind.check_supported()?;
    match kind {
        ProofKind::PoRep(p) => porep::open(p, input, Boxed),
        ProofKind::PoSt(p) => post::open(p, input, Boxed),
        ProofKind::SnapDeals(p) => update::open(p, input, Boxed),
    }
}

/// Reads a request file, then [`open_job`] (kind given) or [`detect_kind`] + [`open_job`];
/// errors name the file.
pub fn open_job_file(
    kind: Option<ProofKind>,
    path: impl AsRef<Path>,
) -> Result<Box<dyn Job>, Error> {
    let path = path.as_ref();
    let input = std::fs::read(path).map_err(|e| {
        Error::from(ErrorKind::InvalidRequest(format!(
            "cannot read `{}`: {e}",
            path.display()
        )))
    })?;
    let name_file = |e: Error| -> Error {
        match e.into_kind() {
            ErrorKind::InvalidC1(r) => {
                ErrorKind::InvalidC1(format!("`{}`: {r}", path.display())).into()
            }
            ErrorKind::InvalidRequest(r) => {
                ErrorKind::InvalidRequest(format!("`{}`: {r}", path.display())).into()
            }
            kind => kind.into(),
        }
    };
    let kind = match kind {
        Some(k) => k,
        None => detect_kind(&input).map_err(name_file)?,
    };
    open_job(kind, &input).map_err(name_file)
}

/// Proves every partition of `job` with `backend`, one at a time (one assignment in memory),
/// fresh `r`, `s` from `rng`, and returns the proof bytes filecoin-proofs writes.
pub fn prove_job<B: Backend + ?Sized, R: RngCore>(
    job: &dyn Job,
    backend: &B,
    rng: &mut R,
) -> Result<Vec<u8>, Error> {
    let mut proofs = Vec::with_capacity(job.partitions());
    for k in 0..job.partitions() {
        let t = std::time::Instant::now();
        let mut sink = VecSink::new();
        job.synthesize_partition(k, &mut sink)?;
        let assignment = sink.finish();
        let synth_s = t.elapsed().as_secs_f64();
        let (r, s) = (Scalar::random(&mut *rng), Scalar::random(&mut *rng));
        let t = std::time::Instant::now();
        let mut out = backend.prove_batch(&[assignment.as_assignment()], &[r], &[s])?;
        let proof = out
            .pop()
            .ok_or_else(|| Error::shape("proofs returned", 1, 0))?;
        tracing::debug!(
            circuit = %job.circuit(),
            partition = k,
            constraints = assignment.a.len(),
            synth_s,
            prove_s = t.elapsed().as_secs_f64(),
            backend = backend.name(),
            "partition proved"
        );
        proofs.push(proof);
    }
    assemble_proof(&proofs)
}
