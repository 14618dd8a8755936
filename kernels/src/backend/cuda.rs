//! CUDA backend: supraseal-c2 (sppark) fed with pointers straight into the borrowed assignments.
//!
//! - [`CudaBackend`] implements [`Backend`]. [`CudaBackend::open`] loads a bellperson `.params`
//!   file into supraseal's SRS (pinned host memory) once per process: supraseal keeps a
//!   process-wide cache keyed by the path, so opening the same path again shares the loaded SRS.
//!   The load runs in the background; the first proof waits for it. Any path `open(2)` accepts
//!   works, `/proc/self/fd/N` of a memfd holding the file's bytes included.
//! - [`page_lock`] registers a host range with CUDA (`cudaHostRegister`) for the lifetime of a
//!   [`PageLock`], so host-to-device copies out of it run at DMA speed instead of through
//!   pageable staging (benchmarks/2026-11-30-h200/NOTES.md has both rates).
//! - [`gpu_count`] says how many CUDA devices there are; `Ok(0)` where there is no GPU or no
//!   driver, so callers can skip or fail with a clear message.
//! - [`device_info`] reads the current device's name and memory (total, free now) for status.
//!
//! # What is checked before calling into C++
//!
//! supraseal-c2 trusts its input: a shape that does not match the SRS trips a C++ `assert`
//! (process abort) or reads out of bounds, and its Rust wrapper panics on CUDA errors. So
//! [`CudaBackend::prove_batch`] validates every circuit (lengths, density bitmaps and popcounts)
//! against the lengths read from the parameters file header ([`check_circuit`]) first, and runs the
//! call inside [`std::panic::catch_unwind`], turning a panic into [`ErrorKind::Cuda`].
//!
//! Each circuit of a batch carries its own density pointers (supraseal's per-circuit
//! `Assignment`), so circuits whose bitmaps differ need no split; every bitmap must still agree
//! with the SRS in its popcount, which is what supraseal's indexing relies on.
//!
//! # Example
//!
//! ```no_run
//! use kernels::backend::cuda::{gpu_count, CudaBackend};
//! use kernels::Backend;
//!
//! if gpu_count()? == 0 {
//!     eprintln!("no GPU: skipping");
//!     return Ok(());
//! }
//! let backend = CudaBackend::open("sha-chain-38.params")?;
//! # let batch: Vec<kernels::Assignment<'_>> = Vec::new();
//! # let (r, s): (Vec<blstrs::Scalar>, Vec<blstrs::Scalar>) = (Vec::new(), Vec::new());
//! let proofs = backend.prove_batch(&batch, &r, &s)?;
//! # Ok::<(), kernels::Error>(())
//! ```

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fs::File;
use std::io::BufReader;
use std::mem::MaybeUninit;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::time::Instant;

use bellperson::groth16::{
    prepare_verifying_key, verify_proof, PreparedVerifyingKey, VerifyingKey,
};
use blstrs::{Bls12, Scalar};

use super::Backend;
use crate::srs::{scan_params_file, SrsLengths};
use crate::types::{Assignment, Density, Proof};
use crate::{Error, ErrorKind};

// supraseal-c2 reads the density bitmaps as `const uint64_t*` through a `*const usize` field.
#[cfg(not(target_pointer_width = "64"))]
compile_error!("the `cuda` feature needs a 64-bit target (density words are passed as usize)");

/// The CUDA runtime entry points used here. cudart is linked statically into the binary by the
/// sppark/supraseal-c2 build, so these resolve without a shared libcudart; only the driver
/// (`libcuda.so`) is needed at run time, and its absence is reported as an error code.
mod ffi {
    use super::{c_char, c_int, c_uint, c_void};

    /// `cudaSuccess`.
    pub const SUCCESS: c_int = 0;
    /// `cudaErrorInsufficientDriver`: no driver, or one older than the runtime.
    pub const INSUFFICIENT_DRIVER: c_int = 35;
    /// `cudaErrorNoDevice`.
    pub const NO_DEVICE: c_int = 100;
    /// `cudaHostRegisterPortable`: the range counts as pinned in every CUDA context.
    pub const HOST_REGISTER_PORTABLE: c_uint = 1;

