//! The service's Prometheus metrics: cuzk's metric names for what the two share (Curio's
//! dashboards keep working), ours beside them (`splitprover_*`), in the text exposition format,
//! served by `GetMetrics` and over HTTP at `metrics_listen` ([`serve_http`]).
//!
//! Why the exposition is written here rather than by the `prometheus-client` crate: cuzk's names
//! must come out exactly, and cuzk has both `cuzk_proofs_completed_total` (all kinds) and
//! `cuzk_proofs_completed{proof_kind}`; that crate appends `_total` to every counter, so the
//! second name could not be produced. The format itself is a few lines of text per metric.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::jobs::JobOutcome;
use crate::pipeline::PipelineStatus;

/// Histogram bucket bounds, seconds: from a 2 KiB proof's milliseconds to a 32 GiB partition's
/// minutes.
const BUCKETS: [f64; 16] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 60.0, 150.0, 300.0, 900.0,
];

/// cuzk's `proof_kind` label of a circuit spec (`porep_c2`, `snap_update`, `window_post`,
/// `winning_post`); built-in circuits are `builtin`.
pub fn proof_kind_label(circuit: &str) -> &'static str {
    match circuit.split_once(':').map(|(family, _)| family) {
        Some("porep") => "porep_c2",
        Some("snap") | Some("update") => "snap_update",
        Some("post") if circuit.contains("Winning") => "winning_post",
        Some("post") => "window_post",
        _ => "builtin",
    }
}

#[derive(Clone, Debug, Default)]
struct Histogram {
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, d: Duration) {
        let s = d.as_secs_f64();
        for (b, bound) in self.buckets.iter_mut().zip(BUCKETS) {
            if s <= bound {
                *b += 1;
            }
        }
        self.count += 1;
        self.sum += s;
    }

    fn write(&self, o: &mut String, name: &str, kind: &str) {
        for (n, bound) in self.buckets.iter().zip(BUCKETS) {
            let _ = writeln!(
                o,
                "{name}_bucket{{proof_kind=\"{kind}\",le=\"{bound}\"}} {n}"
            );
        }
        let _ = writeln!(
            o,
            "{name}_bucket{{proof_kind=\"{kind}\",le=\"+Inf\"}} {}",
            self.count
        );
        let _ = writeln!(o, "{name}_sum{{proof_kind=\"{kind}\"}} {}", self.sum);
        let _ = writeln!(o, "{name}_count{{proof_kind=\"{kind}\"}} {}", self.count);
    }
}

/// Reads one counter of a kind.
type Count = fn(&KindStats) -> u64;
/// Reads one histogram of a kind.
type Hist = fn(&KindStats) -> &Histogram;

/// What is kept per proof kind.
#[derive(Clone, Debug, Default)]
struct KindStats {
    accepted: u64,
    completed: u64,
    failed: u64,
    cancelled: u64,
    queue_wait: Histogram,
    synthesis: Histogram,
    gpu: Histogram,
    verify: Histogram,
    total: Histogram,
}

/// The service's metrics (cheap to clone: one shared store).
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    kinds: Arc<Mutex<BTreeMap<&'static str, KindStats>>>,
    /// TCP connections closed at accept, by reason.
    refused: Arc<Mutex<BTreeMap<&'static str, u64>>>,
}

