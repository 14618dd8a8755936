//! SRS files and images: bellperson's `.params` format round trips, reading into an image,
//! clear errors for truncated, foreign or mismatched data, and the fast generator against
//! bellperson's own.

mod common;

use std::io::Write;

use bellperson::groth16::{generate_random_parameters, Parameters};
use blstrs::Bls12;
use kernels::circuits::CircuitSpec;
use kernels::paramgen::{generate_parameters, generate_parameters_seeded, GenPhase};
use kernels::srs::{
    read_params_file, scan_params_file, write_params_file, SrsImage, SrsLengths, SrsView,
};
use kernels::ErrorKind;
use rand_chacha::rand_core::SeedableRng;

fn params(spec: &str, seed: u64) -> (CircuitSpec, Parameters<Bls12>) {
    let spec: CircuitSpec = spec.parse().unwrap();
    let p = generate_parameters_seeded(spec.circuit(None), seed, &|_| {}).unwrap();
    (spec, p)
}

#[test]
fn generator_equals_bellperson_for_the_same_rng() {
    for s in ["pubinputs:2", "bits:70"] {
        let spec: CircuitSpec = s.parse().unwrap();
        let mut r1 = rand_chacha::ChaCha20Rng::seed_from_u64(21);
        let mut r2 = rand_chacha::ChaCha20Rng::seed_from_u64(21);
        let ours = generate_parameters(spec.circuit(None), &mut r1, &|_| {}).unwrap();
        let theirs =
            generate_random_parameters::<Bls12, _, _>(spec.circuit(None), &mut r2).unwrap();
        assert!(ours == theirs, "{s}: parameters differ from bellperson's");
    }
}

#[test]
fn seeded_generation_is_reproducible_and_reports_progress() {
    let spec: CircuitSpec = "bits:200".parse().unwrap();
    let seen = std::sync::Mutex::new(Vec::new());
    let a = generate_parameters_seeded(spec.circuit(None), 5, &|p| seen.lock().unwrap().push(p))
        .unwrap();
    let b = generate_parameters_seeded(spec.circuit(None), 5, &|_| {}).unwrap();
    let c = generate_parameters_seeded(spec.circuit(None), 6, &|_| {}).unwrap();
    assert!(a == b);
    assert!(a != c);
    let seen = seen.into_inner().unwrap();
    let last = seen.last().unwrap();
    assert_eq!(last.phase, GenPhase::Done);
    assert_eq!(last.done, last.total);
    assert!(seen.iter().any(|p| p.phase == GenPhase::Exponentiations));
}

#[test]
fn params_file_round_trips_and_streams_into_the_same_image() {
    let (spec, p) = params("pubinputs:3", 1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test.params");
    write_params_file(&path, &p).unwrap();

    let back = read_params_file(&path, true).unwrap();
    assert!(back == p);
    assert_eq!(scan_params_file(&path).unwrap(), SrsLengths::of(&p));

    let from_params = SrsImage::from_parameters(&p, spec.circuit_id()).unwrap();
    for checked in [false, true] {
        let streamed = SrsImage::from_params_file(&path, spec.circuit_id(), checked).unwrap();
        assert_eq!(streamed.as_ref(), from_params.as_ref(), "checked={checked}");
    }

    // The image writes the file bellperson writes.
    let view = SrsView::new(from_params.as_ref()).unwrap();
    let mut ours = Vec::new();
    view.write_params(&mut ours).unwrap();
    assert_eq!(ours, std::fs::read(&path).unwrap());
    assert!(view.to_parameters() == p);
    view.validate_points().unwrap();
    view.check_shape(&spec.shape().unwrap()).unwrap();
    assert_eq!(view.circuit_id(), spec.circuit_id());
}

/// The file reader (one `pread` and decode per chunk of 64 Ki points, in parallel) writes the
/// image of the parameters it was written from, for sections of several chunks and a last
/// partial one.
#[test]
fn the_parallel_file_reader_writes_the_parameters_image_across_chunks() {
    // 140,000 bits: H and L over two chunks and a partial third
    let (spec, p) = params("bits:140000", 4);
    let lens = SrsLengths::of(&p);
    assert!(lens.h > 2 * 65_536 && lens.l > 2 * 65_536, "{lens:?}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chunks.params");
    write_params_file(&path, &p).unwrap();
    let size = SrsImage::size_for(&lens).unwrap();
    let from_params = SrsImage::from_parameters(&p, spec.circuit_id()).unwrap();
    let mut parallel = kernels::srs::AlignedBytes::zeroed(size);
    let file = std::fs::File::open(&path).unwrap();
    SrsImage::write_params_file(&file, &lens, spec.circuit_id(), true, parallel.as_mut()).unwrap();
    assert!(from_params.as_ref() == parallel.as_ref());
    assert!(SrsView::new(parallel.as_ref()).unwrap().to_parameters() == p);
    // lengths that are not the file's are refused by name
    let wrong = SrsLengths {
        l: lens.l + 1,
        ..lens
    };
    let mut other = kernels::srs::AlignedBytes::zeroed(SrsImage::size_for(&wrong).unwrap());
    let err = SrsImage::write_params_file(&file, &wrong, 0, false, other.as_mut()).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::ShapeMismatch { what: "l", .. }),
        "{err}"
    );
}

