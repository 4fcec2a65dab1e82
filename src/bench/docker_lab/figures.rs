//! The lab's arithmetic, free of Docker: a round's raw figures from the
//! loader's report and the server's samples, where its wall time went, and
//! what verification found in the results' terms.

use crate::contract::Scenario;
use crate::docker::container::LoaderSpec;
use crate::probe::Series;
use crate::results::{Exclusion, LabFigures, PhaseTimes, ServerSamples, VerifyOutcome};
use crate::roles::load::LoadReport;
use crate::verify;

/// What verify found, in the results' terms.
pub fn outcome(
    report: &verify::VerifyReport,
    scenarios: &[Scenario],
    protocol: crate::contract::Protocol,
) -> VerifyOutcome {
    let all = report
        .checks
        .iter()
        .chain(report.scenarios.iter().flat_map(|s| s.checks.iter()));
    let (mut checks, mut failed) = (0u64, 0u64);
    for c in all {
        checks += 1;
        if c.excludes() {
            failed += 1;
        }
    }
    let mut passed = Vec::new();
    let mut excluded = Vec::new();
    for &s in scenarios {
        match report.excluded(s) {
            None => passed.push(s),
            Some(reason) => excluded.push(Exclusion {
                scenario: s,
                protocol,
                reason,
            }),
        }
    }
    VerifyOutcome {
        checks,
        failed,
        passed,
        excluded,
    }
}

/// Where a round's wall time went, from the orchestrator's instants (ns,
/// CLOCK_MONOTONIC): `asked` the loader, had its report at `loaded`, done
/// sampling at `done`; and the loader's own (its report's window, warm-up
/// and drain). Containers of a local daemon share the host's monotonic
/// clock, so the loader's first connect splits its start from its exit;
/// with a remote daemon (the connect outside `asked..loaded`) the whole
/// loader overhead is counted as its exit.
pub fn loader_phases(load: &LoadReport, asked: u64, loaded: u64, done: u64) -> PhaseTimes {
    let s = |ns: u64| ns as f64 / 1e9;
    let w = load.window;
    let warmup_ns = (load.warmup.seconds * 1e9) as u64;
    let drain_ns = (load.drain_s * 1e9) as u64;
    let gate = w.start_mono_ns.saturating_sub(warmup_ns);
    let drained = w.end_mono_ns + drain_ns;
    let busy = drained.saturating_sub(w.connects_mono_ns);
    let (loader_start, loader_exit) =
        if w.connects_mono_ns >= asked && drained <= loaded && w.connects_mono_ns > 0 {
            (w.connects_mono_ns - asked, loaded - drained)
        } else {
            (0, loaded.saturating_sub(asked).saturating_sub(busy))
        };
    PhaseTimes {
        loader_start_s: s(loader_start),
        connect_s: s(gate.saturating_sub(w.connects_mono_ns)),
        warmup_s: load.warmup.seconds,
        window_s: s(w.end_mono_ns.saturating_sub(w.start_mono_ns)),
        drain_s: load.drain_s,
        loader_exit_s: s(loader_exit),
        sampling_s: s(done.saturating_sub(loaded)),
        ..PhaseTimes::default()
    }
}

/// The loader shares this kernel's CLOCK_MONOTONIC: its window's instants
/// bracket the server's samples directly (`Round::window_clock`).
pub const WINDOW_CLOCK_MONOTONIC: &str = "monotonic (loader on this kernel)";
/// The loader ran on another host: its window's instants were carried on
/// the wall clock (unix time) onto this machine's monotonic clock.
pub const WINDOW_CLOCK_WALL: &str = "wall clock (loader on another host)";

/// How the window's memory peak was measured (`ServerUse::memory_peak_source`).
pub const PEAK_FROM_MARK: &str = "high-water mark";
/// The window's memory peak is its largest sample.
pub const PEAK_FROM_SAMPLES: &str = "samples";

