//! `fairground compare` on real runs (real containers, the real loader):
//! the known answers of issue 12.
//!
//! Two runs of one profile measure three variants of the plainfw fixture,
//! which burns a fixed amount of its own thread CPU per request
//! (`PLAINFW_BURN_US`): `plainfw` 400 µs, `slow` 500 µs (+25%), `slight`
//! 404 µs (+1%). From them:
//! - a run against itself, and against the rerun (A/A): within noise;
//! - plainfw → slow, in one run and across the runs: req/s and CPU µs per
//!   request regressed, the interval excluding 1;
//! - plainfw → slight: never regressed;
//! - a run of another profile: refused (exit 2), the fields named.
//!
//! Rounds the gates find measured on a busy host (other processes' CPU and
//! the hypervisor's steal) are left out by compare, so on a shared machine
//! each run waits for a quiet host first and is measured again (at most
//! [`ATTEMPTS`] times) until every cell has enough clean rounds and the
//! gates flagged none noisy: a run whose rounds of one server disagree by
//! more than 5% cannot tell a 1% change from a 25% one, and the speed
//! known answers are only checked on one that can. When the host stays
//! busy through every attempt (a CPU hog beside the test), they check
//! instead what a busy host cannot move: the gates' busy verdict round by
//! round, compare declining to call a change it cannot see, and the CPU
//! time per request from the server's cgroup (the fixture burns thread CPU
//! time, which other work on the cores does not stretch). Every failure
//! prints each round's req/s and what the host did beside it. Run with the shared lock:
//! `flock /tmp/fairground-docker.lock cargo test --test compare_docker -- --test-threads=1`.
//!
//! Only traffic: containers on each run's own internal network.

mod docker_support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use docker_support::*;
use fairground::compare::{Call, Comparison, Metric, MIN_ROUNDS};
use fairground::results::{self, Reason, Results};

/// Rounds per cell: enough that a few measured on a busy host still leave
/// [`MIN_ROUNDS`] clean ones, few enough to keep the test short.
const ROUNDS: u32 = 5;
/// Measurements of one run before the test gives up on a quiet host (and
/// checks what a busy host cannot move instead).
const ATTEMPTS: u32 = 2;
/// Longest wait for a quiet host before each measurement.
const QUIET_WAIT: Duration = Duration::from_secs(30);
/// Other processes' CPU use below which the host counts as quiet, cores:
/// the gates' own default limit (results::verdict::DEFAULT_MAX_FOREIGN_CORES).
const QUIET_CORES: f64 = fairground::results::verdict::DEFAULT_MAX_FOREIGN_CORES;

/// Rounds interleave (the frameworks alternate round by round, as the
/// headline profiles run), so two frameworks of one run are compared on
/// the ratios of rounds measured in the same block: a slow phase of the
/// host moves both and cancels. Run one after the other, a 1% change read
/// +2.7% CPU per request (×1.018–×1.036) in one run on CI's machine and was
/// called a regression.
///
/// The slowed-machine rule is off: these servers burn user-space CPU, which
/// the probe's kernel path does not track. Beside them the probe wandered
/// by up to 45% while req/s moved 3%, so the rule left out most rounds of
/// the known answers it would not have moved (compare widens its band by
/// the probe's drift instead).
fn profile(rounds: u32, duration: &str, pipeline: u32, frameworks: &str) -> String {
    format!(
        "description: \"compare known answers\"\n\
         frameworks: [{frameworks}]\nscenarios: [plaintext]\nconcurrency: [8]\n\
         warmup: 1s\nduration: {duration}\nrounds: {rounds}\ninterleave_rounds: true\n\
         load: {{threads: 1, pipeline: {pipeline}}}\n\
         server: {{cpus: 1, memory: 128MiB, nofile: 16384}}\n\
         loader: {{cpus: 1, memory: 256MiB, nofile: 16384}}\n\
         idle_settle: 1s\nreadiness_timeout: 30s\n\
         thresholds: {{preflight: warn, off: [slowed_machine]}}\n"
    )
}

