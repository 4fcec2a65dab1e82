//! The pipeline end to end against the scripted lab: every gate provoked by
//! fake data, failures that must not spoil other frameworks' results, and an
//! interrupted run that resumes to completion.

use chrono::{TimeZone, Utc};

use super::execute::{execute, Cancel, Job, RunOutcome, RunRules, Silent};
use super::fake::{FakeLab, Script};
use super::new_results;
use super::store::Store;
use crate::contract::Scenario;
use crate::plan::spec::RunSpec;
use crate::plan::tests::{framework, profile};
use crate::plan::Plan;
use crate::profile::{Profile, Rounds};
use crate::results::{self, CellKey, Environment, Reason, Results, Status, RESULTS_FILE};

struct Run {
    dir: tempfile::TempDir,
    plan: Plan,
    spec: RunSpec,
    profile: Profile,
}

fn setup(profile: Profile) -> Run {
    let fws = [
        framework("a", &[Scenario::Plaintext, Scenario::Json]),
        framework("b", &[Scenario::Plaintext, Scenario::Json]),
    ];
    let plan = Plan::new(&profile, &fws);
    let placement = profile
        .placement(&crate::profile::HostFacts::with_cores(4))
        .unwrap();
    let spec = RunSpec::resolve(
        &profile,
        &placement,
        &fws,
        &crate::plan::spec::tests::images(&fws),
    )
    .unwrap();
    Run {
        dir: tempfile::tempdir().unwrap(),
        plan,
        spec,
        profile,
    }
}

impl Run {
    fn store(&self) -> Store {
        let r = new_results(
            "test",
            Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap(),
            &self.profile,
            &self.plan,
            Environment::default(),
            self.profile.thresholds,
        );
        Store::create(self.dir.path(), r).unwrap()
    }

    fn rules(&self) -> RunRules {
        RunRules {
            thresholds: self.profile.thresholds,
            environment_forced: false,
        }
    }

    async fn go(&self, lab: &mut FakeLab, store: &mut Store, cancel: &Cancel) -> RunOutcome {
        let rules = self.rules();
        let job = Job {
            plan: &self.plan,
            spec: &self.spec,
            rules: &rules,
            started: std::time::Instant::now(),
        };
        execute(lab, store, job, &mut Silent, cancel).await.unwrap()
    }

    /// results.json as a separate reader sees it.
    fn on_disk(&self) -> Results {
        let path = self.dir.path().join(RESULTS_FILE);
        results::from_json(&std::fs::read_to_string(&path).unwrap(), "results.json").unwrap()
    }
}

fn key(fw: &str, scenario: Scenario, concurrency: u32) -> CellKey {
    CellKey {
        framework: fw.into(),
        scenario,
        protocol: crate::contract::Protocol::Http1,
        concurrency,
        rate: None,
    }
}

fn reasons(r: &Results, k: &CellKey) -> Vec<Reason> {
    r.cell(k).unwrap().verdict.reasons.clone()
}

#[tokio::test]
async fn clean_run_accepts_every_cell_and_stops_every_server() {
    let run = setup(profile());
    let mut lab = FakeLab::default();
    let mut store = run.store();
    assert_eq!(
        run.go(&mut lab, &mut store, &Cancel::new()).await,
        RunOutcome::Finished
    );
    let r = run.on_disk();
    assert_eq!(r.cells.len(), 8);
    assert!(r.remaining().is_empty());
    for c in &r.cells {
        assert_eq!(
            c.verdict.status,
            Status::Accepted,
            "{}: {:?}",
            c.key,
            c.verdict
        );
        assert_eq!(c.rounds.len(), 2);
    }
    assert_eq!(lab.leaked(), 0, "{:?}", lab.log);
    assert_eq!(lab.measures(), 16);
    let a = r.framework("a").unwrap();
    assert_eq!(a.idle_memory_bytes, Some(1 << 20));
    assert_eq!(a.cold_start_ms.len(), 1);
    assert!(a.limits.is_some() && a.verify.is_some());
}

#[tokio::test]
async fn every_phase_of_every_round_and_start_is_timed_per_framework_and_run() {
    let run = setup(profile());
    let mut lab = FakeLab::default();
    let mut store = run.store();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    let r = run.on_disk();
    // The fake lab's 8 rounds per framework: 2 s warm-up, 10 s window,
    // 0.25 s loader start each; one start of 0.1 s + 0.04 s readiness.
    for name in ["a", "b"] {
        let p = r.framework(name).unwrap().phases;
        assert_eq!(p.warmup_s, 16.0, "{name}: {p:?}");
        assert_eq!(p.window_s, 80.0, "{name}: {p:?}");
        assert_eq!(p.loader_start_s, 2.0, "{name}: {p:?}");
        assert_eq!((p.start_s, p.readiness_s), (0.1, 0.04), "{name}: {p:?}");
        assert!(p.settle_s >= 0.0 && p.between_s >= 0.0, "{p:?}");
    }
    let t = r.timing;
    assert_eq!(t.phases.window_s, 160.0);
    assert_eq!(t.phases.start_s, 0.2);
    // The fake lab takes no wall time: what was timed from the first round
    // to the end is the executor's own work, far below the fake's figures.
    assert!(
        t.first_round_to_end_s > 0.0 && t.first_round_to_end_s < 5.0,
        "{t:?}"
    );
    assert!(t.to_first_round_s >= 0.0 && t.to_first_round_s < t.first_round_to_end_s + 5.0);
}

