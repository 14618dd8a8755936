//! Control messages between the launcher and its children (synth-proc, gpu-proc).
//!
//! Bulk data never crosses this channel: a job's request bytes travel in a sealed memfd
//! (`crate::request`) passed with its messages as `SCM_RIGHTS`. It carries job assignments, slot hand-offs, heartbeats and
//! timeline events, one JSON object per line over a Unix stream socket that the launcher creates with
//! `socketpair` and hands to the child by inheritance. Every type here is an IPC interface: adding a
//! field is compatible (serde ignores unknown fields and defaults missing `Option`s), renaming is not.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::os::fd::{BorrowedFd, OwnedFd};
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
/// File descriptor of the first pre-compiled constraint system handed to synth-proc; the others
/// follow.
pub const FIRST_R1CS_FD: i32 = 5;

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
    /// The pre-compiled constraint systems: circuits synthesized through their matrices
    /// (`kernels::r1cs`); the others are synthesized in full.
    #[serde(default)]
    pub r1cs: Vec<R1csEntry>,
}

/// One pre-compiled constraint system a child maps (synth-proc to synthesize through it,
/// gpu-proc to expand witness slots with it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct R1csEntry {
    /// Circuit id the slots carry.
    pub circuit_id: u64,
    /// Circuit spec, for messages.
    pub circuit: String,
    /// Inherited memfd, sealed against writes, holding the encoding.
    pub fd: i32,
    /// Bytes of the encoding (the memfd may be rounded up to its page size).
    pub bytes: u64,
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
    /// Device memory the `gpu` backend may take, bytes; `None`: what the device has free.
    #[serde(default)]
    pub memory_budget: Option<u64>,
    /// The pre-compiled constraint systems of the circuits whose slots may come as witness
    /// slots ([`SynthRequest::witness`]): gpu-proc maps them read-only and computes a, b, c and
    /// the densities of such a slot from them. A witness slot of a circuit not listed here fails
    /// with an error saying so. Their inherited descriptors follow the SRS ones
    /// ([`FIRST_SRS_FD`]: each entry names its own). Missing in a message from an older
    /// launcher: none.
    #[serde(default)]
    pub r1cs: Vec<R1csEntry>,
}

/// The prover backend of a gpu-proc: one type for the configuration file, the command line,
/// the child configuration and the backend factory (`gpu_proc::open_backend`). Written `cpu`,
/// `gpu` or `cuda` everywhere.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// `kernels::CpuBackend` over the shared SRS image.
    #[default]
    Cpu,
    /// `kernels::backend::cuda::CudaBackend` (supraseal-c2); needs a build with `--features cuda`.
    Cuda,
    /// `kernels::backend::gpu::GpuBackend`, our own CUDA prover: the SRS uploaded once from the
    /// shared image and kept resident; needs a build with `--features cuda`.
    Gpu,
}

impl BackendKind {
    /// Every kind, in the order help texts list them.
    pub const ALL: [BackendKind; 3] = [BackendKind::Cpu, BackendKind::Gpu, BackendKind::Cuda];

    /// Its name: `cpu`, `gpu` or `cuda`.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
            BackendKind::Gpu => "gpu",
        }
    }

    /// Whether it proves on a CUDA device (`cuda` and `gpu`).
    pub fn uses_cuda(self) -> bool {
        matches!(self, BackendKind::Cuda | BackendKind::Gpu)
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A backend name that is none of `cpu`, `gpu`, `cuda`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown backend `{0}`: use `cpu`, `gpu` or `cuda`")]
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
    /// Circuit spec string (for example `sha-chain:38`, `porep:StackedDrg32GiBV1_1`).
    pub circuit: String,
    /// Identifier of the circuit (and of its SRS); written into the slot header.
    pub circuit_id: u64,
    /// The job's request bytes (what `kernels::job::open` reads with the circuit), or where they
    /// are.
    pub request: JobRequest,
    /// The job's priority (cuzk's scale: 1 LOW … 4 CRITICAL, already resolved by the launcher).
    /// synth-proc publishes the slot at it (`SlotWriter::set_claim_priority`, clamped to
    /// 0..=255), so gpu-procs claim it before READY slots of lower priority. Missing in a
    /// message from an older launcher: 0, claimed after every prioritized slot.
    #[serde(default)]
    pub priority: i32,
    /// Run on synth-proc's express worker, beside its pool, not behind the partitions queued
    /// there: the launcher sets it for a few HIGH/CRITICAL partitions at a time (WinningPoSt must
    /// not wait for a queue of PoRep syntheses). Missing: false.
    #[serde(default)]
    pub express: bool,
    /// Synthesize into a witness slot (`shm_protocol::SlotKind::Witness`: the inputs, the bit
    /// variables packed one bit each, the other aux values; no a, b, c, no densities) sized by
    /// the circuit's `WitnessCapacity`. Needs the circuit's matrices in synth-proc
    /// ([`SynthConfig::r1cs`]) and in the gpu-procs ([`GpuConfig::r1cs`]); synth-proc
    /// synthesizes a full slot when it has none. Missing in a message from an older launcher:
    /// false.
    #[serde(default)]
    pub witness: bool,
}

