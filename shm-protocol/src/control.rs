//! Control messages between the launcher and its children (synth-proc, gpu-proc).
//!
//! Bulk data never crosses this channel: it carries job assignments, slot hand-offs, heartbeats and
//! timeline events, one JSON object per line over a Unix stream socket that the launcher creates with
//! `socketpair` and hands to the child by inheritance. Every type here is an IPC interface: adding a
//! field is compatible (serde ignores unknown fields and defaults missing `Option`s), renaming is not.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

use serde::{de::DeserializeOwned, Deserialize, Serialize};

/// Environment variable through which the launcher hands a child its [`ChildConfig`] (JSON).
pub const CHILD_CONFIG_ENV: &str = "SPLITPROVER_CHILD_CONFIG";
/// File descriptor at which a child finds the ring's memfd.
pub const RING_FD: i32 = 3;
/// File descriptor at which a child finds its control socket.
pub const CONTROL_FD: i32 = 4;
/// File descriptor of the first SRS memfd handed to a gpu-proc; the others follow.
pub const FIRST_SRS_FD: i32 = 5;

/// What a child process is told at start (besides its inherited file descriptors).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChildConfig {
    /// Run as synth-proc.
    Synth(SynthConfig),
    /// Run as gpu-proc.
    Gpu(GpuConfig),
}

/// synth-proc settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SynthConfig {
    /// Partitions synthesized at once (each takes one slot while it runs).
    pub concurrency: usize,
}

/// gpu-proc settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuConfig {
    /// Index of this gpu-proc (and its CUDA device).
    pub device: u32,
    /// The prover backend.
    pub backend: BackendKind,
    /// Slots of one circuit proved together in one backend call, at most.
    pub batch: usize,
    /// The SRS of every circuit served.
    pub srs: Vec<SrsEntry>,
}

/// The prover backend of a gpu-proc: one type for the configuration file, the command line,
/// the child configuration and the backend factory (`gpu_proc::open_backend`). Written `cpu` or
/// `cuda` everywhere.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// `kernels::CpuBackend` over the shared SRS image.
    #[default]
    Cpu,
    /// `kernels::backend::cuda::CudaBackend` (supraseal-c2); needs a build with `--features cuda`.
    Cuda,
}

impl BackendKind {
    /// Every kind, in the order help texts list them.
    pub const ALL: [BackendKind; 2] = [BackendKind::Cpu, BackendKind::Cuda];

    /// Its name: `cpu` or `cuda`.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A backend name that is neither `cpu` nor `cuda`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown backend `{0}`: use `cpu` or `cuda`")]
pub struct UnknownBackend(pub String);

impl std::str::FromStr for BackendKind {
    type Err = UnknownBackend;

    fn from_str(s: &str) -> Result<Self, UnknownBackend> {
        BackendKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownBackend(s.to_owned()))
    }
}

/// One SRS a gpu-proc maps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrsEntry {
    /// Circuit id the slots carry.
    pub circuit_id: u64,
    /// Circuit spec, for messages.
    pub circuit: String,
    /// Inherited memfd holding the SRS image (see `kernels::srs`).
    pub fd: i32,
    /// The `.params` file it came from (the CUDA backend loads its own copy from it).
    pub params_path: std::path::PathBuf,
}

/// A request to synthesize one partition into a ring slot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SynthRequest {
    /// Job the partition belongs to.
    pub job_id: u64,
    /// Partition index within the job.
    pub partition: u32,
    /// Circuit spec string (for example `sha-chain:38`).
    pub circuit: String,
    /// Identifier of the circuit (and of its SRS); written into the slot header.
    pub circuit_id: u64,
    /// Seed of the witness (built-in circuits).
    pub seed: u64,
    /// The proof request file the witness comes from (Filecoin circuits: a C1 output, a PoSt or
    /// SnapDeals request); `None` for built-in circuits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<std::path::PathBuf>,
}

/// Launcher → synth-proc.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToSynth {
    /// Synthesize this partition into a free slot and publish it.
    Synthesize(SynthRequest),
    /// Finish the syntheses in progress, then exit.
    Shutdown,
}

/// Launcher → gpu-proc.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToGpu {
    /// Finish the batch in progress, then exit.
    Shutdown,
    /// Stop claiming slots after the batch in progress; answer [`FromChild::Paused`] once no
    /// claim can happen any more.
    Pause,
    /// Claim slots again.
    Resume,
}

