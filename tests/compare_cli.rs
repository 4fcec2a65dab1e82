//! `fairground compare` through the real binary on synthetic results (the
//! sample run in tests/fixtures/results): exit codes, the four outputs,
//! the refusal of runs from different profiles, and the committed JSON
//! Schema of its `--json` output.
//!
//! Regenerate the schema with `FAIRGROUND_BLESS=1 cargo test --test compare_cli`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture_dir() -> PathBuf {
    root().join("tests/fixtures/results")
}

/// `fairground compare ARGS`; the page goes to a temporary file unless ARGS
/// say where (its default, NEW's directory, would be the committed fixture).
fn compare(args: &[&str]) -> Output {
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("compare.html");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fairground"));
    cmd.arg("compare").args(args).env_remove("NO_COLOR");
    if !args.contains(&"--html") {
        cmd.arg("--html").arg(&page);
    }
    cmd.output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A copy of the sample results under `dir` with `edit` applied.
fn edited(dir: &Path, name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture_dir().join("results.json")).unwrap())
            .unwrap();
    edit(&mut v);
    let run = dir.join(name);
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("results.json"), serde_json::to_string(&v).unwrap()).unwrap();
    run
}

fn validator() -> jsonschema::Validator {
    let schema = serde_json::to_value(fairground::compare::schema()).unwrap();
    jsonschema::validator_for(&schema).expect("schema compiles")
}

#[test]
fn committed_schema_matches_the_model() {
    let path = root().join("docs/compare.schema.json");
    let text = serde_json::to_string_pretty(&fairground::compare::schema()).unwrap() + "\n";
    if std::env::var_os("FAIRGROUND_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; regenerate with FAIRGROUND_BLESS=1",
            path.display()
        )
    });
    assert!(
        committed == text,
        "{} is stale; regenerate with FAIRGROUND_BLESS=1 cargo test --test compare_cli",
        path.display()
    );
}

