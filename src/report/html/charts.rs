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

use std::fmt::Write as _;

use plotters::coord::ranged1d::AsRangedCoord;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

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

/// One `<g>` of a chart: a row or a series, with its tooltip, class and
/// link.
struct Group {
    class: String,
    attrs: String,
    title: String,
    link: Option<String>,
    body: String,
}

impl Group {
    fn write(&self, out: &mut String) {
        if let Some(href) = &self.link {
            let _ = write!(out, "<a href=\"{}\">", esc(href));
        }
        let _ = write!(out, "<g class=\"{}\"{}>", self.class, self.attrs);
        if !self.title.is_empty() {
            let _ = write!(out, "<title>{}</title>", esc(&self.title));
        }
        out.push_str(&self.body);
        out.push_str("</g>");
        if self.link.is_some() {
            out.push_str("</a>");
        }
    }
}

/// Assemble the layers into one `<svg>` element.
fn svg(id: &str, label: &str, size: (u32, u32), frame: &str, groups: &[Group]) -> String {
    let mut out = format!(
        "<svg id=\"{}\" class=\"chart\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"{}\">\n<g class=\"frame\">{frame}</g>\n",
        esc(id),
        esc(label),
        w = size.0,
        h = size.1,
    );
    for g in groups {
        g.write(&mut out);
        out.push('\n');
    }
    out.push_str("</svg>");
    out
}

/// Escape text for HTML and SVG (element content and quoted attributes).
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
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

// ---------------------------------------------------------------- bars ----

/// One row of a bar chart (a framework, usually).
#[derive(Debug, Clone)]
pub struct BarRow {
    /// Label on the left.
    pub label: String,
    /// One value per series; a row whose values are all `None` draws no
    /// bar, only its `text` (a rejected cell's reason).
    pub values: Vec<Option<f64>>,
    /// Min–max whisker over the first series (spread across rounds).
    pub range: Option<(f64, f64)>,
    /// Verdict.
    pub mark: Mark,
    /// Written right of the bars: the value with its unit and marker.
    pub text: String,
    /// Tooltip: verdict and reasons in words.
    pub title: String,
    /// Where the row links to (its note), if anywhere.
    pub link: Option<String>,
}

/// A horizontal bar chart: one row per label, one bar per series.
#[derive(Debug, Clone)]
pub struct BarChart<'a> {
    /// Element id.
    pub id: &'a str,
    /// What the chart shows, for screen readers.
    pub label: &'a str,
    /// x-axis description, with its unit.
    pub axis: &'a str,
    /// Series names (one bar each per row); their colours come from
    /// [`bar_colours`].
    pub series: &'a [&'a str],
    /// Rows, top to bottom.
    pub rows: &'a [BarRow],
    /// Tick label of an x value.
    pub tick: fn(f64) -> String,
}

/// Colours of the series of a bar chart: one series takes the accepted
/// blue (flagged rows turn orange), several take the palette from sky blue.
pub fn bar_colours(n: usize) -> Vec<RGBColor> {
    if n <= 1 {
        vec![ACCEPTED]
    } else {
        (0..n)
            .map(|i| [PALETTE[4], PALETTE[0], PALETTE[3], PALETTE[2]][i % 4])
            .collect()
    }
}

