//! The long-lived service's lifecycle (`splitprover run`): open, start, serve, stop.
//!
//! [`Starter::open`] checks what the service is served with (the socket's group, the TLS files)
//! and opens the journal, before minutes of SRS loading; [`Starter::start`] starts the pipeline,
//! re-queues the journal's unfinished jobs, serves cuzk's gRPC API (`crate::api`) on the Unix
//! socket and on every address of `[service] listen`, Prometheus text on `metrics_listen`, and
//! tells systemd it is ready; [`Running::serve`] feeds the watchdog and collects outcomes until
//! its stop flag is set (the caller registers SIGTERM and SIGINT on [`Running::stop_flag`]) or
//! the pipeline cannot go on, then stops.
//!
//! Stopping: the listeners close at once, new submissions are refused, the pipeline drains for
//! `stop_grace` (in-flight partitions are proved), outcomes are journaled, clients still waiting
//! are told that their job stays queued for the next start, then the pipeline shuts down
//! (children stopped, cgroups removed): [`Exit::Stopped`].
//!
//! A pipeline that cannot go on (`Pipeline::fatal`: its dispatcher panicked, or a role was given
//! up) is not served on: the watchdog is no longer fed, and the service stops the same way
//! without the drain: [`Exit::Fatal`], which `splitprover run` turns into exit status 1 so that
//! systemd (`Restart=on-failure`) starts it again; the journal re-queues the accepted jobs at
//! that start.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{Limits, Service, ServiceError};
use crate::api::access::{AllowList, TlsFileError, TlsFiles};
use crate::api::server::{serve_tcp, serve_unix, ServerTask, Serving, TcpAccess};
use crate::api::Endpoint;
use crate::journal::{self, Journal, JournalError};
use crate::metrics::Metrics;
use crate::notify::Notifier;
use crate::pipeline::{Pipeline, PipelineError, PipelineSettings};

/// Everything the service needs besides its pipeline, resolved from `[service]` and the
/// config's `socket` by `crate::settings::service`.
#[derive(Clone, Debug)]
pub struct ServiceSettings {
    /// The service's Unix socket.
    pub socket: PathBuf,
    /// Its permissions.
    pub socket_mode: u32,
    /// The group it is given, by name; its members may submit.
    pub socket_group: Option<String>,
    /// Every address served: the socket first, then `[service] listen`, without repeats.
    pub endpoints: Vec<Endpoint>,
    /// The client networks TCP listeners admit.
    pub allow: AllowList,
    /// TLS on every TCP listener; `None`: plain.
    pub tls: Option<TlsFiles>,
    /// A new TCP connection must send its first bytes (and finish its handshake) within this.
    pub first_byte_timeout: Duration,
    /// `host:port` of the Prometheus endpoint.
    pub metrics_listen: Option<String>,
    /// Largest gRPC message either way.
    pub max_message_bytes: usize,
    /// Client connections at once.
    pub max_connections: usize,
    /// The job journal (SQLite).
    pub journal: PathBuf,
    /// In-flight partitions get this long to finish on a stop.
    pub stop_grace: Duration,
    /// Queued jobs and result retention.
    pub limits: Limits,
}

