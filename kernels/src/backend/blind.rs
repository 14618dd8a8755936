//! Blinding on the host: the five unblinded sums of a proof ([`Components`]) and the
//! randomness `r`, `s` into the proof, as [`BlindingKey::proof`] does but with fewer and cheaper
//! multiplications. The GPU backend blinds every proof with it while the device proves the next
//! one, so its cost is host CPU per proof (`cargo bench -p kernels --bench blind`).
//!
//! From 2^20 up the GPU backend finishes proofs on the device instead: the host hands it a
//! [`DeviceBlind`] per proof ([`Blinder::device_input`]: two fixed-base products), the device
//! adds it to the sums, multiplies by `r` and `s` and returns [`DeviceSums`], and the host adds
//! H's sum ([`Blinder::proof_from_device`]). [`device_reference`] states what the device
//! computes, in blstrs' arithmetic; the tests hold both sides to it.

use std::sync::OnceLock;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::{Field, PrimeField};
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};

use super::{BlindingKey, Components};
use crate::fixed_base::{g1_mul, g1_table, g2_mul, g2_table, limbs, FixedBase};
use crate::types::Proof;

/// Window bits of the blinding's fixed-base combs (`paramgen`'s signed-digit tables): at most 30
/// additions per product, 7,680 points per base (0.7 MB in G1, 1.5 MB in G2).
const COMB_WINDOW: usize = 9;

/// The blinding key and fixed-base combs of its two `delta`s (the two of the four scalar
/// multiplications per proof whose base never changes): what turns the five sums into a proof
/// with fewer multiplications than [`BlindingKey::proof`], for the same bytes.
///
/// The comb lookups and [`mul2`]'s digits depend on `r` and `s` (not constant-time): what they
/// could leak to an observer of this host's caches is the proofs' zero-knowledge towards that
/// observer, not their soundness. gpu-proc runs alone on its own cores.
pub struct Blinder {
    key: BlindingKey,
    delta_g1: FixedBase<G1Affine>,
    delta_g2: FixedBase<G2Affine>,
}

impl Blinder {
    /// The combs of `key`'s two deltas (about 2.2 MB; built once per backend).
    pub fn new(key: BlindingKey) -> Self {
        Blinder {
            delta_g1: g1_table(G1Projective::from(key.delta_g1), COMB_WINDOW),
            delta_g2: g2_table(G2Projective::from(key.delta_g2), COMB_WINDOW),
            key,
        }
    }

    /// What the device adds to a proof's sums and multiplies them by when it finishes the
    /// proof (see [`device_reference`]): `pa = alpha + r delta`, `pb1 = beta`,
    /// `pb2 = beta + s delta` in G2, and `r`, `s` as integers. Two fixed-base products.
    pub fn device_input(&self, r: &Scalar, s: &Scalar) -> DeviceBlind {
        let key = &self.key;
        let mut digits = Vec::new();
        DeviceBlind {
            r: limbs(r),
            s: limbs(s),
            pa: g1_mul(&self.delta_g1, r, &mut digits) + key.alpha_g1,
            pb1: G1Projective::from(key.beta_g1),
            pb2: g2_mul(&self.delta_g2, s, &mut digits) + key.beta_g2,
        }
    }

    /// The proof from what the device returned for [`Blinder::device_input`]'s input and H's
    /// sum: `A = a`, `B = b2`, `C = h + x` (one addition and one normalisation on the host).
    pub fn proof_from_device(h: &G1Projective, d: &DeviceSums) -> Proof {
        Proof {
            a: d.a,
            b: d.b2,
            c: (h + d.x).to_affine(),
        }
    }

