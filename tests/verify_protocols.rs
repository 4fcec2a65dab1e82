//! `fairground verify` in every protocol: the reference server, run as
//! `fairground serve --protocol P`, passes every scenario it serves over
//! https, h2 and h2c; a server that does not speak the protocol asked, or
//! presents a certificate the CA given did not sign, fails naming why; an
//! HTTP/2 server that does not answer streams concurrently is caught by
//! `h2-concurrency` with GET scenarios alone (the reference server's liar,
//! `--h2-defect serial`), and a lawful stream limit below verify's depth
//! is recorded, not failed (`--h2-defect limit4`; under load it is
//! flagged, tests/protocols_docker.rs).
//! Everything on 127.0.0.1, every wait bounded, no Docker.

#[path = "support/h2_double.rs"]
mod h2_double;
#[path = "load_support/serve_child.rs"]
mod serve_child;

use std::time::Duration;

use fairground::contract::{Protocol, Scenario};
use fairground::tls::{CertFiles, RunCerts};
use fairground::verify::report::{names, render_table};
use fairground::verify::{
    verify_url, CheckStatus, VerifyError, VerifyOptions, VerifyReport, VerifyTls,
};
use h2_double::H2Fault;
use serve_child::ServeChild;
/// Longest any one verification here may take.
const BOUND: Duration = Duration::from_secs(90);

