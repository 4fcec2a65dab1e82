//! Every framework folder in the repository is buildable as described: its
//! manifest loads, its base is described under docker/bases/, and its
//! Dockerfile drops root. Catches a typo in a manifest before an image build
//! (minutes) or a run (much longer) does.

use std::path::Path;

use fairground::framework;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_framework_manifest_in_the_repository_loads() {
    let found = framework::discover(&repo().join("frameworks")).expect("frameworks/ must load");
    assert!(!found.is_empty(), "frameworks/ holds no framework.yaml");
}

#[test]
fn every_framework_base_is_scratch_or_described_under_docker_bases() {
    for fw in framework::discover(&repo().join("frameworks")).unwrap() {
        let base = &fw.manifest.base;
        if base == "scratch" {
            continue;
        }
        let described = repo().join("docker/bases").join(format!("{base}.yaml"));
        assert!(
            described.is_file(),
            "{}: base `{base}` has no {}",
            fw.name(),
            described.display()
        );
    }
}

#[test]
fn every_framework_image_runs_as_a_non_root_user() {
    for fw in framework::discover(&repo().join("frameworks")).unwrap() {
        let path = fw.dir.join("Dockerfile");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: cannot read {}: {e}", fw.name(), path.display()));
        // The last USER line is the one the container runs as.
        let user = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("USER "))
            .next_back()
            .unwrap_or_else(|| panic!("{}: Dockerfile has no USER line", fw.name()))
            .trim();
        let uid = user.split(':').next().unwrap_or_default();
        assert!(
            uid != "root" && uid != "0",
            "{}: Dockerfile runs as `{user}`; use an unprivileged user (e.g. 65534:65534)",
            fw.name()
        );
    }
}