    // SAFETY: each declaration is the CUDA runtime's own C signature (cuda_runtime_api.h of
    // CUDA 12 and 13: `cudaError_t` is a C enum, passed as `int`; `size_t` is `usize`).
    extern "C" {
        pub fn cudaGetDeviceCount(count: *mut c_int) -> c_int;
        pub fn cudaHostRegister(ptr: *mut c_void, size: usize, flags: c_uint) -> c_int;
        pub fn cudaHostUnregister(ptr: *mut c_void) -> c_int;
        pub fn cudaGetErrorString(error: c_int) -> *const c_char;
        pub fn cudaGetDevice(device: *mut c_int) -> c_int;
        /// Fills a `cudaDeviceProp`, whose first member is `char name[256]`; the struct's size
        /// changes between CUDA versions, so callers pass a buffer larger than any of them.
        pub fn cudaGetDeviceProperties(prop: *mut c_void, device: c_int) -> c_int;
        pub fn cudaMemGetInfo(free: *mut usize, total: *mut usize) -> c_int;
        pub fn cudaDeviceGetAttribute(value: *mut c_int, attr: c_int, device: c_int) -> c_int;
    }

    /// `cudaDevAttrMultiProcessorCount`.
    pub const ATTR_MULTIPROCESSORS: c_int = 16;

    // SAFETY: the declaration matches the definition in vendor/supraseal-c2 (`int
    // splitprover_supraseal_patch_level()`, extern "C").
    extern "C" {
        /// Defined by our patched copy of supraseal-c2 (vendor/supraseal-c2): the number of
        /// its patches. Unresolved at link time if the upstream crate is linked instead.
        pub fn splitprover_supraseal_patch_level() -> c_int;
    }
}

/// Patches of the supraseal-c2 copy linked into this binary (vendor/supraseal-c2/PATCHES.md).
pub const SUPRASEAL_PATCH_LEVEL: i32 = 2;

/// The patch level of the linked supraseal-c2. Equal to [`SUPRASEAL_PATCH_LEVEL`] unless the
/// build picked up another copy; the call needs no GPU. The upstream crate does not define the
/// symbol, so a build that links it does not link at all: the batch-addition ordering fix
/// (patch 1) cannot be lost silently.
pub fn supraseal_patch_level() -> i32 {
    // SAFETY: a C function without arguments that returns a constant.
    unsafe { ffi::splitprover_supraseal_patch_level() }
}

/// The CUDA runtime's text for an error code, with the code.
fn cuda_error_text(code: c_int) -> String {
    // SAFETY: cudaGetErrorString accepts any code and returns a pointer to a static
    // NUL-terminated string (an "unrecognized error code" text for unknown codes); it is checked
    // for null anyway.
    let text = unsafe { ffi::cudaGetErrorString(code) };
    if text.is_null() {
        return format!("cuda error {code}");
    }
    // SAFETY: non-null, NUL-terminated and static (see above).
    let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
    format!("{text} (cuda error {code})")
}

/// Whether a CUDA error code means "no usable GPU here" (no device, or no new enough driver).
pub(super) fn is_no_gpu(code: c_int) -> bool {
    code == ffi::NO_DEVICE || code == ffi::INSUFFICIENT_DRIVER
}

/// Whether a CUDA error code is sticky: once it happened, every later call of the process's
/// context fails too (the CUDA runtime documentation's list: uncorrectable ECC, illegal address,
/// launch timeout, device-side assert, hardware stack error, illegal or misaligned instruction or
/// address, invalid program counter, launch failure).
pub(super) fn is_sticky(code: c_int) -> bool {
    matches!(code, 214 | 700 | 702 | 710 | 714..=719)
}

/// A C++ error value as ours: "no GPU", a sticky CUDA error (the process's context is lost), or
/// another CUDA failure. sppark's `CUDA_OK` reports negated CUDA codes; both signs are taken.
pub(crate) fn sppark_error(e: sppark::Error, what: &str) -> Error {
    let code = e.code.wrapping_abs();
    if is_no_gpu(code) {
        return ErrorKind::NoGpu.into();
    }
    let text = format!("{what}: {} (cuda error {code})", String::from(&e));
    if is_sticky(code) {
        return ErrorKind::DeviceLost(text).into();
    }
    ErrorKind::Cuda(text).into()
}

