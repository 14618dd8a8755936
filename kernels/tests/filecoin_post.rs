//! WinningPoSt and WindowPoSt of 2 KiB sectors computed by this crate from the sectors' vanilla
//! proofs, checked with filecoin-proofs-api's own `verify_winning_post` / `verify_window_post`.
//!
//! One process-wide fixture seals three 2 KiB sectors through filecoin-proofs-api
//! (`fixture::seal_sector`: PC1, PC2, C1; the replica and the cache dir with `tree_r_last` and
//! `p_aux` are all PoSt needs): milliseconds. The requests (`fixture::post_request`) take their
//! challenges and vanilla proofs from filecoin-proofs-api as lotus and Curio make them. The 2 KiB
//! PoSt parameters live in the shared test parameter cache (`target/filecoin-test-params`,
//! generated once with the fast generator and the shared seed); `FIL_PROOFS_PARAMETER_CACHE`
//! points filecoin-proofs there, so its verifiers read the `.vk` written beside the `.params` our
//! prover reads.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use filecoin_proofs::{FallbackPoStSectorProof, SectorShape2KiB};
use filecoin_proofs_api::post::get_num_partition_for_fallback_post;
use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof};
use kernels::filecoin::fixture::{
    post_request, randomness, seal_sector, PoStFixture, SealedSector, PROVER_ID,
};
use kernels::filecoin::post::PoStRequest;
use kernels::filecoin::{self, detect_kind, open_job, ParamFiles, ProofKind, PARTITION_PROOF_LEN};
use kernels::srs::SrsImage;
use kernels::{CpuBackend, ErrorKind};
use rand::SeedableRng;
use storage_proofs_core::merkle::MerkleProofTrait;

const WINNING: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWinning2KiBV1;
const WINDOW: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWindow2KiBV1_2;
const SEAL_PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
/// Three sectors: two WindowPoSt partitions of two sectors (the second one padded).
const SECTOR_IDS: [u64; 3] = [7001, 7002, 7003];

/// The shared test parameter cache, `target/filecoin-test-params` of the checkout. The checkout
/// is found at run time (cargo sets `CARGO_MANIFEST_DIR` for tests too), so that the test binary
/// does not depend on where it is and stays fresh in a target dir shared by several checkouts.
fn param_dir() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("run by `cargo test`");
    Path::new(&manifest).join("../target/filecoin-test-params")
}

fn work_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("filecoin-post")
}

/// Points filecoin-proofs' settings (read once per process) at the test dirs before any call.
fn settings() {
    kernels::filecoin::fixture::use_test_dirs(&param_dir(), &work_dir().join("parents")).unwrap();
}

/// Seals the three sectors (seeded random data) through filecoin-proofs-api.
fn sectors() -> &'static [SealedSector] {
    static SECTORS: OnceLock<Vec<SealedSector>> = OnceLock::new();
    SECTORS.get_or_init(|| {
        settings();
        let t = Instant::now();
        let sectors: Vec<SealedSector> = SECTOR_IDS
            .iter()
            .map(|&n| seal_sector(SEAL_PROOF, &work_dir(), n, n).unwrap())
            .collect();
        eprintln!(
            "sealed {} 2 KiB sectors (PC1, PC2, C1) in {:.2} s",
            sectors.len(),
            t.elapsed().as_secs_f64()
        );
        sectors
    })
}

/// The 2 KiB parameters of `proof` in the shared test cache.
fn params(proof: RegisteredPoStProof) -> &'static ParamFiles {
    static WINNING_FILES: OnceLock<ParamFiles> = OnceLock::new();
    static WINDOW_FILES: OnceLock<ParamFiles> = OnceLock::new();
    let cell = if proof == WINNING {
        &WINNING_FILES
    } else {
        &WINDOW_FILES
    };
    cell.get_or_init(|| {
        settings();
        kernels::filecoin::fixture::test_parameters(ProofKind::PoSt(proof), &param_dir()).unwrap()
    })
}

