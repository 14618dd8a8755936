//! Multi-scalar multiplication on the ambient rayon pool.
//!
//! blst's Pippenger is split into a grid of tiles (point ranges × bit windows) exactly as blst's
//! own Rust binding does, but the tiles run on rayon (sized by the process's cpuset) instead of
//! blst's private thread pool. Bases are read in place (the SRS image); scalars are canonical
//! little-endian 32-byte values.

use blst::{blst_p1, blst_p1_affine, blst_p2, blst_p2_affine};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use rayon::prelude::*;

/// Bits per scalar: every BLS12-381 scalar is below 2^255.
const NBITS: usize = 255;

/// A canonical little-endian scalar, as blst's Pippenger reads it.
pub(crate) type ScalarBytes = [u8; 32];

/// The canonical bytes of a scalar.
#[inline]
pub(crate) fn scalar_bytes(s: &Scalar) -> ScalarBytes {
    s.to_bytes_le()
}

fn num_bits(l: usize) -> usize {
    8 * core::mem::size_of_val(&l) - l.leading_zeros() as usize
}

/// blst's window choice for `npoints`.
fn pippenger_window_size(npoints: usize) -> usize {
    let wbits = num_bits(npoints);
    if wbits > 13 {
        return wbits - 4;
    }
    if wbits > 5 {
        return wbits - 3;
    }
    2
}

/// blst's grid breakdown: (point ranges, bit rows, window).
fn breakdown(nbits: usize, window: usize, ncpus: usize) -> (usize, usize, usize) {
    let mut nx = 1usize;
    let mut wnd = window;
    if nbits > window * ncpus {
        wnd = num_bits(ncpus / 4);
        if (window + wnd) > 18 {
            wnd = window - wnd;
        } else {
            wnd = (nbits / window).div_ceil(ncpus);
            if (nbits / (window + 1)).div_ceil(ncpus) < wnd {
                wnd = window + 1;
            } else {
                wnd = window;
            }
        }
    } else if window > 3 {
        nx = 2;
        wnd = window - 2;
        while wnd > 1 && (nbits / wnd + 1) * nx < ncpus {
            nx += 1;
            wnd = window - num_bits(3 * nx / 2);
        }
        nx -= 1;
        wnd = window - num_bits(3 * nx / 2);
    }
    let ny = nbits / wnd + 1;
    wnd = nbits / ny + 1;
    (nx.max(1), ny, wnd)
}

#[derive(Clone, Copy)]
struct Tile {
    x: usize,
    dx: usize,
    y: usize,
}

macro_rules! msm_impl {
    ($name:ident, $affine:ty, $proj:ty, $raw:ty, $raw_affine:ty,
     $tile:path, $mult_pip:path, $scratch:path, $add:path, $double:path,
     $from_affine:path, $mult:path) => {
        /// `sum scalars[i] * bases[i]`; `bases.len() == scalars.len()` (checked by callers).
        pub(crate) fn $name(bases: &[$affine], scalars: &[ScalarBytes]) -> $proj {
            let npoints = bases.len().min(scalars.len());
            let bases = &bases[..npoints];
            // `$affine` is `repr(transparent)` over `$raw_affine`.
            let raw_bases: &[$raw_affine] = {
                // SAFETY: blstrs declares the affine point type `#[repr(transparent)]` over the
                // blst affine struct, so the slices have identical layout and length.
                unsafe { std::slice::from_raw_parts(bases.as_ptr().cast::<$raw_affine>(), npoints) }
            };
            let ncpus = rayon::current_num_threads();
            let raw = if npoints < 64.max(4 * ncpus) {
                // Few points: plain double-and-add per point, in parallel.
                raw_bases
                    .par_iter()
                    .zip(scalars[..npoints].par_iter())
                    .map(|(p, s)| {
                        let mut q = <$raw>::default();
                        let mut out = <$raw>::default();
                        // SAFETY: `p`, `s` are valid references (one affine point, 32 scalar
                        // bytes of which NBITS are read); `q`, `out` are owned locals.
                        unsafe {
                            $from_affine(&mut q, p);
                            $mult(&mut out, &q, s.as_ptr(), NBITS);
                        }
                        out
                    })
                    .reduce(<$raw>::default, |a, b| {
                        let mut out = <$raw>::default();
                        // SAFETY: all three are valid projective points owned here.
                        unsafe { $add(&mut out, &a, &b) };
                        out
                    })
            } else if ncpus < 2 {
                let p: [*const $raw_affine; 2] = [raw_bases.as_ptr(), std::ptr::null()];
                let s: [*const u8; 2] = [scalars.as_ptr().cast::<u8>(), std::ptr::null()];
                // SAFETY: the sizeof call has no preconditions.
                let words = unsafe { $scratch(npoints) } / 8;
                let mut scratch = vec![0u64; words];
                let mut out = <$raw>::default();
                // SAFETY: `p[0]` points at `npoints` contiguous affine points and `s[0]` at
                // `npoints` contiguous 32-byte scalars (both null-terminated pointer lists, so
                // blst treats them as flat arrays); the scratch holds the size blst asked for.
                unsafe {
                    $mult_pip(
                        &mut out,
                        p.as_ptr(),
                        npoints,
                        s.as_ptr(),
                        NBITS,
                        scratch.as_mut_ptr(),
                    )
                };
                out
            } else {
                let (nx, ny, window) = breakdown(NBITS, pippenger_window_size(npoints), ncpus);
                let dx = npoints / nx;
                let mut grid = Vec::with_capacity(nx * ny);
                let mut y = window * (ny - 1);
                for i in 0..nx {
                    let x = i * dx;
                    let w = if i == nx - 1 { npoints - x } else { dx };
                    grid.push(Tile { x, dx: w, y });
                }
                while y != 0 {
                    y -= window;
                    for i in 0..nx {
                        let t = grid[i];
                        grid.push(Tile { y, ..t });
                    }
                }
                // SAFETY: the sizeof call has no preconditions.
                let sz = unsafe { $scratch(0) } / 8;
                let results: Vec<$raw> = grid
                    .par_iter()
                    .map_init(
                        || vec![0u64; sz << (window - 1)],
                        |scratch, t| {
                            let p: [*const $raw_affine; 2] =
                                [raw_bases[t.x..].as_ptr(), std::ptr::null()];
                            let s: [*const u8; 2] =
                                [scalars[t.x..].as_ptr().cast::<u8>(), std::ptr::null()];
                            let mut out = <$raw>::default();
                            // SAFETY: the tile covers points and scalars `x..x+dx` (dx >= 4,
                            // within bounds by construction of the grid); the scratch has
                            // blst's per-window size `sz << (window - 1)` words.
                            unsafe {
                                $tile(
                                    &mut out,
                                    p.as_ptr(),
                                    t.dx,
                                    s.as_ptr(),
                                    NBITS,
                                    scratch.as_mut_ptr(),
                                    t.y,
                                    window,
                                )
                            };
                            out
                        },
                    )
                    .collect();
                let mut ret = <$raw>::default();
                let mut row = 0usize;
                while row < grid.len() {
                    let y = grid[row].y;
                    while row < grid.len() && grid[row].y == y {
                        let acc = ret;
                        // SAFETY: valid projective points owned here.
                        unsafe { $add(&mut ret, &acc, &results[row]) };
                        row += 1;
                    }
                    if y == 0 {
                        break;
                    }
                    for _ in 0..window {
                        let acc = ret;
                        // SAFETY: valid projective points owned here.
                        unsafe { $double(&mut ret, &acc) };
                    }
                }
                ret
            };
            // SAFETY: blstrs declares the projective type `#[repr(transparent)]` over the blst
            // projective struct, so the value is reinterpreted with the same layout.
            unsafe { std::mem::transmute::<$raw, $proj>(raw) }
        }
    };
}

