//! The terminal table of a comparison: a header saying what was compared
//! with what, one row per metric of each cell, regressions first, then the
//! cells not compared and those on one side only, then the counts.
//!
//! Returns bytes (like every exporter); colour only when asked, which the
//! caller does when stdout is a terminal and NO_COLOR is unset.

use std::fmt::Write as _;

use super::model::{Comparison, Figures, Row};
use super::verdict::Call;
use super::Metric;
use crate::export::{Exporter, Rendered};
use crate::report::fmt::{bytes, micros, thousands};

const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const DIM: &str = "\x1b[2m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

/// A value of `metric` with its unit, as people read it.
pub(crate) fn value(metric: Metric, unit: &str, v: Option<f64>) -> String {
    let Some(v) = v else {
        return "–".into();
    };
    match metric {
        Metric::Throughput => format!("{} {unit}", thousands(v)),
        Metric::LatencyP50 | Metric::LatencyP99 | Metric::CpuPerRequest => micros(v),
        Metric::MemoryUnderLoad => bytes(v),
        Metric::WireBytes => format!("{v:.0} B"),
    }
}

/// A side's figure with its own precision: `120,600 req/s ±1.2%`.
pub(crate) fn side_value(metric: Metric, unit: &str, f: &Figures) -> String {
    let v = value(metric, unit, f.geomean);
    match (f.geomean, f.precision) {
        (Some(_), Some(p)) => format!("{v} ±{:.1}%", p * 100.0),
        _ => v,
    }
}

/// `×0.803`, or `–`.
pub(crate) fn ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "–".into(), |r| format!("×{r:.3}"))
}

/// The interval as `×0.789–×0.818`, or `–`.
pub(crate) fn interval(row: &Row) -> String {
    row.interval
        .map_or_else(|| "–".into(), |i| format!("×{:.3}–×{:.3}", i.low, i.high))
}

/// The band as `±4.1%`, or `–`.
pub(crate) fn band(row: &Row) -> String {
    row.band
        .map_or_else(|| "–".into(), |b| format!("±{:.1}%", b * 100.0))
}

/// Rounds (and req/s windows) behind each side: `3/3` or `3/3 (9/9 s)`.
pub(crate) fn samples(row: &Row) -> String {
    let mut s = format!("{}/{}", row.base.rounds, row.new.rounds);
    if row.base.windows + row.new.windows > 0 {
        s.push_str(&format!(" ({}/{} s)", row.base.windows, row.new.windows));
    }
    s
}

/// The gates' flags of both sides, `base: host busy · new: noisy`.
pub(crate) fn flags(row: &Row) -> String {
    let mut parts = Vec::new();
    if !row.base_flags.is_empty() {
        parts.push(format!("BASE {}", row.base_flags.join(", ")));
    }
    if !row.new_flags.is_empty() {
        parts.push(format!("NEW {}", row.new_flags.join(", ")));
    }
    parts.join(" · ")
}

/// The verdict word, marked † when forced.
pub(crate) fn call_word(row: &Row) -> String {
    let mut w = row.call.word().to_string();
    if row.forced {
        w.push_str(" †");
    }
    w
}

/// The comparison as a terminal table, in colour when `colour`.
pub struct CompareTerminal {
    /// Colour the verdicts (ANSI escapes).
    pub colour: bool,
}

impl Exporter<Comparison> for CompareTerminal {
    fn render(&self, cmp: &Comparison) -> anyhow::Result<Vec<Rendered>> {
        Ok(Rendered::one("compare.txt", to_terminal(cmp, self.colour)))
    }
}

