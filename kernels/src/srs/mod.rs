//! The SRS in memory (a flat, zero-copy "SRS image") and on disk (bellperson's `.params` format).
//!
//! # SRS image format (version 1)
//!
//! An image is one contiguous byte region, 64-byte aligned (a memfd mapping made by the launcher,
//! or an [`AlignedBytes`] buffer). Everything is native-endian (the image is a cache that lives
//! on one host, never a file format to exchange):
//!
//! | offset | content |
//! |---|---|
//! | 0 | [`ImageHeader`] (144 bytes): `version` first (0 = not initialised yet, written last), `header_len`, magic `SPSRSIMG`, circuit id, total length, 6 array lengths, 7 array offsets |
//! | `off_vk_g1` | `[G1Affine; 3]`: alpha, beta, delta |
//! | `off_vk_g2` | `[G2Affine; 3]`: beta, gamma, delta |
//! | `off_ic`, `off_h`, `off_l`, `off_a`, `off_b_g1` | `[G1Affine]` arrays |
//! | `off_b_g2` | `[G2Affine]` |
//!
//! Points are blstrs affine points in their in-memory representation (blst's Montgomery-form
//! coordinates, 96 or 192 bytes), which is exactly what the provers read, so nothing is converted
//! at proving time. Every array starts at a 64-byte aligned offset; the offsets are a pure
//! function of the lengths ([`SrsLengths`]), and [`SrsView::new`] recomputes and compares them,
//! so a view never trusts an offset it reads. Any bit pattern is a valid value of those
//! point types, so a corrupt image can give wrong proofs (which fail verification) but never
//! undefined behaviour.
//!
//! # `.params` files
//!
//! bellperson's `Parameters::write` layout (the production Filecoin files): the verifying key
//! (alpha_g1, beta_g1, beta_g2, gamma_g2, delta_g1, delta_g2 uncompressed, u32 big-endian IC
//! count, IC points), then h, l, a, b_g1 (each a u32 big-endian count and uncompressed G1
//! points) and b_g2 (count, uncompressed G2 points). [`scan_params_file`] reads only the counts;
//! [`SrsImage::write_params_file`] converts the points straight into an image without holding
//! a second copy, reading and decoding chunks in parallel.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use bellperson::groth16::{Parameters, VerifyingKey};
use blstrs::{Bls12, G1Affine, G2Affine};
use group::prime::PrimeCurveAffine;
use rayon::prelude::*;

mod params;

use crate::types::CircuitShape;
use crate::{Error, ErrorKind};
use params::{
    decode_g1, decode_g2, read_g1s_at, read_points_at, write_g1s, write_g2s, G1_UNCOMPRESSED,
    G2_UNCOMPRESSED, VK_FIXED,
};
pub use params::{read_params_file, scan_params_file, write_params_file};

/// Magic bytes of an SRS image.
pub const IMAGE_MAGIC: [u8; 8] = *b"SPSRSIMG";
/// The image format version this build reads and writes.
pub const IMAGE_VERSION: u32 = 1;
/// Alignment of the image base and of every array in it.
pub const IMAGE_ALIGN: usize = 64;

const G1_SIZE: usize = std::mem::size_of::<G1Affine>();
const G2_SIZE: usize = std::mem::size_of::<G2Affine>();

/// The header at offset 0 of an SRS image. `#[repr(C)]`, no pointers, offsets only.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImageHeader {
    /// Format version; 0 means "not initialised yet". Written last by the creator.
    pub version: u32,
    /// `size_of::<ImageHeader>()`.
    pub header_len: u32,
    /// [`IMAGE_MAGIC`].
    pub magic: [u8; 8],
    /// The circuit the SRS was made for (see `CircuitSpec::circuit_id`), 0 if unknown.
    pub circuit_id: u64,
    /// Total image length in bytes.
    pub total_len: u64,
    /// Array lengths: ic, h, l, a, b_g1, b_g2.
    pub lens: [u64; 6],
    /// Offsets: vk_g1, vk_g2, ic, h, l, a, b_g1, b_g2.
    pub offsets: [u64; 8],
}