/// What a child reports to the launcher.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FromChild {
    /// The child has mapped its regions and is serving.
    Hello {
        /// Process id.
        pid: u32,
        /// What it runs (`synth-proc: 2 workers`, `gpu-proc: cpu backend`).
        detail: String,
    },
    /// A partition was published READY in `slot`.
    Published {
        /// Job id.
        job_id: u64,
        /// Partition index.
        partition: u32,
        /// Slot index.
        slot: u32,
        /// Slot generation at publish time (the ring's full 37-bit counter).
        generation: u64,
    },
    /// A partition could not be synthesized; the job fails with this reason.
    SynthFailed {
        /// Job id.
        job_id: u64,
        /// Partition index.
        partition: u32,
        /// Why.
        error: String,
    },
    /// A slot reached DONE (proof or failure in its result area).
    Proved {
        /// Job id.
        job_id: u64,
        /// Partition index.
        partition: u32,
        /// Slot index.
        slot: u32,
        /// Slot generation at completion (the ring's full 37-bit counter).
        generation: u64,
    },
    /// A gpu-proc has stopped claiming slots (answer to [`ToGpu::Pause`]).
    Paused,
    /// Still alive.
    Heartbeat,
    /// One timeline event.
    Event(TimelineEvent),
}

/// The moments of a proof's path that the timeline records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum EventKind {
    SynthStart,
    SynthEnd,
    SlotPublish,
    GpuClaim,
    GpuStart,
    GpuEnd,
    ProofDone,
}

impl EventKind {
    /// The upper-case name used in TIMELINE logs.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::SynthStart => "SYNTH_START",
            EventKind::SynthEnd => "SYNTH_END",
            EventKind::SlotPublish => "SLOT_PUBLISH",
            EventKind::GpuClaim => "GPU_CLAIM",
            EventKind::GpuStart => "GPU_START",
            EventKind::GpuEnd => "GPU_END",
            EventKind::ProofDone => "PROOF_DONE",
        }
    }
}

/// One timeline event; `t_ns` is `CLOCK_MONOTONIC`, comparable across the processes of one host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEvent {
    /// What happened.
    pub kind: EventKind,
    /// Job id.
    pub job_id: u64,
    /// Partition index.
    pub partition: u32,
    /// Slot index (`u32::MAX` where no slot is involved).
    pub slot: u32,
    /// Process that recorded it.
    pub pid: u32,
    /// Monotonic clock, nanoseconds.
    pub t_ns: u64,
}

impl TimelineEvent {
    /// An event stamped now by this process.
    pub fn now(kind: EventKind, job_id: u64, partition: u32, slot: u32) -> Self {
        TimelineEvent {
            kind,
            job_id,
            partition,
            slot,
            pid: std::process::id(),
            t_ns: monotonic_ns(),
        }
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sending half of a control channel.
#[derive(Debug)]
pub struct Sender {
    stream: UnixStream,
}

/// Receiving half of a control channel.
#[derive(Debug)]
pub struct Receiver {
    reader: BufReader<UnixStream>,
    line: String,
}

/// A [`Sender`] shared by the threads of a child: the serving loop and the heartbeat. Each
/// message is written whole under the lock, so lines never interleave.
#[derive(Clone, Debug)]
pub struct SharedSender(std::sync::Arc<std::sync::Mutex<Sender>>);

impl SharedSender {
    /// Wraps a sender.
    pub fn new(sender: Sender) -> Self {
        SharedSender(std::sync::Arc::new(std::sync::Mutex::new(sender)))
    }

    /// Sends one message.
    pub fn send<T: Serialize>(&self, msg: &T) -> io::Result<()> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).send(msg)
    }

    /// Sends [`FromChild::Heartbeat`] every `interval` from a background thread until the
    /// returned guard is dropped or the launcher is gone. The launcher kills a child whose
    /// heartbeats stop (a hung GPU call, a stopped process).
    pub fn spawn_heartbeat(&self, interval: std::time::Duration) -> Heartbeat {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, sender) = (stop.clone(), self.clone());
        std::thread::Builder::new()
            .name("heartbeat".into())
            .spawn(move || {
                // Relaxed: a plain flag polled once per interval; no data is published with it.
                while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                    if sender.send(&FromChild::Heartbeat).is_err() {
                        break;
                    }
                    std::thread::sleep(interval);
                }
            })
            .map(drop)
            .unwrap_or_else(|e| tracing::warn!("cannot start the heartbeat thread: {e}"));
        Heartbeat { stop }
    }
}

