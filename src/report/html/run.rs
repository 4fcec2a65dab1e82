//! report.html's content: a run laid out as a page. The headline per load
//! column (req/s by framework, or corrected latency at a fixed rate), the
//! latency percentile spectrum, throughput against concurrency, server CPU
//! per request, memory, a timeline per cell; the environment and limits;
//! every note; links to the run's other files.
//!
//! Figures and markers are the ones results.md shows (same note numbers,
//! ⚑ ✗ †); every chart has its numbers in a collapsed table below it. It
//! reads [`Results`] only; what each figure means is docs/results.md.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Context as _;

use super::charts::{
    self, bar_colours, esc, BarChart, BarRow, Mark, Series, Timeline, TimelineRound, YAxis,
};
use super::page::{legend, swatches, Figure, LegendItem, Page, Section};
use super::table::{Table, Td};
use crate::contract::Scenario;
use crate::report::fmt::{bytes, micros, percent, sig3, thousands};
use crate::report::view::{
    achieved_rps, latency_figure, noted, rejection_labels, rounds_from_median, Column, RunView,
};
use crate::results::{histogram, Cell, CheckStatus, Results, Status};
use crate::stats::Aggregate;

/// Everything the sections share.
struct Ctx<'a> {
    view: RunView<'a>,
    r: &'a Results,
    /// " †" after every figure when the environment was forced.
    dagger: &'static str,
    /// Style index per framework, so a framework keeps its colour in
    /// every line chart of the page.
    style: BTreeMap<&'a str, usize>,
}

impl<'a> Ctx<'a> {
    fn new(r: &'a Results) -> Ctx<'a> {
        let view = RunView::new(r);
        let style = view
            .frameworks()
            .into_iter()
            .enumerate()
            .map(|(i, f)| (f, i))
            .collect();
        Ctx {
            view,
            r,
            dagger: if r.environment.forced { " †" } else { "" },
            style,
        }
    }

    fn mark(&self, c: &Cell) -> Mark {
        match c.verdict.status {
            Status::Rejected => Mark::Rejected,
            _ if !noted(c).is_empty() => Mark::Flagged,
            _ => Mark::Plain,
        }
    }

    fn link(&self, c: &Cell) -> Option<String> {
        self.view.note(&c.key).map(|n| format!("#note-{n}"))
    }

    /// The marker after a figure, as plain text: ` ⚑1`, with † when forced.
    fn marker(&self, c: &Cell) -> String {
        let flag = match (self.mark(c), self.view.note(&c.key)) {
            (Mark::Flagged, Some(n)) => format!(" ⚑{n}"),
            _ => String::new(),
        };
        format!("{}{flag}", self.dagger)
    }

    /// The marker as HTML, the note number a link.
    fn marker_html(&self, c: &Cell) -> String {
        let flag = match (self.mark(c), self.view.note(&c.key)) {
            (Mark::Flagged, Some(n)) => {
                format!(" <a class=\"flagged\" href=\"#note-{n}\">⚑{n}</a>")
            }
            _ => String::new(),
        };
        format!("{}{flag}", self.dagger)
    }

    /// What a rejected cell shows instead of its number, plain text.
    fn rejected_text(&self, c: &Cell) -> String {
        let n = self
            .view
            .note(&c.key)
            .map(|n| format!(" [{n}]"))
            .unwrap_or_default();
        format!("✗ {}{n}", rejection_labels(c).join(", "))
    }

    fn rejected_html(&self, c: &Cell) -> String {
        let labels = esc(&rejection_labels(c).join(", "));
        match self.view.note(&c.key) {
            Some(n) => format!("<a class=\"rejected\" href=\"#note-{n}\">✗ {labels} [{n}]</a>"),
            None => format!("<span class=\"rejected\">✗ {labels}</span>"),
        }
    }

    /// Tooltip of a cell: what it is, its verdict and every reason.
    fn title(&self, c: &Cell, figure: &str) -> String {
        let mut t = format!("{}: {figure}", c.key);
        match c.verdict.status {
            Status::Accepted => t.push_str(" (accepted)"),
            s => {
                let _ = write!(t, "\n{s}:");
            }
        }
        for r in &c.verdict.reasons {
            let _ = write!(t, "\n• {r}");
        }
        t
    }

    /// Cells of `col` in framework order.
    fn cells(&self, col: Column) -> Vec<&'a Cell> {
        self.view
            .frameworks()
            .into_iter()
            .filter_map(|fw| self.view.find(fw, col))
            .collect()
    }