impl Metrics {
    /// No observations yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn with(&self, circuit: &str, f: impl FnOnce(&mut KindStats)) {
        let mut kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        f(kinds.entry(proof_kind_label(circuit)).or_default());
    }

    /// A job of `circuit` was accepted.
    pub fn accepted(&self, circuit: &str) {
        self.with(circuit, |k| k.accepted += 1);
    }

    /// A job ended: counted by how, its phases observed (a cancelled job's are not: its
    /// times are cut short).
    pub fn ended(&self, o: &JobOutcome) {
        self.with(&o.spec.circuit, |k| match &o.result {
            Ok(_) => {
                k.completed += 1;
                k.queue_wait.observe(o.times.queue_wait);
                k.synthesis.observe(o.times.synthesis);
                k.gpu.observe(o.times.gpu);
                k.verify.observe(o.times.verify);
                k.total.observe(o.elapsed);
            }
            Err(crate::jobs::JobFailure::Cancelled) => k.cancelled += 1,
            Err(_) => {
                k.failed += 1;
                k.total.observe(o.elapsed);
            }
        });
    }

    /// A TCP connection was closed without being served: `reason` is `not_allowed` (its peer
    /// is outside `[service] allow`), `too_many` (`max_connections` were open) or `silent` (it
    /// sent nothing before the deadline).
    pub fn connection_refused(&self, reason: &'static str) {
        let mut refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        *refused.entry(reason).or_default() += 1;
    }

    /// Connections refused for `reason` so far.
    pub fn connections_refused(&self, reason: &str) -> u64 {
        let refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        refused.get(reason).copied().unwrap_or(0)
    }

    /// Completed and failed jobs, every kind.
    pub fn totals(&self) -> (u64, u64) {
        let kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        kinds
            .values()
            .fold((0, 0), |(c, f), k| (c + k.completed, f + k.failed))
    }

    /// The text exposition: the counters and histograms kept here, and gauges read from
    /// `status` (the pipeline's, with `uptime`).
    pub fn render(&self, status: &PipelineStatus, uptime: Duration) -> String {
        let kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let refused = self
            .refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut o = String::new();
        write_service(&mut o, &kinds, status, uptime);
        write_refused(&mut o, &refused);
        write_kinds(&mut o, &kinds);
        write_ring_and_children(&mut o, status);
        write_gpus(&mut o, status, uptime);
        head(
            &mut o,
            "splitprover_huge_pages",
            "gauge",
            "Page kind backing the ring (1 for the kind in use).",
        );
        let _ = writeln!(
            o,
            "splitprover_huge_pages{{kind=\"{}\"}} 1",
            status.ring_pages.replace('"', "'")
        );
        o
    }
}

/// A metric's `# HELP` and `# TYPE` lines.
fn head(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP {name} {help}");
    let _ = writeln!(o, "# TYPE {name} {kind}");
}

/// cuzk's service-wide counters and gauges: totals, uptime, queue, running jobs, gpu workers.
fn write_service(
    o: &mut String,
    kinds: &BTreeMap<&'static str, KindStats>,
    status: &PipelineStatus,
    uptime: Duration,
) {
    let (completed, failed) = kinds
        .values()
        .fold((0, 0), |(c, f), k| (c + k.completed, f + k.failed));
    head(
        o,
        "cuzk_proofs_completed_total",
        "counter",
        "Proofs completed, every kind.",
    );
    let _ = writeln!(o, "cuzk_proofs_completed_total {completed}");
    head(
        o,
        "cuzk_proofs_failed_total",
        "counter",
        "Proofs failed, every kind.",
    );
    let _ = writeln!(o, "cuzk_proofs_failed_total {failed}");
    head(
        o,
        "cuzk_uptime_seconds",
        "gauge",
        "Seconds since the service started.",
    );
    let _ = writeln!(o, "cuzk_uptime_seconds {}", uptime.as_secs());
    let running = status.jobs.iter().filter(|j| j.running).count();
    head(
        o,
        "cuzk_queue_depth",
        "gauge",
        "Jobs accepted and not yet started.",
    );
    let _ = writeln!(o, "cuzk_queue_depth {}", status.jobs.len() - running);
    head(
        o,
        "cuzk_running_jobs",
        "gauge",
        "Jobs with a partition started.",
    );
    let _ = writeln!(o, "cuzk_running_jobs {running}");
    let gpus = status
        .children
        .iter()
        .filter(|c| c.role.starts_with("gpu-proc"))
        .count();
    head(o, "cuzk_gpu_workers", "gauge", "gpu-proc processes.");
    let _ = writeln!(o, "cuzk_gpu_workers {gpus}");
}

/// TCP connections closed at accept, by reason.
fn write_refused(o: &mut String, refused: &BTreeMap<&'static str, u64>) {
    head(
        o,
        "splitprover_connections_refused_total",
        "counter",
        "TCP connections closed at accept: peer not allowed, too many open, or silent.",
    );
    for reason in ["not_allowed", "too_many", "silent"] {
        let n = refused.get(reason).copied().unwrap_or(0);
        let _ = writeln!(
            o,
            "splitprover_connections_refused_total{{reason=\"{reason}\"}} {n}"
        );
    }
}

