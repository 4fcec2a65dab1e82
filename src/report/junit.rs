//! results.junit.xml: the run as JUnit test results, so a CI's test view
//! (GitLab, GitHub, Jenkins) shows each cell: one test suite per scenario,
//! one test case per cell. A rejected cell is a failure with its reasons;
//! a flagged one passes with each flag as a property (and in its
//! system-out); a combination that was not run is skipped with why, but a
//! framework that failed (to build or start, or part-way through its
//! cells, in a suite `frameworks`) is a failure with the error. The
//! profile's objectives get a suite of their own, `objectives`: one test
//! case per objective and cell, a failure when missed, **skipped** (with
//! the interval that straddles the bound as its message) when undecided, a
//! pass when met, each with its sentence in system-out.
//!
//! Renders only what results.json holds; measures and judges nothing.

use std::path::PathBuf;

use anyhow::Context;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use quick_xml::Writer;

use super::{Exporter, Rendered};
use crate::results::{Cell, ObjectiveStatus, Results, Status};

/// File name inside the run directory.
pub const JUNIT_FILE: &str = "results.junit.xml";

/// The JUnit exporter.
pub struct JunitExporter;

/// A cell's test-case name: what names the cell besides its scenario.
fn case_name(c: &Cell) -> String {
    let mut s = c.key.framework.clone();
    if !c.key.protocol.is_http1() {
        s.push_str(&format!(" {}", c.key.protocol));
    }
    s.push_str(&format!(" c={}", c.key.concurrency));
    if let Some(r) = c.key.rate {
        s.push_str(&format!(" rate={r}/s"));
    }
    s
}

/// Seconds the cell's rounds measured (their windows), for `time`.
fn seconds(c: &Cell) -> f64 {
    c.rounds.iter().map(|r| r.duration_s).sum()
}

/// Why `framework` failed (to build, to start, or part-way through its
/// cells), if it did.
fn framework_failure<'a>(results: &'a Results, framework: &str) -> Option<&'a str> {
    results
        .frameworks
        .iter()
        .find(|f| f.name == framework)
        .and_then(|f| f.failure.as_deref())
}

/// Whether a skipped entry is a framework that failed to start (the whole
/// framework skipped, and a failure recorded): a failure, not a skip.
fn failed_to_start(results: &Results, s: &crate::results::Skipped) -> bool {
    s.scenario.is_none()
        && s.protocol.is_none()
        && framework_failure(results, &s.framework).is_some()
}

/// Frameworks that failed after they started (no whole-framework skip
/// says so): each a failed case of the `frameworks` suite, with why.
fn failed_later(results: &Results) -> Vec<(&str, &str)> {
    results
        .frameworks
        .iter()
        .filter_map(|f| f.failure.as_deref().map(|why| (f.name.as_str(), why)))
        .filter(|(name, _)| {
            !results
                .skipped
                .iter()
                .any(|s| s.framework == *name && failed_to_start(results, s))
        })
        .collect()
}

/// The suite a skipped combination belongs to.
fn skipped_scenario(s: &crate::results::Skipped) -> String {
    s.scenario
        .map_or_else(|| "every scenario".to_string(), |x| x.to_string())
}

type W = Writer<Vec<u8>>;

fn start(w: &mut W, name: &str, attrs: &[(&str, &str)]) -> std::io::Result<()> {
    let mut e = BytesStart::new(name);
    for (k, v) in attrs {
        e.push_attribute((*k, *v));
    }
    w.write_event(Event::Start(e))
}

fn empty(w: &mut W, name: &str, attrs: &[(&str, &str)]) -> std::io::Result<()> {
    let mut e = BytesStart::new(name);
    for (k, v) in attrs {
        e.push_attribute((*k, *v));
    }
    w.write_event(Event::Empty(e))
}

fn end(w: &mut W, name: &str) -> std::io::Result<()> {
    w.write_event(Event::End(BytesEnd::new(name)))
}