/// Where the request bytes of a job are.
///
/// Why two forms: a Filecoin request is bulk data (a 32 GiB sector's C1 output is tens of MB of
/// JSON), which never crosses this channel, so it travels in a sealed memfd
/// (`crate::request`) passed with the message. A built-in circuit's request is 12 bytes (seed,
/// partition count), smaller than the ancillary data that would carry an fd, and the benches
/// submit thousands of such jobs a minute: a memfd (three syscalls and an fd per message) would
/// buy nothing there, so it travels inline. synth-proc treats both alike once it holds the bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobRequest {
    /// The bytes themselves (small requests: built-in circuits).
    Inline(Vec<u8>),
    /// In a sealed memfd (`crate::request::SealedRequest`) of `len` bytes, sent with this
    /// message as `SCM_RIGHTS` ([`Sender::send_with_fd`], [`Receiver::take_fd`]).
    Memfd {
        /// Bytes in the memfd.
        len: u64,
    },
}

/// Launcher → synth-proc.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToSynth {
    /// Synthesize this partition into a free slot and publish it.
    Synthesize(SynthRequest),
    /// The job was cancelled: its partitions not yet started (queued, or waiting for a free
    /// slot) are dropped, each answered with [`FromChild::SynthFailed`]; a synthesis in
    /// progress finishes and publishes (the launcher frees the slot unproved).
    Cancel {
        /// The job.
        job_id: u64,
    },
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
    /// Map one more SRS image: its memfd travels with this message as `SCM_RIGHTS`
    /// ([`Sender::send_with_fd`], [`Receiver::take_fd`]), sealed against writes like those
    /// inherited at start. Answered with [`FromChild::SrsLoaded`]; an SRS already loaded is
    /// answered at once (the new descriptor is dropped).
    LoadSrs {
        /// Circuit id the slots carry.
        circuit_id: u64,
        /// Circuit spec, for messages.
        circuit: String,
        /// The `.params` file it came from (the CUDA backend loads its own copy from it).
        params_path: std::path::PathBuf,
    },
    /// Drop one SRS: its backend (and what the backend derived from it, the CUDA backend's
    /// pinned copy included) and its mapping. Answered with [`FromChild::SrsEvicted`], also
    /// when it was not loaded. The launcher sends it only while no slot of that circuit exists.
    EvictSrs {
        /// Circuit id.
        circuit_id: u64,
    },
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
    /// A gpu-proc's device: sent once its backends are open, and again after each batch with the
    /// free memory read fresh. What `status` (cuzk's `GetStatus`) lists per GPU.
    Device {
        /// The gpu-proc's index ([`GpuConfig::device`]).
        ordinal: u32,
        /// The device's name (`NVIDIA H200`; `CPU backend (<model>, N threads)` for the CPU
        /// backend).
        name: String,
        /// Device memory in bytes (0 for the CPU backend).
        vram_total_bytes: u64,
        /// Device memory free when sent, in bytes (0 for the CPU backend).
        vram_free_bytes: u64,
        /// SRS bytes its backends keep resident in device memory (the `gpu` backend's).
        #[serde(default)]
        srs_device_bytes: u64,
        /// Device memory its backends planned (SRS, scratch, input sets, resident matrices).
        #[serde(default)]
        planned_device_bytes: u64,
        /// The device-memory budget they planned within (`[[gpu]] memory_budget`, or what the
        /// device had free); 0 for backends that plan none.
        #[serde(default)]
        device_budget_bytes: u64,
        /// SRS bytes its backends do not keep resident: copied from the page-locked host image
        /// in chunks for every proof (the `gpu` backend under a budget smaller than the SRS).
        #[serde(default)]
        srs_streamed_bytes: u64,
        /// SRS bytes its backends have copied from the host image so far (every proof's
        /// chunks, summed; a counter).
        #[serde(default)]
        srs_streamed_total_bytes: u64,
    },
    /// Answer to [`ToGpu::LoadSrs`]: the SRS is mapped and its backend open, or why not.
    SrsLoaded {
        /// Circuit id.
        circuit_id: u64,
        /// Why it could not be loaded (`None`: loaded).
        error: Option<String>,
    },
    /// Answer to [`ToGpu::EvictSrs`]: nothing of that SRS is held any more.
    SrsEvicted {
        /// Circuit id.
        circuit_id: u64,
    },
    /// Still alive.
    Heartbeat,
    /// One timeline event.
    Event(TimelineEvent),
}

