//! Filecoin proofs (feature `filecoin`): PoRep C2, WinningPoSt, WindowPoSt and SnapDeals, with
//! circuits built by the fil crates and proved by this crate's synthesis and backends;
//! the proof bytes are the ones filecoin-proofs writes and its own verifiers accept.
//!
//! A proof request (a C1 output, or a PoSt / SnapDeals request carrying vanilla proofs) becomes a
//! [`Job`]: a checked request that can synthesize each of its partition circuits into
//! any [`AssignmentSink`](crate::types::AssignmentSink) (a ring slot in the split pipeline, a [`VecSink`] here) and give each
//! partition's public inputs (what the launcher verifies against). The partitions' 192-byte
//! Groth16 proofs, concatenated in partition order, are the proof ([`assemble_proof`],
//! filecoin-proofs' `MultiProof::write`).
//!
//! - [`porep`]: PoRep C2 from a C1 output (`StackedCompound`), in the three forms it travels in:
//!   filecoin-proofs-api's `SealCommitPhase1Output` (what lotus and Curio workers produce),
//!   lotus-bench's `Commit2In` wrapper, and filecoin-proofs' own `SealCommitPhase1Output<Tree>`.
//! - [`post`]: WinningPoSt and WindowPoSt from vanilla proofs (`FallbackPoStCompound`).
//! - [`update`]: SnapDeals from partition vanilla proofs (`EmptySectorUpdateCompound`).
//! - [`fixture`]: real sealed sectors (PC1, PC2, C1 through filecoin-proofs-api) for tests and
//!   benchmarks.
//!
//! The circuit a job needs is a [`ProofKind`] (a registered proof type of filecoin-proofs-api,
//! written `porep:StackedDrg2KiBV1_1`, `post:StackedDrgWindow2KiBV1_2`, `snap:StackedDrg2KiBV1`).
//! Its parameters live in a parameter cache dir under the official names ([`ParamFiles`], the
//! `FIL_PROOFS_PARAMETER_CACHE` convention), so production `.params` work unchanged;
//! [`generate_parameters`] writes local test parameters there with the fast generator.
//!
//! Every request is checked before any circuit is built (its vanilla proofs are verified, which
//! takes milliseconds): a request of another sector, proof type or API version is refused with a
//! typed error instead of yielding a proof that cannot verify. Calls into the fil crates are
//! guarded: their panics become errors.
//!
//! # Example
//!
//! ```no_run
//! use kernels::filecoin::{self, ParamFiles};
//! use kernels::srs::SrsImage;
//! use kernels::CpuBackend;
//!
//! let input = std::fs::read("c1.json")?;
//! let kind = filecoin::detect_kind(&input)?; // porep:StackedDrg2KiBV1_1, from the C1 output
//! let job = filecoin::open_job(kind, &input)?;
//! let files = ParamFiles::for_kind(kind, "/var/tmp/filecoin-proof-parameters")?;
//! let image = SrsImage::from_params_file(&files.params, files.circuit_id(), false)?;
//! let proof: Vec<u8> = filecoin::prove_job(&*job, &CpuBackend::new(image)?, &mut rand::rngs::OsRng)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

/// Runs `$body` with `$T` the tree shape filecoin-proofs uses for a sector of `$size` bytes (the
/// sizes registered proofs use); another size is an error.
macro_rules! with_tree {
    ($size:expr, $T:ident => $body:expr) => {{
        use filecoin_proofs::constants as c;
        match $size {
            s if s == c::SECTOR_SIZE_2_KIB => {
                type $T = c::SectorShape2KiB;
                $body
            }
            s if s == c::SECTOR_SIZE_8_MIB => {
                type $T = c::SectorShape8MiB;
                $body
            }
            s if s == c::SECTOR_SIZE_512_MIB => {
                type $T = c::SectorShape512MiB;
                $body
            }
            s if s == c::SECTOR_SIZE_32_GIB => {
                type $T = c::SectorShape32GiB;
                $body
            }
            s if s == c::SECTOR_SIZE_64_GIB => {
                type $T = c::SectorShape64GiB;
                $body
            }
            s => Err(
                $crate::ErrorKind::PoRepConfig(format!("unsupported sector size {s} bytes")).into(),
            ),
        }
    }};
}
pub(crate) use with_tree;

