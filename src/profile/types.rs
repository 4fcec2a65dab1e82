//! The validated layer: a profile with every default filled in and every
//! cross-field rule checked (ripgrep's "high args"). The run pipeline reads
//! only these types. They serialize back to the profile file format, so
//! `profile show` prints a profile that can be saved and run as is.
//!
//! Defaults live here, in the `Default` impls and the `DEFAULT_*` constants;
//! docs/profiles.md explains each one.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::units::{Bytes, Human};
use crate::contract::Scenario;
use crate::host::sysctl::{self, Sysctls};
use crate::host::CoreList;

/// Default measured window: TechEmpower's passes and the published Go lab
/// comparison both use 15 s.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(15);
/// Default warm-up before each measured window.
pub const DEFAULT_WARMUP: Duration = Duration::from_secs(5);
/// Default rounds: the least that gives a median and a spread.
pub const DEFAULT_ROUNDS: u32 = 3;
/// `rounds: {precision}` without `min`: three, the least that gives an
/// interval (`compare::MIN_ROUNDS`).
pub const DEFAULT_MIN_ROUNDS: u32 = 3;
/// `rounds: {precision}` without `max`: twelve rounds bound the run's
/// length at four times a fixed three.
pub const DEFAULT_MAX_ROUNDS: u32 = 12;
/// `rounds: {min, max}` without `precision`: ±2%, the floor under which
/// rank groups do not separate two frameworks (`compare::rank::FLOOR`).
pub const DEFAULT_PRECISION: f64 = 0.02;
/// Default connection count.
pub const DEFAULT_CONCURRENCY: u32 = 100;
/// Default open-file limit for both containers: enough for 16,000
/// connections. Published setups use 65536, but runc cannot give a container
/// more than dockerd's own hard limit, which is 20000 on this project's
/// machines (docs/docker.md); a profile that needs more says so explicitly.
pub const DEFAULT_NOFILE: u64 = 16_384;
/// Default memory limit for both containers.
pub const DEFAULT_MEMORY: u64 = 1 << 30;
/// Descriptors a process needs besides its connections: the listening
/// socket, stdio, epoll/eventfd/pipe pairs per worker thread, log and /proc
/// files. 256 covers 64 workers at 4 each.
pub const NOFILE_HEADROOM: u64 = 256;
/// Smallest memory limit accepted. Docker's own floor is 6 MiB; below 32 MiB
/// common runtimes fail to start, and an OOM kill would be misread as a
/// framework failure. A value this small is almost always a unit typo.
pub const MIN_MEMORY: u64 = 32 << 20;
/// Shortest measured window: the resource probe samples every second, so a
/// shorter window would have no memory or CPU sample.
pub const MIN_DURATION: Duration = Duration::from_secs(1);
pub use crate::stats::STABLE_WINDOWS;
/// Highest concurrency accepted: the kernel's default `fs.nr_open` (1 Mi
/// descriptors) caps one process's connections anyway.
pub const MAX_CONCURRENCY: u32 = 1_000_000;
/// The kernel's default ephemeral port range, used when the loader does not
/// set `net.ipv4.ip_local_port_range` in bridge mode.
pub const KERNEL_PORT_RANGE: (u16, u16) = (32768, 60999);

