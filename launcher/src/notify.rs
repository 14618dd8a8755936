//! systemd service notifications: the `sd_notify` protocol (`READY=1`, `WATCHDOG=1`,
//! `STATUS=…`, `STOPPING=1`) over the datagram socket named by `NOTIFY_SOCKET`.
//!
//! With `Type=notify` systemd starts the unit, sets `NOTIFY_SOCKET` (a path, or an abstract
//! socket name starting with `@`) and waits for `READY=1`; with `WatchdogSec=` it also sets
//! `WATCHDOG_USEC` (and `WATCHDOG_PID`) and kills the service when no `WATCHDOG=1` arrives within
//! that time. Outside systemd `NOTIFY_SOCKET` is unset and a [`Notifier`] does nothing.
//!
//! The protocol is a handful of lines over one Unix datagram, written here over std's socket
//! rather than through the `sd-notify` crate, because that crate reads the address from the
//! environment on every call: a [`Notifier`] takes it once ([`Notifier::from_env`]) or directly
//! ([`Notifier::connect`]), so tests need not change the process environment, and it keeps one
//! socket for the service's life.
//!
//! Children must not inherit the variables (systemd would ignore them with `NotifyAccess=main`,
//! but a child could mistake the watchdog for its own): use [`scrub_child_env`].
//!
//! ```no_run
//! use launcher::notify::{watchdog_interval, Notifier};
//!
//! # fn main() -> Result<(), launcher::notify::Error> {
//! let notifier = Notifier::from_env()?;
//! notifier.status("loading parameters")?;
//! notifier.ready()?;
//! if let Some(interval) = watchdog_interval()? {
//!     // ping at least every interval / 2
//!     notifier.watchdog()?;
//! #   let _ = interval;
//! }
//! notifier.stopping()?;
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::io;
use std::os::linux::net::SocketAddrExt as _;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::process::Command;
use std::time::Duration;

/// The variable holding the notification socket's address.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";
/// The variable holding the watchdog interval in microseconds.
pub const WATCHDOG_USEC: &str = "WATCHDOG_USEC";
/// The variable naming the process the watchdog interval is meant for.
pub const WATCHDOG_PID: &str = "WATCHDOG_PID";

/// Result of this module's operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A notification error. [`Error::kind`] tells which.
#[derive(Debug, thiserror::Error)]
#[error("{kind}")]
pub struct Error {
    kind: ErrorKind,
}

impl Error {
    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Error { kind }
    }
}

/// The kinds of [`Error`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The socket address cannot be used.
    #[error("invalid notification socket `{address}`: {reason}")]
    InvalidAddress {
        /// The address as given.
        address: String,
        /// Why.
        reason: String,
    },
    /// Creating the socket or sending failed.
    #[error("could not notify the service manager at `{address}`: {source}")]
    Send {
        /// The address.
        address: String,
        /// The OS error.
        source: io::Error,
    },
    /// A watchdog variable holds something that is not a number.
    #[error("invalid `{variable}` value `{value}`: expected a positive integer")]
    InvalidWatchdog {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
    },
}

/// One state change for the service manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State<'a> {
    /// Start-up is finished (`READY=1`).
    Ready,
    /// Reloading configuration (`RELOADING=1`).
    Reloading,
    /// Shutting down (`STOPPING=1`).
    Stopping,
    /// Keep-alive ping (`WATCHDOG=1`).
    Watchdog,
    /// Free-form status shown by `systemctl status` (`STATUS=…`); newlines become spaces.
    Status(&'a str),
    /// Ask for more time to start or stop (`EXTEND_TIMEOUT_USEC=…`).
    ExtendTimeout(Duration),
}

impl fmt::Display for State<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            State::Ready => f.write_str("READY=1"),
            State::Reloading => f.write_str("RELOADING=1"),
            State::Stopping => f.write_str("STOPPING=1"),
            State::Watchdog => f.write_str("WATCHDOG=1"),
            State::Status(text) => {
                f.write_str("STATUS=")?;
                for part in text.split(['\n', '\r']).enumerate() {
                    if part.0 > 0 {
                        f.write_str(" ")?;
                    }
                    f.write_str(part.1)?;
                }
                Ok(())
            }
            State::ExtendTimeout(d) => write!(f, "EXTEND_TIMEOUT_USEC={}", d.as_micros()),
        }
    }
}

/// Sends notifications to the service manager, or does nothing when there is none.
#[derive(Debug)]
pub struct Notifier {
    target: Option<Target>,
}

