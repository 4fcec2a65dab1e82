//! Raw → validated: fill defaults, check every rule that types alone cannot
//! express, and point each failure at the field that caused it.
//!
//! This is the only place that judges a profile. Checks run top to bottom in
//! file order and stop at the first failure, so the user gets one message
//! that names the file, line, column and field. A profile that passes here
//! can run: every limit it asks for is one Docker and this host can honour.
//!
//! One responsibility, one file: every rule a profile is held to, in the
//! order a reader of docs/profiles.md meets them.

use std::time::Duration;

use super::error::{Locator, ProfileError};
use super::raw::{
    RawCpuset, RawDatabase, RawFrameworks, RawLimits, RawLoad, RawLoadMode, RawObjective,
    RawProfile, RawRounds, RawThresholds, RawWarmup, WarmupMode, WarmupSpec,
};
use super::span::{index, key};
use super::types::*;
use super::{suggest, HostFacts};
use crate::contract::Scenario;
use crate::host::Sysctls;

type Result<T> = std::result::Result<T, ProfileError>;

/// Sysctls a profile may set, with the shape of their value. All are
/// per-network-namespace (Docker accepts `net.*` sysctls only in a private
/// network namespace), and all bear on HTTP benchmarking. Anything else is
/// refused so a typo cannot silently leave a kernel default in place.
pub const SYSCTLS: &[(&str, SysctlKind)] = &[
    ("net.core.somaxconn", SysctlKind::Int),
    ("net.ipv4.ip_local_port_range", SysctlKind::PortRange),
    ("net.ipv4.ip_unprivileged_port_start", SysctlKind::Int),
    ("net.ipv4.tcp_fin_timeout", SysctlKind::Int),
    ("net.ipv4.tcp_keepalive_intvl", SysctlKind::Int),
    ("net.ipv4.tcp_keepalive_probes", SysctlKind::Int),
    ("net.ipv4.tcp_keepalive_time", SysctlKind::Int),
    ("net.ipv4.tcp_max_syn_backlog", SysctlKind::Int),
    ("net.ipv4.tcp_max_tw_buckets", SysctlKind::Int),
    ("net.ipv4.tcp_fastopen", SysctlKind::Int),
    ("net.ipv4.tcp_no_metrics_save", SysctlKind::Int),
    ("net.ipv4.tcp_rmem", SysctlKind::Triple),
    ("net.ipv4.tcp_wmem", SysctlKind::Triple),
    ("net.ipv4.tcp_slow_start_after_idle", SysctlKind::Int),
    ("net.ipv4.tcp_syncookies", SysctlKind::Int),
    ("net.ipv4.tcp_timestamps", SysctlKind::Int),
    ("net.ipv4.tcp_tw_reuse", SysctlKind::Int),
    ("net.ipv4.tcp_congestion_control", SysctlKind::Word),
    ("net.ipv4.tcp_notsent_lowat", SysctlKind::Int),
];

/// The shape of a sysctl's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SysctlKind {
    /// A non-negative integer.
    Int,
    /// Two ports `LOW HIGH`, 1 ≤ LOW ≤ HIGH ≤ 65535.
    PortRange,
    /// Three integers `MIN DEFAULT MAX`.
    Triple,
    /// One word, e.g. a congestion-control algorithm.
    Word,
}

use crate::host::sysctl::IP_LOCAL_PORT_RANGE as PORT_RANGE;

