//! `fairground serve` answers every contract endpoint correctly, checked with a
//! real HTTP client (reqwest) over loopback against the real binary.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use fairground::contract::{self, Scenario};
use rand::SeedableRng;

/// The real binary on a free port; killed on drop.
struct Serve {
    child: Child,
    base: String,
}

impl Serve {
    fn start() -> Serve {
        Serve::start_with(&[])
    }

    /// With extra flags (`--protocol`, `--tls-cert`, `--tls-key`).
    fn start_with(extra: &[&str]) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fairground"))
            .args(["serve", "--port", "0", "--threads", "2"])
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start fairground serve");
        // The server prints its address once every listener is bound.
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .split_whitespace()
            .find(|w| w.contains("://"))
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        Serve { child, base }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(std::time::Duration::from_secs(5))
        .build()
        .unwrap()
}

fn send(
    c: &reqwest::blocking::Client,
    base: &str,
    req: &contract::Request,
) -> reqwest::blocking::Response {
    let url = format!("{base}{}", req.path);
    let mut builder = match req.method {
        "POST" => c.post(&url),
        _ => c.get(&url),
    };
    for (k, v) in &req.headers {
        builder = builder.header(k, v);
    }
    if let Some(body) = &req.body {
        builder = builder
            .header("content-type", "application/json")
            .body(body.clone());
    }
    builder.send().unwrap()
}

#[test]
fn answers_every_fixed_scenario_with_random_inputs() {
    let serve = Serve::start();
    let c = client();
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    for scenario in Scenario::FIXED {
        for _ in 0..5 {
            let req = contract::sample_request(scenario, &mut rng);
            let resp = send(&c, &serve.base, &req);
            let (status, expected) = contract::expected_response(scenario, &req);
            assert_eq!(resp.status().as_u16(), status, "{scenario} {}", req.path);
            let ctype = resp.headers()["content-type"].to_str().unwrap().to_string();
            assert!(
                ctype.starts_with(contract::expected_content_type(scenario)),
                "{scenario}: content-type {ctype}"
            );
            assert!(
                resp.headers().contains_key("date"),
                "{scenario}: no Date header"
            );
            let body = resp.bytes().unwrap();
            match expected {
                contract::ExpectedBody::Exact(text) => assert_eq!(&body[..], text.as_bytes()),
                contract::ExpectedBody::Json(value) => {
                    let got: serde_json::Value = serde_json::from_slice(&body).unwrap();
                    assert_eq!(got, value, "{scenario} {}", req.path);
                }
                // FIXED holds no database scenario (tests/database_docker.rs
                // has those, with a database).
                other => panic!("{scenario}: unexpected {other:?}"),
            }
        }
    }
}

#[test]
fn rejects_invalid_validate_bodies_with_422() {
    let serve = Serve::start();
    let c = client();
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    for _ in 0..10 {
        let (body, why) = contract::random_invalid_validate_body(&mut rng);
        let resp = c
            .post(format!("{}/validate", serve.base))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .unwrap();
        assert_eq!(resp.status().as_u16(), 422, "{why}: {body}");
    }
}

#[test]
fn echoes_an_8_kib_unicode_body() {
    let serve = Serve::start();
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let value = contract::random_echo_body(&mut rng, 8 * 1024);
    let resp = client()
        .post(format!("{}/echo", serve.base))
        .header("content-type", "application/json")
        .body(value.to_string())
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let got: serde_json::Value = resp.json().unwrap();
    assert_eq!(got, value);
}

#[test]
fn middleware_layers_each_copy_the_request_token() {
    let serve = Serve::start();
    let c = client();
    for n in [0u16, 3, 10] {
        let resp = c
            .get(format!("{}{}", serve.base, contract::middleware_path(n)))
            .header(contract::MW_REQUEST_HEADER, format!("tok{n}"))
            .send()
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        for i in 1..=n {
            let got = resp.headers()[contract::middleware_header(i).as_str()]
                .to_str()
                .unwrap();
            assert_eq!(got, format!("tok{n}"));
        }
        assert!(!resp
            .headers()
            .contains_key(contract::middleware_header(n + 1).as_str()));
    }
}

