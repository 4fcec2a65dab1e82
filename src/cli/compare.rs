//! `fairground compare BASE NEW`: the comparison on the terminal (or as
//! JSON), compare.html and an optional Markdown summary; exit 6 with
//! `--fail-on-regression` when something regressed.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context;

use crate::compare::{compare_specs, CompareHtml, CompareJson, CompareMarkdown, CompareTerminal};
use crate::exit::ExitCode;
use crate::export::bytes_of;
use crate::report::write_atomic;

/// Options of `fairground compare`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// The baseline: a run directory or its results.json, optionally
    /// `:FRAMEWORK` to take one framework of it (e.g. `output/old:axum`).
    #[arg(value_name = "BASE")]
    pub base: String,
    /// The run judged against BASE, same form. `RUN:a RUN:b` compares two
    /// frameworks of one run, cell by cell (scenario, connections, rate).
    #[arg(value_name = "NEW")]
    pub new: String,
    /// Print the comparison as JSON (schema: docs/compare.schema.json)
    /// instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write a Markdown summary, fit for a pull-request comment, to FILE.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write the comparison as a self-contained page to FILE (default:
    /// compare.html in NEW's run directory).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Exit 6 when any cell regressed beyond its noise band (or NEW now
    /// rejects a cell BASE measured).
    #[arg(long)]
    pub fail_on_regression: bool,
    /// Compare runs that differ in what changes the figures (connections,
    /// pipeline, window, limits, machine, …); every verdict is marked.
    #[arg(long)]
    pub force: bool,
}

/// Entry point of `fairground compare`.
pub fn run(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    let cmp = compare_specs(&args.base, &args.new, args.force)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        out.write_all(&bytes_of(&CompareJson, &cmp)?)?;
    } else {
        let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        out.write_all(&bytes_of(&CompareTerminal { colour }, &cmp)?)?;
    }
    out.flush()?;
    if let Some(path) = &args.markdown {
        write_atomic(path, &bytes_of(&CompareMarkdown, &cmp)?)
            .with_context(|| format!("writing the Markdown summary to {}", path.display()))?;
    }
    let html = args
        .html
        .clone()
        .unwrap_or_else(|| std::path::Path::new(&cmp.new.path).with_file_name("compare.html"));
    write_atomic(&html, &bytes_of(&CompareHtml, &cmp)?)
        .with_context(|| format!("writing the comparison page to {}", html.display()))?;
    if !args.json {
        eprintln!("page: {}", html.display());
    }
    Ok(if args.fail_on_regression && cmp.any_regression() {
        ExitCode::Regressed
    } else {
        ExitCode::Ok
    })
}