/// Render the comparison for a terminal.
pub fn to_terminal(cmp: &Comparison, colour: bool) -> Vec<u8> {
    let paint = |code: &str, s: &str| {
        if colour && !code.is_empty() {
            format!("{code}{s}{RESET}")
        } else {
            s.to_string()
        }
    };
    let mut out = String::new();
    for (label, s) in [("BASE", &cmp.base), ("NEW ", &cmp.new)] {
        let _ = writeln!(out, "{label} {}: {}", s.path, s.describe(str::to_string));
    }
    let _ = writeln!(
        out,
        "{}",
        paint(
            DIM,
            &format!(
                "ratio NEW/BASE of geometric means over rounds; {:.0}% interval: Welch's t on log round values; a change is named only when the whole interval clears the noise band (the range between the best and worst round of a side); docs/compare.md",
                cmp.method.confidence * 100.0
            )
        )
    );
    if cmp.forced {
        let _ = writeln!(
            out,
            "{}",
            paint(
                BOLD,
                "† forced (--force): the runs differ in what changes the figures; every verdict stands on that:"
            )
        );
        for d in &cmp.differences {
            let _ = writeln!(out, "    {}: BASE {} vs NEW {}", d.field, d.base, d.new);
        }
    }
    if !cmp.unchecked.is_empty() {
        let _ = writeln!(
            out,
            "not recorded by one of the runs, so not checked: {}",
            cmp.unchecked.join(", ")
        );
    }
    for (cell, m) in cmp.machine_changes() {
        let _ = writeln!(out, "{}", paint(BOLD, &format!("{cell}: {}", m.describe())));
    }
    out.push('\n');

    let header = [
        "verdict",
        "cell",
        "metric",
        "BASE",
        "NEW",
        "ratio",
        "95% interval",
        "band",
        "rounds",
        "flags",
    ];
    let mut table: Vec<[String; 10]> = vec![header.map(str::to_string)];
    for r in &cmp.rows {
        table.push([
            call_word(r),
            r.cell.to_string(),
            r.metric.label().to_string(),
            side_value(r.metric, &r.unit, &r.base),
            side_value(r.metric, &r.unit, &r.new),
            ratio(r.ratio),
            interval(r),
            band(r),
            samples(r),
            flags(r),
        ]);
    }
    let widths: Vec<usize> = (0..10)
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for (i, cols) in table.iter().enumerate() {
        let mut line = String::new();
        for (c, text) in cols.iter().enumerate() {
            let pad = widths[c] - text.chars().count();
            let right = (3..=8).contains(&c) && i > 0;
            let cellw = if right {
                format!("{}{text}", " ".repeat(pad))
            } else if c + 1 == cols.len() {
                text.clone()
            } else {
                format!("{text}{}", " ".repeat(pad))
            };
            let cellw = if i == 0 {
                paint(BOLD, &cellw)
            } else if c == 0 {
                match cmp.rows[i - 1].call {
                    Call::Regressed => paint(RED, &cellw),
                    Call::Improved => paint(GREEN, &cellw),
                    _ => paint(DIM, &cellw),
                }
            } else {
                cellw
            };
            line.push_str(&cellw);
            line.push_str("  ");
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }

    let mut notes: Vec<String> = Vec::new();
    for r in cmp.rows.iter().filter(|r| r.call == Call::Inconclusive) {
        let note = format!("  {}: {}", r.cell, r.why);
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    if !notes.is_empty() {
        let _ = writeln!(out, "\ninconclusive:\n{}", notes.join("\n"));
    }
    if !cmp.not_compared.is_empty() {
        let _ = writeln!(out, "\nnot compared (rejected on a side):");
        for nc in &cmp.not_compared {
            let mark = if nc.newly_rejected {
                paint(RED, " (NEW rejects what BASE measured)")
            } else {
                String::new()
            };
            let _ = writeln!(out, "  {}{mark}", nc.cell);
            for why in &nc.reasons {
                let _ = writeln!(out, "    {why}");
            }
        }
    }
    for (label, cells) in [
        ("only in BASE", &cmp.only_in_base),
        ("only in NEW", &cmp.only_in_new),
    ] {
        if !cells.is_empty() {
            let names: Vec<String> = cells.iter().map(ToString::to_string).collect();
            let _ = writeln!(out, "\n{label}: {}", names.join("; "));
        }
    }
    let s = &cmp.summary;
    let _ = writeln!(
        out,
        "\n{}, {}, {} within noise, {} inconclusive; {} cell(s) not compared{}",
        paint(
            if s.regressed > 0 { RED } else { "" },
            &format!("{} regressed", s.regressed)
        ),
        paint(
            if s.improved > 0 { GREEN } else { "" },
            &format!("{} improved", s.improved)
        ),
        s.within_noise,
        s.inconclusive,
        s.not_compared,
        if s.newly_rejected > 0 {
            format!(" ({} newly rejected in NEW)", s.newly_rejected)
        } else {
            String::new()
        }
    );
    out.into_bytes()
}
