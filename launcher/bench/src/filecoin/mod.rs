//! The Filecoin bench (feature `filecoin`, on by default): `splitprover bench --filecoin` (PoRep
//! C2 of a real sealed sector: stock, in process, split; and the gRPC API against the local
//! path, `api_bench`). Serving Filecoin jobs needs nothing from here: the pipeline handles them
//! through `kernels::job` like any other job. This module and the arguments of `bench` are the
//! bench's only feature gates.

pub mod api_bench;
pub mod bench;
