//! What a comparison found, as data: the document `--json` prints (JSON
//! Schema in docs/compare.schema.json, versioned by
//! [`COMPARE_SCHEMA_VERSION`]) and every other output renders.
//!
//! Types only, with their units in the field names; no statistics, no I/O.

use serde::{Deserialize, Serialize};

use super::figures::{Better, Metric};
use super::verdict::Call;
use crate::contract::{Protocol, Scenario};
use crate::results::Status;

/// Version of the comparison JSON layout. Bump on any change a reader of an
/// older document would misread.
pub const COMPARE_SCHEMA_VERSION: u32 = 1;

/// Everything `fairground compare` concluded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Comparison {
    /// Layout version of this document ([`COMPARE_SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// Version of fairground that compared.
    pub fairground_version: String,
    /// The baseline.
    pub base: Side,
    /// The run (or framework) judged against the baseline.
    pub new: Side,
    /// How the intervals and bands were computed.
    pub method: Method,
    /// Whether the runs differ in something that changes the figures and
    /// `--force` compared them anyway: every verdict is then marked.
    pub forced: bool,
    /// What differs between the runs (empty unless forced: otherwise the
    /// comparison is refused).
    pub differences: Vec<Difference>,
    /// Facts one of the runs did not record, so they could not be checked.
    pub unchecked: Vec<String>,
    /// One row per metric of each cell compared, regressions first, then
    /// improvements, within noise, inconclusive.
    pub rows: Vec<Row>,
    /// Cells in both runs that were not compared because a side rejected them.
    pub not_compared: Vec<NotCompared>,
    /// Cells measured in BASE only.
    pub only_in_base: Vec<CellRef>,
    /// Cells measured in NEW only.
    pub only_in_new: Vec<CellRef>,
    /// Counts of each verdict.
    pub summary: Summary,
}

/// One side of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Side {
    /// The results.json read.
    pub path: String,
    /// Run identifier.
    pub run_id: String,
    /// Profile that was run.
    pub profile_name: String,
    /// When the run started (UTC, RFC 3339).
    pub started_at: String,
    /// The framework compared, when the side named one (`RUN:FRAMEWORK`).
    pub framework: Option<String>,
}

impl Side {
    /// `run R (profile P, started T, framework F)`, each name through
    /// `code` (backticks in Markdown, as it is on a terminal).
    pub fn describe(&self, code: impl Fn(&str) -> String) -> String {
        let fw = self
            .framework
            .as_deref()
            .map(|f| format!(", framework {}", code(f)))
            .unwrap_or_default();
        format!(
            "run {} (profile {}, started {}{fw})",
            code(&self.run_id),
            code(&self.profile_name),
            self.started_at
        )
    }
}

/// The statistical method, recorded with every comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Method {
    /// Short name of the interval method.
    pub interval: String,
    /// Confidence level of the interval (a fraction).
    pub confidence: f64,
    /// Fewest rounds per side for a verdict other than inconclusive.
    pub min_rounds: usize,
    /// How the noise band is made, in words.
    pub band: String,
}

/// A fact that differs between the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Difference {
    /// Field, e.g. `load.pipeline`.
    pub field: String,
    /// Its value in BASE.
    pub base: String,
    /// Its value in NEW.
    pub new: String,
}

/// Coordinates of a compared cell. When the two sides name different
/// frameworks (`RUN:a RUN:b`), each side's framework is given.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct CellRef {
    /// Framework in BASE.
    pub base_framework: String,
    /// Framework in NEW (equal to `base_framework` unless two frameworks
    /// are compared).
    pub new_framework: String,
    /// Scenario.
    pub scenario: Scenario,
    /// Protocol in BASE; absent for http1.
    #[serde(default, skip_serializing_if = "Protocol::is_http1")]
    pub base_protocol: Protocol,
    /// Protocol in NEW (equal to `base_protocol` unless two protocols are
    /// compared: `RUN:nginx/h2 RUN:nginx/http1`); absent for http1.
    #[serde(default, skip_serializing_if = "Protocol::is_http1")]
    pub new_protocol: Protocol,
    /// Connections.
    pub concurrency: u32,
    /// Fixed rate, req/s; absent in closed-loop mode.
    pub rate: Option<u64>,
}

impl std::fmt::Display for CellRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.base_framework == self.new_framework {
            f.write_str(&self.base_framework)?;
        } else {
            write!(f, "{}→{}", self.base_framework, self.new_framework)?;
        }
        write!(f, " {}", self.scenario)?;
        if self.base_protocol != self.new_protocol {
            write!(f, " {}→{}", self.base_protocol, self.new_protocol)?;
        } else if !self.base_protocol.is_http1() {
            write!(f, " {}", self.base_protocol)?;
        }
        write!(f, " c={}", self.concurrency)?;
        if let Some(r) = self.rate {
            write!(f, " rate={r}/s")?;
        }
        Ok(())
    }
}

/// One metric of one cell, compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Row {
    /// The cell.
    pub cell: CellRef,
    /// The metric.
    pub metric: Metric,
    /// Unit of `base.geomean`, `new.geomean` and the round values.
    pub unit: String,
    /// Which way is better.
    pub better: Better,
    /// BASE's figures.
    pub base: Figures,
    /// NEW's figures.
    pub new: Figures,
    /// Ratio of geometric means NEW / BASE; absent when a side has no
    /// positive value.
    pub ratio: Option<f64>,
    /// 95% confidence interval on the ratio; absent when inconclusive.
    pub interval: Option<Interval>,
    /// Noise band as a fraction: ratios between 1/(1+band) and 1+band are
    /// noise. The wider side's `range`, or the median range of the metric
    /// over the cells compared if larger, and at least 1% unless neither
    /// side varies at all; absent when inconclusive.
    pub band: Option<f64>,
    /// The verdict.
    pub call: Call,
    /// Why, in words (the interval against the band, or what was missing).
    pub why: String,
    /// Flags the gates put on the cell in BASE (labels; the cell is compared).
    pub base_flags: Vec<String>,
    /// Flags the gates put on the cell in NEW.
    pub new_flags: Vec<String>,
    /// Whether this verdict stands on runs that differ in what changes the
    /// figures (`--force`).
    pub forced: bool,
    /// The machine's own change between the cell's BASE and NEW rounds
    /// (the calibration probe), when both sides were probed; its
    /// `widened_by` is in `band` for req/s, latency and CPU per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineDrift>,
}

