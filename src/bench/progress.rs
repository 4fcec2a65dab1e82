//! Progress of a run for people: indicatif bars on a terminal (the whole run,
//! and the current round with its elapsed time and the loader's live
//! responses per second), plain lines otherwise (CI logs, pipes). Both are [`Observer`]s of the pipeline's events.
//!
//! Output goes to stderr; stdout stays free for what a command prints as its
//! result. This module formats; it decides nothing.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::docker_lab::{LiveSecond, LiveSink};
use super::execute::{Event, Observer};
use crate::report::fmt::thousands;
use crate::results::{Cell, Exclusion, Round, Status};

/// The line printed when a round is stored.
pub fn round_line(cell: &Cell, round: &Round) -> String {
    // Mid-run a cell is always short of rounds: that is not news here.
    let labels = cell.verdict.labels(false);
    let mark = match cell.verdict.status {
        Status::Accepted => String::new(),
        _ if labels.is_empty() => String::new(),
        s => format!(" [{s}: {}]", labels.join(", ")),
    };
    // The cell's headline precision so far: how far the rounds place it,
    // in the workload's words (rpc/s, msg/s).
    let precise = cell.precision.as_ref().map_or(String::new(), |p| {
        cell.key.scenario.in_own_words(&format!(
            "; {} {} after {} rounds (95% interval)",
            p.by,
            p.label(),
            p.rounds
        ))
    });
    let slowed = round.slowed.map_or(String::new(), |s| {
        format!(
            " (machine slowed: probe {} above the reference; left out)",
            crate::report::fmt::percent(s.slowdown())
        )
    });
    format!(
        "{} round {}/{}: {} {}, p99 {}, {} errors, {}/{} connections served{precise}{slowed}{mark}",
        cell.key,
        round.index + 1,
        cell.rounds_asked(),
        thousands(round.throughput_rps),
        cell.key.scenario.rate_unit(),
        round.latency.show(round.latency.p99_us),
        thousands(round.errors_total() as f64),
        round.connections.serving,
        round.connections.requested,
    )
}

/// The line printed when a framework's verification is done: which
/// scenarios were excluded and the check each failed, and plainly when
/// that was every one (nothing of the framework is then measured).
pub fn verified_line(name: &str, verified: usize, excluded: &[Exclusion]) -> String {
    if excluded.is_empty() {
        return format!("{name}: contract verified");
    }
    let each: Vec<String> = excluded
        .iter()
        .map(|e| {
            let what = if e.protocol.is_http1() {
                e.scenario.to_string()
            } else {
                format!("{} {}", e.scenario, e.protocol)
            };
            format!("{what} ({})", e.reason)
        })
        .collect();
    if excluded.len() >= verified {
        format!(
            "{name}: contract verification FAILED for every scenario ({} of {verified}), nothing \
             of {name} is measured: {}",
            excluded.len(),
            each.join("; ")
        )
    } else {
        format!(
            "{name}: contract verified, {} of {verified} scenario(s) excluded: {}",
            excluded.len(),
            each.join("; ")
        )
    }
}

fn text(event: &Event<'_>, total: usize) -> Option<String> {
    match event {
        Event::Framework {
            name,
            index,
            total: n,
        } => Some(format!("== {name} ({index}/{n})")),
        Event::Started {
            name,
            cold_start_ms,
        } => Some(match cold_start_ms {
            Some(ms) => format!("{name}: ready, cold start {ms:.0} ms"),
            None => format!("{name}: ready"),
        }),
        Event::Verified {
            name,
            verified,
            excluded,
        } => Some(verified_line(name, *verified, excluded)),
        Event::Step {
            key,
            round,
            done,
            again: None,
        } => Some(format!(
            "[{}/{total}] {key} round {} …",
            done + 1,
            round + 1
        )),
        Event::Step {
            key,
            round,
            again: Some(left),
            ..
        } => Some(format!(
            "[again] {key} round {} (round {} was left out: slowed machine or busy host) …",
            round + 1,
            left + 1
        )),
        Event::Stored { cell, round } => Some(round_line(cell, round)),
        Event::Incident(i) => Some(format!("{}: {}", i.framework, i.what)),
        Event::Budget(b) => Some(b.expectation()),
        Event::SatOut { round, names } => Some(format!(
            "block {}: {} sit{} out (the whole block does not fit in the budget; the least precise cells run)",
            round + 1,
            names.join(", "),
            if names.len() == 1 { "s" } else { "" }
        )),
        Event::Phases { name, phases } => Some(format!(
            "{name}: {:.1} s by phase (wall time): {}",
            phases.total_s(),
            phases.describe()
        )),
    }
}

/// Plain lines on stderr, one per event.
pub struct Lines {
    total: usize,
}

impl Observer for Lines {
    fn on(&mut self, event: &Event<'_>) {
        if let Some(t) = text(event, self.total) {
            eprintln!("{t}");
        }
    }
}

/// Two bars: the run (steps done of all) and the current round (elapsed
/// against the expected warm-up + window). Finished rounds print above them.
pub struct Bars {
    _multi: MultiProgress,
    run: ProgressBar,
    round: ProgressBar,
    step_time: Duration,
    /// The current round's description, which live figures are added to.
    now: Arc<Mutex<String>>,
}

