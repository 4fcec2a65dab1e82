//! Shared helpers of the Docker integration tests (tests/docker_*.rs).
//!
//! One tokio runtime and one daemon connection per test process, images
//! built once per process, and every object labelled with a run id that
//! starts with `fgtest-docker-` so these tests only ever clean their own.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use fairground::results::{self, Results};
use std::sync::{LazyLock, Mutex, OnceLock};

use fairground::docker::engine::{BuiltImages, DockerEngine, Engine};
use fairground::docker::images::ImageOptions;
use fairground::docker::RunId;

/// The project root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One runtime for every test of the process, so pooled connections of the
/// shared client always have their runtime.
pub fn rt() -> &'static tokio::runtime::Runtime {
    static RT: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    });
    &RT
}

/// A run id these tests own.
pub fn test_run(what: &str) -> RunId {
    RunId(format!(
        "fgtest-docker-{what}-{:08x}",
        rand::random::<u32>()
    ))
}

/// Whether Docker tests can run: with CI=true the daemon must be there
/// (panic otherwise); elsewhere a missing daemon skips loudly.
pub fn docker_or_skip(test: &str) -> bool {
    let ok = rt()
        .block_on(fairground::docker::connect())
        .map_err(|e| e.to_string());
    match ok {
        Ok(docker) => {
            say_what_else_is_up(&docker);
            true
        }
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{test}: CI=true but the Docker daemon is unreachable: {e}")
        }
        Err(e) => {
            eprintln!("\n!!! SKIPPING {test}: no Docker daemon ({e}) !!!\n");
            false
        }
    }
}

/// Containers of fairground runs up on the daemon (a run killed before it
/// could clean up, another checkout's run), by name and run: a test about
/// to measure says so, loudly, once per process, so figures read beside
/// them are not taken for the host's own.
fn say_what_else_is_up(docker: &bollard::Docker) {
    static SAID: OnceLock<()> = OnceLock::new();
    SAID.get_or_init(|| {
        let filters = std::collections::HashMap::from([(
            "label".to_string(),
            vec![fairground::docker::LABEL_RUN.to_string()],
        )]);
        let up = rt()
            .block_on(docker.list_containers(Some(
                bollard::query_parameters::ListContainersOptions {
                    all: false,
                    filters: Some(filters),
                    ..Default::default()
                },
            )))
            .unwrap_or_default();
        if up.is_empty() {
            return;
        }
        let named: Vec<String> = up
            .iter()
            .map(|c| {
                let name = c
                    .names
                    .as_ref()
                    .and_then(|n| n.first())
                    .map_or("?", |n| n.trim_start_matches('/'));
                let run = c
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(fairground::docker::LABEL_RUN))
                    .map_or("?", String::as_str);
                format!("{name} (run {run})")
            })
            .collect();
        eprintln!(
            "\n!!! containers of other fairground runs are up while these tests measure: {}; \
             remove them with `fairground clean --run RUN` (or `fairground clean`) !!!\n",
            named.join(", ")
        );
    });
}

/// Host CPU in use over one second, cores (/proc/stat: all but idle and
/// iowait), read by the test itself, independently of fairground's gates.
pub fn host_busy_cores() -> f64 {
    fn sample() -> (u64, u64) {
        let stat = std::fs::read_to_string("/proc/stat").unwrap();
        let v: Vec<u64> = stat
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse().unwrap())
            .collect();
        let total: u64 = v.iter().take(8).sum();
        (total - v[3] - v[4], total)
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let (b0, t0) = sample();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let (b1, t1) = sample();
    (b1 - b0) as f64 / (t1 - t0).max(1) as f64 * cores
}

/// Below this many busy cores, with nothing of the test running, the host
/// counts as quiet for the checks that a quiet host is not called busy.
pub const QUIET_HOST_CORES: f64 = 0.25;

/// Run `f` between two readings of the host (nothing of the test running
/// at either): its result and whether the host was quiet at both ends.
/// Checks that a quiet host is not flagged busy hold only then; on a busy
/// host (a CPU hog beside the tests) they say why they were not made.
pub fn bracketed_by_quiet<T>(f: impl FnOnce() -> T) -> (T, bool) {
    let before = host_busy_cores();
    let out = f();
    let after = host_busy_cores();
    let quiet = before.max(after) < QUIET_HOST_CORES;
    if !quiet {
        eprintln!(
            "host busy around the run ({before:.2} cores before, {after:.2} after, with nothing \
             of the test running): the checks that a quiet host is not called busy are not made"
        );
    }
    (out, quiet)
}

