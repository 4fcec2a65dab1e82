//! Exit codes: the one place that says what each process exit status means.
//!
//! Every error that reaches `main` is mapped to one of these codes. Library code
//! attaches a code by wrapping its error in [`Coded`] (or by returning an error
//! type that `main` knows); anything unclassified is a plain failure (1).
//! The table is documented in README.md ("Exit codes"); keep the two in step.

use std::fmt;

/// A documented process exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ExitCode {
    /// Everything asked for was done.
    Ok = 0,
    /// Something failed while running (a build, a container, a run).
    Failure = 1,
    /// The input was wrong: a malformed profile, manifest or flag. Nothing ran.
    BadInput = 2,
    /// The environment was judged unfit (preflight failed) and not overridden.
    EnvRefused = 3,
    /// The Docker daemon could not be reached.
    DockerUnavailable = 4,
    /// A framework failed contract verification.
    VerifyFailed = 5,
    /// `compare --fail-on-regression`: a cell regressed beyond its noise
    /// band (or NEW rejects a cell BASE measured).
    Regressed = 6,
    /// `run`: the run finished and wrote every output, and at least one of
    /// the profile's objectives was missed (the interval of its figure lies
    /// wholly on the wrong side of the bound, or the cell was rejected).
    /// 99, as k6 exits when a threshold is crossed, so CI scripts written
    /// for k6 read it the same way.
    ObjectiveMissed = 99,
    /// Interrupted by SIGINT/SIGTERM; what was measured was kept.
    Interrupted = 130,
}

impl ExitCode {
    /// Every code, in the order README.md's table lists them.
    pub const ALL: [ExitCode; 9] = [
        ExitCode::Ok,
        ExitCode::Failure,
        ExitCode::BadInput,
        ExitCode::EnvRefused,
        ExitCode::DockerUnavailable,
        ExitCode::VerifyFailed,
        ExitCode::Regressed,
        ExitCode::ObjectiveMissed,
        ExitCode::Interrupted,
    ];

    /// The numeric status handed to the OS.
    pub fn code(self) -> u8 {
        self as u8
    }
}

impl fmt::Display for ExitCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code())
    }
}

/// An error that carries the exit code the process should end with.
///
/// Display and source are forwarded to the inner error, so `{:#}` still prints
/// the whole context chain once.
#[derive(Debug)]
pub struct Coded {
    /// The exit status this error maps to.
    pub code: ExitCode,
    inner: anyhow::Error,
}

impl fmt::Display for Coded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Transparent: the context chain shows the inner error's own words.
        fmt::Display::fmt(&self.inner, f)
    }
}

impl std::error::Error for Coded {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner.source()
    }
}

impl Coded {
    /// Wrap `inner` so that `main` exits with `code`.
    pub fn new(code: ExitCode, inner: impl Into<anyhow::Error>) -> Self {
        Self {
            code,
            inner: inner.into(),
        }
    }
}

/// Shorthand: an `anyhow::Error` that exits with `code`.
pub fn coded(code: ExitCode, inner: impl Into<anyhow::Error>) -> anyhow::Error {
    Coded::new(code, inner).into()
}

/// The exit code for an error that reached `main`: the first [`Coded`] in the
/// chain wins; anything else is [`ExitCode::Failure`].
pub fn classify(err: &anyhow::Error) -> ExitCode {
    err.chain()
        .find_map(|cause| cause.downcast_ref::<Coded>().map(|c| c.code))
        .unwrap_or(ExitCode::Failure)
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn coded_error_survives_added_context() {
        let err: anyhow::Result<()> = Err(coded(ExitCode::BadInput, anyhow::anyhow!("bad field")));
        let err = err.context("reading profiles/x.yaml").unwrap_err();
        assert_eq!(classify(&err), ExitCode::BadInput);
        assert_eq!(format!("{err:#}"), "reading profiles/x.yaml: bad field");
    }

    /// README.md's "Exit codes" table lists every code, in order, and no
    /// other: the table users script against cannot drift from the enum.
    #[test]
    fn the_readme_lists_every_exit_code() {
        let readme = include_str!("../README.md");
        let table = readme
            .split("## Exit codes")
            .nth(1)
            .expect("README.md has an `## Exit codes` section");
        let listed: Vec<u8> = table
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .filter_map(|l| l.trim_start_matches('|').split('|').next())
            .filter_map(|c| c.trim().parse().ok())
            .collect();
        let codes: Vec<u8> = ExitCode::ALL.iter().map(|c| c.code()).collect();
        assert_eq!(
            listed, codes,
            "README.md's exit codes against ExitCode::ALL"
        );
    }

    #[test]
    fn unclassified_error_is_a_failure() {
        assert_eq!(classify(&anyhow::anyhow!("boom")), ExitCode::Failure);
    }
}
