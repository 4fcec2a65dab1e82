//! Comparisons of synthetic runs built from the sample results: the known
//! answers of the method (a run against itself, a 25% slowdown, a 1% change
//! in noisy rounds, too few rounds) and the handling of rejected, flagged,
//! one-sided and forced cells.

use std::path::PathBuf;

use super::load::{LoadedSide, SideSpec};
use super::*;
use crate::exit::ExitCode;
use crate::results::{CellKey, Results};
use crate::testdata::{round, sample_results};

fn side(results: Results, framework: Option<&str>) -> LoadedSide {
    LoadedSide {
        spec: SideSpec {
            file: PathBuf::from(format!("{}/results.json", results.run_id)),
            framework: framework.map(str::to_string),
            protocol: None,
        },
        results,
    }
}

/// A one-cell run of `axum plaintext c=100` whose rounds do `rps` req/s
/// at `cpu_us` µs of CPU per request (one value per round).
fn one_cell(rps: &[f64], cpu_us: &[f64]) -> Results {
    let mut r = sample_results();
    r.cells
        .retain(|c| c.key.framework == "axum" && c.key.concurrency == 100);
    r.cells.truncate(1);
    let cell = &mut r.cells[0];
    cell.rounds = rps
        .iter()
        .zip(cpu_us)
        .enumerate()
        .map(|(i, (&v, &cpu))| {
            let mut x = round(i as u32, 100, v);
            x.server.cpu_us_per_request = Some(cpu);
            x
        })
        .collect();
    cell.verdict = crate::results::Verdict::from_reasons(vec![]);
    r
}

fn rows_of(cmp: &Comparison, metric: Metric) -> Vec<&Row> {
    cmp.rows.iter().filter(|r| r.metric == metric).collect()
}

#[test]
fn a_run_compared_with_itself_is_within_noise_everywhere() {
    let r = sample_results();
    let cmp = compare(&side(r.clone(), None), &side(r, None), false).unwrap();
    assert!(!cmp.rows.is_empty());
    for row in &cmp.rows {
        assert_eq!(row.call, Call::WithinNoise, "{row:?}");
        assert!((row.ratio.unwrap() - 1.0).abs() < 1e-12);
        let i = row.interval.unwrap();
        assert!(i.low <= 1.0 && i.high >= 1.0, "{row:?}");
    }
    assert!(!cmp.any_regression());
    assert!(cmp.differences.is_empty() && !cmp.forced);
}

#[test]
fn rejected_cells_are_listed_with_their_reason_and_flagged_ones_compared() {
    let r = sample_results();
    let cmp = compare(&side(r.clone(), None), &side(r.clone(), None), false).unwrap();
    let rejected: Vec<&CellKey> = r
        .cells
        .iter()
        .filter(|c| c.verdict.status == crate::results::Status::Rejected)
        .map(|c| &c.key)
        .collect();
    assert_eq!(cmp.not_compared.len(), rejected.len());
    assert!(cmp
        .not_compared
        .iter()
        .all(|nc| !nc.reasons.is_empty() && !nc.newly_rejected));
    let oom = cmp
        .not_compared
        .iter()
        .find(|nc| {
            nc.cell.base_framework == "express"
                && nc.cell.concurrency == 10_000
                && nc.cell.scenario == crate::contract::Scenario::Json
        })
        .expect("the OOM-killed cell is not compared");
    assert!(
        oom.reasons.iter().any(|w| w.contains("OOM")),
        "{:?}",
        oom.reasons
    );
    // axum plaintext c=10000 is flagged client-bound in the sample: compared,
    // flag kept on both sides.
    let flagged = cmp
        .rows
        .iter()
        .find(|row| {
            row.cell.base_framework == "axum"
                && row.cell.concurrency == 10_000
                && row.cell.scenario == crate::contract::Scenario::Plaintext
        })
        .expect("the flagged cell is compared");
    assert_eq!(flagged.base_flags, ["client-bound"]);
    assert_eq!(flagged.new_flags, ["client-bound"]);
}

