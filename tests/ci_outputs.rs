//! The formats a CI reads are valid by their own tools' standards:
//! results.prom parses with prometheus_client's OpenMetrics parser (the
//! reference Python client), results.junit.xml with an XML parser, both
//! written by `fairground report` from a real results.json.

use std::process::Command;

fn fairground(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fairground"));
    c.args(args);
    c
}

/// Render the committed sample run's reports into a temporary directory.
fn rendered() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/results/results.json"
        ),
        run.join("results.json"),
    )
    .unwrap();
    let out = fairground(&["report", run.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fairground report: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

fn python(script: &str, file: &std::path::Path) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(file)
        .output()
        .expect("python3 runs (make deps installs prometheus_client)");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn results_prom_parses_with_the_reference_openmetrics_parser() {
    let dir = rendered();
    let prom = dir.path().join("run/results.prom");
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    let out = python(
        r#"
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
families = list(text_string_to_metric_families(open(sys.argv[1]).read()))
for f in families:
    assert f.type == "gauge", (f.name, f.type)
    for s in f.samples:
        assert {"framework", "scenario", "concurrency", "rate", "protocol", "verdict", "run"} <= set(s.labels), s
print(len(families), sum(len(f.samples) for f in families))
"#,
        &prom,
    );
    let counts: Vec<usize> = out.split_whitespace().map(|x| x.parse().unwrap()).collect();
    assert!(counts[0] >= 8 && counts[1] > counts[0], "{out}");
}

#[test]
fn results_junit_xml_is_well_formed_with_one_case_per_cell() {
    let dir = rendered();
    let xml = dir.path().join("run/results.junit.xml");
    let results: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("run/results.json")).unwrap(),
    )
    .unwrap();
    let cells = results["cells"].as_array().unwrap().len();
    let skipped = results["skipped"].as_array().unwrap().len();
    let out = python(
        r#"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "testsuites", root.tag
cases = root.findall("./testsuite/testcase")
failures = sum(1 for c in cases if c.find("failure") is not None)
assert int(root.get("failures")) == failures
print(len(cases), failures)
"#,
        &xml,
    );
    let counts: Vec<usize> = out.split_whitespace().map(|x| x.parse().unwrap()).collect();
    assert_eq!(counts[0], cells + skipped, "{out}");
    let rejected = results["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["verdict"]["status"] == "rejected")
        .count();
    assert_eq!(counts[1], rejected, "{out}");
}
