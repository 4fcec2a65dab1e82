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
    ]);
    for c in &cells {
        let Some(s) = &c.summary else { continue };
        if c.verdict.status == Status::Rejected {
            continue;
        }
        let h = histogram::decode(&s.histogram)
            .with_context(|| format!("cell {}: merged histogram", c.key))?;
        if h.is_empty() {
            continue;
        }
        let count = h.len() as f64;
        // Beyond 1 / (1 − p) = count a percentile is the maximum: stop there.
        let points = charts::spectrum_points()
            .into_iter()
            .take_while(|x| *x <= count.max(2.0))
            .map(|x| {
                // The histogram holds ns; the chart's axis is µs.
                let us = h.value_at_quantile(1.0 - 1.0 / x) as f64 / 1e3;
                (x, Some(us.max(0.001)))
            })
            .collect();
        let style = ctx
            .style
            .get(c.key.framework.as_str())
            .copied()
            .unwrap_or(0);
        let l = &s.latency;
        series.push(Series {
            name: c.key.framework.clone(),
            style,
            points,
            point_marks: Vec::new(),
            mark: ctx.mark(c),
            title: ctx.title(
                c,
                &format!(
                    "p50 {}, p99 {}, p99.9 {}, max {}",
                    l.show(l.p50_us),
                    l.show(l.p99_us),
                    l.show(l.p999_us),
                    l.show(l.max_us)
                ),
            ),
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
                "lower is better; {from}, all rounds merged; each line stops where its sample \
                 count runs out"
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
        });
        items.push(LegendItem {
            name: fw.to_string(),
            style,
            mark,
        });
    }
    let id = format!("scaling-{scenario}");
    let label = format!("req/s by connections, {scenario}");
    let svg = charts::by_level(
        &id,
        &label,
        "connections (log scale)",
        &levels,
        YAxis {
            desc: "req/s (median of rounds)",
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
            "req/s, median of rounds; hollow points flagged; a gap is a rejected cell",
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
        let label = format!("req/s per second, {}", c.key);
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
