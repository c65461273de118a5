//! The gateway's own health, as Ganglia metrics of the gateway's own host.
//!
//! **Its host** is `xrd2ganglia@<this host's name>`, spoofed as
//! `xrd2ganglia@NAME:xrd2ganglia@NAME` (gmetric's form for a host named
//! without an address, `override_hostname` alone). gmond keys a host by the
//! address part of its spoof string, and a server's is always an address
//! (`mapping/host.rs`), never text with an `@`: so the gateway's metrics
//! never merge into the host of an xrootd on the same machine, as they
//! did when sent unspoofed (gmond filed both under the machine's address,
//! issue 36). On the XML port the same name is written with the gateway's
//! own address as IP (docs/gmetad.md); gmetad keys hosts by name.
//!
//! **Counters go out as rates**: each counter of the table
//! ([`crate::events::COUNTERS`]) is sent as its growth per second over the
//! last `self_metrics_interval` (slope both, a GAUGE in gmetad), not as the
//! running total (slope positive, a COUNTER). A running total is this
//! process's alone: it starts from zero at every start, and the two
//! gateways of a pair count apart. gmetad writes any decrease of a COUNTER
//! as a wrap, so a restart, or a failover from one gateway of a pair to the
//! other, wrote 2.2e8-6.9e8/s into the `xrd2ganglia.*` summaries
//! (issue 35). A rate has nothing to wrap; gmetad graphs it as it is, and
//! the summary adds the rates of the gateways present. Gauges go out as
//! they are. Kernel receive drops of the listening sockets are read from
//! /proc/self/net/udp and udp6 ([`crate::proc_udp`]: the drops of our
//! sockets' inodes), a counter like the others.

use std::net::IpAddr;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::engine::packets::{HostId, MetaFields, MetadataOf, PacketBatch, SlotKey};
use crate::events::{CounterKind, Counters, Events, KERNEL_DROPS, Snapshot};
use crate::ganglia::xdr::Slope;
use crate::proc_udp;

use super::InForce;

/// The gateway's own metrics, from the start: [`SelfMetrics::start`] sends
/// the first report at once (before the XML port listens), then
/// [`SelfMetrics::run`] logs the counters every `stats_interval` and sends
/// them every `self_metrics_interval` (zero: never), until `stop`.
pub(super) struct SelfMetrics {
    counters: Arc<Counters>,
    drops: KernelDrops,
    in_force: watch::Receiver<Arc<InForce>>,
    reporter: SelfReporter,
    self_ip: IpAddr,
    batch: PacketBatch,
    metadata_at: Option<Instant>,
    tmax: u32,
}

impl SelfMetrics {
    /// Sends the first report, at once: the gateway's own host is in its
    /// first document and reaches gmond at the start (issue 43, item 6:
    /// a fresh gateway had none for `self_metrics_interval`, so after a
    /// failover to it the cluster's `xrd2ganglia.*` summaries read 0).
    /// Its counters' rates are 0 (nothing counted yet).
    pub(super) fn start(
        counters: Arc<Counters>,
        drops: KernelDrops,
        in_force: watch::Receiver<Arc<InForce>>,
    ) -> SelfMetrics {
        let send_every = in_force.borrow().settings.self_metrics_interval;
        let mut me = SelfMetrics {
            counters,
            drops,
            in_force,
            reporter: SelfReporter::new(&crate::ganglia::local_hostname(), Instant::now()),
            self_ip: local_ip(),
            batch: PacketBatch::default(),
            metadata_at: None,
            tmax: ((send_every.as_secs_f64() * 1.5).ceil() as u32).max(1),
        };
        if !send_every.is_zero() {
            me.send();
        }
        me
    }

