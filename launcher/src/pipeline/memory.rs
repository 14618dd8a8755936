//! The host memory model: what a pipeline's configuration takes, computed before anything large
//! is allocated and checked against what the host has, so a configuration that cannot fit is
//! refused at start with the numbers instead of dying of OOM mid-run.
//!
//! host memory = SRS images (once, shared by every gpu-proc) + ring slots + pre-compiled matrices
//! (once, shared by synth-proc and every gpu-proc) + synthesis working set (workers ×
//! allowance) + supraseal-c2's own SRS copy per `cuda` gpu-proc + the processes themselves (the
//! launcher and synth-proc, and an allowance per gpu-proc) + with witness slots, each non-`gpu`
//! gpu-proc's host expansion of one slot (a, b, c and the assignment, a full slot's size).
//!
//! With N GPUs only the per-gpu-proc terms grow: N gpu-procs map the same SRS and matrices
//! memfds (the `gpu` backend page-locks the shared image in place, it makes no copy).
//!
//! The SRS images, the ring and the matrices are memfds that may sit in huge pages: those draw
//! on the free hugetlb pool first (when huge pages are allowed) and on ordinary memory for the
//! rest. Ordinary memory is `MemAvailable`, or what the launcher's cgroup v2 `memory.max` leaves
//! (`memory.max - memory.current`) when that is lower (a systemd `MemoryMax=`).

use std::fmt;

/// Bytes the launcher and synth-proc take themselves (binaries, heaps, the job table).
pub const PROCESS_BYTES: u64 = 256 << 20;

/// Bytes each gpu-proc takes itself (binary, heap, its CUDA context's host side): an allowance,
/// not a measurement of a multi-GPU host.
pub const GPU_PROC_BYTES: u64 = 256 << 20;

/// What the host offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostMemory {
    /// Ordinary memory available.
    pub available: u64,
    /// Where `available` was read.
    pub source: String,
    /// Free huge pages (2 MiB and 1 GiB pools together), bytes.
    pub huge_free: u64,
}

impl HostMemory {
    /// Reads `/proc/meminfo`, the hugetlb pools and this process's cgroup v2 limit.
    pub fn read() -> HostMemory {
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let kib = |key: &str| {
            meminfo
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        };
        let mut available = kib("MemAvailable:").map_or(u64::MAX, |k| k * 1024);
        let mut source = "MemAvailable".to_owned();
        if let Some(left) = cgroup_left() {
            if left < available {
                available = left;
                source = "the cgroup's memory.max".into();
            }
        }
        let mut huge_free = 0;
        for (dir, page) in [
            ("hugepages-2048kB", 2u64 << 20),
            ("hugepages-1048576kB", 1 << 30),
        ] {
            let path = format!("/sys/kernel/mm/hugepages/{dir}/free_hugepages");
            if let Some(n) = std::fs::read_to_string(path)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
            {
                huge_free += n * page;
            }
        }
        HostMemory {
            available,
            source,
            huge_free,
        }
    }
}

/// `memory.max - memory.current` of this process's cgroup v2, if it has a limit.
fn cgroup_left() -> Option<u64> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let max = read("memory.max")?.trim().parse::<u64>().ok()?;
    let current = read("memory.current")
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    Some(max.saturating_sub(current))
}

/// One term of the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Term {
    /// What it is, with how it was computed (`4 slots x 2.0 GiB`).
    pub what: String,
    /// Bytes.
    pub bytes: u64,
    /// Whether it may sit in huge pages.
    pub huge: bool,
}

/// The model of one configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryPlan {
    /// Its terms.
    pub terms: Vec<Term>,
}

impl MemoryPlan {
    /// Adds a term.
    pub fn add(&mut self, what: impl Into<String>, bytes: u64, huge: bool) {
        self.terms.push(Term {
            what: what.into(),
            bytes,
            huge,
        });
    }

    /// Every term together.
    pub fn total(&self) -> u64 {
        self.terms.iter().map(|t| t.bytes).sum()
    }

    /// Ordinary memory it needs on `host`: the terms that cannot sit in huge pages, plus what of
    /// the others the free huge pages do not hold (none, when `huge_pages` is false).
    pub fn ordinary_bytes(&self, host: &HostMemory, huge_pages: bool) -> u64 {
        let (huge, plain): (Vec<&Term>, Vec<&Term>) =
            self.terms.iter().partition(|t| t.huge && huge_pages);
        let huge: u64 = huge.iter().map(|t| t.bytes).sum();
        let plain: u64 = plain.iter().map(|t| t.bytes).sum();
        plain + huge.saturating_sub(host.huge_free)
    }