fn cuda_error(code: c_int, what: &str) -> Error {
    if is_no_gpu(code) {
        ErrorKind::NoGpu.into()
    } else if is_sticky(code) {
        ErrorKind::DeviceLost(format!("{what}: {}", cuda_error_text(code))).into()
    } else {
        ErrorKind::Cuda(format!("{what}: {}", cuda_error_text(code))).into()
    }
}

/// Number of CUDA devices visible to this process.
///
/// `Ok(0)` when there is no device or no (new enough) driver; an error only for other CUDA
/// failures. Never panics.
pub fn gpu_count() -> Result<usize, Error> {
    let mut count: c_int = 0;
    // SAFETY: `count` is a valid, writable c_int for the duration of the call.
    let code = unsafe { ffi::cudaGetDeviceCount(&mut count) };
    match code {
        ffi::SUCCESS => Ok(usize::try_from(count).unwrap_or(0)),
        ffi::NO_DEVICE | ffi::INSUFFICIENT_DRIVER => Ok(0),
        other => Err(cuda_error(other, "`cudaGetDeviceCount` failed")),
    }
}

/// The environment variable that turns a GPU test's skip into a failure (set it on GPU hosts,
/// where a test that silently skipped would hide a broken driver or build).
pub const REQUIRE_GPU_ENV: &str = "SPLITPROVER_TEST_REQUIRE_GPU";

/// For tests that need a GPU: `true` when there is one; otherwise prints `no GPU: skipping
/// {test}` and returns `false`, or panics when [`REQUIRE_GPU_ENV`] is set (or when CUDA fails
/// other than by reporting no device).
pub fn gpu_for_test(test: &str) -> bool {
    match gpu_count() {
        Ok(0) => {
            assert!(
                std::env::var_os(REQUIRE_GPU_ENV).is_none(),
                "{REQUIRE_GPU_ENV} is set but there is no GPU for {test}"
            );
            println!("no GPU: skipping {test}");
            false
        }
        Ok(n) => {
            println!("{n} GPU(s): running {test}");
            true
        }
        Err(e) => panic!("gpu_count failed instead of reporting no GPU ({test}): {e}"),
    }
}

/// The CUDA device this process uses (the current device; a gpu-proc sees only its own through
/// `CUDA_VISIBLE_DEVICES`), as a status display shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// `cudaDeviceProp::name` (e.g. `NVIDIA H200`).
    pub name: String,
    /// Device memory in bytes (`cudaMemGetInfo`).
    pub total_bytes: u64,
    /// Device memory free now in bytes (`cudaMemGetInfo`).
    pub free_bytes: u64,
}

/// Bytes given to `cudaGetDeviceProperties`: `cudaDeviceProp` is about 1 KiB in CUDA 12 and 13.
const DEVICE_PROP_BYTES: usize = 16 * 1024;
/// Bytes of `cudaDeviceProp::name`, its first member.
const DEVICE_NAME_BYTES: usize = 256;

/// The ordinal of the current CUDA device (`cudaGetDevice`).
pub fn current_device() -> Result<c_int, Error> {
    let mut device: c_int = 0;
    // SAFETY: `device` is a valid, writable c_int for the duration of the call.
    let code = unsafe { ffi::cudaGetDevice(&mut device) };
    if code != ffi::SUCCESS {
        return Err(cuda_error(code, "`cudaGetDevice` failed"));
    }
    Ok(device)
}

/// The multiprocessors of CUDA device `device` (`cudaDevAttrMultiProcessorCount`).
pub fn multiprocessors(device: c_int) -> Result<u32, Error> {
    let mut n: c_int = 0;
    // SAFETY: `n` is a valid, writable c_int for the duration of the call.
    let code = unsafe { ffi::cudaDeviceGetAttribute(&mut n, ffi::ATTR_MULTIPROCESSORS, device) };
    if code != ffi::SUCCESS {
        return Err(cuda_error(code, "`cudaDeviceGetAttribute` failed"));
    }
    Ok(u32::try_from(n).unwrap_or(0))
}

