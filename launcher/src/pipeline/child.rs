//! Starting, watching and restarting one child process (synth-proc or a gpu-proc).
//!
//! Each child gets, by inheritance at fixed numbers, the ring memfd ([`RING_FD`](shm_protocol::control::RING_FD)), one end of a
//! fresh control socketpair ([`CONTROL_FD`]) and, for a gpu-proc, the SRS memfds from
//! [`FIRST_SRS_FD`](shm_protocol::control::FIRST_SRS_FD) on. Its cpuset is applied between `fork` and `exec` (see `pinning`), and it
//! asks the kernel to kill it when the launcher dies (`PR_SET_PDEATHSIG`).
//!
//! A supervisor thread per role runs the loop *spawn → forward messages → reap → back off →
//! spawn*, reporting every step to the pipeline's dispatcher as a [`ChildEvent`]. It also starts
//! each child's [`Outbox`](super::outbox::Outbox) (its writer thread) and hands it to the dispatcher before the child's
//! `Started`: the pipeline's hub queues on it what the core asks for, and the core itself only
//! learns that the child is reachable. The back-off doubles after
//! each death within [`RestartPolicy::healthy_after`] of its start, up to
//! [`RestartPolicy::max_backoff`], and starts over after a healthy run.
//!
//! A child that has served once (said hello) is never given up: after
//! [`RestartPolicy::max_quick_failures`] quick deaths in a row it is reported
//! [`ChildEvent::Down`] (status shows it `down`, the other gpu-procs take the work) and is still
//! restarted at the longest back-off, so a transient fault (a CUDA init error) heals by itself.
//! Only a child that never served — it refused its configuration, could not be executed, or
//! crash-looped before its first hello — is given up ([`ChildEvent::GaveUp`]).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

/// A supervisor's stop flag is stored with `Release` before the child is told to exit and loaded
/// with `Acquire` after each child exit, so a supervisor that sees its child gone also sees the
/// stop that caused it and does not restart it. (The same convention for every flag of the
/// workspace's processes.)
const SET: Ordering = Ordering::Release;
/// See [`SET`].
const GET: Ordering = Ordering::Acquire;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use shm_protocol::control::{self, ChildConfig, FromChild, CHILD_CONFIG_ENV, CONTROL_FD};

use super::core::Event;
pub use super::core::{ChildEvent, OutboxRefused, Role, ToChild};
use super::mail::Mail;
use super::outbox::Outbox;
use crate::pinning::Placement;
use crate::sync::lock;

/// When to give up restarting.
#[derive(Clone, Copy, Debug)]
pub struct RestartPolicy {
    /// First back-off delay; doubled after each quick failure.
    pub initial_backoff: Duration,
    /// Longest back-off delay.
    pub max_backoff: Duration,
    /// A child that ran at least this long counts as healthy: its back-off starts over.
    pub healthy_after: Duration,
    /// Consecutive quick failures after which the role is reported down (it is still restarted
    /// if it ever served; given up if it never did).
    pub max_quick_failures: u32,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(30),
            healthy_after: Duration::from_secs(30),
            max_quick_failures: 8,
        }
    }
}

/// How to start one child.
pub struct ChildSpec {
    /// Which.
    pub role: Role,
    /// Program to run (the `splitprover` binary itself, with a hidden subcommand).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// What the child is told.
    pub config: ChildConfig,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Descriptors the child inherits: (source, number in the child). The control socket is added.
    pub fds: Vec<(Arc<OwnedFd>, RawFd)>,
    /// Where it runs.
    pub placement: Option<Placement>,
    /// Restart rules.
    pub restart: RestartPolicy,
    /// Messages queued for it before a send is refused ([`Outbox`](super::outbox::Outbox)).
    pub outbox: usize,
    /// Called before each start (restarts included) with a copy of `config`: amends it and
    /// returns more descriptors to inherit. A gpu-proc gets the SRS images loaded at that moment
    /// this way, so one loaded or evicted while serving is what its next start maps.
    pub prepare: Option<SpawnHook>,
}

/// See [`ChildSpec::prepare`].
pub type SpawnHook = Arc<dyn Fn(&mut ChildConfig) -> Vec<(Arc<OwnedFd>, RawFd)> + Send + Sync>;

