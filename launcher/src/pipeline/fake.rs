//! Fake children for the pipeline's tests, no processes: a ring in ordinary memory, inboxes that
//! keep what each child is sent, and helpers that move slots through the ring as synth-proc
//! and gpu-proc do and report what they would report ([`World`], over a bare [`Core`]: it
//! carries out the core's actions as the shell would and keeps them for the test); and a whole
//! [`Pipeline`] over the same fakes, its dispatcher and verifier pool running
//! ([`FakePipeline`]: outboxes that capture what each child is sent).
//!
//! The fake children's pids are never signalled: a kill is an [`Action`] the tests read.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bellperson::groth16::{prepare_verifying_key, PreparedVerifyingKey, VerifyingKey};
use blstrs::{Bls12, G1Affine, G2Affine};
use kernels::circuits::AnyCircuit;
use shm_protocol::control::{FromChild, SynthRequest, ToSynth};
use shm_protocol::fault::Faults;
use shm_protocol::{
    HugePagePolicy, Published, Region, Ring, RingConfig, SlotCapacity, SlotLengths, SlotMeta,
    SlotResult,
};

use super::core::jobs::JobOutcome;
use super::core::{
    Action, ChildEvent, CircuitEntry, Core, Event, FaultSettings, NewJob, OutboxRefused, Role,
    Rules, Settled, SrsSet, ToChild, Verdict, VerifyTask,
};
use super::hub::Hub;
use super::mail::Mail;
use super::outbox::{Outbox, Outgoing};
use super::settings::JobOptions;
use super::start::Parts;
use super::submit::{Cancelled, JobHandle};
use super::verify::Verifier;
use super::{Pipeline, PipelineError};
use crate::pinning::PinMode;
use crate::srs::SharedSrs;

/// The circuit every fake job proves: small, with public inputs.
pub(super) const CIRCUIT: &str = "pubinputs:2";

/// The fake synth-proc's pid: never signalled, and above Linux's largest pid (2^22), below the
/// ring's largest owner.
pub(super) const SYNTH_PID: u32 = 5_000_001;

/// The pid of fake gpu-proc `device`'s `start`-th process (as [`SYNTH_PID`]).
pub(super) fn gpu_pid(device: u32, start: u32) -> u32 {
    5_100_000 + device * 1000 + start
}

/// What a slot of the fake ring holds.
const CAPS: SlotCapacity = SlotCapacity {
    n: 8,
    inputs: 3,
    aux: 8,
};

/// A fake proof of (job, partition): 192 bytes that say which.
pub(super) fn proof_of(job: u64, partition: u32) -> Vec<u8> {
    let mut p = vec![0u8; 192];
    p[..8].copy_from_slice(&job.to_le_bytes());
    p[8..12].copy_from_slice(&partition.to_le_bytes());
    p
}

/// A verifying key of points at infinity: no real proof verifies against it, so the Groth16
/// check refuses every fake proof (as malformed: they are not points).
fn dummy_pvk() -> Arc<PreparedVerifyingKey<Bls12>> {
    let mut g1 = [0u8; 48];
    g1[0] = 0xc0;
    let mut g2 = [0u8; 96];
    g2[0] = 0xc0;
    let g1 = G1Affine::from_compressed(&g1).unwrap();
    let g2 = G2Affine::from_compressed(&g2).unwrap();
    let vk = VerifyingKey::<Bls12> {
        alpha_g1: g1,
        beta_g1: g1,
        beta_g2: g2,
        gamma_g2: g2,
        delta_g1: g1,
        delta_g2: g2,
        ic: vec![g1; 3],
    };
    Arc::new(prepare_verifying_key(&vk))
}

/// The rules of a test core: a hand-out window of 2, two attempts.
pub(super) fn rules() -> Rules {
    Rules {
        faults: FaultSettings::default(),
        verify: true,
        heartbeat_timeout: Duration::from_secs(60),
        synth_window: 2,
        gpu_roles: vec![Role::Gpu(0)],
        injected: Faults::default(),
    }
}