/// Validate `raw` (read from the file `loc` describes) into a [`Profile`].
pub(crate) fn validate(
    raw: RawProfile,
    name: &str,
    loc: &Locator<'_>,
    host: &HostFacts,
) -> Result<Profile> {
    let d = Profile::default();
    let network = raw.network.unwrap_or(d.network);

    let frameworks = frameworks(raw.frameworks, loc, host)?;
    let scenarios = scenarios(raw.scenarios, loc)?;
    let concurrency = concurrency(raw.concurrency, loc)?;
    let protocol = protocols(raw.protocol, loc)?;
    // The rule verification follows too (`Scenario::runs_over`).
    let uncarried = scenarios.iter().find_map(|s| {
        protocol
            .iter()
            .enumerate()
            .find(|(_, p)| !s.runs_over(**p))
            .map(|(i, p)| (*s, i, *p))
    });
    if let Some((s, i, p)) = uncarried {
        let why = if s.is_websocket() {
            "WebSocket runs over an HTTP/1.1 upgrade (http1, or https for wss://); measure \
             HTTP/2 in a profile of its own"
        } else {
            "gRPC runs over HTTP/2 (h2c, or h2 over TLS); measure HTTP/1.1 in a profile of its own"
        };
        return Err(loc.value(
            &index("protocol", i),
            format!("`{p}` cannot carry `{s}`: {why}"),
        ));
    }
    let max_conc = concurrency.iter().copied().max().unwrap_or(0);
    let min_conc = concurrency.iter().copied().min().unwrap_or(0);
    let warmup = warmup(raw.warmup, loc)?;
    let duration = positive(raw.duration.map(|h| h.0), "duration", d.duration, loc)?;
    if duration < MIN_DURATION {
        return Err(loc.value(
            "duration",
            "must be at least 1s: resources are sampled once a second, so a shorter window has no sample",
        ));
    }
    let rounds = rounds(raw.rounds, d.rounds, loc)?;

    let server = limits(raw.server, "server", Limits::server(network), loc, host)?;
    let loader = limits(raw.loader, "loader", Limits::loader(network), loc, host)?;
    let load = load(raw.load, loader.cores() as u32, min_conc, loc)?;
    let database = database(raw.database, loc, host)?;
    if let LoadMode::FixedRate { rate } = load.mode {
        // Each connection sends once every C/R seconds. Unless its turn
        // comes at least twice a window, some connections get no answer
        // inside it and the cell would read "connections short" for a
        // reason of the profile's own making.
        let interval_s = f64::from(max_conc) / rate as f64;
        let window_s = duration.as_secs_f64();
        if interval_s > window_s / 2.0 {
            return Err(loc.value(
                "load.rate",
                format!(
                    "at {rate} req/s over {max_conc} connections each connection sends once every {interval_s:.2} s ({max_conc} / {rate}), but the {window_s} s window needs every connection's turn to come at least twice; raise the rate to at least {} req/s, lengthen `duration` to at least {:.0} s, or lower the concurrency",
                    (2.0 * f64::from(max_conc) / window_s).ceil() as u64,
                    (2.0 * interval_s).ceil()
                ),
            ));
        }
    }

    // Descriptors: each side holds one per connection plus its own.
    for (side, lim) in [("server", &server), ("loader", &loader)] {
        let need = u64::from(max_conc) + NOFILE_HEADROOM;
        if lim.nofile < need {
            return Err(loc.value(
                &format!("{side}.nofile"),
                format!(
                    "{} is below the highest concurrency ({max_conc}) plus {NOFILE_HEADROOM} descriptors of headroom; set it to at least {need} or the {side} cannot hold every connection",
                    lim.nofile
                ),
            ));
        }
    }

    let allow_shared_cores = raw.allow_shared_cores.unwrap_or(false);
    network_rules(network, &server, &loader, max_conc, loc, host)?;

    let thresholds = thresholds(raw.thresholds, loc)?;
    let objectives = objectives(raw.objectives, &scenarios, &frameworks, loc, host)?;
    let idle_settle = positive(
        raw.idle_settle.map(|h| h.0),
        "idle_settle",
        d.idle_settle,
        loc,
    )?;
    let readiness_timeout = positive(
        raw.readiness_timeout.map(|h| h.0),
        "readiness_timeout",
        d.readiness_timeout,
        loc,
    )?;

    let interleave_rounds = raw.interleave_rounds.unwrap_or(false);
    let budget = budget(raw.budget.map(|h| h.0), rounds, interleave_rounds, loc)?;
    let profile = Profile {
        name: name.to_string(),
        description: raw.description.unwrap_or_default(),
        frameworks,
        scenarios,
        concurrency,
        protocol,
        warmup,
        duration,
        rounds,
        restart_between_rounds: raw.restart_between_rounds.unwrap_or(false),
        interleave_rounds,
        budget,
        load,
        server,
        loader,
        database,
        allow_shared_cores,
        network,
        idle_settle,
        readiness_timeout,
        thresholds,
        hosts: raw
            .hosts
            .map(|h| super::hosts::validate(h, loc))
            .transpose()?,
        objectives,
    };
    placement(&profile, loc, host)?;
    Ok(profile)
}

/// `rounds`: a count, or `{min, max, precision}` with its defaults.
fn rounds(raw: Option<RawRounds>, default: Rounds, loc: &Locator<'_>) -> Result<Rounds> {
    let count = |n: u64, field: &str| -> Result<u32> {
        u32::try_from(n).map_err(|_| loc.value(field, "is too large"))
    };
    let spec = match raw {
        None => return Ok(default),
        Some(RawRounds::Count(0)) => return Err(loc.value("rounds", "must be at least 1")),
        Some(RawRounds::Count(n)) => return Ok(Rounds::Fixed(count(n, "rounds")?)),
        Some(RawRounds::UntilPrecise(spec)) => spec,
    };
    let min = count(spec.min.unwrap_or(DEFAULT_MIN_ROUNDS.into()), "rounds.min")?;
    let max = count(spec.max.unwrap_or(DEFAULT_MAX_ROUNDS.into()), "rounds.max")?;
    let precision = spec.precision.unwrap_or(DEFAULT_PRECISION);
    if min < DEFAULT_MIN_ROUNDS {
        return Err(loc.value(
            "rounds.min",
            format!("{min} is too few: an interval needs at least {DEFAULT_MIN_ROUNDS} rounds (with two, Student's t at 95% is 12.7 and says nothing)"),
        ));
    }
    if max < min {
        let at = if spec.max.is_some() {
            "rounds.max"
        } else {
            "rounds.min"
        };
        return Err(loc.value(
            at,
            format!("max ({max}) is below min ({min}); set `max` to at least {min}"),
        ));
    }
    if !(precision > 0.0 && precision < 1.0) {
        return Err(loc.value(
            "rounds.precision",
            format!("{precision} is not a fraction between 0 and 1; write 0.02 for ±2%"),
        ));
    }
    Ok(Rounds::UntilPrecise {
        min,
        max,
        precision,
    })
}

