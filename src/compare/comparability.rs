//! Whether two runs can be compared at all: they must agree on everything
//! that changes the figures (the facts `compare::figures` lists: load,
//! window, limits, loader version, machine, network). A difference refuses
//! the comparison (exit 2) with every differing field named, unless
//! `--force`, which compares anyway and marks every verdict.
//!
//! A fact one run did not record cannot be checked; it is listed, not
//! refused, so files written before a fact was recorded stay comparable.

use std::fmt;

use super::figures::comparability_facts;
use super::model::Difference;
use crate::results::Results;

/// What checking two runs found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Check {
    /// Facts both runs recorded, with different values.
    pub differences: Vec<Difference>,
    /// Facts at least one run did not record.
    pub unchecked: Vec<String>,
}

/// Compare the facts of `base` and `new`.
pub fn check(base: &Results, new: &Results) -> Check {
    let mut out = Check::default();
    for (b, n) in comparability_facts(base)
        .into_iter()
        .zip(comparability_facts(new))
    {
        debug_assert_eq!(b.field, n.field);
        match (b.value, n.value) {
            (Some(bv), Some(nv)) if bv != nv => out.differences.push(Difference {
                field: b.field.to_string(),
                base: bv,
                new: nv,
            }),
            (Some(_), Some(_)) => {}
            // Neither recorded it (the fact does not apply, e.g. the rate
            // of a closed-loop run): nothing to check.
            (None, None) => {}
            _ => out.unchecked.push(b.field.to_string()),
        }
    }
    out
}

/// The refusal: the runs differ in what changes the figures (bad input,
/// exit 2, unless `--force`).
#[derive(Debug, Clone, PartialEq)]
pub struct Refused(pub Vec<Difference>);

impl crate::exit::ExitCodeOf for Refused {
    fn exit_code(&self) -> crate::exit::ExitCode {
        crate::exit::ExitCode::BadInput
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "the runs differ in {} setting(s) that change the figures, so their verdicts would not mean anything:",
            self.0.len()
        )?;
        for d in &self.0 {
            writeln!(f, "  {}: BASE {} vs NEW {}", d.field, d.base, d.new)?;
        }
        write!(
            f,
            "rerun one side with the other's profile on the same machine, or pass --force to compare anyway (every verdict is then marked)"
        )
    }
}

impl std::error::Error for Refused {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::sample_results;

    #[test]
    fn the_same_run_is_comparable_with_itself() {
        let r = sample_results();
        assert_eq!(check(&r, &r), Check::default());
    }

    #[test]
    fn names_every_differing_field_and_lists_unrecorded_ones() {
        let mut new = sample_results();
        new.profile.concurrency = vec![100, 10_000];
        new.profile.duration = std::time::Duration::from_secs(30);
        new.profile.load.pipeline = 16;
        let mut base2 = sample_results();
        base2.profile.concurrency = vec![100, 10_000];
        base2.profile.duration = std::time::Duration::from_secs(15);
        base2.profile.load.pipeline = 1;
        new.environment.report = serde_json::json!({"host": {"kernel": "6.1"}});
        base2.environment.report =
            serde_json::json!({"host": {"kernel": "6.18", "cpu_model": "EPYC"}});
        let c = check(&base2, &new);
        let fields: Vec<&str> = c.differences.iter().map(|d| d.field.as_str()).collect();
        assert_eq!(fields, ["load.pipeline", "window.duration", "host.kernel"]);
        assert_eq!(c.unchecked, ["host.cpu_model"]);
        let text = Refused(c.differences).to_string();
        assert!(text.contains("load.pipeline: BASE 1 vs NEW 16"), "{text}");
        assert!(text.contains("--force"), "{text}");
    }
}
