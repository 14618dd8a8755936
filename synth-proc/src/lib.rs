//! synth-proc: synthesizes circuits straight into slots of the shared-memory ring.
//!
//! The launcher starts this process pinned to its own cores, with the ring's memfd and a control
//! socket inherited (see `shm_protocol::control`). For every [`SynthRequest`] it receives, one of
//! its synthesis workers (a [`Lane`] of dedicated threads, as many as the configured
//! concurrency; never rayon workers, see [`workers`]) takes a FREE slot — blocking while none is
//! free, which is the pipeline's back-pressure — reserves the arrays the circuit's shape needs,
//! synthesizes through [`SlotSink`] (no intermediate `Vec`, no copy; the pre-compiled products on
//! the process's rayon pool, one thread per core) and publishes the slot READY for a gpu-proc.
//! Each phase is a timeline event: `SYNTH_TAKEN` (a worker took the request), `SYNTH_START`
//! (slot reserved), `WITNESS_END`, `SYNTH_END`. A failed synthesis abandons its slot and
//! reports `SynthFailed`; only that job fails. A synthesis that panics is caught where the worker
//! runs it (`catch_unwind` around each request): unwinding drops its slot writer, which gives the
//! slot back to FREE, `SynthFailed` carries the panic message, and the process keeps serving the
//! other syntheses.
//!
//! With the `fault-injection` feature (tests only) a synthesis panics (`synth-panic`) or blocks
//! forever (`synth-hang`) after taking its slot when `SPLITPROVER_FAULT` names it
//! (`shm_protocol::fault`).
//!
//! Every request names its job's circuit and carries the job's request bytes, inline (built-in
//! circuits) or as a sealed memfd received with the message (`shm_protocol::request`). A job is
//! opened once (`kernels::job::open`, through the memfd mapped read-only) by the first worker
//! that needs it, before any slot is taken, and shared by the workers of its other partitions
//! ([`JobCache`], bounded, dropped once its partitions ran).
//!
//! # Example
//!
//! Synthesize one partition into a private ring, as the service loop does:
//!
//! ```
//! use shm_protocol::{HugePagePolicy, Region, Ring, RingConfig};
//! use shm_protocol::control::{JobRequest, SynthRequest};
//! use kernels::job::BuiltinRequest;
//!
//! let spec: kernels::circuits::CircuitSpec = "pubinputs:2".parse()?;
//! let caps = synth_proc::capacity_for(&spec.shape()?);
//! let config = RingConfig::uniform(1, caps.slot_bytes().unwrap());
//! let region = Region::create("doc", config.region_bytes()?, HugePagePolicy::Plain)?;
//! let ring = Ring::create(region, config)?;
//! let req = SynthRequest { job_id: 1, partition: 0, circuit: spec.to_string(),
//!                          circuit_id: spec.circuit_id(),
//!                          request: JobRequest::Inline(BuiltinRequest { seed: 7, partitions: 1 }.to_bytes()),
//!                          priority: 2, express: false, witness: false };
//! let mut shapes = synth_proc::ShapeCache::default();
//! let (published, _t_ns) = synth_proc::synthesize_request(&ring, &mut shapes, &req, None, None)?;
//! assert_eq!(published.index, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod jobs;
mod sink;
pub mod workers;

use std::collections::HashMap;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kernels::circuits::AnyCircuit;
use kernels::panic_message;
use kernels::r1cs::R1cs;
use kernels::synth::{CircuitShape, Synthesis};
use kernels::witness::{CircuitMatrices, WitnessLayout, WitnessParts, WitnessSink};
use shm_protocol::control::{
    self, ChildConfig, EventKind, FromChild, R1csEntry, SharedSender, SynthConfig, SynthRequest,
    TimelineEvent, ToSynth,
};
use shm_protocol::{
    Published, Region, Ring, SealedBytes, SlotCapacity, SlotMeta, SlotWriter, WitnessCapacity,
    WitnessLengths,
};

