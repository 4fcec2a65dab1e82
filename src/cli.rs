//! Command-line definitions (clap derive) and dispatch. Nothing else.
//!
//! Each subcommand's options live in the module that implements it; this file
//! only names the subcommands and hands each one to its module's `run`.

use clap::{Parser, Subcommand};

use crate::exit::ExitCode;

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
    Serve(crate::serve::ServeArgs),
    /// Measure and judge the environment; exit 3 when results from it would be refused.
    Preflight(crate::preflight::PreflightArgs),
    /// Check, show and describe benchmark profiles (profiles/*.yaml).
    Profile(crate::profile::ProfileArgs),
    /// Check a running server against the endpoint contract with random
    /// inputs (exit 5 when a required check fails).
    Verify(crate::verify::VerifyArgs),
}

/// Run the parsed command line; the returned code is the process exit status.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve(args) => crate::serve::run(&args).map(|()| ExitCode::Ok),
        Command::Preflight(args) => crate::preflight::run_cli(&args),
        Command::Profile(args) => crate::profile::run(&args).map(|()| ExitCode::Ok),
        Command::Verify(args) => crate::verify::run(&args),
    }
}
