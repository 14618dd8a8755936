//! The service's durable job journal: one embedded SQLite file (`jobs.sqlite`), so an accepted
//! job survives a launcher crash and job ids never repeat across restarts.
//!
//! # The promise
//! `splitprover run` answers `Accepted` only after the job's row, request bytes included, is
//! committed here ([`Journal::accept`]). At start it re-submits every row still `accepted`
//! ([`Journal::unfinished`]) to the pipeline and keeps serving the finished ones until they are
//! fetched or expire ([`Journal::expire`]). The id a client sees is the row id, an
//! `AUTOINCREMENT` key: SQLite keeps the largest id ever handed out in `sqlite_sequence`, so an id
//! is never reused, not even after its row was deleted.
//!
//! # Request bytes
//! A request of at most [`INLINE_REQUEST_MAX`] bytes (a built-in circuit's is 12) is stored in its
//! row. A larger one (a Filecoin C1 output is tens of MiB) is stored content-addressed as
//! `<journal>.requests/<sha256>`, written and fsync'd (file and directory) before the row that
//! names it is committed, and checked against its hash when read back. This keeps the database
//! small, so `integrity_check` at start stays fast, and lets a restart read one request at a time.
//! A request file is removed once no accepted job needs it; files left by a crash between the
//! write and the commit are removed at the next open.
//!
//! # Durability: WAL with `synchronous = FULL`
//! The journal runs in WAL mode (readers never block the writer; one append per commit). With WAL,
//! `synchronous = NORMAL` fsyncs only at checkpoints: a commit survives a *process* crash (the WAL
//! is in the page cache, which the kernel writes out) but the last commits can be lost on power
//! loss or a kernel crash. Our promise is "acknowledged ⇒ survives", and a lost acknowledged job is
//! exactly the failure this journal exists to prevent, so we use `FULL`: every commit fsyncs the
//! WAL before `Accepted` is sent. The cost is one fsync per state change of a job (two per job:
//! accepted, finished), a millisecond or so on a data-centre SSD, against proofs that take from
//! tens of milliseconds to minutes.
//!
//! # Corruption
//! A file that is not a SQLite database, fails `PRAGMA integrity_check`, or holds another schema
//! is never silently replaced or repaired: [`Journal::open`] renames it (and its `-wal`/`-shm` and
//! request files) aside to `<file>.corrupt-<unix time>` and fails with [`JournalError::Corrupt`], which names
//! both paths. The service refuses to start; the next start begins with an empty journal (and
//! says that older journals lie aside), so the operator decides what to salvage from the copy.
//! A journal written by a newer splitprover (a higher `user_version`) is refused and left where
//! it is. Errors that are not about the content (permissions, a full disk) leave the file alone.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use std::io::Write as _;

use crate::jobs::JobTimes;
use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension};
use sha2::{Digest, Sha256};

/// The schema version kept in `PRAGMA user_version`. Version 2 added the `cancelled` state; a
/// version-1 journal is migrated at open (the table rebuilt in one transaction, ids and the id
/// sequence kept). Version 3 added `request_id` (the client's idempotency key, or `job-<id>`)
/// and `times` (where a finished job's time went); a version-2 journal gains the two columns.
pub const SCHEMA_VERSION: i64 = 3;

/// The request id given to a job whose client sent none.
pub fn generated_request_id(id: u64) -> String {
    format!("job-{id}")
}

/// Requests up to this size are stored in their row; larger ones in a content-addressed file.
pub const INLINE_REQUEST_MAX: usize = 64 << 10;

const SCHEMA: &str = "
CREATE TABLE jobs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    circuit      TEXT    NOT NULL,
    priority     INTEGER NOT NULL DEFAULT 0,
    request      BLOB,
    request_file TEXT,
    state        TEXT    NOT NULL CHECK (state IN ('accepted', 'succeeded', 'failed', 'cancelled')),
    submitted_at INTEGER NOT NULL,
    finished_at  INTEGER,
    result       BLOB,
    error        TEXT,
    fetched_at   INTEGER,
    request_id   TEXT,
    times        TEXT
);
CREATE INDEX jobs_by_state ON jobs (state);
CREATE UNIQUE INDEX jobs_by_request_id ON jobs (request_id);
";

/// Version 2 → 3.
const MIGRATE_V2: &str = "
ALTER TABLE jobs ADD COLUMN request_id TEXT;
ALTER TABLE jobs ADD COLUMN times TEXT;
UPDATE jobs SET request_id = 'job-' || id;
CREATE UNIQUE INDEX jobs_by_request_id ON jobs (request_id);
";

