//! Known answers: every figure fairground prints, checked against a server
//! whose true figure is known in advance, through the real pipeline (the
//! real `fairground run`, its loader container and cgroup probe, the
//! plainfw fixture in a container with one of its modes turned on; see
//! tests/fixtures/run/frameworks/plainfw/src/main.rs).
//!
//! One run holds every variant, at 8 connections, so the images are built
//! once and the Docker time is a minute or two:
//! - `delay`: every answer 1 s after its request → 8 req/s exactly, the
//!   window's edges notwithstanding (the old rule read 5.3: −33%);
//! - `burn100` and `burn`: 100 and 500 µs of CPU burnt per request, both
//!   holding the server's core → their CPU per request differs by 400 µs
//!   (`base`, with none, is reported beside);
//! - `hold`: 64 MiB held from start-up → idle memory is 64 MiB plus `base`'s;
//! - `hang`: every 7th request never answered once verification is past →
//!   timeouts counted, rejected;
//! - `backlog`: at most 4 connections served, the rest left in the kernel's
//!   backlog → connected but not served, rejected;
//! - `liar`: right for verification, wrong under load → rejected, the
//!   wrong answer shown;
//! - `closer`: `Connection: close` on every answer once verification is
//!   past → flagged for reconnects, with the count.
//!
//! A run with a CPU hog spinning beside it (`hogged`, 20 ms answers) must
//! be flagged host-busy with about the hog's core as foreign work, and the
//! same light server on a host the test reads quiet around its run
//! (`steady`) must not be.
//!
//! A second run at a fixed rate of 400 req/s holds two more:
//! - `slow`: 80 ms per answer at 8 connections, a capacity of 100 req/s
//!   (4x under the rate) → achieved within 2% of 100, every due request
//!   counted (sent or unsent), latency never 0 and rising with the backlog;
//! - `quick`: 10 ms per answer, a capacity of 800 req/s (the rate is half
//!   of it) → corrected p50 within 5% of 10 ms.
//!
//! Only traffic: containers on the run's own internal network.

mod docker_support;

use std::sync::OnceLock;

use docker_support::*;
use fairground::results::{Cell, Reason, Results, Status};

/// Requests in flight at once: one per connection.
const CONNECTIONS: u64 = 8;

/// Whether the host was quiet (the test's own reading, nothing of it
/// running) before and after the shared run.
static QUIET_AROUND_RUN: OnceLock<bool> = OnceLock::new();

/// The run every test reads: made once per test process (the tests share
/// it), `None` when there is no daemon outside CI.
fn run() -> Option<&'static (Results, String)> {
    static RUN: OnceLock<Option<(Results, String)>> = OnceLock::new();
    RUN.get_or_init(|| {
        if !docker_or_skip("known_answers") {
            return None;
        }
        let tmp = tempfile::tempdir().unwrap().keep();
        let variants: [(&str, &[(&str, &str)]); 10] = [
            ("base", &[]),
            ("delay", &[("PLAINFW_DELAY_MS", "1000")]),
            ("burn100", &[("PLAINFW_BURN_US", "100")]),
            ("burn", &[("PLAINFW_BURN_US", "500")]),
            ("hold", &[("PLAINFW_HOLD_MIB", "64")]),
            (
                "hang",
                &[("PLAINFW_HANG_EVERY", "7"), ("PLAINFW_HANG_AFTER", "500")],
            ),
            ("backlog", &[("PLAINFW_MAX_SERVED", "4")]),
            ("liar", &[("PLAINFW_WRONG_AFTER", "500")]),
            ("steady", &[("PLAINFW_DELAY_MS", "20")]),
            ("closer", &[("PLAINFW_CLOSE_AFTER", "500")]),
        ];
        for (name, env) in variants {
            plainfw_variant(&tmp, name, env);
        }
        let names: Vec<&str> = variants.iter().map(|v| v.0).collect();
        let profile = format!(
            "description: \"known answers\"\n\
             frameworks: [{}]\nscenarios: [plaintext]\nconcurrency: [{CONNECTIONS}]\n\
             warmup: 1s\nduration: 3s\nrounds: 1\n\
             load: {{threads: 1, timeout: 2s}}\n\
             server: {{cpus: 1, memory: 256MiB, nofile: 16384}}\n\
             loader: {{cpus: 1, memory: 256MiB, nofile: 16384}}\n\
             idle_settle: 1s\nreadiness_timeout: 30s\nthresholds: {{preflight: warn}}\n",
            names.join(", ")
        );
        let ((r, stderr), quiet) = bracketed_by_quiet(|| run_profile_in(&tmp, &profile));
        let _ = QUIET_AROUND_RUN.set(quiet);
        // The figures, for the record (`--nocapture` shows them).
        for c in &r.cells {
            let f = r.framework(&c.key.framework);
            let round = c.rounds.first();
            eprintln!(
                "known answer {:8} {:>9} req/s, cpu {:>8} µs/req, idle {:>10} B, served {}/{}, sent {} = answered {} + lost {}, in use {:.2}: {:?}",
                c.key.framework,
                round.map_or("-".into(), |x| format!("{:.2}", x.throughput_rps)),
                round
                    .and_then(|x| x.server.cpu_us_per_request)
                    .map_or("-".into(), |v| format!("{v:.1}")),
                f.and_then(|f| f.idle_memory_bytes).unwrap_or(0),
                round.map_or(0, |x| x.connections.serving),
                CONNECTIONS,
                round.map_or(0, |x| x.requests.sent),
                round.map_or(0, |x| x.requests.answered.total()),
                round.map_or(0, |x| x.requests.lost.total()),
                round.map_or(0.0, |x| x.connections_in_use),
                c.verdict.status
            );
        }
        let _ = std::fs::remove_dir_all(&tmp);
        Some((r, stderr))
    })
    .as_ref()
}

