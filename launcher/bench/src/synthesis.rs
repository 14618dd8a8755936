//! How the bench's in-process syntheses synthesize: a [`Synthesizer`], made once per bench run
//! from the settings of that run's split pipeline and handed to every mode that synthesizes in
//! this process ([`crate::local`], [`crate::sweep`], the Filecoin bench, `synth-bench`).
//!
//! Every synthesis done inside this process goes through [`Synthesizer::synthesize_partition`],
//! so that a change of how synthesis is done (a pre-compiled constraint system, say) is made
//! here once and every in-process row measures it.
//!
//! ```no_run
//! use kernels::circuits::AnyCircuit;
//! use kernels::job::{BuiltinJob, BuiltinRequest};
//! use kernels::synth::VecSink;
//! use splitprover_bench::synthesis::Synthesizer;
//!
//! let circuit: AnyCircuit = "sha-chain:1".parse()?;
//! let settings = launcher::r1cs::SynthesisSettings::default();
//! let synthesis = Synthesizer::new(&settings, &circuit);
//! let spec = "sha-chain:1".parse()?;
//! let job = BuiltinJob::new(spec, BuiltinRequest { seed: 7, partitions: 1 })?;
//! let mut sink = VecSink::with_limit(circuit.shape()?);
//! synthesis.synthesize_partition(&job, 0, &mut sink)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::sync::Arc;

use kernels::circuits::AnyCircuit;
use kernels::job::Job;
use kernels::r1cs::R1cs;
use kernels::synth::{AssignmentSink, Synthesis};
use launcher::r1cs::SynthesisSettings;

/// How in-process syntheses synthesize: in full, or through one circuit's pre-compiled
/// constraint matrices (partitions of any other circuit are synthesized in full). Cloning
/// shares the matrices.
#[derive(Clone, Default)]
pub struct Synthesizer {
    /// The circuit and its matrices; `None`: full synthesis.
    compiled: Option<(AnyCircuit, Arc<R1cs>)>,
}

impl std::fmt::Debug for Synthesizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.compiled {
            Some((circuit, _)) => write!(f, "Synthesizer(pre-compiled `{circuit}`)"),
            None => f.write_str("Synthesizer(full)"),
        }
    }
}

impl Synthesizer {
    /// Full synthesis: every linear combination built and evaluated, as bellperson does.
    pub fn full() -> Self {
        Synthesizer { compiled: None }
    }

    /// Through `r1cs`, the matrices of `circuit`.
    pub fn compiled(circuit: AnyCircuit, r1cs: Arc<R1cs>) -> Self {
        Synthesizer {
            compiled: Some((circuit, r1cs)),
        }
    }

    /// Synthesizes `circuit` as `settings` say (the split pipeline of the same bench uses the
    /// same settings): its matrices are got ready now, outside any timed run, from the cache the
    /// split pipeline uses, or recorded. In full when `settings` say so, or when the matrices
    /// cannot be had (logged, with the reason).
    pub fn new(settings: &SynthesisSettings, circuit: &AnyCircuit) -> Self {
        if !settings.precompiled {
            return Synthesizer::full();
        }
        let opened = circuit
            .circuit_id()
            .map_err(|e| e.to_string())
            .and_then(|id| {
                let shape = circuit.shape().map_err(|e| e.to_string())?;
                launcher::r1cs::load_or_record(
                    circuit,
                    id,
                    &shape,
                    settings.cache_dir.as_deref(),
                    settings.budget_bytes,
                    shm_protocol::HugePagePolicy::Auto,
                )
            })
            .and_then(|shared| shared.open().map_err(|e| e.to_string()));
        match opened {
            Ok(r1cs) => Synthesizer::compiled(*circuit, Arc::new(r1cs)),
            Err(why) => {
                tracing::warn!(%circuit, "in-process syntheses are full: {why}");
                Synthesizer::full()
            }
        }
    }

    /// The matrices partitions of `circuit` are synthesized through, if any.
    pub fn matrices_for(&self, circuit: &AnyCircuit) -> Option<&R1cs> {
        match &self.compiled {
            Some((c, r1cs)) if c == circuit => Some(r1cs),
            _ => None,
        }
    }

    /// Synthesizes partition `k` of `job` into `sink`: through the matrices of its circuit if
    /// this synthesizer has them, else in full.
    pub fn synthesize_partition(
        &self,
        job: &dyn Job,
        k: usize,
        sink: &mut dyn AssignmentSink,
    ) -> Result<(), kernels::Error> {
        match self.matrices_for(&job.circuit()) {
            Some(r1cs) => job.synthesize_partition_with(k, sink, Synthesis::Compiled(r1cs)),
            None => job.synthesize_partition(k, sink),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernels::job::{BuiltinJob, BuiltinRequest};
    use kernels::synth::VecSink;

    fn synthesize(s: &Synthesizer, job: &dyn Job) -> kernels::synth::OwnedAssignment {
        let mut sink = VecSink::with_limit(job.circuit().shape().unwrap());
        s.synthesize_partition(job, 0, &mut sink).unwrap();
        sink.finish()
    }

    #[test]
    fn full_and_pre_compiled_write_the_same_bytes() {
        let spec: kernels::circuits::CircuitSpec = "sha-chain:1".parse().unwrap();
        let circuit = AnyCircuit::Builtin(spec);
        let job = BuiltinJob::new(
            spec,
            BuiltinRequest {
                seed: 3,
                partitions: 1,
            },
        )
        .unwrap();
        let r1cs = Arc::new(circuit.compile().unwrap());
        let compiled = Synthesizer::compiled(circuit, r1cs);
        assert!(compiled.matrices_for(&circuit).is_some());
        assert!(Synthesizer::full().matrices_for(&circuit).is_none());
        let (a, b) = (
            synthesize(&Synthesizer::full(), &job),
            synthesize(&compiled, &job),
        );
        assert_eq!((a.input, a.aux), (b.input, b.aux));
        assert_eq!((a.a, a.b, a.c), (b.a, b.b, b.c));
    }

    #[test]
    fn another_circuit_is_synthesized_in_full_and_settings_can_say_full() {
        let circuit: AnyCircuit = "sha-chain:1".parse().unwrap();
        let other: AnyCircuit = "pubinputs:2".parse().unwrap();
        let r1cs = Arc::new(circuit.compile().unwrap());
        let s = Synthesizer::compiled(circuit, r1cs);
        assert!(s.matrices_for(&other).is_none());
        let full = SynthesisSettings {
            precompiled: false,
            ..Default::default()
        };
        assert!(Synthesizer::new(&full, &circuit)
            .matrices_for(&circuit)
            .is_none());
    }
}
