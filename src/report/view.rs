//! What the human-readable run reports (results.md, report.html) must show
//! the same way: the order of frameworks and load columns, which cell sits
//! where, which cells get a numbered note (so "note 3" is the same cell in
//! both files), and the figures a fixed-rate headline is made of.
//!
//! It only looks things up in [`Results`]; formatting is each exporter's.

use std::collections::BTreeMap;

use super::fmt::{micros, thousands};
use crate::contract::{Protocol, Scenario};
use crate::results::{
    Cell, CellKey, Exclusion, FrameworkFacts, ObjectiveStatus, Reason, Results, Status,
};
use crate::stats;

/// One load column of the tables and charts: scenario, connections and the
/// target rate in fixed-rate mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Column {
    /// Contract scenario.
    pub scenario: Scenario,
    /// Protocol spoken.
    pub protocol: Protocol,
    /// Connections.
    pub concurrency: u32,
    /// Target rate, req/s (fixed-rate mode only).
    pub rate: Option<u64>,
}

impl Column {
    fn of(k: &CellKey) -> Column {
        Column {
            scenario: k.scenario,
            protocol: k.protocol,
            concurrency: k.concurrency,
            rate: k.rate,
        }
    }

    /// Whether `key` is a cell of this column.
    pub fn holds(&self, key: &CellKey) -> bool {
        Column::of(key) == *self
    }

    /// Whether the column is measured at a fixed rate, where latency, not
    /// req/s, is the headline.
    pub fn fixed_rate(&self) -> bool {
        self.rate.is_some()
    }

    /// The column's heading in tables: `json c=100`, `json h2 c=100` (the
    /// protocol when it is not http1) or `json c=100 @5,000/s`.
    pub fn label(&self) -> String {
        let what = if self.protocol.is_http1() {
            self.scenario.to_string()
        } else {
            format!("{} {}", self.scenario, self.protocol)
        };
        match self.rate {
            Some(rate) => format!(
                "{what} c={} @{}/s",
                self.concurrency,
                thousands(rate as f64)
            ),
            None => format!("{what} c={}", thousands(f64::from(self.concurrency))),
        }
    }

    /// A file-name-safe slug, e.g. `plaintext-c256`, `json-h2-c64` or
    /// `json-c64-r20000` (a cell's stem without the framework).
    pub fn slug(&self) -> String {
        let mut s = self.scenario.to_string();
        if !self.protocol.is_http1() {
            s.push_str(&format!("-{}", self.protocol));
        }
        s.push_str(&format!("-c{}", self.concurrency));
        if let Some(r) = self.rate {
            s.push_str(&format!("-r{r}"));
        }
        s
    }
}

/// The gates a run applied, in one sentence for results.md and report.html:
/// what rejects, what flags, which rounds are left out of the figures.
pub(crate) fn gates_sentence(t: &crate::results::Thresholds) -> String {
    use super::fmt::percent;
    format!(
        "Rejected when connections established < requested, error rate > {}, an OOM kill \
         or crash, or a failed contract verification; flagged when the loader used ≥ {} \
         of its CPU or was throttled by its CPU quota in more than {} of scheduler periods, \
         achieved < {} of a fixed target rate, lagged its schedule by more than {} at any \
         point, the CV of req/s across rounds exceeded {}, a round was more than {} from the \
         median, or other processes and the hypervisor's steal together took more than {:.2} \
         CPU cores of the host. Rounds on such a busy host, and rounds whose calibration \
         probe read more than {} slower than the framework's fast reference (a slowed \
         machine), are left out of the figures and, with a fixed number of rounds, measured \
         once more.{}",
        percent(t.max_error_rate),
        percent(t.loader_saturation),
        percent(t.max_loader_throttled),
        percent(t.min_rate_ratio),
        micros(t.max_schedule_lag_us as f64),
        percent(t.max_cv),
        percent(t.suspect_round),
        t.max_foreign_cores,
        percent(t.slowed_machine),
        t.off.sentence()
    )
}

/// Reasons that get a note: everything except the environment flag, which
/// is said once at the top and marked † on every figure instead.
pub(crate) fn noted(cell: &Cell) -> Vec<&Reason> {
    cell.verdict
        .reasons
        .iter()
        .filter(|r| !matches!(r, Reason::EnvironmentNotAccepted))
        .collect()
}

