//! What a gmond would hold, kept by the gateway itself for gmetad to poll
//! ([`super::xml_port`]).
//!
//! The table is fed the same packet batches as the send queues (the
//! receive tasks' records and the gateway's own metrics), so the XML port
//! shows exactly what a gmond fed by the gateway would show: the same
//! names, values (counters already continuous), TMAX and DMAX, with
//! changed-only sending's values as gmond would hold them. Per host: its
//! name, real address, last report and start (the heartbeat); per metric:
//! its metadata (interned: hosts share it) and its last value.
//!
//! **Receiving never waits on a poll.** Hosts live in shards, each behind
//! its own lock. A batch takes one shard's lock (a record is one host);
//! a poll takes each host's shard for as long as it takes to write that
//! one host into a buffer, and writes to the socket with no lock held.
//!
//! **Bounded.** A metric leaves after its DMAX without a value (gmond counts
//! from the last metadata; here the last value, which is what the
//! gateway's periodic metadata keeps alive there), a host when its last
//! metric has left. The hosts are capped, exactly: never more than
//! `max_sources` and the gateway's own host, whatever the
//! number of receive sockets (each engine caps its own sources) or of
//! hosts whose sources were forgotten: a new host at the cap first
//! evicts the least recently heard tenth (in bulk, as an engine forgets
//! its sources: one scan per tenth of the cap, not one per new host),
//! and a host whose source an engine forgot leaves with it.
//!
//! **Two addresses, one name.** gmetad keys hosts by NAME, so two HOSTs of
//! one NAME would merge into one set of RRDs, each overwriting the other.
//! Here the first of them to be heard keeps the name while it reports (TN
//! within 4 x TMAX, gmetad's "up"); the others are written as
//! `NAME@ADDRESS`, and counted. A server that moved to a new address takes
//! its name back once the old address has stopped reporting.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use foldhash::fast::RandomState;

use crate::engine::clock::Clock;
use crate::engine::clusters::{self, Cluster, ClusterRef};
use crate::engine::packets::{ForgottenHost, HostId, Item, PacketBatch, SlotKey, heartbeat_key};
use meta::Metas;
use metrics::{Entry, Metrics, NEVER};

pub use document::{ClusterInfo, Written};

/// Shards of the host table: a poll holds one for one host at a time.
const SHARDS: usize = 64;
/// The host TMAX gmond writes (its `host_tmax`); a host's is at least this.
const HOST_TMAX: u32 = 20;
/// gmetad counts a host as up while its TN is under 4 x its TMAX.
const UP_FACTOR: u32 = 4;
/// Output is handed to the socket in pieces of about this size.
const CHUNK: usize = 64 * 1024;

struct Host {
    /// Its cluster (None: `cluster_name`): the host's key in the table is
    /// its spoof string's mixed with its cluster's, so one server name in
    /// two clusters (two instances of one address naming two sites) is a
    /// host in each.
    cluster: ClusterRef,
    /// NAME as gmond shows it: the spoof string's after the first ':'.
    name: Box<str>,
    /// The spoof string's address part (IPv6 with '-'), for a renamed host.
    spoof_ip: Box<str>,
    /// The sender's real address.
    ip: IpAddr,
    first_seen: u32,
    reported: u32,
    /// Unix seconds the program started (the heartbeat's value).
    started: u32,
    metrics: Metrics,
}

impl Host {
    /// The TMAX written for the host: gmond's, or more for servers that
    /// report less often (so gmetad does not count them down between reports).
    fn tmax(&self) -> u32 {
        self.metrics
            .iter()
            .map(Entry::tmax)
            .max()
            .unwrap_or(0)
            .max(HOST_TMAX)
    }
}

type Shard = HashMap<u64, Host, RandomState>;