pub use jobs::{JobCache, RequestBytes, MAX_JOBS};
pub use sink::SlotSink;
pub use workers::Lane;

/// How often a child tells the launcher it is alive.
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// Why one partition could not be synthesized.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SynthError {
    /// The request names a circuit that does not parse.
    #[error("bad circuit spec `{spec}`: {source}")]
    BadSpec {
        /// The spec.
        spec: String,
        /// Why.
        source: kernels::Error,
    },
    /// The circuit id in the request is not the spec's.
    #[error("circuit id {got:#x} does not match `{spec}` (expected {expected:#x})")]
    CircuitIdMismatch {
        /// The spec.
        spec: String,
        /// Its id.
        expected: u64,
        /// The id in the request.
        got: u64,
    },
    /// The ring refused (slot too small, stale slot, ...).
    #[error("ring: {0}")]
    Ring(#[from] shm_protocol::Error),
    /// The job's request cannot be used (not the bytes it should be, a memfd that is not
    /// sealed or did not come).
    #[error("the request of job {job_id} (`{circuit}`): {reason}")]
    BadRequest {
        /// The job.
        job_id: u64,
        /// Its circuit.
        circuit: String,
        /// Why.
        reason: String,
    },
    /// synth-proc is shutting down and did not start this synthesis.
    #[error("synth-proc is shutting down")]
    Stopped,
    /// The job was cancelled before this synthesis started.
    #[error("cancelled")]
    Cancelled,
    /// Synthesis itself failed.
    #[error("synthesis of `{spec}` failed: {source}")]
    Synthesis {
        /// The spec.
        spec: String,
        /// Why.
        source: kernels::Error,
    },
}

