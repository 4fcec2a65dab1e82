//! `fairground history DIR…`: many runs over commits or time, their trend
//! and change points; writes history.json and history.html.

use std::path::PathBuf;

use anyhow::Context;

use crate::exit::ExitCode;
use crate::history::{build, page, read_runs, terminal, HISTORY_HTML, HISTORY_JSON};

/// Options of `fairground history`.
#[derive(Debug, Clone, clap::Args)]
pub struct HistoryArgs {
    /// Run directories (each holding a results.json), or folders of them
    /// such as `output/`.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Folder to write history.html and history.json to.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub out: PathBuf,
}

/// Entry point of `fairground history`.
pub fn run(args: &HistoryArgs) -> anyhow::Result<ExitCode> {
    let history = build(read_runs(&args.dirs)?)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let json = serde_json::to_vec_pretty(&history.0)?;
    crate::report::write_atomic(
        &args.out.join(HISTORY_JSON),
        &[json, b"\n".to_vec()].concat(),
    )?;
    crate::report::write_atomic(&args.out.join(HISTORY_HTML), page(&history.0).as_bytes())?;
    print!("{}", terminal(&history.0));
    eprintln!(
        "wrote {} and {}",
        args.out.join(HISTORY_HTML).display(),
        args.out.join(HISTORY_JSON).display()
    );
    Ok(ExitCode::Ok)
}
