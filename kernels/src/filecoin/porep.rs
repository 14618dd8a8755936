//! PoRep C2: the Groth16 proofs of a sealed sector, from the C1 output.
//!
//! What a storage provider hands a C2 prover is the C1 output, in one of three forms, all read
//! by `open` (through [`super::open_job`]):
//! - filecoin-proofs-api's `SealCommitPhase1Output` JSON (`registered_proof` + vanilla proofs
//!   keyed by sector shape): what lotus and Curio workers get from `SealCommitPhase1`;
//! - lotus-bench's `Commit2In` (`{"SectorNum", "Phase1Out": <base64 of the former>, "SectorSize"}`);
//! - filecoin-proofs' own `SealCommitPhase1Output<Tree>` (the proof type must then be named).
//!
//! [`PoRepC2`] then mirrors `seal_commit_phase2_circuit_proofs` step for step: public parameters
//! from the [`PoRepConfig`], public inputs `{replica_id, tau: {comm_d, comm_r}, seed}`; per
//! partition `k` the circuit `StackedCompound::circuit(.., Some(k))` and its public inputs
//! `StackedCompound::generate_public_inputs(.., Some(k))`. Interactive PoRep only (also with
//! synthetic challenges); non-interactive PoRep needs proof aggregation and is refused.

use blstrs::Scalar;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::{
    DefaultPieceDomain, DefaultPieceHasher, PoRepConfig, SealCommitPhase1Output,
};
use filecoin_proofs_api::RegisteredSealProof;
use storage_proofs_core::api_version::{ApiFeature, ApiVersion};
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_porep::stacked::{self, StackedCircuit, StackedCompound, StackedDrg};

use super::{guarded, BlankVisitor, ProofKind, ProofRequest, RequestVisitor, TreeDomain};
use crate::{Error, ErrorKind};

/// The PoRep circuit of one partition, as filecoin-proofs builds it.
pub type PoRepCircuit<Tree> = StackedCircuit<Tree, DefaultPieceHasher>;

type Compound<Tree> = StackedCompound<Tree, DefaultPieceHasher>;
type PublicInputs<Tree> = stacked::PublicInputs<
    <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain,
    DefaultPieceDomain,
>;

fn invalid_c1(reason: impl Into<String>) -> Error {
    ErrorKind::InvalidC1(reason.into()).into()
}

/// A commitment of the C1 output as its domain, through filecoin-proofs' `as_safe_commitment`:
/// refused by name where it is not a field element (the domains' own conversion panics on it).
fn safe_commitment<D: Domain>(bytes: &[u8; 32], name: &str) -> Result<D, Error> {
    filecoin_proofs::as_safe_commitment(bytes, name)
        .map_err(|e| invalid_c1(format!("`{name}` is not a field element ({e:#})")))
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

/// Checks that `Tree` is the tree shape filecoin-proofs uses for the config's sector size and
/// that the config is an interactive PoRep.
fn check_config<Tree: 'static + MerkleTreeTrait>(config: &PoRepConfig) -> Result<(), Error> {
    let _: ApiVersion = config.api_version;
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

/// A checked C1 output: everything needed to build and prove its partitions (as a job:
/// [`super::FilecoinJob`]).
pub struct PoRepC2<Tree: 'static + MerkleTreeTrait> {
    registered: RegisteredSealProof,
    config: PoRepConfig,
    public_params: stacked::PublicParams<Tree>,
    public_inputs: PublicInputs<Tree>,
    vanilla_proofs: Vec<Vec<filecoin_proofs::VanillaSealProof<Tree>>>,
}

