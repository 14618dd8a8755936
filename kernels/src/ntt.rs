//! Radix-2 number-theoretic transforms over the BLS12-381 scalar field, parallel with rayon.
//!
//! [`Domain`] mirrors bellperson's `EvaluationDomain` (same `omega`, same coset generator
//! `Scalar::MULTIPLICATIVE_GENERATOR`), so [`compute_h`] yields exactly the coefficients
//! bellperson's prover feeds into the H multi-exponentiation: field arithmetic is exact, so any
//! correct transform produces the same values.

use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use crate::Error;

/// Below this many elements a loop runs on the calling thread.
const PAR_MIN: usize = 1 << 12;

/// A radix-2 evaluation domain of size `m = 2^log_m`.
#[derive(Clone, Copy, Debug)]
pub struct Domain {
    /// Size.
    pub m: usize,
    /// log2 of the size.
    pub log_m: u32,
    /// Primitive `m`-th root of unity (bellperson's choice).
    pub omega: Scalar,
    /// Its inverse.
    pub omega_inv: Scalar,
    /// `1/m`.
    pub m_inv: Scalar,
}

impl Domain {
    /// The smallest domain holding `n` elements (`n >= 1`).
    pub fn for_len(n: usize) -> Result<Self, Error> {
        let m = n.max(1).next_power_of_two();
        let log_m = m.trailing_zeros();
        if log_m >= Scalar::S {
            return Err(bellpepper_core::SynthesisError::PolynomialDegreeTooLarge.into());
        }
        let mut omega = Scalar::ROOT_OF_UNITY;
        for _ in log_m..Scalar::S {
            omega = omega.square();
        }
        // Both inverses exist: omega has order m, and m < r.
        let omega_inv = Option::from(omega.invert()).unwrap_or(Scalar::ZERO);
        let m_inv = Option::from(Scalar::from(m as u64).invert()).unwrap_or(Scalar::ZERO);
        Ok(Self {
            m,
            log_m,
            omega,
            omega_inv,
            m_inv,
        })
    }

    /// `z(x) = x^m - 1`, the vanishing polynomial of the domain.
    pub fn z(&self, x: &Scalar) -> Scalar {
        x.pow_vartime([self.m as u64]) - Scalar::ONE
    }
}

/// `[start * g^0, start * g^1, ...]` of length `len`, computed in parallel chunks.
pub fn powers(g: Scalar, start: Scalar, len: usize) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO; len];
    distribute_powers(&mut out, g, start, false);
    out
}

/// `v[i] = (overwrite ? 1 : v[i]) * start * g^i`.
fn distribute_powers(v: &mut [Scalar], g: Scalar, start: Scalar, multiply: bool) {
    let chunk = (v.len() / (rayon::current_num_threads() * 4)).max(PAR_MIN);
    v.par_chunks_mut(chunk).enumerate().for_each(|(i, c)| {
        let mut u = start * g.pow_vartime([(i * chunk) as u64]);
        for x in c.iter_mut() {
            if multiply {
                *x *= u;
            } else {
                *x = u;
            }
            u *= g;
        }
    });
}

/// Multiplies `v[i]` by `start * g^i`.
pub fn scale_by_powers(v: &mut [Scalar], g: Scalar, start: Scalar) {
    distribute_powers(v, g, start, true);
}

fn bit_reverse(a: &mut [Scalar]) {
    let n = a.len();
    if n <= 2 {
        return;
    }
    let shift = usize::BITS - n.trailing_zeros();
    for i in 0..n {
        let r = i.reverse_bits() >> shift;
        if i < r {
            a.swap(i, r);
        }
    }
}

#[inline]
fn butterfly(lo: &mut Scalar, hi: &mut Scalar, w: &Scalar) {
    let t = *hi * w;
    *hi = *lo - t;
    *lo += t;
}

/// In-place NTT: `a[k] <- sum_j a[j] * omega^(jk)`; `a.len()` must be a power of two and `omega`
/// a primitive root of that order.
pub fn ntt(a: &mut [Scalar], omega: Scalar) {
    let n = a.len();
    if n <= 1 {
        return;
    }
    debug_assert!(n.is_power_of_two());
    bit_reverse(a);
    let tw = powers(omega, Scalar::ONE, n / 2);
    let mut half = 1;
    while half < n {
        let stride = n / (2 * half);
        let tw = &tw;
        if half >= PAR_MIN {
            // Few large blocks: split each block's butterflies across threads.
            for block in a.chunks_mut(2 * half) {
                let (lo, hi) = block.split_at_mut(half);
                lo.par_chunks_mut(PAR_MIN)
                    .zip(hi.par_chunks_mut(PAR_MIN))
                    .enumerate()
                    .for_each(|(ci, (l, h))| {
                        let base = ci * PAR_MIN;
                        for (j, (x, y)) in l.iter_mut().zip(h.iter_mut()).enumerate() {
                            butterfly(x, y, &tw[(base + j) * stride]);
                        }
                    });
            }
        } else {
            // Many small blocks: one thread per group of blocks.
            let group = (PAR_MIN / (2 * half)).max(1) * 2 * half;
            a.par_chunks_mut(group).for_each(|g| {
                for block in g.chunks_mut(2 * half) {
                    let (lo, hi) = block.split_at_mut(half);
                    for (j, (x, y)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                        butterfly(x, y, &tw[j * stride]);
                    }
                }
            });
        }
        half *= 2;
    }
}

