//! The comparison as JSON (`--json`), valid against docs/compare.schema.json.

use anyhow::Context;

use super::model::Comparison;

/// Pretty-printed JSON, newline-terminated.
pub fn to_json(cmp: &Comparison) -> anyhow::Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(cmp).context("serialising the comparison")?;
    bytes.push(b'\n');
    Ok(bytes)
}