    /// `Err` with the whole table when it does not fit `host`.
    pub fn check(&self, host: &HostMemory, huge_pages: bool) -> Result<(), MemoryRefusal> {
        let need = self.ordinary_bytes(host, huge_pages);
        if need <= host.available {
            return Ok(());
        }
        Err(MemoryRefusal {
            plan: self.clone(),
            host: host.clone(),
            need,
        })
    }
}

impl fmt::Display for MemoryPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for t in &self.terms {
            writeln!(f, "  {:<52} {:>12}", t.what, gib(t.bytes))?;
        }
        write!(f, "  {:<52} {:>12}", "total", gib(self.total()))
    }
}

/// A configuration that does not fit the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryRefusal {
    /// The model.
    pub plan: MemoryPlan,
    /// The host.
    pub host: HostMemory,
    /// Ordinary memory it needs.
    pub need: u64,
}

impl fmt::Display for MemoryRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "the configuration needs {} of host memory, but {} is available ({}; {} more in \
             free huge pages):",
            gib(self.need),
            gib(self.host.available),
            self.host.source,
            gib(self.host.huge_free)
        )?;
        writeln!(f, "{}", self.plan)?;
        write!(
            f,
            "hint: fewer ring slots ([ring] slots), fewer synthesis workers ([synthesis] \
             concurrency), fewer circuits, or reserve huge pages for the ring and the SRS"
        )
    }
}