/// Wait (bounded) until nothing else uses the host; says how long it took.
fn wait_for_quiet_host() {
    let start = Instant::now();
    loop {
        let busy = host_busy_cores();
        if busy < QUIET_CORES {
            eprintln!(
                "host quiet ({busy:.2} cores busy) after {:?}",
                start.elapsed()
            );
            return;
        }
        if start.elapsed() > QUIET_WAIT {
            eprintln!("host still busy ({busy:.2} cores) after {QUIET_WAIT:?}; measuring anyway");
            return;
        }
        std::thread::sleep(Duration::from_secs(4));
    }
}

/// Rounds of each cell not left out (busy host, slowed machine), fewest.
fn clean_rounds(r: &Results) -> usize {
    r.cells
        .iter()
        .map(|c| {
            let busy = c
                .verdict
                .reasons
                .iter()
                .filter(|x| matches!(x, Reason::HostBusy { .. } | Reason::MachineSlowed { .. }))
                .count();
            c.rounds.len() - busy
        })
        .min()
        .unwrap_or(0)
}

/// Cells the gates flagged noisy: their kept rounds' req/s varied by more
/// than the run's CV limit, so the run cannot tell 1% from 25% apart.
fn noisy_cells(r: &Results) -> Vec<String> {
    r.cells
        .iter()
        .filter(|c| {
            c.verdict
                .reasons
                .iter()
                .any(|x| matches!(x, Reason::HighCv { .. }))
        })
        .map(|c| c.key.framework.clone())
        .collect()
}

/// Every round of `run`, one line each: req/s, p99, what the host did
/// beside it and the gates' reasons, so a failure on CI says what the
/// machine was doing (the log of the test that measured the runs is only
/// shown when that test fails).
fn rounds_of(run: &Path) -> String {
    let r = results::from_json(
        &std::fs::read_to_string(run.join(results::RESULTS_FILE)).unwrap(),
        "results.json",
    )
    .unwrap();
    let mut out = vec![format!("{}:", run.display())];
    for c in &r.cells {
        for x in &c.rounds {
            let host = x.host.as_ref().map_or("host unread".into(), |h| {
                format!(
                    "foreign {:.2}, steal {:.2}, softirq {:.2} cores",
                    h.foreign_cores, h.steal_cores, h.softirq_cores
                )
            });
            out.push(format!(
                "  {} round {}: {:.0} req/s, p99 {:?} µs, CPU/req {:?} µs; {host}",
                c.key.framework,
                x.index + 1,
                x.throughput_rps,
                x.latency.p99_us,
                x.server.cpu_us_per_request,
            ));
        }
        let why: Vec<String> = c.verdict.reasons.iter().map(|x| x.to_string()).collect();
        out.push(format!("  {} verdict: {}", c.key.framework, why.join("; ")));
    }
    out.join("\n")
}

/// Run `profile_text` against the frameworks under `dir/frameworks` until
/// every cell has `min_clean` clean rounds and none was flagged noisy (at
/// most [`ATTEMPTS`] runs); the run directory of the best attempt.
fn measure(dir: &Path, profile: &str, name: &str, profile_text: &str, min_clean: usize) -> PathBuf {
    let path = dir.join(format!("{profile}.yaml"));
    std::fs::write(&path, profile_text).unwrap();
    let mut best: Option<((usize, bool), PathBuf)> = None;
    for attempt in 1..=ATTEMPTS {
        wait_for_quiet_host();
        let out = dir.join(format!("{name}-{attempt}"));
        let started = Instant::now();
        let o = fairground(&[
            "run",
            "--profile",
            path.to_str().unwrap(),
            "--frameworks",
            dir.join("frameworks").to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ])
        .env("FAIRGROUND_KEEP_SUPERSEDED", "1")
        .output()
        .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{name}: {stderr}");
        let run = out.join("latest").canonicalize().unwrap();
        let r = results::from_json(
            &std::fs::read_to_string(run.join(results::RESULTS_FILE)).unwrap(),
            "results.json",
        )
        .unwrap();
        let clean = clean_rounds(&r);
        let noisy = noisy_cells(&r);
        eprintln!(
            "{name} attempt {attempt}: {} in {:?}, fewest clean rounds of a cell {clean}, noisy cells {noisy:?}\n{}",
            run.display(),
            started.elapsed(),
            rounds_of(&run)
        );
        // More clean rounds first, then a run not flagged noisy.
        let score = (clean.min(min_clean), noisy.is_empty());
        if best.as_ref().is_none_or(|(b, _)| score > *b) {
            best = Some((score, run));
        }
        if clean >= min_clean && noisy.is_empty() {
            break;
        }
    }
    best.expect("at least one attempt").1
}

