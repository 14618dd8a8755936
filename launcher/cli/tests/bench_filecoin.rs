//! `splitprover bench --filecoin` on the smallest real request (issue 15): a 2 KiB WinningPoSt
//! made as the Filecoin tests make it (a sector sealed, `fixture::post_request`), proved one at a
//! time, through the in-process pipeline and through the split pipeline on the CPU backend, each
//! proof checked by filecoin-proofs' `verify_winning_post`. The PoRep C2 of a 2 KiB sector takes
//! ~38 s of CPU Groth16 per proof on two cores, too slow for three modes here; this request goes
//! through the same code (the request is the only thing that differs between the kinds).
#![cfg(feature = "filecoin")]

mod common;
#[path = "common/filecoin.rs"]
mod fil_common;
use common::{cli, serial};

use serde_json::Value;

#[test]
fn a_winning_post_is_proved_every_way_and_each_proof_verified() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // The shared test parameters (made with the test seed if missing), which the bench finds.
    fil_common::params("post:StackedDrgWinning2KiBV1".parse().unwrap());
    let params = fil_common::param_dir();
    let (code, stdout, stderr) = cli(
        &[
            "bench",
            "--filecoin",
            "post:StackedDrgWinning2KiBV1",
            "--filecoin-modes",
            "stock,monolithic,inprocess,split",
            "-n",
            "1",
            "-j",
            "1",
            "--warm-up",
            "0",
            "--slots",
            "2",
            "--huge-pages",
            "none",
            "--param-cache",
            params.to_str().unwrap(),
            "--out-dir",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("note: mode `stock` measures PoRep only: skipped"),
        "{stdout}"
    );
    assert!(
        stderr.contains("PoSt request made (1 partition)"),
        "{stderr}"
    );
    let report: Value =
        serde_json::from_slice(&std::fs::read(out.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(report["workload"], "post:StackedDrgWinning2KiBV1");
    let rows = report["rows"].as_array().unwrap();
    let modes: Vec<&str> = rows.iter().map(|r| r["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["monolithic", "inprocess", "split"]);
    for r in rows {
        assert_eq!(r["proofs"].as_u64(), Some(1), "{r}");
        assert!(r["s_per_proof"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["mean_synth_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["mean_gpu_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["latency_p99_s"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert!(report["recommendation"]
        .as_str()
        .unwrap()
        .contains("[cpus]"));
}
