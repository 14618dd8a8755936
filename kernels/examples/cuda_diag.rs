//! Where does the CUDA prover depart from the CPU prover? For a machine with a GPU.
//!
//! ```text
//! cargo build --release -p kernels --features cuda --example cuda_diag
//! cuda_diag SPEC --params FILE [--seeds 1,2,3] [--repeats 3] [--pinned] [--components]
//! ```
//!
//! For every seed: synthesizes the circuit, proves it `--repeats` times with the same `r`, `s`
//! from pageable memory (and, with `--pinned`, from one page-locked buffer, as gpu-proc proves
//! from its registered ring), verifies every proof and says whether the repeats are identical.
//!
//! With `--components`, for the first seed whose proof fails (else the first seed) the CPU
//! computes the five unblinded multi-exponentiations ([`CpuBackend::components`]) and each is
//! compared with what the CUDA prover produced, isolated by the choice of `r`, `s` and inputs:
//! - `r = s = 0`: `A = alpha + a`, `B = beta + b_g2`, `C = h + l`;
//! - `a = b = c = 0` (so the quotient is zero), `r = s = 0`: `C = l`;
//! - `r = 1`, `s = 0`: `C = b_g1 + beta + h + l`.
//!
//! Then the CPU proof for the fixed `r`, `s` is compared byte for byte with the CUDA one.
//! `--params FILE` is written first (fast generator, seed 1) when it does not exist. Exits
//! non-zero when any proof fails or any component differs.

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("error: cuda_diag needs the `cuda` feature");
    std::process::exit(2);
}