    /// A table row of a rejected cell: framework and verdict, `lead`, the
    /// reason in place of the figures, blanks, and `tail` last, `width`
    /// cells in all.
    fn rejected_cells(&self, c: &Cell, lead: Vec<Td>, tail: Vec<Td>, width: usize) -> Vec<Td> {
        let mut row = vec![Td::text(&c.key.framework), self.verdict_td(c)];
        row.extend(lead);
        row.push(Td::html(self.rejected_html(c)).class("rejected"));
        while row.len() + tail.len() < width {
            row.push(Td::text(""));
        }
        row.extend(tail);
        row
    }

    fn verdict_td(&self, c: &Cell) -> Td {
        let status = c.verdict.status.to_string();
        let html = match self.view.note(&c.key) {
            Some(n) => format!("{status} <a href=\"#note-{n}\">[{n}]</a>"),
            None => status.clone(),
        };
        Td::html(html).class(&status)
    }
}

/// Bytes in a MiB.
const MIB: f64 = 1024.0 * 1024.0;

/// The median of an aggregate, if there is one.
fn agg_median(a: Option<&Aggregate>) -> Option<f64> {
    a.map(|a| a.median)
}

/// The report page of `r`.
pub fn page(r: &Results) -> anyhow::Result<String> {
    let ctx = Ctx::new(r);
    let mut sections = vec![summary(&ctx)];
    for scenario in r.scenarios() {
        sections.push(scenario_section(&ctx, scenario)?);
    }
    sections.push(environment(&ctx));
    sections.push(notes(&ctx));
    sections.push(files(&ctx));
    Ok(Page {
        title: format!("fairground results: {} ({})", r.profile_name, r.run_id),
        header: header(&ctx),
        sections,
        footer: format!(
            "<p>Written by fairground {} from results.json of run <code>{}</code>. \
             One file: no fonts, styles or scripts are fetched; the charts are inline SVG \
             drawn with plotters. docs/results.md explains every figure and gate.</p>\n",
            esc(&r.fairground_version),
            esc(&r.run_id)
        ),
    }
    .render())
}

fn header(ctx: &Ctx<'_>) -> String {
    let r = ctx.r;
    let mut s = format!(
        "<h1>fairground results: profile <code>{}</code></h1>\n<p class=\"meta\">Run <code>{}</code>, fairground {}. Started {}",
        esc(&r.profile_name),
        esc(&r.run_id),
        esc(&r.fairground_version),
        r.started_at.format("%Y-%m-%d %H:%M:%S UTC")
    );
    match r.finished_at {
        Some(end) => {
            let mins = (end - r.started_at).num_seconds() as f64 / 60.0;
            let _ = write!(
                s,
                ", finished {} ({mins:.0} min).",
                end.format("%Y-%m-%d %H:%M:%S UTC")
            );
        }
        None => s.push_str("; not finished."),
    }
    let _ = writeln!(
        s,
        "</p>\n<p>Cells: {} planned, {} measured: <span class=\"count-accepted\">{} accepted</span>, \
         <span class=\"count-flagged\">{} flagged</span>, <span class=\"count-rejected\">{} rejected</span>.</p>",
        r.plan.len(),
        r.cells.len(),
        ctx.view.count(Status::Accepted),
        ctx.view.count(Status::Flagged),
        ctx.view.count(Status::Rejected)
    );
    let left = r.remaining();
    if r.interrupted || !left.is_empty() {
        let _ = writeln!(
            s,
            "<p class=\"banner\"><strong>Incomplete</strong>: {} planned cell(s) were not measured{} (listed under Notes).</p>",
            left.len(),
            if r.interrupted { "; the run was interrupted" } else { "" }
        );
    }
    if r.environment.forced {
        s.push_str(
            "<p class=\"banner\"><strong>† Environment NOT accepted.</strong> Preflight failed and the run \
             went ahead anyway (<code>--accept-env</code>, or the profile's <code>preflight: warn</code>). \
             Every figure is marked † and flagged; do not compare it with results from an accepted \
             environment.</p>\n",
        );
    }
    let _ = writeln!(
        s,
        "<div class=\"markers\"><p><strong>How to read it.</strong> {} req/s counts 2xx responses \
         only, per second of the measured window; whiskers span the lowest to the highest round. \
         Latency percentiles come from every round's HDR histogram merged, measured from the send \
         (from the scheduled send at a fixed rate: no coordinated omission). Server CPU and memory \
         are the server container's cgroup, sampled every 250 ms in the window.</p>\n\
         <p><strong>⚑</strong> flagged: the number is real, read its note before comparing. \
         <strong>✗</strong> rejected: not a valid measurement; its reason replaces the number. \
         <strong>†</strong> environment not accepted. Hover a bar or line for its verdict; \
         numbers link to their notes.</p></div>",
        rounds_sentence(r)
    );
    s
}

