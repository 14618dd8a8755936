//! Proof checks off the pipeline's lock: a small pool of verifier threads.
//!
//! A pairing check takes milliseconds, and a 32 GiB PoRep job has ten partitions; run under the
//! pipeline's lock (as it once was, inside the DONE sweep) every `submit` and `status` waited
//! behind it. Now the core only asks for a DONE slot's proof, with the partition's public inputs
//! and its circuit's prepared verifying key, to be checked (`Action::Verify` with a
//! [`VerifyTask`]); the dispatcher hands it to the pool, and the pool's verdict comes back into
//! the dispatcher's channel ([`Verdict`] as `Event::Verified`), which applies it under the lock
//! like any other event:
//! a proof is stored with its job only once it has verified, so a job is delivered only when
//! every partition verified. A verdict for a job that ended meanwhile is counted as a duplicate.
//!
//! The check itself is a [`Verifier`]: [`Groth16`] in production; the pipeline's tests put a
//! verifier there that blocks until they let it go.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Instant;

use bellperson::groth16::{verify_proof, Proof};
use blstrs::Bls12;

use super::core::{Event, ProofRejection, Verdict, VerifyTask};
use super::mail::Mail;
use crate::sync::lock;

/// Checks one proof.
pub trait Verifier: Send + Sync {
    /// Whether `task`'s proof verifies against its inputs and key.
    fn verify(&self, task: &VerifyTask) -> Result<(), ProofRejection>;
}

/// The Groth16 check (bellperson's `verify_proof`).
pub struct Groth16;

impl Verifier for Groth16 {
    fn verify(&self, task: &VerifyTask) -> Result<(), ProofRejection> {
        let proof = Proof::<Bls12>::read(&task.proof[..])
            .map_err(|e| ProofRejection::Malformed(e.to_string()))?;
        match verify_proof(&task.pvk, &proof, &task.inputs) {
            Ok(true) => Ok(()),
            Ok(false) => Err(ProofRejection::DoesNotVerify),
            Err(e) => Err(ProofRejection::Error(e.to_string())),
        }
    }
}

/// Threads checking proofs; each verdict is sent to the dispatcher as `Event::Verified`. Dropping
/// the pool lets its threads finish the task in hand and end.
pub(super) struct VerifierPool {
    tasks: Option<mpsc::Sender<VerifyTask>>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl VerifierPool {
    /// `threads` threads (at least one) running `verifier`, answering on `events`.
    pub(super) fn start(
        threads: usize,
        verifier: Arc<dyn Verifier>,
        events: mpsc::Sender<Mail>,
    ) -> std::io::Result<VerifierPool> {
        let (tx, rx) = mpsc::channel::<VerifyTask>();
        let rx = Arc::new(Mutex::new(rx));
        let mut pool = VerifierPool {
            tasks: Some(tx),
            threads: Vec::new(),
        };
        for i in 0..threads.max(1) {
            let (rx, verifier, events) = (rx.clone(), verifier.clone(), events.clone());
            let t = thread::Builder::new()
                .name(format!("verify {i}"))
                .spawn(move || serve(&rx, verifier.as_ref(), &events))?;
            pool.threads.push(t);
        }
        Ok(pool)
    }

    /// Queues a check; its verdict arrives as an event.
    pub(super) fn submit(&self, task: VerifyTask) {
        if let Some(tx) = &self.tasks {
            // The threads outlive the sender (they end once it is dropped).
            let _ = tx.send(task);
        }
    }
}

impl Drop for VerifierPool {
    fn drop(&mut self) {
        self.tasks = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The size of the pool: `asked`, or two (one on a one-core host).
pub(super) fn pool_size(asked: usize) -> usize {
    match asked {
        0 => thread::available_parallelism().map_or(1, |n| n.get().min(2)),
        n => n,
    }
}

/// One verifier thread: checks tasks until the pool is dropped or the dispatcher is gone.
fn serve(
    tasks: &Mutex<mpsc::Receiver<VerifyTask>>,
    verifier: &dyn Verifier,
    events: &mpsc::Sender<Mail>,
) {
    loop {
        // The receiver is shared: one idle thread waits on it, the others on its lock.
        let Ok(task) = lock(tasks).recv() else {
            return;
        };
        let t = Instant::now();
        let result =
            catch_unwind(AssertUnwindSafe(|| verifier.verify(&task))).unwrap_or_else(|panic| {
                Err(ProofRejection::Error(format!(
                    "the verifier panicked: {}",
                    kernels::panic_message(panic.as_ref())
                )))
            });
        let verdict = Verdict {
            job_id: task.job_id,
            partition: task.partition,
            proof: task.proof,
            result,
            took: t.elapsed(),
        };
        if events.send(Mail::Event(Event::Verified(verdict))).is_err() {
            return;
        }
    }
}
