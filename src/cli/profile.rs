//! `fairground profile check|show|schema`: validate profiles, print one
//! with every default filled in, print the format's JSON Schema.

use anyhow::Context;

use super::UsageError;
use crate::profile::{
    available, framework_roster_of, profiles_dir, resolve, resolve_with, schema_json, units,
    HostFacts, PROFILES_ENV,
};

/// `profile` subcommand options.
#[derive(Debug, clap::Args)]
pub struct ProfileArgs {
    #[command(subcommand)]
    pub command: ProfileCommand,
}

/// What `fairground profile` does.
#[derive(Debug, clap::Subcommand)]
pub enum ProfileCommand {
    /// Validate profiles (default: every profiles/*.yaml); exit 2 on the first problem found in each.
    Check {
        /// Profile files or bare names.
        files: Vec<String>,
        /// Folder holding the frameworks the profile may name, as `run
        /// --frameworks` takes it (repeat it for several folders): a
        /// profile `run --frameworks DIR` accepts passes the check with the
        /// same DIR.
        #[arg(long, value_name = "DIR", default_value = "frameworks")]
        frameworks: Vec<std::path::PathBuf>,
    },
    /// Print a profile with every default filled in, as YAML.
    Show {
        /// A bare name (profiles/NAME.yaml) or a path.
        name: String,
    },
    /// Print the JSON Schema of the profile format (for editors).
    Schema,
}

/// Run `fairground profile …`, writing results to stdout.
pub fn run(args: &ProfileArgs) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    run_to(args, &mut out)
}

fn run_to(args: &ProfileArgs, out: &mut impl std::io::Write) -> anyhow::Result<()> {
    match &args.command {
        ProfileCommand::Schema => out.write_all(schema_json().as_bytes())?,
        ProfileCommand::Show { name } => {
            let (profile, path) = resolve(name)?;
            writeln!(out, "# {} (every default filled in)", path.display())?;
            let yaml =
                serde_saphyr::to_string(&profile).context("cannot print the profile as YAML")?;
            out.write_all(yaml.as_bytes())?;
        }
        ProfileCommand::Check { files, frameworks } => {
            let files = if files.is_empty() {
                let dir = profiles_dir();
                let names = available(&dir);
                if names.is_empty() {
                    return Err(UsageError(format!(
                        "no profiles to check in {}; pass files or set {PROFILES_ENV}",
                        dir.display()
                    ))
                    .into());
                }
                names
                    .iter()
                    .map(|n| dir.join(format!("{n}.yaml")).display().to_string())
                    .collect()
            } else {
                files.clone()
            };
            // Framework names are checked against the roster `run` would
            // use with the same folders, not always against ./frameworks.
            let mut host = HostFacts::detect();
            host.frameworks = framework_roster_of(frameworks);
            let mut failures = Vec::new();
            for f in &files {
                match resolve_with(f, &host) {
                    Ok((p, path)) => {
                        writeln!(
                            out,
                            "ok {}: {} cell(s) per framework ({} scenario(s) x {}{} concurrency level(s) x {} round(s)); warm-up and measurement take up to {} per framework",
                            path.display(),
                            p.rounds_per_framework(),
                            p.scenarios.len(),
                            if p.protocol.len() > 1 {
                                format!("{} protocol(s) x ", p.protocol.len())
                            } else {
                                String::new()
                            },
                            p.concurrency.len(),
                            p.rounds,
                            units::Human(p.min_time_per_framework())
                        )?;
                        // Every request sent in a window gets its whole
                        // timeout to be answered: the drain after the window.
                        let drains = p.load.timeout * p.rounds_per_framework() as u32;
                        writeln!(
                            out,
                            "   after each window a drain waits for the requests still in flight, up to the {} timeout: as long as the slowest answer when the server answers, the whole timeout when a request hangs (up to {} more per framework){}",
                            units::Human(p.load.timeout),
                            units::Human(drains),
                            if p.load.timeout > p.duration {
                                format!("; the timeout is longer than the {} window, so a hung request costs more wall time than the window itself", units::Human(p.duration))
                            } else {
                                String::new()
                            }
                        )?;
                    }
                    Err(e) => failures.push(e),
                }
            }
            match failures.len() {
                0 => {}
                // The profile's own error, with its exit code.
                1 => return Err(failures.remove(0)),
                n => {
                    let each: Vec<String> = failures.iter().map(|e| format!("{e:#}")).collect();
                    return Err(UsageError(format!(
                        "{n} of {} profiles are invalid:\n{}",
                        files.len(),
                        each.join("\n")
                    ))
                    .into());
                }
            }
        }
    }
    Ok(())
}
