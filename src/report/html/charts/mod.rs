//! Charts as inline SVG, drawn by plotters' SVG backend: horizontal bars
//! (with min–max whiskers and per-row markers), lines (the latency
//! percentile spectrum, throughput against concurrency) and the small
//! per-cell timelines.
//!
//! Every chart is drawn in layers: plotters draws the frame (axes, ticks,
//! grid, labels) once, then each row or series again on an identical
//! coordinate system with nothing else, so each can be wrapped in its own
//! `<g>` with a `<title>` (the tooltip: the verdict and its reasons), a
//! class (`flagged`, `rejected`) and a link to its note. plotters cannot
//! attach those itself, and a marker that only CSS or a script knew about
//! would vanish in a copied SVG.
//!
//! This module knows nothing of results: callers hand it labels, numbers
//! and marks, already sorted and formatted, so the run page and a future
//! comparison page draw with the same functions. It does no I/O.

use maud::{html, Markup, PreEscaped, Render};
use plotters::coord::ranged1d::AsRangedCoord;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

mod bars;
mod forest;
mod lines;
mod timeline;

pub use bars::{bar_colours, bars, BarChart, BarRow};
pub use forest::{forest, Forest, ForestRow, Judged};
pub use lines::{
    by_level, percentile_label, spectrum, spectrum_points, Series, YAxis, SPECTRUM_TICKS,
};
pub use timeline::{timeline, Timeline, TimelineRound};

/// Width of a full-size chart, px (the SVG scales to the page's width).
pub const WIDTH: u32 = 880;

/// The Okabe–Ito palette (Okabe & Ito, *Color Universal Design*, 2008),
/// readable with every common colour-vision deficiency; yellow is left out
/// because it vanishes on white.
pub const PALETTE: [RGBColor; 7] = [
    RGBColor(0x00, 0x72, 0xB2), // blue
    RGBColor(0xE6, 0x9F, 0x00), // orange
    RGBColor(0x00, 0x9E, 0x73), // bluish green
    RGBColor(0xCC, 0x79, 0xA7), // reddish purple
    RGBColor(0x56, 0xB4, 0xE9), // sky blue
    RGBColor(0xD5, 0x5E, 0x00), // vermillion
    RGBColor(0x00, 0x00, 0x00), // black
];

/// Dash patterns that, with [`PALETTE`], tell 21 series apart: the colour
/// cycles first, then the dash.
pub const DASHES: [Option<&str>; 3] = [None, Some("7 3"), Some("2 2")];

/// Fill of an accepted bar.
pub const ACCEPTED: RGBColor = PALETTE[0];
/// Fill of a flagged bar: a different hue and a ⚑, never colour alone.
pub const FLAGGED: RGBColor = PALETTE[1];
/// Text of a rejected row, which has no bar.
pub const REJECTED: RGBColor = PALETTE[5];
const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);
const GRID: RGBColor = RGBColor(0xDD, 0xDD, 0xDD);
const FONT: &str = "sans-serif";
/// plotters writes `font-size` as size / 1.24; these give 11 px and 10 px.
const LABEL_PT: f64 = 13.64;
const SMALL_PT: f64 = 12.4;

/// Colour and dash of series number `i`.
pub fn series_style(i: usize) -> (RGBColor, Option<&'static str>) {
    (
        PALETTE[i % PALETTE.len()],
        DASHES[(i / PALETTE.len()) % DASHES.len()],
    )
}

/// `#rrggbb` of a colour, for HTML legends.
pub fn hex(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// The verdict a row or series carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Nothing to say.
    Plain,
    /// A real number with a note to read first (⚑).
    Flagged,
    /// Not a valid measurement (✗): no bar, the reason instead.
    Rejected,
}

impl Mark {
    fn class(self) -> &'static str {
        match self {
            Mark::Plain => "plain",
            Mark::Flagged => "flagged",
            Mark::Rejected => "rejected",
        }
    }
}

