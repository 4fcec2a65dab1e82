//! The `hosts:` section: which Docker daemon runs the server and which run
//! the loaders, as written (`RawHosts`, part of the file format and its
//! JSON Schema) and validated ([`Hosts`]).
//!
//! Endpoints are Docker's own addresses: `unix:///path`, `tcp://host:port`
//! (TLS when client certificates are given, as the docker CLI's
//! `--tlsverify` with `DOCKER_CERT_PATH`), or `local` (what `DOCKER_HOST`
//! names, else the local socket). `ssh://` is refused with the way around
//! it (an `ssh -L` socket forward, docs/hosts.md): bollard's SSH transport
//! would add an OpenSSH control-master dependency to the static binary.
//!
//! This module checks files exist and addresses parse; it connects to
//! nothing (docker::remote does).

use std::fmt;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::de::value::MapAccessDeserializer;
use serde::{de, Deserialize, Deserializer, Serialize};

use super::error::{Locator, ProfileError};
use super::span::{index, key};

/// Where the run's containers go, as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Hosts")]
pub struct RawHosts {
    /// The Docker daemon that runs the server: `unix:///path`,
    /// `tcp://host:port`, `local`, or `{url, cert_dir | ca+cert+key}` for
    /// TLS. Default: `local`.
    #[serde(default)]
    pub server: Option<RawEndpoint>,
    /// The Docker daemons that run the loaders, one loader each per round
    /// (the round's connections and rate are split between them).
    /// Default: `[local]`.
    #[serde(default)]
    pub loaders: Option<Vec<RawEndpoint>>,
    /// The address (IPv4 or host name) the loaders use to reach the server's
    /// published port. Default: the server endpoint's host for `tcp://`,
    /// `127.0.0.1` for a unix socket (loaders on the same machine).
    #[serde(default)]
    pub server_address: Option<String>,
}

/// One Docker endpoint as written: a URL, or a URL with TLS files.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Endpoint")]
pub struct EndpointSpec {
    /// `unix:///path`, `tcp://host:port` or `local`.
    pub url: String,
    /// A folder holding `ca.pem`, `cert.pem` and `key.pem` (as
    /// `DOCKER_CERT_PATH`); relative to the profile's folder.
    #[serde(default)]
    pub cert_dir: Option<String>,
    /// CA certificate that signed the daemon's certificate (PEM).
    #[serde(default)]
    pub ca: Option<String>,
    /// Client certificate (PEM).
    #[serde(default)]
    pub cert: Option<String>,
    /// Client key (PEM).
    #[serde(default)]
    pub key: Option<String>,
}

/// An endpoint: the short form (a URL string) or the full one.
#[derive(Debug, Clone, PartialEq)]
pub struct RawEndpoint(pub EndpointSpec);

impl<'de> Deserialize<'de> for RawEndpoint {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = RawEndpoint;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a Docker endpoint like `tcp://10.0.0.2:2376`, or `{url: ..., cert_dir: ...}`",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(RawEndpoint(EndpointSpec {
                    url: v.to_string(),
                    ..EndpointSpec::default()
                }))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                EndpointSpec::deserialize(MapAccessDeserializer::new(map)).map(RawEndpoint)
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for RawEndpoint {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "EndpointOrUrl".into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let spec = g.subschema_for::<EndpointSpec>();
        schemars::json_schema!({
            "description": "A Docker endpoint URL, or `{url, cert_dir | ca + cert + key}` for TLS.",
            "anyOf": [{"type": "string"}, spec]
        })
    }
}

/// Where a run's containers go, validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hosts {
    /// The daemon that runs the server.
    pub server: Endpoint,
    /// The daemons that run the loaders (one loader each per round).
    pub loaders: Vec<Endpoint>,
    /// What the loaders connect to; `None`: derived from the server
    /// endpoint when the run starts ([`Hosts::server_address`]).
    pub server_address: Option<String>,
}

/// One Docker daemon to talk to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// `unix:///path`, `tcp://host:port`, or `local`.
    pub url: String,
    /// Client certificates for TLS (`tcp://` only).
    pub tls: Option<TlsFiles>,
}

/// Client certificate files of a TLS endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsFiles {
    /// CA that signed the daemon's certificate.
    pub ca: PathBuf,
    /// Client certificate.
    pub cert: PathBuf,
    /// Client key.
    pub key: PathBuf,
}

/// The endpoint `local` stands for.
pub const LOCAL: &str = "local";

