//! The coordinates of a cell, and a combination the plan leaves out: what
//! the plan is made of, and what results.json keys its cells by.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::contract::Scenario;

/// The coordinates of a cell: framework × scenario × concurrency (× rate).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct CellKey {
    /// Framework name (folder under frameworks/).
    pub framework: String,
    /// Contract scenario.
    pub scenario: Scenario,
    /// Connections the loader keeps open.
    pub concurrency: u32,
    /// Target request rate in req/s (fixed-rate, open-loop mode); absent in
    /// closed-loop mode where every connection sends as fast as it can.
    pub rate: Option<u64>,
}

impl CellKey {
    /// A file-name-safe stem, e.g. `axum-plaintext-c256` or `axum-json-c64-r20000`.
    pub fn stem(&self) -> String {
        let mut s = format!("{}-{}-c{}", self.framework, self.scenario, self.concurrency);
        if let Some(r) = self.rate {
            s.push_str(&format!("-r{r}"));
        }
        s
    }

    /// The load column label: `256` or `256 @ 20000/s`.
    pub fn load_label(&self) -> String {
        match self.rate {
            Some(r) => format!("{} @ {r}/s", self.concurrency),
            None => self.concurrency.to_string(),
        }
    }
}

impl fmt::Display for CellKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} c={}",
            self.framework, self.scenario, self.concurrency
        )?;
        if let Some(r) = self.rate {
            write!(f, " rate={r}/s")?;
        }
        Ok(())
    }
}

/// A combination the run did not measure, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Skipped {
    /// Framework name.
    pub framework: String,
    /// Scenario skipped; absent when the whole framework was skipped.
    pub scenario: Option<Scenario>,
    /// Why, in words (e.g. "not declared in framework.yaml").
    pub reason: String,
}
