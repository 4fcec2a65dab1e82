//! The benchmark run: plan the cells, execute them through a [`Lab`], judge
//! each with the gates and store it at once.
//!
//! This module owns the order of work and the rules of a run. It talks to
//! containers, the loader and the probe only through the traits in `lab`, so
//! the whole pipeline runs against a fake in unit tests.

pub mod gates;
pub mod store;
