//! `xrd2ganglia check-config`: validates a configuration and prints the
//! effective settings.

use std::io::Write;

use super::{Outcome, init_logging, log_filter, serve};
use crate::ConfigArgs;

/// Validates the config and opens its send channels, as a SIGHUP reload
/// would (so hosts are resolved); prints the effective settings. The
/// listening addresses and the state file are not tried: the gateway this
/// config is checked for may be running and hold them.
/// `--log-level` is taken as `serve` takes it (a bad filter is refused),
/// so that the unit can give both commands the same options; warnings are
/// logged whatever it says.
pub fn run(config: &ConfigArgs, log_level: Option<&str>) -> Outcome {
    log_filter(log_level, "warn")?;
    init_logging(log_filter(None, "warn")?);
    let settings = config.load()?;
    xrd2ganglia::config::check_peer(&settings).map_err(super::peer_error)?;
    serve::open_channels(&settings)?;
    // A closed pipe (`| head`) is not an error worth a panic.
    let _ = write!(std::io::stdout().lock(), "{settings}");
    Ok(())
}
