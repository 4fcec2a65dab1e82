//! Known answer (issue 36, item 6): no figure drawn from the survivors. A
//! fixed-rate cell past its server's capacity, with more than half of the
//! requests due in its window never answered inside the timeout, reads a
//! p50 beyond the timeout in every output, its spectrum ends at "> timeout"
//! at the share of requests beyond it, and its unsent requests are in the
//! errors column. Built from constructed results: no Docker, no quiet host.

use hdrhistogram::Histogram;

use super::*;
use crate::contract::{Protocol, Scenario};
use crate::judge::gates::{finish_cell, GateContext};
use crate::results::{histogram, CellKey, Latency, RateFigures, Status};
use crate::testdata::{round, sample_results};

/// Requests due per round: 2,000/s over the sample's 15 s window.
const DUE: u64 = 30_000;
/// Of them, answered (between 1 and 3 s after their scheduled send).
const ANSWERED: u64 = 14_000;
/// The rest were never sent: the connections were busy when the run ended.
const UNSENT: u64 = DUE - ANSWERED;

fn past_capacity_key() -> CellKey {
    CellKey {
        framework: "axum".into(),
        scenario: Scenario::Json,
        protocol: Protocol::Http1,
        concurrency: 100,
        rate: Some(2_000),
    }
}

/// The sample run plus one fixed-rate cell where 16,000 of 30,000 requests
/// due per round were never sent.
fn past_capacity_results() -> Results {
    let mut r = sample_results();
    let key = past_capacity_key();
    let rounds = (0..3)
        .map(|i| {
            let mut x = round(i, 100, ANSWERED as f64 / 15.0);
            let mut h = Histogram::<u64>::new(3).unwrap();
            h.record_n(1_000_000_000, ANSWERED / 2).unwrap();
            h.record_n(3_000_000_000, ANSWERED - ANSWERED / 2).unwrap();
            x.histogram = histogram::encode(&h).unwrap();
            x.requests.sent = ANSWERED;
            x.requests.unsent = UNSENT;
            x.latency = Latency::of(&h, UNSENT, Some(5_000_000));
            x.rate = Some(RateFigures {
                target_rps: 2_000.0,
                achieved_rps: ANSWERED as f64 / 15.0,
                max_lag_us: 100,
            });
            x
        })
        .collect();
    let ctx = GateContext {
        thresholds: &r.thresholds,
        environment_forced: false,
        verify_failure: None,
        rounds_planned: 3,
        rounds_min: 3,
        precise: false,
        closed_loop_pipeline: None,
        http2_streams: 1,
    };
    let cell = finish_cell(key.clone(), rounds, &ctx).unwrap();
    r.plan.push(key);
    r.cells.push(cell);
    r
}

fn rendered(r: &Results, path: &str) -> String {
    let files: Vec<Rendered> = exporters()
        .iter()
        .flat_map(|e| e.render(r).unwrap())
        .collect();
    let f = files
        .into_iter()
        .find(|f| f.path == std::path::Path::new(path))
        .unwrap_or_else(|| panic!("{path} not rendered"));
    String::from_utf8(f.bytes).unwrap()
}

#[test]
fn the_known_answer_cell_is_shown_not_rejected() {
    let r = past_capacity_results();
    let c = r.cell(&past_capacity_key()).unwrap();
    // Unsent requests are not errors: the cell keeps its figures, flagged
    // for missing its rate, so every output below shows them.
    assert_ne!(c.verdict.status, Status::Rejected, "{:?}", c.verdict);
    let l = &c.summary.as_ref().unwrap().latency;
    assert_eq!((l.p50_us, l.beyond_timeout), (None, 3 * UNSENT));
}

