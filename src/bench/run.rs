//! A whole run, as `fairground run` asks for it: resolve the profile and frameworks,
//! print the plan, judge the environment, build the images, run every cell
//! through the real lab, write the report.
//!
//! This module wires the parts together, prints progress to the terminal
//! and maps outcomes to exit codes; its flags are `cli::run`. The rules of a run live in
//! `execute`, `gates` and `environment`; nothing here measures or judges.

use std::path::{Path, PathBuf};

use anyhow::Context;
use chrono::Utc;

use super::docker_lab::DockerLab;
use super::environment;
use super::execute::{execute, Cancel, Job, RunOutcome, RunRules};
use super::hosts::HostEngines;
use super::progress;
use super::store::Store;
use crate::docker::engine::{DockerEngine, Engine};
use crate::docker::images::ImageOptions;
use crate::docker::RunId;
use crate::exit::ExitCode;
use crate::framework::{self, Framework};
use crate::plan::spec::RunSpec;
use crate::plan::Plan;
use crate::preflight::{self, EnvReport, PreflightInput};
use crate::profile::{self, HostFacts, Placement, Profile};
use crate::report;
use crate::results::{Results, ResumedEnvironment, RunTiming, Status};

/// What `fairground run` was asked for (its flags, `cli::run::RunArgs`).
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Profile to run: a name in profiles/ (e.g. `standard`) or a path to a
    /// YAML file. With --resume, defaults to the profile of that run.
    pub profile: Option<String>,
    /// Run even if preflight judges the environment unfit; every result is
    /// then flagged "environment not accepted".
    pub accept_env: bool,
    /// Continue the run in this directory (one that holds results.json):
    /// only the rounds it lacks are measured.
    pub resume: Option<PathBuf>,
    /// Where run directories are created (`<DIR>/<UTC time>-<profile>/`,
    /// and `<DIR>/latest` points at the newest).
    pub output: PathBuf,
    /// Folder holding the frameworks (one subfolder with a framework.yaml each).
    /// Repeat it to run frameworks of several folders side by side (two
    /// versions of one framework, in folders of their own names).
    pub frameworks: Vec<PathBuf>,
}

/// Run a profile: the whole of `fairground run`.
pub fn run(args: &RunOptions) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(run_async(args))
}

/// What keeps a run from starting, in what it was given: bad input (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum RunInputError {
    /// Neither `--profile` nor `--resume`.
    #[error("say which profile to run: --profile NAME (e.g. --profile standard)")]
    NoProfile,
    /// The profile selects none of the frameworks found.
    #[error("profile `{profile}` selects no framework out of {found} found in {roots}")]
    NoFramework {
        /// The profile's name.
        profile: String,
        /// Frameworks found.
        found: usize,
        /// The folders searched.
        roots: String,
    },
    /// `--resume` of a run made with another profile.
    #[error("{} was run with profile `{was}`, not `{asked}`; resume it with its own profile", dir.display())]
    OtherProfile {
        /// The run directory.
        dir: PathBuf,
        /// Its profile.
        was: String,
        /// The profile asked for.
        asked: String,
    },
    /// The profile's cores cannot be had on this machine.
    #[error("{}: {why}", profile.display())]
    Placement {
        /// The profile file.
        profile: PathBuf,
        /// Why.
        why: String,
    },
}

impl crate::exit::ExitCodeOf for RunInputError {
    fn exit_code(&self) -> ExitCode {
        match self {
            RunInputError::NoProfile => ExitCode::BadInput,
            RunInputError::NoFramework { .. } => ExitCode::BadInput,
            RunInputError::OtherProfile { .. } => ExitCode::BadInput,
            RunInputError::Placement { .. } => ExitCode::BadInput,
        }
    }
}

