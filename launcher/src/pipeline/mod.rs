//! The split pipeline as one value: the ring, the SRS images, the supervised children and the job
//! table. `demo`, `prove`, `bench` and the service all drive a [`Pipeline`].
//!
//! One dispatcher thread owns the reaction to everything the children do (published, proved,
//! died, restarted); clients call [`Pipeline::submit`] from any thread and wait on the returned
//! [`JobHandle`]. The crash promise of DESIGN.md is implemented here:
//! - gpu-proc dies → its CLAIMED slots go back to READY (`Ring::reclaim_owner`), the supervisor
//!   restarts it, the new one (or another gpu-proc) proves them; nothing is synthesized again;
//! - synth-proc dies → its WRITING slots go back to FREE; every partition it had been given that
//!   the ring does not hold is sent again to the restarted synth-proc;
//! - a gpu-proc whose batch runs past its progress deadline (`max(floor, factor × the circuit's
//!   measured proving time per slot × batch)`, or the first-proof deadline before any
//!   measurement; known from its GPU_CLAIM / GPU_END events) is killed, and so is a synth-proc
//!   whose synthesis of a partition runs past its own deadline (same rule over SYNTH_START /
//!   SYNTH_END): a hung call cannot hold its slots while the heartbeat thread keeps beating;
//! - every death or kill of the process holding a partition's slot, a proof that does not verify
//!   and a DONE slot that does not match the job table count one failed attempt of that
//!   partition; after [`FaultSettings::max_attempts`] its job fails with every reason, its other
//!   partitions are dropped and its READY slots freed (`Ring::claim_ready_at` +
//!   `ClaimedSlot::discard`), so a poison slot cannot kill gpu-procs forever. One job never turns
//!   the pipeline fatal;
//! - a child that served once is restarted forever with a capped exponential back-off; a
//!   gpu-proc that keeps failing is shown `down` and the others take the work (any gpu-proc
//!   claims any slot). Only a child that never served (a bad configuration) is given up: the
//!   pipeline turns fatal when synth-proc or every gpu-proc is given up.
//!
//! Sends to the children never block under the core lock: each child has a bounded [`Outbox`]
//! drained by its own writer thread; a synthesis request that does not fit stays `Pending` in the
//! job table and is sent on a later tick.
//!
//! Hand-out to synth-proc is bounded: at most `synth_concurrency + synth_lookahead` partitions
//! are at synth-proc (sent, not yet published or failed) at once; the rest wait in the job table
//! in priority order, so a CRITICAL job submitted behind a long queue is synthesized next, a
//! drain holds back everything not yet sent, and [`Pipeline::cancel`] takes queued work back
//! without asking synth-proc. GPU claims follow the same priorities: each
//! [`SynthRequest`](shm_protocol::control::SynthRequest) carries its job's priority, synth-proc
//! publishes the slot at it, and gpu-procs claim READY slots highest priority first, then oldest
//! (`SlotWriter::set_claim_priority`), so an urgent partition overtakes READY NORMAL work at the
//! next claim (a running GPU call is not preempted). Client-controlled sizes are checked before anything
//! proportional to them is allocated: partitions per job ([`FaultSettings::max_partitions`]) and
//! request files ([`read_request_file`]: `O_NOFOLLOW | O_NONBLOCK`, regular files only, size
//! checked against [`FaultSettings::max_request_bytes`] before a bounded read). The timeline keeps
//! at most [`FaultSettings::timeline_events`] events when a bound is set.
//!
//! A configured circuit's SRS can be dropped and loaded again while serving
//! ([`Pipeline::evict_srs`], [`Pipeline::preload_srs`], `srs_set`): an evict is refused while
//! jobs of the circuit are live, and a job whose SRS was evicted loads it first.

pub mod child;
mod drain;
mod error;
pub mod memory;
mod srs_set;

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use bellperson::groth16::{prepare_verifying_key, verify_proof, PreparedVerifyingKey};
use blstrs::Bls12;
use blstrs::Scalar;
use kernels::circuits::AnyCircuit;
use kernels::synth::CircuitShape;
use shm_protocol::control::{
    self, BackendKind, ChildConfig, EventKind, FromChild, GpuConfig, JobRequest, R1csEntry,
    SynthConfig, TimelineEvent, ToGpu, ToSynth, FIRST_R1CS_FD, NO_SLOT, RING_FD,
};
use shm_protocol::request::SealedRequest;
use shm_protocol::{
    HugePagePolicy, Region, Ring, RingConfig, SlotClass, SlotResult, SlotState, StateCounts,
};

use crate::jobs::{Attempt, JobCounters, JobOutcome, JobSpec, JobSummary, JobTable, Phase};
pub use crate::jobs::{
    JobTimes, PRIORITY_CRITICAL, PRIORITY_HIGH, PRIORITY_LOW, PRIORITY_NORMAL, PRIORITY_UNSPECIFIED,
};
use crate::pinning::{CpuList, Layout, PinChoice, PinMode, Placement};
use crate::srs::SharedSrs;
use child::{ChildEvent, ChildSpec, Outbox, OutboxRefused, RestartPolicy, Role, Supervisor};
pub use error::PipelineError;
use srs_set::SrsSet;
pub use srs_set::{SrsEvicted, SrsLine, SrsLoaded, SrsTier};

/// How long [`Pipeline::preload_srs`] and [`Pipeline::evict_srs`] wait for every gpu-proc to
/// confirm (the CUDA backend opens its SRS in the background, so a load is confirmed quickly).
pub const SRS_CONFIRM_TIMEOUT: Duration = Duration::from_secs(600);

/// HIGH/CRITICAL partitions at once in synth-proc's express lane (its one express worker runs
/// one, the next waits there, so the worker never idles between two).
pub const EXPRESS_LANE: usize = 2;

/// Result of the pipeline's API.
pub type Result<T, E = PipelineError> = std::result::Result<T, E>;

/// One circuit the pipeline serves.
#[derive(Clone, Debug)]
pub struct CircuitSetting {
    /// The circuit (built-in, or a Filecoin proof kind).
    pub spec: AnyCircuit,
    /// Its SRS file (bellperson `Parameters` format).
    pub params: PathBuf,
    /// Ring slots of this circuit's own size, besides the shared slots (which the largest
    /// circuit sizes): a small circuit served beside a large one gets slots that fit it, so
    /// its partitions do not take large slots (they spill into those only when their own are
    /// all busy). 0: none.
    pub slots: usize,
}

/// One gpu-proc.
#[derive(Clone, Debug)]
pub struct GpuSetting {
    /// Device index.
    pub device: u32,
    /// The prover backend.
    pub backend: BackendKind,
    /// Slots proved per backend call, at most.
    pub batch: usize,
    /// Explicit cores (else the automatic layout decides).
    pub cpus: Option<CpuList>,
}

/// Fault containment: progress deadlines, attempts, limits and the timeline bound.
#[derive(Clone, Debug)]
pub struct FaultSettings {
    /// Failed attempts of one partition after which its job fails.
    pub max_attempts: u32,
    /// A batch (or a synthesis) may take this many times the circuit's measured time.
    pub deadline_factor: f64,
    /// A deadline is never shorter than this.
    pub deadline_floor: Duration,
    /// A gpu-proc's deadline for a batch before that circuit's proving time was measured.
    pub first_proof_deadline: Duration,
    /// synth-proc's deadline for a partition before that circuit's synthesis time was measured.
    pub first_synthesis_deadline: Duration,
    /// Partitions one job may have (checked before anything per partition is allocated).
    pub max_partitions: u32,
    /// Largest request accepted (given to a submit or read from a file), in bytes.
    pub max_request_bytes: u64,
    /// Timeline events kept (the oldest dropped first); `None`: all of them.
    pub timeline_events: Option<usize>,
    /// Messages queued per child before a synthesis request waits in the job table.
    pub outbox: usize,
}

impl Default for FaultSettings {
    fn default() -> Self {
        FaultSettings {
            max_attempts: 2,
            deadline_factor: 5.0,
            deadline_floor: Duration::from_secs(60),
            first_proof_deadline: Duration::from_secs(1800),
            first_synthesis_deadline: Duration::from_secs(1800),
            max_partitions: 4096,
            // A 64 GiB-sector C1 output is well below this.
            max_request_bytes: 1 << 30,
            timeline_events: None,
            outbox: 64,
        }
    }
}

impl FaultSettings {
    /// The deadline of work measured at `per_unit` (if measured) × `units`.
    fn deadline(&self, per_unit: Option<Duration>, units: usize, first: Duration) -> Duration {
        match per_unit {
            Some(d) => d
                .mul_f64(self.deadline_factor.max(1.0) * units.max(1) as f64)
                .max(self.deadline_floor),
            None => first,
        }
    }
}

/// Everything [`Pipeline::start`] needs, resolved from flags or a config file.
#[derive(Clone, Debug)]
pub struct PipelineSettings {
    /// Program run for the children (the `splitprover` binary, with a hidden subcommand).
    pub program: PathBuf,
    /// Circuits served.
    pub circuits: Vec<CircuitSetting>,
    /// Shared ring slots, sized for the largest circuit (more of other sizes:
    /// [`CircuitSetting::slots`]).
    pub slots: usize,
    /// Bytes per shared slot (default: what the largest circuit needs).
    pub slot_bytes: Option<u64>,
    /// Huge pages for the ring and the SRS.
    pub huge_pages: HugePagePolicy,
    /// Pinning mode.
    pub pin: PinChoice,
    /// Cores per gpu-proc in the automatic layout.
    pub gpu_cores: usize,
    /// Explicit synth-proc cores.
    pub synth_cpus: Option<CpuList>,
    /// The gpu-procs.
    pub gpus: Vec<GpuSetting>,
    /// Partitions synthesized at once; 0: one per synth-proc core.
    pub synth_concurrency: usize,
    /// Partitions handed to synth-proc beyond `synth_concurrency` (queued there so a worker
    /// never waits for the launcher); `None`: as many as `synth_concurrency`.
    pub synth_lookahead: Option<usize>,
    /// Restart rules.
    pub restart: RestartPolicy,
    /// Verify every proof before handing it out.
    pub verify: bool,
    /// A child silent for this long (children beat every second) is killed and restarted: a hung
    /// GPU call or a stopped process must not hold its slots forever.
    pub heartbeat_timeout: Duration,
    /// Deadlines, attempts and limits.
    pub faults: FaultSettings,
    /// Extra environment of every child (tests pass `SPLITPROVER_FAULT` here,
    /// `shm_protocol::fault`).
    pub child_env: Vec<(String, String)>,
    /// Pre-compiled constraint systems: used or not, cached where, within what budget.
    pub synthesis: crate::r1cs::SynthesisSettings,
    /// Refuse at start a configuration whose memory model does not fit the host
    /// ([`memory`]).
    pub memory_check: bool,
}

impl PipelineSettings {
    /// Settings for one circuit with defaults everywhere else; `program` is this executable.
    pub fn for_circuit(spec: impl Into<AnyCircuit>, params: PathBuf) -> Result<PipelineSettings> {
        Ok(PipelineSettings {
            program: std::env::current_exe().map_err(|source| PipelineError::Io {
                what: "cannot find the splitprover executable",
                cause: source,
            })?,
            circuits: vec![CircuitSetting {
                spec: spec.into(),
                params,
                slots: 0,
            }],
            slots: 4,
            slot_bytes: None,
            huge_pages: HugePagePolicy::Auto,
            pin: PinChoice::Auto,
            gpu_cores: 1,
            synth_cpus: None,
            gpus: vec![GpuSetting {
                device: 0,
                backend: BackendKind::Cpu,
                batch: 1,
                cpus: None,
            }],
            synth_concurrency: 1,
            synth_lookahead: None,
            restart: RestartPolicy::default(),
            verify: true,
            heartbeat_timeout: Duration::from_secs(60),
            faults: FaultSettings::default(),
            child_env: Vec::new(),
            synthesis: crate::r1cs::SynthesisSettings::default(),
            memory_check: true,
        })
    }
}

/// How a job is run ([`Pipeline::submit_job_with`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobOptions {
    /// cuzk's scale: [`PRIORITY_LOW`] 1 … [`PRIORITY_CRITICAL`] 4; [`PRIORITY_UNSPECIFIED`] 0
    /// takes the kind's default (WinningPoSt CRITICAL, WindowPoSt HIGH, everything else
    /// NORMAL). Higher priority partitions are handed to synth-proc first.
    pub priority: i32,
}