/// What the lab read around one loader run, from the server's samples:
/// CPU interpolated at the loader's window instants (`load.window`, on the
/// samples' clock), memory from the samples inside the window (and before
/// the loader connected), the window's peak from the high-water mark
/// `window_peak` when there is one. The rest (lifetime peak, OOM kills,
/// restarts, host) the lab fills in once the loader is done.
pub fn lab_figures(
    load: &LoadReport,
    series: &Series,
    window_peak: Option<u64>,
    loader: &LoaderSpec,
    several_loaders: bool,
) -> LabFigures {
    let w = load.window;
    let in_window = series.mem_between(w.start_mono_ns, w.end_mono_ns);
    let before: Vec<f64> = series
        .samples
        .iter()
        .filter(|s| s.t_mono_ns < w.connects_mono_ns)
        .map(|s| s.mem_bytes as f64)
        .collect();
    let max_sample = in_window.iter().copied().max();
    let (peak, source) = match (window_peak, max_sample) {
        (Some(p), Some(m)) => (Some(p.max(m)), PEAK_FROM_MARK),
        (Some(p), None) => (Some(p), PEAK_FROM_MARK),
        (None, m) => (m, PEAK_FROM_SAMPLES),
    };
    // Several loaders: the window is the union of theirs (earliest start
    // to latest end) but the 2xx are counted over each loader's own
    // window, whose mean length is `measured_s`. The server's CPU is read
    // over the union and scaled to that mean length, so CPU per request
    // divides two figures of one interval (one loader: the same window).
    let union_s = w.end_mono_ns.saturating_sub(w.start_mono_ns) as f64 / 1e9;
    let cpu = series
        .cpu_usec_between(w.start_mono_ns, w.end_mono_ns)
        .map(|c| {
            if several_loaders && union_s > load.measured_s && union_s > 0.0 {
                (c as f64 * load.measured_s / union_s).round() as u64
            } else {
                c
            }
        });
    // Several loaders: each runs the spec's threads; the merged report
    // counts all of them.
    let threads = if several_loaders {
        loader.args.threads.unwrap_or(1)
    } else {
        load.settings.threads
    };
    LabFigures {
        window_clock: WINDOW_CLOCK_MONOTONIC.to_string(),
        loader_usable_cpus: loader.resources.usable_cpus(threads),
        loader_threads: threads as u32,
        server: ServerSamples {
            cpu_time_us: cpu,
            cpu_unknown: cpu.is_none().then(|| cpu_unknown_reason(series, w)),
            sampler_stopped_by: series.stopped_by.clone(),
            memory_before_bytes: crate::stats::median(&before).map(|m| m.round() as u64),
            memory_samples_bytes: in_window,
            memory_window_peak_bytes: peak,
            memory_peak_source: source.to_string(),
            memory_lifetime_peak_bytes: None,
            oom_kills: None,
            restarts: 0,
        },
        host: None,
        loaders: Vec::new(),
        machine: None,
        database: None,
    }
}

