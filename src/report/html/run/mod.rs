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
use maud::{display, html, Markup};

use super::charts::{
    self, bar_colours, BarChart, BarRow, Mark, Series, Timeline, TimelineRound, YAxis,
};
use super::page::{legend, swatches, Figure, LegendItem, Page, Section};
use super::table::{Table, Td};
use crate::contract::Scenario;
use crate::report::fmt::{bytes, micros, percent, sig3, thousands};
use crate::report::view::{
    achieved_rps, errors_text, floor_mark, latency_figure, noted, precision_interval,
    precision_mark, rank_mark, rejection_labels, unsent, Column, RunView,
};
use crate::results::{histogram, Cell, CheckStatus, Results, Status};
use crate::stats::Aggregate;

mod bars;
mod lines;
mod sections;

use bars::{bars, CPU, LATENCY, MEMORY, THROUGHPUT};
use lines::{scaling, spectrum, timelines};
use sections::{environment, files, hosts, notes};

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
    fn marker_html(&self, c: &Cell) -> Markup {
        html! {
            (self.dagger)
            @if let (Mark::Flagged, Some(n)) = (self.mark(c), self.view.note(&c.key)) {
                " " a class="flagged" href={ "#note-" (n) } { "⚑" (n) }
            }
        }
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

    fn rejected_html(&self, c: &Cell) -> Markup {
        let labels = rejection_labels(c).join(", ");
        html! {
            @match self.view.note(&c.key) {
                Some(n) => a class="rejected" href={ "#note-" (n) } { "✗ " (labels) " [" (n) "]" },
                None => span class="rejected" { "✗ " (labels) },
            }
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
            let _ = write!(t, "\n• {}", c.key.scenario.in_own_words(&r.to_string()));
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
        let html = html! {
            (status)
            @if let Some(n) = self.view.note(&c.key) {
                " " a href={ "#note-" (n) } { "[" (n) "]" }
            }
        };
        Td::html(html).class(&status)
    }
}

/// A figure's caption: its title, and in a smaller hand the words in
/// brackets after it.
fn caption(title: &str, sub: &str) -> Markup {
    html! { (title) " " span class="sub" { "(" (sub) ")" } }
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
    if !r.objectives.is_empty() {
        sections.push(objectives(r));
    }
    for scenario in r.scenarios() {
        sections.push(scenario_section(&ctx, scenario)?);
    }
    sections.push(environment(&ctx));
    if let Some(t) = &r.topology {
        sections.push(hosts(t));
    }
    sections.push(notes(&ctx));
    sections.push(files(&ctx));
    Ok(Page {
        title: format!("fairground results: {} ({})", r.profile_name, r.run_id),
        header: header(&ctx),
        sections,
        footer: html! {
            p {
                "Written by fairground " (r.fairground_version) " from results.json of run "
                code { (r.run_id) }
                ". One file: no fonts, styles or scripts are fetched; the charts are inline SVG \
                 drawn with plotters. docs/results.md explains every figure and gate."
            }
        },
    }
    .render())
}

fn header(ctx: &Ctx<'_>) -> Markup {
    let r = ctx.r;
    let left = r.remaining();
    html! {
        h1 { "fairground results: profile " code { (r.profile_name) } }
        p class="meta" {
            "Run " code { (r.run_id) } ", fairground " (r.fairground_version) ". Started "
            (display(r.started_at.format("%Y-%m-%d %H:%M:%S UTC")))
            @match r.finished_at {
                Some(end) => {
                    ", finished " (display(end.format("%Y-%m-%d %H:%M:%S UTC"))) " ("
                    (format!("{:.0}", (end - r.started_at).num_seconds() as f64 / 60.0)) " min)."
                }
                None => "; not finished.",
            }
        }
        p {
            "Cells: " (r.plan.len()) " planned, " (r.cells.len()) " measured: "
            span class="count-accepted" { (ctx.view.count(Status::Accepted)) " accepted" } ", "
            span class="count-flagged" { (ctx.view.count(Status::Flagged)) " flagged" } ", "
            span class="count-rejected" { (ctx.view.count(Status::Rejected)) " rejected" } "."
        }
        @if let Some(p) = &r.precision {
            p class="precision" { strong { "Precision" } ": " (p.sentence()) "." }
        }
        @if let Some(b) = &r.budget {
            p class="budget" { strong { "Time" } ": " (b.sentence()) "." }
        }
        @if r.interrupted || !left.is_empty() {
            p class="banner" {
                strong { "Incomplete" } ": " (left.len()) " planned cell(s) were not measured"
                @if r.interrupted { "; the run was interrupted" }
                " (listed under Notes)."
            }
        }
        @if r.environment.forced {
            p class="banner" {
                strong { "† Environment NOT accepted." }
                " Preflight failed and the run went ahead anyway (" code { "--accept-env" }
                ", or the profile's " code { "preflight: warn" } "). Every figure is marked † \
                 and flagged; do not compare it with results from an accepted environment."
            }
        }
        div class="markers" {
            p {
                strong { "How to read it." } " " (rounds_sentence(r)) " req/s counts 2xx responses \
                 only, per second of the measured window"
                (if r.profile.scenarios.iter().any(|s| s.is_websocket()) {
                    " (msg/s, of a WebSocket scenario, counts echoes equal to the message sent; \
                     pings/s, of ws-idle, pongs carrying the ping's payload)"
                } else {
                    ""
                })
                (if r.profile.scenarios.iter().any(|s| s.is_grpc()) {
                    " (rpc/s, of a gRPC scenario, counts calls answered with grpc-status 0 and \
                     the reply asked for)"
                } else {
                    ""
                })
                "; whiskers span the lowest to the highest \
                 round. Latency percentiles come from every round's HDR histogram merged, measured \
                 from the send (from the scheduled send at a fixed rate: no coordinated omission). \
                 Server CPU and memory are the server container's cgroup, sampled every 250 ms in \
                 the window."
            }
            p {
                strong { "⚑" } " flagged: the number is real, read its note before comparing. "
                strong { "✗" } " rejected: not a valid measurement; its reason replaces the number. "
                strong { "†" } " environment not accepted. Hover a bar or line for its verdict; \
                 numbers link to their notes."
            }
        }
    }
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
    let title = col_load(col);
    if col.protocol.is_http1() {
        title
    } else {
        format!("{}, {title}", col.protocol)
    }
}

fn col_load(col: Column) -> String {
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

/// The objectives table, the same rows as results.md's.
fn objectives(r: &Results) -> Section {
    use crate::report::view::{
        objective_rows, objectives_tally, OBJECTIVES_METHOD, OBJECTIVE_HEAD,
    };
    use crate::results::ObjectiveStatus;
    let mut t = Table::new(&OBJECTIVE_HEAD);
    for row in objective_rows(r) {
        let class = match row.status {
            ObjectiveStatus::Met => "",
            ObjectiveStatus::Missed => "rejected",
            ObjectiveStatus::Undecided => "flagged",
        };
        t.row_with_class(
            class,
            vec![
                Td::html(html! { code { (row.objective) } }),
                Td::text(row.framework),
                Td::text(&row.column),
                Td::html(html! { strong { (row.verdict) } }),
                Td::text(&row.interval),
                Td::text(row.why),
            ],
        );
    }
    // The method paragraph is Markdown-flavoured: only its ** and ` marks.
    Section {
        id: "objectives".into(),
        heading: format!("Objectives: {}", objectives_tally(r)),
        body: html! { p { (bold_and_code(OBJECTIVES_METHOD)) } (t.render()) },
    }
}

/// `**x**` → `<strong>x</strong>` and `` `x` `` → `<code>x</code>`, the
/// text itself escaped.
fn bold_and_code(s: &str) -> Markup {
    html! {
        @for (i, part) in s.split("**").enumerate() {
            @let inner = html! {
                @for (j, p) in part.split('`').enumerate() {
                    @if j % 2 == 1 { code { (p) } } @else { (p) }
                }
            };
            @if i % 2 == 1 { strong { (inner) } } @else { (inner) }
        }
    }
}

fn summary(ctx: &Ctx<'_>) -> Section {
    let (fixed, closed): (Vec<Column>, Vec<Column>) = ctx
        .view
        .columns(None)
        .into_iter()
        .partition(Column::fixed_rate);
    let body = html! {
        @if !closed.is_empty() {
            p {
                (crate::report::view::rate_words(
                    &closed.iter().map(|c| c.scenario).collect::<Vec<_>>()
                ))
                ", the median of each cell's rounds. Click a heading to sort. #N is the \
                 cell's rank group in its column: frameworks whose rounds cannot be told apart \
                 share places (#1–3). ±N% is the half-width of the 95% interval of the figure \
                 over the cell's rounds (hover it for the interval); none below 3 rounds."
            }
            (summary_table(ctx, &closed, |c| {
                c.summary
                    .as_ref()
                    .map(|s| (thousands(s.throughput_rps.median), s.throughput_rps.median))
            }))
        }
        @if !fixed.is_empty() {
            p {
                "Latency at a fixed rate: p50 / p99 / p99.9 from each request's scheduled send \
                 (no coordinated omission), all rounds merged, then the rate achieved (median of \
                 rounds). Every framework that keeps up shows the target as its req/s, so latency \
                 is what ranks them; the table sorts by p99."
            }
            (summary_table(ctx, &fixed, |c| {
                let l = &c.summary.as_ref()?.latency;
                let p99 = l.rank_value(l.p99_us)?;
                Some((latency_figure(c)?, p99))
            }))
        }
    };
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
) -> Markup {
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
                        let html = html! {
                            (text)
                            @if let Some(range) = precision_interval(c) {
                                " "
                                span class="ci" title={ "95% interval: " (range) } {
                                    (precision_mark(c).trim())
                                }
                            }
                            @if let Some(r) = &c.rank {
                                " "
                                span class="rank" title=(format!(
                                    "rank group by {}: places {} to {} of {}; frameworks whose \
                                     rounds cannot be told apart share places",
                                    r.by, r.low, r.high, r.of
                                )) { (r.label()) }
                            }
                            (ctx.marker_html(c))
                        };
                        Td::html(html).class("num").class(class).sorted(v)
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
    let mut parts: Vec<Markup> = Vec::new();
    // One scaling chart per protocol: connections are the x axis, so two
    // protocols' cells at one count must not share a line.
    let mut protocols = Vec::new();
    for c in &cols {
        if !protocols.contains(&c.protocol) {
            protocols.push(c.protocol);
        }
    }
    for protocol in protocols {
        let closed: Vec<Column> = cols
            .iter()
            .copied()
            .filter(|c| !c.fixed_rate() && c.protocol == protocol)
            .collect();
        if closed.len() > 1 {
            parts.push(scaling(ctx, scenario, &closed)?);
        }
    }
    for col in cols {
        let missing: Vec<String> = ctx
            .view
            .frameworks()
            .into_iter()
            .filter(|fw| ctx.view.find(fw, col).is_none())
            .map(|fw| match ctx.view.skipped_reason(fw, col) {
                Some(why) => format!("{fw} (skipped: {why})"),
                None => format!("{fw} ({})", ctx.view.missing(fw, col).text()),
            })
            .collect();
        parts.push(html! {
            h3 id=(col.slug()) { (display(scenario)) " · " (col_title(col)) }
            @if !missing.is_empty() {
                p class="muted" { "Not in these charts: " (missing.join("; ")) "." }
            }
        });
        parts.push(bars(
            ctx,
            col,
            if col.fixed_rate() {
                &LATENCY
            } else {
                &THROUGHPUT
            },
        )?);
        parts.push(spectrum(ctx, col)?);
        parts.push(bars(ctx, col, &CPU)?);
        parts.push(bars(ctx, col, &MEMORY)?);
        parts.push(timelines(ctx, col)?);
    }
    Ok(Section {
        id: format!("scenario-{scenario}"),
        heading: scenario.to_string(),
        body: html! { @for p in &parts { (p) } },
    })
}

/// Footnotes under a chart: its flagged and rejected cells, linked to
/// their notes.
fn footnotes(ctx: &Ctx<'_>, cells: &[&Cell], rejected_drawn: bool) -> Markup {
    footnotes_named(ctx, cells, rejected_drawn, |c| c.key.framework.clone())
}

fn footnotes_named(
    ctx: &Ctx<'_>,
    cells: &[&Cell],
    rejected_drawn: bool,
    name: impl Fn(&Cell) -> String,
) -> Markup {
    let flagged: Vec<&&Cell> = cells
        .iter()
        .filter(|c| ctx.mark(c) == Mark::Flagged)
        .collect();
    let rejected: Vec<&&Cell> = cells
        .iter()
        .filter(|c| c.verdict.status == Status::Rejected)
        .collect();
    let labels = |c: &Cell| -> String {
        c.verdict
            .labels(true)
            .into_iter()
            .filter(|l| *l != crate::results::Reason::EnvironmentNotAccepted.label())
            .collect::<Vec<&str>>()
            .join(", ")
    };
    html! {
        @if !flagged.is_empty() {
            p class="footnote flagged" {
                "Flagged (the number stands, read the note first): "
                @for (i, c) in flagged.iter().enumerate() {
                    @if i > 0 { "; " }
                    @let n = ctx.view.note(&c.key).unwrap_or(0);
                    a href={ "#note-" (n) } { "⚑" (n) } " " (name(c)) ": " (labels(c))
                }
                "."
            }
        }
        @if !rejected.is_empty() {
            p class="footnote rejected" {
                "Rejected ("
                @if rejected_drawn { "no bar: the reason replaces the number" }
                @else { "not drawn: not a valid measurement" }
                "): "
                @for (i, c) in rejected.iter().enumerate() {
                    @if i > 0 { "; " }
                    (name(c)) " " (ctx.rejected_html(c))
                }
                "."
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::results::{HostCheck, HostPreflight, Topology};

    #[test]
    fn a_multi_host_run_has_a_hosts_section_and_a_one_daemon_run_none() {
        let mut r = crate::testdata::sample_results();
        let one = super::page(&r).unwrap();
        assert!(!one.contains("<section id=\"hosts\">"));
        r.topology = Some(Topology {
            preflight: vec![HostPreflight {
                endpoint: "tcp://10.0.0.2:2376 (TLS)".into(),
                verdict: "fail".into(),
                checks: vec![HostCheck {
                    id: "nic.driver".into(),
                    verdict: "fail".into(),
                    measured: "eth0: e1000 (emulated), carries the run's traffic".into(),
                }],
            }],
            ..crate::testdata::sample_topology()
        });
        let page = super::page(&r).unwrap();
        assert!(page.contains("<section id=\"hosts\">"), "no hosts section");
        assert!(page.contains("through its published port"));
        assert!(page.contains("fairground/fairground:abc"));
        assert!(page.contains("e1000 (emulated), carries the run's traffic"));
    }
}
