//! Snapshot tests of every report format, rendered from the committed sample
//! run in tests/fixtures/results/results.json (review changes with
//! `cargo insta review`, or `INSTA_UPDATE=always` then `git diff`).

use std::path::PathBuf;

use fairground::report::{self, Exporter};
use fairground::results::{self, CheckStatus, RateFigures, Results};

fn fixture() -> Results {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results/results.json");
    let text = std::fs::read_to_string(&path).unwrap();
    results::from_json(&text, &path.display().to_string()).unwrap()
}

/// The fixture as if its profile had been fixed-rate at 5,000 req/s: every
/// cell keyed by the rate, every round carrying its rate figures (achieved
/// a little under target, so the achieved figure shows).
fn fixed_rate(mut r: Results) -> Results {
    const RATE: u64 = 5_000;
    for k in &mut r.plan {
        k.rate = Some(RATE);
    }
    for c in &mut r.cells {
        c.key.rate = Some(RATE);
        for (i, round) in c.rounds.iter_mut().enumerate() {
            round.rate = Some(RateFigures {
                target_rps: RATE as f64,
                achieved_rps: RATE as f64 - 1.0 - i as f64,
                max_lag_us: 800,
            });
        }
    }
    for i in &mut r.incidents {
        if let Some(k) = &mut i.cell {
            k.rate = Some(RATE);
        }
    }
    r
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
fn results_markdown_headlines_latency_in_fixed_rate_profiles() {
    let md = render(&report::ResultsMarkdown, &fixed_rate(fixture()))
        .remove(0)
        .1;
    assert!(!md.contains("## Summary: req/s"), "{md}");
    let summary = md
        .split("## Summary: latency at a fixed rate")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    // p50 / p99 / p99.9 of the merged histogram, then the achieved rate
    // (median of 4,999, 4,998 and 4,997 req/s).
    assert!(
        summary.contains("| axum | 666 µs / 1.67 ms / 1.67 ms at 4,998 req/s |"),
        "{summary}"
    );
    assert!(summary.contains("✗ connections short, errors"), "{summary}");
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
