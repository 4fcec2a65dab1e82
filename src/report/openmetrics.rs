//! results.prom: every cell's headline figures in the OpenMetrics text
//! format (<https://prometheus.io/docs/specs/om/open_metrics_spec/>), for
//! node-exporter's textfile collector or a push gateway.
//!
//! One gauge family per figure, one sample per cell, labelled with what
//! names the cell (framework, scenario, concurrency, rate, protocol), its
//! verdict and the run. A rejected cell's figures are left out (its
//! numbers are not a measurement of the server, and a dashboard that
//! forgets to filter on `verdict` would plot them); it keeps its
//! `fairground_rounds` sample, with `verdict="rejected"`, so a dashboard
//! can tell why a series stopped instead of guessing. Units are in the names (seconds, bytes, ratios), as
//! the format asks. A figure that is unknown has no sample; a percentile
//! above the timeout is `+Inf` (it is only known to exceed it).
//!
//! Renders only what results.json holds; measures and judges nothing.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::{Exporter, Rendered};
use crate::results::{Cell, Results, Status};

/// File name inside the run directory.
pub const PROM_FILE: &str = "results.prom";

/// The OpenMetrics exporter.
pub struct OpenMetricsExporter;

/// Labels a sample adds to the cell's own.
type Labels = Vec<(&'static str, String)>;

/// A family's samples of one cell: extra labels and the value.
type Samples = Vec<(Labels, f64)>;

/// One gauge family: its name (without the `fairground_` prefix), help text
/// and how to read its samples off a cell.
struct Family {
    name: &'static str,
    help: &'static str,
    samples: fn(&Cell) -> Samples,
    /// Whether a rejected cell has a sample: only for what is not a
    /// figure of the server (the rounds measured), so no dashboard plots a
    /// rejected cell's req/s beside accepted ones.
    rejected_too: bool,
}

fn one(v: Option<f64>) -> Samples {
    v.map(|v| vec![(Vec::new(), v)]).unwrap_or_default()
}

const FAMILIES: &[Family] = &[
    Family {
        name: "throughput_requests_per_second",
        help: "2xx responses completed per second of the measured window, median of rounds",
        samples: |c| one(c.summary.as_ref().map(|s| s.throughput_rps.median)),
        rejected_too: false,
    },
    Family {
        name: "latency_seconds",
        help: "Latency percentile over every window request of all rounds (fixed rate: from the scheduled send); +Inf when it lies among requests slower than the timeout",
        samples: |c| {
            let Some(s) = &c.summary else { return Vec::new() };
            let l = &s.latency;
            [("50", l.p50_us), ("90", l.p90_us), ("99", l.p99_us), ("99.9", l.p999_us)]
                .into_iter()
                .filter_map(|(p, v)| {
                    l.rank_value(v)
                        .map(|us| (vec![("percentile", p.to_string())], us / 1e6))
                })
                .collect()
        },
        rejected_too: false,
    },
    Family {
        name: "latency_mean_answered_seconds",
        help: "Mean latency of the answered window requests of all rounds only: requests beyond the timeout (fairground_requests_beyond_timeout_ratio) are not in it; absent when none was answered",
        samples: |c| {
            one(c
                .summary
                .as_ref()
                .filter(|s| s.latency.count > 0)
                .map(|s| s.latency.mean_us / 1e6))
        },
        rejected_too: false,
    },
    Family {
        name: "requests_beyond_timeout_ratio",
        help: "Window requests whose latency exceeds the timeout (timed out, unanswered at the end, never sent) over the requests due, all rounds",
        samples: |c| {
            one(c.summary.as_ref().and_then(|s| {
                let l = &s.latency;
                let total = l.count + l.beyond_timeout;
                (total > 0).then(|| l.beyond_timeout as f64 / total as f64)
            }))
        },
        rejected_too: false,
    },
    Family {
        name: "requests_unsent_ratio",
        help: "Fixed rate: requests due in the window that were never sent (a server past its capacity) over the requests due, all rounds; absent in a closed loop",
        samples: |c| {
            if c.key.rate.is_none() || c.summary.is_none() {
                return Vec::new();
            }
            let unsent = crate::report::view::unsent(c).map_or(0.0, |(n, due)| n as f64 / due as f64);
            vec![(Vec::new(), unsent)]
        },
        rejected_too: false,
    },
    Family {
        name: "server_cpu_seconds_per_request",
        help: "Server cgroup CPU time over the window per 2xx response, median of rounds; absent when unknown",
        samples: |c| {
            one(c
                .summary
                .as_ref()
                .and_then(|s| s.cpu_us_per_request.as_ref())
                .map(|a| a.median / 1e6))
        },
        rejected_too: false,
    },
    Family {
        name: "server_memory_under_load_bytes",
        help: "Median of the server's memory samples inside the window, median of rounds",
        samples: |c| {
            one(c
                .summary
                .as_ref()
                .and_then(|s| s.memory_median_bytes.as_ref())
                .map(|a| a.median))
        },
        rejected_too: false,
    },
    Family {
        name: "server_memory_window_peak_bytes",
        help: "Highest server memory inside any round's window (the cgroup's high-water mark where the kernel keeps one)",
        samples: |c| {
            one(c
                .summary
                .as_ref()
                .and_then(|s| s.memory_window_peak_bytes)
                .map(|b| b as f64))
        },
        rejected_too: false,
    },
    Family {
        name: "error_ratio",
        help: "Failed requests (errors, timeouts, non-2xx answers) over attempts, all rounds",
        samples: |c| one(c.summary.as_ref().map(|s| s.error_rate)),
        rejected_too: false,
    },
    Family {
        name: "connections_served",
        help: "Connections that got an answer inside the window, the fewest of any round",
        samples: |c| {
            one(c
                .summary
                .as_ref()
                .map(|s| s.connections_serving_min as f64))
        },
        rejected_too: false,
    },
    Family {
        name: "rounds",
        help: "Rounds measured for the cell",
        samples: |c| vec![(Vec::new(), c.rounds.len() as f64)],
        rejected_too: true,
    },
];

/// A label value escaped as the text format asks (backslash, quote, newline).
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for ch in v.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A sample value: finite numbers as Rust prints them (shortest round
/// trip), infinity as `+Inf`.
fn value(v: f64) -> String {
    if v == f64::INFINITY {
        "+Inf".into()
    } else if v.is_nan() {
        "NaN".into()
    } else {
        format!("{v}")
    }
}

/// The text of results.prom.
pub fn openmetrics_text(results: &Results) -> String {
    let mut s = String::new();
    for f in FAMILIES {
        let name = format!("fairground_{}", f.name);
        let _ = writeln!(s, "# TYPE {name} gauge");
        let _ = writeln!(s, "# HELP {name} {}", f.help);
        for c in &results.cells {
            if c.verdict.status == Status::Rejected && !f.rejected_too {
                continue;
            }
            for (extra, v) in (f.samples)(c) {
                let mut labels = vec![
                    ("framework", c.key.framework.clone()),
                    ("scenario", c.key.scenario.to_string()),
                    ("concurrency", c.key.concurrency.to_string()),
                    (
                        "rate",
                        c.key.rate.map(|r| r.to_string()).unwrap_or_default(),
                    ),
                    ("protocol", c.key.protocol.to_string()),
                    ("verdict", c.verdict.status.to_string()),
                    ("run", results.run_id.clone()),
                ];
                labels.extend(extra);
                let labels: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                    .collect();
                let _ = writeln!(s, "{name}{{{}}} {}", labels.join(","), value(v));
            }
        }
    }
    s.push_str("# EOF\n");
    s
}

impl Exporter<Results> for OpenMetricsExporter {
    fn render(&self, results: &Results) -> anyhow::Result<Vec<Rendered>> {
        Ok(vec![Rendered {
            path: PathBuf::from(PROM_FILE),
            bytes: openmetrics_text(results).into_bytes(),
        }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_and_infinity_is_spelled_as_the_format_asks() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(value(f64::INFINITY), "+Inf");
        assert_eq!(value(0.25), "0.25");
    }

    #[test]
    fn every_family_is_typed_before_its_samples_and_the_text_ends_with_eof() {
        let r = crate::testdata::sample_results();
        let text = openmetrics_text(&r);
        assert!(text.ends_with("# EOF\n"));
        let mut typed = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                typed.insert(rest.split(' ').next().unwrap().to_string());
            } else if !line.starts_with('#') {
                let name = line.split('{').next().unwrap();
                assert!(typed.contains(name), "{name} sampled before its TYPE");
            }
        }
        let first = &r.cells[0];
        let want = format!(
            "fairground_throughput_requests_per_second{{framework=\"{}\",scenario=\"{}\",concurrency=\"{}\",",
            first.key.framework, first.key.scenario, first.key.concurrency
        );
        assert!(text.contains(&want), "{text}");
    }
}