    /// The proof of `c` with `r` and `s`: the group elements of [`BlindingKey::proof`] (so the
    /// same bytes) with one two-point variable-base G1 multiplication ([`mul2`]) and two
    /// fixed-base ones instead of six single ones, since `s A = s alpha + s a + r s delta`:
    /// `A = alpha + a + r delta`, `B = beta + b_g2 + s delta`, `C = s A + r (beta + b_g1) + h + l`.
    pub fn proof(&self, c: &Components, r: Scalar, s: Scalar) -> Proof {
        let key = &self.key;
        let mut digits = Vec::new();
        let g_a = g1_mul(&self.delta_g1, &r, &mut digits) + key.alpha_g1 + c.a;
        let g_b = g2_mul(&self.delta_g2, &s, &mut digits) + key.beta_g2 + c.b_g2;
        let g_c = mul2(&g_a, &s, &(c.b_g1 + key.beta_g1), &r) + c.h + c.l;
        Proof {
            a: g_a.to_affine(),
            b: g_b.to_affine(),
            c: g_c.to_affine(),
        }
    }
}

/// One proof's input to the device's finishing (`sp_blind` in `kernels/cuda/gpu_kernels.cuh`,
/// which reads this layout): the scalars as canonical little-endian integers and the three points
/// added to A's, B_G1's and B_G2's sums. All zero (the identity points) asks for the plain sums.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DeviceBlind {
    /// `r`, canonical, least significant word first.
    pub r: [u64; 4],
    /// `s`, likewise.
    pub s: [u64; 4],
    /// Added to A's sum.
    pub pa: G1Projective,
    /// Added to B_G1's sum.
    pub pb1: G1Projective,
    /// Added to B_G2's sum.
    pub pb2: G2Projective,
}

// The C++ side's `static_assert`s hold the same sizes (`splitprover_gpu_side_check`).
const _: () = assert!(std::mem::size_of::<DeviceBlind>() == 64 + 2 * 144 + 288);
const _: () = assert!(std::mem::size_of::<DeviceSums>() == 4 * 96 + 192);

impl Default for DeviceBlind {
    /// The plain sums: nothing added, `r = s = 0`.
    fn default() -> Self {
        DeviceBlind {
            r: [0; 4],
            s: [0; 4],
            pa: G1Projective::identity(),
            pb1: G1Projective::identity(),
            pb2: G2Projective::identity(),
        }
    }
}

/// What the device returns when it finishes a proof (`sp_dev_sums`), affine: with the input of
/// [`Blinder::device_input`], `a` and `b2` are the proof's A and B and `x` is C without H.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceSums {
    /// L's sum.
    pub l: G1Affine,
    /// A's sum plus `pa`.
    pub a: G1Affine,
    /// B_G1's sum plus `pb1`.
    pub b1: G1Affine,
    /// `l + s a + r b1`.
    pub x: G1Affine,
    /// B_G2's sum plus `pb2`.
    pub b2: G2Affine,
}

impl Default for DeviceSums {
    fn default() -> Self {
        DeviceSums {
            l: G1Affine::identity(),
            a: G1Affine::identity(),
            b1: G1Affine::identity(),
            x: G1Affine::identity(),
            b2: G2Affine::identity(),
        }
    }
}

/// The device's contract in blstrs' arithmetic: from the unblinded sums `c` (its H unused) and
/// `input`, `l = L`, `a = A + pa`, `b1 = B_G1 + pb1`, `b2 = B_G2 + pb2`, `x = l + s a + r b1`.
/// With [`Blinder::device_input`]'s input, `C = H + L + s A + r (beta + B_G1)` is `h + x`.
pub fn device_reference(c: &Components, input: &DeviceBlind) -> DeviceSums {
    let (r, s) = (integer(&input.r), integer(&input.s));
    let a = c.a + input.pa;
    let b1 = c.b_g1 + input.pb1;
    let x = c.l + a * s + b1 * r;
    DeviceSums {
        l: c.l.to_affine(),
        a: a.to_affine(),
        b1: b1.to_affine(),
        x: x.to_affine(),
        b2: (c.b_g2 + input.pb2).to_affine(),
    }
}

/// The scalar of a canonical integer below the group order (the inverse of `fixed_base::limbs`).
fn integer(w: &[u64; 4]) -> Scalar {
    let mut b = [0u8; 32];
    for (i, x) in w.iter().enumerate() {
        b[8 * i..8 * i + 8].copy_from_slice(&x.to_le_bytes());
    }
    Option::from(Scalar::from_bytes_le(&b)).expect("a canonical scalar")
}

