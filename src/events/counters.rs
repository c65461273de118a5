//! Every counter of the gateway, defined once: the table at the bottom
//! makes the shared atomics ([`Counters`]), their copy ([`Snapshot`]), the
//! `counters:` log line (its `Display`) and the gateway's own Ganglia
//! metrics ([`COUNTERS`], sent by [`crate::daemon::self_metrics`]).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// How a counter is graphed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CounterKind {
    /// Cumulative: a running total in the log line and `status`; sent
    /// to Ganglia as its rate per second over each `self_metrics_interval`
    /// (slope both: see `daemon/self_metrics.rs` for why).
    Counter,
    /// A level (slope both).
    Gauge,
}

/// One counter, as logged and as a Ganglia metric of the gateway's host.
#[derive(Debug)]
pub struct CounterSpec {
    /// Its name in the `counters:` log line.
    pub field: &'static str,
    pub kind: CounterKind,
    /// Its Ganglia metric name.
    pub metric: &'static str,
    pub units: &'static str,
    pub title: &'static str,
    pub desc: &'static str,
}

macro_rules! counters {
    ($($field:ident: $kind:ident $metric:literal, $units:literal, $title:literal, $desc:literal;)*) => {
        /// Gateway-wide counters, shared by every task (relaxed atomics, no locks).
        #[derive(Debug, Default)]
        pub struct Counters {
            $(#[doc = $desc] pub $field: AtomicU64,)*
        }

        /// A copy of the counters at one moment.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct Snapshot {
            $(#[doc = $desc] pub $field: u64,)*
        }

        impl Counters {
            pub fn snapshot(&self) -> Snapshot {
                Snapshot { $($field: self.$field.load(Relaxed),)* }
            }
        }

        impl Snapshot {
            /// Every counter's definition and value, in table order.
            pub fn each(&self) -> impl Iterator<Item = (&'static CounterSpec, u64)> {
                COUNTERS.iter().zip([$(self.$field),*])
            }
        }

        /// Every counter, in table order.
        pub const COUNTERS: &[CounterSpec] = &[$(CounterSpec {
            field: stringify!($field),
            kind: CounterKind::$kind,
            metric: concat!("xrd2ganglia.", $metric),
            units: $units,
            title: $title,
            desc: $desc,
        },)*];
    };
}

impl fmt::Display for Snapshot {
    /// `name=value` for every counter, space-separated (the log line).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (spec, v)) in self.each().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            write!(f, "{sep}{}={v}", spec.field)?;
        }
        Ok(())
    }
}

/// Not a counter of ours: the kernel's drops at the listening sockets,
/// read from /proc when the metrics are sent ([`crate::daemon::self_metrics`]).
pub const KERNEL_DROPS: CounterSpec = CounterSpec {
    field: "kernel_drops",
    kind: CounterKind::Counter,
    metric: "xrd2ganglia.kernel_drops",
    units: "datagrams/s",
    title: "Kernel drops",
    desc: "Datagrams the kernel dropped because the receive buffer was full.",
};

