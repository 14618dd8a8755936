//! WinningPoSt and WindowPoSt: the Groth16 proofs of a PoSt, from the sectors' vanilla proofs.
//!
//! What a storage provider hands a PoSt prover is a [`PoStRequest`]: the registered PoSt proof,
//! the prover id, the randomness and one vanilla proof per challenged sector, each exactly the
//! bytes filecoin-proofs-api's `generate_single_vanilla_proof` returns (the bincode of a
//! `FallbackPoStSectorProof<Tree>`), base64 in the JSON:
//!
//! ```json
//! {
//!   "registered_proof": "StackedDrgWindow32GiBV1_2",
//!   "prover_id": [1, 0, 0, ..., 0],
//!   "randomness": [17, 34, ..., 12],
//!   "vanilla_proofs": ["<base64>", "<base64>"],
//!   "partition_index": 3
//! }
//! ```
//!
//! [`PoSt`] then mirrors filecoin-proofs step for step:
//! - WinningPoSt (`generate_winning_post_with_vanilla`): exactly one vanilla proof (the sector
//!   `generate_winning_post_sector_challenge` picked), one partition whose 66 "sectors" are the
//!   66 challenges of that sector (the winning setup parameters);
//! - WindowPoSt (`generate_window_post_with_vanilla`): `ceil(sectors / sector_count)` partitions
//!   of `sector_count` sectors each, the last one padded by repeating its last sector;
//! - with `partition_index` (`generate_single_window_post_with_vanilla`, WindowPoSt V1_2 only):
//!   one partition, the vanilla proofs of that partition's sectors only; the proof is that
//!   partition's 192 bytes, to be merged in partition order with the others
//!   (`merge_window_post_partition_proofs`).
//!
//! Partition `k`'s circuit is `FallbackPoStCompound::circuit(.., Some(k))` over the vanilla
//! proofs partitioned by filecoin-proofs' own `partition_vanilla_proofs`, and its public inputs
//! are `FallbackPoStCompound::generate_public_inputs(.., Some(k))` over the sectors the verifier
//! (`verify_winning_post`, `verify_window_post`) lists.
//!
//! The vanilla proofs are verified before any circuit is built, against the verifier's view of
//! the request: vanilla proofs of another randomness, proof type or sector are refused with an
//! error naming the partition and its sectors. The prover id is not part of the vanilla proofs
//! nor of the circuit's public inputs (only of WinningPoSt's sector choice, which the verifier
//! does not redo): it cannot be checked here.

use blstrs::Scalar;
use filecoin_hashers::Hasher;
use filecoin_proofs::{FallbackPoStSectorProof, PoStConfig, PoStType};
use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof};
use serde::{Deserialize, Serialize};
use storage_proofs_core::api_version::ApiVersion;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_post::fallback::{
    self, FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound, PublicSector,
};

use super::{guarded, BlankVisitor, ProofKind, ProofRequest, RequestVisitor, TreeDomain};
use crate::{Error, ErrorKind};

/// The PoSt circuit of one partition, as filecoin-proofs builds it.
pub type PoStCircuit<Tree> = FallbackPoStCircuit<Tree>;

type Compound<Tree> = FallbackPoStCompound<Tree>;
type PublicInputs<Tree> = fallback::PublicInputs<TreeDomain<Tree>>;
/// One partition's vanilla proof (`sector_count` sector proofs), as the circuit takes it.
type PartitionProof<Tree> = fallback::Proof<<Tree as MerkleTreeTrait>::Proof>;

fn invalid(reason: impl Into<String>) -> Error {
    ErrorKind::InvalidRequest(reason.into()).into()
}