/// `fairground serve --protocol protocol`, presenting `certs` (TLS
/// protocols).
fn serve(protocol: &str, certs: Option<&CertFiles>) -> ServeChild {
    let mut args = vec!["--protocol".to_string(), protocol.to_string()];
    if let Some(files) = certs {
        args.extend([
            "--tls-cert".to_string(),
            files.chain.display().to_string(),
            "--tls-key".to_string(),
            files.key.display().to_string(),
        ]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ServeChild::start(&args)
}

/// A run's certificates for localhost and 127.0.0.1, written to a
/// temporary directory (kept alive by the returned guard).
fn certs() -> (RunCerts, CertFiles, tempfile::TempDir) {
    let certs = RunCerts::make(&["localhost".into(), "127.0.0.1".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = certs.write(dir.path()).unwrap();
    (certs, files, dir)
}

fn trust(certs: &RunCerts, name: &str) -> VerifyTls {
    VerifyTls {
        ca_pem: certs.ca_pem.clone().into_bytes(),
        name: name.into(),
    }
}

fn options(protocol: Protocol, tls: Option<VerifyTls>) -> VerifyOptions {
    VerifyOptions {
        timeout: Duration::from_secs(2),
        protocol,
        tls,
        seed: Some(11),
        ..VerifyOptions::default()
    }
}

async fn verify(url: &str, scenarios: &[Scenario], opts: &VerifyOptions) -> VerifyReport {
    tokio::time::timeout(BOUND, verify_url(url, scenarios, opts))
        .await
        .expect("verify finished within its bound")
        .unwrap()
}

fn table(r: &VerifyReport) -> String {
    render_table(&[("serve".into(), r)])
}

/// The connection-wide check `name`, asserted failed; its detail.
fn failed_check(r: &VerifyReport, name: &str) -> String {
    let c = r
        .check(name)
        .unwrap_or_else(|| panic!("no {name} check in\n{}", table(r)));
    assert_eq!(c.status, CheckStatus::Fail, "{}", table(r));
    assert!(!r.passed);
    c.detail.clone()
}

/// Every scenario of `r` excluded by the failed check `name`, untried.
fn all_excluded_by(r: &VerifyReport, name: &str) {
    assert!(!r.scenarios.is_empty());
    for s in &r.scenarios {
        assert!(s.checks.is_empty(), "{s:?}");
        let why = r.excluded(s.scenario).unwrap();
        assert!(why.starts_with(&format!("{name} failed: ")), "{why}");
    }
}

/// Run the reference server in `protocol` and verify every scenario it
/// serves in that protocol.
async fn reference_passes(protocol: Protocol) -> VerifyReport {
    let (certs, files, _dir) = certs();
    let server = serve(&protocol.to_string(), protocol.is_tls().then_some(&files));
    let scheme = if protocol.is_tls() { "https" } else { "http" };
    let url = format!("{scheme}://{}", server.addr);
    let tls = protocol.is_tls().then(|| trust(&certs, "localhost"));
    let scenarios = fairground::roles::serve::supported_scenarios();
    let r = verify(&url, &scenarios, &options(protocol, tls)).await;
    drop(server);
    let shown = table(&r);
    assert!(r.passed, "{shown}");
    assert_eq!(r.protocol, protocol);
    assert_eq!(r.scenarios.len(), scenarios.len());
    for s in &r.scenarios {
        assert!(s.measurable, "{s:?}");
        assert!(!s.checks.is_empty(), "{s:?}");
        assert!(
            s.checks.iter().all(|c| c.status == CheckStatus::Pass),
            "{s:?}"
        );
    }
    assert_eq!(r.facts.keep_alive_answered, 100, "{shown}");
    assert_eq!(r.facts.date_header, Some(true), "{shown}");
    // The summary names the protocol.
    assert!(
        shown.contains(&format!(
            "serve: every required check passed ({protocol}, seed 11"
        )),
        "{shown}"
    );
    // The JSON names it too and reads back.
    let json = serde_json::to_string(&r).unwrap();
    assert!(
        json.contains(&format!("\"protocol\":\"{protocol}\"")),
        "{json}"
    );
    assert_eq!(serde_json::from_str::<VerifyReport>(&json).unwrap(), r);
    r
}

#[tokio::test]
async fn reference_server_passes_every_scenario_over_https() {
    let r = reference_passes(Protocol::Https).await;
    let shown = table(&r);
    let tls = r.tls.as_ref().expect("TLS facts");
    assert_eq!(tls.alpn.as_deref(), Some("http/1.1"));
    assert!(tls.version.starts_with("TLS 1."), "{tls:?}");
    assert_eq!(tls.server_name, "localhost");
    let c = r.check(names::TLS).unwrap();
    assert!(
        c.detail
            .contains("ALPN http/1.1, certificate verified for localhost"),
        "{c:?}"
    );
    // HTTP/1.1's own connection checks, over TLS.
    assert_eq!(r.facts.pipelining, Some(true), "{shown}");
    assert!(r.check(names::WIRE_BYTES).is_some(), "{shown}");
    assert!(r.check(names::HTTP2).is_none());
    assert!(
        shown.contains("serve: https over TLS 1."),
        "the protocol line: {shown}"
    );
    assert_eq!(
        r.scenario_check(Scenario::Plaintext, names::FRAMING)
            .unwrap()
            .detail,
        "Content-Length 13 matches the body"
    );
}

#[tokio::test]
async fn reference_server_passes_every_scenario_over_h2() {
    let r = reference_passes(Protocol::H2).await;
    let shown = table(&r);
    let tls = r.tls.as_ref().expect("TLS facts");
    assert_eq!(tls.alpn.as_deref(), Some("h2"), "{shown}");
    let http2 = r.check(names::HTTP2).unwrap();
    assert!(
        http2.detail.starts_with(
            "ALPN agreed h2; the server answered the connection preface with SETTINGS"
        ),
        "{http2:?}"
    );
    http2_connection_checks(&r);
}

#[tokio::test]
async fn reference_server_passes_every_scenario_over_h2c() {
    let r = reference_passes(Protocol::H2c).await;
    assert!(r.tls.is_none());
    assert!(r.check(names::TLS).is_none());
    let http2 = r.check(names::HTTP2).unwrap();
    assert!(
        http2
            .detail
            .starts_with("the server answered the connection preface with SETTINGS"),
        "{http2:?}"
    );
    http2_connection_checks(&r);
}

/// What every passing HTTP/2 report shows: HTTP/2's connection checks in
/// place of HTTP/1.1's.
fn http2_connection_checks(r: &VerifyReport) {
    let shown = table(r);
    let keep = r.check(names::KEEP_ALIVE).unwrap();
    assert_eq!(
        keep.detail,
        "100 requests answered on one HTTP/2 connection"
    );
    let streams = r.check(names::STREAMS).unwrap();
    assert_eq!(streams.status, CheckStatus::Pass, "{shown}");
    // echo passed, so a POST was held open while the others were answered.
    assert!(
        streams.detail.starts_with(
            "8 requests in flight at once on one connection, each answered correctly; 7 of them \
             while stream 1 (POST /"
        ),
        "{streams:?}"
    );
    let timed = r.check(names::H2_CONCURRENCY).unwrap();
    assert_eq!(timed.status, CheckStatus::Pass, "{shown}");
    assert!(
        timed
            .detail
            .starts_with("streams of one connection served concurrently: "),
        "{timed:?}"
    );
    assert_eq!(r.facts.concurrent_streams, Some(true));
    assert!(r.check(names::PIPELINING).is_none());
    assert!(r.check(names::WIRE_BYTES).is_none());
    assert_eq!(r.facts.pipelining, None);
    assert!(
        shown.contains("SETTINGS_MAX_CONCURRENT_STREAMS"),
        "the protocol line: {shown}"
    );
    let framing = r
        .scenario_check(Scenario::Plaintext, names::FRAMING)
        .unwrap();
    assert!(
        framing.detail.starts_with("HTTP/2 DATA frames"),
        "{framing:?}"
    );
    // The table has HTTP/2's columns.
    let head = shown
        .lines()
        .find(|l| l.starts_with("framework") && l.contains("keep-alive"))
        .unwrap();
    assert!(head.contains("http2") && head.contains("streams"), "{head}");
}

#[tokio::test]
async fn h2_against_a_server_offering_only_http11_fails_naming_alpn() {
    let (certs, files, _dir) = certs();
    let server = serve("https", Some(&files));
    let opts = options(Protocol::H2, Some(trust(&certs, "localhost")));
    let scenarios = [Scenario::Plaintext, Scenario::Json];
    let r = verify(&format!("https://{}", server.addr), &scenarios, &opts).await;
    // rustls refuses a handshake with no ALPN protocol in common, so the
    // TLS check fails; a server that ignored ALPN would pass it and fail
    // http2 instead. Either way the failure names ALPN and nothing falls
    // back to HTTP/1.1.
    let failed = r
        .checks
        .iter()
        .find(|c| c.status == CheckStatus::Fail)
        .unwrap_or_else(|| panic!("nothing failed:\n{}", table(&r)));
    assert!(failed.detail.contains("ALPN"), "{failed:?}");
    assert!(failed.detail.contains("h2"), "{failed:?}");
    assert!(!r.passed);
    all_excluded_by(&r, &failed.name);
    assert!(r.check(names::KEEP_ALIVE).is_none());
}

#[tokio::test]
async fn https_with_a_ca_that_did_not_sign_the_certificate_fails_naming_the_certificate() {
    let (_, files, _dir) = certs();
    let server = serve("https", Some(&files));
    let url = format!("https://{}", server.addr);
    let scenarios = [Scenario::Plaintext];

    let stranger = RunCerts::make(&["localhost".into()]).unwrap();
    let opts = options(Protocol::Https, Some(trust(&stranger, "localhost")));
    let r = verify(&url, &scenarios, &opts).await;
    let detail = failed_check(&r, names::TLS);
    assert!(
        detail.contains(
            "the server's certificate does not verify for `localhost` against the CA given: it \
             was not signed by the CA given"
        ),
        "{detail}"
    );
    assert!(
        detail.starts_with("TLS handshake with 127.0.0.1:"),
        "{detail}"
    );
    all_excluded_by(&r, names::TLS);
    assert!(r.tls.is_none());
    assert!(table(&r).contains("serve https tls: FAIL TLS handshake with"));

    // The right CA, but a name the certificate does not carry.
    let theirs = std::fs::read_to_string(&files.ca).unwrap();
    let opts = options(
        Protocol::Https,
        Some(VerifyTls {
            ca_pem: theirs.into_bytes(),
            name: "elsewhere.example".into(),
        }),
    );
    let r = verify(&url, &scenarios, &opts).await;
    let detail = failed_check(&r, names::TLS);
    assert!(detail.contains("it does not carry that name"), "{detail}");
}

#[tokio::test]
async fn h2c_against_a_plain_http1_server_fails_clearly() {
    let server = serve("http1", None);
    let opts = options(Protocol::H2c, None);
    let scenarios = [Scenario::Plaintext, Scenario::Param];
    let r = verify(&format!("http://{}", server.addr), &scenarios, &opts).await;
    let detail = failed_check(&r, names::HTTP2);
    assert!(
        detail.ends_with("the server does not speak HTTP/2 with prior knowledge (h2c)"),
        "{detail}"
    );
    all_excluded_by(&r, names::HTTP2);
    assert!(
        table(&r).contains("FAILED: excluded scenarios are not measured (h2c, seed 11"),
        "{}",
        table(&r)
    );
}

#[tokio::test]
async fn an_h2_server_answering_one_stream_at_a_time_fails_streams() {
    let addr = h2_double::spawn(H2Fault::OneStreamAtATime);
    let opts = VerifyOptions {
        timeout: Duration::from_millis(500),
        ..options(Protocol::H2c, None)
    };
    let scenarios = [Scenario::Plaintext, Scenario::Param, Scenario::Echo];
    let r = verify(&format!("http://{addr}"), &scenarios, &opts).await;
    // Every answer is right, one at a time.
    for s in &r.scenarios {
        assert!(
            s.checks.iter().all(|c| c.status == CheckStatus::Pass),
            "{s:?}"
        );
    }
    assert_eq!(
        r.check(names::KEEP_ALIVE).unwrap().status,
        CheckStatus::Pass
    );
    let detail = failed_check(&r, names::STREAMS);
    assert!(detail.contains("timed out after 500ms"), "{detail}");
    assert!(
        detail.ends_with(
            "while stream 1 (POST /echo) waited for the rest of its body: the server does not \
             answer streams concurrently"
        ),
        "{detail}"
    );
    assert_eq!(r.facts.concurrent_streams, Some(false));
    assert!(r
        .excluded(Scenario::Plaintext)
        .unwrap()
        .starts_with("streams failed: "));
}

#[tokio::test]
async fn an_h2_server_allowing_one_stream_at_a_time_fails_streams() {
    let addr = h2_double::spawn(H2Fault::MaxStreams(1));
    let opts = options(Protocol::H2c, None);
    let r = verify(&format!("http://{addr}"), &[Scenario::Param], &opts).await;
    assert_eq!(r.facts.max_concurrent_streams, Some(1));
    assert_eq!(
        failed_check(&r, names::STREAMS),
        "the server allows at most 1 concurrent stream(s) (SETTINGS_MAX_CONCURRENT_STREAMS): no \
         two requests of one connection can be served at once"
    );
}

/// The GET scenarios of the shipped `protocols` profile.
const PROTOCOLS_GETS: [Scenario; 2] = [Scenario::Plaintext, Scenario::Json];

#[tokio::test]
async fn a_server_serving_the_streams_of_a_connection_one_at_a_time_fails_h2_concurrency() {
    // The liar of issue 36: every answer right, a high stream limit, and
    // the streams of a connection answered one at a time (2 ms each). GET
    // scenarios only, as the `protocols` profile measures; before
    // `h2-concurrency` it passed every check.
    let (certs, files, _dir) = certs();
    for protocol in [Protocol::H2c, Protocol::H2] {
        let mut args = vec![
            "--protocol",
            if protocol == Protocol::H2 {
                "h2"
            } else {
                "h2c"
            },
        ];
        let (cert, key) = (
            files.chain.display().to_string(),
            files.key.display().to_string(),
        );
        if protocol == Protocol::H2 {
            args.extend(["--tls-cert", &cert, "--tls-key", &key]);
        }
        args.extend(["--h2-defect", "serial"]);
        let server = ServeChild::start(&args);
        let scheme = if protocol == Protocol::H2 {
            "https"
        } else {
            "http"
        };
        let tls = (protocol == Protocol::H2).then(|| trust(&certs, "localhost"));
        let r = verify(
            &format!("{scheme}://{}", server.addr),
            &PROTOCOLS_GETS,
            &options(protocol, tls),
        )
        .await;
        let shown = table(&r);
        for s in &r.scenarios {
            assert!(
                s.checks.iter().all(|c| c.status == CheckStatus::Pass),
                "{protocol}: every answer is right: {s:?}"
            );
        }
        assert_eq!(r.facts.max_concurrent_streams, Some(1000), "{shown}");
        assert_eq!(
            r.check(names::STREAMS).unwrap().status,
            CheckStatus::Pass,
            "{shown}"
        );
        let detail = failed_check(&r, names::H2_CONCURRENCY);
        assert!(
            detail.starts_with("streams of one connection served one at a time: ")
                && detail.contains(" for 16 streams on one connection vs ")
                && detail.contains(" for 16 requests on 16 connections (medians of 7, plaintext)"),
            "{protocol}: {detail}"
        );
        // 16 streams at 2 ms each, one after another: at least 30 ms.
        let one_ms: f64 = detail
            .split("at a time: ")
            .nth(1)
            .and_then(|x| x.split(' ').next())
            .and_then(|x| x.parse().ok())
            .unwrap_or_else(|| panic!("{detail}"));
        assert!(one_ms >= 30.0, "{detail}");
        assert_eq!(r.facts.concurrent_streams, Some(false));
        for s in &r.scenarios {
            let why = r.excluded(s.scenario).unwrap();
            assert!(why.starts_with("h2-concurrency failed: "), "{why}");
        }
    }
}

#[tokio::test]
async fn a_stream_limit_below_verify_depth_is_recorded_and_verify_sends_what_it_allows() {
    let server = serve_args(&["--protocol", "h2c", "--h2-defect", "limit4"]);
    let opts = options(Protocol::H2c, None);
    let r = verify(&format!("http://{}", server.addr), &PROTOCOLS_GETS, &opts).await;
    assert!(r.passed, "{}", table(&r));
    assert_eq!(r.facts.max_concurrent_streams, Some(4));
    let streams = r.check(names::STREAMS).unwrap();
    assert!(
        streams
            .detail
            .starts_with("4 requests in flight at once on one connection"),
        "{streams:?}"
    );
    let timed = r.check(names::H2_CONCURRENCY).unwrap();
    assert!(
        timed
            .detail
            .contains(" for 4 streams on one connection vs "),
        "{timed:?}"
    );
}

#[tokio::test]
async fn an_honest_server_that_leaves_nagle_on_passes_h2_concurrency() {
    // The double never sets TCP_NODELAY (axum::serve's h2c does not
    // either): its answers on one connection wait for the client's ACK,
    // which a client that sends nothing meanwhile delays by 40 ms. The
    // loader, sending as answers arrive, never meets that stall, and the
    // server is not serving its streams one at a time.
    let addr = h2_double::spawn(H2Fault::Staggered);
    let opts = options(Protocol::H2c, None);
    let r = verify(
        &format!("http://{addr}"),
        &[Scenario::Plaintext, Scenario::Param],
        &opts,
    )
    .await;
    let timed = r.check(names::H2_CONCURRENCY).unwrap();
    assert_eq!(timed.status, CheckStatus::Pass, "{timed:?}");
}

fn serve_args(args: &[&str]) -> ServeChild {
    ServeChild::start(args)
}

#[tokio::test]
async fn a_url_or_tls_settings_that_do_not_fit_the_protocol_are_bad_input() {
    let (certs, _, _dir) = certs();
    let tls = Some(trust(&certs, "localhost"));
    for (protocol, url) in [
        (Protocol::H2, "http://127.0.0.1:9"),
        (Protocol::Https, "http://127.0.0.1:9"),
        (Protocol::H2c, "https://127.0.0.1:9"),
        (Protocol::Http1, "https://127.0.0.1:9"),
    ] {
        let err = verify_url(url, &[Scenario::Plaintext], &options(protocol, tls.clone()))
            .await
            .unwrap_err();
        assert!(
            matches!(err, VerifyError::ProtocolMismatch { .. }),
            "{protocol} {url}: {err}"
        );
        assert!(err
            .to_string()
            .contains(&format!("does not fit protocol {protocol}")));
    }
    let err = verify_url(
        "https://127.0.0.1:9",
        &[Scenario::Plaintext],
        &options(Protocol::H2, None),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, VerifyError::Tls { .. }), "{err}");
}

#[tokio::test]
async fn a_server_that_never_answers_the_handshake_fails_within_its_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let (certs, _, _dir) = certs();
    let opts = VerifyOptions {
        timeout: Duration::from_millis(300),
        ..options(Protocol::H2, Some(trust(&certs, "localhost")))
    };
    let started = std::time::Instant::now();
    let r = verify(&format!("https://{addr}"), &[Scenario::Plaintext], &opts).await;
    assert!(started.elapsed() < Duration::from_millis(300 + 700));
    assert_eq!(
        failed_check(&r, names::TLS),
        format!("timed out after 300ms waiting for the TLS handshake with {addr}")
    );
    all_excluded_by(&r, names::TLS);
}

#[tokio::test]
async fn without_a_post_scenario_streams_are_sent_at_once_and_timed_against_separate_connections() {
    let server = serve("h2c", None);
    let opts = options(Protocol::H2c, None);
    let scenarios = [Scenario::Plaintext, Scenario::Param];
    let r = verify(&format!("http://{}", server.addr), &scenarios, &opts).await;
    assert!(r.passed, "{}", table(&r));
    // Timed with GET scenarios: the honest server passes.
    let timed = r.check(names::H2_CONCURRENCY).unwrap();
    assert_eq!(timed.status, CheckStatus::Pass, "{timed:?}");
    let streams = r.check(names::STREAMS).unwrap();
    assert!(
        streams.detail.starts_with(
            "8 requests in flight at once on one connection, each answered correctly (no POST \
             scenario passed"
        ),
        "{streams:?}"
    );
}
