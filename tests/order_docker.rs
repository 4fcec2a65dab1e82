//! The order of a run on real containers (issue 37's known answers): two
//! copies of one server under two names and a third that burns 5% more CPU
//! per request, rounds interleaved in blocks, ranked by pairs of rounds of
//! the same block. A CPU hog started by the test for 6 s once 6 rounds
//! are measured slows the machine for part of the run.
//!
//! Known answers: the copies (200 µs of CPU per request each) share a rank
//! group; the 210 µs server is ranked apart, below both, by its ratio to
//! each in the same blocks (about ×0.955); every rank is `paired`. Twelve
//! blocks: with eight (one run, 2026-12-06) the per-block ratios of one
//! pair spread by 2.5% and, judged at 1 − 0.05/3 against the 2% floor, the
//! interval reached the floor by 0.1%. A busy
//! host cannot move the ratio of two servers measured in one block; it can
//! take rounds from the figures (the gates leave a round out when something
//! else used the CPU during it): with fewer than 3 clean blocks the test
//! accepts the tool's verdict (no rank, or Welch's) and says so.
//!
//! Only traffic: containers on the run's own internal network.

mod docker_support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use docker_support::*;
use fairground::results::{Cell, Reason};

/// Rounds measured so far by the run writing under `out`.
fn rounds_so_far(out: &Path) -> usize {
    let Ok(runs) = std::fs::read_dir(out) else {
        return 0;
    };
    runs.flatten()
        .filter_map(|d| std::fs::read_to_string(d.path().join("results.json")).ok())
        .filter_map(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .map(|v| {
            v["cells"].as_array().map_or(0, |cells| {
                cells
                    .iter()
                    .map(|c| c["rounds"].as_array().map_or(0, Vec::len))
                    .sum()
            })
        })
        .sum()
}

/// Burn one core in this process for `lasting` once the run under `out`
/// has measured `after_rounds` rounds, unless `stop` is set first.
fn hog(
    out: PathBuf,
    after_rounds: usize,
    lasting: Duration,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while rounds_so_far(&out) < after_rounds {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let burn = Instant::now();
        let mut x = 0u64;
        while burn.elapsed() < lasting && !stop.load(Ordering::Relaxed) {
            for i in 0..10_000u64 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
            }
            std::hint::black_box(x);
        }
    })
}

fn left_out(c: &Cell) -> usize {
    let mut rounds: Vec<u32> = c
        .verdict
        .reasons
        .iter()
        .filter_map(|r| match r {
            Reason::HostBusy { round, .. } | Reason::MachineSlowed { round, .. } => Some(*round),
            _ => None,
        })
        .collect();
    rounds.sort_unstable();
    rounds.dedup();
    rounds.len()
}

#[test]
fn copies_share_a_place_and_five_percent_more_cpu_is_ranked_apart_by_block() {
    if !docker_or_skip("order_docker") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for (name, burn) in [("copy-a", "200"), ("copy-b", "200"), ("costlier", "210")] {
        plainfw_variant(dir, name, &[("PLAINFW_BURN_US", burn)]);
    }
    let profile = "description: \"order known answers\"\n\
         frameworks: [copy-a, copy-b, costlier]\nscenarios: [plaintext]\nconcurrency: [8]\n\
         warmup: 1s\nduration: 2s\nrounds: 12\ninterleave_rounds: true\n\
         load: {threads: 1, timeout: 2s}\n\
         server: {cpus: 1, memory: 256MiB, nofile: 16384}\n\
         loader: {cpus: 1, memory: 256MiB, nofile: 16384}\n\
         idle_settle: 500ms\nreadiness_timeout: 30s\nthresholds: {preflight: warn}\n";
    // The machine slows for a few seconds a third of the way in.
    let stop = Arc::new(AtomicBool::new(false));
    let hogger = hog(
        dir.join("output"),
        6,
        Duration::from_secs(6),
        Arc::clone(&stop),
    );
    let (r, stderr) = run_profile_in(dir, profile);
    stop.store(true, Ordering::Relaxed);
    hogger.join().unwrap();
    let cell = |name: &str| {
        r.cells
            .iter()
            .find(|c| c.key.framework == name)
            .unwrap_or_else(|| panic!("{name} measured: {stderr}"))
    };
    let (a, b, c) = (cell("copy-a"), cell("copy-b"), cell("costlier"));
    for x in [a, b, c] {
        let rps: Vec<f64> = x.rounds.iter().map(|r| r.throughput_rps).collect();
        eprintln!(
            "{}: rounds {:?} req/s, rank {:?}, {} left out",
            x.key.framework,
            rps.iter().map(|v| v.round()).collect::<Vec<_>>(),
            x.rank.as_ref().map(|g| (g.label(), g.paired)),
            left_out(x)
        );
    }
    if let Some(p) = &r.precision {
        eprintln!("precision: {}", p.sentence());
    }
    let clean = |x: &Cell| x.rounds.len() - left_out(x);
    if [a, b, c].iter().any(|x| clean(x) < 3 + 2) {
        // Too few clean blocks for the test's answer; the tool must have
        // said why.
        assert!(
            [a, b, c].iter().any(|x| left_out(x) > 0),
            "few clean rounds but none left out: {stderr}"
        );
        eprintln!("BUSY HOST: too few clean blocks to hold the ranks to the known answer");
        return;
    }
    let (ga, gb, gc) = (
        a.rank.as_ref().expect("copy-a ranked"),
        b.rank.as_ref().expect("copy-b ranked"),
        c.rank.as_ref().expect("costlier ranked"),
    );
    assert!(ga.paired && gb.paired && gc.paired, "{ga:?} {gb:?} {gc:?}");
    // The copies share a place: neither is clearly ahead of the other.
    assert!(
        ga.low <= gb.high && gb.low <= ga.high,
        "copies apart: {ga:?} {gb:?}"
    );
    // 5% more CPU per request: never ahead of a copy. Apart from both
    // (last alone) when every block was clean: with rounds left out (a
    // slowed or busy host) the tool may honestly not tell 5% apart on the
    // blocks it kept (CI-like run 2026-12-07: 5 of 12 left out, #2–3), and
    // what it must not do is place it ahead.
    assert_eq!(
        gc.high, 3,
        "costlier can share last place, never leave it: {gc:?}"
    );
    assert!(gc.low >= 2, "costlier ranked with the first: {gc:?}");
    if [a, b, c].iter().all(|x| left_out(x) == 0) {
        assert_eq!((gc.low, gc.high), (3, 3), "{gc:?}");
        assert!(ga.high <= 2 && gb.high <= 2, "{ga:?} {gb:?}");
    } else {
        eprintln!("rounds left out: costlier {gc:?}, the copies {ga:?} {gb:?}");
    }
}
