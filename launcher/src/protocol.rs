//! The service's client protocol: one JSON object per line over a Unix stream socket, a
//! [`Request`] from the client, [`Response`]s from the service (`splitprover run` serves it,
//! `splitprover submit`, `fetch` and `status` are its clients). Proof bytes travel hex-encoded.
//! Adding a field is compatible (serde defaults), renaming one is not.
//!
//! Limits a client meets (`[service]` in the config): a request line of at most
//! `max_line_bytes`, silence of at most `idle_timeout_s` (both end the connection with an
//! [`Response::Error`]), at most `max_connections` at once and `max_queued_jobs` accepted,
//! unfinished jobs (both answered with an error starting with `busy`). A job is acknowledged
//! ([`Response::Accepted`]) only once it is in the service's journal: it survives a restart of
//! the service, and its id is never given to another job. [`Request::Cancel`] ends a job that
//! has not ended yet.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::pipeline::PipelineStatus;

/// Why talking to the service failed.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The socket cannot be reached.
    #[error("cannot connect to the service at `{}`: {source}\nhint: is `splitprover run` running?", socket.display())]
    Connect {
        /// The socket.
        socket: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Reading or writing the socket failed.
    #[error("service connection: {0}")]
    Io(#[from] std::io::Error),
    /// A line is not a message of this protocol.
    #[error("malformed message: {0}")]
    Json(#[from] serde_json::Error),
    /// The other side closed the connection.
    #[error("the service closed the connection")]
    Closed,
    /// Proof bytes that are not hex.
    #[error("bad hex: {0}")]
    Hex(String),
}

/// A client's request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Request {
    /// Prove a job.
    Submit {
        /// Circuit spec.
        circuit: String,
        /// Witness seed.
        seed: u64,
        /// Partitions.
        partitions: u32,
        /// Keep the connection open and send [`Response::Finished`].
        wait: bool,
        /// cuzk's scale: 1 LOW, 2 NORMAL, 3 HIGH, 4 CRITICAL; 0 (the default) takes the kind's
        /// default (WinningPoSt CRITICAL, WindowPoSt HIGH, else NORMAL). Higher priority
        /// partitions are synthesized first, and re-queued first after a restart.
        #[serde(default)]
        priority: i64,
    },
    /// Prove a Filecoin proof request (C1 output, PoSt or SnapDeals request) read from a file on
    /// the service's host.
    SubmitRequest {
        /// The request file (absolute, or relative to the service's working dir).
        path: PathBuf,
        /// The proof kind (`porep:StackedDrg32GiBV1_1`), for request forms that do not name it.
        #[serde(default)]
        kind: Option<String>,
        /// The family the request must be of (`porep`, `post`, `snap`), if the client said.
        #[serde(default)]
        family: Option<String>,
        /// Keep the connection open and send [`Response::Finished`].
        wait: bool,
        /// cuzk's scale: 1 LOW, 2 NORMAL, 3 HIGH, 4 CRITICAL; 0 (the default) takes the kind's
        /// default (WinningPoSt CRITICAL, WindowPoSt HIGH, else NORMAL). Higher priority
        /// partitions are synthesized first, and re-queued first after a restart.
        #[serde(default)]
        priority: i64,
    },
    /// The result of an accepted job, from the journal (also after a restart of the service):
    /// [`Response::Finished`], else [`Response::Queued`] (or, with `wait`, `Finished` once it
    /// ends).
    Fetch {
        /// The id [`Response::Accepted`] gave.
        job_id: u64,
        /// Wait for the job to end.
        #[serde(default)]
        wait: bool,
    },
    /// Describe the service.
    Status,
    /// Cancel an accepted job that has not ended: answered [`Response::Cancelled`] (its journal
    /// state becomes `cancelled`, never re-queued; no proof is delivered) or an error for a job
    /// that is unknown or already ended.
    Cancel {
        /// The id [`Response::Accepted`] gave.
        job_id: u64,
    },
}

/// The service's answers.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Response {
    /// The job was accepted.
    Accepted {
        /// Its id.
        job_id: u64,
    },
    /// The job ended.
    Finished {
        /// Its id.
        job_id: u64,
        /// Proof bytes per partition, hex.
        proofs: Vec<String>,
        /// Why it failed, if it did.
        error: Option<String>,
        /// Milliseconds from submission.
        elapsed_ms: u64,
    },
    /// The job is accepted and not finished yet (an answer to [`Request::Fetch`]).
    Queued {
        /// Its id.
        job_id: u64,
    },
    /// The status.
    Status(Box<PipelineStatus>),
    /// The job was cancelled.
    Cancelled {
        /// Its id.
        job_id: u64,
        /// Some partition of it had been handed to synth-proc.
        was_running: bool,
    },
    /// The request was refused.
    Error {
        /// Why.
        message: String,
    },
}

/// Writes `message` as one JSON line.
pub fn write_line<T: Serialize>(out: &mut UnixStream, message: &T) -> Result<(), ProtocolError> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    out.write_all(&line)?;
    Ok(())
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of lower- or upper-case hex `s`.
pub fn unhex(s: &str) -> Result<Vec<u8>, ProtocolError> {
    if !s.len().is_multiple_of(2) {
        return Err(ProtocolError::Hex("odd length".into()));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            s.get(i..i + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
                .ok_or_else(|| {
                    ProtocolError::Hex(format!("`{}` at {i}", &s[i..(i + 2).min(s.len())]))
                })
        })
        .collect()
}

/// A client connection to the service.
pub struct Client {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
}

impl Client {
    /// Connects to `socket`.
    pub fn connect(socket: &Path) -> Result<Client, ProtocolError> {
        let s = UnixStream::connect(socket).map_err(|source| ProtocolError::Connect {
            socket: socket.to_owned(),
            source,
        })?;
        Ok(Client {
            reader: BufReader::new(s.try_clone()?),
            writer: s,
        })
    }

    /// Sends a request.
    pub fn send(&mut self, r: &Request) -> Result<(), ProtocolError> {
        write_line(&mut self.writer, r)
    }

    /// Reads a response.
    pub fn recv(&mut self) -> Result<Response, ProtocolError> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(ProtocolError::Closed);
        }
        Ok(serde_json::from_str(&line)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_garbage() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(unhex(&hex(&bytes)).unwrap(), bytes);
        assert_eq!(unhex("0aFF").unwrap(), vec![10, 255]);
        assert!(unhex("abc").is_err());
        assert!(unhex("zz").is_err());
        assert!(unhex("é0").is_err());
    }

    #[test]
    fn messages_cross_a_socketpair_as_lines() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let mut client = Client {
            reader: BufReader::new(b.try_clone().unwrap()),
            writer: b,
        };
        write_line(&mut a, &Response::Accepted { job_id: 7 }).unwrap();
        match client.recv().unwrap() {
            Response::Accepted { job_id } => assert_eq!(job_id, 7),
            other => panic!("unexpected {other:?}"),
        }
        drop(a);
        assert!(matches!(client.recv(), Err(ProtocolError::Closed)));
    }
}
