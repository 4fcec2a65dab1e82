//! `fairground load` command line: flags named like wrk's where they mean
//! the same, validated into a [`LoadConfig`].
//!
//! Owns: parsing flags and printing the result (human summary or JSON on
//! stdout). Must not: measure anything itself.

use std::time::Duration;

use anyhow::Context;
use clap::Args;

use super::config::TlsClient;
use super::{CustomRequest, LoadConfig};
use crate::contract::{Protocol, Scenario};

/// Options of `fairground load`.
#[derive(Debug, Clone, PartialEq, Args)]
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
    /// Load before measuring, not counted; with --warmup-until-stable, the
    /// longest the warm-up may take.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    pub warmup: Duration,
    /// End the warm-up as soon as the last three windows of this length
    /// vary by no more than --stable-cv (throughput in closed loop, mean
    /// latency at a fixed rate), on the connections the window then uses.
    #[arg(long, value_parser = humantime::parse_duration, requires = "stable_cv")]
    pub warmup_until_stable: Option<Duration>,
    /// Largest CV of the last three warm-up windows that counts as stable.
    #[arg(long, requires = "warmup_until_stable")]
    pub stable_cv: Option<f64>,
    /// Fixed rate in requests per second (open loop, latency corrected for
    /// coordinated omission). Without it: closed loop.
    #[arg(short = 'R', long)]
    pub rate: Option<f64>,
    /// Requests in flight per connection (HTTP/1.1 pipelining).
    #[arg(long, default_value_t = 1)]
    pub pipeline: usize,
    /// What to speak: http1, https (TLS, ALPN http/1.1), h2 (TLS, ALPN h2)
    /// or h2c (HTTP/2 with prior knowledge). Default: https for https
    /// URLs, http1 otherwise.
    #[arg(long, value_enum)]
    pub protocol: Option<Protocol>,
    /// Concurrent streams per HTTP/2 connection (h2, h2c): requests in
    /// flight = connections × streams, like h2load's -m.
    #[arg(long, default_value_t = 1)]
    pub streams: usize,
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
    /// Wait until this wall-clock instant (unix time, ns) before connecting:
    /// the start barrier of several loaders sharing one measured window.
    #[arg(long)]
    pub start_at_unix_ns: Option<u64>,
    /// https URLs: the certificate of the CA that signed the server's
    /// (PEM). The loader trusts it alone.
    #[arg(long, value_name = "PEM")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// https URLs: the name the server's certificate must carry (default:
    /// the URL's IP address).
    #[arg(long, value_name = "NAME", requires = "tls_ca")]
    pub tls_name: Option<String>,
}

impl LoadArgs {
    /// The flags' defaults, aimed at `url`: what `fairground load --url URL`
    /// would run.
    pub fn new(url: impl Into<String>) -> LoadArgs {
        let url = url.into();
        let mut args = <Cmd as clap::Parser>::parse_from(["load", "--url", url.as_str()]).args;
        args.url = url;
        args
    }

    /// The command line that parses back into these arguments (after the
    /// `load` subcommand): how the orchestrator starts the loader in its
    /// container. The only place loader flags are spelled outside the clap
    /// definition above.
    pub fn to_args(&self) -> Vec<String> {
        // Exact to the nanosecond: the loader gets the very Duration the
        // profile resolved to, not one rounded to a unit.
        let dur = |d: Duration| humantime::format_duration(d).to_string();
        let mut a: Vec<String> = vec!["--url".into(), self.url.clone()];
        if let Some(s) = self.scenario {
            a.extend(["--scenario".into(), s.to_string()]);
        }
        a.extend(["--connections".into(), self.connections.to_string()]);
        if let Some(t) = self.threads {
            a.extend(["--threads".into(), t.to_string()]);
        }
        a.extend([
            "--duration".into(),
            dur(self.duration),
            "--warmup".into(),
            dur(self.warmup),
        ]);
        if let (Some(w), Some(cv)) = (self.warmup_until_stable, self.stable_cv) {
            a.extend([
                "--warmup-until-stable".into(),
                dur(w),
                "--stable-cv".into(),
                cv.to_string(),
            ]);
        }
        if let Some(r) = self.rate {
            a.extend(["--rate".into(), r.to_string()]);
        }
        if let Some(p) = self.protocol {
            a.extend(["--protocol".into(), p.to_string()]);
        }
        if self.streams != 1 {
            a.extend(["--streams".into(), self.streams.to_string()]);
        }
        a.extend([
            "--pipeline".into(),
            self.pipeline.to_string(),
            "--timeout".into(),
            dur(self.timeout),
            "--connect-timeout".into(),
            dur(self.connect_timeout),
        ]);
        if let Some(n) = self.requests {
            a.extend(["--requests".into(), n.to_string()]);
        }
        if self.scenario.is_none() {
            a.extend(["--method".into(), self.method.clone()]);
            for h in &self.headers {
                a.extend(["--header".into(), h.clone()]);
            }
            if let Some(b) = &self.body {
                a.extend(["--body".into(), b.clone()]);
            }
        }
        if self.json {
            a.push("--json".into());
        }
        if self.progress {
            a.push("--progress".into());
        }
        a.extend(["--seed".into(), self.seed.to_string()]);
        if let Some(t) = self.start_at_unix_ns {
            a.extend(["--start-at-unix-ns".into(), t.to_string()]);
        }
        if let Some(ca) = &self.tls_ca {
            a.extend(["--tls-ca".into(), ca.display().to_string()]);
        }
        if let Some(name) = &self.tls_name {
            a.extend(["--tls-name".into(), name.clone()]);
        }
        a
    }

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
        cfg.until_stable = self.warmup_until_stable.zip(self.stable_cv);
        cfg.progress = self.progress;
        cfg.seed = self.seed;
        cfg.start_at_unix_ns = self.start_at_unix_ns;
        // Default: from the URL (LoadConfig::new); one that does not fit
        // it is refused by validate() below.
        let protocol = self.protocol.unwrap_or(cfg.protocol);
        cfg.protocol = protocol;
        cfg.streams = self.streams;
        if let Some(ca) = &self.tls_ca {
            anyhow::ensure!(
                cfg.target.tls,
                "--tls-ca is for https URLs; --url {} is plain http",
                self.url
            );
            let pem = std::fs::read(ca)
                .with_context(|| format!("--tls-ca {}: cannot read it", ca.display()))?;
            let ip = cfg.target.addr.ip().to_string();
            let name = self.tls_name.as_deref().unwrap_or(&ip);
            cfg.tls = Some(
                TlsClient::new(&pem, name, protocol)
                    .with_context(|| format!("--tls-ca {}", ca.display()))?,
            );
        }
        cfg.validate()?;
        Ok(cfg)
    }
}

