//! Pinning for the local modes: the global rayon pool to a cpu list for a run's lifetime, and
//! the threads a mode starts.

use launcher::pinning::CpuList;

use super::{invalid, Error};

/// The global rayon pool pinned to a cpu list until dropped, when it gets back the cpus the
/// process had (however the pinned work ends, a panic included).
pub(super) struct RayonPin {
    before: Option<CpuList>,
}

impl RayonPin {
    /// Pins the pool to `cpus`; `None` leaves it where it is.
    pub(super) fn to(cpus: Option<&CpuList>) -> Result<RayonPin, Error> {
        let Some(cpus) = cpus else {
            return Ok(RayonPin { before: None });
        };
        let before = CpuList::allowed().map_err(|e| invalid("cpus", &e.to_string()))?;
        pin_rayon(cpus)?;
        Ok(RayonPin {
            before: Some(before),
        })
    }
}

impl Drop for RayonPin {
    fn drop(&mut self) {
        if let Some(before) = &self.before {
            if let Err(e) = pin_rayon(before) {
                tracing::warn!(error = %e, "cannot give the rayon pool its cpus back");
            }
        }
    }
}

/// Pins every thread of the global rayon pool (the pool the kernels prove on) to `cpus`.
fn pin_rayon(cpus: &CpuList) -> Result<(), Error> {
    let failed = rayon::broadcast(|_| crate::pin_current_thread(cpus).err())
        .into_iter()
        .flatten()
        .next();
    match failed {
        Some(e) => Err(invalid("cpus", &format!("cannot pin to `{cpus}`: {e}"))),
        None => Ok(()),
    }
}

pub(super) fn pin_or_log(cpus: Option<&CpuList>) {
    if let Some(cpus) = cpus {
        if let Err(e) = crate::pin_current_thread(cpus) {
            // The rayon pool was pinned to the same set just before, so this cannot fail for a
            // reason the caller could act on; the thread runs where it was.
            tracing::warn!(%cpus, error = %e, "cannot pin an in-process bench thread");
        }
    }
}