/// Name and memory of the current CUDA device: [`ErrorKind::NoGpu`] without a device or driver.
/// The free memory is read fresh on every call (one `cudaMemGetInfo`).
pub fn device_info() -> Result<DeviceInfo, Error> {
    let device = current_device()?;
    // u64 words: aligned for every member of `cudaDeviceProp`.
    let mut prop = vec![0u64; DEVICE_PROP_BYTES / 8];
    // SAFETY: `prop` is a writable, 8-aligned buffer of DEVICE_PROP_BYTES, larger than the
    // `cudaDeviceProp` of any CUDA version this links (≈1 KiB), and lives across the call.
    let code = unsafe { ffi::cudaGetDeviceProperties(prop.as_mut_ptr().cast(), device) };
    if code != ffi::SUCCESS {
        return Err(cuda_error(code, "`cudaGetDeviceProperties` failed"));
    }
    let raw: Vec<u8> = prop[..DEVICE_NAME_BYTES / 8]
        .iter()
        .flat_map(|w| w.to_ne_bytes())
        .collect();
    // NUL-terminated within its 256 bytes; a name that fills them all is taken whole.
    let name = raw.split(|&b| b == 0).next().unwrap_or(&raw);
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: both are valid, writable usizes (`size_t`) for the duration of the call.
    let code = unsafe { ffi::cudaMemGetInfo(&mut free, &mut total) };
    if code != ffi::SUCCESS {
        return Err(cuda_error(code, "`cudaMemGetInfo` failed"));
    }
    Ok(DeviceInfo {
        name: String::from_utf8_lossy(name).into_owned(),
        total_bytes: total as u64,
        free_bytes: free as u64,
    })
}

/// A host memory range registered with CUDA (page-locked); unregistered on drop.
///
/// Made by [`page_lock`]. Copies from the range to a GPU then run by DMA without a pageable
/// staging copy. Registering takes time in proportion to the range (benchmarks/2026-11-30-h200/NOTES.md), so do
/// it once per mapping, not per proof.
#[derive(Debug)]
pub struct PageLock {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a PageLock only remembers a registered range; unregistering it from another thread is
// allowed by CUDA (the registration is process-wide, `cudaHostRegisterPortable`).
unsafe impl Send for PageLock {}
// SAFETY: no method takes `&self` to mutate anything; the pointer is never dereferenced here.
unsafe impl Sync for PageLock {}

impl PageLock {
    /// Start of the registered range.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Length of the registered range in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: an empty range cannot be registered.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for PageLock {
    fn drop(&mut self) {
        // SAFETY: `ptr` was registered by `page_lock` and is unregistered exactly once, here; the
        // caller of `page_lock` promised the range stays mapped until now.
        let code = unsafe { ffi::cudaHostUnregister(self.ptr.as_ptr().cast()) };
        if code != ffi::SUCCESS {
            tracing::warn!(
                len = self.len,
                "`cudaHostUnregister` failed: {}",
                cuda_error_text(code)
            );
        }
    }
}

/// Page-locks (`cudaHostRegister`, portable) the host range `ptr..ptr + len` until the returned
/// [`PageLock`] is dropped.
///
/// Errors: [`ErrorKind::NoGpu`] without a device or driver, [`ErrorKind::Cuda`] for any other
/// refusal (a range already registered, not enough lockable memory), a shape error for a null
/// pointer or an empty range.
///
/// # Safety
///
/// - `ptr..ptr + len` must be one mapping of this process (e.g. an `mmap` of a memfd) and must
///   stay mapped, at the same address, until the [`PageLock`] is dropped: unmapping registered
///   memory leaves CUDA with a stale translation.
/// - The range must not overlap another range registered with CUDA.
pub unsafe fn page_lock(ptr: *mut u8, len: usize) -> Result<PageLock, Error> {
    let Some(nn) = NonNull::new(ptr) else {
        return Err(Error::shape("page-lock address (null)", 1, 0));
    };
    if len == 0 {
        return Err(Error::shape("page-lock length", 1, 0));
    }
    let start = Instant::now();
    // SAFETY: the range is a live mapping of `len` bytes that outlives the PageLock (caller's
    // contract); CUDA only pins and maps it, it does not write to it.
    let code =
        unsafe { ffi::cudaHostRegister(ptr.cast::<c_void>(), len, ffi::HOST_REGISTER_PORTABLE) };
    if code != ffi::SUCCESS {
        return Err(cuda_error(code, "`cudaHostRegister` failed"));
    }
    tracing::info!(
        len,
        elapsed_ms = start.elapsed().as_millis() as u64,
        "page-locked host range for GPU copies"
    );
    Ok(PageLock { ptr: nn, len })
}

/// Copies of synthesized assignments in page-locked buffers (a, b, c, input, aux back to
/// back; the three density bitmaps back to back in a second one), as gpu-proc proves from its
/// page-locked ring: for checks and benches that compare pageable and page-locked proving. (A
/// bitmap left pageable costs the host the whole copy's duration at 2^24: CUDA's staged copy of
/// pageable memory waits for the stream to reach it.)
pub struct PinnedAssignments {
    // Declared first so that they are dropped (unregistered) before the slabs are freed.
    lock: PageLock,
    words_lock: PageLock,
    slab: Vec<Scalar>,
    words: Vec<u64>,
}

impl std::fmt::Debug for PinnedAssignments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedAssignments")
            .field("bytes", &self.lock.len())
            .finish_non_exhaustive()
    }
}

