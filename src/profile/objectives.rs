//! Service-level objectives as a profile writes them (`objectives:`, `p99 <
//! 5ms`, `rps >= 50000`, …): the figure, the comparison, the bound in its
//! base unit, and the one parser of an objective's text. What a finished
//! run's rounds say about each is `results::objectives`.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::contract::Scenario;

/// The figure an objective is about, each read per round.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ObjectiveMetric {
    /// Median latency of the round, µs.
    P50,
    /// 90th percentile latency, µs.
    P90,
    /// 99th percentile latency, µs.
    P99,
    /// 99.9th percentile latency, µs.
    P999,
    /// 2xx answers per second of the window.
    Rps,
    /// (errors + non-2xx answers) / attempts, a fraction.
    ErrorRate,
    /// Server CPU time per 2xx answer, µs.
    CpuUsPerRequest,
    /// The server's memory high-water mark inside the window, bytes.
    MemoryWindowPeak,
}

impl ObjectiveMetric {
    /// Every metric, in the order the docs list them.
    pub const ALL: [ObjectiveMetric; 8] = [
        ObjectiveMetric::P50,
        ObjectiveMetric::P90,
        ObjectiveMetric::P99,
        ObjectiveMetric::P999,
        ObjectiveMetric::Rps,
        ObjectiveMetric::ErrorRate,
        ObjectiveMetric::CpuUsPerRequest,
        ObjectiveMetric::MemoryWindowPeak,
    ];

    /// The name written in a profile.
    pub fn name(self) -> &'static str {
        match self {
            ObjectiveMetric::P50 => "p50",
            ObjectiveMetric::P90 => "p90",
            ObjectiveMetric::P99 => "p99",
            ObjectiveMetric::P999 => "p999",
            ObjectiveMetric::Rps => "rps",
            ObjectiveMetric::ErrorRate => "error_rate",
            ObjectiveMetric::CpuUsPerRequest => "cpu_us_per_request",
            ObjectiveMetric::MemoryWindowPeak => "memory_window_peak",
        }
    }

    /// What a bound is written as, for error messages.
    fn bound_hint(self) -> &'static str {
        match self {
            ObjectiveMetric::P50
            | ObjectiveMetric::P90
            | ObjectiveMetric::P99
            | ObjectiveMetric::P999 => "a duration like `5ms` or `800us`",
            ObjectiveMetric::Rps => "answers per second, a number like `50000`",
            ObjectiveMetric::ErrorRate => "a percentage like `0.1%` or a fraction like `0.001`",
            ObjectiveMetric::CpuUsPerRequest => "microseconds, a number like `30` (or `30us`)",
            ObjectiveMetric::MemoryWindowPeak => "a size like `256MiB`",
        }
    }

    /// Parse a bound written for this metric into its base unit (µs,
    /// req/s, fraction, µs, bytes).
    fn parse_bound(self, text: &str) -> Result<f64, String> {
        let t = text.trim();
        let bad = || format!("`{t}` is not {}", self.bound_hint());
        let number = |s: &str| -> Result<f64, String> {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(bad)
        };
        match self {
            ObjectiveMetric::P50
            | ObjectiveMetric::P90
            | ObjectiveMetric::P99
            | ObjectiveMetric::P999 => {
                if t.parse::<f64>().is_ok() {
                    return Err(format!(
                        "`{t}` has no unit; {}",
                        bad().replace(&format!("`{t}` is not "), "a latency bound is ")
                    ));
                }
                let d: crate::profile::units::Human = t.parse().map_err(|e: String| {
                    format!("{e}; a latency bound is {}", self.bound_hint())
                })?;
                Ok(d.0.as_nanos() as f64 / 1e3)
            }
            ObjectiveMetric::Rps => number(t),
            ObjectiveMetric::ErrorRate => {
                let v = match t.strip_suffix('%') {
                    Some(p) => number(p)? / 100.0,
                    None => number(t)?,
                };
                if v > 1.0 {
                    return Err(format!(
                        "`{t}` is more than 100%; an error rate is a fraction from 0 to 1 or a percentage"
                    ));
                }
                Ok(v)
            }
            ObjectiveMetric::CpuUsPerRequest => {
                number(t.strip_suffix("us").or(t.strip_suffix("µs")).unwrap_or(t))
            }
            ObjectiveMetric::MemoryWindowPeak => {
                let b: crate::profile::units::Bytes = t
                    .parse()
                    .map_err(|e: String| format!("{e}; a memory bound is {}", self.bound_hint()))?;
                Ok(b.0 as f64)
            }
        }
    }

    /// A value of this metric for people, with its unit.
    pub fn format(self, v: f64) -> String {
        if v.is_infinite() {
            return "> timeout".into();
        }
        match self {
            ObjectiveMetric::P50
            | ObjectiveMetric::P90
            | ObjectiveMetric::P99
            | ObjectiveMetric::P999
            | ObjectiveMetric::CpuUsPerRequest => crate::units::micros(v),
            ObjectiveMetric::Rps => format!("{} req/s", crate::units::thousands(v)),
            ObjectiveMetric::ErrorRate => {
                // Enough digits that 0.104% never reads as 0.1%.
                let pct = v * 100.0;
                if pct == 0.0 {
                    "0%".into()
                } else {
                    format!("{}%", crate::units::sig3(pct))
                }
            }
            ObjectiveMetric::MemoryWindowPeak => crate::units::bytes(v),
        }
    }

    /// Whether larger values are better (throughput) or worse (the rest).
    pub fn higher_is_better(self) -> bool {
        matches!(self, ObjectiveMetric::Rps)
    }
}

