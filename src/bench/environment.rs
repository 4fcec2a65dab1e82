//! From preflight's [`EnvReport`] to the results' [`Environment`]: the
//! verdict, one line per check, and the whole report kept as JSON, plus the
//! rule that decides whether a run may go ahead.
//!
//! Preflight measures and judges; this module only carries its findings into
//! results.json and applies the profile's policy (`strict` refuses, `warn`
//! and `--accept-env` run with every cell flagged).

use crate::preflight::{CheckResult, EnvReport};
use crate::profile::Preflight;
use crate::results::{CheckStatus, EnvCheck, Environment};

fn line(c: &CheckResult) -> EnvCheck {
    EnvCheck {
        name: c.id.clone(),
        status: c.verdict,
        measured: c.measured.clone(),
        threshold: c.threshold.clone(),
        remedy: (c.verdict != CheckStatus::Pass && !c.remedy.is_empty()).then(|| c.remedy.clone()),
    }
}

/// Preflight failed and nothing said to go ahead: exit code 3, with every
/// failed check and its remedy.
#[derive(Debug, thiserror::Error)]
#[error(
    "preflight failed, so results from this environment would not be trustworthy:\n{}\n\
     fix the environment, or pass --accept-env to run anyway with every result flagged",
    .failures.join("\n")
)]
pub struct EnvRefused {
    /// One line per failed check: id, measured, threshold, remedy.
    pub failures: Vec<String>,
}

impl crate::exit::ExitCodeOf for EnvRefused {
    fn exit_code(&self) -> crate::exit::ExitCode {
        crate::exit::ExitCode::EnvRefused
    }
}

/// The environment of a run judged by `report`. A failed preflight may only
/// go ahead when the user said `--accept-env` or the profile's preflight
/// policy is `warn`; otherwise this is an error with exit code 3 that lists
/// every failed check and its remedy.
pub fn admit(
    report: &EnvReport,
    accept_env: bool,
    policy: Preflight,
) -> anyhow::Result<Environment> {
    let failed = report.verdict == CheckStatus::Fail;
    if failed && !accept_env && policy == Preflight::Strict {
        let lines: Vec<String> = report
            .failures()
            .map(|c| {
                format!(
                    "  {}: {} (threshold {}); {}",
                    c.id, c.measured, c.threshold, c.remedy
                )
            })
            .collect();
        return Err(EnvRefused { failures: lines }.into());
    }
    Ok(Environment {
        status: report.verdict,
        forced: failed,
        checks: report.checks.iter().map(line).collect(),
        report: serde_json::to_value(report).unwrap_or(serde_json::Value::Null),
    })
}

/// Add the after-run check (load average again) to `env`, raising the
/// overall status if it is worse.
pub fn add_after_run(env: &mut Environment, check: &CheckResult) {
    let l = line(check);
    env.status = env.status.max(l.status);
    env.checks.push(l);
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::preflight::{judge, DockerFacts, MeasuredFacts, PreflightInput};

    fn report(fixture: &str) -> EnvReport {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/preflight")
            .join(fixture)
            .join("root");
        judge(
            &PreflightInput::default(),
            &root,
            MeasuredFacts::default(),
            DockerFacts::unreachable("not asked in this test"),
        )
    }

    #[test]
    fn refuses_a_failed_environment_with_exit_code_3_unless_accepted() {
        let r = report("virtualbox-e1000");
        assert_eq!(r.verdict, CheckStatus::Fail);
        let err = admit(&r, false, Preflight::Strict).unwrap_err();
        assert_eq!(
            crate::cli::exit_code(&err),
            crate::exit::ExitCode::EnvRefused
        );
        assert!(format!("{err:#}").contains("--accept-env"), "{err:#}");
        let env = admit(&r, true, Preflight::Strict).unwrap();
        assert!(env.forced && !env.accepted());
        assert_eq!(env.checks.len(), r.checks.len());
        assert!(env.report.get("checks").is_some());
        assert!(admit(&r, false, Preflight::Warn).unwrap().forced);
    }

    #[test]
    fn after_run_check_can_only_worsen_the_status() {
        let r = report("virtualbox-e1000");
        let mut env = admit(&r, true, Preflight::Strict).unwrap();
        let mut c = r.checks[0].clone();
        c.verdict = CheckStatus::Pass;
        add_after_run(&mut env, &c);
        assert_eq!(env.status, CheckStatus::Fail);
        assert_eq!(env.checks.last().unwrap().remedy, None);
    }
}
