//! The incremental store: results.json in the run directory, rewritten
//! atomically after every finished cell so an interrupted run loses nothing
//! it measured, and reloaded by `--resume DIR` to skip finished cells.
//!
//! This module owns the file and its atomic replacement. It never judges or
//! renders; `report` writes the other output files.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::results::{self, Cell, CellKey, Results, RESULTS_FILE};

/// results.json of one run directory, kept in memory and on disk in step.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    results: Results,
}

/// Why a run directory cannot be started.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// It already holds a run.
    #[error("{} already exists; pass `--resume {}` to continue that run, or choose another --output", path.display(), dir.display())]
    Exists {
        /// Its results.json.
        path: PathBuf,
        /// The run directory.
        dir: PathBuf,
    },
}

impl crate::exit::ExitCodeOf for StoreError {
    fn exit_code(&self) -> crate::exit::ExitCode {
        match self {
            StoreError::Exists { .. } => crate::exit::ExitCode::BadInput,
        }
    }
}

impl Store {
    /// Start a new run in `dir` (created if missing) and write `results` at
    /// once. Refuses a directory that already holds results: use resume.
    pub fn create(dir: &Path, results: Results) -> anyhow::Result<Store> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the run directory {}", dir.display()))?;
        let path = dir.join(RESULTS_FILE);
        if path.exists() {
            return Err(StoreError::Exists {
                path,
                dir: dir.to_path_buf(),
            }
            .into());
        }
        let store = Store {
            dir: dir.to_path_buf(),
            results,
        };
        store.save()?;
        Ok(store)
    }

    /// Reopen the run in `dir` to finish it.
    pub fn resume(dir: &Path) -> anyhow::Result<Store> {
        let results = results::read_file(&dir.join(RESULTS_FILE)).context("cannot resume")?;
        Ok(Store {
            dir: dir.to_path_buf(),
            results,
        })
    }

    /// The run directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The results as stored.
    pub fn results(&self) -> &Results {
        &self.results
    }

    /// Whether `key` already has a finished cell.
    pub fn is_done(&self, key: &CellKey) -> bool {
        self.results.cell(key).is_some()
    }

    /// Record a finished cell (replacing an earlier one with the same key)
    /// and write the file at once.
    pub fn append_cell(&mut self, cell: Cell) -> anyhow::Result<()> {
        self.results.cells.retain(|c| c.key != cell.key);
        self.results.cells.push(cell);
        // Each new cell can move the places of those beside it.
        crate::compare::rank::assign(&mut self.results);
        crate::compare::precision::assign(&mut self.results);
        self.save()
    }

    /// Change the results (framework facts, skips, end time) and write at once.
    pub fn update(&mut self, change: impl FnOnce(&mut Results)) -> anyhow::Result<()> {
        change(&mut self.results);
        self.save()
    }

    fn save(&self) -> anyhow::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(&self.results).context("serialising results")?;
        bytes.push(b'\n');
        crate::report::write_atomic(&self.dir.join(RESULTS_FILE), &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::sample_results;

    #[test]
    fn every_appended_cell_is_on_disk_at_once() {
        let tmp = tempfile::tempdir().unwrap();
        let mut all = sample_results();
        let cells = std::mem::take(&mut all.cells);
        let mut store = Store::create(tmp.path(), all).unwrap();
        store.append_cell(cells[0].clone()).unwrap();
        // A second process (or a resumed run) sees exactly what was appended.
        let back = Store::resume(tmp.path()).unwrap();
        assert_eq!(back.results().cells.len(), 1);
        assert!(back.is_done(&cells[0].key));
        assert!(!back.is_done(&cells[1].key));
        assert_eq!(back.results().remaining().len(), cells.len() - 1);
        // No temporary files left behind.
        let names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(RESULTS_FILE)]);
    }

    #[test]
    fn refuses_to_overwrite_an_existing_run() {
        let tmp = tempfile::tempdir().unwrap();
        Store::create(tmp.path(), sample_results()).unwrap();
        let err = Store::create(tmp.path(), sample_results()).unwrap_err();
        assert!(format!("{err:#}").contains("--resume"), "{err:#}");
    }

    #[test]
    fn resume_names_the_directory_it_cannot_read() {
        let tmp = tempfile::tempdir().unwrap();
        let err = Store::resume(tmp.path()).unwrap_err();
        assert!(
            format!("{err:#}").contains(&tmp.path().display().to_string()),
            "{err:#}"
        );
    }

    #[test]
    fn appending_the_same_cell_again_replaces_it() {
        let tmp = tempfile::tempdir().unwrap();
        let mut all = sample_results();
        let cells = std::mem::take(&mut all.cells);
        let mut store = Store::create(tmp.path(), all).unwrap();
        store.append_cell(cells[0].clone()).unwrap();
        store.append_cell(cells[0].clone()).unwrap();
        assert_eq!(store.results().cells.len(), 1);
    }
}