/// The labels a rejected cell shows instead of its number (the environment
/// flag left out: it is said once for the whole run).
pub(crate) fn rejection_labels(c: &Cell) -> Vec<&'static str> {
    c.verdict
        .labels(true)
        .into_iter()
        .filter(|l| *l != Reason::EnvironmentNotAccepted.label())
        .collect()
}

/// The achieved request rate of a fixed-rate cell: the median over rounds
/// of requests sent per measured second, req/s.
pub(crate) fn achieved_rps(c: &Cell) -> Option<f64> {
    let achieved: Vec<f64> = c
        .rounds
        .iter()
        .filter_map(|r| r.rate.as_ref().map(|f| f.achieved_rps))
        .collect();
    stats::median(&achieved)
}

/// A fixed-rate cell's headline without its marker: `p50 / p99 / p99.9`
/// of the merged histogram (latency from each scheduled send), then the
/// achieved rate; none without a summary.
pub(crate) fn latency_figure(c: &Cell) -> Option<String> {
    let s = c.summary.as_ref()?;
    let achieved = achieved_rps(c)
        .map(|a| format!(" at {} req/s", thousands(a)))
        .unwrap_or_default();
    Some(format!(
        "{} / {} / {}{achieved}",
        s.latency.show(s.latency.p50_us),
        s.latency.show(s.latency.p99_us),
        s.latency.show(s.latency.p999_us)
    ))
}

/// Requests due at a fixed rate that were never sent (the server was still
/// busy with earlier ones when the run ended), summed over every round,
/// and the requests due: `(unsent, due)`; none when nothing went unsent.
/// The error rate counts what was sent, so a server past its capacity
/// would read "0 errors" beside its unsent requests without this.
pub(crate) fn unsent(c: &Cell) -> Option<(u64, u64)> {
    let unsent: u64 = c.rounds.iter().map(|r| r.requests.unsent).sum();
    let due: u64 = c.rounds.iter().map(|r| r.requests.due()).sum();
    (unsent > 0).then_some((unsent, due))
}

/// The errors column of a cell: `12 (0.1%)`, and `; 82,853 unsent
/// (69.0%)` when requests due at a fixed rate were never sent; none
/// without a summary.
pub(crate) fn errors_text(c: &Cell) -> Option<String> {
    let x = c.summary.as_ref()?;
    let n = x.errors.total() + x.responses.non_2xx();
    let mut out = format!(
        "{} ({})",
        thousands(n as f64),
        super::fmt::percent(x.error_rate)
    );
    if let Some((unsent, due)) = unsent(c) {
        out.push_str(&format!(
            "; {} unsent ({})",
            thousands(unsent as f64),
            super::fmt::percent(unsent as f64 / due as f64)
        ));
    }
    Some(out)
}

/// The mean latency of a cell's answered requests, labelled as such where
/// some requests are beyond the timeout (their latency is unknown, so no
/// mean of every request exists): `1.20 ms`, `3.52 s (answered only)`;
/// none when nothing was answered, never 0.
pub(crate) fn mean_of_answered(l: &crate::results::Latency) -> Option<String> {
    if l.count == 0 {
        return None;
    }
    let mean = micros(l.mean_us);
    Some(if l.beyond_timeout > 0 {
        format!("{mean} (answered only)")
    } else {
        mean
    })
}

/// The precision of a cell's headline figure, after the figure:
/// ` ±1.2%` (req/s), ` (p99 ±3.4%)` at a fixed rate, where the figure shown
/// is several percentiles; empty when the cell has no interval.
pub(crate) fn precision_mark(c: &Cell) -> String {
    match &c.precision {
        None => String::new(),
        Some(p) if p.unit == "req/s" => format!(" {}", p.label()),
        Some(p) => format!(" ({} {})", p.by, p.label()),
    }
}

