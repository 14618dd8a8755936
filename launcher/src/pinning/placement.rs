//! [`Placement`]: a role's cgroup made and configured on the host, and the `pre_exec` hook that
//! places a child (joins the cgroup, sets the affinity) between `fork` and `exec`.

use std::ffi::CString;
use std::fmt;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use super::cgroup::{
    cgroup_path_in, group_lock, has_word, is_true_v2_root, parent_pid, parse_pids,
    remove_stale_groups_in, GROUP_PREFIX,
};
use super::error::{io_err, read_text, write_text};
use super::{verify, CpuList, Error, ErrorKind, PinKind, PinMode, Result, LAUNCHER_LEAF};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
