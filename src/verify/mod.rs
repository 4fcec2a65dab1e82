//! `fairground verify`: contract checks against a running framework.
//!
//! Owns the judgement "may this framework be measured on this scenario?". It
//! sends requests drawn at random (after the server is up) from `contract`,
//! compares the answers with `contract::expected_response`, and reports
//! pass / warn / fail per check. It must not start containers itself in
//! `--url` mode and must never send traffic anywhere but the given URL.

pub mod client;
