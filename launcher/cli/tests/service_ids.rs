//! One job id end to end (issue 33): the journal's id is the job's id in the pipeline, when the
//! service accepts a job and when it re-queues one after a restart; a request id is an alias
//! that resolves to it; a live id given again is refused. The service runs in this process over
//! a real pipeline whose gpu-procs are paused, so accepted jobs stay live while they are looked
//! at.

mod common;
use common::{cli, pipeline_settings, serial};

use std::path::Path;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use launcher::api::server::{serve_unix, Serving};
use launcher::api::DEFAULT_MAX_MESSAGE_BYTES;

use launcher::journal::{JobState, Journal};
use launcher::metrics::Metrics;
use launcher::pipeline::{JobOptions, Pipeline, PipelineError};
use launcher::service::{Ended, Limits, Reason, Service, ServiceError, Submission};

const CIRCUIT: &str = "sha-chain:1";
const LIMIT: Duration = Duration::from_secs(300);

fn request(seed: u64) -> Vec<u8> {
    kernels::job::BuiltinRequest {
        seed,
        partitions: 1,
    }
    .to_bytes()
}

/// A service over a started pipeline whose gpu-procs prove nothing until resumed.
fn service(journal: &Path) -> Service {
    let mut s = pipeline_settings(CIRCUIT);
    s.slots = 2;
    let p = Pipeline::start(s).unwrap();
    p.wait_ready(Duration::from_secs(120)).unwrap();
    p.pause_gpus(Duration::from_secs(60)).unwrap();
    let limits = Limits {
        max_queued_jobs: 100,
        fetched_retention: Duration::from_secs(3600),
        result_retention: Duration::from_secs(3600),
    };
    Service::new(p, Journal::open(journal).unwrap(), limits, Metrics::new())
}

fn submission(seed: u64, request_id: Option<&str>) -> Submission {
    Submission {
        circuit: CIRCUIT.parse().unwrap(),
        request: request(seed),
        priority: 0,
        request_id: request_id.map(str::to_owned),
    }
}

/// The ids of the jobs the pipeline itself holds.
fn pipeline_ids(s: &Service) -> Vec<u64> {
    let mut ids: Vec<u64> = s
        .pipeline()
        .status()
        .jobs
        .iter()
        .map(|j| j.job_id)
        .collect();
    ids.sort_unstable();
    ids
}