/// A PoSt proof request: what [`PoSt`] proves, in the JSON form a job file or a socket
/// carries (`serde`; unknown fields are refused so a misspelt `partition_index` is not ignored).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoStRequest {
    /// The registered PoSt proof, by its filecoin-proofs-api name (`StackedDrgWinning32GiBV1`,
    /// `StackedDrgWindow32GiBV1_2`): the PoSt type, sector size and API version.
    pub registered_proof: RegisteredPoStProof,
    /// The prover id, 32 bytes as filecoin-proofs-api takes it (`ProverId`, a field element:
    /// the miner actor id in little-endian, zero-padded).
    pub prover_id: [u8; 32],
    /// The PoSt randomness (`ChallengeSeed`), 32 bytes, a field element (lotus clears the top
    /// two bits): the same that generated the sectors' challenges.
    pub randomness: [u8; 32],
    /// One vanilla proof per challenged sector, in base64 (standard alphabet): each exactly the
    /// bytes filecoin-proofs-api's `generate_single_vanilla_proof` returns (bincode of
    /// `FallbackPoStSectorProof<Tree>`: sector id, `comm_r`, the inclusion proofs of the
    /// sector's challenges). WinningPoSt: exactly one. WindowPoSt: the sectors in ascending
    /// sector id order (the verifier's order), or with [`partition_index`](Self::partition_index)
    /// the sectors of that partition only.
    pub vanilla_proofs: Vec<String>,
    /// WindowPoSt only, optional: prove one partition (filecoin-proofs-api's
    /// `generate_single_window_post_with_vanilla`): `vanilla_proofs` are the at most
    /// `sector_count` sectors of partition `partition_index` and the proof is that partition's
    /// 192 bytes. Absent: prove every partition (`generate_window_post_with_vanilla`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_index: Option<usize>,
}

/// The request as read, before the proof type name is checked (so a wrong name gets a clear
/// error rather than serde's list of variants).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequest {
    registered_proof: serde_json::Value,
    prover_id: [u8; 32],
    randomness: [u8; 32],
    vanilla_proofs: Vec<String>,
    #[serde(default)]
    partition_index: Option<usize>,
}

/// The PoSt proof a `registered_proof` value names; another proof family or an unknown name
/// is an error saying so.
fn registered_post_proof(v: &serde_json::Value) -> Result<RegisteredPoStProof, Error> {
    let Some(name) = v.as_str() else {
        return Err(invalid(format!(
            "`registered_proof` is {v}, not a proof type name"
        )));
    };
    if let Some(p) = super::parse_variant::<RegisteredPoStProof>(name) {
        return Ok(p);
    }
    let what = if super::parse_variant::<RegisteredSealProof>(name).is_some() {
        "a registered seal proof (PoRep)"
    } else if super::parse_variant::<RegisteredUpdateProof>(name).is_some() {
        "a registered update proof (SnapDeals)"
    } else {
        "not a registered proof"
    };
    Err(invalid(format!(
        "`registered_proof` `{name}` is {what}, not a registered PoSt proof (for example \
         `StackedDrgWindow32GiBV1_2`)"
    )))
}

impl PoStRequest {
    /// A request proving every partition, from the vanilla proofs as filecoin-proofs-api's
    /// `generate_single_vanilla_proof` returns them.
    pub fn new<P: AsRef<[u8]>>(
        registered_proof: RegisteredPoStProof,
        prover_id: [u8; 32],
        randomness: [u8; 32],
        vanilla_proofs: &[P],
    ) -> Self {
        Self {
            registered_proof,
            prover_id,
            randomness,
            vanilla_proofs: vanilla_proofs
                .iter()
                .map(|p| super::encode_base64(p.as_ref()))
                .collect(),
            partition_index: None,
        }
    }

    /// The same request proving only partition `k` (WindowPoSt; `vanilla_proofs` must then be
    /// the sectors of that partition).
    pub fn with_partition_index(mut self, k: usize) -> Self {
        self.partition_index = Some(k);
        self
    }

    /// Parses a request. Errors say whether the JSON is truncated, malformed, not a PoSt request
    /// (which field), or names another proof type.
    pub fn from_json(input: &[u8]) -> Result<Self, Error> {
        let raw: RawRequest =
            serde_json::from_slice(input).map_err(|e| super::json_error("PoSt request", &e))?;
        Ok(Self {
            registered_proof: registered_post_proof(&raw.registered_proof)?,
            prover_id: raw.prover_id,
            randomness: raw.randomness,
            vanilla_proofs: raw.vanilla_proofs,
            partition_index: raw.partition_index,
        })
    }

    /// The request as JSON (what [`PoStRequest::from_json`] and [`super::detect_kind`] read).
    pub fn to_json(&self) -> Result<Vec<u8>, Error> {
        serde_json::to_vec(self).map_err(|e| super::fil_error("writing a PoSt request", e))
    }

    /// The vanilla proof bytes (base64-decoded); errors name the entry.
    pub fn vanilla_proof_bytes(&self) -> Result<Vec<Vec<u8>>, Error> {
        self.vanilla_proofs
            .iter()
            .enumerate()
            .map(|(i, s)| super::decode_base64(&format!("`vanilla_proofs[{i}]`"), s))
            .collect()
    }
}