/// Which figures are medians of how many rounds.
fn rounds_sentence(r: &Results) -> String {
    let mut planned: Vec<u32> = r.cells.iter().map(|c| c.rounds_planned).collect();
    planned.sort_unstable();
    planned.dedup();
    match planned.as_slice() {
        [] => "No cell was measured.".into(),
        [1] => "Each cell ran 1 round: its figures are that round's, with no spread.".into(),
        [n] => format!(
            "Each figure is the median of its cell's {n} rounds (a cell that lost rounds is flagged \
             “incomplete”; the tables give each cell's count)."
        ),
        many => format!(
            "Each figure is the median of its cell's rounds ({} planned; the tables give each cell's count).",
            many.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" or ")
        ),
    }
}

fn col_title(col: Column) -> String {
    match col.rate {
        Some(rate) => format!(
            "{} connections at a fixed {} req/s",
            thousands(f64::from(col.concurrency)),
            thousands(rate as f64)
        ),
        None => format!("{} connections", thousands(f64::from(col.concurrency))),
    }
}

// ------------------------------------------------------------- summary ----

fn summary(ctx: &Ctx<'_>) -> Section {
    let (fixed, closed): (Vec<Column>, Vec<Column>) = ctx
        .view
        .columns(None)
        .into_iter()
        .partition(Column::fixed_rate);
    let mut body = String::new();
    if !closed.is_empty() {
        body.push_str("<p>req/s, the median of each cell's rounds. Click a heading to sort.</p>\n");
        body.push_str(&summary_table(ctx, &closed, |c| {
            c.summary
                .as_ref()
                .map(|s| (thousands(s.throughput_rps.median), s.throughput_rps.median))
        }));
    }
    if !fixed.is_empty() {
        body.push_str(
            "<p>Latency at a fixed rate: p50 / p99 / p99.9 from each request's scheduled send \
             (no coordinated omission), all rounds merged, then the rate achieved (median of \
             rounds). Every framework that keeps up shows the target as its req/s, so latency is \
             what ranks them; the table sorts by p99.</p>\n",
        );
        body.push_str(&summary_table(ctx, &fixed, |c| {
            let p99 = c.summary.as_ref()?.latency.p99_us as f64;
            Some((latency_figure(c)?, p99))
        }));
    }
    Section {
        id: "summary".into(),
        heading: "Summary".into(),
        body,
    }
}

fn summary_table(
    ctx: &Ctx<'_>,
    cols: &[Column],
    figure: impl Fn(&Cell) -> Option<(String, f64)>,
) -> String {
    let mut head = vec!["framework".to_string()];
    head.extend(cols.iter().map(|c| c.label()));
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut t = Table::new(&head);
    for fw in ctx.view.frameworks() {
        let mut row = vec![Td::text(fw)];
        for col in cols {
            row.push(match ctx.view.find(fw, *col) {
                Some(c) if c.verdict.status == Status::Rejected => {
                    Td::html(ctx.rejected_html(c)).class("rejected")
                }
                Some(c) => match figure(c) {
                    Some((text, v)) => {
                        let class = if ctx.mark(c) == Mark::Flagged {
                            "flagged"
                        } else {
                            ""
                        };
                        Td::html(format!("{}{}", esc(&text), ctx.marker_html(c)))
                            .class("num")
                            .class(class)
                            .sorted(v)
                    }
                    None => Td::text("–"),
                },
                None => Td::text(ctx.view.missing(fw, *col).text()),
            });
        }
        t.row(row);
    }
    t.render()
}

// ------------------------------------------------------------ scenario ----