#[cfg(feature = "fixtures")]
pub mod fixture;
mod job;
pub mod porep;
pub mod post;
pub mod update;

use std::fmt;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use bellperson::groth16::Parameters;
use bellperson::Circuit;
use blstrs::{Bls12, Scalar};
use rand_core::SeedableRng;
use storage_proofs_core::parameter_cache::{
    metadata_id, parameter_id, verifying_key_id, CacheEntryMetadata,
};

use crate::paramgen::{GenDevice, GenProgress};
use crate::types::CircuitShape;
pub use crate::types::ProofFamily;
use crate::{Error, ErrorKind, Proof};

pub use filecoin_proofs::{
    PoRepConfig, SectorShape2KiB, SectorShapeBase, SectorShapeSub2, SectorShapeSub8,
    SectorShapeTop2,
};
pub use filecoin_proofs_api::{
    PoStType, RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof,
};
pub use job::{open_job, open_job_file, prove_job, FilecoinJob};
pub use porep::PoRepC2;
pub use storage_proofs_core::api_version::ApiVersion;
pub use storage_proofs_core::merkle::MerkleTreeTrait;

/// The prover id of a miner: its id address payload (unsigned LEB128) zero-padded to 32 bytes,
/// as lotus and Curio make it.
pub const fn prover_id(miner_id: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut v = miner_id;
    let mut i = 0;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out[i] = byte;
            return out;
        }
        out[i] = byte | 0x80;
        i += 1;
    }
}

/// Bytes of one partition's Groth16 proof in a proof file (compressed A, B, C).
pub const PARTITION_PROOF_LEN: usize = 192;

/// The circuit of a Filecoin proof: a registered proof type of filecoin-proofs-api.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProofKind {
    /// PoRep C2 (`porep:StackedDrg32GiBV1_1`).
    PoRep(RegisteredSealProof),
    /// WinningPoSt or WindowPoSt (`post:StackedDrgWinning32GiBV1`, `post:StackedDrgWindow32GiBV1_2`).
    PoSt(RegisteredPoStProof),
    /// SnapDeals, the empty sector update (`snap:StackedDrg32GiBV1`).
    SnapDeals(RegisteredUpdateProof),
}

/// The serde name of a unit variant (`StackedDrg2KiBV1_1`).
fn variant_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|j| j.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn parse_variant<T: serde::de::DeserializeOwned>(name: &str) -> Option<T> {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
}

impl fmt::Display for ProofKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProofKind::PoRep(p) => write!(f, "porep:{}", variant_name(p)),
            ProofKind::PoSt(p) => write!(f, "post:{}", variant_name(p)),
            ProofKind::SnapDeals(p) => write!(f, "snap:{}", variant_name(p)),
        }
    }
}

impl FromStr for ProofKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = |reason: String| {
            Error::from(ErrorKind::InvalidSpec {
                spec: s.to_owned(),
                reason,
            })
        };
        let (prefix, name) = s
            .split_once(':')
            .ok_or_else(|| bad("expected `porep:NAME`, `post:NAME` or `snap:NAME`".into()))?;
        let unknown = |what: &str, example: &str| {
            bad(format!("unknown {what} `{name}` (for example `{example}`)"))
        };
        let family = ProofFamily::from_prefix(prefix).ok_or_else(|| {
            bad(format!(
                "unknown proof family `{prefix}` (porep, post or snap)"
            ))
        })?;
        let kind = match family {
            ProofFamily::PoRep => ProofKind::PoRep(
                parse_variant(name)
                    .ok_or_else(|| unknown("registered seal proof", "StackedDrg32GiBV1_1"))?,
            ),
            ProofFamily::PoSt => ProofKind::PoSt(
                parse_variant(name)
                    .ok_or_else(|| unknown("registered PoSt proof", "StackedDrgWindow32GiBV1_2"))?,
            ),
            ProofFamily::SnapDeals => ProofKind::SnapDeals(
                parse_variant(name)
                    .ok_or_else(|| unknown("registered update proof", "StackedDrg32GiBV1"))?,
            ),
        };
        kind.check_supported()?;
        Ok(kind)
    }
}

