//! What arrives on the dispatcher's one channel ([`Mail`]): the children's events from their
//! supervisors, a starting child's outbox, the verifiers' verdicts and what client threads ask
//! the dispatcher to perform.

use super::core::{Event, Role};
use super::hub::Unlocked;
use super::outbox::Outbox;

/// What arrives on the dispatcher's channel.
#[derive(Debug)]
pub(crate) enum Mail {
    /// An event for the core.
    Event(Event),
    /// The outbox of a child that is starting (sent before its `Started`), kept by the hub:
    /// the core only learns that the child is reachable.
    Outbox {
        /// Which child.
        role: Role,
        /// Its outbox (`None`: its writer thread could not start).
        outbox: Option<Outbox>,
    },
    /// What a client thread's transition asked for and only the dispatcher can do (a proof
    /// check goes to its verifier pool).
    Perform(Unlocked),
}

impl From<Event> for Mail {
    fn from(e: Event) -> Mail {
        Mail::Event(e)
    }
}
