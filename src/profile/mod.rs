//! Benchmark profiles: `profiles/NAME.yaml` → a validated [`Profile`].
//!
//! A profile says what to measure (frameworks, scenarios, concurrency,
//! rounds), how (warm-up, window, load mode), under which limits (server and
//! loader CPUs, memory, nofile, sysctls, network) and when a result counts
//! (thresholds). docs/profiles.md documents every field.
//!
//! Layout: `raw` is the file format (serde + JSON Schema), `validate` turns it
//! into the typed `types` (defaults filled, cross-field rules checked),
//! `span` maps field paths to line:column, `units` parses durations, sizes and
//! core lists, `error` is the one error type. A profile is read in
//! [`load_str`] and judged in `validate`; nowhere else.
//!
//! This module reads files and `/sys`/`/proc` facts only: it starts nothing
//! and writes nothing.

mod error;
pub mod hosts;
pub mod objectives;
mod raw;
mod span;
pub mod thresholds;
mod types;
pub mod units;
mod validate;

use std::path::{Path, PathBuf};

pub use crate::host::CoreList;
pub use error::ProfileError;
pub use raw::RawProfile;
pub use types::*;
pub use validate::{parse_port_range, SysctlKind, SYSCTLS};

/// Environment variable naming the folder bare profile names are looked up
/// in (default `profiles` in the current directory).
pub const PROFILES_ENV: &str = "FAIRGROUND_PROFILES";
/// Folder bare profile names are looked up in when [`PROFILES_ENV`] is unset.
pub const PROFILES_DIR: &str = "profiles";
/// Folder whose subfolders (with a framework.yaml) are the known frameworks.
pub const FRAMEWORKS_DIR: &str = "frameworks";

/// What validation needs to know about the machine, so tests can inject it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    /// Cores online (`/sys/devices/system/cpu/online`).
    pub cores_online: CoreList,
    /// The host's ephemeral port range, which the loader uses in host
    /// network mode; `None` when unknown.
    pub ip_local_port_range: Option<(u16, u16)>,
    /// The frameworks a profile may name, when their folder exists; `None`
    /// skips the name check.
    pub frameworks: Option<Roster>,
}

/// The framework folder names found in the folders a run uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roster {
    /// The folders searched (named in errors).
    pub dirs: Vec<std::path::PathBuf>,
    /// Subfolder names holding a framework.yaml, sorted.
    pub names: Vec<String>,
}

impl HostFacts {
    /// Read the facts of this machine (and the frameworks/ folder of the
    /// current directory).
    pub fn detect() -> Self {
        Self::detect_under(Path::new("/"))
    }

    /// The facts read under `root` (`/`, or a fixture tree): cores online
    /// (this machine's parallelism when the tree does not say) and the
    /// ephemeral port range.
    pub fn detect_under(root: &Path) -> Self {
        let sysctls = crate::host::Sysctls::read(root, &[crate::host::sysctl::IP_LOCAL_PORT_RANGE]);
        HostFacts {
            cores_online: crate::host::cpu::online(root)
                .unwrap_or_else(crate::host::cpu::online_here),
            ip_local_port_range: sysctls.ok().and_then(|s| s.port_range()),
            frameworks: framework_roster(Path::new(FRAMEWORKS_DIR)),
        }
    }

    /// A host with cores `0..n`, the kernel's default port range and no
    /// framework roster: for tests.
    pub fn with_cores(n: usize) -> Self {
        HostFacts {
            cores_online: CoreList::first(n),
            ip_local_port_range: Some(KERNEL_PORT_RANGE),
            frameworks: None,
        }
    }
}

/// Framework folder names under `root` that hold a manifest, sorted; `None`
/// when `root` does not exist. Manifests are not parsed here: a broken
/// manifest is `framework`'s error to report, not the profile's.
pub fn framework_roster(root: &Path) -> Option<Roster> {
    framework_names(root).map(|names| Roster {
        dirs: vec![root.to_path_buf()],
        names,
    })
}

