//! The pre-compiled constraint systems of the served circuits (`kernels::r1cs`): recorded once
//! per circuit shape, cached on disk, held in one sealed memfd per circuit that synth-proc maps
//! read-only (one copy per host, like the SRS images).
//!
//! At pipeline start, for each circuit: the cache file
//! `<cache_dir>/r1cs/<circuit>-<id>.v<format>.r1cs` is read into a new memfd, sealed, and checked
//! in full (checksum, every term, the shape counted for the slots); a missing, damaged or stale
//! file is recorded again from the circuit's blank circuit (a warning says why) and written
//! atomically. Matrices larger than the budget are not used: the circuit is synthesized in full
//! and the status says why. Nothing here fails a start: pre-compiled matrices are an
//! acceleration.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use kernels::circuits::AnyCircuit;
use kernels::r1cs::R1cs;
use kernels::synth::CircuitShape;
use shm_protocol::{HugePagePolicy, Region, SealedBytes};

/// How synthesis works, pipeline-wide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynthesisSettings {
    /// Synthesize through pre-compiled matrices where they fit the budget.
    pub precompiled: bool,
    /// Where the matrices are cached (`<dir>/r1cs/`); `None`: recorded at every start, never
    /// written.
    pub cache_dir: Option<PathBuf>,
    /// Bytes all circuits' matrices may take together.
    pub budget_bytes: u64,
    /// Memory one synthesis worker may take besides its slot (the memory model's allowance).
    pub worker_bytes: u64,
    /// Pre-compiled circuits travel in witness-only slots (issue 31): synth-proc writes the
    /// witness alone and the gpu-procs compute a, b, c from the same matrices.
    pub witness_slots: bool,
}

impl Default for SynthesisSettings {
    fn default() -> Self {
        SynthesisSettings {
            precompiled: true,
            cache_dir: None,
            budget_bytes: default_budget(),
            worker_bytes: DEFAULT_WORKER_BYTES,
            witness_slots: false,
        }
    }
}

/// The memory model's allowance per synthesis worker by default: a circuit's own data (a parsed
/// C1 output's tree paths, the gadgets' temporaries) besides the slot it writes.
pub const DEFAULT_WORKER_BYTES: u64 = 512 << 20;

/// What a circuit's matrices take, estimated from its shape before they are recorded: row
/// starts for A, B and C plus two terms per row each (the 2 KiB PoRep has 1.85).
pub fn estimated_bytes(shape: &CircuitShape) -> u64 {
    let n = shape.n() as u64 + 1;
    kernels::r1cs::HEADER_BYTES as u64 + 3 * 8 * n + 3 * 2 * 8 * n
}

/// A quarter of the host's memory (MemTotal), or 4 GiB where it cannot be read.
pub fn default_budget() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(4 << 30, |kib| kib * 1024 / 4)
}

/// One circuit's matrices in a sealed memfd.
pub struct SharedR1cs {
    /// The circuit.
    pub spec: AnyCircuit,
    /// Its id.
    pub circuit_id: u64,
    /// The sealed bytes of the encoding.
    pub bytes: SealedBytes,
    /// Non-zero terms of A, B, C.
    pub nnz: [u64; 3],
    /// Where it came from.
    pub origin: Origin,
}

/// Where a circuit's matrices came from.
#[derive(Clone, Debug, PartialEq)]
pub enum Origin {
    /// Read from the cache file.
    Cached(PathBuf),
    /// Recorded at this start (and written to the cache file, if there is a cache dir).
    Recorded {
        /// Seconds the recording took.
        secs: f64,
    },
}

impl SharedR1cs {
    /// Bytes of the encoding.
    pub fn len(&self) -> u64 {
        self.bytes.as_ref().len() as u64
    }

    /// Whether the encoding is empty (never: the header alone is 128 bytes).
    pub fn is_empty(&self) -> bool {
        self.bytes.as_ref().is_empty()
    }

    /// The matrices, checked again, served from this memfd (for syntheses in this process).
    pub fn open(&self) -> Result<R1cs, kernels::Error> {
        R1cs::from_bytes(Box::new(self.bytes.clone()))
    }

