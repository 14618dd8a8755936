//! CPU placement of the launcher's children: cpu lists, layouts, and pinning through cgroup v2,
//! the cgroup v1 `cpuset` hierarchy or `sched_setaffinity`.
//!
//! # How a child gets its cpus
//!
//! ```text
//!  CpuList::online() / CpuList::allowed()      what this process may hand out
//!        │
//!  Layout::auto(available, gpu_procs, k)        synth = the rest, gpu0 … gpuN-1 = k cores each
//!        │
//!  PinMode::detect() / PinMode::probe(kind)     cgroup v2 → cgroup v1 → affinity
//!        │
//!  Placement::prepare(&mode, "gpu0", &cpus)     creates the cgroup, writes cpuset.cpus (parent side)
//!        │
//!  placement.apply_to(&mut command)             pre_exec: join the cgroup, set the affinity
//!        │
//!  command.spawn() … placement.verify(pid)      reads /proc/PID/status `Cpus_allowed_list`
//!        │
//!  placement.remove() / drop                    rmdir the cgroups this process made
//! ```
//!
//! **Architecture Invariant:** a child is placed *before* `exec`, never after it starts.
//! supraseal-c2 sizes its host thread pool from the process's affinity when the binary loads,
//! and rayon sizes its global pool on first use; a process moved later keeps pools sized for the
//! wrong set. So every mode ends with `sched_setaffinity` in the child between `fork` and `exec`,
//! after joining the cgroup (joining a cpuset resets the affinity to the cgroup's cpus; setting it
//! again to the same set makes the affinity the one thing pool sizing has to read).
//!
//! # Modes and what each leaves on the host
//!
//! - [`PinMode::CgroupV2`]: the process's own cgroup (from `/proc/self/cgroup`) must list `cpuset`
//!   in `cgroup.controllers` and be writable — under systemd that is the service's cgroup with
//!   `Delegate=yes`. Because of cgroup v2's "no internal processes" rule a cgroup holding
//!   processes cannot enable controllers for its children, so the launcher first moves itself
//!   (and its own children still there) into a leaf `launcher`, then enables `+cpuset` in
//!   `cgroup.subtree_control`. Children go to `splitprover-<launcher pid>/<name>`. The true root
//!   cgroup is exempt from the rule and is used as it is. The `launcher` leaf stays until the
//!   service's cgroup goes (systemd removes it on stop).
//! - [`PinMode::CgroupV1`]: the process's cgroup in the `cpuset` hierarchy; children go to
//!   `splitprover-<launcher pid>/<name>`, each with `cpuset.cpus` and `cpuset.mems` written
//!   (a v1 cpuset with empty `mems` refuses tasks).
//! - [`PinMode::Affinity`]: only `sched_setaffinity`; nothing to create or remove.
//!
//! A [`Placement`] removes its cgroup when dropped (or by [`Placement::remove`], which reports
//! failures), and the `splitprover-<pid>` group once no placement is left in it. A launcher that
//! was killed leaves its group behind; the next one removes such empty groups of dead launchers
//! when it creates its own.
//!
//! # Example
//!
//! ```no_run
//! use launcher::cpuset::{CpuList, Layout, PinMode, Placement};
//! use std::process::Command;
//!
//! # fn main() -> Result<(), launcher::cpuset::Error> {
//! let layout = Layout::auto(&CpuList::allowed()?, 1, 2)?;
//! let mode = PinMode::detect();
//! let synth = Placement::prepare(&mode, "synth", layout.synth())?;
//! let mut cmd = Command::new("synth-proc");
//! synth.apply_to(&mut cmd);
//! let child = cmd.spawn().expect("spawn");
//! let cpus = synth.verify(child.id())?;
//! println!("synth-proc {} on cpus {cpus} via {mode}", child.id());
//! # Ok(())
//! # }
//! ```

use std::ffi::CString;
use std::fmt;
use std::fs;
use std::io::{self, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The number of cpu ids a [`CpuList`] can hold: ids `0..MAX_CPUS` (the kernel's largest
/// `NR_CPUS`). Bounds the memory a hostile list such as `0-4294967295` could ask for.
pub const MAX_CPUS: u32 = 8192;

/// Name of the leaf cgroup v2 that the launcher moves itself into (see the module docs).
pub const LAUNCHER_LEAF: &str = "launcher";

/// Prefix of the per-launcher group of cgroups: `splitprover-<pid>`.
pub const GROUP_PREFIX: &str = "splitprover-";

/// Result of this module's operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error from cpu lists, layouts or placement. [`Error::kind`] tells which.
#[derive(Debug, thiserror::Error)]
#[error("{kind}")]
pub struct Error {
    kind: ErrorKind,
}

impl Error {
    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Error { kind }
    }
}

/// The kinds of [`Error`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A cpu list in the kernel's list syntax (`0-3,8,10-11`) could not be parsed.
    #[error("invalid cpu list `{input}`: {reason}")]
    Parse {
        /// The text, trimmed.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The automatic layout needs more cpus than are available.
    #[error(
        "not enough cpus for {gpu_procs} gpu-proc(s) with {cores_per_gpu} core(s) each plus \
         synth-proc: {available_count} available (`{available}`)\n\
         hint: lower `gpu_cores` in `[cpus]`, or list the cpus of each process explicitly"
    )]
    TooFewCpus {
        /// The cpus that were available.
        available: CpuList,
        /// Their number.
        available_count: usize,
        /// gpu-procs asked for.
        gpu_procs: usize,
        /// Cores asked for each gpu-proc.
        cores_per_gpu: usize,
    },
    /// A layout is unusable (an empty cpu set, zero cores per gpu-proc).
    #[error("invalid cpu layout: {reason}")]
    InvalidLayout {
        /// What is wrong with it.
        reason: String,
    },
    /// Requested cpus are not all within the set this process may use.
    #[error(
        "cpus `{requested}` for `{role}` are not all in {scope} (`{available}`)\n\
         hint: pick cpus from `{available}`"
    )]
    CpusUnavailable {
        /// The process role (`synth`, `gpu0`, …).
        role: String,
        /// The cpus asked for.
        requested: CpuList,
        /// What they had to fit in.
        available: CpuList,
        /// Which set that is, in words.
        scope: String,
    },
    /// A placement name is not usable as a cgroup name.
    #[error("invalid placement name `{name}`: use 1 to 64 lowercase letters, digits, `-` or `_`")]
    InvalidName {
        /// The name given.
        name: String,
    },
    /// A pinning mode is not available on this host (with the reason).
    #[error("{kind} pinning is unavailable: {reason}")]
    ModeUnavailable {
        /// The mode.
        kind: PinKind,
        /// Why, possibly with a `hint:` line.
        reason: String,
    },
    /// A file system operation on a cgroup or `/proc` file failed.
    #[error("could not {action} `{path}`: {source}")]
    Io {
        /// What was being done (`read`, `write`, `create`, `remove`).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// `sched_getaffinity` failed.
    #[error("could not read this process's cpu affinity: {source}")]
    Affinity {
        /// The OS error.
        source: io::Error,
    },
    /// A process runs on other cpus than it was placed on.
    #[error("process {pid} runs on cpus `{actual}`, expected `{expected}`")]
    Mismatch {
        /// The process.
        pid: u32,
        /// Where it should run.
        expected: CpuList,
        /// `Cpus_allowed_list` of the process (or the cgroup's effective cpus).
        actual: CpuList,
    },
    /// A process is not in the cgroup it was placed in.
    #[error("process {pid} is in cgroup `{actual}`, expected one ending in `{expected}`")]
    WrongCgroup {
        /// The process.
        pid: u32,
        /// The expected cgroup path suffix.
        expected: String,
        /// Its cgroup as `/proc/PID/cgroup` gives it.
        actual: String,
    },
    /// A cgroup could not be removed because processes are still in it.
    #[error("cgroup `{path}` still holds processes\nhint: stop the processes placed there first")]
    Busy {
        /// The cgroup directory.
        path: PathBuf,
    },
}

