//! Every framework folder under frameworks/ is buildable as its manifest says,
//! checked without Docker in well under a second: the manifest loads, the base
//! is `scratch` or described in docker/bases/, the Dockerfile exists and takes
//! the base the way fairground passes it (`ARG BASE` / `FROM ${BASE}`), and a
//! cargo prebuild has what `cargo build --locked` needs (a committed
//! Cargo.lock, an empty `[workspace]` table so it is not taken for a member
//! of the fairground crate, and the named binary). A typo here otherwise
//! shows up minutes later, in an image build.

use std::path::{Path, PathBuf};

use fairground::docker::bases;
use fairground::framework::{self, Framework, Prebuild};

fn frameworks_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("frameworks")
}

fn all() -> Vec<Framework> {
    let found = framework::discover(&frameworks_dir())
        .unwrap_or_else(|e| panic!("frameworks/ must load: {e:#}"));
    assert!(!found.is_empty(), "frameworks/ holds no framework.yaml");
    found
}

fn dockerfile(fw: &Framework) -> String {
    let path = fw.dir.join("Dockerfile");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: cannot read {}: {e}", fw.name(), path.display()))
}

#[test]
fn every_manifest_names_scratch_or_a_base_described_in_docker_bases() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for fw in all() {
        let base = &fw.manifest.base;
        if base != "scratch" {
            if let Err(e) = bases::load_spec(root, base) {
                panic!("{}: base `{base}` does not load: {e}", fw.name());
            }
        }
    }
}

#[test]
fn every_base_description_parses() {
    // A plain YAML scalar cannot hold `: ` (a description like
    // "JDK: javac ..." broke the java base once); the real parser says so.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("docker/bases");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        match bases::load_spec(root, &name) {
            Ok((spec, _)) => assert!(
                !spec.packages.is_empty(),
                "{}: lists no packages",
                path.display()
            ),
            Err(e) => panic!("{}: {e}", path.display()),
        }
        seen += 1;
    }
    assert!(seen > 0, "no base descriptions in {}", dir.display());
}

#[test]
fn every_dockerfile_builds_from_the_base_fairground_passes() {
    for fw in all() {
        let text = dockerfile(&fw);
        let first_from = text
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("FROM "))
            .unwrap_or_else(|| panic!("{}: Dockerfile has no FROM line", fw.name()));
        if fw.manifest.base == "scratch" {
            assert_eq!(
                first_from,
                "FROM scratch",
                "{}: base is scratch, so the Dockerfile must start FROM scratch",
                fw.name()
            );
        } else {
            assert!(
                text.lines().any(|l| l.trim() == "ARG BASE"),
                "{}: Dockerfile must declare `ARG BASE` (fairground passes --build-arg BASE=<image>)",
                fw.name()
            );
            assert!(
                first_from.starts_with("FROM ${BASE}"),
                "{}: first stage must be `FROM ${{BASE}}`, found `{first_from}`",
                fw.name()
            );
        }
    }
}

#[test]
fn every_image_records_versions_in_the_versions_file() {
    for fw in all() {
        let text = dockerfile(&fw);
        // Either written in the build (`> /fairground/versions.txt`), copied
        // from a build stage that wrote it under /out/fairground, or copied
        // from the cargo prebuild's versions.txt.
        let records = text.contains(framework::VERSIONS_FILE)
            || text.contains("/out/fairground/versions.txt")
            || text.contains("COPY versions.txt");
        assert!(
            records,
            "{}: Dockerfile never writes {}",
            fw.name(),
            framework::VERSIONS_FILE
        );
    }
}

#[test]
fn every_cargo_prebuild_is_a_locked_standalone_project_with_its_binary() {
    for fw in all() {
        let Some(Prebuild::Cargo { bin }) = &fw.manifest.prebuild else {
            continue;
        };
        assert!(
            fw.dir.join("Cargo.lock").is_file(),
            "{}: cargo prebuild needs a committed Cargo.lock (the build runs with --locked)",
            fw.name()
        );
        let toml_path = fw.dir.join("Cargo.toml");
        let toml = std::fs::read_to_string(&toml_path)
            .unwrap_or_else(|e| panic!("{}: cannot read {}: {e}", fw.name(), toml_path.display()));
        assert!(
            toml.lines().any(|l| l.trim() == "[workspace]"),
            "{}: Cargo.toml needs an empty `[workspace]` table, or cargo takes it for a member of the fairground crate",
            fw.name()
        );
        assert!(
            toml.lines()
                .any(|l| l.trim() == format!("name = \"{bin}\"")),
            "{}: prebuild names binary `{bin}` but Cargo.toml has no target named so",
            fw.name()
        );
    }
}

#[test]
fn every_framework_listens_where_the_contract_expects() {
    for fw in all() {
        assert_eq!(fw.manifest.port, 8080, "{}: serve on port 8080", fw.name());
        assert_eq!(
            fw.manifest.readiness,
            "/",
            "{}: readiness path is /",
            fw.name()
        );
    }
}

#[test]
fn every_framework_image_runs_as_a_non_root_user() {
    for fw in all() {
        // The last USER line is the one the container runs as.
        let text = dockerfile(&fw);
        let user = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("USER "))
            .next_back()
            .unwrap_or_else(|| panic!("{}: Dockerfile has no USER line", fw.name()))
            .trim()
            .to_string();
        let uid = user.split(':').next().unwrap_or_default();
        assert!(
            uid != "root" && uid != "0",
            "{}: Dockerfile runs as `{user}`; use an unprivileged user (e.g. 65534:65534)",
            fw.name()
        );
    }
}

#[test]
fn every_declared_connection_ceiling_is_in_the_docs_with_its_figure() {
    // A ceiling in framework.yaml (`limits:`) is a claim about the framework;
    // docs/frameworks.md ("Declared ceilings") carries the measurement.
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/frameworks.md"))
            .unwrap();
    for fw in all() {
        if let Some(limits) = &fw.manifest.limits {
            let row = format!(
                "| {} | {} |",
                fw.name(),
                fairground::units::thousands(f64::from(limits.max_connections))
            );
            assert!(
                docs.contains(&row),
                "{}: declares at most {} connections, but docs/frameworks.md has no row `{row}`",
                fw.name(),
                limits.max_connections
            );
        }
    }
}

#[test]
fn every_grpc_framework_carries_the_contracts_bench_proto_byte_for_byte() {
    let proto =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/contract/bench.proto"))
            .unwrap();
    for fw in all() {
        let declares = fw.manifest.scenarios.iter().any(|s| s.is_grpc());
        let copy = fw.dir.join("bench.proto");
        if declares {
            let got = std::fs::read(&copy).unwrap_or_else(|e| {
                panic!("{}: declares gRPC but has no bench.proto: {e}", fw.name())
            });
            assert!(
                got == proto,
                "{}: bench.proto differs from src/contract/bench.proto: copy it again",
                fw.name()
            );
            assert!(
                fw.manifest.protocols.iter().any(|p| p.is_http2()),
                "{}: gRPC runs over HTTP/2, and the manifest lists neither h2 nor h2c",
                fw.name()
            );
        } else {
            assert!(
                !copy.exists(),
                "{}: a bench.proto but no gRPC scenario",
                fw.name()
            );
        }
    }
}
