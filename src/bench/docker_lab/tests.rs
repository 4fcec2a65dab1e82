//! The real lab's glue against the engine's fake: a round measured from a
//! real loader report and scripted cgroup samples, the loader's command line,
//! and the errors a broken loader must produce.

use std::net::{IpAddr, Ipv4Addr};

use super::*;
use crate::docker::fake::{FakeEngine, FakeScript};
use crate::plan::spec::{tests::images, RunSpec};
use crate::plan::tests::framework;
use crate::probe::{CgroupReading, Series};
use crate::profile::{HostFacts, Profile};
use crate::results::CellKey;
use crate::roles::load::LoadConfig;

/// A real loader report: the loader in-process against the reference
/// server for a fraction of a second.
fn real_load_report() -> LoadReport {
    let server = crate::roles::serve::start(IpAddr::V4(Ipv4Addr::LOCALHOST), 0, 1).unwrap();
    let url = format!("http://{}", server.addr);
    let cfg = LoadConfig::new(&url)
        .unwrap()
        .scenario(Scenario::Plaintext)
        .connections(4)
        .threads(1)
        .duration(Duration::from_millis(400));
    let report = crate::roles::load::run(&cfg).unwrap();
    server.stop();
    report
}

fn reading(cpu_usec: u64, mem_bytes: u64) -> CgroupReading {
    CgroupReading {
        cpu_usec,
        mem_bytes,
        ..CgroupReading::default()
    }
}

/// The spec of a run of framework `a` (one core each for server and
/// loader on a 4-core host, 400 ms windows).
fn spec(profile: &Profile) -> RunSpec {
    let fw = framework("a", &[Scenario::Plaintext]);
    let placement = profile.placement(&HostFacts::with_cores(4)).unwrap();
    RunSpec::resolve(
        profile,
        &placement,
        std::slice::from_ref(&fw),
        &images(std::slice::from_ref(&fw)),
    )
    .unwrap()
}

fn profile() -> Profile {
    Profile {
        name: "t".into(),
        duration: Duration::from_millis(400),
        ..Profile::default()
    }
}

fn key(rate: Option<u64>) -> CellKey {
    CellKey {
        framework: "a".into(),
        scenario: Scenario::Plaintext,
        protocol: crate::contract::Protocol::Http1,
        concurrency: 4,
        rate,
    }
}

#[test]
fn measures_a_round_from_the_loaders_json_and_the_servers_samples() {
    let load = real_load_report();
    assert!(load.responses.status_2xx > 0);
    let engine = FakeEngine::new(FakeScript {
        loader_stdout: serde_json::to_string(&load).unwrap(),
        loader_stderr: progress_lines(),
        samples: vec![
            reading(1_000, 5 << 20),
            reading(51_000, 6 << 20),
            reading(51_000, 6 << 20),
            reading(51_000, 6 << 20),
        ],
        ..FakeScript::default()
    });
    let profile = profile();
    let spec = spec(&profile);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut lab = DockerLab::open(&engine, RunId("t".into()), Network::Bridge)
            .await
            .unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&seen);
        lab.show_live(std::sync::Arc::new(move |l: &LiveSecond| {
            sink.lock().unwrap().push((l.measuring, l.responses_per_s));
        }));
        let (server, started) = lab.start(spec.server("a").unwrap()).await.unwrap();
        assert_eq!(started.cold_start_ms, Some(50.0));
        assert!(
            started.urls.http().starts_with("http://10.213.0."),
            "{}",
            started.urls.http()
        );
        let limits = started.limits.unwrap();
        assert_eq!(
            (limits.cpus, limits.nofile_soft),
            (Some(1.0), Some(profile.server.nofile))
        );
        let loader = spec.loader(&key(None), 0, started.urls.http());
        let m = lab.measure(&server, &loader).await.unwrap();
        assert_eq!(*seen.lock().unwrap(), [(false, 900), (true, 1000)]);
        assert_eq!(m.load.warmup.seconds, load.warmup.seconds);
        // The scripted samples' instants do not bracket the real report's
        // window (taken earlier): no CPU figure rather than a wrong one.
        // `measurement_brackets_cpu_and_memory_by_the_loaders_window` pins
        // the arithmetic.
        assert_eq!(m.lab.server.cpu_time_us, None);
        let why = m.lab.server.cpu_unknown.clone().unwrap();
        assert!(why.contains("no CPU sample"), "{why}");
        let round = m.clone().into_round(0).unwrap();
        assert_eq!(round.server.cpu_us_per_request, None);
        assert_eq!(round.server.cpu_unknown.as_deref(), Some(why.as_str()));
        // The fake engine reads no cgroup counter and reports no kill: unknown.
        assert_eq!(m.lab.server.oom_kills, None);
        assert_eq!(m.lab.server.restarts, 0);
        let round = m.into_round(0).unwrap();
        assert_eq!(round.responses.status_2xx, load.responses.status_2xx);
        assert_eq!(round.connections, load.connections);
        assert_eq!(round.requests, load.requests);
        assert!((round.throughput_rps - load.throughput_rps).abs() < 1e-6 * load.throughput_rps);
        assert_eq!(round.latency.count, load.latency.count);
        assert!(lab.alive(&server).await.unwrap());
        lab.stop(server).await.unwrap();
        lab.close().await.unwrap();
    });
    // Warm-up and measured window: one loader process, started with
    // exactly the arguments of the spec in the run's loader container.
    let commands = engine.commands();
    assert_eq!(commands.len(), 1, "{:?}", engine.calls());
    assert_eq!(commands[0][..2], [FAIRGROUND_IN_IMAGE, "load"]);
    assert!(engine
        .calls()
        .iter()
        .any(|c| c.starts_with("start loader ") && c.contains("-loader-")));
    assert!(commands[0].windows(2).any(|w| w == ["--connections", "4"]));
    assert!(engine.leftovers().is_empty(), "{:?}", engine.leftovers());
}