#[tokio::test]
async fn client_bound_cells_are_flagged_not_rejected() {
    let run = setup(profile());
    let mut lab = FakeLab::default();
    lab.scripts.insert(
        "a".into(),
        Script {
            loader_fraction: 0.97,
            ..Script::default()
        },
    );
    let mut store = run.store();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    let r = run.on_disk();
    let c = r.cell(&key("a", Scenario::Plaintext, 10)).unwrap();
    assert_eq!(c.verdict.status, Status::Flagged);
    assert!(
        matches!(c.verdict.reasons[0], Reason::LoaderSaturated { cpu_fraction, .. } if cpu_fraction > 0.96)
    );
    assert_eq!(
        r.cell(&key("b", Scenario::Plaintext, 10))
            .unwrap()
            .verdict
            .status,
        Status::Accepted
    );
}

#[tokio::test]
async fn half_the_connections_dropped_rejects_the_cell() {
    let run = setup(profile());
    let mut lab = FakeLab::default();
    lab.scripts.insert(
        "b".into(),
        Script {
            established_fraction: 0.5,
            ..Script::default()
        },
    );
    let mut store = run.store();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    let r = run.on_disk();
    assert!(
        reasons(&r, &key("b", Scenario::Json, 100)).contains(&Reason::ConnectionsShort {
            round: 0,
            requested: 100,
            established: 50,
            serving: 50,
        })
    );
    assert_eq!(
        r.cell(&key("b", Scenario::Json, 100))
            .unwrap()
            .verdict
            .status,
        Status::Rejected
    );
}

#[tokio::test]
async fn oom_mid_run_rejects_that_cell_restarts_and_keeps_the_rest() {
    let run = setup(profile());
    let mut lab = FakeLab::default();
    lab.scripts.insert(
        "a".into(),
        Script {
            oom_at: Some((Scenario::Json, 10, 0)),
            ..Script::default()
        },
    );
    let mut store = run.store();
    assert_eq!(
        run.go(&mut lab, &mut store, &Cancel::new()).await,
        RunOutcome::Finished
    );
    let r = run.on_disk();
    let hit = key("a", Scenario::Json, 10);
    let rs = reasons(&r, &hit);
    assert!(rs.contains(&Reason::OomKilled { kills: 1 }), "{rs:?}");
    assert!(rs.contains(&Reason::Crashed { restarts: 1 }), "{rs:?}");
    // The server came back and every other cell of a, and all of b, stand.
    assert_eq!(lab.starts("a"), 2);
    for c in r.cells.iter().filter(|c| c.key != hit) {
        assert_eq!(c.verdict.status, Status::Accepted, "{}", c.key);
        assert_eq!(c.rounds.len(), 2, "{}", c.key);
    }
    assert_eq!(r.incidents.len(), 1);
    assert!(
        r.incidents[0].what.contains("not running"),
        "{:?}",
        r.incidents
    );
    assert_eq!(lab.leaked(), 0);
}

#[tokio::test]
async fn interrupted_run_leaves_valid_partial_results_and_resume_completes_it() {
    let run = setup(profile());
    let cancel = Cancel::new();
    let mut lab = FakeLab::default();
    lab.interrupt = Some((6, cancel.clone()));
    let mut store = run.store();
    assert_eq!(
        run.go(&mut lab, &mut store, &cancel).await,
        RunOutcome::Interrupted
    );
    assert_eq!(
        lab.leaked(),
        0,
        "the server is stopped on Ctrl-C: {:?}",
        lab.log
    );
    // Five rounds finished before the interrupt: all of them are on disk.
    let partial = run.on_disk();
    let rounds: usize = partial.cells.iter().map(|c| c.rounds.len()).sum();
    assert_eq!(rounds, 5);
    assert!(!partial.remaining().is_empty());

    // Resume: a fresh process reopens the directory and runs only what is left.
    let mut store = Store::resume(run.dir.path()).unwrap();
    let mut lab = FakeLab::default();
    assert_eq!(
        run.go(&mut lab, &mut store, &Cancel::new()).await,
        RunOutcome::Finished
    );
    assert_eq!(lab.measures(), 16 - 5);
    let done = run.on_disk();
    assert!(done.remaining().is_empty());
    for c in &done.cells {
        let idx: Vec<u32> = c.rounds.iter().map(|r| r.index).collect();
        assert_eq!(idx, vec![0, 1], "{}", c.key);
        assert_eq!(
            c.verdict.status,
            Status::Accepted,
            "{}: {:?}",
            c.key,
            c.verdict
        );
    }
    // Verify ran once for a: the resumed run kept the first outcome.
    assert_eq!(lab.log.iter().filter(|l| *l == "verify a").count(), 0);
}

