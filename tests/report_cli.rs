//! `fairground report DIR`: the real binary rewrites a run directory's
//! reports from its results.json.

use std::path::PathBuf;
use std::process::Command;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results/results.json")
}

#[test]
fn writes_every_report_with_checksums_from_results_json() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixture(), dir.path().join("results.json")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_fairground"))
        .arg("report")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "results.md",
        "stats.md",
        "report.html",
        "results.csv",
        "results.prom",
        "results.junit.xml",
        "SHA256SUMS",
        "hgrm/axum-plaintext-c100.hgrm",
    ] {
        assert!(dir.path().join(f).is_file(), "{f} missing");
    }
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(
        html.contains("id=\"rps-plaintext-c100\""),
        "report.html lacks its charts"
    );
    // results.json is rewritten byte for byte and covered by the checksums.
    let sums = std::fs::read_to_string(dir.path().join("SHA256SUMS")).unwrap();
    assert!(
        sums.lines().any(|l| l.ends_with("  results.json")),
        "{sums}"
    );
    assert_eq!(
        std::fs::read(dir.path().join("results.json")).unwrap(),
        std::fs::read(fixture()).unwrap()
    );
    let md = std::fs::read_to_string(dir.path().join("results.md")).unwrap();
    assert!(md.contains("✗ connections short"), "{md}");
}

#[test]
fn refuses_a_directory_without_results_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_fairground"))
        .arg("report")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("results.json") && err.contains("fairground run"),
        "{err}"
    );
}
