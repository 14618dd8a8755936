//! Fixed-base scalar multiplication: signed-digit comb tables (`FixedBase`) and the
//! multiplications by them, one scalar or many in parallel. The parameter generator
//! (`paramgen`, on the CPU or the GPU) and the proofs' blinding (`backend::blind`) both use it.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use group::{Curve, Group};
use rayon::prelude::*;

/// Points per parallel work item (and per batch inversion).
const CHUNK: usize = 1024;

/// A signed-digit fixed-base comb table: `table[j][k] = (k + 1) * 2^(j w) * base`. Built by
/// `g1_table`/`g2_table`; used by the parameter generator (`paramgen`) and by the blinding
/// (`backend::blind`) for its two fixed bases.
pub(crate) struct FixedBase<A> {
    pub(crate) w: usize,
    pub(crate) windows: usize,
    pub(crate) table: Vec<A>,
}

/// The comb's window size for `count` multiplications by one base.
pub(crate) fn window_for(count: usize) -> usize {
    match count {
        0..=1023 => 6,
        1024..=65535 => 9,
        _ => 12,
    }
}

/// A scalar's canonical integer as four 64-bit limbs, least significant first (also the layout
/// in which the GPU backend hands `r` and `s` to the device, `backend::blind::DeviceBlind`).
pub fn limbs(s: &Scalar) -> [u64; 4] {
    let b = s.to_bytes_le();
    std::array::from_fn(|i| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap_or([0; 8])))
}

fn bits_at(l: &[u64; 4], pos: usize, w: usize) -> u64 {
    let (i, sh) = (pos / 64, pos % 64);
    if i >= 4 {
        return 0;
    }
    let mut v = l[i] >> sh;
    if sh + w > 64 && i + 1 < 4 {
        v |= l[i + 1] << (64 - sh);
    }
    v & ((1u64 << w) - 1)
}

/// Signed digits `d_j` in `[-2^(w-1), 2^(w-1)]` with `s = sum d_j 2^(j w)`.
fn signed_digits(s: &Scalar, w: usize, windows: usize, out: &mut Vec<i64>) {
    out.clear();
    let l = limbs(s);
    let half = 1i64 << (w - 1);
    let mut carry = 0i64;
    for j in 0..windows {
        let mut v = bits_at(&l, j * w, w) as i64 + carry;
        if v > half {
            v -= 1 << w;
            carry = 1;
        } else {
            carry = 0;
        }
        out.push(v);
    }
}

macro_rules! fixed_base_impl {
    ($build:ident, $mul_one:ident, $mul_all:ident, $proj:ty, $affine:ty, $to_affine:path) => {
        /// The comb table of `base` with `w`-bit windows (`window_for`).
        pub(crate) fn $build(base: $proj, w: usize) -> FixedBase<$affine> {
            // 255-bit scalars plus a final carry digit.
            let windows = 256usize.div_ceil(w) + 1;
            let per = 1usize << (w - 1);
            let mut bases = Vec::with_capacity(windows);
            let mut b = base;
            for _ in 0..windows {
                bases.push(b);
                for _ in 0..w {
                    b = b.double();
                }
            }
            let mut table = vec![<$affine>::default(); windows * per];
            table
                .par_chunks_mut(per)
                .zip(bases.par_iter())
                .for_each(|(row, b)| {
                    let mut proj = Vec::with_capacity(per);
                    let mut acc = *b;
                    for _ in 0..per {
                        proj.push(acc);
                        acc += b;
                    }
                    $to_affine(&proj, row);
                });
            FixedBase { w, windows, table }
        }

        /// `s * base`: one addition per nonzero signed digit (`digits` is scratch).
        pub(crate) fn $mul_one(
            fb: &FixedBase<$affine>,
            s: &Scalar,
            digits: &mut Vec<i64>,
        ) -> $proj {
            let per = 1usize << (fb.w - 1);
            signed_digits(s, fb.w, fb.windows, digits);
            let mut acc = <$proj>::identity();
            for (j, &d) in digits.iter().enumerate() {
                if d == 0 {
                    continue;
                }
                let p = &fb.table[j * per + (d.unsigned_abs() as usize - 1)];
                if d > 0 {
                    acc += p;
                } else {
                    acc -= p;
                }
            }
            acc
        }

        /// `scalars[i] * base` for every i, in parallel, normalised to affine.
        pub(crate) fn $mul_all(
            fb: &FixedBase<$affine>,
            scalars: &[Scalar],
            tick: &(dyn Fn(u64) + Sync),
        ) -> Vec<$affine> {
            let mut out = vec![<$affine>::default(); scalars.len()];
            out.par_chunks_mut(CHUNK)
                .zip(scalars.par_chunks(CHUNK))
                .for_each(|(o, sc)| {
                    let mut digits = Vec::with_capacity(fb.windows);
                    let proj: Vec<$proj> =
                        sc.iter().map(|s| $mul_one(fb, s, &mut digits)).collect();
                    $to_affine(&proj, o);
                    tick(sc.len() as u64);
                });
            out
        }
    };
}