/// Why synth-proc could not serve (each synthesis's own failure is a [`SynthError`] reported
/// to the launcher, never this).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// What the launcher passes at start could not be taken.
    #[error(transparent)]
    Start(#[from] shm_protocol::child::StartError),
    /// The control channel to the launcher failed.
    #[error("control channel: {0}")]
    Control(#[source] std::io::Error),
    /// A worker thread could not be started.
    #[error("cannot start the synthesis workers: {0}")]
    Workers(#[source] std::io::Error),
}

/// Slot capacities for a circuit shape.
pub fn capacity_for(shape: &CircuitShape) -> SlotCapacity {
    SlotCapacity {
        n: shape.n(),
        inputs: shape.inputs,
        aux: shape.aux,
    }
}

/// Witness-slot capacities for a circuit's witness layout (its inputs, bit variables and the
/// other aux variables): size the ring's witness slots with its `slot_bytes`.
pub fn witness_capacity_for(layout: &WitnessLayout) -> WitnessCapacity {
    WitnessCapacity {
        inputs: layout.inputs(),
        bits: layout.bits(),
        non_bits: layout.non_bits(),
    }
}

/// Parsed specs, their ids and shapes, counted once per circuit.
#[derive(Default)]
pub struct ShapeCache {
    shapes: HashMap<String, (AnyCircuit, u64, CircuitShape)>,
}

impl ShapeCache {
    fn get(&mut self, spec: &str) -> Result<(AnyCircuit, u64, CircuitShape), SynthError> {
        if !self.shapes.contains_key(spec) {
            let bad = |source| SynthError::BadSpec {
                spec: spec.to_owned(),
                source,
            };
            let parsed: AnyCircuit = spec.parse().map_err(bad)?;
            let id = parsed.circuit_id().map_err(bad)?;
            let t = std::time::Instant::now();
            let shape = parsed.shape().map_err(bad)?;
            tracing::debug!(
                circuit = spec,
                constraints = shape.constraints,
                secs = t.elapsed().as_secs_f64(),
                "shape counted"
            );
            self.shapes.insert(spec.to_owned(), (parsed, id, shape));
        }
        Ok(self.shapes[spec])
    }
}

/// The pre-compiled constraint systems synth-proc was given, by circuit id: a partition of one of
/// these circuits is synthesized through its matrices ([`kernels::r1cs`]), the others in full;
/// a request for a witness slot ([`SynthRequest::witness`]) is served with its witness pass alone.
#[derive(Default, Clone)]
pub struct CompiledCircuits(HashMap<u64, Arc<CircuitMatrices>>);

impl CompiledCircuits {
    /// Maps and checks the inherited memfds of `entries`. One that cannot be used is logged and
    /// left out (its circuit is synthesized in full): the matrices are an acceleration, never a
    /// reason to stop serving.
    ///
    /// # Safety
    ///
    /// Every `entry.fd` must be a memfd the launcher wrote once and sealed before starting this
    /// process (its contract), owned by nothing else in this process.
    pub unsafe fn map_inherited(entries: &[R1csEntry]) -> CompiledCircuits {
        let mut map = HashMap::new();
        for e in entries {
            // SAFETY: forwarded to the caller: the launcher's sealed memfd, owned here alone.
            let fd = unsafe { OwnedFd::from_raw_fd(e.fd) };
            match Self::map_one(fd, e) {
                Ok(r1cs) => {
                    tracing::info!(circuit = %e.circuit, mib = r1cs.bytes() >> 20, "pre-compiled constraint system mapped");
                    map.insert(e.circuit_id, Arc::new(CircuitMatrices::new(r1cs)));
                }
                Err(why) => tracing::warn!(
                    circuit = %e.circuit,
                    "the pre-compiled constraint system cannot be used ({why}); synthesizing it in full"
                ),
            }
        }
        CompiledCircuits(map)
    }

    fn map_one(fd: OwnedFd, e: &R1csEntry) -> Result<R1cs, String> {
        // SAFETY: the caller's contract (`map_inherited`): a memfd sealed by the launcher.
        let region =
            unsafe { Region::from_inherited_fd_read_only(fd) }.map_err(|e| e.to_string())?;
        let len = usize::try_from(e.bytes).map_err(|_| format!("{} bytes", e.bytes))?;
        let bytes = SealedBytes::new(Arc::new(region), len).map_err(|e| e.to_string())?;
        R1cs::from_bytes_of(Box::new(bytes), e.circuit_id).map_err(|e| e.to_string())
    }

    /// Serves `r1cs` for its circuit (tests, and callers with matrices in their own memory).
    pub fn insert(&mut self, r1cs: R1cs) {
        self.0
            .insert(r1cs.circuit_id(), Arc::new(CircuitMatrices::new(r1cs)));
    }

    /// The matrices of `circuit_id`, if given.
    pub fn get(&self, circuit_id: u64) -> Option<&R1cs> {
        self.circuit(circuit_id).map(CircuitMatrices::r1cs)
    }

    /// The matrices of `circuit_id` with their witness layout, if given.
    pub fn circuit(&self, circuit_id: u64) -> Option<&CircuitMatrices> {
        self.0.get(&circuit_id).map(|c| &**c)
    }

    /// Circuits served through their matrices.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Synthesizes one request into a free slot of `ring` and publishes it; blocks while no slot is
/// free. Returns where it was published and the monotonic time just before publishing. On error
/// the slot goes back to FREE.
///
/// `fd` is the memfd that came with the message when its request is `JobRequest::Memfd`.
pub fn synthesize_request(
    ring: &Ring,
    shapes: &mut ShapeCache,
    req: &SynthRequest,
    fd: Option<OwnedFd>,
    compiled: Option<&R1cs>,
) -> Result<(Published, u64), SynthError> {
    let (spec, id, shape) = shapes.get(&req.circuit)?;
    let request = RequestBytes::for_message(&req.request, fd);
    // The witness layout of a witness request, made here (the serving loop keeps each
    // circuit's).
    let layout = match compiled {
        Some(r1cs) if req.witness => Some(WitnessLayout::of(r1cs)),
        _ => None,
    };
    synthesize_into_slot(
        ring,
        &spec,
        id,
        &shape,
        &JobCache::default(),
        req,
        &request,
        compiled.map(|r| (r, layout.as_ref())),
        None,
        &|_| {},
    )
    .map(|s| (s.published, s.end_ns))
}

/// A synthesis published, and when its phases ended (`CLOCK_MONOTONIC` ns).
struct Synthesized {
    published: Published,
    /// The witness pass (the pre-compiled synthesis only).
    witness_end_ns: Option<u64>,
    end_ns: u64,
}

/// Jobs the launcher cancelled ([`ToSynth::Cancel`]), the last [`CancelledJobs::KEPT`] of them:
/// their partitions not yet started are dropped.
#[derive(Debug, Default)]
pub struct CancelledJobs(Mutex<std::collections::VecDeque<u64>>);

impl CancelledJobs {
    /// Cancelled jobs remembered; the launcher hands out few partitions at a time, so an older
    /// one has nothing queued here any more.
    pub const KEPT: usize = 1024;

    /// Notes that `job_id` was cancelled.
    pub fn insert(&self, job_id: u64) {
        let mut q = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() >= Self::KEPT {
            q.pop_front();
        }
        q.push_back(job_id);
    }

    /// Whether `job_id` was cancelled.
    pub fn contains(&self, job_id: u64) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&job_id)
    }
}

/// The synthesis of one request. Waits for a free slot (re-checking `stop` every 200 ms, if
/// given: the error it returns ends the wait), calls `on_started(slot)` once the slot is
/// reserved, then synthesizes and publishes.
///
/// `compiled` is the circuit's matrices, with its witness layout when the request asks for a
/// witness slot: a witness request is synthesized into a witness slot when both are given, into
/// a full slot otherwise (a warning says why).
#[allow(clippy::too_many_arguments)]
fn synthesize_into_slot(
    ring: &Ring,
    spec: &AnyCircuit,
    circuit_id: u64,
    shape: &CircuitShape,
    jobs: &JobCache,
    req: &SynthRequest,
    request: &RequestBytes,
    compiled: Option<(&R1cs, Option<&WitnessLayout>)>,
    stop: Option<&dyn Fn() -> Option<SynthError>>,
    on_started: &dyn Fn(u32),
) -> Result<Synthesized, SynthError> {
    if circuit_id != req.circuit_id {
        return Err(SynthError::CircuitIdMismatch {
            spec: req.circuit.clone(),
            expected: circuit_id,
            got: req.circuit_id,
        });
    }
    // The job, before a slot is taken: a bad request must not hold one.
    let job = jobs.job(req.job_id, spec, request)?;
    let owner = shm_protocol::current_owner();
    let witness = match (req.witness, compiled) {
        (true, Some((r1cs, Some(layout)))) => Some((r1cs, layout)),
        (true, _) => {
            tracing::warn!(
                job = req.job_id,
                partition = req.partition,
                circuit = %req.circuit,
                "a witness slot was asked for a circuit without pre-compiled matrices here; \
                 synthesizing a full slot"
            );
            None
        }
        (false, _) => None,
    };
    // The smallest free slot this circuit fits (a ring of several slot sizes keeps its large
    // slots for the large circuits); none that fits at all is this job's error, at once (a
    // size that overflows fits none).
    let caps = capacity_for(shape);
    let need = match witness {
        Some((_, layout)) => witness_capacity_for(layout).slot_bytes(),
        None => caps.slot_bytes(),
    }
    .unwrap_or(u64::MAX);
    let mut writer = match stop {
        None => ring.acquire_free(owner, need, None)?,
        Some(stop) => loop {
            match ring.acquire_free(owner, need, Some(Duration::from_millis(200))) {
                Ok(w) => break w,
                Err(e) if e.is_timeout() => match stop() {
                    Some(why) => return Err(why),
                    None => continue,
                },
                Err(e) => return Err(e.into()),
            }
        },
    };
    let meta = SlotMeta {
        job_id: req.job_id,
        circuit_id: req.circuit_id,
        partition: req.partition,
        attempt: 0,
    };
    #[cfg(feature = "fault-injection")]
    let meta = mislabel(meta, req);
    if let Some((_, layout)) = witness {
        writer.begin_witness(meta, witness_capacity_for(layout))?;
    } else {
        writer.begin(meta, caps)?;
    }
    // Claimed by the gpu-procs before READY slots of lower priority (the job table's priority,
    // cuzk's scale 1..=4; the clamp only guards the cast).
    writer.set_claim_priority(req.priority.clamp(0, i32::from(u8::MAX)) as u8);
    on_started(writer.index() as u32);
    #[cfg(feature = "fault-injection")]
    inject_faults(req);
    let k = req.partition as usize;
    let synthesis_error = |source| SynthError::Synthesis {
        spec: req.circuit.clone(),
        source,
    };
    if let Some((r1cs, layout)) = witness {
        let counts =
            synthesize_witness(&mut writer, &*job, k, r1cs, layout).map_err(|e| match e {
                WitnessError::Ring(e) => SynthError::Ring(e),
                WitnessError::Synthesis(e) => synthesis_error(e),
            })?;
        let end_ns = control::monotonic_ns();
        let published = writer.publish_witness(WitnessLengths {
            inputs: counts.inputs,
            bits: counts.bits,
            non_bits: counts.non_bits,
            ones: counts.ones,
        })?;
        return Ok(Synthesized {
            published,
            witness_end_ns: None,
            end_ns,
        });
    }
    let mut witness_end_ns = None;
    let lengths = match compiled.map(|(r1cs, _)| r1cs) {
        Some(r1cs) => {
            let mut sink = SlotSink::new(writer.parts_mut()?);
            match job.synthesize_partition_with(k, &mut sink, Synthesis::Compiled(r1cs)) {
                Ok(()) => {
                    witness_end_ns = sink.witness_end_ns();
                    Some(sink.lengths())
                }
                // Matrices of another shape (a bug, never seen): this partition is synthesized
                // in full instead. Nothing was written to the densities yet, and the full pass
                // overwrites every value the witness pass wrote.
                Err(e) if matches!(e.kind(), kernels::ErrorKind::R1csMismatch { .. }) => {
                    tracing::warn!(job = req.job_id, partition = k, "{e}; synthesizing in full");
                    None
                }
                Err(e) => return Err(synthesis_error(e)),
            }
        }
        None => None,
    };
    let lengths = match lengths {
        Some(l) => l,
        None => {
            let mut sink = SlotSink::new(writer.parts_mut()?);
            job.synthesize_partition(k, &mut sink)
                .map_err(synthesis_error)?;
            sink.lengths()
        }
    };
    // Stamped before the slot becomes READY, so no consumer's GPU_CLAIM can precede it.
    let end_ns = control::monotonic_ns();
    let published = writer.publish(lengths)?;
    Ok(Synthesized {
        published,
        witness_end_ns,
        end_ns,
    })
}

/// The witness pass of partition `k` of `job`, packed straight into the witness slot `writer`
/// began ([`WitnessSink`]: no `Vec`, no copy). A bit variable whose value is not 0 or 1 fails it,
/// naming the variable.
fn synthesize_witness(
    writer: &mut SlotWriter<'_>,
    job: &dyn kernels::job::Job,
    k: usize,
    r1cs: &R1cs,
    layout: &WitnessLayout,
) -> Result<kernels::witness::WitnessCounts, WitnessError> {
    let parts = writer.witness_parts_mut().map_err(WitnessError::Ring)?;
    let mut sink = WitnessSink::new(
        WitnessParts {
            input: parts.input,
            bit_values: parts.bit_values,
            non_bits: parts.non_bits,
        },
        layout,
    );
    job.synthesize_partition_with(k, &mut sink, Synthesis::Witness(r1cs.shape()))
        .map_err(WitnessError::Synthesis)?;
    Ok(sink.counts())
}

/// Why [`synthesize_witness`] failed: the slot, or the synthesis.
enum WitnessError {
    Ring(shm_protocol::Error),
    Synthesis(kernels::Error),
}

/// Entry point of the process: configuration from [`CHILD_CONFIG_ENV`], ring at [`RING_FD`],
/// control socket at [`CONTROL_FD`].
pub fn run_from_env() -> Result<(), ServeError> {
    // SAFETY: called once, by the process the launcher started as synth-proc: RING_FD and
    // CONTROL_FD are its own.
    let inherited = unsafe {
        shm_protocol::child::inherit("synth-proc", |c| match c {
            ChildConfig::Synth(s) => Ok(s),
            other => Err(other),
        })
    }?;
    let (config, ring, control) = (inherited.config, inherited.ring, inherited.control);
    // SAFETY: the launcher passes each pre-compiled constraint system's memfd, written and
    // sealed before this process started, at the number its entry names, and nothing else here
    // owns those numbers.
    let compiled = unsafe { CompiledCircuits::map_inherited(&config.r1cs) };
    serve(Arc::new(ring), control, config, compiled)
}

/// Serves requests from `control` until `Shutdown` or until the launcher goes away.
pub fn serve(
    ring: Arc<Ring>,
    control: UnixStream,
    config: SynthConfig,
    compiled: CompiledCircuits,
) -> Result<(), ServeError> {
    let (sender, mut receiver) = control::channel(control).map_err(ServeError::Control)?;
    let sender = SharedSender::new(sender);
    let _heartbeat = sender.spawn_heartbeat(HEARTBEAT);
    let threads = config.concurrency.max(1);
    let products = products_pool();
    // One synthesis per worker thread; their products run on the global rayon pool (see
    // `workers`: a synthesis never runs on a rayon worker).
    let pool = Lane::start("synth", threads).map_err(ServeError::Workers)?;
    // The express worker: HIGH/CRITICAL partitions the launcher marks `express` start at once
    // instead of behind the workers' queue (one more thread on the same cores, busy only while
    // such a partition runs: a WinningPoSt is one partition a few times an hour).
    let express = Lane::start("synth-express", 1).map_err(ServeError::Workers)?;
    let pid = std::process::id();
    tracing::info!(pid, threads, products, pages = %ring.page_kind(), slots = ring.slot_count(), precompiled = compiled.len(), "synth-proc serving");
    let precompiled = match compiled.len() {
        0 => String::new(),
        n => format!(", {n} circuit(s) pre-compiled"),
    };
    send(
        &sender,
        &FromChild::Hello {
            pid,
            detail: format!("synth-proc: {threads} workers{precompiled}"),
        },
    );
    let compiled = Arc::new(compiled);
    let shapes = Arc::new(Mutex::new(ShapeCache::default()));
    let jobs = Arc::new(JobCache::default());
    let stop = Arc::new(AtomicBool::new(false));
    let cancelled = Arc::new(CancelledJobs::default());
    loop {
        match receiver.recv::<ToSynth>() {
            Ok(Some(ToSynth::Synthesize(req))) => {
                // The memfd of a request came with its message: take it now, in message order.
                let fd = match req.request {
                    control::JobRequest::Memfd { .. } => receiver.take_fd(),
                    control::JobRequest::Inline(_) => None,
                };
                let request = RequestBytes::for_message(&req.request, fd);
                let (ring, sender, shapes, jobs, stop, cancelled, compiled) = (
                    ring.clone(),
                    sender.clone(),
                    shapes.clone(),
                    jobs.clone(),
                    stop.clone(),
                    cancelled.clone(),
                    compiled.clone(),
                );
                let lane = if req.express { &express } else { &pool };
                lane.submit(Box::new(move || {
                    let context = Serving {
                        ring: &ring,
                        sender: &sender,
                        shapes: &shapes,
                        jobs: &jobs,
                        stop: &stop,
                        cancelled: &cancelled,
                        compiled: &compiled,
                    };
                    work(&context, req, request)
                }));
            }
            Ok(Some(ToSynth::Cancel { job_id })) => {
                tracing::info!(
                    job = job_id,
                    "job cancelled: its queued partitions are dropped"
                );
                cancelled.insert(job_id);
            }
            Ok(Some(ToSynth::Shutdown)) | Ok(None) => {
                // Syntheses in progress finish and publish; queued ones are dropped (the launcher
                // re-sends whatever is not in the ring when it starts a synth-proc again).
                stop.store(true, Ordering::Release); // flags: stored Release, loaded Acquire
                break;
            }
            Err(e) => {
                tracing::error!("control channel: {e}");
                break;
            }
        }
    }
    // Let running syntheses finish and publish before exiting (queued ones see the stop flag).
    pool.join();
    express.join();
    tracing::info!("synth-proc exiting");
    Ok(())
}

/// Sizes the process's global rayon pool, where every synthesis's products run, to the cores
/// this process may use (its cpuset, applied before exec) and names its threads; returns its
/// size. A pool already built (a test serving in its own process) is kept.
fn products_pool() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Err(e) = rayon::ThreadPoolBuilder::new()
        .num_threads(cores)
        .thread_name(|i| format!("synth-products-{i}"))
        .build_global()
    {
        tracing::debug!("the global rayon pool was already built: {e}");
    }
    rayon::current_num_threads()
}

