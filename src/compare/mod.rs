//! `fairground compare BASE NEW`: did it get faster, slower, or is that
//! noise? For every cell the two runs share, and for each of req/s, p50,
//! p99, server CPU µs per request, memory under load and wire bytes per
//! response: the ratio NEW/BASE, its 95% confidence interval, the noise
//! band, and a verdict (docs/compare.md explains the method).
//!
//! Files by responsibility: `load` (read the sides, pair the cells),
//! `figures` (the only reader of results.json figures), `comparability`
//! (refuse runs that differ in what changes the figures), `stats` (the
//! interval), `rank` and `precision` (one run's own cells), `verdict` (the call), `model` (the document), and one
//! exporter per output: `terminal`, `markdown`, `json`, `html` (compare.html). This file wires
//! them together; it neither measures nor runs anything.

mod comparability;
mod figures;
mod html;
mod json;
mod load;
mod machine;
mod markdown;
mod model;
pub mod precision;
pub mod rank;
mod stats;
mod terminal;
mod verdict;

pub use self::comparability::Refused;
pub use self::figures::{Better, Metric};
pub use self::html::{to_html, CompareHtml};
pub use self::json::{to_json, CompareJson};
pub use self::load::InputError;
pub use self::markdown::{to_markdown, CompareMarkdown};
pub use self::model::{
    schema, CellRef, Comparison, Difference, Figures, Interval, MachineDrift, NotCompared,
    ProbeRatio, Row, Side, Summary, COMPARE_SCHEMA_VERSION,
};
pub use self::stats::{CONFIDENCE, MIN_ROUNDS};
pub use self::terminal::{to_terminal, CompareTerminal};
pub use self::verdict::Call;

use self::load::{LoadedSide, SideSpec};
use crate::results::{Cell, Results, Status};

/// Read the two sides (`RUN` or `RUN:FRAMEWORK`, a results.json or its
/// run directory) and compare them; refused when they are incomparable,
/// unless `force`.
pub fn compare_specs(base: &str, new: &str, force: bool) -> anyhow::Result<Comparison> {
    let base = load::read(SideSpec::parse(base)?)?;
    let new = load::read(SideSpec::parse(new)?)?;
    compare(&base, &new, force)
}

/// The settings that make `base` and `new` incomparable (empty when they
/// can be compared): what `compare` refuses on, for `history` to split its
/// series at.
pub(crate) fn differences(base: &Results, new: &Results) -> Vec<model::Difference> {
    comparability::check(base, new).differences
}

/// Compare two runs already read, by the command's own rules (refused
/// when they are incomparable): how `history` confirms a change point.
pub(crate) fn compare_runs(
    base: (&std::path::Path, &Results),
    new: (&std::path::Path, &Results),
) -> anyhow::Result<Comparison> {
    let side = |(file, results): (&std::path::Path, &Results)| LoadedSide {
        spec: SideSpec {
            file: file.to_path_buf(),
            framework: None,
            protocol: None,
        },
        results: results.clone(),
    };
    compare(&side(base), &side(new), false)
}

/// Rounds of a cell the gates left out of its figures (busy host, slowed
/// machine), which `compare` leaves out too (and so does `history`).
pub(crate) fn left_out_rounds(cell: &Cell) -> Vec<u32> {
    figures::left_out_rounds(cell)
}