/// Why the journal cannot be used. Every message names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// The file is not a journal this version can trust; it was moved aside.
    #[error(
        "job journal `{}` is corrupt ({reason}); it was moved aside to `{}` and nothing in it \
         was re-queued\nhint: the service refuses to start this once; start it again to begin \
         with an empty journal, and inspect the copy with `sqlite3` to salvage its jobs",
        path.display(),
        moved_to.display()
    )]
    Corrupt {
        /// The journal.
        path: PathBuf,
        /// Where it is now.
        moved_to: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// The file is corrupt and could not even be moved aside.
    #[error("job journal `{}` is corrupt ({reason}) and cannot be moved aside: {source}", path.display())]
    CannotMoveAside {
        /// The journal.
        path: PathBuf,
        /// What was wrong.
        reason: String,
        /// Why the rename failed.
        source: std::io::Error,
    },
    /// A newer splitprover wrote it.
    #[error(
        "job journal `{}` has schema version {found}, this splitprover knows {SCHEMA_VERSION}\n\
         hint: run the splitprover that wrote it, or move the file away",
        path.display()
    )]
    Newer {
        /// The journal.
        path: PathBuf,
        /// Its version.
        found: i64,
    },
    /// Its directory cannot be created.
    #[error("cannot create the journal directory `{}`: {source}", dir.display())]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Any other SQLite failure.
    #[error("job journal `{}`: {source}", path.display())]
    Sqlite {
        /// The journal.
        path: PathBuf,
        /// Why.
        source: rusqlite::Error,
    },
    /// A stored result that does not decode (the row is reported, not the whole journal).
    #[error("job journal `{}`: job {id} has a malformed result", path.display())]
    BadResult {
        /// The journal.
        path: PathBuf,
        /// The job.
        id: u64,
    },
    /// A request file cannot be written or read back intact.
    #[error("job journal: request file `{}`: {reason}", path.display())]
    RequestFile {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// A job's state in the journal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobState {
    /// Acknowledged to the client, not finished: re-queued at start.
    Accepted,
    /// Finished with proofs.
    Succeeded,
    /// Finished with an error.
    Failed,
    /// Cancelled by a client ([`Journal::cancel`]): never re-queued.
    Cancelled,
}

impl JobState {
    /// The journal's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Accepted => "accepted",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    fn parse(s: &str) -> Option<JobState> {
        match s {
            "accepted" => Some(JobState::Accepted),
            "succeeded" => Some(JobState::Succeeded),
            "failed" => Some(JobState::Failed),
            "cancelled" => Some(JobState::Cancelled),
            _ => None,
        }
    }
}

/// One row.
#[derive(Clone, Debug)]
pub struct JournalJob {
    /// The job's id, in the pipeline and to clients.
    pub id: u64,
    /// The circuit spec (`sha-chain:1`, `porep:StackedDrg2KiBV1_1`).
    pub circuit: String,
    /// Higher first when re-queued.
    pub priority: i64,
    /// The request bytes (`kernels::job`).
    pub request: Vec<u8>,
    /// Its state.
    pub state: JobState,
    /// Unix milliseconds.
    pub submitted_at: i64,
    /// Unix milliseconds.
    pub finished_at: Option<i64>,
    /// Proof bytes per partition, for a succeeded job.
    pub proofs: Vec<Vec<u8>>,
    /// Why it failed.
    pub error: Option<String>,
    /// When a client last got its result (unix milliseconds).
    pub fetched_at: Option<i64>,
    /// The client's idempotency key, or `job-<id>`: an alias of the id, what cuzk's API calls
    /// the job id.
    pub request_id: String,
    /// Where a finished job's time went (rows finished before version 3 have none).
    pub times: Option<JobTimes>,
}

