//! The service configuration file (`splitprover run --config FILE`): plain data, what the file
//! says, checked for what needs no other module (types, ranges, cpu lists, pinning and huge-page
//! names). `systemd/config.example.toml` documents every key.
//!
//! **Architecture Invariant:** this module is the floor of the launcher's settings: it imports
//! nothing from `api`, `service` or `pipeline`. [`crate::settings`] resolves a `Config` (and the
//! command line's flags, in the same form) into the pipeline's and the service's settings; a key
//! left out here (`None`) takes the default of the module that owns it.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::pinning::{CpuList, PinChoice};
use shm_protocol::control::BackendKind;

/// The whole file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where generated SRS files and other caches live.
    #[serde(default = "default_cache_dir")]
    pub cache_dir: PathBuf,
    /// Unix socket of the service.
    #[serde(default = "default_socket")]
    pub socket: PathBuf,
    /// Filecoin parameter cache dir (official file names, `v28-<identifier>.params`); default
    /// `FIL_PROOFS_PARAMETER_CACHE`, else `/var/tmp/filecoin-proof-parameters`.
    #[serde(default = "crate::env::param_cache_dir")]
    pub param_cache: PathBuf,
    /// The shared-memory ring.
    #[serde(default)]
    pub ring: RingConfig,
    /// Pinning.
    #[serde(default)]
    pub cpus: CpusConfig,
    /// One entry per gpu-proc.
    #[serde(default = "default_gpus")]
    pub gpu: Vec<GpuConfig>,
    /// synth-proc.
    #[serde(default)]
    pub synthesis: SynthesisConfig,
    /// The circuits this service proves, each with its SRS.
    #[serde(default)]
    pub circuit: Vec<CircuitConfig>,
    /// Fault containment: deadlines, attempts, limits.
    #[serde(default)]
    pub faults: FaultsConfig,
    /// The service: socket permissions, job journal, client limits, graceful stop.
    #[serde(default)]
    pub service: ServiceConfig,
}

/// `[faults]`: progress deadlines, attempts per partition and limits (see
/// `pipeline::FaultSettings`, whose defaults a key left out takes).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FaultsConfig {
    /// Failed attempts of one partition (its prover or synthesizer died, its proof did not
    /// verify) after which its job fails.
    pub max_attempts: Option<u32>,
    /// A batch or a synthesis may take this many times its circuit's measured time...
    pub deadline_factor: Option<f64>,
    /// ...but never less than this many seconds.
    pub deadline_floor_secs: Option<u64>,
    /// Deadline of a batch before its circuit's proving time was measured, seconds.
    pub first_proof_deadline_secs: Option<u64>,
    /// Deadline of a synthesis before its circuit's synthesis time was measured, seconds.
    pub first_synthesis_deadline_secs: Option<u64>,
    /// Partitions one job may have.
    pub max_partitions: Option<u32>,
    /// Largest request file accepted.
    pub max_request_bytes: Option<ByteSize>,
    /// Timeline events the service keeps (the last ones); 0 keeps none. A file that leaves it
    /// out keeps [`SERVICE_TIMELINE_EVENTS`]; `None` (the command line's one-shot commands)
    /// keeps all.
    pub timeline_events: Option<usize>,
}

/// The timeline events a service keeps when its file does not say (`[faults] timeline_events`).
pub const SERVICE_TIMELINE_EVENTS: usize = 100_000;

impl Default for FaultsConfig {
    fn default() -> Self {
        FaultsConfig {
            max_attempts: None,
            deadline_factor: None,
            deadline_floor_secs: None,
            first_proof_deadline_secs: None,
            first_synthesis_deadline_secs: None,
            max_partitions: None,
            max_request_bytes: None,
            timeline_events: Some(SERVICE_TIMELINE_EVENTS),
        }
    }
}

