//! The pipeline's state machine: [`Core`], without threads, sockets, processes or locks.
//!
//! Events in, actions out (the shape of quinn-proto's `Connection`):
//! - in: what a supervisor reports of a child ([`ChildEvent`]: started, a message, exited, down,
//!   given up), a proof's verdict ([`Verdict`](super::Verdict), from the verifier pool), a tick,
//!   how the messages it asked for went ([`Core::settle`]), and the pipeline's calls from client
//!   threads (a submission, a cancel, a pause, an SRS load or evict, a stop), each with the time
//!   it happened where time matters (`now`);
//! - out: [`Action`]s for every effect (a message for a child, a job's outcome for its waiter,
//!   a kill, a proof check, an SRS image to read), which the shell around the core carries out
//!   (`hub`, `dispatch`), and the ring transitions the launcher owns (take a DONE slot, free a
//!   READY slot of an ended job, reclaim a dead child's slots), which are memory operations on
//!   the shared ring.
//!
//! So the tests drive a `Core` over a ring in ordinary memory with fake children (`fake`: the
//! actions read back as values, events injected as the supervisors would send them, slots moved
//! through the ring API as synth-proc and gpu-proc move them), deterministically.
//!
//! The transitions are split by subject: child lifecycle, messages and liveness here; the
//! hand-out of partitions to synth-proc in `handout`; DONE slots, proof checks and outcomes in
//! `results`; timing in `stats`; SRS residency in `srs`.
//!
//! # Invariants
//! - The core is one value behind the pipeline's one lock (`hub`). The dispatcher thread
//!   applies every child event and verdict; client threads take the lock for a submission, a
//!   cancel, a status. No transition blocks: a message for a child is an [`Action::Send`] the
//!   shell queues on the child's bounded outbox without blocking, still under the lock, and
//!   reports back ([`Core::settle`]: a refused synthesis request is kept pending); a kill or a
//!   proof check is an action run after the lock is released.
//! - A partition's proof is stored with its job only on a verdict that it verified (or at once
//!   when checks are off); a job's outcome ([`Action::Deliver`]) is asked for once, when its last
//!   partition is stored, or at its first failure. A verdict or result for a job that ended is
//!   counted as a duplicate.
//! - `verifying` counts the proofs handed to the pool whose verdict has not come back; a drain
//!   waits for it, and the dispatcher waits for it before it ends.
//! - Every child process's death reclaims its slots (`Ring::reclaim_owner`) before anything is
//!   handed out again; the partitions it held each fail one attempt, unless the pipeline is
//!   stopping.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use bellperson::groth16::PreparedVerifyingKey;
use blstrs::{Bls12, Scalar};
use kernels::circuits::AnyCircuit;
use kernels::synth::CircuitShape;
use shm_protocol::control::{FromChild, ToGpu, ToSynth};
use shm_protocol::fault::FaultKind;
use shm_protocol::request::SealedRequest;
use shm_protocol::{Ring, SlotState};

use super::events::{ChildEvent, Event, Role, ToChild};
use super::failure::{AttemptFailure, ChildLoss, Holding, JobFailure};
use super::jobs::JobTable;
use super::rules::Rules;
use super::srs::{GpuSrs, SrsSet};
use super::stats::{Counters, Progress};
use super::Action;
use crate::pinning::CpuList;

/// A configured circuit as the core keeps it.
pub(crate) struct CircuitEntry {
    /// What every proof of it is checked with.
    pub(crate) pvk: Arc<PreparedVerifyingKey<Bls12>>,
    /// What loading its SRS again needs.
    pub(crate) spec: AnyCircuit,
    pub(crate) shape: CircuitShape,
    pub(crate) params: std::path::PathBuf,
    /// Its partitions travel in witness-only slots (`[synthesis] witness_slots` and its
    /// matrices given to synth-proc and every gpu-proc).
    pub(crate) witness: bool,
}

/// A live job as the pipeline keeps it besides its bookkeeping (the opened job itself is dropped
/// at submit: a Filecoin job holds its parsed request).
pub(crate) struct LiveJob {
    /// The public inputs of every partition, computed through the job when it was accepted:
    /// what each partition's proof is checked against.
    pub(crate) inputs: Vec<Vec<Scalar>>,
    /// The sealed memfd of its request, when it does not travel inline: sent with each of its
    /// synthesis requests, kept until the job ends so a restarted synth-proc gets it again.
    pub(crate) memfd: Option<SealedRequest>,
}

