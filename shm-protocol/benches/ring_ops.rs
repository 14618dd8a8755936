//! Cost of the protocol itself, uncontended: one full slot cycle (acquire → begin → publish →
//! claim → view → complete → take → free) on a tiny slot, for rings of 4 and 64 slots (the scans
//! are O(slots)). No system call happens on these paths: nobody waits, so no futex wake.
//!
//! Run: `cargo bench -p shm-protocol --bench ring_ops`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

use shm_protocol::{
    HugePagePolicy, Region, Ring, RingConfig, SlotCapacity, SlotLengths, SlotMeta, SlotResult,
};

fn cycle(c: &mut Criterion) {
    let caps = SlotCapacity {
        n: 64,
        inputs: 2,
        aux: 64,
    };
    let lengths = SlotLengths {
        n: 64,
        inputs: 2,
        aux: 64,
        ..SlotLengths::default()
    };
    let me = std::process::id();
    let mut group = c.benchmark_group("slot_cycle");
    for slots in [4u32, 64] {
        let config = RingConfig::uniform(slots, caps.slot_bytes().expect("caps"));
        let region = Region::create(
            "ops-bench",
            config.region_bytes().expect("size"),
            HugePagePolicy::Plain,
        )
        .expect("region");
        let ring = Ring::create(region, config).expect("ring");
        // hold all but one slot CLAIMED so every scan walks the whole table
        let mut held = Vec::new();
        for _ in 1..slots {
            let mut w = ring
                .try_acquire_free(me, 0)
                .expect("acquire")
                .expect("free slot");
            w.begin(SlotMeta::default(), caps).expect("begin");
            w.publish(lengths).expect("publish");
            held.push(ring.try_claim_ready(me).expect("claim").expect("ready"));
        }
        group.bench_with_input(BenchmarkId::from_parameter(slots), &ring, |b, ring| {
            b.iter(|| {
                let mut w = ring
                    .try_acquire_free(me, 0)
                    .expect("acquire")
                    .expect("free slot");
                w.begin(SlotMeta::default(), caps).expect("begin");
                w.publish(lengths).expect("publish");
                let c = ring.try_claim_ready(me).expect("claim").expect("ready");
                std::hint::black_box(c.view().expect("view").a().len());
                c.complete(SlotResult::Proof(&[0; 192])).expect("complete");
                ring.try_take_done(me)
                    .expect("take")
                    .expect("done")
                    .free()
                    .expect("free");
            })
        });
        drop(held);
    }
    group.finish();
}

criterion_group!(benches, cycle);
criterion_main!(benches);