/// `[service]`: what only `splitprover run` uses.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceConfig {
    /// The job journal (SQLite); default `$STATE_DIRECTORY/jobs.sqlite` under systemd, else
    /// `/var/lib/splitprover/jobs.sqlite` with the system socket, else `jobs.sqlite` beside the
    /// socket.
    #[serde(default)]
    pub journal: Option<PathBuf>,
    /// Permissions of the socket, octal (`"0660"`).
    #[serde(default = "default_socket_mode")]
    pub socket_mode: String,
    /// Group the socket is given (by name); its members may submit.
    #[serde(default)]
    pub socket_group: Option<String>,
    /// Client connections at once; one more gets a `busy` answer and is closed.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Accepted, unfinished jobs at most; a submission beyond gets `busy: N jobs queued`.
    #[serde(default = "default_max_queued_jobs")]
    pub max_queued_jobs: u64,
    /// More addresses the API is served on, beside `socket`: `unix:///path` or `host:port`
    /// (`["127.0.0.1:9820"]`, where Curio's `[Cuzk] Address` points).
    #[serde(default)]
    pub listen: Vec<String>,
    /// Client networks TCP listeners admit, CIDR (`["10.0.0.0/8", "::1/128"]`); a peer
    /// outside them is closed at accept. Default: loopback only. Unix sockets ignore it.
    #[serde(default = "default_allow")]
    pub allow: Vec<String>,
    /// TLS on every TCP listener (`{ cert = "...", key = "...", client_ca = "..." }`, PEM
    /// files); with `client_ca`, clients must present a certificate it signed. None: plain.
    #[serde(default)]
    pub tls: Option<TlsFiles>,
    /// Seconds a new TCP connection has to send its first bytes (and finish its TLS
    /// handshake) before it is closed.
    #[serde(default = "default_first_byte_timeout_s")]
    pub first_byte_timeout_s: u64,
    /// `host:port` of the Prometheus endpoint (`GET /metrics`); none by default.
    #[serde(default)]
    pub metrics_listen: Option<String>,
    /// Largest gRPC message either way, bytes; default: the API's (Curio sends and accepts up
    /// to 256 MiB).
    #[serde(default)]
    pub max_message_bytes: Option<usize>,
    /// Seconds in-flight partitions get to finish on SIGTERM (keep `TimeoutStopSec=` above it).
    #[serde(default = "default_stop_grace_s")]
    pub stop_grace_s: u64,
    /// Seconds a fetched result is kept (a client whose connection broke can fetch it again).
    #[serde(default = "default_fetched_retention_s")]
    pub fetched_retention_s: u64,
    /// Seconds a finished result nobody fetched is kept.
    #[serde(default = "default_result_retention_s")]
    pub result_retention_s: u64,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            journal: None,
            socket_mode: default_socket_mode(),
            socket_group: None,
            max_connections: default_max_connections(),
            max_queued_jobs: default_max_queued_jobs(),
            listen: Vec::new(),
            allow: default_allow(),
            tls: None,
            first_byte_timeout_s: default_first_byte_timeout_s(),
            metrics_listen: None,
            max_message_bytes: None,
            stop_grace_s: default_stop_grace_s(),
            fetched_retention_s: default_fetched_retention_s(),
            result_retention_s: default_result_retention_s(),
        }
    }
}

/// The PEM files of `[service] tls` (`crate::api::access` reads them).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// The server's certificate chain.
    pub cert: PathBuf,
    /// The server's private key.
    pub key: PathBuf,
    /// The CA whose certificates clients must present; none: no client certificate asked.
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
}

impl ServiceConfig {
    /// `socket_mode` parsed.
    pub fn socket_mode(&self) -> Result<u32, ConfigError> {
        let s = self.socket_mode.trim();
        let digits = s.strip_prefix("0o").unwrap_or(s);
        match u32::from_str_radix(digits, 8) {
            Ok(m) if m <= 0o777 => Ok(m),
            _ => Err(ConfigError::Invalid(format!(
                "[service] socket_mode `{s}`: expected octal permissions like \"0660\""
            ))),
        }
    }
}

/// `[ring]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RingConfig {
    /// Number of slots.
    #[serde(default = "default_slots")]
    pub slots: usize,
    /// Bytes per slot; by default the largest configured circuit decides.
    #[serde(default)]
    pub slot_bytes: Option<ByteSize>,
    /// Whole ring size (alternative to `slot_bytes`).
    #[serde(default)]
    pub ring_bytes: Option<ByteSize>,
    /// `auto`, `1g`, `2m`, `thp` or `none`.
    #[serde(default = "default_huge")]
    pub huge_pages: String,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            slots: default_slots(),
            slot_bytes: None,
            ring_bytes: None,
            huge_pages: default_huge(),
        }
    }
}