/// `budget`: a positive duration, on a profile whose rounds go on until
/// precise and whose frameworks alternate block by block (the budget is
/// spent a block at a time, on the cells that still lack the precision).
fn budget(
    v: Option<Duration>,
    rounds: Rounds,
    interleave_rounds: bool,
    loc: &Locator<'_>,
) -> Result<Option<Duration>> {
    let Some(b) = v else {
        return Ok(None);
    };
    if b.is_zero() {
        return Err(loc.value("budget", "must be longer than zero"));
    }
    if rounds.precision().is_none() {
        return Err(loc.value(
            "budget",
            "spends rounds until each cell is precise, so it needs `rounds: {min, max, precision}` (a fixed `rounds: N` leaves nothing to spend it on)",
        ));
    }
    if !interleave_rounds {
        return Err(loc.value(
            "budget",
            "is spent a block of rounds at a time (each framework once per block), so it needs `interleave_rounds: true`; without it the frameworks run first would take the whole budget",
        ));
    }
    Ok(Some(b))
}

/// A duration that must be above zero; `default` when absent.
fn positive(
    v: Option<Duration>,
    field: &str,
    default: Duration,
    loc: &Locator<'_>,
) -> Result<Duration> {
    match v {
        None => Ok(default),
        Some(d) if d.is_zero() => Err(loc.value(field, "must be longer than zero")),
        Some(d) => Ok(d),
    }
}

fn frameworks(
    raw: Option<RawFrameworks>,
    loc: &Locator<'_>,
    host: &HostFacts,
) -> Result<Frameworks> {
    let (names, field, build): (_, _, fn(_) -> _) = match raw {
        None | Some(RawFrameworks::All) => return Ok(Frameworks::All),
        Some(RawFrameworks::Only(n)) => (n, "frameworks", Frameworks::Only),
        Some(RawFrameworks::Exclude(n)) => (n, "frameworks.exclude", Frameworks::Exclude),
    };
    if names.is_empty() && field == "frameworks" {
        return Err(loc.value(
            field,
            "the list is empty; name at least one framework, or write `all`",
        ));
    }
    for (i, n) in names.iter().enumerate() {
        let at = index(field, i);
        if names[..i].contains(n) {
            return Err(loc.value(&at, format!("`{n}` is listed twice")));
        }
        if let Some(roster) = &host.frameworks {
            if !roster.names.contains(n) {
                let known = if roster.names.is_empty() {
                    "none (no subfolder there holds a framework.yaml)".to_string()
                } else {
                    roster.names.join(", ")
                };
                return Err(loc.value_hint(
                    &at,
                    format!(
                        "no framework `{n}` under {}; known: {known}",
                        roster
                            .dirs
                            .iter()
                            .map(|d| format!("{}/", d.display()))
                            .collect::<Vec<_>>()
                            .join(" or ")
                    ),
                    suggest(n, roster.names.iter().map(String::as_str)),
                ));
            }
        }
    }
    Ok(build(names))
}

fn scenarios(raw: Option<Vec<String>>, loc: &Locator<'_>) -> Result<Vec<Scenario>> {
    let Some(names) = raw else {
        return Ok(Profile::default().scenarios);
    };
    if names.is_empty() {
        return Err(loc.value("scenarios", "the list is empty; name at least one scenario"));
    }
    let mut out: Vec<Scenario> = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let at = index("scenarios", i);
        let s: Scenario = n
            .parse()
            .map_err(|e: crate::contract::ScenarioParseError| {
                let fixed: Vec<String> = Scenario::FIXED.iter().map(|s| s.to_string()).collect();
                let mut candidates: Vec<&str> = fixed.iter().map(String::as_str).collect();
                // `middleware-3` style typos: offer the same N.
                let mw = n
                    .rsplit(['-', '_'])
                    .next()
                    .filter(|t| t.parse::<u16>().is_ok())
                    .map(|t| format!("middleware-{t}"));
                if let Some(m) = &mw {
                    candidates.push(m);
                }
                let more = ["db", "fortunes", "ws-echo-64"];
                candidates.extend(more);
                loc.value_hint(&at, e.to_string(), suggest(n, candidates))
            })?;
        if s.is_websocket() && s.is_family() {
            return Err(loc.value(
                &at,
                format!(
                    "`{s}` needs a message size in bytes in a profile (one cell per size): `{s}-64`, `{s}-4096`, up to `{s}-{}`",
                    crate::contract::MAX_WS_MESSAGE
                ),
            ));
        }
        if s.is_family() {
            return Err(loc.value(
                &at,
                format!(
                    "`{s}` needs a number of rows in a profile (one cell per number): `{s}-1`, `{s}-20`, up to `{s}-{}`",
                    crate::contract::db::MAX_QUERIES
                ),
            ));
        }
        if out.contains(&s) {
            return Err(loc.value(&at, format!("scenario `{s}` is listed twice")));
        }
        out.push(s);
    }
    Ok(out)
}

