//! Cancellation and priorities through the service (issue 11, over the gRPC API): a
//! cancelled job delivers no proof, its journal state is `cancelled` and it is not re-queued
//! after a restart; `splitprover cancel` is the client.

mod common;
mod service_common;
use service_common::{fetch_ok, serial, submit, Setup};

use launcher::journal::{JobState, Journal};
use service_common::{Request, Response};

const CIRCUIT: &str = "sha-chain:1";

fn accepted(r: Response) -> u64 {
    match r {
        Response::Accepted { job_id } => job_id,
        other => panic!("not accepted: {other:?}"),
    }
}

fn cancelled_on_fetch(s: &service_common::Service, id: u64) {
    match s.ask(&Request::Fetch {
        job_id: id,
        wait: true,
    }) {
        Response::Finished {
            job_id,
            proofs,
            error: Some(e),
            ..
        } => {
            assert_eq!((job_id, e.as_str()), (id, "cancelled"));
            assert!(proofs.is_empty());
        }
        other => panic!("job {id}: {other:?}"),
    }
}

/// `splitprover cancel ID`: (exit code, stderr).
fn cancel_cli(s: &service_common::Service, id: u64) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_splitprover"))
        .args(["cancel", &id.to_string(), "--socket"])
        .arg(&s.socket)
        .env("SPLITPROVER_LOG", "warn")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cancel_over_the_socket_journals_cancelled_and_a_restart_does_not_requeue_it() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "");
    let s = setup.start();
    // A running job: handed to synth-proc at once.
    let running = accepted(s.ask(&submit(CIRCUIT, 10, false)));
    match s.ask(&Request::Cancel { job_id: running }) {
        Response::Cancelled {
            job_id,
            was_running,
        } => assert_eq!((job_id, was_running), (running, true)),
        other => panic!("{other:?}\n{}", s.log_text()),
    }
    // Five jobs ahead of a queued one (one synthesis at a time, two partitions at synth-proc).
    let ahead: Vec<u64> = (0..5)
        .map(|i| accepted(s.ask(&submit(CIRCUIT, 20 + i, false))))
        .collect();
    let queued = accepted(s.ask(&submit(CIRCUIT, 40, false)));
    let (code, err) = cancel_cli(&s, queued);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!("job job-{queued} cancelled (it was queued)")),
        "{err}"
    );
    // Once only; unknown ids too.
    let (code, err) = cancel_cli(&s, queued);
    assert_ne!(code, 0);
    assert!(err.contains("has already ended (cancelled)"), "{err}");
    match s.ask(&Request::Cancel { job_id: 9999 }) {
        Response::Error { message } => assert!(message.contains("job-9999"), "{message}"),
        other => panic!("{other:?}"),
    }
    // A priority off the scale is refused.
    match s.ask(&Request::Submit {
        circuit: CIRCUIT.into(),
        seed: 1,
        partitions: 1,
        wait: false,
        priority: 7,
    }) {
        Response::Error { message } => assert!(message.contains("priority 7"), "{message}"),
        other => panic!("{other:?}"),
    }
    for &id in &ahead {
        fetch_ok(&s, id);
    }
    cancelled_on_fetch(&s, running);
    cancelled_on_fetch(&s, queued);
    let next = accepted(s.ask(&submit(CIRCUIT, 50, false)));
    fetch_ok(&s, next);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_splitprover"))
        .args(["status", "--socket"])
        .arg(&s.socket)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2 cancelled") && text.contains("(at most 2)"),
        "{text}"
    );
    s.signal(libc::SIGKILL);
    drop(s);

    let journal = Journal::open(&setup.journal).unwrap();
    for id in [running, queued] {
        let row = journal.get(id).unwrap().unwrap();
        assert_eq!(row.state, JobState::Cancelled, "job {id}");
    }
    assert!(journal.unfinished().unwrap().is_empty());
    drop(journal);

    let s = setup.start();
    cancelled_on_fetch(&s, queued);
    let status = match s.ask(&Request::Status) {
        Response::Status(st) => st,
        other => panic!("{other:?}"),
    };
    assert_eq!(status.counters.submitted, 0, "nothing was re-queued");
    assert!(s.log_text().contains("requeued=0"), "{}", s.log_text());
}