fn text_element(w: &mut W, name: &str, attrs: &[(&str, &str)], text: &str) -> std::io::Result<()> {
    start(w, name, attrs)?;
    w.write_event(Event::Text(BytesText::new(text)))?;
    end(w, name)
}

/// The bytes of results.junit.xml.
pub fn junit_xml(results: &Results) -> anyhow::Result<Vec<u8>> {
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    write(&mut w, results).context("writing results.junit.xml")?;
    let mut bytes = w.into_inner();
    bytes.push(b'\n');
    Ok(bytes)
}

fn write(w: &mut W, results: &Results) -> std::io::Result<()> {
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    let mut scenarios: Vec<String> = Vec::new();
    for c in &results.cells {
        let s = c.key.scenario.to_string();
        if !scenarios.contains(&s) {
            scenarios.push(s);
        }
    }
    for s in &results.skipped {
        let name = skipped_scenario(s);
        if !scenarios.contains(&name) {
            scenarios.push(name);
        }
    }
    let missed = results
        .objectives
        .iter()
        .filter(|o| o.status == ObjectiveStatus::Missed)
        .count();
    let later = failed_later(results);
    let failures = results
        .cells
        .iter()
        .filter(|c| c.verdict.status == Status::Rejected)
        .count()
        + results
            .skipped
            .iter()
            .filter(|s| failed_to_start(results, s))
            .count()
        + later.len()
        + missed;
    let tests =
        results.cells.len() + results.skipped.len() + later.len() + results.objectives.len();
    let suites_name = format!("fairground {} ({})", results.profile_name, results.run_id);
    let (tests_s, failures_s) = (tests.to_string(), failures.to_string());
    start(
        w,
        "testsuites",
        &[
            ("name", &suites_name),
            ("tests", &tests_s),
            ("failures", &failures_s),
        ],
    )?;
    for scenario in &scenarios {
        let cells: Vec<&Cell> = results
            .cells
            .iter()
            .filter(|c| &c.key.scenario.to_string() == scenario)
            .collect();
        let skipped: Vec<_> = results
            .skipped
            .iter()
            .filter(|s| &skipped_scenario(s) == scenario)
            .collect();
        let did_not_start = skipped
            .iter()
            .filter(|s| failed_to_start(results, s))
            .count();
        let fails = cells
            .iter()
            .filter(|c| c.verdict.status == Status::Rejected)
            .count()
            + did_not_start;
        let time: f64 = cells.iter().map(|c| seconds(c)).sum();
        let (n, f, k, t) = (
            (cells.len() + skipped.len()).to_string(),
            fails.to_string(),
            (skipped.len() - did_not_start).to_string(),
            format!("{time:.3}"),
        );
        start(
            w,
            "testsuite",
            &[
                ("name", scenario),
                ("tests", &n),
                ("failures", &f),
                ("errors", "0"),
                ("skipped", &k),
                ("time", &t),
            ],
        )?;
        let class = format!("fairground.{scenario}");
        for c in cells {
            let (name, time) = (case_name(c), format!("{:.3}", seconds(c)));
            start(
                w,
                "testcase",
                &[("classname", &class), ("name", &name), ("time", &time)],
            )?;
            let flags: Vec<String> = c
                .verdict
                .reasons
                .iter()
                .map(|r| c.key.scenario.in_own_words(&r.to_string()))
                .collect();
            match c.verdict.status {
                Status::Rejected => {
                    let label = c.verdict.reasons.first().map_or("rejected", |r| r.label());
                    text_element(
                        w,
                        "failure",
                        &[("message", label), ("type", "rejected")],
                        &flags.join("\n"),
                    )?;
                }
                Status::Flagged => {
                    start(w, "properties", &[])?;
                    for (r, text) in c.verdict.reasons.iter().zip(&flags) {
                        empty(w, "property", &[("name", r.label()), ("value", text)])?;
                    }
                    end(w, "properties")?;
                    text_element(
                        w,
                        "system-out",
                        &[],
                        &format!("flagged: {}", flags.join("; ")),
                    )?;
                }
                Status::Accepted => {}
            }
            end(w, "testcase")?;
        }
        for s in skipped {
            let name = format!("{} (all levels)", s.framework);
            start(
                w,
                "testcase",
                &[("classname", &class), ("name", &name), ("time", "0")],
            )?;
            if failed_to_start(results, s) {
                text_element(
                    w,
                    "failure",
                    &[("message", "framework failed"), ("type", "framework")],
                    &s.reason,
                )?;
            } else {
                empty(w, "skipped", &[("message", &s.reason)])?;
            }
            end(w, "testcase")?;
        }
        end(w, "testsuite")?;
    }
    if !later.is_empty() {
        let n = later.len().to_string();
        start(
            w,
            "testsuite",
            &[
                ("name", "frameworks"),
                ("tests", &n),
                ("failures", &n),
                ("errors", "0"),
                ("skipped", "0"),
                ("time", "0"),
            ],
        )?;
        for (name, why) in later {
            start(
                w,
                "testcase",
                &[
                    ("classname", "fairground.frameworks"),
                    ("name", name),
                    ("time", "0"),
                ],
            )?;
            text_element(
                w,
                "failure",
                &[("message", "framework failed"), ("type", "framework")],
                why,
            )?;
            end(w, "testcase")?;
        }
        end(w, "testsuite")?;
    }
    if !results.objectives.is_empty() {
        objectives(w, results, missed)?;
    }
    end(w, "testsuites")
}