#[test]
fn a_quarter_slower_server_regresses_on_throughput_and_cpu_per_request() {
    // Rounds 3–4% apart, as on a quiet 2-core machine.
    let base = one_cell(&[2400.0, 2330.0, 2450.0], &[410.0, 415.0, 408.0]);
    let new = one_cell(&[1940.0, 1890.0, 1975.0], &[512.0, 520.0, 509.0]);
    let cmp = compare(&side(base, None), &side(new, None), false).unwrap();
    for metric in [Metric::Throughput, Metric::CpuPerRequest] {
        let row = rows_of(&cmp, metric)[0];
        assert_eq!(row.call, Call::Regressed, "{row:?}");
        let i = row.interval.unwrap();
        assert!(
            i.high < 1.0 || i.low > 1.0,
            "the interval excludes 1: {row:?}"
        );
    }
    let tput = rows_of(&cmp, Metric::Throughput)[0];
    assert!((tput.ratio.unwrap() - 0.805).abs() < 0.01, "{tput:?}");
    // Regressions come first.
    assert_eq!(cmp.rows[0].call, Call::Regressed);
    assert!(cmp.any_regression());
}

/// `results` with every round probed at `exchange_ns`.
fn probed(mut results: Results, exchange_ns: &[f64]) -> Results {
    for c in &mut results.cells {
        for (r, &ex) in c.rounds.iter_mut().zip(exchange_ns) {
            r.machine = Some(crate::results::MachineSpeed {
                core: 1,
                samples: 40,
                exchange_ns: ex,
                exchange_ns_min: ex * 0.9,
                exchange_ns_max: ex * 1.1,
            });
        }
    }
    results
}

#[test]
fn a_slower_machine_widens_the_band_of_what_it_moves_and_says_so() {
    // CPU per request 6% higher in NEW with rounds within 1.5%: named a
    // regression on a steady machine…
    let (b_rps, n_rps) = ([2400.0, 2380.0, 2410.0], [2260.0, 2250.0, 2270.0]);
    let (b_cpu, n_cpu) = ([420.0, 424.0, 418.0], [446.0, 449.0, 444.0]);
    let steady = [5_000.0, 5_040.0, 4_980.0];
    let cmp = compare(
        &side(probed(one_cell(&b_rps, &b_cpu), &steady), None),
        &side(probed(one_cell(&n_rps, &n_cpu), &steady), None),
        false,
    )
    .unwrap();
    let cpu = rows_of(&cmp, Metric::CpuPerRequest)[0];
    assert_eq!(cpu.call, Call::Regressed, "{cpu:?}");
    assert_eq!(cpu.machine.unwrap().widened_by, 0.0);
    assert!(cmp.machine_changes().is_empty());

    // …but not when the probe says the machine's kernel path itself ran
    // 20% slower in NEW's rounds: that much may be the machine's.
    let slowed = [6_000.0, 6_040.0, 5_980.0];
    let cmp = compare(
        &side(probed(one_cell(&b_rps, &b_cpu), &steady), None),
        &side(probed(one_cell(&n_rps, &n_cpu), &slowed), None),
        false,
    )
    .unwrap();
    for metric in [
        Metric::Throughput,
        Metric::CpuPerRequest,
        Metric::LatencyP99,
    ] {
        let row = rows_of(&cmp, metric)[0];
        assert_eq!(row.call, Call::WithinNoise, "{row:?}");
        let m = row.machine.unwrap();
        assert!((m.exchange.ratio - 1.2).abs() < 0.01, "{m:?}");
        assert!(m.widened_by > 0.15 && m.widened_by < 0.2, "{m:?}");
        assert!(row.band.unwrap() > m.widened_by, "{row:?}");
        assert!(
            row.why.contains("the machine itself ran slower"),
            "{}",
            row.why
        );
    }
    // Memory and bytes on the wire are not the machine's to move.
    for metric in [Metric::MemoryUnderLoad, Metric::WireBytes] {
        let row = rows_of(&cmp, metric)[0];
        assert!(row.band.unwrap() < 0.15, "{row:?}");
    }
    assert_eq!(cmp.machine_changes().len(), 1);
    let text = String::from_utf8(to_terminal(&cmp, false)).unwrap();
    assert!(text.contains("a loopback exchange: ×1.200"), "{text}");
    let md = String::from_utf8(to_markdown(&cmp)).unwrap();
    assert!(md.contains("**Machine:**"), "{md}");

    // A 25% change on that machine is still named.
    let cmp = compare(
        &side(probed(one_cell(&b_rps, &b_cpu), &steady), None),
        &side(
            probed(
                one_cell(&[1930.0, 1900.0, 1920.0], &[525.0, 530.0, 522.0]),
                &slowed,
            ),
            None,
        ),
        false,
    )
    .unwrap();
    assert_eq!(
        rows_of(&cmp, Metric::CpuPerRequest)[0].call,
        Call::Regressed
    );
}