    /// One report: the counters now, metadata with it when due.
    fn send(&mut self) {
        let now_in_force = self.in_force.borrow().clone();
        let (now, s) = (Instant::now(), &now_in_force.settings);
        super::set_queue(&self.counters, &now_in_force.outbox);
        let with_metadata = self
            .metadata_at
            .is_none_or(|t| t.elapsed() >= s.metadata_interval);
        if with_metadata {
            self.metadata_at = Some(now);
        }
        let snapshot = self.counters.snapshot();
        let report = Report {
            snap: &snapshot,
            drops: self.drops.read(),
            at: now,
        };
        let batch = &mut self.batch;
        self.reporter
            .encode(batch, &report, with_metadata, self.tmax, s.dmax);
        let events = Events::new(&self.counters, s.log_interval);
        now_in_force.deliver(batch, self.self_ip, now, &events);
    }

    /// The own host's heartbeat, unless this one stands by.
    fn alive(&mut self, started: u32) {
        let now_in_force = self.in_force.borrow().clone();
        if !now_in_force
            .paused
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            self.reporter.alive(&mut self.batch, started);
            let events = Events::new(&self.counters, now_in_force.settings.log_interval);
            now_in_force
                .outbox
                .queue(&self.batch, Instant::now(), &events);
        }
    }

    pub(super) async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let (log_every, send_every) = {
            let s = &self.in_force.borrow().settings;
            (s.stats_interval, s.self_metrics_interval)
        };
        let mut log_tick = tokio::time::interval(or_never(log_every));
        let mut send_tick = tokio::time::interval(or_never(send_every));
        log_tick.tick().await;
        // The first report was sent at the start.
        send_tick.tick().await;
        // Paired and sending to gmond: the own host's heartbeat every
        // second, what the standby reads in gmond (peer/evidence.rs).
        let alive = {
            let s = &self.in_force.borrow().settings;
            s.send && s.peer.is_some()
        };
        let mut alive_tick = tokio::time::interval(if alive {
            super::peer::ALIVE_EVERY
        } else {
            or_never(Duration::ZERO)
        });
        alive_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let started = crate::daemon::peer::unix_now() as u32;
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                _ = alive_tick.tick(), if alive => self.alive(started),
                _ = log_tick.tick() => {
                    super::set_queue(&self.counters, &self.in_force.borrow().outbox);
                    let kernel = self.drops.read().map(|d| d.to_string()).unwrap_or_else(|| "unknown".into());
                    tracing::info!("counters: {} kernel_drops={kernel}", self.counters.snapshot());
                }
                _ = send_tick.tick() => self.send(),
            }
        }
    }
}

/// `every`, or (zero) never.
fn or_never(every: Duration) -> Duration {
    if every.is_zero() {
        Duration::from_secs(86_400 * 365)
    } else {
        every
    }
}

/// This host's address for the XML port's gateway host: its first
/// non-loopback IPv4 address (gmond would show the address its packets
/// come from), else loopback.
fn local_ip() -> IpAddr {
    if_addrs::get_if_addrs()
        .ok()
        .and_then(|list| {
            list.into_iter()
                .map(|i| i.ip())
                .find(|ip| ip.is_ipv4() && !ip.is_loopback())
        })
        .unwrap_or(IpAddr::from([127, 0, 0, 1]))
}

/// How the gateway's own host's name starts: no server's can (a server's
/// NAME keeps `[A-Za-z0-9._-]`, `ganglia/sanitize.rs`).
pub const OWN_HOST_PREFIX: &str = "xrd2ganglia@";

/// The name of the gateway's own host on this machine.
pub fn own_host_name(hostname: &str) -> String {
    let mut name = String::from(OWN_HOST_PREFIX);
    crate::ganglia::sanitize::push_host(&mut name, hostname);
    name
}

/// The counters at one moment, as the reporter reads them.
pub struct Report<'a> {
    pub snap: &'a Snapshot,
    /// The kernel's drops, where /proc tells them.
    pub drops: Option<u64>,
    pub at: Instant,
}

/// Encodes the self-metrics packets.
pub struct SelfReporter {
    /// `xrd2ganglia@NAME:xrd2ganglia@NAME`: the metric_id host, spoofed.
    spoof: String,
    /// Its parts: who its batches are about.
    id: Arc<HostId>,
    host_key: u64,
    /// The counters at the last report (zero at the start: the counters'
    /// start), to make rates of.
    last: Snapshot,
    last_drops: Option<u64>,
    last_at: Instant,
}

