//! The container engine against the real daemon: images built without a
//! registry, the internal run network, limits that really apply, probes that
//! agree with the stats API, and cleanup that leaves nothing behind.
//!
//! Only traffic: containers on the test's own internal network.

mod docker_support;

use std::time::Duration;

use docker_support::*;
use fairground::docker::cleanup::RunGuard;
use fairground::docker::container::{ContainerSpec, Resources, Role};
use fairground::docker::engine::{Engine, ReadyCheck};
use fairground::docker::RunId;

const MIB: u64 = 1 << 20;

fn spec(run: &RunId, role: Role, name: &str, image: &str, cmd: &[&str]) -> ContainerSpec {
    let mut s = ContainerSpec::new(run, role, format!("{}-{name}", run.name_prefix()), image);
    s.cmd = cmd.iter().map(|c| c.to_string()).collect();
    s
}

#[test]
fn fairground_image_serves_and_a_second_container_reaches_it_over_the_internal_network() {
    if !docker_or_skip("fairground_image_serves…") {
        return;
    }
    let built = images();
    let fg = &built.fairground;
    if *BUILT_FRESH.lock().unwrap() {
        assert!(!fg.reused, "built from nothing: {fg:?}");
        assert!(!built.frameworks["tinyfw"].reused);
    }
    assert!(fg.tag.starts_with("fairground/fairground:"), "{}", fg.tag);
    assert_eq!(fg.tag.split(':').nth(1).unwrap(), &fg.inputs_hash[..12]);
    assert!(
        fg.size_bytes.is_some_and(|b| b > 1_000_000),
        "a static binary is megabytes: {fg:?}"
    );
    assert!(
        fg.versions
            .as_deref()
            .unwrap_or("")
            .starts_with("fairground "),
        "{fg:?}"
    );
    let e = engine();
    let run = test_run("serve");
    rt().block_on(async {
        let guard = RunGuard::new(e.docker().clone(), run.clone());
        let net = e.create_network(&run).await.unwrap();
        assert!(net.internal);
        // The two highest cores of the daemon's host, one each.
        let cpus = e.host_cpus().await.unwrap();
        assert!(cpus.len() >= 2, "this test needs two cores: {cpus:?}");
        let server_set = cpus[cpus.len() - 1].to_string();
        let loader_set = cpus[cpus.len() - 2].to_string();
        let mut server = spec(
            &run,
            Role::Server,
            "server",
            &fg.tag,
            &["serve", "--bind", "0.0.0.0", "--port", "8080"],
        );
        server.network = Some(net.name.clone());
        server.read_only_rootfs = true;
        server.limits = Resources {
            cpuset: Some(server_set.clone()),
            cpus: Some(1.0),
            memory_bytes: Some(256 * MIB),
            // Below this host's dockerd hard limit (20000): runc cannot go above it.
            nofile: Some(16384),
        };
        let h = e.start_container(&server).await.unwrap();
        let applied = e.inspect_limits(&h).await.unwrap();
        assert_eq!(applied.cpuset.as_deref(), Some(server_set.as_str()));
        assert!(
            applied.read_only_rootfs && applied.swap_off(),
            "{applied:?}"
        );
        let ready = e
            .wait_ready(
                &h,
                &ReadyCheck {
                    port: 8080,
                    path: "/".into(),
                    timeout: Duration::from_secs(20),
                },
            )
            .await
            .unwrap();
        let cold = ready.cold_start_ms.expect("cold start");
        eprintln!(
            "fairground serve: cold start {}{cold} ms ({} readiness attempts), image {:?} bytes",
            if ready.cold_start_is_upper_bound {
                "≤ "
            } else {
                ""
            },
            ready.attempts,
            fg.size_bytes
        );
        assert!((0..20_000).contains(&cold), "cold start {cold} ms");
        assert_eq!(ready.cold_start_is_upper_bound, ready.attempts == 1);
        // The load container: `fairground load` for 2 s (bounded in time) at
        // the server's address on the internal network; only 2xx count.
        let url = format!("http://{}:8080/", h.ip.clone().unwrap());
        let mut loader = spec(
            &run,
            Role::Loader,
            "loader",
            &fg.tag,
            &[
                "load", "--url", &url, "-c", "8", "--warmup", "1s", "-d", "2s", "--json", "--progress",
            ],
        );
        loader.network = Some(net.name.clone());
        loader.read_only_rootfs = true;
        loader.limits.cpuset = Some(loader_set);
        loader.limits.nofile = Some(4096);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let out = e
            .run_to_exit(&loader, Duration::from_secs(60), Some(tx))
            .await
            .unwrap();
        // Its progress arrived line by line while it ran: the start of the
        // measured window, then one line per second.
        let mut streamed = Vec::new();
        while let Ok(line) = rx.try_recv() {
            streamed.push(line);
        }
        let starts = streamed
            .iter()
            .filter(|l| l.contains("\"event\":\"measure\""))
            .count();
        assert_eq!(starts, 1, "{streamed:?}");
        assert!(
            streamed.iter().filter(|l| l.contains("\"phase\"")).count() >= 2,
            "{streamed:?}"
        );
        let report: serde_json::Value = serde_json::from_str(out.stdout.trim())
            .unwrap_or_else(|err| panic!("{err}: {}\n{}", out.stdout, out.stderr));
        let total = report["requests"]["sent"].as_u64().unwrap();
        assert!(total > 0, "{}", out.stdout);
        assert_eq!(
            report["requests"]["answered"]["status_2xx"].as_u64(),
            Some(total),
            "every request answered 2xx: {}",
            report["requests"]
        );
        eprintln!(
            "fairground load in a container, 8 connections, 2 s, one core each: {total} responses, {:.0} req/s",
            report["throughput_rps"].as_f64().unwrap_or(0.0)
        );
        let report = guard.finish().await.unwrap();
        assert!(report.networks.contains(&net.name), "{report:?}");
        assert!(
            report.containers.iter().any(|c| c.ends_with("-server")),
            "{report:?}"
        );
    });
    assert!(leftovers(&run).is_empty(), "{:?}", leftovers(&run));
}

