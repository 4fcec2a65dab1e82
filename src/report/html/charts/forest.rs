//! Ratio charts ("forest plots"): one row per compared cell, the ratio
//! NEW/BASE as a dot, its confidence interval as a whisker, the noise band
//! as a shaded strip around ×1, and a vertical line at ×1. The x axis is
//! logarithmic, so ×0.5 and ×2 sit equally far from ×1.

use super::*;

/// How a row's ratio was judged; decides its colour and class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    /// NEW is worse beyond the band (vermillion, filled).
    Worse,
    /// NEW is better beyond the band (bluish green, filled).
    Better,
    /// The interval reaches into the band (grey, filled).
    Noise,
    /// No interval (grey, hollow).
    Unknown,
}

impl Judged {
    fn colour(self) -> RGBColor {
        match self {
            Judged::Worse => PALETTE[5],
            Judged::Better => PALETTE[2],
            Judged::Noise | Judged::Unknown => RGBColor(0x77, 0x77, 0x77),
        }
    }

    fn class(self) -> &'static str {
        match self {
            Judged::Worse => "worse",
            Judged::Better => "better",
            Judged::Noise => "noise",
            Judged::Unknown => "unknown",
        }
    }
}

/// One row: a compared cell.
#[derive(Debug, Clone)]
pub struct ForestRow {
    /// Label on the left (the cell).
    pub label: String,
    /// Ratio NEW/BASE; a row without one draws only its `text`.
    pub ratio: Option<f64>,
    /// Confidence interval on the ratio.
    pub interval: Option<(f64, f64)>,
    /// Noise band as a fraction (ratios within ×1/(1+band)…×(1+band) are noise).
    pub band: Option<f64>,
    /// The verdict.
    pub judged: Judged,
    /// Written right of the row: ratio and verdict.
    pub text: String,
    /// Tooltip: the verdict and why, in words.
    pub title: String,
}

/// A ratio chart.
#[derive(Debug, Clone)]
pub struct Forest<'a> {
    /// Element id.
    pub id: &'a str,
    /// What the chart shows, for screen readers.
    pub label: &'a str,
    /// x-axis description.
    pub axis: &'a str,
    /// Rows, top to bottom.
    pub rows: &'a [ForestRow],
}

/// The x range of a forest: every ratio, interval end and band edge, and ×1,
/// with a little room, symmetric on the log scale around ×1 so that the
/// eye reads "left of the line" and "right of the line" alike.
fn x_range(rows: &[ForestRow]) -> (f64, f64) {
    let mut spread = 0.02f64;
    for r in rows {
        let b = r.band.map(|b| (1.0 + b).ln());
        let points = r
            .ratio
            .into_iter()
            .chain(r.interval.into_iter().flat_map(|(l, h)| [l, h]));
        for p in points.filter(|p| p.is_finite() && *p > 0.0) {
            spread = spread.max(p.ln().abs());
        }
        if let Some(b) = b {
            spread = spread.max(b);
        }
    }
    let s = (spread * 1.15).min(5.0);
    (1.0 / s.exp(), s.exp())
}

/// `×0.8`, `×1`, `×2`: a tick label of a ratio axis.
fn ratio_tick(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("×{s}")
}

/// Ticks of a ratio axis from `lo` to `hi`: ×1 and round ratios on both
/// sides, at most about seven, spread evenly on the log scale.
fn ratio_ticks(lo: f64, hi: f64) -> Vec<f64> {
    const NICE: [f64; 25] = [
        0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 1.0, 1.02, 1.05, 1.1,
        1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0,
    ];
    let inside: Vec<f64> = NICE.into_iter().filter(|v| *v >= lo && *v <= hi).collect();
    // Keep ticks at least a seventh of the axis apart (log), ×1 always.
    let gap = (hi / lo).ln() / 7.0;
    let mut out = vec![1.0];
    for v in inside {
        if out.iter().all(|t: &f64| (v / t).ln().abs() >= gap) {
            out.push(v);
        }
    }
    out.sort_by(f64::total_cmp);
    out
}