impl SelfReporter {
    /// For the gateway on the machine named `hostname`, started at `started`
    /// (when every counter was zero).
    pub fn new(hostname: &str, started: Instant) -> SelfReporter {
        let name = own_host_name(hostname);
        let spoof = format!("{name}:{name}");
        SelfReporter {
            id: HostId::spoofed(&name, &name),
            host_key: crate::mapping::name_key(&spoof),
            spoof,
            last: Snapshot::default(),
            // The listening sockets are made at the start: none dropped before.
            last_drops: Some(0),
            last_at: started,
        }
    }

    /// The own host's heartbeat (its metadata and value, as `gmetric -S
    /// HOST -H` sends them), in `batch`: any packet of a host resets its
    /// TN in gmond.
    pub fn alive(&self, batch: &mut PacketBatch, started: u32) {
        batch.clear();
        batch.host = Some(self.id.clone());
        batch.heartbeat_metadata(&self.spoof, self.host_key);
        batch.heartbeat_value(&self.spoof, self.host_key, started);
    }

    /// The packets for one report, in `batch`: metadata first when
    /// `with_metadata`. Counters as their rate since the last report.
    pub fn encode(
        &mut self,
        batch: &mut PacketBatch,
        report: &Report<'_>,
        with_metadata: bool,
        tmax: u32,
        dmax: u32,
    ) {
        batch.clear();
        batch.host = Some(self.id.clone());
        let secs = report
            .at
            .saturating_duration_since(self.last_at)
            .as_secs_f64();
        let mut text = String::new();
        let last = self.last.each().map(|(_, v)| Some(v));
        let counters = report.snap.each().map(|(spec, v)| (spec, Some(v)));
        let drops = [(&KERNEL_DROPS, report.drops)];
        for ((m, v), before) in counters.chain(drops).zip(last.chain([self.last_drops])) {
            let Some(v) = v else {
                continue;
            };
            text.clear();
            let value_type = match m.kind {
                CounterKind::Counter => {
                    // A counter /proc did not tell last time has no rate yet.
                    let Some(before) = before else {
                        continue;
                    };
                    push_rate(&mut text, v.saturating_sub(before), secs);
                    "double"
                }
                CounterKind::Gauge => {
                    text.push_str(&v.to_string());
                    "uint32"
                }
            };
            let key = SlotKey {
                host: self.host_key,
                metric: crate::mapping::name_key(m.metric),
            };
            if with_metadata {
                batch.metadata_of(MetadataOf {
                    key,
                    host: &self.spoof,
                    spoof: true,
                    fields: MetaFields {
                        name: m.metric,
                        value_type,
                        units: m.units,
                        slope: Slope::Both,
                        tmax,
                        dmax,
                        group: "xrd2ganglia",
                        desc: m.desc,
                        title: m.title,
                    },
                });
            }
            batch.value_of(key, &self.spoof, true, m.metric, text.as_bytes());
        }
        self.last = *report.snap;
        self.last_drops = report.drops;
        self.last_at = report.at;
    }
}

/// `count / secs` in decimal, at most three decimals, no trailing zeros
/// (zero when no time passed).
fn push_rate(out: &mut String, count: u64, secs: f64) {
    let rate = if secs > 0.0 { count as f64 / secs } else { 0.0 };
    let start = out.len();
    out.push_str(&format!("{rate:.3}"));
    while out.len() > start + 1 && out.ends_with('0') {
        out.pop();
    }
    if out.ends_with('.') {
        out.pop();
    }
}

/// The kernel's receive drops of some UDP sockets.
pub struct KernelDrops {
    inodes: Vec<u64>,
}

impl KernelDrops {
    /// For the sockets with these file descriptors.
    pub fn new(fds: &[RawFd]) -> KernelDrops {
        let inodes = fds
            .iter()
            .filter_map(|fd| {
                let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
                let text = link.to_str()?;
                text.strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .parse()
                    .ok()
            })
            .collect();
        KernelDrops { inodes }
    }