#[test]
fn across_two_runs_a_change_smaller_than_their_measured_drift_is_not_named() {
    // 6% more CPU per request, rounds within 1.5%: named inside one run…
    let base = one_cell(&[2400.0, 2380.0, 2410.0], &[420.0, 424.0, 418.0]);
    let new = one_cell(&[2260.0, 2250.0, 2270.0], &[446.0, 449.0, 444.0]);
    let cmp = compare(&side(base.clone(), None), &side(new.clone(), None), false).unwrap();
    assert_eq!(
        rows_of(&cmp, Metric::CpuPerRequest)[0].call,
        Call::Regressed
    );
    // …but two runs of one server drift apart by that much (A/A across
    // runs), so across runs it is within noise, and the band says 8%.
    let mut rerun = new;
    rerun.run_id = "20261130T000000Z-sample".into();
    let cmp = compare(&side(base.clone(), None), &side(rerun, None), false).unwrap();
    for metric in [Metric::Throughput, Metric::CpuPerRequest] {
        let row = rows_of(&cmp, metric)[0];
        assert_eq!(row.call, Call::WithinNoise, "{row:?}");
        assert!((row.band.unwrap() - 0.08).abs() < 1e-9, "{row:?}");
    }
    assert!((rows_of(&cmp, Metric::LatencyP99)[0].band.unwrap() - 0.25).abs() < 1e-9);
    // A quarter more is named across runs too.
    let mut slower = one_cell(&[1930.0, 1900.0, 1920.0], &[525.0, 530.0, 522.0]);
    slower.run_id = "20261130T000000Z-sample".into();
    let cmp = compare(&side(base, None), &side(slower, None), false).unwrap();
    assert_eq!(
        rows_of(&cmp, Metric::CpuPerRequest)[0].call,
        Call::Regressed
    );
    assert_eq!(rows_of(&cmp, Metric::Throughput)[0].call, Call::Regressed);
}

#[test]
fn a_one_percent_change_in_noisy_rounds_is_never_a_regression() {
    // Rounds scattered by ±5–10% (normal on a shared machine); NEW is the
    // same scatter 1% down and 1% more CPU.
    let rps = [2400.0, 2180.0, 2560.0];
    let cpu = [410.0, 432.0, 398.0];
    let base = one_cell(&rps, &cpu);
    let new = one_cell(&rps.map(|v| v * 0.99), &cpu.map(|v| v * 1.01));
    let cmp = compare(&side(base, None), &side(new, None), false).unwrap();
    for row in &cmp.rows {
        assert!(
            matches!(row.call, Call::WithinNoise | Call::Inconclusive),
            "{row:?}"
        );
    }
}

#[test]
fn a_one_percent_change_measured_precisely_is_still_within_noise() {
    // CPU per request on a quiet host: rounds within 0.15% of each other,
    // NEW burns 404 instead of 400 µs (+0.94% with the baseline).
    let cpu = [426.0, 426.4, 425.8];
    let base = one_cell(&[2340.0, 2338.0, 2343.0], &cpu);
    let new = one_cell(&[2320.0, 2318.0, 2322.0], &cpu.map(|v| v * 1.0094));
    let cmp = compare(&side(base, None), &side(new, None), false).unwrap();
    let row = rows_of(&cmp, Metric::CpuPerRequest)[0];
    assert_eq!(row.call, Call::WithinNoise, "{row:?}");
    assert_eq!(row.band, Some(super::verdict::MIN_BAND));
    assert!(
        row.interval.unwrap().low > 1.0,
        "significant, but below the floor: {row:?}"
    );
}