/// A running supervisor.
pub struct Supervisor {
    role: Role,
    stop: Arc<AtomicBool>,
    pid: Arc<Mutex<Option<u32>>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Supervisor {
    /// Starts supervising `spec`, reporting to the dispatcher's `events`.
    pub(crate) fn start(spec: ChildSpec, events: mpsc::Sender<Mail>) -> Supervisor {
        let role = spec.role;
        let stop = Arc::new(AtomicBool::new(false));
        let pid = Arc::new(Mutex::new(None));
        let thread = {
            let (stop, pid) = (stop.clone(), pid.clone());
            thread::Builder::new()
                .name(format!("supervise {role}"))
                .spawn(move || supervise(spec, events, stop, pid))
                .expect("spawning a supervisor thread")
        };
        Supervisor {
            role,
            stop,
            pid,
            thread: Some(thread),
        }
    }

    /// The role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The pid of the running child, if any.
    pub fn pid(&self) -> Option<u32> {
        *lock(&self.pid)
    }

    /// Marks the child as stopping: its exit is expected and it is not restarted.
    pub fn request_stop(&self) {
        self.stop.store(true, SET);
    }

    /// Stops restarting; the child is expected to exit on its own (after `Shutdown`) within
    /// `grace`, else it is killed. Returns when the supervisor thread has ended.
    pub fn stop(mut self, grace: Duration) {
        self.stop.store(true, SET);
        let deadline = Instant::now() + grace;
        if let Some(t) = self.thread.take() {
            while !t.is_finished() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(10));
            }
            if !t.is_finished() {
                if let Some(pid) = self.pid() {
                    tracing::warn!(role = %self.role, pid, "child did not exit in time: killing it");
                    kill(pid, libc::SIGKILL);
                }
            }
            let _ = t.join();
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop.store(true, SET);
            if let Some(pid) = self.pid() {
                kill(pid, libc::SIGKILL);
            }
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// Sends `signal` to `pid` (used by tests and by shutdown).
pub fn kill(pid: u32, signal: i32) {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

/// Reports `e` to the dispatcher; false when it is gone.
fn report(events: &mpsc::Sender<Mail>, e: ChildEvent) -> bool {
    events.send(Mail::Event(Event::Child(e))).is_ok()
}

fn supervise(
    spec: ChildSpec,
    events: mpsc::Sender<Mail>,
    stop: Arc<AtomicBool>,
    pid_slot: Arc<Mutex<Option<u32>>>,
) {
    let role = spec.role;
    let mut quick_failures = 0u32;
    let mut backoff = spec.restart.initial_backoff;
    // Whether a child of this role ever said hello: then it is never given up.
    let mut served = false;
    let mut reported_down = false;
    loop {
        let started = Instant::now();
        let run = match spawn(&spec) {
            Ok(run) => run,
            Err(e) if served => {
                quick_failures += 1;
                tracing::error!(%role, "cannot restart: {e:#}");
                if quick_failures > spec.restart.max_quick_failures && !reported_down {
                    reported_down = true;
                    report(
                        &events,
                        ChildEvent::Down {
                            role,
                            reason: format!("cannot restart {role}: {e:#}"),
                        },
                    );
                }
                if !sleep_unless_stopped(backoff, &stop) {
                    return;
                }
                backoff = next_backoff(backoff, &spec.restart);
                continue;
            }
            Err(e) => {
                report(
                    &events,
                    ChildEvent::GaveUp {
                        role,
                        reason: format!("cannot start {role}: {e:#}"),
                    },
                );
                return;
            }
        };
        let RunningChild {
            mut child,
            receiver,
            sender,
            stderr,
        } = run;
        let pid = child.id();
        *lock(&pid_slot) = Some(pid);
        let cpus = spec.placement.as_ref().and_then(|p| match p.verify(pid) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(%role, pid, "cannot verify cpuset: {e}");
                None
            }
        });
        let outbox = match Outbox::start(role, sender, spec.outbox) {
            Ok(o) => Some(o),
            Err(e) => {
                tracing::error!(%role, pid, "cannot start the writer thread: {e}; killing the child");
                kill(pid, libc::SIGKILL);
                None
            }
        };
        let reachable = outbox.is_some();
        // The outbox first, on the same channel: the dispatcher holds it when the core hears of
        // the start.
        let handed = events.send(Mail::Outbox { role, outbox }).is_ok();
        if !handed
            || !report(
                &events,
                ChildEvent::Started {
                    role,
                    pid,
                    reachable,
                    cpus,
                },
            )
        {
            kill(pid, libc::SIGKILL);
            let _ = child.wait();
            return;
        }
        let said_hello = forward(role, pid, receiver, &events);
        if said_hello {
            served = true;
            reported_down = false;
        }
        // The control channel closed: the child is exiting or dead. Reap it.
        let status = child.wait();
        // A child that exits with an error before it is serving refused its configuration (no
        // GPU, unreadable SRS...): starting it again cannot help.
        let refused = !said_hello && matches!(&status, Ok(s) if s.code().is_some_and(|c| c != 0));
        *lock(&pid_slot) = None;
        let stderr_tail = stderr.join().unwrap_or_default();
        let status = describe(status);
        let stopping = stop.load(GET);
        let ran = started.elapsed();
        if ran >= spec.restart.healthy_after {
            quick_failures = 0;
            backoff = spec.restart.initial_backoff;
        } else {
            quick_failures += 1;
        }
        let crash_loop = quick_failures > spec.restart.max_quick_failures;
        let give_up = !stopping && !served && (refused || crash_loop);
        let restarting = !stopping && !give_up;
        if !stopping {
            tracing::warn!(%role, pid, %status, ran_ms = ran.as_millis() as u64, "child exited");
        }
        report(
            &events,
            ChildEvent::Exited {
                role,
                pid,
                status: status.clone(),
                stderr_tail: stderr_tail.clone(),
                restarting,
            },
        );
        if give_up {
            let tail = stderr_tail.join("\n");
            let reason = if refused {
                format!("{role} could not start ({status}):\n{tail}")
            } else {
                format!("{role} crashed {quick_failures} times in a row (last: {status}); last stderr:\n{tail}")
            };
            report(&events, ChildEvent::GaveUp { role, reason });
            return;
        }
        if stopping {
            return;
        }
        if crash_loop && !reported_down {
            reported_down = true;
            let tail = stderr_tail.join("\n");
            report(
                &events,
                ChildEvent::Down {
                    role,
                    reason: format!(
                        "{role} died {quick_failures} times in a row (last: {status}); still \
                         restarting every {:?}; last stderr:\n{tail}",
                        spec.restart.max_backoff
                    ),
                },
            );
        }
        if !sleep_unless_stopped(backoff, &stop) {
            return;
        }
        backoff = next_backoff(backoff, &spec.restart);
    }
}

/// The back-off after `current`: doubled, at most the policy's longest.
pub fn next_backoff(current: Duration, policy: &RestartPolicy) -> Duration {
    current.saturating_mul(2).min(policy.max_backoff)
}

/// Sleeps `d` in short steps; returns false as soon as `stop` is set.
fn sleep_unless_stopped(d: Duration, stop: &AtomicBool) -> bool {
    let deadline = Instant::now() + d;
    loop {
        if stop.load(GET) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        thread::sleep((deadline - now).min(Duration::from_millis(50)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let policy = RestartPolicy::default();
        let mut d = policy.initial_backoff;
        let mut seen = vec![d];
        for _ in 0..12 {
            d = next_backoff(d, &policy);
            seen.push(d);
        }
        assert_eq!(seen[1], policy.initial_backoff * 2);
        assert_eq!(seen[2], policy.initial_backoff * 4);
        assert!(seen.windows(2).all(|w| w[1] >= w[0]), "{seen:?}");
        assert_eq!(*seen.last().unwrap(), Duration::from_secs(30), "capped");
        assert_eq!(next_backoff(Duration::MAX, &policy), policy.max_backoff);
    }
}

/// Forwards the child's messages until its channel closes; returns whether it said hello.
fn forward(
    role: Role,
    pid: u32,
    mut receiver: control::Receiver,
    events: &mpsc::Sender<Mail>,
) -> bool {
    let mut said_hello = false;
    loop {
        match receiver.recv::<FromChild>() {
            Ok(Some(msg)) => {
                said_hello |= matches!(msg, FromChild::Hello { .. });
                if !report(events, ChildEvent::Message { role, pid, msg }) {
                    return said_hello;
                }
            }
            Ok(None) => return said_hello,
            Err(e) => {
                tracing::error!(%role, pid, "control channel broken: {e}; killing the child");
                kill(pid, libc::SIGKILL);
                return said_hello;
            }
        }
    }
}

fn describe(status: std::io::Result<ExitStatus>) -> String {
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(0), _) => "exited normally".to_owned(),
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            _ => format!("{s}"),
        },
        Err(e) => format!("cannot reap: {e}"),
    }
}

