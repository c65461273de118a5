//! Where packets go: `--send`, the `[[channel]]` tables, the
//! `udp_send_channel`s of gmond.conf, or a gmond on this host, in that
//! order; none with `send = false` (or `--no-send`).

use std::path::PathBuf;

use super::file::{ChannelConfig, DEFAULT_GMOND_CONF, FileConfig};
use super::overrides::Overrides;
use super::{ConfigError, bad};
use crate::ganglia::channel::ChannelSpec;
use crate::ganglia::gmond_conf;

/// Where packets go when nothing says otherwise: a gmond on this host.
pub const DEFAULT_SEND: (&str, u16) = ("127.0.0.1", 8649);

/// The send channels and why these (none with `send = false` or
/// `--no-send`); the file's `channel` list becomes them, for check-config.
pub(super) fn send_channels(
    file: &mut FileConfig,
    overrides: &Overrides,
) -> Result<(Vec<ChannelSpec>, String), ConfigError> {
    if overrides.no_send {
        file.send = false;
    }
    let (channels, channels_from) = if file.send {
        channels(file, overrides)?
    } else {
        let key = if overrides.no_send {
            "--no-send"
        } else {
            "send = false"
        };
        if !overrides.send.is_empty() {
            return Err(bad("--send", &overrides.send, format!("contradicts {key}")));
        }
        (Vec::new(), key.to_string())
    };
    // What check-config prints: the channels in effect.
    file.channel = channels
        .iter()
        .map(|c| ChannelConfig {
            host: c.host.clone(),
            port: c.port,
            ttl: c.ttl,
            mcast_if: c.mcast_if.clone(),
            bind: c.bind.map(|b| b.to_string()),
        })
        .collect();
    Ok((channels, channels_from))
}

/// The channels the config gives, and where they came from.
pub(super) fn channels(
    file: &FileConfig,
    overrides: &Overrides,
) -> Result<(Vec<ChannelSpec>, String), ConfigError> {
    if !overrides.send.is_empty() {
        let list = overrides
            .send
            .iter()
            .map(|s| {
                let spec = ChannelSpec::parse_host_port(s).map_err(|e| bad("--send", s, e))?;
                super::clusters::check_host("--send", &spec.host)?;
                Ok(spec)
            })
            .collect::<Result<Vec<_>, ConfigError>>()?;
        return Ok((list, "--send".into()));
    }
    if !file.channel.is_empty() {
        let list = super::clusters::channel_specs("channel", &file.channel)?;
        return Ok((list, "[[channel]] in the config".into()));
    }
    let explicit = file.gmond_conf.is_some();
    let gmond_path = file
        .gmond_conf
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_GMOND_CONF));
    if gmond_path.exists() {
        let conf = gmond_conf::read(&gmond_path)
            .map_err(|e| bad("gmond_conf", gmond_path.display().to_string(), e))?;
        let list = conf
            .send_channels
            .iter()
            .map(|c| {
                ChannelSpec::from_gmond(c)
                    .map_err(|e| bad("gmond_conf", gmond_path.display().to_string(), e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if list.is_empty() {
            return Err(bad(
                "gmond_conf",
                gmond_path.display().to_string(),
                "has no udp_send_channel",
            ));
        }
        return Ok((
            list,
            format!("udp_send_channel of {}", gmond_path.display()),
        ));
    }
    if explicit {
        return Err(bad(
            "gmond_conf",
            gmond_path.display().to_string(),
            "file not found",
        ));
    }
    Ok((
        vec![ChannelSpec::unicast(DEFAULT_SEND.0, DEFAULT_SEND.1)],
        format!("built-in default ({} not found)", gmond_path.display()),
    ))
}
