//! Filecoin proofs through the split pipeline with real processes (issue 5): a 2 KiB sector sealed
//! in the test (PC1, PC2, C1 through filecoin-proofs-api), its C2 synthesized by synth-proc into
//! a ring slot (a witness-only slot in the first test: gpu-proc computes a, b, c from the
//! matrices) and proved by gpu-proc, the proof bytes checked with filecoin-proofs' `verify_seal`;
//! bad requests fail alone while the pipeline keeps serving; the CLI (`prove --porep-c1`,
//! `params check`) and the service (`submit --porep-c1`) do the same.
//!
//! Parameters come from the shared test parameter cache (`target/filecoin-test-params`, fast
//! generator, fixed seed: whichever test binary runs first generates them).

mod common;
#[path = "common/filecoin.rs"]
mod fil_common;
use common::{cli, serial};
use fil_common::{param_dir, params, settings_env};

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kernels::circuits::AnyCircuit;
use kernels::filecoin::fixture::{seal_sector, SealedSector};
use kernels::filecoin::{ParamFiles, ProofKind, RegisteredSealProof};
use launcher::pipeline::child::kill;
use launcher::pipeline::{Pipeline, PipelineSettings};

const PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;

fn work_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("launcher-filecoin")
}

/// Sealed sectors by id, with their C1 output written to `c1-<id>.json`.
fn sector(id: u64) -> (SealedSector, PathBuf) {
    settings_env();
    static SEALED: Mutex<Vec<SealedSector>> = Mutex::new(Vec::new());
    let mut sealed = SEALED.lock().unwrap();
    let s = match sealed.iter().find(|s| s.sector_id == id) {
        Some(s) => s.clone(),
        None => {
            let s = seal_sector(PROOF, &work_dir().join("sectors"), id, id).unwrap();
            sealed.push(s.clone());
            s
        }
    };
    let path = work_dir().join(format!("c1-{id}.json"));
    std::fs::write(&path, &s.c1_json).unwrap();
    (s, path)
}

fn settings(kind: ProofKind) -> PipelineSettings {
    let files = params(kind);
    let mut s = PipelineSettings::for_circuit(AnyCircuit::Filecoin(kind), files.params).unwrap();
    s.program = PathBuf::from(env!("CARGO_BIN_EXE_splitprover"));
    s.huge_pages = shm_protocol::HugePagePolicy::Plain;
    s.slots = 2;
    s.synthesis.cache_dir = Some(fil_common::r1cs_cache());
    s
}