fn prove(job: &dyn kernels::job::Job) -> Vec<u8> {
    let files = params(match job.circuit().filecoin() {
        Some(ProofKind::PoSt(p)) => p,
        _ => panic!("not a PoSt job: {}", job.circuit()),
    });
    let backend = CpuBackend::new(
        SrsImage::from_params_file(&files.params, files.circuit_id(), false).unwrap(),
    )
    .unwrap();
    let t = Instant::now();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(99);
    let proof = filecoin::prove_job(job, &backend, &mut rng).unwrap();
    eprintln!(
        "{} proof, {} partitions (synthesis + CPU proof) in {:.1} s",
        job.circuit(),
        job.partitions(),
        t.elapsed().as_secs_f64()
    );
    proof
}

/// The request of `proof` with `randomness` over all sectors (WinningPoSt: the sector it picks).
fn request(proof: RegisteredPoStProof, randomness: [u8; 32]) -> PoStFixture {
    let f = post_request(proof, sectors(), randomness).unwrap();
    assert_eq!(f.prover_id, PROVER_ID);
    f
}

/// The sealed sector `id`.
fn sector(id: u64) -> &'static SealedSector {
    sectors().iter().find(|s| s.sector_id == id).unwrap()
}

#[test]
fn winning_post_verifies_with_filecoin_proofs() {
    let r = randomness(1);
    let f = request(WINNING, r);
    assert_eq!(
        f.sectors.len(),
        1,
        "a 2 KiB WinningPoSt challenges one sector"
    );
    let (sector_id, comm_r) = f.sectors[0];
    assert_eq!(comm_r, sector(sector_id).comm_r);
    let kind = detect_kind(&f.json).unwrap();
    assert_eq!(kind, ProofKind::PoSt(WINNING));
    assert_eq!(f.kind(), kind);
    let job = open_job(kind, &f.json).unwrap();
    assert_eq!(job.circuit().filecoin(), Some(kind));
    assert_eq!(job.partitions(), 1);
    assert_eq!(f.partitions().unwrap(), 1);
    // The verifier's inputs: 66 (comm_r, challenge) pairs.
    assert_eq!(job.public_inputs(0).unwrap().len(), 66 * 2);

    let proof = prove(&*job);
    assert_eq!(proof.len(), PARTITION_PROOF_LEN * job.partitions());

    assert!(
        f.verify(&proof).unwrap(),
        "verify_winning_post refused our proof"
    );
    let other = sectors().iter().find(|s| s.sector_id != sector_id).unwrap();
    assert!(
        !f.verify_with(&proof, None, Some((sector_id, other.comm_r)))
            .unwrap(),
        "accepted with another sector's comm_r"
    );
    assert!(
        !f.verify_with(&proof, Some(randomness(2)), None).unwrap(),
        "accepted with another randomness"
    );
    let mut damaged = proof.clone();
    damaged[PARTITION_PROOF_LEN - 1] ^= 1;
    assert!(
        !f.verify(&damaged).unwrap_or(false),
        "accepted a damaged proof"
    );
    // A sector that is not the request's is an error, not a vacuous `false`.
    assert!(f
        .verify_with(&proof, None, Some((1, other.comm_r)))
        .is_err());
}

