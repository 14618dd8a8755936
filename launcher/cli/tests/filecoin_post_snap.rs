//! WinningPoSt, WindowPoSt and SnapDeals through the split pipeline with real processes: 2 KiB
//! sectors sealed in the test (`fixture::seal_sector`, `fixture::seal_cc_sector`), their requests
//! made through filecoin-proofs-api as lotus and Curio make them (`fixture::post_request`,
//! `fixture::snap_request`), proved by one pipeline serving the three circuits at once (synth-proc
//! and gpu-proc as processes) and checked with filecoin-proofs-api's own verifiers
//! (`verify_winning_post`, `verify_window_post`, `verify_empty_sector_update_proof`); bad requests
//! are refused alone while the others are served; the CLI (`prove --post`, `prove --snap`) writes
//! proofs the same verifiers accept.
//!
//! Parameters come from the shared test parameter cache (`target/filecoin-test-params`, fast
//! generator, fixed seed: whichever test binary runs first generates them).

mod common;
#[path = "common/filecoin.rs"]
mod fil_common;
use common::{cli, serial};
use fil_common::{param_dir, params, settings_env};

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kernels::circuits::AnyCircuit;
use kernels::filecoin::fixture::{
    post_request, randomness, seal_cc_sector, seal_sector, snap_request, PoStFixture, SealedSector,
    SnapFixture,
};
use kernels::filecoin::{
    ProofKind, RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof, PARTITION_PROOF_LEN,
};
use launcher::jobs::JobOutcome;
use launcher::pipeline::{CircuitSetting, JobHandle, Pipeline, PipelineSettings};

const WINNING: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWinning2KiBV1;
const WINDOW: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWindow2KiBV1_2;
const SNAP: RegisteredUpdateProof = RegisteredUpdateProof::StackedDrg2KiBV1;
const SEAL_PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
/// Three sectors: a WindowPoSt of two partitions (2 KiB: two sectors each, the second padded).
const SECTOR_IDS: [u64; 3] = [8001, 8002, 8003];
/// The CC sector the SnapDeals update starts from.
const CC_SECTOR_ID: u64 = 8100;

fn work_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("launcher-filecoin-post-snap")
}

/// The sealed sectors and the requests over them, made once per process.
struct Requests {
    sectors: Vec<SealedSector>,
    /// WinningPoSt over the three sectors (the one it picks).
    winning: PoStFixture,
    /// WindowPoSt over the three sectors: two partitions.
    window: PoStFixture,
    /// SnapDeals of the CC sector.
    snap: SnapFixture,
}

fn requests() -> &'static Requests {
    static REQUESTS: OnceLock<Requests> = OnceLock::new();
    REQUESTS.get_or_init(|| {
        settings_env();
        let t = Instant::now();
        let dir = work_dir().join("sectors");
        let sectors: Vec<SealedSector> = SECTOR_IDS
            .iter()
            .map(|&id| seal_sector(SEAL_PROOF, &dir, id, id).unwrap())
            .collect();
        let cc = seal_cc_sector(SEAL_PROOF, &dir, CC_SECTOR_ID, CC_SECTOR_ID).unwrap();
        let winning = post_request(WINNING, &sectors, randomness(21)).unwrap();
        let window = post_request(WINDOW, &sectors, randomness(22)).unwrap();
        let snap = snap_request(SNAP, &cc, &work_dir().join("update"), 23).unwrap();
        eprintln!(
            "sealed {} sectors and a CC sector, made the PoSt and SnapDeals requests in {:.2} s",
            sectors.len(),
            t.elapsed().as_secs_f64()
        );
        assert_eq!(winning.sectors.len(), 1);
        assert_eq!(window.sector_ids(), SECTOR_IDS);
        assert_eq!(window.partitions().unwrap(), 2);
        assert_eq!(snap.partitions(), 1);
        Requests {
            sectors,
            winning,
            window,
            snap,
        }
    })
}

/// Writes a request file in the work dir.
fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let path = work_dir().join(name);
    std::fs::create_dir_all(work_dir()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    path
}

/// One pipeline serving every kind of `kinds`.
fn settings(kinds: &[ProofKind]) -> PipelineSettings {
    let circuits: Vec<CircuitSetting> = kinds
        .iter()
        .map(|&k| CircuitSetting {
            spec: AnyCircuit::Filecoin(k),
            params: params(k).params,
            slots: 0,
        })
        .collect();
    let mut s =
        PipelineSettings::for_circuit(circuits[0].spec, circuits[0].params.clone()).unwrap();
    s.circuits = circuits;
    s.program = PathBuf::from(env!("CARGO_BIN_EXE_splitprover"));
    s.huge_pages = shm_protocol::HugePagePolicy::Plain;
    s.slots = 3;
    s.synthesis.cache_dir = Some(fil_common::r1cs_cache());
    s
}