/// What [`Pipeline::cancel`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cancelled {
    /// Some partition of the job had been handed to synth-proc.
    pub was_running: bool,
}

/// A submitted job: its id and where its outcome arrives.
pub struct JobHandle {
    /// Job id.
    pub id: u64,
    rx: mpsc::Receiver<JobOutcome>,
}

impl JobHandle {
    /// Waits for the outcome.
    pub fn wait(self) -> Result<JobOutcome> {
        self.rx.recv().map_err(|_| PipelineError::Stopped)
    }

    /// Waits at most `timeout`.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<Option<JobOutcome>> {
        match self.rx.recv_timeout(timeout) {
            Ok(o) => Ok(Some(o)),
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(PipelineError::Stopped),
        }
    }
}

/// A child as `status` shows it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ChildStatus {
    /// `synth-proc` or `gpu-proc[i]`.
    pub role: String,
    /// Running pid.
    pub pid: Option<u32>,
    /// Cores it was verified to run on.
    pub cpus: Option<String>,
    /// What it said at start.
    pub detail: String,
    /// Starts after the first.
    pub restarts: u32,
    /// How the last one ended.
    pub last_exit: Option<String>,
    /// `up`, `restarting`, `down` (keeps failing at restart, still retried; its work goes to
    /// the others) or `given up` (never started: a bad configuration).
    #[serde(default)]
    pub state: String,
}

/// One size of ring slot in a status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SlotClassLine {
    /// Slots of this size.
    pub slots: usize,
    /// Bytes of each slot's data.
    pub slot_bytes: u64,
}

impl PipelineStatus {
    /// Bytes of all slots' data (the ring's page-locked part).
    pub fn ring_data_bytes(&self) -> u64 {
        if self.slot_classes.is_empty() {
            return self.ring_slots as u64 * self.slot_bytes;
        }
        self.slot_classes
            .iter()
            .map(|c| c.slots as u64 * c.slot_bytes)
            .sum()
    }

    /// The slot sizes as text: `3 slots x 15984 MiB + 8 slots x 112 MiB`.
    pub fn ring_text(&self) -> String {
        let classes = if self.slot_classes.is_empty() {
            vec![SlotClassLine {
                slots: self.ring_slots,
                slot_bytes: self.slot_bytes,
            }]
        } else {
            self.slot_classes.iter().rev().copied().collect()
        };
        classes
            .iter()
            .map(|c| format!("{} slots x {} MiB", c.slots, c.slot_bytes >> 20))
            .collect::<Vec<_>>()
            .join(" + ")
    }
}

/// A snapshot of the whole pipeline.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct PipelineStatus {
    /// Pinning mode in use.
    pub pin_mode: String,
    /// Page kind of the ring.
    pub ring_pages: String,
    /// Slots in all.
    pub ring_slots: usize,
    /// Bytes of the largest slots (every slot's in a ring of one slot size).
    pub slot_bytes: u64,
    /// The ring's slot sizes, smallest first.
    #[serde(default)]
    pub slot_classes: Vec<SlotClassLine>,
    /// Slots by state.
    pub slots: SlotCounts,
    /// The children.
    pub children: Vec<ChildStatus>,
    /// Live jobs.
    pub jobs: Vec<JobLine>,
    /// Counters.
    pub counters: Counters,
    /// Why the pipeline cannot go on, if it cannot.
    pub fatal: Option<String>,
    /// Every configured circuit's SRS: tier, size, live jobs.
    #[serde(default)]
    pub srs: Vec<SrsLine>,
    /// One line per gpu-proc, by ordinal: its device and what it proves now (cuzk's
    /// `GetStatus` GPU list).
    #[serde(default)]
    pub gpus: Vec<GpuLine>,
    /// How each configured circuit is synthesized: (circuit, plan), e.g. `pre-compiled, 12 MiB,
    /// cached` or `full (why)`.
    #[serde(default)]
    pub synthesis: Vec<(String, String)>,
}

/// A gpu-proc's device and work, as `status` shows it. The device comes from the gpu-proc's
/// [`FromChild::Device`] reports (empty name and zero memory until the first one); the current
/// job from its timeline: set at its batch's first GPU_CLAIM, cleared at the batch's last
/// GPU_END or when it dies.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct GpuLine {
    /// The gpu-proc's device index.
    pub ordinal: u32,
    /// Its role (`gpu-proc[0]`).
    pub role: String,
    /// Device name (`NVIDIA H200`, `CPU backend (<model>, N threads)`).
    pub name: String,
    /// Device memory in bytes (0 for the CPU backend).
    pub vram_total_bytes: u64,
    /// Device memory free at its last report (after its last batch), in bytes.
    pub vram_free_bytes: u64,
    /// SRS bytes resident in device memory at its last report (the `gpu` backend's; 0 for
    /// backends that keep none there).
    pub srs_device_bytes: u64,
    /// The job of the batch it is proving now (the first claimed, when a batch mixes jobs).
    pub current_job: Option<u64>,
    /// That job's circuit spec.
    pub current_circuit: Option<String>,
    /// GPU-busy time of its finished batches (GPU_START to GPU_END), ns, since the pipeline
    /// started: busy ratio = Δbusy_ns / Δwall time.
    pub busy_ns: u64,
}

/// Slots by state (serializable copy of [`StateCounts`]).
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
#[allow(missing_docs)]
pub struct SlotCounts {
    pub free: usize,
    pub writing: usize,
    pub ready: usize,
    pub claimed: usize,
    pub done: usize,
}

impl From<StateCounts> for SlotCounts {
    fn from(c: StateCounts) -> Self {
        SlotCounts {
            free: c.free,
            writing: c.writing,
            ready: c.ready,
            claimed: c.claimed,
            done: c.done,
        }
    }
}

/// A live job (serializable copy of [`JobSummary`]).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[allow(missing_docs)]
pub struct JobLine {
    pub job_id: u64,
    pub circuit: String,
    pub done: usize,
    pub partitions: usize,
    pub in_ring: usize,
    #[serde(default)]
    pub priority: i32,
    /// Some partition was handed to synth-proc.
    #[serde(default)]
    pub running: bool,
}

impl From<JobSummary> for JobLine {
    fn from(j: JobSummary) -> Self {
        JobLine {
            job_id: j.job_id,
            circuit: j.circuit,
            done: j.done,
            partitions: j.partitions,
            in_ring: j.in_ring,
            priority: j.priority,
            running: j.running,
        }
    }
}

/// Counters (serializable copy of [`JobCounters`] plus crash counts).
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
#[allow(missing_docs)]
pub struct Counters {
    pub submitted: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub syntheses_requested: u64,
    /// Syntheses synth-proc started (SYNTH_START events), those cut short by a crash included.
    pub syntheses_started: u64,
    pub duplicate_results: u64,
    /// DONE slots refused because they did not match the job table.
    pub mismatched_results: u64,
    pub child_exits: u64,
    pub slots_requeued: u64,
    pub slots_freed: u64,
    /// Children killed for missing heartbeats.
    pub hung_kills: u64,
    /// Children killed for running past a progress deadline.
    pub deadline_kills: u64,
    /// Failed attempts of partitions (retried, or ending their job at the limit).
    pub failed_attempts: u64,
    /// READY slots of ended jobs taken out of the ring unproved.
    pub slots_discarded: u64,
    /// Times a synthesis request was kept back in the job table because synth-proc's queue was
    /// full (a request kept back over several ticks counts once per tick).
    pub sends_deferred: u64,
    /// Jobs cancelled.
    pub cancelled: u64,
    /// Partitions at synth-proc now (sent, not yet published or failed): at most
    /// `synth_window`.
    pub synth_outstanding: u64,
    /// Partitions waiting in the job table to be handed to synth-proc, now.
    pub synth_pending: u64,
    /// The hand-out bound: `synth_concurrency + synth_lookahead`.
    pub synth_window: u64,
    /// The most partitions ever at synth-proc at once.
    pub synth_outstanding_max: u64,
}

struct ChildInfo {
    pid: Option<u32>,
    last_seen: Instant,
    outbox: Option<Outbox>,
    cpus: Option<CpuList>,
    detail: String,
    starts: u32,
    last_exit: Option<String>,
    /// Why it is down (keeps failing at restart; still retried).
    down: Option<String>,
    /// Why it was given up.
    gave_up: Option<String>,
    /// Why the pipeline killed it, for the attempts of the partitions it held.
    kill_reason: Option<String>,
    /// When synth-proc was killed for syntheses past their deadline: those partitions. The
    /// others it was synthesizing are sent again without counting an attempt.
    kill_targets: Option<HashSet<(u64, u32)>>,
    /// A gpu-proc's SRS images, from its hello until it exits (`None`: not serving).
    srs: Option<GpuSrs>,
}

/// The SRS images of one serving gpu-proc, as its answers tell.
#[derive(Default)]
struct GpuSrs {
    /// Mapped (given at start, or confirmed loaded).
    mapped: BTreeSet<u64>,
    /// Sent `LoadSrs`, not answered yet.
    loading: BTreeSet<u64>,
    /// Sent `EvictSrs`, not answered yet.
    evicting: BTreeSet<u64>,
    /// Loads it refused, with its answer (not sent again until the next preload).
    refused: HashMap<u64, String>,
}

impl ChildInfo {
    fn new() -> ChildInfo {
        ChildInfo {
            pid: None,
            last_seen: Instant::now(),
            outbox: None,
            cpus: None,
            detail: String::new(),
            starts: 0,
            last_exit: None,
            down: None,
            gave_up: None,
            kill_reason: None,
            kill_targets: None,
            srs: None,
        }
    }
}

/// A gpu-proc's batch in progress, from its GPU_CLAIM events to its GPU_END events.
struct Batch {
    since: Instant,
    /// The job and circuit spec of its first claim (what `status` shows as current).
    job: u64,
    circuit_name: Option<String>,
    circuit: Option<u64>,
    slots: HashSet<(u64, u32)>,
    /// Slots proved together (fixed at GPU_START).
    size: usize,
    start_ns: Option<u64>,
}

/// A synthesis in progress, from SYNTH_START to SYNTH_END (or its failure).
struct Synthesis {
    since: Instant,
    start_ns: u64,
    circuit: Option<u64>,
}

struct CircuitEntry {
    pvk: PreparedVerifyingKey<Bls12>,
    /// What loading its SRS again needs.
    spec: AnyCircuit,
    shape: CircuitShape,
    params: PathBuf,
}

/// A live job as the pipeline keeps it (the opened job itself is dropped at submit: a Filecoin
/// job holds its parsed request).
struct LiveJob {
    /// The public inputs of every partition, computed through the job when it was accepted:
    /// what each partition's proof is checked against.
    inputs: Vec<Vec<Scalar>>,
    /// The sealed memfd of its request, when it does not travel inline: sent with each of its
    /// synthesis requests, kept until the job ends so a restarted synth-proc gets it again.
    memfd: Option<SealedRequest>,
}

/// Requests up to this size travel inline in the synthesis requests (a built-in circuit's is 12
/// bytes); larger ones (Filecoin requests) in a sealed memfd. See `control::JobRequest`.
const INLINE_REQUEST_MAX: usize = 256;

struct Core {
    ring: Arc<Ring>,
    jobs: JobTable,
    waiters: HashMap<u64, mpsc::Sender<JobOutcome>>,
    circuits: HashMap<u64, CircuitEntry>,
    /// What the pipeline keeps of every live job besides its bookkeeping.
    live: HashMap<u64, LiveJob>,
    children: HashMap<Role, ChildInfo>,
    timeline: VecDeque<TimelineEvent>,
    counters: Counters,
    faults: FaultSettings,
    /// gpu-procs' batches in progress.
    batches: HashMap<Role, Batch>,
    /// Syntheses in progress by (job, partition).
    syntheses: HashMap<(u64, u32), Synthesis>,
    /// Measured proving time per slot, by circuit id (moving average).
    prove_time: HashMap<u64, Duration>,
    /// Measured synthesis time per partition, by circuit id (moving average).
    synth_time: HashMap<u64, Duration>,
    /// gpu-procs configured.
    gpu_roles: Vec<Role>,
    fatal: Option<String>,
    /// Set by [`Pipeline::drain`]: no more partitions are handed to synth-proc.
    holding: bool,
    /// Partitions at synth-proc at once, at most (`synth_concurrency + synth_lookahead`).
    synth_window: usize,
    /// DONE slots refused before the `Published` of what they held arrived: slot → (the
    /// generation it was taken at, why).
    refused_done: HashMap<u32, (u64, String)>,
    verify: bool,
    heartbeat_timeout: Duration,
    stopping: bool,
    /// gpu-procs that confirmed a pause.
    paused: HashSet<Role>,
    /// The SRS images in shared memory (shared with the gpu-procs' spawn hooks).
    srs: Arc<Mutex<SrsSet>>,
    /// Configured circuit ids, in the settings' order.
    circuit_order: Vec<u64>,
    /// What each gpu-proc reported of its device, and its busy time.
    gpu_devices: HashMap<Role, GpuDevice>,
}