impl Endpoint {
    /// The local daemon (`DOCKER_HOST`, else the local socket).
    pub fn local() -> Self {
        Endpoint {
            url: LOCAL.into(),
            tls: None,
        }
    }

    /// The host part of a `tcp://` URL.
    pub fn tcp_host(&self) -> Option<&str> {
        let rest = self.url.strip_prefix("tcp://")?;
        let host = rest.split('/').next()?;
        Some(match host.rsplit_once(':') {
            Some((h, _)) => h,
            None => host,
        })
    }

    /// Whether this endpoint is reached through a socket on this machine
    /// (so the daemon's cgroup files are readable here).
    pub fn is_local_socket(&self) -> bool {
        self.url == LOCAL && crate::host::docker::daemon_is_local()
            || self.url.starts_with("unix://")
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)?;
        if self.tls.is_some() {
            f.write_str(" (TLS)")?;
        }
        Ok(())
    }
}

impl Hosts {
    /// The address loaders use to reach the server: as written, else the
    /// server endpoint's TCP host, else `127.0.0.1` (a local socket: the
    /// loaders are on this machine too). Returns the address and how it was
    /// chosen, for the run's output.
    pub fn server_address(&self) -> (String, &'static str) {
        if let Some(a) = &self.server_address {
            return (a.clone(), "as set in the profile");
        }
        match self.server.tcp_host() {
            Some(h) => (h.to_string(), "the server endpoint's host"),
            None => (
                "127.0.0.1".to_string(),
                "the server's daemon is on this machine",
            ),
        }
    }

    /// Every endpoint, server first, without repeats.
    pub fn all(&self) -> Vec<&Endpoint> {
        let mut out: Vec<&Endpoint> = vec![&self.server];
        for l in &self.loaders {
            if !out.contains(&l) {
                out.push(l);
            }
        }
        out
    }
}

