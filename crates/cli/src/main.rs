//! `rtgauge`: thin entry point. Parse, dispatch, map the outcome to an exit code:
//! 0 = ok, 1 = a requirement or audit failed, 2 = usage or runtime error. A closed pipe is not an error.

#![forbid(unsafe_code)]

mod cli;
mod cmd;
mod output;

use clap::Parser as _;
use std::process::ExitCode;

fn main() -> ExitCode {
    // The load generators' worker process is this binary too (rtgauge_probe::load).
    if let Some(code) = rtgauge_probe::load::worker_main() {
        return ExitCode::from(u8::try_from(code).unwrap_or(2));
    }
    let cli = match cli::Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return cli::report_parse_error(&e),
    };
    let result = cli.command.run();
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // The message may quote input (a file name, a value from a foreign document): no raw escapes.
            eprintln!(
                "rtgauge: error: {}",
                rtgauge_report::escape::visible(&format!("{e:#}"))
            );
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