macro_rules! batch_affine_impl {
    ($name:ident, $proj:ty, $affine:ty, $raw:ty, $raw_affine:ty, $blst:path) => {
        /// Batch normalisation with one inversion (blst), falling back to per-point conversion
        /// when a point is the identity (which a batch inversion cannot take).
        fn $name(proj: &[$proj], out: &mut [$affine]) {
            let n = proj.len().min(out.len());
            if n == 0 {
                return;
            }
            if proj[..n].iter().any(|p| bool::from(p.is_identity())) {
                for (p, o) in proj.iter().zip(out.iter_mut()) {
                    *o = p.to_affine();
                }
                return;
            }
            let ptrs: [*const $raw; 2] = [proj.as_ptr().cast::<$raw>(), std::ptr::null()];
            // SAFETY: blstrs' projective and affine types are `#[repr(transparent)]` over the blst
            // structs; `ptrs` is a null-terminated list whose first entry points at `n`
            // contiguous points (blst then reads them as a flat array), `out` has room for `n`
            // affine points, and no point is the identity (checked above).
            unsafe { $blst(out.as_mut_ptr().cast::<$raw_affine>(), ptrs.as_ptr(), n) };
        }
    };
}

batch_affine_impl!(
    g1_to_affine,
    G1Projective,
    G1Affine,
    blst::blst_p1,
    blst::blst_p1_affine,
    blst::blst_p1s_to_affine
);
batch_affine_impl!(
    g2_to_affine,
    G2Projective,
    G2Affine,
    blst::blst_p2,
    blst::blst_p2_affine,
    blst::blst_p2s_to_affine
);
fixed_base_impl!(
    g1_table,
    g1_mul,
    g1_mul_all,
    G1Projective,
    G1Affine,
    g1_to_affine
);
fixed_base_impl!(
    g2_table,
    g2_mul,
    g2_mul_all,
    G2Projective,
    G2Affine,
    g2_to_affine
);

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;
    use rand_chacha::rand_core::SeedableRng;

    #[test]
    fn signed_digits_recompose() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let mut digits = Vec::new();
        for w in [6, 9, 12] {
            let windows = 256usize.div_ceil(w) + 1;
            for s in [
                Scalar::ZERO,
                Scalar::ONE,
                -Scalar::ONE,
                Scalar::random(&mut rng),
                Scalar::random(&mut rng),
            ] {
                signed_digits(&s, w, windows, &mut digits);
                let mut acc = Scalar::ZERO;
                for &d in digits.iter().rev() {
                    acc *= Scalar::from(1u64 << w);
                    let v = Scalar::from(d.unsigned_abs());
                    acc += if d < 0 { -v } else { v };
                }
                assert_eq!(acc, s, "w={w}");
                assert!(digits.iter().all(|d| d.abs() <= 1 << (w - 1)));
            }
        }
    }

    #[test]
    fn fixed_base_matches_scalar_mul() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(6);
        let g = G1Projective::random(&mut rng);
        let g2 = G2Projective::random(&mut rng);
        let sc: Vec<Scalar> = (0..2100)
            .map(|i| {
                if i == 7 {
                    Scalar::ZERO
                } else {
                    Scalar::random(&mut rng)
                }
            })
            .collect();
        let t = g1_table(g, window_for(sc.len()));
        let t2 = g2_table(g2, window_for(10));
        let out = g1_mul_all(&t, &sc, &|_| {});
        let out2 = g2_mul_all(&t2, &sc[..10], &|_| {});
        for (i, s) in sc.iter().enumerate() {
            assert_eq!(out[i], (g * s).to_affine());
        }
        for (i, s) in sc[..10].iter().enumerate() {
            assert_eq!(out2[i], (g2 * s).to_affine());
        }
    }
}
