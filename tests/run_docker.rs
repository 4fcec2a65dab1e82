//! `fairground run` end to end on the real daemon: a fixture framework that
//! passes the contract (tests/fixtures/run/frameworks/plainfw), the loader in
//! its container, the cgroup probe, the report; then Ctrl-C in the middle of
//! a run and `--resume` finishing it.
//!
//! Only traffic: containers on the run's own internal network, and verify
//! from this host to the server container on that network.

mod docker_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use docker_support::*;
use fairground::results::{self, Results, Status};

fn profile(dir: &Path, rounds: u32, duration: &str) -> PathBuf {
    // nofile stays below the daemon's own hard limit on small hosts (20000
    // on this project's machines); see docs/docker.md.
    let text = format!(
        "description: \"end-to-end test of fairground run\"\n\
         frameworks: [plainfw]\nscenarios: [plaintext]\nconcurrency: [8]\n\
         warmup: 1s\nduration: {duration}\nrounds: {rounds}\nrestart_between_rounds: false\n\
         load: {{mode: closed, threads: 1, pipeline: 1, timeout: 5s}}\n\
         server: {{cpus: 1, cpuset: auto, memory: 128MiB, swap: false, nofile: 16384}}\n\
         loader: {{cpus: 1, cpuset: auto, memory: 256MiB, swap: false, nofile: 16384}}\n\
         network: bridge\nidle_settle: 1s\nreadiness_timeout: 30s\n\
         thresholds: {{preflight: warn}}\n"
    );
    let path = dir.join("e2e.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn frameworks() -> String {
    root()
        .join("tests/fixtures/run/frameworks")
        .display()
        .to_string()
}

#[test]
fn runs_a_profile_end_to_end_and_writes_the_report() {
    if !docker_or_skip("runs_a_profile_end_to_end_and_writes_the_report") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let prof = profile(tmp.path(), 2, "2s");
    let out = tmp.path().join("output");
    let o = fairground(&[
        "run",
        "--profile",
        prof.to_str().unwrap(),
        "--frameworks",
        &frameworks(),
        "--output",
        out.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let dir = run_dir(&out);
    let r = results_of(&dir);
    assert_eq!(r.cells.len(), 1, "{stderr}");
    let cell = &r.cells[0];
    // Both planned rounds; a round left out (slowed machine, busy host) adds
    // its repeat after them.
    assert_eq!(cell.rounds.iter().filter(|r| r.index < 2).count(), 2);
    assert!(
        cell.verdict.status != Status::Rejected,
        "{:?}\n{stderr}",
        cell.verdict
    );
    for round in &cell.rounds {
        assert!(round.responses.status_2xx > 0);
        assert_eq!(round.connections.established, 8);
        assert_eq!(round.connections.serving, 8);
        assert!(round.requests.balanced(), "{:?}", round.requests);
        assert!(
            round.answers.checked > 0 && round.answers.wrong == 0,
            "{:?}",
            round.answers
        );
        assert!(
            round.server.cpu_us_per_request.is_some_and(|us| us > 0.0),
            "{round:?}"
        );
        assert!(!round.server.memory_samples_bytes.is_empty());
    }
    let fw = r.framework("plainfw").unwrap();
    assert!(fw.verify.as_ref().unwrap().excluded.is_empty());
    assert_eq!(fw.limits.as_ref().unwrap().nofile_soft, Some(16384));
    assert!(fw.idle_memory_bytes.is_some() && !fw.cold_start_ms.is_empty());
    assert!(fw.binary_size_bytes.is_some_and(|b| b > 100_000), "{fw:?}");
    assert!(fw.app_lines_of_code.is_some_and(|n| n > 20), "{fw:?}");
    assert!(
        fw.image_id.is_some() && fw.versions.contains_key("rustc"),
        "{fw:?}"
    );
    assert!(r.finished_at.is_some() && !r.interrupted);
    for f in [
        "results.md",
        "stats.md",
        "results.csv",
        "SHA256SUMS",
        "hgrm/plainfw-plaintext-c8.hgrm",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    assert_eq!(
        run_leftovers(&stderr),
        "",
        "the run removed its containers and network"
    );
}

fn wait_for_first_round(dir_root: &Path, child: &mut Child) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        assert!(
            Instant::now() < deadline,
            "no round was stored within 300 s"
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended before it was interrupted: {status}");
        }
        if let Ok(dir) = dir_root.join("latest").canonicalize() {
            if let Ok(text) = std::fs::read_to_string(dir.join(results::RESULTS_FILE)) {
                if results::from_json(&text, "x").is_ok_and(|r| !r.cells.is_empty()) {
                    return dir;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Starts a 3-round run, sends `signal` once its first round is stored and
/// checks the run stopped cleanly: exit 130, no container or network left,
/// the rounds measured so far kept and reported. Returns the run's folder
/// and the profile's folder.
fn interrupted_run(signal: libc::c_int) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let prof = profile(tmp.path(), 3, "3s");
    let out = tmp.path().join("output");
    let mut child = fairground(&[
        "run",
        "--profile",
        prof.to_str().unwrap(),
        "--frameworks",
        &frameworks(),
        "--output",
        out.to_str().unwrap(),
    ])
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let dir = wait_for_first_round(&out, &mut child);
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    assert_eq!(rc, 0);
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{stderr}");
    assert_eq!(
        run_leftovers(&stderr),
        "",
        "the interrupted run removed its containers and network"
    );
    let partial = results_of(&dir);
    assert!(partial.interrupted);
    let measured: usize = partial.cells.iter().map(|c| c.rounds.len()).sum();
    assert!(
        (1..3).contains(&measured),
        "{measured} rounds before the signal"
    );
    assert!(
        dir.join("results.md").is_file(),
        "the report is written for what was measured"
    );
    (tmp, dir)
}

/// Regression: SIGTERM (`kill`, a CI runner's timeout) used to end the run
/// by the signal's default action, leaving its server running on the cores
/// the next run measures on. It now takes Ctrl-C's path.
#[test]
fn sigterm_stops_the_run_as_ctrl_c_does_and_leaves_nothing_running() {
    if !docker_or_skip("sigterm_stops_the_run_as_ctrl_c_does_and_leaves_nothing_running") {
        return;
    }
    interrupted_run(libc::SIGTERM);
}

#[test]
fn ctrl_c_keeps_what_was_measured_and_resume_finishes_the_run() {
    if !docker_or_skip("ctrl_c_keeps_what_was_measured_and_resume_finishes_the_run") {
        return;
    }
    // SIGINT, as Ctrl-C on a terminal sends it.
    let (tmp, dir) = interrupted_run(libc::SIGINT);
    let o = fairground(&[
        "run",
        "--resume",
        dir.to_str().unwrap(),
        "--frameworks",
        &frameworks(),
    ])
    .env("FAIRGROUND_PROFILES", tmp.path())
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let done = results_of(&dir);
    assert!(done.remaining().is_empty(), "{stderr}");
    let idx: Vec<u32> = done.cells[0].rounds.iter().map(|r| r.index).collect();
    assert_eq!(idx[..3], [0, 1, 2], "{idx:?}");
    // Rounds past the planned three are repeats of rounds left out (a
    // slowed machine or a busy host), one at most for each.
    let left_out = done.cells[0]
        .verdict
        .reasons
        .iter()
        .filter(|x| {
            matches!(
                x,
                results::Reason::MachineSlowed { .. } | results::Reason::HostBusy { .. }
            )
        })
        .count();
    assert!(
        idx.len() - 3 <= left_out,
        "{idx:?}: {:?}",
        done.cells[0].verdict
    );
    assert!(!done.interrupted && done.finished_at.is_some());
    assert_eq!(run_leftovers(&stderr), "");
}

/// Containers labelled with any of `runs` still on the daemon.
fn containers_of(runs: &[String]) -> Vec<String> {
    runs.iter()
        .flat_map(|run| {
            let o = std::process::Command::new("docker")
                .args([
                    "ps",
                    "-aq",
                    "--filter",
                    &format!("label=fairground.run={run}"),
                ])
                .output()
                .unwrap();
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn after_a_kill_9_resume_removes_the_server_left_running_and_finishes() {
    if !docker_or_skip("after_a_kill_9_resume_removes_the_server_left_running_and_finishes") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let prof = profile(tmp.path(), 3, "3s");
    let out = tmp.path().join("output");
    let mut child = fairground(&[
        "run",
        "--profile",
        prof.to_str().unwrap(),
        "--frameworks",
        &frameworks(),
        "--output",
        out.to_str().unwrap(),
    ])
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let dir = wait_for_first_round(&out, &mut child);
    // SIGKILL: no cleanup, no report; the server keeps running on its core.
    child.kill().unwrap();
    let _ = child.wait();
    let runs = results_of(&dir).docker_runs;
    assert_eq!(runs.len(), 1, "the run recorded its label");
    assert!(
        !containers_of(&runs).is_empty(),
        "the killed run left its server behind"
    );
    let o = fairground(&[
        "run",
        "--resume",
        dir.to_str().unwrap(),
        "--frameworks",
        &frameworks(),
    ])
    .env("FAIRGROUND_PROFILES", tmp.path())
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("removed what an earlier invocation of this run left"),
        "{stderr}"
    );
    let done = results_of(&dir);
    assert!(done.remaining().is_empty(), "{stderr}");
    assert_eq!(done.resumed_environments.len(), 1, "preflight ran again");
    assert!(
        containers_of(&done.docker_runs).is_empty(),
        "nothing left on any invocation's label"
    );
}

fn reasons_of(r: &Results, framework: &str, stderr: &str) -> (Status, String) {
    let cell = r
        .cells
        .iter()
        .find(|c| c.key.framework == framework)
        .unwrap_or_else(|| panic!("no cell for {framework}: {:?}\n{stderr}", r.cells));
    let text: Vec<String> = cell.verdict.reasons.iter().map(|x| x.to_string()).collect();
    (cell.verdict.status, text.join("; "))
}

#[test]
fn a_server_that_drops_connections_or_runs_out_of_memory_is_rejected_and_the_rest_kept() {
    if !docker_or_skip("a_server_that_drops_connections_or_runs_out_of_memory_is_rejected") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // At 8 connections, a cap of 4 open drops half of them.
    plainfw_variant(tmp.path(), "dropper", &[("PLAINFW_MAX_OPEN", "4")]);
    // 256 KiB kept per request: verify's few hundred requests fit in 128 MiB,
    // a second of load does not.
    plainfw_variant(
        tmp.path(),
        "leaker",
        &[("PLAINFW_LEAK_PER_REQUEST", "262144")],
    );
    plainfw_variant(tmp.path(), "plainfw", &[]);
    // An image that does not build: it fails alone, after what was measured
    // before it, and the others after it are measured too.
    let broken = tmp.path().join("frameworks/broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(
        broken.join("framework.yaml"),
        "name: broken\nlanguage: none\nframework: an image that does not build\n\
         base: scratch\nport: 8080\nreadiness: /\nscenarios: [plaintext]\n\
         workers: none (its image never builds)\n\
         notes: a test fixture whose Dockerfile copies a file that is not there\n",
    )
    .unwrap();
    std::fs::write(
        broken.join("Dockerfile"),
        "ARG BASE=scratch\nFROM ${BASE}\nCOPY no-such-file /app\n",
    )
    .unwrap();
    let out = tmp.path().join("output");
    let (code, stderr) = run_profile_to(
        tmp.path(),
        "frameworks: [dropper, leaker, broken, plainfw]\nscenarios: [plaintext]\n\
         concurrency: [8]\nwarmup: 1s\nduration: 2s\nrounds: 2\n\
         load: {threads: 1}\n\
         server: {cpus: 1, memory: 128MiB, nofile: 16384}\n\
         loader: {cpus: 1, memory: 256MiB, nofile: 16384}\n\
         idle_settle: 1s\nreadiness_timeout: 30s\nthresholds: {preflight: warn}\n",
        &out,
    );
    // The broken framework's cell has no result: the run says so by its
    // exit code, and its failure names the build's error.
    assert_eq!(code, Some(1), "{stderr}");
    let r = results_of(&run_dir(&out));
    let why = r.framework("broken").unwrap().failure.clone().unwrap();
    assert!(
        why.contains("its image did not build") && why.contains("no-such-file"),
        "{why}"
    );
    assert_eq!(r.remaining().len(), 1, "{:?}", r.remaining());

    let (status, why) = reasons_of(&r, "dropper", &stderr);
    assert_eq!(status, Status::Rejected, "dropper: {why}\n{stderr}");
    assert!(
        why.contains("error"),
        "dropper rejected for its errors: {why}"
    );
    let dropped = &r
        .cells
        .iter()
        .find(|c| c.key.framework == "dropper")
        .unwrap();
    assert!(
        dropped.rounds.iter().all(|x| x.errors.read > 0),
        "{:?}",
        dropped.rounds
    );

    let (status, why) = reasons_of(&r, "leaker", &stderr);
    assert_eq!(status, Status::Rejected, "leaker: {why}\n{stderr}");
    assert!(
        why.to_lowercase().contains("oom") || why.contains("out of memory"),
        "the OOM kill is named: {why}"
    );

    let (status, why) = reasons_of(&r, "plainfw", &stderr);
    assert_ne!(status, Status::Rejected, "plainfw: {why}\n{stderr}");
    let healthy = r
        .cells
        .iter()
        .find(|c| c.key.framework == "plainfw")
        .unwrap();
    assert_eq!(
        healthy.rounds.iter().filter(|r| r.index < 2).count(),
        2,
        "the healthy framework was measured whole"
    );
    assert!(healthy
        .rounds
        .iter()
        .all(|x| x.responses.status_2xx > 0 && x.errors_total() == 0));
}

#[test]
fn a_loader_starved_of_cpu_is_flagged_client_bound() {
    if !docker_or_skip("a_loader_starved_of_cpu_is_flagged_client_bound") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    plainfw_variant(tmp.path(), "plainfw", &[]);
    let (r, stderr) = run_profile_in(
        tmp.path(),
        "frameworks: [plainfw]\nscenarios: [plaintext]\nconcurrency: [8]\n\
         warmup: 1s\nduration: 2s\nrounds: 1\nload: {threads: 1}\n\
         server: {cpus: 1, memory: 128MiB, nofile: 16384}\n\
         loader: {cpus: 0.1, memory: 256MiB, nofile: 16384}\n\
         idle_settle: 1s\nreadiness_timeout: 30s\nthresholds: {preflight: warn}\n",
    );
    let (status, why) = reasons_of(&r, "plainfw", &stderr);
    assert_eq!(status, Status::Flagged, "{why}\n{stderr}");
    assert!(why.contains("load generator"), "{why}");
    let round = &r.cells[0].rounds[0];
    // The loader read its own cgroup's CFS counters inside its container:
    // a tenth of a core is used up in most scheduler periods.
    assert!(
        round.loader.throttled_fraction.is_some_and(|f| f > 0.5),
        "{:?}",
        round.loader
    );
    assert!(
        round.responses.status_2xx > 0 && round.errors_total() == 0,
        "{round:?}"
    );
    assert_eq!(
        r.framework("plainfw")
            .unwrap()
            .limits
            .as_ref()
            .unwrap()
            .cpus,
        Some(1.0)
    );
}

#[test]
fn host_network_mode_measures_the_server_on_127_0_0_1() {
    if !docker_or_skip("host_network_mode_measures_the_server_on_127_0_0_1") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(profile(tmp.path(), 1, "2s"))
        .unwrap()
        .replace("network: bridge", "network: host");
    plainfw_variant(tmp.path(), "plainfw", &[]);
    let (r, stderr) = run_profile_in(tmp.path(), &text);
    let (status, why) = reasons_of(&r, "plainfw", &stderr);
    assert_ne!(status, Status::Rejected, "{why}\n{stderr}");
    let round = &r.cells[0].rounds[0];
    assert!(
        round.responses.status_2xx > 0 && round.errors_total() == 0,
        "{round:?}"
    );
    assert_eq!(round.connections.established, 8);
    assert!(round.server.cpu_us_per_request.is_some_and(|us| us > 0.0));
}
