//! Our own GPU prover (backend `gpu`) against the CPU prover and supraseal-c2, for a machine with
//! a GPU: bit-exactness, verification and timing on one circuit shape.
//!
//! ```text
//! cargo build --release -p kernels --features cuda --example gpu_check
//! gpu_check SPEC --params FILE [--seeds N] [--par P] [--cpu K] [--iters I] [--pinned]
//!           [--supraseal] [--phases] [--gen cpu|gpu] [--gen-check]
//! gpu_check sha-chain:2  --params p16 --seeds 100 --cpu 100      # 100 random witnesses at 2^16
//! gpu_check sha-chain:38 --params p20 --seeds 3 --cpu 3 --iters 10 --supraseal --phases
//! ```
//!
//! - The SRS image is read from `--params` (written first by the fast generator, seed 1, when
//!   the file does not exist) and uploaded once ([`GpuBackend::new`]: upload time and rate).
//! - Seeds 1..=N give N witnesses (the circuit's input differs per seed) and `r`, `s` per seed.
//!   Every GPU proof is verified; for the first K seeds the CPU prover proves with the same
//!   `r`, `s` and the 192 proof bytes must be equal (and each of the five sums). `--par P`
//!   synthesizes P seeds at a time in parallel (big circuits, many seeds).
//! - `--iters I` times I more GPU proofs of seed 1 (median and min per proof); with
//!   `--pinned` from a page-locked copy of the assignment (as gpu-proc proves from its
//!   page-locked ring), with `--supraseal` the same for supraseal-c2 (backend `cuda`, whose proofs must verify and equal
//!   ours byte for byte); `--phases` prints the median phase split of our prover.
//! - `--gen gpu` writes a missing `--params` with the GPU generator (default `cpu`);
//!   `--gen-check` generates the parameters on both devices (seed 1), times both and requires
//!   them equal.
//!
//! The last lines are a one-row table. Exits non-zero on any failed verification or difference.

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("error: gpu_check needs the `cuda` feature");
    std::process::exit(2);
}