impl ProofKind {
    /// Its family.
    pub fn family(self) -> ProofFamily {
        match self {
            ProofKind::PoRep(_) => ProofFamily::PoRep,
            ProofKind::PoSt(_) => ProofFamily::PoSt,
            ProofKind::SnapDeals(_) => ProofFamily::SnapDeals,
        }
    }

    /// Refuses what this crate cannot prove: non-interactive PoRep (aggregated proofs).
    pub fn check_supported(self) -> Result<(), Error> {
        if let ProofKind::PoRep(p) = self {
            if p.feature_enabled(storage_proofs_core::api_version::ApiFeature::NonInteractivePoRep)
            {
                return Err(ErrorKind::PoRepConfig(format!(
                    "{self}: non-interactive PoRep (aggregated proofs) is not supported"
                ))
                .into());
            }
        }
        Ok(())
    }

    /// Sector size in bytes.
    pub fn sector_size(self) -> u64 {
        match self {
            ProofKind::PoRep(p) => u64::from(p.sector_size()),
            ProofKind::PoSt(p) => u64::from(p.sector_size()),
            ProofKind::SnapDeals(p) => u64::from(p.sector_size()),
        }
    }

    /// The cache identifier of the circuit's parameters (what `v28-<identifier>.params` names).
    pub fn identifier(self) -> Result<String, Error> {
        match self {
            ProofKind::PoRep(p) => guarded("parameter identifier", || p.circuit_identifier()),
            ProofKind::PoSt(p) => guarded("parameter identifier", || p.circuit_identifier()),
            // filecoin-proofs-api's `RegisteredUpdateProof::circuit_identifier` names the PoRep
            // circuit's parameters; the update circuit's own name is what its verifier reads.
            ProofKind::SnapDeals(p) => update::circuit_identifier(p),
        }
    }

    /// The id of its parameter set (what slots and SRS images carry,
    /// [`ParamFiles::circuit_id`]).
    pub fn circuit_id(self) -> Result<u64, Error> {
        Ok(ParamFiles::for_kind(self, "")?.circuit_id())
    }

    /// Its `.params` file in `param_cache`, checked: present, and its `.vk` (if any) of the same
    /// parameter set.
    pub fn param_file(self, param_cache: &Path) -> Result<PathBuf, Error> {
        let files = ParamFiles::for_kind(self, param_cache)?;
        files.check_present(self)?;
        files.check_pair()?;
        Ok(files.params)
    }

    /// Calls `visitor` with the blank circuit (no witness) of this kind: what parameter
    /// generation and the shape count synthesize.
    pub(crate) fn visit_blank<V: BlankVisitor>(self, visitor: V) -> Result<V::Out, Error> {
        match self {
            ProofKind::PoRep(p) => porep::visit_blank(p, visitor),
            ProofKind::PoSt(p) => post::visit_blank(p, visitor),
            ProofKind::SnapDeals(p) => update::visit_blank(p, visitor),
        }
    }

    /// The shape of every partition circuit of this kind (a counting pass over the blank
    /// circuit; a few seconds for the largest sectors).
    pub fn shape(self) -> Result<CircuitShape, Error> {
        struct Count;
        impl BlankVisitor for Count {
            type Out = CircuitShape;
            fn visit<C: Circuit<Scalar> + Clone + Send>(
                self,
                blank: C,
            ) -> Result<CircuitShape, Error> {
                crate::synth::circuit_shape(blank)
            }
        }
        self.visit_blank(Count)
    }

    /// Measures this kind's partition circuit from its blank circuit ([`crate::r1cs::measure`]).
    pub fn measure(self) -> Result<crate::r1cs::Measure, Error> {
        struct Measure;
        impl BlankVisitor for Measure {
            type Out = crate::r1cs::Measure;
            fn visit<C: Circuit<Scalar> + Clone + Send>(
                self,
                blank: C,
            ) -> Result<crate::r1cs::Measure, Error> {
                crate::r1cs::measure(blank)
            }
        }
        self.visit_blank(Measure)
    }

