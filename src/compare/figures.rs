//! The one place `compare` reads figures out of a results.json: which number
//! of a round each metric is, the per-second windows, and the facts about a
//! run that decide whether two runs can be compared.
//!
//! Every other file of `compare` goes through these accessors, so a change
//! of the results layout (new fields, renamed ones) is one edit here. This
//! file only reads; it computes no statistic and passes no judgement.

use serde::{Deserialize, Serialize};

use crate::results::{Cell, Reason, Results, Round};

/// A figure `compare` judges, one value per round.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// 2xx responses per second of the measured window.
    Throughput,
    /// Median latency of the round (its HDR histogram), µs.
    LatencyP50,
    /// 99th-percentile latency of the round, µs.
    LatencyP99,
    /// Server CPU time (cgroup) per 2xx response, µs.
    CpuPerRequest,
    /// Median of the server's memory samples under load, bytes.
    MemoryUnderLoad,
    /// Bytes read from the socket per response (headers and body).
    WireBytes,
}

/// Which way is better for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// A larger value is an improvement (throughput).
    Higher,
    /// A smaller value is an improvement (latency, CPU, memory, bytes).
    Lower,
}

impl Metric {
    /// Every metric, in the order reports list them.
    pub const ALL: [Metric; 6] = [
        Metric::Throughput,
        Metric::LatencyP50,
        Metric::LatencyP99,
        Metric::CpuPerRequest,
        Metric::MemoryUnderLoad,
        Metric::WireBytes,
    ];

