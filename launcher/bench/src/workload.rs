//! What a sweep proves: a circuit, its SRS file, the request of each job and the check of each
//! proof, whatever the family.
//!
//! - built-in circuits ([`Workload::builtin`]): job `i` is a [`BuiltinRequest`] of seed `i`
//!   (one partition unless asked), its proofs checked with bellperson's verifier against the
//!   circuit's public inputs for that seed (the verifying key read from the head of the SRS
//!   file);
//! - a fixed request proved again and again ([`Workload::fixed`]): the Filecoin benches' C1
//!   output, PoSt or SnapDeals request, checked by the verifier given (filecoin-proofs' own).
//!
//! Every proof of every mode goes through [`Workload::verify`]; a refused proof fails the
//! bench.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use bellperson::groth16::{prepare_verifying_key, verify_proof, PreparedVerifyingKey};
use blstrs::Bls12;
use kernels::circuits::{AnyCircuit, CircuitSpec};
use kernels::job::{BuiltinRequest, Job};

/// The check of one job's proof bytes (its partitions' 192-byte proofs, concatenated):
/// `Ok(true)` when it verifies.
pub type Verifier = Box<dyn Fn(&[u8]) -> anyhow::Result<bool> + Send + Sync>;

/// A circuit, its SRS, the requests and their verifier.
pub struct Workload {
    circuit: AnyCircuit,
    params: PathBuf,
    label: String,
    requests: Requests,
    partitions: usize,
}

enum Requests {
    Builtin {
        spec: CircuitSpec,
        partitions: u32,
        pvk: Box<PreparedVerifyingKey<Bls12>>,
    },
    Fixed {
        request: Vec<u8>,
        verify: Verifier,
    },
}

impl Workload {
    /// Jobs of a built-in circuit of `partitions` partitions each, job `i` with seed
    /// `i × partitions` (so no two partitions share a witness); `params` is its SRS file.
    pub fn builtin(spec: CircuitSpec, params: &Path, partitions: u32) -> anyhow::Result<Self> {
        anyhow::ensure!(partitions >= 1, "a job needs at least one partition");
        let file = std::fs::File::open(params)
            .with_context(|| format!("cannot open the SRS `{}`", params.display()))?;
        let vk = bellperson::groth16::VerifyingKey::<Bls12>::read(std::io::BufReader::new(file))
            .with_context(|| format!("cannot read the verifying key of `{}`", params.display()))?;
        Ok(Workload {
            circuit: AnyCircuit::Builtin(spec),
            params: params.to_owned(),
            label: spec.to_string(),
            requests: Requests::Builtin {
                spec,
                partitions,
                pvk: Box::new(prepare_verifying_key(&vk)),
            },
            partitions: partitions as usize,
        })
    }

    /// The same `request` of `circuit` for every job, each proof checked by `verify`. The
    /// request is opened once here (a bad one is an error now, not in the middle of a sweep).
    pub fn fixed(
        circuit: AnyCircuit,
        params: &Path,
        label: impl Into<String>,
        request: Vec<u8>,
        verify: Verifier,
    ) -> anyhow::Result<Self> {
        let job = kernels::job::open(&circuit, &request)
            .with_context(|| format!("opening the `{circuit}` request"))?;
        Ok(Workload {
            circuit,
            params: params.to_owned(),
            label: label.into(),
            partitions: job.partitions(),
            requests: Requests::Fixed { request, verify },
        })
    }

    /// The circuit.
    pub fn circuit(&self) -> AnyCircuit {
        self.circuit
    }

    /// Its SRS file.
    pub fn params(&self) -> &Path {
        &self.params
    }

    /// What the rows call it (`pubinputs:2`, `porep:StackedDrg2KiBV1_1`, ...).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Partitions of each job.
    pub fn partitions(&self) -> usize {
        self.partitions
    }

