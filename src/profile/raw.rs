//! The raw layer: a profile exactly as written in YAML (ripgrep's "low
//! args"). Every field is optional so `validate.rs` can tell "written" from
//! "defaulted" and fill defaults that depend on other fields (loader threads
//! follow loader cpus; default sysctls depend on the network mode).
//!
//! These types define the file format and the JSON Schema (`profile
//! schema`); they hold no defaults and make no judgement beyond types and
//! unknown fields. Their doc comments are the schema's descriptions.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::{de, Deserialize, Deserializer};

use super::types::{Network, Preflight};
use super::units::{Bytes, Human};
use crate::contract::Scenario;

/// A fairground benchmark profile: what to measure, under which limits, and
/// when a result counts. Every field is optional; docs/profiles.md lists the
/// defaults and why they were chosen.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "fairground profile")]
pub struct RawProfile {
    /// One line: what this profile measures and why. Default: empty.
    #[serde(default)]
    pub description: Option<String>,
    /// Frameworks to run: `all`, a list of names (folders under
    /// frameworks/), or `{exclude: [names]}`. Default: `all`.
    #[serde(default)]
    pub frameworks: Option<RawFrameworks>,
    /// Contract scenarios to measure, each run only on frameworks that declare
    /// it: plaintext, json, param, echo, validate, middleware-N.
    /// Default: `[plaintext]`.
    #[serde(default)]
    #[schemars(with = "Option<Vec<Scenario>>")]
    pub scenarios: Option<Vec<String>>,
    /// Open connections held by the loader, one cell per level, e.g.
    /// `[100, 1000, 10000]`. Default: `[100]`.
    #[serde(default)]
    pub concurrency: Option<Vec<u64>>,
    /// Protocols measured, one cell per protocol on the frameworks that
    /// declare it: `http1` (HTTP/1.1 on TCP), `https` (HTTP/1.1 over TLS),
    /// `h2` (HTTP/2 over TLS, ALPN), `h2c` (HTTP/2 with prior knowledge).
    /// TLS uses a certificate made for the run. Default: `[http1]`.
    #[serde(default)]
    pub protocol: Option<Vec<crate::contract::Protocol>>,
    /// Warm-up before each measured window: a duration (`5s`), or
    /// `{mode: fixed, duration: 5s}`, or `{mode: until-stable, window: 5s,
    /// max_cv: 0.05, max_duration: 60s}`. Default: `5s`.
    #[serde(default)]
    pub warmup: Option<RawWarmup>,
    /// Length of the measured window of each round (a duration, at least
    /// `1s`). Default: `15s`.
    #[serde(default)]
    pub duration: Option<Human>,
    /// Measured rounds per cell; spread and CV come from these: a number,
    /// or `{min: 3, max: 12, precision: 0.02}` to add rounds one at a time
    /// until the 95% interval of each cell's headline figure is within
    /// ±precision of it (or `max` is reached). Default: `3`.
    #[serde(default)]
    pub rounds: Option<RawRounds>,
    /// Restart the server container before each round, so a round does not
    /// inherit the previous one's heap and caches. Default: `false`.
    #[serde(default)]
    pub restart_between_rounds: Option<bool>,
    /// Alternate frameworks round by round (round 1 of A, round 1 of B, …,
    /// then round 2 of A …) instead of finishing one framework before the
    /// next, so drift of the machine over time hits every framework alike:
    /// the honest way to compare two frameworks (or two versions of one) on
    /// a noisy machine. Each round then starts its framework's server
    /// afresh. Default: `false`.
    #[serde(default)]
    pub interleave_rounds: Option<bool>,
    /// Wall time the run's rounds may take (`90m`), from its first
    /// framework's start, image builds left out: after a first pass of
    /// `rounds.min` rounds per cell, blocks of rounds go on, on the
    /// frameworks whose cells still lack `rounds.precision` (the widest
    /// first when a whole block no longer fits), until every cell is
    /// precise, `rounds.max` is reached or the next block would end past
    /// the budget. Needs `rounds: {min, max, precision}` and
    /// `interleave_rounds: true`. Default: none (rounds go on until precise
    /// or `rounds.max`).
    #[serde(default)]
    pub budget: Option<Human>,
    /// How load is generated. Default: `{mode: closed, pipeline: 1,
    /// timeout: 5s}` with one thread per loader CPU.
    #[serde(default)]
    pub load: Option<RawLoad>,
    /// Limits of the server container. Default: 1 CPU pinned automatically,
    /// 1GiB, no swap, nofile 16384, tuned listen backlog.
    #[serde(default)]
    pub server: Option<RawLimits>,
    /// Limits of the load-generator container. Default: 1 CPU pinned
    /// automatically (disjoint from the server), 1GiB, no swap, nofile 16384,
    /// wide ephemeral port range.
    #[serde(default)]
    pub loader: Option<RawLimits>,
    /// The PostgreSQL container of the database scenarios (db, queries-N,
    /// fortunes, updates-N): its limits and settings. Used only when a
    /// framework runs one of those. Default: 1 CPU on the server's cores
    /// (`cpuset: auto`), 1GiB, shared_buffers 128MiB, max_connections 100,
    /// synchronous_commit off, a pool of 16 connections per framework.
    #[serde(default)]
    pub database: Option<RawDatabase>,
    /// Allow server and loader cores to overlap (results then measure both
    /// competing for the same CPU). Default: `false`.
    #[serde(default)]
    pub allow_shared_cores: Option<bool>,
    /// Network between loader and server: `bridge` (a private Docker network
    /// per run) or `host`. Default: `bridge`.
    #[serde(default)]
    pub network: Option<Network>,
    /// Wait after the server is ready before sampling idle memory.
    /// Default: `3s`.
    #[serde(default)]
    pub idle_settle: Option<Human>,
    /// Longest wait for the server to answer its readiness path after start.
    /// Default: `60s`.
    #[serde(default)]
    pub readiness_timeout: Option<Human>,
    /// When a measured cell counts. Default: see each field.
    #[serde(default)]
    pub thresholds: Option<RawThresholds>,
    /// Where the server and the loaders run: Docker endpoints per role,
    /// and the address the loaders reach the server at (docs/hosts.md).
    /// Default: everything on the local daemon.
    #[serde(default)]
    pub hosts: Option<super::hosts::RawHosts>,
    /// Service-level objectives per scenario (`all` for every scenario):
    /// a list of `METRIC OP BOUND` such as `p99 < 5ms`, `p999 < 20ms`,
    /// `rps >= 50000`, `error_rate < 0.1%`, `cpu_us_per_request <= 30`,
    /// `memory_window_peak <= 256MiB`, or `{objective: ..., frameworks:
    /// [names]}` for some frameworks only. Each is judged on every cell it
    /// applies to, with an interval over the cell's rounds; `fairground
    /// run` exits 99 when one is missed. Default: none.
    #[serde(default)]
    pub objectives: Option<BTreeMap<String, Vec<RawObjective>>>,
}

