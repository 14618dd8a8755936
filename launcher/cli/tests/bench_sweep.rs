//! The isolation sweep of `splitprover bench` end to end (issue 15): a tiny built-in circuit
//! (`pubinputs:2`) on the CPU backend, the in-process and split pipelines, 1 and 2 jobs in
//! flight, without and with the noisy neighbour, each start's GPU-only capacity; the rows of
//! `sweep.json` checked, `splitprover report` run on the output and every SVG it writes
//! parsed; and the hog itself: pinned threads, gone with its parent. Speed is never asserted.

mod common;
use common::{cli, serial};

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Processes running `splitprover hog` of this build.
fn hogs() -> Vec<u32> {
    let exe = env!("CARGO_BIN_EXE_splitprover");
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
        if args.len() > 1 && args[0] == exe.as_bytes() && args[1] == b"hog" && !zombie(pid) {
            out.push(pid);
        }
    }
    out
}

fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(true)
}

fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("`{key}` is not a number in {v}"))
}

fn svg(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("{} is not well-formed: {e}", path.display()));
    text
}

#[test]
fn a_tiny_sweep_writes_its_rows_and_a_report_of_valid_svg() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let out = dir.path().join("out");
    let out_s = out.to_str().unwrap();
    let (code, stdout, stderr) = cli(
        &[
            "bench",
            "--circuit",
            "pubinputs:2",
            "--modes",
            "inprocess,split,gpu-only",
            "--sweep-clients",
            "1,2",
            "--noisy-neighbour",
            "both",
            "-n",
            "4",
            "--per-client",
            "2",
            "--gpu-only-proofs",
            "2",
            "--slots",
            "4",
            "--hog-mib",
            "8",
            "--huge-pages",
            "none",
            "--out-dir",
            out_s,
        ],
        &[("SPLITPROVER_CACHE_DIR", &cache)],
    );
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(hogs().is_empty(), "a hog outlived the bench: {:?}", hogs());

    let report: Value =
        serde_json::from_slice(&std::fs::read(out.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(report["workload"], "pubinputs:2");
    assert_eq!(report["backend"], "cpu");
    let rows = report["rows"].as_array().unwrap();
    let key = |r: &Value| {
        (
            r["mode"].as_str().unwrap().to_owned(),
            r["neighbour"].as_bool().unwrap(),
            r["clients"].as_u64().unwrap(),
        )
    };
    let got: Vec<_> = rows.iter().map(key).collect();
    let mut want = Vec::new();
    for (mode, capacity) in [("inprocess", "prove-only"), ("split", "gpu-only")] {
        want.push((capacity.to_owned(), false, 0));
        for hog in [false, true] {
            for c in [1, 2] {
                want.push((mode.to_owned(), hog, c));
            }
        }
    }
    assert_eq!(got, want);
    for r in rows {
        let clients = r["clients"].as_u64().unwrap();
        // Capacity rows prove --gpu-only-proofs jobs; a level min(-n, per-client × c).
        let jobs = if clients == 0 {
            2
        } else {
            (2 * clients).min(4)
        };
        assert_eq!(r["proofs"].as_u64(), Some(jobs), "{r}");
        assert!(num(r, "s_per_proof") > 0.0, "{r}");
        assert!((num(r, "proofs_per_min") * num(r, "s_per_proof") - 60.0).abs() < 1e-6);
        assert!(num(r, "mean_gpu_s") > 0.0, "{r}");
        let busy = num(r, "gpu_busy_pct");
        assert!(busy > 0.0 && busy <= 100.0 + 1e-9, "{r}");
        let file = out.join(r["timeline"].as_str().unwrap());
        assert!(file.is_file(), "{}", file.display());
        assert!(file.with_extension("svg").is_file());
        assert!(!r["synth_cpus"].as_str().unwrap().is_empty());
        assert!(!r["gpu_cpus"].as_str().unwrap().is_empty());
        assert!(r["synth_threads"].as_u64().unwrap() >= 1);
        if clients == 0 {
            assert!(r["latency_p50_s"].is_null() && r["gpu_vs_gpu_only"].is_null());
            continue;
        }
        let (p50, p99) = (num(r, "latency_p50_s"), num(r, "latency_p99_s"));
        assert!(p50 > 0.0 && p50 <= p99, "{r}");
        assert!(num(r, "mean_synth_s") > 0.0, "{r}");
        // The GPU time relative to the same start's GPU-only run.
        let ratio = num(r, "gpu_vs_gpu_only");
        let base = num(r, "gpu_only_mean_gpu_s");
        assert!((ratio - num(r, "mean_gpu_s") / base).abs() < 1e-9, "{r}");
        // The split pipeline's gpu-proc CPU time per partition (the in-process prover shares
        // its process: none).
        if r["mode"] == "split" {
            let cpu = num(r, "prover_cpu_s_per_partition");
            assert!(cpu >= 0.0, "{r}");
            assert!((num(r, "prover_cpu_vs_gpu") - cpu / num(r, "mean_gpu_s")).abs() < 1e-9);
        } else {
            assert!(r["prover_cpu_s_per_partition"].is_null(), "{r}");
        }
        let detail = r["neighbour_detail"].as_str();
        if r["neighbour"].as_bool().unwrap() {
            assert!(detail.unwrap().starts_with("hog on cpus "), "{r}");
            assert!(detail.unwrap().ends_with("8 MiB per thread"), "{r}");
        } else {
            assert!(detail.is_none(), "{r}");
        }
    }
    // Both pipelines ran on the same cpus: the in-process one on synth-proc's and gpu-proc's.
    assert_eq!(rows[1]["synth_cpus"], rows[6]["synth_cpus"]);
    assert_eq!(rows[1]["gpu_cpus"], rows[6]["gpu_cpus"]);

    // The recommendation is a split row's layout, printed at the end and valid config.
    let rec = report["recommendation"].as_str().unwrap();
    assert!(rec.contains("[cpus]") && rec.contains("[[gpu]]"), "{rec}");
    let config = launcher::config::Config::parse(rec).unwrap();
    assert_eq!(config.cpus.synth.as_deref(), rows[6]["synth_cpus"].as_str());
    assert_eq!(config.gpu[0].cpus.as_deref(), rows[6]["gpu_cpus"].as_str());
    let tail = stdout
        .rsplit("the layout to put in the config")
        .next()
        .unwrap();
    assert!(tail.contains(rec.trim()), "{stdout}");
    assert!(
        stdout.contains("split / inprocess throughput = "),
        "{stdout}"
    );
    // The older table is still written.
    let bench: Value =
        serde_json::from_slice(&std::fs::read(out.join("bench.json")).unwrap()).unwrap();
    assert_eq!(bench.as_array().unwrap().len(), rows.len());

    // The bench rendered the report; `splitprover report` renders it again from the JSON.
    for f in ["throughput.svg", "report.md"] {
        std::fs::remove_file(out.join(f)).unwrap();
    }
    let (code, stdout, stderr) = cli(&["report", out_s], &[]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("prove-only") && stdout.contains("hog"),
        "{stdout}"
    );
    let throughput = svg(&out.join("throughput.svg"));
    let doc = roxmltree::Document::parse(&throughput).unwrap();
    let lines: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .collect();
    // in-process and split, quiet and with the hog: two concurrencies each.
    assert_eq!(lines.len(), 4, "{throughput}");
    assert!(lines
        .iter()
        .all(|l| l.attribute("points").unwrap().split(' ').count() == 2));
    let labels: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .collect();
    // (On a machine with SMT siblings the layout's name says how many cores it shares.)
    let has = |f: &dyn Fn(&str) -> bool| labels.iter().any(|l| f(l));
    assert!(
        has(&|l| l.starts_with("inprocess, gpu 1 core") && !l.ends_with("hog")),
        "{labels:?}"
    );
    assert!(
        has(&|l| l.starts_with("split, gpu 1 core") && l.ends_with(", hog")),
        "{labels:?}"
    );
    assert!(labels.contains(&"1") && labels.contains(&"2"), "{labels:?}");
    let inflation = svg(&out.join("gpu-inflation.svg"));
    assert!(inflation.contains("GPU only"), "{inflation}");
    svg(&out.join("latency.svg"));
    let waterfalls = svg(&out.join("waterfalls.svg"));
    let doc = roxmltree::Document::parse(&waterfalls).unwrap();
    let nested = doc
        .root_element()
        .children()
        .filter(|n| n.has_tag_name("svg"))
        .count();
    assert_eq!(nested, 4, "two modes, quiet and with the hog, at -j 2");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains(" | split | hog | 2 | "), "{md}");
    assert!(md.contains("```toml\n# best measured layout"), "{md}");

    // A directory without a bench is an error that says what to give.
    let (code, _, stderr) = cli(&["report", dir.path().to_str().unwrap()], &[]);
    assert_eq!(code, 2);
    assert!(stderr.contains("hint: give the --out-dir"), "{stderr}");

    // The runs' TIMELINE logs: one row each, every split run's proofs counted.
    let mut logs: Vec<String> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("sweep-split-") && name.ends_with(".timeline")
        })
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    logs.sort();
    assert!(!logs.is_empty());
    let mut args = vec!["report"];
    args.extend(logs.iter().map(String::as_str));
    let (code, stdout, stderr) = cli(&args, &[]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.starts_with("config"), "{stdout}");
    assert!(stdout.lines().next().unwrap().contains("steady s/proof"));
    assert_eq!(stdout.lines().count(), 2 + logs.len(), "{stdout}");
    assert!(
        stdout.lines().skip(2).all(|l| l.contains(" log ")),
        "{stdout}"
    );
    // A file that is no TIMELINE log names itself.
    let not_a_log = dir.path().join("notes.txt");
    std::fs::write(&not_a_log, "TIMELINE NOT_AN_EVENT job=1\n").unwrap();
    let (code, _, stderr) = cli(&["report", not_a_log.to_str().unwrap()], &[]);
    assert_ne!(code, 0);
    assert!(stderr.contains("is not a TIMELINE log"), "{stderr}");
}