/// A benchmark profile, validated, with every default filled in.
///
/// It deserializes from what it serializes to (the resolved profile a run
/// records in results.json, read back by `compare` and `history`); a field
/// an older run did not record reads as its default. Profile *files* go
/// through [`super::raw`] and validation instead, which is where their
/// messages with file:line:col come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Profile {
    /// The profile's name: the file stem (`standard` for profiles/standard.yaml).
    #[serde(skip)]
    pub name: String,
    /// One line saying what the profile measures and why.
    pub description: String,
    /// Which frameworks run.
    pub frameworks: Frameworks,
    /// Scenarios measured, in the order written; never empty, no duplicates.
    pub scenarios: Vec<Scenario>,
    /// Connection counts, in the order written; never empty, no duplicates, each ≥ 1.
    pub concurrency: Vec<u32>,
    /// Protocols measured, in the order written; never empty, no
    /// duplicates. Absent from older results: `[http1]`.
    pub protocol: Vec<crate::contract::Protocol>,
    /// Warm-up before each measured window.
    pub warmup: Warmup,
    /// Length of each measured window (≥ 1 s).
    #[serde(serialize_with = "ser_duration", deserialize_with = "de_duration")]
    pub duration: Duration,
    /// Measured rounds per cell: a fixed number, or until the headline
    /// figure is precise.
    pub rounds: Rounds,
    /// Whether the server container restarts before each round.
    pub restart_between_rounds: bool,
    /// Whether frameworks alternate round by round (A B A B …).
    pub interleave_rounds: bool,
    /// Wall time the run may take: blocks of rounds past `rounds.min` start
    /// only while they fit in it. `None`: no budget.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser_opt_duration",
        deserialize_with = "de_opt_duration"
    )]
    pub budget: Option<Duration>,
    /// How load is generated.
    pub load: Load,
    /// Limits of the server container.
    pub server: Limits,
    /// Limits of the load-generator container.
    pub loader: Limits,
    /// The database container of the database scenarios (absent from
    /// results written before it existed: the defaults).
    #[serde(default)]
    pub database: Database,
    /// Whether server and loader cores may overlap.
    pub allow_shared_cores: bool,
    /// Network between loader and server.
    pub network: Network,
    /// Wait after readiness before idle memory is sampled.
    #[serde(serialize_with = "ser_duration", deserialize_with = "de_duration")]
    pub idle_settle: Duration,
    /// Longest wait for the server's readiness path to answer.
    #[serde(serialize_with = "ser_duration", deserialize_with = "de_duration")]
    pub readiness_timeout: Duration,
    /// When a measured cell counts.
    pub thresholds: Thresholds,
    /// Where the server and the loaders run; `None`: all on the local
    /// daemon, the loader on the run's private network.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosts: Option<super::hosts::Hosts>,
    /// Service-level objectives, in the order written (scenarios sorted by
    /// name, `all` first); empty when the profile has none.
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "ser_objectives",
        deserialize_with = "de_objectives"
    )]
    pub objectives: Vec<Objective>,
}

/// How many rounds each cell gets. It reads back from what it writes:
/// `3`, or `{min: 3, max: 12, precision: 0.02}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Rounds {
    /// `rounds: N`: exactly N rounds (≥ 1).
    Fixed(u32),
    /// `rounds: {min, max, precision}`: `min` rounds, then one more at a
    /// time until the 95% interval of the cell's headline figure (req/s in
    /// a closed loop, p99 at a fixed rate) is within ±`precision` of it, or
    /// `max` rounds were measured (3 ≤ min ≤ max; 0 < precision < 1).
    UntilPrecise {
        /// Rounds every cell gets.
        min: u32,
        /// Most rounds a cell gets.
        max: u32,
        /// Half-width of the interval asked for, relative (0.02 = ±2%).
        precision: f64,
    },
}

impl Rounds {
    /// Rounds every cell gets.
    pub fn min(self) -> u32 {
        match self {
            Rounds::Fixed(n) => n,
            Rounds::UntilPrecise { min, .. } => min,
        }
    }

    /// Most rounds a cell can get: what the plan lays out.
    pub fn max(self) -> u32 {
        match self {
            Rounds::Fixed(n) => n,
            Rounds::UntilPrecise { max, .. } => max,
        }
    }

    /// The precision asked for, when rounds go on until it is reached.
    pub fn precision(self) -> Option<f64> {
        match self {
            Rounds::Fixed(_) => None,
            Rounds::UntilPrecise { precision, .. } => Some(precision),
        }
    }
}

impl std::fmt::Display for Rounds {
    /// `3`, or `3–12 (until ±2.0%)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Rounds::Fixed(n) => write!(f, "{n}"),
            Rounds::UntilPrecise {
                min,
                max,
                precision,
            } => write!(f, "{min}–{max} (until ±{:.1}%)", precision * 100.0),
        }
    }
}

