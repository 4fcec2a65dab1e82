//! The headline claim, guarded: a framework that does not declare a
//! connection ceiling below 10,000 (`limits:` in its framework.yaml) really
//! serves 10,000 connections at once. One real run at highconc's settings
//! (one server CPU, nofile 20,000, somaxconn 65,535, highconc's warm-up
//! and window) and 10,000 connections, one round; every one of the 10,000 must get an
//! answer inside the window (`connections.serving`), the figure a run
//! rejects a cell on, and the cell must not be rejected for anything else
//! (errors, reconnects). A second test checks the cause the first can miss
//! by chance: every such framework listens with a backlog of 10,000 or more.
//!
//! By default one framework per language family (C/C++, Go, Java,
//! JavaScript, Python, Rust), each the family's preferred one when it holds
//! 10,000 and otherwise the first that does, to keep `make test` short;
//! with `FAIRGROUND_TEST_10K=all` every framework that declares it holds
//! 10,000 (README, "Tests"). Images come from the roster's cache (the roster
//! test builds them); with CI=true a missing daemon fails.

mod docker_support;

use docker_support::*;
use fairground::framework::Framework;

const CONNECTIONS: u32 = 10_000;

/// The framework a family is guarded by when it declares 10,000: the
/// quickest to start of each.
const PREFERRED: &[(&str, &str)] = &[
    ("c/c++", "nginx"),
    ("go", "go-nethttp"),
    ("java", "java-httpserver"),
    ("javascript", "node-http"),
    ("python", "fastapi"),
    ("rust", "hyper"),
];

fn family(language: &str) -> &str {
    match language {
        "c" | "cpp" | "c++" => "c/c++",
        other => other,
    }
}

/// The frameworks this run guards: every one that holds 10,000 with
/// `FAIRGROUND_TEST_10K=all`, else one per family.
fn chosen(roster: &[Framework]) -> Vec<String> {
    let holding: Vec<&Framework> = roster
        .iter()
        .filter(|f| f.holds_connections(CONNECTIONS))
        // The guard's scenario is plaintext (gRPC-only servers have none).
        .filter(|f| {
            f.manifest
                .scenarios
                .contains(&fairground::contract::Scenario::Plaintext)
        })
        .collect();
    if std::env::var("FAIRGROUND_TEST_10K").as_deref() == Ok("all") {
        return holding.iter().map(|f| f.name().to_string()).collect();
    }
    let mut families: Vec<&str> = holding
        .iter()
        .map(|f| family(&f.manifest.language))
        .collect();
    families.sort_unstable();
    families.dedup();
    families
        .into_iter()
        .map(|fam| {
            let preferred = PREFERRED
                .iter()
                .find(|(f, _)| *f == fam)
                .and_then(|(_, name)| holding.iter().find(|f| f.name() == *name));
            let first = holding
                .iter()
                .find(|f| family(&f.manifest.language) == fam)
                .expect("a family of a holding framework");
            preferred.unwrap_or(first).name().to_string()
        })
        .collect()
}

/// highconc's own warm-up and window (profiles/highconc.yaml), in seconds.
/// The guard must not be stricter than the headline: at 10,000 connections
/// a server answering 2,500 req/s needs 4 s to answer each connection once,
/// so a 3 s window failed java-httpserver (7,569 of 10,000 served, CI
/// 2026-12-02) that serves all 10,000 in highconc's 10 s window.
fn highconc_timing() -> (u64, u64) {
    let highconc = fairground::profile::load_file(&root().join("profiles/highconc.yaml")).unwrap();
    (
        highconc.warmup.max().as_secs().max(1),
        highconc.duration.as_secs().max(1),
    )
}