#[test]
fn fewer_than_three_rounds_is_inconclusive_with_the_counts() {
    let base = one_cell(&[2400.0, 2330.0], &[410.0, 415.0]);
    let new = one_cell(&[1200.0, 1100.0, 1150.0], &[800.0, 810.0, 790.0]);
    let cmp = compare(&side(base, None), &side(new, None), false).unwrap();
    for row in &cmp.rows {
        assert_eq!(row.call, Call::Inconclusive, "{row:?}");
        assert!(
            row.why.contains("2 round(s) in BASE and 3 in NEW"),
            "{}",
            row.why
        );
        assert!(row.interval.is_none() && row.band.is_none());
        assert!(row.ratio.is_some(), "the ratio is still shown");
    }
}

#[test]
fn a_constant_figure_that_changes_is_an_exact_change() {
    // Wire bytes do not vary between rounds: 130 → 131 B is real.
    let base = one_cell(&[2400.0, 2330.0, 2450.0], &[410.0, 415.0, 408.0]);
    let mut new = base.clone();
    for r in &mut new.cells[0].rounds {
        r.wire_bytes_per_response = Some(131.0);
    }
    let cmp = compare(&side(base, None), &side(new, None), false).unwrap();
    let row = rows_of(&cmp, Metric::WireBytes)[0];
    assert_eq!(row.call, Call::Regressed, "{row:?}");
    let i = row.interval.unwrap();
    assert!(
        (i.low - 131.0 / 130.0).abs() < 1e-12 && i.low == i.high,
        "{i:?}"
    );
    assert_eq!(i.df, None, "no variance, no degrees of freedom");
}

#[test]
fn differing_runs_are_refused_naming_the_fields_unless_forced() {
    let base = sample_results();
    let mut new = sample_results();
    new.profile.load.pipeline = 16;
    let mut base2 = base.clone();
    base2.profile.load.pipeline = 1;
    let err = compare(&side(base2.clone(), None), &side(new.clone(), None), false).unwrap_err();
    assert_eq!(crate::cli::exit_code(&err), ExitCode::BadInput);
    let text = format!("{err:#}");
    assert!(text.contains("load.pipeline: BASE 1 vs NEW 16"), "{text}");

    let cmp = compare(&side(base2, None), &side(new, None), true).unwrap();
    assert!(cmp.forced);
    assert!(cmp.rows.iter().all(|r| r.forced));
    let table = String::from_utf8(to_terminal(&cmp, false)).unwrap();
    assert!(table.contains("within noise †"), "{table}");
}

#[test]
fn a_different_loader_build_of_the_same_version_is_refused() {
    let base = sample_results();
    let mut new = sample_results();
    new.loader_images = vec!["fairground/fairground:0123456789ab".into()];
    let err = compare(&side(base, None), &side(new, None), false).unwrap_err();
    let text = format!("{err:#}");
    assert!(
        text.contains("loader build (fairground image): BASE fairground/fairground:5dd704e0670d vs NEW fairground/fairground:0123456789ab"),
        "{text}"
    );
}

#[test]
fn one_sided_cells_are_listed_and_newly_rejected_ones_count_as_regressions() {
    let base = sample_results();
    let mut new = sample_results();
    let gone = new
        .cells
        .iter()
        .position(|c| c.key.framework == "axum" && c.key.concurrency == 100)
        .unwrap();
    let gone_key = new.cells.remove(gone).key;
    // NEW's express plaintext c=100 now crashes.
    let crash = new
        .cells
        .iter_mut()
        .find(|c| {
            c.key.framework == "express"
                && c.key.concurrency == 100
                && c.key.scenario == crate::contract::Scenario::Plaintext
        })
        .unwrap();
    crash.verdict = crate::results::Verdict::from_reasons(vec![crate::results::Reason::Crashed {
        restarts: 1,
    }]);
    let cmp = compare(&side(base, None), &side(new, None), false).unwrap();
    assert_eq!(cmp.only_in_base.len(), 1);
    assert_eq!(cmp.only_in_base[0].scenario, gone_key.scenario);
    assert!(cmp.only_in_new.is_empty());
    assert_eq!(cmp.summary.newly_rejected, 1);
    assert!(cmp.any_regression());
    let md = String::from_utf8(to_markdown(&cmp)).unwrap();
    assert!(md.contains("NEW rejects what BASE measured"), "{md}");
    assert!(md.contains("Only in BASE"), "{md}");
}

