//! `fairground preflight`: measure and judge this machine (or a fixture
//! tree), print the report, exit 3 when results from here would be refused.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context;

use super::UsageError;
use crate::exit::ExitCode;
use crate::export::{bytes_of, Exporter};
use crate::preflight::{
    run, CheckStatus, EnvReport, NamespaceSysctls, PreflightInput, PreflightJson, PreflightTable,
    SysctlNamespace,
};

/// Options of `fairground preflight`.
#[derive(Debug, Clone, clap::Args)]
pub struct PreflightArgs {
    /// Print the whole report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Read /proc and /sys under this directory instead of / (fixture trees).
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Judge against this profile's needs (a bare name in profiles/, or a
    /// path): highest concurrency, cores, memory limits.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// The id of the current run: its own containers are not leftovers.
    #[arg(long)]
    pub run_id: Option<String>,
    /// Highest 1-minute load average per online core before a run
    /// (default 0.5).
    #[arg(long, value_name = "LOAD", allow_negative_numbers = true)]
    pub max_load_per_core: Option<f64>,
    /// The run's traffic goes from this host to ADDR (an IPv4 address; the
    /// server's, across hosts): the NIC check judges the interface the
    /// route to ADDR takes.
    #[arg(long, value_name = "ADDR")]
    pub traffic_to: Option<std::net::Ipv4Addr>,
    /// Print only this network namespace's sysctls as JSON and exit (the run
    /// pipeline calls this inside the loader container).
    #[arg(long)]
    pub net_sysctls: bool,
}

/// `fairground preflight`: print the report; exit 3 when something fails.
pub fn run_command(args: &PreflightArgs) -> anyhow::Result<ExitCode> {
    if !args.root.is_dir() {
        return Err(UsageError(format!(
            "--root {}: not a directory; give the root of a filesystem tree (default /)",
            args.root.display()
        ))
        .into());
    }
    if args.net_sysctls {
        let s = NamespaceSysctls::read(&args.root, SysctlNamespace::Host)
            .with_context(|| format!("reading network sysctls under {}", args.root.display()))?;
        println!("{}", serde_json::to_string(&s)?);
        return Ok(ExitCode::Ok);
    }
    let mut input = match &args.profile {
        Some(name) => {
            let host = crate::profile::HostFacts::detect_under(&args.root);
            let (profile, path) = crate::profile::resolve_with(name, &host)?;
            let input = PreflightInput::from_profile(&profile, &host);
            eprintln!(
                "preflight for profile {} ({}): concurrency up to {}, server cores {}, loader cores {}",
                profile.name,
                path.display(),
                input.max_concurrency,
                input.server_cpuset.as_deref().unwrap_or("unplaced"),
                input.loader_cpuset.as_deref().unwrap_or("unplaced"),
            );
            input
        }
        None => PreflightInput::default(),
    };
    input.run_id = args.run_id.clone();
    if let Some(addr) = args.traffic_to {
        input.remote_loader = true;
        input.traffic_to = Some(addr);
    }
    if let Some(limit) = args.max_load_per_core {
        if !(limit.is_finite() && limit > 0.0) {
            return Err(UsageError(format!(
                "--max-load-per-core {limit}: give a positive load per core, e.g. 0.5"
            ))
            .into());
        }
        input.load_per_core_limit = limit;
    }
    let report = run(&input, &args.root);
    let format: &dyn Exporter<EnvReport> = if args.json {
        &PreflightJson
    } else {
        &PreflightTable
    };
    std::io::stdout().write_all(&bytes_of(format, &report)?)?;
    Ok(if report.verdict == CheckStatus::Fail {
        ExitCode::EnvRefused
    } else {
        ExitCode::Ok
    })
}