/// Inverse NTT including the `1/m` factor.
pub fn intt(a: &mut [Scalar], d: &Domain) {
    ntt(a, d.omega_inv);
    let m_inv = d.m_inv;
    a.par_chunks_mut(PAR_MIN)
        .for_each(|c| c.iter_mut().for_each(|x| *x *= m_inv));
}

fn padded(v: &[Scalar], m: usize) -> Vec<Scalar> {
    let mut out = Vec::with_capacity(m);
    out.extend_from_slice(v);
    out.resize(m, Scalar::ZERO);
    out
}

/// The H polynomial's coefficients bellperson's prover computes from the a/b/c evaluations:
/// iNTT, coset NTT, `(a*b - c) / z(g)`, coset iNTT, all but the last coefficient (`m - 1` values).
pub fn compute_h(a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Result<Vec<Scalar>, Error> {
    let d = Domain::for_len(a.len())?;
    let g = Scalar::MULTIPLICATIVE_GENERATOR;
    // iNTT then coset shift: x[i] *= (1/m) g^i, then NTT. Fused scalings give the same field values.
    let to_coset = |v: &[Scalar]| {
        let mut x = padded(v, d.m);
        ntt(&mut x, d.omega_inv);
        scale_by_powers(&mut x, g, d.m_inv);
        ntt(&mut x, d.omega);
        x
    };
    let (mut ea, (eb, ec)) = rayon::join(
        || to_coset(a),
        || rayon::join(|| to_coset(b), || to_coset(c)),
    );
    let z_inv: Scalar =
        Option::from(d.z(&g).invert()).ok_or(bellpepper_core::SynthesisError::DivisionByZero)?;
    ea.par_chunks_mut(PAR_MIN)
        .zip(eb.par_chunks(PAR_MIN).zip(ec.par_chunks(PAR_MIN)))
        .for_each(|(x, (y, z))| {
            for ((x, y), z) in x.iter_mut().zip(y).zip(z) {
                *x = (*x * y - z) * z_inv;
            }
        });
    drop((eb, ec));
    ntt(&mut ea, d.omega_inv);
    let g_inv = Option::from(g.invert()).unwrap_or(Scalar::ZERO);
    scale_by_powers(&mut ea, g_inv, d.m_inv);
    ea.truncate(d.m - 1);
    Ok(ea)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;

    fn naive_dft(a: &[Scalar], omega: Scalar) -> Vec<Scalar> {
        let n = a.len();
        (0..n)
            .map(|k| {
                let wk = omega.pow_vartime([k as u64]);
                let mut acc = Scalar::ZERO;
                let mut w = Scalar::ONE;
                for x in a {
                    acc += *x * w;
                    w *= wk;
                }
                acc
            })
            .collect()
    }

    #[test]
    fn ntt_matches_naive_and_inverts() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        for log in [0u32, 1, 2, 5, 9, 13] {
            let n = 1usize << log;
            let d = Domain::for_len(n).unwrap();
            let v: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
            let mut x = v.clone();
            ntt(&mut x, d.omega);
            if log <= 9 {
                assert_eq!(x, naive_dft(&v, d.omega), "log {log}");
            }
            intt(&mut x, &d);
            assert_eq!(x, v, "log {log}");
        }
    }

    #[test]
    fn h_divides_exactly() {
        // a*b - c vanishes on the domain when c = a*b pointwise: then H(x)*z(x) = A(x)B(x) - C(x).
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
        let n = 13;
        let a: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        let b: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        let c: Vec<Scalar> = a.iter().zip(&b).map(|(x, y)| *x * y).collect();
        let h = compute_h(&a, &b, &c).unwrap();
        let d = Domain::for_len(n).unwrap();
        assert_eq!(h.len(), d.m - 1);
        // check at a random point x: A(x)B(x) - C(x) == H(x) z(x)
        let interp = |v: &[Scalar]| {
            let mut p = padded(v, d.m);
            intt(&mut p, &d);
            p
        };
        let eval =
            |p: &[Scalar], x: Scalar| p.iter().rev().fold(Scalar::ZERO, |acc, c| acc * x + c);
        let x = Scalar::random(&mut rng);
        let lhs = eval(&interp(&a), x) * eval(&interp(&b), x) - eval(&interp(&c), x);
        assert_eq!(lhs, eval(&h, x) * d.z(&x));
    }
}