#[test]
fn a_run_against_itself_is_within_noise_and_exits_0_even_when_failing_on_regression() {
    let dir = fixture_dir();
    let d = dir.to_str().unwrap();
    let o = compare(&[d, d, "--fail-on-regression"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("0 regressed, 0 improved"), "{out}");
    assert!(!out.contains("\x1b["), "no colour on a pipe: {out}");
    assert!(
        out.contains("not compared (rejected on a side)") && out.contains("OOM"),
        "rejected cells are listed with the reason: {out}"
    );
}

#[test]
fn json_output_validates_against_the_schema() {
    let d = fixture_dir();
    let file = d.join("results.json");
    let o = compare(&[
        &format!("{}:axum", d.display()),
        &format!("{}:express", file.display()),
        "--json",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let errors: Vec<String> = validator()
        .iter_errors(&v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(v["base"]["framework"], "axum");
    assert_eq!(v["new"]["framework"], "express");
    assert!(v["summary"]["regressed"].as_u64().unwrap() > 0, "{out}");
    // A document missing its rows is not valid.
    let mut broken = v.clone();
    broken.as_object_mut().unwrap().remove("rows");
    assert!(!validator().is_valid(&broken));
}

#[test]
fn a_regression_exits_6_with_fail_on_regression_and_writes_the_markdown() {
    let d = fixture_dir();
    let tmp = tempfile::tempdir().unwrap();
    let md = tmp.path().join("pr-comment.md");
    let base = format!("{}:axum", d.display());
    let new = format!("{}:express", d.display());
    let o = compare(&[&base, &new, "--markdown", md.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "without the flag, a regression is reported, not failed"
    );
    let o = compare(&[&base, &new, "--fail-on-regression"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(6), "{out}{err}");
    let first = out
        .lines()
        .skip_while(|l| !l.starts_with("verdict"))
        .nth(1)
        .unwrap();
    assert!(first.starts_with("regressed"), "regressions first: {out}");
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.starts_with("### fairground compare: "), "{md}");
    assert!(
        md.contains("| **regressed** | axum→express plaintext c=100 | req/s |"),
        "{md}"
    );
}

#[test]
fn runs_from_different_profiles_are_refused_with_the_fields_named() {
    let tmp = tempfile::tempdir().unwrap();
    let base = edited(tmp.path(), "base", |v| {
        v["profile"]["load"] = serde_json::json!({"mode": "closed", "pipeline": 1, "threads": 1});
        v["profile"]["duration"] = "15s".into();
    });
    let new = edited(tmp.path(), "new", |v| {
        v["profile"]["load"] = serde_json::json!({"mode": "closed", "pipeline": 16, "threads": 1});
        v["profile"]["duration"] = "5s".into();
    });
    let (b, n) = (base.to_str().unwrap(), new.to_str().unwrap());
    let o = compare(&[b, n]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert!(err.contains("load.pipeline: BASE 1 vs NEW 16"), "{err}");
    assert!(err.contains("window.duration: BASE 15s vs NEW 5s"), "{err}");
    assert!(err.contains("--force"), "{err}");
    let o = compare(&[b, n, "--force"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        out.contains("† forced") && out.contains("within noise †"),
        "{out}"
    );
}

#[test]
fn bad_sides_exit_2_and_say_what_to_give() {
    let tmp = tempfile::tempdir().unwrap();
    let d = fixture_dir();
    let o = compare(&[tmp.path().to_str().unwrap(), d.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("no results.json") && err.contains("fairground run"),
        "{err}"
    );
    let o = compare(&[
        &format!("{}:nosuch", d.display()),
        &format!("{}:axum", d.display()),
    ]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("no cell of framework `nosuch`") && err.contains("axum"),
        "{err}"
    );
    let o = compare(&[&format!("{}:axum", d.display()), d.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o).1);
}

#[test]
fn the_page_draws_one_ratio_chart_per_metric_and_lands_beside_new() {
    let tmp = tempfile::tempdir().unwrap();
    let base = edited(tmp.path(), "base", |_| {});
    let new = edited(tmp.path(), "new", |_| {});
    let o = Command::new(env!("CARGO_BIN_EXE_fairground"))
        .args(["compare", base.to_str().unwrap(), new.to_str().unwrap()])
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    let page_path = new.join("compare.html");
    assert!(
        err.contains(&format!("page: {}", page_path.display())),
        "{err}"
    );
    let page = std::fs::read_to_string(&page_path).expect("compare.html beside NEW's results.json");
    // One chart per metric, each with a row per cell and its numbers.
    for id in [
        "m-req-s",
        "m-p50",
        "m-p99",
        "m-CPU-req",
        "m-memory",
        "m-wire-bytes",
    ] {
        assert!(
            page.contains(&format!("<section id=\"{id}\">")),
            "{id} missing"
        );
        assert!(
            page.contains(&format!("<svg id=\"chart-{id}\"")),
            "chart of {id} missing"
        );
    }
    // The same run twice: nothing changed, every dot is grey or hollow.
    assert!(page.contains("class=\"row noise\"") || page.contains("class=\"row unknown\""));
    assert!(!page.contains("class=\"row worse\"") && !page.contains("class=\"row better\""));
    // Self-contained: nothing is fetched.
    assert!(
        !page.contains("src=\"http") && !page.contains("href=\"http"),
        "no network"
    );
    assert!(page.contains("Content-Security-Policy"));

    // A regression shows as a red row, and the rejected cells are listed.
    let d = fixture_dir();
    let page_path = tmp.path().join("pair.html");
    let o = compare(&[
        &format!("{}:axum", d.display()),
        &format!("{}:express", d.display()),
        "--html",
        page_path.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
    let page = std::fs::read_to_string(&page_path).unwrap();
    assert!(
        page.contains("class=\"row worse\""),
        "the regression is drawn"
    );
    assert!(page.contains("<section id=\"not-compared\">"));
}