/// The fixed-rate run: `slow` (capacity 100 req/s) and `quick` (capacity
/// 800 req/s) at 400 req/s.
fn fixed_rate_run() -> Option<&'static (Results, String)> {
    static RUN: OnceLock<Option<(Results, String)>> = OnceLock::new();
    RUN.get_or_init(|| {
        if !docker_or_skip("known_answers") {
            return None;
        }
        let tmp = tempfile::tempdir().unwrap().keep();
        plainfw_variant(&tmp, "slow", &[("PLAINFW_DELAY_MS", "80")]);
        plainfw_variant(&tmp, "quick", &[("PLAINFW_DELAY_MS", "10")]);
        let profile = format!(
            "description: \"known answers at a fixed rate\"\n\
             frameworks: [slow, quick]\nscenarios: [plaintext]\nconcurrency: [{CONNECTIONS}]\n\
             warmup: 1s\nduration: 3s\nrounds: 1\n\
             load: {{mode: fixed-rate, rate: 400, threads: 1, timeout: 2s}}\n\
             server: {{cpus: 1, memory: 256MiB, nofile: 16384}}\n\
             loader: {{cpus: 1, memory: 256MiB, nofile: 16384}}\n\
             idle_settle: 1s\nreadiness_timeout: 30s\nthresholds: {{preflight: warn}}\n"
        );
        let (r, stderr) = run_profile_in(&tmp, &profile);
        for c in &r.cells {
            let round = &c.rounds[0];
            eprintln!(
                "known answer {:6} achieved {:.2} req/s, due {} = sent {} + unsent {}, answered {}, in flight {}, p50 {:?} µs, per second {:?}: {:?}",
                c.key.framework,
                round.throughput_rps,
                round.requests.due(),
                round.requests.sent,
                round.requests.unsent,
                round.requests.answered.total(),
                round.requests.in_flight_at_end,
                round.latency.p50_us,
                round.windows_latency_mean_us,
                c.verdict.status
            );
        }
        let _ = std::fs::remove_dir_all(&tmp);
        Some((r, stderr))
    })
    .as_ref()
}

fn cell<'a>(r: &'a Results, fw: &str, stderr: &str) -> &'a Cell {
    r.cells
        .iter()
        .find(|c| c.key.framework == fw)
        .unwrap_or_else(|| panic!("no cell for {fw}\n{stderr}"))
}

fn why(c: &Cell) -> String {
    let v: Vec<String> = c.verdict.reasons.iter().map(|r| r.to_string()).collect();
    v.join("; ")
}

