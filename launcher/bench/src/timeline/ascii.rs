//! The terminal waterfall view ([`Timeline::ascii_waterfall`]).

use std::collections::HashMap;
use std::fmt::Write as _;

use super::{union, Span, Timeline};

/// Rows drawn at most by [`Timeline::ascii_waterfall`]; the rest are summarised in one line.
pub const ASCII_MAX_ROWS: usize = 48;

impl Timeline {
    /// The waterfall for a terminal, `width` columns of time: one row per (job, partition) with
    /// `s` synthesis, `.` waiting in the ring, `G` GPU (the strongest state in a column wins), `|`
    /// where the proof was done; then a `GPU busy` row (`#` busy the whole column, `+` part of it)
    /// and a time axis. At most [`ASCII_MAX_ROWS`] rows are drawn.
    pub fn ascii_waterfall(&self, width: usize) -> String {
        let width = width.max(10);
        let iv = self.intervals();
        let mut out = String::new();
        let (Some(t0), Some(t1)) = (self.first_ns(), self.last_ns()) else {
            out.push_str("(empty timeline)\n");
            return out;
        };
        let span = (t1 - t0).max(1) as f64;
        let col = |t: u64| {
            (((t.saturating_sub(t0)) as f64 / span * width as f64) as usize).min(width - 1)
        };
        let labels: Vec<String> = iv.rows.iter().map(|(j, p)| format!("j{j} p{p}")).collect();
        let label_w = labels
            .iter()
            .map(|l| l.len())
            .max()
            .unwrap_or(0)
            .max("GPU busy".len());

        let mut grid: Vec<Vec<u8>> = vec![vec![b' '; width]; iv.rows.len()];
        let row_index: HashMap<(u64, u32), usize> =
            iv.rows.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let rank = |c: u8| match c {
            b'G' => 3,
            b's' => 2,
            b'.' => 1,
            _ => 0,
        };
        let mut paint = |sp: &Span, c: u8| {
            if let Some(&r) = row_index.get(&(sp.job_id, sp.partition)) {
                for cell in &mut grid[r][col(sp.start_ns)..=col(sp.end_ns)] {
                    if rank(c) > rank(*cell) {
                        *cell = c;
                    }
                }
            }
        };
        iv.ring_wait.iter().for_each(|sp| paint(sp, b'.'));
        iv.synth.iter().for_each(|sp| paint(sp, b's'));
        iv.gpu.iter().for_each(|sp| paint(sp, b'G'));
        for e in &iv.proofs_done {
            if let Some(&r) = row_index.get(&(e.job_id, e.partition)) {
                let c = &mut grid[r][col(e.t_ns)];
                if *c == b' ' {
                    *c = b'|';
                }
            }
        }
        for (r, (label, cells)) in labels.iter().zip(&grid).enumerate() {
            if r == ASCII_MAX_ROWS {
                let _ = writeln!(
                    out,
                    "{:>label_w$} ({} more rows not shown)",
                    "...",
                    grid.len() - r
                );
                break;
            }
            let _ = writeln!(
                out,
                "{label:>label_w$} |{}|",
                String::from_utf8_lossy(cells)
            );
        }
        // GPU busy: fraction of each column covered by the union of GPU intervals.
        let mut busy = vec![0.0f64; width];
        let col_ns = span / width as f64;
        for (a, b) in union(iv.batches.iter().map(|b| (b.start_ns, b.end_ns))) {
            let (a, b) = ((a - t0) as f64, (b - t0) as f64);
            let first = ((a / col_ns) as usize).min(width - 1);
            let last = ((b / col_ns) as usize).min(width - 1);
            for (c, cell) in busy.iter_mut().enumerate().take(last + 1).skip(first) {
                let lo = a.max(c as f64 * col_ns);
                let hi = b.min((c + 1) as f64 * col_ns);
                *cell += (hi - lo).max(0.0) / col_ns;
            }
        }
        let lane: String = busy
            .iter()
            .map(|f| {
                if *f >= 0.95 {
                    '#'
                } else if *f > 0.0 {
                    '+'
                } else {
                    ' '
                }
            })
            .collect();
        let _ = writeln!(out, "{:>label_w$} |{lane}|", "GPU busy");
        let end = format!("{:.3} s", span / 1e9);
        let _ = writeln!(
            out,
            "{:>label_w$}  0 s{end:>w$}",
            "",
            w = width.saturating_sub(3)
        );
        let _ = writeln!(
            out,
            "{:>label_w$}  s synthesis  . ring wait  G gpu  | proof done",
            ""
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::tests::{ev, sample};
    use shm_protocol::control::EventKind;

    #[test]
    fn ascii_waterfall_shape() {
        let text = sample().ascii_waterfall(52);
        let lines: Vec<&str> = text.lines().collect();
        // 3 rows, GPU busy, axis, legend.
        assert_eq!(lines.len(), 6, "{text}");
        for l in &lines[..4] {
            assert!(l.chars().filter(|c| *c == '|').count() >= 2, "{l}");
            let inner = l.split_once('|').unwrap().1;
            assert_eq!(inner.chars().count(), 52 + 1, "{l}");
        }
        let row0 = lines[0].split_once('|').unwrap().1;
        let s0 = row0.find('s').unwrap();
        let g0 = row0.find('G').unwrap();
        assert!(s0 < g0, "{row0}");
        assert!(row0[s0..g0].contains('.'), "{row0}");
        assert!(lines[3].starts_with("GPU busy"), "{text}");
        let busy = lines[3].split_once('|').unwrap().1;
        // GPU busy 40 + 20 ms of 262 ms ≈ 23 % of the columns.
        let cols = busy.chars().filter(|c| *c == '#' || *c == '+').count();
        assert!((10..=16).contains(&cols), "{busy}");
        assert_eq!(Timeline::new().ascii_waterfall(40), "(empty timeline)\n");
    }

    #[test]
    fn ascii_waterfall_caps_rows() {
        use EventKind::*;
        let events =
            (0..100u64).flat_map(|j| [ev(SynthStart, j, 0, 1, j), ev(SynthEnd, j, 0, 1, j + 5)]);
        let text = Timeline::from_events(events).ascii_waterfall(20);
        assert!(text.contains("(52 more rows not shown)"), "{text}");
    }
}
