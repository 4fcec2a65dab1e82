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

    // One report per framework and protocol it declares, http1 first.
    let label = |r: &fairground::verify::VerifyReport| {
        let name = r.framework.clone().unwrap_or_default();
        if r.protocol.is_http1() {
            name
        } else {
            format!("{name} ({})", r.protocol)
        }
    };
    let named: Vec<(String, &fairground::verify::VerifyReport)> =
        reports.iter().map(|r| (label(r), r)).collect();
    let table = fairground::verify::report::render_table(&named);
    eprintln!("{table}");
    let mut failures = Vec::new();
    for fw in &roster {
        for &protocol in fw
            .manifest
            .protocols
            .iter()
            .filter(|&&p| fw.manifest.scenarios.iter().any(|s| s.runs_over(p)))
        {
            let found = reports
                .iter()
                .find(|r| r.framework.as_deref() == Some(fw.name()) && r.protocol == protocol);
            let Some(report) = found else {
                failures.push(format!("{} {protocol}: no report", fw.name()));
                continue;
            };
            // A family (`queries`, `updates`) is verified at its verify
            // count; WebSocket is verified over HTTP/1.1 upgrades only
            // (http1, https), gRPC over HTTP/2 only (Scenario::runs_over).
            for &scenario in fw
                .manifest
                .scenarios
                .iter()
                .filter(|s| s.runs_over(protocol))
            {
                if let Some(why) = report.excluded(scenario.verified()) {
                    failures.push(format!("{} {protocol} {scenario}: {why}", fw.name()));
                }
            }
            if !report.passed {
                failures.push(format!("{} {protocol}: a required check failed", fw.name()));
            }
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
