//! Filecoin proof requests, parsed once per job and shared by the workers that synthesize its
//! partitions (a 32 GiB C1 output is tens of MB of JSON whose vanilla proofs are verified on open:
//! once per job, not once per partition).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use kernels::filecoin::{PartitionedJob, ProofKind};

use crate::SynthError;

/// Jobs kept at most; the oldest is dropped first (a job whose partitions all ran is dropped at
/// once, so this bounds only jobs that failed half-way or are being re-sent after a crash).
const MAX_JOBS: usize = 16;

type Opened = Result<Arc<dyn PartitionedJob>, String>;

struct Entry {
    opened: OnceLock<Opened>,
    synthesized: AtomicUsize,
}

/// Open requests by job id.
#[derive(Default)]
pub struct RequestCache {
    jobs: Mutex<HashMap<u64, Arc<Entry>>>,
}

impl RequestCache {
    /// The job `job_id` of `kind` read from `path`, opened by the first worker that needs it
    /// (the others wait for that one, without holding the cache lock).
    pub fn job(
        &self,
        job_id: u64,
        kind: ProofKind,
        path: &Path,
    ) -> Result<Arc<dyn PartitionedJob>, SynthError> {
        let entry = {
            let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
            if !jobs.contains_key(&job_id) && jobs.len() >= MAX_JOBS {
                if let Some(&oldest) = jobs.keys().min() {
                    jobs.remove(&oldest);
                }
            }
            jobs.entry(job_id)
                .or_insert_with(|| {
                    Arc::new(Entry {
                        opened: OnceLock::new(),
                        synthesized: AtomicUsize::new(0),
                    })
                })
                .clone()
        };
        let opened = entry.opened.get_or_init(|| {
            let t = std::time::Instant::now();
            let job = kernels::filecoin::open_job_file(Some(kind), path).map_err(|e| e.to_string())?;
            tracing::info!(job_id, %kind, partitions = job.partitions(), secs = t.elapsed().as_secs_f64(), "proof request opened");
            Ok(Arc::from(job))
        });
        opened.clone().map_err(|reason| SynthError::BadRequest {
            path: path.to_owned(),
            reason,
        })
    }

    /// Notes that one partition of `job_id` was synthesized (or failed); the request is dropped
    /// once every partition has been.
    pub fn partition_finished(&self, job_id: u64) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = jobs.get(&job_id) else {
            return;
        };
        // Relaxed: the counter is read and written under the cache lock.
        let n = entry.synthesized.fetch_add(1, Ordering::Relaxed) + 1;
        let total = match entry.opened.get() {
            Some(Ok(job)) => job.partitions(),
            _ => 0,
        };
        if n >= total {
            jobs.remove(&job_id);
        }
    }

    /// Requests held (tests).
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
    use kernels::filecoin::fixture;

    #[test]
    fn a_request_is_opened_once_per_job_and_dropped_after_its_partitions() {
        let tmp = std::env::temp_dir().join(format!("synth-proc-requests-{}", std::process::id()));
        fixture::use_test_dirs(&tmp.join("params"), &tmp.join("parents")).unwrap();
        let sector = fixture::seal_sector(
            kernels::filecoin::RegisteredSealProof::StackedDrg2KiBV1_1,
            &tmp,
            1,
            1,
        )
        .unwrap();
        let path = tmp.join("c1.json");
        std::fs::write(&path, &sector.c1_json).unwrap();
        let cache = RequestCache::default();
        let a = cache.job(5, sector.kind(), &path).unwrap();
        // Another worker of the same job gets the same parsed request, even with the file gone.
        std::fs::remove_file(&path).unwrap();
        let b = cache.job(5, sector.kind(), &path).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!((a.partitions(), cache.len()), (1, 1));
        cache.partition_finished(5);
        assert!(cache.is_empty(), "dropped once its only partition ran");
        // A request that cannot be read fails with its path, and the failure is remembered for
        // the job's other partitions instead of re-reading.
        let e = cache.job(6, sector.kind(), &path).err().unwrap();
        assert!(
            matches!(&e, SynthError::BadRequest { path: p, .. } if *p == path),
            "{e}"
        );
        assert!(e.to_string().contains("c1.json"), "{e}");
        std::fs::write(&path, &sector.c1_json).unwrap();
        assert!(cache.job(6, sector.kind(), &path).is_err());
        // At most MAX_JOBS requests are held; the oldest job goes first.
        for job in 100..100 + MAX_JOBS as u64 + 3 {
            cache.job(job, sector.kind(), &path).unwrap();
        }
        assert_eq!(cache.len(), MAX_JOBS);
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
