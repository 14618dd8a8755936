//! `splitprover bench --filecoin porep:… --filecoin-modes api`: the cuzk gRPC API against the
//! pipeline's own submit path, on one pipeline, in one run (issue 11's figures):
//! - **overhead**: rounds of `-n` PoRep C2 proofs with `-j` in flight, alternating the local path
//!   (`Pipeline::submit_job_with`, in process) and the API (`Prove` over a Unix socket, the
//!   request as Curio sends it: the `Commit2In` envelope, Go ABI proof number, miner id), so
//!   machine noise hits both alike; s/proof per round, medians compared;
//! - **priority**: a WinningPoSt `Prove` (priority UNSPECIFIED: CRITICAL, as Curio sends it) on the
//!   idle service, then right behind `--api-queued` (20) PoRep C2 jobs just submitted; its
//!   latencies compared.
//!
//! Every proof is checked: PoRep with `verify_seal`, WinningPoSt with the fil verifier.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use kernels::circuits::AnyCircuit;
use kernels::filecoin::{self, fixture, ProofKind, RegisteredPoStProof};
use launcher::api::client::Client;
use launcher::api::curio;
use launcher::api::server::{serve_unix, Serving};
use launcher::api::{pb, Endpoint, DEFAULT_MAX_MESSAGE_BYTES};
use launcher::journal::Journal;
use launcher::metrics::Metrics;
use launcher::pipeline::{JobOptions, Pipeline, PipelineSettings};
use launcher::service::Service;

/// The figures.
#[derive(Debug)]
pub struct ApiFigures {
    /// s/proof of each local round.
    pub local_rounds: Vec<f64>,
    /// s/proof of each API round.
    pub api_rounds: Vec<f64>,
    /// WinningPoSt latencies on the idle service, s.
    pub winning_idle: Vec<f64>,
    /// WinningPoSt latencies behind the queued PoRep C2 jobs, s.
    pub winning_loaded: Vec<f64>,
    /// PoRep C2 jobs queued ahead of it.
    pub queued: usize,
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

impl ApiFigures {
    /// The table printed at the end.
    pub fn render(&self) -> String {
        let (l, a) = (median(&self.local_rounds), median(&self.api_rounds));
        let (i, q) = (median(&self.winning_idle), median(&self.winning_loaded));
        let n = self.queued;
        let fmt = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:.4}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        format!(
            "PoRep C2 s/proof, local rounds: {}\n\
             PoRep C2 s/proof, API rounds:   {}\n\
             median local {l:.4} s/proof, API {a:.4} s/proof: API overhead {:+.2} %\n\
             WinningPoSt latency idle (s):          {}\n\
             WinningPoSt latency behind {n} PoRep:   {}\n\
             median idle {i:.3} s, behind {n} PoRep {q:.3} s: ratio {:.2}x\n",
            fmt(&self.local_rounds),
            fmt(&self.api_rounds),
            100.0 * (a / l - 1.0),
            fmt(&self.winning_idle),
            fmt(&self.winning_loaded),
            q / i
        )
    }
}

/// The WinningPoSt proof of a sector size, and its Go ABI number.
fn winning_of(sector_size: u64) -> anyhow::Result<(RegisteredPoStProof, u64)> {
    (0..5)
        .filter_map(|n| curio::post_proof(n).ok().map(|p| (p, n)))
        .find(|(p, _)| ProofKind::PoSt(*p).sector_size() == sector_size)
        .context("no WinningPoSt proof of this sector size")
}

/// Runs the API bench over `sector`, with `rounds` rounds of `proofs` proofs each way.
#[allow(clippy::too_many_arguments)]
pub fn run(
    mut settings: PipelineSettings,
    kind: ProofKind,
    porep_params: &Path,
    sector: &fixture::SealedSector,
    param_cache: &Path,
    work: &Path,
    proofs: usize,
    clients: usize,
    rounds: usize,
    queued: usize,
) -> anyhow::Result<ApiFigures> {
    if sector.files.is_none() {
        anyhow::bail!(
            "the API bench proves WinningPoSt over the sector's replica, and sector {} has none \
             here (a sparse CC sector, or a record without its files); hint: seal the sector \
             (`sealed-{0}`, `cache-{0}` and `sector-{0}.json` in `{1}`) or leave `api` out",
            sector.sector_id,
            work.join("sector").display()
        );
    }
    let (winning, winning_number) = winning_of(kind.sector_size())?;
    let winning_kind = ProofKind::PoSt(winning);
    let (winning_files, _) = filecoin::ensure_parameters(winning_kind, param_cache, 17, &|_| {})?;
    let post = fixture::post_request(
        winning,
        std::slice::from_ref(sector),
        fixture::randomness(21),
    )?;
    settings.circuits = vec![
        launcher::pipeline::CircuitSetting {
            spec: AnyCircuit::Filecoin(kind),
            params: porep_params.to_owned(),
            slots: 0,
        },
        launcher::pipeline::CircuitSetting {
            spec: AnyCircuit::Filecoin(winning_kind),
            params: winning_files.params.clone(),
            slots: 0,
        },
    ];
    let served = Served::start(settings, work)?;
    let c1 = sector.commit2in_json();
    let bench = Bench {
        service: &served.service,
        endpoint: Endpoint::Unix(served.socket.clone()),
        porep_request: porep_request(kind, sector, c1.clone())?,
        winning_request: pb::SubmitProofRequest {
            proof_kind: pb::ProofKind::WinningPost as i32,
            sector_size: kind.sector_size(),
            registered_proof: winning_number,
            vanilla_proofs: post.vanilla_proofs.clone(),
            randomness: post.randomness.to_vec(),
            miner_id: fixture::PROVER_MINER_ID,
            ..Default::default()
        },
        circuit: AnyCircuit::Filecoin(kind),
        c1,
        sector,
        post: &post,
        clients,
        next_id: AtomicU64::new(0),
    };
    let figures = bench.measure(proofs, rounds, queued);
    served.stop();
    figures
}

