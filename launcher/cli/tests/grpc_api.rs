//! cuzk's `ProvingEngine` API served by a real `splitprover run` (issue 11), driven by a client
//! built from our own generated stubs, over the Unix socket and over TCP: every RPC, idempotent
//! resubmits, cancels, the AwaitProof timeout, bad requests, the message limit, priorities, the
//! Prometheus endpoint. CPU backend, built-in circuits (Curio's Filecoin payloads:
//! `grpc_filecoin.rs`); every proof is also checked by the test's own verifier
//! (`common::verify`).

mod common;
mod service_common;
use common::free_port;
use service_common::{serial, Setup};

use std::collections::HashSet;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use launcher::api::client::Client;
use launcher::api::{pb, Endpoint};
use launcher::pipeline::PipelineStatus;
use pb::await_proof_response::Status as S;
use tonic::Code;

const CIRCUIT: &str = "sha-chain:1";

fn builtin(seed: u64, partitions: u32) -> pb::SubmitProofRequest {
    pb::SubmitProofRequest {
        circuit: CIRCUIT.into(),
        request: kernels::job::BuiltinRequest { seed, partitions }.to_bytes(),
        ..Default::default()
    }
}

fn pipeline(c: &mut Client) -> PipelineStatus {
    serde_json::from_str(&c.status().unwrap().pipeline_json).unwrap()
}

/// Checks that `a` is the completed proof of `req`: one per partition, each accepted by the
/// test's own verifier.
fn completed(a: &pb::AwaitProofResponse, req: &pb::SubmitProofRequest) {
    let partitions = kernels::job::BuiltinRequest::from_bytes(&req.request)
        .unwrap()
        .partitions as usize;
    assert_eq!(a.status, S::Completed as i32, "{a:?}");
    assert_eq!(a.proof.len(), 192 * partitions, "{a:?}");
    assert_eq!(a.partitions as usize, partitions);
    assert!(a.error_message.is_empty());
    common::verify::builtin_proof(&req.circuit, &req.request, &a.proof);
}

/// `Prove` (submit and await), checked by [`completed`].
fn proved(c: &mut Client, req: pb::SubmitProofRequest) -> pb::AwaitProofResponse {
    let a = c.prove(req.clone()).unwrap();
    completed(&a, &req);
    a
}