/// What a loader prints on stderr with `--progress`: a warm-up second,
/// the start of measurement, a measured second.
fn progress_lines() -> String {
    [
        Progress::Tick {
            t: 1.0,
            phase: Phase::Warmup,
            ok: 900,
            errors: 0,
        },
        Progress::Measure { t: 1.5, mono_ns: 0 },
        Progress::Tick {
            t: 2.0,
            phase: Phase::Measure,
            ok: 1000,
            errors: 0,
        },
    ]
    .iter()
    .map(|p| p.line() + "\n")
    .collect()
}

/// Measure one round of framework `a` (plaintext, 4 connections) with
/// a loader that behaves as `script` says; the error it ends with.
fn failed_round(script: FakeScript) -> String {
    let engine = FakeEngine::new(script);
    let spec = spec(&profile());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut lab = DockerLab::open(&engine, RunId("t".into()), Network::Bridge)
            .await
            .unwrap();
        let (server, started) = lab.start(spec.server("a").unwrap()).await.unwrap();
        let loader = spec.loader(&key(None), 0, started.urls.http());
        let err = lab.measure(&server, &loader).await.unwrap_err();
        lab.stop(server).await.unwrap();
        format!("{err:#}")
    })
}

#[test]
fn a_loader_that_never_starts_its_window_is_an_error_not_a_figure() {
    let text = failed_round(FakeScript {
        loader_stdout: serde_json::to_string(&real_load_report()).unwrap(),
        loader_stderr: "warming up\n".into(),
        ..FakeScript::default()
    });
    assert!(
        text.contains("never announced the start of its measured window"),
        "{text}"
    );
}

#[test]
fn a_loader_that_prints_no_report_is_an_error_naming_the_cell() {
    let text = failed_round(FakeScript {
        loader_stdout: "panicked at src/load".into(),
        ..FakeScript::default()
    });
    assert!(
        text.contains("a plaintext c=4") && text.contains("panicked"),
        "{text}"
    );
}

#[test]
fn fixed_rate_reaches_the_loaders_command_line() {
    let engine = FakeEngine::new(FakeScript {
        loader_stdout: serde_json::to_string(&real_load_report()).unwrap(),
        loader_stderr: progress_lines(),
        ..FakeScript::default()
    });
    let profile = Profile {
        load: crate::profile::Load {
            mode: crate::profile::LoadMode::FixedRate { rate: 5_000 },
            ..crate::profile::Load::default()
        },
        ..profile()
    };
    let spec = spec(&profile);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut lab = DockerLab::open(&engine, RunId("t".into()), Network::Bridge)
            .await
            .unwrap();
        let (server, started) = lab.start(spec.server("a").unwrap()).await.unwrap();
        let loader = spec.loader(&key(Some(5_000)), 0, started.urls.http());
        lab.measure(&server, &loader).await.unwrap();
        lab.stop(server).await.unwrap();
    });
    let cmd = &engine.commands()[0];
    let rate = cmd.iter().position(|a| a == "--rate").unwrap();
    assert_eq!(cmd[rate + 1], "5000");
}