impl Bars {
    fn new(total: usize, step_time: Duration) -> Bars {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let run = multi.add(ProgressBar::new(total as u64));
        run.set_style(
            ProgressStyle::with_template(
                "{prefix:>6} [{bar:30}] {pos}/{len} rounds, {elapsed} elapsed, ~{eta} left",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        run.set_prefix("run");
        let round = multi.add(ProgressBar::new_spinner());
        round.set_style(
            ProgressStyle::with_template("{prefix:>6} {spinner} {msg} {elapsed}")
                .expect("valid template"),
        );
        round.set_prefix("now");
        round.enable_steady_tick(Duration::from_millis(200));
        Bars {
            _multi: multi,
            run,
            round,
            step_time,
            now: Arc::default(),
        }
    }

    /// A sink that shows each second of the current round on its bar.
    fn live(&self) -> LiveSink {
        let (round, now) = (self.round.clone(), Arc::clone(&self.now));
        Arc::new(move |l: &LiveSecond| {
            let base = now.lock().map(|s| s.clone()).unwrap_or_default();
            round.set_message(format!("{base}: {}", live_text(l)));
        })
    }
}

/// One second of a round, for the bar: `measuring 52,310 req/s, 0 errors/s`.
pub fn live_text(l: &LiveSecond) -> String {
    format!(
        "{} {} resp/s, {} errors/s",
        if l.measuring {
            "measuring"
        } else {
            "warming up"
        },
        thousands(l.responses_per_s as f64),
        thousands(l.errors_per_s as f64)
    )
}

impl Observer for Bars {
    fn on(&mut self, event: &Event<'_>) {
        match event {
            Event::Step {
                key, round, done, ..
            } => {
                self.run.set_position(*done as u64);
                self.round.reset_elapsed();
                let base = format!(
                    "{key} round {} (up to {})",
                    round + 1,
                    humantime::format_duration(self.step_time)
                );
                self.round.set_message(base.clone());
                if let Ok(mut now) = self.now.lock() {
                    *now = base;
                }
            }
            Event::Stored { .. } => {
                self.run.inc(1);
                if let Some(t) = text(event, 0) {
                    self.run.println(t);
                }
            }
            other => {
                if let Some(t) = text(other, 0) {
                    self.run.println(t);
                }
            }
        }
    }
}

impl Drop for Bars {
    fn drop(&mut self) {
        self.round.finish_and_clear();
        self.run.finish();
    }
}

/// Bars when stderr is a terminal, with a sink for each second's live
/// figures; plain lines otherwise (a CI log gets one line per round, not one
/// per second).
pub fn for_stderr(
    total_steps: usize,
    step_time: Duration,
) -> (Box<dyn Observer>, Option<LiveSink>) {
    if std::io::stderr().is_terminal() {
        let bars = Bars::new(total_steps, step_time);
        let live = bars.live();
        (Box::new(bars), Some(live))
    } else {
        (Box::new(Lines { total: total_steps }), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::sample_results;

    #[test]
    fn verification_names_each_excluded_scenario_with_its_failed_check() {
        use crate::contract::{Protocol, Scenario};
        let ex = |scenario, protocol, reason: &str| Exclusion {
            scenario,
            protocol,
            reason: reason.into(),
        };
        assert_eq!(verified_line("axum", 3, &[]), "axum: contract verified");
        let some = [
            ex(
                Scenario::Json,
                Protocol::Http1,
                "GET /json answered `text/plain`",
            ),
            ex(Scenario::Plaintext, Protocol::H2c, "8 streams, 1 answered"),
        ];
        let line = verified_line("axum", 4, &some);
        assert_eq!(
            line,
            "axum: contract verified, 2 of 4 scenario(s) excluded: json (GET /json answered \
             `text/plain`); plaintext h2c (8 streams, 1 answered)"
        );
        let line = verified_line("axum", 2, &some);
        assert!(
            line.starts_with(
                "axum: contract verification FAILED for every scenario (2 of 2), nothing of axum \
                 is measured: json (GET /json"
            ),
            "{line}"
        );
    }

    #[test]
    fn live_text_says_which_phase_and_how_fast() {
        let l = LiveSecond {
            measuring: true,
            responses_per_s: 52_310,
            errors_per_s: 0,
        };
        assert_eq!(live_text(&l), "measuring 52,310 resp/s, 0 errors/s");
    }

    #[test]
    fn round_line_carries_units_and_the_verdict() {
        let r = sample_results();
        let cell = r
            .cells
            .iter()
            .find(|c| c.verdict.status == Status::Rejected)
            .unwrap();
        let line = round_line(cell, &cell.rounds[0]);
        assert!(line.contains("req/s") && line.contains("p99"), "{line}");
        assert!(line.contains("[rejected: connections short"), "{line}");
        let ok = &r.cells[0];
        assert!(!round_line(ok, &ok.rounds[0]).contains('['));

        // A gRPC cell's rate and its precision say rpc/s, not req/s.
        let mut rpc = ok.clone();
        rpc.key.scenario = crate::contract::Scenario::GrpcStream(100);
        rpc.precision = Some(crate::results::Precision {
            by: "req/s".into(),
            unit: "req/s".into(),
            confidence: 0.95,
            rounds: 4,
            low: 0.9,
            high: 1.1,
            reached: 0.1,
            asked: Some(0.02),
        });
        let line = round_line(&rpc, &rpc.rounds[0]);
        assert!(line.contains("rpc/s") && !line.contains("req/s"), "{line}");
    }
}
