//! [`Layout`]: which cpus go to synth-proc and to each gpu-proc.

use std::fmt;

use shm_protocol::control::BackendKind;

use super::{CpuList, ErrorKind, Result};

/// The cores each gpu-proc gets by default (`[cpus] gpu_cores` and `--gpu-cores` unset) when
/// `gpus` gpu-procs of these `backends` share `cpus` cpus with synth-proc: what each backend's
/// prover does on the host.
///
/// - `gpu`: 1. Everything of a proof runs on the GPU; its host thread spends a few percent of
///   one core per GPU-second (copies queued, two fixed-base products). Every other core
///   synthesizes.
/// - `cuda` (supraseal-c2): its B_G2 multi-exponentiation and the bucket preparation run on a
///   host thread pool sized to the gpu-proc's cores: up to 6, at most a quarter of the cpus
///   per gpu-proc.
/// - `cpu`: the prover is the CPU: the cpus are shared evenly between synth-proc and the
///   gpu-procs.
///
/// Never less than 1, and always leaving synth-proc at least one cpu where there is one to leave.
pub fn default_gpu_cores(backends: &[BackendKind], cpus: usize, gpus: usize) -> usize {
    let gpus = gpus.max(1);
    let each = backends
        .iter()
        .map(|b| match b {
            BackendKind::Gpu => 1,
            BackendKind::Cuda => (cpus / (4 * gpus)).clamp(1, 6),
            BackendKind::Cpu => cpus / (gpus + 1),
        })
        .max()
        .unwrap_or(1);
    let most = cpus.saturating_sub(1) / gpus;
    each.min(most).max(1)
}

/// Which cpus each child process gets: one set for synth-proc, one per gpu-proc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    synth: CpuList,
    gpus: Vec<CpuList>,
}

impl Layout {
    /// The automatic layout: gpu-proc `i` gets `cores_per_gpu` cores from the top of
    /// `available` (gpu0 the lowest of them), synth-proc all the cores below.
    ///
    /// Fails when fewer than `gpu_procs * cores_per_gpu + 1` cpus are available, or when
    /// `cores_per_gpu` is 0 while gpu-procs are asked for. `gpu_procs` may be 0 (synthesis-only
    /// runs): synth-proc then gets every available cpu.
    pub fn auto(available: &CpuList, gpu_procs: usize, cores_per_gpu: usize) -> Result<Layout> {
        if gpu_procs > 0 && cores_per_gpu == 0 {
            return Err(ErrorKind::InvalidLayout {
                reason: "a gpu-proc needs at least one core (`gpu_cores` is 0)".to_owned(),
            }
            .into());
        }
        let for_gpus = gpu_procs.checked_mul(cores_per_gpu);
        let n = available.len();
        let for_gpus = match for_gpus {
            Some(g) if g < n => g,
            _ => {
                return Err(ErrorKind::TooFewCpus {
                    available: available.clone(),
                    available_count: n,
                    gpu_procs,
                    cores_per_gpu,
                }
                .into())
            }
        };
        let cpus = available.as_slice();
        let synth_len = n - for_gpus;
        let synth = CpuList {
            cpus: cpus[..synth_len].to_vec(),
        };
        let gpus = (0..gpu_procs)
            .map(|i| {
                let start = synth_len + i * cores_per_gpu;
                CpuList {
                    cpus: cpus[start..start + cores_per_gpu].to_vec(),
                }
            })
            .collect();
        Ok(Layout { synth, gpus })
    }

    /// A layout from explicit lists. Every set must be non-empty. Sets may overlap (useful on
    /// small machines); an overlap is logged, since it gives up the isolation.
    pub fn explicit(synth: CpuList, gpus: Vec<CpuList>) -> Result<Layout> {
        if synth.is_empty() {
            return Err(ErrorKind::InvalidLayout {
                reason: "the synth cpu set is empty".into(),
            }
            .into());
        }
        if let Some(i) = gpus.iter().position(CpuList::is_empty) {
            return Err(ErrorKind::InvalidLayout {
                reason: format!("the cpu set of gpu{i} is empty"),
            }
            .into());
        }
        let layout = Layout { synth, gpus };
        let roles: Vec<(String, &CpuList)> = layout.roles().collect();
        for (i, (a, sa)) in roles.iter().enumerate() {
            for (b, sb) in &roles[i + 1..] {
                let both = sa.intersect(sb);
                if !both.is_empty() {
                    tracing::warn!(cpus = %both, "cpu sets of `{a}` and `{b}` overlap");
                }
            }
        }
        Ok(layout)
    }

    /// Checks that every set lies within `available`.
    pub fn check_within(&self, available: &CpuList, scope: &str) -> Result<()> {
        for (role, cpus) in self.roles() {
            if !cpus.is_subset(available) {
                return Err(ErrorKind::CpusUnavailable {
                    role,
                    requested: cpus.clone(),
                    available: available.clone(),
                    scope: scope.to_owned(),
                }
                .into());
            }
        }
        Ok(())
    }

    /// synth-proc's cpus.
    pub fn synth(&self) -> &CpuList {
        &self.synth
    }