/// Most concurrent streams per HTTP/2 connection a profile may ask for: the
/// common server default of SETTINGS_MAX_CONCURRENT_STREAMS (nginx, Go,
/// hyper: 100 to 250) with room.
pub const MAX_STREAMS: u32 = 256;

fn protocols(
    raw: Option<Vec<crate::contract::Protocol>>,
    loc: &Locator<'_>,
) -> Result<Vec<crate::contract::Protocol>> {
    let Some(list) = raw else {
        return Ok(Profile::default().protocol);
    };
    if list.is_empty() {
        return Err(loc.value(
            "protocol",
            "the list is empty; give at least one of http1, https, h2, h2c",
        ));
    }
    let mut out = Vec::new();
    for (i, p) in list.into_iter().enumerate() {
        if out.contains(&p) {
            return Err(loc.value(&index("protocol", i), format!("`{p}` is listed twice")));
        }
        out.push(p);
    }
    Ok(out)
}

fn concurrency(raw: Option<Vec<u64>>, loc: &Locator<'_>) -> Result<Vec<u32>> {
    let Some(levels) = raw else {
        return Ok(Profile::default().concurrency);
    };
    if levels.is_empty() {
        return Err(loc.value(
            "concurrency",
            "the list is empty; give at least one level, e.g. `[100]`",
        ));
    }
    let mut out = Vec::new();
    for (i, &c) in levels.iter().enumerate() {
        let at = index("concurrency", i);
        if c == 0 {
            return Err(loc.value(&at, "must be at least 1 connection"));
        }
        if c > u64::from(MAX_CONCURRENCY) {
            return Err(loc.value(
                &at,
                format!("{c} is above the most fairground supports ({MAX_CONCURRENCY})"),
            ));
        }
        let c = c as u32;
        if out.contains(&c) {
            return Err(loc.value(&at, format!("{c} is listed twice")));
        }
        out.push(c);
    }
    Ok(out)
}

fn warmup(raw: Option<RawWarmup>, loc: &Locator<'_>) -> Result<Warmup> {
    let spec = match raw {
        None => return Ok(Warmup::default()),
        Some(RawWarmup::Short(h)) => WarmupSpec {
            duration: Some(h),
            ..WarmupSpec::default()
        },
        Some(RawWarmup::Spec(s)) => s,
    };
    let mode = spec.mode.unwrap_or_default();
    let stray = |field: &str, mode: &str| {
        loc.value(
            &format!("warmup.{field}"),
            format!("does not apply to warm-up mode `{mode}`; remove it"),
        )
    };
    match mode {
        WarmupMode::Fixed => {
            if spec.window.is_some() {
                return Err(stray("window", "fixed"));
            }
            if spec.max_cv.is_some() {
                return Err(stray("max_cv", "fixed"));
            }
            if spec.max_duration.is_some() {
                return Err(stray("max_duration", "fixed"));
            }
            // Zero is allowed here on purpose: it is how warm-up is turned off.
            Ok(Warmup::Fixed {
                duration: spec.duration.map_or(DEFAULT_WARMUP, |h| h.0),
            })
        }
        WarmupMode::UntilStable => {
            if spec.duration.is_some() {
                return Err(stray("duration", "until-stable"));
            }
            let window = positive(
                spec.window.map(|h| h.0),
                "warmup.window",
                Duration::from_secs(5),
                loc,
            )?;
            let max_cv = fraction(spec.max_cv, "warmup.max_cv", 0.05, false, loc)?;
            let max_duration = positive(
                spec.max_duration.map(|h| h.0),
                "warmup.max_duration",
                Duration::from_secs(60),
                loc,
            )?;
            if max_duration < window * STABLE_WINDOWS {
                return Err(loc.value(
                    "warmup.max_duration",
                    format!(
                        "must be at least {STABLE_WINDOWS} windows ({}), or stability can never be judged",
                        super::units::Human(window * STABLE_WINDOWS)
                    ),
                ));
            }
            Ok(Warmup::UntilStable {
                window,
                max_cv,
                max_duration,
            })
        }
    }
}