impl fmt::Display for ObjectiveMetric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the figure must relate to the bound.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub enum Op {
    /// `<`
    #[serde(rename = "<")]
    Lt,
    /// `<=`
    #[serde(rename = "<=")]
    Le,
    /// `>`
    #[serde(rename = ">")]
    Gt,
    /// `>=`
    #[serde(rename = ">=")]
    Ge,
}

impl Op {
    /// The symbol as written.
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }

    /// Whether `v` satisfies `v OP bound`.
    pub fn holds(self, v: f64, bound: f64) -> bool {
        match self {
            Op::Lt => v < bound,
            Op::Le => v <= bound,
            Op::Gt => v > bound,
            Op::Ge => v >= bound,
        }
    }
}

/// One objective, validated: which cells it applies to and what it asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Objective {
    /// The scenario it applies to; `None`: every scenario of the profile
    /// (written under `all:`).
    pub scenario: Option<Scenario>,
    /// Only these frameworks; `None`: every framework.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frameworks: Option<Vec<String>>,
    /// The figure.
    pub metric: ObjectiveMetric,
    /// How the figure must relate to the bound.
    pub op: Op,
    /// The bound in the metric's base unit: µs for latencies and CPU per
    /// request, req/s, a fraction for the error rate, bytes for memory.
    pub bound: f64,
    /// The objective as written in the profile, e.g. `p99 < 5ms`.
    pub text: String,
}

impl Objective {
    /// Parse `METRIC OP BOUND` (`p99 < 5ms`, `rps >= 50000`,
    /// `error_rate < 0.1%`) for `scenario` and `frameworks`.
    pub fn parse(
        text: &str,
        scenario: Option<Scenario>,
        frameworks: Option<Vec<String>>,
    ) -> Result<Objective, ObjectiveParseError> {
        let t = text.trim();
        let at = t
            .find(['<', '>', '='])
            .ok_or(ObjectiveParseError::NoOperator)?;
        let name = t[..at].trim();
        let rest = &t[at..];
        let (op, bound) = [("<=", Op::Le), (">=", Op::Ge), ("<", Op::Lt), (">", Op::Gt)]
            .into_iter()
            .find_map(|(sym, op)| rest.strip_prefix(sym).map(|b| (op, b)))
            .ok_or_else(|| {
                ObjectiveParseError::BadOperator(
                    rest.chars().take(2).collect::<String>().trim().to_string(),
                )
            })?;
        let metric = ObjectiveMetric::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| ObjectiveParseError::UnknownMetric(name.to_string()))?;
        if bound.trim().is_empty() {
            return Err(ObjectiveParseError::NoBound(metric.bound_hint()));
        }
        let bound = metric
            .parse_bound(bound)
            .map_err(ObjectiveParseError::Bound)?;
        Ok(Objective {
            scenario,
            frameworks,
            metric,
            op,
            bound,
            text: t.split_whitespace().collect::<Vec<_>>().join(" "),
        })
    }

    /// Whether the objective applies to `framework`'s `scenario` cells.
    pub fn applies_to(&self, framework: &str, scenario: Scenario) -> bool {
        self.scenario.is_none_or(|s| s == scenario)
            && self
                .frameworks
                .as_ref()
                .is_none_or(|f| f.iter().any(|n| n == framework))
    }

    /// The bound for people, with its unit (`5.00 ms`).
    pub fn bound_text(&self) -> String {
        self.metric.format(self.bound)
    }
}

