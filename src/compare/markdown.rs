//! The Markdown summary of a comparison, fit for a pull-request comment:
//! the counts in the heading, the changes (regressions first) in a table,
//! everything else folded in a `<details>` block, then what was not
//! compared and how the verdicts were reached.
//!
//! Renders the comparison document only; returns bytes.

use std::fmt::Write as _;

use super::model::{Comparison, Row};
use super::terminal::{band, call_word, flags, interval, ratio, samples, side_value};
use super::verdict::Call;
use crate::export::{Exporter, Rendered};
use crate::report::fmt::cell as esc;

const HEADER: &str = "| verdict | cell | metric | BASE | NEW | ratio | 95% interval | noise band | rounds (windows) | flags |\n|---|---|---|--:|--:|--:|--:|--:|--:|---|\n";

fn table_row(r: &Row) -> String {
    let verdict = match r.call {
        Call::Regressed | Call::Improved => format!("**{}**", call_word(r)),
        _ => call_word(r),
    };
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
        verdict,
        esc(&r.cell.to_string()),
        esc(r.metric.label()),
        side_value(r.metric, &r.unit, &r.base),
        side_value(r.metric, &r.unit, &r.new),
        ratio(r.ratio),
        interval(r),
        band(r),
        samples(r),
        esc(&flags(r)),
    )
}

/// The Markdown summary (`compare.md`, `--markdown FILE`).
pub struct CompareMarkdown;

impl Exporter<Comparison> for CompareMarkdown {
    fn render(&self, cmp: &Comparison) -> anyhow::Result<Vec<Rendered>> {
        Ok(Rendered::one("compare.md", to_markdown(cmp)))
    }
}

/// Render the comparison as Markdown.
pub fn to_markdown(cmp: &Comparison) -> Vec<u8> {
    let s = &cmp.summary;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### fairground compare: {} regressed, {} improved, {} within noise, {} inconclusive\n",
        s.regressed, s.improved, s.within_noise, s.inconclusive
    );
    for (label, side) in [("BASE", &cmp.base), ("NEW", &cmp.new)] {
        let _ = writeln!(out, "- {label}: {}", side.describe(|c| format!("`{c}`")));
    }
    if cmp.forced {
        let _ = writeln!(
            out,
            "\n> **† Forced:** the runs differ in what changes the figures; every verdict is marked †."
        );
        for d in &cmp.differences {
            let _ = writeln!(
                out,
                "> - `{}`: BASE {} vs NEW {}",
                d.field,
                esc(&d.base),
                esc(&d.new)
            );
        }
    }
    for (cell, m) in cmp.machine_changes() {
        let _ = writeln!(
            out,
            "\n> **Machine:** {}: {}.",
            esc(&cell.to_string()),
            esc(&m.describe())
        );
    }
    out.push('\n');

    let changes: Vec<&Row> = cmp
        .rows
        .iter()
        .filter(|r| matches!(r.call, Call::Regressed | Call::Improved))
        .collect();
    if changes.is_empty() {
        out.push_str("No change larger than the noise.\n\n");
    } else {
        out.push_str(HEADER);
        for r in &changes {
            out.push_str(&table_row(r));
        }
        out.push('\n');
    }
    let rest: Vec<&Row> = cmp
        .rows
        .iter()
        .filter(|r| !matches!(r.call, Call::Regressed | Call::Improved))
        .collect();
    if !rest.is_empty() {
        let _ = writeln!(
            out,
            "<details><summary>{} comparison(s) within noise or inconclusive</summary>\n",
            rest.len()
        );
        out.push_str(HEADER);
        for r in &rest {
            out.push_str(&table_row(r));
        }
        out.push_str("\n</details>\n\n");
    }

    if !cmp.not_compared.is_empty() {
        out.push_str("**Not compared** (rejected on a side):\n");
        for nc in &cmp.not_compared {
            let newly = if nc.newly_rejected {
                " — **NEW rejects what BASE measured**"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "- {}{newly}: {}",
                esc(&nc.cell.to_string()),
                esc(&nc.reasons.join("; "))
            );
        }
        out.push('\n');
    }
    for (label, cells) in [
        ("Only in BASE", &cmp.only_in_base),
        ("Only in NEW", &cmp.only_in_new),
    ] {
        if !cells.is_empty() {
            let names: Vec<String> = cells.iter().map(|c| esc(&c.to_string())).collect();
            let _ = writeln!(out, "**{label}:** {}\n", names.join("; "));
        }
    }
    let _ = writeln!(
        out,
        "<sub>Ratio NEW/BASE of geometric means over rounds; {:.0}% interval: {}; noise band: {}; at least {} rounds per side. A change is named only when the whole interval lies outside the band. Method: docs/compare.md.</sub>",
        cmp.method.confidence * 100.0,
        cmp.method.interval,
        cmp.method.band,
        cmp.method.min_rounds
    );
    out.into_bytes()
}