fn io_err(action: &'static str, path: &Path, source: io::Error) -> Error {
    ErrorKind::Io {
        action,
        path: path.to_owned(),
        source,
    }
    .into()
}

fn read_text(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|e| io_err("read", path, e))
}

fn write_text(path: &Path, text: &str) -> Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| io_err("open for writing", path, e))?;
    file.write_all(text.as_bytes())
        .map_err(|e| io_err("write", path, e))
}

// ---------------------------------------------------------------------------------------------
// CpuList
// ---------------------------------------------------------------------------------------------

/// A set of cpu ids, parsed from and printed as the kernel's list syntax (`0-3,8,10-11`).
///
/// Always sorted and free of duplicates; ids are below [`MAX_CPUS`]. The empty list prints as
/// the empty string, as the kernel prints an empty cpuset.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuList {
    cpus: Vec<u32>,
}

impl CpuList {
    /// The empty list.
    pub fn new() -> CpuList {
        CpuList::default()
    }

    /// A list of the given ids (any order, duplicates allowed); fails on an id `>= MAX_CPUS`.
    pub fn from_cpus<I: IntoIterator<Item = u32>>(cpus: I) -> Result<CpuList> {
        let mut v: Vec<u32> = cpus.into_iter().collect();
        if let Some(&bad) = v.iter().find(|&&c| c >= MAX_CPUS) {
            return Err(ErrorKind::Parse {
                input: bad.to_string(),
                reason: format!(
                    "cpu {bad} is above the highest supported cpu {}",
                    MAX_CPUS - 1
                ),
            }
            .into());
        }
        v.sort_unstable();
        v.dedup();
        Ok(CpuList { cpus: v })
    }

    /// The cpus that are online (`/sys/devices/system/cpu/online`).
    pub fn online() -> Result<CpuList> {
        let path = Path::new("/sys/devices/system/cpu/online");
        read_text(path)?.parse()
    }

    /// The cpus the calling thread may run on (`sched_getaffinity`): what the launcher can hand
    /// out, which under systemd reflects `AllowedCPUs=`.
    pub fn allowed() -> Result<CpuList> {
        // Start at the glibc default of 1024 bits and grow while the kernel says the mask is too
        // small for its nr_cpu_ids.
        let mut words = 1024 / ulong_bits();
        loop {
            let mut mask = vec![0 as libc::c_ulong; words];
            // SAFETY: `mask` is a live, writable buffer of exactly `words * size_of::<c_ulong>()`
            // bytes, the size passed; the kernel writes at most that many bytes. `cpu_set_t` is
            // only the pointer type the binding asks for; the kernel reads an untyped bitmask.
            let rc = unsafe {
                libc::sched_getaffinity(
                    0,
                    words * std::mem::size_of::<libc::c_ulong>(),
                    mask.as_mut_ptr().cast::<libc::cpu_set_t>(),
                )
            };
            if rc == 0 {
                return Ok(CpuList::from_mask(&mask));
            }
            let err = io::Error::last_os_error();
            let limit = MAX_CPUS as usize / ulong_bits();
            if err.raw_os_error() == Some(libc::EINVAL) && words < limit {
                words *= 2;
                continue;
            }
            return Err(ErrorKind::Affinity { source: err }.into());
        }
    }

    fn from_mask(mask: &[libc::c_ulong]) -> CpuList {
        let bits = ulong_bits();
        let mut cpus = Vec::new();
        for (w, &word) in mask.iter().enumerate() {
            for b in 0..bits {
                if word & (1 << b) != 0 {
                    let cpu = (w * bits + b) as u32;
                    if cpu < MAX_CPUS {
                        cpus.push(cpu);
                    }
                }
            }
        }
        CpuList { cpus }
    }

    /// The list as a bitmask of `c_ulong` words, as `sched_setaffinity` takes it.
    fn to_mask(&self) -> Vec<libc::c_ulong> {
        let bits = ulong_bits();
        let words = self.cpus.last().map_or(1, |&c| c as usize / bits + 1);
        let mut mask = vec![0 as libc::c_ulong; words];
        for &c in &self.cpus {
            mask[c as usize / bits] |= 1 << (c as usize % bits);
        }
        mask
    }

    /// Number of cpus in the list.
    pub fn len(&self) -> usize {
        self.cpus.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty()
    }

    /// The ids in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.cpus.iter().copied()
    }

    /// The ids in increasing order, as a slice.
    pub fn as_slice(&self) -> &[u32] {
        &self.cpus
    }

    /// Whether `cpu` is in the list.
    pub fn contains(&self, cpu: u32) -> bool {
        self.cpus.binary_search(&cpu).is_ok()
    }

    /// Whether every cpu of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuList) -> bool {
        self.cpus.iter().all(|&c| other.contains(c))
    }

    /// The cpus in both lists.
    pub fn intersect(&self, other: &CpuList) -> CpuList {
        CpuList {
            cpus: self
                .cpus
                .iter()
                .copied()
                .filter(|&c| other.contains(c))
                .collect(),
        }
    }

    /// The cpus of `self` that are not in `other`.
    pub fn difference(&self, other: &CpuList) -> CpuList {
        CpuList {
            cpus: self
                .cpus
                .iter()
                .copied()
                .filter(|&c| !other.contains(c))
                .collect(),
        }
    }

    /// The cpus in either list.
    pub fn union(&self, other: &CpuList) -> CpuList {
        let mut cpus: Vec<u32> = self.cpus.iter().chain(&other.cpus).copied().collect();
        cpus.sort_unstable();
        cpus.dedup();
        CpuList { cpus }
    }
}

