//! The in-memory [`Engine`]: scripted answers and a record of every call,
//! so the run pipeline and the lab can be tested without a daemon
//! (hyperfine's Executor/MockExecutor idea). Compiled for tests only; the
//! real engine is tested against the real daemon in tests/docker_*.rs.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use super::cleanup::CleanupReport;
use super::container::{AppliedLimits, ContainerSpec, ExitState, Role};
use super::engine::{
    BuiltImages, ContainerOutput, Engine, FrameworkImage, Handle, LineSink, Readiness, ReadyCheck,
};
use super::images::{self, ImageInfo};
use super::network::NetworkInfo;
use super::{DockerError, RunId};
use crate::framework::Framework;
use crate::probe::{CgroupReading, PeakWatch, Sampler, SamplerSource};

/// Scripted behaviour of the [`FakeEngine`].
#[derive(Debug, Clone)]
pub struct FakeScript {
    /// Cold start reported by `wait_ready`, ms; `None` makes the server never ready.
    pub cold_start_ms: Option<i64>,
    /// What loaders print on stdout.
    pub loader_stdout: String,
    /// What loaders print on stderr (their progress lines).
    pub loader_stderr: String,
    /// Exit code of loaders.
    pub loader_exit: i64,
    /// Whether servers are reported OOM-killed by `exit_state`.
    pub server_oom: bool,
    /// Readings the sampler serves, one per period.
    pub samples: Vec<CgroupReading>,
    /// CPUs `host_cpus` reports.
    pub host_cpus: usize,
    /// When set, `ensure_framework_image` fails with this message.
    pub image_build_error: Option<String>,
}

impl Default for FakeScript {
    fn default() -> Self {
        Self {
            cold_start_ms: Some(50),
            loader_stdout: "{}".into(),
            loader_stderr: String::new(),
            loader_exit: 0,
            server_oom: false,
            samples: vec![CgroupReading::default()],
            host_cpus: 4,
            image_build_error: None,
        }
    }
}

/// An in-memory [`Engine`] that records every call, for pipeline tests.
#[derive(Debug, Default)]
pub struct FakeEngine {
    /// Scripted answers.
    pub script: FakeScript,
    state: Mutex<FakeState>,
}

#[derive(Debug, Default)]
struct FakeState {
    /// Live containers: id -> (spec, run).
    containers: BTreeMap<String, ContainerSpec>,
    /// Live networks: name -> run.
    networks: BTreeMap<String, RunId>,
    /// Every call, in order (`start server fg-x-server`, `cleanup fg-x` …).
    calls: Vec<String>,
    /// The command of every container run to its exit, in order.
    commands: Vec<Vec<String>>,
    next: u32,
}

impl FakeEngine {
    /// A fake with the given script.
    pub fn new(script: FakeScript) -> Self {
        Self {
            script,
            state: Mutex::default(),
        }
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<String> {
        self.state.lock().unwrap().calls.clone()
    }

    /// The command of every container run to its exit and every exec
    /// (loaders, probes).
    pub fn commands(&self) -> Vec<Vec<String>> {
        self.state.lock().unwrap().commands.clone()
    }

    /// Names of containers and networks still present.
    pub fn leftovers(&self) -> Vec<String> {
        let st = self.state.lock().unwrap();
        st.containers
            .values()
            .map(|s| s.name.clone())
            .chain(st.networks.keys().cloned())
            .collect()
    }

    fn log(&self, call: String) {
        self.state.lock().unwrap().calls.push(call);
    }

    fn image(kind: images::ImageKind, name: &str) -> ImageInfo {
        ImageInfo {
            kind,
            name: name.into(),
            tag: format!("fake/{name}:000000000000"),
            id: format!("sha256:fake-{name}"),
            size_bytes: Some(1 << 20),
            inputs_hash: "0".repeat(64),
            reused: false,
            versions: Some(format!("{name} 0.0.0\n")),
            app_binary_bytes: (kind == images::ImageKind::Framework).then_some(2 << 20),
        }
    }
}

impl FakeEngine {
    /// The scripted loader's lines, output and exit.
    async fn scripted_loader(
        &self,
        name: &str,
        role: &str,
        stderr_lines: Option<LineSink>,
    ) -> anyhow::Result<ContainerOutput> {
        if let Some(sink) = stderr_lines {
            for line in self.script.loader_stderr.lines() {
                let _ = sink.send(line.to_string());
            }
            // Like a real container, exit after the lines were printed:
            // whoever reads them gets to run first.
            tokio::task::yield_now().await;
        }
        let state = ExitState {
            exit_code: Some(self.script.loader_exit),
            ..Default::default()
        };
        if state.crashed() {
            return Err(DockerError::ContainerFailed {
                container: name.to_string(),
                role: role.into(),
                why: state.describe(),
                tail: self.script.loader_stdout.clone(),
            }
            .into());
        }
        Ok(ContainerOutput {
            exit_code: self.script.loader_exit,
            stdout: self.script.loader_stdout.clone(),
            stderr: self.script.loader_stderr.clone(),
            state,
        })
    }
}

impl Engine for FakeEngine {
    async fn ensure_images(
        &self,
        frameworks: &[Framework],
        database: bool,
    ) -> anyhow::Result<BuiltImages> {
        self.log(format!("ensure_images {}", frameworks.len()));
        Ok(BuiltImages {
            fairground: Self::image(images::ImageKind::Fairground, "fairground"),
            bases: Vec::new(),
            frameworks: frameworks
                .iter()
                .map(|f| {
                    (
                        f.name().to_string(),
                        Self::image(images::ImageKind::Framework, f.name()),
                    )
                })
                .collect(),
            database: database.then(|| Self::image(images::ImageKind::Base, "postgres")),
        })
    }

