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
    /// The rule port the document is for: only its clusters are written
    /// (None: the gateway's port, every cluster, `cluster_name`'s first).
    pub port: Option<u32>,
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
        .iter()
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
                tmax: m.tmax,
                dmax: m.dmax,
                slope: m.slope,
                extra: &extra,
            },
        );
    }
    xml::host_end(out);
    order.len()
}

/// Whether the document of `port` (None: the gateway's) holds `cluster`
/// (None: `cluster_name`'s, on the gateway's port only).
fn served(cluster: &ClusterRef, port: Option<u32>) -> bool {
    match cluster {
        None => port.is_none(),
        Some(c) => c.served_on(port),
    }
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

/// What one document writes, worked out once and shared by the polls of
/// one second (while no host came or went): each host's key in order,
/// where each CLUSTER's hosts end, the renamed hosts' names and the
/// clusters written empty. 8 bytes per host and a few per cluster: the
/// hosts' text is read from the table as each host is written.
pub(crate) struct Plan {
    /// Table seconds it was made at, and the table's generation then.
    now_s: u32,
    generation: u64,
    hosts: Vec<u64>,
    /// Per CLUSTER written with hosts (or `cluster_name`'s, always first):
    /// its cluster and the end of its hosts in `hosts`.
    clusters: Vec<(ClusterRef, usize)>,
    /// (index in `hosts`, the name written instead of its own), by index.
    renames: Vec<(usize, String)>,
    /// Clusters left empty since earlier polls: written empty, so gmetad
    /// drops their hosts.
    empty: Vec<Arc<Cluster>>,
}

/// Where a document's writing is: [`Render::fill`] appends the next
/// hosts to a buffer, a piece at a time, so that a poll holds no more
/// than a piece and one host however big the document (a poll's socket
/// is written with no lock held, and as it takes the text).
pub struct Render<'t> {
    table: &'t HostTable,
    plan: Arc<Plan>,
    unix: u64,
    /// The next CLUSTER (index in `plan.clusters`, then in `plan.empty`).
    cluster: usize,
    /// The next host, and whether the current CLUSTER's start tag is out.
    host: usize,
    open: bool,
    rename: usize,
    started: bool,
    done: bool,
    ip: String,
    written: Written,
}

impl<'t> Render<'t> {
    /// Appends the next part of the document to `out` until it holds at
    /// least `piece` bytes (a host is never cut) or the document is done;
    /// returns whether it is done.
    pub fn fill(&mut self, cluster: &ClusterInfo<'_>, out: &mut Vec<u8>, piece: usize) -> bool {
        let start = out.len();
        if !self.started {
            self.started = true;
            xml::prologue(out);
        }
        let plan = self.plan.clone();
        while !self.done && out.len() < start + piece {
            if let Some((this, end)) = plan.clusters.get(self.cluster) {
                if !self.open && !served(this, cluster.port) {
                    // Another port's: its hosts (and their new names) passed over.
                    self.host = *end;
                    while plan.renames.get(self.rename).is_some_and(|(i, _)| i < end) {
                        self.rename += 1;
                        self.written.renamed -= 1;
                    }
                    self.cluster += 1;
                    continue;
                }
                if !self.open {
                    let name = this.as_ref().map_or(cluster.name, |c| &*c.name);
                    cluster_start(out, name, cluster.grouping, self.unix);
                    self.open = true;
                }
                if self.host < *end {
                    self.write_host(&plan, cluster, out);
                    continue;
                }
                xml::cluster_end(out);
                self.written.clusters += 1;
                self.open = false;
                self.cluster += 1;
                continue;
            }
            for c in plan.empty.iter().filter(|c| c.served_on(cluster.port)) {
                cluster_start(out, &c.name, cluster.grouping, self.unix);
                xml::cluster_end(out);
                self.written.clusters += 1;
            }
            xml::end(out);
            self.done = true;
        }
        self.written.bytes += out.len() - start;
        self.done
    }

    /// Writes the next host (under its shard's lock, for that host only).
    fn write_host(&mut self, plan: &Plan, cluster: &ClusterInfo<'_>, out: &mut Vec<u8>) {
        let at = self.host;
        self.host += 1;
        let key = plan.hosts[at];
        let rename = match plan.renames.get(self.rename) {
            Some((i, name)) if *i == at => {
                self.rename += 1;
                Some(name.as_str())
            }
            _ => None,
        };
        let shard = self.table.shard(key);
        // Gone since the plan was made (evicted, past its DMAX, moved).
        let Some(host) = shard.get(&key) else {
            return;
        };
        let name = rename.unwrap_or(&host.name);
        self.written.metrics += write_host(
            out,
            host,
            name,
            cluster,
            plan.now_s,
            self.unix,
            &mut self.ip,
        );
        self.written.hosts += 1;
    }

    /// What was written so far (all of it once [`Render::fill`] said done).
    pub fn written(&self) -> Written {
        self.written
    }
}

