//! Synthesis per circuit, the full path against the pre-compiled one (`kernels::r1cs`), in one
//! process: what one synthesis costs per core, and how its latency falls when the sparse
//! products get more cores.
//!
//! ```text
//! cargo run --release -p kernels --features filecoin --example synth_bench -- \
//!     sha-chain:38 porep:StackedDrg2KiBV1_1 --iters 5 --threads 1,4
//! ```
//!
//! For each circuit: the matrices are recorded once (time, MiB, terms), the result of both paths
//! is compared byte for byte, then each path runs `--iters` times on a rayon pool of each
//! `--threads` size (witness passes are single-threaded; the products use the pool). Printed:
//! median seconds of the full synthesis, of the pre-compiled one, of its sparse products alone
//! (so the witness pass is the difference), and the speed-up. Filecoin requests are made with
//! the test fixtures (a 2 KiB sector sealed in a temporary directory).
//!
//! `--profile full|precompiled` runs only that path, `--iters` times, and prints nothing else:
//! a workload for `perf record` (the before/after profiles in BENCHMARKS.md).

use std::time::Instant;

use kernels::circuits::AnyCircuit;
use kernels::job::{BuiltinRequest, Job};
use kernels::r1cs::R1cs;
use kernels::synth::{Synthesis, VecSink};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn job_for(circuit: &AnyCircuit, work: &std::path::Path) -> Box<dyn Job> {
    use kernels::filecoin::{fixture, ProofKind};
    match circuit.filecoin() {
        None => kernels::job::open(
            circuit,
            &BuiltinRequest {
                seed: 7,
                partitions: 1,
            }
            .to_bytes(),
        )
        .unwrap(),
        Some(kind) => {
            fixture::use_test_dirs(&work.join("params"), &work.join("parents")).unwrap();
            let bytes = match kind {
                ProofKind::PoRep(p) => {
                    fixture::seal_sector(p, &work.join("porep"), 1, 3)
                        .unwrap()
                        .c1_json
                }
                ProofKind::PoSt(p) => {
                    let seal = seal_proof_for(kind.sector_size());
                    let sectors: Vec<_> = (1..=2)
                        .map(|id| fixture::seal_sector(seal, &work.join("post"), id, id).unwrap())
                        .collect();
                    fixture::post_request(p, &sectors, fixture::randomness(5))
                        .unwrap()
                        .json
                }
                ProofKind::SnapDeals(p) => {
                    let seal = seal_proof_for(kind.sector_size());
                    let cc = fixture::seal_cc_sector(seal, &work.join("snap"), 1, 4).unwrap();
                    fixture::snap_request(p, &cc, &work.join("snap"), 5)
                        .unwrap()
                        .json
                }
            };
            kernels::job::open(circuit, &bytes).unwrap()
        }
    }
}

/// The seal proof of sectors of `bytes` (what PoSt and SnapDeals fixtures start from).
fn seal_proof_for(bytes: u64) -> kernels::filecoin::RegisteredSealProof {
    use kernels::filecoin::RegisteredSealProof as P;
    match bytes {
        2048 => P::StackedDrg2KiBV1_1,
        0x80_0000 => P::StackedDrg8MiBV1_1,
        0x2000_0000 => P::StackedDrg512MiBV1_1,
        0x8_0000_0000 => P::StackedDrg32GiBV1_1,
        _ => P::StackedDrg64GiBV1_1,
    }
}

fn time<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t = Instant::now();
    let out = f();
    (out, t.elapsed().as_secs_f64())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut circuits = Vec::new();
    let mut iters = 3usize;
    let mut threads = vec![1usize];
    let mut profile: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--iters" => iters = it.next().expect("--iters N").parse().expect("a number"),
            "--profile" => profile = Some(it.next().expect("--profile full|precompiled").clone()),
            "--threads" => {
                threads = it
                    .next()
                    .expect("--threads LIST")
                    .split(',')
                    .map(|t| t.parse().expect("a number"))
                    .collect()
            }
            spec => circuits.push(spec.parse::<AnyCircuit>().expect("a circuit spec")),
        }
    }
    if circuits.is_empty() {
        circuits.push("sha-chain:38".parse().unwrap());
    }
    let work = std::env::temp_dir().join(format!("synth-bench-{}", std::process::id()));
    let mut rows = Vec::new();
    for circuit in &circuits {
        let job = job_for(circuit, &work);
        let (r1cs, record_s) = time(|| kernels::r1cs::compile(circuit).unwrap());
        if let Some(path) = &profile {
            let how = match path.as_str() {
                "full" => Synthesis::Full,
                "precompiled" => Synthesis::Compiled(&r1cs),
                other => panic!("--profile {other}: full or precompiled"),
            };
            let (_, s) = time(|| {
                for _ in 0..iters {
                    let mut sink = VecSink::with_limit(r1cs.shape());
                    job.synthesize_partition_with(0, &mut sink, how).unwrap();
                }
            });
            eprintln!("{circuit} {path}: {:.3} s per synthesis", s / iters as f64);
            continue;
        }
        kernels::r1cs::check_job(&*job, &r1cs).unwrap();
        eprintln!(
            "{circuit}: {} constraints, matrices {} MiB, terms {:?}, {} coefficients, recorded in \
             {record_s:.2} s; both paths give the same bytes",
            r1cs.shape().constraints,
            r1cs.bytes() >> 20,
            r1cs.nnz(),
            r1cs.coefficients()
        );
        for &t in &threads {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap();
            let (full, fast, spmv) = pool.install(|| measure(&*job, &r1cs, iters));
            rows.push(format!(
                "| {circuit} | {t} | {:.3} | {:.3} | {:.3} | {:.3} | {:.2}x |",
                full,
                fast,
                fast - spmv,
                spmv,
                full / fast
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    println!("| circuit | threads | full s | pre-compiled s | of it witness s | of it products s | speed-up |");
    println!("|---|---|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
}

/// Median seconds of (full, pre-compiled, the products alone) over `iters` runs.
fn measure(job: &dyn Job, r1cs: &R1cs, iters: usize) -> (f64, f64, f64) {
    let n = r1cs.shape().n();
    let (mut full, mut fast, mut spmv) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..iters {
        let mut sink = VecSink::with_limit(r1cs.shape());
        full.push(time(|| job.synthesize_partition(0, &mut sink).unwrap()).1);
        let mut sink = VecSink::with_limit(r1cs.shape());
        fast.push(
            time(|| {
                job.synthesize_partition_with(0, &mut sink, Synthesis::Compiled(r1cs))
                    .unwrap()
            })
            .1,
        );
        let a = sink.finish();
        let (mut x, mut y, mut z) = (a.a.clone(), a.b.clone(), a.c.clone());
        spmv.push(
            time(|| {
                r1cs.evaluate(&a.input, &a.aux, &mut x, &mut y, &mut z)
                    .unwrap()
            })
            .1,
        );
        assert_eq!(
            (x.len(), x == a.a, y == a.b, z == a.c),
            (n, true, true, true)
        );
    }
    (median(full), median(fast), median(spmv))
}
