//! Groth16 provers that work from borrowed assignments (what a ring slot holds), SRS tooling and
//! built-in circuits. (Overview to be completed by the crate owner.)
#![deny(missing_docs)]

pub mod backend;