/// One objective as written: `p99 < 5ms`, or the mapping form for some
/// frameworks only.
#[derive(Debug, Clone, PartialEq)]
pub enum RawObjective {
    /// `p99 < 5ms`: for every framework.
    Short(String),
    /// `{objective: "p99 < 5ms", frameworks: [axum]}`.
    Spec(ObjectiveSpec),
}

/// The mapping form of an objective.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ObjectiveSpec {
    /// `METRIC OP BOUND`, e.g. `rps >= 80000`.
    pub objective: String,
    /// The frameworks it applies to (names under frameworks/).
    pub frameworks: Vec<String>,
}

impl<'de> Deserialize<'de> for RawObjective {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = RawObjective;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an objective like `p99 < 5ms`, or `{objective: \"p99 < 5ms\", frameworks: [names]}`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(RawObjective::Short(v.to_string()))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                ObjectiveSpec::deserialize(MapAccessDeserializer::new(map)).map(RawObjective::Spec)
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for RawObjective {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Objective".into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let spec = g.subschema_for::<ObjectiveSpec>();
        schemars::json_schema!({
            "description": "`METRIC OP BOUND` (metrics: p50, p90, p99, p999, rps, error_rate, cpu_us_per_request, memory_window_peak; OP: <, <=, >, >=), or the mapping form for some frameworks only.",
            "anyOf": [
                {"type": "string", "pattern": "^\\s*(p50|p90|p99|p999|rps|error_rate|cpu_us_per_request|memory_window_peak)\\s*(<|<=|>|>=)\\s*\\S"},
                spec
            ]
        })
    }
}