impl PinnedAssignments {
    /// Copies `owned` into one buffer and page-locks it. Errors as [`page_lock`].
    pub fn new(owned: &[crate::synth::OwnedAssignment]) -> Result<Self, Error> {
        let mut slab: Vec<Scalar> = Vec::with_capacity(
            owned
                .iter()
                .map(|o| 3 * o.a.len() + o.input.len() + o.aux.len())
                .sum(),
        );
        for o in owned {
            for part in [&o.a, &o.b, &o.c, &o.input, &o.aux] {
                slab.extend_from_slice(part);
            }
        }
        let mut words: Vec<u64> = Vec::new();
        for o in owned {
            let v = o.as_assignment();
            for d in [&v.a_aux_density, &v.b_input_density, &v.b_aux_density] {
                words.extend_from_slice(d.words);
            }
        }
        // One word at least, so that the registered range is never empty.
        if words.is_empty() {
            words.push(0);
        }
        let len = std::mem::size_of_val(slab.as_slice());
        // SAFETY: `slab` is owned by the returned value, never resized, and freed only after
        // `lock` is dropped (field order), so the range stays mapped while registered.
        let lock = unsafe { page_lock(slab.as_mut_ptr().cast::<u8>(), len) }?;
        let words_len = std::mem::size_of_val(words.as_slice());
        // SAFETY: as for `slab`: `words` is owned by the returned value, never resized, and
        // freed only after `words_lock` is dropped.
        let words_lock = unsafe { page_lock(words.as_mut_ptr().cast::<u8>(), words_len) }?;
        Ok(PinnedAssignments {
            lock,
            words_lock,
            slab,
            words,
        })
    }

    /// Views of the copies, in the order of `owned` (the same slice `new` was given: its
    /// densities are borrowed from it, its arrays from the page-locked copy).
    pub fn views<'a>(&'a self, owned: &'a [crate::synth::OwnedAssignment]) -> Vec<Assignment<'a>> {
        let mut rest = self.slab.as_slice();
        let mut take = |n: usize| {
            let (head, tail) = rest.split_at(n.min(rest.len()));
            rest = tail;
            head
        };
        let mut rest_words = self.words.as_slice();
        let mut take_words = |n: usize| {
            let (head, tail) = rest_words.split_at(n.min(rest_words.len()));
            rest_words = tail;
            head
        };
        owned
            .iter()
            .map(|o| {
                let mut v = o.as_assignment();
                v.a = take(o.a.len());
                v.b = take(o.b.len());
                v.c = take(o.c.len());
                v.input = take(o.input.len());
                v.aux = take(o.aux.len());
                for d in [
                    &mut v.a_aux_density,
                    &mut v.b_input_density,
                    &mut v.b_aux_density,
                ] {
                    d.words = take_words(d.words.len());
                }
                v
            })
            .collect()
    }

    /// Bytes page-locked.
    pub fn len_bytes(&self) -> usize {
        self.lock.len() + self.words_lock.len()
    }
}