/// A gpu-proc's last [`FromChild::Device`] report and its busy time so far.
#[derive(Default)]
struct GpuDevice {
    name: String,
    vram_total_bytes: u64,
    vram_free_bytes: u64,
    srs_device_bytes: u64,
    busy_ns: u64,
}

/// The running split pipeline.
pub struct Pipeline {
    core: Arc<Mutex<Core>>,
    supervisors: Mutex<Vec<Supervisor>>,
    dispatcher: Option<thread::JoinHandle<()>>,
    ring: Arc<Ring>,
    pin_mode: PinMode,
    /// The SRS images in shared memory.
    srs: Arc<Mutex<SrsSet>>,
    /// Held by a preload, an evict, and a submit from its SRS check until its job is in the
    /// table: a job never finds its SRS evicted under it.
    srs_ops: Mutex<()>,
    /// The circuits' pre-compiled constraint systems (synth-proc maps their memfds).
    r1cs: Vec<crate::r1cs::SharedR1cs>,
    /// How each circuit is synthesized, in the settings' order.
    synthesis: Vec<(AnyCircuit, crate::r1cs::Plan)>,
}

impl Pipeline {
    /// Loads the SRS images, creates the ring, starts and pins the children.
    pub fn start(settings: PipelineSettings) -> Result<Pipeline> {
        if settings.circuits.is_empty() {
            return Err(PipelineError::NoCircuit);
        }
        if settings.gpus.is_empty() {
            return Err(PipelineError::NoGpu);
        }
        // Every circuit counted once: the memory model, the SRS check and the slot size need it.
        let mut counted = Vec::new();
        let mut slot_bytes = 0u64;
        let mut own_classes = Vec::new();
        for c in &settings.circuits {
            let t = Instant::now();
            let circuit_error = |source| PipelineError::Circuit {
                spec: c.spec,
                cause: source,
            };
            let shape = c.spec.shape().map_err(circuit_error)?;
            tracing::info!(circuit = %c.spec, constraints = shape.constraints, secs = t.elapsed().as_secs_f64(), "circuit counted");
            let id = c.spec.circuit_id().map_err(circuit_error)?;
            let need = synth_proc::capacity_for(&shape)
                .slot_bytes()
                .ok_or(PipelineError::SlotOverflow(c.spec))?;
            slot_bytes = slot_bytes.max(need);
            if c.slots > 0 {
                own_classes.push(SlotClass {
                    slot_count: u32::try_from(c.slots)
                        .map_err(|_| PipelineError::TooManySlots(c.slots))?,
                    slot_bytes: need,
                });
            }
            counted.push((c, id, shape));
        }
        if let Some(explicit) = settings.slot_bytes {
            if explicit < slot_bytes {
                return Err(PipelineError::SlotTooSmall {
                    explicit,
                    need: slot_bytes,
                });
            }
            slot_bytes = explicit;
        }
        let ring_config = ring_config(settings.slots, slot_bytes, &own_classes)?;
        let layout = layout_for(&settings)?;
        let synth_concurrency = match settings.synth_concurrency {
            0 => layout.synth().len().max(1),
            n => n,
        };
        // Nothing large is allocated before the configuration is known to fit the host.
        if settings.memory_check {
            let plan = memory_plan(&settings, &counted, &ring_config, synth_concurrency);
            let host = memory::HostMemory::read();
            let huge = settings.huge_pages != HugePagePolicy::Plain;
            plan.check(&host, huge).map_err(PipelineError::Memory)?;
            tracing::info!(
                need_mib = plan.ordinary_bytes(&host, huge) >> 20,
                available_mib = host.available >> 20,
                huge_free_mib = host.huge_free >> 20,
                "host memory model:\n{plan}"
            );
        }
        // SRS images in shared memory, checked against their circuits.
        let mut srs = Vec::new();
        let mut circuits = HashMap::new();
        let mut circuit_order = Vec::new();
        for (c, id, shape) in counted {
            let shared = SharedSrs::load(&c.spec, id, &shape, &c.params, HugePagePolicy::Auto)?;
            let pvk = prepare_verifying_key(&shared.view()?.verifying_key());
            circuits.insert(
                id,
                CircuitEntry {
                    pvk,
                    spec: c.spec,
                    shape,
                    params: c.params.clone(),
                },
            );
            if !circuit_order.contains(&id) {
                circuit_order.push(id);
            }
            srs.push(shared);
        }
        let srs = Arc::new(Mutex::new(SrsSet::new(srs)));
        // The ring.
        let region = ring_config
            .region_bytes()
            .and_then(|bytes| Region::create("splitprover-ring", bytes, settings.huge_pages))
            .map_err(PipelineError::Ring)?;
        let ring = Arc::new(Ring::create(region, ring_config).map_err(PipelineError::Ring)?);
        tracing::info!(
            slots = ring.slot_count(),
            classes = %ring_text(&ring_config),
            pages = %ring.page_kind(),
            "ring created"
        );
        // The pre-compiled constraint systems, after the ring so they never take huge pages the
        // ring could have had.
        let (r1cs, synthesis) = precompile(&settings, &circuit_order, &circuits);
        // Where everyone runs.
        let pin_mode = PinMode::select(settings.pin)?;
        tracing::info!(mode = %pin_mode, %layout, "pinning");
        for (i, g) in settings.gpus.iter().enumerate() {
            // supraseal-c2 sizes its host thread pool from the affinity; on a single core the
            // process dies with SIGFPE (seen on an H200 host), so refuse that layout up front.
            if g.backend == BackendKind::Cuda && layout.gpus()[i].len() < 2 {
                return Err(PipelineError::CudaOneCore { device: g.device });
            }
        }
        let synth_window =
            synth_concurrency + settings.synth_lookahead.unwrap_or(synth_concurrency);

        let core = Arc::new(Mutex::new(Core {
            ring: ring.clone(),
            jobs: JobTable::new(1),
            waiters: HashMap::new(),
            circuits,
            live: HashMap::new(),
            children: HashMap::new(),
            timeline: VecDeque::new(),
            counters: Counters::default(),
            faults: settings.faults.clone(),
            batches: HashMap::new(),
            syntheses: HashMap::new(),
            prove_time: HashMap::new(),
            synth_time: HashMap::new(),
            gpu_roles: settings.gpus.iter().map(|g| Role::Gpu(g.device)).collect(),
            fatal: None,
            holding: false,
            synth_window: synth_window.max(1),
            refused_done: HashMap::new(),
            verify: settings.verify,
            heartbeat_timeout: settings.heartbeat_timeout,
            stopping: false,
            paused: HashSet::new(),
            gpu_devices: HashMap::new(),
            srs: srs.clone(),
            circuit_order,
        }));
        let (events_tx, events_rx) = mpsc::channel();
        let ring_fd: Arc<OwnedFd> =
            Arc::new(ring.region().fd().try_clone_to_owned().map_err(|source| {
                PipelineError::Io {
                    what: "cannot duplicate the ring's descriptor",
                    cause: source,
                }
            })?);
        // synth-proc inherits every pre-compiled constraint system's memfd at fixed numbers, at
        // every start (a restarted synth-proc maps the same memory again).
        let mut synth_fds = vec![(ring_fd.clone(), RING_FD)];
        let mut r1cs_entries = Vec::new();
        for shared in &r1cs {
            let fd = FIRST_R1CS_FD + r1cs_entries.len() as i32;
            let dup = shared
                .bytes
                .region()
                .fd()
                .try_clone_to_owned()
                .map_err(|source| PipelineError::Io {
                    what: "cannot duplicate a pre-compiled constraint system's descriptor",
                    cause: source,
                })?;
            synth_fds.push((Arc::new(dup), fd));
            r1cs_entries.push(R1csEntry {
                circuit_id: shared.circuit_id,
                circuit: shared.spec.to_string(),
                fd,
                bytes: shared.len(),
            });
        }
        let mut supervisors = Vec::new();
        supervisors.push(Supervisor::start(
            ChildSpec {
                role: Role::Synth,
                program: settings.program.clone(),
                args: vec!["synth-proc".into()],
                env: settings.child_env.clone(),
                config: ChildConfig::Synth(SynthConfig {
                    concurrency: synth_concurrency,
                    r1cs: r1cs_entries,
                }),
                fds: synth_fds,
                placement: Some(Placement::prepare(&pin_mode, "synth", layout.synth())?),
                restart: settings.restart,
                prepare: None,
            },
            events_tx.clone(),
        ));
        for (i, g) in settings.gpus.iter().enumerate() {
            let spec = ChildSpec {
                role: Role::Gpu(g.device),
                program: settings.program.clone(),
                args: vec!["gpu-proc".into()],
                env: gpu_env(g.device)
                    .into_iter()
                    .chain(settings.child_env.iter().cloned())
                    .collect(),
                config: ChildConfig::Gpu(GpuConfig {
                    device: g.device,
                    backend: g.backend,
                    batch: g.batch.max(1),
                    // The SRS images loaded at each start, with their descriptors.
                    srs: Vec::new(),
                    // Issue 31: no matrices until witness slots are wired.
                    r1cs: Vec::new(),
                }),
                fds: vec![(ring_fd.clone(), RING_FD)],
                placement: Some(Placement::prepare(
                    &pin_mode,
                    &format!("gpu{i}"),
                    &layout.gpus()[i],
                )?),
                restart: settings.restart,
                prepare: Some(srs_set::spawn_hook(srs.clone(), Role::Gpu(g.device))),
            };
            supervisors.push(Supervisor::start(spec, events_tx.clone()));
        }
        drop(events_tx);
        let dispatcher = {
            let core = core.clone();
            thread::Builder::new()
                .name("dispatcher".into())
                .spawn(move || dispatch(core, events_rx))
                .map_err(|source| PipelineError::Io {
                    what: "cannot start the dispatcher thread",
                    cause: source,
                })?
        };
        Ok(Pipeline {
            core,
            supervisors: Mutex::new(supervisors),
            dispatcher: Some(dispatcher),
            ring,
            pin_mode,
            srs,
            srs_ops: Mutex::new(()),
            r1cs,
            synthesis,
        })
    }

    /// The pre-compiled constraint system of `circuit_id`, if it is synthesized through one
    /// (for syntheses in this process: [`crate::r1cs::SharedR1cs::open`]).
    pub fn precompiled(&self, circuit_id: u64) -> Option<&crate::r1cs::SharedR1cs> {
        self.r1cs.iter().find(|r| r.circuit_id == circuit_id)
    }

