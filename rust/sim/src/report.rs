// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Output: markdown tables and a small handwritten SVG line plot.

use std::fmt::Write as _;

/// A markdown table.
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// Column headers.
    pub headers: Vec<String>,
    /// Rows of cells.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these headers.
    pub fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Renders as GitHub-flavoured markdown with padded columns.
    pub fn markdown(&self) -> String {
        let n = self.headers.len();
        let width = |i: usize| {
            self.rows
                .iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .chain([self.headers[i].len(), 3])
                .max()
                .unwrap_or(3)
        };
        let widths: Vec<usize> = (0..n).map(width).collect();
        let line = |cells: &[String]| {
            let mut s = String::from("|");
            for (i, w) in widths.iter().enumerate() {
                let c = cells.get(i).map_or("", String::as_str);
                let _ = write!(s, " {c:<w$} |");
            }
            s.push('\n');
            s
        };
        let mut out = line(&self.headers);
        out.push('|');
        for w in &widths {
            let _ = write!(out, "{}|", "-".repeat(w + 2));
        }
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

/// One line of a plot.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Stroke colour (CSS).
    pub color: &'static str,
    /// One y value per x position.
    pub ys: Vec<f64>,
}

/// A line plot over categorical x positions, y from 0 to `y_max`, as SVG.
pub fn svg_plot(
    title: &str,
    x_label: &str,
    y_label: &str,
    xs: &[String],
    y_max: f64,
    series: &[Series],
) -> String {
    let (w, h, left, right, top, bottom) = (640.0, 400.0, 60.0, 170.0, 40.0, 50.0);
    let pw = w - left - right;
    let ph = h - top - bottom;
    let x_at = |i: usize| left + pw * i as f64 / (xs.len().max(2) - 1) as f64;
    let y_at = |v: f64| top + ph * (1.0 - (v / y_max).clamp(0.0, 1.0));
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{title}</text>"#,
        left + pw / 2.0
    );
    for k in 0..=5 {
        let v = y_max * k as f64 / 5.0;
        let y = y_at(v);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{y}" x2="{}" y2="{y}" stroke="#ddd"/>"##,
            left + pw
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{v:.0}</text>"#,
            left - 6.0,
            y + 4.0
        );
    }
    for (i, x) in xs.iter().enumerate() {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{x}</text>"#,
            x_at(i),
            top + ph + 18.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{x_label}</text>"#,
        left + pw / 2.0,
        h - 8.0
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="{}" text-anchor="middle" transform="rotate(-90 16 {})">{y_label}</text>"#,
        top + ph / 2.0,
        top + ph / 2.0
    );
    let _ = writeln!(
        s,
        r#"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
    );
    for (k, ser) in series.iter().enumerate() {
        let pts: Vec<String> = ser
            .ys
            .iter()
            .enumerate()
            .map(|(i, &v)| format!("{:.1},{:.1}", x_at(i), y_at(v)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>"#,
            ser.color,
            pts.join(" ")
        );
        for p in &pts {
            let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(
                s,
                r#"<circle cx="{x}" cy="{y}" r="3" fill="{}"/>"#,
                ser.color
            );
        }
        let ly = top + 10.0 + 18.0 * k as f64;
        let lx = left + pw + 12.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{}" stroke-width="2"/>"#,
            lx + 20.0,
            ser.color
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}">{}</text>"#,
            lx + 26.0,
            ly + 4.0,
            ser.name
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_pads_columns() {
        let mut t = Table::new(&["a", "long header"]);
        t.row(vec!["wide cell".into(), "x".into()]);
        let md = t.markdown();
        assert_eq!(md.lines().next(), Some("| a         | long header |"));
        assert_eq!(md.lines().nth(1), Some("|-----------|-------------|"));
    }

    #[test]
    fn svg_is_well_formed_enough() {
        let s = svg_plot(
            "t",
            "x",
            "y",
            &["0".into(), "1".into()],
            100.0,
            &[Series {
                name: "s".into(),
                color: "red",
                ys: vec![10.0, 90.0],
            }],
        );
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 1);
    }
}