/// A fraction in `[0, 1]` (`(0, 1]` unless `zero_ok`); `default` when absent.
fn fraction(
    v: Option<f64>,
    field: &str,
    default: f64,
    zero_ok: bool,
    loc: &Locator<'_>,
) -> Result<f64> {
    let Some(x) = v else { return Ok(default) };
    let ok = if zero_ok {
        (0.0..=1.0).contains(&x)
    } else {
        x > 0.0 && x <= 1.0
    };
    if ok {
        Ok(x)
    } else {
        let range = if zero_ok {
            "from 0 to 1"
        } else {
            "above 0 and at most 1"
        };
        Err(loc.value(
            field,
            format!("{x} is out of range; expected a fraction {range} (e.g. 0.05 for 5%)"),
        ))
    }
}

fn load(raw: Option<RawLoad>, loader_cores: u32, min_conc: u32, loc: &Locator<'_>) -> Result<Load> {
    let raw = raw.unwrap_or_default();
    let d = Load::default();
    let mode = match (raw.mode.unwrap_or_default(), raw.rate) {
        (RawLoadMode::Closed, None) => LoadMode::Closed,
        (RawLoadMode::Closed, Some(_)) => {
            return Err(loc.value(
                "load.rate",
                "only applies to `mode: fixed-rate`; remove it or set `load.mode: fixed-rate`",
            ))
        }
        (RawLoadMode::FixedRate, None) => {
            return Err(loc.value(
                "load.mode",
                "`fixed-rate` needs a target rate; add `rate:` (requests per second, e.g. `rate: 5000`)",
            ))
        }
        (RawLoadMode::FixedRate, Some(0)) => {
            return Err(loc.value("load.rate", "must be at least 1 request per second"))
        }
        (RawLoadMode::FixedRate, Some(rate)) => LoadMode::FixedRate { rate },
    };
    let threads = match raw.threads {
        None => loader_cores.min(min_conc.max(1)),
        Some(0) => return Err(loc.value("load.threads", "must be at least 1")),
        Some(t) if t > u64::from(min_conc) => {
            return Err(loc.value(
                "load.threads",
                format!("{t} threads cannot share {min_conc} connections (the lowest concurrency); every thread needs at least one"),
            ))
        }
        Some(t) => t as u32,
    };
    let pipeline =
        match raw.pipeline {
            None => d.pipeline,
            Some(0) => return Err(loc.value(
                "load.pipeline",
                "must be at least 1 (1 means one request in flight per connection, no pipelining)",
            )),
            Some(p) => u32::try_from(p).map_err(|_| loc.value("load.pipeline", "is too large"))?,
        };
    let streams = match raw.streams {
        None => d.streams,
        Some(0) => {
            return Err(loc.value(
                "load.streams",
                "must be at least 1 (1 means one request in flight per HTTP/2 connection)",
            ))
        }
        Some(n) if n > u64::from(MAX_STREAMS) => {
            return Err(loc.value(
                "load.streams",
                format!("{n} is above {MAX_STREAMS}, more streams than servers commonly allow at once (SETTINGS_MAX_CONCURRENT_STREAMS)"),
            ))
        }
        Some(n) => n as u32,
    };
    let timeout = positive(raw.timeout.map(|h| h.0), "load.timeout", d.timeout, loc)?;
    Ok(Load {
        mode,
        threads,
        pipeline,
        streams,
        timeout,
    })
}

fn database(raw: Option<RawDatabase>, loc: &Locator<'_>, host: &HostFacts) -> Result<Database> {
    let d = Database::default();
    let Some(raw) = raw else { return Ok(d) };
    let lim = limits(
        Some(RawLimits {
            cpus: raw.cpus,
            cpuset: raw.cpuset,
            memory: raw.memory,
            swap: None,
            nofile: raw.nofile,
            sysctls: None,
        }),
        "database",
        d.limits.clone(),
        loc,
        host,
    )?;
    let max_connections = raw.max_connections.unwrap_or(d.max_connections);
    let pool = raw.pool.unwrap_or(d.pool);
    if pool == 0 {
        return Err(loc.value("database.pool", "must be at least 1 connection"));
    }
    if pool + DB_RESERVED_CONNECTIONS > max_connections {
        return Err(loc.value(
            "database.pool",
            format!(
                "{pool} connections do not fit `database.max_connections` ({max_connections}) less PostgreSQL's {DB_RESERVED_CONNECTIONS} reserved ones; raise max_connections to at least {} or lower the pool",
                pool + DB_RESERVED_CONNECTIONS
            ),
        ));
    }
    let shared_buffers = raw.shared_buffers.map_or(d.shared_buffers, |b| b.0);
    if shared_buffers < (1 << 20) || shared_buffers >= lim.memory {
        return Err(loc.value(
            "database.shared_buffers",
            format!(
                "{} must be at least 1MiB and below `database.memory` ({}), which also holds the data and every connection",
                super::units::Bytes(shared_buffers),
                super::units::Bytes(lim.memory)
            ),
        ));
    }
    Ok(Database {
        limits: lim,
        shared_buffers,
        max_connections,
        synchronous_commit: raw.synchronous_commit.unwrap_or(d.synchronous_commit),
        pool,
    })
}