#[derive(Debug)]
struct Target {
    socket: UnixDatagram,
    addr: SocketAddr,
    address: String,
}

impl Notifier {
    /// A notifier for `NOTIFY_SOCKET`; disabled (every call a no-op) when it is unset or empty.
    pub fn from_env() -> Result<Notifier> {
        match std::env::var_os(NOTIFY_SOCKET) {
            Some(v) if !v.is_empty() => match v.to_str() {
                Some(s) => Notifier::connect(s),
                None => Err(ErrorKind::InvalidAddress {
                    address: v.to_string_lossy().into_owned(),
                    reason: "not valid UTF-8".to_owned(),
                }
                .into()),
            },
            _ => Ok(Notifier::disabled()),
        }
    }

    /// A notifier that does nothing.
    pub fn disabled() -> Notifier {
        Notifier { target: None }
    }

    /// A notifier for `address`: an absolute socket path, or `@name` for an abstract socket.
    pub fn connect(address: &str) -> Result<Notifier> {
        let invalid = |reason: String| -> Error {
            ErrorKind::InvalidAddress {
                address: address.to_owned(),
                reason,
            }
            .into()
        };
        let addr = if let Some(name) = address.strip_prefix('@') {
            SocketAddr::from_abstract_name(name.as_bytes()).map_err(|e| invalid(e.to_string()))?
        } else if address.starts_with('/') {
            SocketAddr::from_pathname(address).map_err(|e| invalid(e.to_string()))?
        } else {
            return Err(invalid(
                "expected an absolute path or `@` and an abstract name".to_owned(),
            ));
        };
        let socket = UnixDatagram::unbound().map_err(|source| {
            Error::from(ErrorKind::Send {
                address: address.to_owned(),
                source,
            })
        })?;
        Ok(Notifier {
            target: Some(Target {
                socket,
                addr,
                address: address.to_owned(),
            }),
        })
    }

    /// Whether notifications go anywhere.
    pub fn is_enabled(&self) -> bool {
        self.target.is_some()
    }

