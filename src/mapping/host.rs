//! The host a record's metrics are filed under: `ip:name`, the name from
//! the record's `src` (else dCache's `host` attribute, else `info.host`,
//! else the ip), the ip from the datagram. The name is made to keep the
//! rule of `ganglia/path_name.rs` (it is a directory of gmetad's): `..`,
//! `.` or nothing usable is as no name, the ip.

use std::fmt::Write as _;
use std::net::IpAddr;

use crate::ganglia::path_name::Change;
use crate::ganglia::sanitize;
use crate::summary::{Header, SummaryRecord};

/// The host a record's metrics are filed under in gmond.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostIdentity {
    /// `ip:name`, the metric_id host and SPOOF_HOST value.
    pub spoof: String,
    /// The NAME gmond shows.
    pub name: String,
    /// The IP text gmond keys the host by (colon-free, see [`ip_text`]).
    pub ip: String,
    /// What was changed in the name sent to make it a safe directory name
    /// for gmetad (`ganglia/path_name.rs`; `Unusable`: the IP stands in).
    pub renamed: Option<Change>,
    /// The name as sent, when it was changed (else empty).
    pub sent: String,
}

/// The IP part of a spoof string. gmond splits the spoof string at its first
/// ':' so an IPv6 literal cannot stand there: IPv4 (and IPv4-mapped IPv6)
/// addresses are written as usual, other IPv6 addresses with '-' for ':'
/// (the ipv6-literal.net convention, `2001-db8--1`).
pub fn ip_text(out: &mut String, ip: IpAddr) {
    let ip = match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    };
    let start = out.len();
    let _ = write!(out, "{ip}");
    if ip.is_ipv6() {
        // SAFETY of the byte edit: ':' and '-' are both single ASCII bytes.
        let replaced = out[start..].replace(':', "-");
        out.truncate(start);
        out.push_str(&replaced);
    }
}

/// Works out the host identity of a record sent from `source`.
pub fn host_identity(
    header: &Header<'_>,
    record: &SummaryRecord<'_>,
    source: IpAddr,
    out: &mut HostIdentity,
) {
    out.ip.clear();
    ip_text(&mut out.ip, source);
    out.name.clear();
    // Only look further than `src` when it is missing (each look is a scan).
    let name = header
        .src
        .map(src_host)
        .filter(|n| !n.is_empty())
        .or_else(|| record.get("host").filter(|n| !n.is_empty()))
        .or_else(|| record.get("info.host").filter(|n| !n.is_empty()));
    out.renamed = None;
    out.sent.clear();
    if let Some(name) = name {
        // A name that breaks the rule is changed (rarely: the copy of it
        // kept for the log line is made only then).
        out.renamed = sanitize::push_host(&mut out.name, name);
        if out.renamed.is_some() {
            out.sent.push_str(crate::ganglia::path_name::shown(name));
        }
    }
    if out.name.is_empty() {
        out.name.push_str(&out.ip);
    }
    out.spoof.clear();
    out.spoof.push_str(&out.ip);
    out.spoof.push(':');
    out.spoof.push_str(&out.name);
}

/// `host:port` -> `host`; `[v6]:port` -> `v6`; anything else unchanged.
fn src_host(src: &str) -> &str {
    if let Some(rest) = src.strip_prefix('[') {
        return rest.split_once(']').map(|(h, _)| h).unwrap_or(rest);
    }
    match src.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => src,
    }
}