impl HostTable {
    /// Writes the whole document to `sink`, a piece at a time, first
    /// dropping what is past its DMAX.
    pub fn write(
        &self,
        cluster: &ClusterInfo<'_>,
        now: Instant,
        sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<Written> {
        let mut render = self.render(now);
        let mut out = Vec::with_capacity(CHUNK + 16 * 1024);
        loop {
            out.clear();
            let done = render.fill(cluster, &mut out, CHUNK);
            sink(&out)?;
            if done {
                return Ok(render.written());
            }
        }
    }

    /// A document to write at `now`: the plan of this second, made now
    /// (dropping what is past its DMAX) unless one was made this second
    /// and no host came or went since.
    pub fn render(&self, now: Instant) -> Render<'_> {
        let now_s = self.secs(now);
        let plan = {
            let mut cached = self.plan.lock().unwrap_or_else(|e| e.into_inner());
            let generation = self.generation.load(Relaxed);
            match cached.as_ref() {
                Some(p) if p.now_s == now_s && p.generation == generation => p.clone(),
                _ => {
                    let p = Arc::new(self.plan(now_s));
                    *cached = Some(p.clone());
                    p
                }
            }
        };
        Render {
            table: self,
            written: Written {
                renamed: plan.renames.len(),
                ..Written::default()
            },
            plan,
            unix: unix_now(),
            cluster: 0,
            host: 0,
            open: false,
            rename: 0,
            started: false,
            done: false,
            ip: String::new(),
        }
    }

    /// Works out a document: drops what is past its DMAX, lists the hosts
    /// by cluster (`cluster_name`'s first, always written, even empty, as
    /// a gmond's; then the others by name) and name, and notes which
    /// clusters to write empty.
    fn plan(&self, now_s: u32) -> Plan {
        // Read before listing: a host that comes meanwhile makes the next
        // poll's plan anew.
        let generation = self.generation.load(Relaxed);
        let listed = self.expire_and_list(now_s);
        let names = resolve_names(&listed, now_s);
        let mut plan = Plan {
            now_s,
            generation,
            hosts: Vec::with_capacity(listed.len()),
            clusters: vec![(None, 0)],
            renames: Vec::new(),
            empty: Vec::new(),
        };
        let mut seen: HashMap<u64, (Arc<Cluster>, u32), RandomState> = HashMap::default();
        for (i, (h, name)) in listed.into_iter().zip(names).enumerate() {
            let last = plan.clusters.len() - 1;
            if clusters::key_of(&h.cluster) != clusters::key_of(&plan.clusters[last].0) {
                if let Some(c) = &h.cluster {
                    seen.insert(c.key, (c.clone(), now_s));
                }
                plan.clusters.push((h.cluster, i));
            }
            plan.hosts.push(h.key);
            let last = plan.clusters.len() - 1;
            plan.clusters[last].1 = i + 1;
            if let Some(name) = name {
                plan.renames.push((i, name));
            }
        }
        let mut had = self.had_hosts.lock().unwrap_or_else(|e| e.into_inner());
        had.retain(|_, (_, at)| now_s.saturating_sub(*at) <= EMPTY_CLUSTER_KEPT);
        plan.empty = had
            .iter()
            .filter(|(key, _)| !seen.contains_key(*key))
            .map(|(_, (c, _))| c.clone())
            .collect();
        plan.empty.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        had.extend(seen);
        plan
    }

    /// Drops metrics past their DMAX and hosts left without metrics; lists
    /// the rest, sorted by name.
    ///
    /// One host at a time under its shard's lock, as a poll writes them: a
    /// shard's keys are copied under its lock, then each host is expired
    /// and listed under the lock again, and a host that leaves is dropped
    /// after it is released. A receive task waits at most for one host's
    /// metrics, never for a whole shard's (issue 46).
    fn expire_and_list(&self, now_s: u32) -> Vec<Listed> {
        let mut list = Vec::with_capacity(self.hosts.load(Relaxed));
        let mut keys: Vec<u64> = Vec::new();
        for shard in self.shards.iter() {
            let lock = || shard.lock().unwrap_or_else(|e| e.into_inner());
            keys.clear();
            keys.extend(lock().keys());
            for key in &keys {
                let gone = {
                    let mut shard = lock();
                    // Gone meanwhile (forgotten, evicted): nothing to do.
                    let Some(host) = shard.get_mut(key) else {
                        continue;
                    };
                    host.metrics.retain(|e| {
                        let at = if e.value_at == NEVER {
                            host.first_seen
                        } else {
                            e.value_at
                        };
                        e.dmax() == 0 || now_s.saturating_sub(at) <= e.dmax()
                    });
                    if host.metrics.is_empty() {
                        shard.remove(key)
                    } else {
                        list.push(Listed {
                            cluster: host.cluster.clone(),
                            key: *key,
                            name: host.name.clone(),
                            spoof_ip: host.spoof_ip.clone(),
                            first_seen: host.first_seen,
                            reported: host.reported,
                            tmax: host.tmax(),
                        });
                        None
                    }
                };
                if gone.is_some() {
                    self.hosts.fetch_sub(1, Relaxed);
                    self.generation.fetch_add(1, Relaxed);
                }
                // (Dropped here, the shard released.)
                drop(gone);
            }
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
