//! Preflight: fixture hosts judged through the library API (each asserts the
//! verdict and the reason), and the real binary on this real machine
//! (structure and exit-code semantics only: the machine is shared and busy).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use fairground::preflight::{
    self, CheckResult, CheckStatus, DockerFacts, EnvReport, MeasuredFacts, NamespaceSysctls,
    PreflightInput, SysctlNamespace,
};

fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/preflight")
        .join(name)
}

fn facts(name: &str) -> (PathBuf, MeasuredFacts, DockerFacts) {
    let dir = fixture_dir(name);
    let read = |f: &str| {
        std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{name}/{f}: {e}"))
    };
    let probes = serde_json::from_str(&read("probe.json")).expect("probe.json");
    let docker = serde_json::from_str(&read("docker.json")).expect("docker.json");
    (dir.join("root"), probes, docker)
}

fn judge_with(name: &str, input: &PreflightInput) -> EnvReport {
    let (root, probes, docker) = facts(name);
    preflight::judge(input, &root, probes, docker)
}

fn judge(name: &str) -> EnvReport {
    judge_with(name, &PreflightInput::default())
}

#[track_caller]
fn check<'a>(r: &'a EnvReport, id: &str) -> &'a CheckResult {
    r.check(id)
        .unwrap_or_else(|| panic!("no check {id} in {:?}", r.checks))
}

#[track_caller]
fn assert_check(r: &EnvReport, id: &str, verdict: CheckStatus, reason: &str) {
    let c = check(r, id);
    assert_eq!(c.verdict, verdict, "{id}: {c:?}");
    assert!(
        c.measured.contains(reason),
        "{id}: {:?} lacks {reason:?}",
        c.measured
    );
}

#[track_caller]
fn assert_only_failures(r: &EnvReport, ids: &[&str]) {
    let failed: Vec<&str> = r.failures().map(|c| c.id.as_str()).collect();
    assert_eq!(failed, ids, "{}", r.table());
}

fn pinned(server: &str, loader: &str) -> PreflightInput {
    PreflightInput {
        server_cpuset: Some(server.into()),
        loader_cpuset: Some(loader.into()),
        ..PreflightInput::default()
    }
}

// ---- virtualization and NIC -------------------------------------------------

#[test]
fn bare_metal_with_server_and_loader_on_separate_physical_cores_passes() {
    // cpu0/cpu2 and cpu1/cpu3 are SMT siblings.
    let r = judge_with("bare-metal", &pinned("0,2", "1,3"));
    assert_eq!(r.verdict, CheckStatus::Pass, "{}", r.table());
    assert_check(&r, "virt.kind", CheckStatus::Pass, "bare metal");
    assert_check(&r, "virt.cost", CheckStatus::Pass, "CPUID 0.04 µs");
    // e1000e on bare metal is Intel's driver for a real NIC, not an emulation.
    assert_check(
        &r,
        "nic.driver",
        CheckStatus::Pass,
        "eno1: e1000e, eth0: igb",
    );
    assert_check(
        &r,
        "cpu.governor",
        CheckStatus::Pass,
        "performance on every CPU",
    );
    assert_check(&r, "cpu.boost", CheckStatus::Pass, "turbo off");
    assert_eq!(r.host.platform, "bare metal");
    assert_eq!(r.host.cores_online, Some(4));
}

#[test]
fn bare_metal_warns_when_server_and_loader_are_sibling_threads_of_one_core() {
    let r = judge_with("bare-metal", &pinned("0,1", "2,3"));
    assert_check(
        &r,
        "cpu.smt",
        CheckStatus::Warn,
        "share the core of threads 0,2",
    );
    assert_check(
        &r,
        "cpu.cores",
        CheckStatus::Pass,
        "server cpuset 0,1; loader cpuset 2,3",
    );
}

#[test]
fn server_and_loader_sharing_cores_fail_unless_allowed() {
    let r = judge_with("bare-metal", &pinned("0-2", "2-3"));
    assert_check(&r, "cpu.cores", CheckStatus::Fail, "shared CPUs 2");
    assert_only_failures(&r, &["cpu.cores"]);
    let allowed = PreflightInput {
        allow_shared_cores: true,
        ..pinned("0-2", "2-3")
    };
    let r = judge_with("bare-metal", &allowed);
    assert_check(&r, "cpu.cores", CheckStatus::Warn, "shared CPUs 2");
}

