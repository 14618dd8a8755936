//! Helpers shared by the launcher's integration tests (each test binary uses some of them).
#![allow(dead_code)]

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

/// Pipelines in one test binary run one at a time: the machine has two cores.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `splitprover ARGS` with `env` added; returns (exit code, stdout, stderr).
pub fn cli(args: &[&str], env: &[(&str, &Path)]) -> (i32, String, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_splitprover"));
    cmd.args(args).env("SPLITPROVER_LOG", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
