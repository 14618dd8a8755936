//! The service's one client protocol: cuzk's `cuzk.v1.ProvingEngine` gRPC API
//! (`proto/cuzk/v1/proving.proto`, stubs generated at build time into [`pb`]), wire-compatible
//! with the daemon Curio proves through, plus splitprover's own fields numbered from 1000.
//! [`server`] serves it over Unix sockets and TCP (who may connect over TCP: [`access`]);
//! [`client`] is what `splitprover submit`, `fetch`, `cancel`, `status` and `srs` use.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

pub mod access;
pub mod client;
pub mod curio;
pub mod server;

/// The generated messages, enums, client and server of `cuzk.v1`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("cuzk.v1");
}

/// The largest message either side sends or accepts by default (Curio's client limit both ways).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 256 << 20;

/// Where the API is served: a Unix socket or a TCP address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `unix:///run/splitprover/cuzk.sock` (or a plain absolute path).
    Unix(PathBuf),
    /// `127.0.0.1:9820`, `[::1]:9820`, `localhost:9820` (optionally `http://` or `tcp://`).
    Tcp(String),
}

/// An endpoint that cannot be parsed.
#[derive(Debug, thiserror::Error)]
#[error("bad listen address `{text}`: {reason}\nhint: `unix:///path/to.sock` or `host:port`")]
pub struct BadEndpoint {
    text: String,
    reason: &'static str,
}

impl FromStr for Endpoint {
    type Err = BadEndpoint;

    fn from_str(s: &str) -> Result<Endpoint, BadEndpoint> {
        let bad = |reason| BadEndpoint {
            text: s.to_owned(),
            reason,
        };
        if let Some(path) = s
            .strip_prefix("unix://")
            .or_else(|| s.strip_prefix("unix:"))
        {
            if path.is_empty() {
                return Err(bad("no socket path"));
            }
            return Ok(Endpoint::Unix(PathBuf::from(path)));
        }
        if s.starts_with('/') {
            return Ok(Endpoint::Unix(PathBuf::from(s)));
        }
        let hostport = s
            .strip_prefix("http://")
            .or_else(|| s.strip_prefix("tcp://"))
            .unwrap_or(s)
            .trim_end_matches('/');
        let Some((host, port)) = hostport.rsplit_once(':') else {
            return Err(bad("no port"));
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        if port.parse::<u16>().is_err() {
            return Err(bad("the port is not a number from 0 to 65535"));
        }
        Ok(Endpoint::Tcp(hostport.to_owned()))
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(p) => write!(f, "unix://{}", p.display()),
            Endpoint::Tcp(a) => f.write_str(a),
        }
    }
}

/// Our circuit spec and request bytes for a `SubmitProofRequest`: Curio's payloads
/// (`proof_kind` 1–4) through [`curio::translate`], or splitprover's own form
/// (`proof_kind` UNSPECIFIED with `circuit` and `request`).
pub fn submission(
    r: pb::SubmitProofRequest,
) -> Result<crate::service::Submission, crate::service::ServiceError> {
    use crate::pipeline::PipelineError;
    use crate::service::{Reason, Submission};
    use kernels::circuits::AnyCircuit;
    let priority = i64::from(r.priority);
    let (circuit, request) = if r.proof_kind == pb::ProofKind::Unspecified as i32 {
        if r.circuit.is_empty() {
            return Err(Reason::NoProofKind.into());
        }
        let circuit: AnyCircuit = r.circuit.parse().map_err(|cause| PipelineError::BadSpec {
            spec: r.circuit.clone(),
            cause,
        })?;
        (circuit, r.request)
    } else {
        let t = curio_request(&r)
            .and_then(|c| curio::translate(&c))
            .map_err(PipelineError::Request)?;
        (AnyCircuit::Filecoin(t.kind), t.bytes)
    };
    Ok(Submission {
        circuit,
        request,
        priority,
        request_id: Some(r.request_id).filter(|s| !s.is_empty()),
    })
}

/// The proof-carrying fields of a `SubmitProofRequest` in Curio's form, for the translation
/// ([`curio::translate`]); an unknown `proof_kind` is an error naming it.
pub fn curio_request(
    r: &pb::SubmitProofRequest,
) -> Result<curio::CurioRequest<'_>, kernels::Error> {
    Ok(curio::CurioRequest {
        kind: curio::CurioKind::from_wire(r.proof_kind)?,
        sector_size: r.sector_size,
        registered_proof: r.registered_proof,
        vanilla_proof: &r.vanilla_proof,
        vanilla_proofs: &r.vanilla_proofs,
        sector_number: r.sector_number,
        miner_id: r.miner_id,
        randomness: &r.randomness,
        partition_index: r.partition_index,
        comm_r_old: &r.comm_r_old,
        comm_r_new: &r.comm_r_new,
        comm_d_new: &r.comm_d_new,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_as_curio_writes_them() {
        assert_eq!(
            "unix:///run/splitprover/cuzk.sock"
                .parse::<Endpoint>()
                .unwrap(),
            Endpoint::Unix("/run/splitprover/cuzk.sock".into())
        );
        assert_eq!(
            "/tmp/s.sock".parse::<Endpoint>().unwrap(),
            Endpoint::Unix("/tmp/s.sock".into())
        );
        assert_eq!(
            "127.0.0.1:9820".parse::<Endpoint>().unwrap(),
            Endpoint::Tcp("127.0.0.1:9820".into())
        );
        assert_eq!(
            "http://[::1]:9820".parse::<Endpoint>().unwrap(),
            Endpoint::Tcp("[::1]:9820".into())
        );
        for bad in ["unix://", "localhost", ":9820", "host:99999", "host:x"] {
            let e = bad.parse::<Endpoint>().unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn a_submission_without_kind_or_circuit_is_refused_with_the_reason() {
        let e = submission(pb::SubmitProofRequest::default()).unwrap_err();
        assert!(e.to_string().contains("UNSPECIFIED"), "{e}");
        let e = submission(pb::SubmitProofRequest {
            proof_kind: 9,
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("proof_kind 9"), "{e}");
    }

    #[cfg(feature = "filecoin")]
    #[test]
    fn a_porep_whose_sector_number_is_not_its_envelopes_is_refused() {
        let e = submission(pb::SubmitProofRequest {
            proof_kind: pb::ProofKind::PorepSealCommit as i32,
            sector_number: 7,
            vanilla_proof: br#"{"SectorNum": 8, "Phase1Out": "", "SectorSize": 2048}"#.to_vec(),
            ..Default::default()
        })
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("sector_number 7 does not match the envelope's `SectorNum` 8"),
            "{e}"
        );
    }
}
