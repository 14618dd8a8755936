//! Witness-only proofs on the device (issue 31): a context keeps one circuit's matrices
//! resident, or under a budget they do not fit streams their rows for every proof (the plan's
//! lever 5); each proof's packed witness is unpacked and multiplied by them on the device
//! (`gpu_proof.cuh`: `sp_issue_witness`, `sp_issue_spmv`) before the NTTs.

use std::sync::Arc;

use super::*;
use crate::backend::MatricesBytes;

/// The matrices a context holds: their circuit, their device bytes and, where their rows
/// stream, the host arrays the context copies them from (kept alive and unchanged here until
/// the context is destroyed: `GpuBackend`'s `Drop` destroys it before its fields drop).
pub(super) struct HeldMatrices {
    circuit_id: u64,
    bytes: u64,
    _streamed_from: Option<Arc<CircuitMatrices>>,
}

/// Witness-only proofs (issue 31): the circuit's matrices resident, each proof's packed witness
/// unpacked and multiplied on the device (`gpu_proof.cuh`: `sp_issue_witness`).
impl GpuBackend {
    /// Uploads `m`'s matrices, its witness layout and densities once (the rows only where the
    /// plan keeps them resident); a context serves one circuit, so another circuit's matrices
    /// are refused.
    fn ensure_matrices(&self, m: &Arc<CircuitMatrices>) -> Result<(), Error> {
        let mut held = self.matrices.lock().unwrap_or_else(|e| e.into_inner());
        let id = m.r1cs().circuit_id();
        match &*held {
            Some(h) if h.circuit_id == id => return Ok(()),
            Some(h) => {
                return Err(ErrorKind::Cuda(format!(
                    "this GPU context holds the matrices of circuit {:#x}, not {id:#x}",
                    h.circuit_id
                ))
                .into())
            }
            None => {}
        }
        let streamed = self.residency.matrices_streamed;
        let raw = MatricesRaw::of(m)?;
        let mut bytes = 0usize;
        // SAFETY: `raw` points into `m`'s matrices, coefficient table, witness layout and
        // densities with the lengths it states (`MatricesRaw::of`), alive across the call; the
        // C++ side copies them to the device, and where `streamed` keeps the rows' host
        // pointers: then `m` (an Arc, whose arrays neither move nor change) is held below until
        // the context is destroyed. `bytes` is writable.
        let err = unsafe {
            ffi::splitprover_gpu_set_matrices(
                self.ctx.as_ptr(),
                &raw.ffi,
                c_int::from(streamed),
                &mut bytes,
            )
        };
        if err.code != 0 {
            return Err(sppark_error(err, "uploading the matrices to the GPU"));
        }
        tracing::info!(
            circuit_id = format_args!("{id:#x}"),
            mib = bytes >> 20,
            rows_streamed = streamed,
            "gpu backend: matrices on the device (witness-only proofs)"
        );
        *held = Some(HeldMatrices {
            circuit_id: id,
            bytes: bytes as u64,
            _streamed_from: streamed.then(|| m.clone()),
        });
        Ok(())
    }

    /// Device bytes of the matrices held (0 before the first witness-only proof).
    pub fn matrices_bytes(&self) -> u64 {
        self.matrices
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(0, |h| h.bytes)
    }

