//! The machine's own speed on each side: the calibration probe
//! (`host::speed`, recorded per round as `results::MachineSpeed`), compared
//! like a metric. On a shared virtual machine the kernel's path or the CPU
//! can run slower for minutes with nothing else running; every framework's
//! requests then cost more. When the probe's interval says the machine
//! itself changed between BASE and NEW, a change of that size in the
//! figures the machine moves (req/s, latency, CPU per request) may be the
//! machine's, not the framework's: their noise band widens by it.

use super::model::{MachineDrift, ProbeRatio};
use super::stats;
use crate::results::{Cell, Round};

/// One side's per-round probe exchange over `cell`'s rounds not left out
/// (`skip`): none unless every such round was probed, so a side is never
/// judged by part of its rounds.
fn values(cell: &Cell, skip: &[u32]) -> Vec<f64> {
    let used: Vec<&Round> = cell
        .rounds
        .iter()
        .filter(|r| !skip.contains(&r.index))
        .collect();
    let v: Vec<f64> = used
        .iter()
        .filter_map(|r| r.machine.map(|m| m.exchange_ns))
        .collect();
    if v.len() == used.len() {
        v
    } else {
        Vec::new()
    }
}

fn ratio(base: Vec<f64>, new: Vec<f64>) -> Option<ProbeRatio> {
    let e = stats::estimate(
        &stats::Sample::of_rounds(base),
        &stats::Sample::of_rounds(new),
    )
    .ok()?;
    Some(ProbeRatio {
        ratio: e.ratio,
        low: e.low,
        high: e.high,
    })
}

/// The smallest change of the machine the interval allows, as a log
/// distance from ×1: 0 when the interval includes ×1.
fn least_change(r: &ProbeRatio) -> f64 {
    if r.low > 1.0 {
        r.low.ln()
    } else if r.high < 1.0 {
        -r.high.ln()
    } else {
        0.0
    }
}

/// The machine's change between the rounds of `b` and `n` that compare
/// uses (busy rounds left out), when both sides were probed in every
/// such round and have enough of them for an interval.
pub fn drift(b: &Cell, n: &Cell, skip_b: &[u32], skip_n: &[u32]) -> Option<MachineDrift> {
    let exchange = ratio(values(b, skip_b), values(n, skip_n))?;
    Some(MachineDrift {
        exchange,
        widened_by: least_change(&exchange).exp() - 1.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::MachineSpeed;

    fn cell(exchanges: &[f64]) -> Cell {
        let mut c = crate::testdata::sample_results().cells[0].clone();
        c.rounds = exchanges
            .iter()
            .enumerate()
            .map(|(i, &ex)| {
                let mut r = crate::testdata::round(i as u32, 100, 1000.0);
                r.machine = Some(MachineSpeed {
                    core: 1,
                    samples: 40,
                    exchange_ns: ex,
                    exchange_ns_min: ex * 0.9,
                    exchange_ns_max: ex * 1.1,
                });
                r
            })
            .collect();
        c
    }

    #[test]
    fn a_steady_machine_widens_nothing() {
        let d = drift(
            &cell(&[12_000.0, 12_300.0, 11_800.0, 12_100.0]),
            &cell(&[12_200.0, 11_900.0, 12_050.0, 12_150.0]),
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(d.widened_by, 0.0, "{d:?}");
    }

    #[test]
    fn a_machine_slower_by_a_third_widens_by_at_least_what_its_interval_allows() {
        let d = drift(
            &cell(&[12_000.0, 12_300.0, 11_800.0, 12_100.0]),
            &cell(&[16_000.0, 16_400.0, 15_800.0, 16_100.0]),
            &[],
            &[],
        )
        .unwrap();
        assert!((d.exchange.ratio - 1.333).abs() < 0.01, "{d:?}");
        assert!(d.exchange.low > 1.25 && d.exchange.low < 1.333, "{d:?}");
        assert!(
            (d.widened_by - (d.exchange.low - 1.0)).abs() < 1e-9,
            "{d:?}"
        );
    }

    #[test]
    fn a_side_probed_in_only_some_rounds_is_not_judged() {
        let mut n = cell(&[16_000.0, 16_400.0, 15_800.0, 16_100.0]);
        n.rounds[2].machine = None;
        let b = cell(&[12_000.0, 12_300.0, 11_800.0, 12_100.0]);
        assert_eq!(drift(&b, &n, &[], &[]), None);
        // Unless that round is left out anyway (measured on a busy host).
        assert!(drift(&b, &n, &[], &[2]).is_some());
    }
}