#[test]
fn window_post_verifies_with_filecoin_proofs() {
    let all = sectors();
    let r = randomness(3);
    let f = request(WINDOW, r);
    assert_eq!(f.sector_ids(), SECTOR_IDS);
    let kind = detect_kind(&f.json).unwrap();
    assert_eq!(kind, ProofKind::PoSt(WINDOW));
    let job = open_job(kind, &f.json).unwrap();
    let partitions = get_num_partition_for_fallback_post(WINDOW, all.len()).unwrap();
    assert_eq!(partitions, 2);
    assert_eq!(job.partitions(), partitions);
    assert_eq!(f.partitions().unwrap(), partitions);

    let proof = prove(&*job);
    assert_eq!(proof.len(), PARTITION_PROOF_LEN * partitions);

    assert!(
        f.verify(&proof).unwrap(),
        "verify_window_post refused our proof"
    );
    assert!(
        !f.verify_with(&proof, None, Some((SECTOR_IDS[2], all[0].comm_r)))
            .unwrap(),
        "accepted with another sector's comm_r"
    );
    assert!(
        !f.verify_with(&proof, Some(randomness(4)), None).unwrap(),
        "accepted with another randomness"
    );

    // One partition at a time (generate_single_window_post_with_vanilla): partition 1 is the
    // third sector alone; merged after partition 0 it is the same proof.
    let single = f.partition_request(1).unwrap();
    assert_eq!(single.vanilla_proof_bytes().unwrap(), f.vanilla_proofs[2..]);
    let single_job = open_job(kind, &single.to_json().unwrap()).unwrap();
    assert_eq!(single_job.partitions(), 1);
    assert_eq!(
        single_job.public_inputs(0).unwrap(),
        job.public_inputs(1).unwrap()
    );
    let part1 = prove(&*single_job);
    assert_eq!(part1.len(), PARTITION_PROOF_LEN);
    let merged = [&proof[..PARTITION_PROOF_LEN], &part1[..]].concat();
    assert!(
        f.verify(&merged).unwrap(),
        "verify_window_post refused the merged partition proofs"
    );
    // The partition proof is not partition 0's.
    let swapped_parts = [&part1[..], &proof[PARTITION_PROOF_LEN..]].concat();
    assert!(
        !f.verify(&swapped_parts).unwrap(),
        "accepted partitions in the wrong order"
    );
    assert!(f.partition_request(2).is_err());
}

#[test]
fn the_precompiled_synthesis_writes_the_full_synthesis_bytes() {
    for (proof, seed) in [(WINNING, 7), (WINDOW, 8)] {
        let f = request(proof, randomness(seed));
        let job = open_job(f.kind(), &f.json).unwrap();
        let r1cs = job.circuit().compile().unwrap();
        // WindowPoSt: both partitions, the second padded.
        kernels::job::check_compiled(&*job, &r1cs).unwrap();
    }
}

