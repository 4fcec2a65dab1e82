//! The run spec: the profile, the host's placement and the images resolved
//! once into what every container of the run gets — a [`ServerSpec`] per
//! framework and a [`LoaderSpec`] per round — plus the timing rules the
//! executor applies (warm-up, settle).
//!
//! This is the only place the profile's container settings are read: the
//! lab runs specs and never sees the profile. It starts nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use super::CellKey;
use crate::contract::{self, Protocol};
use crate::framework::Framework;
use crate::host::{CoreList, Sysctls};
use crate::profile::{Limits, Placement, Profile, Warmup};
use crate::roles::load::args::LoadArgs;

/// The image tags a run's containers use: fairground's own (loader,
/// prober) and each framework's, by name (the engine's `BuiltImages::tags`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImageTags {
    /// fairground's own image.
    pub fairground: String,
    /// Framework images by framework name.
    pub frameworks: BTreeMap<String, String>,
    /// The database image, when a framework declares a database scenario.
    pub database: Option<String>,
}

/// The resources asked for one container: cores, CPU quota, memory, open
/// files.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Resources {
    /// CPUs the container may run on (Docker cpuset syntax, e.g. `0`, `1-3`).
    pub cpuset: Option<String>,
    /// CPU quota in CPUs (becomes `NanoCpus`), e.g. `1.5`.
    pub cpus: Option<f64>,
    /// Memory limit, bytes. Swap is always off: `MemorySwap` = `Memory`.
    pub memory_bytes: Option<u64>,
    /// Open files limit (soft = hard).
    pub nofile: Option<u64>,
}

impl Resources {
    /// The CPUs `threads` threads can use in this container: the quota,
    /// else the cpuset's cores, else this host's, and never more than the
    /// threads (a thread runs on one core at a time). A container without
    /// a CPU limit is judged against the cores its threads can run on, not
    /// against one CPU.
    pub fn usable_cpus(&self, threads: usize) -> f64 {
        let threads = threads.max(1) as f64;
        if let Some(q) = self.cpus {
            return q.min(threads);
        }
        let cores = self
            .cpus_allotted()
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        (cores as f64).min(threads)
    }

    /// CPUs allotted: the quota rounded up, capped by the cpuset size; the
    /// value of `FAIRGROUND_CPUS` so servers size their worker pools by it.
    pub fn cpus_allotted(&self) -> Option<usize> {
        let from_set = self
            .cpuset
            .as_deref()
            .and_then(|s| s.parse::<CoreList>().ok())
            .map(|c| c.len());
        let from_quota = self.cpus.map(|c| c.ceil().max(1.0) as usize);
        match (from_set, from_quota) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A file fairground puts into a container before it starts, in a
/// directory of its own (an anonymous volume labelled with the run, so a
/// read-only root and a remote daemon both take it; it goes with the
/// container).
#[derive(Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SeededFile {
    /// Directory in the container (the volume's mount point).
    pub dir: String,
    /// File name in it.
    pub name: String,
    /// Contents (never serialized: a key is among them).
    #[serde(skip)]
    pub contents: Vec<u8>,
}

impl std::fmt::Debug for SeededFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{} ({} bytes)",
            self.dir,
            self.name,
            self.contents.len()
        )
    }
}

/// The name the run's server certificate carries and the loader checks it
/// against: loaders dial the container's address, which changes with every
/// start, so the certificate names the server by this instead (sent as SNI).
pub const TLS_SERVER_NAME: &str = "server.fairground.internal";

/// A framework's server, as a run resolved it from the profile and the
/// framework's manifest: everything needed to start it and know it is up.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServerSpec {
    /// Framework name.
    pub framework: String,
    /// Image tag.
    pub image: String,
    /// Cores, CPU quota, memory, open files.
    pub resources: Resources,
    /// Network sysctls of its namespace.
    pub sysctls: Sysctls,
    /// Environment from the manifest.
    pub env: BTreeMap<String, String>,
    /// Root filesystem mounted read-only.
    pub read_only_rootfs: bool,
    /// Port it listens on inside its container.
    pub port: u16,
    /// Path that answers 200 once it is ready.
    pub readiness_path: String,
    /// Longest wait for that 200.
    pub readiness_timeout: std::time::Duration,
    /// The protocols the run speaks to it (`http1` first); the ports of
    /// the others are in [`contract`].
    #[serde(default = "http1_only")]
    pub protocols: Vec<Protocol>,
    /// Files it gets before it starts: the run's certificate chain and key
    /// when it serves a TLS protocol (never serialized).
    #[serde(skip)]
    pub files: Vec<SeededFile>,
    /// The database started (fresh, seeded) before it, when the run has a
    /// database scenario of it; its address reaches the server as
    /// [`contract::db::env`].
    #[serde(default)]
    pub database: Option<DatabaseSpec>,
}

