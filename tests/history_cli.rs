//! `fairground history` end to end over synthetic series of runs: the
//! committed sample run reduced to one cell, its rounds' req/s set to a
//! level with noise, written as one run directory each. Known answers:
//! 10 runs at one level then 10 at a level 8% lower (2% run-to-run noise)
//! give exactly one change point, at the 11th run, confirmed by compare;
//! 20 runs at one level give none; a run that is not comparable with the
//! one before splits the series and says why.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

#[path = "support/one_cell.rs"]
mod one_cell;
use one_cell::one_cell_run;

fn fairground(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fairground"))
        .args(args)
        .output()
        .unwrap()
}

/// Deterministic standard normal draws (an LCG through Box–Muller).
struct Noise(u64);

impl Noise {
    fn uniform(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f64 {
        let (a, b) = (self.uniform(), self.uniform());
        (-2.0 * a.ln()).sqrt() * (2.0 * std::f64::consts::PI * b).cos()
    }
}

/// Write run `i` at `level` req/s (each round within 0.5% of it) into
/// `dir`, under a name that does not sort in run order.
fn write_run(dir: &Path, base: &Value, i: usize, level: f64, noise: &mut Noise) -> PathBuf {
    let mut r = base.clone();
    r["run_id"] = format!("20270101T{:02}0000Z-synthetic", i).into();
    r["started_at"] = format!("2027-01-01T{:02}:00:00Z", i).into();
    r["git"] = serde_json::json!({
        "commit": format!(
            "{:032x}{i:08x}",
            (i as u128 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c834)
        ),
        "dirty": false,
        "branch": "main",
        "commit_time": format!("2026-12-31T{:02}:00:00+00:00", i),
    });
    for round in r["cells"][0]["rounds"].as_array_mut().unwrap() {
        let v = level * (1.0 + 0.005 * noise.normal());
        round["throughput_rps"] = v.into();
        let secs = round["windows_rps"].as_array().map_or(0, Vec::len);
        round["windows_rps"] = Value::Array((0..secs).map(|_| v.into()).collect());
    }
    let run = dir.join(format!("run-{:02}", (i * 7) % 20 + 20 * (i / 20)));
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(
        run.join("results.json"),
        serde_json::to_string_pretty(&r).unwrap(),
    )
    .unwrap();
    run
}

/// `fairground history DIR --out OUT`: the parsed history.json and stdout.
fn history(runs: &Path, out: &Path) -> (Value, String) {
    let o = fairground(&[
        "history",
        runs.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let h: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("history.json")).unwrap()).unwrap();
    let page = std::fs::read_to_string(out.join("history.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.contains("<svg"));
    (h, stdout)
}

fn throughput(h: &Value) -> &Value {
    h["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["metric"] == "throughput")
        .expect("a req/s series")
}

#[test]
fn an_eight_percent_drop_after_ten_runs_is_one_change_point_at_the_eleventh_confirmed_by_compare() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("output");
    let base = one_cell_run();
    let mut noise = Noise(20261201);
    for i in 0..20 {
        let level = if i < 10 { 100_000.0 } else { 92_000.0 };
        write_run(
            &runs,
            &base,
            i,
            level * (1.0 + 0.02 * noise.normal()),
            &mut noise,
        );
    }
    let (h, stdout) = history(&runs, &dir.path().join("h"));
    eprintln!("{stdout}");
    assert_eq!(h["summary"]["runs"], 20);
    assert_eq!(h["summary"]["segments"], 1);
    assert_eq!(h["method"]["order"], "commit time (git), then start time");
    // The runs come out in commit order, not in directory-name order.
    let ids: Vec<&str> = h["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted);
    assert_eq!(h["summary"]["change_points"], 1, "{stdout}");
    let cps = throughput(&h)["change_points"].as_array().unwrap();
    assert_eq!(cps.len(), 1, "{stdout}");
    let cp = &cps[0];
    assert_eq!(cp["run"], 10, "{stdout}");
    assert_eq!(cp["before_run"], 9);
    assert!((cp["ratio"].as_f64().unwrap() - 0.92).abs() < 0.03, "{cp}");
    assert_eq!(cp["confirmed"], true, "{cp}");
    assert_eq!(cp["compare_call"], "regressed", "{cp}");
    assert_eq!(h["summary"]["confirmed"], 1);
    assert!(
        stdout.contains("change point: axum plaintext c=100 req/s at run #10"),
        "{stdout}"
    );
    // Each point carries its run's interval.
    let p = &throughput(&h)["points"][0];
    assert!(p["low"].as_f64().unwrap() <= p["median"].as_f64().unwrap());
    assert!(p["median"].as_f64().unwrap() <= p["high"].as_f64().unwrap());
    assert_eq!(p["rounds"], 3);
}

#[test]
fn twenty_runs_at_one_level_have_no_change_point() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("output");
    let base = one_cell_run();
    let mut noise = Noise(7);
    for i in 0..20 {
        write_run(
            &runs,
            &base,
            i,
            100_000.0 * (1.0 + 0.02 * noise.normal()),
            &mut noise,
        );
    }
    let (h, stdout) = history(&runs, &dir.path().join("h"));
    assert_eq!(h["summary"]["change_points"], 0, "{stdout}");
    assert!(stdout.contains("0 change point(s)"), "{stdout}");
}

#[test]
fn a_run_that_is_not_comparable_splits_the_series_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("output");
    let base = one_cell_run();
    let mut other = base.clone();
    other["profile"]["concurrency"] = serde_json::json!([100, 20000]);
    let mut noise = Noise(99);
    for i in 0..8 {
        let b = if i < 4 { &base } else { &other };
        write_run(&runs, b, i, 100_000.0, &mut noise);
    }
    let (h, stdout) = history(&runs, &dir.path().join("h"));
    assert_eq!(h["summary"]["segments"], 2, "{stdout}");
    let seg = &h["segments"][1];
    assert_eq!(seg["first_run"], 4);
    assert_eq!(
        seg["split_because"][0]["field"], "connections (concurrency)",
        "{seg}"
    );
    assert!(stdout.contains("split before run #4"), "{stdout}");
    // Too few runs on either side to look for a change in either part.
    assert_eq!(h["summary"]["change_points"], 0);
}

#[test]
fn history_refuses_a_folder_without_runs() {
    let dir = tempfile::tempdir().unwrap();
    let o = fairground(&["history", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("holds no results.json"));
}
