//! Rust frameworks compile in a build container, not on the host: a build
//! script that tries to write outside its build and to reach the network
//! leaves no trace on the host and opens no connection; the cache volume
//! makes a rebuild compile nothing; and `images build` with the default
//! relative `--root` builds a Rust framework that lives outside
//! `frameworks/`.

mod docker_support;

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use docker_support::*;
use fairground::docker::images::{self, rust::sandbox, ImageOptions};

/// Copy the folder `src` to `dst` (files and folders only).
fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// A listener of this test on `ip`, port chosen by the kernel; accepts
/// without blocking so "no connection arrived" is a plain check.
fn listener(ip: &str) -> TcpListener {
    let l = TcpListener::bind((ip, 0)).unwrap_or_else(|e| panic!("bind {ip}: {e}"));
    l.set_nonblocking(true).unwrap();
    l
}

/// Whether anything connected to `l` since it was opened.
fn connected(l: &TcpListener) -> bool {
    match l.accept() {
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(e) => panic!("accept: {e}"),
    }
}

/// The host's address on Docker's default bridge: where a container with
/// networking would reach the host.
fn bridge_gateway() -> Option<String> {
    let d = rt().block_on(fairground::docker::connect()).ok()?;
    let net = rt().block_on(d.inspect_network("bridge", None)).ok()?;
    net.ipam?.config?.into_iter().find_map(|c| c.gateway)
}

/// Remove the cargo cache volume of framework `name` built from this
/// checkout (the test framework names are this file's own); `must` when it
/// has to be there.
fn remove_cache(name: &str, must: bool) {
    let d = rt().block_on(fairground::docker::connect()).unwrap();
    let volume = sandbox::cache_volume(name, &root().canonicalize().unwrap());
    let removed = rt().block_on(d.remove_volume(
        &volume,
        None::<bollard::query_parameters::RemoveVolumeOptions>,
    ));
    if must {
        removed.unwrap_or_else(|e| panic!("removing cache volume {volume}: {e}"));
    }
}

/// Remove the image `tag` and the cache volume of framework `name`, both
/// made by this test.
fn remove_image_and_cache(tag: &str, name: &str) {
    let d = rt().block_on(fairground::docker::connect()).unwrap();
    let _ = rt().block_on(d.remove_image(
        tag,
        None::<bollard::query_parameters::RemoveImageOptions>,
        None,
    ));
    remove_cache(name, true);
}

#[test]
fn build_script_can_neither_write_to_the_host_nor_reach_the_network() {
    if !docker_or_skip("build_script_can_neither_write_to_the_host_nor_reach_the_network") {
        return;
    }
    // A cache left by an interrupted earlier run would hide the first compile.
    remove_cache("escapefw", false);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("frameworks/escapefw");
    copy_dir(&root().join("tests/fixtures/sandbox/escapefw"), &dir);
    // A file in the host's temp directory, and one in the framework's own
    // folder (what a build on the host could write).
    let marker = tmp.path().join("outside/escaped-marker");
    let source_marker = dir.join("escaped-into-source");
    // Listeners of this test only: on loopback (what a build on the host
    // would reach) and on the host's bridge address (what a container with
    // networking would reach).
    let mut listeners = vec![listener("127.0.0.1")];
    if let Some(gw) = bridge_gateway() {
        listeners.push(listener(&gw));
    }
    let mut conf = format!(
        "write {}\nwrite-source escaped-into-source\n",
        marker.display()
    );
    for l in &listeners {
        conf.push_str(&format!("connect {}\n", l.local_addr().unwrap()));
    }
    std::fs::write(dir.join("escape.conf"), &conf).unwrap();

    let fw = fairground::framework::load(&dir).unwrap();
    let mut opts = ImageOptions::new(root(), test_run("sandbox"));
    opts.log_dir = tmp.path().join("logs");
    let log = opts.log_dir.join("fw-escapefw.log");
    let docker = rt().block_on(fairground::docker::connect()).unwrap();
    let built = rt().block_on(images::ensure_framework(&docker, &fw, "scratch", &opts));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let info = built.unwrap_or_else(|e| panic!("{e:#}\n{text}"));

    // The build script really ran, in the container, as the build user.
    assert!(text.contains("escapefw: ran, Uid: 65534"), "{text}");
    for l in &listeners {
        let addr = l.local_addr().unwrap();
        assert!(
            text.contains(&format!("connect {addr}: failed")),
            "no report of the attempt on {addr}:\n{text}"
        );
        assert!(
            !connected(l),
            "the build script reached this test's listener on {addr}"
        );
    }
    assert!(
        !marker.exists(),
        "the build script wrote {} on the host",
        marker.display()
    );
    assert!(
        !source_marker.exists(),
        "the build script wrote into its folder on the host"
    );
    assert!(
        text.contains("write-source escaped-into-source: failed"),
        "the source folder is read-only in the container:\n{text}"
    );
    assert!(
        leftovers(&opts.run).is_empty(),
        "{:?}",
        leftovers(&opts.run)
    );

    // The cache volume survives: built again (image removed, inputs the
    // same), nothing is compiled.
    let d = rt().block_on(fairground::docker::connect()).unwrap();
    rt().block_on(d.remove_image(
        &info.tag,
        None::<bollard::query_parameters::RemoveImageOptions>,
        None,
    ))
    .unwrap();
    let again = rt()
        .block_on(images::ensure_framework(&docker, &fw, "scratch", &opts))
        .unwrap_or_else(|e| panic!("{e:#}"));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(again.tag, info.tag);
    assert!(!again.reused, "the image was removed, so it was built");
    assert!(
        text.contains("Finished") && !text.contains("Compiling"),
        "a rebuild of unchanged inputs compiled something:\n{text}"
    );
    remove_image_and_cache(&info.tag, "escapefw");
}