/// `load` on its own, to parse a loader command line.
#[derive(clap::Parser)]
struct Cmd {
    #[command(flatten)]
    args: LoadArgs,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse_back(args: &LoadArgs) -> LoadArgs {
        let argv = std::iter::once("load".to_string()).chain(args.to_args());
        Cmd::try_parse_from(argv).expect("to_args parses").args
    }

    #[test]
    fn arguments_parse_back_into_the_same_struct() {
        let mut a = LoadArgs::new("http://10.0.0.2:8080");
        assert_eq!(a.connections, 100);
        assert_eq!(parse_back(&a), a);
        a.scenario = Some(Scenario::Param);
        a.threads = Some(3);
        a.duration = Duration::from_millis(2500);
        a.warmup = Duration::from_secs(1);
        a.rate = Some(20_000.0);
        a.pipeline = 4;
        a.timeout = Duration::from_micros(7_000_250);
        a.connect_timeout = Duration::from_nanos(1_500_000_001);
        a.requests = Some(10);
        a.warmup_until_stable = Some(Duration::from_millis(500));
        a.stable_cv = Some(0.05);
        a.json = true;
        a.progress = true;
        a.seed = 42;
        a.start_at_unix_ns = Some(1_800_000_000_000_000_000);
        assert_eq!(parse_back(&a), a);
        let mut a = LoadArgs::new("https://10.0.0.2:8443");
        a.tls_ca = Some("/run/fairground/tls/ca.pem".into());
        a.tls_name = Some("server".into());
        assert_eq!(parse_back(&a), a);
        a.protocol = Some(Protocol::H2);
        a.streams = 8;
        assert_eq!(parse_back(&a), a);
    }

    #[test]
    fn the_protocol_must_fit_the_url_and_streams_are_for_http2() {
        let mut a = LoadArgs::new("http://127.0.0.1:9");
        a.protocol = Some(Protocol::H2);
        let err = a.to_config().unwrap_err().to_string();
        assert!(err.contains("--protocol h2 needs an https:// URL"), "{err}");
        a.protocol = Some(Protocol::H2c);
        a.streams = 4;
        let cfg = a.to_config().unwrap();
        assert_eq!((cfg.protocol, cfg.streams), (Protocol::H2c, 4));
        a.protocol = None;
        let err = a.to_config().unwrap_err().to_string();
        assert!(err.contains("--streams"), "{err}");
        a.protocol = Some(Protocol::H2c);
        a.streams = 1;
        a.pipeline = 2;
        let err = a.to_config().unwrap_err().to_string();
        assert!(err.contains("--pipeline"), "{err}");
    }

    #[test]
    fn ad_hoc_requests_round_trip_too() {
        let mut a = LoadArgs::new("http://127.0.0.1:9/x?y=1");
        a.method = "POST".into();
        a.headers = vec!["x-a: b".into(), "x-c: d e".into()];
        a.body = Some("{\"k\": 1}".into());
        a.rate = Some(12.5);
        assert_eq!(parse_back(&a), a);
    }
}
