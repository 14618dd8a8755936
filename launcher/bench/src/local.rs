//! The bench modes that run inside this process, on the same jobs and kernels as the split
//! pipeline, recording the same [`TimelineEvent`]s (pid = this process) so that
//! [`crate::report`] measures every mode alike. They take jobs ([`kernels::job::Job`]), so
//! built-in circuits and Filecoin requests go through the same code, and every synthesis goes
//! through the [`Synthesizer`](crate::synthesis::Synthesizer) they are given.
//!
//! - [`run_monolithic`]: synthesize a batch of partitions in parallel on the rayon pool, then
//!   prove the batch, repeat (what stock bellperson does; batch 1 is "ours one at a time").
//!   Nothing overlaps.
//! - [`InProcess`] (started by [`with_inprocess`]): the in-process pipeline, what cuzk does:
//!   synthesis threads and a proving thread in one process, overlapping through a bounded
//!   channel. It is started once and serves jobs submitted while it runs, so a bench can drive it
//!   with any number of clients and measure several client concurrencies on one start; its
//!   prover can be paused while jobs are synthesized, for the prove-only capacity on the same
//!   start. [`run_inprocess`] is the one-shot form (every job submitted at once).
//! - [`run_synth_only`]: synthesis capacity: synthesize with the GPU idle, prove nothing.
//! - [`run_prove_only`]: proving capacity: prove partitions synthesized beforehand (not timed).
//!
//! Job `i` of a run is `jobs[i]`, with job id `i` in the events ([`InProcess`] numbers the jobs
//! it is given from 0 in submission order); each [`ProvedCircuit`] says which job and partition
//! it proves, so the caller can verify it against `jobs[job].public_inputs(partition)`. Nothing
//! is verified here. The randomness `r`, `s` of every proof is drawn from the thread RNG.
//!
//! What the events mean in these modes (there is no ring): `SLOT_PUBLISH` is when a synthesized
//! partition is ready for the prover and `GPU_CLAIM` when the prover takes it into a batch, so
//! the "ring wait" is the time a finished partition waits for the prover (for the rest of its
//! batch in monolithic mode, in the channel in the in-process pipeline). Every event has slot
//! [`NO_SLOT`].
//!
//! ```no_run
//! use kernels::circuits::CircuitSpec;
//! use splitprover_bench::local::{builtin_jobs, run_monolithic};
//! use splitprover_bench::report::{render_table, BenchRow, TimelineStats};
//! use splitprover_bench::synthesis::Synthesizer;
//!
//! # fn demo(backend: &dyn kernels::Backend) -> Result<(), Box<dyn std::error::Error>> {
//! let spec: CircuitSpec = "sha-chain:38".parse()?;
//! let jobs = builtin_jobs(spec, 20, 0)?;
//! let synthesis = Synthesizer::full();
//! let run = run_monolithic(backend, &synthesis, &jobs, 10, &|done| eprintln!("{done} proofs"))?;
//! let stats = TimelineStats::from_timeline(&run.timeline);
//! print!("{}", render_table(&[BenchRow::from_stats("batch 10", "monolithic", &stats)]));
//! # Ok(()) }
//! ```

use std::sync::Arc;

use kernels::circuits::{AnyCircuit, CircuitSpec};
use kernels::job::{BuiltinJob, BuiltinRequest, Job};
use kernels::synth::CircuitShape;
use kernels::Proof;
use shm_protocol::control::{EventKind, TimelineEvent};

use crate::timeline::{Timeline, NO_SLOT};

mod capacity;
mod inprocess;
mod monolithic;
mod pin;
mod steps;

pub use capacity::{run_prove_only, run_synth_only};
pub use inprocess::{
    run_inprocess, with_inprocess, InProcess, InProcessHandle, InProcessOptions, InProcessOutcome,
};
pub use monolithic::run_monolithic;

/// A failed local bench run. [`Error::kind`] says what went wrong.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct Error {
    #[from]
    kind: ErrorKind,
}

impl Error {
    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }
}

