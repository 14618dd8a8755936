//! gpu-proc: proves circuits from slots of the shared-memory ring, in place.
//!
//! One gpu-proc runs per GPU, pinned to its own few cores (the CPU-side parts of proving — the
//! B_G2 multi-exponentiation, supraseal's host thread pool — stay there). It maps the ring and the
//! SRS images the launcher prepared (memfds inherited at fixed numbers, see
//! `shm_protocol::control`), builds one [`Backend`] per circuit, then loops:
//!
//! 1. claim a READY slot (futex wait, no spinning) and up to `batch - 1` more of the same circuit
//!    (a slot whose previous prover died holding it, `SlotMeta::attempt` > 0, is proved alone);
//! 2. validate each slot ([`Ring`]'s view checks every offset and length; a bad slot fails alone);
//! 3. prove the batch from the slots' memory, with fresh randomness `r`, `s` per proof; a
//!    witness slot (`shm_protocol::SlotKind::Witness`: inputs and packed aux values only) is
//!    first expanded on the host from its circuit's pre-compiled matrices
//!    ([`kernels::witness::expand`]: aux unpacked, `a = A·w`, `b = B·w`, `c = C·w`, the
//!    matrices' densities) and proved alone, through the same backend call (the reference path;
//!    the `gpu` backend computes a, b, c on the device from the same slot instead);
//! 4. write each proof (or failure) into its slot's result area: DONE, and tell the launcher;
//!    then report the device with its free memory ([`DeviceProbe`]).
//!
//! A panic inside a backend (supraseal-c2 panics on CUDA errors) is caught at the call: the
//! batch's slots are completed as failed with the message, and the process keeps serving.
//!
//! The SRS images are mapped read-only: the launcher seals their memfds against writes before
//! starting any gpu-proc (`F_SEAL_FUTURE_WRITE`), so a writable mapping would be refused anyway.
//! Besides those inherited at start, the launcher can add one while serving
//! ([`ToGpu::LoadSrs`], its memfd passed with the message) and drop one ([`ToGpu::EvictSrs`]:
//! the backend, what it derived from the SRS and the mapping go); the control thread does
//! both ([`Prover::load`], [`Prover::evict`]) and answers once it is done.
//!
//! With the `fault-injection` feature (tests only) the loop acts on `SPLITPROVER_FAULT`
//! (`shm_protocol::fault`): `gpu-hang` blocks forever before proving a matching slot (the
//! heartbeat thread keeps beating), `gpu-abort` kills the process (SIGKILL, no core file).
//!
//! # Example
//!
//! [`Prover::prove_claimed`] is the whole proving step over claimed slots; see the integration
//! tests for a complete ring round trip.
#![deny(missing_docs)]

mod device;
mod open;

use open::open_backend_fd;
pub use open::{map_matrices, open_backend, open_backend_from_file, SrsMapping};

pub use device::DeviceProbe;

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use blstrs::Scalar;
use ff::Field;
use kernels::r1cs::R1cs;
use kernels::witness::CircuitMatrices;
use kernels::{panic_message, Assignment, Backend, Density, WitnessAssignment};
use shm_protocol::control::{
    self, BackendKind, ChildConfig, EventKind, FromChild, GpuConfig, SharedSender, TimelineEvent,
    ToGpu,
};
use shm_protocol::{ClaimedSlot, Ring, SlotResult, SlotView};

/// Why gpu-proc cannot start or go on serving. A bad slot or a failed proof is not one of these:
/// it fails its own slot (see [`Prover::prove_claimed`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The environment or the child configuration is not what the launcher passes.
    #[error("{0}")]
    Config(String),
    /// The ring (or an SRS region) could not be mapped, or a ring operation failed.
    #[error("{what}: {source}")]
    Ring {
        /// What was being done.
        what: &'static str,
        /// The ring's error.
        source: shm_protocol::Error,
    },
    /// A backend could not be opened for a circuit.
    #[error("cannot open the SRS of `{circuit}`: {source}")]
    Backend {
        /// The circuit (spec) whose SRS it is.
        circuit: String,
        /// The kernels' error.
        source: kernels::Error,
    },
    /// A CUDA backend (`gpu`, `cuda`) was asked of a binary built without the `cuda` feature.
    #[error("this binary was built without the `cuda` feature\nhint: build with `--features cuda` (see scripts/cuda-env.sh)")]
    NoCuda,
    /// The control channel to the launcher failed.
    #[error("control channel: {0}")]
    Control(#[from] std::io::Error),
    /// The backend reported a sticky CUDA error: this process's GPU context is unusable. The
    /// slots it held stay claimed for the launcher to requeue, and the process exits.
    #[error("{0}\nhint: the launcher requeues the slots this gpu-proc held and starts a new one")]
    DeviceLost(String),
}

