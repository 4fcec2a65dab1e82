//! A run across two Docker daemons on this machine: the server on the main
//! daemon, two loaders on a second dockerd this test starts (own socket,
//! data root, exec root, pid file, config file, containerd namespace and
//! pre-created bridge; never `--bridge none`, which deletes docker0) and
//! stops by its pid.
//!
//! The second daemon starts empty and nothing can be pulled, so every
//! image it runs was carried there by fairground. The server is plainfw
//! answering every request 50 ms late: 8 connections make 160 req/s
//! exactly, merged from two loaders or measured by one.
//!
//! Only traffic: the loaders (on the second daemon, host network) to the
//! server's port published on 127.0.0.1 by the main daemon.

mod docker_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use docker_support::*;
use fairground::results::{Results, Status};

/// Answers 50 ms after each request, 8 connections: 160 req/s.
const DELAY_MS: u64 = 50;
const CONNECTIONS: u64 = 8;
const KNOWN_RPS: f64 = CONNECTIONS as f64 * 1000.0 / DELAY_MS as f64;

/// A second dockerd, stopped (by pid) and its bridge and folders removed
/// on drop.
struct SecondDaemon {
    dir: PathBuf,
    bridge: String,
    /// dockerd itself, stopped by its pid.
    child: std::process::Child,
    /// Its TLS listener on 127.0.0.1 (client certificates required).
    tls_port: u16,
}

impl SecondDaemon {
    fn socket(&self) -> PathBuf {
        self.dir.join("d.sock")
    }

