//! `fairground verify` against real servers: the reference server passes
//! every scenario; each deliberately broken server is caught by the check
//! meant for it, with the message a user would read.

#[path = "support/broken.rs"]
mod broken;

use std::process::Command;
use std::time::{Duration, Instant};

use broken::Fault;
use fairground::contract::Scenario;
use fairground::verify::report::names;
use fairground::verify::{verify_url, CheckStatus, VerifyOptions, VerifyReport};

const BIN: &str = env!("CARGO_BIN_EXE_fairground");

fn options() -> VerifyOptions {
    VerifyOptions {
        timeout: Duration::from_millis(400),
        ..VerifyOptions::default()
    }
}

fn all_scenarios() -> Vec<Scenario> {
    let mut s = Scenario::FIXED.to_vec();
    s.push(Scenario::Middleware(3));
    s
}

async fn verify_broken(fault: Fault, scenarios: &[Scenario], opts: &VerifyOptions) -> VerifyReport {
    let addr = broken::spawn(fault);
    verify_url(&format!("http://{addr}"), scenarios, opts)
        .await
        .unwrap()
}

/// The scenario check `name` of `scenario`, asserted to have failed; its detail.
fn failed(r: &VerifyReport, scenario: Scenario, name: &str) -> String {
    let c = r
        .scenario_check(scenario, name)
        .unwrap_or_else(|| panic!("no {scenario} {name} check in {r:#?}"));
    assert_eq!(c.status, CheckStatus::Fail, "{c:?}");
    assert!(r.excluded(scenario).is_some());
    assert!(!r.passed);
    c.detail.clone()
}

fn conn_check(r: &VerifyReport, name: &str) -> (CheckStatus, String) {
    let c = r
        .check(name)
        .unwrap_or_else(|| panic!("no {name} check in {r:#?}"));
    (c.status, c.detail.clone())
}

#[test]
fn reference_server_passes_every_scenario_through_the_binary() {
    let server = fairground::roles::serve::start("127.0.0.1".parse().unwrap(), 0, 1).unwrap();
    let mut scenarios: Vec<String> = all_scenarios().iter().map(|s| s.to_string()).collect();
    scenarios.push("middleware-0".into());
    scenarios.push("middleware-64".into());
    let out = Command::new(BIN)
        .args([
            "verify",
            "--url",
            &format!("http://{}", server.addr),
            "--json",
            "--require-pipelining",
        ])
        .arg("--scenario")
        .arg(scenarios.join(","))
        .output()
        .unwrap();
    server.stop();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // --json output satisfies the committed schema and deserializes back
    // into the library type.
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/verify-report.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(
        validator.is_valid(&json),
        "{:?}",
        validator
            .iter_errors(&json)
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
    );
    let report: VerifyReport = serde_json::from_str(&stdout).unwrap();
    assert!(report.passed);
    assert_eq!(report.scenarios.len(), 8);
    for s in &report.scenarios {
        assert!(s.measurable, "{s:?}");
        assert!(
            s.checks.iter().all(|c| c.status == CheckStatus::Pass),
            "{s:?}"
        );
    }
    assert_eq!(report.facts.pipelining, Some(true));
    assert_eq!(report.facts.keep_alive_answered, 100);
    assert_eq!(report.facts.date_header, Some(true));
    // hyper sends no Server header; the wire bytes are head + 13.
    assert_eq!(report.facts.server_header, None);
    let wire = report.facts.plaintext_wire_bytes.unwrap();
    assert_eq!(wire - report.facts.plaintext_head_bytes.unwrap(), 13);
}

