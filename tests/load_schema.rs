//! docs/load-report.schema.json is current, and real reports validate
//! against it. Regenerate with `FAIRGROUND_BLESS=1 cargo test --test load_schema`.

mod load_support;

const SCHEMA_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/load-report.schema.json");

#[test]
fn committed_schema_matches_the_report_types() {
    let generated = serde_json::to_string_pretty(&fairground::roles::load::report::json_schema())
        .unwrap()
        + "\n";
    if std::env::var_os("FAIRGROUND_BLESS").is_some() {
        std::fs::write(SCHEMA_PATH, &generated).unwrap();
    }
    let committed =
        std::fs::read_to_string(SCHEMA_PATH).expect("docs/load-report.schema.json exists");
    assert_eq!(
        committed, generated,
        "docs/load-report.schema.json is stale: run FAIRGROUND_BLESS=1 cargo test --test load_schema"
    );
}

#[test]
fn closed_and_fixed_rate_reports_validate_against_the_schema() {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(SCHEMA_PATH).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let server = fairground::roles::serve::start("127.0.0.1".parse().unwrap(), 0, 1).unwrap();
    let url = format!("http://{}", server.addr);
    for extra in [&["-n", "300"][..], &["-R", "500"][..]] {
        let mut args = vec![
            "--url",
            url.as_str(),
            "--scenario",
            "json",
            "-c",
            "2",
            "-t",
            "1",
            "-d",
            "1s",
        ];
        args.extend_from_slice(extra);
        let report = load_support::load(&args);
        let value = serde_json::to_value(&report).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{extra:?}: {errors:?}");
        // The histogram round-trips to the same count.
        let h = fairground::roles::load::decode_histogram(&report.latency.histogram).unwrap();
        assert_eq!(h.len(), report.latency.count);
    }
    server.stop();
}