/// The engine shared by the process (labels its builds with one run id).
pub fn engine() -> &'static DockerEngine {
    static ENGINE: OnceLock<DockerEngine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        rt().block_on(async {
            let mut opts = ImageOptions::new(root(), test_run("images"));
            opts.log_dir = root().join("target/test-build-logs");
            opts.progress = std::sync::Arc::new(|m: &str| eprintln!("[images] {m}"));
            DockerEngine::connect(opts).await.expect("connect")
        })
    })
}

/// The fixture framework folder.
pub fn fixture_framework(name: &str) -> PathBuf {
    root().join("tests/fixtures/frameworks").join(name)
}

/// Remove `tag` if an earlier run of these tests built it (its
/// `fairground.run` label is ours), so the build path really runs, as on an
/// empty daemon. Images built by anyone else are never touched. Returns
/// whether the image is now absent.
pub fn remove_if_ours(tag: &str) -> bool {
    let d = engine().docker().clone();
    rt().block_on(async {
        let Ok(img) = d.inspect_image(tag).await else {
            return true;
        };
        let ours = img
            .config
            .and_then(|c| c.labels)
            .and_then(|l| l.get("fairground.run").cloned())
            .is_some_and(|r| r.starts_with("fgtest-docker-"));
        ours && d
            .remove_image(
                tag,
                None::<bollard::query_parameters::RemoveImageOptions>,
                None,
            )
            .await
            .is_ok()
    })
}

/// Whether [`images`] built both images from nothing (rather than reusing
/// ones it could not remove).
pub static BUILT_FRESH: Mutex<bool> = Mutex::new(false);

/// fairground's image and the `tinyfw` fixture image, built once per process.
pub fn images() -> BuiltImages {
    static BUILT: Mutex<Option<BuiltImages>> = Mutex::new(None);
    let mut guard = BUILT.lock().unwrap();
    if let Some(b) = guard.as_ref() {
        return b.clone();
    }
    let fw = fairground::framework::load(&fixture_framework("tinyfw")).expect("fixture manifest");
    let bin = fairground::docker::images::locate_static_binary(&root()).expect("make static");
    let fg_hash = fairground::docker::images::sha256_hex(&std::fs::read(bin).unwrap());
    let fw_hash = fairground::docker::images::framework_inputs_hash(
        &fw,
        "scratch",
        &ImageOptions::new(root(), test_run("plan")),
    )
    .unwrap();
    // The SIGTERM test's child process reuses what its parent built.
    let child = std::env::var_os("FAIRGROUND_TEST_SIGTERM_CHILD").is_some();
    let fresh = !child
        && remove_if_ours(&format!("fairground/fairground:{}", &fg_hash[..12]))
            & remove_if_ours(&format!("fairground/fw-tinyfw:{}", &fw_hash[..12]));
    *BUILT_FRESH.lock().unwrap() = fresh;
    let built = rt()
        .block_on(engine().ensure_images(std::slice::from_ref(&fw), false))
        .unwrap_or_else(|e| panic!("building test images: {e:#}"));
    *guard = Some(built.clone());
    built
}

