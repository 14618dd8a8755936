//! Proof requests as Curio sends them to a cuzk-compatible prover (`cuzk.v1.ProvingEngine`,
//! `SubmitProofRequest`), turned into the kernels' request bytes for `kernels::job::open`: the
//! wire translation of the API, beside the server that decodes the messages.
//!
//! What Curio puts in the fields (read from its payload builders):
//! - PoRep C2 (`proof_kind` 1): `vanilla_proof` is lotus-bench's `Commit2In` envelope
//!   `{"SectorNum", "Phase1Out" (base64 of filecoin-proofs-api's C1 output JSON), "SectorSize"}`,
//!   a form `kernels::job::open` reads as it is; `registered_proof` is the Go ABI
//!   `RegisteredSealProof` number and must name the C1 output's own proof type.
//! - WindowPoSt (3) and WinningPoSt (4): `vanilla_proofs` one bincode `FallbackPoStSectorProof`
//!   per sector, `randomness` 32 bytes, `miner_id` (the prover id is the miner's id address
//!   payload: its unsigned LEB128 varint, zero-padded to 32 bytes), `partition_index` (WindowPoSt:
//!   the partition proved), `registered_proof` the Go ABI `RegisteredPoStProof` number (10–14 are
//!   the window proofs Go calls `V1_1` and filecoin-proofs-api `V1_2`).
//! - SnapDeals (2): `vanilla_proofs` one per partition, `comm_r_old`, `comm_r_new`, `comm_d_new`
//!   raw 32 bytes each, `registered_proof` the Go ABI `RegisteredUpdateProof` number.
//!
//! Nothing here reads a file: the bytes arrive over the wire. Every refusal is an
//! [`ErrorKind::InvalidRequest`] naming the field. Without the feature `filecoin`, every Curio
//! request is refused: the build has no Filecoin support.

#[cfg(feature = "filecoin")]
use kernels::filecoin::porep::{check_commit2in, Stated};
#[cfg(feature = "filecoin")]
use kernels::filecoin::post::PoStRequest;
#[cfg(feature = "filecoin")]
use kernels::filecoin::update::SnapRequest;
use kernels::filecoin::ProofKind;
#[cfg(feature = "filecoin")]
use kernels::filecoin::{
    encode_base64, prover_id, PoStType, RegisteredPoStProof, RegisteredSealProof,
    RegisteredUpdateProof,
};
use kernels::{Error, ErrorKind};

/// cuzk's `ProofKind` enum values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CurioKind {
    /// `POREP_SEAL_COMMIT` (1).
    PoRepSealCommit,
    /// `SNAP_DEALS_UPDATE` (2).
    SnapDealsUpdate,
    /// `WINDOW_POST_PARTITION` (3).
    WindowPostPartition,
    /// `WINNING_POST` (4).
    WinningPost,
}

impl CurioKind {
    /// The kind of a wire value; 0 (`UNSPECIFIED`) and unknown values are refused.
    pub fn from_wire(value: i32) -> Result<CurioKind, Error> {
        match value {
            1 => Ok(CurioKind::PoRepSealCommit),
            2 => Ok(CurioKind::SnapDealsUpdate),
            3 => Ok(CurioKind::WindowPostPartition),
            4 => Ok(CurioKind::WinningPost),
            0 => Err(invalid("proof_kind is UNSPECIFIED".into())),
            v => Err(invalid(format!("unknown proof_kind {v}"))),
        }
    }

    /// The wire value.
    pub fn wire(self) -> i32 {
        match self {
            CurioKind::PoRepSealCommit => 1,
            CurioKind::SnapDealsUpdate => 2,
            CurioKind::WindowPostPartition => 3,
            CurioKind::WinningPost => 4,
        }
    }
}