/// One child role as the core knows it.
pub(crate) struct ChildInfo {
    pub(crate) pid: Option<u32>,
    pub(crate) last_seen: Instant,
    /// It can be sent messages (its outbox, which the dispatcher holds, is open).
    pub(crate) reachable: bool,
    pub(crate) cpus: Option<CpuList>,
    pub(crate) detail: String,
    pub(crate) starts: u32,
    pub(crate) last_exit: Option<String>,
    /// Why it is down (keeps failing at restart; still retried).
    pub(crate) down: Option<String>,
    /// Why it was given up.
    pub(crate) gave_up: Option<String>,
    /// Why the pipeline killed it, for the attempts of the partitions it held.
    pub(crate) kill_reason: Option<ChildLoss>,
    /// When synth-proc was killed for syntheses past their deadline: those partitions. The
    /// others it was synthesizing are sent again without counting an attempt.
    pub(crate) kill_targets: Option<HashSet<(u64, u32)>>,
    /// A gpu-proc's SRS images, from its hello until it exits (`None`: not serving).
    pub(crate) srs: Option<GpuSrs>,
}

impl ChildInfo {
    fn new(now: Instant) -> ChildInfo {
        ChildInfo {
            pid: None,
            last_seen: now,
            reachable: false,
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

/// The pipeline's state, behind the pipeline's one lock in the hub (see the module doc).
pub(crate) struct Core {
    pub(crate) ring: Arc<Ring>,
    pub(crate) jobs: JobTable,
    /// What the pipeline keeps of every live job besides its bookkeeping (a job is live from
    /// its accept until its outcome is delivered).
    pub(crate) live: HashMap<u64, LiveJob>,
    pub(crate) circuits: HashMap<u64, CircuitEntry>,
    /// Configured circuit ids, in the settings' order.
    pub(crate) circuit_order: Vec<u64>,
    pub(crate) children: HashMap<Role, ChildInfo>,
    /// gpu-procs that confirmed a pause.
    pub(crate) paused: HashSet<Role>,
    pub(crate) progress: Progress,
    pub(crate) counters: Counters,
    pub(crate) rules: Rules,
    /// The SRS images in shared memory, and what each gpu-proc's last start was given.
    pub(crate) srs: SrsSet,
    /// Why the pipeline cannot go on, if it cannot.
    pub(crate) fatal: Option<String>,
    /// Set by a drain: no more partitions are handed to synth-proc.
    pub(crate) holding: bool,
    pub(crate) stopping: bool,
    /// The jobs' waiters were let go without an outcome (the dispatcher panicked): nothing is
    /// delivered any more, and no live job is failed at shutdown.
    pub(crate) abandoned: bool,
    /// DONE slots refused before the `Published` of what they held arrived: slot → (the
    /// generation it was taken at, why).
    pub(crate) refused_done: HashMap<u32, (u64, AttemptFailure)>,
    /// Proofs handed to the verifier pool whose verdict has not come back.
    pub(crate) verifying: usize,
    actions: Vec<Action>,
}

impl Core {
    /// A core over `ring` serving `circuits` (in the settings' order), with no child yet.
    pub(crate) fn new(
        ring: Arc<Ring>,
        circuits: Vec<(u64, CircuitEntry)>,
        srs: SrsSet,
        rules: Rules,
    ) -> Core {
        let mut order = Vec::new();
        let mut map = HashMap::new();
        for (id, entry) in circuits {
            if !order.contains(&id) {
                order.push(id);
            }
            map.insert(id, entry);
        }
        Core {
            ring,
            jobs: JobTable::new(1),
            live: HashMap::new(),
            circuits: map,
            circuit_order: order,
            children: HashMap::new(),
            paused: HashSet::new(),
            progress: Progress {
                timeline_bound: rules.faults.timeline_events,
                ..Progress::default()
            },
            counters: Counters::default(),
            rules,
            srs,
            fatal: None,
            holding: false,
            stopping: false,
            abandoned: false,
            refused_done: HashMap::new(),
            verifying: 0,
            actions: Vec::new(),
        }
    }

    /// The actions the transitions so far asked for (the dispatcher runs them unlocked).
    pub(crate) fn take_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.actions)
    }

    pub(crate) fn act(&mut self, a: Action) {
        self.actions.push(a);
    }

    /// One event of the dispatcher's channel, arrived at `now`.
    pub(crate) fn on(&mut self, event: Event, now: Instant) {
        match event {
            Event::Child(e) => self.on_event(e, now),
            Event::Verified(v) => self.on_verdict(v),
            Event::Stop => {}
        }
    }

    /// The periodic work: a DONE slot whose message was lost (its gpu-proc died right after) is
    /// still collected; a child that stopped beating or ran past a deadline is killed; requests
    /// that did not fit synth-proc's queue are sent; an SRS load or evict that did not fit a
    /// gpu-proc's queue is sent.
    pub(crate) fn on_tick(&mut self, now: Instant) {
        self.sweep_done();
        self.check_heartbeats(now);
        self.check_deadlines(now);
        self.pump_synth();
        self.reconcile_srs();
    }

    /// The dispatcher panicked (it held the pipeline's lock or was about to take it): the
    /// pipeline is fatal. The waiters are let go without an outcome (the shell drops them; their
    /// `wait` answers `PipelineError::Stopped`): the jobs did not fail, and the service's journal
    /// keeps them for the next start.
    pub(crate) fn dispatcher_panicked(&mut self, why: String) {
        self.fatal = Some(why);
        self.abandoned = true;
    }

    /// Asks for `msg` to be queued for `role` (with `fd` beside it).
    pub(crate) fn send(
        &mut self,
        role: Role,
        msg: impl Into<ToChild>,
        fd: Option<std::os::fd::OwnedFd>,
    ) {
        self.act(Action::Send {
            role,
            msg: msg.into(),
            fd,
        });
    }

    /// Asks every reachable child to exit (`Shutdown`); from now on its exit costs no attempt,
    /// and a child started meanwhile is told the same at once.
    pub(crate) fn stop(&mut self) {
        self.stopping = true;
        let roles: Vec<Role> = self.reachable().collect();
        for role in roles {
            self.send_shutdown(role);
        }
    }

    fn send_shutdown(&mut self, role: Role) {
        match role {
            Role::Synth => self.send(role, ToSynth::Shutdown, None),
            Role::Gpu(_) => self.send(role, ToGpu::Shutdown, None),
        }
    }

    /// The children that can be sent messages now.
    pub(crate) fn reachable(&self) -> impl Iterator<Item = Role> + '_ {
        self.children
            .iter()
            .filter(|(_, info)| info.reachable)
            .map(|(role, _)| *role)
    }

