//! The SVG images of `splitprover report`: line charts of a sweep ([`line_chart`]: throughput,
//! GPU-time inflation and latency against client concurrency, one line per mode, layout and
//! neighbour state) and waterfalls side by side ([`side_by_side`]). Plain SVG 1.1, no script,
//! no external reference: any browser or `rsvg-convert` shows them.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::report::SweepRow;
use crate::timeline::Timeline;

/// One line of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Its legend entry.
    pub label: String,
    /// (x, y) points; drawn in x order.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed (the rows with the noisy neighbour).
    pub dashed: bool,
}

const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

fn esc(s: &str) -> String {
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

fn tick_label(v: f64, step: f64) -> String {
    if step >= 1.0 {
        format!("{v:.0}")
    } else if step >= 0.1 {
        format!("{v:.1}")
    } else if step >= 0.01 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A line chart: the x values are categories, evenly spaced in increasing order (client
/// concurrencies 1, 2, 4, 8, 16 read best that way); y from 0 (or below, if a value is) to a
/// round value above the largest. `reference` draws a horizontal line with its label (the 1.0
/// of a ratio). Points that are not finite are left out.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    reference: Option<(f64, &str)>,
) -> String {
    let finite = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite();
    let xs: Vec<f64> = {
        let set: BTreeSet<u64> = series
            .iter()
            .flat_map(|s| s.points.iter().filter(finite).map(|p| p.0.to_bits()))
            .collect();
        let mut v: Vec<f64> = set.into_iter().map(f64::from_bits).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v.dedup();
        v
    };
    let ys = series
        .iter()
        .flat_map(|s| s.points.iter().filter(finite).map(|p| p.1))
        .chain(reference.map(|r| r.0));
    let (lo, hi) = ys.fold((0.0f64, 0.0f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
    let step = nice_step((hi - lo) / 5.0);
    let y_min = (lo / step).floor() * step;
    let y_max = ((hi / step).floor() + 1.0) * step;
    let (left, top, plot_w, plot_h): (f64, f64, f64, f64) = (70.0, 40.0, 560.0, 320.0);
    let legend_x = left + plot_w + 20.0;
    let legend_w = 300.0;
    let width = legend_x + legend_w;
    let height = (top + plot_h + 60.0).max(top + 20.0 + 16.0 * series.len() as f64);
    let x_of = |x: f64| {
        let i = xs.iter().position(|v| *v == x).unwrap_or(0);
        if xs.len() <= 1 {
            left + plot_w / 2.0
        } else {
            left + 20.0 + i as f64 * (plot_w - 40.0) / (xs.len() - 1) as f64
        }
    };
    let y_of = |y: f64| top + plot_h - (y - y_min) / (y_max - y_min) * plot_h;

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
        r#"<text x="{left}" y="22" font-size="14">{}</text>"#,
        esc(title)
    );
    // Axes, grid and ticks.
    let _ = writeln!(
        s,
        r#"<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>"#
    );
    let mut k = 0;
    loop {
        let v = y_min + k as f64 * step;
        if v > y_max + step * 1e-6 || k > 50 {
            break;
        }
        let y = y_of(v);
        let _ = writeln!(
            s,
            r#"<line x1="{left}" y1="{y:.2}" x2="{:.0}" y2="{y:.2}" stroke="black" stroke-opacity="0.12"/><text x="{:.0}" y="{:.2}" text-anchor="end">{}</text>"#,
            left + plot_w,
            left - 6.0,
            y + 4.0,
            tick_label(v, step)
        );
        k += 1;
    }
    for &x in &xs {
        let px = x_of(x);
        let _ = writeln!(
            s,
            r#"<line x1="{px:.2}" y1="{:.0}" x2="{px:.2}" y2="{:.0}" stroke="black"/><text x="{px:.2}" y="{:.0}" text-anchor="middle">{}</text>"#,
            top + plot_h,
            top + plot_h + 5.0,
            top + plot_h + 18.0,
            tick_label(x, 1.0)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.0}" y="{:.0}" text-anchor="middle">{}</text>"#,
        left + plot_w / 2.0,
        top + plot_h + 40.0,
        esc(x_label)
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="{:.0}" text-anchor="middle" transform="rotate(-90 16 {:.0})">{}</text>"#,
        top + plot_h / 2.0,
        top + plot_h / 2.0,
        esc(y_label)
    );
    if let Some((v, label)) = reference {
        let y = y_of(v);
        let _ = writeln!(
            s,
            r#"<line x1="{left}" y1="{y:.2}" x2="{:.0}" y2="{y:.2}" stroke="black" stroke-dasharray="2,3"/><text x="{:.0}" y="{:.2}" text-anchor="end">{}</text>"#,
            left + plot_w,
            left + plot_w - 4.0,
            y - 4.0,
            esc(label)
        );
    }
    for (i, ser) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let mut pts: Vec<(f64, f64)> = ser.points.iter().filter(finite).copied().collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let dash = if ser.dashed {
            r#" stroke-dasharray="6,4""#
        } else {
            ""
        };
        if pts.len() > 1 {
            let path: Vec<String> = pts
                .iter()
                .map(|&(x, y)| format!("{:.2},{:.2}", x_of(x), y_of(y)))
                .collect();
            let _ = writeln!(
                s,
                r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"{dash}/>"#,
                path.join(" ")
            );
        }
        for &(x, y) in &pts {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.2}" cy="{:.2}" r="3" fill="{color}"/>"#,
                x_of(x),
                y_of(y)
            );
        }
        let ly = top + 10.0 + 16.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{legend_x}" y1="{ly:.0}" x2="{:.0}" y2="{ly:.0}" stroke="{color}" stroke-width="2"{dash}/><text x="{:.0}" y="{:.0}">{}</text>"#,
            legend_x + 24.0,
            legend_x + 30.0,
            ly + 4.0,
            esc(&ser.label)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The series of a sweep: one per mode, layout, synthesis workers (when the sweep has several)
/// and neighbour state, over its client concurrencies (capacity rows left out), with `y` of
/// each row (rows where it is `None` left out).
pub fn sweep_series(rows: &[SweepRow], y: impl Fn(&SweepRow) -> Option<f64>) -> Vec<Series> {
    let workers: BTreeSet<usize> = rows.iter().map(|r| r.synth_threads).collect();
    let mut out: Vec<Series> = Vec::new();
    for r in rows.iter().filter(|r| r.clients > 0) {
        let mut label = format!("{}, {}", r.row.mode, r.layout);
        if workers.len() > 1 {
            let _ = write!(
                label,
                ", {}",
                crate::report::plural(r.synth_threads, "worker")
            );
        }
        if r.neighbour {
            label.push_str(", hog");
        }
        let Some(v) = y(r) else { continue };
        match out.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push((r.clients as f64, v)),
            None => out.push(Series {
                label,
                points: vec![(r.clients as f64, v)],
                dashed: r.neighbour,
            }),
        }
    }
    out
}

/// The width and height an SVG's root element declares (the waterfalls and charts of this
/// crate write both).
fn svg_size(svg: &str) -> (f64, f64) {
    let attr = |name: &str| {
        let key = format!(" {name}=\"");
        svg.find(&key)
            .map(|i| &svg[i + key.len()..])
            .and_then(|rest| rest.split('"').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (attr("width"), attr("height"))
}

/// Waterfalls side by side: each panel's title over its timeline's waterfall, `columns` panels
/// a row, as one SVG (each waterfall a nested `<svg>` element).
pub fn side_by_side(panels: &[(String, Timeline)], columns: usize) -> String {
    let columns = columns.max(1);
    let images: Vec<(String, String, f64, f64)> = panels
        .iter()
        .map(|(title, t)| {
            let svg = t.waterfall_svg();
            let (w, h) = svg_size(&svg);
            (title.clone(), svg, w, h)
        })
        .collect();
    let cell_w = images.iter().map(|i| i.2).fold(0.0, f64::max);
    let cell_h = images.iter().map(|i| i.3).fold(0.0, f64::max) + 24.0;
    let rows = images.len().div_ceil(columns);
    let width = (cell_w * columns.min(images.len().max(1)) as f64).max(200.0);
    let height = (cell_h * rows as f64).max(40.0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="14">"#
    );
    let _ = writeln!(
        s,
        r#"<rect x="0" y="0" width="{width:.0}" height="{height:.0}" fill="white"/>"#
    );
    if images.is_empty() {
        let _ = writeln!(s, r#"<text x="10" y="24">no waterfall to show</text>"#);
    }
    for (i, (title, svg, _, _)) in images.iter().enumerate() {
        let (x, y) = ((i % columns) as f64 * cell_w, (i / columns) as f64 * cell_h);
        let _ = writeln!(
            s,
            r#"<text x="{:.0}" y="{:.0}" font-weight="bold">{}</text>"#,
            x + 10.0,
            y + 18.0,
            esc(title)
        );
        // The waterfall's own root, moved into its cell.
        let nested = svg.replacen(
            "<svg ",
            &format!(r#"<svg x="{x:.0}" y="{:.0}" "#, y + 24.0),
            1,
        );
        s.push_str(&nested);
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{BenchRow, TimelineStats};
    use crate::timeline::tests::sample;

    fn texts(doc: &roxmltree::Document<'_>) -> Vec<String> {
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(str::to_owned))
            .collect()
    }

    #[test]
    fn a_line_chart_is_well_formed_with_a_line_per_series() {
        let series = vec![
            Series {
                label: "split, gpu 2 cores".into(),
                points: vec![(4.0, 200.0), (1.0, 30.0), (16.0, 210.0)],
                dashed: false,
            },
            Series {
                label: "inprocess & <friends>, hog".into(),
                points: vec![(1.0, 25.0), (4.0, f64::NAN), (16.0, 120.0)],
                dashed: true,
            },
        ];
        let svg = line_chart(
            "proofs/min",
            "jobs in flight",
            "proofs/min",
            &series,
            Some((1.0, "GPU only")),
        );
        let doc = roxmltree::Document::parse(&svg).expect("well-formed");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        let lines: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .collect();
        assert_eq!(lines.len(), 2);
        // The NaN point is left out; points are drawn in x order.
        assert_eq!(lines[1].attribute("points").unwrap().split(' ').count(), 2);
        assert_eq!(lines[1].attribute("stroke-dasharray"), Some("6,4"));
        let circles = doc
            .descendants()
            .filter(|n| n.has_tag_name("circle"))
            .count();
        assert_eq!(circles, 5);
        let t = texts(&doc);
        for want in [
            "1",
            "4",
            "16",
            "inprocess & <friends>, hog",
            "GPU only",
            "250",
        ] {
            assert!(t.iter().any(|x| x == want), "{want} not in {t:?}");
        }
        let xs: Vec<f64> = lines[0]
            .attribute("points")
            .unwrap()
            .split(' ')
            .map(|p| p.split(',').next().unwrap().parse().unwrap())
            .collect();
        assert!(xs.windows(2).all(|w| w[0] < w[1]), "{xs:?}");
        // Nothing to draw is still an image.
        roxmltree::Document::parse(&line_chart("t", "x", "y", &[], None)).unwrap();
    }

    #[test]
    fn series_follow_mode_layout_and_neighbour() {
        let row = |mode: &str, clients: usize, hog: bool, per_min: f64| {
            let mut r = SweepRow::new(
                BenchRow::from_stats("c", mode, &TimelineStats::default()),
                "gpu 1 core",
            );
            r.clients = clients;
            r.neighbour = hog;
            r.row.proofs_per_min = Some(per_min);
            r
        };
        let rows = [
            row("gpu-only", 0, false, 99.0),
            row("split", 1, false, 10.0),
            row("split", 2, false, 20.0),
            row("split", 1, true, 8.0),
            row("inprocess", 1, false, 9.0),
        ];
        let s = sweep_series(&rows, |r| r.row.proofs_per_min);
        let labels: Vec<&str> = s.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "split, gpu 1 core",
                "split, gpu 1 core, hog",
                "inprocess, gpu 1 core"
            ]
        );
        assert_eq!(s[0].points, [(1.0, 10.0), (2.0, 20.0)]);
        assert!(s[1].dashed && !s[0].dashed);
    }

    #[test]
    fn waterfalls_side_by_side_nest_each_one() {
        let panels = vec![
            ("inprocess".to_string(), sample()),
            ("split".to_string(), sample()),
            ("split, hog".to_string(), Timeline::new()),
        ];
        let svg = side_by_side(&panels, 2);
        let doc = roxmltree::Document::parse(&svg).expect("well-formed");
        let nested: Vec<_> = doc
            .root_element()
            .children()
            .filter(|n| n.has_tag_name("svg"))
            .collect();
        assert_eq!(nested.len(), 3);
        assert_eq!(nested[0].attribute("x"), Some("0"));
        assert_ne!(nested[1].attribute("x"), Some("0"));
        assert_eq!(nested[2].attribute("x"), Some("0"));
        assert_ne!(nested[2].attribute("y"), nested[0].attribute("y"));
        let t = texts(&doc);
        assert!(t.iter().any(|x| x == "split, hog"), "{t:?}");
        let (w, h) = svg_size(&svg);
        assert!(w > 0.0 && h > 0.0);
        roxmltree::Document::parse(&side_by_side(&[], 2)).unwrap();
    }
}