#[test]
fn cpu_counts_beyond_the_cores_online_fail() {
    let input = PreflightInput {
        server_cpus: Some(3.0),
        loader_cpus: Some(2.0),
        ..PreflightInput::default()
    };
    let r = judge_with("kvm-virtio", &input);
    assert_check(
        &r,
        "cpu.cores",
        CheckStatus::Fail,
        "server 3 + loader 2 = 5 CPUs",
    );
    let r = judge_with("kvm-virtio", &pinned("0-1", "7"));
    assert_check(
        &r,
        "cpu.cores",
        CheckStatus::Fail,
        "loader names offline CPUs 7",
    );
}

#[test]
fn kvm_with_virtio_passes_and_names_kvm_on_qemu() {
    let r = judge("kvm-virtio");
    assert_eq!(r.verdict, CheckStatus::Pass, "{}", r.table());
    assert_check(
        &r,
        "virt.kind",
        CheckStatus::Pass,
        "VM: KVM (QEMU Standard PC (Q35 + ICH9, 2009))",
    );
    assert_check(&r, "nic.driver", CheckStatus::Pass, "eth0: virtio_net");
    assert_check(&r, "cpu.clocksource", CheckStatus::Pass, "kvm-clock");
    assert_check(&r, "cpu.governor", CheckStatus::Pass, "not exposed");
}

#[test]
fn virtualbox_remote_run_over_an_emulated_e1000_fails() {
    let input = PreflightInput {
        remote_loader: true,
        ..PreflightInput::default()
    };
    let r = judge_with("virtualbox-e1000", &input);
    assert_check(
        &r,
        "nic.driver",
        CheckStatus::Fail,
        "eth0: e1000 (emulated), carries the run's traffic",
    );
    assert!(
        r.host.traffic_path.contains("crosses eth0"),
        "{}",
        r.host.traffic_path
    );
    // VirtualBox on a Hyper-V host: the slow path the Hical write-up hit.
    assert_check(
        &r,
        "virt.kind",
        CheckStatus::Warn,
        "VM: VirtualBox (VirtualBox)",
    );
    assert_check(
        &r,
        "virt.cost",
        CheckStatus::Fail,
        "CPUID 12.80 µs per exit",
    );
    assert_only_failures(&r, &["virt.cost", "nic.driver"]);
}

#[test]
fn virtualbox_e1000_only_warns_when_the_run_stays_on_the_docker_bridge() {
    let r = judge("virtualbox-e1000");
    assert_check(
        &r,
        "nic.driver",
        CheckStatus::Warn,
        "eth0: e1000 (emulated); local",
    );
}

#[test]
fn hyper_v_guest_is_named_and_passes() {
    let r = judge("hyperv");
    assert_eq!(r.verdict, CheckStatus::Pass, "{}", r.table());
    assert_check(
        &r,
        "virt.kind",
        CheckStatus::Pass,
        "VM: Microsoft Hyper-V (Hyper-V Virtual Machine)",
    );
    assert_check(&r, "nic.driver", CheckStatus::Pass, "eth0: hv_netvsc");
    assert_check(
        &r,
        "cpu.clocksource",
        CheckStatus::Pass,
        "hyperv_clocksource_tsc_page",
    );
}

#[test]
fn qemu_without_acceleration_is_refused() {
    let r = judge("qemu-tcg");
    assert_check(
        &r,
        "virt.kind",
        CheckStatus::Fail,
        "QEMU TCG (no acceleration)",
    );
    assert_only_failures(&r, &["virt.kind"]);
    // Without the TCG signature, a QEMU machine that shows no accelerator is still TCG.
    let (root, mut probes, docker) = facts("qemu-tcg");
    probes.cpuid.as_mut().unwrap().signature = String::new();
    let r = preflight::judge(&PreflightInput::default(), &root, probes, docker);
    assert_check(&r, "virt.kind", CheckStatus::Fail, "QEMU TCG");
}