/// The PostgreSQL container of a framework's database scenarios: one per
/// framework, seeded fresh before its first cell and removed after its
/// last, so no framework reads another's updates, caches or statement
/// counts.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DatabaseSpec {
    /// Image tag (base `postgres`).
    pub image: String,
    /// Cores, CPU quota, memory, open files.
    pub resources: Resources,
    /// `shared_buffers`, bytes.
    pub shared_buffers: u64,
    /// `max_connections`.
    pub max_connections: u32,
    /// `synchronous_commit` on.
    pub synchronous_commit: bool,
    /// Connections the framework's pool opens (`FAIRGROUND_DB_POOL`).
    pub pool: u32,
    /// Longest wait for it to be seeded and accept connections.
    pub readiness_timeout: std::time::Duration,
    /// What it shares its cores with, for results (`the server`).
    pub shares_cores_with: Option<String>,
}

fn http1_only() -> Vec<Protocol> {
    vec![Protocol::Http1]
}

impl ServerSpec {
    /// The server of framework `fw` from `image`: port, readiness path,
    /// environment and read-only root from its manifest.
    pub fn of_framework(
        fw: &crate::framework::Framework,
        image: &str,
        resources: Resources,
        sysctls: Sysctls,
        readiness_timeout: std::time::Duration,
    ) -> ServerSpec {
        ServerSpec {
            framework: fw.name().to_string(),
            image: image.to_string(),
            resources,
            sysctls,
            env: fw.manifest.env.clone(),
            read_only_rootfs: fw.manifest.read_only_rootfs,
            port: fw.manifest.port,
            readiness_path: fw.manifest.readiness.clone(),
            readiness_timeout,
            protocols: http1_only(),
            files: Vec::new(),
            database: None,
        }
    }

    /// The same server spoken to in `protocols` as well as `http1`: the
    /// environment tells it the ports ([`contract::H2C_PORT_ENV`],
    /// [`contract::TLS_PORT_ENV`]) and where the certificate and key are
    /// ([`contract::TLS_CERT_ENV`], [`contract::TLS_KEY_ENV`]), and `certs`
    /// (needed when a protocol is TLS) become files in
    /// [`contract::TLS_DIR`].
    pub fn speaking(
        mut self,
        protocols: &[Protocol],
        certs: Option<&crate::tls::RunCerts>,
    ) -> anyhow::Result<ServerSpec> {
        self.protocols = http1_only();
        self.protocols
            .extend(protocols.iter().filter(|p| **p != Protocol::Http1));
        if self.protocols.contains(&Protocol::H2c) {
            self.env.insert(
                contract::H2C_PORT_ENV.into(),
                contract::H2C_PORT.to_string(),
            );
        }
        if self.protocols.iter().any(|p| p.is_tls()) {
            let certs = certs.ok_or_else(|| {
                anyhow::anyhow!(
                    "{} is spoken to over TLS but the run has no certificate",
                    self.framework
                )
            })?;
            let dir = contract::TLS_DIR.to_string();
            self.env.insert(
                contract::TLS_PORT_ENV.into(),
                contract::TLS_PORT.to_string(),
            );
            self.env.insert(
                contract::TLS_CERT_ENV.into(),
                format!("{dir}/{}", crate::tls::CHAIN_FILE),
            );
            self.env.insert(
                contract::TLS_KEY_ENV.into(),
                format!("{dir}/{}", crate::tls::KEY_FILE),
            );
            self.files = vec![
                SeededFile {
                    dir: dir.clone(),
                    name: crate::tls::CHAIN_FILE.into(),
                    contents: certs.chain_pem.clone().into_bytes(),
                },
                SeededFile {
                    dir,
                    name: crate::tls::KEY_FILE.into(),
                    contents: certs.key_pem.clone().into_bytes(),
                },
            ];
        }
        Ok(self)
    }

