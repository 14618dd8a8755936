//! The cuzk gRPC API with Curio's payloads (issue 11): one real `splitprover run` (CPU backend,
//! 2 KiB sectors, the PoRep, WinningPoSt, WindowPoSt and SnapDeals circuits) driven through the
//! generated client exactly as Curio's `lib/ffi/cuzk_funcs.go` fills `SubmitProofRequest`:
//! PoRep C2 from the `Commit2In` envelope over the Unix socket, WinningPoSt over TCP, WindowPoSt
//! one partition per request (the two partitions' proofs concatenated are the full proof) and
//! SnapDeals from bincode vanilla proofs and raw commitments. Every proof is checked with
//! filecoin-proofs' own verifiers. Bad payloads are refused with `INVALID_ARGUMENT` naming the
//! reason while the service goes on proving; a proof that fails (a synthesis panic injected
//! for the first job: every payload that parses but is wrong is already refused at submit,
//! where the vanilla proofs are verified) is `OK` with status `FAILED`; `GetStatus` names the
//! SRS as cuzk does and shows queues per proof kind; `GetMetrics` counts per kind;
//! `EvictSRS`/`PreloadSRS` take cuzk's circuit names.
//!
//! Sectors are sealed in the test (`fixture::seal_sector`, as `filecoin_post_snap.rs` does);
//! parameters come from the shared test parameter cache (`target/filecoin-test-params`).

mod common;
#[path = "common/filecoin.rs"]
mod fil_common;
use fil_common::{param_dir, params, settings_env};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kernels::circuits::AnyCircuit;
use kernels::filecoin::fixture::{
    post_request, randomness, seal_cc_sector, seal_sector, snap_request, PoStFixture, SealedSector,
    SnapFixture, PROVER_MINER_ID,
};
use kernels::filecoin::post::PoStRequest;
use kernels::filecoin::{
    open_job, ProofKind, RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof,
    PARTITION_PROOF_LEN,
};
use launcher::api::client::{Client, ClientError};
use launcher::api::{curio, pb, Endpoint};

const SEAL: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
const WINNING: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWinning2KiBV1;
const WINDOW: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWindow2KiBV1_2;
const SNAP: RegisteredUpdateProof = RegisteredUpdateProof::StackedDrg2KiBV1;
/// The Go ABI numbers Curio sends for them (`abi.RegisteredSealProof_StackedDrg2KiBV1_1`,
/// `abi.RegisteredPoStProof_StackedDrgWinning2KiBV1`, `…Window2KiBV1_1` (the api's `V1_2`),
/// `abi.RegisteredUpdateProof_StackedDrg2KiBV1`).
const GO_SEAL: u64 = 5;
const GO_WINNING: u64 = 0;
const GO_WINDOW: u64 = 10;
const GO_SNAP: u64 = 0;
/// Three sectors: a WindowPoSt of two partitions (2 KiB: two sectors each, the second holds
/// one), the first one's C1 output is the PoRep C2 request.
const SECTOR_IDS: [u64; 3] = [9001, 9002, 9003];
/// The CC sector the SnapDeals update starts from.
const CC_SECTOR_ID: u64 = 9100;

fn work_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("launcher-grpc-filecoin")
}

/// The sealed sectors and the requests over them.
struct Fixtures {
    sectors: Vec<SealedSector>,
    winning: PoStFixture,
    window: PoStFixture,
    snap: SnapFixture,
}

/// The fixtures, made once for every test of this binary: the tests run in parallel and would
/// otherwise seal the same sectors in the same directory at once.
fn fixtures() -> &'static Fixtures {
    static FIXTURES: std::sync::OnceLock<Fixtures> = std::sync::OnceLock::new();
    FIXTURES.get_or_init(make_fixtures)
}