/// Objectives from the file format [`ser_objectives`] writes, in its
/// order (a run's recorded profile, read back).
fn de_objectives<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Objective>, D::Error> {
    use super::raw::RawObjective;
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Vec<Objective>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a mapping of scenario (or `all`) to objectives")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some((k, list)) = m.next_entry::<String, Vec<RawObjective>>()? {
                let scenario = match k.as_str() {
                    "all" => None,
                    s => Some(s.parse::<Scenario>().map_err(serde::de::Error::custom)?),
                };
                for item in list {
                    let (text, frameworks) = match item {
                        RawObjective::Short(t) => (t, None),
                        RawObjective::Spec(spec) => (spec.objective, Some(spec.frameworks)),
                    };
                    out.push(
                        Objective::parse(&text, scenario, frameworks)
                            .map_err(|e| serde::de::Error::custom(format!("`{text}`: {e}")))?,
                    );
                }
            }
            Ok(out)
        }
    }
    d.deserialize_map(V)
}

/// Objectives back in the file format: scenario → list, the mapping form
/// where an objective names frameworks.
fn ser_objectives<S: Serializer>(objectives: &[Objective], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut by: Vec<(String, Vec<serde_json::Value>)> = Vec::new();
    for o in objectives {
        let k = o
            .scenario
            .map_or_else(|| "all".to_string(), |sc| sc.to_string());
        let v = match &o.frameworks {
            None => serde_json::Value::String(o.text.clone()),
            Some(f) => serde_json::json!({"objective": o.text, "frameworks": f}),
        };
        match by.iter_mut().find(|(key, _)| *key == k) {
            Some((_, list)) => list.push(v),
            None => by.push((k, vec![v])),
        }
    }
    let mut m = s.serialize_map(Some(by.len()))?;
    for (k, v) in &by {
        m.serialize_entry(k, v)?;
    }
    m.end()
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            name: String::new(),
            description: String::new(),
            frameworks: Frameworks::All,
            scenarios: vec![Scenario::Plaintext],
            concurrency: vec![DEFAULT_CONCURRENCY],
            protocol: vec![crate::contract::Protocol::Http1],
            warmup: Warmup::default(),
            duration: DEFAULT_DURATION,
            rounds: Rounds::Fixed(DEFAULT_ROUNDS),
            restart_between_rounds: false,
            interleave_rounds: false,
            budget: None,
            load: Load::default(),
            server: Limits::server(Network::Bridge),
            loader: Limits::loader(Network::Bridge),
            database: Database::default(),
            allow_shared_cores: false,
            network: Network::Bridge,
            idle_settle: Duration::from_secs(3),
            readiness_timeout: Duration::from_secs(60),
            thresholds: Thresholds::default(),
            hosts: None,
            objectives: Vec::new(),
        }
    }
}

/// Which frameworks a profile runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Frameworks {
    /// Every framework under frameworks/.
    #[default]
    All,
    /// Only these, in this order.
    Only(Vec<String>),
    /// Every framework except these.
    Exclude(Vec<String>),
}

impl Frameworks {
    /// The names to run out of `roster` (every framework found), in roster
    /// order for `All`/`Exclude` and in profile order for `Only`.
    pub fn select<'a>(&self, roster: &'a [String]) -> Vec<&'a str> {
        match self {
            Frameworks::All => roster.iter().map(String::as_str).collect(),
            Frameworks::Only(names) => names
                .iter()
                .filter_map(|n| roster.iter().find(|r| *r == n).map(String::as_str))
                .collect(),
            Frameworks::Exclude(names) => roster
                .iter()
                .filter(|r| !names.contains(r))
                .map(String::as_str)
                .collect(),
        }
    }
}

impl Serialize for Frameworks {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Frameworks::All => s.serialize_str("all"),
            Frameworks::Only(names) => names.serialize(s),
            Frameworks::Exclude(names) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("exclude", names)?;
                m.end()
            }
        }
    }
}

/// Warm-up before each measured window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum Warmup {
    /// Load for a fixed time (zero: no warm-up).
    Fixed {
        /// How long.
        #[serde(serialize_with = "ser_duration", deserialize_with = "de_duration")]
        duration: Duration,
    },
    /// Load until throughput is stable, or `max_duration` passes.
    UntilStable {
        /// Length of each throughput window.
        #[serde(serialize_with = "ser_duration", deserialize_with = "de_duration")]
        window: Duration,
        /// Largest CV of the last [`STABLE_WINDOWS`] windows that counts as stable.
        max_cv: f64,
        /// Give up (and mark the cell) after this long.
        #[serde(serialize_with = "ser_duration", deserialize_with = "de_duration")]
        max_duration: Duration,
    },
}

