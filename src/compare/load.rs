//! Reading the two sides of a comparison and pairing their cells.
//!
//! A side is a run directory or its results.json, optionally followed by
//! `:FRAMEWORK` to take one framework of it (`RUN:a RUN:b` compares two
//! frameworks of one run). Cells pair up by framework, scenario,
//! concurrency and rate; when the sides name frameworks, by scenario,
//! concurrency and rate. This file reads and pairs; it computes nothing.

use std::path::{Path, PathBuf};

use super::model::CellRef;
use crate::exit::{ExitCode, ExitCodeOf};
use crate::results::{self, Cell, Results};

/// What is wrong with the sides given to `compare`: always bad input.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// A side is not a run.
    #[error("{arg}: no results.json at {}; give a run directory written by `fairground run` (or its results.json), optionally followed by :FRAMEWORK", file.display())]
    NoResults {
        /// The side as given.
        arg: String,
        /// Where results.json was looked for.
        file: PathBuf,
    },
    /// A side names a framework its run does not have.
    #[error("{}: run {run} has no cell of framework `{framework}` (it has: {has})", file.display())]
    NoSuchFramework {
        /// The side's results.json.
        file: PathBuf,
        /// Its run id.
        run: String,
        /// The framework named.
        framework: String,
        /// The frameworks it has, or `none`.
        has: String,
    },
    /// One side names a framework and the other does not.
    #[error("a framework is named on one side only; name one on both (RUN:a RUN:b), or on neither to compare every framework")]
    OneSided,
    /// No cell of one side matches one of the other.
    #[error("no cell of {} matches one of {} (cells pair up by framework, scenario, connections and rate); nothing to compare", base.display(), new.display())]
    NothingPaired {
        /// BASE's results.json.
        base: PathBuf,
        /// NEW's results.json.
        new: PathBuf,
    },
}

impl ExitCodeOf for InputError {
    fn exit_code(&self) -> ExitCode {
        match self {
            InputError::NoResults { .. } => ExitCode::BadInput,
            InputError::NoSuchFramework { .. } => ExitCode::BadInput,
            InputError::OneSided => ExitCode::BadInput,
            InputError::NothingPaired { .. } => ExitCode::BadInput,
        }
    }
}

/// A side as given on the command line, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideSpec {
    /// The results.json to read.
    pub file: PathBuf,
    /// The framework to take from it, if one was named.
    pub framework: Option<String>,
}

impl SideSpec {
    /// Parse `PATH` or `PATH:FRAMEWORK`. A path that exists is taken whole
    /// (so a directory whose name holds a colon still works); otherwise the
    /// text after the last colon names a framework.
    pub fn parse(arg: &str) -> anyhow::Result<SideSpec> {
        let whole = Path::new(arg);
        let (path, framework) = if whole.exists() {
            (whole.to_path_buf(), None)
        } else {
            match arg.rsplit_once(':') {
                Some((p, fw)) if !fw.is_empty() && !fw.contains('/') => {
                    (PathBuf::from(p), Some(fw.to_string()))
                }
                _ => (whole.to_path_buf(), None),
            }
        };
        let file = if path.is_dir() {
            path.join(results::RESULTS_FILE)
        } else {
            path
        };
        if !file.is_file() {
            return Err(InputError::NoResults {
                arg: arg.to_string(),
                file,
            }
            .into());
        }
        Ok(SideSpec { file, framework })
    }
}

/// A side, read.
#[derive(Debug, Clone)]
pub struct LoadedSide {
    /// What was asked for.
    pub spec: SideSpec,
    /// The run's results.
    pub results: Results,
}

/// Read the results of `spec`; a missing or foreign file, or a framework
/// the run does not have, is bad input (exit 2).
pub fn read(spec: SideSpec) -> anyhow::Result<LoadedSide> {
    let results = results::read_file(&spec.file)?;
    if let Some(fw) = &spec.framework {
        if !results.cells.iter().any(|c| &c.key.framework == fw) {
            let mut names: Vec<&str> = results
                .cells
                .iter()
                .map(|c| c.key.framework.as_str())
                .collect();
            names.dedup();
            return Err(InputError::NoSuchFramework {
                file: spec.file.clone(),
                run: results.run_id.clone(),
                framework: fw.clone(),
                has: if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                },
            }
            .into());
        }
    }
    Ok(LoadedSide { spec, results })
}

