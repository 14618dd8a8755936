//! SRS residency as [`Core`] transitions: the core owns the set of SRS images in shared memory
//! ([`SrsSet`]) and what each gpu-proc maps ([`GpuSrs`]); it sends `ToGpu::LoadSrs` (with the
//! image's memfd) and `ToGpu::EvictSrs` until every serving gpu-proc holds the loaded set
//! ([`Core::reconcile_srs`]), follows their answers, and asks the shell to read an SRS file
//! that is not loaded ([`Action::LoadSrs`]).
//!
//! A gpu-proc gets every image loaded when it starts: the shell's spawn hook takes
//! [`SrsSet::images`] under the pipeline's lock and records what it gave ([`SrsSet::given`]);
//! at its hello the core compares that with the set and sends the difference (a load or an evict
//! that happened while it was restarting).

use std::os::fd::OwnedFd;
use std::sync::Arc;

use kernels::circuits::AnyCircuit;
use shm_protocol::control::ToGpu;

use super::events::{OutboxRefused, Role, ToChild};
use super::failure::Refusal;
use super::machine::Core;
use super::srs::{GpuSrs, SrsLine, SrsTier};
use super::{Action, SrsToLoad};
use crate::srs::SharedSrs;

impl Core {
    /// Live jobs of circuit `id`.
    pub(crate) fn ref_count(&self, id: u64) -> u32 {
        self.live
            .keys()
            .filter(|job| self.jobs.circuit_id(**job) == Some(id))
            .count() as u32
    }

