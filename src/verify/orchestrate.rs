//! `fairground verify [NAME…]`: each framework checked in its own container.
//!
//! For every framework: start its server container on the run's internal
//! network (from its manifest), wait until its readiness path answers 200,
//! run `fairground verify --url http://IP:PORT --json --exit-zero` in a
//! fairground container on the same network, read the report back, add the
//! app's lines of code and binary size, and remove the server. The verifier
//! runs inside the network because the network is internal: the host has no
//! route to it, and nothing else may be contacted.
//!
//! Generic over [`Engine`], so the sequence is tested with the fake engine;
//! the real one is exercised against the daemon. It judges nothing itself:
//! the verdicts are the verifier's.

use std::time::Duration;

use anyhow::Context;

use crate::contract::{self, Protocol};
use crate::docker::container::{ContainerSpec, Role};
use crate::docker::engine::{Engine, ReadyCheck};
use crate::docker::images::ImageInfo;
use crate::docker::RunId;
use crate::framework::Framework;
use crate::host::Sysctls;
use crate::plan::spec::{Resources, SeededFile, ServerSpec, TLS_SERVER_NAME};

use super::footprint;
use super::report::{Footprint, VerifyReport};

/// How frameworks are verified in containers.
#[derive(Debug, Clone)]
pub struct OrchestrateOptions {
    /// Per-request timeout handed to the verifier.
    pub timeout: Duration,
    /// Whether pipelining is required.
    pub require_pipelining: bool,
    /// Seed handed to the verifier (None: it draws one).
    pub seed: Option<u64>,
    /// How long a server may take to answer 200 on its readiness path.
    pub ready_timeout: Duration,
}

/// Resources of a server under verification: not a measurement, but the
/// server must see `FAIRGROUND_CPUS` to size its workers as it will in a run.
fn verify_limits() -> Resources {
    Resources {
        cpus: Some(1.0),
        memory_bytes: Some(1024 * 1024 * 1024),
        ..Resources::default()
    }
}

/// Connections a framework under verification pools.
const VERIFY_POOL: u32 = 4;

/// The database of a framework under verification: the profile defaults,
/// unpinned.
fn verify_database(image: &str, ready_timeout: Duration) -> crate::plan::spec::DatabaseSpec {
    let d = crate::profile::Database::default();
    crate::plan::spec::DatabaseSpec {
        image: image.to_string(),
        resources: verify_limits(),
        shared_buffers: d.shared_buffers,
        max_connections: d.max_connections,
        synchronous_commit: d.synchronous_commit,
        pool: VERIFY_POOL,
        readiness_timeout: ready_timeout,
        shares_cores_with: None,
    }
}

/// The verifier's command line inside the fairground image, checking the
/// server at `url` in `protocol` (trusting the CA seeded into the
/// verifier's container when it is TLS).
pub fn verifier_args(
    url: &str,
    protocol: Protocol,
    fw: &Framework,
    opts: &OrchestrateOptions,
) -> Vec<String> {
    // WebSocket runs over an HTTP/1.1 upgrade: its scenarios are verified
    // over http1 and https, not asked of an HTTP/2 connection; gRPC runs
    // over HTTP/2 alone.
    let scenarios: Vec<String> = fw
        .manifest
        .scenarios
        .iter()
        .filter(|s| s.runs_over(protocol))
        .map(|s| s.verified().to_string())
        .collect();
    let mut args = vec![
        "verify".to_string(),
        "--url".into(),
        url.to_string(),
        "--json".into(),
        "--exit-zero".into(),
        "--name".into(),
        fw.name().to_string(),
        "--timeout".into(),
        format!("{}ms", opts.timeout.as_millis()),
        "--scenario".into(),
        scenarios.join(","),
    ];
    if !protocol.is_http1() {
        args.extend(["--protocol".into(), protocol.to_string()]);
    }
    if protocol.is_tls() {
        args.extend([
            "--tls-ca".into(),
            format!("{}/{}", contract::TLS_DIR, crate::tls::CA_FILE),
            "--tls-name".into(),
            TLS_SERVER_NAME.into(),
        ]);
    }
    if opts.require_pipelining {
        args.push("--require-pipelining".into());
    }
    if let Some(seed) = opts.seed {
        args.push("--seed".into());
        args.push(seed.to_string());
    }
    args
}