impl<Tree: 'static + MerkleTreeTrait> PoRepC2<Tree> {
    /// [`parse_c1`] then [`PoRepC2::new`].
    pub fn from_json(proof: RegisteredSealProof, json: &[u8]) -> Result<Self, Error> {
        Self::new(proof, parse_c1::<Tree>(json)?)
    }

    /// Checks a parsed C1 output against the config of `proof` (the checks of
    /// `seal_commit_phase2_circuit_proofs`, plus partition count and vanilla proof verification)
    /// and prepares the public parameters and inputs.
    pub fn new(
        proof: RegisteredSealProof,
        c1: SealCommitPhase1Output<Tree>,
    ) -> Result<Self, Error> {
        ProofKind::PoRep(proof).check_supported()?;
        let config = &proof.as_v1_config();
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
        // filecoin-proofs' own check: the domains' conversion to a field element panics on a
        // value at or above the modulus, so each must be one before any fil code sees it.
        let comm_d_safe: DefaultPieceDomain = safe_commitment(&comm_d, "comm_d")?;
        let comm_r_safe: TreeDomain<Tree> = safe_commitment(&comm_r, "comm_r")?;
        let replica_bytes: [u8; 32] = AsRef::<[u8]>::as_ref(&replica_id)
            .try_into()
            .map_err(|_| invalid_c1("`replica_id` is not 32 bytes"))?;
        let replica_id: TreeDomain<Tree> = safe_commitment(&replica_bytes, "replica_id")?;
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
            registered: proof,
            config: config.clone(),
            public_params,
            public_inputs,
            vanilla_proofs,
        })
    }

    /// The config this C1 output was checked against.
    pub fn config(&self) -> &PoRepConfig {
        &self.config
    }
}

impl<Tree: 'static + MerkleTreeTrait> ProofRequest for PoRepC2<Tree> {
    type Circuit = PoRepCircuit<Tree>;

    fn kind(&self) -> ProofKind {
        ProofKind::PoRep(self.registered)
    }

    fn partitions(&self) -> usize {
        self.vanilla_proofs.len()
    }

    /// Exactly as `StackedCompound::circuit_proofs` builds it.
    fn partition_circuit(&self, k: usize) -> Result<PoRepCircuit<Tree>, Error> {
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

    fn partition_inputs(&self, k: usize) -> Result<Vec<Scalar>, Error> {
        guarded("porep public inputs", || {
            Compound::<Tree>::generate_public_inputs(
                &self.public_inputs,
                &self.public_params,
                Some(k),
            )
        })
    }
}

/// The C1 output in filecoin-proofs-api's form (`registered_proof` + shape-keyed vanilla proofs).
fn parse_api_c1(input: &[u8]) -> Result<filecoin_proofs_api::seal::SealCommitPhase1Output, Error> {
    serde_json::from_slice(input).map_err(|e| {
        match super::json_error("C1 output", &e).into_kind() {
            ErrorKind::InvalidRequest(r) => invalid_c1(r),
            k => k.into(),
        }
    })
}

/// What lotus-bench's `Commit2In` envelope (`{"SectorNum", "Phase1Out", "SectorSize"}`) states
/// beside its C1 output; a field it leaves out is `None`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Commit2InFields {
    /// `SectorNum`: the sector's number.
    pub sector_num: Option<u64>,
    /// `SectorSize`: the sector's size in bytes, which must be the C1 output's.
    pub sector_size: Option<u64>,
}

/// A `Commit2In` envelope: its stated fields and the decoded inner C1 output.
struct Commit2In {
    fields: Commit2InFields,
    inner: Vec<u8>,
}

/// Reads lotus-bench's `Commit2In` envelope, if `input` is one (a JSON object with `Phase1Out`).
fn unwrap_commit2in(input: &[u8]) -> Result<Option<Commit2In>, Error> {
    #[derive(serde::Deserialize)]
    struct Raw {
        #[serde(rename = "Phase1Out")]
        phase1_out: Option<serde_json::Value>,
        #[serde(rename = "SectorNum")]
        sector_num: Option<serde_json::Value>,
        #[serde(rename = "SectorSize")]
        sector_size: Option<serde_json::Value>,
    }
    let Ok(raw) = serde_json::from_slice::<Raw>(input) else {
        return Ok(None);
    };
    let Some(phase1_out) = raw.phase1_out else {
        return Ok(None);
    };
    let serde_json::Value::String(b64) = phase1_out else {
        return Err(invalid_c1("`Phase1Out` is not a string"));
    };
    let number = |name: &str, v: Option<serde_json::Value>| match v {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            invalid_c1(format!(
                "the envelope's `{name}` is not an unsigned integer ({v})"
            ))
        }),
    };
    let fields = Commit2InFields {
        sector_num: number("SectorNum", raw.sector_num)?,
        sector_size: number("SectorSize", raw.sector_size)?,
    };
    let inner = super::decode_base64("`Phase1Out`", &b64).map_err(|e| invalid_c1(e.to_string()))?;
    Ok(Some(Commit2In { fields, inner }))
}

