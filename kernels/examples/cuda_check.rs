//! CUDA prover check and timing on a built-in circuit, for a machine with a GPU: proves batches
//! with `CudaBackend` from pageable and from page-locked assignments, verifies every proof, and
//! (with `--cpu`) checks one proof bit for bit against `CpuBackend` and times it.
//!
//! ```text
//! cargo build --release -p kernels --features cuda --example cuda_check
//! cuda_check SPEC [--batches 1,4,10] [--iters 3] [--params FILE] [--cpu]
//! cuda_check sha-chain:2  --batches 1,4 --cpu      # 2^16
//! cuda_check sha-chain:38 --batches 1,4,10 --cpu   # 2^20
//! ```
//!
//! `--params FILE` reads that bellperson `.params` file, or writes it first when it does not
//! exist (seeded random parameters from the fast generator). Without it the file goes to the
//! temporary directory. Prover time is `prove_batch` alone: synthesis happens before, once.
//! Exits non-zero when there is no GPU, a proof does not verify or the backends disagree.

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("error: cuda_check needs the `cuda` feature");
    eprintln!("hint: cargo build --release -p kernels --features cuda --example cuda_check");
    std::process::exit(2);
}

#[cfg(feature = "cuda")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    check::run()
}

#[cfg(feature = "cuda")]
mod check {
    use std::path::PathBuf;
    use std::time::Instant;

    use blstrs::Scalar;
    use ff::Field;
    use kernels::backend::cuda::{gpu_count, CudaBackend, PinnedAssignments};
    use kernels::circuits::CircuitSpec;
    use kernels::srs::{write_params_file, SrsImage};
    use kernels::synth::{OwnedAssignment, VecSink};
    use kernels::{Assignment, Backend, CpuBackend, Proof};
    use rand_chacha::rand_core::SeedableRng;
    use rayon::prelude::*;

    type Res<T> = Result<T, Box<dyn std::error::Error>>;

    struct Args {
        spec: CircuitSpec,
        batches: Vec<usize>,
        iters: usize,
        params: Option<PathBuf>,
        cpu: bool,
    }

    fn parse_args() -> Res<Args> {
        let mut it = std::env::args().skip(1);
        let mut args = Args {
            spec: "sha-chain:2".parse()?,
            batches: vec![1, 4],
            iters: 3,
            params: None,
            cpu: false,
        };
        while let Some(a) = it.next() {
            let mut value = |name: &str| it.next().ok_or_else(|| format!("`{name}` needs a value"));
            match a.as_str() {
                "--batches" => {
                    args.batches = value("--batches")?
                        .split(',')
                        .map(|b| b.trim().parse::<usize>())
                        .collect::<Result<_, _>>()?
                }
                "--iters" => args.iters = value("--iters")?.parse()?,
                "--params" => args.params = Some(value("--params")?.into()),
                "--cpu" => args.cpu = true,
                spec if !spec.starts_with("--") => args.spec = spec.parse()?,
                other => return Err(format!("unknown argument `{other}`").into()),
            }
        }
        if args.batches.is_empty() || args.batches.contains(&0) || args.iters == 0 {
            return Err("batches and iters must be at least 1".into());
        }
        Ok(args)
    }

    fn randomness(n: usize, rng: &mut rand_chacha::ChaCha8Rng) -> (Vec<Scalar>, Vec<Scalar>) {
        (0..n)
            .map(|_| (Scalar::random(&mut *rng), Scalar::random(&mut *rng)))
            .unzip()
    }

    fn bytes(p: &Proof) -> Vec<u8> {
        let mut out = Vec::with_capacity(192);
        p.write(&mut out).expect("writing to a Vec cannot fail");
        out
    }

