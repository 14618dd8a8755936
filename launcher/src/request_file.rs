//! Reading a proof request file someone named (a CLI argument, a client of the service): the
//! one place that opens such a file. Opened without following a final symbolic link and without
//! blocking (a FIFO cannot hold the caller), regular files only, the size checked with `fstat`
//! before reading and bounded while reading (a file growing meanwhile cannot make it read more,
//! one that changes size is refused), and, for a service that may run as root, only a file the
//! client could read itself.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Who the file is read for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    /// The launcher itself (its own user's access rights apply).
    Launcher,
    /// A client with these credentials: the file must be readable by it (owner, group or other
    /// read bit against its uid and primary gid; uid 0 reads anything).
    Client {
        /// Its uid.
        uid: u32,
        /// Its primary gid.
        gid: u32,
    },
}

/// Why a request file is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestFileError {
    /// The name is a symbolic link.
    #[error("is a symbolic link (refused: name the file itself)")]
    Symlink,
    /// Not a regular file (the kind is named).
    #[error("is {0}, not a regular file")]
    NotRegular(&'static str),
    /// Larger than accepted.
    #[error(
        "is {size} bytes, more than the {max} accepted\nhint: raise [faults] max_request_bytes"
    )]
    TooLarge {
        /// Its size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// The client could not read it itself.
    #[error("is not readable by the client (uid {uid})")]
    NotReadableByClient {
        /// The client's uid.
        uid: u32,
    },
    /// Its size changed while it was read.
    #[error("changed while it was read")]
    Changed,
    /// Opening, `fstat` or reading failed.
    #[error("{what}: {cause}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// Why.
        cause: std::io::Error,
    },
}

/// Reads the request file `path` for `reader`, at most `max` bytes (see the module doc).
pub fn read(path: &Path, max: u64, reader: Reader) -> Result<Vec<u8>, RequestFileError> {
    let io = |what| move |cause| RequestFileError::Io { what, cause };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => RequestFileError::Symlink,
            _ => io("cannot open the file")(e),
        })?;
    let meta = file.metadata().map_err(io("cannot stat the file"))?;
    let ft = meta.file_type();
    if !ft.is_file() {
        return Err(RequestFileError::NotRegular(if ft.is_dir() {
            "a directory"
        } else if ft.is_fifo() {
            "a FIFO"
        } else if ft.is_char_device() {
            "a character device"
        } else if ft.is_block_device() {
            "a block device"
        } else if ft.is_socket() {
            "a socket"
        } else {
            "something else"
        }));
    }
    if let Reader::Client { uid, gid } = reader {
        let mode = meta.permissions().mode();
        let readable = uid == 0
            || (meta.uid() == uid && mode & 0o400 != 0)
            || (meta.gid() == gid && mode & 0o040 != 0)
            || mode & 0o004 != 0;
        if !readable {
            return Err(RequestFileError::NotReadableByClient { uid });
        }
    }
    if meta.len() > max {
        return Err(RequestFileError::TooLarge {
            size: meta.len(),
            max,
        });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io("cannot read the file"))?;
    if bytes.len() as u64 > max || bytes.len() as u64 != meta.len() {
        return Err(RequestFileError::Changed);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_limit_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok");
        std::fs::write(&ok, b"0123456789").unwrap();
        assert_eq!(read(&ok, 10, Reader::Launcher).unwrap(), b"0123456789");
        assert!(matches!(
            read(&ok, 9, Reader::Launcher),
            Err(RequestFileError::TooLarge { size: 10, max: 9 })
        ));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&ok, &link).unwrap();
        assert!(matches!(
            read(&link, 1 << 20, Reader::Launcher),
            Err(RequestFileError::Symlink)
        ));
        for (path, what) in [
            (dir.path(), "a directory"),
            (Path::new("/dev/zero"), "a character device"),
        ] {
            match read(path, 1 << 20, Reader::Launcher) {
                Err(RequestFileError::NotRegular(w)) => assert_eq!(w, what),
                other => panic!("{}: {other:?}", path.display()),
            }
        }
    }

    #[test]
    fn a_client_reads_only_what_its_credentials_allow() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        let meta = std::fs::metadata(&f).unwrap();
        let (owner, group) = (meta.uid(), meta.gid());
        let stranger = Reader::Client {
            uid: owner.wrapping_add(4242).max(1),
            gid: group.wrapping_add(4242),
        };
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(
            read(&f, 10, stranger),
            Err(RequestFileError::NotReadableByClient { .. })
        ));
        let owner_client = Reader::Client {
            uid: owner,
            gid: group,
        };
        assert_eq!(read(&f, 10, owner_client).unwrap(), b"x");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o604)).unwrap();
        assert_eq!(read(&f, 10, stranger).unwrap(), b"x");
    }
}
