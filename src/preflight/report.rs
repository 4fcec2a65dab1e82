//! The environment report: the host in one paragraph, every check with its
//! verdict, and how it reads on a terminal (a table) and in Markdown.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{CheckResult, CheckStatus, DockerFacts, MeasuredFacts, PreflightInput};
use crate::export::{json_bytes, Exporter, Rendered};

/// The terminal table of an environment report (`fairground preflight`).
pub struct PreflightTable;

impl Exporter<EnvReport> for PreflightTable {
    fn render(&self, r: &EnvReport) -> anyhow::Result<Vec<Rendered>> {
        Ok(Rendered::one("preflight.txt", r.table().into_bytes()))
    }
}

/// The Markdown section of an environment report.
pub struct PreflightMarkdown;

impl Exporter<EnvReport> for PreflightMarkdown {
    fn render(&self, r: &EnvReport) -> anyhow::Result<Vec<Rendered>> {
        Ok(Rendered::one("preflight.md", r.summary().into_bytes()))
    }
}

/// The whole report as JSON (`fairground preflight --json`), newline-terminated.
pub struct PreflightJson;

impl Exporter<EnvReport> for PreflightJson {
    fn render(&self, r: &EnvReport) -> anyhow::Result<Vec<Rendered>> {
        Ok(Rendered::one("preflight.json", json_bytes(r)?))
    }
}

/// Facts about the host worth a line in every report.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HostSummary {
    /// Host name (`/proc/sys/kernel/hostname`).
    pub hostname: Option<String>,
    /// Kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel: Option<String>,
    /// CPU model name (`/proc/cpuinfo`).
    pub cpu_model: Option<String>,
    /// CPUs online.
    pub cores_online: Option<usize>,
    /// MemTotal, bytes.
    pub memory_total: Option<u64>,
    /// 1-minute load average when preflight ran (the before-run figure that
    /// [`after_run`] compares with).
    pub loadavg_1m: Option<f64>,
    /// Bare metal, container or VM and which hypervisor, in words.
    pub platform: String,
    /// cgroup layout: v1, v2 or hybrid.
    pub cgroup: String,
    /// Docker server version and API version, if reachable.
    pub docker: Option<String>,
    /// Where the run's traffic flows.
    pub traffic_path: String,
}

/// The environment as measured and judged before a run; stored whole in
/// results.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvReport {
    /// fairground version that judged it.
    pub fairground_version: String,
    /// When it was taken (UTC).
    pub taken_at: chrono::DateTime<chrono::Utc>,
    /// Root the files were read from (`/` on a real run).
    pub root: PathBuf,
    /// The run's needs it was judged against.
    pub input: PreflightInput,
    /// Host facts for the report header.
    pub host: HostSummary,
    /// Raw probe facts (CPUID, timing, limits, load sample).
    pub probes: MeasuredFacts,
    /// Raw Docker facts.
    pub docker: DockerFacts,
    /// One result per check, in report order.
    pub checks: Vec<CheckResult>,
    /// The worst verdict of all checks.
    pub verdict: CheckStatus,
}

impl EnvReport {
    /// The checks that failed.
    pub fn failures(&self) -> impl Iterator<Item = &CheckResult> {
        self.checks
            .iter()
            .filter(|c| c.verdict == CheckStatus::Fail)
    }

    /// The result of the check `id`, if it ran.
    pub fn check(&self, id: &str) -> Option<&CheckResult> {
        self.checks.iter().find(|c| c.id == id)
    }

    /// A Markdown section: host facts, then one table row per check.
    pub fn summary(&self) -> String {
        let h = &self.host;
        let mut out = String::new();
        out.push_str(&format!(
            "Environment: **{}** ({} checks: {} pass, {} warn, {} fail)\n\n",
            self.verdict,
            self.checks.len(),
            self.count(CheckStatus::Pass),
            self.count(CheckStatus::Warn),
            self.count(CheckStatus::Fail)
        ));
        let or_unknown = |o: &Option<String>| o.clone().unwrap_or_else(|| "unknown".into());
        out.push_str(&format!(
            "- host: {} · kernel {} · {} · {} CPUs online · {} memory\n",
            or_unknown(&h.hostname),
            or_unknown(&h.kernel),
            or_unknown(&h.cpu_model),
            h.cores_online.map_or("?".into(), |n| n.to_string()),
            h.memory_total
                .map_or("?".into(), |b| crate::units::bytes(b as f64))
        ));
        out.push_str(&format!(
            "- platform: {} · cgroup {} · docker {}\n- traffic: {}\n\n",
            h.platform,
            h.cgroup,
            or_unknown(&h.docker),
            h.traffic_path
        ));
        out.push_str("| check | verdict | measured | threshold | remedy |\n");
        out.push_str("|---|---|---|---|---|\n");
        for c in &self.checks {
            out.push_str(&format!(
                "| `{}` | {} | {} | {} | {} |\n",
                c.id,
                c.verdict,
                crate::markup::md_cell(&c.measured),
                crate::markup::md_cell(&c.threshold),
                if c.verdict == CheckStatus::Pass {
                    "".to_string()
                } else {
                    crate::markup::md_cell(&c.remedy)
                }
            ));
        }
        out
    }

    /// Plain-text table for a terminal: one line per check (long
    /// measurements cut to [`TABLE_MEASURED_WIDTH`]; `--json` has them
    /// whole), then the whole measurement, why and remedy of every check
    /// that did not pass.
    pub fn table(&self) -> String {
        let w_id = self
            .checks
            .iter()
            .map(|c| c.id.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let w_m = self
            .checks
            .iter()
            .map(|c| c.measured.chars().count())
            .max()
            .unwrap_or(8)
            .clamp(8, TABLE_MEASURED_WIDTH);
        let mut out = format!(
            "{:<7} {:<w_id$}  {:<w_m$}  THRESHOLD\n",
            "VERDICT", "CHECK", "MEASURED"
        );
        for c in &self.checks {
            out.push_str(&format!(
                "{:<7} {:<w_id$}  {:<w_m$}  {}\n",
                c.verdict.to_string(),
                c.id,
                ellipsize(&c.measured, w_m),
                c.threshold
            ));
        }
        let bad: Vec<_> = self
            .checks
            .iter()
            .filter(|c| c.verdict != CheckStatus::Pass)
            .collect();
        if !bad.is_empty() {
            out.push('\n');
            for c in bad {
                out.push_str(&format!(
                    "{} {}: {}\n    threshold: {}\n    why: {}\n    remedy: {}\n",
                    c.verdict, c.id, c.measured, c.threshold, c.why, c.remedy
                ));
            }
        }
        let h = &self.host;
        out.push_str(&format!(
            "\nplatform: {}; cgroup {}; traffic: {}\nenvironment: {}\n",
            h.platform, h.cgroup, h.traffic_path, self.verdict
        ));
        out
    }

    fn count(&self, v: CheckStatus) -> usize {
        self.checks.iter().filter(|c| c.verdict == v).count()
    }
}

/// Widest MEASURED column of the terminal table, in characters.
pub const TABLE_MEASURED_WIDTH: usize = 72;

/// `s` cut to `width` characters, the cut marked with `…`.
fn ellipsize(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}
