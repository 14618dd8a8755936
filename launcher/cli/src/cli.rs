//! The `splitprover` command line as clap parses it: one variant per subcommand with its
//! arguments, each resolved into plain settings before any work starts; [`crate::run`] hands it
//! to its module: under `commands/`, or for the measuring subcommands (`bench`, `report`,
//! `synth-bench`, `hog`) under `splitprover_bench::commands`, whose arguments the enum embeds.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use launcher::args::PipelineArgs;
use splitprover_bench::commands::bench::{BenchArgs, HogArgs};
use splitprover_bench::commands::report::ReportArgs;
use splitprover_bench::commands::synth_bench::SynthBenchArgs;

/// splitprover: Groth16 proving split into a synthesis process and GPU processes that hand
/// circuits over through a huge-page shared-memory ring.
#[derive(Debug, Parser)]
#[command(name = "splitprover", version, about, long_about = None)]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Prove a handful of jobs through the split pipeline on the embedded default (CPU backend,
    /// built-in SHA-256 chain, locally generated SRS), verify them, print a summary.
    Demo(DemoArgs),
    /// Prove one job through the split pipeline and write its proof.
    Prove(ProveArgs),
    /// Measure monolithic, in-process and split proving on the same circuit, in one run; sweep
    /// layouts, synthesis and client concurrency, with and without a noisy neighbour.
    Bench(Box<BenchArgs>),
    /// Render what a bench wrote into a directory: tables, SVG charts, waterfalls side by side.
    Report(ReportArgs),
    /// Time one synthesis per circuit, full against pre-compiled, per core and on more cores.
    SynthBench(SynthBenchArgs),
    /// Measure circuits without a witness: shape, densities, and what each takes in memory
    /// (pre-compiled matrices, SRS image, ring slot), to size a host before generating anything.
    Shape(ShapeArgs),
    /// Run the long-lived service from a config file.
    Run(RunArgs),
    /// Send a job to a running service.
    Submit(SubmitArgs),
    /// Get the result of a job the service accepted (also after the service restarted).
    Fetch(FetchArgs),
    /// Cancel a job the service accepted that has not ended (no proof is delivered).
    Cancel(CancelArgs),
    /// Show a running service: processes, cpusets, huge pages, slots, jobs.
    Status(StatusArgs),
    /// SRS (Groth16 parameters) tools.
    #[command(subcommand)]
    Srs(SrsCommand),
    /// Filecoin parameters in the parameter cache (official file names).
    #[cfg(feature = "filecoin")]
    #[command(subcommand)]
    Params(ParamsCommand),
    /// Check a PoRep C2 proof with filecoin-proofs' own `verify_seal`, against the C1 output it
    /// was proved from.
    #[cfg(feature = "filecoin")]
    Verify(VerifyArgs),
    /// Write a valid PoRep C1 output of a committed-capacity sector of any size in seconds,
    /// without sealing (test and benchmark data: the replica does not exist), in the JSON Curio
    /// sends.
    #[cfg(feature = "filecoin")]
    #[command(name = "sparse-c1")]
    SparseC1(SparseC1Args),
    /// Internal: run as synth-proc (started by the launcher).
    #[command(name = "synth-proc", hide = true)]
    SynthProc,
    /// Internal: run as gpu-proc (started by the launcher).
    #[command(name = "gpu-proc", hide = true)]
    GpuProc,
    /// Internal: the bench's noisy neighbour, a memory-bandwidth and cache hog.
    #[command(hide = true)]
    Hog(HogArgs),
}

/// `splitprover demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Built-in circuit to prove.
    #[arg(long, default_value = "sha-chain:1")]
    pub circuit: String,
    /// Number of jobs.
    #[arg(short = 'n', long, default_value_t = 4)]
    pub jobs: usize,
    /// Pipeline options.
    #[command(flatten)]
    pub pipeline: PipelineArgs,
}