/// Waits until no job is live (slots free again).
fn idle(c: &mut Client) -> PipelineStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let p = pipeline(c);
        if p.jobs.is_empty() && p.slots.free == p.ring_slots {
            return p;
        }
        assert!(Instant::now() < deadline, "{p:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `GET path` on `addr`: (status line, body).
fn http_get(addr: &str, path: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

#[test]
fn every_rpc_works_over_the_unix_socket_and_over_tcp() {
    let _g = serial();
    let (port, metrics_port) = (free_port(), free_port());
    let mut setup = Setup::new(
        CIRCUIT,
        &format!("listen = [\"127.0.0.1:{port}\"]\nmetrics_listen = \"127.0.0.1:{metrics_port}\""),
    );
    let s = setup.start();
    let endpoints = [
        Endpoint::Unix(s.socket.clone()),
        Endpoint::Tcp(format!("127.0.0.1:{port}")),
    ];
    let mut proofs = 0;
    for (i, endpoint) in endpoints.iter().enumerate() {
        let mut c = Client::connect(endpoint).unwrap();
        // SubmitProof answers at once with a generated id; AwaitProof gets the proof.
        let req = builtin(10 + i as u64, 2);
        let a = c.submit(req.clone()).unwrap();
        assert!(a.job_id.starts_with("job-"), "{a:?}");
        assert!(!a.existing);
        let r = c.await_proof(&a.job_id, 0).unwrap();
        completed(&r, &req);
        assert_eq!(r.job_id, a.job_id);
        assert!(r.total_ms >= r.queue_wait_ms, "{r:?}");
        assert!(r.gpu_compute_ms > 0 || r.synthesis_ms > 0, "{r:?}");
        // Prove = submit + await, with the client's request id.
        let rid = format!("run-{i}");
        let mut req = builtin(20 + i as u64, 1);
        req.request_id = rid.clone();
        let r = proved(&mut c, req);
        // The test's verifier is no rubber stamp: not for another seed's public inputs.
        let other = builtin(21 + i as u64, 1);
        assert!(!common::verify::accepts(CIRCUIT, &other.request, &r.proof));
        assert_eq!(r.job_id, rid);
        proofs += 2;
        // The same proof again by its id (a finished result stays until it expires).
        assert_eq!(c.await_proof(&rid, 0).unwrap().proof, r.proof);
    }
    let mut c = Client::connect(&endpoints[0]).unwrap();
    // GetStatus: the GPU read from the device, the SRS with its real size, totals.
    let st = c.status().unwrap();
    assert_eq!(st.gpus.len(), 1, "{st:?}");
    assert!(st.gpus[0].name.starts_with("CPU backend"), "{st:?}");
    assert!(st.gpus[0].current_job_id.is_empty());
    // The CPU backend streams no SRS to a device.
    assert_eq!(
        (
            st.gpus[0].srs_streamed_bytes,
            st.gpus[0].srs_streamed_total_bytes
        ),
        (0, 0),
        "{st:?}"
    );
    let srs = st
        .loaded_srs
        .iter()
        .find(|l| l.circuit_id == CIRCUIT)
        .unwrap_or_else(|| panic!("{st:?}"));
    assert_eq!(srs.tier, pb::srs_status::Tier::Hot as i32);
    let params = std::fs::metadata(common::srs_for(CIRCUIT)).unwrap().len();
    assert!(
        srs.size_bytes > 0 && srs.size_bytes >= params / 2,
        "{srs:?} vs {params}"
    );
    assert_eq!(srs.ref_count, 0);
    assert_eq!(st.total_proofs_completed, proofs);
    assert_eq!(st.total_proofs_failed, 0);
    assert!(st.pinned_memory_bytes >= srs.size_bytes);
    assert!(st
        .queues
        .iter()
        .all(|q| q.pending == 0 && q.in_progress == 0));
    // GetMetrics and the HTTP endpoint say the same.
    let text = c.metrics().unwrap();
    assert!(
        text.contains(&format!("cuzk_proofs_completed_total {proofs}\n")),
        "{text}"
    );
    assert!(text.contains("cuzk_proofs_completed{proof_kind=\"builtin\"}"));
    assert!(text.contains("splitprover_gpu_seconds_bucket{proof_kind=\"builtin\",le=\"+Inf\"}"));
    assert!(text.contains("splitprover_ring_slots{state=\"free\"}"));
    assert!(text.contains("splitprover_gpu_busy_ratio{gpu=\"0\"}"));
    // The CPU backend plans no device memory: the budget and the plan read 0.
    assert!(text.contains("splitprover_gpu_memory_bytes{gpu=\"0\",what=\"budget\"} 0"));
    assert!(text.contains("splitprover_gpu_memory_bytes{gpu=\"0\",what=\"streamed\"} 0"));
    assert!(text.contains("splitprover_gpu_srs_streamed_bytes_total{gpu=\"0\"} 0\n"));
    let (line, body) = http_get(&format!("127.0.0.1:{metrics_port}"), "/metrics");
    assert!(line.contains("200"), "{line}");
    assert!(
        body.contains(&format!("cuzk_proofs_completed_total {proofs}\n")),
        "{body}"
    );
    assert!(http_get(&format!("127.0.0.1:{metrics_port}"), "/other")
        .0
        .contains("404"));
    // EvictSRS then PreloadSRS: a real unload and load, with bytes and time.
    let e = c.evict_srs(CIRCUIT).unwrap();
    assert!(e.was_loaded && e.freed_bytes == srs.size_bytes, "{e:?}");
    let cold = c.status().unwrap();
    let line = cold
        .loaded_srs
        .iter()
        .find(|l| l.circuit_id == CIRCUIT)
        .unwrap();
    assert_eq!(line.tier, pb::srs_status::Tier::Cold as i32);
    assert!(!c.evict_srs(CIRCUIT).unwrap().was_loaded);
    let p = c.preload_srs(CIRCUIT).unwrap();
    assert!(!p.already_loaded, "{p:?}");
    assert_eq!(p.size_bytes, srs.size_bytes);
    assert!(c.preload_srs(CIRCUIT).unwrap().already_loaded);
    let e = c.preload_srs("porep-32g").unwrap_err();
    assert_eq!(e.code(), Some(Code::NotFound), "{e}");
    // Still proving after all that.
    proved(&mut c, builtin(30, 1));
    // Unknown jobs are NOT_FOUND, for await and cancel.
    for e in [
        c.await_proof("nope", 0).unwrap_err(),
        c.cancel("job-999999").unwrap_err(),
    ] {
        assert_eq!(e.code(), Some(Code::NotFound), "{e}");
    }
    // `splitprover status` is a client of the same API.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_splitprover"))
        .args(["status", "--socket", &format!("127.0.0.1:{port}")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("gpu-proc[0]"),
        "{text}"
    );
}

#[test]
fn a_request_id_names_one_job_and_one_gpu_proof() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "");
    let s = setup.start();
    let ep = Endpoint::Unix(s.socket.clone());
    let mut c = Client::connect(&ep).unwrap();
    let mut req = builtin(5, 30);
    req.request_id = "porep-1000-7".into();
    let first = c.submit(req.clone()).unwrap();
    assert_eq!(
        (first.job_id.as_str(), first.existing),
        ("porep-1000-7", false)
    );
    // The client timed out waiting; it retries the same Prove: it attaches to the running job.
    let t = c.await_proof("porep-1000-7", 1).unwrap();
    assert_eq!(t.status, S::Timeout as i32, "{t:?}");
    let again = c.submit(req.clone()).unwrap();
    assert!(
        again.existing && again.job_id == "porep-1000-7",
        "{again:?}"
    );
    // Four concurrent retries, over their own connections.
    let retries: Vec<_> = (0..4)
        .map(|_| {
            let (ep, req) = (ep.clone(), req.clone());
            std::thread::spawn(move || Client::connect(&ep).unwrap().prove(req).unwrap())
        })
        .collect();
    let answers: Vec<_> = retries.into_iter().map(|t| t.join().unwrap()).collect();
    for a in &answers {
        completed(a, &req);
        assert_eq!(a.proof, answers[0].proof);
    }
    // After it finished, once more: the same proof, nothing proved again.
    let late = c.prove(req).unwrap();
    assert_eq!(late.proof, answers[0].proof);
    let p = idle(&mut c);
    assert_eq!(p.counters.submitted, 1, "{:?}", p.counters);
    assert_eq!(p.counters.succeeded, 1);
    // One synthesis and one GPU proof per partition.
    assert_eq!(p.counters.syntheses_requested, 30, "{:?}", p.counters);
    // A request id of the service's own form is refused.
    let mut own = builtin(6, 1);
    own.request_id = "job-424242".into();
    let e = c.submit(own).unwrap_err();
    assert_eq!(e.code(), Some(Code::InvalidArgument), "{e}");
}

#[test]
fn a_failed_proof_is_ok_with_status_failed_and_its_request_id_runs_again() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "");
    // The first job's synthesis panics (every attempt): it fails, the service goes on.
    setup.env = vec![("SPLITPROVER_FAULT".into(), "synth-panic@job=1".into())];
    let s = setup.start();
    let mut c = Client::connect(&Endpoint::Unix(s.socket.clone())).unwrap();
    let mut req = builtin(3, 1);
    req.request_id = "porep-1000-9".into();
    let failed = c.prove(req.clone()).unwrap();
    assert_eq!(failed.status, S::Failed as i32, "{failed:?}");
    assert!(failed.proof.is_empty());
    assert!(!failed.error_message.is_empty(), "{failed:?}");
    // Curio retries with the same request id: a new attempt, not the old failure.
    let again = proved(&mut c, req);
    assert_eq!(again.job_id, "porep-1000-9");
    let p = idle(&mut c);
    assert_eq!(
        (p.counters.submitted, p.counters.failed),
        (2, 1),
        "{:?}",
        p.counters
    );
    let m = c.metrics().unwrap();
    assert!(m.contains("cuzk_proofs_failed_total 1\n"), "{m}");
}

