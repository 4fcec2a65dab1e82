//! Framework manifests: `frameworks/NAME/framework.yaml`, discovery and checks.
//!
//! A manifest says what a framework is (language, versions), how its image is
//! built (base image, optional sandboxed cargo build), how it is served (port,
//! readiness path, workers) and which contract scenarios it answers. This
//! module parses and validates manifests; it builds nothing and starts nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::contract::{Protocol, Scenario};
use crate::exit::{ExitCode, ExitCodeOf};

/// Name of the manifest file inside each framework folder.
pub const MANIFEST: &str = "framework.yaml";

/// Environment variable every server container gets: the number of CPUs it
/// was allotted. Frameworks with workers start exactly this many, so every
/// framework follows the same rule.
pub const CPUS_ENV: &str = "FAIRGROUND_CPUS";

/// Path inside every framework image of a text file with one `name version`
/// line per component (runtime, framework, key libraries), written at build
/// time from what was really installed. The report shows it.
pub const VERSIONS_FILE: &str = "/fairground/versions.txt";

/// A framework manifest as written in `framework.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Short name; must equal the folder name.
    pub name: String,
    /// Implementation language, e.g. `rust`, `go`, `python`.
    pub language: String,
    /// Human name of the framework, e.g. `axum` or `FastAPI on Uvicorn`.
    pub framework: String,
    /// Base image: `scratch`, or the name of a base described by
    /// `docker/bases/NAME.yaml` (built from the Debian archive when missing).
    pub base: String,
    /// Build step run before `docker build`, if any (compiles in a build
    /// container, never on the host).
    #[serde(default)]
    pub prebuild: Option<Prebuild>,
    /// TCP port the server listens on inside the container.
    #[serde(default = "default_port")]
    pub port: u16,
    /// Path that answers 200 once the server is ready.
    #[serde(default = "default_readiness")]
    pub readiness: String,
    /// Contract scenarios this framework implements.
    pub scenarios: Vec<Scenario>,
    /// Protocols it serves (docs/contract.md, "Protocols"): `http1` on
    /// `port`; `https` and `h2` over TLS on [`crate::contract::TLS_PORT`]
    /// with the run's certificate; `h2c` on [`crate::contract::H2C_PORT`].
    /// Absent: `[http1]`.
    #[serde(default = "default_protocols", skip_serializing_if = "is_http1_only")]
    pub protocols: Vec<Protocol>,
    /// How the server uses the CPUs it is given (workers, threads, event loop).
    pub workers: String,
    /// Whether the server runs with a read-only root filesystem.
    #[serde(default = "default_true")]
    pub read_only_rootfs: bool,
    /// Extra environment for the server container.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// One line: how the app is served, for the report.
    pub notes: String,
    /// What the framework's own design cannot do, as measured: declared so
    /// that a run's rejection at that point reads as the framework's limit,
    /// not fairground's configuration. Absent: no known ceiling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
}

/// A framework's declared ceilings (`limits:` in framework.yaml).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Most connections one server with `FAIRGROUND_CPUS=1` holds and
    /// serves at once, as measured (docs/frameworks.md has the run).
    pub max_connections: u32,
    /// Why: the framework's design behind the ceiling, in one sentence.
    pub why: String,
}

/// A build step fairground runs before `docker build`: downloads on the host,
/// the compile in a build container with no network (nothing from the
/// framework's folder runs on the host).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum Prebuild {
    /// `cargo build --release` of the framework folder's own Cargo project,
    /// statically linked: `cargo fetch --locked` on the host, the compile in
    /// a build container (no network, unprivileged, read-only sources); the
    /// binary is placed in the build context as `app` and the resolved crate
    /// versions as `versions.txt`.
    Cargo {
        /// Name of the binary target to copy.
        bin: String,
    },
}

fn default_port() -> u16 {
    8080
}

fn default_readiness() -> String {
    "/".to_string()
}

fn default_true() -> bool {
    true
}