impl Default for Warmup {
    fn default() -> Self {
        Warmup::Fixed {
            duration: DEFAULT_WARMUP,
        }
    }
}

impl Warmup {
    /// The longest the warm-up can take.
    pub fn max(&self) -> Duration {
        match *self {
            Warmup::Fixed { duration } => duration,
            Warmup::UntilStable { max_duration, .. } => max_duration,
        }
    }
}

/// How load is generated.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Load {
    /// Closed loop or fixed rate.
    #[serde(flatten)]
    pub mode: LoadMode,
    /// Loader threads (≥ 1, ≤ the lowest concurrency).
    pub threads: u32,
    /// Requests in flight per connection (≥ 1).
    pub pipeline: u32,
    /// Concurrent streams per connection on HTTP/2 cells (≥ 1).
    pub streams: u32,
    /// Per-request timeout.
    #[serde(serialize_with = "ser_duration", deserialize_with = "de_duration")]
    pub timeout: Duration,
}

impl Default for Load {
    fn default() -> Self {
        Load {
            mode: LoadMode::Closed,
            threads: 1,
            pipeline: 1,
            streams: 1,
            timeout: Duration::from_secs(5),
        }
    }
}

/// Load-generation mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum LoadMode {
    /// Each connection sends its next request when the answer arrives.
    Closed,
    /// Requests are scheduled at a fixed total rate; latency is measured from
    /// the scheduled send time.
    FixedRate {
        /// Target requests per second, all connections together (≥ 1).
        rate: u64,
    },
}

/// CPU placement of a container.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Cpuset {
    /// fairground picks cores (see [`Profile::placement`]).
    #[default]
    Auto,
    /// Exactly these cores.
    Cores(CoreList),
}

impl Serialize for Cpuset {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Cpuset::Auto => s.serialize_str("auto"),
            Cpuset::Cores(c) => s.collect_str(c),
        }
    }
}

/// Limits of one container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// CPU time in cores (Docker `--cpus`): `1` is one core's worth, `0.5`
    /// half of one; at least [`MIN_CPUS`] and at most the host's online
    /// cores. The container is pinned to [`Limits::cores`] cores.
    pub cpus: f64,
    /// Cores the container is pinned to.
    pub cpuset: Cpuset,
    /// Memory limit in bytes (≥ [`MIN_MEMORY`]).
    #[serde(serialize_with = "ser_bytes", deserialize_with = "de_bytes")]
    pub memory: u64,
    /// Whether swap beyond `memory` is allowed.
    pub swap: bool,
    /// Open-file limit, soft and hard.
    pub nofile: u64,
    /// Sysctls set in the container's network namespace.
    pub sysctls: Sysctls,
}

impl Limits {
    /// Default server limits. The listen backlog is raised so connection
    /// bursts at high concurrency are not dropped by the kernel before the
    /// framework sees them.
    pub fn server(network: Network) -> Self {
        Limits {
            sysctls: match network {
                Network::Bridge => Sysctls::of(&[
                    (sysctl::SOMAXCONN, "65535"),
                    (sysctl::TCP_MAX_SYN_BACKLOG, "65535"),
                ]),
                Network::Host => Sysctls::default(),
            },
            ..Self::base()
        }
    }

    /// Default loader limits. The loader opens the connections, so it is the
    /// side that needs a wide ephemeral port range and TIME_WAIT reuse.
    pub fn loader(network: Network) -> Self {
        Limits {
            sysctls: match network {
                Network::Bridge => Sysctls::of(&[
                    (sysctl::IP_LOCAL_PORT_RANGE, "1024 65535"),
                    (sysctl::TCP_TW_REUSE, "1"),
                ]),
                Network::Host => Sysctls::default(),
            },
            ..Self::base()
        }
    }

    pub(crate) fn base() -> Self {
        Limits {
            cpus: 1.0,
            cpuset: Cpuset::Auto,
            memory: DEFAULT_MEMORY,
            swap: false,
            nofile: DEFAULT_NOFILE,
            sysctls: Sysctls::default(),
        }
    }
}

