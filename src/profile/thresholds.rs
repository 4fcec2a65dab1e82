//! The gates' thresholds as a profile sets them (`thresholds:`), each with
//! its default and the source of that default; which gates are off; how
//! preflight is applied. The results keep them as they were used
//! (results.json `thresholds`), and `judge::gates` judges by them.

use serde::{Deserialize, Serialize};

/// Default ceiling on the coefficient of variation of throughput across
/// rounds (a fraction). Source: the warm-up criterion of the Go framework lab
/// comparison in docs/methodology (CV of the last 3 windows ≤ 5%); we apply
/// the same bar to rounds.
pub const DEFAULT_MAX_CV: f64 = 0.05;

/// A round whose throughput is further than this from the cell's median (a
/// fraction) is suspect. Source: consecutive runs that disagreed by 10–30% in
/// the C++ framework comparison (methodology, mistake 3): 10% is where a
/// difference stops being noise on a quiet machine.
pub const DEFAULT_MAX_ROUND_DEVIATION: f64 = 0.10;

/// Default ceiling on errors / attempts. Published results with "no errors"
/// are the norm (Go lab comparison); 0.1% leaves room for a handful of resets
/// at 10K connections without hiding a failing server.
pub const DEFAULT_MAX_ERROR_RATE: f64 = 0.001;

/// The loader is saturated when its CPU use reaches this fraction of its
/// allotment: beyond it, the figure measures the client. Source: the
/// TypeScript benchmark whose client capped at 14.5k req/s while the server
/// could do 25k (methodology).
pub const DEFAULT_LOADER_SATURATION: f64 = 0.90;

/// Share of CPU-quota periods in which the loader was throttled above which
/// it counts as client-bound, whatever its average CPU use: a loader that
/// keeps hitting its quota waits for the scheduler, not for the server. A
/// loader with a fractional `cpus` can idle between bursts (its average then
/// looks below saturation) while still losing a tenth of its periods.
pub const DEFAULT_MAX_LOADER_THROTTLED: f64 = 0.10;

/// In fixed-rate mode, achieved / target below this means the schedule was
/// not kept. Source: HttpArena's `rate_ratio < 0.98` warning (methodology).
pub const DEFAULT_MIN_RATE_RATIO: f64 = 0.98;

/// In fixed-rate mode, the loader's largest lateness (send time − scheduled
/// send time, waiting for a slow server excluded) above this means the
/// loader, not the server, shaped the latency tail. It is a maximum, so the
/// bound sits above one scheduler time slice (CFS's default latency target is
/// 6 ms) and below the tails being compared (89 ms in the Go lab comparison).
pub const DEFAULT_MAX_SCHEDULE_LAG_US: u64 = 10_000;

/// CPU used on the host by anything other than the server and the loader,
/// in cores, above which the window was not quiet. Half a core is what a
/// compile or a browser tab costs; the Go library page measured 3.5–8.5×
/// slowdowns under foreign load (methodology).
pub const DEFAULT_MAX_FOREIGN_CORES: f64 = 0.5;

/// A round whose calibration probe (`host::speed`, timed on the server's
/// core inside the window) read more than this share slower than the
/// framework's fast reference (the 10th percentile of its rounds so far)
/// was measured on a slowed machine: it is left out of the figures and
/// measured again. Source: the A/A study and the `standard` run in
/// docs/methodology.md: on this project's VM the probe moves between two
/// speeds about 70% apart, a 3 s window's probe median varies by a few
/// percent within one speed, and leaving out rounds 10% above the reference
/// cut the cells' median CV from 8.1% to 5.6% in a re-reading of that run.
pub const DEFAULT_SLOWED_MACHINE: f64 = 0.10;

/// Closed loop: how far connections in use by the figures (responses per
/// second × mean latency) may be from the connections served × pipeline.
/// In a closed loop they are equal up to what the window's edges move (one
/// request per connection over a window of thousands) and the loader's own
/// turnaround between an answer and the next send, both well under 10%
/// where the loader is not the bottleneck (docs/results.md).
pub const DEFAULT_LITTLES_LAW_TOLERANCE: f64 = 0.10;