#[tokio::test]
async fn verify_outcome_of_the_reference_server_passes_every_scenario() {
    let server = crate::roles::serve::start(IpAddr::V4(Ipv4Addr::LOCALHOST), 0, 1).unwrap();
    let url = format!("http://{}", server.addr);
    let scenarios = [Scenario::Plaintext, Scenario::Json, Scenario::Param];
    let report = verify::verify_url(&url, &scenarios, &VerifyOptions::default())
        .await
        .unwrap();
    server.stop();
    let o = outcome(&report, &scenarios, crate::contract::Protocol::Http1);
    assert!(o.excluded.is_empty(), "{:?}", o.excluded);
    assert_eq!(o.passed, scenarios);
    assert!(o.checks > 0 && o.failed == 0);
}

/// A sample at `t` ms (CLOCK_MONOTONIC, from 0) with `cpu_ms` of CPU so far
/// and `mib` of memory.
fn sample(t: u64, cpu_ms: u64, mib: u64) -> crate::probe::Sample {
    crate::probe::Sample {
        t_ms: t,
        t_mono_ns: t * 1_000_000,
        mem_bytes: mib << 20,
        cpu_usec: cpu_ms * 1000,
        throttled_usec: None,
        mem_peak_bytes: None,
    }
}

#[test]
fn measurement_brackets_cpu_and_memory_by_the_loaders_window() {
    let mut load = real_load_report();
    // Connects at 100 ms, window 1,000 → 3,000 ms.
    load.window.connects_mono_ns = 100_000_000;
    load.window.start_mono_ns = 1_000_000_000;
    load.window.end_mono_ns = 3_000_000_000;
    // Idle 10 MiB before the loader; 0.5 CPU from 500 ms on; a 40 MiB
    // moment before the window (warm-up) and a 30 MiB one inside it.
    let series = Series {
        samples: vec![
            sample(0, 0, 10),
            sample(50, 0, 10),
            sample(500, 0, 40),
            sample(1_250, 375, 20),
            sample(2_000, 750, 30),
            sample(2_750, 1_125, 20),
            sample(3_500, 1_500, 20),
        ],
        stopped_by: None,
    };
    let spec = spec(&profile());
    let l = spec.loader(&key(None), 0, "http://10.0.0.2:8080");
    let m = lab_figures(&load, &series, None, &l, false).server;
    // 0.5 CPU × 2 s, interpolated at exactly 1.000 and 3.000 s.
    assert_eq!(m.cpu_time_us, Some(1_000_000));
    assert_eq!(m.memory_before_bytes, Some(10 << 20));
    assert_eq!(m.memory_samples_bytes, vec![20 << 20, 30 << 20, 20 << 20]);
    // The warm-up's 40 MiB is not the window's peak.
    assert_eq!(m.memory_window_peak_bytes, Some(30 << 20));
    assert_eq!(m.memory_peak_source, PEAK_FROM_SAMPLES);
    // With the high-water mark reset at the window's start, it decides
    // (never below a sample).
    let m = lab_figures(&load, &series, Some(35 << 20), &l, false).server;
    assert_eq!(m.memory_window_peak_bytes, Some(35 << 20));
    assert_eq!(m.memory_peak_source, PEAK_FROM_MARK);
    // Two loaders whose windows (1.6 s each, mean 1.6 s) were 0.4 s apart
    // make a 2 s union: the server's CPU over the union is scaled to the
    // mean window, the one the 2xx are counted over.
    load.measured_s = 1.6;
    let m = lab_figures(&load, &series, None, &l, true).server;
    assert_eq!(m.cpu_time_us, Some(800_000));
}

