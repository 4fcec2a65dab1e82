//! Snapshot tests of every report format, rendered from the committed sample
//! run in tests/fixtures/results/results.json (review changes with
//! `cargo insta review`, or `INSTA_UPDATE=always` then `git diff`).

use std::path::PathBuf;

use fairground::report::{self, Exporter};
use fairground::results::{self, CheckStatus, Results};

fn fixture() -> Results {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results/results.json");
    let text = std::fs::read_to_string(&path).unwrap();
    results::from_json(&text, &path.display().to_string()).unwrap()
}

fn render(e: &dyn Exporter, r: &Results) -> Vec<(String, String)> {
    e.render(r)
        .unwrap()
        .into_iter()
        .map(|f| {
            (
                f.path.display().to_string(),
                String::from_utf8(f.bytes).unwrap(),
            )
        })
        .collect()
}

#[test]
fn results_markdown() {
    let out = render(&report::ResultsMarkdown, &fixture());
    assert_eq!(out[0].0, "results.md");
    insta::assert_snapshot!(out[0].1);
}

#[test]
fn results_markdown_marks_a_forced_environment_in_every_table() {
    let mut r = fixture();
    r.environment.status = CheckStatus::Fail;
    r.environment.forced = true;
    let md = render(&report::ResultsMarkdown, &r).remove(0).1;
    assert!(md.contains("Environment NOT accepted"));
    // Every accepted figure in the summary carries the dagger.
    let summary = md
        .split("## Summary")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    assert!(summary.contains("120,600 †"), "{summary}");
    insta::assert_snapshot!(summary);
}

#[test]
fn stats_markdown() {
    let out = render(&report::StatsMarkdown, &fixture());
    insta::assert_snapshot!(out[0].1);
}

#[test]
fn results_csv() {
    let out = render(&report::CsvExporter, &fixture());
    insta::assert_snapshot!(out[0].1);
}

#[test]
fn hgrm_of_one_cell() {
    let out = render(&report::HgrmExporter, &fixture());
    let names: Vec<&str> = out.iter().map(|(p, _)| p.as_str()).collect();
    insta::assert_debug_snapshot!(names);
    let (_, text) = out
        .iter()
        .find(|(p, _)| p == "hgrm/axum-plaintext-c100.hgrm")
        .unwrap();
    insta::assert_snapshot!(text);
}

#[test]
fn json_report_is_the_fixture_byte_for_byte() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results/results.json");
    let out = render(&report::JsonExporter, &fixture());
    assert_eq!(out[0].1, std::fs::read_to_string(path).unwrap());
}
