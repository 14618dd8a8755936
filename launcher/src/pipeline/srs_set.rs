//! The SRS images the pipeline holds in shared memory, loaded and dropped while it serves
//! ([`Pipeline::preload_srs`](super::Pipeline::preload_srs),
//! [`Pipeline::evict_srs`](super::Pipeline::evict_srs)).
//!
//! The launcher owns one sealed memfd per loaded SRS ([`SharedSrs`]). A gpu-proc gets every
//! image loaded when it starts (restarts included: [`spawn_hook`] builds its `GpuConfig::srs`
//! and descriptors from this set at each start, and records what it gave), and one loaded later
//! through its control channel (`ToGpu::LoadSrs` with the memfd as `SCM_RIGHTS`, answered
//! `FromChild::SrsLoaded`). Evicting sends `ToGpu::EvictSrs` (answered `FromChild::SrsEvicted`)
//! and drops the launcher's memfd and mapping; once every gpu-proc has unmapped it and closed its
//! descriptor, the kernel frees the memory.
//!
//! When a gpu-proc says hello, the pipeline compares what it was started with against this set
//! and sends the difference (a load or an evict that happened while it was restarting), so a
//! gpu-proc that was down when an SRS was loaded gets it at its next start.
//!
//! Lock order: `Pipeline::srs_ops` (held by a preload, an evict, and a submit from its SRS check
//! until its job is in the table), then the pipeline's core lock, then this set's; the spawn hook
//! takes only this one.
//!
//! Here too: the core's side of residency ([`Core::reconcile_srs`], the gpu-procs' answers, the
//! tiers `status` shows) and the pipeline's calls that load, evict and wait.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::fd::{OwnedFd, RawFd};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use kernels::circuits::AnyCircuit;
use shm_protocol::control::{ChildConfig, SrsEntry, ToGpu, FIRST_SRS_FD};
use shm_protocol::HugePagePolicy;

use super::child::{Outgoing, Role, SpawnHook, ToChild};
use super::machine::Core;
use super::{Pipeline, PipelineError, Result, SRS_CONFIRM_TIMEOUT};
use crate::srs::SharedSrs;
use crate::sync::lock;

/// What [`Pipeline::preload_srs`](super::Pipeline::preload_srs) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrsLoaded {
    /// The SRS was in shared memory already (nothing was read from disk).
    pub already_loaded: bool,
    /// Time spent reading and checking the file and waiting for every gpu-proc to map it.
    pub load_ms: u64,
    /// Size of the SRS image in shared memory.
    pub bytes: u64,
}

/// What [`Pipeline::evict_srs`](super::Pipeline::evict_srs) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrsEvicted {
    /// The SRS was loaded.
    pub was_loaded: bool,
    /// Size of the image dropped (0 when it was not loaded).
    pub freed_bytes: u64,
}

/// Where a circuit's SRS is (cuzk's tiers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SrsTier {
    /// In the launcher's shared memory and mapped by every gpu-proc that is up (at least one).
    Hot,
    /// In the launcher's shared memory, not (yet) mapped by every gpu-proc that is up.
    Warm,
    /// Not loaded.
    Cold,
}

/// One configured circuit's SRS, as `status` shows it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SrsLine {
    /// Circuit spec (`sha-chain:1`, `porep:StackedDrg32GiBV1_1`).
    pub circuit: String,
    /// cuzk's name of it (`porep-32g`; a built-in circuit's spec), see
    /// [`crate::srs::cuzk_circuit_id`].
    pub circuit_id: String,
    /// Where it is.
    pub tier: SrsTier,
    /// Size of the image in shared memory; 0 when cold.
    pub size_bytes: u64,
    /// Live jobs of this circuit.
    pub ref_count: u32,
}

/// The SRS images of one serving gpu-proc, as its answers tell.
#[derive(Default)]
pub(super) struct GpuSrs {
    /// Mapped (given at start, or confirmed loaded).
    pub(super) mapped: BTreeSet<u64>,
    /// Sent `LoadSrs`, not answered yet.
    pub(super) loading: BTreeSet<u64>,
    /// Sent `EvictSrs`, not answered yet.
    pub(super) evicting: BTreeSet<u64>,
    /// Loads it refused, with its answer (not sent again until the next preload).
    pub(super) refused: HashMap<u64, String>,
}

/// The loaded SRS images and what each gpu-proc was started with.
#[derive(Default)]
pub(super) struct SrsSet {
    /// By circuit id (ordered: the descriptors of a start are numbered in this order).
    loaded: BTreeMap<u64, Arc<SharedSrs>>,
    /// The circuit ids each gpu-proc's last start was given.
    spawned: HashMap<Role, BTreeSet<u64>>,
}

impl SrsSet {
    pub(super) fn new(images: Vec<SharedSrs>) -> SrsSet {
        SrsSet {
            loaded: images
                .into_iter()
                .map(|s| (s.circuit_id, Arc::new(s)))
                .collect(),
            spawned: HashMap::new(),
        }
    }