msm_impl!(
    msm_g1,
    G1Affine,
    G1Projective,
    blst_p1,
    blst_p1_affine,
    blst::blst_p1s_tile_pippenger,
    blst::blst_p1s_mult_pippenger,
    blst::blst_p1s_mult_pippenger_scratch_sizeof,
    blst::blst_p1_add_or_double,
    blst::blst_p1_double,
    blst::blst_p1_from_affine,
    blst::blst_p1_mult
);

msm_impl!(
    msm_g2,
    G2Affine,
    G2Projective,
    blst_p2,
    blst_p2_affine,
    blst::blst_p2s_tile_pippenger,
    blst::blst_p2s_mult_pippenger,
    blst::blst_p2s_mult_pippenger_scratch_sizeof,
    blst::blst_p2_add_or_double,
    blst::blst_p2_double,
    blst::blst_p2_from_affine,
    blst::blst_p2_mult
);

/// Canonical bytes of every scalar, in parallel.
pub(crate) fn all_bytes(v: &[Scalar]) -> Vec<ScalarBytes> {
    v.par_iter()
        .with_min_len(1 << 12)
        .map(scalar_bytes)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;
    use group::Group;
    use rand_chacha::rand_core::SeedableRng;

    fn check(n: usize, threads: usize) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(n as u64);
        let pts: Vec<G1Affine> = (0..n)
            .map(|_| G1Projective::random(&mut rng).into())
            .collect();
        let pts2: Vec<G2Affine> = (0..n.min(300))
            .map(|_| G2Projective::random(&mut rng).into())
            .collect();
        let sc: Vec<Scalar> = (0..n)
            .map(|i| match i % 5 {
                0 => Scalar::ZERO,
                1 => Scalar::ONE,
                _ => Scalar::random(&mut rng),
            })
            .collect();
        let naive1: G1Projective = pts
            .iter()
            .zip(&sc)
            .map(|(p, s)| G1Projective::from(p) * s)
            .sum();
        let naive2: G2Projective = pts2
            .iter()
            .zip(&sc)
            .map(|(p, s)| G2Projective::from(p) * s)
            .sum();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let b = all_bytes(&sc);
            assert_eq!(msm_g1(&pts, &b), naive1, "g1 n={n} threads={threads}");
            assert_eq!(
                msm_g2(&pts2, &b[..pts2.len()]),
                naive2,
                "g2 n={n} threads={threads}"
            );
        });
    }

    #[test]
    fn msm_matches_naive() {
        for (n, t) in [
            (0, 2),
            (1, 2),
            (7, 1),
            (100, 1),
            (100, 2),
            (1000, 4),
            (2500, 3),
            (5000, 16),
        ] {
            check(n, t);
        }
    }
}
