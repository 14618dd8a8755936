//! Every environment variable splitprover reads, in one place.

use std::path::PathBuf;

/// Directory for generated SRS files and caches (default: `$XDG_CACHE_HOME/splitprover` or
/// `~/.cache/splitprover`).
pub const SPLITPROVER_CACHE_DIR: &str = "SPLITPROVER_CACHE_DIR";
/// Unix socket of the service; default for `splitprover run`: `$RUNTIME_DIRECTORY/splitprover.sock`
/// under systemd, `/run/splitprover/splitprover.sock` for root, else
/// `$XDG_RUNTIME_DIR/splitprover.sock` (else `/tmp/splitprover-<uid>.sock`); clients look for the
/// system one first.
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
/// The unit's runtime directory (`RuntimeDirectory=`), set by systemd: where the socket goes.
pub const RUNTIME_DIRECTORY: &str = "RUNTIME_DIRECTORY";
/// The unit's state directory (`StateDirectory=`), set by systemd: where the job journal goes.
pub const STATE_DIRECTORY: &str = "STATE_DIRECTORY";
/// A user's runtime directory (XDG base directories).
pub const XDG_RUNTIME_DIR: &str = "XDG_RUNTIME_DIR";

/// The socket of a system-wide service.
pub const SYSTEM_SOCKET: &str = "/run/splitprover/splitprover.sock";
/// The journal of a system-wide service run without systemd.
pub const SYSTEM_JOURNAL: &str = "/var/lib/splitprover/jobs.sqlite";

/// The first directory of a systemd directory variable (it may list several, `:`-separated).
fn systemd_dir(var: &str) -> Option<PathBuf> {
    let v = std::env::var_os(var)?;
    let first = v.to_str()?.split(':').next()?.to_owned();
    (!first.is_empty()).then(|| PathBuf::from(first))
}

/// Where `splitprover run` listens by default.
pub fn service_socket_path() -> PathBuf {
    if let Some(p) = std::env::var_os(SPLITPROVER_SOCKET) {
        return PathBuf::from(p);
    }
    if let Some(d) = systemd_dir(RUNTIME_DIRECTORY) {
        return d.join("splitprover.sock");
    }
    if rustix::process::getuid().is_root() {
        return PathBuf::from(SYSTEM_SOCKET);
    }
    user_socket_path()
}

/// The default journal of a service listening on `socket`: `$STATE_DIRECTORY/jobs.sqlite` under
/// systemd, `/var/lib/splitprover/jobs.sqlite` for the system socket, else `jobs.sqlite` in the
/// socket's directory.
pub fn journal_path(socket: &std::path::Path) -> PathBuf {
    journal_path_in(systemd_dir(STATE_DIRECTORY), socket)
}

/// [`journal_path`] with the unit's state directory given (`None` without systemd).
fn journal_path_in(state_dir: Option<PathBuf>, socket: &std::path::Path) -> PathBuf {
    if let Some(d) = state_dir {
        return d.join("jobs.sqlite");
    }
    // The system service run by hand; any other socket (a test's, a user's) keeps its journal
    // beside it, so two services never share one.
    if socket == std::path::Path::new(SYSTEM_SOCKET) {
        return PathBuf::from(SYSTEM_JOURNAL);
    }
    socket
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."))
        .join("jobs.sqlite")
}

fn user_socket_path() -> PathBuf {
    if let Some(d) = std::env::var_os(XDG_RUNTIME_DIR) {
        return PathBuf::from(d).join("splitprover.sock");
    }
    std::env::temp_dir().join(format!(
        "splitprover-{}.sock",
        rustix::process::getuid().as_raw()
    ))
}

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

/// The socket a client (`submit`, `status`) talks to: `SPLITPROVER_SOCKET`, else the system
/// service's if it exists, else the user's own.
pub fn socket_path() -> PathBuf {
    if let Some(p) = std::env::var_os(SPLITPROVER_SOCKET) {
        return PathBuf::from(p);
    }
    if let Some(d) = systemd_dir(RUNTIME_DIRECTORY) {
        return d.join("splitprover.sock");
    }
    let system = PathBuf::from(SYSTEM_SOCKET);
    if rustix::process::getuid().is_root() || system.exists() {
        return system;
    }
    user_socket_path()
}

/// The Filecoin parameter cache dir: `FIL_PROOFS_PARAMETER_CACHE`, else filecoin-proofs' default.
pub fn param_cache_dir() -> PathBuf {
    match std::env::var_os(FIL_PROOFS_PARAMETER_CACHE) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from("/var/tmp/filecoin-proof-parameters"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_goes_beside_any_socket_but_the_system_one() {
        let at = |socket: &str| journal_path_in(None, std::path::Path::new(socket));
        assert_eq!(at("/tmp/t1/sp.sock"), PathBuf::from("/tmp/t1/jobs.sqlite"));
        assert_eq!(at(SYSTEM_SOCKET), PathBuf::from(SYSTEM_JOURNAL));
        assert_eq!(at("sp.sock"), PathBuf::from("./jobs.sqlite"));
        // Under systemd the unit's state directory wins, whatever the socket.
        let state = Some(PathBuf::from("/var/lib/sp"));
        for socket in ["/tmp/t1/sp.sock", SYSTEM_SOCKET] {
            assert_eq!(
                journal_path_in(state.clone(), std::path::Path::new(socket)),
                PathBuf::from("/var/lib/sp/jobs.sqlite")
            );
        }
    }
}
