//! history.html: one self-contained page (the run page's shell): the runs
//! in order, where the series split and why, every change point with its
//! confirmation, and one small chart per cell and figure: each run's
//! median with its interval as a whisker, change points as vertical
//! lines (red: confirmed worse, green: confirmed better, grey: not
//! confirmed), segment splits as dashed lines. The charts are plain inline
//! SVG written here: points, whiskers and rules on a linear axis are all
//! they need.

use maud::{html, Markup};

use super::{fmt_value, History, Series};
use crate::compare::Call;
use crate::report::html::page::{Page, Section};
use crate::report::html::table::{Table, Td};

const W: f64 = 640.0;
const H: f64 = 180.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 28.0;

/// The page of `h`.
pub fn page(h: &History) -> String {
    let mut sections = vec![runs(h), changes(h)];
    let mut by_cell: Vec<(String, Vec<&Series>)> = Vec::new();
    for s in &h.series {
        let name = s.cell.to_string();
        match by_cell.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(s),
            None => by_cell.push((name, vec![s])),
        }
    }
    for (i, (name, list)) in by_cell.iter().enumerate() {
        sections.push(Section {
            id: format!("cell-{i}"),
            heading: name.clone(),
            body: html! { @for s in list { (chart(h, s)) } },
        });
    }
    Page {
        title: format!("fairground history ({} runs)", h.summary.runs),
        header: html! {
            h1 { "fairground history" }
            p class="meta" {
                (h.summary.runs) " runs ordered by " (h.method.order) "; " (h.summary.segments)
                " comparable segment(s); " (h.summary.change_points) " change point(s), "
                (h.summary.confirmed) " confirmed by " code { "compare" } "."
            }
            p {
                "Each point is a run's median over its rounds, its whisker the interval of that \
                 median. Change points: " (h.method.detector) ", α = " (h.method.alpha) ", "
                (h.method.permutations) " permutations, at least " (h.method.min_segment)
                " runs on each side; each is checked by comparing the runs on either side."
            }
        },
        sections,
        footer: html! {
            p {
                "Written by fairground " (h.fairground_version) " (" code { "fairground history" }
                "); history.json holds every figure shown."
            }
        },
    }
    .render()
}

fn runs(h: &History) -> Section {
    let mut t = Table::new(&["#", "run", "started (UTC)", "commit", "branch", "segment"]);
    for r in &h.runs {
        t.row(vec![
            Td::num(&r.index.to_string(), r.index as f64),
            Td::text(&r.run_id),
            Td::text(&r.started_at),
            Td::text(&r.git.as_ref().map_or("–".into(), |g| g.short())),
            Td::text(
                r.git
                    .as_ref()
                    .and_then(|g| g.branch.as_deref())
                    .unwrap_or("–"),
            ),
            Td::num(&r.segment.to_string(), r.segment as f64),
        ]);
    }
    let body = html! {
        (t.render())
        @for seg in h.segments.iter().skip(1) {
            p {
                "Series split before run #" (seg.first_run)
                ": it is not comparable with the run before ("
                @for (i, d) in seg.split_because.iter().enumerate() {
                    @if i > 0 { "; " }
                    code { (d.field) } " " (d.base) " → " (d.new)
                }
                ")."
            }
        }
    };
    Section {
        id: "runs".into(),
        heading: "Runs".into(),
        body,
    }
}

fn changes(h: &History) -> Section {
    let mut t = Table::new(&[
        "cell",
        "figure",
        "at run",
        "before → after",
        "change",
        "p",
        "compare",
    ]);
    for s in &h.series {
        for c in &s.change_points {
            t.row_with_class(
                if c.confirmed { "" } else { "flagged" },
                vec![
                    Td::text(&s.cell.to_string()),
                    Td::text(s.metric.label()),
                    Td::num(
                        &format!("#{} ({})", c.run, h.runs[c.run].run_id),
                        c.run as f64,
                    ),
                    Td::text(&format!(
                        "{} → {}",
                        fmt_value(s.metric, &s.unit, c.level_before),
                        fmt_value(s.metric, &s.unit, c.level_after)
                    )),
                    Td::num(&format!("{:+.1}%", (c.ratio - 1.0) * 100.0), c.ratio),
                    Td::num(&format!("{:.3}", c.p_value), c.p_value),
                    Td::text(&format!(
                        "{}: {}",
                        if c.confirmed {
                            "confirmed"
                        } else {
                            "not confirmed"
                        },
                        c.compare_call.map_or_else(
                            || c.compare_why.clone(),
                            |call| format!("{} ({})", call.word(), c.compare_why)
                        )
                    )),
                ],
            );
        }
    }
    let body = if t.is_empty() {
        html! { p { "No change point: every series stays within its own noise." } }
    } else {
        t.render()
    };
    Section {
        id: "change-points".into(),
        heading: format!("Change points: {}", h.summary.change_points),
        body,
    }
}