#[test]
fn a_server_answering_after_one_second_does_n_per_second_whatever_the_window() {
    let Some((r, stderr)) = run() else { return };
    let c = cell(r, "delay", stderr);
    let round = &c.rounds[0];
    // 8 connections × 1 answer per second each. ±2%: the answers of each
    // connection complete every 1 s + a few hundred µs, so a 3 s window
    // holds exactly 3 of them; the margin is for the measured window's own
    // length, which the loader times to the µs.
    assert!(
        (round.throughput_rps / 8.0 - 1.0).abs() < 0.02,
        "{:.2} req/s, expected 8: {}\n{stderr}",
        round.throughput_rps,
        why(c)
    );
    assert!(round.requests.balanced(), "{:?}", round.requests);
    assert!(
        round.latency.p50_us.is_some_and(|v| v >= 1_000_000),
        "{:?}",
        round.latency
    );
    // Little's law holds: 8 req/s × 1 s = 8 connections in use.
    assert!(
        (round.connections_in_use - 8.0).abs() < 0.4,
        "{}",
        round.connections_in_use
    );
    assert_ne!(c.verdict.status, Status::Rejected, "{}", why(c));
    assert!(!c
        .verdict
        .reasons
        .iter()
        .any(|x| matches!(x, Reason::LittlesLaw { .. })));
}

#[test]
fn cpu_per_request_is_the_burn_plus_the_servers_own_baseline() {
    let Some((r, stderr)) = run() else { return };
    let cpu = |name: &str| {
        cell(r, name, stderr).rounds[0]
            .server
            .cpu_us_per_request
            .unwrap_or_else(|| panic!("{name} has a CPU figure"))
    };
    let (base, low, high) = (cpu("base"), cpu("burn100"), cpu("burn"));
    // CLOCK_THREAD_CPUTIME_ID: a burn cannot be shortened by preemption,
    // so the cgroup can never read less than it.
    assert!(
        low >= 100.0 && high >= 500.0,
        "burn100 {low:.1} and burn {high:.1} µs/request: below the CPU they burnt\n{stderr}"
    );
    // The server's own work per request on top of the burn depends on the
    // regime: `base` is client-bound (its core idles between requests),
    // the burns hold their core. Two burns in the same regime share it, so
    // their difference is the difference of the burns: 400 µs ±5%. (Set
    // against `base` instead it read 532-544 µs for 500 on this machine
    // on 2026-12-01, on this commit and on the one before it alike.)
    assert!(
        ((high - low) / 400.0 - 1.0).abs() <= 0.05,
        "burn {high:.1}, burn100 {low:.1}, base {base:.1} µs/request: burn − burn100 should be 400 ±5%\n{stderr}"
    );
}

#[test]
fn idle_memory_is_what_the_server_holds_plus_its_baseline() {
    let Some((r, stderr)) = run() else { return };
    let idle = |fw: &str| {
        r.framework(fw)
            .and_then(|f| f.idle_memory_bytes)
            .unwrap_or_else(|| panic!("{fw} has idle memory\n{stderr}")) as f64
    };
    let (base, hold) = (idle("base"), idle("hold"));
    let expected = 64.0 * 1024.0 * 1024.0 + base;
    // ±3%: the page tables of 64 MiB and allocator rounding.
    assert!(
        (hold / expected - 1.0).abs() < 0.03,
        "hold {hold} B, base {base} B, expected {expected} B"
    );
    // And the window's peak is the window's: hold's never less than what it holds.
    let peak = cell(r, "hold", stderr).rounds[0]
        .server
        .memory_window_peak_bytes
        .unwrap();
    assert!(peak as f64 >= 64.0 * 1024.0 * 1024.0, "{peak}");
}

#[test]
fn requests_that_never_finish_are_timeouts_and_reject_the_cell() {
    let Some((r, stderr)) = run() else { return };
    let c = cell(r, "hang", stderr);
    assert!(!c.rounds.is_empty(), "measured, not excluded: {}", why(c));
    let round = &c.rounds[0];
    assert!(round.requests.lost.timeout > 0, "{:?}", round.requests);
    assert!(round.requests.balanced(), "{:?}", round.requests);
    // One request in 7 never answered: 14% of requests are slower than the
    // 2 s timeout, so p90 and beyond read "> 2 s", never a figure from the
    // answered ones alone.
    let l = &round.latency;
    assert_eq!(l.beyond_timeout, round.requests.beyond_timeout(), "{l:?}");
    assert!(l.p50_us.is_some(), "{l:?}");
    assert_eq!(
        (l.p90_us, l.p99_us, l.p999_us, l.max_us),
        (None, None, None, None),
        "{l:?}"
    );
    assert_eq!(l.show(l.p999_us), "> 2.00 s");
    assert_eq!(c.verdict.status, Status::Rejected, "{}", why(c));
    assert!(
        c.verdict
            .reasons
            .iter()
            .any(|x| matches!(x, Reason::ErrorRate { .. })),
        "{}",
        why(c)
    );
}

