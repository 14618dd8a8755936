//! The service's limits and socket with real processes (issue 10): 500 concurrent clients, long
//! lines, idle connections, request files that are not plain files, the socket's mode and group,
//! peer credentials in the log.

mod common;
mod service_common;
use service_common::{fetch_ok, serial, submit, Setup};

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use launcher::protocol::{Request, Response};

const CIRCUIT: &str = "pubinputs:2";

#[test]
fn issue10_500_concurrent_clients_get_answers_and_every_accepted_job_finishes() {
    let _g = serial();
    let mut setup = Setup::new(
        CIRCUIT,
        "max_connections = 64\nmax_queued_jobs = 150\nidle_timeout_s = 60",
    );
    let s = setup.start();
    let socket = s.socket.clone();
    let threads: Vec<_> = (0..500u64)
        .map(|i| {
            let socket = socket.clone();
            std::thread::spawn(move || -> Result<Response, String> {
                let mut c = launcher::protocol::Client::connect(&socket)
                    .map_err(|e| format!("client {i}: {e}"))?;
                // A connection over the cap is answered and closed at once: the request may then
                // meet a closed socket, the answer is still there to read.
                let sent = c.send(&submit(CIRCUIT, i, false));
                c.recv()
                    .map_err(|e| format!("client {i}: {e} (send: {sent:?})"))
            })
        })
        .collect();
    let (mut ids, mut busy, mut broken) = (Vec::new(), 0, Vec::new());
    for t in threads {
        match t.join().unwrap() {
            Ok(Response::Accepted { job_id }) => ids.push(job_id),
            Ok(Response::Error { message }) if message.starts_with("busy") => busy += 1,
            Ok(other) => panic!("{other:?}"),
            // A refused connection may be closed before our request is read (the peer reset).
            Err(e) => broken.push(e),
        }
    }
    eprintln!(
        "accepted {}, busy {busy}, broken {}",
        ids.len(),
        broken.len()
    );
    assert!(!ids.is_empty());
    assert_eq!(ids.len() + busy + broken.len(), 500);
    assert!(broken.is_empty(), "{broken:?}");
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
fn issue10_long_lines_and_idle_connections_are_closed_with_an_error() {
    let _g = serial();
    let mut setup = Setup::new(
        CIRCUIT,
        "max_line_bytes = 1024\nidle_timeout_s = 2\nmax_queued_jobs = 2",
    );
    let s = setup.start();
    // A line over the limit (no newline yet: the service must not wait for one).
    let mut conn = UnixStream::connect(&s.socket).unwrap();
    conn.write_all(&vec![b'x'; 5000]).unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let r: Response = serde_json::from_str(&line).unwrap();
    match r {
        Response::Error { message } => {
            assert!(message.contains("longer than 1024 bytes"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    line.clear();
    assert_eq!(reader.read_line(&mut line).unwrap(), 0, "closed: {line}");
    // An idle connection.
    let t = Instant::now();
    let conn = UnixStream::connect(&s.socket).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.contains("idle for 2 s"), "{line}");
    assert!(t.elapsed() >= Duration::from_millis(1900));
    line.clear();
    assert_eq!(reader.read_line(&mut line).unwrap(), 0);
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
fn issue10_request_files_that_are_not_plain_files_are_refused_at_once() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "[faults]\nmax_request_bytes = \"1MiB\"");
    let s = setup.start();
    let dir = setup.dir.path();
    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that lives through the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let big = dir.join("big.json");
    std::fs::write(&big, vec![b' '; 2 << 20]).unwrap();
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&big, &link).unwrap();
    for (path, expect) in [
        (std::path::PathBuf::from("/dev/zero"), "not a regular file"),
        (fifo, "not a regular file"),
        (big, "more than the 1048576 accepted"),
        (link, "symbolic link"),
    ] {
        let t = Instant::now();
        match s.ask(&Request::SubmitRequest {
            path: path.clone(),
            kind: None,
            family: Some("porep".into()),
            wait: false,
            priority: 0,
        }) {
            Response::Error { message } => {
                assert!(message.contains(expect), "{}: {message}", path.display());
                assert!(message.contains(&path.display().to_string()), "{message}");
            }
            other => panic!("{}: {other:?}", path.display()),
        }
        assert!(t.elapsed() < Duration::from_secs(10));
    }
    assert!(matches!(s.ask(&Request::Status), Response::Status(_)));
}

#[test]
fn issue10_the_socket_is_0660_with_its_group_and_requests_are_logged_with_peer_credentials() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "socket_group = \"root\"");
    let s = setup.start();
    let meta = std::fs::metadata(&s.socket).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    assert_eq!(meta.gid(), 0);
    assert!(matches!(s.ask(&Request::Status), Response::Status(_)));
    let me = std::process::id();
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = s.log_text();
        if log.contains(&format!("peer_pid={me} peer_uid={uid}")) && log.contains("status") {
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
        let answered = launcher::protocol::Client::connect(&s.socket)
            .ok()
            .and_then(|mut c| {
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

#[test]
fn issue10_a_root_service_reads_only_request_files_its_client_could_read_itself() {
    use std::os::unix::process::CommandExt;
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        eprintln!("note: not root, the service cannot read more than its clients: skipped");
        return;
    }
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "socket_mode = \"0666\"");
    let dir = setup.dir.path().to_owned();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let s = setup.start();
    let request = dir.join("root-only.json");
    std::fs::write(&request, b"{}").unwrap();
    let submit_as_nobody = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_splitprover"))
            .uid(65534)
            .gid(65534)
            .args([
                "submit",
                "--porep-c1",
                request.to_str().unwrap(),
                "--socket",
            ])
            .arg(&s.socket)
            .env("SPLITPROVER_LOG", "warn")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    std::fs::set_permissions(&request, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (code, err) = submit_as_nobody();
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("is not readable by the client (uid 65534)"),
        "{err}"
    );
    // Readable by everyone: the service reads it (and refuses it for what it is).
    std::fs::set_permissions(&request, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, err) = submit_as_nobody();
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("refused") && !err.contains("not readable"),
        "{err}"
    );
}
