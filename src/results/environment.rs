//! The environment part of results.json: preflight's verdict, one line per
//! check, and the whole report as preflight wrote it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The environment verdict and the whole preflight report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Environment {
    /// Overall preflight outcome: the worst check.
    pub status: CheckStatus,
    /// Whether preflight failed and the run went ahead with `--accept-env`;
    /// every cell of such a run is flagged.
    pub forced: bool,
    /// One line per check.
    pub checks: Vec<EnvCheck>,
    /// The preflight report as preflight wrote it (kept whole, unparsed).
    pub report: serde_json::Value,
}

impl Environment {
    /// Whether the results stand on an environment that passed (pass or warn).
    pub fn accepted(&self) -> bool {
        self.status != CheckStatus::Fail
    }
}

/// Outcome of one check, of the environment (preflight) or of a
/// framework against the contract (verify); ordered from good to bad so the
/// worst of several is their max.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// Within the threshold: nothing here can distort results.
    #[default]
    Pass,
    /// Worth knowing: results may be distorted; they are kept but marked.
    Warn,
    /// Results from here are not to be accepted (unless forced).
    Fail,
}

impl CheckStatus {
    /// `Pass` when `ok`, else `otherwise`.
    pub fn pass_or(ok: bool, otherwise: CheckStatus) -> CheckStatus {
        if ok {
            CheckStatus::Pass
        } else {
            otherwise
        }
    }
}

impl fmt::Display for CheckStatus {
    /// `pass`, `warn`, or `FAIL` (shouted, so a failure stands out in
    /// tables and terminal lines).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CheckStatus::Pass => "pass",
            CheckStatus::Warn => "warn",
            CheckStatus::Fail => "FAIL",
        })
    }
}

/// One preflight check as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EnvCheck {
    /// Check name, e.g. `hypervisor`, `nic-driver`, `load-average`.
    pub name: String,
    /// Outcome.
    pub status: CheckStatus,
    /// What was measured, with its unit.
    pub measured: String,
    /// The threshold it was held to.
    pub threshold: String,
    /// What to do about a warning or failure.
    pub remedy: Option<String>,
}