/// Draw a horizontal bar chart.
pub fn bars(c: &BarChart<'_>) -> Result<String, ChartError> {
    let n = c.rows.len().max(1);
    let k = c.series.len().max(1);
    let bar_h: u32 = if k == 1 { 16 } else { 9 };
    let row_h = bar_h * k as u32 + 10;
    let label_w = c
        .rows
        .iter()
        .map(|r| text_width(&r.label, LABEL_PT))
        .max()
        .unwrap_or(40)
        .clamp(40, 220)
        + 12;
    let (top, bottom) = (8u32, 44u32);
    let size = (WIDTH, top + bottom + row_h * n as u32);
    let max = c
        .rows
        .iter()
        .flat_map(|r| {
            r.values
                .iter()
                .flatten()
                .copied()
                .chain(r.range.map(|x| x.1))
        })
        .fold(0.0, f64::max);
    // Room right of the longest bar for its label.
    let xmax = nice_ceiling(max * 1.3);
    let colours = bar_colours(k);
    let frame_px = Frame {
        top,
        right: 16,
        x_area: bottom,
        y_area: label_w,
    };
    // Row i occupies y from n-i-1 to n-i, top row first.
    let slot = |i: usize, j: usize| {
        let pad = 5.0 / row_h as f64;
        let h = f64::from(bar_h) / row_h as f64;
        let y1 = (n - i) as f64 - pad - j as f64 * h;
        (y1 - h, y1)
    };
    let frame = layer(c.id, size, |area| {
        let mut chart = context(area, frame_px, 0f64..xmax, 0f64..n as f64)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_labels(6)
            .x_desc(c.axis)
            .x_label_formatter(&|v| (c.tick)(*v))
            .label_style((FONT, LABEL_PT))
            .axis_desc_style((FONT, LABEL_PT))
            .light_line_style(GRID.mix(0.0))
            .bold_line_style(GRID)
            .draw()?;
        for (i, row) in c.rows.iter().enumerate() {
            let (y0, y1) = slot(i, 0);
            let yc = if k == 1 {
                (y0 + y1) / 2.0
            } else {
                (n - i) as f64 - 0.5
            };
            let (px, py) = chart.backend_coord(&(0.0, yc));
            let colour = if row.mark == Mark::Rejected {
                &REJECTED
            } else {
                &INK
            };
            area.draw(&Text::new(
                row.label.clone(),
                (px - 6, py),
                text_style(LABEL_PT, colour, Pos::new(HPos::Right, VPos::Center)),
            ))?;
        }
        Ok(())
    })?;
    let mut groups = Vec::new();
    for (i, row) in c.rows.iter().enumerate() {
        let body = layer(c.id, size, |area| {
            let mut chart = context(area, frame_px, 0f64..xmax, 0f64..n as f64)?;
            let mut end = 0f64;
            for (j, v) in row.values.iter().enumerate() {
                let Some(v) = v else { continue };
                let (y0, y1) = slot(i, j);
                let fill = if k == 1 && row.mark == Mark::Flagged {
                    FLAGGED
                } else {
                    colours[j % colours.len()]
                };
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(0.0, y0), (*v, y1)],
                    fill.filled(),
                )))?;
                end = end.max(*v);
            }
            let (y0, y1) = slot(i, 0);
            let yc = (y0 + y1) / 2.0;
            if let Some((lo, hi)) = row.range.filter(|_| row.values[0].is_some()) {
                let tick = (y1 - y0) * 0.3;
                let ink = INK.stroke_width(1);
                chart.draw_series([
                    PathElement::new(vec![(lo, yc), (hi, yc)], ink),
                    PathElement::new(vec![(lo, yc - tick), (lo, yc + tick)], ink),
                    PathElement::new(vec![(hi, yc - tick), (hi, yc + tick)], ink),
                ])?;
                end = end.max(hi);
            }
            let text_y = if k == 1 { yc } else { (n - i) as f64 - 0.5 };
            let (px, py) = chart.backend_coord(&(end, text_y));
            let colour = if row.mark == Mark::Rejected {
                &REJECTED
            } else {
                &INK
            };
            area.draw(&Text::new(
                row.text.clone(),
                (px + 6, py),
                text_style(LABEL_PT, colour, Pos::new(HPos::Left, VPos::Center)),
            ))?;
            Ok(())
        })?;
        groups.push(Group {
            class: format!("row {}", row.mark.class()),
            attrs: format!(" data-label=\"{}\"", esc(&row.label)),
            title: row.title.clone(),
            link: row.link.clone(),
            body,
        });
    }
    Ok(svg(c.id, c.label, size, &frame, &groups))
}

// --------------------------------------------------------------- lines ----

/// One line of a line chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Name (legend and tooltip).
    pub name: String,
    /// Style index into [`series_style`], stable across a page's charts so
    /// a framework keeps its colour.
    pub style: usize,
    /// Points in data units; a point with a `None` y breaks the line.
    pub points: Vec<(f64, Option<f64>)>,
    /// Marks per point (flagged points are drawn hollow); empty for none.
    pub point_marks: Vec<Mark>,
    /// Verdict of the series as a whole.
    pub mark: Mark,
    /// Tooltip.
    pub title: String,
}

