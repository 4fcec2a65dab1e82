//! The comparison as JSON (`--json`), valid against docs/compare.schema.json.

use anyhow::Context;

use super::model::Comparison;
use crate::export::{json_bytes, Exporter, Rendered};

/// The comparison as JSON (`compare.json`).
pub struct CompareJson;

impl Exporter<Comparison> for CompareJson {
    fn render(&self, cmp: &Comparison) -> anyhow::Result<Vec<Rendered>> {
        Ok(Rendered::one("compare.json", to_json(cmp)?))
    }
}

/// Pretty-printed JSON, newline-terminated.
pub fn to_json(cmp: &Comparison) -> anyhow::Result<Vec<u8>> {
    json_bytes(cmp).context("serialising the comparison")
}