struct RunningChild {
    child: Child,
    receiver: control::Receiver,
    sender: control::Sender,
    stderr: thread::JoinHandle<Vec<String>>,
}

/// Why a child could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// A system call on the way failed (the control socketpair, a relay thread).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// The program could not be executed.
    #[error("cannot start `{}`: {source}", program.display())]
    Exec {
        /// The program.
        program: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> SpawnError {
    move |source| SpawnError::Io { what, source }
}

fn spawn(spec: &ChildSpec) -> Result<RunningChild, SpawnError> {
    let (ours, theirs) = UnixStream::pair().map_err(io("socketpair for the control channel"))?;
    let theirs = OwnedFd::from(theirs);
    let mut cmd = Command::new(&spec.program);
    let mut config = spec.config.clone();
    // Held until the child is spawned: the hook's descriptors are dropped with this.
    let extra_fds = spec
        .prepare
        .as_ref()
        .map(|prepare| prepare(&mut config))
        .unwrap_or_default();
    let config = serde_json::to_string(&config)
        .map_err(|e| io("serializing the child configuration")(e.into()))?;
    cmd.args(&spec.args)
        .env(CHILD_CONFIG_ENV, config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    crate::notify::scrub_child_env(&mut cmd);
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    let mut map: Vec<(RawFd, RawFd)> = spec
        .fds
        .iter()
        .chain(extra_fds.iter())
        .map(|(fd, to)| (fd.as_raw_fd(), *to))
        .collect();
    map.push((theirs.as_raw_fd(), CONTROL_FD));
    pass_fds(&mut cmd, map);
    if let Some(p) = &spec.placement {
        p.apply_to(&mut cmd);
    }
    let mut child = cmd.spawn().map_err(|source| SpawnError::Exec {
        program: spec.program.clone(),
        source,
    })?;
    drop(theirs);
    let stderr = child.stderr.take().expect("stderr is piped");
    let role = spec.role;
    let pid = child.id();
    let stderr = thread::Builder::new()
        .name(format!("{role} stderr"))
        .spawn(move || relay_stderr(role, pid, stderr))
        .map_err(io("starting the stderr relay"))?;
    let (sender, receiver) = control::channel(ours).map_err(io("the control channel"))?;
    Ok(RunningChild {
        child,
        receiver,
        sender,
        stderr,
    })
}

/// Copies a child's stderr to ours, line by line, keeping the last lines for error reports.
fn relay_stderr(role: Role, pid: u32, stderr: std::process::ChildStderr) -> Vec<String> {
    const KEEP: usize = 30;
    let mut tail = VecDeque::with_capacity(KEEP);
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        eprintln!("[{role} {pid}] {line}");
        if tail.len() == KEEP {
            tail.pop_front();
        }
        tail.push_back(line);
    }
    tail.into()
}

/// Makes the child inherit each `(source, target)` descriptor at `target`, and die with us.
///
/// Sources are first duplicated above every target (so moving one cannot clobber another that
/// still has to move), then `dup2`ed into place, which also clears close-on-exec.
fn pass_fds(cmd: &mut Command, map: Vec<(RawFd, RawFd)>) {
    let floor = map.iter().map(|&(s, t)| s.max(t)).max().unwrap_or(2) + 1;
    let mut scratch = vec![-1; map.len()];
    // SAFETY: the closure runs in the child between fork and exec; it only makes
    // async-signal-safe system calls (prctl, fcntl, dup2, close) and writes into `scratch`, a
    // buffer allocated before the fork, so it never allocates or takes a lock.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() == 1 {
                // The launcher died before we set the death signal.
                return Err(std::io::Error::other("launcher already exited"));
            }
            for (i, &(src, _)) in map.iter().enumerate() {
                let high = libc::fcntl(src, libc::F_DUPFD_CLOEXEC, floor);
                if high < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                scratch[i] = high;
            }
            for (i, &(_, target)) in map.iter().enumerate() {
                if libc::dup2(scratch[i], target) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(scratch[i]);
            }
            Ok(())
        });
    }
}