counters! {
    datagrams: Counter "datagrams", "datagrams/s", "Datagrams received",
        "UDP datagrams received on the listening sockets.";
    records: Counter "records", "records/s", "Records handled",
        "Summary records parsed and forwarded.";
    denied: Counter "denied", "datagrams/s", "Datagrams denied",
        "Datagrams from senders outside `allow`.";
    parse_errors: Counter "parse_errors", "datagrams/s", "Datagrams rejected",
        "Datagrams that were neither summary records nor readable pfc g-stream packets.";
    gstream_packets: Counter "gstream_packets", "datagrams/s", "XCache g-stream packets",
        "pfc g-stream datagrams added to the totals of their XCache.";
    gstream_unmatched: Counter "gstream_unmatched", "datagrams/s", "XCache g-stream packets unmatched",
        "pfc g-stream datagrams dropped: no server with their start time had reported, and too many were waiting for one.";
    monitoring_ignored: Counter "monitoring_ignored", "datagrams/s", "Monitoring data ignored",
        "xrootd monitoring datagrams other than the pfc g-stream: other g-streams, the packets of the binary streams.";
    variables_excluded: Counter "variables_excluded", "variables/s", "Variables left out",
        "Variables left out by exclude (the default: report times and the raw CPU time halves).";
    values_rejected: Counter "values_rejected", "values/s", "Values rejected",
        "Variables whose value could not be sent for its type.";
    metrics_dropped_cap: Counter "metrics_dropped_cap", "metrics/s", "Metrics over the cap",
        "New metrics not sent because a source had max_metrics_per_source.";
    metadata_packets: Counter "metadata_packets", "packets/s", "Metadata packets",
        "Metadata packets (128) encoded for gmond.";
    value_packets: Counter "value_packets", "packets/s", "Value packets",
        "Value packets (133, 132) encoded for gmond.";
    packets_sent: Counter "packets_sent", "packets/s", "Packets sent",
        "Packets handed to the kernel for gmond, every channel, resent ones included.";
    packets_resent: Counter "packets_resent", "packets/s", "Packets sent again",
        "Packets sent a second time, resend_after seconds after the first, to a gmond whose queue cannot be followed.";
    send_held: Counter "send_held", "ms/s", "Sending held for gmond",
        "Time a sender held its packets because its gmond's receive queue was full (gmond not reading: gmetad polling it).";
    send_errors: Counter "send_errors", "errors/s", "Send errors",
        "Sends to gmond that failed.";
    send_refused: Counter "send_refused", "packets/s", "Sends refused",
        "Sends after which gmond was found not listening.";
    receive_errors: Counter "receive_errors", "errors/s", "Receive errors",
        "Receive calls that failed.";
    control_rejected: Counter "control_rejected", "requests/s", "Control requests rejected",
        "Connections to control_socket answered with an error: not a request, too long, none in time, or too many at once.";
    sources_evicted: Counter "sources_evicted", "sources/s", "Sources evicted",
        "Sources forgotten because max_sources was reached.";
    state_lines_skipped: Counter "state_lines_skipped", "lines/s", "State file lines skipped",
        "Lines (entries) and counters of the state file skipped at start because they failed a check (named in the log); the other sources kept their counters.";
    sources: Gauge "sources", "sources", "Sources tracked",
        "xrootd/cmsd instances the gateway tracks now.";
    restarts: Counter "restarts", "restarts/s", "Restarts noticed",
        "xrootd/cmsd restarts noticed (new start time or pid).";
    metadata_requests: Counter "metadata_requests", "requests/s", "Metadata requests",
        "gmond metadata requests (136) heard on metadata_requests.";
    requests_answered: Counter "requests_answered", "requests/s", "Requests answered",
        "gmond metadata requests answered with every metadata of the host asked about.";
    packets_conflated: Counter "packets_conflated", "packets/s", "Packets conflated",
        "Queued packets replaced by a newer one of the same host and metric before they were sent.";
    packets_forgotten: Counter "packets_forgotten", "packets/s", "Packets of forgotten sources",
        "Queued packets dropped unsent because their source was forgotten (max_sources): the queues hold at most max_sources hosts.";
    packets_unsent: Counter "packets_unsent", "packets/s", "Packets unsent at stop",
        "Queued packets dropped at stop because drain_timeout passed.";
    send_queue: Gauge "send_queue", "packets", "Send queue",
        "Packets waiting in the send queues (all channels), paced to gmond's receive queue or max_send_rate.";
    send_queue_age: Gauge "send_queue_age", "ms", "Send queue age",
        "How long the oldest queued packet has waited: the delay the pacing adds.";
    xml_polls: Counter "xml_polls", "polls/s", "XML polls answered",
        "Documents written to gmetad (or another client) on xml_listen.";
    xml_denied: Counter "xml_denied", "connections/s", "XML polls denied",
        "Connections to xml_listen from outside xml_allow, closed at once.";
    xml_dropped: Counter "xml_dropped", "polls/s", "XML polls dropped",
        "Documents abandoned: the client took nothing for 10 s or was not done in 120 s, or at a stop not done within drain_timeout.";
    xml_evicted: Counter "xml_evicted", "connections/s", "XML connections evicted",
        "Connections on xml_listen closed to make room for a new one (or a file descriptor): the one that made the least progress (see docs/gmetad.md).";
    xml_accept_failed: Counter "xml_accept_failed", "errors/s", "XML accepts failed",
        "Connections on xml_listen the kernel could not hand over (out of file descriptors, most likely).";
    xml_hosts: Gauge "xml_hosts", "hosts", "Hosts in the XML",
        "Hosts in the last document written on xml_listen.";
    xml_renamed: Gauge "xml_renamed", "hosts", "Hosts renamed in the XML",
        "Hosts written as NAME@ADDRESS in the last document because another address had their name.";
    clusters_refused: Counter "clusters_refused", "sources/s", "Sites refused a cluster",
        "Sources put in cluster_name because max_clusters clusters named by sites existed already.";
    site_clusters: Gauge "site_clusters", "clusters", "Clusters named by sites",
        "Clusters named by records' sites (cluster_by_site) now; at most max_clusters.";
    names_changed: Counter "names_changed", "names/s", "Names changed for gmetad",
        "Host, site and metric names from records changed to be safe directory and file names for gmetad (logged once per reason): characters replaced, what came before the first letter or digit dropped (., .., __SummaryInfo__), cut, or nothing usable left (the address, cluster_name, or the metric not sent).";
    peer_exchanges: Counter "peer_exchanges", "exchanges/s", "Peer exchanges",
        "State exchanges with the peer gateway completed (either side asking).";
    peer_failed: Counter "peer_failed", "exchanges/s", "Peer exchanges failed",
        "State exchanges with the peer that failed: refused, timed out, cut at their bound (a frame over 128 KiB, more entries than max_sources) or not the exchange.";
    peer_denied: Counter "peer_denied", "connections/s", "Peer connections denied",
        "Connections to peer_listen from outside peer_allow (or while that address had an exchange going, or 4 exchanges were), closed at once.";
    peer_refused_entries: Counter "peer_refused_entries", "lines/s", "Peer lines refused",
        "The peer's entries and counters refused, checked as the state file's (a start in the future, a counter of 2^63 or more, ...); the rest is taken.";
    peer_refused_claims: Counter "peer_refused_claims", "claims/s", "Peer claims refused",
        "The peer's claims refused as inconsistent with what this gateway heard itself: a restart the server did not report (a start in the future, or contradicted by the server's later reports), or a counter raised by more than the server's own reports allow. The rest of the entry is taken.";
    detailed_packets: Counter "detailed_packets", "datagrams/s", "Detailed stream packets",
        "Packets of xrootd's detailed monitoring stream taken (u logins, f file events; see docs/detailed.md).";
    detailed_records: Counter "detailed_records", "records/s", "Detailed stream records",
        "Records of f packets of the detailed stream read (opens, closes, transfers, disconnects).";
    detailed_lost: Counter "detailed_lost", "packets/s", "Detailed stream packets lost",
        "Detailed stream packets lost on the way, by the gaps in each server's sequence numbers (the f-stream's and the other packets').";
    detailed_unmatched: Counter "detailed_unmatched", "records/s", "Detailed records unmatched",
        "Detailed stream records naming a login or file never announced (a close of a file never opened: its bytes count as other) or announced again.";
    detailed_evicted: Counter "detailed_evicted", "entries/s", "Detailed entries forgotten",
        "Logins and open files forgotten at detailed_max_logins, and xrootd runs at max_sources.";
    detailed_servers: Gauge "detailed_servers", "servers", "Detailed stream servers",
        "xrootd runs whose detailed stream the gateway keeps state for now.";
    xml_hosts_evicted: Counter "xml_hosts_evicted", "hosts/s", "XML hosts evicted",
        "Hosts the XML table forgot to stay within max_sources, the longest silent first.";
}
