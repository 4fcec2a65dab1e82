//! Commands run inside a running container ([`Engine::exec_to_exit`] on the
//! real daemon): every round's loader is started this way in the run's
//! long-lived loader container, instead of a container created, started,
//! waited for and removed per round (~0.5 s of the daemon's work each).
//!
//! [`Engine::exec_to_exit`]: super::engine::Engine::exec_to_exit

use std::time::Duration;

use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use futures_util::StreamExt;

use super::container::ExitState;
use super::daemon::DockerEngine;
use super::engine::{ContainerOutput, Handle, LineSink};
use super::error::{ApiContext, DockerError};

/// Largest frame of output read at once (a loader's report is one line of
/// JSON that can carry a large histogram).
const OUTPUT_CAPACITY: usize = 8 << 20;

/// Split complete lines off `pending` and send them; false once the sink is
/// gone.
fn send_lines(pending: &mut Vec<u8>, sink: &LineSink) -> bool {
    while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
        let line: Vec<u8> = pending.drain(..=nl).collect();
        if sink
            .send(String::from_utf8_lossy(&line[..nl]).into_owned())
            .is_err()
        {
            return false;
        }
    }
    true
}

impl DockerEngine {
    /// Run `cmd` in container `h` to its exit (bounded by `timeout`; at the
    /// timeout the container is killed, since an exec cannot be), and
    /// collect its output and exit code.
    pub(super) async fn exec_collect(
        &self,
        h: &Handle,
        cmd: &[String],
        timeout: Duration,
        stderr_lines: Option<LineSink>,
    ) -> anyhow::Result<ContainerOutput> {
        let docker = self.docker();
        let exec = docker
            .create_exec(
                &h.id,
                CreateExecOptions {
                    cmd: Some(cmd.to_vec()),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    ..Default::default()
                },
            )
            .await
            .doing(|| format!("creating an exec in {}", h.name))?;
        let started = docker
            .start_exec(
                &exec.id,
                Some(StartExecOptions {
                    detach: false,
                    tty: false,
                    output_capacity: Some(OUTPUT_CAPACITY),
                }),
            )
            .await
            .doing(|| format!("starting an exec in {}", h.name))?;
        let StartExecResults::Attached { mut output, .. } = started else {
            anyhow::bail!("the daemon did not attach to the exec in {}", h.name);
        };
        let (mut out, mut err, mut pending) = (Vec::new(), Vec::new(), Vec::new());
        let collected = tokio::time::timeout(timeout, async {
            let mut sink = stderr_lines;
            while let Some(item) = output.next().await {
                match item.doing(|| format!("reading the exec's output in {}", h.name))? {
                    bollard::container::LogOutput::StdErr { message } => {
                        err.extend_from_slice(&message);
                        if let Some(s) = &sink {
                            pending.extend_from_slice(&message);
                            if !send_lines(&mut pending, s) {
                                sink = None;
                            }
                        }
                    }
                    other => out.extend_from_slice(other.as_ref()),
                }
            }
            Ok::<(), DockerError>(())
        })
        .await;
        match collected {
            Err(_) => {
                let _ = self.force_remove(&h.id).await;
                let tail: String = String::from_utf8_lossy(&err).into_owned();
                return Err(DockerError::Timeout {
                    container: h.name.clone(),
                    timeout_s: timeout.as_secs(),
                    tail: tail
                        .lines()
                        .rev()
                        .take(100)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect::<Vec<_>>()
                        .join("\n"),
                }
                .into());
            }
            Ok(r) => r?,
        }
        let inspect = docker
            .inspect_exec(&exec.id)
            .await
            .doing(|| format!("inspecting the exec in {}", h.name))?;
        let code = inspect.exit_code.unwrap_or(-1);
        Ok(ContainerOutput {
            exit_code: code,
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
            state: ExitState {
                running: false,
                exit_code: Some(code),
                ..ExitState::default()
            },
        })
    }
}