/// Validate the `hosts:` section; `dir` is the profile's folder (relative
/// certificate paths are read from there).
pub(crate) fn validate(raw: RawHosts, loc: &Locator<'_>) -> Result<Hosts, ProfileError> {
    let dir = loc.path.parent().unwrap_or(Path::new("."));
    let server = match raw.server {
        None => Endpoint::local(),
        Some(e) => endpoint(e.0, "hosts.server", dir, loc)?,
    };
    let loaders = match raw.loaders {
        None => vec![Endpoint::local()],
        Some(list) if list.is_empty() => {
            return Err(loc.value(
                "hosts.loaders",
                "needs at least one endpoint (or leave it out for the local daemon)",
            ))
        }
        Some(list) => list
            .into_iter()
            .enumerate()
            .map(|(i, e)| endpoint(e.0, &index("hosts.loaders", i), dir, loc))
            .collect::<Result<Vec<_>, _>>()?,
    };
    if let Some(a) = &raw.server_address {
        let ok = a.parse::<std::net::Ipv4Addr>().is_ok()
            || (!a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.'));
        if !ok {
            return Err(loc.value(
                "hosts.server_address",
                format!("`{a}` is neither an IPv4 address nor a host name"),
            ));
        }
    }
    Ok(Hosts {
        server,
        loaders,
        server_address: raw.server_address,
    })
}

fn endpoint(
    spec: EndpointSpec,
    field: &str,
    dir: &Path,
    loc: &Locator<'_>,
) -> Result<Endpoint, ProfileError> {
    let url = spec.url.trim().to_string();
    let url_field = if loc.spans.written(&key(field, "url")) {
        key(field, "url")
    } else {
        field.to_string()
    };
    if url.starts_with("ssh://") {
        return Err(loc.value(
            &url_field,
            format!(
                "`{url}`: SSH endpoints are not built in; forward the remote socket over SSH \
                 (`ssh -nNT -L /tmp/fg-remote.sock:/var/run/docker.sock {}`) and write \
                 `unix:///tmp/fg-remote.sock` here (docs/hosts.md)",
                url.trim_start_matches("ssh://")
            ),
        ));
    }
    let tcp = url.starts_with("tcp://");
    if !(tcp || url.starts_with("unix:///") || url == LOCAL) {
        return Err(loc.value(
            &url_field,
            format!("`{url}` is not a Docker endpoint; write `unix:///path`, `tcp://host:port` or `local`"),
        ));
    }
    let probe = Endpoint {
        url: url.clone(),
        tls: None,
    };
    if tcp && probe.tcp_host().unwrap_or("").is_empty() {
        return Err(loc.value(&url_field, format!("`{url}` names no host")));
    }
    let file = |name: &str, value: &Option<String>| -> Option<(String, PathBuf)> {
        value.as_ref().map(|v| (key(field, name), dir.join(v)))
    };
    let files = match (
        &spec.cert_dir,
        file("ca", &spec.ca),
        file("cert", &spec.cert),
        file("key", &spec.key),
    ) {
        (None, None, None, None) => None,
        (Some(d), None, None, None) => {
            let d = dir.join(d);
            let f = key(field, "cert_dir");
            Some([
                (f.clone(), d.join("ca.pem")),
                (f.clone(), d.join("cert.pem")),
                (f, d.join("key.pem")),
            ])
        }
        (None, Some(ca), Some(cert), Some(k)) => Some([ca, cert, k]),
        _ => {
            return Err(loc.value(
                field,
                "give either `cert_dir` (with ca.pem, cert.pem, key.pem) or all three of `ca`, `cert` and `key`",
            ))
        }
    };
    let tls = match files {
        None => None,
        Some(_) if !tcp => {
            return Err(loc.value(field, "TLS certificates apply to `tcp://` endpoints only"))
        }
        Some(files) => {
            for (f, path) in &files {
                if !path.is_file() {
                    return Err(loc.value(
                        f,
                        format!("{} does not exist or is not a file", path.display()),
                    ));
                }
            }
            let [ca, cert, key] = files.map(|(_, p)| p);
            Some(TlsFiles { ca, cert, key })
        }
    };
    Ok(Endpoint { url, tls })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{load_str, HostFacts};

    fn load(text: &str, path: &Path) -> Result<crate::profile::Profile, ProfileError> {
        load_str(text, path, &HostFacts::with_cores(4))
    }

    #[test]
    fn profiles_without_hosts_run_locally_as_before() {
        let p = load("rounds: 1\n", Path::new("p.yaml")).unwrap();
        assert_eq!(p.hosts, None);
    }

    #[test]
    fn endpoints_short_and_long_with_a_cert_dir() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("certs")).unwrap();
        for f in ["ca.pem", "cert.pem", "key.pem"] {
            std::fs::write(dir.path().join("certs").join(f), "x").unwrap();
        }
        let text = "hosts:\n  server: unix:///run/other.sock\n  loaders:\n    - local\n    - url: tcp://10.0.0.9:2376\n      cert_dir: certs\n";
        let p = load(text, &dir.path().join("p.yaml")).unwrap();
        let h = p.hosts.unwrap();
        assert_eq!(h.server.url, "unix:///run/other.sock");
        assert_eq!(h.loaders.len(), 2);
        let tls = h.loaders[1].tls.as_ref().unwrap();
        assert_eq!(tls.ca, dir.path().join("certs/ca.pem"));
        assert_eq!(h.loaders[1].tcp_host(), Some("10.0.0.9"));
        assert_eq!(h.server_address().0, "127.0.0.1");
    }

    #[test]
    fn a_missing_certificate_is_named_at_its_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let text = "hosts:\n  server:\n    url: tcp://10.0.0.1:2376\n    ca: nope/ca.pem\n    cert: c.pem\n    key: k.pem\n";
        let e = load(text, &dir.path().join("p.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("p.yaml:4:"), "{e}");
        assert!(e.contains("ca.pem does not exist"), "{e}");
    }

    #[test]
    fn ssh_endpoints_point_to_a_socket_forward() {
        let text = "hosts:\n  loaders: [ssh://me@box]\n";
        let e = load(text, Path::new("p.yaml")).unwrap_err().to_string();
        assert!(e.contains("p.yaml:2:"), "{e}");
        assert!(e.contains("ssh -nNT -L"), "{e}");
    }

    #[test]
    fn rejects_a_scheme_docker_does_not_speak_and_an_empty_loader_list() {
        let e = load("hosts:\n  server: http://x:1\n", Path::new("p.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a Docker endpoint"), "{e}");
        let e = load("hosts:\n  loaders: []\n", Path::new("p.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least one endpoint"), "{e}");
    }

    #[test]
    fn tcp_endpoints_give_the_default_server_address() {
        let p = load(
            "hosts:\n  server: tcp://bench-server.lan:2375\n",
            Path::new("p.yaml"),
        )
        .unwrap();
        assert_eq!(p.hosts.unwrap().server_address().0, "bench-server.lan");
    }
}