#[test]
fn firecracker_is_named_a_microvm_on_virtio_mmio_and_its_stray_dockerenv_is_ignored() {
    let r = judge("firecracker");
    assert_eq!(r.verdict, CheckStatus::Pass, "{}", r.table());
    assert_check(
        &r,
        "virt.kind",
        CheckStatus::Pass,
        "VM: Firecracker-style microVM (KVM, no DMI, virtio on virtio_mmio)",
    );
    assert_check(
        &r,
        "virt.kind",
        CheckStatus::Pass,
        "/.dockerenv present but / is ext4",
    );
    assert_check(
        &r,
        "virt.cost",
        CheckStatus::Pass,
        "CPUID 1.30 µs per exit, getppid 0.28 µs",
    );
}

#[test]
fn a_container_is_detected_from_dockerenv_on_an_overlay_root() {
    let r = judge("container");
    assert_check(
        &r,
        "virt.kind",
        CheckStatus::Warn,
        "container (docker) on VM: KVM",
    );
    assert_check(
        &r,
        "virt.kind",
        CheckStatus::Warn,
        "/.dockerenv present and / is overlay",
    );
}

#[test]
fn exit_cost_between_the_thresholds_warns() {
    let (root, mut probes, docker) = facts("kvm-virtio");
    probes.exit_cost.as_mut().unwrap().cpuid_ns = 5_000.0;
    let r = preflight::judge(&PreflightInput::default(), &root, probes, docker);
    assert_check(&r, "virt.cost", CheckStatus::Warn, "CPUID 5.00 µs");
}

// ---- cgroups and Docker -------------------------------------------------------

#[test]
fn cgroup_v1_host_without_memory_controller_is_refused_for_unenforced_limits() {
    let r = judge("cgroup-v1");
    assert_check(
        &r,
        "cgroup.version",
        CheckStatus::Pass,
        "v1; v1: blkio,cpu,cpuacct",
    );
    assert_check(
        &r,
        "cgroup.controllers",
        CheckStatus::Warn,
        "missing: memory",
    );
    assert_check(
        &r,
        "docker.limits",
        CheckStatus::Fail,
        "MemoryLimit false, SwapLimit false",
    );
    assert_check(
        &r,
        "docker.limits",
        CheckStatus::Fail,
        "No memory limit support",
    );
    // soft 1024 is short of 1,000 connections + headroom; hard 4096 is not.
    assert_check(
        &r,
        "limits.nofile",
        CheckStatus::Warn,
        "soft 1024, hard 4096",
    );
    assert_only_failures(&r, &["docker.limits"]);
}

#[test]
fn cgroup_v2_host_passes_with_v2_controllers() {
    let r = judge("cgroup-v2");
    assert_eq!(r.verdict, CheckStatus::Pass, "{}", r.table());
    assert_check(
        &r,
        "cgroup.version",
        CheckStatus::Pass,
        "v2; cgroup2 at /sys/fs/cgroup: cpu,",
    );
    assert_check(
        &r,
        "cgroup.controllers",
        CheckStatus::Pass,
        "memory (v2), cpu (v2)",
    );
    assert_eq!(r.host.cgroup, "v2");
}

#[test]
fn cgroup_hybrid_host_reads_controllers_from_v1() {
    let r = judge("cgroup-hybrid");
    assert_eq!(r.verdict, CheckStatus::Pass, "{}", r.table());
    assert_check(&r, "cgroup.version", CheckStatus::Pass, "hybrid");
    assert_check(
        &r,
        "cgroup.version",
        CheckStatus::Pass,
        "cgroup2 at /sys/fs/cgroup/unified: hugetlb",
    );
    assert_check(
        &r,
        "cgroup.controllers",
        CheckStatus::Pass,
        "memory (v1), cpu (v1), cpuacct (v1)",
    );
}

