//! Property tests standing in for fuzz targets (cargo-fuzz needs a nightly toolchain CI does not
//! have) over every request form a client can send: the three C1 forms (filecoin-proofs-api's
//! JSON, lotus-bench's `Commit2In`, filecoin-proofs' own JSON), the PoSt and SnapDeals request
//! JSON, and what the launcher's Curio translation (`launcher::api::curio`) makes of cuzk's
//! `SubmitProofRequest` fields (a checked `Commit2In` envelope, a PoSt or SnapDeals request built
//! from arbitrary fields). Inputs are arbitrary
//! bytes and structured mutations of valid requests (byte flips, truncations, splices, JSON
//! values swapped for hostile ones); every one must come back as a value — a job or an error —
//! never as a panic. Case counts are bounded so each property runs in a few seconds in CI;
//! `SPLITPROVER_FUZZ_SCALE=N` multiplies them for a longer hunt.
#![cfg(feature = "filecoin")]

mod common;

use kernels::filecoin::porep::{check_commit2in, Stated};
use kernels::filecoin::post::PoStRequest;
use kernels::filecoin::update::SnapRequest;
use kernels::filecoin::{
    detect_kind, encode_base64, open_job, prover_id, ProofKind, RegisteredPoStProof,
    RegisteredSealProof, RegisteredUpdateProof,
};
use proptest::prelude::*;

const SEAL: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
const WINNING: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWinning2KiBV1;
const WINDOW: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWindow2KiBV1_2;
const SNAP: RegisteredUpdateProof = RegisteredUpdateProof::StackedDrg2KiBV1;

/// Every kind a mutated request is opened as.
fn kinds() -> [ProofKind; 5] {
    [
        ProofKind::PoRep(SEAL),
        ProofKind::PoRep(RegisteredSealProof::StackedDrg32GiBV1_1),
        ProofKind::PoSt(WINNING),
        ProofKind::PoSt(WINDOW),
        ProofKind::SnapDeals(SNAP),
    ]
}

/// A 32-byte value that is a field element (top bits clear), as lotus masks randomness.
fn element(fill: u8) -> [u8; 32] {
    let mut v = [fill; 32];
    v[31] &= 0x3f;
    v
}

/// A C1 output of a 2 KiB sector in filecoin-proofs-api's form, sealed for miner 1000, sector
/// 42 (no vanilla proofs: everything else is well-formed).
fn api_c1() -> Vec<u8> {
    use filecoin_proofs_api::seal::{SealCommitPhase1Output, VanillaSealProof};
    let c1 = SealCommitPhase1Output {
        registered_proof: SEAL,
        vanilla_proofs: VanillaSealProof::StackedDrg2KiBV1(vec![vec![]]),
        comm_r: element(4),
        comm_d: element(6),
        replica_id: Default::default(),
        seed: element(3),
        ticket: element(5),
    };
    serde_json::to_vec(&c1).unwrap()
}

/// The same C1 output in filecoin-proofs' own form (the proof type is then named apart).
fn raw_c1() -> Vec<u8> {
    let c1 = filecoin_proofs::SealCommitPhase1Output::<filecoin_proofs::SectorShape2KiB> {
        vanilla_proofs: vec![vec![]],
        comm_r: element(4),
        comm_d: element(6),
        replica_id: Default::default(),
        seed: element(3),
        ticket: element(5),
    };
    serde_json::to_vec(&c1).unwrap()
}