/// The frameworks the profile selects, in run order, with a clear error for
/// names the profile lists that do not exist.
fn select_frameworks(profile: &Profile, roots: &[PathBuf]) -> anyhow::Result<Vec<Framework>> {
    let all = framework::discover_all(roots)?;
    let roster: Vec<String> = all.iter().map(|f| f.name().to_string()).collect();
    let chosen = profile.frameworks.select(&roster);
    if chosen.is_empty() {
        return Err(RunInputError::NoFramework {
            profile: profile.name.clone(),
            found: roster.len(),
            roots: roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(" and "),
        }
        .into());
    }
    Ok(chosen
        .iter()
        .filter_map(|n| all.iter().find(|f| f.name() == *n).cloned())
        .collect())
}

/// Facts about each framework that do not need a running server: what it
/// is (manifest), its image (id, size, versions read from it, the size of
/// its one binary) and its app's lines of code.
fn record_frameworks(
    results: &mut Results,
    frameworks: &[Framework],
    images: &crate::docker::engine::BuiltImages,
) {
    for fw in frameworks {
        let f = results.framework_mut(fw.name());
        f.language = fw.manifest.language.clone();
        f.display_name = fw.manifest.framework.clone();
        f.workers = fw.manifest.workers.clone();
        if f.app_lines_of_code.is_none() {
            f.app_lines_of_code = crate::verify::footprint::count_dir(&fw.dir)
                .ok()
                .map(|l| l.total);
        }
        if let Some(img) = images.frameworks.get(fw.name()) {
            super::execute::record_image(f, img);
        }
    }
}

/// What a run is about, resolved before anything starts: the profile (and
/// where it came from), the frameworks, their cores and the plan.
struct Setup {
    profile: Profile,
    profile_path: PathBuf,
    host: HostFacts,
    frameworks: Vec<Framework>,
    placement: Placement,
    plan: Plan,
    /// The interrupted run being resumed, if any.
    resumed: Option<Store>,
}

/// Step 1: the profile, the frameworks it selects, their placement and the
/// plan (a resumed run must be resumed with its own profile).
fn setup(args: &RunOptions) -> anyhow::Result<Setup> {
    let resumed = match &args.resume {
        Some(dir) => Some(Store::resume(dir)?),
        None => None,
    };
    let profile_name = match (&args.profile, &resumed) {
        (Some(p), _) => p.clone(),
        (None, Some(s)) => s.results().profile_name.clone(),
        (None, None) => return Err(RunInputError::NoProfile.into()),
    };
    // Framework names in the profile are checked against the roster this run
    // uses (--frameworks), not against ./frameworks.
    let mut host = HostFacts::detect();
    host.frameworks = profile::framework_roster_of(&args.frameworks);
    let (profile, profile_path) = profile::resolve_with(&profile_name, &host)?;
    if let Some(s) = &resumed {
        if s.results().profile_name != profile.name {
            return Err(RunInputError::OtherProfile {
                dir: s.dir().to_path_buf(),
                was: s.results().profile_name.clone(),
                asked: profile.name.clone(),
            }
            .into());
        }
    }
    let frameworks = select_frameworks(&profile, &args.frameworks)?;
    let placement = profile
        .placement(&host)
        .map_err(|why| RunInputError::Placement {
            profile: profile_path.clone(),
            why,
        })?;
    let plan = Plan::new(&profile, &frameworks);
    Ok(Setup {
        profile,
        profile_path,
        host,
        frameworks,
        placement,
        plan,
        resumed,
    })
}

/// Measure and judge the environment (preflight), printing what is not a
/// pass. Foreign load is judged by what is busy now (`load.now`), so the
/// load average a compile right before the run left behind (`make bench`)
/// costs no wait.
async fn judge_environment(input: PreflightInput) -> anyhow::Result<EnvReport> {
    let rep = tokio::task::spawn_blocking(move || preflight::run(&input, Path::new("/")))
        .await
        .context("preflight")?;
    eprintln!("preflight: environment {}", rep.verdict);
    for c in rep
        .checks
        .iter()
        .filter(|c| c.verdict != preflight::CheckStatus::Pass)
    {
        eprintln!(
            "  {} {}: {} (threshold {})",
            c.verdict, c.id, c.measured, c.threshold
        );
    }
    Ok(rep)
}

