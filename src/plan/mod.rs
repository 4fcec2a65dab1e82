//! The plan: which cells a profile asks for, on which frameworks, in which
//! order, and roughly how long that takes.
//!
//! This module turns a validated [`Profile`] and the selected frameworks into
//! the ordered work list and the run's skipped combinations. It starts
//! nothing and reads no files.

pub mod key;
pub mod spec;

use std::fmt::Write as _;
use std::time::Duration;

pub use key::{CellKey, Skipped};

use crate::contract::{Protocol, Scenario};
use crate::framework::Framework;
use crate::profile::{LoadMode, Profile};

/// One framework's share of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameworkPlan {
    /// Framework name.
    pub name: String,
    /// The profile's scenarios this framework declares, in profile order.
    pub scenarios: Vec<Scenario>,
    /// The profile's protocols this framework serves, in profile order.
    pub protocols: Vec<Protocol>,
}

/// One measured round of one cell: the unit of work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The cell.
    pub key: CellKey,
    /// Round number, 0-based.
    pub round: u32,
}

/// Everything a run will do, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Frameworks in run order, each with the scenarios it will run.
    pub frameworks: Vec<FrameworkPlan>,
    /// Connection counts, in profile order.
    pub concurrency: Vec<u32>,
    /// Rounds per cell laid out: the most a cell can take.
    pub rounds: u32,
    /// Rounds every cell takes; below `rounds` when rounds go on only until
    /// the cell is precise (`precision`).
    pub min_rounds: u32,
    /// The precision a cell's rounds go on until, when the profile asks
    /// for one: a step past `min_rounds` runs only while its cell lacks it.
    pub precision: Option<f64>,
    /// Target rate in fixed-rate mode.
    pub rate: Option<u64>,
    /// Requests in flight per connection.
    pub pipeline: u32,
    /// Concurrent streams per connection on HTTP/2 cells.
    pub streams: u32,
    /// Whether the server restarts before each round.
    pub restart_between_rounds: bool,
    /// Whether frameworks alternate round by round.
    pub interleave_rounds: bool,
    /// Wall time the run may take: blocks past `min_rounds` start only
    /// while they fit in it (`bench::budget`).
    pub budget: Option<Duration>,
    /// Combinations the profile asks for that will not run, with the reason.
    pub skipped: Vec<Skipped>,
    /// Longest warm-up plus measured window of one step.
    pub step_time: Duration,
    /// Idle settle after each server start.
    pub settle: Duration,
}

impl Plan {
    /// The plan for `profile` over `frameworks` (already selected by the
    /// profile, in run order).
    pub fn new(profile: &Profile, frameworks: &[Framework]) -> Plan {
        let mut plans = Vec::new();
        let mut skipped = Vec::new();
        for fw in frameworks {
            let scenarios: Vec<Scenario> = profile
                .scenarios
                .iter()
                .copied()
                .filter(|s| fw.supports(*s))
                .collect();
            let protocols: Vec<Protocol> = profile
                .protocol
                .iter()
                .copied()
                .filter(|p| fw.serves(*p))
                .collect();
            let manifest = fw.dir.join(crate::framework::MANIFEST);
            if scenarios.is_empty() || protocols.is_empty() {
                skipped.push(Skipped {
                    framework: fw.name().to_string(),
                    scenario: None,
                    protocol: None,
                    reason: if scenarios.is_empty() {
                        "declares none of the profile's scenarios".into()
                    } else {
                        format!(
                            "serves none of the profile's protocols ({}; `protocols` in {})",
                            join(&profile.protocol),
                            manifest.display()
                        )
                    },
                });
                continue;
            }
            for &s in &profile.scenarios {
                if !fw.supports(s) {
                    skipped.push(Skipped {
                        framework: fw.name().to_string(),
                        scenario: Some(s),
                        protocol: None,
                        reason: format!("not declared in {}", manifest.display()),
                    });
                }
            }
            for &p in &profile.protocol {
                if !fw.serves(p) {
                    skipped.push(Skipped {
                        framework: fw.name().to_string(),
                        scenario: None,
                        protocol: Some(p),
                        reason: format!(
                            "protocol {p} not declared in {} (`protocols`)",
                            manifest.display()
                        ),
                    });
                }
            }
            plans.push(FrameworkPlan {
                name: fw.name().to_string(),
                scenarios,
                protocols,
            });
        }
        Plan {
            frameworks: plans,
            concurrency: profile.concurrency.clone(),
            rounds: profile.rounds.max(),
            min_rounds: profile.rounds.min(),
            precision: profile.rounds.precision(),
            rate: match profile.load.mode {
                LoadMode::Closed => None,
                LoadMode::FixedRate { rate } => Some(rate),
            },
            pipeline: profile.load.pipeline,
            streams: profile.load.streams,
            restart_between_rounds: profile.restart_between_rounds,
            interleave_rounds: profile.interleave_rounds,
            budget: profile.budget,
            skipped,
            step_time: profile.warmup.max() + profile.duration,
            settle: profile.idle_settle,
        }
    }

