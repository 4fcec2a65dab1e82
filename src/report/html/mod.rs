//! report.html: one self-contained page per run (inline CSS, inline SVG,
//! a little inline script; nothing fetched), built from blocks a
//! comparison page can reuse: the page shell ([`page`]), the charts
//! ([`charts`]) and the tables ([`table`]). `run` lays a run out on them.
//!
//! Like every exporter it renders bytes from [`Results`] and touches no
//! disk.

pub mod charts;
pub mod page;
mod run;
pub mod table;

use std::path::PathBuf;

use super::{Exporter, Rendered};
use crate::results::Results;

/// File name of the run page inside a run directory.
pub const REPORT_HTML: &str = "report.html";

/// report.html.
pub struct HtmlReport;

impl Exporter<Results> for HtmlReport {
    fn render(&self, results: &Results) -> anyhow::Result<Vec<Rendered>> {
        Ok(vec![Rendered {
            path: PathBuf::from(REPORT_HTML),
            bytes: run::page(results)?.into_bytes(),
        }])
    }
}