fn make_fixtures() -> Fixtures {
    settings_env();
    let t = Instant::now();
    let dir = work_dir().join("sectors");
    let sectors: Vec<SealedSector> = SECTOR_IDS
        .iter()
        .map(|&id| seal_sector(SEAL, &dir, id, id).unwrap())
        .collect();
    let cc = seal_cc_sector(SEAL, &dir, CC_SECTOR_ID, CC_SECTOR_ID).unwrap();
    let winning = post_request(WINNING, &sectors, randomness(31)).unwrap();
    let window = post_request(WINDOW, &sectors, randomness(32)).unwrap();
    let snap = snap_request(SNAP, &cc, &work_dir().join("update"), 33).unwrap();
    eprintln!(
        "sealed {} sectors and a CC sector, made the PoSt and SnapDeals requests in {:.2} s",
        sectors.len(),
        t.elapsed().as_secs_f64()
    );
    assert_eq!(winning.vanilla_proofs.len(), 1);
    assert_eq!(window.sector_ids(), SECTOR_IDS);
    assert_eq!(window.partitions().unwrap(), 2);
    assert_eq!(snap.partitions(), 1);
    Fixtures {
        sectors,
        winning,
        window,
        snap,
    }
}

/// A `splitprover run` of the four circuits, on a Unix socket and a TCP port; killed on drop.
struct Service {
    child: Child,
    log: PathBuf,
    socket: PathBuf,
    tcp: String,
    _dir: tempfile::TempDir,
}

