//! The SRS images the core owns ([`SrsSet`]: in shared memory, what each gpu-proc was given
//! when it started) and what each gpu-proc maps ([`GpuSrs`]), as plain data; the transitions
//! that keep them in step are in `residency.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::events::Role;
use crate::srs::SharedSrs;

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
pub(crate) struct GpuSrs {
    /// Mapped (given at start, or confirmed loaded).
    pub(crate) mapped: BTreeSet<u64>,
    /// Sent `LoadSrs`, not answered yet.
    pub(crate) loading: BTreeSet<u64>,
    /// Sent `EvictSrs`, not answered yet.
    pub(crate) evicting: BTreeSet<u64>,
    /// Loads it refused, with its answer (not sent again until the next preload).
    pub(crate) refused: HashMap<u64, String>,
}

/// The loaded SRS images and what each gpu-proc was started with.
#[derive(Default)]
pub(crate) struct SrsSet {
    /// By circuit id (ordered: the descriptors of a start are numbered in this order).
    loaded: BTreeMap<u64, Arc<SharedSrs>>,
    /// The circuit ids each gpu-proc's last start was given.
    spawned: HashMap<Role, BTreeSet<u64>>,
}

impl SrsSet {
    pub(crate) fn new(images: Vec<SharedSrs>) -> SrsSet {
        SrsSet {
            loaded: images
                .into_iter()
                .map(|s| (s.circuit_id, Arc::new(s)))
                .collect(),
            spawned: HashMap::new(),
        }
    }

    pub(crate) fn get(&self, circuit_id: u64) -> Option<&Arc<SharedSrs>> {
        self.loaded.get(&circuit_id)
    }

    pub(crate) fn insert(&mut self, srs: SharedSrs) {
        self.loaded.insert(srs.circuit_id, Arc::new(srs));
    }

    pub(crate) fn remove(&mut self, circuit_id: u64) -> Option<Arc<SharedSrs>> {
        self.loaded.remove(&circuit_id)
    }

    pub(crate) fn ids(&self) -> BTreeSet<u64> {
        self.loaded.keys().copied().collect()
    }

    /// The images loaded now, in circuit id order (what a gpu-proc's start is given).
    pub(crate) fn images(&self) -> Vec<Arc<SharedSrs>> {
        self.loaded.values().cloned().collect()
    }

    /// Records what `role`'s start was given.
    pub(crate) fn given(&mut self, role: Role, ids: BTreeSet<u64>) {
        self.spawned.insert(role, ids);
    }

    /// What `role`'s last start was given.
    pub(crate) fn spawned_with(&self, role: Role) -> BTreeSet<u64> {
        self.spawned.get(&role).cloned().unwrap_or_default()
    }
}
