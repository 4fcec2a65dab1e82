//! From an error to the process's exit code, by the error's type.
//!
//! Every error type a user can cause or fix outside fairground implements
//! [`ExitCodeOf`] beside its definition, with a `match` that names each of
//! its variants; [`exit_code`] finds the first such error in the chain that
//! reached `main` (context added on the way does not hide it). It lives at
//! the front door because it names types of every stage. A type missing
//! here exits 1, like any unexpected failure: the list below and
//! `every_error_type_of_the_exit_table_is_found_under_context` go together.

use crate::exit::{ExitCode, ExitCodeOf};

/// A command line that cannot be carried out as given: a flag's value out
/// of range, a name or folder that is not there. Bad input (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl ExitCodeOf for UsageError {
    fn exit_code(&self) -> ExitCode {
        ExitCode::BadInput
    }
}

/// The exit code of `err`: that of the first error in its chain whose type
/// has one, else [`ExitCode::Failure`].
pub fn exit_code(err: &anyhow::Error) -> ExitCode {
    err.chain().find_map(of_one).unwrap_or(ExitCode::Failure)
}

/// The code of one error of the chain, when its type has one.
fn of_one(e: &(dyn std::error::Error + 'static)) -> Option<ExitCode> {
    fn code<T: ExitCodeOf>(e: &(dyn std::error::Error + 'static)) -> Option<ExitCode> {
        e.downcast_ref::<T>().map(ExitCodeOf::exit_code)
    }
    code::<UsageError>(e)
        .or_else(|| code::<crate::profile::ProfileError>(e))
        .or_else(|| code::<crate::framework::FrameworkError>(e))
        .or_else(|| code::<crate::results::ReadError>(e))
        .or_else(|| code::<crate::docker::DockerError>(e))
        .or_else(|| code::<crate::verify::VerifyError>(e))
        .or_else(|| code::<crate::compare::Refused>(e))
        .or_else(|| code::<crate::compare::InputError>(e))
        .or_else(|| code::<crate::history::InputError>(e))
        .or_else(|| code::<crate::bench::RunInputError>(e))
        .or_else(|| code::<crate::bench::StoreError>(e))
        .or_else(|| code::<crate::bench::EnvRefused>(e))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use anyhow::Context;

    use super::*;

    fn under_context(e: impl std::error::Error + Send + Sync + 'static) -> anyhow::Error {
        Err::<(), _>(e)
            .context("reading something")
            .context("running a command")
            .unwrap_err()
    }

    /// One error of each type the dispatcher knows, wrapped in context as
    /// it reaches `main`, and the code README.md's table gives it.
    #[test]
    fn every_error_type_of_the_exit_table_is_found_under_context() {
        let io = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let cases: Vec<(anyhow::Error, ExitCode)> = vec![
            (
                under_context(UsageError("--root x: not a directory".into())),
                ExitCode::BadInput,
            ),
            (
                under_context(crate::profile::ProfileError::Read {
                    path: PathBuf::from("profiles/x.yaml"),
                    source: io(),
                }),
                ExitCode::BadInput,
            ),
            (
                under_context(crate::framework::FrameworkError::NoScenarios {
                    path: PathBuf::from("frameworks/x/framework.yaml"),
                }),
                ExitCode::BadInput,
            ),
            (
                under_context(crate::results::ReadError::Version {
                    path: "output/x/results.json".into(),
                    found: 1,
                }),
                ExitCode::BadInput,
            ),
            (
                under_context(crate::docker::DockerError::Unavailable {
                    host: "unix:///var/run/docker.sock".into(),
                    reason: "connection refused".into(),
                }),
                ExitCode::DockerUnavailable,
            ),
            (
                under_context(crate::docker::DockerError::NoSubnet {
                    network: "fg-x".into(),
                    range: "172.28.0.0/14".into(),
                }),
                ExitCode::Failure,
            ),
            (
                under_context(crate::verify::VerifyError::BadUrl {
                    url: "ftp://x".into(),
                    why: "not http".into(),
                }),
                ExitCode::BadInput,
            ),
            (
                under_context(crate::compare::Refused(Vec::new())),
                ExitCode::BadInput,
            ),
            (
                under_context(crate::compare::InputError::OneSided),
                ExitCode::BadInput,
            ),
            (
                under_context(crate::history::InputError::TooFew { found: 1 }),
                ExitCode::BadInput,
            ),
            (
                under_context(crate::bench::RunInputError::NoProfile),
                ExitCode::BadInput,
            ),
            (
                under_context(crate::bench::StoreError::Exists {
                    path: PathBuf::from("o/results.json"),
                    dir: PathBuf::from("o"),
                }),
                ExitCode::BadInput,
            ),
            (
                under_context(crate::bench::EnvRefused {
                    failures: vec!["virt.kind: TCG".into()],
                }),
                ExitCode::EnvRefused,
            ),
        ];
        for (err, want) in cases {
            assert_eq!(exit_code(&err), want, "{err:#}");
        }
    }

    #[test]
    fn an_error_of_no_known_type_is_a_failure() {
        assert_eq!(exit_code(&anyhow::anyhow!("boom")), ExitCode::Failure);
        let io = std::io::Error::other("disk full");
        assert_eq!(exit_code(&under_context(io)), ExitCode::Failure);
    }

    #[test]
    fn the_message_is_the_errors_own_words_under_its_context() {
        let err = under_context(UsageError("bad field".into()));
        assert_eq!(
            format!("{err:#}"),
            "running a command: reading something: bad field"
        );
    }
}