/// G1's eigenvalue of its GLV endomorphism `phi(x, y) = (omega x, y) = LAMBDA (x, y)`:
/// `z^2 - 1` for the curve parameter `z`, so that `r = LAMBDA^2 + LAMBDA + 1` and every scalar
/// below `r` is `k0 + k1 LAMBDA` with both halves below `2^128`.
const LAMBDA: u128 = 0xac45_a401_0001_a402_0000_0000_ffff_ffff;

/// `omega`, the cube root of unity in the base field that goes with [`LAMBDA`], read off
/// `LAMBDA G = (omega x_G, y_G)` once. blstrs does not name its base field type, so the value
/// is kept as the x coordinate of an unchecked affine value (never used as a point).
fn omega() -> &'static G1Affine {
    static OMEGA: OnceLock<G1Affine> = OnceLock::new();
    OMEGA.get_or_init(|| {
        let g = G1Affine::generator();
        let l = (G1Projective::generator() * Scalar::from_u128(LAMBDA)).to_affine();
        let w = l.x() * g.x().invert().expect("the generator's x is not zero");
        G1Affine::from_raw_unchecked(w, w, false)
    })
}

/// `phi(p) = LAMBDA p`: one base-field multiplication (Jacobian `X` times `omega`).
fn phi(p: &G1Projective) -> G1Projective {
    G1Projective::from_raw_unchecked(p.x() * omega().x(), p.y(), p.z())
}

/// `k = k0 + k1 LAMBDA` with `k0 < LAMBDA` and `k1 <= LAMBDA + 1` (both below `2^128`), by
/// long division of the scalar's integer by `LAMBDA`.
fn split(k: &Scalar) -> (u128, u128) {
    let b = k.to_bytes_le();
    let lo = u128::from_le_bytes(b[..16].try_into().expect("16 bytes"));
    let hi = u128::from_le_bytes(b[16..].try_into().expect("16 bytes"));
    let (mut rem, mut quot) = (0u128, 0u128);
    for i in (0..256).rev() {
        let bit = if i >= 128 { hi >> (i - 128) } else { lo >> i } & 1;
        // rem < LAMBDA < 2^128: 2 rem + bit may need a 129th bit, which `top` keeps
        let top = rem >> 127;
        rem = (rem << 1) | bit;
        if top == 1 || rem >= LAMBDA {
            rem = rem.wrapping_sub(LAMBDA);
            // k < r keeps the quotient below 2^128: no bit at 128 or above is ever set
            quot |= 1u128.checked_shl(i).unwrap_or(0);
        }
    }
    (rem, quot)
}

/// Width-5 NAF digits of `k`, least significant first: each odd in [-15, 15] or zero, and of
/// any five consecutive at most one nonzero. Returns the digits and their count (at most 129).
fn wnaf5(mut k: u128) -> ([i8; 130], usize) {
    let mut d = [0i8; 130];
    let mut n = 0;
    while k != 0 {
        if k & 1 == 1 {
            let mut v = (k & 31) as i8;
            if v >= 16 {
                v -= 32;
            }
            d[n] = v;
            // k below 2^128 - 16 here (k <= LAMBDA + 1), so adding back a negative digit fits
            k = if v > 0 {
                k - v as u128
            } else {
                k + (-v) as u128
            };
        }
        k >>= 1;
        n += 1;
    }
    (d, n)
}

