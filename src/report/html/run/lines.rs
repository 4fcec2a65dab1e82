//! The line charts of a run's page: the latency percentile spectrum from each
//! cell's HDR histogram, throughput against concurrency, per-cell timelines.

use super::*;

pub(super) fn spectrum(ctx: &Ctx<'_>, col: Column) -> anyhow::Result<Markup> {
    let cells = ctx.cells(col);
    let mut series = Vec::new();
    let mut items = Vec::new();
    let mut t = Table::new(&[
        "framework",
        "verdict",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "max",
        "responses timed",
        "beyond the timeout",
    ]);
    for c in &cells {
        let Some(s) = &c.summary else { continue };
        if c.verdict.status == Status::Rejected {
            continue;
        }
        let h = histogram::decode(&s.histogram)
            .with_context(|| format!("cell {}: merged histogram", c.key))?;
        let Some(line) = spectrum_line(&h, &s.latency) else {
            continue;
        };
        let style = ctx
            .style
            .get(c.key.framework.as_str())
            .copied()
            .unwrap_or(0);
        let l = &s.latency;
        series.push(Series {
            name: c.key.framework.clone(),
            style,
            points: line.points,
            point_marks: Vec::new(),
            mark: ctx.mark(c),
            title: ctx.title(
                c,
                &format!(
                    "p50 {}, p99 {}, p99.9 {}, max {}{}",
                    l.show(l.p50_us),
                    l.show(l.p99_us),
                    l.show(l.p999_us),
                    l.show(l.max_us),
                    line.end
                        .as_ref()
                        .map(|e| format!("; {e} of requests beyond the timeout"))
                        .unwrap_or_default()
                ),
            ),
            end: line.end,
        });
        items.push(LegendItem {
            name: c.key.framework.clone(),
            style,
            mark: ctx.mark(c),
        });
        t.row_with_class(
            &c.verdict.status.to_string(),
            vec![
                Td::text(&c.key.framework),
                ctx.verdict_td(c),
                Td::latency(l, l.p50_us),
                Td::latency(l, l.p90_us),
                Td::latency(l, l.p99_us),
                Td::latency(l, l.p999_us),
                Td::latency(l, l.max_us),
                Td::num(&thousands(l.count as f64), l.count as f64),
                Td::num(&thousands(l.beyond_timeout as f64), l.beyond_timeout as f64),
            ],
        );
    }
    let id = format!("spectrum-{}", col.slug());
    let label = format!("latency percentile spectrum, {}", col.label());
    let svg = charts::spectrum(
        &id,
        &label,
        YAxis {
            desc: "latency (log scale)",
            log: true,
            tick: micros,
        },
        &series,
    )?;
    let from = if col.fixed_rate() {
        "from the scheduled send"
    } else {
        "from the send"
    };
    Ok(Figure {
        caption: caption(
            "Latency percentile spectrum",
            &format!(
                "lower is better; {from}, all rounds merged, ranked over every request due in \
                 the window; a line ends at the timeout (a hollow point, \"> timeout: share\") \
                 where the rest of its requests were beyond it (timed out, unanswered at the end \
                 or never sent), or where its sample count runs out"
            ),
        ),
        svg,
        legend: legend(&items),
        notes: footnotes(ctx, &cells, false),
        numbers: t.render(),
        ..Figure::default()
    }
    .render())
}

/// One cell's line on the latency spectrum.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SpectrumLine {
    /// (1 / (1 − p), µs) points.
    pub points: Vec<(f64, Option<f64>)>,
    /// `> 5.00 s: 52%` when the line ends at the timeout because the
    /// requests past that percentile are beyond it.
    pub end: Option<String>,
}

/// The spectrum of a merged histogram `h` (answered requests, ns) with the
/// cell's `latency` summary, each percentile ranked over every window
/// request, answered or beyond the timeout, the way [`histogram::Latency`]
/// ranks the table's: a line drawn from the answered requests alone would
/// put the p99 of a server that left 40% of its requests unanswered among
/// its fastest answers. Where the percentile passes the answered share
/// (1 / (1 − p) = requests / beyond) the line ends at the timeout; `None`
/// when the cell has no request at all.
pub(super) fn spectrum_line(
    h: &hdrhistogram::Histogram<u64>,
    latency: &histogram::Latency,
) -> Option<SpectrumLine> {
    let answered = h.len();
    let beyond = latency.beyond_timeout;
    let total = answered + beyond;
    if total == 0 {
        return None;
    }
    let mut points = Vec::new();
    let mut end = None;
    // Beyond 1 / (1 − p) = total a percentile is the maximum: stop there.
    for x in charts::spectrum_points()
        .into_iter()
        .take_while(|x| *x <= (total as f64).max(2.0))
    {
        let rank = ((1.0 - 1.0 / x) * total as f64).ceil().max(1.0) as u64;
        if rank > answered {
            if let Some(t) = latency.timeout_us {
                let share = beyond as f64 / total as f64;
                // Where the slow requests begin: p = answered / total.
                let at = (1.0 / share).max(2.0);
                points.push((at, Some((t as f64).max(0.001))));
                end = Some(format!("> {}: {}", micros(t as f64), percent(share)));
            }
            break;
        }
        // The histogram holds ns; the chart's axis is µs.
        let us = h.value_at_quantile(rank as f64 / answered as f64) as f64 / 1e3;
        points.push((x, Some(us.max(0.001))));
    }
    if points.is_empty() {
        return None;
    }
    Some(SpectrumLine { points, end })
}

