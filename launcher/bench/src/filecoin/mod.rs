//! The launcher's Filecoin-only commands (feature `filecoin`, on by default): `splitprover params`
//! (parameters in the parameter cache under the official names) and `splitprover bench
//! --filecoin` (PoRep C2 of a real sealed sector: stock, in process, split; and the gRPC API
//! against the local path, `api_bench`). Serving Filecoin
//! jobs needs nothing from here: the pipeline handles them through `kernels::job` like any other
//! job. This module and the CLI's argument parsing are the launcher's only feature gates.

pub mod api_bench;
pub mod bench;
pub mod params;
