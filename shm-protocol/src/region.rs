//! [`Region`]: a memfd-backed shared mapping, on huge pages when the machine has them.
//!
//! The launcher creates every region with `memfd_create`, so no named segment exists: nothing
//! leaks when a process dies and no other user can open the memory. Children receive the fd by
//! inheritance ([`pass_to`]) and map it with [`Region::from_inherited_fd`]. The size is sealed
//! (`F_SEAL_SHRINK | F_SEAL_GROW`) so no process can truncate the memory under another's mapping.
//! A region whose contents are written once (an SRS image) is made with
//! [`Region::create_write_once`] and sealed against writes ([`Region::seal_writes`],
//! `F_SEAL_FUTURE_WRITE`) before its fd is passed on; children map it with
//! [`Region::from_inherited_fd_read_only`].
//!
//! Page kinds are tried best first: 1 GiB hugetlb, 2 MiB hugetlb, transparent huge pages, plain
//! pages. Every kind is prefaulted at creation — hugetlb and plain memory with `fallocate` on the
//! memfd (which fails with `ENOSPC`/`ENOMEM` when the pages are not there), THP with
//! `MADV_POPULATE_WRITE` — so a shortage is an error at creation, never a `SIGBUS` mid-proof.

use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::ptr::NonNull;

use rustix::fs::{FallocateFlags, MemfdFlags, SealFlags};
use rustix::mm::{Advice, MapFlags, ProtFlags};

use crate::error::{Error, ErrorKind, Result};
use crate::pages::{HugePagePolicy, PageKind};

/// A memfd-backed, prefaulted, sealed shared mapping.
///
/// A `Region` is plain memory: a ring lays its header and slots over one ([`crate::Ring`]); the
/// SRS is loaded into another. It hands out raw pointers; the protocol that owns the contents
/// decides who may write where.
pub struct Region {
    fd: OwnedFd,
    ptr: NonNull<u8>,
    len: usize,
    kind: PageKind,
    fallbacks: Vec<(PageKind, String)>,
}

// SAFETY: `Region` owns an fd and a mapping; it has no thread-affine state. All access to the
// memory goes through raw pointers whose use the caller (the ring protocol) synchronises.
unsafe impl Send for Region {}
// SAFETY: as above; `&Region` only gives out raw pointers, lengths and a borrowed fd.
unsafe impl Sync for Region {}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region")
            .field("fd", &self.fd.as_raw_fd())
            .field("len", &self.len)
            .field("kind", &self.kind)
            .finish()
    }
}

const THP_SUFFIX: &str = ".thp";

impl Region {
    /// Creates a region of at least `bytes` bytes (rounded up to the page size of the kind
    /// used), prefaulted and sealed. `name` shows in `/proc/<pid>/fd` and `/proc/<pid>/maps`.
    ///
    /// Logs the kind in use and, for every better kind skipped, why.
    pub fn create(name: &str, bytes: usize, policy: HugePagePolicy) -> Result<Region> {
        Region::create_with(name, bytes, policy, true)
    }

    /// [`Region::create`] for contents written once (an SRS image): the seals can still be
    /// extended, so once the contents are in place [`Region::seal_writes`] forbids every later
    /// write through any descriptor or new mapping.
    pub fn create_write_once(name: &str, bytes: usize, policy: HugePagePolicy) -> Result<Region> {
        Region::create_with(name, bytes, policy, false)
    }

    /// Seals the memfd against writes (`F_SEAL_FUTURE_WRITE`, then `F_SEAL_SEAL`): from now on
    /// `write(2)` to it and new writable shared mappings of it fail with `EPERM`, in this process
    /// and in every process it is passed to. This process's own mapping stays writable at the
    /// MMU level; it must not write through it any more (by contract, as before). Call it before
    /// the fd is passed to anyone. Only for a region from [`Region::create_write_once`].
    pub fn seal_writes(&self) -> Result<()> {
        rustix::fs::fcntl_add_seals(&self.fd, SealFlags::FUTURE_WRITE | SealFlags::SEAL)
            .map_err(|e| Error::io("fcntl(F_ADD_SEALS, F_SEAL_FUTURE_WRITE)", e))
    }

    /// Whether the memfd refuses writes ([`Region::seal_writes`] ran).
    pub fn is_write_sealed(&self) -> bool {
        rustix::fs::fcntl_get_seals(&self.fd)
            .is_ok_and(|s| s.intersects(SealFlags::FUTURE_WRITE | SealFlags::WRITE))
    }