#[test]
fn table_output_and_exit_code_five_for_a_broken_server() {
    let addr = broken::spawn(Fault::HardCodedId);
    let out = Command::new(BIN)
        .args([
            "verify",
            "--url",
            &format!("http://{addr}"),
            "--scenario",
            "plaintext,param",
            "--timeout",
            "500ms",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(5), "{stdout}");
    assert!(
        stdout.contains("param random-inputs: FAIL the same response for different inputs"),
        "{stdout}"
    );
    assert!(stdout.contains("FAILED"), "{stdout}");
}

#[tokio::test]
async fn the_broken_double_is_otherwise_correct() {
    let r = verify_broken(Fault::None, &all_scenarios(), &options()).await;
    assert!(
        r.passed,
        "{}",
        fairground::verify::report::render_table(&[("none".into(), &r)])
    );
    assert_eq!(r.facts.pipelining, Some(true));
}

#[tokio::test]
async fn accepts_chunked_framing() {
    let r = verify_broken(Fault::Chunked, &all_scenarios(), &options()).await;
    assert!(
        r.passed,
        "{}",
        fairground::verify::report::render_table(&[("chunked".into(), &r)])
    );
    let framing = r.scenario_check(Scenario::Echo, names::FRAMING).unwrap();
    assert!(framing.detail.starts_with("chunked, "), "{framing:?}");
}

#[tokio::test]
async fn catches_hard_coded_param_id() {
    let r = verify_broken(Fault::HardCodedId, &[Scenario::Param], &options()).await;
    let detail = failed(&r, Scenario::Param, names::RANDOM_INPUTS);
    assert!(
        detail.starts_with(
            "the same response for different inputs (5 random ids): a hard-coded answer"
        ),
        "{detail}"
    );
    assert!(failed(&r, Scenario::Param, names::BODY).contains(r#"expected JSON equal to"#));
}

#[tokio::test]
async fn the_same_error_for_every_input_is_an_error_not_hard_coding() {
    let r = verify_broken(
        Fault::ParamNotFound,
        &[Scenario::Param, Scenario::Plaintext],
        &options(),
    )
    .await;
    let detail = failed(&r, Scenario::Param, names::RANDOM_INPUTS);
    assert!(detail.starts_with("GET /users/"), "{detail}");
    assert!(
        detail.contains("(1 of 5): status 404 Not Found, expected 200"),
        "{detail}"
    );
    // Pipelining is tried on the scenario that answers correctly only.
    assert_eq!(conn_check(&r, names::PIPELINING).0, CheckStatus::Pass);
    assert_eq!(r.excluded(Scenario::Plaintext), None);
}

#[tokio::test]
async fn catches_wrong_content_type() {
    let r = verify_broken(
        Fault::WrongContentType,
        &[Scenario::Plaintext, Scenario::Json],
        &options(),
    )
    .await;
    assert_eq!(
        failed(&r, Scenario::Plaintext, names::CONTENT_TYPE),
        "Content-Type `text/html`, expected text/plain"
    );
    assert_eq!(r.excluded(Scenario::Json), None);
}

#[tokio::test]
async fn catches_content_length_longer_than_the_body() {
    let r = verify_broken(Fault::LongContentLength, &[Scenario::Plaintext], &options()).await;
    assert_eq!(
        failed(&r, Scenario::Plaintext, names::FRAMING),
        "GET /: the server closed the connection after 13 body bytes, but Content-Length says 20"
    );
}

#[tokio::test]
async fn catches_content_length_shorter_than_the_body() {
    let r = verify_broken(
        Fault::ShortContentLength,
        &[Scenario::Plaintext],
        &options(),
    )
    .await;
    assert_eq!(
        failed(&r, Scenario::Plaintext, names::FRAMING),
        "Content-Length says 10 bytes but 3 more bytes followed the body"
    );
}

#[tokio::test]
async fn catches_echo_that_returns_a_fixed_body() {
    let r = verify_broken(Fault::FixedEcho, &[Scenario::Echo], &options()).await;
    let detail = failed(&r, Scenario::Echo, names::RANDOM_INPUTS);
    assert!(
        detail.starts_with(
            "the same response for different inputs (4 random bodies): a hard-coded answer"
        ),
        "{detail}"
    );
}

#[tokio::test]
async fn catches_a_server_without_keep_alive() {
    let r = verify_broken(
        Fault::NoKeepAlive,
        &[Scenario::Plaintext, Scenario::Param],
        &options(),
    )
    .await;
    let (status, detail) = conn_check(&r, names::KEEP_ALIVE);
    assert_eq!(status, CheckStatus::Fail);
    assert_eq!(
        detail,
        "answer 1 of 100 ends the connection (Connection: close); keep-alive is required"
    );
    // Answers themselves are right: only the connection check excludes.
    assert_eq!(
        r.excluded(Scenario::Param).as_deref(),
        Some("keep-alive failed: answer 1 of 100 ends the connection (Connection: close); keep-alive is required")
    );
    assert_eq!(
        r.scenario_check(Scenario::Param, names::RANDOM_INPUTS)
            .unwrap()
            .status,
        CheckStatus::Pass
    );
}

#[tokio::test]
async fn catches_200_for_unknown_paths() {
    let r = verify_broken(Fault::OkForUnknownPaths, &[Scenario::Plaintext], &options()).await;
    let (status, detail) = conn_check(&r, names::NOT_FOUND);
    assert_eq!(status, CheckStatus::Fail);
    assert!(
        detail.ends_with("(an unknown path) answered 200 OK, expected 404"),
        "{detail}"
    );
    assert!(!r.passed);
}

#[tokio::test]
async fn missing_date_is_a_warning_not_a_failure() {
    let r = verify_broken(Fault::NoDate, &[Scenario::Plaintext], &options()).await;
    let (status, detail) = conn_check(&r, names::DATE);
    assert_eq!(status, CheckStatus::Warn);
    assert!(detail.starts_with("no Date header"), "{detail}");
    assert_eq!(r.facts.date_header, Some(false));
    assert!(r.passed);
}

#[tokio::test]
async fn pipelining_out_of_order_is_recorded_and_fails_only_when_required() {
    let scenarios = [Scenario::Plaintext, Scenario::Param];
    let r = verify_broken(Fault::PipelineOutOfOrder, &scenarios, &options()).await;
    let (status, detail) = conn_check(&r, names::PIPELINING);
    assert_eq!(status, CheckStatus::Warn);
    assert_eq!(
        detail,
        "not supported (answer 1 of 8 is the answer to request 8: answered out of order); recorded, required only with --require-pipelining"
    );
    assert_eq!(r.facts.pipelining, Some(false));
    assert!(r.passed);

    let required = VerifyOptions {
        require_pipelining: true,
        ..options()
    };
    let r = verify_broken(Fault::PipelineOutOfOrder, &scenarios, &required).await;
    let (status, detail) = conn_check(&r, names::PIPELINING);
    assert_eq!(status, CheckStatus::Fail);
    assert_eq!(
        detail,
        "answer 1 of 8 is the answer to request 8: answered out of order"
    );
    assert!(!r.passed);
    assert!(r
        .excluded(Scenario::Plaintext)
        .unwrap()
        .starts_with("pipelining failed"));
}

#[tokio::test]
async fn pipelining_ignored_is_recorded_as_unsupported() {
    let r = verify_broken(Fault::PipelineIgnored, &[Scenario::Param], &options()).await;
    let (status, detail) = conn_check(&r, names::PIPELINING);
    assert_eq!(status, CheckStatus::Warn);
    assert!(
        detail.starts_with("not supported (timed out after 400ms waiting for the response (no byte arrived) after 1 of 8 pipelined answers)"),
        "{detail}"
    );
    assert!(r.passed);
}

#[tokio::test]
async fn a_hanging_server_fails_with_a_timeout_within_bounds() {
    let started = Instant::now();
    let opts = VerifyOptions {
        timeout: Duration::from_millis(300),
        ..options()
    };
    let r = verify_broken(Fault::Hang, &[Scenario::Plaintext, Scenario::Echo], &opts).await;
    let elapsed = started.elapsed();
    // Two scenarios, one timeout each, plus the 404 check: three timeouts.
    assert!(
        elapsed < Duration::from_millis(3 * 300 + 700),
        "{elapsed:?}"
    );
    assert_eq!(
        failed(&r, Scenario::Plaintext, names::STATUS),
        "no answer to GET /: timed out after 300ms waiting for the response (no byte arrived)"
    );
    assert!(failed(&r, Scenario::Echo, names::STATUS).contains("timed out after 300ms"));
}

#[tokio::test]
async fn catches_middleware_missing_a_layer() {
    let r = verify_broken(
        Fault::MwMissingLayer,
        &[Scenario::Middleware(3)],
        &options(),
    )
    .await;
    assert_eq!(
        failed(&r, Scenario::Middleware(3), names::MW_HEADERS),
        "missing 1 of 3 headers: x-mw-3"
    );
}

#[tokio::test]
async fn catches_middleware_headers_with_a_constant_value() {
    let r = verify_broken(Fault::MwConstant, &[Scenario::Middleware(3)], &options()).await;
    let detail = failed(&r, Scenario::Middleware(3), names::MW_HEADERS);
    assert!(
        detail.starts_with("x-mw-1 is `constant` but the request's x-test was `"),
        "{detail}"
    );
    let detail = failed(&r, Scenario::Middleware(3), names::RANDOM_INPUTS);
    assert!(
        detail.starts_with("the same response for different inputs (3 random x-test tokens)"),
        "{detail}"
    );
}

#[test]
fn json_report_deserializes_for_a_failing_run_too() {
    let addr = broken::spawn(Fault::NoKeepAlive);
    let out = Command::new(BIN)
        .args([
            "verify",
            "--url",
            &format!("http://{addr}"),
            "--scenario",
            "plaintext",
            "--json",
            "--timeout",
            "500ms",
            "--seed",
            "7",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    let report: VerifyReport = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report.seed, 7);
    assert!(report
        .excluded(Scenario::Plaintext)
        .unwrap()
        .starts_with("keep-alive failed"));
}

#[test]
fn unknown_framework_name_is_bad_input_before_docker_is_touched() {
    let out = Command::new(BIN)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "verify",
            "tinyfx",
            "--frameworks",
            "tests/fixtures/frameworks",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no framework `tinyfx` (did you mean `tinyfw`?)"),
        "{stderr}"
    );
}

#[test]
fn names_and_url_are_exclusive() {
    let out = Command::new(BIN)
        .args(["verify", "tinyfw", "--url", "http://127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));
}
