//! SnapDeals (the empty sector update): the Groth16 proofs of a sector update, from its partition
//! vanilla proofs.
//!
//! A SnapDeals prover gets the three commitments of the update and the vanilla proofs of every
//! partition (filecoin-proofs-api's `generate_partition_proofs`), in a [`SnapRequest`]:
//!
//! ```json
//! {
//!   "registered_update_proof": "StackedDrg32GiBV1",
//!   "comm_r_old": [32 numbers],
//!   "comm_r_new": [32 numbers],
//!   "comm_d_new": [32 numbers],
//!   "vanilla_proofs": ["<base64 of partition 0's PartitionProofBytes>", "..."]
//! }
//! ```
//!
//! [`SnapDeals`] then mirrors `generate_empty_sector_update_proof_with_vanilla` step for step:
//! public parameters `PublicParams::from_sector_size`, public inputs `{k: partitions, comm_r_old,
//! comm_d_new, comm_r_new, h: h_default}`; per partition `k` the circuit
//! `EmptySectorUpdateCompound::circuit(.., Some(k))` and its public inputs
//! `EmptySectorUpdateCompound::generate_public_inputs(.., Some(k))`, which is what
//! `verify_empty_sector_update_proof` checks the proof bytes against.
//!
//! The vanilla proofs are verified first (filecoin-proofs' `verify_partition_proofs`): a request
//! whose commitments are not the ones its vanilla proofs prove is refused, naming the commitment
//! that does not match.

use std::marker::PhantomData;

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::PrimeField;
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::SectorUpdateConfig;
use filecoin_proofs_api::{Commitment, PartitionProofBytes, RegisteredUpdateProof};
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_update::constants::{TreeDDomain, TreeRDomain, TreeRHasher};
use storage_proofs_update::{
    EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PartitionProof,
    PublicInputs, PublicParams,
};

use super::{guarded, BlankVisitor, ProofKind, ProofRequest, RequestVisitor};
use crate::{Error, ErrorKind};

/// The SnapDeals circuit of one partition, as filecoin-proofs builds it.
pub type SnapCircuit<Tree> = EmptySectorUpdateCircuit<Tree>;

type Compound<Tree> = EmptySectorUpdateCompound<Tree>;

fn invalid(reason: impl Into<String>) -> Error {
    ErrorKind::InvalidRequest(reason.into()).into()
}

/// The message of a guarded fil call's error, without its kind's prefix (it becomes the reason of
/// a request error).
fn reason(e: Error) -> String {
    match e.into_kind() {
        ErrorKind::Filecoin(r) => r,
        kind => kind.to_string(),
    }
}

/// A SnapDeals proof request: the update's commitments and its partition vanilla proofs.
///
/// Its JSON form (serde) is what [`super::open_job`] reads and [`super::detect_kind`] recognises
/// by the `registered_update_proof` key.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SnapRequest {
    /// The registered update proof of filecoin-proofs-api, by its name (`"StackedDrg32GiBV1"`):
    /// the sector size, and so the tree shape, partition count and parameters.
    pub registered_update_proof: RegisteredUpdateProof,
    /// The replica commitment of the sector before the update (the CC sector's `comm_r`), 32
    /// bytes as a JSON array of numbers.
    pub comm_r_old: Commitment,
    /// The replica commitment of the updated sector (`comm_r_new` of
    /// `empty_sector_update_encode_into`), 32 bytes as a JSON array of numbers.
    pub comm_r_new: Commitment,
    /// The data commitment of the new data (`comm_d_new` of `empty_sector_update_encode_into`),
    /// 32 bytes as a JSON array of numbers.
    pub comm_d_new: Commitment,
    /// One entry per partition, in partition order: the base64 (standard alphabet) of that
    /// partition's vanilla proof bytes exactly as filecoin-proofs-api's
    /// `generate_partition_proofs` returns them (`PartitionProofBytes`: the bincode of
    /// `PartitionProof<Tree>`).
    pub vanilla_proofs: Vec<String>,
}