fn limits(
    raw: Option<RawLimits>,
    side: &str,
    default: Limits,
    loc: &Locator<'_>,
    host: &HostFacts,
) -> Result<Limits> {
    let raw = raw.unwrap_or_default();
    let f = |name: &str| key(side, name);
    let online = host.cores_online.0.len() as f64;
    let cpus = match raw.cpus {
        None => default.cpus,
        Some(c) if !c.is_finite() || c < super::types::MIN_CPUS => {
            return Err(loc.value(
                &f("cpus"),
                format!(
                    "must be at least {} (a core's worth is 1; 0.5 is half of one)",
                    super::types::MIN_CPUS
                ),
            ))
        }
        Some(c) if c > online => {
            return Err(loc.value(
                &f("cpus"),
                format!(
                    "{c} is more than this host's {online} online core(s) ({}); Docker cannot give a container more CPUs than exist",
                    host.cores_online
                ),
            ))
        }
        Some(c) => c,
    };
    let cpuset = match raw.cpuset {
        None | Some(RawCpuset::Auto) => Cpuset::Auto,
        Some(RawCpuset::Cores(list)) => {
            if let Some(c) = list.0.iter().find(|c| !host.cores_online.0.contains(c)) {
                return Err(loc.value(
                    &f("cpuset"),
                    format!(
                        "core {c} is not online on this host (online: {})",
                        host.cores_online
                    ),
                ));
            }
            let need = super::types::cores_for(cpus);
            if list.0.len() < need {
                return Err(loc.value(
                    &f("cpuset"),
                    format!(
                        "lists {} core(s) but `{side}.cpus` asks for {cpus}; list at least {need}",
                        list.0.len()
                    ),
                ));
            }
            Cpuset::Cores(list)
        }
    };
    let memory = match raw.memory {
        None => default.memory,
        Some(m) if m.0 < MIN_MEMORY => {
            return Err(loc.value(
                &f("memory"),
                format!(
                    "{} is below the floor of {}; below it runtimes fail to start (check the unit: MiB, GiB)",
                    m,
                    super::units::Bytes(MIN_MEMORY)
                ),
            ))
        }
        Some(m) => m.0,
    };
    let nofile = match raw.nofile {
        None => default.nofile,
        Some(n) => n,
    };
    let sysctls = match raw.sysctls {
        None => default.sysctls,
        Some(map) => {
            let mut out = Sysctls::default();
            for (name, value) in map {
                let at = key(&f("sysctls"), &name);
                let Some((_, kind)) = SYSCTLS.iter().find(|(n, _)| *n == name) else {
                    return Err(loc.key_hint(
                        &at,
                        format!(
                            "unknown sysctl `{name}`; fairground accepts these per-namespace ones: {}",
                            SYSCTLS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                        ),
                        suggest(&name, SYSCTLS.iter().map(|(n, _)| *n)),
                    ));
                };
                check_sysctl(*kind, &value.0).map_err(|m| loc.value(&at, m))?;
                out.set(&name, value.0);
            }
            out
        }
    };
    Ok(Limits {
        cpus,
        cpuset,
        memory,
        swap: raw.swap.unwrap_or(default.swap),
        nofile,
        sysctls,
    })
}

fn check_sysctl(kind: SysctlKind, v: &str) -> std::result::Result<(), String> {
    let ints: Vec<Option<u64>> = v.split_whitespace().map(|t| t.parse().ok()).collect();
    let all_ints = ints.iter().all(Option::is_some);
    match kind {
        SysctlKind::Int if ints.len() == 1 && all_ints => Ok(()),
        SysctlKind::Int => Err(format!("`{v}` is not a non-negative integer")),
        SysctlKind::Triple if ints.len() == 3 && all_ints => Ok(()),
        SysctlKind::Triple => Err(format!("`{v}` is not three integers `MIN DEFAULT MAX`")),
        SysctlKind::Word if !v.is_empty() && !v.contains(char::is_whitespace) => Ok(()),
        SysctlKind::Word => Err(format!("`{v}` is not a single word")),
        SysctlKind::PortRange => parse_port_range(v).map(|_| ()),
    }
}

pub use crate::host::sysctl::parse_port_range;

fn network_rules(
    network: Network,
    server: &Limits,
    loader: &Limits,
    max_conc: u32,
    loc: &Locator<'_>,
    host: &HostFacts,
) -> Result<()> {
    if network == Network::Host {
        for (side, lim) in [("server", server), ("loader", loader)] {
            if !lim.sysctls.is_empty() {
                return Err(loc.value(
                    &format!("{side}.sysctls"),
                    "cannot be set with `network: host`: net.* sysctls are per network namespace and host mode has none of its own; remove them or use `network: bridge`",
                ));
            }
        }
    }
    // Every loader connection to the one server address needs its own local
    // port, so the loader's ephemeral range bounds the concurrency.
    let (range, field, origin) = match (network, loader.sysctls.get(PORT_RANGE)) {
        (_, Some(v)) => (
            parse_port_range(v).unwrap_or((1, 0)),
            key("loader.sysctls", PORT_RANGE),
            "as set",
        ),
        (Network::Bridge, None) => (
            KERNEL_PORT_RANGE,
            "loader.sysctls".to_string(),
            "the kernel default",
        ),
        (Network::Host, None) => match host.ip_local_port_range {
            Some(r) => (r, "network".to_string(), "the host's"),
            None => return Ok(()),
        },
    };
    let width = u32::from(range.1).saturating_sub(u32::from(range.0)) + 1;
    if width < max_conc {
        let (lo, hi) = range;
        return Err(loc.value(
            &field,
            format!(
                "the loader's ephemeral port range ({origin}: {lo} {hi}) has {width} ports, fewer than the highest concurrency ({max_conc}); set loader sysctl {PORT_RANGE} to e.g. \"1024 65535\""
            ),
        ));
    }
    Ok(())
}