fn ulong_bits() -> usize {
    8 * std::mem::size_of::<libc::c_ulong>()
}

impl FromStr for CpuList {
    type Err = Error;

    /// Parses the kernel's list syntax: comma-separated ids and inclusive ranges `a-b`,
    /// surrounding whitespace (a trailing newline from sysfs) ignored; the empty string is the
    /// empty list. The stride form `a-b:n/m` is refused.
    fn from_str(s: &str) -> Result<CpuList> {
        let text = s.trim();
        let bad = |reason: String| -> Error {
            ErrorKind::Parse {
                input: text.to_owned(),
                reason,
            }
            .into()
        };
        if text.is_empty() {
            return Ok(CpuList::new());
        }
        // A fixed bitmap, so overlapping or repeated ranges cannot make the parse allocate
        // more than MAX_CPUS bits.
        let mut seen = vec![false; MAX_CPUS as usize];
        for part in text.split(',') {
            let part = part.trim();
            if part.is_empty() {
                return Err(bad("empty element between commas".to_owned()));
            }
            if part.contains(':') {
                return Err(bad(format!("the stride form `{part}` is not supported")));
            }
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (
                    parse_cpu(a, part).map_err(bad)?,
                    parse_cpu(b, part).map_err(bad)?,
                ),
                None => {
                    let c = parse_cpu(part, part).map_err(bad)?;
                    (c, c)
                }
            };
            if lo > hi {
                return Err(bad(format!("range `{part}` runs backwards")));
            }
            for c in lo..=hi {
                seen[c as usize] = true;
            }
        }
        let cpus = seen
            .iter()
            .enumerate()
            .filter(|(_, &on)| on)
            .map(|(c, _)| c as u32)
            .collect();
        Ok(CpuList { cpus })
    }
}

fn parse_cpu(text: &str, element: &str) -> std::result::Result<u32, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err(format!("missing cpu number in `{element}`"));
    }
    if !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("`{t}` is not a cpu number"));
    }
    match t.parse::<u32>() {
        Ok(c) if c < MAX_CPUS => Ok(c),
        _ => Err(format!(
            "cpu {t} is above the highest supported cpu {}",
            MAX_CPUS - 1
        )),
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        let mut first = true;
        while i < self.cpus.len() {
            let start = self.cpus[i];
            let mut end = start;
            while i + 1 < self.cpus.len() && self.cpus[i + 1] == end + 1 {
                i += 1;
                end = self.cpus[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

impl fmt::Debug for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuList(\"{self}\")")
    }
}

// ---------------------------------------------------------------------------------------------
// Layout
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Pin modes
// ---------------------------------------------------------------------------------------------

/// The kind of a [`PinMode`], without its location: what an operator or a test asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PinKind {
    /// cgroup v2 with the `cpuset` controller (`cgroup-v2`).
    CgroupV2,
    /// the cgroup v1 `cpuset` hierarchy (`cgroup-v1`).
    CgroupV1,
    /// `sched_setaffinity` only (`affinity`).
    Affinity,
}

impl PinKind {
    /// All kinds in detection order.
    pub const ALL: [PinKind; 3] = [PinKind::CgroupV2, PinKind::CgroupV1, PinKind::Affinity];

    /// The name used in config files and flags.
    pub fn as_str(self) -> &'static str {
        match self {
            PinKind::CgroupV2 => "cgroup-v2",
            PinKind::CgroupV1 => "cgroup-v1",
            PinKind::Affinity => "affinity",
        }
    }
}

impl fmt::Display for PinKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PinKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<PinKind> {
        PinKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s.trim())
            .ok_or_else(|| {
                ErrorKind::Parse {
                    input: s.trim().to_owned(),
                    reason: "expected `cgroup-v2`, `cgroup-v1` or `affinity`".to_owned(),
                }
                .into()
            })
    }
}

/// What the operator asked for: detect, or force one kind (`[cpus] mode` in the config).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PinChoice {
    /// Detect: cgroup v2, else cgroup v1, else affinity (`auto`).
    #[default]
    Auto,
    /// Use this kind or fail with the reason it is unavailable.
    Force(PinKind),
}

impl FromStr for PinChoice {
    type Err = Error;

    /// `auto`, `cgroup-v2`, `cgroup-v1` or `affinity`.
    fn from_str(s: &str) -> Result<PinChoice> {
        if s.trim() == "auto" {
            return Ok(PinChoice::Auto);
        }
        s.parse().map(PinChoice::Force).map_err(|_| {
            ErrorKind::Parse {
                input: s.trim().to_owned(),
                reason: "expected `auto`, `cgroup-v2`, `cgroup-v1` or `affinity`".to_owned(),
            }
            .into()
        })
    }
}

impl fmt::Display for PinChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinChoice::Auto => f.write_str("auto"),
            PinChoice::Force(k) => k.fmt(f),
        }
    }
}

/// How children are pinned on this host. The `Display` form is what `splitprover status` shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PinMode {
    /// cgroup v2: children go below `root` (the launcher's own, delegated cgroup).
    CgroupV2 {
        /// The cgroup directory under which `splitprover-<pid>/` is made.
        root: PathBuf,
    },
    /// cgroup v1 `cpuset` hierarchy: children go below `root` (the launcher's cpuset cgroup).
    CgroupV1 {
        /// The cgroup directory under which `splitprover-<pid>/` is made.
        root: PathBuf,
    },
    /// `sched_setaffinity` only.
    Affinity,
}

impl PinMode {
    /// The best mode available: cgroup v2, else cgroup v1, else affinity. Logs the mode chosen
    /// and why the better ones were skipped.
    pub fn detect() -> PinMode {
        let (mode, skipped) = PinMode::detect_with_reasons();
        for e in &skipped {
            tracing::debug!("{e}");
        }
        tracing::info!("cpu pinning: {mode}");
        mode
    }

    /// Like [`PinMode::detect`], also returning why each better mode was skipped (each a
    /// [`ErrorKind::ModeUnavailable`]), for `status` output and tests.
    pub fn detect_with_reasons() -> (PinMode, Vec<Error>) {
        let mut skipped = Vec::new();
        for kind in [PinKind::CgroupV2, PinKind::CgroupV1] {
            match PinMode::probe(kind) {
                Ok(mode) => return (mode, skipped),
                Err(e) => skipped.push(e),
            }
        }
        (PinMode::Affinity, skipped)
    }

