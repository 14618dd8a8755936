//! The two steps every local mode is made of: synthesizing one partition and proving one batch,
//! each recording its timeline events as the split pipeline's processes do.

use bellperson::SynthesisError;
use blstrs::Scalar;
use ff::Field;
use kernels::job::Job;
use kernels::synth::{
    AssignmentSink, CircuitShape, DensityKind, Evaluations, OwnedAssignment, VecSink,
};
use kernels::{Backend, Proof};
use shm_protocol::control::{EventKind, TimelineEvent};

use super::{event, Error, ErrorKind};
use crate::synthesis::Synthesizer;

/// A synthesized partition with the events recorded so far.
pub(super) struct Synthesized {
    pub(super) assignment: OwnedAssignment,
    pub(super) events: Vec<TimelineEvent>,
}

/// Synthesizes partition `k` of `job` (job id `job_id` in the events) through `synthesis` into
/// Vecs reserved up front for `shape`, as a slot would be; records `SYNTH_START`, `WITNESS_END` (the
/// pre-compiled synthesis), `SYNTH_END` and `SLOT_PUBLISH`, as synth-proc does.
pub(super) fn synth_one(
    synthesis: &Synthesizer,
    job: &dyn Job,
    shape: CircuitShape,
    job_id: u64,
    k: usize,
) -> Result<Synthesized, Error> {
    let partition = k as u32;
    let mut events = vec![event(EventKind::SynthStart, job_id, partition)];
    let mut sink = VecSink::with_limit(shape);
    let mut clocked = WitnessClock {
        inner: &mut sink,
        witness_end_ns: None,
    };
    synthesis
        .synthesize_partition(job, k, &mut clocked)
        .map_err(|source| ErrorKind::Synthesis { job_id, source })?;
    if let Some(t_ns) = clocked.witness_end_ns {
        events.push(TimelineEvent {
            t_ns,
            ..event(EventKind::WitnessEnd, job_id, partition)
        });
    }
    let assignment = sink.finish();
    let end = event(EventKind::SynthEnd, job_id, partition);
    events.push(end);
    events.push(TimelineEvent {
        kind: EventKind::SlotPublish,
        ..end
    });
    Ok(Synthesized { assignment, events })
}

/// A sink that notes when the witness pass ends: the moment the pre-compiled synthesis asks for
/// the evaluations' arrays (synth-proc's `SlotSink` notes the same moment).
struct WitnessClock<'a> {
    inner: &'a mut dyn AssignmentSink,
    witness_end_ns: Option<u64>,
}

impl AssignmentSink for WitnessClock<'_> {
    fn push_input(&mut self, value: Scalar) -> Result<(), SynthesisError> {
        self.inner.push_input(value)
    }
    fn push_aux(&mut self, value: Scalar) -> Result<(), SynthesisError> {
        self.inner.push_aux(value)
    }
    fn push_constraint(&mut self, a: Scalar, b: Scalar, c: Scalar) -> Result<(), SynthesisError> {
        self.inner.push_constraint(a, b, c)
    }
    fn set_density(&mut self, kind: DensityKind, index: usize) -> Result<(), SynthesisError> {
        self.inner.set_density(kind, index)
    }
    fn inputs(&self) -> &[Scalar] {
        self.inner.inputs()
    }
    fn aux(&self) -> &[Scalar] {
        self.inner.aux()
    }
    fn evaluations(
        &mut self,
        n: usize,
        popcounts: [u64; 3],
    ) -> Result<Evaluations<'_>, SynthesisError> {
        self.witness_end_ns = Some(shm_protocol::control::monotonic_ns());
        self.inner.evaluations(n, popcounts)
    }
}

/// Proves `batch` (job id, partition, assignment) in one backend call; records `GPU_CLAIM`,
/// `GPU_START`, `GPU_END` (the same times for every member) and `PROOF_DONE`. Returns the
/// proofs in batch order.
pub(super) fn prove(
    backend: &dyn Backend,
    batch: &[(u64, u32, &OwnedAssignment)],
    events: &mut Vec<TimelineEvent>,
) -> Result<Vec<Proof>, Error> {
    let mut rng = rand::thread_rng();
    let r: Vec<Scalar> = batch.iter().map(|_| Scalar::random(&mut rng)).collect();
    let s: Vec<Scalar> = batch.iter().map(|_| Scalar::random(&mut rng)).collect();
    let assignments: Vec<_> = batch.iter().map(|(_, _, a)| a.as_assignment()).collect();
    let stamp = |kind, events: &mut Vec<TimelineEvent>| {
        let e = event(kind, 0, 0);
        events.extend(batch.iter().map(|&(job_id, partition, _)| TimelineEvent {
            job_id,
            partition,
            ..e
        }));
    };
    stamp(EventKind::GpuClaim, events);
    stamp(EventKind::GpuStart, events);
    let result = backend.prove_batch(&assignments, &r, &s);
    stamp(EventKind::GpuEnd, events);
    let first_job = batch.first().map_or(0, |b| b.0);
    let out = result.map_err(|source| ErrorKind::Prove {
        first_job,
        batch: batch.len(),
        source,
    })?;
    if out.len() != batch.len() {
        return Err(ErrorKind::Prove {
            first_job,
            batch: batch.len(),
            source: kernels::ErrorKind::ShapeMismatch {
                what: "proofs returned",
                expected: batch.len(),
                found: out.len(),
            }
            .into(),
        }
        .into());
    }
    stamp(EventKind::ProofDone, events);
    Ok(out)
}