/// `≥ ` before a closed-loop cell's req/s when the loader was the
/// bottleneck (client-bound): the server may have had more to give, so
/// the figure is only a floor (and the cell has no rank group).
pub(crate) fn floor_mark(c: &Cell) -> &'static str {
    if c.key.rate.is_none() && crate::judge::gates::client_bound(c) {
        "≥ "
    } else {
        ""
    }
}

/// ` #2–3`: the cell's rank group after its figure, when it has one.
pub(crate) fn rank_mark(c: &Cell) -> String {
    c.rank
        .as_ref()
        .map(|r| format!(" {}", r.label()))
        .unwrap_or_default()
}

/// The 95% interval of a cell's headline figure: `119,800–121,400 req/s
/// (±0.7%)`, `1.61–1.72 ms p99 (±3.3%)`, and `; asked ±2.0%` when the
/// rounds went on until precise and stopped short of it; none without an
/// interval.
pub(crate) fn precision_interval(c: &Cell) -> Option<String> {
    let p = c.precision.as_ref()?;
    let range = if p.unit == "req/s" {
        // A rate, in the scenario's unit (msg/s for WebSocket).
        let unit = c.key.scenario.rate_unit();
        format!("{}–{} {unit}", thousands(p.low), thousands(p.high))
    } else {
        format!("{}–{} {}", micros(p.low), micros(p.high), p.by)
    };
    let short = match p.asked {
        Some(a) if !p.met() => format!("; asked ±{:.1}%", a * 100.0),
        _ => String::new(),
    };
    Some(format!("{range} ({}{short})", p.label()))
}

/// How the intervals are made, for a page that shows them.
pub(crate) const PRECISION_METHOD: &str = "±N% is the half-width of the 95% interval of the headline figure \
     (req/s; p99 at a fixed rate) over the cell's clean rounds: Student's t on the logs of the round \
     values, floored by the spread of their seconds (docs/results.md); none below 3 rounds.";

/// Each round's req/s and its deviation from the cell's median, in round
/// order: `120,000 (-0.5%), 120,600 (+0.0%)`; none without a summary.
pub(crate) fn rounds_from_median(c: &Cell) -> Option<String> {
    let x = c.summary.as_ref()?;
    let devs: Vec<String> = x
        .throughput_rps
        .deviation_from_median
        .iter()
        .zip(&c.rounds)
        .map(|(d, r)| format!("{} ({:+.1}%)", thousands(r.throughput_rps), d * 100.0))
        .collect();
    Some(devs.join(", "))
}

/// Why a table position holds no cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Missing {
    /// The framework does not take part in the scenario.
    Skipped,
    /// Planned, not measured (yet).
    NotMeasured,
    /// Not part of the plan at all.
    NotPlanned,
}

impl Missing {
    /// The words a table shows.
    pub fn text(self) -> &'static str {
        match self {
            Missing::Skipped => "skipped",
            Missing::NotMeasured => "not measured",
            Missing::NotPlanned => "–",
        }
    }
}

/// A run as the reports lay it out.
pub(crate) struct RunView<'a> {
    /// The run.
    pub r: &'a Results,
    /// Note number of every cell with a flag or rejection, in plan order.
    pub notes: BTreeMap<&'a CellKey, usize>,
}

impl<'a> RunView<'a> {
    /// Number the notes of `r`.
    pub fn new(r: &'a Results) -> RunView<'a> {
        let mut notes = BTreeMap::new();
        for k in &r.plan {
            if let Some(c) = r.cell(k) {
                if !noted(c).is_empty() {
                    let n = notes.len() + 1;
                    notes.insert(k, n);
                }
            }
        }
        // Cells outside the plan (should not happen) still get notes.
        for c in &r.cells {
            if !noted(c).is_empty() && !notes.contains_key(&c.key) {
                let n = notes.len() + 1;
                notes.insert(&c.key, n);
            }
        }
        RunView { r, notes }
    }

    /// The note number of the cell at `key`, if it has one.
    pub fn note(&self, key: &CellKey) -> Option<usize> {
        self.notes.get(key).copied()
    }

    /// Notes in number order.
    pub fn notes_in_order(&self) -> Vec<(usize, &'a CellKey)> {
        let mut ordered: Vec<(usize, &CellKey)> =
            self.notes.iter().map(|(k, n)| (*n, *k)).collect();
        ordered.sort_by_key(|(n, _)| *n);
        ordered
    }

    fn keys(&self) -> impl Iterator<Item = &'a CellKey> + 'a {
        let r = self.r;
        r.plan.iter().chain(r.cells.iter().map(|c| &c.key))
    }

    /// Frameworks in plan order.
    pub fn frameworks(&self) -> Vec<&'a str> {
        let mut out: Vec<&str> = Vec::new();
        for k in self.keys() {
            if !out.contains(&k.framework.as_str()) {
                out.push(&k.framework);
            }
        }
        out
    }

