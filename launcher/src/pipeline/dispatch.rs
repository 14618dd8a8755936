//! The dispatcher: the one thread that feeds the [`Core`] what happens around it and carries out
//! what the core asks for.
//!
//! It receives [`Event`]s on one channel: the supervisors' [`ChildEvent`]s, the verifier pool's
//! [`Verdict`]s, and `Stop` (sent by the pipeline once its children are stopped); every
//! [`TICK`] it runs the core's periodic work. Each event is applied under the core lock; the
//! [`Action`]s it produced (kill a child, check a proof) are carried out after the lock is
//! released, so neither a `kill(2)` nor a pairing check ever holds up a `submit` or a `status`.
//!
//! **A panic here is contained**: the loop runs under `catch_unwind`. A panic (a broken
//! invariant, or the `dispatcher-panic` test fault) turns the pipeline fatal with the panic's
//! message ([`Core::dispatcher_panicked`]): `submit` refuses with it, `status` shows it, the
//! jobs' waiters are let go without an outcome, and the service stops feeding the systemd
//! watchdog and exits non-zero so that systemd restarts it; the journal re-queues its accepted
//! jobs at the next start. Nothing keeps accepting jobs that are never dispatched.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use super::child::{self, ChildEvent};
use super::machine::{Action, Core};
use super::verify::{Verdict, VerifierPool};
use crate::sync::lock;

/// What the dispatcher reacts to.
#[derive(Debug)]
pub(crate) enum Event {
    /// A supervisor's report of its child.
    Child(ChildEvent),
    /// A proof checked by the verifier pool.
    Verified(Verdict),
    /// The children are stopped: collect the last results and end.
    Stop,
}

/// The period of the core's periodic work (`Core::on_tick`).
pub(super) const TICK: Duration = Duration::from_millis(250);

/// How long the dispatcher waits, when it ends, for the verdicts of proofs still being checked.
const LAST_VERDICTS: Duration = Duration::from_secs(60);

/// The dispatcher thread's body: runs until `Stop` (or until every sender is gone), containing a
/// panic (see the module doc). Ends the verifier pool when it returns.
pub(super) fn dispatch(core: &Mutex<Core>, events: mpsc::Receiver<Event>, pool: VerifierPool) {
    let run = catch_unwind(AssertUnwindSafe(|| serve(core, &events, &pool)));
    if let Err(panic) = run {
        let why = format!(
            "the dispatcher panicked: {}",
            kernels::panic_message(panic.as_ref())
        );
        tracing::error!("{why}; no job is dispatched any more");
        lock(core).dispatcher_panicked(why);
    }
}

fn serve(core: &Mutex<Core>, events: &mpsc::Receiver<Event>, pool: &VerifierPool) {
    let mut last_tick = Instant::now();
    loop {
        match events.recv_timeout(TICK) {
            Ok(Event::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Ok(event) => apply(core, pool, |c| c.on(event, Instant::now())),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if last_tick.elapsed() >= TICK {
            last_tick = Instant::now();
            apply(core, pool, |c| c.on_tick(last_tick));
        }
    }
    // The last results: collected and checked before the pipeline's shutdown fails what is left.
    apply(core, pool, Core::sweep_done);
    let deadline = Instant::now() + LAST_VERDICTS;
    while lock(core).verifying > 0 {
        match events.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Event::Stop) => {}
            Ok(event) => apply(core, pool, |c| c.on(event, Instant::now())),
            Err(_) => break,
        }
    }
}

/// Runs one transition under the lock, then its actions without it.
fn apply(core: &Mutex<Core>, pool: &VerifierPool, transition: impl FnOnce(&mut Core)) {
    let actions = {
        let mut core = lock(core);
        transition(&mut core);
        core.take_actions()
    };
    for action in actions {
        match action {
            Action::Kill { role, pid } => {
                tracing::debug!(%role, pid, "killing");
                child::kill(pid, libc::SIGKILL);
            }
            Action::Verify(task) => pool.submit(task),
        }
    }
}
