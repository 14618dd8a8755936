//! The launcher library behind the `splitprover` CLI.
#![deny(missing_docs)]

pub mod bench;
pub mod cpuset;
pub mod notify;
pub mod report;
pub mod timeline;
