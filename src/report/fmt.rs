//! Markdown helpers of the reports; quantities are formatted by
//! [`crate::units`] (re-exported here for the exporters).

pub use crate::units::{bytes, micros, percent, sig3, thousands};

/// Escape a value for a Markdown table cell.
pub fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}