/// The request as it is read: the proof name stays a string so an unknown one gets its own error.
#[derive(serde::Deserialize)]
struct RawRequest {
    registered_update_proof: String,
    comm_r_old: Commitment,
    comm_r_new: Commitment,
    comm_d_new: Commitment,
    vanilla_proofs: Vec<String>,
}

impl SnapRequest {
    /// A request from filecoin-proofs-api's outputs: the commitments and the partition proofs of
    /// `generate_partition_proofs`.
    pub fn new(
        registered_update_proof: RegisteredUpdateProof,
        comm_r_old: Commitment,
        comm_r_new: Commitment,
        comm_d_new: Commitment,
        vanilla_proofs: &[PartitionProofBytes],
    ) -> Self {
        Self {
            registered_update_proof,
            comm_r_old,
            comm_r_new,
            comm_d_new,
            vanilla_proofs: vanilla_proofs
                .iter()
                .map(|p| super::encode_base64(&p.0))
                .collect(),
        }
    }

    /// Parses a request. Errors say whether the JSON is truncated, malformed, not a SnapDeals
    /// request (a missing field, a commitment that is not 32 numbers) or names an unknown proof.
    pub fn from_json(input: &[u8]) -> Result<Self, Error> {
        let raw: RawRequest = serde_json::from_slice(input)
            .map_err(|e| super::json_error("SnapDeals request", &e))?;
        let registered_update_proof = super::parse_variant(&raw.registered_update_proof)
            .ok_or_else(|| {
                invalid(format!(
                    "unknown registered update proof `{}` (for example `StackedDrg32GiBV1`)",
                    raw.registered_update_proof
                ))
            })?;
        Ok(Self {
            registered_update_proof,
            comm_r_old: raw.comm_r_old,
            comm_r_new: raw.comm_r_new,
            comm_d_new: raw.comm_d_new,
            vanilla_proofs: raw.vanilla_proofs,
        })
    }

