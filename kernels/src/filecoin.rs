//! Filecoin PoRep C2 (feature `filecoin`): the Groth16 proofs of a sealed sector, computed by this
//! crate's synthesis and provers from the C1 output, bit-compatible with filecoin-proofs.
//!
//! What a storage provider hands a C2 prover is the C1 output, filecoin-proofs'
//! `SealCommitPhase1Output` as serde JSON. [`PoRepC2`] parses and checks it, then mirrors
//! `seal_commit_phase2_circuit_proofs` step for step:
//!
//! 1. public parameters from the [`PoRepConfig`] (`filecoin_proofs::parameters::public_params`),
//!    public inputs `{replica_id, tau: {comm_d, comm_r}, seed}` from the C1 output;
//! 2. per partition `k`, the circuit `StackedCompound::circuit(.., &vanilla_proofs[k], .., Some(k))`
//!    ([`PoRepC2::circuit`]) and its public inputs `StackedCompound::generate_public_inputs(.., Some(k))`
//!    ([`PoRepC2::public_inputs`]);
//! 3. each partition synthesized through [`crate::synth::synthesize`] into any
//!    [`AssignmentSink`] ([`PoRepC2::synthesize_partition`]: a ring slot later, a
//!    [`VecSink`] here), proved by a [`Backend`] with fresh `r`, `s`;
//! 4. the proof bytes assembled as `MultiProof::write` does: the partitions' 192-byte Groth16
//!    proofs concatenated in partition order ([`assemble_proof`]).
//!
//! Parameters live in a parameter cache dir under the official names
//! (`v28-<cache identifier>.params`, `.vk`, `.meta`: the `FIL_PROOFS_PARAMETER_CACHE`
//! convention, [`ParamFiles`]), so production `.params` work unchanged and filecoin-proofs'
//! own verifier finds the `.vk`. [`generate_porep_parameters`] writes local test parameters
//! there with this crate's fast generator ([`crate::paramgen`]).
//!
//! Before any circuit is built the vanilla proofs are verified against the public parameters
//! (milliseconds): a C1 output of another sector size, porep id or API version, or a damaged
//! one, is refused with a typed error instead of yielding a proof that cannot verify. Calls into
//! the fil crates are guarded against panics, which become errors.
//!
//! Interactive PoRep only (also with synthetic challenges); non-interactive PoRep needs proof
//! aggregation and is refused.
//!
//! # Example
//!
//! ```no_run
//! use kernels::filecoin::{porep_config, ApiVersion, ParamFiles, PoRepC2, SectorShapeBase};
//! use kernels::srs::SrsImage;
//! use kernels::CpuBackend;
//!
//! let config = porep_config(2048, [5; 32], ApiVersion::V1_2_0)?;
//! let c1_json = std::fs::read("c1.json")?;
//! let job = PoRepC2::<SectorShapeBase>::from_json(&config, &c1_json)?;
//! let files = ParamFiles::porep::<SectorShapeBase>(&config, "/var/tmp/filecoin-proof-parameters")?;
//! let image = SrsImage::from_params_file(&files.params, files.circuit_id(), false)?;
//! let proof: Vec<u8> = job.prove(&CpuBackend::new(image)?, &mut rand::rngs::OsRng)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use bellperson::groth16::Parameters;
use blstrs::{Bls12, Scalar};
use ff::Field;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::{DefaultPieceDomain, DefaultPieceHasher, SealCommitPhase1Output};
use rand_core::{RngCore, SeedableRng};
use storage_proofs_core::api_version::ApiFeature;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::parameter_cache::{
    metadata_id, parameter_id, verifying_key_id, CacheEntryMetadata, CacheableParameters,
};
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_porep::stacked::{self, StackedCircuit, StackedCompound, StackedDrg};

use crate::paramgen::GenProgress;
use crate::synth::{AssignmentSink, CircuitShape, VecSink};
use crate::{Backend, Error, ErrorKind, Proof};

pub use filecoin_proofs::{
    PoRepConfig, SectorShape2KiB, SectorShapeBase, SectorShapeSub2, SectorShapeSub8,
    SectorShapeTop2,
};
pub use storage_proofs_core::api_version::ApiVersion;
pub use storage_proofs_core::merkle::MerkleTreeTrait;

