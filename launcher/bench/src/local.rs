//! The bench modes that run inside this process, on the same jobs and kernels as the split
//! pipeline, recording the same [`TimelineEvent`]s (pid = this process) so that
//! [`crate::report`] measures every mode alike. They take jobs ([`kernels::job::Job`]), so
//! built-in circuits and Filecoin requests go through the same code, and every synthesis goes
//! through the [`Synthesizer`] they are given.
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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bellperson::SynthesisError;
use blstrs::Scalar;
use ff::Field;
use kernels::circuits::{AnyCircuit, CircuitSpec};
use kernels::job::{BuiltinJob, BuiltinRequest, Job};
use kernels::synth::{
    AssignmentSink, CircuitShape, DensityKind, Evaluations, OwnedAssignment, VecSink,
};
use kernels::{Backend, Proof};
use launcher::pinning::CpuList;
use rayon::prelude::*;
use shm_protocol::control::{EventKind, TimelineEvent};

use crate::sync::lock;
use crate::synthesis::Synthesizer;
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

/// Knobs of the in-process pipeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InProcessOptions {
    /// Threads synthesizing concurrently (one partition each).
    pub synth_threads: usize,
    /// Most partitions proved in one backend call; the prover takes what is ready, up to this,
    /// and never waits to fill a batch.
    pub max_batch: usize,
    /// Synthesized partitions that may wait in the channel; a synthesis thread with a finished
    /// partition blocks while it is full (backpressure, as a full ring holds synthesis back).
    pub queue_depth: usize,
    /// The cpus of the whole pipeline: its synthesis threads, its proving thread and the rayon
    /// pool the backend uses are restricted to them for the pipeline's lifetime (the rayon pool
    /// gets the affinity it had back at the end). `None`: as this process runs.
    pub cpus: Option<CpuList>,
}

