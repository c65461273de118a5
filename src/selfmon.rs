//! The gateway's own health, as Ganglia metrics of the gateway's own host.
//!
//! Sent unspoofed (as gmetric does: host = this host's name, spoof 0), so
//! gmond files them under the address the packets come from, the gateway's.
//! Counters are cumulative (slope positive, graphed as rates); `sources` is
//! a gauge. Kernel receive drops of the listening sockets are read from
//! /proc/net/udp and udp6 (the `drops` column of our sockets' inodes).

use std::os::fd::RawFd;

use crate::events::Snapshot;
use crate::ganglia::xdr::{self, Metadata, MetricId, Slope};
use crate::gateway::packets::{PacketBatch, PacketKind, SlotKey};

struct SelfMetric {
    name: &'static str,
    units: &'static str,
    slope: Slope,
    title: &'static str,
    desc: &'static str,
    value: fn(&Snapshot, Option<u64>) -> Option<u64>,
}

/// A cumulative counter (slope positive: graphed as a rate).
const fn counter(
    name: &'static str,
    units: &'static str,
    title: &'static str,
    desc: &'static str,
    value: fn(&Snapshot, Option<u64>) -> Option<u64>,
) -> SelfMetric {
    metric(Slope::Positive, name, units, title, desc, value)
}

/// A level (slope both).
const fn gauge(
    name: &'static str,
    units: &'static str,
    title: &'static str,
    desc: &'static str,
    value: fn(&Snapshot, Option<u64>) -> Option<u64>,
) -> SelfMetric {
    metric(Slope::Both, name, units, title, desc, value)
}

const fn metric(
    slope: Slope,
    name: &'static str,
    units: &'static str,
    title: &'static str,
    desc: &'static str,
    value: fn(&Snapshot, Option<u64>) -> Option<u64>,
) -> SelfMetric {
    SelfMetric {
        name,
        units,
        slope,
        title,
        desc,
        value,
    }
}

