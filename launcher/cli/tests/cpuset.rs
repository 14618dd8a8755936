//! Real processes placed in every pinning mode this machine allows.
//!
//! Each test probes its mode; an unavailable mode is skipped with the reason printed, unless the
//! mode is listed in `SPLITPROVER_TEST_REQUIRE_PIN_MODES` (comma-separated, e.g.
//! `cgroup-v1,affinity`), in which case the test fails — CI sets it so that a skip cannot pass
//! silently where the mode must work. Likewise the automatic layout, which needs two cpus, is
//! skipped on one unless `SPLITPROVER_TEST_REQUIRE_CPUS` is set (to anything but `0`): then a
//! machine that gives this process a single cpu fails it.

use launcher::pinning::{self, CpuList, ErrorKind, Layout, PinKind, PinMode, Placement};
use std::process::{Command, Stdio};

fn required(kind: PinKind) -> bool {
    std::env::var("SPLITPROVER_TEST_REQUIRE_PIN_MODES")
        .map(|v| v.split(',').any(|k| k.trim() == kind.as_str()))
        .unwrap_or(false)
}

/// Whether a test that needs several cpus must fail, not skip, on one
/// (`SPLITPROVER_TEST_REQUIRE_CPUS`).
fn several_cpus_required() -> bool {
    std::env::var("SPLITPROVER_TEST_REQUIRE_CPUS")
        .is_ok_and(|v| !v.trim().is_empty() && v.trim() != "0")
}

/// The mode of `kind`, or `None` after printing why it is skipped.
fn mode_or_skip(kind: PinKind) -> Option<PinMode> {
    match PinMode::probe(kind) {
        Ok(mode) => {
            eprintln!("testing {mode}");
            Some(mode)
        }
        Err(e) if required(kind) => {
            panic!("{kind} is required by SPLITPROVER_TEST_REQUIRE_PIN_MODES but: {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED {kind}: {e}");
            None
        }
    }
}

/// Two single-cpu sets from the cpus this process may use: the first and the last
/// ({0} and {1} on a two-core machine; the same cpu twice on a one-core machine).
fn two_cpus() -> (CpuList, CpuList) {
    let allowed = CpuList::allowed().unwrap();
    let first = allowed.iter().next().unwrap();
    let last = allowed.iter().last().unwrap();
    (
        CpuList::from_cpus([first]).unwrap(),
        CpuList::from_cpus([last]).unwrap(),
    )
}

/// Starts `sleep` and `nproc` placed by `p`; checks the placement from outside (status file,
/// cgroup) and from inside (`nproc` counts the affinity the program saw from its first
/// instruction, as a thread pool sizing itself at load would).
fn check_placement(p: &Placement) {
    let mut cmd = Command::new("sleep");
    cmd.arg("5");
    p.apply_to(&mut cmd);
    let mut child = cmd.spawn().expect("spawn sleep");
    let verified = p.verify(child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(verified.unwrap_or_else(|e| panic!("{p}: {e}")), *p.cpus());

    let mut cmd = Command::new("nproc");
    cmd.stdout(Stdio::piped());
    p.apply_to(&mut cmd);
    let out = cmd.output().expect("run nproc");
    assert!(out.status.success());
    let seen: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert_eq!(seen, p.cpus().len(), "{p}: nproc inside the child");
}

fn place_two_children(kind: PinKind, tag: &str) {
    let Some(mode) = mode_or_skip(kind) else {
        return;
    };
    let (a, b) = two_cpus();
    let pa = Placement::prepare(&mode, &format!("it-{tag}-a"), &a).unwrap();
    let pb = Placement::prepare(&mode, &format!("it-{tag}-b"), &b).unwrap();
    eprintln!("{pa}\n{pb}");
    check_placement(&pa);
    check_placement(&pb);
    // The same placement serves a restart.
    check_placement(&pa);

    let dirs: Vec<_> = [&pa, &pb]
        .iter()
        .filter_map(|p| p.cgroup().map(ToOwned::to_owned))
        .collect();
    if kind == PinKind::Affinity {
        assert!(dirs.is_empty());
    } else {
        assert_eq!(dirs.len(), 2);
        assert!(dirs.iter().all(|d| d.is_dir()));
    }
    pa.remove().unwrap();
    drop(pb);
    for d in &dirs {
        assert!(!d.exists(), "`{}` was not removed", d.display());
    }
}

/// A child that cannot join its cgroup does not start unplaced: `spawn` fails with the OS error.
fn failed_join_fails_the_spawn(kind: PinKind, tag: &str) {
    let Some(mode) = mode_or_skip(kind) else {
        return;
    };
    let (a, _) = two_cpus();
    let p = Placement::prepare(&mode, &format!("it-{tag}-gone"), &a).unwrap();
    let dir = p.cgroup().unwrap().to_owned();
    std::fs::remove_dir(&dir).unwrap();
    let mut cmd = Command::new("sleep");
    cmd.arg("5");
    p.apply_to(&mut cmd);
    match cmd.spawn() {
        Ok(mut child) => {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{p}: started although its cgroup was gone");
        }
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}"),
    }
    p.remove().unwrap();
}