#[test]
fn image_is_written_into_a_caller_provided_region() {
    let (spec, p) = params("bits:64", 2);
    let size = SrsImage::size_for(&SrsLengths::of(&p)).unwrap();
    // A region larger than needed (as a mapping rounded to pages would be).
    let mut region = kernels::srs::AlignedBytes::zeroed(size + 4096);
    SrsImage::write_parameters(&p, spec.circuit_id(), region.as_mut()).unwrap();
    let view = SrsView::new(region.as_ref()).unwrap();
    assert_eq!(view.len_bytes(), size);
    assert!(view.to_parameters() == p);

    // Too small a region is refused.
    let mut small = kernels::srs::AlignedBytes::zeroed(size - 1);
    let err = SrsImage::write_parameters(&p, 0, small.as_mut()).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::ShapeMismatch { .. }),
        "{err}"
    );
}

#[test]
fn bad_files_and_images_are_clear_errors() {
    let (spec, p) = params("pubinputs:2", 3);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.params");
    write_params_file(&path, &p).unwrap();
    let full = std::fs::read(&path).unwrap();

    // truncated file
    let short = dir.path().join("short.params");
    std::fs::write(&short, &full[..full.len() - 100]).unwrap();
    for err in [
        scan_params_file(&short).unwrap_err(),
        read_params_file(&short, false).err().unwrap(),
        SrsImage::from_params_file(&short, 0, false).unwrap_err(),
    ] {
        assert!(matches!(err.kind(), ErrorKind::Truncated(_)), "{err}");
        assert!(err.to_string().starts_with("truncated SRS data"), "{err}");
    }

    // not a params file: valid-looking lengths but garbage points
    let garbage = dir.path().join("garbage.params");
    let mut bytes = full.clone();
    for b in &mut bytes[..96] {
        *b = 0x5a;
    }
    std::fs::File::create(&garbage)
        .unwrap()
        .write_all(&bytes)
        .unwrap();
    let err = SrsImage::from_params_file(&garbage, 0, false).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::SrsFormat(_)), "{err}");
    let err = read_params_file(&garbage, false).err().unwrap();
    assert!(matches!(err.kind(), ErrorKind::SrsFormat(_)), "{err}");

    // image: wrong magic, truncated
    let mut image = SrsImage::from_parameters(&p, spec.circuit_id()).unwrap();
    let len = image.as_ref().len();
    let err = SrsView::new(&image.as_ref()[..len - 64]).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Truncated(_)), "{err}");
    image.as_mut()[8] ^= 0xff;
    let err = SrsView::new(image.as_ref()).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::BadMagic), "{err}");

    // an SRS of another circuit size
    let other: CircuitSpec = "pubinputs:5".parse().unwrap();
    let image = SrsImage::from_parameters(&p, spec.circuit_id()).unwrap();
    let err = SrsView::new(image.as_ref())
        .unwrap()
        .check_shape(&other.shape().unwrap())
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::ShapeMismatch { .. }),
        "{err}"
    );
}

