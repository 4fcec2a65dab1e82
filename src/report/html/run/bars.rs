//! The bar charts of a run's page: req/s by framework (or, at a fixed rate,
//! latency bars with the achieved rate), server CPU per request, memory.
//!
//! One function draws them all ([`bars`]); what differs between them is a
//! row of [`BarMetric`]s: the figure's series, axis, caption, table columns
//! and how one cell becomes a chart row and a table row.

use super::*;

/// One bar chart of the run page, with the table of its numbers.
pub(super) struct BarMetric {
    /// Element id prefix (`rps-…`).
    slug: &'static str,
    /// What the chart shows, for screen readers (before the column's label).
    label: &'static str,
    /// x-axis description, with its unit.
    axis: &'static str,
    /// Series names: one bar each per framework.
    series: &'static [&'static str],
    /// Caption: the title, and the words in brackets after it.
    caption: (&'static str, &'static str),
    /// The numbers table's columns.
    headers: &'static [&'static str],
    /// Best first is the largest value.
    descending: bool,
    /// The series the rows are sorted by.
    sort_by: usize,
    /// Whether the rows go by rank group first (the headline figures:
    /// frameworks that share places stay together, in value order within).
    by_rank: bool,
    /// Tick label of an x value.
    tick: fn(f64) -> String,
    /// The cells with no valid figure: rejected ones, and for req/s and
    /// latency also cells without a summary.
    no_figure: fn(&Cell) -> bool,
    /// A cell with a figure: its chart row and its table cells.
    row: fn(&Ctx<'_>, &Cell) -> (BarRow, Vec<Td>),
    /// A cell without one: its table cells.
    rejected: fn(&Ctx<'_>, &Cell) -> Vec<Td>,
}

/// req/s by framework, closed loop.
pub(super) const THROUGHPUT: BarMetric = BarMetric {
    slug: "rps",
    label: "req/s by framework",
    axis: "req/s: 2xx responses per second of the window, median of rounds",
    series: &["req/s"],
    caption: (
        "req/s by framework",
        "higher is better; whiskers: min–max across rounds",
    ),
    headers: &[
        "framework",
        "verdict",
        "rounds",
        "req/s (median)",
        "min req/s",
        "max req/s",
        "CV",
        "errors",
        "connections",
    ],
    descending: true,
    sort_by: 0,
    by_rank: true,
    tick: charts::compact,
    no_figure: without_summary,
    row: throughput_row,
    rejected: |ctx, c| {
        let rounds = vec![Td::num(&c.rounds.len().to_string(), c.rounds.len() as f64)];
        ctx.rejected_cells(c, rounds, vec![errors_td(c), Td::text(&connections(c))], 9)
    },
};

/// Fixed-rate headline: p50, p99 and p99.9 bars per framework, best p99
/// first, the achieved rate beside.
pub(super) const LATENCY: BarMetric = BarMetric {
    slug: "latency",
    label: "latency at a fixed rate by framework",
    axis: "latency from the scheduled send, all rounds merged",
    series: &["p50", "p99", "p99.9"],
    caption: (
        "Latency at a fixed rate by framework",
        "lower is better; sorted by p99; the rate achieved beside",
    ),
    headers: &[
        "framework",
        "verdict",
        "rounds",
        "p50",
        "p99",
        "p99.9",
        "max",
        "achieved req/s",
        "errors",
        "due, never sent",
    ],
    descending: false,
    sort_by: 1,
    by_rank: true,
    tick: micros,
    no_figure: without_summary,
    row: latency_row,
    rejected: |ctx, c| {
        let rounds = vec![Td::num(&c.rounds.len().to_string(), c.rounds.len() as f64)];
        ctx.rejected_cells(c, rounds, vec![], 10)
    },
};

/// Server CPU time per request.
pub(super) const CPU: BarMetric = BarMetric {
    slug: "cpu",
    label: "server CPU per request by framework",
    axis: "server CPU time per 2xx response, µs (cgroup CPU delta / 2xx, median of rounds)",
    series: &["CPU µs per request"],
    caption: (
        "Server CPU per request",
        "lower is better; holds even when the loader was the bottleneck",
    ),
    headers: &[
        "framework",
        "verdict",
        "CPU µs per request (median)",
        "min",
        "max",
    ],
    descending: false,
    sort_by: 0,
    by_rank: false,
    tick: |v| format!("{} µs", charts::compact(v)),
    no_figure: rejected,
    row: cpu_row,
    rejected: |ctx, c| ctx.rejected_cells(c, vec![], vec![], 5),
};

/// Server memory: idle, under load, peak.
pub(super) const MEMORY: BarMetric = BarMetric {
    slug: "memory",
    label: "server memory by framework",
    axis: "server memory, MiB (cgroup memory.current; peak: high-water mark or highest sample)",
    series: &["idle, before any load", "under load (median)", "peak"],
    caption: (
        "Server memory",
        "lower is better; sorted by memory under load",
    ),
    headers: &[
        "framework",
        "verdict",
        "idle, before any load",
        "under load (median of rounds)",
        "peak (any round)",
    ],
    descending: false,
    sort_by: 1,
    by_rank: false,
    tick: |v| format!("{} MiB", charts::compact(v)),
    no_figure: rejected,
    row: memory_row,
    rejected: |ctx, c| ctx.rejected_cells(c, vec![], vec![], 5),
};

/// The figure of `m` for the cells of `col`: the chart, its notes and the
/// table of its numbers.
pub(super) fn bars(ctx: &Ctx<'_>, col: Column, m: &BarMetric) -> anyhow::Result<Markup> {
    let cells = ctx.cells(col);
    let mut rows = Vec::new();
    // The metric's words are HTTP's; a WebSocket column's rate is msg/s.
    let unit = |text: &str| col.scenario.in_own_words(text);
    let headers: Vec<String> = m.headers.iter().map(|h| unit(h)).collect();
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let series: Vec<String> = m.series.iter().map(|h| unit(h)).collect();
    let series: Vec<&str> = series.iter().map(String::as_str).collect();
    let mut t = Table::new(&headers);
    for c in &cells {
        if (m.no_figure)(c) {
            rows.push(rejected_row(ctx, c, m.series.len()));
            t.row_with_class("rejected", (m.rejected)(ctx, c));
        } else {
            let (row, tds) = (m.row)(ctx, c);
            rows.push(row);
            t.row_with_class(&c.verdict.status.to_string(), tds);
        }
    }
    sort_rows(&mut rows, m.descending, |r| {
        r.values.get(m.sort_by).copied().flatten()
    });
    if m.by_rank {
        rank_order(&mut rows, &cells);
    }
    for r in &mut rows {
        r.text = unit(&r.text);
        r.title = unit(&r.title);
    }
    let id = format!("{}-{}", m.slug, col.slug());
    let label = format!("{}, {}", unit(m.label), col.label());
    let axis = unit(m.axis);
    let svg = charts::bars(&BarChart {
        id: &id,
        label: &label,
        axis: &axis,
        series: &series,
        rows: &rows,
        tick: m.tick,
    })?;
    let legend = if series.len() > 1 {
        swatches(&series, &bar_colours(series.len()))
    } else {
        html! {}
    };
    Ok(Figure {
        caption: caption(&unit(m.caption.0), m.caption.1),
        svg,
        legend,
        notes: footnotes(ctx, &cells, true),
        numbers: t.render(),
        ..Figure::default()
    }
    .render())
}

/// Put `rows`, already in value order, in rank-group order: by each ranked
/// row's best place (stable, so value order holds inside a group). A row
/// with a figure but no rank group (fewer than 3 clean rounds, client-bound)
/// stays where its figure falls, after every ranked row with a higher
/// figure, and says `unranked`; rows without a figure and rejected ones stay
/// last.
pub(super) fn rank_order(rows: &mut [BarRow], cells: &[&Cell]) {
    let cell = |label: &str| cells.iter().find(|c| c.key.framework == label);
    let ranked = rows
        .iter()
        .any(|r| cell(&r.label).is_some_and(|c| c.rank.is_some()));
    let mut last_place = 0;
    let mut keys = Vec::with_capacity(rows.len());
    for r in rows.iter_mut() {
        let c = cell(&r.label);
        let key = match (
            c.and_then(|c| c.rank.as_ref()),
            r.mark,
            r.values.iter().any(Option::is_some),
        ) {
            (Some(g), _, _) => {
                last_place = last_place.max(g.low);
                g.low
            }
            (None, Mark::Rejected, _) | (None, _, false) => u32::MAX,
            (None, _, true) => {
                if ranked {
                    r.text.push_str(" · unranked");
                }
                last_place
            }
        };
        keys.push((key, r.label.clone()));
    }
    let order: std::collections::HashMap<String, u32> =
        keys.into_iter().map(|(k, l)| (l, k)).collect();
    rows.sort_by_key(|r| order.get(&r.label).copied().unwrap_or(u32::MAX));
}

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

fn rejected(c: &Cell) -> bool {
    c.verdict.status == Status::Rejected
}

fn without_summary(c: &Cell) -> bool {
    c.summary.is_none() || rejected(c)
}

/// `; 95% interval 119,118–122,099 req/s (±1.2%)` for a tooltip.
fn interval_words(c: &Cell) -> String {
    precision_interval(c).map_or(String::new(), |p| format!("; 95% interval {p}"))
}

/// `; places 2 to 3 of 5 (rank group by req/s)` for a tooltip.
fn rank_words(c: &Cell) -> String {
    c.rank.as_ref().map_or_else(
        || {
            if c.verdict.status == Status::Rejected {
                String::new()
            } else {
                "; unranked (fewer than 3 clean rounds, client-bound, or alone in its column): \
                 drawn where its figure falls"
                    .to_string()
            }
        },
        |r| {
            if r.low == r.high {
                format!("; place {} of {} by {}", r.low, r.of, r.by)
            } else {
                format!(
                    "; places {} to {} of {} by {}: the rounds cannot tell it from its neighbours",
                    r.low, r.high, r.of, r.by
                )
            }
        },
    )
}

/// Connections established (fewest over the rounds) of those asked for.
fn connections(c: &Cell) -> String {
    c.summary
        .as_ref()
        .map(|s| format!("{}/{}", s.connections_established_min, c.key.concurrency))
        .unwrap_or_else(|| format!("–/{}", c.key.concurrency))
}

/// Errors and non-2xx answers, with the error rate, and the requests due
/// at a fixed rate that were never sent.
fn errors_td(c: &Cell) -> Td {
    match (&c.summary, errors_text(c)) {
        (Some(s), Some(text)) => Td::num(&text, s.error_rate),
        _ => Td::text("–"),
    }
}

fn throughput_row(ctx: &Ctx<'_>, c: &Cell) -> (BarRow, Vec<Td>) {
    let s = c
        .summary
        .as_ref()
        .expect("a cell with a figure has a summary");
    let a = &s.throughput_rps;
    let row = BarRow {
        label: c.key.framework.clone(),
        values: vec![Some(a.median)],
        range: (a.n > 1).then_some((a.min, a.max)),
        mark: ctx.mark(c),
        text: format!(
            "{}{} req/s{}{}{}",
            floor_mark(c),
            thousands(a.median),
            precision_mark(c),
            rank_mark(c),
            ctx.marker(c)
        ),
        title: ctx.title(
            c,
            &format!(
                "{}{} req/s, median of {} round(s), {}–{}{}{}",
                floor_mark(c),
                thousands(a.median),
                a.n,
                thousands(a.min),
                thousands(a.max),
                interval_words(c),
                rank_words(c)
            ),
        ),
        link: ctx.link(c),
    };
    let tds = vec![
        Td::text(&c.key.framework),
        ctx.verdict_td(c),
        Td::num(&a.n.to_string(), a.n as f64),
        Td::num(&thousands(a.median), a.median),
        Td::num(&thousands(a.min), a.min),
        Td::num(&thousands(a.max), a.max),
        Td::num(&percent(a.cv), a.cv),
        errors_td(c),
        Td::text(&connections(c)),
    ];
    (row, tds)
}

fn latency_row(ctx: &Ctx<'_>, c: &Cell) -> (BarRow, Vec<Td>) {
    let s = c
        .summary
        .as_ref()
        .expect("a cell with a figure has a summary");
    let l = &s.latency;
    let achieved = achieved_rps(c);
    let at = achieved
        .map(|a| format!(" at {} req/s", thousands(a)))
        .unwrap_or_default();
    let row = BarRow {
        label: c.key.framework.clone(),
        values: vec![
            // Above the timeout has no bar length; the text says it.
            l.p50_us.map(|v| v as f64),
            l.p99_us.map(|v| v as f64),
            l.p999_us.map(|v| v as f64),
        ],
        range: None,
        mark: ctx.mark(c),
        text: format!(
            "p99 {}{}{at}{}{}",
            l.show(l.p99_us),
            // The text already says p99: its precision needs no label.
            c.precision
                .as_ref()
                .map_or(String::new(), |p| format!(" {}", p.label())),
            rank_mark(c),
            ctx.marker(c)
        ),
        title: ctx.title(
            c,
            &format!(
                "p50 {}, p99 {}, p99.9 {}{at}{}{}",
                l.show(l.p50_us),
                l.show(l.p99_us),
                l.show(l.p999_us),
                interval_words(c),
                rank_words(c)
            ),
        ),
        link: ctx.link(c),
    };
    let tds = vec![
        Td::text(&c.key.framework),
        ctx.verdict_td(c),
        Td::num(&c.rounds.len().to_string(), c.rounds.len() as f64),
        Td::latency(l, l.p50_us),
        Td::latency(l, l.p99_us),
        Td::latency(l, l.p999_us),
        Td::latency(l, l.max_us),
        Td::opt(achieved, thousands),
        Td::num(&percent(s.error_rate), s.error_rate),
        Td::num(
            &unsent(c).map_or("0".into(), |(n, due)| {
                format!(
                    "{} ({})",
                    thousands(n as f64),
                    percent(n as f64 / due as f64)
                )
            }),
            unsent(c).map_or(0.0, |(n, _)| n as f64),
        ),
    ];
    (row, tds)
}

fn cpu_row(ctx: &Ctx<'_>, c: &Cell) -> (BarRow, Vec<Td>) {
    let a = c
        .summary
        .as_ref()
        .and_then(|s| s.cpu_us_per_request.as_ref());
    // Database scenarios: the database's own CPU per response beside the
    // server's (medians over the rounds).
    let db: Vec<f64> = c
        .rounds
        .iter()
        .filter_map(|r| r.database.as_ref()?.cpu_us_per_request)
        .collect();
    let db = crate::stats::median(&db)
        .map(|m| format!(" + {} µs database", sig3(m)))
        .unwrap_or_default();
    let text = match a {
        Some(a) => format!("{} µs{db}{}", sig3(a.median), ctx.marker(c)),
        None => "– (no reading)".into(),
    };
    let row = BarRow {
        label: c.key.framework.clone(),
        values: vec![a.map(|a| a.median)],
        range: a.filter(|a| a.n > 1).map(|a| (a.min, a.max)),
        mark: ctx.mark(c),
        text: text.clone(),
        title: ctx.title(c, &format!("server CPU per request {text}")),
        link: ctx.link(c),
    };
    let tds = vec![
        Td::text(&c.key.framework),
        ctx.verdict_td(c),
        Td::opt(agg_median(a), |v| format!("{} µs", sig3(v))),
        Td::opt(a.map(|a| a.min), |v| format!("{} µs", sig3(v))),
        Td::opt(a.map(|a| a.max), |v| format!("{} µs", sig3(v))),
    ];
    (row, tds)
}

fn memory_row(ctx: &Ctx<'_>, c: &Cell) -> (BarRow, Vec<Td>) {
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
    let row = BarRow {
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
    };
    let tds = vec![
        Td::text(&c.key.framework),
        ctx.verdict_td(c),
        Td::opt(idle, bytes),
        Td::opt(under, bytes),
        Td::opt(peak, bytes),
    ];
    (row, tds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::RankGroup;

    fn row(label: &str, value: Option<f64>, mark: Mark) -> BarRow {
        BarRow {
            label: label.into(),
            values: vec![value],
            range: None,
            mark,
            text: String::new(),
            title: String::new(),
            link: None,
        }
    }

    #[test]
    fn an_unranked_cell_is_drawn_where_its_figure_falls_and_says_so() {
        // The standard page's case: actix-web (72,056 req/s) had too few
        // clean rounds for a rank and was drawn below fastapi (25,352).
        let r = crate::testdata::sample_results();
        let mut cells: Vec<Cell> = r.cells.iter().take(4).cloned().collect();
        let names = ["fast", "unranked", "slow", "broken"];
        for (c, n) in cells.iter_mut().zip(names) {
            c.key.framework = n.into();
            c.rank = None;
        }
        let group = |low, high| RankGroup {
            low,
            high,
            of: 2,
            by: "req/s".into(),
            pair_confidence: 0.95,
            paired: false,
        };
        cells[0].rank = Some(group(1, 1));
        cells[2].rank = Some(group(2, 2));
        let refs: Vec<&Cell> = cells.iter().collect();
        // In value order, as sort_rows leaves them.
        let mut rows = vec![
            row("fast", Some(100_000.0), Mark::Plain),
            row("unranked", Some(72_056.0), Mark::Flagged),
            row("slow", Some(25_352.0), Mark::Plain),
            row("broken", None, Mark::Rejected),
        ];
        rank_order(&mut rows, &refs);
        let order: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(order, ["fast", "unranked", "slow", "broken"]);
        assert!(rows[1].text.ends_with("unranked"), "{:?}", rows[1].text);
        assert!(!rows[0].text.contains("unranked"));
        // Groups still lead value order (a lower median in a better group
        // goes first: the paired rounds put it there); the unranked row
        // follows every ranked row with a higher figure.
        cells[0].rank = Some(group(2, 2));
        cells[2].rank = Some(group(1, 1));
        let refs: Vec<&Cell> = cells.iter().collect();
        let mut rows = vec![
            row("fast", Some(100_000.0), Mark::Plain),
            row("slow", Some(99_000.0), Mark::Plain),
            row("unranked", Some(72_056.0), Mark::Flagged),
        ];
        rank_order(&mut rows, &refs);
        let order: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(order, ["slow", "fast", "unranked"]);
    }
}