#[test]
fn host_mode_refuses_a_port_something_else_listens_on() {
    let taken = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let err = super::port_free_on_host(port).unwrap_err().to_string();
    assert!(
        err.contains(&format!("port {port} is already in use")),
        "{err}"
    );
    drop(taken);
    assert!(super::port_free_on_host(port).is_ok());
}

#[test]
fn loaders_on_other_daemons_split_the_round_share_one_start_and_merge_exactly() {
    let load = real_load_report();
    let script = || FakeScript {
        loader_stdout: serde_json::to_string(&load).unwrap(),
        loader_stderr: progress_lines(),
        ..FakeScript::default()
    };
    let (server_daemon, loader_daemon) = (FakeEngine::new(script()), FakeEngine::new(script()));
    let spec = spec(&profile());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let m = rt.block_on(async {
        let spread = Spread {
            loaders: vec![(&loader_daemon, "l1".into()), (&loader_daemon, "l2".into())],
            server_address: "192.0.2.7".into(),
            same_as_server: vec![false, false],
        };
        let mut lab =
            DockerLab::open_spread(&server_daemon, RunId("t".into()), Network::Bridge, spread);
        let (server, started) = lab.start(spec.server("a").unwrap()).await.unwrap();
        assert!(
            started.urls.http().starts_with("http://192.0.2.7:"),
            "the published port on the server's address: {}",
            started.urls.http()
        );
        let loader = spec.loader(&key(None), 0, started.urls.http());
        let m = lab.measure(&server, &loader).await.unwrap();
        lab.stop(server).await.unwrap();
        lab.close().await.unwrap();
        m
    });
    assert!(
        server_daemon.commands().is_empty(),
        "no loader on the server's daemon"
    );
    let cmds = loader_daemon.commands();
    assert_eq!(cmds.len(), 2);
    let flag =
        |cmd: &Vec<String>, f: &str| cmd[cmd.iter().position(|a| a == f).unwrap() + 1].clone();
    assert_eq!(flag(&cmds[0], "--connections"), "2");
    assert_eq!(flag(&cmds[1], "--connections"), "2");
    assert_eq!(
        flag(&cmds[0], "--start-at-unix-ns"),
        flag(&cmds[1], "--start-at-unix-ns"),
        "one start barrier"
    );
    assert_eq!(m.lab.loaders.len(), 2);
    assert_eq!(m.lab.loaders[0].endpoint, "l1");
    let round = m.into_round(0).unwrap();
    assert_eq!(round.responses.status_2xx, 2 * load.responses.status_2xx);
    assert_eq!(round.latency.count, 2 * load.latency.count);
    assert!(server_daemon.leftovers().is_empty() && loader_daemon.leftovers().is_empty());
}

#[test]
fn the_loader_container_starts_during_the_settle_and_serves_every_round() {
    let load = real_load_report();
    let engine = FakeEngine::new(FakeScript {
        loader_stdout: serde_json::to_string(&load).unwrap(),
        loader_stderr: progress_lines(),
        samples: vec![reading(1_000, 5 << 20); 4],
        ..FakeScript::default()
    });
    let profile = profile();
    let spec = spec(&profile);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut lab = DockerLab::open(&engine, RunId("t".into()), Network::Bridge)
            .await
            .unwrap();
        let (server, started) = lab.start(spec.server("a").unwrap()).await.unwrap();
        lab.expect_loader(spec.loader_template());
        lab.idle_memory(&server, Duration::from_millis(10))
            .await
            .unwrap();
        let loaders_after_settle = engine
            .calls()
            .iter()
            .filter(|c| c.starts_with("start loader "))
            .count();
        assert_eq!(loaders_after_settle, 1, "{:?}", engine.calls());
        for round in 0..3 {
            let loader = spec.loader(&key(None), round, started.urls.http());
            lab.measure(&server, &loader).await.unwrap();
        }
        lab.stop(server).await.unwrap();
        lab.close().await.unwrap();
    });
    let calls = engine.calls();
    let starts = calls
        .iter()
        .filter(|c| c.starts_with("start loader "))
        .count();
    let execs = calls.iter().filter(|c| c.starts_with("exec ")).count();
    assert_eq!((starts, execs), (1, 3), "{calls:?}");
    assert!(engine.leftovers().is_empty(), "{:?}", engine.leftovers());
}