/// How much faster or slower the machine itself ran in NEW's rounds of a
/// cell than in BASE's, by the calibration probe timed on the server's
/// core around each round.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MachineDrift {
    /// NEW/BASE of the loopback exchange (the kernel's path and the CPU);
    /// above ×1: slower in NEW.
    pub exchange: ProbeRatio,
    /// The smallest change of the machine the interval allows, a
    /// fraction: 0 when it includes ×1. The band of req/s, latency and CPU
    /// per request is widened by it.
    pub widened_by: f64,
}

impl MachineDrift {
    /// "slower" or "faster": which way the machine moved in NEW.
    pub fn slower_or_faster(&self) -> &'static str {
        if self.exchange.ratio > 1.0 {
            "slower"
        } else {
            "faster"
        }
    }
}

/// A probe figure's ratio NEW/BASE of geometric means over rounds, with
/// its 95% interval (the same Welch interval as the metrics').
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProbeRatio {
    /// Ratio of geometric means.
    pub ratio: f64,
    /// Lower end of the 95% interval.
    pub low: f64,
    /// Upper end.
    pub high: f64,
}

/// One side's figures of one metric of one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Figures {
    /// Rounds with a value, used.
    pub rounds: usize,
    /// Rounds left out because the gates found them measured on a busy host
    /// (foreign CPU above the run's threshold) or on a slowed machine (the
    /// calibration probe).
    pub rounds_left_out: usize,
    /// Per-second windows behind the round values (req/s only; else 0).
    pub windows: usize,
    /// The value of each round, in round order, in `unit`.
    pub values: Vec<f64>,
    /// Geometric mean of the round values (the centre the ratio compares);
    /// absent when a value is not positive or there is none.
    pub geomean: Option<f64>,
    /// How far apart the best and worst rounds are: largest / smallest
    /// round value − 1, a fraction; absent when inconclusive.
    pub range: Option<f64>,
    /// This side's own precision: half the width of the 95% interval of
    /// its geometric mean (Student's t on the logs of its rounds, floored
    /// by their windows, the interval results.md shows beside a headline),
    /// relative; absent below 3 rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<f64>,
}

/// A confidence interval on a ratio.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Interval {
    /// Lower end.
    pub low: f64,
    /// Upper end.
    pub high: f64,
    /// Degrees of freedom of the t quantile (Welch–Satterthwaite); null
    /// when neither side varies (the ratio is exact).
    pub df: Option<f64>,
}

/// A cell present on both sides but not compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NotCompared {
    /// The cell.
    pub cell: CellRef,
    /// Status of the cell in BASE.
    pub base_status: Status,
    /// Status of the cell in NEW.
    pub new_status: Status,
    /// Why, in words: the rejection reasons of the side(s) that rejected it.
    pub reasons: Vec<String>,
    /// Whether BASE measured it and NEW rejected it: a server that now fails
    /// (counts as a regression for `--fail-on-regression`).
    pub newly_rejected: bool,
}

/// How many rows got each verdict.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Summary {
    /// Rows regressed.
    pub regressed: usize,
    /// Rows improved.
    pub improved: usize,
    /// Rows within noise.
    pub within_noise: usize,
    /// Rows inconclusive.
    pub inconclusive: usize,
    /// Cells not compared (rejected on a side).
    pub not_compared: usize,
    /// Cells BASE measured and NEW rejected.
    pub newly_rejected: usize,
}

impl Comparison {
    /// Whether anything regressed: a row, or a cell NEW now rejects.
    pub fn any_regression(&self) -> bool {
        self.summary.regressed > 0 || self.summary.newly_rejected > 0
    }

    /// The cells whose machine changed between BASE and NEW by the
    /// calibration probe (bands widened), each once, in row order.
    pub fn machine_changes(&self) -> Vec<(&CellRef, MachineDrift)> {
        let mut seen: Vec<(&CellRef, MachineDrift)> = Vec::new();
        for r in &self.rows {
            if let Some(m) = r.machine.filter(|m| m.widened_by > 0.0) {
                if !seen.iter().any(|(c, _)| *c == &r.cell) {
                    seen.push((&r.cell, m));
                }
            }
        }
        seen
    }
}

impl MachineDrift {
    /// The drift in words: both probe ratios with their intervals and
    /// what was widened.
    pub fn describe(&self) -> String {
        let r = |p: &ProbeRatio| format!("×{:.3} (×{:.3}–×{:.3})", p.ratio, p.low, p.high);
        format!(
            "the machine itself ran {} in NEW (calibration probe on the server's core, NEW/BASE of a loopback exchange: {}); the bands of req/s, latency and CPU/req are widened by {:.1}%",
            self.slower_or_faster(),
            r(&self.exchange),
            self.widened_by * 100.0
        )
    }
}

/// The JSON Schema of the comparison document (docs/compare.schema.json).
pub fn schema() -> schemars::Schema {
    schemars::schema_for!(Comparison)
}
