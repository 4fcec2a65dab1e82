//! `make bench PROFILE=quick`, as CI can afford it: the shipped quick profile
//! run end to end by the real binary against real framework containers
//! (node-http, hyper, go-nethttp), then the evidence checked: results.json
//! validates against docs/results.schema.json, every cell has a verdict with
//! reasons where it is not accepted, the Markdown tables are there, and
//! SHA256SUMS verifies every file it lists.
//!
//! The profile says `preflight: warn`, so a busy CI host runs it and every
//! figure is marked as from an unaccepted environment instead of refused.

#[path = "docker_support/mod.rs"]
mod docker_support;

use std::process::Command;

use docker_support::{docker_or_skip, root};
use fairground::results::{self, Status};
use sha2::{Digest, Sha256};

#[test]
fn quick_profile_runs_end_to_end_with_verifiable_evidence() {
    if !docker_or_skip("quick_profile_runs_end_to_end_with_verifiable_evidence") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("output");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fairground"));
    cmd.args([
        "run",
        "--profile",
        "quick",
        "--output",
        out.to_str().unwrap(),
    ])
    .current_dir(root());
    if std::env::var_os("FAIRGROUND_STATIC_BIN").is_none() {
        let bin = fairground::docker::images::locate_static_binary(&root()).expect("make static");
        cmd.env("FAIRGROUND_STATIC_BIN", bin);
    }
    let o = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "quick run failed:\n{stderr}");
    let dir = out.join("latest").canonicalize().expect("output/latest");

    // results.json: the committed schema accepts it.
    let text = std::fs::read_to_string(dir.join(results::RESULTS_FILE)).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("docs/results.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));

    // Every planned cell is there with a verdict; anything not accepted says why.
    let r = results::from_json(&text, "results.json").unwrap();
    assert_eq!(
        r.cells.len(),
        3 * 2,
        "3 frameworks x 2 scenarios:\n{stderr}"
    );
    for cell in &r.cells {
        assert!(!cell.rounds.is_empty(), "{:?} has no round", cell.key);
        if cell.verdict.status != Status::Accepted {
            assert!(
                !cell.verdict.reasons.is_empty(),
                "{:?} is {:?} without a reason",
                cell.key,
                cell.verdict.status
            );
        }
        for round in &cell.rounds {
            assert_eq!(round.connections.established, 50, "{:?}", cell.key);
            assert_eq!(round.connections.serving, 50, "{:?}", cell.key);
            assert!(
                round.requests.balanced(),
                "{:?}: {:?}",
                cell.key,
                round.requests
            );
            assert!(round.responses.status_2xx > 0, "{:?}", cell.key);
        }
    }

    // The tables people read.
    let md = std::fs::read_to_string(dir.join("results.md")).unwrap();
    for needle in [
        "plaintext",
        "json",
        "node-http",
        "hyper",
        "go-nethttp",
        "|---",
    ] {
        assert!(md.contains(needle), "results.md lacks {needle}:\n{md}");
    }
    let stats = std::fs::read_to_string(dir.join("stats.md")).unwrap();
    assert!(stats.contains("go-nethttp"), "{stats}");

    // SHA256SUMS verifies, and covers the reports, histograms and logs.
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    let mut listed = Vec::new();
    for line in sums.lines() {
        let (hash, path) = line.split_once("  ").expect("sha256sum format");
        let bytes = std::fs::read(dir.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(hash, hex::encode(Sha256::digest(&bytes)), "{path}");
        listed.push(path.to_string());
    }
    for must in [
        "results.json",
        "results.md",
        "stats.md",
        "results.csv",
        "results.prom",
        "results.junit.xml",
    ] {
        assert!(listed.iter().any(|p| p == must), "{must} not in SHA256SUMS");
    }
    assert!(listed.iter().any(|p| p.starts_with("hgrm/")));
    assert!(listed.iter().any(|p| p.starts_with("logs/")), "{sums}");
}
