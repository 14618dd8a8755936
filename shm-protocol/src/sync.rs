//! Atomics used by the slot state machine, switched to loom's models under `cfg(loom)`.
//!
//! Everything the state machine in [`crate::state`] touches goes through this module (tokio's
//! `src/loom/mod.rs` pattern), so `RUSTFLAGS="--cfg loom"` model-checks the real transition code.
//! The shared-memory layout ([`crate::layout`]) and the futex waits are compiled out under loom:
//! loom can check neither a second address space nor a futex, so those are tested with real
//! processes instead (`tests/multiprocess.rs`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
