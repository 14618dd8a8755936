//! A child's outbox: the sending side of its control channel, a bounded queue drained by a
//! writer thread ([`Outbox`]), and the messages it carries ([`Outgoing`]).

use std::os::fd::{AsFd, OwnedFd};
use std::sync::mpsc;
use std::thread;

use shm_protocol::control;

use super::core::{OutboxRefused, Role, ToChild};

/// One message for a child as its writer thread sends it: a value, with the descriptor that
/// travels beside it (`SCM_RIGHTS`: a request memfd, an SRS image), if any.
#[derive(Debug)]
pub struct Outgoing {
    /// The message.
    pub msg: ToChild,
    /// A descriptor sent with it.
    pub fd: Option<OwnedFd>,
}

impl Outgoing {
    /// Writes it to the child's control channel.
    fn send(self, sender: &mut control::Sender) -> std::io::Result<()> {
        match (&self.msg, &self.fd) {
            (ToChild::Synth(m), Some(fd)) => sender.send_with_fd(m, fd.as_fd()),
            (ToChild::Synth(m), None) => sender.send(m),
            (ToChild::Gpu(m), Some(fd)) => sender.send_with_fd(m, fd.as_fd()),
            (ToChild::Gpu(m), None) => sender.send(m),
        }
    }
}

/// The sending side of a child's control channel: a bounded queue drained by a writer thread, so
/// that nobody holding the pipeline's lock ever blocks on the child's socket (a frozen child with
/// a full socket buffer blocks only its writer thread).
#[derive(Debug)]
pub struct Outbox {
    tx: mpsc::SyncSender<Outgoing>,
}

impl Outbox {
    /// Starts the writer thread of `role` over `sender`, with room for `capacity` messages.
    pub fn start(
        role: Role,
        mut sender: control::Sender,
        capacity: usize,
    ) -> std::io::Result<Outbox> {
        let (outbox, rx) = Outbox::capture(capacity);
        thread::Builder::new()
            .name(format!("{role} writer"))
            .spawn(move || {
                for msg in rx {
                    if let Err(e) = msg.send(&mut sender) {
                        // The child is dying; its exit re-queues what it had been given.
                        tracing::warn!(%role, "cannot send to the child: {e}");
                        break;
                    }
                }
            })?;
        Ok(outbox)
    }

    /// An outbox with room for `capacity` messages whose messages arrive on the receiver instead
    /// of a child's socket (no thread): what [`Outbox::start`] builds on, and what the pipeline's
    /// tests read to see what a child was sent.
    pub fn capture(capacity: usize) -> (Outbox, mpsc::Receiver<Outgoing>) {
        let (tx, rx) = mpsc::sync_channel::<Outgoing>(capacity.max(1));
        (Outbox { tx }, rx)
    }

    /// Queues `msg` without blocking.
    pub fn try_send(&self, msg: Outgoing) -> Result<(), OutboxRefused> {
        self.tx.try_send(msg).map_err(|e| match e {
            mpsc::TrySendError::Full(_) => OutboxRefused::Full,
            mpsc::TrySendError::Disconnected(_) => OutboxRefused::Closed,
        })
    }
}