    /// The same server with `database` started before it.
    pub fn with_database(mut self, database: Option<DatabaseSpec>) -> ServerSpec {
        self.database = database;
        self
    }

    /// The port `protocol` is served on inside the container.
    pub fn port_of(&self, protocol: Protocol) -> u16 {
        match protocol {
            Protocol::Http1 => self.port,
            Protocol::Https | Protocol::H2 => contract::TLS_PORT,
            Protocol::H2c => contract::H2C_PORT,
        }
    }
}

/// One loader run: fairground's image running `fairground load` with
/// `args` (the target URL is filled in when the server's address is known).
#[derive(Debug, Clone, PartialEq)]
pub struct LoaderSpec {
    /// What this run is, for its container's name and for messages
    /// (`axum-json-c100-r2`, `axum-json-c100-r2-warm3`).
    pub label: String,
    /// fairground's own image.
    pub image: String,
    /// Cores, CPU quota, memory, open files.
    pub resources: Resources,
    /// Network sysctls of its namespace.
    pub sysctls: Sysctls,
    /// The loader's arguments.
    pub args: crate::roles::load::args::LoadArgs,
    /// Longest the container may run before it is killed.
    pub time_limit: std::time::Duration,
    /// Files its container gets before it starts: the run's CA when a
    /// protocol is TLS.
    pub files: Vec<SeededFile>,
}

/// Time a loader container may take on top of its warm-up, window, drain
/// and connect timeout: container start and writing the report.
const LOADER_SLACK: Duration = Duration::from_secs(60);

/// Everything a run's containers get, resolved once.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The server of each framework, by name.
    servers: BTreeMap<String, ServerSpec>,
    /// The loader of every round, aimed nowhere yet (no URL, scenario,
    /// connection count or rate).
    loader: LoaderSpec,
    /// Measured window.
    pub duration: Duration,
    /// Idle wait after a server start before its idle memory is read.
    pub idle_settle: Duration,
    /// The run's CA and server certificate, when a protocol is TLS.
    certs: Option<crate::tls::RunCerts>,
    /// Concurrent streams per HTTP/2 connection.
    streams: u32,
}