    fn median(v: &mut [f64]) -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    /// Times `iters` proofs of each batch size over `views`, verifying every proof.
    fn time_batches(
        label: &str,
        cuda: &CudaBackend,
        args: &Args,
        views: &[Assignment<'_>],
        inputs: &[Vec<Scalar>],
        rng: &mut rand_chacha::ChaCha8Rng,
    ) -> Res<()> {
        for &b in &args.batches {
            let mut times = Vec::with_capacity(args.iters);
            for _ in 0..args.iters {
                let (r, s) = randomness(b, rng);
                let t = Instant::now();
                let proofs = cuda.prove_batch(&views[..b], &r, &s)?;
                times.push(t.elapsed().as_secs_f64());
                for (i, p) in proofs.iter().enumerate() {
                    if !cuda.verify(p, &inputs[i])? {
                        return Err(format!("{label} batch {b}: proof {i} does not verify").into());
                    }
                }
            }
            let min = times.iter().copied().fold(f64::INFINITY, f64::min);
            let med = median(&mut times);
            println!(
                "{label:9} batch {b:3}: prove min {min:.3} s, median {med:.3} s, {:.4} s/proof ({} proofs verified)",
                med / b as f64,
                b * args.iters
            );
        }
        Ok(())
    }

    pub fn run() -> Res<()> {
        let args = parse_args()?;
        let gpus = gpu_count()?;
        if gpus == 0 {
            return Err("no GPU: nothing to check".into());
        }
        let spec = args.spec;
        let shape = spec.shape()?;
        let max_batch = *args.batches.iter().max().expect("batches is not empty");
        println!(
            "circuit {spec}: {} constraints, {} inputs, {} aux, domain 2^{}; {gpus} GPU(s), {} rayon threads",
            shape.constraints,
            shape.inputs,
            shape.aux,
            shape.log_domain_size(),
            rayon::current_num_threads()
        );

        let path = args.params.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("{}.params", spec.to_string().replace(':', "-")))
        });
        if !path.exists() {
            let t = Instant::now();
            let params =
                kernels::paramgen::generate_parameters_seeded(spec.circuit(None), 1, &|_| {})?;
            let t_gen = t.elapsed().as_secs_f64();
            let t = Instant::now();
            write_params_file(&path, &params)?;
            println!(
                "parameters: generated in {t_gen:.2} s, written in {:.2} s to {}",
                t.elapsed().as_secs_f64(),
                path.display()
            );
        }

        let t = Instant::now();
        let cuda = CudaBackend::open(&path)?;
        println!(
            "cuda: open {:.3} s ({:?})",
            t.elapsed().as_secs_f64(),
            cuda.lengths()
        );

        let t = Instant::now();
        let owned: Vec<OwnedAssignment> = (0..max_batch as u64)
            .into_par_iter()
            .map(|seed| {
                spec.synthesize_into(seed, VecSink::with_limit(shape))
                    .map(VecSink::finish)
            })
            .collect::<Result<_, _>>()?;
        let inputs: Vec<Vec<Scalar>> = (0..max_batch as u64)
            .map(|s| spec.public_inputs(s))
            .collect::<Result<_, _>>()?;
        println!(
            "synthesis: {max_batch} circuits in {:.2} s (parallel)",
            t.elapsed().as_secs_f64()
        );
        let views: Vec<Assignment<'_>> = owned.iter().map(OwnedAssignment::as_assignment).collect();

        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let (r0, s0) = randomness(1, &mut rng);
        let t = Instant::now();
        let first = cuda.prove_batch(&views[..1], &r0, &s0)?;
        println!(
            "cuda: first proof {:.3} s (waits for the rest of the SRS load begun at open); verifies: {}",
            t.elapsed().as_secs_f64(),
            cuda.verify(&first[0], &inputs[0])?
        );

        time_batches("pageable", &cuda, &args, &views, &inputs, &mut rng)?;

        // All circuits back to back in one buffer, page-locked once (as gpu-proc locks its ring).
        let t = Instant::now();
        let locked = PinnedAssignments::new(&owned)?;
        println!(
            "page-lock: {} MiB in {:.3} s",
            locked.len_bytes() >> 20,
            t.elapsed().as_secs_f64()
        );
        let pinned = locked.views(&owned);
        let again = cuda.prove_batch(&pinned[..1], &r0, &s0)?;
        if bytes(&again[0]) != bytes(&first[0]) {
            return Err("the proof from page-locked memory differs from the pageable one".into());
        }
        time_batches("pinned", &cuda, &args, &pinned, &inputs, &mut rng)?;

        if args.cpu {
            let t = Instant::now();
            let cpu =
                CpuBackend::new(SrsImage::from_params_file(&path, spec.circuit_id(), false)?)?;
            println!("cpu: SRS image read in {:.2} s", t.elapsed().as_secs_f64());
            let t = Instant::now();
            let theirs = cpu.prove_batch(&views[..1], &r0, &s0)?;
            let t_cpu = t.elapsed().as_secs_f64();
            let same = bytes(&theirs[0]) == bytes(&first[0]);
            println!("cpu: batch 1 prove {t_cpu:.3} s; identical to the cuda proof: {same}");
            if !same {
                return Err("cpu and cuda proofs differ".into());
            }
        }
        drop(pinned);
        drop(locked);
        println!("ok: every proof verified");
        Ok(())
    }
}
