//! The SVG waterfall view ([`Timeline::waterfall_svg`]).

use std::collections::HashMap;
use std::fmt::Write as _;

use super::{ns_to_s, union, Span, Timeline};

const SYNTH_COLOR: &str = "#4e79a7";
const WAIT_COLOR: &str = "#c9c3bd";
const GPU_COLOR: &str = "#f28e2b";
const DONE_COLOR: &str = "#2ca02c";
const IDLE_COLOR: &str = "#eeeeee";

impl Timeline {
    /// The waterfall as an SVG image: one row per (job, partition) with bars for synthesis, the
    /// wait in the ring and the GPU, a tick for `PROOF_DONE`, an aggregated "GPU busy" row, a time
    /// axis with labelled ticks and a legend.
    pub fn waterfall_svg(&self) -> String {
        let iv = self.intervals();
        let t0 = self.first_ns().unwrap_or(0);
        let span_ns = self.last_ns().unwrap_or(0).saturating_sub(t0).max(1);
        let rows = iv.rows.len();
        let row_h: f64 = if rows <= 200 {
            14.0
        } else {
            (2800.0 / rows as f64).max(2.0)
        };
        let label_w = 120.0;
        let plot_w = 900.0;
        let top = 50.0;
        let rows_h = row_h * rows as f64;
        let busy_y = top + rows_h + 6.0;
        let busy_h = 14.0;
        let axis_y = busy_y + busy_h + 4.0;
        let width = label_w + plot_w + 20.0;
        let height = axis_y + 60.0;
        let x = |t: u64| label_w + t.saturating_sub(t0) as f64 / span_ns as f64 * plot_w;

        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
        );
        let _ = writeln!(
            s,
            r#"<rect x="0" y="0" width="{width:.0}" height="{height:.0}" fill="white"/>"#
        );
        let _ = writeln!(
            s,
            r#"<text x="{label_w}" y="16" font-size="13">{}</text>"#,
            xml_escape(&format!(
                "proof waterfall: {} rows, {} gpu batches, {:.3} s",
                rows,
                iv.batches.len(),
                ns_to_s(span_ns)
            ))
        );
        // Legend.
        for (i, (name, color)) in [
            ("synthesis", SYNTH_COLOR),
            ("ring wait", WAIT_COLOR),
            ("gpu", GPU_COLOR),
            ("proof done", DONE_COLOR),
        ]
        .into_iter()
        .enumerate()
        {
            let lx = label_w + i as f64 * 110.0;
            let _ = writeln!(
                s,
                r#"<rect x="{lx}" y="26" width="12" height="10" fill="{color}"/><text x="{}" y="35">{name}</text>"#,
                lx + 16.0
            );
        }