    /// Records the matrices of this kind's partition circuits from its blank circuit
    /// ([`crate::r1cs::record`]), stopping past `limit_bytes`.
    pub fn record_r1cs(self, limit_bytes: Option<u64>) -> Result<crate::r1cs::R1csBuilder, Error> {
        struct Record(Option<u64>);
        impl BlankVisitor for Record {
            type Out = crate::r1cs::R1csBuilder;
            fn visit<C: Circuit<Scalar> + Clone + Send>(
                self,
                blank: C,
            ) -> Result<crate::r1cs::R1csBuilder, Error> {
                crate::r1cs::record(blank, self.0)
            }
        }
        self.visit_blank(Record(limit_bytes))
    }
}

/// Something done with a blank circuit of any type (counting, parameter generation).
pub(crate) trait BlankVisitor {
    /// What it returns.
    type Out;
    /// Does it.
    fn visit<C: Circuit<Scalar> + Clone + Send>(self, blank: C) -> Result<Self::Out, Error>;
}

/// A checked request of one Filecoin proof type: what PoRep C2 ([`porep::PoRepC2`]), PoSt
/// ([`post::PoSt`]) and SnapDeals ([`update::SnapDeals`]) differ in. [`FilecoinJob`] makes any
/// of them a [`Job`](crate::job::Job): partitions checked, shapes counted, proofs made the same
/// way for all three.
pub trait ProofRequest: Send + Sync + 'static {
    /// The circuit of one partition, as filecoin-proofs builds it.
    type Circuit: Circuit<Scalar> + Send;
    /// The proof kind (and so the parameters) of the request.
    fn kind(&self) -> ProofKind;
    /// Number of partitions (one Groth16 proof each), at least one.
    fn partitions(&self) -> usize;
    /// The circuit of partition `k < partitions()`, exactly as filecoin-proofs' prover builds
    /// it.
    fn partition_circuit(&self, k: usize) -> Result<Self::Circuit, Error>;
    /// The public inputs of partition `k < partitions()` (without the leading ONE), as
    /// filecoin-proofs' verifier computes them.
    fn partition_inputs(&self, k: usize) -> Result<Vec<Scalar>, Error>;
}

/// Something done with a checked request of any tree shape (opening it as a job): each proof
/// type's `open` reads the request for the tree shape of its sector size and hands it here.
pub(crate) trait RequestVisitor {
    /// What it returns.
    type Out;
    /// Does it.
    fn visit<R: ProofRequest>(self, request: R) -> Result<Self::Out, Error>;
}

/// The kind of a proof request, read from the request itself:
/// - a C1 output of filecoin-proofs-api (`registered_proof` is a seal proof) or lotus-bench's
///   `Commit2In` wrapper of one (`Phase1Out`): [`ProofKind::PoRep`];
/// - a PoSt request ([`post::PoStRequest`], `registered_proof` is a PoSt proof):
///   [`ProofKind::PoSt`];
/// - a SnapDeals request ([`update::SnapRequest`], `registered_update_proof`):
///   [`ProofKind::SnapDeals`].
///
/// A bare filecoin-proofs `SealCommitPhase1Output<Tree>` does not say its proof type: the
/// error says to name it (`porep:…`).
pub fn detect_kind(input: &[u8]) -> Result<ProofKind, Error> {
    #[derive(serde::Deserialize)]
    struct Probe {
        registered_proof: Option<serde_json::Value>,
        registered_update_proof: Option<serde_json::Value>,
        #[serde(rename = "Phase1Out")]
        phase1_out: Option<serde_json::Value>,
        vanilla_proofs: Option<serde::de::IgnoredAny>,
    }
    let probe: Probe =
        serde_json::from_slice(input).map_err(|e| json_error("proof request", &e))?;
    if probe.phase1_out.is_some() {
        return porep::detect_commit2in(input);
    }
    if let Some(v) = probe.registered_update_proof {
        let name = v.as_str().unwrap_or_default();
        return parse_variant(name)
            .map(ProofKind::SnapDeals)
            .ok_or_else(|| {
                ErrorKind::InvalidRequest(format!("unknown registered update proof {v}")).into()
            });
    }
    if let Some(v) = probe.registered_proof {
        let name = v.as_str().unwrap_or_default();
        let kind = if let Some(p) = parse_variant(name) {
            ProofKind::PoRep(p)
        } else if let Some(p) = parse_variant(name) {
            ProofKind::PoSt(p)
        } else {
            return Err(ErrorKind::InvalidRequest(format!("unknown registered proof {v}")).into());
        };
        kind.check_supported()?;
        return Ok(kind);
    }
    if probe.vanilla_proofs.is_some() {
        return Err(ErrorKind::InvalidC1(
            "a filecoin-proofs C1 output without its proof type; hint: name it (for example \
             `porep:StackedDrg2KiBV1_1`)"
                .into(),
        )
        .into());
    }
    Err(ErrorKind::InvalidRequest(
        "not a Filecoin proof request (no `registered_proof`, `registered_update_proof` or `Phase1Out`)".into(),
    )
    .into())
}

