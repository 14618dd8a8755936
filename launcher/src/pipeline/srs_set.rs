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
//! Lock order: the pipeline's core lock, then this set's; the spawn hook takes only this one.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::fd::{OwnedFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};

use shm_protocol::control::{ChildConfig, SrsEntry, FIRST_SRS_FD};

use super::child::{Role, SpawnHook};
use crate::srs::SharedSrs;

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

pub(super) fn lock(set: &Mutex<SrsSet>) -> MutexGuard<'_, SrsSet> {
    set.lock().unwrap_or_else(|e| e.into_inner())
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