/// A ring of `slots` slots in ordinary memory.
fn ring(slots: u32) -> Arc<Ring> {
    let config = RingConfig::uniform(slots, CAPS.slot_bytes().unwrap());
    let region = Region::create(
        "core-test",
        config.region_bytes().unwrap(),
        HugePagePolicy::Plain,
    )
    .unwrap();
    Arc::new(Ring::create(region, config).unwrap())
}

/// [`CIRCUIT`] and its id.
pub(super) fn circuit() -> (AnyCircuit, u64) {
    let spec: AnyCircuit = CIRCUIT.parse().unwrap();
    let id = spec.circuit_id().unwrap();
    (spec, id)
}

/// The messages kept for one fake child of a [`World`].
#[derive(Default)]
pub(super) struct Inbox {
    /// What it was sent, oldest first.
    msgs: VecDeque<ToChild>,
    /// Messages it holds at most before its queue is full (`None`: no bound).
    pub(super) room: Option<usize>,
}

impl Inbox {
    /// Takes one message, or refuses it as a full queue would.
    fn take(&mut self, msg: ToChild) -> Result<(), OutboxRefused> {
        if self.room.is_some_and(|room| self.msgs.len() >= room) {
            return Err(OutboxRefused::Full);
        }
        self.msgs.push_back(msg);
        Ok(())
    }

    /// Everything sent so far.
    pub(super) fn drain(&mut self) -> Vec<ToChild> {
        self.msgs.drain(..).collect()
    }

    /// The synthesis requests sent so far (other messages dropped).
    pub(super) fn requests(&mut self) -> Vec<SynthRequest> {
        requests(self.drain())
    }
}

/// The synthesis requests among `msgs`.
fn requests(msgs: Vec<ToChild>) -> Vec<SynthRequest> {
    msgs.into_iter()
        .filter_map(|m| match m {
            ToChild::Synth(ToSynth::Synthesize(r)) => Some(r),
            _ => None,
        })
        .collect()
}

/// The messages captured for one child of a [`FakePipeline`].
pub(super) struct Captured(mpsc::Receiver<Outgoing>);

impl Captured {
    /// Waits for the next synthesis request (a test over a running dispatcher).
    pub(super) fn next_request(&self) -> SynthRequest {
        loop {
            let o = self.0.recv().expect("the pipeline dropped the outbox");
            if let ToChild::Synth(ToSynth::Synthesize(r)) = o.msg {
                return r;
            }
        }
    }
}

/// A job of [`CIRCUIT`] opened and checked as a client's submission is.
pub(super) fn job(seed: u64, partitions: u32, options: JobOptions) -> NewJob {
    let (spec, id) = circuit();
    let request = kernels::job::BuiltinRequest { seed, partitions }.to_bytes();
    let priority = super::jobs::effective_priority(CIRCUIT, options.priority.into()).unwrap();
    NewJob {
        id: options.id,
        ..NewJob::open(spec, id, &request, priority, 64).unwrap()
    }
}

/// A started fake child.
pub(super) fn started(role: Role, pid: u32) -> ChildEvent {
    ChildEvent::Started {
        role,
        pid,
        reachable: true,
        cpus: None,
    }
}

/// Writes `req`'s partition into a free slot and publishes it, as synth-proc does; returns the
/// message synth-proc then sends.
pub(super) fn publish(ring: &Ring, req: &SynthRequest) -> FromChild {
    let p = write(ring, req).publish(lengths()).unwrap();
    published(req, p)
}

/// A slot taken and begun for `req` by the fake synth-proc, not yet published.
pub(super) fn write<'r>(ring: &'r Ring, req: &SynthRequest) -> shm_protocol::SlotWriter<'r> {
    let mut w = ring
        .try_acquire_free(SYNTH_PID, 0)
        .unwrap()
        .expect("a free slot");
    w.begin(
        SlotMeta {
            job_id: req.job_id,
            circuit_id: req.circuit_id,
            partition: req.partition,
            attempt: 0,
        },
        CAPS,
    )
    .unwrap();
    w.set_claim_priority(req.priority.clamp(0, 255) as u8);
    w
}

