//! Opening a job: the one place that picks the family of a circuit (a built-in circuit or a
//! Filecoin proof kind) and hands its request bytes to that family's job.

use super::{BuiltinJob, BuiltinRequest, Job};
use crate::circuits::AnyCircuit;
use crate::filecoin::ProofKind;
use crate::types::{Error, ErrorKind, ProofFamily};

/// Opens a job of `circuit` from its request bytes: parses and checks them (for Filecoin: the
/// vanilla proofs are verified). Errors name the problem.
pub fn open(circuit: &AnyCircuit, request: &[u8]) -> Result<Box<dyn Job>, Error> {
    match circuit {
        AnyCircuit::Builtin(spec) => {
            let request = BuiltinRequest::from_bytes(request)?;
            Ok(Box::new(BuiltinJob::new(*spec, request)?))
        }
        AnyCircuit::Filecoin(kind) => crate::filecoin::open_job(*kind, request),
    }
}

/// The proof kind of a Filecoin request: `kind` if given, else the kind the bytes name; either
/// way it must be of `family` when one is given (the flag the file came with), so a SnapDeals
/// request given as a PoSt one is refused instead of proving something else.
pub fn filecoin_request_kind(
    bytes: &[u8],
    kind: Option<ProofKind>,
    family: Option<ProofFamily>,
) -> Result<ProofKind, Error> {
    let kind = match kind {
        Some(k) => k,
        None => crate::filecoin::detect_kind(bytes)?,
    };
    match family {
        Some(expected) if kind.family() != expected => Err(ErrorKind::InvalidRequest(format!(
            "the request is {} (`{kind}`), not {expected}\nhint: use --{} for it",
            kind.family(),
            kind.family().flag()
        ))
        .into()),
        _ => Ok(kind),
    }
}
