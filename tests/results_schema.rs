//! The committed JSON Schema of results.json stays current, and the sample
//! results fixture is valid against it.
//!
//! Regenerate the schema with `FAIRGROUND_BLESS=1 cargo test --test results_schema`.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn committed_schema_matches_the_model() {
    let path = root().join("docs/results.schema.json");
    let text = serde_json::to_string_pretty(&fairground::results::schema()).unwrap() + "\n";
    if std::env::var_os("FAIRGROUND_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; regenerate with FAIRGROUND_BLESS=1",
            path.display()
        )
    });
    assert!(
        committed == text,
        "{} is stale; regenerate with FAIRGROUND_BLESS=1 cargo test --test results_schema",
        path.display()
    );
}

#[test]
fn sample_results_validate_against_the_schema() {
    let schema = serde_json::to_value(fairground::results::schema()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let fixture = root().join("tests/fixtures/results/results.json");
    let instance: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{}: {errors:#?}", fixture.display());
}

#[test]
fn schema_rejects_a_cell_without_a_verdict() {
    let schema = serde_json::to_value(fairground::results::schema()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let fixture = root().join("tests/fixtures/results/results.json");
    let mut instance: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    instance["cells"][0]
        .as_object_mut()
        .unwrap()
        .remove("verdict");
    assert!(!validator.is_valid(&instance));
}