#[test]
fn leftover_containers_of_other_runs_fail_but_the_current_runs_do_not() {
    let input = PreflightInput {
        run_id: Some("run-now".into()),
        load_per_core_limit: 5.0,
        ..PreflightInput::default()
    };
    let r = judge_with("loaded", &input);
    let c = check(&r, "docker.leftovers");
    assert_eq!(c.verdict, CheckStatus::Fail);
    assert!(
        c.measured.contains("1 running: fg-old-server"),
        "{}",
        c.measured
    );
    assert!(!c.measured.contains("fg-current-loader"), "{}", c.measured);
    assert_check(
        &r,
        "docker.others",
        CheckStatus::Warn,
        "1 running: postgres",
    );
}

#[test]
fn an_unreachable_daemon_fails_and_the_container_checks_say_why() {
    let (root, probes, _) = facts("kvm-virtio");
    let docker = DockerFacts::unreachable("connection refused (/var/run/docker.sock)");
    let r = preflight::judge(&PreflightInput::default(), &root, probes, docker);
    assert_check(&r, "docker.daemon", CheckStatus::Fail, "connection refused");
    assert_check(
        &r,
        "docker.leftovers",
        CheckStatus::Warn,
        "daemon not reachable",
    );
    assert_only_failures(&r, &["docker.daemon"]);
}

// ---- load, memory, limits ---------------------------------------------------

#[test]
fn loaded_host_is_refused_and_the_busy_processes_are_named() {
    let r = judge("loaded");
    // Busy now is what refuses; the (lagging) average only warns beside it.
    assert_check(
        &r,
        "load.now",
        CheckStatus::Fail,
        "96% of all CPU time busy with other work (machine 96%, fairground 0%)",
    );
    assert_check(
        &r,
        "load.avg",
        CheckStatus::Warn,
        "9.04 on 4 cores = 2.26 per core",
    );
    assert_check(
        &r,
        "load.steal",
        CheckStatus::Fail,
        "steal 12.5%, iowait 14.0%",
    );
    assert_check(
        &r,
        "load.busy",
        CheckStatus::Warn,
        "cc1plus (pid 31001) 99%",
    );
    // A higher limit per core, as a profile may set, admits the same load.
    let lenient = PreflightInput {
        load_per_core_limit: 3.0,
        ..PreflightInput::default()
    };
    assert_check(
        &judge_with("loaded", &lenient),
        "load.avg",
        CheckStatus::Pass,
        "2.26 per core",
    );
}

#[test]
fn a_lagging_average_on_a_machine_idle_now_warns_and_does_not_refuse() {
    // Right after a compile: the average is high, nothing else runs now,
    // and what is busy is fairground itself.
    let (root, mut probes, docker) = facts("loaded");
    let sample = probes.sample.as_mut().unwrap();
    sample.busy_pct = 30.0;
    sample.own_busy_pct = 26.0;
    sample.top.clear();
    let r = preflight::judge(
        &PreflightInput::default(),
        &root,
        probes.clone(),
        docker.clone(),
    );
    assert_check(
        &r,
        "load.now",
        CheckStatus::Pass,
        "4% of all CPU time busy with other work (machine 30%, fairground 26%)",
    );
    assert_check(&r, "load.avg", CheckStatus::Warn, "2.26 per core");
    // Nothing sampled: the average is all there is, and it judges.
    probes.sample = None;
    let r = preflight::judge(&PreflightInput::default(), &root, probes, docker);
    assert_check(&r, "load.now", CheckStatus::Warn, "not sampled");
    assert_check(&r, "load.avg", CheckStatus::Fail, "2.26 per core");
}

#[test]
fn memory_limits_beyond_what_is_available_fail() {
    const GIB: u64 = 1 << 30;
    for (total, verdict) in [
        (8 * GIB, CheckStatus::Pass),
        (26 * GIB, CheckStatus::Warn),
        (40 * GIB, CheckStatus::Fail),
    ] {
        let input = PreflightInput {
            memory_limits_total: Some(total),
            ..PreflightInput::default()
        };
        let r = judge_with("kvm-virtio", &input);
        assert_check(&r, "mem.available", verdict, "of MemAvailable 30.0 GiB");
    }
    assert_check(
        &judge("kvm-virtio"),
        "mem.swap",
        CheckStatus::Pass,
        "swap off",
    );
    assert_check(
        &judge("kvm-virtio"),
        "mem.thp",
        CheckStatus::Pass,
        "enabled=madvise",
    );
}