#[test]
fn cancel_drops_a_queued_and_a_running_job_frees_their_slots_and_the_next_job_is_fine() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "");
    let s = setup.start();
    let mut c = Client::connect(&Endpoint::Unix(s.socket.clone())).unwrap();
    let running = c.submit(builtin(1, 200)).unwrap().job_id;
    let queued = c.submit(builtin(2, 200)).unwrap().job_id;
    // Wait until the first has started.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !pipeline(&mut c)
        .jobs
        .iter()
        .any(|j| j.running && j.done > 0)
    {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !c.cancel(&queued).unwrap(),
        "the queued job had not started"
    );
    assert!(c.cancel(&running).unwrap(), "the running job had started");
    for id in [&running, &queued] {
        let a = c.await_proof(id, 0).unwrap();
        assert_eq!(a.status, S::Cancelled as i32, "{a:?}");
        assert!(a.proof.is_empty());
    }
    // Cancelling again: the job has ended.
    let e = c.cancel(&running).unwrap_err();
    assert_eq!(e.code(), Some(Code::FailedPrecondition), "{e}");
    let p = idle(&mut c);
    assert_eq!(p.counters.cancelled, 2);
    assert!(
        p.counters.syntheses_requested < 100,
        "a cancelled job's queued partitions were dropped: {:?}",
        p.counters
    );
    proved(&mut c, builtin(3, 2));
    let m = c.metrics().unwrap();
    assert!(
        m.contains("splitprover_proofs_cancelled{proof_kind=\"builtin\"} 2"),
        "{m}"
    );
}