#[test]
fn a_loader_on_another_host_has_its_window_carried_on_the_wall_clock() {
    use crate::results::WindowTimes;
    // This machine: mono 50 s ↔ unix 1,000,050 s. The loader's host: its
    // monotonic clock is 7,000 s ahead; its wall clock agrees with ours.
    let offset: i128 = 1_000_000 * 1_000_000_000;
    let s = |x: u64| x * 1_000_000_000;
    let remote = WindowTimes {
        connects_mono_ns: s(7_049),
        start_mono_ns: s(7_050),
        end_mono_ns: s(7_053),
        start_unix_ns: s(1_000_050),
        end_unix_ns: s(1_000_053),
    };
    let (w, clock) = super::on_this_clock(remote, s(48), s(60), offset);
    assert_eq!(clock, super::WINDOW_CLOCK_WALL);
    assert_eq!(
        (w.connects_mono_ns, w.start_mono_ns, w.end_mono_ns),
        (s(49), s(50), s(53))
    );
    // A loader on this kernel: its instants are ours already.
    let local = WindowTimes {
        connects_mono_ns: s(49),
        start_mono_ns: s(50),
        end_mono_ns: s(53),
        ..remote
    };
    assert_eq!(
        super::on_this_clock(local, s(48), s(60), offset),
        (local, super::WINDOW_CLOCK_MONOTONIC)
    );
}

#[test]
fn database_counts_read_late_in_the_window_stand_for_the_responses_after_the_reading() {
    let s = 1_000_000_000u64;
    // Read before the window opened: every response.
    assert_eq!(
        super::counted_responses(30_000, 10 * s, 13 * s, 9 * s),
        30_000
    );
    // Read 120 ms into a 3 s window: 4% of the responses came before it.
    assert_eq!(
        super::counted_responses(30_000, 10 * s, 13 * s, 10 * s + 120_000_000),
        28_800
    );
    // Read after the window (never happens, but no underflow).
    assert_eq!(super::counted_responses(30_000, 10 * s, 13 * s, 14 * s), 0);
    assert_eq!(super::counted_responses(5, 10 * s, 10 * s, 11 * s), 5);
}

#[test]
fn a_deferred_image_is_built_once_before_the_first_start_under_its_planned_tag() {
    let profile = profile();
    let spec = spec(&profile);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let engine = FakeEngine::new(FakeScript::default());
    rt.block_on(async {
        let mut lab = DockerLab::open(&engine, RunId("t".into()), Network::Bridge)
            .await
            .unwrap();
        // Nothing deferred: the image was made before the run.
        assert_eq!(lab.prepare(spec.server("a").unwrap()).await.unwrap(), None);
        lab.defer_images(vec![framework("a", &[Scenario::Plaintext])]);
        let built = lab
            .prepare(spec.server("a").unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(built.image.tag, spec.server("a").unwrap().image);
        // Once per run, however many times its server starts.
        assert_eq!(lab.prepare(spec.server("a").unwrap()).await.unwrap(), None);
        let builds = engine
            .calls()
            .iter()
            .filter(|c| c.starts_with("ensure_framework_image"))
            .count();
        assert_eq!(builds, 1);
        // An image whose tag is not the one the run planned (the folder
        // changed under the run) is refused, naming both.
        let mut other = spec.server("a").unwrap().clone();
        other.image = "fairground/fw-a:111111111111".into();
        lab.defer_images(vec![framework("a", &[Scenario::Plaintext])]);
        let e = format!("{:#}", lab.prepare(&other).await.unwrap_err());
        assert!(
            e.contains("fairground/fw-a:111111111111") && e.contains("fake/a:000000000000"),
            "{e}"
        );
    });
    // A build that fails says which framework and why.
    let broken = FakeEngine::new(FakeScript {
        image_build_error: Some("COPY failed: no-such-file".into()),
        ..FakeScript::default()
    });
    rt.block_on(async {
        let mut lab = DockerLab::open(&broken, RunId("t".into()), Network::Bridge)
            .await
            .unwrap();
        lab.defer_images(vec![framework("a", &[Scenario::Plaintext])]);
        let e = format!(
            "{:#}",
            lab.prepare(spec.server("a").unwrap()).await.unwrap_err()
        );
        assert!(
            e.contains("framework a") && e.contains("no-such-file"),
            "{e}"
        );
    });
}