#[test]
fn network_limits_follow_the_highest_concurrency_and_name_the_host_namespace() {
    let input = PreflightInput {
        max_concurrency: 10_000,
        ..PreflightInput::default()
    };
    let r = judge_with("kvm-virtio", &input);
    assert_check(
        &r,
        "limits.somaxconn",
        CheckStatus::Warn,
        "4096 (host netns)",
    );
    assert_check(
        &r,
        "limits.syn_backlog",
        CheckStatus::Warn,
        "4096 (host netns)",
    );
    assert_check(
        &r,
        "limits.port_range",
        CheckStatus::Pass,
        "32768-60999, 28232 ports (host netns)",
    );
    assert_check(&r, "limits.nofile", CheckStatus::Pass, "soft 1048576");
    let r = judge_with(
        "kvm-virtio",
        &PreflightInput {
            max_concurrency: 40_000,
            ..PreflightInput::default()
        },
    );
    assert_check(&r, "limits.port_range", CheckStatus::Fail, "28232 ports");
}

#[test]
fn container_side_sysctls_are_judged_and_named_by_container() {
    let input = PreflightInput {
        max_concurrency: 10_000,
        container_sysctls: Some(NamespaceSysctls {
            namespace: SysctlNamespace::Container("fg-loader".into()),
            values: fairground::host::Sysctls::of(&[
                ("net.core.somaxconn", "65535"),
                ("net.ipv4.tcp_max_syn_backlog", "65535"),
                ("net.ipv4.ip_local_port_range", "60000 60999"),
                ("net.ipv4.tcp_tw_reuse", "0"),
            ]),
        }),
        ..PreflightInput::default()
    };
    let r = judge_with("kvm-virtio", &input);
    assert_check(
        &r,
        "limits.port_range",
        CheckStatus::Fail,
        "1000 ports (netns of container fg-loader)",
    );
    assert_check(
        &r,
        "limits.somaxconn",
        CheckStatus::Pass,
        "65535 (netns of container fg-loader)",
    );
    assert_check(
        &r,
        "limits.tw_reuse",
        CheckStatus::Warn,
        "0, off (netns of container fg-loader)",
    );
}

#[test]
fn too_few_file_descriptors_for_the_concurrency_fail() {
    let (root, mut probes, docker) = facts("kvm-virtio");
    probes.nofile = Some(preflight::measure::NofileLimit {
        soft: 1024,
        hard: 1024,
    });
    let input = PreflightInput {
        max_concurrency: 10_000,
        ..PreflightInput::default()
    };
    let r = preflight::judge(&input, &root, probes, docker);
    assert_check(
        &r,
        "limits.nofile",
        CheckStatus::Fail,
        "soft 1024, hard 1024",
    );
    assert!(check(&r, "limits.nofile")
        .threshold
        .contains("soft ≥ 10256"));
}

#[test]
fn after_run_warns_only_when_the_load_rose_beyond_the_runs_own_cpus() {
    let input = PreflightInput {
        server_cpus: Some(1.0),
        loader_cpus: Some(1.0),
        ..PreflightInput::default()
    };
    let r = judge_with("kvm-virtio", &input);
    // Before 0.12; the run's 2 CPUs and 0.5 per core on 4 cores allow 4.12.
    let ok = preflight::load::judge_after_run(&r, None, Some(3.9));
    assert_eq!(ok.verdict, CheckStatus::Pass, "{ok:?}");
    let rose = preflight::load::judge_after_run(&r, None, Some(6.5));
    assert_eq!(rose.verdict, CheckStatus::Warn, "{rose:?}");
    assert!(
        rose.measured.contains("0.12 before, 6.50 after"),
        "{}",
        rose.measured
    );
    assert!(rose.threshold.contains("≤ 4.12"), "{}", rose.threshold);
    // Images the run built between rounds left a load of 3.0: the rise is
    // judged from there (3.0 + 2 + 2 = 7.0), and the reading says so.
    let built = preflight::load::judge_after_run(&r, Some(3.0), Some(6.5));
    assert_eq!(built.verdict, CheckStatus::Pass, "{built:?}");
    assert!(
        built
            .measured
            .contains("0.12 before (3.00 after the run's image builds), 6.50 after"),
        "{}",
        built.measured
    );
    assert!(built.threshold.contains("≤ 7.00"), "{}", built.threshold);
    // A build load below the load before changes nothing.
    let low = preflight::load::judge_after_run(&r, Some(0.05), Some(6.5));
    assert_eq!(low.verdict, CheckStatus::Warn, "{low:?}");
    assert!(low.threshold.contains("≤ 4.12"), "{}", low.threshold);
    // The library entry point reads the report's root again.
    let again = preflight::after_run(&r, None);
    assert_eq!(
        (again.id.as_str(), again.verdict),
        ("load.after", CheckStatus::Pass)
    );
}

