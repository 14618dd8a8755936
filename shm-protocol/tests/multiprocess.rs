//! Multi-process tests: real child processes share one ring through a memfd inherited at fd 3.
//!
//! This binary is its own child: with `SHM_PROTOCOL_TEST_ROLE` set it runs as a producer or a
//! consumer; without it, it is the launcher that runs the scenarios (hence `harness = false`).
//! Payloads are pseudo-random words derived from the job id, so the consumer and the launcher
//! can each recompute the checksum a slot must have.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use shm_protocol::{
    current_owner, pass_to, Density, HugePagePolicy, Region, Ring, RingConfig, SlotCapacity,
    SlotLengths, SlotMeta, SlotResult,
};

const ROLE_ENV: &str = "SHM_PROTOCOL_TEST_ROLE";
const JOBS_ENV: &str = "SHM_PROTOCOL_TEST_JOBS";
const DIE_AT_ENV: &str = "SHM_PROTOCOL_TEST_DIE_AT";
const RING_FD: RawFd = 3;
const CAPS: SlotCapacity = SlotCapacity {
    n: 2048,
    inputs: 4,
    aux: 1500,
};

type TestResult = Result<(), String>;
type TestFn = fn() -> TestResult;

fn main() -> ExitCode {
    if let Ok(role) = std::env::var(ROLE_ENV) {
        return match child(&role) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("child {role} ({}): {e}", std::process::id());
                ExitCode::FAILURE
            }
        };
    }
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let tests: [(&str, TestFn); 2] = [
        ("two_producers_two_consumers_move_1200_slots", many_slots),
        (
            "kill_9_producer_and_consumer_then_reclaim",
            kill_and_reclaim,
        ),
    ];
    let mut failed = 0;
    for (name, test) in tests {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let t0 = Instant::now();
        match test() {
            Ok(()) => println!("test {name} ... ok ({:.2?})", t0.elapsed()),
            Err(e) => {
                println!("test {name} ... FAILED: {e}");
                failed += 1;
            }
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

// ----- payload -----

struct Gen(u64);
impl Gen {
    fn new(job: u64) -> Gen {
        Gen(job.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn fold(sum: u64, w: u64) -> u64 {
    (sum ^ w).rotate_left(5).wrapping_mul(0x100_0000_01B3)
}

/// View scalars as words: blstrs `Scalar` is 4 × u64 (the crate asserts size and alignment).
fn words(s: &[blstrs::Scalar]) -> &[u64] {
    // SAFETY: `Scalar` is `repr(transparent)` over `[u64; 4]`, 32 bytes, align 8.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u64>(), s.len() * 4) }
}

fn words_mut(s: &mut [blstrs::Scalar]) -> &mut [u64] {
    // SAFETY: as in `words`; the borrow is unique.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u64>(), s.len() * 4) }
}

/// The checksum job `job`'s slot must have: every scalar word, then the bitmaps.
fn expected_checksum(job: u64) -> u64 {
    let mut g = Gen::new(job);
    let scalar_words = (3 * CAPS.n + CAPS.inputs + CAPS.aux) * 4;
    let mut sum = 0;
    for _ in 0..scalar_words {
        sum = fold(sum, g.next());
    }
    for (bits, _) in bitmaps() {
        for w in 0..bits.div_ceil(64) {
            sum = fold(sum, bitmap_word(&mut g, bits, w));
        }
    }
    sum
}

fn bitmaps() -> [(usize, Density); 3] {
    [
        (CAPS.aux, Density::AAux),
        (CAPS.inputs, Density::BInput),
        (CAPS.aux, Density::BAux),
    ]
}

fn bitmap_word(g: &mut Gen, bits: usize, w: usize) -> u64 {
    let x = g.next();
    if (w + 1) * 64 <= bits {
        x
    } else {
        x & ((1u64 << (bits % 64)) - 1)
    }
}

// ----- children -----

fn child(role: &str) -> TestResult {
    // SAFETY: the launcher passed the ring's memfd at RING_FD and nothing else owns that fd.
    let fd = unsafe { OwnedFd::from_raw_fd(RING_FD) };
    // SAFETY: the fd is a region made by `Region::create`; all processes follow the protocol.
    let region = unsafe { Region::from_inherited_fd(fd) }.map_err(|e| e.to_string())?;
    let ring = Ring::open(region).map_err(|e| e.to_string())?;
    let die_at: Option<usize> = std::env::var(DIE_AT_ENV).ok().and_then(|v| v.parse().ok());
    match role {
        "producer" => {
            let jobs: Vec<u64> = std::env::var(JOBS_ENV)
                .map_err(|e| e.to_string())?
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().map_err(|e| format!("job `{s}`: {e}")))
                .collect::<Result<_, _>>()?;
            for (k, &job) in jobs.iter().enumerate() {
                produce(&ring, job, die_at == Some(k))?;
            }
            Ok(())
        }
        "consumer" => {
            let mut k = 0;
            loop {
                let claimed = match ring.claim_ready(current_owner(), Some(Duration::from_secs(30)))
                {
                    Ok(c) => c,
                    Err(e) if e.is_timeout() => return Ok(()), // launcher gone
                    Err(e) => return Err(e.to_string()),
                };
                let view = claimed.view().map_err(|e| e.to_string())?;
                let job = view.meta().job_id;
                if die_at == Some(k) {
                    announce_death(claimed.index(), job);
                }
                let mut sum = 0;
                for s in [view.a(), view.b(), view.c(), view.input(), view.aux()] {
                    sum = words(s).iter().fold(sum, |acc, &w| fold(acc, w));
                }
                for d in Density::ALL {
                    sum = view
                        .density(d)
                        .words
                        .iter()
                        .fold(sum, |acc, &w| fold(acc, w));
                }
                let result = if sum == expected_checksum(job) {
                    let mut r = [0u8; 20];
                    r[..8].copy_from_slice(&job.to_le_bytes());
                    r[8..16].copy_from_slice(&sum.to_le_bytes());
                    r[16..].copy_from_slice(&std::process::id().to_le_bytes());
                    claimed.complete(SlotResult::Proof(&r))
                } else {
                    claimed.complete(SlotResult::Failed(&format!(
                        "checksum mismatch for job {job}"
                    )))
                };
                result.map_err(|e| e.to_string())?;
                k += 1;
            }
        }
        other => Err(format!("unknown role `{other}`")),
    }
}

fn produce(ring: &Ring, job: u64, die_mid_write: bool) -> TestResult {
    let mut w = ring
        .acquire_free(current_owner(), 0, Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    w.begin(
        SlotMeta {
            job_id: job,
            circuit_id: 1,
            partition: (job % 10) as u32,
            attempt: 0,
        },
        CAPS,
    )
    .map_err(|e| e.to_string())?;
    let mut g = Gen::new(job);
    let index = w.index();
    let p = w.parts_mut().map_err(|e| e.to_string())?;
    for s in [p.a, p.b, p.c, p.input, p.aux] {
        let ws = words_mut(s);
        let half = ws.len() / 2;
        for (i, x) in ws.iter_mut().enumerate() {
            if die_mid_write && i == half {
                announce_death(index, job);
            }
            *x = g.next();
        }
    }
    let mut pops = [0u64; 3];
    for (k, (bits, which)) in bitmaps().into_iter().enumerate() {
        let ws = w.density_mut(which).map_err(|e| e.to_string())?;
        for (i, x) in ws.iter_mut().enumerate().take(bits.div_ceil(64)) {
            *x = bitmap_word(&mut g, bits, i);
            pops[k] += u64::from(x.count_ones());
        }
    }
    w.publish(SlotLengths {
        n: CAPS.n,
        inputs: CAPS.inputs,
        aux: CAPS.aux,
        a_aux_popcount: pops[0],
        b_input_popcount: pops[1],
        b_aux_popcount: pops[2],
    })
    .map_err(|e| e.to_string())?;
    Ok(())
}

/// Tells the launcher where this process is about to be killed, then waits for the SIGKILL.
fn announce_death(slot: usize, job: u64) -> ! {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "DYING {slot} {job}");
    let _ = out.flush();
    std::thread::sleep(Duration::from_secs(60));
    std::process::exit(3) // never reached in a passing run: the launcher kills us first
}

// ----- launcher side -----

struct Kid {
    child: Child,
    role: &'static str,
    jobs: Vec<u64>,
    die_at: Option<usize>,
}

fn spawn(
    ring: &Ring,
    role: &'static str,
    jobs: Vec<u64>,
    die_at: Option<usize>,
    events: &mpsc::Sender<(u32, usize, u64)>,
) -> Result<Kid, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.env(ROLE_ENV, role)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    cmd.env(
        JOBS_ENV,
        jobs.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(","),
    );
    if let Some(k) = die_at {
        cmd.env(DIE_AT_ENV, k.to_string());
    }
    pass_to(&mut cmd, ring.region().fd(), RING_FD);
    let mut child = cmd.spawn().map_err(|e| format!("spawn {role}: {e}"))?;
    let pid = child.id();
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let tx = events.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let parts: Vec<&str> = line.split_whitespace().collect();
            if let ["DYING", slot, job] = parts[..] {
                if let (Ok(slot), Ok(job)) = (slot.parse(), job.parse()) {
                    let _ = tx.send((pid, slot, job));
                }
            }
        }
    });
    Ok(Kid {
        child,
        role,
        jobs,
        die_at,
    })
}