#[test]
fn a_p50_beyond_the_timeout_reads_beyond_it_in_results_md_with_the_unsent_as_errors() {
    let md = rendered(&past_capacity_results(), "results.md");
    let row = md
        .lines()
        .find(|l| l.starts_with("| axum |") && l.contains("> 5.00 s / > 5.00 s / > 5.00 s"))
        .unwrap_or_else(|| panic!("no headline p50 beyond the timeout:\n{md}"));
    assert!(row.contains("at 933 req/s"), "{row}");
    let detail = md
        .lines()
        .find(|l| l.starts_with("| axum | 100/100 | 933"))
        .unwrap_or_else(|| panic!("no scenario row:\n{md}"));
    assert!(detail.contains("48,000 unsent (53.3%)"), "{detail}");
    assert!(
        detail.contains("| 2.00 s (answered only) | > 5.00 s | > 5.00 s |"),
        "{detail}"
    );
    assert!(md.contains("| mean of answered |"));
    assert!(!md.contains("avg latency"));
}

#[test]
fn a_p50_beyond_the_timeout_is_empty_in_results_csv_beside_the_requests_beyond_it() {
    let csv = rendered(&past_capacity_results(), "results.csv");
    let mut rd = ::csv::Reader::from_reader(csv.as_bytes());
    let head = rd.headers().unwrap().clone();
    let col = |name: &str| head.iter().position(|h| h == name).unwrap();
    let rows: Vec<_> = rd
        .records()
        .map(Result::unwrap)
        .filter(|row| &row[col("target_rate_rps")] == "2000")
        .collect();
    assert_eq!(rows.len(), 3);
    for row in rows {
        assert_eq!(&row[col("latency_p50_us")], "");
        assert_eq!(&row[col("latency_beyond_timeout")], "16000");
        assert_eq!(&row[col("requests_unsent")], "16000");
        let mean: f64 = row[col("latency_mean_answered_us")].parse().unwrap();
        assert!((mean - 2e6).abs() < 1e3, "{mean}");
    }
}

#[test]
fn a_p50_beyond_the_timeout_is_inf_in_results_prom_with_the_unsent_share() {
    let prom = rendered(&past_capacity_results(), "results.prom");
    let cell = "framework=\"axum\",scenario=\"json\",concurrency=\"100\",rate=\"2000\"";
    let p50 = prom
        .lines()
        .find(|l| l.contains(cell) && l.contains("percentile=\"50\""))
        .unwrap();
    assert!(p50.ends_with(" +Inf"), "{p50}");
    let unsent = prom
        .lines()
        .find(|l| l.starts_with("fairground_requests_unsent_ratio") && l.contains(cell))
        .unwrap();
    assert!(unsent.ends_with(" 0.5333333333333333"), "{unsent}");
    assert!(!prom.contains("fairground_latency_mean_seconds"));
}

#[test]
fn a_p50_beyond_the_timeout_reads_beyond_it_in_report_html_and_its_spectrum_ends_there() {
    let html = rendered(&past_capacity_results(), "report.html");
    assert!(html.contains("&gt; 5.00 s: 53.3%"), "spectrum end missing");
    assert!(html.contains("48,000 (53.3%)"), "unsent column missing");
}

#[test]
fn a_p50_beyond_the_timeout_is_null_in_results_json() {
    let json = rendered(&past_capacity_results(), "results.json");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let cell = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"]["rate"] == 2000)
        .unwrap();
    let l = &cell["summary"]["latency"];
    assert!(l["p50_us"].is_null(), "{l}");
    assert_eq!(l["beyond_timeout"], 3 * UNSENT);
    assert_eq!(l["timeout_us"], 5_000_000);
}

#[test]
fn results_prom_leaves_out_rejected_cells_figures_but_keeps_their_rounds() {
    let r = sample_results();
    let prom = openmetrics_text(&r);
    let rejected: Vec<&str> = prom
        .lines()
        .filter(|l| l.contains("verdict=\"rejected\""))
        .collect();
    assert!(!rejected.is_empty());
    assert!(
        rejected.iter().all(|l| l.starts_with("fairground_rounds{")),
        "{rejected:#?}"
    );
}