// ---- report shape -----------------------------------------------------------

#[test]
fn report_round_trips_through_json_and_summarises_as_markdown() {
    let r = judge_with("loaded", &pinned("0-1", "2-3"));
    let json = serde_json::to_string(&r).unwrap();
    let back: EnvReport = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    let md = r.summary();
    assert!(md.starts_with("Environment: **FAIL**"), "{md}");
    let rows = md.lines().filter(|l| l.starts_with("| `")).count();
    assert_eq!(rows, r.checks.len());
    assert!(
        md.contains("| `load.now` | FAIL | 96% of all CPU time"),
        "{md}"
    );
    assert!(md.contains("| `load.avg` | warn | 9.04 on 4 cores"), "{md}");
    assert!(md.contains("Amazon EC2 m5.xlarge"), "{md}");
}

// ---- the real binary on this machine ----------------------------------------

fn fairground(args: &[&str]) -> (i32, String, String, Duration) {
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_fairground"))
        .args(args)
        .output()
        .expect("run fairground");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        t.elapsed(),
    )
}

#[test]
fn live_preflight_json_has_a_verdict_measurement_and_remedy_for_every_check() {
    let (code, stdout, stderr, took) = fairground(&["preflight", "--json"]);
    let r: EnvReport =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    let ids: Vec<String> = preflight::all_checks()
        .iter()
        .map(|c| c.id().to_string())
        .collect();
    assert_eq!(
        r.checks.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
        ids
    );
    for c in &r.checks {
        for (field, v) in [
            ("measured", &c.measured),
            ("threshold", &c.threshold),
            ("why", &c.why),
            ("remedy", &c.remedy),
        ] {
            assert!(!v.trim().is_empty(), "{}: empty {field}", c.id);
        }
    }
    assert_eq!(r.verdict, r.checks.iter().map(|c| c.verdict).max().unwrap());
    let refused = r.verdict == CheckStatus::Fail;
    assert_eq!(
        code,
        if refused { 3 } else { 0 },
        "verdict {} but exit {code}",
        r.verdict
    );
    assert!(r.probes.sample.is_some(), "the 1-second load sample ran");
    assert!(took < Duration::from_secs(5), "preflight took {took:?}");
    if std::env::var("CI").as_deref() == Ok("true") {
        assert_eq!(
            check(&r, "docker.daemon").verdict,
            CheckStatus::Pass,
            "CI needs the Docker daemon"
        );
    } else if !r.docker.reachable {
        eprintln!("WARNING: Docker daemon not reachable; the live Docker checks only said so");
    }
}

#[test]
fn live_preflight_table_lists_every_check_and_exits_by_its_verdict() {
    let (code, stdout, stderr, _) = fairground(&["preflight"]);
    assert!(stdout.starts_with("VERDICT CHECK"), "{stdout}{stderr}");
    for c in preflight::all_checks() {
        assert!(
            stdout
                .lines()
                .any(|l| l.split_whitespace().nth(1) == Some(c.id())),
            "no row for {}",
            c.id()
        );
    }
    let failed = stdout.lines().any(|l| l.starts_with("FAIL "));
    assert_eq!(code, if failed { 3 } else { 0 }, "{stdout}");
    assert!(stdout.contains(if failed {
        "environment: FAIL"
    } else {
        "environment: "
    }));
}

