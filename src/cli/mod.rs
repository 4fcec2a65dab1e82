//! The front door: every subcommand's flags (clap derive) and its entry,
//! one file per command, each handing the work to the stage that does it
//! (`bench::run`, `compare::compare_specs`, `history::build`, …) and
//! printing what it returns. The stages expose functions, not commands.
//! The one exception is `load`'s flags, `roles::load::args::LoadArgs`: the
//! plan writes that command line for the loader's container, so it lives
//! with the loader (tested to parse back into the same struct).

mod compare;
mod errors;
mod history;
mod images;
mod preflight;
mod profile;
mod report;
mod roles;
mod run;
mod verify;

use clap::{Parser, Subcommand};

use crate::exit::ExitCode;

pub use errors::{exit_code, UsageError};

/// Honest, reproducible, container-limited HTTP framework benchmarks.
#[derive(Debug, Parser)]
#[command(name = "fairground", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the whole endpoint contract (the reference server).
    Serve(roles::ServeArgs),
    /// Build or list fairground's images (own image, bases, frameworks).
    Images(images::ImagesArgs),
    /// Remove containers and networks left by earlier runs (by label).
    Clean(images::CleanArgs),
    /// Wait until a URL answers 200 and print when (used inside the run network).
    Ready(roles::ReadyArgs),
    /// Sleep until killed: the main process of a run's long-lived loader
    /// container, in which every round's `load` is started (docker exec).
    Hold,
    /// Measure and judge the environment; exit 3 when results from it would be refused.
    Preflight(preflight::PreflightArgs),
    /// Generate HTTP load against one server and report what it saw.
    Load(crate::roles::load::args::LoadArgs),
    /// Check, show and describe benchmark profiles (profiles/*.yaml).
    Profile(profile::ProfileArgs),
    /// Check a running server against the endpoint contract with random
    /// inputs (exit 5 when a required check fails).
    Verify(verify::VerifyArgs),
    /// Rewrite a run directory's reports (results.md, stats.md, csv, hgrm,
    /// SHA256SUMS) from its results.json.
    Report(report::ReportArgs),
    /// Run a benchmark profile: preflight, images, every cell through the
    /// gates, and the report in output/<UTC time>-<profile>/.
    Run(run::RunArgs),
    /// Compare two runs (or two frameworks of one run): ratio, 95% interval
    /// and a noise-aware verdict per cell and metric (exit 6 with
    /// --fail-on-regression when something regressed).
    Compare(compare::CompareArgs),
    /// Many runs over time or commits: trend per cell and figure with each
    /// run's interval, change points (E-divisive means) confirmed by
    /// compare; writes history.html and history.json.
    History(history::HistoryArgs),
}

/// Run the parsed command line; the returned code is the process exit status.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve(args) => roles::serve(&args).map(|()| ExitCode::Ok),
        Command::Images(args) => images::run_images(&args),
        Command::Clean(args) => images::run_clean(&args),
        Command::Ready(args) => roles::ready(&args).map(|()| ExitCode::Ok),
        Command::Preflight(args) => preflight::run_command(&args),
        Command::Load(args) => roles::load(&args),
        Command::Hold => roles::hold(),
        Command::Profile(args) => profile::run(&args).map(|()| ExitCode::Ok),
        Command::Verify(args) => verify::run(&args),
        Command::Report(args) => report::run(&args).map(|()| ExitCode::Ok),
        Command::Run(args) => crate::bench::run::run(&args.options()),
        Command::Compare(args) => compare::run(&args),
        Command::History(args) => history::run(&args),
    }
}
