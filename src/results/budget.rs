//! How a run with a `budget:` spent it: what the first pass took, what the
//! budget was then expected to buy, and what it bought.

use serde::{Deserialize, Serialize};

/// The budget of a run (`budget:` in the profile) and how it was spent.
/// Blocks of rounds past `rounds.min` start only while the estimate of
/// their wall time fits in what is left; when a whole block does not, its
/// frameworks with the widest intervals run and the others sit it out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Budget {
    /// The wall time the profile gave the run's rounds, from this
    /// invocation's first framework, image builds left out.
    pub asked_s: f64,
    /// Budget time (image builds left out) from the first framework to
    /// the end of the first pass (`rounds.min` rounds of every cell);
    /// absent until it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_pass_s: Option<f64>,
    /// Wall time of one block of the first pass (the median of its blocks
    /// after the first, whose segments also built images): what the
    /// expectation divides the rest of the budget by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_s: Option<f64>,
    /// Blocks the rest of the budget was expected to hold after the first
    /// pass (at most `rounds.max − rounds.min`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_blocks: Option<u32>,
    /// The median interval half-width over the cells expected at the end:
    /// each cell's first-pass spread carried over the expected blocks
    /// (Student's t over more rounds), no narrower than asked for a cell
    /// that goes on, as reached for one already precise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_median_interval: Option<f64>,
    /// Blocks past the first pass that ran, wholly or in part.
    pub blocks: u32,
    /// Rounds of a framework left out of a block because the whole block
    /// did not fit (the framework's cells lacked less precision than the
    /// ones that ran).
    pub sat_out: u32,
    /// Why rounds stopped; absent while the run goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<BudgetEnd>,
}

/// Why a run with a budget stopped adding rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BudgetEnd {
    /// No cell lacked the asked precision (or every one that did had
    /// `rounds.max`).
    Precise,
    /// The next block needed for a cell lacking precision did not fit in
    /// what was left of the budget.
    Budget,
    /// The run was cut short (interrupted, engine lost).
    CutShort,
}

impl Budget {
    /// A budget of `asked_s` seconds, nothing spent yet.
    pub fn new(asked_s: f64) -> Budget {
        Budget {
            asked_s,
            first_pass_s: None,
            block_s: None,
            expected_blocks: None,
            expected_median_interval: None,
            blocks: 0,
            sat_out: 0,
            ended: None,
        }
    }

    /// The expectation after the first pass, as one line: `first pass
    /// 6m 10s of the 18m budget; blocks of 1m 5s: about 9 more fit,
    /// median interval expected ±2.1%`.
    pub fn expectation(&self) -> String {
        let mut s = format!("budget {}", mins(self.asked_s));
        if let Some(f) = self.first_pass_s {
            s += &format!(": first pass {}", mins(f));
        }
        if let (Some(b), Some(n)) = (self.block_s, self.expected_blocks) {
            s += &format!(
                "; blocks of {}: about {n} more fit{}",
                mins(b),
                match self.expected_median_interval {
                    Some(m) => format!(", median interval expected ±{:.1}%", m * 100.0),
                    None => String::new(),
                }
            );
        }
        s
    }

    /// What the budget bought, as one line: the expectation, then `ran 8
    /// blocks (3 rounds sat out); stopped: the budget`.
    pub fn sentence(&self) -> String {
        let mut s = self.expectation();
        s += &format!(
            "; ran {} more block{}",
            self.blocks,
            if self.blocks == 1 { "" } else { "s" }
        );
        if self.sat_out > 0 {
            s += &format!(
                " ({} framework round{} sat out to fit)",
                self.sat_out,
                if self.sat_out == 1 { "" } else { "s" }
            );
        }
        if let Some(e) = self.ended {
            s += match e {
                BudgetEnd::Precise => "; stopped: every cell precise or at its most rounds",
                BudgetEnd::Budget => "; stopped: the next block did not fit in the budget",
                BudgetEnd::CutShort => "; stopped: the run was cut short",
            };
        }
        s
    }
}

/// `6m 10s`, `45s`: whole seconds, as the plan prints durations.
fn mins(s: f64) -> String {
    humantime::format_duration(std::time::Duration::from_secs(s.round() as u64)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sentence_says_what_was_expected_and_what_ran() {
        let mut b = Budget::new(1080.0);
        assert_eq!(b.expectation(), "budget 18m");
        b.first_pass_s = Some(370.0);
        b.block_s = Some(65.0);
        b.expected_blocks = Some(10);
        b.expected_median_interval = Some(0.021);
        b.blocks = 9;
        b.sat_out = 3;
        b.ended = Some(BudgetEnd::Budget);
        assert_eq!(
            b.sentence(),
            "budget 18m: first pass 6m 10s; blocks of 1m 5s: about 10 more fit, median interval expected ±2.1%; ran 9 more blocks (3 framework rounds sat out to fit); stopped: the next block did not fit in the budget"
        );
    }
}