/// The database's figures over the loader's window: its CPU and memory
/// read from `series` as the server's are, the statements counted between
/// the window's edges (`before` at its start, `after` at its end).
pub fn database_figures(
    load: &LoadReport,
    series: &Series,
    before: anyhow::Result<crate::docker::database::StatementCounts>,
    after: Option<anyhow::Result<crate::docker::database::StatementCounts>>,
    spec: &crate::plan::spec::DatabaseSpec,
) -> crate::results::DatabaseSamples {
    let w = load.window;
    let cpu = series.cpu_usec_between(w.start_mono_ns, w.end_mono_ns);
    // The counts are read as the window opens and as it closes (a query
    // away), at instants the database's own clock gives: the statements
    // of that span, clipped to the window's end (the drain only answers
    // what is in flight), over the answers of that span at the window's
    // rate.
    let (statements, statements_span_s, statements_unknown) = match (before, after) {
        (Ok(b), Some(Ok(a))) => {
            let d = b.since(a);
            let from = (b.at_unix_us * 1000).max(w.start_unix_ns);
            let to = (a.at_unix_us * 1000).min(w.end_unix_ns);
            let span_s = to.saturating_sub(from) as f64 / 1e9;
            let window_s = w.end_unix_ns.saturating_sub(w.start_unix_ns) as f64 / 1e9;
            if span_s < window_s / 2.0 {
                (
                    None,
                    None,
                    Some(format!(
                        "pg_stat_statements was read {span_s:.2} s apart inside the {window_s:.2} s window: too late after its start to stand for it"
                    )),
                )
            } else {
                (
                    Some(crate::results::DatabaseStatements {
                        world_reads: d.world_reads,
                        world_updates: d.world_updates,
                        rows_updated: d.rows_updated,
                        fortune_reads: d.fortune_reads,
                        total: d.total,
                    }),
                    Some(span_s),
                    None,
                )
            }
        }
        (Err(e), _) | (_, Some(Err(e))) => (
            None,
            None,
            Some(format!("pg_stat_statements could not be read: {e:#}")),
        ),
        (Ok(_), None) => (
            None,
            None,
            Some("the loader never announced the end of its window".to_string()),
        ),
    };
    crate::results::DatabaseSamples {
        cpu_time_us: cpu,
        cpu_unknown: cpu.is_none().then(|| cpu_unknown_reason(series, w)),
        memory_samples_bytes: series.mem_between(w.start_mono_ns, w.end_mono_ns),
        statements,
        statements_span_s,
        statements_unknown,
        // Read after the load, once the backends flushed: the lab adds it.
        work: None,
        table_change: None,
        cpus: spec.resources.cpus.unwrap_or(1.0),
        shares_cores_with: spec.shares_cores_with.clone(),
    }
}

/// Why the server's CPU over window `w` could not be read from `series`:
/// the sampler's own reason when it stopped early, else which edge of the
/// window has no sample on one side.
fn cpu_unknown_reason(series: &Series, w: crate::results::WindowTimes) -> String {
    let edge = |t: u64, name: &str| {
        series
            .cpu_usec_at(t)
            .is_none()
            .then(|| format!("no CPU sample on both sides of the window's {name}"))
    };
    let why = edge(w.start_mono_ns, "start")
        .or_else(|| edge(w.end_mono_ns, "end"))
        .unwrap_or_else(|| "the window's instants are not on the samples' clock".into());
    match &series.stopped_by {
        Some(stop) => format!("{why}: the sampler stopped: {stop}"),
        None if series.samples.is_empty() => format!("{why}: no sample was taken"),
        None => why,
    }
}

/// The loader's window on this machine's monotonic clock, and which clock
/// carried it there. A loader on this kernel shares CLOCK_MONOTONIC (its
/// first connect falls between `asked` and `loaded`, this machine's
/// instants of asking for the load and having its report): kept as it is.
/// One on another host (a remote `DOCKER_HOST`) does not: its instants are
/// carried on the wall clock, `unix_minus_mono` being this machine's
/// offset between the two.
pub fn on_this_clock(
    w: crate::results::WindowTimes,
    asked: u64,
    loaded: u64,
    unix_minus_mono: i128,
) -> (crate::results::WindowTimes, &'static str) {
    if w.connects_mono_ns >= asked && w.connects_mono_ns <= loaded {
        return (w, WINDOW_CLOCK_MONOTONIC);
    }
    let mono = |unix: u64| (unix as i128 - unix_minus_mono).max(0) as u64;
    let mut out = w;
    out.start_mono_ns = mono(w.start_unix_ns);
    out.end_mono_ns = mono(w.end_unix_ns);
    // The connects keep their distance before the window's start.
    out.connects_mono_ns = out
        .start_mono_ns
        .saturating_sub(w.start_mono_ns.saturating_sub(w.connects_mono_ns));
    (out, WINDOW_CLOCK_WALL)
}