fn thresholds(raw: Option<RawThresholds>, loc: &Locator<'_>) -> Result<Thresholds> {
    let r = raw.unwrap_or_default();
    let d = Thresholds::default();
    let mut off = GatesOff::default();
    for (i, name) in r.off.iter().flatten().enumerate() {
        if !off.set(name) {
            return Err(loc.value(
                &format!("thresholds.off[{i}]"),
                format!(
                    "`{name}` is not a gate that can be switched off; the names are {}",
                    GatesOff::NAMES.join(", ")
                ),
            ));
        }
    }
    let f = |v, name: &str, default, zero_ok| {
        fraction(v, &format!("thresholds.{name}"), default, zero_ok, loc)
    };
    let max_foreign_cores = match r.max_foreign_cores {
        None => d.max_foreign_cores,
        Some(c) if c.is_finite() && c >= 0.0 => c,
        Some(c) => {
            return Err(loc.value(
                "thresholds.max_foreign_cores",
                format!("{c} is out of range; expected a number of cores ≥ 0 (e.g. 0.5)"),
            ))
        }
    };
    let t = Thresholds {
        max_error_rate: f(r.max_error_rate, "max_error_rate", d.max_error_rate, true)?,
        max_cv: f(r.max_cv, "max_cv", d.max_cv, false)?,
        suspect_round: f(r.suspect_round, "suspect_round", d.suspect_round, false)?,
        loader_saturation: f(
            r.loader_saturation,
            "loader_saturation",
            d.loader_saturation,
            false,
        )?,
        max_loader_throttled: f(
            r.max_loader_throttled,
            "max_loader_throttled",
            d.max_loader_throttled,
            true,
        )?,
        min_rate_ratio: f(r.min_rate_ratio, "min_rate_ratio", d.min_rate_ratio, false)?,
        max_schedule_lag_us: r.max_schedule_lag_us.unwrap_or(d.max_schedule_lag_us),
        max_foreign_cores,
        slowed_machine: f(r.slowed_machine, "slowed_machine", d.slowed_machine, false)?,
        littles_law_tolerance: f(
            r.littles_law_tolerance,
            "littles_law_tolerance",
            d.littles_law_tolerance,
            false,
        )?,
        preflight: r.preflight.unwrap_or(d.preflight),
        off,
    };
    // A threshold at 1 (100%) can never be exceeded: the gate would be off
    // without anyone having said so. Say it, or pick a real threshold.
    for (name, value, is_off) in [
        ("max_error_rate", r.max_error_rate, off.max_error_rate),
        (
            "littles_law_tolerance",
            r.littles_law_tolerance,
            off.littles_law_tolerance,
        ),
        ("max_cv", r.max_cv, off.max_cv),
        ("suspect_round", r.suspect_round, off.suspect_round),
        ("slowed_machine", r.slowed_machine, off.slowed_machine),
    ] {
        if let (Some(v), false) = (value, is_off) {
            if v >= 1.0 {
                return Err(loc.value(
                    &format!("thresholds.{name}"),
                    format!(
                        "{v} switches the gate off (no cell can exceed it); choose a threshold below 1, or switch it off explicitly with `thresholds.off: [{name}]` so the report says so"
                    ),
                ));
            }
        }
    }
    Ok(t)
}

/// Cores: explicit sets must not overlap, and `auto` must find room.
fn placement(p: &Profile, loc: &Locator<'_>, host: &HostFacts) -> Result<()> {
    if !p.allow_shared_cores {
        if let (Cpuset::Cores(s), Cpuset::Cores(l)) = (&p.server.cpuset, &p.loader.cpuset) {
            let shared: std::collections::BTreeSet<usize> =
                s.0.intersection(&l.0).copied().collect();
            if !shared.is_empty() {
                return Err(loc.value(
                    "loader.cpuset",
                    format!(
                        "shares core(s) {} with `server.cpuset` ({s}); loader and server would compete for the same CPU. Give them disjoint cores, or set `allow_shared_cores: true`",
                        crate::host::CoreList(shared)
                    ),
                ));
            }
        }
    }
    p.placement(host).map(|_| ()).map_err(|m| {
        let field = if p.server.cpuset == Cpuset::Auto && loc.spans.written("server.cpus") {
            "server.cpus"
        } else if loc.spans.written("loader.cpus") {
            "loader.cpus"
        } else {
            "server"
        };
        loc.value(field, m)
    })
}