/// Refuses an envelope whose `SectorSize` is not the sector size of its C1 output's proof type.
fn check_envelope_size(fields: &Commit2InFields, proof: RegisteredSealProof) -> Result<(), Error> {
    let own = u64::from(proof.sector_size());
    match fields.sector_size {
        Some(stated) if stated != own => Err(invalid_c1(format!(
            "the envelope's `SectorSize` {stated} does not match its C1 output's `{}` ({own} \
             bytes)",
            ProofKind::PoRep(proof)
        ))),
        _ => Ok(()),
    }
}

/// What a request states about a C1 output besides the C1 output itself (cuzk's
/// `SubmitProofRequest` fields); `None`: not stated. See [`check_commit2in`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stated {
    /// `miner_id`: the miner's actor id (the prover id is its id address payload).
    pub miner_id: Option<u64>,
    /// `sector_number`.
    pub sector_number: Option<u64>,
    /// `sector_size` in bytes.
    pub sector_size: Option<u64>,
}

/// Reads a `Commit2In` envelope as a prover receives it from Curio and checks that everything
/// stated twice agrees, naming both values when not: the request's `sector_number` and
/// `sector_size` against the envelope's `SectorNum` and `SectorSize`; the envelope's
/// `SectorSize` against its C1 output's proof type (which must be supported); and, when the
/// miner and the sector are stated, the C1 output's replica id against the one filecoin-proofs
/// derives from them (`generate_replica_id` over the prover id, the sector number, the ticket,
/// `comm_d` and the proof type's porep id), so a C1 output sealed for another miner or sector is
/// refused. Returns the C1 output's kind.
pub fn check_commit2in(input: &[u8], stated: Stated) -> Result<ProofKind, Error> {
    let Some(envelope) = unwrap_commit2in(input)? else {
        return Err(
            match serde_json::from_slice::<serde::de::IgnoredAny>(input) {
                Err(e) => super::json_error("C1 envelope (`Commit2In`)", &e),
                Ok(_) => invalid_c1("not a `Commit2In` envelope (no `Phase1Out`)"),
            },
        );
    };
    let fields = envelope.fields;
    if let (Some(ours), Some(theirs)) = (stated.sector_number, fields.sector_num) {
        if ours != theirs {
            return Err(invalid_c1(format!(
                "sector_number {ours} does not match the envelope's `SectorNum` {theirs}"
            )));
        }
    }
    if let (Some(ours), Some(theirs)) = (stated.sector_size, fields.sector_size) {
        if ours != theirs {
            return Err(invalid_c1(format!(
                "sector_size {ours} does not match the envelope's `SectorSize` {theirs}"
            )));
        }
    }
    let c1 = parse_api_c1(&envelope.inner)?;
    let kind = ProofKind::PoRep(c1.registered_proof);
    kind.check_supported()?;
    check_envelope_size(&fields, c1.registered_proof)?;
    let sector = stated.sector_number.or(fields.sector_num);
    if let (Some(miner), Some(sector)) = (stated.miner_id, sector) {
        let config = guarded("porep config", || Ok(c1.registered_proof.as_v1_config()))?;
        let expected = stacked::generate_replica_id::<filecoin_proofs::DefaultTreeHasher, _>(
            &super::prover_id(miner),
            sector,
            &c1.ticket,
            c1.comm_d,
            &config.porep_id,
        );
        if expected != c1.replica_id {
            return Err(invalid_c1(format!(
                "miner_id {miner} and sector_number {sector} do not match the C1 output's replica \
                 id (a C1 output sealed for another miner or sector)"
            )));
        }
    }
    Ok(kind)
}

/// The kind of a lotus-bench `Commit2In` wrapper (from the C1 output inside it).
pub(super) fn detect_commit2in(input: &[u8]) -> Result<ProofKind, Error> {
    check_commit2in(input, Stated::default())
}