    /// Issue 31: the capacities of one witness slot of this circuit (its inputs, the aux
    /// variables its rows show to be bits, the others: `kernels::witness`), what synth-proc lays
    /// out for a `SynthRequest::witness` of it; size the ring's witness slots with their
    /// `slot_bytes`. One pass over the matrices (seconds; tens of seconds at a 32 GiB PoRep
    /// partition).
    pub fn witness_capacity(&self) -> Result<shm_protocol::WitnessCapacity, kernels::Error> {
        let layout = kernels::witness::WitnessLayout::of(&self.open()?);
        Ok(crate::ring::witness_capacity_for(&layout))
    }
}

/// What synthesis of one circuit uses, for logs and status.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// Through its matrices.
    Precompiled {
        /// Bytes of the matrices.
        bytes: u64,
        /// Cached or recorded.
        origin: Origin,
    },
    /// In full, and why.
    Full(String),
}

impl std::fmt::Display for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Plan::Precompiled { bytes, origin } => {
                write!(f, "pre-compiled, {} MiB", bytes.div_ceil(1 << 20))?;
                match origin {
                    Origin::Cached(_) => write!(f, ", cached"),
                    Origin::Recorded { secs } => write!(f, ", recorded in {secs:.1} s"),
                }
            }
            Plan::Full(why) => write!(f, "full ({why})"),
        }
    }
}

/// The cache file of a circuit's matrices.
pub fn cache_file(cache_dir: &Path, spec: &AnyCircuit, circuit_id: u64) -> PathBuf {
    let name: String = spec
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    cache_dir.join("r1cs").join(format!(
        "{name}-{circuit_id:016x}.v{}.r1cs",
        kernels::r1cs::VERSION
    ))
}

