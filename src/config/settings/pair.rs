//! The keys of a pair of gateways and of what a start reads from
//! elsewhere (`peer`, `peer_listen`, `peer_allow`, `peer_gmond_xml`,
//! `recover_from`): HOST:PORT values, and where `peer` leads.

use std::net::SocketAddr;

use ipnet::IpNet;

use super::Settings;
use crate::config::values::{addresses, networks};
use crate::config::{ConfigError, FileConfig, bad};

/// `recover_from`: each a HOST:PORT.
pub(super) fn recover_from(file: &FileConfig) -> Result<Vec<String>, ConfigError> {
    for p in &file.recover_from {
        let port = p.rsplit_once(':').map(|(h, port)| (h, port.parse::<u16>()));
        if !matches!(port, Some((h, Ok(port))) if !h.is_empty() && h.len() <= 255 && port != 0)
            || p.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(bad(
                "recover_from",
                p,
                "not a HOST:PORT (gmetad's xml_port or a gmond's tcp_accept_channel)",
            ));
        }
    }
    Ok(file.recover_from.clone())
}

/// A HOST:PORT key (a name resolved when used), if given.
pub(super) fn host_port(
    key: &str,
    value: &Option<String>,
    what: &str,
) -> Result<Option<String>, ConfigError> {
    if let Some(p) = value {
        let port = p.rsplit_once(':').map(|(h, port)| (h, port.parse::<u16>()));
        if !matches!(port, Some((h, Ok(port))) if !h.is_empty() && h.len() <= 255 && port != 0)
            || p.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(bad(key, p, what));
        }
    }
    Ok(value.clone())
}

/// `peer`, `peer_listen` and `peer_allow`.
#[allow(clippy::type_complexity)]
pub(super) fn pairing(
    file: &FileConfig,
) -> Result<(Option<String>, Vec<SocketAddr>, Vec<IpNet>), ConfigError> {
    let peer = file.peer.clone();
    if let Some(p) = &peer {
        let port = p.rsplit_once(':').map(|(h, port)| (h, port.parse::<u16>()));
        if !matches!(port, Some((h, Ok(port))) if !h.is_empty() && port != 0)
            || p.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(bad(
                "peer",
                p,
                "not a HOST:PORT (the other gateway's peer_listen)",
            ));
        }
        if let Some((host, _)) = p.rsplit_once(':')
            && !is_host(host)
        {
            return Err(bad(
                "peer",
                p,
                "not a host name (letters, digits, '-', '_' and '.'; labels of 1 to 63, \
                 253 in all) nor an IP address ([...] for IPv6)",
            ));
        }
    }
    let listen = addresses(
        "peer_listen",
        &file.peer_listen,
        "not an ADDRESS:PORT (write IPv6 as [::]:8660)",
    )?;
    if peer.is_some() == listen.is_empty() {
        return Err(bad(
            if peer.is_some() {
                "peer_listen"
            } else {
                "peer"
            },
            if peer.is_some() {
                ""
            } else {
                &file.peer_listen[0]
            },
            "a pair needs both peer and peer_listen (each gateway asks the other's peer_listen)",
        ));
    }
    Ok((peer, listen, networks("peer_allow", &file.peer_allow)?))
}

/// A host as `peer` may name it: an IPv4 address, an IPv6 address in
/// brackets, or a DNS name (RFC 1123 labels; `_` too, as some sites'
/// internal names have it).
fn is_host(host: &str) -> bool {
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6.parse::<std::net::Ipv6Addr>().is_ok();
    }
    if host.parse::<std::net::Ipv4Addr>().is_ok() {
        return true;
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    name.len() <= 253
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// `peer`, checked where it leads (`check-config` and `serve`'s start):
/// it resolves, and to none of this gateway's own `peer_listen` (an
/// address of 0.0.0.0 or :: there stands for every address of this
/// host): a gateway that asked itself would take its own word for its
/// peer's, and stand by for itself. The error says whether starting again
/// may pass with the same config (`true`: the name does not resolve yet,
/// DNS at boot, as a send host's; exit 3) or not (exit 2).
pub fn check_peer(settings: &Settings) -> Result<(), (ConfigError, bool)> {
    use std::net::ToSocketAddrs;
    let Some(peer) = settings.peer.as_deref() else {
        return Ok(());
    };
    let addrs: Vec<SocketAddr> = match peer.to_socket_addrs() {
        Ok(a) => a.collect(),
        Err(e) => return Err((bad("peer", peer, format!("does not resolve ({e})")), true)),
    };
    if addrs.is_empty() {
        return Err((bad("peer", peer, "resolves to no address"), true));
    }
    let local: Vec<std::net::IpAddr> = if_addrs::get_if_addrs()
        .map(|all| all.into_iter().map(|i| i.ip()).collect())
        .unwrap_or_default();
    let is_local = |ip: std::net::IpAddr| ip.is_loopback() || local.contains(&ip);
    for a in &addrs {
        let ip = a.ip().to_canonical();
        let own = settings.peer_listen.iter().find(|l| {
            l.port() == a.port()
                && (l.ip().to_canonical() == ip || (l.ip().is_unspecified() && is_local(ip)))
        });
        if let Some(own) = own {
            let why = format!(
                "{a} is this gateway's own peer_listen {own}: peer names the other gateway"
            );
            return Err((bad("peer", peer, why), false));
        }
    }
    Ok(())
}
