//! The launcher's one lock helper.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, ignoring poison. A panic while the lock was held is handled where it happens (the
/// dispatcher's turns the pipeline fatal, `pipeline::dispatch`); the value stays readable, so
/// `status`, `submit` (which then refuses with the fatal error) and shutdown still answer
/// instead of panicking in turn.
pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