/// The matrices of `spec` (of `shape`, counted for the slots), from the cache or recorded, if
/// they fit `budget` bytes, in a memfd of `huge` pages; otherwise why not.
pub fn load_or_record(
    spec: &AnyCircuit,
    circuit_id: u64,
    shape: &CircuitShape,
    cache_dir: Option<&Path>,
    budget: u64,
    huge: HugePagePolicy,
) -> Result<SharedR1cs, String> {
    if let Some(dir) = cache_dir {
        let path = cache_file(dir, spec, circuit_id);
        if path.exists() {
            match read_cached(&path, spec, circuit_id, shape, budget, huge) {
                Ok(shared) => return Ok(shared),
                Err(Refusal::OverBudget(why)) => return Err(why),
                Err(Refusal::Unusable(why)) => {
                    tracing::warn!(circuit = %spec, file = %path.display(), "the cached pre-compiled constraint system is unusable ({why}); recording it again");
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
    }
    let started = Instant::now();
    let builder = spec.record_r1cs(Some(budget)).map_err(|e| match e.kind() {
        kernels::ErrorKind::R1csOverBudget { .. } => format!(
            "its matrices exceed the budget of {} MiB ([synthesis] matrices_budget)",
            budget >> 20
        ),
        _ => format!("recording its matrices failed: {e}"),
    })?;
    let secs = started.elapsed().as_secs_f64();
    if builder.shape() != *shape {
        return Err(format!(
            "its blank circuit records {:?}, but it counts {shape:?}",
            builder.shape()
        ));
    }
    let len = builder.encoded_bytes();
    let mut region = new_region(spec, len, huge)?;
    {
        // SAFETY: the region was just created and its fd is not shared yet: nothing else reads
        // or writes it while it is filled.
        let mut dst = &mut unsafe { region.as_mut_slice() }[..len as usize];
        builder
            .write(circuit_id, &mut dst)
            .map_err(|e| format!("writing its matrices: {e}"))?;
        if !dst.is_empty() {
            return Err(format!(
                "its encoding came {} bytes short of its announced size",
                dst.len()
            ));
        }
    }
    if let Some(dir) = cache_dir {
        let path = cache_file(dir, spec, circuit_id);
        if let Err(e) = write_atomic(&path, &builder, circuit_id) {
            tracing::warn!(circuit = %spec, file = %path.display(), "cannot cache the pre-compiled constraint system: {e}");
        }
    }
    drop(builder);
    let shared = seal_and_check(
        region,
        len,
        spec,
        circuit_id,
        shape,
        Origin::Recorded { secs },
    )
    .map_err(|r| match r {
        Refusal::OverBudget(w) | Refusal::Unusable(w) => w,
    })?;
    tracing::info!(circuit = %spec, mib = len >> 20, secs, nnz = ?shared.nnz, "pre-compiled constraint system recorded");
    Ok(shared)
}

enum Refusal {
    OverBudget(String),
    Unusable(String),
}

fn read_cached(
    path: &Path,
    spec: &AnyCircuit,
    circuit_id: u64,
    shape: &CircuitShape,
    budget: u64,
    huge: HugePagePolicy,
) -> Result<SharedR1cs, Refusal> {
    let unusable = |e: std::io::Error| Refusal::Unusable(e.to_string());
    let mut file = std::fs::File::open(path).map_err(unusable)?;
    let len = file.metadata().map_err(unusable)?.len();
    if len > budget {
        return Err(Refusal::OverBudget(format!(
            "its matrices ({} MiB) exceed the budget of {} MiB ([synthesis] matrices_budget)",
            len >> 20,
            budget >> 20
        )));
    }
    let mut region = new_region(spec, len, huge).map_err(Refusal::Unusable)?;
    {
        // SAFETY: the region was just created and its fd is not shared yet: nothing else reads
        // or writes it while it is filled.
        let dst = unsafe { region.as_mut_slice() };
        file.read_exact(&mut dst[..len as usize])
            .map_err(unusable)?;
    }
    tracing::debug!(circuit = %spec, file = %path.display(), "pre-compiled constraint system read");
    seal_and_check(
        region,
        len,
        spec,
        circuit_id,
        shape,
        Origin::Cached(path.to_owned()),
    )
}

fn new_region(spec: &AnyCircuit, len: u64, huge: HugePagePolicy) -> Result<Region, String> {
    let bytes = usize::try_from(len).map_err(|_| format!("{len} bytes"))?;
    Region::create_write_once("splitprover-r1cs", bytes, huge)
        .map_err(|e| format!("cannot create the memory of `{spec}`'s matrices: {e}"))
}

fn seal_and_check(
    region: Region,
    len: u64,
    spec: &AnyCircuit,
    circuit_id: u64,
    shape: &CircuitShape,
    origin: Origin,
) -> Result<SharedR1cs, Refusal> {
    region
        .seal_writes()
        .map_err(|e| Refusal::Unusable(e.to_string()))?;
    let bytes = SealedBytes::new(Arc::new(region), len as usize)
        .map_err(|e| Refusal::Unusable(e.to_string()))?;
    let r1cs =
        R1cs::from_bytes(Box::new(bytes.clone())).map_err(|e| Refusal::Unusable(e.to_string()))?;
    if r1cs.circuit_id() != circuit_id {
        return Err(Refusal::Unusable(format!(
            "made for circuit id {:#x}, not {circuit_id:#x}",
            r1cs.circuit_id()
        )));
    }
    if r1cs.shape() != *shape {
        return Err(Refusal::Unusable(format!(
            "of shape {:?}, but `{spec}` counts {shape:?}",
            r1cs.shape()
        )));
    }
    Ok(SharedR1cs {
        spec: *spec,
        circuit_id,
        nnz: r1cs.nnz(),
        bytes,
        origin,
    })
}

fn write_atomic(
    path: &Path,
    builder: &kernels::r1cs::R1csBuilder,
    circuit_id: u64,
) -> std::io::Result<()> {
    let dir = path.parent().expect("cache files live in a directory");
    std::fs::create_dir_all(dir)?;
    // Unique per writer, so two pipelines of one process (tests) or two processes sharing a
    // cache never write the same temporary file.
    static WRITERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    // Relaxed: a name counter, no memory depends on it.
    let n = WRITERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp.{}.{n}", std::process::id()));
    let result = (|| {
        let file = std::fs::File::create(&tmp)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        builder.write(circuit_id, &mut out)?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_witness_slot_is_sized_from_the_shared_matrices() {
        let spec: AnyCircuit = "bits:130".parse().unwrap();
        let shape = spec.shape().unwrap();
        let id = spec.circuit_id().unwrap();
        let shared =
            load_or_record(&spec, id, &shape, None, 1 << 30, HugePagePolicy::Auto).unwrap();
        let caps = shared.witness_capacity().unwrap();
        assert_eq!((caps.inputs, caps.bits, caps.non_bits), (2, 130, 3));
        assert!(
            caps.slot_bytes().unwrap()
                < crate::ring::capacity_for(&shape).slot_bytes().unwrap() / 10
        );
    }
}