/// The open journal (one connection; the service serializes access with a mutex).
pub struct Journal {
    conn: Connection,
    path: PathBuf,
    /// `<journal>.requests`: the content-addressed request files.
    requests: PathBuf,
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Journal {
    /// Opens (creating if missing) and checks the journal at `path`. A corrupt file is moved aside
    /// and reported ([`JournalError::Corrupt`]).
    pub fn open(path: &Path) -> Result<Journal, JournalError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| JournalError::Dir {
                dir: dir.to_owned(),
                source,
            })?;
        }
        match Self::open_checked(path) {
            Ok(j) => {
                j.remove_orphans();
                Ok(j)
            }
            Err(Problem::Corrupt(reason)) => Err(move_aside(path, reason)),
            Err(Problem::Other(e)) => Err(e),
        }
    }

    fn open_checked(path: &Path) -> Result<Journal, Problem> {
        let sql = |source: rusqlite::Error| classify(path, source);
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sql)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(sql)?;
        // The first read of the header: "file is not a database" shows here.
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(sql)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Problem::Other(JournalError::Sqlite {
                path: path.to_owned(),
                source: rusqlite::Error::InvalidParameterName(format!(
                    "cannot switch to WAL mode (got `{mode}`)"
                )),
            }));
        }
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(sql)?;
        let check: Vec<String> = {
            let mut st = conn.prepare("PRAGMA integrity_check").map_err(sql)?;
            let rows = st.query_map([], |r| r.get::<_, String>(0)).map_err(sql)?;
            rows.collect::<Result<_, _>>().map_err(sql)?
        };
        if check != ["ok"] {
            return Err(Problem::Corrupt(format!(
                "integrity check: {}",
                check.join("; ")
            )));
        }
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sql)?;
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name <> 'sqlite_sequence'",
                [],
                |r| r.get(0),
            )
            .map_err(sql)?;
        match (version, tables) {
            (0, 0) => {
                conn.execute_batch(&format!(
                    "BEGIN; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
                ))
                .map_err(sql)?;
            }
            (1, _) => {
                // Version 1's CHECK does not admit `cancelled`: the table is rebuilt. The id
                // sequence is carried over, so no id is ever reused.
                conn.execute_batch(&format!(
                    "BEGIN;
                     ALTER TABLE jobs RENAME TO jobs_v1;
                     DROP INDEX jobs_by_state;
                     {SCHEMA}
                     INSERT INTO jobs SELECT id, circuit, priority, request, request_file, state,
                         submitted_at, finished_at, result, error, fetched_at,
                         'job-' || id, NULL FROM jobs_v1;
                     INSERT INTO sqlite_sequence (name, seq) SELECT 'jobs', 0
                         WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'jobs');
                     UPDATE sqlite_sequence SET seq = (SELECT max(seq) FROM sqlite_sequence
                         WHERE name IN ('jobs', 'jobs_v1')) WHERE name = 'jobs';
                     DROP TABLE jobs_v1;
                     PRAGMA user_version = {SCHEMA_VERSION};
                     COMMIT;"
                ))
                .map_err(sql)?;
            }
            (2, _) => {
                conn.execute_batch(&format!(
                    "BEGIN; {MIGRATE_V2} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
                ))
                .map_err(sql)?;
            }
            (SCHEMA_VERSION, _) => {
                let ok: i64 = conn
                    .query_row(
                        "SELECT count(*) FROM pragma_table_info('jobs') WHERE name IN \
                         ('id','circuit','priority','request','request_file','state',\
                          'submitted_at','finished_at','result','error','fetched_at',\
                          'request_id','times')",
                        [],
                        |r| r.get(0),
                    )
                    .map_err(sql)?;
                if ok != 13 {
                    return Err(Problem::Corrupt(
                        "the `jobs` table does not have the expected columns".into(),
                    ));
                }
            }
            (v, _) if v > SCHEMA_VERSION => {
                return Err(Problem::Other(JournalError::Newer {
                    path: path.to_owned(),
                    found: v,
                }))
            }
            (v, _) => {
                return Err(Problem::Corrupt(format!(
                    "unknown schema (version {v}, {tables} tables)"
                )))
            }
        }
        Ok(Journal {
            conn,
            path: path.to_owned(),
            requests: requests_dir(path),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sql(&self, source: rusqlite::Error) -> JournalError {
        JournalError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Records an accepted job and commits it (fsync'd): only then may it be acknowledged.
    /// Returns its id, larger than every id this journal ever gave.
    pub fn accept(
        &mut self,
        circuit: &str,
        priority: i64,
        request: &[u8],
    ) -> Result<u64, JournalError> {
        self.accept_as(circuit, priority, request, None)
    }

    /// [`Journal::accept`] under a client's idempotency key (`None`: `job-<id>`). A key already
    /// in the journal is refused by the unique index: look it up first ([`Journal::find`]).
    pub fn accept_as(
        &mut self,
        circuit: &str,
        priority: i64,
        request: &[u8],
        request_id: Option<&str>,
    ) -> Result<u64, JournalError> {
        let (inline, file) = if request.len() <= INLINE_REQUEST_MAX {
            (Some(request), None)
        } else {
            (None, Some(self.store_request(request)?))
        };
        // One transaction: the row never exists without its request id.
        let inserted = (|| -> rusqlite::Result<u64> {
            let tx = self.conn.transaction()?;
            tx.execute(
                "INSERT INTO jobs (circuit, priority, request, request_file, state, submitted_at, \
                 request_id) VALUES (?1, ?2, ?3, ?4, 'accepted', ?5, ?6)",
                params![circuit, priority, inline, file, now_ms(), request_id],
            )?;
            let id = tx.last_insert_rowid() as u64;
            if request_id.is_none() {
                tx.execute(
                    "UPDATE jobs SET request_id = ?2 WHERE id = ?1",
                    params![id as i64, generated_request_id(id)],
                )?;
            }
            tx.commit()?;
            Ok(id)
        })();
        match inserted {
            Ok(id) => Ok(id),
            Err(e) => {
                if let Some(f) = &file {
                    self.release_request(f);
                }
                Err(self.sql(e))
            }
        }
    }

    /// Writes `request` as `<requests>/<sha256>` durably (file, then directory, fsync'd); returns
    /// the name.
    fn store_request(&self, request: &[u8]) -> Result<String, JournalError> {
        let name = hex_digest(request);
        let path = self.requests.join(&name);
        let err = |reason: String| JournalError::RequestFile {
            path: path.clone(),
            reason,
        };
        std::fs::create_dir_all(&self.requests).map_err(|e| err(format!("cannot create: {e}")))?;
        let tmp = self
            .requests
            .join(format!("{name}.tmp-{}", std::process::id()));
        let written = (|| -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(request)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            std::fs::File::open(&self.requests)?.sync_all()
        })();
        written.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            err(format!("cannot write: {e}"))
        })?;
        Ok(name)
    }

    /// Reads a stored request back, checking its hash.
    fn load_request(&self, name: &str) -> Result<Vec<u8>, JournalError> {
        let path = self.requests.join(name);
        let bytes = std::fs::read(&path).map_err(|e| JournalError::RequestFile {
            path: path.clone(),
            reason: format!("cannot read: {e}"),
        })?;
        if hex_digest(&bytes) != name {
            return Err(JournalError::RequestFile {
                path,
                reason: "content does not match its hash".into(),
            });
        }
        Ok(bytes)
    }

    /// Removes a request file once no accepted job names it.
    fn release_request(&self, name: &str) {
        let users: i64 = self
            .conn
            .query_row(
                "SELECT count(*) FROM jobs WHERE state = 'accepted' AND request_file = ?1",
                params![name],
                |r| r.get(0),
            )
            .unwrap_or(1);
        if users == 0 {
            let _ = std::fs::remove_file(self.requests.join(name));
        }
    }

    /// Removes request files no accepted job names (left by a crash before the commit, or after
    /// the job finished).
    fn remove_orphans(&self) {
        let Ok(entries) = std::fs::read_dir(&self.requests) else {
            return;
        };
        for e in entries.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.contains(".tmp-") {
                let _ = std::fs::remove_file(e.path());
            } else {
                self.release_request(&name);
            }
        }
    }

    /// Removes a job that was never acknowledged (the pipeline refused it right after the
    /// commit). Its id is not reused.
    pub fn forget(&mut self, id: u64) -> Result<(), JournalError> {
        let file = self.request_file_of(id)?;
        self.conn
            .execute("DELETE FROM jobs WHERE id = ?1", params![id as i64])
            .map_err(|e| self.sql(e))?;
        if let Some(f) = file {
            self.release_request(&f);
        }
        Ok(())
    }

    fn request_file_of(&self, id: u64) -> Result<Option<String>, JournalError> {
        self.conn
            .query_row(
                "SELECT request_file FROM jobs WHERE id = ?1",
                params![id as i64],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()
            .map(Option::flatten)
            .map_err(|e| self.sql(e))
    }

    /// The request id of job `id`.
    pub fn get_request_id(&self, id: u64) -> Result<Option<String>, JournalError> {
        self.conn
            .query_row(
                "SELECT coalesce(request_id, 'job-' || id) FROM jobs WHERE id = ?1",
                params![id as i64],
                |r| r.get::<_, String>(0),
            )
            .optional()
            .map_err(|e| self.sql(e))
    }

    /// The state of job `id`.
    pub fn state_of(&self, id: u64) -> Result<Option<JobState>, JournalError> {
        let state = self
            .conn
            .query_row(
                "SELECT state FROM jobs WHERE id = ?1",
                params![id as i64],
                |r| r.get::<_, String>(0),
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        Ok(state.as_deref().and_then(JobState::parse))
    }

    /// Gives a finished job its generated id back, freeing its client's request id for a new
    /// job (a retry of a request that failed or was cancelled runs again).
    pub fn release_request_id(&mut self, id: u64) -> Result<(), JournalError> {
        self.conn
            .execute(
                "UPDATE jobs SET request_id = 'job-' || id WHERE id = ?1 AND state <> 'accepted'",
                params![id as i64],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// The job a request id names (a client's key, or `job-<id>`).
    pub fn find(&self, request_id: &str) -> Result<Option<u64>, JournalError> {
        self.conn
            .query_row(
                "SELECT id FROM jobs WHERE request_id = ?1",
                params![request_id],
                |r| r.get::<_, i64>(0),
            )
            .optional()
            .map(|id| id.map(|i| i as u64))
            .map_err(|e| self.sql(e))
    }

    /// Records how an accepted job ended. A job already finished keeps its first outcome.
    pub fn finish(
        &mut self,
        id: u64,
        outcome: Result<&[Vec<u8>], &str>,
    ) -> Result<(), JournalError> {
        self.finish_timed(id, outcome, None)
    }

    /// [`Journal::finish`] with where the job's time went.
    pub fn finish_timed(
        &mut self,
        id: u64,
        outcome: Result<&[Vec<u8>], &str>,
        times: Option<&JobTimes>,
    ) -> Result<(), JournalError> {
        let times = times.and_then(|t| serde_json::to_string(t).ok());
        let (state, result, error) = match outcome {
            Ok(proofs) => (JobState::Succeeded, Some(encode_proofs(proofs)), None),
            Err(e) => (JobState::Failed, None, Some(e)),
        };
        let file = self.request_file_of(id)?;
        self.conn
            .execute(
                "UPDATE jobs SET state = ?2, finished_at = ?3, result = ?4, error = ?5, \
                 times = ?6 WHERE id = ?1 AND state = 'accepted'",
                params![id as i64, state.as_str(), now_ms(), result, error, times],
            )
            .map_err(|e| self.sql(e))?;
        // The request is not needed any more.
        if let Some(f) = file {
            self.release_request(&f);
        }
        Ok(())
    }

    /// Marks an accepted job `cancelled` (error `cancelled`): it is never re-queued. Returns
    /// whether it was still accepted.
    pub fn cancel(&mut self, id: u64) -> Result<bool, JournalError> {
        let file = self.request_file_of(id)?;
        let n = self
            .conn
            .execute(
                "UPDATE jobs SET state = 'cancelled', finished_at = ?2, error = 'cancelled' \
                 WHERE id = ?1 AND state = 'accepted'",
                params![id as i64, now_ms()],
            )
            .map_err(|e| self.sql(e))?;
        if let Some(f) = file {
            self.release_request(&f);
        }
        Ok(n == 1)
    }

    /// Notes that a client got the result of `id`.
    pub fn mark_fetched(&mut self, id: u64) -> Result<(), JournalError> {
        self.conn
            .execute(
                "UPDATE jobs SET fetched_at = ?2 WHERE id = ?1",
                params![id as i64, now_ms()],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// One job.
    pub fn get(&self, id: u64) -> Result<Option<JournalJob>, JournalError> {
        let row = self
            .conn
            .query_row(
                "SELECT id, circuit, priority, request, request_file, state, submitted_at, \
                 finished_at, result, error, fetched_at, request_id, times FROM jobs \
                 WHERE id = ?1",
                params![id as i64],
                raw_row,
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        row.map(|r| self.decode(r)).transpose()
    }

    /// The ids of every accepted, unfinished job: highest priority first, then oldest first
    /// (read each with [`Journal::get`]: requests can be large).
    pub fn unfinished(&self) -> Result<Vec<u64>, JournalError> {
        let mut st = self
            .conn
            .prepare("SELECT id FROM jobs WHERE state = 'accepted' ORDER BY priority DESC, id")
            .map_err(|e| self.sql(e))?;
        let ids = st
            .query_map([], |r| r.get::<_, i64>(0))
            .map_err(|e| self.sql(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.sql(e))?;
        Ok(ids.into_iter().map(|i| i as u64).collect())
    }

    /// Number of accepted, unfinished jobs.
    pub fn count_unfinished(&self) -> Result<u64, JournalError> {
        self.query_u64("SELECT count(*) FROM jobs WHERE state = 'accepted'")
    }

    /// The largest id ever handed out (0 for a new journal).
    pub fn last_id(&self) -> Result<u64, JournalError> {
        self.query_u64("SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0)")
    }

    /// The one non-negative integer `sql` selects.
    fn query_u64(&self, sql: &str) -> Result<u64, JournalError> {
        self.conn
            .query_row(sql, [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(|e| self.sql(e))
    }

    /// Deletes finished jobs whose result was fetched more than `fetched` ago, or that finished
    /// more than `unfetched` ago without being fetched. Returns how many went.
    pub fn expire(
        &mut self,
        now_ms: i64,
        fetched: Duration,
        unfetched: Duration,
    ) -> Result<usize, JournalError> {
        let fetched_before = now_ms.saturating_sub(fetched.as_millis() as i64);
        let finished_before = now_ms.saturating_sub(unfetched.as_millis() as i64);
        self.conn
            .execute(
                "DELETE FROM jobs WHERE state <> 'accepted' AND \
                 ((fetched_at IS NOT NULL AND fetched_at <= ?1) OR \
                  (fetched_at IS NULL AND finished_at <= ?2))",
                params![fetched_before, finished_before],
            )
            .map_err(|e| self.sql(e))
    }

    fn decode(&self, r: RawRow) -> Result<JournalJob, JournalError> {
        let bad = || JournalError::BadResult {
            path: self.path.clone(),
            id: r.id as u64,
        };
        let state = JobState::parse(&r.state).ok_or_else(bad)?;
        let proofs = match &r.result {
            Some(b) => decode_proofs(b).ok_or_else(bad)?,
            None => Vec::new(),
        };
        // Only an accepted job still needs (and still has) its request file.
        let request = match (r.request, &r.request_file) {
            (Some(bytes), _) => bytes,
            (None, Some(name)) if state == JobState::Accepted => self.load_request(name)?,
            (None, _) => Vec::new(),
        };
        Ok(JournalJob {
            id: r.id as u64,
            circuit: r.circuit,
            priority: r.priority,
            request,
            state,
            submitted_at: r.submitted_at,
            finished_at: r.finished_at,
            proofs,
            error: r.error,
            fetched_at: r.fetched_at,
            request_id: r
                .request_id
                .unwrap_or_else(|| generated_request_id(r.id as u64)),
            times: r.times.and_then(|t| serde_json::from_str(&t).ok()),
        })
    }
}

struct RawRow {
    id: i64,
    circuit: String,
    priority: i64,
    request: Option<Vec<u8>>,
    request_file: Option<String>,
    state: String,
    submitted_at: i64,
    finished_at: Option<i64>,
    result: Option<Vec<u8>>,
    error: Option<String>,
    fetched_at: Option<i64>,
    request_id: Option<String>,
    times: Option<String>,
}

fn raw_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawRow> {
    Ok(RawRow {
        id: r.get(0)?,
        circuit: r.get(1)?,
        priority: r.get(2)?,
        request: r.get(3)?,
        request_file: r.get(4)?,
        state: r.get(5)?,
        submitted_at: r.get(6)?,
        finished_at: r.get(7)?,
        result: r.get(8)?,
        error: r.get(9)?,
        fetched_at: r.get(10)?,
        request_id: r.get(11)?,
        times: r.get(12)?,
    })
}

fn requests_dir(journal: &Path) -> PathBuf {
    let mut s = journal.as_os_str().to_owned();
    s.push(".requests");
    PathBuf::from(s)
}

fn hex_digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Proofs as stored: per partition a little-endian u32 length, then the bytes.
fn encode_proofs(proofs: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(proofs.iter().map(|p| p.len() + 4).sum());
    for p in proofs {
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}

fn decode_proofs(mut b: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let (len, rest) = b.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return None;
        }
        out.push(rest[..len].to_vec());
        b = &rest[len..];
    }
    Some(out)
}

enum Problem {
    Corrupt(String),
    Other(JournalError),
}

/// Content problems (the file is not a database, or a damaged one) versus everything else.
fn classify(path: &Path, source: rusqlite::Error) -> Problem {
    match source.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
            Problem::Corrupt(source.to_string())
        }
        _ => Problem::Other(JournalError::Sqlite {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Renames `path` (and its WAL and shared-memory files) to `<path>.corrupt-<unix time>`.
fn move_aside(path: &Path, reason: String) -> JournalError {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let aside = |p: &Path| {
        let mut s = p.as_os_str().to_owned();
        s.push(format!(".corrupt-{secs}"));
        PathBuf::from(s)
    };
    let moved_to = aside(path);
    if let Err(source) = std::fs::rename(path, &moved_to) {
        return JournalError::CannotMoveAside {
            path: path.to_owned(),
            reason,
            source,
        };
    }
    for suffix in ["-wal", "-shm", ".requests"] {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        let side = PathBuf::from(side);
        if side.exists() {
            if let Err(e) = std::fs::rename(&side, aside(&side)) {
                tracing::warn!("cannot move `{}` aside: {e}", side.display());
            }
        }
    }
    JournalError::Corrupt {
        path: path.to_owned(),
        moved_to,
        reason,
    }
}

/// Journals moved aside earlier beside `path` (`<name>.corrupt-*`), for a warning at start.
pub fn set_aside(path: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!("{}.corrupt-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(&prefix) && !n.ends_with("-wal") && !n.ends_with("-shm")
        })
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal() -> (tempfile::TempDir, PathBuf, Journal) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("jobs.sqlite");
        let j = Journal::open(&path).unwrap();
        (dir, path, j)
    }

    #[test]
    fn accepted_jobs_finish_and_are_fetched() {
        let (_d, _p, mut j) = journal();
        let a = j.accept("sha-chain:1", 0, b"req-a").unwrap();
        let b = j.accept("bits:9", 5, b"req-b").unwrap();
        assert!(b > a);
        assert_eq!(j.count_unfinished().unwrap(), 2);
        j.finish(a, Ok(&[vec![1, 2, 3], vec![], vec![9; 192]]))
            .unwrap();
        j.finish(b, Err("partition 0: boom")).unwrap();
        // The first outcome stays.
        j.finish(b, Ok(&[vec![7]])).unwrap();
        let ja = j.get(a).unwrap().unwrap();
        assert_eq!(ja.state, JobState::Succeeded);
        assert_eq!(ja.proofs, vec![vec![1, 2, 3], vec![], vec![9; 192]]);
        assert_eq!(ja.request, b"req-a");
        assert!(ja.finished_at.is_some() && ja.fetched_at.is_none());
        let jb = j.get(b).unwrap().unwrap();
        assert_eq!(jb.state, JobState::Failed);
        assert_eq!(jb.error.as_deref(), Some("partition 0: boom"));
        assert!(jb.proofs.is_empty());
        assert_eq!(j.count_unfinished().unwrap(), 0);
        j.mark_fetched(a).unwrap();
        assert!(j.get(a).unwrap().unwrap().fetched_at.is_some());
        assert!(j.get(999).unwrap().is_none());
    }

    #[test]
    fn unfinished_jobs_are_listed_by_priority_then_age_and_survive_reopening() {
        let (_d, path, mut j) = journal();
        let low = j.accept("c", 0, b"1").unwrap();
        let high = j.accept("c", 9, b"2").unwrap();
        let done = j.accept("c", 0, b"3").unwrap();
        let low2 = j.accept("c", 0, b"4").unwrap();
        j.finish(done, Ok(&[vec![1]])).unwrap();
        drop(j);
        let j = Journal::open(&path).unwrap();
        assert_eq!(j.unfinished().unwrap(), vec![high, low, low2]);
        assert_eq!(j.get(done).unwrap().unwrap().state, JobState::Succeeded);
    }

    #[test]
    fn ids_grow_across_reopening_and_deletion() {
        let (_d, path, mut j) = journal();
        let mut last = 0;
        for _ in 0..3 {
            let id = j.accept("c", 0, b"x").unwrap();
            assert!(id > last);
            last = id;
        }
        // The newest rows go (refused, expired): their ids are still never handed out again.
        j.forget(last).unwrap();
        j.finish(last - 1, Ok(&[])).unwrap();
        j.mark_fetched(last - 1).unwrap();
        assert_eq!(
            j.expire(now_ms() + 1, Duration::ZERO, Duration::MAX)
                .unwrap(),
            1
        );
        drop(j);
        let mut j = Journal::open(&path).unwrap();
        assert_eq!(j.last_id().unwrap(), last);
        let next = j.accept("c", 0, b"x").unwrap();
        assert!(next > last, "{next} after {last}");
    }

    #[test]
    fn results_expire_after_fetch_or_after_retention() {
        let (_d, _p, mut j) = journal();
        let fetched = j.accept("c", 0, b"x").unwrap();
        let unfetched = j.accept("c", 0, b"x").unwrap();
        let open = j.accept("c", 0, b"x").unwrap();
        j.finish(fetched, Ok(&[vec![1]])).unwrap();
        j.finish(unfetched, Err("no")).unwrap();
        j.mark_fetched(fetched).unwrap();
        let hour = Duration::from_secs(3600);
        let now = now_ms();
        // Nothing is old enough yet.
        assert_eq!(j.expire(now, hour, hour * 24).unwrap(), 0);
        // An hour on, the fetched result goes; the unfetched one stays for its day.
        assert_eq!(j.expire(now + 3_600_001, hour, hour * 24).unwrap(), 1);
        assert!(j.get(fetched).unwrap().is_none());
        assert!(j.get(unfetched).unwrap().is_some());
        assert_eq!(j.expire(now + 86_400_001, hour, hour * 24).unwrap(), 1);
        assert!(j.get(unfetched).unwrap().is_none());
        // An accepted job never expires.
        assert_eq!(j.expire(i64::MAX, hour, hour).unwrap(), 0);
        assert_eq!(j.get(open).unwrap().unwrap().state, JobState::Accepted);
    }

    #[test]
    fn a_file_that_is_not_a_database_is_moved_aside_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.sqlite");
        let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7919 % 251) as u8).collect();
        std::fs::write(&path, &garbage).unwrap();
        let e = Journal::open(&path).err().expect("garbage must be refused");
        let msg = e.to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        let JournalError::Corrupt { moved_to, .. } = &e else {
            panic!("{e:?}")
        };
        assert!(!path.exists());
        assert_eq!(std::fs::read(moved_to).unwrap(), garbage);
        assert_eq!(set_aside(&path), vec![moved_to.clone()]);
        // The next start begins empty.
        let mut j = Journal::open(&path).unwrap();
        assert_eq!(j.accept("c", 0, b"x").unwrap(), 1);
    }

    #[test]
    fn a_cancelled_job_is_never_re_queued_and_keeps_its_state() {
        let (_d, path, mut j) = journal();
        let a = j.accept("sha-chain:1", 2, b"req-a").unwrap();
        let big = vec![7u8; INLINE_REQUEST_MAX + 1];
        let b = j.accept("sha-chain:1", 2, &big).unwrap();
        assert!(j.cancel(b).unwrap());
        assert!(!j.cancel(b).unwrap(), "once");
        // The outcome that arrives afterwards does not overwrite it.
        j.finish(b, Err("cancelled")).unwrap();
        let row = j.get(b).unwrap().unwrap();
        assert_eq!(row.state, JobState::Cancelled);
        assert_eq!(row.error.as_deref(), Some("cancelled"));
        assert_eq!(j.unfinished().unwrap(), vec![a]);
        assert!(
            std::fs::read_dir(requests_dir(&path))
                .unwrap()
                .next()
                .is_none(),
            "its request file went"
        );
        drop(j);
        let j = Journal::open(&path).unwrap();
        assert_eq!(j.unfinished().unwrap(), vec![a]);
        assert_eq!(j.get(b).unwrap().unwrap().state, JobState::Cancelled);
    }

    #[test]
    fn a_version_1_journal_is_migrated_keeping_rows_and_the_id_sequence() {
        const V1: &str = "
CREATE TABLE jobs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    circuit      TEXT    NOT NULL,
    priority     INTEGER NOT NULL DEFAULT 0,
    request      BLOB,
    request_file TEXT,
    state        TEXT    NOT NULL CHECK (state IN ('accepted', 'succeeded', 'failed')),
    submitted_at INTEGER NOT NULL,
    finished_at  INTEGER,
    result       BLOB,
    error        TEXT,
    fetched_at   INTEGER
);
CREATE INDEX jobs_by_state ON jobs (state);
PRAGMA user_version = 1;";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.sqlite");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(V1).unwrap();
            for _ in 0..3 {
                c.execute(
                    "INSERT INTO jobs (circuit, request, state, submitted_at) \
                     VALUES ('bits:9', x'01', 'accepted', 1)",
                    [],
                )
                .unwrap();
            }
            // The newest row went: its id must not come back.
            c.execute("DELETE FROM jobs WHERE id = 3", []).unwrap();
        }
        let mut j = Journal::open(&path).unwrap();
        assert_eq!(j.unfinished().unwrap(), vec![1, 2]);
        assert_eq!(j.last_id().unwrap(), 3);
        assert!(j.cancel(1).unwrap());
        assert_eq!(j.get(1).unwrap().unwrap().state, JobState::Cancelled);
        assert_eq!(j.accept("bits:9", 0, b"r").unwrap(), 4);
        drop(j);
        let j = Journal::open(&path).unwrap();
        assert_eq!(j.unfinished().unwrap(), vec![2, 4]);
    }

    #[test]
    fn a_version_2_journal_gains_request_ids_and_times() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.sqlite");
        {
            let c = Connection::open(&path).unwrap();
            let v2 = SCHEMA
                .replace(",\n    request_id   TEXT,\n    times        TEXT", "")
                .replace(
                    "CREATE UNIQUE INDEX jobs_by_request_id ON jobs (request_id);",
                    "",
                );
            assert!(!v2.contains("request_id"), "{v2}");
            c.execute_batch(&format!("{v2} PRAGMA user_version = 2;"))
                .unwrap();
            c.execute(
                "INSERT INTO jobs (circuit, request, state, submitted_at) \
                 VALUES ('bits:9', x'01', 'accepted', 1)",
                [],
            )
            .unwrap();
        }
        let mut j = Journal::open(&path).unwrap();
        assert_eq!(j.find("job-1").unwrap(), Some(1));
        assert_eq!(j.get(1).unwrap().unwrap().request_id, "job-1");
        let times = JobTimes {
            queue_wait: Duration::from_millis(5),
            synthesis: Duration::from_millis(7),
            gpu: Duration::from_millis(11),
            verify: Duration::from_millis(2),
        };
        j.finish_timed(1, Ok(&[vec![1u8; 192]]), Some(&times))
            .unwrap();
        assert_eq!(j.get(1).unwrap().unwrap().times, Some(times));
    }

    #[test]
    fn request_ids_name_one_job_each() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(&dir.path().join("jobs.sqlite")).unwrap();
        let a = j
            .accept_as("bits:9", 2, b"r", Some("porep-1000-7"))
            .unwrap();
        assert_eq!(j.find("porep-1000-7").unwrap(), Some(a));
        // The same key again is refused by the unique index (the service looks it up first).
        assert!(j
            .accept_as("bits:9", 2, b"r", Some("porep-1000-7"))
            .is_err());
        let b = j.accept("bits:9", 2, b"r").unwrap();
        assert_eq!(j.find(&generated_request_id(b)).unwrap(), Some(b));
        assert_eq!(j.get(b).unwrap().unwrap().request_id, format!("job-{b}"));
        assert_eq!(j.find("nope").unwrap(), None);
    }

    #[test]
    fn a_database_with_another_schema_is_corrupt_and_a_newer_one_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.sqlite");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch("CREATE TABLE other (x INTEGER);").unwrap();
        }
        assert!(matches!(
            Journal::open(&path),
            Err(JournalError::Corrupt { .. })
        ));
        let newer = dir.path().join("newer.sqlite");
        {
            let c = Connection::open(&newer).unwrap();
            c.execute_batch("PRAGMA user_version = 99;").unwrap();
        }
        let e = Journal::open(&newer).err().unwrap();
        assert!(matches!(e, JournalError::Newer { found: 99, .. }), "{e:?}");
        assert!(newer.exists());
    }

    #[test]
    fn a_damaged_page_fails_the_integrity_check() {
        let (_d, path, mut j) = journal();
        for i in 0..200 {
            j.accept("sha-chain:1", 0, &vec![i as u8; 1000]).unwrap();
        }
        j.conn
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .unwrap();
        drop(j);
        // Overwrite the middle of the file (table and index pages), keeping the header.
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        for b in &mut bytes[4096..n - 4096] {
            *b = 0x5a;
        }
        std::fs::write(&path, bytes).unwrap();
        let e = Journal::open(&path).err().expect("damage must be found");
        assert!(matches!(e, JournalError::Corrupt { .. }), "{e:?}");
    }

    #[test]
    fn large_requests_live_in_checked_files_removed_when_no_longer_needed() {
        let (_d, path, mut j) = journal();
        let big: Vec<u8> = (0..INLINE_REQUEST_MAX as u32 + 1000)
            .map(|i| (i % 251) as u8)
            .collect();
        let a = j.accept("porep:x", 0, &big).unwrap();
        let b = j.accept("porep:x", 0, &big).unwrap();
        let dir = requests_dir(&path);
        let files = || std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(files(), 1, "one file per content");
        assert_eq!(j.get(a).unwrap().unwrap().request, big);
        // The database does not hold the bytes.
        assert!(std::fs::metadata(&path).unwrap().len() < big.len() as u64);
        j.finish(a, Ok(&[vec![1]])).unwrap();
        assert_eq!(files(), 1, "b still needs it");
        drop(j);
        let mut j = Journal::open(&path).unwrap();
        assert_eq!(j.get(b).unwrap().unwrap().request, big);
        j.finish(b, Err("x")).unwrap();
        assert_eq!(files(), 0);
        // A damaged file is found, not proved.
        let c = j.accept("porep:x", 0, &big).unwrap();
        let name = std::fs::read_dir(&dir)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        std::fs::write(&name, b"tampered").unwrap();
        let e = j.get(c).expect_err("must be refused");
        assert!(e.to_string().contains("does not match"), "{e}");
        // Orphans (a crash between the write and the commit) go at the next open.
        j.forget(c).unwrap();
        std::fs::write(dir.join("0123"), b"orphan").unwrap();
        drop(j);
        let _j = Journal::open(&path).unwrap();
        assert_eq!(files(), 0);
    }

    #[test]
    fn proofs_round_trip_and_truncated_results_are_refused() {
        let p = vec![vec![1u8; 192], vec![], vec![2u8; 3]];
        assert_eq!(decode_proofs(&encode_proofs(&p)).unwrap(), p);
        let enc = encode_proofs(&p);
        assert!(decode_proofs(&enc[..enc.len() - 1]).is_none());
        assert!(decode_proofs(&[1, 0]).is_none());
    }
}