/// The bug: `fairground images build NAME --frameworks DIR` with the default
/// `--root .` failed after cargo had finished with only `error: No such file
/// or directory (os error 2)`: cargo resolved the relative target dir
/// against the framework's folder, fairground looked for the binary against
/// its own working directory, and the read named no file. Now the compile
/// has no host target dir, and every path error names its path.
#[test]
fn relative_root_with_a_rust_framework_outside_frameworks_no_longer_fails_with_bare_os_error_2() {
    if !docker_or_skip("relative_root_with_a_rust_framework_outside_frameworks…") {
        return;
    }
    remove_cache("relfw", false);
    let tmp = tempfile::tempdir().unwrap();
    let fws = tmp.path().join("fws");
    let dir = fws.join("relfw");
    copy_dir(&root().join("tests/fixtures/frameworks/tinyfw"), &dir);
    // Its own binary name: no earlier build can leave one to find.
    for file in ["Cargo.toml", "Cargo.lock", "framework.yaml"] {
        let p = dir.join(file);
        let text = std::fs::read_to_string(&p)
            .unwrap()
            .replace("tinyfw", "relfw");
        std::fs::write(&p, text).unwrap();
    }
    // A second framework whose manifest asks for a cargo build but whose
    // folder has no Cargo.toml: the error must name the folder.
    let broken = fws.join("nocargo");
    copy_dir(&dir, &broken);
    std::fs::remove_file(broken.join("Cargo.toml")).unwrap();
    let manifest = broken.join("framework.yaml");
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("name: relfw", "name: nocargo");
    std::fs::write(&manifest, text).unwrap();

    let run = test_run("relroot");
    let images_build = |name: &str| {
        // The default `--root .`, from the project root, as a user types it.
        Command::new(env!("CARGO_BIN_EXE_fairground"))
            .current_dir(root())
            .args(["images", "build", "--run", &run.0, "--frameworks"])
            .arg(&fws)
            .arg("--log-dir")
            .arg(tmp.path().join("logs"))
            .arg(name)
            .output()
            .unwrap()
    };
    let out = images_build("relfw");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("framework") && l.contains("relfw"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let tag = line.split_whitespace().nth(2).unwrap().to_string();
    assert!(stdout.contains("    rustc "), "{stdout}");

    let out = images_build("nocargo");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{stderr}");
    let named: PathBuf = broken.canonicalize().unwrap();
    assert!(
        stderr.contains(&named.display().to_string()) && stderr.contains("no Cargo.toml"),
        "the error names the folder: {stderr}"
    );
    assert!(leftovers(&run).is_empty(), "{:?}", leftovers(&run));
    remove_image_and_cache(&tag, "relfw");
}
