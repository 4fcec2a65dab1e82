//! Where a run's wall time went: seconds per phase, per framework and for
//! the whole run, as the orchestrator timed them (CLOCK_MONOTONIC, wall time
//! between the calls that begin and end each phase; the loader's own phases
//! from the instants in its report).
//!
//! This module owns the types and their sums; it measures nothing (that is
//! `bench::execute` and the lab) and judges nothing. docs/results.md says
//! what each phase covers.

use serde::{Deserialize, Serialize};

/// Seconds spent in each phase of running frameworks. A framework's facts
/// sum its own (every start, every round); the run's sum every framework's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhaseTimes {
    /// Creating and starting server containers (the daemon's create + start).
    pub start_s: f64,
    /// From a server container's start to its first 200 on the readiness path.
    pub readiness_s: f64,
    /// Idle settle before the idle memory is read, and that reading.
    pub settle_s: f64,
    /// Contract verification.
    pub verify_s: f64,
    /// From asking for a loader container to the loader's first connect:
    /// the daemon's create + start and the process start (with a remote
    /// daemon, whose clock differs, all loader overhead is in `loader_exit_s`).
    pub loader_start_s: f64,
    /// From the loader's first connect to every connection being open.
    pub connect_s: f64,
    /// Warm-up, as the loader timed it.
    pub warmup_s: f64,
    /// Measured windows, as the loader timed them.
    pub window_s: f64,
    /// Drains after the windows (requests of the window still in flight).
    pub drain_s: f64,
    /// From the end of a loader's drain to the orchestrator having its
    /// report: the process exit, the daemon's wait and log read.
    pub loader_exit_s: f64,
    /// After a loader exited: the last cgroup samples, the server's state.
    pub sampling_s: f64,
    /// Stopping and removing server containers, keeping their logs.
    pub teardown_s: f64,
    /// Everything else between the phases above: storing results.json,
    /// judging cells.
    pub between_s: f64,
}

impl PhaseTimes {
    /// Add `other`'s seconds to these.
    pub fn add(&mut self, other: &PhaseTimes) {
        self.start_s += other.start_s;
        self.readiness_s += other.readiness_s;
        self.settle_s += other.settle_s;
        self.verify_s += other.verify_s;
        self.loader_start_s += other.loader_start_s;
        self.connect_s += other.connect_s;
        self.warmup_s += other.warmup_s;
        self.window_s += other.window_s;
        self.drain_s += other.drain_s;
        self.loader_exit_s += other.loader_exit_s;
        self.sampling_s += other.sampling_s;
        self.teardown_s += other.teardown_s;
        self.between_s += other.between_s;
    }

    /// Every phase's seconds added up.
    pub fn total_s(&self) -> f64 {
        self.start_s
            + self.readiness_s
            + self.settle_s
            + self.verify_s
            + self.loader_start_s
            + self.connect_s
            + self.warmup_s
            + self.window_s
            + self.drain_s
            + self.loader_exit_s
            + self.sampling_s
            + self.teardown_s
            + self.between_s
    }

    /// Warm-up plus window: the time load was meant to take.
    pub fn load_s(&self) -> f64 {
        self.warmup_s + self.window_s
    }

    /// The phases by name, in the order they happen, for the run log.
    pub fn named(&self) -> [(&'static str, f64); 13] {
        [
            ("start", self.start_s),
            ("readiness", self.readiness_s),
            ("settle", self.settle_s),
            ("verify", self.verify_s),
            ("loader start", self.loader_start_s),
            ("connect", self.connect_s),
            ("warm-up", self.warmup_s),
            ("window", self.window_s),
            ("drain", self.drain_s),
            ("loader exit", self.loader_exit_s),
            ("sampling", self.sampling_s),
            ("teardown", self.teardown_s),
            ("between", self.between_s),
        ]
    }

    /// `start 0.21 s, readiness 0.35 s, …` (phases that took no time left out).
    pub fn describe(&self) -> String {
        self.named()
            .iter()
            .filter(|(_, s)| *s > 0.0)
            .map(|(n, s)| format!("{n} {s:.2} s"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The run's clock: what users wait for before and between measurements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunTiming {
    /// Judging the environment (preflight, including any wait for it to
    /// become quiet), seconds.
    pub preflight_s: f64,
    /// Checking (and if needed building) every image, seconds: before the
    /// first server, plus each framework's image built just before its
    /// first server.
    pub image_check_s: f64,
    /// The part of `image_check_s` spent after the first round (images of
    /// later frameworks), which `first_round_to_end_s` holds too, seconds.
    #[serde(default)]
    pub builds_after_first_round_s: f64,
    /// The host's 1-minute load average right after the last image built
    /// during the run, if one was: the after-run load check starts from the
    /// higher of it and the load before the run, so the run's own builds
    /// are not taken for other work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_after_builds: Option<f64>,
    /// From the run's start to its first loader being asked for, seconds.
    pub to_first_round_s: f64,
    /// From the first loader being asked for to the end of the last
    /// framework's teardown, seconds.
    pub first_round_to_end_s: f64,
    /// Every framework's phases added up (this invocation only, when resumed).
    pub phases: PhaseTimes,
}

impl RunTiming {
    /// `first_round_to_end_s` (less the image builds inside it) over the
    /// warm-up and window time inside it: 1.0 would be a run that did
    /// nothing but load.
    pub fn overhead_ratio(&self) -> Option<f64> {
        let load = self.phases.load_s();
        let spent = self.first_round_to_end_s - self.builds_after_first_round_s;
        (load > 0.0 && spent > 0.0).then(|| spent / load)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_and_ratio_count_every_phase() {
        let mut a = PhaseTimes {
            start_s: 0.5,
            warmup_s: 1.0,
            window_s: 3.0,
            between_s: 0.25,
            ..PhaseTimes::default()
        };
        a.add(&a.clone());
        assert_eq!(a.total_s(), 9.5);
        assert_eq!(a.load_s(), 8.0);
        assert_eq!(
            a.describe(),
            "start 1.00 s, warm-up 2.00 s, window 6.00 s, between 0.50 s"
        );
        let t = RunTiming {
            first_round_to_end_s: 10.0,
            phases: a,
            ..RunTiming::default()
        };
        assert_eq!(t.overhead_ratio(), Some(1.25));
        assert_eq!(RunTiming::default().overhead_ratio(), None);
        // Images built between rounds are not the run's overhead.
        let built = RunTiming {
            first_round_to_end_s: 30.0,
            builds_after_first_round_s: 20.0,
            ..t
        };
        assert_eq!(built.overhead_ratio(), Some(1.25));
    }
}