impl RunSpec {
    /// Resolve `profile` for `frameworks` on the cores of `placement`,
    /// with the images `images` holds.
    pub fn resolve(
        profile: &Profile,
        placement: &Placement,
        frameworks: &[Framework],
        images: &ImageTags,
    ) -> anyhow::Result<RunSpec> {
        let spoken = |fw: &Framework| -> Vec<Protocol> {
            profile
                .protocol
                .iter()
                .copied()
                .filter(|p| fw.serves(*p))
                .collect()
        };
        // One CA and server certificate for the run, made only when some
        // framework is spoken to over TLS.
        let certs = if frameworks
            .iter()
            .any(|fw| spoken(fw).iter().any(|p| p.is_tls()))
        {
            Some(crate::tls::RunCerts::make(&[TLS_SERVER_NAME.to_string()])?)
        } else {
            None
        };
        // A database for each framework that runs a database scenario.
        let database_for = |fw: &Framework| -> anyhow::Result<Option<DatabaseSpec>> {
            if !profile
                .scenarios
                .iter()
                .any(|s| s.needs_database() && fw.supports(*s))
            {
                return Ok(None);
            }
            let image = images.database.clone().ok_or_else(|| {
                anyhow::anyhow!(
                    "framework `{}` runs a database scenario but no database image was built",
                    fw.name()
                )
            })?;
            let db = &profile.database;
            let (cpuset, shares) = match &db.limits.cpuset {
                crate::profile::Cpuset::Auto => {
                    (placement.server.to_string(), Some("the server".to_string()))
                }
                crate::profile::Cpuset::Cores(c) => {
                    let shares = if c.0.iter().any(|x| placement.server.0.contains(x)) {
                        Some("the server".to_string())
                    } else if c.0.iter().any(|x| placement.loader.0.contains(x)) {
                        Some("the loader".to_string())
                    } else {
                        None
                    };
                    (c.to_string(), shares)
                }
            };
            Ok(Some(DatabaseSpec {
                image,
                resources: resources(&db.limits, &cpuset),
                shared_buffers: db.shared_buffers,
                max_connections: db.max_connections,
                synchronous_commit: db.synchronous_commit,
                pool: db.pool,
                readiness_timeout: profile.readiness_timeout,
                shares_cores_with: shares,
            }))
        };
        let mut servers = BTreeMap::new();
        for fw in frameworks {
            let tag = images.frameworks.get(fw.name()).ok_or_else(|| {
                anyhow::anyhow!("no image was built for framework `{}`", fw.name())
            })?;
            servers.insert(
                fw.name().to_string(),
                ServerSpec::of_framework(
                    fw,
                    tag,
                    resources(&profile.server, &placement.server.to_string()),
                    profile.server.sysctls.clone(),
                    profile.readiness_timeout,
                )
                .speaking(&spoken(fw), certs.as_ref())?
                .with_database(database_for(fw)?),
            );
        }
        let mut args = LoadArgs::new("");
        args.threads = Some(profile.load.threads as usize);
        args.pipeline = profile.load.pipeline as usize;
        args.timeout = profile.load.timeout;
        args.json = true;
        args.progress = true;
        // The warm-up runs on the connections the window then measures; an
        // until-stable one ends as soon as it is stable (the loader decides).
        args.warmup = profile.warmup.max();
        if let Warmup::UntilStable { window, max_cv, .. } = profile.warmup {
            args.warmup_until_stable = Some(window);
            args.stable_cv = Some(max_cv);
        }
        let loader = LoaderSpec {
            label: String::new(),
            image: images.fairground.clone(),
            resources: resources(&profile.loader, &placement.loader.to_string()),
            sysctls: profile.loader.sysctls.clone(),
            args,
            time_limit: Duration::ZERO,
            files: certs
                .iter()
                .map(|c| SeededFile {
                    dir: contract::TLS_DIR.into(),
                    name: crate::tls::CA_FILE.into(),
                    contents: c.ca_pem.clone().into_bytes(),
                })
                .collect(),
        };
        Ok(RunSpec {
            servers,
            loader,
            duration: profile.duration,
            idle_settle: profile.idle_settle,
            certs,
            streams: profile.load.streams,
        })
    }

    /// The server of `framework`.
    pub fn server(&self, framework: &str) -> anyhow::Result<&ServerSpec> {
        self.servers
            .get(framework)
            .ok_or_else(|| anyhow::anyhow!("framework `{framework}` is not part of this run"))
    }

    /// The run's CA and server certificate, when a protocol is TLS (the
    /// run keeps the CA beside its results).
    pub fn certs(&self) -> Option<&crate::tls::RunCerts> {
        self.certs.as_ref()
    }

    /// The loader for round `round` (0-based) of cell `key` against the
    /// server at `url` (the address of the cell's protocol): its warm-up
    /// (fixed, or until stable) and window on the same connections, then
    /// the drain.
    pub fn loader(&self, key: &CellKey, round: u32, url: &str) -> LoaderSpec {
        let mut l = self.loader.clone();
        l.label = format!("{}-r{round}", key.stem());
        l.args.url = url.to_string();
        l.args.protocol = Some(key.protocol);
        if key.protocol.is_http2() {
            // HTTP/2 keeps requests in flight as streams; pipelining is
            // HTTP/1.1's (the profile's `pipeline` applies to those cells).
            l.args.streams = self.streams as usize;
            l.args.pipeline = 1;
        }
        if key.protocol.is_tls() {
            l.args.tls_ca = Some(format!("{}/{}", contract::TLS_DIR, crate::tls::CA_FILE).into());
            l.args.tls_name = Some(TLS_SERVER_NAME.into());
        }
        l.args.scenario = Some(key.scenario);
        l.args.connections = key.concurrency as usize;
        l.args.rate = key.rate.map(|r| r as f64);
        l.args.duration = self.duration;
        l.time_limit = l.args.connect_timeout
            + l.args.warmup
            + l.args.duration
            + l.args.timeout
            + LOADER_SLACK;
        l
    }

    /// The loader of every round, aimed nowhere yet.
    pub fn loader_template(&self) -> &LoaderSpec {
        &self.loader
    }
}