fn profile(frameworks: &[String]) -> String {
    // highconc's server and loader settings, warm-up and window; one round:
    // this checks that connections are served, it does not measure
    // throughput.
    let (warmup, duration) = highconc_timing();
    format!(
        "description: \"guard: {CONNECTIONS} connections served\"\n\
         frameworks: [{}]\nscenarios: [plaintext]\nconcurrency: [{CONNECTIONS}]\n\
         warmup: {warmup}s\nduration: {duration}s\nrounds: 1\nrestart_between_rounds: false\n\
         load: {{mode: closed, pipeline: 1, timeout: 10s}}\n\
         server:\n  cpus: 1\n  cpuset: auto\n  memory: 1GiB\n  swap: false\n  nofile: 20000\n  \
         sysctls: {{net.core.somaxconn: 65535, net.ipv4.tcp_max_syn_backlog: 65535}}\n\
         loader:\n  cpus: 1\n  cpuset: auto\n  memory: 1GiB\n  swap: false\n  nofile: 20000\n  \
         sysctls: {{net.ipv4.ip_local_port_range: \"1024 65535\", net.ipv4.tcp_tw_reuse: 1}}\n\
         network: bridge\nidle_settle: 1s\nreadiness_timeout: 90s\n\
         thresholds: {{preflight: warn}}\n",
        frameworks.join(", ")
    )
}