/// The faults `SPLITPROVER_FAULT` asks for, read once.
#[cfg(feature = "fault-injection")]
fn injected_faults() -> &'static shm_protocol::fault::Faults {
    static FAULTS: std::sync::OnceLock<shm_protocol::fault::Faults> = std::sync::OnceLock::new();
    FAULTS.get_or_init(shm_protocol::fault::Faults::from_env)
}

/// Test faults (feature `fault-injection`): panic, or block forever, inside the synthesis of a
/// partition `SPLITPROVER_FAULT` names.
#[cfg(feature = "fault-injection")]
fn inject_faults(req: &SynthRequest) {
    use shm_protocol::fault::FaultKind;
    let faults = injected_faults();
    if faults.hits(FaultKind::SynthPanic, req.job_id, req.partition) {
        panic!(
            "fault injection: synthesis of job {} partition {} panics",
            req.job_id, req.partition
        );
    }
    if faults.hits(FaultKind::SynthHang, req.job_id, req.partition) {
        tracing::error!("fault injection: synthesis hangs");
        loop {
            std::thread::park();
        }
    }
}

/// Test fault (feature `fault-injection`): the slot's metadata names another job
/// (`synth-mislabel`).
#[cfg(feature = "fault-injection")]
fn mislabel(meta: SlotMeta, req: &SynthRequest) -> SlotMeta {
    use shm_protocol::fault::FaultKind;
    if injected_faults().hits(FaultKind::SynthMislabel, req.job_id, req.partition) {
        tracing::error!("fault injection: slot metadata names another job");
        return SlotMeta {
            job_id: req.job_id + 1_000_000,
            ..meta
        };
    }
    meta
}

