//! `fairground run`: its flags; the run itself is `bench::run`.

use std::path::PathBuf;

use crate::bench::run::RunOptions;

/// Options of `fairground run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Profile to run: a name in profiles/ (e.g. `standard`) or a path to a
    /// YAML file. With --resume, defaults to the profile of that run.
    #[arg(long, short = 'p')]
    pub profile: Option<String>,
    /// Run even if preflight judges the environment unfit; every result is
    /// then flagged "environment not accepted".
    #[arg(long)]
    pub accept_env: bool,
    /// Continue the run in this directory (one that holds results.json):
    /// only the rounds it lacks are measured.
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
    /// Where run directories are created (`<DIR>/<UTC time>-<profile>/`,
    /// and `<DIR>/latest` points at the newest).
    #[arg(long, value_name = "DIR", default_value = "output")]
    pub output: PathBuf,
    /// Folder holding the frameworks (one subfolder with a framework.yaml each).
    /// Repeat it to run frameworks of several folders side by side (two
    /// versions of one framework, in folders of their own names).
    #[arg(long, value_name = "DIR", default_value = "frameworks")]
    pub frameworks: Vec<PathBuf>,
}

impl RunArgs {
    /// The run these flags ask for.
    pub fn options(&self) -> RunOptions {
        RunOptions {
            profile: self.profile.clone(),
            accept_env: self.accept_env,
            resume: self.resume.clone(),
            output: self.output.clone(),
            frameworks: self.frameworks.clone(),
        }
    }
}