/// Bytes of one partition's Groth16 proof in the proof file (compressed A, B, C).
pub const PARTITION_PROOF_LEN: usize = 192;

/// The PoRep circuit of one partition, as filecoin-proofs builds it.
pub type PoRepCircuit<Tree> = StackedCircuit<Tree, DefaultPieceHasher>;

type Compound<Tree> = StackedCompound<Tree, DefaultPieceHasher>;
type PublicInputs<Tree> = stacked::PublicInputs<
    <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain,
    DefaultPieceDomain,
>;

fn fil_error(what: &str, e: impl std::fmt::Display) -> Error {
    ErrorKind::Filecoin(format!("{what}: {e:#}")).into()
}

fn invalid_c1(reason: impl Into<String>) -> Error {
    ErrorKind::InvalidC1(reason.into()).into()
}

/// Runs fil-crate code that may panic on malformed input; a panic becomes an error naming `what`.
fn guarded<T>(what: &str, f: impl FnOnce() -> anyhow::Result<T>) -> Result<T, Error> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(fil_error(what, e)),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("panic without a message");
            Err(fil_error(what, format_args!("panicked: {msg}")))
        }
    }
}

/// The Merkle tree arities `(sub, top)` filecoin-proofs uses for a sector size (base arity 8).
fn tree_arities(sector_size: u64) -> Option<(usize, usize)> {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    match sector_size {
        s if s == 2 * KIB || s == 8 * MIB || s == 512 * MIB => Some((0, 0)),
        s if s == 4 * KIB || s == 16 * MIB || s == GIB => Some((2, 0)),
        s if s == 16 * KIB || s == 32 * GIB => Some((8, 0)),
        s if s == 32 * KIB || s == 64 * GIB => Some((8, 2)),
        _ => None,
    }
}

/// A PoRep config for an interactive PoRep of `sector_size` bytes, checked: an unknown sector
/// size is an error here (filecoin-proofs' own constructor panics on it).
pub fn porep_config(
    sector_size: u64,
    porep_id: [u8; 32],
    api_version: ApiVersion,
) -> Result<PoRepConfig, Error> {
    let known = filecoin_proofs::constants::POREP_PARTITIONS
        .read()
        .map(|m| m.contains_key(&sector_size))
        .unwrap_or(false);
    if !known || tree_arities(sector_size).is_none() {
        return Err(ErrorKind::PoRepConfig(format!(
            "unsupported sector size {sector_size} bytes (filecoin-proofs knows 2 KiB, 4 KiB, 16 KiB, \
             32 KiB, 8 MiB, 16 MiB, 512 MiB, 1 GiB, 32 GiB, 64 GiB)"
        ))
        .into());
    }
    Ok(PoRepConfig::new_groth16(sector_size, porep_id, api_version))
}

/// Checks that `Tree` is the tree shape filecoin-proofs uses for the config's sector size and
/// that the config is an interactive PoRep.
fn check_config<Tree: 'static + MerkleTreeTrait>(config: &PoRepConfig) -> Result<(), Error> {
    let size = u64::from(config.sector_size);
    let (sub, top) = tree_arities(size).ok_or_else(|| {
        Error::from(ErrorKind::PoRepConfig(format!(
            "unsupported sector size {size} bytes"
        )))
    })?;
    let shape = Tree::display();
    if !shape.ends_with(&format!("-8-{sub}-{top}")) {
        return Err(ErrorKind::PoRepConfig(format!(
            "tree shape `{shape}` is not the one of a {size}-byte sector (arities 8-{sub}-{top})"
        ))
        .into());
    }
    if config.feature_enabled(ApiFeature::NonInteractivePoRep) {
        return Err(ErrorKind::PoRepConfig(
            "non-interactive PoRep (aggregated proofs) is not supported".into(),
        )
        .into());
    }
    Ok(())
}