/// Why the service could not start, or could not stop cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// `socket_group` names no group, or it cannot be looked up.
    #[error("{0}")]
    Group(String),
    /// A TLS file cannot be read.
    #[error(transparent)]
    Tls(#[from] TlsFileError),
    /// The journal cannot be opened.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The pipeline did not start.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// The journal's jobs cannot be re-queued.
    #[error(transparent)]
    Service(#[from] ServiceError),
    /// Another service listens on the socket.
    #[error("another service is listening on `{}`", .0.display())]
    SocketTaken(PathBuf),
    /// A TCP listener's TLS settings are refused.
    #[error("cannot serve on `{addr}` (TLS settings)")]
    TlsRefused {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        source: tonic::transport::Error,
    },
    /// A socket, listener, runtime or thread that cannot be set up.
    #[error("{what}")]
    Io {
        /// What could not be done.
        what: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// An I/O error's wrapper saying what could not be done.
fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> StartError {
    let what = what.into();
    move |source| StartError::Io { what, source }
}

/// How [`Running::serve`] ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Asked to stop (the stop flag): drained and shut down.
    Stopped,
    /// The pipeline could not go on (why); accepted jobs stay in the journal for the next start.
    Fatal(String),
}

/// A service whose settings were checked and whose journal is open: what is left is the
/// pipeline ([`Starter::start`]).
pub struct Starter {
    settings: ServiceSettings,
    group: Option<(String, u32)>,
    tls: Option<tonic::transport::ServerTlsConfig>,
    journal: Journal,
}

impl Starter {
    /// Checks the socket's group and the TLS files, then opens the journal (a corrupt one is
    /// moved aside, with a warning): all before minutes of SRS loading.
    pub fn open(settings: ServiceSettings) -> Result<Starter, StartError> {
        let group = settings
            .socket_group
            .as_deref()
            .map(|g| group_id(g).map(|id| (g.to_owned(), id)))
            .transpose()?;
        let tls = settings
            .tls
            .as_ref()
            .map(|t| t.server(settings.first_byte_timeout))
            .transpose()?;
        let journal = Journal::open(&settings.journal)?;
        for old in journal::set_aside(&settings.journal) {
            tracing::warn!(
                "a corrupt job journal was moved aside to `{}`: its jobs were not re-queued",
                old.display()
            );
        }
        Ok(Starter {
            settings,
            group,
            tls,
            journal,
        })
    }

    /// Starts the pipeline, re-queues the journal's unfinished jobs, serves the API on every
    /// endpoint (and the metrics), and tells systemd the service is ready.
    pub fn start(self, pipeline: PipelineSettings) -> Result<Running, StartError> {
        let Starter {
            settings,
            group,
            tls,
            journal,
        } = self;
        let pipeline = Pipeline::start(pipeline)?;
        pipeline.wait_ready(Duration::from_secs(600))?;
        let limits = settings.limits.clone();
        let service = Arc::new(Service::new(pipeline, journal, limits, Metrics::new()));
        let requeued = service.requeue()?;
        let last_id = service.last_id()?;
        tracing::info!(journal = %settings.journal.display(), requeued, last_id, "job journal open");

        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("api")
            .enable_all()
            .build()
            .map_err(io("cannot start the API runtime"))?;
        let (stop_servers, servers_stop) = watch::channel(false);
        let access = TcpAccess {
            allow: settings.allow.clone(),
            tls,
            first_byte_timeout: settings.first_byte_timeout,
        };
        let mut running = Running {
            settings,
            service,
            rt,
            servers: Vec::new(),
            stop_servers,
            unix_paths: Vec::new(),
            notifier: Notifier::from_env().unwrap_or_else(|e| {
                tracing::warn!("systemd notify unavailable: {e}");
                Notifier::disabled()
            }),
            stop: Arc::new(AtomicBool::new(false)),
        };
        running.listen(
            &access,
            group.as_ref().map(|(n, id)| (n.as_str(), *id)),
            &servers_stop,
        )?;
        running.serve_metrics(servers_stop)?;
        running.ready(requeued);
        Ok(running)
    }
}

/// A started service: the pipeline running, the API served.
pub struct Running {
    settings: ServiceSettings,
    service: Arc<Service>,
    rt: tokio::runtime::Runtime,
    servers: Vec<ServerTask>,
    stop_servers: watch::Sender<bool>,
    unix_paths: Vec<PathBuf>,
    notifier: Notifier,
    stop: Arc<AtomicBool>,
}

impl Running {
    /// The flag that stops [`serve`](Self::serve) once set (by a signal handler: SIGTERM,
    /// SIGINT). Stored Release (or by signal-hook), loaded Acquire.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// The service served.
    pub fn service(&self) -> &Arc<Service> {
        &self.service
    }

    /// Serves every endpoint (the Unix ones bound with `mode` and `group`).
    fn listen(
        &mut self,
        access: &TcpAccess,
        group: Option<(&str, u32)>,
        stop: &watch::Receiver<bool>,
    ) -> Result<(), StartError> {
        let serving = Serving {
            max_message_bytes: self.settings.max_message_bytes,
            max_connections: self.settings.max_connections.max(1),
            open: Arc::new(AtomicUsize::new(0)),
        };
        for endpoint in &self.settings.endpoints {
            let (service, stop) = (self.service.clone(), stop.clone());
            let server = match endpoint {
                Endpoint::Unix(path) => {
                    let listener = bind(path, self.settings.socket_mode, group)?;
                    self.unix_paths.push(path.clone());
                    serve_unix(self.rt.handle(), listener, service, &serving, stop)
                        .map_err(io(format!("cannot serve on `{}`", path.display())))?
                }
                Endpoint::Tcp(addr) => {
                    let listener = self
                        .rt
                        .block_on(tokio::net::TcpListener::bind(addr.as_str()))
                        .map_err(io(format!("cannot listen on `{addr}`")))?;
                    serve_tcp(self.rt.handle(), listener, service, &serving, access, stop).map_err(
                        |source| StartError::TlsRefused {
                            addr: addr.clone(),
                            source,
                        },
                    )?
                }
            };
            match endpoint {
                Endpoint::Tcp(_) => tracing::info!(
                    %endpoint,
                    allow = %access.allow,
                    tls = access.tls.is_some(),
                    "serving the cuzk API"
                ),
                Endpoint::Unix(_) => tracing::info!(%endpoint, "serving the cuzk API"),
            }
            self.servers.push(server);
        }
        Ok(())
    }

    /// Serves the Prometheus text on `metrics_listen`, if set.
    fn serve_metrics(&self, stop: watch::Receiver<bool>) -> Result<(), StartError> {
        let Some(addr) = &self.settings.metrics_listen else {
            return Ok(());
        };
        let listener = self
            .rt
            .block_on(tokio::net::TcpListener::bind(addr.as_str()))
            .map_err(io(format!("cannot listen on `{addr}` (metrics_listen)")))?;
        let weak = Arc::downgrade(&self.service);
        let render = Arc::new(move || match weak.upgrade() {
            Some(s) => s.metrics().render(&s.status(), s.uptime()),
            None => String::new(),
        });
        self.rt
            .spawn(crate::metrics::serve_http(listener, render, stop));
        tracing::info!(%addr, "serving Prometheus metrics at /metrics");
        Ok(())
    }

    /// Tells systemd (and the log) that the service is ready.
    fn ready(&self, requeued: usize) {
        let status = self.service.pipeline().status();
        let _ = self.notifier.ready();
        let listening: Vec<String> = self
            .settings
            .endpoints
            .iter()
            .map(|e| e.to_string())
            .collect();
        let _ = self.notifier.status(&format!(
            "serving on {}; pinning {}; ring {}; {requeued} jobs re-queued",
            listening.join(", "),
            status.pin_mode,
            status.ring_pages
        ));
        tracing::info!(socket = %self.settings.socket.display(), "service ready");
    }

    /// Serves until the stop flag is set or the pipeline cannot go on, then stops (see the
    /// module's documentation).
    pub fn serve(self) -> Result<Exit, StartError> {
        // The watchdog holds the service weakly, so the pipeline can be shut down on stop.
        let watchdog = match crate::notify::watchdog_interval() {
            Ok(Some(interval)) => {
                let (weak, stop) = (Arc::downgrade(&self.service), self.stop.clone());
                let notifier = Notifier::from_env().unwrap_or_else(|_| Notifier::disabled());
                Some(thread::spawn(move || {
                    watchdog_loop(weak, &stop, &notifier, interval)
                }))
            }
            _ => None,
        };
        let collector_stop = Arc::new(AtomicBool::new(false));
        let collector = {
            let (service, stop) = (self.service.clone(), collector_stop.clone());
            thread::Builder::new()
                .name("collector".into())
                .spawn(move || collector_loop(&service, &stop))
                .map_err(io("cannot start the collector thread"))?
        };
        // Served until the stop flag, or until the pipeline cannot go on.
        let fatal = loop {
            // Acquire: pairs with signal-hook's store of the flag (a plain flag).
            if self.stop.load(Ordering::Acquire) {
                break None;
            }
            if let Some(why) = self.service.pipeline().fatal() {
                break Some(why);
            }
            thread::sleep(Duration::from_millis(50));
        };
        self.stop(fatal, watchdog, (collector, collector_stop))
    }

    /// The stop: listeners closed, the drain (unless `fatal`), outcomes journaled, waiters
    /// answered, the pipeline shut down.
    fn stop(
        self,
        fatal: Option<String>,
        watchdog: Option<thread::JoinHandle<()>>,
        (collector, collector_stop): (thread::JoinHandle<()>, Arc<AtomicBool>),
    ) -> Result<Exit, StartError> {
        let Running {
            settings,
            service,
            rt,
            servers,
            stop_servers,
            unix_paths,
            notifier,
            stop,
        } = self;
        let grace = settings.stop_grace;
        match &fatal {
            None => tracing::info!(
                grace_s = grace.as_secs(),
                "stopping: no new requests; in-flight partitions finish"
            ),
            Some(why) => {
                tracing::error!(
                    "the pipeline cannot go on: {why}; stopping with an error so that the \
                     service is restarted (accepted jobs stay in the journal and run after the \
                     restart)"
                );
                // The watchdog thread ends on it (and had stopped pinging at the fatal status).
                stop.store(true, Ordering::Release); // Release: pairs with the watchdog's Acquire load
            }
        }
        let _ = notifier.stopping();
        service.stop_accepting();
        // No new connections; calls in progress go on (waiters are answered below).
        let _ = stop_servers.send(true);
        for p in &unix_paths {
            let _ = std::fs::remove_file(p);
        }
        // A fatal pipeline dispatches nothing: there is nothing to drain.
        let report = fatal.is_none().then(|| service.pipeline().drain(grace));
        // The last outcomes are journaled before the waiting clients are answered.
        collector_stop.store(true, Ordering::Release); // flags: stored Release, loaded Acquire
        let _ = collector.join();
        service.close();
        rt.block_on(async {
            let all = join_servers(servers);
            let _ = tokio::time::timeout(Duration::from_secs(5), all).await;
        });
        rt.shutdown_timeout(Duration::from_secs(1));
        if let Some(w) = watchdog {
            let _ = w.join();
        }
        let queued = service.unfinished();
        match Arc::try_unwrap(service) {
            Ok(s) => {
                s.shutdown();
                tracing::info!("pipeline shut down: children stopped, cgroups removed");
            }
            Err(service) => {
                // A call still holds the service: stop the children without waiting for it.
                tracing::warn!("a client call is still running; stopping the children anyway");
                service.pipeline().stop_children();
            }
        }
        tracing::info!(
            drained = report.is_some_and(|r| r.quiet),
            queued,
            "stopped; accepted jobs not finished run after the next start"
        );
        Ok(match fatal {
            None => Exit::Stopped,
            Some(why) => Exit::Fatal(why),
        })
    }
}

/// Waits for every server task.
async fn join_servers(servers: Vec<ServerTask>) {
    for s in servers {
        match s.await {
            Ok(Err(e)) => tracing::warn!("API server: {e}"),
            Err(e) => tracing::warn!("API server task: {e}"),
            Ok(Ok(())) => {}
        }
    }
}

fn watchdog_loop(
    service: Weak<Service>,
    stop: &AtomicBool,
    notifier: &Notifier,
    interval: Duration,
) {
    // Ping at half the interval while the pipeline can still prove.
    let step = Duration::from_millis(100);
    let mut last = None::<Instant>;
    // Acquire pairs with signal-hook's store of the flag (a plain flag).
    while !stop.load(Ordering::Acquire) {
        if last.is_none_or(|t| t.elapsed() >= interval / 2) {
            let Some(s) = service.upgrade() else { return };
            if s.pipeline().status().fatal.is_none() {
                let _ = notifier.watchdog();
            }
            last = Some(Instant::now());
        }
        thread::sleep(step);
    }
}

fn collector_loop(service: &Service, stop: &AtomicBool) {
    const TICK: Duration = Duration::from_millis(20);
    const EXPIRE_EVERY: Duration = Duration::from_secs(60);
    const TIMELINE_EVERY: Duration = Duration::from_secs(10);
    let (mut expired, mut trimmed) = (Instant::now() - EXPIRE_EVERY, Instant::now());
    loop {
        service.collect();
        // The flag convention: stored Release, loaded Acquire.
        if stop.load(Ordering::Acquire) {
            return;
        }
        if expired.elapsed() >= EXPIRE_EVERY {
            expired = Instant::now();
            service.expire();
        }
        if trimmed.elapsed() >= TIMELINE_EVERY {
            // The service never reads the timeline: keep it from growing without bound.
            trimmed = Instant::now();
            drop(service.pipeline().take_timeline());
        }
        thread::sleep(TICK);
    }
}

/// Listens on `socket` with the configured mode and group. The socket is bound under a
/// temporary name, given its permissions, then renamed into place, so no client ever sees it
/// with the umask's permissions.
fn bind(socket: &Path, mode: u32, group: Option<(&str, u32)>) -> Result<UnixListener, StartError> {
    if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io(format!("cannot create `{}`", dir.display())))?;
    }
    if socket.exists() {
        if UnixStream::connect(socket).is_ok() {
            return Err(StartError::SocketTaken(socket.to_owned()));
        }
        std::fs::remove_file(socket).map_err(io(format!(
            "cannot remove stale socket `{}`",
            socket.display()
        )))?;
    }
    let mut tmp = socket.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let listener =
        UnixListener::bind(&tmp).map_err(io(format!("cannot listen on `{}`", socket.display())))?;
    let placed = (|| -> Result<(), StartError> {
        if let Some((name, gid)) = group {
            std::os::unix::fs::chown(&tmp, None, Some(gid)).map_err(io(format!(
                "cannot give `{}` to group `{name}`",
                socket.display()
            )))?;
        }
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
            .map_err(io(format!("cannot set the mode of `{}`", socket.display())))?;
        std::fs::rename(&tmp, socket).map_err(io(format!(
            "cannot move the socket to `{}`",
            socket.display()
        )))?;
        Ok(())
    })();
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    listener
        .set_nonblocking(true)
        .map_err(io(format!("cannot listen on `{}`", socket.display())))?;
    Ok(listener)
}

