//! `fairground images build|list` and `fairground clean`: the command-line
//! faces of the image builder and of cleanup.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

use super::UsageError;
use crate::docker::engine::{DockerEngine, Engine};
use crate::docker::images::{ImageOptions, ProgressFn};
use crate::docker::RunId;
use crate::exit::ExitCode;

/// `fairground images …`
#[derive(Debug, clap::Args)]
pub struct ImagesArgs {
    /// What to do with images.
    #[command(subcommand)]
    pub action: ImagesAction,
}

/// The `images` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ImagesAction {
    /// Build (or reuse) the fairground image, the bases and the framework images.
    Build(BuildArgs),
    /// Show the images fairground built: kind, name, tag, size, input hash.
    List,
}

/// `fairground images build [NAME…]`
#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// Frameworks to build (default: every one under --frameworks).
    pub names: Vec<String>,
    /// Folder of framework folders.
    #[arg(long, default_value = "frameworks")]
    pub frameworks: PathBuf,
    /// Project root (holds docker/bases/ and target/).
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
    /// Where build logs go.
    #[arg(long, default_value = "output/build-logs")]
    pub log_dir: PathBuf,
    /// Build bases FROM this upstream image (e.g. debian:bookworm-slim)
    /// instead of mmdebstrap; only on a daemon that can pull.
    #[arg(long)]
    pub upstream_base: Option<String>,
    /// Run id to label what is built with (default: a fresh one).
    #[arg(long)]
    pub run: Option<String>,
    /// Then carry the images to the Docker hosts of this profile's
    /// `hosts:` (fairground's to every host, the frameworks' to the
    /// server's), as a run would: size and seconds per image.
    #[arg(long, value_name = "PROFILE")]
    pub carry_to: Option<String>,
}

/// Carry `built` to the hosts of profile `name`, printing one line per
/// image and host.
async fn carry(
    engine: &DockerEngine,
    built: &crate::docker::engine::BuiltImages,
    name: &str,
) -> anyhow::Result<()> {
    let (profile, path) = crate::profile::resolve(name)?;
    let hosts = profile.hosts.as_ref().ok_or_else(|| {
        UsageError(format!(
            "{} has no `hosts:` section to carry images to",
            path.display()
        ))
    })?;
    let engines = crate::bench::hosts::HostEngines::connect(hosts, engine.options()).await?;
    for c in engines.carry(engine, built).await? {
        println!(
            "{:<44} {:<32} {:>10} {:>8}",
            c.tag,
            c.endpoint,
            if c.skipped {
                "there".to_string()
            } else {
                crate::units::bytes(c.bytes as f64)
            },
            if c.skipped {
                String::new()
            } else {
                format!("{:.1} s", c.seconds)
            }
        );
    }
    Ok(())
}

/// `fairground clean`
#[derive(Debug, clap::Args)]
pub struct CleanArgs {
    /// Only this run's objects (default: every fairground run's leftovers).
    #[arg(long)]
    pub run: Option<String>,
    /// Also remove fairground's images and the cargo cache volumes of Rust
    /// framework builds (the build cache).
    #[arg(long)]
    pub images: bool,
    /// Clean on every Docker host of this profile's `hosts:` too (the
    /// local daemon is always cleaned).
    #[arg(long, short = 'p')]
    pub profile: Option<String>,
}

/// Progress: a spinner on a terminal, plain lines on stderr otherwise.
fn progress() -> (ProgressFn, Option<indicatif::ProgressBar>) {
    if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        let b = bar.clone();
        // Finished steps scroll above; the spinner shows the current one.
        (
            Arc::new(move |msg: &str| {
                b.println(msg);
                b.set_message(msg.to_string());
            }),
            Some(bar),
        )
    } else {
        (Arc::new(|msg: &str| eprintln!("{msg}")), None)
    }
}