#[test]
fn await_proof_honours_its_timeout() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "");
    let s = setup.start();
    let mut c = Client::connect(&Endpoint::Unix(s.socket.clone())).unwrap();
    let id = c.submit(builtin(1, 300)).unwrap().job_id;
    let t = Instant::now();
    let a = c.await_proof(&id, 300).unwrap();
    let took = t.elapsed();
    assert_eq!(a.status, S::Timeout as i32, "{a:?}");
    assert!(a.proof.is_empty());
    assert!(
        took >= Duration::from_millis(290) && took < Duration::from_secs(10),
        "{took:?}"
    );
    assert!(c.cancel(&id).unwrap());
}

#[test]
fn bad_requests_are_invalid_argument_with_the_reason_and_the_service_goes_on() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "");
    let s = setup.start();
    let mut c = Client::connect(&Endpoint::Unix(s.socket.clone())).unwrap();
    let cases: Vec<(pb::SubmitProofRequest, Code, &str)> = vec![
        (
            pb::SubmitProofRequest::default(),
            Code::InvalidArgument,
            "UNSPECIFIED",
        ),
        (
            pb::SubmitProofRequest {
                proof_kind: 9,
                ..Default::default()
            },
            Code::InvalidArgument,
            "proof_kind 9",
        ),
        (
            pb::SubmitProofRequest {
                proof_kind: 1,
                vanilla_proof: b"{not json".to_vec(),
                ..Default::default()
            },
            Code::InvalidArgument,
            if cfg!(feature = "filecoin") {
                "malformed JSON"
            } else {
                "no Filecoin support"
            },
        ),
        (
            pb::SubmitProofRequest {
                circuit: "no-such-circuit:3".into(),
                ..Default::default()
            },
            Code::InvalidArgument,
            "no-such-circuit",
        ),
        (
            pb::SubmitProofRequest {
                circuit: CIRCUIT.into(),
                request: vec![1, 2, 3],
                ..Default::default()
            },
            Code::InvalidArgument,
            "request is 12 bytes (seed, partitions), not 3",
        ),
        (
            pb::SubmitProofRequest {
                priority: 9,
                ..builtin(1, 1)
            },
            Code::InvalidArgument,
            "priority 9",
        ),
        (
            pb::SubmitProofRequest {
                circuit: "bits:9".into(),
                request: kernels::job::BuiltinRequest {
                    seed: 1,
                    partitions: 1,
                }
                .to_bytes(),
                ..Default::default()
            },
            Code::FailedPrecondition,
            "no SRS for circuit `bits:9`",
        ),
    ];
    for (req, code, why) in cases {
        let e = c.submit(req.clone()).unwrap_err();
        assert_eq!(e.code(), Some(code), "{req:?}: {e}");
        assert!(e.to_string().contains(why), "{req:?}: {e}");
    }
    proved(&mut c, builtin(2, 1));
    let p = idle(&mut c);
    assert_eq!(
        p.counters.submitted, 1,
        "refused requests were never queued"
    );
}