    async fn ensure_framework_image(&self, fw: &Framework) -> anyhow::Result<FrameworkImage> {
        self.log(format!("ensure_framework_image {}", fw.name()));
        if let Some(e) = &self.script.image_build_error {
            anyhow::bail!("framework {}: {e}", fw.name());
        }
        Ok(FrameworkImage {
            image: Self::image(images::ImageKind::Framework, fw.name()),
            base: None,
        })
    }

    async fn host_cpus(&self) -> anyhow::Result<Vec<usize>> {
        Ok((0..self.script.host_cpus).collect())
    }

    async fn create_network(&self, run: &RunId) -> anyhow::Result<NetworkInfo> {
        let name = format!("{}-net", run.name_prefix());
        self.log(format!("create_network {name}"));
        self.state
            .lock()
            .unwrap()
            .networks
            .insert(name.clone(), run.clone());
        Ok(NetworkInfo {
            name: name.clone(),
            id: format!("fake-{name}"),
            subnet: "10.213.0.0/24".into(),
            internal: true,
        })
    }

    async fn start_container(&self, spec: &ContainerSpec) -> anyhow::Result<Handle> {
        self.log(format!("start {} {}", spec.role.as_str(), spec.name));
        let mut st = self.state.lock().unwrap();
        st.next += 1;
        let n = st.next;
        let id = format!("fake{n:04}");
        st.containers.insert(id.clone(), spec.clone());
        Ok(Handle {
            id,
            name: spec.name.clone(),
            role: spec.role,
            network: spec.network.clone(),
            ip: spec.network.as_ref().map(|_| format!("10.213.0.{}", n + 1)),
            pid: Some(10_000 + n),
            started_at: Some("2026-01-01T00:00:00Z".into()),
            published_port: spec.publish.map(|_| 32_768 + n as u16),
            companion: None,
        })
    }

    async fn inspect_limits(&self, h: &Handle) -> anyhow::Result<AppliedLimits> {
        let st = self.state.lock().unwrap();
        let spec = st
            .containers
            .get(&h.id)
            .ok_or_else(|| anyhow::anyhow!("fake: no container {}", h.name))?;
        let l = &spec.limits;
        Ok(AppliedLimits {
            cpuset: l.cpuset.clone(),
            cpus: l.cpus,
            memory_bytes: l.memory_bytes,
            memory_swap_bytes: l.memory_bytes.map(|m| m as i64),
            nofile_soft: l.nofile,
            nofile_hard: l.nofile,
            sysctls: spec.sysctls.0.clone(),
            read_only_rootfs: spec.read_only_rootfs,
            cap_drop: vec!["ALL".into()],
            security_opt: vec!["no-new-privileges:true".into()],
        })
    }

    async fn wait_ready(&self, server: &Handle, check: &ReadyCheck) -> anyhow::Result<Readiness> {
        self.log(format!("wait_ready {}", server.name));
        let url = format!(
            "http://{}:{}{}",
            server.ip.clone().unwrap_or_default(),
            check.port,
            check.path
        );
        match self.script.cold_start_ms {
            Some(ms) => Ok(Readiness {
                url,
                first_200_unix_ms: 1_767_225_600_000 + ms as u64,
                attempts: 3,
                cold_start_ms: Some(ms),
                cold_start_is_upper_bound: false,
            }),
            None => Err(DockerError::NotReady {
                container: server.name.clone(),
                url,
                timeout_s: check.timeout.as_secs(),
                probe: "fake: never ready".into(),
                tail: String::new(),
            }
            .into()),
        }
    }

    async fn run_to_exit(
        &self,
        spec: &ContainerSpec,
        _timeout: Duration,
        stderr_lines: Option<LineSink>,
    ) -> anyhow::Result<ContainerOutput> {
        self.log(format!("run {} {}", spec.role.as_str(), spec.name));
        self.state.lock().unwrap().commands.push(spec.cmd.clone());
        self.scripted_loader(&spec.name, spec.role.as_str(), stderr_lines)
            .await
    }

    async fn exec_to_exit(
        &self,
        h: &Handle,
        cmd: &[String],
        _timeout: Duration,
        stderr_lines: Option<LineSink>,
    ) -> anyhow::Result<ContainerOutput> {
        self.log(format!(
            "exec {} {}",
            h.name,
            cmd.first().cloned().unwrap_or_default()
        ));
        self.state.lock().unwrap().commands.push(cmd.to_vec());
        self.scripted_loader(&h.name, h.role.as_str(), stderr_lines)
            .await
    }

