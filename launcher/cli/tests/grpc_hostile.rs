//! Hostile clients under load (issue 45), against a real `splitprover run` (CPU backend,
//! built-in circuit) on 127.0.0.1 with `allow = ["127.0.0.1/32"]`: while well-behaved clients
//! prove and verify their jobs, others hold every connection slot silently, open more than
//! `max_connections`, send garbage payloads, and try to cancel jobs by guessing ids, from
//! outside the allow-list (refused at accept) and from inside (ids that name no job:
//! `NOT_FOUND`). Every well-behaved job completes and verifies; each hostile act gets a clear
//! answer: a closed connection, counted in `splitprover_connections_refused_total`, or a gRPC
//! error naming the reason. (An admitted client may cancel a job whose id it knows: admission
//! is the authority, see ARCHITECTURE.md.)

mod common;
mod service_common;
use common::free_port;
use service_common::{serial, Setup};

use std::io::Read;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use launcher::api::client::Client;
use launcher::api::{pb, Endpoint};
use pb::await_proof_response::Status as S;
use tonic::Code;

const CIRCUIT: &str = "sha-chain:1";
const MAX_CONNECTIONS: usize = 6;

fn builtin(seed: u64) -> pb::SubmitProofRequest {
    pb::SubmitProofRequest {
        circuit: CIRCUIT.into(),
        request: kernels::job::BuiltinRequest {
            seed,
            partitions: 1,
        }
        .to_bytes(),
        request_id: format!("good-{seed}"),
        ..Default::default()
    }
}

/// Retries `f` with a fresh connection until it answers (the slots may be held by hostile
/// connections until the server closes them), at most until `deadline`.
fn with_retries<T>(
    tcp: &Endpoint,
    deadline: Instant,
    mut f: impl FnMut(&mut Client) -> Result<T, launcher::api::client::ClientError>,
) -> Result<T, launcher::api::client::ClientError> {
    loop {
        let answer = Client::connect(tcp).and_then(|mut c| f(&mut c));
        match answer {
            // Refused at accept or closed mid-call: a transport error (no code, UNAVAILABLE, or
            // UNKNOWN "transport error"), try again.
            Err(e)
                if Instant::now() < deadline
                    && matches!(e.code(), None | Some(Code::Unavailable | Code::Unknown)) =>
            {
                thread::sleep(Duration::from_millis(200));
            }
            other => return other,
        }
    }
}

/// Holds a TCP connection to `port` without sending a byte; returns how long until the server
/// closed it (`None`: not within 20 s).
fn hang(port: u16) -> Option<Duration> {
    let started = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return None,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return None,
            Err(_) => return Some(started.elapsed()),
        }
    }
}

/// Connects from 127.0.0.2 (outside the allow-list), sends HTTP/2's preface and a cancel's worth
/// of bytes, and returns what came back before the close.
fn outsider(port: u16) -> Vec<u8> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind(std::net::SocketAddr::from(([127, 0, 0, 2], 0)))
            .unwrap();
        let mut s = socket
            .connect(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
            .await
            .unwrap();
        let _ = s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await;
        let _ = s
            .write_all(b"/cuzk.v1.ProvingEngine/CancelProof job-1")
            .await;
        let mut got = vec![0u8; 256];
        match tokio::time::timeout(Duration::from_secs(2), s.read(&mut got)).await {
            Ok(Ok(n)) => got[..n].to_vec(),
            _ => Vec::new(),
        }
    })
}

