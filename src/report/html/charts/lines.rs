//! Line charts: the latency percentile spectrum (log percentile axis) and
//! throughput against concurrency.

use super::*;

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
    /// Words written at the line's last point, drawn hollow: where a
    /// spectrum line ends because the rest of its requests are beyond the
    /// timeout (`> 5.00 s: 52%`); `None` for an ordinary end.
    pub end: Option<String>,
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
) -> Result<Markup, ChartError>
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
            if let (Some(words), Some((x, Some(y)))) = (&s.end, s.points.last()) {
                chart.draw_series(std::iter::once(Circle::new(
                    (*x, *y),
                    5,
                    colour.stroke_width(2),
                )))?;
                let (px, py) = chart.backend_coord(&(*x, *y));
                area.draw(&Text::new(
                    words.clone(),
                    (px - 8, py - 8),
                    text_style(LABEL_PT, &INK, Pos::new(HPos::Right, VPos::Bottom)),
                ))?;
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
        groups.push(Group {
            class: format!("series {}", s.mark.class()),
            series: Some((s.style, dash)),
            title: s.title.clone(),
            link: None,
            body,
            ..Group::default()
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
) -> Result<Markup, ChartError> {
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
) -> Result<Markup, ChartError> {
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
    let tick = |v: &f64| crate::report::fmt::thousands(*v);
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
