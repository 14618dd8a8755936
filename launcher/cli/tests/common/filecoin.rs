//! Filecoin parameter helpers shared by the launcher's Filecoin test binaries (the targets that
//! need the feature `filecoin`, see `required-features` in the manifest).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `target/NAME` of the checkout. The checkout is found at run time (cargo sets
/// `CARGO_MANIFEST_DIR` for tests too), so that the test binaries do not depend on where it is
/// and stay fresh in a target dir shared by several checkouts.
fn checkout_target(name: &str) -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("run by `cargo test`");
    Path::new(&manifest).join("../../target").join(name)
}

/// The Filecoin test parameter cache every test binary shares.
pub fn param_dir() -> PathBuf {
    checkout_target("filecoin-test-params")
}

/// The pre-compiled matrices cache the Filecoin test binaries share (checksummed files, written
/// atomically; a damaged one is recorded again), so each circuit is recorded once per checkout
/// rather than at every pipeline start.
pub fn r1cs_cache() -> PathBuf {
    checkout_target("filecoin-test-r1cs")
}

/// filecoin-proofs' settings are read once per process: set before any fil call. Children
/// inherit them.
pub fn settings_env() {
    kernels::filecoin::fixture::use_test_dirs(
        &param_dir(),
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("filecoin-parents"),
    )
    .unwrap();
}

/// The parameters of `kind` in the shared cache (generated on first use).
pub fn params(kind: kernels::filecoin::ProofKind) -> kernels::filecoin::ParamFiles {
    settings_env();
    kernels::filecoin::fixture::test_parameters(kind, &param_dir()).unwrap()
}