    async fn start_sampler(&self, h: &Handle, every: Duration) -> anyhow::Result<Sampler> {
        self.log(format!("sample {}", h.name));
        Ok(Sampler::start(
            SamplerSource::Scripted(self.script.samples.clone()),
            every,
        ))
    }

    async fn peak_watch(&self, h: &Handle) -> anyhow::Result<Option<PeakWatch>> {
        self.log(format!("peak_watch {}", h.name));
        Ok(None)
    }

    async fn exit_state(&self, h: &Handle) -> anyhow::Result<ExitState> {
        let running = self.state.lock().unwrap().containers.contains_key(&h.id);
        Ok(if self.script.server_oom {
            ExitState {
                running: false,
                exit_code: Some(137),
                oom_killed: true,
                ..Default::default()
            }
        } else {
            ExitState {
                running,
                exit_code: (!running).then_some(0),
                ..Default::default()
            }
        })
    }

    async fn logs_tail(&self, h: &Handle, _lines: usize) -> anyhow::Result<String> {
        Ok(format!("fake log of {}\n", h.name))
    }

    async fn remove(&self, h: &Handle) -> anyhow::Result<()> {
        self.log(format!("remove {}", h.name));
        self.state.lock().unwrap().containers.remove(&h.id);
        Ok(())
    }

    async fn cleanup(&self, run: &RunId) -> anyhow::Result<CleanupReport> {
        self.log(format!("cleanup {run}"));
        let mut st = self.state.lock().unwrap();
        let mut report = CleanupReport::default();
        let ids: Vec<String> = st
            .containers
            .iter()
            .filter(|(_, s)| &s.run == run)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            if let Some(s) = st.containers.remove(&id) {
                report.containers.push(s.name);
            }
        }
        let nets: Vec<String> = st
            .networks
            .iter()
            .filter(|(_, r)| *r == run)
            .map(|(n, _)| n.clone())
            .collect();
        for n in nets {
            st.networks.remove(&n);
            report.networks.push(n);
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A miniature pipeline written only against the trait, as the run
    /// pipeline will be.
    async fn mini_run<E: Engine>(engine: &E, run: &RunId) -> anyhow::Result<(Readiness, String)> {
        let net = engine.create_network(run).await?;
        let cpus = engine.host_cpus().await?;
        let (server_set, loader_set) = (cpus[cpus.len() - 1], cpus[cpus.len() - 2]);
        let mut server = ContainerSpec::new(run, Role::Server, "srv", "fw");
        server.network = Some(net.name.clone());
        server.limits.cpuset = Some(server_set.to_string());
        let h = engine.start_container(&server).await?;
        let ready = engine
            .wait_ready(
                &h,
                &ReadyCheck {
                    port: 8080,
                    path: "/".into(),
                    timeout: Duration::from_secs(1),
                },
            )
            .await?;
        let sampler = engine.start_sampler(&h, Duration::from_millis(5)).await?;
        let mut loader = ContainerSpec::new(run, Role::Loader, "load", "fairground");
        loader.network = Some(net.name);
        loader.limits.cpuset = Some(loader_set.to_string());
        let out = engine
            .run_to_exit(&loader, Duration::from_secs(5), None)
            .await?;
        let _series = sampler.stop().await;
        Ok((ready, out.stdout))
    }

    #[tokio::test]
    async fn fake_engine_runs_a_pipeline_and_cleanup_leaves_nothing() {
        let fake = FakeEngine::new(FakeScript {
            loader_stdout: "{\"ok\":true}".into(),
            ..Default::default()
        });
        let run = RunId("fg-fake".into());
        let (ready, stdout) = mini_run(&fake, &run).await.unwrap();
        assert_eq!(ready.cold_start_ms, Some(50));
        assert_eq!(stdout, "{\"ok\":true}");
        assert!(!fake.leftovers().is_empty());
        let report = fake.cleanup(&run).await.unwrap();
        assert_eq!(report.containers, vec!["srv"]);
        assert!(fake.leftovers().is_empty());
        assert_eq!(fake.calls().last().unwrap(), "cleanup fg-fake");
    }

    #[tokio::test]
    async fn fake_engine_reports_failing_loader_and_unready_server_as_errors() {
        let fake = FakeEngine::new(FakeScript {
            loader_exit: 3,
            ..Default::default()
        });
        let err = mini_run(&fake, &RunId("fg-a".into())).await.unwrap_err();
        assert!(format!("{err:#}").contains("exited with code 3"), "{err:#}");
        let fake = FakeEngine::new(FakeScript {
            cold_start_ms: None,
            ..Default::default()
        });
        let err = mini_run(&fake, &RunId("fg-b".into())).await.unwrap_err();
        assert!(format!("{err:#}").contains("did not answer 200"), "{err:#}");
    }
}
