//! Helpers of the service tests (`service_*.rs`, `sched_service.rs`): a real `splitprover run`
//! process with its own config, socket, journal and log file, and a small request/response
//! client over the gRPC API (`launcher::api::client`), which numbers jobs as the service's
//! generated ids do (`job-7` is 7).
#![allow(dead_code)]

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use launcher::api::client::{Client as ApiClient, ClientError};
use launcher::api::{pb, Endpoint};
use launcher::pipeline::PipelineStatus;

/// What the tests ask.
#[derive(Clone, Debug)]
pub enum Request {
    /// A built-in job (then, with `wait`, its outcome on the next `recv`).
    Submit {
        circuit: String,
        seed: u64,
        partitions: u32,
        wait: bool,
        priority: i64,
    },
    /// A job's outcome (`wait`: until it ends).
    Fetch { job_id: u64, wait: bool },
    /// The pipeline status.
    Status,
    /// Cancel a job.
    Cancel { job_id: u64 },
}

/// What they get.
#[derive(Clone, Debug)]
pub enum Response {
    Accepted {
        job_id: u64,
    },
    Finished {
        job_id: u64,
        /// Proof bytes per partition.
        proofs: Vec<Vec<u8>>,
        error: Option<String>,
        elapsed_ms: u64,
    },
    Queued {
        job_id: u64,
    },
    Status(Box<PipelineStatus>),
    Cancelled {
        job_id: u64,
        was_running: bool,
    },
    Error {
        message: String,
    },
}

/// The number of a generated job id.
pub fn number(job_id: &str) -> u64 {
    job_id
        .strip_prefix("job-")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a generated job id: `{job_id}`"))
}

enum Next {
    Ready(Response),
    Await(u64),
}

/// A connection with `send`/`recv` (a waiting submission answers twice: accepted, finished).
/// The proofs it receives of jobs submitted through these helpers are checked by the test's own
/// verifier (`common::verify`), not only by the service's.
pub struct Client {
    api: ApiClient,
    socket: PathBuf,
    next: VecDeque<Next>,
}

fn error(e: ClientError) -> Response {
    Response::Error {
        message: e.to_string(),
    }
}

impl Client {
    pub fn connect(socket: &Path) -> Result<Client, String> {
        let api =
            ApiClient::connect(&Endpoint::Unix(socket.to_owned())).map_err(|e| e.to_string())?;
        Ok(Client {
            api,
            socket: socket.to_owned(),
            next: VecDeque::new(),
        })
    }

    pub fn send(&mut self, r: &Request) -> Result<(), String> {
        let next = match r {
            Request::Submit {
                circuit,
                seed,
                partitions,
                wait,
                priority,
            } => {
                let request = kernels::job::BuiltinRequest {
                    seed: *seed,
                    partitions: *partitions,
                };
                match self.api.submit(pb::SubmitProofRequest {
                    circuit: circuit.clone(),
                    request: request.to_bytes(),
                    priority: *priority as i32,
                    ..Default::default()
                }) {
                    Ok(a) => {
                        let id = number(&a.job_id);
                        verify::record_submitted(&self.socket, id, circuit, &request.to_bytes());
                        self.next
                            .push_back(Next::Ready(Response::Accepted { job_id: id }));
                        if *wait {
                            self.next.push_back(Next::Await(id));
                        }
                        return Ok(());
                    }
                    Err(e) => error(e),
                }
            }
            Request::Fetch { job_id, wait } => {
                if *wait {
                    self.next.push_back(Next::Await(*job_id));
                    return Ok(());
                }
                self.outcome(*job_id, 1)
            }
            Request::Status => match self.api.status() {
                Ok(s) => Response::Status(Box::new(
                    serde_json::from_str(&s.pipeline_json).map_err(|e| e.to_string())?,
                )),
                Err(e) => error(e),
            },
            Request::Cancel { job_id } => match self.api.cancel(&format!("job-{job_id}")) {
                Ok(was_running) => Response::Cancelled {
                    job_id: *job_id,
                    was_running,
                },
                Err(e) => error(e),
            },
        };
        self.next.push_back(Next::Ready(next));
        Ok(())
    }

    fn outcome(&mut self, job_id: u64, timeout_ms: u64) -> Response {
        use pb::await_proof_response::Status as S;
        match self.api.await_proof(&format!("job-{job_id}"), timeout_ms) {
            Ok(a) => match S::try_from(a.status) {
                Ok(S::Timeout) => Response::Queued { job_id },
                Ok(S::Completed) => {
                    verify::check_submitted(&self.socket, job_id, &a.proof);
                    Response::Finished {
                        job_id,
                        proofs: a.proof.chunks(192).map(<[u8]>::to_vec).collect(),
                        error: None,
                        elapsed_ms: a.total_ms,
                    }
                }
                _ => Response::Finished {
                    job_id,
                    proofs: Vec::new(),
                    error: Some(a.error_message),
                    elapsed_ms: a.total_ms,
                },
            },
            Err(e) => error(e),
        }
    }