/// Stops the heartbeat thread when dropped.
#[derive(Debug)]
pub struct Heartbeat {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        // Relaxed: a plain flag, see `spawn_heartbeat`.
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Splits a connected stream into its two halves.
pub fn channel(stream: UnixStream) -> io::Result<(Sender, Receiver)> {
    let read = stream.try_clone()?;
    Ok((
        Sender { stream },
        Receiver {
            reader: BufReader::new(read),
            line: String::new(),
        },
    ))
}

impl Sender {
    /// Sends one message as a single line; the write is one `write_all` of the whole line.
    pub fn send<T: Serialize>(&mut self, msg: &T) -> io::Result<()> {
        let mut line = serde_json::to_vec(msg).map_err(io::Error::other)?;
        line.push(b'\n');
        self.stream.write_all(&line)
    }

    /// Another handle on the same socket (each thread keeps its own).
    pub fn try_clone(&self) -> io::Result<Sender> {
        Ok(Sender {
            stream: self.stream.try_clone()?,
        })
    }
}

impl Receiver {
    /// Receives the next message; `Ok(None)` when the peer closed the channel. A line that is not a
    /// valid message is an `InvalidData` error naming the problem.
    pub fn recv<T: DeserializeOwned>(&mut self) -> io::Result<Option<T>> {
        self.line.clear();
        if self.reader.read_line(&mut self.line)? == 0 {
            return Ok(None);
        }
        serde_json::from_str(self.line.trim_end())
            .map(Some)
            .map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bad control message: {e}"),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_over_a_socketpair() {
        let (a, b) = UnixStream::pair().unwrap();
        let (mut tx, _) = channel(a).unwrap();
        let (_, mut rx) = channel(b).unwrap();
        let req = ToSynth::Synthesize(SynthRequest {
            job_id: 7,
            partition: 2,
            circuit: "sha-chain:1".into(),
            circuit_id: 99,
            seed: 5,
            input: Some("/tmp/c1.json".into()),
        });
        tx.send(&req).unwrap();
        tx.send(&FromChild::Event(TimelineEvent::now(
            EventKind::GpuEnd,
            1,
            0,
            3,
        )))
        .unwrap();
        assert_eq!(rx.recv::<ToSynth>().unwrap(), Some(req));
        match rx.recv::<FromChild>().unwrap() {
            Some(FromChild::Event(e)) => {
                assert_eq!((e.kind, e.job_id, e.slot), (EventKind::GpuEnd, 1, 3));
                assert!(e.t_ns > 0);
            }
            other => panic!("unexpected {other:?}"),
        }
        drop(tx);
        assert_eq!(rx.recv::<ToSynth>().unwrap(), None);
    }

    #[test]
    fn backend_kinds_parse_print_and_serialize_as_their_names() {
        for kind in BackendKind::ALL {
            assert_eq!(kind.to_string().parse::<BackendKind>(), Ok(kind));
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
            assert_eq!(serde_json::from_str::<BackendKind>(&json).unwrap(), kind);
        }
        let err = "gpu".parse::<BackendKind>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown backend `gpu`: use `cpu` or `cuda`"
        );
        assert!(serde_json::from_str::<BackendKind>("\"CUDA\"").is_err());
    }

    #[test]
    fn generations_cross_at_full_width() {
        let big = (1u64 << 37) - 1;
        let msg = FromChild::Proved {
            job_id: 1,
            partition: 0,
            slot: 2,
            generation: big,
        };
        let json = serde_json::to_string(&msg).unwrap();
        match serde_json::from_str::<FromChild>(&json).unwrap() {
            FromChild::Proved { generation, .. } => assert_eq!(generation, big),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn garbage_line_is_a_clear_error() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let (_, mut rx) = channel(b).unwrap();
        a.write_all(b"{not json\n").unwrap();
        let err = rx.recv::<ToSynth>().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("bad control message"), "{err}");
    }
}
