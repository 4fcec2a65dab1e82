//! Resource probes: memory and CPU time of a running container.
//!
//! Owns reading a container's cgroup (v1 and v2, `cgroup`), the Docker stats
//! API fallback for daemons whose cgroup tree is not on this host (`stats`),
//! and the background sampler (`sampler`). It reads; its one write is the
//! reset of a cgroup's memory high-water mark as a measured window opens
//! (`cgroup::PeakWatch`). It never changes a container or its limits.

pub mod cgroup;
pub mod sampler;
pub mod stats;

pub use cgroup::{CgroupFs, CgroupPaths, CgroupReading, CgroupVersion, PeakWatch};
pub use sampler::{Sample, Sampler, SamplerSource, Series};
