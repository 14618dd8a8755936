//! Starting a pipeline: the circuits counted, the memory model checked before anything large is
//! allocated, the SRS images loaded, the ring created, the pre-compiled constraint systems, the
//! layout and pinning, the children's supervisors; then the core, the verifier pool and the
//! dispatcher thread put together ([`Pipeline::assemble`], which the tests use with fake
//! children).

use std::os::fd::{OwnedFd, RawFd};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Instant;

use bellperson::groth16::prepare_verifying_key;
use kernels::circuits::AnyCircuit;
use kernels::synth::CircuitShape;
use shm_protocol::control::{
    BackendKind, ChildConfig, GpuConfig, R1csEntry, SynthConfig, FIRST_R1CS_FD, FIRST_SRS_FD,
    RING_FD,
};
use shm_protocol::fault::Faults;
use shm_protocol::{HugePagePolicy, Region, Ring, RingConfig, SlotClass};

use super::child::{ChildSpec, SpawnHook, Supervisor};
use super::core::{CircuitEntry, Core, Role, Rules, SrsSet};
use super::dispatch::dispatch;
use super::hub::Hub;
use super::mail::Mail;
use super::memory::config_text;
use super::settings::{CircuitSetting, PipelineSettings};
use super::srs_set;
use super::verify::{pool_size, Groth16, Verifier, VerifierPool};
use super::{memory, Pipeline, PipelineError, Result};
use crate::pinning::{CpuList, Layout, PinMode, Placement};
use crate::srs::SharedSrs;
use crate::sync::lock;

/// What [`Pipeline::assemble`] puts together.
pub(super) struct Parts {
    /// The state machine in its hub (the pipeline's lock), its children not yet started (their
    /// spawn hooks may hold it already).
    pub(super) hub: Arc<Mutex<Hub>>,
    /// The children's supervisors (none in the tests), reporting on `events`.
    pub(super) supervisors: Vec<Supervisor>,
    /// The dispatcher's channel.
    pub(super) events: (mpsc::Sender<Mail>, mpsc::Receiver<Mail>),
    /// The proof check.
    pub(super) verifier: Arc<dyn Verifier>,
    /// Its threads (0: automatic).
    pub(super) verify_threads: usize,
    pub(super) pin_mode: PinMode,
    pub(super) r1cs: Vec<crate::r1cs::SharedR1cs>,
    pub(super) synthesis: Vec<(AnyCircuit, crate::r1cs::Plan)>,
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
        let counted = count_circuits(&settings)?;
        // With witness slots the pre-compiled matrices size the slots (a circuit's witness slot
        // holds its inputs and the aux variables its rows show to be bits, packed), so they come
        // first, in ordinary pages (the ring's huge pages are not known yet). Otherwise they
        // come after the ring, which has the first claim on huge pages.
        let witness_slots = settings.synthesis.precompiled && settings.synthesis.witness_slots;
        let to_compile: Vec<_> = counted
            .iter()
            .map(|(c, id, shape)| (c.spec, *id, *shape))
            .collect();
        let early =
            witness_slots.then(|| precompile(&settings, &to_compile, HugePagePolicy::Plain));
        let (ring_config, witness_ids) = size_slots(&settings, &counted, early.as_ref())?;
        let layout = layout_for(&settings)?;
        let synth_concurrency = match settings.synth_concurrency {
            0 => layout.synth().len().max(1),
            n => n,
        };
        // Nothing large is allocated before the configuration is known to fit the host.
        if settings.memory_check {
            check_memory(
                &settings,
                &counted,
                &witness_ids,
                &ring_config,
                synth_concurrency,
            )?;
        }
        let (srs, circuits) = load_srs(counted, &witness_ids)?;
        let ring = create_ring(&settings, ring_config)?;
        // The pre-compiled constraint systems, after the ring so they never take huge pages the
        // ring could have had (unless the slots needed them first).
        let (r1cs, synthesis) =
            early.unwrap_or_else(|| precompile(&settings, &to_compile, HugePagePolicy::Auto));
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
        let core = new_core(&settings, ring.clone(), circuits, srs, synth_concurrency);
        // The hub exists before the children: a gpu-proc's spawn hook reads the core's SRS set.
        let hub = Arc::new(Mutex::new(Hub::new(core)));
        let (events_tx, events_rx) = mpsc::channel();
        let children = Children {
            settings: &settings,
            ring: &ring,
            pin_mode: &pin_mode,
            layout: &layout,
            synth_concurrency,
        };
        let supervisors = children.start(&r1cs, &witness_ids, &hub, &events_tx)?;
        Pipeline::assemble(Parts {
            hub,
            supervisors,
            events: (events_tx, events_rx),
            verifier: Arc::new(Groth16),
            verify_threads: settings.verify_threads,
            pin_mode,
            r1cs,
            synthesis,
        })
    }

    /// Starts the verifier pool and the dispatcher over `parts`.
    pub(super) fn assemble(parts: Parts) -> Result<Pipeline> {
        let ring = lock(&parts.hub).core.ring.clone();
        let hub = parts.hub;
        let (events_tx, events_rx) = parts.events;
        let pool = VerifierPool::start(
            pool_size(parts.verify_threads),
            parts.verifier,
            events_tx.clone(),
        )
        .map_err(|source| PipelineError::Io {
            what: "cannot start the verifier threads",
            cause: source,
        })?;
        let dispatcher = {
            let hub = hub.clone();
            thread::Builder::new()
                .name("dispatcher".into())
                .spawn(move || dispatch(&hub, events_rx, pool))
                .map_err(|source| PipelineError::Io {
                    what: "cannot start the dispatcher thread",
                    cause: source,
                })?
        };
        Ok(Pipeline {
            hub,
            supervisors: Mutex::new(parts.supervisors),
            dispatcher: Some(dispatcher),
            events: events_tx,
            ring,
            pin_mode: parts.pin_mode,
            srs_ops: Mutex::new(()),
            r1cs: parts.r1cs,
            synthesis: parts.synthesis,
        })
    }
}

