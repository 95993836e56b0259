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
    let result = match &cli.command {
        cli::Command::Cyclic(a) => cmd::cyclic::run(a),
        cli::Command::Capacity(a) => cmd::capacity::run(a),
        cli::Command::Oslat(a) => cmd::oslat::run(a),
        cli::Command::Net(a) => cmd::net::run(a),
        cli::Command::Run(a) => cmd::run::run(a),
        cli::Command::Runs(a) => cmd::runs::run(a),
        cli::Command::Export(a) => cmd::runs::export(a, &a.db),
        cli::Command::Import(a) => cmd::runs::import(a),
        cli::Command::Push(a) => cmd::push::run(a),
        cli::Command::Report(a) => cmd::report::report(a),
        cli::Command::Compare(a) => cmd::compare::compare(a),
        cli::Command::Verify(a) => cmd::verify::run(a),
        cli::Command::Audit(a) => cmd::audit::run(a),
        cli::Command::Fingerprint(a) => cmd::fingerprint::run(a),
        cli::Command::Ops(a) => cmd::ops::run(a),
        cli::Command::Hwnoise(a) => cmd::hwnoise::run(a),
        cli::Command::Clock(a) => cmd::clock::run(a),
        cli::Command::Mem(a) => cmd::mem::run(a),
        cli::Command::Numa(a) => cmd::numa::run(a),
        cli::Command::Plan(a) => cmd::plan::run(a),
        cli::Command::Monitor(a) => cmd::monitor::run(a),
        cli::Command::Load(a) => cmd::load::run(a),
        cli::Command::Fleet(a) => cmd::fleet::run(a),
        cli::Command::Vm(a) => cmd::vm::run(a),
    };
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
