//! Reading the two sides of a comparison and pairing their cells.
//!
//! A side is a run directory or its results.json, optionally followed by
//! `:FRAMEWORK` to take one framework of it (`RUN:a RUN:b` compares two
//! frameworks of one run). Cells pair up by framework, scenario,
//! concurrency and rate; when the sides name frameworks, by scenario,
//! concurrency and rate. This file reads and pairs; it computes nothing.

use std::path::{Path, PathBuf};

use super::model::CellRef;
use crate::contract::Protocol;
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
    /// A side names a protocol fairground does not know.
    #[error("{arg}: `{protocol}` is not a protocol (http1, https, h2 or h2c)")]
    NoSuchProtocol {
        /// The side as given.
        arg: String,
        /// What was named.
        protocol: String,
    },
    /// One side names a protocol and the other does not.
    #[error("a protocol is named on one side only; name one on both (RUN:a/h2 RUN:b/http1), or on neither to pair cells of the same protocol")]
    OneSidedProtocol,
    /// One side names a framework and the other does not.
    #[error("a framework is named on one side only; name one on both (RUN:a RUN:b), or on neither to compare every framework")]
    OneSided,
    /// No cell of one side matches one of the other.
    #[error("no cell of {} matches one of {} (cells pair up by framework, scenario, protocol, connections and rate); nothing to compare", base.display(), new.display())]
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
            InputError::NoSuchProtocol { .. } => ExitCode::BadInput,
            InputError::OneSidedProtocol => ExitCode::BadInput,
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
    /// The protocol to take of that framework, if one was named
    /// (`RUN:nginx/h2`).
    pub protocol: Option<Protocol>,
}

impl SideSpec {
    /// Parse `PATH` or `PATH:FRAMEWORK`. A path that exists is taken whole
    /// (so a directory whose name holds a colon still works); otherwise the
    /// text after the last colon names a framework.
    pub fn parse(arg: &str) -> anyhow::Result<SideSpec> {
        let whole = Path::new(arg);
        let (path, framework, protocol) = if whole.exists() {
            (whole.to_path_buf(), None, None)
        } else {
            match arg.rsplit_once(':') {
                Some((p, fw)) if !fw.is_empty() && !fw.contains('/') => {
                    (PathBuf::from(p), Some(fw.to_string()), None)
                }
                Some((p, named)) => match named.split_once('/') {
                    Some((fw, proto)) if !fw.is_empty() && !proto.contains('/') => {
                        let protocol = Protocol::ALL
                            .into_iter()
                            .find(|x| x.to_string() == proto)
                            .ok_or_else(|| InputError::NoSuchProtocol {
                            arg: arg.to_string(),
                            protocol: proto.to_string(),
                        })?;
                        (PathBuf::from(p), Some(fw.to_string()), Some(protocol))
                    }
                    _ => (whole.to_path_buf(), None, None),
                },
                _ => (whole.to_path_buf(), None, None),
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
        Ok(SideSpec {
            file,
            framework,
            protocol,
        })
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
    // Two named protocols pair across them; otherwise a cell pairs only
    // with one of its own protocol.
    let protocols = match (base.spec.protocol, new.spec.protocol) {
        (Some(a), Some(b)) => Some((a, b)),
        (None, None) => None,
        _ => return Err(InputError::OneSidedProtocol.into()),
    };
    let take = |side: &'a LoadedSide, fw: Option<&str>| -> Vec<&'a Cell> {
        side.results
            .cells
            .iter()
            .filter(|c| fw.is_none_or(|f| c.key.framework == f))
            .filter(|c| side.spec.protocol.is_none_or(|p| c.key.protocol == p))
            .collect()
    };
    let b_cells = take(base, named.map(|n| n.0));
    let n_cells = take(new, named.map(|n| n.1));
    let same = |a: &Cell, b: &Cell| {
        a.key.scenario == b.key.scenario
            && a.key.concurrency == b.key.concurrency
            && a.key.rate == b.key.rate
            && (protocols.is_some() || a.key.protocol == b.key.protocol)
            && (named.is_some() || a.key.framework == b.key.framework)
    };
    let cref = |b: &Cell, n: &Cell| CellRef {
        base_framework: b.key.framework.clone(),
        new_framework: n.key.framework.clone(),
        scenario: b.key.scenario,
        base_protocol: b.key.protocol,
        new_protocol: n.key.protocol,
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
                protocol: None,
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
    fn a_named_protocol_follows_the_framework_after_a_slash() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("results.json"), "{}").unwrap();
        let named = SideSpec::parse(&format!("{}:nginx/h2", tmp.path().display())).unwrap();
        assert_eq!(
            (named.framework.as_deref(), named.protocol),
            (Some("nginx"), Some(Protocol::H2))
        );
        let err = SideSpec::parse(&format!("{}:nginx/h3", tmp.path().display())).unwrap_err();
        assert!(err.to_string().contains("`h3` is not a protocol"), "{err}");
        assert_eq!(crate::cli::exit_code(&err), ExitCode::BadInput);
    }

    /// A run whose cells are the sample's, each also measured over h2.
    fn with_h2() -> LoadedSide {
        let mut r = sample_results();
        let h2: Vec<Cell> = r
            .cells
            .iter()
            .map(|c| {
                let mut c = c.clone();
                c.key.protocol = Protocol::H2;
                c
            })
            .collect();
        r.cells.extend(h2);
        LoadedSide {
            spec: SideSpec {
                file: PathBuf::from("x/results.json"),
                framework: None,
                protocol: None,
            },
            results: r,
        }
    }

    #[test]
    fn cells_pair_within_a_protocol_unless_two_protocols_are_named() {
        let (a, b) = (with_h2(), with_h2());
        let p = pair(&a, &b).unwrap();
        assert_eq!(p.both.len(), a.results.cells.len());
        assert!(
            p.both
                .iter()
                .all(|(r, x, y)| x.key.protocol == y.key.protocol
                    && r.base_protocol == r.new_protocol)
        );
        let fw = a.results.cells[0].key.framework.clone();
        let named = |p: Protocol| {
            let mut s = with_h2();
            s.spec.framework = Some(fw.clone());
            s.spec.protocol = Some(p);
            s
        };
        let (h2, http1) = (named(Protocol::H2), named(Protocol::Http1));
        let p = pair(&h2, &http1).unwrap();
        assert!(!p.both.is_empty());
        for (r, x, y) in &p.both {
            assert_eq!(
                (x.key.protocol, y.key.protocol),
                (Protocol::H2, Protocol::Http1)
            );
            assert_eq!(x.key.scenario, y.key.scenario);
            assert!(r.to_string().contains(" h2→http1 "), "{r}");
        }
        let mut one = with_h2();
        one.spec.framework = Some(fw.clone());
        let err = pair(&h2, &one).unwrap_err();
        assert!(
            err.to_string()
                .contains("protocol is named on one side only"),
            "{err}"
        );
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
