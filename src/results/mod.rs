//! The results model: everything one run measured and decided, as written to
//! `results.json` (versioned by [`SCHEMA_VERSION`]; JSON Schema in
//! docs/results.schema.json, prose in docs/results.md).
//!
//! This module owns the data types and the derived summaries (aggregates over
//! rounds, merged histograms). It does no I/O (that is `bench::store` and
//! `report`) and passes no judgement (that is `judge::gates`).
//!
//! Units are in the field names: `_us` microseconds, `_ms` milliseconds,
//! `_bytes` bytes, `_rps` responses per second, `_s` seconds; fractions are
//! plain numbers from 0 to 1.

mod budget;
mod cell;
mod database;
mod environment;
mod framework;
pub mod histogram;
pub mod objectives;
mod round;
mod timing;
mod topology;
pub mod verdict;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::contract::Scenario;
pub use crate::docker::container::AppliedLimits;
pub use crate::host::git::GitInfo;
pub use crate::plan::Skipped;
pub use crate::roles::load::ErrorCounts;
pub use budget::{Budget, BudgetEnd};
pub use cell::{
    AnswerChecks, Cell, CellKey, CellSummary, Connections, HostUse, LoaderShare, LoaderUse,
    MachineSpeed, Precision, RankGroup, RateFigures, RequestAccounting, Round, RunPrecision,
    ServerUse, Slowed, StatusCounts, StreamLimit, WindowTimes,
};
pub use database::{DatabaseSamples, DatabaseStatements, DatabaseUse, DatabaseWork, TableChange};
pub use environment::{CheckStatus, EnvCheck, Environment};
pub use framework::{FrameworkFacts, VerifyOutcome};
pub use histogram::Latency;
pub use objectives::{
    Objective, ObjectiveInterval, ObjectiveMetric, ObjectiveOutcome, ObjectiveStatus, Op,
};
pub use round::{LabFigures, ServerSamples};
pub use timing::{PhaseTimes, RunTiming};
pub use topology::{CarriedImage, DaemonClock, HostCheck, HostPreflight, Topology};
pub use verdict::{Exclusion, GatesOff, Preflight, Reason, Status, Thresholds, Verdict};

/// Version of the results.json layout. Bump on any change a reader of an
/// older file would misread; readers refuse versions they do not know.
pub const SCHEMA_VERSION: u32 = 4;
/// The oldest layout this version still reads. Version 2 lacks what 3
/// added (requests in flight at the end and unsent, percentiles above the
/// timeout, unknown CPU as `null`), and 3 what 4 added (the profile read
/// back as a typed profile, unknown OOM counts as `null`); their fields
/// read with their defaults, so `compare` can set a run of any of them
/// against another.
pub const OLDEST_READABLE_SCHEMA: u32 = 2;

/// File name of the results inside a run directory.
pub const RESULTS_FILE: &str = "results.json";