/// Names of containers, networks and volumes still carrying `run`'s label.
pub fn leftovers(run: &RunId) -> Vec<String> {
    use bollard::query_parameters::{ListContainersOptions, ListNetworksOptions};
    use std::collections::HashMap;
    let filters = HashMap::from([(
        "label".to_string(),
        vec![format!("fairground.run={}", run.0)],
    )]);
    let d = engine().docker().clone();
    rt().block_on(async {
        let mut names: Vec<String> = d
            .list_containers(Some(ListContainersOptions {
                all: true,
                filters: Some(filters.clone()),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_iter()
            .flat_map(|c| c.names.unwrap_or_default())
            .collect();
        names.extend(
            d.list_networks(Some(ListNetworksOptions {
                filters: Some(filters.clone()),
            }))
            .await
            .unwrap()
            .into_iter()
            .filter_map(|n| n.name),
        );
        // The anonymous volumes of seeded files (TLS certificates) go with
        // their containers.
        names.extend(
            d.list_volumes(Some(bollard::query_parameters::ListVolumesOptions {
                filters: Some(filters),
            }))
            .await
            .unwrap()
            .volumes
            .unwrap_or_default()
            .into_iter()
            .filter(|v| !v.labels.contains_key(fairground::docker::LABEL_KIND))
            .map(|v| format!("volume {}", v.name)),
        );
        names
    })
}

/// Path of a file relative to the root, for messages.
pub fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

/// A copy of the plainfw fixture under `dir/frameworks/NAME`, with its
/// manifest renamed and `env` set: how the gate tests turn on its faults.
pub fn plainfw_variant(dir: &Path, name: &str, env: &[(&str, &str)]) {
    let src = root().join("tests/fixtures/run/frameworks/plainfw");
    let dst = dir.join("frameworks").join(name);
    std::fs::create_dir_all(dst.join("src")).unwrap();
    for f in ["Cargo.toml", "Cargo.lock", "Dockerfile", "src/main.rs"] {
        std::fs::copy(src.join(f), dst.join(f)).unwrap();
    }
    let mut manifest = std::fs::read_to_string(src.join("framework.yaml"))
        .unwrap()
        .replace("name: plainfw", &format!("name: {name}"));
    if !env.is_empty() {
        manifest.push_str("env:\n");
        for (k, v) in env {
            manifest.push_str(&format!("  {k}: \"{v}\"\n"));
        }
    }
    std::fs::write(dst.join("framework.yaml"), manifest).unwrap();
}

/// A framework `name` under `dir/frameworks` that is the reference server
/// itself (this build's static binary in a `FROM scratch` image) serving
/// the contract's ports (`fairground serve --contract-ports`): http1 on
/// 8080, h2c on 8082, TLS on 8443 when the run makes certificates, `/ws`
/// on the HTTP/1.1 ones. Its manifest declares `scenarios` and
/// `protocols` (YAML lists) and sets `env` (its `FAIRGROUND_SERVE_*`
/// knobs: a delay, a defect, memory held per WebSocket connection).
pub fn refserve(dir: &Path, name: &str, scenarios: &str, protocols: &str, env: &[(&str, &str)]) {
    let d = dir.join("frameworks").join(name);
    std::fs::create_dir_all(&d).unwrap();
    let bin = std::env::var_os("FAIRGROUND_STATIC_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            fairground::docker::images::locate_static_binary(&root()).expect("make static")
        });
    std::fs::copy(bin, d.join("app")).unwrap();
    std::fs::write(d.join("versions.txt"), "fairground serve (this build)\n").unwrap();
    std::fs::write(
        d.join("Dockerfile"),
        "ARG BASE=scratch\nFROM ${BASE}\nCOPY app /app\nCOPY versions.txt /fairground/versions.txt\n\
         USER 65534:65534\nENTRYPOINT [\"/app\", \"serve\", \"--bind\", \"0.0.0.0\", \"--port\", \"8080\", \
         \"--threads\", \"1\", \"--contract-ports\"]\n",
    )
    .unwrap();
    let mut manifest = format!(
        "name: {name}\nlanguage: rust\nframework: fairground serve (reference server, test fixture)\n\
         base: scratch\nscenarios: {scenarios}\nprotocols: {protocols}\n\
         workers: one thread\nnotes: test fixture; never benchmarked\n"
    );
    if !env.is_empty() {
        manifest.push_str("env:\n");
        for (k, v) in env {
            manifest.push_str(&format!("  {k}: \"{v}\"\n"));
        }
    }
    std::fs::write(d.join("framework.yaml"), manifest).unwrap();
}

/// `fairground` (this build), run from the project root, with the static
/// binary its image is made of.
pub fn fairground(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fairground"));
    c.args(args).current_dir(root());
    if std::env::var_os("FAIRGROUND_STATIC_BIN").is_none() {
        let bin = fairground::docker::images::locate_static_binary(&root()).expect("make static");
        c.env("FAIRGROUND_STATIC_BIN", bin);
    }
    c
}

pub fn run_dir(out: &Path) -> PathBuf {
    out.join("latest")
        .canonicalize()
        .expect("output/latest points at the run")
}

pub fn results_of(dir: &Path) -> Results {
    let path = dir.join(results::RESULTS_FILE);
    results::from_json(&std::fs::read_to_string(&path).unwrap(), "results.json").unwrap()
}

/// Containers, networks and volumes still carrying the run's label.
pub fn run_leftovers(stderr: &str) -> String {
    let run = stderr
        .lines()
        .find_map(|l| l.split("fairground.run=").nth(1))
        .expect("the run prints its label")
        .trim()
        .to_string();
    let ps = Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=fairground.run={run}"),
        ])
        .output()
        .unwrap();
    let nets = Command::new("docker")
        .args([
            "network",
            "ls",
            "-q",
            "--filter",
            &format!("label=fairground.run={run}"),
        ])
        .output()
        .unwrap();
    // Volumes of the run's containers (seeded files); build caches
    // (`fairground.kind`) are kept across runs on purpose.
    let volumes = Command::new("docker")
        .args([
            "volume",
            "ls",
            "--filter",
            &format!("label=fairground.run={run}"),
            "--format",
            "{{.Name}} {{.Label \"fairground.kind\"}}",
        ])
        .output()
        .unwrap();
    let volumes: String = String::from_utf8_lossy(&volumes.stdout)
        .lines()
        .filter_map(|l| match l.trim().split_once(' ') {
            None => Some(l.trim().to_string()),
            Some((name, kind)) if kind.trim().is_empty() => Some(name.to_string()),
            Some(_) => None,
        })
        .collect();
    format!(
        "{}{}{}",
        String::from_utf8_lossy(&ps.stdout).trim(),
        String::from_utf8_lossy(&nets.stdout).trim(),
        volumes
    )
}

