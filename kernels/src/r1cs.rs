//! Pre-compiled constraint systems: a circuit's A, B and C matrices recorded once per shape, so
//! a proof's synthesis computes only the witness and three sparse matrix-vector products.
//!
//! bellperson's prover (and [`crate::synth::ProvingCs`]) builds every linear combination of every
//! constraint and evaluates it against the assignment, for every proof. The matrices do not
//! depend on the witness (they are what the SRS was generated from), so this module splits that
//! work in two:
//!
//! 1. **Once per circuit shape**, [`record`] runs the circuit against a recording constraint
//!    system that never calls a witness closure and keeps each constraint's A, B and C rows
//!    (CSR over the inputs then the aux variables, coefficients as ids into a table of distinct
//!    values). [`R1csBuilder::write`] encodes it ([the format](#format)); [`R1cs::from_bytes`]
//!    checks an encoding and serves it from any bytes (a file read into a sealed memfd, shared by
//!    every synthesis worker).
//! 2. **Per proof**, [`synthesize_compiled`] runs the circuit against [`WitnessCs`]: `alloc`
//!    computes and stores the value, `enforce` only counts (its closures are never called, so no
//!    linear combination is built), then [`R1cs::evaluate`] writes `a = A·w`, `b = B·w`,
//!    `c = C·w` straight into the sink in parallel (rayon, rows in chunks), and the density
//!    bitmaps, which depend on the shape alone, are copied from the matrices.
//!
//! The result is byte for byte what [`crate::synth::synthesize`] writes: field arithmetic is
//! exact, so the order of a row's terms does not matter; terms with a zero coefficient are not
//! recorded, as bellperson's `eval_with_trackers` skips them (they mark no density); the
//! one-per-input constraints `input_i * 0 = 0` are rows of the matrices like any other.
//!
//! A circuit whose witness pass allocates or enforces another number of variables or
//! constraints than its matrices hold is refused ([`ErrorKind::R1csMismatch`]): the matrices are
//! of another shape.
//!
//! # Format
//!
//! Little-endian; a 128-byte header of u64 words, then sections each starting on a 64-byte
//! boundary:
//!
//! | word | field |
//! |---|---|
//! | 0 | magic `SPR1CS\0\0` |
//! | 1 | format version (low 32 bits) |
//! | 2 | circuit id |
//! | 3, 4, 5 | inputs (ONE included), aux variables, constraints (without the input ones) |
//! | 6 | distinct coefficients |
//! | 7, 8, 9 | non-zero terms of A, B, C |
//! | 10 | xxh3-64 of every byte after the header |
//!
//! Sections: the coefficient table (32 bytes each, canonical little-endian; entry 0 is one and
//! entry 1 minus one), then for A, B and C the row starts (`n + 1` u64, `n` = constraints +
//! inputs) and the terms (u64 each: column in the low 32 bits, coefficient id in the high 32;
//! columns `0..inputs` are inputs, the rest aux).

use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use crate::types::{CircuitShape, DensityBits};
use crate::{Error, ErrorKind};
use bits::{new_bit, small_int, RowVar, MAX_ROW_TERMS};

mod record;
mod witness;

pub(crate) mod bits;

pub use record::{measure, record, AlignedBytes, Measure, R1csBuilder};
pub use witness::{synthesize_compiled, synthesize_witness, WitnessCs};

/// The first header word.
pub const MAGIC: [u8; 8] = *b"SPR1CS\0\0";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;
/// Header bytes.
pub const HEADER_BYTES: usize = 128;
/// Rows per parallel evaluation task.
const ROWS_PER_TASK: usize = 1 << 14;

const ID_ONE: u32 = 0;
const ID_MINUS_ONE: u32 = 1;

/// Bytes padding `len` to a multiple of 64.
fn pad64(len: usize) -> usize {
    (64 - len % 64) % 64
}

/// Where each section of an encoding starts, from its counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    coeffs: usize,
    /// (row starts, terms) of A, B, C.
    matrices: [(usize, usize); 3],
    total: usize,
}