impl Error {
    fn ring(what: &'static str) -> impl FnOnce(shm_protocol::Error) -> Error {
        move |source| Error::Ring { what, source }
    }
}

/// Stop and pause flags are set by the control thread and polled by the serving loop. They are
/// stored with `Release` and loaded with `Acquire` (one ordering for every flag of the process):
/// whatever the control thread did before setting a flag is visible to the loop that sees it.
const SET: Ordering = Ordering::Release;
/// See [`SET`].
const GET: Ordering = Ordering::Acquire;

/// The backends of one gpu-proc, by circuit id, and the matrices of the circuits whose witness
/// slots it expands. The serving loop reads them while proving; the control thread adds
/// ([`Prover::load`]) and drops ([`Prover::evict`]) a backend between batches.
pub struct Prover {
    backends: RwLock<Backends>,
    matrices: RwLock<HashMap<u64, Arc<CircuitMatrices>>>,
}

type Backends = HashMap<u64, (String, Box<dyn Backend>)>;

/// A proof's randomness `(r, s)`, drawn once per proof.
pub type Randomness<'a> = &'a mut dyn FnMut() -> (Scalar, Scalar);

/// What happened to one slot of a batch.
#[derive(Debug)]
pub struct SlotOutcome {
    /// Job id.
    pub job_id: u64,
    /// Partition.
    pub partition: u32,
    /// Slot index.
    pub slot: u32,
    /// Slot generation after completion.
    pub generation: u64,
    /// Proof bytes, or why not.
    pub result: Result<Vec<u8>, String>,
}

impl Prover {
    /// Builds the backends for every SRS of `config`.
    ///
    /// # Safety
    ///
    /// Every `fd` in `config.srs` must satisfy [`SrsMapping::from_fd`]'s contract, and every
    /// `fd` in `config.r1cs` [`map_matrices`]'s.
    pub unsafe fn from_config(config: &GpuConfig) -> Result<Prover, Error> {
        // The matrices first: the `gpu` backend's device plan leaves room for its circuit's.
        let mut mapped = Vec::new();
        for entry in &config.r1cs {
            // SAFETY: forwarded to the caller.
            match unsafe { map_matrices(entry) } {
                Ok(r1cs) => {
                    tracing::info!(circuit = %entry.circuit, mib = r1cs.bytes() >> 20, "pre-compiled constraint system mapped for witness slots");
                    mapped.push(r1cs);
                }
                // Not fatal: the full slots of every circuit are proved as before, and a
                // witness slot of this circuit fails with a message saying why.
                Err(why) => tracing::warn!(
                    circuit = %entry.circuit,
                    "the pre-compiled constraint system cannot be used ({why}); its witness \
                     slots will fail"
                ),
            }
        }
        let mut backends: Backends = HashMap::new();
        for entry in &config.srs {
            let reserve = mapped
                .iter()
                .filter(|r| r.circuit_id() == entry.circuit_id)
                .map(open::matrices_reserve)
                .sum();
            // SAFETY: forwarded to the caller.
            let backend =
                unsafe { open_backend(config.backend, config.memory_budget, reserve, entry) }?;
            backends.insert(entry.circuit_id, (entry.circuit.clone(), backend));
        }
        let prover = Prover::from_backends(backends);
        for r1cs in mapped {
            prover.add_matrices(r1cs);
        }
        // The witness layouts (one pass over each circuit's rows, in order: tens of seconds at
        // a 32 GiB PoRep partition) are made now, beside serving, so the first witness slot
        // does not wait for them (it waits only for what is not done yet).
        let matrices: Vec<Arc<CircuitMatrices>> =
            prover.read_matrices().values().cloned().collect();
        if !matrices.is_empty() {
            let spawned = std::thread::Builder::new()
                .name("witness-layouts".into())
                .spawn(move || {
                    for m in matrices {
                        m.witness_layout();
                    }
                });
            if let Err(e) = spawned {
                tracing::warn!("cannot start the witness layouts' thread ({e}): made on first use");
            }
        }
        Ok(prover)
    }

    /// A prover from ready backends (tests, benches).
    pub fn from_backends(backends: HashMap<u64, (String, Box<dyn Backend>)>) -> Prover {
        Prover {
            backends: RwLock::new(backends),
            matrices: RwLock::new(HashMap::new()),
        }
    }

