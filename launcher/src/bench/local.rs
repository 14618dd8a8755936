//! The bench modes that run inside this process, on the same circuits and kernels as the split
//! pipeline, recording the same [`TimelineEvent`]s (pid = this process) so that
//! [`crate::report`] measures every mode alike.
//!
//! - [`run_monolithic`]: synthesize a batch of circuits in parallel on the rayon pool, then prove
//!   the batch, repeat (what stock bellperson does). Nothing overlaps.
//! - [`run_inprocess`]: synthesis threads and a proving loop in one process, overlapping through
//!   a bounded channel (what cuzk does).
//! - [`run_synth_only`]: synthesis capacity: synthesize with the GPU idle, prove nothing.
//! - [`run_prove_only`]: proving capacity: prove circuits synthesized beforehand (not timed).
//!
//! Job `i` (for `i` in `0..n`) is partition 0 of job id `i`, synthesized with witness seed `i`
//! (the prove-only mode reuses a few pre-synthesized seeds); each [`ProvedCircuit`] carries its
//! seed so the caller can verify the proof against `spec.public_inputs(seed)`. Nothing is
//! verified here. The randomness `r`, `s` of every proof is drawn from the thread RNG.
//!
//! What the events mean in these modes (there is no ring): `SLOT_PUBLISH` is when a synthesized
//! circuit is ready for the prover and `GPU_CLAIM` when the prover takes it into a batch, so the
//! "ring wait" is the time a finished circuit waits for the prover (for the rest of its batch in
//! monolithic mode, in the channel in the in-process pipeline). Every event has slot
//! [`NO_SLOT`].
//!
//! ```no_run
//! use kernels::circuits::CircuitSpec;
//! use launcher::bench::local::run_monolithic;
//! use launcher::report::{render_table, BenchRow, TimelineStats};
//!
//! # fn demo(backend: &dyn kernels::Backend) -> Result<(), Box<dyn std::error::Error>> {
//! let spec: CircuitSpec = "sha-chain:38".parse()?;
//! let run = run_monolithic(backend, &spec, 20, 10, &|done| eprintln!("{done} proofs"))?;
//! let stats = TimelineStats::from_timeline(&run.timeline);
//! print!("{}", render_table(&[BenchRow::from_stats("batch 10", "monolithic", &stats)]));
//! # Ok(()) }
//! ```

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;

use blstrs::Scalar;
use ff::Field;
use kernels::circuits::CircuitSpec;
use kernels::synth::{CircuitShape, OwnedAssignment, VecSink};
use kernels::{Backend, Proof};
use rayon::prelude::*;
use shm_protocol::control::{EventKind, TimelineEvent};

use crate::timeline::{Timeline, NO_SLOT};

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
    /// A synthesis thread panicked (a bug: synthesis reports errors as values).
    #[error("a synthesis thread panicked")]
    WorkerPanicked,
}

/// One proof and what it proves.
#[derive(Clone, Debug)]
pub struct ProvedCircuit {
    /// Job id (partition 0).
    pub job_id: u64,
    /// Witness seed: the proof's public inputs are `spec.public_inputs(seed)`.
    pub seed: u64,
    /// The proof.
    pub proof: Proof,
}

/// What a local run produced.
#[derive(Clone, Debug, Default)]
pub struct LocalRun {
    /// Every event of the run.
    pub timeline: Timeline,
    /// The proofs in job order (empty for synthesis-only runs).
    pub proofs: Vec<ProvedCircuit>,
}

/// Knobs of the in-process pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InProcessOptions {
    /// Threads synthesizing concurrently (one circuit each).
    pub synth_threads: usize,
    /// Most circuits proved in one backend call; the prover takes what is ready, up to this,
    /// and never waits to fill a batch.
    pub max_batch: usize,
    /// Synthesized circuits that may wait in the channel; a synthesis thread with a finished
    /// circuit blocks while it is full (backpressure).
    pub queue_depth: usize,
}