#[tokio::test]
async fn framework_that_cannot_start_is_recorded_and_the_others_run() {
    let run = setup(profile());
    let mut lab = FakeLab::default();
    lab.scripts.insert(
        "a".into(),
        Script {
            start_error: Some("readiness timed out after 30s; log tail: panic".into()),
            ..Script::default()
        },
    );
    let mut store = run.store();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    let r = run.on_disk();
    let a = r.framework("a").unwrap();
    assert!(a
        .failure
        .as_deref()
        .unwrap()
        .contains("readiness timed out"));
    assert!(r
        .skipped
        .iter()
        .any(|s| s.framework == "a" && s.scenario.is_none()));
    assert_eq!(r.cells.iter().filter(|c| c.key.framework == "b").count(), 4);
    assert_eq!(r.remaining().len(), 4);
}

#[tokio::test]
async fn each_image_is_built_just_before_its_framework_and_a_broken_build_loses_nothing_measured() {
    let run = setup(profile());
    let mut lab = FakeLab::default();
    lab.deferred = ["a".to_string(), "b".to_string()].into();
    lab.scripts.insert(
        "b".into(),
        Script {
            build_error: Some("docker build failed: COPY no-such-file".into()),
            ..Script::default()
        },
    );
    let mut store = run.store();
    assert_eq!(
        run.go(&mut lab, &mut store, &Cancel::new()).await,
        RunOutcome::Finished
    );
    // a's image before a's server, b's after a's last round: the first
    // round waited for one image.
    let build_b = lab.log.iter().position(|l| l == "build b").unwrap();
    let last_measure_a = lab
        .log
        .iter()
        .rposition(|l| l.starts_with("measure a "))
        .unwrap();
    assert_eq!(lab.log[0], "build a", "{:?}", lab.log);
    assert_eq!(lab.log[1], "start a#1", "{:?}", lab.log);
    assert!(build_b > last_measure_a, "{:?}", lab.log);
    assert_eq!(lab.starts("b"), 0);
    let r = run.on_disk();
    // a is measured whole, with its image's facts recorded.
    assert_eq!(r.cells.iter().filter(|c| c.key.framework == "a").count(), 4);
    let a = r.framework("a").unwrap();
    assert_eq!(a.image_id.as_deref(), Some("sha256:built-a"));
    assert_eq!(a.versions.get("a").map(String::as_str), Some("1.2.3"));
    // b fails by name, with the build's words, and is skipped whole.
    let why = r.framework("b").unwrap().failure.clone().unwrap();
    assert!(why.contains("its image did not build"), "{why}");
    assert!(why.contains("COPY no-such-file"), "{why}");
    assert!(r
        .skipped
        .iter()
        .any(|s| s.framework == "b" && s.scenario.is_none() && s.reason == why));
    assert!(r
        .incidents
        .iter()
        .any(|i| i.framework == "b" && i.what == why));
    assert_eq!(r.remaining().len(), 4);
    // Both builds count as image time; b's came after the first round.
    assert_eq!(r.timing.image_check_s, 2.5);
    assert_eq!(r.timing.builds_after_first_round_s, 0.0);
    assert_eq!(r.timing.load_after_builds, Some(1.5));
    assert_eq!(lab.leaked(), 0);
}

#[tokio::test]
async fn interleaved_rounds_build_each_image_once_and_count_later_builds_apart() {
    let run = setup(Profile {
        interleave_rounds: true,
        ..profile()
    });
    let mut lab = FakeLab::default();
    lab.deferred = ["a".to_string(), "b".to_string()].into();
    let mut store = run.store();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    let builds: Vec<&str> = lab
        .log
        .iter()
        .filter(|l| l.starts_with("build ") || l.starts_with("start "))
        .map(String::as_str)
        .collect();
    assert_eq!(
        builds,
        [
            "build a",
            "start a#1",
            "build b",
            "start b#2",
            "start a#3",
            "start b#4"
        ]
    );
    let r = run.on_disk();
    assert!(r.remaining().is_empty());
    assert_eq!(r.timing.image_check_s, 5.0);
    // b's build came after a's first round: not the run's overhead.
    assert_eq!(r.timing.builds_after_first_round_s, 2.5);
}

#[tokio::test]
async fn scenario_failing_verify_is_rejected_without_being_measured() {
    let run = setup(profile());
    let mut lab = FakeLab::default();
    lab.scripts.insert(
        "b".into(),
        Script {
            excluded: vec![(Scenario::Json, "body was `{}`".into())],
            ..Script::default()
        },
    );
    let mut store = run.store();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    let r = run.on_disk();
    let c = r.cell(&key("b", Scenario::Json, 100)).unwrap();
    assert_eq!(c.verdict.status, Status::Rejected);
    assert!(c.rounds.is_empty());
    assert!(!lab.log.iter().any(|l| l.starts_with("measure b json")));
    assert!(r.remaining().is_empty());
}

