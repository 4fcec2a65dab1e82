//! `fairground report DIR`: rewrite a run directory's reports from its
//! results.json.

use std::path::PathBuf;

use crate::report::write_run;

/// Options of `fairground report`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// A run directory (one that holds results.json), e.g. output/latest.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// Entry point of `fairground report`: read DIR/results.json and write every
/// report beside it. A missing or foreign results.json exits with code 2.
pub fn run(args: &ReportArgs) -> anyhow::Result<()> {
    let results = crate::results::read_file(&args.dir.join(crate::results::RESULTS_FILE))?;
    let files = write_run(&args.dir, &results)?;
    eprintln!("wrote {} files to {}", files.len(), args.dir.display());
    Ok(())
}