impl Default for InProcessOptions {
    fn default() -> Self {
        InProcessOptions {
            synth_threads: 2,
            max_batch: 1,
            queue_depth: 2,
        }
    }
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

fn event(kind: EventKind, job_id: u64) -> TimelineEvent {
    TimelineEvent::now(kind, job_id, 0, NO_SLOT)
}

fn shape_of(spec: &CircuitSpec) -> Result<CircuitShape, Error> {
    spec.shape().map_err(|source| {
        ErrorKind::Synthesis {
            job_id: u64::MAX,
            source,
        }
        .into()
    })
}

/// A synthesized circuit on its way to the prover, with the events recorded so far.
struct Ready {
    job_id: u64,
    assignment: OwnedAssignment,
    events: Vec<TimelineEvent>,
}

/// Synthesizes job `job_id` (seed = job id) into Vecs reserved up front for `shape`, as a slot
/// would be; records `SYNTH_START`, `SYNTH_END` and `SLOT_PUBLISH`.
fn synth_one(spec: &CircuitSpec, shape: CircuitShape, job_id: u64) -> Result<Ready, Error> {
    let mut events = vec![event(EventKind::SynthStart, job_id)];
    let assignment = spec
        .synthesize_into(job_id, VecSink::with_limit(shape))
        .map_err(|source| ErrorKind::Synthesis { job_id, source })?
        .finish();
    let end = event(EventKind::SynthEnd, job_id);
    events.push(end);
    events.push(TimelineEvent {
        kind: EventKind::SlotPublish,
        ..end
    });
    Ok(Ready {
        job_id,
        assignment,
        events,
    })
}

/// Proves `batch` in one backend call; records `GPU_CLAIM`, `GPU_START`, `GPU_END` (the same
/// times for every member) and `PROOF_DONE`.
fn prove(
    backend: &dyn Backend,
    batch: &[(u64, u64, &OwnedAssignment)],
    events: &mut Vec<TimelineEvent>,
    proofs: &mut Vec<ProvedCircuit>,
) -> Result<(), Error> {
    let mut rng = rand::thread_rng();
    let r: Vec<Scalar> = batch.iter().map(|_| Scalar::random(&mut rng)).collect();
    let s: Vec<Scalar> = batch.iter().map(|_| Scalar::random(&mut rng)).collect();
    let assignments: Vec<_> = batch.iter().map(|(_, _, a)| a.as_assignment()).collect();
    let stamp = |kind, events: &mut Vec<TimelineEvent>| {
        let e = event(kind, 0);
        events.extend(
            batch
                .iter()
                .map(|&(job_id, _, _)| TimelineEvent { job_id, ..e }),
        );
    };
    stamp(EventKind::GpuClaim, events);
    stamp(EventKind::GpuStart, events);
    let result = backend.prove_batch(&assignments, &r, &s);
    stamp(EventKind::GpuEnd, events);
    let out = result.map_err(|source| ErrorKind::Prove {
        first_job: batch.first().map_or(0, |b| b.0),
        batch: batch.len(),
        source,
    })?;
    if out.len() != batch.len() {
        return Err(ErrorKind::Prove {
            first_job: batch.first().map_or(0, |b| b.0),
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
    proofs.extend(
        batch
            .iter()
            .zip(out)
            .map(|(&(job_id, seed, _), proof)| ProvedCircuit {
                job_id,
                seed,
                proof,
            }),
    );
    Ok(())
}

/// Monolithic mode: synthesize `batch` circuits in parallel on the rayon pool, then prove them
/// in one backend call; repeat until `n` proofs (the last batch may be smaller). `progress` is
/// called on this thread with the number of proofs done after each batch.
pub fn run_monolithic(
    backend: &dyn Backend,
    spec: &CircuitSpec,
    n: usize,
    batch: usize,
    progress: &dyn Fn(usize),
) -> Result<LocalRun, Error> {
    at_least_one("batch", batch)?;
    let shape = shape_of(spec)?;
    let mut run = LocalRun::default();
    let mut events = Vec::new();
    let mut next = 0usize;
    while next < n {
        let jobs = next as u64..(next + batch.min(n - next)) as u64;
        let ready: Vec<Ready> = jobs
            .into_par_iter()
            .map(|job| synth_one(spec, shape, job))
            .collect::<Result<_, _>>()?;
        for r in &ready {
            events.extend_from_slice(&r.events);
        }
        let members: Vec<_> = ready
            .iter()
            .map(|r| (r.job_id, r.job_id, &r.assignment))
            .collect();
        prove(backend, &members, &mut events, &mut run.proofs)?;
        next += ready.len();
        progress(next);
    }
    run.timeline = Timeline::from_events(events);
    Ok(run)
}

/// In-process pipeline: `opts.synth_threads` threads synthesize jobs `0..n` (each takes the next
/// job when it finishes one) and hand them through a channel of `opts.queue_depth` to the
/// proving loop on this thread, which proves whatever is ready, up to `opts.max_batch` per call.
/// `progress` is called on this thread with the number of proofs done after each batch.
///
/// Proving uses the ambient rayon pool, so it competes with the synthesis threads for cores, as
/// it does in a single-process prover.
pub fn run_inprocess(
    backend: &dyn Backend,
    spec: &CircuitSpec,
    n: usize,
    opts: &InProcessOptions,
    progress: &dyn Fn(usize),
) -> Result<LocalRun, Error> {
    at_least_one("synth_threads", opts.synth_threads)?;
    at_least_one("max_batch", opts.max_batch)?;
    at_least_one("queue_depth", opts.queue_depth)?;
    let shape = shape_of(spec)?;
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::sync_channel::<Result<Ready, Error>>(opts.queue_depth);
    let mut run = LocalRun::default();
    let mut events = Vec::new();

    let result = thread::scope(|scope| {
        let mut workers = Vec::with_capacity(opts.synth_threads);
        let mut spawn_error = None;
        for i in 0..opts.synth_threads {
            let tx = tx.clone();
            let (next, stop) = (&next, &stop);
            let spawned = thread::Builder::new()
                .name(format!("synth-{i}"))
                .spawn_scoped(scope, move || synth_worker(spec, shape, n, next, stop, tx));
            match spawned {
                Ok(h) => workers.push(h),
                Err(e) => {
                    spawn_error = Some(invalid(
                        "synth_threads",
                        &format!("cannot spawn a thread: {e}"),
                    ));
                    break;
                }
            }
        }
        drop(tx);
        let proved = match spawn_error {
            None => prove_loop(
                backend,
                rx,
                opts.max_batch,
                &mut events,
                &mut run.proofs,
                progress,
            ),
            Some(e) => {
                drop(rx); // releases workers blocked on a full channel
                Err(e)
            }
        };
        if proved.is_err() {
            // Workers see the flag before their next job; the receiver is gone, so a blocked
            // send fails at once.
            stop.store(true, Ordering::Release); // the flag convention: Release / Acquire
        }
        let panicked = workers
            .into_iter()
            .map(|h| h.join())
            .fold(false, |p, j| p | j.is_err());
        match (proved, panicked) {
            (Err(e), _) => Err(e),
            (Ok(()), true) => Err(ErrorKind::WorkerPanicked.into()),
            (Ok(()), false) => Ok(()),
        }
    });
    result?;
    run.timeline = Timeline::from_events(events);
    Ok(run)
}

fn synth_worker(
    spec: &CircuitSpec,
    shape: CircuitShape,
    n: usize,
    next: &AtomicUsize,
    stop: &AtomicBool,
    tx: mpsc::SyncSender<Result<Ready, Error>>,
) {
    // Relaxed: the flag is a hint to stop early; the channel carries all data.
    while !stop.load(Ordering::Acquire) {
        // Relaxed: a ticket counter; each value is taken once, no other memory depends on it.
        let job = next.fetch_add(1, Ordering::Relaxed);
        if job >= n {
            break;
        }
        let ready = synth_one(spec, shape, job as u64);
        let failed = ready.is_err();
        if tx.send(ready).is_err() || failed {
            break;
        }
    }
}

/// Receives synthesized circuits until every sender is gone; proves what is ready in batches of
/// up to `max_batch`. Consumes the receiver so that, on error, blocked senders are released.
fn prove_loop(
    backend: &dyn Backend,
    rx: mpsc::Receiver<Result<Ready, Error>>,
    max_batch: usize,
    events: &mut Vec<TimelineEvent>,
    proofs: &mut Vec<ProvedCircuit>,
    progress: &dyn Fn(usize),
) -> Result<(), Error> {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first?];
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(r) => batch.push(r?),
                Err(_) => break,
            }
        }
        for r in &batch {
            events.extend_from_slice(&r.events);
        }
        let members: Vec<_> = batch
            .iter()
            .map(|r| (r.job_id, r.job_id, &r.assignment))
            .collect();
        prove(backend, &members, events, proofs)?;
        progress(proofs.len());
    }
    proofs.sort_by_key(|p| p.job_id);
    Ok(())
}