    /// Makes every gpu-proc stop claiming slots and waits until each has confirmed (a restarted
    /// gpu-proc starts unpaused). GPU-only capacity runs fill the ring meanwhile.
    pub fn pause_gpus(&self, timeout: Duration) -> Result<()> {
        self.send_gpus(ToGpu::Pause)?;
        let gpus = self
            .supervisors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
            - 1;
        let deadline = Instant::now() + timeout;
        while lock(&self.core).paused.len() < gpus {
            if Instant::now() >= deadline {
                return Err(PipelineError::PauseTimeout(timeout));
            }
            thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    /// Lets every gpu-proc claim slots again.
    pub fn resume_gpus(&self) -> Result<()> {
        lock(&self.core).paused.clear();
        self.send_gpus(ToGpu::Resume)
    }

    fn send_gpus(&self, msg: ToGpu) -> Result<()> {
        let core = lock(&self.core);
        for (role, info) in core.children.iter() {
            if let (Role::Gpu(_), Some(o)) = (role, info.outbox.as_ref()) {
                o.try_send_msg(msg.clone())
                    .map_err(|why| PipelineError::Unreachable {
                        role: *role,
                        cause: std::io::Error::other(match why {
                            OutboxRefused::Full => "its message queue is full",
                            OutboxRefused::Closed => "its control channel is closed",
                        }),
                    })?;
            }
        }
        Ok(())
    }

    /// Waits until every child said hello (or `timeout`); errors with the reason a child gave up.
    pub fn wait_ready(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let core = lock(&self.core);
                if let Some(f) = &core.fatal {
                    return Err(PipelineError::Fatal(f.clone()));
                }
                // At start every child must come up: one given up is a configuration error.
                if let Some(f) = core.children.values().find_map(|c| c.gave_up.as_ref()) {
                    return Err(PipelineError::Fatal(f.clone()));
                }
                let sups = self.supervisors.lock().unwrap_or_else(|e| e.into_inner());
                let ready = sups.iter().all(|s| {
                    core.children
                        .get(&s.role())
                        .is_some_and(|c| !c.detail.is_empty() && c.pid.is_some())
                });
                if ready {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(PipelineError::StartTimeout(timeout));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Accepts a job: `circuit` and its request bytes (`kernels::job`). The request is opened
    /// here, through the job, and checked (a Filecoin request is parsed and its vanilla proofs
    /// verified; the public inputs of every partition are computed for the proof checks), so a
    /// bad one is refused at once with the reason, before anything is queued. The bytes are
    /// read from the caller once: synth-proc gets them inline (small requests) or in a sealed
    /// memfd, so the job does not depend on any file after this returns. Errors for a circuit
    /// this pipeline does not serve or a pipeline that gave up; everything later arrives as the
    /// job's outcome.
    pub fn submit_job(&self, circuit: AnyCircuit, request: &[u8]) -> Result<JobHandle> {
        self.submit_job_with(circuit, request, JobOptions::default())
    }

    /// The checks of [`Pipeline::submit_job`] that need no job: the request's size, and a
    /// built-in job's partition count (it names it: refused before the job, or anything per
    /// partition, exists). A caller that records a job before submitting it (the service's
    /// journal) asks here first; the submit runs the same checks again. Errors with
    /// [`PipelineError::RequestTooLarge`] or [`PipelineError::PartitionLimit`]; a request that
    /// does not parse is left to the submit, which refuses it with the reason.
    pub fn admit(&self, circuit: &AnyCircuit, request: &[u8]) -> Result<()> {
        let (max_request_bytes, max_partitions) = {
            let core = lock(&self.core);
            (core.faults.max_request_bytes, core.faults.max_partitions)
        };
        admission(circuit, request, max_request_bytes, max_partitions)
    }

    /// [`Pipeline::submit_job`] with options (its priority). Errors for a priority off the
    /// scale.
    pub fn submit_job_with(
        &self,
        circuit: AnyCircuit,
        request: &[u8],
        options: JobOptions,
    ) -> Result<JobHandle> {
        let t = Instant::now();
        let priority =
            crate::jobs::effective_priority(&circuit.to_string(), options.priority.into())
                .ok_or(PipelineError::BadPriority(options.priority.into()))?;
        let circuit_id = circuit
            .circuit_id()
            .map_err(|source| PipelineError::Circuit {
                spec: circuit,
                cause: source,
            })?;
        let (max_request_bytes, max_partitions) = {
            let core = lock(&self.core);
            if let Some(f) = &core.fatal {
                return Err(PipelineError::Fatal(f.clone()));
            }
            if !core.circuits.contains_key(&circuit_id) {
                return Err(PipelineError::Unserved(circuit));
            }
            (core.faults.max_request_bytes, core.faults.max_partitions)
        };
        admission(&circuit, request, max_request_bytes, max_partitions)?;
        // A Filecoin job's count follows from its proof type and request (bounded by the
        // request size limit); the same cap applies once it is opened.
        let job = kernels::job::open(&circuit, request).map_err(PipelineError::Request)?;
        if job.partitions() > max_partitions as usize {
            return Err(PipelineError::PartitionLimit {
                circuit,
                asked: job.partitions(),
                max: max_partitions,
            });
        }
        let inputs: Vec<Vec<Scalar>> = (0..job.partitions())
            .map(|k| job.public_inputs(k))
            .collect::<Result<_, _>>()
            .map_err(PipelineError::Request)?;
        let partitions = u32::try_from(job.partitions())
            .map_err(|_| PipelineError::TooManyPartitions(job.partitions()))?;
        drop(job);
        let bytes = request.len();
        let (request, memfd) = if bytes <= INLINE_REQUEST_MAX {
            (JobRequest::Inline(request.to_vec()), None)
        } else {
            let memfd = SealedRequest::create(&circuit.to_string(), request)
                .map_err(PipelineError::Handoff)?;
            (JobRequest::Memfd { len: memfd.len() }, Some(memfd))
        };
        tracing::debug!(%circuit, partitions, bytes, secs = t.elapsed().as_secs_f64(), "job accepted");
        // An evicted SRS is loaded again first; held until the job is in the table, so no evict
        // runs between the check and the job.
        let _srs_ops = lock_ops(&self.srs_ops);
        if srs_set::lock(&self.srs).get(circuit_id).is_none() {
            tracing::info!(%circuit, "SRS evicted: loading it for a job");
            self.load_srs(circuit, circuit_id, SRS_CONFIRM_TIMEOUT)?;
        }
        let mut core = lock(&self.core);
        if let Some(f) = &core.fatal {
            return Err(PipelineError::Fatal(f.clone()));
        }
        let id = core.jobs.submit_at(
            JobSpec {
                circuit: circuit.to_string(),
                circuit_id,
                partitions,
                request,
            },
            priority,
        );
        core.live.insert(id, LiveJob { inputs, memfd });
        for p in 0..partitions {
            core.record(TimelineEvent::now(EventKind::JobQueued, id, p, NO_SLOT));
        }
        let (tx, rx) = mpsc::channel();
        core.waiters.insert(id, tx);
        core.pump_synth();
        Ok(JobHandle { id, rx })
    }

    /// [`Pipeline::submit_job`] for a built-in circuit: partition `p` is proved with the witness
    /// of `seed + p`.
    pub fn submit(&self, circuit: &str, seed: u64, partitions: u32) -> Result<JobHandle> {
        let circuit: AnyCircuit = circuit.parse().map_err(|source| PipelineError::BadSpec {
            spec: circuit.to_owned(),
            cause: source,
        })?;
        if circuit.builtin().is_none() {
            return Err(PipelineError::NotSeeded(circuit));
        }
        let request = kernels::job::BuiltinRequest { seed, partitions };
        self.submit_job(circuit, &request.to_bytes())
    }

    /// [`Pipeline::submit_job`] for a Filecoin proof request file (a C1 output in any of its
    /// forms, a PoSt or a SnapDeals request), of `kind` or of the kind it names, which must be
    /// of `family` when one is given (`kernels::job::filecoin_request_kind`). The file is read
    /// once, here; deleting or changing it afterwards does not affect the job. Errors name the
    /// file. The outcome's proofs, concatenated in order, are the proof bytes filecoin-proofs
    /// writes.
    pub fn submit_request(
        &self,
        kind: Option<kernels::filecoin::ProofKind>,
        family: Option<kernels::circuits::ProofFamily>,
        path: &std::path::Path,
    ) -> Result<JobHandle> {
        let named = |source: PipelineError| PipelineError::RequestFile {
            path: path.to_owned(),
            cause: Box::new(source),
        };
        let max = lock(&self.core).faults.max_request_bytes;
        let bytes = read_request_file(path, max).map_err(named)?;
        let kind = kernels::job::filecoin_request_kind(&bytes, kind, family)
            .map_err(|e| named(PipelineError::Request(e)))?;
        self.submit_job(AnyCircuit::Filecoin(kind), &bytes)
            .map_err(named)
    }

    /// Cancels a live job: its partitions not yet handed to synth-proc are dropped, synth-proc
    /// drops those it has not started (`ToSynth::Cancel`), its READY slots are freed unproved,
    /// and what synth-proc or a gpu-proc is still doing for it is dropped when it arrives; its waiter gets the outcome `Err("cancelled")`. Errors with
    /// [`PipelineError::UnknownJob`] for a job that is not live.
    pub fn cancel(&self, job_id: u64) -> Result<Cancelled> {
        let mut core = lock(&self.core);
        let (outcome, was_running) = core
            .jobs
            .cancel(job_id)
            .ok_or(PipelineError::UnknownJob(job_id))?;
        tracing::info!(job = job_id, was_running, "job cancelled");
        core.counters.cancelled += 1;
        if was_running {
            // synth-proc drops the job's partitions it has not started. Best effort: a full
            // queue or a dead synth-proc only means they are synthesized and freed unproved.
            if let Some(o) = core
                .children
                .get(&Role::Synth)
                .and_then(|info| info.outbox.as_ref())
            {
                let _ = o.try_send_msg(ToSynth::Cancel { job_id });
            }
        }
        // Failed outcomes free the job's READY slots (`discard_orphans`).
        core.deliver(outcome);
        core.pump_synth();
        Ok(Cancelled { was_running })
    }

    /// Pids of the running children by role (tests use this to kill them).
    pub fn pids(&self) -> HashMap<Role, u32> {
        let sups = self.supervisors.lock().unwrap_or_else(|e| e.into_inner());
        sups.iter()
            .filter_map(|s| s.pid().map(|p| (s.role(), p)))
            .collect()
    }

    /// Live jobs that run before live job `job_id` (a higher priority, or the same and older);
    /// `None` when it is not live. A count under the core lock: nothing else is built.
    pub fn jobs_ahead(&self, job_id: u64) -> Option<usize> {
        lock(&self.core).jobs.ahead_of(job_id)
    }

    /// A snapshot for `status`.
    pub fn status(&self) -> PipelineStatus {
        let core = lock(&self.core);
        let sups = self.supervisors.lock().unwrap_or_else(|e| e.into_inner());
        let mut children: Vec<ChildStatus> = sups
            .iter()
            .map(|s| {
                let info = core.children.get(&s.role());
                ChildStatus {
                    role: s.role().to_string(),
                    pid: s.pid(),
                    cpus: info.and_then(|i| i.cpus.as_ref().map(|c| c.to_string())),
                    detail: info.map(|i| i.detail.clone()).unwrap_or_default(),
                    restarts: info.map(|i| i.starts.saturating_sub(1)).unwrap_or(0),
                    last_exit: info.and_then(|i| i.last_exit.clone()),
                    state: match info {
                        Some(i) if i.gave_up.is_some() => "given up",
                        Some(i) if i.down.is_some() => "down",
                        _ if s.pid().is_some() => "up",
                        _ => "restarting",
                    }
                    .to_owned(),
                }
            })
            .collect();
        children.sort_by(|a, b| a.role.cmp(&b.role));
        let c = core.jobs.counters();
        PipelineStatus {
            pin_mode: self.pin_mode.to_string(),
            ring_pages: self.ring.page_kind().to_string(),
            ring_slots: self.ring.slot_count(),
            slot_bytes: self.ring.slot_bytes(),
            slot_classes: self
                .ring
                .config()
                .classes()
                .iter()
                .map(|c| SlotClassLine {
                    slots: c.slot_count as usize,
                    slot_bytes: c.slot_bytes,
                })
                .collect(),
            slots: self.ring.counts().into(),
            children,
            jobs: core
                .jobs
                .summaries()
                .into_iter()
                .map(JobLine::from)
                .collect(),
            counters: Counters {
                submitted: c.submitted,
                succeeded: c.succeeded,
                failed: c.failed,
                syntheses_requested: c.syntheses_requested,
                duplicate_results: c.duplicate_results,
                mismatched_results: c.mismatched_results,
                synth_outstanding: core.jobs.outstanding() as u64,
                synth_pending: core.jobs.pending() as u64,
                synth_window: core.synth_window as u64,
                ..core.counters
            },
            fatal: core.fatal.clone(),
            gpus: core.gpu_lines(),
            srs: core.srs_lines(),
            synthesis: self
                .synthesis
                .iter()
                .map(|(spec, plan)| (spec.to_string(), plan.to_string()))
                .collect(),
        }
    }

    /// Every configured circuit's SRS: tier (HOT: mapped by every gpu-proc that is up; WARM: in
    /// shared memory, not mapped by every one of them, or none is up; COLD: not loaded), image
    /// size and live jobs.
    pub fn srs_status(&self) -> Vec<SrsLine> {
        lock(&self.core).srs_lines()
    }

    /// The configured circuit `id` names: its spec or its cuzk name (`porep-32g`,
    /// [`crate::srs::circuit_for_id`]).
    pub fn circuit_named(&self, id: &str) -> Result<AnyCircuit> {
        let core = lock(&self.core);
        let configured: Vec<AnyCircuit> = core
            .circuit_order
            .iter()
            .filter_map(|c| core.circuits.get(c).map(|e| e.spec))
            .collect();
        crate::srs::circuit_for_id(id, &configured).ok_or_else(|| PipelineError::UnknownSrs {
            id: id.to_owned(),
            configured: configured
                .iter()
                .map(|c| {
                    let cuzk = crate::srs::cuzk_circuit_id(c);
                    if cuzk == c.to_string() {
                        format!("`{c}`")
                    } else {
                        format!("`{cuzk}` (`{c}`)")
                    }
                })
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// Loads the SRS of the configured circuit `circuit` (its spec or cuzk name, see
    /// [`Pipeline::circuit_named`]) into shared memory, checked as at start, and waits until
    /// every gpu-proc that is up has mapped it (a gpu-proc down now maps it at its next start).
    /// An SRS already loaded is not read again (`already_loaded`); gpu-procs that lack it still
    /// get it. Errors when a gpu-proc refuses it or does not answer within
    /// [`SRS_CONFIRM_TIMEOUT`].
    pub fn preload_srs(&self, circuit: &str) -> Result<SrsLoaded> {
        let spec = self.circuit_named(circuit)?;
        let id = spec.circuit_id().map_err(|source| PipelineError::Circuit {
            spec,
            cause: source,
        })?;
        let _srs_ops = lock_ops(&self.srs_ops);
        self.load_srs(spec, id, SRS_CONFIRM_TIMEOUT)
    }

    /// Drops the SRS of the configured circuit `circuit` (as [`Pipeline::preload_srs`]): every
    /// gpu-proc drops its backend and mapping (and what the backend derived from it) and
    /// confirms, then the launcher drops its memfd and mapping. Refused with
    /// [`PipelineError::SrsInUse`] while jobs of the circuit are live. A job submitted later
    /// loads it again first.
    pub fn evict_srs(&self, circuit: &str) -> Result<SrsEvicted> {
        let spec = self.circuit_named(circuit)?;
        let id = spec.circuit_id().map_err(|source| PipelineError::Circuit {
            spec,
            cause: source,
        })?;
        let _srs_ops = lock_ops(&self.srs_ops);
        let removed = {
            let mut core = lock(&self.core);
            let jobs = core.ref_count(id);
            if jobs > 0 {
                return Err(PipelineError::SrsInUse {
                    circuit: spec,
                    jobs,
                });
            }
            let removed = srs_set::lock(&self.srs).remove(id);
            core.reconcile_srs();
            removed
        };
        let timeout = SRS_CONFIRM_TIMEOUT;
        self.wait_srs(spec, "evict", timeout, |gpu| {
            !gpu.mapped.contains(&id) && !gpu.loading.contains(&id) && !gpu.evicting.contains(&id)
        })?;
        let Some(removed) = removed else {
            return Ok(SrsEvicted {
                was_loaded: false,
                freed_bytes: 0,
            });
        };
        let freed_bytes = removed.bytes;
        // The last reference: its mapping and memfd go now (messages that carried a duplicate of
        // the descriptor were sent, their copies closed, before the gpu-procs answered).
        drop(removed);
        tracing::info!(circuit = %spec, freed_bytes, "SRS evicted");
        Ok(SrsEvicted {
            was_loaded: true,
            freed_bytes,
        })
    }

    /// Loads circuit `spec`'s (of id `id`) SRS if it is not in shared memory, sends it to every gpu-proc that
    /// lacks it and waits for their answers. The caller holds `srs_ops`.
    fn load_srs(&self, spec: AnyCircuit, id: u64, timeout: Duration) -> Result<SrsLoaded> {
        let t = Instant::now();
        let (shape, params) = {
            let core = lock(&self.core);
            let entry = core
                .circuits
                .get(&id)
                .ok_or(PipelineError::Unserved(spec))?;
            (entry.shape, entry.params.clone())
        };
        let existing = srs_set::lock(&self.srs).get(id).map(|s| s.bytes);
        let (already_loaded, bytes) = match existing {
            Some(bytes) => (true, bytes),
            None => {
                // Read and checked with no lock held: jobs of other circuits go on meanwhile.
                let shared = SharedSrs::load(&spec, id, &shape, &params, HugePagePolicy::Auto)?;
                let bytes = shared.bytes;
                srs_set::lock(&self.srs).insert(shared);
                (false, bytes)
            }
        };
        {
            let mut core = lock(&self.core);
            for info in core.children.values_mut() {
                if let Some(gpu) = info.srs.as_mut() {
                    // Asked again: a gpu-proc that refused it before is sent it again.
                    gpu.refused.remove(&id);
                }
            }
            core.reconcile_srs();
        }
        self.wait_srs(spec, "load", timeout, |gpu| gpu.mapped.contains(&id))?;
        let load_ms = t.elapsed().as_millis() as u64;
        tracing::info!(circuit = %spec, already_loaded, bytes, load_ms, "SRS loaded and mapped by every gpu-proc");
        Ok(SrsLoaded {
            already_loaded,
            load_ms,
            bytes,
        })
    }

    /// Waits until `done` holds for every gpu-proc that is serving (one that exits meanwhile is
    /// not waited for), a gpu-proc refused a load of `spec`, or `timeout`.
    fn wait_srs(
        &self,
        spec: AnyCircuit,
        action: &'static str,
        timeout: Duration,
        done: impl Fn(&GpuSrs) -> bool,
    ) -> Result<()> {
        let id = spec.circuit_id().map_err(|source| PipelineError::Circuit {
            spec,
            cause: source,
        })?;
        let deadline = Instant::now() + timeout;
        loop {
            {
                let core = lock(&self.core);
                if let Some(f) = &core.fatal {
                    return Err(PipelineError::Fatal(f.clone()));
                }
                let mut all = true;
                for (role, info) in &core.children {
                    let Some(gpu) = info.srs.as_ref() else {
                        continue;
                    };
                    if let Some(cause) = gpu.refused.get(&id) {
                        return Err(PipelineError::SrsRefused {
                            role: *role,
                            circuit: spec,
                            cause: cause.clone(),
                        });
                    }
                    all &= done(gpu);
                }
                if all {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(PipelineError::SrsTimeout {
                    action,
                    circuit: spec,
                    timeout,
                });
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// The job counters.
    pub fn counters(&self) -> JobCounters {
        lock(&self.core).jobs.counters()
    }

    /// Takes the timeline events recorded so far (the last [`FaultSettings::timeline_events`]
    /// when bounded).
    pub fn take_timeline(&self) -> Vec<TimelineEvent> {
        lock(&self.core).timeline.drain(..).collect()
    }

    /// The ring (tests and benches look at it).
    pub fn ring(&self) -> &Arc<Ring> {
        &self.ring
    }

    /// Asks every child to finish and exit, waits for them, fails the jobs still live.
    pub fn shutdown(mut self) {
        self.stop_all();
    }

    /// [`Pipeline::shutdown`] for a pipeline that is still shared: tells every child to exit and
    /// waits for it (up to 20 s each, then SIGKILL), which removes their cgroups. The dispatcher
    /// ends once the children are gone and is joined when the pipeline is dropped; live jobs are
    /// not failed here (the service's journal keeps them). The service uses it when a client
    /// thread still holds the pipeline at the end of a stop.
    pub fn stop_children(&self) {
        for s in self
            .supervisors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            s.request_stop();
        }
        {
            let mut core = lock(&self.core);
            core.stopping = true;
            for (role, info) in core.children.iter() {
                if let Some(o) = info.outbox.as_ref() {
                    // A full queue: the supervisor kills the child after its grace.
                    let _ = match role {
                        Role::Synth => o.try_send_msg(ToSynth::Shutdown),
                        Role::Gpu(_) => o.try_send_msg(ToGpu::Shutdown),
                    };
                }
            }
        }
        let sups: Vec<Supervisor> = self
            .supervisors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .collect();
        for s in sups {
            s.stop(Duration::from_secs(20));
        }
    }

    fn stop_all(&mut self) {
        self.stop_children();
        if let Some(d) = self.dispatcher.take() {
            let _ = d.join();
        }
        let mut core = lock(&self.core);
        let live: Vec<u64> = core.waiters.keys().copied().collect();
        for id in live {
            if let Some(outcome) = core
                .jobs
                .fail(id, "the pipeline shut down before the job finished".into())
            {
                core.deliver(outcome);
            }
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        if self.dispatcher.is_some() {
            self.stop_all();
        }
    }
}

/// One gpu-proc per GPU: supraseal-c2 spreads a batch over every GPU it sees, so each gpu-proc
/// sees only its own device (index `device` among those the launcher may use).
fn gpu_env(device: u32) -> Vec<(String, String)> {
    let ours = std::env::var(crate::env::CUDA_VISIBLE_DEVICES).ok();
    vec![(
        crate::env::CUDA_VISIBLE_DEVICES.to_owned(),
        visible_device(ours.as_deref(), device),
    )]
}

/// The `CUDA_VISIBLE_DEVICES` value of gpu-proc `device` when the launcher's own is `ours`.
fn visible_device(ours: Option<&str>, device: u32) -> String {
    match ours {
        Some(list) if !list.trim().is_empty() => list
            .split(',')
            .nth(device as usize)
            .map(|d| d.trim().to_owned())
            .unwrap_or_else(|| device.to_string()),
        _ => device.to_string(),
    }
}

/// The ring of `shared` slots of `slot_bytes` (the largest circuit's size) and the circuits'
/// own slot classes; classes of one size are merged.
fn ring_config(shared: usize, slot_bytes: u64, own: &[SlotClass]) -> Result<RingConfig> {
    let mut classes = vec![SlotClass {
        slot_count: u32::try_from(shared).map_err(|_| PipelineError::TooManySlots(shared))?,
        slot_bytes,
    }];
    classes.extend_from_slice(own);
    RingConfig::with_classes(&classes).map_err(PipelineError::Ring)
}

/// `3 slots x 15.61 GiB + 8 slots x 112.0 MiB`, largest first.
fn ring_text(config: &RingConfig) -> String {
    config
        .classes()
        .iter()
        .rev()
        .map(|c| format!("{} slots x {}", c.slot_count, memory::gib(c.slot_bytes)))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// The memory model of `settings` ([`memory`]), from the counted circuits.
fn memory_plan(
    settings: &PipelineSettings,
    counted: &[(&CircuitSetting, u64, CircuitShape)],
    ring_config: &RingConfig,
    synth_concurrency: usize,
) -> memory::MemoryPlan {
    use memory::gib;
    let mut plan = memory::MemoryPlan::default();
    let mut srs_total = 0;
    for (c, id, shape) in counted {
        // An SRS file that cannot be scanned is reported by its load, with the reason.
        let bytes = kernels::srs::scan_params_file(&c.params)
            .ok()
            .and_then(|lens| kernels::srs::SrsImage::size_for(&lens).ok())
            .unwrap_or(0) as u64;
        srs_total += bytes;
        plan.add(format!("SRS image of {}", c.spec), bytes, true);
        if settings.synthesis.precompiled {
            let cached = settings
                .synthesis
                .cache_dir
                .as_deref()
                .map(|d| crate::r1cs::cache_file(d, &c.spec, *id))
                .and_then(|f| std::fs::metadata(f).ok())
                .map(|m| m.len());
            let bytes = cached
                .unwrap_or_else(|| crate::r1cs::estimated_bytes(shape))
                .min(settings.synthesis.budget_bytes);
            plan.add(
                format!(
                    "matrices of {} ({})",
                    c.spec,
                    if cached.is_some() {
                        "cached"
                    } else {
                        "estimated"
                    }
                ),
                bytes,
                true,
            );
        }
    }
    let ring = ring_config.region_bytes().map_or(u64::MAX, |b| b as u64);
    plan.add(format!("ring: {}", ring_text(ring_config)), ring, true);
    plan.add(
        format!(
            "synthesis: {synth_concurrency} workers x {}",
            gib(settings.synthesis.worker_bytes)
        ),
        synth_concurrency as u64 * settings.synthesis.worker_bytes,
        false,
    );
    let cuda = settings
        .gpus
        .iter()
        .filter(|g| g.backend == BackendKind::Cuda)
        .count() as u64;
    if cuda > 0 {
        plan.add(
            format!("supraseal-c2's own SRS copy: {cuda} cuda gpu-proc(s)"),
            cuda * srs_total,
            false,
        );
    }
    plan.add("the processes themselves", memory::PROCESS_BYTES, false);
    plan
}

/// The pre-compiled constraint system of every configured circuit that has one within the
/// budget (in the settings' order, the budget shared), and how each circuit is synthesized.
fn precompile(
    settings: &PipelineSettings,
    order: &[u64],
    circuits: &HashMap<u64, CircuitEntry>,
) -> (
    Vec<crate::r1cs::SharedR1cs>,
    Vec<(AnyCircuit, crate::r1cs::Plan)>,
) {
    use crate::r1cs::{load_or_record, Plan};
    let mut shared = Vec::new();
    let mut plans = Vec::new();
    let mut budget = settings.synthesis.budget_bytes;
    for id in order {
        let c = &circuits[id];
        if !settings.synthesis.precompiled {
            plans.push((c.spec, Plan::Full("pre-compiled matrices are off".into())));
            continue;
        }
        match load_or_record(
            &c.spec,
            *id,
            &c.shape,
            settings.synthesis.cache_dir.as_deref(),
            budget,
        ) {
            Ok(r1cs) => {
                budget = budget.saturating_sub(r1cs.len());
                plans.push((
                    c.spec,
                    Plan::Precompiled {
                        bytes: r1cs.len(),
                        origin: r1cs.origin.clone(),
                    },
                ));
                shared.push(r1cs);
            }
            Err(why) => {
                tracing::warn!(circuit = %c.spec, "synthesized in full: {why}");
                plans.push((c.spec, Plan::Full(why)));
            }
        }
    }
    (shared, plans)
}

fn layout_for(settings: &PipelineSettings) -> Result<Layout> {
    let explicit: Option<Vec<CpuList>> = settings.gpus.iter().map(|g| g.cpus.clone()).collect();
    match (&settings.synth_cpus, explicit) {
        (Some(synth), Some(gpus)) => Ok(Layout::explicit(synth.clone(), gpus)?),
        (Some(_), None) => Err(PipelineError::PartialLayout),
        (None, _) => {
            let available = CpuList::allowed()?;
            Layout::auto(&available, settings.gpus.len(), settings.gpu_cores)
                .map_err(PipelineError::Layout)
        }
    }
}

/// [`Pipeline::admit`]'s checks against the limits `max_request_bytes` and `max_partitions`.
fn admission(
    circuit: &AnyCircuit,
    request: &[u8],
    max_request_bytes: u64,
    max_partitions: u32,
) -> Result<()> {
    if request.len() as u64 > max_request_bytes {
        return Err(PipelineError::RequestTooLarge {
            bytes: request.len(),
            max: max_request_bytes,
        });
    }
    if circuit.builtin().is_some() {
        // A request that does not parse is refused by `kernels::job::open`, with the reason.
        if let Ok(r) = kernels::job::BuiltinRequest::from_bytes(request) {
            if r.partitions > max_partitions {
                return Err(PipelineError::PartitionLimit {
                    circuit: *circuit,
                    asked: r.partitions as usize,
                    max: max_partitions,
                });
            }
        }
    }
    Ok(())
}

/// Reads a request file for a job as the launcher ([`crate::request_file::read`]: no symlink,
/// no FIFO or device, at most `max` bytes, checked before reading).
pub fn read_request_file(path: &std::path::Path, max: u64) -> Result<Vec<u8>> {
    crate::request_file::read(path, max, crate::request_file::Reader::Launcher)
        .map_err(PipelineError::RequestFileRefused)
}

fn lock(core: &Mutex<Core>) -> MutexGuard<'_, Core> {
    core.lock().unwrap_or_else(|e| e.into_inner())
}

fn lock_ops(ops: &Mutex<()>) -> MutexGuard<'_, ()> {
    ops.lock().unwrap_or_else(|e| e.into_inner())
}

impl Core {
    /// Live jobs of circuit `id`.
    fn ref_count(&self, id: u64) -> u32 {
        self.live
            .keys()
            .filter(|job| self.jobs.circuit_id(**job) == Some(id))
            .count() as u32
    }

    fn srs_lines(&self) -> Vec<SrsLine> {
        let set = srs_set::lock(&self.srs);
        let serving: Vec<&GpuSrs> = self
            .children
            .values()
            .filter_map(|info| info.srs.as_ref())
            .collect();
        self.circuit_order
            .iter()
            .filter_map(|id| self.circuits.get(id).map(|entry| (*id, entry.spec)))
            .map(|(id, spec)| {
                let (tier, size_bytes) = match set.get(id) {
                    None => (SrsTier::Cold, 0),
                    Some(srs) => {
                        let hot = !serving.is_empty()
                            && serving.iter().all(|gpu| gpu.mapped.contains(&id));
                        (if hot { SrsTier::Hot } else { SrsTier::Warm }, srs.bytes)
                    }
                };
                SrsLine {
                    circuit: spec.to_string(),
                    circuit_id: crate::srs::cuzk_circuit_id(&spec),
                    tier,
                    size_bytes,
                    ref_count: self.ref_count(id),
                }
            })
            .collect()
    }

    /// Brings every serving gpu-proc's SRS images to the loaded set: `LoadSrs` (with the memfd)
    /// for what it lacks, `EvictSrs` for what it holds beyond it; nothing is sent twice before
    /// its answer, and a load it refused is not sent again until the next preload.
    fn reconcile_srs(&mut self) {
        let set = srs_set::lock(&self.srs);
        let want = set.ids();
        for (role, info) in self.children.iter_mut() {
            let (Some(gpu), Some(outbox)) = (info.srs.as_mut(), info.outbox.as_ref()) else {
                continue;
            };
            for id in want.iter().copied() {
                if gpu.mapped.contains(&id)
                    || gpu.loading.contains(&id)
                    || gpu.refused.contains_key(&id)
                {
                    continue;
                }
                let Some(srs) = set.get(id) else { continue };
                let fd = match srs.region.fd().try_clone_to_owned() {
                    Ok(fd) => fd,
                    Err(e) => {
                        gpu.refused
                            .insert(id, format!("cannot duplicate the SRS descriptor: {e}"));
                        continue;
                    }
                };
                let msg = ToGpu::LoadSrs {
                    circuit_id: id,
                    circuit: srs.spec.to_string(),
                    params_path: srs.params_path.clone(),
                };
                let sent = outbox.try_send(Box::new(move |s: &mut control::Sender| {
                    s.send_with_fd(&msg, fd.as_fd())
                }));
                match sent {
                    Ok(()) => {
                        gpu.loading.insert(id);
                    }
                    // Sent again on its next answer or the next reconcile.
                    Err(why) => tracing::warn!(%role, ?why, "cannot send an SRS load now"),
                }
            }
            let extra: Vec<u64> = gpu
                .mapped
                .iter()
                .chain(gpu.loading.iter())
                .copied()
                .filter(|id| !want.contains(id) && !gpu.evicting.contains(id))
                .collect();
            for id in extra {
                if gpu.loading.contains(&id) {
                    // Evicted once its load is answered.
                    continue;
                }
                match outbox.try_send_msg(ToGpu::EvictSrs { circuit_id: id }) {
                    Ok(()) => {
                        gpu.evicting.insert(id);
                    }
                    Err(why) => tracing::warn!(%role, ?why, "cannot send an SRS evict now"),
                }
            }
        }
    }

    /// Sends pending partitions to synth-proc in priority order, if one is running, while fewer
    /// than `synth_window` are there, without blocking: what does not fit in its queue stays
    /// pending for a later tick.
    fn pump_synth(&mut self) {
        if self.holding {
            return;
        }
        let Some(outbox) = self
            .children
            .get(&Role::Synth)
            .and_then(|info| info.outbox.as_ref())
        else {
            return;
        };
        // The express lane first (HIGH/CRITICAL, beside synth-proc's queue), then the window.
        let mut requests = self.jobs.take_express(EXPRESS_LANE);
        let room = self.synth_window.saturating_sub(self.jobs.outstanding());
        requests.extend(self.jobs.take_pending(room));
        let mut unsent = Vec::new();
        let mut handouts = Vec::new();
        let mut refused = None;
        for req in requests {
            if refused.is_some() {
                unsent.push(req);
                continue;
            }
            let memfd = match &req.request {
                JobRequest::Memfd { .. } => {
                    match self.live.get(&req.job_id).and_then(|j| j.memfd.as_ref()) {
                        // A duplicate for the writer thread: the job may end before it is sent.
                        Some(m) => m.fd().try_clone_to_owned().ok(),
                        None => None,
                    }
                }
                JobRequest::Inline(_) => None,
            };
            let kept = req.clone();
            let handout =
                TimelineEvent::now(EventKind::SynthHandout, req.job_id, req.partition, NO_SLOT);
            let msg: child::Outgoing = Box::new(move |s: &mut control::Sender| match memfd {
                Some(fd) => s.send_with_fd(&ToSynth::Synthesize(req), fd.as_fd()),
                // Without its memfd synth-proc fails the partition, naming what is missing.
                None => s.send(&ToSynth::Synthesize(req)),
            });
            match outbox.try_send(msg) {
                Ok(()) => handouts.push(handout),
                Err(why) => {
                    refused = Some(why);
                    unsent.push(kept);
                }
            }
        }
        for e in handouts {
            self.record(e);
        }
        if !unsent.is_empty() {
            self.counters.sends_deferred += unsent.len() as u64;
            if refused == Some(OutboxRefused::Closed) {
                tracing::warn!("synth-proc's control channel is closed; requests kept pending");
            }
            self.jobs.unsend(&unsent);
        }
        let outstanding = self.jobs.outstanding() as u64;
        self.counters.synth_outstanding_max = self.counters.synth_outstanding_max.max(outstanding);
    }

    fn record(&mut self, e: TimelineEvent) {
        push_bounded(&mut self.timeline, e, self.faults.timeline_events);
    }

    fn deliver(&mut self, outcome: JobOutcome) {
        // The request memfd goes with the job.
        self.live.remove(&outcome.job_id);
        for p in 0..outcome.spec.partitions {
            self.record(TimelineEvent::now(
                EventKind::ProofDone,
                outcome.job_id,
                p,
                NO_SLOT,
            ));
        }
        match &outcome.result {
            Ok(_) => tracing::info!(
                job = outcome.job_id,
                ms = outcome.elapsed.as_millis() as u64,
                "job done"
            ),
            Err(e) => tracing::warn!(job = outcome.job_id, "job failed: {e}"),
        }
        let failed = outcome.result.is_err();
        if let Some(w) = self.waiters.remove(&outcome.job_id) {
            let _ = w.send(outcome);
        }
        if failed {
            self.discard_orphans();
        }
    }

    /// Takes READY slots whose partition nobody waits for any more (their job ended) out of the
    /// ring, so no gpu-proc proves (or dies on) them again.
    fn discard_orphans(&mut self) {
        let owner = shm_protocol::current_owner();
        let ring = self.ring.clone();
        for s in ring.snapshot() {
            let (Some(SlotState::Ready), Some(meta)) = (s.state, s.meta) else {
                continue;
            };
            if self.jobs.waiting(meta.job_id, meta.partition) {
                continue;
            }
            match ring.claim_ready_at(owner, s.index, s.generation) {
                Ok(Some(claimed)) => {
                    let m = claimed.meta();
                    if self.jobs.waiting(m.job_id, m.partition) {
                        // Rewritten since the snapshot: someone waits for this one.
                        let _ = claimed.release();
                        continue;
                    }
                    match claimed.discard() {
                        Ok(()) => {
                            tracing::info!(
                                slot = s.index,
                                job = m.job_id,
                                partition = m.partition,
                                "slot of an ended job freed unproved"
                            );
                            self.counters.slots_discarded += 1;
                        }
                        Err(e) => tracing::warn!(slot = s.index, "cannot free a slot: {e}"),
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(slot = s.index, "cannot claim a slot to free it: {e}"),
            }
        }
    }

    /// One failed attempt of a partition (see [`JobTable::attempt_failed`]).
    fn attempt_failed(&mut self, job_id: u64, partition: u32, reason: String, resynthesize: bool) {
        let max = self.faults.max_attempts;
        match self
            .jobs
            .attempt_failed(job_id, partition, reason.clone(), max, resynthesize)
        {
            Attempt::Ignored => {}
            Attempt::Retry { attempts } => {
                self.counters.failed_attempts += 1;
                tracing::warn!(
                    job = job_id,
                    partition,
                    attempts,
                    max,
                    "attempt failed, retrying: {reason}"
                );
                if resynthesize {
                    self.pump_synth();
                }
            }
            Attempt::JobFailed(outcome) => {
                self.counters.failed_attempts += 1;
                self.deliver(outcome);
            }
        }
    }

    /// Collects every DONE slot: stores its result with its job and frees the slot.
    fn sweep_done(&mut self) {
        let owner = shm_protocol::current_owner();
        let ring = self.ring.clone();
        loop {
            let done = match ring.try_take_done(owner) {
                Ok(Some(d)) => d,
                Ok(None) => break,
                Err(e) => {
                    tracing::error!("collecting done slots: {e}");
                    break;
                }
            };
            let meta = done.meta();
            let (slot, generation) = (done.index() as u32, done.generation());
            if self.jobs.ended(meta.job_id) && self.jobs.occupant(slot, generation).is_none() {
                // The result of a job that ended (cancelled, or failed) while this slot was
                // CLAIMED: nobody waits for it, and the table knows no other partition in it.
                if let Err(e) = done.free() {
                    tracing::error!("freeing a done slot: {e}");
                }
                tracing::debug!(
                    slot,
                    job = meta.job_id,
                    partition = meta.partition,
                    "result of an ended job dropped"
                );
                self.jobs.counters_mut().duplicate_results += 1;
                continue;
            }
            let result = match done.result() {
                Ok(SlotResult::Proof(bytes)) => Ok(bytes.to_vec()),
                Ok(SlotResult::Failed(msg)) => Err(msg.to_owned()),
                Err(e) => Err(format!("unreadable result in slot {}: {e}", done.index())),
            };
            if let Err(e) = done.free() {
                tracing::error!("freeing a done slot: {e}");
            }
            if let Err(e) = self.jobs.check_done(
                meta.job_id,
                meta.partition,
                meta.circuit_id,
                slot,
                generation,
            ) {
                tracing::error!("done slot refused: {e}");
                self.jobs.counters_mut().mismatched_results += 1;
                let reason = format!("its done slot was refused: {e}");
                // The slot's metadata is a child's word: the partition that was published in
                // this slot is what it held, and that one is synthesized again (the partition
                // the metadata names, if any, has a slot of its own). Before the `Published` of
                // what it held arrives nobody knows it: the refusal waits for that message.
                match self.jobs.occupant(slot, generation) {
                    Some((job, partition)) => self.attempt_failed(job, partition, reason, true),
                    None => {
                        self.refused_done.insert(slot, (generation, reason));
                    }
                }
                continue;
            }
            match result {
                Ok(proof) => {
                    let checking = Instant::now();
                    let checked =
                        self.check_proof(meta.job_id, meta.partition, meta.circuit_id, proof);
                    self.jobs
                        .add_time(meta.job_id, Phase::Verify, checking.elapsed());
                    match checked {
                        Ok(proof) => {
                            if let Some(outcome) =
                                self.jobs.result(meta.job_id, meta.partition, Ok(proof))
                            {
                                self.deliver(outcome);
                            }
                        }
                        Err(e) => self.attempt_failed(meta.job_id, meta.partition, e, true),
                    }
                }
                Err(e) => {
                    if let Some(outcome) = self.jobs.result(meta.job_id, meta.partition, Err(e)) {
                        self.deliver(outcome);
                    }
                }
            }
        }
    }

    fn check_proof(
        &self,
        job_id: u64,
        partition: u32,
        circuit_id: u64,
        proof: Vec<u8>,
    ) -> Result<Vec<u8>, String> {
        if !self.verify {
            return Ok(proof);
        }
        let Some(entry) = self.circuits.get(&circuit_id) else {
            return Err(format!("slot carries unknown circuit id {circuit_id:#x}"));
        };
        // A job no longer live has ended: this result is a duplicate the job table ignores.
        let Some(live) = self.live.get(&job_id) else {
            return Ok(proof);
        };
        let inputs = live
            .inputs
            .get(partition as usize)
            .ok_or_else(|| format!("partition {partition} is out of range"))?;
        let parsed = bellperson::groth16::Proof::<Bls12>::read(&proof[..])
            .map_err(|e| format!("malformed proof: {e}"))?;
        match verify_proof(&entry.pvk, &parsed, inputs) {
            Ok(true) => Ok(proof),
            Ok(false) => Err("the proof does not verify".into()),
            Err(e) => Err(format!("verification error: {e}")),
        }
    }

    /// Follows a child's progress from its timeline events (the deadlines' clock).
    fn track(&mut self, role: Role, e: &TimelineEvent) {
        let key = (e.job_id, e.partition);
        match e.kind {
            EventKind::GpuClaim => {
                let circuit = self.jobs.circuit_id(e.job_id);
                let circuit_name = self.jobs.circuit(e.job_id).map(str::to_owned);
                let batch = self.batches.entry(role).or_insert_with(|| Batch {
                    since: Instant::now(),
                    job: e.job_id,
                    circuit_name,
                    circuit,
                    slots: HashSet::new(),
                    size: 0,
                    start_ns: None,
                });
                batch.slots.insert(key);
            }
            EventKind::GpuStart => {
                if let Some(b) = self.batches.get_mut(&role) {
                    if b.start_ns.is_none() {
                        b.start_ns = Some(e.t_ns);
                        b.size = b.slots.len().max(1);
                    }
                }
            }
            EventKind::GpuEnd => {
                let Some(b) = self.batches.get_mut(&role) else {
                    return;
                };
                if let Some(start) = b.start_ns {
                    let share = e.t_ns.saturating_sub(start) / b.size.max(1) as u64;
                    self.jobs
                        .add_time(e.job_id, Phase::Gpu, Duration::from_nanos(share));
                }
                b.slots.remove(&key);
                if b.slots.is_empty() {
                    let b = self.batches.remove(&role).expect("present above");
                    if let Some(start) = b.start_ns {
                        self.gpu_devices.entry(role).or_default().busy_ns +=
                            e.t_ns.saturating_sub(start);
                    }
                    if let (Some(circuit), Some(start)) = (b.circuit, b.start_ns) {
                        let per_slot =
                            Duration::from_nanos(e.t_ns.saturating_sub(start) / b.size as u64);
                        average(self.prove_time.entry(circuit).or_insert(per_slot), per_slot);
                    }
                }
            }
            EventKind::SynthStart => {
                self.jobs.synthesis_started(e.job_id);
                let circuit = self.jobs.circuit_id(e.job_id);
                self.syntheses.insert(
                    key,
                    Synthesis {
                        since: Instant::now(),
                        start_ns: e.t_ns,
                        circuit,
                    },
                );
            }
            EventKind::SynthEnd => {
                if let Some(s) = self.syntheses.remove(&key) {
                    let took = Duration::from_nanos(e.t_ns.saturating_sub(s.start_ns));
                    self.jobs.add_time(e.job_id, Phase::Synthesis, took);
                    if let Some(circuit) = s.circuit {
                        average(self.synth_time.entry(circuit).or_insert(took), took);
                    }
                }
            }
            _ => {}
        }
    }

    /// One [`GpuLine`] per configured gpu-proc, by ordinal.
    fn gpu_lines(&self) -> Vec<GpuLine> {
        let mut lines: Vec<GpuLine> = self
            .gpu_roles
            .iter()
            .map(|&role| {
                let ordinal = match role {
                    Role::Gpu(i) => i,
                    Role::Synth => u32::MAX,
                };
                let device = self.gpu_devices.get(&role);
                let batch = self.batches.get(&role);
                GpuLine {
                    ordinal,
                    role: role.to_string(),
                    name: device.map(|d| d.name.clone()).unwrap_or_default(),
                    vram_total_bytes: device.map_or(0, |d| d.vram_total_bytes),
                    vram_free_bytes: device.map_or(0, |d| d.vram_free_bytes),
                    srs_device_bytes: device.map_or(0, |d| d.srs_device_bytes),
                    current_job: batch.map(|b| b.job),
                    current_circuit: batch.and_then(|b| b.circuit_name.clone()),
                    busy_ns: device.map_or(0, |d| d.busy_ns),
                }
            })
            .collect();
        lines.sort_by_key(|l| l.ordinal);
        lines
    }

    fn on_message(&mut self, role: Role, msg: FromChild) {
        match msg {
            FromChild::Hello { detail, .. } => {
                if let Some(info) = self.children.get_mut(&role) {
                    info.detail = detail;
                    info.down = None;
                    if let Role::Gpu(_) = role {
                        // It mapped what its start was given; a load or an evict since then
                        // is sent now.
                        info.srs = Some(GpuSrs {
                            mapped: srs_set::lock(&self.srs).spawned_with(role),
                            ..GpuSrs::default()
                        });
                    }
                }
                self.reconcile_srs();
            }
            FromChild::SrsLoaded { circuit_id, error } => {
                if let Some(gpu) = self.children.get_mut(&role).and_then(|i| i.srs.as_mut()) {
                    gpu.loading.remove(&circuit_id);
                    match error {
                        None => {
                            gpu.mapped.insert(circuit_id);
                        }
                        Some(e) => {
                            tracing::error!(%role, circuit_id, "SRS load refused: {e}");
                            gpu.refused.insert(circuit_id, e);
                        }
                    }
                }
                // Evicted meanwhile: dropped again.
                self.reconcile_srs();
            }
            FromChild::SrsEvicted { circuit_id } => {
                if let Some(gpu) = self.children.get_mut(&role).and_then(|i| i.srs.as_mut()) {
                    gpu.evicting.remove(&circuit_id);
                    gpu.mapped.remove(&circuit_id);
                }
                // Loaded again meanwhile: sent again.
                self.reconcile_srs();
            }
            FromChild::Published {
                job_id,
                partition,
                slot,
                generation,
            } => {
                self.syntheses.remove(&(job_id, partition));
                self.jobs.published(job_id, partition, slot, generation);
                // Its slot came back DONE and was refused before this message arrived.
                if let Some((refused_at, _)) = self.refused_done.get(&slot) {
                    if generation < *refused_at {
                        let (_, reason) = self.refused_done.remove(&slot).expect("present");
                        self.attempt_failed(job_id, partition, reason, true);
                    }
                }
                if !self.jobs.waiting(job_id, partition) {
                    // Its job ended meanwhile: nobody proves it.
                    self.discard_orphans();
                }
                // Room at synth-proc for the next partition.
                self.pump_synth();
            }
            FromChild::SynthFailed {
                job_id,
                partition,
                error,
            } => {
                self.syntheses.remove(&(job_id, partition));
                if let Some(outcome) = self.jobs.result(job_id, partition, Err(error)) {
                    self.deliver(outcome);
                }
                // After the result: a job it ended counts this partition as still held.
                self.jobs.synth_ended(job_id, partition);
                self.pump_synth();
            }
            FromChild::Proved { .. } => self.sweep_done(),
            FromChild::Paused => {
                self.paused.insert(role);
            }
            FromChild::Device {
                ordinal: _,
                name,
                vram_total_bytes,
                vram_free_bytes,
                srs_device_bytes,
            } => {
                let d = self.gpu_devices.entry(role).or_default();
                d.name = name;
                d.vram_total_bytes = vram_total_bytes;
                d.vram_free_bytes = vram_free_bytes;
                d.srs_device_bytes = srs_device_bytes;
            }
            FromChild::Heartbeat => {}
            FromChild::Event(e) => {
                if e.kind == EventKind::SynthStart {
                    self.counters.syntheses_started += 1;
                }
                self.track(role, &e);
                self.record(e)
            }
        }
    }

    /// Kills children that stopped beating; their supervisors restart them.
    fn check_heartbeats(&mut self) {
        let now = Instant::now();
        for (role, info) in &mut self.children {
            if let Some(pid) = info.pid {
                let silent = now.duration_since(info.last_seen);
                if silent > self.heartbeat_timeout {
                    tracing::error!(%role, pid, silent_s = silent.as_secs_f64(), "no heartbeat: killing the child");
                    child::kill(pid, libc::SIGKILL);
                    self.counters.hung_kills += 1;
                    info.kill_reason
                        .get_or_insert_with(|| format!("{role} stopped beating and was killed"));
                    info.last_seen = now; // once per timeout
                }
            }
        }
    }

    /// Kills a gpu-proc whose batch, or a synth-proc whose synthesis, runs past its deadline.
    fn check_deadlines(&mut self) {
        let mut late: Vec<(Role, String)> = Vec::new();
        let mut late_syntheses = HashSet::new();
        for (role, b) in &self.batches {
            let per_slot = b.circuit.and_then(|c| self.prove_time.get(&c).copied());
            let deadline = self.faults.deadline(
                per_slot,
                b.slots.len().max(b.size),
                self.faults.first_proof_deadline,
            );
            if b.since.elapsed() > deadline {
                late.push((
                    *role,
                    format!(
                        "{role} ran past its deadline of {deadline:?} proving it and was killed"
                    ),
                ));
            }
        }
        for ((job, partition), s) in &self.syntheses {
            let took = s.circuit.and_then(|c| self.synth_time.get(&c).copied());
            let deadline = self
                .faults
                .deadline(took, 1, self.faults.first_synthesis_deadline);
            if s.since.elapsed() <= deadline {
                continue;
            }
            late_syntheses.insert((*job, *partition));
            if !late.iter().any(|(r, _)| *r == Role::Synth) {
                late.push((
                    Role::Synth,
                    format!(
                        "synth-proc ran past its deadline of {deadline:?} synthesizing job {job} \
                         partition {partition} and was killed"
                    ),
                ));
            }
        }
        for (role, reason) in late {
            let Some(info) = self.children.get_mut(&role) else {
                continue;
            };
            if let Some(pid) = info.pid {
                tracing::error!(%role, pid, "{reason}");
                child::kill(pid, libc::SIGKILL);
                info.kill_reason = Some(reason);
                if role == Role::Synth {
                    info.kill_targets = Some(std::mem::take(&mut late_syntheses));
                }
                self.counters.deadline_kills += 1;
            }
            // Once per batch: the exit handler takes it from here.
            match role {
                Role::Synth => self.syntheses.clear(),
                Role::Gpu(_) => {
                    self.batches.remove(&role);
                }
            }
        }
    }

    fn on_event(&mut self, event: ChildEvent) {
        match event {
            ChildEvent::Started {
                role,
                pid,
                sender,
                cpus,
            } => {
                let capacity = self.faults.outbox;
                let info = self.children.entry(role).or_insert_with(ChildInfo::new);
                info.pid = Some(pid);
                info.last_seen = Instant::now();
                info.outbox = match Outbox::start(role, sender, capacity) {
                    Ok(o) => Some(o),
                    Err(e) => {
                        tracing::error!(%role, pid, "cannot start the writer thread: {e}; killing the child");
                        child::kill(pid, libc::SIGKILL);
                        None
                    }
                };
                info.cpus = cpus;
                info.starts += 1;
                info.kill_reason = None;
                info.kill_targets = None;
                info.srs = None;
                if self.stopping {
                    if let Some(o) = info.outbox.as_ref() {
                        let _ = match role {
                            Role::Synth => o.try_send_msg(ToSynth::Shutdown),
                            Role::Gpu(_) => o.try_send_msg(ToGpu::Shutdown),
                        };
                    }
                }
                if role == Role::Synth {
                    self.pump_synth();
                }
            }
            ChildEvent::Message { role, msg, .. } => {
                if let Some(info) = self.children.get_mut(&role) {
                    info.last_seen = Instant::now();
                }
                self.on_message(role, msg)
            }
            ChildEvent::Exited {
                role,
                pid,
                status,
                stderr_tail,
                restarting,
            } => {
                self.counters.child_exits += 1;
                let (mut killed, mut targets) = (None, None);
                if let Some(info) = self.children.get_mut(&role) {
                    info.pid = None;
                    info.outbox = None;
                    info.srs = None;
                    info.last_exit = Some(status.clone());
                    killed = info.kill_reason.take();
                    targets = info.kill_targets.take();
                }
                match role {
                    Role::Synth => self.syntheses.clear(),
                    Role::Gpu(_) => {
                        self.batches.remove(&role);
                    }
                }
                let report = self.ring.reclaim_owner(pid);
                self.counters.slots_requeued += report.claimed_requeued.len() as u64;
                self.counters.slots_freed += report.writing_freed.len() as u64;
                if !self.stopping {
                    tracing::warn!(
                        %role, pid, %status, restarting,
                        requeued = report.claimed_requeued.len(),
                        freed = report.writing_freed.len(),
                        "child exited; slots reclaimed"
                    );
                    if !stderr_tail.is_empty() {
                        tracing::debug!(%role, "last stderr: {}", stderr_tail.join(" | "));
                    }
                    // Each partition it held failed one attempt.
                    let why = killed.unwrap_or_else(|| format!("{role} died ({status})"));
                    for (slots, doing) in [
                        (&report.claimed_requeued, "while proving it"),
                        (&report.writing_freed, "while synthesizing it"),
                    ] {
                        for m in slots.iter().filter_map(|s| s.meta) {
                            if targets
                                .as_ref()
                                .is_some_and(|t| !t.contains(&(m.job_id, m.partition)))
                            {
                                // Cut short by a kill aimed at another synthesis: not its fault.
                                continue;
                            }
                            self.attempt_failed(
                                m.job_id,
                                m.partition,
                                format!("{why} {doing}"),
                                false,
                            );
                        }
                    }
                }
                if role == Role::Synth {
                    let in_ring: HashSet<(u64, u32)> = self
                        .ring
                        .snapshot()
                        .into_iter()
                        .filter(|s| {
                            matches!(
                                s.state,
                                Some(SlotState::Ready | SlotState::Claimed | SlotState::Done)
                            )
                        })
                        .filter_map(|s| s.meta.map(|m| (m.job_id, m.partition)))
                        .collect();
                    self.jobs.synth_lost(&in_ring);
                }
                // Requeued slots of jobs that ended (now or before) are not proved again.
                self.discard_orphans();
                self.sweep_done();
            }
            ChildEvent::Down { role, reason } => {
                tracing::error!(%role, "down, still restarting: {reason}");
                if let Some(info) = self.children.get_mut(&role) {
                    info.down = Some(reason);
                }
            }
            ChildEvent::GaveUp { role, reason } => {
                tracing::error!(%role, "giving up: {reason}");
                self.children
                    .entry(role)
                    .or_insert_with(ChildInfo::new)
                    .gave_up = Some(reason.clone());
                // Fatal when nothing can take the role's work: synth-proc, or the last gpu-proc.
                let gpus_left = self.gpu_roles.iter().any(|r| {
                    self.children
                        .get(r)
                        .is_none_or(|info| info.gave_up.is_none())
                });
                let fatal = role == Role::Synth || !gpus_left;
                if !self.stopping && fatal {
                    self.fatal = Some(reason.clone());
                    let live: Vec<u64> = self.waiters.keys().copied().collect();
                    for id in live {
                        if let Some(outcome) =
                            self.jobs.fail(id, format!("{role} cannot run: {reason}"))
                        {
                            self.deliver(outcome);
                        }
                    }
                }
            }
        }
    }
}

/// Appends `e`, dropping the oldest events beyond `max` (`None`: no bound; `Some(0)`: keep none).
fn push_bounded<T>(events: &mut VecDeque<T>, e: T, max: Option<usize>) {
    if let Some(max) = max {
        if max == 0 {
            return;
        }
        while events.len() >= max {
            events.pop_front();
        }
    }
    events.push_back(e);
}

/// Moves a moving average a third of the way to `sample`.
fn average(avg: &mut Duration, sample: Duration) {
    *avg = avg.mul_f64(2.0 / 3.0) + sample.mul_f64(1.0 / 3.0);
}

fn dispatch(core: Arc<Mutex<Core>>, events: mpsc::Receiver<ChildEvent>) {
    const TICK: Duration = Duration::from_millis(250);
    let mut last_tick = Instant::now();
    loop {
        match events.recv_timeout(TICK) {
            Ok(event) => lock(&core).on_event(event),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if last_tick.elapsed() >= TICK {
            last_tick = Instant::now();
            let mut core = lock(&core);
            // A DONE slot whose message was lost (its gpu-proc died right after) is still
            // collected; a child that stopped beating or ran past a deadline is killed;
            // requests that did not fit synth-proc's queue are sent.
            core.sweep_done();
            core.check_heartbeats();
            core.check_deadlines();
            core.pump_synth();
            // An SRS load or evict that did not fit a gpu-proc's queue is sent now.
            core.reconcile_srs();
        }
    }
    lock(&core).sweep_done();
}

#[cfg(test)]
mod tests {
    use super::{visible_device, FaultSettings};
    use std::time::Duration;

    #[test]
    fn the_ring_has_the_shared_slots_and_each_circuits_own() {
        use super::{ring_config, ring_text, SlotClass};
        let own = |slot_count, slot_bytes| SlotClass {
            slot_count,
            slot_bytes,
        };
        let gib = 1u64 << 30;
        // Three shared 16 GiB slots, eight of a PoSt's size, and a second circuit of the
        // largest size whose own two slots join the shared class.
        let c = ring_config(3, 16 * gib, &[own(8, 100 << 20), own(2, 16 * gib)]).unwrap();
        assert_eq!(
            c.classes(),
            &[own(8, 100 << 20), own(5, 16 * gib)],
            "smallest first, equal sizes merged"
        );
        assert_eq!(ring_text(&c), "5 slots x 16.00 GiB + 8 slots x 100.0 MiB");
        assert_eq!(c.data_bytes().unwrap(), 5 * 16 * gib + 8 * (100 << 20));
        // One size: the ring of before.
        assert_eq!(
            ring_config(4, 4096, &[]).unwrap().classes(),
            &[own(4, 4096)]
        );
    }

    #[test]
    fn admission_refuses_large_requests_and_named_partition_counts_over_the_limit() {
        use super::{admission, AnyCircuit, PipelineError};
        let bits: AnyCircuit = "bits:8".parse().unwrap();
        let req = |partitions| {
            kernels::job::BuiltinRequest {
                seed: 1,
                partitions,
            }
            .to_bytes()
        };
        assert!(admission(&bits, &req(4), 12, 4).is_ok());
        assert!(matches!(
            admission(&bits, &req(5), 12, 4),
            Err(PipelineError::PartitionLimit {
                asked: 5,
                max: 4,
                ..
            })
        ));
        assert!(matches!(
            admission(&bits, &req(1), 11, 4),
            Err(PipelineError::RequestTooLarge { bytes: 12, max: 11 })
        ));
        // Left to the submit, which opens the job and says why.
        assert!(admission(&bits, b"short", 12, 4).is_ok());
    }

    #[test]
    fn a_bounded_timeline_keeps_the_last_events() {
        let mut q = std::collections::VecDeque::new();
        for i in 0..10 {
            super::push_bounded(&mut q, i, Some(3));
        }
        assert_eq!(q.iter().copied().collect::<Vec<_>>(), vec![7, 8, 9]);
        let mut all = std::collections::VecDeque::new();
        for i in 0..10 {
            super::push_bounded(&mut all, i, None);
        }
        assert_eq!(all.len(), 10);
        super::push_bounded(&mut q, 1, Some(0));
        assert_eq!(q.len(), 3, "a bound of 0 records nothing");
    }

    #[test]
    fn deadlines_scale_with_the_measured_time_and_never_drop_below_the_floor() {
        let f = FaultSettings {
            deadline_factor: 4.0,
            deadline_floor: Duration::from_secs(10),
            ..FaultSettings::default()
        };
        let first = Duration::from_secs(99);
        assert_eq!(f.deadline(None, 3, first), first);
        assert_eq!(
            f.deadline(Some(Duration::from_secs(1)), 1, first),
            Duration::from_secs(10)
        );
        assert_eq!(
            f.deadline(Some(Duration::from_secs(2)), 3, first),
            Duration::from_secs(24)
        );
    }

    #[test]
    fn each_gpu_proc_sees_its_own_device_of_those_the_launcher_may_use() {
        assert_eq!(visible_device(None, 1), "1");
        assert_eq!(visible_device(Some(""), 0), "0");
        assert_eq!(visible_device(Some("4, 6,GPU-abc"), 2), "GPU-abc");
        assert_eq!(visible_device(Some("4,6"), 1), "6");
    }
}
