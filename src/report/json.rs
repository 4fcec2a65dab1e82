//! results.json: everything, raw rounds included (the same bytes the store
//! writes after every cell).

use std::path::PathBuf;

use anyhow::Context;

use super::{Exporter, Rendered};
use crate::results::{Results, RESULTS_FILE};

/// Pretty-printed results.json.
pub struct JsonExporter;

impl Exporter<Results> for JsonExporter {
    fn render(&self, results: &Results) -> anyhow::Result<Vec<Rendered>> {
        let mut bytes = serde_json::to_vec_pretty(results).context("serialising results.json")?;
        bytes.push(b'\n');
        Ok(vec![Rendered {
            path: PathBuf::from(RESULTS_FILE),
            bytes,
        }])
    }
}