fn default_protocols() -> Vec<Protocol> {
    vec![Protocol::Http1]
}

fn is_http1_only(p: &[Protocol]) -> bool {
    p == [Protocol::Http1]
}

/// A manifest together with where it was found.
#[derive(Debug, Clone, PartialEq)]
pub struct Framework {
    /// The parsed manifest.
    pub manifest: Manifest,
    /// The framework's folder (the Docker build context).
    pub dir: PathBuf,
}

impl Framework {
    /// The framework's name.
    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    /// The connection ceiling the manifest declares, if any.
    pub fn max_connections(&self) -> Option<u32> {
        self.manifest.limits.as_ref().map(|l| l.max_connections)
    }

    /// Whether the framework declares it holds `n` connections at once
    /// (no declared ceiling, or one at or above `n`).
    pub fn holds_connections(&self, n: u32) -> bool {
        self.max_connections().is_none_or(|max| max >= n)
    }

    /// Whether the framework declares `scenario`.
    pub fn supports(&self, scenario: Scenario) -> bool {
        self.manifest.scenarios.iter().any(|s| s.covers(scenario))
    }

    /// Whether the framework declares a database scenario.
    pub fn declares_database(&self) -> bool {
        self.manifest.scenarios.iter().any(|s| s.needs_database())
    }

    /// Whether the framework declares it serves `protocol`.
    pub fn serves(&self, protocol: Protocol) -> bool {
        self.manifest.protocols.contains(&protocol)
    }

    /// Whether it serves anything over TLS (and so gets the run's
    /// certificate).
    pub fn needs_tls(&self) -> bool {
        self.manifest.protocols.iter().any(|p| p.is_tls())
    }
}

/// What is wrong with a framework folder or its manifest
/// (`frameworks/NAME/framework.yaml`), named by folder, file and field:
/// always the input's to fix.
#[derive(Debug, thiserror::Error)]
pub enum FrameworkError {
    /// A folder of frameworks cannot be listed.
    #[error("cannot list frameworks in {}: {source}", root.display())]
    NoFolder {
        /// The folder.
        root: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A manifest cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        /// The manifest.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// Two folders hold frameworks of one name.
    #[error("framework `{name}` is in both {} and {}; give one of the folders another name (and `name:` in its framework.yaml)", first.display(), second.display())]
    Twice {
        /// The name.
        name: String,
        /// The first folder holding it.
        first: PathBuf,
        /// The second.
        second: PathBuf,
    },
    /// The file is not a manifest (YAML syntax, an unknown or missing field).
    #[error("{}: {message}", path.display())]
    Malformed {
        /// The manifest.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// `name` is not the folder's name.
    #[error("{}: field `name` is `{name}` but the folder is `{folder}`; they must match", path.display())]
    NameMismatch {
        /// The manifest.
        path: PathBuf,
        /// The name written.
        name: String,
        /// The folder it is in.
        folder: String,
    },
    /// `scenarios` lists nothing.
    #[error("{}: field `scenarios` is empty; list at least one", path.display())]
    NoScenarios {
        /// The manifest.
        path: PathBuf,
    },
    /// `readiness` is not a path.
    #[error("{}: field `readiness` must be a path starting with `/`", path.display())]
    Readiness {
        /// The manifest.
        path: PathBuf,
    },
    /// `limits` lacks a ceiling or the reason for it.
    #[error("{}: `limits` needs `max_connections` of at least 1 and a `why`", path.display())]
    Limits {
        /// The manifest.
        path: PathBuf,
    },
    #[error(
        "{}: `protocols` must list `http1` (readiness and verification reach every \
         server over it) and each protocol once; known: http1, https, h2, h2c",
        path.display()
    )]
    Protocols {
        /// The manifest.
        path: PathBuf,
    },
}

