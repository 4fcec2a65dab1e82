//! `fairground run` refuses bad input before touching Docker, with exit code
//! 2 and a message that says what to do.

use std::process::Command;

fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fairground"))
        .arg("run")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn refuses_a_run_without_a_profile() {
    let (code, err) = run(&[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--profile"), "{err}");
}

#[test]
fn refuses_an_unknown_profile_and_lists_the_known_ones() {
    let (code, err) = run(&["--profile", "no-such-profile"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("standard"), "{err}");
}

#[test]
fn refuses_to_resume_a_directory_that_is_not_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let (code, err) = run(&["--resume", dir.path().to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("results.json"), "{err}");
}

#[test]
fn refuses_a_profile_naming_frameworks_the_folder_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let (code, err) = run(&[
        "--profile",
        "quick",
        "--frameworks",
        dir.path().to_str().unwrap(),
        "--output",
        dir.path().join("out").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no framework `node-http`"), "{err}");
    assert!(
        err.contains(dir.path().to_str().unwrap()),
        "names the folder searched: {err}"
    );
    assert!(err.contains("known: none"), "{err}");
    assert!(
        !dir.path().join("out").exists(),
        "nothing is written for bad input"
    );
}

#[test]
fn refuses_a_profile_that_selects_no_framework() {
    let dir = tempfile::tempdir().unwrap();
    let fw = dir.path().join("frameworks/hyper");
    std::fs::create_dir_all(&fw).unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("frameworks/hyper");
    for f in ["framework.yaml", "Dockerfile"] {
        std::fs::copy(src.join(f), fw.join(f)).unwrap();
    }
    let profile = dir.path().join("none.yaml");
    std::fs::write(&profile, "frameworks: {exclude: [hyper]}\n").unwrap();
    let (code, err) = run(&[
        "--profile",
        profile.to_str().unwrap(),
        "--frameworks",
        dir.path().join("frameworks").to_str().unwrap(),
        "--output",
        dir.path().join("out").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("selects no framework"), "{err}");
    assert!(
        !dir.path().join("out").exists(),
        "nothing is written for bad input"
    );
}