fn new_ring(slots: u32) -> Result<Ring, String> {
    let config = RingConfig::uniform(slots, CAPS.slot_bytes().ok_or("caps overflow")?);
    let bytes = config.region_bytes().map_err(|e| e.to_string())?;
    let region = Region::create("multiprocess-test", bytes, HugePagePolicy::Auto)
        .map_err(|e| e.to_string())?;
    Ring::create(region, config).map_err(|e| e.to_string())
}

/// Collects one DONE slot: checks the result against the job's checksum, frees the slot, and
/// records which consumer pid proved the job.
fn collect(
    ring: &Ring,
    seen: &mut HashMap<u64, Vec<u32>>,
    timeout: Duration,
) -> Result<bool, String> {
    let done = match ring.take_next_done(current_owner(), Some(timeout)) {
        Ok(d) => d,
        Err(e) if e.is_timeout() => return Ok(false),
        Err(e) => return Err(e.to_string()),
    };
    let meta = done.meta();
    let bytes = match done.result().map_err(|e| e.to_string())? {
        SlotResult::Proof(b) => b.to_vec(),
        SlotResult::Failed(m) => return Err(format!("job {} failed: {m}", meta.job_id)),
    };
    done.free().map_err(|e| e.to_string())?;
    let field = |r: std::ops::Range<usize>| {
        bytes
            .get(r)
            .map(|b| b.iter().rev().fold(0u64, |a, &x| a << 8 | u64::from(x)))
    };
    let (job, sum, pid) = (field(0..8), field(8..16), field(16..20));
    let (Some(job), Some(sum), Some(pid)) = (job, sum, pid) else {
        return Err(format!("short result {bytes:?}"));
    };
    if job != meta.job_id || sum != expected_checksum(job) {
        return Err(format!(
            "job {job} (meta {}) has checksum {sum:#x}",
            meta.job_id
        ));
    }
    seen.entry(job).or_default().push(pid as u32);
    Ok(true)
}