    fn create_with(
        name: &str,
        bytes: usize,
        policy: HugePagePolicy,
        final_seal: bool,
    ) -> Result<Region> {
        if bytes == 0 {
            return Err(ErrorKind::InvalidConfig("a region needs at least one byte".into()).into());
        }
        let candidates: Vec<PageKind> = match policy {
            HugePagePolicy::Auto => PageKind::ALL.to_vec(),
            HugePagePolicy::Require(kind) => vec![kind],
            HugePagePolicy::Plain => vec![PageKind::Plain],
        };
        let mut fallbacks = Vec::new();
        let mut last: Option<Error> = None;
        for kind in candidates {
            if policy == HugePagePolicy::Auto && kind != PageKind::Plain {
                let rounded = bytes.div_ceil(kind.page_bytes()) * kind.page_bytes();
                if rounded - bytes > bytes / 8 {
                    let why =
                        format!("rounding {bytes} bytes up to {rounded} would waste more than 1/8");
                    tracing::debug!(region = name, %kind, "skipped: {why}");
                    fallbacks.push((kind, why));
                    continue;
                }
            }
            match create_kind(name, bytes, kind, final_seal) {
                Ok((fd, ptr, len)) => {
                    tracing::info!(region = name, bytes = len, page_kind = %kind, "shared memory region created");
                    for (k, why) in &fallbacks {
                        tracing::info!(region = name, "not using {k}: {why}");
                    }
                    return Ok(Region {
                        fd,
                        ptr,
                        len,
                        kind,
                        fallbacks,
                    });
                }
                Err(e) => {
                    tracing::debug!(region = name, %kind, "unavailable: {e}");
                    fallbacks.push((kind, e.to_string()));
                    last = Some(e);
                }
            }
        }
        let last =
            last.unwrap_or_else(|| ErrorKind::InvalidConfig("no page kind to try".into()).into());
        match policy {
            HugePagePolicy::Require(requested) if requested != PageKind::Plain => {
                Err(ErrorKind::PagesUnavailable {
                    requested,
                    reason: last.to_string(),
                }
                .into())
            }
            _ => Err(last),
        }
    }

    /// Maps a region created by [`Region::create`] in another process, received as an inherited
    /// (or `SCM_RIGHTS`) fd. Maps the whole size `fstat` reports, prefaulting the page tables.
    /// The page kind is recovered from the file: hugetlb memfds report their page size as
    /// `st_blksize`, THP regions carry a `.thp` suffix in their memfd name.
    ///
    /// # Safety
    ///
    /// - `fd` must be a memfd made by [`Region::create`] (the function checks it is sealed against
    ///   shrinking, so the mapping cannot lose its backing, but cannot check who made it);
    /// - every process mapping it must access the memory only as the protocol laid over it
    ///   (e.g. [`crate::Ring`]) allows, since the returned region aliases their memory.
    pub unsafe fn from_inherited_fd(fd: OwnedFd) -> Result<Region> {
        // SAFETY: forwarded to the caller.
        unsafe { Region::inherited(fd, true) }
    }

    /// [`Region::from_inherited_fd`] mapped read-only (`PROT_READ`): for a region sealed with
    /// [`Region::seal_writes`] (an SRS image). Writing through [`Region::as_mut_ptr`] of such a
    /// region faults.
    ///
    /// # Safety
    ///
    /// As [`Region::from_inherited_fd`].
    pub unsafe fn from_inherited_fd_read_only(fd: OwnedFd) -> Result<Region> {
        // SAFETY: forwarded to the caller.
        unsafe { Region::inherited(fd, false) }
    }

