//! SnapDeals (empty sector update) proofs of a 2 KiB sector computed by this crate from the
//! partition vanilla proofs, checked with filecoin-proofs-api's own
//! `verify_empty_sector_update_proof`.
//!
//! One process-wide fixture seals a CC sector (zero data) through filecoin-proofs-api
//! (`fixture::seal_cc_sector`: PC1, PC2, C1), encodes new data into it and makes the partition
//! vanilla proofs (`fixture::snap_request`: `empty_sector_update_encode_into`,
//! `generate_partition_proofs`): milliseconds. The 2 KiB update parameters live in the
//! shared test parameter cache (`target/filecoin-test-params`, generated once with the fast
//! generator and the shared seed); `FIL_PROOFS_PARAMETER_CACHE` points filecoin-proofs there, so
//! its verifier reads the `.vk` written beside the `.params` our prover reads.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use filecoin_proofs_api::seal::compute_comm_d;
use filecoin_proofs_api::{RegisteredSealProof, RegisteredUpdateProof};
use kernels::filecoin::fixture::{seal_cc_sector, snap_request, SealedSector, SnapFixture};
use kernels::filecoin::update::{circuit_identifier, SnapDeals, SnapRequest};
use kernels::filecoin::{
    self, detect_kind, open_job, FilecoinJob, ParamFiles, ProofKind, SectorShape2KiB,
    PARTITION_PROOF_LEN,
};
use kernels::srs::SrsImage;
use kernels::{CpuBackend, ErrorKind};
use rand::SeedableRng;

/// The update proof and the seal proof of the sectors it updates.
const PROOF: RegisteredUpdateProof = RegisteredUpdateProof::StackedDrg2KiBV1;
const SEAL_PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
const KIND: ProofKind = ProofKind::SnapDeals(PROOF);
const SECTOR_ID: u64 = 5151;

/// The shared test parameter cache, `target/filecoin-test-params` of the checkout. The checkout
/// is found at run time (cargo sets `CARGO_MANIFEST_DIR` for tests too), so that the test binary
/// does not depend on where it is and stays fresh in a target dir shared by several checkouts.
fn param_dir() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("run by `cargo test`");
    Path::new(&manifest).join("../target/filecoin-test-params")
}

fn work_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("filecoin-snap")
}

/// Points filecoin-proofs' settings (read once per process) at the test dirs before any call.
fn settings() {
    kernels::filecoin::fixture::use_test_dirs(&param_dir(), &work_dir().join("parents")).unwrap();
}

/// Seals a 2 KiB CC sector (zero data), encodes random data into it and makes the update's
/// partition vanilla proofs, all through filecoin-proofs-api.
fn updated() -> &'static SnapFixture {
    &cc_and_update().1
}

fn cc_and_update() -> &'static (SealedSector, SnapFixture) {
    static UPDATED: OnceLock<(SealedSector, SnapFixture)> = OnceLock::new();
    UPDATED.get_or_init(|| {
        settings();
        let t = Instant::now();
        let cc = seal_cc_sector(SEAL_PROOF, &work_dir(), SECTOR_ID, 23).unwrap();
        // A CC sector's data commitment is the one of an all-zero sector.
        assert_eq!(cc.comm_d, compute_comm_d(SEAL_PROOF, &[]).unwrap(), "not a CC sector");
        let u = snap_request(PROOF, &cc, &work_dir(), 24).unwrap();
        eprintln!(
            "sealed a 2 KiB CC sector, encoded new data and made {} partition vanilla proofs in {:.2} s",
            u.vanilla_proofs.len(),
            t.elapsed().as_secs_f64()
        );
        assert_eq!((u.sector_id, u.comm_r_old), (SECTOR_ID, cc.comm_r));
        assert_eq!(u.request, SnapRequest::new(PROOF, u.comm_r_old, u.comm_r_new, u.comm_d_new, &u.vanilla_proofs));
        assert_eq!(u.json, u.request.to_json());
        (cc, u)
    })
}