/// Longest a verifier container may run: every timeout verify can hit, plus
/// room to start. Keeps a wedged container from stalling the command.
fn verifier_bound(fw: &Framework, opts: &OrchestrateOptions) -> Duration {
    let timeouts = 2 * fw.manifest.scenarios.len() as u32 + 3;
    opts.timeout * timeouts + Duration::from_secs(30)
}

/// Verify one framework whose image is `image`, on `network`, with the
/// fairground image (the first of `images`) as verifier and, for database
/// scenarios, a database from the second: one report per protocol
/// the framework declares (http1 first), from one server container.
pub async fn verify_one<E: Engine>(
    engine: &E,
    run: &RunId,
    network: &str,
    images: (&str, Option<&str>),
    fw: &Framework,
    image: &ImageInfo,
    opts: &OrchestrateOptions,
) -> anyhow::Result<Vec<VerifyReport>> {
    let (fairground_image, database_image) = images;
    let protocols = fw.manifest.protocols.clone();
    // A CA and certificate of its own for each framework that serves TLS:
    // what a run would give it (docs/contract.md, "Protocols").
    let certs = if protocols.iter().any(|p| p.is_tls()) {
        Some(crate::tls::RunCerts::make(&[TLS_SERVER_NAME.to_string()])?)
    } else {
        None
    };
    let spec = ServerSpec::of_framework(
        fw,
        &image.tag,
        verify_limits(),
        Sysctls::default(),
        opts.ready_timeout,
    )
    .speaking(&protocols, certs.as_ref())?;
    // A framework with database scenarios gets its own fresh database,
    // as in a run.
    let database = match (fw.declares_database(), database_image) {
        (false, _) => None,
        (true, None) => anyhow::bail!(
            "framework {} declares database scenarios but no database image was built",
            fw.name()
        ),
        (true, Some(tag)) => Some(
            crate::docker::database::start(
                engine,
                run,
                format!("{}-db-{}", run.name_prefix(), fw.name()),
                &verify_database(tag, opts.ready_timeout),
                network,
            )
            .await
            .with_context(|| format!("the database of framework {}", fw.name()))?,
        ),
    };
    let mut container = ContainerSpec::server(
        run,
        format!("{}-server-{}", run.name_prefix(), fw.name()),
        &spec,
        network,
    );
    if let Some(db) = &database {
        for (k, v) in contract::db::env(&db.ip, VERIFY_POOL) {
            container.env.insert(k.to_string(), v);
        }
    }
    let server = match engine.start_container(&container).await {
        Ok(s) => s,
        Err(e) => {
            if let Some(db) = &database {
                let _ = engine.remove(&db.handle).await;
            }
            return Err(e.context(format!(
                "starting the server container of framework {}",
                fw.name()
            )));
        }
    };
    let ctx = Verifier {
        engine,
        run,
        network,
        fairground_image,
        fw,
        server: &server,
        opts,
        certs: certs.as_ref(),
    };
    let mut result = ctx.verify_protocols(&spec).await;
    if let (Some(db), Ok(reports)) = (&database, result.as_mut()) {
        // The database checks run from here (they read the database through
        // the engine), once, on the first protocol's report.
        if let Some(first) = reports.first_mut() {
            let options = crate::verify::VerifyOptions {
                timeout: opts.timeout,
                ..Default::default()
            };
            let access = crate::verify::database::ContainerDatabase::new(engine, &db.handle);
            crate::verify::database::check_report(first, &options, &access).await;
        }
    }
    let removed = engine.remove(&server).await;
    if let Some(db) = &database {
        let _ = engine.remove(&db.handle).await;
    }
    let mut reports = result?;
    removed.with_context(|| format!("removing the server container of framework {}", fw.name()))?;
    let footprint = Footprint {
        lines: footprint::count_dir(&fw.dir)
            .with_context(|| format!("counting lines of code in {}", fw.dir.display()))?,
        // Read from the image when it was built or reused: the size of its
        // one `/app` binary, none for interpreted frameworks.
        binary_bytes: image.app_binary_bytes,
    };
    // The footprint is the framework's, said once (on the http1 report).
    if let Some(first) = reports.first_mut() {
        first.footprint = Some(footprint);
    }
    for report in &mut reports {
        report.declared_limits = fw.manifest.limits.clone();
    }
    Ok(reports)
}