fn ended(s: &Service, id: u64) -> Ended {
    let deadline = Instant::now() + LIMIT;
    loop {
        s.collect();
        if let Some(e) = s.ended(id).unwrap() {
            return e;
        }
        assert!(Instant::now() < deadline, "job {id} did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_journals_id_is_the_pipelines_and_request_ids_resolve_to_it() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.sqlite");
    // Older rows hold ids 1 and 2, the first ones a pipeline gives on its own.
    {
        let mut j = Journal::open(&path).unwrap();
        for seed in 0..2 {
            let id = j.accept(CIRCUIT, 2, &request(seed)).unwrap();
            j.finish(id, Err("an older run")).unwrap();
        }
    }
    let s = service(&path);
    let plain = s.submit(submission(1, None)).unwrap();
    let named = s.submit(submission(2, Some("porep-1000-7"))).unwrap();
    assert_eq!((plain.id, plain.request_id.as_str()), (3, "job-3"));
    assert_eq!((named.id, named.request_id.as_str()), (4, "porep-1000-7"));
    assert_eq!(pipeline_ids(&s), [3, 4]);
    // The request id, the generated alias and the id itself name the same job.
    for name in ["porep-1000-7", "job-4", "4"] {
        assert_eq!(s.resolve(name).unwrap(), 4, "{name}");
    }
    for name in ["job-3", "3"] {
        assert_eq!(s.resolve(name).unwrap(), 3, "{name}");
    }
    for name in ["porep-1000-8", "job-99", "99"] {
        let e = s.resolve(name).unwrap_err();
        assert!(
            matches!(&e, ServiceError::Service(Reason::UnknownJob(n)) if n == name),
            "{e:?}"
        );
    }
    // A retried request attaches to its job: the same id, nothing new in the pipeline.
    let again = s.submit(submission(2, Some("porep-1000-7"))).unwrap();
    assert!(again.existing && again.id == 4, "{again:?}");
    assert_eq!(pipeline_ids(&s), [3, 4]);
    // A live id given again is refused, typed.
    let refused = s.pipeline().submit_job_with(
        CIRCUIT.parse().unwrap(),
        &request(9),
        JobOptions {
            id: Some(4),
            ..Default::default()
        },
    );
    assert!(
        matches!(refused, Err(PipelineError::JobIdTaken(4))),
        "{:?}",
        refused.map(|h| h.id)
    );
    assert_eq!(pipeline_ids(&s), [3, 4]);
    s.pipeline().resume_gpus().unwrap();
    for id in [3, 4] {
        let e = ended(&s, id);
        assert_eq!((e.row.id, e.row.state), (id, JobState::Succeeded), "{e:?}");
    }
    s.shutdown();
}

#[test]
fn a_job_requeued_after_a_restart_keeps_its_id() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.sqlite");
    let s = service(&path);
    // Job 1 ends, so the re-queued ones are not the ids a fresh pipeline would give.
    let first = s.submit(submission(1, None)).unwrap();
    s.cancel(first.id).unwrap();
    let a = s.submit(submission(2, None)).unwrap();
    let b = s.submit(submission(3, Some("wdpost-1000-0-0"))).unwrap();
    assert_eq!((first.id, a.id, b.id), (1, 2, 3));
    // Stopped with both accepted and unproved: they stay accepted in the journal.
    s.shutdown();
    let s = service(&path);
    assert_eq!(s.requeue().unwrap(), 2);
    assert_eq!(pipeline_ids(&s), [a.id, b.id]);
    assert_eq!(s.resolve("wdpost-1000-0-0").unwrap(), b.id);
    assert_eq!(s.resolve("job-2").unwrap(), a.id);
    s.pipeline().resume_gpus().unwrap();
    for id in [a.id, b.id] {
        let e = ended(&s, id);
        assert_eq!(e.row.state, JobState::Succeeded, "{e:?}");
    }
    s.shutdown();
}

#[test]
fn the_cli_fetches_a_job_by_its_id_and_by_its_request_id() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(service(&dir.path().join("jobs.sqlite")));
    s.pipeline().resume_gpus().unwrap();
    let named = s.submit(submission(1, Some("porep-1000-7"))).unwrap();
    let plain = s.submit(submission(2, None)).unwrap();
    for id in [named.id, plain.id] {
        assert_eq!(ended(&s, id).row.state, JobState::Succeeded);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let socket = dir.path().join("api.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let serving = Serving {
        max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
        max_connections: 8,
        open: Arc::new(AtomicUsize::new(0)),
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let server = serve_unix(rt.handle(), listener, s.clone(), &serving, stopped).unwrap();
    let env = [("SPLITPROVER_SOCKET", socket.as_path())];
    // `fetch 1` is job 1 although its request id is the client's.
    for name in [
        named.id.to_string(),
        "porep-1000-7".into(),
        plain.id.to_string(),
        format!("job-{}", plain.id),
    ] {
        let (code, stdout, err) = cli(&["fetch", &name], &env);
        assert_eq!(code, 0, "fetch {name}: {err}");
        assert_eq!(stdout.trim().len(), 2 * 192, "fetch {name}: {stdout}");
    }
    let (code, _, err) = cli(&["fetch", "99"], &env);
    assert_ne!(code, 0);
    assert!(err.contains("unknown job `job-99`"), "{err}");
    stop.send(true).unwrap();
    rt.block_on(server).unwrap().unwrap();
    drop(rt);
    let Ok(s) = Arc::try_unwrap(s) else {
        panic!("the server still holds the service")
    };
    s.shutdown();
}