#[tokio::test]
async fn loader_failure_loses_one_round_and_says_why() {
    let run = setup(profile());
    let mut lab = FakeLab::default();
    lab.scripts.insert(
        "a".into(),
        Script {
            loader_error_at: Some((Scenario::Plaintext, 100, 1)),
            ..Script::default()
        },
    );
    let mut store = run.store();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    let r = run.on_disk();
    let k = key("a", Scenario::Plaintext, 100);
    assert!(reasons(&r, &k).contains(&Reason::IncompleteRounds {
        measured: 1,
        planned: 2
    }));
    assert!(
        r.incidents[0].what.contains("round 2 not measured"),
        "{:?}",
        r.incidents
    );
}

#[tokio::test]
async fn restart_between_rounds_starts_the_server_once_per_round() {
    let run = setup(Profile {
        restart_between_rounds: true,
        rounds: Rounds::Fixed(3),
        ..profile()
    });
    let mut lab = FakeLab::default();
    let mut store = run.store();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    assert_eq!(lab.starts("a"), 3);
    assert_eq!(run.on_disk().framework("a").unwrap().cold_start_ms.len(), 3);
    assert_eq!(lab.leaked(), 0);
}

#[tokio::test]
async fn interleaved_rounds_alternate_servers_and_verify_each_framework_once() {
    let run = setup(Profile {
        interleave_rounds: true,
        ..profile()
    });
    let mut lab = FakeLab::default();
    let mut store = run.store();
    assert_eq!(
        run.go(&mut lab, &mut store, &Cancel::new()).await,
        RunOutcome::Finished
    );
    let starts: Vec<&str> = lab
        .log
        .iter()
        .filter(|l| l.starts_with("start "))
        .map(String::as_str)
        .collect();
    assert_eq!(starts, ["start a#1", "start b#2", "start a#3", "start b#4"]);
    // Round 0 of every cell of a, then of b, then round 1 of a …
    let first_r1 = lab.log.iter().position(|l| l.ends_with(" r1")).unwrap();
    assert!(lab.log[..first_r1]
        .iter()
        .any(|l| l.starts_with("measure b ")));
    assert_eq!(
        lab.log.iter().filter(|l| l.starts_with("verify ")).count(),
        2
    );
    assert_eq!(lab.leaked(), 0);
    let r = run.on_disk();
    assert!(r.remaining().is_empty());
    assert!(r.cells.iter().all(|c| c.rounds.len() == 2));
}

/// `rounds: {min: 3, max: 6, precision: 0.02}` over a steady framework `a`
/// and one whose rounds swing ±10% (`b`).
fn until_precise(interleave: bool) -> (Run, FakeLab) {
    let run = setup(Profile {
        rounds: Rounds::UntilPrecise {
            min: 3,
            max: 6,
            precision: 0.02,
        },
        interleave_rounds: interleave,
        ..profile()
    });
    let mut lab = FakeLab::default();
    lab.scripts.insert(
        "b".into(),
        Script {
            jitter: 0.1,
            ..Script::default()
        },
    );
    (run, lab)
}

#[tokio::test]
async fn rounds_until_precise_stop_a_steady_cell_at_min_and_take_a_jittery_one_to_max() {
    let (run, mut lab) = until_precise(false);
    let mut store = run.store();
    assert_eq!(
        run.go(&mut lab, &mut store, &Cancel::new()).await,
        RunOutcome::Finished
    );
    let r = run.on_disk();
    assert!(r.remaining().is_empty(), "{:?}", r.remaining());
    for c in &r.cells {
        let p = c
            .precision
            .as_ref()
            .expect("3 clean rounds give an interval");
        assert_eq!(p.asked, Some(0.02));
        assert_eq!(c.rounds_min, Some(3));
        assert_eq!(c.rounds_asked(), "3–6");
        if c.key.framework == "a" {
            assert_eq!(c.rounds.len(), 3, "{}: steady stops at min", c.key);
            assert!(p.met() && p.reached < 0.001, "{p:?}");
        } else {
            assert_eq!(c.rounds.len(), 6, "{}: jittery goes on to max", c.key);
            assert!(!p.met() && p.reached > 0.02, "{p:?}");
            assert!(p.low < 10_000.0 && p.high > 10_000.0, "{p:?}");
        }
        // Stopping early is not "incomplete".
        assert!(
            !c.verdict
                .reasons
                .iter()
                .any(|x| matches!(x, Reason::IncompleteRounds { .. })),
            "{:?}",
            c.verdict
        );
    }
    // Four cells each: a 3 rounds, b 6.
    assert_eq!(lab.measures(), 4 * 3 + 4 * 6);
    assert_eq!(lab.leaked(), 0);
}

#[tokio::test]
async fn rounds_until_precise_interleaved_start_no_server_for_a_framework_already_precise() {
    let (run, mut lab) = until_precise(true);
    let mut store = run.store();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    assert_eq!(lab.starts("a"), 3, "{:?}", lab.log);
    assert_eq!(lab.starts("b"), 6);
    assert!(run.on_disk().remaining().is_empty());
    assert_eq!(lab.leaked(), 0);
}