/// The counters and histograms kept per proof kind.
fn write_kinds(o: &mut String, kinds: &BTreeMap<&'static str, KindStats>) {
    let per_kind: [(&str, &str, &str, Count); 4] = [
        (
            "cuzk_proofs_completed",
            "counter",
            "Proofs completed.",
            |k| k.completed,
        ),
        ("cuzk_proofs_failed", "counter", "Proofs failed.", |k| {
            k.failed
        }),
        (
            "splitprover_proofs_cancelled",
            "counter",
            "Jobs cancelled.",
            |k| k.cancelled,
        ),
        (
            "splitprover_proofs_accepted",
            "counter",
            "Jobs accepted.",
            |k| k.accepted,
        ),
    ];
    for (name, kind, help, get) in per_kind {
        head(o, name, kind, help);
        for (label, k) in kinds {
            let _ = writeln!(o, "{name}{{proof_kind=\"{label}\"}} {}", get(k));
        }
    }
    head(
        o,
        "cuzk_proof_duration_seconds",
        "summary",
        "Time from acceptance to the end of a proof.",
    );
    for (label, k) in kinds {
        let _ = writeln!(
            o,
            "cuzk_proof_duration_seconds_sum{{proof_kind=\"{label}\"}} {}",
            k.total.sum
        );
        let _ = writeln!(
            o,
            "cuzk_proof_duration_seconds_count{{proof_kind=\"{label}\"}} {}",
            k.total.count
        );
    }
    let hists: [(&str, &str, Hist); 4] = [
        (
            "splitprover_queue_wait_seconds",
            "From acceptance to the first synthesis start.",
            |k| &k.queue_wait,
        ),
        (
            "splitprover_synthesis_seconds",
            "Synthesis time of a job, every partition.",
            |k| &k.synthesis,
        ),
        (
            "splitprover_gpu_seconds",
            "GPU time of a job, every partition.",
            |k| &k.gpu,
        ),
        (
            "splitprover_verify_seconds",
            "Time spent verifying a job's proofs before delivery.",
            |k| &k.verify,
        ),
    ];
    for (name, help, get) in hists {
        head(o, name, "histogram", help);
        for (label, k) in kinds {
            get(k).write(o, name, label);
        }
    }
}

/// The ring's slots by state and the children's restarts.
fn write_ring_and_children(o: &mut String, status: &PipelineStatus) {
    head(o, "splitprover_ring_slots", "gauge", "Ring slots by state.");
    let sl = &status.slots;
    for (state, n) in [
        ("free", sl.free),
        ("writing", sl.writing),
        ("ready", sl.ready),
        ("claimed", sl.claimed),
        ("done", sl.done),
    ] {
        let _ = writeln!(o, "splitprover_ring_slots{{state=\"{state}\"}} {n}");
    }
    head(
        o,
        "splitprover_child_restarts_total",
        "counter",
        "Restarts of each child process.",
    );
    for c in &status.children {
        let _ = writeln!(
            o,
            "splitprover_child_restarts_total{{role=\"{}\"}} {}",
            c.role, c.restarts
        );
    }
}

/// Each gpu-proc's busy share and device memory.
fn write_gpus(o: &mut String, status: &PipelineStatus, uptime: Duration) {
    head(
        o,
        "splitprover_gpu_busy_ratio",
        "gauge",
        "Share of the service's uptime each gpu-proc spent proving.",
    );
    for g in &status.gpus {
        let ratio = g.busy_ns as f64 / uptime.as_nanos().max(1) as f64;
        let _ = writeln!(
            o,
            "splitprover_gpu_busy_ratio{{gpu=\"{}\"}} {:.6}",
            g.ordinal,
            ratio.min(1.0)
        );
    }
    head(
        o,
        "splitprover_gpu_memory_bytes",
        "gauge",
        "Device memory per gpu-proc: free, the SRS resident, what streams from host memory \
         for every proof (SRS points, and matrix rows where they stream), what its backends \
         planned and the budget they planned within.",
    );
    for g in &status.gpus {
        for (what, bytes) in [
            ("free", g.vram_free_bytes),
            ("srs", g.srs_device_bytes),
            ("streamed", g.srs_streamed_bytes),
            ("planned", g.planned_device_bytes),
            ("budget", g.device_budget_bytes),
        ] {
            let _ = writeln!(
                o,
                "splitprover_gpu_memory_bytes{{gpu=\"{}\",what=\"{what}\"}} {bytes}",
                g.ordinal
            );
        }
    }
    head(
        o,
        "splitprover_gpu_srs_streamed_bytes_total",
        "counter",
        "Bytes each gpu-proc copied from host memory: the SRS points not kept resident, and \
         the witness matrices' rows where they stream.",
    );
    for g in &status.gpus {
        let _ = writeln!(
            o,
            "splitprover_gpu_srs_streamed_bytes_total{{gpu=\"{}\"}} {}",
            g.ordinal, g.srs_streamed_total_bytes
        );
    }
}

