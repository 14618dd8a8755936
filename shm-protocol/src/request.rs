//! A job's request bytes, handed from the launcher to synth-proc in a sealed memfd.
//!
//! The launcher reads a request (a C1 output can be tens of MB) once, at submit, and writes it
//! into a memfd that it seals against every change ([`REQUEST_SEALS`]). The memfd travels to
//! synth-proc with the synthesis requests over the control socket as `SCM_RIGHTS` ancillary data
//! ([`crate::control::Sender::send_with_fd`]): neither the bytes nor a path cross the socket,
//! and a file changed or deleted after submit does not change the job. synth-proc maps it
//! read-only ([`MappedRequest`]) after checking the seals and the length, so the bytes it parses
//! cannot change (nor shrink into a SIGBUS) under it. The launcher keeps its [`SealedRequest`]
//! until the job ends, so a restarted synth-proc is given the same bytes again.

use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{MemfdFlags, SealFlags};

use crate::{Error, ErrorKind, Result};

/// The seals of a request memfd: no write, no shrink, no grow, no further seal change.
pub const REQUEST_SEALS: SealFlags = SealFlags::WRITE
    .union(SealFlags::SHRINK)
    .union(SealFlags::GROW)
    .union(SealFlags::SEAL);

/// The launcher's side: a memfd holding one request, sealed.
#[derive(Debug)]
pub struct SealedRequest {
    fd: OwnedFd,
    len: u64,
}

impl SealedRequest {
    /// Writes `bytes` into a new memfd (named `name` in `/proc/PID/fd`, for diagnostics) and
    /// seals it with [`REQUEST_SEALS`].
    pub fn create(name: &str, bytes: &[u8]) -> Result<SealedRequest> {
        let fd = rustix::fs::memfd_create(
            format!("splitprover-request-{name}"),
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )
        .map_err(|e| Error::io("memfd_create", e))?;
        let mut file = std::fs::File::from(fd);
        file.write_all(bytes)
            .map_err(|e| Error::io("write request memfd", e))?;
        let fd = OwnedFd::from(file);
        rustix::fs::fcntl_add_seals(&fd, REQUEST_SEALS)
            .map_err(|e| Error::io("fcntl(F_ADD_SEALS)", e))?;
        Ok(SealedRequest {
            fd,
            len: bytes.len() as u64,
        })
    }

    /// The memfd (to send with [`crate::control::Sender::send_with_fd`]).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Bytes it holds.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it holds no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// synth-proc's side: a received request memfd, checked and mapped read-only.
#[derive(Debug)]
pub struct MappedRequest {
    // `None` for an empty request: a zero-length mapping is not allowed.
    map: Option<memmap2::Mmap>,
}

impl MappedRequest {
    /// Checks that `fd` is a memfd sealed with (at least) [`REQUEST_SEALS`] holding exactly
    /// `len` bytes, then maps it read-only. The fd is closed once mapped.
    pub fn open(fd: OwnedFd, len: u64) -> Result<MappedRequest> {
        let bad = |why: String| -> Error {
            ErrorKind::InvalidRegion(format!("request memfd: {why}")).into()
        };
        let seals = rustix::fs::fcntl_get_seals(&fd)
            .map_err(|e| bad(format!("not a sealable memfd ({e})")))?;
        if !seals.contains(REQUEST_SEALS) {
            return Err(bad(format!(
                "not sealed against changes (seals {seals:?}, need {REQUEST_SEALS:?})"
            )));
        }
        let size = rustix::fs::fstat(&fd)
            .map_err(|e| Error::io("fstat", e))?
            .st_size as u64;
        if size != len {
            return Err(bad(format!("holds {size} bytes, the message says {len}")));
        }
        if len == 0 {
            return Ok(MappedRequest { map: None });
        }
        // SAFETY: the memfd is sealed against writes, shrinking and growing (checked above), so
        // the mapping's bytes can neither change nor vanish while it lives.
        let map = unsafe { memmap2::MmapOptions::new().len(len as usize).map(&fd) }
            .map_err(|e| Error::io("mmap request", e))?;
        Ok(MappedRequest { map: Some(map) })
    }

    /// The request bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_memfd_is_sealed_read_only_and_intact() {
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let sealed = SealedRequest::create("test", &bytes).unwrap();
        assert_eq!(sealed.len(), bytes.len() as u64);
        let seals = rustix::fs::fcntl_get_seals(sealed.fd()).unwrap();
        assert!(seals.contains(REQUEST_SEALS), "{seals:?}");
        // Nobody can change it any more: not by writing, not by resizing, not by unsealing.
        let mut file = std::fs::File::from(sealed.fd().try_clone_to_owned().unwrap());
        assert!(file.write_all(b"x").is_err(), "writable after sealing");
        assert!(file.set_len(1).is_err(), "shrinkable after sealing");
        assert!(file.set_len(1 << 20).is_err(), "growable after sealing");
        assert!(
            rustix::fs::fcntl_add_seals(sealed.fd(), SealFlags::FUTURE_WRITE).is_err(),
            "seals still changeable"
        );
        let mapped =
            MappedRequest::open(sealed.fd().try_clone_to_owned().unwrap(), sealed.len()).unwrap();
        assert_eq!(mapped.bytes(), &bytes[..]);
        // A writable mapping cannot be had from it either.
        // SAFETY: the mapping is expected to fail; were it made, nothing would write through it
        // and it is dropped at the end of the test, with the memfd still open.
        let w = unsafe { memmap2::MmapOptions::new().map_mut(&sealed.fd) };
        assert!(
            w.is_err(),
            "a shared writable mapping of a write-sealed memfd"
        );
        // Empty requests work.
        let empty = SealedRequest::create("empty", b"").unwrap();
        let m = MappedRequest::open(empty.fd().try_clone_to_owned().unwrap(), 0).unwrap();
        assert!(m.bytes().is_empty());
    }

    #[test]
    fn unsealed_or_mislabelled_memfds_are_refused() {
        let fd = rustix::fs::memfd_create("plain", MemfdFlags::CLOEXEC).unwrap();
        let e = MappedRequest::open(fd, 0).unwrap_err();
        assert!(e.to_string().contains("not sealed"), "{e}");
        let sealed = SealedRequest::create("len", b"abc").unwrap();
        let e = MappedRequest::open(sealed.fd().try_clone_to_owned().unwrap(), 4).unwrap_err();
        assert!(e.to_string().contains("holds 3 bytes"), "{e}");
    }
}