#[test]
fn memory_limit_is_enforced_and_the_oom_kill_is_reported() {
    if !docker_or_skip("memory_limit_is_enforced…") {
        return;
    }
    let img = images().frameworks["tinyfw"].tag.clone();
    let e = engine();
    let run = test_run("oom");
    rt().block_on(async {
        let guard = RunGuard::new(e.docker().clone(), run.clone());
        let mut s = spec(&run, Role::Probe, "alloc", &img, &["alloc", "512"]);
        s.limits.memory_bytes = Some(256 * MIB);
        let err = e
            .run_to_exit(&s, Duration::from_secs(60), None)
            .await
            .unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("OOM-killed"), "{msg}");
        assert!(msg.contains("exit 137"), "{msg}");
        // The same allocation under a limit that fits succeeds.
        let mut s = spec(&run, Role::Probe, "alloc-ok", &img, &["alloc", "64"]);
        s.limits.memory_bytes = Some(256 * MIB);
        let out = e
            .run_to_exit(&s, Duration::from_secs(60), None)
            .await
            .unwrap();
        assert!(out.stdout.contains("allocated 64 MiB"), "{out:?}");
        guard.finish().await.unwrap();
    });
}

#[test]
fn cpuset_nofile_and_no_swap_are_what_was_asked_inside_the_container() {
    if !docker_or_skip("cpuset_nofile_and_no_swap…") {
        return;
    }
    let img = images().frameworks["tinyfw"].tag.clone();
    let e = engine();
    let run = test_run("limits");
    rt().block_on(async {
        let guard = RunGuard::new(e.docker().clone(), run.clone());
        let limits = Resources {
            cpuset: Some("1".into()),
            cpus: Some(0.5),
            memory_bytes: Some(128 * MIB),
            nofile: Some(12_345),
        };
        let mut s = spec(
            &run,
            Role::Probe,
            "cat",
            &img,
            &[
                "cat",
                "/proc/self/status",
                "/proc/self/limits",
                "/proc/self/environ",
            ],
        );
        s.limits = limits.clone();
        let out = e
            .run_to_exit(&s, Duration::from_secs(30), None)
            .await
            .unwrap();
        let cpus_line = out
            .stdout
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list:"))
            .unwrap();
        assert_eq!(
            cpus_line.split_whitespace().nth(1),
            Some("1"),
            "{cpus_line}"
        );
        let nofile = out
            .stdout
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .unwrap();
        let nums: Vec<&str> = nofile.split_whitespace().skip(3).take(2).collect();
        assert_eq!(nums, vec!["12345", "12345"], "{nofile}");
        assert!(out.stdout.contains("FAIRGROUND_CPUS=1"), "{}", out.stdout);

        // Read back from a running container: what Docker applied, and the
        // kernel's own swap limit (v1 memsw) equal to the memory limit.
        let mut srv = spec(&run, Role::Server, "srv", &img, &["serve", "8080"]);
        srv.limits = limits;
        srv.sysctls = fairground::host::sysctl::Sysctls::of(&[("net.core.somaxconn", "65535")]);
        let h = e.start_container(&srv).await.unwrap();
        let applied = e.inspect_limits(&h).await.unwrap();
        assert_eq!(applied.cpuset.as_deref(), Some("1"));
        assert_eq!(applied.cpus, Some(0.5));
        assert_eq!(applied.memory_bytes, Some(128 * MIB));
        assert!(applied.swap_off(), "{applied:?}");
        assert_eq!(
            (applied.nofile_soft, applied.nofile_hard),
            (Some(12_345), Some(12_345))
        );
        assert_eq!(applied.cap_drop, vec!["ALL"]);
        assert_eq!(applied.sysctls["net.core.somaxconn"], "65535");
        let paths = fairground::probe::CgroupFs::default()
            .for_pid(h.pid.unwrap())
            .unwrap();
        let memsw = paths.memory.join("memory.memsw.limit_in_bytes");
        let swap_max = paths.memory.join("memory.swap.max");
        if memsw.exists() {
            let v: u64 = std::fs::read_to_string(&memsw)
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            assert_eq!(v, 128 * MIB, "memory+swap limit equals the memory limit");
        } else if swap_max.exists() {
            assert_eq!(std::fs::read_to_string(&swap_max).unwrap().trim(), "0");
        }
        guard.finish().await.unwrap();
    });
    assert!(leftovers(&run).is_empty());
}