/// The hosts and metrics to write for gmetad.
pub struct HostTable {
    shards: Box<[Mutex<Shard>]>,
    /// Metadata, shared by the hosts that send it alike.
    metas: Metas,
    clock: Clock,
    /// Unix seconds at the clock's epoch: GMOND_STARTED of an unspoofed host (the
    /// gateway's own), whose packets carry no heartbeat.
    epoch_unix: u32,
    /// Hosts held, and those about to be taken in: a new host is counted
    /// before it is inserted, so that the cap holds with several receive
    /// tasks inserting at once.
    hosts: AtomicUsize,
    max_hosts: AtomicUsize,
    /// One eviction at a time; another task over the cap waits for it.
    evicting: Mutex<()>,
    /// Bumped whenever a host comes or goes: a poll's [`document::Plan`]
    /// is shared by the polls of one second only while it holds.
    generation: AtomicU64,
    /// The last document's plan.
    plan: Mutex<Option<Arc<document::Plan>>>,
    /// Clusters that had hosts, by key, and when they last had one (table
    /// seconds): one left empty is still written, empty, for a while
    /// ([`document`]'s `EMPTY_CLUSTER_KEPT`), since gmetad keeps a cluster that is
    /// missing from a poll as it last saw it, hosts and all (3.7.2).
    had_hosts: Mutex<HashMap<u64, (Arc<Cluster>, u32), RandomState>>,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl HostTable {
    /// A table for at most `max_hosts` hosts.
    pub fn new(max_hosts: usize) -> HostTable {
        HostTable {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            metas: Metas::default(),
            clock: Clock::new(Instant::now()),
            epoch_unix: unix_now().min(u64::from(u32::MAX)) as u32,
            hosts: AtomicUsize::new(0),
            max_hosts: AtomicUsize::new(max_hosts.max(1)),
            evicting: Mutex::new(()),
            generation: AtomicU64::new(0),
            plan: Mutex::default(),
            had_hosts: Mutex::default(),
        }
    }

    fn secs(&self, at: Instant) -> u32 {
        self.clock.secs(at)
    }

    fn shard(&self, host_key: u64) -> MutexGuard<'_, Shard> {
        let shard = &self.shards[(host_key % SHARDS as u64) as usize];
        // A panic elsewhere while holding it leaves consistent data.
        shard.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `shard` for a receive task: its wait, if any, is noted
    /// ([`super::lock_wait`]).
    fn shard_to_take(&self, host_key: u64) -> MutexGuard<'_, Shard> {
        super::lock_wait::SHARD.lock(&self.shards[(host_key % SHARDS as u64) as usize])
    }

    /// A new cap (`max_sources` changed at a reload): a lower one evicts
    /// down to it with the next batch taken in.
    pub fn set_max_hosts(&self, max_hosts: usize) {
        self.max_hosts.store(max_hosts.max(1), Relaxed);
    }

    /// Hosts held now.
    pub fn hosts(&self) -> usize {
        self.hosts.load(Relaxed)
    }

