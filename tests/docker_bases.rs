//! Base-image bootstrap on the real daemon (slow: one mmdebstrap run).
//!
//! The base is given a description unique to this test run, so its input
//! hash (and tag) is new and it is really built from nothing, however many
//! bases the daemon already has; the test removes the image it made.

mod docker_support;

use std::time::Duration;

use docker_support::*;
use fairground::docker::container::{ContainerSpec, Role};
use fairground::docker::engine::Engine;
use fairground::docker::images::ImageOptions;

#[test]
fn missing_base_is_bootstrapped_with_mmdebstrap_and_runs_its_packages() {
    if !docker_or_skip("missing_base_is_bootstrapped…") {
        return;
    }
    let run = test_run("base");
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("docker/bases")).unwrap();
    std::fs::write(
        tmp.path().join("docker/bases/fgtest-nginx.yaml"),
        format!("suite: bookworm\npackages: [nginx-light]\ndescription: test base of {run}\n"),
    )
    .unwrap();
    let mut opts = ImageOptions::new(tmp.path(), run.clone());
    opts.log_dir = tmp.path().join("logs");
    let e = engine();
    rt().block_on(async {
        let d = e.docker();
        let t0 = std::time::Instant::now();
        let info = fairground::docker::bases::ensure(d, "fgtest-nginx", &opts)
            .await
            .unwrap_or_else(|err| panic!("{err:#}"));
        eprintln!(
            "base bootstrap took {:.0} s, {:?} bytes",
            t0.elapsed().as_secs_f64(),
            info.size_bytes
        );
        assert!(!info.reused, "a fresh input hash is built, not reused");
        assert!(
            info.tag.starts_with("fairground/base-fgtest-nginx:"),
            "{}",
            info.tag
        );
        let img = d.inspect_image(&info.tag).await.unwrap();
        let labels = img.config.and_then(|c| c.labels).unwrap_or_default();
        assert_eq!(
            labels.get("fairground.kind").map(String::as_str),
            Some("base")
        );
        assert_eq!(labels.get("fairground.inputs"), Some(&info.inputs_hash));

        // The second time it is reused.
        let again = fairground::docker::bases::ensure(d, "fgtest-nginx", &opts)
            .await
            .unwrap();
        assert!(again.reused);
        assert_eq!(again.id, info.id);

        // Its package is really installed: `nginx -v` runs in it.
        let mut s = ContainerSpec::new(
            &run,
            Role::Probe,
            format!("{}-nginx-v", run.name_prefix()),
            &info.tag,
        );
        s.cmd = vec!["nginx".into(), "-v".into()];
        let out = e
            .run_to_exit(&s, Duration::from_secs(60), None)
            .await
            .unwrap();
        assert!(out.stderr.contains("nginx version"), "{out:?}");

        fairground::docker::cleanup::clean(d, Some(&run), true)
            .await
            .unwrap();
        assert!(fairground::docker::images::existing(d, &info.tag)
            .await
            .unwrap()
            .is_none());
    });
}