    /// The request as JSON (what [`SnapRequest::from_json`] reads).
    pub fn to_json(&self) -> Vec<u8> {
        // Cannot fail: a unit enum variant, byte arrays and strings.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The partition vanilla proofs, decoded from base64 (errors name the partition).
    pub fn vanilla_proof_bytes(&self) -> Result<Vec<PartitionProofBytes>, Error> {
        self.vanilla_proofs
            .iter()
            .enumerate()
            .map(|(k, b64)| {
                super::decode_base64(&format!("vanilla proof {k}"), b64).map(PartitionProofBytes)
            })
            .collect()
    }
}

/// A commitment as a field element (a public input of the circuit): errors name it.
fn field_element(name: &str, bytes: &Commitment) -> Result<Scalar, Error> {
    if *bytes == [0; 32] {
        return Err(invalid(format!("all-zero commitment `{name}`")));
    }
    Option::from(Scalar::from_repr(*bytes)).ok_or_else(|| {
        invalid(format!(
            "`{name}` is not a field element (a little-endian value below the modulus)"
        ))
    })
}

/// The update config of `proof` (partition count, `h`), as filecoin-proofs derives it.
fn update_config(proof: RegisteredUpdateProof) -> Result<SectorUpdateConfig, Error> {
    guarded("update config", || {
        Ok(SectorUpdateConfig::from_porep_config(&proof.as_v1_config()))
    })
}

/// The public parameters of the update circuit of a `sector_size`-byte sector.
fn public_params(sector_size: u64) -> Result<PublicParams, Error> {
    guarded("update public parameters", || {
        Ok(PublicParams::from_sector_size(sector_size))
    })
}

/// A checked SnapDeals request: everything needed to build and prove its partitions (as a job:
/// [`super::FilecoinJob`]).
pub struct SnapDeals<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> {
    registered: RegisteredUpdateProof,
    public_params: PublicParams,
    public_inputs: PublicInputs,
    vanilla_proofs: Vec<PartitionProof<Tree>>,
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> SnapDeals<Tree> {
    /// [`SnapRequest::from_json`] then [`SnapDeals::new`].
    pub fn from_json(proof: RegisteredUpdateProof, input: &[u8]) -> Result<Self, Error> {
        Self::new(proof, &SnapRequest::from_json(input)?)
    }

    /// Checks a request against `proof` (proof type, commitments, partition count, vanilla
    /// proofs decoded and verified as filecoin-proofs' `verify_partition_proofs` does) and
    /// prepares the public parameters and inputs of `generate_empty_sector_update_proof_with_vanilla`.
    pub fn new(proof: RegisteredUpdateProof, request: &SnapRequest) -> Result<Self, Error> {
        if request.registered_update_proof != proof {
            return Err(invalid(format!(
                "a SnapDeals request of `{}`, not of `{}`",
                ProofKind::SnapDeals(request.registered_update_proof),
                ProofKind::SnapDeals(proof)
            )));
        }
        let sector_size = u64::from(proof.sector_size());
        check_tree::<Tree>(sector_size)?;
        field_element("comm_r_old", &request.comm_r_old)?;
        field_element("comm_r_new", &request.comm_r_new)?;
        field_element("comm_d_new", &request.comm_d_new)?;
        let comm_r_old = domain::<TreeRDomain>("comm_r_old", &request.comm_r_old)?;
        let comm_r_new = domain::<TreeRDomain>("comm_r_new", &request.comm_r_new)?;
        let comm_d_new = domain::<TreeDDomain>("comm_d_new", &request.comm_d_new)?;

        let config = update_config(proof)?;
        let partitions = usize::from(config.update_partitions);
        if request.vanilla_proofs.len() != partitions {
            return Err(invalid(format!(
                "{} vanilla proofs, the update of a {sector_size}-byte sector has {partitions} \
                 partition{}; hint: check the sector size and proof type",
                request.vanilla_proofs.len(),
                if partitions == 1 { "" } else { "s" }
            )));
        }
        let vanilla_proofs = request
            .vanilla_proof_bytes()?
            .iter()
            .enumerate()
            .map(|(k, bytes)| {
                guarded("bincode", || {
                    // As filecoin-proofs' `bincode::deserialize` reads it (fixed-width integers,
                    // trailing bytes allowed), except that the input's length bounds what is
                    // read: a length prefix claiming more elements than the bytes hold fails
                    // before anything that size is allocated.
                    use bincode::Options;
                    Ok(bincode::DefaultOptions::new()
                        .with_fixint_encoding()
                        .allow_trailing_bytes()
                        .with_limit(bytes.0.len() as u64)
                        .deserialize::<PartitionProof<Tree>>(&bytes.0)?)
                })
                .map_err(|e| {
                    invalid(format!(
                        "vanilla proof {k} is not a partition proof of a {sector_size}-byte sector ({}); hint: \
                         check the sector size and proof type",
                        reason(e)
                    ))
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;

        let public_params = public_params(sector_size)?;
        if public_params.partition_count != partitions {
            return Err(ErrorKind::PoRepConfig(format!(
                "the update circuit of a {sector_size}-byte sector has {} partitions, its config {partitions}",
                public_params.partition_count
            ))
            .into());
        }
        // `k` is what filecoin-proofs puts there; every partition overrides it with `Some(k)`.
        let public_inputs = PublicInputs {
            k: partitions,
            comm_r_old,
            comm_d_new,
            comm_r_new,
            h: config.h,
        };
        for (k, vanilla) in vanilla_proofs.iter().enumerate() {
            let partition_inputs = PublicInputs {
                k,
                ..public_inputs.clone()
            };
            let valid = guarded("vanilla proof verification", || {
                EmptySectorUpdate::<Tree>::verify(&public_params, &partition_inputs, vanilla)
            })
            .map_err(|e| invalid(format!("vanilla proof {k} is malformed ({})", reason(e))))?;
            if !valid {
                return Err(invalid(mismatch_reason(k, vanilla, &public_inputs)));
            }
        }
        Ok(Self {
            registered: proof,
            public_params,
            public_inputs,
            vanilla_proofs,
        })
    }
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> ProofRequest for SnapDeals<Tree> {
    type Circuit = SnapCircuit<Tree>;

    fn kind(&self) -> ProofKind {
        ProofKind::SnapDeals(self.registered)
    }

    fn partitions(&self) -> usize {
        self.vanilla_proofs.len()
    }

    /// Exactly as `EmptySectorUpdateCompound::circuit_proofs` builds it.
    fn partition_circuit(&self, k: usize) -> Result<SnapCircuit<Tree>, Error> {
        guarded("update circuit", || {
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
        guarded("update public inputs", || {
            Compound::<Tree>::generate_public_inputs(
                &self.public_inputs,
                &self.public_params,
                Some(k),
            )
        })
    }
}

/// A commitment in a hasher domain.
fn domain<D: Domain>(name: &str, bytes: &Commitment) -> Result<D, Error> {
    D::try_from_bytes(bytes).map_err(|e| invalid(format!("`{name}` is not a commitment: {e}")))
}

/// Checks that `Tree` is the TreeR shape of a `sector_size`-byte sector.
fn check_tree<Tree: MerkleTreeTrait>(sector_size: u64) -> Result<(), Error> {
    let expected: Result<String, Error> = super::with_tree!(sector_size, T => Ok(T::display()));
    let expected = expected?;
    if Tree::display() != expected {
        return Err(ErrorKind::PoRepConfig(format!(
            "tree shape `{}` is not the one of a {sector_size}-byte sector (`{expected}`)",
            Tree::display()
        ))
        .into());
    }
    Ok(())
}

/// Why the vanilla proof of partition `k` does not verify: the commitments it proves, compared
/// with the request's.
fn mismatch_reason<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    k: usize,
    vanilla: &PartitionProof<Tree>,
    inputs: &PublicInputs,
) -> String {
    let Some(first) = vanilla.challenge_proofs.first() else {
        return format!("vanilla proof {k} has no challenge proofs");
    };
    let hash2 = <TreeRHasher as Hasher>::Function::hash2;
    let mut differ = Vec::new();
    if hash2(&vanilla.comm_c, &first.proof_r_old.root()) != inputs.comm_r_old {
        differ.push("`comm_r_old`");
    }
    if hash2(&vanilla.comm_c, &first.proof_r_new.root()) != inputs.comm_r_new {
        differ.push("`comm_r_new`");
    }
    if first.proof_d_new.root() != inputs.comm_d_new {
        differ.push("`comm_d_new`");
    }
    if differ.is_empty() {
        format!(
            "vanilla proof {k} does not verify for these commitments (a damaged vanilla proof, or one made \
             for another partition)"
        )
    } else {
        format!(
            "{} of the request do{} not match the vanilla proof of partition {k} (a request for another \
             sector or update, or vanilla proofs of another one)",
            differ.join(" and "),
            if differ.len() == 1 { "es" } else { "" }
        )
    }
}

/// Opens a SnapDeals request for `proof`.
pub(super) fn open<V: RequestVisitor>(
    proof: RegisteredUpdateProof,
    input: &[u8],
    visitor: V,
) -> Result<V::Out, Error> {
    let request = SnapRequest::from_json(input)?;
    super::with_tree!(u64::from(proof.sector_size()), Tree => {
        visitor.visit(SnapDeals::<Tree>::new(proof, &request)?)
    })
}

/// The cache identifier of the update circuit's parameters (`empty-sector-update-<tree>-<hash>`),
/// as filecoin-proofs' parameter cache names them (`get_empty_sector_update_params`).
///
/// Not filecoin-proofs-api's `RegisteredUpdateProof::circuit_identifier`, which returns the
/// PoRep circuit's identifier for the same sector size.
pub fn circuit_identifier(proof: RegisteredUpdateProof) -> Result<String, Error> {
    let sector_size = u64::from(proof.sector_size());
    super::with_tree!(sector_size, Tree => {
        let public_params = public_params(sector_size)?;
        Ok(<Compound<Tree> as CacheableParameters<SnapCircuit<Tree>, PublicParams>>::cache_identifier(&public_params))
    })
}

/// The blank update circuit: `EmptySectorUpdateCircuit::blank`, rebuilt at each synthesis (the
/// fil circuit is not `Clone`).
struct BlankSnapCircuit<Tree> {
    public_params: PublicParams,
    tree: PhantomData<fn() -> Tree>,
}

impl<Tree> Clone for BlankSnapCircuit<Tree> {
    fn clone(&self) -> Self {
        Self {
            public_params: self.public_params.clone(),
            tree: PhantomData,
        }
    }
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> Circuit<Scalar>
    for BlankSnapCircuit<Tree>
{
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        <Compound<Tree> as CompoundProof<EmptySectorUpdate<Tree>, SnapCircuit<Tree>>>::blank_circuit(
            &self.public_params,
        )
        .synthesize(cs)
    }
}

/// Calls `visitor` with the blank update circuit of `proof` (what filecoin-proofs' parameter
/// cache generates the update parameters from).
pub(super) fn visit_blank<V: BlankVisitor>(
    proof: RegisteredUpdateProof,
    visitor: V,
) -> Result<V::Out, Error> {
    let sector_size = u64::from(proof.sector_size());
    super::with_tree!(sector_size, Tree => {
        let blank = BlankSnapCircuit::<Tree> { public_params: public_params(sector_size)?, tree: PhantomData };
        visitor.visit(blank)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use filecoin_proofs::SectorShape2KiB;

    /// Opens `input` as a `proof` request's job.
    fn open(proof: RegisteredUpdateProof, input: &[u8]) -> Result<Box<dyn crate::job::Job>, Error> {
        super::super::open_job(ProofKind::SnapDeals(proof), input)
    }

    const PROOF: RegisteredUpdateProof = RegisteredUpdateProof::StackedDrg2KiBV1;

    fn request(vanilla_proofs: Vec<String>) -> SnapRequest {
        SnapRequest {
            registered_update_proof: PROOF,
            comm_r_old: [1; 32],
            comm_r_new: [2; 32],
            comm_d_new: [3; 32],
            vanilla_proofs,
        }
    }

    fn open_err(input: &[u8]) -> Error {
        match open(PROOF, input) {
            Ok(_) => panic!("opened {}", String::from_utf8_lossy(input)),
            Err(e) => e,
        }
    }

    #[test]
    fn json_round_trips_and_is_detected() {
        let r = request(vec![super::super::encode_base64(b"proof")]);
        let json = r.to_json();
        let text = String::from_utf8(json.clone()).unwrap();
        assert!(
            text.contains("\"registered_update_proof\":\"StackedDrg2KiBV1\""),
            "{text}"
        );
        assert!(text.contains("\"comm_r_old\":[1,1,"), "{text}");
        assert_eq!(SnapRequest::from_json(&json).unwrap(), r);
        assert_eq!(
            super::super::detect_kind(&json).unwrap(),
            ProofKind::SnapDeals(PROOF)
        );
        assert_eq!(r.vanilla_proof_bytes().unwrap()[0].0, b"proof");
        let api = SnapRequest::new(
            PROOF,
            [1; 32],
            [2; 32],
            [3; 32],
            &[PartitionProofBytes(b"proof".to_vec())],
        );
        assert_eq!(api, r);
    }

    #[test]
    fn truncated_and_malformed_json_are_named() {
        let json = request(vec!["AAAA".into()]).to_json();
        let e = open_err(&json[..json.len() / 2]);
        assert!(matches!(e.kind(), ErrorKind::InvalidRequest(_)), "{e}");
        assert!(e.to_string().contains("truncated JSON"), "{e}");
        let e = open_err(b"{\"registered_update_proof\" \"StackedDrg2KiBV1\"}");
        assert!(e.to_string().contains("malformed JSON"), "{e}");
        let e = open_err(b"{\"registered_update_proof\": \"StackedDrg2KiBV1\"}");
        assert!(
            e.to_string().contains("not a SnapDeals request")
                && e.to_string().contains("comm_r_old"),
            "{e}"
        );
        let e = open_err(
            &String::from_utf8(json)
                .unwrap()
                .replacen("[1,1,", "[1,", 1)
                .into_bytes(),
        );
        assert!(e.to_string().contains("not a SnapDeals request"), "{e}");
    }

    #[test]
    fn unknown_or_other_proof_is_refused() {
        let json = String::from_utf8(request(vec![]).to_json()).unwrap();
        let e = open_err(
            json.replace("StackedDrg2KiBV1", "StackedDrg3KiBV1")
                .as_bytes(),
        );
        assert!(
            e.to_string()
                .contains("unknown registered update proof `StackedDrg3KiBV1`"),
            "{e}"
        );
        let e = open_err(
            json.replace("StackedDrg2KiBV1", "StackedDrg8MiBV1")
                .as_bytes(),
        );
        assert!(
            e.to_string().contains(
                "a SnapDeals request of `snap:StackedDrg8MiBV1`, not of `snap:StackedDrg2KiBV1`"
            ),
            "{e}"
        );
    }

    #[test]
    fn bad_commitments_are_named() {
        let mut r = request(vec!["AAAA".into()]);
        r.comm_r_new = [0xff; 32];
        let e = open_err(&r.to_json());
        assert!(
            e.to_string()
                .contains("`comm_r_new` is not a field element"),
            "{e}"
        );
        let mut r = request(vec!["AAAA".into()]);
        r.comm_d_new = [0; 32];
        let e = open_err(&r.to_json());
        assert!(
            e.to_string().contains("all-zero commitment `comm_d_new`"),
            "{e}"
        );
    }

    #[test]
    fn wrong_partition_count_is_refused() {
        for n in [0, 2] {
            let e = open_err(&request(vec!["AAAA".into(); n]).to_json());
            assert!(matches!(e.kind(), ErrorKind::InvalidRequest(_)), "{e}");
            assert!(
                e.to_string().contains(&format!(
                    "{n} vanilla proofs, the update of a 2048-byte sector has 1 partition;"
                )),
                "{e}"
            );
        }
    }

    #[test]
    fn bad_vanilla_proofs_are_named() {
        let e = open_err(&request(vec!["@@@ not base64".into()]).to_json());
        assert!(
            e.to_string().contains("vanilla proof 0 is not base64"),
            "{e}"
        );
        let e = open_err(&request(vec![super::super::encode_base64(&[7; 40])]).to_json());
        assert!(
            e.to_string()
                .contains("vanilla proof 0 is not a partition proof of a 2048-byte sector"),
            "{e}"
        );
    }

    #[test]
    fn identifier_is_the_update_circuit_s() {
        let id = circuit_identifier(PROOF).unwrap();
        // The 2 KiB update parameters of filecoin-proofs' parameters.json.
        assert_eq!(
            id,
            "empty-sector-update-merkletree-poseidon_hasher-8-0-0-\
             fb9e095bebdd77511c0269b967b4d87ba8b8a525edaa0e165de23ba454510194"
        );
        let big = circuit_identifier(RegisteredUpdateProof::StackedDrg32GiBV1).unwrap();
        assert!(
            big.starts_with("empty-sector-update-merkletree-poseidon_hasher-8-8-0-"),
            "{big}"
        );
    }

    #[test]
    fn wrong_tree_shape_is_refused() {
        check_tree::<SectorShape2KiB>(2048).unwrap();
        let e = check_tree::<SectorShape2KiB>(32 << 30).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::PoRepConfig(_)), "{e}");
    }

    #[test]
    fn blank_circuit_has_the_update_shape() {
        let shape = ProofKind::SnapDeals(PROOF).shape().unwrap();
        // One packed input (k and h_select) and three commitments, after ONE.
        assert_eq!(shape.inputs, 5);
        assert!(shape.constraints > 0);
    }
}