    fn url(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    fn docker(&self, args: &[&str]) -> String {
        let o = Command::new("docker")
            .arg("-H")
            .arg(self.url())
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    fn start() -> SecondDaemon {
        let tag = format!("{:04x}", rand::random::<u16>());
        // Short: a unix socket path is limited to 108 bytes.
        let dir = PathBuf::from(format!("/tmp/fgd2-{tag}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("daemon.json"), "{}\n").unwrap();
        let bridge = format!("fgtbr{tag}");
        let ip = |args: &[&str]| {
            let ok = Command::new("ip").args(args).status().unwrap().success();
            assert!(ok, "ip {args:?} failed");
        };
        ip(&["link", "add", &bridge, "type", "bridge"]);
        // A /24 beside the run networks' 10.213/16 and Docker's pools.
        let third = 100 + rand::random::<u8>() % 100;
        ip(&[
            "addr",
            "add",
            &format!("10.198.{third}.1/24"),
            "dev",
            &bridge,
        ]);
        ip(&["link", "set", &bridge, "up"]);
        let tls = make_certs(&dir.join("tls"));
        let tls_port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(dir.join("dockerd.log")).unwrap();
        let child = Command::new("dockerd")
            .arg(format!("--host=unix://{}", dir.join("d.sock").display()))
            .arg(format!("--host=tcp://127.0.0.1:{tls_port}"))
            .arg("--tlsverify")
            .arg(format!("--tlscacert={}", tls.join("ca.pem").display()))
            .arg(format!(
                "--tlscert={}",
                tls.join("server-cert.pem").display()
            ))
            .arg(format!("--tlskey={}", tls.join("server-key.pem").display()))
            .arg(format!("--data-root={}", dir.join("data").display()))
            .arg(format!("--exec-root={}", dir.join("exec").display()))
            .arg(format!("--pidfile={}", dir.join("d.pid").display()))
            .arg(format!(
                "--config-file={}",
                dir.join("daemon.json").display()
            ))
            .arg(format!("--bridge={bridge}"))
            .arg("--iptables=false")
            .arg("--ip-masq=false")
            .arg(format!("--containerd-namespace=fgtest-{tag}"))
            .arg(format!(
                "--containerd-plugins-namespace=fgtest-{tag}-plugins"
            ))
            .arg(format!("--cgroup-parent=/fgtest-{tag}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("dockerd starts");
        let d = SecondDaemon {
            dir,
            bridge,
            child,
            tls_port,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while d
            .docker(&["version", "--format", "{{.Server.Version}}"])
            .is_empty()
        {
            assert!(
                Instant::now() < deadline,
                "the second dockerd did not answer within 60 s: {}",
                std::fs::read_to_string(d.dir.join("dockerd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        d
    }
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate in
/// `dir` (ca.pem, server-cert.pem, server-key.pem, cert.pem, key.pem: the
/// client's files as `DOCKER_CERT_PATH` has them), made with openssl.
fn make_certs(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let run = |args: &[&str]| {
        let o = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl runs");
        assert!(
            o.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let key = |name: &str| {
        run(&[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            name,
        ])
    };
    key("ca-key.pem");
    run(&[
        "req",
        "-new",
        "-x509",
        "-days",
        "2",
        "-key",
        "ca-key.pem",
        "-subj",
        "/CN=fgtest CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        "-out",
        "ca.pem",
    ]);
    for (name, subject, ext) in [
        (
            "server",
            "/CN=127.0.0.1",
            "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        ),
        ("client", "/CN=fairground", "extendedKeyUsage=clientAuth\n"),
    ] {
        let (k, c) = if name == "server" {
            ("server-key.pem", "server-cert.pem")
        } else {
            ("key.pem", "cert.pem")
        };
        key(k);
        run(&[
            "req",
            "-new",
            "-key",
            k,
            "-subj",
            subject,
            "-out",
            &format!("{name}.csr"),
        ]);
        std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
        run(&[
            "x509",
            "-req",
            "-days",
            "2",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-out",
            c,
            "-extfile",
            &format!("{name}.ext"),
        ]);
    }
    dir.to_path_buf()
}

impl Drop for SecondDaemon {
    fn drop(&mut self) {
        // SIGTERM (a clean shutdown unmounts and removes its containers'
        // state), then SIGKILL if it has not exited within 30 s.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while matches!(self.child.try_wait(), Ok(None)) {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .status();
        // dockerd leaves its default network namespace bind-mounted under
        // its exec root; unmount whatever is left under our folder first.
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let prefix = format!("{}/", self.dir.display());
        for target in mounts
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter(|t| t.starts_with(&prefix))
        {
            let _ = Command::new("umount").arg("-l").arg(target).status();
        }
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("could not remove {}: {e}", self.dir.display());
        }
    }
}

fn profile(hosts: Option<&str>) -> String {
    let mut p = format!(
        "description: \"two daemons\"\n\
         frameworks: [delay]\nscenarios: [plaintext]\nconcurrency: [{CONNECTIONS}]\n\
         warmup: 1s\nduration: 5s\nrounds: 2\n\
         load: {{mode: closed, threads: 1, pipeline: 1, timeout: 5s}}\n\
         server: {{cpus: 1, cpuset: auto, memory: 128MiB, swap: false, nofile: 4096}}\n\
         loader: {{cpus: 1, cpuset: auto, memory: 256MiB, swap: false, nofile: 4096}}\n\
         network: bridge\nidle_settle: 1s\nreadiness_timeout: 30s\n\
         thresholds: {{preflight: warn}}\n"
    );
    if let Some(h) = hosts {
        p.push_str(h);
    }
    p
}

fn throughput(r: &Results) -> (f64, f64) {
    let c = &r.cells[0];
    let s = c.summary.as_ref().expect("the cell has a summary");
    (s.throughput_rps.median, s.throughput_rps.cv)
}

#[test]
fn two_loaders_on_a_second_daemon_merge_to_the_known_answer() {
    if !docker_or_skip("two_loaders_on_a_second_daemon_merge_to_the_known_answer") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    plainfw_variant(tmp.path(), "delay", &[("PLAINFW_DELAY_MS", "50")]);
    let d2 = SecondDaemon::start();
    assert_eq!(
        d2.docker(&["images", "-q"]),
        "",
        "the second daemon starts empty"
    );

    // The same daemon twice: once through its socket, once through TCP
    // with TLS client certificates (the second finds the image carried by
    // the first and skips it).
    let hosts = format!(
        "hosts:\n  server: local\n  loaders:\n    - {u}\n    - url: tcp://127.0.0.1:{p}\n      cert_dir: {c}\n  server_address: 127.0.0.1\n",
        u = d2.url(),
        p = d2.tls_port,
        c = d2.dir.join("tls").display()
    );
    let (multi, stderr) = run_profile_in(tmp.path(), &profile(Some(&hosts)));
    eprintln!("{stderr}");
    let topo = multi
        .topology
        .as_ref()
        .expect("results record the topology");
    let tls_endpoint = format!("tcp://127.0.0.1:{} (TLS)", d2.tls_port);
    assert_eq!(topo.loaders, vec![d2.url(), tls_endpoint.clone()]);
    assert!(
        topo.images
            .iter()
            .any(|c| c.endpoint == tls_endpoint && c.skipped),
        "the TLS endpoint found the image already carried: {:?}",
        topo.images
    );
    assert_eq!(topo.traffic_path, "published port");
    let carried: Vec<_> = topo.images.iter().filter(|c| !c.skipped).collect();
    assert!(
        carried
            .iter()
            .any(|c| c.tag.contains("fairground") && c.bytes > 0),
        "fairground's image was carried to the empty daemon: {:?}",
        topo.images
    );
    for c in &carried {
        eprintln!(
            "carried {} to the second daemon: {} bytes in {:.2} s",
            c.tag, c.bytes, c.seconds
        );
    }

    let pre = topo
        .preflight
        .iter()
        .find(|p| p.endpoint == d2.url())
        .expect("preflight ran on the second daemon");
    assert!(
        pre.checks.iter().any(|c| c.id.starts_with("virt.")),
        "the checks ran there: {pre:?}"
    );
    assert!(
        pre.checks.iter().any(|c| c.id == "docker.leftovers"),
        "{pre:?}"
    );
    assert_eq!(
        topo.preflight.len(),
        1,
        "one daemon, reached twice, checked once: {:?}",
        topo.preflight
    );

    let cell = &multi.cells[0];
    // Flagged is allowed: this machine is shared, and a busy host flags.
    assert_ne!(cell.verdict.status, Status::Rejected, "{:?}", cell.verdict);
    for r in &cell.rounds {
        assert_eq!(r.loaders.len(), 2, "each round keeps both loaders' figures");
        let counts: u64 = r.loaders.iter().map(|l| l.latency_count).sum();
        assert_eq!(
            r.latency.count, counts,
            "merged count == sum of the loaders'"
        );
        let ok: u64 = r.loaders.iter().map(|l| l.responses_2xx).sum();
        assert_eq!(r.responses.status_2xx, ok);
        assert_eq!(
            r.connections.established, CONNECTIONS,
            "every connection established"
        );
        for l in &r.loaders {
            assert_eq!(l.connections_established, CONNECTIONS / 2);
            assert!(l.window_start_skew_ms < 500.0, "{l:?}");
        }
    }

    let (single, _) = {
        let dir = tmp.path().join("single");
        std::fs::create_dir_all(&dir).unwrap();
        plainfw_variant(&dir, "delay", &[("PLAINFW_DELAY_MS", "50")]);
        run_profile_in(&dir, &profile(None))
    };
    assert!(single.topology.is_none());
    let (m, m_cv) = throughput(&multi);
    let (s, s_cv) = throughput(&single);
    // The runs' own noise band: three times the rounds' CV, but at least
    // what a perfectly periodic server allows: each connection completes a
    // whole number of 50 ms answers in a 5 s window (±1 of 100: 1 % per
    // run, 2 % between two runs), plus the published port's extra hop
    // (docker-proxy) on the multi-host path, a fraction of a ms per answer.
    let band = (3.0 * m_cv.max(s_cv)).max(0.03);
    eprintln!(
        "known {KNOWN_RPS} req/s; two loaders on the second daemon {m:.2} req/s (CV {m_cv:.4}), \
         one loader on one daemon {s:.2} req/s (CV {s_cv:.4}); band {:.1} %",
        band * 100.0
    );
    for (what, v) in [("merged", m), ("single", s)] {
        assert!(
            (v / KNOWN_RPS - 1.0).abs() < 0.05,
            "{what} throughput {v} is not the known {KNOWN_RPS}"
        );
    }
    assert!(
        (m / s - 1.0).abs() <= band,
        "merged {m} and single {s} differ by more than the noise band {band}"
    );

    // The server's image too, for the figure (the run carried only what
    // the loaders' daemon needed).
    let fw_tag = multi.frameworks[0].image_id.clone().expect("image id");
    let carried_fw = rt().block_on(async {
        let main = fairground::docker::connect().await.unwrap();
        let other = fairground::docker::remote::connect(&fairground::profile::hosts::Endpoint {
            url: d2.url(),
            tls: None,
        })
        .await
        .unwrap();
        fairground::docker::remote::carry_image(
            &main,
            &other,
            &fw_tag,
            "second daemon",
            &|l: &str| eprintln!("{l}"),
        )
        .await
        .unwrap()
    });
    assert!(!carried_fw.skipped && carried_fw.bytes > 0);
    eprintln!(
        "carried the server image {} to the second daemon: {} bytes in {:.2} s",
        fw_tag, carried_fw.bytes, carried_fw.seconds
    );

    assert_eq!(
        d2.docker(&["ps", "-aq", "--filter", "label=fairground.run"]),
        "",
        "no container left on the second daemon"
    );
    assert_eq!(
        d2.docker(&["network", "ls", "-q", "--filter", "label=fairground.run"]),
        "",
        "no network left on the second daemon"
    );
}
