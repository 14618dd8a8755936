//! The launcher's side of the SRS: the local cache of generated parameter files, generation with a
//! progress bar, and loading a `.params` file into a shared memfd that every gpu-proc maps (so a
//! restarted gpu-proc maps it again instead of parsing the file).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use kernels::circuits::{AnyCircuit, CircuitSpec};
use kernels::paramgen::{GenDevice, GenPhase, GenProgress};
use kernels::srs::{self, SrsImage, SrsView};
use kernels::synth::CircuitShape;
use shm_protocol::{HugePagePolicy, Region};

/// An error of the SRS cache, generation or loading. Each names the file or circuit it is about.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SrsError {
    /// Parameter generation failed.
    #[error("generating parameters for `{spec}`: {cause}")]
    Generate {
        /// The circuit.
        spec: CircuitSpec,
        /// Why.
        cause: kernels::Error,
    },
    /// A file or directory operation failed.
    #[error("{what} `{}`: {cause}", path.display())]
    Io {
        /// What was being done (`cannot create`, `renaming into`, ...).
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// Writing the parameter file failed.
    #[error("writing `{}`: {cause}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: kernels::Error,
    },
    /// An explicitly named SRS or parameter file does not exist.
    #[error("{what} file `{}` does not exist", path.display())]
    Missing {
        /// `SRS` or `parameter`.
        what: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// The official parameter file of a Filecoin circuit could not be found.
    #[error(transparent)]
    ParamFile(kernels::Error),
    /// The file could not be read into shared memory or does not hold an SRS.
    #[error("SRS `{}`: {cause}", path.display())]
    Load {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: LoadError,
    },
    /// The file holds an SRS for another circuit.
    #[error("SRS `{}` does not fit circuit `{spec}`: {cause}", path.display())]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// The circuit it was loaded for.
        spec: AnyCircuit,
        /// What differs.
        cause: kernels::Error,
    },
    /// The loaded image is not a valid SRS image.
    #[error("the shared SRS image: {0}")]
    Image(kernels::Error),
}

/// Why loading an SRS file into shared memory failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// Reading, parsing or checking the file.
    #[error(transparent)]
    Srs(#[from] kernels::Error),
    /// Creating the shared memory.
    #[error(transparent)]
    Memory(#[from] shm_protocol::Error),
    /// Opening the file.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Default file of a built-in circuit's generated SRS in `cache_dir`.
pub fn cached_path(cache_dir: &Path, spec: &CircuitSpec) -> PathBuf {
    let name: String = spec
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    cache_dir.join(format!("{name}.params"))
}

/// Generates random parameters for `spec` into `out` on the host (see [`generate_on`]).
pub fn generate(
    spec: &CircuitSpec,
    seed: u64,
    out: &Path,
    show_progress: bool,
) -> Result<(), SrsError> {
    generate_on(spec, seed, GenDevice::Cpu, out, show_progress)
}

/// Generates random parameters for `spec` into `out` with a progress bar on stderr, the
/// multiplications on `device` (the same file either way).
/// The file is written to a temporary name and renamed, so a crash leaves no half file.
pub fn generate_on(
    spec: &CircuitSpec,
    seed: u64,
    device: GenDevice,
    out: &Path,
    show_progress: bool,
) -> Result<(), SrsError> {
    let started = Instant::now();
    let bar = GenBar::new(show_progress);
    let progress = |p: GenProgress| bar.update(p);
    let params = kernels::paramgen::generate_parameters_seeded_on(
        spec.circuit(None),
        seed,
        device,
        &progress,
    )
    .map_err(|source| SrsError::Generate {
        spec: *spec,
        cause: source,
    })?;
    bar.finish();
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| SrsError::Io {
            what: "cannot create",
            path: dir.to_owned(),
            cause: source,
        })?;
    }
    let tmp = out.with_extension(format!("tmp-{}", std::process::id()));
    srs::write_params_file(&tmp, &params).map_err(|source| SrsError::Write {
        path: tmp.clone(),
        cause: source,
    })?;
    std::fs::rename(&tmp, out).map_err(|source| SrsError::Io {
        what: "renaming into",
        path: out.to_owned(),
        cause: source,
    })?;
    tracing::info!(circuit = %spec, file = %out.display(), secs = started.elapsed().as_secs_f64(), "generated SRS");
    Ok(())
}

/// A progress bar on stderr for parameter generation.
pub struct GenBar(ProgressBar);

impl GenBar {
    /// A bar, hidden unless `show`.
    pub fn new(show: bool) -> GenBar {
        let bar = if show {
            ProgressBar::new(0)
        } else {
            ProgressBar::hidden()
        };
        bar.set_style(
            ProgressStyle::with_template("{prefix:>12} [{bar:30}] {pos}/{len} ({eta})")
                .expect("static template")
                .progress_chars("=> "),
        );
        GenBar(bar)
    }

