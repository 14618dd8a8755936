//! Helpers shared by the launcher's integration tests (each test binary uses some of them).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use launcher::pipeline::PipelineSettings;

pub mod verify;

/// Pipelines in one test binary run one at a time: the machine has two cores.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The SRS of `circuit` (seed 42), generated once per build for all the test binaries: in a
/// directory of `CARGO_TARGET_TMPDIR` named after the `splitprover` binary they test, which is
/// rebuilt whenever the generator is (the test binaries of one `cargo test` share it; another
/// build starts a new set, and sets untouched for a day go). Generated to a temporary name and
/// renamed, so a file that exists is whole. Tests read these files, never change them.
pub fn srs_for(circuit: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    static MAKING: Mutex<()> = Mutex::new(());
    let dir = DIR.get_or_init(|| {
        let bin = std::fs::metadata(env!("CARGO_BIN_EXE_splitprover")).unwrap();
        let built = bin.modified().unwrap();
        let since = built.duration_since(std::time::UNIX_EPOCH).unwrap();
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-srs");
        let d = root.join(format!("{:x}-{:x}", bin.len(), since.as_nanos()));
        std::fs::create_dir_all(&d).unwrap();
        for old in std::fs::read_dir(&root).unwrap().flatten() {
            // Another build's set, unless it is recent (a `cargo test` of another build may
            // still be running).
            let stale = old.metadata().and_then(|m| m.modified()).is_ok_and(|t| {
                t.elapsed()
                    .is_ok_and(|age| age > Duration::from_secs(24 * 3600))
            });
            if old.path() != d && stale {
                let _ = std::fs::remove_dir_all(old.path());
            }
        }
        d
    });
    let spec = circuit.parse().unwrap();
    let path = launcher::srs::cached_path(dir, &spec);
    let _making = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    if !path.is_file() {
        launcher::srs::generate(&spec, 42, &path, false).unwrap();
    }
    path
}

/// A one-circuit CPU pipeline of this build's `splitprover`: its SRS from [`srs_for`], the ring
/// in plain pages, restarts after 20 ms (at most 200 ms).
pub fn pipeline_settings(circuit: &str) -> PipelineSettings {
    let mut s = PipelineSettings::for_circuit(
        circuit.parse::<kernels::circuits::CircuitSpec>().unwrap(),
        srs_for(circuit),
    )
    .unwrap();
    s.program = PathBuf::from(env!("CARGO_BIN_EXE_splitprover"));
    s.huge_pages = shm_protocol::HugePagePolicy::Plain;
    s.restart.initial_backoff = Duration::from_millis(20);
    s.restart.max_backoff = Duration::from_millis(200);
    s
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

/// A TCP port free on 127.0.0.1 when asked (bound then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
