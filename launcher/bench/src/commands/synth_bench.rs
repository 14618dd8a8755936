//! `splitprover synth-bench`: what one synthesis costs, the full path against the pre-compiled
//! one (`kernels::r1cs`), in this process: per core, and how its latency falls when the sparse
//! products get more cores.
//!
//! For each circuit: its matrices are recorded once (time, MiB, terms), both paths are compared
//! byte for byte on one witness, then each runs `--iters` times on a rayon pool of each
//! `--threads` size (the witness pass is single-threaded; the products use the pool). Printed,
//! as a Markdown table: median seconds of the full synthesis, of the pre-compiled one, of its
//! sparse products alone (the witness pass is the difference), and the speed-up. Filecoin
//! requests are made as the Filecoin bench makes them (a sector sealed in `--work-dir`).
//!
//! `--profile full|precompiled|witness` runs only that path, `--iters` times, and prints its time
//! per synthesis: a workload for `perf record` (the profiles in benchmarks/2026-12-02-h200/NOTES.md).
//! `witness` is what a witness slot's synthesis does (`Synthesis::Witness` into a packed witness,
//! no products), without the byte comparison of the two paths; `--no-matrices` records no
//! matrices either (a 32 GiB PoRep partition's do not fit a small host's memory beside it).
//!
//! Both paths synthesize through a [`Synthesizer`], as every in-process synthesis does: the full
//! one through [`Synthesizer::full`], the pre-compiled one through the matrices recorded here.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use kernels::circuits::AnyCircuit;
use kernels::job::{BuiltinRequest, Job};
use kernels::r1cs::R1cs;
use kernels::synth::{Synthesis, VecSink};
use kernels::witness::{PackedWitness, WitnessLayout};

use crate::synthesis::Synthesizer;

/// `splitprover synth-bench`.
#[derive(Debug, Args)]
pub struct SynthBenchArgs {
    /// Circuits: built-in specs (`sha-chain:38`) or Filecoin proof kinds
    /// (`porep:StackedDrg2KiBV1_1`, `post:StackedDrgWindow2KiBV1_2`, `snap:StackedDrg2KiBV1`).
    #[arg(required = true)]
    pub circuits: Vec<String>,
    /// Syntheses per path and thread count (the median is printed).
    #[arg(long, default_value_t = 3)]
    pub iters: usize,
    /// Rayon pool sizes, comma separated (1 is the per-core cost).
    #[arg(long, default_value = "1")]
    pub threads: String,
    /// Run only `full`, `precompiled` or `witness` (the witness pass into a packed witness),
    /// `--iters` times (a workload for `perf record`).
    #[arg(long, value_enum)]
    pub profile: Option<Profile>,
    /// With `--profile witness`: record no matrices (a 32 GiB PoRep partition's need more
    /// memory than a small host has); the witness is checked against a counting pass's shape
    /// and kept as field elements instead of packed.
    #[arg(long)]
    pub no_matrices: bool,
    /// Where Filecoin sectors are sealed (default: a temporary directory, removed after).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
}

/// The one path `--profile` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    /// Every linear combination built and evaluated.
    Full,
    /// The witness pass, then the pre-compiled matrices' products.
    Precompiled,
    /// The witness pass alone, packed as a witness slot's.
    Witness,
}

/// Makes the request bytes of a Filecoin circuit in a work directory (`None` in a build without
/// Filecoin support: such a circuit is refused).
pub type FilecoinRequests<'a> =
    Option<&'a dyn Fn(&AnyCircuit, &std::path::Path) -> anyhow::Result<Vec<u8>>>;

