//! The core with what it must not hold: the children's outboxes and the jobs' waiters. One
//! [`Hub`] sits behind the pipeline's one lock; every transition of the core runs through
//! [`Hub::apply`], which carries out the core's actions that belong under the lock at once (a
//! message queued on a child's outbox, without blocking; an outcome handed to its waiter),
//! reports to the core how its messages went ([`Core::settle`]), and returns the rest for after
//! the lock is released ([`Unlocked`]: a kill, a proof check, an SRS file to read).
//!
//! Messages are queued under the lock so that those for one child keep the order the core asked
//! for them in, whichever thread ran the transition.

use std::collections::HashMap;
use std::sync::mpsc;
use std::time::Instant;

use super::core::jobs::JobOutcome;
use super::core::{
    Action, ChildEvent, Core, Event, OutboxRefused, Role, Settled, SrsToLoad, ToChild, VerifyTask,
};
use super::outbox::{Outbox, Outgoing};
use shm_protocol::control::ToSynth;

/// What the core asked for that runs after the lock is released.
#[derive(Debug)]
pub(crate) enum Unlocked {
    /// Kill a child (SIGKILL).
    Kill {
        /// Which.
        role: Role,
        /// Its process.
        pid: u32,
    },
    /// Check a proof on the verifier pool.
    Verify(VerifyTask),
    /// Read an SRS file, then give the image to the core ([`Core::srs_read`]).
    LoadSrs(SrsToLoad),
}

/// What one transition returned, and what it left.
pub(super) struct Applied<T> {
    /// The transition's own value.
    pub(super) value: T,
    /// The actions for after the lock.
    pub(super) later: Vec<Unlocked>,
    /// Messages a child's outbox refused: (the child, why), in order.
    pub(super) refused: Vec<(Role, OutboxRefused)>,
}

/// The core, the children's outboxes and the jobs' waiters (see the module doc).
pub(super) struct Hub {
    /// The state machine.
    pub(super) core: Core,
    /// The outbox of each child that is up.
    outboxes: HashMap<Role, Outbox>,
    /// Where each live job's outcome goes.
    waiters: HashMap<u64, mpsc::Sender<JobOutcome>>,
}

impl Hub {
    /// A hub over `core`, with no child and no waiter.
    pub(super) fn new(core: Core) -> Hub {
        Hub {
            core,
            outboxes: HashMap::new(),
            waiters: HashMap::new(),
        }
    }

    /// The outbox of `role`'s process that just started (`None`: it has none), kept until the
    /// process exits.
    pub(super) fn outbox(&mut self, role: Role, outbox: Option<Outbox>) {
        match outbox {
            Some(o) => self.outboxes.insert(role, o),
            None => self.outboxes.remove(&role),
        };
    }

    /// Where the outcome of job `id` (just accepted) goes.
    pub(super) fn wait_for(&mut self, id: u64) -> mpsc::Receiver<JobOutcome> {
        let (tx, rx) = mpsc::channel();
        self.waiters.insert(id, tx);
        rx
    }

    /// Lets every waiter go without an outcome (their `wait` answers `Stopped`).
    pub(super) fn let_go(&mut self) {
        self.waiters.clear();
    }

    /// One event of the dispatcher's channel, arrived at `now`: an exited child's outbox is
    /// dropped before the core hears of the exit.
    pub(super) fn on(&mut self, event: Event, now: Instant) -> Applied<()> {
        if let Event::Child(ChildEvent::Exited { role, .. }) = &event {
            self.outboxes.remove(role);
        }
        self.apply(|core| core.on(event, now))
    }

    /// Runs `transition` on the core and carries out its actions (see the module doc).
    pub(super) fn apply<T>(&mut self, transition: impl FnOnce(&mut Core) -> T) -> Applied<T> {
        let value = transition(&mut self.core);
        let mut later = Vec::new();
        let mut refused = Vec::new();
        loop {
            let actions = self.core.take_actions();
            if actions.is_empty() {
                break;
            }
            let mut settled = Vec::new();
            // synth-proc's requests after one its queue refused are not tried: they would
            // overtake it.
            let mut requests_refused = None;
            for action in actions {
                match action {
                    Action::Send { role, msg, fd } => {
                        let is_request = matches!(msg, ToChild::Synth(ToSynth::Synthesize(_)));
                        let result = match (is_request, requests_refused) {
                            (true, Some(why)) => Err(why),
                            _ => self.queue(role, msg.clone(), fd),
                        };
                        if let Err(why) = result {
                            if is_request {
                                requests_refused = Some(why);
                            }
                            refused.push((role, why));
                        }
                        settled.push(Settled { role, msg, result });
                    }
                    Action::Deliver(outcome) => {
                        if let Some(w) = self.waiters.remove(&outcome.job_id) {
                            // A waiter that stopped waiting does not hold anything up.
                            let _ = w.send(outcome);
                        }
                    }
                    Action::Kill { role, pid } => later.push(Unlocked::Kill { role, pid }),
                    Action::Verify(task) => later.push(Unlocked::Verify(task)),
                    Action::LoadSrs(load) => later.push(Unlocked::LoadSrs(load)),
                }
            }
            if !settled.is_empty() {
                self.core.settle(settled);
            }
        }
        Applied {
            value,
            later,
            refused,
        }
    }

    /// Queues `msg` on `role`'s outbox without blocking.
    fn queue(
        &self,
        role: Role,
        msg: ToChild,
        fd: Option<std::os::fd::OwnedFd>,
    ) -> Result<(), OutboxRefused> {
        match self.outboxes.get(&role) {
            Some(o) => o.try_send(Outgoing { msg, fd }),
            None => Err(OutboxRefused::Closed),
        }
    }
}