/// The proof bytes of a multi-partition proof: each proof's 192-byte serialization, in order
/// (filecoin-proofs' `MultiProof::write`).
pub fn assemble_proof(proofs: &[Proof]) -> Result<Vec<u8>, Error> {
    let mut buf = Vec::with_capacity(proofs.len() * PARTITION_PROOF_LEN);
    for p in proofs {
        p.write(&mut buf)?;
    }
    if buf.len() != proofs.len() * PARTITION_PROOF_LEN {
        return Err(Error::shape(
            "proof bytes",
            proofs.len() * PARTITION_PROOF_LEN,
            buf.len(),
        ));
    }
    Ok(buf)
}

/// The files of one circuit's parameters in a parameter cache dir, under the official names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamFiles {
    /// The cache identifier (`stacked-proof-of-replication-…-<sha256 of the parameter set>`).
    pub identifier: String,
    /// `v28-<identifier>.params`: the proving parameters (bellperson format).
    pub params: PathBuf,
    /// `v28-<identifier>.vk`: the verifying key filecoin-proofs' verifiers read.
    pub vk: PathBuf,
    /// `v28-<identifier>.meta`: `{"sector_size": N}`.
    pub meta: PathBuf,
}

impl ParamFiles {
    /// The files of the parameter set `identifier` in `cache_dir`.
    pub fn new(identifier: String, cache_dir: impl AsRef<Path>) -> Self {
        let dir = cache_dir.as_ref();
        Self {
            params: dir.join(parameter_id(&identifier)),
            vk: dir.join(verifying_key_id(&identifier)),
            meta: dir.join(metadata_id(&identifier)),
            identifier,
        }
    }

    /// The parameter files of `kind` in `cache_dir`.
    pub fn for_kind(kind: ProofKind, cache_dir: impl AsRef<Path>) -> Result<Self, Error> {
        Ok(Self::new(kind.identifier()?, cache_dir))
    }

    /// The parameter cache dir filecoin-proofs uses (`FIL_PROOFS_PARAMETER_CACHE`, its config
    /// file, else its default).
    pub fn official_cache_dir() -> PathBuf {
        storage_proofs_core::parameter_cache::parameter_cache_dir()
    }

    /// A stable 64-bit id for SRS images of this circuit (FNV-1a of the identifier).
    pub fn circuit_id(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in format!("splitprover-filecoin-v1:{}", self.identifier).bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    }

    /// Checks that the files needed to prove exist (`.params`), and says which is missing and
    /// how to make it.
    pub fn check_present(&self, kind: ProofKind) -> Result<(), Error> {
        if !self.params.is_file() {
            return Err(ErrorKind::MissingParameters(format!(
                "no parameters for `{kind}`: `{}` does not exist; hint: fetch the production \
                 parameters into that dir, or generate local test ones with `splitprover params \
                 generate {kind}`",
                self.params.display()
            ))
            .into());
        }
        Ok(())
    }
}