/// `objectives:`: scenario (or `all`) → objectives. Each key must be a
/// scenario the profile measures, each framework one it runs, each text
/// `METRIC OP BOUND` with a bound in the metric's unit.
fn objectives(
    raw: Option<std::collections::BTreeMap<String, Vec<RawObjective>>>,
    scenarios: &[Scenario],
    frameworks: &Frameworks,
    loc: &Locator<'_>,
    host: &HostFacts,
) -> Result<Vec<Objective>> {
    let Some(raw) = raw else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    // `all` first, then the scenarios in the order the profile lists them.
    let mut keys: Vec<&String> = raw.keys().collect();
    let rank = |k: &str| {
        if k == "all" {
            return Some(0);
        }
        let s: Scenario = k.parse().ok()?;
        scenarios.iter().position(|x| *x == s).map(|i| i + 1)
    };
    keys.sort_by_key(|k| rank(k).unwrap_or(usize::MAX));
    for k in keys {
        let path = key("objectives", k);
        let scenario = if k == "all" {
            None
        } else {
            match k.parse::<Scenario>() {
                Ok(s) if scenarios.contains(&s) => Some(s),
                Ok(_) => {
                    return Err(loc.key_hint(
                        &path,
                        format!(
                            "`{k}` is not one of this profile's scenarios ({}); objectives apply to measured cells only",
                            scenarios.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
                        ),
                        None,
                    ))
                }
                Err(_) => {
                    let names: Vec<String> = std::iter::once("all".to_string())
                        .chain(scenarios.iter().map(|s| s.to_string()))
                        .collect();
                    return Err(loc.key_hint(
                        &path,
                        format!(
                            "`{k}` is not a scenario; objectives are listed under a scenario of the profile or `all`: {}",
                            names.join(", ")
                        ),
                        suggest(k, names.iter().map(String::as_str)),
                    ));
                }
            }
        };
        let list = &raw[k];
        if list.is_empty() {
            return Err(loc.value(
                &path,
                "the list is empty; write an objective like `p99 < 5ms`, or remove the key",
            ));
        }
        for (i, item) in list.iter().enumerate() {
            let at = index(&path, i);
            let (text, names, text_at) = match item {
                RawObjective::Short(t) => (t, None, at.clone()),
                RawObjective::Spec(spec) => {
                    objective_frameworks(&spec.frameworks, &at, frameworks, loc, host)?;
                    (
                        &spec.objective,
                        Some(spec.frameworks.clone()),
                        format!("{at}.objective"),
                    )
                }
            };
            let o = Objective::parse(text, scenario, names).map_err(|e| {
                let hint = e
                    .unknown_metric()
                    .and_then(|m| suggest(m, ObjectiveMetric::ALL.iter().map(|x| x.name())));
                loc.value_hint(&text_at, e.to_string(), hint)
            })?;
            if let Some(same) = out.iter().find(|x: &&Objective| {
                x.scenario == o.scenario
                    && x.frameworks == o.frameworks
                    && x.metric == o.metric
                    && x.op == o.op
            }) {
                return Err(loc.value(
                    &text_at,
                    format!(
                        "`{}` repeats `{}` for the same cells; keep one",
                        o.text, same.text
                    ),
                ));
            }
            out.push(o);
        }
    }
    Ok(out)
}

/// The `frameworks` of an objective's mapping form: not empty, and each a
/// framework the profile runs.
fn objective_frameworks(
    names: &[String],
    at: &str,
    selected: &Frameworks,
    loc: &Locator<'_>,
    host: &HostFacts,
) -> Result<()> {
    let field = format!("{at}.frameworks");
    if names.is_empty() {
        return Err(loc.value(
            &field,
            "the list is empty; name a framework, or write the objective as a plain string for every framework",
        ));
    }
    for (j, n) in names.iter().enumerate() {
        let f_at = index(&field, j);
        let known = host.frameworks.as_ref().map(|r| &r.names);
        let runs = match selected {
            Frameworks::All => known.is_none_or(|k| k.contains(n)),
            Frameworks::Only(only) => only.contains(n),
            Frameworks::Exclude(ex) => !ex.contains(n) && known.is_none_or(|k| k.contains(n)),
        };
        if !runs {
            let candidates: Vec<&str> = match selected {
                Frameworks::Only(only) => only.iter().map(String::as_str).collect(),
                _ => known
                    .map(|k| k.iter().map(String::as_str).collect())
                    .unwrap_or_default(),
            };
            return Err(loc.value_hint(
                &f_at,
                format!("`{n}` is not a framework this profile runs; an objective can only name frameworks it measures"),
                suggest(n, candidates),
            ));
        }
    }
    Ok(())
}
