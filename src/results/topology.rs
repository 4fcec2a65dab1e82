//! Where a multi-host run ran (profile `hosts:`): the daemons of the server
//! and the loaders, the address and path the traffic took, how the
//! server's resources were read, the images carried to each daemon and
//! each daemon's clock offset from this machine's.

use serde::{Deserialize, Serialize};

/// The run's hosts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Topology {
    /// The server's Docker endpoint.
    pub server: String,
    /// Each loader's Docker endpoint (one loader each per round).
    pub loaders: Vec<String>,
    /// The address the loaders reached the server at.
    pub server_address: String,
    /// How that address was chosen.
    pub server_address_source: String,
    /// The path the traffic took into the server: `published port` (the
    /// server on its daemon's default bridge, its port published by the
    /// daemon) or `host network` (the server on its host's stack).
    pub traffic_path: String,
    /// The loaders' network: their hosts' own stacks.
    pub loader_network: String,
    /// How the server's CPU and memory were read: `cgroup files` (the
    /// server's daemon is on this machine) or `Docker stats API` (remote:
    /// coarser, about one reading a second, no memory high-water mark).
    pub server_resources: String,
    /// Images carried to daemons that lacked them (or found there).
    pub images: Vec<CarriedImage>,
    /// Each daemon's clock against this machine's.
    pub clocks: Vec<DaemonClock>,
    /// Preflight of each host other than this machine, run there in
    /// fairground's image (read-only /proc and /sys of that host).
    #[serde(default)]
    pub preflight: Vec<HostPreflight>,
}

/// The environment verdict of one other host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostPreflight {
    /// The daemon's endpoint.
    pub endpoint: String,
    /// The worst verdict of its checks: `pass`, `warn` or `fail`.
    pub verdict: String,
    /// Each check's id, verdict and measurement.
    pub checks: Vec<HostCheck>,
}

/// One check on another host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostCheck {
    /// Check id (`virt.cost`, `nic.driver`, …; `docker.leftovers` is read
    /// through the host's Docker API).
    pub id: String,
    /// `pass`, `warn` or `fail`.
    pub verdict: String,
    /// What was measured there.
    pub measured: String,
}

/// One image carried to one daemon.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CarriedImage {
    /// The daemon's endpoint.
    pub endpoint: String,
    /// Image tag.
    pub tag: String,
    /// Image id (the same on both daemons).
    pub id: String,
    /// Bytes streamed; 0 when the daemon had it already.
    pub bytes: u64,
    /// Wall time of the transfer, s.
    pub seconds: f64,
    /// The daemon had this id already: nothing was sent.
    pub skipped: bool,
}

/// A daemon's clock offset, from its `SystemTime` in `docker info`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DaemonClock {
    /// The daemon's endpoint.
    pub endpoint: String,
    /// Its clock minus this machine's, ms (at the midpoint of the request).
    pub offset_ms: f64,
    /// The request's round trip, ms: the offset is known to ± half of it.
    pub round_trip_ms: f64,
}