#[test]
fn preflight_on_a_loaded_fixture_root_exits_3_and_names_the_load() {
    let root = fixture_dir("loaded").join("root");
    let (code, stdout, _, _) = fairground(&["preflight", "--root", root.to_str().unwrap()]);
    assert_eq!(code, 3, "{stdout}");
    assert!(stdout.contains("FAIL    load.avg"), "{stdout}");
    assert!(
        stdout.contains("9.04 on 4 cores = 2.26 per core"),
        "{stdout}"
    );
}

#[test]
fn preflight_with_a_missing_root_is_bad_input() {
    let (code, _, stderr, _) = fairground(&["preflight", "--root", "/no/such/root"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--root /no/such/root: not a directory"),
        "{stderr}"
    );
}

#[test]
fn net_sysctls_prints_this_namespaces_values_as_json() {
    let (code, stdout, stderr, _) = fairground(&["preflight", "--net-sysctls"]);
    assert_eq!(code, 0, "{stderr}");
    let s = NamespaceSysctls::from_container_output(&stdout, "self").unwrap();
    assert!(
        s.values.int("net.core.somaxconn").is_some() && s.values.port_range().is_some(),
        "{s:?}"
    );
}

// ---- profiles -----------------------------------------------------------------

fn shipped_profile(name: &str, cores: usize) -> fairground::profile::Profile {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("profiles/{name}.yaml"));
    let host = fairground::profile::HostFacts::with_cores(cores);
    fairground::profile::load_file_with(&path, &host).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn a_profile_maps_to_its_concurrency_cores_memory_and_requested_sysctls() {
    let host = fairground::profile::HostFacts::with_cores(4);
    let p = shipped_profile("highconc", 4);
    let input = PreflightInput::from_profile(&p, &host);
    assert_eq!(input.max_concurrency, u64::from(p.max_concurrency()));
    assert_eq!(input.max_concurrency, 10_000);
    let (server, loader) = (
        input.server_cpuset.clone().unwrap(),
        input.loader_cpuset.clone().unwrap(),
    );
    assert_ne!(server, loader);
    assert_eq!(
        input.memory_limits_total,
        Some(p.server.memory + p.loader.memory)
    );
    assert!(!input.remote_loader);
    // Judged on a host whose own netns is untuned: the profile's requested
    // container values are what count, and they are labelled as requested.
    let r = judge_with("kvm-virtio", &input);
    assert_check(
        &r,
        "limits.somaxconn",
        CheckStatus::Pass,
        "65535 (requested for the containers by profile highconc",
    );
    assert_check(
        &r,
        "limits.port_range",
        CheckStatus::Pass,
        "64512 ports (requested",
    );
    assert_check(
        &r,
        "cpu.cores",
        CheckStatus::Pass,
        &format!("server cpuset {server}; loader cpuset {loader}"),
    );
}

#[test]
fn a_profile_whose_cores_cannot_be_placed_is_refused_by_cpu_cores() {
    let mut p = shipped_profile("highconc", 4);
    p.server.cpus = 3.0;
    p.loader.cpus = 2.0;
    let input = PreflightInput::from_profile(&p, &fairground::profile::HostFacts::with_cores(4));
    assert_eq!(
        (
            input.server_cpuset.as_deref(),
            input.loader_cpuset.as_deref()
        ),
        (None, None)
    );
    let r = judge_with("kvm-virtio", &input);
    assert_check(
        &r,
        "cpu.cores",
        CheckStatus::Fail,
        "server 3 + loader 2 = 5 CPUs",
    );
}

#[test]
fn preflight_with_a_profile_judges_against_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_fairground"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["preflight", "--profile", "highconc", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r: EnvReport =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(r.input.max_concurrency, 10_000);
    assert!(
        stderr.contains("preflight for profile highconc"),
        "{stderr}"
    );
    assert!(check(&r, "limits.nofile")
        .threshold
        .contains("soft ≥ 10256"));
}

