//! A blocking client of the API for the CLI (`submit`, `fetch`, `cancel`, `status`, `srs`) and
//! the tests: the generated tonic client on a small tokio runtime of its own.

use std::path::PathBuf;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint as TonicEndpoint};

use super::access::ClientTls;
use super::pb::{self, proving_engine_client::ProvingEngineClient};
use super::{Endpoint, DEFAULT_MAX_MESSAGE_BYTES};

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The service cannot be reached. Why is the source (printed by anyhow's `{:#}` at the
    /// CLI's edge: `transport error: …: No such file or directory`).
    #[error("cannot connect to the service at `{endpoint}` (is `splitprover run` running?)")]
    Connect {
        /// Where.
        endpoint: String,
        /// Why.
        #[source]
        cause: tonic::transport::Error,
    },
    /// The service answered with an error.
    #[error("{}", .0.message())]
    Status(tonic::Status),
    /// A TLS file could not be read.
    #[error(transparent)]
    Tls(super::access::TlsFileError),
    /// The client's runtime could not start.
    #[error("cannot start the client runtime: {0}")]
    Runtime(std::io::Error),
}

// Not `#[from]`: that would make the status the error's source, and `{:#}` would repeat it.
impl From<tonic::Status> for ClientError {
    fn from(s: tonic::Status) -> Self {
        ClientError::Status(s)
    }
}

impl ClientError {
    /// The gRPC code, for an answer of the service.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            ClientError::Status(s) => Some(s.code()),
            _ => None,
        }
    }
}

/// A connection to the service.
pub struct Client {
    rt: tokio::runtime::Runtime,
    inner: ProvingEngineClient<Channel>,
}

impl Client {
    /// Connects to `endpoint`, with the default message limit (256 MiB) both ways.
    pub fn connect(endpoint: &Endpoint) -> Result<Client, ClientError> {
        Self::connect_with_limit(endpoint, DEFAULT_MAX_MESSAGE_BYTES)
    }

    /// Connects to `endpoint` with a message limit of `max_message_bytes` both ways.
    pub fn connect_with_limit(
        endpoint: &Endpoint,
        max_message_bytes: usize,
    ) -> Result<Client, ClientError> {
        Self::connect_with(endpoint, max_message_bytes, &ClientTls::default())
    }

