//! `splitprover shape`: what a circuit is and what it takes, measured from its blank circuit
//! (`kernels::r1cs::measure`: no witness, no matrices kept, no parameters generated), so a host
//! can be sized for a circuit (a 32 GiB-sector PoRep partition, say) before anything large is
//! made. Printed as a Markdown table, one row per circuit: constraints, inputs, aux, domain, the
//! densities the SRS lengths follow, the pre-compiled matrices' bytes, the SRS image's bytes,
//! one ring slot's bytes, the aux variables a row constrains boolean (`kernels::witness`) and
//! the bytes of one witness slot (the inputs, those bits packed, the other aux values: what a
//! partition's slot holds when its prover computes a, b, c from the matrices).

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use kernels::circuits::AnyCircuit;

use crate::cli::ShapeArgs;

/// One circuit measured.
#[derive(Clone, Debug)]
pub struct ShapeRow {
    /// The circuit as given.
    pub circuit: String,
    /// The measure.
    pub measure: kernels::r1cs::Measure,
    /// Bytes of its SRS image.
    pub srs_bytes: u64,
    /// Bytes of one ring slot sized for it.
    pub slot_bytes: u64,
    /// Bytes of one witness slot sized for it.
    pub witness_slot_bytes: u64,
    /// Seconds the measure took.
    pub seconds: f64,
}

/// Measures one circuit.
pub fn measure(text: &str) -> anyhow::Result<ShapeRow> {
    let circuit: AnyCircuit = text
        .parse()
        .with_context(|| format!("bad circuit `{text}`"))?;
    let t = Instant::now();
    let measure = circuit
        .measure()
        .with_context(|| format!("measuring `{text}`"))?;
    let srs_bytes = kernels::srs::SrsImage::size_for(&measure.srs_lengths())
        .with_context(|| format!("the SRS image of `{text}`"))? as u64;
    let slot_bytes = synth_proc::capacity_for(&measure.shape)
        .slot_bytes()
        .with_context(|| format!("`{text}` does not fit a ring slot"))?;
    let witness_slot_bytes = witness_capacity(&measure)
        .slot_bytes()
        .with_context(|| format!("`{text}` does not fit a witness slot"))?;
    Ok(ShapeRow {
        circuit: text.to_owned(),
        measure,
        srs_bytes,
        slot_bytes,
        witness_slot_bytes,
        seconds: t.elapsed().as_secs_f64(),
    })
}

/// The capacities of a witness slot of the measured circuit (what
/// `synth_proc::witness_capacity_for` gives for its recorded matrices).
pub fn witness_capacity(m: &kernels::r1cs::Measure) -> shm_protocol::WitnessCapacity {
    shm_protocol::WitnessCapacity {
        inputs: m.shape.inputs,
        bits: m.bit_aux,
        non_bits: m.non_bit_aux(),
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1u64 << 20) as f64)
}

fn pct(part: usize, whole: usize) -> String {
    if whole == 0 {
        "–".into()
    } else {
        format!("{:.1} %", 100.0 * part as f64 / whole as f64)
    }
}

/// The table of `rows`.
pub fn table(rows: &[ShapeRow]) -> String {
    let mut out = String::from(
        "| circuit | constraints | inputs | aux | domain | A over aux | aux in B | \
         terms A / B / C | matrices MiB | SRS image MiB | slot MiB | aux bits | \
         witness slot MiB | measured in s |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let m = &r.measure;
        out.push_str(&format!(
            "| {} | {} | {} | {} | 2^{} | {} | {} ({}) | {} / {} / {} | {} | {} | {} | {} ({}) | \
             {} | {:.1} |\n",
            r.circuit,
            m.shape.constraints,
            m.shape.inputs,
            m.shape.aux,
            m.shape.log_domain_size(),
            pct(m.a_aux, m.shape.aux),
            m.b_aux,
            pct(m.b_aux, m.shape.aux),
            m.nnz[0],
            m.nnz[1],
            m.nnz[2],
            mib(m.matrix_bytes()),
            mib(r.srs_bytes),
            mib(r.slot_bytes),
            m.bit_aux,
            pct(m.bit_aux, m.shape.aux),
            mib(r.witness_slot_bytes),
            r.seconds,
        ));
    }
    out
}

/// Runs `splitprover shape`.
pub fn run(args: ShapeArgs) -> anyhow::Result<ExitCode> {
    let rows = args
        .circuits
        .iter()
        .map(|c| measure(c))
        .collect::<anyhow::Result<Vec<_>>>()?;
    print!("{}", table(&rows));
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_builtin_circuit_measures_as_its_parameters_and_slot_say() {
        let r = measure("pubinputs:5").unwrap();
        let spec: kernels::circuits::CircuitSpec = "pubinputs:5".parse().unwrap();
        assert_eq!(r.measure.shape, spec.shape().unwrap());
        let params =
            kernels::paramgen::generate_parameters_seeded(spec.circuit(None), 1, &|_| {}).unwrap();
        let image = kernels::srs::SrsImage::from_parameters(&params, spec.circuit_id()).unwrap();
        assert_eq!(r.srs_bytes, image.as_ref().len() as u64);
        assert_eq!(
            r.slot_bytes,
            synth_proc::capacity_for(&spec.shape().unwrap())
                .slot_bytes()
                .unwrap()
        );
        let t = table(&[r]);
        assert!(t.contains("| pubinputs:5 | "), "{t}");
    }

    /// Issue 31: the witness slot `shape` sizes from the measure alone is the one synth-proc
    /// lays out from the recorded matrices.
    #[test]
    fn the_witness_slot_is_sized_as_synth_proc_sizes_it() {
        for text in ["bits:130", "porep-like:16384", "sha-chain:1"] {
            let r = measure(text).unwrap();
            let spec: kernels::circuits::CircuitSpec = text.parse().unwrap();
            let r1cs = AnyCircuit::from(spec).compile().unwrap();
            let layout = kernels::witness::WitnessLayout::of(&r1cs);
            assert_eq!(r.measure.bit_aux, layout.bits(), "{text}");
            assert_eq!(
                r.witness_slot_bytes,
                synth_proc::witness_capacity_for(&layout)
                    .slot_bytes()
                    .unwrap(),
                "{text}"
            );
            assert!(r.witness_slot_bytes < r.slot_bytes, "{text}");
        }
        let t = table(&[measure("bits:130").unwrap()]);
        assert!(t.contains("| 130 (97.7 %) |"), "{t}");
    }

    #[test]
    fn a_bad_circuit_is_an_error_naming_it() {
        let e = measure("sha-chain:x").unwrap_err();
        assert!(format!("{e:#}").contains("sha-chain:x"), "{e:#}");
    }
}
