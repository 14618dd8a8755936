//! The service's limits and socket with real processes (issues 10 and 11, over the gRPC API):
//! 500 concurrent clients, the message limit, the queue cap, request files that are not plain
//! files (read by the client: the service never reads a path), the socket's mode and group, peer
//! credentials in the log, running out of descriptors.

mod common;
mod service_common;
use service_common::{fetch_ok, serial, submit, Setup};

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use launcher::api::client::Client as ApiClient;
use launcher::api::{pb, Endpoint};
use service_common::{Client, Request, Response};

const CIRCUIT: &str = "pubinputs:2";

#[test]
fn issue10_500_concurrent_clients_get_answers_and_every_accepted_job_finishes() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "max_connections = 64\nmax_queued_jobs = 150");
    let s = setup.start();
    let socket = s.socket.clone();
    let threads: Vec<_> = (0..500u64)
        .map(|i| {
            let socket = socket.clone();
            std::thread::spawn(move || -> Result<Response, String> {
                // A connection over the cap is closed at once: the client sees it fail.
                let mut c = Client::connect(&socket).map_err(|e| format!("client {i}: {e}"))?;
                c.send(&submit(CIRCUIT, i, false))?;
                c.recv()
            })
        })
        .collect();
    let (mut ids, mut busy, mut closed) = (Vec::new(), 0, 0);
    for t in threads {
        match t.join().unwrap() {
            Ok(Response::Accepted { job_id }) => ids.push(job_id),
            Ok(Response::Error { message }) if message.starts_with("busy") => busy += 1,
            // Over `max_connections`: the connection was closed before a request went through.
            Ok(Response::Error { message }) | Err(message)
                if ["connect", "transport", "canceled", "reset", "closed"]
                    .iter()
                    .any(|w| message.contains(w)) =>
            {
                closed += 1
            }
            Ok(other) => panic!("{other:?}"),
            Err(e) => panic!("{e}"),
        }
    }
    eprintln!(
        "accepted {}, busy {busy}, connections closed {closed}",
        ids.len()
    );
    assert!(!ids.is_empty());
    assert_eq!(ids.len() + busy + closed, 500);
    assert!(s.log_text().contains("connection refused: too many open") || closed == 0);
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len(), "ids are unique");
    for &id in &ids {
        fetch_ok(&s, id);
    }
    match s.ask(&Request::Status) {
        Response::Status(st) => assert!(st.counters.succeeded >= ids.len() as u64),
        other => panic!("{other:?}"),
    }
    assert!(s.log_text().contains("service ready"));
}

#[test]
fn issue11_a_message_over_the_limit_is_refused_and_the_service_goes_on() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "max_message_bytes = 65536\nmax_queued_jobs = 2");
    let s = setup.start();
    // A client whose own limit is larger: the service's limit is what refuses it.
    let mut c = ApiClient::connect_with_limit(&Endpoint::Unix(s.socket.clone()), 1 << 20).unwrap();
    let e = c
        .submit(pb::SubmitProofRequest {
            circuit: CIRCUIT.into(),
            request: vec![0; 100_000],
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(e.code(), Some(tonic::Code::OutOfRange), "{e}");
    assert!(e.to_string().contains("65536"), "{e}");
    // The service is fine.
    assert!(matches!(s.ask(&Request::Status), Response::Status(_)));
    let id = match s.ask(&submit(CIRCUIT, 3, false)) {
        Response::Accepted { job_id } => job_id,
        other => panic!("{other:?}"),
    };
    fetch_ok(&s, id);
    // The queue cap: two long jobs fill it, a third is refused, not accepted.
    let long = |seed| Request::Submit {
        circuit: CIRCUIT.into(),
        seed,
        partitions: 100,
        wait: false,
        priority: 0,
    };
    let a = s.ask(&long(10));
    let b = s.ask(&long(20));
    assert!(matches!(a, Response::Accepted { .. }) && matches!(b, Response::Accepted { .. }));
    match s.ask(&submit(CIRCUIT, 4, false)) {
        Response::Error { message } => {
            assert!(message.starts_with("busy: 2 jobs queued"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // Absurd partition counts are refused before anything is allocated or journaled.
    match s.ask(&Request::Submit {
        circuit: CIRCUIT.into(),
        seed: 0,
        partitions: 4_000_000_000,
        wait: false,
        priority: 0,
    }) {
        Response::Error { message } => {
            assert!(message.contains("too many partitions"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn issue10_request_files_that_are_not_plain_files_are_refused_by_the_client_at_once() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "");
    let s = setup.start();
    let dir = setup.dir.path();
    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that lives through the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let target = dir.join("c1.json");
    std::fs::write(&target, b"{}").unwrap();
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    for (path, expect) in [
        (std::path::PathBuf::from("/dev/zero"), "not a regular file"),
        (fifo, "not a regular file"),
        (link, "symbolic link"),
    ] {
        let t = Instant::now();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_splitprover"))
            .args(["submit", "--porep-c1"])
            .arg(&path)
            .arg("--socket")
            .arg(&s.socket)
            .env("SPLITPROVER_LOG", "warn")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(expect), "{}: {err}", path.display());
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(t.elapsed() < Duration::from_secs(10));
    }
    assert!(matches!(s.ask(&Request::Status), Response::Status(_)));
    assert!(!s.log_text().contains("submit job="), "{}", s.log_text());
}

#[test]
fn issue10_the_socket_is_0660_with_its_group_and_requests_are_logged_with_peer_credentials() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "socket_group = \"root\"");
    let s = setup.start();
    let meta = std::fs::metadata(&s.socket).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    assert_eq!(meta.gid(), 0);
    let id = match s.ask(&submit(CIRCUIT, 1, false)) {
        Response::Accepted { job_id } => job_id,
        other => panic!("{other:?}"),
    };
    fetch_ok(&s, id);
    let me = std::process::id();
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = s.log_text();
        if log.contains(&format!("peer_pid={me} peer_uid={uid}")) && log.contains("submit") {
            break;
        }
        assert!(Instant::now() < deadline, "{log}");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(s);
    // An unknown group is named, before the pipeline starts.
    let mut bad = Setup::new(CIRCUIT, "socket_group = \"no-such-group-sp10\"");
    let mut s = bad.spawn();
    let status = s.wait_exit(Duration::from_secs(30)).expect("must exit");
    assert_eq!(status.code(), Some(2));
    assert!(
        s.log_text().contains("unknown group `no-such-group-sp10`"),
        "{}",
        s.log_text()
    );
}

#[test]
fn issue10_running_out_of_file_descriptors_in_accept_does_not_end_the_service() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "max_connections = 256");
    let s = setup.start_with_nofile(64);
    // Hold connections until accept fails with EMFILE (each one costs the service three fds).
    let held: Vec<UnixStream> = (0..60)
        .map(|_| UnixStream::connect(&s.socket).unwrap())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !s
        .log_text()
        .contains("accepting a client: Too many open files")
    {
        assert!(Instant::now() < deadline, "{}", s.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(held);
    // The service goes on: once the clients are gone it answers again and proves.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answered = Client::connect(&s.socket).ok().and_then(|mut c| {
            c.send(&Request::Status).ok()?;
            c.recv().ok()
        });
        if matches!(answered, Some(Response::Status(_))) {
            break;
        }
        assert!(Instant::now() < deadline, "{}", s.log_text());
        std::thread::sleep(Duration::from_millis(100));
    }
    let id = match s.ask(&submit(CIRCUIT, 9, false)) {
        Response::Accepted { job_id } => job_id,
        other => panic!("{other:?}"),
    };
    fetch_ok(&s, id);
}