#[test]
fn the_hog_pins_each_thread_and_stops_when_its_parent_is_gone() {
    let _g = serial();
    let exe = env!("CARGO_BIN_EXE_splitprover");
    let cpu = launcher::pinning::CpuList::allowed()
        .unwrap()
        .iter()
        .last()
        .unwrap();
    // A parent that starts the hog, says its pid and exits a moment later.
    let mut parent = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{exe}' hog --cpus {cpu} --mib 8 & echo pid $!; sleep 3"
        ))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(parent.stdout.take().unwrap()).lines();
    let mut pid = None;
    let mut ready = false;
    while pid.is_none() || !ready {
        let line = lines.next().expect("the hog's output").unwrap();
        if let Some(p) = line.strip_prefix("pid ") {
            pid = Some(p.trim().parse::<u32>().unwrap());
        } else if line.starts_with("hog ready:") {
            assert!(
                line.ends_with(&format!("one thread on each of cpus {cpu}, 8 MiB each")),
                "{line}"
            );
            ready = true;
        }
    }
    let pid = pid.unwrap();
    // Its streaming thread runs on the cpu asked for.
    let mut pinned = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if name.trim() == format!("hog-{cpu}") {
            let status = std::fs::read_to_string(task.path().join("status")).unwrap();
            let allowed = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .unwrap()
                .trim()
                .to_owned();
            pinned.push(allowed);
        }
    }
    assert_eq!(pinned, [cpu.to_string()]);
    assert!(hogs().contains(&pid));
    parent.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !zombie(pid) {
        assert!(Instant::now() < deadline, "the hog outlived its parent");
        std::thread::sleep(Duration::from_millis(50));
    }
}
