//! The errors of [`Pipeline`](super::Pipeline): starting it, driving its children and accepting
//! jobs. Everything that happens to an accepted job arrives as its `JobOutcome` instead.

use std::path::PathBuf;
use std::time::Duration;

use kernels::circuits::AnyCircuit;

use super::core::{Refusal, Role};
use crate::srs::SrsError;

/// An error of the pipeline's API. The variants name the circuit, child, file or limit at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// The settings list no circuit.
    #[error("no circuit to serve")]
    NoCircuit,
    /// A cancel named a job that is not live (unknown, or already ended).
    #[error("job {0} is not queued or running (unknown, or already ended)")]
    UnknownJob(u64),
    /// A submission gave the id of a live job ([`JobOptions::id`](super::JobOptions)).
    #[error("job id {0} is taken: a job with it is queued or running")]
    JobIdTaken(u64),
    /// A priority off cuzk's scale.
    #[error("priority {0} is not on the scale (0 = the kind's default, 1 LOW … 4 CRITICAL)")]
    BadPriority(i64),
    /// The settings list no gpu-proc.
    #[error("no gpu-proc configured")]
    NoGpu,
    /// A circuit could not be counted or identified.
    #[error("circuit `{spec}`: {cause}")]
    Circuit {
        /// The circuit.
        spec: AnyCircuit,
        /// Why.
        cause: kernels::Error,
    },
    /// A circuit's slot size overflows.
    #[error("circuit `{0}` is too large for a slot")]
    SlotOverflow(AnyCircuit),
    /// An SRS could not be found, generated or loaded.
    #[error(transparent)]
    Srs(#[from] SrsError),
    /// An explicit slot size is below what the largest circuit needs.
    #[error("slot_bytes {explicit} is smaller than the {need} bytes the largest circuit needs")]
    SlotTooSmall {
        /// The configured size.
        explicit: u64,
        /// What the largest circuit needs.
        need: u64,
    },
    /// More slots than a ring can index.
    #[error("too many slots ({0})")]
    TooManySlots(usize),
    /// The ring could not be created or laid out.
    #[error("cannot create the ring: {0}")]
    Ring(shm_protocol::Error),
    /// Pinning: the mode, the cpu layout or a placement.
    #[error(transparent)]
    Pinning(#[from] crate::pinning::Error),
    /// Explicit synth-proc cores without explicit gpu-proc cores.
    #[error("with explicit synth cores every gpu-proc needs explicit cores too")]
    PartialLayout,
    /// The automatic layout does not fit the cpus.
    #[error("{0}\nhint: lower --gpu-cores or give explicit cpu lists")]
    Layout(crate::pinning::Error),
    /// A CUDA gpu-proc would get one core.
    #[error(
        "gpu-proc[{device}] would run on 1 core; the cuda backend needs at least 2\n\
         hint: raise --gpu-cores (config: [cpus] gpu_cores)"
    )]
    CudaOneCore {
        /// The device.
        device: u32,
    },
    /// The configuration does not fit the host's memory (the model and the numbers).
    #[error("{0}")]
    Memory(super::memory::MemoryRefusal),
    /// An operating-system call of the launcher failed.
    #[error("{what}: {cause}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// Why.
        cause: std::io::Error,
    },
    /// The request could not be put into shared memory for synth-proc.
    #[error("cannot hand the request to synth-proc: {0}")]
    Handoff(shm_protocol::Error),
    /// A child's control socket refused a message.
    #[error("cannot reach {role}: {cause}")]
    Unreachable {
        /// The child.
        role: Role,
        /// Why.
        cause: std::io::Error,
    },
    /// The gpu-procs did not confirm a pause in time.
    #[error("the gpu-procs did not pause within {0:?}")]
    PauseTimeout(Duration),
    /// The children did not all say hello in time.
    #[error("the children did not start within {0:?}")]
    StartTimeout(Duration),
    /// The pipeline gave up (a child could not be kept running): it proves nothing more.
    #[error("the pipeline cannot prove: {0}")]
    Fatal(String),
    /// The pipeline stopped while a job was waited for.
    #[error("the pipeline stopped before the job finished")]
    Stopped,
    /// A circuit spec could not be parsed.
    #[error("bad circuit spec `{spec}`: {cause}")]
    BadSpec {
        /// The text.
        spec: String,
        /// Why.
        cause: kernels::Error,
    },
    /// A circuit this pipeline has no SRS for.
    #[error("{}", unserved(.0))]
    Unserved(AnyCircuit),
    /// A Filecoin circuit given a seed instead of a request.
    #[error(
        "circuit `{0}` is proved from a proof request file (C1 output, PoSt or SnapDeals request), \
         not a seed"
    )]
    NotSeeded(AnyCircuit),
    /// The job's request was refused (parse error, bad vanilla proofs, wrong partition range).
    #[error(transparent)]
    Request(kernels::Error),
    /// A job with more partitions than a job can have.
    #[error("too many partitions ({0})")]
    TooManyPartitions(usize),
    /// A job asks for more partitions than its circuit family allows here.
    #[error(
        "too many partitions: a job of `{circuit}` asks for {asked} partitions; at most {max} \
         are accepted\n\
         hint: split it into several jobs (config: [faults] max_partitions)"
    )]
    PartitionLimit {
        /// The circuit.
        circuit: AnyCircuit,
        /// Partitions asked for.
        asked: usize,
        /// The limit.
        max: u32,
    },
    /// A job's request is larger than [`FaultSettings::max_request_bytes`](super::FaultSettings).
    #[error(
        "request of {bytes} bytes: more than the {max} accepted (`max_request_bytes` in [faults])"
    )]
    RequestTooLarge {
        /// Its size.
        bytes: usize,
        /// The limit.
        max: u64,
    },
    /// A request file was refused (not a regular file, too large, changed while read).
    #[error(transparent)]
    RequestFileRefused(crate::request_file::RequestFileError),
    /// A Filecoin request file could not be read or was refused.
    #[error("proof request `{}`: {cause}", path.display())]
    RequestFile {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: Box<PipelineError>,
    },
    /// A preload or evict named no circuit this pipeline was configured with.
    #[error(
        "no configured circuit is named `{id}`\n\
         hint: use one of: {configured} (an SRS is loaded only for a configured circuit)"
    )]
    UnknownSrs {
        /// The name asked for.
        id: String,
        /// The names of the configured circuits.
        configured: String,
    },
    /// An evict while jobs of the circuit are live.
    #[error(
        "cannot evict the SRS of `{circuit}`: {jobs} live job(s) use it\n\
         hint: wait until they finish, or cancel them"
    )]
    SrsInUse {
        /// The circuit.
        circuit: AnyCircuit,
        /// Its live jobs.
        jobs: u32,
    },
    /// A gpu-proc could not map an SRS it was sent.
    #[error("{role} cannot load the SRS of `{circuit}`: {cause}")]
    SrsRefused {
        /// The gpu-proc.
        role: Role,
        /// The circuit.
        circuit: AnyCircuit,
        /// What it answered.
        cause: String,
    },
    /// The gpu-procs did not confirm an SRS load or evict in time.
    #[error(
        "the gpu-procs did not confirm the {action} of the SRS of `{circuit}` within {timeout:?}"
    )]
    SrsTimeout {
        /// `load` or `evict`.
        action: &'static str,
        /// The circuit.
        circuit: AnyCircuit,
        /// How long it waited.
        timeout: Duration,
    },
}

fn unserved(circuit: &AnyCircuit) -> String {
    match circuit {
        AnyCircuit::Builtin(_) => format!(
            "this pipeline has no SRS for circuit `{circuit}`\n\
             hint: add it to the config's [[circuit]] list"
        ),
        AnyCircuit::Filecoin(_) => format!(
            "this pipeline has no parameters for `{circuit}` (the request's proof type)\n\
             hint: add `[[circuit]] spec = \"{circuit}\"` to the config"
        ),
    }
}

impl From<Refusal> for PipelineError {
    fn from(r: Refusal) -> PipelineError {
        match r {
            Refusal::Fatal(why) => PipelineError::Fatal(why),
            Refusal::JobIdTaken(id) => PipelineError::JobIdTaken(id),
            Refusal::UnknownJob(id) => PipelineError::UnknownJob(id),
            Refusal::SrsInUse { circuit, jobs } => PipelineError::SrsInUse { circuit, jobs },
            Refusal::Unserved(circuit) => PipelineError::Unserved(circuit),
        }
    }
}
