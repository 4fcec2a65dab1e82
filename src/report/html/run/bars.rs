//! The bar charts of a run's page: req/s by framework (or, at a fixed rate,
//! latency bars with the achieved rate), server CPU per request, memory.

use super::*;

/// Rows in order: valid values by `better` (descending when `desc`), then
/// rows without a value, then rejected rows.
pub(super) fn sort_rows(rows: &mut [BarRow], desc: bool, key: impl Fn(&BarRow) -> Option<f64>) {
    rows.sort_by(|a, b| {
        let rank = |r: &BarRow| match (r.mark, key(r)) {
            (Mark::Rejected, _) => 2,
            (_, None) => 1,
            _ => 0,
        };
        rank(a).cmp(&rank(b)).then_with(|| {
            let (x, y) = (key(a).unwrap_or(0.0), key(b).unwrap_or(0.0));
            let o = x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal);
            if desc {
                o.reverse()
            } else {
                o
            }
        })
    });
}

pub(super) fn rejected_row(ctx: &Ctx<'_>, c: &Cell, series: usize) -> BarRow {
    BarRow {
        label: c.key.framework.clone(),
        values: vec![None; series],
        range: None,
        mark: Mark::Rejected,
        text: ctx.rejected_text(c),
        title: ctx.title(c, "not a valid measurement"),
        link: ctx.link(c),
    }
}

pub(super) fn throughput_bars(ctx: &Ctx<'_>, col: Column) -> anyhow::Result<String> {
    let cells = ctx.cells(col);
    let mut rows = Vec::new();
    let mut t = Table::new(&[
        "framework",
        "verdict",
        "rounds",
        "req/s (median)",
        "min req/s",
        "max req/s",
        "CV",
        "errors",
        "connections",
    ]);
    for c in &cells {
        let conns = c
            .summary
            .as_ref()
            .map(|s| format!("{}/{}", s.connections_established_min, c.key.concurrency))
            .unwrap_or_else(|| format!("–/{}", c.key.concurrency));
        let errors = c
            .summary
            .as_ref()
            .map(|s| {
                let n = s.errors.total() + s.responses.non_2xx();
                Td::num(
                    &format!("{} ({})", thousands(n as f64), percent(s.error_rate)),
                    s.error_rate,
                )
            })
            .unwrap_or_else(|| Td::text("–"));
        match (&c.summary, c.verdict.status) {
            (Some(s), Status::Accepted | Status::Flagged) => {
                let a = &s.throughput_rps;
                rows.push(BarRow {
                    label: c.key.framework.clone(),
                    values: vec![Some(a.median)],
                    range: (a.n > 1).then_some((a.min, a.max)),
                    mark: ctx.mark(c),
                    text: format!("{} req/s{}", thousands(a.median), ctx.marker(c)),
                    title: ctx.title(
                        c,
                        &format!(
                            "{} req/s, median of {} round(s), {}–{}",
                            thousands(a.median),
                            a.n,
                            thousands(a.min),
                            thousands(a.max)
                        ),
                    ),
                    link: ctx.link(c),
                });
                t.row_with_class(
                    &c.verdict.status.to_string(),
                    vec![
                        Td::text(&c.key.framework),
                        ctx.verdict_td(c),
                        Td::num(&a.n.to_string(), a.n as f64),
                        Td::num(&thousands(a.median), a.median),
                        Td::num(&thousands(a.min), a.min),
                        Td::num(&thousands(a.max), a.max),
                        Td::num(&percent(a.cv), a.cv),
                        errors,
                        Td::text(&conns),
                    ],
                );
            }
            _ => {
                rows.push(rejected_row(ctx, c, 1));
                let rounds = vec![Td::num(&c.rounds.len().to_string(), c.rounds.len() as f64)];
                let tail = vec![errors, Td::text(&conns)];
                t.row_with_class("rejected", ctx.rejected_cells(c, rounds, tail, 9));
            }
        }
    }
    sort_rows(&mut rows, true, |r| r.values[0]);
    let id = format!("rps-{}", col.slug());
    let label = format!("req/s by framework, {}", col.label());
    let svg = charts::bars(&BarChart {
        id: &id,
        label: &label,
        axis: "req/s: 2xx responses per second of the window, median of rounds",
        series: &["req/s"],
        rows: &rows,
        tick: charts::compact,
    })?;
    Ok(Figure {
        caption: "req/s by framework <span class=\"sub\">(higher is better; whiskers: \
                  min–max across rounds)</span>"
            .into(),
        svg,
        notes: footnotes(ctx, &cells, true),
        numbers: t.render(),
        ..Figure::default()
    }
    .render())
}

