//! Jobs opened once per job and shared by the workers that synthesize its partitions (a 32 GiB
//! C1 output is tens of MB of JSON whose vanilla proofs are verified on open: once per job, not
//! once per partition).

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, OnceLock};

use kernels::circuits::AnyCircuit;
use kernels::job::Job;
use shm_protocol::control::JobRequest;
use shm_protocol::request::MappedRequest;

use crate::SynthError;

/// Jobs kept at most; the oldest is dropped first (a job whose partitions all ran is dropped at
/// once, so this bounds only jobs that failed half-way or are being re-sent after a crash).
pub const MAX_JOBS: usize = 16;

type Opened = Result<Arc<dyn Job>, String>;

/// One job: opened once (by the first worker, outside the cache lock), and the count of its
/// partitions synthesized so far (under the cache lock).
struct Entry {
    opened: Arc<OnceLock<Opened>>,
    synthesized: usize,
}

/// The request bytes of one synthesis request, as synth-proc received them: inline, or the
/// sealed memfd that came with the message.
#[derive(Debug)]
pub enum RequestBytes {
    /// The bytes were in the message.
    Inline(Vec<u8>),
    /// A sealed memfd of `len` bytes (mapped read-only when the job is opened).
    Memfd {
        /// The memfd received with the message.
        fd: OwnedFd,
        /// Its length, as the message says.
        len: u64,
    },
    /// The message announced a memfd but none came with it.
    Missing,
}

impl RequestBytes {
    /// The request of `req`, taking its memfd from `fd` when it announces one.
    pub fn for_message(request: &JobRequest, fd: Option<OwnedFd>) -> RequestBytes {
        match (request, fd) {
            (JobRequest::Inline(b), _) => RequestBytes::Inline(b.clone()),
            (JobRequest::Memfd { len }, Some(fd)) => RequestBytes::Memfd { fd, len: *len },
            (JobRequest::Memfd { .. }, None) => RequestBytes::Missing,
        }
    }

    fn open(&self, circuit: &AnyCircuit) -> Result<Box<dyn Job>, String> {
        match self {
            RequestBytes::Inline(b) => kernels::job::open(circuit, b).map_err(|e| e.to_string()),
            RequestBytes::Memfd { fd, len } => {
                let fd = fd.try_clone().map_err(|e| format!("request memfd: {e}"))?;
                let mapped = MappedRequest::open(fd, *len).map_err(|e| e.to_string())?;
                // The job keeps what it parsed; the mapping goes when this returns.
                kernels::job::open(circuit, mapped.bytes()).map_err(|e| e.to_string())
            }
            RequestBytes::Missing => {
                Err("the message announced a request memfd and none came with it".into())
            }
        }
    }
}

/// Opened jobs by job id.
#[derive(Default)]
pub struct JobCache {
    jobs: Mutex<HashMap<u64, Entry>>,
}

impl JobCache {
    /// The job `job_id` of `circuit`, opened from `request` by the first worker that needs it
    /// (the others wait for that one, without holding the cache lock). A failure to open is
    /// remembered for the job's other partitions.
    pub fn job(
        &self,
        job_id: u64,
        circuit: &AnyCircuit,
        request: &RequestBytes,
    ) -> Result<Arc<dyn Job>, SynthError> {
        let opened = {
            let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
            if !jobs.contains_key(&job_id) && jobs.len() >= MAX_JOBS {
                if let Some(&oldest) = jobs.keys().min() {
                    jobs.remove(&oldest);
                }
            }
            jobs.entry(job_id)
                .or_insert_with(|| Entry {
                    opened: Arc::default(),
                    synthesized: 0,
                })
                .opened
                .clone()
        };
        let opened = opened.get_or_init(|| {
            let t = std::time::Instant::now();
            let job = request.open(circuit)?;
            tracing::debug!(job = job_id, %circuit, partitions = job.partitions(), secs = t.elapsed().as_secs_f64(), "job opened");
            Ok(Arc::from(job))
        });
        let job = opened.clone().map_err(|reason| SynthError::BadRequest {
            job_id,
            circuit: circuit.to_string(),
            reason,
        })?;
        if job.circuit() != *circuit {
            return Err(SynthError::BadRequest {
                job_id,
                circuit: circuit.to_string(),
                reason: format!("a `{}` request, not `{circuit}`", job.circuit()),
            });
        }
        Ok(job)
    }

    /// Notes that one partition of `job_id` was synthesized (or failed); the job is dropped once
    /// every partition has been.
    pub fn partition_finished(&self, job_id: u64) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = jobs.get_mut(&job_id) else {
            return;
        };
        entry.synthesized += 1;
        let total = match entry.opened.get() {
            Some(Ok(job)) => job.partitions(),
            _ => 0,
        };
        if entry.synthesized >= total {
            jobs.remove(&job_id);
        }
    }

    /// Jobs held (tests).
    pub fn len(&self) -> usize {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernels::job::BuiltinRequest;
    use shm_protocol::request::SealedRequest;

    fn memfd(bytes: &[u8]) -> RequestBytes {
        let sealed = SealedRequest::create("test", bytes).unwrap();
        RequestBytes::Memfd {
            fd: sealed.fd().try_clone_to_owned().unwrap(),
            len: sealed.len(),
        }
    }

    #[test]
    fn a_job_is_opened_once_and_dropped_after_its_partitions() {
        let circuit: AnyCircuit = "pubinputs:2".parse().unwrap();
        let bytes = BuiltinRequest {
            seed: 3,
            partitions: 2,
        }
        .to_bytes();
        let cache = JobCache::default();
        let a = cache.job(5, &circuit, &memfd(&bytes)).unwrap();
        // Another worker of the same job gets the same opened job, whatever it was given.
        let b = cache.job(5, &circuit, &RequestBytes::Missing).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!((a.partitions(), cache.len()), (2, 1));
        cache.partition_finished(5);
        assert_eq!(cache.len(), 1, "one partition still to go");
        cache.partition_finished(5);
        assert!(cache.is_empty(), "dropped once its partitions ran");
        // A request that cannot be used fails with the reason, and the failure is remembered
        // for the job's other partitions.
        let e = cache.job(6, &circuit, &memfd(&bytes[..7])).err().unwrap();
        assert!(
            e.to_string().contains("job 6") && e.to_string().contains("not 7"),
            "{e}"
        );
        assert!(cache.job(6, &circuit, &memfd(&bytes)).is_err());
        let e = cache
            .job(7, &circuit, &RequestBytes::Missing)
            .err()
            .unwrap();
        assert!(e.to_string().contains("none came with it"), "{e}");
        // At most MAX_JOBS jobs are held; the oldest goes first.
        for job in 100..100 + MAX_JOBS as u64 + 3 {
            cache
                .job(job, &circuit, &RequestBytes::Inline(bytes.clone()))
                .unwrap();
        }
        assert_eq!(cache.len(), MAX_JOBS);
    }
}
