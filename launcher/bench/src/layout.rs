//! The cpuset layouts a sweep compares, and the one it recommends.
//!
//! - [`Topology`]: the machine's physical cores, each the SMT siblings of its cpus as
//!   `/sys/devices/system/cpu/cpuN/topology/thread_siblings_list` names them (a cpu without the
//!   file is a core of its own);
//! - [`layouts`]: for each gpu-proc core count and [`Smt`] placement, which cpus synth-proc and
//!   each gpu-proc get ([`LayoutChoice`]): `auto` is [`Layout::auto`] (the top cpus for the
//!   gpu-procs, what a config with `gpu_cores` gets); `together` gives each gpu-proc whole
//!   physical cores (no synthesis on their siblings); `apart` gives each gpu-proc one sibling of
//!   each of its cores and synthesis the other, so both share those cores. On a machine without
//!   SMT the two are the same as `auto` and are skipped with a note;
//! - [`recommend`]: the best split row's layout as the `[cpus]`, `[[gpu]]` and `[synthesis]`
//!   sections an operator puts in the config.

use std::fmt::Write as _;
use std::path::Path;

use launcher::pinning::{CpuList, Layout};
use serde::{Deserialize, Serialize};

use crate::report::SweepRow;

/// The machine's physical cores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// One list per physical core (its SMT siblings), ordered by first cpu.
    pub cores: Vec<CpuList>,
}

impl Topology {
    /// The cores of `allowed` read from sysfs (`/sys/devices/system/cpu`); siblings outside
    /// `allowed` are left out.
    pub fn read(allowed: &CpuList) -> Topology {
        Topology::read_from(Path::new("/sys/devices/system/cpu"), allowed)
    }

    /// [`Topology::read`] from another sysfs root (tests).
    pub fn read_from(root: &Path, allowed: &CpuList) -> Topology {
        let groups = allowed.iter().map(|cpu| {
            let path = root.join(format!("cpu{cpu}/topology/thread_siblings_list"));
            std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| t.trim().parse::<CpuList>().ok())
                .map(|s| s.intersect(allowed))
                .filter(|s| s.contains(cpu))
                .unwrap_or_else(|| CpuList::from_cpus([cpu]).unwrap_or_default())
        });
        Topology::from_groups(groups)
    }

    /// The topology of these sibling groups (duplicates merged, ordered by first cpu).
    pub fn from_groups(groups: impl IntoIterator<Item = CpuList>) -> Topology {
        let mut cores: Vec<CpuList> = Vec::new();
        for g in groups {
            if !g.is_empty() && !cores.contains(&g) {
                cores.push(g);
            }
        }
        cores.sort_by_key(|c| c.iter().next());
        Topology { cores }
    }

    /// Whether some physical core has more than one cpu.
    pub fn has_smt(&self) -> bool {
        self.cores.iter().any(|c| c.len() > 1)
    }

    /// A line saying what the machine has.
    pub fn describe(&self) -> String {
        let cpus: usize = self.cores.iter().map(CpuList::len).sum();
        if self.has_smt() {
            let pairs: Vec<String> = self
                .cores
                .iter()
                .filter(|c| c.len() > 1)
                .take(4)
                .map(|c| format!("{{{c}}}"))
                .collect();
            format!(
                "{cpus} cpus on {} physical cores (SMT siblings {}{})",
                self.cores.len(),
                pairs.join(" "),
                if self.cores.len() > 4 { " ..." } else { "" }
            )
        } else {
            format!("{cpus} cpus, no SMT siblings")
        }
    }

    /// Physical cores that hold cpus of both `a` and `b`.
    pub fn shared_cores(&self, a: &CpuList, b: &CpuList) -> usize {
        self.cores
            .iter()
            .filter(|c| !c.intersect(a).is_empty() && !c.intersect(b).is_empty())
            .count()
    }
}

/// How a gpu-proc's cpus sit on the SMT siblings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Smt {
    /// The automatic layout (the top cpus), whatever their siblings.
    Auto,
    /// Whole physical cores for each gpu-proc.
    Together,
    /// One sibling of each of the gpu-proc's cores; synthesis gets the other.
    Apart,
}

