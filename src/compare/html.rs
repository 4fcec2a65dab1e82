//! compare.html: a comparison as one self-contained page, drawn with the
//! run page's shell and charts (no network, inline SVG). Per metric a
//! ratio chart (NEW/BASE with its interval and the noise band around ×1),
//! its numbers in a table below; then the cells not compared, the cells on
//! one side only, and how the verdicts were reached.
//!
//! Renders the comparison document only; returns bytes.

use maud::{display, html, Markup};

use super::figures::Metric;
use super::model::{Comparison, Row};
use super::terminal::{band, call_word, flags, interval, ratio, samples, side_value};
use super::verdict::Call;
use crate::export::{Exporter, Rendered};
use crate::report::html::charts::{forest, Forest, ForestRow, Judged};
use crate::report::html::page::{Figure, Page, Section};
use crate::report::html::table::{Table, Td};

fn judged(call: Call) -> Judged {
    match call {
        Call::Regressed => Judged::Worse,
        Call::Improved => Judged::Better,
        Call::WithinNoise => Judged::Noise,
        Call::Inconclusive => Judged::Unknown,
    }
}

/// The CSS class a verdict's table cell takes (the run page's colours:
/// rejected red for regressions, accepted for improvements).
fn call_class(call: Call) -> &'static str {
    match call {
        Call::Regressed => "rejected",
        Call::Improved => "improved",
        Call::WithinNoise | Call::Inconclusive => "",
    }
}

fn header(cmp: &Comparison) -> Markup {
    let s = &cmp.summary;
    html! {
        h1 {
            "fairground compare: " (s.regressed) " regressed, " (s.improved) " improved, "
            (s.within_noise) " within noise, " (s.inconclusive) " inconclusive"
        }
        ul {
            @for (label, side) in [("BASE", &cmp.base), ("NEW", &cmp.new)] {
                li {
                    b { (label) } ": run " code { (side.run_id) } " (profile "
                    code { (side.profile_name) } ", started " (side.started_at)
                    @if let Some(f) = &side.framework { ", framework " code { (f) } }
                    "), " code { (side.path) }
                }
            }
        }
        @if s.newly_rejected > 0 {
            p class="banner" {
                b { "✗ NEW rejects " (s.newly_rejected) " cell(s) BASE measured" }
                " (see Not compared)."
            }
        }
        @if cmp.forced {
            p class="banner" {
                b { "† Forced:" }
                " the runs differ in what changes the figures; every verdict below stands on that:"
            }
            ul {
                @for d in &cmp.differences {
                    li { code { (d.field) } ": BASE " (d.base) " vs NEW " (d.new) }
                }
            }
        }
    }
}

fn metric_section(cmp: &Comparison, metric: Metric, rows: &[&Row]) -> anyhow::Result<Section> {
    let id = format!("m-{}", metric.label().replace(['/', ' '], "-"));
    let forest_rows: Vec<ForestRow> = rows
        .iter()
        .map(|r| ForestRow {
            label: r.cell.to_string(),
            ratio: r.ratio,
            interval: r.interval.map(|i| (i.low, i.high)),
            band: r.band,
            judged: judged(r.call),
            text: format!("{} {}", ratio(r.ratio), call_word(r)),
            title: format!("{}: {}", call_word(r), r.why),
        })
        .collect();
    let better = match rows.first().map(|r| r.better) {
        Some(super::Better::Higher) => "higher is better",
        _ => "lower is better",
    };
    let axis = format!("NEW / BASE, {} ({better})", metric.label());
    let svg = forest(&Forest {
        id: &format!("chart-{id}"),
        label: &format!("{} ratio NEW/BASE per cell", metric.label()),
        axis: &axis,
        rows: &forest_rows,
    })?;
    let mut t = Table::new(&[
        "cell",
        "verdict",
        "BASE",
        "NEW",
        "ratio",
        "95% interval",
        "band",
        "rounds",
        "flags",
    ]);
    for r in rows {
        t.row(vec![
            Td::text(&r.cell.to_string()),
            Td::text(&call_word(r)).class(call_class(r.call)),
            Td::opt(r.base.geomean, |_| side_value(metric, &r.unit, &r.base)),
            Td::opt(r.new.geomean, |_| side_value(metric, &r.unit, &r.new)),
            Td::opt(r.ratio, |v| ratio(Some(v))),
            Td::text(&interval(r)),
            Td::text(&band(r)),
            Td::text(&samples(r)),
            Td::text(&flags(r)),
        ]);
    }
    let caption = html! { (metric.label()) " per cell, NEW / BASE (" (better) ")" };
    let notes = html! {
        p class="footnote" {
            (format!(
                "Dot: ratio of the geometric means over rounds; whisker: its {:.0}% interval; \
                 grey strip: the noise band around ×1. Red: regressed; green: improved; grey: \
                 within noise; hollow: inconclusive. {}.",
                cmp.method.confidence * 100.0,
                metric.measured()
            ))
        }
    };
    Ok(Section {
        id,
        heading: metric.label().to_string(),
        body: Figure {
            caption,
            svg,
            notes,
            numbers: t.render(),
            ..Figure::default()
        }
        .render(),
    })
}