/// `s p + r q` in G1, not constant-time: the four halves of `s` and `r` ([`split`]) against
/// `p`, `phi(p)`, `q`, `phi(q)` in one chain of 128 doublings, with width-5 NAF digits against
/// eight odd multiples of each base. About two thirds of the time of blst's two GLV
/// multiplications: their doublings are shared. The leak argument of [`Blinder`] applies.
pub fn mul2(p: &G1Projective, s: &Scalar, q: &G1Projective, r: &Scalar) -> G1Projective {
    let (s0, s1) = split(s);
    let (r0, r1) = split(r);
    let digits = [wnaf5(s0), wnaf5(s1), wnaf5(r0), wnaf5(r1)];
    // odd multiples 1, 3, ..., 15 of p, phi(p), q, phi(q)
    let mut odd = [G1Projective::identity(); 32];
    for (base, at) in [(p, 0), (q, 16)] {
        let twice = base.double();
        odd[at] = *base;
        for i in 1..8 {
            odd[at + i] = odd[at + i - 1] + twice;
        }
        for i in 0..8 {
            odd[at + 8 + i] = phi(&odd[at + i]);
        }
    }
    // Jacobian, not affine: by operation count, normalising the 32 (one inversion and about
    // seven multiplications each) costs about what the mixed additions would save
    let len = digits.iter().map(|d| d.1).max().unwrap_or(0);
    let mut acc = G1Projective::identity();
    for i in (0..len).rev() {
        acc = acc.double();
        for (j, (d, _)) in digits.iter().enumerate() {
            let v = d[i];
            if v > 0 {
                acc += &odd[j * 8 + (v / 2) as usize];
            } else if v < 0 {
                acc -= &odd[j * 8 + (-v / 2) as usize];
            }
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuits::CircuitSpec;
    use crate::srs::{SrsImage, SrsView};
    use group::Group;
    use rand_chacha::rand_core::SeedableRng;

    /// The blinding's fixed-base combs multiply as the group does: zero, one, minus one, byte
    /// and window boundaries and random scalars, in G1 and G2. Needs no GPU.
    #[test]
    fn fixed_base_tables_multiply_like_the_group() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let p1 = G1Projective::random(&mut rng);
        let p2 = G2Projective::random(&mut rng);
        let (t1, t2) = (g1_table(p1, COMB_WINDOW), g2_table(p2, COMB_WINDOW));
        let mut digits = Vec::new();
        let mut scalars: Vec<Scalar> = [0u64, 1, 2, 255, 256, 257, 65535, 65536, u64::MAX]
            .iter()
            .map(|&x| Scalar::from(x))
            .collect();
        scalars.push(-Scalar::from(1u64));
        scalars.extend((0..6).map(|_| <Scalar as ff::Field>::random(&mut rng)));
        for x in &scalars {
            assert_eq!(g1_mul(&t1, x, &mut digits), p1 * x, "G1, {x:?}");
            assert_eq!(g2_mul(&t2, x, &mut digits), p2 * x, "G2, {x:?}");
        }
    }

    /// `omega` is a cube root of unity whose map is multiplication by `LAMBDA`, and the
    /// split recombines: for zero, one, `LAMBDA` and around it, minus one, random scalars.
    #[test]
    fn glv_split_recombines_and_phi_is_lambda() {
        let w = omega().x();
        let one = w * w.invert().unwrap();
        assert_ne!(w, one, "omega is not one");
        assert_eq!(w * w * w, one, "omega is a cube root of unity");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let p = G1Projective::random(&mut rng);
        assert_eq!(phi(&p), p * Scalar::from_u128(LAMBDA));
        assert_eq!(phi(&G1Projective::identity()), G1Projective::identity());
        let lambda = Scalar::from_u128(LAMBDA);
        let mut ks: Vec<Scalar> = [0u128, 1, 2, LAMBDA - 1, LAMBDA, LAMBDA + 1, u128::MAX]
            .iter()
            .map(|&x| Scalar::from_u128(x))
            .collect();
        ks.push(-Scalar::ONE);
        ks.push(-lambda);
        ks.extend((0..32).map(|_| Scalar::random(&mut rng)));
        for k in &ks {
            let (k0, k1) = split(k);
            assert!(k0 < LAMBDA && k1 <= LAMBDA + 1, "{k:?}");
            assert_eq!(
                Scalar::from_u128(k0) + Scalar::from_u128(k1) * lambda,
                *k,
                "{k:?}"
            );
            let (d, n) = wnaf5(k0);
            let mut back = 0i128;
            for i in (0..n).rev() {
                back = back.wrapping_mul(2).wrapping_add(d[i] as i128);
                assert!(d[i] == 0 || (d[i] % 2 != 0 && d[i].abs() <= 15));
            }
            assert_eq!(back as u128, k0, "{k:?}");
        }
    }

    /// The two-point multiplication equals the group's `s p + r q`: edge scalars and points
    /// (zero, one, minus one, the identity, p = q) and random ones.
    #[test]
    fn two_point_multiplication_matches_the_group() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(6);
        let mut scalars: Vec<Scalar> = vec![Scalar::ZERO, Scalar::ONE, -Scalar::ONE];
        scalars.push(Scalar::from_u128(LAMBDA));
        scalars.extend((0..4).map(|_| Scalar::random(&mut rng)));
        let p = G1Projective::random(&mut rng);
        let points = [p, G1Projective::random(&mut rng), G1Projective::identity()];
        for a in &points {
            for b in &points {
                for s in &scalars {
                    for r in &scalars[..4] {
                        assert_eq!(mul2(a, s, b, r), a * s + b * r);
                        assert_eq!(mul2(a, r, b, s), a * r + b * s);
                    }
                }
            }
        }
        for _ in 0..16 {
            let (a, b) = (
                G1Projective::random(&mut rng),
                G1Projective::random(&mut rng),
            );
            let (s, r) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
            assert_eq!(mul2(&a, &s, &b, &r), a * s + b * r);
        }
    }

    /// The cheaper blinding gives the bytes of the shared one, for random sums and randomness
    /// (zero included). Needs no GPU.
    #[test]
    fn blinding_with_fewer_multiplications_gives_the_same_proof() {
        let spec: CircuitSpec = "pubinputs:2".parse().unwrap();
        let params =
            crate::paramgen::generate_parameters_seeded(spec.circuit(None), 1, &|_| {}).unwrap();
        let image = SrsImage::from_parameters(&params, spec.circuit_id()).unwrap();
        let key = BlindingKey::of(&SrsView::new(image.as_ref()).unwrap());
        let blinder = Blinder::new(key);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let bytes = |p: &Proof| {
            let mut v = Vec::new();
            p.write(&mut v).unwrap();
            v
        };
        for i in 0..8 {
            let c = Components {
                h: G1Projective::random(&mut rng),
                l: G1Projective::random(&mut rng),
                a: G1Projective::random(&mut rng),
                b_g1: G1Projective::random(&mut rng),
                b_g2: G2Projective::random(&mut rng),
            };
            let (r, s) = match i {
                0 => (Scalar::from(0u64), Scalar::from(0u64)),
                1 => (Scalar::from(0u64), Scalar::from(3u64)),
                2 => (-Scalar::from(1u64), Scalar::from(256u64)),
                _ => (
                    <Scalar as ff::Field>::random(&mut rng),
                    <Scalar as ff::Field>::random(&mut rng),
                ),
            };
            assert_eq!(
                bytes(&blinder.proof(&c, r, s)),
                bytes(&key.proof(&c, r, s)),
                "case {i}"
            );
            // finished on the device: its contract gives the same bytes
            let input = blinder.device_input(&r, &s);
            assert_eq!(integer(&input.r), r);
            assert_eq!(integer(&input.s), s);
            let dev = device_reference(&c, &input);
            assert_eq!(
                bytes(&Blinder::proof_from_device(&c.h, &dev)),
                bytes(&key.proof(&c, r, s)),
                "case {i}, finished on the device"
            );
            // and the plain input returns the plain sums
            let plain = device_reference(&c, &DeviceBlind::default());
            assert_eq!(
                (plain.l, plain.a, plain.b1, plain.x, plain.b2),
                (
                    c.l.to_affine(),
                    c.a.to_affine(),
                    c.b_g1.to_affine(),
                    c.l.to_affine(),
                    c.b_g2.to_affine()
                )
            );
        }
    }
}