/// Run `fairground images …`.
pub fn run_images(args: &ImagesArgs) -> anyhow::Result<ExitCode> {
    let rt = crate::docker::runtime()?;
    rt.block_on(async {
        match &args.action {
            ImagesAction::List => {
                let docker = crate::docker::connect().await?;
                let rows = crate::docker::images::list(&docker).await?;
                if rows.is_empty() {
                    println!("no fairground images yet; run `fairground images build`");
                }
                println!(
                    "{:<10} {:<16} {:<44} {:>10}  inputs",
                    "KIND", "NAME", "TAG", "SIZE"
                );
                for r in rows {
                    println!(
                        "{:<10} {:<16} {:<44} {:>10}  {}",
                        r.kind,
                        r.name,
                        r.tag,
                        crate::units::bytes(r.size_bytes as f64),
                        crate::docker::images::short(&r.inputs_hash)
                    );
                }
                Ok(ExitCode::Ok)
            }
            ImagesAction::Build(b) => build(b).await,
        }
    })
}

async fn build(b: &BuildArgs) -> anyhow::Result<ExitCode> {
    let mut frameworks = if b.frameworks.is_dir() {
        crate::framework::discover(&b.frameworks)?
    } else if b.names.is_empty() {
        Vec::new()
    } else {
        return Err(UsageError(format!("no framework folder {}", b.frameworks.display())).into());
    };
    if !b.names.is_empty() {
        let known: Vec<String> = frameworks.iter().map(|f| f.name().to_string()).collect();
        if let Some(bad) = b.names.iter().find(|n| !known.contains(n)) {
            return Err(UsageError(format!(
                "no framework `{bad}` under {}; known: {}",
                b.frameworks.display(),
                known.join(", ")
            ))
            .into());
        }
        frameworks.retain(|f| b.names.iter().any(|n| n == f.name()));
    }
    let (progress, bar) = progress();
    let run = b.run.clone().map(RunId).unwrap_or_default();
    let mut opts = ImageOptions::new(&b.root, run.clone());
    opts.log_dir = b.log_dir.clone();
    opts.upstream_base = b.upstream_base.clone();
    opts.progress = progress;
    let engine = DockerEngine::connect(opts).await?;
    // Everything the frameworks could be asked to run: the database image
    // when any of them declares a database scenario.
    let database = frameworks
        .iter()
        .any(crate::framework::Framework::declares_database);
    let built = engine.ensure_images(&frameworks, database).await;
    // Version readers are removed as they go; this catches any leftover.
    let _ = engine.cleanup(&run).await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let built = built?;
    if let Some(name) = &b.carry_to {
        carry(&engine, &built, name).await?;
    }
    let mut all = vec![built.fairground];
    all.extend(built.bases);
    all.extend(built.frameworks.into_values());
    for i in all {
        println!(
            "{:<10} {:<16} {:<44} {:>10}  {}",
            i.kind.as_str(),
            i.name,
            i.tag,
            i.size_bytes
                .map_or_else(|| "size unknown".into(), |b| crate::units::bytes(b as f64)),
            if i.reused { "reused" } else { "built" }
        );
        for line in i.versions.as_deref().unwrap_or("").lines() {
            println!("    {line}");
        }
    }
    Ok(ExitCode::Ok)
}

/// Run `fairground clean`.
pub fn run_clean(args: &CleanArgs) -> anyhow::Result<ExitCode> {
    let rt = crate::docker::runtime()?;
    rt.block_on(async {
        let mut daemons = vec![("local".to_string(), crate::docker::connect().await?)];
        if let Some(name) = &args.profile {
            let (profile, _) = crate::profile::resolve(name)?;
            for e in profile.hosts.iter().flat_map(|h| h.all()) {
                if e.url == crate::profile::hosts::LOCAL {
                    continue;
                }
                let docker = crate::docker::remote::connect(e).await?;
                daemons.push((e.to_string(), docker));
            }
        }
        let run = args.run.clone().map(RunId);
        let mut failed = false;
        for (endpoint, docker) in &daemons {
            let report = crate::docker::cleanup::clean(docker, run.as_ref(), args.images)
                .await
                .with_context(|| format!("cleaning up on {endpoint}"))?;
            if daemons.len() > 1 {
                println!("on {endpoint}:");
            }
            println!("{}", report.summary());
            for c in &report.containers {
                println!("container {c}");
            }
            for n in &report.networks {
                println!("network {n}");
            }
            for i in &report.images {
                println!("image {i}");
            }
            for v in &report.volumes {
                println!("volume {v}");
            }
            failed |= !report.failed.is_empty();
        }
        Ok(if failed {
            ExitCode::Failure
        } else {
            ExitCode::Ok
        })
    })
}
