//! Recording a circuit's matrices once per shape ([`record`], encoded by
//! [`R1csBuilder::write`]) and measuring them without keeping them ([`measure`]): one walk over
//! the constraints, calling no witness closure, feeds each row to a [`RowSink`].

use std::io::{self, Write};

use bellpepper_core::{
    Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable,
};
use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use super::bits::{new_bit, small_int, RowTerm, RowVar, MAX_ROW_TERMS};
#[cfg(doc)]
use super::R1cs;
use super::{pad64, Layout, HEADER_BYTES, ID_MINUS_ONE, ID_ONE, MAGIC, VERSION};
use crate::types::CircuitShape;
use crate::{Error, ErrorKind};

/// While recording: the column is an aux index (placed after the inputs at the end).
const AUX_MARK: u32 = 1 << 31;

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
    /// docs](super#format)).
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
