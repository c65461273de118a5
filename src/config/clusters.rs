//! `cluster_by_site`, `max_clusters` and `[[cluster]]`: which Ganglia
//! cluster each server is in (docs/clusters.md), validated.
//!
//! The choice itself ([`Grouping::choose`]) is made once per source (the
//! engine caches it with the source, and makes it again at a reload or a
//! new `site`), never per datagram.

use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

use super::file::{ChannelConfig, ClusterConfig, FileConfig};
use super::keys::CHANNEL_KEYS;
use super::values::networks;
use super::{ConfigError, bad, shown};
use crate::ganglia::channel::ChannelSpec;
use crate::mapping::Glob;

/// Longest cluster name: a directory name under gmetad's `rrd_rootdir`
/// and part of ganglia-web's URLs.
pub const MAX_CLUSTER_NAME: usize = 64;

/// The directory gmetad keeps a cluster's summary RRDs in: no cluster may
/// be named so (its hosts' RRDs would mix with the summary's).
pub use crate::ganglia::path_name::SUMMARY_DIR;

/// A rule's `name` that names each of its clusters by the record's site.
pub const SITE_NAME: &str = "{site}";

/// One `[[cluster]]` rule, validated.
#[derive(Debug, Clone)]
pub struct ClusterRule {
    /// Its cluster's name ([`SITE_NAME`] for a rule whose clusters are
    /// named by sites: see `by_site`).
    pub name: String,
    /// `name = "{site}"`: each server it takes is in its site's cluster.
    pub by_site: bool,
    pub sites: Vec<Glob>,
    pub networks: Vec<IpNet>,
    pub hosts: Vec<Glob>,
    pub owner: Option<String>,
    pub latlong: Option<String>,
    pub url: Option<String>,
    /// Its own send channels (empty: the default channels).
    pub channels: Vec<ChannelSpec>,
    /// Where its clusters, and only them, are served (empty: only on the
    /// gateway's `xml_listen`).
    pub xml_listen: Vec<SocketAddr>,
    /// Who may poll them (None: the gateway's `xml_allow`).
    pub xml_allow: Option<Vec<IpNet>>,
    /// Which of the gateway's rule ports serves its clusters: its place
    /// among the rules with an `xml_listen` when the gateway started
    /// ([`Grouping::keep_ports`]); None: none.
    pub port: Option<u32>,
}

/// How servers are put in clusters.
#[derive(Debug, Clone, Default)]
pub struct Grouping {
    pub rules: Vec<ClusterRule>,
    pub by_site: bool,
    pub max_clusters: usize,
}

/// Where a source goes, as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice<'a> {
    /// `cluster_name`.
    Default,
    /// The rule at this index.
    Rule(usize),
    /// The `{site}` rule at this index, and the site (as sent: still to
    /// be sanitised).
    RuleSite(usize, &'a str),
    /// Named by its site (as sent: still to be sanitised).
    Site(&'a str),
}

impl ClusterRule {
    fn matches(&self, site: Option<&str>, ip: IpAddr, host: &str) -> bool {
        let ip = ip.to_canonical();
        // A `{site}` rule takes only a server that names a site.
        (!self.by_site || site.is_some_and(|s| !s.is_empty()))
            && (self.sites.is_empty()
                || site.is_some_and(|s| self.sites.iter().any(|g| g.matches(s))))
            && (self.networks.is_empty() || self.networks.iter().any(|n| n.contains(&ip)))
            && (self.hosts.is_empty() || self.hosts.iter().any(|g| g.matches(host)))
    }
}

impl Grouping {
    /// Whether every server is in `cluster_name` (the old single cluster).
    pub fn is_single(&self) -> bool {
        self.rules.is_empty() && !self.by_site
    }

    /// The cluster of a server that says `site`, sends from `ip` and is
    /// named `host`: the first rule that matches, else its site (with
    /// `cluster_by_site`), else `cluster_name`.
    pub fn choose<'a>(&self, site: Option<&'a str>, ip: IpAddr, host: &str) -> Choice<'a> {
        if let Some(at) = self.rules.iter().position(|r| r.matches(site, ip, host)) {
            return match site {
                Some(s) if self.rules[at].by_site => Choice::RuleSite(at, s),
                _ => Choice::Rule(at),
            };
        }
        match site {
            Some(s) if self.by_site && !s.is_empty() => Choice::Site(s),
            _ => Choice::Default,
        }
    }

    /// The rule named `name` (its OWNER, LATLONG and URL).
    pub fn rule(&self, name: &str) -> Option<&ClusterRule> {
        self.rules.iter().find(|r| !r.by_site && r.name == name)
    }

    /// The rules' ports, each as its `xml_listen` (the index is the
    /// rules' `port`).
    pub fn ports(&self) -> Vec<&[SocketAddr]> {
        let mut ports: Vec<(u32, &[SocketAddr])> = self
            .rules
            .iter()
            .filter_map(|r| Some((r.port?, &r.xml_listen[..])))
            .collect();
        ports.sort_by_key(|(p, _)| *p);
        ports.into_iter().map(|(_, a)| a).collect()
    }

    /// Gives each rule the port of `running` (the ports bound at the
    /// start) that has its `xml_listen`: the ports are bound once, and a
    /// reload keeps them. Returns the rules whose `xml_listen` no running
    /// port has (their clusters are then served on the gateway's port
    /// only, until a restart).
    pub fn keep_ports(&mut self, running: &[Vec<SocketAddr>]) -> Vec<String> {
        let mut waiting = Vec::new();
        for (i, r) in self.rules.iter_mut().enumerate() {
            if r.xml_listen.is_empty() {
                continue;
            }
            r.port = running
                .iter()
                .position(|p| *p == r.xml_listen)
                .map(|p| p as u32);
            if r.port.is_none() {
                waiting.push(format!("cluster[{i}] {:?}", r.name));
            }
        }
        waiting
    }
}