/// Step 2: the results store. A new run judges the environment (preflight)
/// and records it; a resumed run judges it again, refuses it by the same
/// rule, and keeps the new verdict beside the first. Returns the store and
/// the preflight report of this invocation.
async fn open_store(args: &RunOptions, setup: &mut Setup) -> anyhow::Result<(Store, EnvReport)> {
    let profile = &setup.profile;
    let started = Utc::now();
    let dir_name = match &setup.resumed {
        Some(s) => s.results().run_id.clone(),
        None => report::run_dir_name(started, &profile.name),
    };
    let input = PreflightInput {
        run_id: Some(dir_name.clone()),
        ..PreflightInput::from_profile(profile, &setup.host)
    };
    let judging = std::time::Instant::now();
    let rep = judge_environment(input).await?;
    let preflight_s = judging.elapsed().as_secs_f64();
    let environment = environment::admit(&rep, args.accept_env, profile.thresholds.preflight)?;
    if let Some(mut s) = setup.resumed.take() {
        eprintln!(
            "resuming {}: {} cell(s) left",
            s.dir().display(),
            s.results().remaining().len()
        );
        s.update(|r| {
            r.resumed_environments.push(ResumedEnvironment {
                at: started,
                environment,
            });
            // This invocation's clock, not the interrupted one's.
            r.timing = RunTiming {
                preflight_s,
                ..RunTiming::default()
            };
        })?;
        return Ok((s, rep));
    }
    let mut results = super::new_results(
        &dir_name,
        started,
        profile,
        &setup.plan,
        environment,
        profile.thresholds,
    );
    results.timing.preflight_s = preflight_s;
    // Which code was measured: the repository the run is started in.
    results.git = std::env::current_dir()
        .ok()
        .and_then(|d| crate::host::git::read(&d));
    let store = Store::create(&args.output.join(&dir_name), results)?;
    report::link_latest(&args.output, &dir_name)?;
    Ok((store, rep))
}

/// Step 3: Ctrl-C or SIGTERM. The first stops the run cleanly (the returned
/// token is cancelled), a second quits at once.
fn on_interrupt(run: &RunId, profile: Option<&Path>) -> Cancel {
    let cancel = Cancel::new();
    let (token, run) = (cancel.clone(), run.clone());
    // A profile with `hosts:` left objects on those hosts too.
    let hosts = profile
        .map(|p| format!(" --profile {}", p.display()))
        .unwrap_or_default();
    tokio::spawn(async move {
        let how = crate::host::signal::stop_requested().await;
        eprintln!("\n{how}: stopping, removing this run's containers and writing the report (Ctrl-C again to quit at once)");
        token.cancel();
        crate::host::signal::stop_requested().await;
        eprintln!(
            "quit; remove what is left with `fairground clean --run {}{hosts}`",
            run.as_str()
        );
        std::process::exit(i32::from(ExitCode::Interrupted.code()));
    });
    cancel
}