    pub(super) fn get(&self, circuit_id: u64) -> Option<&Arc<SharedSrs>> {
        self.loaded.get(&circuit_id)
    }

    pub(super) fn insert(&mut self, srs: SharedSrs) {
        self.loaded.insert(srs.circuit_id, Arc::new(srs));
    }

    pub(super) fn remove(&mut self, circuit_id: u64) -> Option<Arc<SharedSrs>> {
        self.loaded.remove(&circuit_id)
    }

    pub(super) fn ids(&self) -> BTreeSet<u64> {
        self.loaded.keys().copied().collect()
    }

    /// What `role`'s last start was given.
    pub(super) fn spawned_with(&self, role: Role) -> BTreeSet<u64> {
        self.spawned.get(&role).cloned().unwrap_or_default()
    }
}

/// The [`ChildSpec::prepare`](super::child::ChildSpec::prepare) of gpu-proc `role`: at each
/// start, the SRS images loaded at that moment, as `GpuConfig::srs` entries and descriptors from
/// `FIRST_SRS_FD` on.
pub(super) fn spawn_hook(set: Arc<Mutex<SrsSet>>, role: Role) -> SpawnHook {
    Arc::new(move |config: &mut ChildConfig| {
        let ChildConfig::Gpu(gpu) = config else {
            return Vec::new();
        };
        let mut set = lock(&set);
        let mut fds: Vec<(Arc<OwnedFd>, RawFd)> = Vec::new();
        let mut given = BTreeSet::new();
        gpu.srs.clear();
        for srs in set.loaded.values() {
            let fd = FIRST_SRS_FD + fds.len() as RawFd;
            match srs.region.fd().try_clone_to_owned() {
                Ok(dup) => {
                    fds.push((Arc::new(dup), fd));
                    gpu.srs.push(SrsEntry {
                        circuit_id: srs.circuit_id,
                        circuit: srs.spec.to_string(),
                        fd,
                        params_path: srs.params_path.clone(),
                    });
                    given.insert(srs.circuit_id);
                }
                // Not given now: the hello of this start sends it (`ToGpu::LoadSrs`).
                Err(e) => {
                    tracing::error!(%role, circuit = %srs.spec, "cannot duplicate an SRS descriptor: {e}")
                }
            }
        }
        set.spawned.insert(role, given);
        fds
    })
}

impl Core {
    /// Live jobs of circuit `id`.
    pub(super) fn ref_count(&self, id: u64) -> u32 {
        self.live
            .keys()
            .filter(|job| self.jobs.circuit_id(**job) == Some(id))
            .count() as u32
    }

    pub(super) fn srs_lines(&self) -> Vec<SrsLine> {
        let set = lock(&self.srs);
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
    pub(super) fn reconcile_srs(&mut self) {
        let set = lock(&self.srs);
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
                let sent = outbox.try_send(Outgoing {
                    msg: ToChild::Gpu(ToGpu::LoadSrs {
                        circuit_id: id,
                        circuit: srs.spec.to_string(),
                        params_path: srs.params_path.clone(),
                    }),
                    fd: Some(fd),
                });
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

    /// A gpu-proc's answer to a load.
    pub(super) fn srs_loaded(&mut self, role: Role, circuit_id: u64, error: Option<String>) {
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

    /// A gpu-proc's answer to an evict.
    pub(super) fn srs_evicted(&mut self, role: Role, circuit_id: u64) {
        if let Some(gpu) = self.children.get_mut(&role).and_then(|i| i.srs.as_mut()) {
            gpu.evicting.remove(&circuit_id);
            gpu.mapped.remove(&circuit_id);
        }
        // Loaded again meanwhile: sent again.
        self.reconcile_srs();
    }
}

impl Pipeline {
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
        let _srs_ops = lock(&self.srs_ops);
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
        let _srs_ops = lock(&self.srs_ops);
        let removed = {
            let mut core = lock(&self.core);
            let jobs = core.ref_count(id);
            if jobs > 0 {
                return Err(PipelineError::SrsInUse {
                    circuit: spec,
                    jobs,
                });
            }
            let removed = lock(&self.srs).remove(id);
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
    pub(super) fn load_srs(
        &self,
        spec: AnyCircuit,
        id: u64,
        timeout: Duration,
    ) -> Result<SrsLoaded> {
        let t = Instant::now();
        let (shape, params) = {
            let core = lock(&self.core);
            let entry = core
                .circuits
                .get(&id)
                .ok_or(PipelineError::Unserved(spec))?;
            (entry.shape, entry.params.clone())
        };
        let existing = lock(&self.srs).get(id).map(|s| s.bytes);
        let (already_loaded, bytes) = match existing {
            Some(bytes) => (true, bytes),
            None => {
                // Read and checked with no lock held: jobs of other circuits go on meanwhile.
                let shared = SharedSrs::load(&spec, id, &shape, &params, HugePagePolicy::Auto)?;
                let bytes = shared.bytes;
                lock(&self.srs).insert(shared);
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
}
