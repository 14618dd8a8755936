//! Publish → claim wake latency with a sleeping consumer.
//!
//! A consumer thread sleeps in `claim_ready` (a futex wait on the READY event). The producer
//! waits 1 ms so the consumer is surely asleep, then stamps the time and publishes; the consumer
//! stamps the time when `claim_ready` returns. The difference is what a GPU process waits between
//! a synthesis being published and the proof starting. The same futex path serves processes
//! (the futex is shared, not private); threads keep the measurement free of process noise.
//!
//! Run: `cargo bench -p shm-protocol --bench wake_latency` (`SAMPLES=n` to change the count).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use shm_protocol::{
    HugePagePolicy, Region, Ring, RingConfig, SlotCapacity, SlotLengths, SlotMeta, SlotResult,
};

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("wake_latency: bench");
        return;
    }
    let samples: usize = std::env::var("SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let caps = SlotCapacity {
        n: 64,
        inputs: 2,
        aux: 64,
    };
    let config = RingConfig::uniform(4, caps.slot_bytes().expect("caps"));
    let region = Region::create(
        "wake-bench",
        config.region_bytes().expect("size"),
        HugePagePolicy::Auto,
    )
    .expect("region");
    let ring = Ring::create(region, config).expect("ring");
    let me = std::process::id();
    let base = Instant::now();
    let (tx, rx) = mpsc::channel::<u64>();
    let mut lat_ns: Vec<u64> = std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..samples {
                let c = ring
                    .claim_ready(me, Some(Duration::from_secs(10)))
                    .expect("claim");
                let woke = base.elapsed().as_nanos() as u64;
                c.complete(SlotResult::Proof(&[])).expect("complete");
                tx.send(woke).expect("send");
            }
        });
        let mut out = Vec::with_capacity(samples);
        for _ in 0..samples {
            std::thread::sleep(Duration::from_millis(1));
            let mut w = ring
                .acquire_free(me, 0, Some(Duration::from_secs(10)))
                .expect("acquire");
            w.begin(SlotMeta::default(), caps).expect("begin");
            let published = base.elapsed().as_nanos() as u64;
            w.publish(SlotLengths {
                n: 64,
                inputs: 2,
                aux: 64,
                ..SlotLengths::default()
            })
            .expect("publish");
            let woke = rx.recv().expect("recv");
            out.push(woke.saturating_sub(published));
            ring.take_next_done(me, Some(Duration::from_secs(10)))
                .expect("done")
                .free()
                .expect("free");
        }
        out
    });
    lat_ns.sort_unstable();
    let pct = |p: f64| lat_ns[((lat_ns.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0;
    println!(
        "publish→claim wake latency, sleeping consumer, {samples} samples: \
         min {:.1} µs, median {:.1} µs, p90 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        pct(0.0),
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0)
    );
}
