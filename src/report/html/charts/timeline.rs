//! The small per-cell timeline: req/s per second of each round, the
//! measured window shaded.

use super::*;

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
pub fn timeline(t: &Timeline<'_>) -> Result<Markup, ChartError> {
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
        title: format!("measured window: {} s", t.window_s),
        link: None,
        body: shade,
        ..Group::default()
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
            round: Some(i + 1),
            title: format!("round {}", i + 1),
            link: None,
            body,
            ..Group::default()
        });
    }
    // The frame goes over the shading so the grid stays visible.
    let (shade, rest) = groups.split_at(1);
    Ok(svg_element(
        t.id,
        "chart timeline",
        t.label,
        size,
        html! {
            (shade[0])
            g class="frame" { (PreEscaped(&frame)) }
            @for g in rest { (g) }
        },
    ))
}