/// One run: what was asked, where it ran, and every cell measured so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Results {
    /// Layout version of this file ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// Version of fairground that wrote the file.
    pub fairground_version: String,
    /// Identifier of the run; every Docker object of the run carries the
    /// label `fairground.run=<run_id>`.
    pub run_id: String,
    /// Name of the profile that was run.
    pub profile_name: String,
    /// The profile as resolved (defaults filled in), exactly as it was run:
    /// the profile file format (docs/profile.schema.json), read back through
    /// the same type the run used, so `compare` and `history` check the
    /// fields by name and type. Its name is `profile_name`.
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub profile: crate::profile::Profile,
    /// When the run started (UTC).
    #[schemars(with = "String")]
    pub started_at: DateTime<Utc>,
    /// When the run finished (UTC); absent while running or if it was cut short.
    #[schemars(with = "Option<String>")]
    pub finished_at: Option<DateTime<Utc>>,
    /// Whether the run was interrupted (Ctrl-C) before every planned cell ran.
    pub interrupted: bool,
    /// The environment as preflight found it, and whether it was accepted.
    pub environment: Environment,
    /// The thresholds the gates applied.
    pub thresholds: Thresholds,
    /// Every cell the plan contains, in run order (measured or not).
    pub plan: Vec<CellKey>,
    /// Facts about each framework of the run.
    pub frameworks: Vec<FrameworkFacts>,
    /// Combinations not run, with the reason.
    pub skipped: Vec<Skipped>,
    /// Every cell measured so far (a cell is stored again after each of its
    /// rounds), in the order they were first stored.
    pub cells: Vec<Cell>,
    /// Things that went wrong during the run and were recorded, in order.
    #[serde(default)]
    pub incidents: Vec<Incident>,
    /// The environment as preflight found it each time the run was resumed
    /// (`run --resume`), in order: results measured after a resume stand on
    /// that environment too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resumed_environments: Vec<ResumedEnvironment>,
    /// The `fairground.run` label of every invocation that worked on this
    /// run (a resume gets its own), so leftovers of an interrupted one can be
    /// found and removed.
    #[serde(default)]
    pub docker_runs: Vec<String>,
    /// The fairground image (loader, prober) every invocation of this run
    /// used: its tag is the hash of the static binary inside, so two runs
    /// with the same crate version but different loader code differ here.
    /// More than one only when a resume ran another build.
    #[serde(default)]
    pub loader_images: Vec<String>,
    /// Where this invocation's wall time went: preflight, images, the wait
    /// for the first round, and every phase from there to the end.
    #[serde(default)]
    pub timing: RunTiming,
    /// Where the server and the loaders ran when the profile named other
    /// Docker hosts (`hosts:`); absent for a one-daemon run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Topology>,
    /// The profile's objectives judged on every planned cell they apply to,
    /// in plan order (written when the run finishes; empty when the profile
    /// has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objectives: Vec<ObjectiveOutcome>,
    /// The git commit, dirty flag and branch of the directory the run was
    /// started in; absent outside a git repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitInfo>,
    /// The run's precision in two figures (median interval, median rank
    /// group width), kept current with every cell; absent before the first
    /// cell and in files written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<RunPrecision>,
    /// How the profile's `budget:` was spent; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
}

/// The environment when a run was resumed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResumedEnvironment {
    /// When the resume started (UTC).
    #[schemars(with = "String")]
    pub at: DateTime<Utc>,
    /// What preflight found then.
    pub environment: Environment,
}

/// Something that went wrong during the run (a framework that would not
/// start, a round the loader could not measure, a server that died), kept so
/// the report can say why a number is missing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Incident {
    /// When it happened (UTC).
    #[schemars(with = "String")]
    pub at: DateTime<Utc>,
    /// Framework it concerns.
    pub framework: String,
    /// Cell it concerns, if any.
    pub cell: Option<CellKey>,
    /// Round (0-based) it concerns, if any.
    pub round: Option<u32>,
    /// What happened, with the error's own words.
    pub what: String,
}

impl Results {
    /// The cell with `key`, if it was measured.
    pub fn cell(&self, key: &CellKey) -> Option<&Cell> {
        self.cells.iter().find(|c| &c.key == key)
    }

    /// Facts about framework `name`, if recorded.
    pub fn framework(&self, name: &str) -> Option<&FrameworkFacts> {
        self.frameworks.iter().find(|f| f.name == name)
    }

    /// Facts about framework `name`, created empty when missing.
    pub fn framework_mut(&mut self, name: &str) -> &mut FrameworkFacts {
        if let Some(i) = self.frameworks.iter().position(|f| f.name == name) {
            return &mut self.frameworks[i];
        }
        self.frameworks.push(FrameworkFacts::named(name));
        self.frameworks.last_mut().expect("just pushed")
    }

    /// Planned cells not complete yet (missing or with rounds to go), in
    /// plan order.
    pub fn remaining(&self) -> Vec<CellKey> {
        self.plan
            .iter()
            .filter(|k| !self.cell(k).is_some_and(|c| self.is_done(c)))
            .cloned()
            .collect()
    }

    /// Whether `cell` needs no more rounds: complete by its own rounds
    /// ([`Cell::is_complete`]), or past its first pass (`rounds.min`) in a
    /// run whose budget ended its rounds (a resume does not spend another).
    pub fn is_done(&self, cell: &Cell) -> bool {
        let budget_spent = self
            .budget
            .as_ref()
            .is_some_and(|b| b.ended == Some(BudgetEnd::Budget));
        cell.is_complete()
            || (budget_spent
                && cell
                    .rounds_min
                    .is_some_and(|min| cell.rounds.len() as u32 >= min))
    }