/// `[cpus]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpusConfig {
    /// `auto`, `cgroup-v2`, `cgroup-v1`, `affinity`.
    #[serde(default = "default_mode")]
    pub mode: String,
    /// Cores per gpu-proc in the automatic layout; unset: by backend
    /// ([`crate::pinning::default_gpu_cores`]).
    #[serde(default)]
    pub gpu_cores: Option<usize>,
    /// Explicit synth-proc cores.
    #[serde(default)]
    pub synth: Option<String>,
}

impl Default for CpusConfig {
    fn default() -> Self {
        CpusConfig {
            mode: default_mode(),
            gpu_cores: None,
            synth: None,
        }
    }
}

/// `[[gpu]]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuConfig {
    /// CUDA device index.
    #[serde(default)]
    pub device: u32,
    /// `cuda` or `cpu` (anything else is refused when the file is parsed).
    #[serde(default = "default_backend")]
    pub backend: BackendKind,
    /// Explicit cores (with `[cpus] synth`).
    #[serde(default)]
    pub cpus: Option<String>,
    /// Circuits proved together in one backend call.
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// The `gpu` backend's whole footprint on this GPU, its CUDA context included (what
    /// `nvidia-smi` shows for the process; `24GiB`); default, and at most: what the device has
    /// free at start less 1 GiB left to the CUDA runtime. The backend plans
    /// within it (fewer input sets, the H MSM in chunks, part of the SRS streamed from the host
    /// for every proof, the compact layout, the witness matrices' rows streamed) and refuses at
    /// start, with the numbers, what cannot fit.
    #[serde(default)]
    pub memory_budget: Option<ByteSize>,
}

/// `[synthesis]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SynthesisConfig {
    /// Partitions synthesized at once; 0: one per synth-proc core.
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// Partitions handed to synth-proc beyond `concurrency` (queued there, ready to start the
    /// moment a worker frees); absent: as many as `concurrency`.
    #[serde(default)]
    pub lookahead: Option<usize>,
    /// Synthesize through pre-compiled constraint matrices (recorded once per circuit, cached
    /// under `cache_dir/r1cs/`): the same bytes, computed faster.
    #[serde(default = "default_precompiled")]
    pub precompiled: bool,
    /// Memory all circuits' matrices may take together; a circuit whose matrices do not fit is
    /// synthesized in full (with a warning). Default: a quarter of the host's memory.
    #[serde(default)]
    pub matrices_budget: Option<ByteSize>,
    /// The memory model's allowance per synthesis worker besides its slot (default 512 MiB):
    /// a configuration whose model exceeds the host's memory is refused at start.
    #[serde(default)]
    pub worker_memory: Option<ByteSize>,
    /// Witness-only slots for the pre-compiled circuits: synth-proc writes the inputs and the
    /// aux values (bits packed), the gpu-procs compute a, b, c from the same matrices (`gpu`: on
    /// the device). A 32 GiB PoRep partition's slot takes 379 MiB instead of 15.6 GiB.
    #[serde(default)]
    pub witness_slots: bool,
}

impl Default for SynthesisConfig {
    fn default() -> Self {
        SynthesisConfig {
            concurrency: default_concurrency(),
            lookahead: None,
            precompiled: default_precompiled(),
            matrices_budget: None,
            worker_memory: None,
            witness_slots: false,
        }
    }
}

fn default_precompiled() -> bool {
    true
}

/// `[[circuit]]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CircuitConfig {
    /// Circuit spec: a built-in circuit (`sha-chain:38`) or a Filecoin proof kind
    /// (`porep:StackedDrg32GiBV1_1`, `post:StackedDrgWindow32GiBV1_2`, `snap:StackedDrg32GiBV1`).
    pub spec: String,
    /// SRS file in bellperson `Parameters` format; by default `<cache_dir>/<spec>.params`,
    /// generated on first start for built-in circuits, and the official file in `param_cache`
    /// for Filecoin circuits.
    #[serde(default)]
    pub srs: Option<PathBuf>,
    /// Ring slots of this circuit's own size besides `[ring] slots` (which are sized for the
    /// largest circuit): give a small circuit served beside a large one (a PoSt beside a 32 GiB
    /// PoRep) its own slots, so that it never takes a large slot while one of its own is free.
    /// Default 0.
    #[serde(default)]
    pub slots: usize,
}

