//! Kernel limits: fairground's nofile, fs.file-max, and the network sysctls
//! that decide whether N connections can be opened and accepted.
//!
//! Network sysctls live per network namespace: a container gets its own
//! copies (kernel defaults unless the run sets `--sysctl`), so the host's
//! values say little about the containers. The run pipeline reads them
//! inside a container (`fairground preflight --net-sysctls` in the loader
//! image) and passes them in [`PreflightInput::container_sysctls`](super::PreflightInput);
//! every result names the namespace its value came from.

use std::fmt;
use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::{Check, CheckStatus, Env, Family, Judgement};
use crate::host::sysctl::{self, Sysctls};

/// File descriptors fairground needs beyond one per connection: stdio,
/// epoll/eventfd, listeners, the results and histogram files, the Docker
/// socket. Judgement, rounded up generously.
pub const NOFILE_HEADROOM: u64 = 256;
/// System-wide file handles needed beyond both ends of every connection on
/// this host (the rest of the system keeps its own open).
pub const FILE_MAX_HEADROOM: u64 = 65_536;
/// Largest listen backlog the kernel accepts (somaxconn is capped at it).
pub const MAX_BACKLOG: u64 = 65_535;

/// Which network namespace a sysctl value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "name")]
pub enum SysctlNamespace {
    /// The host's (fairground's own) namespace.
    Host,
    /// A container's namespace (named by container), read inside it.
    Container(String),
    /// Set for the run's containers by the named profile, not yet read back
    /// (the run pipeline reads the real values inside the container).
    Requested(String),
}

impl fmt::Display for SysctlNamespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Host => f.write_str("host netns"),
            Self::Container(c) => write!(f, "netns of container {c}"),
            Self::Requested(p) => write!(
                f,
                "requested for the containers by profile {p}, not yet read back"
            ),
        }
    }
}

/// The network sysctls preflight judges, as one namespace sees them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceSysctls {
    /// Where they were read.
    pub namespace: SysctlNamespace,
    /// Their values (the ones in [`sysctl::JUDGED`] that could be read).
    pub values: Sysctls,
}

impl NamespaceSysctls {
    /// Read them from `root`/proc/sys in the reading process's own network
    /// namespace, labelled `namespace`. Errors when none is readable.
    pub fn read(root: &Path, namespace: SysctlNamespace) -> anyhow::Result<Self> {
        Ok(Self {
            namespace,
            values: Sysctls::read(root, &sysctl::JUDGED)?,
        })
    }

    /// The sysctls `profile` sets on its containers in bridge mode, labelled
    /// as requested (listener side from the server's, connecting side from
    /// the loader's); `None` in host network mode, where the containers
    /// share the host's namespace and the host's values are the real ones.
    pub fn requested_by(profile: &crate::profile::Profile) -> Option<Self> {
        if profile.network == crate::profile::Network::Host {
            return None;
        }
        let mut values = Sysctls::default();
        let sides = [
            (
                &profile.server.sysctls,
                [sysctl::SOMAXCONN, sysctl::TCP_MAX_SYN_BACKLOG],
            ),
            (
                &profile.loader.sysctls,
                [sysctl::IP_LOCAL_PORT_RANGE, sysctl::TCP_TW_REUSE],
            ),
        ];
        for (set, names) in sides {
            for name in names {
                if let Some(v) = set.get(name) {
                    values.set(name, v);
                }
            }
        }
        Some(Self {
            namespace: SysctlNamespace::Requested(profile.name.clone()),
            values,
        })
    }

    /// Parse the JSON that `fairground preflight --net-sysctls` printed inside
    /// `container`, labelling the values with that container's namespace.
    pub fn from_container_output(json: &str, container: &str) -> anyhow::Result<Self> {
        let mut s: Self = serde_json::from_str(json.trim()).with_context(|| {
            format!(
                "parsing `fairground preflight --net-sysctls` output from container {container}"
            )
        })?;
        s.namespace = SysctlNamespace::Container(container.to_string());
        Ok(s)
    }
}