const _: () = assert!(std::mem::size_of::<ImageHeader>() == 144);
const _: () = assert!(std::mem::size_of::<G1Affine>() == 96);
const _: () = assert!(std::mem::size_of::<G2Affine>() == 192);
const _: () = assert!(std::mem::align_of::<G1Affine>() <= IMAGE_ALIGN);
const _: () = assert!(std::mem::align_of::<G2Affine>() <= IMAGE_ALIGN);

/// The array lengths of an SRS (what fixes an image's layout).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SrsLengths {
    /// IC query (verifying key): one per input.
    pub ic: usize,
    /// H query: domain size - 1.
    pub h: usize,
    /// L query: one per aux variable.
    pub l: usize,
    /// A query: inputs plus aux used in A.
    pub a: usize,
    /// B query in G1.
    pub b_g1: usize,
    /// B query in G2.
    pub b_g2: usize,
}

impl SrsLengths {
    /// The lengths of bellperson parameters.
    pub fn of(params: &Parameters<Bls12>) -> Self {
        Self {
            ic: params.vk.ic.len(),
            h: params.h.len(),
            l: params.l.len(),
            a: params.a.len(),
            b_g1: params.b_g1.len(),
            b_g2: params.b_g2.len(),
        }
    }

    fn as_array(&self) -> [u64; 6] {
        [self.ic, self.h, self.l, self.a, self.b_g1, self.b_g2].map(|v| v as u64)
    }

    /// Checks these lengths against a circuit shape: IC per input, H = domain - 1, L per aux,
    /// and A/B no longer than inputs + aux. The exact A/B lengths depend on the densities and are
    /// checked when proving.
    pub fn check_shape(&self, shape: &CircuitShape) -> Result<(), Error> {
        let vars = shape.inputs + shape.aux;
        if self.ic != shape.inputs {
            return Err(Error::shape(
                "SRS ic (public inputs + 1)",
                shape.inputs,
                self.ic,
            ));
        }
        if self.h != shape.domain_size() - 1 {
            return Err(Error::shape(
                "SRS h (domain size - 1)",
                shape.domain_size() - 1,
                self.h,
            ));
        }
        if self.l != shape.aux {
            return Err(Error::shape("SRS l (aux variables)", shape.aux, self.l));
        }
        if self.a < shape.inputs || self.a > vars {
            return Err(Error::shape("SRS a (at most inputs + aux)", vars, self.a));
        }
        if self.b_g1 > vars {
            return Err(Error::shape(
                "SRS b_g1 (at most inputs + aux)",
                vars,
                self.b_g1,
            ));
        }
        if self.b_g2 != self.b_g1 {
            return Err(Error::shape("SRS b_g2 (= b_g1)", self.b_g1, self.b_g2));
        }
        Ok(())
    }

    /// Checks one assignment against these lengths, as every backend does before proving: the
    /// assignment's own consistency ([`crate::Assignment::validate`]), its shape
    /// ([`SrsLengths::check_shape`]), then the exact A and B query lengths its densities select
    /// (inputs + A-aux popcount `a` points, B popcounts `b_g1` points). Returns the shape.
    pub fn check_assignment(&self, asg: &crate::Assignment<'_>) -> Result<CircuitShape, Error> {
        let shape = asg.validate()?;
        self.check_shape(&shape)?;
        let a = shape.inputs.checked_add(asg.a_aux_density.popcount);
        if a != Some(self.a) {
            return Err(Error::shape(
                "inputs + A aux density popcount (SRS `a` points)",
                self.a,
                a.unwrap_or(usize::MAX),
            ));
        }
        let b = asg
            .b_input_density
            .popcount
            .checked_add(asg.b_aux_density.popcount);
        if b != Some(self.b_g1) {
            return Err(Error::shape(
                "B input + aux density popcounts (SRS `b_g1` points)",
                self.b_g1,
                b.unwrap_or(usize::MAX),
            ));
        }
        Ok(shape)
    }
}