/// The 2 KiB update parameters of the shared test cache.
fn params() -> &'static ParamFiles {
    static FILES: OnceLock<ParamFiles> = OnceLock::new();
    FILES.get_or_init(|| {
        settings();
        // filecoin-proofs' verifier reads the `.vk` of the update circuit's cache identifier.
        assert_eq!(
            ParamFiles::for_kind(KIND, param_dir()).unwrap().identifier,
            circuit_identifier(PROOF).unwrap(),
            "the parameter files of `{KIND}` are not named after the update circuit"
        );
        kernels::filecoin::fixture::test_parameters(KIND, &param_dir()).unwrap()
    })
}

fn prove(request: &[u8]) -> Vec<u8> {
    let job = open_job(KIND, request).unwrap();
    let files = params();
    let backend = CpuBackend::new(
        SrsImage::from_params_file(&files.params, files.circuit_id(), false).unwrap(),
    )
    .unwrap();
    let t = Instant::now();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(99);
    let proof = filecoin::prove_job(&*job, &backend, &mut rng).unwrap();
    eprintln!(
        "SnapDeals proof (synthesis + CPU proof) in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    proof
}

#[test]
fn snap_proof_verifies_with_filecoin_proofs() {
    let u = updated();
    let request = &u.json;
    assert_eq!(detect_kind(request).unwrap(), KIND);
    let job = open_job(KIND, request).unwrap();
    assert_eq!(job.circuit().filecoin(), Some(KIND));
    assert_eq!(job.partitions(), 1);

    // Our public inputs are the verifier's, partition by partition.
    let theirs = filecoin_proofs::get_sector_update_inputs::<SectorShape2KiB>(
        &PROOF.as_v1_config(),
        u.comm_r_old,
        u.comm_r_new,
        u.comm_d_new,
    )
    .unwrap();
    assert_eq!(theirs.len(), job.partitions());
    for (k, inputs) in theirs.iter().enumerate() {
        assert_eq!(&job.public_inputs(k).unwrap(), inputs, "partition {k}");
    }

    let proof = prove(request);
    assert_eq!(proof.len(), PARTITION_PROOF_LEN * job.partitions());
    assert_eq!(u.partitions(), job.partitions());
    assert!(
        u.verify(&proof).unwrap(),
        "verify_empty_sector_update_proof refused our proof"
    );

    // The same proof must not pass for other commitments.
    let mut other = u.comm_r_new;
    other[0] ^= 1;
    assert!(
        !u.verify_with(&proof, None, Some(other), None).unwrap(),
        "accepted for another comm_r_new"
    );
    assert!(
        !u.verify_with(&proof, Some(u.comm_r_new), None, None)
            .unwrap(),
        "accepted for another comm_r_old"
    );
    let mut other = u.comm_d_new;
    other[0] ^= 1;
    assert!(
        !u.verify_with(&proof, None, None, Some(other))
            .unwrap_or(false),
        "accepted for another comm_d_new"
    );
    let mut damaged = proof.clone();
    damaged[PARTITION_PROOF_LEN - 1] ^= 1;
    assert!(
        !u.verify(&damaged).unwrap_or(false),
        "accepted a damaged proof"
    );
}

#[test]
fn the_precompiled_synthesis_writes_the_full_synthesis_bytes() {
    let job = open_job(KIND, &updated().json).unwrap();
    let r1cs = job.circuit().compile().unwrap();
    kernels::job::check_compiled(&*job, &r1cs).unwrap();
}

#[test]
fn partition_circuit_has_the_blank_circuit_s_shape() {
    let u = updated();
    let job = FilecoinJob::new(SnapDeals::<SectorShape2KiB>::from_json(PROOF, &u.json).unwrap());
    let shape = job.shape(0).unwrap();
    eprintln!(
        "2 KiB update partition: {} constraints, {} inputs, {} aux",
        shape.constraints, shape.inputs, shape.aux
    );
    // The parameters are generated from the blank circuit: the real one must have its shape.
    assert_eq!(shape, KIND.shape().unwrap());
    // ONE, then k and h_select packed, comm_r_old, comm_d_new, comm_r_new.
    assert_eq!(shape.inputs, 5);
    assert_eq!(job.public_inputs(0).unwrap().len(), 4);
    let e = job.circuit(1).err().unwrap();
    assert!(matches!(e.kind(), ErrorKind::PoRepConfig(_)), "{e}");
}

#[test]
fn requests_that_do_not_match_their_vanilla_proofs_are_refused() {
    let u = updated();
    let open_err = |request: &SnapRequest| -> kernels::Error {
        match open_job(KIND, &request.to_json()) {
            Ok(_) => panic!("opened a bad request"),
            Err(e) => e,
        }
    };

    // Another comm_r_new: the vanilla proofs prove another update.
    let mut r = u.request.clone();
    r.comm_r_new[0] ^= 1;
    let e = open_err(&r);
    eprintln!("{e}");
    assert!(matches!(e.kind(), ErrorKind::InvalidRequest(_)), "{e}");
    assert!(
        e.to_string().contains(
            "`comm_r_new` of the request does not match the vanilla proof of partition 0"
        ),
        "{e}"
    );

    // Another sector (comm_r_old) and other data (comm_d_new).
    let mut r = u.request.clone();
    r.comm_r_old = u.comm_r_new;
    r.comm_d_new[3] ^= 1;
    let e = open_err(&r);
    eprintln!("{e}");
    assert!(
        e.to_string()
            .contains("`comm_r_old` and `comm_d_new` of the request do not match"),
        "{e}"
    );

    // Damaged vanilla proof bytes.
    let mut r = u.request.clone();
    let mut bytes = u.vanilla_proofs[0].0.clone();
    bytes.truncate(bytes.len() / 2);
    r.vanilla_proofs[0] = filecoin::encode_base64(&bytes);
    let e = open_err(&r);
    eprintln!("{e}");
    assert!(
        e.to_string()
            .contains("vanilla proof 0 is not a partition proof of a 2048-byte sector"),
        "{e}"
    );

    // Another proof type than the one asked for.
    let e = match open_job(
        ProofKind::SnapDeals(RegisteredUpdateProof::StackedDrg8MiBV1),
        &u.json,
    ) {
        Ok(_) => panic!("opened a 2 KiB request as 8 MiB"),
        Err(e) => e,
    };
    assert!(
        e.to_string().contains("not of `snap:StackedDrg8MiBV1`"),
        "{e}"
    );
}

#[test]
fn malformed_requests_are_refused() {
    let u = updated();
    let json = &u.json;

    let e = open_job(KIND, &json[..json.len() - 10]).err().unwrap();
    assert!(matches!(e.kind(), ErrorKind::InvalidRequest(_)), "{e}");
    assert!(e.to_string().contains("truncated JSON"), "{e}");
    let e = detect_kind(&json[..json.len() / 3]).err().unwrap();
    assert!(e.to_string().contains("truncated JSON"), "{e}");

    // Wrong partition count: a 2 KiB update has one partition.
    let mut r = u.request.clone();
    r.vanilla_proofs.push(r.vanilla_proofs[0].clone());
    let e = open_job(KIND, &r.to_json()).err().unwrap();
    assert!(
        e.to_string()
            .contains("2 vanilla proofs, the update of a 2048-byte sector has 1 partition"),
        "{e}"
    );
    r.vanilla_proofs.clear();
    let e = open_job(KIND, &r.to_json()).err().unwrap();
    assert!(e.to_string().contains("0 vanilla proofs"), "{e}");

    // The request file form names the file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snap.json");
    std::fs::write(&path, &json[..json.len() - 1]).unwrap();
    let e = filecoin::open_job_file(None, &path).err().unwrap();
    assert!(
        e.to_string().contains("snap.json") && e.to_string().contains("truncated"),
        "{e}"
    );
    std::fs::write(&path, json).unwrap();
    assert_eq!(
        filecoin::open_job_file(None, &path)
            .unwrap()
            .circuit()
            .filecoin(),
        Some(KIND)
    );
}

#[test]
fn fixture_refuses_a_sector_of_another_size() {
    let (cc, _) = cc_and_update();
    let mut big = cc.clone();
    big.proof = RegisteredSealProof::StackedDrg8MiBV1_1;
    let e = snap_request(PROOF, &big, &work_dir().join("refused"), 1).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::PoRepConfig(_)), "{e}");
    assert!(
        e.to_string().contains("not one of `snap:StackedDrg2KiBV1`"),
        "{e}"
    );
}
