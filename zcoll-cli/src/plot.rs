//! A log-log plot of latency against message size, written as SVG by hand (no plotting
//! dependency): one panel per collective, one line per implementation. `zcoll bench`
//! draws measured lines; `zcoll tune --plot` draws measured points against the model's
//! lines, one colour per algorithm.

use std::fmt::Write;

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// A solid line through the points, each marked.
    Line,
    /// A dashed line (references such as the memcpy floor, or a model's prediction).
    Dashed,
    /// Markers only (measurements set against a model's line).
    Points,
}

/// One line of a panel: an implementation's latency (microseconds) at each size (bytes).
pub struct Series {
    /// The legend's text.
    pub label: String,
    /// `(size, latency)` pairs.
    pub points: Vec<(f64, f64)>,
    /// How the line is drawn.
    pub style: Style,
    /// The palette entry; `None`: MPI red, memcpy grey, the others in turn.
    pub color: Option<usize>,
}

/// One collective's plot.
pub struct Panel {
    /// The panel's title (the collective).
    pub title: String,
    /// What the y axis shows.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
}

/// The y axis of `zcoll bench`'s panels.
pub const MEASURED_LATENCY: &str = "latency (µs): median of the per-iteration maximum over ranks";

const WIDTH: f64 = 880.0;
const HEIGHT: f64 = 540.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 56.0;
const BOTTOM: f64 = 64.0;
const COLORS: [&str; 8] =
    ["#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"];

/// The colour of a series: its own palette entry if it names one, else MPI red, memcpy
/// grey, and zcoll's algorithms from the palette in turn (`k`).
fn color(s: &Series, k: usize) -> &'static str {
    let label = &s.label;
    if let Some(i) = s.color {
        COLORS[i % COLORS.len()]
    } else if label.starts_with("MPI") {
        "#d62728"
    } else if label.starts_with("memcpy") {
        "#555555"
    } else {
        COLORS[k % COLORS.len()]
    }
}

/// The colour of every series of a panel, in order.
fn series_colors(series: &[Series]) -> Vec<&'static str> {
    let mut k = 0;
    series
        .iter()
        .map(|s| {
            let c = color(s, k);
            if s.color.is_none() && !(s.label.starts_with("MPI") || s.label.starts_with("memcpy")) {
                k += 1;
            }
            c
        })
        .collect()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A size label: 1, 4, 16, ..., 1K, 4K, ..., 1M, ...