fn align_up(x: usize) -> Option<usize> {
    x.checked_add(IMAGE_ALIGN - 1)
        .map(|v| v & !(IMAGE_ALIGN - 1))
}

/// Offsets of every part, computed from the lengths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    lens: SrsLengths,
    /// vk_g1, vk_g2, ic, h, l, a, b_g1, b_g2.
    offsets: [usize; 8],
    total: usize,
}

impl Layout {
    fn new(lens: SrsLengths) -> Result<Self, Error> {
        let sizes = [
            Some(3 * G1_SIZE),
            Some(3 * G2_SIZE),
            lens.ic.checked_mul(G1_SIZE),
            lens.h.checked_mul(G1_SIZE),
            lens.l.checked_mul(G1_SIZE),
            lens.a.checked_mul(G1_SIZE),
            lens.b_g1.checked_mul(G1_SIZE),
            lens.b_g2.checked_mul(G2_SIZE),
        ];
        let overflow = || Error::format("array lengths overflow the address space");
        let mut offsets = [0usize; 8];
        let mut at = std::mem::size_of::<ImageHeader>();
        for (i, size) in sizes.into_iter().enumerate() {
            let size = size.ok_or_else(overflow)?;
            at = align_up(at).ok_or_else(overflow)?;
            offsets[i] = at;
            at = at.checked_add(size).ok_or_else(overflow)?;
        }
        let total = align_up(at).ok_or_else(overflow)?;
        Ok(Self {
            lens,
            offsets,
            total,
        })
    }
}

/// A heap buffer aligned to [`IMAGE_ALIGN`], for images that do not live in a shared mapping.
#[derive(Clone, Default)]
pub struct AlignedBytes {
    blocks: Vec<Align64>,
    len: usize,
}

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Align64([u8; 64]);

impl AlignedBytes {
    /// `len` zero bytes.
    pub fn zeroed(len: usize) -> Self {
        Self {
            blocks: vec![Align64([0; 64]); len.div_ceil(64)],
            len,
        }
    }
}

impl From<&[u8]> for AlignedBytes {
    /// Copies bytes (e.g. an image read into a `Vec<u8>`, whose alignment is not guaranteed).
    fn from(bytes: &[u8]) -> Self {
        let mut out = Self::zeroed(bytes.len());
        out.as_mut().copy_from_slice(bytes);
        out
    }
}

impl std::fmt::Debug for AlignedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBytes({} bytes)", self.len)
    }
}

impl AsRef<[u8]> for AlignedBytes {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `blocks` holds `blocks.len() * 64 >= len` initialised bytes, `Align64` is
        // `repr(C)` over a byte array, so the first `len` bytes form a valid `[u8]`.
        unsafe { std::slice::from_raw_parts(self.blocks.as_ptr().cast::<u8>(), self.len) }
    }
}

