//! Our own GPU prover (backend `gpu`) against the CPU prover and supraseal-c2, for a machine with
//! a GPU: bit-exactness, verification and timing on one circuit shape.
//!
//! ```text
//! cargo build --release -p kernels --features cuda --example gpu_check
//! gpu_check SPEC --params FILE [--seeds N] [--par P] [--cpu K] [--iters I] [--batch B]
//!           [--pinned] [--no-overlap] [--supraseal] [--phases] [--wbits-h W[/C],...]
//!           [--gen cpu|gpu] [--gen-check] [--no-graphs] [--compare-graphs]
//!           [--consecutive N] [--finish auto|device|host] [--compare-finish] [--budget-mib M]
//!           [--beside auto|on|off] [--compare-beside]
//! gpu_check sha-chain:2  --params p16 --seeds 100 --cpu 100 --batch 8   # 100 witnesses at 2^16
//! gpu_check sha-chain:38 --params p20 --seeds 8 --cpu 8 --batch 8 --iters 10 --pinned \
//!           --supraseal --phases
//! ```
//!
//! - The SRS image is read from `--params` (written first by the fast generator, seed 1, when
//!   the file does not exist) and uploaded once ([`GpuBackend::new`]: upload time and rate, and
//!   whether two input sets fit, i.e. whether a batch's copies overlap the previous proof;
//!   `--no-overlap` keeps one set).
//! - Seeds 1..=N give N witnesses (the circuit's input differs per seed) and `r`, `s` per seed.
//!   They are proved `--batch B` at a time (one `prove_batch` call, the overlapped path); every
//!   GPU proof is verified; for the first K seeds the CPU prover proves with the same `r`, `s`
//!   and the 192 proof bytes must be equal, and each of the five sums of the same batch proved
//!   again for its sums. `--par P` synthesizes P seeds at a time in parallel.
//! - `--iters I` times I more GPU proofs of seed 1 (median and min per proof), and with
//!   `--batch B` I batches of seeds 1..=B; with `--pinned` from a page-locked copy of the
//!   assignments (as gpu-proc proves from its page-locked ring). Every timed proof must equal
//!   the bytes proved before for its seed. Printed per proof: wall time, device time (CUDA
//!   events: the proof's span alone, the batch's span divided by B in a batch) and the host
//!   CPU time of the process (`CLOCK_PROCESS_CPUTIME_ID`) against that device time.
//! - `--phases` prints the median phases of our prover (CUDA events), alone and in a batch,
//!   and the calling thread's CPU time per proof by stage (queueing, waiting on the device,
//!   combining the window sums, blinding).
//! - The front half of every proof runs as one CUDA graph launch (`GpuOptions::graphs`);
//!   `--no-graphs` launches it kernel by kernel, `--compare-graphs` times both in one run
//!   (the same proofs, byte for byte).
//! - `--finish device|host` finishes every proof on the device (the L, A, B_G1, B_G2 window
//!   chains and the blinding beside the H MSM) or on the host (`GpuOptions::device_finish`;
//!   default `auto`: on the device from 2^20 up); `--compare-finish` times the other one too
//!   (the same proofs, byte for byte), with its phases.
//! - `--beside on|off` runs the L, A, B_G1 and B_G2 MSMs beside the quotient's NTTs, or after
//!   them (`GpuOptions::msms_beside_ntts`; default `auto`: beside from 2^26 up);
//!   `--compare-beside` (with `on` or `off`) times the other one too (a second backend: where
//!   two fit the device).
//! - `--consecutive N` proves N more proofs one per call, cycling over the kept witnesses with
//!   fresh random `r` and `s` each, verifies every one, and with `--supraseal` does the same
//!   with supraseal-c2 (the regression run for the batch-addition race found at 2^23).
//! - `--supraseal` times supraseal-c2 (backend `cuda`) on the same assignments, alone and in a
//!   batch; its proofs must verify and equal ours byte for byte.
//! - `--wbits-h W[/C],...` opens the backend again with each H window size in bits (and, after a
//!   slash, each number of chunks the H points are taken in; sppark's choice without) and times
//!   single proofs (each must equal the bytes proved before).
//! - `--budget-mib M` plans the backend's device memory within M MiB
//!   (`GpuOptions::memory_budget`, the image kept for streaming): the plan line says what
//!   stays resident, what streams per proof and whether the layout is compact, and `--phases`
//!   adds the streaming copies' span.
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