/// Serves `GET /metrics` (any other path: 404) over HTTP/1.1 on `listener`, each answer built by
/// `render`, until `shutdown` resolves.
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    render: Arc<dyn Fn() -> String + Send + Sync>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let conn = tokio::select! {
            c = listener.accept() => c,
            _ = shutdown.changed() => return,
        };
        let Ok((mut stream, _)) = conn else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let render = render.clone();
        tokio::spawn(async move {
            // One request per connection (`Connection: close`): scrapers open one per scrape.
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            let read = tokio::time::timeout(Duration::from_secs(10), async {
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 << 10 {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return false,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                true
            })
            .await;
            if read != Ok(true) {
                return;
            }
            let line = String::from_utf8_lossy(&head);
            let mut parts = line.split_whitespace();
            let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let (status, body, ctype) = if method != "GET" {
                ("405 Method Not Allowed", String::new(), "text/plain")
            } else if path == "/metrics" || path.starts_with("/metrics?") {
                (
                    "200 OK",
                    render(),
                    "text/plain; version=0.0.4; charset=utf-8",
                )
            } else {
                ("404 Not Found", "see /metrics\n".into(), "text/plain")
            };
            let reply = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(reply.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_labelled_as_cuzk_labels_them() {
        assert_eq!(proof_kind_label("porep:StackedDrg32GiBV1_1"), "porep_c2");
        assert_eq!(proof_kind_label("snap:StackedDrg32GiBV1"), "snap_update");
        assert_eq!(
            proof_kind_label("post:StackedDrgWinning2KiBV1"),
            "winning_post"
        );
        assert_eq!(
            proof_kind_label("post:StackedDrgWindow2KiBV1_2"),
            "window_post"
        );
        assert_eq!(proof_kind_label("sha-chain:1"), "builtin");
    }

    #[test]
    fn histogram_buckets_are_cumulative() {
        let mut h = Histogram::default();
        h.observe(Duration::from_millis(30));
        h.observe(Duration::from_secs(2));
        let mut o = String::new();
        h.write(&mut o, "x", "k");
        assert!(
            o.contains("x_bucket{proof_kind=\"k\",le=\"0.025\"} 0\n"),
            "{o}"
        );
        assert!(
            o.contains("x_bucket{proof_kind=\"k\",le=\"0.05\"} 1\n"),
            "{o}"
        );
        assert!(
            o.contains("x_bucket{proof_kind=\"k\",le=\"2.5\"} 2\n"),
            "{o}"
        );
        assert!(
            o.contains("x_bucket{proof_kind=\"k\",le=\"+Inf\"} 2\n"),
            "{o}"
        );
        assert!(o.contains("x_count{proof_kind=\"k\"} 2\n"), "{o}");
    }

    #[test]
    fn each_gpu_reports_its_memory_and_the_srs_it_streams() {
        let gpu = |ordinal, streamed, total| crate::pipeline::GpuLine {
            ordinal,
            vram_free_bytes: 40,
            srs_device_bytes: 30,
            planned_device_bytes: 20,
            device_budget_bytes: 50,
            srs_streamed_bytes: streamed,
            srs_streamed_total_bytes: total,
            ..Default::default()
        };
        let status = PipelineStatus {
            ring_pages: "plain".into(),
            ring_slots: 1,
            slot_bytes: 1 << 20,
            gpus: vec![gpu(0, 0, 0), gpu(1, 7 << 30, 70 << 30)],
            ..PipelineStatus::default()
        };
        let o = Metrics::new().render(&status, Duration::from_secs(1));
        for line in [
            "splitprover_gpu_memory_bytes{gpu=\"0\",what=\"streamed\"} 0\n",
            "splitprover_gpu_memory_bytes{gpu=\"1\",what=\"streamed\"} 7516192768\n",
            "splitprover_gpu_memory_bytes{gpu=\"1\",what=\"srs\"} 30\n",
            "splitprover_gpu_memory_bytes{gpu=\"1\",what=\"budget\"} 50\n",
            "# TYPE splitprover_gpu_srs_streamed_bytes_total counter\n",
            "splitprover_gpu_srs_streamed_bytes_total{gpu=\"0\"} 0\n",
            "splitprover_gpu_srs_streamed_bytes_total{gpu=\"1\"} 75161927680\n",
        ] {
            assert!(o.contains(line), "{line} in {o}");
        }
        assert!(
            o.contains("# HELP splitprover_gpu_srs_streamed_bytes_total Bytes each gpu-proc"),
            "{o}"
        );
    }
}
