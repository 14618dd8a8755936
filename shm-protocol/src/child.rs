//! What a child process (synth-proc, gpu-proc) inherits from the launcher at start: its
//! configuration in [`CHILD_CONFIG_ENV`], the ring's memfd at [`RING_FD`] and its control socket
//! at [`CONTROL_FD`]. [`inherit`] takes all three once, checked, for either child.

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use crate::control::{ChildConfig, CHILD_CONFIG_ENV, CONTROL_FD, RING_FD};
use crate::{Region, Ring};

/// What the launcher passed a child: `T` is its own configuration.
#[derive(Debug)]
pub struct Inherited<T> {
    /// Its configuration.
    pub config: T,
    /// The ring, mapped and validated.
    pub ring: Ring,
    /// Its end of the control socket.
    pub control: UnixStream,
}

/// Why a child could not take what the launcher passes it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration variable is missing: the process was not started by the launcher.
    #[error("`{CHILD_CONFIG_ENV}` is not set: {process} is started by `splitprover`")]
    NotStartedByLauncher {
        /// The child (`synth-proc`, `gpu-proc`).
        process: &'static str,
    },
    /// The configuration does not parse.
    #[error("bad child configuration: {0}")]
    BadConfig(#[from] serde_json::Error),
    /// The configuration is another child's.
    #[error("{process} was given another process's configuration: {config:?}")]
    WrongRole {
        /// The child that was started.
        process: &'static str,
        /// What it was given.
        config: Box<ChildConfig>,
    },
    /// The ring's memfd cannot be mapped, or what it maps is not a valid ring.
    #[error("the ring passed by the launcher: {0}")]
    Ring(#[from] crate::Error),
}

/// Takes the configuration, the ring and the control socket the launcher passes `process`;
/// `mine` takes this child's configuration out of a [`ChildConfig`], or gives it back when it
/// is another child's.
///
/// # Safety
///
/// Call at most once per process, in a child the launcher started: the descriptors
/// [`RING_FD`] (the ring's memfd) and [`CONTROL_FD`] (one end of a socketpair) are then this
/// process's, owned by nothing else, and become the returned values' (even on an error after
/// they were taken).
pub unsafe fn inherit<T>(
    process: &'static str,
    mine: impl FnOnce(ChildConfig) -> Result<T, ChildConfig>,
) -> Result<Inherited<T>, StartError> {
    let raw = std::env::var(CHILD_CONFIG_ENV)
        .map_err(|_| StartError::NotStartedByLauncher { process })?;
    let config = mine(serde_json::from_str(&raw)?).map_err(|other| StartError::WrongRole {
        process,
        config: Box::new(other),
    })?;
    // SAFETY: the caller's contract: RING_FD is the launcher's ring memfd, owned by nothing else
    // in this process; `from_inherited_fd` validates what it maps.
    let region = unsafe { Region::from_inherited_fd(OwnedFd::from_raw_fd(RING_FD)) }?;
    let ring = Ring::open(region)?;
    // SAFETY: the caller's contract: CONTROL_FD is one end of the launcher's socketpair, owned by
    // nothing else in this process; the stream takes sole ownership.
    let control = unsafe { UnixStream::from_raw_fd(CONTROL_FD) };
    Ok(Inherited {
        config,
        ring,
        control,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_not_started_by_the_launcher_is_told_so_before_any_descriptor_is_taken() {
        // The variable is absent in the test process: nothing is taken.
        // SAFETY: the call returns before it reaches a descriptor (checked below: the error is
        // the variable's), so neither RING_FD nor CONTROL_FD is taken.
        let e = unsafe { inherit("synth-proc", Ok) }.unwrap_err();
        assert!(matches!(e, StartError::NotStartedByLauncher { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            "`SPLITPROVER_CHILD_CONFIG` is not set: synth-proc is started by `splitprover`"
        );
    }
}