/// CPU time of this process and of the calling thread, in milliseconds.
#[cfg(feature = "cuda")]
mod cpu_clock {
    use rustix::time::{clock_gettime, ClockId};

    fn read(clock: ClockId) -> f64 {
        let t = clock_gettime(clock);
        t.tv_sec as f64 * 1e3 + t.tv_nsec as f64 / 1e6
    }

    /// CPU milliseconds of the whole process so far (every thread).
    pub fn process_ms() -> f64 {
        read(ClockId::ProcessCPUTime)
    }

    /// CPU milliseconds of the calling thread so far.
    pub fn thread_ms() -> f64 {
        read(ClockId::ThreadCPUTime)
    }

    /// Nanoseconds on a CPU so far of every thread of this process, by thread id with its
    /// name (`/proc/self/task/*/schedstat`; empty where the kernel has none).
    pub fn threads_ns() -> std::collections::BTreeMap<u32, (String, u64)> {
        let mut out = std::collections::BTreeMap::new();
        let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
            return out;
        };
        for entry in dir.flatten() {
            let Some(tid) = entry
                .file_name()
                .to_str()
                .and_then(|t| t.parse::<u32>().ok())
            else {
                continue;
            };
            let path = entry.path();
            let ns = std::fs::read_to_string(path.join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok());
            let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            if let Some(ns) = ns {
                out.insert(tid, (name.trim().to_string(), ns));
            }
        }
        out
    }

    /// The threads that ran between two `threads_ns` readings, most CPU first, as
    /// "name (tid) ms" per `per` (proofs), the calling thread marked.
    pub fn threads_line(
        before: &std::collections::BTreeMap<u32, (String, u64)>,
        after: &std::collections::BTreeMap<u32, (String, u64)>,
        per: usize,
    ) -> String {
        let me = rustix::thread::gettid().as_raw_nonzero().get() as u32;
        let mut used: Vec<(f64, String)> = after
            .iter()
            .filter_map(|(tid, (name, ns))| {
                let was = before.get(tid).map_or(0, |b| b.1);
                let ms = (ns - was.min(*ns)) as f64 / 1e6 / per.max(1) as f64;
                let mark = if *tid == me { ", calling" } else { "" };
                (ms >= 0.001).then(|| (ms, format!("{name} ({tid}{mark}) {ms:.3}")))
            })
            .collect();
        used.sort_by(|a, b| b.0.total_cmp(&a.0));
        used.into_iter().map(|u| u.1).collect::<Vec<_>>().join(", ")
    }
}

#[cfg(feature = "cuda")]
mod check {
    use std::path::PathBuf;
    use std::time::Instant;

    use blstrs::Scalar;
    use ff::Field;
    use kernels::backend::cuda::{gpu_count, CudaBackend, PinnedAssignments};
    use kernels::backend::gpu::{GpuBackend, GpuOptions, Phases};
    use kernels::backend::Components;
    use kernels::circuits::CircuitSpec;
    use kernels::paramgen::{generate_parameters_seeded_on, GenDevice};
    use kernels::srs::{write_params_file, SrsImage, SrsView};
    use kernels::synth::{OwnedAssignment, VecSink};
    use kernels::{Assignment, Backend, CpuBackend, Proof};
    use rand_chacha::rand_core::SeedableRng;
    use rayon::prelude::*;

    use super::cpu_clock;

    type Res<T> = Result<T, Box<dyn std::error::Error>>;

    struct Args {
        spec: CircuitSpec,
        params: PathBuf,
        seeds: u64,
        par: usize,
        pinned: bool,
        cpu: u64,
        iters: usize,
        batch: usize,
        overlap: bool,
        supraseal: bool,
        phases: bool,
        wbits_h: Vec<(u32, Option<u32>)>,
        gen: GenDevice,
        gen_check: bool,
        graphs: bool,
        compare_graphs: bool,
        consecutive: usize,
        finish: Option<bool>,
        compare_finish: bool,
        budget: Option<u64>,
        beside: Option<bool>,
        compare_beside: bool,
    }