/// Checks one circuit against the SRS lengths: the assignment's own consistency
/// ([`Assignment::validate`]), the lengths fixed by the circuit shape
/// ([`SrsLengths::check_shape`]), then the density popcounts that supraseal-c2 indexes the `a` and
/// `b` queries with.
pub fn check_circuit(lens: &SrsLengths, circuit: &Assignment<'_>) -> Result<(), Error> {
    lens.check_assignment(circuit)?;
    if lens.h == 0 {
        // supraseal-c2 derives the domain as 2^(log2(h - 1) + 1); h = 0 underflows.
        return Err(Error::shape(
            "evaluation domain (supraseal-c2 needs at least 2)",
            2,
            1,
        ));
    }
    Ok(())
}

/// Checks the batch against `lens` and the randomness lengths; `Ok` means every pointer handed
/// to supraseal-c2 covers what it will read and no C++ assertion can fire.
fn check_batch(
    lens: &SrsLengths,
    batch: &[Assignment<'_>],
    r: &[Scalar],
    s: &[Scalar],
) -> Result<(), Error> {
    super::check_randomness(batch, r, s)?;
    for (i, circuit) in batch.iter().enumerate() {
        check_circuit(lens, circuit).inspect_err(|e| {
            tracing::debug!(circuit = i, "circuit does not match the SRS: {e}");
        })?;
    }
    Ok(())
}

/// supraseal-c2's view of one circuit: pointers into the borrowed slices, no copy.
fn raw_assignment(c: &Assignment<'_>) -> supraseal_c2::Assignment<Scalar> {
    fn words(d: &Density<'_>) -> *const usize {
        // u64 words read as usize: same size and alignment on the 64-bit targets this builds on.
        d.words.as_ptr().cast::<usize>()
    }
    supraseal_c2::Assignment {
        a_aux_density: words(&c.a_aux_density),
        a_aux_bit_len: c.a_aux_density.bit_len,
        a_aux_popcount: c.a_aux_density.popcount,
        b_inp_density: words(&c.b_input_density),
        b_inp_bit_len: c.b_input_density.bit_len,
        b_inp_popcount: c.b_input_density.popcount,
        b_aux_density: words(&c.b_aux_density),
        b_aux_bit_len: c.b_aux_density.bit_len,
        b_aux_popcount: c.b_aux_density.popcount,
        a: c.a.as_ptr(),
        b: c.b.as_ptr(),
        c: c.c.as_ptr(),
        abc_size: c.a.len(),
        inp_assignment_data: c.input.as_ptr(),
        inp_assignment_size: c.input.len(),
        aux_assignment_data: c.aux.as_ptr(),
        aux_assignment_size: c.aux.len(),
    }
}

/// Groth16 prover on the GPU through supraseal-c2, bound to one SRS.
///
/// Proofs are bit-exact with `bellperson::groth16::create_proof` for the same `r`, `s`.
/// supraseal-c2 serializes proving inside the process (a static mutex), so concurrent
/// `prove_batch` calls queue; batch circuits to use the GPU well.
pub struct CudaBackend {
    srs: supraseal_c2::SRS,
    lens: SrsLengths,
    pvk: PreparedVerifyingKey<Bls12>,
    path: PathBuf,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("path", &self.path)
            .field("lens", &self.lens)
            .finish_non_exhaustive()
    }
}

