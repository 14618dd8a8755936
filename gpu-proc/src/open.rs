//! What a gpu-proc maps and opens: the SRS images and pre-compiled constraint systems the
//! launcher passes as sealed memfds, and the backend of each circuit over its SRS.

use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Arc;

use kernels::backend::MatricesBytes;
use kernels::r1cs::R1cs;
use kernels::{Backend, CpuBackend};
use shm_protocol::control::{BackendKind, R1csEntry, SrsEntry};
use shm_protocol::{Region, SealedBytes};

use crate::Error;

/// An SRS image in an inherited, read-only-by-contract memfd.
pub struct SrsMapping(Region);

impl SrsMapping {
    /// Maps the SRS memfd `fd`.
    ///
    /// # Safety
    ///
    /// `fd` must be an SRS memfd that the launcher finished writing before starting this process
    /// and never writes again (the launcher's contract), and nothing else in this process may
    /// own that descriptor.
    pub unsafe fn from_fd(fd: i32) -> Result<SrsMapping, Error> {
        // SAFETY: forwarded to the caller.
        unsafe { SrsMapping::from_owned_fd(OwnedFd::from_raw_fd(fd)) }
    }

    /// Maps the SRS memfd `fd` (one received with [`ToGpu::LoadSrs`]).
    ///
    /// # Safety
    ///
    /// `fd` must be an SRS memfd that the launcher finished writing and sealed before sending
    /// it, and never writes again (the launcher's contract).
    pub unsafe fn from_owned_fd(fd: OwnedFd) -> Result<SrsMapping, Error> {
        // SAFETY: forwarded to the caller.
        let region = unsafe { Region::from_inherited_fd_read_only(fd) }
            .map_err(Error::ring("mapping an SRS image"))?;
        Ok(SrsMapping(region))
    }
}

impl AsRef<[u8]> for SrsMapping {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: an SRS region is written once by the launcher before any gpu-proc starts and
        // never again (see `from_fd`), so no write can overlap this shared borrow.
        unsafe { self.0.as_slice() }
    }
}

/// Maps and checks the pre-compiled constraint system of `entry` (its inherited memfd).
///
/// # Safety
///
/// `entry.fd` must be a memfd the launcher wrote once and sealed against writes before starting
/// this process (its contract), owned by nothing else in this process.
pub unsafe fn map_matrices(entry: &R1csEntry) -> Result<R1cs, String> {
    // SAFETY: forwarded to the caller: the launcher's sealed memfd, owned here alone.
    let fd = unsafe { OwnedFd::from_raw_fd(entry.fd) };
    // SAFETY: as above: sealed by the launcher, never written again.
    let region = unsafe { Region::from_inherited_fd_read_only(fd) }.map_err(|e| e.to_string())?;
    let len = usize::try_from(entry.bytes).map_err(|_| format!("{} bytes", entry.bytes))?;
    let bytes = SealedBytes::new(Arc::new(region), len).map_err(|e| e.to_string())?;
    R1cs::from_bytes_of(Box::new(bytes), entry.circuit_id).map_err(|e| e.to_string())
}

/// Opens the `kind` backend for one SRS the launcher passed: the CPU backend over the inherited
/// SRS image, the `gpu` backend uploading that image to the device, the supraseal-c2 (`cuda`)
/// backend from the `.params` file it came from.
///
/// `matrices` are what the `gpu` backend's plan makes room for beside the SRS, uploaded at the
/// first witness-only proof (the circuit's matrices, [`matrices_reserve`]; their rows streamed
/// per proof where the budget holds nothing else).
///
/// # Safety
///
/// As [`SrsMapping::from_fd`] for `entry.fd` (read for [`BackendKind::Cpu`] and
/// [`BackendKind::Gpu`]).
pub unsafe fn open_backend(
    kind: BackendKind,
    memory_budget: Option<u64>,
    matrices: MatricesBytes,
    entry: &SrsEntry,
) -> Result<Box<dyn Backend>, Error> {
    // SAFETY: forwarded to the caller; the launcher passes `entry.fd` to this process alone.
    let fd = unsafe { OwnedFd::from_raw_fd(entry.fd) };
    let budget = (memory_budget, matrices);
    // SAFETY: forwarded to the caller.
    unsafe { open_backend_fd(kind, budget, fd, &entry.circuit, &entry.params_path) }
}

/// Device bytes the `gpu` backend takes for `r1cs`'s matrices once a witness-only proof of its
/// circuit comes, with and without their rows (zeros in a build without CUDA).
#[cfg(feature = "cuda")]
pub fn matrices_reserve(r1cs: &R1cs) -> MatricesBytes {
    kernels::backend::gpu::matrices_device_bytes(r1cs)
}

/// Device bytes the `gpu` backend takes for `r1cs`'s matrices once a witness-only proof of its
/// circuit comes, with and without their rows (zeros in a build without CUDA).
#[cfg(not(feature = "cuda"))]
pub fn matrices_reserve(_r1cs: &R1cs) -> MatricesBytes {
    MatricesBytes::default()
}

