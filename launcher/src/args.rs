//! The command-line arguments every pipeline-starting command shares (`demo`, `prove`, `bench`),
//! as a clap group to flatten into a command's own arguments; [`crate::settings`] resolves them.

use std::path::PathBuf;

use clap::Args;

/// Options every pipeline-starting command shares.
#[derive(Debug, Args, Clone)]
pub struct PipelineArgs {
    /// Prover backend of the gpu-proc: `cpu`, `gpu` (our CUDA prover, SRS resident on the
    /// device) or `cuda` (supraseal-c2).
    #[arg(long, default_value = "cpu")]
    pub backend: shm_protocol::control::BackendKind,
    /// Number of gpu-procs (one per GPU).
    #[arg(long, default_value_t = 1)]
    pub gpus: usize,
    /// Cores given to each gpu-proc, the rest go to synth-proc (default: by backend, see
    /// `launcher::pinning::default_gpu_cores`: 1 for `gpu`).
    #[arg(long)]
    pub gpu_cores: Option<usize>,
    /// Circuits proved together in one backend call.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Partitions synthesized at once (0: one per synth-proc core).
    #[arg(long, default_value_t = 0)]
    pub synth_concurrency: usize,
    /// Partitions handed to synth-proc beyond its concurrency (default: its concurrency).
    #[arg(long)]
    pub synth_lookahead: Option<usize>,
    /// Ring slots.
    #[arg(long, default_value_t = 4)]
    pub slots: usize,
    /// Huge pages for the ring: `auto`, `1g`, `2m`, `thp`, `none`.
    #[arg(long, default_value = "auto")]
    pub huge_pages: String,
    /// Pinning: `auto`, `cgroup-v2`, `cgroup-v1`, `affinity`.
    #[arg(long, default_value = "auto")]
    pub pin: String,
    /// Directory for generated SRS files.
    #[arg(long, env = crate::env::SPLITPROVER_CACHE_DIR)]
    pub cache_dir: Option<PathBuf>,
    /// How partitions are synthesized: `precompiled` (the circuit's constraint matrices recorded
    /// once and cached, then per proof the witness and three sparse products) or `full` (every
    /// linear combination built and evaluated, as bellperson does). The same bytes either way.
    #[arg(long, value_enum, default_value = "precompiled")]
    pub synthesis: SynthesisMode,
    /// Witness-only slots for the pre-compiled circuits: synth-proc writes the inputs and the
    /// aux values (bits packed) only, and the gpu-procs compute a, b, c from the matrices (the
    /// `gpu` backend on the device, the others on the host). Slots many times smaller, the same
    /// proofs.
    #[arg(long)]
    pub witness_slots: bool,
    /// Device memory each gpu-proc of the `gpu` backend may take (`24GiB`, bytes); default:
    /// what the device has free at start.
    #[arg(long)]
    pub gpu_memory_budget: Option<crate::config::ByteSize>,
}

/// `--synthesis`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SynthesisMode {
    /// Through pre-compiled constraint matrices.
    Precompiled,
    /// Every linear combination built and evaluated.
    Full,
}