/// Step 4: every cell through the real lab: images, the run spec, the run's
/// network, the execution, and the removal of what the run created (also
/// after an error or Ctrl-C).
async fn measure(
    store: &mut Store,
    setup: &Setup,
    run: &RunId,
    cancel: &Cancel,
    started: std::time::Instant,
) -> anyhow::Result<RunOutcome> {
    // Absolute: framework prebuilds run cargo inside each framework folder,
    // where a relative target directory would land somewhere else.
    let root = std::env::current_dir().context("reading the current directory")?;
    let mut opts = ImageOptions::new(root, run.clone());
    opts.progress = std::sync::Arc::new(|line: &str| eprintln!("  {line}"));
    let engine = DockerEngine::connect(opts).await?;
    // An interrupted invocation of this run (killed, or Ctrl-C twice) may
    // have left its server running on the server's cores: remove it before
    // anything is measured, and say so.
    let hosts = match &setup.profile.hosts {
        None => None,
        Some(h) => Some(HostEngines::connect(h, engine.options()).await?),
    };
    let mut daemons: Vec<&DockerEngine> = vec![&engine];
    daemons.extend(hosts.iter().flat_map(|h| h.all()));
    for old in store.results().docker_runs.clone() {
        for daemon in &daemons {
            let gone = daemon.cleanup(&RunId(old.clone())).await.with_context(|| {
                format!(
                    "removing what run {old} left behind on {}; \
                     `fairground clean --run {old}` does it too",
                    daemon.endpoint()
                )
            })?;
            if !gone.is_empty() {
                eprintln!(
                    "removed what an earlier invocation of this run left: {}",
                    gone.summary()
                );
            }
        }
    }
    store.update(|r| r.docker_runs.push(run.as_str().to_string()))?;
    let checking = std::time::Instant::now();
    // Only the frameworks with a cell to measure need an image: the others
    // are skipped by the plan (a profile of database scenarios builds
    // nothing for a framework that declares none).
    let measured: Vec<Framework> = setup
        .frameworks
        .iter()
        .filter(|f| setup.plan.frameworks.iter().any(|p| p.name == f.name()))
        .cloned()
        .collect();
    // The database image only for a plan with a database cell: a profile
    // without one should not wait minutes for a PostgreSQL base it never
    // starts.
    let database = setup
        .plan
        .frameworks
        .iter()
        .any(|p| p.scenarios.iter().any(|s| s.needs_database()));
    // On this daemon alone, each framework's image is built just before its
    // first server: the first round waits for one image, not the roster's,
    // and a framework whose image does not build fails alone. Loaders on
    // other daemons (`hosts:`) need every image carried there first.
    let (images, tags, deferred) = if hosts.is_none() {
        let (images, tags) = tokio::select! {
            built = engine.ensure_run_images(&measured, database) => built.context("building the images")?,
            () = cancel.cancelled() => return Ok(RunOutcome::Interrupted),
        };
        (images, tags, measured.clone())
    } else {
        let images = tokio::select! {
            images = engine.ensure_images(&measured, database) => images.context("building the images")?,
            () = cancel.cancelled() => return Ok(RunOutcome::Interrupted),
        };
        let tags = images.tags();
        (images, tags, Vec::new())
    };
    if let Some(h) = &hosts {
        let mut topology = h.topology(setup.profile.network);
        eprintln!(
            "hosts: server on {}, loaders on {}; loaders reach the server at {} ({}), through its {}",
            topology.server,
            topology.loaders.join(", "),
            topology.server_address,
            topology.server_address_source,
            topology.traffic_path
        );
        topology.images = tokio::select! {
            c = h.carry(&engine, &images) => c?,
            () = cancel.cancelled() => return Ok(RunOutcome::Interrupted),
        };
        topology.clocks = h.clocks().await;
        topology.preflight = h.preflight(run, &engine).await;
        for p in &topology.preflight {
            eprintln!("preflight on {}: environment {}", p.endpoint, p.verdict);
            for c in p
                .checks
                .iter()
                .filter(|c| !c.verdict.eq_ignore_ascii_case("pass"))
            {
                eprintln!("  {} {}: {}", c.verdict, c.id, c.measured);
            }
        }
        for c in &topology.clocks {
            eprintln!(
                "  clock of {}: {:+.1} ms against this machine's (± {:.1} ms)",
                c.endpoint,
                c.offset_ms,
                c.round_trip_ms / 2.0
            );
        }
        store.update(|r| r.topology = Some(topology))?;
    }
    let image_check_s = checking.elapsed().as_secs_f64();
    store.update(|r| {
        record_frameworks(r, &measured, &images);
        if !r.loader_images.contains(&images.fairground.tag) {
            r.loader_images.push(images.fairground.tag.clone());
        }
        r.timing.image_check_s = image_check_s;
    })?;
    let spec = RunSpec::resolve(&setup.profile, &setup.placement, &measured, &tags)?;
    if let Some(certs) = spec.certs() {
        // The CA the loaders trusted, beside the results: anyone can check
        // which certificate a TLS cell was measured against. (The server's
        // key stays in the containers; it dies with the run.)
        let dir = store.dir().join("tls");
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join(crate::tls::CA_FILE), &certs.ca_pem))
            .with_context(|| format!("writing the run's CA into {}", dir.display()))?;
    }
    let rules = RunRules {
        thresholds: store.results().thresholds,
        // A resumed run is judged by its latest environment as well.
        environment_forced: store.results().environment.forced
            || store
                .results()
                .resumed_environments
                .last()
                .is_some_and(|e| e.environment.forced),
    };
    let mut lab = match &hosts {
        None => DockerLab::open(&engine, run.clone(), setup.profile.network).await?,
        Some(h) => {
            DockerLab::open_spread(h.server(), run.clone(), setup.profile.network, h.spread())
        }
    };
    lab.keep_logs_in(store.dir().join(report::LOGS_DIR));
    lab.defer_images(deferred);
    let (mut observer, live) = progress::for_stderr(setup.plan.total_steps(), setup.plan.step_time);
    if let Some(live) = live {
        lab.show_live(live);
    }
    let job = Job {
        plan: &setup.plan,
        spec: &spec,
        rules: &rules,
        started,
    };
    let outcome = execute(&mut lab, store, job, observer.as_mut(), cancel).await;
    drop(observer);
    eprintln!("{}", timing_line(&store.results().timing));
    // Whatever happened, remove this run's containers and network.
    match lab.close().await {
        Ok(r) if !r.is_empty() => eprintln!("cleanup: {}", r.summary()),
        Ok(_) => {}
        Err(e) => eprintln!(
            "cleanup of run {} failed: {e:#}; remove what is left with `fairground clean --run {}`",
            run.as_str(),
            run.as_str()
        ),
    }
    outcome
}

