//! fairground: honest, reproducible, container-limited HTTP framework benchmarks.
//!
//! One binary plays three roles: the orchestrator on the host, the load
//! generator inside the load container (`fairground load`), and the reference
//! server (`fairground serve`). `docs/architecture.md` is the map of modules.

pub mod cli;
pub mod contract;
pub mod exit;
pub mod framework;
pub mod preflight;
pub mod profile;
pub mod serve;
pub mod verify;
