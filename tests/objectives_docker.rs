//! Objectives against a server whose latency is known in advance, through
//! the real pipeline (`fairground run`, its loader container, plainfw in a
//! container): met, missed and undecided as the rounds say, the exit code
//! 99 after every output is written, and results.junit.xml read back by
//! junitparser (PyPI) with the failure and the skipped case where they
//! belong.
//!
//! The server answers in 10 ms until 4,100 requests were answered, then in
//! 30 ms (`PLAINFW_SLOWER_AFTER`): at 8 connections the first round (1 s
//! warm-up + 2 s window, about 2,400 requests after verification's few
//! hundred) reads a p50 and p99 of 10 ms and the third (from about 5,600
//! requests on) 30 ms. A server with one fixed delay D cannot make `p99 < D`
//! undecided: each round's p99 is at least D, so the objective is missed,
//! rightly; two levels make the rounds straddle a bound between them.
//! - `p99 < 5ms`: every round above it → missed;
//! - `p999 < 60ms`: every round below it → met;
//! - `p50 < 20ms`: rounds on both sides → undecided.
//!
//! Only traffic: containers on the run's own internal network.

mod docker_support;

use docker_support::*;
use fairground::results::ObjectiveStatus;

#[test]
fn objectives_on_a_known_latency_are_met_missed_or_undecided_and_a_miss_exits_99() {
    if !docker_or_skip("objectives_docker") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    plainfw_variant(
        dir,
        "stepped",
        &[
            ("PLAINFW_DELAY_MS", "10"),
            ("PLAINFW_SLOWER_AFTER", "4100"),
            ("PLAINFW_SLOWER_DELAY_MS", "30"),
        ],
    );
    let profile = "description: \"objectives on a known latency\"\n\
         frameworks: [stepped]\nscenarios: [plaintext]\nconcurrency: [8]\n\
         warmup: 1s\nduration: 2s\nrounds: 3\n\
         load: {threads: 1, timeout: 2s}\n\
         server: {cpus: 1, memory: 256MiB, nofile: 16384}\n\
         loader: {cpus: 1, memory: 256MiB, nofile: 16384}\n\
         idle_settle: 1s\nreadiness_timeout: 30s\n\
         thresholds: {preflight: warn, off: [slowed_machine]}\n\
         objectives:\n  plaintext: [\"p99 < 5ms\", \"p999 < 60ms\", \"p50 < 20ms\"]\n";
    let out = dir.join("output");
    let (code, stderr) = run_profile_to(dir, profile, &out);
    assert_eq!(code, Some(99), "a missed objective exits 99: {stderr}");
    let run = run_dir(&out);
    let r = results_of(&run);
    let cell = &r.cells[0];
    let p99s: Vec<Option<u64>> = cell.rounds.iter().map(|x| x.latency.p99_us).collect();
    let p50s: Vec<Option<u64>> = cell.rounds.iter().map(|x| x.latency.p50_us).collect();
    eprintln!("objectives: rounds' p50 {p50s:?} µs, p99 {p99s:?} µs");
    for o in &r.objectives {
        eprintln!(
            "objective {:12} {:?}: {}",
            o.objective.text, o.status, o.why
        );
    }
    // The server did what the test says it does: 10 ms first, 30 ms last.
    let first = p50s[0].expect("round 1 has a p50");
    let last = p50s[2].expect("round 3 has a p50");
    assert!((10_000..15_000).contains(&first), "round 1 p50 {first} µs");
    assert!((30_000..40_000).contains(&last), "round 3 p50 {last} µs");
    let status = |text: &str| {
        r.objectives
            .iter()
            .find(|o| o.objective.text == text)
            .unwrap_or_else(|| panic!("no outcome for {text}: {:?}", r.objectives))
            .status
    };
    assert_eq!(status("p99 < 5ms"), ObjectiveStatus::Missed);
    assert_eq!(status("p999 < 60ms"), ObjectiveStatus::Met);
    assert_eq!(status("p50 < 20ms"), ObjectiveStatus::Undecided);
    // Every output was written before the exit code, the objectives in
    // results.md among them.
    for f in [
        "results.md",
        "report.html",
        "results.junit.xml",
        "results.prom",
    ] {
        assert!(run.join(f).is_file(), "{f} written");
    }
    let md = std::fs::read_to_string(run.join("results.md")).unwrap();
    assert!(
        md.contains("Objectives: 1 met, 1 missed, 1 undecided"),
        "{md}"
    );
    // junitparser reads the real file: the miss is a failure, the
    // undecided one skipped, the met one passes.
    let py = Command::new("python3")
        .arg("-c")
        .arg(
            r#"
import sys
from junitparser import JUnitXml, Failure, Skipped
xml = JUnitXml.fromfile(sys.argv[1])
for suite in xml:
    if suite.name != "objectives":
        continue
    for case in suite:
        kinds = [type(r).__name__ for r in case.result]
        print(case.name, "|", ",".join(kinds) or "passed")
"#,
        )
        .arg(run.join("results.junit.xml"))
        .output()
        .expect("python3 runs (make deps installs junitparser)");
    let text = String::from_utf8_lossy(&py.stdout).into_owned();
    assert!(
        py.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&py.stderr)
    );
    let kind = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no case for {needle}: {text}"))
            .rsplit('|')
            .next()
            .unwrap()
            .trim()
            .to_string()
    };
    assert_eq!(kind("p99 < 5ms"), "Failure", "{text}");
    assert_eq!(kind("p50 < 20ms"), "Skipped", "{text}");
    assert_eq!(kind("p999 < 60ms"), "passed", "{text}");
}

use std::process::Command;