/// What verifying one started server needs.
struct Verifier<'a, E: Engine> {
    engine: &'a E,
    run: &'a RunId,
    network: &'a str,
    fairground_image: &'a str,
    fw: &'a Framework,
    server: &'a crate::docker::engine::Handle,
    opts: &'a OrchestrateOptions,
    certs: Option<&'a crate::tls::RunCerts>,
}

impl<E: Engine> Verifier<'_, E> {
    /// Wait for the server's readiness, then verify each protocol of
    /// `spec` in turn.
    async fn verify_protocols(&self, spec: &ServerSpec) -> anyhow::Result<Vec<VerifyReport>> {
        let fw = self.fw;
        let ip = self.server.ip.clone().unwrap_or_default();
        let url_of = |p: Protocol| {
            let scheme = if p.is_tls() { "https" } else { "http" };
            format!("{scheme}://{ip}:{}", spec.port_of(p))
        };
        let check = ReadyCheck {
            port: fw.manifest.port,
            path: fw.manifest.readiness.clone(),
            timeout: self.opts.ready_timeout,
        };
        if let Err(e) = self.engine.wait_ready(self.server, &check).await {
            return Ok(vec![VerifyReport::not_started(
                fw.name(),
                &url_of(Protocol::Http1),
                &fw.manifest.scenarios,
                format!("{e:#}"),
            )]);
        }
        let mut reports = Vec::new();
        // A protocol that carries none of its scenarios (http1 of a
        // framework that serves gRPC alone: its http1 port answers the
        // readiness probe) has nothing to verify.
        for &protocol in spec
            .protocols
            .iter()
            .filter(|&&p| fw.manifest.scenarios.iter().any(|s| s.runs_over(p)))
        {
            reports.push(self.verify_protocol(protocol, &url_of(protocol)).await?);
        }
        Ok(reports)
    }

    /// Run the verifier container against `url` in `protocol`.
    async fn verify_protocol(&self, protocol: Protocol, url: &str) -> anyhow::Result<VerifyReport> {
        let fw = self.fw;
        let suffix = if protocol.is_http1() {
            String::new()
        } else {
            format!(" over {protocol}")
        };
        let mut spec = ContainerSpec::new(
            self.run,
            Role::Probe,
            format!(
                "{}-verify-{}{}",
                self.run.name_prefix(),
                fw.name(),
                if protocol.is_http1() {
                    String::new()
                } else {
                    format!("-{protocol}")
                }
            ),
            self.fairground_image,
        );
        spec.network = Some(self.network.to_string());
        spec.read_only_rootfs = true;
        spec.cmd = verifier_args(url, protocol, fw, self.opts);
        if let Some(certs) = self.certs.filter(|_| protocol.is_tls()) {
            spec.files = vec![SeededFile {
                dir: contract::TLS_DIR.into(),
                name: crate::tls::CA_FILE.into(),
                contents: certs.ca_pem.clone().into_bytes(),
            }];
        }
        let out = self
            .engine
            .run_to_exit(&spec, verifier_bound(fw, self.opts), None)
            .await
            .with_context(|| {
                format!(
                    "running the verifier for framework {} ({protocol})",
                    fw.name()
                )
            })?;
        serde_json::from_str(&out.stdout).with_context(|| {
            format!(
                "the verifier for framework {}{suffix} printed no report (exit {}); its stderr: {}",
                fw.name(),
                out.exit_code,
                out.stderr.trim()
            )
        })
    }
}