/// A Filecoin proof request to prove instead of a built-in circuit.
#[derive(Debug, Args, Clone, Default)]
pub struct RequestArgs {
    /// PoRep C2 from this C1 output (filecoin-proofs-api `SealCommitPhase1Output` JSON as lotus
    /// and Curio write it, lotus-bench `Commit2In`, or filecoin-proofs' own form with
    /// --proof-type).
    #[arg(long, value_name = "C1_JSON", conflicts_with_all = ["post", "snap", "circuit"])]
    pub porep_c1: Option<PathBuf>,
    /// WinningPoSt or WindowPoSt from this PoSt request (registered proof, prover id,
    /// randomness, vanilla proofs).
    #[arg(long, value_name = "REQUEST_JSON", conflicts_with_all = ["snap", "circuit"])]
    pub post: Option<PathBuf>,
    /// SnapDeals (empty sector update) from this request (registered update proof, commitments,
    /// partition vanilla proofs).
    #[arg(long, value_name = "REQUEST_JSON", conflicts_with = "circuit")]
    pub snap: Option<PathBuf>,
    /// The proof kind (`porep:StackedDrg32GiBV1_1`), for a request that does not name it.
    #[arg(long)]
    pub proof_type: Option<String>,
}

impl RequestArgs {
    /// The request file given, if any.
    pub fn request_file(&self) -> Option<&PathBuf> {
        self.porep_c1
            .as_ref()
            .or(self.post.as_ref())
            .or(self.snap.as_ref())
    }

    /// The family the flag given promises (`porep`, `post`, `snap`).
    pub fn family(&self) -> Option<&'static str> {
        if self.porep_c1.is_some() {
            Some("porep")
        } else if self.post.is_some() {
            Some("post")
        } else if self.snap.is_some() {
            Some("snap")
        } else {
            None
        }
    }
}

/// `splitprover prove`.
#[derive(Debug, Args)]
pub struct ProveArgs {
    /// Circuit spec (`sha-chain:38`, `pubinputs:8`, `bits:4096`).
    #[arg(long, required_unless_present_any = ["porep_c1", "post", "snap"])]
    pub circuit: Option<String>,
    /// A Filecoin proof request instead of a built-in circuit.
    #[command(flatten)]
    pub request: RequestArgs,
    /// Filecoin parameter cache dir (official `v28-*.params` names).
    #[arg(long, env = launcher::env::FIL_PROOFS_PARAMETER_CACHE)]
    pub param_cache: Option<PathBuf>,
    /// SRS file (bellperson `Parameters` format); default: the cache, generated if missing.
    #[arg(long)]
    pub srs: Option<PathBuf>,
    /// Witness seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Partitions (independent circuits) in the job.
    #[arg(long, default_value_t = 1)]
    pub partitions: u32,
    /// Where to write the proof bytes (192 bytes per partition, in order: for Filecoin requests
    /// exactly what filecoin-proofs writes); for built-in circuits the public inputs go to
    /// `<out>.inputs.json`.
    #[arg(long, short)]
    pub out: PathBuf,
    /// Pipeline options.
    #[command(flatten)]
    pub pipeline: PipelineArgs,
}

/// `splitprover run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Config file (TOML); see `systemd/config.example.toml`.
    #[arg(long, short)]
    pub config: PathBuf,
}

/// `splitprover submit`.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// Circuit spec.
    #[arg(long, required_unless_present_any = ["porep_c1", "post", "snap"])]
    pub circuit: Option<String>,
    /// A Filecoin proof request (read here, sent to the service) instead of a built-in circuit.
    #[command(flatten)]
    pub request: RequestArgs,
    /// Write the proof bytes here (implies --wait).
    #[arg(long, short, conflicts_with = "out_dir")]
    pub out: Option<PathBuf>,
    /// Witness seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Partitions.
    #[arg(long, default_value_t = 1)]
    pub partitions: u32,
    /// Number of jobs to send (seeds `seed`, `seed+1000`, ...).
    #[arg(long, short = 'n', default_value_t = 1)]
    pub jobs: usize,
    /// Wait for the proofs.
    #[arg(long)]
    pub wait: bool,
    /// Write each proof as `<out-dir>/job-<id>.proof` (implies --wait).
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
    /// Priority on cuzk's scale: 1 LOW, 2 NORMAL, 3 HIGH, 4 CRITICAL; 0: the kind's default
    /// (WinningPoSt CRITICAL, WindowPoSt HIGH, else NORMAL). Higher is synthesized first.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i64,
    /// The job's request id (idempotency key): sent again, it names the same job, never a
    /// second proof. Only with one job; by default the service names it `job-<n>`.
    #[arg(long)]
    pub request_id: Option<String>,
    /// The service: its Unix socket (a path or `unix:///path`) or `host:port`.
    #[arg(long, env = launcher::env::SPLITPROVER_SOCKET)]
    pub socket: Option<String>,
    /// TLS to a `host:port` service.
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Send the PoRep C1 output (a `Commit2In` JSON) as Curio's cuzk client does, in cuzk's
    /// envelope for this miner (actor) id, instead of this project's request fields.
    #[cfg(feature = "filecoin")]
    #[arg(long, requires = "porep_c1")]
    pub curio_miner_id: Option<u64>,
}