struct Runs {
    base: PathBuf,
    rerun: PathBuf,
    other_profile: PathBuf,
}

impl Runs {
    /// The rounds of both runs a comparison was made of, for its failures.
    fn evidence(&self) -> String {
        format!("{}\n{}", rounds_of(&self.base), rounds_of(&self.rerun))
    }

    /// Whether both runs have enough rounds on a quiet host to check the
    /// known answers on. Either way the gates' busy verdict must hold in
    /// every round: a round whose host reading is above the limit is left
    /// out saying so, and no other round is. When the host stayed busy
    /// through every attempt (a CPU hog beside the test), compare leaves
    /// the busy rounds out and has too few to judge; the tests then check
    /// what a busy host cannot move instead ([`Runs::busy_answers`]).
    fn clean(&self) -> bool {
        let mut clean = true;
        for run in [&self.base, &self.rerun] {
            let r = results_of(run);
            busy_verdict_holds(&r, run);
            if clean_rounds(&r) < MIN_ROUNDS {
                eprintln!(
                    "{}: the host was busy in too many rounds to judge the speed figures \
                     (fewest clean rounds of a cell {}, compare needs {MIN_ROUNDS}); checking \
                     the figures a busy host cannot move and the busy verdict instead\n{}",
                    run.display(),
                    clean_rounds(&r),
                    rounds_of(run)
                );
                clean = false;
            }
        }
        clean
    }

    /// The known answers a busy host cannot move, from every round (left
    /// out or not): the server's CPU time per request, read from its
    /// cgroup. The fixture burns 400, 500 and 404 µs of its own thread's
    /// CPU time per request, so however much other work shares the cores,
    /// `slow` costs (500 + b) / (400 + b) of `plainfw` (b, the rest of a
    /// request's CPU: ×1.15–×1.25 as in the clean case, ±5%) and `slight`
    /// within a few percent of it, in each run and across them.
    fn busy_answers(&self) {
        let cpu = |run: &Path, fw: &str| -> f64 {
            let r = results_of(run);
            let c = r.cells.iter().find(|c| c.key.framework == fw).unwrap();
            let mut v: Vec<f64> = c
                .rounds
                .iter()
                .filter_map(|x| x.server.cpu_us_per_request)
                .collect();
            assert!(
                !v.is_empty(),
                "{fw}: no CPU per request\n{}",
                rounds_of(run)
            );
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        for (what, base, new) in [
            ("in the first run", &self.base, &self.base),
            ("in the rerun", &self.rerun, &self.rerun),
            ("across runs", &self.base, &self.rerun),
        ] {
            let slow = cpu(new, "slow") / cpu(base, "plainfw");
            let slight = cpu(new, "slight") / cpu(base, "plainfw");
            eprintln!("busy host, {what}: CPU/request slow ×{slow:.3}, slight ×{slight:.3}");
            assert!(
                (1.15 / 1.05..1.25 * 1.05).contains(&slow),
                "{what}: 500 vs 400 µs burned per request reads ×{slow:.3}\n{}",
                self.evidence()
            );
            assert!(
                (0.97..1.05).contains(&slight),
                "{what}: 404 vs 400 µs burned per request reads ×{slight:.3}\n{}",
                self.evidence()
            );
        }
    }
}

/// Assert every row of `cmp` is one of `allowed` (`what` says which
/// comparison, for the failure).
fn assert_calls(what: &str, cmp: &Comparison, allowed: &[Call]) {
    assert!(
        cmp.rows.iter().all(|x| allowed.contains(&x.call)),
        "{what}:\n{}",
        show(cmp)
    );
}

/// The gates' busy verdict, round by round: left out as busy exactly when
/// its host reading (other processes' CPU and the hypervisor's steal) is
/// above the limit, the reading in the reason.
fn busy_verdict_holds(r: &Results, run: &Path) {
    for c in &r.cells {
        for x in &c.rounds {
            let reading = x.host.as_ref().map(|h| h.not_ours_cores());
            let flagged = c.verdict.reasons.iter().find_map(|reason| match reason {
                Reason::HostBusy {
                    round,
                    foreign_cores,
                    ..
                } if *round == x.index => Some(*foreign_cores),
                _ => None,
            });
            let over = reading.is_some_and(|v| v > QUIET_CORES);
            assert_eq!(
                over,
                flagged.is_some(),
                "{} round {}: host reading {reading:?} cores (limit {QUIET_CORES}), busy verdict {flagged:?}\n{}",
                c.key.framework,
                x.index + 1,
                rounds_of(run)
            );
        }
    }
}

/// The runs every test here compares, measured once per process.
fn runs() -> &'static Runs {
    static RUNS: OnceLock<Runs> = OnceLock::new();
    RUNS.get_or_init(|| {
        // Kept under target/ (not a temp dir a static could never remove),
        // replaced on the next run of these tests.
        let dir = root().join("target/compare-docker");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        plainfw_variant(&dir, "plainfw", &[("PLAINFW_BURN_US", "400")]);
        plainfw_variant(&dir, "slow", &[("PLAINFW_BURN_US", "500")]);
        plainfw_variant(&dir, "slight", &[("PLAINFW_BURN_US", "404")]);
        let same = profile(ROUNDS, "2s", 1, "plainfw, slow, slight");
        let min = MIN_ROUNDS;
        Runs {
            base: measure(&dir, "known", "base", &same, min),
            rerun: measure(&dir, "known", "rerun", &same, min),
            // Another profile: shorter window, pipelined load, one round.
            other_profile: measure(&dir, "other", "other", &profile(1, "1s", 2, "plainfw"), 0),
        }
    })
}

