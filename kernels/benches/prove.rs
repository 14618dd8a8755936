//! CpuBackend prove time on small SHA chains (criterion). For 2^16 and 2^20 on a large machine
//! use the `cpu_prove` example instead.

use blstrs::Scalar;
use criterion::{criterion_group, criterion_main, Criterion};
use kernels::circuits::CircuitSpec;
use kernels::srs::SrsImage;
use kernels::synth::VecSink;
use kernels::{Backend, CpuBackend};

fn prove(c: &mut Criterion) {
    let mut group = c.benchmark_group("cpu_prove");
    group.sample_size(10);
    for spec in ["sha-chain:1", "sha-chain:2"] {
        let spec: CircuitSpec = spec.parse().expect("spec");
        let params = kernels::paramgen::generate_parameters_seeded(spec.circuit(None), 1, &|_| {})
            .expect("params");
        let backend =
            CpuBackend::new(SrsImage::from_parameters(&params, spec.circuit_id()).expect("image"))
                .expect("backend");
        let owned = spec
            .synthesize_into(3, VecSink::new())
            .expect("synthesis")
            .finish();
        let asg = [owned.as_assignment()];
        let (r, s) = ([Scalar::from(5u64)], [Scalar::from(7u64)]);
        group.bench_function(spec.to_string(), |b| {
            b.iter(|| backend.prove_batch(&asg, &r, &s).expect("prove"))
        });
    }
    group.finish();
}

criterion_group!(benches, prove);
criterion_main!(benches);
