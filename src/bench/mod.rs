//! The benchmark run: plan the cells, execute them through a [`lab::Lab`],
//! judge each with the gates and store it at once.
//!
//! This module owns the order of work and the rules of a run. It talks to
//! containers, the loader and the probe only through the [`lab::Lab`] trait,
//! so the whole pipeline runs against a scripted fake in unit tests.

mod budget;
pub mod docker_lab;
pub mod environment;
pub mod execute;
pub mod host;
pub mod hosts;
pub mod lab;
pub mod progress;
pub mod run;
pub mod store;

pub use environment::EnvRefused;
pub use run::RunInputError;
pub use store::StoreError;

#[cfg(test)]
pub(crate) mod fake;
#[cfg(test)]
mod tests;

use chrono::{DateTime, Utc};

use crate::profile::Profile;
use crate::results::{Environment, Results, RunTiming, Thresholds, SCHEMA_VERSION};

/// The results of a run that has not measured anything yet: what was asked
/// (profile, plan, skips), where (environment) and by which rules.
pub fn new_results(
    run_id: &str,
    started_at: DateTime<Utc>,
    profile: &Profile,
    plan: &crate::plan::Plan,
    environment: Environment,
    thresholds: Thresholds,
) -> Results {
    Results {
        schema_version: SCHEMA_VERSION,
        fairground_version: env!("CARGO_PKG_VERSION").to_string(),
        run_id: run_id.to_string(),
        profile_name: profile.name.clone(),
        profile: profile.clone(),
        started_at,
        finished_at: None,
        interrupted: false,
        environment,
        thresholds,
        plan: plan.keys(),
        frameworks: Vec::new(),
        skipped: plan.skipped.clone(),
        cells: Vec::new(),
        incidents: Vec::new(),
        resumed_environments: Vec::new(),
        docker_runs: Vec::new(),
        loader_images: Vec::new(),
        timing: RunTiming::default(),
        topology: None,
        objectives: Vec::new(),
        git: None,
        precision: None,
        budget: profile
            .budget
            .map(|b| crate::results::Budget::new(b.as_secs_f64())),
    }
}