/// The cells of both sides, paired.
#[derive(Debug, Default)]
pub struct Pairing<'a> {
    /// Cells on both sides, in BASE's order.
    pub both: Vec<(CellRef, &'a Cell, &'a Cell)>,
    /// Cells on BASE only.
    pub only_base: Vec<CellRef>,
    /// Cells on NEW only.
    pub only_new: Vec<CellRef>,
}

/// Pair the cells of `base` and `new`. With frameworks named on both
/// sides, only those frameworks' cells take part and the framework is not
/// part of the match; with none named, every cell takes part.
pub fn pair<'a>(base: &'a LoadedSide, new: &'a LoadedSide) -> anyhow::Result<Pairing<'a>> {
    let named = match (&base.spec.framework, &new.spec.framework) {
        (Some(a), Some(b)) => Some((a.as_str(), b.as_str())),
        (None, None) => None,
        _ => return Err(InputError::OneSided.into()),
    };
    let take = |side: &'a LoadedSide, fw: Option<&str>| -> Vec<&'a Cell> {
        side.results
            .cells
            .iter()
            .filter(|c| fw.is_none_or(|f| c.key.framework == f))
            .collect()
    };
    let b_cells = take(base, named.map(|n| n.0));
    let n_cells = take(new, named.map(|n| n.1));
    let same = |a: &Cell, b: &Cell| {
        a.key.scenario == b.key.scenario
            && a.key.concurrency == b.key.concurrency
            && a.key.rate == b.key.rate
            && (named.is_some() || a.key.framework == b.key.framework)
    };
    let cref = |b: &Cell, n: &Cell| CellRef {
        base_framework: b.key.framework.clone(),
        new_framework: n.key.framework.clone(),
        scenario: b.key.scenario,
        concurrency: b.key.concurrency,
        rate: b.key.rate,
    };
    let mut out = Pairing::default();
    for b in &b_cells {
        match n_cells.iter().find(|n| same(b, n)) {
            Some(n) => out.both.push((cref(b, n), b, n)),
            None => out.only_base.push(cref(b, b)),
        }
    }
    for n in &n_cells {
        if !b_cells.iter().any(|b| same(b, n)) {
            out.only_new.push(cref(n, n));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::sample_results;

    fn side(framework: Option<&str>) -> LoadedSide {
        LoadedSide {
            spec: SideSpec {
                file: PathBuf::from("x/results.json"),
                framework: framework.map(str::to_string),
            },
            results: sample_results(),
        }
    }

    #[test]
    fn parses_a_framework_after_the_last_colon_unless_the_path_exists() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("run:1");
        std::fs::create_dir(&run).unwrap();
        std::fs::write(run.join("results.json"), "{}").unwrap();
        let whole = SideSpec::parse(run.to_str().unwrap()).unwrap();
        assert_eq!(whole.framework, None);
        assert_eq!(whole.file, run.join("results.json"));
        let named = SideSpec::parse(&format!("{}:axum", run.display())).unwrap();
        assert_eq!(named.framework.as_deref(), Some("axum"));
        assert_eq!(named.file, run.join("results.json"));
        let err = SideSpec::parse(&format!("{}/nope:axum", tmp.path().display())).unwrap_err();
        assert_eq!(crate::cli::exit_code(&err), ExitCode::BadInput);
    }

    #[test]
    fn pairs_every_cell_of_a_run_with_itself() {
        let (a, b) = (side(None), side(None));
        let p = pair(&a, &b).unwrap();
        assert_eq!(p.both.len(), a.results.cells.len());
        assert!(p.only_base.is_empty() && p.only_new.is_empty());
    }

    #[test]
    fn two_named_frameworks_pair_by_scenario_and_load() {
        let r = sample_results();
        let names: Vec<String> = {
            let mut v: Vec<String> = r.cells.iter().map(|c| c.key.framework.clone()).collect();
            v.dedup();
            v
        };
        let (a, b) = (side(Some(&names[0])), side(Some(&names[1])));
        let p = pair(&a, &b).unwrap();
        assert!(!p.both.is_empty());
        for (c, x, y) in &p.both {
            assert_eq!(
                (x.key.scenario, x.key.concurrency),
                (y.key.scenario, y.key.concurrency)
            );
            assert_eq!(c.base_framework, names[0]);
            assert_eq!(c.new_framework, names[1]);
        }
        let err = pair(&side(Some(&names[0])), &side(None)).unwrap_err();
        assert_eq!(crate::cli::exit_code(&err), ExitCode::BadInput);
    }
}