/// The proof-carrying fields of a `SubmitProofRequest`, borrowed from the decoded message.
#[derive(Clone, Copy, Debug)]
pub struct CurioRequest<'a> {
    /// `proof_kind`.
    pub kind: CurioKind,
    /// `sector_size` (0: not given; one of Curio's SnapDeals paths leaves it so).
    pub sector_size: u64,
    /// `registered_proof`: a Go ABI number of the kind's proof enum.
    pub registered_proof: u64,
    /// `vanilla_proof` (PoRep: the `Commit2In` envelope).
    pub vanilla_proof: &'a [u8],
    /// `vanilla_proofs` (PoSt: one per sector; SnapDeals: one per partition).
    pub vanilla_proofs: &'a [Vec<u8>],
    /// `sector_number` (PoRep: must be the envelope's `SectorNum` and the C1 output's sector;
    /// 0: not stated).
    pub sector_number: u64,
    /// `miner_id` (PoSt: makes the prover id; PoRep: must be the C1 output's miner; 0: not
    /// stated).
    pub miner_id: u64,
    /// `randomness` (PoSt: 32 bytes).
    pub randomness: &'a [u8],
    /// `partition_index` (WindowPoSt).
    pub partition_index: u32,
    /// `comm_r_old` (SnapDeals: 32 bytes).
    pub comm_r_old: &'a [u8],
    /// `comm_r_new` (SnapDeals: 32 bytes).
    pub comm_r_new: &'a [u8],
    /// `comm_d_new` (SnapDeals: 32 bytes).
    pub comm_d_new: &'a [u8],
}

/// A request ready for `kernels::job::open`: its proof kind and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Translated {
    /// The circuit it is proved with.
    pub kind: ProofKind,
    /// The request bytes (a `Commit2In` envelope, a PoSt or a SnapDeals request JSON).
    pub bytes: Vec<u8>,
}

/// Turns a Curio request into the kernels' request: checks the fields the kind needs (sizes,
/// proof numbers, the kind against the number, the sector size against the proof type) and
/// builds the request bytes. The vanilla proofs themselves are checked when the job is opened.
#[cfg(feature = "filecoin")]
pub fn translate(req: &CurioRequest<'_>) -> Result<Translated, Error> {
    let translated = match req.kind {
        CurioKind::PoRepSealCommit => porep(req)?,
        CurioKind::WindowPostPartition | CurioKind::WinningPost => post(req)?,
        CurioKind::SnapDealsUpdate => snap(req)?,
    };
    if req.sector_size != 0 && req.sector_size != translated.kind.sector_size() {
        return Err(invalid(format!(
            "sector_size {} does not match registered_proof {} (`{}`, {} bytes)",
            req.sector_size,
            req.registered_proof,
            translated.kind,
            translated.kind.sector_size()
        )));
    }
    Ok(translated)
}

/// Refuses every Curio request: this build has no Filecoin support.
#[cfg(not(feature = "filecoin"))]
pub fn translate(req: &CurioRequest<'_>) -> Result<Translated, Error> {
    Err(ErrorKind::InvalidSpec {
        spec: format!("{:?}", req.kind),
        reason: kernels::filecoin::NO_FILECOIN.into(),
    }
    .into())
}

#[cfg(feature = "filecoin")]
fn porep(req: &CurioRequest<'_>) -> Result<Translated, Error> {
    let named = seal_proof(req.registered_proof)?;
    if req.vanilla_proof.is_empty() {
        return Err(invalid(
            "vanilla_proof is empty (PoRep needs the C1 envelope)".into(),
        ));
    }
    let stated = |v: u64| (v != 0).then_some(v);
    let kind = check_commit2in(
        req.vanilla_proof,
        Stated {
            miner_id: stated(req.miner_id),
            sector_number: stated(req.sector_number),
            sector_size: stated(req.sector_size),
        },
    )?;
    if kind != ProofKind::PoRep(named) {
        return Err(invalid(format!(
            "registered_proof {} (`{}`) does not match the C1 output's `{kind}`",
            req.registered_proof,
            ProofKind::PoRep(named)
        )));
    }
    Ok(Translated {
        kind,
        bytes: req.vanilla_proof.to_vec(),
    })
}