/// The resources of one container from its profile section, pinned to `cpuset`.
fn resources(limits: &Limits, cpuset: &str) -> Resources {
    Resources {
        cpuset: Some(cpuset.to_string()),
        cpus: Some(limits.cpus),
        memory_bytes: Some(limits.memory),
        nofile: Some(limits.nofile),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::contract::Scenario;
    use crate::profile::{HostFacts, LoadMode};

    /// The rate of a profile's load mode (fixed rate), if any.
    fn rate(profile: &Profile) -> Option<u64> {
        match profile.load.mode {
            LoadMode::Closed => None,
            LoadMode::FixedRate { rate } => Some(rate),
        }
    }

    /// Image tags for `frameworks` as a fake engine would report them.
    pub(crate) fn images(frameworks: &[Framework]) -> ImageTags {
        ImageTags {
            fairground: "fake/fairground:000000000000".into(),
            frameworks: frameworks
                .iter()
                .map(|f| {
                    (
                        f.name().to_string(),
                        format!("fake/{}:000000000000", f.name()),
                    )
                })
                .collect(),
            database: frameworks
                .iter()
                .any(|f| f.declares_database())
                .then(|| "fake/base-postgres:000000000000".into()),
        }
    }

    #[test]
    fn servers_and_loaders_get_the_profiles_limits_on_disjoint_cores() {
        let fw = crate::plan::tests::framework("a", &[Scenario::Plaintext]);
        let mut profile = crate::plan::tests::profile();
        profile.load.mode = LoadMode::FixedRate { rate: 5_000 };
        profile.loader.cpus = 0.5;
        let placement = profile.placement(&HostFacts::with_cores(4)).unwrap();
        let spec = RunSpec::resolve(
            &profile,
            &placement,
            std::slice::from_ref(&fw),
            &images(std::slice::from_ref(&fw)),
        )
        .unwrap();
        let s = spec.server("a").unwrap();
        assert_eq!(s.resources.cpuset.as_deref(), Some("0"));
        assert_eq!(s.resources.nofile, Some(profile.server.nofile));
        assert_eq!(s.sysctls, profile.server.sysctls);
        assert_eq!(s.image, "fake/a:000000000000");
        let key = CellKey {
            framework: "a".into(),
            scenario: Scenario::Json,
            protocol: crate::contract::Protocol::Http1,
            concurrency: 7,
            rate: rate(&profile),
        };
        let l = spec.loader(&key, 1, "http://10.0.0.2:8080");
        assert_eq!(l.label, "a-json-c7-r5000-r1");
        assert_eq!(l.args.warmup_until_stable, None);
        assert_eq!(l.resources.cpuset.as_deref(), Some("1"));
        assert_eq!(l.resources.cpus, Some(0.5));
        assert_eq!(l.args.rate, Some(5_000.0));
        assert_eq!(l.args.connections, 7);
        assert_eq!(l.args.scenario, Some(Scenario::Json));
        assert_eq!(l.args.warmup, profile.warmup.max());
        assert!(l.args.json && l.args.progress);
        assert!(l.time_limit > l.args.warmup + l.args.duration + l.args.timeout);
        assert!(spec.server("b").is_err());
    }

    #[test]
    fn an_until_stable_warm_up_is_the_loaders_to_decide() {
        let fw = crate::plan::tests::framework("a", &[Scenario::Plaintext]);
        let mut profile = crate::plan::tests::profile();
        profile.warmup = Warmup::UntilStable {
            window: Duration::from_millis(500),
            max_cv: 0.05,
            max_duration: Duration::from_secs(20),
        };
        let placement = profile.placement(&HostFacts::with_cores(4)).unwrap();
        let fws = std::slice::from_ref(&fw);
        let spec = RunSpec::resolve(&profile, &placement, fws, &images(fws)).unwrap();
        let key = CellKey {
            framework: "a".into(),
            scenario: Scenario::Plaintext,
            protocol: crate::contract::Protocol::Http1,
            concurrency: 4,
            rate: None,
        };
        let l = spec.loader(&key, 0, "http://10.0.0.2:8080");
        assert_eq!(
            l.args.warmup,
            Duration::from_secs(20),
            "the longest it may take"
        );
        assert_eq!(l.args.warmup_until_stable, Some(Duration::from_millis(500)));
        assert_eq!(l.args.stable_cv, Some(0.05));
    }
}
