//! The gateway's own health, as Ganglia metrics of the gateway's own host.
//!
//! Sent unspoofed (as gmetric does: host = this host's name, spoof 0), so
//! gmond files them under the address the packets come from, the gateway's.
//! Which metrics, with their units and titles, is the counters' table
//! ([`crate::events::COUNTERS`]): counters are cumulative (slope positive,
//! graphed as rates), gauges slope both. Kernel receive drops of the listening sockets are read from
//! /proc/self/net/udp and udp6 ([`crate::proc_udp`]: the drops of our sockets'
//! inodes).

use std::os::fd::RawFd;

use crate::events::{CounterKind, KERNEL_DROPS, Snapshot};
use crate::proc_udp;
use std::borrow::Cow::Borrowed;

use crate::ganglia::xdr::{self, Metadata, MetricId, Packet, Slope};
use crate::gateway::packets::{PacketBatch, PacketKind, SlotKey};

/// Encodes the self-metrics packets.
pub struct SelfReporter {
    host: String,
    host_key: u64,
}

impl SelfReporter {
    pub fn new(host: String) -> SelfReporter {
        SelfReporter {
            host_key: crate::mapping::name_key(&host),
            host,
        }
    }

    /// The packets for one report, in `batch`: metadata first when
    /// `with_metadata`.
    pub fn encode(
        &mut self,
        batch: &mut PacketBatch,
        snap: &Snapshot,
        drops: Option<u64>,
        with_metadata: bool,
        tmax: u32,
        dmax: u32,
    ) {
        batch.clear();
        let mut text = String::new();
        let counters = snap.each().map(|(spec, v)| (spec, Some(v)));
        for (m, v) in counters.chain([(&KERNEL_DROPS, drops)]) {
            let Some(v) = v else {
                continue;
            };
            let id = MetricId::new(&self.host, m.metric, false);
            let key = SlotKey {
                host: self.host_key,
                metric: crate::mapping::name_key(m.metric),
            };
            if with_metadata {
                let extra = [
                    (Borrowed("GROUP"), Borrowed("xrd2ganglia")),
                    (Borrowed("DESC"), Borrowed(m.desc)),
                    (Borrowed("TITLE"), Borrowed(m.title)),
                ];
                let (value_type, slope) = match m.kind {
                    CounterKind::Counter => ("double", Slope::Positive),
                    CounterKind::Gauge => ("uint32", Slope::Both),
                };
                let packet = Packet::Metadata {
                    id: id.clone(),
                    meta: Metadata {
                        value_type: Borrowed(value_type),
                        units: Borrowed(m.units),
                        slope,
                        tmax,
                        dmax,
                        extra: Borrowed(&extra),
                    },
                };
                batch.push(key, PacketKind::Metadata, |out| xdr::encode(out, &packet));
            }
            text.clear();
            text.push_str(&v.to_string());
            let packet = Packet::string_value(id, &text);
            batch.push(key, PacketKind::Value, |out| xdr::encode(out, &packet));
        }
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
        let table = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
          1: 00000000:0D05 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 17\n\
          2: 00000000:0D06 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4343 2 0000000000000000 5\n";
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
    fn self_metrics_are_unspoofed_counters_and_a_gauge() {
        let mut r = SelfReporter::new("gw1".into());
        let snap = Snapshot {
            datagrams: 10,
            records: 9,
            sources: 3,
            ..Snapshot::default()
        };
        let mut batch = PacketBatch::default();
        r.encode(&mut batch, &snap, Some(2), true, 90, 0);
        let decoded: Vec<Packet> = batch.iter().map(|p| decode(p).unwrap()).collect();
        // Every counter of the table, and the kernel's drops.
        assert_eq!(decoded.len(), 2 * (crate::events::COUNTERS.len() + 1));
        let value = |name: &str| {
            decoded.iter().find_map(|p| match p {
                Packet::Value { id, value, .. } if id.name == name => {
                    assert!(!id.spoof);
                    assert_eq!(id.host, "gw1");
                    Some(value.to_string())
                }
                _ => None,
            })
        };
        assert_eq!(value("xrd2ganglia.records").as_deref(), Some("9"));
        assert_eq!(value("xrd2ganglia.kernel_drops").as_deref(), Some("2"));
        assert_eq!(value("xrd2ganglia.sources").as_deref(), Some("3"));
        assert!(decoded.iter().any(|p| matches!(p, Packet::Metadata { id, meta } if id.name == "xrd2ganglia.sources" && meta.slope == Slope::Both && meta.value_type == "uint32")));
        // Without kernel drops (no /proc), that metric is left out; values only.
        r.encode(&mut batch, &snap, None, false, 90, 0);
        assert_eq!(batch.len(), crate::events::COUNTERS.len());
        // Each packet is keyed by its own metric: none conflates another.
        let keys: std::collections::HashSet<_> = batch.entries().map(|(k, _, _)| k).collect();
        assert_eq!(keys.len(), batch.len());
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
        c.send_queue_age_ms.store(250, Relaxed);
        c.xml_hosts_evicted.store(3, Relaxed);
        let line = c.snapshot().to_string();
        assert!(line.starts_with("datagrams=7 records=0 "), "{line}");
        assert!(line.contains(" send_queue_age_ms=250 "), "{line}");
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
    fn readme_lists_every_self_metric() {
        let readme = include_str!("../README.md");
        let at = readme.find("## Watching the gateway").unwrap();
        let section = &readme[at..at + readme[at..].find("\n## Architecture").unwrap()];
        for c in COUNTERS.iter().chain([&crate::events::KERNEL_DROPS]) {
            let name = c.metric.trim_start_matches("xrd2ganglia.");
            assert!(
                section.contains(&format!("`{name}`")),
                "README's Watching the gateway does not list {name}"
            );
        }
    }
}
