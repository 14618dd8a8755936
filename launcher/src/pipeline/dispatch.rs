//! The dispatcher: the one thread that feeds the [`Core`] what happens around it and carries out
//! what the core asks for.
//!
//! It receives [`Mail`] on one channel: the supervisors' [`ChildEvent`](super::core::ChildEvent)s
//! (and each started child's outbox, which the [`Hub`] keeps), the verifier pool's
//! [`Verdict`](super::core::Verdict)s, `Stop` (sent by the pipeline once its children are
//! stopped), and the proof checks a client thread's transition asked for; every [`TICK`] it runs
//! the core's periodic work. Each event is applied under the pipeline's lock ([`Hub::on`]); the
//! actions it left ([`Unlocked`]: kill a child, check a proof, read an SRS file) are carried out
//! after the lock is released, so neither a `kill(2)` nor a pairing check ever holds up a
//! `submit` or a `status`.
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

use super::child;
use super::core::{Core, Event};
use super::hub::{Applied, Hub, Unlocked};
use super::mail::Mail;
use super::verify::VerifierPool;
use crate::srs::{SharedSrs, SrsError};
use crate::sync::lock;
use shm_protocol::HugePagePolicy;

/// The period of the core's periodic work (`Core::on_tick`).
pub(super) const TICK: Duration = Duration::from_millis(250);

/// How long the dispatcher waits, when it ends, for the verdicts of proofs still being checked.
const LAST_VERDICTS: Duration = Duration::from_secs(60);

/// The dispatcher thread's body: runs until `Stop` (or until every sender is gone), containing a
/// panic (see the module doc). Ends the verifier pool when it returns.
pub(super) fn dispatch(hub: &Mutex<Hub>, mail: mpsc::Receiver<Mail>, pool: VerifierPool) {
    let run = catch_unwind(AssertUnwindSafe(|| serve(hub, &mail, &pool)));
    if let Err(panic) = run {
        let why = format!(
            "the dispatcher panicked: {}",
            kernels::panic_message(panic.as_ref())
        );
        tracing::error!("{why}; no job is dispatched any more");
        let mut hub = lock(hub);
        hub.core.dispatcher_panicked(why);
        hub.let_go();
    }
}

fn serve(hub: &Mutex<Hub>, mail: &mpsc::Receiver<Mail>, pool: &VerifierPool) {
    let mut last_tick = Instant::now();
    loop {
        match mail.recv_timeout(TICK) {
            Ok(Mail::Event(Event::Stop)) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Ok(m) => receive(hub, pool, m),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if last_tick.elapsed() >= TICK {
            last_tick = Instant::now();
            let done = lock(hub).apply(|c| c.on_tick(last_tick));
            perform(hub, pool, done);
        }
    }
    // The last results: collected and checked before the pipeline's shutdown fails what is left.
    let done = lock(hub).apply(Core::sweep_done);
    perform(hub, pool, done);
    let deadline = Instant::now() + LAST_VERDICTS;
    while lock(hub).core.verifying > 0 {
        match mail.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Mail::Event(Event::Stop)) => {}
            Ok(m) => receive(hub, pool, m),
            Err(_) => break,
        }
    }
}

/// Applies one piece of mail.
fn receive(hub: &Mutex<Hub>, pool: &VerifierPool, mail: Mail) {
    let done = match mail {
        Mail::Event(event) => lock(hub).on(event, Instant::now()),
        Mail::Outbox { role, outbox } => {
            lock(hub).outbox(role, outbox);
            return;
        }
        Mail::Perform(action) => Applied {
            value: (),
            later: vec![action],
            refused: Vec::new(),
        },
    };
    perform(hub, pool, done);
}

/// Carries out what a transition left for after the lock.
fn perform(hub: &Mutex<Hub>, pool: &VerifierPool, done: Applied<()>) {
    for action in done.later {
        match action {
            Unlocked::Kill { role, pid } => {
                tracing::debug!(%role, pid, "killing");
                child::kill(pid, libc::SIGKILL);
            }
            Unlocked::Verify(task) => pool.submit(task),
            Unlocked::LoadSrs(load) => match read_srs(&load) {
                Ok(image) => {
                    let done = lock(hub).apply(|c| {
                        c.srs_read(image);
                    });
                    perform(hub, pool, done);
                }
                Err(e) => tracing::error!(circuit = %load.spec, "cannot load the SRS: {e}"),
            },
        }
    }
}

/// Reads and checks the SRS file of [`Unlocked::LoadSrs`] into a shared-memory image.
pub(super) fn read_srs(load: &super::core::SrsToLoad) -> Result<SharedSrs, SrsError> {
    SharedSrs::load(
        &load.spec,
        load.circuit_id,
        &load.shape,
        &load.params,
        HugePagePolicy::Auto,
    )
}
