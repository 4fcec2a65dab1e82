//! `fairground load` command line: flags named like wrk's where they mean
//! the same, validated into a [`LoadConfig`].
//!
//! Owns: parsing flags and printing the result (human summary or JSON on
//! stdout). Must not: measure anything itself.

use std::time::Duration;

use anyhow::Context;
use clap::Args;

use super::{CustomRequest, LoadConfig};
use crate::contract::Scenario;
use crate::exit::{coded, ExitCode};

/// Options of `fairground load`.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Target: `http://IP:PORT[/path]` (an IP address: names are not
    /// resolved). With --scenario, the base the scenario's paths go under.
    #[arg(long)]
    pub url: String,
    /// Contract scenario to send (plaintext, json, param, echo, validate,
    /// middleware-N). Without it, --method/--header/--body are sent to --url.
    #[arg(long)]
    pub scenario: Option<Scenario>,
    /// Keep-alive connections to hold.
    #[arg(short = 'c', long, default_value_t = 100)]
    pub connections: usize,
    /// Worker threads (one runtime each); default: available CPUs.
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Measured duration (humantime: `10s`, `1m`, `500ms`).
    #[arg(short = 'd', long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Load before measuring, not counted.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    pub warmup: Duration,
    /// Fixed rate in requests per second (open loop, latency corrected for
    /// coordinated omission). Without it: closed loop.
    #[arg(short = 'R', long)]
    pub rate: Option<f64>,
    /// Requests in flight per connection (HTTP/1.1 pipelining).
    #[arg(long, default_value_t = 1)]
    pub pipeline: usize,
    /// A request unanswered this long is a timeout error.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// Longest wait for one connect.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    pub connect_timeout: Duration,
    /// Stop after this many measured requests (like oha's -n).
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,
    /// HTTP method of the ad-hoc request.
    #[arg(long, default_value = "GET", conflicts_with = "scenario")]
    pub method: String,
    /// Extra header of the ad-hoc request, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header", conflicts_with = "scenario")]
    pub headers: Vec<String>,
    /// Body of the ad-hoc request.
    #[arg(long, conflicts_with = "scenario")]
    pub body: Option<String>,
    /// Print the report as JSON (docs/load-report.schema.json) on stdout.
    #[arg(long)]
    pub json: bool,
    /// Progress as JSON lines on stderr: `{"event":"measure","t"}` when the
    /// measured period starts, and once a second
    /// `{"event":"tick","t","phase","ok","errors"}`.
    #[arg(long)]
    pub progress: bool,
    /// Seed for request pools and random ids.
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
}

impl LoadArgs {
    /// Validate the flags into a config.
    pub fn to_config(&self) -> anyhow::Result<LoadConfig> {
        let mut cfg = LoadConfig::new(&self.url)?;
        match self.scenario {
            Some(s) => cfg = cfg.scenario(s),
            None => {
                let headers = self
                    .headers
                    .iter()
                    .map(|h| {
                        let (k, v) = h.split_once(':').with_context(|| {
                            format!("--header `{h}` must look like `Name: value`")
                        })?;
                        Ok((k.trim().to_string(), v.trim().to_string()))
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                cfg = cfg.custom(CustomRequest {
                    method: self.method.to_ascii_uppercase(),
                    headers,
                    body: self.body.as_ref().map(|b| b.as_bytes().to_vec()),
                });
            }
        }
        cfg.connections = self.connections;
        cfg.threads = self
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        cfg.duration = self.duration;
        cfg.warmup = self.warmup;
        cfg.rate = self.rate;
        cfg.pipeline = self.pipeline;
        cfg.timeout = self.timeout;
        cfg.connect_timeout = self.connect_timeout;
        cfg.max_requests = self.requests;
        cfg.progress = self.progress;
        cfg.seed = self.seed;
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Entry point of `fairground load`.
pub fn run(args: &LoadArgs) -> anyhow::Result<ExitCode> {
    let cfg = args.to_config().map_err(|e| coded(ExitCode::BadInput, e))?;
    let report = super::run(&cfg)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        serde_json::to_writer(&mut out, &report).context("cannot write the report to stdout")?;
        use std::io::Write;
        writeln!(out)?;
    } else {
        report
            .write_human(&mut out)
            .context("cannot write the report to stdout")?;
    }
    Ok(ExitCode::Ok)
}