/// Synthesis capacity: `threads` threads synthesize jobs `0..n` with nothing proving, each
/// circuit dropped once done. `progress` is called on this thread with the number of
/// syntheses done. The timeline has `SYNTH_START`/`SYNTH_END` only; measure it with
/// [`crate::report::BenchRow::from_synth_stats`].
pub fn run_synth_only(
    spec: &CircuitSpec,
    n: usize,
    threads: usize,
    progress: &dyn Fn(usize),
) -> Result<LocalRun, Error> {
    at_least_one("threads", threads)?;
    let shape = shape_of(spec)?;
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<Result<Vec<TimelineEvent>, Error>>();
    let mut events = Vec::new();
    let result = thread::scope(|scope| {
        let workers: Result<Vec<_>, _> = (0..threads)
            .map(|i| {
                let tx = tx.clone();
                let (next, stop) = (&next, &stop);
                thread::Builder::new()
                    .name(format!("synth-{i}"))
                    .spawn_scoped(scope, move || {
                        // Relaxed: see `synth_worker`.
                        while !stop.load(Ordering::Acquire) {
                            // Relaxed: a ticket counter, see `synth_worker`.
                            let job = next.fetch_add(1, Ordering::Relaxed);
                            if job >= n {
                                break;
                            }
                            let done = synth_one(spec, shape, job as u64).map(|r| {
                                // Not handed to any prover: keep start and end only.
                                let mut ev = r.events;
                                ev.truncate(2);
                                ev
                            });
                            let failed = done.is_err();
                            if tx.send(done).is_err() || failed {
                                break;
                            }
                        }
                    })
            })
            .collect();
        drop(tx);
        let mut outcome = workers
            .map(|_| ())
            .map_err(|_| invalid("threads", "cannot spawn a synthesis thread"));
        let mut done = 0;
        if outcome.is_ok() {
            for msg in rx.iter() {
                match msg {
                    Ok(ev) => {
                        events.extend(ev);
                        done += 1;
                        progress(done);
                    }
                    Err(e) => {
                        // Relaxed: a hint, see `synth_worker`.
                        stop.store(true, Ordering::Release);
                        outcome = Err(e);
                        break;
                    }
                }
            }
        }
        outcome
    });
    result?;
    Ok(LocalRun {
        timeline: Timeline::from_events(events),
        proofs: Vec::new(),
    })
}