/// A configured circuit, its id and its shape: every circuit counted once (the memory model,
/// the SRS check and the slot size need it).
type Counted<'a> = (&'a CircuitSetting, u64, CircuitShape);

/// Counts every configured circuit.
fn count_circuits(settings: &PipelineSettings) -> Result<Vec<Counted<'_>>> {
    let mut counted = Vec::new();
    for c in &settings.circuits {
        let t = Instant::now();
        let circuit_error = |source| PipelineError::Circuit {
            spec: c.spec,
            cause: source,
        };
        let shape = c.spec.shape().map_err(circuit_error)?;
        tracing::info!(circuit = %c.spec, constraints = shape.constraints, secs = t.elapsed().as_secs_f64(), "circuit counted");
        let id = c.spec.circuit_id().map_err(circuit_error)?;
        counted.push((c, id, shape));
    }
    Ok(counted)
}

/// The ring's configuration: a full slot's size, or a witness slot's for a circuit with
/// matrices (`early`), the largest in the shared class, each circuit's own slots in classes of
/// their own; and the ids of the circuits that travel in witness slots.
fn size_slots(
    settings: &PipelineSettings,
    counted: &[Counted<'_>],
    early: Option<&Precompiled>,
) -> Result<(RingConfig, Vec<u64>)> {
    let mut slot_bytes = 0u64;
    let mut own_classes = Vec::new();
    let mut witness_ids = Vec::new();
    for (c, id, shape) in counted {
        let compiled = early.and_then(|(r1cs, _)| r1cs.iter().find(|r| r.circuit_id == *id));
        let need = match compiled.map(|r| r.witness_capacity()) {
            Some(Ok(capacity)) => {
                witness_ids.push(*id);
                capacity.slot_bytes()
            }
            Some(Err(e)) => {
                tracing::warn!(circuit = %c.spec, "full slots: its witness layout cannot be made: {e}");
                crate::ring::capacity_for(shape).slot_bytes()
            }
            None => crate::ring::capacity_for(shape).slot_bytes(),
        }
        .ok_or(PipelineError::SlotOverflow(c.spec))?;
        tracing::info!(circuit = %c.spec, slot_mib = need >> 20, witness = witness_ids.contains(id), "slot size");
        slot_bytes = slot_bytes.max(need);
        if c.slots > 0 {
            own_classes.push(SlotClass {
                slot_count: u32::try_from(c.slots)
                    .map_err(|_| PipelineError::TooManySlots(c.slots))?,
                slot_bytes: need,
            });
        }
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
    Ok((
        ring_config(settings.slots, slot_bytes, &own_classes)?,
        witness_ids,
    ))
}

/// Refuses a configuration whose memory model does not fit the host ([`memory::plan`]).
fn check_memory(
    settings: &PipelineSettings,
    counted: &[Counted<'_>],
    witness_ids: &[u64],
    ring_config: &RingConfig,
    synth_concurrency: usize,
) -> Result<()> {
    let plan = memory::plan(
        settings,
        counted,
        witness_ids,
        ring_config,
        synth_concurrency,
    );
    let host = memory::HostMemory::read();
    let huge = settings.huge_pages != HugePagePolicy::Plain;
    plan.check(&host, huge).map_err(PipelineError::Memory)?;
    tracing::info!(
        need_mib = plan.ordinary_bytes(&host, huge) >> 20,
        available_mib = host.available >> 20,
        huge_free_mib = host.huge_free >> 20,
        "host memory model:\n{plan}"
    );
    Ok(())
}

/// The SRS images in shared memory, each checked against its circuit, and the core's entry for
/// every circuit.
fn load_srs(
    counted: Vec<Counted<'_>>,
    witness_ids: &[u64],
) -> Result<(SrsSet, Vec<(u64, CircuitEntry)>)> {
    let mut srs = Vec::new();
    let mut circuits = Vec::new();
    for (c, id, shape) in counted {
        let shared = SharedSrs::load(&c.spec, id, &shape, &c.params, HugePagePolicy::Auto)?;
        let pvk = Arc::new(prepare_verifying_key(&shared.view()?.verifying_key()));
        circuits.push((
            id,
            CircuitEntry {
                pvk,
                spec: c.spec,
                shape,
                params: c.params.clone(),
                witness: witness_ids.contains(&id),
            },
        ));
        srs.push(shared);
    }
    Ok((SrsSet::new(srs), circuits))
}

/// The ring in its shared memory.
fn create_ring(settings: &PipelineSettings, ring_config: RingConfig) -> Result<Arc<Ring>> {
    let region = ring_config
        .region_bytes()
        .and_then(|bytes| Region::create("splitprover-ring", bytes, settings.huge_pages))
        .map_err(PipelineError::Ring)?;
    let ring = Arc::new(Ring::create(region, ring_config).map_err(PipelineError::Ring)?);
    tracing::info!(
        slots = ring.slot_count(),
        classes = %config_text(&ring_config),
        pages = %ring.page_kind(),
        "ring created"
    );
    Ok(ring)
}

/// The core over the ring, its circuits and SRS set, under the settings' rules.
fn new_core(
    settings: &PipelineSettings,
    ring: Arc<Ring>,
    circuits: Vec<(u64, CircuitEntry)>,
    srs: SrsSet,
    synth_concurrency: usize,
) -> Core {
    let synth_window = synth_concurrency + settings.synth_lookahead.unwrap_or(synth_concurrency);
    let injected = if shm_protocol::fault::ENABLED {
        Faults::from_env()
    } else {
        Faults::default()
    };
    Core::new(
        ring,
        circuits,
        srs,
        Rules {
            faults: settings.faults.clone(),
            verify: settings.verify,
            heartbeat_timeout: settings.heartbeat_timeout,
            synth_window: synth_window.max(1),
            gpu_roles: settings.gpus.iter().map(|g| Role::Gpu(g.device)).collect(),
            injected,
        },
    )
}

/// The pre-compiled constraint systems, and how each circuit is synthesized ([`precompile`]).
type Precompiled = (
    Vec<crate::r1cs::SharedR1cs>,
    Vec<(AnyCircuit, crate::r1cs::Plan)>,
);

/// Descriptors a child inherits at fixed numbers: (the descriptor, its number there).
type Inherited = Vec<(Arc<OwnedFd>, RawFd)>;

/// A gpu-proc's matrices: each descriptor with its entry.
type Matrices = Vec<(Arc<OwnedFd>, R1csEntry)>;

/// What starting the children needs.
struct Children<'a> {
    settings: &'a PipelineSettings,
    ring: &'a Ring,
    pin_mode: &'a PinMode,
    layout: &'a Layout,
    synth_concurrency: usize,
}

impl Children<'_> {
    /// Starts one supervisor for synth-proc and one per gpu-proc, each pinned to its cpus.
    fn start(
        &self,
        r1cs: &[crate::r1cs::SharedR1cs],
        witness_ids: &[u64],
        hub: &Arc<Mutex<Hub>>,
        events: &mpsc::Sender<Mail>,
    ) -> Result<Vec<Supervisor>> {
        let settings = self.settings;
        let ring_fd: Arc<OwnedFd> = Arc::new(
            self.ring
                .region()
                .fd()
                .try_clone_to_owned()
                .map_err(|source| PipelineError::Io {
                    what: "cannot duplicate the ring's descriptor",
                    cause: source,
                })?,
        );
        let (synth_fds, r1cs_entries, gpu_matrices) = matrices_fds(r1cs, witness_ids, &ring_fd)?;
        let mut supervisors = Vec::new();
        supervisors.push(Supervisor::start(
            ChildSpec {
                role: Role::Synth,
                program: settings.program.clone(),
                args: vec!["synth-proc".into()],
                env: settings.child_env.clone(),
                config: ChildConfig::Synth(SynthConfig {
                    concurrency: self.synth_concurrency,
                    r1cs: r1cs_entries,
                }),
                fds: synth_fds,
                placement: Some(Placement::prepare(
                    self.pin_mode,
                    "synth",
                    self.layout.synth(),
                )?),
                restart: settings.restart,
                outbox: settings.faults.outbox,
                prepare: None,
            },
            events.clone(),
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
                    memory_budget: g.memory_budget,
                    // Filled at each start, after the SRS descriptors.
                    r1cs: Vec::new(),
                }),
                fds: vec![(ring_fd.clone(), RING_FD)],
                placement: Some(Placement::prepare(
                    self.pin_mode,
                    &format!("gpu{i}"),
                    &self.layout.gpus()[i],
                )?),
                restart: settings.restart,
                outbox: settings.faults.outbox,
                prepare: Some(with_matrices(
                    srs_set::spawn_hook(Arc::downgrade(hub), Role::Gpu(g.device)),
                    gpu_matrices.clone(),
                )),
            };
            supervisors.push(Supervisor::start(spec, events.clone()));
        }
        Ok(supervisors)
    }
}