    /// Sends `msg` (`Pause`, `Resume`) to every reachable gpu-proc; `Resume` first forgets the
    /// pauses confirmed so far.
    pub(crate) fn tell_gpus(&mut self, msg: ToGpu) {
        if msg == ToGpu::Resume {
            self.paused.clear();
        }
        let mut gpus: Vec<Role> = self
            .reachable()
            .filter(|r| matches!(r, Role::Gpu(_)))
            .collect();
        gpus.sort();
        for role in gpus {
            self.send(role, msg.clone(), None);
        }
    }

    /// Every gpu-proc that is up confirmed a pause (`FromChild::Paused`), out of `gpus`.
    pub(crate) fn paused_all(&self, gpus: usize) -> bool {
        self.paused.len() >= gpus
    }

    /// Holds back every partition not yet handed to synth-proc (a drain): pending ones stay
    /// pending, a restarted synth-proc gets none.
    pub(crate) fn hold(&mut self) {
        self.holding = true;
    }

    /// The pipeline shuts down: every live job fails with [`JobFailure::ShutDown`] (none when
    /// the waiters were let go).
    pub(crate) fn shut_down(&mut self) {
        if self.abandoned {
            return;
        }
        let mut live: Vec<u64> = self.live.keys().copied().collect();
        live.sort_unstable();
        for id in live {
            if let Some(outcome) = self.jobs.fail(id, JobFailure::ShutDown) {
                self.deliver(outcome);
            }
        }
    }