/// Compare two loaded sides. Refuses (exit 2) when the runs differ in what
/// changes the figures, unless `force`; refuses too when no cell pairs up.
fn compare(base: &LoadedSide, new: &LoadedSide, force: bool) -> anyhow::Result<Comparison> {
    let check = comparability::check(&base.results, &new.results);
    if !check.differences.is_empty() && !force {
        return Err(Refused(check.differences.clone()).into());
    }
    let forced = !check.differences.is_empty();
    let pairing = load::pair(base, new)?;
    if pairing.both.is_empty() {
        return Err(load::InputError::NothingPaired {
            base: base.spec.file.clone(),
            new: new.spec.file.clone(),
        }
        .into());
    }

    // Two runs, not two frameworks of one: the machine's states between
    // the runs are not shared, and the floors measured A/A across runs
    // apply.
    let across_runs = base.results.run_id != new.results.run_id;
    // Two frameworks of one run that interleaved its rounds: round i of
    // both is one block in time, so they are judged block by block.
    let paired = !across_runs && base.results.profile.interleave_rounds;
    let mut rows = Vec::new();
    let mut not_compared = Vec::new();
    // Each compared pair with the machine's drift between its sides, found
    // once for all of its metrics.
    let mut compared: Vec<(&CellRef, &Cell, &Cell, Option<MachineDrift>)> = Vec::new();
    for (cref, b, n) in &pairing.both {
        if b.verdict.status == Status::Rejected || n.verdict.status == Status::Rejected {
            not_compared.push(rejected(cref, b, n));
        } else {
            let drift = machine::drift(
                b,
                n,
                &figures::left_out_rounds(b),
                &figures::left_out_rounds(n),
            );
            compared.push((cref, b, n, drift));
        }
    }
    for metric in Metric::ALL {
        let estimates: Vec<_> = compared
            .iter()
            .map(|(_, b, n, _)| {
                let (sb, sn) = (sample(metric, b), sample(metric, n));
                let e = match paired.then(|| stats::paired_estimate_at(&sb, &sn, CONFIDENCE)) {
                    Some(Ok(e)) => Ok(e),
                    _ => stats::estimate(&sb, &sn),
                };
                (sb, sn, e)
            })
            .collect();
        let mut floor = run_floor(estimates.iter().filter_map(|(_, _, e)| e.as_ref().ok()));
        if across_runs {
            floor = floor.max(metric.across_runs_floor());
        }
        for ((cref, b, n, drift), (sb, sn, e)) in compared.iter().zip(estimates) {
            rows.push(row(metric, cref, b, n, &sb, &sn, e, floor, *drift, forced));
        }
    }
    rows.sort_by(|a, b| (a.call, &a.cell, a.metric).cmp(&(b.call, &b.cell, b.metric)));
    let summary = Summary {
        regressed: count(&rows, Call::Regressed),
        improved: count(&rows, Call::Improved),
        within_noise: count(&rows, Call::WithinNoise),
        inconclusive: count(&rows, Call::Inconclusive),
        not_compared: not_compared.len(),
        newly_rejected: not_compared.iter().filter(|c| c.newly_rejected).count(),
    };
    Ok(Comparison {
        schema_version: COMPARE_SCHEMA_VERSION,
        fairground_version: env!("CARGO_PKG_VERSION").to_string(),
        base: side(base),
        new: side(new),
        method: model::Method {
            interval: if paired {
                "paired t interval on the logs of the ratios of rounds measured in the same block \
                 (two frameworks of one run that interleaved its rounds; Welch's interval where \
                 fewer than 3 rounds pair up)"
            } else {
                "Welch's t interval on the logs of the round values (ratio of geometric means)"
            }
            .into(),
            confidence: CONFIDENCE,
            min_rounds: MIN_ROUNDS,
            band: "the largest of: the range between the best and worst round of BASE, the same of NEW (when paired: the range of the per-block ratios instead), the median of that range over every cell compared (3 or more), and 1% (10% for memory under load, which differs between containers of one server more than between rounds; none for a figure that does not vary at all); between two different runs at least 8% for req/s, p50 and CPU per request and 25% for p99 (measured A/A across runs); for req/s, latency and CPU per request, widened by the machine's own change between the sides where the calibration probe shows one".into(),
        },
        forced,
        differences: check.differences,
        unchecked: check.unchecked,
        rows,
        not_compared,
        only_in_base: pairing.only_base,
        only_in_new: pairing.only_new,
        summary,
    })
}

fn count(rows: &[Row], call: Call) -> usize {
    rows.iter().filter(|r| r.call == call).count()
}

fn side(s: &LoadedSide) -> Side {
    Side {
        path: s.spec.file.display().to_string(),
        run_id: s.results.run_id.clone(),
        profile_name: s.results.profile_name.clone(),
        started_at: s
            .results
            .started_at
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        framework: s.spec.framework.clone(),
    }
}

/// One side's sample of `metric` in `cell`: one value per round that has
/// one, with the req/s windows' floor. Rounds the gates left out (busy
/// host, slowed machine) are left out here too: another process's CPU use
/// or the machine's slow spell is in their figures, and it differs between
/// any two runs, so it would read as a change.
fn sample(metric: Metric, cell: &Cell) -> stats::Sample {
    let left_out = figures::left_out_rounds(cell);
    let kept: Vec<&crate::results::Round> = cell
        .rounds
        .iter()
        .filter(|r| !left_out.contains(&r.index))
        .collect();
    // A round whose percentile is beyond the timeout has no number: the
    // others alone would be a figure of the survivors, so the cell has no
    // sample of it (compare: inconclusive; rank and precision: none).
    if kept.iter().any(|r| metric.beyond_timeout(r)) {
        return stats::Sample::of_rounds(Vec::new());
    }
    let with: Vec<_> = kept
        .iter()
        .filter_map(|r| metric.of(r).map(|v| (v, metric.windows(r), r.index)))
        .collect();
    let values: Vec<f64> = with.iter().map(|(v, _, _)| *v).collect();
    let windows: Vec<&[f64]> = with.iter().filter_map(|(_, w, _)| *w).collect();
    let rounds: Vec<u32> = with.iter().map(|(_, _, i)| *i).collect();
    if windows.is_empty() {
        stats::Sample::of_rounds(values)
    } else {
        stats::Sample::with_windows(values, &windows)
    }
    .of_rounds_numbered(rounds)
}