impl ExitCodeOf for FrameworkError {
    fn exit_code(&self) -> ExitCode {
        match self {
            FrameworkError::NoFolder { .. } => ExitCode::BadInput,
            FrameworkError::Unreadable { .. } => ExitCode::BadInput,
            FrameworkError::Twice { .. } => ExitCode::BadInput,
            FrameworkError::Malformed { .. } => ExitCode::BadInput,
            FrameworkError::NameMismatch { .. } => ExitCode::BadInput,
            FrameworkError::NoScenarios { .. } => ExitCode::BadInput,
            FrameworkError::Readiness { .. } => ExitCode::BadInput,
            FrameworkError::Limits { .. } => ExitCode::BadInput,
            FrameworkError::Protocols { .. } => ExitCode::BadInput,
        }
    }
}

/// Read and check one manifest from `dir/framework.yaml`.
pub fn load(dir: &Path) -> Result<Framework, FrameworkError> {
    let path = dir.join(MANIFEST);
    match std::fs::read_to_string(&path) {
        Ok(text) => check(dir, path, &text),
        Err(source) => Err(FrameworkError::Unreadable { path, source }),
    }
}

/// The manifest `text` of the folder `dir`, parsed and checked.
fn check(dir: &Path, path: PathBuf, text: &str) -> Result<Framework, FrameworkError> {
    let manifest: Manifest = match serde_saphyr::from_str(text) {
        Ok(m) => m,
        Err(e) => {
            return Err(FrameworkError::Malformed {
                path,
                message: e.to_string(),
            })
        }
    };
    let folder = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    if manifest.name != folder {
        return Err(FrameworkError::NameMismatch {
            path,
            name: manifest.name,
            folder,
        });
    }
    if manifest.scenarios.is_empty() {
        return Err(FrameworkError::NoScenarios { path });
    }
    if !manifest.readiness.starts_with('/') {
        return Err(FrameworkError::Readiness { path });
    }
    if let Some(l) = &manifest.limits {
        if l.max_connections == 0 || l.why.trim().is_empty() {
            return Err(FrameworkError::Limits { path });
        }
    }
    let mut protocols = manifest.protocols.clone();
    protocols.sort_unstable();
    protocols.dedup();
    if !manifest.protocols.contains(&Protocol::Http1) || protocols.len() != manifest.protocols.len()
    {
        return Err(FrameworkError::Protocols { path });
    }
    Ok(Framework {
        manifest,
        dir: dir.to_path_buf(),
    })
}

/// Every framework under `root` (normally `frameworks/`), sorted by name.
/// Folders without a manifest are skipped; a broken manifest is an error.
pub fn discover(root: &Path) -> Result<Vec<Framework>, FrameworkError> {
    let no_folder = |source| FrameworkError::NoFolder {
        root: root.to_path_buf(),
        source,
    };
    let entries = std::fs::read_dir(root).map_err(no_folder)?;
    let mut found = Vec::new();
    for entry in entries {
        let dir = entry.map_err(no_folder)?.path();
        if dir.join(MANIFEST).is_file() {
            found.push(load(&dir)?);
        }
    }
    found.sort_by(|a, b| a.manifest.name.cmp(&b.manifest.name));
    Ok(found)
}

