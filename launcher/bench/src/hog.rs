//! The noisy neighbour: a memory-bandwidth and cache hog, `splitprover hog --cpus LIST`.
//!
//! One thread per cpu of the list, each pinned to its cpu, streams read-modify-write passes
//! over a buffer of its own; together the buffers are at least twice the last-level cache, so
//! every pass evicts the cache and moves its size through the memory controllers, as another
//! tenant's analytics job or a second prover on the same host would. The hog runs until it is
//! killed, until `--seconds` have passed, or until its parent process is gone (it checks every
//! 100 ms), so a bench that dies leaves no hog behind.
//!
//! [`Hog::start`] is the bench's side: it starts the hidden subcommand of this executable, waits
//! for its `ready` line (buffers allocated and touched) and kills it when dropped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use launcher::pinning::CpuList;

/// The first line the hog prints once it runs.
pub const READY: &str = "hog ready:";

/// The last-level cache of `cpu` in bytes (`/sys/devices/system/cpu/cpuN/cache/index*`, the
/// highest level), if sysfs says.
pub fn llc_bytes(cpu: u32) -> Option<u64> {
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cache");
    let mut best: Option<(u32, u64)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let read = |f: &str| std::fs::read_to_string(entry.path().join(f)).ok();
        let (Some(level), Some(size)) = (read("level"), read("size")) else {
            continue;
        };
        let Ok(level) = level.trim().parse::<u32>() else {
            continue;
        };
        let Some(size) = parse_size(size.trim()) else {
            continue;
        };
        if best.is_none_or(|(l, _)| level > l) {
            best = Some((level, size));
        }
    }
    best.map(|(_, s)| s)
}