#[tokio::test]
async fn rounds_until_precise_resume_after_an_interrupt_measures_only_what_is_still_imprecise() {
    let (run, mut lab) = until_precise(false);
    let mut store = run.store();
    let cancel = Cancel::new();
    // Stop inside the 17th measure: a is done (4 cells × 3 rounds), b has
    // the first round of each of its 4 cells.
    lab.interrupt = Some((12 + 5, cancel.clone()));
    assert_eq!(
        run.go(&mut lab, &mut store, &cancel).await,
        RunOutcome::Interrupted
    );
    let mut lab = FakeLab::default();
    lab.scripts.insert(
        "b".into(),
        Script {
            jitter: 0.1,
            ..Script::default()
        },
    );
    let mut store = Store::resume(run.dir.path()).unwrap();
    assert_eq!(
        run.go(&mut lab, &mut store, &Cancel::new()).await,
        RunOutcome::Finished
    );
    assert_eq!(lab.starts("a"), 0, "a was already precise: {:?}", lab.log);
    let r = run.on_disk();
    assert!(r.remaining().is_empty());
    assert!(r
        .cells
        .iter()
        .filter(|c| c.key.framework == "b")
        .all(|c| c.rounds.len() == 6));
}

#[tokio::test]
async fn a_cell_that_reached_its_asked_precision_is_not_flagged_for_its_cv_one_that_did_not_is() {
    // Rounds ±1.2% apart: a CV of about 1.4%, above a 1% limit, and a 95%
    // interval of about ±3.4% after 3 rounds.
    let jittery = |rounds: Rounds| {
        let mut p = Profile {
            rounds,
            ..profile()
        };
        p.thresholds.max_cv = 0.01;
        let run = setup(p);
        let mut lab = FakeLab::default();
        for fw in ["a", "b"] {
            lab.scripts.insert(
                fw.into(),
                Script {
                    jitter: 0.012,
                    ..Script::default()
                },
            );
        }
        (run, lab)
    };
    let high_cv = |r: &Results| {
        r.cells
            .iter()
            .filter(|c| {
                c.verdict
                    .reasons
                    .iter()
                    .any(|x| matches!(x, Reason::HighCv { .. }))
            })
            .count()
    };

    let (run, mut lab) = jittery(Rounds::UntilPrecise {
        min: 3,
        max: 6,
        precision: 0.05,
    });
    let mut store = run.store();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    let r = run.on_disk();
    assert!(r
        .cells
        .iter()
        .all(|c| c.rounds.len() == 3 && c.precision.as_ref().is_some_and(|p| p.met())));
    assert_eq!(high_cv(&r), 0, "precise cells keep no CV flag");

    let (run, mut lab) = jittery(Rounds::UntilPrecise {
        min: 3,
        max: 4,
        precision: 0.01,
    });
    let mut store = run.store();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    let r = run.on_disk();
    assert!(r
        .cells
        .iter()
        .all(|c| c.rounds.len() == 4 && c.precision.as_ref().is_some_and(|p| !p.met())));
    assert_eq!(high_cv(&r), r.cells.len(), "imprecise cells keep it");

    let (run, mut lab) = jittery(Rounds::Fixed(3));
    let mut store = run.store();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    assert_eq!(
        high_cv(&run.on_disk()),
        8,
        "a fixed count judges the CV as ever"
    );
}

/// Framework `a` with rounds on a slowed machine at `at` (scenario, round):
/// its probe reads 8.5 µs there instead of 5.0 µs, and req/s is 30% lower.
fn slowed(at: Vec<(Scenario, u32)>, profile: Profile) -> (Run, FakeLab) {
    let run = setup(profile);
    let mut lab = FakeLab::default();
    lab.scripts.insert(
        "a".into(),
        Script {
            slowed_at: at,
            ..Script::default()
        },
    );
    (run, lab)
}

fn slowed_rounds(c: &crate::results::Cell) -> Vec<u32> {
    c.rounds
        .iter()
        .filter(|r| r.slowed.is_some())
        .map(|r| r.index)
        .collect()
}