/// Runs `splitprover synth-bench`.
pub fn run(args: SynthBenchArgs, filecoin: FilecoinRequests<'_>) -> anyhow::Result<ExitCode> {
    let threads: Vec<usize> = args
        .threads
        .split(',')
        .map(|t| t.trim().parse().with_context(|| format!("--threads `{t}`")))
        .collect::<anyhow::Result<_>>()?;
    anyhow::ensure!(threads.iter().all(|&t| t > 0), "--threads: at least 1 each");
    anyhow::ensure!(
        !args.no_matrices || args.profile == Some(Profile::Witness),
        "--no-matrices goes with `--profile witness`"
    );
    let iters = args.iters.max(1);
    let work = args.work_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("splitprover-synth-bench-{}", std::process::id()))
    });
    let mut rows = Vec::new();
    for text in &args.circuits {
        let circuit: AnyCircuit = text.parse().with_context(|| format!("circuit `{text}`"))?;
        let job = open(&circuit, &work, filecoin)?;
        let witness_only = args.profile == Some(Profile::Witness);
        if witness_only && args.no_matrices {
            profile_witness(&circuit, &*job, None, iters)?;
            continue;
        }
        let t = Instant::now();
        let r1cs = Arc::new(circuit.compile()?);
        let record_s = t.elapsed().as_secs_f64();
        if !witness_only {
            kernels::job::check_compiled(&*job, &r1cs)?;
        }
        let compiled = Synthesizer::compiled(circuit, r1cs.clone());
        anyhow::ensure!(
            compiled.matrices_for(&job.circuit()).is_some(),
            "`{circuit}` opened a job of `{}`",
            job.circuit()
        );
        eprintln!(
            "{circuit}: {} constraints, matrices {} MiB, terms {:?}, {} coefficients, recorded \
             in {record_s:.2} s; {}",
            r1cs.shape().constraints,
            r1cs.bytes() >> 20,
            r1cs.nnz(),
            r1cs.coefficients(),
            if witness_only {
                "the paths not compared (witness only)"
            } else {
                "both paths give the same bytes"
            }
        );
        if witness_only {
            profile_witness(&circuit, &*job, Some(&r1cs), iters)?;
            continue;
        }
        if let Some(path) = args.profile {
            let (how, path) = match path {
                Profile::Full => (Synthesizer::full(), "full"),
                Profile::Precompiled => (compiled.clone(), "precompiled"),
                Profile::Witness => unreachable!("the witness profile returned above"),
            };
            let t = Instant::now();
            for _ in 0..iters {
                let mut sink = VecSink::with_limit(r1cs.shape());
                how.synthesize_partition(&*job, 0, &mut sink)?;
            }
            println!(
                "{circuit} {path}: {:.3} s per synthesis",
                t.elapsed().as_secs_f64() / iters as f64
            );
            continue;
        }
        for &t in &threads {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build()?;
            let (full, fast, products) =
                pool.install(|| measure(&*job, &compiled, &r1cs, iters))?;
            rows.push(format!(
                "| {circuit} | {} | {t} | {full:.3} | {fast:.3} | {:.3} | {products:.3} | {:.2}x |",
                r1cs.shape().constraints,
                fast - products,
                full / fast
            ));
        }
    }
    if args.work_dir.is_none() {
        let _ = std::fs::remove_dir_all(&work);
    }
    if !rows.is_empty() {
        println!(
            "| circuit | constraints | threads | full s | pre-compiled s | of it witness s | of \
             it products s | speed-up |\n|---|---|---|---|---|---|---|---|"
        );
        for r in rows {
            println!("{r}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn open(
    circuit: &AnyCircuit,
    work: &std::path::Path,
    filecoin: FilecoinRequests<'_>,
) -> anyhow::Result<Arc<dyn Job>> {
    let bytes = match circuit {
        AnyCircuit::Builtin(_) => BuiltinRequest {
            seed: 7,
            partitions: 1,
        }
        .to_bytes(),
        AnyCircuit::Filecoin(_) => {
            let make = filecoin.context("this build has no Filecoin support")?;
            make(circuit, work)?
        }
    };
    Ok(Arc::from(kernels::job::open(circuit, &bytes)?))
}

/// `--profile witness`: partition 0's witness pass `iters` times, packed into a witness as a
/// witness slot's is (with the matrices' layout), or without matrices (`--no-matrices`: checked
/// against a counting pass's shape, the aux values kept as field elements); prints the median.
fn profile_witness(
    circuit: &AnyCircuit,
    job: &dyn Job,
    r1cs: Option<&R1cs>,
    iters: usize,
) -> anyhow::Result<()> {
    let mut times = Vec::with_capacity(iters);
    let (shape, bits) = match r1cs {
        Some(r1cs) => {
            let layout = WitnessLayout::of(r1cs);
            for _ in 0..iters {
                let t = Instant::now();
                let packed = PackedWitness::fill(&layout, |sink| {
                    job.synthesize_partition_with(0, sink, Synthesis::Witness(r1cs.shape()))
                })?;
                times.push(t.elapsed().as_secs_f64());
                anyhow::ensure!(
                    packed.non_bits.len() == layout.non_bits(),
                    "the witness pass wrote {} non-bit values of {}",
                    packed.non_bits.len(),
                    layout.non_bits()
                );
            }
            (
                r1cs.shape(),
                format!("{} of them bits, packed", layout.bits()),
            )
        }
        None => {
            let t = Instant::now();
            let shape = circuit.shape()?;
            eprintln!(
                "{circuit}: {} constraints, {} aux (counted in {:.2} s; no matrices)",
                shape.constraints,
                shape.aux,
                t.elapsed().as_secs_f64()
            );
            for _ in 0..iters {
                let mut sink = VecSink::new();
                let t = Instant::now();
                job.synthesize_partition_with(0, &mut sink, Synthesis::Witness(shape))?;
                times.push(t.elapsed().as_secs_f64());
            }
            (shape, "kept as field elements (no matrices)".to_string())
        }
    };
    println!(
        "{circuit} witness: {:.3} s per synthesis (median of {iters}; {} aux, {bits})",
        median(times),
        shape.aux
    );
    Ok(())
}

/// Median seconds of (full, pre-compiled through `compiled`, the products of `r1cs` alone) over
/// `iters` runs; the products recomputed must equal what the pre-compiled synthesis wrote.
fn measure(
    job: &dyn Job,
    compiled: &Synthesizer,
    r1cs: &R1cs,
    iters: usize,
) -> anyhow::Result<(f64, f64, f64)> {
    let (mut full, mut fast, mut products) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..iters {
        let mut sink = VecSink::with_limit(r1cs.shape());
        let t = Instant::now();
        Synthesizer::full().synthesize_partition(job, 0, &mut sink)?;
        full.push(t.elapsed().as_secs_f64());
        let mut sink = VecSink::with_limit(r1cs.shape());
        let t = Instant::now();
        compiled.synthesize_partition(job, 0, &mut sink)?;
        fast.push(t.elapsed().as_secs_f64());
        let a = sink.finish();
        let (mut x, mut y, mut z) = (a.a.clone(), a.b.clone(), a.c.clone());
        let t = Instant::now();
        r1cs.evaluate(&a.input, &a.aux, &mut x, &mut y, &mut z)?;
        products.push(t.elapsed().as_secs_f64());
        anyhow::ensure!(
            x == a.a && y == a.b && z == a.c,
            "the products differ from the pre-compiled synthesis's"
        );
    }
    Ok((median(full), median(fast), median(products)))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
