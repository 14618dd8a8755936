//! Which aux variables a constraint row shows to be bits: the boolean forms and the bits a row
//! derives from known ones. One row at a time, from the matrices alone, so that recording
//! ([`super::record`]), the recorded matrices ([`super::R1cs::boolean_aux`]) and the witness
//! layout ([`crate::witness::WitnessLayout`]) agree.

use blstrs::Scalar;
use ff::{Field, PrimeField};

/// A variable of a constraint row as the boolean test sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowVar {
    /// Input 0, `ONE`.
    One,
    /// Another input (never a bit variable of the packed form).
    Input,
    /// Aux variable `i`.
    Aux(usize),
}

/// One term of a row: its variable, its coefficient, and the coefficient as a small integer when
/// it is one ([`small_int`]).
pub(crate) type RowTerm = (RowVar, Scalar, Option<i64>);

/// `c` as an integer `m` with `|m| < 2^40`, if it is one: rows whose coefficients all are such
/// are solved in `i128`, exactly (their values stay far below the field's modulus, so an integer
/// is 0 exactly when the field element is).
pub(crate) fn small_int(c: &Scalar) -> Option<i64> {
    let fits = |x: &Scalar| {
        let r = x.to_repr();
        r[5..].iter().all(|&b| b == 0).then(|| {
            let mut low = [0u8; 8];
            low[..5].copy_from_slice(&r[..5]);
            i64::from_le_bytes(low)
        })
    };
    fits(c).or_else(|| fits(&-*c).map(|m| -m))
}

/// Most terms a row of A, B or C may have for [`new_bit`] to read it, and most distinct
/// variables (`ONE` aside) a constraint may have: SHA-256's `maj` has five.
pub(crate) const MAX_ROW_TERMS: usize = 5;
const MAX_ROW_VARS: usize = 5;

/// The aux variable that the constraint `A · B = C` shows to be a bit, given the bits shown by
/// the rows before it (`bits`: one bit per aux variable, words past its end are 0): one of the
/// two boolean forms ([`boolean_aux`]), or a variable the row determines from known bits as 0
/// or 1 ([`derived_bit`]). Rows longer than [`MAX_ROW_TERMS`] show nothing.
pub(crate) fn new_bit(a: &[RowTerm], b: &[RowTerm], c: &[RowTerm], bits: &[u64]) -> Option<usize> {
    boolean_aux(a, b, c).or_else(|| derived_bit(a, b, c, bits))
}

/// Where a term's variable is in [`derived_bit`]'s cases: `Z`, `ONE`, or the index of a known bit.
const SLOT_Z: u8 = u8::MAX;
const SLOT_ONE: u8 = u8::MAX - 1;

/// The one aux variable `z` of the constraint that is not yet known to be a bit, when every
/// other variable is a known bit (or `ONE`; an input is never assumed to be a bit), `z` is not in
/// both A and B, and for every 0/1 value of the others the row, `κ z + τ = 0`, has `κ ≠ 0` and
/// its solution in {0, 1} (`τ = 0` or `κ + τ = 0`): then `z` is a bit in every satisfying
/// witness. This is how `AllocatedBit::xor` (`2a · b = a + b - c`), `and` (`a · b = c`),
/// SHA-256's `ch` and `maj` and their kin show their outputs to be bits without a boolean
/// constraint of their own. One row at a time, in row order: no inference across rows.
fn derived_bit(a: &[RowTerm], b: &[RowTerm], c: &[RowTerm], bits: &[u64]) -> Option<usize> {
    let is_bit = |i: usize| bits.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1);
    let mut others = [0usize; MAX_ROW_VARS];
    let (mut k, mut z) = (0, None);
    for (v, _, _) in a.iter().chain(b).chain(c) {
        let i = match *v {
            RowVar::One => continue,
            RowVar::Input => return None,
            RowVar::Aux(i) => i,
        };
        if z == Some(i) || others[..k].contains(&i) {
            continue;
        }
        if is_bit(i) {
            if k == MAX_ROW_VARS - 1 {
                return None;
            }
            others[k] = i;
            k += 1;
        } else if z.is_some() {
            return None;
        } else {
            z = Some(i);
        }
    }
    let z = z?;
    let has_z = |row: &[RowTerm]| row.iter().any(|(v, _, _)| *v == RowVar::Aux(z));
    if has_z(a) && has_z(b) {
        return None;
    }
    let slot = |v: &RowVar| match *v {
        RowVar::Aux(i) if i == z => SLOT_Z,
        RowVar::Aux(i) => others[..k].iter().position(|&o| o == i).unwrap_or(0) as u8,
        RowVar::One | RowVar::Input => SLOT_ONE,
    };
    let solved = if [a, b, c].iter().all(|r| r.iter().all(|t| t.2.is_some())) {
        let rows = [a, b, c].map(|r| {
            let mut out = [(0u8, 0i128); MAX_ROW_TERMS];
            for (o, (v, _, m)) in out.iter_mut().zip(r) {
                *o = (slot(v), i128::from(m.unwrap_or(0)));
            }
            (out, r.len())
        });
        fixes_a_bit(rows.each_ref().map(|(t, n)| &t[..*n]), k)
    } else {
        let rows = [a, b, c].map(|r| {
            let mut out = [(0u8, Scalar::ZERO); MAX_ROW_TERMS];
            for (o, (v, x, _)) in out.iter_mut().zip(r) {
                *o = (slot(v), *x);
            }
            (out, r.len())
        });
        fixes_a_bit(rows.each_ref().map(|(t, n)| &t[..*n]), k)
    };
    solved.then_some(z)
}