/// The kinds of [`Error`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A parameter is out of range (a batch of 0, no synthesis thread, ...).
    #[error("invalid bench parameter `{what}`: {reason}")]
    InvalidParameter {
        /// The parameter.
        what: &'static str,
        /// Why it is refused.
        reason: String,
    },
    /// The circuit could not be counted or synthesized.
    #[error("synthesis of job {job_id} failed: {source}")]
    Synthesis {
        /// The job (`u64::MAX` for the counting pass before any job).
        job_id: u64,
        /// The kernels error.
        source: kernels::Error,
    },
    /// The backend failed to prove a batch.
    #[error("proving a batch of {batch} (first job {first_job}) failed: {source}")]
    Prove {
        /// First job of the batch.
        first_job: u64,
        /// Batch size.
        batch: usize,
        /// The kernels error.
        source: kernels::Error,
    },
    /// A job shared a backend call with the failed first job of its batch.
    #[error("job {job_id} was in a batch that failed: {reason}")]
    InFailedBatch {
        /// The job.
        job_id: u64,
        /// The batch's error.
        reason: String,
    },
    /// The in-process pipeline stopped before the job was proved.
    #[error("the in-process pipeline stopped before job {job_id} was proved")]
    Stopped {
        /// The job.
        job_id: u64,
    },
    /// A synthesis or proving thread panicked (a bug: both report errors as values).
    #[error("a synthesis thread panicked")]
    WorkerPanicked,
}

/// One proof and what it proves.
#[derive(Clone, Debug)]
pub struct ProvedCircuit {
    /// Job id in the events.
    pub job_id: u64,
    /// The index of the job proved in the run's `jobs` (the job id, except for
    /// [`run_prove_only`], which proves the same few partitions again and again).
    pub job: usize,
    /// The partition proved.
    pub partition: u32,
    /// The proof.
    pub proof: Proof,
}

/// What a local run produced.
#[derive(Clone, Debug, Default)]
pub struct LocalRun {
    /// Every event of the run.
    pub timeline: Timeline,
    /// The proofs in (job, partition) order (empty for synthesis-only runs).
    pub proofs: Vec<ProvedCircuit>,
}

/// `n` one-partition jobs of a built-in circuit, job `i` with the witness of seed
/// `first_seed + i`.
pub fn builtin_jobs(
    spec: CircuitSpec,
    n: usize,
    first_seed: u64,
) -> Result<Vec<Arc<dyn Job>>, Error> {
    (0..n as u64)
        .map(|i| {
            let request = BuiltinRequest {
                seed: first_seed.wrapping_add(i),
                partitions: 1,
            };
            BuiltinJob::new(spec, request)
                .map(|j| Arc::new(j) as Arc<dyn Job>)
                .map_err(|source| ErrorKind::Synthesis { job_id: i, source }.into())
        })
        .collect()
}

fn invalid(what: &'static str, reason: &str) -> Error {
    ErrorKind::InvalidParameter {
        what,
        reason: reason.to_string(),
    }
    .into()
}

fn at_least_one(what: &'static str, v: usize) -> Result<(), Error> {
    if v == 0 {
        Err(invalid(what, "must be at least 1"))
    } else {
        Ok(())
    }
}

fn event(kind: EventKind, job_id: u64, partition: u32) -> TimelineEvent {
    TimelineEvent::now(kind, job_id, partition, NO_SLOT)
}

fn shape_of(circuit: &AnyCircuit) -> Result<CircuitShape, Error> {
    circuit.shape().map_err(|source| {
        ErrorKind::Synthesis {
            job_id: u64::MAX,
            source,
        }
        .into()
    })
}

/// The shape of the jobs' one circuit; `None` for no jobs. Jobs of several circuits are refused
/// (one backend proves one circuit).
fn common_shape(jobs: &[Arc<dyn Job>]) -> Result<Option<CircuitShape>, Error> {
    let Some(first) = jobs.first() else {
        return Ok(None);
    };
    let circuit = first.circuit();
    if let Some(other) = jobs.iter().find(|j| j.circuit() != circuit) {
        return Err(invalid(
            "jobs",
            &format!(
                "a run proves one circuit: `{circuit}` and `{}` given",
                other.circuit()
            ),
        ));
    }
    shape_of(&circuit).map(Some)
}