/// Ring slot classes as text, largest first: `3 slots x 15.61 GiB + 8 slots x 112.0 MiB`, from
/// (slots, bytes per slot) smallest first (the ring's order). The one form of the ring's sizes:
/// the start's log, the memory model and `status`.
pub fn ring_text(classes: impl IntoIterator<Item = (usize, u64)>) -> String {
    let mut classes: Vec<(usize, u64)> = classes.into_iter().collect();
    classes.reverse();
    classes
        .iter()
        .map(|&(slots, bytes)| format!("{slots} slots x {}", gib(bytes)))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// A ring configuration's classes as text ([`ring_text`]).
pub(super) fn config_text(config: &shm_protocol::RingConfig) -> String {
    ring_text(
        config
            .classes()
            .iter()
            .map(|c| (c.slot_count as usize, c.slot_bytes)),
    )
}

/// Bytes for people: GiB with two decimals, or MiB below one GiB.
pub fn gib(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}

/// The memory model of `settings`, from the counted circuits; those of `witness` travel in
/// witness slots (their matrices already made, in ordinary pages).
pub(super) fn plan(
    settings: &super::PipelineSettings,
    counted: &[(&super::CircuitSetting, u64, kernels::synth::CircuitShape)],
    witness: &[u64],
    ring_config: &shm_protocol::RingConfig,
    synth_concurrency: usize,
) -> MemoryPlan {
    let mut plan = MemoryPlan::default();
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
                witness.is_empty(),
            );
        }
    }
    let ring = ring_config.region_bytes().map_or(u64::MAX, |b| b as u64);
    plan.add(format!("ring: {}", config_text(ring_config)), ring, true);
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
        .filter(|g| g.backend == shm_protocol::control::BackendKind::Cuda)
        .count() as u64;
    if cuda > 0 {
        plan.add(
            format!("supraseal-c2's own SRS copy: {cuda} cuda gpu-proc(s)"),
            cuda * srs_total,
            false,
        );
    }
    // A witness slot is expanded on the host by gpu-procs whose backend has no device path: one
    // slot at a time, a full slot's size.
    let expansion = counted
        .iter()
        .filter(|(_, id, _)| witness.contains(id))
        .filter_map(|(_, _, shape)| crate::ring::capacity_for(shape).slot_bytes())
        .max()
        .unwrap_or(0);
    let host_expanding = settings
        .gpus
        .iter()
        .filter(|g| g.backend != shm_protocol::control::BackendKind::Gpu)
        .count() as u64;
    if expansion > 0 && host_expanding > 0 {
        plan.add(
            format!(
                "witness slots expanded on the host: {host_expanding} gpu-proc(s) x {}",
                gib(expansion)
            ),
            host_expanding * expansion,
            false,
        );
    }
    let gpu_procs = settings.gpus.len() as u64;
    plan.add(
        format!(
            "the processes: launcher and synth-proc {}, {gpu_procs} gpu-proc(s) x {}",
            gib(PROCESS_BYTES),
            gib(GPU_PROC_BYTES)
        ),
        PROCESS_BYTES + gpu_procs * GPU_PROC_BYTES,
        false,
    );
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(available: u64, huge_free: u64) -> HostMemory {
        HostMemory {
            available,
            source: "test".into(),
            huge_free,
        }
    }

    #[test]
    fn huge_pages_take_the_shared_regions_first_and_the_rest_is_ordinary_memory() {
        let mut p = MemoryPlan::default();
        p.add("SRS", 10 << 30, true);
        p.add("ring", 6 << 30, true);
        p.add("workers", 2 << 30, false);
        assert_eq!(p.total(), 18 << 30);
        assert_eq!(p.ordinary_bytes(&host(0, 12 << 30), true), 6 << 30);
        assert_eq!(p.ordinary_bytes(&host(0, 12 << 30), false), 18 << 30);
        assert_eq!(p.ordinary_bytes(&host(0, 40 << 30), true), 2 << 30);
        assert!(p.check(&host(6 << 30, 12 << 30), true).is_ok());
        let e = p.check(&host(5 << 30, 12 << 30), true).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("needs 6.00 GiB"), "{text}");
        assert!(
            text.contains("5.00 GiB is available (test; 12.00 GiB more"),
            "{text}"
        );
        assert!(
            text.contains("ring") && text.contains("18.00 GiB"),
            "{text}"
        );
    }

    /// A pipeline of `gpus` gpu-procs of `backend` serving `bits:64`, with its SRS file written
    /// in `dir`; the plan's terms by name.
    fn plan_for(
        dir: &std::path::Path,
        gpus: u32,
        backend: shm_protocol::control::BackendKind,
    ) -> (MemoryPlan, u64) {
        let spec: kernels::circuits::CircuitSpec = "bits:64".parse().unwrap();
        let params = dir.join("bits-64.params");
        if !params.exists() {
            crate::srs::generate(&spec, 1, &params, false).unwrap();
        }
        let mut settings =
            crate::pipeline::PipelineSettings::for_circuit(spec, params.clone()).unwrap();
        let template = settings.gpus[0].clone();
        settings.gpus = (0..gpus)
            .map(|device| crate::pipeline::GpuSetting {
                device,
                backend,
                ..template.clone()
            })
            .collect();
        let circuit = kernels::circuits::AnyCircuit::from(spec);
        let shape = circuit.shape().unwrap();
        let id = circuit.circuit_id().unwrap();
        let counted = [(&settings.circuits[0], id, shape)];
        let ring = shm_protocol::RingConfig::with_classes(&[shm_protocol::SlotClass {
            slot_count: 4,
            slot_bytes: 1 << 20,
        }])
        .unwrap();
        let srs = kernels::srs::scan_params_file(&params)
            .ok()
            .and_then(|lens| kernels::srs::SrsImage::size_for(&lens).ok())
            .unwrap() as u64;
        (plan(&settings, &counted, &[], &ring, 2), srs)
    }

    fn term<'a>(plan: &'a MemoryPlan, prefix: &str) -> Vec<&'a Term> {
        plan.terms
            .iter()
            .filter(|t| t.what.starts_with(prefix))
            .collect()
    }

    #[test]
    fn n_gpus_share_one_srs_image_and_one_set_of_matrices_and_add_only_their_own_terms() {
        use shm_protocol::control::BackendKind::{Cuda, Gpu};
        let dir = tempfile::tempdir().unwrap();
        let (one, srs) = plan_for(dir.path(), 1, Gpu);
        let (two, _) = plan_for(dir.path(), 2, Gpu);
        assert!(srs > 0);
        for plan in [&one, &two] {
            let images = term(plan, "SRS image of bits:64");
            assert_eq!(images.len(), 1, "{plan}");
            assert_eq!(images[0].bytes, srs, "{plan}");
            assert_eq!(term(plan, "matrices of bits:64").len(), 1, "{plan}");
        }
        // The second gpu-proc adds its own allowance and nothing else.
        assert_eq!(two.total() - one.total(), GPU_PROC_BYTES, "{one}\n{two}");
        let processes = term(&two, "the processes");
        assert_eq!(processes[0].bytes, PROCESS_BYTES + 2 * GPU_PROC_BYTES);
        assert!(processes[0].what.contains("2 gpu-proc(s)"), "{two}");
        // supraseal-c2 keeps its own SRS copy: two `cuda` gpu-procs, two copies.
        let (cuda, _) = plan_for(dir.path(), 2, Cuda);
        let copies = term(&cuda, "supraseal-c2's own SRS copy");
        assert_eq!(copies[0].bytes, 2 * srs, "{cuda}");
        assert!(!copies[0].huge);
    }

    #[test]
    fn the_host_is_read() {
        let h = HostMemory::read();
        assert!(h.available > 0, "{h:?}");
    }
}