fn others(cmp: &Comparison) -> Section {
    let not_compared = (!cmp.not_compared.is_empty()).then(|| {
        let mut t = Table::new(&["cell", "BASE", "NEW", "why"]);
        for nc in &cmp.not_compared {
            let cls = if nc.newly_rejected { "rejected" } else { "" };
            t.row_with_class(
                cls,
                vec![
                    Td::text(&nc.cell.to_string()),
                    Td::text(&nc.base_status.to_string()),
                    Td::text(&nc.new_status.to_string()),
                    Td::text(&nc.reasons.join("; ")),
                ],
            );
        }
        t.render()
    });
    let body = html! {
        @match not_compared {
            None => p { "Every cell both runs measured was compared." },
            Some(t) => {
                p { "Rejected on a side, so not compared (a rejected cell has no valid figure):" }
                (t)
            }
        }
        @for (label, cells) in [("Only in BASE", &cmp.only_in_base), ("Only in NEW", &cmp.only_in_new)] {
            @if !cells.is_empty() {
                p {
                    b { (label) ":" } " "
                    (cells.iter().map(|c| c.to_string()).collect::<Vec<_>>().join("; "))
                }
            }
        }
        @if !cmp.unchecked.is_empty() {
            p {
                "Not recorded by a run, so not checked for comparability: "
                (cmp.unchecked.join(", ")) "."
            }
        }
        @for (cell, m) in cmp.machine_changes() {
            p { b { "Machine:" } " " (display(cell)) ": " (m.describe()) "." }
        }
    };
    Section {
        id: "not-compared".into(),
        heading: "Not compared".into(),
        body,
    }
}

fn method(cmp: &Comparison) -> Section {
    let m = &cmp.method;
    Section {
        id: "method".into(),
        heading: "Method".into(),
        body: html! {
            p {
                (format!(
                    "Ratio NEW/BASE of the geometric means over rounds; {:.0}% interval: {}; noise \
                     band: {}; at least {} rounds per side for a verdict. A change is named only \
                     when the whole interval lies outside the band. docs/compare.md explains the \
                     method and what it was measured to get wrong.",
                    m.confidence * 100.0,
                    m.interval,
                    m.band,
                    m.min_rounds
                ))
            }
        },
    }
}

pub struct CompareHtml;

impl Exporter<Comparison> for CompareHtml {
    fn render(&self, cmp: &Comparison) -> anyhow::Result<Vec<Rendered>> {
        Ok(Rendered::one("compare.html", to_html(cmp)?))
    }
}

/// Render the comparison as a page.
pub fn to_html(cmp: &Comparison) -> anyhow::Result<Vec<u8>> {
    let mut sections = Vec::new();
    for metric in Metric::ALL {
        let rows: Vec<&Row> = cmp.rows.iter().filter(|r| r.metric == metric).collect();
        if !rows.is_empty() {
            sections.push(metric_section(cmp, metric, &rows)?);
        }
    }
    sections.push(others(cmp));
    sections.push(method(cmp));
    let page = Page {
        title: format!(
            "fairground compare: {} → {}",
            cmp.base.run_id, cmp.new.run_id
        ),
        header: header(cmp),
        sections,
        footer: html! {
            p {
                "Written by fairground " (cmp.fairground_version) ". One file: nothing is fetched; \
                 the charts are inline SVG. The same comparison as JSON: "
                code { "fairground compare --json" } " (docs/compare.schema.json)."
            }
        },
    };
    Ok(page.render().into_bytes())
}