/// Every (job index, partition) of `jobs`, in order.
fn work_items(jobs: &[Arc<dyn Job>]) -> Vec<(usize, usize)> {
    jobs.iter()
        .enumerate()
        .flat_map(|(i, j)| (0..j.partitions()).map(move |k| (i, k)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::TimelineStats;
    use crate::synthesis::Synthesizer;
    use kernels::srs::SrsImage;
    use kernels::CpuBackend;
    use launcher::pinning::CpuList;
    use std::cell::RefCell;
    use std::sync::OnceLock;
    use std::thread;
    use std::time::{Duration, Instant};

    const SPEC: &str = "sha-chain:1";

    fn spec() -> CircuitSpec {
        SPEC.parse().unwrap()
    }

    fn jobs(n: usize) -> Vec<Arc<dyn Job>> {
        builtin_jobs(spec(), n, 0).unwrap()
    }

    /// One backend for all tests of this module (parameter generation is the slow part).
    fn backend() -> &'static CpuBackend {
        static B: OnceLock<CpuBackend> = OnceLock::new();
        B.get_or_init(|| {
            let spec = spec();
            let params =
                kernels::paramgen::generate_parameters_seeded(spec.circuit(None), 11, &|_| {})
                    .unwrap();
            CpuBackend::new(SrsImage::from_parameters(&params, spec.circuit_id()).unwrap()).unwrap()
        })
    }

    fn verify_all(run: &LocalRun, jobs: &[Arc<dyn Job>]) {
        for p in &run.proofs {
            let inputs = jobs[p.job].public_inputs(p.partition as usize).unwrap();
            assert!(
                backend().verify(&p.proof, &inputs).unwrap(),
                "job {}",
                p.job_id
            );
        }
    }

    /// Every job has the full path, in order, from one pid.
    fn assert_complete(t: &Timeline, n: usize) {
        use EventKind::*;
        let pid = std::process::id();
        for job in 0..n as u64 {
            let kinds: Vec<EventKind> = t
                .events()
                .iter()
                .filter(|e| e.job_id == job)
                .map(|e| e.kind)
                .collect();
            assert_eq!(
                kinds,
                [
                    SynthStart,
                    SynthEnd,
                    SlotPublish,
                    GpuClaim,
                    GpuStart,
                    GpuEnd,
                    ProofDone
                ],
                "job {job}"
            );
        }
        assert!(t.events().iter().all(|e| e.pid == pid && e.slot == NO_SLOT));
    }

    #[test]
    fn monolithic_run_is_complete_and_verifies() {
        let calls = RefCell::new(Vec::new());
        let jobs = jobs(3);
        let run = run_monolithic(backend(), &Synthesizer::full(), &jobs, 2, &|d| {
            calls.borrow_mut().push(d)
        })
        .unwrap();
        assert_eq!(*calls.borrow(), [2, 3]);
        assert_eq!(
            run.proofs.iter().map(|p| p.job_id).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert_complete(&run.timeline, 3);
        verify_all(&run, &jobs);
        let s = TimelineStats::from_timeline(&run.timeline);
        assert_eq!((s.proofs, s.syntheses, s.gpu_batches), (3, 3, 2));
        assert_eq!(s.mean_batch, Some(1.5));
        assert!(s.wall_s > 0.0 && s.mean_gpu_s.unwrap() > 0.0 && s.mean_synth_s.unwrap() > 0.0);
        // Nothing overlaps: the second batch synthesizes after the first is proved.
        let iv = run.timeline.intervals();
        let later_synth = iv.synth.iter().find(|sp| sp.job_id == 2).unwrap();
        assert!(later_synth.start_ns >= iv.batches[0].end_ns);
    }

    #[test]
    fn multi_partition_jobs_are_proved_partition_by_partition() {
        let spec: CircuitSpec = "pubinputs:2".parse().unwrap();
        let params =
            kernels::paramgen::generate_parameters_seeded(spec.circuit(None), 5, &|_| {}).unwrap();
        let backend =
            CpuBackend::new(SrsImage::from_parameters(&params, spec.circuit_id()).unwrap())
                .unwrap();
        let request = BuiltinRequest {
            seed: 40,
            partitions: 3,
        };
        let job: Arc<dyn Job> = Arc::new(BuiltinJob::new(spec, request).unwrap());
        let jobs = vec![job.clone(), job];
        let check = |run: &LocalRun| {
            let got: Vec<(usize, u32)> = run.proofs.iter().map(|p| (p.job, p.partition)).collect();
            assert_eq!(got, [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]);
            for p in &run.proofs {
                let inputs = jobs[p.job].public_inputs(p.partition as usize).unwrap();
                assert!(backend.verify(&p.proof, &inputs).unwrap());
            }
            // Proofs of other partitions do not verify against these inputs.
            let wrong = jobs[0].public_inputs(1).unwrap();
            assert!(!backend.verify(&run.proofs[0].proof, &wrong).unwrap());
            assert_eq!(TimelineStats::from_timeline(&run.timeline).proofs, 6);
        };
        check(&run_monolithic(&backend, &Synthesizer::full(), &jobs, 1, &|_| {}).unwrap());
        let opts = InProcessOptions {
            synth_threads: 2,
            max_batch: 2,
            queue_depth: 1,
            cpus: None,
        };
        check(&run_inprocess(&backend, &Synthesizer::full(), &jobs, &opts, &|_| {}).unwrap());
    }

    #[test]
    fn inprocess_run_is_complete_and_verifies() {
        let opts = InProcessOptions {
            synth_threads: 2,
            max_batch: 2,
            queue_depth: 1,
            cpus: Some(CpuList::allowed().unwrap()),
        };
        let last = RefCell::new(0);
        let jobs = jobs(3);
        let run = run_inprocess(backend(), &Synthesizer::full(), &jobs, &opts, &|d| {
            *last.borrow_mut() = d
        })
        .unwrap();
        assert_eq!(*last.borrow(), 3);
        assert_eq!(
            run.proofs.iter().map(|p| p.job_id).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert_complete(&run.timeline, 3);
        verify_all(&run, &jobs);
        let s = TimelineStats::from_timeline(&run.timeline);
        assert_eq!((s.proofs, s.syntheses), (3, 3));
        assert!(s.mean_ring_wait_s.is_some());
        assert!(s.gpu_batches >= 2 && s.gpu_batches <= 3);
    }

    #[test]
    fn a_started_pipeline_serves_jobs_while_it_runs_and_pauses_its_prover() {
        let opts = InProcessOptions {
            synth_threads: 2,
            max_batch: 1,
            queue_depth: 1,
            cpus: None,
        };
        let jobs = jobs(4);
        let circuit = jobs[0].circuit();
        with_inprocess(backend(), &Synthesizer::full(), circuit, &opts, |p| {
            // One client, one job at a time.
            let o = p.submit(jobs[0].clone()).unwrap().wait().unwrap();
            assert_eq!((o.job_id, o.proofs.len()), (0, 1));
            assert!(o.elapsed > Duration::ZERO);
            assert_eq!(p.take_timeline().len(), 7);
            // Paused: three jobs are synthesized and held, none proved.
            p.pause_prover();
            let handles: Vec<_> = jobs[1..]
                .iter()
                .map(|j| p.submit(j.clone()).unwrap())
                .collect();
            let deadline = Instant::now() + Duration::from_secs(120);
            while p.held() < 3 {
                assert!(Instant::now() < deadline, "held {}", p.held());
                thread::sleep(Duration::from_millis(5));
            }
            let before = Timeline::from_events(p.take_timeline());
            assert_eq!(TimelineStats::from_timeline(&before).proofs, 0);
            assert_eq!(TimelineStats::from_timeline(&before).syntheses, 3);
            p.resume_prover();
            let ids: Vec<u64> = handles
                .into_iter()
                .map(|h| h.wait().unwrap().job_id)
                .collect();
            assert_eq!(ids, [1, 2, 3]);
            assert_eq!(p.held(), 0);
            let after = Timeline::from_events(p.take_timeline());
            let s = TimelineStats::from_timeline(&after);
            assert_eq!((s.proofs, s.syntheses, s.gpu_batches), (3, 0, 3));
            // Another circuit's job is refused.
            let other = builtin_jobs("pubinputs:1".parse().unwrap(), 1, 0).unwrap();
            let e = p.submit(other[0].clone()).err().unwrap();
            assert!(e.to_string().contains("proves `sha-chain:1`"), "{e}");
            assert_eq!(p.failures(), 0);
        })
        .unwrap();
    }

    #[test]
    fn synth_only_and_prove_only_capacities() {
        let done = RefCell::new(0);
        let run = run_synth_only(&Synthesizer::full(), &jobs(2), 2, None, &|d| {
            *done.borrow_mut() = d
        })
        .unwrap();
        assert_eq!(*done.borrow(), 2);
        // Confined to the synthesis cpus (here: all this process may use), the same work.
        let all = CpuList::allowed().unwrap();
        let pinned =
            run_synth_only(&Synthesizer::full(), &jobs(2), 2, Some(&all), &|_| {}).unwrap();
        assert_eq!(TimelineStats::from_timeline(&pinned.timeline).syntheses, 2);
        assert_eq!(CpuList::allowed().unwrap(), all);
        assert!(run.proofs.is_empty());
        let s = TimelineStats::from_timeline(&run.timeline);
        assert_eq!((s.syntheses, s.proofs, s.gpu_batches), (2, 0, 0));
        assert!(s.syntheses_per_s.unwrap() > 0.0);

        let jobs = jobs(3);
        let run = run_prove_only(backend(), &Synthesizer::full(), &jobs, 3, 2, &|_| {}).unwrap();
        assert_eq!(
            run.proofs
                .iter()
                .map(|p| (p.job_id, p.job))
                .collect::<Vec<_>>(),
            [(0, 0), (1, 1), (2, 0)]
        );
        verify_all(&run, &jobs);
        let s = TimelineStats::from_timeline(&run.timeline);
        assert_eq!((s.proofs, s.syntheses, s.gpu_batches), (3, 0, 2));
    }

    #[test]
    fn bad_parameters_are_errors() {
        let err =
            run_monolithic(backend(), &Synthesizer::full(), &jobs(1), 0, &|_| {}).unwrap_err();
        assert!(
            matches!(
                err.kind(),
                ErrorKind::InvalidParameter { what: "batch", .. }
            ),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            "invalid bench parameter `batch`: must be at least 1"
        );
        let opts = InProcessOptions {
            synth_threads: 0,
            ..Default::default()
        };
        assert!(run_inprocess(backend(), &Synthesizer::full(), &jobs(1), &opts, &|_| {}).is_err());
        assert!(run_synth_only(&Synthesizer::full(), &jobs(1), 0, None, &|_| {}).is_err());
        // The synthesis cpus are taken as given: an empty list is refused before any work.
        let err = run_synth_only(
            &Synthesizer::full(),
            &jobs(1),
            1,
            Some(&CpuList::new()),
            &|_| {},
        )
        .unwrap_err();
        assert!(err.to_string().contains("cannot pin"), "{err}");
        // No jobs is an empty run, not an error.
        assert!(
            run_monolithic(backend(), &Synthesizer::full(), &[], 1, &|_| {})
                .unwrap()
                .timeline
                .is_empty()
        );
        // Jobs of two circuits are refused.
        let mut mixed = jobs(1);
        mixed.extend(builtin_jobs("pubinputs:1".parse().unwrap(), 1, 0).unwrap());
        let err = run_monolithic(backend(), &Synthesizer::full(), &mixed, 1, &|_| {}).unwrap_err();
        assert!(err.to_string().contains("one circuit"), "{err}");
    }

    #[test]
    fn a_prover_failure_fails_the_jobs() {
        // A backend for another circuit refuses these circuits' shape.
        let other: CircuitSpec = "pubinputs:1".parse().unwrap();
        let params =
            kernels::paramgen::generate_parameters_seeded(other.circuit(None), 3, &|_| {}).unwrap();
        let wrong =
            CpuBackend::new(SrsImage::from_parameters(&params, other.circuit_id()).unwrap())
                .unwrap();
        let opts = InProcessOptions {
            synth_threads: 2,
            max_batch: 1,
            queue_depth: 1,
            cpus: None,
        };
        let err =
            run_inprocess(&wrong, &Synthesizer::full(), &jobs(4), &opts, &|_| {}).unwrap_err();
        assert!(
            matches!(
                err.kind(),
                ErrorKind::Prove {
                    first_job: 0,
                    batch: 1,
                    ..
                }
            ),
            "{err}"
        );
        let err = run_monolithic(&wrong, &Synthesizer::full(), &jobs(2), 2, &|_| {}).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("proving a batch of 2 (first job 0) failed"),
            "{err}"
        );
    }
}