const SELF_METRICS: &[SelfMetric] = &[
    counter(
        "xrd2ganglia.datagrams",
        "datagrams/s",
        "Datagrams received",
        "UDP datagrams received on the listening sockets.",
        |s, _| Some(s.datagrams),
    ),
    counter(
        "xrd2ganglia.records",
        "records/s",
        "Records handled",
        "Summary records parsed and forwarded.",
        |s, _| Some(s.records),
    ),
    counter(
        "xrd2ganglia.denied",
        "datagrams/s",
        "Datagrams denied",
        "Datagrams from senders outside `allow`.",
        |s, _| Some(s.denied),
    ),
    counter(
        "xrd2ganglia.parse_errors",
        "datagrams/s",
        "Datagrams rejected",
        "Datagrams that were not summary records.",
        |s, _| Some(s.parse_errors),
    ),
    counter(
        "xrd2ganglia.values_rejected",
        "values/s",
        "Values rejected",
        "Variables whose value could not be sent for its type.",
        |s, _| Some(s.values_rejected),
    ),
    counter(
        "xrd2ganglia.metrics_dropped_cap",
        "metrics/s",
        "Metrics over the cap",
        "New metrics not sent because a source had max_metrics_per_source.",
        |s, _| Some(s.metrics_dropped_cap),
    ),
    counter(
        "xrd2ganglia.metadata_packets",
        "packets/s",
        "Metadata packets",
        "Metadata packets (128) encoded for gmond.",
        |s, _| Some(s.metadata_packets),
    ),
    counter(
        "xrd2ganglia.value_packets",
        "packets/s",
        "Value packets",
        "Value packets (133, 132) encoded for gmond.",
        |s, _| Some(s.value_packets),
    ),
    counter(
        "xrd2ganglia.send_errors",
        "errors/s",
        "Send errors",
        "Sends to gmond that failed.",
        |s, _| Some(s.send_errors),
    ),
    counter(
        "xrd2ganglia.send_refused",
        "packets/s",
        "Sends refused",
        "Sends after which gmond was found not listening.",
        |s, _| Some(s.send_refused),
    ),
    counter(
        "xrd2ganglia.receive_errors",
        "errors/s",
        "Receive errors",
        "Receive calls that failed.",
        |s, _| Some(s.receive_errors),
    ),
    counter(
        "xrd2ganglia.sources_evicted",
        "sources/s",
        "Sources evicted",
        "Sources forgotten because max_sources was reached.",
        |s, _| Some(s.sources_evicted),
    ),
    counter(
        "xrd2ganglia.restarts",
        "restarts/s",
        "Restarts noticed",
        "xrootd/cmsd restarts noticed (new start time or pid).",
        |s, _| Some(s.restarts),
    ),
    counter(
        "xrd2ganglia.metadata_requests",
        "requests/s",
        "Metadata requests",
        "gmond metadata requests (136) heard on metadata_requests.",
        |s, _| Some(s.metadata_requests),
    ),
    counter(
        "xrd2ganglia.requests_answered",
        "requests/s",
        "Requests answered",
        "gmond metadata requests answered with every metadata of the host asked about.",
        |s, _| Some(s.requests_answered),
    ),
    counter(
        "xrd2ganglia.kernel_drops",
        "datagrams/s",
        "Kernel drops",
        "Datagrams the kernel dropped because the receive buffer was full.",
        |_, d| d,
    ),
    counter(
        "xrd2ganglia.packets_conflated",
        "packets/s",
        "Packets conflated",
        "Queued packets replaced by a newer one of the same host and metric before they were sent.",
        |s, _| Some(s.packets_conflated),
    ),
    counter(
        "xrd2ganglia.packets_unsent",
        "packets/s",
        "Packets unsent at stop",
        "Queued packets dropped at stop because drain_timeout passed.",
        |s, _| Some(s.packets_unsent),
    ),
    gauge(
        "xrd2ganglia.sources",
        "sources",
        "Sources tracked",
        "xrootd/cmsd instances the gateway tracks now.",
        |s, _| Some(s.sources),
    ),
    gauge(
        "xrd2ganglia.send_queue",
        "packets",
        "Send queue",
        "Packets waiting in the send queues (all channels), paced to max_send_rate.",
        |s, _| Some(s.send_queue),
    ),
    gauge(
        "xrd2ganglia.send_queue_age",
        "ms",
        "Send queue age",
        "How long the oldest queued packet has waited: the delay the pacing adds.",
        |s, _| Some(s.send_queue_age_ms),
    ),
    counter(
        "xrd2ganglia.xml_polls",
        "polls/s",
        "XML polls answered",
        "Documents written to gmetad (or another client) on xml_listen.",
        |s, _| Some(s.xml_polls),
    ),
    counter(
        "xrd2ganglia.xml_denied",
        "connections/s",
        "XML polls denied",
        "Connections to xml_listen from outside xml_allow, closed at once.",
        |s, _| Some(s.xml_denied),
    ),
    counter(
        "xrd2ganglia.xml_dropped",
        "polls/s",
        "XML polls dropped",
        "Polls closed unanswered (too many at once) or abandoned (the client stalled).",
        |s, _| Some(s.xml_dropped),
    ),
    gauge(
        "xrd2ganglia.xml_hosts",
        "hosts",
        "Hosts in the XML",
        "Hosts in the last document written on xml_listen.",
        |s, _| Some(s.xml_hosts),
    ),
    gauge(
        "xrd2ganglia.xml_renamed",
        "hosts",
        "Hosts renamed in the XML",
        "Hosts written as NAME@ADDRESS in the last document because another address had their name.",
        |s, _| Some(s.xml_renamed),
    ),
];

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
        for m in SELF_METRICS {
            let Some(v) = (m.value)(snap, drops) else {
                continue;
            };
            let id = MetricId {
                host: &self.host,
                name: m.name,
                spoof: false,
            };
            let key = SlotKey {
                host: self.host_key,
                metric: crate::mapping::name_key(m.name),
            };
            if with_metadata {
                let extra = [
                    ("GROUP", "xrd2ganglia"),
                    ("DESC", m.desc),
                    ("TITLE", m.title),
                ];
                let value_type = if m.slope == Slope::Positive {
                    "double"
                } else {
                    "uint32"
                };
                let meta = Metadata {
                    value_type,
                    units: m.units,
                    slope: m.slope,
                    tmax,
                    dmax,
                    extra: &extra,
                };
                batch.push(key, PacketKind::Metadata, |out| {
                    xdr::encode_metadata(out, &id, &meta)
                });
            }
            text.clear();
            text.push_str(&v.to_string());
            batch.push(key, PacketKind::Value, |out| {
                xdr::encode_string_value(out, &id, &text)
            });
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
        for table in ["/proc/net/udp", "/proc/net/udp6"] {
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

/// Sums the `drops` column (the last) of the rows whose inode (the tenth
/// column) is one of `inodes`.
fn drops_in(table: &str, inodes: &[u64]) -> Option<u64> {
    let mut found = None;
    for line in table.lines().skip(1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 13 {
            continue;
        }
        let Ok(inode) = cols[9].parse::<u64>() else {
            continue;
        };
        if inodes.contains(&inode)
            && let Ok(d) = cols[cols.len() - 1].parse::<u64>()
        {
            found = Some(found.unwrap_or(0) + d);
        }
    }
    found
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
        if std::fs::read_to_string("/proc/net/udp").is_ok_and(|t| t.contains("drops")) {
            assert_eq!(kd.read(), Some(0));
        }
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
        assert_eq!(decoded.len(), 2 * SELF_METRICS.len());
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
        assert!(decoded.iter().any(|p| matches!(p, Packet::Metadata { name, slope: 3, value_type, .. } if name == "xrd2ganglia.sources" && value_type == "uint32")));
        // Without kernel drops (no /proc), that metric is left out; values only.
        r.encode(&mut batch, &snap, None, false, 90, 0);
        assert_eq!(batch.len(), SELF_METRICS.len() - 1);
        // Each packet is keyed by its own metric: none conflates another.
        let keys: std::collections::HashSet<_> = batch.entries().map(|(k, _, _)| k).collect();
        assert_eq!(keys.len(), batch.len());
    }
}
