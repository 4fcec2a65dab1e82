//! The committed sample run (tests/fixtures/results/results.json) reduced
//! to one cell, axum plaintext c=100: the base of the synthetic runs that
//! `history` and docs/ci.md's gate are tested on.

use serde_json::Value;

/// The sample run with only axum plaintext c=100 left (its plan too), no
/// skips and no objectives.
pub fn one_cell_run() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/results/results.json"
    );
    let mut r: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let keep = |k: &Value| {
        k["framework"] == "axum" && k["scenario"] == "plaintext" && k["concurrency"] == 100
    };
    let cells: Vec<Value> = r["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| keep(&c["key"]))
        .cloned()
        .collect();
    assert_eq!(cells.len(), 1);
    r["cells"] = Value::Array(cells);
    let plan: Vec<Value> = r["plan"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| keep(k))
        .cloned()
        .collect();
    r["plan"] = Value::Array(plan);
    r["skipped"] = Value::Array(vec![]);
    r.as_object_mut().unwrap().remove("objectives");
    r
}