/// lotus-bench's `Commit2In` around [`api_c1`].
fn commit2in() -> Vec<u8> {
    use base64::Engine;
    let inner = base64::engine::general_purpose::STANDARD.encode(api_c1());
    format!(r#"{{"SectorNum": 42, "Phase1Out": "{inner}", "SectorSize": 2048}}"#).into_bytes()
}

fn post_json(proof: RegisteredPoStProof) -> Vec<u8> {
    // WinningPoSt takes one vanilla proof (its challenged sector), a window partition several.
    let vanilla: Vec<Vec<u8>> = match proof {
        WINDOW => vec![(0..120u8).collect(), vec![7; 64]],
        _ => vec![(0..120u8).collect()],
    };
    let r = PoStRequest::new(proof, element(1), element(2), &vanilla);
    let r = if proof == WINDOW {
        r.with_partition_index(0)
    } else {
        r
    };
    r.to_json().unwrap()
}

fn snap_json() -> Vec<u8> {
    let proofs = [filecoin_proofs_api::PartitionProofBytes(
        (0..200u8).collect(),
    )];
    SnapRequest::new(SNAP, element(1), element(2), element(3), &proofs).to_json()
}

/// Every valid request form.
fn seeds() -> Vec<Vec<u8>> {
    vec![
        api_c1(),
        raw_c1(),
        commit2in(),
        post_json(WINNING),
        post_json(WINDOW),
        snap_json(),
    ]
}

/// Opens `bytes` every way a client's request is opened; any outcome but a panic passes.
fn open_every_way(bytes: &[u8]) {
    let _ = detect_kind(bytes);
    for kind in kinds() {
        let _ = open_job(kind, bytes);
    }
}

/// A structured change to a request's bytes.
#[derive(Clone, Debug)]
enum Mutation {
    /// XOR one byte.
    Flip(prop::sample::Index, u8),
    /// Cut the request.
    Truncate(prop::sample::Index),
    /// Insert bytes.
    Insert(prop::sample::Index, Vec<u8>),
    /// Copy a stretch of the request elsewhere (duplicated keys, nested repeats).
    Splice(prop::sample::Index, prop::sample::Index, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<prop::sample::Index>(), 1..=255u8).prop_map(|(i, x)| Mutation::Flip(i, x)),
        any::<prop::sample::Index>().prop_map(Mutation::Truncate),
        (
            any::<prop::sample::Index>(),
            prop::collection::vec(any::<u8>(), 1..16)
        )
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        (
            any::<prop::sample::Index>(),
            any::<prop::sample::Index>(),
            1..64usize
        )
            .prop_map(|(a, b, n)| Mutation::Splice(a, b, n)),
    ]
}

fn apply(mut bytes: Vec<u8>, ms: &[Mutation]) -> Vec<u8> {
    for m in ms {
        if bytes.is_empty() {
            break;
        }
        match m {
            Mutation::Flip(i, x) => {
                let i = i.index(bytes.len());
                bytes[i] ^= x;
            }
            Mutation::Truncate(i) => bytes.truncate(i.index(bytes.len())),
            Mutation::Insert(i, b) => {
                let i = i.index(bytes.len() + 1);
                bytes.splice(i..i, b.iter().copied());
            }
            Mutation::Splice(from, to, n) => {
                let from = from.index(bytes.len());
                let end = (from + n).min(bytes.len());
                let piece = bytes[from..end].to_vec();
                let to = to.index(bytes.len() + 1);
                bytes.splice(to..to, piece);
            }
        }
    }
    bytes
}

/// JSON values a hostile client puts where a field belongs.
fn hostile_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{json, Value};
    prop_oneof![
        Just(Value::Null),
        Just(json!(-1)),
        Just(json!(u64::MAX)),
        Just(json!(1e308)),
        Just(json!("")),
        Just(json!("StackedDrg32GiBV1_1")),
        Just(json!([])),
        Just(json!({})),
        Just(json!([[[[[[[[]]]]]]]])),
        Just(json!(vec![0u8; 33])),
        Just(json!(vec![255u8; 32])),
        any::<i64>().prop_map(Value::from),
        "[a-zA-Z0-9+/=]{0,40}".prop_map(Value::from),
    ]
}

/// Replaces the `pick`-th value (depth first) of `v` with `with`.
fn replace_nth(v: &mut serde_json::Value, pick: &mut usize, with: &serde_json::Value) -> bool {
    if *pick == 0 {
        *v = with.clone();
        return true;
    }
    *pick -= 1;
    match v {
        serde_json::Value::Array(a) => a.iter_mut().any(|x| replace_nth(x, pick, with)),
        serde_json::Value::Object(o) => o.values_mut().any(|x| replace_nth(x, pick, with)),
        _ => false,
    }
}