/// Why an objective's text could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ObjectiveParseError {
    /// No `<`, `<=`, `>` or `>=`.
    #[error("expected `METRIC OP BOUND` like `p99 < 5ms` (OP one of <, <=, >, >=)")]
    NoOperator,
    /// `=`, `==`, `=<` and the like.
    #[error("`{0}` is not a comparison; use <, <=, > or >=")]
    BadOperator(String),
    /// The name before the operator.
    #[error("unknown metric `{0}`; expected one of p50, p90, p99, p999, rps, error_rate, cpu_us_per_request, memory_window_peak")]
    UnknownMetric(String),
    /// Nothing after the operator.
    #[error("the bound is missing; write {0} after the comparison")]
    NoBound(&'static str),
    /// The bound does not parse for its metric.
    #[error("{0}")]
    Bound(String),
}

impl ObjectiveParseError {
    /// The metric name written, for a "did you mean" hint.
    pub fn unknown_metric(&self) -> Option<&str> {
        match self {
            ObjectiveParseError::UnknownMetric(n) => Some(n),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_metric_into_its_base_unit() {
        let p = |t: &str| Objective::parse(t, None, None).unwrap();
        assert_eq!(p("p99 < 5ms").bound, 5000.0);
        assert_eq!(p("p999<20ms").op, Op::Lt);
        assert_eq!(p("rps >= 50000").bound, 50000.0);
        assert!((p("error_rate < 0.1%").bound - 0.001).abs() < 1e-15);
        assert_eq!(p("error_rate <= 0.002").bound, 0.002);
        assert_eq!(p("cpu_us_per_request <= 30").bound, 30.0);
        assert_eq!(p("cpu_us_per_request <= 30us").bound, 30.0);
        assert_eq!(
            p("memory_window_peak <= 256MiB").bound,
            256.0 * 1024.0 * 1024.0
        );
        assert_eq!(p("  p50   >  800us ").text, "p50 > 800us");
    }

    #[test]
    fn refuses_what_is_not_an_objective() {
        let e = |t: &str| Objective::parse(t, None, None).unwrap_err().to_string();
        assert!(e("p99 5ms").contains("METRIC OP BOUND"), "{}", e("p99 5ms"));
        assert!(e("p99 == 5ms").contains("not a comparison"));
        assert!(e("p95 < 5ms").contains("unknown metric `p95`"));
        assert!(e("p99 < 5").contains("has no unit"), "{}", e("p99 < 5"));
        assert!(e("rps >= lots").contains("answers per second"));
        assert!(e("error_rate < 150%").contains("more than 100%"));
        assert!(e("rps >=").contains("bound is missing"));
    }

    #[test]
    fn applies_to_its_scenario_and_frameworks_only() {
        let o =
            Objective::parse("p99 < 5ms", Some(Scenario::Json), Some(vec!["axum".into()])).unwrap();
        assert!(o.applies_to("axum", Scenario::Json));
        assert!(!o.applies_to("axum", Scenario::Plaintext));
        assert!(!o.applies_to("actix", Scenario::Json));
        let all = Objective::parse("p99 < 5ms", None, None).unwrap();
        assert!(all.applies_to("actix", Scenario::Plaintext));
    }
}