impl Limits {
    /// Whole cores the container needs for itself: `cpus` rounded up (half
    /// a core's time still runs on one core).
    pub fn cores(&self) -> usize {
        cores_for(self.cpus)
    }
}

/// The database container: its limits and PostgreSQL's settings. Written
/// flat, as a profile's `database:` section is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "FlatDatabase", into = "FlatDatabase")]
pub struct Database {
    /// Cores, memory, open files (no sysctls, no swap).
    pub limits: Limits,
    /// `shared_buffers`, bytes.
    pub shared_buffers: u64,
    /// `max_connections`.
    pub max_connections: u32,
    /// `synchronous_commit` on.
    pub synchronous_commit: bool,
    /// Connections each framework's pool opens (`FAIRGROUND_DB_POOL`).
    pub pool: u32,
}

/// [`Database`] as a profile writes it.
#[derive(Serialize, Deserialize)]
struct FlatDatabase {
    cpus: f64,
    cpuset: Cpuset,
    #[serde(serialize_with = "ser_bytes", deserialize_with = "de_bytes")]
    memory: u64,
    nofile: u64,
    #[serde(serialize_with = "ser_bytes", deserialize_with = "de_bytes")]
    shared_buffers: u64,
    max_connections: u32,
    synchronous_commit: bool,
    pool: u32,
}

impl From<FlatDatabase> for Database {
    fn from(f: FlatDatabase) -> Self {
        Database {
            limits: Limits {
                cpus: f.cpus,
                cpuset: f.cpuset,
                memory: f.memory,
                nofile: f.nofile,
                ..Limits::base()
            },
            shared_buffers: f.shared_buffers,
            max_connections: f.max_connections,
            synchronous_commit: f.synchronous_commit,
            pool: f.pool,
        }
    }
}

impl From<Database> for FlatDatabase {
    fn from(d: Database) -> Self {
        FlatDatabase {
            cpus: d.limits.cpus,
            cpuset: d.limits.cpuset,
            memory: d.limits.memory,
            nofile: d.limits.nofile,
            shared_buffers: d.shared_buffers,
            max_connections: d.max_connections,
            synchronous_commit: d.synchronous_commit,
            pool: d.pool,
        }
    }
}

/// PostgreSQL's connections reserved for superusers
/// (`superuser_reserved_connections`'s default): a pool may use the rest.
pub const DB_RESERVED_CONNECTIONS: u32 = 3;

impl Default for Database {
    fn default() -> Self {
        Database {
            limits: Limits::base(),
            shared_buffers: 128 << 20,
            max_connections: 100,
            synchronous_commit: false,
            pool: 16,
        }
    }
}

/// Whole cores needed for `cpus` of CPU time.
pub fn cores_for(cpus: f64) -> usize {
    (cpus.ceil() as usize).max(1)
}

/// The smallest CPU allotment a profile may give (Docker's own floor).
pub const MIN_CPUS: f64 = 0.01;

/// Network between loader and server.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// A private Docker bridge network created for the run: traffic stays
    /// between the two containers, and per-namespace sysctls can be set.
    #[default]
    Bridge,
    /// The host's network stack: no bridge/NAT cost, but shared with
    /// everything else on the host, and sysctls cannot be set per container.
    Host,
}

pub use super::objectives::{Objective, ObjectiveMetric, Op};
pub use super::thresholds::{GatesOff, Preflight, Thresholds};

/// Cores assigned to each container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Cores the server is pinned to.
    pub server: CoreList,
    /// Cores the loader is pinned to.
    pub loader: CoreList,
}

impl Profile {
    /// The highest concurrency level.
    pub fn max_concurrency(&self) -> u32 {
        self.concurrency.iter().copied().max().unwrap_or(0)
    }

    /// Measured rounds per framework (that declares every scenario), at
    /// most: scenarios × concurrency levels × the most rounds a cell can
    /// take. `bench::plan` orders them.
    pub fn rounds_per_framework(&self) -> usize {
        self.cells_per_framework() * self.rounds.max() as usize
    }

