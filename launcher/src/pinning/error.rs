//! The errors of cpu lists, layouts and placement, and the small file helpers that produce them.

use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use super::{CpuList, PinKind};

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

pub(super) fn io_err(action: &'static str, path: &Path, source: io::Error) -> Error {
    ErrorKind::Io {
        action,
        path: path.to_owned(),
        source,
    }
    .into()
}

pub(super) fn read_text(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|e| io_err("read", path, e))
}

pub(super) fn write_text(path: &Path, text: &str) -> Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| io_err("open for writing", path, e))?;
    file.write_all(text.as_bytes())
        .map_err(|e| io_err("write", path, e))
}
