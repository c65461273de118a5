//! The table written as gmond's XML for gmetad: one CLUSTER per cluster,
//! each host as gmond holds it, a piece at a time, with what is past its
//! DMAX dropped first and two hosts of one name told apart.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use foldhash::fast::RandomState;

use crate::config::clusters::Grouping;
use crate::engine::clusters::{self, Cluster, ClusterRef};
use crate::ganglia::xml;

use super::meta::Meta;
use super::{CHUNK, Entry, Host, HostTable, NEVER, UP_FACTOR, unix_now};

/// What one document held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub hosts: usize,
    pub metrics: usize,
    pub bytes: usize,
    /// Hosts written as `NAME@ADDRESS` (their name was another's).
    pub renamed: usize,
    /// CLUSTER elements.
    pub clusters: usize,
}

/// The document's default cluster (`cluster_name`), the rules that give
/// other clusters their OWNER, LATLONG and URL, and the DMAX written for
/// hosts.
pub struct ClusterInfo<'a> {
    pub name: &'a str,
    pub host_dmax: u32,
    pub grouping: &'a Grouping,
}

/// Writes one host and its metrics (by name) as gmond does; returns how
/// many metrics. `ip` is scratch.
fn write_host(
    out: &mut Vec<u8>,
    host: &Host,
    name: &str,
    cluster: &ClusterInfo<'_>,
    now_s: u32,
    unix: u64,
    ip: &mut String,
) -> usize {
    use std::fmt::Write;
    ip.clear();
    let _ = write!(ip, "{}", host.ip);
    let tn = now_s.saturating_sub(host.reported);
    xml::host_start(
        out,
        &xml::Host {
            name,
            ip,
            reported: unix.saturating_sub(u64::from(tn)),
            tn: u64::from(tn),
            tmax: host.tmax(),
            dmax: cluster.host_dmax,
            started: u64::from(host.started),
        },
    );
    let mut order: Vec<(&Meta, &Entry)> = host
        .metrics
        .values()
        .filter(|e| e.value_at != NEVER)
        .filter_map(|e| Some((e.meta.as_deref()?, e)))
        .collect();
    order.sort_unstable_by(|a, b| a.0.name.cmp(&b.0.name));
    let mut extra: Vec<(&str, &str)> = Vec::new();
    for (m, e) in &order {
        extra.clear();
        extra.extend(m.extra.iter().map(|(k, v)| (&**k, &**v)));
        xml::metric(
            out,
            &xml::Metric {
                name: &m.name,
                val: e.value.as_bytes(),
                value_type: &m.value_type,
                units: &m.units,
                tn: u64::from(now_s.saturating_sub(e.value_at)),
                tmax: e.tmax,
                dmax: e.dmax,
                slope: m.slope,
                extra: &extra,
            },
        );
    }
    xml::host_end(out);
    order.len()
}

/// A CLUSTER start tag, with its rule's OWNER, LATLONG and URL if a rule
/// names it.
fn cluster_start(out: &mut Vec<u8>, name: &str, grouping: &Grouping, unix: u64) {
    let rule = grouping.rule(name);
    xml::cluster_start(
        out,
        &xml::Cluster {
            name,
            localtime: unix,
            owner: rule.and_then(|r| r.owner.as_deref()),
            latlong: rule.and_then(|r| r.latlong.as_deref()),
            url: rule.and_then(|r| r.url.as_deref()),
        },
    );
}

/// How long a cluster whose hosts all left (moved to another cluster, or
/// past their DMAX) is still written, empty: long enough for every gmetad
/// polling to see its hosts leave. Seconds.
const EMPTY_CLUSTER_KEPT: u32 = 3600;