/// What every synthesis of the serving loop shares.
struct Serving<'a> {
    ring: &'a Ring,
    sender: &'a SharedSender,
    shapes: &'a Mutex<ShapeCache>,
    jobs: &'a JobCache,
    stop: &'a AtomicBool,
    cancelled: &'a CancelledJobs,
    compiled: &'a CompiledCircuits,
}

/// Runs one request on a pool worker; a panic in it fails that partition alone (its slot writer
/// was dropped while unwinding, so the slot is FREE again) and the worker goes on serving.
fn work(cx: &Serving<'_>, req: SynthRequest, request: RequestBytes) {
    let (job_id, partition) = (req.job_id, req.partition);
    let (jobs, sender) = (cx.jobs, cx.sender);
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        work_inner(cx, req, request)
    }));
    if let Err(panic) = run {
        let msg = panic_message(&*panic);
        tracing::error!(job = job_id, partition, "synthesis panicked: {msg}");
        jobs.partition_finished(job_id);
        send(
            sender,
            &FromChild::SynthFailed {
                job_id,
                partition,
                error: format!("synthesis panicked: {msg}"),
            },
        );
    }
}

fn work_inner(cx: &Serving<'_>, req: SynthRequest, request: RequestBytes) {
    let (ring, sender, shapes, jobs, stop, cancelled) = (
        cx.ring,
        cx.sender,
        cx.shapes,
        cx.jobs,
        cx.stop,
        cx.cancelled,
    );
    // The flag convention: stored Release, loaded Acquire.
    if stop.load(Ordering::Acquire) {
        return;
    }
    // Checked before the synthesis starts and while it waits for a free slot.
    let halt = || {
        if stop.load(Ordering::Acquire) {
            Some(SynthError::Stopped)
        } else if cancelled.contains(req.job_id) {
            Some(SynthError::Cancelled)
        } else {
            None
        }
    };
    // A worker took it: from here it waits for a slot, then synthesizes.
    send(
        sender,
        &FromChild::Event(TimelineEvent::now(
            EventKind::SynthTaken,
            req.job_id,
            req.partition,
            control::NO_SLOT,
        )),
    );
    // Shapes are counted once; the lock is held only for a lookup after that.
    let shape = shapes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&req.circuit);
    // SYNTH_START once a slot is reserved: the wait for a free slot is back-pressure, not
    // synthesis.
    let started = |slot| {
        send(
            sender,
            &FromChild::Event(TimelineEvent::now(
                EventKind::SynthStart,
                req.job_id,
                req.partition,
                slot,
            )),
        )
    };
    let result = shape.and_then(|(spec, id, shape)| {
        if cancelled.contains(req.job_id) {
            return Err(SynthError::Cancelled);
        }
        synthesize_into_slot(
            ring,
            &spec,
            id,
            &shape,
            jobs,
            &req,
            &request,
            cx.compiled
                .circuit(id)
                .map(|c| (c.r1cs(), req.witness.then(|| c.witness_layout()))),
            Some(&halt),
            &started,
        )
    });
    if !matches!(result, Err(SynthError::Stopped)) {
        jobs.partition_finished(req.job_id);
    }
    match result {
        Err(SynthError::Stopped) => {}
        Ok(Synthesized {
            published: p,
            witness_end_ns,
            end_ns: t_ns,
        }) => {
            let slot = p.index as u32;
            let at = |kind, t_ns| TimelineEvent {
                t_ns,
                ..TimelineEvent::now(kind, req.job_id, req.partition, slot)
            };
            if let Some(w) = witness_end_ns {
                send(sender, &FromChild::Event(at(EventKind::WitnessEnd, w)));
            }
            send(sender, &FromChild::Event(at(EventKind::SynthEnd, t_ns)));
            send(sender, &FromChild::Event(at(EventKind::SlotPublish, t_ns)));
            send(
                sender,
                &FromChild::Published {
                    job_id: req.job_id,
                    partition: req.partition,
                    slot,
                    generation: p.generation,
                },
            );
        }
        Err(e) => {
            tracing::warn!(
                job = req.job_id,
                partition = req.partition,
                "synthesis failed: {e}"
            );
            send(
                sender,
                &FromChild::SynthFailed {
                    job_id: req.job_id,
                    partition: req.partition,
                    error: e.to_string(),
                },
            );
        }
    }
}

fn send(sender: &SharedSender, msg: &FromChild) {
    if let Err(e) = sender.send(msg) {
        // The launcher is gone; PDEATHSIG ends us shortly.
        tracing::debug!("cannot report to the launcher: {e}");
    }
}