    /// Shows `p` (cheap: called from the generator's worker threads).
    pub fn update(&self, p: GenProgress) {
        self.0.set_prefix(match p.phase {
            GenPhase::Synthesis => "synthesis",
            GenPhase::Tables => "tables",
            GenPhase::Exponentiations => "points",
            GenPhase::Done => "done",
        });
        self.0.set_length(p.total);
        self.0.set_position(p.done);
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}

/// The SRS file for `spec`: `explicit` if given (it must exist), else the cached one, generated on
/// first use (built-in circuits only).
pub fn resolve(
    spec: &CircuitSpec,
    explicit: Option<&Path>,
    cache_dir: &Path,
) -> Result<PathBuf, SrsError> {
    if let Some(p) = explicit {
        return existing("SRS", p);
    }
    let path = cached_path(cache_dir, spec);
    if !path.is_file() {
        eprintln!(
            "generating a local SRS for `{spec}` into `{}` (first run only)",
            path.display()
        );
        generate(spec, rand::random(), &path, true)?;
    }
    Ok(path)
}

/// The SRS file for any circuit: built-in ones as [`resolve`]; Filecoin ones `explicit` or the
/// official file in `param_cache`, which must exist (production parameters, or local test ones
/// from `splitprover params generate`).
pub fn resolve_any(
    spec: &AnyCircuit,
    explicit: Option<&Path>,
    cache_dir: &Path,
    param_cache: &Path,
) -> Result<PathBuf, SrsError> {
    match spec {
        AnyCircuit::Builtin(b) => resolve(b, explicit, cache_dir),
        AnyCircuit::Filecoin(kind) => {
            if let Some(p) = explicit {
                return existing("parameter", p);
            }
            kind.param_file(param_cache).map_err(SrsError::ParamFile)
        }
    }
}

fn existing(what: &'static str, path: &Path) -> Result<PathBuf, SrsError> {
    if path.is_file() {
        Ok(path.to_owned())
    } else {
        Err(SrsError::Missing {
            what,
            path: path.to_owned(),
        })
    }
}

/// An SRS image in a shared memfd, ready to hand to gpu-procs.
pub struct SharedSrs {
    /// The circuit it serves.
    pub spec: AnyCircuit,
    /// Its id (what slots carry).
    pub circuit_id: u64,
    /// The file it was read from.
    pub params_path: PathBuf,
    /// The memfd region holding the image.
    pub region: Arc<Region>,
    /// Size of the image (the region may be rounded up to its page size).
    pub bytes: u64,
}

impl SharedSrs {
    /// Reads `params_path` into a new memfd region (in parallel, [`SrsImage::write_params_file`])
    /// and checks it fits `spec` (of `shape`). Errors name the file and the problem (missing,
    /// truncated, wrong format, made for another circuit).
    pub fn load(
        spec: &AnyCircuit,
        circuit_id: u64,
        shape: &CircuitShape,
        params_path: &Path,
        huge: HugePagePolicy,
    ) -> Result<SharedSrs, SrsError> {
        let started = Instant::now();
        let load = |source: LoadError| SrsError::Load {
            path: params_path.to_owned(),
            cause: source,
        };
        let lens = srs::scan_params_file(params_path).map_err(|e| load(e.into()))?;
        let bytes = SrsImage::size_for(&lens).map_err(|e| load(e.into()))?;
        let mut region = Region::create_write_once("splitprover-srs", bytes, huge)
            .map_err(|e| load(e.into()))?;
        let file = std::fs::File::open(params_path).map_err(|e| load(e.into()))?;
        // SAFETY: the region was just created and its fd has not been passed to anyone yet, so
        // nothing else can read or write it while we fill it.
        let dst = unsafe { region.as_mut_slice() };
        SrsImage::write_params_file(&file, &lens, circuit_id, false, &mut dst[..bytes])
            .map_err(|e| load(e.into()))?;
        // Sealed before anyone else gets the fd: no process can write the image from now on
        // (write(2) and writable shared mappings fail with EPERM), gpu-procs map it read-only.
        region.seal_writes().map_err(|e| load(e.into()))?;
        // SAFETY: from here on the image is read-only: sealed against writes above, and the
        // launcher never writes through its own mapping again.
        let view = SrsView::new(unsafe { region.as_slice() }).map_err(|e| load(e.into()))?;
        view.check_shape(shape)
            .map_err(|source| SrsError::Mismatch {
                path: params_path.to_owned(),
                spec: *spec,
                cause: source,
            })?;
        tracing::info!(
            circuit = %spec,
            file = %params_path.display(),
            mib = bytes >> 20,
            pages = %region.page_kind(),
            secs = started.elapsed().as_secs_f64(),
            "SRS loaded into shared memory"
        );
        Ok(SharedSrs {
            spec: *spec,
            circuit_id,
            params_path: params_path.to_owned(),
            region: Arc::new(region),
            bytes: bytes as u64,
        })
    }

