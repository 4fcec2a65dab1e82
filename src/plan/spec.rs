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
                ),
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
        };
        Ok(RunSpec {
            servers,
            loader,
            duration: profile.duration,
            idle_settle: profile.idle_settle,
        })
    }

    /// The server of `framework`.
    pub fn server(&self, framework: &str) -> anyhow::Result<&ServerSpec> {
        self.servers
            .get(framework)
            .ok_or_else(|| anyhow::anyhow!("framework `{framework}` is not part of this run"))
    }

    /// The loader for round `round` (0-based) of cell `key` against the
    /// server at `url`: its warm-up (fixed, or until stable) and window on
    /// the same connections, then the drain.
    pub fn loader(&self, key: &CellKey, round: u32, url: &str) -> LoaderSpec {
        let mut l = self.loader.clone();
        l.label = format!("{}-r{round}", key.stem());
        l.args.url = url.to_string();
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
