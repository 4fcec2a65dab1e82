//! Deterministic results for tests: rounds built from a few numbers, and the
//! sample run behind tests/fixtures/results/results.json (regenerate that file
//! with `FAIRGROUND_BLESS=1 cargo test --lib testdata`).

use chrono::{TimeZone, Utc};
use hdrhistogram::Histogram;

use crate::contract::Scenario;
use crate::judge::gates::{finish_cell, GateContext};
use crate::results::*;

/// Length of every sample round's window, seconds.
const WINDOW_S: f64 = 15.0;

/// A clean round at `concurrency` connections doing about `rps` req/s.
pub(crate) fn round(index: u32, concurrency: u32, rps: f64) -> Round {
    let ok = (rps * WINDOW_S).round() as u64;
    // Closed loop: latency ≈ concurrency / throughput (Little's law), in ns.
    let base = (f64::from(concurrency) / rps.max(1.0) * 1e9).max(1.0) as u64;
    let mut h = Histogram::<u64>::new(3).unwrap();
    h.record_n(base * 8 / 10, ok / 2).unwrap();
    h.record_n(base, ok * 4 / 10).unwrap();
    h.record_n(base * 2, ok - ok / 2 - ok * 4 / 10 - ok / 1000)
        .unwrap();
    h.record_n(base * 10, ok / 1000).unwrap();
    let windows = (0..WINDOW_S as u32)
        .map(|s| rps * (1.0 + 0.01 * f64::from((s + index) % 3) - 0.01))
        .collect();
    let c = u64::from(concurrency);
    let latency = Latency::of(&h, 0, Some(2_000_000));
    let start_ns = 1_000_000_000_000 + u64::from(index) * 30_000_000_000;
    Round {
        index,
        database: None,
        started_at: Utc.with_ymd_and_hms(2026, 11, 29, 23, 0, 0).unwrap()
            + chrono::Duration::seconds(i64::from(index) * 30),
        window: WindowTimes {
            connects_mono_ns: start_ns - 5_500_000_000,
            start_mono_ns: start_ns,
            end_mono_ns: start_ns + WINDOW_S as u64 * 1_000_000_000,
            start_unix_ns: 1_795_000_000_000_000_000 + u64::from(index) * 30_000_000_000,
            end_unix_ns: 1_795_000_000_000_000_000
                + u64::from(index) * 30_000_000_000
                + WINDOW_S as u64 * 1_000_000_000,
        },
        warmup_s: 5.0,
        warmup_stable: None,
        warmup_windows_rps: vec![rps * 0.9; 5],
        duration_s: WINDOW_S,
        responses: StatusCounts {
            status_2xx: ok,
            ..StatusCounts::default()
        },
        requests: RequestAccounting {
            sent: ok,
            answered: StatusCounts {
                status_2xx: ok,
                ..StatusCounts::default()
            },
            lost: ErrorCounts::default(),
            ..RequestAccounting::default()
        },
        errors: ErrorCounts::default(),
        drain_s: latency.mean_us / 1e6,
        throughput_rps: ok as f64 / WINDOW_S,
        connections_in_use: ok as f64 / WINDOW_S * latency.mean_us / 1e6,
        latency,
        histogram: histogram::encode(&h).unwrap(),
        connections: Connections::all_served(c),
        wire_bytes_per_response: Some(130.0),
        tls: None,
        stream_limit: None,
        loader_warnings: Vec::new(),
        rate: None,
        answers: AnswerChecks {
            checked: ok / 1000,
            wrong: 0,
            example: None,
        },
        windows_rps: windows,
        windows_latency_mean_us: Vec::new(),
        window_clock: "monotonic (loader on this kernel)".into(),
        loader: LoaderUse {
            cpus: 1.0,
            threads: 1,
            cpu_fraction: 0.6,
            throttled_fraction: None,
        },
        server: ServerUse {
            cpu_time_us: Some(ok * 20),
            cpu_unknown: None,
            sampler_stopped_by: None,
            cpu_us_per_request: Some(20.0),
            memory_before_bytes: Some(2 << 20),
            memory_median_bytes: Some((3 << 20) + c * 4096),
            memory_max_bytes: Some((4 << 20) + c * 4096),
            memory_window_peak_bytes: Some((5 << 20) + c * 4096),
            memory_peak_source: "high-water mark".into(),
            memory_lifetime_peak_bytes: Some((6 << 20) + c * 4096),
            memory_samples_bytes: vec![3 << 20, (3 << 20) + c * 4096],
            memory_per_connection_bytes: None,
            oom_kills: Some(0),
            restarts: 0,
        },
        host: Some(HostUse {
            cpus: 8,
            load_1m_before: 0.5,
            load_1m_after: 3.1,
            busy_cores: 2.7,
            foreign_cores: 0.1,
            softirq_cores: 0.2,
            steal_cores: 0.0,
        }),
        loaders: Vec::new(),
        machine: None,
        slowed: None,
        bursts: None,
    }
}