/// Opens a C1 output (any of the three forms) for `proof`.
pub(super) fn open<V: RequestVisitor>(
    proof: RegisteredSealProof,
    input: &[u8],
    visitor: V,
) -> Result<V::Out, Error> {
    fn inner<Tree: 'static + MerkleTreeTrait, V: RequestVisitor>(
        proof: RegisteredSealProof,
        input: &[u8],
        visitor: V,
    ) -> Result<V::Out, Error> {
        let envelope = unwrap_commit2in(input)?;
        if let Some(e) = &envelope {
            check_envelope_size(&e.fields, proof)?;
        }
        let input = envelope.as_ref().map_or(input, |e| &e.inner[..]);
        #[derive(serde::Deserialize)]
        struct Probe {
            registered_proof: Option<serde::de::IgnoredAny>,
        }
        // filecoin-proofs-api writes `registered_proof` first: a truncated api C1 output is still
        // recognised as one (and gets the api form's error).
        const KEY: &[u8] = b"\"registered_proof\"";
        let api_form = serde_json::from_slice::<Probe>(input)
            .map(|p| p.registered_proof.is_some())
            .unwrap_or(false)
            || input[..input.len().min(256)]
                .windows(KEY.len())
                .any(|w| w == KEY);
        let c1: SealCommitPhase1Output<Tree> = if api_form {
            let api = parse_api_c1(input)?;
            if api.registered_proof != proof {
                return Err(invalid_c1(format!(
                    "a C1 output of `{}`, not of `{}`",
                    ProofKind::PoRep(api.registered_proof),
                    ProofKind::PoRep(proof)
                )));
            }
            // checked with the other commitments in `PoRepC2::new`
            let replica_id = <[u8; 32]>::from(api.replica_id);
            SealCommitPhase1Output {
                vanilla_proofs: guarded("vanilla proofs", || api.vanilla_proofs.try_into())
                    .map_err(|e| {
                        invalid_c1(format!("vanilla proofs of another sector shape ({e})"))
                    })?,
                comm_r: api.comm_r,
                comm_d: api.comm_d,
                replica_id: replica_id.into(),
                seed: api.seed,
                ticket: api.ticket,
            }
        } else {
            parse_c1::<Tree>(input)?
        };
        visitor.visit(PoRepC2::<Tree>::new(proof, c1)?)
    }
    ProofKind::PoRep(proof).check_supported()?;
    super::with_tree!(u64::from(proof.sector_size()), Tree => inner::<Tree, V>(proof, input, visitor))
}

/// Calls `visitor` with the blank PoRep circuit of `proof` (what parameter generation uses).
pub(super) fn visit_blank<V: BlankVisitor>(
    proof: RegisteredSealProof,
    visitor: V,
) -> Result<V::Out, Error> {
    super::with_tree!(u64::from(proof.sector_size()), Tree => {
        let config = proof.as_v1_config();
        check_config::<Tree>(&config)?;
        let public_params =
            guarded("porep public parameters", || filecoin_proofs::parameters::public_params::<Tree>(&config))?;
        let blank = <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, PoRepCircuit<Tree>>>::blank_circuit(&public_params);
        visitor.visit(blank)
    })
}

/// The fields lotus-bench's `Commit2In` envelope states beside its C1 output (`SectorNum`,
/// `SectorSize`), or `None` if `input` is not such an envelope.
pub fn commit2in_fields(input: &[u8]) -> Result<Option<Commit2InFields>, Error> {
    Ok(unwrap_commit2in(input)?.map(|w| w.fields))
}