/// The moments of a proof's path that the timeline records, in path order. A synthesis's
/// phases: `JOB_QUEUED` (the launcher accepted the partition) → `SYNTH_HANDOUT` (sent to
/// synth-proc) → `SYNTH_TAKEN` (a synthesis worker took it; it now waits for a slot) →
/// `SYNTH_START` (slot reserved) → `WITNESS_END` (witness pass done, products start; the
/// pre-compiled synthesis only) → `SYNTH_END`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum EventKind {
    JobQueued,
    SynthHandout,
    SynthTaken,
    SynthStart,
    WitnessEnd,
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
            EventKind::JobQueued => "JOB_QUEUED",
            EventKind::SynthHandout => "SYNTH_HANDOUT",
            EventKind::SynthTaken => "SYNTH_TAKEN",
            EventKind::SynthStart => "SYNTH_START",
            EventKind::WitnessEnd => "WITNESS_END",
            EventKind::SynthEnd => "SYNTH_END",
            EventKind::SlotPublish => "SLOT_PUBLISH",
            EventKind::GpuClaim => "GPU_CLAIM",
            EventKind::GpuStart => "GPU_START",
            EventKind::GpuEnd => "GPU_END",
            EventKind::ProofDone => "PROOF_DONE",
        }
    }
}

/// The `slot` of a [`TimelineEvent`] that involves no ring slot.
pub const NO_SLOT: u32 = u32::MAX;

/// One timeline event; `t_ns` is `CLOCK_MONOTONIC`, comparable across the processes of one host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEvent {
    /// What happened.
    pub kind: EventKind,
    /// Job id.
    pub job_id: u64,
    /// Partition index.
    pub partition: u32,
    /// Slot index ([`NO_SLOT`] where no slot is involved).
    pub slot: u32,
    /// Process that recorded it.
    pub pid: u32,
    /// Thread that recorded it (0: not recorded). Two syntheses on one thread never overlap:
    /// the timeline checks it (`Intervals::nested_syntheses`).
    #[serde(default)]
    pub tid: u32,
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
            tid: current_tid(),
            t_ns: monotonic_ns(),
        }
    }
}

