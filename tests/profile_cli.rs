//! `fairground profile …` end to end: the real binary against the shipped
//! profiles and the fixtures under tests/fixtures/profiles/.
//!
//! Each malformed fixture in tests/fixtures/profiles/bad/ carries the message
//! it must produce in trailing `# expect: …` comments (`{file}` stands for the
//! path given on the command line), so the expected text sits beside the
//! profile that causes it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fairground(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fairground"))
        .args(args)
        .current_dir(cwd)
        .env_remove("FAIRGROUND_PROFILES")
        .output()
        .expect("run fairground")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_shipped_profile_passes_check() {
    let files = yaml_files(&root().join("profiles"));
    for name in ["quick", "standard", "highconc", "latency"] {
        assert!(
            files.iter().any(|f| f.file_stem().unwrap() == name),
            "profiles/{name}.yaml is missing"
        );
    }
    let args: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let mut argv = vec!["profile", "check"];
    argv.extend(args.iter().map(String::as_str));
    let out = fairground(&root(), &argv);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("ok ")).count(),
        files.len(),
        "{stdout}"
    );
}

#[test]
fn check_without_arguments_checks_the_profiles_folder() {
    let out = fairground(&root(), &["profile", "check"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("ok profiles/standard.yaml"));
}

#[test]
fn good_fixtures_pass_check() {
    // From an empty folder: fixtures must not depend on which frameworks
    // exist under frameworks/.
    let cwd = tempfile::tempdir().unwrap();
    for f in yaml_files(&root().join("tests/fixtures/profiles")) {
        let out = fairground(cwd.path(), &["profile", "check", f.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}: {}",
            f.display(),
            text(&out.stderr)
        );
    }
}

#[test]
fn every_malformed_profile_fails_with_exit_2_and_its_documented_message() {
    let bad = yaml_files(&root().join("tests/fixtures/profiles/bad"));
    assert!(bad.len() >= 15, "only {} malformed fixtures", bad.len());
    // Run from an empty folder: a failed check must write nothing anywhere.
    let cwd = tempfile::tempdir().unwrap();
    for f in &bad {
        let body = std::fs::read_to_string(f).unwrap();
        let file = f.display().to_string();
        let expects: Vec<String> = body
            .lines()
            .filter_map(|l| l.strip_prefix("# expect: "))
            .map(|e| e.replace("{file}", &file))
            .collect();
        assert!(!expects.is_empty(), "{file} has no `# expect:` line");
        assert!(
            expects[0].starts_with(&format!("{file}:")),
            "{file}: the first expectation must pin file:line:col"
        );
        let out = fairground(cwd.path(), &["profile", "check", &file]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{file}: {stderr}");
        assert!(
            out.stdout.is_empty(),
            "{file}: printed {}",
            text(&out.stdout)
        );
        assert_eq!(
            stderr.lines().count(),
            1,
            "{file}: one message expected:\n{stderr}"
        );
        for e in &expects {
            assert!(
                stderr.contains(e.as_str()),
                "{file}:\n  expected: {e}\n  got:      {stderr}"
            );
        }
    }
    let left: Vec<_> = std::fs::read_dir(cwd.path()).unwrap().collect();
    assert!(left.is_empty(), "a failed check wrote files: {left:?}");
}

#[test]
fn a_typo_in_a_profile_name_suggests_the_right_one() {
    let out = fairground(&root(), &["profile", "show", "standrd"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("no profile named `standrd`: profiles/standrd.yaml does not exist (did you mean `standard`?)"), "{stderr}");
    assert!(
        stderr.contains(
            "available: across-hosts, database, grpc, highconc, latency, protocols, quick, standard"
        ),
        "{stderr}"
    );
}

#[test]
fn profiles_env_overrides_the_profiles_folder() {
    let out = Command::new(env!("CARGO_BIN_EXE_fairground"))
        .args(["profile", "show", "tiny"])
        .current_dir(root())
        .env("FAIRGROUND_PROFILES", "tests/fixtures/profiles")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("concurrency:\n- 4\n"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn names_outside_the_framework_roster_are_refused_with_a_suggestion() {
    let dir = tempfile::tempdir().unwrap();
    for fw in ["hyper", "axum"] {
        std::fs::create_dir_all(dir.path().join("frameworks").join(fw)).unwrap();
        std::fs::write(
            dir.path()
                .join("frameworks")
                .join(fw)
                .join("framework.yaml"),
            "name: x\n",
        )
        .unwrap();
    }
    std::fs::write(dir.path().join("p.yaml"), "frameworks: [axum, hyperr]\n").unwrap();
    let out = fairground(dir.path(), &["profile", "check", "p.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("p.yaml:1:20: `frameworks[1]`: no framework `hyperr` under frameworks/; known: axum, hyper (did you mean `hyper`?)"),
        "{stderr}"
    );
}

/// Every property the schema declares, as dotted paths (objects only; the
/// union types are leaves).
fn schema_paths(
    schema: &serde_json::Value,
    node: &serde_json::Value,
    prefix: &str,
    out: &mut Vec<String>,
) {
    let deref = |n: &'_ serde_json::Value| -> serde_json::Value {
        match n.get("$ref").and_then(|r| r.as_str()) {
            Some(r) => schema["$defs"][r.trim_start_matches("#/$defs/")].clone(),
            None => n.clone(),
        }
    };
    let node = deref(node);
    let node = match node.get("anyOf").and_then(|a| a.as_array()) {
        // `Option<T>`: schemars writes `anyOf: [T, null]`.
        Some(a) if a.iter().any(|s| s["type"] == "null") => {
            deref(a.iter().find(|s| s["type"] != "null").unwrap())
        }
        _ => node,
    };
    if let Some(props) = node.get("properties").and_then(|p| p.as_object()) {
        for (k, v) in props {
            let path = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            out.push(path.clone());
            if k != "warmup" && k != "sysctls" && k != "load" {
                schema_paths(schema, v, &path, out);
            }
        }
    }
}

fn has_path(v: &serde_json::Value, path: &str) -> bool {
    path.split('.').try_fold(v, |v, k| v.get(k)).is_some()
}

#[test]
fn show_prints_every_field_with_defaults_filled_in_and_loads_back() {
    let out = fairground(&root(), &["profile", "show", "standard"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    let value: serde_json::Value = serde_saphyr::from_str(&shown).unwrap();
    let schema: serde_json::Value =
        serde_json::from_str(&text(&fairground(&root(), &["profile", "schema"]).stdout)).unwrap();
    let mut paths = Vec::new();
    schema_paths(&schema, &schema, "", &mut paths);
    assert!(paths.len() > 25, "{paths:?}");
    // `hosts` has no default to fill in: absent means everything on the
    // local daemon, exactly as before the section existed; nor do
    // `objectives`: absent means none, and nothing gates the run; nor does
    // `budget`: absent means rounds go on until precise or `rounds.max`.
    for p in paths.iter().filter(|p| {
        !p.starts_with("hosts") && !p.starts_with("objectives") && p.as_str() != "budget"
    }) {
        assert!(
            has_path(&value, p),
            "`profile show standard` lacks `{p}`:\n{shown}"
        );
    }
    // Defaults standard.yaml leaves out are filled: threads follow loader cpus.
    assert_eq!(value["load"]["threads"], 1, "{shown}");
    assert_eq!(value["allow_shared_cores"], false, "{shown}");

    // The printed profile is itself a valid profile that shows identically.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("standard.yaml");
    std::fs::write(&copy, &shown).unwrap();
    let again = fairground(&root(), &["profile", "show", copy.to_str().unwrap()]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    let strip = |s: &str| s.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(strip(&text(&again.stdout)), strip(&shown));
}

#[test]
fn show_of_an_almost_empty_profile_fills_the_documented_defaults() {
    let out = fairground(
        &root(),
        &["profile", "show", "tests/fixtures/profiles/minimal.yaml"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    for line in [
        "frameworks: all",
        "duration: 15s",
        "rounds: 3",
        "  memory: 1GiB",
        "  nofile: 16384",
        "  preflight: strict",
        "network: bridge",
        "idle_settle: 3s",
        "readiness_timeout: 1m",
    ] {
        assert!(
            shown.lines().any(|l| l == line),
            "missing `{line}`:\n{shown}"
        );
    }
}

#[test]
fn schema_is_valid_and_matches_the_committed_copy() {
    let out = fairground(&root(), &["profile", "schema"]);
    assert!(out.status.success());
    let printed = text(&out.stdout);
    let schema: serde_json::Value = serde_json::from_str(&printed).unwrap();
    assert!(
        jsonschema::meta::is_valid(&schema),
        "not a valid JSON Schema"
    );
    let committed =
        std::fs::read_to_string(root().join("docs/profile.schema.json")).unwrap_or_default();
    assert!(
        printed == committed,
        "docs/profile.schema.json is out of date; regenerate it with\n  cargo run -q -- profile schema > docs/profile.schema.json"
    );
}

#[test]
fn shipped_and_fixture_profiles_satisfy_the_schema() {
    let schema: serde_json::Value =
        serde_json::from_str(&text(&fairground(&root(), &["profile", "schema"]).stdout)).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut files = yaml_files(&root().join("profiles"));
    files.extend(yaml_files(&root().join("tests/fixtures/profiles")));
    for f in files {
        let value: serde_json::Value =
            serde_saphyr::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", f.display());
    }
}

#[test]
fn profile_check_takes_the_frameworks_folder_run_takes() {
    // A profile naming a framework that lives outside ./frameworks: `run
    // --frameworks DIR` accepts it, so `profile check --frameworks DIR`
    // must too (and without the folder it names the unknown framework).
    let dir = std::env::temp_dir().join(format!("fg-profile-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let profile = dir.join("elsewhere.yaml");
    std::fs::write(
        &profile,
        "description: \"names a framework of another folder\"\nframeworks: [plainfw]\n",
    )
    .unwrap();
    let path = profile.display().to_string();
    let without = fairground(&root(), &["profile", "check", &path]);
    assert_eq!(without.status.code(), Some(2), "{}", text(&without.stderr));
    assert!(
        text(&without.stderr).contains("plainfw"),
        "{}",
        text(&without.stderr)
    );
    let fixtures = root().join("tests/fixtures/run/frameworks");
    let with = fairground(
        &root(),
        &[
            "profile",
            "check",
            "--frameworks",
            &fixtures.display().to_string(),
            &path,
        ],
    );
    assert!(with.status.success(), "{}", text(&with.stderr));
    assert!(
        text(&with.stdout).starts_with("ok "),
        "{}",
        text(&with.stdout)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