/// The filecoin-proofs config of a registered PoSt proof.
fn post_config(proof: RegisteredPoStProof) -> Result<PoStConfig, Error> {
    guarded("PoSt config", || Ok(proof.as_v1_config()))
}

/// Decodes one vanilla proof as filecoin-proofs-api does (`bincode::deserialize`), except that
/// trailing bytes are refused and the input length bounds what is read.
fn decode_vanilla_proof<Tree: 'static + MerkleTreeTrait>(
    i: usize,
    bytes: &[u8],
    proof: RegisteredPoStProof,
) -> Result<FallbackPoStSectorProof<Tree>, Error> {
    use bincode::Options;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .reject_trailing_bytes()
        .with_limit(bytes.len() as u64)
        .deserialize(bytes)
        .map_err(|e| {
            invalid(format!(
                "`vanilla_proofs[{i}]` is not a vanilla proof of `{}` ({e}); hint: the bytes of \
                 filecoin-proofs-api's `generate_single_vanilla_proof`, for this sector size",
                ProofKind::PoSt(proof)
            ))
        })
}

/// The sectors (ids) whose vanilla proof fails its own challenges: `comm_r` is not
/// `H(comm_c || comm_r_last)`, or an inclusion proof is not of `comm_r_last` or not of the leaf
/// `generate_fallback_sector_challenges` challenges (the sector at position `first + i`). Only
/// to name the culprits once filecoin-proofs' check has failed.
fn failing_sectors<Tree: 'static + MerkleTreeTrait>(
    config: &PoStConfig,
    pub_params: &fallback::PublicParams,
    randomness: TreeDomain<Tree>,
    first: usize,
    proofs: &[FallbackPoStSectorProof<Tree>],
) -> Vec<String> {
    use filecoin_hashers::HashFunction;
    use storage_proofs_core::merkle::MerkleProofTrait;
    let fails = |i: usize, p: &FallbackPoStSectorProof<Tree>| {
        let Some(s) = p.vanilla_proof.sectors.first() else {
            return true;
        };
        if <Tree::Hasher as Hasher>::Function::hash2(&s.comm_c, &s.comm_r_last) != p.comm_r {
            return true;
        }
        s.inclusion_proofs.iter().enumerate().any(|(n, proof)| {
            let index = fallback::get_challenge_index(
                config.api_version,
                first.saturating_add(i),
                config.challenge_count,
                n,
            );
            let leaf = fallback::generate_leaf_challenge(
                pub_params,
                randomness,
                u64::from(p.sector_id),
                index,
            );
            proof.root() != s.comm_r_last || !proof.validate(leaf as usize)
        })
    };
    proofs
        .iter()
        .enumerate()
        .filter(|&(i, p)| fails(i, p))
        .map(|(_, p)| u64::from(p.sector_id).to_string())
        .collect()
}

/// A checked PoSt request: everything needed to build and prove its partitions (as a job:
/// [`super::FilecoinJob`]).
pub struct PoSt<Tree: 'static + MerkleTreeTrait> {
    registered: RegisteredPoStProof,
    config: PoStConfig,
    pub_params: fallback::PublicParams,
    /// What filecoin-proofs' prover passes to `FallbackPoStCompound::circuit`.
    prover_inputs: PublicInputs<Tree>,
    /// The sectors the verifier lists (WinningPoSt: the sector once per winning "sector").
    verifier_inputs: PublicInputs<Tree>,
    partition_proofs: Vec<PartitionProof<Tree>>,
    partition_index: Option<usize>,
}