    /// Each gpu-proc's cpus, by gpu-proc index.
    pub fn gpus(&self) -> &[CpuList] {
        &self.gpus
    }

    /// Every role with its cpus: `("synth", …)`, then `("gpu0", …)`, `("gpu1", …)`, …; the role
    /// names are the placement (cgroup) names the launcher uses.
    pub fn roles(&self) -> impl Iterator<Item = (String, &CpuList)> + '_ {
        std::iter::once(("synth".to_owned(), &self.synth)).chain(
            self.gpus
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("gpu{i}"), c)),
        )
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (role, cpus)) in self.roles().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{role} {cpus}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_gpu_cores_follow_the_backend_and_leave_synthesis_a_cpu() {
        use BackendKind::*;
        // A 16-core GPU host with one GPU.
        assert_eq!(default_gpu_cores(&[Gpu], 16, 1), 1);
        assert_eq!(default_gpu_cores(&[Cuda], 16, 1), 4);
        assert_eq!(default_gpu_cores(&[Cuda], 64, 1), 6);
        assert_eq!(default_gpu_cores(&[Cpu], 16, 1), 8);
        // Eight GPUs on 128 cores; mixed backends take the most any of them needs.
        assert_eq!(default_gpu_cores(&[Gpu], 128, 8), 1);
        assert_eq!(default_gpu_cores(&[Cuda], 128, 8), 4);
        assert_eq!(default_gpu_cores(&[Gpu, Cuda], 128, 8), 4);
        assert_eq!(default_gpu_cores(&[Cpu], 128, 8), 14);
        // The 2-core dev machine: one each.
        for b in [Gpu, Cuda, Cpu] {
            assert_eq!(default_gpu_cores(&[b], 2, 1), 1);
        }
        // Synthesis keeps a cpu; one cpu is shared (the layout refuses it, with the reason).
        assert_eq!(default_gpu_cores(&[Cpu], 3, 2), 1);
        assert_eq!(default_gpu_cores(&[Cpu], 1, 1), 1);
        assert_eq!(default_gpu_cores(&[], 16, 1), 1);
    }

    fn list(s: &str) -> CpuList {
        s.parse().unwrap()
    }

    #[test]
    fn auto_layout_gives_gpus_the_top_cores() {
        let l = Layout::auto(&list("0-15"), 2, 2).unwrap();
        assert_eq!(l.synth(), &list("0-11"));
        assert_eq!(l.gpus(), &[list("12-13"), list("14-15")]);
        assert_eq!(l.to_string(), "synth 0-11, gpu0 12-13, gpu1 14-15");
        let names: Vec<String> = l.roles().map(|(n, _)| n).collect();
        assert_eq!(names, ["synth", "gpu0", "gpu1"]);

        let l = Layout::auto(&list("0-1"), 1, 1).unwrap();
        assert_eq!((l.synth(), &l.gpus()[0]), (&list("0"), &list("1")));

        // Gaps in the available set are respected.
        let l = Layout::auto(&list("0,2,4,6,8"), 1, 2).unwrap();
        assert_eq!(l.synth(), &list("0,2,4"));
        assert_eq!(l.gpus(), &[list("6,8")]);

        let l = Layout::auto(&list("0-3"), 0, 4).unwrap();
        assert_eq!(l.synth(), &list("0-3"));
        assert!(l.gpus().is_empty());
        l.check_within(&list("0-3"), "the test set").unwrap();
    }

    #[test]
    fn auto_layout_refuses_too_few_cpus_with_a_hint() {
        let err = Layout::auto(&list("0-1"), 1, 2).unwrap_err();
        assert!(
            matches!(
                err.kind(),
                ErrorKind::TooFewCpus {
                    available_count: 2,
                    ..
                }
            ),
            "{err}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("not enough cpus for 1 gpu-proc(s) with 2 core(s)"),
            "{msg}"
        );
        assert!(msg.contains("\nhint: "), "{msg}");
        assert!(
            Layout::auto(&list("0-3"), 2, 2).is_err(),
            "synth-proc needs a core"
        );
        assert!(
            Layout::auto(&list("0-3"), usize::MAX, 2).is_err(),
            "overflow is an error"
        );
        let err = Layout::auto(&list("0-3"), 1, 0).unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::InvalidLayout { .. }),
            "{err}"
        );
    }

    #[test]
    fn explicit_layout_checks() {
        let l = Layout::explicit(list("0-9"), vec![list("10-11"), list("12-13")]).unwrap();
        assert_eq!(l.gpus()[1], list("12-13"));
        let err = l
            .check_within(&list("0-11"), "the online cpus")
            .unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::CpusUnavailable { role, .. } if role == "gpu1"),
            "{err}"
        );
        assert!(Layout::explicit(CpuList::new(), vec![]).is_err());
        assert!(Layout::explicit(list("0"), vec![CpuList::new()]).is_err());
        // Overlap is allowed (logged).
        assert!(Layout::explicit(list("0-1"), vec![list("1")]).is_ok());
    }
}