#[cfg(feature = "filecoin")]
fn post(req: &CurioRequest<'_>) -> Result<Translated, Error> {
    let proof = post_proof(req.registered_proof)?;
    let winning = proof.typ() == PoStType::Winning;
    match (req.kind, winning) {
        (CurioKind::WinningPost, false) | (CurioKind::WindowPostPartition, true) => {
            return Err(invalid(format!(
                "proof_kind {:?} does not match registered_proof {} (`{}`)",
                req.kind,
                req.registered_proof,
                ProofKind::PoSt(proof)
            )))
        }
        _ => {}
    }
    if req.vanilla_proofs.is_empty() {
        return Err(invalid("vanilla_proofs is empty".into()));
    }
    let request = PoStRequest {
        registered_proof: proof,
        prover_id: prover_id(req.miner_id),
        randomness: bytes32("randomness", req.randomness)?,
        vanilla_proofs: req
            .vanilla_proofs
            .iter()
            .map(|p| encode_base64(p))
            .collect(),
        partition_index: (!winning).then_some(req.partition_index as usize),
    };
    Ok(Translated {
        kind: ProofKind::PoSt(proof),
        bytes: request.to_json()?,
    })
}

#[cfg(feature = "filecoin")]
fn snap(req: &CurioRequest<'_>) -> Result<Translated, Error> {
    let proof = update_proof(req.registered_proof)?;
    if req.vanilla_proofs.is_empty() {
        return Err(invalid("vanilla_proofs is empty".into()));
    }
    let request = SnapRequest {
        registered_update_proof: proof,
        comm_r_old: bytes32("comm_r_old", req.comm_r_old)?,
        comm_r_new: bytes32("comm_r_new", req.comm_r_new)?,
        comm_d_new: bytes32("comm_d_new", req.comm_d_new)?,
        vanilla_proofs: req
            .vanilla_proofs
            .iter()
            .map(|p| encode_base64(p))
            .collect(),
    };
    Ok(Translated {
        kind: ProofKind::SnapDeals(proof),
        bytes: request.to_json(),
    })
}

#[cfg(feature = "filecoin")]
/// `RegisteredSealProof` by Go ABI number (the index).
const SEAL_PROOFS: [RegisteredSealProof; 20] = {
    use RegisteredSealProof::*;
    [
        StackedDrg2KiBV1,
        StackedDrg8MiBV1,
        StackedDrg512MiBV1,
        StackedDrg32GiBV1,
        StackedDrg64GiBV1,
        StackedDrg2KiBV1_1,
        StackedDrg8MiBV1_1,
        StackedDrg512MiBV1_1,
        StackedDrg32GiBV1_1,
        StackedDrg64GiBV1_1,
        StackedDrg2KiBV1_1_Feat_SyntheticPoRep,
        StackedDrg8MiBV1_1_Feat_SyntheticPoRep,
        StackedDrg512MiBV1_1_Feat_SyntheticPoRep,
        StackedDrg32GiBV1_1_Feat_SyntheticPoRep,
        StackedDrg64GiBV1_1_Feat_SyntheticPoRep,
        StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg8MiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg512MiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg32GiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg64GiBV1_2_Feat_NonInteractivePoRep,
    ]
};

#[cfg(feature = "filecoin")]
/// `RegisteredSealProof` by its Go ABI number.
pub fn seal_proof(number: u64) -> Result<RegisteredSealProof, Error> {
    lookup(&SEAL_PROOFS, number, "RegisteredSealProof")
}

#[cfg(feature = "filecoin")]
/// The Go ABI number of `proof` (Curio's `registered_proof`): the inverse of [`seal_proof`];
/// `None` for a proof type the table does not know.
pub fn seal_number(proof: RegisteredSealProof) -> Option<u64> {
    let i = SEAL_PROOFS.iter().position(|p| *p == proof)?;
    u64::try_from(i).ok()
}

