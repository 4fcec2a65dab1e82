//! fairground: honest, reproducible, container-limited HTTP framework benchmarks.
//!
//! One binary plays three roles: the orchestrator on the host, the load
//! generator inside the load container (`fairground load`), and the reference
//! server (`fairground serve`). `docs/architecture.md` is the map of modules.

pub(crate) mod bench;
pub mod cli;
pub mod compare;
pub mod contract;
pub mod docker;
pub mod exit;
pub mod export;
pub mod framework;
pub(crate) mod history;
pub mod host;
pub(crate) mod judge;
pub(crate) mod markup;
pub(crate) mod plan;
pub mod preflight;
pub mod probe;
pub mod profile;
pub mod report;
pub mod results;
pub mod roles;
pub(crate) mod stats;
#[cfg(test)]
pub(crate) mod testdata;
pub mod tls;
pub mod units;
pub mod verify;