/// Proving capacity: synthesize `batch.min(n)` circuits first (seeds `0..`, not recorded), then
/// prove `n` jobs in batches of `batch`, cycling through those circuits (job `i` uses seed
/// `i % batch`). `progress` is called with the number of proofs done after each batch.
pub fn run_prove_only(
    backend: &dyn Backend,
    spec: &CircuitSpec,
    n: usize,
    batch: usize,
    progress: &dyn Fn(usize),
) -> Result<LocalRun, Error> {
    at_least_one("batch", batch)?;
    let shape = shape_of(spec)?;
    let distinct = batch.min(n);
    let pool: Vec<Ready> = (0..distinct as u64)
        .into_par_iter()
        .map(|seed| synth_one(spec, shape, seed))
        .collect::<Result<_, _>>()?;
    let mut run = LocalRun::default();
    let mut events = Vec::new();
    let mut next = 0usize;
    while next < n {
        let members: Vec<_> = (next..next + batch.min(n - next))
            .map(|job| {
                let r = &pool[job % distinct];
                (job as u64, r.job_id, &r.assignment)
            })
            .collect();
        prove(backend, &members, &mut events, &mut run.proofs)?;
        next += members.len();
        progress(next);
    }
    run.timeline = Timeline::from_events(events);
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::TimelineStats;
    use kernels::srs::SrsImage;
    use kernels::CpuBackend;
    use std::cell::RefCell;
    use std::sync::OnceLock;

    const SPEC: &str = "sha-chain:1";

    fn spec() -> CircuitSpec {
        SPEC.parse().unwrap()
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

    fn verify_all(run: &LocalRun) {
        let spec = spec();
        for p in &run.proofs {
            let inputs = spec.public_inputs(p.seed).unwrap();
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
        let run =
            run_monolithic(backend(), &spec(), 3, 2, &|d| calls.borrow_mut().push(d)).unwrap();
        assert_eq!(*calls.borrow(), [2, 3]);
        assert_eq!(
            run.proofs.iter().map(|p| p.job_id).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert_complete(&run.timeline, 3);
        verify_all(&run);
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
    fn inprocess_run_is_complete_and_verifies() {
        let opts = InProcessOptions {
            synth_threads: 2,
            max_batch: 2,
            queue_depth: 1,
        };
        let last = RefCell::new(0);
        let run = run_inprocess(backend(), &spec(), 3, &opts, &|d| *last.borrow_mut() = d).unwrap();
        assert_eq!(*last.borrow(), 3);
        assert_eq!(
            run.proofs.iter().map(|p| p.job_id).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert_complete(&run.timeline, 3);
        verify_all(&run);
        let s = TimelineStats::from_timeline(&run.timeline);
        assert_eq!((s.proofs, s.syntheses), (3, 3));
        assert!(s.mean_ring_wait_s.is_some());
        assert!(s.gpu_batches >= 2 && s.gpu_batches <= 3);
    }

    #[test]
    fn synth_only_and_prove_only_capacities() {
        let done = RefCell::new(0);
        let run = run_synth_only(&spec(), 2, 2, &|d| *done.borrow_mut() = d).unwrap();
        assert_eq!(*done.borrow(), 2);
        assert!(run.proofs.is_empty());
        let s = TimelineStats::from_timeline(&run.timeline);
        assert_eq!((s.syntheses, s.proofs, s.gpu_batches), (2, 0, 0));
        assert!(s.syntheses_per_s.unwrap() > 0.0);

        let run = run_prove_only(backend(), &spec(), 3, 2, &|_| {}).unwrap();
        assert_eq!(
            run.proofs
                .iter()
                .map(|p| (p.job_id, p.seed))
                .collect::<Vec<_>>(),
            [(0, 0), (1, 1), (2, 0)]
        );
        verify_all(&run);
        let s = TimelineStats::from_timeline(&run.timeline);
        assert_eq!((s.proofs, s.syntheses, s.gpu_batches), (3, 0, 2));
    }

    #[test]
    fn bad_parameters_are_errors() {
        let err = run_monolithic(backend(), &spec(), 1, 0, &|_| {}).unwrap_err();
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
        assert!(run_inprocess(backend(), &spec(), 1, &opts, &|_| {}).is_err());
        assert!(run_synth_only(&spec(), 1, 0, &|_| {}).is_err());
        // n = 0 is an empty run, not an error.
        assert!(run_monolithic(backend(), &spec(), 0, 1, &|_| {})
            .unwrap()
            .timeline
            .is_empty());
    }

    #[test]
    fn a_prover_failure_stops_the_pipeline() {
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
        };
        let err = run_inprocess(&wrong, &spec(), 4, &opts, &|_| {}).unwrap_err();
        assert!(
            matches!(
                err.kind(),
                ErrorKind::Prove {
                    first_job: _,
                    batch: 1,
                    ..
                }
            ),
            "{err}"
        );
        let err = run_monolithic(&wrong, &spec(), 2, 2, &|_| {}).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("proving a batch of 2 (first job 0) failed"),
            "{err}"
        );
    }
}