#[cfg(feature = "cuda")]
fn main() -> std::process::ExitCode {
    match diag::run() {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

#[cfg(feature = "cuda")]
mod diag {
    use std::path::PathBuf;
    use std::time::Instant;

    use blstrs::{G1Projective, G2Projective, Scalar};
    use ff::Field;
    use group::Curve;
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
        params: PathBuf,
        seeds: Vec<u64>,
        repeats: usize,
        pinned: bool,
        components: bool,
    }

    fn parse_args() -> Res<Args> {
        let mut it = std::env::args().skip(1);
        let mut spec = None;
        let mut params = None;
        let mut args_seeds = vec![1, 2, 3];
        let (mut repeats, mut pinned, mut components) = (3, false, false);
        while let Some(a) = it.next() {
            let mut value = |name: &str| it.next().ok_or_else(|| format!("`{name}` needs a value"));
            match a.as_str() {
                "--params" => params = Some(PathBuf::from(value("--params")?)),
                "--seeds" => {
                    args_seeds = value("--seeds")?
                        .split(',')
                        .map(|s| s.trim().parse::<u64>())
                        .collect::<Result<_, _>>()?
                }
                "--repeats" => repeats = value("--repeats")?.parse()?,
                "--pinned" => pinned = true,
                "--components" => components = true,
                s if !s.starts_with("--") => spec = Some(s.parse::<CircuitSpec>()?),
                other => return Err(format!("unknown argument `{other}`").into()),
            }
        }
        if args_seeds.is_empty() || repeats == 0 {
            return Err("--seeds and --repeats need at least one".into());
        }
        Ok(Args {
            spec: spec.ok_or("a circuit spec is required, e.g. sha-chain:325")?,
            params: params.ok_or("--params FILE is required")?,
            seeds: args_seeds,
            repeats,
            pinned,
            components,
        })
    }

    fn bytes(p: &Proof) -> Vec<u8> {
        let mut out = Vec::with_capacity(192);
        p.write(&mut out).expect("writing to a Vec cannot fail");
        out
    }

    fn short(b: &[u8]) -> String {
        b.iter()
            .skip(1)
            .take(6)
            .map(|x| format!("{x:02x}"))
            .collect()
    }

    /// `r`, `s` fixed by the seed.
    fn randomness(seed: u64) -> (Scalar, Scalar) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
        (Scalar::random(&mut rng), Scalar::random(&mut rng))
    }

    /// Proves `asg` `repeats` times with the same `r`, `s`; prints verification and identity.
    /// Returns whether every proof verified.
    fn repeat(
        label: &str,
        cuda: &CudaBackend,
        asg: &Assignment<'_>,
        inputs: &[Scalar],
        (r, s): (Scalar, Scalar),
        repeats: usize,
    ) -> Res<bool> {
        let mut verdicts = Vec::new();
        let mut seen: Vec<Vec<u8>> = Vec::new();
        let mut first = Vec::new();
        let mut times = Vec::new();
        for i in 0..repeats {
            let t = Instant::now();
            let p = cuda.prove_batch(std::slice::from_ref(asg), &[r], &[s])?;
            times.push(t.elapsed().as_secs_f64());
            let ok = cuda.verify(&p[0], inputs)?;
            verdicts.push(if ok { "ok" } else { "FAIL" });
            let b = bytes(&p[0]);
            if i == 0 {
                first = b.clone();
            }
            if !seen.contains(&b) {
                seen.push(b);
            }
        }
        let all_ok = verdicts.iter().all(|v| *v == "ok");
        println!(
            "{label}: verify [{}], {} distinct of {repeats} (first {}), prove {:.3}-{:.3} s",
            verdicts.join(","),
            seen.len(),
            short(&first),
            times.iter().copied().fold(f64::INFINITY, f64::min),
            times.iter().copied().fold(0.0, f64::max),
        );
        Ok(all_ok)
    }

    fn one_proof(backend: &dyn Backend, asg: &Assignment<'_>, r: Scalar, s: Scalar) -> Res<Proof> {
        let mut v = backend.prove_batch(std::slice::from_ref(asg), &[r], &[s])?;
        v.pop()
            .ok_or_else(|| Box::<dyn std::error::Error>::from("the backend returned no proof"))
    }

    fn check<T: PartialEq>(name: &str, cuda: T, cpu: T, ok: &mut bool) {
        let same = cuda == cpu;
        *ok &= same;
        println!("  {name:34} {}", if same { "equal" } else { "DIFFERS" });
    }

    fn components(
        spec: &CircuitSpec,
        args: &Args,
        cuda: &CudaBackend,
        owned: &OwnedAssignment,
        seed: u64,
    ) -> Res<bool> {
        let t = Instant::now();
        let cpu = CpuBackend::new(SrsImage::from_params_file(
            &args.params,
            spec.circuit_id(),
            false,
        )?)?;
        let srs = cpu.srs()?;
        println!(
            "components of seed {seed} (CPU SRS image read in {:.1} s)",
            t.elapsed().as_secs_f64()
        );
        let asg = owned.as_assignment();
        let t = Instant::now();
        let c = cpu.components(&asg)?;
        println!("  cpu components in {:.1} s", t.elapsed().as_secs_f64());
        let zero = Scalar::ZERO;
        let one = Scalar::ONE;
        let mut ok = true;
        let mut runs = Vec::new();
        for _ in 0..args.repeats.min(3) {
            runs.push(one_proof(cuda, &asg, zero, zero)?);
        }
        let p00 = runs[0].clone();
        let distinct = runs.iter().filter(|p| bytes(p) != bytes(&p00)).count();
        println!(
            "  cuda r=s=0 repeated {}: {} differ from the first",
            runs.len(),
            distinct
        );
        let alpha = G1Projective::from(srs.alpha_g1());
        let beta1 = G1Projective::from(srs.beta_g1());
        let beta2 = G2Projective::from(srs.beta_g2());
        check(
            "A (r=s=0) = alpha + a",
            p00.a,
            (alpha + c.a).to_affine(),
            &mut ok,
        );
        check(
            "B (r=s=0) = beta + b_g2",
            p00.b,
            (beta2 + c.b_g2).to_affine(),
            &mut ok,
        );
        check("C (r=s=0) = h + l", p00.c, (c.h + c.l).to_affine(), &mut ok);

        let zeros = vec![Scalar::ZERO; asg.a.len()];
        let mut no_abc = asg;
        no_abc.a = &zeros;
        no_abc.b = &zeros;
        no_abc.c = &zeros;
        let pz = one_proof(cuda, &no_abc, zero, zero)?;
        check("C (a=b=c=0, r=s=0) = l", pz.c, c.l.to_affine(), &mut ok);
        let h_cuda = G1Projective::from(p00.c) - G1Projective::from(pz.c);
        check(
            "h (from the two C above)",
            h_cuda.to_affine(),
            c.h.to_affine(),
            &mut ok,
        );
        let cpu_h_zero = cpu.components(&no_abc)?;
        check(
            "cpu h of a=b=c=0 is the identity",
            cpu_h_zero.h.to_affine(),
            <G1Projective as group::Group>::identity().to_affine(),
            &mut ok,
        );

        // The input part of the A and B queries, which supraseal-c2 always proves in its "tail"
        // multi-exponentiation (the aux part that is 0 or 1 goes through batch additions).
        let a_inputs: G1Projective = asg
            .input
            .iter()
            .zip(srs.a())
            .map(|(x, p)| G1Projective::from(*p) * x)
            .sum();
        let b_inputs: G1Projective = asg
            .input
            .iter()
            .enumerate()
            .filter(|(i, _)| asg.b_input_density.get(*i))
            .zip(srs.b_g1())
            .map(|((_, x), p)| G1Projective::from(*p) * x)
            .sum();
        let zero_inputs = vec![Scalar::ZERO; asg.input.len()];
        let mut no_inputs = asg;
        no_inputs.input = &zero_inputs;
        let pi = one_proof(cuda, &no_inputs, zero, zero)?;
        check(
            "A (inputs=0, r=s=0) = alpha + a - a_in",
            pi.a,
            (alpha + c.a - a_inputs).to_affine(),
            &mut ok,
        );
        let a_tail = G1Projective::from(p00.a) - G1Projective::from(pi.a);
        check(
            "A tail (inputs) = a_in",
            a_tail.to_affine(),
            a_inputs.to_affine(),
            &mut ok,
        );
        let pi1 = one_proof(cuda, &no_inputs, one, zero)?;
        let b1_no_inputs = G1Projective::from(pi1.c) - G1Projective::from(pi.c) - beta1;
        check(
            "b_g1 (inputs=0) = b_g1 - b_in",
            b1_no_inputs.to_affine(),
            (c.b_g1 - b_inputs).to_affine(),
            &mut ok,
        );

        let p10 = one_proof(cuda, &asg, one, zero)?;
        let b1_cuda = G1Projective::from(p10.c) - G1Projective::from(p00.c) - beta1;
        check(
            "b_g1 (from C with r=1 minus r=0)",
            b1_cuda.to_affine(),
            c.b_g1.to_affine(),
            &mut ok,
        );

        let rs = randomness(seed);
        let theirs = one_proof(&cpu, &asg, rs.0, rs.1)?;
        let ours = one_proof(cuda, &asg, rs.0, rs.1)?;
        check(
            "whole proof, fixed r and s",
            bytes(&ours),
            bytes(&theirs),
            &mut ok,
        );
        let inputs = spec.public_inputs(seed)?;
        println!("  cpu proof verifies: {}", cpu.verify(&theirs, &inputs)?);
        Ok(ok)
    }

    pub fn run() -> Res<bool> {
        let args = parse_args()?;
        let gpus = gpu_count()?;
        if gpus == 0 {
            return Err("no GPU: nothing to diagnose".into());
        }
        let spec = args.spec;
        let shape = spec.shape()?;
        println!(
            "circuit {spec}: {} constraints, {} inputs, {} aux, n {}, domain 2^{}; {gpus} GPU(s), {} rayon threads",
            shape.constraints,
            shape.inputs,
            shape.aux,
            shape.n(),
            shape.log_domain_size(),
            rayon::current_num_threads()
        );
        if !args.params.exists() {
            let t = Instant::now();
            let params =
                kernels::paramgen::generate_parameters_seeded(spec.circuit(None), 1, &|_| {})?;
            write_params_file(&args.params, &params)?;
            println!(
                "parameters generated and written in {:.1} s",
                t.elapsed().as_secs_f64()
            );
        }
        let t = Instant::now();
        let cuda = CudaBackend::open(&args.params)?;
        println!(
            "cuda: open {:.2} s, {:?}",
            t.elapsed().as_secs_f64(),
            cuda.lengths()
        );

        let t = Instant::now();
        let owned: Vec<OwnedAssignment> = args
            .seeds
            .par_iter()
            .map(|&seed| {
                spec.synthesize_into(seed, VecSink::with_limit(shape))
                    .map(VecSink::finish)
            })
            .collect::<Result<_, _>>()?;
        println!(
            "synthesis: {} circuits in {:.1} s",
            owned.len(),
            t.elapsed().as_secs_f64()
        );
        for (seed, o) in args.seeds.iter().zip(&owned) {
            let a = o.as_assignment();
            let ones = |v: &[Scalar]| v.par_iter().filter(|x| **x == Scalar::ONE).count();
            let zeros = |v: &[Scalar]| v.par_iter().filter(|x| bool::from(x.is_zero())).count();
            println!(
                "seed {seed}: aux {} (zero {}, one {}), A aux density {}, B input density {}, B aux density {}",
                a.aux.len(),
                zeros(a.aux),
                ones(a.aux),
                a.a_aux_density.popcount,
                a.b_input_density.popcount,
                a.b_aux_density.popcount
            );
        }

        let t = Instant::now();
        let first_inputs = spec.public_inputs(args.seeds[0])?;
        let first =
            cuda.prove_batch(&[owned[0].as_assignment()], &[Scalar::ONE], &[Scalar::ONE])?;
        println!(
            "first proof (waits for the SRS load) {:.2} s, verifies: {}",
            t.elapsed().as_secs_f64(),
            cuda.verify(&first[0], &first_inputs)?
        );

        let mut all_ok = true;
        let mut first_failing = None;
        // From pageable memory, then (with --pinned) from one page-locked buffer holding every
        // circuit back to back, as gpu-proc proves from its ring.
        let locked = args
            .pinned
            .then(|| PinnedAssignments::new(&owned))
            .transpose()?;
        let mut sets = vec![(
            "pageable",
            owned.iter().map(OwnedAssignment::as_assignment).collect(),
        )];
        if let Some(locked) = &locked {
            sets.push(("pinned  ", locked.views(&owned)));
        }
        for (label, views) in &sets {
            for ((seed, o), v) in args.seeds.iter().zip(&owned).zip(views) {
                let ok = repeat(
                    &format!("seed {seed} {label}"),
                    &cuda,
                    v,
                    &spec.public_inputs(*seed)?,
                    randomness(*seed),
                    args.repeats,
                )?;
                all_ok &= ok;
                if !ok && first_failing.is_none() {
                    first_failing = Some((*seed, o));
                }
            }
        }

        if args.components {
            let (seed, o) = first_failing.unwrap_or((args.seeds[0], &owned[0]));
            all_ok &= components(&spec, &args, &cuda, o, seed)?;
        }
        println!(
            "{}",
            if all_ok {
                "ok: every proof verified, every component equal"
            } else {
                "FAILED"
            }
        );
        Ok(all_ok)
    }
}