impl Layout {
    fn for_counts(shape: CircuitShape, coeffs: u64, nnz: [u64; 3]) -> Layout {
        let up = |x: usize| x + pad64(x);
        let mut at = HEADER_BYTES;
        let coeff_at = at;
        at += up(coeffs as usize * 32);
        let rows = shape.n() + 1;
        let matrices = nnz.map(|nnz| {
            let starts = at;
            at += up(rows * 8);
            let terms = at;
            at += up(nnz as usize * 8);
            (starts, terms)
        });
        Layout {
            coeffs: coeff_at,
            matrices,
            total: at,
        }
    }
}

/// One matrix of a checked encoding.
#[derive(Clone, Copy, Debug)]
struct MatrixRef<'a> {
    row_start: &'a [u64],
    terms: &'a [u64],
}

/// Checked matrices served from bytes the caller owns (a sealed memfd mapping, a file read into
/// memory, an [`AlignedBytes`]), with the coefficient table and the density bitmaps derived
/// from them.
pub struct R1cs {
    bytes: Box<dyn AsRef<[u8]> + Send + Sync>,
    circuit_id: u64,
    shape: CircuitShape,
    layout: Layout,
    nnz: [u64; 3],
    coeffs: Vec<Scalar>,
    densities: [DensityBits; 3],
}

impl std::fmt::Debug for R1cs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("R1cs")
            .field("circuit_id", &format_args!("{:#x}", self.circuit_id))
            .field("shape", &self.shape)
            .field("nnz", &self.nnz)
            .field("coeffs", &self.coeffs.len())
            .finish()
    }
}

fn format_error(what: impl Into<String>) -> Error {
    ErrorKind::R1csFormat(what.into()).into()
}

fn words<'a>(bytes: &'a [u8], at: usize, count: usize, what: &str) -> Result<&'a [u64], Error> {
    let end = count
        .checked_mul(8)
        .and_then(|b| b.checked_add(at))
        .filter(|&end| end <= bytes.len())
        .ok_or_else(|| format_error(format!("{what} runs past the end")))?;
    let section = &bytes[at..end];
    // SAFETY: every bit pattern is a valid u64; `align_to` only yields the aligned middle part,
    // and we refuse anything but a fully aligned section below.
    let (head, middle, tail) = unsafe { section.align_to::<u64>() };
    if !head.is_empty() || !tail.is_empty() {
        return Err(ErrorKind::Misaligned(section.as_ptr() as usize % 8).into());
    }
    Ok(middle)
}

impl R1cs {
    /// [`R1cs::from_bytes`] of an encoding that must have been made for circuit `circuit_id`
    /// (a shared memfd or a cache file named after it): another circuit's is refused.
    pub fn from_bytes_of(
        bytes: Box<dyn AsRef<[u8]> + Send + Sync>,
        circuit_id: u64,
    ) -> Result<R1cs, Error> {
        let r1cs = R1cs::from_bytes(bytes)?;
        if r1cs.circuit_id() != circuit_id {
            return Err(format_error(format!(
                "made for circuit id {:#x}, not {circuit_id:#x}",
                r1cs.circuit_id()
            )));
        }
        Ok(r1cs)
    }