/// Every framework under each of `roots`, sorted by name. A name found in
/// two roots is an error naming both folders (it would be ambiguous which
/// one a profile means).
pub fn discover_all(roots: &[PathBuf]) -> Result<Vec<Framework>, FrameworkError> {
    let mut all: Vec<Framework> = Vec::new();
    for root in roots {
        for fw in discover(root)? {
            if let Some(other) = all.iter().find(|f| f.name() == fw.name()) {
                return Err(FrameworkError::Twice {
                    name: fw.name().to_string(),
                    first: other.dir.clone(),
                    second: fw.dir.clone(),
                });
            }
            all.push(fw);
        }
    }
    all.sort_by(|a, b| a.manifest.name.cmp(&b.manifest.name));
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frameworks_of_several_folders_are_one_roster_without_duplicates() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        write(a.path(), "demo", GOOD);
        write(
            b.path(),
            "demo-next",
            &GOOD.replace("name: demo", "name: demo-next"),
        );
        let roots = [a.path().to_path_buf(), b.path().to_path_buf()];
        let all = discover_all(&roots).unwrap();
        let names: Vec<&str> = all.iter().map(Framework::name).collect();
        assert_eq!(names, ["demo", "demo-next"]);
        write(b.path(), "demo", GOOD);
        let err = discover_all(&roots).unwrap_err().to_string();
        assert!(err.contains("`demo` is in both"), "{err}");
    }

    fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(MANIFEST), body).unwrap();
        d
    }

    const GOOD: &str = "name: demo\nlanguage: rust\nframework: demo\nbase: scratch\n\
        prebuild: {cargo: {bin: demo}}\nscenarios: [plaintext, middleware-3]\n\
        workers: one thread per CPU\nnotes: test\n";

    #[test]
    fn loads_a_manifest_with_defaults() {
        let tmp = tempfile::tempdir().unwrap();
        let fw = load(&write(tmp.path(), "demo", GOOD)).unwrap();
        assert_eq!(fw.manifest.port, 8080);
        assert_eq!(fw.manifest.readiness, "/");
        assert!(fw.supports(Scenario::Middleware(3)));
        assert_eq!(
            fw.manifest.prebuild,
            Some(Prebuild::Cargo { bin: "demo".into() })
        );
    }

    #[test]
    fn a_declared_connection_ceiling_is_read_and_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let fw = load(&write(tmp.path(), "demo", GOOD)).unwrap();
        assert_eq!(fw.max_connections(), None);
        assert!(fw.holds_connections(10_000));
        let limited = format!("{GOOD}limits: {{max_connections: 1024, why: one thread each}}\n");
        let fw = load(&write(tmp.path(), "demo", &limited)).unwrap();
        assert_eq!(fw.max_connections(), Some(1024));
        assert!(fw.holds_connections(1000) && !fw.holds_connections(10_000));
        let no_why = format!("{GOOD}limits: {{max_connections: 1024, why: \"\"}}\n");
        let err = load(&write(tmp.path(), "demo", &no_why)).unwrap_err();
        assert!(format!("{err:#}").contains("`limits`"), "{err:#}");
    }

    #[test]
    fn protocols_default_to_http1_and_must_include_it_once() {
        let tmp = tempfile::tempdir().unwrap();
        let fw = load(&write(tmp.path(), "demo", GOOD)).unwrap();
        assert_eq!(fw.manifest.protocols, vec![Protocol::Http1]);
        assert!(!fw.needs_tls());
        let all = format!("{GOOD}protocols: [http1, https, h2, h2c]\n");
        let fw = load(&write(tmp.path(), "demo", &all)).unwrap();
        assert!(fw.serves(Protocol::H2c) && fw.needs_tls());
        for bad in ["[https, h2]", "[http1, h2, h2]", "[http1, h3]"] {
            let text = format!("{GOOD}protocols: {bad}\n");
            let err = load(&write(tmp.path(), "demo", &text)).unwrap_err();
            assert!(format!("{err:#}").contains("protocols"), "{bad}: {err:#}");
        }
    }

    #[test]
    fn rejects_name_that_differs_from_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let err = load(&write(tmp.path(), "other", GOOD)).unwrap_err();
        assert!(format!("{err:#}").contains("folder is `other`"), "{err:#}");
    }

    #[test]
    fn rejects_unknown_fields_and_scenarios() {
        let tmp = tempfile::tempdir().unwrap();
        let err = load(&write(tmp.path(), "demo", &format!("{GOOD}colour: red\n"))).unwrap_err();
        assert!(format!("{err:#}").contains("colour"), "{err:#}");
        let bad = GOOD.replace("middleware-3", "plain");
        let err = load(&write(tmp.path(), "demo", &bad)).unwrap_err();
        assert!(format!("{err:#}").contains("unknown scenario"), "{err:#}");
    }
}