/// One series: points with whiskers, change points and splits.
fn chart(h: &History, s: &Series) -> Markup {
    let n = h.runs.len().max(2);
    let vals: Vec<f64> = s
        .points
        .iter()
        .flat_map(|p| [p.low, p.high, p.median])
        .flatten()
        .filter(|v| v.is_finite())
        .collect();
    let (mut lo, mut hi) = vals
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(*v), b.max(*v))
        });
    if !lo.is_finite() {
        return html! {};
    }
    if hi - lo < hi.abs() * 1e-9 + 1e-12 {
        lo -= lo.abs() * 0.05 + 1.0;
        hi += hi.abs() * 0.05 + 1.0;
    }
    let pad = (hi - lo) * 0.08;
    let (lo, hi) = (lo - pad, hi + pad);
    let x = |run: usize| LEFT + (W - LEFT - RIGHT) * (run as f64 + 0.5) / n as f64;
    let y = |v: f64| TOP + (H - TOP - BOTTOM) * (1.0 - (v - lo) / (hi - lo));
    let f1 = |v: f64| format!("{v:.1}");
    let slot = (W - LEFT - RIGHT) / n as f64 / 2.0;
    let svg = html! {
        svg viewBox={ "0 0 " (W) " " (H) } width=(W) height=(H) role="img"
            aria-label={ (s.cell.to_string()) " " (s.metric.label()) " by run" } {
            line x1=(LEFT) y1=(H - BOTTOM) x2=(W - RIGHT) y2=(H - BOTTOM) stroke="#888" {}
            line x1=(LEFT) y1=(TOP) x2=(LEFT) y2=(H - BOTTOM) stroke="#888" {}
            @for v in [lo + pad, hi - pad] {
                text x=(LEFT - 4.0) y=(f1(y(v) + 3.0)) font-size="10" text-anchor="end" {
                    (fmt_value(s.metric, &s.unit, v))
                }
            }
            @for seg in h.segments.iter().skip(1) {
                @let sx = f1(x(seg.first_run) - slot);
                line x1=(sx) y1=(TOP) x2=(sx) y2=(H - BOTTOM) stroke="#555" stroke-dasharray="4 3" {
                    title { "not comparable with the run before" }
                }
            }
            @for c in &s.change_points {
                @let colour = match (c.confirmed, c.compare_call) {
                    (true, Some(Call::Regressed)) => "#c62828",
                    (true, Some(Call::Improved)) => "#2e7d32",
                    _ => "#9e9e9e",
                };
                @let cx = f1(x(c.run) - slot);
                line x1=(cx) y1=(TOP) x2=(cx) y2=(H - BOTTOM) stroke=(colour) stroke-width="2" {
                    title {
                        (format!(
                            "change point before run #{}: {:+.1}%, p = {:.3}, {}",
                            c.run,
                            (c.ratio - 1.0) * 100.0,
                            c.p_value,
                            if c.confirmed { "confirmed by compare" } else { "not confirmed by compare" }
                        ))
                    }
                }
            }
            @for p in &s.points {
                @let px = f1(x(p.run));
                @match (p.median, p.low, p.high) {
                    (Some(m), low, high) if m.is_finite() => {
                        @if let (Some(a), Some(b)) = (low, high) {
                            line x1=(px) y1=(f1(y(a))) x2=(px) y2=(f1(y(b))) stroke="#1565c0" {}
                        }
                        circle cx=(px) cy=(f1(y(m))) r="3" fill="#1565c0" {
                            title {
                                "run #" (p.run) ": " (fmt_value(s.metric, &s.unit, m)) " (" (p.rounds) " rounds)"
                            }
                        }
                    }
                    _ => {
                        text x=(px) y=(H - BOTTOM - 4.0) font-size="10" text-anchor="middle" fill="#c62828" {
                            "✗" title { "run #" (p.run) ": " (format!("{:?}", p.status)) ", no figure" }
                        }
                    }
                }
            }
            text x=((LEFT + W - RIGHT) / 2.0) y=(H - 8.0) font-size="10" text-anchor="middle" {
                "run # (0–" (n - 1) ")"
            }
        }
    };
    html! {
        figure class="chart" {
            (svg)
            figcaption { (s.metric.label()) " (" (s.unit) "), median and interval per run" }
        }
    }
}