#[test]
fn porep_c2_through_witness_slots_verifies_and_bad_requests_fail_alone() {
    let _g = serial();
    let kind = ProofKind::PoRep(PROOF);
    let (a, a_path) = sector(7001);
    // Through witness-only slots (the other Filecoin tests take full slots): synth-proc writes
    // the witness alone, gpu-proc computes a, b, c from the same matrices.
    let mut s = settings(kind);
    s.synthesis.witness_slots = true;
    let p = Pipeline::start(s).unwrap();
    p.wait_ready(Duration::from_secs(120)).unwrap();
    // A full slot of this circuit takes 328.7 MiB, its witness slot 8.1 MiB.
    let slot = p.status().slot_bytes;
    assert!(slot < 16 << 20, "not a witness slot: {slot} bytes");

    // Bad requests are refused at submission, naming the file and the problem.
    let bad = work_dir().join("truncated.json");
    std::fs::write(&bad, &a.c1_json[..a.c1_json.len() / 3]).unwrap();
    let e = format!("{:#}", p.submit_request(None, None, &bad).err().unwrap());
    assert!(
        e.contains("truncated.json") && e.contains("truncated JSON"),
        "{e}"
    );
    let garbage = work_dir().join("garbage.json");
    std::fs::write(&garbage, b"\x00\x01 not json").unwrap();
    let e = format!(
        "{:#}",
        p.submit_request(None, None, &garbage).err().unwrap()
    );
    assert!(
        e.contains("garbage.json") && e.contains("malformed JSON"),
        "{e}"
    );
    let e = format!(
        "{:#}",
        p.submit_request(None, None, &work_dir().join("missing.json"))
            .err()
            .unwrap()
    );
    assert!(e.contains("missing.json"), "{e}");
    // A proof type the pipeline has no parameters for.
    let e = format!(
        "{:#}",
        p.submit_request(
            Some("porep:StackedDrg8MiBV1_1".parse().unwrap()),
            None,
            &a_path,
        )
        .err()
        .unwrap()
    );
    assert!(e.contains("StackedDrg8MiBV1_1"), "{e}");
    // A damaged C1 output: its vanilla proofs do not verify.
    let mut c1: serde_json::Value = serde_json::from_slice(&a.c1_json).unwrap();
    c1["seed"][0] = serde_json::json!((a.seed[0] ^ 1) as u64);
    let damaged = work_dir().join("damaged.json");
    std::fs::write(&damaged, serde_json::to_vec(&c1).unwrap()).unwrap();
    let e = format!(
        "{:#}",
        p.submit_request(None, None, &damaged).err().unwrap()
    );
    assert!(e.contains("do not verify"), "{e}");

    // The request is read once, at submit: changing the file and then deleting it afterwards
    // does not affect the job, which is proved from the bytes read at submit (a read at any
    // later time would find other bytes, or no file). It is also the good job after all those
    // refusals: each C2 proof costs about a minute of CI, one proves both.
    let (b, b_path) = sector(7002);
    let changing = work_dir().join("changing.json");
    std::fs::copy(&b_path, &changing).unwrap();
    let t = Instant::now();
    let changed = p.submit_request(None, None, &changing).unwrap();
    std::fs::write(&changing, b"{\"not\": \"the request any more\"}").unwrap();
    std::fs::remove_file(&changing).unwrap();
    let o = changed.wait().unwrap();
    let proofs = o
        .result
        .unwrap_or_else(|e| panic!("the job whose file changed and went after submit failed: {e}"));
    eprintln!(
        "PoRep C2 2 KiB through the split pipeline: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(proofs.len(), 1);
    let bytes = proofs.concat();
    assert_eq!(bytes.len(), 192);
    assert!(
        b.verify(&bytes, None).unwrap(),
        "the job whose file changed and went after submit: verify_seal refused its proof"
    );
    // Negative: the proof of one sector must not verify for another.
    assert!(
        !b.verify(&bytes, Some(b.sector_id + 1)).unwrap(),
        "accepted for another sector id"
    );
    let mut other = b.clone();
    other.comm_r = a.comm_r;
    assert!(
        !other.verify(&bytes, None).unwrap_or(false),
        "accepted for another sector's comm_r"
    );
    let c = p.counters();
    assert_eq!((c.succeeded, c.failed), (1, 0), "{c:?}");
    p.shutdown();
}

#[test]
fn cli_prove_and_service_submit_write_proofs_filecoin_proofs_accepts() {
    let _g = serial();
    let kind = ProofKind::PoRep(PROOF);
    params(kind);
    let (s, c1_path) = sector(7003);
    let dir = tempfile::tempdir().unwrap();
    let pc = param_dir();
    let env = [("FIL_PROOFS_PARAMETER_CACHE", pc.as_path())];

    let (code, stdout, err) = cli(
        &[
            "params",
            "check",
            &kind.to_string(),
            "porep:StackedDrg8MiBV1_1",
        ],
        &env,
    );
    assert_eq!(code, 1, "{stdout}{err}");
    assert!(stdout.contains(&format!("{kind}: ok")), "{stdout}");
    assert!(
        stdout.contains("porep:StackedDrg8MiBV1_1: no parameters")
            && stdout.contains("params generate"),
        "{stdout}"
    );

    // `params generate` writes the official files where `params check` (and the verifiers) find
    // them; the WindowPoSt circuit is small (21,866 constraints).
    let fresh = dir.path().join("fresh-params");
    let window = "post:StackedDrgWindow2KiBV1_2";
    let (code, stdout, err) = cli(
        &[
            "params",
            "generate",
            window,
            "--seed",
            "5",
            "--param-cache",
            fresh.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.lines().any(|l| l.ends_with(".params"))
            && stdout.lines().any(|l| l.ends_with(".vk")),
        "{stdout}"
    );
    let (code, stdout, err) = cli(
        &[
            "params",
            "check",
            window,
            "--param-cache",
            fresh.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(code, 0, "{stdout}{err}");
    assert!(
        stdout.contains("ok") && stdout.contains("21866 constraints"),
        "{stdout}"
    );
    let (code, _, err) = cli(
        &[
            "params",
            "generate",
            window,
            "--param-cache",
            fresh.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("already present"), "{err}");
    // A `.vk` of another parameter set beside the `.params` (seed 5 here, the shared cache's
    // seed there): refused by `params check` and by `prove`, which would otherwise write proofs
    // filecoin-proofs' verifier rejects.
    let theirs = ParamFiles::for_kind(window.parse().unwrap(), param_dir()).unwrap();
    params(window.parse().unwrap());
    let ours = ParamFiles::for_kind(window.parse().unwrap(), &fresh).unwrap();
    std::fs::copy(&theirs.vk, &ours.vk).unwrap();
    let (code, stdout, _) = cli(
        &[
            "params",
            "check",
            window,
            "--param-cache",
            fresh.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(code, 1);
    assert!(
        stdout.contains("mismatched parameters")
            && stdout.contains("not from the same parameter set"),
        "{stdout}"
    );
    let (code, _, err) = cli(
        &[
            "prove",
            "--post",
            c1_path.to_str().unwrap(),
            "--proof-type",
            window,
            "--param-cache",
            fresh.to_str().unwrap(),
            "--out",
            "x",
        ],
        &env,
    );
    assert_eq!(code, 2);
    assert!(err.contains("mismatched parameters"), "{err}");
    let (code, _, err) = cli(&["params", "generate", "porep:StackedDrg3KiBV1"], &env);
    assert_eq!(code, 2);
    assert!(err.contains("unknown registered seal proof"), "{err}");

    // `prove` with lotus-bench's Commit2In form: the kind is read from the request.
    let wrapped = dir.path().join("commit2in.json");
    std::fs::write(&wrapped, s.commit2in_json()).unwrap();
    let out = dir.path().join("c2.proof");
    let (code, _, err) = cli(
        &[
            "prove",
            "--porep-c1",
            wrapped.to_str().unwrap(),
            "--huge-pages",
            "none",
            "--out",
            out.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(code, 0, "{err}");
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(bytes.len(), 192);
    assert!(
        s.verify(&bytes, None).unwrap(),
        "verify_seal refused the CLI's proof"
    );

    // A C1 output given as a PoSt request is refused, naming what it is.
    let (code, _, err) = cli(
        &["prove", "--post", c1_path.to_str().unwrap(), "--out", "x"],
        &env,
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("is a PoRep C1 output")
            && err.contains("not a PoSt request")
            && err.contains("--porep-c1"),
        "{err}"
    );

    // Missing parameters: a clear error that says how to make them.
    let empty = dir.path().join("no-params");
    let (code, _, err) = cli(
        &[
            "prove",
            "--porep-c1",
            c1_path.to_str().unwrap(),
            "--param-cache",
            empty.to_str().unwrap(),
            "--out",
            "x",
        ],
        &env,
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("no parameters for `porep:StackedDrg2KiBV1_1`")
            && err.contains("params generate"),
        "{err}"
    );

    // The service: `submit --porep-c1`, a bad request refused, the next one served (the API's
    // refusals of bad payloads: grpc_filecoin.rs).
    let socket = dir.path().join("sp.sock");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "cache_dir = {:?}\nsocket = {:?}\nparam_cache = {:?}\n[ring]\nslots = 2\nhuge_pages = \"none\"\n[[gpu]]\nbackend = \"cpu\"\n[[circuit]]\nspec = \"{kind}\"\n",
            dir.path(),
            socket,
            pc
        ),
    )
    .unwrap();
    let mut service = std::process::Command::new(env!("CARGO_BIN_EXE_splitprover"))
        .args(["run", "--config", config.to_str().unwrap()])
        .env("SPLITPROVER_LOG", "warn")
        .env("FIL_PROOFS_PARAMETER_CACHE", &pc)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !socket.exists() {
        assert!(Instant::now() < deadline, "service did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let env = [
        ("SPLITPROVER_SOCKET", socket.as_path()),
        ("FIL_PROOFS_PARAMETER_CACHE", pc.as_path()),
    ];
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, &s.c1_json[..100]).unwrap();
    let (code, _, err) = cli(
        &["submit", "--porep-c1", bad.to_str().unwrap(), "--wait"],
        &env,
    );
    // Refused by the client, which reads and checks the request before sending it.
    assert_eq!(code, 2);
    assert!(
        err.contains("bad.json") && err.contains("truncated JSON"),
        "{err}"
    );
    let out = dir.path().join("served.proof");
    let (code, _, err) = cli(
        &[
            "submit",
            "--porep-c1",
            c1_path.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(code, 0, "{err}");
    let bytes = std::fs::read(&out).unwrap();
    assert!(
        s.verify(&bytes, None).unwrap(),
        "verify_seal refused the service's proof"
    );
    kill(service.id(), libc::SIGTERM);
    assert!(service.wait().unwrap().success());
}

/// `splitprover sparse-c1` (issue 42) writes a sparse CC sector's C1 output in lotus-bench's
/// Commit2In JSON (and the api form), which `prove --porep-c1` proves and `verify_seal` accepts
/// for the commitments the command printed.
#[test]
fn cli_sparse_c1_is_proved_by_prove_porep_c1() {
    let _g = serial();
    let kind = ProofKind::PoRep(PROOF);
    params(kind);
    let dir = tempfile::tempdir().unwrap();
    let pc = param_dir();
    let env = [("FIL_PROOFS_PARAMETER_CACHE", pc.as_path())];
    let c1 = dir.path().join("sparse.json");
    let sparse = |form: &str, out: &Path| {
        cli(
            &[
                "sparse-c1",
                "--proof-type",
                &kind.to_string(),
                "--sector-number",
                "7",
                "--seed",
                "3",
                "--out",
                out.to_str().unwrap(),
                "--form",
                form,
            ],
            &env,
        )
    };
    let (code, stdout, err) = sparse("commit2in", &c1);
    assert_eq!(code, 0, "{err}");
    // the same sector as the library makes, printed for the verifier
    let s = kernels::filecoin::fixture::sparse_cc_sector(PROOF, 7, 3).unwrap();
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    for line in [
        format!("comm_r {}", hex(&s.comm_r)),
        format!("comm_d {}", hex(&s.comm_d)),
        "sector_number 7".to_string(),
        format!("miner_id {}", kernels::filecoin::fixture::PROVER_MINER_ID),
    ] {
        assert!(stdout.contains(&line), "no `{line}` in {stdout}");
    }
    let written: serde_json::Value = serde_json::from_slice(&std::fs::read(&c1).unwrap()).unwrap();
    assert_eq!(written["SectorNum"], 7);
    assert_eq!(written["SectorSize"], 2048);
    let api = dir.path().join("sparse-api.json");
    let (code, _, err) = sparse("api", &api);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read(&api).unwrap(), s.c1_json);

    let out = dir.path().join("sparse.proof");
    let (code, _, err) = cli(
        &[
            "prove",
            "--porep-c1",
            c1.to_str().unwrap(),
            "--backend",
            "cpu",
            "--huge-pages",
            "none",
            "--out",
            out.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(code, 0, "{err}");
    let proof = std::fs::read(&out).unwrap();
    assert_eq!(proof.len(), 192);
    assert!(
        s.verify(&proof, None).unwrap(),
        "verify_seal refused the proof of the sparse C1"
    );

    // `splitprover verify`: filecoin-proofs' verify_seal from the C1 file; another miner's
    // prover id is refused (exit 1); the api form names no sector number: an error (exit 2)
    // unless it is given.
    let verify = |c1: &Path, miner: &str, extra: &[&str]| {
        let mut args = vec![
            "verify",
            "--porep-c1",
            c1.to_str().unwrap(),
            "--miner-id",
            miner,
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        cli(&args, &env)
    };
    let miner = kernels::filecoin::fixture::PROVER_MINER_ID.to_string();
    let (code, stdout, err) = verify(&c1, &miner, &[]);
    assert_eq!(code, 0, "{stdout}{err}");
    assert!(stdout.contains("verified"), "{stdout}");
    let (code, stdout, err) = verify(&c1, "1001", &[]);
    assert_eq!(code, 1, "another miner's proof was accepted: {stdout}{err}");
    assert!(stdout.contains("REFUSED"), "{stdout}");
    let (code, _, err) = verify(&api, &miner, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("sector number"), "{err}");
    let (code, stdout, err) = verify(&api, &miner, &["--sector-number", "7"]);
    assert_eq!(code, 0, "{stdout}{err}");
}