/// Parses a C1 output (`SealCommitPhase1Output` serde JSON) for the tree shape `Tree`.
///
/// Errors say whether the JSON is truncated, malformed, or well-formed but not a C1 output of
/// this shape (another sector size or proof type).
pub fn parse_c1<Tree: 'static + MerkleTreeTrait>(
    json: &[u8],
) -> Result<SealCommitPhase1Output<Tree>, Error> {
    serde_json::from_slice(json).map_err(|e| {
        use serde_json::error::Category;
        match e.classify() {
            Category::Eof => invalid_c1(format!("truncated JSON ({e})")),
            Category::Syntax => invalid_c1(format!("malformed JSON ({e})")),
            Category::Io => invalid_c1(format!("unreadable JSON ({e})")),
            Category::Data => invalid_c1(format!(
                "not a C1 output (`SealCommitPhase1Output`) for tree shape `{}` ({e}); hint: \
                 check the sector size and proof type",
                Tree::display()
            )),
        }
    })
}

/// A PoRep C2 job: a checked C1 output with everything needed to build and prove its partitions.
pub struct PoRepC2<Tree: 'static + MerkleTreeTrait> {
    config: PoRepConfig,
    public_params: stacked::PublicParams<Tree>,
    public_inputs: PublicInputs<Tree>,
    vanilla_proofs: Vec<Vec<filecoin_proofs::VanillaSealProof<Tree>>>,
}