/// Stops consumers (they serve until killed), reaps everyone, and checks the producers'
/// exit status. After a failed `outcome` every child is killed and the outcome is returned.
fn finish(kids: &mut [Kid], must_succeed: &[&'static str], outcome: TestResult) -> TestResult {
    if outcome.is_err() {
        for k in kids.iter_mut() {
            let _ = k.child.kill();
            let _ = k.child.wait();
        }
        return outcome;
    }
    for k in kids.iter_mut() {
        if k.role == "consumer" {
            let _ = k.child.kill();
        }
        let status = k.child.wait().map_err(|e| e.to_string())?;
        if must_succeed.contains(&k.role) && k.die_at.is_none() && !status.success() {
            return Err(format!("{} {} exited with {status}", k.role, k.child.id()));
        }
    }
    Ok(())
}

fn check_exactly_once(seen: &HashMap<u64, Vec<u32>>, jobs: u64) -> TestResult {
    for job in 0..jobs {
        match seen.get(&job).map(Vec::len) {
            Some(1) => {}
            Some(n) => return Err(format!("job {job} completed {n} times")),
            None => return Err(format!("job {job} lost")),
        }
    }
    if seen.len() as u64 != jobs {
        return Err(format!(
            "{} distinct jobs completed, expected {jobs}",
            seen.len()
        ));
    }
    Ok(())
}

fn many_slots() -> TestResult {
    const JOBS: u64 = 1200;
    let ring = new_ring(6)?;
    let (tx, _rx) = mpsc::channel();
    let mut kids = vec![
        spawn(&ring, "producer", (0..JOBS).step_by(2).collect(), None, &tx)?,
        spawn(&ring, "producer", (1..JOBS).step_by(2).collect(), None, &tx)?,
        spawn(&ring, "consumer", vec![], None, &tx)?,
        spawn(&ring, "consumer", vec![], None, &tx)?,
    ];
    let mut seen = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut collected = 0;
    let outcome = (|| {
        while collected < JOBS {
            if Instant::now() > deadline {
                return Err(format!(
                    "only {collected} of {JOBS} slots done; ring: {}",
                    ring.counts()
                ));
            }
            if collect(&ring, &mut seen, Duration::from_secs(1))? {
                collected += 1;
            }
        }
        Ok(())
    })();
    finish(&mut kids, &["producer"], outcome)?;
    check_exactly_once(&seen, JOBS)?;
    let c = ring.counts();
    if c.free != ring.slot_count() {
        return Err(format!("ring not drained: {c}"));
    }
    Ok(())
}

fn kill_and_reclaim() -> TestResult {
    const JOBS: u64 = 300;
    let ring = new_ring(4)?;
    let (tx, rx) = mpsc::channel();
    let mut kids = vec![
        spawn(
            &ring,
            "producer",
            (0..JOBS).step_by(2).collect(),
            Some(20),
            &tx,
        )?,
        spawn(&ring, "producer", (1..JOBS).step_by(2).collect(), None, &tx)?,
        // the only consumer until it dies, so its death is certain; its replacement is
        // started by the death handler below
        spawn(&ring, "consumer", vec![], Some(5), &tx)?,
    ];
    let mut seen = HashMap::new();
    let mut collected = 0;
    let mut killed = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    let outcome = (|| {
        while collected < JOBS {
            if Instant::now() > deadline {
                return Err(format!(
                    "only {collected} of {JOBS} done; ring: {}; killed {killed:?}",
                    ring.counts()
                ));
            }
            while let Ok((pid, slot, job)) = rx.try_recv() {
                let k = kids
                    .iter()
                    .position(|k| k.child.id() == pid)
                    .ok_or("unknown child")?;
                kids[k].child.kill().map_err(|e| e.to_string())?; // SIGKILL
                kids[k].child.wait().map_err(|e| e.to_string())?; // reaped: the pid is dead
                let report = ring.reclaim_owner(pid);
                if !ring.reclaim_owner(pid).is_empty() {
                    return Err("reclaim is not idempotent".into());
                }
                let (role, die_at) = (kids[k].role, kids[k].die_at.unwrap_or(0));
                let moved = if role == "producer" {
                    &report.writing_freed
                } else {
                    &report.claimed_requeued
                };
                if report.len() != 1 || moved.len() != 1 {
                    return Err(format!(
                        "{role} {pid} died holding slot {slot}: report {report:?}"
                    ));
                }
                let r = moved[0];
                if r.index != slot || r.meta.map(|m| m.job_id) != Some(job) {
                    return Err(format!("reclaimed {r:?}, expected slot {slot} job {job}"));
                }
                killed.push((role, pid, job));
                if role == "producer" {
                    // re-queue the job it was writing and everything after it
                    let rest = kids[k].jobs[die_at..].to_vec();
                    if rest.first() != Some(&job) {
                        return Err(format!(
                            "producer died on job {job}, expected {:?}",
                            rest.first()
                        ));
                    }
                    kids.push(spawn(&ring, "producer", rest, None, &tx)?);
                } else {
                    // the requeued slot is proved by the replacements
                    kids.push(spawn(&ring, "consumer", vec![], None, &tx)?);
                    kids.push(spawn(&ring, "consumer", vec![], None, &tx)?);
                }
            }
            if collect(&ring, &mut seen, Duration::from_millis(50))? {
                collected += 1;
            }
        }
        Ok(())
    })();
    finish(&mut kids, &["producer"], outcome)?;
    if killed.len() != 2 {
        return Err(format!(
            "expected a producer and a consumer to be killed, got {killed:?}"
        ));
    }
    check_exactly_once(&seen, JOBS)?;
    for &(role, pid, job) in &killed {
        if role == "consumer" && seen[&job] == [pid] {
            return Err(format!(
                "job {job} was completed by the consumer killed while holding it"
            ));
        }
    }
    let c = ring.counts();
    if c.free != ring.slot_count() {
        return Err(format!("ring not drained: {c}"));
    }
    Ok(())
}
