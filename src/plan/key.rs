//! The coordinates of a cell, and a combination the plan leaves out: what
//! the plan is made of, and what results.json keys its cells by.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::contract::{Protocol, Scenario};

/// The coordinates of a cell: framework × scenario × protocol × concurrency
/// (× rate).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct CellKey {
    /// Framework name (folder under frameworks/).
    pub framework: String,
    /// Contract scenario.
    pub scenario: Scenario,
    /// Protocol spoken; absent (in results.json) for `http1`, so results
    /// of runs before protocols existed read back unchanged.
    #[serde(default, skip_serializing_if = "Protocol::is_http1")]
    pub protocol: Protocol,
    /// Connections the loader keeps open.
    pub concurrency: u32,
    /// Target request rate in req/s (fixed-rate, open-loop mode); absent in
    /// closed-loop mode where every connection sends as fast as it can.
    pub rate: Option<u64>,
}

impl CellKey {
    /// A file-name-safe stem, e.g. `axum-plaintext-c256`,
    /// `axum-json-c64-r20000` or `axum-json-h2-c64` (the protocol only when
    /// it is not `http1`).
    pub fn stem(&self) -> String {
        let mut s = format!("{}-{}", self.framework, self.scenario);
        if self.protocol != Protocol::Http1 {
            s.push_str(&format!("-{}", self.protocol));
        }
        s.push_str(&format!("-c{}", self.concurrency));
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
        write!(f, "{} {}", self.framework, self.scenario)?;
        if self.protocol != Protocol::Http1 {
            write!(f, " {}", self.protocol)?;
        }
        write!(f, " c={}", self.concurrency)?;
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
    /// Protocol skipped (every scenario of it); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    /// Why, in words (e.g. "not declared in framework.yaml").
    pub reason: String,
}