impl<Tree: 'static + MerkleTreeTrait> PoRepC2<Tree> {
    /// [`parse_c1`] then [`PoRepC2::new`].
    pub fn from_json(config: &PoRepConfig, json: &[u8]) -> Result<Self, Error> {
        Self::new(config, parse_c1::<Tree>(json)?)
    }

    /// Reads a C1 output file, then [`PoRepC2::from_json`]; errors about the input name the file.
    pub fn from_c1_file(config: &PoRepConfig, path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let json = std::fs::read(path)
            .map_err(|e| invalid_c1(format!("cannot read `{}`: {e}", path.display())))?;
        Self::from_json(config, &json).map_err(|e| match e.into_kind() {
            ErrorKind::InvalidC1(reason) => invalid_c1(format!("`{}`: {reason}", path.display())),
            kind => kind.into(),
        })
    }

    /// Checks a parsed C1 output against `config` (the checks of
    /// `seal_commit_phase2_circuit_proofs`, plus partition count and vanilla proof verification)
    /// and prepares the public parameters and inputs.
    pub fn new(config: &PoRepConfig, c1: SealCommitPhase1Output<Tree>) -> Result<Self, Error> {
        check_config::<Tree>(config)?;
        let SealCommitPhase1Output {
            vanilla_proofs,
            comm_r,
            comm_d,
            replica_id,
            seed,
            ticket: _,
        } = c1;
        if comm_d == [0; 32] {
            return Err(invalid_c1("all-zero commitment `comm_d`"));
        }
        if comm_r == [0; 32] {
            return Err(invalid_c1("all-zero commitment `comm_r`"));
        }
        if seed == [0; 32] {
            return Err(invalid_c1("all-zero porep challenge `seed`"));
        }
        let partitions = usize::from(config.partitions);
        if vanilla_proofs.len() != partitions {
            return Err(invalid_c1(format!(
                "{} partitions of vanilla proofs, a {}-byte sector has {partitions}; hint: check \
                 the sector size and proof type",
                vanilla_proofs.len(),
                u64::from(config.sector_size)
            )));
        }
        if let Some(k) = vanilla_proofs.iter().position(Vec::is_empty) {
            return Err(invalid_c1(format!("partition {k} has no vanilla proofs")));
        }
        let comm_r_safe = <<Tree::Hasher as Hasher>::Domain as Domain>::try_from_bytes(&comm_r)
            .map_err(|e| invalid_c1(format!("`comm_r` is not a field element: {e}")))?;
        let comm_d_safe = DefaultPieceDomain::try_from_bytes(&comm_d)
            .map_err(|e| invalid_c1(format!("`comm_d` is not a field element: {e}")))?;
        let public_inputs = stacked::PublicInputs {
            replica_id,
            tau: Some(stacked::Tau {
                comm_d: comm_d_safe,
                comm_r: comm_r_safe,
            }),
            k: None,
            seed: Some(seed),
        };
        let public_params = guarded("porep public parameters", || {
            filecoin_proofs::parameters::public_params::<Tree>(config)
        })?;
        let valid = guarded("vanilla proof verification", || {
            StackedDrg::<Tree, DefaultPieceHasher>::verify_all_partitions(
                &public_params,
                &public_inputs,
                &vanilla_proofs,
            )
        })?;
        if !valid {
            return Err(invalid_c1(format!(
                "the vanilla proofs do not verify for a {}-byte sector with this porep id and api \
                 version {} (another sector size or proof type, or a damaged C1 output)",
                u64::from(config.sector_size),
                config.api_version
            )));
        }
        Ok(Self {
            config: config.clone(),
            public_params,
            public_inputs,
            vanilla_proofs,
        })
    }

    /// The config this job was checked against.
    pub fn config(&self) -> &PoRepConfig {
        &self.config
    }

    /// Number of partitions (one Groth16 proof each).
    pub fn partitions(&self) -> usize {
        self.vanilla_proofs.len()
    }

    fn check_partition(&self, k: usize) -> Result<(), Error> {
        if k >= self.partitions() {
            return Err(ErrorKind::PoRepConfig(format!(
                "partition {k} out of range (the job has {})",
                self.partitions()
            ))
            .into());
        }
        Ok(())
    }

    /// The circuit of partition `k`, exactly as `StackedCompound::circuit_proofs` builds it.
    pub fn circuit(&self, k: usize) -> Result<PoRepCircuit<Tree>, Error> {
        self.check_partition(k)?;
        guarded("porep circuit", || {
            Compound::<Tree>::circuit(
                &self.public_inputs,
                (),
                &self.vanilla_proofs[k],
                &self.public_params,
                Some(k),
            )
        })
    }

    /// The public inputs of partition `k` (without the leading ONE), as the verifier computes them.
    pub fn public_inputs(&self, k: usize) -> Result<Vec<Scalar>, Error> {
        self.check_partition(k)?;
        guarded("porep public inputs", || {
            Compound::<Tree>::generate_public_inputs(
                &self.public_inputs,
                &self.public_params,
                Some(k),
            )
        })
    }

    /// The shape of partition `k` (a counting pass, no witness): what a slot must hold.
    pub fn shape(&self, k: usize) -> Result<CircuitShape, Error> {
        crate::synth::circuit_shape(self.circuit(k)?)
    }

    /// Synthesizes partition `k` into `sink` (bellperson's prover sequence).
    pub fn synthesize_partition<S: AssignmentSink>(&self, k: usize, sink: S) -> Result<S, Error> {
        crate::synth::synthesize(self.circuit(k)?, sink)
    }

    /// Proves every partition with `backend` (fresh `r`, `s` from `rng`, one partition at a
    /// time so one assignment is in memory at once) and returns the proof bytes filecoin-proofs
    /// writes: the partitions' proofs concatenated.
    pub fn prove<B: Backend, R: RngCore>(
        &self,
        backend: &B,
        rng: &mut R,
    ) -> Result<Vec<u8>, Error> {
        let mut proofs = Vec::with_capacity(self.partitions());
        for k in 0..self.partitions() {
            let t = std::time::Instant::now();
            let assignment = self.synthesize_partition(k, VecSink::new())?.finish();
            let synth_s = t.elapsed().as_secs_f64();
            let (r, s) = (Scalar::random(&mut *rng), Scalar::random(&mut *rng));
            let t = std::time::Instant::now();
            let mut out = backend.prove_batch(&[assignment.as_assignment()], &[r], &[s])?;
            let proof = out
                .pop()
                .ok_or_else(|| Error::shape("proofs returned", 1, 0))?;
            tracing::debug!(
                partition = k,
                constraints = assignment.a.len(),
                synth_s,
                prove_s = t.elapsed().as_secs_f64(),
                backend = backend.name(),
                "porep partition proved"
            );
            proofs.push(proof);
        }
        assemble_proof(&proofs)
    }
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
    /// The PoRep parameter files of `config` in `cache_dir`.
    pub fn porep<Tree: 'static + MerkleTreeTrait>(
        config: &PoRepConfig,
        cache_dir: impl AsRef<Path>,
    ) -> Result<Self, Error> {
        check_config::<Tree>(config)?;
        let public_params = guarded("porep public parameters", || {
            filecoin_proofs::parameters::public_params::<Tree>(config)
        })?;
        let identifier = <Compound<Tree> as CacheableParameters<
            PoRepCircuit<Tree>,
            stacked::PublicParams<Tree>,
        >>::cache_identifier(&public_params);
        let dir = cache_dir.as_ref();
        Ok(Self {
            params: dir.join(parameter_id(&identifier)),
            vk: dir.join(verifying_key_id(&identifier)),
            meta: dir.join(metadata_id(&identifier)),
            identifier,
        })
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
}

