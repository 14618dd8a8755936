//! Huge pages: with 2 MiB pages reserved a region reports `Huge2M`; with none it falls back and
//! says why. Reserving pages needs root (writable `/proc/sys/vm/nr_hugepages`); otherwise each
//! test prints why it skipped, unless `SPLITPROVER_TEST_REQUIRE_HUGEPAGES=1` is set (CI, which is
//! root, sets it): then a skip is a failure, and the fallback test may empty a pool that is
//! already reserved. The two tests change a machine-wide setting, so they run one at a time (a
//! mutex) and restore the old value on the way out, also when they fail.

use std::sync::Mutex;

use shm_protocol::{ErrorKind, HugePagePolicy, PageKind, Region, Ring, RingConfig};

const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";
const COMPACT_MEMORY: &str = "/proc/sys/vm/compact_memory";
const REQUIRE: &str = "SPLITPROVER_TEST_REQUIRE_HUGEPAGES";
static SERIAL: Mutex<()> = Mutex::new(());

fn meminfo(key: &str) -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo")
        .ok()?
        .lines()
        .find_map(|l| {
            l.strip_prefix(key)?
                .trim_start_matches(':')
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
}

fn read_nr() -> Option<u64> {
    std::fs::read_to_string(NR_HUGEPAGES)
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Sets `nr_hugepages` for its lifetime and restores the previous value on drop.
struct Reservation {
    old: u64,
}

impl Reservation {
    /// `Err(reason)` when the setting cannot be changed here.
    fn set(pages: impl FnOnce(u64) -> u64) -> Result<(Reservation, u64), String> {
        let old = read_nr().ok_or_else(|| format!("{NR_HUGEPAGES} is not readable"))?;
        let want = pages(old);
        std::fs::write(NR_HUGEPAGES, want.to_string())
            .map_err(|e| format!("cannot write {NR_HUGEPAGES} (needs root): {e}"))?;
        let guard = Reservation { old };
        let got = read_nr().unwrap_or(0);
        Ok((guard, got))
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(NR_HUGEPAGES, self.old.to_string()) {
            eprintln!(
                "warning: could not restore {NR_HUGEPAGES} to {}: {e}",
                self.old
            );
        }
    }
}

/// Whether a skip is a failure here.
fn required() -> bool {
    std::env::var_os(REQUIRE).is_some_and(|v| !v.is_empty() && v != "0")
}

fn skip(why: &str) {
    assert!(!required(), "{REQUIRE} is set but: {why}");
    eprintln!("skipped: {why}");
}

#[test]
fn reserved_2m_pages_are_used() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (mut reservation, mut total) = match Reservation::set(|old| old + 4) {
        Ok(r) => r,
        Err(why) => return skip(&why),
    };
    let mut free = meminfo("HugePages_Free").unwrap_or(0);
    if free < 2 && std::fs::write(COMPACT_MEMORY, "1").is_ok() {
        // Too fragmented for two contiguous 2 MiB pages: compact and ask again.
        drop(reservation);
        (reservation, total) = Reservation::set(|old| old + 4).expect("writable a moment ago");
        free = meminfo("HugePages_Free").unwrap_or(0);
    }
    let _reservation = reservation;
    if free < 2 {
        return skip(&format!(
            "the kernel reserved only {total} pages ({free} free): memory too fragmented"
        ));
    }
    let region = Region::create("hugepage-test", 4 << 20, HugePagePolicy::Auto).expect("region");
    assert_eq!(
        region.page_kind(),
        PageKind::Huge2M,
        "skipped: {:?}",
        region.fallback_reasons()
    );
    assert_eq!(region.len(), 4 << 20);
    assert_eq!(
        meminfo("HugePages_Free"),
        Some(free - 2),
        "prefaulted: both pages taken at creation"
    );

    // a child maps it and recovers the page kind from the fd
    let dup = region.fd().try_clone_to_owned().expect("dup");
    // SAFETY: a region made by `create`, used by this test only.
    let inherited = unsafe { Region::from_inherited_fd(dup) }.expect("map inherited");
    assert_eq!(inherited.page_kind(), PageKind::Huge2M);

    // a ring on huge pages reports them too
    let config = RingConfig::uniform(2, 1 << 20);
    let ring = Ring::create(region, config).expect("ring");
    assert_eq!(ring.page_kind(), PageKind::Huge2M);
    assert_eq!(ring.page_kind().to_string(), "2 MiB huge pages");
    drop(ring);
    drop(inherited);
    assert_eq!(
        meminfo("HugePages_Free"),
        Some(free),
        "pages go back when the last mapping and fd close"
    );
}

#[test]
fn without_reserved_pages_it_falls_back_and_says_why() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let _emptied = match read_nr() {
        Some(0) => None,
        // Taking a reserved pool away could break whoever reserved it: only where the pages
        // are the tests' to take (the variable set), and back on the way out.
        Some(_) if required() => {
            let (r, now) = Reservation::set(|_| 0).unwrap_or_else(|why| panic!("{why}"));
            let left = meminfo("HugePages_Total").unwrap_or(0);
            assert!(
                now == 0 && left == 0,
                "{left} huge pages are in use: cannot empty the pool"
            );
            Some(r)
        }
        Some(n) => {
            return skip(&format!(
                "{n} huge pages are reserved on this machine; not taking them away"
            ));
        }
        None => return skip(&format!("{NR_HUGEPAGES} is not readable")),
    };
    let region = Region::create("fallback-test", 4 << 20, HugePagePolicy::Auto).expect("region");
    assert!(matches!(
        region.page_kind(),
        PageKind::Transparent | PageKind::Plain
    ));
    let why = region
        .fallback_reasons()
        .iter()
        .find(|(k, _)| *k == PageKind::Huge2M)
        .map(|(_, why)| why.clone())
        .expect("the 2 MiB attempt is reported");
    assert!(
        why.contains("fallocate") || why.contains("memfd_create"),
        "{why}"
    );

    let e = Region::create(
        "require-test",
        4 << 20,
        HugePagePolicy::Require(PageKind::Huge2M),
    )
    .unwrap_err();
    assert!(
        matches!(
            e.kind(),
            ErrorKind::PagesUnavailable {
                requested: PageKind::Huge2M,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("hint:"), "{e}");
}