/// One sysctl's value and the namespace it came from: the containers' when
/// the input has it, else the host's own.
fn net_value<T>(
    env: &Env<'_>,
    field: impl Fn(&Sysctls) -> Option<T>,
) -> (Option<T>, SysctlNamespace) {
    if let Some(c) = &env.input.container_sysctls {
        if let Some(v) = field(&c.values) {
            return (Some(v), c.namespace.clone());
        }
    }
    let host = NamespaceSysctls::read(env.root, SysctlNamespace::Host).ok();
    (host.and_then(|h| field(&h.values)), SysctlNamespace::Host)
}

/// `limits.nofile`: fairground's own nofile against the highest concurrency.
pub struct Nofile;

impl Check for Nofile {
    fn id(&self) -> &'static str {
        "limits.nofile"
    }
    fn family(&self) -> Family {
        Family::Limits
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let need = env.input.max_concurrency + NOFILE_HEADROOM;
        let why =
            "every connection is a file descriptor: with too few, a \"10K connections\" test \
                   holds about a thousand and the rest are connect errors";
        let threshold = format!(
            "soft ≥ {need} (concurrency {} + {NOFILE_HEADROOM}); warn if only hard is, fail if neither",
            env.input.max_concurrency
        );
        let remedy = format!("ulimit -n {need} (raise the hard limit in /etc/security/limits.conf or the unit's LimitNOFILE)");
        let Some(n) = env.probes.nofile else {
            return Judgement::new(
                CheckStatus::Warn,
                "getrlimit failed",
                threshold,
                why,
                remedy,
            );
        };
        let show = |v: u64| {
            if v == u64::MAX {
                "unlimited".to_string()
            } else {
                v.to_string()
            }
        };
        let verdict = if n.soft >= need {
            CheckStatus::Pass
        } else if n.hard >= need {
            CheckStatus::Warn
        } else {
            CheckStatus::Fail
        };
        Judgement::new(
            verdict,
            format!(
                "soft {}, hard {} (getrlimit, fairground process)",
                show(n.soft),
                show(n.hard)
            ),
            threshold,
            why,
            remedy,
        )
    }
}

/// `limits.daemon_nofile`: the Docker daemon's own open-files limit against
/// the nofile the run asks for its containers. runc cannot give a container
/// more than the daemon's hard limit ("error setting rlimit type 7"): on this
/// project's machines dockerd runs with 20000, so a profile asking 65536 could
/// not start a single container.
pub struct DaemonNofile;

/// The daemon's pid files, in the order dockerd writes them.
const DOCKER_PID_FILES: [&str; 2] = ["/run/docker.pid", "/var/run/docker.pid"];

/// Soft and hard "Max open files" of a `/proc/PID/limits` text.
fn max_open_files(limits: &str) -> Option<(u64, u64)> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let mut f = line["Max open files".len()..].split_whitespace();
    let parse = |v: &str| {
        if v == "unlimited" {
            Some(u64::MAX)
        } else {
            v.parse::<u64>().ok()
        }
    };
    Some((parse(f.next()?)?, parse(f.next()?)?))
}

impl Check for DaemonNofile {
    fn id(&self) -> &'static str {
        "limits.daemon_nofile"
    }
    fn family(&self) -> Family {
        Family::Limits
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let want = env.input.container_nofile;
        let why = "Docker cannot raise a container's nofile above the daemon's own hard limit: \
                   containers asking for more fail to start";
        let threshold = match want {
            Some(n) => format!("dockerd hard limit ≥ {n} (the run's container nofile)"),
            None => "recorded (no run given)".to_string(),
        };
        let remedy = "lower the profile's nofile, or raise dockerd's LimitNOFILE \
                      (systemd unit or init script) and restart it";
        let limits = DOCKER_PID_FILES
            .iter()
            .find_map(|p| env.read(p))
            .and_then(|pid| env.read(&format!("/proc/{}/limits", pid.trim())))
            .and_then(|text| max_open_files(&text));
        let Some((soft, hard)) = limits else {
            return Judgement::new(
                if want.is_some() {
                    CheckStatus::Warn
                } else {
                    CheckStatus::Pass
                },
                "not readable (no dockerd pid file here: remote daemon or not root)",
                threshold,
                why,
                remedy,
            );
        };
        let verdict = match want {
            Some(n) if hard < n => CheckStatus::Fail,
            _ => CheckStatus::Pass,
        };
        Judgement::new(
            verdict,
            format!("dockerd soft {soft}, hard {hard} (/proc/PID/limits)"),
            threshold,
            why,
            remedy,
        )
    }
}