/// A C2 proof checked with filecoin-proofs-api's `verify_seal` against the C1 output it was
/// proved from (any of the api forms: the plain `SealCommitPhase1Output` JSON or lotus-bench's
/// `Commit2In`): the commitments, ticket and seed come from the C1 output, the prover id from
/// `miner_id` (as Curio derives it), the sector number from `sector_number` or else from the
/// `Commit2In` wrapper. `Ok(false)` is a proof that does not verify; an error is a request that
/// cannot be checked (no sector number, malformed C1). filecoin-proofs reads the `.vk` from its
/// parameter cache (`FIL_PROOFS_PARAMETER_CACHE`).
pub fn verify_seal(
    c1: &[u8],
    proof: &[u8],
    miner_id: u64,
    sector_number: Option<u64>,
) -> Result<bool, Error> {
    let wrapped = unwrap_commit2in(c1)?;
    let sector = sector_number
        .or(wrapped.as_ref().and_then(|w| w.fields.sector_num))
        .ok_or_else(|| {
            invalid_c1("no sector number: the C1 output is not in a `Commit2In` wrapper; name it")
        })?;
    let api = parse_api_c1(wrapped.as_ref().map_or(c1, |w| &w.inner))?;
    guarded("verify_seal", || {
        filecoin_proofs_api::seal::verify_seal(
            api.registered_proof,
            api.comm_r,
            api.comm_d,
            super::prover_id(miner_id),
            filecoin_proofs_api::SectorId::from(sector),
            api.ticket,
            api.seed,
            proof,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use filecoin_proofs::{SectorShape2KiB, SectorShape32GiB};

    /// Opens `input` as a `proof` request's job.
    fn open(proof: RegisteredSealProof, input: &[u8]) -> Result<Box<dyn crate::job::Job>, Error> {
        super::super::open_job(ProofKind::PoRep(proof), input)
    }

    /// A `Commit2In` envelope around an api C1 output of `StackedDrg2KiBV1_1` (no vanilla
    /// proofs: the envelope checks come before the proofs are read) sealed for miner 1000,
    /// sector 42.
    fn envelope(sector_num: u64, sector_size: u64) -> Vec<u8> {
        use filecoin_proofs_api::seal::{SealCommitPhase1Output, VanillaSealProof};
        let proof = RegisteredSealProof::StackedDrg2KiBV1_1;
        let (ticket, comm_d) = ([5u8; 32], [6u8; 32]);
        let replica_id = stacked::generate_replica_id::<filecoin_proofs::DefaultTreeHasher, _>(
            &super::super::prover_id(1000),
            42,
            &ticket,
            comm_d,
            &proof.as_v1_config().porep_id,
        );
        let c1 = SealCommitPhase1Output {
            registered_proof: proof,
            vanilla_proofs: VanillaSealProof::StackedDrg2KiBV1(vec![]),
            comm_r: [4; 32],
            comm_d,
            replica_id,
            seed: [3; 32],
            ticket,
        };
        let inner = super::super::encode_base64(&serde_json::to_vec(&c1).unwrap());
        format!(
            r#"{{"SectorNum": {sector_num}, "Phase1Out": "{inner}", "SectorSize": {sector_size}}}"#
        )
        .into_bytes()
    }

    /// What a Curio request states beside its `Commit2In` envelope (`miner_id`,
    /// `sector_number`, `sector_size`) must agree with the envelope and its C1 output.
    #[test]
    fn envelope_fields_must_agree_with_what_is_stated() {
        let good = envelope(42, 2048);
        let all = Stated {
            miner_id: Some(1000),
            sector_number: Some(42),
            sector_size: Some(2048),
        };
        let kind = ProofKind::PoRep(RegisteredSealProof::StackedDrg2KiBV1_1);
        assert_eq!(check_commit2in(&good, all).unwrap(), kind);
        // Fields not stated are not compared.
        assert_eq!(check_commit2in(&good, Stated::default()).unwrap(), kind);
        let cases = [
            (
                Stated {
                    sector_number: Some(43),
                    ..all
                },
                "sector_number 43 does not match the envelope's `SectorNum` 42",
            ),
            (
                Stated {
                    sector_size: Some(32 << 30),
                    ..all
                },
                "sector_size 34359738368 does not match the envelope's `SectorSize` 2048",
            ),
            (
                Stated {
                    miner_id: Some(1001),
                    ..all
                },
                "miner_id 1001 and sector_number 42 do not match the C1 output's replica id",
            ),
        ];
        for (bad, want) in cases {
            let e = check_commit2in(&good, bad).unwrap_err();
            assert!(e.to_string().contains(want), "{e}\nwanted: {want}");
        }
    }

    #[test]
    fn an_envelope_whose_sector_size_is_not_its_c1_outputs_is_refused() {
        // The envelope says 32 GiB, its C1 output is of a 2 KiB sector: refused whether the
        // request's `sector_size` is unstated or agrees with the envelope.
        let lying = envelope(42, 32 << 30);
        for sector_size in [None, Some(32 << 30)] {
            let stated = Stated {
                sector_number: Some(42),
                sector_size,
                ..Stated::default()
            };
            let e = check_commit2in(&lying, stated).unwrap_err();
            assert!(
                e.to_string().contains(
                    "the envelope's `SectorSize` 34359738368 does not match its C1 output's \
                     `porep:StackedDrg2KiBV1_1` (2048 bytes)"
                ),
                "{e}"
            );
        }
        // The same envelope opened as a request file (no Curio fields) is refused too.
        let e = super::super::detect_kind(&lying).unwrap_err();
        assert!(e.to_string().contains("`SectorSize` 34359738368"), "{e}");
        let e = open(RegisteredSealProof::StackedDrg2KiBV1_1, &lying)
            .err()
            .unwrap();
        assert!(e.to_string().contains("`SectorSize` 34359738368"), "{e}");
        // A `SectorNum` that is not a number is named.
        let e = check_commit2in(
            br#"{"SectorNum": "x", "Phase1Out": "", "SectorSize": 2048}"#,
            Stated::default(),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("`SectorNum` is not an unsigned integer"),
            "{e}"
        );
    }

    #[test]
    fn wrong_tree_shape_is_refused() {
        let config = RegisteredSealProof::StackedDrg2KiBV1_1.as_v1_config();
        let e = check_config::<SectorShape32GiB>(&config).unwrap_err();
        assert!(e.to_string().contains("8-0-0"), "{e}");
        check_config::<SectorShape2KiB>(&config).unwrap();
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

    /// A 32-byte value at or above the scalar modulus, where a C1 output states a field element,
    /// is refused by name (the fil crates' conversion panics on it).
    #[test]
    fn values_above_the_modulus_are_refused_by_name() {
        use filecoin_proofs_api::seal::{SealCommitPhase1Output, VanillaSealProof};
        let high = [255u8; 32];
        let c1 = |replica_id: [u8; 32], comm_r: [u8; 32], comm_d: [u8; 32]| {
            let c1 = SealCommitPhase1Output {
                registered_proof: RegisteredSealProof::StackedDrg2KiBV1_1,
                vanilla_proofs: VanillaSealProof::StackedDrg2KiBV1(vec![vec![]]),
                comm_r,
                comm_d,
                replica_id: filecoin_hashers::poseidon::PoseidonDomain::try_from_bytes(&replica_id)
                    .unwrap(),
                seed: [3; 32],
                ticket: [5; 32],
            };
            serde_json::to_vec(&c1).unwrap()
        };
        for (json, name) in [
            (c1(high, [4; 32], [6; 32]), "replica_id"),
            (c1([1; 32], high, [6; 32]), "comm_r"),
            (c1([1; 32], [4; 32], high), "comm_d"),
        ] {
            let e = open(RegisteredSealProof::StackedDrg2KiBV1_1, &json)
                .err()
                .unwrap();
            assert!(matches!(e.kind(), ErrorKind::InvalidC1(_)), "{e}");
            assert!(
                e.to_string()
                    .contains(&format!("`{name}` is not a field element")),
                "{e}"
            );
        }
    }

    #[test]
    fn commit2in_with_bad_base64_names_the_field() {
        let e = open(
            RegisteredSealProof::StackedDrg2KiBV1_1,
            b"{\"SectorNum\": 1, \"Phase1Out\": \"@@@\"}",
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("`Phase1Out` is not base64"), "{e}");
        let inner = super::super::encode_base64(b"{\"registered_proof\": \"StackedDrg8MiBV1_1\"}");
        let e = open(
            RegisteredSealProof::StackedDrg2KiBV1_1,
            format!("{{\"Phase1Out\": \"{inner}\"}}").as_bytes(),
        )
        .err()
        .unwrap();
        assert!(matches!(e.kind(), ErrorKind::InvalidC1(_)), "{e}");
    }
}