    /// The key of every cell of `fw`, scenario-major, then protocol, then
    /// concurrency.
    pub fn cells_of(&self, fw: &FrameworkPlan) -> Vec<CellKey> {
        let mut keys = Vec::new();
        for &scenario in &fw.scenarios {
            for &protocol in &fw.protocols {
                for &concurrency in &self.concurrency {
                    keys.push(CellKey {
                        framework: fw.name.clone(),
                        scenario,
                        protocol,
                        concurrency,
                        rate: self.rate,
                    });
                }
            }
        }
        keys
    }

    /// The protocols of the run, in profile order (those at least one
    /// framework serves).
    pub fn protocols(&self) -> Vec<Protocol> {
        let mut out: Vec<Protocol> = Vec::new();
        for f in &self.frameworks {
            for p in &f.protocols {
                if !out.contains(p) {
                    out.push(*p);
                }
            }
        }
        out
    }

    /// Every cell of the run, framework by framework.
    pub fn keys(&self) -> Vec<CellKey> {
        self.frameworks
            .iter()
            .flat_map(|f| self.cells_of(f))
            .collect()
    }

    /// The steps of `fw` in run order: rounds outermost, so each round is a
    /// full pass over the cells (the profile's rule: drift over time spreads
    /// over every cell instead of piling onto the last ones).
    pub fn steps_of(&self, fw: &FrameworkPlan) -> Vec<Step> {
        let cells = self.cells_of(fw);
        (0..self.rounds)
            .flat_map(|round| {
                cells.iter().map(move |key| Step {
                    key: key.clone(),
                    round,
                })
            })
            .collect()
    }

    /// The run in the order it is executed: one segment per framework with
    /// all its steps, or, with `interleave_rounds`, one segment per round
    /// and framework (round 0 of every framework, then round 1 …): each
    /// round is a block in which every framework runs once, in the
    /// profile's order in the first block and in a shuffled order after
    /// ([`block_order`]), so no framework always runs first or right after
    /// the same neighbour. A segment is one server's life: started, its
    /// steps measured, stopped.
    pub fn segments(&self) -> Vec<(&FrameworkPlan, Vec<Step>)> {
        if !self.interleave_rounds {
            return self
                .frameworks
                .iter()
                .map(|f| (f, self.steps_of(f)))
                .collect();
        }
        let fws = &self.frameworks;
        (0..self.rounds)
            .flat_map(move |round| {
                block_order(fws.len(), round)
                    .into_iter()
                    .map(move |i| &fws[i])
                    .map(move |f| {
                        let steps = self
                            .steps_of(f)
                            .into_iter()
                            .filter(|s| s.round == round)
                            .collect();
                        (f, steps)
                    })
            })
            .collect()
    }

    /// Number of steps in the whole run, at most (every cell taking
    /// `rounds`).
    pub fn total_steps(&self) -> usize {
        self.keys().len() * self.rounds as usize
    }

    /// Whether `step` runs only while its cell lacks the asked precision.
    pub fn is_conditional(&self, step: &Step) -> bool {
        self.precision.is_some() && step.round >= self.min_rounds
    }

    /// Lower bound of the run's duration with `rounds` rounds per cell:
    /// every step's warm-up and window, plus the settle after each server
    /// start. Image builds, readiness and verification come on top.
    fn estimate_at(&self, rounds: u32) -> Duration {
        let starts_per_fw = if self.restart_between_rounds || self.interleave_rounds {
            rounds
        } else {
            1
        };
        self.step_time * (self.keys().len() as u32 * rounds)
            + self.settle * starts_per_fw * self.frameworks.len() as u32
    }

    /// [`Self::estimate_at`] with every cell taking the most rounds.
    pub fn estimate(&self) -> Duration {
        self.estimate_at(self.rounds)
    }

    /// The estimate when every cell stops at `min_rounds` (equal to
    /// [`Self::estimate`] for a fixed number of rounds).
    pub fn estimate_shortest(&self) -> Duration {
        self.estimate_at(self.min_rounds)
    }

