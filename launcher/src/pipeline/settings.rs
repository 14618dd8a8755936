//! The pipeline's settings: everything [`Pipeline::start`](super::Pipeline::start) needs,
//! resolved from flags or a config file before any work starts (`crate::settings`), and the
//! options of one job.

use std::path::PathBuf;
use std::time::Duration;

use kernels::circuits::AnyCircuit;
use shm_protocol::control::BackendKind;
use shm_protocol::HugePagePolicy;

use super::child::RestartPolicy;
use super::core::FaultSettings;
#[cfg(doc)]
use super::{memory, Pipeline, PRIORITY_CRITICAL, PRIORITY_LOW, PRIORITY_UNSPECIFIED};
use super::{PipelineError, Result};
use crate::pinning::{CpuList, PinChoice};

/// One circuit the pipeline serves.
#[derive(Clone, Debug)]
pub struct CircuitSetting {
    /// The circuit (built-in, or a Filecoin proof kind).
    pub spec: AnyCircuit,
    /// Its SRS file (bellperson `Parameters` format).
    pub params: PathBuf,
    /// Ring slots of this circuit's own size, besides the shared slots (which the largest
    /// circuit sizes): a small circuit served beside a large one gets slots that fit it, so
    /// its partitions do not take large slots (they spill into those only when their own are
    /// all busy). 0: none.
    pub slots: usize,
}

/// One gpu-proc.
#[derive(Clone, Debug)]
pub struct GpuSetting {
    /// Device index.
    pub device: u32,
    /// The prover backend.
    pub backend: BackendKind,
    /// Slots proved per backend call, at most.
    pub batch: usize,
    /// Explicit cores (else the automatic layout decides).
    pub cpus: Option<CpuList>,
    /// Device memory the `gpu` backend may take, bytes; `None`: what the device has free.
    pub memory_budget: Option<u64>,
}

/// Everything [`Pipeline::start`] needs, resolved from flags or a config file.
#[derive(Clone, Debug)]
pub struct PipelineSettings {
    /// Program run for the children (the `splitprover` binary, with a hidden subcommand).
    pub program: PathBuf,
    /// Circuits served.
    pub circuits: Vec<CircuitSetting>,
    /// Shared ring slots, sized for the largest circuit (more of other sizes:
    /// [`CircuitSetting::slots`]).
    pub slots: usize,
    /// Bytes per shared slot (default: what the largest circuit needs).
    pub slot_bytes: Option<u64>,
    /// Huge pages for the ring and the SRS.
    pub huge_pages: HugePagePolicy,
    /// Pinning mode.
    pub pin: PinChoice,
    /// Cores per gpu-proc in the automatic layout.
    pub gpu_cores: usize,
    /// Explicit synth-proc cores.
    pub synth_cpus: Option<CpuList>,
    /// The gpu-procs.
    pub gpus: Vec<GpuSetting>,
    /// Partitions synthesized at once; 0: one per synth-proc core.
    pub synth_concurrency: usize,
    /// Partitions handed to synth-proc beyond `synth_concurrency` (queued there so a worker
    /// never waits for the launcher); `None`: as many as `synth_concurrency`.
    pub synth_lookahead: Option<usize>,
    /// Restart rules.
    pub restart: RestartPolicy,
    /// Verify every proof before handing it out.
    pub verify: bool,
    /// Threads checking proofs, off the pipeline's lock (`verify`); 0: two, or one on a one-core
    /// host.
    pub verify_threads: usize,
    /// A child silent for this long (children beat every second) is killed and restarted: a hung
    /// GPU call or a stopped process must not hold its slots forever.
    pub heartbeat_timeout: Duration,
    /// Deadlines, attempts and limits.
    pub faults: FaultSettings,
    /// Extra environment of every child (tests pass `SPLITPROVER_FAULT` here,
    /// `shm_protocol::fault`).
    pub child_env: Vec<(String, String)>,
    /// Pre-compiled constraint systems: used or not, cached where, within what budget.
    pub synthesis: crate::r1cs::SynthesisSettings,
    /// Refuse at start a configuration whose memory model does not fit the host
    /// ([`memory`]).
    pub memory_check: bool,
}

impl PipelineSettings {
    /// Settings for one circuit with defaults everywhere else; `program` is this executable.
    pub fn for_circuit(spec: impl Into<AnyCircuit>, params: PathBuf) -> Result<PipelineSettings> {
        Ok(PipelineSettings {
            program: std::env::current_exe().map_err(|source| PipelineError::Io {
                what: "cannot find the splitprover executable",
                cause: source,
            })?,
            circuits: vec![CircuitSetting {
                spec: spec.into(),
                params,
                slots: 0,
            }],
            slots: 4,
            slot_bytes: None,
            huge_pages: HugePagePolicy::Auto,
            pin: PinChoice::Auto,
            gpu_cores: 1,
            synth_cpus: None,
            gpus: vec![GpuSetting {
                device: 0,
                backend: BackendKind::Cpu,
                batch: 1,
                cpus: None,
                memory_budget: None,
            }],
            synth_concurrency: 1,
            synth_lookahead: None,
            restart: RestartPolicy::default(),
            verify: true,
            verify_threads: 0,
            heartbeat_timeout: Duration::from_secs(60),
            faults: FaultSettings::default(),
            child_env: Vec::new(),
            synthesis: crate::r1cs::SynthesisSettings::default(),
            memory_check: true,
        })
    }
}

/// How a job is run ([`Pipeline::submit_job_with`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobOptions {
    /// cuzk's scale: [`PRIORITY_LOW`] 1 … [`PRIORITY_CRITICAL`] 4; [`PRIORITY_UNSPECIFIED`] 0
    /// takes the kind's default (WinningPoSt CRITICAL, WindowPoSt HIGH, everything else
    /// NORMAL). Higher priority partitions are handed to synth-proc first.
    pub priority: i32,
    /// The job's id, given by a caller that owns ids (the service: its journal's); `None`:
    /// the next automatic one. A given id is never given twice; one that is live is refused
    /// ([`PipelineError::JobIdTaken`](super::PipelineError::JobIdTaken)).
    pub id: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::FaultSettings;
    use std::time::Duration;

    #[test]
    fn deadlines_scale_with_the_measured_time_and_never_drop_below_the_floor() {
        let f = FaultSettings {
            deadline_factor: 4.0,
            deadline_floor: Duration::from_secs(10),
            ..FaultSettings::default()
        };
        let first = Duration::from_secs(99);
        assert_eq!(f.deadline(None, 3, first), first);
        assert_eq!(
            f.deadline(Some(Duration::from_secs(1)), 1, first),
            Duration::from_secs(10)
        );
        assert_eq!(
            f.deadline(Some(Duration::from_secs(2)), 3, first),
            Duration::from_secs(24)
        );
    }
}