impl<Tree: 'static + MerkleTreeTrait> PoSt<Tree> {
    /// [`PoStRequest::from_json`] then [`PoSt::new`].
    pub fn from_json(proof: RegisteredPoStProof, input: &[u8]) -> Result<Self, Error> {
        Self::new(proof, PoStRequest::from_json(input)?)
    }

    /// Checks a request against `proof` (proof type, tree shape, vanilla proof count, order and
    /// shape, randomness and prover id as field elements), verifies its vanilla proofs and
    /// partitions them as filecoin-proofs does.
    pub fn new(proof: RegisteredPoStProof, request: PoStRequest) -> Result<Self, Error> {
        let kind = ProofKind::PoSt(proof);
        if request.registered_proof != proof {
            return Err(invalid(format!(
                "a request of `{}`, not of `{kind}`",
                ProofKind::PoSt(request.registered_proof)
            )));
        }
        let size = u64::from(proof.sector_size());
        let shape: Result<String, Error> = super::with_tree!(size, T => Ok(T::display()));
        if shape? != Tree::display() {
            return Err(ErrorKind::PoRepConfig(format!(
                "tree shape `{}` is not the one of a {size}-byte sector",
                Tree::display()
            ))
            .into());
        }
        let config = post_config(proof)?;
        let count = request.vanilla_proofs.len();
        check_count(kind, &config, count, request.partition_index)?;
        let randomness: TreeDomain<Tree> =
            filecoin_proofs::as_safe_commitment(&request.randomness, "randomness")
                .map_err(|e| invalid(format!("`randomness` is not a field element ({e:#})")))?;
        let prover_id: TreeDomain<Tree> =
            filecoin_proofs::as_safe_commitment(&request.prover_id, "prover_id")
                .map_err(|e| invalid(format!("`prover_id` is not a field element ({e:#})")))?;
        let vanilla_proofs = decode_vanilla_proofs::<Tree>(&request, proof, &config)?;
        let (pub_params, partitions) = setup::<Tree>(&config, count)?;
        let partition_count = partitions.unwrap_or(1);
        let pub_sectors: Vec<PublicSector<TreeDomain<Tree>>> = vanilla_proofs
            .iter()
            .map(|p| PublicSector {
                id: p.sector_id,
                comm_r: p.comm_r,
            })
            .collect();
        let prover_inputs = fallback::PublicInputs {
            randomness,
            prover_id,
            sectors: pub_sectors.clone(),
            k: request.partition_index,
        };
        // verify_winning_post lists each sector once per winning "sector" (the challenges).
        let verifier_sectors = match config.typ {
            PoStType::Winning => (0..pub_params.sector_count)
                .flat_map(|_| pub_sectors.iter().cloned())
                .collect(),
            PoStType::Window => pub_sectors,
        };
        let verifier_inputs = fallback::PublicInputs {
            randomness,
            prover_id,
            sectors: verifier_sectors,
            k: None,
        };

        let partition_proofs = partition(
            kind,
            &config,
            &pub_params,
            &prover_inputs,
            request.partition_index,
            partition_count,
            &vanilla_proofs,
        )?;
        let checked = Self {
            registered: proof,
            config,
            pub_params,
            prover_inputs,
            verifier_inputs,
            partition_proofs,
            partition_index: request.partition_index,
        };
        let expected = if checked.partition_index.is_some() {
            1
        } else {
            partition_count
        };
        if checked.partition_proofs.len() != expected {
            return Err(Error::shape(
                "PoSt partitions",
                expected,
                checked.partition_proofs.len(),
            ));
        }
        checked.verify_vanilla()?;
        Ok(checked)
    }

    /// Verifies each partition's vanilla proof against the sectors the verifier lists (for
    /// WinningPoSt all 66 challenges, where filecoin-proofs' own check sees the first).
    fn verify_vanilla(&self) -> Result<(), Error> {
        let per_partition = self.pub_params.sector_count;
        for (k, proof) in self.partition_proofs.iter().enumerate() {
            let sectors = self
                .verifier_inputs
                .sectors
                .chunks(per_partition)
                .nth(k)
                .unwrap_or(&[])
                .to_vec();
            let ids: Vec<String> = self
                .prover_inputs
                .sectors
                .chunks(per_partition)
                .nth(k)
                .unwrap_or(&[])
                .iter()
                .map(|s| u64::from(s.id).to_string())
                .collect();
            let global = self.partition_index.unwrap_or(0) + k;
            let inputs = fallback::PublicInputs {
                randomness: self.verifier_inputs.randomness,
                prover_id: self.verifier_inputs.prover_id,
                sectors,
                k: Some(global),
            };
            let valid = guarded("vanilla proof verification", || {
                FallbackPoSt::<Tree>::verify(&self.pub_params, &inputs, proof)
            })?;
            if !valid {
                return Err(invalid(format!(
                    "the vanilla proofs of partition {global} ({} {}) do not verify for this \
                     randomness and `{}` (vanilla proofs of another randomness, proof type or sector, \
                     or damaged)",
                    if ids.len() == 1 { "sector" } else { "sectors" },
                    ids.join(", "),
                    ProofKind::PoSt(self.registered)
                )));
            }
        }
        Ok(())
    }

    /// The filecoin-proofs config of the job's proof type.
    pub fn config(&self) -> &PoStConfig {
        &self.config
    }
}