#[test]
fn cgroup_memory_probe_agrees_with_the_stats_api_under_load() {
    if !docker_or_skip("cgroup_memory_probe_agrees…") {
        return;
    }
    let img = images().frameworks["tinyfw"].tag.clone();
    let e = engine();
    let run = test_run("probe");
    rt().block_on(async {
        let guard = RunGuard::new(e.docker().clone(), run.clone());
        let mut s = spec(&run, Role::Server, "spin", &img, &["spin", "20"]);
        s.limits.memory_bytes = Some(256 * MIB);
        s.limits.cpuset = Some("1".into());
        let h = e.start_container(&s).await.unwrap();
        let sampler = e
            .start_sampler(&h, Duration::from_millis(500))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(2500)).await;
        // Memory is steady once the 64 MiB are touched: compare one cgroup
        // read with one stats API read taken right after it.
        let cg = e.read_cgroup(&h).unwrap();
        let api = fairground::probe::stats::read(e.docker(), &h.id)
            .await
            .unwrap();
        let (a, b) = (cg.mem_bytes as f64, api.mem_bytes as f64);
        assert!(a > 64.0 * MIB as f64, "the spinner holds 64 MiB: {cg:?}");
        assert!((a - b).abs() / b < 0.10, "cgroup {a} vs stats API {b}");
        let series = sampler.stop().await;
        assert!(series.samples.len() >= 4, "{series:?}");
        // The host is shared: the spinner gets what CPU 1 can spare, but its
        // CPU time must grow and never go back.
        assert!(series.cpu_usec_delta() > 50_000, "it spins: {series:?}");
        assert!(
            series
                .samples
                .windows(2)
                .all(|w| w[1].cpu_usec >= w[0].cpu_usec),
            "{series:?}"
        );
        assert_eq!(series.stopped_by, None);
        guard.finish().await.unwrap();
    });
}

#[test]
fn internal_network_has_no_route_out() {
    if !docker_or_skip("internal_network_has_no_route_out") {
        return;
    }
    let img = images().frameworks["tinyfw"].tag.clone();
    let e = engine();
    let run = test_run("net");
    rt().block_on(async {
        let guard = RunGuard::new(e.docker().clone(), run.clone());
        let net = e.create_network(&run).await.unwrap();
        let inspect = e
            .docker()
            .inspect_network(
                &net.id,
                None::<bollard::query_parameters::InspectNetworkOptions>,
            )
            .await
            .unwrap();
        assert_eq!(inspect.internal, Some(true));
        assert_eq!(inspect.labels.unwrap()["fairground.run"], run.0);
        let mut s = spec(
            &run,
            Role::Probe,
            "route",
            &img,
            &["cat", "/proc/net/route"],
        );
        s.network = Some(net.name.clone());
        let out = e
            .run_to_exit(&s, Duration::from_secs(30), None)
            .await
            .unwrap();
        let routes: Vec<&str> = out.stdout.lines().skip(1).collect();
        assert!(
            !routes.is_empty(),
            "the container has its subnet route: {}",
            out.stdout
        );
        let default: Vec<&&str> = routes
            .iter()
            .filter(|l| l.split_whitespace().nth(1) == Some("00000000"))
            .collect();
        if !default.is_empty() {
            // Docker before 25.0 still gives internal networks a default
            // route via the bridge (moby#46603 removed it); egress is then
            // dropped on the host by the isolation rule for this bridge.
            // Check that rule instead of sending anything anywhere.
            let bridge = format!("br-{}", &net.id[..12]);
            let rules = std::process::Command::new("iptables")
                .args(["-S", "DOCKER-ISOLATION-STAGE-1"])
                .output()
                .expect("iptables (to check the isolation rule of a pre-25 daemon)");
            let rules = String::from_utf8_lossy(&rules.stdout);
            let drop_out = format!("! -d {} -i {bridge} -j DROP", net.subnet);
            assert!(
                rules.lines().any(|l| l.contains(&drop_out)),
                "default route {default:?} and no `{drop_out}` rule in\n{rules}"
            );
        }
        guard.finish().await.unwrap();
    });
    assert!(leftovers(&run).is_empty());
}