#[cfg(feature = "filecoin")]
/// `RegisteredPoStProof` by its Go ABI number (Go's window `V1_1`, 10–14, is the api's `V1_2`).
pub fn post_proof(number: u64) -> Result<RegisteredPoStProof, Error> {
    use RegisteredPoStProof::*;
    const TABLE: [RegisteredPoStProof; 15] = [
        StackedDrgWinning2KiBV1,
        StackedDrgWinning8MiBV1,
        StackedDrgWinning512MiBV1,
        StackedDrgWinning32GiBV1,
        StackedDrgWinning64GiBV1,
        StackedDrgWindow2KiBV1,
        StackedDrgWindow8MiBV1,
        StackedDrgWindow512MiBV1,
        StackedDrgWindow32GiBV1,
        StackedDrgWindow64GiBV1,
        StackedDrgWindow2KiBV1_2,
        StackedDrgWindow8MiBV1_2,
        StackedDrgWindow512MiBV1_2,
        StackedDrgWindow32GiBV1_2,
        StackedDrgWindow64GiBV1_2,
    ];
    lookup(&TABLE, number, "RegisteredPoStProof")
}

#[cfg(feature = "filecoin")]
/// `RegisteredUpdateProof` by its Go ABI number.
pub fn update_proof(number: u64) -> Result<RegisteredUpdateProof, Error> {
    use RegisteredUpdateProof::*;
    const TABLE: [RegisteredUpdateProof; 5] = [
        StackedDrg2KiBV1,
        StackedDrg8MiBV1,
        StackedDrg512MiBV1,
        StackedDrg32GiBV1,
        StackedDrg64GiBV1,
    ];
    lookup(&TABLE, number, "RegisteredUpdateProof")
}

#[cfg(feature = "filecoin")]
fn lookup<T: Copy>(table: &[T], number: u64, what: &str) -> Result<T, Error> {
    usize::try_from(number)
        .ok()
        .and_then(|i| table.get(i).copied())
        .ok_or_else(|| {
            invalid(format!(
                "registered_proof {number} is not a {what} (0–{})",
                table.len() - 1
            ))
        })
}

#[cfg(feature = "filecoin")]
fn bytes32(field: &str, bytes: &[u8]) -> Result<[u8; 32], Error> {
    bytes
        .try_into()
        .map_err(|_| invalid(format!("{field} must be 32 bytes, got {}", bytes.len())))
}

fn invalid(reason: String) -> Error {
    ErrorKind::InvalidRequest(reason).into()
}

#[cfg(all(test, feature = "filecoin"))]
mod tests {
    use super::*;

    #[test]
    fn seal_numbers_invert_seal_proofs() {
        for n in 0..20 {
            assert_eq!(seal_number(seal_proof(n).unwrap()), Some(n));
        }
    }

