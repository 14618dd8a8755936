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

use std::io::{self, Write};

use bellpepper_core::{
    Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable,
};
use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use crate::synth::{AssignmentSink, CircuitShape, DensityBits};
use crate::witness::{new_bit, small_int, RowTerm, RowVar, MAX_ROW_TERMS};
use crate::{Error, ErrorKind};

/// The first header word.
pub const MAGIC: [u8; 8] = *b"SPR1CS\0\0";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;
/// Header bytes.
pub const HEADER_BYTES: usize = 128;
/// Rows per parallel evaluation task.
const ROWS_PER_TASK: usize = 1 << 14;

/// While recording: the column is an aux index (placed after the inputs at the end).
const AUX_MARK: u32 = 1 << 31;

const ID_ONE: u32 = 0;
const ID_MINUS_ONE: u32 = 1;

/// One matrix in compressed sparse rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Matrix {
    /// Row `i` is `terms[row_start[i]..row_start[i + 1]]`.
    row_start: Vec<u64>,
    /// Column in the low 32 bits, coefficient id in the high 32.
    terms: Vec<u64>,
}

impl Matrix {
    fn new() -> Self {
        Matrix {
            row_start: vec![0],
            terms: Vec::new(),
        }
    }

    fn end_row(&mut self) {
        self.row_start.push(self.terms.len() as u64);
    }

    fn bytes(&self) -> u64 {
        8 * (self.row_start.len() + self.terms.len()) as u64
    }
}

fn term(column: u32, coeff: u32) -> u64 {
    u64::from(column) | u64::from(coeff) << 32
}

/// The matrices of one circuit as [`record`] collects them, before they are encoded.
#[derive(Clone, Debug)]
pub struct R1csBuilder {
    shape: CircuitShape,
    coeffs: Vec<Scalar>,
    matrices: [Matrix; 3],
}

impl R1csBuilder {
    /// The recorded shape.
    pub fn shape(&self) -> CircuitShape {
        self.shape
    }

    /// Bytes of the encoding ([`R1csBuilder::write`]).
    pub fn encoded_bytes(&self) -> u64 {
        let layout = Layout::for_counts(
            self.shape,
            self.coeffs.len() as u64,
            self.matrices.each_ref().map(|m| m.terms.len() as u64),
        );
        layout.total as u64
    }

    /// Writes the encoding of these matrices for circuit `circuit_id` (see the [module
    /// docs](self#format)).
    pub fn write(&self, circuit_id: u64, out: &mut dyn Write) -> io::Result<()> {
        let nnz = self.matrices.each_ref().map(|m| m.terms.len() as u64);
        let layout = Layout::for_counts(self.shape, self.coeffs.len() as u64, nnz);
        let coeff_bytes: Vec<u8> = self.coeffs.iter().flat_map(|c| c.to_repr()).collect();
        // The body's sections, in order, each followed by its padding.
        let sections: Vec<&[u8]> = std::iter::once(&coeff_bytes[..])
            .chain(
                self.matrices
                    .iter()
                    .flat_map(|m| [as_bytes(&m.row_start), as_bytes(&m.terms)]),
            )
            .collect();
        let zeros = [0u8; 64];
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        for s in &sections {
            hasher.update(s);
            hasher.update(&zeros[..pad64(s.len())]);
        }
        let mut header = [0u64; HEADER_BYTES / 8];
        header[0] = u64::from_le_bytes(MAGIC);
        header[1] = u64::from(VERSION);
        header[2] = circuit_id;
        header[3] = self.shape.inputs as u64;
        header[4] = self.shape.aux as u64;
        header[5] = self.shape.constraints as u64;
        header[6] = self.coeffs.len() as u64;
        header[7..10].copy_from_slice(&nnz);
        header[10] = hasher.digest();
        out.write_all(as_bytes(&header))?;
        for s in &sections {
            out.write_all(s)?;
            out.write_all(&zeros[..pad64(s.len())])?;
        }
        debug_assert_eq!(
            HEADER_BYTES
                + sections
                    .iter()
                    .map(|s| s.len() + pad64(s.len()))
                    .sum::<usize>(),
            layout.total
        );
        Ok(())
    }