/// `limits.file_max`: fs.file-max (system-wide, not per namespace).
pub struct FileMax;

impl Check for FileMax {
    fn id(&self) -> &'static str {
        "limits.file_max"
    }
    fn family(&self) -> Family {
        Family::Limits
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let need = 2 * env.input.max_concurrency + FILE_MAX_HEADROOM;
        let why =
            "both ends of every connection hold a file on this host when the loader is local; \
                   past fs.file-max every open fails";
        let threshold = format!("≥ {need} (2 × concurrency + {FILE_MAX_HEADROOM})");
        let remedy = format!("sysctl -w fs.file-max={need}");
        match env
            .read("/proc/sys/fs/file-max")
            .and_then(|s| s.parse::<u64>().ok())
        {
            Some(v) => Judgement::new(
                CheckStatus::pass_or(v >= need, CheckStatus::Fail),
                format!("{v} (system-wide)"),
                threshold,
                why,
                remedy,
            ),
            None => Judgement::new(
                CheckStatus::Warn,
                "not readable (/proc/sys/fs/file-max)",
                threshold,
                why,
                remedy,
            ),
        }
    }
}

/// `limits.somaxconn`: net.core.somaxconn against the concurrency.
pub struct Somaxconn;

impl Check for Somaxconn {
    fn id(&self) -> &'static str {
        "limits.somaxconn"
    }
    fn family(&self) -> Family {
        Family::Limits
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        backlog_outcome(
            env,
            net_value(env, |s| s.int(sysctl::SOMAXCONN)),
            "net.core.somaxconn",
            "it caps every listen backlog: when all connections open at once, those past it are \
             dropped and retried a second later, which shows as connect errors and a latency tail",
        )
    }
}

/// `limits.syn_backlog`: net.ipv4.tcp_max_syn_backlog against the concurrency.
pub struct SynBacklog;

impl Check for SynBacklog {
    fn id(&self) -> &'static str {
        "limits.syn_backlog"
    }
    fn family(&self) -> Family {
        Family::Limits
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        backlog_outcome(
            env,
            net_value(env, |s| s.int(sysctl::TCP_MAX_SYN_BACKLOG)),
            "net.ipv4.tcp_max_syn_backlog",
            "half-open connections past it are dropped (or answered with syncookies) during the \
             connection burst at the start of every cell",
        )
    }
}

fn backlog_outcome(
    env: &Env<'_>,
    (value, ns): (Option<u64>, SysctlNamespace),
    name: &str,
    why: &str,
) -> Judgement {
    let need = env.input.max_concurrency.min(MAX_BACKLOG);
    let threshold = format!("≥ {need} (highest concurrency, capped at {MAX_BACKLOG}); warn below");
    let remedy =
        format!("set {name}={need} for the containers (docker run --sysctl {name}={need})");
    match value {
        Some(v) => Judgement::new(
            CheckStatus::pass_or(v >= need, CheckStatus::Warn),
            format!("{v} ({ns})"),
            threshold,
            why,
            remedy,
        ),
        None => Judgement::new(
            CheckStatus::Warn,
            format!("not readable ({ns})"),
            threshold,
            why,
            remedy,
        ),
    }
}

/// `limits.port_range`: width of net.ipv4.ip_local_port_range against the concurrency.
pub struct PortRange;

