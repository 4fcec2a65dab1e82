//! Every framework in the roster (frameworks/*) passes `fairground verify`:
//! images built from nothing where missing (bases bootstrapped with
//! mmdebstrap, cargo prebuilds, builds with networking off), each framework
//! started in a container with limits, and checked with random inputs from a
//! fairground container on the run's internal network.
//!
//! This is the slowest test of the suite on a fresh machine (every base and
//! framework image is built); on a machine that has the images it only
//! verifies. With CI=true a missing daemon fails; elsewhere it skips loudly.

#[path = "docker_support/mod.rs"]
mod docker_support;

use std::time::Duration;

use docker_support::{docker_or_skip, engine, leftovers, root, rt, test_run};
use fairground::docker::engine::Engine;
use fairground::verify::orchestrate::{verify_all, OrchestrateOptions};

#[test]
fn every_roster_framework_passes_verify_on_its_declared_scenarios() {
    if !docker_or_skip("every_roster_framework_passes_verify_on_its_declared_scenarios") {
        return;
    }
    let roster = fairground::framework::discover(&root().join("frameworks")).unwrap();
    assert!(
        roster.len() >= 14,
        "the roster shrank to {} frameworks",
        roster.len()
    );
    let run = test_run("roster");
    let opts = OrchestrateOptions {
        timeout: Duration::from_secs(5),
        require_pipelining: false,
        seed: None,
        // The JVM frameworks take seconds to answer on a busy 2-core host.
        ready_timeout: Duration::from_secs(90),
    };
    let result = rt().block_on(verify_all(engine(), &run, &roster, &opts));
    rt().block_on(engine().cleanup(&run)).unwrap();
    let reports = result.unwrap_or_else(|e| panic!("{e:#}"));
    assert!(leftovers(&run).is_empty(), "{:?}", leftovers(&run));

    let named: Vec<(String, &fairground::verify::VerifyReport)> = roster
        .iter()
        .map(|f| f.name().to_string())
        .zip(reports.iter())
        .collect();
    let table = fairground::verify::report::render_table(&named);
    eprintln!("{table}");
    let mut failures = Vec::new();
    for (fw, report) in roster.iter().zip(&reports) {
        for &scenario in &fw.manifest.scenarios {
            if let Some(why) = report.excluded(scenario) {
                failures.push(format!("{} {scenario}: {why}", fw.name()));
            }
        }
        if !report.passed {
            failures.push(format!("{}: a required check failed", fw.name()));
        }
    }
    assert!(failures.is_empty(), "{}\n{table}", failures.join("\n"));

    // Multi-stage builds leave untagged build-stage images; fairground
    // removes its own, so nothing dangles after a build.
    let dangling = std::process::Command::new("docker")
        .args([
            "images",
            "-q",
            "-f",
            "dangling=true",
            "-f",
            "label=fairground.run",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&dangling.stdout).trim(),
        "",
        "untagged fairground images left after building the roster"
    );
}
