//! The in-process pipeline ([`InProcess`], [`with_inprocess`], [`run_inprocess`]): its
//! options, the jobs it serves, and its synthesis threads and proving thread.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use kernels::circuits::AnyCircuit;
use kernels::job::Job;
use kernels::synth::{CircuitShape, OwnedAssignment};
use kernels::{Backend, Proof};
use launcher::pinning::CpuList;
use shm_protocol::control::TimelineEvent;

use super::pin::{pin_or_log, RayonPin};
use super::steps::{prove, synth_one};
use super::{
    at_least_one, common_shape, invalid, shape_of, Error, ErrorKind, LocalRun, ProvedCircuit,
};
use crate::sync::lock;
use crate::synthesis::Synthesizer;
use crate::timeline::Timeline;

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