fn lengths() -> SlotLengths {
    SlotLengths {
        n: CAPS.n,
        inputs: CAPS.inputs,
        aux: CAPS.aux,
        ..SlotLengths::default()
    }
}

/// synth-proc's report of a published slot.
pub(super) fn published(req: &SynthRequest, p: Published) -> FromChild {
    FromChild::Published {
        job_id: req.job_id,
        partition: req.partition,
        slot: p.index as u32,
        generation: p.generation,
    }
}

/// Claims the next READY slot as gpu-proc `pid` and completes it with its fake proof, as
/// gpu-proc does; returns the message gpu-proc then sends, and the (job, partition) proved.
pub(super) fn prove(ring: &Ring, pid: u32) -> (FromChild, (u64, u32)) {
    let claimed = ring.try_claim_ready(pid).unwrap().expect("a READY slot");
    let meta = claimed.meta();
    let (slot, generation) = (claimed.index() as u32, claimed.generation());
    claimed
        .complete(SlotResult::Proof(&proof_of(meta.job_id, meta.partition)))
        .unwrap();
    let msg = FromChild::Proved {
        job_id: meta.job_id,
        partition: meta.partition,
        slot,
        generation: generation + 1,
    };
    (msg, (meta.job_id, meta.partition))
}

/// A child's message as its supervisor forwards it.
pub(super) fn message(role: Role, pid: u32, msg: FromChild) -> ChildEvent {
    ChildEvent::Message { role, pid, msg }
}

/// A child's exit as its supervisor reports it (restarted).
pub(super) fn exited(role: Role, pid: u32, status: &str) -> ChildEvent {
    ChildEvent::Exited {
        role,
        pid,
        status: status.to_owned(),
        stderr_tail: Vec::new(),
        restarting: true,
    }
}

/// A core with fake children, driven one event at a time by the test. It carries out the core's
/// actions as the shell does: messages go to the children's inboxes (refused when an inbox is
/// full or its child is not up, and the core told, [`Core::settle`]), outcomes to the jobs'
/// waiters; kills, proof checks and SRS reads are kept for the test ([`World::actions`]).
pub(super) struct World {
    pub(super) core: Core,
    /// The ring (a clone of the core's, so slots can be held while the core runs).
    pub(super) ring: Arc<Ring>,
    /// The time the test says it is.
    pub(super) now: Instant,
    pub(super) synth: Option<Inbox>,
    pub(super) gpus: HashMap<u32, Inbox>,
    /// Starts of each gpu-proc so far.
    gpu_starts: HashMap<u32, u32>,
    /// Where each live job's outcome goes.
    waiters: HashMap<u64, mpsc::Sender<JobOutcome>>,
    /// Kills, checks and SRS reads asked for, not yet read by the test.
    later: Vec<Action>,
}

impl World {
    /// A core over a ring of four slots, serving [`CIRCUIT`] (with a key no fake proof
    /// verifies against), with `rules`; no child started.
    pub(super) fn new(rules: Rules) -> World {
        World::serving(rules, PathBuf::new(), Vec::new())
    }

    /// [`World::new`] with [`CIRCUIT`]'s real SRS file, its image in shared memory when
    /// `loaded` (else cold).
    pub(super) fn with_srs(rules: Rules, loaded: bool) -> World {
        let image = shared_srs();
        let params = image.params_path.clone();
        let images = if loaded { vec![image] } else { Vec::new() };
        World::serving(rules, params, images)
    }

    fn serving(rules: Rules, params: PathBuf, images: Vec<SharedSrs>) -> World {
        let ring = ring(4);
        let (spec, id) = circuit();
        let entry = CircuitEntry {
            pvk: dummy_pvk(),
            spec,
            shape: spec.shape().unwrap(),
            params,
            witness: false,
        };
        World {
            core: Core::new(ring.clone(), vec![(id, entry)], SrsSet::new(images), rules),
            ring,
            now: Instant::now(),
            synth: None,
            gpus: HashMap::new(),
            gpu_starts: HashMap::new(),
            waiters: HashMap::new(),
            later: Vec::new(),
        }
    }

