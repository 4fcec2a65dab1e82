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
        let mut child = Command::new(env!("CARGO_BIN_EXE_fairground"))
            .args(["serve", "--port", "0", "--threads", "2"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start fairground serve");
        // The server prints its address once every listener is bound.
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        Serve {
            child,
            base: format!("http://{addr}"),
        }
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