    /// Short name for tables.
    pub fn label(self) -> &'static str {
        match self {
            Metric::Throughput => "req/s",
            Metric::LatencyP50 => "p50",
            Metric::LatencyP99 => "p99",
            Metric::CpuPerRequest => "CPU/req",
            Metric::MemoryUnderLoad => "memory",
            Metric::WireBytes => "wire bytes",
        }
    }

    /// What the figure is and how it was measured, for the notes under a table.
    pub fn measured(self) -> &'static str {
        match self {
            Metric::Throughput => "req/s: 2xx responses completed in the loader's window / its length, per round",
            Metric::LatencyP50 => "p50: median latency of the round's HDR histogram",
            Metric::LatencyP99 => "p99: 99th-percentile latency of the round's HDR histogram",
            Metric::CpuPerRequest => {
                "CPU/req: server cgroup CPU time during the window / 2xx responses, µs"
            }
            Metric::MemoryUnderLoad => {
                "memory: median of the server cgroup's memory samples (every 250 ms) inside the loader's window"
            }
            Metric::WireBytes => "wire bytes: bytes read from the socket per response",
        }
    }

    /// Unit of the values of `scenario`'s cells: a rate in the
    /// scenario's own unit (msg/s for WebSocket), the rest as [`Self::unit`].
    pub fn unit_of(self, scenario: crate::contract::Scenario) -> &'static str {
        match self {
            Metric::Throughput => scenario.rate_unit(),
            m => m.unit(),
        }
    }

    /// Unit of the values, as JSON records it.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Throughput => "req/s",
            Metric::LatencyP50 | Metric::LatencyP99 | Metric::CpuPerRequest => "µs",
            Metric::MemoryUnderLoad | Metric::WireBytes => "bytes",
        }
    }

    /// The least a run-to-run difference of this metric must be to be
    /// named a change, as a log range: what two runs of the same server
    /// differ by that the rounds inside one run do not show. Memory under
    /// load: 10%. Two containers of the same server (A/A, tests/
    /// compare_docker.rs) read 2.2% and 7.4% apart while each run's five
    /// rounds agreed within 1%: which page-cache pages and stack pages a
    /// container gets charged for is decided once per container, not per
    /// round. The other metrics vary round to round and keep the general
    /// floor ([`super::verdict::MIN_BAND`]).
    pub fn between_runs_floor(self) -> f64 {
        match self {
            Metric::MemoryUnderLoad => 1.10f64.ln(),
            _ => 0.0,
        }
    }

    /// The least a difference between two *different runs* must be to be
    /// named a change, as a log range, for the figures a machine moves:
    /// how far apart two runs of an unchanged server were measured (A/A)
    /// beyond their rounds' own range, on this project's 2-core VM. CI's
    /// run of tests/compare_docker.rs on 2026-12-01, a 400 µs-burn server
    /// against itself one minute later (derived from its three
    /// comparisons): req/s 5.7% apart, p50 4.7%, CPU per request 4.1%, p99
    /// 21%, while each run's rounds agreed within 5–8% (p99: 17%). So 8%
    /// for req/s, p50 and CPU per request, 25% for p99. Two frameworks of
    /// one run share the machine's states round by round (the rounds
    /// interleave) and keep the finer bands: measure what must be told
    /// apart more finely in one run.
    pub fn across_runs_floor(self) -> f64 {
        match self {
            Metric::Throughput | Metric::LatencyP50 | Metric::CpuPerRequest => 1.08f64.ln(),
            Metric::LatencyP99 => 1.25f64.ln(),
            Metric::MemoryUnderLoad | Metric::WireBytes => 0.0,
        }
    }

    /// Whether a machine that runs slower moves this figure: every request
    /// costs more CPU and takes longer. Not memory, not bytes on the wire.
    pub fn machine_moves_it(self) -> bool {
        matches!(
            self,
            Metric::Throughput | Metric::LatencyP50 | Metric::LatencyP99 | Metric::CpuPerRequest
        )
    }

    /// Which way is better.
    pub fn better(self) -> Better {
        match self {
            Metric::Throughput => Better::Higher,
            _ => Better::Lower,
        }
    }

    /// The metric's value in `round`, if the round has one.
    pub fn of(self, round: &Round) -> Option<f64> {
        match self {
            Metric::Throughput => Some(round.throughput_rps),
            Metric::LatencyP50 => round.latency.p50_us.map(|v| v as f64),
            Metric::LatencyP99 => round.latency.p99_us.map(|v| v as f64),
            Metric::CpuPerRequest => round.server.cpu_us_per_request,
            Metric::MemoryUnderLoad => round.server.memory_median_bytes.map(|b| b as f64),
            Metric::WireBytes => round.wire_bytes_per_response,
        }
    }

    /// Whether the round's value of this metric is only known to exceed
    /// the request timeout (a percentile that falls among the requests
    /// beyond it): [`Metric::of`] has no number for it, and dropping the
    /// round would leave a figure drawn from the rounds that survived.
    pub fn beyond_timeout(self, round: &Round) -> bool {
        let v = match self {
            Metric::LatencyP50 => round.latency.p50_us,
            Metric::LatencyP99 => round.latency.p99_us,
            _ => return false,
        };
        v.is_none() && round.latency.beyond_timeout > 0
    }

    /// The sub-round samples whose mean is the round's value, when the
    /// results have them: the per-second 2xx counts behind req/s. Other
    /// metrics are percentiles, medians or ratios of whole-round totals,
    /// not means of anything recorded, so they have none.
    pub fn windows(self, round: &Round) -> Option<&[f64]> {
        match self {
            Metric::Throughput if !round.windows_rps.is_empty() => Some(&round.windows_rps),
            _ => None,
        }
    }
}

/// Rounds of `cell` (by index) that the gates left out of its figures:
/// measured on a busy host (other processes and the hypervisor's steal
/// took more CPU than the run's threshold during the window, so the round
/// measured them as much as the server) or on a slowed machine (the
/// calibration probe read it slower than the framework's fast reference).
pub fn left_out_rounds(cell: &Cell) -> Vec<u32> {
    let mut rounds: Vec<u32> = cell
        .verdict
        .reasons
        .iter()
        .filter_map(|r| match r {
            Reason::HostBusy { round, .. } | Reason::MachineSlowed { round, .. } => Some(*round),
            _ => None,
        })
        .collect();
    rounds.sort_unstable();
    rounds.dedup();
    rounds
}

/// A fact about a run that changes its figures, by the name the refusal
/// message uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    /// Field name, e.g. `load.pipeline` or `host.kernel`.
    pub field: &'static str,
    /// Its value in words; `None` when the run did not record it.
    pub value: Option<String>,
}