impl Default for InProcessOptions {
    fn default() -> Self {
        InProcessOptions {
            synth_threads: 2,
            max_batch: 1,
            queue_depth: 2,
            cpus: None,
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

/// A synthesized partition with the events recorded so far.
struct Synthesized {
    assignment: OwnedAssignment,
    events: Vec<TimelineEvent>,
}

/// Synthesizes partition `k` of `job` (job id `job_id` in the events) through `synthesis` into
/// Vecs reserved up front for `shape`, as a slot would be; records `SYNTH_START`, `WITNESS_END` (the
/// pre-compiled synthesis), `SYNTH_END` and `SLOT_PUBLISH`, as synth-proc does.
fn synth_one(
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
fn prove(
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

/// Monolithic mode: synthesize `batch` partitions of `jobs` (in job, partition order) in
/// parallel on the rayon pool, then prove them in one backend call; repeat until every
/// partition is proved (the last batch may be smaller). Batch 1 proves one partition at a time,
/// synthesis then proof. `progress` is called on this thread with the number of proofs done
/// after each batch.
pub fn run_monolithic(
    backend: &dyn Backend,
    synthesis: &Synthesizer,
    jobs: &[Arc<dyn Job>],
    batch: usize,
    progress: &dyn Fn(usize),
) -> Result<LocalRun, Error> {
    at_least_one("batch", batch)?;
    let Some(shape) = common_shape(jobs)? else {
        return Ok(LocalRun::default());
    };
    let mut run = LocalRun::default();
    let mut events = Vec::new();
    for chunk in work_items(jobs).chunks(batch) {
        let ready: Vec<Synthesized> = chunk
            .par_iter()
            .map(|&(j, k)| synth_one(synthesis, &*jobs[j], shape, j as u64, k))
            .collect::<Result<_, _>>()?;
        for r in &ready {
            events.extend_from_slice(&r.events);
        }
        let members: Vec<_> = chunk
            .iter()
            .zip(&ready)
            .map(|(&(j, k), r)| (j as u64, k as u32, &r.assignment))
            .collect();
        let proofs = prove(backend, &members, &mut events)?;
        run.proofs.extend(
            chunk
                .iter()
                .zip(proofs)
                .map(|(&(j, k), proof)| ProvedCircuit {
                    job_id: j as u64,
                    job: j,
                    partition: k as u32,
                    proof,
                }),
        );
        progress(run.proofs.len());
    }
    run.timeline = Timeline::from_events(events);
    Ok(run)
}

/// One-shot in-process pipeline: starts [`InProcess`] with `opts`, submits every job at once,
/// waits for them in order and stops it. The first failed job's error is the run's. `progress`
/// is called on this thread with the number of jobs done.
pub fn run_inprocess(
    backend: &dyn Backend,
    synthesis: &Synthesizer,
    jobs: &[Arc<dyn Job>],
    opts: &InProcessOptions,
    progress: &dyn Fn(usize),
) -> Result<LocalRun, Error> {
    at_least_one("synth_threads", opts.synth_threads)?;
    let Some(first) = jobs.first() else {
        return Ok(LocalRun::default());
    };
    common_shape(jobs)?;
    let circuit = first.circuit();
    let run =
        with_inprocess(backend, synthesis, circuit, opts, |pipeline| {
            let handles: Vec<InProcessHandle> = jobs
                .iter()
                .map(|j| pipeline.submit(j.clone()))
                .collect::<Result<_, _>>()?;
            let mut run = LocalRun::default();
            let mut first_error = None;
            for (i, h) in handles.into_iter().enumerate() {
                match h.wait() {
                    Ok(o) => {
                        run.proofs
                            .extend(o.proofs.into_iter().enumerate().map(|(k, proof)| {
                                ProvedCircuit {
                                    job_id: o.job_id,
                                    job: i,
                                    partition: k as u32,
                                    proof,
                                }
                            }))
                    }
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
                progress(i + 1);
            }
            if let Some(e) = first_error {
                return Err(e);
            }
            run.timeline = Timeline::from_events(pipeline.take_timeline());
            Ok(run)
        })??;
    Ok(run)
}

/// What a job of the in-process pipeline produced.
#[derive(Debug)]
pub struct InProcessOutcome {
    /// Its id (submission order from 0).
    pub job_id: u64,
    /// The proof of every partition, in order.
    pub proofs: Vec<Proof>,
    /// From submission to the last partition's proof.
    pub elapsed: Duration,
}

/// A job submitted to the in-process pipeline.
pub struct InProcessHandle {
    /// Its id.
    pub id: u64,
    rx: mpsc::Receiver<Result<InProcessOutcome, Error>>,
}

impl InProcessHandle {
    /// Waits for the outcome; [`ErrorKind::Stopped`] if the pipeline stopped first.
    pub fn wait(self) -> Result<InProcessOutcome, Error> {
        self.rx
            .recv()
            .unwrap_or_else(|_| Err(ErrorKind::Stopped { job_id: self.id }.into()))
    }
}

/// A job in the pipeline: what is left to prove and who waits for it.
struct Entry {
    id: u64,
    job: Arc<dyn Job>,
    submitted: Instant,
    failed: AtomicBool,
    state: Mutex<EntryState>,
}

struct EntryState {
    proofs: Vec<Option<Proof>>,
    left: usize,
    tx: Option<mpsc::Sender<Result<InProcessOutcome, Error>>>,
}

impl Entry {
    fn complete(&self, k: usize, proof: Proof) {
        let mut st = lock(&self.state);
        if let Some(slot) = st.proofs.get_mut(k) {
            if slot.replace(proof).is_none() {
                st.left -= 1;
            }
        }
        if st.left == 0 {
            if let Some(tx) = st.tx.take() {
                let proofs = st.proofs.iter_mut().filter_map(Option::take).collect();
                let _ = tx.send(Ok(InProcessOutcome {
                    job_id: self.id,
                    proofs,
                    elapsed: self.submitted.elapsed(),
                }));
            }
        }
    }

    fn fail(&self, e: Error) {
        // Release: the workers' Acquire load of the flag skips the job's other partitions.
        self.failed.store(true, Ordering::Release);
        if let Some(tx) = lock(&self.state).tx.take() {
            let _ = tx.send(Err(e));
        }
    }
}

/// A partition waiting for a synthesis thread.
struct Task {
    entry: Arc<Entry>,
    k: usize,
}

/// A synthesized partition on its way to the prover.
struct Ready {
    entry: Arc<Entry>,
    k: usize,
    assignment: OwnedAssignment,
}

struct Queue {
    tasks: VecDeque<Task>,
    stop: bool,
}

/// What the pipeline's threads share.
struct Shared {
    synthesis: Synthesizer,
    circuit: AnyCircuit,
    shape: CircuitShape,
    max_batch: usize,
    queue: Mutex<Queue>,
    work: Condvar,
    paused: AtomicBool,
    held: AtomicUsize,
    failures: AtomicUsize,
    next_id: AtomicU64,
    events: Mutex<Vec<TimelineEvent>>,
}

impl Shared {
    fn stop(&self) {
        lock(&self.queue).stop = true;
        self.work.notify_all();
    }

    fn record(&self, events: impl IntoIterator<Item = TimelineEvent>) {
        lock(&self.events).extend(events);
    }
}

struct StopOnDrop<'a>(&'a Shared);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// The in-process pipeline while it runs (see [`with_inprocess`]): jobs go in with
/// [`InProcess::submit`], partitions are synthesized by its synthesis threads and proved by its
/// proving thread as they come, like the split pipeline but in one process, sharing its cores.
pub struct InProcess<'a> {
    shared: &'a Shared,
}

impl InProcess<'_> {
    /// Queues every partition of `job` (after the partitions queued before). Errors for a job
    /// of another circuit than the pipeline's.
    pub fn submit(&self, job: Arc<dyn Job>) -> Result<InProcessHandle, Error> {
        if job.circuit() != self.shared.circuit {
            return Err(invalid(
                "job",
                &format!(
                    "the in-process pipeline proves `{}`, not `{}`",
                    self.shared.circuit,
                    job.circuit()
                ),
            ));
        }
        let partitions = job.partitions();
        at_least_one("partitions", partitions)?;
        // Relaxed: a counter; each value is taken once.
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        let entry = Arc::new(Entry {
            id,
            job,
            submitted: Instant::now(),
            failed: AtomicBool::new(false),
            state: Mutex::new(EntryState {
                proofs: (0..partitions).map(|_| None).collect(),
                left: partitions,
                tx: Some(tx),
            }),
        });
        {
            let mut q = lock(&self.shared.queue);
            if q.stop {
                return Err(ErrorKind::Stopped { job_id: id }.into());
            }
            q.tasks.extend((0..partitions).map(|k| Task {
                entry: entry.clone(),
                k,
            }));
        }
        self.shared.work.notify_all();
        Ok(InProcessHandle { id, rx })
    }

    /// Takes the events recorded since the last call.
    pub fn take_timeline(&self) -> Vec<TimelineEvent> {
        std::mem::take(&mut *lock(&self.shared.events))
    }

    /// Stops proving: partitions synthesized from now on are held, unproved, until
    /// [`InProcess::resume_prover`] (what the prove-only capacity measures from). A batch being
    /// proved when this is called finishes.
    pub fn pause_prover(&self) {
        // Release: pairs with the prover's Acquire load after each receive.
        self.shared.paused.store(true, Ordering::Release);
    }

    /// Proves again, the held partitions first.
    pub fn resume_prover(&self) {
        // Release: pairs with the prover's Acquire load.
        self.shared.paused.store(false, Ordering::Release);
    }

    /// Synthesized partitions held by the paused prover.
    pub fn held(&self) -> usize {
        // Acquire: pairs with the prover's Release store after it holds one more.
        self.shared.held.load(Ordering::Acquire)
    }

    /// Jobs failed so far (their waiters got the error).
    pub fn failures(&self) -> usize {
        // Relaxed: a statistic.
        self.shared.failures.load(Ordering::Relaxed)
    }
}

/// Starts the in-process pipeline for `circuit` on `backend` with `opts`, synthesizing through
/// `synthesis`, runs `f` with it on
/// this thread, then stops it (jobs still queued end with [`ErrorKind::Stopped`]) and returns
/// `f`'s value. Errors for bad options, a thread that cannot be started or pinned, or one that
/// panicked.
pub fn with_inprocess<R>(
    backend: &dyn Backend,
    synthesis: &Synthesizer,
    circuit: AnyCircuit,
    opts: &InProcessOptions,
    f: impl FnOnce(&InProcess<'_>) -> R,
) -> Result<R, Error> {
    at_least_one("synth_threads", opts.synth_threads)?;
    at_least_one("max_batch", opts.max_batch)?;
    at_least_one("queue_depth", opts.queue_depth)?;
    let shape = shape_of(&circuit)?;
    let _pinned = RayonPin::to(opts.cpus.as_ref())?;
    let shared = Shared {
        synthesis: synthesis.clone(),
        circuit,
        shape,
        max_batch: opts.max_batch,
        queue: Mutex::new(Queue {
            tasks: VecDeque::new(),
            stop: false,
        }),
        work: Condvar::new(),
        paused: AtomicBool::new(false),
        held: AtomicUsize::new(0),
        failures: AtomicUsize::new(0),
        next_id: AtomicU64::new(0),
        events: Mutex::new(Vec::new()),
    };
    let (tx, rx) = mpsc::sync_channel::<Ready>(opts.queue_depth);
    let result = thread::scope(|scope| {
        let shared = &shared;
        // Stops the threads however this closure ends (a panic of `f` included), so the scope
        // never waits for threads that wait for work.
        let _stop = StopOnDrop(shared);
        let cpus = opts.cpus.as_ref();
        let mut threads = Vec::with_capacity(opts.synth_threads + 1);
        let mut spawn_error = None;
        let prover = thread::Builder::new()
            .name("inprocess-prover".into())
            .spawn_scoped(scope, move || {
                pin_or_log(cpus);
                prover_loop(backend, shared, rx);
            });
        match prover {
            Ok(h) => threads.push(h),
            Err(e) => spawn_error = Some(e),
        }
        for i in 0..opts.synth_threads {
            if spawn_error.is_some() {
                break;
            }
            let tx = tx.clone();
            let spawned = thread::Builder::new()
                .name(format!("synth-{i}"))
                .spawn_scoped(scope, move || {
                    pin_or_log(cpus);
                    synth_worker(shared, tx);
                });
            match spawned {
                Ok(h) => threads.push(h),
                Err(e) => spawn_error = Some(e),
            }
        }
        drop(tx);
        let out = match spawn_error {
            None => Ok(f(&InProcess { shared })),
            Some(e) => Err(invalid(
                "synth_threads",
                &format!("cannot spawn a thread: {e}"),
            )),
        };
        shared.stop();
        let panicked = threads
            .into_iter()
            .map(|h| h.join())
            .fold(false, |p, j| p | j.is_err());
        match (out, panicked) {
            (Err(e), _) => Err(e),
            (Ok(_), true) => Err(ErrorKind::WorkerPanicked.into()),
            (Ok(r), false) => Ok(r),
        }
    });
    result
}

/// The global rayon pool pinned to a cpu list until dropped, when it gets back the cpus the
/// process had (however the pinned work ends, a panic included).
struct RayonPin {
    before: Option<CpuList>,
}

impl RayonPin {
    /// Pins the pool to `cpus`; `None` leaves it where it is.
    fn to(cpus: Option<&CpuList>) -> Result<RayonPin, Error> {
        let Some(cpus) = cpus else {
            return Ok(RayonPin { before: None });
        };
        let before = CpuList::allowed().map_err(|e| invalid("cpus", &e.to_string()))?;
        pin_rayon(cpus)?;
        Ok(RayonPin {
            before: Some(before),
        })
    }
}

impl Drop for RayonPin {
    fn drop(&mut self) {
        if let Some(before) = &self.before {
            if let Err(e) = pin_rayon(before) {
                tracing::warn!(error = %e, "cannot give the rayon pool its cpus back");
            }
        }
    }
}

/// Pins every thread of the global rayon pool (the pool the kernels prove on) to `cpus`.
fn pin_rayon(cpus: &CpuList) -> Result<(), Error> {
    let failed = rayon::broadcast(|_| super::pin_current_thread(cpus).err())
        .into_iter()
        .flatten()
        .next();
    match failed {
        Some(e) => Err(invalid("cpus", &format!("cannot pin to `{cpus}`: {e}"))),
        None => Ok(()),
    }
}

fn pin_or_log(cpus: Option<&CpuList>) {
    if let Some(cpus) = cpus {
        if let Err(e) = super::pin_current_thread(cpus) {
            // The rayon pool was pinned to the same set just before, so this cannot fail for a
            // reason the caller could act on; the thread runs where it was.
            tracing::warn!(%cpus, error = %e, "cannot pin an in-process bench thread");
        }
    }
}

fn synth_worker(shared: &Shared, tx: mpsc::SyncSender<Ready>) {
    loop {
        let task = {
            let mut q = lock(&shared.queue);
            loop {
                if q.stop {
                    return;
                }
                if let Some(t) = q.tasks.pop_front() {
                    break t;
                }
                q = shared.work.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        };
        // Acquire: pairs with `Entry::fail`'s Release store.
        if task.entry.failed.load(Ordering::Acquire) {
            continue;
        }
        match synth_one(
            &shared.synthesis,
            &*task.entry.job,
            shared.shape,
            task.entry.id,
            task.k,
        ) {
            Ok(s) => {
                shared.record(s.events);
                let ready = Ready {
                    entry: task.entry,
                    k: task.k,
                    assignment: s.assignment,
                };
                if tx.send(ready).is_err() {
                    return;
                }
            }
            Err(e) => {
                // Relaxed: a statistic.
                shared.failures.fetch_add(1, Ordering::Relaxed);
                task.entry.fail(e);
            }
        }
    }
}

/// Receives synthesized partitions until every synthesis thread is gone and proves what is
/// ready, up to `max_batch` per call; while paused, holds them instead.
fn prover_loop(backend: &dyn Backend, shared: &Shared, rx: mpsc::Receiver<Ready>) {
    let mut held: VecDeque<Ready> = VecDeque::new();
    let hold = |held: &mut VecDeque<Ready>, r: Ready| {
        held.push_back(r);
        // Release: pairs with `InProcess::held`'s Acquire load.
        shared.held.store(held.len(), Ordering::Release);
    };
    loop {
        // Acquire: pairs with pause/resume's Release stores.
        if shared.paused.load(Ordering::Acquire) {
            match rx.recv_timeout(Duration::from_millis(5)) {
                Ok(r) => hold(&mut held, r),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
            continue;
        }
        let first = match held.pop_front() {
            Some(r) => r,
            None => match rx.recv() {
                Ok(r) => r,
                Err(_) => return,
            },
        };
        // A partition that arrives once a pause was asked for is held, never proved; at the
        // front, where it was if it came from there (it did if `held` is not empty).
        // Acquire: as above.
        if shared.paused.load(Ordering::Acquire) {
            held.push_front(first);
            // Release: pairs with `InProcess::held`'s Acquire load.
            shared.held.store(held.len(), Ordering::Release);
            continue;
        }
        let mut batch = vec![first];
        while batch.len() < shared.max_batch {
            match held.pop_front().map(Ok).unwrap_or_else(|| rx.try_recv()) {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        // Release: as in `hold`.
        shared.held.store(held.len(), Ordering::Release);
        let members: Vec<_> = batch
            .iter()
            .map(|r| (r.entry.id, r.k as u32, &r.assignment))
            .collect();
        let mut events = Vec::new();
        let proved = prove(backend, &members, &mut events);
        shared.record(events);
        match proved {
            Ok(proofs) => {
                for (r, proof) in batch.iter().zip(proofs) {
                    r.entry.complete(r.k, proof);
                }
            }
            Err(e) => {
                let reason = e.to_string();
                let mut e = Some(e);
                for r in &batch {
                    // Relaxed: a statistic.
                    shared.failures.fetch_add(1, Ordering::Relaxed);
                    r.entry.fail(e.take().unwrap_or_else(|| {
                        ErrorKind::InFailedBatch {
                            job_id: r.entry.id,
                            reason: reason.clone(),
                        }
                        .into()
                    }));
                }
            }
        }
    }
}

/// Synthesis capacity: `threads` threads synthesize every partition of `jobs` with nothing
/// proving, each partition dropped once done. `progress` is called on this thread with the
/// number of syntheses done. The timeline has `SYNTH_START`/`SYNTH_END` only; measure it with
/// [`crate::report::BenchRow::from_synth_stats`].
pub fn run_synth_only(
    synthesis: &Synthesizer,
    jobs: &[Arc<dyn Job>],
    threads: usize,
    cpus: Option<&CpuList>,
    progress: &dyn Fn(usize),
) -> Result<LocalRun, Error> {
    at_least_one("threads", threads)?;
    let Some(shape) = common_shape(jobs)? else {
        return Ok(LocalRun::default());
    };
    // The synthesis threads and the rayon pool their products run on get the synthesis cpus
    // alone, as synth-proc's workers do: unpinned, a capacity measured on a 16-core host with
    // 10 synthesis cpus counted all 16 (1.6x too high on an H200 host, BENCHMARKS.md).
    let _pinned = RayonPin::to(cpus)?;
    synth_only_pinned(synthesis, jobs, threads, shape, cpus, progress)
}

fn synth_only_pinned(
    synthesis: &Synthesizer,
    jobs: &[Arc<dyn Job>],
    threads: usize,
    shape: CircuitShape,
    cpus: Option<&CpuList>,
    progress: &dyn Fn(usize),
) -> Result<LocalRun, Error> {
    let items = work_items(jobs);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<Result<Vec<TimelineEvent>, Error>>();
    let mut events = Vec::new();
    let result = thread::scope(|scope| {
        let workers: Result<Vec<_>, _> = (0..threads)
            .map(|i| {
                let tx = tx.clone();
                let (next, stop, items) = (&next, &stop, &items);
                thread::Builder::new()
                    .name(format!("synth-{i}"))
                    .spawn_scoped(scope, move || {
                        pin_or_log(cpus);
                        // Acquire: pairs with the Release store of a failure below.
                        while !stop.load(Ordering::Acquire) {
                            // Relaxed: a ticket counter; each value is taken once, no other
                            // memory depends on it.
                            let t = next.fetch_add(1, Ordering::Relaxed);
                            let Some(&(j, k)) = items.get(t) else {
                                break;
                            };
                            let done =
                                synth_one(synthesis, &*jobs[j], shape, j as u64, k).map(|r| {
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
                        // Release: the workers' Acquire load stops them.
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

/// Proving capacity: synthesize the first `batch.min(partitions)` partitions of `jobs` first
/// (not recorded), then make `n` proofs in batches of `batch`, cycling through those partitions
/// (proof `i` has job id `i` in the events and proves pre-synthesized partition
/// `i % batch`). `progress` is called with the number of proofs done after each batch.
pub fn run_prove_only(
    backend: &dyn Backend,
    synthesis: &Synthesizer,
    jobs: &[Arc<dyn Job>],
    n: usize,
    batch: usize,
    progress: &dyn Fn(usize),
) -> Result<LocalRun, Error> {
    at_least_one("batch", batch)?;
    let Some(shape) = common_shape(jobs)? else {
        return Ok(LocalRun::default());
    };
    let items = work_items(jobs);
    let distinct = batch.min(items.len()).max(1);
    let pool: Vec<((usize, usize), Synthesized)> = items[..distinct.min(items.len())]
        .par_iter()
        .map(|&(j, k)| synth_one(synthesis, &*jobs[j], shape, j as u64, k).map(|s| ((j, k), s)))
        .collect::<Result<_, _>>()?;
    let mut run = LocalRun::default();
    let mut events = Vec::new();
    let mut next = 0usize;
    while next < n && !pool.is_empty() {
        let ids: Vec<usize> = (next..next + batch.min(n - next)).collect();
        let members: Vec<_> = ids
            .iter()
            .map(|&i| {
                let ((_, k), s) = &pool[i % pool.len()];
                (i as u64, *k as u32, &s.assignment)
            })
            .collect();
        let proofs = prove(backend, &members, &mut events)?;
        run.proofs.extend(ids.iter().zip(proofs).map(|(&i, proof)| {
            let ((j, k), _) = &pool[i % pool.len()];
            ProvedCircuit {
                job_id: i as u64,
                job: *j,
                partition: *k as u32,
                proof,
            }
        }));
        next += ids.len();
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