impl<Tree: 'static + MerkleTreeTrait> ProofRequest for PoSt<Tree> {
    type Circuit = PoStCircuit<Tree>;

    fn kind(&self) -> ProofKind {
        ProofKind::PoSt(self.registered)
    }

    fn partitions(&self) -> usize {
        self.partition_proofs.len()
    }

    /// Exactly as `FallbackPoStCompound::circuit_proofs` builds it in `prove_with_vanilla`.
    fn partition_circuit(&self, k: usize) -> Result<PoStCircuit<Tree>, Error> {
        guarded("PoSt circuit", || {
            <Compound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, PoStCircuit<Tree>>>::circuit(
                &self.prover_inputs,
                Default::default(),
                &self.partition_proofs[k],
                &self.pub_params,
                Some(k),
            )
        })
    }

    /// As `verify_winning_post` / `verify_window_post` compute them. With a `partition_index`
    /// (V1_2 only): those of that partition, computed over its sectors alone with `Some(0)`,
    /// which equals the verifier's `Some(partition_index)` over all sectors since V1_2
    /// challenges do not depend on the sector's position.
    fn partition_inputs(&self, k: usize) -> Result<Vec<Scalar>, Error> {
        guarded("PoSt public inputs", || {
            <Compound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, PoStCircuit<Tree>>>::generate_public_inputs(
                &self.verifier_inputs,
                &self.pub_params,
                Some(k),
            )
        })
    }
}