impl ParamFiles {
    /// Checks that the `.vk` beside the `.params` is the verifying key inside it (both files of
    /// one parameter set): proofs made with mismatched files pass our own check but fail
    /// filecoin-proofs' verifiers, which read the `.vk`. A missing `.vk` is not an error here.
    pub fn check_pair(&self) -> Result<(), Error> {
        if !self.vk.is_file() {
            return Ok(());
        }
        let mismatch = |why: String| -> Error {
            ErrorKind::MissingParameters(format!(
                "mismatched parameters: `{}` and `{}` {why}; hint: keep the `.params` and `.vk` of one \
                 parameter set together",
                self.params.display(),
                self.vk.display()
            ))
            .into()
        };
        let file = std::fs::File::open(&self.params)?;
        // bellperson writes the verifying key first in a `.params` file.
        let inside =
            bellperson::groth16::VerifyingKey::<Bls12>::read(std::io::BufReader::new(file))
                .map_err(|e| {
                    mismatch(format!(
                        "cannot be compared (the `.params` verifying key does not parse: {e})"
                    ))
                })?;
        let mut expected = Vec::new();
        inside.write(&mut expected)?;
        let actual = std::fs::read(&self.vk)?;
        if actual != expected {
            return Err(mismatch("are not from the same parameter set".into()));
        }
        Ok(())
    }
}

/// Writes a file through a temporary file in the same dir and a rename, so a reader never sees a
/// half-written file.
fn write_atomic(
    path: &Path,
    f: impl FnOnce(&mut dyn Write) -> Result<(), Error>,
) -> Result<(), Error> {
    let tmp = path.with_extension(format!(
        "{}.tmp{}",
        path.extension().and_then(|e| e.to_str()).unwrap_or(""),
        std::process::id()
    ));
    let result = (|| -> Result<(), Error> {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
        f(&mut w)?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Generates local test parameters for `kind` with the fast generator (ChaCha20 seeded from
/// `seed`: reproducible) and writes `.params`, `.vk` and `.meta` into `cache_dir` under the
/// official names, replacing what is there. The fixed-base multiplications run on `device`
/// ([`GenDevice::Gpu`] needs the `cuda` feature and a GPU); the files are the same bytes either
/// way for the same seed. Never for production.
pub fn generate_parameters(
    kind: ProofKind,
    cache_dir: impl AsRef<Path>,
    seed: u64,
    device: GenDevice,
    progress: &(dyn Fn(GenProgress) + Sync),
) -> Result<(ParamFiles, Parameters<Bls12>), Error> {
    struct Generate<'a> {
        seed: u64,
        device: GenDevice,
        progress: &'a (dyn Fn(GenProgress) + Sync),
    }
    impl BlankVisitor for Generate<'_> {
        type Out = Parameters<Bls12>;
        fn visit<C: Circuit<Scalar> + Clone + Send>(
            self,
            blank: C,
        ) -> Result<Parameters<Bls12>, Error> {
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(self.seed);
            crate::paramgen::generate_parameters_on(blank, &mut rng, self.device, self.progress)
        }
    }
    let files = ParamFiles::for_kind(kind, &cache_dir)?;
    std::fs::create_dir_all(cache_dir.as_ref())?;
    let t = std::time::Instant::now();
    let params = kind.visit_blank(Generate {
        seed,
        device,
        progress,
    })?;
    tracing::info!(%kind, identifier = %files.identifier, ?device, seconds = t.elapsed().as_secs_f64(), "parameters generated");
    // The proving parameters first: a `.vk` without its `.params` is never left behind.
    write_atomic(&files.params, |w| Ok(params.write(w)?))?;
    write_atomic(&files.vk, |w| Ok(params.vk.write(w)?))?;
    let meta = CacheEntryMetadata {
        sector_size: kind.sector_size(),
    };
    write_atomic(&files.meta, |w| {
        serde_json::to_writer(w, &meta).map_err(|e| fil_error("writing metadata", e))
    })?;
    Ok((files, params))
}

/// [`generate_parameters`] unless `cache_dir` already holds the three files of `kind` (tests and
/// benches share one cache this way). Returns the files and whether they were generated.
pub fn ensure_parameters(
    kind: ProofKind,
    cache_dir: impl AsRef<Path>,
    seed: u64,
    progress: &(dyn Fn(GenProgress) + Sync),
) -> Result<(ParamFiles, bool), Error> {
    let files = ParamFiles::for_kind(kind, &cache_dir)?;
    if files.params.is_file() && files.vk.is_file() && files.meta.is_file() {
        return Ok((files, false));
    }
    let (files, _) = generate_parameters(kind, cache_dir, seed, GenDevice::Cpu, progress)?;
    Ok((files, true))
}

/// Refuses a partition index `k` outside a job of `partitions`.
pub(crate) fn check_partition(k: usize, partitions: usize) -> Result<(), Error> {
    if k >= partitions {
        return Err(ErrorKind::PoRepConfig(format!(
            "partition {k} out of range (the job has {partitions})"
        ))
        .into());
    }
    Ok(())
}

pub(crate) fn fil_error(what: &str, e: impl fmt::Display) -> Error {
    ErrorKind::Filecoin(format!("{what}: {e:#}")).into()
}

/// A serde_json error as a request error that says whether the JSON is truncated or malformed.
pub(crate) fn json_error(what: &str, e: &serde_json::Error) -> Error {
    use serde_json::error::Category;
    let reason = match e.classify() {
        Category::Eof => format!("truncated JSON ({e})"),
        Category::Syntax => format!("malformed JSON ({e})"),
        Category::Io => format!("unreadable JSON ({e})"),
        Category::Data => format!("not a {what} ({e})"),
    };
    ErrorKind::InvalidRequest(reason).into()
}

/// The domain (hash output, a field element) of a tree's hasher: what its commitments are.
pub(crate) type TreeDomain<Tree> =
    <<Tree as storage_proofs_core::merkle::MerkleTreeTrait>::Hasher as filecoin_hashers::Hasher>::Domain;

/// Runs fil-crate code that may panic on malformed input; a panic becomes an error naming `what`.
pub(crate) fn guarded<T>(what: &str, f: impl FnOnce() -> anyhow::Result<T>) -> Result<T, Error> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(fil_error(what, e)),
        Err(panic) => {
            let msg = crate::panic_message(&*panic);
            Err(fil_error(what, format_args!("panicked: {msg}")))
        }
    }
}

