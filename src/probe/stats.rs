//! The Docker stats API as a probe, for daemons whose cgroup tree is not on
//! this host (a remote `DOCKER_HOST`). Slower and coarser than reading the
//! cgroup (the daemon samples it itself), so it is only the fallback.

use anyhow::Context;
use bollard::query_parameters::StatsOptions;
use bollard::Docker;
use futures_util::StreamExt;

use super::cgroup::CgroupReading;

/// One reading of `container` through `GET /containers/ID/stats?stream=false`.
///
/// Memory is the raw `memory_stats.usage` (the same counter as the cgroup's
/// `memory.usage_in_bytes` / `memory.current`, before `docker stats` subtracts
/// the page cache), CPU is `cpu_usage.total_usage` (nanoseconds) in µs.
pub async fn read(docker: &Docker, container: &str) -> anyhow::Result<CgroupReading> {
    let opts = StatsOptions {
        stream: false,
        one_shot: true,
    };
    let mut stream = docker.stats(container, Some(opts));
    let stats = stream
        .next()
        .await
        .ok_or_else(|| anyhow::anyhow!("container {container}: the stats API returned nothing"))?
        .map_err(|e| anyhow::anyhow!("container {container}: stats API: {e}"))?;
    let mem = stats.memory_stats.unwrap_or_default();
    let cpu = stats.cpu_stats.unwrap_or_default();
    let usage = cpu.cpu_usage.unwrap_or_default();
    let throttling = cpu.throttling_data.unwrap_or_default();
    let stat = mem.stats.unwrap_or_default();
    Ok(CgroupReading {
        mem_bytes: mem
            .usage
            .context("the stats API gave no memory_stats.usage: the container's memory is unknown")?,
        mem_peak_bytes: mem.max_usage,
        anon_bytes: stat
            .get("anon")
            .or_else(|| stat.get("total_rss"))
            .or_else(|| stat.get("rss"))
            .copied(),
        file_bytes: stat
            .get("file")
            .or_else(|| stat.get("total_cache"))
            .or_else(|| stat.get("cache"))
            .copied(),
        cpu_usec: usage
            .total_usage
            .context("the stats API gave no cpu_stats.cpu_usage.total_usage: the container's CPU time is unknown")?
            / 1_000,
        throttled_usec: throttling.throttled_time.map(|ns| ns / 1_000),
        nr_throttled: throttling.throttled_periods,
        oom_kills: None,
    })
}