#[test]
fn cgroup_v2_failed_join_fails_the_spawn() {
    failed_join_fails_the_spawn(PinKind::CgroupV2, "v2");
}

#[test]
fn cgroup_v1_failed_join_fails_the_spawn() {
    failed_join_fails_the_spawn(PinKind::CgroupV1, "v1");
}

#[test]
fn cgroup_v2_places_children() {
    place_two_children(PinKind::CgroupV2, "v2");
}

#[test]
fn cgroup_v1_places_children() {
    place_two_children(PinKind::CgroupV1, "v1");
}

#[test]
fn affinity_places_children() {
    place_two_children(PinKind::Affinity, "aff");
}

#[test]
fn detected_mode_is_one_of_the_probed() {
    let (mode, skipped) = PinMode::detect_with_reasons();
    for e in &skipped {
        eprintln!("skipped: {e}");
        assert!(matches!(e.kind(), ErrorKind::ModeUnavailable { .. }), "{e}");
    }
    // Every skipped mode is better than the chosen one, and the chosen one probes alike.
    assert_eq!(
        skipped.len(),
        PinKind::ALL.iter().position(|&k| k == mode.kind()).unwrap()
    );
    assert_eq!(PinMode::probe(mode.kind()).unwrap(), mode);
    // A mode required to work here is the one detected, or a better one is.
    let rank = |k: PinKind| PinKind::ALL.iter().position(|&x| x == k).unwrap();
    for kind in PinKind::ALL.into_iter().filter(|&k| required(k)) {
        assert!(
            rank(mode.kind()) <= rank(kind),
            "{kind} is required but {mode} was detected"
        );
    }
    eprintln!("detected: {mode}");
}

#[test]
fn automatic_layout_places_synth_and_gpu() {
    let allowed = CpuList::allowed().unwrap();
    if allowed.len() < 2 {
        assert!(
            !several_cpus_required(),
            "SPLITPROVER_TEST_REQUIRE_CPUS is set but this process may use one cpu only ({allowed})"
        );
        eprintln!("SKIPPED: one cpu only ({allowed})");
        return;
    }
    let layout = Layout::auto(&allowed, 1, 1).unwrap();
    let mode = PinMode::detect();
    let placements: Vec<Placement> = layout
        .roles()
        .map(|(name, cpus)| Placement::prepare(&mode, &format!("it-auto-{name}"), cpus).unwrap())
        .collect();
    for p in &placements {
        check_placement(p);
    }
}

#[test]
fn refuses_cpus_that_are_not_there() {
    let online = CpuList::online().unwrap();
    let missing = CpuList::from_cpus([pinning::MAX_CPUS - 1]).unwrap();
    assert!(!missing.is_subset(&online));
    for kind in PinKind::ALL {
        let Ok(mode) = PinMode::probe(kind) else {
            continue;
        };
        let err = Placement::prepare(&mode, "it-missing", &missing).unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::CpusUnavailable { .. }),
            "{kind}: {err}"
        );
        assert!(err.to_string().contains("\nhint: "), "{err}");
        let err = Placement::prepare(&mode, "It Bad", &online).unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::InvalidName { .. }),
            "{kind}: {err}"
        );
        let err = Placement::prepare(&mode, "it-empty", &CpuList::new()).unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::InvalidLayout { .. }),
            "{kind}: {err}"
        );
    }
}

#[test]
fn verify_reads_a_live_process() {
    let mut child = Command::new("sleep").arg("5").spawn().unwrap();
    let cpus = pinning::verify(child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(cpus.unwrap(), CpuList::allowed().unwrap());
    let err = pinning::verify(u32::MAX).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Io { .. }), "{err}");
}