/// Which frameworks a profile runs, as written.
#[derive(Debug, Clone, PartialEq)]
pub enum RawFrameworks {
    /// The word `all`.
    All,
    /// A list of names.
    Only(Vec<String>),
    /// `{exclude: [names]}`.
    Exclude(Vec<String>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExcludeSpec {
    exclude: Vec<String>,
}

impl<'de> Deserialize<'de> for RawFrameworks {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = RawFrameworks;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`all`, a list of framework names, or `{exclude: [names]}`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                if v == "all" {
                    Ok(RawFrameworks::All)
                } else {
                    Err(E::custom(format!(
                        "`{v}` is not a framework selection; write `all`, a list like `[{v}]`, or `{{exclude: [{v}]}}`"
                    )))
                }
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                Vec::deserialize(SeqAccessDeserializer::new(seq)).map(RawFrameworks::Only)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                ExcludeSpec::deserialize(MapAccessDeserializer::new(map))
                    .map(|e| RawFrameworks::Exclude(e.exclude))
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for RawFrameworks {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Frameworks".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "`all`, a list of framework names, or `{exclude: [names]}`.",
            "anyOf": [
                {"const": "all"},
                {"type": "array", "items": {"type": "string"}},
                {
                    "type": "object",
                    "properties": {"exclude": {"type": "array", "items": {"type": "string"}}},
                    "required": ["exclude"],
                    "additionalProperties": false
                }
            ]
        })
    }
}

/// How warm-up ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WarmupMode {
    /// A fixed length of time (`duration`).
    #[default]
    Fixed,
    /// Until throughput is stable: the CV of the last 3 windows of length
    /// `window` is at most `max_cv`, or `max_duration` has passed.
    UntilStable,
}

/// Warm-up as written: a bare duration, or a mapping.
#[derive(Debug, Clone, PartialEq)]
pub enum RawWarmup {
    /// `warmup: 5s`, short for `{mode: fixed, duration: 5s}`.
    Short(Human),
    /// The full form.
    Spec(WarmupSpec),
}

/// The full form of `warmup`. Fields that do not belong to the chosen mode
/// are errors.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WarmupSpec {
    /// `fixed` or `until-stable`. Default: `fixed`.
    #[serde(default)]
    pub mode: Option<WarmupMode>,
    /// (fixed) Length of the warm-up; `0s` turns it off. Default: `5s`.
    #[serde(default)]
    pub duration: Option<Human>,
    /// (until-stable) Length of each throughput window. Default: `5s`.
    #[serde(default)]
    pub window: Option<Human>,
    /// (until-stable) Largest CV (stdev / mean) of the last 3 windows'
    /// throughput that counts as stable, from 0 to 1. Default: `0.05`.
    #[serde(default)]
    pub max_cv: Option<f64>,
    /// (until-stable) Give up waiting for stability after this long and
    /// measure anyway; the cell is marked unstable. Default: `60s`.
    #[serde(default)]
    pub max_duration: Option<Human>,
}

impl<'de> Deserialize<'de> for RawWarmup {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = RawWarmup;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration like `5s`, or `{mode: fixed, duration: 5s}`, or `{mode: until-stable, ...}`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                v.parse().map(RawWarmup::Short).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                WarmupSpec::deserialize(MapAccessDeserializer::new(map)).map(RawWarmup::Spec)
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for RawWarmup {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Warmup".into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let short = g.subschema_for::<Human>();
        let spec = g.subschema_for::<WarmupSpec>();
        schemars::json_schema!({
            "description": "A duration (`5s`, fixed warm-up) or the full form.",
            "anyOf": [short, spec]
        })
    }
}

/// Rounds as written: a number, or the until-precise mapping.
#[derive(Debug, Clone, PartialEq)]
pub enum RawRounds {
    /// `rounds: 3`.
    Count(u64),
    /// `rounds: {min: 3, max: 12, precision: 0.02}`.
    UntilPrecise(RoundsSpec),
}

/// Rounds until the headline figure is precise. Each field has a default.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoundsSpec {
    /// Rounds every cell gets, at least 3 (the fewest that give an
    /// interval). Default: `3`.
    #[serde(default)]
    pub min: Option<u64>,
    /// Most rounds a cell gets. Default: `12`.
    #[serde(default)]
    pub max: Option<u64>,
    /// Half-width of the 95% interval asked for, relative to the figure,
    /// between 0 and 1 (`0.02` = ±2%). Default: `0.02`.
    #[serde(default)]
    pub precision: Option<f64>,
}

impl<'de> Deserialize<'de> for RawRounds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = RawRounds;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of rounds like `3`, or `{min: 3, max: 12, precision: 0.02}`")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(RawRounds::Count(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Err(E::custom(format!(
                    "expected a number of rounds like `3`, or `{{min: 3, max: 12, precision: 0.02}}`, found `{v}`"
                )))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                u64::try_from(v)
                    .map(RawRounds::Count)
                    .map_err(|_| E::custom(format!("{v} rounds: must be at least 1")))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                RoundsSpec::deserialize(MapAccessDeserializer::new(map))
                    .map(RawRounds::UntilPrecise)
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for RawRounds {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Rounds".into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let spec = g.subschema_for::<RoundsSpec>();
        schemars::json_schema!({
            "description": "A number of rounds, or rounds until the headline figure is precise.",
            "anyOf": [{"type": "integer", "minimum": 1}, spec]
        })
    }
}

