//! Which Docker daemon this process talks to: `DOCKER_HOST`, read once per
//! question, and whether that daemon shares this machine's cgroup files.

/// The daemon address in effect: `DOCKER_HOST`, or the default unix socket.
pub fn docker_host() -> String {
    std::env::var("DOCKER_HOST")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unix:///var/run/docker.sock".to_string())
}

/// Whether the daemon is on this host, so cgroup files can be read directly
/// instead of through the stats API.
pub fn daemon_is_local() -> bool {
    docker_host().starts_with("unix://")
}