    /// Load columns in plan order, of one scenario or of all.
    pub fn columns(&self, scenario: Option<Scenario>) -> Vec<Column> {
        let mut out = Vec::new();
        for k in self.keys() {
            let col = Column::of(k);
            if scenario.is_none_or(|s| s == k.scenario) && !out.contains(&col) {
                out.push(col);
            }
        }
        out
    }

    /// The cell of `fw` in `col`, if measured.
    pub fn find(&self, fw: &str, col: Column) -> Option<&'a Cell> {
        self.r
            .cells
            .iter()
            .find(|c| c.key.framework == fw && col.holds(&c.key))
    }

    /// Why `fw` was not run in `col` (its scenario or protocol), if it was
    /// skipped.
    pub fn skipped_reason(&self, fw: &str, col: Column) -> Option<&'a str> {
        self.r
            .skipped
            .iter()
            .find(|s| {
                s.framework == fw
                    && s.scenario.is_none_or(|x| x == col.scenario)
                    && s.protocol.is_none_or(|p| p == col.protocol)
            })
            .map(|s| s.reason.as_str())
    }

    /// Why `fw` has no cell in `col`.
    pub fn missing(&self, fw: &str, col: Column) -> Missing {
        if self.skipped_reason(fw, col).is_some() {
            Missing::Skipped
        } else if self
            .r
            .plan
            .iter()
            .any(|k| k.framework == fw && col.holds(k))
        {
            Missing::NotMeasured
        } else {
            Missing::NotPlanned
        }
    }

    /// Scenarios contract verification excluded, with the framework.
    pub fn exclusions(&self) -> Vec<(&'a FrameworkFacts, &'a Exclusion)> {
        self.r
            .frameworks
            .iter()
            .filter_map(|f| f.verify.as_ref().map(|v| (f, v)))
            .flat_map(|(f, v)| v.excluded.iter().map(move |e| (f, e)))
            .collect()
    }

    /// Cells with the given status.
    pub fn count(&self, status: Status) -> usize {
        self.r
            .cells
            .iter()
            .filter(|c| c.verdict.status == status)
            .count()
    }
}

/// The objectives table's columns, the same in results.md and report.html.
pub(crate) const OBJECTIVE_HEAD: [&str; 6] = [
    "objective",
    "framework",
    "scenario, load",
    "verdict",
    "interval of the median over rounds",
    "why",
];

/// One row of the objectives table: one objective judged on one cell.
pub(crate) struct ObjectiveRow<'a> {
    /// The objective as written (`p99 < 5ms`).
    pub objective: &'a str,
    /// Framework of the cell.
    pub framework: &'a str,
    /// `plaintext c=100`.
    pub column: String,
    /// Met, missed, undecided.
    pub status: ObjectiveStatus,
    /// `✓ met`, `✗ missed`, `? undecided`.
    pub verdict: String,
    /// The interval judged, with its unit.
    pub interval: String,
    /// Why: the relation of the interval to the bound, or why there is
    /// no interval.
    pub why: &'a str,
}

/// The rows of the objectives table, in plan order.
pub(crate) fn objective_rows(r: &Results) -> Vec<ObjectiveRow<'_>> {
    r.objectives
        .iter()
        .map(|o| ObjectiveRow {
            objective: &o.objective.text,
            framework: &o.cell.framework,
            column: Column::of(&o.cell).label(),
            status: o.status,
            verdict: format!(
                "{} {}",
                match o.status {
                    ObjectiveStatus::Met => "✓",
                    ObjectiveStatus::Missed => "✗",
                    ObjectiveStatus::Undecided => "?",
                },
                o.status.word()
            ),
            interval: o.interval_text(),
            // The interval has its own column; what is left is the call.
            why: match &o.interval {
                Some(_) => o.why.rsplit_once(": ").map_or(o.why.as_str(), |(_, r)| r),
                None => &o.why,
            },
        })
        .collect()
}