    /// The encoding in memory, ready for [`R1cs::from_bytes`].
    pub fn encode(&self, circuit_id: u64) -> AlignedBytes {
        let mut bytes = Vec::with_capacity(self.encoded_bytes() as usize);
        self.write(circuit_id, &mut bytes)
            .expect("writing into a Vec cannot fail");
        AlignedBytes::from_bytes(&bytes)
    }
}

/// Bytes padding `len` to a multiple of 64.
fn pad64(len: usize) -> usize {
    (64 - len % 64) % 64
}

/// The bytes of a slice of plain integers.
fn as_bytes<T: Copy + Into<u64>>(words: &[T]) -> &[u8] {
    // SAFETY: `T` is a primitive integer (u32 or u64: `Into<u64>` is implemented for no type with
    // padding or invalid bit patterns among those used here); any initialised integer memory is
    // valid as bytes, the length is the slice's size in bytes, and u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), std::mem::size_of_val(words)) }
}

/// Bytes with the 8-byte alignment the matrices' sections need (a `Vec<u8>` has none).
#[derive(Clone, Debug, Default)]
pub struct AlignedBytes {
    words: Vec<u64>,
    len: usize,
}

impl AlignedBytes {
    /// A copy of `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        for (w, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            *w = u64::from_le_bytes(b);
        }
        AlignedBytes {
            words,
            len: bytes.len(),
        }
    }
}

impl AsRef<[u8]> for AlignedBytes {
    fn as_ref(&self) -> &[u8] {
        &as_bytes(&self.words)[..self.len]
    }
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

/// Records the matrices of `circuit` (with bellperson's prover sequence: `ONE` first, the
/// circuit, one `input_i * 0 = 0` constraint per input). No witness closure is called, so a
/// circuit without a witness (parameter generation's blank circuit) records the same matrices
/// as one with a witness.
///
/// `limit_bytes` bounds the encoding: past it the recording stops with
/// [`ErrorKind::R1csOverBudget`] (the caller falls back to the full synthesis).
pub fn record<C: Circuit<Scalar>>(
    circuit: C,
    limit_bytes: Option<u64>,
) -> Result<R1csBuilder, Error> {
    let (shape, mut rec) = walk(circuit, Recorder::new(limit_bytes))?;
    if shape.inputs >= AUX_MARK as usize || shape.inputs + shape.aux > u32::MAX as usize {
        return Err(ErrorKind::R1csFormat(format!(
            "{} inputs and {} aux variables do not fit 32-bit columns",
            shape.inputs, shape.aux
        ))
        .into());
    }
    // Aux columns go after the final inputs.
    let inputs = shape.inputs as u64;
    for m in &mut rec.matrices {
        m.terms.par_iter_mut().for_each(|t| {
            if *t as u32 & AUX_MARK != 0 {
                *t = (*t & !u64::from(AUX_MARK)) + inputs;
            }
        });
    }
    Ok(R1csBuilder {
        shape,
        coeffs: rec.coeffs,
        matrices: rec.matrices,
    })
}

/// What [`measure`] finds in a circuit: its shape, its matrices' sizes and the densities the SRS
/// lengths follow, without keeping the matrices (a 32 GiB-sector PoRep partition's would take
/// tens of GiB; this takes a few bits per variable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Measure {
    /// The shape (inputs with `ONE`, aux, constraints without the input constraints).
    pub shape: CircuitShape,
    /// Non-zero terms of A, B and C, the input constraints included (as [`R1cs::nnz`]).
    pub nnz: [u64; 3],
    /// Entries of the coefficient table ([`R1cs::coefficients`]): 1, -1 and every other
    /// distinct coefficient.
    pub coefficients: usize,
    /// Aux variables that appear in A.
    pub a_aux: usize,
    /// Inputs that appear in B.
    pub b_input: usize,
    /// Aux variables that appear in B.
    pub b_aux: usize,
    /// Aux variables the rows show to be bits (`(1 - x)·x = 0`, `x·x = x`, or fixed to 0 or 1 by
    /// a row of bits shown before it: [`crate::witness`]): a witness-only slot packs them as
    /// bits.
    pub bit_aux: usize,
}