#[tokio::test]
async fn rounds_on_a_slowed_machine_are_left_out_of_the_figures_and_measured_again_once() {
    // Plaintext's first rounds: a's very first round had only itself to go
    // by when stored, so it is found when a's steps are done; json's second
    // rounds are found as they are stored.
    let (run, mut lab) = slowed(
        vec![(Scenario::Plaintext, 0), (Scenario::Json, 1)],
        profile(),
    );
    let mut store = run.store();
    assert_eq!(
        run.go(&mut lab, &mut store, &Cancel::new()).await,
        RunOutcome::Finished
    );
    let r = run.on_disk();
    for c in &r.cells {
        if c.key.framework == "b" {
            assert_eq!((c.rounds.len(), slowed_rounds(c)), (2, vec![]), "{}", c.key);
            continue;
        }
        let want = if c.key.scenario == Scenario::Plaintext {
            0
        } else {
            1
        };
        assert_eq!(c.rounds.len(), 3, "{}: measured once more", c.key);
        assert_eq!(slowed_rounds(c), [want], "{}", c.key);
        let s = c.rounds[want as usize].slowed.unwrap();
        assert_eq!(
            (s.exchange_ns, s.reference_ns, s.limit),
            (8_500.0, 5_000.0, 0.10)
        );
        assert_eq!(
            c.verdict.status,
            Status::Accepted,
            "{}: {:?}",
            c.key,
            c.verdict
        );
        assert!(c
            .verdict
            .reasons
            .iter()
            .any(|x| matches!(x, Reason::MachineSlowed { round, .. } if *round == want)));
        assert!(c.verdict.labels(true).is_empty(), "a note has no label");
        // The figures rest on the two clean rounds; the slowed one (7,000
        // req/s) is in neither the median nor the spread.
        let t = &c.summary.as_ref().unwrap().throughput_rps;
        assert_eq!((t.n, t.median, t.cv), (2, 10_000.0, 0.0), "{}", c.key);
        assert_eq!(crate::compare::left_out_rounds(c), [want]);
    }
    assert_eq!(
        lab.measures(),
        16 + 4,
        "one repeat per slowed round, no more"
    );
    // The repeats come after the segment's planned steps.
    let at = |line: &str| lab.log.iter().position(|l| l == line).unwrap();
    assert!(at("measure a plaintext c=10 r2") > at("measure a json c=100 r1"));
    assert_eq!(lab.leaked(), 0);
}

#[tokio::test]
async fn a_repeat_on_a_slowed_machine_too_flags_the_cell_and_is_not_repeated_again() {
    let (run, mut lab) = slowed(
        vec![(Scenario::Plaintext, 1), (Scenario::Plaintext, 2)],
        profile(),
    );
    let mut store = run.store();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    let r = run.on_disk();
    for c in r.cells.iter().filter(|c| c.key.framework == "a") {
        if c.key.scenario == Scenario::Json {
            assert_eq!(c.verdict.status, Status::Accepted);
            continue;
        }
        assert_eq!(slowed_rounds(c), [1, 2], "{}", c.key);
        assert_eq!(c.verdict.status, Status::Flagged, "{:?}", c.verdict);
        assert!(c
            .verdict
            .reasons
            .contains(&Reason::FewCleanRounds { clean: 1, asked: 2 }));
        assert_eq!(c.verdict.labels(true), ["slowed machine"]);
        assert_eq!(c.summary.as_ref().unwrap().throughput_rps.n, 1);
    }
    assert_eq!(lab.measures(), 16 + 2);
}

#[tokio::test]
async fn rounds_until_precise_count_only_rounds_on_an_unslowed_machine() {
    let (run, mut lab) = slowed(
        vec![(Scenario::Plaintext, 1)],
        Profile {
            rounds: Rounds::UntilPrecise {
                min: 3,
                max: 6,
                precision: 0.02,
            },
            ..profile()
        },
    );
    let mut store = run.store();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    let r = run.on_disk();
    for c in r.cells.iter().filter(|c| c.key.framework == "a") {
        let p = c.precision.as_ref().unwrap();
        if c.key.scenario == Scenario::Plaintext {
            // Three clean rounds are what precision needs: a fourth is taken.
            assert_eq!(
                (c.rounds.len(), slowed_rounds(c)),
                (4, vec![1]),
                "{}",
                c.key
            );
            assert_eq!(p.rounds, 3);
        } else {
            assert_eq!(c.rounds.len(), 3);
        }
        assert!(p.met(), "{p:?}");
        assert_eq!(c.verdict.status, Status::Accepted, "{:?}", c.verdict);
    }
    assert!(!lab.log.iter().any(|l| l.contains(" r4")), "{:?}", lab.log);
}

#[tokio::test]
async fn with_slowed_machine_switched_off_every_round_counts() {
    let mut p = profile();
    p.thresholds.off.slowed_machine = true;
    let (run, mut lab) = slowed(vec![(Scenario::Plaintext, 1)], p);
    let mut store = run.store();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    let r = run.on_disk();
    assert!(r
        .cells
        .iter()
        .all(|c| c.rounds.len() == 2 && slowed_rounds(c).is_empty()));
    let k = key("a", Scenario::Plaintext, 10);
    assert!(reasons(&r, &k)
        .iter()
        .any(|x| matches!(x, Reason::HighCv { .. })));
    assert_eq!(lab.measures(), 16);
}