    /// Serves the witness slots of `r1cs`'s circuit (its circuit id) from now on.
    pub fn add_matrices(&self, r1cs: R1cs) {
        let id = r1cs.circuit_id();
        self.matrices
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, Arc::new(CircuitMatrices::new(r1cs)));
    }

    /// The circuit ids whose witness slots it can expand.
    pub fn matrix_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.read_matrices().keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    fn read_matrices(&self) -> std::sync::RwLockReadGuard<'_, HashMap<u64, Arc<CircuitMatrices>>> {
        // Nothing panics while holding it: the map is never left half-changed.
        self.matrices.read().unwrap_or_else(|e| e.into_inner())
    }

    /// What its backends hold and planned in device memory, together, and the largest budget
    /// among them (each plans within the gpu-proc's one budget).
    pub fn device_memory(&self) -> kernels::backend::DeviceMemory {
        self.read().values().map(|(_, b)| b.device_memory()).fold(
            kernels::backend::DeviceMemory::default(),
            |all, m| kernels::backend::DeviceMemory {
                srs_bytes: all.srs_bytes + m.srs_bytes,
                planned_bytes: all.planned_bytes + m.planned_bytes,
                budget_bytes: all.budget_bytes.max(m.budget_bytes),
                streamed_bytes: all.streamed_bytes + m.streamed_bytes,
                streamed_total_bytes: all.streamed_total_bytes + m.streamed_total_bytes,
            },
        )
    }

    /// The circuit ids it can prove.
    pub fn circuit_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.read().keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Opens the `kind` backend for one more SRS, whose memfd `fd` the launcher sent. Returns
    /// `Ok(false)` (and drops `fd`) when `circuit_id` is already loaded.
    ///
    /// # Safety
    ///
    /// As [`SrsMapping::from_owned_fd`] for `fd`.
    pub unsafe fn load(
        &self,
        kind: BackendKind,
        memory_budget: Option<u64>,
        circuit_id: u64,
        circuit: &str,
        params_path: &std::path::Path,
        fd: OwnedFd,
    ) -> Result<bool, Error> {
        if self.read().contains_key(&circuit_id) {
            return Ok(false);
        }
        let reserve = self
            .read_matrices()
            .get(&circuit_id)
            .map_or(Default::default(), |m| open::matrices_reserve(m.r1cs()));
        // Opened outside the lock: proving goes on meanwhile.
        // SAFETY: forwarded to the caller.
        let backend =
            unsafe { open_backend_fd(kind, (memory_budget, reserve), fd, circuit, params_path) }?;
        let mut backends = self.write();
        if backends.contains_key(&circuit_id) {
            backend.release();
            return Ok(false);
        }
        backends.insert(circuit_id, (circuit.to_owned(), backend));
        Ok(true)
    }

    /// Drops the backend of `circuit_id` and everything it holds (its SRS mapping, the CUDA
    /// backend's cached copy); waits for a batch in progress. Returns whether it was loaded.
    pub fn evict(&self, circuit_id: u64) -> bool {
        let removed = self.write().remove(&circuit_id);
        match removed {
            Some((_, backend)) => {
                backend.release();
                drop(backend);
                true
            }
            None => false,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Backends> {
        // A panic while holding the lock happens only inside a backend call, which catches it;
        // the map itself is never left half-changed.
        self.backends.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Backends> {
        self.backends.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Proves claimed slots of one circuit, completing each slot with its proof or failure; fresh
    /// randomness for each proof.
    pub fn prove_claimed(&self, claims: Vec<ClaimedSlot<'_>>) -> Result<Vec<SlotOutcome>, Error> {
        let mut rng = rand::thread_rng();
        self.prove_claimed_with(claims, &mut || {
            (Scalar::random(&mut rng), Scalar::random(&mut rng))
        })
    }

    /// [`Prover::prove_claimed`] with the randomness of each proof drawn from `randomness` (in
    /// slot order; tests fix it to compare proof bytes).
    pub fn prove_claimed_with(
        &self,
        claims: Vec<ClaimedSlot<'_>>,
        randomness: Randomness<'_>,
    ) -> Result<Vec<SlotOutcome>, Error> {
        let (results, lost) = {
            // Each slot is validated once; a bad one fails alone, the views of the others are
            // what the backend proves from.
            let views: Vec<Result<SlotView<'_>, String>> = claims
                .iter()
                .map(|c| c.view().map_err(|e| format!("bad slot: {e}")))
                .collect();
            self.prove_views(&views, randomness)
        };
        if let Some(reason) = lost {
            // The GPU context is unusable: no slot is failed for it. The claims stay CLAIMED,
            // as if this process had died here, and the process exits; the launcher requeues
            // them (one attempt each) and starts a new gpu-proc, whose context is new.
            for claim in claims {
                claim.leak();
            }
            return Err(Error::DeviceLost(reason));
        }
        Ok(claims
            .into_iter()
            .zip(results)
            .map(|(claim, result)| {
                let meta = claim.meta();
                finish(claim, result, meta.job_id, meta.partition)
            })
            .collect())
    }

    /// One result per view: the view's own error, or its proof; and why the GPU context is lost,
    /// when the backend said so. The full slots are proved together in one backend call; each
    /// witness slot is expanded on the host and proved alone (one expanded assignment in host
    /// memory at a time: at a 32 GiB partition that is 16 GiB).
    fn prove_views(
        &self,
        views: &[Result<SlotView<'_>, String>],
        randomness: Randomness<'_>,
    ) -> (Vec<Result<Vec<u8>, String>>, Option<String>) {
        let mut results: Vec<Result<Vec<u8>, String>> = views
            .iter()
            .map(|v| match v {
                Ok(_) => Ok(Vec::new()),
                Err(e) => Err(e.clone()),
            })
            .collect();
        let good: Vec<(usize, &SlotView<'_>)> = views
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_ref().ok().map(|v| (i, v)))
            .collect();
        let Some((_, first)) = good.first() else {
            return (results, None);
        };
        let circuit_id = first.meta().circuit_id;
        let backends = self.read();
        let Some((name, backend)) = backends.get(&circuit_id) else {
            for (i, _) in &good {
                results[*i] = Err(format!(
                    "no SRS for circuit id {circuit_id:#x} in this gpu-proc"
                ));
            }
            return (results, None);
        };
        let mut lost = None;
        let (full, witness): (Vec<_>, Vec<_>) =
            good.iter().partition(|(_, v)| v.witness().is_none());
        if !full.is_empty() {
            let assignments: Vec<Assignment<'_>> =
                full.iter().map(|(_, v)| assignment_of(v)).collect();
            let proved = prove_batch(name, &**backend, &assignments, randomness, &mut lost);
            for ((i, _), r) in full.iter().zip(proved) {
                results[*i] = r;
            }
        }
        let mut pending = Vec::new();
        for (i, view) in witness {
            match self.witness_of(view) {
                Ok((matrices, w)) => pending.push((i, matrices, w)),
                Err(e) => results[i] = Err(e),
            }
        }
        if let Some((_, matrices, _)) = pending.first() {
            // A batch is of one circuit: the backend proves the witnesses itself where it can
            // (`gpu`: unpacked and multiplied on the device), all at once.
            let ws: Vec<WitnessAssignment<'_>> = pending.iter().map(|(_, _, w)| *w).collect();
            // Each witness's randomness drawn once, whichever path proves it.
            let rs: Vec<(Scalar, Scalar)> = ws.iter().map(|_| randomness()).collect();
            let device = prove_witness_batch(name, &**backend, &ws, matrices, &rs, &mut lost);
            match device {
                Some(proved) => {
                    for ((i, _, _), r) in pending.iter().zip(proved) {
                        results[*i] = r;
                    }
                }
                None => {
                    // Expanded on the host and proved alone (one expanded assignment in host
                    // memory at a time).
                    for ((i, matrices, w), rs) in pending.iter().zip(&rs) {
                        if lost.is_some() {
                            // The claims are left for the launcher (`prove_claimed_with`).
                            break;
                        }
                        let mut own = Some(*rs);
                        let mut mine = || own.take().expect("one proof, one draw");
                        results[*i] = expand(matrices, w).and_then(|expanded| {
                            let assignment = expanded.assignment(w.input, matrices.r1cs());
                            prove_batch(name, &**backend, &[assignment], &mut mine, &mut lost)
                                .pop()
                                .unwrap_or_else(|| {
                                    Err(format!("{name}: the backend returned no proof"))
                                })
                        });
                    }
                }
            }
        }
        drop(backends);
        (results, lost)
    }

    /// A witness slot's circuit matrices and arrays, its lengths checked against their layout.
    fn witness_of<'v>(
        &self,
        view: &'v SlotView<'_>,
    ) -> Result<(Arc<CircuitMatrices>, WitnessAssignment<'v>), String> {
        let circuit_id = view.meta().circuit_id;
        let (w, lengths) = view
            .witness()
            .zip(view.layout().witness())
            .ok_or_else(|| "not a witness slot".to_owned())?;
        let matrices = self
            .read_matrices()
            .get(&circuit_id)
            .cloned()
            .ok_or_else(|| {
                format!(
                    "a witness slot of circuit id {circuit_id:#x}, whose pre-compiled matrices \
                     this gpu-proc was not given\nhint: give the gpu-procs the matrices of every \
                     circuit synthesized into witness slots (`GpuConfig::r1cs`)"
                )
            })?;
        let layout = matrices.witness_layout();
        let l = lengths;
        if (l.inputs, l.bits, l.non_bits) != (layout.inputs(), layout.bits(), layout.non_bits()) {
            return Err(format!(
                "bad witness slot: {} inputs, {} bit and {} other aux values, but the circuit's \
                 matrices have {} inputs, {} bit and {} other aux variables",
                l.inputs,
                l.bits,
                l.non_bits,
                layout.inputs(),
                layout.bits(),
                layout.non_bits()
            ));
        }
        let w = WitnessAssignment {
            input: w.input,
            bit_values: w.bit_values.words,
            non_bits: w.non_bits,
        };
        Ok((matrices, w))
    }
}

/// A witness slot's full assignment, computed on the host from its circuit's matrices.
fn expand(
    matrices: &CircuitMatrices,
    w: &WitnessAssignment<'_>,
) -> Result<kernels::witness::Expanded, String> {
    kernels::witness::expand(
        matrices.r1cs(),
        matrices.witness_layout(),
        w.input,
        w.bit_values,
        w.non_bits,
    )
    .map_err(|e| format!("expanding the witness slot: {e}"))
}

/// Proves witness-only assignments in one backend call where the backend can
/// ([`Backend::prove_witness_batch`]); `None` when it cannot. A panic is caught and fails them
/// all; a lost GPU context is noted in `lost`.
fn prove_witness_batch(
    name: &str,
    backend: &dyn Backend,
    witnesses: &[WitnessAssignment<'_>],
    matrices: &Arc<CircuitMatrices>,
    rs: &[(Scalar, Scalar)],
    lost: &mut Option<String>,
) -> Option<Vec<Result<Vec<u8>, String>>> {
    let (r, s): (Vec<Scalar>, Vec<Scalar>) = rs.iter().copied().unzip();
    let run = catch_unwind(AssertUnwindSafe(|| {
        backend.prove_witness_batch(witnesses, matrices, &r, &s)
    }));
    Some(finish_proofs(
        name,
        backend,
        run.transpose()?,
        witnesses.len(),
        lost,
    ))
}

/// Proves `assignments` in one backend call with randomness from `randomness`: one result per
/// assignment. A panic is caught and fails them all; a lost GPU context is noted in `lost`.
fn prove_batch(
    name: &str,
    backend: &dyn Backend,
    assignments: &[Assignment<'_>],
    randomness: Randomness<'_>,
    lost: &mut Option<String>,
) -> Vec<Result<Vec<u8>, String>> {
    let (r, s): (Vec<Scalar>, Vec<Scalar>) = assignments.iter().map(|_| randomness()).unzip();
    let run = catch_unwind(AssertUnwindSafe(|| {
        backend.prove_batch(assignments, &r, &s)
    }));
    finish_proofs(name, backend, run, assignments.len(), lost)
}

/// One result per proof of a backend call that made `n`: the proofs' bytes, or the call's error
/// (a lost GPU context noted in `lost`), or its panic.
fn finish_proofs(
    name: &str,
    backend: &dyn Backend,
    run: std::thread::Result<Result<Vec<kernels::Proof>, kernels::Error>>,
    n: usize,
    lost: &mut Option<String>,
) -> Vec<Result<Vec<u8>, String>> {
    match run {
        Ok(Ok(proofs)) if proofs.len() != n => {
            vec![
                Err(format!(
                    "{name}: the backend returned {} proofs for {n} circuits",
                    proofs.len()
                ));
                n
            ]
        }
        Ok(Ok(proofs)) => proofs
            .iter()
            .map(|p| {
                let mut bytes = Vec::with_capacity(192);
                p.write(&mut bytes)
                    .map(|()| bytes)
                    .map_err(|e| format!("serializing the proof: {e}"))
            })
            .collect(),
        Ok(Err(e)) => {
            if matches!(e.kind(), kernels::ErrorKind::DeviceLost(_)) {
                *lost = Some(format!("{name}: {e}"));
            }
            vec![Err(format!("{name}: {e}")); n]
        }
        Err(panic) => {
            let msg = panic_message(&*panic);
            tracing::error!("backend panicked: {msg}");
            vec![
                Err(format!(
                    "{name}: the {} backend panicked: {msg}",
                    backend.name()
                ));
                n
            ]
        }
    }
}

fn finish(
    claim: ClaimedSlot<'_>,
    result: Result<Vec<u8>, String>,
    job_id: u64,
    partition: u32,
) -> SlotOutcome {
    let slot = claim.index() as u32;
    let stored = match &result {
        Ok(bytes) => SlotResult::Proof(bytes),
        Err(msg) => SlotResult::Failed(msg),
    };
    let generation = claim.generation();
    if let Err(e) = claim.complete(stored) {
        tracing::error!(slot, "cannot complete slot: {e}");
    }
    SlotOutcome {
        job_id,
        partition,
        slot,
        generation,
        result,
    }
}

/// The kernels' view of a validated slot.
pub fn assignment_of<'a>(v: &SlotView<'a>) -> Assignment<'a> {
    let d = |which| {
        let b = v.density(which);
        Density {
            words: b.words,
            bit_len: b.bit_len as usize,
            popcount: b.popcount as usize,
        }
    };
    Assignment {
        a: v.a(),
        b: v.b(),
        c: v.c(),
        input: v.input(),
        aux: v.aux(),
        a_aux_density: d(shm_protocol::Density::AAux),
        b_input_density: d(shm_protocol::Density::BInput),
        b_aux_density: d(shm_protocol::Density::BAux),
    }
}

/// Entry point of the process: configuration from [`CHILD_CONFIG_ENV`], ring at [`RING_FD`],
/// control socket at [`CONTROL_FD`], SRS images from `FIRST_SRS_FD`.
pub fn run_from_env() -> Result<(), Error> {
    // SAFETY: called once, by the process the launcher started as gpu-proc: RING_FD and
    // CONTROL_FD are its own.
    let inherited = unsafe {
        shm_protocol::child::inherit("gpu-proc", |c| match c {
            ChildConfig::Gpu(g) => Ok(g),
            other => Err(other),
        })
    }
    .map_err(|e| Error::Config(e.to_string()))?;
    let (config, ring, control) = (inherited.config, inherited.ring, inherited.control);
    let (sender, receiver) = control::channel(control)?;
    let sender = SharedSender::new(sender);
    // Beat while the backends load too: opening a large SRS can take a while.
    let _heartbeat = sender.spawn_heartbeat(HEARTBEAT);
    // SAFETY: the SRS fds come from the launcher, which sealed them before starting us.
    let prover = unsafe { Prover::from_config(&config) }?;
    serve(Arc::new(ring), sender, receiver, &config, Arc::new(prover))
}

/// How often a gpu-proc tells the launcher it is alive (from its own thread, so a long batch does
/// not look like a hang).
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// Serves the ring until the launcher says `Shutdown` or goes away.
pub fn serve(
    ring: Arc<Ring>,
    sender: SharedSender,
    mut receiver: control::Receiver,
    config: &GpuConfig,
    prover: Arc<Prover>,
) -> Result<(), Error> {
    let pid = std::process::id();
    let _lock = page_lock_ring(&ring, config.backend);
    let stop = Arc::new(AtomicBool::new(false));
    let paused = Arc::new(AtomicBool::new(false));
    {
        let (stop, paused) = (stop.clone(), paused.clone());
        let (prover, sender, kind, budget) = (
            prover.clone(),
            sender.clone(),
            config.backend,
            config.memory_budget,
        );
        std::thread::spawn(move || {
            loop {
                match receiver.recv::<ToGpu>() {
                    Ok(Some(ToGpu::Pause)) => paused.store(true, SET),
                    Ok(Some(ToGpu::Resume)) => paused.store(false, SET),
                    Ok(Some(ToGpu::LoadSrs {
                        circuit_id,
                        circuit,
                        params_path,
                    })) => {
                        let loaded = receiver.take_fd().map(|fd| {
                            // SAFETY: the launcher sends a memfd it sealed against writes
                            // before sending, and this process owns the received descriptor.
                            unsafe {
                                prover.load(kind, budget, circuit_id, &circuit, &params_path, fd)
                            }
                        });
                        let error = match loaded {
                            Some(Ok(new)) => {
                                tracing::info!(%circuit, new, "SRS loaded");
                                None
                            }
                            Some(Err(e)) => Some(e.to_string()),
                            None => Some(format!(
                                "the SRS memfd of `{circuit}` did not come with its message"
                            )),
                        };
                        if sender
                            .send(&FromChild::SrsLoaded { circuit_id, error })
                            .is_err()
                        {
                            break;
                        }
                    }
                    Ok(Some(ToGpu::EvictSrs { circuit_id })) => {
                        let was = prover.evict(circuit_id);
                        tracing::info!(circuit_id, was_loaded = was, "SRS evicted");
                        if sender.send(&FromChild::SrsEvicted { circuit_id }).is_err() {
                            break;
                        }
                    }
                    Ok(Some(ToGpu::Shutdown)) | Ok(None) | Err(_) => break,
                }
            }
            stop.store(true, SET);
        });
    }
    tracing::info!(pid, backend = %config.backend, batch = config.batch, pages = %ring.page_kind(), "gpu-proc serving");
    sender.send(&FromChild::Hello {
        pid,
        detail: format!("gpu-proc[{}]: {} backend", config.device, config.backend),
    })?;
    let device = DeviceProbe::new(config.device, config.backend);
    sender.send(&device.report(prover.device_memory()))?;
    let owner = shm_protocol::current_owner();
    let batch = config.batch.max(1);
    let mut acked_pause = false;
    #[cfg(feature = "fault-injection")]
    let faults = shm_protocol::fault::Faults::from_env();
    while !stop.load(GET) {
        if paused.load(GET) {
            // Nothing is claimed here, so the pause holds from this answer on.
            if !acked_pause {
                sender.send(&FromChild::Paused)?;
                acked_pause = true;
            }
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        acked_pause = false;
        let first = match ring.claim_ready(owner, Some(Duration::from_millis(500))) {
            Ok(c) => c,
            Err(e) if e.is_timeout() => continue,
            Err(e) => return Err(Error::ring("claiming a ready slot")(e)),
        };
        let circuit = first.meta().circuit_id;
        // A slot requeued after its prover died (`attempt` > 0) is proved alone: if it is what
        // kills the process, it takes no other slot down with it this time.
        let alone = first.meta().attempt > 0;
        let mut claims = vec![first];
        while !alone && claims.len() < batch {
            match ring
                .try_claim_ready(owner)
                .map_err(Error::ring("claiming a ready slot"))?
            {
                Some(c) if c.meta().circuit_id == circuit && c.meta().attempt == 0 => {
                    claims.push(c)
                }
                Some(other) => {
                    other
                        .release()
                        .map_err(Error::ring("releasing a slot of another circuit"))?;
                    break;
                }
                None => break,
            }
        }
        for c in &claims {
            let m = c.meta();
            sender.send(&FromChild::Event(TimelineEvent::now(
                EventKind::GpuClaim,
                m.job_id,
                m.partition,
                c.index() as u32,
            )))?;
        }
        #[cfg(feature = "fault-injection")]
        inject_faults(&faults, &claims);
        let start = control::monotonic_ns();
        let metas: Vec<_> = claims
            .iter()
            .map(|c| (c.meta(), c.index() as u32))
            .collect();
        let outcomes = match prover.prove_claimed(claims) {
            Ok(outcomes) => outcomes,
            Err(e) => {
                tracing::error!("{e}");
                return Err(e);
            }
        };
        let end = control::monotonic_ns();
        for (m, slot) in &metas {
            for (kind, t) in [(EventKind::GpuStart, start), (EventKind::GpuEnd, end)] {
                sender.send(&FromChild::Event(TimelineEvent {
                    kind,
                    job_id: m.job_id,
                    partition: m.partition,
                    slot: *slot,
                    pid,
                    tid: control::current_tid(),
                    t_ns: t,
                }))?;
            }
        }
        for o in outcomes {
            if let Err(e) = &o.result {
                tracing::warn!(job = o.job_id, partition = o.partition, "proof failed: {e}");
            }
            sender.send(&FromChild::Proved {
                job_id: o.job_id,
                partition: o.partition,
                slot: o.slot,
                generation: o.generation,
            })?;
        }
        sender.send(&device.report(prover.device_memory()))?;
    }
    tracing::info!("gpu-proc exiting");
    Ok(())
}

/// Test faults (feature `fault-injection`): hang forever or abort before proving `claims` when
/// `SPLITPROVER_FAULT` names one of them.
#[cfg(feature = "fault-injection")]
fn inject_faults(faults: &shm_protocol::fault::Faults, claims: &[ClaimedSlot<'_>]) {
    use shm_protocol::fault::FaultKind;
    let hit = |kind| {
        claims.iter().any(|c| {
            let m = c.meta();
            faults.hits(kind, m.job_id, m.partition)
        })
    };
    if hit(FaultKind::GpuAbort) {
        tracing::error!("fault injection: dying inside a proof");
        // SIGKILL rather than abort(): the same death for the launcher, and no core file.
        // SAFETY: kill(2) on our own pid takes plain integers and touches no memory.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
    if hit(FaultKind::GpuHang) {
        tracing::error!("fault injection: hanging inside a proof");
        loop {
            std::thread::park();
        }
    }
}

/// Page-locks the whole ring mapping once for DMA-speed host-to-device copies (CUDA backends).
#[cfg(feature = "cuda")]
fn page_lock_ring(ring: &Ring, backend: BackendKind) -> Option<kernels::backend::cuda::PageLock> {
    if !backend.uses_cuda() {
        return None;
    }
    let (ptr, len) = ring.mapping();
    let t = std::time::Instant::now();
    // SAFETY: the ring's mapping stays mapped for the life of `ring`, which outlives the returned
    // lock (both live in `serve`, the lock dropped first).
    match unsafe { kernels::backend::cuda::page_lock(ptr as *mut u8, len) } {
        Ok(lock) => {
            tracing::info!(
                mib = len >> 20,
                ms = t.elapsed().as_millis() as u64,
                "ring page-locked for DMA"
            );
            Some(lock)
        }
        Err(e) => {
            tracing::warn!("cannot page-lock the ring, copies will be slower: {e}");
            None
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn page_lock_ring(_ring: &Ring, _backend: BackendKind) -> Option<()> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A backend that counts its releases and drops.
    struct Counted(Arc<AtomicUsize>, Arc<AtomicUsize>);

    impl Backend for Counted {
        fn name(&self) -> &'static str {
            "counted"
        }

        fn prove_batch(
            &self,
            _batch: &[Assignment<'_>],
            _r: &[Scalar],
            _s: &[Scalar],
        ) -> Result<Vec<kernels::Proof>, kernels::Error> {
            Ok(Vec::new())
        }

        fn release(&self) {
            self.0.fetch_add(1, Ordering::SeqCst); // a test counter: any ordering would do
        }
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::SeqCst); // a test counter: any ordering would do
        }
    }

    /// The CUDA backends without the `cuda` feature, or without a GPU, are errors that say so,
    /// never a panic; the CPU backend opens the same file.
    #[test]
    fn cuda_backends_say_what_is_missing() {
        let spec: kernels::circuits::CircuitSpec = "pubinputs:2".parse().unwrap();
        let params =
            kernels::paramgen::generate_parameters_seeded(spec.circuit(None), 1, &|_| {}).unwrap();
        let path =
            std::env::temp_dir().join(format!("gpu-proc-kinds-{}.params", std::process::id()));
        kernels::srs::write_params_file(&path, &params).unwrap();
        let id = spec.circuit_id();
        let cpu = open_backend_from_file(BackendKind::Cpu, &path, id, "pubinputs:2");
        assert_eq!(cpu.unwrap().name(), "cpu");
        for kind in [BackendKind::Gpu, BackendKind::Cuda] {
            let opened = open_backend_from_file(kind, &path, id, "pubinputs:2");
            #[cfg(not(feature = "cuda"))]
            {
                let err = opened
                    .err()
                    .expect("a CUDA backend opened without the feature");
                assert!(matches!(err, Error::NoCuda), "{kind}: {err}");
                assert!(err.to_string().contains("--features cuda"), "{err}");
            }
            #[cfg(feature = "cuda")]
            match opened {
                Ok(backend) => {
                    assert!(kernels::backend::cuda::gpu_count().unwrap() > 0);
                    assert_eq!(backend.name(), kind.as_str());
                }
                Err(Error::Backend { circuit, source }) => {
                    assert_eq!(circuit, "pubinputs:2");
                    assert!(
                        matches!(source.kind(), kernels::ErrorKind::NoGpu),
                        "{kind}: {source}"
                    );
                }
                Err(other) => panic!("{kind}: {other}"),
            }
        }
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn evict_releases_and_drops_the_backend_once() {
        let (released, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let mut backends: Backends = HashMap::new();
        backends.insert(
            5,
            (
                "sha-chain:1".into(),
                Box::new(Counted(released.clone(), dropped.clone())) as Box<dyn Backend>,
            ),
        );
        backends.insert(
            6,
            (
                "bits:8".into(),
                Box::new(Counted(Arc::default(), Arc::default())) as Box<dyn Backend>,
            ),
        );
        let prover = Prover::from_backends(backends);
        assert_eq!(prover.circuit_ids(), vec![5, 6]);
        assert!(prover.evict(5));
        assert_eq!(released.load(Ordering::SeqCst), 1);
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        assert_eq!(prover.circuit_ids(), vec![6]);
        assert!(!prover.evict(5), "not loaded any more");
        assert_eq!(released.load(Ordering::SeqCst), 1);
    }
}
