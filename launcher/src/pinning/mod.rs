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
//! use launcher::pinning::{CpuList, Layout, PinMode, Placement};
//! use std::process::Command;
//!
//! # fn main() -> Result<(), launcher::pinning::Error> {
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
//!
//! # Files
//!
//! - `cpulist`: [`CpuList`], the kernel's cpu list syntax, and the reads of the cpus a process
//!   may use (online cpus, `sched_getaffinity`, `/proc/PID/status`);
//! - `layout`: [`Layout`], which cpus go to synth-proc and to each gpu-proc;
//! - `cgroup`: [`PinKind`], [`PinChoice`], [`PinMode`] and the probing of cgroup v2, cgroup v1
//!   and the affinity fallback;
//! - `placement`: [`Placement`], the cgroups made for the children and the `pre_exec` hook that
//!   places a child before `exec`;
//! - `error`: [`Error`], [`ErrorKind`] and the file helpers that produce them.

mod cgroup;
mod cpulist;
mod error;
mod layout;
mod placement;

pub use cgroup::GROUP_PREFIX;
pub use cgroup::{PinChoice, PinKind, PinMode, LAUNCHER_LEAF};
pub use cpulist::{verify, CpuList, MAX_CPUS};
pub use error::{Error, ErrorKind, Result};
pub use layout::{default_gpu_cores, Layout};
pub use placement::Placement;