/// The proof bytes of a successful outcome (the partitions' proofs concatenated), checked against
/// the partition count.
fn proof_of(o: JobOutcome, what: &str, partitions: usize) -> Vec<u8> {
    let proofs = o
        .result
        .unwrap_or_else(|e| panic!("{what} (job {}) failed: {e}", o.job_id));
    assert_eq!(proofs.len(), partitions, "{what}");
    let bytes = proofs.concat();
    assert_eq!(bytes.len(), partitions * PARTITION_PROOF_LEN, "{what}");
    bytes
}

#[test]
fn post_and_snap_requests_through_one_pipeline_verify_and_bad_requests_fail_alone() {
    let _g = serial();
    let r = requests();
    let kinds = [
        ProofKind::PoSt(WINNING),
        ProofKind::PoSt(WINDOW),
        ProofKind::SnapDeals(SNAP),
    ];
    let t = Instant::now();
    let p = Pipeline::start(settings(&kinds)).unwrap();
    p.wait_ready(Duration::from_secs(120)).unwrap();
    eprintln!(
        "pipeline serving {} circuits ready in {:.1} s",
        kinds.len(),
        t.elapsed().as_secs_f64()
    );

    let winning = write("winning.json", &r.winning.json);
    let window = write("window.json", &r.window.json);
    let snap = write("snap.json", &r.snap.json);
    // Bad requests: a truncated one, a winning request whose vanilla proofs are of another
    // randomness than the one it names, a SnapDeals request submitted as a WinningPoSt.
    let truncated = write(
        "truncated-window.json",
        &r.window.json[..r.window.json.len() / 2],
    );
    let mut stale = r.winning.request.clone();
    stale.randomness = randomness(24);
    let stale = write("stale-winning.json", &stale.to_json().unwrap());

    // Everything submitted at once from several threads; the good requests are all in flight
    // together.
    let t = Instant::now();
    let (good, bad): (Vec<JobHandle>, Vec<String>) = std::thread::scope(|s| {
        let p = &p;
        let good: Vec<_> = [&winning, &window, &snap]
            .map(|path| s.spawn(move || p.submit_request(None, None, path)))
            .into_iter()
            .collect();
        let bad: Vec<_> = [(None, &truncated), (None, &stale), (Some(kinds[0]), &snap)]
            .map(|(kind, path)| s.spawn(move || p.submit_request(kind, None, path)))
            .into_iter()
            .collect();
        let good = good
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect();
        let bad = bad
            .into_iter()
            .map(|h| match h.join().unwrap() {
                Ok(job) => panic!("bad request accepted as job {}", job.id),
                Err(e) => format!("{e:#}"),
            })
            .collect();
        (good, bad)
    });
    for e in &bad {
        eprintln!("refused: {e}");
    }
    assert!(
        bad[0].contains("truncated-window.json") && bad[0].contains("truncated JSON"),
        "{}",
        bad[0]
    );
    let winning_sector = r.winning.sectors[0].0;
    assert!(
        bad[1].contains("stale-winning.json")
            && bad[1].contains(&format!(
                "the vanilla proofs of sector {winning_sector} do not verify"
            )),
        "{}",
        bad[1]
    );
    assert!(
        bad[2].contains("snap.json") && bad[2].contains("not a PoSt request"),
        "{}",
        bad[2]
    );

    let mut outcomes = good.into_iter().map(|h| h.wait().unwrap());
    let (o_winning, o_window, o_snap) = (
        outcomes.next().unwrap(),
        outcomes.next().unwrap(),
        outcomes.next().unwrap(),
    );
    eprintln!(
        "through the split pipeline, all in flight at once ({:.1} s in all): WinningPoSt {:.1} s, \
         WindowPoSt (2 partitions) {:.1} s, SnapDeals {:.1} s",
        t.elapsed().as_secs_f64(),
        o_winning.elapsed.as_secs_f64(),
        o_window.elapsed.as_secs_f64(),
        o_snap.elapsed.as_secs_f64()
    );

    // WinningPoSt: verifies; not for another sector's comm_r, nor another randomness.
    let bytes = proof_of(o_winning, "WinningPoSt", 1);
    assert!(
        r.winning.verify(&bytes).unwrap(),
        "verify_winning_post refused the pipeline's proof"
    );
    let other = r
        .sectors
        .iter()
        .find(|s| s.sector_id != winning_sector)
        .unwrap();
    assert!(
        !r.winning
            .verify_with(&bytes, None, Some((winning_sector, other.comm_r)))
            .unwrap(),
        "accepted for another sector's comm_r"
    );
    assert!(
        !r.winning
            .verify_with(&bytes, Some(randomness(25)), None)
            .unwrap(),
        "accepted for another randomness"
    );
    // Nor as the PoSt of another sector (its id and comm_r).
    assert!(
        !r.winning
            .verify_for(
                &bytes,
                r.winning.randomness,
                &[(other.sector_id, other.comm_r)]
            )
            .unwrap(),
        "accepted as another sector's WinningPoSt"
    );

    // WindowPoSt: verifies; not with a sector's comm_r replaced, nor another randomness.
    let bytes = proof_of(o_window, "WindowPoSt", 2);
    assert!(
        r.window.verify(&bytes).unwrap(),
        "verify_window_post refused the pipeline's proof"
    );
    assert!(
        !r.window
            .verify_with(&bytes, None, Some((SECTOR_IDS[2], r.sectors[0].comm_r)))
            .unwrap(),
        "accepted with another sector's comm_r"
    );
    assert!(
        !r.window
            .verify_with(&bytes, Some(randomness(25)), None)
            .unwrap(),
        "accepted for another randomness"
    );

    // SnapDeals: verifies; not for another new replica nor another old sector.
    let bytes = proof_of(o_snap, "SnapDeals", 1);
    assert!(
        r.snap.verify(&bytes).unwrap(),
        "verify_empty_sector_update_proof refused the pipeline's proof"
    );
    let mut comm_r_new = r.snap.comm_r_new;
    comm_r_new[0] ^= 1;
    assert!(
        !r.snap
            .verify_with(&bytes, None, Some(comm_r_new), None)
            .unwrap(),
        "accepted for another comm_r_new"
    );
    assert!(
        !r.snap
            .verify_with(&bytes, Some(r.sectors[0].comm_r), None, None)
            .unwrap(),
        "accepted for another sector (comm_r_old)"
    );

    let c = p.counters();
    assert_eq!((c.submitted, c.succeeded, c.failed), (3, 3, 0), "{c:?}");
    p.shutdown();
}