fn scenario_section(ctx: &Ctx<'_>, scenario: Scenario) -> anyhow::Result<Section> {
    let cols = ctx.view.columns(Some(scenario));
    let mut body = String::new();
    let closed: Vec<Column> = cols.iter().copied().filter(|c| !c.fixed_rate()).collect();
    if closed.len() > 1 {
        body.push_str(&scaling(ctx, scenario, &closed)?);
    }
    for col in cols {
        let _ = writeln!(
            body,
            "<h3 id=\"{}\">{} · {}</h3>",
            esc(&col.slug()),
            esc(&scenario.to_string()),
            esc(&col_title(col))
        );
        let skipped: Vec<String> = ctx
            .view
            .frameworks()
            .into_iter()
            .filter(|fw| ctx.view.find(fw, col).is_none())
            .map(|fw| match ctx.view.skipped_reason(fw, scenario) {
                Some(why) => format!("{} (skipped: {})", esc(fw), esc(why)),
                None => format!("{} ({})", esc(fw), ctx.view.missing(fw, col).text()),
            })
            .collect();
        if !skipped.is_empty() {
            let _ = writeln!(
                body,
                "<p class=\"muted\">Not in these charts: {}.</p>",
                skipped.join("; ")
            );
        }
        if col.fixed_rate() {
            body.push_str(&latency_bars(ctx, col)?);
        } else {
            body.push_str(&throughput_bars(ctx, col)?);
        }
        body.push_str(&spectrum(ctx, col)?);
        body.push_str(&cpu_bars(ctx, col)?);
        body.push_str(&memory_bars(ctx, col)?);
        body.push_str(&timelines(ctx, col)?);
    }
    Ok(Section {
        id: format!("scenario-{scenario}"),
        heading: scenario.to_string(),
        body,
    })
}

/// Footnotes under a chart: its flagged and rejected cells, linked to
/// their notes.
fn footnotes(ctx: &Ctx<'_>, cells: &[&Cell], rejected_drawn: bool) -> String {
    footnotes_named(ctx, cells, rejected_drawn, |c| c.key.framework.clone())
}

fn footnotes_named(
    ctx: &Ctx<'_>,
    cells: &[&Cell],
    rejected_drawn: bool,
    name: impl Fn(&Cell) -> String,
) -> String {
    let mut s = String::new();
    let flagged: Vec<String> = cells
        .iter()
        .filter(|c| ctx.mark(c) == Mark::Flagged)
        .map(|c| {
            let labels: Vec<&str> = c
                .verdict
                .labels(true)
                .into_iter()
                .filter(|l| *l != crate::results::Reason::EnvironmentNotAccepted.label())
                .collect();
            let n = ctx.view.note(&c.key).unwrap_or(0);
            format!(
                "<a href=\"#note-{n}\">⚑{n}</a> {}: {}",
                esc(&name(c)),
                esc(&labels.join(", "))
            )
        })
        .collect();
    if !flagged.is_empty() {
        let _ = writeln!(
            s,
            "<p class=\"footnote flagged\">Flagged (the number stands, read the note first): {}.</p>",
            flagged.join("; ")
        );
    }
    let rejected: Vec<String> = cells
        .iter()
        .filter(|c| c.verdict.status == Status::Rejected)
        .map(|c| format!("{} {}", esc(&name(c)), ctx.rejected_html(c)))
        .collect();
    if !rejected.is_empty() {
        let _ = writeln!(
            s,
            "<p class=\"footnote rejected\">Rejected ({}): {}.</p>",
            if rejected_drawn {
                "no bar: the reason replaces the number"
            } else {
                "not drawn: not a valid measurement"
            },
            rejected.join("; ")
        );
    }
    s
}

