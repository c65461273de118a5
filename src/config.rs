//! Configuration: TOML file (every key optional) + command-line overrides
//! -> validated [`Settings`]. Errors name the key and the value.
//!
//! * [`keys`]: every key, defined once in a `key_table!` entry (its
//!   field, default, range and meaning), which makes [`FileConfig`], its
//!   `Default` and its [`KEYS`]; [`file`]: reading a file;
//! * [`settings`]: validation into typed [`Settings`], the channels;
//!   `values.rs`: how one value is read (addresses, networks, paths,
//!   ranges), whatever its key;
//! * [`docs`]: docs/configuration.md and the man page xrd2ganglia.toml(5),
//!   and [`shipped`]: conf/xrd2ganglia.toml, made from the keys.
//!
//! Where packets go, first match wins: `--send` on the command line;
//! `[[channel]]` tables in the file; the `udp_send_channel`s of `gmond_conf`
//! (default `/etc/ganglia/gmond.conf`) when that file exists, as gmetric does;
//! otherwise unicast to 127.0.0.1:8649; nowhere with `send = false`.

use std::fmt;
use std::path::Path;

mod channels;
mod cluster_ports;
pub mod clusters;
pub mod docs;
mod exit_codes;
pub mod file;
pub mod keys;
mod overrides;
pub mod settings;
pub mod shipped;
mod values;

pub use file::{
    Absent, CHANNEL_KEYS, ChannelConfig, ClusterConfig, DEFAULT_CONTROL_SOCKET, DEFAULT_GMOND_CONF,
    DEFAULT_LISTEN, DEFAULT_SEND_BURST, DEFAULT_SEND_RATE, DEFAULT_STATE_FILE, DEFAULT_XML_ALLOW,
    FileConfig, KEYS, Key, METRIC_KEYS, MetricConfig, OnSighup, restart_keys, waits_for_restart,
};
pub use settings::{
    ControlSocket, DEFAULT_SEND, DetailedSettings, Overrides, Settings, check_peer, validate,
};

/// Read when `--config` is not given, if it exists.
pub const DEFAULT_CONFIG: &str = "/etc/xrd2ganglia/xrd2ganglia.toml";

/// The try-out settings (`conf/try-out.toml`, built in): used when
/// `--config` is not given and [`DEFAULT_CONFIG`] does not exist. Loopback
/// only and nothing sent, so a fresh clone's `serve` needs nothing else
/// installed and reaches nothing outside this host; `--send` sends again.
pub const TRY_OUT: &str = include_str!("../conf/try-out.toml");

/// How the settings' source reads when they are [`TRY_OUT`].
pub const TRY_OUT_SOURCE: &str =
    "built-in try-out settings (no --config, no /etc/xrd2ganglia/xrd2ganglia.toml)";

#[derive(Debug)]
pub struct ConfigError(pub String);

/// The longest line of an error shown whole; a longer one shows its
/// first and last halves of this: a value of 100 MB (or the TOML
/// parser's quote of its line) printed 100 MB to the terminal or the
/// journal, once for the value and once for the caret under it.
const MAX_ERROR_LINE: usize = 2048;

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, line) in self.0.split('\n').enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            if line.len() <= MAX_ERROR_LINE {
                f.write_str(line)?;
                continue;
            }
            // Its start and its end: the key and why, around the value.
            let mut end = MAX_ERROR_LINE / 2;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            let mut start = line.len() - MAX_ERROR_LINE / 2;
            while !line.is_char_boundary(start) {
                start += 1;
            }
            let left_out = start - end;
            write!(
                f,
                "{} ... ({left_out} bytes left out) ... {}",
                &line[..end],
                &line[start..]
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

fn bad(key: &str, value: impl fmt::Debug, why: impl fmt::Display) -> ConfigError {
    ConfigError(format!("{key} = {}: {why}", shown(value)))
}

/// The longest value an error quotes whole (a longer one: its start and
/// how long it was), so that the key after it is still said.
const MAX_ERROR_VALUE: usize = 256;

/// `value` as an error quotes it: `{value:?}`, cut after
/// [`MAX_ERROR_VALUE`] bytes.
fn shown(value: impl fmt::Debug) -> String {
    let mut text = format!("{value:?}");
    if text.len() > MAX_ERROR_VALUE {
        let mut end = MAX_ERROR_VALUE;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let total = text.len();
        text.truncate(end);
        text.push_str(&format!("... ({total} bytes)"));
    }
    text
}

/// Loads `path` (or [`DEFAULT_CONFIG`] if it exists, or the [`TRY_OUT`]
/// settings), applies the overrides and validates.
pub fn load(path: Option<&Path>, overrides: &Overrides) -> Result<Settings, ConfigError> {
    let (file, source) = match path {
        Some(p) => (FileConfig::read(p)?, p.display().to_string()),
        None if Path::new(DEFAULT_CONFIG).exists() => (
            FileConfig::read(Path::new(DEFAULT_CONFIG))?,
            DEFAULT_CONFIG.to_string(),
        ),
        None => return try_out(overrides),
    };
    validate(file, source, overrides)
}

/// The try-out's control socket for the user `uid`: one per user, so two
/// users' try-outs on one host do not take each other's, and `status` (as
/// the same user, with no config either) finds it the same way. Under
/// /tmp, which any user may write to and which is there without a login
/// session ($XDG_RUNTIME_DIR is not: `su`, cron, a container); the
/// directory is made 0750 and refused if another user could write to it
/// ([`crate::daemon::bind::control`]).
pub fn try_out_control_socket(uid: u32) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/tmp/xrd2ganglia-try-out-{uid}/control"))
}

/// The [`TRY_OUT`] settings with the overrides: `--send` sends (its
/// `send = false` is the try-out's, not the user's), and its control
/// socket, where it cannot be made, is done without.
fn try_out(overrides: &Overrides) -> Result<Settings, ConfigError> {
    let mut file = FileConfig::parse(TRY_OUT, Path::new("conf/try-out.toml"))?;
    // SAFETY: geteuid(2) only reads the calling process's credentials.
    file.control_socket = try_out_control_socket(unsafe { libc::geteuid() });
    if !overrides.send.is_empty() {
        file.send = true;
    }
    let mut settings = validate(file, TRY_OUT_SOURCE.to_string(), overrides)?;
    if let Some(c) = settings.control_socket.as_mut() {
        c.required = false;
    }
    Ok(settings)
}

#[cfg(test)]
mod tests;