#[test]
fn preflight_with_an_unknown_profile_is_bad_input() {
    let out = Command::new(env!("CARGO_BIN_EXE_fairground"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["preflight", "--profile", "highconk"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("highconk"), "{stderr}");
}

#[test]
fn firecracker_summary_snapshot() {
    // The Markdown section results.md embeds: host line, platform, one row per check.
    let r = judge_with("firecracker", &pinned("0", "1"));
    insta::assert_snapshot!(r.summary());
}

#[test]
fn an_absent_docker_socket_fails_the_daemon_check_and_exits_3() {
    let out = Command::new(env!("CARGO_BIN_EXE_fairground"))
        .args(["preflight", "--json"])
        .env("DOCKER_HOST", "unix:///nonexistent/fairground-test.sock")
        .output()
        .unwrap();
    let r: EnvReport = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(out.status.code(), Some(3));
    assert_check(
        &r,
        "docker.daemon",
        CheckStatus::Fail,
        "daemon not reachable",
    );
    assert_check(
        &r,
        "docker.leftovers",
        CheckStatus::Warn,
        "daemon not reachable",
    );
}

#[test]
fn a_daemon_that_never_answers_is_given_up_on_within_the_time_budget() {
    // A socket that accepts and then says nothing: the Docker query must time
    // out and the whole preflight still finish in under 5 seconds.
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("silent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop_seen = stop.clone();
    let held = std::thread::spawn(move || {
        // Hold accepted connections open, unanswered, until told to stop
        // (bounded: never longer than 10 s).
        let mut conns = Vec::new();
        let until = Instant::now() + Duration::from_secs(10);
        while !stop_seen.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < until {
            if let Ok((c, _)) = listener.accept() {
                conns.push(c);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_fairground"))
        .args(["preflight", "--json"])
        .env("DOCKER_HOST", format!("unix://{}", sock.display()))
        .output()
        .unwrap();
    let took = t.elapsed();
    let r: EnvReport = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_check(
        &r,
        "docker.daemon",
        CheckStatus::Fail,
        "no answer within 2500 ms",
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    held.join().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_may_be_called_from_inside_a_tokio_runtime() {
    // The run pipeline is async: preflight must not try to start a runtime on
    // a thread that already has one.
    let input = PreflightInput {
        run_id: Some("preflight-test".into()),
        ..PreflightInput::default()
    };
    let r = tokio::task::spawn_blocking(move || preflight::run(&input, Path::new("/")))
        .await
        .unwrap();
    assert_eq!(r.checks.len(), preflight::all_checks().len());
    let direct = preflight::run(&PreflightInput::default(), Path::new("/"));
    assert_eq!(direct.input, PreflightInput::default());
    assert_eq!(preflight::after_run(&direct, None).id, "load.after");
}

#[test]
fn max_load_per_core_sets_the_load_limit_and_rejects_nonsense() {
    let root = fixture_dir("loaded").join("root");
    let root = root.to_str().unwrap();
    let (_, stdout, _, _) = fairground(&[
        "preflight",
        "--root",
        root,
        "--max-load-per-core",
        "3",
        "--json",
    ]);
    let r: EnvReport = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r.input.load_per_core_limit, 3.0);
    assert_check(&r, "load.avg", CheckStatus::Pass, "2.26 per core");
    let (code, _, stderr, _) = fairground(&["preflight", "--max-load-per-core", "-1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--max-load-per-core -1"), "{stderr}");
}

#[test]
fn container_nofile_above_the_daemons_own_limit_fails_before_any_container_starts() {
    // kvm-virtio's dockerd (pid file + /proc/PID/limits) runs with nofile
    // 20000, as on this project's machines.
    let want = |n| PreflightInput {
        container_nofile: Some(n),
        load_per_core_limit: 100.0,
        ..PreflightInput::default()
    };
    let r = judge_with("kvm-virtio", &want(65_536));
    assert_check(&r, "limits.daemon_nofile", CheckStatus::Fail, "hard 20000");
    assert!(check(&r, "limits.daemon_nofile")
        .threshold
        .contains("65536"));
    let r = judge_with("kvm-virtio", &want(16_384));
    assert_check(&r, "limits.daemon_nofile", CheckStatus::Pass, "hard 20000");
    // Without a pid file (a remote daemon) it cannot be read: said, not guessed.
    let r = judge_with("bare-metal", &want(16_384));
    assert_check(
        &r,
        "limits.daemon_nofile",
        CheckStatus::Warn,
        "not readable",
    );
}