/// Rows in order: valid values by `better` (descending when `desc`), then
/// rows without a value, then rejected rows.
fn sort_rows(rows: &mut [BarRow], desc: bool, key: impl Fn(&BarRow) -> Option<f64>) {
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

fn rejected_row(ctx: &Ctx<'_>, c: &Cell, series: usize) -> BarRow {
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

fn throughput_bars(ctx: &Ctx<'_>, col: Column) -> anyhow::Result<String> {
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
fn latency_bars(ctx: &Ctx<'_>, col: Column) -> anyhow::Result<String> {
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
                        Some(l.p50_us as f64),
                        Some(l.p99_us as f64),
                        Some(l.p999_us as f64),
                    ],
                    range: None,
                    mark: ctx.mark(c),
                    text: format!("p99 {}{at}{}", micros(l.p99_us as f64), ctx.marker(c)),
                    title: ctx.title(
                        c,
                        &format!(
                            "p50 {}, p99 {}, p99.9 {}{at}",
                            micros(l.p50_us as f64),
                            micros(l.p99_us as f64),
                            micros(l.p999_us as f64)
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
                        Td::num(&micros(l.p50_us as f64), l.p50_us as f64),
                        Td::num(&micros(l.p99_us as f64), l.p99_us as f64),
                        Td::num(&micros(l.p999_us as f64), l.p999_us as f64),
                        Td::num(&micros(l.max_us as f64), l.max_us as f64),
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

fn spectrum(ctx: &Ctx<'_>, col: Column) -> anyhow::Result<String> {
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
            .map(|x| (x, Some(h.value_at_quantile(1.0 - 1.0 / x).max(1) as f64)))
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
                    micros(l.p50_us as f64),
                    micros(l.p99_us as f64),
                    micros(l.p999_us as f64),
                    micros(l.max_us as f64)
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
                Td::num(&micros(l.p50_us as f64), l.p50_us as f64),
                Td::num(&micros(l.p90_us as f64), l.p90_us as f64),
                Td::num(&micros(l.p99_us as f64), l.p99_us as f64),
                Td::num(&micros(l.p999_us as f64), l.p999_us as f64),
                Td::num(&micros(l.max_us as f64), l.max_us as f64),
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
        caption: format!(
            "Latency percentile spectrum <span class=\"sub\">(lower is better; {from}, all rounds merged; \
             each line stops where its sample count runs out)</span>"
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
fn scaling(ctx: &Ctx<'_>, scenario: Scenario, cols: &[Column]) -> anyhow::Result<String> {
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
                            Td::html(format!("{}{}", thousands(v), ctx.marker_html(c)))
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
        caption:
            "Throughput against concurrency <span class=\"sub\">(req/s, median of rounds; hollow \
                  points flagged; a gap is a rejected cell)</span>"
                .into(),
        svg,
        legend: legend(&items),
        notes: footnotes_named(ctx, &all, false, |c| {
            format!("{} c={}", c.key.framework, c.key.concurrency)
        }),
        numbers: t.render(),
        ..Figure::default()
    }
    .render())
}

fn cpu_bars(ctx: &Ctx<'_>, col: Column) -> anyhow::Result<String> {
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

fn memory_bars(ctx: &Ctx<'_>, col: Column) -> anyhow::Result<String> {
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

/// A small timeline per cell: req/s per second, one line per round, the
/// measured window shaded.
fn timelines(ctx: &Ctx<'_>, col: Column) -> anyhow::Result<String> {
    let cells: Vec<&Cell> = ctx
        .cells(col)
        .into_iter()
        .filter(|c| !c.rounds.is_empty())
        .collect();
    if cells.is_empty() {
        return Ok(String::new());
    }
    let mut s = String::from(
        "<h4>Timelines <span class=\"muted\">(2xx req/s per second over the warm-up and the \
         measured window, which is shaded)</span></h4>\n",
    );
    let rounds_max = cells.iter().map(|c| c.rounds.len()).max().unwrap_or(0);
    let names: Vec<String> = (1..=rounds_max).map(|i| format!("round {i}")).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let colours: Vec<_> = (0..rounds_max).map(|i| charts::series_style(i).0).collect();
    s.push_str(&swatches(&name_refs, &colours));
    s.push_str("<div class=\"grid\">\n");
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
            Status::Flagged => format!(
                "<span class=\"flagged\">flagged</span>{}",
                ctx.marker_html(c)
            ),
            Status::Accepted => format!("accepted{}", ctx.dagger),
        };
        s.push_str(
            &Figure {
                caption: format!(
                    "{} <span class=\"sub\">{verdict}</span>",
                    esc(&c.key.framework)
                ),
                svg,
                numbers: t.render(),
                class: "small",
                ..Figure::default()
            }
            .render(),
        );
    }
    s.push_str("</div>\n");
    Ok(s)
}

// --------------------------------------------------------- environment ----

fn environment(ctx: &Ctx<'_>) -> Section {
    let r = ctx.r;
    let env = &r.environment;
    let mut s = String::new();
    s.push_str(match (env.status, env.forced) {
        (CheckStatus::Fail, true) => {
            "<p class=\"banner\"><strong>† Environment NOT accepted</strong>: preflight failed and the run went ahead anyway.</p>\n"
        }
        (CheckStatus::Fail, false) => {
            "<p class=\"banner\">Preflight: <strong>fail</strong>. These results were not produced by a run that passed preflight.</p>\n"
        }
        (CheckStatus::Warn, _) => {
            "<p>Preflight: <strong class=\"warn\">warn</strong>: the results stand; the warnings below are worth knowing.</p>\n"
        }
        (CheckStatus::Pass, _) => "<p>Preflight: <strong class=\"pass\">pass</strong>.</p>\n",
    });
    if !env.checks.is_empty() {
        let mut t = Table::new(&["check", "verdict", "measured", "threshold", "remedy"]);
        for c in &env.checks {
            let status = c.status.to_string();
            t.row_with_class(
                &status,
                vec![
                    Td::text(&c.name),
                    Td::text(&status).class("verdict"),
                    Td::text(&c.measured),
                    Td::text(&c.threshold),
                    Td::text(c.remedy.as_deref().unwrap_or("")),
                ],
            );
        }
        s.push_str(&t.render());
    }
    s.push_str(
        "<h3>Limits as applied</h3>\n<p>Read back from the Docker daemon on each running server \
         container (not the profile's request).</p>\n",
    );
    let mut t = Table::new(&[
        "framework",
        "name",
        "language",
        "CPUs",
        "cpuset",
        "memory",
        "memory + swap",
        "open files",
    ]);
    for f in &r.frameworks {
        let l = f.limits.as_ref();
        t.row(vec![
            Td::text(&f.name),
            Td::text(&f.display_name),
            Td::text(&f.language),
            Td::opt(l.and_then(|l| l.cpus), |v| format!("{v}")),
            Td::text(l.and_then(|l| l.cpuset.as_deref()).unwrap_or("–")),
            Td::opt(l.and_then(|l| l.memory_bytes).map(|m| m as f64), bytes),
            Td::opt(l.and_then(|l| l.memory_swap_bytes).map(|b| b as f64), bytes),
            Td::opt(l.and_then(|l| l.nofile_soft).map(|n| n as f64), thousands),
        ]);
    }
    s.push_str(&t.render());
    let th = &r.thresholds;
    let _ = writeln!(
        s,
        "<h3>Gates applied</h3>\n<p>Rejected when connections established &lt; requested, error rate &gt; {}, \
         an OOM kill or crash, or a failed contract verification; flagged when the loader used ≥ {} of its \
         CPU or was throttled in more than {} of scheduler periods, achieved &lt; {} of a fixed target rate, \
         lagged its schedule by more than {}, the CV of req/s across rounds exceeded {}, a round was more \
         than {} from the median, or other processes used more than {:.2} CPU cores on the host.</p>",
        percent(th.max_error_rate),
        percent(th.loader_saturation),
        percent(th.max_loader_throttled),
        percent(th.min_rate_ratio),
        micros(th.max_schedule_lag_us as f64),
        percent(th.max_cv),
        percent(th.suspect_round),
        th.max_foreign_cores
    );
    let profile = serde_json::to_string_pretty(&r.profile).unwrap_or_default();
    let _ = writeln!(
        s,
        "<details><summary>The profile as run (defaults filled in)</summary>\n<pre>{}</pre></details>",
        esc(&profile)
    );
    Section {
        id: "environment".into(),
        heading: "Environment and limits".into(),
        body: s,
    }
}

// --------------------------------------------------------------- notes ----

fn notes(ctx: &Ctx<'_>) -> Section {
    let r = ctx.r;
    let mut s = String::new();
    let ordered = ctx.view.notes_in_order();
    if ordered.is_empty() {
        s.push_str("<p>No cell was flagged or rejected.</p>\n");
    } else {
        s.push_str("<ol class=\"notes\">\n");
        for (n, key) in ordered {
            let Some(c) = r.cell(key) else { continue };
            let _ = write!(
                s,
                "<li id=\"note-{n}\" value=\"{n}\" class=\"{}\"><strong>{}: {}</strong><ul>",
                c.verdict.status,
                esc(&key.to_string()),
                c.verdict.status
            );
            for reason in noted(c) {
                let _ = write!(s, "<li>{}</li>", esc(&reason.to_string()));
            }
            if let Some(rounds) = rounds_from_median(c) {
                let _ = write!(s, "<li>req/s per round: {}</li>", esc(&rounds));
            }
            s.push_str("</ul></li>\n");
        }
        s.push_str("</ol>\n");
    }
    let excluded = ctx.view.exclusions();
    if !excluded.is_empty() {
        s.push_str("<h3>Excluded by contract verification</h3>\n");
        let mut t = Table::new(&["framework", "scenario", "what verify found"]);
        for (f, e) in excluded {
            t.row(vec![
                Td::text(&f.name),
                Td::text(&e.scenario.to_string()),
                Td::text(&e.reason),
            ]);
        }
        s.push_str(&t.render());
    }
    let failed: Vec<_> = r
        .frameworks
        .iter()
        .filter(|f| f.failure.is_some())
        .collect();
    if !failed.is_empty() {
        s.push_str("<h3>Frameworks that produced no results</h3>\n");
        let mut t = Table::new(&["framework", "why"]);
        for f in failed {
            t.row(vec![
                Td::text(&f.name),
                Td::text(f.failure.as_deref().unwrap_or("")),
            ]);
        }
        s.push_str(&t.render());
    }
    if !r.skipped.is_empty() {
        s.push_str("<h3>Skipped</h3>\n");
        let mut t = Table::new(&["framework", "scenario", "reason"]);
        for k in &r.skipped {
            t.row(vec![
                Td::text(&k.framework),
                Td::text(
                    &k.scenario
                        .map(|x| x.to_string())
                        .unwrap_or_else(|| "all".into()),
                ),
                Td::text(&k.reason),
            ]);
        }
        s.push_str(&t.render());
    }
    if !r.incidents.is_empty() {
        s.push_str("<h3>Incidents</h3>\n<p>What went wrong during the run and was recorded.</p>\n");
        let mut t = Table::new(&["time (UTC)", "framework", "cell", "round", "what"]);
        for i in &r.incidents {
            t.row(vec![
                Td::text(&i.at.format("%H:%M:%S").to_string()),
                Td::text(&i.framework),
                Td::text(&i.cell.as_ref().map(|k| k.to_string()).unwrap_or_default()),
                Td::text(&i.round.map(|n| (n + 1).to_string()).unwrap_or_default()),
                Td::text(&i.what),
            ]);
        }
        s.push_str(&t.render());
    }
    let left = r.remaining();
    if !left.is_empty() {
        s.push_str(
            "<h3>Not measured</h3>\n<p>Planned but not measured (resume with \
             <code>fairground run --resume &lt;this directory&gt;</code>):</p>\n<ul>",
        );
        for k in left {
            let _ = write!(s, "<li>{}</li>", esc(&k.to_string()));
        }
        s.push_str("</ul>\n");
    }
    Section {
        id: "notes".into(),
        heading: "Notes".into(),
        body: s,
    }
}

// --------------------------------------------------------------- files ----

fn files(ctx: &Ctx<'_>) -> Section {
    let mut s = String::from(
        "<p>Beside this page in the run directory (relative links):</p>\n<ul>\n\
         <li><a href=\"results.md\">results.md</a>: the tables to read and publish</li>\n\
         <li><a href=\"stats.md\">stats.md</a>: what each framework costs</li>\n\
         <li><a href=\"results.json\">results.json</a>: everything, every raw round</li>\n\
         <li><a href=\"results.csv\">results.csv</a>: one row per cell and round</li>\n\
         <li><a href=\"SHA256SUMS\">SHA256SUMS</a>: checksums of every file (this one included)</li>\n\
         <li><a href=\"logs/\">logs/</a>: each server container's log tail</li>\n</ul>\n",
    );
    let hgrm: Vec<String> = ctx
        .r
        .cells
        .iter()
        .filter(|c| c.summary.is_some())
        .map(|c| {
            let f = format!("hgrm/{}.hgrm", c.key.stem());
            format!("<li><a href=\"{0}\">{0}</a></li>", esc(&f))
        })
        .collect();
    if !hgrm.is_empty() {
        let _ = writeln!(
            s,
            "<details><summary>Latency histograms, HdrHistogram percentile format (ms), one per cell ({})</summary>\n<ul>\n{}\n</ul></details>",
            hgrm.len(),
            hgrm.join("\n")
        );
    }
    Section {
        id: "files".into(),
        heading: "Files".into(),
        body: s,
    }
}
