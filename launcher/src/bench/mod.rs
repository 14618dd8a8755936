//! `splitprover bench`: the measured modes (see "Measuring" in the design notes); [`local`] holds
//! the ones that run inside this process.

#[cfg(feature = "filecoin")]
pub mod filecoin;
pub mod local;
pub mod split;