impl Measure {
    /// Bytes of the pre-compiled matrices' encoding ([`R1cs::bytes`]).
    pub fn matrix_bytes(&self) -> u64 {
        Layout::for_counts(self.shape, self.coefficients as u64, self.nnz).total as u64
    }

    /// The lengths of this circuit's Groth16 parameters (bellperson's: A holds every input and
    /// the aux used in A; B the inputs and aux used in B, in G1 and in G2).
    pub fn srs_lengths(&self) -> crate::srs::SrsLengths {
        crate::srs::SrsLengths {
            ic: self.shape.inputs,
            h: self.shape.domain_size() - 1,
            l: self.shape.aux,
            a: self.shape.inputs + self.a_aux,
            b_g1: self.b_input + self.b_aux,
            b_g2: self.b_input + self.b_aux,
        }
    }

    /// Aux variables a witness-only slot keeps as field elements (the others are bits).
    pub fn non_bit_aux(&self) -> usize {
        self.shape.aux - self.bit_aux
    }
}

/// Measures `circuit` (its blank form will do: no witness closure is called) with the prover's
/// sequence, as [`record`] does, counting instead of keeping: the terms per matrix, the distinct
/// coefficients, which variables A and B use and which aux variables the rows show to be bits
/// (the same pass as [`crate::witness::WitnessLayout::of`] makes over recorded matrices).
pub fn measure<C: Circuit<Scalar>>(circuit: C) -> Result<Measure, Error> {
    let (shape, counter) = walk(circuit, Counter::default())?;
    let ones = |bits: &[u64]| bits.iter().map(|w| w.count_ones() as usize).sum();
    Ok(Measure {
        shape,
        nnz: counter.nnz,
        coefficients: 2 + counter.coeffs.len(),
        a_aux: ones(&counter.a_aux),
        b_input: ones(&counter.b_input),
        b_aux: ones(&counter.b_aux),
        bit_aux: ones(&counter.bit_aux),
    })
}

/// Runs `circuit` with the prover's sequence against a [`WalkCs`] feeding `sink`, and returns
/// the shape it found with the sink.
fn walk<C: Circuit<Scalar>, S: RowSink>(circuit: C, sink: S) -> Result<(CircuitShape, S), Error> {
    let mut cs = WalkCs {
        inputs: 0,
        aux: 0,
        constraints: 0,
        sink,
        error: None,
    };
    let run = (|| {
        cs.alloc_input(|| "", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut cs)?;
        for i in 0..cs.inputs {
            cs.enforce(|| "", |lc| lc + Variable(Index::Input(i)), |lc| lc, |lc| lc);
        }
        Ok::<(), SynthesisError>(())
    })();
    if let Some(e) = cs.error.take() {
        return Err(e);
    }
    run?;
    let shape = CircuitShape {
        inputs: cs.inputs,
        aux: cs.aux,
        constraints: cs.constraints - cs.inputs,
    };
    if shape.log_domain_size() >= Scalar::S {
        return Err(SynthesisError::PolynomialDegreeTooLarge.into());
    }
    Ok((shape, cs.sink))
}

/// A column of a constraint's row: an input or an aux variable (by its allocation index).
#[derive(Clone, Copy)]
enum Column {
    Input(usize),
    Aux(usize),
}