/// [`open_backend`] over an owned SRS memfd, `budget` the memory budget and the matrices. The
/// supraseal-c2 backend loads from `params_path` and closes `fd` at once, and the `gpu` backend
/// unmaps it once the points are on the device unless its plan streams part of them from it, so
/// an evicted SRS's memory is not kept alive by this process.
///
/// # Safety
///
/// As [`SrsMapping::from_owned_fd`] for `fd` (read for [`BackendKind::Cpu`] and
/// [`BackendKind::Gpu`]).
pub(crate) unsafe fn open_backend_fd(
    kind: BackendKind,
    budget: (Option<u64>, MatricesBytes),
    fd: OwnedFd,
    circuit: &str,
    params_path: &std::path::Path,
) -> Result<Box<dyn Backend>, Error> {
    let opened = match kind {
        BackendKind::Cpu => {
            // SAFETY: forwarded to the caller.
            let mapping = unsafe { SrsMapping::from_owned_fd(fd) }?;
            CpuBackend::new(mapping).map(|b| Box::new(b) as Box<dyn Backend>)
        }
        BackendKind::Cuda => {
            drop(fd);
            open_cuda(params_path)?
        }
        BackendKind::Gpu => {
            // SAFETY: forwarded to the caller.
            let mapping = unsafe { SrsMapping::from_owned_fd(fd) }?;
            open_gpu(Arc::new(mapping), budget)?
        }
    };
    opened.map_err(|source| Error::Backend {
        circuit: circuit.to_owned(),
        source,
    })
}

/// Opens the `kind` backend from a `.params` file (benches and in-process modes): the CPU
/// backend over an SRS image read from it (tagged `circuit_id`), the CUDA backend over the file.
/// `circuit` names the circuit in errors.
pub fn open_backend_from_file(
    kind: BackendKind,
    params: &std::path::Path,
    circuit_id: u64,
    circuit: &str,
) -> Result<Box<dyn Backend>, Error> {
    let opened = match kind {
        BackendKind::Cpu => kernels::srs::SrsImage::from_params_file(params, circuit_id, false)
            .and_then(CpuBackend::new)
            .map(|b| Box::new(b) as Box<dyn Backend>),
        BackendKind::Cuda => open_cuda(params)?,
        BackendKind::Gpu => {
            match kernels::srs::SrsImage::from_params_file(params, circuit_id, false) {
                Ok(image) => open_gpu(Arc::new(image), (None, MatricesBytes::default()))?,
                Err(e) => Err(e),
            }
        }
    };
    opened.map_err(|source| Error::Backend {
        circuit: circuit.to_owned(),
        source,
    })
}

/// The CUDA backend over `params`: the outer error when this build cannot have one, the inner
/// one when it fails to open.
type Opened = Result<Box<dyn Backend>, kernels::Error>;

#[cfg(feature = "cuda")]
fn open_cuda(params: &std::path::Path) -> Result<Opened, Error> {
    Ok(kernels::backend::cuda::CudaBackend::open(params).map(|b| Box::new(b) as Box<dyn Backend>))
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_params: &std::path::Path) -> Result<Opened, Error> {
    Err(Error::NoCuda)
}

/// Our own GPU backend over an SRS image: the points go to the device; the image is kept only
/// where the plan streams part of it for every proof (a budget smaller than the SRS).
#[cfg(feature = "cuda")]
fn open_gpu(
    image: Arc<dyn AsRef<[u8]> + Send + Sync>,
    (memory_budget, matrices): (Option<u64>, MatricesBytes),
) -> Result<Opened, Error> {
    let options = kernels::backend::gpu::GpuOptions {
        memory_budget,
        matrices,
        ..Default::default()
    };
    Ok(
        kernels::backend::gpu::GpuBackend::with_image(image, options).map(|b| {
            let r = b.residency();
            tracing::info!(
                srs_mib = r.srs_bytes >> 20,
                scratch_mib = r.scratch_bytes >> 20,
                upload_ms = format!("{:.0}", r.upload_ms),
                pinned = r.pinned,
                // 2: a batch's copies overlap the previous proof (prove_claimed hands the
                // backend the whole batch)
                input_sets = r.input_sets,
                planned_mib = r.planned_bytes >> 20,
                budget_mib = r.budget_bytes >> 20,
                streamed_mib = r.streamed_bytes >> 20,
                matrix_rows_streamed = r.matrices_streamed,
                stream_gbps = format!("{:.1}", r.stream_gbps),
                "SRS uploaded to the GPU"
            );
            Box::new(b) as Box<dyn Backend>
        }),
    )
}

#[cfg(not(feature = "cuda"))]
fn open_gpu(
    _image: Arc<dyn AsRef<[u8]> + Send + Sync>,
    _budget: (Option<u64>, MatricesBytes),
) -> Result<Opened, Error> {
    Err(Error::NoCuda)
}
