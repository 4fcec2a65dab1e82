//! What this machine is and what it is doing, read from `/proc` and `/sys`:
//! CPUs online and CPU lists (`cpu`), CPU time and load average (`proc`),
//! network sysctls (`sysctl`), how fast a core runs right now (`speed`, the calibration probe), the monotonic clock (`clock`), the signals that ask the process to stop (`signal`), the Docker daemon `DOCKER_HOST` names (`docker`), and the git state of the directory a run is
//! made in (`git`, through the `git` command). Preflight, profile validation and the run all
//! read the host through here, each from a root path so fixtures can stand
//! in for the real files.
//!
//! Reads and times only; judges nothing (preflight, the gates and compare do).

pub mod clock;
pub mod cpu;
pub mod docker;
pub mod git;
pub mod proc;
pub mod signal;
pub mod speed;
pub mod sysctl;

pub use cpu::CoreList;
pub use proc::CpuTimes;
pub use sysctl::Sysctls;