/// When a cell counts: the thresholds of the gates, as a profile's
/// `thresholds:` section sets them (docs/profiles.md) and as results.json
/// records them, so a verdict can be re-checked by hand.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Thresholds {
    /// Largest accepted error rate (errors / attempts, a fraction).
    pub max_error_rate: f64,
    /// Largest accepted CV of throughput across rounds (a fraction).
    pub max_cv: f64,
    /// Largest accepted |round − median| / median of throughput (a
    /// fraction): a round farther off is suspect.
    pub suspect_round: f64,
    /// Loader CPU use, as a fraction of its allotment, at which it counts as
    /// saturated.
    pub loader_saturation: f64,
    /// Share of CPU-quota periods with the loader throttled above which it
    /// counts as client-bound.
    pub max_loader_throttled: f64,
    /// Smallest accepted achieved / target rate in fixed-rate mode.
    pub min_rate_ratio: f64,
    /// Largest accepted schedule lag in fixed-rate mode, µs.
    pub max_schedule_lag_us: u64,
    /// Largest accepted foreign CPU use on the host during a round, cores.
    pub max_foreign_cores: f64,
    /// Largest accepted probe slowdown of a round against the framework's
    /// fast reference (a fraction): a round slower than that was measured
    /// on a slowed machine, is left out of the figures and measured again.
    pub slowed_machine: f64,
    /// Closed loop: largest accepted |responses/s × mean latency ÷
    /// (connections served × pipeline) − 1| (Little's law, a fraction).
    pub littles_law_tolerance: f64,
    /// What a failed preflight check does.
    pub preflight: Preflight,
    /// Gates the profile switched off by name (`thresholds.off`); the
    /// report says so. Only these can be off: a threshold that would switch
    /// a gate off silently is refused by `profile check`.
    #[serde(default)]
    pub off: GatesOff,
}

/// Gates a profile switched off explicitly (`thresholds.off: [name, …]`),
/// written as that list of names wherever it is serialized.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "Vec<String>", try_from = "Vec<String>")]
pub struct GatesOff {
    /// `max_error_rate`: the error-rate rejection.
    pub max_error_rate: bool,
    /// `littles_law_tolerance`: the Little's-law flag.
    pub littles_law_tolerance: bool,
    /// `max_cv`: the noisy-cell flag.
    pub max_cv: bool,
    /// `suspect_round`: the suspect-round flag.
    pub suspect_round: bool,
    /// `slowed_machine`: leaving out (and measuring again) the rounds the
    /// calibration probe found slowed.
    pub slowed_machine: bool,
}

impl schemars::JsonSchema for GatesOff {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "GatesOff".into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <Vec<String>>::json_schema(g)
    }
}

impl From<GatesOff> for Vec<String> {
    fn from(g: GatesOff) -> Self {
        g.names().into_iter().map(String::from).collect()
    }
}

impl TryFrom<Vec<String>> for GatesOff {
    type Error = String;

    fn try_from(names: Vec<String>) -> Result<Self, String> {
        let mut g = GatesOff::default();
        for n in names {
            if !g.set(&n) {
                return Err(format!("`{n}` is not a gate that can be switched off"));
            }
        }
        Ok(g)
    }
}

impl GatesOff {
    /// The names `thresholds.off` accepts, as the profile spells them.
    pub const NAMES: [&'static str; 5] = [
        "max_error_rate",
        "littles_law_tolerance",
        "max_cv",
        "suspect_round",
        "slowed_machine",
    ];

    /// Switch off the gate called `name`; false when no such gate can be.
    pub fn set(&mut self, name: &str) -> bool {
        match name {
            "max_error_rate" => self.max_error_rate = true,
            "littles_law_tolerance" => self.littles_law_tolerance = true,
            "max_cv" => self.max_cv = true,
            "suspect_round" => self.suspect_round = true,
            "slowed_machine" => self.slowed_machine = true,
            _ => return false,
        }
        true
    }

    /// The names of the gates that are off.
    pub fn names(&self) -> Vec<&'static str> {
        let on = [
            self.max_error_rate,
            self.littles_law_tolerance,
            self.max_cv,
            self.suspect_round,
            self.slowed_machine,
        ];
        Self::NAMES
            .iter()
            .zip(on)
            .filter(|(_, off)| *off)
            .map(|(n, _)| *n)
            .collect()
    }

    /// A sentence for the report, empty when every gate is on.
    pub fn sentence(&self) -> String {
        match self.names().as_slice() {
            [] => String::new(),
            names => format!(
                " Switched off by the profile (`thresholds.off`), so never applied: {}.",
                names.join(", ")
            ),
        }
    }
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            max_error_rate: DEFAULT_MAX_ERROR_RATE,
            max_cv: DEFAULT_MAX_CV,
            suspect_round: DEFAULT_MAX_ROUND_DEVIATION,
            loader_saturation: DEFAULT_LOADER_SATURATION,
            max_loader_throttled: DEFAULT_MAX_LOADER_THROTTLED,
            min_rate_ratio: DEFAULT_MIN_RATE_RATIO,
            max_schedule_lag_us: DEFAULT_MAX_SCHEDULE_LAG_US,
            max_foreign_cores: DEFAULT_MAX_FOREIGN_CORES,
            slowed_machine: DEFAULT_SLOWED_MACHINE,
            littles_law_tolerance: DEFAULT_LITTLES_LAW_TOLERANCE,
            preflight: Preflight::Strict,
            off: GatesOff::default(),
        }
    }
}

/// What a failed preflight check does.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Preflight {
    /// Refuse to run (exit code 3).
    #[default]
    Strict,
    /// Run, and mark every result as measured in an unfit environment.
    Warn,
}