impl HostTable {
    /// Writes the whole document to `sink`, a piece at a time, first
    /// dropping what is past its DMAX.
    pub fn write(
        &self,
        cluster: &ClusterInfo<'_>,
        now: Instant,
        sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<Written> {
        let now_s = self.secs(now);
        let unix = unix_now();
        let hosts = self.expire_and_list(now_s);
        let names = resolve_names(&hosts, now_s);

        let mut written = Written {
            renamed: names.iter().filter(|n| n.is_some()).count(),
            ..Written::default()
        };
        let mut out = Vec::with_capacity(CHUNK + 16 * 1024);
        xml::prologue(&mut out);
        let mut ip = String::new();
        // Hosts are listed by cluster: `cluster_name`'s first (always
        // written, even empty, as a gmond's), then the others by name.
        let mut at = 0;
        let mut first = true;
        let mut seen: HashMap<u64, (Arc<Cluster>, u32), RandomState> = HashMap::default();
        while first || at < hosts.len() {
            let this = if first {
                None
            } else {
                hosts[at].cluster.clone()
            };
            first = false;
            let name = this.as_ref().map_or(cluster.name, |c| &*c.name);
            cluster_start(&mut out, name, cluster.grouping, unix);
            let key = clusters::key_of(&this);
            while at < hosts.len() && clusters::key_of(&hosts[at].cluster) == key {
                let (listed, rename) = (&hosts[at], &names[at]);
                at += 1;
                {
                    let shard = self.shard(listed.key);
                    let Some(host) = shard.get(&listed.key) else {
                        continue;
                    };
                    let name = rename.as_deref().unwrap_or(&host.name);
                    written.metrics +=
                        write_host(&mut out, host, name, cluster, now_s, unix, &mut ip);
                    written.hosts += 1;
                }
                if out.len() >= CHUNK {
                    written.bytes += out.len();
                    sink(&out)?;
                    out.clear();
                }
            }
            xml::cluster_end(&mut out);
            written.clusters += 1;
            if let Some(c) = this {
                seen.insert(c.key, (c, now_s));
            }
        }
        // Clusters left empty since the last polls: written empty, so
        // gmetad drops their hosts.
        let mut had = self.had_hosts.lock().unwrap_or_else(|e| e.into_inner());
        had.retain(|_, (_, at)| now_s.saturating_sub(*at) <= EMPTY_CLUSTER_KEPT);
        let mut empty: Vec<&Arc<Cluster>> = had
            .iter()
            .filter(|(key, _)| !seen.contains_key(*key))
            .map(|(_, (c, _))| c)
            .collect();
        empty.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        for c in empty {
            cluster_start(&mut out, &c.name, cluster.grouping, unix);
            xml::cluster_end(&mut out);
            written.clusters += 1;
        }
        had.extend(seen);
        drop(had);
        xml::end(&mut out);
        written.bytes += out.len();
        sink(&out)?;
        Ok(written)
    }

    /// Drops metrics past their DMAX and hosts left without metrics; lists
    /// the rest, sorted by name.
    fn expire_and_list(&self, now_s: u32) -> Vec<Listed> {
        let mut list = Vec::with_capacity(self.hosts.load(Relaxed));
        for shard in self.shards.iter() {
            let mut shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            let before = shard.len();
            shard.retain(|key, host| {
                host.metrics.retain(|_, e| {
                    let at = if e.value_at == NEVER {
                        host.first_seen
                    } else {
                        e.value_at
                    };
                    e.dmax == 0 || now_s.saturating_sub(at) <= e.dmax
                });
                if host.metrics.is_empty() {
                    return false;
                }
                list.push(Listed {
                    cluster: host.cluster.clone(),
                    key: *key,
                    name: host.name.clone(),
                    spoof_ip: host.spoof_ip.clone(),
                    first_seen: host.first_seen,
                    reported: host.reported,
                    tmax: host.tmax(),
                });
                true
            });
            self.hosts.fetch_sub(before - shard.len(), Relaxed);
        }
        // `cluster_name`'s hosts (None) first.
        fn cluster_of(h: &Listed) -> Option<(&str, u64)> {
            h.cluster.as_deref().map(|c| (&*c.name, c.key))
        }
        list.sort_unstable_by(|a, b| {
            cluster_of(a)
                .cmp(&cluster_of(b))
                .then(a.name.cmp(&b.name))
                .then(a.first_seen.cmp(&b.first_seen))
        });
        list
    }
}

/// A host as listed before writing.
struct Listed {
    cluster: ClusterRef,
    key: u64,
    name: Box<str>,
    spoof_ip: Box<str>,
    first_seen: u32,
    reported: u32,
    tmax: u32,
}

/// For each listed host (sorted by cluster, then name), the name to write instead of its
/// own when another host has it (None: its own).
fn resolve_names(hosts: &[Listed], now_s: u32) -> Vec<Option<String>> {
    let mut names = vec![None; hosts.len()];
    let mut start = 0;
    while start < hosts.len() {
        let end = start
            + hosts[start..]
                .iter()
                .take_while(|h| {
                    h.name == hosts[start].name
                        && clusters::key_of(&h.cluster) == clusters::key_of(&hosts[start].cluster)
                })
                .count();
        if end - start > 1 {
            let group = &hosts[start..end];
            let up = |h: &Listed| now_s.saturating_sub(h.reported) < UP_FACTOR * h.tmax;
            // Sorted by first_seen within a name: the first one up keeps
            // it; with none up, the last to report.
            let keeper = group.iter().position(up).unwrap_or_else(|| {
                group
                    .iter()
                    .enumerate()
                    .max_by_key(|(_, h)| h.reported)
                    .map_or(0, |(i, _)| i)
            });
            for (i, h) in group.iter().enumerate() {
                if i != keeper {
                    names[start + i] = Some(format!("{}@{}", h.name, h.spoof_ip));
                }
            }
        }
        start = end;
    }
    names
}