/// Whether `name` is fit for a configured cluster: a directory name under
/// `rrd_rootdir` and in ganglia-web's URLs.
fn check_name(key: &str, name: &str) -> Result<(), ConfigError> {
    let why = if name.is_empty() || name.len() > MAX_CLUSTER_NAME {
        format!("must be 1 to {MAX_CLUSTER_NAME} characters")
    } else {
        return check_dir_name(key, name);
    };
    Err(bad(key, name, why))
}

/// What no cluster's name may be, configured (`cluster_name`, a rule's)
/// or made of a record's site ([`crate::engine::clusters::site_cluster_name`]
/// never makes one): whatever breaks the one rule of names gmetad makes
/// directories of (`ganglia/path_name.rs`): blank, `.` or `..` (gmetad
/// would write the hosts' RRDs into `rrd_rootdir` itself, or above it: it
/// did, with `cluster_name = ".."`), gmetad's summary directory, ...
/// Refused, never changed: a config is the admin's to fix.
pub(super) fn check_dir_name(key: &str, name: &str) -> Result<(), ConfigError> {
    crate::ganglia::path_name::check(name).map_err(|why| bad(key, name, why.as_str()))
}

/// The send channels of one `[[channel]]` list (the file's, or a
/// cluster's), `key` naming it in errors.
pub(super) fn channel_specs(
    key: &str,
    list: &[ChannelConfig],
) -> Result<Vec<ChannelSpec>, ConfigError> {
    list.iter()
        .map(|c| {
            super::values::in_ranges(&format!("{key}."), c, CHANNEL_KEYS)?;
            check_host(&format!("{key}.host"), &c.host)?;
            let bind = match &c.bind {
                Some(b) => Some(
                    b.parse()
                        .map_err(|_| bad(&format!("{key}.bind"), b, "not an IP address"))?,
                ),
                None => None,
            };
            Ok(ChannelSpec {
                host: c.host.clone(),
                port: c.port,
                ttl: c.ttl,
                mcast_if: c.mcast_if.clone(),
                bind,
            })
        })
        .collect()
}

/// The longest host name the resolver takes (RFC 1035: 253 characters
/// written out).
const MAX_HOST: usize = 253;

/// A channel's `host`: a name or address the resolver can be asked for.
/// Anything else (empty, a NUL byte, a space, longer than a name can be)
/// is a mistake in the config, never a host that may resolve later: it
/// would fail the start with exit 3, which the unit retries for ever.
pub(super) fn check_host(key: &str, host: &str) -> Result<(), ConfigError> {
    let fits = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '%');
    if host.is_empty() || host.len() > MAX_HOST || !host.chars().all(fits) {
        return Err(bad(
            key,
            host,
            format!(
                "must be a host name or address (1 to {MAX_HOST} characters: letters, digits, '.', '-', '_', ':')"
            ),
        ));
    }
    Ok(())
}

