//! Filling and reading a 1 GiB slot, against plain `memset`/`memcpy` of private memory of the
//! same size on the same machine.
//!
//! - fill: `acquire_free` + `begin` + writing every byte of a, b, c and aux (1 GiB) + `publish`
//!   (which validates) — against `write_bytes` over a 1 GiB prefaulted `Vec`.
//! - read (copy): `claim_ready` + `view` (validates, recounts bitmaps) + copying all four arrays
//!   out + `complete` — against `memcpy` from a 1 GiB `Vec` to the same destination.
//! - read (scan): as above but XOR-reducing the words in place instead of copying — against the
//!   same reduction over a `Vec`.
//!
//! Each figure is the median of `RUNS` (default 5) interleaved runs, with the best run in
//! parentheses (on a shared machine the best is the steadier measure of bandwidth). Run:
//! `cargo bench -p shm-protocol --bench slot_throughput`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use shm_protocol::{
    HugePagePolicy, Region, Ring, RingConfig, SlotCapacity, SlotLengths, SlotMeta, SlotResult,
};

const GIB: f64 = (1u64 << 30) as f64;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn gibs(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / GIB / d.as_secs_f64()
}

fn xor_words(bytes: &[u8]) -> u64 {
    // SAFETY: u64 has no invalid bit patterns; `align_to` only yields the aligned middle.
    let (head, mid, tail) = unsafe { bytes.align_to::<u64>() };
    let mut acc = [0u64; 8];
    for chunk in mid.chunks_exact(8) {
        for k in 0..8 {
            acc[k] ^= chunk[k];
        }
    }
    let rest = mid
        .chunks_exact(8)
        .remainder()
        .iter()
        .fold(0, |a, &w| a ^ w);
    acc.iter().fold(rest, |a, &w| a ^ w)
        ^ head.iter().chain(tail).fold(0u64, |a, &b| a ^ u64::from(b))
}

/// The four 256 MiB scalar arrays of a slot as byte slices.
fn as_bytes(s: &[blstrs::Scalar]) -> &[u8] {
    // SAFETY: `Scalar` is 32 plain bytes (the crate asserts size and alignment).
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("slot_throughput: bench");
        return;
    }
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    // a + b + c + aux = 4 × 8 Mi × 32 B = 1 GiB
    let caps = SlotCapacity {
        n: 8 << 20,
        inputs: 2,
        aux: 8 << 20,
    };
    let payload = (3 * caps.n + caps.aux) * 32;
    let config = RingConfig::uniform(1, caps.slot_bytes().expect("caps"));
    let t = Instant::now();
    let region = Region::create(
        "throughput-bench",
        config.region_bytes().expect("size"),
        HugePagePolicy::Auto,
    )
    .expect("region");
    println!(
        "region: {} bytes on {} (created and prefaulted in {:.2?})",
        region.len(),
        region.page_kind(),
        t.elapsed()
    );
    let ring = Ring::create(region, config).expect("ring");
    let me = std::process::id();
    let lengths = SlotLengths {
        n: caps.n,
        inputs: caps.inputs,
        aux: caps.aux,
        ..SlotLengths::default()
    };

    let mut plain = vec![0u8; payload];
    let mut dest = vec![0u8; payload];
    plain.iter_mut().step_by(4096).for_each(|b| *b = 1); // prefault
    dest.iter_mut().step_by(4096).for_each(|b| *b = 1);

    let (mut fill, mut memset, mut copy, mut memcpy, mut scan, mut plain_scan) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for run in 0..runs {
        let pattern = 0x5a ^ run as u8;
        let t = Instant::now();
        let mut w = ring.acquire_free(me, 0, None).expect("acquire");
        w.begin(SlotMeta::default(), caps).expect("begin");
        {
            let p = w.parts_mut().expect("parts");
            for s in [p.a, p.b, p.c, p.aux] {
                // SAFETY: writing bytes into the slot's own arrays; any bytes are a Scalar.
                unsafe {
                    std::ptr::write_bytes(
                        s.as_mut_ptr().cast::<u8>(),
                        pattern,
                        std::mem::size_of_val(s),
                    )
                };
            }
        }
        w.publish(lengths).expect("publish");
        fill.push(t.elapsed());

        let t = Instant::now();
        // SAFETY: `plain` is `payload` bytes.
        unsafe { std::ptr::write_bytes(black_box(plain.as_mut_ptr()), pattern, payload) };
        black_box(&plain);
        memset.push(t.elapsed());

        let t = Instant::now();
        let c = ring.claim_ready(me, None).expect("claim");
        {
            let v = c.view().expect("view");
            let mut at = 0;
            for s in [v.a(), v.b(), v.c(), v.aux()] {
                let b = as_bytes(s);
                dest[at..at + b.len()].copy_from_slice(b);
                at += b.len();
            }
        }
        black_box(&dest);
        copy.push(t.elapsed());
        assert!(
            dest.iter().step_by(1 << 20).all(|&b| b == pattern),
            "slot contents survive"
        );

        let t = Instant::now();
        dest.copy_from_slice(black_box(&plain));
        black_box(&dest);
        memcpy.push(t.elapsed());

        let t = Instant::now();
        {
            let v = c.view().expect("view");
            let x = [v.a(), v.b(), v.c(), v.aux()]
                .iter()
                .fold(0, |a, s| a ^ xor_words(as_bytes(s)));
            black_box(x);
        }
        scan.push(t.elapsed());
        c.complete(SlotResult::Proof(&[])).expect("complete");
        ring.try_take_done(me)
            .expect("take")
            .expect("done")
            .free()
            .expect("free");

        let t = Instant::now();
        black_box(xor_words(black_box(&plain)));
        plain_scan.push(t.elapsed());
    }
    let row = |name: &str, slot: &[Duration], base: &[Duration], base_name: &str| {
        let (s, b) = (median(slot.to_vec()), median(base.to_vec()));
        let (sb, bb) = (
            slot.iter().min().copied().unwrap_or(s),
            base.iter().min().copied().unwrap_or(b),
        );
        println!(
            "{name:<12} slot {:>6.2} GiB/s   {base_name:<8} {:>6.2} GiB/s   ratio {:>5.1}%   \
             (best: {:>6.2} vs {:>6.2} GiB/s, {:>5.1}%)",
            gibs(payload, s),
            gibs(payload, b),
            100.0 * b.as_secs_f64() / s.as_secs_f64(),
            gibs(payload, sb),
            gibs(payload, bb),
            100.0 * bb.as_secs_f64() / sb.as_secs_f64(),
        );
    };
    println!("1 GiB slot payload, median of {runs} runs:");
    row("fill", &fill, &memset, "memset");
    row("read (copy)", &copy, &memcpy, "memcpy");
    row("read (scan)", &scan, &plain_scan, "xor scan");
}