    /// Scenarios in plan order, without repeats.
    pub fn scenarios(&self) -> Vec<Scenario> {
        let mut out = Vec::new();
        for k in self.plan.iter().chain(self.cells.iter().map(|c| &c.key)) {
            if !out.contains(&k.scenario) {
                out.push(k.scenario);
            }
        }
        out
    }
}

/// The JSON Schema of results.json (committed as docs/results.schema.json).
pub fn schema() -> schemars::Schema {
    schemars::schema_for!(Results)
}

/// Why a results.json could not be read: always the input's fault (a path
/// that is not a run, a file of another version), never the run's.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file cannot be read (absent, not a file, no permission).
    #[error("cannot read {path}: {source}; give a run directory written by `fairground run`")]
    Unreadable {
        /// The file.
        path: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The file is not JSON of the expected shape.
    #[error("{path}: not a fairground results file: {source}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's complaint.
        source: serde_json::Error,
    },
    /// A latency histogram in the file could not be decoded.
    #[error("{path}: a latency histogram cannot be read: {why}")]
    Histogram {
        /// The file.
        path: String,
        /// What was wrong with it.
        why: String,
    },
    /// The profile the run recorded is not one this version's profile type
    /// can hold.
    #[error("{path}: the profile this run recorded (schema_version {found}) cannot be read as a profile of this fairground ({source}); compare it with the fairground version that wrote it")]
    Profile {
        /// The file.
        path: String,
        /// The version found.
        found: u64,
        /// What was wrong with it.
        source: serde_json::Error,
    },
    /// The file was written with a layout this version does not know.
    #[error("{path}: schema_version {found} is not supported (this fairground reads {OLDEST_READABLE_SCHEMA} to {SCHEMA_VERSION}); use the fairground version that wrote it")]
    Version {
        /// The file.
        path: String,
        /// The version found.
        found: u64,
    },
}

impl crate::exit::ExitCodeOf for ReadError {
    fn exit_code(&self) -> crate::exit::ExitCode {
        use crate::exit::ExitCode::BadInput;
        match self {
            ReadError::Unreadable { .. } => BadInput,
            ReadError::Parse { .. } => BadInput,
            ReadError::Histogram { .. } => BadInput,
            ReadError::Profile { .. } => BadInput,
            ReadError::Version { .. } => BadInput,
        }
    }
}

/// Read and parse the results.json at `path`.
pub fn read_file(path: &std::path::Path) -> Result<Results, ReadError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ReadError::Unreadable {
        path: name.clone(),
        source,
    })?;
    from_json(&text, &name)
}