/// Build or reuse the images, create the run network, and verify each
/// framework in turn. The caller removes the run's objects
/// (`engine.cleanup(run)` or a `RunGuard`), whatever this returns.
pub async fn verify_all<E: Engine>(
    engine: &E,
    run: &RunId,
    frameworks: &[Framework],
    opts: &OrchestrateOptions,
) -> anyhow::Result<Vec<VerifyReport>> {
    let database = frameworks.iter().any(|f| f.declares_database());
    let images = engine.ensure_images(frameworks, database).await?;
    let network = engine.create_network(run).await?;
    let mut reports = Vec::new();
    for fw in frameworks {
        let image = images.frameworks.get(fw.name()).with_context(|| {
            format!(
                "no image was built for framework {}; see the build log",
                fw.name()
            )
        })?;
        eprintln!("verifying {} ({}) …", fw.name(), image.tag);
        reports.extend(
            verify_one(
                engine,
                run,
                &network.name,
                (
                    &images.fairground.tag,
                    images.database.as_ref().map(|d| d.tag.as_str()),
                ),
                fw,
                image,
                opts,
            )
            .await?,
        );
    }
    Ok(reports)
}

/// The frameworks named (all of them when `names` is empty), in the order
/// asked; an unknown name is bad input with the names that exist.
pub fn select(all: &[Framework], names: &[String]) -> anyhow::Result<Vec<Framework>> {
    if names.is_empty() {
        return Ok(all.to_vec());
    }
    names
        .iter()
        .map(|name| {
            all.iter()
                .find(|f| f.name() == name)
                .cloned()
                .ok_or_else(|| {
                    let known: Vec<&str> = all.iter().map(Framework::name).collect();
                    let hint = known
                        .iter()
                        .filter(|k| strsim::jaro_winkler(k, name) > 0.8)
                        .map(|k| format!(" (did you mean `{k}`?)"))
                        .next()
                        .unwrap_or_default();
                    anyhow::Error::from(super::VerifyError::UnknownFramework {
                        name: name.clone(),
                        hint,
                        known: if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        },
                    })
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Scenario;
    use crate::docker::fake::{FakeEngine, FakeScript};
    use std::path::Path;

    fn framework(dir: &Path) -> Framework {
        let d = dir.join("demo");
        std::fs::create_dir_all(d.join("src")).unwrap();
        std::fs::write(
            d.join("framework.yaml"),
            "name: demo\nlanguage: rust\nframework: demo\nbase: scratch\n\
             scenarios: [plaintext, param]\nworkers: one\nnotes: test\n",
        )
        .unwrap();
        std::fs::write(d.join("src/main.rs"), "// comment\nfn main() {\n}\n").unwrap();
        crate::framework::load(&d).unwrap()
    }

    fn opts() -> OrchestrateOptions {
        OrchestrateOptions {
            timeout: Duration::from_secs(2),
            require_pipelining: true,
            seed: Some(9),
            ready_timeout: Duration::from_secs(30),
        }
    }

    fn passing_report() -> VerifyReport {
        let mut r = VerifyReport::not_started("demo", "http://10.213.0.1:8080", &[], String::new());
        r.checks.clear();
        r.finish();
        r
    }

    #[tokio::test]
    async fn starts_waits_verifies_in_the_network_and_removes_the_server() {
        let tmp = tempfile::tempdir().unwrap();
        let fw = framework(tmp.path());
        let engine = FakeEngine::new(FakeScript {
            loader_stdout: serde_json::to_string(&passing_report()).unwrap(),
            ..FakeScript::default()
        });
        let run = RunId("fgtest-verify".into());
        let reports = verify_all(&engine, &run, &[fw], &opts()).await.unwrap();
        assert_eq!(reports.len(), 1);
        assert!(reports[0].passed);
        let fp = reports[0].footprint.as_ref().unwrap();
        assert_eq!(fp.lines.total, 2);
        // The size of the image's `/app`, as the engine read it back.
        assert_eq!(fp.binary_bytes, Some(2 << 20));
        let calls = engine.calls();
        let at = |prefix: &str| {
            calls
                .iter()
                .position(|c| c.starts_with(prefix))
                .unwrap_or_else(|| panic!("no `{prefix}` in {calls:?}"))
        };
        assert!(at("start server fgtest-verify-server-demo") < at("wait_ready"));
        assert!(at("wait_ready") < at("run probe fgtest-verify-verify-demo"));
        assert!(at("run probe") < at("remove fgtest-verify-server-demo"));
        engine.cleanup(&run).await.unwrap();
        assert!(engine.leftovers().is_empty(), "{:?}", engine.leftovers());
    }

    #[tokio::test]
    async fn a_server_that_never_gets_ready_is_reported_not_measured() {
        let tmp = tempfile::tempdir().unwrap();
        let fw = framework(tmp.path());
        let engine = FakeEngine::new(FakeScript {
            cold_start_ms: None,
            ..FakeScript::default()
        });
        let run = RunId("fgtest-verify-nr".into());
        let reports = verify_all(&engine, &run, &[fw], &opts()).await.unwrap();
        let r = &reports[0];
        assert!(!r.passed);
        let why = r.excluded(Scenario::Param).unwrap();
        assert!(why.starts_with("start failed: "), "{why}");
        assert!(!engine.calls().iter().any(|c| c.starts_with("run probe")));
        assert!(engine.calls().iter().any(|c| c.starts_with("remove ")));
    }

    #[tokio::test]
    async fn a_verifier_without_a_report_is_an_error_naming_the_framework() {
        let tmp = tempfile::tempdir().unwrap();
        let fw = framework(tmp.path());
        let engine = FakeEngine::new(FakeScript {
            loader_stdout: "not json".into(),
            ..FakeScript::default()
        });
        let run = RunId("fgtest-verify-bad".into());
        let err = verify_all(&engine, &run, &[fw], &opts()).await.unwrap_err();
        assert!(
            format!("{err:#}").contains("the verifier for framework demo printed no report"),
            "{err:#}"
        );
        // The server is removed even when the verifier failed.
        assert!(engine.calls().iter().any(|c| c.starts_with("remove ")));
    }

    #[test]
    fn verifier_args_carry_the_manifest_scenarios_and_options() {
        let tmp = tempfile::tempdir().unwrap();
        let fw = framework(tmp.path());
        let args = verifier_args("http://10.213.0.2:8080", Protocol::Http1, &fw, &opts());
        assert_eq!(
            args.join(" "),
            "verify --url http://10.213.0.2:8080 --json --exit-zero --name demo \
             --timeout 2000ms --scenario plaintext,param --require-pipelining --seed 9"
        );
    }

    #[test]
    fn a_tls_protocol_trusts_the_seeded_ca_under_the_certificates_name() {
        let tmp = tempfile::tempdir().unwrap();
        let fw = framework(tmp.path());
        let args = verifier_args("https://10.213.0.2:8443", Protocol::H2, &fw, &opts());
        let line = args.join(" ");
        assert!(
            line.contains(
                "--protocol h2 --tls-ca /run/fairground/tls/ca.pem \
                 --tls-name server.fairground.internal"
            ),
            "{line}"
        );
        let h2c = verifier_args("http://10.213.0.2:8082", Protocol::H2c, &fw, &opts()).join(" ");
        assert!(
            h2c.contains("--protocol h2c") && !h2c.contains("--tls-ca"),
            "{h2c}"
        );
    }

    #[test]
    fn unknown_framework_names_are_bad_input_with_a_hint() {
        let tmp = tempfile::tempdir().unwrap();
        let fw = framework(tmp.path());
        let err = select(std::slice::from_ref(&fw), &["dem".into()]).unwrap_err();
        assert_eq!(crate::cli::exit_code(&err), crate::exit::ExitCode::BadInput);
        assert_eq!(
            format!("{err:#}"),
            "no framework `dem` (did you mean `demo`?); known: demo"
        );
        assert_eq!(select(std::slice::from_ref(&fw), &[]).unwrap(), vec![fw]);
    }
}