/// The `objectives` suite: one case per objective × cell.
fn objectives(w: &mut W, results: &Results, missed: usize) -> std::io::Result<()> {
    let undecided = results
        .objectives
        .iter()
        .filter(|o| o.status == ObjectiveStatus::Undecided)
        .count();
    let (n, f, k) = (
        results.objectives.len().to_string(),
        missed.to_string(),
        undecided.to_string(),
    );
    start(
        w,
        "testsuite",
        &[
            ("name", "objectives"),
            ("tests", &n),
            ("failures", &f),
            ("errors", "0"),
            ("skipped", &k),
            ("time", "0"),
        ],
    )?;
    for o in &results.objectives {
        let class = format!("fairground.objectives.{}", o.cell.scenario);
        let mut name = format!(
            "{}: {} c={}",
            o.objective.text, o.cell.framework, o.cell.concurrency
        );
        if let Some(r) = o.cell.rate {
            name.push_str(&format!(" rate={r}/s"));
        }
        start(
            w,
            "testcase",
            &[("classname", &class), ("name", &name), ("time", "0")],
        )?;
        match o.status {
            ObjectiveStatus::Missed => text_element(
                w,
                "failure",
                &[("message", "objective missed"), ("type", "objective")],
                &o.why,
            )?,
            ObjectiveStatus::Undecided => empty(
                w,
                "skipped",
                &[("message", &format!("undecided: {}", o.why))],
            )?,
            ObjectiveStatus::Met => {}
        }
        text_element(
            w,
            "system-out",
            &[],
            &format!("{}: {}", o.status.word(), o.why),
        )?;
        end(w, "testcase")?;
    }
    end(w, "testsuite")
}