    /// The mode of `kind` if this host allows it, else [`ErrorKind::ModeUnavailable`] with the
    /// reason. Probing changes nothing on the host.
    pub fn probe(kind: PinKind) -> Result<PinMode> {
        let unavailable =
            |reason: String| -> Error { ErrorKind::ModeUnavailable { kind, reason }.into() };
        match kind {
            PinKind::CgroupV2 => probe_v2()
                .map(|root| PinMode::CgroupV2 { root })
                .map_err(unavailable),
            PinKind::CgroupV1 => probe_v1()
                .map(|root| PinMode::CgroupV1 { root })
                .map_err(unavailable),
            PinKind::Affinity => {
                CpuList::allowed().map_err(|e| unavailable(e.to_string()))?;
                Ok(PinMode::Affinity)
            }
        }
    }

    /// [`PinMode::detect`] for [`PinChoice::Auto`], [`PinMode::probe`] for a forced kind.
    pub fn select(choice: PinChoice) -> Result<PinMode> {
        match choice {
            PinChoice::Auto => Ok(PinMode::detect()),
            PinChoice::Force(kind) => {
                let mode = PinMode::probe(kind)?;
                tracing::info!("cpu pinning: {mode} (forced)");
                Ok(mode)
            }
        }
    }

    /// The kind of this mode.
    pub fn kind(&self) -> PinKind {
        match self {
            PinMode::CgroupV2 { .. } => PinKind::CgroupV2,
            PinMode::CgroupV1 { .. } => PinKind::CgroupV1,
            PinMode::Affinity => PinKind::Affinity,
        }
    }

    /// Removes empty `splitprover-<pid>` groups (and their empty children) left below this
    /// mode's root by launchers that are no longer running. Returns how many groups went.
    /// Groups still holding processes are left alone. A no-op for [`PinMode::Affinity`].
    pub fn remove_stale_groups(&self) -> Result<usize> {
        let root = match self {
            PinMode::CgroupV2 { root } | PinMode::CgroupV1 { root } => root,
            PinMode::Affinity => return Ok(0),
        };
        let _guard = group_lock();
        remove_stale_groups_in(root)
    }
}

impl fmt::Display for PinMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinMode::CgroupV2 { root } => write!(f, "cgroup v2 cpuset under `{}`", root.display()),
            PinMode::CgroupV1 { root } => write!(f, "cgroup v1 cpuset under `{}`", root.display()),
            PinMode::Affinity => f.write_str("sched_setaffinity"),
        }
    }
}

/// One line of `/proc/self/mountinfo`, the fields this module needs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Mount {
    root: String,
    mount_point: PathBuf,
    fs_type: String,
    super_options: String,
}

fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let mut post = post.split(' ');
            let fs_type = post.next()?.to_owned();
            let _source = post.next()?;
            let super_options = post.next().unwrap_or("").to_owned();
            Some(Mount {
                root: unescape_mount_field(pre.get(3)?),
                mount_point: PathBuf::from(unescape_mount_field(pre.get(4)?)),
                fs_type,
                super_options,
            })
        })
        .collect()
}

/// Undoes the kernel's octal escapes in mountinfo fields (`\040` for a space).
fn unescape_mount_field(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            if let Ok(byte) = u8::try_from(v) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The path of this process's cgroup in one hierarchy, from `/proc/PID/cgroup` text:
/// `v2` selects the `0::` line, else the v1 line whose controller list has `controller`.
fn cgroup_path_in(proc_cgroup: &str, v2: bool, controller: &str) -> Option<String> {
    proc_cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let id = parts.next()?;
        let controllers = parts.next()?;
        let path = parts.next()?;
        let hit = if v2 {
            id == "0" && controllers.is_empty()
        } else {
            controllers.split(',').any(|c| c == controller)
        };
        hit.then(|| path.to_owned())
    })
}

/// The directory of cgroup `cg_path` (as `/proc/PID/cgroup` shows it) under `mount`.
fn cgroup_dir(mount: &Mount, cg_path: &str) -> std::result::Result<PathBuf, String> {
    let rel = if mount.root == "/" {
        cg_path
    } else if let Some(rest) = cg_path.strip_prefix(mount.root.as_str()) {
        if !(rest.is_empty() || rest.starts_with('/')) {
            return Err(format!(
                "this process's cgroup `{cg_path}` is outside the mount of `{}`",
                mount.mount_point.display()
            ));
        }
        rest
    } else {
        return Err(format!(
            "this process's cgroup `{cg_path}` is outside the mount of `{}`",
            mount.mount_point.display()
        ));
    };
    if rel.split('/').any(|c| c == "..") {
        return Err(format!(
            "this process's cgroup `{cg_path}` is outside its cgroup namespace"
        ));
    }
    let rel = rel.trim_start_matches('/');
    Ok(if rel.is_empty() {
        mount.mount_point.clone()
    } else {
        mount.mount_point.join(rel)
    })
}

fn has_word(text: &str, word: &str) -> bool {
    text.split_whitespace().any(|w| w == word)
}

fn writable(path: &Path) -> std::result::Result<(), String> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("`{}` has a NUL byte", path.display()))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call; access(2) only reads it.
    let rc = unsafe { libc::access(c.as_ptr(), libc::W_OK) };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "`{}` is not writable ({})\nhint: run as root, or under systemd with `Delegate=yes`",
            path.display(),
            io::Error::last_os_error()
        ))
    }
}

fn read_string(path: &Path) -> std::result::Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))
}

/// Whether `dir` is the true root of its cgroup v2 hierarchy (only non-root cgroups have
/// `cgroup.type`); a cgroup namespace's root is not, and obeys the no-internal-processes rule.
fn is_true_v2_root(dir: &Path) -> bool {
    !dir.join("cgroup.type").exists()
}

