//! Built-in-circuit proofs checked by a verifier that is not the service's: the verifying key read
//! from the `.params` file the test gave the service (bellperson's own reader, not the service's
//! SRS image), the public inputs computed here through `kernels::job` from the request the test
//! sent, and each partition's 192-byte proof checked with bellperson's `verify_proof`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bellperson::groth16::{
    prepare_verifying_key, verify_proof, PreparedVerifyingKey, Proof, VerifyingKey,
};
use blstrs::Bls12;
use kernels::circuits::AnyCircuit;

/// Bytes of one partition's proof.
pub const PROOF_BYTES: usize = 192;

/// The prepared verifying key of `circuit`'s test SRS ([`super::srs_for`]), read once per test
/// binary.
fn key(circuit: &str) -> Arc<PreparedVerifyingKey<Bls12>> {
    static KEYS: Mutex<Vec<(String, Arc<PreparedVerifyingKey<Bls12>>)>> = Mutex::new(Vec::new());
    let mut keys = KEYS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, k)) = keys.iter().find(|(c, _)| c == circuit) {
        return k.clone();
    }
    let path = super::srs_for(circuit);
    let file =
        std::fs::File::open(&path).unwrap_or_else(|e| panic!("opening `{}`: {e}", path.display()));
    let vk = VerifyingKey::<Bls12>::read(std::io::BufReader::new(file))
        .unwrap_or_else(|e| panic!("the verifying key of `{}`: {e}", path.display()));
    let k = Arc::new(prepare_verifying_key(&vk));
    keys.push((circuit.to_owned(), k.clone()));
    k
}

/// Checks the proof of a built-in job of `circuit` (its partitions' proofs in order) against the
/// public inputs of `request` (a `BuiltinRequest`'s bytes); panics naming what fails.
pub fn builtin_proof(circuit: &str, request: &[u8], proof: &[u8]) {
    if let Err(why) = check(circuit, request, proof) {
        panic!("`{circuit}` request {request:?}: {why}");
    }
}

/// Whether the test's verifier accepts `proof` for `request` (for negative checks).
pub fn accepts(circuit: &str, request: &[u8], proof: &[u8]) -> bool {
    check(circuit, request, proof).is_ok()
}

fn check(circuit: &str, request: &[u8], proof: &[u8]) -> Result<(), String> {
    let spec: AnyCircuit = circuit.parse().map_err(|e| format!("{e}"))?;
    let job = kernels::job::open(&spec, request).map_err(|e| format!("{e}"))?;
    if proof.len() != PROOF_BYTES * job.partitions() {
        return Err(format!(
            "{} proof bytes for {} partitions",
            proof.len(),
            job.partitions()
        ));
    }
    let key = key(circuit);
    for (k, bytes) in proof.chunks(PROOF_BYTES).enumerate() {
        let p = Proof::<Bls12>::read(bytes).map_err(|e| format!("partition {k}: {e}"))?;
        let inputs = job.public_inputs(k).map_err(|e| format!("{e}"))?;
        match verify_proof(&key, &p, &inputs) {
            Ok(true) => {}
            Ok(false) => return Err(format!("partition {k}: the proof does not verify")),
            Err(e) => return Err(format!("partition {k}: verifier error: {e}")),
        }
    }
    Ok(())
}

/// Built-in jobs this test binary submitted, by service (its socket) and job number.
type Jobs = BTreeMap<(PathBuf, u64), (String, Vec<u8>)>;
static SUBMITTED: Mutex<Jobs> = Mutex::new(BTreeMap::new());

/// Records that job `id` of the service at `socket` is `circuit` with `request`, for
/// [`check_submitted`].
pub fn record_submitted(socket: &Path, id: u64, circuit: &str, request: &[u8]) {
    SUBMITTED.lock().unwrap_or_else(|e| e.into_inner()).insert(
        (socket.to_owned(), id),
        (circuit.to_owned(), request.to_vec()),
    );
}

fn submitted(socket: &Path, id: u64) -> Option<(String, Vec<u8>)> {
    let jobs = SUBMITTED.lock().unwrap_or_else(|e| e.into_inner());
    jobs.get(&(socket.to_owned(), id)).cloned()
}

/// Whether job `id` of the service at `socket` was recorded.
pub fn is_submitted(socket: &Path, id: u64) -> bool {
    submitted(socket, id).is_some()
}

/// Checks the proof of job `id` of the service at `socket` with [`builtin_proof`] if the job was
/// recorded (a job the test did not submit through its helpers is not checked here).
pub fn check_submitted(socket: &Path, id: u64, proof: &[u8]) {
    if let Some((circuit, request)) = submitted(socket, id) {
        builtin_proof(&circuit, &request, proof);
    }
}