/// Issue 36, item 8: a database container that dies mid-cell is named in
/// that cell's rejection and in the framework's failure; the run moves on
/// to the next framework, whose cells all stand.
#[tokio::test]
async fn a_database_that_dies_mid_cell_rejects_it_by_name_and_the_run_goes_on() {
    let run = setup(profile());
    let mut lab = FakeLab::default();
    lab.scripts.insert(
        "a".into(),
        Script {
            database_dies_at: Some((Scenario::Json, 10, 0)),
            ..Script::default()
        },
    );
    let mut store = run.store();
    assert_eq!(
        run.go(&mut lab, &mut store, &Cancel::new()).await,
        RunOutcome::Finished
    );
    let r = run.on_disk();
    let hit = key("a", Scenario::Json, 10);
    let cell = r
        .cell(&hit)
        .expect("the cell the database died in is stored");
    assert_eq!(cell.verdict.status, Status::Rejected, "{:?}", cell.verdict);
    let named = cell.verdict.reasons.iter().find_map(|x| match x {
        Reason::DatabaseDown { round: 0, what } => Some(what.clone()),
        _ => None,
    });
    let named = named.unwrap_or_else(|| panic!("{:?}", cell.verdict));
    assert!(
        named.contains("database container fg-fake-a-") && named.contains("OOM-killed"),
        "{named}"
    );
    // The round measured before the death is kept as evidence.
    assert_eq!(cell.rounds.len(), 1);
    let failure = r.framework("a").unwrap().failure.clone().unwrap();
    assert!(failure.contains("database container"), "{failure}");
    assert!(
        r.incidents
            .iter()
            .any(|i| i.what.contains("database container")),
        "{:?}",
        r.incidents
    );
    // Not restarted, not measured further; b is measured in full.
    assert_eq!(lab.starts("a"), 1, "{:?}", lab.log);
    for c in r.cells.iter().filter(|c| c.key.framework == "b") {
        assert_eq!(c.verdict.status, Status::Accepted, "{}", c.key);
        assert_eq!(c.rounds.len(), 2, "{}", c.key);
    }
    assert_eq!(lab.leaked(), 0, "{:?}", lab.log);
}

/// A container that cannot be stopped or removed after a good framework is
/// an incident naming it, not the end of the run.
#[tokio::test]
async fn a_failed_stop_is_reported_by_container_and_the_run_goes_on() {
    let run = setup(profile());
    let mut lab = FakeLab::default();
    lab.scripts.insert(
        "a".into(),
        Script {
            stop_error: Some("container is marked for removal and cannot be started".into()),
            ..Script::default()
        },
    );
    let mut store = run.store();
    assert_eq!(
        run.go(&mut lab, &mut store, &Cancel::new()).await,
        RunOutcome::Finished
    );
    let r = run.on_disk();
    assert!(r.remaining().is_empty(), "{:?}", r.remaining());
    assert!(r.cells.iter().all(|c| c.verdict.status == Status::Accepted));
    let inc = r
        .incidents
        .iter()
        .find(|i| i.framework == "a")
        .expect("an incident for a");
    assert!(
        inc.what.contains("could not stop or remove") && inc.what.contains("fg-fake-a-1"),
        "{inc:?}"
    );
    assert!(r.framework("a").unwrap().failure.is_none());
}

/// A daemon that goes away mid-run ends it: what was measured before is on
/// disk, no later framework is marked skipped or failed, an incident says
/// what happened, and `--resume` on a daemon that is back completes it.
#[tokio::test]
async fn a_daemon_that_disappears_ends_the_run_keeping_results_and_resume_completes_it() {
    let run = setup(profile());
    let mut lab = FakeLab::default();
    lab.daemon_gone_at = Some(6);
    let mut store = run.store();
    assert_eq!(
        run.go(&mut lab, &mut store, &Cancel::new()).await,
        RunOutcome::EngineLost
    );
    let partial = run.on_disk();
    let rounds: usize = partial.cells.iter().map(|c| c.rounds.len()).sum();
    assert_eq!(rounds, 5, "the five rounds before it are kept");
    assert!(partial.skipped.is_empty(), "{:?}", partial.skipped);
    assert!(
        partial.frameworks.iter().all(|f| f.failure.is_none()),
        "{:?}",
        partial.frameworks
    );
    assert!(
        partial
            .incidents
            .iter()
            .any(|i| i.what.contains("container engine stopped answering")
                && i.what.contains("cannot reach the Docker daemon")),
        "{:?}",
        partial.incidents
    );
    // Nothing after the loss was tried: b was never started.
    assert_eq!(lab.starts("b"), 0, "{:?}", lab.log);

    let mut store = Store::resume(run.dir.path()).unwrap();
    let mut lab = FakeLab::default();
    assert_eq!(
        run.go(&mut lab, &mut store, &Cancel::new()).await,
        RunOutcome::Finished
    );
    assert_eq!(lab.measures(), 16 - 5);
    assert!(run.on_disk().remaining().is_empty());
}

/// Frameworks `a` and `b` whose rounds swing by `jitter_a` and `jitter_b`,
/// `rounds: {min: 3, max: 12, precision: 0.02}` interleaved, with a
/// `budget` of `budget_s` seconds on the lab's own clock: a segment is a
/// 2 s start, 4 rounds of 10 s and a 0.5 s stop (42.5 s), a block 85 s.
fn budgeted(jitter_a: f64, jitter_b: f64, budget_s: u64) -> (Run, FakeLab) {
    let run = setup(Profile {
        rounds: Rounds::UntilPrecise {
            min: 3,
            max: 12,
            precision: 0.02,
        },
        interleave_rounds: true,
        budget: Some(std::time::Duration::from_secs(budget_s)),
        ..profile()
    });
    let mut lab = FakeLab::default();
    lab.virtual_clock = true;
    for (fw, jitter) in [("a", jitter_a), ("b", jitter_b)] {
        lab.scripts.insert(
            fw.into(),
            Script {
                jitter,
                ..Script::default()
            },
        );
    }
    (run, lab)
}