    /// Takes in a batch of packets sent on behalf of `ip` (the record's
    /// sender, or this host for the gateway's own metrics) at `now`, as
    /// the batch says them ([`Item`]): no packet is decoded.
    /// Returns how many hosts were evicted to stay within the cap.
    pub fn take(&self, batch: &PacketBatch, ip: IpAddr, now: Instant) -> usize {
        let now_s = self.secs(now);
        let ip = ip.to_canonical();
        let cluster = clusters::key_of(&batch.cluster);
        if let Some(old) = batch.moved_from {
            self.leave(batch, old);
        }
        // One host per batch: a new one is counted (making room for it
        // first) before it is inserted.
        let (Some(id), Some((first, _))) = (batch.host.as_deref(), batch.items().next()) else {
            return 0;
        };
        let mut evicted = 0;
        let mut reserved = false;
        let new_key = first.host ^ cluster;
        if !self.shard_to_take(new_key).contains_key(&new_key) {
            evicted = self.reserve();
            reserved = true;
        }
        // The batch is one host's (its items' keys are one host's): one
        // shard, one lookup, made only if an item is its (not for its
        // heartbeat's metadata alone).
        let heartbeat = heartbeat_key();
        let its = |key: SlotKey, item: &Item<'_>| match item {
            Item::HostMetadata => false,
            Item::Metadata(_) => key.metric != heartbeat,
            Item::Value(_) | Item::Started(_) => true,
        };
        let mut shard = self.shard_to_take(new_key);
        let host = if batch.items().any(|(key, item)| its(key, &item)) {
            self.host(&mut shard, (new_key, id, ip, now_s), batch, &mut reserved)
        } else {
            None
        };
        if let Some(host) = host {
            if host.metrics.is_empty() {
                host.metrics.reserve_for(metrics_in(batch));
            }
            for (key, item) in batch.items() {
                debug_assert_eq!(key.host ^ cluster, new_key, "one host per batch");
                match item {
                    Item::Started(started) => {
                        host.reported = now_s;
                        host.started = started;
                    }
                    Item::Value(value) => {
                        host.reported = now_s;
                        // A heartbeat is the host's start (Item::Started), never a metric.
                        if key.metric == heartbeat {
                            continue;
                        }
                        if let Ok(text) = std::str::from_utf8(value) {
                            let entry = host.metrics.entry(key.metric);
                            entry.value.clear();
                            entry.value.push_str(text);
                            entry.value_at = now_s;
                        }
                    }
                    // Metadata comes once per metric per `metadata_interval`,
                    // not with every report. Nothing is allocated when the host
                    // already holds it (a periodic resend) or another host
                    // shares it.
                    Item::Metadata(m) if key.metric != heartbeat => {
                        let entry = host.metrics.entry(key.metric);
                        if !entry
                            .meta
                            .as_deref()
                            .is_some_and(|held| meta::same(held, &m))
                        {
                            entry.meta = Some(self.metas.intern(&m));
                        }
                    }
                    Item::Metadata(_) | Item::HostMetadata => {}
                }
            }
        }
        drop(shard);
        if reserved {
            // Counted for a host that was not inserted after all (another
            // task inserted it meanwhile, or it has only metadata of its
            // heartbeat).
            self.hosts.fetch_sub(1, Relaxed);
        }
        evicted
    }

    /// Counts one more host, evicting first if the table is at its cap;
    /// returns how many hosts were evicted.
    fn reserve(&self) -> usize {
        let mut evicted = 0;
        loop {
            let (held, max) = (self.hosts.load(Relaxed), self.max_hosts.load(Relaxed));
            if held < max {
                if self
                    .hosts
                    .compare_exchange(held, held + 1, Relaxed, Relaxed)
                    .is_ok()
                {
                    return evicted;
                }
                continue;
            }
            match self.evict() {
                // The hosts over the cap are others' not inserted yet.
                0 => std::thread::yield_now(),
                n => evicted += n,
            }
        }
    }

    /// Hosts whose sources an engine forgot (`max_sources`), by their
    /// keys in the table: they leave it with them (another source of one
    /// of them, an xrootd beside a forgotten cmsd, brings it back with its
    /// next report).
    pub fn forget(&self, hosts: &[ForgottenHost]) {
        for host in hosts {
            let key = host.table_key();
            if self.shard(key).remove(&key).is_some() {
                self.hosts.fetch_sub(1, Relaxed);
                self.generation.fetch_add(1, Relaxed);
            }
        }
    }

    /// A source moved to another cluster: its metrics (those of the batch,
    /// which holds every one of them: a move sends them all) leave its host
    /// in cluster `old`, and the host goes when none are left (another
    /// instance of its address may still be there). In one place at a time.
    /// Rare (a reload or a new site moves a source): out of `take`'s line.
    #[cold]
    #[inline(never)]
    fn leave(&self, batch: &PacketBatch, old: u64) {
        let Some((first, _)) = batch.items().next() else {
            return;
        };
        let host_key = first.host ^ old;
        let mut shard = self.shard(host_key);
        let Some(host) = shard.get_mut(&host_key) else {
            return;
        };
        host.metrics
            .remove_all(batch.items().map(|(key, _)| key.metric));
        if host.metrics.is_empty() {
            shard.remove(&host_key);
            self.hosts.fetch_sub(1, Relaxed);
            self.generation.fetch_add(1, Relaxed);
        }
    }

    /// The host of `key`, made from the batch's host (in the batch's
    /// cluster) if new: counted by the batch's reservation, else now if
    /// under the cap (the host was evicted by another task since the batch
    /// looked; None over the cap: it comes back with its next report).
    fn host<'s>(
        &self,
        shard: &'s mut Shard,
        (key, id, ip, now_s): (u64, &HostId, IpAddr, u32),
        batch: &PacketBatch,
        reserved: &mut bool,
    ) -> Option<&'s mut Host> {
        if !shard.contains_key(&key) && !std::mem::take(reserved) {
            let max = self.max_hosts.load(Relaxed);
            self.hosts
                .fetch_update(Relaxed, Relaxed, |h| (h < max).then_some(h + 1))
                .ok()?;
        }
        let host = shard.entry(key).or_insert_with(|| {
            self.generation.fetch_add(1, Relaxed);
            Host {
                cluster: batch.cluster.clone(),
                name: id.name.clone(),
                spoof_ip: id.ip.clone(),
                ip,
                first_seen: now_s,
                reported: now_s,
                started: if id.spoofed { 0 } else { self.epoch_unix },
                metrics: Metrics::default(),
            }
        });
        host.ip = ip;
        Some(host)
    }

    /// Evicts the hosts heard from longest ago, down to the cap less a
    /// tenth (room for the next new hosts: one scan per tenth of the cap,
    /// as an engine forgets its sources); returns how many. Another task
    /// evicting meanwhile is waited for, and its room counts.
    fn evict(&self) -> usize {
        let _one = self.evicting.lock().unwrap_or_else(|e| e.into_inner());
        let max = self.max_hosts.load(Relaxed);
        if self.hosts.load(Relaxed) < max {
            return 0;
        }
        let mut ages: Vec<u32> = Vec::with_capacity(self.hosts.load(Relaxed));
        for shard in self.shards.iter() {
            let shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            ages.extend(shard.values().map(|h| h.reported));
        }
        let mut evicted = 0;
        // Hosts counted but not inserted yet (another task's) count too.
        let held = self.hosts.load(Relaxed).max(ages.len());
        let room = (max / 10).max(1);
        let excess = (held + room).saturating_sub(max).min(ages.len());
        if excess > 0 {
            let (_, cutoff, _) = ages.select_nth_unstable(excess - 1);
            let cutoff = *cutoff;
            for shard in self.shards.iter() {
                let mut shard = shard.lock().unwrap_or_else(|e| e.into_inner());
                let before = shard.len();
                shard.retain(|_, h| {
                    evicted >= excess || h.reported > cutoff || {
                        evicted += 1;
                        false
                    }
                });
                self.hosts.fetch_sub(before - shard.len(), Relaxed);
            }
            self.generation.fetch_add(1, Relaxed);
        }
        evicted
    }
}

/// How many metrics a batch is about: its metadata or its values, whichever
/// are more (a first report sends both for each; the heartbeat is none).
fn metrics_in(batch: &PacketBatch) -> usize {
    let heartbeat = heartbeat_key();
    let (mut metadata, mut values) = (0, 0);
    for (key, item) in batch.items() {
        match item {
            _ if key.metric == heartbeat => {}
            Item::Metadata(_) => metadata += 1,
            Item::Value(_) => values += 1,
            Item::Started(_) | Item::HostMetadata => {}
        }
    }
    metadata.max(values)
}

mod document;
mod meta;
mod metrics;
#[cfg(test)]
mod tests;