    /// Runs `transition` on the core, then carries out its actions (see the type's doc).
    pub(super) fn step<T>(&mut self, transition: impl FnOnce(&mut Core) -> T) -> T {
        let value = transition(&mut self.core);
        loop {
            let actions = self.core.take_actions();
            if actions.is_empty() {
                return value;
            }
            let mut settled = Vec::new();
            for action in actions {
                match action {
                    Action::Send { role, msg, .. } => {
                        let inbox = match role {
                            Role::Synth => self.synth.as_mut(),
                            Role::Gpu(d) => self.gpus.get_mut(&d),
                        };
                        let result = match inbox {
                            Some(inbox) => inbox.take(msg.clone()),
                            None => Err(OutboxRefused::Closed),
                        };
                        settled.push(Settled { role, msg, result });
                    }
                    Action::Deliver(outcome) => {
                        if let Some(w) = self.waiters.remove(&outcome.job_id) {
                            let _ = w.send(outcome);
                        }
                    }
                    other => self.later.push(other),
                }
            }
            self.core.settle(settled);
        }
    }

    /// Delivers a supervisor's event now; an exited child's inbox goes with it.
    pub(super) fn event(&mut self, e: ChildEvent) {
        if let ChildEvent::Exited { role, .. } = &e {
            match role {
                Role::Synth => self.synth = None,
                Role::Gpu(d) => {
                    self.gpus.remove(d);
                }
            }
        }
        let now = self.now;
        self.step(|core| core.on_event(e, now));
    }

    /// The core's periodic work, now.
    pub(super) fn tick(&mut self) {
        let now = self.now;
        self.step(|core| core.on_tick(now));
    }

    /// Starts the fake synth-proc (started, then its hello).
    pub(super) fn start_synth(&mut self) {
        self.synth = Some(Inbox::default());
        self.event(started(Role::Synth, SYNTH_PID));
        self.synth_says(FromChild::Hello {
            pid: SYNTH_PID,
            detail: "synth-proc: fake".into(),
        });
    }

    /// Starts (or restarts) fake gpu-proc `device` (started, then its hello); returns its pid.
    pub(super) fn start_gpu(&mut self, device: u32) -> u32 {
        let pid = self.spawn_gpu(device);
        self.gpu_hello(device);
        pid
    }

    /// Starts (or restarts) fake gpu-proc `device` without its hello: it is given the SRS
    /// images loaded now, as the spawn hook gives them. Returns its pid.
    pub(super) fn spawn_gpu(&mut self, device: u32) -> u32 {
        let n = self.gpu_starts.entry(device).or_insert(0);
        *n += 1;
        let pid = gpu_pid(device, *n);
        let given = self.core.srs.ids();
        self.core.srs.given(Role::Gpu(device), given);
        self.gpus.insert(device, Inbox::default());
        self.event(started(Role::Gpu(device), pid));
        pid
    }

    /// Fake gpu-proc `device` says hello.
    pub(super) fn gpu_hello(&mut self, device: u32) {
        let pid = self.gpu(device);
        self.gpu_says(
            device,
            FromChild::Hello {
                pid,
                detail: "gpu-proc: fake".into(),
            },
        );
    }

    /// The pid of gpu-proc `device`'s current process.
    pub(super) fn gpu(&self, device: u32) -> u32 {
        gpu_pid(device, self.gpu_starts[&device])
    }

    /// A message from synth-proc.
    pub(super) fn synth_says(&mut self, msg: FromChild) {
        self.event(message(Role::Synth, SYNTH_PID, msg));
    }

    /// A message from gpu-proc `device`.
    pub(super) fn gpu_says(&mut self, device: u32, msg: FromChild) {
        let pid = self.gpu(device);
        self.event(message(Role::Gpu(device), pid, msg));
    }

    /// Submits a job of [`CIRCUIT`] as a client would (opened and checked, then accepted).
    pub(super) fn submit(&mut self, seed: u64, partitions: u32, options: JobOptions) -> JobHandle {
        self.try_submit(seed, partitions, options).unwrap()
    }

