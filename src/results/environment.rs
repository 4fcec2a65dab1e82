//! The environment part of results.json: preflight's verdict, one line per
//! check, and the whole report as preflight wrote it.

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

pub use crate::preflight::CheckStatus;

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
