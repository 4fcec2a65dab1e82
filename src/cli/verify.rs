//! `fairground verify`: check a running server (`--url`) or frameworks
//! started in containers (NAMEs) against the endpoint contract; exit 5 when
//! a required check fails.

use std::io::Write as _;
use std::time::Duration;

use anyhow::Context;

use super::UsageError;
use crate::contract::{Protocol, Scenario};
use crate::docker::RunId;
use crate::exit::ExitCode;
use crate::export::{bytes_of, Exporter};
use crate::verify::orchestrate::{select, verify_all, OrchestrateOptions};
use crate::verify::{
    default_scenarios, verify_url, VerifyJson, VerifyOptions, VerifyReport, VerifyTable, VerifyTls,
};

/// Options of `fairground verify`.
#[derive(Debug, Clone, clap::Args)]
pub struct VerifyArgs {
    /// Frameworks to start in containers and verify (default: every one
    /// under --frameworks). Not with --url.
    #[arg(value_name = "NAME", conflicts_with_all = ["url", "name", "exit_zero"])]
    pub names: Vec<String>,
    /// Base URL of a running server, e.g. http://127.0.0.1:8080: verify it
    /// directly instead of starting frameworks.
    #[arg(long)]
    pub url: Option<String>,
    /// Scenario to check (repeat or comma-separate). With --url the default
    /// is plaintext, json, param, echo, validate, middleware-3; with NAMEs it
    /// is every scenario each manifest declares (this option narrows them).
    #[arg(long = "scenario", value_delimiter = ',')]
    pub scenarios: Vec<Scenario>,
    /// Protocol to verify the --url in: http1, https (TLS, HTTP/1.1), h2
    /// (TLS, HTTP/2 by ALPN) or h2c (HTTP/2 with prior knowledge). NAME mode
    /// verifies every protocol each manifest declares.
    #[arg(long, value_enum, default_value_t = Protocol::Http1, requires = "url")]
    pub protocol: Protocol,
    /// The CA to trust for https and h2 (PEM): the server's certificate
    /// must chain to it and nothing else.
    #[arg(long, value_name = "PEM", requires = "url")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// The name the server's certificate must carry (sent as SNI when it is
    /// a DNS name); default: the URL's host.
    #[arg(long, value_name = "NAME", requires = "tls_ca")]
    pub tls_name: Option<String>,
    /// Fail servers that do not answer pipelined requests in order.
    #[arg(long)]
    pub require_pipelining: bool,
    /// Print the report as JSON (a `VerifyReport`) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Bound on each request, e.g. 500ms or 5s.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// Seed of the random inputs (default: drawn now); the report records it.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Framework name to show in the report.
    #[arg(long)]
    pub name: Option<String>,
    /// Exit 0 even when a required check fails: the verdict is in the
    /// report. fairground uses it when it runs verify in a container and
    /// reads the JSON, so a failing framework is a report, not a crash.
    #[arg(long)]
    pub exit_zero: bool,
    /// Folder of framework manifests (NAME mode).
    #[arg(long, default_value = "frameworks", value_name = "DIR")]
    pub frameworks: std::path::PathBuf,
    /// How long a framework may take to answer 200 on its readiness path
    /// after its container started (NAME mode).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub ready_timeout: Duration,
}

/// Entry point of `fairground verify`: check, print, and map the verdict to
/// the exit code (0 all required checks passed, 5 otherwise).
pub fn run(args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    match &args.url {
        Some(url) => run_url(args, url),
        None => run_names(args),
    }
}

fn run_url(args: &VerifyArgs, url: &str) -> anyhow::Result<ExitCode> {
    let scenarios = if args.scenarios.is_empty() {
        default_scenarios()
    } else {
        args.scenarios.clone()
    };
    let tls = match &args.tls_ca {
        None => None,
        Some(ca) => Some(VerifyTls {
            ca_pem: std::fs::read(ca)
                .with_context(|| format!("--tls-ca {}: cannot read it", ca.display()))?,
            name: match &args.tls_name {
                Some(n) => n.clone(),
                None => url_host(url)?,
            },
        }),
    };
    let options = VerifyOptions {
        timeout: args.timeout,
        require_pipelining: args.require_pipelining,
        seed: args.seed,
        framework: args.name.clone(),
        protocol: args.protocol,
        tls,
        ..VerifyOptions::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = rt.block_on(verify_url(url, &scenarios, &options))?;
    let out = if args.json {
        bytes_of::<VerifyReport>(&VerifyJson, &report)?
    } else {
        bytes_of::<[VerifyReport]>(&VerifyTable, std::slice::from_ref(&report))?
    };
    std::io::stdout().write_all(&out)?;
    Ok(if report.passed || args.exit_zero {
        ExitCode::Ok
    } else {
        ExitCode::VerifyFailed
    })
}

/// The host of `url`, the name a certificate is checked against by default.
fn url_host(url: &str) -> anyhow::Result<String> {
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| UsageError(format!("--url {url}: {e}")))?;
    uri.host()
        .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string())
        .ok_or_else(|| UsageError(format!("--url {url} has no host")).into())
}

/// `fairground verify [NAME…]` (no `--url`): verify the named
/// frameworks (all by default) in containers of a fresh run, print the
/// table (or a JSON array of reports), remove everything the run created.
fn run_names(args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let all = crate::framework::discover(&args.frameworks)?;
    let mut chosen = select(&all, &args.names)?;
    if !args.scenarios.is_empty() {
        for fw in &mut chosen {
            // A declared family (`queries`) serves an asked count
            // (`queries-5`), which is then the one verified.
            let declared = std::mem::take(&mut fw.manifest.scenarios);
            fw.manifest.scenarios = args
                .scenarios
                .iter()
                .copied()
                .filter(|a| declared.iter().any(|d| d.covers(*a) || a.covers(*d)))
                .collect();
        }
        chosen.retain(|fw| {
            let keep = !fw.manifest.scenarios.is_empty();
            if !keep {
                eprintln!(
                    "skipping {}: it declares none of the scenarios asked for",
                    fw.name()
                );
            }
            keep
        });
    }
    if chosen.is_empty() {
        return Err(UsageError(format!(
            "nothing to verify: no framework under {} matches",
            args.frameworks.display()
        ))
        .into());
    }
    let root = std::env::current_dir().context("cannot read the current directory")?;
    let opts = OrchestrateOptions {
        timeout: args.timeout,
        require_pipelining: args.require_pipelining,
        seed: args.seed,
        ready_timeout: args.ready_timeout,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let reports = rt.block_on(async {
        let run = RunId::new();
        let mut images = crate::docker::images::ImageOptions::new(&root, run.clone());
        images.progress = std::sync::Arc::new(|m: &str| eprintln!("[images] {m}"));
        let engine = crate::docker::engine::DockerEngine::connect(images).await?;
        let guard = crate::docker::cleanup::RunGuard::new(engine.docker().clone(), run.clone());
        let result = verify_all(&engine, &run, &chosen, &opts).await;
        match guard.finish().await {
            Ok(r) if !r.is_empty() => eprintln!("{}", r.summary()),
            Ok(_) => {}
            Err(e) => eprintln!(
                "warning: cleanup of run {run} failed: {e}; run `fairground clean --run {run}`"
            ),
        }
        result
    })?;
    let format: &dyn Exporter<[VerifyReport]> = if args.json { &VerifyJson } else { &VerifyTable };
    std::io::stdout().write_all(&bytes_of(format, reports.as_slice())?)?;
    Ok(if reports.iter().all(|r| r.passed) {
        ExitCode::Ok
    } else {
        ExitCode::VerifyFailed
    })
}