/// A byte count written as a number or as a string with a unit (`512MiB`, `2GiB`, `4096`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(ByteSize(n)),
            Raw::S(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let n: u64 = num
            .parse()
            .map_err(|_| format!("bad size `{s}`: expected a number and a unit like `512MiB`"))?;
        let mult: u64 = match unit.trim() {
            "" | "B" => 1,
            "KiB" | "K" => 1 << 10,
            "MiB" | "M" => 1 << 20,
            "GiB" | "G" => 1 << 30,
            "TiB" | "T" => 1 << 40,
            other => {
                return Err(format!(
                    "bad size unit `{other}` in `{s}`: use B, KiB, MiB, GiB or TiB"
                ))
            }
        };
        n.checked_mul(mult)
            .map(ByteSize)
            .ok_or_else(|| format!("size `{s}` is too large"))
    }
}

fn default_cache_dir() -> PathBuf {
    crate::env::cache_dir()
}
fn default_socket() -> PathBuf {
    crate::env::service_socket_path()
}
fn default_socket_mode() -> String {
    "0660".into()
}
fn default_allow() -> Vec<String> {
    vec!["127.0.0.0/8".into(), "::1/128".into()]
}

fn default_first_byte_timeout_s() -> u64 {
    10
}

fn default_max_connections() -> usize {
    256
}
fn default_max_queued_jobs() -> u64 {
    1000
}
fn default_stop_grace_s() -> u64 {
    30
}
fn default_fetched_retention_s() -> u64 {
    600
}
fn default_result_retention_s() -> u64 {
    7 * 24 * 3600
}
fn default_slots() -> usize {
    4
}
fn default_huge() -> String {
    "auto".into()
}
fn default_mode() -> String {
    "auto".into()
}
fn default_backend() -> BackendKind {
    BackendKind::Cpu
}
fn default_batch() -> usize {
    1
}
fn default_concurrency() -> usize {
    0
}
fn default_gpus() -> Vec<GpuConfig> {
    vec![GpuConfig {
        device: 0,
        backend: default_backend(),
        cpus: None,
        batch: default_batch(),
        memory_budget: None,
    }]
}

/// Why a config file cannot be used; the message names the file and the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read config `{}`: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file's content is refused.
    #[error("bad config `{}`: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Box<ConfigError>,
    },
    /// Not TOML, or a key of the wrong type.
    #[error("{0}")]
    Syntax(#[from] toml::de::Error),
    /// A value out of range or that does not parse.
    #[error("{0}")]
    Invalid(String),
}

impl ConfigError {
    /// This error, found in the file at `path` (its message then names the file).
    pub fn in_file(self, path: &Path) -> ConfigError {
        ConfigError::File {
            path: path.to_owned(),
            source: Box::new(self),
        }
    }
}

impl Config {
    /// Reads and checks a config file; errors name the file and the key.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text).map_err(|e| e.in_file(path))
    }

    /// Parses config text.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text)?;
        config.check()?;
        Ok(config)
    }

    /// The default config of a one-shot command (demo, prove, bench), which its flags then
    /// change: an empty file's, keeping the whole timeline.
    pub fn one_shot() -> Config {
        let mut config = Config::parse("").expect("empty config is valid");
        config.faults.timeline_events = None;
        config
    }

    fn check(&self) -> Result<(), ConfigError> {
        let invalid = |msg: String| Err(ConfigError::Invalid(msg));
        if self.ring.slots < 1 {
            return invalid("[ring] slots must be at least 1".into());
        }
        if self.gpu.is_empty() {
            return invalid("at least one [[gpu]] is needed".into());
        }
        for g in &self.gpu {
            if g.batch < 1 {
                return invalid("[[gpu]] batch must be at least 1".into());
            }
            if let Some(c) = &g.cpus {
                c.parse::<CpuList>()
                    .map_err(|e| ConfigError::Invalid(format!("[[gpu]] cpus: {e}")))?;
            }
        }
        if let Some(s) = &self.cpus.synth {
            s.parse::<CpuList>()
                .map_err(|e| ConfigError::Invalid(format!("[cpus] synth: {e}")))?;
        }
        self.pin_choice()?;
        self.ring.huge_page_policy()?;
        self.service.socket_mode()?;
        if self.service.max_connections < 1
            || self.service.max_message_bytes.is_some_and(|b| b < 4096)
        {
            return invalid(
                "[service] max_connections must be at least 1 and max_message_bytes at least 4096"
                    .into(),
            );
        }
        if self.service.first_byte_timeout_s == 0 {
            return invalid("[service] first_byte_timeout_s must be at least 1".into());
        }
        // `allow`, `listen` and `metrics_listen` are the API's to parse: `crate::settings`
        // checks them when it resolves the service's settings.
        Ok(())
    }

    /// `[cpus] mode` parsed.
    pub fn pin_choice(&self) -> Result<PinChoice, ConfigError> {
        self.cpus
            .mode
            .parse()
            .map_err(|e| ConfigError::Invalid(format!("[cpus] mode: {e}")))
    }
}

