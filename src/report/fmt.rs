//! Markdown helpers of the reports; quantities are formatted by
//! [`crate::units`] (re-exported here for the exporters).

pub use crate::units::{bytes, micros, percent, sig3, thousands};

pub use crate::markup::md_cell as cell;