fn key(fw: &str, scenario: Scenario, concurrency: u32) -> CellKey {
    CellKey {
        framework: fw.into(),
        scenario,
        protocol: crate::contract::Protocol::Http1,
        concurrency,
        rate: None,
    }
}

fn facts(name: &str, language: &str, display: &str, verify: VerifyOutcome) -> FrameworkFacts {
    let rounds = verify.passed.len() as f64 * 2.0 * 3.0;
    FrameworkFacts {
        name: name.into(),
        language: language.into(),
        display_name: display.into(),
        workers: "one worker per CPU (FAIRGROUND_CPUS)".into(),
        versions: [
            (language.to_string(), "1.0".to_string()),
            (name.to_string(), "2.0".to_string()),
        ]
        .into_iter()
        .collect(),
        image_id: Some(format!("sha256:{:0>64}", name.len())),
        image_size_bytes: Some(12_345_678),
        binary_size_bytes: Some(3_456_789),
        app_lines_of_code: Some(42),
        limits: Some(AppliedLimits {
            cpus: Some(2.0),
            cpuset: Some("2-3".into()),
            memory_bytes: Some(1 << 30),
            memory_swap_bytes: Some(1 << 30),
            nofile_soft: Some(65_536),
            nofile_hard: Some(65_536),
            read_only_rootfs: true,
            cap_drop: vec!["ALL".into()],
            ..AppliedLimits::default()
        }),
        cold_start_ms: vec![41.0, 39.5, 40.2],
        cold_start_upper_bounds: 1,
        idle_memory_bytes: Some(2 << 20),
        verify: Some(verify),
        failure: None,
        phases: phases(rounds),
    }
}

/// Where the time of `rounds` sample rounds (5 s warm-up, 15 s window) and
/// one start of their framework went.
fn phases(rounds: f64) -> PhaseTimes {
    PhaseTimes {
        start_s: 0.125,
        readiness_s: 0.0625,
        settle_s: 3.0,
        verify_s: 0.25,
        loader_start_s: 0.25 * rounds,
        connect_s: 0.0625 * rounds,
        warmup_s: 5.0 * rounds,
        window_s: WINDOW_S * rounds,
        drain_s: 0.015625 * rounds,
        loader_exit_s: 0.125 * rounds,
        sampling_s: 0.0625 * rounds,
        teardown_s: 0.25,
        between_s: 0.03125 * rounds,
    }
}

/// A complete three-framework run exercising every verdict the report shows.
/// A two-daemon topology: a server host and one loader host reached over
/// TLS, fairground's image carried to the loader, no clocks or preflight.
pub(crate) fn sample_topology() -> Topology {
    Topology {
        server: "tcp://10.0.0.1:2376 (TLS)".into(),
        loaders: vec!["tcp://10.0.0.2:2376 (TLS)".into()],
        server_address: "10.0.0.1".into(),
        server_address_source: "as set in the profile".into(),
        traffic_path: "published port".into(),
        loader_network: "host network of each loader's host".into(),
        server_resources: "Docker stats API".into(),
        images: vec![CarriedImage {
            endpoint: "tcp://10.0.0.2:2376 (TLS)".into(),
            tag: "fairground/fairground:abc".into(),
            id: "sha256:1".into(),
            bytes: 12 << 20,
            seconds: 0.7,
            skipped: false,
        }],
        clocks: Vec::new(),
        preflight: Vec::new(),
    }
}