#[test]
fn messages_up_to_256_mib_pass_and_larger_ones_are_refused() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "[faults]\nmax_request_bytes = \"8MiB\"");
    let s = setup.start();
    // The client's own limit is larger: what refuses is the service's 256 MiB.
    let mut c = Client::connect_with_limit(&Endpoint::Unix(s.socket.clone()), 300 << 20).unwrap();
    let mut req = builtin(1, 1);
    req.request = vec![7; 250 << 20];
    let e = c.submit(req.clone()).unwrap_err();
    // Through the transport; refused for what it is.
    assert_eq!(e.code(), Some(Code::InvalidArgument), "{e}");
    assert!(e.to_string().contains("max_request_bytes"), "{e}");
    req.request = vec![7; 257 << 20];
    let e = c.submit(req).unwrap_err();
    assert_eq!(e.code(), Some(Code::OutOfRange), "{e}");
    let mut c = Client::connect(&Endpoint::Unix(s.socket.clone())).unwrap();
    proved(&mut c, builtin(2, 1));
}

#[test]
fn critical_and_high_jobs_overtake_queued_normal_work() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "");
    let s = setup.start();
    let ep = Endpoint::Unix(s.socket.clone());
    let mut c = Client::connect(&ep).unwrap();
    let normal: Vec<(String, pb::SubmitProofRequest)> = (0..20)
        .map(|i| {
            let req = builtin(100 + i, 4);
            (c.submit(req.clone()).unwrap().job_id, req)
        })
        .collect();
    let critical_req = pb::SubmitProofRequest {
        priority: pb::Priority::Critical as i32,
        ..builtin(7, 1)
    };
    let critical = c.submit(critical_req.clone()).unwrap().job_id;
    // Finish order, from one waiter per job.
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let waiters: Vec<_> = normal
        .iter()
        .chain([&(critical.clone(), critical_req)])
        .map(|(id, req)| {
            let (ep, id, req, order) = (ep.clone(), id.clone(), req.clone(), order.clone());
            std::thread::spawn(move || {
                let a = Client::connect(&ep).unwrap().await_proof(&id, 0).unwrap();
                completed(&a, &req);
                order.lock().unwrap().push(id);
            })
        })
        .collect();
    for w in waiters {
        w.join().unwrap();
    }
    let order = order.lock().unwrap().clone();
    let at = order.iter().position(|id| *id == critical).unwrap();
    assert!(at <= 5, "the CRITICAL job finished {at}th of 21: {order:?}");
    assert_eq!(order.iter().collect::<HashSet<_>>().len(), 21);
}