    /// A zero-copy view of the image.
    pub fn view(&self) -> Result<SrsView<'_>, SrsError> {
        // SAFETY: the image is read-only after `load` (see there).
        SrsView::new(unsafe { self.region.as_slice() }).map_err(SrsError::Image)
    }
}

/// The name cuzk's API gives the circuit of `spec` (`PreloadSRS`, `EvictSRS`, `GetStatus`):
/// `porep-32g`, `wpost-32g` (WindowPoSt), `winning-32g`, `snap-64g`, … — the family, then the
/// sector size in `k`/`m`/`g` (KiB, MiB, GiB). A built-in circuit is named by its spec
/// (`sha-chain:1`). Worked out from the spec's text, so it is the same with and without the
/// `filecoin` feature.
pub fn cuzk_circuit_id(spec: &AnyCircuit) -> String {
    let text = spec.to_string();
    let AnyCircuit::Filecoin(_) = spec else {
        return text;
    };
    let (prefix, name) = text.split_once(':').unwrap_or(("", &text));
    let family = match prefix {
        "post" if name.contains("Winning") => "winning",
        "post" => "wpost",
        other => other,
    };
    match sector_size_label(name) {
        Some(size) => format!("{family}-{size}"),
        None => text,
    }
}

/// `32g` from `StackedDrgWindow32GiBV1_2`: the first number followed by `KiB`, `MiB` or `GiB`.
fn sector_size_label(name: &str) -> Option<String> {
    let bytes = name.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let unit = match name.get(i..i + 3) {
                Some("KiB") => 'k',
                Some("MiB") => 'm',
                Some("GiB") => 'g',
                _ => continue,
            };
            return Some(format!("{}{unit}", &name[start..i]));
        }
        i += 1;
    }
    None
}

/// The circuit among `configured` that `id` names: its spec (`sha-chain:1`,
/// `porep:StackedDrg32GiBV1_1`) or its cuzk name ([`cuzk_circuit_id`], case-insensitive).
/// Where several configured circuits share a cuzk name (two PoRep API versions of one sector
/// size), the first is meant.
pub fn circuit_for_id<'a>(
    id: &str,
    configured: impl IntoIterator<Item = &'a AnyCircuit> + Clone,
) -> Option<AnyCircuit> {
    let id = id.trim();
    configured
        .clone()
        .into_iter()
        .find(|c| c.to_string() == id)
        .or_else(|| {
            configured
                .into_iter()
                .find(|c| cuzk_circuit_id(c).eq_ignore_ascii_case(id))
        })
        .copied()
}

#[cfg(test)]
mod cuzk_id_tests {
    use super::*;

    #[test]
    fn built_in_circuits_are_named_by_their_spec() {
        let sha: AnyCircuit = "sha-chain:1".parse().unwrap();
        let bits: AnyCircuit = "bits:8".parse().unwrap();
        assert_eq!(cuzk_circuit_id(&sha), "sha-chain:1");
        let configured = [sha, bits];
        assert_eq!(circuit_for_id("bits:8", &configured), Some(bits));
        assert_eq!(circuit_for_id(" sha-chain:1 ", &configured), Some(sha));
        assert_eq!(circuit_for_id("sha-chain:2", &configured), None);
        assert_eq!(circuit_for_id("porep-32g", &configured), None);
    }

    #[test]
    fn size_labels_follow_cuzk() {
        assert_eq!(
            sector_size_label("StackedDrg32GiBV1_1").as_deref(),
            Some("32g")
        );
        assert_eq!(
            sector_size_label("StackedDrgWindow2KiBV1_2").as_deref(),
            Some("2k")
        );
        assert_eq!(
            sector_size_label("StackedDrg512MiBV1").as_deref(),
            Some("512m")
        );
        assert_eq!(sector_size_label("StackedDrgV1"), None);
    }

    #[cfg(feature = "filecoin")]
    #[test]
    fn filecoin_circuits_have_cuzk_names() {
        let cases = [
            ("porep:StackedDrg32GiBV1_1", "porep-32g"),
            ("porep:StackedDrg64GiBV1_1", "porep-64g"),
            ("post:StackedDrgWindow32GiBV1_2", "wpost-32g"),
            ("post:StackedDrgWinning32GiBV1", "winning-32g"),
            ("snap:StackedDrg32GiBV1", "snap-32g"),
            ("porep:StackedDrg2KiBV1_1", "porep-2k"),
        ];
        let configured: Vec<AnyCircuit> = cases.iter().map(|(s, _)| s.parse().unwrap()).collect();
        for ((spec, name), c) in cases.iter().zip(&configured) {
            assert_eq!(cuzk_circuit_id(c), *name, "{spec}");
            assert_eq!(circuit_for_id(name, &configured), Some(*c), "{name}");
            assert_eq!(circuit_for_id(spec, &configured), Some(*c), "{spec}");
        }
        assert_eq!(
            circuit_for_id("WPOST-32G", &configured),
            Some(configured[2])
        );
        assert_eq!(circuit_for_id("snap-64g", &configured), None);
    }
}
