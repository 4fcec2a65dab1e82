//! The `fairground` binary: parse the command line, run it, print any error
//! once and exit with its documented code (see `fairground::exit`).

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = fairground::cli::Cli::parse();
    match fairground::cli::run(cli) {
        Ok(code) => std::process::ExitCode::from(code.code()),
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::from(fairground::exit::classify(&err).code())
        }
    }
}