/// The id of group `name`.
fn group_id(name: &str) -> Result<u32, StartError> {
    let cname = std::ffi::CString::new(name).map_err(|e| {
        StartError::Group(format!("bad group name `{name}` for `socket_group`: {e}"))
    })?;
    let mut buf = vec![0u8; 16 << 10];
    // SAFETY: `group` is plain data that getgrnam_r fills; all-zero is a valid value of it.
    let mut group: libc::group = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call: `cname` is NUL-terminated, `buf` is writable
    // for `buf.len()` bytes and outlives the call, `group` and `found` are live locals.
    let rc = unsafe {
        libc::getgrnam_r(
            cname.as_ptr(),
            &mut group,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 {
        return Err(StartError::Group(format!(
            "cannot look up group `{name}` for `socket_group`: {}",
            std::io::Error::from_raw_os_error(rc)
        )));
    }
    if found.is_null() {
        return Err(StartError::Group(format!(
            "unknown group `{name}` (`socket_group` in [service])\nhint: create it with \
             `groupadd {name}` or name another"
        )));
    }
    Ok(group.gr_gid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode_of(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_socket_gets_its_mode_a_stale_one_is_replaced_and_a_live_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run").join("s.sock");
        let live = bind(&path, 0o640, None).unwrap();
        assert_eq!(mode_of(&path), 0o640);
        let e = bind(&path, 0o600, None).unwrap_err();
        assert!(matches!(e, StartError::SocketTaken(_)), "{e}");
        // Nobody listens on the file any more: a stale socket, replaced.
        drop(live);
        let _again = bind(&path, 0o600, None).unwrap();
        assert_eq!(mode_of(&path), 0o600);
    }

    #[test]
    fn an_unknown_group_is_named_with_a_hint() {
        let e = group_id("splitprover-no-such-group")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown group `splitprover-no-such-group`") && e.contains("hint:"),
            "{e}"
        );
    }
}