/// `cluster_by_site`, `max_clusters` and the `[[cluster]]` rules; each
/// error names the rule (`cluster[N] "name"`). `taken` are the gateway's
/// other TCP ports (`xml_listen`, `peer_listen`), which no rule's may be.
pub(super) fn grouping(
    file: &FileConfig,
    send: bool,
    xml_listen: &[SocketAddr],
    taken: &[(&str, SocketAddr)],
) -> Result<Grouping, ConfigError> {
    let mut rules: Vec<ClusterRule> = Vec::with_capacity(file.cluster.len());
    let mut ports = 0;
    for (i, c) in file.cluster.iter().enumerate() {
        let at = format!("cluster[{i}] {}", shown(&c.name));
        let mut r = rule(&at, c, file, send, &rules)?;
        if !r.xml_listen.is_empty() {
            super::cluster_ports::check(&at, &r, file, xml_listen, taken, &rules)?;
            r.port = Some(ports);
            ports += 1;
        }
        rules.push(r);
    }
    Ok(Grouping {
        rules,
        by_site: file.cluster_by_site,
        max_clusters: file.max_clusters,
    })
}

/// One `[[cluster]]` rule, checked (`at` names it in errors) against the
/// file and the rules before it.
fn rule(
    at: &str,
    c: &ClusterConfig,
    file: &FileConfig,
    send: bool,
    before: &[ClusterRule],
) -> Result<ClusterRule, ConfigError> {
    let key = |k: &str| format!("{at}: {k}");
    let by_site = c.name == SITE_NAME;
    if by_site {
        check_site_rule(at, c)?;
    } else {
        check_rule_name(&key("name"), c, file, before)?;
    }
    if c.sites.is_empty() && c.networks.is_empty() && c.hosts.is_empty() {
        return Err(ConfigError(format!(
            "{at}: matches nothing: give sites, networks or hosts"
        )));
    }
    let globs = |k: &str, list: &[String]| -> Result<Vec<Glob>, ConfigError> {
        list.iter()
            .map(|p| Glob::parse(p).map_err(|e| bad(&key(k), p, e)))
            .collect()
    };
    for (k, v) in [
        ("owner", &c.owner),
        ("latlong", &c.latlong),
        ("url", &c.url),
    ] {
        if let Some(v) = v
            && (v.len() > crate::ganglia::sanitize::MAX_TEXT || v.chars().any(char::is_control))
        {
            return Err(bad(
                &key(k),
                v,
                "must be at most 256 characters, without control characters",
            ));
        }
    }
    let channels = channel_specs(&key("channel"), &c.channel)?;
    if !channels.is_empty() && !send {
        return Err(ConfigError(format!(
            "{at}: has channels but send = false: nothing is sent to gmond"
        )));
    }
    let (xml_listen, xml_allow) = super::cluster_ports::parse(&key, c)?;
    Ok(ClusterRule {
        name: c.name.clone(),
        by_site,
        sites: globs("sites", &c.sites)?,
        networks: networks(&key("networks"), &c.networks)?,
        hosts: globs("hosts", &c.hosts)?,
        owner: c.owner.clone(),
        latlong: c.latlong.clone(),
        url: c.url.clone(),
        channels,
        xml_listen,
        xml_allow,
        port: None,
    })
}

/// A `{site}` rule: what describes one cluster (its OWNER, LATLONG, URL;
/// its gmonds: a gmond is one cluster) does not fit the many it makes.
fn check_site_rule(at: &str, c: &ClusterConfig) -> Result<(), ConfigError> {
    for (k, given) in [
        ("owner", c.owner.is_some()),
        ("latlong", c.latlong.is_some()),
        ("url", c.url.is_some()),
        ("channel", !c.channel.is_empty()),
    ] {
        if given {
            return Err(ConfigError(format!(
                "{at}: {k}: a {SITE_NAME} rule makes a cluster per site, and {k} describes one: give the site a rule of its own with a literal name"
            )));
        }
    }
    Ok(())
}

/// A rule's name: a safe directory name, and one directory on a
/// case-insensitive file system with no earlier rule's or `cluster_name`.
fn check_rule_name(
    key: &str,
    c: &ClusterConfig,
    file: &FileConfig,
    before: &[ClusterRule],
) -> Result<(), ConfigError> {
    check_name(key, &c.name)?;
    if c.name.contains(SITE_NAME) {
        return Err(bad(
            key,
            &c.name,
            format!("{SITE_NAME} must be the whole name (a cluster per site, named by it)"),
        ));
    }
    if let Some(first) = before
        .iter()
        .find(|r| !r.by_site && r.name.eq_ignore_ascii_case(&c.name))
    {
        return Err(bad(
            key,
            &c.name,
            format!(
                "a rule before it is named {:?} already (names that differ only by case are one directory on a case-insensitive file system): give both rules' matches to one rule",
                first.name
            ),
        ));
    }
    if c.name != file.cluster_name && c.name.eq_ignore_ascii_case(&file.cluster_name) {
        return Err(bad(
            key,
            &c.name,
            format!(
                "differs from cluster_name {:?} only by case (one directory on a case-insensitive file system)",
                file.cluster_name
            ),
        ));
    }
    Ok(())
}