    /// Checks an encoding (magic, version, counts, that the length is what they make, the
    /// checksum, every row start and term, every coefficient canonical) and serves it. Costs one
    /// pass over the bytes; the density bitmaps are computed from the matrices here.
    pub fn from_bytes(bytes: Box<dyn AsRef<[u8]> + Send + Sync>) -> Result<R1cs, Error> {
        let b = (*bytes).as_ref();
        if b.len() < HEADER_BYTES {
            return Err(format_error(format!(
                "{} bytes are shorter than the {HEADER_BYTES}-byte header",
                b.len()
            )));
        }
        let header = words(b, 0, HEADER_BYTES / 8, "the header")?;
        if header[0].to_le_bytes() != MAGIC {
            return Err(format_error(
                "bad magic: not a pre-compiled constraint system",
            ));
        }
        let version = header[1] as u32;
        if version != VERSION {
            return Err(format_error(format!(
                "format version {version} (this build reads {VERSION})"
            )));
        }
        let count = |i: usize, what: &str| {
            usize::try_from(header[i])
                .ok()
                .filter(|&v| v < 1 << 40)
                .ok_or_else(|| format_error(format!("{what} {} is absurd", header[i])))
        };
        let shape = CircuitShape {
            inputs: count(3, "inputs")?,
            aux: count(4, "aux")?,
            constraints: count(5, "constraints")?,
        };
        if shape.inputs == 0 {
            return Err(format_error("no input (ONE is always one)"));
        }
        let vars = shape.inputs + shape.aux;
        if vars > u32::MAX as usize {
            return Err(format_error(format!(
                "{vars} variables exceed 32-bit columns"
            )));
        }
        let n_coeffs = count(6, "coefficients")?;
        if n_coeffs < 2 {
            return Err(format_error(
                "the coefficient table lacks one and minus one",
            ));
        }
        let nnz = [
            count(7, "A terms")?,
            count(8, "B terms")?,
            count(9, "C terms")?,
        ]
        .map(|v| v as u64);
        let layout = Layout::for_counts(shape, n_coeffs as u64, nnz);
        if b.len() != layout.total {
            return Err(format_error(format!(
                "{} bytes, but its counts make {}",
                b.len(),
                layout.total
            )));
        }
        let checksum = xxhash_rust::xxh3::xxh3_64(&b[HEADER_BYTES..]);
        if checksum != header[10] {
            return Err(format_error(format!(
                "checksum {checksum:#018x} is not the header's {:#018x} (damaged)",
                header[10]
            )));
        }
        let mut coeffs = Vec::with_capacity(n_coeffs);
        for (i, chunk) in b[layout.coeffs..layout.coeffs + 32 * n_coeffs]
            .chunks_exact(32)
            .enumerate()
        {
            let repr: [u8; 32] = chunk.try_into().expect("32-byte chunks");
            let c = Option::<Scalar>::from(Scalar::from_repr(repr))
                .ok_or_else(|| format_error(format!("coefficient {i} is not a field element")))?;
            coeffs.push(c);
        }
        if coeffs[ID_ONE as usize] != Scalar::ONE || coeffs[ID_MINUS_ONE as usize] != -Scalar::ONE {
            return Err(format_error(
                "coefficients 0 and 1 are not one and minus one",
            ));
        }
        let circuit_id = header[2];
        let mut r1cs = R1cs {
            bytes,
            circuit_id,
            shape,
            layout,
            nnz,
            coeffs,
            densities: Default::default(),
        };
        for (m, name) in ["A", "B", "C"].into_iter().enumerate() {
            r1cs.check_matrix(m, name)?;
        }
        r1cs.densities = r1cs.compute_densities();
        Ok(r1cs)
    }