/// `fairground compare BASE NEW --json ARGS…`: the exit code and the document.
fn compare(base: String, new: String, extra: &[&str]) -> (i32, Comparison) {
    let mut args = vec!["compare", &base, &new, "--json"];
    args.extend_from_slice(extra);
    let o = fairground(&args).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let cmp = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&o.stderr)));
    (o.status.code().unwrap(), cmp)
}

fn at(run: &Path, framework: &str) -> String {
    format!("{}:{framework}", run.display())
}

/// Every row as one line, for failure messages and the test log, after
/// what the calibration probe said of each cell's machine.
fn show(cmp: &Comparison) -> String {
    let mut machine: Vec<String> = Vec::new();
    for r in &cmp.rows {
        let line = match r.machine {
            Some(m) => format!(
                "machine {}: exchange ×{:.3} (×{:.3}–×{:.3}), widened by {:.1}%",
                r.cell,
                m.exchange.ratio,
                m.exchange.low,
                m.exchange.high,
                m.widened_by * 100.0
            ),
            None => format!("machine {}: not probed", r.cell),
        };
        if !machine.contains(&line) {
            machine.push(line);
        }
    }
    machine
        .into_iter()
        .chain(cmp.rows.iter().map(|r| {
            format!(
                "{} {} {}: ratio {:?} interval {:?} band {:?} rounds {}/{} ({})",
                r.call.word(),
                r.cell,
                r.metric.label(),
                r.ratio,
                r.interval.map(|i| (i.low, i.high)),
                r.band,
                r.base.rounds,
                r.new.rounds,
                r.why
            )
        }))
        .collect::<Vec<_>>()
        .join("\n")
}

fn skip(test: &str) -> bool {
    !docker_or_skip(test)
}

