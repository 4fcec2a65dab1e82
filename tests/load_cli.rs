//! The command line and the in-process API: progress lines, bad input,
//! the human summary, and `load::run` used as a library.

mod load_support;

use load_support::load_with;

use std::process::Command;
use std::time::Duration;

use fairground::contract::Scenario;
use fairground::roles::load::{self, LoadConfig};

#[test]
fn progress_prints_one_json_line_per_second_on_stderr() {
    let server = fairground::roles::serve::start("127.0.0.1".parse().unwrap(), 0, 1).unwrap();
    let url = format!("http://{}", server.addr);
    let out = Command::new(env!("CARGO_BIN_EXE_fairground"))
        .args([
            "load",
            "--url",
            &url,
            "--scenario",
            "plaintext",
            "-c",
            "2",
            "-t",
            "1",
        ])
        .args(["--warmup", "1500ms", "-d", "1500ms", "--progress"])
        .output()
        .unwrap();
    server.stop();
    assert!(out.status.success());
    use fairground::roles::load::report::{Phase, Progress};
    let lines: Vec<Progress> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(|l| Progress::parse(l).unwrap_or_else(|| panic!("`{l}` is not a progress line")))
        .collect();
    let ticks: Vec<(Phase, u64)> = lines
        .iter()
        .filter_map(|p| match p {
            Progress::Tick { phase, ok, .. } => Some((*phase, *ok)),
            Progress::Measure { .. } | Progress::Drain { .. } => None,
        })
        .collect();
    assert!(ticks.len() >= 2, "{lines:?}");
    assert_eq!(ticks[0].0, Phase::Warmup);
    assert!(ticks.iter().any(|t| t.0 == Phase::Measure), "{lines:?}");
    assert!(ticks.iter().map(|t| t.1).sum::<u64>() > 0);
    // Exactly one start of measurement, 1.5 s in, after the warm-up ticks.
    let starts: Vec<(usize, f64)> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match p {
            Progress::Measure { t, .. } => Some((i, *t)),
            Progress::Tick { .. } | Progress::Drain { .. } => None,
        })
        .collect();
    assert_eq!(starts.len(), 1, "{lines:?}");
    assert!((1.5..1.6).contains(&starts[0].1), "{lines:?}");
    assert!(matches!(
        lines[starts[0].0 - 1],
        Progress::Tick {
            phase: Phase::Warmup,
            ..
        }
    ));
    // Without --json the summary is for people.
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(human.contains("Requests/sec (2xx):"), "{human}");
    assert!(
        human.contains("Errors: connect 0, read 0, write 0, timeout 0, parse 0, tls 0"),
        "{human}"
    );
}

#[test]
fn host_names_and_bad_flags_are_bad_input() {
    for args in [
        &["--url", "http://localhost:8080"][..],
        &["--url", "http://127.0.0.1:1", "--pipeline", "0"][..],
        &["--url", "http://127.0.0.1:1", "-R", "-5"][..],
        &["--url", "http://127.0.0.1:1", "--header", "no-colon"][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_fairground"))
            .arg("load")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn runs_in_process_through_the_library_api() {
    let server = fairground::roles::serve::start("127.0.0.1".parse().unwrap(), 0, 1).unwrap();
    let cfg = LoadConfig::new(&format!("http://{}", server.addr))
        .unwrap()
        .scenario(Scenario::Validate)
        .connections(3)
        .threads(2)
        .pipeline(2)
        .max_requests(500)
        .duration(Duration::from_secs(5));
    let report = load::run(&cfg).unwrap();
    server.stop();
    assert_eq!(report.responses.status_2xx, 500);
    assert_eq!(report.settings.scenario.as_deref(), Some("validate"));
    assert_eq!(report.settings.threads, 2);
    let back: load::LoadReport =
        serde_json::from_str(&serde_json::to_string(&report).unwrap()).unwrap();
    // Floats may differ in the last digit after a JSON round trip; counts not.
    assert_eq!(
        (
            back.responses,
            back.connections,
            back.errors,
            &back.latency.histogram
        ),
        (
            report.responses,
            report.connections,
            report.errors,
            &report.latency.histogram
        )
    );
    assert_eq!(
        load::decode_histogram(&report.latency.histogram)
            .unwrap()
            .len(),
        500
    );
}

/// An until-stable warm-up ends (stable, or at its longest) and the window
/// it opens is measured, in closed loop and at a fixed rate. (A window
/// decided again on every pass of the main loop moved ahead forever: no
/// window, and at a fixed rate no request after the warm-up's longest.)
#[test]
fn an_until_stable_warm_up_opens_its_window_in_closed_loop_and_at_a_fixed_rate() {
    let server = fairground::roles::serve::start("127.0.0.1".parse().unwrap(), 0, 1).unwrap();
    let url = format!("http://{}", server.addr);
    for rate in [None, Some("500")] {
        let mut args = vec![
            "--url",
            url.as_str(),
            "--scenario",
            "plaintext",
            "-c",
            "4",
            "-t",
            "1",
            "--warmup",
            "3s",
            "--warmup-until-stable",
            "500ms",
            "--stable-cv",
            "0.5",
            "-d",
            "1s",
        ];
        if let Some(r) = rate {
            args.extend(["--rate", r]);
        }
        let started = std::time::Instant::now();
        // Bounded: the bug this pins made the loader run forever.
        let mut cmd = Command::new("timeout");
        cmd.args(["30", env!("CARGO_BIN_EXE_fairground")]);
        let r = load_with(cmd, &args);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{rate:?}: took {:?}",
            started.elapsed()
        );
        assert!(r.warmup.stable.is_some(), "{rate:?}: {:?}", r.warmup);
        assert!(
            r.warmup.seconds <= 3.1,
            "{rate:?}: warm-up {} s",
            r.warmup.seconds
        );
        assert!(
            (r.measured_s - 1.0).abs() < 0.05,
            "{rate:?}: {}",
            r.measured_s
        );
        assert!(r.responses.status_2xx > 0, "{rate:?}: {:?}", r.responses);
        if rate.is_some() {
            // 500 req/s over the 1 s window: every due request sent.
            assert_eq!(r.requests.unsent, 0, "{:?}", r.requests);
            assert!(
                (r.requests.sent as f64 - 500.0).abs() <= 5.0,
                "{:?}",
                r.requests
            );
        }
    }
    server.stop();
}