/// Load-generation mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RawLoadMode {
    /// Closed loop: each connection sends its next request when the previous
    /// answer arrives. Measures saturation throughput.
    #[default]
    Closed,
    /// Open loop at a fixed total request rate (`rate`); latency is measured
    /// from each request's scheduled send time (no coordinated omission).
    FixedRate,
}

/// `load` as written.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Load")]
pub struct RawLoad {
    /// `closed` or `fixed-rate`. Default: `closed`.
    #[serde(default)]
    pub mode: Option<RawLoadMode>,
    /// (fixed-rate, required there) Target requests per second, all
    /// connections together.
    #[serde(default)]
    pub rate: Option<u64>,
    /// Loader threads; each owns an equal share of the connections.
    /// Default: one per loader CPU.
    #[serde(default)]
    pub threads: Option<u64>,
    /// Requests in flight per connection (HTTP/1.1 pipelining); 1 means no
    /// pipelining. Default: `1`.
    #[serde(default)]
    pub pipeline: Option<u64>,
    /// Concurrent streams per connection on HTTP/2 cells (`h2`, `h2c`):
    /// HTTP/2's counterpart of pipelining (h2load's `-m`). Requests in
    /// flight = connections × streams. Default: `1`.
    #[serde(default)]
    pub streams: Option<u64>,
    /// A request not answered within this long counts as a timeout error.
    /// Default: `5s`.
    #[serde(default)]
    pub timeout: Option<Human>,
}

/// CPU placement as written: `auto` or a core list like `0-1,3`.
#[derive(Debug, Clone, PartialEq)]
pub enum RawCpuset {
    /// fairground picks cores: the server first, then the loader, disjoint.
    Auto,
    /// These cores exactly.
    Cores(crate::host::CoreList),
}

impl<'de> Deserialize<'de> for RawCpuset {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = RawCpuset;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`auto` or a core list like `0-1,3`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                if v.trim() == "auto" {
                    Ok(RawCpuset::Auto)
                } else {
                    v.parse().map(RawCpuset::Cores).map_err(|e: String| {
                        E::custom(format!("{e}, or `auto` to let fairground choose"))
                    })
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                self.visit_str(&v.to_string())
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for RawCpuset {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Cpuset".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "`auto` (fairground picks disjoint cores) or a core list like `0-1,3`.",
            "anyOf": [
                {"const": "auto"},
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": "^\\s*[0-9]+(-[0-9]+)?(\\s*,\\s*[0-9]+(-[0-9]+)?)*\\s*$"}
            ]
        })
    }
}

/// A sysctl value: YAML lets people write `65535` or `"1024 65535"`; both are
/// handed to Docker as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysctlValue(pub String);

