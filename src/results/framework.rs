//! Facts about each framework of a run: what it is, its image, the limits
//! Docker applied, cold starts, idle memory, and what verification found.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{AppliedLimits, Exclusion, PhaseTimes};
use crate::contract::Scenario;

/// Facts about one framework, measured or read during the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FrameworkFacts {
    /// Framework name (folder under frameworks/).
    pub name: String,
    /// Implementation language.
    pub language: String,
    /// Human name, e.g. `FastAPI on Uvicorn`.
    pub display_name: String,
    /// How the server uses its CPUs (workers, threads), from the manifest.
    pub workers: String,
    /// Component versions read from the image (/fairground/versions.txt).
    pub versions: BTreeMap<String, String>,
    /// Docker image id.
    pub image_id: Option<String>,
    /// Image size, bytes (as reported by the Docker daemon).
    pub image_size_bytes: Option<u64>,
    /// Size of the server binary or app bundle, bytes.
    pub binary_size_bytes: Option<u64>,
    /// Non-blank, non-comment lines of the app's own source.
    pub app_lines_of_code: Option<u64>,
    /// Limits as the daemon reports them on the running container.
    pub limits: Option<AppliedLimits>,
    /// Container start to first 200 on the readiness path, ms; one per start.
    pub cold_start_ms: Vec<f64>,
    /// How many of `cold_start_ms` are upper bounds: the first readiness
    /// probe already got its 200, so the server may have been ready sooner.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cold_start_upper_bounds: u32,
    /// Memory in use after the settle period, before any load, bytes
    /// (cgroup memory.current, or memory.usage_in_bytes on cgroup v1).
    pub idle_memory_bytes: Option<u64>,
    /// Contract verification outcome; absent if verification did not run.
    pub verify: Option<VerifyOutcome>,
    /// Why the framework produced no cells at all (build or start failure).
    pub failure: Option<String>,
    /// Wall time spent on this framework, by phase (every start and round).
    #[serde(default)]
    pub phases: PhaseTimes,
}

impl FrameworkFacts {
    /// Empty facts for framework `name`.
    pub fn named(name: &str) -> FrameworkFacts {
        FrameworkFacts {
            name: name.to_string(),
            ..FrameworkFacts::default()
        }
    }
}

/// What contract verification found for one framework.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VerifyOutcome {
    /// Checks performed.
    pub checks: u64,
    /// Checks failed.
    pub failed: u64,
    /// Scenarios that passed and were measured.
    pub passed: Vec<Scenario>,
    /// Scenarios excluded from measurement, with what verify found.
    pub excluded: Vec<Exclusion>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