/// The typical round-to-round range of a metric over every cell compared
/// (median of each cell's wider side), so a cell whose few rounds agreed
/// by chance is held to the noise the runs show elsewhere. Needs three
/// cells to mean anything; 0 otherwise.
fn run_floor<'a>(estimates: impl Iterator<Item = &'a stats::Estimate>) -> f64 {
    let spreads: Vec<f64> = estimates.map(stats::Estimate::band_range).collect();
    if spreads.len() < 3 {
        return 0.0;
    }
    crate::stats::median(&spreads).unwrap_or(0.0)
}

#[allow(clippy::too_many_arguments)]
fn row(
    metric: Metric,
    cref: &CellRef,
    b: &Cell,
    n: &Cell,
    sb: &stats::Sample,
    sn: &stats::Sample,
    e: Result<stats::Estimate, stats::Insufficient>,
    floor: f64,
    drift: Option<MachineDrift>,
    forced: bool,
) -> Row {
    let figures = |s: &stats::Sample, c: &Cell, range: Option<f64>| Figures {
        rounds: s.values.len(),
        rounds_left_out: figures::left_out_rounds(c).len(),
        windows: s.windows,
        values: s.values.clone(),
        geomean: geomean(&s.values),
        range,
        precision: stats::location(s, CONFIDENCE).map(|l| l.precision()),
    };
    let flags = |c: &Cell| -> Vec<String> {
        c.verdict
            .labels(false)
            .into_iter()
            .map(str::to_string)
            .collect()
    };
    let (base_fig, new_fig) = (figures(sb, b, None), figures(sn, n, None));
    let ratio = base_fig.geomean.zip(new_fig.geomean).map(|(x, y)| y / x);
    let mut r = Row {
        cell: cref.clone(),
        metric,
        unit: metric.unit_of(cref.scenario).to_string(),
        better: metric.better(),
        base: base_fig,
        new: new_fig,
        ratio,
        interval: None,
        band: None,
        call: Call::Inconclusive,
        why: String::new(),
        base_flags: flags(b),
        new_flags: flags(n),
        forced,
        machine: drift,
    };
    match e {
        Ok(e) => {
            let mut band = verdict::band(&e, floor.max(metric.between_runs_floor()));
            let widened = drift.filter(|m| m.widened_by > 0.0 && metric.machine_moves_it());
            if let Some(m) = widened {
                band = (1.0 + band) * (1.0 + m.widened_by) - 1.0;
            }
            let (call, mut why) = verdict::judge(metric, &e, band);
            if let Some(m) = widened {
                why.push_str(&format!(
                    " (widened by {:.1}%: the machine itself ran {} in NEW's rounds, by the calibration probe)",
                    m.widened_by * 100.0,
                    m.slower_or_faster(),
                ));
            }
            r.base.range = Some(e.range_base.exp() - 1.0);
            r.new.range = Some(e.range_new.exp() - 1.0);
            r.ratio = Some(e.ratio);
            r.interval = Some(Interval {
                low: e.low,
                high: e.high,
                df: e.df.is_finite().then_some(e.df),
            });
            r.band = Some(band);
            r.call = call;
            r.why = why;
        }
        Err(why) => {
            r.why = why.to_string();
            let left_out = r.base.rounds_left_out + r.new.rounds_left_out;
            if left_out > 0 {
                r.why.push_str(&format!(
                    " ({} BASE and {} NEW round(s) measured on a busy host or a slowed machine were left out)",
                    r.base.rounds_left_out, r.new.rounds_left_out
                ));
            }
        }
    }
    r
}

fn geomean(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| !(*v > 0.0 && v.is_finite())) {
        return None;
    }
    let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
    crate::stats::mean(&logs).map(f64::exp)
}

fn rejected(cref: &CellRef, b: &Cell, n: &Cell) -> NotCompared {
    let mut reasons = Vec::new();
    for (side, c) in [("BASE", b), ("NEW", n)] {
        if c.verdict.status == Status::Rejected {
            for r in &c.verdict.reasons {
                if r.status() == Status::Rejected {
                    reasons.push(format!("{side} rejected: {r}"));
                }
            }
        }
    }
    NotCompared {
        cell: cref.clone(),
        base_status: b.verdict.status,
        new_status: n.verdict.status,
        reasons,
        newly_rejected: b.verdict.status != Status::Rejected,
    }
}

#[cfg(test)]
mod tests;

/// compare's call on one metric of two *different runs* given only their
/// round values: the interval, the band (the rounds' own range, at least
/// the across-runs floor) and the verdict, as `compare_runs` makes them for
/// a cell, without the cells around it (their typical range) or the
/// calibration probe, both of which can only widen the band. `history`'s
/// false-alarm simulation confirms its change points with it.
#[cfg(test)]
pub(crate) fn call_across_runs(metric: Metric, base: Vec<f64>, new: Vec<f64>) -> Call {
    let e = stats::estimate(
        &stats::Sample::of_rounds(base),
        &stats::Sample::of_rounds(new),
    );
    match e {
        Ok(e) => {
            let floor = metric.across_runs_floor().max(metric.between_runs_floor());
            verdict::judge(metric, &e, verdict::band(&e, floor)).0
        }
        Err(_) => Call::Inconclusive,
    }
}
