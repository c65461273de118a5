//! `xrd2ganglia mpxstats`, and the binary called through a link named
//! `mpxstats`: XRootD's mpxstats, with its messages and exit codes (1 for
//! bad options or a port that cannot be bound).

use std::process::ExitCode;

use xrd2ganglia::mpxstats;

/// Runs mpxstats' `args` (without argv[0]) until stdout is closed.
pub fn run(args: &[String]) -> ExitCode {
    let opts = match mpxstats::parse_args(args) {
        Ok(o) => o,
        Err(e) => return fail(&format!("{e}\n\n{}", mpxstats::USAGE)),
    };
    let socket = match mpxstats::bind(opts.port) {
        Ok(s) => s,
        Err(e) => {
            let port = opts.port;
            return fail(&format!("mpxstats: Unable to bind to port {port}: {e}"));
        }
    };
    // Returns only when stdout is closed (the consumer went away).
    let _ = mpxstats::run(
        &socket,
        &opts,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr(),
    );
    ExitCode::SUCCESS
}

/// How mpxstats ends on an error: the message, exit code 1.
fn fail(message: &str) -> ExitCode {
    eprintln!("{message}");
    ExitCode::from(1)
}