impl<'de> Deserialize<'de> for SysctlValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = SysctlValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(SysctlValue(v.trim().to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(SysctlValue(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(SysctlValue(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(SysctlValue(u8::from(v).to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for SysctlValue {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SysctlValue".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A sysctl value, e.g. `65535` or `\"1024 65535\"`.",
            "type": ["integer", "string", "boolean"]
        })
    }
}

/// Container limits as written (`server` and `loader`).
#[derive(Debug, Clone, PartialEq, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Limits")]
pub struct RawLimits {
    /// CPU time for the container in cores (Docker `--cpus`): `1`, `2`, or a
    /// fraction such as `0.5`. The container is pinned to that many cores,
    /// rounded up, and servers start one worker per pinned core
    /// (`FAIRGROUND_CPUS`). Default: `1`.
    #[serde(default)]
    pub cpus: Option<f64>,
    /// Cores to pin to: `auto` or a list like `0-1`. Default: `auto`.
    #[serde(default)]
    pub cpuset: Option<RawCpuset>,
    /// Memory limit (`512MiB`, `1GiB`); at least 32MiB. Default: `1GiB`.
    #[serde(default)]
    pub memory: Option<Bytes>,
    /// Allow swap beyond `memory`. Default: `false` (swap hides memory
    /// pressure behind latency).
    #[serde(default)]
    pub swap: Option<bool>,
    /// Open-file limit (soft = hard); must exceed the highest concurrency
    /// plus 256 descriptors of headroom. Default: `16384`.
    #[serde(default)]
    pub nofile: Option<u64>,
    /// Network sysctls set in the container's namespace (bridge mode only).
    /// Replaces the defaults when written.
    #[serde(default)]
    pub sysctls: Option<BTreeMap<String, SysctlValue>>,
}

/// `database` as written.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Database")]
pub struct RawDatabase {
    /// CPU time for the database in cores (Docker `--cpus`). Default: `1`.
    #[serde(default)]
    pub cpus: Option<f64>,
    /// Cores to pin it to: `auto` (the server's cores: the server and its
    /// database share them, and results say so) or a list like `0`.
    /// Default: `auto`.
    #[serde(default)]
    pub cpuset: Option<RawCpuset>,
    /// Memory limit, its data (on a tmpfs) included. Default: `1GiB`.
    #[serde(default)]
    pub memory: Option<Bytes>,
    /// Open-file limit. Default: `16384`.
    #[serde(default)]
    pub nofile: Option<u64>,
    /// PostgreSQL's `shared_buffers`. Default: `128MiB`.
    #[serde(default)]
    pub shared_buffers: Option<Bytes>,
    /// PostgreSQL's `max_connections`; must exceed `pool` by PostgreSQL's
    /// 3 reserved connections. Default: `100`.
    #[serde(default)]
    pub max_connections: Option<u32>,
    /// PostgreSQL's `synchronous_commit`. Default: `false` (off, as
    /// TechEmpower ran it: an update is answered before its WAL reaches
    /// the disk; the data is on a tmpfs anyway).
    #[serde(default)]
    pub synchronous_commit: Option<bool>,
    /// Connections each framework's pool should open, told to it as
    /// `FAIRGROUND_DB_POOL`. Default: `16`.
    #[serde(default)]
    pub pool: Option<u32>,
}

/// `thresholds` as written.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Thresholds")]
pub struct RawThresholds {
    /// Largest share of failed requests (non-2xx, timeouts, socket errors)
    /// a cell may have, from 0 to 1. Default: `0.001`.
    #[serde(default)]
    pub max_error_rate: Option<f64>,
    /// Largest CV (stdev / mean) of throughput across rounds before a cell is
    /// flagged noisy, from 0 to 1. Default: `0.05`.
    #[serde(default)]
    pub max_cv: Option<f64>,
    /// Loader CPU use (share of its quota) above which a cell is flagged
    /// client-bound, from 0 to 1. Default: `0.90`.
    #[serde(default)]
    pub loader_saturation: Option<f64>,
    /// (fixed-rate) Smallest achieved / target rate before a cell is flagged,
    /// from 0 to 1. Default: `0.98`.
    #[serde(default)]
    pub min_rate_ratio: Option<f64>,
    /// A round whose throughput is farther than this share from the cell's
    /// median is marked suspect, from 0 to 1. Default: `0.10`.
    #[serde(default)]
    pub suspect_round: Option<f64>,
    /// Share of the loader's CPU-quota periods throttled above which a cell
    /// is flagged client-bound, from 0 to 1. Default: `0.10`.
    #[serde(default)]
    pub max_loader_throttled: Option<f64>,
    /// (fixed-rate) Largest delay between when a request was due and when
    /// the loader sent it, in µs, before a cell is flagged. Default: `10000`.
    #[serde(default)]
    pub max_schedule_lag_us: Option<u64>,
    /// CPU used on the host by anything but the server and the loader, in
    /// cores, above which a round is flagged as sharing the host. Default:
    /// `0.5`.
    #[serde(default)]
    pub max_foreign_cores: Option<f64>,
    /// A round whose calibration probe read more than this share slower
    /// than the framework's fast reference (the 10th percentile of its
    /// rounds) was measured on a slowed machine: it is left out of the
    /// figures and measured again, from 0 to 1. Default: `0.10`.
    #[serde(default)]
    pub slowed_machine: Option<f64>,
    /// Closed loop: largest gap between responses/s × mean latency and the
    /// connections served × pipeline (Little's law) before a cell is
    /// flagged, from 0 to 1. Default: `0.10`.
    #[serde(default)]
    pub littles_law_tolerance: Option<f64>,
    /// What a failed preflight check does: `strict` refuses to run, `warn`
    /// runs and marks every result. Default: `strict`.
    #[serde(default)]
    pub preflight: Option<Preflight>,
    /// Gates to switch off, by threshold name (`max_error_rate`,
    /// `littles_law_tolerance`, `max_cv`, `suspect_round`, `slowed_machine`). A threshold that
    /// would switch its gate off (e.g. `max_error_rate: 1.0`) is refused
    /// unless the gate is named here; the report then says it was off.
    #[serde(default)]
    pub off: Option<Vec<String>>,
}
