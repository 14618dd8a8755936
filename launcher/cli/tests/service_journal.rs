//! The service's job journal with real processes (issue 10): accepted jobs survive a launcher
//! crash and a graceful stop, ids never repeat, a corrupt journal stops the start loudly.

mod common;
mod service_common;
use service_common::{fetch_ok, serial, submit, Setup};

use std::collections::HashSet;
use std::time::{Duration, Instant};

use launcher::journal::Journal;
use service_common::{Request, Response};

const CIRCUIT: &str = "sha-chain:1";

fn accepted(r: Response) -> u64 {
    match r {
        Response::Accepted { job_id } => job_id,
        other => panic!("not accepted: {other:?}"),
    }
}

#[test]
fn issue10_launcher_sigkill_with_20_accepted_jobs_loses_none_and_ids_never_repeat() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "");
    let s = setup.start();
    let ids: Vec<u64> = (0..20)
        .map(|i| accepted(s.ask(&submit(CIRCUIT, 100 + i, false))))
        .collect();
    s.signal(libc::SIGKILL);
    drop(s);
    let unique: HashSet<u64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), 20, "{ids:?}");
    // The crash came before the CPU prover could finish 20 jobs: some were still accepted.
    let unfinished = Journal::open(&setup.journal)
        .unwrap()
        .count_unfinished()
        .unwrap();
    assert!(unfinished > 0, "every job finished before the kill");

    let s = setup.start();
    for &id in &ids {
        fetch_ok(&s, id);
    }
    let log = s.log_text();
    assert!(log.contains(&format!("requeued={unfinished}")), "{log}");
    let next = accepted(s.ask(&submit(CIRCUIT, 7, false)));
    assert!(next > *ids.iter().max().unwrap(), "id {next} after {ids:?}");
    fetch_ok(&s, next);
    // A fetched result can be fetched again for a while; an unknown id is an error.
    fetch_ok(&s, ids[0]);
    match s.ask(&Request::Fetch {
        job_id: next + 1000,
        wait: false,
    }) {
        Response::Error { message } => assert!(message.contains("unknown job"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn issue10_sigterm_drains_tells_waiting_clients_and_keeps_their_jobs() {
    let _g = serial();
    // A grace far shorter than the work queued: partitions already sent to synth-proc count as
    // in flight (it has no way to cancel them), so a long grace would let every job finish.
    let mut setup = Setup::new(CIRCUIT, "stop_grace_s = 1");
    // The systemd watchdog thread runs too: it once held the pipeline so that it never shut down.
    setup.env = vec![("WATCHDOG_USEC".into(), "60000000".into())];
    let mut s = setup.start();
    // Twenty waiting clients (AwaitProof in progress): more than the pipeline proves in the
    // grace.
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(accepted(s.ask(&submit(CIRCUIT, 500 + i, false))));
    }
    let waiters: Vec<_> = ids
        .iter()
        .map(|&id| {
            let mut c = s.client();
            std::thread::spawn(move || {
                c.send(&Request::Fetch {
                    job_id: id,
                    wait: true,
                })
                .unwrap();
                c.recv().unwrap()
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    s.signal(libc::SIGTERM);
    let status = s
        .wait_exit(Duration::from_secs(1 + 15))
        .unwrap_or_else(|| panic!("no exit within the grace:\n{}", s.log_text()));
    assert!(status.success(), "{status:?}\n{}", s.log_text());
    assert!(t.elapsed() < Duration::from_secs(16));
    assert!(!setup.socket.exists());
    let mut told = 0;
    for (w, id) in waiters.into_iter().zip(&ids) {
        match w.join().unwrap() {
            Response::Finished { error: None, .. } => {}
            Response::Error { message } => {
                assert!(message.contains("shutting down"), "{message}");
                assert!(message.contains(&format!("job-{id}")), "{message}");
                told += 1;
            }
            other => panic!("job {id}: {other:?}"),
        }
    }
    assert!(told > 0, "every job finished within the drain");
    let log = s.log_text();
    assert!(log.contains("pipeline drained"), "{log}");
    assert!(
        log.contains("pipeline shut down: children stopped"),
        "{log}"
    );
    // Those clients' jobs are still accepted in the journal...
    let unfinished = Journal::open(&setup.journal)
        .unwrap()
        .count_unfinished()
        .unwrap();
    assert_eq!(unfinished, told, "{log}");
    // ...and finish after the next start.
    setup.env.clear();
    let s = setup.start();
    for &id in &ids {
        fetch_ok(&s, id);
    }
}

#[test]
fn issue10_a_corrupt_journal_stops_the_start_naming_the_file_and_is_kept_aside() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "");
    std::fs::create_dir_all(setup.journal.parent().unwrap()).unwrap();
    let garbage: Vec<u8> = (0..10_000u32).map(|i| (i * 31 % 253) as u8).collect();
    std::fs::write(&setup.journal, &garbage).unwrap();
    let mut s = setup.spawn();
    let status = s.wait_exit(Duration::from_secs(60)).expect("must exit");
    assert_eq!(status.code(), Some(2), "{}", s.log_text());
    let log = s.log_text();
    let named = setup.journal.display().to_string();
    assert!(
        log.contains(&format!("job journal `{named}` is corrupt")),
        "{log}"
    );
    assert!(log.contains("moved aside"), "{log}");
    assert!(!setup.journal.exists());
    let aside = service_common::aside(&setup.journal);
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(std::fs::read(&aside[0]).unwrap(), garbage);
    // The next start begins with an empty journal and says where the old one is.
    let s = setup.start();
    assert!(s.log_text().contains("moved aside to"), "{}", s.log_text());
}

/// Issue 33: a panic on the launcher's dispatcher thread left a service that accepted jobs and
/// never dispatched them, while the systemd watchdog was still fed. Now the pipeline turns fatal,
/// the service exits non-zero (systemd restarts it), and the accepted job, kept in the journal,
/// is proved after the restart.
#[test]
fn issue33_a_dispatcher_panic_stops_the_service_with_an_error_and_the_job_runs_after_a_restart() {
    let _g = serial();
    let mut setup = Setup::new(CIRCUIT, "");
    // The dispatcher panics when it hears that the first job's partition is published.
    setup.env = vec![(
        shm_protocol::fault::FAULT_ENV.into(),
        "dispatcher-panic@job=1".into(),
    )];
    let mut s = setup.start();
    let id = accepted(s.ask(&submit(CIRCUIT, 42, false)));
    let status = s
        .wait_exit(Duration::from_secs(120))
        .unwrap_or_else(|| panic!("the service kept running:\n{}", s.log_text()));
    let log = s.log_text();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains(
            "the dispatcher panicked: injected fault `dispatcher-panic` at job 1 partition 0"
        ),
        "{log}"
    );
    assert!(log.contains("stopping with an error"), "{log}");
    assert!(!log.contains("pipeline drained"), "nothing to drain: {log}");
    let unfinished = Journal::open(&setup.journal)
        .unwrap()
        .count_unfinished()
        .unwrap();
    assert_eq!(unfinished, 1, "the accepted job stays in the journal");
    // Restarted on the same journal, without the fault: the job is proved.
    setup.env.clear();
    let s = setup.start();
    fetch_ok(&s, id);
    assert!(s.log_text().contains("requeued=1"), "{}", s.log_text());
}