    fn matrix(&self, m: usize) -> MatrixRef<'_> {
        let b = (*self.bytes).as_ref();
        let (starts, terms) = self.layout.matrices[m];
        // Checked in `from_bytes`: in bounds and aligned.
        MatrixRef {
            row_start: words(b, starts, self.shape.n() + 1, "row starts").expect("checked"),
            terms: words(b, terms, self.nnz[m] as usize, "terms").expect("checked"),
        }
    }

    fn check_matrix(&self, m: usize, name: &str) -> Result<(), Error> {
        let b = (*self.bytes).as_ref();
        let (starts, terms) = self.layout.matrices[m];
        let row_start = words(b, starts, self.shape.n() + 1, "row starts")?;
        let terms = words(b, terms, self.nnz[m] as usize, "terms")?;
        if row_start[0] != 0 || row_start[self.shape.n()] != terms.len() as u64 {
            return Err(format_error(format!(
                "{name}'s rows do not cover its {} terms",
                terms.len()
            )));
        }
        if let Some(i) = row_start.windows(2).position(|w| w[0] > w[1]) {
            return Err(format_error(format!(
                "{name}'s row {i} ends before it starts"
            )));
        }
        let vars = (self.shape.inputs + self.shape.aux) as u64;
        let n_coeffs = self.coeffs.len() as u64;
        let bad = terms
            .par_iter()
            .position_any(|&t| t & 0xffff_ffff >= vars || t >> 32 >= n_coeffs);
        if let Some(i) = bad {
            return Err(format_error(format!(
                "{name}'s term {i} names column {} or coefficient {} (the circuit has {vars} \
                 variables and {n_coeffs} coefficients)",
                terms[i] & 0xffff_ffff,
                terms[i] >> 32
            )));
        }
        Ok(())
    }

    /// bellperson's densities: aux variables used in A, inputs and aux variables used in B.
    fn compute_densities(&self) -> [DensityBits; 3] {
        let k = self.shape.inputs;
        let mark = |bits: &mut DensityBits, i: usize| {
            let (w, b) = (i / 64, i % 64);
            if bits.words[w] >> b & 1 == 0 {
                bits.words[w] |= 1 << b;
                bits.popcount += 1;
            }
        };
        let empty = |len: usize| DensityBits {
            words: vec![0; len.div_ceil(64)],
            bit_len: len,
            popcount: 0,
        };
        let (mut a_aux, mut b_input, mut b_aux) =
            (empty(self.shape.aux), empty(k), empty(self.shape.aux));
        for &t in self.matrix(0).terms {
            let col = (t & 0xffff_ffff) as usize;
            if col >= k {
                mark(&mut a_aux, col - k);
            }
        }
        for &t in self.matrix(1).terms {
            let col = (t & 0xffff_ffff) as usize;
            if col < k {
                mark(&mut b_input, col);
            } else {
                mark(&mut b_aux, col - k);
            }
        }
        [a_aux, b_input, b_aux]
    }

    /// The circuit id the encoding was made for.
    pub fn circuit_id(&self) -> u64 {
        self.circuit_id
    }

    /// The shape.
    pub fn shape(&self) -> CircuitShape {
        self.shape
    }

    /// Bytes of the encoding.
    pub fn bytes(&self) -> u64 {
        self.layout.total as u64
    }

    /// Non-zero terms of A, B and C.
    pub fn nnz(&self) -> [u64; 3] {
        self.nnz
    }

    /// Distinct coefficients (one and minus one included).
    pub fn coefficients(&self) -> usize {
        self.coeffs.len()
    }

    /// The density bitmaps: A over aux, B over inputs, B over aux.
    pub fn densities(&self) -> &[DensityBits; 3] {
        &self.densities
    }

    /// Matrix `m` (0 A, 1 B, 2 C) as stored: `n + 1` row offsets into its terms, and the terms,
    /// each its column (low 32 bits: inputs first, then aux) and its coefficient id (high 32
    /// bits, into [`R1cs::coefficient_table`]). For a prover that evaluates it elsewhere (the
    /// `gpu` backend's device). `None` past C.
    pub fn csr(&self, m: usize) -> Option<(&[u64], &[u64])> {
        (m < 3).then(|| {
            let r = self.matrix(m);
            (r.row_start, r.terms)
        })
    }

    /// The coefficients the terms' ids index: id 0 is 1, id 1 is -1.
    pub fn coefficient_table(&self) -> &[Scalar] {
        &self.coeffs
    }

    /// The aux variables the rows show to be bits ([`crate::witness`]: the boolean forms, and
    /// variables a row fixes to 0 or 1 from bits shown before it), one bit per aux variable (u64
    /// words, least significant bit first). One pass over the rows, in order (each row sees the
    /// bits of the rows before it, as [`measure`] does).
    pub fn boolean_aux(&self) -> Vec<u64> {
        let k = self.shape.inputs;
        let mut words = vec![0u64; self.shape.aux.div_ceil(64)];
        let matrices = [self.matrix(0), self.matrix(1), self.matrix(2)];
        let coeffs = &self.coeffs[..];
        let small: Vec<Option<i64>> = coeffs.iter().map(small_int).collect();
        let var = |t: u64| {
            let col = (t & 0xffff_ffff) as usize;
            let v = match col {
                0 => RowVar::One,
                c if c < k => RowVar::Input,
                c => RowVar::Aux(c - k),
            };
            // Coefficient ids were checked when the encoding was opened.
            let id = (t >> 32) as usize;
            (v, coeffs[id], small[id])
        };
        let mut rows = [[(RowVar::One, Scalar::ZERO, None); MAX_ROW_TERMS]; 3];
        for row in 0..self.shape.n() {
            let terms = matrices
                .each_ref()
                .map(|m| &m.terms[m.row_start[row] as usize..m.row_start[row + 1] as usize]);
            if terms.iter().any(|t| t.len() > MAX_ROW_TERMS) {
                continue;
            }
            for (out, t) in rows.iter_mut().zip(&terms) {
                for (o, &t) in out.iter_mut().zip(*t) {
                    *o = var(t);
                }
            }
            let [a, b, c] = [0, 1, 2].map(|m| &rows[m][..terms[m].len()]);
            if let Some(x) = new_bit(a, b, c, &words) {
                words[x / 64] |= 1 << (x % 64);
            }
        }
        words
    }

    /// Computes `a = A·w`, `b = B·w`, `c = C·w` for `w = (input, aux)`, rows in parallel on the
    /// current rayon pool. Every length must be the shape's.
    pub fn evaluate(
        &self,
        input: &[Scalar],
        aux: &[Scalar],
        a: &mut [Scalar],
        b: &mut [Scalar],
        c: &mut [Scalar],
    ) -> Result<(), Error> {
        let n = self.shape.n();
        for (what, expected, found) in [
            ("inputs", self.shape.inputs, input.len()),
            ("aux variables", self.shape.aux, aux.len()),
            ("a", n, a.len()),
            ("b", n, b.len()),
            ("c", n, c.len()),
        ] {
            if found != expected {
                return Err(Error::shape(what, expected, found));
            }
        }
        let matrices = [self.matrix(0), self.matrix(1), self.matrix(2)];
        let coeffs = &self.coeffs[..];
        a.par_chunks_mut(ROWS_PER_TASK)
            .zip(b.par_chunks_mut(ROWS_PER_TASK))
            .zip(c.par_chunks_mut(ROWS_PER_TASK))
            .enumerate()
            .for_each(|(task, ((a, b), c))| {
                let first = task * ROWS_PER_TASK;
                for (out, m) in [a, b, c].into_iter().zip(&matrices) {
                    for (i, o) in out.iter_mut().enumerate() {
                        *o = eval_row(m, first + i, coeffs, input, aux);
                    }
                }
            });
        Ok(())
    }
}