impl std::str::FromStr for Smt {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "auto" => Ok(Smt::Auto),
            "together" => Ok(Smt::Together),
            "apart" => Ok(Smt::Apart),
            other => Err(format!(
                "unknown SMT placement `{other}`: use auto, together, apart"
            )),
        }
    }
}

impl std::fmt::Display for Smt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Smt::Auto => "auto",
            Smt::Together => "together",
            Smt::Apart => "apart",
        })
    }
}

/// One layout of a sweep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutChoice {
    /// What the rows call it (`gpu 2 cores`, `gpu 2 cores, SMT apart`).
    pub name: String,
    /// Cores of each gpu-proc.
    pub gpu_cores: usize,
    /// The SMT placement.
    pub smt: Smt,
    /// synth-proc's cpus.
    pub synth: CpuList,
    /// Each gpu-proc's cpus.
    pub gpus: Vec<CpuList>,
}

impl LayoutChoice {
    /// Every cpu of the layout: what the in-process pipeline runs on.
    pub fn all(&self) -> CpuList {
        self.gpus.iter().fold(self.synth.clone(), |a, g| a.union(g))
    }

    /// The gpu-procs' cpus as one text (`14-15`, `12-13;14-15` for two).
    pub fn gpu_text(&self) -> String {
        self.gpus
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(";")
    }
}

/// The layouts of `gpu_procs` gpu-procs with each core count of `gpu_cores` and each SMT
/// placement of `smt`, over the cpus of `topology`, with notes on what was skipped and why.
pub fn layouts(
    topology: &Topology,
    gpu_procs: usize,
    gpu_cores: &[usize],
    smt: &[Smt],
) -> anyhow::Result<(Vec<LayoutChoice>, Vec<String>)> {
    let all = topology
        .cores
        .iter()
        .fold(CpuList::new(), |a, c| a.union(c));
    let mut out = Vec::new();
    let mut notes = Vec::new();
    if smt.iter().any(|s| *s != Smt::Auto) && !topology.has_smt() {
        notes.push(
            "no SMT siblings on this machine (every thread_siblings_list names one cpu): the \
             `together` and `apart` layouts are the same as `auto`, skipped"
                .to_string(),
        );
    }
    for &k in gpu_cores {
        for &placement in smt {
            let plural = if k == 1 { "core" } else { "cores" };
            let choice = match placement {
                Smt::Auto => {
                    let l = Layout::auto(&all, gpu_procs, k)?;
                    let mut name = format!("gpu {k} {plural}");
                    let gpus = l.gpus().iter().fold(CpuList::new(), |a, g| a.union(g));
                    let shared = topology.shared_cores(l.synth(), &gpus);
                    if topology.has_smt() {
                        let _ = write!(name, " ({shared} physical cores shared with synthesis)");
                    }
                    Some(LayoutChoice {
                        name,
                        gpu_cores: k,
                        smt: placement,
                        synth: l.synth().clone(),
                        gpus: l.gpus().to_vec(),
                    })
                }
                _ if !topology.has_smt() => None,
                Smt::Together => match together(topology, gpu_procs, k) {
                    Ok((synth, gpus)) => Some(LayoutChoice {
                        name: format!("gpu {k} {plural}, SMT together"),
                        gpu_cores: k,
                        smt: placement,
                        synth,
                        gpus,
                    }),
                    Err(why) => {
                        notes.push(format!("gpu {k} {plural}, SMT together: skipped: {why}"));
                        None
                    }
                },
                Smt::Apart => match apart(topology, gpu_procs, k) {
                    Ok((synth, gpus)) => Some(LayoutChoice {
                        name: format!("gpu {k} {plural}, SMT apart"),
                        gpu_cores: k,
                        smt: placement,
                        synth,
                        gpus,
                    }),
                    Err(why) => {
                        notes.push(format!("gpu {k} {plural}, SMT apart: skipped: {why}"));
                        None
                    }
                },
            };
            if let Some(c) = choice {
                match out
                    .iter()
                    .find(|o: &&LayoutChoice| o.synth == c.synth && o.gpus == c.gpus)
                {
                    Some(same) => notes.push(format!(
                        "{}: same cpus as `{}`: measured once",
                        c.name, same.name
                    )),
                    None => out.push(c),
                }
            }
        }
    }
    anyhow::ensure!(
        !out.is_empty(),
        "no layout to measure{}",
        if notes.is_empty() {
            String::new()
        } else {
            format!(": {}", notes.join("; "))
        }
    );
    Ok((out, notes))
}

