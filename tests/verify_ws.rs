//! `fairground verify` of the WebSocket scenario (docs/contract.md,
//! "WebSocket scenarios"): the reference server passes every rule, in
//! plain and over TLS; each liar of `fairground serve --ws-defect` keeps
//! every other rule and breaks one, and is caught by that rule's check,
//! named, with the scenario not measurable.
//! Everything on 127.0.0.1, every wait bounded, no Docker.

#[path = "load_support/serve_child.rs"]
mod serve_child;

use std::time::Duration;

use fairground::contract::{Protocol, Scenario};
use fairground::tls::RunCerts;
use fairground::verify::report::{names, render_table};
use fairground::verify::{verify_url, CheckStatus, VerifyOptions, VerifyReport, VerifyTls};
use serve_child::ServeChild;

const BOUND: Duration = Duration::from_secs(60);
const WS: Scenario = Scenario::WsEcho(fairground::contract::ANY_SIZE);

async fn verify(url: &str, opts: &VerifyOptions) -> VerifyReport {
    verify_these(url, &[Scenario::Plaintext, WS], opts).await
}

async fn verify_these(url: &str, scenarios: &[Scenario], opts: &VerifyOptions) -> VerifyReport {
    tokio::time::timeout(BOUND, verify_url(url, scenarios, opts))
        .await
        .expect("verify finished within its bound")
        .unwrap()
}

fn options() -> VerifyOptions {
    VerifyOptions {
        timeout: Duration::from_secs(1),
        seed: Some(5),
        ..VerifyOptions::default()
    }
}

/// The WebSocket scenario's check `name`.
fn ws_check(r: &VerifyReport, name: &str) -> (CheckStatus, String) {
    let s = r
        .scenarios
        .iter()
        .find(|s| s.scenario.is_websocket())
        .expect("a WebSocket scenario");
    let c = s
        .checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name} in\n{}", render_table(&[("serve".into(), r)])));
    (c.status, c.detail.clone())
}

fn measurable(r: &VerifyReport, s: Scenario) -> bool {
    r.scenarios
        .iter()
        .find(|x| x.scenario == s)
        .unwrap()
        .measurable
}

#[tokio::test]
async fn the_reference_server_passes_every_websocket_rule() {
    let server = ServeChild::start(&[]);
    let r = verify(&format!("http://{}", server.addr), &options()).await;
    let table = render_table(&[("serve".into(), &r)]);
    for name in [
        names::WS_UPGRADE,
        names::WS_ECHO,
        names::WS_UNMASK,
        names::WS_FRAGMENTS,
        names::WS_PING,
        names::WS_CLOSE,
    ] {
        let (status, detail) = ws_check(&r, name);
        assert_eq!(status, CheckStatus::Pass, "{name}: {detail}\n{table}");
    }
    assert!(r.passed, "{table}");
    assert!(
        measurable(&r, Scenario::WsEcho(64)) || measurable(&r, WS),
        "{table}"
    );
    assert!(table.contains("ws-echo"), "{table}");
}

/// A profile of WebSocket scenarios alone asks nothing over HTTP, so
/// nothing HTTP's connection checks judge stands in its way.
#[tokio::test]
async fn websocket_alone_is_measurable_without_an_http_scenario() {
    let server = ServeChild::start(&[]);
    let r = verify_these(
        &format!("http://{}", server.addr),
        &[Scenario::WsEcho(64)],
        &options(),
    )
    .await;
    let table = render_table(&[("serve".into(), &r)]);
    assert!(r.passed && measurable(&r, Scenario::WsEcho(64)), "{table}");
}

#[tokio::test]
async fn wss_passes_over_tls_with_the_runs_ca() {
    let certs = RunCerts::make(&["127.0.0.1".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = certs.write(dir.path()).unwrap();
    let server = ServeChild::start(&[
        "--protocol",
        "https",
        "--tls-cert",
        files.chain.to_str().unwrap(),
        "--tls-key",
        files.key.to_str().unwrap(),
    ]);
    let opts = VerifyOptions {
        protocol: Protocol::Https,
        tls: Some(VerifyTls {
            ca_pem: certs.ca_pem.clone().into_bytes(),
            name: "127.0.0.1".into(),
        }),
        ..options()
    };
    let r = verify(&format!("https://{}", server.addr), &opts).await;
    let (status, detail) = ws_check(&r, names::WS_ECHO);
    assert_eq!(status, CheckStatus::Pass, "{detail}");
    assert!(r.passed, "{}", render_table(&[("serve".into(), &r)]));
}

/// The liar `defect` fails `name` (with a detail containing `says`), and
/// only the WebSocket scenario is excluded.
async fn caught(defect: &str, name: &str, says: &str) {
    let server = ServeChild::start(&["--ws-defect", defect]);
    let r = verify(&format!("http://{}", server.addr), &options()).await;
    let table = render_table(&[("serve".into(), &r)]);
    let (status, detail) = ws_check(&r, name);
    assert_eq!(
        status,
        CheckStatus::Fail,
        "{defect}: {name} passed: {detail}\n{table}"
    );
    assert!(detail.contains(says), "{defect}: {name}: {detail}");
    assert!(
        !r.scenarios
            .iter()
            .any(|s| s.scenario.is_websocket() && s.measurable),
        "{table}"
    );
    assert!(
        measurable(&r, Scenario::Plaintext),
        "{defect}: plaintext is unharmed\n{table}"
    );
}

#[tokio::test]
async fn an_upgrade_with_the_wrong_accept_fails_ws_upgrade() {
    caught("bad-accept", names::WS_UPGRADE, "Sec-WebSocket-Accept").await;
}

#[tokio::test]
async fn a_server_that_echoes_a_fixed_message_fails_ws_echo() {
    caught("fixed", names::WS_ECHO, "the payload of an earlier message").await;
}

#[tokio::test]
async fn a_server_that_does_not_unmask_fails_ws_unmask() {
    caught("no-unmask", names::WS_UNMASK, "still masked").await;
}

#[tokio::test]
async fn a_server_that_never_answers_a_ping_fails_ws_ping() {
    caught("no-pong", names::WS_PING, "nothing within").await;
}

#[tokio::test]
async fn a_server_that_closes_without_the_handshake_fails_ws_close() {
    caught("no-close", names::WS_CLOSE, "without a close frame").await;
}