#[test]
fn cli_prove_post_and_snap_write_proofs_filecoin_proofs_accepts() {
    let _g = serial();
    let r = requests();
    params(ProofKind::PoSt(WINDOW));
    params(ProofKind::SnapDeals(SNAP));
    let dir = tempfile::tempdir().unwrap();
    let pc = param_dir();
    let env = [("FIL_PROOFS_PARAMETER_CACHE", pc.as_path())];
    let prove = |flag: &str, request: &Path, out: &Path| {
        let t = Instant::now();
        let (code, _, err) = cli(
            &[
                "prove",
                flag,
                request.to_str().unwrap(),
                "--huge-pages",
                "none",
                "--slots",
                "2",
                "--out",
                out.to_str().unwrap(),
            ],
            &env,
        );
        eprintln!(
            "splitprover prove {flag}: exit {code} in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        (code, err)
    };

    // WindowPoSt of two sectors: one partition.
    let window = post_request(WINDOW, &r.sectors[..2], randomness(26)).unwrap();
    assert_eq!(window.partitions().unwrap(), 1);
    let request = dir.path().join("window.json");
    std::fs::write(&request, &window.json).unwrap();
    let out = dir.path().join("window.proof");
    let (code, err) = prove("--post", &request, &out);
    assert_eq!(code, 0, "{err}");
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(bytes.len(), PARTITION_PROOF_LEN);
    assert!(
        window.verify(&bytes).unwrap(),
        "verify_window_post refused the CLI's proof"
    );
    assert!(
        !window
            .verify_with(&bytes, Some(randomness(27)), None)
            .unwrap(),
        "accepted for another randomness"
    );

    // SnapDeals.
    let request = dir.path().join("snap.json");
    std::fs::write(&request, &r.snap.json).unwrap();
    let out = dir.path().join("snap.proof");
    let (code, err) = prove("--snap", &request, &out);
    assert_eq!(code, 0, "{err}");
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(bytes.len(), PARTITION_PROOF_LEN);
    assert!(
        r.snap.verify(&bytes).unwrap(),
        "verify_empty_sector_update_proof refused the CLI's proof"
    );
    let mut comm_d_new = r.snap.comm_d_new;
    comm_d_new[0] ^= 1;
    assert!(
        !r.snap
            .verify_with(&bytes, None, None, Some(comm_d_new))
            .unwrap_or(false),
        "accepted for another comm_d_new"
    );

    // A truncated request: refused before any process starts, naming the file and the problem.
    let truncated = dir.path().join("truncated-snap.json");
    std::fs::write(&truncated, &r.snap.json[..r.snap.json.len() / 2]).unwrap();
    let out = dir.path().join("never.proof");
    let (code, err) = prove("--snap", &truncated, &out);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("truncated-snap.json") && err.contains("truncated JSON"),
        "{err}"
    );
    assert!(!out.exists());
}