/// Draw a ratio chart.
pub fn forest(c: &Forest<'_>) -> Result<Markup, ChartError> {
    let n = c.rows.len().max(1);
    let row_h: u32 = 24;
    let label_w = column_width(c.rows.iter().map(|r| r.label.as_str()), 260);
    // Room right of the plot for each row's text.
    let text_w = column_width(c.rows.iter().map(|r| r.text.as_str()), 260);
    let (top, bottom) = (8u32, 44u32);
    let size = (WIDTH, top + bottom + row_h * n as u32);
    let (lo, hi) = x_range(c.rows);
    let frame_px = Frame {
        top,
        right: text_w,
        x_area: bottom,
        y_area: label_w,
    };
    let ticks = ratio_ticks(lo, hi);
    let x = || (lo..hi).log_scale().with_key_points(ticks.clone());
    let yc = |i: usize| (n - i) as f64 - 0.5;
    let frame = layer(c.id, size, |area| {
        let mut chart = context(area, frame_px, x(), 0f64..n as f64)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_labels(ticks.len())
            .x_desc(c.axis)
            .x_label_formatter(&|v| ratio_tick(*v))
            .label_style((FONT, LABEL_PT))
            .axis_desc_style((FONT, LABEL_PT))
            .light_line_style(GRID.mix(0.0))
            .bold_line_style(GRID)
            .draw()?;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(1.0, 0.0), (1.0, n as f64)],
            INK.stroke_width(1),
        )))?;
        for (i, row) in c.rows.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(lo, yc(i)));
            area.draw(&Text::new(
                row.label.clone(),
                (px - 6, py),
                text_style(LABEL_PT, &INK, Pos::new(HPos::Right, VPos::Center)),
            ))?;
        }
        Ok(())
    })?;
    let mut groups = Vec::new();
    for (i, row) in c.rows.iter().enumerate() {
        let body = layer(c.id, size, |area| {
            let mut chart = context(area, frame_px, x(), 0f64..n as f64)?;
            let y = yc(i);
            if let Some(b) = row.band.filter(|b| *b > 0.0) {
                let (bl, bh) = ((1.0 / (1.0 + b)).max(lo), (1.0 + b).min(hi));
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(bl, y - 0.32), (bh, y + 0.32)],
                    GRID.filled(),
                )))?;
            }
            let colour = row.judged.colour();
            if let Some((l, h)) = row.interval {
                let (l, h) = (l.clamp(lo, hi), h.clamp(lo, hi));
                let ink = colour.stroke_width(2);
                chart.draw_series([
                    PathElement::new(vec![(l, y), (h, y)], ink),
                    PathElement::new(vec![(l, y - 0.2), (l, y + 0.2)], ink),
                    PathElement::new(vec![(h, y - 0.2), (h, y + 0.2)], ink),
                ])?;
            }
            if let Some(r) = row.ratio.filter(|r| r.is_finite() && *r > 0.0) {
                let r = r.clamp(lo, hi);
                let style = if row.judged == Judged::Unknown {
                    colour.stroke_width(2)
                } else {
                    colour.filled()
                };
                chart.draw_series(std::iter::once(Circle::new((r, y), 4, style)))?;
            }
            let (px, py) = chart.backend_coord(&(hi, y));
            area.draw(&Text::new(
                row.text.clone(),
                (px + 8, py),
                text_style(LABEL_PT, &INK, Pos::new(HPos::Left, VPos::Center)),
            ))?;
            Ok(())
        })?;
        groups.push(Group {
            class: format!("row {}", row.judged.class()),
            label: Some(row.label.clone()),
            title: row.title.clone(),
            link: None,
            body,
            ..Group::default()
        });
    }
    Ok(svg(c.id, c.label, size, &frame, &groups))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ratio: f64, interval: (f64, f64), band: f64, judged: Judged) -> ForestRow {
        ForestRow {
            label: format!("cell {ratio}"),
            ratio: Some(ratio),
            interval: Some(interval),
            band: Some(band),
            judged,
            text: format!("×{ratio:.3}"),
            title: "why".into(),
        }
    }

    #[test]
    fn the_range_holds_every_point_and_is_symmetric_around_one() {
        let rows = [
            row(0.8, (0.79, 0.81), 0.03, Judged::Worse),
            row(1.01, (0.99, 1.03), 0.04, Judged::Noise),
        ];
        let (lo, hi) = x_range(&rows);
        assert!(lo < 0.79 && hi > 1.04, "{lo} {hi}");
        assert!(((lo * hi) - 1.0).abs() < 1e-9, "{lo} × {hi} should be 1");
    }

    #[test]
    fn ticks_are_round_ratios_with_one_in_the_middle() {
        let t = ratio_ticks(1.0 / 7.5, 7.5);
        assert!(
            t.contains(&1.0) && t.contains(&0.2) && t.contains(&5.0),
            "{t:?}"
        );
        assert!(t.len() <= 8, "{t:?}");
        assert_eq!(ratio_tick(0.8), "×0.8");
        assert_eq!(ratio_tick(1.0), "×1");
        assert_eq!(ratio_tick(10.0), "×10");
    }

    #[test]
    fn one_group_per_row_with_its_verdict_class_and_tooltip() {
        let rows = [
            row(0.8, (0.79, 0.81), 0.03, Judged::Worse),
            row(1.25, (1.2, 1.3), 0.03, Judged::Better),
            ForestRow {
                ratio: None,
                interval: None,
                band: None,
                judged: Judged::Unknown,
                ..row(1.0, (1.0, 1.0), 0.0, Judged::Unknown)
            },
        ];
        let svg = forest(&Forest {
            id: "f",
            label: "ratios",
            axis: "NEW / BASE",
            rows: &rows,
        })
        .unwrap()
        .into_string();
        assert_eq!(svg.matches("<g class=\"row ").count(), 3);
        assert!(svg.contains("class=\"row worse\""));
        assert!(svg.contains("class=\"row better\""));
        assert!(svg.contains("class=\"row unknown\""));
        assert_eq!(svg.matches("<title>why</title>").count(), 3);
        assert!(svg.contains("×1"), "the ×1 tick is labelled");
        // A ratio without an interval (inconclusive) is still drawn, hollow.
        let rows = [ForestRow {
            interval: None,
            band: None,
            ..row(1.02, (1.0, 1.0), 0.0, Judged::Unknown)
        }];
        let svg = forest(&Forest {
            id: "g",
            label: "ratios",
            axis: "NEW / BASE",
            rows: &rows,
        })
        .unwrap()
        .into_string();
        assert!(svg.contains("<circle"), "{svg}");
    }
}