/// What [`WalkCs`] feeds each non-zero term of each row to: [`Recorder`] keeps the matrices,
/// [`Counter`] only counts.
trait RowSink: Send {
    /// Term `coeff · column` of matrix `m`'s current row (`coeff` is non-zero, `column` in range).
    fn term(&mut self, m: usize, column: Column, coeff: &Scalar) -> Result<(), Error>;
    /// Matrix `m`'s current row is complete.
    fn end_row(&mut self, _m: usize) {}
    /// A constraint is complete (`constraints` so far, this one included).
    fn end_constraint(&mut self, _constraints: usize) -> Result<(), Error> {
        Ok(())
    }
}

/// A constraint system that allocates indices, calls no witness closure and walks each
/// constraint's linear combinations into a [`RowSink`].
struct WalkCs<S> {
    inputs: usize,
    aux: usize,
    constraints: usize,
    sink: S,
    /// The first error; every later call fails fast.
    error: Option<Error>,
}

impl<S: RowSink> WalkCs<S> {
    fn row(&mut self, m: usize, lc: &LinearCombination<Scalar>) -> Result<(), Error> {
        for (&i, coeff) in lc.iter_inputs() {
            if coeff.is_zero_vartime() {
                continue;
            }
            if i >= self.inputs {
                return Err(SynthesisError::from(out_of_range("input", i, self.inputs)).into());
            }
            self.sink.term(m, Column::Input(i), coeff)?;
        }
        for (&i, coeff) in lc.iter_aux() {
            if coeff.is_zero_vartime() {
                continue;
            }
            if i >= self.aux {
                return Err(SynthesisError::from(out_of_range("aux", i, self.aux)).into());
            }
            self.sink.term(m, Column::Aux(i), coeff)?;
        }
        self.sink.end_row(m);
        Ok(())
    }

    fn stopped(&self) -> SynthesisError {
        SynthesisError::IoError(io::Error::other("the walk over the constraints stopped"))
    }
}

fn out_of_range(what: &str, index: usize, len: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what} index {index} out of range (len {len})"),
    )
}

