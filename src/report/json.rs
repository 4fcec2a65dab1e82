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
        let bytes = crate::export::json_bytes(results).context("serialising results.json")?;
        Ok(vec![Rendered {
            path: PathBuf::from(RESULTS_FILE),
            bytes,
        }])
    }
}