/// The calling thread's id (`gettid`).
pub fn current_tid() -> u32 {
    rustix::thread::gettid().as_raw_nonzero().get() as u32
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

/// Receiving half of a control channel. It reads with `recvmsg`, so file descriptors sent with
/// a message ([`Sender::send_with_fd`]) are kept, in order, for [`Receiver::take_fd`].
#[derive(Debug)]
pub struct Receiver {
    stream: UnixStream,
    buf: Vec<u8>,
    fds: VecDeque<OwnedFd>,
    eof: bool,
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
                // The workspace's flag convention: stored Release, loaded Acquire.
                while !flag.load(std::sync::atomic::Ordering::Acquire) {
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
        // See `spawn_heartbeat`.
        self.stop.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// Splits a connected stream into its two halves.
pub fn channel(stream: UnixStream) -> io::Result<(Sender, Receiver)> {
    let read = stream.try_clone()?;
    Ok((
        Sender { stream },
        Receiver {
            stream: read,
            buf: Vec::new(),
            fds: VecDeque::new(),
            eof: false,
        },
    ))
}

impl Sender {
    /// Sends one message as a single line; the write is one `write_all` of the whole line.
    pub fn send<T: Serialize>(&mut self, msg: &T) -> io::Result<()> {
        self.stream.write_all(&line(msg)?)
    }

    /// Sends one message with a file descriptor as `SCM_RIGHTS` ancillary data, attached to the
    /// line's first bytes: the receiver holds the descriptor once it has the whole line, and
    /// takes it with [`Receiver::take_fd`].
    pub fn send_with_fd<T: Serialize>(&mut self, msg: &T, fd: BorrowedFd<'_>) -> io::Result<()> {
        use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
        let line = line(msg)?;
        let fds = [fd];
        let mut space = [0u8; rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
            return Err(io::Error::other("no room for the file descriptor"));
        }
        let sent = loop {
            match rustix::net::sendmsg(
                &self.stream,
                &[io::IoSlice::new(&line)],
                &mut control,
                SendFlags::NOSIGNAL,
            ) {
                Ok(n) => break n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        };
        // The descriptor went with the first bytes; the rest of a long line follows plainly.
        self.stream.write_all(&line[sent..])
    }

    /// Another handle on the same socket (each thread keeps its own).
    pub fn try_clone(&self) -> io::Result<Sender> {
        Ok(Sender {
            stream: self.stream.try_clone()?,
        })
    }
}

fn line<T: Serialize>(msg: &T) -> io::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(msg).map_err(io::Error::other)?;
    line.push(b'\n');
    Ok(line)
}

/// File descriptors kept at most between [`Receiver::take_fd`] calls: a peer that sends more
/// without messages that claim them is broken.
const MAX_PENDING_FDS: usize = 4096;

impl Receiver {
    /// Receives the next message; `Ok(None)` when the peer closed the channel. A line that is not a
    /// valid message is an `InvalidData` error naming the problem.
    pub fn recv<T: DeserializeOwned>(&mut self) -> io::Result<Option<T>> {
        let line = loop {
            if let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
                let mut line: Vec<u8> = self.buf.drain(..=end).collect();
                line.pop();
                break line;
            }
            if self.eof {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                // A last line without its newline (the peer died mid-write, or wrote it so).
                break std::mem::take(&mut self.buf);
            }
            self.fill()?;
        };
        let bad = |e: &dyn std::fmt::Display| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad control message: {e}"),
            )
        };
        let text = std::str::from_utf8(&line).map_err(|e| bad(&e))?;
        serde_json::from_str(text.trim_end())
            .map(Some)
            .map_err(|e| bad(&e))
    }

    /// The oldest file descriptor received and not yet taken (see [`Sender::send_with_fd`]): a
    /// message announcing one takes it right after [`Receiver::recv`] returned that message.
    pub fn take_fd(&mut self) -> Option<OwnedFd> {
        self.fds.pop_front()
    }

    /// One `recvmsg`: appends the bytes to the buffer and the descriptors to the queue.
    fn fill(&mut self) -> io::Result<()> {
        use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
        let mut chunk = [0u8; 64 * 1024];
        let mut space = [0u8; rustix::cmsg_space!(ScmRights(16))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let got = loop {
            match rustix::net::recvmsg(
                &self.stream,
                &mut [io::IoSliceMut::new(&mut chunk)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            ) {
                Ok(r) => break r,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        };
        for msg in control.drain() {
            if let RecvAncillaryMessage::ScmRights(fds) = msg {
                self.fds.extend(fds);
            }
        }
        // MSG_CTRUNC: rustix 0.38 names no such flag but keeps every bit.
        if got.flags.bits() & (libc::MSG_CTRUNC as u32) != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "control message: file descriptors were dropped (ancillary data truncated)",
            ));
        }
        if self.fds.len() > MAX_PENDING_FDS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "control channel: more than {MAX_PENDING_FDS} file descriptors sent and not claimed"
                ),
            ));
        }
        if got.bytes == 0 {
            self.eof = true;
        }
        self.buf.extend_from_slice(&chunk[..got.bytes]);
        Ok(())
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
            request: JobRequest::Inline(vec![5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]),
            priority: 4,
            express: false,
            witness: true,
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
        let err = "opencl".parse::<BackendKind>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown backend `opencl`: use `cpu`, `gpu` or `cuda`"
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
    #[cfg(not(loom))] // `request` (memfds) is not built for the loom model check
    fn a_request_memfd_travels_with_its_message_sealed_and_intact() {
        use crate::request::{MappedRequest, SealedRequest};
        let (a, b) = UnixStream::pair().unwrap();
        let (mut tx, _) = channel(a).unwrap();
        let (_, mut rx) = channel(b).unwrap();
        // Two jobs' requests, large enough that a line spans several reads, between plain
        // messages; each memfd arrives with its own message, in order.
        let requests: Vec<Vec<u8>> = (0..2u8)
            .map(|k| (0..300_000u32).map(|i| (i as u8) ^ k).collect())
            .collect();
        let sealed: Vec<SealedRequest> = requests
            .iter()
            .map(|r| SealedRequest::create("test", r).unwrap())
            .collect();
        let msg = |job_id: u64, len: u64| {
            ToSynth::Synthesize(SynthRequest {
                job_id,
                partition: 0,
                // A long circuit string makes the line longer than one socket buffer's worth.
                circuit: "x".repeat(200_000),
                circuit_id: 1,
                request: JobRequest::Memfd { len },
                priority: 2,
                express: false,
                witness: false,
            })
        };
        let sender = std::thread::spawn(move || {
            tx.send(&ToSynth::Shutdown).unwrap();
            for (job, s) in sealed.iter().enumerate() {
                tx.send_with_fd(&msg(job as u64, s.len()), s.fd()).unwrap();
            }
            tx.send(&ToSynth::Shutdown).unwrap();
            // The launcher keeps its copies; dropping them here must not matter to the receiver.
        });
        // A plain message takes no descriptor. One may already be queued after it: a read can
        // run ahead into the next message, whose descriptor arrives with its first bytes. The
        // queue is in arrival order and only a message that announces a descriptor takes one,
        // so each request still gets its own.
        assert_eq!(rx.recv::<ToSynth>().unwrap(), Some(ToSynth::Shutdown));
        for (job, bytes) in requests.iter().enumerate() {
            let Some(ToSynth::Synthesize(req)) = rx.recv::<ToSynth>().unwrap() else {
                panic!("expected a synthesis request");
            };
            assert_eq!(req.job_id, job as u64);
            let JobRequest::Memfd { len } = req.request else {
                panic!("expected a memfd request");
            };
            let fd = rx.take_fd().expect("the memfd came with its message");
            let mapped = MappedRequest::open(fd, len).unwrap();
            assert_eq!(mapped.bytes(), &bytes[..], "job {job}: bytes intact");
        }
        assert_eq!(rx.recv::<ToSynth>().unwrap(), Some(ToSynth::Shutdown));
        sender.join().unwrap();
        assert_eq!(rx.recv::<ToSynth>().unwrap(), None);
        assert!(rx.take_fd().is_none());
    }

    #[test]
    fn a_synth_request_without_priority_still_decodes() {
        let old = r#"{"Synthesize":{"job_id":3,"partition":1,"circuit":"bits:4","circuit_id":5,"request":{"Inline":[1,2]}}}"#;
        match serde_json::from_str::<ToSynth>(old).unwrap() {
            ToSynth::Synthesize(req) => {
                assert_eq!((req.job_id, req.priority, req.witness), (3, 0, false))
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Issue 31: a gpu-proc configuration without matrices (an older launcher's) decodes with
    /// none; one with them round-trips.
    #[test]
    fn a_gpu_config_without_matrices_still_decodes() {
        let old = r#"{"Gpu":{"device":1,"backend":"gpu","batch":2,"srs":[]}}"#;
        let ChildConfig::Gpu(c) = serde_json::from_str::<ChildConfig>(old).unwrap() else {
            panic!("not a gpu config")
        };
        assert_eq!(
            (c.device, c.backend, c.r1cs.len()),
            (1, BackendKind::Gpu, 0)
        );
        let with = ChildConfig::Gpu(GpuConfig {
            r1cs: vec![R1csEntry {
                circuit_id: 3,
                circuit: "bits:8".into(),
                fd: 9,
                bytes: 4096,
            }],
            ..c
        });
        let json = serde_json::to_string(&with).unwrap();
        assert_eq!(serde_json::from_str::<ChildConfig>(&json).unwrap(), with);
    }

    #[test]
    #[cfg(not(loom))] // `Region` (memfds) is not built for the loom model check
    fn an_srs_memfd_travels_with_its_load_message_still_sealed() {
        let (a, b) = UnixStream::pair().unwrap();
        let (mut tx, _) = channel(a).unwrap();
        let (_, mut rx) = channel(b).unwrap();
        let mut region =
            crate::Region::create_write_once("splitprover-srs", 4096, crate::HugePagePolicy::Plain)
                .unwrap();
        // SAFETY: just created, its fd not passed to anyone yet.
        let bytes = unsafe { region.as_mut_slice() };
        bytes[..3].copy_from_slice(b"srs");
        region.seal_writes().unwrap();
        let load = ToGpu::LoadSrs {
            circuit_id: 7,
            circuit: "sha-chain:1".into(),
            params_path: "/tmp/x.params".into(),
        };
        tx.send(&ToGpu::Pause).unwrap();
        tx.send_with_fd(&load, region.fd()).unwrap();
        tx.send(&ToGpu::EvictSrs { circuit_id: 7 }).unwrap();
        assert_eq!(rx.recv::<ToGpu>().unwrap(), Some(ToGpu::Pause));
        assert_eq!(rx.recv::<ToGpu>().unwrap(), Some(load));
        let fd = rx.take_fd().expect("the memfd came with its message");
        // SAFETY: a sealed memfd nobody writes; this test owns the received descriptor.
        let mapped = unsafe { crate::Region::from_inherited_fd_read_only(fd) }.unwrap();
        assert!(mapped.is_write_sealed());
        // SAFETY: sealed against writes above.
        assert_eq!(&unsafe { mapped.as_slice() }[..3], b"srs");
        assert_eq!(
            rx.recv::<ToGpu>().unwrap(),
            Some(ToGpu::EvictSrs { circuit_id: 7 })
        );
        // The answers are plain messages.
        for msg in [
            FromChild::SrsLoaded {
                circuit_id: 7,
                error: Some("no".into()),
            },
            FromChild::SrsEvicted { circuit_id: 7 },
        ] {
            let json = serde_json::to_string(&msg).unwrap();
            assert_eq!(serde_json::from_str::<FromChild>(&json).unwrap(), msg);
        }
    }

    #[test]
    fn a_device_report_round_trips() {
        let msg = FromChild::Device {
            ordinal: 1,
            name: "NVIDIA H200".into(),
            vram_total_bytes: 150_000_000_000,
            vram_free_bytes: 149_000_000_000,
            srs_device_bytes: 7_600_000_000,
            planned_device_bytes: 9_000_000_000,
            device_budget_bytes: 24_000_000_000,
            srs_streamed_bytes: 3_000_000_000,
            srs_streamed_total_bytes: 300_000_000_000,
        };
        let json = serde_json::to_string(&msg).unwrap();
        assert!(
            json.contains(
                ",\"srs_streamed_bytes\":3000000000,\"srs_streamed_total_bytes\":300000000000"
            ),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<FromChild>(&json).unwrap(), msg);
        // A report from a gpu-proc without the streamed bytes reads as nothing streamed.
        let unstreamed = json.replace(
            ",\"srs_streamed_bytes\":3000000000,\"srs_streamed_total_bytes\":300000000000",
            "",
        );
        assert_ne!(unstreamed, json);
        let mut want = msg.clone();
        if let FromChild::Device {
            srs_streamed_bytes,
            srs_streamed_total_bytes,
            ..
        } = &mut want
        {
            (*srs_streamed_bytes, *srs_streamed_total_bytes) = (0, 0);
        }
        assert_eq!(
            serde_json::from_str::<FromChild>(&unstreamed).unwrap(),
            want
        );
        // A report from a gpu-proc of an older version (no SRS bytes at all) still reads.
        let old = unstreamed.replace(
            ",\"srs_device_bytes\":7600000000,\"planned_device_bytes\":9000000000,\
             \"device_budget_bytes\":24000000000",
            "",
        );
        assert_ne!(old, unstreamed);
        match serde_json::from_str::<FromChild>(&old).unwrap() {
            FromChild::Device {
                srs_device_bytes,
                srs_streamed_bytes,
                srs_streamed_total_bytes,
                ..
            } => assert_eq!(
                (
                    srs_device_bytes,
                    srs_streamed_bytes,
                    srs_streamed_total_bytes
                ),
                (0, 0, 0)
            ),
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
