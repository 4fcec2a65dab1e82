//! Horizontal bar charts: one row per framework, min–max whiskers, per-row
//! marks (flagged, rejected) with their tooltips.

use super::*;

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
pub fn bars(c: &BarChart<'_>) -> Result<Markup, ChartError> {
    let n = c.rows.len().max(1);
    let k = c.series.len().max(1);
    let bar_h: u32 = if k == 1 { 16 } else { 9 };
    let row_h = bar_h * k as u32 + 10;
    let label_w = column_width(c.rows.iter().map(|r| r.label.as_str()), 220);
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
            label: Some(row.label.clone()),
            title: row.title.clone(),
            link: row.link.clone(),
            body,
            ..Group::default()
        });
    }
    Ok(svg(c.id, c.label, size, &frame, &groups))
}
