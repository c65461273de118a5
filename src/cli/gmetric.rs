//! `xrd2ganglia gmetric`, and the binary called through a link named
//! `gmetric`: Ganglia's gmetric, with its messages and exit codes.

use std::ffi::OsString;
use std::process::ExitCode;

/// Runs gmetric's `args` (without argv[0]); `argv0` names it in messages.
pub fn run(argv0: &str, args: Vec<OsString>) -> ExitCode {
    let code = xrd2ganglia::gmetric::run(
        argv0,
        args,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    ExitCode::from(code)
}