pub(crate) fn sample_results() -> Results {
    use Scenario::{Json, Param, Plaintext};
    let thresholds = Thresholds::default();
    let mut plan = Vec::new();
    for fw in ["axum", "express", "fastapi"] {
        for sc in [Plaintext, Json, Param] {
            if fw == "fastapi" && sc == Param {
                continue;
            }
            for c in [100, 10_000] {
                plan.push(key(fw, sc, c));
            }
        }
    }
    let mut cells = Vec::new();
    for k in &plan {
        let base = match k.framework.as_str() {
            "axum" => 120_000.0,
            "express" => 18_000.0,
            _ => 9_000.0,
        } * if k.scenario == Plaintext { 1.0 } else { 0.9 };
        let mut rounds: Vec<Round> = (0..3)
            .map(|i| round(i, k.concurrency, base * (1.0 + 0.005 * f64::from(i))))
            .collect();
        let mut verify_failure = None;
        match (k.framework.as_str(), k.scenario, k.concurrency) {
            ("axum", Plaintext, 10_000) => {
                for r in &mut rounds {
                    r.loader.cpu_fraction = 0.97;
                }
            }
            ("express", Plaintext, 10_000) => {
                for r in &mut rounds {
                    r.connections.established = 1_021;
                    r.connections.serving = 1_021;
                    r.errors.connect = 8_979;
                }
            }
            ("express", Json, 100) => {
                let r = &mut rounds[2];
                r.responses.status_2xx = (r.responses.status_2xx as f64 * 0.8) as u64;
                r.throughput_rps = r.responses.status_2xx as f64 / r.duration_s;
            }
            ("express", Json, 10_000) => {
                rounds[1].server.oom_kills = Some(1);
            }
            ("fastapi", Json, _) => {
                rounds.clear();
                verify_failure = Some(
                    "GET /json answered `content-type: text/plain`, expected `application/json`",
                );
            }
            _ => {}
        }
        let ctx = GateContext {
            thresholds: &thresholds,
            environment_forced: false,
            verify_failure,
            rounds_planned: 3,
            rounds_min: 3,
            precise: false,
            closed_loop_pipeline: Some(1),
            http2_streams: 1,
        };
        cells.push(finish_cell(k.clone(), rounds, &ctx).unwrap());
    }
    let ok = |passed: Vec<Scenario>| VerifyOutcome {
        checks: 60,
        failed: 0,
        passed,
        excluded: vec![],
    };
    let mut results = Results {
        schema_version: SCHEMA_VERSION,
        fairground_version: "0.1.0".into(),
        run_id: "20261129T230000Z-sample".into(),
        profile_name: "sample".into(),
        profile: crate::profile::Profile {
            name: "sample".into(),
            description: "the sample run of the report tests".into(),
            scenarios: vec![Scenario::Plaintext, Scenario::Json, Scenario::Param],
            concurrency: vec![100, 10_000],
            ..crate::profile::Profile::default()
        },
        started_at: Utc.with_ymd_and_hms(2026, 11, 29, 23, 0, 0).unwrap(),
        finished_at: Some(Utc.with_ymd_and_hms(2026, 11, 29, 23, 42, 0).unwrap()),
        interrupted: false,
        environment: Environment {
            status: CheckStatus::Warn,
            forced: false,
            checks: vec![
                EnvCheck {
                    name: "hypervisor".into(),
                    status: CheckStatus::Pass,
                    measured: "none (bare metal)".into(),
                    threshold: "no hypervisor, or KVM with paravirtualisation".into(),
                    remedy: None,
                },
                EnvCheck {
                    name: "cpu-governor".into(),
                    status: CheckStatus::Warn,
                    measured: "powersave".into(),
                    threshold: "performance".into(),
                    remedy: Some("cpupower frequency-set -g performance".into()),
                },
                EnvCheck {
                    name: "load-average".into(),
                    status: CheckStatus::Pass,
                    measured: "0.42 (1 min) on 8 CPUs".into(),
                    threshold: "< 0.5 per CPU".into(),
                    remedy: None,
                },
            ],
            report: serde_json::json!({"checks": 3}),
        },
        thresholds,
        plan,
        frameworks: vec![
            facts("axum", "rust", "axum", ok(vec![Plaintext, Json, Param])),
            facts("express", "javascript", "Express on Node.js", ok(vec![Plaintext, Json, Param])),
            facts(
                "fastapi",
                "python",
                "FastAPI on Uvicorn",
                VerifyOutcome {
                    checks: 40,
                    failed: 3,
                    passed: vec![Plaintext],
                    excluded: vec![Exclusion {
                        scenario: Json,
                        protocol: crate::contract::Protocol::Http1,
                        reason: "GET /json answered `content-type: text/plain`, expected `application/json`".into(),
                    }],
                },
            ),
        ],
        skipped: vec![Skipped {
            framework: "fastapi".into(),
            scenario: Some(Param),
            protocol: None,
            reason: "not declared in frameworks/fastapi/framework.yaml".into(),
        }],
        cells,
        incidents: vec![Incident {
            at: Utc.with_ymd_and_hms(2026, 11, 29, 23, 21, 7).unwrap(),
            framework: "express".into(),
            cell: Some(key("express", Json, 10_000)),
            round: Some(1),
            what: "the server was not running after round 2; restarted".into(),
        }],
        resumed_environments: Vec::new(),
        docker_runs: vec!["fg-20261129-230000-beef".into()],
        loader_images: vec!["fairground/fairground:5dd704e0670d".into()],
        topology: None,
        objectives: Vec::new(),
        precision: None,
        budget: None,
        git: Some(GitInfo {
            commit: "5dd704e0670d2b7c1a9f3e8d4c6b5a2f1e0d9c8b".into(),
            dirty: false,
            branch: Some("main".into()),
            commit_time: Some("2026-11-29T22:41:07+00:00".into()),
        }),
        timing: {
            let mut all = PhaseTimes::default();
            for rounds in [18.0, 18.0, 6.0] {
                all.add(&phases(rounds));
            }
            RunTiming {
                preflight_s: 2.5,
                image_check_s: 1.5,
                to_first_round_s: 8.0,
                first_round_to_end_s: all.total_s() - 3.4375,
                phases: all,
                ..RunTiming::default()
            }
        },
    };
    results.objectives = crate::judge::objectives::judge(&results, &sample_objectives());
    results
}

/// The sample profile's objectives: a mix that the sample's figures meet,
/// miss and straddle (axum's plaintext rounds span 120,000–121,200 req/s).
pub fn sample_objectives() -> Vec<Objective> {
    let o = |t: &str, s: Option<Scenario>, f: Option<&[&str]>| {
        Objective::parse(t, s, f.map(|f| f.iter().map(|x| x.to_string()).collect())).unwrap()
    };
    vec![
        o("error_rate < 0.1%", None, None),
        o("rps >= 120500", Some(Scenario::Plaintext), Some(&["axum"])),
        o("rps >= 15000", Some(Scenario::Json), None),
    ]
}

#[test]
fn fixture_file_matches_the_sample_run() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/results/results.json");
    let text = serde_json::to_string_pretty(&sample_results()).unwrap() + "\n";
    if std::env::var_os("FAIRGROUND_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
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
        "{} is stale; regenerate with FAIRGROUND_BLESS=1",
        path.display()
    );
}