    /// The plan as a few lines for the terminal.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        let names: Vec<&str> = self.frameworks.iter().map(|f| f.name.as_str()).collect();
        let _ = writeln!(s, "frameworks:  {} ({})", names.len(), names.join(", "));
        let mut scenarios: Vec<Scenario> = Vec::new();
        for f in &self.frameworks {
            for sc in &f.scenarios {
                if !scenarios.contains(sc) {
                    scenarios.push(*sc);
                }
            }
        }
        let sc: Vec<String> = scenarios.iter().map(|s| s.to_string()).collect();
        let _ = writeln!(s, "scenarios:   {}", sc.join(", "));
        let protocols = self.protocols();
        if protocols != [Protocol::Http1] {
            let _ = write!(s, "protocols:   {}", join(&protocols));
            if protocols.iter().any(|p| p.is_http2()) {
                let _ = write!(s, " ({} streams per HTTP/2 connection)", self.streams);
            }
            s.push('\n');
        }
        let conc: Vec<String> = self.concurrency.iter().map(|c| c.to_string()).collect();
        let _ = write!(s, "concurrency: {}", conc.join(", "));
        match self.rate {
            Some(r) => {
                let _ = writeln!(s, " (fixed rate {r} req/s)");
            }
            None => s.push_str(" (closed loop)\n"),
        }
        let rounds = match self.precision {
            None => self.rounds.to_string(),
            Some(p) => format!(
                "{} to {}, one more while a cell's headline figure is less precise than ±{:.1}% (95% interval)",
                self.min_rounds,
                self.rounds,
                p * 100.0
            ),
        };
        let _ = writeln!(
            s,
            "rounds:      {rounds}{}",
            if self.interleave_rounds {
                ", frameworks alternating round by round (each round a fresh server)"
            } else if self.restart_between_rounds {
                ", server restarted before each"
            } else {
                ""
            }
        );
        let at_most = if self.precision.is_some() {
            "at most "
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "cells:       {} ({at_most}{} measured rounds of up to {})",
            self.keys().len(),
            self.total_steps(),
            humantime::format_duration(self.step_time)
        );
        for k in &self.skipped {
            let what = match (k.scenario, k.protocol) {
                (Some(x), _) => x.to_string(),
                (None, Some(p)) => p.to_string(),
                (None, None) => "all".into(),
            };
            let _ = writeln!(s, "skipped:     {} {what}: {}", k.framework, k.reason);
        }
        let secs = |d: Duration| humantime::format_duration(Duration::from_secs(d.as_secs()));
        let (shortest, longest) = (self.estimate_shortest(), self.estimate());
        let _ = if shortest == longest {
            writeln!(
                s,
                "estimated:   at least {} (plus image builds, readiness and verification)",
                secs(longest)
            )
        } else {
            writeln!(
                s,
                "estimated:   at least {} if every cell is precise after {} rounds, {} if none is before {} (plus image builds, readiness and verification)",
                secs(shortest),
                self.min_rounds,
                secs(longest),
                self.rounds
            )
        };
        if let Some(b) = self.budget {
            let _ = writeln!(
                s,
                "budget:      {}: after the first {} rounds, blocks of rounds go on while they fit, on the least precise cells first",
                secs(b),
                self.min_rounds
            );
        }
        s
    }
}