/// req/s against connections, one line per framework; rejected cells are
/// gaps, flagged points hollow.
pub(super) fn scaling(
    ctx: &Ctx<'_>,
    scenario: Scenario,
    cols: &[Column],
) -> anyhow::Result<Markup> {
    let levels: Vec<f64> = cols.iter().map(|c| f64::from(c.concurrency)).collect();
    let mut series = Vec::new();
    let mut items = Vec::new();
    let mut head = vec!["framework".to_string()];
    head.extend(
        cols.iter()
            .map(|c| format!("{} conns", thousands(f64::from(c.concurrency)))),
    );
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut t = Table::new(&head);
    let mut all = Vec::new();
    for fw in ctx.view.frameworks() {
        let cells: Vec<Option<&Cell>> = cols.iter().map(|col| ctx.view.find(fw, *col)).collect();
        if cells.iter().all(Option::is_none) {
            continue;
        }
        all.extend(cells.iter().flatten().copied());
        let value = |c: &Cell| {
            c.summary
                .as_ref()
                .filter(|_| c.verdict.status != Status::Rejected)
                .map(|s| s.throughput_rps.median)
        };
        let points = cells
            .iter()
            .zip(&levels)
            .map(|(c, x)| (*x, c.and_then(value)))
            .collect();
        let point_marks = cells
            .iter()
            .map(|c| c.map(|c| ctx.mark(c)).unwrap_or(Mark::Rejected))
            .collect();
        let mark = cells
            .iter()
            .flatten()
            .map(|c| ctx.mark(c))
            .max_by_key(|m| match m {
                Mark::Plain => 0,
                Mark::Flagged => 1,
                Mark::Rejected => 2,
            })
            .unwrap_or(Mark::Plain);
        let style = ctx.style.get(fw).copied().unwrap_or(0);
        let mut title = format!("{fw}: req/s by connections");
        let mut row = vec![Td::text(fw)];
        for (c, x) in cells.iter().zip(&levels) {
            match c {
                Some(c) if c.verdict.status == Status::Rejected => {
                    let _ = write!(title, "\n{}: {}", thousands(*x), ctx.rejected_text(c));
                    row.push(Td::html(ctx.rejected_html(c)).class("rejected"));
                }
                Some(c) => match value(c) {
                    Some(v) => {
                        let _ = write!(
                            title,
                            "\n{}: {} req/s{}",
                            thousands(*x),
                            thousands(v),
                            ctx.marker(c)
                        );
                        row.push(
                            Td::html(html! { (thousands(v)) (ctx.marker_html(c)) })
                                .class("num")
                                .sorted(v),
                        );
                    }
                    None => row.push(Td::text("–")),
                },
                None => row.push(Td::text(ctx.view.missing(fw, cols[0]).text())),
            }
        }
        t.row(row);
        series.push(Series {
            name: fw.to_string(),
            style,
            points,
            point_marks,
            mark,
            title,
            end: None,
        });
        items.push(LegendItem {
            name: fw.to_string(),
            style,
            mark,
        });
    }
    let id = format!("scaling-{scenario}");
    let unit = scenario.rate_unit();
    let label = format!("{unit} by connections, {scenario}");
    let desc = format!("{unit} (median of rounds)");
    let svg = charts::by_level(
        &id,
        &label,
        "connections (log scale)",
        &levels,
        YAxis {
            desc: &desc,
            log: false,
            tick: charts::compact,
        },
        &series,
    )?;
    Ok(Figure {
        caption: caption(
            &match cols.first().map(|c| c.protocol) {
                Some(p) if !p.is_http1() => format!("Throughput against concurrency, {p}"),
                _ => "Throughput against concurrency".to_string(),
            },
            &format!("{unit}, median of rounds; hollow points flagged; a gap is a rejected cell"),
        ),
        svg,
        legend: legend(&items),
        notes: footnotes_named(ctx, &all, false, |c| {
            if c.key.protocol.is_http1() {
                format!("{} c={}", c.key.framework, c.key.concurrency)
            } else {
                format!(
                    "{} {} c={}",
                    c.key.framework, c.key.protocol, c.key.concurrency
                )
            }
        }),
        numbers: t.render(),
        ..Figure::default()
    }
    .render())
}