    /// The sum of their drops, or None where /proc does not tell.
    pub fn read(&self) -> Option<u64> {
        if self.inodes.is_empty() {
            return None;
        }
        let mut total = None;
        for table in proc_udp::TABLES {
            let Ok(text) = std::fs::read_to_string(table) else {
                continue;
            };
            if let Some(d) = drops_in(&text, &self.inodes) {
                total = Some(total.unwrap_or(0) + d);
            }
        }
        total
    }
}

/// Sums the drops of the rows whose inode is one of `inodes`.
fn drops_in(table: &str, inodes: &[u64]) -> Option<u64> {
    proc_udp::rows(table)
        .filter(|r| inodes.contains(&r.inode))
        .map(|r| r.drops)
        .reduce(|a, b| a + b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ganglia::xdr::{Packet, decode};

    #[test]
    fn reads_drops_of_our_inodes() {
        let table = &crate::proc_udp::v4_table(&[
            "   1: 00000000:0D05 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 17",
            "   2: 00000000:0D06 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4343 2 0000000000000000 5",
        ]);
        assert_eq!(drops_in(table, &[4242]), Some(17));
        assert_eq!(drops_in(table, &[4242, 4343]), Some(22));
        assert_eq!(drops_in(table, &[1]), None);
        // A real socket of ours: /proc tells its drops (0), where /proc has them.
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let kd = KernelDrops::new(&[std::os::fd::AsRawFd::as_raw_fd(&s)]);
        assert_eq!(kd.inodes.len(), 1);
        // /proc/self/net: there under the unit's ProcSubset=pid too.
        assert_eq!(kd.read(), Some(0));
    }

    #[test]
    fn self_metrics_are_rates_and_gauges_of_a_host_no_server_can_be() {
        let started = Instant::now();
        let mut r = SelfReporter::new("gw1", started);
        let snap = Snapshot {
            datagrams: 10,
            records: 9,
            sources: 3,
            ..Snapshot::default()
        };
        let mut batch = PacketBatch::default();
        let at = started + Duration::from_secs(4);
        let report = Report {
            snap: &snap,
            drops: Some(2),
            at,
        };
        r.encode(&mut batch, &report, true, 90, 0);
        let decoded: Vec<Packet> = batch.iter().map(|p| decode(p).unwrap()).collect();
        // Every counter of the table, and the kernel's drops.
        assert_eq!(decoded.len(), 2 * (crate::events::COUNTERS.len() + 1));
        let value = |decoded: &[Packet], name: &str| {
            decoded.iter().find_map(|p| match p {
                Packet::Value { id, value, .. } if id.name == name => {
                    // gmond splits at the first ':': address
                    // `xrd2ganglia@gw1` (no server's is text), NAME the same.
                    assert!(id.spoof);
                    assert_eq!(id.host, "xrd2ganglia@gw1:xrd2ganglia@gw1");
                    Some(value.to_string())
                }
                _ => None,
            })
        };
        // Counted since the start, 4 s ago: 9 records are 2.25/s.
        assert_eq!(
            value(&decoded, "xrd2ganglia.records").as_deref(),
            Some("2.25")
        );
        assert_eq!(
            value(&decoded, "xrd2ganglia.datagrams").as_deref(),
            Some("2.5")
        );
        assert_eq!(
            value(&decoded, "xrd2ganglia.kernel_drops").as_deref(),
            Some("0.5")
        );
        assert_eq!(value(&decoded, "xrd2ganglia.denied").as_deref(), Some("0"));
        // A gauge as it is.
        assert_eq!(value(&decoded, "xrd2ganglia.sources").as_deref(), Some("3"));
        // Nothing goes out with slope positive: gmetad makes no COUNTER of it.
        let metas: Vec<_> = decoded
            .iter()
            .filter_map(|p| match p {
                Packet::Metadata { id, meta } => Some((&*id.name, meta)),
                _ => None,
            })
            .collect();
        assert!(metas.iter().all(|(_, m)| m.slope == Slope::Both));
        assert!(
            metas
                .iter()
                .any(|(n, m)| *n == "xrd2ganglia.sources" && m.value_type == "uint32")
        );
        assert!(
            metas
                .iter()
                .any(|(n, m)| *n == "xrd2ganglia.records" && m.value_type == "double")
        );
        // The next report: the growth since this one, per second (3 s).
        let later = Snapshot {
            datagrams: 13,
            records: 9,
            sources: 2,
            ..Snapshot::default()
        };
        let report = Report {
            snap: &later,
            drops: None,
            at: at + Duration::from_secs(3),
        };
        r.encode(&mut batch, &report, false, 90, 0);
        let decoded: Vec<Packet> = batch.iter().map(|p| decode(p).unwrap()).collect();
        assert_eq!(
            value(&decoded, "xrd2ganglia.datagrams").as_deref(),
            Some("1")
        );
        assert_eq!(value(&decoded, "xrd2ganglia.records").as_deref(), Some("0"));
        // Without kernel drops (no /proc), that metric is left out; values only.
        assert_eq!(batch.len(), crate::events::COUNTERS.len());
        // Each packet is keyed by its own metric: none conflates another.
        let keys: std::collections::HashSet<_> = batch.entries().map(|(k, _, _)| k).collect();
        assert_eq!(keys.len(), batch.len());
        // /proc tells again: no rate from an unknown start.
        let report = Report {
            snap: &later,
            drops: Some(5),
            at: at + Duration::from_secs(4),
        };
        r.encode(&mut batch, &report, false, 90, 0);
        assert_eq!(batch.len(), crate::events::COUNTERS.len());
    }

    #[test]
    fn the_own_host_name_is_sanitised() {
        assert_eq!(own_host_name("vm"), "xrd2ganglia@vm");
        assert_eq!(own_host_name("a:b<c"), "xrd2ganglia@a_b_c");
    }
}

#[cfg(test)]
mod table_tests {
    use crate::events::{COUNTERS, Counters};
    use std::sync::atomic::Ordering::Relaxed;

    /// The table makes the log line, the snapshot and the metrics alike:
    /// each counter shows under its own name with its own value.
    #[test]
    fn each_counter_is_logged_and_sent_under_its_own_name() {
        let c = Counters::default();
        c.datagrams.store(7, Relaxed);
        c.send_queue_age.store(250, Relaxed);
        c.xml_hosts_evicted.store(3, Relaxed);
        let line = c.snapshot().to_string();
        assert!(line.starts_with("datagrams=7 records=0 "), "{line}");
        assert!(line.contains(" send_queue_age=250 "), "{line}");
        assert!(line.ends_with(" xml_hosts_evicted=3"), "{line}");
        assert_eq!(line.split(' ').count(), COUNTERS.len());
        let names: std::collections::HashSet<_> = COUNTERS.iter().map(|c| c.metric).collect();
        assert_eq!(names.len(), COUNTERS.len());
        assert!(names.contains("xrd2ganglia.send_queue_age"));
        assert!(
            COUNTERS
                .iter()
                .all(|c| !c.units.is_empty() && !c.title.is_empty() && c.desc.ends_with('.'))
        );
    }

    #[test]
    fn the_operations_page_has_a_row_for_every_self_metric() {
        let page = include_str!("../../docs/operations.md");
        let at = page.find("## Self-metrics").unwrap();
        let section = &page[at..at + page[at..].find("\n## Logs").unwrap()];
        let rows: Vec<&str> = section.lines().filter(|l| l.starts_with("| `")).collect();
        let all: Vec<&crate::events::CounterSpec> = COUNTERS
            .iter()
            .chain([&crate::events::KERNEL_DROPS])
            .collect();
        for c in &all {
            let name = c.metric.trim_start_matches("xrd2ganglia.");
            let kind = match c.kind {
                // Sent as its rate per second over the interval.
                crate::events::CounterKind::Counter => "rate",
                crate::events::CounterKind::Gauge => "gauge",
            };
            let row = format!("| `{name}` | {kind} | {} |", c.units);
            assert!(
                rows.iter().any(|r| r.starts_with(&row)),
                "docs/operations.md's Self-metrics has no row {row}"
            );
        }
        assert_eq!(
            rows.len(),
            all.len(),
            "a row for a metric that does not exist"
        );
    }
}
