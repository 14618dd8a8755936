//! `splitprover demo`: the embedded default end to end. Its summary (the waterfall, the GPU
//! busy share) is rendered by `splitprover_bench`'s timeline and report, as a bench's is.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use launcher::pipeline::Pipeline;
use splitprover_bench::report::TimelineStats;
use splitprover_bench::timeline::Timeline;

use crate::cli::DemoArgs;

/// Runs the demo.
pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let spec = launcher::settings::parse_spec(&args.circuit)?;
    let settings = launcher::settings::from_args(&args.pipeline, &spec, None)?;
    let started = Instant::now();
    let pipeline = Pipeline::start(settings)?;
    pipeline.wait_ready(Duration::from_secs(120))?;
    let status = pipeline.status();
    println!(
        "splitprover demo: {} jobs of `{spec}` through the split pipeline",
        args.jobs
    );
    println!(
        "  pinning: {}   ring: {} slots of {} MiB, {}",
        status.pin_mode,
        status.ring_slots,
        status.slot_bytes >> 20,
        status.ring_pages
    );
    for c in &status.children {
        println!(
            "  {:<12} pid {:<8} cpus {:<8} {}",
            c.role,
            c.pid.map(|p| p.to_string()).unwrap_or_default(),
            c.cpus.clone().unwrap_or_default(),
            c.detail
        );
    }
    let t0 = Instant::now();
    let handles: Vec<_> = (0..args.jobs)
        .map(|i| pipeline.submit(&spec.to_string(), 1000 + i as u64, 1))
        .collect::<Result<Vec<_>, _>>()?;
    let mut ok = 0;
    for h in handles {
        let outcome = h.wait()?;
        match &outcome.result {
            Ok(proofs) => {
                ok += 1;
                println!(
                    "  job {:>3}: {} proof(s) verified in {:.2}s",
                    outcome.job_id,
                    proofs.len(),
                    outcome.elapsed.as_secs_f64()
                );
            }
            Err(e) => println!("  job {:>3}: FAILED: {e}", outcome.job_id),
        }
    }
    let wall = t0.elapsed();
    let timeline = Timeline::from_events(pipeline.take_timeline());
    pipeline.shutdown();
    println!();
    println!("{}", timeline.ascii_waterfall(72));
    let stats = TimelineStats::from_timeline(&timeline);
    println!(
        "{ok}/{} jobs proved and verified; {:.2} s/proof over {:.1}s; GPU busy {:.0}%; total {:.1}s including start-up",
        args.jobs,
        wall.as_secs_f64() / args.jobs.max(1) as f64,
        wall.as_secs_f64(),
        stats.gpu_busy_pct_of_wall.unwrap_or(0.0),
        started.elapsed().as_secs_f64()
    );
    Ok(if ok == args.jobs {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
