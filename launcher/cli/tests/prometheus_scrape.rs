//! A real Prometheus server (the Debian `prometheus` package) scrapes `splitprover run`'s
//! `/metrics` (issue 11): the exposition parses, cuzk's names and ours arrive with the values the
//! service reports. Skips when `prometheus` is not installed, unless
//! `SPLITPROVER_TEST_REQUIRE_PROMETHEUS` is set (CI installs it and sets it).

mod common;
mod service_common;
use common::free_port;
use service_common::{serial, Setup};

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use launcher::api::client::Client;
use launcher::api::{pb, Endpoint};

/// The body of `GET path` on `addr`.
fn get(addr: &str, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok()?;
    let (head, body) = reply.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    // Chunked bodies (Prometheus' API): the JSON object is what is between the braces.
    let start = body.find('{')?;
    let end = body.rfind('}')?;
    Some(body[start..=end].to_owned())
}

/// The value of an instant query's single sample, once Prometheus has one.
fn query(prom: &str, q: &str) -> Option<f64> {
    let body = get(prom, &format!("/api/v1/query?query={q}"))?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    let sample = v["data"]["result"].as_array()?.first()?.clone();
    sample["value"][1].as_str()?.parse().ok()
}

#[test]
fn a_prometheus_server_scrapes_the_metrics_endpoint() {
    let Ok(version) = Command::new("prometheus").arg("--version").output() else {
        assert!(
            std::env::var_os("SPLITPROVER_TEST_REQUIRE_PROMETHEUS").is_none(),
            "SPLITPROVER_TEST_REQUIRE_PROMETHEUS is set but `prometheus` is not installed"
        );
        eprintln!("note: no `prometheus` binary (apt-get install prometheus): skipped");
        return;
    };
    eprintln!(
        "{}",
        String::from_utf8_lossy(&version.stdout)
            .lines()
            .next()
            .unwrap_or("")
    );
    let _g = serial();
    let metrics_port = free_port();
    let mut setup = Setup::new(
        "sha-chain:1",
        &format!("metrics_listen = \"127.0.0.1:{metrics_port}\""),
    );
    let s = setup.start();
    let mut c = Client::connect(&Endpoint::Unix(s.socket.clone())).unwrap();
    for seed in 0..3 {
        let a = c
            .prove(pb::SubmitProofRequest {
                circuit: "sha-chain:1".into(),
                request: kernels::job::BuiltinRequest {
                    seed,
                    partitions: 1,
                }
                .to_bytes(),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(a.status, pb::await_proof_response::Status::Completed as i32);
    }
    let dir = setup.dir.path();
    let prom_port = free_port();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: splitprover\n    \
             static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
        ),
    )
    .unwrap();
    let log = dir.join("prometheus.log");
    let mut prom = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let prom_addr = format!("127.0.0.1:{prom_port}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = None;
    while Instant::now() < deadline {
        if query(&prom_addr, "up%7Bjob%3D%22splitprover%22%7D") == Some(1.0) {
            if let Some(v) = query(&prom_addr, "cuzk_proofs_completed_total") {
                seen = Some(v);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let checks = seen.map(|completed| {
        (
            completed,
            query(
                &prom_addr,
                "cuzk_proofs_completed%7Bproof_kind%3D%22builtin%22%7D",
            ),
            query(
                &prom_addr,
                "splitprover_gpu_seconds_count%7Bproof_kind%3D%22builtin%22%7D",
            ),
            query(&prom_addr, "cuzk_gpu_workers"),
            query(&prom_addr, "splitprover_ring_slots%7Bstate%3D%22free%22%7D"),
        )
    });
    let _ = prom.kill();
    let _ = prom.wait();
    let prom_log = std::fs::read_to_string(&log).unwrap_or_default();
    let (completed, per_kind, gpu_count, workers, free) =
        checks.unwrap_or_else(|| panic!("Prometheus never scraped the service:\n{prom_log}"));
    assert_eq!(completed, 3.0);
    assert_eq!(per_kind, Some(3.0));
    assert_eq!(gpu_count, Some(3.0));
    assert_eq!(workers, Some(1.0));
    assert_eq!(free, Some(2.0));
}