fn size_label(bytes: f64) -> String {
    let b = bytes.round() as u64;
    match b {
        b if b >= 1 << 30 => format!("{}G", b >> 30),
        b if b >= 1 << 20 => format!("{}M", b >> 20),
        b if b >= 1 << 10 => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}

/// A time label for a power of ten of microseconds.
fn time_label(us: f64) -> String {
    if us >= 1.0 {
        format!("{}", us.round() as u64)
    } else {
        let digits = (-us.log10()).round() as usize;
        format!("{us:.digits$}")
    }
}

/// The whole SVG document: the panels stacked vertically.
pub fn svg(panels: &[Panel]) -> String {
    let mut out = String::new();
    let total = HEIGHT * panels.len().max(1) as f64;
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{total}" viewBox="0 0 {WIDTH} {total}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="13">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (i, p) in panels.iter().enumerate() {
        panel(&mut out, p, HEIGHT * i as f64);
    }
    out.push_str("</svg>\n");
    out
}

fn panel(out: &mut String, p: &Panel, y0: f64) {
    let pts = p.series.iter().flat_map(|s| s.points.iter()).filter(|(x, y)| *x > 0.0 && *y > 0.0);
    let (mut xmin, mut xmax, mut ymin, mut ymax) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        xmin = xmin.min(x);
        xmax = xmax.max(x);
        ymin = ymin.min(y);
        ymax = ymax.max(y);
    }
    if xmin > xmax {
        return;
    }
    // Whole powers of two on x, whole decades on y.
    let (lx0, mut lx1) = (xmin.log2().floor(), xmax.log2().ceil());
    if lx1 <= lx0 {
        lx1 = lx0 + 1.0;
    }
    let (ly0, mut ly1) = (ymin.log10().floor(), ymax.log10().ceil());
    if ly1 <= ly0 {
        ly1 = ly0 + 1.0;
    }
    let (w, h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let px = |x: f64| LEFT + (x.log2() - lx0) / (lx1 - lx0) * w;
    let py = |y: f64| y0 + TOP + h - (y.log10() - ly0) / (ly1 - ly0) * h;

    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle" font-size="16" font-weight="bold">{}</text>"#,
        LEFT + w / 2.0,
        y0 + 30.0,
        escape(&p.title)
    );
    // Grid, ticks and labels.
    let step = if lx1 - lx0 > 12.0 { 2 } else { 1 };
    for k in (lx0 as i64..=lx1 as i64).filter(|k| k % step == 0) {
        let x = px((k as f64).exp2());
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#e4e4e4"/>"##,
            y0 + TOP,
            y0 + TOP + h
        );
        let _ = writeln!(
            out,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            y0 + TOP + h + 18.0,
            size_label((k as f64).exp2())
        );
    }
    for k in ly0 as i64..=ly1 as i64 {
        let v = 10f64.powi(k as i32);
        let y = py(v);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#d0d0d0"/>"##,
            LEFT + w
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 8.0,
            y + 4.0,
            time_label(v)
        );
        for m in 2..10 {
            let y = py(v * m as f64);
            if k < ly1 as i64 {
                let _ = writeln!(
                    out,
                    r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#f2f2f2"/>"##,
                    LEFT + w
                );
            }
        }
    }
    let _ = writeln!(
        out,
        r#"<rect x="{LEFT}" y="{:.1}" width="{w:.1}" height="{h:.1}" fill="none" stroke="black"/>"#,
        y0 + TOP
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">message size (bytes per rank)</text>"#,
        LEFT + w / 2.0,
        y0 + HEIGHT - 18.0
    );
    let _ = writeln!(
        out,
        r#"<text transform="translate(24 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        y0 + TOP + h / 2.0,
        escape(&p.y_label)
    );
    // The lines, then the legend in the top-left corner (latency grows with size, so
    // that corner is empty).
    let colors = series_colors(&p.series);
    for (s, c) in p.series.iter().zip(&colors) {
        let pts: Vec<String> = s
            .points
            .iter()
            .filter(|(x, y)| *x > 0.0 && *y > 0.0)
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let dash = if s.style == Style::Dashed { r#" stroke-dasharray="6 4""# } else { "" };
        if s.style != Style::Points {
            let _ = writeln!(
                out,
                r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="2"{dash}/>"#,
                pts.join(" ")
            );
        }
        let r = if s.style == Style::Points { 4.0 } else { 2.5 };
        for p in &pts {
            let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(out, r#"<circle cx="{x}" cy="{y}" r="{r}" fill="{c}"/>"#);
        }
    }
    let (lx, ly) = (LEFT + 14.0, y0 + TOP + 12.0);
    let lw = 12.0 + 8.0 * p.series.iter().map(|s| s.label.chars().count()).max().unwrap_or(0) as f64 + 40.0;
    let _ = writeln!(
        out,
        r##"<rect x="{lx:.1}" y="{ly:.1}" width="{lw:.1}" height="{:.1}" fill="white" stroke="#999999"/>"##,
        8.0 + 20.0 * p.series.len() as f64
    );
    for (i, (s, c)) in p.series.iter().zip(&colors).enumerate() {
        let y = ly + 18.0 + 20.0 * i as f64;
        let dash = if s.style == Style::Dashed { r#" stroke-dasharray="6 4""# } else { "" };
        if s.style == Style::Points {
            let _ = writeln!(out, r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{c}"/>"#, lx + 22.0, y - 4.0);
        } else {
            let _ = writeln!(
                out,
                r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{c}" stroke-width="2"{dash}/>"#,
                lx + 8.0,
                y - 4.0,
                lx + 36.0,
                y - 4.0
            );
        }
        let _ = writeln!(out, r#"<text x="{:.1}" y="{y:.1}">{}</text>"#, lx + 44.0, escape(&s.label));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panel_has_its_title_axes_and_one_line_per_series() {
        let series = |label: &str, k: f64| Series {
            label: label.into(),
            points: (3..=20).map(|e| ((1u64 << e) as f64, k * (1u64 << e) as f64 / 1e3 + 0.2)).collect(),
            style: if label == "memcpy" { Style::Dashed } else { Style::Line },
            color: None,
        };
        let doc = svg(&[Panel {
            title: "bcast <np=2>".into(),
            y_label: MEASURED_LATENCY.into(),
            series: vec![series("zcoll auto", 1.0), series("MPI", 2.0), series("memcpy", 0.5)],
        }]);
        assert!(doc.starts_with("<svg") && doc.trim_end().ends_with("</svg>"));
        assert!(doc.contains("bcast &lt;np=2&gt;"));
        assert!(doc.contains("message size (bytes per rank)"));
        assert!(doc.contains("latency (µs)"));
        assert_eq!(doc.matches("<polyline").count(), 3);
        assert_eq!(doc.matches(r#"stroke-dasharray"#).count(), 2);
        assert!(doc.contains(">1M<") && doc.contains(">64<"));
        assert_eq!(time_label(0.01), "0.01");
        assert_eq!(time_label(1000.0), "1000");
    }

    #[test]
    fn measured_points_and_model_lines_share_their_algorithm_colour() {
        let pts = vec![(8.0, 2.0), (4096.0, 3.0), (1048576.0, 90.0)];
        let series =
            |label: &str, style, color| Series { label: label.into(), points: pts.clone(), style, color };
        let doc = svg(&[Panel {
            title: "scatter".into(),
            y_label: "latency (µs): measured (points), model (lines)".into(),
            series: vec![
                series("parallel-read measured", Style::Points, Some(0)),
                series("parallel-read model", Style::Dashed, Some(0)),
                series("staged measured", Style::Points, Some(2)),
                series("staged model", Style::Dashed, Some(2)),
            ],
        }]);
        assert!(doc.contains("measured (points), model (lines)"));
        // Only the model series are lines; the measurements are markers (3 each, and
        // one in the legend).
        assert_eq!(doc.matches("<polyline").count(), 2);
        assert_eq!(doc.matches(r#"r="4""#).count(), 2 * 3 + 2);
        let blue = format!(r#"fill="{}""#, COLORS[0]);
        let orange = format!(r#"fill="{}""#, COLORS[2]);
        assert_eq!(doc.matches(&blue).count(), 2 * 3 + 1);
        assert_eq!(doc.matches(&orange).count(), 2 * 3 + 1);
        assert_eq!(doc.matches(&format!(r#"stroke="{}""#, COLORS[2])).count(), 2);
    }
}