/// Every fact that must match for two runs' figures to be comparable: the
/// load (connections, pipeline, rate, loader threads), the window, the
/// container limits, the loader (fairground) version, and the machine
/// (CPU model, cores, virtualization, kernel, network mode).
pub fn comparability_facts(r: &Results) -> Vec<Fact> {
    use crate::profile::units::Human;
    use crate::profile::LoadMode;
    let p = &r.profile;
    let host = &r.environment.report["host"];
    let fact = |field: &'static str, v: &serde_json::Value| Fact {
        field,
        value: words(v),
    };
    let said = |field: &'static str, v: String| Fact {
        field,
        value: Some(v),
    };
    let (mode, rate) = match p.load.mode {
        LoadMode::Closed => ("closed", None),
        LoadMode::FixedRate { rate } => ("fixed-rate", Some(rate.to_string())),
    };
    let concurrency: Vec<String> = p.concurrency.iter().map(u32::to_string).collect();
    vec![
        said("connections (concurrency)", concurrency.join(", ")),
        said("load.mode", mode.to_string()),
        Fact {
            field: "load.rate",
            value: rate,
        },
        said("load.pipeline", p.load.pipeline.to_string()),
        said("load.threads", p.load.threads.to_string()),
        said("load.timeout", Human(p.load.timeout).to_string()),
        said("window.duration", Human(p.duration).to_string()),
        setting("window.warmup", &p.warmup),
        said(
            "restart_between_rounds",
            p.restart_between_rounds.to_string(),
        ),
        setting("limits.server", &p.server),
        setting("limits.loader", &p.loader),
        said(
            "limits.allow_shared_cores",
            p.allow_shared_cores.to_string(),
        ),
        setting("network", &p.network),
        Fact {
            field: "loader version (fairground)",
            value: Some(r.fairground_version.clone()),
        },
        Fact {
            // The hash of the loader binary: the version alone misses a
            // rebuild with changed loader code.
            field: "loader build (fairground image)",
            value: (!r.loader_images.is_empty()).then(|| r.loader_images.join(", ")),
        },
        fact("host.cpu_model", &host["cpu_model"]),
        fact("host.cores_online", &host["cores_online"]),
        fact("host.virtualization", &host["platform"]),
        fact(
            "host.hypervisor",
            &r.environment.report["probes"]["cpuid"]["signature"],
        ),
        fact("host.kernel", &host["kernel"]),
    ]
}

/// A profile setting with several fields (warm-up, limits) in the profile
/// file's own notation, compact.
fn setting(field: &'static str, v: &impl serde::Serialize) -> Fact {
    Fact {
        field,
        value: serde_json::to_value(v).ok().as_ref().and_then(words),
    }
}

/// A JSON value in words: strings bare, everything else as compact JSON;
/// `None` for null or absent.
fn words(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::sample_results;

    #[test]
    fn reads_every_metric_of_a_round() {
        let r = sample_results();
        let round = &r.cells[0].rounds[0];
        for m in Metric::ALL {
            assert!(m.of(round).is_some_and(|v| v > 0.0), "{m:?}");
        }
        assert_eq!(
            Metric::Throughput.windows(round).map(<[f64]>::len),
            Some(round.windows_rps.len())
        );
        assert!(Metric::LatencyP99.windows(round).is_none());
    }

    #[test]
    fn facts_name_the_profile_fields_and_mark_what_is_not_recorded() {
        let mut r = sample_results();
        r.profile.load.pipeline = 16;
        r.profile.duration = std::time::Duration::from_secs(15);
        r.profile.concurrency = vec![100, 10_000];
        let facts = comparability_facts(&r);
        let get = |f: &str| facts.iter().find(|x| x.field == f).unwrap().value.clone();
        assert_eq!(get("load.pipeline").as_deref(), Some("16"));
        assert_eq!(get("window.duration").as_deref(), Some("15s"));
        assert_eq!(
            get("connections (concurrency)").as_deref(),
            Some("100, 10000")
        );
        assert_eq!(get("network").as_deref(), Some("bridge"));
        assert!(get("limits.server").unwrap().contains("\"nofile\""));
        // A closed loop has no rate: nothing to compare.
        assert_eq!(get("load.rate"), None);
        r.profile.load.mode = crate::profile::LoadMode::FixedRate { rate: 5000 };
        let facts = comparability_facts(&r);
        let get = |f: &str| facts.iter().find(|x| x.field == f).unwrap().value.clone();
        assert_eq!(get("load.rate").as_deref(), Some("5000"));
        assert_eq!(get("load.mode").as_deref(), Some("fixed-rate"));
    }
}