impl Exporter<Results> for JunitExporter {
    fn render(&self, results: &Results) -> anyhow::Result<Vec<Rendered>> {
        Ok(vec![Rendered {
            path: PathBuf::from(JUNIT_FILE),
            bytes: junit_xml(results)?,
        }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Reason, Verdict};

    #[test]
    fn a_rejected_cell_fails_with_its_reason_and_a_flagged_one_carries_its_flags() {
        let mut r = crate::testdata::sample_results();
        // Cells only: the objectives suite has its own test.
        r.objectives.clear();
        r.cells[0].verdict = Verdict::from_reasons(vec![Reason::OomKilled { kills: 1 }]);
        r.cells[1].verdict = Verdict::from_reasons(vec![Reason::EnvironmentNotAccepted]);
        let xml = String::from_utf8(junit_xml(&r).unwrap()).unwrap();
        assert!(
            xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"),
            "{xml}"
        );
        assert!(
            xml.contains("<failure message=\"OOM killed\" type=\"rejected\">the server was killed"),
            "{xml}"
        );
        assert!(xml.contains("<property name=\"env not accepted\""), "{xml}");
        let rejected = r
            .cells
            .iter()
            .filter(|c| c.verdict.status == Status::Rejected)
            .count();
        let failures = format!("failures=\"{rejected}\"");
        assert!(xml.contains(&failures), "{xml}");
        assert_eq!(
            xml.matches("<testcase ").count(),
            r.cells.len() + r.skipped.len()
        );
    }

    #[test]
    fn each_objective_and_cell_is_a_case_missed_fails_and_undecided_is_skipped() {
        let mut r = crate::testdata::sample_results();
        let objectives = [
            crate::results::Objective::parse("rps >= 1", None, None).unwrap(),
            crate::results::Objective::parse("rps >= 1000000000", None, None).unwrap(),
        ];
        r.objectives = crate::judge::objectives::judge(&r, &objectives);
        let missed = r
            .objectives
            .iter()
            .filter(|o| o.status == ObjectiveStatus::Missed)
            .count();
        assert!(missed > 0);
        let xml = String::from_utf8(junit_xml(&r).unwrap()).unwrap();
        assert!(xml.contains("<testsuite name=\"objectives\""), "{xml}");
        assert_eq!(
            xml.matches("<failure message=\"objective missed\"").count(),
            missed
        );
        assert_eq!(
            xml.matches("<testcase ").count(),
            r.cells.len() + r.skipped.len() + r.objectives.len()
        );
        let mut undecided = r.clone();
        undecided.objectives[0].status = ObjectiveStatus::Undecided;
        let xml = String::from_utf8(junit_xml(&undecided).unwrap()).unwrap();
        assert!(xml.contains("<skipped message=\"undecided: "), "{xml}");
    }

    #[test]
    fn a_framework_that_failed_to_start_or_later_is_a_failure_not_a_skip() {
        let mut r = crate::testdata::sample_results();
        r.objectives.clear();
        let before = String::from_utf8(junit_xml(&r).unwrap()).unwrap();
        let failures = |xml: &str| -> usize {
            let head = xml.split("<testsuites ").nth(1).unwrap();
            let f = head.split("failures=\"").nth(1).unwrap();
            f.split('"').next().unwrap().parse().unwrap()
        };
        let base = failures(&before);
        // express could not start: its whole-framework skip is a failure.
        let why = "could not start: container exited with code 1";
        r.framework_mut("express").failure = Some(why.into());
        r.skipped.push(crate::results::Skipped {
            framework: "express".into(),
            scenario: None,
            protocol: None,
            reason: why.into(),
        });
        // axum failed part-way: no skip says so, yet it must show.
        r.framework_mut("axum").failure = Some("the daemon went away".into());
        let xml = String::from_utf8(junit_xml(&r).unwrap()).unwrap();
        assert_eq!(failures(&xml), base + 2, "{xml}");
        assert!(
            xml.contains(&format!(
                "<failure message=\"framework failed\" type=\"framework\">{why}</failure>"
            )),
            "{xml}"
        );
        assert!(
            !xml.contains(&format!("<skipped message=\"{why}\"")),
            "{xml}"
        );
        let later = xml.split("<testsuite name=\"frameworks\"").nth(1).unwrap();
        assert!(later.contains("name=\"axum\""), "{later}");
        assert!(later.contains("the daemon went away"), "{later}");
    }
}