impl RingConfig {
    /// `huge_pages` parsed.
    pub fn huge_page_policy(&self) -> Result<shm_protocol::HugePagePolicy, ConfigError> {
        crate::ring::parse_huge_pages(&self.huge_pages)
            .map_err(|e| ConfigError::Invalid(format!("[ring] {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!("512MiB".parse::<ByteSize>().unwrap(), ByteSize(512 << 20));
        assert_eq!("4096".parse::<ByteSize>().unwrap(), ByteSize(4096));
        assert!("12 parsecs"
            .parse::<ByteSize>()
            .unwrap_err()
            .contains("unit"));
    }

    #[test]
    fn empty_config_has_defaults() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.ring.slots, 4);
        assert_eq!(c.gpu.len(), 1);
        assert_eq!(c.gpu[0].backend, BackendKind::Cpu);
        assert_eq!(c.service.socket_mode().unwrap(), 0o660);
        assert_eq!(c.service.stop_grace_s, 30);
    }

    #[test]
    fn service_tls_parses() {
        let c = Config::parse("[service]\n").unwrap();
        assert!(c.service.tls.is_none());
        let c = Config::parse(
            "[service]\ntls = { cert = \"/c.pem\", key = \"/k.pem\", client_ca = \"/ca.pem\" }\n",
        )
        .unwrap();
        let tls = c.service.tls.unwrap();
        assert_eq!(
            tls.client_ca.as_deref(),
            Some(std::path::Path::new("/ca.pem"))
        );
    }

    #[test]
    fn service_socket_mode_is_octal() {
        let c = Config::parse("[service]\nsocket_mode = \"0600\"\n").unwrap();
        assert_eq!(c.service.socket_mode().unwrap(), 0o600);
        let e = format!(
            "{:#}",
            Config::parse("[service]\nsocket_mode = \"rw\"\n").unwrap_err()
        );
        assert!(e.contains("socket_mode"), "{e}");
    }

    #[test]
    fn a_circuit_may_have_slots_of_its_own_size() {
        let c = Config::parse(
            "[ring]\nslots = 3\n[[circuit]]\nspec = \"sha-chain:38\"\n\
             [[circuit]]\nspec = \"pubinputs:4\"\nslots = 8\n",
        )
        .unwrap();
        assert_eq!(c.ring.slots, 3);
        assert_eq!(
            c.circuit.iter().map(|c| c.slots).collect::<Vec<_>>(),
            vec![0, 8]
        );
    }

    #[test]
    fn the_example_config_parses() {
        let text = include_str!("../../systemd/config.example.toml");
        let c = Config::parse(text).unwrap();
        assert!(!c.circuit.is_empty());
    }

    #[test]
    fn witness_slots_and_a_gpu_memory_budget_are_read_and_default_off() {
        let c = Config::parse(
            "[synthesis]\nwitness_slots = true\n[[gpu]]\nmemory_budget = \"22GiB\"\n",
        )
        .unwrap();
        assert!(c.synthesis.witness_slots);
        assert_eq!(c.gpu[0].memory_budget.map(|b| b.0), Some(22 << 30));
        let d = Config::parse("").unwrap();
        assert!(!d.synthesis.witness_slots);
        assert!(d.gpu.iter().all(|g| g.memory_budget.is_none()));
        let e = format!(
            "{:#}",
            Config::parse("[[gpu]]\nmemory_budget = \"lots\"\n").unwrap_err()
        );
        assert!(e.contains("lots"), "{e}");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let e = format!("{:#}", Config::parse("[ring]\nslotz = 3\n").unwrap_err());
        assert!(e.contains("slotz"), "{e}");
        let e = format!(
            "{:#}",
            Config::parse("[[gpu]]\nbackend = \"opencl\"\n").unwrap_err()
        );
        assert!(e.contains("opencl"), "{e}");
        let e = format!(
            "{:#}",
            Config::parse("[cpus]\nmode = \"magic\"\n").unwrap_err()
        );
        assert!(e.contains("magic"), "{e}");
    }
}