    /// The mapping behind both `from_inherited_fd*`: read-write or, for a region sealed
    /// against writes, read-only.
    ///
    /// # Safety
    ///
    /// As [`Region::from_inherited_fd`].
    unsafe fn inherited(fd: OwnedFd, writable: bool) -> Result<Region> {
        let st = rustix::fs::fstat(&fd).map_err(|e| Error::io("fstat", e))?;
        let len = usize::try_from(st.st_size)
            .ok()
            .filter(|&l| l > 0)
            .ok_or_else(|| {
                ErrorKind::InvalidRegion(format!("size {} is not mappable", st.st_size))
            })?;
        let seals = rustix::fs::fcntl_get_seals(&fd).map_err(|e| {
            ErrorKind::InvalidRegion(format!(
                "fd {} is not a sealable memfd: {e}",
                fd.as_raw_fd()
            ))
        })?;
        if !seals.contains(SealFlags::SHRINK) {
            return Err(ErrorKind::InvalidRegion(format!(
                "fd {} is not sealed against shrinking; it was not made by `Region::create`",
                fd.as_raw_fd()
            ))
            .into());
        }
        let kind = match st.st_blksize {
            b if b == 1 << 30 => PageKind::Huge1G,
            b if b == 2 << 20 => PageKind::Huge2M,
            _ => {
                let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if link.trim_end_matches(" (deleted)").ends_with(THP_SUFFIX) {
                    PageKind::Transparent
                } else {
                    PageKind::Plain
                }
            }
        };
        let ptr = map(&fd, len, true, writable)?;
        if kind == PageKind::Transparent {
            // SAFETY: `ptr..ptr+len` is the mapping just made; advice does not change contents.
            let advised =
                unsafe { rustix::mm::madvise(ptr.as_ptr().cast(), len, Advice::LinuxHugepage) };
            if let Err(e) = advised {
                tracing::warn!("madvise(MADV_HUGEPAGE) on inherited region failed: {e}");
            }
        }
        tracing::info!(fd = fd.as_raw_fd(), bytes = len, page_kind = %kind, "shared memory region mapped");
        Ok(Region {
            fd,
            ptr,
            len,
            kind,
            fallbacks: Vec::new(),
        })
    }

    /// The page kind in use.
    pub fn page_kind(&self) -> PageKind {
        self.kind
    }

    /// For each better page kind that [`Region::create`] did not use, why (empty for an
    /// inherited region).
    pub fn fallback_reasons(&self) -> &[(PageKind, String)] {
        &self.fallbacks
    }

    /// Length of the mapping in bytes (the requested size rounded up to the page size).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always `false`: a region has at least one page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Base address of the mapping in this process.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Base address of the mapping in this process, for writing.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The whole region as bytes.
    ///
    /// # Safety
    ///
    /// No process may write the region while the returned slice lives (e.g. an SRS region after
    /// it was loaded, or a region not yet passed to anyone).
    pub unsafe fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping is `len` bytes, readable, alive as long as `self`; the caller
        // promises no concurrent writes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The whole region as mutable bytes.
    ///
    /// # Safety
    ///
    /// No other process may access the region while the returned slice lives (e.g. while loading
    /// an SRS before the fd is passed on).
    pub unsafe fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is `len` bytes, writable, alive as long as `self`; `&mut self`
        // excludes other users in this process and the caller promises none elsewhere.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The memfd, to pass to a child ([`pass_to`]).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `map` with exactly this base and length and nothing
        // borrowed from it outlives `self` (handles borrow the ring, which owns the region).
        if let Err(e) = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) } {
            tracing::warn!("munmap of shared memory region failed: {e}");
        }
    }
}

/// The first `len` bytes of a region whose contents were written once and sealed against
/// writes ([`Region::seal_writes`]): bytes any process may read while the region lives (an SRS
/// image, a pre-compiled constraint system).
#[derive(Debug, Clone)]
pub struct SealedBytes {
    region: std::sync::Arc<Region>,
    len: usize,
}

impl SealedBytes {
    /// Wraps `region`; refuses a region not sealed against writes or shorter than `len`.
    pub fn new(region: std::sync::Arc<Region>, len: usize) -> Result<SealedBytes> {
        if !region.is_write_sealed() {
            return Err(
                ErrorKind::InvalidRegion("the region is not sealed against writes".into()).into(),
            );
        }
        if len > region.len() {
            return Err(ErrorKind::TooSmall {
                need: len as u64,
                have: region.len() as u64,
            }
            .into());
        }
        Ok(SealedBytes { region, len })
    }

    /// The region.
    pub fn region(&self) -> &std::sync::Arc<Region> {
        &self.region
    }
}

impl AsRef<[u8]> for SealedBytes {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the memfd is sealed against writes (checked in `new`): no write(2) and no new
        // writable mapping can change it in any process, and its creator writes it only before
        // sealing (the contract of `Region::create_write_once`), so no write overlaps this
        // shared borrow; `len` is within the mapping.
        unsafe { &self.region.as_slice()[..self.len] }
    }
}

