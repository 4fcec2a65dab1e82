//! The formats a CI reads are valid by their own tools' standards:
//! results.prom parses with prometheus_client's OpenMetrics parser (the
//! reference Python client), results.junit.xml with junitparser (PyPI, the
//! JUnit reader CI plug-ins build on), both written by `fairground report`
//! from a real results.json.

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
fn results_junit_xml_reads_back_with_a_junit_parser_one_case_per_cell_and_objective() {
    let dir = rendered();
    let xml = dir.path().join("run/results.junit.xml");
    let results: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("run/results.json")).unwrap(),
    )
    .unwrap();
    let cells = results["cells"].as_array().unwrap().len();
    let skipped = results["skipped"].as_array().unwrap().len();
    let objectives = results["objectives"].as_array().unwrap();
    let count = |status: &str| objectives.iter().filter(|o| o["status"] == status).count();
    // junitparser (PyPI), a JUnit reader CI plug-ins are built on: every
    // case with its result kind, and the suites' own counts.
    let out = python(
        r#"
import sys
from junitparser import JUnitXml, Failure, Skipped
xml = JUnitXml.fromfile(sys.argv[1])
cases = fail = skip = 0
obj = {"failure": 0, "skipped": 0, "passed": 0}
for suite in xml:
    n = sum(1 for _ in suite)
    assert suite.tests == n, (suite.name, suite.tests, n)
    for case in suite:
        cases += 1
        kinds = [type(r) for r in case.result]
        fail += Failure in kinds
        skip += Skipped in kinds
        if suite.name == "objectives":
            key = "failure" if Failure in kinds else "skipped" if Skipped in kinds else "passed"
            obj[key] += 1
            assert case.system_out, case.name
print(cases, fail, skip, obj["failure"], obj["skipped"], obj["passed"])
"#,
        &xml,
    );
    let n: Vec<usize> = out.split_whitespace().map(|x| x.parse().unwrap()).collect();
    let rejected = results["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["verdict"]["status"] == "rejected")
        .count();
    assert!(!objectives.is_empty(), "the sample run has objectives");
    assert_eq!(n[0], cells + skipped + objectives.len(), "{out}");
    assert_eq!(n[1], rejected + count("missed"), "{out}");
    assert_eq!(n[2], skipped + count("undecided"), "{out}");
    assert_eq!(
        (n[3], n[4], n[5]),
        (count("missed"), count("undecided"), count("met")),
        "{out}"
    );
    assert!(count("met") > 0 && count("missed") > 0 && count("undecided") > 0);
}
