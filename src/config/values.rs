//! How one value of the file is read, whatever its key: addresses,
//! networks, paths the kernel takes, numbers in their ranges, a list the
//! command line replaces. Errors name the key and the value.

use std::net::SocketAddr;

use ipnet::IpNet;

use super::keys::Key;
use super::{ConfigError, bad};

/// The longest path the kernel takes (`PATH_MAX`, less its NUL).
const MAX_PATH: usize = 4095;
/// The longest file name the kernel takes (`NAME_MAX`), less what the
/// gateway appends to the state file's (`.lock`, `.tmp`).
const MAX_FILE_NAME: usize = 255 - ".lock".len();

/// A path the kernel can be given: no NUL byte (no system call takes
/// one: `serve` would fail where `check-config` passed), not longer than
/// the kernel takes, nor any of its names.
pub(super) fn check_path(key: &str, path: &std::path::Path) -> Result<(), ConfigError> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let why = if bytes.contains(&0) {
        "contains a NUL byte, which no path may".to_string()
    } else if bytes.len() > MAX_PATH {
        format!("is longer than a path may be ({MAX_PATH} bytes)")
    } else if path
        .components()
        .any(|c| c.as_os_str().len() > MAX_FILE_NAME)
    {
        format!(
            "has a name longer than {MAX_FILE_NAME} bytes (the file system's limit, less `.lock`)"
        )
    } else {
        return Ok(());
    };
    Err(bad(key, path.display().to_string(), why))
}

/// The numbers of `table` (a [`super::FileConfig`], a [`super::ChannelConfig`])
/// in the ranges of its `keys`, in their order; `prefix` names the table in
/// errors (`channel.`).
pub(super) fn in_ranges<T: serde::Serialize>(
    prefix: &str,
    table: &T,
    keys: &[Key],
) -> Result<(), ConfigError> {
    // JSON holds every u64 (TOML's values stop at i64::MAX).
    let Ok(serde_json::Value::Object(values)) = serde_json::to_value(table) else {
        return Err(ConfigError(format!(
            "{prefix}: cannot check the values' ranges"
        )));
    };
    for (key, r) in keys.iter().filter_map(|k| Some((k.name, k.range?))) {
        let Some(v) = values.get(key).and_then(serde_json::Value::as_u64) else {
            continue;
        };
        r.check(v)
            .map_err(|why| bad(&format!("{prefix}{key}"), v, why))?;
    }
    Ok(())
}

/// A command-line list (`flag`, repeatable) replaces the file's (`key`);
/// returns the name to cite in errors.
pub(super) fn replace(
    file: &mut Vec<String>,
    cli: &[String],
    key: &'static str,
    flag: &'static str,
) -> &'static str {
    if cli.is_empty() {
        return key;
    }
    *file = cli.to_vec();
    flag
}

/// ADDRESS:PORT values of `key`.
pub(super) fn addresses(
    key: &str,
    list: &[String],
    why: &str,
) -> Result<Vec<SocketAddr>, ConfigError> {
    list.iter()
        .map(|a| a.parse().map_err(|_| bad(key, a, why)))
        .collect()
}

/// Networks (`10.0.0.0/8`) or single addresses, for `key`.
pub(super) fn networks(key: &str, list: &[String]) -> Result<Vec<IpNet>, ConfigError> {
    list.iter()
        .map(|a| {
            a.parse()
                .or_else(|_| a.parse::<std::net::IpAddr>().map(IpNet::from))
                .map_err(|_| {
                    bad(
                        key,
                        a,
                        "not a network (10.0.0.0/8, 2001:db8::/32) or address",
                    )
                })
        })
        .collect()
}