/// Makes `cmd`'s child inherit `fd` as file descriptor number `target_fd`.
///
/// Runs `dup2(fd, target_fd)` between fork and exec (or clears close-on-exec when they are
/// equal). The raw fd number is captured now: `fd` must stay open until the command is spawned
/// (spawning fails with `EBADF` otherwise). Choose distinct targets ≥ 3 that are not the source
/// of another `pass_to` on the same command.
pub fn pass_to(cmd: &mut Command, fd: BorrowedFd<'_>, target_fd: RawFd) {
    let source = fd.as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and only calls `fcntl` and
    // `dup2`, which are async-signal-safe; it allocates nothing and takes no locks.
    unsafe {
        cmd.pre_exec(move || {
            if source == target_fd {
                let flags = libc::fcntl(source, libc::F_GETFD);
                if flags < 0 || libc::fcntl(source, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(source, target_fd) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Whether the kernel gives transparent huge pages to shared memory mappings that ask for them.
pub fn thp_shmem_available() -> bool {
    let mode = |path: &str| {
        let text = std::fs::read_to_string(path).ok()?;
        let start = text.find('[')? + 1;
        let end = text[start..].find(']')? + start;
        Some(text[start..end].to_string())
    };
    let top = mode("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
    let top_ok = matches!(
        top.as_deref(),
        Some("always" | "within_size" | "advise" | "force")
    );
    match mode("/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/shmem_enabled").as_deref() {
        Some("always" | "within_size" | "advise") => true,
        Some("inherit") | None => top_ok,
        Some(_) => false,
    }
}

fn create_kind(
    name: &str,
    bytes: usize,
    kind: PageKind,
    final_seal: bool,
) -> Result<(OwnedFd, NonNull<u8>, usize)> {
    let page = kind.page_bytes();
    let len = bytes.checked_next_multiple_of(page).ok_or_else(|| {
        ErrorKind::InvalidConfig(format!("{bytes} bytes overflow when rounded to {kind}"))
    })?;
    let mut flags = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING;
    match kind {
        PageKind::Huge1G => flags |= MemfdFlags::HUGETLB | MemfdFlags::HUGE_1GB,
        PageKind::Huge2M => flags |= MemfdFlags::HUGETLB | MemfdFlags::HUGE_2MB,
        PageKind::Transparent => {
            if !thp_shmem_available() {
                return Err(ErrorKind::InvalidConfig(
                    "transparent huge pages are off for shared memory (`shmem_enabled`)".into(),
                )
                .into());
            }
        }
        PageKind::Plain => {}
    }
    let memfd_name = if kind == PageKind::Transparent {
        format!("{name}{THP_SUFFIX}")
    } else {
        name.to_string()
    };
    let fd = rustix::fs::memfd_create(memfd_name.as_str(), flags)
        .map_err(|e| Error::io("memfd_create", e))?;
    rustix::fs::ftruncate(&fd, len as u64).map_err(|e| Error::io("ftruncate", e))?;
    if kind != PageKind::Transparent {
        // Allocates every page now: a hugetlb shortage (or a memory cgroup limit) fails here with
        // ENOSPC/ENOMEM instead of SIGBUS on first touch.
        rustix::fs::fallocate(&fd, FallocateFlags::empty(), 0, len as u64)
            .map_err(|e| Error::io("fallocate", e))?;
    }
    let mut seals = SealFlags::SHRINK | SealFlags::GROW;
    if final_seal {
        seals |= SealFlags::SEAL;
    }
    rustix::fs::fcntl_add_seals(&fd, seals).map_err(|e| Error::io("fcntl(F_ADD_SEALS)", e))?;
    let ptr = map(&fd, len, kind != PageKind::Transparent, true)?;
    if kind == PageKind::Transparent {
        let unmap = |e: Error| {
            // SAFETY: the mapping made just above, not yet shared with anything.
            let _ = unsafe { rustix::mm::munmap(ptr.as_ptr().cast(), len) };
            e
        };
        // SAFETY: advice on the mapping made just above; it does not change contents.
        unsafe { rustix::mm::madvise(ptr.as_ptr().cast(), len, Advice::LinuxHugepage) }
            .map_err(|e| unmap(Error::io("madvise(MADV_HUGEPAGE)", e)))?;
        // SAFETY: as above; MADV_POPULATE_WRITE allocates and maps the pages or fails.
        unsafe { rustix::mm::madvise(ptr.as_ptr().cast(), len, Advice::LinuxPopulateWrite) }
            .map_err(|e| unmap(Error::io("madvise(MADV_POPULATE_WRITE)", e)))?;
    }
    Ok((fd, ptr, len))
}

fn map(fd: &OwnedFd, len: usize, populate: bool, writable: bool) -> Result<NonNull<u8>> {
    let mut flags = MapFlags::SHARED;
    if populate {
        flags |= MapFlags::POPULATE;
    }
    // SAFETY: a fresh shared mapping of `len` bytes of `fd` at an address the kernel picks; it
    // aliases no Rust object. The memfd is sealed against shrinking, so no page can vanish.
    let ptr = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            if writable {
                ProtFlags::READ | ProtFlags::WRITE
            } else {
                ProtFlags::READ
            },
            flags,
            fd,
            0,
        )
    }
    .map_err(|e| Error::io("mmap", e))?;
    NonNull::new(ptr.cast::<u8>())
        .ok_or_else(|| Error::io("mmap", std::io::Error::other("null mapping")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_region_is_rounded_zeroed_and_sealed() {
        let r = Region::create("test-plain", 5000, HugePagePolicy::Plain).unwrap();
        assert_eq!(r.len(), 8192);
        assert_eq!(r.page_kind(), PageKind::Plain);
        // SAFETY: nobody else has the fd.
        assert!(unsafe { r.as_slice() }.iter().all(|&b| b == 0));
        let seals = rustix::fs::fcntl_get_seals(r.fd()).unwrap();
        assert!(seals.contains(SealFlags::SHRINK | SealFlags::GROW));
        assert!(
            rustix::fs::ftruncate(r.fd(), 4096).is_err(),
            "sealed against shrinking"
        );
    }

    #[test]
    fn inherited_fd_sees_the_same_memory() {
        let mut r = Region::create("test-share", 4096, HugePagePolicy::Plain).unwrap();
        // SAFETY: nobody else has the fd yet.
        let bytes = unsafe { r.as_mut_slice() };
        bytes[100] = 42;
        let dup = r.fd().try_clone_to_owned().unwrap();
        // SAFETY: the fd is a region made by `create`; only this test touches it.
        let r2 = unsafe { Region::from_inherited_fd(dup) }.unwrap();
        assert_eq!((r2.len(), r2.page_kind()), (4096, PageKind::Plain));
        // SAFETY: as above.
        assert_eq!(unsafe { r2.as_slice() }[100], 42);
    }

    #[test]
    fn a_write_once_region_sealed_against_writes_maps_read_only_elsewhere() {
        let r = Region::create_write_once("test-seal", 4096, HugePagePolicy::Plain).unwrap();
        // SAFETY: the region is ours alone until it is sealed.
        unsafe { r.as_mut_ptr().write(42) };
        assert!(!r.is_write_sealed());
        r.seal_writes().unwrap();
        assert!(r.is_write_sealed());
        // A writable mapping of the fd is refused now, a read-only one sees the contents.
        let dup = r.fd().try_clone_to_owned().unwrap();
        // SAFETY: a region made by `create_write_once`, used by this test only.
        assert!(unsafe { Region::from_inherited_fd(dup) }.is_err());
        let dup = r.fd().try_clone_to_owned().unwrap();
        // SAFETY: as above.
        let ro = unsafe { Region::from_inherited_fd_read_only(dup) }.unwrap();
        // SAFETY: nobody writes the sealed region any more.
        assert_eq!(unsafe { ro.as_slice() }[0], 42);
        // The ring's kind of region cannot be sealed further.
        let ring = Region::create("test-final", 4096, HugePagePolicy::Plain).unwrap();
        assert!(ring.seal_writes().is_err());
    }

    #[test]
    fn unsealed_fd_is_refused() {
        let fd = rustix::fs::memfd_create("not-ours", MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&fd, 4096).unwrap();
        // SAFETY: the function must refuse this fd before mapping it.
        let e = unsafe { Region::from_inherited_fd(fd) }.unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::InvalidRegion(_)), "{e}");
    }

    #[test]
    fn zero_bytes_is_a_config_error() {
        assert!(matches!(
            Region::create("x", 0, HugePagePolicy::Auto)
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidConfig(_)
        ));
    }

    #[test]
    fn auto_skips_wasteful_huge_pages() {
        let r = Region::create("test-small", 64 << 10, HugePagePolicy::Auto).unwrap();
        assert!(matches!(
            r.page_kind(),
            PageKind::Transparent | PageKind::Plain
        ));
        let skipped: Vec<_> = r.fallback_reasons().iter().map(|(k, _)| *k).collect();
        assert!(
            skipped.starts_with(&[PageKind::Huge1G, PageKind::Huge2M]),
            "{skipped:?}"
        );
    }
}