    pub fn recv(&mut self) -> Result<Response, String> {
        match self.next.pop_front() {
            Some(Next::Ready(r)) => Ok(r),
            Some(Next::Await(id)) => Ok(self.outcome(id, 0)),
            None => Err("nothing was asked".into()),
        }
    }
}

use crate::common::verify;
pub use crate::common::{serial, srs_for};

/// A service's files: everything under one temporary dir, kept across restarts.
pub struct Setup {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub socket: PathBuf,
    pub journal: PathBuf,
    /// Variables added to the service's environment.
    pub env: Vec<(String, String)>,
    runs: usize,
}

impl Setup {
    /// A CPU-backend service of `circuit` with `[service]` lines `service`.
    pub fn new(circuit: &str, service: &str) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("sp.sock");
        let journal = dir.path().join("state").join("jobs.sqlite");
        let config = dir.path().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "cache_dir = {:?}\nsocket = {:?}\n[ring]\nslots = 2\nhuge_pages = \"none\"\n\
                 [synthesis]\nconcurrency = 1\n[[gpu]]\nbackend = \"cpu\"\n[[circuit]]\n\
                 spec = {circuit:?}\nsrs = {:?}\n[service]\njournal = {:?}\n{service}\n",
                dir.path(),
                socket,
                srs_for(circuit),
                journal,
            ),
        )
        .unwrap();
        Setup {
            dir,
            config,
            socket,
            journal,
            env: Vec::new(),
            runs: 0,
        }
    }

    /// Starts `splitprover run` (log at `info` into `log-<n>.txt`) without waiting.
    pub fn spawn(&mut self) -> Service {
        self.spawn_with(Command::new(env!("CARGO_BIN_EXE_splitprover")))
    }

    /// Starts the service with at most `n` open files, and waits until it answers.
    pub fn start_with_nofile(&mut self, n: u64) -> Service {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_splitprover"));
        let limit = libc::rlimit {
            rlim_cur: n,
            rlim_max: n,
        };
        // SAFETY: the hook runs in the forked child before exec and only calls setrlimit, which
        // is async-signal-safe, on a value copied into the closure.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let s = self.spawn_with(cmd);
        self.wait_started(s)
    }

    fn spawn_with(&mut self, mut cmd: Command) -> Service {
        self.runs += 1;
        let log = self.dir.path().join(format!("log-{}.txt", self.runs));
        let child = cmd
            .args(["run", "--config", self.config.to_str().unwrap()])
            .env("SPLITPROVER_LOG", "info")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Service {
            child,
            log,
            socket: self.socket.clone(),
        }
    }

    /// Starts the service and waits until it answers `status`.
    pub fn start(&mut self) -> Service {
        let s = self.spawn();
        self.wait_started(s)
    }

    fn wait_started(&mut self, mut s: Service) -> Service {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(status) = s.child.try_wait().unwrap() {
                panic!("service exited at start ({status}):\n{}", s.log_text());
            }
            if s.socket.exists() {
                if let Ok(mut c) = Client::connect(&s.socket) {
                    if c.send(&Request::Status).is_ok() {
                        if let Ok(Response::Status(_)) = c.recv() {
                            return s;
                        }
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "service did not start:\n{}",
                s.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A running `splitprover run`.
pub struct Service {
    pub child: Child,
    pub log: PathBuf,
    pub socket: PathBuf,
}

impl Service {
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn client(&self) -> Client {
        Client::connect(&self.socket).unwrap()
    }

    /// One request, one answer, on a new connection.
    pub fn ask(&self, r: &Request) -> Response {
        let mut c = self.client();
        c.send(r).unwrap();
        c.recv().unwrap()
    }

    pub fn signal(&self, sig: i32) {
        launcher::pipeline::child::kill(self.child.id(), sig);
    }

    /// Waits for the exit, at most `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            launcher::pipeline::child::kill(self.child.id(), libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// A built-in job.
pub fn submit(circuit: &str, seed: u64, wait: bool) -> Request {
    Request::Submit {
        circuit: circuit.into(),
        seed,
        partitions: 1,
        wait,
        priority: 0,
    }
}

/// Waits for job `id` through `fetch --wait` and checks it succeeded with one proof, which the
/// test's own verifier accepts.
pub fn fetch_ok(s: &Service, id: u64) {
    assert!(
        verify::is_submitted(&s.socket, id),
        "job {id} was not submitted through these helpers: its proof cannot be checked"
    );
    match s.ask(&Request::Fetch {
        job_id: id,
        wait: true,
    }) {
        Response::Finished {
            job_id,
            proofs,
            error: None,
            ..
        } => {
            assert_eq!(job_id, id);
            assert_eq!(proofs.len(), 1, "job {id}");
            assert_eq!(proofs[0].len(), 192, "job {id}: a Groth16 proof");
        }
        other => panic!("job {id}: {other:?}\n{}", s.log_text()),
    }
}

/// The `.corrupt-*` files beside `path`.
pub fn aside(path: &Path) -> Vec<PathBuf> {
    launcher::journal::set_aside(path)
}