#[test]
fn one_run_ranks_the_quarter_slower_copy_apart_and_the_one_percent_copy_beside_the_first() {
    if skip("one_run_ranks_the_quarter_slower_copy_apart_and_the_one_percent_copy_beside_the_first")
    {
        return;
    }
    let r = runs();
    if !r.clean() {
        r.busy_answers();
        return;
    }
    for run in [&r.base, &r.rerun] {
        let results = results::from_json(
            &std::fs::read_to_string(run.join(results::RESULTS_FILE)).unwrap(),
            "results.json",
        )
        .unwrap();
        let rank = |fw: &str| {
            let c = results
                .cells
                .iter()
                .find(|c| c.key.framework == fw)
                .unwrap();
            let g = c.rank.clone().unwrap_or_else(|| panic!("{fw} has no rank"));
            eprintln!(
                "{}: {fw} {} of {} by {} (req/s {:?})",
                run.display(),
                g.label(),
                g.of,
                g.by,
                c.rounds
                    .iter()
                    .map(|x| x.throughput_rps)
                    .collect::<Vec<_>>()
            );
            (g.low, g.high, g.of)
        };
        // Every round was probed on the server's core through its 2 s
        // window, every 250 ms: about 8 samples inside it.
        for c in &results.cells {
            for x in &c.rounds {
                let m = x
                    .machine
                    .unwrap_or_else(|| panic!("{}: round {} unprobed", c.key.framework, x.index));
                assert!((6..=9).contains(&m.samples), "{m:?}");
                assert!(
                    m.exchange_ns_min <= m.exchange_ns && m.exchange_ns <= m.exchange_ns_max,
                    "{m:?}"
                );
            }
        }
        // 400 and 404 µs per request (1% apart) share places 1–2; 500 µs
        // (a fifth fewer req/s) is third, alone.
        assert_eq!(rank("plainfw"), (1, 2, 3), "{}", rounds_of(run));
        assert_eq!(rank("slight"), (1, 2, 3), "{}", rounds_of(run));
        assert_eq!(rank("slow"), (3, 3, 3), "{}", rounds_of(run));
        // results.md shows the groups.
        let md = std::fs::read_to_string(run.join("results.md")).unwrap();
        assert!(md.contains(" #1–2") && md.contains(" #3"), "{md}");
    }
}

#[test]
fn a_run_against_itself_and_against_a_rerun_is_within_noise() {
    if skip("a_run_against_itself_and_against_a_rerun_is_within_noise") {
        return;
    }
    let r = runs();
    let clean = r.clean();
    let (code, itself) = compare(
        r.base.display().to_string(),
        r.base.display().to_string(),
        &["--fail-on-regression"],
    );
    assert_eq!(code, 0, "{}", show(&itself));
    if !clean {
        // Too few quiet rounds to judge: compare must say so, never call a
        // change between a run and itself or its rerun.
        let quiet = [Call::WithinNoise, Call::Inconclusive];
        assert_calls("busy host, a run against itself", &itself, &quiet);
        let (code, aa) = compare(
            r.base.display().to_string(),
            r.rerun.display().to_string(),
            &["--fail-on-regression"],
        );
        eprintln!("busy host, A/A:\n{}", show(&aa));
        assert_eq!(code, 0, "{}", show(&aa));
        assert_calls("busy host, A/A", &aa, &quiet);
        r.busy_answers();
        return;
    }
    assert!(
        itself.rows.iter().all(|x| x.call == Call::WithinNoise),
        "{}",
        show(&itself)
    );

    let (code, aa) = compare(
        r.base.display().to_string(),
        r.rerun.display().to_string(),
        &["--fail-on-regression"],
    );
    eprintln!("A/A (base vs rerun):\n{}", show(&aa));
    assert_eq!(aa.rows.len(), 3 * Metric::ALL.len(), "{}", show(&aa));
    for row in &aa.rows {
        assert_eq!(
            row.call,
            Call::WithinNoise,
            "{}\n{}",
            show(&aa),
            r.evidence()
        );
    }
    assert_eq!(code, 0);
    // The A/A floor: the widest interval seen, per metric.
    for m in Metric::ALL {
        let widest = aa
            .rows
            .iter()
            .filter(|x| x.metric == m)
            .filter_map(|x| x.interval)
            .map(|i| (i.low, i.high))
            .max_by(|a, b| (a.1 / a.0).total_cmp(&(b.1 / b.0)))
            .unwrap();
        eprintln!(
            "A/A widest 95% interval, {}: ×{:.3}–×{:.3}",
            m.label(),
            widest.0,
            widest.1
        );
    }
}