/// Decodes a base64 string of vanilla proof bytes (standard alphabet, as Go's `encoding/json`
/// writes `[]byte`).
pub(crate) fn decode_base64(what: &str, s: &str) -> Result<Vec<u8>, Error> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .map_err(|e| ErrorKind::InvalidRequest(format!("{what} is not base64: {e}")).into())
}

/// Bytes as base64 (standard alphabet).
pub fn encode_base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_print_and_parse_back() {
        for s in [
            "porep:StackedDrg2KiBV1_1",
            "post:StackedDrgWindow32GiBV1_2",
            "post:StackedDrgWinning2KiBV1",
            "snap:StackedDrg64GiBV1",
        ] {
            let k: ProofKind = s.parse().unwrap();
            assert_eq!(k.to_string(), s);
        }
        assert_eq!(
            "porep:StackedDrg32GiBV1_1"
                .parse::<ProofKind>()
                .unwrap()
                .sector_size(),
            32 << 30
        );
    }

    #[test]
    fn bad_kinds_name_the_problem() {
        let e = "porep:StackedDrg3KiBV1".parse::<ProofKind>().unwrap_err();
        assert!(
            e.to_string()
                .contains("unknown registered seal proof `StackedDrg3KiBV1`"),
            "{e}"
        );
        let e = "proof:StackedDrg2KiBV1".parse::<ProofKind>().unwrap_err();
        assert!(
            e.to_string().contains("unknown proof family `proof`"),
            "{e}"
        );
        let e = "StackedDrg2KiBV1".parse::<ProofKind>().unwrap_err();
        assert!(e.to_string().contains("expected `porep:NAME`"), "{e}");
        let e = "porep:StackedDrg2KiBV1_2_Feat_NonInteractivePoRep"
            .parse::<ProofKind>()
            .unwrap_err();
        assert!(e.to_string().contains("non-interactive"), "{e}");
    }

    #[test]
    fn param_files_use_the_official_names() {
        let kind: ProofKind = "porep:StackedDrg2KiBV1_1".parse().unwrap();
        let f = ParamFiles::for_kind(kind, "/cache").unwrap();
        assert!(
            f.identifier.starts_with(
                "stacked-proof-of-replication-merkletree-poseidon_hasher-8-0-0-sha256_hasher-"
            ),
            "{}",
            f.identifier
        );
        assert_eq!(
            f.params,
            Path::new("/cache").join(format!("v28-{}.params", f.identifier))
        );
        assert_eq!(
            f.vk,
            Path::new("/cache").join(format!("v28-{}.vk", f.identifier))
        );
        assert_eq!(
            f.meta,
            Path::new("/cache").join(format!("v28-{}.meta", f.identifier))
        );
        // V1 and V1_1 share the circuit (the porep id only changes the graph the vanilla proofs
        // walk), hence the parameters; another sector size is another parameter set and id.
        let v1 = ParamFiles::for_kind("porep:StackedDrg2KiBV1".parse().unwrap(), "/cache").unwrap();
        assert_eq!(f, v1);
        let other =
            ParamFiles::for_kind("porep:StackedDrg8MiBV1_1".parse().unwrap(), "/cache").unwrap();
        assert_ne!(f.identifier, other.identifier);
        assert_ne!(f.circuit_id(), other.circuit_id());
        let e = f.check_present(kind).unwrap_err();
        assert!(
            e.to_string()
                .contains("splitprover params generate porep:StackedDrg2KiBV1_1"),
            "{e}"
        );
        // SnapDeals has its own parameters, not the PoRep ones of the same sector size.
        let snap =
            ParamFiles::for_kind("snap:StackedDrg2KiBV1".parse().unwrap(), "/cache").unwrap();
        assert!(
            snap.identifier.starts_with("empty-sector-update-"),
            "{}",
            snap.identifier
        );
    }

    #[test]
    fn requests_say_their_kind() {
        let e = detect_kind(b"{\"vanilla_proofs\": [], \"comm_r\": []}").unwrap_err();
        assert!(e.to_string().contains("without its proof type"), "{e}");
        let e = detect_kind(b"{\"registered_proof\": \"StackedDrg3KiB\"}").unwrap_err();
        assert!(e.to_string().contains("unknown registered proof"), "{e}");
        let e = detect_kind(b"{\"registered_proof\": ").unwrap_err();
        assert!(e.to_string().contains("truncated JSON"), "{e}");
        let e = detect_kind(b"[1, 2]").unwrap_err();
        assert!(e.to_string().contains("not a proof request"), "{e}");
        assert_eq!(
            detect_kind(b"{\"registered_proof\": \"StackedDrgWinning2KiBV1\"}").unwrap(),
            ProofKind::PoSt(RegisteredPoStProof::StackedDrgWinning2KiBV1)
        );
        assert_eq!(
            detect_kind(b"{\"registered_update_proof\": \"StackedDrg2KiBV1\"}").unwrap(),
            ProofKind::SnapDeals(RegisteredUpdateProof::StackedDrg2KiBV1)
        );
    }

    #[test]
    fn assembled_proof_is_192_bytes_per_partition() {
        use group::prime::PrimeCurveAffine;
        let p = Proof {
            a: blstrs::G1Affine::generator(),
            b: blstrs::G2Affine::generator(),
            c: blstrs::G1Affine::generator(),
        };
        let bytes = assemble_proof(&[p.clone(), p]).unwrap();
        assert_eq!(bytes.len(), 2 * PARTITION_PROOF_LEN);
        assert_eq!(bytes[..192], bytes[192..]);
    }
}