/// `splitprover fetch`.
#[derive(Debug, Args)]
pub struct FetchArgs {
    /// The job id `submit` printed (`job-7`, or `7` for it), or the request id it was sent with.
    pub job: String,
    /// Wait for the job if it is still queued (else exit 3).
    #[arg(long)]
    pub wait: bool,
    /// Write the proof bytes here (else print them as hex).
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// The service: its Unix socket (a path or `unix:///path`) or `host:port`.
    #[arg(long, env = launcher::env::SPLITPROVER_SOCKET)]
    pub socket: Option<String>,
    /// TLS to a `host:port` service.
    #[command(flatten)]
    pub tls: TlsArgs,
}

/// `splitprover cancel`.
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The job id `submit` printed (`job-7`, or `7` for it), or the request id it was sent with.
    pub job: String,
    /// The service: its Unix socket (a path or `unix:///path`) or `host:port`.
    #[arg(long, env = launcher::env::SPLITPROVER_SOCKET)]
    pub socket: Option<String>,
    /// TLS to a `host:port` service.
    #[command(flatten)]
    pub tls: TlsArgs,
}

/// `splitprover status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The service: its Unix socket (a path or `unix:///path`) or `host:port`.
    #[arg(long, env = launcher::env::SPLITPROVER_SOCKET)]
    pub socket: Option<String>,
    /// TLS to a `host:port` service.
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// TLS settings of a client command (a service whose `[service] tls` is set).
#[derive(Debug, Args)]
pub struct TlsArgs {
    /// The CA of the service's certificate (PEM); any `--tls-*` makes the client speak TLS.
    #[arg(long, env = "SPLITPROVER_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// This client's certificate (PEM), for a service that requires one.
    #[arg(long, env = "SPLITPROVER_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// This client's private key (PEM).
    #[arg(long, env = "SPLITPROVER_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// `splitprover sparse-c1`.
#[cfg(feature = "filecoin")]
#[derive(Debug, Args)]
pub struct SparseC1Args {
    /// The interactive PoRep proof type (`porep:StackedDrg32GiBV1_1`).
    #[arg(long)]
    pub proof_type: String,
    /// The sector number.
    #[arg(long)]
    pub sector_number: u64,
    /// Seed of the ticket and the challenge seed (different seeds, different sectors).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output file.
    #[arg(long, short)]
    pub out: PathBuf,
    /// `commit2in`: lotus-bench's `Commit2In` JSON, what Curio puts in cuzk's `vanilla_proof`
    /// (names the sector number and size); `api`: filecoin-proofs-api's C1 output JSON.
    #[arg(long, default_value = "commit2in", value_parser = ["commit2in", "api"])]
    pub form: String,
}

/// `splitprover verify`.
#[cfg(feature = "filecoin")]
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The C1 output the proofs were made from (filecoin-proofs-api's JSON or lotus-bench's
    /// `Commit2In`, which also names the sector number).
    #[arg(long)]
    pub porep_c1: PathBuf,
    /// C2 proof files (192 bytes per partition, as filecoin-proofs writes them).
    #[arg(required = true)]
    pub proofs: Vec<PathBuf>,
    /// The miner (actor) id the prover id is derived from, as Curio derives it.
    #[arg(long)]
    pub miner_id: u64,
    /// The sector number; needed when the C1 output is not in a `Commit2In` wrapper.
    #[arg(long)]
    pub sector_number: Option<u64>,
    /// Parameter cache dir holding the proof type's `.vk`.
    #[arg(long, env = launcher::env::FIL_PROOFS_PARAMETER_CACHE)]
    pub param_cache: Option<PathBuf>,
}

/// `splitprover srs ...`.
#[derive(Debug, Subcommand)]
pub enum SrsCommand {
    /// Generate random Groth16 parameters for a circuit (for tests and benchmarks only: the
    /// randomness is not destroyed).
    Generate {
        /// Circuit spec.
        #[arg(long)]
        circuit: String,
        /// Output file (bellperson `Parameters` format).
        #[arg(long, short)]
        out: PathBuf,
        /// Seed of the parameters (reproducible); random if absent.
        #[arg(long)]
        seed: Option<u64>,
        /// Where the fixed-base multiplications run: `cpu`, or `gpu` (a build with the `cuda`
        /// feature and a GPU; the same parameters for the same seed, minutes instead of tens of
        /// minutes from 2^24 constraints up).
        #[arg(long, default_value = "cpu")]
        device: kernels::paramgen::GenDevice,
    },
    /// Check a parameter file: format, lengths, and that it fits a circuit.
    Check {
        /// The file.
        file: PathBuf,
        /// Circuit it must fit.
        #[arg(long)]
        circuit: Option<String>,
    },
    /// Load a configured circuit's SRS into the running service (`PreloadSRS`).
    Preload {
        /// The circuit: its spec or cuzk's name (`porep-32g`).
        circuit: String,
        /// The service: its Unix socket (a path or `unix:///path`) or `host:port`.
        #[arg(long, env = launcher::env::SPLITPROVER_SOCKET)]
        socket: Option<String>,
    },
    /// Unload a configured circuit's SRS from the running service (`EvictSRS`).
    Evict {
        /// The circuit: its spec or cuzk's name (`porep-32g`).
        circuit: String,
        /// The service: its Unix socket (a path or `unix:///path`) or `host:port`.
        #[arg(long, env = launcher::env::SPLITPROVER_SOCKET)]
        socket: Option<String>,
    },
}

/// `splitprover params ...`.
#[cfg(feature = "filecoin")]
#[derive(Debug, Subcommand)]
pub enum ParamsCommand {
    /// Generate local test parameters (`.params`, `.vk`, `.meta`) for a Filecoin proof kind with
    /// the fast generator, under the official names. For tests and benchmarks only: the
    /// randomness is not destroyed, and production parameters come from the Filecoin trusted
    /// setup.
    Generate {
        /// Proof kinds: `porep:StackedDrg2KiBV1_1`, `post:StackedDrgWinning2KiBV1`,
        /// `post:StackedDrgWindow2KiBV1_2`, `snap:StackedDrg2KiBV1`, ...
        #[arg(required = true)]
        kinds: Vec<String>,
        /// Parameter cache dir.
        #[arg(long, env = launcher::env::FIL_PROOFS_PARAMETER_CACHE)]
        param_cache: Option<PathBuf>,
        /// Seed of the parameters (reproducible); random if absent.
        #[arg(long)]
        seed: Option<u64>,
        /// Replace files that are already there.
        #[arg(long)]
        force: bool,
        /// Where the fixed-base multiplications run: `cpu`, or `gpu` (a build with the `cuda`
        /// feature and a GPU; the same files for the same seed, minutes instead of hours for
        /// 32 GiB sectors).
        #[arg(long, default_value = "cpu")]
        device: kernels::paramgen::GenDevice,
    },
    /// Check the parameters of proof kinds: present, well-formed, fitting the circuit.
    Check {
        /// Proof kinds.
        #[arg(required = true)]
        kinds: Vec<String>,
        /// Parameter cache dir.
        #[arg(long, env = launcher::env::FIL_PROOFS_PARAMETER_CACHE)]
        param_cache: Option<PathBuf>,
    },
}

/// `splitprover shape`.
#[derive(Debug, Args)]
pub struct ShapeArgs {
    /// Circuits: built-in specs (`sha-chain:38`) or Filecoin proof kinds
    /// (`porep:StackedDrg32GiBV1_1`: one partition's circuit).
    #[arg(required = true)]
    pub circuits: Vec<String>,
}