/// A y axis of a line chart.
#[derive(Debug, Clone, Copy)]
pub struct YAxis<'a> {
    /// Description with unit.
    pub desc: &'a str,
    /// Logarithmic (for values spanning orders of magnitude).
    pub log: bool,
    /// Tick label of a value.
    pub tick: fn(f64) -> String,
}

fn y_bounds(series: &[Series], log: bool) -> (f64, f64) {
    let ys = series
        .iter()
        .flat_map(|s| s.points.iter().filter_map(|p| p.1))
        .filter(|y| y.is_finite() && (!log || *y > 0.0));
    let (lo, hi) = ys.fold((f64::INFINITY, 0f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
    if log {
        if !lo.is_finite() {
            return (1.0, 10.0);
        }
        let lo = 10f64.powf(lo.log10().floor());
        let hi = 10f64.powf(hi.log10().ceil()).max(lo * 10.0);
        (lo, hi)
    } else {
        (0.0, nice_ceiling(hi * 1.1))
    }
}

/// What a line chart says about itself and its x axis.
struct LinesSpec<'a> {
    id: &'a str,
    label: &'a str,
    size: (u32, u32),
    x_desc: &'a str,
    x_tick: &'a dyn Fn(&f64) -> String,
    y_axis: YAxis<'a>,
}

/// Draw the lines of `series` on any pair of coordinate specs.
fn lines_on<X, Y>(
    spec: &LinesSpec<'_>,
    x: impl Fn() -> X,
    y: impl Fn() -> Y,
    series: &[Series],
) -> Result<String, ChartError>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: plotters::coord::ranged1d::Ranged<ValueType = f64>
        + plotters::coord::ranged1d::ValueFormatter<f64>,
    Y::CoordDescType: plotters::coord::ranged1d::Ranged<ValueType = f64>
        + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    let LinesSpec {
        id,
        label,
        size,
        x_desc,
        x_tick,
        y_axis,
    } = *spec;
    let frame_px = Frame {
        top: 10,
        right: 20,
        x_area: 44,
        y_area: 70,
    };
    let frame = layer(id, size, |area| {
        let mut chart = context(area, frame_px, x(), y())?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_axis.desc)
            .x_label_formatter(x_tick)
            .y_label_formatter(&|v| (y_axis.tick)(*v))
            .label_style((FONT, LABEL_PT))
            .axis_desc_style((FONT, LABEL_PT))
            .light_line_style(GRID.mix(0.0))
            .bold_line_style(GRID)
            .draw()?;
        Ok(())
    })?;
    let mut groups = Vec::new();
    for s in series {
        let (colour, dash) = series_style(s.style);
        let body = layer(id, size, |area| {
            let mut chart = context(area, frame_px, x(), y())?;
            let style = colour.stroke_width(2);
            // Split at missing points: a rejected cell is a gap, not a dip.
            let mut run: Vec<(f64, f64)> = Vec::new();
            for p in s.points.iter().chain(std::iter::once(&(f64::NAN, None))) {
                match p {
                    (x, Some(y)) if x.is_finite() => run.push((*x, *y)),
                    _ => {
                        if run.len() > 1 {
                            chart.draw_series(LineSeries::new(run.clone(), style))?;
                        }
                        run.clear();
                    }
                }
            }
            if !s.point_marks.is_empty() {
                for (p, m) in s.points.iter().zip(&s.point_marks) {
                    let (x, Some(y)) = p else { continue };
                    let hollow = *m == Mark::Flagged;
                    let st = if hollow {
                        colour.stroke_width(2)
                    } else {
                        colour.filled()
                    };
                    chart.draw_series(std::iter::once(Circle::new((*x, *y), 4, st)))?;
                }
            }
            Ok(())
        })?;
        let dash_attr = dash
            .map(|d| format!(" stroke-dasharray=\"{d}\""))
            .unwrap_or_default();
        groups.push(Group {
            class: format!("series {}", s.mark.class()),
            attrs: format!(" data-series=\"{}\"{dash_attr}", s.style),
            title: s.title.clone(),
            link: None,
            body,
        });
    }
    Ok(svg(id, label, size, &frame, &groups))
}