    /// Connects to `endpoint` with a message limit of `max_message_bytes` both ways, over TLS
    /// when `tls` sets anything (TCP only: a Unix socket is never TLS).
    pub fn connect_with(
        endpoint: &Endpoint,
        max_message_bytes: usize,
        tls: &ClientTls,
    ) -> Result<Client, ClientError> {
        // One worker of its own: the connection's task must run between calls too, or the
        // server's HTTP/2 keepalive pings go unanswered and it closes an idle connection.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(ClientError::Runtime)?;
        let connect_err = |cause| ClientError::Connect {
            endpoint: endpoint.to_string(),
            cause,
        };
        let channel = rt.block_on(async {
            match endpoint {
                Endpoint::Unix(path) => {
                    let path: PathBuf = path.clone();
                    // The URI is required by the API and unused: the connector dials the socket.
                    TonicEndpoint::from_static("http://splitprover.invalid")
                        .connect_timeout(Duration::from_secs(10))
                        .connect_with_connector(tower::service_fn(move |_| {
                            let path = path.clone();
                            async move {
                                let s = tokio::net::UnixStream::connect(path).await?;
                                Ok::<_, std::io::Error>(TokioIo::new(s))
                            }
                        }))
                        .await
                }
                Endpoint::Tcp(addr) if tls.is_set() => {
                    let host = addr.rsplit_once(':').map_or(addr.as_str(), |(h, _)| h);
                    let config = tls.config(host).map_err(ClientError::Tls)?;
                    TonicEndpoint::from_shared(format!("https://{addr}"))
                        .map_err(connect_err)?
                        .tls_config(config)
                        .map_err(connect_err)?
                        .connect_timeout(Duration::from_secs(10))
                        .connect()
                        .await
                }
                Endpoint::Tcp(addr) => {
                    TonicEndpoint::from_shared(format!("http://{addr}"))
                        .map_err(connect_err)?
                        .connect_timeout(Duration::from_secs(10))
                        .connect()
                        .await
                }
            }
            .map_err(connect_err)
        })?;
        let inner = ProvingEngineClient::new(channel)
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes);
        Ok(Client { rt, inner })
    }

    /// `SubmitProof`.
    pub fn submit(
        &mut self,
        r: pb::SubmitProofRequest,
    ) -> Result<pb::SubmitProofResponse, ClientError> {
        Ok(self.rt.block_on(self.inner.submit_proof(r))?.into_inner())
    }

    /// `AwaitProof` (`timeout_ms` 0: no limit).
    pub fn await_proof(
        &mut self,
        job_id: &str,
        timeout_ms: u64,
    ) -> Result<pb::AwaitProofResponse, ClientError> {
        let r = pb::AwaitProofRequest {
            job_id: job_id.to_owned(),
            timeout_ms,
        };
        Ok(self.rt.block_on(self.inner.await_proof(r))?.into_inner())
    }

    /// `Prove`.
    pub fn prove(
        &mut self,
        submit: pb::SubmitProofRequest,
    ) -> Result<pb::AwaitProofResponse, ClientError> {
        let r = pb::ProveRequest {
            submit: Some(submit),
        };
        let answer = self.rt.block_on(self.inner.prove(r))?.into_inner();
        answer
            .result
            .ok_or_else(|| tonic::Status::internal("ProveResponse without a result").into())
    }

    /// `CancelProof`: whether the job had started.
    pub fn cancel(&mut self, job_id: &str) -> Result<bool, ClientError> {
        let r = pb::CancelProofRequest {
            job_id: job_id.to_owned(),
        };
        Ok(self
            .rt
            .block_on(self.inner.cancel_proof(r))?
            .into_inner()
            .was_running)
    }

    /// `GetStatus`.
    pub fn status(&mut self) -> Result<pb::GetStatusResponse, ClientError> {
        Ok(self
            .rt
            .block_on(self.inner.get_status(pb::GetStatusRequest {}))?
            .into_inner())
    }

    /// `GetMetrics`.
    pub fn metrics(&mut self) -> Result<String, ClientError> {
        Ok(self
            .rt
            .block_on(self.inner.get_metrics(pb::GetMetricsRequest {}))?
            .into_inner()
            .prometheus_text)
    }

    /// `PreloadSRS`.
    pub fn preload_srs(&mut self, circuit_id: &str) -> Result<pb::PreloadSrsResponse, ClientError> {
        let r = pb::PreloadSrsRequest {
            circuit_id: circuit_id.to_owned(),
        };
        Ok(self.rt.block_on(self.inner.preload_srs(r))?.into_inner())
    }

    /// `EvictSRS`.
    pub fn evict_srs(&mut self, circuit_id: &str) -> Result<pb::EvictSrsResponse, ClientError> {
        let r = pb::EvictSrsRequest {
            circuit_id: circuit_id.to_owned(),
        };
        Ok(self.rt.block_on(self.inner.evict_srs(r))?.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_that_is_not_there_is_named_with_the_reason_at_the_cli_edge() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("absent.sock");
        let endpoint = Endpoint::Unix(socket);
        let e = match Client::connect(&endpoint) {
            Err(e) => e,
            Ok(_) => panic!("nothing listens on `{endpoint}`"),
        };
        assert!(matches!(e, ClientError::Connect { .. }), "{e:?}");
        // What `main` prints: the message, then its causes down to the OS's reason.
        let printed = format!("{:#}", anyhow::Error::from(e));
        assert!(
            printed.starts_with(&format!("cannot connect to the service at `{endpoint}`")),
            "{printed}"
        );
        assert!(printed.contains("No such file or directory"), "{printed}");
    }
}
