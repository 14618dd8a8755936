//! What a gpu-proc tells the launcher about its device ([`FromChild::Device`]): once the backends
//! are open, and again after each batch with the free memory read fresh. The launcher shows it in
//! `status` (cuzk's `GetStatus` GPU list).

use shm_protocol::control::{BackendKind, FromChild};

/// Reads the device of one gpu-proc. The name and total are read once; the free memory of a
/// CUDA device on every [`DeviceProbe::report`].
#[derive(Debug)]
pub struct DeviceProbe {
    ordinal: u32,
    backend: BackendKind,
    name: String,
    total: u64,
}

impl DeviceProbe {
    /// Probes the device of a gpu-proc with launcher index `ordinal` and `backend`. The CUDA
    /// device is the current one (a gpu-proc sees only its own); call it after the backends are
    /// open, so the device's context (and SRS) is already counted in its memory.
    pub fn new(ordinal: u32, backend: BackendKind) -> DeviceProbe {
        let (name, total) = match backend {
            BackendKind::Cpu => (cpu_backend_name(), 0),
            BackendKind::Cuda | BackendKind::Gpu => match cuda_info() {
                Ok(i) => (i.0, i.1),
                Err(e) => {
                    tracing::warn!("cannot read the CUDA device: {e}");
                    (format!("CUDA device ({e})"), 0)
                }
            },
        };
        DeviceProbe {
            ordinal,
            backend,
            name,
            total,
        }
    }

    /// The device as it is now, with what its backends hold and planned in it and the SRS bytes
    /// they stream from the host (`memory`).
    pub fn report(&self, memory: kernels::backend::DeviceMemory) -> FromChild {
        let free = match self.backend {
            BackendKind::Cpu => 0,
            BackendKind::Cuda | BackendKind::Gpu => cuda_info().map(|i| i.2).unwrap_or(0),
        };
        FromChild::Device {
            ordinal: self.ordinal,
            name: self.name.clone(),
            vram_total_bytes: self.total,
            vram_free_bytes: free,
            srs_device_bytes: memory.srs_bytes,
            planned_device_bytes: memory.planned_bytes,
            device_budget_bytes: memory.budget_bytes,
            srs_streamed_bytes: memory.streamed_bytes,
            srs_streamed_total_bytes: memory.streamed_total_bytes,
        }
    }
}

/// `CPU backend (<model name from /proc/cpuinfo>, N threads)`, N the cores this process may run
/// on (its cpuset).
fn cpu_backend_name() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| cpu_model(&text))
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("CPU backend ({model}, {threads} threads)")
}

/// The first `model name` of a `/proc/cpuinfo` text (x86); other architectures name it
/// differently (`Processor`, `cpu model`), tried next.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Processor", "cpu model", "cpu"]
        .iter()
        .find_map(|key| {
            cpuinfo.lines().find_map(|line| {
                let (k, v) = line.split_once(':')?;
                (k.trim() == *key && !v.trim().is_empty()).then(|| v.trim().to_owned())
            })
        })
}

/// Name, total and free bytes of the current CUDA device.
#[cfg(feature = "cuda")]
fn cuda_info() -> Result<(String, u64, u64), String> {
    kernels::backend::cuda::device_info()
        .map(|i| (i.name, i.total_bytes, i.free_bytes))
        .map_err(|e| e.to_string())
}

#[cfg(not(feature = "cuda"))]
fn cuda_info() -> Result<(String, u64, u64), String> {
    Err("this binary was built without the `cuda` feature".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_model_is_read_from_cpuinfo() {
        let x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) 8480+\nflags\t\t: fpu\n";
        assert_eq!(cpu_model(x86).as_deref(), Some("Intel(R) Xeon(R) 8480+"));
        assert_eq!(cpu_model("processor\t: 0\n"), None);
    }

    #[test]
    fn the_cpu_backend_reports_its_model_and_no_vram() {
        let probe = DeviceProbe::new(3, BackendKind::Cpu);
        match probe.report(Default::default()) {
            FromChild::Device {
                ordinal,
                name,
                vram_total_bytes,
                vram_free_bytes,
                srs_device_bytes,
                planned_device_bytes,
                device_budget_bytes,
                srs_streamed_bytes,
                srs_streamed_total_bytes,
            } => {
                assert_eq!(srs_device_bytes, 0);
                assert_eq!((planned_device_bytes, device_budget_bytes), (0, 0));
                assert_eq!((srs_streamed_bytes, srs_streamed_total_bytes), (0, 0));
                assert_eq!(ordinal, 3);
                assert!(name.starts_with("CPU backend ("), "{name}");
                assert!(name.ends_with(" threads)"), "{name}");
                assert_eq!((vram_total_bytes, vram_free_bytes), (0, 0));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn the_report_carries_what_the_backends_planned_and_streamed() {
        let probe = DeviceProbe::new(0, BackendKind::Cpu);
        let memory = kernels::backend::DeviceMemory {
            srs_bytes: 5,
            planned_bytes: 7,
            budget_bytes: 11,
            streamed_bytes: 13,
            streamed_total_bytes: 17,
        };
        match probe.report(memory) {
            FromChild::Device {
                srs_device_bytes,
                planned_device_bytes,
                device_budget_bytes,
                srs_streamed_bytes,
                srs_streamed_total_bytes,
                ..
            } => assert_eq!(
                (
                    srs_device_bytes,
                    planned_device_bytes,
                    device_budget_bytes,
                    srs_streamed_bytes,
                    srs_streamed_total_bytes
                ),
                (5, 7, 11, 13, 17)
            ),
            other => panic!("unexpected {other:?}"),
        }
    }
}