impl CudaBackend {
    /// Opens the bellperson parameters file at `path` (a real Filecoin `.params` file works
    /// unchanged) and starts loading it into pinned host memory.
    ///
    /// The lengths are read and the file size checked here ([`scan_params_file`]): supraseal-c2
    /// maps the file and would fault on a short one. It then
    /// deserializes the points in a background thread, which the first proof waits for. The
    /// loaded SRS is cached by path for the life of the process, so a second `open` of the same
    /// path is cheap.
    ///
    /// Errors: [`ErrorKind::NoGpu`] without a usable GPU, I/O and format errors for the file,
    /// [`ErrorKind::Cuda`] when supraseal-c2 refuses it.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let lens = scan_params_file(path)?;
        let vk = VerifyingKey::<Bls12>::read(BufReader::new(File::open(path)?))
            .map_err(|e| Error::format(format!("verifying key of `{}`: {e}", path.display())))?;
        let pvk = prepare_verifying_key(&vk);
        if gpu_count()? == 0 {
            return Err(ErrorKind::NoGpu.into());
        }
        let level = supraseal_patch_level();
        if level < SUPRASEAL_PATCH_LEVEL {
            return Err(ErrorKind::Cuda(format!(
                "the linked supraseal-c2 has patch level {level}, {SUPRASEAL_PATCH_LEVEL} needed: \
                 its proofs of large circuits may not verify (see vendor/supraseal-c2/PATCHES.md)"
            ))
            .into());
        }
        // supraseal-c2 unwraps both conversions; refuse such paths here instead.
        let Some(text) = path.to_str().filter(|t| !t.contains('\0')) else {
            return Err(Error::format(format!(
                "parameters path {} is not valid UTF-8 without NUL bytes",
                path.display()
            )));
        };
        let start = Instant::now();
        let srs = catch_unwind(|| supraseal_c2::SRS::try_new(PathBuf::from(text), true))
            .map_err(|p| {
                Error::from(ErrorKind::Cuda(format!(
                    "loading the SRS panicked: {}",
                    crate::panic_message(&*p)
                )))
            })?
            .map_err(|e| {
                Error::from(ErrorKind::Cuda(format!(
                    "supraseal-c2 refused the SRS `{}`: {e}",
                    path.display()
                )))
            })?;
        tracing::info!(
            path = %path.display(),
            ?lens,
            elapsed_ms = start.elapsed().as_millis() as u64,
            "cuda backend: SRS opened (points load in the background)"
        );
        Ok(CudaBackend {
            srs,
            lens,
            pvk,
            path: path.to_owned(),
        })
    }

    /// The lengths of the SRS this backend proves with.
    pub fn lengths(&self) -> &SrsLengths {
        &self.lens
    }

    /// Verifies a proof against the verifying key of this SRS with bellperson's verifier;
    /// `public_inputs` excludes the leading ONE.
    pub fn verify(&self, proof: &Proof, public_inputs: &[Scalar]) -> Result<bool, Error> {
        Ok(verify_proof(&self.pvk, proof, public_inputs)?)
    }

    /// The parameters file this backend was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn release(&self) {
        // The cache holds one reference of its own; ours is dropped with the backend, so the
        // pinned points are freed once no other backend of this process uses the same path.
        self.srs.evict();
    }

    fn prove_batch(
        &self,
        batch: &[Assignment<'_>],
        r: &[Scalar],
        s: &[Scalar],
    ) -> Result<Vec<Proof>, Error> {
        check_batch(&self.lens, batch, r, s)?;
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let raw: Vec<supraseal_c2::Assignment<Scalar>> = batch.iter().map(raw_assignment).collect();
        // `Proof<Bls12>` is `repr(C)` over blstrs' `repr(transparent)` blst affine points, the
        // layout of supraseal's `groth16_proof` (a: G1, b: G2, c: G1 affine).
        let mut out: Vec<MaybeUninit<Proof>> =
            (0..batch.len()).map(|_| MaybeUninit::uninit()).collect();
        let start = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| {
            supraseal_c2::generate_groth16_proofs(&raw, r, s, &mut out, &self.srs)
        }));
        if let Err(payload) = result {
            let message = crate::panic_message(&*payload);
            tracing::error!(circuits = batch.len(), "supraseal-c2 failed: {message}");
            return Err(ErrorKind::Cuda(format!("supraseal-c2 failed: {message}")).into());
        }
        tracing::debug!(
            circuits = batch.len(),
            elapsed_ms = start.elapsed().as_millis() as u64,
            "cuda backend: batch proved"
        );
        Ok(out
            .into_iter()
            .map(|p| {
                // SAFETY: supraseal-c2 returned without error, having written every proof of the
                // batch; any bit pattern is a valid value of the blst affine coordinates anyway.
                unsafe { p.assume_init() }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sticky_cuda_errors_are_device_lost_others_are_not() {
        for code in [214, 700, 702, 710, 714, 719] {
            let e = cuda_error(code, "proving");
            assert!(matches!(e.kind(), ErrorKind::DeviceLost(_)), "{code}: {e}");
            assert!(e.to_string().contains("must restart"), "{e}");
        }
        // Out of memory and an invalid value leave the context usable.
        for code in [2, 1, 98] {
            let e = cuda_error(code, "proving");
            assert!(matches!(e.kind(), ErrorKind::Cuda(_)), "{code}: {e}");
        }
        assert!(matches!(
            cuda_error(ffi::NO_DEVICE, "x").kind(),
            ErrorKind::NoGpu
        ));
    }

    const SHAPE: SrsLengths = SrsLengths {
        ic: 2,
        h: 7,
        l: 3,
        a: 4,
        b_g1: 3,
        b_g2: 3,
    };

    /// Owned data for an assignment that fits [`SHAPE`]: 2 inputs, 3 aux, n = 5 (domain 8),
    /// A aux density 2 bits (2 + 2 = 4 `a` points), B densities 1 + 2 bits (3 `b` points).
    struct Owned {
        abc: Vec<Scalar>,
        input: Vec<Scalar>,
        aux: Vec<Scalar>,
        a_aux: [u64; 1],
        b_inp: [u64; 1],
        b_aux: [u64; 1],
    }

    impl Owned {
        fn new() -> Self {
            Owned {
                abc: vec![Scalar::from(1u64); 5],
                input: vec![Scalar::from(1u64); 2],
                aux: vec![Scalar::from(5u64); 3],
                a_aux: [0b011],
                b_inp: [0b01],
                b_aux: [0b110],
            }
        }

        fn view(&self) -> Assignment<'_> {
            fn d(words: &[u64; 1], bit_len: usize) -> Density<'_> {
                Density {
                    words: &words[..],
                    bit_len,
                    popcount: words[0].count_ones() as usize,
                }
            }
            Assignment {
                a: &self.abc,
                b: &self.abc,
                c: &self.abc,
                input: &self.input,
                aux: &self.aux,
                a_aux_density: d(&self.a_aux, 3),
                b_input_density: d(&self.b_inp, 2),
                b_aux_density: d(&self.b_aux, 3),
            }
        }
    }

    #[test]
    fn matching_circuit_passes_the_checks() {
        let owned = Owned::new();
        let one = [Scalar::from(1u64)];
        check_batch(&SHAPE, &[owned.view()], &one, &one).unwrap();
        check_batch(&SHAPE, &[], &[], &[]).unwrap();
    }

    #[test]
    fn mismatches_are_typed_errors() {
        let one = [Scalar::from(1u64)];
        type Mutation = fn(&mut Owned);
        let cases: [(&str, Mutation); 6] = [
            ("aux count", |o| o.aux.push(Scalar::from(2u64))),
            ("input count", |o| {
                o.input.pop();
            }),
            ("domain", |o| o.abc.resize(9, Scalar::from(1u64))),
            ("a density", |o| o.a_aux = [0b111]),
            ("b density", |o| o.b_inp = [0b11]),
            ("bits past end", |o| o.b_aux = [0b1000]),
        ];
        for (name, mutate) in cases {
            let mut owned = Owned::new();
            mutate(&mut owned);
            let err = check_batch(&SHAPE, &[owned.view()], &one, &one).unwrap_err();
            assert!(
                matches!(
                    err.kind(),
                    ErrorKind::ShapeMismatch { .. } | ErrorKind::InvalidDensity { .. }
                ),
                "{name}: {err}"
            );
        }
        let owned = Owned::new();
        let err = check_batch(&SHAPE, &[owned.view()], &[], &one).unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::ShapeMismatch { .. }),
            "{err}"
        );
    }

    #[test]
    fn no_gpu_is_zero_not_a_panic() {
        // On a machine with a GPU this is its count; without one (CI), zero and no error.
        let count = gpu_count().expect("gpu_count must not fail for a missing GPU");
        if count == 0 {
            let mut page = vec![0u8; 4096];
            // SAFETY: `page` outlives the (failed or dropped-at-once) registration.
            let err = unsafe { page_lock(page.as_mut_ptr(), page.len()) }.unwrap_err();
            assert!(matches!(err.kind(), ErrorKind::NoGpu), "{err}");
        }
    }

    #[test]
    fn page_lock_refuses_empty_ranges() {
        let mut page = [0u8; 8];
        // SAFETY: nothing is registered for an empty range or a null pointer.
        let err = unsafe { page_lock(page.as_mut_ptr(), 0) }.unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::ShapeMismatch { .. }),
            "{err}"
        );
        // SAFETY: as above.
        let err = unsafe { page_lock(std::ptr::null_mut(), 8) }.unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::ShapeMismatch { .. }),
            "{err}"
        );
    }
}