impl Service {
    fn start(kinds: &[ProofKind], fault: &str) -> Service {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("cuzk.sock");
        let log = dir.path().join("log.txt");
        // A port free now; the service binds it a moment later.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let tcp = format!("127.0.0.1:{port}");
        let circuits: String = kinds
            .iter()
            .map(|k| format!("[[circuit]]\nspec = \"{k}\"\n"))
            .collect();
        let config = dir.path().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "cache_dir = {:?}\nsocket = {:?}\nparam_cache = {:?}\n[ring]\nslots = 3\n\
                 huge_pages = \"none\"\n[[gpu]]\nbackend = \"cpu\"\n{circuits}[service]\n\
                 journal = {:?}\nlisten = [\"{tcp}\"]\n",
                dir.path(),
                socket,
                param_dir(),
                dir.path().join("jobs.sqlite"),
            ),
        )
        .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_splitprover"))
            .args(["run", "--config", config.to_str().unwrap()])
            .env("SPLITPROVER_LOG", "info")
            .env("FIL_PROOFS_PARAMETER_CACHE", param_dir())
            .env(shm_protocol::fault::FAULT_ENV, fault)
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut s = Service {
            child,
            log,
            socket,
            tcp,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            if let Some(status) = s.child.try_wait().unwrap() {
                panic!("service exited at start ({status}):\n{}", s.log_text());
            }
            let up = |e: &Endpoint| Client::connect(e).and_then(|mut c| c.status()).is_ok();
            if s.socket.exists() && up(&s.unix()) && up(&s.tcp()) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "service did not start:\n{}",
                s.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn unix(&self) -> Endpoint {
        Endpoint::Unix(self.socket.clone())
    }

    fn tcp(&self) -> Endpoint {
        Endpoint::Tcp(self.tcp.clone())
    }

    fn client(&self, e: &Endpoint) -> Client {
        Client::connect(e).unwrap()
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            launcher::pipeline::child::kill(self.child.id(), libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// Curio's PoRep C2 request (`cuzk_funcs.go`): the `Commit2In` envelope of the C1 output.
fn porep(s: &SealedSector) -> pb::SubmitProofRequest {
    pb::SubmitProofRequest {
        request_id: format!("porep-{PROVER_MINER_ID}-{}", s.sector_id),
        proof_kind: pb::ProofKind::PorepSealCommit as i32,
        sector_size: 2048,
        registered_proof: GO_SEAL,
        priority: pb::Priority::Normal as i32,
        vanilla_proof: s.commit2in_json(),
        sector_number: s.sector_id,
        miner_id: PROVER_MINER_ID,
        ..Default::default()
    }
}

/// A `Commit2In` envelope with its numeric field `name` set to `value`.
fn with_field(envelope: &[u8], name: &str, value: u64) -> Vec<u8> {
    let mut v: serde_json::Value = serde_json::from_slice(envelope).unwrap();
    v[name] = value.into();
    serde_json::to_vec(&v).unwrap()
}

/// Curio's PoSt request: one bincode `FallbackPoStSectorProof` per sector.
fn post(
    kind: pb::ProofKind,
    registered_proof: u64,
    f: &PoStFixture,
    vanilla_proofs: &[Vec<u8>],
    partition_index: u32,
    request_id: &str,
) -> pb::SubmitProofRequest {
    pb::SubmitProofRequest {
        request_id: request_id.into(),
        proof_kind: kind as i32,
        sector_size: 2048,
        registered_proof,
        priority: if kind == pb::ProofKind::WinningPost {
            pb::Priority::Critical
        } else {
            pb::Priority::High
        } as i32,
        vanilla_proofs: vanilla_proofs.to_vec(),
        miner_id: PROVER_MINER_ID,
        randomness: f.randomness.to_vec(),
        partition_index,
        ..Default::default()
    }
}

fn winning(f: &PoStFixture, request_id: &str) -> pb::SubmitProofRequest {
    post(
        pb::ProofKind::WinningPost,
        GO_WINNING,
        f,
        &f.vanilla_proofs,
        0,
        request_id,
    )
}

/// Partition `k` of the WindowPoSt: its sectors' vanilla proofs only, as Curio sends each
/// partition.
fn window(f: &PoStFixture, k: usize) -> pb::SubmitProofRequest {
    let per = f.sector_count().unwrap();
    let proofs = f.vanilla_proofs.chunks(per).nth(k).unwrap();
    post(
        pb::ProofKind::WindowPostPartition,
        GO_WINDOW,
        f,
        proofs,
        k as u32,
        &format!("wdpost-{PROVER_MINER_ID}-0-{k}"),
    )
}

/// Curio's SnapDeals request: one vanilla proof per partition, raw 32-byte commitments (and,
/// as one of its paths does, no sector size).
fn snap(f: &SnapFixture) -> pb::SubmitProofRequest {
    pb::SubmitProofRequest {
        request_id: format!("snap-{PROVER_MINER_ID}-{}", f.sector_id),
        proof_kind: pb::ProofKind::SnapDealsUpdate as i32,
        sector_size: 0,
        registered_proof: GO_SNAP,
        priority: pb::Priority::Normal as i32,
        vanilla_proofs: f.vanilla_proofs.iter().map(|p| p.0.clone()).collect(),
        sector_number: f.sector_id,
        miner_id: PROVER_MINER_ID,
        comm_r_old: f.comm_r_old.to_vec(),
        comm_r_new: f.comm_r_new.to_vec(),
        comm_d_new: f.comm_d_new.to_vec(),
        ..Default::default()
    }
}

/// The proof of a `COMPLETED` answer, checked against its partition count.
fn completed(a: pb::AwaitProofResponse, what: &str, partitions: usize, log: &str) -> Vec<u8> {
    use pb::await_proof_response::Status;
    assert_eq!(
        a.status,
        Status::Completed as i32,
        "{what}: {a:?}\nservice log:\n{log}"
    );
    assert!(a.error_message.is_empty(), "{what}: {}", a.error_message);
    assert_eq!(a.proof.len(), partitions * PARTITION_PROOF_LEN, "{what}");
    a.proof
}

/// The `cuzk_proofs_*{proof_kind="…"}` value in Prometheus text.
fn metric(text: &str, name: &str, kind: &str) -> Option<u64> {
    let key = format!("{name}{{proof_kind=\"{kind}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .map(|v| v.trim().parse().unwrap())
}

/// A `SubmitProofRequest` translated as the service translates it.
fn translate(r: &pb::SubmitProofRequest) -> Result<curio::Translated, kernels::Error> {
    launcher::api::curio_request(r).and_then(|c| curio::translate(&c))
}

/// Curio's payloads translated (no service): PoRep C2's request is its `Commit2In` envelope,
/// whose job is the C1 output's job; each WindowPoSt partition's request is the one
/// `PoStFixture::partition_request` makes (so the prover id made from the miner id is the
/// fixtures' `PROVER_ID`). A number of another proof type or a wrong sector size is refused with
/// the field named.
#[test]
fn curio_payloads_translate_to_the_fixtures_requests() {
    let f = fixtures();
    let s = &f.sectors[0];
    let t = translate(&porep(s)).unwrap();
    assert_eq!(t.kind, s.kind());
    assert_eq!(t.bytes, s.commit2in_json());
    let job = open_job(t.kind, &t.bytes).unwrap();
    let api = open_job(s.kind(), &s.c1_json).unwrap();
    assert_eq!(job.public_inputs(0).unwrap(), api.public_inputs(0).unwrap());
    let cases = [
        (
            pb::SubmitProofRequest {
                registered_proof: 0,
                ..porep(s)
            },
            "registered_proof 0".to_owned(),
        ),
        (
            pb::SubmitProofRequest {
                registered_proof: 8,
                ..porep(s)
            },
            "registered_proof 8 (`porep:StackedDrg32GiBV1_1`) does not match the C1 output's \
             `porep:StackedDrg2KiBV1_1`"
                .to_owned(),
        ),
        (
            pb::SubmitProofRequest {
                sector_size: 32 << 30,
                ..porep(s)
            },
            "sector_size".to_owned(),
        ),
    ];
    for (bad, want) in cases {
        let e = translate(&bad).unwrap_err();
        assert!(e.to_string().contains(&want), "{e}\nwanted: {want}");
    }

    for k in 0..f.window.partitions().unwrap() {
        let t = translate(&window(&f.window, k)).unwrap();
        assert_eq!(t.kind, ProofKind::PoSt(WINDOW));
        assert_eq!(
            PoStRequest::from_json(&t.bytes).unwrap(),
            f.window.partition_request(k).unwrap()
        );
    }
}

#[test]
fn curio_payloads_over_grpc_prove_what_filecoin_proofs_verifies() {
    let _g = common::serial();
    let f = fixtures();
    let kinds = [
        ProofKind::PoRep(SEAL),
        ProofKind::PoSt(WINNING),
        ProofKind::PoSt(WINDOW),
        ProofKind::SnapDeals(SNAP),
    ];
    for k in kinds {
        params(k);
    }
    // The first job the pipeline takes panics in its synthesis: a proof that fails.
    let t = Instant::now();
    let service = Service::start(&kinds, "synth-panic@job=1");
    eprintln!(
        "service of {} circuits up in {:.1} s",
        kinds.len(),
        t.elapsed().as_secs_f64()
    );
    let log = || service.log_text();
    let mut unix = service.client(&service.unix());
    let mut tcp = service.client(&service.tcp());

    // GetStatus names every configured SRS as cuzk does, with its size; no job yet.
    let st = unix.status().unwrap();
    let mut names: Vec<String> = st.loaded_srs.iter().map(|l| l.circuit_id.clone()).collect();
    names.sort();
    let mut expected: Vec<String> = kinds
        .iter()
        .map(|&k| launcher::srs::cuzk_circuit_id(&AnyCircuit::Filecoin(k)))
        .collect();
    expected.sort();
    assert_eq!(
        expected,
        ["porep-2k", "snap-2k", "winning-2k", "wpost-2k"],
        "cuzk's names of the 2 KiB circuits"
    );
    assert_eq!(names, expected, "{st:?}");
    for l in &st.loaded_srs {
        assert!(l.size_bytes > 0, "{l:?}");
        assert_eq!(l.tier, pb::srs_status::Tier::Hot as i32, "{l:?}");
    }
    assert!(!st.gpus.is_empty(), "{st:?}");
    assert!(st.queues.is_empty(), "{st:?}");

    // A proof that fails is not an RPC error: OK, status FAILED, the reason.
    let a = tcp
        .prove(winning(&f.winning, "winning-that-fails"))
        .unwrap();
    assert_eq!(
        a.status,
        pb::await_proof_response::Status::Failed as i32,
        "{a:?}\n{}",
        log()
    );
    assert!(
        a.error_message.contains("synthesis panicked"),
        "{}",
        a.error_message
    );
    assert!(a.proof.is_empty());

    // Bad payloads: INVALID_ARGUMENT naming the reason, over either transport.
    let good_porep = porep(&f.sectors[0]);
    let truncated = f.winning.vanilla_proofs[0][..f.winning.vanilla_proofs[0].len() / 2].to_vec();
    let bad: Vec<(&str, pb::SubmitProofRequest, &str)> = vec![
        (
        "garbage vanilla_proof",
        pb::SubmitProofRequest {
            vanilla_proof: b"\x00\x01 not an envelope".to_vec(),
            ..good_porep.clone()
        },
        "JSON",
        ),
        (
        "Phase1Out not base64",
        pb::SubmitProofRequest {
            vanilla_proof:
                b"{\"SectorNum\": 9001, \"Phase1Out\": \"!!not base64!!\", \"SectorSize\": 2048}"
                    .to_vec(),
            ..good_porep.clone()
        },
        "base64",
        ),
        (
        "registered_proof of another seal proof",
        pb::SubmitProofRequest {
            registered_proof: 6,
            ..good_porep.clone()
        },
        "registered_proof 6 (`porep:StackedDrg8MiBV1_1`) does not match the C1 output's \
         `porep:StackedDrg2KiBV1_1`",
        ),
        (
        "unknown registered_proof",
        pb::SubmitProofRequest {
            registered_proof: 99,
            ..good_porep.clone()
        },
        "registered_proof 99 is not a RegisteredSealProof",
        ),
        (
        "sector_size mismatch",
        pb::SubmitProofRequest {
            sector_size: 8 << 20,
            ..good_porep.clone()
        },
        "sector_size 8388608 does not match the envelope's `SectorSize` 2048",
        ),
        (
        "an envelope whose SectorSize (32 GiB) contradicts its 2 KiB C1 output",
        pb::SubmitProofRequest {
            sector_size: 32 << 30,
            vanilla_proof: with_field(&good_porep.vanilla_proof, "SectorSize", 32 << 30),
            ..good_porep.clone()
        },
        "the envelope's `SectorSize` 34359738368 does not match its C1 output's \
         `porep:StackedDrg2KiBV1_1` (2048 bytes)",
        ),
        (
        "sector_number not the envelope's",
        pb::SubmitProofRequest {
            sector_number: good_porep.sector_number + 1,
            ..good_porep.clone()
        },
        "does not match the envelope's `SectorNum`",
        ),
        (
        "miner_id not the C1 output's",
        pb::SubmitProofRequest {
            miner_id: PROVER_MINER_ID + 1,
            ..good_porep.clone()
        },
        "do not match the C1 output's replica id",
        ),
        (
        "randomness of 31 bytes",
        pb::SubmitProofRequest {
            randomness: f.winning.randomness[..31].to_vec(),
            ..winning(&f.winning, "bad-randomness")
        },
        "randomness must be 32 bytes, got 31",
        ),
        (
        "empty vanilla_proofs",
        pb::SubmitProofRequest {
            vanilla_proofs: Vec::new(),
            ..window(&f.window, 0)
        },
        "vanilla_proofs is empty",
        ),
        (
        "truncated bincode vanilla proof",
        pb::SubmitProofRequest {
            vanilla_proofs: vec![truncated],
            ..winning(&f.winning, "truncated-vanilla")
        },
        "vanilla proof",
        ),
        (
        "comm_r_new of 31 bytes",
        pb::SubmitProofRequest {
            comm_r_new: f.snap.comm_r_new[..31].to_vec(),
            ..snap(&f.snap)
        },
        "comm_r_new must be 32 bytes, got 31",
        ),
        (
        "proof_kind 9",
        pb::SubmitProofRequest {
            proof_kind: 9,
            ..good_porep.clone()
        },
        "unknown proof_kind 9",
        ),
    ];
    for (i, (what, request, reason)) in bad.into_iter().enumerate() {
        let client = if i % 2 == 0 { &mut unix } else { &mut tcp };
        let e: ClientError = client
            .prove(request)
            .err()
            .unwrap_or_else(|| panic!("{what}: accepted"));
        eprintln!("{what}: {e}");
        assert_eq!(
            e.code(),
            Some(tonic::Code::InvalidArgument),
            "{what}: {e:?}"
        );
        assert!(e.to_string().contains(reason), "{what}: {e}");
    }
    // `tcp` is not used again until the metrics, after the proofs: longer than the server's
    // HTTP/2 keepalive (a ping after 30 s idle, 20 s for its ack) lets an idle connection live.
    let tcp_idle_since = Instant::now();

    // The good requests, all in flight together: PoRep C2 by Prove over the Unix socket and
    // WinningPoSt by Prove over TCP, from their own connections (as Curio's tasks do); the two
    // WindowPoSt partitions and SnapDeals by SubmitProof, NORMAL work last.
    let t = Instant::now();
    let (porep_answer, winning_answer, window_answers, snap_answer, queues) =
        std::thread::scope(|s| {
            let porep_thread = s.spawn(|| {
                service
                    .client(&service.unix())
                    .prove(porep(&f.sectors[0]))
                    .unwrap()
            });
            let winning_thread = s.spawn(|| {
                service
                    .client(&service.tcp())
                    .prove(winning(&f.winning, "winning-9001"))
                    .unwrap()
            });
            let mut ids = Vec::new();
            for k in 0..2 {
                let a = unix.submit(window(&f.window, k)).unwrap();
                assert_eq!(a.job_id, format!("wdpost-{PROVER_MINER_ID}-0-{k}"));
                assert!(!a.existing);
                ids.push(a.job_id);
            }
            let a = unix.submit(snap(&f.snap)).unwrap();
            assert_eq!(a.job_id, format!("snap-{PROVER_MINER_ID}-{CC_SECTOR_ID}"));
            // The SnapDeals job was just accepted and proving it takes seconds: it is live.
            let queues = unix.status().unwrap().queues;
            let window_answers: Vec<_> = ids
                .iter()
                .map(|id| unix.await_proof(id, 0).unwrap())
                .collect();
            let snap_answer = unix.await_proof(&a.job_id, 0).unwrap();
            (
                porep_thread.join().unwrap(),
                winning_thread.join().unwrap(),
                window_answers,
                snap_answer,
                queues,
            )
        });
    eprintln!(
        "PoRep C2, WinningPoSt, WindowPoSt (2 partitions) and SnapDeals through gRPC in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    eprintln!("queues while they ran: {queues:?}");
    for q in &queues {
        assert!(
            ["porep_c2", "winning_post", "window_post", "snap_update"]
                .contains(&q.proof_kind.as_str()),
            "{q:?}"
        );
        assert!(q.pending + q.in_progress > 0, "{q:?}");
    }
    let snap_queue = queues
        .iter()
        .find(|q| q.proof_kind == "snap_update")
        .unwrap_or_else(|| panic!("no snap_update queue: {queues:?}"));
    assert_eq!(snap_queue.pending + snap_queue.in_progress, 1);

    // PoRep C2: filecoin-proofs' verify_seal accepts it, for this sector only.
    let sector = &f.sectors[0];
    let bytes = completed(porep_answer, "PoRep C2", 1, &log());
    assert!(
        sector.verify(&bytes, None).unwrap(),
        "verify_seal refused the proof from gRPC"
    );
    assert!(
        !sector.verify(&bytes, Some(sector.sector_id + 1)).unwrap(),
        "accepted for another sector number"
    );

    // WinningPoSt: verify_winning_post accepts it, not for another randomness.
    let bytes = completed(winning_answer, "WinningPoSt", 1, &log());
    assert!(
        f.winning.verify(&bytes).unwrap(),
        "verify_winning_post refused the proof from gRPC"
    );
    assert!(
        !f.winning
            .verify_with(&bytes, Some(randomness(34)), None)
            .unwrap(),
        "accepted for another randomness"
    );

    // WindowPoSt: the partitions' proofs in order are the proof verify_window_post accepts.
    let mut bytes = Vec::new();
    for (k, a) in window_answers.into_iter().enumerate() {
        bytes.extend(completed(
            a,
            &format!("WindowPoSt partition {k}"),
            1,
            &log(),
        ));
    }
    assert!(
        f.window.verify(&bytes).unwrap(),
        "verify_window_post refused the partitions' proofs from gRPC"
    );
    let mut swapped = bytes[PARTITION_PROOF_LEN..].to_vec();
    swapped.extend_from_slice(&bytes[..PARTITION_PROOF_LEN]);
    assert!(
        !f.window.verify(&swapped).unwrap_or(false),
        "accepted with the partitions swapped"
    );

    // SnapDeals: verify_empty_sector_update_proof accepts it, not for another comm_d_new.
    let bytes = completed(snap_answer, "SnapDeals", 1, &log());
    assert!(
        f.snap.verify(&bytes).unwrap(),
        "verify_empty_sector_update_proof refused the proof from gRPC"
    );
    let mut comm_d_new = f.snap.comm_d_new;
    comm_d_new[0] ^= 1;
    assert!(
        !f.snap
            .verify_with(&bytes, None, None, Some(comm_d_new))
            .unwrap_or(false),
        "accepted for another comm_d_new"
    );

    // Curio's retry of the PoRep task (same request id): the same job, no second proof.
    let again = unix.submit(porep(&f.sectors[0])).unwrap();
    assert!(again.existing, "{again:?}");
    let a = unix.await_proof(&again.job_id, 0).unwrap();
    assert!(sector.verify(&a.proof, None).unwrap());

    // GetMetrics counts per kind, with cuzk's names; GetStatus's totals agree. Asked on the
    // TCP connection idle since the bad payloads: at least a minute, so the server has pinged
    // it (a client that does not answer pings between calls is cut off and its next call
    // fails with a transport error).
    let idle = Duration::from_secs(60);
    if let Some(rest) = idle.checked_sub(tcp_idle_since.elapsed()) {
        std::thread::sleep(rest);
    }
    let text = tcp
        .metrics()
        .unwrap_or_else(|e| panic!("GetMetrics on a connection idle for a minute: {e:?}"));
    let count = |name, kind| {
        metric(&text, name, kind).unwrap_or_else(|| panic!("no {name} of {kind} in:\n{text}"))
    };
    assert_eq!(count("cuzk_proofs_completed", "porep_c2"), 1, "{text}");
    assert_eq!(count("cuzk_proofs_completed", "winning_post"), 1, "{text}");
    assert_eq!(count("cuzk_proofs_completed", "window_post"), 2, "{text}");
    assert_eq!(count("cuzk_proofs_completed", "snap_update"), 1, "{text}");
    assert_eq!(count("cuzk_proofs_failed", "winning_post"), 1, "{text}");
    assert_eq!(count("cuzk_proofs_failed", "porep_c2"), 0, "{text}");
    assert!(
        text.lines().any(|l| l == "cuzk_proofs_completed_total 5"),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l == "cuzk_proofs_failed_total 1"),
        "{text}"
    );
    let st = unix.status().unwrap();
    assert_eq!(
        (st.total_proofs_completed, st.total_proofs_failed),
        (5, 1),
        "{st:?}"
    );
    assert!(st.queues.is_empty(), "{st:?}");

    // EvictSRS and PreloadSRS by cuzk's names (as Curio's `porep-32g`): a real unload and load.
    let srs_line = |c: &mut Client, id: &str| {
        c.status()
            .unwrap()
            .loaded_srs
            .into_iter()
            .find(|l| l.circuit_id == id)
            .unwrap_or_else(|| panic!("no SRS line `{id}`"))
    };
    let size = srs_line(&mut unix, "snap-2k").size_bytes;
    let evicted = unix.evict_srs("snap-2k").unwrap();
    assert!(evicted.was_loaded);
    assert_eq!(evicted.freed_bytes, size);
    let line = srs_line(&mut unix, "snap-2k");
    assert_eq!(
        (line.tier, line.size_bytes),
        (pb::srs_status::Tier::Cold as i32, 0),
        "{line:?}"
    );
    let loaded = tcp.preload_srs("snap-2k").unwrap();
    assert!(!loaded.already_loaded);
    assert_eq!(loaded.size_bytes, size);
    let line = srs_line(&mut tcp, "snap-2k");
    assert_eq!(
        (line.tier, line.size_bytes),
        (pb::srs_status::Tier::Hot as i32, size),
        "{line:?}"
    );
    assert!(unix.preload_srs("porep-2k").unwrap().already_loaded);
    // A circuit this service was not configured with, an unknown job: NOT_FOUND.
    let e = unix.preload_srs("porep-32g").unwrap_err();
    assert_eq!(e.code(), Some(tonic::Code::NotFound), "{e:?}");
    assert!(e.to_string().contains("porep-2k"), "{e}");
    let e = unix
        .await_proof(&format!("porep-{PROVER_MINER_ID}-424242"), 0)
        .unwrap_err();
    assert_eq!(e.code(), Some(tonic::Code::NotFound), "{e:?}");

    drop((unix, tcp));
    launcher::pipeline::child::kill(service.child.id(), libc::SIGTERM);
    let mut service = service;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = service.child.try_wait().unwrap() {
            assert!(status.success(), "{status}\n{}", service.log_text());
            break;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}