        let row_index: HashMap<(u64, u32), usize> =
            iv.rows.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let bar = |s: &mut String, span: &Span, color: &str, shrink: f64| {
            let Some(&r) = row_index.get(&(span.job_id, span.partition)) else {
                return;
            };
            let y = top + r as f64 * row_h + shrink;
            let x0 = x(span.start_ns);
            let w = (x(span.end_ns) - x0).max(0.5);
            let h = (row_h - 2.0 * shrink - 1.0).max(1.0);
            let _ = writeln!(
                s,
                r#"<rect x="{x0:.2}" y="{y:.2}" width="{w:.2}" height="{h:.2}" fill="{color}"/>"#
            );
        };
        let shrink = if row_h >= 6.0 { 1.0 } else { 0.0 };
        for sp in &iv.ring_wait {
            bar(&mut s, sp, WAIT_COLOR, shrink * 3.0);
        }
        for sp in &iv.synth {
            bar(&mut s, sp, SYNTH_COLOR, shrink);
        }
        for sp in &iv.gpu {
            bar(&mut s, sp, GPU_COLOR, shrink);
        }
        for e in &iv.proofs_done {
            if let Some(&r) = row_index.get(&(e.job_id, e.partition)) {
                let _ = writeln!(
                    s,
                    r#"<rect x="{:.2}" y="{:.2}" width="2" height="{:.2}" fill="{DONE_COLOR}"/>"#,
                    x(e.t_ns) - 1.0,
                    top + r as f64 * row_h,
                    (row_h - 1.0).max(1.0)
                );
            }
        }
        if row_h >= 10.0 {
            for (i, (job, part)) in iv.rows.iter().enumerate() {
                let _ = writeln!(
                    s,
                    r#"<text x="{:.0}" y="{:.2}" text-anchor="end">job {job} p{part}</text>"#,
                    label_w - 6.0,
                    top + i as f64 * row_h + row_h - 3.0
                );
            }
        }
        // Aggregated GPU busy row.
        let _ = writeln!(
            s,
            r#"<text x="{:.0}" y="{:.2}" text-anchor="end">GPU busy</text>"#,
            label_w - 6.0,
            busy_y + busy_h - 3.0
        );
        let _ = writeln!(
            s,
            r#"<rect x="{label_w}" y="{busy_y:.2}" width="{plot_w}" height="{busy_h}" fill="{IDLE_COLOR}"/>"#
        );
        for (a, b) in union(iv.batches.iter().map(|b| (b.start_ns, b.end_ns))) {
            let _ = writeln!(
                s,
                r#"<rect x="{:.2}" y="{busy_y:.2}" width="{:.2}" height="{busy_h}" fill="{GPU_COLOR}"/>"#,
                x(a),
                (x(b) - x(a)).max(0.5)
            );
        }
        // Time axis.
        let _ = writeln!(
            s,
            r#"<line x1="{label_w}" y1="{axis_y:.2}" x2="{:.0}" y2="{axis_y:.2}" stroke="black"/>"#,
            label_w + plot_w
        );
        let span_s = ns_to_s(span_ns);
        let step = nice_step(span_s / 8.0);
        let mut k = 0u64;
        loop {
            let t = k as f64 * step;
            if t > span_s * 1.0001 {
                break;
            }
            let tx = label_w + t / span_s * plot_w;
            let _ = writeln!(
                s,
                r#"<line x1="{tx:.2}" y1="{top}" x2="{tx:.2}" y2="{:.2}" stroke="rgb(0,0,0)" stroke-opacity="0.12"/><line x1="{tx:.2}" y1="{axis_y:.2}" x2="{tx:.2}" y2="{:.2}" stroke="black"/><text x="{tx:.2}" y="{:.2}" text-anchor="middle">{}</text>"#,
                axis_y,
                axis_y + 5.0,
                axis_y + 18.0,
                format_time(t, step)
            );
            k += 1;
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.0}" y="{:.2}" text-anchor="middle">time since the first event</text>"#,
            label_w + plot_w / 2.0,
            axis_y + 36.0
        );
        s.push_str("</svg>\n");
        s
    }
}

/// A round step (1, 2 or 5 × 10^k) of at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw > 0.0 && raw.is_finite()) {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

fn format_time(t_s: f64, step_s: f64) -> String {
    if step_s >= 1.0 {
        format!("{t_s:.0} s")
    } else if step_s >= 0.1 {
        format!("{t_s:.1} s")
    } else if step_s >= 0.001 {
        format!("{:.0} ms", t_s * 1e3)
    } else {
        format!("{:.0} µs", t_s * 1e6)
    }
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::tests::sample;

    #[test]
    fn svg_is_well_formed_and_has_every_bar() {
        let svg = sample().waterfall_svg();
        let doc = roxmltree::Document::parse(&svg).expect("well-formed svg");
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg");
        let rects = root.descendants().filter(|n| n.has_tag_name("rect"));
        let fill = |c: &str| {
            rects
                .clone()
                .filter(|n| n.attribute("fill") == Some(c))
                .count()
        };
        // Legend swatch + bars.
        assert_eq!(fill(SYNTH_COLOR), 1 + 3);
        assert_eq!(fill(WAIT_COLOR), 1 + 3);
        assert_eq!(fill(GPU_COLOR), 1 + 3 + 2); // + two busy-lane blocks
        assert_eq!(fill(DONE_COLOR), 1 + 3);
        let texts: Vec<String> = root
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(str::to_string))
            .collect();
        assert!(texts.iter().any(|t| t == "job 2 p0"), "{texts:?}");
        assert!(texts.iter().any(|t| t == "0 ms"), "{texts:?}");
        assert!(texts.iter().any(|t| t == "GPU busy"), "{texts:?}");
        // An empty timeline still gives a valid image.
        roxmltree::Document::parse(&Timeline::new().waterfall_svg()).unwrap();
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(0.3), 0.5);
        assert_eq!(nice_step(1.0), 1.0);
        assert_eq!(nice_step(12.0), 20.0);
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(format_time(0.25, 0.05), "250 ms");
    }
}