    /// Cells of a framework that declares every scenario and protocol.
    pub fn cells_per_framework(&self) -> usize {
        self.scenarios.len() * self.protocol.len() * self.concurrency.len()
    }

    /// Time one framework takes with `rounds` rounds per cell: warm-up and
    /// measured window per cell, plus the idle settle per server start.
    /// Image builds, readiness and verification come on top.
    pub fn time_per_framework(&self, rounds: u32) -> Duration {
        let cells = self.cells_per_framework() as u32 * rounds;
        let starts = if self.restart_between_rounds || self.interleave_rounds {
            rounds
        } else {
            1
        };
        (self.warmup.max() + self.duration) * cells + self.idle_settle * starts
    }

    /// Lower bound of the time one framework takes ([`Self::time_per_framework`]
    /// at the most rounds a cell can take).
    pub fn min_time_per_framework(&self) -> Duration {
        self.time_per_framework(self.rounds.max())
    }

    /// Resolve `auto` cpusets into cores on this host. Explicit lists are
    /// kept; `auto` sides take the lowest free online cores, server first.
    /// With `allow_shared_cores`, an `auto` side that finds no free cores
    /// takes the lowest online ones instead.
    pub fn placement(&self, host: &super::HostFacts) -> Result<Placement, String> {
        let mut used = std::collections::BTreeSet::new();
        for lim in [&self.server, &self.loader] {
            if let Cpuset::Cores(c) = &lim.cpuset {
                used.extend(c.0.iter().copied());
            }
        }
        let mut pick = |lim: &Limits, who: &str| -> Result<CoreList, String> {
            if let Cpuset::Cores(c) = &lim.cpuset {
                return Ok(c.clone());
            }
            let want = lim.cores();
            let free: Vec<usize> = host
                .cores_online
                .0
                .iter()
                .copied()
                .filter(|c| !used.contains(c))
                .take(want)
                .collect();
            let chosen = if free.len() == want {
                free
            } else if self.allow_shared_cores && host.cores_online.0.len() >= want {
                host.cores_online.0.iter().copied().take(want).collect()
            } else {
                return Err(format!(
                    "the {who} needs {want} core(s) of its own but only {} of the host's {} online core(s) ({}) are free; lower `cpus`, or set `allow_shared_cores: true`",
                    free.len(),
                    host.cores_online.0.len(),
                    host.cores_online
                ));
            };
            used.extend(chosen.iter().copied());
            Ok(CoreList(chosen.into_iter().collect()))
        };
        let server = pick(&self.server, "server")?;
        let loader = pick(&self.loader, "loader")?;
        Ok(Placement { server, loader })
    }
}

fn ser_duration<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&Human(*d))
}

fn ser_opt_duration<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => ser_duration(d, s),
        None => s.serialize_none(),
    }
}

fn de_opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    Option::<Human>::deserialize(d).map(|h| h.map(|h| h.0))
}

fn ser_bytes<S: Serializer>(b: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&Bytes(*b))
}

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    Human::deserialize(d).map(|h| h.0)
}

fn de_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    Bytes::deserialize(d).map(|b| b.0)
}

/// `all`, a list of names, or `{exclude: [names]}`: what
/// [`Frameworks`] serializes to.
#[derive(Deserialize)]
#[serde(untagged)]
enum FrameworksRepr {
    Word(String),
    Only(Vec<String>),
    Exclude { exclude: Vec<String> },
}

impl<'de> Deserialize<'de> for Frameworks {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match FrameworksRepr::deserialize(d)? {
            FrameworksRepr::Word(w) if w == "all" => Ok(Frameworks::All),
            FrameworksRepr::Word(w) => Err(serde::de::Error::custom(format!(
                "frameworks: `{w}` is neither `all`, a list, nor {{exclude: [...]}}"
            ))),
            FrameworksRepr::Only(names) => Ok(Frameworks::Only(names)),
            FrameworksRepr::Exclude { exclude } => Ok(Frameworks::Exclude(exclude)),
        }
    }
}