    /// [`World::submit`], refused as the pipeline refuses it.
    pub(super) fn try_submit(
        &mut self,
        seed: u64,
        partitions: u32,
        options: JobOptions,
    ) -> Result<JobHandle, PipelineError> {
        let job = job(seed, partitions, options);
        // The waiter is there before the actions are carried out, as in the hub.
        let id = self.core.accept(job)?;
        let (tx, rx) = mpsc::channel();
        self.waiters.insert(id, tx);
        self.step(|_| ());
        Ok(JobHandle { id, rx })
    }

    /// Cancels a job as [`Pipeline::cancel`] does.
    pub(super) fn cancel(&mut self, job_id: u64) -> Result<Cancelled, PipelineError> {
        let was_running = self.step(|core| core.cancel(job_id))?;
        Ok(Cancelled { was_running })
    }

    /// The synthesis requests synth-proc was sent since the last call.
    pub(super) fn handed_out(&mut self) -> Vec<SynthRequest> {
        self.synth.as_mut().map(Inbox::requests).unwrap_or_default()
    }

    /// Everything synth-proc was sent since the last call.
    pub(super) fn synth_inbox(&mut self) -> Vec<ToChild> {
        self.synth.as_mut().map(Inbox::drain).unwrap_or_default()
    }

    /// Everything gpu-proc `device` was sent since the last call.
    pub(super) fn gpu_inbox(&mut self, device: u32) -> Vec<ToChild> {
        self.gpus
            .get_mut(&device)
            .map(Inbox::drain)
            .unwrap_or_default()
    }

    /// From now on `role`'s queue holds at most `room` messages not yet read by the test
    /// (`None`: no bound).
    pub(super) fn room(&mut self, role: Role, room: Option<usize>) {
        let inbox = match role {
            Role::Synth => self.synth.as_mut(),
            Role::Gpu(d) => self.gpus.get_mut(&d),
        };
        if let Some(inbox) = inbox {
            inbox.room = room;
        }
    }

    /// synth-proc publishes `req` and says so.
    pub(super) fn publish(&mut self, req: &SynthRequest) {
        let msg = publish(&self.ring, req);
        self.synth_says(msg);
    }

    /// gpu-proc `device` proves the next READY slot and says so; returns (job, partition).
    pub(super) fn prove(&mut self, device: u32) -> (u64, u32) {
        let (msg, which) = prove(&self.ring, self.gpu(device));
        self.gpu_says(device, msg);
        which
    }

    /// The kills, checks and SRS reads asked for since the last call.
    pub(super) fn actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.later)
    }

    /// The kills asked for since the last call, as (role, pid) (other actions dropped).
    pub(super) fn kills(&mut self) -> Vec<(Role, u32)> {
        self.actions()
            .into_iter()
            .filter_map(|a| match a {
                Action::Kill { role, pid } => Some((role, pid)),
                _ => None,
            })
            .collect()
    }

    /// The proofs handed to the verifier since the last call (other actions dropped).
    pub(super) fn checks(&mut self) -> Vec<VerifyTask> {
        self.actions()
            .into_iter()
            .filter_map(|a| match a {
                Action::Verify(t) => Some(t),
                _ => None,
            })
            .collect()
    }

    /// Runs `verifier` on `task` as the pool does and hands the verdict to the core.
    pub(super) fn check(&mut self, task: VerifyTask, verifier: &dyn Verifier) {
        let result = verifier.verify(&task);
        self.step(|core| {
            core.on_verdict(Verdict {
                job_id: task.job_id,
                partition: task.partition,
                proof: task.proof,
                result,
                took: Duration::from_millis(1),
            })
        });
    }
}

/// A verifier that accepts every proof.
pub(super) struct Accept;

impl Verifier for Accept {
    fn verify(&self, _: &VerifyTask) -> Result<(), super::ProofRejection> {
        Ok(())
    }
}

/// A verifier that holds every check until the test lets it go: it reports each check it
/// starts on `entered`, then waits for one `()` on its gate.
pub(super) struct Gate {
    entered: Mutex<mpsc::Sender<(u64, u32)>>,
    gate: Mutex<mpsc::Receiver<()>>,
}

