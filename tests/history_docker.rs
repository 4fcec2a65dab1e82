//! `fairground history` over real runs (the real `fairground run`, loader
//! container and cgroup probe): three runs of a server that burns 200 µs of
//! CPU per request, then three of the same server burning 260 µs. Known
//! answer: one change point, at the fourth run, in req/s (about 1/1.3 of
//! the level before) and in CPU per request (about 1.3×), each confirmed
//! by `compare` of the third run against the fourth; nothing before or
//! after it. A busy host cannot move where the step is nor CPU per request;
//! it can take rounds from `compare`, which then says so (rounds measured
//! on a busy host are left out, too few remain): the test accepts that
//! verdict, and only that one, in place of a confirmation.
//!
//! Only traffic: containers on each run's own internal network.

mod docker_support;

use std::path::Path;

use docker_support::*;

/// One run of `burner` burning `burn_us` per request into `out`.
fn burn_run(dir: &Path, out: &Path, burn_us: u32) {
    plainfw_variant(dir, "burner", &[("PLAINFW_BURN_US", &burn_us.to_string())]);
    let profile = "description: \"history known answer\"\n\
         frameworks: [burner]\nscenarios: [plaintext]\nconcurrency: [8]\n\
         warmup: 1s\nduration: 2s\nrounds: 3\n\
         load: {threads: 1, timeout: 2s}\n\
         server: {cpus: 1, memory: 256MiB, nofile: 16384}\n\
         loader: {cpus: 1, memory: 256MiB, nofile: 16384}\n\
         idle_settle: 1s\nreadiness_timeout: 30s\nthresholds: {preflight: warn}\n";
    let (code, stderr) = run_profile_to(dir, profile, out);
    assert_eq!(code, Some(0), "{stderr}");
    // Run directories are named by their start second: the next run must
    // not share it.
    std::thread::sleep(std::time::Duration::from_millis(1100));
}

#[test]
fn a_cpu_cost_step_after_three_real_runs_is_one_change_point_confirmed_by_compare() {
    if !docker_or_skip("history_docker") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let out = dir.join("output");
    for burn in [200, 200, 200, 260, 260, 260] {
        burn_run(dir, &out, burn);
    }
    let hist = dir.join("history");
    let o = fairground(&[
        "history",
        out.to_str().unwrap(),
        "--out",
        hist.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    eprintln!("{stdout}");
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let h: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(hist.join("history.json")).unwrap()).unwrap();
    assert_eq!(h["summary"]["runs"], 6, "{stdout}");
    assert_eq!(h["summary"]["segments"], 1, "{stdout}");
    let series = |metric: &str| {
        h["series"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["metric"] == metric)
            .unwrap_or_else(|| panic!("no {metric} series: {stdout}"))
            .clone()
    };
    // Rounds the gates left out as measured on a busy host or a slowed
    // machine: such a host moves req/s (not CPU per request), so req/s is
    // held to the known answer only when there were none.
    let busy = rounds_left_out(&out);
    for (metric, ratio) in [("throughput", 200.0 / 260.0), ("cpu_per_request", 1.3)] {
        if metric == "throughput" && busy > 0 {
            eprintln!(
                "BUSY HOST: {busy} round(s) left out by the gates; req/s is not held to the \
                 known answer, CPU per request is"
            );
            continue;
        }
        let s = series(metric);
        let cps = s["change_points"].as_array().unwrap();
        assert_eq!(cps.len(), 1, "{metric}: {stdout}");
        let cp = &cps[0];
        assert_eq!(cp["run"], 3, "{metric}: {cp}");
        assert_eq!(cp["before_run"], 2, "{metric}: {cp}");
        let got = cp["ratio"].as_f64().unwrap();
        assert!(
            (got / ratio - 1.0).abs() < 0.12,
            "{metric}: ratio {got:.3}, expected about {ratio:.3}: {cp}"
        );
        if cp["confirmed"] != true {
            assert_busy_verdict(metric, cp);
        }
    }
}

/// Rounds, over every run under `out`, that the gates left out of the
/// figures as measured on a busy host or a slowed machine.
fn rounds_left_out(out: &Path) -> usize {
    let mut n = 0;
    for run in std::fs::read_dir(out).unwrap() {
        let path = run.unwrap().path().join("results.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let r: serde_json::Value = serde_json::from_str(&text).unwrap();
        for cell in r["cells"].as_array().into_iter().flatten() {
            let mut rounds: Vec<u64> = cell["verdict"]["reasons"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["kind"] == "host_busy" || r["kind"] == "machine_slowed")
                .filter_map(|r| r["round"].as_u64())
                .collect();
            rounds.sort_unstable();
            rounds.dedup();
            n += rounds.len();
        }
    }
    n
}

/// `compare` could not confirm a change point only because rounds measured
/// on a busy host or a slowed machine were left out: its own verdict, which
/// a busy CI host may legitimately produce. Any other verdict fails.
fn assert_busy_verdict(metric: &str, cp: &serde_json::Value) {
    let why = cp["compare_why"].as_str().unwrap_or_default();
    assert_eq!(cp["compare_call"], "inconclusive", "{metric}: {cp}");
    assert!(
        why.contains("measured on a busy host or a slowed machine were left out"),
        "{metric}: not confirmed, and not for rounds left out on a busy host: {cp}"
    );
    eprintln!(
        "BUSY HOST: {metric}: compare could not confirm the change point ({why}); \
         its place and size were checked"
    );
}