#[test]
fn unknown_paths_are_404() {
    let serve = Serve::start();
    let c = client();
    for path in ["/nope", "/users/", "/users/1/2", "/mw/999", "/json/x"] {
        let resp = c.get(format!("{}{path}", serve.base)).send().unwrap();
        assert_eq!(resp.status().as_u16(), 404, "{path}");
    }
}

/// curl's answer to `GET /` on `url`: the HTTP version it spoke and the
/// body. curl is an independent client: Debian's is built with nghttp2.
fn curl(url: &str, args: &[&str]) -> (String, String) {
    let out = Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "5"])
        .args(args)
        .args(["--write-out", "\n%{http_version}", url])
        .output()
        .expect("run curl");
    assert!(
        out.status.success(),
        "curl {args:?} {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, version) = text.rsplit_once('\n').unwrap();
    (version.to_string(), body.to_string())
}

/// Whether curl with HTTP/2 is here; on CI it must be (make deps).
fn curl_with_http2() -> bool {
    let ok = Command::new("curl")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("HTTP2"))
        .unwrap_or(false);
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "curl with HTTP/2 is missing on CI (make deps installs it)"
        );
        eprintln!("SKIPPED: curl with HTTP/2 is not installed (make deps installs it)");
    }
    ok
}

#[test]
fn speaks_https_h2_and_h2c_with_the_runs_certificate() {
    if !curl_with_http2() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let certs = fairground::tls::RunCerts::make(&["localhost".into(), "127.0.0.1".into()]).unwrap();
    let files = certs.write(dir.path()).unwrap();
    let ca = files.ca.to_str().unwrap();
    let tls = [
        "--tls-cert",
        files.chain.to_str().unwrap(),
        "--tls-key",
        files.key.to_str().unwrap(),
    ];
    let with = |protocol: &str| {
        let mut a = vec!["--protocol", protocol];
        a.extend(tls);
        Serve::start_with(&a)
    };
    // h2: HTTP/2 by ALPN, and HTTP/1.1 to a client that asks for it.
    let h2 = with("h2");
    assert!(h2.base.starts_with("https://"), "{}", h2.base);
    let url = format!("{}/", h2.base);
    assert_eq!(
        curl(&url, &["--cacert", ca, "--http2"]),
        ("2".to_string(), contract::PLAINTEXT_BODY.to_string())
    );
    assert_eq!(curl(&url, &["--cacert", ca, "--http1.1"]).0, "1.1");
    // The run's CA alone vouches for it: curl's own trust store does not.
    let untrusted = Command::new("curl")
        .args(["--silent", "--max-time", "5", &url])
        .status()
        .unwrap();
    assert_eq!(
        untrusted.code(),
        Some(60),
        "curl trusted a certificate of no CA it knows"
    );
    // https: HTTP/1.1 only, even to a client that would rather speak h2.
    let https = with("https");
    let url = format!("{}/json", https.base);
    let (version, body) = curl(&url, &["--cacert", ca, "--http2"]);
    assert_eq!(version, "1.1");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap(),
        serde_json::from_str::<serde_json::Value>(contract::JSON_BODY).unwrap()
    );
    // h2c: HTTP/2 with prior knowledge on plain TCP.
    let h2c = Serve::start_with(&["--protocol", "h2c"]);
    assert!(h2c.base.starts_with("http://"), "{}", h2c.base);
    let (version, body) = curl(&format!("{}/", h2c.base), &["--http2-prior-knowledge"]);
    assert_eq!(
        (version.as_str(), body.as_str()),
        ("2", contract::PLAINTEXT_BODY)
    );
}

#[test]
fn a_tls_protocol_without_a_certificate_is_refused_at_the_command_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_fairground"))
        .args(["serve", "--port", "0", "--protocol", "h2"])
        .env_remove("FAIRGROUND_TLS_CERT")
        .env_remove("FAIRGROUND_TLS_KEY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--tls-cert") && err.contains("h2"), "{err}");
}
