//! Resource probes: memory and CPU time of a running container.
//!
//! Owns reading a container's cgroup (v1 and v2, `cgroup`), the Docker stats
//! API fallback for daemons whose cgroup tree is not on this host (`stats`),
//! and the once-a-second background sampler (`sampler`). It reads; it never
//! changes a container or its limits.

pub mod cgroup;
pub mod sampler;
pub mod stats;

pub use cgroup::{CgroupFs, CgroupPaths, CgroupReading, CgroupVersion};
pub use sampler::{Sample, Sampler, SamplerSource, Series};