/// Percentiles of the latency spectrum's x axis, as 1 / (1 − p): 50% to
/// 99.999%, the range HdrHistogram's plotter shows.
pub const SPECTRUM_TICKS: [f64; 6] = [2.0, 10.0, 100.0, 1e3, 1e4, 1e5];

/// The percentile a point of the spectrum's x axis stands for, as text.
pub fn percentile_label(x: f64) -> String {
    let p = 100.0 * (1.0 - 1.0 / x);
    let digits = (x.log10().round() as usize).saturating_sub(2);
    format!("{p:.digits$}%")
}

/// Where the spectrum samples each line: the median, then 20 points per
/// decade of 1 / (1 − p) up to 99.999%.
pub fn spectrum_points() -> Vec<f64> {
    let mut out = vec![2.0];
    // 10^(7/20) ≈ 2.24 is the first step above the median.
    out.extend((7..=100).map(|k| 10f64.powf(f64::from(k) / 20.0)));
    out
}

/// The latency percentile spectrum: x is the percentile on a log scale of
/// 1 / (1 − p) from 50% to 99.999%, y the latency; one line per series,
/// points given as (1 / (1 − p), µs).
pub fn spectrum(
    id: &str,
    label: &str,
    y: YAxis<'_>,
    series: &[Series],
) -> Result<String, ChartError> {
    let size = (WIDTH, 400);
    let (lo, hi) = y_bounds(series, y.log);
    let x = || {
        (2f64..1e5)
            .log_scale()
            .with_key_points(SPECTRUM_TICKS.to_vec())
    };
    let tick = |v: &f64| percentile_label(*v);
    let spec = LinesSpec {
        id,
        label,
        size,
        x_desc: "percentile (log scale of 1 / (1 − p))",
        x_tick: &tick,
        y_axis: y,
    };
    if y.log {
        lines_on(&spec, x, || (lo..hi).log_scale(), series)
    } else {
        lines_on(&spec, x, || lo..hi, series)
    }
}

/// A line per series over the given x levels (connections), on a log x
/// axis with a tick at each level.
pub fn by_level(
    id: &str,
    label: &str,
    x_desc: &str,
    levels: &[f64],
    y: YAxis<'_>,
    series: &[Series],
) -> Result<String, ChartError> {
    let size = (WIDTH, 360);
    let (lo, hi) = y_bounds(series, false);
    let first = levels.iter().copied().fold(f64::INFINITY, f64::min);
    let last = levels.iter().copied().fold(0f64, f64::max);
    // Half a step of room each side so the end points are not on the frame.
    let x = || {
        ((first / 1.4).max(0.5)..last * 1.4)
            .log_scale()
            .with_key_points(levels.to_vec())
    };
    let tick = |v: &f64| super::super::fmt::thousands(*v);
    let spec = LinesSpec {
        id,
        label,
        size,
        x_desc,
        x_tick: &tick,
        y_axis: y,
    };
    lines_on(&spec, x, || lo..hi, series)
}

// ------------------------------------------------------------ timeline ----

/// One round of a timeline: per-second req/s.
#[derive(Debug, Clone)]
pub struct TimelineRound {
    /// Per-second req/s of the warm-up, when the run recorded it.
    pub warmup: Option<Vec<f64>>,
    /// Per-second req/s of the measured window.
    pub window: Vec<f64>,
}

/// A small per-cell chart of req/s per second over warm-up and window,
/// the window shaded; one line per round.
#[derive(Debug, Clone)]
pub struct Timeline<'a> {
    /// Element id.
    pub id: &'a str,
    /// What it shows, for screen readers and the tooltip.
    pub label: &'a str,
    /// Warm-up length, s (drawn left of 0).
    pub warmup_s: f64,
    /// Window length, s.
    pub window_s: f64,
    /// Rounds, in order.
    pub rounds: &'a [TimelineRound],
}