/// `fairground run` of `profile` (YAML text, written to
/// `dir/profile.yaml`) against the frameworks under `dir/frameworks`, into
/// `out`: its exit code and stderr, once every container and network of
/// the run is checked gone.
pub fn run_profile_to(dir: &Path, profile: &str, out: &Path) -> (Option<i32>, String) {
    let path = dir.join("profile.yaml");
    std::fs::write(&path, profile).unwrap();
    let o = fairground(&[
        "run",
        "--profile",
        path.to_str().unwrap(),
        "--frameworks",
        dir.join("frameworks").to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        stderr.contains("fairground.run="),
        "the run started: {stderr}"
    );
    assert_eq!(run_leftovers(&stderr), "", "containers and network removed");
    (o.status.code(), stderr)
}

/// Run `profile` (YAML text) against the frameworks under `dir/frameworks`;
/// the finished run's results and fairground's stderr.
pub fn run_profile_in(dir: &Path, profile: &str) -> (Results, String) {
    let out = dir.join("output");
    let (code, stderr) = run_profile_to(dir, profile, &out);
    assert_eq!(
        code,
        Some(0),
        "a run whose cells are rejected still completes: {stderr}"
    );
    (results_of(&run_dir(&out)), stderr)
}

/// What a busy host cannot move in a closed loop against a server that
/// holds every answer `delay_s`, serves `served` requests at once and
/// needs microseconds of CPU for each, while the loader keeps `in_flight`
/// (more than `served` when the rest queue for a stream limit):
/// - no answer comes before its hold (mean latency ≥ the hold, −1% for
///   the clocks), so the rate is at most `served / delay_s` (+1%);
/// - Little's law: rate × mean latency is what the loader kept in flight
///   (±5%), however late a busy host's or a slow hypervisor's timers wake
///   the server;
/// - gross: the rate is at least half of `served / delay_s` (a wake-up
///   late by a whole hold is no timer's rounding but a loader or server
///   that stalled).
///
/// The rate itself within ±2% is a quiet host's answer: on this kind of
/// VM with slow timers (a 10 ms sleep taking 12–13 ms) it is not, while
/// a loader that miscounted streams or connections fails every line.
pub fn assert_held_answers(
    what: &str,
    round: &fairground::results::Round,
    in_flight: f64,
    served: f64,
    delay_s: f64,
) {
    let most = served / delay_s;
    let mean_s = round.latency.mean_us / 1e6;
    assert!(
        mean_s >= delay_s * 0.99,
        "{what}: mean latency {mean_s:.4} s below the server's hold {delay_s} s"
    );
    assert!(
        round.throughput_rps <= most * 1.01 && round.throughput_rps >= most * 0.5,
        "{what}: {:.2} req/s, the hold allows {most:.0} at most and a stalled loop half of it",
        round.throughput_rps
    );
    assert!(
        (round.connections_in_use / in_flight - 1.0).abs() <= 0.05,
        "{what}: rate × mean latency = {:.2} in flight, want {in_flight} ±5%",
        round.connections_in_use
    );
}
