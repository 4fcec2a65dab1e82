//! The commands that run inside a run's containers: `fairground load` (its
//! flags are `roles::load::args::LoadArgs`, which the plan also writes),
//! `fairground ready`, `fairground serve` and `fairground hold`.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;

use super::UsageError;
use crate::contract::Protocol;
use crate::exit::ExitCode;
use crate::roles::load::args::LoadArgs;
use crate::roles::ready::wait;
use crate::roles::serve::{start_with, Wire};

/// Entry point of `fairground load`.
pub fn load(args: &LoadArgs) -> anyhow::Result<ExitCode> {
    // The flags describe no load that can run: the command line's fault.
    let cfg = args.to_config().map_err(|e| UsageError(format!("{e:#}")))?;
    let report = crate::roles::load::run(&cfg)?;
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

/// Options of `fairground ready`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReadyArgs {
    /// URL to poll, `http://IP:PORT/PATH` (an IP address: the image has no resolver).
    #[arg(long)]
    pub url: String,
    /// Give up after this long (e.g. `30s`).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// Pause between attempts (e.g. `1ms`).
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    pub every: Duration,
    /// After reporting, keep running until killed: the prober owns the
    /// network namespace the server joined, which must outlive the report.
    #[arg(long)]
    pub hold: bool,
}

/// `fairground ready`: print one JSON line; fail (exit 1) on timeout.
pub fn ready(args: &ReadyArgs) -> anyhow::Result<()> {
    let report = wait(&args.url, args.timeout, args.every)?;
    println!("{}", serde_json::to_string(&report)?);
    std::io::stdout().flush()?;
    if report.ready && args.hold {
        // Removed with the server it serves (SIGKILL); sleeping costs nothing.
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    if !report.ready {
        anyhow::bail!(
            "{} did not answer 200 within {} ({} attempts; last: {})",
            args.url,
            humantime::format_duration(args.timeout),
            report.attempts,
            report.last_error.as_deref().unwrap_or("nothing")
        );
    }
    Ok(())
}

/// Options of `fairground serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on. Use 0.0.0.0 inside a container.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    /// TCP port to listen on (0 picks a free one and prints it).
    #[arg(short, long, default_value_t = 8080)]
    pub port: u16,
    /// Worker threads, each with its own listener (default: CPUs available).
    #[arg(short, long)]
    pub threads: Option<usize>,
    /// What to speak: http1 (HTTP/1.1), https (TLS, HTTP/1.1), h2 (TLS,
    /// HTTP/2 agreed by ALPN; HTTP/1.1 to clients that ask for it), h2c
    /// (HTTP/2 with prior knowledge, plain TCP).
    #[arg(long, value_enum, default_value_t = Protocol::Http1)]
    pub protocol: Protocol,
    /// Certificate chain to present for https and h2 (PEM; a run mounts
    /// its own and sets the variable).
    #[arg(long, env = "FAIRGROUND_TLS_CERT", value_name = "PEM")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// Private key of that certificate (PEM).
    #[arg(long, env = "FAIRGROUND_TLS_KEY", value_name = "PEM")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Serve the contract's ports at once, as a framework in a container
    /// does (docs/contract.md, "Protocols"): http1 on --port, h2c on
    /// FAIRGROUND_H2C_PORT (8082) and, when a certificate is given, TLS on
    /// FAIRGROUND_TLS_PORT (8443). --protocol is then not used.
    #[arg(long)]
    pub contract_ports: bool,
    /// With --contract-ports: what the TLS listener speaks. h2 offers `h2`
    /// and `http/1.1` under ALPN (as servers do); https offers `http/1.1`
    /// only (a server that cannot do h2, for tests).
    #[arg(long, value_enum, default_value_t = Protocol::H2, env = "FAIRGROUND_SERVE_TLS_PROTOCOL")]
    pub tls_protocol: Protocol,
    /// Every answer waits this long before it is sent (e.g. 20ms): a
    /// server whose answers take a known time, for known-answer tests.
    #[arg(long, env = "FAIRGROUND_SERVE_DELAY", default_value = "0s", value_parser = humantime::parse_duration)]
    pub delay: Duration,
    /// With --delay: answer the first N requests at once (contract
    /// verification), then every one after the delay.
    #[arg(
        long,
        env = "FAIRGROUND_SERVE_DELAY_AFTER",
        default_value_t = 0,
        requires = "delay"
    )]
    pub delay_after: u64,
    /// Answer the database scenarios with a known defect, so tests can
    /// prove verification catches it: `cache` (rows from memory after the
    /// first query), `fake-values` (numbers it never read), `no-persist`
    /// (updates never written), `raw-fortunes` (messages not escaped).
    #[arg(long, value_enum, env = "FAIRGROUND_SERVE_DB_DEFECT")]
    pub db_defect: Option<crate::roles::serve::DbDefect>,
    /// Serve HTTP/2 (h2, h2c) with a known defect, so tests can prove
    /// fairground catches it: `serial` (the streams of a connection
    /// answered one at a time, 2 ms each, behind a stream limit of 1000),
    /// `limit4` (SETTINGS_MAX_CONCURRENT_STREAMS 4).
    #[arg(long, value_enum, env = "FAIRGROUND_SERVE_H2_DEFECT")]
    pub h2_defect: Option<crate::roles::serve::H2Defect>,
    /// Serve WebSocket (`GET /ws`) with a known defect, so tests can prove
    /// fairground catches it: `bad-accept` (a Sec-WebSocket-Accept not
    /// the key's), `fixed` (every message answered with the first),
    /// `no-unmask` (payloads echoed still masked), `no-pong` (pings never
    /// answered), `no-close` (a close answered by dropping the connection).
    #[arg(long, value_enum, env = "FAIRGROUND_SERVE_WS_DEFECT")]
    pub ws_defect: Option<crate::roles::serve::WsDefect>,
    /// Serve gRPC (`fairground.bench.Bench` on the HTTP/2 listeners) with
    /// a known defect, so tests can prove fairground catches it: `fixed`
    /// (one reply for every Echo), `bad-message` (a length prefix longer
    /// than the message, status OK), `no-trailers` (no grpc-status),
    /// `any-method` (an unknown method answered as Echo).
    #[arg(long, value_enum, env = "FAIRGROUND_SERVE_GRPC_DEFECT")]
    pub grpc_defect: Option<crate::roles::serve::GrpcDefect>,
    /// Every upgraded WebSocket connection holds this much memory, written
    /// so it is resident (e.g. 1MiB): a server whose memory per connection
    /// is known, for the `ws-idle` known answer.
    #[arg(long, value_name = "SIZE", env = "FAIRGROUND_SERVE_WS_HOLD")]
    pub ws_hold: Option<crate::profile::units::Bytes>,
}