impl Check for PortRange {
    fn id(&self) -> &'static str {
        "limits.port_range"
    }
    fn family(&self) -> Family {
        Family::Limits
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let (range, ns) = net_value(env, |s| s.port_range());
        let c = env.input.max_concurrency;
        let why = "every loader connection to the one server address needs its own ephemeral \
                   port: a narrower range cannot hold the concurrency";
        let threshold = format!("width ≥ {c} (highest concurrency)");
        let remedy = "widen it for the loader container: --sysctl net.ipv4.ip_local_port_range=\"1024 65535\" \
                      (64,512 ports); beyond that, give the loader several source addresses";
        match range {
            Some((lo, hi)) => {
                let width = u64::from(hi.saturating_sub(lo)) + 1;
                Judgement::new(
                    CheckStatus::pass_or(width >= c, CheckStatus::Fail),
                    format!("{lo}-{hi}, {width} ports ({ns})"),
                    threshold,
                    why,
                    remedy,
                )
            }
            None => Judgement::new(
                CheckStatus::Warn,
                format!("not readable ({ns})"),
                threshold,
                why,
                remedy,
            ),
        }
    }
}

/// `limits.tw_reuse`: net.ipv4.tcp_tw_reuse.
pub struct TwReuse;

impl Check for TwReuse {
    fn id(&self) -> &'static str {
        "limits.tw_reuse"
    }
    fn family(&self) -> Family {
        Family::Limits
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let (reuse, ns) = net_value(env, |s| s.int(sysctl::TCP_TW_REUSE));
        let why = "connections closed by the loader sit in TIME_WAIT for 60 s holding their port; \
                   without reuse a run that reconnects runs out of ports";
        let threshold =
            "1 (on) passes; 2 (loopback only, the default) passes for keep-alive runs; 0 warns";
        let remedy = "--sysctl net.ipv4.tcp_tw_reuse=1 for the loader container";
        match reuse {
            Some(1) => Judgement::new(
                CheckStatus::Pass,
                format!("1, on ({ns})"),
                threshold,
                why,
                remedy,
            ),
            Some(2) => Judgement::new(
                CheckStatus::Pass,
                format!("2, loopback only ({ns}); keep-alive runs do not churn ports"),
                threshold,
                why,
                remedy,
            ),
            Some(v) => Judgement::new(
                CheckStatus::Warn,
                format!("{v}, off ({ns})"),
                threshold,
                why,
                remedy,
            ),
            None => Judgement::new(
                CheckStatus::Warn,
                format!("not readable ({ns})"),
                threshold,
                why,
                remedy,
            ),
        }
    }
}

/// The checks of this family.
pub fn checks() -> Vec<Box<dyn Check>> {
    vec![
        Box::new(Nofile),
        Box::new(DaemonNofile),
        Box::new(FileMax),
        Box::new(Somaxconn),
        Box::new(SynBacklog),
        Box::new(PortRange),
        Box::new(TwReuse),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_max_open_files_from_proc_limits() {
        let text = "Limit                     Soft Limit           Hard Limit           Units\n\
                    Max cpu time              unlimited            unlimited            seconds\n\
                    Max open files            20000                20000                files\n";
        assert_eq!(max_open_files(text), Some((20_000, 20_000)));
        let text = "Max open files            1024                 unlimited            files\n";
        assert_eq!(max_open_files(text), Some((1024, u64::MAX)));
        assert_eq!(max_open_files("Max processes 10 10\n"), None);
    }

    #[test]
    fn container_output_is_relabelled_with_the_container_namespace() {
        let json = r#"{"namespace":{"kind":"host"},"values":{"net.core.somaxconn":"4096",
                       "net.ipv4.ip_local_port_range":"32768 60999","net.ipv4.tcp_tw_reuse":"2"}}"#;
        let s = NamespaceSysctls::from_container_output(json, "fg-loader").unwrap();
        assert_eq!(s.namespace, SysctlNamespace::Container("fg-loader".into()));
        assert_eq!(s.values.port_range(), Some((32768, 60999)));
        assert_eq!(s.namespace.to_string(), "netns of container fg-loader");
    }

    #[test]
    fn reading_a_tree_without_proc_sys_is_an_error_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let err = NamespaceSysctls::read(dir.path(), SysctlNamespace::Host).unwrap_err();
        assert!(format!("{err}").contains("proc/sys"), "{err}");
    }
}