/// Writes `bytes` to `path` through a temporary file in the same dir and a rename, so a reader
/// never sees a half-written file.
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

/// Generates local test parameters for the PoRep circuit of `config` with the fast generator
/// (ChaCha20 seeded from `seed`: reproducible) and writes `.params`, `.vk` and `.meta` into
/// `cache_dir` under the official names, replacing what is there. Never for production.
pub fn generate_porep_parameters<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    cache_dir: impl AsRef<Path>,
    seed: u64,
    progress: &(dyn Fn(GenProgress) + Sync),
) -> Result<(ParamFiles, Parameters<Bls12>), Error> {
    let files = ParamFiles::porep::<Tree>(config, &cache_dir)?;
    std::fs::create_dir_all(cache_dir.as_ref())?;
    let public_params = guarded("porep public parameters", || {
        filecoin_proofs::parameters::public_params::<Tree>(config)
    })?;
    let blank = <Compound<Tree> as CompoundProof<
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        PoRepCircuit<Tree>,
    >>::blank_circuit(&public_params);
    let t = std::time::Instant::now();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let params = crate::paramgen::generate_parameters(blank, &mut rng, progress)?;
    tracing::info!(
        identifier = %files.identifier,
        seconds = t.elapsed().as_secs_f64(),
        "porep parameters generated"
    );
    // The proving parameters first: a `.vk` without its `.params` is never left behind.
    write_atomic(&files.params, |w| Ok(params.write(w)?))?;
    write_atomic(&files.vk, |w| Ok(params.vk.write(w)?))?;
    let meta = CacheEntryMetadata {
        sector_size: u64::from(config.sector_size),
    };
    write_atomic(&files.meta, |w| {
        serde_json::to_writer(w, &meta).map_err(|e| fil_error("writing metadata", e))
    })?;
    Ok((files, params))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> PoRepConfig {
        porep_config(2048, [3; 32], ApiVersion::V1_2_0).unwrap()
    }

    #[test]
    fn unknown_sector_size_is_an_error_not_a_panic() {
        let e = porep_config(3000, [0; 32], ApiVersion::V1_2_0).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::PoRepConfig(_)), "{e}");
        assert!(e.to_string().contains("3000"), "{e}");
    }

    #[test]
    fn wrong_tree_shape_is_refused() {
        let e = ParamFiles::porep::<SectorShapeSub8>(&config(), "/nonexistent").unwrap_err();
        assert!(
            e.to_string().contains("not the one of a 2048-byte sector"),
            "{e}"
        );
    }

    #[test]
    fn param_files_use_the_official_names() {
        let f = ParamFiles::porep::<SectorShape2KiB>(&config(), "/cache").unwrap();
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
        // The id is a function of the identifier: another porep id is another parameter set.
        let other = porep_config(2048, [4; 32], ApiVersion::V1_2_0).unwrap();
        let g = ParamFiles::porep::<SectorShape2KiB>(&other, "/cache").unwrap();
        assert_eq!(
            f.circuit_id() == g.circuit_id(),
            f.identifier == g.identifier
        );
    }

    #[test]
    fn bad_json_names_the_problem() {
        let e = parse_c1::<SectorShape2KiB>(b"{\"vanilla_proofs\": [[").unwrap_err();
        assert!(e.to_string().contains("truncated JSON"), "{e}");
        let e = parse_c1::<SectorShape2KiB>(b"{\"vanilla_proofs\" 1}").unwrap_err();
        assert!(e.to_string().contains("malformed JSON"), "{e}");
        let e = parse_c1::<SectorShape2KiB>(b"{\"comm_r\": 5}").unwrap_err();
        assert!(e.to_string().contains("not a C1 output"), "{e}");
        assert!(matches!(e.kind(), ErrorKind::InvalidC1(_)));
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