    /// Sends `states` in one datagram (one `KEY=VALUE` line each).
    pub fn notify(&self, states: &[State<'_>]) -> Result<()> {
        let Some(t) = &self.target else { return Ok(()) };
        let message = states
            .iter()
            .map(State::to_string)
            .collect::<Vec<_>>()
            .join("\n");
        tracing::trace!(address = %t.address, "sd_notify: {message:?}");
        t.socket
            .send_to_addr(message.as_bytes(), &t.addr)
            .map(drop)
            .map_err(|source| {
                ErrorKind::Send {
                    address: t.address.clone(),
                    source,
                }
                .into()
            })
    }

    /// `READY=1`.
    pub fn ready(&self) -> Result<()> {
        self.notify(&[State::Ready])
    }

    /// `WATCHDOG=1`.
    pub fn watchdog(&self) -> Result<()> {
        self.notify(&[State::Watchdog])
    }

    /// `STATUS=text`.
    pub fn status(&self, text: &str) -> Result<()> {
        self.notify(&[State::Status(text)])
    }

    /// `STOPPING=1`.
    pub fn stopping(&self) -> Result<()> {
        self.notify(&[State::Stopping])
    }
}

/// The watchdog interval systemd expects pings within (`WATCHDOG_USEC`), if the watchdog is on
/// and meant for this process (`WATCHDOG_PID` unset or equal to our pid). Ping at least every
/// half of it.
pub fn watchdog_interval() -> Result<Option<Duration>> {
    let usec = std::env::var(WATCHDOG_USEC).ok();
    let pid = std::env::var(WATCHDOG_PID).ok();
    watchdog_interval_from(usec.as_deref(), pid.as_deref(), std::process::id())
}

/// [`watchdog_interval`] from given variable values, for `own_pid`.
pub fn watchdog_interval_from(
    usec: Option<&str>,
    pid: Option<&str>,
    own_pid: u32,
) -> Result<Option<Duration>> {
    let Some(usec) = usec.filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let usec: u64 = match usec.trim().parse() {
        Ok(u) if u > 0 => u,
        _ => {
            return Err(ErrorKind::InvalidWatchdog {
                variable: WATCHDOG_USEC,
                value: usec.to_owned(),
            }
            .into())
        }
    };
    if let Some(pid) = pid.filter(|s| !s.is_empty()) {
        match pid.trim().parse::<u32>() {
            Ok(p) if p == own_pid => {}
            Ok(_) => return Ok(None),
            Err(_) => {
                return Err(ErrorKind::InvalidWatchdog {
                    variable: WATCHDOG_PID,
                    value: pid.to_owned(),
                }
                .into())
            }
        }
    }
    Ok(Some(Duration::from_micros(usec)))
}

/// Removes the notification and watchdog variables from a child's environment.
pub fn scrub_child_env(cmd: &mut Command) {
    for var in [NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID] {
        cmd.env_remove(var);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn unique(tag: &str) -> String {
        static N: AtomicU32 = AtomicU32::new(0);
        // Relaxed: only uniqueness of the counter value matters, no other memory is ordered by it.
        let n = N.fetch_add(1, Ordering::Relaxed);
        format!("splitprover-notify-{tag}-{}-{n}", std::process::id())
    }

    fn receive(server: &UnixDatagram) -> String {
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut buf = [0u8; 4096];
        let n = server.recv(&mut buf).unwrap();
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[test]
    fn sends_to_a_path_socket() {
        let path = std::env::temp_dir().join(unique("path"));
        let server = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::connect(path.to_str().unwrap()).unwrap();
        assert!(n.is_enabled());
        n.ready().unwrap();
        assert_eq!(receive(&server), "READY=1");
        n.status("2 jobs\nqueued").unwrap();
        assert_eq!(receive(&server), "STATUS=2 jobs queued");
        n.watchdog().unwrap();
        assert_eq!(receive(&server), "WATCHDOG=1");
        n.notify(&[
            State::Stopping,
            State::Status("bye"),
            State::ExtendTimeout(Duration::from_millis(1500)),
        ])
        .unwrap();
        assert_eq!(
            receive(&server),
            "STOPPING=1\nSTATUS=bye\nEXTEND_TIMEOUT_USEC=1500000"
        );
        n.notify(&[State::Reloading]).unwrap();
        assert_eq!(receive(&server), "RELOADING=1");
        std::fs::remove_file(&path).unwrap();
        // The manager is gone: sending is an error that names the address.
        let err = n.stopping().unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::Send { .. }), "{err}");
        assert!(err.to_string().contains(path.to_str().unwrap()), "{err}");
    }

    #[test]
    fn sends_to_an_abstract_socket() {
        let name = unique("abstract");
        let server =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
                .unwrap();
        let n = Notifier::connect(&format!("@{name}")).unwrap();
        n.stopping().unwrap();
        assert_eq!(receive(&server), "STOPPING=1");
    }

    #[test]
    fn disabled_notifier_is_a_no_op() {
        let n = Notifier::disabled();
        assert!(!n.is_enabled());
        n.ready().unwrap();
        n.watchdog().unwrap();
    }

    #[test]
    fn refuses_bad_addresses() {
        for bad in ["relative/path", "", "vsock:2:1234"] {
            let err = Notifier::connect(bad).unwrap_err();
            assert!(
                matches!(err.kind(), ErrorKind::InvalidAddress { .. }),
                "{bad:?}: {err}"
            );
        }
        let long = format!("/{}", "x".repeat(200));
        assert!(Notifier::connect(&long).is_err(), "longer than sun_path");
    }

    #[test]
    fn watchdog_interval_rules() {
        assert_eq!(watchdog_interval_from(None, None, 7).unwrap(), None);
        assert_eq!(watchdog_interval_from(Some(""), None, 7).unwrap(), None);
        assert_eq!(
            watchdog_interval_from(Some("30000000"), None, 7).unwrap(),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            watchdog_interval_from(Some("500"), Some("7"), 7).unwrap(),
            Some(Duration::from_micros(500))
        );
        assert_eq!(
            watchdog_interval_from(Some("500"), Some("8"), 7).unwrap(),
            None,
            "meant for another process"
        );
        for (usec, pid) in [("abc", None), ("0", None), ("-5", None), ("500", Some("x"))] {
            let err = watchdog_interval_from(Some(usec), pid, 7).unwrap_err();
            assert!(
                matches!(err.kind(), ErrorKind::InvalidWatchdog { .. }),
                "{usec} {pid:?}: {err}"
            );
        }
    }

    #[test]
    fn scrubs_child_environment() {
        let mut cmd = Command::new("env");
        cmd.env(NOTIFY_SOCKET, "/run/x").env(WATCHDOG_USEC, "1");
        scrub_child_env(&mut cmd);
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !text.contains("NOTIFY_SOCKET=") && !text.contains("WATCHDOG_"),
            "{text}"
        );
    }
}