/// Why a chart could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw chart {chart}: {message}")]
pub struct ChartError {
    /// Element id of the chart.
    pub chart: String,
    /// What plotters said.
    pub message: String,
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

/// Draw on a fresh SVG of `size` and return what plotters wrote between
/// `<svg …>` and `</svg>`.
fn layer(
    id: &str,
    size: (u32, u32),
    draw: impl FnOnce(&Area<'_>) -> DrawResult,
) -> Result<String, ChartError> {
    let fail = |e: &dyn std::fmt::Display| ChartError {
        chart: id.to_string(),
        message: e.to_string(),
    };
    let mut buf = String::new();
    {
        let area = SVGBackend::with_string(&mut buf, size).into_drawing_area();
        draw(&area).map_err(|e| fail(&e))?;
        area.present().map_err(|e| fail(&e))?;
    }
    let start = buf.find(">\n").map(|i| i + 2).unwrap_or(0);
    let end = buf.rfind("</svg>").unwrap_or(buf.len());
    Ok(buf[start.min(end)..end].to_string())
}

/// One `<g>` of a chart: a row or a series, with its tooltip, class,
/// link and the data the page's script reads.
#[derive(Default)]
struct Group {
    class: String,
    /// `data-label`: the row's label (bars, forest).
    label: Option<String>,
    /// `data-series`: the series' style index (lines), and its dash.
    series: Option<(usize, Option<&'static str>)>,
    /// `data-round`: the round, from 1 (timelines).
    round: Option<usize>,
    title: String,
    link: Option<String>,
    /// What plotters drew for this group: SVG it wrote and escaped.
    body: String,
}

impl Render for Group {
    fn render(&self) -> Markup {
        let g = html! {
            g class=(self.class)
                data-label=[self.label.as_deref()]
                data-series=[self.series.map(|s| s.0)]
                stroke-dasharray=[self.series.and_then(|s| s.1)]
                data-round=[self.round] {
                @if !self.title.is_empty() { title { (self.title) } }
                (PreEscaped(&self.body))
            }
        };
        match &self.link {
            Some(href) => html! { a href=(href) { (g) } },
            None => g,
        }
    }
}

/// The `<svg>` element of a chart of `size`: `class`, `id` and `label`
/// (for screen readers), the content as given.
fn svg_element(id: &str, class: &str, label: &str, size: (u32, u32), content: Markup) -> Markup {
    html! {
        svg id=(id) class=(class) viewBox={ "0 0 " (size.0) " " (size.1) }
            width=(size.0) height=(size.1) role="img" aria-label=(label) {
            (content)
        }
    }
}

/// Assemble the layers into one `<svg>` element: the frame plotters drew,
/// then each group.
fn svg(id: &str, label: &str, size: (u32, u32), frame: &str, groups: &[Group]) -> Markup {
    svg_element(
        id,
        "chart",
        label,
        size,
        html! {
            g class="frame" { (PreEscaped(frame)) }
            @for g in groups { (g) }
        },
    )
}

fn text_style(pt: f64, colour: &'static RGBColor, pos: Pos) -> TextStyle<'static> {
    TextStyle::from((FONT, pt).into_font())
        .color(colour)
        .pos(pos)
}

/// Margins and axis areas of a chart, px.
#[derive(Clone, Copy)]
struct Frame {
    top: u32,
    right: u32,
    x_area: u32,
    y_area: u32,
}

type Context<'a, 'b, X, Y> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<<X as AsRangedCoord>::CoordDescType, <Y as AsRangedCoord>::CoordDescType>,
>;

/// The chart's coordinate system on `area`: the same for every layer.
fn context<'a, 'b, X: AsRangedCoord, Y: AsRangedCoord>(
    area: &'a Area<'b>,
    f: Frame,
    x: X,
    y: Y,
) -> Result<Context<'a, 'b, X, Y>, DrawingAreaErrorKind<std::io::Error>> {
    ChartBuilder::on(area)
        .margin_top(f.top)
        .margin_right(f.right)
        .x_label_area_size(f.x_area)
        .y_label_area_size(f.y_area)
        .build_cartesian_2d(x, y)
}

/// Rough width of `s` in px at `pt`, as plotters' own layout estimates it
/// (no font is read: the SVG backend leaves glyphs to the browser).
fn text_width(s: &str, pt: f64) -> u32 {
    (pt / 1.24 / 1.24 * 0.7 * s.chars().count() as f64).ceil() as u32
}

/// Width in px of a column holding every one of `texts` at `pt`, at least
/// 40 and at most `max`, plus a 12 px gap.
fn column_width<'s>(texts: impl Iterator<Item = &'s str>, max: u32) -> u32 {
    texts
        .map(|t| text_width(t, LABEL_PT))
        .max()
        .unwrap_or(40)
        .clamp(40, max)
        + 12
}

/// A "nice" upper bound for an axis holding `max`: 1, 2 or 5 × 10^k.
fn nice_ceiling(max: f64) -> f64 {
    if !max.is_finite() || max <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(max.log10().floor());
    [1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|v| *v >= max)
        .unwrap_or(10.0 * mag)
}

/// A tick value in few characters: 950, 12k, 1.5M.
pub fn compact(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e3 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str, v: Option<f64>, mark: Mark) -> BarRow {
        BarRow {
            label: label.into(),
            values: vec![v],
            range: v.map(|v| (v * 0.9, v * 1.1)),
            mark,
            text: format!("{label} text"),
            title: format!("{label} <tooltip>"),
            link: (mark != Mark::Plain).then(|| "#note-1".to_string()),
        }
    }

    #[test]
    fn bars_wrap_each_row_with_its_mark_tooltip_and_link() {
        let rows = [
            row("axum", Some(100.0), Mark::Plain),
            row("express", Some(50.0), Mark::Flagged),
            row("fastapi", None, Mark::Rejected),
        ];
        let svg = bars(&BarChart {
            id: "rps-x",
            label: "req/s",
            axis: "req/s (median of rounds)",
            series: &["req/s"],
            rows: &rows,
            tick: compact,
        })
        .unwrap()
        .into_string();
        assert!(
            svg.starts_with("<svg id=\"rps-x\" class=\"chart\""),
            "{svg}"
        );
        assert_eq!(svg.matches("<g class=\"row ").count(), 3);
        assert!(svg.contains("<a href=\"#note-1\"><g class=\"row flagged\" data-label=\"express\"><title>express &lt;tooltip&gt;</title>"));
        // Accepted bar blue, flagged bar orange, rejected row: text, no bar.
        assert!(
            svg.contains(&format!("fill=\"{}\"", hex(ACCEPTED).to_uppercase()))
                || svg.contains(&format!("fill=\"{}\"", hex(ACCEPTED)))
        );
        let rejected = svg.split("data-label=\"fastapi\"").nth(1).unwrap();
        let rejected = rejected.split("</g>").next().unwrap();
        assert!(!rejected.contains("<rect"), "{rejected}");
        assert!(rejected.contains("fastapi text"), "{rejected}");
        // Text only through plotters' escaping or ours: no raw markup.
        assert!(!svg.contains("<tooltip>"));
    }

    #[test]
    fn spectrum_ticks_read_as_percentiles() {
        let labels: Vec<String> = SPECTRUM_TICKS
            .iter()
            .map(|x| percentile_label(*x))
            .collect();
        assert_eq!(labels, ["50%", "90%", "99%", "99.9%", "99.99%", "99.999%"]);
        let pts = spectrum_points();
        assert_eq!(pts[0], 2.0);
        assert!((pts.last().unwrap() - 1e5).abs() < 1e-6);
        assert_eq!(pts.len(), 95);
    }

    #[test]
    fn a_missing_point_breaks_the_line_and_flagged_points_are_hollow() {
        let s = Series {
            name: "axum".into(),
            style: 8,
            points: vec![
                (10.0, Some(5.0)),
                (100.0, None),
                (1000.0, Some(7.0)),
                (10000.0, Some(6.0)),
            ],
            point_marks: vec![Mark::Plain, Mark::Rejected, Mark::Flagged, Mark::Plain],
            mark: Mark::Flagged,
            title: "axum".into(),
            end: None,
        };
        let svg = by_level(
            "scaling-x",
            "req/s by connections",
            "connections",
            &[10.0, 100.0, 1000.0, 10000.0],
            YAxis {
                desc: "req/s",
                log: false,
                tick: compact,
            },
            &[s],
        )
        .unwrap()
        .into_string();
        let series = svg.split("<g class=\"series flagged\"").nth(1).unwrap();
        // One line (the 1000–10000 run); the lone first point is a dot only.
        assert_eq!(series.matches("<polyline").count(), 1, "{series}");
        assert_eq!(series.matches("<circle").count(), 3, "{series}");
        // Series 8 is the second colour, dashed.
        assert!(
            series.starts_with(" data-series=\"8\" stroke-dasharray=\"7 3\""),
            "{series}"
        );
    }

    #[test]
    fn timeline_shades_the_window_and_draws_a_recorded_warmup() {
        let rounds = [TimelineRound {
            warmup: Some(vec![10.0, 20.0]),
            window: vec![30.0, 31.0, 29.0],
        }];
        let svg = timeline(&Timeline {
            id: "timeline-x",
            label: "x",
            warmup_s: 2.0,
            window_s: 3.0,
            rounds: &rounds,
        })
        .unwrap()
        .into_string();
        assert!(svg.contains("<g class=\"window\"><title>measured window: 3 s</title>"));
        assert!(!svg.contains("not recorded"));
        let line = svg.split("data-round=\"1\"").nth(1).unwrap();
        assert_eq!(
            line.matches("<circle").count(),
            5,
            "two warm-up and three window seconds"
        );
        let without = timeline(&Timeline {
            rounds: &[TimelineRound {
                warmup: None,
                window: vec![30.0],
            }],
            ..Timeline {
                id: "t",
                label: "x",
                warmup_s: 2.0,
                window_s: 3.0,
                rounds: &[],
            }
        })
        .unwrap()
        .into_string();
        assert!(without.contains("not recorded"));
    }

    #[test]
    fn compact_ticks() {
        assert_eq!(compact(950.0), "950");
        assert_eq!(compact(12_000.0), "12k");
        assert_eq!(compact(1_500_000.0), "1.5M");
        assert_eq!(nice_ceiling(130.0), 150.0);
        assert_eq!(nice_ceiling(0.0), 1.0);
    }
}
