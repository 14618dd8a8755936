//! Generates the cuzk gRPC stubs (`crate::api::pb`) from `proto/cuzk/v1/proving.proto`.
//!
//! The `.proto` is compiled by protox, a protobuf compiler written in Rust, not by `protoc`: a
//! build from source needs nothing beyond cargo (no system package, no version skew between
//! developers' and CI's `protoc`), and the descriptor it produces is what prost-build would
//! get from `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    const PROTO: &str = "proto/cuzk/v1/proving.proto";
    println!("cargo:rerun-if-changed={PROTO}");
    let descriptors = protox::compile([PROTO], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