/// `32768K`, `2M`, `1G` or plain bytes, as sysfs writes cache sizes.
fn parse_size(text: &str) -> Option<u64> {
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, ""),
    };
    let n: u64 = digits.parse().ok()?;
    let mult = match unit.trim() {
        "" => 1,
        "K" | "k" => 1 << 10,
        "M" | "m" => 1 << 20,
        "G" | "g" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// MiB per thread when none is asked: together at least twice the last-level cache (64 MiB if
/// sysfs does not say), and at least 64 MiB each (beyond any private cache).
pub fn default_mib(cpus: &CpuList) -> usize {
    let llc = cpus.iter().next().and_then(llc_bytes).unwrap_or(64 << 20);
    let per = (2 * llc).div_ceil(cpus.len().max(1) as u64) >> 20;
    (per as usize).max(64)
}

/// Runs the hog in this process (the hidden subcommand): one pinned streaming thread per cpu of
/// `cpus`, `mib` MiB each, until `seconds` have passed (forever for `None`) or the parent
/// process is gone. Prints [`READY`] on stdout once every buffer is touched.
pub fn run(cpus: &CpuList, mib: usize, seconds: Option<f64>) -> anyhow::Result<()> {
    anyhow::ensure!(!cpus.is_empty(), "--cpus names no cpu");
    anyhow::ensure!(mib >= 1, "--mib must be at least 1");
    let parent = std::os::unix::process::parent_id();
    let stop = AtomicBool::new(false);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<anyhow::Result<()>>();
    std::thread::scope(|s| -> anyhow::Result<()> {
        for cpu in cpus.iter() {
            let (stop, ready_tx) = (&stop, ready_tx.clone());
            std::thread::Builder::new()
                .name(format!("hog-{cpu}"))
                .spawn_scoped(s, move || {
                    let pinned = CpuList::from_cpus([cpu])
                        .map_err(anyhow::Error::from)
                        .and_then(|c| Ok(super::pin_current_thread(&c)?))
                        .with_context(|| format!("cannot pin a hog thread to cpu {cpu}"));
                    if let Err(e) = pinned {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                    let mut buf = vec![1u64; mib << 17];
                    let _ = ready_tx.send(Ok(()));
                    // The ready count ends when every thread has dropped its sender.
                    drop(ready_tx);
                    stream(&mut buf, stop);
                })
                .context("cannot start a hog thread")?;
        }
        drop(ready_tx);
        let result = (|| {
            for r in ready_rx.iter() {
                r?;
            }
            println!("{READY} one thread on each of cpus {cpus}, {mib} MiB each");
            use std::io::Write as _;
            std::io::stdout().flush()?;
            let started = Instant::now();
            loop {
                std::thread::sleep(Duration::from_millis(100));
                if std::os::unix::process::parent_id() != parent {
                    tracing::info!("parent gone: the hog stops");
                    return Ok(());
                }
                if seconds.is_some_and(|s| started.elapsed().as_secs_f64() >= s) {
                    return Ok(());
                }
            }
        })();
        // Release: the threads' Acquire load ends their passes.
        stop.store(true, Ordering::Release);
        result
    })
}

/// Read-modify-write passes over `buf` until `stop`.
fn stream(buf: &mut [u64], stop: &AtomicBool) {
    let mut x = 1u64;
    // Acquire: pairs with the Release store in `run`.
    while !stop.load(Ordering::Acquire) {
        for v in buf.iter_mut() {
            *v = v.wrapping_mul(3).wrapping_add(x);
        }
        x = std::hint::black_box(x.wrapping_add(buf[x as usize % buf.len()]));
    }
}

/// A hog started by the bench; killed when dropped.
pub struct Hog {
    child: Child,
    /// What it runs as (`hog on cpus 0-13, 96 MiB per thread`).
    pub detail: String,
}

impl Hog {
    /// Starts `program hog --cpus CPUS --mib MIB` and waits (at most a minute) for it to be
    /// ready.
    pub fn start(program: &Path, cpus: &CpuList, mib: usize) -> anyhow::Result<Hog> {
        let mut child = Command::new(program)
            .args([
                "hog",
                "--cpus",
                &cpus.to_string(),
                "--mib",
                &mib.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start `{} hog`", program.display()))?;
        let stdout = child.stdout.take().context("the hog's stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
        if !line.starts_with(READY) {
            let _ = child.kill();
            let status = child.wait().ok();
            anyhow::bail!(
                "the hog did not start (said {:?}, {})",
                line.trim(),
                status.map_or_else(|| "still running".to_string(), |s| s.to_string())
            );
        }
        let detail = format!("hog on cpus {cpus}, {mib} MiB per thread");
        tracing::info!(pid = child.id(), "{detail}");
        Ok(Hog { child, detail })
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_parse() {
        assert_eq!(parse_size("32768K"), Some(32 << 20));
        assert_eq!(parse_size("2M"), Some(2 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("12X"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn default_buffers_exceed_twice_the_llc_and_64_mib() {
        let cpus: CpuList = "0".parse().unwrap();
        let llc = llc_bytes(0).unwrap_or(64 << 20);
        let one = default_mib(&cpus);
        assert!(
            one >= 64 && (one as u64) << 20 >= 2 * llc,
            "{one} MiB, LLC {llc}"
        );
        let many: CpuList = "0-63".parse().unwrap();
        assert!(default_mib(&many) >= 64);
    }

    #[test]
    fn the_hog_stops_after_its_seconds() {
        let cpus =
            CpuList::from_cpus([CpuList::allowed().unwrap().iter().next().unwrap()]).unwrap();
        let t = Instant::now();
        run(&cpus, 1, Some(0.3)).unwrap();
        assert!(t.elapsed() >= Duration::from_millis(300));
        let none = CpuList::new();
        assert!(run(&none, 1, Some(0.1)).is_err());
        let bad = CpuList::from_cpus([8000]).unwrap();
        let e = run(&bad, 1, Some(0.1)).unwrap_err();
        assert!(format!("{e:#}").contains("cpu 8000"), "{e:#}");
    }
}