/// `http1, h2`: protocols as a profile lists them.
fn join(protocols: &[Protocol]) -> String {
    protocols
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The order of `n` frameworks in block `round` of an interleaved run: the
/// profile's in block 0 (the first result comes from the framework listed
/// first), then a shuffle seeded by the block's number, the same in every
/// run and on resume.
pub fn block_order(n: usize, round: u32) -> Vec<usize> {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let mut order: Vec<usize> = (0..n).collect();
    if round > 0 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x0b10_c000 + u64::from(round));
        order.shuffle(&mut rng);
    }
    order
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::framework::Manifest;

    pub(crate) fn framework(name: &str, scenarios: &[Scenario]) -> Framework {
        Framework {
            manifest: Manifest {
                name: name.into(),
                language: "rust".into(),
                framework: name.into(),
                base: "scratch".into(),
                prebuild: None,
                port: 8080,
                readiness: "/".into(),
                scenarios: scenarios.to_vec(),
                protocols: vec![crate::contract::Protocol::Http1],
                workers: "one per CPU".into(),
                read_only_rootfs: true,
                env: Default::default(),
                notes: "test".into(),
                limits: None,
            },
            dir: std::path::PathBuf::from("frameworks").join(name),
        }
    }

    pub(crate) fn profile() -> Profile {
        Profile {
            name: "t".into(),
            scenarios: vec![Scenario::Plaintext, Scenario::Json],
            concurrency: vec![10, 100],
            rounds: crate::profile::Rounds::Fixed(2),
            ..Profile::default()
        }
    }

    #[test]
    fn interleaved_rounds_alternate_frameworks_round_by_round() {
        let mut pr = profile();
        pr.interleave_rounds = true;
        let both = [Scenario::Plaintext, Scenario::Json];
        let p = Plan::new(&pr, &[framework("a", &both), framework("b", &both)]);
        let order: Vec<(String, u32, usize)> = p
            .segments()
            .iter()
            .map(|(f, steps)| (f.name.clone(), steps[0].round, steps.len()))
            .collect();
        let b1 = block_order(2, 1);
        let name = |i: usize| ["a", "b"][i];
        let want = [("a", 0), ("b", 0), (name(b1[0]), 1), (name(b1[1]), 1)];
        assert_eq!(order.len(), 4);
        for ((name, round, n), (wn, wr)) in order.iter().zip(want) {
            assert_eq!((name.as_str(), *round, *n), (wn, wr, 4));
        }
        // One server start per round and framework in the estimate.
        assert_eq!(p.estimate(), Duration::from_secs(16 * 20 + 4 * 3));
        pr.interleave_rounds = false;
        let p = Plan::new(&pr, &[framework("a", &both), framework("b", &both)]);
        assert_eq!(p.segments().len(), 2);
    }

    #[test]
    fn blocks_after_the_first_run_frameworks_in_a_shuffled_order_the_same_every_time() {
        assert_eq!(block_order(5, 0), vec![0, 1, 2, 3, 4]);
        let blocks: Vec<Vec<usize>> = (1..=12).map(|r| block_order(5, r)).collect();
        for b in &blocks {
            let mut sorted = b.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, vec![0, 1, 2, 3, 4], "each framework once per block");
        }
        assert_eq!(
            blocks,
            (1..=12).map(|r| block_order(5, r)).collect::<Vec<_>>()
        );
        // Over 12 blocks no framework is always first, and every one leads
        // at least once.
        let mut leads = [0; 5];
        for b in &blocks {
            leads[b[0]] += 1;
        }
        assert!(leads.iter().all(|&n| n > 0 && n < 12), "{leads:?}");
    }

    #[test]
    fn skips_scenarios_a_framework_does_not_declare() {
        let p = Plan::new(
            &profile(),
            &[
                framework("a", &[Scenario::Plaintext, Scenario::Json]),
                framework("b", &[Scenario::Plaintext]),
                framework("c", &[Scenario::Echo]),
            ],
        );
        assert_eq!(p.frameworks.len(), 2);
        assert_eq!(p.keys().len(), 6);
        assert_eq!(p.skipped.len(), 2);
        assert!(p.skipped[0].reason.contains("frameworks/b/framework.yaml"));
        assert_eq!(p.skipped[1].scenario, None);
    }

    #[test]
    fn steps_put_rounds_outermost() {
        let p = Plan::new(
            &profile(),
            &[framework("a", &[Scenario::Plaintext, Scenario::Json])],
        );
        let steps = p.steps_of(&p.frameworks[0]);
        assert_eq!(steps.len(), 8);
        assert_eq!(steps[0].round, 0);
        assert_eq!(steps[3].round, 0);
        assert_eq!(steps[4].round, 1);
        assert_eq!(steps[4].key, steps[0].key);
        // 8 steps × (5 s warm-up + 15 s) + one 3 s settle.
        assert_eq!(p.estimate(), Duration::from_secs(8 * 20 + 3));
        assert!(
            p.describe().contains("cells:       4 (8 measured rounds"),
            "{}",
            p.describe()
        );
    }

    #[test]
    fn rounds_until_precise_lay_out_the_most_and_estimate_a_range() {
        let mut pr = profile();
        pr.rounds = crate::profile::Rounds::UntilPrecise {
            min: 3,
            max: 5,
            precision: 0.02,
        };
        let p = Plan::new(&pr, &[framework("a", &[Scenario::Plaintext])]);
        let steps = p.steps_of(&p.frameworks[0]);
        // One scenario × two levels × five rounds, the last two conditional.
        assert_eq!(steps.len(), 10);
        let conditional: Vec<u32> = steps
            .iter()
            .filter(|s| p.is_conditional(s))
            .map(|s| s.round)
            .collect();
        assert_eq!(conditional, [3, 3, 4, 4]);
        // 2 cells × (5 s + 15 s) per round, one 3 s settle.
        assert_eq!(p.estimate_shortest(), Duration::from_secs(6 * 20 + 3));
        assert_eq!(p.estimate(), Duration::from_secs(10 * 20 + 3));
        let d = p.describe();
        assert!(d.contains("rounds:      3 to 5, one more while"), "{d}");
        assert!(d.contains("at least 2m 3s if every cell is precise after 3 rounds, 3m 23s if none is before 5"), "{d}");
        // A fixed count has no conditional step and one estimate.
        let p = Plan::new(&profile(), &[framework("a", &[Scenario::Plaintext])]);
        assert!(!p
            .steps_of(&p.frameworks[0])
            .iter()
            .any(|s| p.is_conditional(s)));
        assert_eq!(p.estimate_shortest(), p.estimate());
    }
}
