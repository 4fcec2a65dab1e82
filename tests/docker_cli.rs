//! The Docker-facing commands run as the real binary: a missing daemon is
//! exit code 4 with a message saying what to do; `images build` builds the
//! fixture framework and `images list` shows it.

mod docker_support;

use std::process::Command;

use docker_support::*;

fn fairground() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fairground"))
}

/// `fairground images build tinyfw` from the frameworks folder `frameworks`,
/// labelled as a test run named `what`; its stdout and stderr, once it
/// succeeded.
fn build_tinyfw(frameworks: &std::path::Path, what: &str) -> (String, String) {
    build_tinyfw_with(frameworks, what, |_| {})
}

fn build_tinyfw_with(
    frameworks: &std::path::Path,
    what: &str,
    tweak: impl FnOnce(&mut Command),
) -> (String, String) {
    let logs = tempfile::tempdir().unwrap();
    let mut cmd = fairground();
    tweak(&mut cmd);
    let out = cmd
        .args([
            "images",
            "build",
            "--run",
            &test_run(what).0,
            "--frameworks",
        ])
        .arg(frameworks)
        .arg("--root")
        .arg(root())
        .arg("--log-dir")
        .arg(logs.path())
        .arg("tinyfw")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

#[test]
fn missing_daemon_exits_4_and_says_how_to_start_or_point_at_one() {
    for args in [
        &["images", "list"][..],
        &["clean", "--run", "fgtest-none"][..],
    ] {
        let out = fairground()
            .args(args)
            .env("DOCKER_HOST", "unix:///nonexistent.sock")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{args:?}: {stderr}");
        assert!(
            stderr.contains("cannot reach the Docker daemon at unix:///nonexistent.sock"),
            "{stderr}"
        );
        assert!(stderr.contains("DOCKER_HOST"), "{stderr}");
        assert_eq!(
            stderr.matches("error:").count(),
            1,
            "one error, printed once: {stderr}"
        );
    }
}

#[test]
fn unreachable_tcp_daemon_is_also_exit_4() {
    // A closed local port: refused at once, nothing leaves the machine.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = fairground()
        .args(["images", "list"])
        .env("DOCKER_HOST", format!("tcp://127.0.0.1:{port}"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains(&format!("tcp://127.0.0.1:{port}")),
        "{stderr}"
    );
}

#[test]
fn images_build_builds_the_fixture_framework_and_list_shows_it() {
    if !docker_or_skip("images_build_builds_the_fixture_framework…") {
        return;
    }
    // Images an earlier run of this test built are removed first, so both
    // are really built here, as on an empty daemon.
    let fw = fairground::framework::load(&fixture_framework("tinyfw")).unwrap();
    let bin = fairground::docker::images::locate_static_binary(&root()).expect("make static");
    let fg_hash = fairground::docker::images::sha256_hex(&std::fs::read(bin).unwrap());
    let fw_hash = fairground::docker::images::framework_inputs_hash(
        &fw,
        "scratch",
        &fairground::docker::images::ImageOptions::new(root(), test_run("plan")),
    )
    .unwrap();
    let fresh = remove_if_ours(&format!("fairground/fairground:{}", &fg_hash[..12]))
        & remove_if_ours(&format!("fairground/fw-tinyfw:{}", &fw_hash[..12]));
    let (stdout, _) = build_tinyfw(&root().join("tests/fixtures/frameworks"), "cli");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("fairground") && l.contains("fairground/fairground:")),
        "{stdout}"
    );
    let fw_line = stdout
        .lines()
        .find(|l| l.starts_with("framework"))
        .expect(&stdout);
    assert!(
        fw_line.contains("tinyfw") && fw_line.contains("fairground/fw-tinyfw:"),
        "{fw_line}"
    );
    let tag = fw_line.split_whitespace().nth(2).unwrap().to_string();
    assert!(tag.ends_with(&fw_hash[..12]), "{tag}");
    if fresh {
        assert!(fw_line.ends_with("built"), "{stdout}");
        assert!(
            stdout.lines().next().unwrap().ends_with("built"),
            "{stdout}"
        );
    }
    // The versions file written by the cargo prebuild is read back.
    assert!(stdout.contains("    rustc "), "{stdout}");

    let out = fairground().args(["images", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    let row = list
        .lines()
        .find(|l| l.contains(&tag))
        .unwrap_or_else(|| panic!("{tag} not in\n{list}"));
    // The short input hash is the tag.
    assert!(row.ends_with(tag.split(':').nth(1).unwrap()), "{row}");

    // Unknown names are bad input (exit 2), naming what exists.
    let out = fairground()
        .args(["images", "build", "--frameworks"])
        .arg(root().join("tests/fixtures/frameworks"))
        .arg("nosuch")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("known: tinyfw"));
}

#[test]
fn ready_command_prints_first_200_as_json_and_fails_on_timeout() {
    let server = fairground::roles::serve::start("127.0.0.1".parse().unwrap(), 0, 1).unwrap();
    let out = fairground()
        .args([
            "ready",
            "--url",
            &format!("http://{}/json", server.addr),
            "--timeout",
            "5s",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ready"], true);
    assert!(v["first_200_unix_ms"].as_u64().unwrap() > 0);
    server.stop();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = fairground()
        .args([
            "ready",
            "--url",
            &format!("http://127.0.0.1:{port}/"),
            "--timeout",
            "300ms",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ready"], false);
}

#[test]
fn failed_framework_build_names_the_framework_the_log_and_shows_its_tail() {
    if !docker_or_skip("failed_framework_build_names…") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let fw = tmp.path().join("frameworks/broken");
    std::fs::create_dir_all(&fw).unwrap();
    std::fs::write(
        fw.join("framework.yaml"),
        "name: broken\nlanguage: none\nframework: broken\nbase: scratch\nscenarios: [plaintext]\n\
         workers: none\nnotes: a Dockerfile that cannot build\n",
    )
    .unwrap();
    std::fs::write(
        fw.join("Dockerfile"),
        "FROM scratch\nCOPY no-such-file /x\n",
    )
    .unwrap();
    let logs = tmp.path().join("logs");
    let run = test_run("cli-broken");
    let out = fairground()
        .args(["images", "build", "--run", &run.0, "--frameworks"])
        .arg(tmp.path().join("frameworks"))
        .arg("--root")
        .arg(root())
        .arg("--log-dir")
        .arg(&logs)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("for framework broken failed"), "{stderr}");
    let log = logs.join("fw-broken.log");
    assert!(
        stderr.contains(&format!("full log: {}", log.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains("no-such-file"),
        "the tail shows the builder's words: {stderr}"
    );
    assert!(std::fs::read_to_string(&log)
        .unwrap()
        .contains("COPY no-such-file"));
}

#[test]
fn a_rebuilt_framework_replaces_its_superseded_image() {
    if !docker_or_skip("a_rebuilt_framework_replaces_its_superseded_image") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = root().join("tests/fixtures/frameworks/tinyfw");
    let dst = tmp.path().join("frameworks/tinyfw");
    std::fs::create_dir_all(dst.join("src")).unwrap();
    for f in [
        "Cargo.toml",
        "Cargo.lock",
        "Dockerfile",
        "framework.yaml",
        "src/main.rs",
    ] {
        std::fs::copy(src.join(f), dst.join(f)).unwrap();
    }
    let build = || {
        // What this test is about, even where the caller opted out of it.
        let (stdout, stderr) =
            build_tinyfw_with(&tmp.path().join("frameworks"), "supersede", |cmd| {
                cmd.env_remove(fairground::docker::engine::KEEP_SUPERSEDED_ENV);
            });
        let tag = stdout
            .split_whitespace()
            .find(|w| w.starts_with("fairground/fw-tinyfw:"))
            .unwrap_or_else(|| panic!("{stdout}"))
            .to_string();
        (tag, stderr)
    };
    let (old, _) = build();
    // An edit to the app changes its inputs hash, so the next build is new.
    let main = dst.join("src/main.rs");
    let mut text = std::fs::read_to_string(&main).unwrap();
    text.push_str("\n// edited by a_rebuilt_framework_replaces_its_superseded_image\n");
    std::fs::write(&main, text).unwrap();
    let (new, stderr) = build();
    assert_ne!(old, new);
    assert!(
        stderr.contains(&format!("removed superseded image {old}")),
        "{stderr}"
    );
    let gone = Command::new("docker")
        .args(["image", "inspect", &old])
        .output()
        .unwrap();
    assert!(!gone.status.success(), "{old} is still there");

    // While another run's container exists, nothing is removed, and the
    // build says which container held it back.
    let other = test_run("supersede-other");
    let held = Command::new("docker")
        .args(["create", "--label", &format!("fairground.run={}", other.0)])
        .arg(&new)
        .output()
        .unwrap();
    assert!(held.status.success(), "{held:?}");
    let held = String::from_utf8_lossy(&held.stdout).trim().to_string();
    let mut text = std::fs::read_to_string(&main).unwrap();
    text.push_str("// edited again\n");
    std::fs::write(&main, text).unwrap();
    let (newer, stderr) = build();
    let _ = Command::new("docker").args(["rm", "-f", &held]).output();
    assert_ne!(new, newer);
    assert!(
        stderr.contains("superseded images kept: fairground containers exist"),
        "{stderr}"
    );
    let kept = Command::new("docker")
        .args(["image", "inspect", &new])
        .output()
        .unwrap();
    assert!(kept.status.success(), "{new} was removed under a container");
    remove_if_ours(&new);
    remove_if_ours(&newer);
}
