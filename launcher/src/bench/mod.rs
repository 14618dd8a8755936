//! `splitprover bench`: the measured modes; [`local`] holds the ones that run inside this process.

pub mod local;