#[test]
fn well_behaved_jobs_complete_while_hostile_clients_get_clear_errors() {
    let _g = serial();
    let port = free_port();
    let mut setup = Setup::new(
        CIRCUIT,
        &format!(
            "listen = [\"127.0.0.1:{port}\"]\nallow = [\"127.0.0.1/32\"]\n\
             max_connections = {MAX_CONNECTIONS}\nfirst_byte_timeout_s = 2"
        ),
    );
    let s = setup.start();
    let tcp = Endpoint::Tcp(format!("127.0.0.1:{port}"));
    let deadline = Instant::now() + Duration::from_secs(120);

    // Silent connections take every slot (and one more is refused at once).
    let hangers: Vec<_> = (0..MAX_CONNECTIONS + 2)
        .map(|_| thread::spawn(move || hang(port)))
        .collect();
    thread::sleep(Duration::from_millis(200));

    // Well-behaved clients: three, two jobs each, retrying while the slots are held.
    let good: Vec<_> = (0..3u64)
        .map(|client| {
            let tcp = tcp.clone();
            thread::spawn(move || {
                for j in 0..2 {
                    let req = builtin(100 + client * 10 + j);
                    let a = with_retries(&tcp, deadline, |c| c.prove(req.clone()))
                        .unwrap_or_else(|e| panic!("client {client}: {e}"));
                    assert_eq!(a.status, S::Completed as i32, "{a:?}");
                    common::verify::builtin_proof(&req.circuit, &req.request, &a.proof);
                }
            })
        })
        .collect();

    // Garbage payloads: each refused with INVALID_ARGUMENT naming the reason.
    let stop = Arc::new(AtomicBool::new(false));
    let garbage = {
        let (tcp, stop) = (tcp.clone(), stop.clone());
        thread::spawn(move || {
            let bad: Vec<(pb::SubmitProofRequest, &str)> = vec![
                (
                    pb::SubmitProofRequest {
                        circuit: CIRCUIT.into(),
                        request: vec![0xff; 3],
                        ..Default::default()
                    },
                    "request",
                ),
                (
                    pb::SubmitProofRequest {
                        circuit: "no-such-circuit:9".into(),
                        ..Default::default()
                    },
                    "no-such-circuit:9",
                ),
                (
                    pb::SubmitProofRequest {
                        proof_kind: pb::ProofKind::PorepSealCommit as i32,
                        registered_proof: 5,
                        vanilla_proof: b"\x00garbage{{{".to_vec(),
                        ..Default::default()
                    },
                    "JSON",
                ),
                (
                    pb::SubmitProofRequest {
                        proof_kind: pb::ProofKind::WinningPost as i32,
                        vanilla_proofs: vec![vec![0xaa; 40]],
                        randomness: vec![1; 7],
                        ..Default::default()
                    },
                    "randomness must be 32 bytes",
                ),
            ];
            let mut refused = 0;
            while !stop.load(Ordering::Relaxed) || refused < bad.len() {
                for (req, reason) in &bad {
                    let e = with_retries(&tcp, deadline, |c| c.submit(req.clone()))
                        .expect_err("garbage accepted");
                    assert_eq!(e.code(), Some(Code::InvalidArgument), "{e}");
                    assert!(e.to_string().contains(reason), "{e}");
                    refused += 1;
                }
                thread::sleep(Duration::from_millis(100));
            }
            refused
        })
    };

    // Guessed ids: from outside, the connection closes unanswered; from inside, an id that names
    // no job is NOT_FOUND.
    for _ in 0..3 {
        assert_eq!(outsider(port), Vec::<u8>::new());
    }
    for id in ["job-999999", "porep-1000-123456", "good-9999"] {
        let e = with_retries(&tcp, deadline, |c| c.cancel(id)).unwrap_err();
        assert_eq!(e.code(), Some(Code::NotFound), "{id}: {e}");
    }

    for t in good {
        t.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    assert!(garbage.join().unwrap() >= 4);
    let mut closed = 0;
    for h in hangers {
        if let Some(after) = h.join().unwrap() {
            assert!(after < Duration::from_secs(15), "{after:?}");
            closed += 1;
        }
    }
    assert_eq!(
        closed,
        MAX_CONNECTIONS + 2,
        "a silent connection stayed open"
    );

    let m = Client::connect(&Endpoint::Unix(s.socket.clone()))
        .unwrap()
        .metrics()
        .unwrap();
    let count = |reason: &str| -> u64 {
        let key = format!("splitprover_connections_refused_total{{reason=\"{reason}\"}} ");
        m.lines()
            .find_map(|l| l.strip_prefix(&key))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{key} missing:\n{m}"))
    };
    assert!(count("not_allowed") >= 3, "{m}");
    assert!(count("silent") >= MAX_CONNECTIONS as u64, "{m}");
    assert!(count("too_many") >= 1, "{m}");
    assert!(m.contains("cuzk_proofs_completed_total 6\n"), "{m}");
}