/// Fixed-rate headline: p50, p99 and p99.9 bars per framework, best p99
/// first, the achieved rate beside.
pub(super) fn latency_bars(ctx: &Ctx<'_>, col: Column) -> anyhow::Result<String> {
    let cells = ctx.cells(col);
    let mut rows = Vec::new();
    let mut t = Table::new(&[
        "framework",
        "verdict",
        "rounds",
        "p50",
        "p99",
        "p99.9",
        "max",
        "achieved req/s",
        "errors",
    ]);
    for c in &cells {
        match (&c.summary, c.verdict.status) {
            (Some(s), Status::Accepted | Status::Flagged) => {
                let l = &s.latency;
                let achieved = achieved_rps(c);
                let at = achieved
                    .map(|a| format!(" at {} req/s", thousands(a)))
                    .unwrap_or_default();
                rows.push(BarRow {
                    label: c.key.framework.clone(),
                    values: vec![
                        // Above the timeout has no bar length; the text says it.
                        l.p50_us.map(|v| v as f64),
                        l.p99_us.map(|v| v as f64),
                        l.p999_us.map(|v| v as f64),
                    ],
                    range: None,
                    mark: ctx.mark(c),
                    text: format!("p99 {}{at}{}", l.show(l.p99_us), ctx.marker(c)),
                    title: ctx.title(
                        c,
                        &format!(
                            "p50 {}, p99 {}, p99.9 {}{at}",
                            l.show(l.p50_us),
                            l.show(l.p99_us),
                            l.show(l.p999_us)
                        ),
                    ),
                    link: ctx.link(c),
                });
                t.row_with_class(
                    &c.verdict.status.to_string(),
                    vec![
                        Td::text(&c.key.framework),
                        ctx.verdict_td(c),
                        Td::num(&c.rounds.len().to_string(), c.rounds.len() as f64),
                        Td::latency(l, l.p50_us),
                        Td::latency(l, l.p99_us),
                        Td::latency(l, l.p999_us),
                        Td::latency(l, l.max_us),
                        Td::opt(achieved, thousands),
                        Td::num(&percent(s.error_rate), s.error_rate),
                    ],
                );
            }
            _ => {
                rows.push(rejected_row(ctx, c, 3));
                let rounds = vec![Td::num(&c.rounds.len().to_string(), c.rounds.len() as f64)];
                t.row_with_class("rejected", ctx.rejected_cells(c, rounds, vec![], 9));
            }
        }
    }
    sort_rows(&mut rows, false, |r| r.values.get(1).copied().flatten());
    let id = format!("latency-{}", col.slug());
    let label = format!("latency at a fixed rate by framework, {}", col.label());
    let names = ["p50", "p99", "p99.9"];
    let svg = charts::bars(&BarChart {
        id: &id,
        label: &label,
        axis: "latency from the scheduled send, all rounds merged",
        series: &names,
        rows: &rows,
        tick: micros,
    })?;
    Ok(Figure {
        caption: "Latency at a fixed rate by framework <span class=\"sub\">(lower is better; sorted by p99; \
                  the rate achieved beside)</span>"
            .into(),
        svg,
        legend: swatches(&names, &bar_colours(3)),
        notes: footnotes(ctx, &cells, true),
        numbers: t.render(),
        ..Figure::default()
    }
    .render())
}