/// Row `row` of `m` at `w = (input, aux)`. Columns and coefficient ids were checked when the
/// encoding was opened, so the indexing cannot fail.
#[inline]
fn eval_row(
    m: &MatrixRef<'_>,
    row: usize,
    coeffs: &[Scalar],
    input: &[Scalar],
    aux: &[Scalar],
) -> Scalar {
    let (lo, hi) = (m.row_start[row] as usize, m.row_start[row + 1] as usize);
    let k = input.len();
    let mut acc = Scalar::ZERO;
    for &t in &m.terms[lo..hi] {
        let col = (t & 0xffff_ffff) as usize;
        let v = if col < k { &input[col] } else { &aux[col - k] };
        match (t >> 32) as u32 {
            ID_ONE => acc += v,
            ID_MINUS_ONE => acc -= v,
            // Most witness values are bits (SHA-256 is built of them): a coefficient times 0 or
            // 1 needs no multiplication.
            id => {
                if *v == Scalar::ONE {
                    acc += &coeffs[id as usize];
                } else if !bool::from(v.is_zero()) {
                    acc += *v * coeffs[id as usize];
                }
            }
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{synthesize, VecSink};

    fn spec(s: &str) -> crate::circuits::CircuitSpec {
        s.parse().unwrap()
    }

    fn compiled(s: &str) -> R1cs {
        let spec = spec(s);
        let builder = record(spec.circuit(None), None).unwrap();
        assert_eq!(builder.shape(), spec.shape().unwrap());
        R1cs::from_bytes(Box::new(builder.encode(spec.circuit_id()))).unwrap()
    }

    #[test]
    fn a_measure_agrees_with_the_recorded_matrices_and_the_parameters() {
        for s in ["sha-chain:1", "pubinputs:5", "bits:130"] {
            let r1cs = compiled(s);
            let m = measure(spec(s).circuit(None)).unwrap();
            assert_eq!(m.shape, r1cs.shape(), "{s}");
            assert_eq!(m.nnz, r1cs.nnz(), "{s}");
            assert_eq!(m.coefficients, r1cs.coefficients(), "{s}");
            assert_eq!(m.matrix_bytes(), r1cs.bytes(), "{s}");
            let d = r1cs.densities();
            assert_eq!(
                [m.a_aux, m.b_input, m.b_aux],
                d.each_ref().map(|d| d.popcount),
                "{s}"
            );
        }
        for s in ["pubinputs:5", "bits:130"] {
            let params =
                crate::paramgen::generate_parameters_seeded(spec(s).circuit(None), 3, &|_| {})
                    .unwrap();
            let m = measure(spec(s).circuit(None)).unwrap();
            assert_eq!(m.srs_lengths(), crate::srs::SrsLengths::of(&params), "{s}");
        }
    }

    #[test]
    fn compiled_synthesis_equals_the_full_one_byte_for_byte() {
        for s in ["sha-chain:1", "pubinputs:5", "bits:130"] {
            let r1cs = compiled(s);
            for seed in [1, 2] {
                let c = spec(s).circuit(Some(seed));
                let full = synthesize(c.clone(), VecSink::new()).unwrap().finish();
                let fast = synthesize_compiled(c, VecSink::new(), &r1cs)
                    .unwrap()
                    .finish();
                assert_eq!(fast, full, "{s} seed {seed}");
            }
        }
    }

    #[test]
    fn a_circuit_of_another_shape_is_refused() {
        let r1cs = compiled("pubinputs:5");
        let e = synthesize_compiled(spec("pubinputs:6").circuit(Some(1)), VecSink::new(), &r1cs)
            .unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::R1csMismatch { .. }), "{e}");
        assert!(e.to_string().contains("pre-compiled"), "{e}");
    }

    #[test]
    fn the_recording_stops_past_its_budget() {
        let e = record(spec("sha-chain:1").circuit(None), Some(100_000)).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::R1csOverBudget { .. }), "{e}");
        let full = record(spec("sha-chain:1").circuit(None), None).unwrap();
        assert!(full.encoded_bytes() > 100_000);
    }

    #[test]
    fn damaged_encodings_are_refused_with_the_reason() {
        let spec = spec("pubinputs:3");
        let good = record(spec.circuit(None), None)
            .unwrap()
            .encode(spec.circuit_id());
        let bytes = good.as_ref().to_vec();
        let check = |b: &[u8], needle: &str| {
            let e = R1cs::from_bytes(Box::new(AlignedBytes::from_bytes(b))).unwrap_err();
            assert!(e.to_string().contains(needle), "{e} (wanted `{needle}`)");
        };
        check(&bytes[..100], "shorter than");
        check(&bytes[..bytes.len() - 64], "counts make");
        let mut b = bytes.clone();
        b[0] ^= 1;
        check(&b, "bad magic");
        let mut b = bytes.clone();
        b[8] = 9;
        check(&b, "format version 9");
        let mut b = bytes.clone();
        *b.last_mut().unwrap() ^= 0x80;
        check(&b, "checksum");
        // A term naming a column past the variables, with the checksum made to match.
        let mut b = bytes.clone();
        let layout = Layout::for_counts(
            spec.shape().unwrap(),
            u64::from_le_bytes(b[48..56].try_into().unwrap()),
            [7, 8, 9].map(|i| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap())),
        );
        let at = layout.matrices[0].1;
        b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let sum = xxhash_rust::xxh3::xxh3_64(&b[HEADER_BYTES..]);
        b[80..88].copy_from_slice(&sum.to_le_bytes());
        check(&b, "names column");
        // Another circuit's id is refused, naming both.
        let e = R1cs::from_bytes_of(Box::new(good.clone()), spec.circuit_id() ^ 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("made for circuit id"), "{e}");
        assert!(
            R1cs::from_bytes_of(Box::new(good.clone()), spec.circuit_id()).is_ok(),
            "its own id"
        );
        // And the good one opens, with the shape and densities of the full synthesis.
        let r1cs = R1cs::from_bytes(Box::new(good)).unwrap();
        let full = synthesize(spec.circuit(Some(3)), VecSink::new())
            .unwrap()
            .finish();
        assert_eq!(r1cs.shape(), full.shape());
        assert_eq!(r1cs.densities()[0], full.a_aux_density);
        assert_eq!(r1cs.densities()[1], full.b_input_density);
        assert_eq!(r1cs.densities()[2], full.b_aux_density);
        assert_eq!(r1cs.circuit_id(), spec.circuit_id());
    }

    /// Random damage with a matching checksum (so the structure checks, not the checksum, must
    /// catch it): an error or a usable system, never a panic, and a usable one evaluates.
    #[test]
    fn damaged_encodings_with_valid_checksums_never_panic() {
        use rand_core::{RngCore, SeedableRng};
        let spec = spec("pubinputs:4");
        let good = record(spec.circuit(None), None)
            .unwrap()
            .encode(spec.circuit_id());
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        let shape = spec.shape().unwrap();
        let witness = synthesize(spec.circuit(Some(1)), VecSink::new())
            .unwrap()
            .finish();
        let (mut opened, mut refused) = (0, 0);
        for _ in 0..400 {
            let mut b = good.as_ref().to_vec();
            let at = HEADER_BYTES + rng.next_u64() as usize % (b.len() - HEADER_BYTES);
            b[at] ^= 1 << (rng.next_u32() % 8);
            if rng.next_u32() % 4 == 0 {
                // Sometimes a header count too.
                let word = 3 + rng.next_u32() as usize % 7;
                b[8 * word] ^= 1 << (rng.next_u32() % 8);
            }
            let sum = xxhash_rust::xxh3::xxh3_64(&b[HEADER_BYTES..]);
            b[80..88].copy_from_slice(&sum.to_le_bytes());
            match R1cs::from_bytes(Box::new(AlignedBytes::from_bytes(&b))) {
                Err(_) => refused += 1,
                Ok(r) => {
                    opened += 1;
                    if r.shape() == shape {
                        let n = shape.n();
                        let (mut x, mut y, mut z) = (
                            vec![Scalar::ZERO; n],
                            vec![Scalar::ZERO; n],
                            vec![Scalar::ZERO; n],
                        );
                        r.evaluate(&witness.input, &witness.aux, &mut x, &mut y, &mut z)
                            .unwrap();
                    }
                }
            }
        }
        assert!(
            refused > 0 && opened > 0,
            "opened {opened}, refused {refused}"
        );
    }

    #[test]
    fn write_and_encoded_bytes_agree() {
        let spec = spec("sha-chain:1");
        let b = record(spec.circuit(None), None).unwrap();
        let mut out = Vec::new();
        b.write(spec.circuit_id(), &mut out).unwrap();
        assert_eq!(out.len() as u64, b.encoded_bytes());
        assert_eq!(out.len() % 64, 0);
    }
}