/// Checks the number of vanilla proofs and the `partition_index` against the PoSt type.
fn check_count(
    kind: ProofKind,
    config: &PoStConfig,
    count: usize,
    partition_index: Option<usize>,
) -> Result<(), Error> {
    let sector_count = config.sector_count;
    match (&config.typ, partition_index) {
        (PoStType::Winning, Some(_)) => {
            return Err(invalid(format!(
                "`partition_index` is for WindowPoSt, `{kind}` is a WinningPoSt"
            )));
        }
        (PoStType::Winning, None) if count != sector_count => {
            return Err(invalid(format!(
                "{count} vanilla proofs, a WinningPoSt takes {sector_count} (the challenged sector's)"
            )));
        }
        (PoStType::Window, _) if count == 0 => return Err(invalid("no vanilla proofs")),
        (PoStType::Window, Some(k)) => {
            if config.api_version != ApiVersion::V1_2_0 {
                return Err(invalid(format!(
                    "`partition_index` needs a V1_2 WindowPoSt proof type, not `{kind}`"
                )));
            }
            if count > sector_count {
                return Err(invalid(format!(
                    "{count} vanilla proofs for partition {k}, a `{kind}` partition has at most \
                     {sector_count} sectors"
                )));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Decodes the request's vanilla proofs and checks each: one sector, the PoSt type's challenge
/// count, the sectors in ascending id order.
fn decode_vanilla_proofs<Tree: 'static + MerkleTreeTrait>(
    request: &PoStRequest,
    proof: RegisteredPoStProof,
    config: &PoStConfig,
) -> Result<Vec<FallbackPoStSectorProof<Tree>>, Error> {
    let kind = ProofKind::PoSt(proof);
    let bytes = request.vanilla_proof_bytes()?;
    let mut vanilla_proofs = Vec::with_capacity(bytes.len());
    for (i, b) in bytes.iter().enumerate() {
        let p = decode_vanilla_proof::<Tree>(i, b, proof)?;
        let id = u64::from(p.sector_id);
        let sectors = &p.vanilla_proof.sectors;
        if sectors.len() != 1 {
            return Err(invalid(format!(
                "`vanilla_proofs[{i}]` (sector {id}) holds {} sector proofs, a vanilla proof has 1",
                sectors.len()
            )));
        }
        let challenges = sectors[0].inclusion_proofs.len();
        if challenges != config.challenge_count {
            return Err(invalid(format!(
                "`vanilla_proofs[{i}]` (sector {id}) proves {challenges} challenges, a `{kind}` \
                 vanilla proof proves {}; hint: vanilla proofs of another PoSt type",
                config.challenge_count
            )));
        }
        if let Some(prev) = vanilla_proofs
            .last()
            .map(|p: &FallbackPoStSectorProof<Tree>| u64::from(p.sector_id))
        {
            if id <= prev {
                return Err(invalid(format!(
                    "`vanilla_proofs[{i}]` is sector {id} after sector {prev}: the sectors must be \
                     in ascending sector id order, each once (the verifier's order)"
                )));
            }
        }
        vanilla_proofs.push(p);
    }
    Ok(vanilla_proofs)
}

/// The public parameters of `generate_{winning,window}_post_with_vanilla` for `count` vanilla
/// proofs, and the partitions it takes (`None`: one).
fn setup<Tree: 'static + MerkleTreeTrait>(
    config: &PoStConfig,
    count: usize,
) -> Result<(fallback::PublicParams, Option<usize>), Error> {
    let (vanilla_params, partitions) = match config.typ {
        PoStType::Winning => (
            guarded("winning PoSt setup parameters", || {
                filecoin_proofs::parameters::winning_post_setup_params(config)
            })?,
            None,
        ),
        PoStType::Window => {
            let p = filecoin_proofs::get_num_partition_for_fallback_post(config, count);
            (
                filecoin_proofs::parameters::window_post_setup_params(config),
                (p > 1).then_some(p),
            )
        }
    };
    let setup = compound_proof::SetupParams {
        vanilla_params,
        partitions,
        priority: config.priority,
    };
    let pub_params = guarded("PoSt public parameters", || {
        <Compound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, PoStCircuit<Tree>>>::setup(&setup)
    })?
    .vanilla_params;
    Ok((pub_params, partitions))
}

/// Partitions the vanilla proofs as filecoin-proofs does (one partition with a
/// `partition_index`); where they do not verify, the error names the failing sectors.
fn partition<Tree: 'static + MerkleTreeTrait>(
    kind: ProofKind,
    config: &PoStConfig,
    pub_params: &fallback::PublicParams,
    prover_inputs: &PublicInputs<Tree>,
    partition_index: Option<usize>,
    partition_count: usize,
    vanilla_proofs: &[FallbackPoStSectorProof<Tree>],
) -> Result<Vec<PartitionProof<Tree>>, Error> {
    match partition_index {
        None => guarded("partitioning the vanilla proofs", || {
            filecoin_proofs::partition_vanilla_proofs(
                config,
                pub_params,
                prover_inputs,
                partition_count,
                vanilla_proofs,
            )
        }),
        Some(_) => guarded("partitioning the vanilla proofs", || {
            filecoin_proofs::single_partition_vanilla_proofs(
                config,
                pub_params,
                prover_inputs,
                vanilla_proofs,
            )
        })
        .map(|p| vec![p]),
    }
    .map_err(|e| {
        let first = partition_index
            .unwrap_or(0)
            .saturating_mul(config.sector_count);
        let failing = guarded("locating the failing vanilla proofs", || {
            Ok(failing_sectors(
                config,
                pub_params,
                prover_inputs.randomness,
                first,
                vanilla_proofs,
            ))
        })
        .unwrap_or_default();
        if failing.is_empty() {
            invalid(format!(
                "the vanilla proofs do not verify for this randomness and `{kind}` (vanilla proofs \
                 of another randomness, proof type or sector, or damaged): {e}"
            ))
        } else {
            invalid(format!(
                "the vanilla proofs of {} {} do not verify for this randomness and `{kind}` \
                 (vanilla proofs of another randomness, proof type or sector, or damaged)",
                if failing.len() == 1 {
                    "sector"
                } else {
                    "sectors"
                },
                failing.join(", ")
            ))
        }
    })
}

/// Opens a PoSt request for `proof`.
pub(super) fn open<V: RequestVisitor>(
    proof: RegisteredPoStProof,
    input: &[u8],
    visitor: V,
) -> Result<V::Out, Error> {
    let request = PoStRequest::from_json(input)?;
    super::with_tree!(u64::from(proof.sector_size()), Tree => {
        visitor.visit(PoSt::<Tree>::new(proof, request)?)
    })
}

/// Calls `visitor` with the blank PoSt circuit of `proof`: `FallbackPoStCompound::blank_circuit`
/// of the winning or window public parameters filecoin-proofs' parameter cache uses.
pub(super) fn visit_blank<V: BlankVisitor>(
    proof: RegisteredPoStProof,
    visitor: V,
) -> Result<V::Out, Error> {
    super::with_tree!(u64::from(proof.sector_size()), Tree => {
        let config = post_config(proof)?;
        let pub_params = guarded("PoSt public parameters", || match config.typ {
            PoStType::Winning => filecoin_proofs::parameters::winning_post_public_params::<Tree>(&config),
            PoStType::Window => filecoin_proofs::parameters::window_post_public_params::<Tree>(&config),
        })?;
        let blank =
            <Compound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, PoStCircuit<Tree>>>::blank_circuit(&pub_params);
        visitor.visit(blank)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Opens `input` as a `proof` request's job.
    fn open(proof: RegisteredPoStProof, input: &[u8]) -> Result<Box<dyn crate::job::Job>, Error> {
        super::super::open_job(ProofKind::PoSt(proof), input)
    }

    const WINNING: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWinning2KiBV1;
    const WINDOW: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWindow2KiBV1_2;

    fn request(proof: &str, vanilla: &[&str], extra: &str) -> Vec<u8> {
        let vanilla: Vec<String> = vanilla.iter().map(|v| format!("\"{v}\"")).collect();
        format!(
            "{{\"registered_proof\": \"{proof}\", \"prover_id\": {:?}, \"randomness\": {:?}, \
             \"vanilla_proofs\": [{}]{extra}}}",
            [7u8; 32],
            [3u8; 32],
            vanilla.join(", ")
        )
        .into_bytes()
    }

    fn open_err(proof: RegisteredPoStProof, input: &[u8]) -> Error {
        match open(proof, input) {
            Ok(_) => panic!("opened {}", String::from_utf8_lossy(input)),
            Err(e) => e,
        }
    }

    #[test]
    fn bad_json_names_the_problem() {
        let json = request("StackedDrgWinning2KiBV1", &["AAAA"], "");
        let e = open_err(WINNING, &json[..json.len() / 2]);
        assert!(e.to_string().contains("truncated JSON"), "{e}");
        assert!(matches!(e.kind(), ErrorKind::InvalidRequest(_)), "{e}");
        let e = open_err(WINNING, b"{\"registered_proof\" 1}");
        assert!(e.to_string().contains("malformed JSON"), "{e}");
        let e = open_err(
            WINNING,
            b"{\"registered_proof\": \"StackedDrgWinning2KiBV1\"}",
        );
        assert!(
            e.to_string().contains("not a PoSt request") && e.to_string().contains("prover_id"),
            "{e}"
        );
        let e = open_err(
            WINDOW,
            &request("StackedDrgWindow2KiBV1_2", &["AAAA"], ", \"partition\": 1"),
        );
        assert!(e.to_string().contains("unknown field `partition`"), "{e}");
        let mut bad_byte =
            String::from_utf8(request("StackedDrgWinning2KiBV1", &["AAAA"], "")).unwrap();
        bad_byte = bad_byte.replacen("[7, ", "[256, ", 1);
        let e = open_err(WINNING, bad_byte.as_bytes());
        assert!(e.to_string().contains("not a PoSt request"), "{e}");
    }

    #[test]
    fn wrong_proof_type_is_named() {
        let e = open_err(WINNING, &request("StackedDrg2KiBV1_1", &["AAAA"], ""));
        assert!(
            e.to_string()
                .contains("`StackedDrg2KiBV1_1` is a registered seal proof"),
            "{e}"
        );
        let e = open_err(WINNING, &request("StackedDrgWinning3KiBV1", &["AAAA"], ""));
        assert!(e.to_string().contains("not a registered proof"), "{e}");
        let json = String::from_utf8(request("StackedDrgWinning2KiBV1", &["AAAA"], "")).unwrap();
        let e = open_err(
            WINNING,
            json.replacen("\"StackedDrgWinning2KiBV1\"", "5", 1)
                .as_bytes(),
        );
        assert!(
            e.to_string()
                .contains("`registered_proof` is 5, not a proof type name"),
            "{e}"
        );
        let e = open_err(WINDOW, &request("StackedDrgWinning2KiBV1", &["AAAA"], ""));
        assert!(
            e.to_string()
                .contains("a request of `post:StackedDrgWinning2KiBV1`, not of `post:StackedDrgWindow2KiBV1_2`"),
            "{e}"
        );
        let e = open_err(WINNING, &request("StackedDrgWindow2KiBV1_2", &["AAAA"], ""));
        assert!(
            e.to_string()
                .contains("not of `post:StackedDrgWinning2KiBV1`"),
            "{e}"
        );
    }

    #[test]
    fn wrong_vanilla_proof_count_is_refused() {
        let e = open_err(
            WINNING,
            &request("StackedDrgWinning2KiBV1", &["AAAA", "AAAA"], ""),
        );
        assert!(
            e.to_string()
                .contains("2 vanilla proofs, a WinningPoSt takes 1"),
            "{e}"
        );
        let e = open_err(WINNING, &request("StackedDrgWinning2KiBV1", &[], ""));
        assert!(e.to_string().contains("0 vanilla proofs"), "{e}");
        let e = open_err(WINDOW, &request("StackedDrgWindow2KiBV1_2", &[], ""));
        assert!(e.to_string().contains("no vanilla proofs"), "{e}");
        let e = open_err(
            WINDOW,
            &request(
                "StackedDrgWindow2KiBV1_2",
                &["AAAA"; 3],
                ", \"partition_index\": 1",
            ),
        );
        assert!(
            e.to_string().contains("3 vanilla proofs for partition 1"),
            "{e}"
        );
        let e = open_err(
            WINNING,
            &request(
                "StackedDrgWinning2KiBV1",
                &["AAAA"],
                ", \"partition_index\": 0",
            ),
        );
        assert!(
            e.to_string()
                .contains("`partition_index` is for WindowPoSt"),
            "{e}"
        );
        let e = open_err(
            RegisteredPoStProof::StackedDrgWindow2KiBV1,
            &request(
                "StackedDrgWindow2KiBV1",
                &["AAAA"],
                ", \"partition_index\": 0",
            ),
        );
        assert!(e.to_string().contains("needs a V1_2"), "{e}");
    }

    #[test]
    fn bad_vanilla_proofs_are_named() {
        let e = open_err(
            WINDOW,
            &request("StackedDrgWindow2KiBV1_2", &["AAAA", "@@@"], ""),
        );
        assert!(
            e.to_string().contains("`vanilla_proofs[1]` is not base64"),
            "{e}"
        );
        let hello = super::super::encode_base64(b"hello");
        let e = open_err(WINDOW, &request("StackedDrgWindow2KiBV1_2", &[&hello], ""));
        assert!(
            e.to_string().contains(
                "`vanilla_proofs[0]` is not a vanilla proof of `post:StackedDrgWindow2KiBV1_2`"
            ),
            "{e}"
        );
        // An absurd length prefix is refused without allocating it.
        let huge = super::super::encode_base64(&[0xff; 64]);
        let e = open_err(WINDOW, &request("StackedDrgWindow2KiBV1_2", &[&huge], ""));
        assert!(e.to_string().contains("not a vanilla proof"), "{e}");
    }

    #[test]
    fn randomness_must_be_a_field_element() {
        let json = String::from_utf8(request("StackedDrgWinning2KiBV1", &["AAAA"], "")).unwrap();
        let json = json.replacen(
            &format!("{:?}", [3u8; 32]),
            &format!("{:?}", [255u8; 32]),
            1,
        );
        let e = open_err(WINNING, json.as_bytes());
        assert!(
            e.to_string()
                .contains("`randomness` is not a field element"),
            "{e}"
        );
    }

    #[test]
    fn requests_round_trip_and_say_their_kind() {
        let r = PoStRequest::new(WINDOW, [1; 32], [2; 32], &[b"ab".to_vec(), b"cd".to_vec()])
            .with_partition_index(4);
        let json = r.to_json().unwrap();
        assert_eq!(PoStRequest::from_json(&json).unwrap(), r);
        assert_eq!(
            r.vanilla_proof_bytes().unwrap(),
            vec![b"ab".to_vec(), b"cd".to_vec()]
        );
        assert_eq!(
            super::super::detect_kind(&json).unwrap(),
            ProofKind::PoSt(WINDOW)
        );
        let plain = PoStRequest::new(WINNING, [1; 32], [2; 32], &[b"ab"])
            .to_json()
            .unwrap();
        assert!(!String::from_utf8(plain)
            .unwrap()
            .contains("partition_index"));
    }

    #[test]
    fn blank_circuits_have_the_verifier_input_counts() {
        // WinningPoSt: 66 one-challenge "sectors" of (comm_r, challenge); WindowPoSt: 2 sectors
        // of comm_r + 10 challenges. Plus ONE.
        let winning = ProofKind::PoSt(WINNING).shape().unwrap();
        assert_eq!(winning.inputs, 1 + 66 * 2);
        let window = ProofKind::PoSt(WINDOW).shape().unwrap();
        assert_eq!(window.inputs, 1 + 2 * 11);
        assert!(
            winning.constraints > window.constraints,
            "{winning:?} {window:?}"
        );
    }
}