#[test]
fn connections_left_in_the_backlog_are_connected_but_not_served() {
    let Some((r, stderr)) = run() else { return };
    let c = cell(r, "backlog", stderr);
    let conns = c.rounds[0].connections;
    assert_eq!(conns.established, CONNECTIONS, "{conns:?}");
    assert!(conns.serving <= 4, "{conns:?}");
    assert_eq!(c.verdict.status, Status::Rejected, "{}", why(c));
    assert!(
        c.verdict
            .reasons
            .iter()
            .any(|x| matches!(x, Reason::ConnectionsShort { .. })),
        "{}",
        why(c)
    );
}

#[test]
fn a_server_that_lies_under_load_gets_no_number() {
    let Some((r, stderr)) = run() else { return };
    let c = cell(r, "liar", stderr);
    assert!(r
        .framework("liar")
        .unwrap()
        .verify
        .as_ref()
        .unwrap()
        .excluded
        .is_empty());
    assert_eq!(c.verdict.status, Status::Rejected, "{}", why(c));
    let text = why(c);
    assert!(text.contains("Hello, World?"), "{text}");
}

#[test]
fn clean_servers_are_accepted_with_every_request_accounted_for() {
    let Some((r, stderr)) = run() else { return };
    for fw in ["base", "steady"] {
        let c = cell(r, fw, stderr);
        let round = &c.rounds[0];
        assert!(
            round.requests.balanced() && round.requests.lost.total() == 0,
            "{fw}: {:?}",
            round.requests
        );
        assert_eq!(round.connections.serving, CONNECTIONS, "{fw}");
        assert!(
            round.answers.checked > 0 && round.answers.wrong == 0,
            "{fw}: {:?}",
            round.answers
        );
        assert_ne!(c.verdict.status, Status::Rejected, "{fw}: {}", why(c));
    }
    // steady: 8 connections, each request held 20 ms by the server: at most
    // 400 req/s (2% for the window's edges). Each request also pays the
    // timer's rounding up to the next millisecond and a round trip through
    // two containers, which on CI's busy 2-core host cost up to 1.6 ms
    // (370 req/s seen), so the floor is 85%. Little's law within 10%.
    let s = &cell(r, "steady", stderr).rounds[0];
    assert!(
        (340.0..=408.0).contains(&s.throughput_rps),
        "{}",
        s.throughput_rps
    );
    let gap = s.connections_in_use / CONNECTIONS as f64 - 1.0;
    assert!(gap.abs() < 0.1, "{}", s.connections_in_use);
}

#[test]
fn a_server_that_closes_every_connection_is_flagged_with_the_reconnects() {
    let Some((r, stderr)) = run() else { return };
    let c = cell(r, "closer", stderr);
    let round = &c.rounds[0];
    assert!(round.requests.balanced(), "{:?}", round.requests);
    let reconnects = round.connections.reconnects;
    assert!(reconnects > 100, "{:?}", round.connections);
    assert!(
        c.verdict.reasons.iter().any(|x| matches!(
            x,
            Reason::Reconnects { reconnects: n, .. } if *n == reconnects
        )),
        "{}",
        why(c)
    );
    assert_ne!(c.verdict.status, Status::Accepted, "{}", why(c));
}