/// Whole physical cores from the top for each gpu-proc, `k` cpus each.
fn together(
    topology: &Topology,
    gpu_procs: usize,
    k: usize,
) -> Result<(CpuList, Vec<CpuList>), String> {
    let mut cores: Vec<&CpuList> = topology.cores.iter().collect();
    let mut gpus = Vec::new();
    for g in 0..gpu_procs {
        let mut mine = CpuList::new();
        while mine.len() < k {
            let core = cores
                .pop()
                .ok_or_else(|| format!("not enough physical cores for gpu-proc {g}"))?;
            if mine.len() + core.len() > k {
                return Err(format!(
                    "{k} cpus are not whole physical cores of {} cpus",
                    core.len()
                ));
            }
            mine = mine.union(core);
        }
        gpus.push(mine);
    }
    let synth = cores.iter().fold(CpuList::new(), |a, c| a.union(c));
    if synth.is_empty() {
        return Err("no cpu left for synthesis".into());
    }
    Ok((synth, gpus))
}

/// One sibling of each of `k` physical cores (with siblings, from the top) for each gpu-proc;
/// synthesis gets every other cpu.
fn apart(
    topology: &Topology,
    gpu_procs: usize,
    k: usize,
) -> Result<(CpuList, Vec<CpuList>), String> {
    let mut smt_cores: Vec<&CpuList> = topology.cores.iter().filter(|c| c.len() > 1).collect();
    let mut gpus = Vec::new();
    for g in 0..gpu_procs {
        let mut mine = Vec::new();
        for _ in 0..k {
            let core = smt_cores.pop().ok_or_else(|| {
                format!("not enough physical cores with SMT siblings for gpu-proc {g}")
            })?;
            // The highest sibling: the lowest stays with synthesis.
            mine.extend(core.iter().last());
        }
        gpus.push(CpuList::from_cpus(mine).map_err(|e| e.to_string())?);
    }
    let all = topology
        .cores
        .iter()
        .fold(CpuList::new(), |a, c| a.union(c));
    let synth = gpus.iter().fold(all, |a, g| a.difference(g));
    Ok((synth, gpus))
}