#[test]
fn two_frameworks_of_one_run_are_compared_cell_by_cell() {
    let r = sample_results();
    let cmp = compare(
        &side(r.clone(), Some("axum")),
        &side(r, Some("express")),
        false,
    )
    .unwrap();
    // express does about 15% of axum's req/s in the sample.
    let tput = rows_of(&cmp, Metric::Throughput);
    assert!(!tput.is_empty());
    for row in tput {
        assert_eq!(row.cell.base_framework, "axum");
        assert_eq!(row.cell.new_framework, "express");
        assert_eq!(row.call, Call::Regressed, "{row:?}");
    }
    let table = String::from_utf8(to_terminal(&cmp, false)).unwrap();
    assert!(table.contains("axum→express plaintext c=100"), "{table}");
}

#[test]
fn two_frameworks_of_an_interleaved_run_are_judged_block_by_block() {
    // Six blocks in which the machine ran at these speeds; `b` does 8% more
    // than `a` in every block, give or take 0.5%.
    let blocks = [1.0, 0.85, 1.1, 0.95, 1.05, 0.9];
    let jitter = [1.0, 1.005, 0.997, 1.002, 0.999, 1.003];
    let a: Vec<f64> = blocks.iter().map(|f| 2000.0 * f).collect();
    let b: Vec<f64> = blocks
        .iter()
        .zip(jitter)
        .map(|(f, j)| 2160.0 * f * j)
        .collect();
    let mut r = one_cell(&a, &[400.0; 6]);
    let mut other = one_cell(&b, &[400.0; 6]).cells.remove(0);
    other.key.framework = "b".into();
    r.cells.push(other);
    let judge = |r: &Results| {
        let cmp = compare(
            &side(r.clone(), Some("axum")),
            &side(r.clone(), Some("b")),
            false,
        )
        .unwrap();
        let row = rows_of(&cmp, Metric::Throughput)[0].clone();
        (row, cmp.method.interval.clone())
    };
    // Rounds back to back: each side's rounds carry the machine's drift
    // (±13%), which Welch's interval and the band count on both sides.
    r.profile.interleave_rounds = false;
    let (row, method) = judge(&r);
    assert_eq!(row.call, Call::WithinNoise, "{row:?}");
    assert!(method.starts_with("Welch"), "{method}");
    // Interleaved: the drift is shared by each block and cancels.
    r.profile.interleave_rounds = true;
    let (row, method) = judge(&r);
    assert_eq!(row.call, Call::Improved, "{row:?}");
    assert!(method.starts_with("paired"), "{method}");
    let i = row.interval.unwrap();
    assert!(i.low > 1.07 && i.high < 1.09, "{i:?}");
    assert!(row.band.unwrap() < 0.02, "{row:?}");
}

#[test]
fn outputs_are_deterministic_and_coloured_only_when_asked() {
    let base = one_cell(&[2400.0, 2330.0, 2450.0], &[410.0, 415.0, 408.0]);
    let new = one_cell(&[1940.0, 1890.0, 1975.0], &[512.0, 520.0, 509.0]);
    let a = compare(&side(base.clone(), None), &side(new.clone(), None), false).unwrap();
    let b = compare(&side(base, None), &side(new, None), false).unwrap();
    assert_eq!(to_json(&a).unwrap(), to_json(&b).unwrap());
    let plain = String::from_utf8(to_terminal(&a, false)).unwrap();
    assert!(!plain.contains('\x1b'), "{plain}");
    assert!(String::from_utf8(to_terminal(&a, true))
        .unwrap()
        .contains("\x1b[31mregressed"));
    // The first table row (after the header) is a regression.
    let first = plain
        .lines()
        .skip_while(|l| !l.starts_with("verdict"))
        .nth(1)
        .unwrap();
    assert!(first.starts_with("regressed"), "{plain}");
}

