//! `fairground verify NAME…` on the real Docker daemon: the tinyfw fixture
//! (a catch-all server that answers `200 Hello, World!` to everything) is
//! started in a container, verified from a fairground container on the run
//! network, and caught by the 404 check; nothing of the run is left behind.
//! With CI=true a missing daemon fails; elsewhere it skips loudly.

#[path = "docker_support/mod.rs"]
mod docker_support;

use std::time::Duration;

use docker_support::{docker_or_skip, engine, fixture_framework, leftovers, rt, test_run};
use fairground::contract::Scenario;
use fairground::docker::engine::Engine;
use fairground::verify::orchestrate::{verify_all, OrchestrateOptions};
use fairground::verify::report::names;
use fairground::verify::CheckStatus;

#[test]
fn verifies_tinyfw_in_containers_and_catches_its_catch_all_route() {
    if !docker_or_skip("verifies_tinyfw_in_containers_and_catches_its_catch_all_route") {
        return;
    }
    let fw = fairground::framework::load(&fixture_framework("tinyfw")).unwrap();
    let run = test_run("verify");
    let opts = OrchestrateOptions {
        timeout: Duration::from_secs(1),
        require_pipelining: false,
        seed: None,
        ready_timeout: Duration::from_secs(30),
    };
    let result = rt().block_on(verify_all(engine(), &run, std::slice::from_ref(&fw), &opts));
    rt().block_on(engine().cleanup(&run)).unwrap();
    let reports = result.unwrap_or_else(|e| panic!("{e:#}"));
    assert!(leftovers(&run).is_empty(), "{:?}", leftovers(&run));

    let r = &reports[0];
    let table = fairground::verify::report::render_table(&[("tinyfw".into(), r)]);
    assert_eq!(r.framework.as_deref(), Some("tinyfw"), "{table}");
    // The answer itself is right …
    for check in [
        names::STATUS,
        names::CONTENT_TYPE,
        names::BODY,
        names::FRAMING,
    ] {
        let c = r.scenario_check(Scenario::Plaintext, check).unwrap();
        assert_eq!(c.status, CheckStatus::Pass, "{check}: {table}");
    }
    assert_eq!(
        r.check(names::KEEP_ALIVE).unwrap().status,
        CheckStatus::Pass,
        "{table}"
    );
    // … but a server that answers 200 everywhere is not measured.
    let nf = r.check(names::NOT_FOUND).unwrap();
    assert_eq!(nf.status, CheckStatus::Fail, "{table}");
    assert!(
        nf.detail.ends_with("answered 200 OK, expected 404"),
        "{table}"
    );
    assert!(r
        .excluded(Scenario::Plaintext)
        .unwrap()
        .starts_with("not-found failed"));
    // It sends no Date header: recorded, not fatal.
    assert_eq!(
        r.check(names::DATE).unwrap().status,
        CheckStatus::Warn,
        "{table}"
    );
    // The verifier reached the server by its address on the run network.
    assert!(r.url.starts_with("http://10."), "{}", r.url);
    let fp = r.footprint.as_ref().unwrap();
    assert!(fp.lines.total > 20, "{:?}", fp.lines);
    assert!(fp.binary_bytes.is_some_and(|b| b > 100_000), "{fp:?}");
}
