//! The background sampler: reads a container's memory and CPU every period
//! into a time series, on a tokio task, until it is stopped.
//!
//! A failed read (the container exited, its cgroup vanished) ends the series
//! quietly: the samples taken so far are what the caller gets, and the error
//! is kept in [`Series::stopped_by`] so the report can say why it is short.

use std::time::{Duration, Instant};

use bollard::Docker;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::cgroup::{CgroupPaths, CgroupReading};

/// One point of the time series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Sample {
    /// Milliseconds since the sampler started.
    pub t_ms: u64,
    /// Memory charged to the container, bytes (see [`CgroupReading::mem_bytes`]).
    pub mem_bytes: u64,
    /// Cumulative CPU time of the container, microseconds.
    pub cpu_usec: u64,
    /// Cumulative time throttled by the CPU quota, microseconds.
    pub throttled_usec: u64,
    /// The cgroup's high-water mark of its memory charge since the
    /// container started (page cache included), when the kernel keeps one.
    pub mem_peak_bytes: Option<u64>,
}

/// Where samples come from.
#[derive(Debug, Clone)]
pub enum SamplerSource {
    /// The container's cgroup files on this host (preferred).
    Cgroup(CgroupPaths),
    /// The Docker stats API (remote daemons).
    StatsApi {
        /// The daemon connection.
        docker: Docker,
        /// Container id or name.
        container: String,
    },
    /// Precomputed readings, served in order (the fake engine's source).
    Scripted(Vec<CgroupReading>),
}

impl SamplerSource {
    async fn read(&mut self, step: usize) -> anyhow::Result<Option<CgroupReading>> {
        match self {
            SamplerSource::Cgroup(paths) => Ok(Some(paths.read()?)),
            SamplerSource::StatsApi { docker, container } => {
                Ok(Some(super::stats::read(docker, container).await?))
            }
            SamplerSource::Scripted(list) => Ok(list.get(step).copied()),
        }
    }
}

/// What a stopped sampler hands back.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Series {
    /// The samples, oldest first.
    pub samples: Vec<Sample>,
    /// Why sampling ended before it was stopped, if it did (e.g. the
    /// container exited and its cgroup disappeared).
    pub stopped_by: Option<String>,
}

impl Series {
    /// Highest memory sample, bytes.
    pub fn max_mem_bytes(&self) -> Option<u64> {
        self.samples.iter().map(|s| s.mem_bytes).max()
    }

    /// The cgroup's own high-water mark at the last sample that had one:
    /// it catches spikes between samples (and counts since the container
    /// started, so it never falls).
    pub fn peak_mem_bytes(&self) -> Option<u64> {
        self.samples.iter().rev().find_map(|s| s.mem_peak_bytes)
    }

    /// CPU time between the first and the last sample, microseconds.
    pub fn cpu_usec_delta(&self) -> u64 {
        match (self.samples.first(), self.samples.last()) {
            (Some(a), Some(b)) => b.cpu_usec.saturating_sub(a.cpu_usec),
            _ => 0,
        }
    }
}

/// A running sampler; [`Sampler::stop`] ends it and returns the series.
#[derive(Debug)]
pub struct Sampler {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Series>,
}

impl Sampler {
    /// Start sampling `source` every `every` (the first sample is immediate).
    pub fn start(mut source: SamplerSource, every: Duration) -> Self {
        let (tx, mut rx) = oneshot::channel();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut series = Series::default();
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut step = 0usize;
            loop {
                tokio::select! {
                    _ = &mut rx => break,
                    _ = tick.tick() => {}
                }
                match source.read(step).await {
                    Ok(Some(r)) => series.samples.push(Sample {
                        t_ms: started.elapsed().as_millis() as u64,
                        mem_bytes: r.mem_bytes,
                        cpu_usec: r.cpu_usec,
                        throttled_usec: r.throttled_usec,
                        mem_peak_bytes: r.mem_peak_bytes,
                    }),
                    Ok(None) => {
                        // A scripted source ran out: wait for stop.
                        let _ = (&mut rx).await;
                        break;
                    }
                    Err(e) => {
                        series.stopped_by = Some(format!("{e:#}"));
                        break;
                    }
                }
                step += 1;
            }
            series
        });
        Self {
            stop: Some(tx),
            task,
        }
    }

    /// Stop sampling and collect the series.
    pub async fn stop(mut self) -> Series {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match (&mut self.task).await {
            Ok(series) => series,
            Err(e) => Series {
                samples: Vec::new(),
                stopped_by: Some(format!("sampler task failed: {e}")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(mem: u64, cpu: u64) -> CgroupReading {
        CgroupReading {
            mem_bytes: mem,
            cpu_usec: cpu,
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn collects_one_sample_per_period_until_stopped() {
        let src = SamplerSource::Scripted(vec![reading(10, 0), reading(30, 500), reading(20, 900)]);
        let s = Sampler::start(src, Duration::from_millis(10));
        // The scripted source runs out after 3 readings and then waits.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let series = s.stop().await;
        assert_eq!(series.samples.len(), 3);
        assert!(series.samples[1].t_ms >= 10, "{:?}", series.samples);
        assert!(series.samples[2].t_ms > series.samples[1].t_ms);
        assert_eq!(series.max_mem_bytes(), Some(30));
        assert_eq!(series.peak_mem_bytes(), None, "no high-water mark read");
        assert_eq!(series.cpu_usec_delta(), 900);
        assert_eq!(series.stopped_by, None);
    }

    #[tokio::test]
    async fn the_peak_is_the_cgroups_high_water_mark_not_a_sample() {
        let with_peak = |mem, peak| CgroupReading {
            mem_bytes: mem,
            mem_peak_bytes: Some(peak),
            ..Default::default()
        };
        // A spike to 90 between samples shows only in the kernel's mark.
        let src = SamplerSource::Scripted(vec![with_peak(10, 40), with_peak(30, 90)]);
        let s = Sampler::start(src, Duration::from_millis(10));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let series = s.stop().await;
        assert_eq!(series.max_mem_bytes(), Some(30));
        assert_eq!(series.peak_mem_bytes(), Some(90));
    }

    #[tokio::test]
    async fn vanished_cgroup_ends_the_series_with_a_reason() {
        let paths = CgroupPaths {
            version: super::super::CgroupVersion::V2,
            memory: "/nonexistent/cg".into(),
            cpuacct: "/nonexistent/cg".into(),
            cpu: "/nonexistent/cg".into(),
        };
        let s = Sampler::start(SamplerSource::Cgroup(paths), Duration::from_millis(10));
        tokio::time::sleep(Duration::from_millis(50)).await;
        let series = s.stop().await;
        assert!(series.samples.is_empty());
        assert!(series.stopped_by.unwrap().contains("/nonexistent/cg"));
    }
}