impl<'de> Deserialize<'de> for Cpuset {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text == "auto" {
            return Ok(Cpuset::Auto);
        }
        text.parse::<CoreList>()
            .map(Cpuset::Cores)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_ones() {
        let p = Profile::default();
        assert_eq!(p.frameworks, Frameworks::All);
        assert_eq!(p.scenarios, vec![Scenario::Plaintext]);
        assert_eq!(p.concurrency, vec![100]);
        assert_eq!(
            p.warmup,
            Warmup::Fixed {
                duration: Duration::from_secs(5)
            }
        );
        assert_eq!(p.duration, Duration::from_secs(15));
        assert_eq!(p.rounds, Rounds::Fixed(3));
        assert_eq!(p.load.mode, LoadMode::Closed);
        assert_eq!(p.server.memory, 1 << 30);
        assert_eq!(p.server.nofile, 16_384);
        assert!(!p.server.swap);
        assert_eq!(p.server.sysctls.get(sysctl::SOMAXCONN), Some("65535"));
        assert_eq!(p.loader.sysctls.port_range(), Some((1024, 65535)));
        assert_eq!(p.network, Network::Bridge);
        assert_eq!(p.thresholds.max_error_rate, 0.001);
        assert_eq!(p.thresholds.preflight, Preflight::Strict);
        assert!(Limits::server(Network::Host).sysctls.is_empty());
    }

    #[test]
    fn rounds_per_framework_multiply_out() {
        let p = Profile {
            scenarios: vec![Scenario::Plaintext, Scenario::Json],
            concurrency: vec![10, 20],
            rounds: Rounds::Fixed(2),
            ..Profile::default()
        };
        assert_eq!(p.rounds_per_framework(), 8);
        assert_eq!(p.max_concurrency(), 20);
        // Until precise: laid out for the most rounds a cell can take.
        let p = Profile {
            rounds: Rounds::UntilPrecise {
                min: 3,
                max: 5,
                precision: 0.02,
            },
            ..p
        };
        assert_eq!(p.rounds_per_framework(), 20);
        assert!(p.time_per_framework(3) < p.min_time_per_framework());
    }

    #[test]
    fn rounds_read_back_from_what_they_write() {
        for r in [
            Rounds::Fixed(4),
            Rounds::UntilPrecise {
                min: 3,
                max: 12,
                precision: 0.02,
            },
        ] {
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(serde_json::from_str::<Rounds>(&json).unwrap(), r, "{json}");
        }
        assert_eq!(
            serde_json::to_string(&Rounds::UntilPrecise {
                min: 3,
                max: 12,
                precision: 0.02
            })
            .unwrap(),
            r#"{"min":3,"max":12,"precision":0.02}"#
        );
    }

    #[test]
    fn selects_frameworks_from_the_roster() {
        let roster: Vec<String> = ["axum", "hyper", "nginx"].map(String::from).to_vec();
        assert_eq!(Frameworks::All.select(&roster), ["axum", "hyper", "nginx"]);
        assert_eq!(
            Frameworks::Only(vec!["nginx".into(), "axum".into()]).select(&roster),
            ["nginx", "axum"]
        );
        assert_eq!(
            Frameworks::Exclude(vec!["nginx".into()]).select(&roster),
            ["axum", "hyper"]
        );
    }

    #[test]
    fn auto_placement_gives_disjoint_cores_server_first() {
        let host = super::super::HostFacts::with_cores(4);
        let p = Profile {
            server: Limits {
                cpus: 2.0,
                ..Limits::server(Network::Bridge)
            },
            ..Profile::default()
        };
        let pl = p.placement(&host).unwrap();
        assert_eq!(pl.server.to_string(), "0-1");
        assert_eq!(pl.loader.to_string(), "2");
    }

    #[test]
    fn auto_placement_avoids_explicit_cores_and_refuses_when_full() {
        let host = super::super::HostFacts::with_cores(2);
        let mut p = Profile::default();
        p.loader.cpuset = Cpuset::Cores("0".parse().unwrap());
        let pl = p.placement(&host).unwrap();
        assert_eq!(pl.server.to_string(), "1");
        p.server.cpus = 2.0;
        assert!(p
            .placement(&host)
            .unwrap_err()
            .contains("allow_shared_cores"));
        p.allow_shared_cores = true;
        assert_eq!(p.placement(&host).unwrap().server.to_string(), "0-1");
    }
}