/// A small timeline per cell: req/s per second, one line per round, the
/// measured window shaded.
pub(super) fn timelines(ctx: &Ctx<'_>, col: Column) -> anyhow::Result<Markup> {
    let cells: Vec<&Cell> = ctx
        .cells(col)
        .into_iter()
        .filter(|c| !c.rounds.is_empty())
        .collect();
    if cells.is_empty() {
        return Ok(html! {});
    }
    let rounds_max = cells.iter().map(|c| c.rounds.len()).max().unwrap_or(0);
    let names: Vec<String> = (1..=rounds_max).map(|i| format!("round {i}")).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let colours: Vec<_> = (0..rounds_max).map(|i| charts::series_style(i).0).collect();
    let mut figures = Vec::new();
    for c in cells {
        let rounds: Vec<TimelineRound> = c
            .rounds
            .iter()
            .map(|r| TimelineRound {
                // Runs before results.json kept the warm-up's seconds have
                // none: the warm-up is then drawn as not recorded.
                warmup: (!r.warmup_windows_rps.is_empty()).then(|| r.warmup_windows_rps.clone()),
                window: r.windows_rps.clone(),
            })
            .collect();
        let first = &c.rounds[0];
        let id = format!("timeline-{}", c.key.stem());
        let label = format!("{} per second, {}", c.key.scenario.rate_unit(), c.key);
        let svg = charts::timeline(&Timeline {
            id: &id,
            label: &label,
            warmup_s: first.warmup_s,
            window_s: first.duration_s,
            rounds: &rounds,
        })?;
        let seconds = c
            .rounds
            .iter()
            .map(|r| r.windows_rps.len())
            .max()
            .unwrap_or(0);
        let mut head = vec!["round".to_string()];
        head.extend((1..=seconds).map(|i| format!("s{i}")));
        let head: Vec<&str> = head.iter().map(String::as_str).collect();
        let mut t = Table::new(&head);
        for r in &c.rounds {
            let mut row = vec![Td::num(&(r.index + 1).to_string(), f64::from(r.index + 1))];
            row.extend(r.windows_rps.iter().map(|v| Td::num(&thousands(*v), *v)));
            t.row(row);
        }
        let verdict = match c.verdict.status {
            Status::Rejected => ctx.rejected_html(c),
            Status::Flagged => html! { span class="flagged" { "flagged" } (ctx.marker_html(c)) },
            Status::Accepted => html! { "accepted" (ctx.dagger) },
        };
        figures.push(
            Figure {
                caption: html! { (c.key.framework) " " span class="sub" { (verdict) } },
                svg,
                numbers: t.render(),
                class: "small",
                ..Figure::default()
            }
            .render(),
        );
    }
    Ok(html! {
        h4 {
            "Timelines "
            span class="muted" {
                "(2xx req/s per second over the warm-up and the measured window, which is shaded)"
            }
        }
        (swatches(&name_refs, &colours))
        div class="grid" { @for f in &figures { (f) } }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `answered` requests of 1 ms each (ns in the histogram) and `beyond`
    /// more past a 5 s timeout.
    fn cell_latency(
        answered: u64,
        beyond: u64,
    ) -> (hdrhistogram::Histogram<u64>, histogram::Latency) {
        let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
        h.auto(true);
        if answered > 0 {
            h.record_n(1_000_000, answered).unwrap();
        }
        let l = histogram::Latency::of(&h, beyond, Some(5_000_000));
        (h, l)
    }

    #[test]
    fn spectrum_ends_at_the_timeout_at_the_share_of_requests_beyond_it() {
        // 30% beyond: p70 is the last answered percentile, 1 / (1 − 0.7).
        let (h, l) = cell_latency(7_000, 3_000);
        let line = spectrum_line(&h, &l).unwrap();
        let (x, y) = *line.points.last().unwrap();
        assert!((x - 1.0 / 0.3).abs() < 1e-9, "{x}");
        assert_eq!(y, Some(5_000_000.0));
        assert_eq!(line.end.as_deref(), Some("> 5.00 s: 30.0%"));
        // Every other point is an answered request's latency, before it.
        assert!(line.points[..line.points.len() - 1]
            .iter()
            .all(|(px, py)| *px < x && (py.unwrap() - 1_000.0).abs() < 2.0));
    }

    #[test]
    fn spectrum_of_a_cell_with_half_its_requests_beyond_the_timeout_is_one_point_at_the_timeout() {
        let (h, l) = cell_latency(4_000, 6_000);
        assert_eq!(l.show(l.p50_us), "> 5.00 s");
        let line = spectrum_line(&h, &l).unwrap();
        assert_eq!(line.points, vec![(2.0, Some(5_000_000.0))]);
        assert_eq!(line.end.as_deref(), Some("> 5.00 s: 60.0%"));
        // Nothing answered at all still says where every request went.
        let (h, l) = cell_latency(0, 100);
        assert_eq!(
            spectrum_line(&h, &l).unwrap().end.as_deref(),
            Some("> 5.00 s: 100.0%")
        );
    }

    #[test]
    fn spectrum_without_requests_beyond_the_timeout_stops_where_its_samples_run_out() {
        let (h, l) = cell_latency(500, 0);
        let line = spectrum_line(&h, &l).unwrap();
        assert_eq!(line.end, None);
        assert!(line.points.last().unwrap().0 <= 500.0);
        assert!(spectrum_line(&cell_latency(0, 0).0, &cell_latency(0, 0).1).is_none());
    }
}
