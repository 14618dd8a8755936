//! The bench's one lock helper.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, ignoring poison. A thread of the in-process pipeline that panicked is reported
/// when the pipeline's scope ends (`local::ErrorKind::WorkerPanicked`); until then the queue, the
/// events and each job's state stay usable, so the other threads stop (a `StopOnDrop`) instead
/// of panicking in turn.
pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
