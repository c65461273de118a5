//! `xrd2ganglia check-config`: validates a configuration and prints the
//! effective settings.

use std::io::Write;

use super::{Outcome, init_logging, serve};
use crate::ConfigArgs;

/// Validates the config and opens its send channels, as a SIGHUP reload
/// would (so hosts are resolved); prints the effective settings. The
/// listening addresses and the state file are not tried: the gateway this
/// config is checked for may be running and hold them.
pub fn run(config: &ConfigArgs) -> Outcome {
    init_logging("warn");
    let settings = config.load()?;
    serve::open_channels(&settings)?;
    // A closed pipe (`| head`) is not an error worth a panic.
    let _ = write!(std::io::stdout().lock(), "{settings}");
    Ok(())
}