pub(super) fn cpu_bars(ctx: &Ctx<'_>, col: Column) -> anyhow::Result<String> {
    let cells = ctx.cells(col);
    let mut rows = Vec::new();
    let mut t = Table::new(&[
        "framework",
        "verdict",
        "CPU µs per request (median)",
        "min",
        "max",
    ]);
    for c in &cells {
        if c.verdict.status == Status::Rejected {
            rows.push(rejected_row(ctx, c, 1));
            t.row_with_class("rejected", ctx.rejected_cells(c, vec![], vec![], 5));
            continue;
        }
        let a = c
            .summary
            .as_ref()
            .and_then(|s| s.cpu_us_per_request.as_ref());
        let text = match a {
            Some(a) => format!("{} µs{}", sig3(a.median), ctx.marker(c)),
            None => "– (no reading)".into(),
        };
        rows.push(BarRow {
            label: c.key.framework.clone(),
            values: vec![a.map(|a| a.median)],
            range: a.filter(|a| a.n > 1).map(|a| (a.min, a.max)),
            mark: ctx.mark(c),
            text: text.clone(),
            title: ctx.title(c, &format!("server CPU per request {text}")),
            link: ctx.link(c),
        });
        t.row_with_class(
            &c.verdict.status.to_string(),
            vec![
                Td::text(&c.key.framework),
                ctx.verdict_td(c),
                Td::opt(agg_median(a), |v| format!("{} µs", sig3(v))),
                Td::opt(a.map(|a| a.min), |v| format!("{} µs", sig3(v))),
                Td::opt(a.map(|a| a.max), |v| format!("{} µs", sig3(v))),
            ],
        );
    }
    sort_rows(&mut rows, false, |r| r.values[0]);
    let id = format!("cpu-{}", col.slug());
    let label = format!("server CPU per request by framework, {}", col.label());
    let svg = charts::bars(&BarChart {
        id: &id,
        label: &label,
        axis: "server CPU time per 2xx response, µs (cgroup CPU delta / 2xx, median of rounds)",
        series: &["CPU µs per request"],
        rows: &rows,
        tick: |v| format!("{} µs", charts::compact(v)),
    })?;
    Ok(Figure {
        caption: "Server CPU per request <span class=\"sub\">(lower is better; holds even when the loader \
                  was the bottleneck)</span>"
            .into(),
        svg,
        notes: footnotes(ctx, &cells, true),
        numbers: t.render(),
        ..Figure::default()
    }
    .render())
}

pub(super) fn memory_bars(ctx: &Ctx<'_>, col: Column) -> anyhow::Result<String> {
    let cells = ctx.cells(col);
    let names = ["idle, before any load", "under load (median)", "peak"];
    let mut rows = Vec::new();
    let mut t = Table::new(&[
        "framework",
        "verdict",
        "idle, before any load",
        "under load (median of rounds)",
        "peak (any round)",
    ]);
    for c in &cells {
        if c.verdict.status == Status::Rejected {
            rows.push(rejected_row(ctx, c, 3));
            t.row_with_class("rejected", ctx.rejected_cells(c, vec![], vec![], 5));
            continue;
        }
        let idle = ctx
            .r
            .framework(&c.key.framework)
            .and_then(|f| f.idle_memory_bytes)
            .map(|b| b as f64);
        let under = c
            .summary
            .as_ref()
            .and_then(|s| agg_median(s.memory_median_bytes.as_ref()));
        let peak = c
            .summary
            .as_ref()
            .and_then(|s| s.memory_window_peak_bytes)
            .map(|b| b as f64);
        let show = |v: Option<f64>| v.map(bytes).unwrap_or_else(|| "–".into());
        rows.push(BarRow {
            label: c.key.framework.clone(),
            // MiB on the axis, so its ticks fall on round numbers.
            values: vec![idle, under, peak]
                .into_iter()
                .map(|v| v.map(|b| b / MIB))
                .collect(),
            range: None,
            mark: ctx.mark(c),
            text: format!("{} under load{}", show(under), ctx.marker(c)),
            title: ctx.title(
                c,
                &format!(
                    "memory idle {}, under load {}, peak {}",
                    show(idle),
                    show(under),
                    show(peak)
                ),
            ),
            link: ctx.link(c),
        });
        t.row_with_class(
            &c.verdict.status.to_string(),
            vec![
                Td::text(&c.key.framework),
                ctx.verdict_td(c),
                Td::opt(idle, bytes),
                Td::opt(under, bytes),
                Td::opt(peak, bytes),
            ],
        );
    }
    sort_rows(&mut rows, false, |r| r.values[1]);
    let id = format!("memory-{}", col.slug());
    let label = format!("server memory by framework, {}", col.label());
    let svg = charts::bars(&BarChart {
        id: &id,
        label: &label,
        axis: "server memory, MiB (cgroup memory.current; peak: high-water mark or highest sample)",
        series: &names,
        rows: &rows,
        tick: |v| format!("{} MiB", charts::compact(v)),
    })?;
    Ok(Figure {
        caption: "Server memory <span class=\"sub\">(lower is better; sorted by memory under load)</span>"
            .into(),
        svg,
        legend: swatches(&names, &bar_colours(3)),
        notes: footnotes(ctx, &cells, true),
        numbers: t.render(),
        ..Figure::default()
    }
    .render())
}
