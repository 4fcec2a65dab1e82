//! Judging what was measured: every cell's rounds against the profile's
//! thresholds (`gates`: the verdict and its reasons) and a finished run
//! against the profile's objectives (`objectives`). Pure functions of the
//! results and the profile; no I/O, no measuring.

pub mod gates;
pub mod objectives;