    /// A supervisor's report.
    pub(crate) fn on_event(&mut self, event: ChildEvent, now: Instant) {
        match event {
            ChildEvent::Started {
                role,
                pid,
                reachable,
                cpus,
            } => {
                let info = self
                    .children
                    .entry(role)
                    .or_insert_with(|| ChildInfo::new(now));
                info.pid = Some(pid);
                info.last_seen = now;
                info.reachable = reachable;
                info.cpus = cpus;
                info.starts += 1;
                info.kill_reason = None;
                info.kill_targets = None;
                info.srs = None;
                if self.stopping && reachable {
                    self.send_shutdown(role);
                }
                if role == Role::Synth {
                    self.pump_synth();
                }
            }
            ChildEvent::Message { role, msg, .. } => {
                if let Some(info) = self.children.get_mut(&role) {
                    info.last_seen = now;
                }
                self.on_message(role, msg, now)
            }
            ChildEvent::Exited {
                role,
                pid,
                status,
                stderr_tail,
                restarting,
            } => self.on_exit(role, pid, status, &stderr_tail, restarting),
            ChildEvent::Down { role, reason } => {
                tracing::error!(%role, "down, still restarting: {reason}");
                if let Some(info) = self.children.get_mut(&role) {
                    info.down = Some(reason);
                }
            }
            ChildEvent::GaveUp { role, reason } => self.on_gave_up(role, reason, now),
        }
    }

