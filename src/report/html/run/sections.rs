//! The run's context on its page: environment and preflight, notes, files.

use super::*;
use crate::report::context;

// --------------------------------------------------------- environment ----
pub(super) fn environment(ctx: &Ctx<'_>) -> Section {
    let r = ctx.r;
    let env = &r.environment;
    let th = &r.thresholds;
    let profile = serde_json::to_string_pretty(&r.profile).unwrap_or_default();
    let body = html! {
        @match (env.status, env.forced) {
            (CheckStatus::Fail, true) => p class="banner" {
                strong { "† Environment NOT accepted" }
                ": preflight failed and the run went ahead anyway."
            },
            (CheckStatus::Fail, false) => p class="banner" {
                "Preflight: " strong { "fail" }
                ". These results were not produced by a run that passed preflight."
            },
            (CheckStatus::Warn, _) => p {
                "Preflight: " strong class="warn" { "warn" }
                ": the results stand; the warnings below are worth knowing."
            },
            (CheckStatus::Pass, _) => p { "Preflight: " strong class="pass" { "pass" } "." },
        }
        @if let Some(g) = context::checks(r) { (grid(&g)) }
        h3 { "Limits as applied" }
        p {
            "Read back from the Docker daemon on each running server container (not the \
             profile's request)."
        }
        (limits(r))
        h3 { "Gates applied" }
        p {
            (crate::report::view::gates_sentence(th))
        }
        details {
            summary { "The profile as run (defaults filled in)" }
            pre { (profile) }
        }
    };
    Section {
        id: "environment".into(),
        heading: "Environment and limits".into(),
        body,
    }
}

/// Each server container's limits as the daemon applied them.
fn limits(r: &Results) -> Markup {
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
    t.render()
}

/// A grid of [`context`] as a sortable table.
fn grid(g: &context::Grid) -> Markup {
    let head: Vec<&str> = g.head.iter().map(|(h, _)| *h).collect();
    let mut t = Table::new(&head);
    for row in &g.rows {
        let cells = row
            .cells
            .iter()
            .map(|c| match c {
                context::Text::Plain(s) => Td::text(s),
                context::Text::Code(s) => Td::html(html! { code { (s) } }),
                context::Text::Num(s, v) => Td::num(s, *v),
                context::Text::Verdict(s) => Td::text(s).class("verdict"),
            })
            .collect();
        t.row_with_class(&row.class, cells);
    }
    t.render()
}

// --------------------------------------------------------------- hosts ----

/// Where a multi-host run ran (profile `hosts:`): the daemons, the path the
/// traffic took, the images carried, the clocks and each host's preflight.
pub(super) fn hosts(t: &crate::results::Topology) -> Section {
    let sentence = crate::report::view::hosts_sentence(t, |c| format!("`{c}`"), |s| s.to_string());
    let clocks = (!t.clocks.is_empty()).then(|| {
        let mut tb = Table::new(&["daemon", "clock offset", "± (half the round trip)"]);
        for c in &t.clocks {
            tb.row(vec![
                Td::text(&c.endpoint),
                Td::num(&format!("{:+.1} ms", c.offset_ms), c.offset_ms),
                Td::num(
                    &format!("{:.1} ms", c.round_trip_ms / 2.0),
                    c.round_trip_ms / 2.0,
                ),
            ]);
        }
        tb.render()
    });
    let preflight: Vec<Markup> = t
        .preflight
        .iter()
        .map(|p| {
            let mut tb = Table::new(&["check", "verdict", "measured"]);
            for c in &p.checks {
                tb.row_with_class(
                    &c.verdict,
                    vec![
                        Td::text(&c.id),
                        Td::text(&c.verdict).class("verdict"),
                        Td::text(&c.measured),
                    ],
                );
            }
            tb.render()
        })
        .collect();
    let body = html! {
        p { (bold_and_code(&sentence)) }
        @if let Some(g) = context::carried_images(t) { (grid(&g)) }
        @if let Some(c) = clocks { (c) }
        @for (p, table) in t.preflight.iter().zip(&preflight) {
            h3 { "Preflight on " code { (p.endpoint) } ": " (p.verdict) }
            (table)
        }
    };
    Section {
        id: "hosts".into(),
        heading: "Hosts".into(),
        body,
    }
}

// --------------------------------------------------------------- notes ----

pub(super) fn notes(ctx: &Ctx<'_>) -> Section {
    let r = ctx.r;
    let notes = context::notes(&ctx.view);
    let left = context::not_measured(r);
    let (before, code, after) = context::NOT_MEASURED_INTRO;
    let body = html! {
        @if notes.is_empty() {
            p { "No cell was flagged or rejected." }
        } @else {
            ol class="notes" {
                @for note in &notes {
                    li id={ "note-" (note.n) } value=(note.n) class=(note.status.to_string()) {
                        strong { (display(note.key)) ": " (display(note.status)) }
                        ul { @for line in &note.lines { li { (line) } } }
                    }
                }
            }
        }
        @for part in context::appendix(r) {
            h3 { (part.title) }
            @if let Some(intro) = part.intro { p { (intro) } }
            (grid(&part.grid))
        }
        @if !left.is_empty() {
            h3 { (context::NOT_MEASURED) }
            p { (before) code { (code) } (after) }
            ul { @for k in &left { li { (k) } } }
        }
    };
    Section {
        id: "notes".into(),
        heading: "Notes".into(),
        body,
    }
}

// --------------------------------------------------------------- files ----

pub(super) fn files(ctx: &Ctx<'_>) -> Section {
    let hgrm: Vec<String> = ctx
        .r
        .cells
        .iter()
        .filter(|c| c.summary.is_some())
        .map(|c| format!("hgrm/{}.hgrm", c.key.stem()))
        .collect();
    let body = html! {
        p { "Beside this page in the run directory (relative links):" }
        ul {
            li { a href="results.md" { "results.md" } ": the tables to read and publish" }
            li { a href="stats.md" { "stats.md" } ": what each framework costs" }
            li { a href="results.json" { "results.json" } ": everything, every raw round" }
            li { a href="results.csv" { "results.csv" } ": one row per cell and round" }
            li { a href="SHA256SUMS" { "SHA256SUMS" } ": checksums of every file (this one included)" }
            li { a href="logs/" { "logs/" } ": each server container's log tail" }
        }
        @if !hgrm.is_empty() {
            details {
                summary {
                    "Latency histograms, HdrHistogram percentile format (ms), one per cell ("
                    (hgrm.len()) ")"
                }
                ul { @for f in &hgrm { li { a href=(f) { (f) } } } }
            }
        }
    };
    Section {
        id: "files".into(),
        heading: "Files".into(),
        body,
    }
}