#[test]
fn rounds_measured_on_a_busy_host_are_left_out() {
    let base = one_cell(&[2400.0, 2330.0, 2450.0], &[410.0, 415.0, 408.0]);
    let mut new = one_cell(&[1400.0, 1390.0, 2375.0], &[470.0, 480.0, 412.0]);
    let busy = |round| crate::results::Reason::HostBusy {
        round,
        foreign_cores: 1.4,
        limit: 0.5,
        softirq_cores: 0.0,
        steal_cores: 0.0,
    };
    new.cells[0].verdict = crate::results::Verdict::from_reasons(vec![busy(0), busy(1)]);
    let cmp = compare(&side(base, None), &side(new, None), false).unwrap();
    for row in &cmp.rows {
        assert_eq!(row.call, Call::Inconclusive, "{row:?}");
        assert_eq!((row.new.rounds, row.new.rounds_left_out), (1, 2));
        assert!(
            row.why
                .contains("measured on a busy host or a slowed machine were left out"),
            "{}",
            row.why
        );
        assert_eq!(row.new_flags, ["host busy"]);
    }
    let table = String::from_utf8(to_terminal(&cmp, false)).unwrap();
    assert!(
        table.contains("inconclusive:\n  axum plaintext c=100: 3 round(s) in BASE and 1 in NEW"),
        "{table}"
    );
}

/// Draws of the method on simulated rounds (normal noise on the logs, from
/// a seeded generator): how often it names a change that is not there, and
/// how often it finds one that is. docs/compare.md quotes these rates.
mod simulated {
    use rand::{Rng, SeedableRng};

    use super::super::stats::{estimate, Sample};
    use super::super::verdict::{band, judge};
    use super::*;

    const TRIALS: usize = 4000;

    fn normal(rng: &mut impl Rng) -> f64 {
        // Box–Muller.
        let (u, v): (f64, f64) = (rng.random::<f64>().max(1e-300), rng.random());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// Share of trials called regressed (or improved, for `improved`):
    /// `n` rounds a side, log-noise `sigma`, NEW shifted by `change`
    /// (a ratio of req/s) plus a drift between the runs drawn with `drift`.
    fn rate(n: usize, sigma: f64, change: f64, drift: f64, call: Call) -> f64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(12);
        let mut hits = 0;
        for _ in 0..TRIALS {
            let d = drift * normal(&mut rng);
            let base: Vec<f64> = (0..n)
                .map(|_| 1000.0 * (sigma * normal(&mut rng)).exp())
                .collect();
            let new: Vec<f64> = (0..n)
                .map(|_| 1000.0 * change * (d + sigma * normal(&mut rng)).exp())
                .collect();
            let e = estimate(&Sample::of_rounds(base), &Sample::of_rounds(new)).unwrap();
            if judge(Metric::Throughput, &e, band(&e, 0.0)).0 == call {
                hits += 1;
            }
        }
        hits as f64 / TRIALS as f64
    }

    #[test]
    fn an_unchanged_server_is_rarely_called_changed_even_with_drift_between_runs() {
        for (n, drift, limit) in [
            (3, 0.0, 0.01),
            (3, 0.05, 0.025),
            (5, 0.0, 0.01),
            (5, 0.05, 0.025),
        ] {
            let false_calls = rate(n, 0.05, 1.0, drift, Call::Regressed)
                + rate(n, 0.05, 1.0, drift, Call::Improved);
            eprintln!(
                "A/A, {n} rounds, noise 5%, drift {drift}: {:.2}% called changed",
                false_calls * 100.0
            );
            assert!(
                false_calls < limit,
                "{n} rounds, drift {drift}: {false_calls}"
            );
        }
        let one_percent = rate(3, 0.05, 0.99, 0.0, Call::Regressed);
        eprintln!(
            "1% slower, 3 rounds, noise 5%: {:.2}% called regressed",
            one_percent * 100.0
        );
        assert!(one_percent < 0.01, "{one_percent}");
    }

    #[test]
    fn a_quarter_slower_server_is_found_when_rounds_are_a_few_percent_apart() {
        for (n, sigma, at_least) in [(3, 0.03, 0.85), (5, 0.03, 0.95), (5, 0.05, 0.5)] {
            let found = rate(n, sigma, 0.8, 0.0, Call::Regressed);
            eprintln!(
                "20% fewer req/s, {n} rounds, noise {sigma}: found {:.1}%",
                found * 100.0
            );
            assert!(found >= at_least, "{n} rounds, noise {sigma}: {found}");
        }
        let noisy = rate(3, 0.10, 0.8, 0.0, Call::Regressed);
        eprintln!(
            "20% fewer req/s, 3 rounds, noise 10%: found {:.1}%",
            noisy * 100.0
        );
    }
}