    /// A child exited: its slots are reclaimed, each partition it held fails one attempt, and
    /// what synth-proc had been given that the ring does not hold is handed out again.
    fn on_exit(
        &mut self,
        role: Role,
        pid: u32,
        status: String,
        stderr_tail: &[String],
        restarting: bool,
    ) {
        self.counters.child_exits += 1;
        let (mut killed, mut targets) = (None, None);
        if let Some(info) = self.children.get_mut(&role) {
            info.pid = None;
            info.reachable = false;
            info.srs = None;
            info.last_exit = Some(status.clone());
            killed = info.kill_reason.take();
            targets = info.kill_targets.take();
        }
        self.progress.forget(role);
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
            let why = killed.unwrap_or(ChildLoss::Died { role, status });
            for (slots, doing) in [
                (&report.claimed_requeued, Holding::Proving),
                (&report.writing_freed, Holding::Synthesizing),
            ] {
                for m in slots.iter().filter_map(|s| s.meta) {
                    if targets
                        .as_ref()
                        .is_some_and(|t| !t.contains(&(m.job_id, m.partition)))
                    {
                        // Cut short by a kill aimed at another synthesis: not its fault.
                        continue;
                    }
                    let reason = AttemptFailure::Lost {
                        why: why.clone(),
                        doing,
                    };
                    self.attempt_failed(m.job_id, m.partition, reason, false);
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

    /// A role was given up: fatal when nothing can take its work (synth-proc, or the last
    /// gpu-proc), and then every live job fails.
    fn on_gave_up(&mut self, role: Role, reason: String, now: Instant) {
        tracing::error!(%role, "giving up: {reason}");
        self.children
            .entry(role)
            .or_insert_with(|| ChildInfo::new(now))
            .gave_up = Some(reason.clone());
        let gpus_left = self.rules.gpu_roles.iter().any(|r| {
            self.children
                .get(r)
                .is_none_or(|info| info.gave_up.is_none())
        });
        let fatal = role == Role::Synth || !gpus_left;
        if !self.stopping && fatal {
            self.fatal = Some(reason.clone());
            let mut live: Vec<u64> = if self.abandoned {
                Vec::new()
            } else {
                self.live.keys().copied().collect()
            };
            live.sort_unstable();
            for id in live {
                let failure = JobFailure::RoleGaveUp {
                    role,
                    reason: reason.clone(),
                };
                if let Some(outcome) = self.jobs.fail(id, failure) {
                    self.deliver(outcome);
                }
            }
        }
    }

    /// A child's message.
    fn on_message(&mut self, role: Role, msg: FromChild, now: Instant) {
        match msg {
            FromChild::Hello { detail, .. } => {
                if let Some(info) = self.children.get_mut(&role) {
                    info.detail = detail;
                    info.down = None;
                    if let Role::Gpu(_) = role {
                        // It mapped what its start was given; a load or an evict since then
                        // is sent now.
                        info.srs = Some(GpuSrs {
                            mapped: self.srs.spawned_with(role),
                            ..GpuSrs::default()
                        });
                    }
                }
                self.reconcile_srs();
            }
            FromChild::SrsLoaded { circuit_id, error } => self.srs_loaded(role, circuit_id, error),
            FromChild::SrsEvicted { circuit_id } => self.srs_evicted(role, circuit_id),
            FromChild::Published {
                job_id,
                partition,
                slot,
                generation,
            } => {
                if self
                    .rules
                    .injected
                    .hits(FaultKind::DispatcherPanic, job_id, partition)
                {
                    panic!(
                        "injected fault `dispatcher-panic` at job {job_id} partition {partition}"
                    );
                }
                self.progress.syntheses.remove(&(job_id, partition));
                self.jobs.published(job_id, partition, slot, generation);
                // Its slot came back DONE and was refused before this message arrived.
                if let Some((refused_at, _)) = self.refused_done.get(&slot) {
                    if generation < *refused_at {
                        if let Some((_, reason)) = self.refused_done.remove(&slot) {
                            self.attempt_failed(job_id, partition, reason, true);
                        }
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
                self.progress.syntheses.remove(&(job_id, partition));
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
                planned_device_bytes,
                device_budget_bytes,
                srs_streamed_bytes,
                srs_streamed_total_bytes,
            } => {
                let d = self.progress.gpu_devices.entry(role).or_default();
                d.planned_device_bytes = planned_device_bytes;
                d.device_budget_bytes = device_budget_bytes;
                d.srs_streamed_bytes = srs_streamed_bytes;
                d.srs_streamed_total_bytes = srs_streamed_total_bytes;
                d.name = name;
                d.vram_total_bytes = vram_total_bytes;
                d.vram_free_bytes = vram_free_bytes;
                d.srs_device_bytes = srs_device_bytes;
            }
            FromChild::Heartbeat => {}
            FromChild::Event(e) => {
                if e.kind == shm_protocol::control::EventKind::SynthStart {
                    self.counters.syntheses_started += 1;
                }
                self.track(role, &e, now);
                self.progress.record(e)
            }
        }
    }

    /// Kills children that stopped beating; their supervisors restart them.
    fn check_heartbeats(&mut self, now: Instant) {
        let mut kills = Vec::new();
        for (role, info) in &mut self.children {
            let Some(pid) = info.pid else { continue };
            let silent = now.saturating_duration_since(info.last_seen);
            if silent > self.rules.heartbeat_timeout {
                tracing::error!(%role, pid, silent_s = silent.as_secs_f64(), "no heartbeat: killing the child");
                kills.push(Action::Kill { role: *role, pid });
                info.kill_reason
                    .get_or_insert(ChildLoss::Silent { role: *role });
                info.last_seen = now; // once per timeout
            }
        }
        self.counters.hung_kills += kills.len() as u64;
        self.actions.extend(kills);
    }

    /// Kills a gpu-proc whose batch, or a synth-proc whose synthesis, runs past its deadline.
    fn check_deadlines(&mut self, now: Instant) {
        let faults = &self.rules.faults;
        let progress = &self.progress;
        let mut late: Vec<(Role, ChildLoss)> = Vec::new();
        let mut late_syntheses = HashSet::new();
        for (role, b) in &progress.batches {
            let per_slot = b.circuit.and_then(|c| progress.prove_time.get(&c).copied());
            let deadline = faults.deadline(
                per_slot,
                b.slots.len().max(b.size),
                faults.first_proof_deadline,
            );
            if now.saturating_duration_since(b.since) > deadline {
                late.push((
                    *role,
                    ChildLoss::ProvingLate {
                        role: *role,
                        deadline,
                    },
                ));
            }
        }
        for ((job, partition), s) in &progress.syntheses {
            let took = s.circuit.and_then(|c| progress.synth_time.get(&c).copied());
            let deadline = faults.deadline(took, 1, faults.first_synthesis_deadline);
            if now.saturating_duration_since(s.since) <= deadline {
                continue;
            }
            late_syntheses.insert((*job, *partition));
            if !late.iter().any(|(r, _)| *r == Role::Synth) {
                late.push((
                    Role::Synth,
                    ChildLoss::SynthesisLate {
                        deadline,
                        job: *job,
                        partition: *partition,
                    },
                ));
            }
        }
        for (role, reason) in late {
            let Some(info) = self.children.get_mut(&role) else {
                continue;
            };
            if let Some(pid) = info.pid {
                tracing::error!(%role, pid, "{reason}");
                self.actions.push(Action::Kill { role, pid });
                info.kill_reason = Some(reason);
                if role == Role::Synth {
                    info.kill_targets = Some(std::mem::take(&mut late_syntheses));
                }
                self.counters.deadline_kills += 1;
            }
            // Once per batch: the exit handler takes it from here.
            self.progress.forget(role);
        }
    }
}
