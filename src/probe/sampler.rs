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
    /// When it was read, CLOCK_MONOTONIC ns (the loader's clock too, on the
    /// same host).
    pub t_mono_ns: u64,
    /// Memory charged to the container, bytes (see [`CgroupReading::mem_bytes`]).
    pub mem_bytes: u64,
    /// Cumulative CPU time of the container, microseconds.
    pub cpu_usec: u64,
    /// Cumulative time throttled by the CPU quota, microseconds.
    pub throttled_usec: Option<u64>,
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

    /// The cumulative CPU time at instant `t` (CLOCK_MONOTONIC ns), µs,
    /// interpolated between the samples around it; `None` when no sample
    /// lies on one side of it.
    pub fn cpu_usec_at(&self, t: u64) -> Option<f64> {
        let i = self.samples.iter().position(|s| s.t_mono_ns >= t)?;
        let b = &self.samples[i];
        if b.t_mono_ns == t {
            return Some(b.cpu_usec as f64);
        }
        let a = self.samples.get(i.checked_sub(1)?)?;
        let span = (b.t_mono_ns - a.t_mono_ns) as f64;
        let f = (t - a.t_mono_ns) as f64 / span;
        Some(a.cpu_usec as f64 + f * (b.cpu_usec as f64 - a.cpu_usec as f64))
    }

    /// CPU time between instants `from` and `to`, µs, each end
    /// interpolated ([`Self::cpu_usec_at`]).
    pub fn cpu_usec_between(&self, from: u64, to: u64) -> Option<u64> {
        let (a, b) = (self.cpu_usec_at(from)?, self.cpu_usec_at(to)?);
        Some((b - a).max(0.0).round() as u64)
    }

    /// Memory samples taken between `from` and `to` (inclusive), bytes.
    pub fn mem_between(&self, from: u64, to: u64) -> Vec<u64> {
        self.samples
            .iter()
            .filter(|s| s.t_mono_ns >= from && s.t_mono_ns <= to)
            .map(|s| s.mem_bytes)
            .collect()
    }
}

/// A running sampler; [`Sampler::stop`] ends it and returns the series.
#[derive(Debug)]
pub struct Sampler {
    stop: Option<oneshot::Sender<()>>,
    now: tokio::sync::mpsc::UnboundedSender<()>,
    task: JoinHandle<Series>,
}

impl Sampler {
    /// Start sampling `source` every `every` (the first sample is immediate).
    pub fn start(mut source: SamplerSource, every: Duration) -> Self {
        let (tx, mut rx) = oneshot::channel();
        let (now_tx, mut now_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut series = Series::default();
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut step = 0usize;
            loop {
                // Stopping takes one last reading: it is the sample after
                // whatever the caller waited for (a loader's exit), so
                // nobody has to sleep a period for one.
                let last = tokio::select! {
                    biased;
                    _ = &mut rx => true,
                    Some(()) = now_rx.recv() => false,
                    _ = tick.tick() => false,
                };
                match source.read(step).await {
                    Ok(Some(r)) => series.samples.push(Sample {
                        t_ms: started.elapsed().as_millis() as u64,
                        t_mono_ns: crate::host::clock::now_ns(),
                        mem_bytes: r.mem_bytes,
                        cpu_usec: r.cpu_usec,
                        throttled_usec: r.throttled_usec,
                        mem_peak_bytes: r.mem_peak_bytes,
                    }),
                    Ok(None) => {
                        // A scripted source ran out: wait for stop.
                        if !last {
                            let _ = (&mut rx).await;
                        }
                        break;
                    }
                    Err(e) => {
                        series.stopped_by = Some(format!("{e:#}"));
                        break;
                    }
                }
                step += 1;
                if last {
                    break;
                }
            }
            series
        });
        Self {
            stop: Some(tx),
            now: now_tx,
            task,
        }
    }

    /// Take a reading now, between the periodic ones: the orchestrator
    /// asks for one the moment the loader announces each edge of its
    /// window, so the CPU counter is read right at the edges (a few ms
    /// after, the line's delivery) instead of interpolated across a whole
    /// sampling period.
    pub fn sample_now(&self) {
        let _ = self.now.send(());
    }

    /// Take one last sample, stop sampling and collect the series.
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
    async fn stopping_takes_one_last_sample_after_what_the_caller_waited_for() {
        let src = SamplerSource::Scripted((0..100).map(|i| reading(i, i * 10)).collect());
        // A period far longer than the test: only the first sample is due.
        let s = Sampler::start(src, Duration::from_secs(60));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let before_stop = crate::host::clock::now_ns();
        let series = s.stop().await;
        assert_eq!(series.samples.len(), 2, "{:?}", series.samples);
        assert!(series.samples[1].t_mono_ns >= before_stop);
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

    #[test]
    fn cpu_at_an_instant_is_interpolated_between_samples() {
        let at = |t_mono_ns, cpu_usec| Sample {
            t_ms: 0,
            t_mono_ns,
            mem_bytes: t_mono_ns,
            cpu_usec,
            throttled_usec: None,
            mem_peak_bytes: None,
        };
        let series = Series {
            samples: vec![at(1_000, 100), at(2_000, 300), at(3_000, 300)],
            stopped_by: None,
        };
        assert_eq!(series.cpu_usec_at(1_500), Some(200.0));
        assert_eq!(series.cpu_usec_between(1_500, 2_500), Some(100));
        assert_eq!(series.cpu_usec_at(500), None, "no sample before");
        assert_eq!(series.cpu_usec_at(3_500), None, "no sample after");
        assert_eq!(series.mem_between(1_500, 3_000), vec![2_000, 3_000]);
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