#[test]
fn a_quarter_more_cpu_per_request_regresses_throughput_and_cpu() {
    if skip("a_quarter_more_cpu_per_request_regresses_throughput_and_cpu") {
        return;
    }
    let r = runs();
    if !r.clean() {
        // Too few quiet rounds for compare to judge: it must not call the
        // change an improvement or no change; the CPU per request still
        // shows it.
        let (_, cmp) = compare(at(&r.base, "plainfw"), at(&r.base, "slow"), &[]);
        eprintln!("busy host, 400 → 500 µs burn:\n{}", show(&cmp));
        assert_calls(
            "busy host, 400 → 500 µs burn",
            &cmp,
            &[Call::Regressed, Call::Inconclusive],
        );
        r.busy_answers();
        return;
    }
    for (what, base, new) in [
        ("in one run", at(&r.base, "plainfw"), at(&r.base, "slow")),
        ("across runs", at(&r.base, "plainfw"), at(&r.rerun, "slow")),
    ] {
        let (code, cmp) = compare(base, new, &["--fail-on-regression"]);
        eprintln!("400 → 500 µs burn, {what}:\n{}", show(&cmp));
        assert_eq!(
            code,
            6,
            "{what}: --fail-on-regression exits 6: {}",
            show(&cmp)
        );
        for m in [Metric::Throughput, Metric::CpuPerRequest] {
            let row = cmp.rows.iter().find(|x| x.metric == m).unwrap();
            assert_eq!(
                row.call,
                Call::Regressed,
                "{what}:\n{}\n{}",
                show(&cmp),
                r.evidence()
            );
            let i = row.interval.unwrap();
            assert!(
                i.high < 1.0 || i.low > 1.0,
                "{what}: the interval excludes 1: {}",
                show(&cmp)
            );
        }
        // 500 + baseline over 400 + baseline: between ×1.15 and ×1.25, on
        // a machine that ran as fast in both; across runs the probe may
        // show it did not, and then the answer moves by that much. The
        // figure is a measurement: its 95% interval must reach the known
        // range (CI once read ×1.265 in ×1.234–×1.296 on a host whose own
        // exchange rate wobbled by ×1.27), and the point may not stray
        // further than a few percent past it.
        let cpu = cmp
            .rows
            .iter()
            .find(|x| x.metric == Metric::CpuPerRequest)
            .unwrap();
        let moved = 1.0 + cpu.machine.map_or(0.0, |m| m.widened_by);
        let (low, high) = (1.15 / moved, 1.25 * moved);
        let i = cpu.interval.unwrap();
        assert!(
            i.low <= high && i.high >= low,
            "{what}: the CPU/request interval reaches ×{low:.3}–×{high:.3}: {}",
            show(&cmp)
        );
        assert!(
            (low / 1.05..high * 1.05).contains(&cpu.ratio.unwrap()),
            "{what}: {}",
            show(&cmp)
        );
    }
}

#[test]
fn a_one_percent_change_is_never_a_regression() {
    if skip("a_one_percent_change_is_never_a_regression") {
        return;
    }
    let r = runs();
    // On a busy host too: the rounds compare keeps may be few, but a 1%
    // change is never called a regression.
    r.clean();
    for (what, base, new) in [
        (
            "in the first run",
            at(&r.base, "plainfw"),
            at(&r.base, "slight"),
        ),
        (
            "in the rerun",
            at(&r.rerun, "plainfw"),
            at(&r.rerun, "slight"),
        ),
        (
            "across runs",
            at(&r.base, "plainfw"),
            at(&r.rerun, "slight"),
        ),
    ] {
        let (code, cmp) = compare(base, new, &["--fail-on-regression"]);
        eprintln!("400 → 404 µs burn, {what}:\n{}", show(&cmp));
        assert_eq!(code, 0, "{what}: {}", show(&cmp));
        for row in &cmp.rows {
            assert!(
                matches!(row.call, Call::WithinNoise | Call::Inconclusive),
                "{what}: {}",
                show(&cmp)
            );
        }
    }
}

#[test]
fn runs_of_different_profiles_are_refused_with_the_fields_named() {
    if skip("runs_of_different_profiles_are_refused_with_the_fields_named") {
        return;
    }
    let r = runs();
    let base = r.base.display().to_string();
    let other = r.other_profile.display().to_string();
    let o = fairground(&["compare", &base, &other]).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    for field in [
        "load.pipeline: BASE 1 vs NEW 2",
        "window.duration: BASE 2s vs NEW 1s",
    ] {
        assert!(stderr.contains(field), "{field} not named: {stderr}");
    }
    let (code, forced) = compare(base, other, &["--force"]);
    assert_eq!(code, 0);
    assert!(forced.forced && forced.rows.iter().all(|x| x.forced));
    // The one round of the other profile is too few for a verdict.
    assert!(
        forced.rows.iter().all(|x| x.call == Call::Inconclusive),
        "{}",
        show(&forced)
    );
}
