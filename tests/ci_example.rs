//! docs/ci.md's worked GitHub Actions job, exercised: the scripts of its
//! steps after `fairground run` ("compare with main" and "gate") are read
//! out of the document and run with `sh` against synthetic runs, the way
//! the runner would (the step's `$GITHUB_ENV` file carried to the next
//! step, `target/release/fairground` being this build). A regressed pull
//! request fails the gate, a steady one passes, a missed objective
//! (`fairground run` exited 99) fails it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

#[path = "support/one_cell.rs"]
mod one_cell;
use one_cell::one_cell_run;

/// The `run: |` script of the step named `name` in docs/ci.md.
fn step_script(name: &str) -> String {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/ci.md")).unwrap();
    let lines: Vec<&str> = doc.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim() == format!("- name: {name}"))
        .unwrap_or_else(|| panic!("docs/ci.md has no step `{name}`"));
    let run = (start..lines.len())
        .find(|&i| lines[i].trim() == "run: |")
        .expect("the step has a run: | script");
    let indent = lines[run + 1].len() - lines[run + 1].trim_start().len();
    lines[run + 1..]
        .iter()
        .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() >= indent)
        .map(|l| l.get(indent..).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The sample run reduced to axum plaintext c=100 at `level` req/s.
fn run_at(level: f64, id: &str, hour: u32) -> Value {
    let mut r = one_cell_run();
    r["run_id"] = id.into();
    r["started_at"] = format!("2027-01-01T{hour:02}:00:00Z").into();
    for (i, round) in r["cells"][0]["rounds"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
    {
        let v = level * (1.0 + 0.003 * (i as f64 - 1.0));
        round["throughput_rps"] = v.into();
        let secs = round["windows_rps"].as_array().map_or(0, Vec::len);
        round["windows_rps"] = Value::Array((0..secs).map(|_| v.into()).collect());
    }
    r
}

fn write(dir: &Path, r: &Value) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("results.json"), serde_json::to_string(r).unwrap()).unwrap();
}

/// A runner's work tree: main's last run under base/, this run behind
/// output/latest, this build as target/release/fairground.
fn workspace(new_level: f64) -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    let p = ws.path();
    write(
        &p.join("base/20270101T000000Z-ci"),
        &run_at(100_000.0, "20270101T000000Z-ci", 0),
    );
    let new = p.join("output/20270101T010000Z-ci");
    write(&new, &run_at(new_level, "20270101T010000Z-ci", 1));
    std::os::unix::fs::symlink("20270101T010000Z-ci", p.join("output/latest")).unwrap();
    std::fs::create_dir_all(p.join("target/release")).unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_fairground"),
        p.join("target/release/fairground"),
    )
    .unwrap();
    ws
}

/// Run a step's script in `ws` with `env`; its exit code, output and the
/// variables it added to `$GITHUB_ENV`.
fn step(ws: &Path, name: &str, env: &[(String, String)]) -> (i32, String, Vec<(String, String)>) {
    let github_env: PathBuf = ws.join("github_env");
    std::fs::write(&github_env, "").unwrap();
    let o = Command::new("sh")
        .arg("-c")
        .arg(step_script(name))
        .current_dir(ws)
        .env("GITHUB_ENV", &github_env)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    let added = std::fs::read_to_string(&github_env)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (
        o.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        added,
    )
}

fn run_code(code: &str) -> Vec<(String, String)> {
    vec![("RUN_CODE".into(), code.into())]
}

#[test]
fn a_pull_request_that_regressed_fails_the_gate_after_writing_its_comparison() {
    // A fifth fewer req/s: beyond the 8% two runs of one server drift
    // apart (compare's across-runs floor).
    let ws = workspace(80_000.0);
    let (code, out, added) = step(ws.path(), "compare with main", &[]);
    assert_eq!(code, 0, "the compare step records, the gate decides: {out}");
    assert_eq!(added, vec![("COMPARE_CODE".into(), "6".into())], "{out}");
    assert!(ws.path().join("compare.md").is_file());
    let mut env = run_code("0");
    env.extend(added);
    let (code, out, _) = step(ws.path(), "gate", &env);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("regressed against main"), "{out}");
    assert!(ws.path().join("history/history.html").is_file(), "{out}");
}

#[test]
fn a_steady_pull_request_passes_the_gate() {
    let ws = workspace(100_000.0);
    let (_, out, added) = step(ws.path(), "compare with main", &[]);
    assert_eq!(added, vec![("COMPARE_CODE".into(), "0".into())], "{out}");
    let mut env = run_code("0");
    env.extend(added);
    let (code, out, _) = step(ws.path(), "gate", &env);
    assert_eq!(code, 0, "{out}");
    let h: Value = serde_json::from_str(
        &std::fs::read_to_string(ws.path().join("history/history.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(h["summary"]["runs"], 2);
}

#[test]
fn a_missed_objective_fails_the_gate() {
    let ws = workspace(100_000.0);
    let (code, out, _) = step(ws.path(), "gate", &run_code("99"));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("an objective was missed"), "{out}");
    let (code, out, _) = step(ws.path(), "gate", &run_code("3"));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("the run failed (3)"), "{out}");
}