/// synth-proc inherits the ring and every pre-compiled constraint system's memfd at fixed
/// numbers, at every start (a restarted synth-proc maps the same memory again); each gpu-proc
/// inherits the matrices of the circuits that travel in witness slots, after its SRS
/// descriptors, to compute their a, b, c. Returns synth-proc's descriptors, their entries and
/// the gpu-procs' matrices.
fn matrices_fds(
    r1cs: &[crate::r1cs::SharedR1cs],
    witness_ids: &[u64],
    ring_fd: &Arc<OwnedFd>,
) -> Result<(Inherited, Vec<R1csEntry>, Matrices)> {
    let mut synth_fds = vec![(ring_fd.clone(), RING_FD)];
    let mut r1cs_entries = Vec::new();
    let mut gpu_matrices = Vec::new();
    for shared in r1cs {
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
        let dup = Arc::new(dup);
        synth_fds.push((dup.clone(), fd));
        let entry = R1csEntry {
            circuit_id: shared.circuit_id,
            circuit: shared.spec.to_string(),
            fd,
            bytes: shared.len(),
        };
        if witness_ids.contains(&shared.circuit_id) {
            gpu_matrices.push((dup, entry.clone()));
        }
        r1cs_entries.push(entry);
    }
    Ok((synth_fds, r1cs_entries, gpu_matrices))
}