    fn parse_args() -> Res<Args> {
        let mut it = std::env::args().skip(1);
        let mut spec = None;
        let mut params = None;
        let (mut seeds, mut cpu, mut iters, mut supraseal, mut phases) = (3, 1, 5, false, false);
        let (mut par, mut pinned, mut batch, mut overlap) = (1, false, 1, true);
        let (mut gen, mut gen_check) = (GenDevice::Cpu, false);
        let mut wbits_h = Vec::new();
        let (mut graphs, mut compare_graphs, mut consecutive) = (true, false, 0);
        let (mut finish, mut compare_finish, mut budget) = (None, false, None);
        let (mut beside, mut compare_beside) = (None, false);
        while let Some(a) = it.next() {
            let mut value = |name: &str| it.next().ok_or_else(|| format!("`{name}` needs a value"));
            match a.as_str() {
                "--params" => params = Some(PathBuf::from(value("--params")?)),
                "--seeds" => seeds = value("--seeds")?.parse()?,
                "--cpu" => cpu = value("--cpu")?.parse()?,
                "--par" => par = value("--par")?.parse()?,
                "--pinned" => pinned = true,
                "--iters" => iters = value("--iters")?.parse()?,
                "--batch" => batch = value("--batch")?.parse()?,
                "--no-overlap" => overlap = false,
                "--supraseal" => supraseal = true,
                "--phases" => phases = true,
                "--wbits-h" => {
                    for w in value("--wbits-h")?.split(',') {
                        let (bits, chunks) = match w.trim().split_once('/') {
                            Some((b, c)) => (b.parse()?, Some(c.parse()?)),
                            None => (w.trim().parse()?, None),
                        };
                        wbits_h.push((bits, chunks));
                    }
                }
                "--gen" => gen = value("--gen")?.parse()?,
                "--gen-check" => gen_check = true,
                "--no-graphs" => graphs = false,
                "--compare-graphs" => compare_graphs = true,
                "--consecutive" => consecutive = value("--consecutive")?.parse()?,
                "--finish" => {
                    finish = match value("--finish")?.as_str() {
                        "auto" => None,
                        "device" => Some(true),
                        "host" => Some(false),
                        other => {
                            return Err(format!(
                                "`--finish` takes `auto`, `device` or `host`, not `{other}`"
                            )
                            .into())
                        }
                    }
                }
                "--compare-finish" => compare_finish = true,
                "--beside" => {
                    beside = match value("--beside")?.as_str() {
                        "auto" => None,
                        "on" => Some(true),
                        "off" => Some(false),
                        other => {
                            return Err(format!(
                                "`--beside` takes `auto`, `on` or `off`, not `{other}`"
                            )
                            .into())
                        }
                    }
                }
                "--compare-beside" => compare_beside = true,
                "--budget-mib" => budget = Some(value("--budget-mib")?.parse::<u64>()? << 20),
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
            graphs,
            compare_graphs,
            consecutive,
            finish,
            compare_finish,
            budget,
            beside,
            compare_beside,
            cpu,
            iters,
            batch: batch.max(1),
            overlap,
            supraseal,
            phases,
            wbits_h,
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

    /// Median of each phase over `phases`, on one line.
    fn phase_line(label: &str, phases: &[Phases]) -> String {
        let pick = |f: fn(&Phases) -> f64| median(&mut phases.iter().map(f).collect::<Vec<_>>());
        format!(
            "phases {label} (median ms, CUDA events): copy-in {:.2}, gathers+split {:.2}, ntt {:.2}, msm l {:.2}, a {:.2}, b_g1 {:.2}, b_g2 {:.2}, h {:.2}, final sums {:.2}, side stream {:.2}, srs streaming {:.2}; compute {:.2}, span {:.2}; host window sums {:.3}; calling thread cpu ms: issue {:.3}, wait {:.3}, finish {:.3}, blind {:.3}",
            pick(|p| p.copy_in),
            pick(|p| p.gather),
            pick(|p| p.ntt),
            pick(|p| p.msm_l),
            pick(|p| p.msm_a),
            pick(|p| p.msm_b_g1),
            pick(|p| p.msm_b_g2),
            pick(|p| p.msm_h),
            pick(|p| p.final_sums),
            pick(|p| p.side),
            pick(|p| p.stream),
            pick(|p| p.compute),
            pick(|p| p.span),
            pick(|p| p.host_sums),
            pick(|p| p.cpu_issue),
            pick(|p| p.cpu_wait),
            pick(|p| p.cpu_finish),
            pick(|p| p.cpu_blind),
        )
    }

    /// Which stage a difference comes from: the device's final sums against sppark's host
    /// reduction of the same device buckets, and that against the CPU backend's sums `cpu`.
    fn diagnose(gpu: &GpuBackend, asg: &Assignment<'_>, cpu: &Components) -> Res<String> {
        let (d, h) = gpu
            .prove_components_checked(std::slice::from_ref(asg))?
            .remove(0);
        let mut line = String::from("diagnosis (device final sums vs host reduction vs cpu):");
        for (name, dh, hc) in [
            ("h", d.h == h.h, h.h == cpu.h),
            ("l", d.l == h.l, h.l == cpu.l),
            ("a", d.a == h.a, h.a == cpu.a),
            ("b_g1", d.b_g1 == h.b_g1, h.b_g1 == cpu.b_g1),
            ("b_g2", d.b_g2 == h.b_g2, h.b_g2 == cpu.b_g2),
        ] {
            line += &format!(
                " {name}: {}{}",
                if dh { "d=h" } else { "d!=h" },
                if hc { ",h=cpu" } else { ",h!=cpu" }
            );
        }
        Ok(line)
    }

    /// Per proof, over timed calls of one shape.
    #[derive(Default)]
    struct Timing {
        wall: Vec<f64>,
        gpu: Vec<f64>,
        cpu_process: f64,
        cpu_thread: f64,
        threads: String,
        proofs: usize,
        phases: Vec<Phases>,
        mismatches: usize,
        front_graphs: usize,
        back_graphs: usize,
        graph_error: Option<String>,
    }

    impl Timing {
        fn wall_ms(&self) -> f64 {
            median(&mut self.wall.clone())
        }
        fn wall_min(&self) -> f64 {
            self.wall.iter().copied().fold(f64::INFINITY, f64::min)
        }
        fn gpu_ms(&self) -> f64 {
            median(&mut self.gpu.clone())
        }
        fn cpu_ms(&self) -> f64 {
            self.cpu_process / self.proofs.max(1) as f64
        }
        fn thread_ms(&self) -> f64 {
            self.cpu_thread / self.proofs.max(1) as f64
        }
        fn line(&self, label: &str) -> String {
            format!(
                "{label}: wall {:.2} ms/proof (min {:.2}), gpu {:.2} ms/proof (CUDA events), host cpu {:.2} ms/proof (process; calling thread {:.2}) = {:.1} % of gpu; front half as a graph in {}/{} proofs, back half in {}{}{}",
                self.wall_ms(),
                self.wall_min(),
                self.gpu_ms(),
                self.cpu_ms(),
                self.thread_ms(),
                100.0 * self.cpu_ms() / self.gpu_ms(),
                self.front_graphs,
                self.proofs,
                self.back_graphs,
                match &self.graph_error {
                    Some(e) => format!(" (graphs off: {e})"),
                    None => String::new(),
                },
                if self.threads.is_empty() {
                    String::new()
                } else {
                    format!("; cpu ms/proof by thread (the calling one also compares bytes): {}", self.threads)
                }
            )
        }
    }

    /// Times `iters` calls of `gpu.prove_batch_timed(batch)`; each proof must equal `want`.
    fn time_ours(
        gpu: &GpuBackend,
        batch: &[Assignment<'_>],
        rs: &[(Scalar, Scalar)],
        want: &[Vec<u8>],
        iters: usize,
    ) -> Res<Timing> {
        let r: Vec<Scalar> = rs.iter().map(|x| x.0).collect();
        let s: Vec<Scalar> = rs.iter().map(|x| x.1).collect();
        let mut t = Timing::default();
        let threads0 = cpu_clock::threads_ns();
        for _ in 0..iters {
            let (p0, t0, w0) = (
                cpu_clock::process_ms(),
                cpu_clock::thread_ms(),
                Instant::now(),
            );
            let (proofs, phases, times) = gpu.prove_batch_timed(batch, &r, &s)?;
            let wall = w0.elapsed().as_secs_f64() * 1e3;
            t.cpu_process += cpu_clock::process_ms() - p0;
            t.cpu_thread += cpu_clock::thread_ms() - t0;
            let n = batch.len() as f64;
            t.wall.push(wall / n);
            t.gpu.push(times.gpu_ms / n);
            t.proofs += batch.len();
            t.front_graphs += times.front_graphs as usize;
            t.back_graphs += times.back_graphs as usize;
            if times.graph_error.is_some() {
                t.graph_error = times.graph_error.clone();
            }
            t.phases.extend(phases);
            t.mismatches += proofs
                .iter()
                .zip(want)
                .filter(|(p, w)| bytes(p) != **w)
                .count();
        }
        t.threads = cpu_clock::threads_line(&threads0, &cpu_clock::threads_ns(), t.proofs);
        Ok(t)
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
        let image = std::sync::Arc::new(SrsImage::from_params_file(
            &args.params,
            spec.circuit_id(),
            false,
        )?);
        let view = SrsView::new((*image).as_ref())?;
        let lens = view.lengths();
        println!(
            "{spec}: SRS image {:.2} GB read in {:.1} s ({lens:?})",
            view.len_bytes() as f64 / 1e9,
            t.elapsed().as_secs_f64()
        );
        let options = GpuOptions {
            overlap: args.overlap,
            graphs: args.graphs,
            device_finish: args.finish,
            memory_budget: args.budget,
            msms_beside_ntts: args.beside,
            ..GpuOptions::default()
        };
        // under a budget the backend keeps the image to stream from
        let open = |options: GpuOptions| match args.budget {
            Some(_) => GpuBackend::with_image(image.clone(), options),
            None => GpuBackend::with_options(&view, options),
        };
        let gpu = open(options)?;
        let res = gpu.residency();
        if args.budget.is_some() {
            println!(
                "plan: {:.2} GB resident, {:.2} GB streamed per proof through 2 x {} MiB at {:.1} \
                 GB/s, {}, {:.2} GB planned of a {:.2} GB budget",
                res.srs_bytes as f64 / 1e9,
                res.streamed_bytes as f64 / 1e9,
                (res.stage_bytes / 2) >> 20,
                res.stream_gbps,
                if res.piece > 0 {
                    format!("compact layout, tails in pieces of {} points", res.piece)
                } else {
                    "full layout".to_string()
                },
                res.planned_bytes as f64 / 1e9,
                res.budget_bytes as f64 / 1e9
            );
        }
        println!(
            "gpu: {:.2} GB resident, scratch {:.2} GB, upload {:.0} ms ({:.1} GB/s, {}); {} input set(s) ({}), H window {} bits in {} chunk(s); proofs finished on the {}",
            res.srs_bytes as f64 / 1e9,
            res.scratch_bytes as f64 / 1e9,
            res.upload_ms,
            res.srs_bytes as f64 / 1e6 / res.upload_ms.max(1e-3),
            if res.pinned {
                "page-locked"
            } else {
                "pageable"
            },
            res.input_sets,
            if res.input_sets == 2 {
                "a batch's copies overlap the previous proof"
            } else {
                "no copy overlap"
            },
            res.h_window_bits,
            res.h_chunks,
            if res.device_finish { "device" } else { "host" },
        );
        let cpu = if args.cpu > 0 {
            Some(CpuBackend::new(image.as_ref().as_ref())?)
        } else {
            None
        };

        // Bit-exactness: every seed proved in batches of `--batch`, verified, the first K
        // compared with the CPU backend (bytes and the five sums).
        let mut ok = true;
        let (mut verified, mut equal, mut compared) = (0u64, 0u64, 0u64);
        let keep = args.batch.max(1) as u64;
        let mut kept: Vec<OwnedAssignment> = Vec::new();
        let mut reference: Vec<Vec<u8>> = Vec::new();
        let all: Vec<u64> = (1..=args.seeds).collect();
        for chunk in all.chunks(args.par.max(args.batch)) {
            let synthesized: Vec<(u64, OwnedAssignment)> = chunk
                .par_iter()
                .map(|&seed| synth(spec, seed).map(|o| (seed, o)))
                .collect::<Result<_, String>>()?;
            for group in synthesized.chunks(args.batch) {
                let asgs: Vec<Assignment<'_>> =
                    group.iter().map(|(_, o)| o.as_assignment()).collect();
                let rs: Vec<(Scalar, Scalar)> =
                    group.iter().map(|(seed, _)| randomness(*seed)).collect();
                let r: Vec<Scalar> = rs.iter().map(|x| x.0).collect();
                let s: Vec<Scalar> = rs.iter().map(|x| x.1).collect();
                let proofs = gpu.prove_batch(&asgs, &r, &s)?;
                let compare = group.iter().any(|(seed, _)| *seed <= args.cpu);
                let sums = match (&cpu, compare) {
                    (Some(_), true) => Some(gpu.prove_components_batch(&asgs)?.0),
                    _ => None,
                };
                for (i, ((seed, _), p)) in group.iter().zip(&proofs).enumerate() {
                    let seed = *seed;
                    let inputs = spec.public_inputs(seed)?;
                    let good = gpu.verify(p, &inputs)?;
                    verified += u64::from(good);
                    ok &= good;
                    let mut line = format!(
                        "seed {seed} (batch of {}): verify {}",
                        group.len(),
                        if good { "ok" } else { "FAIL" }
                    );
                    if let (Some(cpu), Some(sums), true) = (&cpu, &sums, seed <= args.cpu) {
                        let gc = sums[i].0;
                        let cc = cpu.components(&asgs[i])?;
                        let cp = cpu
                            .prove_batch(std::slice::from_ref(&asgs[i]), &[r[i]], &[s[i]])?
                            .remove(0);
                        let same = bytes(&cp) == bytes(p) && gc == cc;
                        compared += 1;
                        equal += u64::from(same);
                        ok &= same;
                        line += &format!(", cpu {}", if same { "equal" } else { "DIFFERS" });
                        if !same {
                            for (name, same) in [
                                ("proof bytes", bytes(&cp) == bytes(p)),
                                ("h", gc.h == cc.h),
                                ("l", gc.l == cc.l),
                                ("a", gc.a == cc.a),
                                ("b_g1", gc.b_g1 == cc.b_g1),
                                ("b_g2", gc.b_g2 == cc.b_g2),
                            ] {
                                line += &format!(" {name}:{}", if same { "=" } else { "differs" });
                            }
                            line += &format!("\n  {}", diagnose(&gpu, &asgs[i], &cc)?);
                        }
                    }
                    if args.seeds <= 20 || !good || seed % 10 == 0 {
                        println!("{line}");
                    }
                }
                for ((seed, _), p) in group.iter().zip(&proofs) {
                    if *seed <= keep {
                        reference.push(bytes(p));
                    }
                }
            }
            kept.extend(
                synthesized
                    .into_iter()
                    .filter(|(seed, _)| *seed <= keep)
                    .map(|(_, owned)| owned),
            );
        }
        if kept.is_empty() {
            return Err("no seed proved".into());
        }
        // The device's final reduction against sppark's host reduction of the same buckets.
        {
            let (device, host) = gpu
                .prove_components_checked(&[kept[0].as_assignment()])?
                .remove(0);
            let same = device == host;
            ok &= same;
            println!(
                "final sums (seed 1): device reduction {} sppark's host reduction of the same buckets",
                if same { "equals" } else { "DIFFERS from" }
            );
        }

        // Timing: singles of seed 1, then batches of seeds 1..=B, from page-locked copies with
        // `--pinned`.
        let pinned = if args.pinned {
            Some(PinnedAssignments::new(&kept)?)
        } else {
            None
        };
        let views: Vec<Assignment<'_>> = match &pinned {
            Some(p) => p.views(&kept),
            None => kept.iter().map(|o| o.as_assignment()).collect(),
        };
        let rs: Vec<(Scalar, Scalar)> = (1..=views.len() as u64).map(randomness).collect();
        let single = time_ours(&gpu, &views[..1], &rs[..1], &reference[..1], args.iters)?;
        ok &= single.mismatches == 0;
        if args.iters > 0 {
            println!("{}", single.line("ours, one proof per call"));
        }
        let batched = if views.len() > 1 && args.iters > 0 {
            let t = time_ours(&gpu, &views, &rs, &reference, args.iters)?;
            ok &= t.mismatches == 0;
            println!("{}", t.line(&format!("ours, batches of {}", views.len())));
            Some(t)
        } else {
            None
        };
        if single.mismatches + batched.as_ref().map_or(0, |t| t.mismatches) > 0 {
            println!("timed proofs DIFFER from the bytes proved for their seeds");
        }
        if args.phases {
            if !single.phases.is_empty() {
                println!("{}", phase_line("alone", &single.phases));
            }
            if let Some(t) = &batched {
                println!(
                    "{}",
                    phase_line(&format!("in batches of {}", views.len()), &t.phases)
                );
            }
        }

        // Consecutive proofs, one per call, fresh randomness each, every one verified.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0xc0de);
        let inputs: Vec<Vec<Scalar>> = (1..=views.len() as u64)
            .map(|seed| spec.public_inputs(seed))
            .collect::<Result<_, _>>()?;
        let consecutive = |label: &str,
                           backend: &dyn Backend,
                           verify: &dyn Fn(&Proof, &[Scalar]) -> Res<bool>,
                           rng: &mut rand_chacha::ChaCha8Rng|
         -> Res<bool> {
            let t = Instant::now();
            let mut good = 0;
            for i in 0..args.consecutive {
                let k = i % views.len();
                let (r, s) = (Scalar::random(&mut *rng), Scalar::random(&mut *rng));
                let p = backend
                    .prove_batch(std::slice::from_ref(&views[k]), &[r], &[s])?
                    .remove(0);
                if verify(&p, &inputs[k])? {
                    good += 1;
                } else {
                    println!("consecutive proof {i} (seed {}): verify FAIL", k + 1);
                }
            }
            let secs = t.elapsed().as_secs_f64();
            println!(
                "consecutive ({label}): {good}/{} verified, {secs:.1} s ({:.1} ms/proof, one per call, {} witnesses)",
                args.consecutive,
                secs * 1e3 / args.consecutive as f64,
                views.len()
            );
            Ok(good == args.consecutive)
        };
        if args.consecutive > 0 {
            let verify = |p: &Proof, x: &[Scalar]| -> Res<bool> { Ok(gpu.verify(p, x)?) };
            ok &= consecutive("ours", &gpu, &verify, &mut rng)?;
        }

        // The same proofs from a second backend with other options: timed alone and batched,
        // every proof equal to the bytes proved before.
        let compare = |other_options: GpuOptions, label: &str| -> Res<bool> {
            let other = GpuBackend::with_options(&view, other_options)?;
            let t1 = time_ours(&other, &views[..1], &rs[..1], &reference[..1], args.iters)?;
            let mut good = t1.mismatches == 0;
            println!(
                "{}",
                t1.line(&format!("ours ({label}), one proof per call"))
            );
            println!("{}", phase_line(&format!("alone, {label}"), &t1.phases));
            if views.len() > 1 {
                let tb = time_ours(&other, &views, &rs, &reference, args.iters)?;
                good &= tb.mismatches == 0;
                println!(
                    "{}",
                    tb.line(&format!("ours ({label}), batches of {}", views.len()))
                );
                println!(
                    "{}",
                    phase_line(
                        &format!("in batches of {}, {label}", views.len()),
                        &tb.phases
                    )
                );
            }
            if !good {
                println!("proofs with {label} DIFFER from the bytes proved before");
            }
            Ok(good)
        };
        if args.compare_graphs {
            let label = if args.graphs { "no graphs" } else { "graphs" };
            let other = GpuOptions {
                graphs: !args.graphs,
                ..options
            };
            ok &= compare(other, label)?;
        }
        if args.compare_finish {
            let device = !res.device_finish;
            let label = if device {
                "finished on the device"
            } else {
                "finished on the host"
            };
            let other = GpuOptions {
                device_finish: Some(device),
                ..options
            };
            ok &= compare(other, label)?;
        }
        if args.compare_beside {
            let on = match args.beside {
                Some(b) => !b,
                None => {
                    return Err("`--compare-beside` needs `--beside on` or `--beside off`".into())
                }
            };
            let label = if on {
                "MSMs beside the NTTs"
            } else {
                "MSMs after the NTTs"
            };
            let other = GpuOptions {
                msms_beside_ntts: Some(on),
                ..options
            };
            ok &= compare(other, label)?;
        }
        // Ours is done: its device memory goes back before supraseal-c2 takes its own (both
        // do not fit one device at 2^27).
        drop(gpu);

        let (mut sup, mut sup_batch, mut ratio) =
            (String::from("-"), String::from("-"), String::from("-"));
        if args.supraseal {
            let cuda = CudaBackend::open(&args.params)?;
            let inputs = spec.public_inputs(1)?;
            let (r, s) = rs[0];
            // The first call waits for supraseal's background SRS load: not timed.
            let p = cuda
                .prove_batch(std::slice::from_ref(&views[0]), &[r], &[s])?
                .remove(0);
            let good = cuda.verify(&p, &inputs)?;
            let same = bytes(&p) == reference[0];
            ok &= good && same;
            println!(
                "supraseal: verify {}, bytes {} to ours",
                if good { "ok" } else { "FAIL" },
                if same { "equal" } else { "DIFFERENT" }
            );
            let time_sup = |n: usize| -> Res<(f64, usize)> {
                let r: Vec<Scalar> = rs[..n].iter().map(|x| x.0).collect();
                let s: Vec<Scalar> = rs[..n].iter().map(|x| x.1).collect();
                let mut st = Vec::new();
                let mut differ = 0;
                for _ in 0..args.iters {
                    let t = Instant::now();
                    let v = cuda.prove_batch(&views[..n], &r, &s)?;
                    st.push(t.elapsed().as_secs_f64() * 1e3 / n as f64);
                    differ += v
                        .iter()
                        .zip(&reference)
                        .filter(|(p, w)| bytes(p) != **w)
                        .count();
                }
                Ok((median(&mut st), differ))
            };
            let (m, differ) = time_sup(1)?;
            ok &= differ == 0;
            sup = format!("{m:.1}");
            ratio = format!("{:.2}", m / single.wall_ms());
            let mut line = format!("supraseal: {m:.2} ms/proof alone");
            if let Some(t) = &batched {
                let (mb, differ_b) = time_sup(views.len())?;
                ok &= differ_b == 0;
                sup_batch = format!("{mb:.1}");
                ratio += &format!(" ({:.2} batched)", mb / t.wall_ms());
                line += &format!(", {mb:.2} ms/proof in batches of {}", views.len());
            }
            println!("{line}");
            if args.consecutive > 0 {
                let verify = |p: &Proof, x: &[Scalar]| -> Res<bool> { Ok(cuda.verify(p, x)?) };
                ok &= consecutive("supraseal", &cuda, &verify, &mut rng)?;
            }
        }

        // The H window sweep: the same proof with each window size.
        if !args.wbits_h.is_empty() {
            println!("| H window bits | chunks | msm h ms | compute ms | gpu span ms | wall ms | bytes |");
            println!("|---|---|---|---|---|---|---|");
            for &(w, chunks) in &args.wbits_h {
                let backend = open(GpuOptions {
                    h_window_bits: Some(w),
                    h_chunks: chunks,
                    ..options
                })?;
                let used = backend.residency().h_chunks;
                let t = time_ours(
                    &backend,
                    &views[..1],
                    &rs[..1],
                    &reference[..1],
                    args.iters.max(1),
                )?;
                ok &= t.mismatches == 0;
                let pick =
                    |f: fn(&Phases) -> f64| median(&mut t.phases.iter().map(f).collect::<Vec<_>>());
                println!(
                    "| {w} | {used} | {:.2} | {:.2} | {:.2} | {:.2} | {} |",
                    pick(|p| p.msm_h),
                    pick(|p| p.compute),
                    pick(|p| p.span),
                    t.wall_ms(),
                    if t.mismatches == 0 {
                        "equal"
                    } else {
                        "DIFFERENT"
                    }
                );
            }
        }

        let (b_gpu, b_wall) = match &batched {
            Some(t) => (format!("{:.1}", t.gpu_ms()), format!("{:.1}", t.wall_ms())),
            None => ("-".into(), "-".into()),
        };
        println!();
        println!("| circuit | n | seeds verified | cpu bit-exact | upload ms | gpu ms/proof alone (wall median, min; device) | batch of B: wall, device ms/proof | host cpu ms/proof (% of device) | supraseal ms/proof alone, batched | supraseal/gpu |");
        println!("|---|---|---|---|---|---|---|---|---|---|");
        println!(
            "| {spec} | {} | {verified}/{} | {equal}/{compared} | {:.0} | {:.1}, {:.1}; {:.1} | B={}: {b_wall}, {b_gpu} | {:.2} ({:.1} %) | {sup}, {sup_batch} | {ratio} |",
            views[0].a.len(),
            args.seeds,
            res.upload_ms,
            single.wall_ms(),
            single.wall_min(),
            single.gpu_ms(),
            views.len(),
            single.cpu_ms(),
            100.0 * single.cpu_ms() / single.gpu_ms(),
        );
        Ok(ok)
    }
}