#[test]
fn bad_requests_give_clear_errors() {
    let window_kind = ProofKind::PoSt(WINDOW);
    let r = randomness(5);
    let window = request(WINDOW, r);
    let vanilla = &window.vanilla_proofs;

    // Vanilla proofs of another randomness.
    let json = PoStRequest::new(WINDOW, PROVER_ID, randomness(6), vanilla)
        .to_json()
        .unwrap();
    let e = open_job(window_kind, &json).err().unwrap();
    assert!(matches!(e.kind(), ErrorKind::InvalidRequest(_)), "{e}");
    assert!(
        e.to_string()
            .contains("the vanilla proofs of sectors 7001, 7002, 7003 do not verify"),
        "{e}"
    );
    eprintln!("{e}");
    let winning = request(WINNING, randomness(7));
    let winning_sector = winning.sectors[0].0;
    let mut other = winning.request.clone();
    other.randomness = randomness(8);
    let e = open_job(ProofKind::PoSt(WINNING), &other.to_json().unwrap())
        .err()
        .unwrap();
    assert!(
        e.to_string().contains(&format!(
            "the vanilla proofs of sector {winning_sector} do not verify"
        )),
        "{e}"
    );
    eprintln!("{e}");

    // A winning vanilla proof whose first challenge is right but not the others (filecoin-proofs'
    // own check of a winning partition sees the first): our check of all 66 refuses it.
    let mut tampered: FallbackPoStSectorProof<SectorShape2KiB> =
        bincode::deserialize(&winning.vanilla_proofs[0]).unwrap();
    let inclusion = &mut tampered.vanilla_proof.sectors[0].inclusion_proofs;
    let (i, j) = (1..inclusion.len())
        .find_map(|i| {
            (1..inclusion.len())
                .find(|&j| inclusion[i].path() != inclusion[j].path())
                .map(|j| (i, j))
        })
        .unwrap();
    inclusion[i] = inclusion[j].clone();
    let request = PoStRequest::new(
        WINNING,
        PROVER_ID,
        winning.randomness,
        &[bincode::serialize(&tampered).unwrap()],
    );
    let e = open_job(ProofKind::PoSt(WINNING), &request.to_json().unwrap())
        .err()
        .unwrap();
    assert!(
        e.to_string().contains(&format!(
            "the vanilla proofs of partition 0 (sector {winning_sector}) do not verify"
        )),
        "{e}"
    );
    eprintln!("{e}");

    // A winning request opened as a window one, and window vanilla proofs in a winning request.
    let e = open_job(window_kind, &winning.json).err().unwrap();
    assert!(
        e.to_string().contains(
            "a request of `post:StackedDrgWinning2KiBV1`, not of `post:StackedDrgWindow2KiBV1_2`"
        ),
        "{e}"
    );
    let as_winning = PoStRequest::new(WINNING, PROVER_ID, r, &vanilla[..1])
        .to_json()
        .unwrap();
    let e = open_job(ProofKind::PoSt(WINNING), &as_winning)
        .err()
        .unwrap();
    assert!(e.to_string().contains("proves 10 challenges"), "{e}");
    eprintln!("{e}");

    // Truncated JSON.
    let json = &window.json;
    let e = open_job(window_kind, &json[..json.len() - 3])
        .err()
        .unwrap();
    assert!(e.to_string().contains("truncated JSON"), "{e}");
    let e = detect_kind(&json[..json.len() / 3]).err().unwrap();
    assert!(e.to_string().contains("truncated JSON"), "{e}");

    // Sectors out of the verifier's order, or twice.
    let reversed: Vec<Vec<u8>> = vanilla.iter().rev().cloned().collect();
    let e = open_job(
        window_kind,
        &PoStRequest::new(WINDOW, PROVER_ID, r, &reversed)
            .to_json()
            .unwrap(),
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("ascending sector id order"), "{e}");
    let twice = [vanilla[0].clone(), vanilla[0].clone()];
    let e = open_job(
        window_kind,
        &PoStRequest::new(WINDOW, PROVER_ID, r, &twice)
            .to_json()
            .unwrap(),
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("ascending sector id order"), "{e}");

    // A damaged vanilla proof (truncated bytes).
    let cut = [vanilla[0][..vanilla[0].len() - 1].to_vec()];
    let e = open_job(
        window_kind,
        &PoStRequest::new(WINDOW, PROVER_ID, r, &cut)
            .to_json()
            .unwrap(),
    )
    .err()
    .unwrap();
    assert!(
        e.to_string()
            .contains("`vanilla_proofs[0]` is not a vanilla proof"),
        "{e}"
    );

    // The valid request opens.
    assert_eq!(open_job(window_kind, json).unwrap().partitions(), 2);
}

#[test]
fn fixture_refuses_what_it_cannot_make() {
    let all = sectors();
    // No sectors, a sector twice, a sector of another size.
    let e = post_request(WINDOW, &[], randomness(9)).unwrap_err();
    assert!(e.to_string().contains("no sectors"), "{e}");
    let e = post_request(WINDOW, &[all[0].clone(), all[0].clone()], randomness(9)).unwrap_err();
    assert!(e.to_string().contains("sector 7001 is given twice"), "{e}");
    let e = post_request(
        RegisteredPoStProof::StackedDrgWindow8MiBV1_2,
        all,
        randomness(9),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("not one of `post:StackedDrgWindow8MiBV1_2`"),
        "{e}"
    );
    // Sectors in any order: the request lists them in ascending id order.
    let shuffled = [all[2].clone(), all[0].clone(), all[1].clone()];
    let f = post_request(WINDOW, &shuffled, randomness(9)).unwrap();
    assert_eq!(f.sector_ids(), SECTOR_IDS);
    assert_eq!(f.json, request(WINDOW, randomness(9)).json);
}