#[test]
fn frameworks_that_declare_10k_connections_serve_all_of_them() {
    if !docker_or_skip("frameworks_that_declare_10k_connections_serve_all_of_them") {
        return;
    }
    let roster = fairground::framework::discover(&root().join("frameworks")).unwrap();
    let names = chosen(&roster);
    assert!(
        names.len() >= 6 || std::env::var("FAIRGROUND_TEST_10K").is_ok(),
        "fewer than six language families hold {CONNECTIONS} connections: {names:?}"
    );
    eprintln!(
        "guarding {CONNECTIONS} connections on: {}",
        names.join(", ")
    );

    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("guard-10k.yaml");
    std::fs::write(&path, profile(&names)).unwrap();
    let out = tmp.path().join("output");
    let frameworks = root().join("frameworks");
    let (o, quiet) = bracketed_by_quiet(|| {
        fairground(&[
            "run",
            "--profile",
            path.to_str().unwrap(),
            "--frameworks",
            frameworks.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap()
    });
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    assert_eq!(run_leftovers(&stderr), "", "containers and network removed");
    let results = results_of(&run_dir(&out));

    let mut failures = Vec::new();
    for name in &names {
        let Some(cell) = results.cells.iter().find(|c| &c.key.framework == name) else {
            failures.push(format!("{name}: no cell (not verified?)\n{stderr}"));
            continue;
        };
        for round in &cell.rounds {
            let c = &round.connections;
            eprintln!(
                "{name}: {} of {CONNECTIONS} served ({} established), {} errors, p99 {}, {:.0} req/s, host {}",
                c.serving,
                c.established,
                round.errors.total(),
                round.latency.show(round.latency.p99_us),
                round.throughput_rps,
                round.host.as_ref().map_or("unknown".into(), |h| format!(
                    "busy {:.2}, softirq {:.2}, foreign {:.2} cores",
                    h.busy_cores, h.softirq_cores, h.foreign_cores
                ))
            );
            // Our own 10,000 connections are not "other work": on a host
            // the test read quiet around the run the cell must not read
            // host-busy (the network stack's soft interrupts, charged to
            // no container, were once counted as foreign and flagged every
            // 10K cell).
            if quiet
                && cell
                    .verdict
                    .reasons
                    .iter()
                    .any(|r| matches!(r, fairground::results::Reason::HostBusy { .. }))
            {
                failures.push(format!(
                    "{name}: flagged host-busy on a quiet host: {:?}",
                    round.host
                ));
            }
            if c.serving != u64::from(CONNECTIONS) {
                failures.push(format!(
                    "{name}: {} of {CONNECTIONS} connections served ({} established); fix its \
                     configuration, or declare the ceiling in its framework.yaml (`limits:`)",
                    c.serving, c.established
                ));
            }
        }
        // Served is not enough: a server that closes kept-alive connections
        // (java-httpserver's 200 idle ones, 2026-12-02) serves every
        // connection and still loses requests. A rejection for any reason
        // at 10,000 is a setting to fix or a ceiling to declare.
        if cell.verdict.status == fairground::results::Status::Rejected {
            let why: Vec<String> = cell.verdict.reasons.iter().map(|r| r.to_string()).collect();
            failures.push(format!(
                "{name}: rejected at {CONNECTIONS} connections: {}",
                why.join("; ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The listening sockets' backlog on `port` in the network namespace of
/// process `pid` (`ss -Hltn`: a listener's Send-Q is its backlog), the
/// smallest when several processes listen (reuse_port); `None` while
/// nothing listens there yet.
fn listen_backlog(pid: &str, port: u16) -> Option<u64> {
    let o = std::process::Command::new("nsenter")
        .args(["-t", pid, "-n", "ss", "-Hltn"])
        .output()
        .ok()?;
    let suffix = format!(":{port}");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            // State Recv-Q Send-Q Local-Address:Port Peer-Address:Port
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[3].ends_with(&suffix))
                .then(|| f[2].parse().ok())
                .flatten()
        })
        .min()
}

/// Regression: a burst of 10,000 connects overflows a small listen backlog
/// and leaves connects to time out in SYN retransmission, now and then:
/// aiohttp (run_app's 128) lost 256 connects in one of six rounds of a full
/// highconc run, after passing the one-round guard above. So the cause is
/// checked, not its symptom: every framework that holds 10,000 connections
/// listens, under highconc's net.core.somaxconn of 65,535, with a backlog
/// of at least 10,000. Each server runs alone with no network at all
/// (`--network none`: no traffic), as its image and manifest make it.
#[test]
fn frameworks_that_declare_10k_connections_listen_with_a_backlog_for_them() {
    let test = "frameworks_that_declare_10k_connections_listen_with_a_backlog_for_them";
    if !docker_or_skip(test) {
        return;
    }
    let roster = fairground::framework::discover(&root().join("frameworks")).unwrap();
    let holding: Vec<Framework> = roster
        .into_iter()
        .filter(|f| f.holds_connections(CONNECTIONS))
        // The guard's scenario is plaintext (gRPC-only servers have none).
        .filter(|f| {
            f.manifest
                .scenarios
                .contains(&fairground::contract::Scenario::Plaintext)
        })
        .collect();
    let built = rt()
        .block_on(fairground::docker::engine::Engine::ensure_images(
            engine(),
            &holding,
            false,
        ))
        .unwrap_or_else(|e| panic!("building the roster's images: {e:#}"));
    let run = test_run("backlog");
    let mut failures = Vec::new();
    for fw in &holding {
        let tag = &built.frameworks[fw.name()].tag;
        let mut args: Vec<String> = [
            "run",
            "-d",
            "--label",
            &format!("fairground.run={}", run.0),
            "--network",
            "none",
            "--cpus",
            "1",
            "--ulimit",
            "nofile=20000:20000",
            "--sysctl",
            "net.core.somaxconn=65535",
            "--sysctl",
            "net.ipv4.tcp_max_syn_backlog=65535",
            "--user",
            "65534:65534",
            "-e",
            "FAIRGROUND_CPUS=1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for (k, v) in &fw.manifest.env {
            args.extend(["-e".to_string(), format!("{k}={v}")]);
        }
        if fw.manifest.read_only_rootfs {
            args.extend(
                ["--read-only", "--tmpfs", "/tmp:rw,noexec,nosuid,size=64m"].map(String::from),
            );
        }
        args.push(tag.clone());
        let o = std::process::Command::new("docker")
            .args(&args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{}: docker run failed: {}",
            fw.name(),
            String::from_utf8_lossy(&o.stderr)
        );
        let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let pid = std::process::Command::new("docker")
            .args(["inspect", "-f", "{{.State.Pid}}", &id])
            .output()
            .unwrap();
        let pid = String::from_utf8_lossy(&pid.stdout).trim().to_string();
        // The JVMs and Python take a few seconds to listen on a busy host.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
        let backlog = loop {
            if let Some(b) = listen_backlog(&pid, fw.manifest.port) {
                break Some(b);
            }
            if std::time::Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        };
        let _ = std::process::Command::new("docker")
            .args(["rm", "-f", &id])
            .output();
        eprintln!("{}: listen backlog {backlog:?}", fw.name());
        match backlog {
            Some(b) if b >= u64::from(CONNECTIONS) => {}
            Some(b) => failures.push(format!(
                "{}: listens with a backlog of {b}, below the {CONNECTIONS} connections it \
                 declares to hold; size it from net.core.somaxconn as the roster does \
                 (docs/frameworks.md, \"Settings changed\")",
                fw.name()
            )),
            None => failures.push(format!(
                "{}: nothing listened on port {} within 90 s",
                fw.name(),
                fw.manifest.port
            )),
        }
    }
    assert!(leftovers(&run).is_empty(), "{:?}", leftovers(&run));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