/// PoRep C2's request as Curio sends it: the `Commit2In` envelope `c1`, the Go ABI proof
/// number, the miner id.
fn porep_request(
    kind: ProofKind,
    sector: &fixture::SealedSector,
    c1: Vec<u8>,
) -> anyhow::Result<pb::SubmitProofRequest> {
    Ok(pb::SubmitProofRequest {
        proof_kind: pb::ProofKind::PorepSealCommit as i32,
        sector_size: kind.sector_size(),
        registered_proof: curio::seal_number(sector.proof)
            .with_context(|| format!("`{kind}` has no Go ABI number"))?,
        priority: pb::Priority::Normal as i32,
        vanilla_proof: c1,
        sector_number: sector.sector_id,
        miner_id: fixture::PROVER_MINER_ID,
        ..Default::default()
    })
}

/// The service the bench measures: the pipeline, a fresh journal, a collector thread and the
/// API on a Unix socket in the work directory.
struct Served {
    service: Arc<Service>,
    socket: std::path::PathBuf,
    stop: Arc<AtomicBool>,
    collector: std::thread::JoinHandle<()>,
    rt: tokio::runtime::Runtime,
    stop_server: tokio::sync::watch::Sender<bool>,
    server: launcher::api::server::ServerTask,
}

impl Served {
    fn start(settings: PipelineSettings, work: &Path) -> anyhow::Result<Served> {
        let pipeline = Pipeline::start(settings)?;
        pipeline.wait_ready(Duration::from_secs(900))?;
        std::fs::create_dir_all(work)?;
        let journal_path = work.join("api-bench-jobs.sqlite");
        for stale in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{stale}", journal_path.display()));
        }
        let limits = launcher::settings::limits(&launcher::config::ServiceConfig::default());
        let service = Arc::new(Service::new(
            pipeline,
            Journal::open(&journal_path)?,
            limits,
            Metrics::new(),
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let collector = {
            let (service, stop) = (service.clone(), stop.clone());
            std::thread::spawn(move || {
                // The flag convention: stored Release, loaded Acquire.
                while !stop.load(Ordering::Acquire) {
                    service.collect();
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        };
        let socket = work.join("api-bench.sock");
        let _ = std::fs::remove_file(&socket);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let (stop_server, server_stop) = tokio::sync::watch::channel(false);
        let listener = std::os::unix::net::UnixListener::bind(&socket)
            .with_context(|| format!("cannot listen on `{}`", socket.display()))?;
        let serving = Serving {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            // The bench's own clients only.
            max_connections: usize::MAX,
            open: Default::default(),
        };
        let server = serve_unix(
            rt.handle(),
            listener,
            service.clone(),
            &serving,
            server_stop,
        )
        .with_context(|| format!("cannot serve on `{}`", socket.display()))?;
        Ok(Served {
            service,
            socket,
            stop,
            collector,
            rt,
            stop_server,
            server,
        })
    }

    /// Stops the server and the collector, then the pipeline.
    fn stop(self) {
        let _ = self.stop_server.send(true);
        let _ = self.rt.block_on(self.server);
        self.stop.store(true, Ordering::Release); // flags: stored Release, loaded Acquire
        let _ = self.collector.join();
        self.rt.shutdown_timeout(Duration::from_secs(1));
        match Arc::try_unwrap(self.service) {
            Ok(s) => s.shutdown(),
            Err(s) => s.pipeline().stop_children(),
        }
    }
}

/// The two paths measured and the requests they send; every proof is checked.
struct Bench<'a> {
    service: &'a Service,
    endpoint: Endpoint,
    porep_request: pb::SubmitProofRequest,
    winning_request: pb::SubmitProofRequest,
    circuit: AnyCircuit,
    c1: Vec<u8>,
    sector: &'a fixture::SealedSector,
    post: &'a fixture::PoStFixture,
    clients: usize,
    next_id: AtomicU64,
}

impl Bench<'_> {
    /// Warm-up, `rounds` rounds of `proofs` proofs each way, then WinningPoSt idle and behind
    /// `queued` PoRep C2 jobs.
    fn measure(&self, proofs: usize, rounds: usize, queued: usize) -> anyhow::Result<ApiFigures> {
        // Warm-up, both paths and both circuits (not measured).
        self.local(2)?;
        self.api(2)?;
        let mut c = Client::connect(&self.endpoint)?;
        self.check_winning(&self.prove(&mut c, self.winning())?)?;

        let mut figures = ApiFigures {
            local_rounds: Vec::new(),
            api_rounds: Vec::new(),
            winning_idle: Vec::new(),
            winning_loaded: Vec::new(),
            queued,
        };
        for r in 0..rounds.max(1) {
            // Alternate which path goes first.
            if r % 2 == 0 {
                figures.local_rounds.push(self.local(proofs)?);
                figures.api_rounds.push(self.api(proofs)?);
            } else {
                figures.api_rounds.push(self.api(proofs)?);
                figures.local_rounds.push(self.local(proofs)?);
            }
            eprintln!(
                "round {r}: local {:.4} s/proof, api {:.4} s/proof",
                figures.local_rounds[r], figures.api_rounds[r]
            );
        }
        for _ in 0..5 {
            let t = Instant::now();
            let proof = self.prove(&mut c, self.winning())?;
            figures.winning_idle.push(t.elapsed().as_secs_f64());
            self.check_winning(&proof)?;
        }
        for _ in 0..3 {
            let ahead: Vec<String> = (0..queued)
                .map(|_| {
                    let id = self.rid("porep");
                    c.submit(with_id(&self.porep_request, id.clone()))
                        .map(|_| id)
                })
                .collect::<Result<_, _>>()?;
            let t = Instant::now();
            let proof = self.prove(&mut c, self.winning())?;
            figures.winning_loaded.push(t.elapsed().as_secs_f64());
            self.check_winning(&proof)?;
            for id in ahead {
                let a = c.await_proof(&id, 0)?;
                self.check_porep("api (queued)", &a.proof)?;
            }
        }
        Ok(figures)
    }

    /// s/proof of `n` PoRep C2 jobs through the pipeline's own submit, `clients` in flight.
    fn local(&self, n: usize) -> anyhow::Result<f64> {
        let p = self.service.pipeline();
        let t = Instant::now();
        let mut in_flight = std::collections::VecDeque::new();
        let (mut next, mut done) = (0, 0);
        while done < n {
            while next < n && in_flight.len() < self.clients.max(1) {
                in_flight.push_back(p.submit_job_with(
                    self.circuit,
                    &self.c1,
                    JobOptions {
                        priority: 2,
                        ..Default::default()
                    },
                )?);
                next += 1;
            }
            let o = in_flight.pop_front().expect("in flight").wait()?;
            let proofs = o.result.map_err(|e| anyhow::anyhow!("local job: {e}"))?;
            self.check_porep("local", &proofs.concat())?;
            done += 1;
        }
        Ok(t.elapsed().as_secs_f64() / n as f64)
    }

    /// s/proof of `n` PoRep C2 `Prove`s over the API, from `clients` client threads.
    fn api(&self, n: usize) -> anyhow::Result<f64> {
        let t = Instant::now();
        let per_client = n.div_ceil(self.clients.max(1));
        let mut left = n;
        std::thread::scope(|s| -> anyhow::Result<()> {
            let mut threads = Vec::new();
            while left > 0 {
                let k = per_client.min(left);
                left -= k;
                let ids: Vec<String> = (0..k).map(|_| self.rid("porep")).collect();
                threads.push(s.spawn(move || -> anyhow::Result<()> {
                    let mut c = Client::connect(&self.endpoint)?;
                    for id in ids {
                        let proof = self.prove(&mut c, with_id(&self.porep_request, id))?;
                        self.check_porep("api", &proof)?;
                    }
                    Ok(())
                }));
            }
            for t in threads {
                t.join()
                    .map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
            }
            Ok(())
        })?;
        Ok(t.elapsed().as_secs_f64() / n as f64)
    }

    /// A WinningPoSt request under a new request id.
    fn winning(&self) -> pb::SubmitProofRequest {
        with_id(&self.winning_request, self.rid("winning"))
    }

    /// A unique request id (a repeated one would attach to the finished job).
    fn rid(&self, what: &str) -> String {
        format!(
            "bench-{what}-{}",
            self.next_id.fetch_add(1, Ordering::Relaxed) // Relaxed: a counter
        )
    }

    fn prove(&self, c: &mut Client, r: pb::SubmitProofRequest) -> anyhow::Result<Vec<u8>> {
        let a = c.prove(r)?;
        anyhow::ensure!(
            a.status == pb::await_proof_response::Status::Completed as i32,
            "job {} did not complete: {}",
            a.job_id,
            a.error_message
        );
        Ok(a.proof)
    }

    fn check_porep(&self, what: &str, proof: &[u8]) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.sector.verify(proof, None)?,
            "{what}: verify_seal refused the proof"
        );
        Ok(())
    }

    fn check_winning(&self, proof: &[u8]) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.post.verify(proof)?,
            "WinningPoSt: the verifier refused the proof"
        );
        Ok(())
    }
}

fn with_id(r: &pb::SubmitProofRequest, id: String) -> pb::SubmitProofRequest {
    pb::SubmitProofRequest {
        request_id: id,
        ..r.clone()
    }
}
