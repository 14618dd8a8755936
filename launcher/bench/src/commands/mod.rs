//! The measuring subcommands of `splitprover`, one module each, with their clap arguments:
//! `bench` (and the hidden `hog`, its noisy neighbour), `report`, `synth-bench`. The binary
//! embeds the arguments in its command enum and calls the `run` functions.

pub mod bench;
pub mod report;
pub mod synth_bench;