#[cfg(feature = "cuda")]
fn main() -> std::process::ExitCode {
    match check::run() {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

#[cfg(feature = "cuda")]
mod check {
    use std::path::PathBuf;
    use std::time::Instant;

    use blstrs::Scalar;
    use ff::Field;
    use kernels::backend::cuda::{gpu_count, CudaBackend, PinnedAssignments};
    use kernels::backend::gpu::{GpuBackend, Phases};
    use kernels::circuits::CircuitSpec;
    use kernels::paramgen::{generate_parameters_seeded_on, GenDevice};
    use kernels::srs::{write_params_file, SrsImage, SrsView};
    use kernels::synth::{OwnedAssignment, VecSink};
    use kernels::{Backend, CpuBackend, Proof};
    use rand_chacha::rand_core::SeedableRng;
    use rayon::prelude::*;

    type Res<T> = Result<T, Box<dyn std::error::Error>>;

    struct Args {
        spec: CircuitSpec,
        params: PathBuf,
        seeds: u64,
        par: usize,
        pinned: bool,
        cpu: u64,
        iters: usize,
        supraseal: bool,
        phases: bool,
        gen: GenDevice,
        gen_check: bool,
    }

    fn parse_args() -> Res<Args> {
        let mut it = std::env::args().skip(1);
        let mut spec = None;
        let mut params = None;
        let (mut seeds, mut cpu, mut iters, mut supraseal, mut phases) = (3, 1, 5, false, false);
        let (mut par, mut pinned) = (1, false);
        let (mut gen, mut gen_check) = (GenDevice::Cpu, false);
        while let Some(a) = it.next() {
            let mut value = |name: &str| it.next().ok_or_else(|| format!("`{name}` needs a value"));
            match a.as_str() {
                "--params" => params = Some(PathBuf::from(value("--params")?)),
                "--seeds" => seeds = value("--seeds")?.parse()?,
                "--cpu" => cpu = value("--cpu")?.parse()?,
                "--par" => par = value("--par")?.parse()?,
                "--pinned" => pinned = true,
                "--iters" => iters = value("--iters")?.parse()?,
                "--supraseal" => supraseal = true,
                "--phases" => phases = true,
                "--gen" => gen = value("--gen")?.parse()?,
                "--gen-check" => gen_check = true,
                s if !s.starts_with('-') && spec.is_none() => spec = Some(s.parse()?),
                other => return Err(format!("unknown argument `{other}`").into()),
            }
        }
        Ok(Args {
            spec: spec.ok_or("a circuit spec is needed (e.g. sha-chain:38)")?,
            params: params.ok_or("`--params FILE` is needed")?,
            seeds: seeds.max(1),
            par: par.max(1),
            pinned,
            gen,
            gen_check,
            cpu,
            iters,
            supraseal,
            phases,
        })
    }

    fn bytes(p: &Proof) -> Vec<u8> {
        let mut out = Vec::with_capacity(192);
        p.write(&mut out).expect("writing to a Vec cannot fail");
        out
    }

    fn randomness(seed: u64) -> (Scalar, Scalar) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
        (Scalar::random(&mut rng), Scalar::random(&mut rng))
    }

    fn median(v: &mut [f64]) -> f64 {
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    }

    fn synth(spec: &CircuitSpec, seed: u64) -> Result<OwnedAssignment, String> {
        spec.synthesize_into(seed, VecSink::new())
            .map(|sink| sink.finish())
            .map_err(|e| format!("synthesizing seed {seed}: {e}"))
    }

    pub fn run() -> Res<bool> {
        let args = parse_args()?;
        if gpu_count()? == 0 {
            return Err("no CUDA device".into());
        }
        let spec = &args.spec;
        if args.gen_check {
            let gen = |device| -> Res<_> {
                let t = Instant::now();
                let p = generate_parameters_seeded_on(spec.circuit(None), 1, device, &|_| {})?;
                Ok((p, t.elapsed().as_secs_f64()))
            };
            let (on_gpu, gpu_s) = gen(GenDevice::Gpu)?;
            let (on_cpu, cpu_s) = gen(GenDevice::Cpu)?;
            let same = on_gpu == on_cpu;
            println!(
                "| generator | {spec} | gpu {gpu_s:.2} s | cpu {cpu_s:.2} s | cpu/gpu {:.1}x | {} |",
                cpu_s / gpu_s,
                if same { "identical" } else { "DIFFERENT" }
            );
            if !same {
                return Ok(false);
            }
        }
        if !args.params.exists() {
            let t = Instant::now();
            let params = generate_parameters_seeded_on(spec.circuit(None), 1, args.gen, &|_| {})?;
            let gen_s = t.elapsed().as_secs_f64();
            write_params_file(&args.params, &params)?;
            println!(
                "params generated on {:?} in {gen_s:.1} s, written in {:.1} s",
                args.gen,
                t.elapsed().as_secs_f64() - gen_s
            );
        }
        let t = Instant::now();
        let image = SrsImage::from_params_file(&args.params, spec.circuit_id(), false)?;
        let view = SrsView::new(image.as_ref())?;
        let lens = view.lengths();
        println!(
            "{spec}: SRS image {:.2} GB read in {:.1} s ({lens:?})",
            view.len_bytes() as f64 / 1e9,
            t.elapsed().as_secs_f64()
        );
        let gpu = GpuBackend::new(&view)?;
        let res = gpu.residency();
        println!(
            "gpu: {:.2} GB resident, scratch {:.2} GB, upload {:.0} ms ({:.1} GB/s, {})",
            res.srs_bytes as f64 / 1e9,
            res.scratch_bytes as f64 / 1e9,
            res.upload_ms,
            res.srs_bytes as f64 / 1e6 / res.upload_ms.max(1e-3),
            if res.pinned {
                "page-locked"
            } else {
                "pageable"
            }
        );
        let cpu = if args.cpu > 0 {
            Some(CpuBackend::new(&image)?)
        } else {
            None
        };

        let mut ok = true;
        let (mut verified, mut equal, mut compared) = (0u64, 0u64, 0u64);
        let mut first: Option<OwnedAssignment> = None;
        let all: Vec<u64> = (1..=args.seeds).collect();
        for chunk in all.chunks(args.par) {
            let synthesized: Vec<(u64, OwnedAssignment)> = chunk
                .par_iter()
                .map(|&seed| synth(spec, seed).map(|o| (seed, o)))
                .collect::<Result<_, String>>()?;
            for (seed, owned) in synthesized {
                let asg = owned.as_assignment();
                let inputs = spec.public_inputs(seed)?;
                let (r, s) = randomness(seed);
                let p = gpu
                    .prove_batch(std::slice::from_ref(&asg), &[r], &[s])?
                    .remove(0);
                let good = gpu.verify(&p, &inputs)?;
                verified += u64::from(good);
                ok &= good;
                let mut line = format!("seed {seed}: verify {}", if good { "ok" } else { "FAIL" });
                if let (Some(cpu), true) = (&cpu, seed <= args.cpu) {
                    let (gc, _) = gpu.prove_components(&asg)?;
                    let cc = cpu.components(&asg)?;
                    let cp = cpu
                        .prove_batch(std::slice::from_ref(&asg), &[r], &[s])?
                        .remove(0);
                    let same = bytes(&cp) == bytes(&p) && gc == cc;
                    compared += 1;
                    equal += u64::from(same);
                    ok &= same;
                    line += &format!(", cpu {}", if same { "equal" } else { "DIFFERS" });
                    if !same {
                        for (name, same) in [
                            ("h", gc.h == cc.h),
                            ("l", gc.l == cc.l),
                            ("a", gc.a == cc.a),
                            ("b_g1", gc.b_g1 == cc.b_g1),
                            ("b_g2", gc.b_g2 == cc.b_g2),
                        ] {
                            line += &format!(" {name}:{}", if same { "=" } else { "differs" });
                        }
                    }
                }
                if args.seeds <= 20 || !good || seed % 10 == 0 {
                    println!("{line}");
                }
                if seed == 1 {
                    first = Some(owned);
                }
            }
        }

        let owned = first.ok_or("no seed proved")?;
        let pinned = if args.pinned {
            Some(PinnedAssignments::new(std::slice::from_ref(&owned))?)
        } else {
            None
        };
        let asg = match &pinned {
            Some(p) => p.views(std::slice::from_ref(&owned)).remove(0),
            None => owned.as_assignment(),
        };
        let (r, s) = randomness(1);
        let mut times = Vec::new();
        let mut phases: Vec<Phases> = Vec::new();
        for _ in 0..args.iters {
            let t = Instant::now();
            let (c, ph) = gpu.prove_components(&asg)?;
            std::hint::black_box(c);
            times.push(t.elapsed().as_secs_f64() * 1e3);
            phases.push(ph);
        }
        let gpu_ms = median(&mut times.clone());
        let gpu_min = times.iter().copied().fold(f64::INFINITY, f64::min);
        if args.phases && !phases.is_empty() {
            let pick =
                |f: fn(&Phases) -> f64| median(&mut phases.iter().map(f).collect::<Vec<_>>());
            println!(
                "phases (median ms): copy-in {:.2}, ntt {:.2}, gather {:.2}, msm h {:.2}, l {:.2}, a {:.2}, b_g1 {:.2}, b_g2 {:.2}; total {:.2}",
                pick(|p| p.copy_in),
                pick(|p| p.ntt),
                pick(|p| p.gather),
                pick(|p| p.msm_h),
                pick(|p| p.msm_l),
                pick(|p| p.msm_a),
                pick(|p| p.msm_b_g1),
                pick(|p| p.msm_b_g2),
                pick(|p| p.total),
            );
        }

        let mut sup = String::from("-");
        let mut ratio = String::from("-");
        if args.supraseal {
            let cuda = CudaBackend::open(&args.params)?;
            let inputs = spec.public_inputs(1)?;
            // The first call waits for supraseal's background SRS load: not timed.
            let p = cuda
                .prove_batch(std::slice::from_ref(&asg), &[r], &[s])?
                .remove(0);
            let ours = gpu
                .prove_batch(std::slice::from_ref(&asg), &[r], &[s])?
                .remove(0);
            let good = cuda.verify(&p, &inputs)?;
            let same = bytes(&p) == bytes(&ours);
            ok &= good && same;
            println!(
                "supraseal: verify {}, bytes {} to ours",
                if good { "ok" } else { "FAIL" },
                if same { "equal" } else { "DIFFERENT" }
            );
            let mut st = Vec::new();
            for _ in 0..args.iters {
                let t = Instant::now();
                let v = cuda.prove_batch(std::slice::from_ref(&asg), &[r], &[s])?;
                std::hint::black_box(v);
                st.push(t.elapsed().as_secs_f64() * 1e3);
            }
            let m = median(&mut st);
            sup = format!("{m:.1}");
            ratio = format!("{:.2}", m / gpu_ms);
        }

        println!();
        println!("| circuit | n | seeds verified | cpu bit-exact | upload ms | gpu ms/proof (median, min) | supraseal ms/proof | supraseal/gpu |");
        println!("|---|---|---|---|---|---|---|---|");
        println!(
            "| {spec} | {} | {verified}/{} | {equal}/{compared} | {:.0} | {gpu_ms:.1}, {gpu_min:.1} | {sup} | {ratio} |",
            asg.a.len(),
            args.seeds,
            res.upload_ms,
        );
        Ok(ok)
    }
}