impl<S: RowSink> ConstraintSystem<Scalar> for WalkCs<S> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        if self.error.is_some() {
            return Err(self.stopped());
        }
        self.aux += 1;
        Ok(Variable(Index::Aux(self.aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        if self.error.is_some() {
            return Err(self.stopped());
        }
        self.inputs += 1;
        Ok(Variable(Index::Input(self.inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        if self.error.is_some() {
            return;
        }
        let lcs = [
            a(LinearCombination::zero()),
            b(LinearCombination::zero()),
            c(LinearCombination::zero()),
        ];
        for (m, lc) in lcs.iter().enumerate() {
            if let Err(e) = self.row(m, lc) {
                self.error = Some(e);
                return;
            }
        }
        self.constraints += 1;
        if let Err(e) = self.sink.end_constraint(self.constraints) {
            self.error = Some(e);
        }
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

/// The sink of [`record`]: the three matrices (aux columns marked, placed after the inputs once
/// the circuit is done) and the coefficient table.
struct Recorder {
    coeffs: Vec<Scalar>,
    ids: std::collections::HashMap<[u8; 32], u32>,
    matrices: [Matrix; 3],
    limit_bytes: Option<u64>,
}

impl Recorder {
    fn new(limit_bytes: Option<u64>) -> Self {
        Recorder {
            coeffs: vec![Scalar::ONE, -Scalar::ONE],
            ids: std::collections::HashMap::new(),
            matrices: [Matrix::new(), Matrix::new(), Matrix::new()],
            limit_bytes,
        }
    }

    fn coeff_id(&mut self, c: &Scalar) -> Result<u32, Error> {
        if *c == Scalar::ONE {
            return Ok(ID_ONE);
        }
        if *c == -Scalar::ONE {
            return Ok(ID_MINUS_ONE);
        }
        let key = c.to_repr();
        if let Some(&id) = self.ids.get(&key) {
            return Ok(id);
        }
        let id = u32::try_from(self.coeffs.len()).map_err(|_| {
            Error::from(ErrorKind::R1csFormat(
                "more than 2^32 distinct coefficients".into(),
            ))
        })?;
        self.coeffs.push(*c);
        self.ids.insert(key, id);
        Ok(id)
    }

    fn bytes(&self) -> u64 {
        HEADER_BYTES as u64
            + 32 * self.coeffs.len() as u64
            + self.matrices.iter().map(Matrix::bytes).sum::<u64>()
    }
}

impl RowSink for Recorder {
    fn term(&mut self, m: usize, column: Column, coeff: &Scalar) -> Result<(), Error> {
        let column = match column {
            Column::Input(i) => i as u32,
            // Inputs may still be allocated after this constraint, so an aux column is marked
            // now and placed after the final inputs once the circuit is done.
            Column::Aux(i) if i < AUX_MARK as usize => i as u32 | AUX_MARK,
            Column::Aux(i) => {
                return Err(ErrorKind::R1csFormat(format!(
                    "aux variable {i} does not fit the recording's 31-bit index"
                ))
                .into())
            }
        };
        let id = self.coeff_id(coeff)?;
        self.matrices[m].terms.push(term(column, id));
        Ok(())
    }

    fn end_row(&mut self, m: usize) {
        self.matrices[m].end_row();
    }

    fn end_constraint(&mut self, constraints: usize) -> Result<(), Error> {
        let Some(limit) = self.limit_bytes else {
            return Ok(());
        };
        let bytes = self.bytes();
        if bytes > limit {
            return Err(ErrorKind::R1csOverBudget {
                limit,
                constraints,
                bytes,
            }
            .into());
        }
        Ok(())
    }
}

/// The sink of [`measure`]: terms per matrix, distinct coefficients, which variables A and B
/// use and which aux variables are constrained boolean (one bit per variable).
#[derive(Default)]
struct Counter {
    nnz: [u64; 3],
    /// Coefficients other than 1 and -1, by their canonical bytes.
    coeffs: std::collections::HashSet<[u8; 32]>,
    a_aux: Vec<u64>,
    b_input: Vec<u64>,
    b_aux: Vec<u64>,
    bit_aux: Vec<u64>,
    /// The current constraint's first terms of A, B and C, and how many each row has: rows of
    /// more than [`MAX_ROW_TERMS`] terms show no bit.
    row: [Vec<RowTerm>; 3],
    row_terms: [usize; 3],
}

fn set_bit(bits: &mut Vec<u64>, i: usize) {
    if bits.len() <= i / 64 {
        bits.resize(i / 64 + 1, 0);
    }
    bits[i / 64] |= 1 << (i % 64);
}

impl RowSink for Counter {
    fn term(&mut self, m: usize, column: Column, coeff: &Scalar) -> Result<(), Error> {
        if *coeff != Scalar::ONE && *coeff != -Scalar::ONE {
            self.coeffs.insert(coeff.to_repr());
        }
        self.nnz[m] += 1;
        match (m, column) {
            (0, Column::Aux(i)) => set_bit(&mut self.a_aux, i),
            (1, Column::Input(i)) => set_bit(&mut self.b_input, i),
            (1, Column::Aux(i)) => set_bit(&mut self.b_aux, i),
            _ => {}
        }
        self.row_terms[m] += 1;
        if self.row[m].len() < MAX_ROW_TERMS {
            let var = match column {
                Column::Input(0) => RowVar::One,
                Column::Input(_) => RowVar::Input,
                Column::Aux(i) => RowVar::Aux(i),
            };
            self.row[m].push((var, *coeff, small_int(coeff)));
        }
        Ok(())
    }

    fn end_constraint(&mut self, _constraints: usize) -> Result<(), Error> {
        if self
            .row_terms
            .iter()
            .zip(&self.row)
            .all(|(&n, r)| n == r.len())
        {
            if let Some(x) = new_bit(&self.row[0], &self.row[1], &self.row[2], &self.bit_aux) {
                set_bit(&mut self.bit_aux, x);
            }
        }
        for r in &mut self.row {
            r.clear();
        }
        self.row_terms = [0; 3];
        Ok(())
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

/// The witness-only constraint system of [`synthesize_compiled`]: `alloc` computes each value
/// and pushes it into the sink, `enforce` only counts (its closures are never called).
///
/// It counts the variables itself, so a sink that keeps no aux slice (the packing
/// [`crate::witness::WitnessSink`]) serves it as well as one that does.
pub struct WitnessCs<S: AssignmentSink> {
    sink: S,
    inputs: usize,
    aux: usize,
    constraints: usize,
    /// The first error the sink gave: `enforce` cannot return one.
    error: Option<SynthesisError>,
}

impl<S: AssignmentSink> WitnessCs<S> {
    /// Wraps a sink.
    pub fn new(sink: S) -> Self {
        WitnessCs {
            sink,
            inputs: 0,
            aux: 0,
            constraints: 0,
            error: None,
        }
    }

    fn allocate(
        &mut self,
        f: impl FnOnce() -> Result<Scalar, SynthesisError>,
        input: bool,
    ) -> Result<Variable, SynthesisError> {
        if self.error.is_some() {
            return Err(SynthesisError::IoError(io::Error::other(
                "assignment sink failed earlier in this synthesis",
            )));
        }
        let value = f()?;
        let pushed = if input {
            self.sink.push_input(value)
        } else {
            self.sink.push_aux(value)
        };
        if let Err(e) = pushed {
            self.error = Some(SynthesisError::IoError(io::Error::other(e.to_string())));
            return Err(e);
        }
        Ok(Variable(if input {
            self.inputs += 1;
            Index::Input(self.inputs - 1)
        } else {
            self.aux += 1;
            Index::Aux(self.aux - 1)
        }))
    }
}

impl<S: AssignmentSink> ConstraintSystem<Scalar> for WitnessCs<S> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.allocate(f, false)
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.allocate(f, true)
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.constraints += 1;
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }

    /// A witness generator in bellpepper's sense: gadgets may skip building the linear
    /// combinations only `enforce` would read (the vendored bellperson's SHA-256 does). They
    /// still enforce as often: the count is checked against the matrices.
    fn is_witness_generator(&self) -> bool {
        true
    }

    fn extend_inputs(&mut self, new_inputs: &[Scalar]) {
        for &v in new_inputs {
            if self.allocate(|| Ok(v), true).is_err() {
                return;
            }
        }
    }

    fn extend_aux(&mut self, new_aux: &[Scalar]) {
        for &v in new_aux {
            if self.allocate(|| Ok(v), false).is_err() {
                return;
            }
        }
    }

    fn allocate_empty(
        &mut self,
        _aux_n: usize,
        _inputs_n: usize,
    ) -> (&mut [Scalar], &mut [Scalar]) {
        unsupported("allocate_empty")
    }

    fn allocate_empty_inputs(&mut self, _n: usize) -> &mut [Scalar] {
        unsupported("allocate_empty_inputs")
    }

    fn allocate_empty_aux(&mut self, _n: usize) -> &mut [Scalar] {
        unsupported("allocate_empty_aux")
    }

    fn inputs_slice(&self) -> &[Scalar] {
        self.sink.inputs()
    }

    fn aux_slice(&self) -> &[Scalar] {
        self.sink.aux()
    }
}

/// Gadgets that fill uninitialised witness storage in place are not supported (no circuit
/// served uses one): a panic that the synthesis workers catch, failing that synthesis alone.
fn unsupported(what: &str) -> ! {
    panic!("the pre-compiled synthesis does not support `{what}` (a witness-generator gadget that fills storage in place); use the full synthesis for this circuit")
}

/// Synthesizes `circuit` into `sink` through its pre-compiled matrices: the witness pass, then
/// the three products written into the sink in parallel and the density bitmaps copied. The same
/// bytes as [`crate::synth::synthesize`] writes for the same witness.
pub fn synthesize_compiled<C: Circuit<Scalar>, S: AssignmentSink>(
    circuit: C,
    sink: S,
    r1cs: &R1cs,
) -> Result<S, Error> {
    if sink.witness_only() {
        return Err(SynthesisError::IoError(io::Error::other(
            "a witness-only sink takes the witness pass only (`Synthesis::Witness`), not the \
             products",
        ))
        .into());
    }
    let mut sink = synthesize_witness(circuit, sink, r1cs)?;
    let d = &r1cs.densities;
    let popcounts = [d[0].popcount, d[1].popcount, d[2].popcount].map(|p| p as u64);
    let out = sink.evaluations(r1cs.shape.n(), popcounts)?;
    r1cs.evaluate(out.input, out.aux, out.a, out.b, out.c)?;
    for (dst, src, what) in [
        (&mut *out.density_a_aux, &d[0], "A-aux density words"),
        (&mut *out.density_b_input, &d[1], "B-input density words"),
        (&mut *out.density_b_aux, &d[2], "B-aux density words"),
    ] {
        let dst = dst
            .get_mut(..src.words.len())
            .ok_or_else(|| Error::shape(what, src.words.len(), 0))?;
        dst.copy_from_slice(&src.words);
    }
    Ok(sink)
}

/// The witness pass of [`synthesize_compiled`] alone: `ONE`, then the circuit's values pushed
/// into `sink` (no evaluation, no density), checked against the shape of `r1cs`. What a
/// witness-only slot holds ([`crate::witness`]): the prover computes a, b and c from the same
/// matrices.
pub fn synthesize_witness<C: Circuit<Scalar>, S: AssignmentSink>(
    circuit: C,
    sink: S,
    r1cs: &R1cs,
) -> Result<S, Error> {
    let mut cs = WitnessCs::new(sink);
    let run = (|| {
        cs.alloc_input(|| "", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut cs)
    })();
    if let Some(e) = cs.error.take() {
        return Err(e.into());
    }
    run?;
    let found = CircuitShape {
        inputs: cs.inputs,
        aux: cs.aux,
        constraints: cs.constraints,
    };
    if found != r1cs.shape {
        return Err(ErrorKind::R1csMismatch {
            expected: r1cs.shape,
            found,
        }
        .into());
    }
    Ok(cs.sink)
}

/// Records `circuit`'s matrices from its blank circuit and serves them from memory (for
/// syntheses in this process; the pipeline shares them through a memfd instead).
pub fn compile(circuit: &crate::circuits::AnyCircuit) -> Result<R1cs, Error> {
    let builder = circuit.record_r1cs(None)?;
    R1cs::from_bytes(Box::new(builder.encode(circuit.circuit_id()?)))
}

/// Synthesizes every partition of `job` both ways (in full, and through `r1cs`) and compares
/// the results: an error names the first partition and array that differ.
pub fn check_job(job: &dyn crate::job::Job, r1cs: &R1cs) -> Result<(), Error> {
    use crate::synth::{Synthesis, VecSink};
    for k in 0..job.partitions() {
        let mut full = VecSink::new();
        job.synthesize_partition(k, &mut full)?;
        let mut fast = VecSink::new();
        job.synthesize_partition_with(k, &mut fast, Synthesis::Compiled(r1cs))?;
        let (full, fast) = (full.finish(), fast.finish());
        let differs = [
            ("a", full.a == fast.a),
            ("b", full.b == fast.b),
            ("c", full.c == fast.c),
            ("input", full.input == fast.input),
            ("aux", full.aux == fast.aux),
            ("A-aux density", full.a_aux_density == fast.a_aux_density),
            (
                "B-input density",
                full.b_input_density == fast.b_input_density,
            ),
            ("B-aux density", full.b_aux_density == fast.b_aux_density),
        ]
        .into_iter()
        .find(|(_, same)| !same);
        if let Some((what, _)) = differs {
            return Err(format_error(format!(
                "partition {k} of `{}`: the pre-compiled synthesis gives another {what}",
                job.circuit()
            )));
        }
    }
    Ok(())
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