/// The best split row's layout as config sections: the split row without the noisy neighbour
/// with the highest throughput (within 1 %, the one whose gpu-procs have the fewest cpus, as
/// [`launcher::pinning::default_gpu_cores`] gives them only what their backend needs, then the
/// lower p99 latency), rendered as the `[cpus]`,
/// `[[gpu]]` and `[synthesis]` sections of `systemd/config.example.toml` with the bench's
/// `backend` and `batch`. `None` when no such row has a throughput.
pub fn recommend(rows: &[SweepRow], backend: &str, batch: usize) -> Option<String> {
    let candidates: Vec<&SweepRow> = rows
        .iter()
        .filter(|r| r.row.mode == "split" && !r.neighbour)
        .filter(|r| r.row.proofs_per_s.is_some_and(|t| t > 0.0))
        .collect();
    let top = candidates
        .iter()
        .filter_map(|r| r.row.proofs_per_s)
        .fold(f64::NAN, f64::max);
    let best = candidates
        .iter()
        .filter(|r| r.row.proofs_per_s.is_some_and(|t| t >= 0.99 * top))
        .min_by(|a, b| {
            let cpus = |r: &SweepRow| {
                r.gpu_cpus
                    .split(';')
                    .filter_map(|c| c.parse::<CpuList>().ok())
                    .map(|c| c.len())
                    .sum::<usize>()
            };
            let p = |r: &SweepRow| r.latency_p99_s.unwrap_or(f64::INFINITY);
            cpus(a).cmp(&cpus(b)).then(p(a).total_cmp(&p(b)))
        })?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# best measured layout: {} ({}, {} in flight: {:.4} s/proof, {:.1} proofs/min)",
        best.layout,
        crate::report::plural(best.synth_threads, "synthesis worker"),
        crate::report::plural(best.clients, "job"),
        best.row.s_per_proof.unwrap_or(f64::NAN),
        best.row.proofs_per_min.unwrap_or(f64::NAN),
    );
    let _ = writeln!(s, "[cpus]");
    let _ = writeln!(s, "synth = \"{}\"", best.synth_cpus);
    for (device, cpus) in best.gpu_cpus.split(';').enumerate() {
        let _ = writeln!(s, "\n[[gpu]]");
        let _ = writeln!(s, "device = {device}");
        let _ = writeln!(s, "backend = \"{backend}\"");
        let _ = writeln!(s, "batch = {batch}");
        let _ = writeln!(s, "cpus = \"{cpus}\"");
    }
    let _ = writeln!(s, "\n[synthesis]");
    let _ = writeln!(s, "concurrency = {}", best.synth_threads);
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{BenchRow, TimelineStats};

    fn cpus(s: &str) -> CpuList {
        s.parse().unwrap()
    }

    /// 8 cpus on 4 cores, siblings (i, i+4), as Linux numbers them on many Xeons.
    fn smt8() -> Topology {
        Topology::from_groups((0..4).map(|i| CpuList::from_cpus([i, i + 4]).unwrap()))
    }

    #[test]
    fn sysfs_topology_with_and_without_smt() {
        let dir = tempfile::tempdir().unwrap();
        for (cpu, sib) in [(0, "0,2"), (1, "1,3"), (2, "0,2"), (3, "1,3")] {
            let d = dir.path().join(format!("cpu{cpu}/topology"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("thread_siblings_list"), format!("{sib}\n")).unwrap();
        }
        let t = Topology::read_from(dir.path(), &cpus("0-3"));
        assert_eq!(t.cores, [cpus("0,2"), cpus("1,3")]);
        assert!(t.has_smt());
        // Only cpus 0 and 1 allowed: their siblings are left out, no SMT left.
        let t = Topology::read_from(dir.path(), &cpus("0-1"));
        assert_eq!(t.cores, [cpus("0"), cpus("1")]);
        assert!(!t.has_smt());
        assert!(t.describe().contains("no SMT siblings"), "{}", t.describe());
        // No sysfs at all: one core per cpu.
        let t = Topology::read_from(&dir.path().join("absent"), &cpus("0-2"));
        assert_eq!(t.cores.len(), 3);
    }

    #[test]
    fn smt_layouts_place_the_gpu_proc_on_whole_cores_or_beside_synthesis() {
        let all = [Smt::Auto, Smt::Together, Smt::Apart];
        // Siblings (i, i+4): the top cpus 6, 7 are one sibling of each of two cores.
        let t = smt8();
        let (l, notes) = layouts(&t, 1, &[2], &all).unwrap();
        let by = |l: &[LayoutChoice], s: Smt| l.iter().find(|c| c.smt == s).cloned();
        let auto = by(&l, Smt::Auto).unwrap();
        assert_eq!(
            (auto.gpus.as_slice(), &auto.synth),
            ([cpus("6-7")].as_slice(), &cpus("0-5"))
        );
        assert!(
            auto.name.contains("2 physical cores shared"),
            "{}",
            auto.name
        );
        // together: core {3,7}, the top one, whole; no core shared with synthesis.
        let together = by(&l, Smt::Together).unwrap();
        assert_eq!(together.gpus, [cpus("3,7")]);
        assert_eq!(together.synth, cpus("0-2,4-6"));
        assert_eq!(t.shared_cores(&together.synth, &together.gpus[0]), 0);
        assert_eq!(together.all(), cpus("0-7"));
        // apart: one sibling of each of the two top cores, the same cpus as auto: measured once.
        assert!(by(&l, Smt::Apart).is_none());
        assert_eq!(l.len(), 2);
        assert!(notes[0].contains("same cpus as `gpu 2 cores"), "{notes:?}");

        // Siblings (2i, 2i+1): auto takes the whole top core, apart splits two.
        let t =
            Topology::from_groups((0..4).map(|i| CpuList::from_cpus([2 * i, 2 * i + 1]).unwrap()));
        let (l, _) = layouts(&t, 1, &[2], &all).unwrap();
        assert_eq!(by(&l, Smt::Auto).unwrap().gpus, [cpus("6-7")]);
        assert!(by(&l, Smt::Together).is_none());
        let apart = by(&l, Smt::Apart).unwrap();
        assert_eq!(
            (apart.gpus.as_slice(), &apart.synth),
            ([cpus("5,7")].as_slice(), &cpus("0-4,6"))
        );
        assert_eq!(t.shared_cores(&apart.synth, &apart.gpus[0]), 2);

        // Three cpus are not whole cores of two.
        let e = layouts(&smt8(), 1, &[3], &[Smt::Together]).unwrap_err();
        assert!(e.to_string().contains("not whole physical cores"), "{e}");
    }

    #[test]
    fn without_smt_only_auto_layouts_are_made_and_a_note_says_why() {
        let t = Topology::from_groups((0..4).map(|i| CpuList::from_cpus([i]).unwrap()));
        let (l, notes) = layouts(&t, 1, &[1, 2], &[Smt::Auto, Smt::Apart]).unwrap();
        assert_eq!(
            l.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["gpu 1 core", "gpu 2 cores"]
        );
        assert_eq!(l[1].gpus, [cpus("2-3")]);
        assert!(notes[0].contains("no SMT siblings"), "{notes:?}");
        // Two gpu-procs of two cores each leave nothing for synthesis.
        assert!(layouts(&t, 2, &[2], &[Smt::Auto]).is_err());
    }

    fn row(layout: &str, mode: &str, neighbour: bool, per_s: f64, p99: f64) -> SweepRow {
        let mut r = SweepRow::new(
            BenchRow::from_stats("c", mode, &TimelineStats::default()),
            layout,
        );
        r.row.proofs_per_s = Some(per_s);
        r.row.s_per_proof = Some(1.0 / per_s);
        r.row.proofs_per_min = Some(60.0 * per_s);
        r.neighbour = neighbour;
        r.latency_p99_s = Some(p99);
        r.synth_cpus = "0-11".into();
        r.gpu_cpus = "14-15".into();
        r.synth_threads = 12;
        r.clients = 16;
        r
    }

    #[test]
    fn the_recommendation_is_the_fastest_split_row_and_parses_as_config() {
        let rows = vec![
            // Faster, but in process or under the neighbour: never recommended.
            row("gpu 2 cores", "inprocess", false, 9.0, 1.0),
            row("gpu 2 cores", "split", true, 8.0, 1.0),
            row("gpu 4 cores", "split", false, 3.0, 1.0),
            // Within 1 % of each other: the lower p99 latency wins.
            row("gpu 2 cores", "split", false, 3.50, 4.0),
            row("gpu 6 cores", "split", false, 3.48, 2.0),
        ];
        let text = recommend(&rows, "gpu", 1).unwrap();
        assert!(
            text.starts_with("# best measured layout: gpu 6 cores"),
            "{text}"
        );
        let config = launcher::config::Config::parse(&text).unwrap();
        assert_eq!(
            config.cpus.synth.as_deref(),
            Some(rows[4].synth_cpus.as_str())
        );
        assert_eq!(config.gpu.len(), 1);
        assert_eq!(config.gpu[0].cpus.as_deref(), Some("14-15"));
        assert_eq!(config.gpu[0].batch, 1);
        assert_eq!(config.synthesis.concurrency, 12);
        // Two gpu-procs: two [[gpu]] tables.
        let mut two = rows[3].clone();
        two.gpu_cpus = "12-13;14-15".into();
        let text = recommend(&[two], "cuda", 2).unwrap();
        let config = launcher::config::Config::parse(&text).unwrap();
        assert_eq!(config.gpu.len(), 2);
        assert_eq!(
            (config.gpu[1].device, config.gpu[1].cpus.as_deref()),
            (1, Some("14-15"))
        );
        // No split row: nothing to recommend.
        assert!(recommend(&rows[..2], "gpu", 1).is_none());
        // Within 1 %, the gpu-procs with fewer cpus win over a lower p99: the cores go to
        // synthesis, as the backend's default layout gives them.
        let mut one = row("gpu 1 core", "split", false, 3.47, 3.0);
        one.gpu_cpus = "15".into();
        let text = recommend(&[rows[3].clone(), rows[4].clone(), one], "gpu", 1).unwrap();
        assert!(
            text.starts_with("# best measured layout: gpu 1 core"),
            "{text}"
        );
    }
}
