//! Fault injection for tests: which faults a child process should provoke, read from the
//! [`FAULT_ENV`] environment variable.
//!
//! The parsing lives here, shared by both children; only binaries built with their
//! `fault-injection` cargo feature act on it (the launcher enables that feature from its
//! `[dev-dependencies]`, so `cargo test` binaries have it and release builds do not: there the
//! variable is ignored). The launcher passes the variable to its children like any other
//! environment variable.
//!
//! The value is a `;`-separated list of `KIND@KEY=N`:
//! - `gpu-hang`: gpu-proc blocks forever inside the proof of a matching slot (its heartbeat
//!   thread keeps beating: only a progress deadline can catch it);
//! - `gpu-abort`: gpu-proc dies (SIGKILL, no core file) when it claims a matching slot, every
//!   time;
//! - `synth-panic`: the synthesis of a matching partition panics;
//! - `synth-hang`: the synthesis of a matching partition blocks forever after taking its slot
//!   (synth-proc's heartbeat thread keeps beating);
//! - `synth-mislabel`: synth-proc writes a matching partition's slot metadata with a job id that
//!   is not its job's (the job id + 1,000,000), as a buggy or hostile child could;
//! - `dispatcher-panic`: the launcher's dispatcher thread panics when a matching partition is
//!   published (the launcher acts on it itself, when built with this crate's `fault-injection`
//!   feature: [`ENABLED`]).
//!
//! `KEY` is `job` (the job id) or `partition` (a partition index, of any job); `@any` matches
//! everything. Example: `SPLITPROVER_FAULT="gpu-abort@partition=1;synth-panic@job=3"`.

/// The environment variable the children read.
pub const FAULT_ENV: &str = "SPLITPROVER_FAULT";

/// Whether this build acts on the faults meant for the launcher itself (`dispatcher-panic`):
/// this crate's `fault-injection` feature, enabled only from the launcher's
/// `[dev-dependencies]`, so a release launcher ignores them.
pub const ENABLED: bool = cfg!(feature = "fault-injection");

/// What to provoke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// gpu-proc blocks forever in a proof.
    GpuHang,
    /// gpu-proc dies.
    GpuAbort,
    /// A synthesis panics.
    SynthPanic,
    /// A synthesis blocks forever.
    SynthHang,
    /// A slot's metadata names another job.
    SynthMislabel,
    /// The launcher's dispatcher thread panics.
    DispatcherPanic,
}

/// Which partitions a fault applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultTarget {
    /// Every partition of this job.
    Job(u64),
    /// This partition of every job.
    Partition(u32),
    /// Everything.
    Any,
}

/// One fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// What.
    pub kind: FaultKind,
    /// Where.
    pub target: FaultTarget,
}

/// The faults a process was asked to provoke.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults(Vec<Fault>);

impl Faults {
    /// Parses a [`FAULT_ENV`] value; an unknown entry is an error naming it.
    pub fn parse(text: &str) -> Result<Faults, String> {
        let mut out = Vec::new();
        for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
            let (kind, target) = entry
                .split_once('@')
                .ok_or_else(|| format!("fault `{entry}`: expected KIND@KEY=N"))?;
            let kind = match kind {
                "gpu-hang" => FaultKind::GpuHang,
                "gpu-abort" => FaultKind::GpuAbort,
                "synth-panic" => FaultKind::SynthPanic,
                "synth-hang" => FaultKind::SynthHang,
                "synth-mislabel" => FaultKind::SynthMislabel,
                "dispatcher-panic" => FaultKind::DispatcherPanic,
                other => return Err(format!("fault `{entry}`: unknown kind `{other}`")),
            };
            let bad = |what: &str| format!("fault `{entry}`: {what}");
            let target = match target.split_once('=') {
                None if target == "any" => FaultTarget::Any,
                Some(("job", n)) => FaultTarget::Job(n.parse().map_err(|_| bad("bad job id"))?),
                Some(("partition", n)) => {
                    FaultTarget::Partition(n.parse().map_err(|_| bad("bad partition"))?)
                }
                _ => return Err(bad("expected job=N, partition=N or any")),
            };
            out.push(Fault { kind, target });
        }
        Ok(Faults(out))
    }

    /// The faults in [`FAULT_ENV`] (none when unset); a bad value is logged and ignored.
    pub fn from_env() -> Faults {
        match std::env::var(FAULT_ENV) {
            Ok(v) => Faults::parse(&v).unwrap_or_else(|e| {
                tracing::error!("{FAULT_ENV}: {e}; no fault injected");
                Faults::default()
            }),
            Err(_) => Faults::default(),
        }
    }

    /// Whether a fault of `kind` applies to partition `partition` of job `job_id`.
    pub fn hits(&self, kind: FaultKind, job_id: u64, partition: u32) -> bool {
        self.0.iter().any(|f| {
            f.kind == kind
                && match f.target {
                    FaultTarget::Job(j) => j == job_id,
                    FaultTarget::Partition(p) => p == partition,
                    FaultTarget::Any => true,
                }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_lists_parse_and_match() {
        let f = Faults::parse("gpu-hang@job=2; synth-panic@partition=1;gpu-abort@any").unwrap();
        assert!(f.hits(FaultKind::GpuHang, 2, 7));
        assert!(!f.hits(FaultKind::GpuHang, 3, 7));
        assert!(f.hits(FaultKind::SynthPanic, 9, 1));
        assert!(!f.hits(FaultKind::SynthPanic, 9, 0));
        assert!(f.hits(FaultKind::GpuAbort, 1, 0));
        let m = Faults::parse("synth-mislabel@job=4").unwrap();
        assert!(m.hits(FaultKind::SynthMislabel, 4, 0));
        assert!(!m.hits(FaultKind::SynthPanic, 4, 0));
        let d = Faults::parse("dispatcher-panic@job=1").unwrap();
        assert!(d.hits(FaultKind::DispatcherPanic, 1, 0));
        assert!(Faults::parse("gpu-melt@job=1")
            .unwrap_err()
            .contains("gpu-melt"));
        assert!(Faults::parse("gpu-hang@job=x").is_err());
        assert_eq!(Faults::parse("").unwrap(), Faults::default());
    }
}
