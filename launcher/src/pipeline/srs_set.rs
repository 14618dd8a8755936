//! The SRS images the pipeline holds in shared memory, loaded and dropped while it serves
//! ([`Pipeline::preload_srs`](super::Pipeline::preload_srs),
//! [`Pipeline::evict_srs`](super::Pipeline::evict_srs)): the shell's side. The core owns the set
//! and decides what each gpu-proc is sent (`core::srs`); here are the calls that load, evict and
//! wait, and the gpu-procs' spawn hook.
//!
//! The launcher owns one sealed memfd per loaded SRS ([`SharedSrs`]). A gpu-proc gets every
//! image loaded when it starts (restarts included: [`spawn_hook`] builds its `GpuConfig::srs`
//! and descriptors from the core's set at each start, and records what it gave), and one loaded
//! later through its control channel (`ToGpu::LoadSrs` with the memfd as `SCM_RIGHTS`, answered
//! `FromChild::SrsLoaded`). Evicting sends `ToGpu::EvictSrs` (answered `FromChild::SrsEvicted`)
//! and drops the launcher's memfd and mapping; once every gpu-proc has unmapped it and closed its
//! descriptor, the kernel frees the memory.
//!
//! Lock order: `Pipeline::srs_ops` (held by a preload, an evict, and a submit from its SRS check
//! until its job is in the table), then the pipeline's lock (the hub); the spawn hook takes only
//! the hub's. An SRS file is read with no lock held.

use std::collections::BTreeSet;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use kernels::circuits::AnyCircuit;
use shm_protocol::control::{ChildConfig, SrsEntry, FIRST_SRS_FD};

use super::child::SpawnHook;
use super::core::{GpuSrs, Role, SrsLine};
use super::dispatch::read_srs;
use super::hub::{Hub, Unlocked};
use super::{Pipeline, PipelineError, Result, SRS_CONFIRM_TIMEOUT};
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

/// The [`ChildSpec::prepare`](super::child::ChildSpec::prepare) of gpu-proc `role`: at each
/// start, the SRS images loaded at that moment (the core's set, under the pipeline's lock), as
/// `GpuConfig::srs` entries and descriptors from `FIRST_SRS_FD` on.
pub(super) fn spawn_hook(hub: Weak<Mutex<Hub>>, role: Role) -> SpawnHook {
    Arc::new(move |config: &mut ChildConfig| {
        let ChildConfig::Gpu(gpu) = config else {
            return Vec::new();
        };
        gpu.srs.clear();
        // The pipeline is gone: the child is not started for long.
        let Some(hub) = hub.upgrade() else {
            return Vec::new();
        };
        let mut hub = lock(&hub);
        let mut fds: Vec<(Arc<OwnedFd>, RawFd)> = Vec::new();
        let mut given = BTreeSet::new();
        for srs in hub.core.srs.images() {
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
        hub.core.srs.given(role, given);
        fds
    })
}

impl Pipeline {
    /// Every configured circuit's SRS: tier (HOT: mapped by every gpu-proc that is up; WARM: in
    /// shared memory, not mapped by every one of them, or none is up; COLD: not loaded), image
    /// size and live jobs.
    pub fn srs_status(&self) -> Vec<SrsLine> {
        lock(&self.hub).core.srs_lines()
    }

    /// The configured circuit `id` names: its spec or its cuzk name (`porep-32g`,
    /// [`crate::srs::circuit_for_id`]).
    pub fn circuit_named(&self, id: &str) -> Result<AnyCircuit> {
        let hub = lock(&self.hub);
        let core = &hub.core;
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
        let removed = self.apply(|core| core.evict_srs(spec, id)).value?;
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
        let done = self.apply(|core| core.want_srs(spec, id));
        let (already_loaded, bytes) = match done.value? {
            Some(bytes) => (true, bytes),
            None => {
                let mut bytes = 0;
                for action in done.later {
                    if let Unlocked::LoadSrs(load) = action {
                        // Read and checked with no lock held: jobs of other circuits go on
                        // meanwhile.
                        let image = read_srs(&load)?;
                        bytes = self.apply(|core| core.srs_read(image)).value;
                    }
                }
                (false, bytes)
            }
        };
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
                let hub = lock(&self.hub);
                let core = &hub.core;
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