impl Gate {
    /// The verifier, where it reports each check it starts, and its gate's sender.
    pub(super) fn new() -> (Arc<Gate>, mpsc::Receiver<(u64, u32)>, mpsc::Sender<()>) {
        let (entered_tx, entered) = mpsc::channel();
        let (open, gate) = mpsc::channel();
        let g = Gate {
            entered: Mutex::new(entered_tx),
            gate: Mutex::new(gate),
        };
        (Arc::new(g), entered, open)
    }
}

impl Verifier for Gate {
    fn verify(&self, task: &VerifyTask) -> Result<(), super::ProofRejection> {
        let _ = crate::sync::lock(&self.entered).send((task.job_id, task.partition));
        // A test that dropped its sender lets every later check through.
        let _ = crate::sync::lock(&self.gate).recv();
        Ok(())
    }
}

/// A [`Pipeline`] over fake children: its dispatcher and verifier pool run; the test is the
/// supervisors (`events`) and reads the children's inboxes.
pub(super) struct FakePipeline {
    pub(super) pipeline: Pipeline,
    pub(super) events: mpsc::Sender<Mail>,
    pub(super) ring: Arc<Ring>,
}

/// The SRS of [`CIRCUIT`], generated once per test binary.
pub(super) fn shared_srs() -> SharedSrs {
    static PARAMS: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (spec, id) = circuit();
    let (_, path) = PARAMS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pubinputs-2.params");
        crate::srs::generate(&spec.builtin().unwrap(), 42, &path, false).unwrap();
        (dir, path)
    });
    SharedSrs::load(
        &spec,
        id,
        &spec.shape().unwrap(),
        path,
        HugePagePolicy::Plain,
    )
    .unwrap()
}

impl FakePipeline {
    /// A pipeline serving [`CIRCUIT`] (its real SRS and key) that checks proofs with
    /// `verifier` on one thread and acts on `injected` faults.
    pub(super) fn start(verifier: Arc<dyn Verifier>, injected: Faults) -> FakePipeline {
        let ring = ring(4);
        let (spec, id) = circuit();
        let srs = shared_srs();
        let pvk = Arc::new(prepare_verifying_key(&srs.view().unwrap().verifying_key()));
        let entry = CircuitEntry {
            pvk,
            spec,
            shape: spec.shape().unwrap(),
            params: srs.params_path.clone(),
            witness: false,
        };
        let rules = Rules {
            injected,
            ..rules()
        };
        let core = Core::new(
            ring.clone(),
            vec![(id, entry)],
            SrsSet::new(vec![srs]),
            rules,
        );
        let (tx, rx) = mpsc::channel();
        let pipeline = Pipeline::assemble(Parts {
            hub: Arc::new(Mutex::new(Hub::new(core))),
            supervisors: Vec::new(),
            events: (tx.clone(), rx),
            verifier,
            verify_threads: 1,
            pin_mode: PinMode::Affinity,
            r1cs: Vec::new(),
            synthesis: Vec::new(),
        })
        .unwrap();
        FakePipeline {
            pipeline,
            events: tx,
            ring,
        }
    }

    /// Reports `e` as a supervisor would.
    pub(super) fn event(&self, e: ChildEvent) {
        self.events.send(Mail::Event(Event::Child(e))).unwrap();
    }

    /// Starts fake child `role` as process `pid` (its outbox, then its start); returns what it
    /// is sent.
    fn start_child(&self, role: Role, pid: u32) -> Captured {
        let (outbox, rx) = Outbox::capture(64);
        self.events
            .send(Mail::Outbox {
                role,
                outbox: Some(outbox),
            })
            .unwrap();
        self.event(started(role, pid));
        Captured(rx)
    }

    /// Starts the fake synth-proc; returns its inbox.
    pub(super) fn start_synth(&self) -> Captured {
        self.start_child(Role::Synth, SYNTH_PID)
    }

    /// Starts fake gpu-proc 0; returns its pid.
    pub(super) fn start_gpu(&self) -> u32 {
        let pid = gpu_pid(0, 1);
        // Its SRS loads are never answered: nothing here waits for them.
        drop(self.start_child(Role::Gpu(0), pid));
        pid
    }
}
