//! bellperson's `.params` file format (the module text of [`super`] describes it): reading the
//! counts alone, reading the points (in parallel chunks, checked or not), writing.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use bellperson::groth16::Parameters;
use blstrs::{Bls12, G1Affine, G2Affine};
use rayon::prelude::*;

use super::SrsLengths;
use crate::{Error, ErrorKind};

/// Bytes of an uncompressed G1 point in the file.
pub(super) const G1_UNCOMPRESSED: usize = 96;
/// Bytes of an uncompressed G2 point in the file.
pub(super) const G2_UNCOMPRESSED: usize = 192;
/// Bytes of the fixed part of a `.params` verifying key (6 points, before the IC count).
pub(super) const VK_FIXED: usize = 3 * G1_UNCOMPRESSED + 3 * G2_UNCOMPRESSED;

pub(super) fn write_len<W: Write>(w: &mut W, len: usize) -> Result<(), Error> {
    let len = u32::try_from(len)
        .map_err(|_| Error::format(format!("{len} points do not fit a u32 count")))?;
    w.write_all(&len.to_be_bytes())?;
    Ok(())
}

pub(super) fn write_g1s<W: Write>(w: &mut W, pts: &[G1Affine]) -> Result<(), Error> {
    write_points(w, pts, G1Affine::to_uncompressed)
}

pub(super) fn write_g2s<W: Write>(w: &mut W, pts: &[G2Affine]) -> Result<(), Error> {
    write_points(w, pts, G2Affine::to_uncompressed)
}

/// Writes a counted run of points, each `encode`d to `N` bytes, converted in parallel in chunks
/// of 768 KiB.
fn write_points<W: Write, P: Sync, const N: usize>(
    w: &mut W,
    pts: &[P],
    encode: impl Fn(&P) -> [u8; N] + Sync,
) -> Result<(), Error> {
    write_len(w, pts.len())?;
    for chunk in pts.chunks((768 << 10) / N) {
        let buf: Vec<u8> = chunk.par_iter().flat_map_iter(&encode).collect();
        w.write_all(&buf)?;
    }
    Ok(())
}

pub(super) fn decode_g1(b: &[u8], checked: bool, what: &str) -> Result<G1Affine, Error> {
    decode_point(b, checked, what, "G1")
}

pub(super) fn decode_g2(b: &[u8], checked: bool, what: &str) -> Result<G2Affine, Error> {
    decode_point(b, checked, what, "G2")
}

/// One uncompressed point of `.params`; `checked` also verifies subgroup membership.
fn decode_point<P>(b: &[u8], checked: bool, what: &str, group: &str) -> Result<P, Error>
where
    P: group::UncompressedEncoding + group::prime::PrimeCurveAffine,
{
    let mut repr = P::Uncompressed::default();
    repr.as_mut().copy_from_slice(b);
    let p = if checked {
        P::from_uncompressed(&repr)
    } else {
        P::from_uncompressed_unchecked(&repr)
    };
    let p: P = Option::from(p)
        .ok_or_else(|| Error::format(format!("`{what}`: {group} point not on curve")))?;
    if bool::from(p.is_identity()) {
        return Err(Error::format(format!("`{what}`: point at infinity")));
    }
    Ok(p)
}

fn read_len<R: Read>(r: &mut R) -> Result<usize, Error> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b) as usize)
}

/// [`read_points_at`] of G1 points.
pub(super) fn read_g1s_at(
    file: &std::fs::File,
    at: u64,
    dst: &mut [G1Affine],
    checked: bool,
    what: &'static str,
) -> Result<u64, Error> {
    read_points_at(
        file,
        at,
        dst,
        G1_UNCOMPRESSED,
        |b| decode_g1(b, checked, what),
        what,
    )
}

/// The section of `file` at `at` (a u32 big-endian count, then points of `size` bytes) into
/// `dst`, chunk by chunk in parallel; returns the offset after it.
pub(super) fn read_points_at<T: Send>(
    file: &std::fs::File,
    at: u64,
    dst: &mut [T],
    size: usize,
    decode: impl Fn(&[u8]) -> Result<T, Error> + Sync,
    what: &'static str,
) -> Result<u64, Error> {
    use std::os::unix::fs::FileExt;
    let mut count = [0u8; 4];
    file.read_exact_at(&mut count, at)?;
    let len = read_len(&mut count.as_slice())?;
    if len != dst.len() {
        return Err(Error::shape(what, dst.len(), len));
    }
    let start = at + 4;
    // 64 Ki points a task (6 or 12 MiB): large reads, and enough tasks for every core
    const CHUNK: usize = 1 << 16;
    dst.par_chunks_mut(CHUNK)
        .enumerate()
        .try_for_each(|(i, out)| {
            let mut buf = vec![0u8; out.len() * size];
            file.read_exact_at(&mut buf, start + (i * CHUNK * size) as u64)?;
            for (o, b) in out.iter_mut().zip(buf.chunks_exact(size)) {
                *o = decode(b)?;
            }
            Ok::<(), Error>(())
        })?;
    Ok(start + (len * size) as u64)
}

/// Reads only the array lengths of a `.params` file (seeking over the points), checking that
/// the file is long enough for all of them.
pub fn scan_params_file(path: &Path) -> Result<SrsLengths, Error> {
    let mut f = std::fs::File::open(path)?;
    let file_len = f.metadata()?.len();
    let mut at = VK_FIXED as u64;
    let mut section = |f: &mut std::fs::File, size: u64, what: &str| -> Result<usize, Error> {
        if at + 4 > file_len {
            return Err(ErrorKind::Truncated(format!(
                "params file of {file_len} bytes ends before the `{what}` count at {at}"
            ))
            .into());
        }
        f.seek(SeekFrom::Start(at))?;
        let len = read_len(f)?;
        at += 4 + len as u64 * size;
        if at > file_len {
            return Err(ErrorKind::Truncated(format!(
                "params file of {file_len} bytes, `{what}` ({len} points) ends at {at}"
            ))
            .into());
        }
        Ok(len)
    };
    let g1 = G1_UNCOMPRESSED as u64;
    let lens = SrsLengths {
        ic: section(&mut f, g1, "ic")?,
        h: section(&mut f, g1, "h")?,
        l: section(&mut f, g1, "l")?,
        a: section(&mut f, g1, "a")?,
        b_g1: section(&mut f, g1, "b_g1")?,
        b_g2: section(&mut f, G2_UNCOMPRESSED as u64, "b_g2")?,
    };
    if at != file_len {
        tracing::warn!(path = %path.display(), trailing = file_len - at, "params file has trailing bytes");
    }
    Ok(lens)
}

/// Reads a `.params` file with bellperson's own reader (`checked` verifies subgroup membership).
pub fn read_params_file(path: &Path, checked: bool) -> Result<Parameters<Bls12>, Error> {
    // Scanning first turns a short file into a clear "truncated" error.
    scan_params_file(path)?;
    let f = std::fs::File::open(path)?;
    Parameters::read(std::io::BufReader::with_capacity(1 << 20, f), checked).map_err(|e| {
        match e.kind() {
            std::io::ErrorKind::InvalidData => Error::format(e.to_string()),
            _ => e.into(),
        }
    })
}

/// Writes bellperson parameters to a `.params` file with bellperson's writer.
pub fn write_params_file(path: &Path, params: &Parameters<Bls12>) -> Result<(), Error> {
    let f = std::fs::File::create(path)?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    params.write(&mut w)?;
    w.flush()?;
    Ok(())
}