/// The arithmetic [`derived_bit`] solves its rows in: exact integers or the field.
trait Num:
    Copy + std::ops::Add<Output = Self> + std::ops::Sub<Output = Self> + std::ops::Mul<Output = Self>
{
    const ZERO_VALUE: Self;
    fn zero(self) -> bool;
}

impl Num for i128 {
    const ZERO_VALUE: Self = 0;
    fn zero(self) -> bool {
        self == 0
    }
}

impl Num for Scalar {
    const ZERO_VALUE: Self = <Scalar as Field>::ZERO;
    fn zero(self) -> bool {
        bool::from(self.is_zero())
    }
}

/// Whether A·B = C (terms by slot: `SLOT_Z`, `SLOT_ONE` or a known bit `0..k`) fixes `z` to 0 or
/// 1 for each of the `2^k` values of the known bits.
fn fixes_a_bit<N: Num>(rows: [&[(u8, N)]; 3], k: usize) -> bool {
    for mask in 0..1u32 << k {
        // (z's coefficient, the rest) of A, B and C at these values.
        let mut v = [(N::ZERO_VALUE, N::ZERO_VALUE); 3];
        for (m, row) in rows.iter().enumerate() {
            for &(slot, x) in *row {
                match slot {
                    SLOT_Z => v[m].0 = v[m].0 + x,
                    SLOT_ONE => v[m].1 = v[m].1 + x,
                    j if mask >> j & 1 == 1 => v[m].1 = v[m].1 + x,
                    _ => {}
                }
            }
        }
        // (α z + A')(β z + B') = γ z + C' with α β = 0: κ z + τ = 0.
        let kappa = v[0].0 * v[1].1 + v[1].0 * v[0].1 - v[2].0;
        let tau = v[0].1 * v[1].1 - v[2].1;
        if kappa.zero() || !(tau.zero() || (kappa + tau).zero()) {
            return false;
        }
    }
    true
}

/// The aux variable that the constraint `A · B = C` forces to be 0 or 1, if it is one of the two
/// boolean forms (see the [module docs](self)). Rows hold distinct variables (a linear
/// combination merges repeated ones); a term with a zero coefficient never makes a row boolean.
pub(crate) fn boolean_aux(a: &[RowTerm], b: &[RowTerm], c: &[RowTerm]) -> Option<usize> {
    let nz = |k: &Scalar| !bool::from(k.is_zero());
    match (a, b, c) {
        // k_a x · k_b x = k_c x with k_c = k_a k_b: k_a k_b x (x - 1) = 0.
        ([(RowVar::Aux(x), ka, _)], [(RowVar::Aux(y), kb, _)], [(RowVar::Aux(z), kc, _)]) => {
            (x == y && y == z && nz(ka) && nz(kb) && *ka * kb == *kc).then_some(*x)
        }
        // k x · d (1 - x) = 0, either way round.
        ([(RowVar::Aux(x), k, _)], pair @ [_, _], [])
        | (pair @ [_, _], [(RowVar::Aux(x), k, _)], []) => {
            (nz(k) && one_minus(pair, *x)).then_some(*x)
        }
        _ => None,
    }
}

/// Whether `pair` is `d (ONE - x)` with `d` non-zero, in either order.
fn one_minus(pair: &[RowTerm], x: usize) -> bool {
    match pair {
        [(RowVar::One, d, _), (RowVar::Aux(y), e, _)]
        | [(RowVar::Aux(y), e, _), (RowVar::One, d, _)]
            if *y == x =>
        {
            !bool::from(d.is_zero()) && *d + e == Scalar::ZERO
        }
        _ => false,
    }
}