#[test]
fn dropping_the_guard_removes_the_runs_containers_and_network() {
    if !docker_or_skip("dropping_the_guard…") {
        return;
    }
    let img = images().frameworks["tinyfw"].tag.clone();
    let e = engine();
    let run = test_run("drop");
    let guard = rt().block_on(async {
        let guard = RunGuard::new(e.docker().clone(), run.clone());
        let net = e.create_network(&run).await.unwrap();
        let mut s = spec(&run, Role::Server, "srv", &img, &["serve", "8080"]);
        s.network = Some(net.name);
        e.start_container(&s).await.unwrap();
        guard
    });
    assert_eq!(leftovers(&run).len(), 2, "{:?}", leftovers(&run));
    // As on an error path: the guard goes out of scope without finish().
    drop(guard);
    assert!(leftovers(&run).is_empty(), "{:?}", leftovers(&run));
}

#[test]
fn clean_with_run_id_removes_only_that_runs_objects() {
    if !docker_or_skip("clean_with_run_id…") {
        return;
    }
    let img = images().frameworks["tinyfw"].tag.clone();
    let e = engine();
    let doomed = test_run("clean-a");
    let kept = test_run("clean-b");
    rt().block_on(async {
        for run in [&doomed, &kept] {
            let net = e.create_network(run).await.unwrap();
            let mut s = spec(run, Role::Server, "srv", &img, &["serve", "8080"]);
            s.network = Some(net.name);
            e.start_container(&s).await.unwrap();
        }
    });
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fairground"))
        .args(["clean", "--run", &doomed.0])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("removed 1 container(s), 1 network(s)"),
        "{stdout}"
    );
    assert!(leftovers(&doomed).is_empty());
    assert_eq!(leftovers(&kept).len(), 2);
    rt().block_on(fairground::docker::cleanup::clean(
        e.docker(),
        Some(&kept),
        false,
    ))
    .unwrap();
    assert!(leftovers(&kept).is_empty());
}

/// Env var that turns this test binary into the child of the SIGTERM test.
const SIGTERM_CHILD: &str = "FAIRGROUND_TEST_SIGTERM_CHILD";

/// The child: guard a run, create its network and a server, say READY, wait
/// (bounded) to be terminated.
fn sigterm_child(run: RunId) {
    let img = images().frameworks["tinyfw"].tag.clone();
    let e = engine();
    rt().block_on(async {
        let _guard = RunGuard::new(e.docker().clone(), run.clone());
        let net = e.create_network(&run).await.unwrap();
        let mut s = spec(&run, Role::Server, "srv", &img, &["serve", "8080"]);
        s.network = Some(net.name);
        e.start_container(&s).await.unwrap();
        println!("READY");
        tokio::time::sleep(Duration::from_secs(60)).await;
    });
    panic!("the child was not terminated within 60 s");
}

#[test]
fn sigterm_removes_the_runs_objects_and_exits_130() {
    if let Ok(run) = std::env::var(SIGTERM_CHILD) {
        return sigterm_child(RunId(run));
    }
    if !docker_or_skip("sigterm_removes_the_runs_objects…") {
        return;
    }
    use std::io::BufRead;
    let run = test_run("sigterm");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "sigterm_removes_the_runs_objects_and_exits_130",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SIGTERM_CHILD, &run.0)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let ready = std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|l| l.contains("READY"));
    assert!(ready, "the child never got ready");
    assert_eq!(leftovers(&run).len(), 2, "{:?}", leftovers(&run));
    // SAFETY: plain kill(2) on the child we spawned.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert!(leftovers(&run).is_empty(), "{:?}", leftovers(&run));
}