    fn request(kind: CurioKind, registered_proof: u64) -> CurioRequest<'static> {
        static PROOFS: [Vec<u8>; 0] = [];
        CurioRequest {
            kind,
            sector_size: 0,
            registered_proof,
            vanilla_proof: &[],
            vanilla_proofs: &PROOFS,
            sector_number: 0,
            miner_id: 1000,
            randomness: &[7; 32],
            partition_index: 0,
            comm_r_old: &[1; 32],
            comm_r_new: &[2; 32],
            comm_d_new: &[3; 32],
        }
    }

    fn reason(e: Error) -> String {
        e.to_string()
    }

    #[test]
    fn prover_id_is_the_leb128_id_address_payload() {
        assert_eq!(prover_id(0)[..2], [0, 0]);
        assert_eq!(prover_id(127)[..2], [0x7f, 0]);
        assert_eq!(prover_id(1000)[..3], [0xe8, 0x07, 0]);
        assert_eq!(prover_id(300_000)[..4], [0xe0, 0xa7, 0x12, 0]);
        let max = prover_id(u64::MAX);
        assert_eq!(
            max[..10],
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
        assert!(max[10..].iter().all(|&b| b == 0));
    }

    #[test]
    fn go_abi_numbers_name_the_api_variants() {
        assert_eq!(
            seal_proof(8).unwrap(),
            RegisteredSealProof::StackedDrg32GiBV1_1
        );
        assert_eq!(
            seal_proof(13).unwrap(),
            RegisteredSealProof::StackedDrg32GiBV1_1_Feat_SyntheticPoRep
        );
        assert_eq!(
            seal_proof(19).unwrap(),
            RegisteredSealProof::StackedDrg64GiBV1_2_Feat_NonInteractivePoRep
        );
        assert_eq!(
            post_proof(3).unwrap(),
            RegisteredPoStProof::StackedDrgWinning32GiBV1
        );
        assert_eq!(
            post_proof(8).unwrap(),
            RegisteredPoStProof::StackedDrgWindow32GiBV1
        );
        assert_eq!(
            post_proof(13).unwrap(),
            RegisteredPoStProof::StackedDrgWindow32GiBV1_2
        );
        assert_eq!(
            update_proof(4).unwrap(),
            RegisteredUpdateProof::StackedDrg64GiBV1
        );
        // Every number's sector size follows the Go table's pattern (2K, 8M, 512M, 32G, 64G).
        let sizes = [2u64 << 10, 8 << 20, 512 << 20, 32 << 30, 64 << 30];
        for n in 0..20u64 {
            assert_eq!(
                u64::from(seal_proof(n).unwrap().sector_size()),
                sizes[n as usize % 5]
            );
        }
        for n in 0..15u64 {
            assert_eq!(
                u64::from(post_proof(n).unwrap().sector_size()),
                sizes[n as usize % 5]
            );
        }
        for n in 0..5u64 {
            assert_eq!(
                u64::from(update_proof(n).unwrap().sector_size()),
                sizes[n as usize]
            );
        }
        assert!(reason(seal_proof(20).unwrap_err()).contains("registered_proof 20"));
        assert!(reason(post_proof(u64::MAX).unwrap_err()).contains("RegisteredPoStProof"));
        assert!(reason(update_proof(5).unwrap_err()).contains("0–4"));
    }

    #[test]
    fn wire_kinds_round_trip_and_unspecified_is_refused() {
        for v in 1..=4 {
            assert_eq!(CurioKind::from_wire(v).unwrap().wire(), v);
        }
        assert!(reason(CurioKind::from_wire(0).unwrap_err()).contains("UNSPECIFIED"));
        assert!(reason(CurioKind::from_wire(9).unwrap_err()).contains("unknown proof_kind 9"));
    }

    #[test]
    fn post_fields_are_checked_and_carried() {
        let proofs = vec![vec![1u8, 2, 3], vec![4u8]];
        let mut req = request(CurioKind::WindowPostPartition, 10);
        assert!(reason(translate(&req).unwrap_err()).contains("vanilla_proofs is empty"));
        req.vanilla_proofs = &proofs;
        req.partition_index = 3;
        let t = translate(&req).unwrap();
        assert_eq!(
            t.kind,
            ProofKind::PoSt(RegisteredPoStProof::StackedDrgWindow2KiBV1_2)
        );
        let parsed = PoStRequest::from_json(&t.bytes).unwrap();
        assert_eq!(parsed.prover_id, prover_id(1000));
        assert_eq!(parsed.randomness, [7; 32]);
        assert_eq!(parsed.partition_index, Some(3));
        assert_eq!(parsed.vanilla_proofs, ["AQID", "BA=="]);

        // WinningPoSt: no partition index; a window number is refused, and vice versa.
        let mut winning = request(CurioKind::WinningPost, 0);
        winning.vanilla_proofs = &proofs;
        winning.partition_index = 5;
        let parsed = PoStRequest::from_json(&translate(&winning).unwrap().bytes).unwrap();
        assert_eq!(parsed.partition_index, None);
        winning.registered_proof = 13;
        assert!(reason(translate(&winning).unwrap_err()).contains("does not match"));
        req.registered_proof = 3;
        assert!(reason(translate(&req).unwrap_err()).contains("does not match"));

        // Randomness must be 32 bytes; the sector size, when given, must match.
        req.registered_proof = 10;
        req.randomness = &[0; 31];
        assert!(
            reason(translate(&req).unwrap_err()).contains("randomness must be 32 bytes, got 31")
        );
        req.randomness = &[0; 32];
        req.sector_size = 32 << 30;
        assert!(reason(translate(&req).unwrap_err()).contains("sector_size 34359738368"));
        req.sector_size = 2 << 10;
        assert!(translate(&req).is_ok());
    }

    #[test]
    fn snap_fields_are_checked_and_carried() {
        let proofs = vec![vec![9u8; 40]];
        let mut req = request(CurioKind::SnapDealsUpdate, 3);
        req.vanilla_proofs = &proofs;
        let t = translate(&req).unwrap();
        assert_eq!(
            t.kind,
            ProofKind::SnapDeals(RegisteredUpdateProof::StackedDrg32GiBV1)
        );
        let parsed = SnapRequest::from_json(&t.bytes).unwrap();
        assert_eq!(parsed.comm_r_old, [1; 32]);
        assert_eq!(parsed.comm_r_new, [2; 32]);
        assert_eq!(parsed.comm_d_new, [3; 32]);
        assert_eq!(parsed.vanilla_proofs.len(), 1);
        req.comm_d_new = &[3; 33];
        assert!(
            reason(translate(&req).unwrap_err()).contains("comm_d_new must be 32 bytes, got 33")
        );
        req.comm_d_new = &[3; 32];
        req.registered_proof = 7;
        assert!(reason(translate(&req).unwrap_err()).contains("RegisteredUpdateProof"));
    }

    #[test]
    fn porep_needs_an_envelope_of_the_named_proof() {
        let req = request(CurioKind::PoRepSealCommit, 8);
        assert!(reason(translate(&req).unwrap_err()).contains("vanilla_proof is empty"));
        let mut garbage = req;
        garbage.vanilla_proof = b"{\"SectorNum\": 1, \"Phase1Out\": \"!!\", \"SectorSize\": 2048}";
        assert!(reason(translate(&garbage).unwrap_err()).contains("base64"));
        let mut unknown = req;
        unknown.registered_proof = 99;
        unknown.vanilla_proof = b"{}";
        assert!(reason(translate(&unknown).unwrap_err()).contains("registered_proof 99"));
    }

    #[test]
    fn post_envelopes_are_checked_against_their_own_fields() {
        // A PoSt request's payload (the vanilla proofs) states no proof number, miner or
        // randomness of its own: those are the envelope's, and the vanilla proofs are verified
        // against them when the job is opened (tests/filecoin_post.rs). What the envelope
        // states twice must agree: the sector size and the proof number.
        let proofs = vec![vec![1u8]];
        let mut req = request(CurioKind::WindowPostPartition, 13);
        req.vanilla_proofs = &proofs;
        req.sector_size = 2048;
        let e = translate(&req).unwrap_err();
        assert!(
            e.to_string().contains(
                "sector_size 2048 does not match registered_proof 13 (`post:StackedDrgWindow32GiBV1_2`"
            ),
            "{e}"
        );
    }

    #[test]
    fn snap_sector_size_zero_is_unstated_and_others_must_match() {
        let proofs = vec![vec![9u8; 40]];
        let mut req = request(CurioKind::SnapDealsUpdate, 0);
        req.vanilla_proofs = &proofs;
        req.sector_size = 0;
        assert!(translate(&req).is_ok());
        req.sector_size = 2048;
        assert!(translate(&req).is_ok());
        req.sector_size = 8 << 20;
        let e = translate(&req).unwrap_err();
        assert!(
            e.to_string()
                .contains("sector_size 8388608 does not match registered_proof 0 (`snap:StackedDrg2KiBV1`, 2048 bytes)"),
            "{e}"
        );
    }
}
