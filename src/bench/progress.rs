//! Progress of a run for people: indicatif bars on a terminal (the whole run,
//! and the current round with its elapsed time), plain lines otherwise (CI
//! logs, pipes). Both are [`Observer`]s of the pipeline's events.
//!
//! Output goes to stderr; stdout stays free for what a command prints as its
//! result. This module formats; it decides nothing.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::execute::{Event, Observer};
use crate::report::fmt::{micros, thousands};
use crate::results::{Cell, Round, Status};

/// The line printed when a round is stored.
pub fn round_line(cell: &Cell, round: &Round) -> String {
    // Mid-run a cell is always short of rounds: that is not news here.
    let labels = cell.verdict.labels(false);
    let mark = match cell.verdict.status {
        Status::Accepted => String::new(),
        _ if labels.is_empty() => String::new(),
        s => format!(" [{s}: {}]", labels.join(", ")),
    };
    format!(
        "{} round {}/{}: {} req/s, p99 {}, {} errors, {}/{} connections{mark}",
        cell.key,
        round.index + 1,
        cell.rounds_planned,
        thousands(round.throughput_rps),
        micros(round.latency.p99_us as f64),
        thousands(round.errors_total() as f64),
        round.connections.established,
        round.connections.requested,
    )
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
        Event::Verified { name, excluded } => Some(if *excluded == 0 {
            format!("{name}: contract verified")
        } else {
            format!("{name}: contract verified, {excluded} scenario(s) excluded")
        }),
        Event::Step { key, round, done } => Some(format!(
            "[{}/{total}] {key} round {} …",
            done + 1,
            round + 1
        )),
        Event::Stored { cell, round } => Some(round_line(cell, round)),
        Event::Incident(i) => Some(format!("{}: {}", i.framework, i.what)),
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
        }
    }
}

impl Observer for Bars {
    fn on(&mut self, event: &Event<'_>) {
        match event {
            Event::Step { key, round, done } => {
                self.run.set_position(*done as u64);
                self.round.reset_elapsed();
                self.round.set_message(format!(
                    "{key} round {} (up to {})",
                    round + 1,
                    humantime::format_duration(self.step_time)
                ));
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

/// Bars when stderr is a terminal, plain lines otherwise.
pub fn for_stderr(total_steps: usize, step_time: Duration) -> Box<dyn Observer> {
    if std::io::stderr().is_terminal() {
        Box::new(Bars::new(total_steps, step_time))
    } else {
        Box::new(Lines { total: total_steps })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testdata::sample_results;

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
    }
}