/// Parse results.json text; `path` is only used in errors.
pub fn from_json(text: &str, path: &str) -> Result<Results, ReadError> {
    // Check the version first so an old layout gets the right message.
    let raw: serde_json::Value = serde_json::from_str(text).map_err(|source| ReadError::Parse {
        path: path.to_string(),
        source,
    })?;
    let found = raw
        .get("schema_version")
        .and_then(|v| v.as_u64())
        .unwrap_or(0);
    if !(u64::from(OLDEST_READABLE_SCHEMA)..=u64::from(SCHEMA_VERSION)).contains(&found) {
        return Err(ReadError::Version {
            path: path.to_string(),
            found,
        });
    }
    // The profile on its own first: a run whose profile this version's
    // type cannot hold gets a message saying so, not a parse error.
    if let Some(p) = raw.get("profile") {
        crate::profile::Profile::deserialize(p).map_err(|source| ReadError::Profile {
            path: path.to_string(),
            found,
            source,
        })?;
    }
    let mut results: Results = serde_json::from_value(raw).map_err(|source| ReadError::Parse {
        path: path.to_string(),
        source,
    })?;
    // The name is the file's stem, not a field of the profile format.
    results.profile.name.clone_from(&results.profile_name);
    if found < 3 {
        // Schema 2 histograms hold µs; this version's hold ns.
        let us = |h: &mut String| -> Result<(), ReadError> {
            *h = histogram::scale(h, crate::roles::load::histogram::NS_PER_US).map_err(|e| {
                ReadError::Histogram {
                    path: path.to_string(),
                    why: e.to_string(),
                }
            })?;
            Ok(())
        };
        for c in &mut results.cells {
            for r in &mut c.rounds {
                us(&mut r.histogram)?;
            }
            if let Some(s) = c.summary.as_mut() {
                us(&mut s.histogram)?;
            }
        }
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_merges_rounds_and_counts_only_2xx_as_success() {
        let r = crate::testdata::sample_results();
        let cell = &r.cells[0];
        let s = cell.summary.as_ref().unwrap();
        assert_eq!(s.throughput_rps.n, cell.rounds.len());
        let total: u64 = cell.rounds.iter().map(|r| r.latency.count).sum();
        assert_eq!(s.latency.count, total);
        assert!(s.error_rate >= 0.0 && s.error_rate < 1.0);
    }

    #[test]
    fn reads_back_what_it_writes_and_refuses_other_versions() {
        let r = crate::testdata::sample_results();
        let text = serde_json::to_string(&r).unwrap();
        assert!(
            from_json(&text, "x").unwrap() == r,
            "results changed in a JSON round trip"
        );
        let old = text.replace(
            &format!("\"schema_version\":{SCHEMA_VERSION}"),
            "\"schema_version\":99",
        );
        let err = from_json(&old, "old/results.json").unwrap_err();
        assert!(err.to_string().contains("schema_version 99"), "{err}");
    }

    #[test]
    fn a_profile_this_version_cannot_hold_is_named_as_the_reason() {
        let r = crate::testdata::sample_results();
        let mut v = serde_json::to_value(&r).unwrap();
        v["profile"]["load"]["mode"] = "burst".into();
        let err = from_json(&v.to_string(), "old/results.json").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("old/results.json: the profile this run recorded")
                && text.contains("burst"),
            "{text}"
        );
    }

    #[test]
    fn the_profile_reads_back_as_the_profile_the_run_used() {
        let mut r = crate::testdata::sample_results();
        r.profile.load.mode = crate::profile::LoadMode::FixedRate { rate: 5000 };
        r.profile.load.timeout = std::time::Duration::from_millis(1500);
        r.profile.server.cpuset = crate::profile::Cpuset::Cores("1".parse().unwrap());
        r.profile.frameworks = crate::profile::Frameworks::Exclude(vec!["flask".into()]);
        r.profile.thresholds.off.max_error_rate = true;
        r.profile.objectives = vec![
            Objective::parse("p99 < 5ms", None, None).unwrap(),
            Objective::parse(
                "rps >= 50000",
                Some(Scenario::Json),
                Some(vec!["axum".into()]),
            )
            .unwrap(),
        ];
        let text = serde_json::to_string(&r).unwrap();
        let back = from_json(&text, "x").unwrap();
        assert_eq!(back.profile, r.profile);
        // A field an older run did not record reads as its default.
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["profile"].as_object_mut().unwrap().remove("idle_settle");
        let back = from_json(&v.to_string(), "x").unwrap();
        assert_eq!(
            back.profile.idle_settle,
            crate::profile::Profile::default().idle_settle
        );
    }

    #[test]
    fn reads_a_version_2_run_so_compare_can_set_it_against_a_new_one() {
        // The fixture as the previous layout wrote it (schema_version 2).
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/results/results-v2.json"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let r = from_json(&text, path).unwrap();
        assert_eq!(r.schema_version, 2);
        let round = &r.cells[0].rounds[0];
        assert_eq!(round.requests.unsent, 0);
        assert_eq!(round.latency.beyond_timeout, 0);
        assert!(round.latency.p50_us.is_some());
        // Its µs histograms read as this version's ns ones: the median of
        // the histogram is the median the file recorded.
        let h = histogram::decode(&round.histogram).unwrap();
        let p50 = round.latency.p50_us.unwrap() as f64;
        let from_h = h.value_at_quantile(0.5) as f64 / 1e3;
        assert!((from_h / p50 - 1.0).abs() < 0.002, "{from_h} vs {p50}");
    }

    #[test]
    fn reads_a_version_3_run_with_its_profile_typed() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/results/results-v3.json"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let r = from_json(&text, path).unwrap();
        assert_eq!(r.schema_version, 3);
        assert_eq!(r.profile.name, r.profile_name);
        assert_eq!(r.profile.concurrency, [100, 10_000]);
        assert_eq!(r.cells[0].rounds[0].server.oom_kills, Some(0));
    }

    #[test]
    fn remaining_lists_planned_cells_not_measured() {
        let mut r = crate::testdata::sample_results();
        assert!(r.remaining().is_empty());
        let gone = r.cells.remove(3).key;
        assert_eq!(r.remaining(), vec![gone]);
    }
}
