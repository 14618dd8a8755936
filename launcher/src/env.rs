//! Every environment variable splitprover reads, in one place.

use std::path::PathBuf;

/// Directory for generated SRS files and caches (default: `$XDG_CACHE_HOME/splitprover` or
/// `~/.cache/splitprover`).
pub const SPLITPROVER_CACHE_DIR: &str = "SPLITPROVER_CACHE_DIR";
/// Unix socket of the service (default: `$XDG_RUNTIME_DIR/splitprover.sock` or
/// `/tmp/splitprover-<uid>.sock`).
pub const SPLITPROVER_SOCKET: &str = "SPLITPROVER_SOCKET";
/// The configuration handed to a child process (JSON), set by the launcher.
pub const SPLITPROVER_CHILD_CONFIG: &str = shm_protocol::control::CHILD_CONFIG_ENV;
/// Log filter (`tracing_subscriber::EnvFilter` syntax), default `info`.
pub const SPLITPROVER_LOG: &str = "SPLITPROVER_LOG";
/// The GPUs the launcher may use (CUDA's own variable); each gpu-proc gets its one device in it.
pub const CUDA_VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";
/// filecoin-proofs' parameter cache dir (`v28-<identifier>.params`, `.vk`), which the Filecoin
/// circuits read their parameters from (default `/var/tmp/filecoin-proof-parameters`).
pub const FIL_PROOFS_PARAMETER_CACHE: &str = "FIL_PROOFS_PARAMETER_CACHE";
/// systemd's notify socket.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// The cache directory.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(SPLITPROVER_CACHE_DIR) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("splitprover");
    }
    if let Some(h) = std::env::var_os("HOME") {
        return PathBuf::from(h).join(".cache").join("splitprover");
    }
    std::env::temp_dir().join("splitprover-cache")
}

/// The service socket path.
pub fn socket_path() -> PathBuf {
    if let Some(p) = std::env::var_os(SPLITPROVER_SOCKET) {
        return PathBuf::from(p);
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR") {
        return PathBuf::from(d).join("splitprover.sock");
    }
    std::env::temp_dir().join(format!(
        "splitprover-{}.sock",
        rustix::process::getuid().as_raw()
    ))
}

/// The Filecoin parameter cache dir: `FIL_PROOFS_PARAMETER_CACHE`, else filecoin-proofs' default.
pub fn param_cache_dir() -> PathBuf {
    match std::env::var_os(FIL_PROOFS_PARAMETER_CACHE) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from("/var/tmp/filecoin-proof-parameters"),
    }
}
