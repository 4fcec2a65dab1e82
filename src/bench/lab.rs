//! The seam between the run pipeline and the outside world: the [`Lab`]
//! trait (start a framework, verify it, measure one round, stop it) and the
//! [`Measured`] figures a round produces.
//!
//! The real implementation drives Docker, the loader container and the
//! cgroup probe; the fake one (tests) returns scripted numbers so every gate
//! and failure path of the pipeline can be provoked without a daemon. The
//! round is made of them in `results` ([`Round::measured`]); nothing here
//! computes a figure or judges one.

use std::time::Duration;

use crate::contract::{Protocol, Scenario};
use crate::plan::spec::{LoaderSpec, ServerSpec};
use crate::results::histogram::HistogramError;
use crate::results::{AppliedLimits, LabFigures, PhaseTimes, Round, VerifyOutcome};
use crate::roles::load::LoadReport;

/// Where a server is reached, per protocol the run speaks to it in.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Urls(Vec<(Protocol, String)>);

impl Urls {
    /// The addresses of `spec`'s protocols on `host` (an IP address), on
    /// its ports inside the container: `http://host:PORT` for http1,
    /// `https://host:8443` for https and h2, `http://host:8082` for h2c.
    pub fn on(host: &str, spec: &ServerSpec) -> Urls {
        Urls(
            spec.protocols
                .iter()
                .map(|&p| {
                    let scheme = if p.is_tls() { "https" } else { "http" };
                    (p, format!("{scheme}://{host}:{}", spec.port_of(p)))
                })
                .collect(),
        )
    }

    /// Only `url`, for http1.
    pub fn http1(url: impl Into<String>) -> Urls {
        Urls(vec![(Protocol::Http1, url.into())])
    }

    /// The HTTP/1.1 address.
    #[cfg(test)]
    pub fn http(&self) -> &str {
        self.of(Protocol::Http1).unwrap_or_default()
    }

    /// The address for `protocol`, if the server is spoken to in it.
    pub fn of(&self, protocol: Protocol) -> Option<&str> {
        self.0
            .iter()
            .find(|(p, _)| *p == protocol)
            .map(|(_, u)| u.as_str())
    }
}

/// What starting a framework's server yielded.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Started {
    /// Where the loader reaches it, per protocol.
    pub urls: Urls,
    /// Container start to first 200 on the readiness path, ms.
    pub cold_start_ms: Option<f64>,
    /// The very first probe got the 200, so the server may have been ready
    /// sooner: `cold_start_ms` is an upper bound.
    pub cold_start_is_upper_bound: bool,
    /// Limits the daemon really applied.
    pub limits: Option<AppliedLimits>,
    /// Creating and starting the container, seconds.
    pub start_s: f64,
    /// From the container's start to the readiness 200, seconds.
    pub readiness_s: f64,
}

/// A framework's image as the lab built or reused it just before the
/// framework's first server ([`Lab::prepare`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The image.
    pub image: crate::docker::images::ImageInfo,
    /// Building or checking it, seconds.
    pub seconds: f64,
    /// The host's 1-minute load average right after a build (`None` when
    /// the image was reused or the load is not readable).
    pub load_after: Option<f64>,
}

/// One loader run as the lab measured it: the loader's report (its window
/// on the samples' clock), what the lab read around it, and where the
/// round's wall time went. [`Round::measured`] makes the round of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// The loader's report.
    pub load: LoadReport,
    /// The server's cgroup, the host and the loader's allotment.
    pub lab: LabFigures,
    /// Where the round's wall time went: the loader's phases (the others
    /// stay zero; the executor times those).
    pub phases: PhaseTimes,
}

impl Measured {
    /// Round `index` of these figures.
    pub fn into_round(self, index: u32) -> Result<Round, HistogramError> {
        Round::measured(index, self.load, self.lab)
    }
}

/// Where frameworks run and get measured: the lab runs the specs it is
/// given ([`crate::bench::spec`]) and knows nothing of the profile.
///
/// Calls come in this order per framework: `prepare`, `start`, `idle_memory`, `verify`,
/// then `measure` for each loader run (with `alive` after each, and `stop` +
/// `start` again when the server must restart), and `stop` last. Every
/// method is bounded in time by the implementation.
#[allow(async_fn_in_trait)] // used in one task; no Send bound needed
pub trait Lab {
    /// A running server.
    type Server;

    /// Build or reuse the image of `spec`'s framework if the lab was asked
    /// to do so just before its first server (so a run's first round does
    /// not wait for every image of the roster, and a framework whose image
    /// does not build fails alone); `None` when its image was made before
    /// the run. Called before each framework's first `start`; by default
    /// nothing.
    async fn prepare(&mut self, _spec: &ServerSpec) -> anyhow::Result<Option<Prepared>> {
        Ok(None)
    }

    /// Start the server of `spec` and wait until it answers its readiness
    /// path.
    async fn start(&mut self, spec: &ServerSpec) -> anyhow::Result<(Self::Server, Started)>;

    /// Loaders like `loader` (limits, sysctls; aimed nowhere yet) will be
    /// asked for soon: a lab may get ready for them while nothing is
    /// measured (the real lab starts its loader container during the next
    /// idle settle). Nothing by default.
    fn expect_loader(&mut self, _loader: &LoaderSpec) {}

    /// Memory the idle server uses after waiting `settle`, bytes.
    async fn idle_memory(
        &mut self,
        server: &Self::Server,
        settle: Duration,
    ) -> anyhow::Result<Option<u64>>;

    /// Check the server against the contract for `scenarios`, spoken to
    /// in `protocol` (trusting `tls`'s CA when it is a TLS protocol).
    async fn verify(
        &mut self,
        server: &Self::Server,
        scenarios: &[Scenario],
        protocol: Protocol,
        tls: Option<&crate::verify::VerifyTls>,
    ) -> anyhow::Result<VerifyOutcome>;

    /// Run the loader of `loader` against the server while sampling it.
    async fn measure(
        &mut self,
        server: &Self::Server,
        loader: &LoaderSpec,
    ) -> anyhow::Result<Measured>;

    /// Whether the server is still running.
    async fn alive(&mut self, server: &Self::Server) -> anyhow::Result<bool>;

    /// Stop and remove the server (and what was started with it). An
    /// error names the container that could not be stopped or removed.
    async fn stop(&mut self, server: Self::Server) -> anyhow::Result<()>;

    /// A container the server depends on (its database) that is no longer
    /// running, described with its name and how it ended ("the database
    /// container fg-…-db exited with code 1"); `None` while all run.
    async fn dependency_down(&mut self, server: &Self::Server) -> anyhow::Result<Option<String>>;

    /// The lab's clock, which times the run's budget: the real one; a
    /// scripted lab runs its own, advanced by what its calls would take.
    fn now(&self) -> std::time::Instant {
        std::time::Instant::now()
    }

    /// Whether the container engine still answers. Checked when something
    /// fails, so a daemon that went away ends the run (with every measured
    /// result kept and a `--resume` hint) instead of failing every
    /// framework after it.
    async fn engine_reachable(&mut self) -> bool;
}
