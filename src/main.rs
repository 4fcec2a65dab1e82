//! The `fairground` binary: parse the command line, run it, print any error
//! once and exit with its documented code (`fairground::exit`, found by
//! the error's type in `fairground::cli::exit_code`).

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = fairground::cli::Cli::parse();
    match fairground::cli::run(cli) {
        Ok(code) => std::process::ExitCode::from(code.code()),
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::from(fairground::cli::exit_code(&err).code())
        }
    }
}