/// Draw a timeline. Seconds run from −warm-up to the window's end, the
/// window starting at 0; a second's figure is drawn at its middle.
pub fn timeline(t: &Timeline<'_>) -> Result<String, ChartError> {
    let size = (300, 150);
    let max = t
        .rounds
        .iter()
        .flat_map(|r| r.window.iter().chain(r.warmup.iter().flatten()))
        .copied()
        .fold(0f64, f64::max);
    let ymax = nice_ceiling(max * 1.1);
    let x0 = -t.warmup_s;
    let x1 = t.window_s.max(1.0);
    let frame_px = Frame {
        top: 6,
        right: 8,
        x_area: 30,
        y_area: 44,
    };
    let shade = layer(t.id, size, |area| {
        let mut chart = context(area, frame_px, x0..x1, 0f64..ymax)?;
        chart.draw_series(std::iter::once(Rectangle::new(
            [(0.0, 0.0), (x1, ymax)],
            PALETTE[4].mix(0.18).filled(),
        )))?;
        let recorded = t.rounds.iter().any(|r| r.warmup.is_some());
        if t.warmup_s > 0.0 && !recorded {
            let (px, py) = chart.backend_coord(&(x0 / 2.0, ymax / 2.0));
            area.draw(&Text::new(
                "warm-up",
                (px, py - 7),
                text_style(SMALL_PT, &INK, Pos::new(HPos::Center, VPos::Center)),
            ))?;
            area.draw(&Text::new(
                "not recorded",
                (px, py + 7),
                text_style(SMALL_PT, &INK, Pos::new(HPos::Center, VPos::Center)),
            ))?;
        }
        Ok(())
    })?;
    let frame = layer(t.id, size, |area| {
        let mut chart = context(area, frame_px, x0..x1, 0f64..ymax)?;
        chart
            .configure_mesh()
            .x_labels(5)
            .y_labels(4)
            .x_desc("s (window from 0)")
            .y_desc("req/s")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| compact(*v))
            .label_style((FONT, SMALL_PT))
            .axis_desc_style((FONT, SMALL_PT))
            .light_line_style(GRID.mix(0.0))
            .bold_line_style(GRID)
            .draw()?;
        Ok(())
    })?;
    let mut groups = vec![Group {
        class: "window".into(),
        attrs: String::new(),
        title: format!("measured window: {} s", t.window_s),
        link: None,
        body: shade,
    }];
    for (i, round) in t.rounds.iter().enumerate() {
        let (colour, _) = series_style(i);
        let body = layer(t.id, size, |area| {
            let mut chart = context(area, frame_px, x0..x1, 0f64..ymax)?;
            let mut points: Vec<(f64, f64)> = Vec::new();
            if let Some(w) = &round.warmup {
                // The warm-up's last second ends where the window starts.
                let start = -(w.len() as f64);
                points.extend(
                    w.iter()
                        .enumerate()
                        .map(|(s, v)| (start + s as f64 + 0.5, *v)),
                );
            }
            points.extend(
                round
                    .window
                    .iter()
                    .enumerate()
                    .map(|(s, v)| (s as f64 + 0.5, *v)),
            );
            chart.draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?;
            chart.draw_series(points.iter().map(|p| Circle::new(*p, 2, colour.filled())))?;
            Ok(())
        })?;
        groups.push(Group {
            class: "series".into(),
            attrs: format!(" data-round=\"{}\"", i + 1),
            title: format!("round {}", i + 1),
            link: None,
            body,
        });
    }
    // The frame goes over the shading so the grid stays visible.
    let (shade_group, rest) = groups.split_at(1);
    let mut out = format!(
        "<svg id=\"{}\" class=\"chart timeline\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"{}\">\n",
        esc(t.id),
        esc(t.label),
        w = size.0,
        h = size.1,
    );
    shade_group[0].write(&mut out);
    let _ = write!(out, "\n<g class=\"frame\">{frame}</g>\n");
    for g in rest {
        g.write(&mut out);
        out.push('\n');
    }
    out.push_str("</svg>");
    Ok(out)
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
        .unwrap();
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
        .unwrap();
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
        .unwrap();
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
        .unwrap();
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