    /// The request bytes of job `i`.
    pub fn request(&self, i: u64) -> Vec<u8> {
        match &self.requests {
            Requests::Builtin { partitions, .. } => BuiltinRequest {
                seed: i.wrapping_mul(u64::from(*partitions)),
                partitions: *partitions,
            }
            .to_bytes(),
            Requests::Fixed { request, .. } => request.clone(),
        }
    }

    /// Job `i` opened from its request, as the pipeline opens it (checked).
    pub fn open(&self, i: u64) -> anyhow::Result<Arc<dyn Job>> {
        let job = kernels::job::open(&self.circuit, &self.request(i))
            .with_context(|| format!("opening job {i} of `{}`", self.label))?;
        Ok(Arc::from(job))
    }

    /// Checks job `i`'s proofs (one per partition, in order); an error when one is refused.
    pub fn verify(&self, i: u64, proofs: &[Vec<u8>]) -> anyhow::Result<()> {
        anyhow::ensure!(
            proofs.len() == self.partitions,
            "job {i} of `{}`: {} partition proofs, expected {}",
            self.label,
            proofs.len(),
            self.partitions
        );
        match &self.requests {
            Requests::Builtin {
                spec,
                partitions,
                pvk,
            } => {
                let first = i.wrapping_mul(u64::from(*partitions));
                for (k, bytes) in proofs.iter().enumerate() {
                    let inputs = spec.public_inputs(first.wrapping_add(k as u64))?;
                    let proof = bellperson::groth16::Proof::<Bls12>::read(&bytes[..])
                        .with_context(|| format!("job {i} partition {k}: malformed proof"))?;
                    let ok = verify_proof(pvk, &proof, &inputs)
                        .with_context(|| format!("job {i} partition {k}: verification error"))?;
                    anyhow::ensure!(
                        ok,
                        "job {i} partition {k} of `{spec}`: the proof does not verify"
                    );
                }
                Ok(())
            }
            Requests::Fixed { verify, .. } => {
                let ok = verify(&proofs.concat())?;
                anyhow::ensure!(
                    ok,
                    "job {i} of `{}`: the verifier refused the proof",
                    self.label
                );
                Ok(())
            }
        }
    }
}

/// A proof's 192 bytes (compressed A, B, C), as the ring's result carries it.
pub fn proof_bytes(proof: &kernels::Proof) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(shm_protocol::layout::PROOF_BYTES);
    proof.write(&mut out).context("serializing a proof")?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_requests_and_their_verification() {
        let spec: CircuitSpec = "pubinputs:2".parse().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.params");
        launcher::srs::generate(&spec, 9, &path, false).unwrap();
        let w = Workload::builtin(spec, &path, 2).unwrap();
        assert_eq!((w.partitions(), w.label()), (2, "pubinputs:2"));
        let r = BuiltinRequest::from_bytes(&w.request(3)).unwrap();
        assert_eq!((r.seed, r.partitions), (6, 2));
        // Prove job 3 with the CPU backend and check it; a swapped pair is refused.
        let backend = gpu_proc::open_backend_from_file(
            shm_protocol::control::BackendKind::Cpu,
            &path,
            spec.circuit_id(),
            "pubinputs:2",
        )
        .unwrap();
        let job = w.open(3).unwrap();
        let run = crate::local::run_monolithic(
            &*backend,
            &crate::synthesis::Synthesizer::full(),
            &[job],
            1,
            &|_| {},
        )
        .unwrap();
        let proofs: Vec<Vec<u8>> = run
            .proofs
            .iter()
            .map(|p| proof_bytes(&p.proof).unwrap())
            .collect();
        assert!(proofs.iter().all(|p| p.len() == 192));
        w.verify(3, &proofs).unwrap();
        let swapped = vec![proofs[1].clone(), proofs[0].clone()];
        let e = w.verify(3, &swapped).unwrap_err();
        assert!(e.to_string().contains("does not verify"), "{e}");
        assert!(w.verify(4, &proofs).is_err());
        assert!(w.verify(3, &proofs[..1]).is_err());
    }
}