proptest! {
    #![proptest_config(common::fuzz_config(256))]

    /// Arbitrary bytes, some starting like JSON.
    #[test]
    fn arbitrary_bytes_are_refused_without_a_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        json_start in any::<bool>(),
    ) {
        let mut bytes = bytes;
        if json_start {
            bytes.insert(0, b'{');
        }
        open_every_way(&bytes);
    }

    /// Byte-level mutations of every valid request form.
    #[test]
    fn mutated_requests_are_refused_or_opened_without_a_panic(
        seed in prop::sample::select(seeds()),
        ms in prop::collection::vec(mutation(), 1..6),
    ) {
        open_every_way(&apply(seed, &ms));
    }

    /// A field of a valid request's JSON swapped for a hostile value (also inside the
    /// `Commit2In`'s base64 C1 output).
    #[test]
    fn hostile_json_values_are_refused_without_a_panic(
        which in 0..7usize,
        pick in 0..400usize,
        with in hostile_value(),
    ) {
        let mut v: serde_json::Value = match which {
            6 => serde_json::from_slice(&api_c1()).unwrap(),
            i => serde_json::from_slice(&seeds()[i]).unwrap(),
        };
        let mut n = pick;
        replace_nth(&mut v, &mut n, &with);
        let bytes = serde_json::to_vec(&v).unwrap();
        open_every_way(&bytes);
        if which == 6 {
            use base64::Engine;
            let inner = base64::engine::general_purpose::STANDARD.encode(&bytes);
            let wrapped = format!(r#"{{"SectorNum": 42, "Phase1Out": "{inner}", "SectorSize": 2048}}"#);
            open_every_way(wrapped.as_bytes());
        }
    }

    /// cuzk's envelope as the launcher's Curio translation hands it on: a PoRep payload checked
    /// against arbitrary stated fields ([`check_commit2in`]), PoSt and SnapDeals requests built
    /// from arbitrary fields; what passes is opened too.
    #[test]
    fn curio_envelopes_are_checked_or_refused_without_a_panic(
        family in 0..3usize,
        sector_size in prop::sample::select(vec![0u64, 2048, 8 << 20, 32 << 30, u64::MAX]),
        ms in prop::collection::vec(mutation(), 0..3),
        payload in 0..6usize,
        vanilla_proofs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..3),
        sector_number in prop_oneof![Just(42u64), any::<u64>()],
        miner_id in prop_oneof![Just(1000u64), any::<u64>()],
        randomness in any::<[u8; 32]>(),
        partition_index in prop::option::of(any::<u32>()),
        commitment in any::<[u8; 32]>(),
    ) {
        let stated = |v: u64| (v != 0).then_some(v);
        let vanilla_proofs: Vec<String> = vanilla_proofs.iter().map(|p| encode_base64(p)).collect();
        let (kind, bytes) = match family {
            0 => {
                let vanilla_proof = apply(seeds()[payload].clone(), &ms);
                let checked = check_commit2in(
                    &vanilla_proof,
                    Stated {
                        miner_id: stated(miner_id),
                        sector_number: stated(sector_number),
                        sector_size: stated(sector_size),
                    },
                );
                let Ok(kind) = checked else { return Ok(()); };
                (kind, vanilla_proof)
            }
            1 => {
                let proof = if partition_index.is_some() { WINDOW } else { WINNING };
                let request = PoStRequest {
                    registered_proof: proof,
                    prover_id: prover_id(miner_id),
                    randomness,
                    vanilla_proofs,
                    partition_index: partition_index.map(|k| k as usize),
                };
                (ProofKind::PoSt(proof), request.to_json().unwrap())
            }
            _ => {
                let request = SnapRequest {
                    registered_update_proof: SNAP,
                    comm_r_old: commitment,
                    comm_r_new: commitment,
                    comm_d_new: commitment,
                    vanilla_proofs,
                };
                (ProofKind::SnapDeals(SNAP), request.to_json())
            }
        };
        let _ = open_job(kind, &bytes);
    }
}

/// The seeds are what they claim: each opens as far as its (absent or fake) vanilla proofs,
/// so the mutations above start from requests that pass every earlier check.
#[test]
fn the_seeds_are_valid_up_to_their_vanilla_proofs() {
    assert_eq!(detect_kind(&api_c1()).unwrap(), ProofKind::PoRep(SEAL));
    assert_eq!(detect_kind(&commit2in()).unwrap(), ProofKind::PoRep(SEAL));
    assert_eq!(
        detect_kind(&post_json(WINNING)).unwrap(),
        ProofKind::PoSt(WINNING)
    );
    assert_eq!(
        detect_kind(&snap_json()).unwrap(),
        ProofKind::SnapDeals(SNAP)
    );
    let reason = |kind, bytes: &[u8]| open_job(kind, bytes).err().unwrap().to_string();
    // The C1 forms get as far as the partition count (a 2 KiB sector has one partition, with
    // vanilla proofs).
    for c1 in [api_c1(), raw_c1(), commit2in()] {
        let r = reason(ProofKind::PoRep(SEAL), &c1);
        assert!(r.contains("partition 0 has no vanilla proofs"), "{r}");
    }
    // PoSt and SnapDeals get as far as decoding the vanilla proofs.
    let r = reason(ProofKind::PoSt(WINNING), &post_json(WINNING));
    assert!(r.contains("vanilla proof"), "{r}");
    let r = reason(ProofKind::SnapDeals(SNAP), &snap_json());
    assert!(r.contains("vanilla proof 0"), "{r}");
}