/// `srs` (the SRS descriptors of a gpu-proc's start) followed by the descriptors of `matrices`,
/// numbered on from the last SRS descriptor, as `GpuConfig::r1cs` entries.
fn with_matrices(srs: SpawnHook, matrices: Matrices) -> SpawnHook {
    Arc::new(move |config: &mut ChildConfig| {
        let mut fds = srs(config);
        if let ChildConfig::Gpu(gpu) = config {
            gpu.r1cs.clear();
            for (fd, entry) in &matrices {
                let number = FIRST_SRS_FD + fds.len() as RawFd;
                fds.push((fd.clone(), number));
                gpu.r1cs.push(R1csEntry {
                    fd: number,
                    ..entry.clone()
                });
            }
        }
        fds
    })
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

/// The pre-compiled constraint system of every configured circuit that has one within the
/// budget (in the settings' order, the budget shared), and how each circuit is synthesized.
fn precompile(
    settings: &PipelineSettings,
    circuits: &[(AnyCircuit, u64, CircuitShape)],
    huge: HugePagePolicy,
) -> Precompiled {
    use crate::r1cs::{load_or_record, Plan};
    let mut shared = Vec::new();
    let mut plans = Vec::new();
    let mut budget = settings.synthesis.budget_bytes;
    let mut seen = Vec::new();
    for &(spec, id, ref shape) in circuits {
        if seen.contains(&id) {
            continue;
        }
        seen.push(id);
        if !settings.synthesis.precompiled {
            plans.push((spec, Plan::Full("pre-compiled matrices are off".into())));
            continue;
        }
        match load_or_record(
            &spec,
            id,
            shape,
            settings.synthesis.cache_dir.as_deref(),
            budget,
            huge,
        ) {
            Ok(r1cs) => {
                budget = budget.saturating_sub(r1cs.len());
                plans.push((
                    spec,
                    Plan::Precompiled {
                        bytes: r1cs.len(),
                        origin: r1cs.origin.clone(),
                    },
                ));
                shared.push(r1cs);
            }
            Err(why) => {
                tracing::warn!(circuit = %spec, "synthesized in full: {why}");
                plans.push((spec, Plan::Full(why)));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_has_the_shared_slots_and_each_circuits_own() {
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
        assert_eq!(config_text(&c), "5 slots x 16.00 GiB + 8 slots x 100.0 MiB");
        assert_eq!(c.data_bytes().unwrap(), 5 * 16 * gib + 8 * (100 << 20));
        // One size: the ring of before.
        assert_eq!(
            ring_config(4, 4096, &[]).unwrap().classes(),
            &[own(4, 4096)]
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