    /// `batch` in the C++ layout: each witness checked against `m`'s layout, its densities the
    /// matrices'.
    fn raw_witness(
        &self,
        batch: &[WitnessAssignment<'_>],
        m: &CircuitMatrices,
    ) -> Result<Vec<ffi::Assignment>, Error> {
        let layout = m.witness_layout();
        let d = m.r1cs().densities();
        let density = |d: &crate::types::DensityBits| ffi::Density {
            words: d.words.as_ptr(),
            bit_len: d.bit_len,
            popcount: d.popcount,
        };
        batch
            .iter()
            .map(|w| {
                check_lengths(layout, w)?;
                Ok(ffi::Assignment {
                    a: std::ptr::null(),
                    b: std::ptr::null(),
                    c: std::ptr::null(),
                    abc_len: m.r1cs().shape().n(),
                    input: w.input.as_ptr(),
                    input_len: w.input.len(),
                    aux: std::ptr::null(),
                    aux_len: layout.aux(),
                    a_aux: density(&d[0]),
                    b_input: density(&d[1]),
                    b_aux: density(&d[2]),
                    bit_values: w.bit_values.as_ptr(),
                    bit_words: w.bit_values.len(),
                    non_bits: w.non_bits.as_ptr(),
                    non_bits_len: w.non_bits.len(),
                    witness: 1,
                    pad: 0,
                })
            })
            .collect()
    }

    /// Proofs of witness-only assignments, with each proof's phases and the batch's time.
    pub fn prove_witness_batch_timed(
        &self,
        batch: &[WitnessAssignment<'_>],
        m: &Arc<CircuitMatrices>,
        r: &[Scalar],
        s: &[Scalar],
    ) -> Result<(Vec<Proof>, Vec<Phases>, BatchTimes), Error> {
        if r.len() != batch.len() || s.len() != batch.len() {
            return Err(Error::shape(
                "randomness values (one r and one s per circuit)",
                batch.len(),
                r.len().min(s.len()),
            ));
        }
        self.ensure_matrices(m)?;
        let raw = self.raw_witness(batch, m)?;
        // SAFETY: `raw_witness` checked every witness's lengths against the layout; its
        // pointers are into `batch`'s slices and `m`'s densities, alive across the call.
        unsafe { self.prove_raw_timed(&raw, r, s) }
    }
}

/// Device bytes `r1cs`'s matrices take for witness-only proofs, with and without their rows:
/// the C++ side's own arithmetic (`sp_matrices_bytes`, what `splitprover_gpu_set_matrices`
/// checks and allocates), from the dimensions alone. For [`super::GpuOptions::matrices`],
/// before the backend is open and before the witness layout is made.
pub fn matrices_device_bytes(r1cs: &crate::r1cs::R1cs) -> MatricesBytes {
    let shape = r1cs.shape();
    let none = std::ptr::null();
    let dims = ffi::Matrices {
        row_start: [none; 3],
        terms: [none; 3],
        nnz: r1cs.nnz(),
        rows: shape.n() as u64,
        coeffs: std::ptr::null(),
        n_coeffs: r1cs.coefficients() as u64,
        is_bit: none,
        bits_before: none,
        aux_words: shape.aux.div_ceil(64) as u64,
        n_inputs: shape.inputs as u64,
        n_aux: shape.aux as u64,
        n_bits: 0,
        density: [none; 3],
        popcount: [0; 3],
    };
    // SAFETY: a host-only function that reads the dimension fields of `dims` (never its
    // pointers, all null) and returns a number; `dims` lives across both calls.
    let (all, fixed) = unsafe {
        (
            ffi::splitprover_gpu_matrices_bytes(&dims, 0) as u64,
            ffi::splitprover_gpu_matrices_bytes(&dims, 1) as u64,
        )
    };
    MatricesBytes {
        fixed,
        rows: all - fixed,
    }
}

/// A circuit's matrices in the C++ layout (`sp_matrices`), pointing into its `CircuitMatrices`.
struct MatricesRaw {
    ffi: ffi::Matrices,
}

impl MatricesRaw {
    fn of(m: &CircuitMatrices) -> Result<MatricesRaw, Error> {
        let r1cs = m.r1cs();
        let layout = m.witness_layout();
        let csr = |q| {
            r1cs.csr(q)
                .ok_or_else(|| Error::format("the matrices have no matrix {q}"))
        };
        let (a, b, c) = (csr(0)?, csr(1)?, csr(2)?);
        let table = r1cs.coefficient_table();
        let d = r1cs.densities();
        Ok(MatricesRaw {
            ffi: ffi::Matrices {
                row_start: [a.0.as_ptr(), b.0.as_ptr(), c.0.as_ptr()],
                terms: [a.1.as_ptr(), b.1.as_ptr(), c.1.as_ptr()],
                nnz: [a.1.len() as u64, b.1.len() as u64, c.1.len() as u64],
                rows: r1cs.shape().n() as u64,
                coeffs: table.as_ptr(),
                n_coeffs: table.len() as u64,
                is_bit: layout.is_bit_words().as_ptr(),
                bits_before: layout.bits_before().as_ptr(),
                aux_words: layout.is_bit_words().len() as u64,
                n_inputs: layout.inputs() as u64,
                n_aux: layout.aux() as u64,
                n_bits: layout.bits() as u64,
                density: [
                    d[0].words.as_ptr(),
                    d[1].words.as_ptr(),
                    d[2].words.as_ptr(),
                ],
                popcount: [
                    d[0].popcount as u64,
                    d[1].popcount as u64,
                    d[2].popcount as u64,
                ],
            },
        })
    }
}

/// A witness's array lengths against its circuit's witness layout.
fn check_lengths(
    layout: &crate::witness::WitnessLayout,
    w: &WitnessAssignment<'_>,
) -> Result<(), Error> {
    for (what, expected, found) in [
        ("witness inputs", layout.inputs(), w.input.len()),
        (
            "bit-value words",
            layout.bit_value_words(),
            w.bit_values.len(),
        ),
        ("non-bit aux values", layout.non_bits(), w.non_bits.len()),
    ] {
        if expected != found {
            return Err(Error::shape(what, expected, found));
        }
    }
    Ok(())
}

/// The device's witness arithmetic run on the host with the same C++ templates: `w`'s aux
/// unpacked and `a`, `b`, `c` computed from `m`'s matrices, whole (`stage_bytes` 0) or as a
/// context streams them: cut into chunks of at most `stage_bytes`, each copied into a buffer
/// and evaluated from there. With the chunks taken (3 whole). For the no-GPU tests, against
/// [`crate::witness::expand`].
pub fn witness_check(
    m: &CircuitMatrices,
    w: &WitnessAssignment<'_>,
    stage_bytes: usize,
) -> Result<(crate::witness::Expanded, usize), Error> {
    let layout = m.witness_layout();
    check_lengths(layout, w)?;
    let raw = MatricesRaw::of(m)?;
    let n = m.r1cs().shape().n();
    let mut aux = vec![Scalar::ZERO; layout.aux()];
    let mut abc = vec![Scalar::ZERO; 3 * n];
    // SAFETY: host-only code reading `raw`'s arrays (lengths it states, into `m`) and `w`'s
    // (checked above against the layout `raw` names), writing `layout.aux()` scalars to `aux`
    // and `3 n` to `abc`, all alive across the call.
    let chunks = unsafe {
        ffi::splitprover_gpu_witness_check(
            &raw.ffi,
            w.input.as_ptr(),
            w.bit_values.as_ptr(),
            w.non_bits.as_ptr(),
            stage_bytes,
            aux.as_mut_ptr(),
            abc.as_mut_ptr(),
        )
    };
    if chunks == 0 {
        return Err(ErrorKind::Cuda(format!(
            "a row of the matrices has more terms than a staging buffer of {stage_bytes} bytes \
             holds"
        ))
        .into());
    }
    let c = abc.split_off(2 * n);
    let b = abc.split_off(n);
    Ok((crate::witness::Expanded { a: abc, b, c, aux }, chunks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuits::{AnyCircuit, CircuitSpec};
    use crate::witness::PackedWitness;

    /// A circuit's matrices and the packed witness of `seed`.
    fn packed(spec: CircuitSpec, seed: u64) -> (CircuitMatrices, PackedWitness) {
        let matrices = CircuitMatrices::new(AnyCircuit::from(spec).compile().unwrap());
        let packed = PackedWitness::synthesize(
            spec.circuit(Some(seed)),
            matrices.r1cs(),
            matrices.witness_layout(),
        )
        .unwrap();
        (matrices, packed)
    }

    /// The assignment a backend reads from a packed witness.
    fn view(p: &PackedWitness) -> WitnessAssignment<'_> {
        WitnessAssignment {
            input: &p.input,
            bit_values: &p.bit_values,
            non_bits: &p.non_bits,
        }
    }

    /// The device's witness arithmetic (`witness.cuh`, run on the host from the same templates)
    /// unpacks and multiplies to exactly what the host path computes and what the full
    /// synthesis writes, for every built-in circuit family; no GPU needed.
    #[test]
    fn the_device_witness_arithmetic_gives_the_full_synthesis() {
        let mut kinds = [0usize; 2];
        for (text, seed) in [
            ("sha-chain:1", 5u64),
            ("bits:700", 7),
            ("porep-like:16384", 8),
            ("pubinputs:4", 6),
        ] {
            let spec: CircuitSpec = text.parse().unwrap();
            let (matrices, packed) = packed(spec, seed);
            let layout = matrices.witness_layout();
            let (device, chunks) = witness_check(&matrices, &view(&packed), 0).unwrap();
            assert_eq!(chunks, 3, "{text}: whole matrices");
            let host = crate::witness::expand(
                matrices.r1cs(),
                layout,
                &packed.input,
                &packed.bit_values,
                &packed.non_bits,
            )
            .unwrap();
            let full = crate::synth::synthesize_owned(spec.circuit(Some(seed))).unwrap();
            assert_eq!(device.aux, host.aux, "{text}: aux");
            assert_eq!(
                device.aux, full.aux,
                "{text}: aux against the full synthesis"
            );
            for (q, (d, f)) in [
                (&device.a, &full.a),
                (&device.b, &full.b),
                (&device.c, &full.c),
            ]
            .into_iter()
            .enumerate()
            {
                assert_eq!(d, f, "{text}: matrix {q}");
            }
            kinds[0] += layout.bits();
            kinds[1] += layout.non_bits();
        }
        assert!(
            kinds[0] > 0 && kinds[1] > 0,
            "both kinds of aux value: {kinds:?}"
        );
    }

    /// Streamed matrices (the plan's lever 5): cut into chunks as a context cuts them for its
    /// staging buffers, each copied and evaluated from its copy, the products are the whole
    /// matrices' to the bit, for chunk sizes from a few rows to a whole matrix; a buffer
    /// smaller than one row is refused.
    #[test]
    fn matrices_streamed_in_chunks_give_the_same_products() {
        for (text, seed) in [
            ("sha-chain:1", 3u64),
            ("porep-like:16384", 4),
            ("porep-bits:16384", 5),
        ] {
            let spec: CircuitSpec = text.parse().unwrap();
            let (matrices, packed) = packed(spec, seed);
            let w = view(&packed);
            let (whole, _) = witness_check(&matrices, &w, 0).unwrap();
            let widest = (0..3)
                .map(|q| {
                    let (rows, _) = matrices.r1cs().csr(q).unwrap();
                    rows.windows(2).map(|p| p[1] - p[0]).max().unwrap_or(0)
                })
                .max()
                .unwrap() as usize;
            let one_row = (widest + 2) * 8;
            let bytes =
                8 * (matrices.r1cs().shape().n() + 1) + 8 * matrices.r1cs().nnz()[0] as usize;
            let mut last = usize::MAX;
            let mut stages = [one_row, 3 * one_row + 5, 64 * one_row, bytes, 1 << 24];
            stages.sort_unstable();
            for stage in stages {
                let (got, chunks) = witness_check(&matrices, &w, stage).unwrap();
                assert!(
                    got.a == whole.a && got.b == whole.b,
                    "{text}: {stage} bytes"
                );
                assert!(
                    got.c == whole.c && got.aux == whole.aux,
                    "{text}: {stage} bytes"
                );
                assert!(
                    chunks >= 3 && chunks <= last,
                    "{text}: {stage} bytes, {chunks}"
                );
                last = chunks;
            }
            assert_eq!(last, 3, "{text}: 16 MiB hold a whole matrix");
            let e = witness_check(&matrices, &w, one_row - 8)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("more terms than a staging buffer"),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn a_witness_of_the_wrong_length_is_refused_before_any_arithmetic() {
        let (matrices, packed) = packed("bits:130".parse().unwrap(), 1);
        let short = WitnessAssignment {
            bit_values: &packed.bit_values[1..],
            ..view(&packed)
        };
        let e = witness_check(&matrices, &short, 0).unwrap_err().to_string();
        assert!(e.contains("bit-value words"), "{e}");
    }
}