    pub(crate) fn srs_lines(&self) -> Vec<SrsLine> {
        let serving: Vec<&GpuSrs> = self
            .children
            .values()
            .filter_map(|info| info.srs.as_ref())
            .collect();
        self.circuit_order
            .iter()
            .filter_map(|id| self.circuits.get(id).map(|entry| (*id, entry.spec)))
            .map(|(id, spec)| {
                let (tier, size_bytes) = match self.srs.get(id) {
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

    /// Whether circuit `id`'s SRS is in shared memory.
    pub(crate) fn srs_is_loaded(&self, id: u64) -> bool {
        self.srs.get(id).is_some()
    }

    /// A preload (or a job) wants circuit `id`'s SRS: when it is loaded, every gpu-proc that
    /// lacks it is sent it (one that refused it before too) and its size is returned; when it
    /// is not, the shell is asked to read it ([`Action::LoadSrs`]) and `None` is returned.
    pub(crate) fn want_srs(&mut self, spec: AnyCircuit, id: u64) -> Result<Option<u64>, Refusal> {
        let entry = self.circuits.get(&id).ok_or(Refusal::Unserved(spec))?;
        let Some(bytes) = self.srs.get(id).map(|s| s.bytes) else {
            let load = SrsToLoad {
                spec: entry.spec,
                circuit_id: id,
                shape: entry.shape,
                params: entry.params.clone(),
            };
            self.act(Action::LoadSrs(load));
            return Ok(None);
        };
        self.offer_srs(id);
        Ok(Some(bytes))
    }

    /// An SRS image the shell read ([`Action::LoadSrs`]): into the set, and to every gpu-proc.
    /// Returns its size.
    pub(crate) fn srs_read(&mut self, srs: SharedSrs) -> u64 {
        let (id, bytes) = (srs.circuit_id, srs.bytes);
        self.srs.insert(srs);
        self.offer_srs(id);
        bytes
    }

    /// Sends circuit `id`'s SRS to every gpu-proc that lacks it, one that refused it before
    /// included (it is asked again).
    fn offer_srs(&mut self, id: u64) {
        for info in self.children.values_mut() {
            if let Some(gpu) = info.srs.as_mut() {
                gpu.refused.remove(&id);
            }
        }
        self.reconcile_srs();
    }

    /// Drops circuit `id`'s SRS from the set and asks every gpu-proc to drop it; refused while
    /// jobs of it are live. Returns the image (its memory goes when the last reference does:
    /// the shell drops it once every gpu-proc confirmed), `None` when it was not loaded.
    pub(crate) fn evict_srs(
        &mut self,
        spec: AnyCircuit,
        id: u64,
    ) -> Result<Option<Arc<SharedSrs>>, Refusal> {
        let jobs = self.ref_count(id);
        if jobs > 0 {
            return Err(Refusal::SrsInUse {
                circuit: spec,
                jobs,
            });
        }
        let removed = self.srs.remove(id);
        self.reconcile_srs();
        Ok(removed)
    }

    /// Brings every serving gpu-proc's SRS images to the loaded set: `LoadSrs` (with the memfd)
    /// for what it lacks, `EvictSrs` for what it holds beyond it; nothing is sent twice before
    /// its answer (or its refusal by the outbox, [`Core::settle`]), and a load it refused is not
    /// sent again until the next preload.
    pub(crate) fn reconcile_srs(&mut self) {
        let want = self.srs.ids();
        let mut sends: Vec<(Role, ToGpu, Option<OwnedFd>)> = Vec::new();
        let mut roles: Vec<Role> = self.children.keys().copied().collect();
        roles.sort();
        for role in roles {
            let Some(info) = self.children.get_mut(&role) else {
                continue;
            };
            if !info.reachable {
                continue;
            }
            let Some(gpu) = info.srs.as_mut() else {
                continue;
            };
            for id in want.iter().copied() {
                if gpu.mapped.contains(&id)
                    || gpu.loading.contains(&id)
                    || gpu.refused.contains_key(&id)
                {
                    continue;
                }
                let Some(srs) = self.srs.get(id) else {
                    continue;
                };
                let fd = match srs.region.fd().try_clone_to_owned() {
                    Ok(fd) => fd,
                    Err(e) => {
                        gpu.refused
                            .insert(id, format!("cannot duplicate the SRS descriptor: {e}"));
                        continue;
                    }
                };
                gpu.loading.insert(id);
                let msg = ToGpu::LoadSrs {
                    circuit_id: id,
                    circuit: srs.spec.to_string(),
                    params_path: srs.params_path.clone(),
                };
                sends.push((role, msg, Some(fd)));
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
                gpu.evicting.insert(id);
                sends.push((role, ToGpu::EvictSrs { circuit_id: id }, None));
            }
        }
        for (role, msg, fd) in sends {
            self.send(role, msg, fd);
        }
    }

    /// An SRS load or evict the outbox refused: not pending any more, so the next reconcile (on
    /// the gpu-proc's next answer, or the next tick) sends it again.
    pub(crate) fn unsent_srs(&mut self, role: Role, msg: &ToChild, why: OutboxRefused) {
        let Some(gpu) = self.children.get_mut(&role).and_then(|i| i.srs.as_mut()) else {
            return;
        };
        match msg {
            ToChild::Gpu(ToGpu::LoadSrs { circuit_id, .. }) => {
                gpu.loading.remove(circuit_id);
                tracing::warn!(%role, ?why, "cannot send an SRS load now");
            }
            ToChild::Gpu(ToGpu::EvictSrs { circuit_id }) => {
                gpu.evicting.remove(circuit_id);
                tracing::warn!(%role, ?why, "cannot send an SRS evict now");
            }
            _ => {}
        }
    }

    /// A gpu-proc's answer to a load.
    pub(crate) fn srs_loaded(&mut self, role: Role, circuit_id: u64, error: Option<String>) {
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
    pub(crate) fn srs_evicted(&mut self, role: Role, circuit_id: u64) {
        if let Some(gpu) = self.children.get_mut(&role).and_then(|i| i.srs.as_mut()) {
            gpu.evicting.remove(&circuit_id);
            gpu.mapped.remove(&circuit_id);
        }
        // Loaded again meanwhile: sent again.
        self.reconcile_srs();
    }
}