/// `3 met, 1 missed, 2 undecided`.
pub(crate) fn objectives_tally(r: &Results) -> String {
    let n = |s: ObjectiveStatus| r.objectives.iter().filter(|o| o.status == s).count();
    format!(
        "{} met, {} missed, {} undecided",
        n(ObjectiveStatus::Met),
        n(ObjectiveStatus::Missed),
        n(ObjectiveStatus::Undecided)
    )
}

/// What the objectives table means, in one paragraph for both pages.
pub(crate) const OBJECTIVES_METHOD: &str = "Each objective of the profile is judged on every cell it applies to, on an interval of the cell's figure over its rounds, not on the median alone: **met** when the whole interval satisfies it, **missed** when none of it does (or the cell was rejected, or has no result), **undecided** when the interval straddles the bound. The interval is the order-statistic interval of the median: 95% from 6 rounds up, the min–max of fewer rounds (which covers the median with 1 − 2^(1−n): 75% for 3 rounds); with fewer than 3 rounds (50% for 2, 0% for one) every objective is undecided. The rounds are the headline's: rounds on a busy host or a slowed machine are left out of speed figures (error rate and memory peak count every round), and a percentile is the headline's own, from the kept rounds' merged histogram, the interval widened to hold it. `fairground run` exits 99 when any objective is missed.";

/// The sentence that says where a multi-host run ran, for results.md and
/// report.html alike: `code` wraps an endpoint or address as code, `plain`
/// escapes plain text for the format.
pub fn hosts_sentence(
    t: &crate::results::Topology,
    code: impl Fn(&str) -> String,
    plain: impl Fn(&str) -> String,
) -> String {
    format!(
        "Server on {}; {} loader(s) on {}, on their hosts' network stacks. The loaders \
         reached the server at {} ({}) through its {}. Server CPU and memory: {}.",
        code(&t.server),
        t.loaders.len(),
        t.loaders
            .iter()
            .map(|l| code(l))
            .collect::<Vec<_>>()
            .join(", "),
        code(&t.server_address),
        plain(&t.server_address_source),
        plain(&t.traffic_path),
        plain(&t.server_resources)
    )
}

/// The unit of a set of columns' rates: one unit when they share it
/// (`req/s`, `msg/s`, `rpc/s`), else req/s with the others named
/// (`req/s (msg/s for WebSocket, rpc/s for gRPC)`).
pub(crate) fn rate_words(scenarios: &[crate::contract::Scenario]) -> String {
    let mut units: Vec<&str> = scenarios.iter().map(|s| s.rate_unit()).collect();
    units.sort_unstable();
    units.dedup();
    if units.len() <= 1 {
        return units.first().copied().unwrap_or("req/s").to_string();
    }
    let mut others = Vec::new();
    if scenarios.iter().any(|s| s.is_websocket()) {
        others.push("msg/s for WebSocket");
    }
    if scenarios.iter().any(|s| s.is_grpc()) {
        others.push("rpc/s for gRPC");
    }
    format!("req/s ({})", others.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::sample_results;

    #[test]
    fn notes_follow_the_plan_and_columns_keep_plan_order() {
        let r = sample_results();
        let v = RunView::new(&r);
        let order: Vec<String> = v
            .notes_in_order()
            .iter()
            .map(|(_, k)| k.to_string())
            .collect();
        assert_eq!(order[0], "axum plaintext c=10000");
        assert_eq!(order.len(), 6);
        let cols: Vec<String> = v.columns(None).iter().map(Column::slug).collect();
        assert_eq!(cols[..2], ["plaintext-c100", "plaintext-c10000"]);
        assert_eq!(v.frameworks(), ["axum", "express", "fastapi"]);
        let param = v.columns(Some(Scenario::Param))[0];
        assert_eq!(v.missing("fastapi", param), Missing::Skipped);
    }
}