impl AsMut<[u8]> for AlignedBytes {
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_ref`, and `&mut self` gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.blocks.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

/// Reinterprets `bytes[off..off + len * size_of::<T>()]` as `&[T]`.
///
/// Only used for `G1Affine`/`G2Affine`, which are `repr(transparent)` over blst structs of `u64`
/// limbs: every bit pattern is a valid value, and their alignment (8) divides [`IMAGE_ALIGN`].
fn cast_slice<T>(bytes: &[u8], off: usize, len: usize) -> Result<&[T], Error> {
    let size = len
        .checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| Error::format("length overflow"))?;
    let end = off
        .checked_add(size)
        .ok_or_else(|| Error::format("offset overflow"))?;
    let part = bytes.get(off..end).ok_or_else(|| {
        ErrorKind::Truncated(format!(
            "array at {off}..{end} beyond image of {} bytes",
            bytes.len()
        ))
    })?;
    if part.as_ptr() as usize % std::mem::align_of::<T>() != 0 {
        return Err(ErrorKind::Misaligned(part.as_ptr() as usize % IMAGE_ALIGN).into());
    }
    // SAFETY: the range is in bounds, the pointer is aligned for `T` (checked above), `T` is a
    // point type for which every bit pattern is valid (see the doc comment), and the returned
    // slice borrows `bytes` so it cannot outlive or alias a mutable borrow of it.
    Ok(unsafe { std::slice::from_raw_parts(part.as_ptr().cast::<T>(), len) })
}

/// Mutable twin of [`cast_slice`].
fn cast_slice_mut<T>(bytes: &mut [u8], off: usize, len: usize) -> Result<&mut [T], Error> {
    let size = len
        .checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| Error::format("length overflow"))?;
    let end = off
        .checked_add(size)
        .ok_or_else(|| Error::format("offset overflow"))?;
    let total = bytes.len();
    let part = bytes.get_mut(off..end).ok_or_else(|| {
        ErrorKind::Truncated(format!(
            "array at {off}..{end} beyond image of {total} bytes"
        ))
    })?;
    if part.as_ptr() as usize % std::mem::align_of::<T>() != 0 {
        return Err(ErrorKind::Misaligned(part.as_ptr() as usize % IMAGE_ALIGN).into());
    }
    // SAFETY: as in `cast_slice`; the exclusive borrow of `bytes` is moved into the result.
    Ok(unsafe { std::slice::from_raw_parts_mut(part.as_mut_ptr().cast::<T>(), len) })
}

fn read_header(bytes: &[u8]) -> Result<ImageHeader, Error> {
    let hl = std::mem::size_of::<ImageHeader>();
    if (bytes.as_ptr() as usize) % IMAGE_ALIGN != 0 {
        return Err(ErrorKind::Misaligned(bytes.as_ptr() as usize % IMAGE_ALIGN).into());
    }
    if bytes.len() < hl {
        return Err(ErrorKind::Truncated(format!(
            "{} bytes, shorter than the {hl}-byte header",
            bytes.len()
        ))
        .into());
    }
    // SAFETY: `bytes` has at least `size_of::<ImageHeader>()` bytes (checked), and
    // `read_unaligned` copies a plain-integer `repr(C)` struct for which any bits are valid.
    let h: ImageHeader = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<ImageHeader>()) };
    if h.magic != IMAGE_MAGIC {
        return Err(ErrorKind::BadMagic.into());
    }
    if h.version != IMAGE_VERSION {
        return Err(ErrorKind::VersionMismatch {
            expected: IMAGE_VERSION,
            found: h.version,
        }
        .into());
    }
    if h.header_len as usize != hl {
        return Err(Error::format(format!(
            "header length {} (expected {hl})",
            h.header_len
        )));
    }
    Ok(h)
}

/// A validated, zero-copy view of an SRS image.
#[derive(Clone, Copy, Debug)]
pub struct SrsView<'a> {
    bytes: &'a [u8],
    layout: Layout,
    circuit_id: u64,
}

impl<'a> SrsView<'a> {
    /// Validates `bytes` as an SRS image: alignment, magic, version, and every offset and
    /// length against the layout those lengths imply and against `bytes.len()`.
    pub fn new(bytes: &'a [u8]) -> Result<Self, Error> {
        let h = read_header(bytes)?;
        let lens: [usize; 6] = h.lens.map(|v| usize::try_from(v).unwrap_or(usize::MAX));
        let lens = SrsLengths {
            ic: lens[0],
            h: lens[1],
            l: lens[2],
            a: lens[3],
            b_g1: lens[4],
            b_g2: lens[5],
        };
        let layout = Layout::new(lens)?;
        if layout.offsets.map(|v| v as u64) != h.offsets {
            return Err(Error::format("array offsets do not match the lengths"));
        }
        if h.total_len != layout.total as u64 {
            return Err(Error::format(format!(
                "total length {} (expected {})",
                h.total_len, layout.total
            )));
        }
        if bytes.len() < layout.total {
            return Err(ErrorKind::Truncated(format!(
                "image of {} bytes, header announces {}",
                bytes.len(),
                layout.total
            ))
            .into());
        }
        let view = Self {
            bytes,
            layout,
            circuit_id: h.circuit_id,
        };
        if bool::from(view.vk_g1()[2].is_identity()) || bool::from(view.vk_g2()[2].is_identity()) {
            return Err(ErrorKind::UnexpectedIdentity.into());
        }
        Ok(view)
    }

    fn g1(&self, idx: usize, len: usize) -> &'a [G1Affine] {
        // The layout was validated against `bytes` in `new`, so this cannot fail; an empty
        // slice keeps it panic-free regardless.
        cast_slice(self.bytes, self.layout.offsets[idx], len).unwrap_or(&[])
    }

    fn vk_g1(&self) -> &'a [G1Affine] {
        self.g1(0, 3)
    }

    fn vk_g2(&self) -> &'a [G2Affine] {
        cast_slice(self.bytes, self.layout.offsets[1], 3).unwrap_or(&[])
    }

    /// The array lengths.
    pub fn lengths(&self) -> SrsLengths {
        self.layout.lens
    }

    /// The circuit id recorded by the writer (0 if unknown).
    pub fn circuit_id(&self) -> u64 {
        self.circuit_id
    }

    /// Total bytes of the image.
    pub fn len_bytes(&self) -> usize {
        self.layout.total
    }

    /// The image's bytes (header and every array).
    pub fn as_bytes(&self) -> &'a [u8] {
        &self.bytes[..self.layout.total]
    }

    /// alpha in G1.
    pub fn alpha_g1(&self) -> G1Affine {
        self.vk_g1()[0]
    }
    /// beta in G1.
    pub fn beta_g1(&self) -> G1Affine {
        self.vk_g1()[1]
    }
    /// delta in G1.
    pub fn delta_g1(&self) -> G1Affine {
        self.vk_g1()[2]
    }
    /// beta in G2.
    pub fn beta_g2(&self) -> G2Affine {
        self.vk_g2()[0]
    }
    /// gamma in G2.
    pub fn gamma_g2(&self) -> G2Affine {
        self.vk_g2()[1]
    }
    /// delta in G2.
    pub fn delta_g2(&self) -> G2Affine {
        self.vk_g2()[2]
    }
    /// IC query.
    pub fn ic(&self) -> &'a [G1Affine] {
        self.g1(2, self.layout.lens.ic)
    }
    /// H query.
    pub fn h(&self) -> &'a [G1Affine] {
        self.g1(3, self.layout.lens.h)
    }
    /// L query.
    pub fn l(&self) -> &'a [G1Affine] {
        self.g1(4, self.layout.lens.l)
    }
    /// A query.
    pub fn a(&self) -> &'a [G1Affine] {
        self.g1(5, self.layout.lens.a)
    }
    /// B query in G1.
    pub fn b_g1(&self) -> &'a [G1Affine] {
        self.g1(6, self.layout.lens.b_g1)
    }
    /// B query in G2.
    pub fn b_g2(&self) -> &'a [G2Affine] {
        cast_slice(self.bytes, self.layout.offsets[7], self.layout.lens.b_g2).unwrap_or(&[])
    }

    /// The verifying key (copies IC).
    pub fn verifying_key(&self) -> VerifyingKey<Bls12> {
        VerifyingKey {
            alpha_g1: self.alpha_g1(),
            beta_g1: self.beta_g1(),
            beta_g2: self.beta_g2(),
            gamma_g2: self.gamma_g2(),
            delta_g1: self.delta_g1(),
            delta_g2: self.delta_g2(),
            ic: self.ic().to_vec(),
        }
    }

    /// A copy as bellperson parameters.
    pub fn to_parameters(&self) -> Parameters<Bls12> {
        Parameters {
            vk: self.verifying_key(),
            h: Arc::new(self.h().to_vec()),
            l: Arc::new(self.l().to_vec()),
            a: Arc::new(self.a().to_vec()),
            b_g1: Arc::new(self.b_g1().to_vec()),
            b_g2: Arc::new(self.b_g2().to_vec()),
        }
    }

    /// Checks the SRS against a circuit shape (see [`SrsLengths::check_shape`]).
    pub fn check_shape(&self, shape: &CircuitShape) -> Result<(), Error> {
        self.layout.lens.check_shape(shape)
    }

    /// Checks that every point is on its curve and not the identity (parallel; subgroup checks
    /// are left to the file reader's `checked` mode).
    pub fn validate_points(&self) -> Result<(), Error> {
        let g1_ok = |p: &G1Affine| bool::from(p.is_on_curve()) && !bool::from(p.is_identity());
        let g2_ok = |p: &G2Affine| bool::from(p.is_on_curve()) && !bool::from(p.is_identity());
        let parts: [(&str, &[G1Affine]); 6] = [
            ("vk", self.vk_g1()),
            ("ic", self.ic()),
            ("h", self.h()),
            ("l", self.l()),
            ("a", self.a()),
            ("b_g1", self.b_g1()),
        ];
        for (name, pts) in parts {
            if !pts.par_iter().all(g1_ok) {
                return Err(Error::format(format!("invalid G1 point in `{name}`")));
            }
        }
        if !self.vk_g2().par_iter().all(g2_ok) || !self.b_g2().par_iter().all(g2_ok) {
            return Err(Error::format("invalid G2 point in `vk` or `b_g2`"));
        }
        Ok(())
    }

    /// Writes the SRS in bellperson's `.params` format (what `Parameters::write` produces).
    pub fn write_params<W: Write>(&self, mut w: W) -> Result<(), Error> {
        for p in [self.alpha_g1(), self.beta_g1()] {
            w.write_all(&p.to_uncompressed())?;
        }
        for p in [self.beta_g2(), self.gamma_g2()] {
            w.write_all(&p.to_uncompressed())?;
        }
        w.write_all(&self.delta_g1().to_uncompressed())?;
        w.write_all(&self.delta_g2().to_uncompressed())?;
        write_g1s(&mut w, self.ic())?;
        for pts in [self.h(), self.l(), self.a(), self.b_g1()] {
            write_g1s(&mut w, pts)?;
        }
        write_g2s(&mut w, self.b_g2())
    }
}

/// Writers of SRS images.
pub struct SrsImage;

/// Mutable parts of an image being written.
struct ImageParts<'b> {
    vk_g1: &'b mut [G1Affine],
    vk_g2: &'b mut [G2Affine],
    ic: &'b mut [G1Affine],
    h: &'b mut [G1Affine],
    l: &'b mut [G1Affine],
    a: &'b mut [G1Affine],
    b_g1: &'b mut [G1Affine],
    b_g2: &'b mut [G2Affine],
}

impl SrsImage {
    /// Bytes an image with these lengths needs.
    pub fn size_for(lens: &SrsLengths) -> Result<usize, Error> {
        Ok(Layout::new(*lens)?.total)
    }

    /// Splits `dst` into the image's arrays, clearing the header (version 0 = not ready).
    fn parts<'b>(dst: &'b mut [u8], layout: &Layout) -> Result<ImageParts<'b>, Error> {
        if (dst.as_ptr() as usize) % IMAGE_ALIGN != 0 {
            return Err(ErrorKind::Misaligned(dst.as_ptr() as usize % IMAGE_ALIGN).into());
        }
        if dst.len() < layout.total {
            return Err(Error::shape(
                "SRS image buffer bytes",
                layout.total,
                dst.len(),
            ));
        }
        let dst = &mut dst[..layout.total];
        dst[..std::mem::size_of::<ImageHeader>()].fill(0);
        // Split the buffer at each offset, from the end.
        let o = layout.offsets;
        let l = layout.lens;
        let (rest, b_g2) = dst.split_at_mut(o[7]);
        let (rest, b_g1) = rest.split_at_mut(o[6]);
        let (rest, a) = rest.split_at_mut(o[5]);
        let (rest, lq) = rest.split_at_mut(o[4]);
        let (rest, h) = rest.split_at_mut(o[3]);
        let (rest, ic) = rest.split_at_mut(o[2]);
        let (rest, vk_g2) = rest.split_at_mut(o[1]);
        let (_, vk_g1) = rest.split_at_mut(o[0]);
        Ok(ImageParts {
            vk_g1: cast_slice_mut(vk_g1, 0, 3)?,
            vk_g2: cast_slice_mut(vk_g2, 0, 3)?,
            ic: cast_slice_mut(ic, 0, l.ic)?,
            h: cast_slice_mut(h, 0, l.h)?,
            l: cast_slice_mut(lq, 0, l.l)?,
            a: cast_slice_mut(a, 0, l.a)?,
            b_g1: cast_slice_mut(b_g1, 0, l.b_g1)?,
            b_g2: cast_slice_mut(b_g2, 0, l.b_g2)?,
        })
    }

    /// Publishes the header, version last.
    fn seal(dst: &mut [u8], layout: &Layout, circuit_id: u64) {
        let header = ImageHeader {
            version: 0,
            header_len: std::mem::size_of::<ImageHeader>() as u32,
            magic: IMAGE_MAGIC,
            circuit_id,
            total_len: layout.total as u64,
            lens: layout.lens.as_array(),
            offsets: layout.offsets.map(|v| v as u64),
        };
        // SAFETY: `dst` holds at least the header (checked by `parts`), and `write_unaligned`
        // stores a plain-integer `repr(C)` struct.
        unsafe { std::ptr::write_unaligned(dst.as_mut_ptr().cast::<ImageHeader>(), header) };
        // Everything before must be visible before the version says "ready"; another process
        // reading the mapping later is ordered by process start (fork/exec) or by its own
        // synchronisation with the writer.
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release); // publish the arrays before the version word
        dst[..4].copy_from_slice(&IMAGE_VERSION.to_ne_bytes());
    }

    /// Lays `params` out into `dst` (at least [`SrsImage::size_for`] bytes, 64-byte aligned).
    pub fn write_parameters(
        params: &Parameters<Bls12>,
        circuit_id: u64,
        dst: &mut [u8],
    ) -> Result<(), Error> {
        let layout = Layout::new(SrsLengths::of(params))?;
        let parts = Self::parts(dst, &layout)?;
        let vk = &params.vk;
        parts
            .vk_g1
            .copy_from_slice(&[vk.alpha_g1, vk.beta_g1, vk.delta_g1]);
        parts
            .vk_g2
            .copy_from_slice(&[vk.beta_g2, vk.gamma_g2, vk.delta_g2]);
        parts.ic.copy_from_slice(&vk.ic);
        parts.h.copy_from_slice(&params.h);
        parts.l.copy_from_slice(&params.l);
        parts.a.copy_from_slice(&params.a);
        parts.b_g1.copy_from_slice(&params.b_g1);
        parts.b_g2.copy_from_slice(&params.b_g2);
        Self::seal(dst, &layout, circuit_id);
        Ok(())
    }

    /// An owned image of `params`.
    pub fn from_parameters(
        params: &Parameters<Bls12>,
        circuit_id: u64,
    ) -> Result<AlignedBytes, Error> {
        let mut buf = AlignedBytes::zeroed(Self::size_for(&SrsLengths::of(params))?);
        Self::write_parameters(params, circuit_id, buf.as_mut())?;
        Ok(buf)
    }

    /// Converts a `.params` file (`lens` from [`scan_params_file`]) straight into an image in
    /// `dst`, in parallel: each chunk of points is read at its own offset (`pread`) and decoded
    /// by a rayon task, so reading and decoding use every core. `checked` also verifies every
    /// point's subgroup membership.
    pub fn write_params_file(
        file: &std::fs::File,
        lens: &SrsLengths,
        circuit_id: u64,
        checked: bool,
        dst: &mut [u8],
    ) -> Result<(), Error> {
        use std::os::unix::fs::FileExt;
        let layout = Layout::new(*lens)?;
        let parts = Self::parts(dst, &layout)?;
        let mut fixed = [0u8; VK_FIXED];
        file.read_exact_at(&mut fixed, 0)?;
        Self::write_vk(&fixed, parts.vk_g1, parts.vk_g2)?;
        let mut at = VK_FIXED as u64;
        at = read_g1s_at(file, at, parts.ic, checked, "ic")?;
        at = read_g1s_at(file, at, parts.h, checked, "h")?;
        at = read_g1s_at(file, at, parts.l, checked, "l")?;
        at = read_g1s_at(file, at, parts.a, checked, "a")?;
        at = read_g1s_at(file, at, parts.b_g1, checked, "b_g1")?;
        read_points_at(
            file,
            at,
            parts.b_g2,
            G2_UNCOMPRESSED,
            |b| decode_g2(b, checked, "b_g2"),
            "b_g2",
        )?;
        Self::seal(dst, &layout, circuit_id);
        Ok(())
    }

    /// The verifying key's fixed part (alpha_g1, beta_g1, beta_g2, gamma_g2, delta_g1,
    /// delta_g2) into the image's three G1 and three G2 points.
    fn write_vk(
        fixed: &[u8; VK_FIXED],
        vk_g1: &mut [G1Affine],
        vk_g2: &mut [G2Affine],
    ) -> Result<(), Error> {
        let g1 = |i: usize| decode_g1(&fixed[i..i + G1_UNCOMPRESSED], true, "vk");
        let g2 = |i: usize| decode_g2(&fixed[i..i + G2_UNCOMPRESSED], true, "vk");
        let (o_beta_g1, o_beta_g2) = (G1_UNCOMPRESSED, 2 * G1_UNCOMPRESSED);
        let o_gamma_g2 = o_beta_g2 + G2_UNCOMPRESSED;
        let o_delta_g1 = o_gamma_g2 + G2_UNCOMPRESSED;
        let o_delta_g2 = o_delta_g1 + G1_UNCOMPRESSED;
        vk_g1.copy_from_slice(&[g1(0)?, g1(o_beta_g1)?, g1(o_delta_g1)?]);
        vk_g2.copy_from_slice(&[g2(o_beta_g2)?, g2(o_gamma_g2)?, g2(o_delta_g2)?]);
        Ok(())
    }

    /// Reads a `.params` file into an owned image.
    pub fn from_params_file(
        path: &Path,
        circuit_id: u64,
        checked: bool,
    ) -> Result<AlignedBytes, Error> {
        let lens = scan_params_file(path)?;
        let mut buf = AlignedBytes::zeroed(Self::size_for(&lens)?);
        let file = std::fs::File::open(path)?;
        Self::write_params_file(&file, &lens, circuit_id, checked, buf.as_mut())?;
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_aligned_and_header_is_fixed() {
        let lens = SrsLengths {
            ic: 3,
            h: 7,
            l: 5,
            a: 6,
            b_g1: 4,
            b_g2: 4,
        };
        let l = Layout::new(lens).unwrap();
        assert!(l.offsets.iter().all(|o| o % IMAGE_ALIGN == 0));
        assert_eq!(l.offsets[0], 192);
        assert_eq!(l.total % IMAGE_ALIGN, 0);
        assert!(l.offsets.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(l.offsets[7] + 4 * G2_SIZE, l.total);
    }

    #[test]
    fn bad_images_are_typed_errors() {
        let mut b = AlignedBytes::zeroed(4096);
        assert!(matches!(
            SrsView::new(&b.as_ref()[..10]).unwrap_err().kind(),
            ErrorKind::Truncated(_)
        ));
        assert!(matches!(
            SrsView::new(b.as_ref()).unwrap_err().kind(),
            ErrorKind::BadMagic
        ));
        b.as_mut()[8..16].copy_from_slice(&IMAGE_MAGIC);
        assert!(matches!(
            SrsView::new(b.as_ref()).unwrap_err().kind(),
            ErrorKind::VersionMismatch { found: 0, .. }
        ));
        assert!(matches!(
            SrsView::new(&b.as_ref()[1..]).unwrap_err().kind(),
            ErrorKind::Misaligned(1)
        ));
        let copy = AlignedBytes::from(&b.as_ref()[1..]);
        assert_eq!(copy.as_ref(), &b.as_ref()[1..]);
        assert_eq!(copy.as_ref().as_ptr() as usize % IMAGE_ALIGN, 0);
    }
}
