//! `splitprover bench`: the measured modes (see "Measuring" in the design notes); [`local`] holds
//! the ones that run inside this process.

pub mod local;
pub mod split;