/// Damaged parameter files and SRS images, as a disk, a copy or a hostile operator may leave
/// them: bytes overwritten anywhere (the point counts among them, so a count may claim more
/// points than any machine holds), cut short, or grown. Every reader returns a value — the
/// parameters, an image, or an error — never a panic or an allocation the file cannot back.
mod damaged {
    use super::*;
    use proptest::prelude::*;
    use std::sync::OnceLock;

    /// A small parameter file and its image, made once.
    fn originals() -> &'static (Vec<u8>, Vec<u8>) {
        static ORIGINALS: OnceLock<(Vec<u8>, Vec<u8>)> = OnceLock::new();
        ORIGINALS.get_or_init(|| {
            let (spec, p) = params("pubinputs:2", 5);
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("p.params");
            write_params_file(&path, &p).unwrap();
            let file = std::fs::read(&path).unwrap();
            let image = SrsImage::from_parameters(&p, spec.circuit_id()).unwrap();
            (file, image.as_ref().to_vec())
        })
    }

    /// A change to a file's bytes.
    #[derive(Clone, Debug)]
    enum Damage {
        /// Overwrite a byte.
        Byte(prop::sample::Index, u8),
        /// Overwrite 4 bytes with a big-endian count (what the format's counts are).
        Count(prop::sample::Index, u32),
        /// Cut the bytes at this point.
        Cut(prop::sample::Index),
        /// Append bytes.
        Grow(Vec<u8>),
    }

    fn damage() -> impl Strategy<Value = Damage> {
        prop_oneof![
            (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Damage::Byte(i, b)),
            (
                any::<prop::sample::Index>(),
                prop_oneof![Just(0u32), Just(1), Just(u32::MAX), any::<u32>()]
            )
                .prop_map(|(i, n)| Damage::Count(i, n)),
            any::<prop::sample::Index>().prop_map(Damage::Cut),
            prop::collection::vec(any::<u8>(), 1..200).prop_map(Damage::Grow),
        ]
    }

    fn apply(mut bytes: Vec<u8>, damages: &[Damage]) -> Vec<u8> {
        for d in damages {
            match d {
                Damage::Byte(i, b) if !bytes.is_empty() => {
                    let at = i.index(bytes.len());
                    bytes[at] = *b;
                }
                Damage::Count(i, n) if bytes.len() >= 4 => {
                    let at = i.index(bytes.len() - 3);
                    bytes[at..at + 4].copy_from_slice(&n.to_be_bytes());
                }
                Damage::Cut(i) if !bytes.is_empty() => {
                    let at = i.index(bytes.len());
                    bytes.truncate(at);
                }
                Damage::Grow(more) => bytes.extend_from_slice(more),
                _ => {}
            }
        }
        bytes
    }

    proptest! {
        #![proptest_config(common::fuzz_config(128))]

        #[test]
        fn a_damaged_params_file_is_read_or_refused_without_a_panic(
            damages in prop::collection::vec(damage(), 1..4),
        ) {
            let bytes = apply(originals().0.clone(), &damages);
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("damaged.params");
            std::fs::write(&path, &bytes).unwrap();
            if let Ok(lens) = scan_params_file(&path) {
                // what the scan accepts lies within the file
                let points = lens.h + lens.l + lens.a + lens.b_g1 + lens.ic;
                prop_assert!(points as u64 * 96 <= bytes.len() as u64);
            }
            let _ = read_params_file(&path, false);
            if let Ok(image) = SrsImage::from_params_file(&path, 0, false) {
                let _ = SrsView::new(image.as_ref());
            }
        }

        #[test]
        fn a_damaged_srs_image_is_viewed_or_refused_without_a_panic(
            damages in prop::collection::vec(damage(), 1..4),
        ) {
            let spec: CircuitSpec = "pubinputs:2".parse().unwrap();
            let bytes = apply(originals().1.clone(), &damages);
            // an image lives in 8-byte aligned memory (a region, a Vec<u64>)
            let mut words = vec![0u64; bytes.len().div_ceil(8)];
            // SAFETY: `words` holds at least `bytes.len()` bytes, any byte is a valid part of a u64.
            let raw = unsafe {
                std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), bytes.len())
            };
            raw.copy_from_slice(&bytes);
            if let Ok(view) = SrsView::new(raw) {
                let _ = view.check_shape(&spec.shape().unwrap());
            }
        }
    }
}
