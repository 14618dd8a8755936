//! How children are pinned on this host: [`PinKind`], [`PinChoice`], [`PinMode`], and the
//! probing of cgroup v2, the cgroup v1 `cpuset` hierarchy and the `sched_setaffinity` fallback
//! (`/proc/self/mountinfo`, `/proc/self/cgroup`). Probing changes nothing on the host; the
//! cgroups are made in `placement`.

use std::ffi::CString;
use std::fmt;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Mutex;

use super::error::io_err;
use super::{CpuList, Error, ErrorKind, Result};

/// Name of the leaf cgroup v2 that the launcher moves itself into (see the module docs).
pub const LAUNCHER_LEAF: &str = "launcher";

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
pub(super) fn cgroup_path_in(proc_cgroup: &str, v2: bool, controller: &str) -> Option<String> {
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

pub(super) fn has_word(text: &str, word: &str) -> bool {
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
pub(super) fn is_true_v2_root(dir: &Path) -> bool {
    !dir.join("cgroup.type").exists()
}

pub(super) fn parse_pids(text: &str) -> Vec<u32> {
    text.split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

pub(super) fn parent_pid(pid: u32) -> Option<u32> {
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

/// Prefix of the per-launcher group of cgroups: `splitprover-<pid>`.
pub const GROUP_PREFIX: &str = "splitprover-";

/// Serialises creating and removing the shared `splitprover-<pid>` group (and the v2 setup) so
/// that one placement's cleanup cannot remove the group while another is being made in it.
pub(super) fn group_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    // A panic while holding the lock leaves no broken state behind (the file system is the
    // state), so a poisoned lock is still usable.
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Removes the `splitprover-<pid>` groups under `root` whose launcher is gone; returns how many.
pub(super) fn remove_stale_groups_in(root: &Path) -> Result<usize> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