fn rounds_of(r: &Results, fw: &str) -> Vec<usize> {
    r.cells
        .iter()
        .filter(|c| c.key.framework == fw)
        .map(|c| c.rounds.len())
        .collect()
}

#[tokio::test]
async fn a_budget_stops_adding_blocks_when_the_next_would_not_fit() {
    // First pass 3 × 85 s = 255 s; 200 s more hold two blocks of 85 s.
    // Each image is built in the first block (100 s each): not the
    // budget's, so a fresh machine gets the rounds a cached one does.
    let (run, mut lab) = budgeted(0.1, 0.1, 455);
    lab.deferred = ["a".to_string(), "b".to_string()].into();
    let mut store = run.store();
    assert_eq!(
        run.go(&mut lab, &mut store, &Cancel::new()).await,
        RunOutcome::Finished
    );
    let r = run.on_disk();
    assert_eq!(rounds_of(&r, "a"), vec![5; 4], "{:?}", lab.log);
    assert_eq!(rounds_of(&r, "b"), vec![5; 4]);
    let b = r.budget.clone().expect("a run with a budget reports it");
    assert_eq!(b.asked_s, 455.0);
    let first = b.first_pass_s.unwrap();
    assert!((first - 255.0).abs() < 0.5, "{b:?}");
    assert_eq!(b.block_s, Some(85.0));
    assert_eq!(b.expected_blocks, Some(2));
    assert_eq!((b.blocks, b.sat_out), (2, 0));
    assert_eq!(b.ended, Some(crate::results::BudgetEnd::Budget));
    // Cells the budget stopped are done, not missing: the run is complete
    // and a resume measures nothing more.
    assert!(r.remaining().is_empty(), "{:?}", r.remaining());
    let before = lab.measures();
    let mut store = Store::resume(run.dir.path()).unwrap();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    assert_eq!(lab.measures(), before, "{:?}", lab.log);
    assert_eq!(
        run.on_disk().budget.unwrap().ended,
        Some(crate::results::BudgetEnd::Budget)
    );
    // The known answer of the expectation: rounds alternating ±10% keep
    // their spread, so 5 rounds' interval is what 3 rounds' spread carried
    // over 2 more blocks says, within what 2 more rounds move the spread.
    let expected = b.expected_median_interval.unwrap();
    let reached = r.precision.as_ref().unwrap().median_interval.unwrap();
    assert!(
        expected > 0.02 && (expected / reached - 1.0).abs() < 0.15,
        "expected ±{expected}, reached ±{reached}"
    );
    assert_eq!(lab.leaked(), 0);
}

#[tokio::test]
async fn when_a_whole_block_does_not_fit_the_least_precise_framework_runs_alone() {
    // After the first pass (255 s) 130 s are left: block 4 (85 s) runs
    // whole; of 45 s left, one segment (42.5 s) fits: b's, whose rounds
    // swing more; then nothing fits.
    let (run, mut lab) = budgeted(0.05, 0.2, 385);
    let mut store = run.store();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    let r = run.on_disk();
    assert_eq!(rounds_of(&r, "a"), vec![4; 4], "{:?}", lab.log);
    assert_eq!(rounds_of(&r, "b"), vec![5; 4]);
    let b = r.budget.clone().unwrap();
    assert_eq!((b.blocks, b.sat_out), (2, 1), "{b:?}");
    assert_eq!(b.ended, Some(crate::results::BudgetEnd::Budget));
    assert!(
        b.sentence().contains("1 framework round sat out"),
        "{}",
        b.sentence()
    );
    // Cells of a are still paired with b's on the blocks both ran.
    let ra = r.cell(&key("a", Scenario::Json, 10)).unwrap();
    assert!(ra.rank.as_ref().is_none_or(|g| g.paired), "{:?}", ra.rank);
}

#[tokio::test]
async fn with_room_to_spare_a_budget_changes_nothing_precise_cells_stop_at_min() {
    let (run, mut lab) = budgeted(0.0, 0.1, 100_000);
    let mut store = run.store();
    run.go(&mut lab, &mut store, &Cancel::new()).await;
    let r = run.on_disk();
    assert_eq!(rounds_of(&r, "a"), vec![3; 4]);
    assert_eq!(rounds_of(&r, "b"), vec![12; 4]);
    assert_eq!(lab.starts("a"), 3);
    let b = r.budget.clone().unwrap();
    assert_eq!(b.expected_blocks, Some(9), "capped at max − min");
    assert_eq!((b.blocks, b.sat_out), (9, 0));
    assert_eq!(b.ended, Some(crate::results::BudgetEnd::Precise));
}