/// `timing: …`: where this invocation's wall time went, for the run log.
fn timing_line(t: &RunTiming) -> String {
    let ratio = t
        .overhead_ratio()
        .map_or_else(String::new, |r| format!(" ({r:.2}× the warm-up + window)"));
    format!(
        "timing (wall): preflight {:.1} s, image check {:.1} s, start to first round {:.1} s; \
         first round to end {:.1} s for {:.1} s of warm-up + window{ratio}",
        t.preflight_s,
        t.image_check_s,
        t.to_first_round_s,
        t.first_round_to_end_s,
        t.phases.load_s()
    )
}

/// Step 5: close the record, write the report (even after an error) and
/// say how the run ended.
fn finish(
    store: &mut Store,
    outcome: anyhow::Result<RunOutcome>,
    env_report: &EnvReport,
    objectives: &[crate::results::Objective],
) -> anyhow::Result<ExitCode> {
    let interrupted = matches!(outcome, Ok(RunOutcome::Interrupted));
    let engine_lost = matches!(outcome, Ok(RunOutcome::EngineLost));
    store.update(|r| {
        // Cells can also be missing because a framework failed; the report
        // lists those from the plan, `interrupted` only means Ctrl-C.
        r.interrupted = interrupted;
        // A run the engine walked out of did not finish either.
        if !interrupted && !engine_lost {
            r.finished_at = Some(Utc::now());
        }
        let after = preflight::after_run(env_report, r.timing.load_after_builds);
        match r.resumed_environments.last_mut() {
            Some(resumed) => environment::add_after_run(&mut resumed.environment, &after),
            None => environment::add_after_run(&mut r.environment, &after),
        }
        // Judged on what the run holds now, so a resumed run is judged on
        // all of its cells; written before any report reads it.
        r.objectives = crate::judge::objectives::judge(r, objectives);
    })?;
    let files = report::write_run(store.dir(), store.results())?;
    let r = store.results();
    let count = |s: Status| r.cells.iter().filter(|c| c.verdict.status == s).count();
    eprintln!(
        "wrote {} files to {}: {} accepted, {} flagged, {} rejected cell(s); read {}",
        files.len(),
        store.dir().display(),
        count(Status::Accepted),
        count(Status::Flagged),
        count(Status::Rejected),
        store.dir().join("results.md").display()
    );
    if let Some(p) = &r.precision {
        eprintln!("precision: {}", p.sentence());
    }
    if let Some(b) = &r.budget {
        eprintln!("{}", b.sentence());
    }
    let missed = objectives_line(&r.objectives);
    match outcome {
        Err(e) => Err(e),
        Ok(RunOutcome::Interrupted) => {
            eprintln!(
                "resume with: fairground run --resume {}",
                store.dir().display()
            );
            Ok(ExitCode::Interrupted)
        }
        Ok(RunOutcome::EngineLost) => {
            let what = r
                .incidents
                .last()
                .map_or_else(String::new, |i| format!(" ({})", i.what));
            eprintln!(
                "error: the Docker daemon stopped answering mid-run{what}. Every result measured \
                 before it is written. When the daemon is back (`docker info`), resume with: \
                 fairground run --resume {}",
                store.dir().display()
            );
            Ok(ExitCode::DockerUnavailable)
        }
        Ok(RunOutcome::Finished) => {
            let missing = r.remaining();
            if missing.is_empty() {
                return Ok(if missed {
                    ExitCode::ObjectiveMissed
                } else {
                    ExitCode::Ok
                });
            }
            let names: std::collections::BTreeSet<&str> =
                missing.iter().map(|k| k.framework.as_str()).collect();
            eprintln!(
                "error: {} of {} planned cell(s) have no complete result ({}); results.md lists \
                 the incidents. Fix what they name, then `fairground run --resume {}` measures \
                 only what is missing",
                missing.len(),
                r.plan.len(),
                names.into_iter().collect::<Vec<_>>().join(", "),
                store.dir().display()
            );
            Ok(ExitCode::Failure)
        }
    }
}