/// The roster of several folders; `None` when none of them exists.
pub fn framework_roster_of(roots: &[PathBuf]) -> Option<Roster> {
    let mut names: Vec<String> = Vec::new();
    let mut found = false;
    for root in roots {
        if let Some(n) = framework_names(root) {
            found = true;
            names.extend(n);
        }
    }
    names.sort();
    found.then(|| Roster {
        dirs: roots.to_vec(),
        names,
    })
}

fn framework_names(root: &Path) -> Option<Vec<String>> {
    let entries = std::fs::read_dir(root).ok()?;
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join(crate::framework::MANIFEST).is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    Some(names)
}

/// The candidate closest to `word`, if any is close enough to be a typo
/// (Jaro-Winkler similarity ≥ 0.8, case-insensitive).
pub fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let w = word.to_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(&w, &c.to_lowercase()), c))
        .filter(|(score, c)| *score >= 0.8 && *c != word)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// Parse and validate profile `text`, read from `path` (used in messages and
/// for the profile's name).
pub fn load_str(text: &str, path: &Path, host: &HostFacts) -> Result<Profile, ProfileError> {
    let spans = span::Spans::parse(text).map_err(|(pos, message)| ProfileError::Syntax {
        path: path.to_path_buf(),
        line: pos.line,
        col: pos.col,
        message,
    })?;
    let loc = error::Locator {
        path,
        spans: &spans,
        text,
    };
    if text.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l == "---"
    }) {
        return Err(loc.value(
            "",
            "the file is empty; a profile is a YAML mapping (see docs/profiles.md)",
        ));
    }
    let raw: RawProfile = serde_saphyr::from_str(text).map_err(|e| loc.yaml_error(&e))?;
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    validate::validate(raw, name, &loc, host)
}

/// Read, parse and validate the profile at `path` against `host`.
pub fn load_file_with(path: &Path, host: &HostFacts) -> Result<Profile, ProfileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    load_str(&text, path, host)
}

/// Read, parse and validate the profile at `path` against this machine.
/// Errors exit with code 2.
pub fn load_file(path: &Path) -> anyhow::Result<Profile> {
    Ok(load_file_with(path, &HostFacts::detect())?)
}

/// The folder bare profile names are looked up in.
pub fn profiles_dir() -> PathBuf {
    std::env::var_os(PROFILES_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(PROFILES_DIR))
}

/// The file a name or path refers to: anything with a `/` or a `.yaml`/`.yml`
/// ending is a path; a bare NAME is `<profiles dir>/NAME.yaml`.
pub fn locate(name_or_path: &str) -> Result<PathBuf, ProfileError> {
    let looks_like_path = name_or_path.contains('/')
        || name_or_path.ends_with(".yaml")
        || name_or_path.ends_with(".yml");
    if looks_like_path {
        return Ok(PathBuf::from(name_or_path));
    }
    let dir = profiles_dir();
    let path = dir.join(format!("{name_or_path}.yaml"));
    if path.is_file() {
        return Ok(path);
    }
    let available = available(&dir);
    let suggestion =
        suggest(name_or_path, available.iter().map(String::as_str)).map(str::to_string);
    Err(ProfileError::NotFound {
        name: name_or_path.to_string(),
        path,
        available,
        suggestion,
    })
}

/// Profile names (file stems) in `dir`, sorted.
pub fn available(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(str::to_string))
        .collect();
    names.sort();
    names
}

/// Find and load a profile by bare name (`standard`) or path. Errors exit
/// with code 2. Returns the profile and the file it came from.
pub fn resolve(name_or_path: &str) -> anyhow::Result<(Profile, PathBuf)> {
    resolve_with(name_or_path, &HostFacts::detect())
}

/// [`resolve`] against given host facts.
pub fn resolve_with(name_or_path: &str, host: &HostFacts) -> anyhow::Result<(Profile, PathBuf)> {
    let path = locate(name_or_path)?;
    let profile = load_file_with(&path, host)?;
    Ok((profile, path))
}

/// The JSON Schema of the profile format, pretty-printed with a final newline
/// (the text of docs/profile.schema.json).
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(RawProfile);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests;