fn parse_pids(text: &str) -> Vec<u32> {
    text.split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn parent_pid(pid: u32) -> Option<u32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Pids in cgroup `dir` other than this process and its direct children.
fn foreign_pids(dir: &Path) -> std::result::Result<Vec<u32>, String> {
    let me = std::process::id();
    let procs = read_string(&dir.join("cgroup.procs"))?;
    Ok(parse_pids(&procs)
        .into_iter()
        .filter(|&p| p != me && parent_pid(p) != Some(me))
        .collect())
}

fn probe_v2() -> std::result::Result<PathBuf, String> {
    // Under the lock: another thread may be between moving this process into the `launcher`
    // leaf and enabling the controller, a state that would read as "no cpuset here".
    let _guard = group_lock();
    let mounts = parse_mountinfo(&read_string(Path::new("/proc/self/mountinfo"))?);
    let mount = mounts
        .iter()
        .find(|m| m.fs_type == "cgroup2")
        .ok_or("no cgroup2 file system is mounted")?;
    let proc_cgroup = read_string(Path::new("/proc/self/cgroup"))?;
    let cg = cgroup_path_in(&proc_cgroup, true, "")
        .ok_or("`/proc/self/cgroup` has no cgroup v2 line")?;
    let mut dir = cgroup_dir(mount, &cg)?;
    // Already set up by this process: we sit in the `launcher` leaf of a cgroup whose children
    // have the cpuset controller.
    if dir.file_name().is_some_and(|n| n == LAUNCHER_LEAF) {
        if let Some(parent) = dir.parent() {
            if read_string(&parent.join("cgroup.subtree_control"))
                .is_ok_and(|s| has_word(&s, "cpuset"))
            {
                dir = parent.to_owned();
            }
        }
    }
    let controllers = read_string(&dir.join("cgroup.controllers"))?;
    if !has_word(&controllers, "cpuset") {
        let v1_has_cpuset = mounts.iter().any(|m| {
            m.fs_type == "cgroup" && has_word(&m.super_options.replace(',', " "), "cpuset")
        });
        let hint = if v1_has_cpuset {
            "hint: the cpuset controller is bound to the cgroup v1 hierarchy on this host"
        } else {
            "hint: run under systemd with `Delegate=yes` (see systemd/splitprover.service)"
        };
        return Err(format!(
            "the cpuset controller is not available to cgroup `{}` (cgroup.controllers: `{}`)\n{hint}",
            dir.display(),
            controllers.trim()
        ));
    }
    writable(&dir)?;
    writable(&dir.join("cgroup.subtree_control"))?;
    let subtree = read_string(&dir.join("cgroup.subtree_control"))?;
    if !is_true_v2_root(&dir) && !has_word(&subtree, "cpuset") {
        let foreign = foreign_pids(&dir)?;
        if !foreign.is_empty() {
            return Err(format!(
                "cgroup `{}` also holds other processes ({}), so cgroup v2 cannot give its children \
                 the cpuset controller\nhint: start the launcher in a cgroup of its own, e.g. under \
                 systemd with `Delegate=yes`",
                dir.display(),
                foreign.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    Ok(dir)
}

fn probe_v1() -> std::result::Result<PathBuf, String> {
    let mounts = parse_mountinfo(&read_string(Path::new("/proc/self/mountinfo"))?);
    let mount = mounts
        .iter()
        .find(|m| m.fs_type == "cgroup" && m.super_options.split(',').any(|o| o == "cpuset"))
        .ok_or("no cgroup v1 `cpuset` hierarchy is mounted")?;
    let proc_cgroup = read_string(Path::new("/proc/self/cgroup"))?;
    let cg = cgroup_path_in(&proc_cgroup, false, "cpuset")
        .ok_or("`/proc/self/cgroup` has no line for the v1 `cpuset` controller")?;
    let dir = cgroup_dir(mount, &cg)?;
    read_string(&dir.join("cpuset.cpus"))?;
    read_string(&dir.join("cpuset.mems"))?;
    writable(&dir)?;
    Ok(dir)
}

// ---------------------------------------------------------------------------------------------
// Placement
// ---------------------------------------------------------------------------------------------

/// Serialises creating and removing the shared `splitprover-<pid>` group (and the v2 setup) so
/// that one placement's cleanup cannot remove the group while another is being made in it.
fn group_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    // A panic while holding the lock leaves no broken state behind (the file system is the
    // state), so a poisoned lock is still usable.
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn group_name() -> String {
    format!("{GROUP_PREFIX}{}", std::process::id())
}

fn mkdir_if_missing(dir: &Path) -> Result<bool> {
    match fs::create_dir(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io_err("create", dir, e)),
    }
}

/// rmdir with a short retry on EBUSY: an exiting process can stay counted in its cgroup for a
/// moment after `wait` returns on some kernels.
fn rmdir_retry(dir: &Path) -> Result<()> {
    let mut tries = 0;
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                tries += 1;
                if tries >= 50 {
                    return Err(ErrorKind::Busy {
                        path: dir.to_owned(),
                    }
                    .into());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(io_err("remove", dir, e)),
        }
    }
}

fn remove_stale_groups_in(root: &Path) -> Result<usize> {
    let me = std::process::id();
    let entries = fs::read_dir(root).map_err(|e| io_err("list", root, e))?;
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(GROUP_PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let group = entry.path();
        if let Ok(children) = fs::read_dir(&group) {
            for child in children.flatten() {
                if child.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = fs::remove_dir(child.path());
                }
            }
        }
        match fs::remove_dir(&group) {
            Ok(()) => {
                tracing::info!(
                    "removed stale cgroup `{}` of a launcher that is gone",
                    group.display()
                );
                removed += 1;
            }
            Err(e) => tracing::warn!("stale cgroup `{}` left in place: {e}", group.display()),
        }
    }
    Ok(removed)
}

/// Makes sure `root` can have cpuset children and returns this process's group below it
/// (cgroup v2). Caller holds [`group_lock`].
fn ensure_v2_group(root: &Path) -> Result<PathBuf> {
    let subtree_path = root.join("cgroup.subtree_control");
    if !has_word(&read_text(&subtree_path)?, "cpuset") {
        let mut last = None;
        for _ in 0..3 {
            if !is_true_v2_root(root) {
                vacate_v2(root)?;
            }
            match write_text(&subtree_path, "+cpuset") {
                Ok(()) => {
                    last = None;
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        if let Some(e) = last {
            return Err(ErrorKind::ModeUnavailable {
                kind: PinKind::CgroupV2,
                reason: format!(
                    "{e}\nhint: cgroup `{}` must hold no processes but the launcher's own; run it \
                     under systemd with `Delegate=yes`",
                    root.display()
                ),
            }
            .into());
        }
        tracing::info!(
            "enabled the cpuset controller for the children of `{}`",
            root.display()
        );
    }
    let group = root.join(group_name());
    if mkdir_if_missing(&group)? {
        let _ = remove_stale_groups_in(root);
    }
    let group_subtree = group.join("cgroup.subtree_control");
    if !has_word(&read_text(&group_subtree)?, "cpuset") {
        write_text(&group_subtree, "+cpuset")?;
    }
    Ok(group)
}

/// Moves this process and its children still in `root` into `root/launcher` (cgroup v2's
/// no-internal-processes rule).
fn vacate_v2(root: &Path) -> Result<()> {
    let leaf = root.join(LAUNCHER_LEAF);
    mkdir_if_missing(&leaf)?;
    let me = std::process::id();
    let procs = read_text(&root.join("cgroup.procs"))?;
    let leaf_procs = leaf.join("cgroup.procs");
    for pid in parse_pids(&procs) {
        if pid != me && parent_pid(pid) != Some(me) {
            continue;
        }
        match write_text(&leaf_procs, &pid.to_string()) {
            Ok(()) => tracing::debug!(pid, "moved into `{}`", leaf.display()),
            // The process exited in between.
            Err(e) if matches!(e.kind(), ErrorKind::Io { source, .. } if source.raw_os_error() == Some(libc::ESRCH)) =>
                {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Makes this process's group below `root` (cgroup v1), with cpus and mems copied from `root`.
/// Caller holds [`group_lock`].
fn ensure_v1_group(root: &Path) -> Result<PathBuf> {
    let group = root.join(group_name());
    let created = mkdir_if_missing(&group)?;
    let cpus = read_text(&group.join("cpuset.cpus"))?;
    if created || cpus.trim().is_empty() {
        write_text(
            &group.join("cpuset.cpus"),
            read_text(&root.join("cpuset.cpus"))?.trim(),
        )?;
        write_text(
            &group.join("cpuset.mems"),
            read_text(&root.join("cpuset.mems"))?.trim(),
        )?;
    }
    if created {
        let _ = remove_stale_groups_in(root);
    }
    Ok(group)
}

fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ErrorKind::InvalidName {
            name: name.to_owned(),
        }
        .into())
    }
}

/// What the `pre_exec` hook needs, all allocated up front.
#[derive(Debug)]
struct ChildPlan {
    /// `cgroup.procs` of the cgroup to join, if any.
    procs: Option<CString>,
    /// Write the pid in decimal (v1) rather than `0` (v2: "the writing process").
    write_pid: bool,
    /// The affinity mask.
    mask: Vec<libc::c_ulong>,
}

/// A role's cpus made ready on the host (the cgroup created and configured), to be applied to
/// each [`Command`] that starts the role's process — keep it for the life of the role, so
/// restarts land in the same place.
///
/// Dropping it removes the cgroup it made (logging a failure); [`Placement::remove`] does the
/// same and returns the failure.
#[derive(Debug)]
pub struct Placement {
    name: String,
    cpus: CpuList,
    mode: PinMode,
    cgroup: Option<PathBuf>,
    plan: Arc<ChildPlan>,
    removed: bool,
}

impl Placement {
    /// Prepares placing a process called `name` (a cgroup name: `synth`, `gpu0`, …) on `cpus`
    /// in `mode`: checks the cpus (online; within the parent cpuset or this process's affinity),
    /// creates and configures the cgroup, and precomputes what the child will do before `exec`.
    pub fn prepare(mode: &PinMode, name: &str, cpus: &CpuList) -> Result<Placement> {
        check_name(name)?;
        if cpus.is_empty() {
            return Err(ErrorKind::InvalidLayout {
                reason: format!("the cpu set of `{name}` is empty"),
            }
            .into());
        }
        let unavailable = |available: CpuList, scope: String| -> Error {
            ErrorKind::CpusUnavailable {
                role: name.to_owned(),
                requested: cpus.clone(),
                available,
                scope,
            }
            .into()
        };
        let online = CpuList::online()?;
        if !cpus.is_subset(&online) {
            return Err(unavailable(online, "the online cpus".to_owned()));
        }
        let (cgroup, write_pid) = match mode {
            PinMode::Affinity => {
                let allowed = CpuList::allowed()?;
                if !cpus.is_subset(&allowed) {
                    return Err(unavailable(
                        allowed,
                        "the launcher's cpu affinity".to_owned(),
                    ));
                }
                (None, false)
            }
            PinMode::CgroupV2 { root } => {
                let parent_path = root.join("cpuset.cpus.effective");
                let parent: CpuList = read_text(&parent_path)?.parse()?;
                if !cpus.is_subset(&parent) {
                    return Err(unavailable(parent, format!("`{}`", parent_path.display())));
                }
                let _guard = group_lock();
                let group = ensure_v2_group(root)?;
                let dir = group.join(name);
                mkdir_if_missing(&dir)?;
                write_text(&dir.join("cpuset.cpus"), &cpus.to_string())?;
                let effective: CpuList = read_text(&dir.join("cpuset.cpus.effective"))?.parse()?;
                if &effective != cpus {
                    return Err(ErrorKind::Mismatch {
                        pid: std::process::id(),
                        expected: cpus.clone(),
                        actual: effective,
                    }
                    .into());
                }
                (Some(dir), false)
            }
            PinMode::CgroupV1 { root } => {
                let parent_path = root.join("cpuset.cpus");
                let parent: CpuList = read_text(&parent_path)?.parse()?;
                if !cpus.is_subset(&parent) {
                    return Err(unavailable(parent, format!("`{}`", parent_path.display())));
                }
                let _guard = group_lock();
                let group = ensure_v1_group(root)?;
                let dir = group.join(name);
                mkdir_if_missing(&dir)?;
                write_text(&dir.join("cpuset.cpus"), &cpus.to_string())?;
                write_text(
                    &dir.join("cpuset.mems"),
                    read_text(&group.join("cpuset.mems"))?.trim(),
                )?;
                (Some(dir), true)
            }
        };
        let procs = match &cgroup {
            Some(dir) => {
                let path = dir.join("cgroup.procs");
                Some(CString::new(path.as_os_str().as_bytes()).map_err(|_| {
                    io_err(
                        "use",
                        &path,
                        io::Error::new(io::ErrorKind::InvalidInput, "path has a NUL byte"),
                    )
                })?)
            }
            None => None,
        };
        let plan = Arc::new(ChildPlan {
            procs,
            write_pid,
            mask: cpus.to_mask(),
        });
        let placement = Placement {
            name: name.to_owned(),
            cpus: cpus.clone(),
            mode: mode.clone(),
            cgroup,
            plan,
            removed: false,
        };
        tracing::debug!("prepared {placement}");
        Ok(placement)
    }

    /// Installs a `pre_exec` hook on `cmd` that, in the child between `fork` and `exec`, joins
    /// the cgroup (if any) and sets the affinity to this placement's cpus. If either fails,
    /// `cmd.spawn()` fails with that OS error.
    pub fn apply_to(&self, cmd: &mut Command) {
        let plan = Arc::clone(&self.plan);
        // SAFETY: the hook runs in the forked child before exec, where only async-signal-safe
        // calls are allowed. `place_self` makes only open/write/close/getpid/sched_setaffinity
        // system calls, formats the pid into a stack buffer, allocates nothing and takes no
        // locks; everything it reads (`plan`) was allocated in the parent before the fork.
        unsafe {
            cmd.pre_exec(move || place_self(&plan));
        }
    }

    /// Reads the cpus process `pid` may run on and checks them against this placement (and, in
    /// cgroup modes, that the process is in this placement's cgroup).
    pub fn verify(&self, pid: u32) -> Result<CpuList> {
        let actual = verify(pid)?;
        if actual != self.cpus {
            return Err(ErrorKind::Mismatch {
                pid,
                expected: self.cpus.clone(),
                actual,
            }
            .into());
        }
        if let Some(dir) = &self.cgroup {
            let path = PathBuf::from(format!("/proc/{pid}/cgroup"));
            let text = read_text(&path)?;
            let v2 = self.mode.kind() == PinKind::CgroupV2;
            let cg = cgroup_path_in(&text, v2, "cpuset").unwrap_or_default();
            let expected = format!("{}/{}", group_name(), self.name);
            let in_place = cg.ends_with(&format!("/{expected}")) && dir.ends_with(&expected);
            if !in_place {
                return Err(ErrorKind::WrongCgroup {
                    pid,
                    expected,
                    actual: cg,
                }
                .into());
            }
        }
        Ok(actual)
    }

    /// The placement's name (its cgroup's name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cpus.
    pub fn cpus(&self) -> &CpuList {
        &self.cpus
    }

    /// The mode.
    pub fn mode(&self) -> &PinMode {
        &self.mode
    }

    /// The cgroup directory made for it, in cgroup modes.
    pub fn cgroup(&self) -> Option<&Path> {
        self.cgroup.as_deref()
    }

    /// Removes the cgroup (after the processes placed there are gone) and this launcher's group
    /// if no other placement is left in it.
    pub fn remove(mut self) -> Result<()> {
        self.removed = true;
        self.remove_cgroups()
    }

    fn remove_cgroups(&self) -> Result<()> {
        let Some(dir) = &self.cgroup else {
            return Ok(());
        };
        let _guard = group_lock();
        rmdir_retry(dir)?;
        if let Some(group) = dir.parent() {
            match fs::remove_dir(group) {
                Ok(()) => tracing::debug!("removed `{}`", group.display()),
                // Other placements are still in it, or it is already gone.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ENOTEMPTY | libc::EBUSY | libc::ENOENT)
                    ) => {}
                Err(e) => return Err(io_err("remove", group, e)),
            }
        }
        Ok(())
    }
}

impl Drop for Placement {
    fn drop(&mut self) {
        if !self.removed {
            if let Err(e) = self.remove_cgroups() {
                tracing::warn!("placement `{}`: {e}", self.name);
            }
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: cpus {} via {}",
            self.name,
            self.cpus,
            self.mode.kind()
        )?;
        if let Some(dir) = &self.cgroup {
            write!(f, " (`{}`)", dir.display())?;
        }
        Ok(())
    }
}

/// Formats `n` in decimal into `buf`, returning the digits (no allocation).
fn format_decimal(mut n: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

/// Runs in the forked child before `exec`: async-signal-safe system calls only, no allocation.
fn place_self(plan: &ChildPlan) -> io::Result<()> {
    if let Some(procs) = &plan.procs {
        // SAFETY: `procs` is a NUL-terminated path that lives in `plan` for the whole call.
        let fd = unsafe { libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = [0u8; 10];
        let text: &[u8] = if plan.write_pid {
            // SAFETY: getpid has no preconditions and cannot fail.
            let pid = unsafe { libc::getpid() };
            format_decimal(pid.unsigned_abs(), &mut buf)
        } else {
            b"0"
        };
        // SAFETY: `fd` is the descriptor opened above; `text` is valid for `text.len()` bytes.
        let n = unsafe { libc::write(fd, text.as_ptr().cast(), text.len()) };
        let write_err = if n < 0 {
            Some(io::Error::last_os_error())
        } else {
            None
        };
        // SAFETY: `fd` is open and owned here; it is closed exactly once.
        unsafe { libc::close(fd) };
        if let Some(e) = write_err {
            return Err(e);
        }
        if n as usize != text.len() {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
    }
    // SAFETY: `plan.mask` is a live buffer of `mask.len() * size_of::<c_ulong>()` bytes, the size
    // passed; the kernel only reads it (zero-extending a short mask). pid 0 is the calling thread,
    // the only one in the child.
    let rc = unsafe {
        libc::sched_setaffinity(
            0,
            std::mem::size_of_val(plan.mask.as_slice()),
            plan.mask.as_ptr().cast::<libc::cpu_set_t>(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The cpus process `pid` may run on: `Cpus_allowed_list` of `/proc/PID/status`.
pub fn verify(pid: u32) -> Result<CpuList> {
    let path = PathBuf::from(format!("/proc/{pid}/status"));
    let status = read_text(&path)?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .ok_or_else(|| {
            io_err(
                "parse",
                &path,
                io::Error::new(io::ErrorKind::InvalidData, "no `Cpus_allowed_list` line"),
            )
        })?;
    line.parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str) -> CpuList {
        s.parse().unwrap()
    }

    #[test]
    fn parses_and_formats_kernel_lists() {
        for (input, cpus, shown) in [
            ("0-3,8,10-11", vec![0, 1, 2, 3, 8, 10, 11], "0-3,8,10-11"),
            ("0", vec![0], "0"),
            ("  5,1,3-4\n", vec![1, 3, 4, 5], "1,3-5"),
            ("2-2", vec![2], "2"),
            ("0-1,1-2", vec![0, 1, 2], "0-2"),
            ("", vec![], ""),
            ("\n", vec![], ""),
            ("8191", vec![8191], "8191"),
        ] {
            let l = list(input);
            assert_eq!(l.as_slice(), &cpus[..], "{input:?}");
            assert_eq!(l.to_string(), shown, "{input:?}");
            assert_eq!(list(&l.to_string()), l, "round trip of {input:?}");
            assert_eq!(l.len(), cpus.len());
        }
    }

    #[test]
    fn refuses_bad_lists_with_reasons() {
        for (input, reason) in [
            ("a", "`a` is not a cpu number"),
            ("0,,1", "empty element"),
            ("1,", "empty element"),
            ("3-1", "runs backwards"),
            ("-3", "missing cpu number in `-3`"),
            ("1-", "missing cpu number"),
            ("0-7:2/4", "stride form"),
            ("8192", "above the highest supported cpu 8191"),
            ("0-4294967295", "above the highest"),
            ("99999999999999999999", "above the highest"),
            ("+1", "not a cpu number"),
            ("1 2", "not a cpu number"),
        ] {
            let err = input.parse::<CpuList>().unwrap_err();
            assert!(
                matches!(err.kind(), ErrorKind::Parse { .. }),
                "{input:?}: {err}"
            );
            let msg = err.to_string();
            assert!(msg.contains(reason), "{input:?}: {msg}");
            assert!(msg.starts_with("invalid cpu list `"), "{msg}");
        }
    }

    #[test]
    fn set_operations() {
        let a = list("0-7");
        let b = list("4-11");
        assert_eq!(a.intersect(&b), list("4-7"));
        assert_eq!(a.difference(&b), list("0-3"));
        assert_eq!(b.difference(&a), list("8-11"));
        assert_eq!(a.union(&b), list("0-11"));
        assert!(list("2,5").is_subset(&a));
        assert!(!b.is_subset(&a));
        assert!(CpuList::new().is_subset(&a));
        assert!(a.contains(7) && !a.contains(8));
        assert_eq!(CpuList::from_cpus([3, 1, 3, 2]).unwrap(), list("1-3"));
        assert!(CpuList::from_cpus([MAX_CPUS]).is_err());
    }

    #[test]
    fn masks_round_trip() {
        for s in ["0", "1", "0-1", "63,64", "5,127,128,1000", "8191"] {
            let l = list(s);
            assert_eq!(CpuList::from_mask(&l.to_mask()), l, "{s}");
        }
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

    #[test]
    fn pin_choice_and_kind_parse() {
        assert_eq!("auto".parse::<PinChoice>().unwrap(), PinChoice::Auto);
        assert_eq!(
            "cgroup-v1".parse::<PinChoice>().unwrap(),
            PinChoice::Force(PinKind::CgroupV1)
        );
        assert_eq!(" affinity ".parse::<PinKind>().unwrap(), PinKind::Affinity);
        for k in PinKind::ALL {
            assert_eq!(k.to_string().parse::<PinKind>().unwrap(), k);
        }
        let err = "cgroups".parse::<PinChoice>().unwrap_err();
        assert!(err.to_string().contains("expected `auto`"), "{err}");
    }

    #[test]
    fn mountinfo_and_proc_cgroup_parsing() {
        let mountinfo = "\
24 30 0:22 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755
25 24 0:23 / /sys/fs/cgroup/unified rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate
26 24 0:24 / /sys/fs/cgroup/cpuset rw,nosuid shared:5 - cgroup cgroup rw,cpuset
27 24 0:25 /docker/abc /sys/fs/cgroup/cpu\\040acct rw - cgroup cgroup rw,cpu,cpuacct
";
        let mounts = parse_mountinfo(mountinfo);
        assert_eq!(mounts.len(), 4);
        assert_eq!(mounts[1].fs_type, "cgroup2");
        assert_eq!(mounts[1].mount_point, Path::new("/sys/fs/cgroup/unified"));
        assert_eq!(mounts[2].super_options, "rw,cpuset");
        assert_eq!(mounts[3].mount_point, Path::new("/sys/fs/cgroup/cpu acct"));
        assert_eq!(mounts[3].root, "/docker/abc");

        let proc_cgroup =
            "12:cpu,cpuacct:/docker/abc/x\n3:cpuset:/\n0::/system.slice/splitprover.service\n";
        assert_eq!(
            cgroup_path_in(proc_cgroup, true, "").as_deref(),
            Some("/system.slice/splitprover.service")
        );
        assert_eq!(
            cgroup_path_in(proc_cgroup, false, "cpuset").as_deref(),
            Some("/")
        );
        assert_eq!(
            cgroup_path_in(proc_cgroup, false, "cpuacct").as_deref(),
            Some("/docker/abc/x")
        );
        assert_eq!(cgroup_path_in("3:cpuset:/\n", true, ""), None);

        assert_eq!(
            cgroup_dir(&mounts[1], "/system.slice/splitprover.service").unwrap(),
            Path::new("/sys/fs/cgroup/unified/system.slice/splitprover.service")
        );
        assert_eq!(
            cgroup_dir(&mounts[2], "/").unwrap().as_os_str(),
            "/sys/fs/cgroup/cpuset"
        );
        assert_eq!(
            cgroup_dir(&mounts[3], "/docker/abc/x").unwrap(),
            Path::new("/sys/fs/cgroup/cpu acct/x")
        );
        assert!(cgroup_dir(&mounts[3], "/docker/abcd").is_err());
        assert!(cgroup_dir(&mounts[3], "/other").is_err());
        assert!(cgroup_dir(&mounts[1], "/../x").is_err());
    }

    #[test]
    fn formats_pids_without_allocating() {
        let mut buf = [0u8; 10];
        assert_eq!(format_decimal(0, &mut buf), b"0");
        assert_eq!(format_decimal(7, &mut buf), b"7");
        assert_eq!(format_decimal(4_194_304, &mut buf), b"4194304");
        assert_eq!(format_decimal(u32::MAX, &mut buf), b"4294967295");
    }

    #[test]
    fn names_must_be_cgroup_safe() {
        for good in ["synth", "gpu0", "it-v1_a"] {
            check_name(good).unwrap();
        }
        for bad in [
            "",
            "Synth",
            "a/b",
            "..",
            "cgroup.procs",
            "a b",
            &"x".repeat(65),
        ] {
            let err = check_name(bad).unwrap_err();
            assert!(
                matches!(err.kind(), ErrorKind::InvalidName { .. }),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn removes_only_empty_groups_of_dead_launchers() {
        let root =
            std::env::temp_dir().join(format!("splitprover-stale-test-{}", std::process::id()));
        // 4194305 is above the kernel's largest pid_max, so no such process can exist.
        let dead = root.join(format!("{GROUP_PREFIX}4194305"));
        let mine = root.join(group_name());
        let other = root.join("something-else");
        for d in [
            dead.join("synth"),
            dead.join("gpu0"),
            mine.join("synth"),
            other.clone(),
        ] {
            fs::create_dir_all(d).unwrap();
        }
        assert_eq!(remove_stale_groups_in(&root).unwrap(), 1);
        assert!(!dead.exists());
        assert!(mine.join("synth").exists() && other.exists());
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn this_process_has_online_allowed_cpus() {
        let online = CpuList::online().unwrap();
        let allowed = CpuList::allowed().unwrap();
        assert!(!allowed.is_empty());
        assert!(
            allowed.is_subset(&online),
            "allowed {allowed} online {online}"
        );
        assert_eq!(verify(std::process::id()).unwrap(), allowed);
    }
}