/// Print the objectives' tally (and each one missed); whether any was.
fn objectives_line(outcomes: &[crate::results::ObjectiveOutcome]) -> bool {
    use crate::results::ObjectiveStatus as S;
    if outcomes.is_empty() {
        return false;
    }
    let n = |s: S| outcomes.iter().filter(|o| o.status == s).count();
    eprintln!(
        "objectives: {} met, {} missed, {} undecided (results.md, \"Objectives\")",
        n(S::Met),
        n(S::Missed),
        n(S::Undecided)
    );
    for o in outcomes.iter().filter(|o| o.status == S::Missed) {
        eprintln!("  missed: {} on {}: {}", o.objective.text, o.cell, o.why);
    }
    crate::judge::objectives::any_missed(outcomes)
}

/// `fairground run`, step by step.
async fn run_async(args: &RunOptions) -> anyhow::Result<ExitCode> {
    let started = std::time::Instant::now();
    let mut setup = setup(args)?;
    eprintln!(
        "fairground run: profile `{}` ({})",
        setup.profile.name,
        setup.profile_path.display()
    );
    eprint!("{}", setup.plan.describe());
    let (mut store, env_report) = open_store(args, &mut setup).await?;
    eprintln!("results: {}", store.dir().display());
    let run = RunId::new();
    let cancel = on_interrupt(
        &run,
        setup
            .profile
            .hosts
            .is_some()
            .then_some(setup.profile_path.as_path()),
    );
    eprintln!(
        "docker objects of this run carry the label fairground.run={}",
        run.as_str()
    );
    let outcome = measure(&mut store, &setup, &run, &cancel, started).await;
    finish(&mut store, outcome, &env_report, &setup.profile.objectives)
}