/// The port in environment variable `name`, or `default`.
fn port_env(name: &str, default: u16) -> anyhow::Result<u16> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(v) => v
            .parse()
            .map_err(|_| UsageError(format!("{name}={v} is not a port")).into()),
    }
}

/// `fairground serve --contract-ports`: the three listeners of the
/// contract, until SIGINT or SIGTERM.
fn serve_contract_ports(args: &ServeArgs, threads: usize) -> anyhow::Result<()> {
    use crate::contract::{H2C_PORT, H2C_PORT_ENV, TLS_PORT, TLS_PORT_ENV};
    let mut servers = vec![start_with(args.bind, args.port, threads, Wire::Http1)?];
    println!(
        "fairground serve listening on http://{} (http1, {threads} threads)",
        servers[0].addr
    );
    let h2c = start_with(
        args.bind,
        port_env(H2C_PORT_ENV, H2C_PORT)?,
        threads,
        Wire::H2c,
    )?;
    println!(
        "fairground serve listening on http://{} (h2c, {threads} threads)",
        h2c.addr
    );
    servers.push(h2c);
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        if !args.tls_protocol.is_tls() {
            return Err(UsageError(format!(
                "--tls-protocol {} is not a TLS protocol (https or h2)",
                args.tls_protocol
            ))
            .into());
        }
        let config = crate::tls::server_config_from_files(cert, key, args.tls_protocol)?;
        let tls = start_with(
            args.bind,
            port_env(TLS_PORT_ENV, TLS_PORT)?,
            threads,
            Wire::Tls(config),
        )?;
        println!(
            "fairground serve listening on https://{} ({}, {threads} threads)",
            tls.addr, args.tls_protocol
        );
        servers.push(tls);
    }
    wait_for_stop()?;
    for s in servers {
        s.stop();
    }
    Ok(())
}

/// Block until SIGINT or SIGTERM.
fn wait_for_stop() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        anyhow::Ok(())
    })
}

/// Entry point of `fairground serve`: serve until SIGINT or SIGTERM.
pub fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    crate::roles::serve::set_delay(args.delay, args.delay_after);
    if let Some(d) = args.db_defect {
        crate::roles::serve::set_db_defect(d);
    }
    if let Some(d) = args.h2_defect {
        crate::roles::serve::set_h2_defect(d);
    }
    if let Some(d) = args.ws_defect {
        crate::roles::serve::set_ws_defect(d);
    }
    if let Some(d) = args.grpc_defect {
        crate::roles::serve::set_grpc_defect(d);
    }
    if let Some(b) = args.ws_hold {
        crate::roles::serve::set_ws_hold(b.0 as usize);
    }
    if args.contract_ports {
        return serve_contract_ports(args, threads);
    }
    let tls = match (args.protocol.is_tls(), &args.tls_cert, &args.tls_key) {
        (false, _, _) => None,
        (true, Some(cert), Some(key)) => Some(crate::tls::server_config_from_files(
            cert,
            key,
            args.protocol,
        )?),
        (true, _, _) => {
            return Err(UsageError(format!(
                "--protocol {} needs --tls-cert and --tls-key (or FAIRGROUND_TLS_CERT and \
                 FAIRGROUND_TLS_KEY): a certificate chain and its key, PEM",
                args.protocol
            ))
            .into())
        }
    };
    let server = start_with(args.bind, args.port, threads, Wire::of(args.protocol, tls)?)?;
    let scheme = if args.protocol.is_tls() {
        "https"
    } else {
        "http"
    };
    // A line the orchestrator and tests can wait for.
    println!(
        "fairground serve listening on {scheme}://{} ({}, {threads} threads)",
        server.addr, args.protocol
    );
    wait_for_stop()?;
    server.stop();
    Ok(())
}

/// `fairground hold`: sleep until killed, the main process of a run's
/// long-lived loader container (removed with the run by SIGKILL; a sleeping
/// PID 1 costs nothing).
pub fn hold() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
