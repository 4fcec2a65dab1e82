//! Exit codes: what each process exit status means, and how an error type
//! says which one it ends the process with.
//!
//! Every error type a user can cause or fix outside fairground (a bad
//! profile, manifest, flag or results file; a Docker daemon that is not
//! there; an environment preflight refuses) implements [`ExitCodeOf`] with
//! one exhaustive `match` over its variants, beside its definition, so a new
//! variant cannot compile without a code (cargo-nextest's
//! `process_exit_code`). `cli::exit_code` finds the first such error in the
//! chain that reaches `main`; anything else is a plain failure (1).
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

/// An error type that knows the exit code it ends the process with.
/// Implement it with a `match` that names every variant (no `_` arm), so
/// adding a variant makes the compiler ask for its code.
pub trait ExitCodeOf: std::error::Error + 'static {
    /// The documented exit status this error ends the process with.
    fn exit_code(&self) -> ExitCode;
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