#[test]
fn fixed_rate_past_capacity_counts_every_due_request_and_shows_the_backlog() {
    let Some((r, stderr)) = fixed_rate_run() else {
        return;
    };
    let c = cell(r, "slow", stderr);
    let round = &c.rounds[0];
    let q = round.requests;
    assert!(q.balanced(), "{q:?}");
    // 400 req/s for 3 s: 1,200 due, sent or not (the loader's window is
    // timed to the µs, so allow one request at each edge).
    assert!(q.due().abs_diff(1_200) <= 2, "{q:?}");
    assert!(q.unsent > 600, "{q:?}");
    // Achieved: the server's capacity, 8 connections / 80 ms = 100 req/s.
    assert!(
        (round.throughput_rps / 100.0 - 1.0).abs() < 0.02,
        "{:.2} req/s: {}",
        round.throughput_rps,
        why(c)
    );
    // More than half the window's requests were never answered within the
    // timeout: the median reads "> 2 s"; the answered ones alone carry
    // their full corrected latency, at least a quarter of the window.
    let l = &round.latency;
    assert_eq!(l.p50_us, None, "{l:?}");
    let answered = fairground::results::histogram::decode(&round.histogram).unwrap();
    assert!(!answered.is_empty());
    assert!(answered.value_at_quantile(0.5) >= 750_000_000, "{l:?}");
    assert!(
        answered.min() >= 80_000_000,
        "never less than the server's delay: {l:?}"
    );
    // Latency per second of the window rises with the backlog.
    let per_s: Vec<f64> = round
        .windows_latency_mean_us
        .iter()
        .map(|v| v.unwrap())
        .collect();
    assert_eq!(per_s.len(), 3, "{per_s:?}");
    assert!(per_s[0] < per_s[1] && per_s[1] < per_s[2], "{per_s:?}");
    for reason in ["rate missed", "unsent requests"] {
        assert!(
            c.verdict.reasons.iter().any(|x| x.label() == reason),
            "{}",
            why(c)
        );
    }
}

#[test]
fn fixed_rate_under_capacity_reads_the_servers_delay() {
    let Some((r, stderr)) = fixed_rate_run() else {
        return;
    };
    let c = cell(r, "quick", stderr);
    let round = &c.rounds[0];
    assert!(round.requests.balanced(), "{:?}", round.requests);
    assert_eq!(round.requests.unsent, 0, "{:?}", round.requests);
    let p50 = round.latency.p50_us.unwrap();
    assert!(
        (10_000..=10_500).contains(&p50),
        "p50 {p50} µs, expected within 5% of 10 ms: {}",
        why(c)
    );
}

/// Host-busy means other work, and only that: a CPU hog started beside a
/// run is foreign and flags the cell with about the core it burnt, while
/// the same light server measured on a quiet host (CI) is not flagged.
#[test]
fn a_cpu_hog_beside_the_run_is_foreign_work_and_flags_host_busy() {
    if !docker_or_skip("known_answers") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap().keep();
    plainfw_variant(&tmp, "hogged", &[("PLAINFW_DELAY_MS", "20")]);
    let profile = format!(
        "description: \"known answers: a CPU hog beside the run\"\n\
         frameworks: [hogged]\nscenarios: [plaintext]\nconcurrency: [{CONNECTIONS}]\n\
         warmup: 1s\nduration: 3s\nrounds: 1\n\
         load: {{threads: 1, timeout: 2s}}\n\
         server: {{cpus: 1, memory: 256MiB, nofile: 16384}}\n\
         loader: {{cpus: 1, memory: 256MiB, nofile: 16384}}\n\
         idle_settle: 1s\nreadiness_timeout: 30s\nthresholds: {{preflight: warn}}\n"
    );
    // One thread spinning for the whole run (bounded: it stops with the run).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hog = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let mut x = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed)
                && started.elapsed() < std::time::Duration::from_secs(300)
            {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        })
    };
    // Stopped however the run ends: a failed run must not leave the hog
    // spinning into the next tests.
    struct StopOnDrop(std::sync::Arc<std::sync::atomic::AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let guard = StopOnDrop(std::sync::Arc::clone(&stop));
    let (r, stderr) = run_profile_in(&tmp, &profile);
    drop(guard);
    hog.join().unwrap();
    let _ = std::fs::remove_dir_all(&tmp);
    let c = cell(&r, "hogged", &stderr);
    let host = c.rounds[0].host.clone().expect("host figures were read");
    eprintln!("known answer hogged: {host:?}");
    assert!(
        c.verdict
            .reasons
            .iter()
            .any(|x| matches!(x, Reason::HostBusy { .. })),
        "{}",
        why(c)
    );
    // The hog burnt about one core of the two (less what the scheduler
    // gave the server and the loader when they needed it).
    assert!((0.6..=1.3).contains(&host.foreign_cores), "{host:?}");
    // The same server with nothing beside it: on a host the test itself
    // read quiet around the run, the figure is our own and the cell is not
    // host-busy (on a busy host that check is not made, and says so).
    let Some((r, stderr)) = run() else { return };
    if QUIET_AROUND_RUN.get() == Some(&true) {
        let quiet = cell(r, "steady", stderr);
        assert!(
            !quiet
                .verdict
                .reasons
                .iter()
                .any(|x| matches!(x, Reason::HostBusy { .. })),
            "{}",
            why(quiet)
        );
    }
}
