//! Every internal event the gateway counts and logs, defined once.
//!
//! Counters are shared by all receive tasks (relaxed atomics, no locks);
//! each is defined once, in the table of `events/counters.rs`.
//! Log lines are rate-limited per reason, whoever sent: the first one in
//! each `log_interval` is logged, with how many were suppressed since and
//! from which addresses (the first few).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use crate::gstream;
use crate::summary::ParseError;

mod counters;

pub use counters::{COUNTERS, CounterKind, CounterSpec, Counters, KERNEL_DROPS, Snapshot};

impl Counters {
    /// Sets the send-queue gauges.
    pub fn set_queue(&self, packets: usize, oldest: Duration) {
        self.send_queue.store(packets as u64, Relaxed);
        self.send_queue_age
            .store(oldest.as_millis().min(u128::from(u64::MAX)) as u64, Relaxed);
    }
}

/// Lines of the state file skipped at start, each checked on its own
/// ([`crate::engine::saved`]): counted, and named in one line (how many,
/// the first few with their line numbers and why). Every other source
/// keeps its counters.
pub fn state_lines_skipped(
    counters: &Counters,
    file: &std::path::Path,
    skipped: &crate::engine::saved::Skipped,
) {
    if skipped.is_empty() {
        return;
    }
    counters
        .state_lines_skipped
        .fetch_add(skipped.lines as u64, Relaxed);
    tracing::warn!(
        "state file {}: {skipped} (those counters start again from their readings; every other source keeps its own; counted as state_lines_skipped)",
        file.display()
    );
}

/// A gmond whose receive queue stays full this long is logged: a poll
/// by gmetad takes a second or two, a gmond that is stopped (SIGSTOP) or
/// hung does not read at all.
pub const GMOND_STALL_WARNING: Duration = Duration::from_secs(10);

/// Limits log lines to one per reason per interval, whoever sends: a
/// flood from 5,000 addresses is one line, not 5,000 (it was, when the
/// limit was per sender). The next line of a reason says how many were
/// left out since, and from which addresses (the first few).
pub struct LogLimiter {
    interval: Duration,
    /// Per reason (a handful of `&'static str`s: bounded by the code).
    last: HashMap<&'static str, Window>,
}

/// One reason's interval: when its last line was, what was left out since.
struct Window {
    at: Instant,
    left_out: Suppressed,
}

/// Lines left out since the last of their reason: how many, and the
/// first few distinct addresses they were about. Displays as the `suppressed`
/// field of the next line: `0`, or `12 (from 10.0.0.1, 10.0.0.2, 10.0.0.3, ...)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Suppressed {
    pub count: u64,
    pub examples: [Option<IpAddr>; EXAMPLES],
}

/// Addresses a suppressed count names at most.
pub const EXAMPLES: usize = 3;

impl Suppressed {
    fn note(&mut self, from: IpAddr) {
        self.count += 1;
        // Lines about no sender (the control socket's) name none.
        if from.is_unspecified() {
            return;
        }
        if let Some(free) = self
            .examples
            .iter()
            .position(|e| e.is_none_or(|e| e == from))
        {
            self.examples[free] = Some(from);
        }
    }

    /// The addresses named, in the order first seen.
    pub fn addresses(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.examples.iter().flatten().copied()
    }
}

impl std::fmt::Display for Suppressed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.count)?;
        for (i, ip) in self.addresses().enumerate() {
            f.write_str(if i == 0 { " (from " } else { ", " })?;
            write!(f, "{ip}")?;
        }
        let named = self.addresses().count() as u64;
        if named > 0 {
            f.write_str(if self.count > named { ", ...)" } else { ")" })?;
        }
        Ok(())
    }
}

impl LogLimiter {
    pub fn new(interval: Duration) -> LogLimiter {
        LogLimiter {
            interval,
            last: HashMap::new(),
        }
    }

    /// Some(what was left out since the last line of `reason`) if a line
    /// may be logged now; else None, and `from` is counted among those
    /// left out.
    pub fn allow(
        &mut self,
        reason: &'static str,
        from: IpAddr,
        now: Instant,
    ) -> Option<Suppressed> {
        match self.last.get_mut(reason) {
            Some(w) if now.saturating_duration_since(w.at) < self.interval => {
                w.left_out.note(from);
                None
            }
            Some(w) => {
                w.at = now;
                Some(std::mem::take(&mut w.left_out))
            }
            None => {
                self.last.insert(
                    reason,
                    Window {
                        at: now,
                        left_out: Suppressed::default(),
                    },
                );
                Some(Suppressed::default())
            }
        }
    }
}

/// What one receive task reports: counts every event, logs the rate-limited ones.
///
/// It reads no clock: whoever holds it says what time it is
/// ([`at`](Self::at)) before an event that may be logged; the engine with
/// the time it was given, the daemon's tasks with theirs.
pub struct Events<'c> {
    pub counters: &'c Counters,
    limiter: LogLimiter,
    /// The time its holder last gave (None: never given, and a line is
    /// then logged without limit rather than lost).
    now: Option<Instant>,
}

impl<'c> Events<'c> {
    pub fn new(counters: &'c Counters, log_interval: Duration) -> Events<'c> {
        Events {
            counters,
            limiter: LogLimiter::new(log_interval),
            now: None,
        }
    }

    /// Says what time it is: the rate limit of the lines that follow
    /// counts from it.
    pub fn at(&mut self, now: Instant) -> &mut Self {
        self.now = Some(now);
        self
    }

    /// Some(what was left out since) if a line of `reason` about `from`
    /// may be logged now.
    fn allow(&mut self, reason: &'static str, from: IpAddr) -> Option<Suppressed> {
        match self.now {
            Some(now) => self.limiter.allow(reason, from, now),
            None => Some(Suppressed::default()),
        }
    }

    pub fn datagram(&self) {
        self.counters.datagrams.fetch_add(1, Relaxed);
    }

    pub fn record(&self) {
        self.counters.records.fetch_add(1, Relaxed);
    }

    pub fn denied(&mut self, from: SocketAddr) {
        self.counters.denied.fetch_add(1, Relaxed);
        if let Some(s) = self.allow("denied", from.ip()) {
            tracing::warn!(%from, suppressed = %s, "datagram dropped: sender not in `allow`");
        }
    }

    pub fn parse_failed(&mut self, from: SocketAddr, len: usize, err: &ParseError) {
        self.counters.parse_errors.fetch_add(1, Relaxed);
        if let Some(s) = self.allow(err.reason(), from.ip()) {
            tracing::warn!(%from, bytes = len, suppressed = %s, "datagram rejected: {err}");
        }
    }

    /// A pfc g-stream datagram that cannot be read (a rejected datagram).
    pub fn gstream_failed(&mut self, from: SocketAddr, len: usize, err: &gstream::Error) {
        self.counters.parse_errors.fetch_add(1, Relaxed);
        if let Some(s) = self.allow(err.reason(), from.ip()) {
            tracing::warn!(%from, bytes = len, suppressed = %s, "datagram rejected: {err}");
        }
    }

    /// A pfc g-stream datagram taken; its records that were not readable
    /// are logged.
    pub fn gstream(&mut self, from: SocketAddr, bad_records: u32) {
        self.counters.gstream_packets.fetch_add(1, Relaxed);
        if bad_records > 0
            && let Some(s) = self.allow("g-stream record", from.ip())
        {
            tracing::warn!(%from, bad_records, suppressed = %s, "g-stream records left out: not file_close JSON with b_hit, b_miss, b_bypass");
        }
    }

    /// pfc g-stream datagrams dropped: their server had not reported yet
    /// and too many such were waiting.
    pub fn gstream_unmatched(&mut self, from: SocketAddr, stod: u32) {
        self.counters.gstream_unmatched.fetch_add(1, Relaxed);
        if let Some(s) = self.allow("g-stream unmatched", from.ip()) {
            tracing::warn!(%from, stod, suppressed = %s, "g-stream dropped: no xrootd of this address with this start time has sent a summary record");
        }
    }

    /// A pfc g-stream from a server that has sent no summary record yet:
    /// its totals wait (for ever, if the xrootd sends no `xrd.report` here).
    pub fn gstream_waiting(&mut self, from: SocketAddr, stod: u32) {
        if let Some(s) = self.allow("g-stream waiting", from.ip()) {
            tracing::info!(%from, stod, suppressed = %s, "g-stream of an xrootd that has sent no summary record yet: its totals wait for one (does it report here with xrd.report?)");
        }
    }

    /// xrootd monitoring data the gateway has no use for.
    pub fn monitoring_ignored(&mut self, from: SocketAddr, kind: gstream::Kind) {
        self.counters.monitoring_ignored.fetch_add(1, Relaxed);
        if let Some(s) = self.allow("monitoring", from.ip()) {
            tracing::info!(%from, suppressed = %s, "{kind} ignored: only pfc's g-stream (and summary records) become metrics");
        }
    }

    pub fn values_rejected(
        &mut self,
        from: SocketAddr,
        count: usize,
        examples: &[(String, String, crate::mapping::BadValue)],
    ) {
        self.counters
            .values_rejected
            .fetch_add(count as u64, Relaxed);
        if let Some(s) = self.allow("bad_value", from.ip()) {
            let list: Vec<String> = examples
                .iter()
                .map(|(var, value, why)| format!("{var}={value:?} ({})", why.as_str()))
                .collect();
            tracing::warn!(%from, count, suppressed = %s, "variables not sent: {}", list.join(", "));
        }
    }

    pub fn metric_cap(&mut self, from: SocketAddr, host: &str, dropped: usize, cap: usize) {
        self.counters
            .metrics_dropped_cap
            .fetch_add(dropped as u64, Relaxed);
        if let Some(s) = self.allow("metric_cap", from.ip()) {
            tracing::warn!(%from, host, dropped, suppressed = %s, "source has {cap} metrics (max_metrics_per_source): new metrics not sent");
        }
    }

    pub fn sent(&self, metadata: u64, values: u64) {
        self.counters.metadata_packets.fetch_add(metadata, Relaxed);
        self.counters.value_packets.fetch_add(values, Relaxed);
    }

    pub fn send_failed(&mut self, channel: &str, target: SocketAddr, err: &std::io::Error) {
        self.counters.send_errors.fetch_add(1, Relaxed);
        if let Some(s) = self.allow("send", target.ip()) {
            tracing::warn!(channel, suppressed = %s, "send to gmond failed: {err}");
        }
    }

    /// Sent, but nothing listened at the target for an earlier datagram.
    pub fn send_refused(&mut self, channel: &str, target: SocketAddr) {
        self.counters.send_refused.fetch_add(1, Relaxed);
        if let Some(s) = self.allow("refused", target.ip()) {
            tracing::warn!(
                channel,
                suppressed = %s,
                "gmond is not listening (connection refused); still sending"
            );
        }
    }

    /// Packets handed to the kernel for gmond; `resent` of them second copies.
    pub fn packets_out(&self, sent: usize, resent: usize) {
        self.counters.packets_sent.fetch_add(sent as u64, Relaxed);
        if resent > 0 {
            self.counters
                .packets_resent
                .fetch_add(resent as u64, Relaxed);
        }
    }

    /// A sender held its packets `ms` more milliseconds because its gmond's
    /// receive queue was full; gmond has not made room for `stalled`.
    pub fn held_for_gmond(
        &mut self,
        channel: &str,
        target: SocketAddr,
        ms: u64,
        stalled: Duration,
    ) {
        self.counters.send_held.fetch_add(ms, Relaxed);
        if stalled >= GMOND_STALL_WARNING
            && let Some(s) = self.allow("gmond_stalled", target.ip())
        {
            tracing::warn!(
                channel,
                suppressed = %s,
                "gmond has not read its socket for {} s: holding the packets for it (the newest per metric)",
                stalled.as_secs()
            );
        }
    }

    pub fn receive_failed(&mut self, local: SocketAddr, err: &std::io::Error) {
        self.counters.receive_errors.fetch_add(1, Relaxed);
        if let Some(s) = self.allow("receive", local.ip()) {
            tracing::warn!(%local, suppressed = %s, "receive failed: {err}");
        }
    }

    pub fn source_added(&self) {
        self.counters.sources.fetch_add(1, Relaxed);
    }

    pub fn restarted(&mut self, from: SocketAddr, host: &str, program: &str, tos: u32, pid: u32) {
        self.counters.restarts.fetch_add(1, Relaxed);
        if let Some(s) = self.allow("restart", from.ip()) {
            tracing::info!(%from, host, program, tos, pid, suppressed = %s, "restart noticed (new start time or pid): metadata resent");
        }
    }

    /// A gmond metadata request (136) heard: `answered` when its source's
    /// metadata went out (else it was answered moments ago, or names a
    /// metric this gateway does not send).
    pub fn metadata_request(&mut self, host: &str, name: &str, answered: bool) {
        self.counters.metadata_requests.fetch_add(1, Relaxed);
        if answered {
            self.counters.requests_answered.fetch_add(1, Relaxed);
            tracing::debug!(
                host,
                name,
                "gmond asked for metadata: sent every metadata of the host"
            );
        }
    }

    /// gmond asked after a quiet spell (it was restarted): every host of
    /// one receive task was answered.
    pub fn everything_asked(&self, hosts: usize) {
        self.counters
            .requests_answered
            .fetch_add(hosts as u64, Relaxed);
        if hosts > 0 {
            tracing::info!(
                hosts,
                "gmond asked for metadata after a quiet spell (restarted?): queued every host's metadata and last values"
            );
        }
    }

    /// A datagram on a metadata-request socket that is not a request.
    pub fn not_a_request(&mut self, from: SocketAddr, len: usize) {
        if let Some(s) = self.allow("not_request", from.ip()) {
            tracing::debug!(%from, len, suppressed = %s, "not a gmond metadata request: ignored");
        }
    }

    /// Queued packets replaced by newer ones.
    pub fn conflated(&self, count: u64) {
        if count > 0 {
            self.counters.packets_conflated.fetch_add(count, Relaxed);
        }
    }

    /// `count` queued packets of forgotten sources were dropped unsent
    /// (counted only: `sources_evicted` has the log line).
    pub fn forgotten_unsent(&self, count: usize) {
        if count > 0 {
            self.counters
                .packets_forgotten
                .fetch_add(count as u64, Relaxed);
        }
    }

    /// At stop, `count` queued packets could not be sent in time.
    pub fn unsent_at_stop(&self, channel: &str, count: usize) {
        self.counters
            .packets_unsent
            .fetch_add(count as u64, Relaxed);
        if count > 0 {
            tracing::warn!(
                channel,
                count,
                "drain_timeout passed at stop: {count} queued packets not sent"
            );
        }
    }

    /// Variables of a record left out by `exclude` (counted, not logged:
    /// it is the configuration's choice).
    pub fn excluded(&self, count: usize) {
        if count > 0 {
            self.counters
                .variables_excluded
                .fetch_add(count as u64, Relaxed);
        }
    }

    /// Hosts the XML table evicted to stay within `max_sources` (logged
    /// each time: evictions come in bulk, a quarter of the cap at once).
    pub fn xml_hosts_evicted(&self, count: usize) {
        if count > 0 {
            self.counters
                .xml_hosts_evicted
                .fetch_add(count as u64, Relaxed);
            tracing::warn!(
                "xml table: {count} hosts heard from longest ago forgotten to stay within max_sources (counted as xml_hosts_evicted)"
            );
        }
    }

    /// The XML port listens, `after` the start: at once with nothing to
    /// wait for, after the peer's state was pulled, or once the state
    /// file's sources reported (`left` of them had not).
    pub fn xml_listening(&self, local: SocketAddr, after: Duration, why: &str) {
        tracing::info!(
            "xml_listen {local}: listening {:.1} s after the start ({why})",
            after.as_secs_f64()
        );
    }

    /// An exchange with the peer done; `refused` lines of it refused,
    /// the first few named in `why`.
    pub fn peer_exchanged(&mut self, peer: SocketAddr, refused: usize, why: &str) {
        self.counters.peer_exchanges.fetch_add(1, Relaxed);
        if refused == 0 {
            return;
        }
        self.counters
            .peer_refused_entries
            .fetch_add(refused as u64, Relaxed);
        if let Some(s) = self.allow("peer_refused", peer.ip()) {
            tracing::warn!(
                suppressed = %s,
                "peer {peer}: {why} (counted as peer_refused_entries; the rest was taken)"
            );
        }
    }

    /// An exchange with the peer that failed; nothing of it was taken
    /// but the entries already merged.
    pub fn peer_failed(&mut self, peer: SocketAddr, e: &dyn std::fmt::Display) {
        self.counters.peer_failed.fetch_add(1, Relaxed);
        if let Some(s) = self.allow("peer_failed", peer.ip()) {
            tracing::warn!(
                suppressed = %s,
                "peer {peer}: exchange failed: {e} (counted as peer_failed, logged once per log_interval)"
            );
        }
    }

    /// A connection to `peer_listen` refused: from outside `peer_allow`,
    /// or while that address has an exchange going.
    pub fn peer_denied(&mut self, local: SocketAddr, from: SocketAddr, why: &str) {
        self.counters.peer_denied.fetch_add(1, Relaxed);
        if let Some(s) = self.allow("peer_denied", from.ip()) {
            tracing::warn!(
                suppressed = %s,
                "peer_listen {local}: {from} closed: {why} (counted as peer_denied, logged once per log_interval)"
            );
        }
    }

    /// A poll on `xml_listen` from outside `xml_allow`, closed at once.
    pub fn xml_denied(&mut self, local: SocketAddr, peer: SocketAddr) {
        self.counters.xml_denied.fetch_add(1, Relaxed);
        if self.allow("xml_denied", peer.ip()).is_some() {
            tracing::warn!(
                "xml_listen {local}: {peer} is not in xml_allow; closed (counted as xml_denied, logged once per log_interval)"
            );
        }
    }

    /// A connection closed to make room (`why`): of all those served, or
    /// of its address's, the one that had made the least progress.
    pub fn xml_evicted(&mut self, local: SocketAddr, peer: SocketAddr, why: &str) {
        self.counters.xml_evicted.fetch_add(1, Relaxed);
        if let Some(s) = self.allow("xml_evicted", peer.ip()) {
            tracing::warn!(
                suppressed = %s,
                "xml_listen {local}: closed {peer}, the connection that had made the least progress, for {why} (counted as xml_evicted, logged once per log_interval)"
            );
        }
    }

    /// A connection that could not be accepted (out of descriptors, most
    /// likely).
    pub fn xml_accept_failed(&mut self, local: SocketAddr, err: &std::io::Error) {
        self.counters.xml_accept_failed.fetch_add(1, Relaxed);
        if let Some(s) = self.allow("xml_accept", local.ip()) {
            tracing::warn!(
                suppressed = %s,
                "xml_listen {local}: cannot accept: {err} (counted as xml_accept_failed, logged once per log_interval)"
            );
        }
    }

    /// A document written whole: `hosts` hosts, `renamed` of them as
    /// `NAME@ADDRESS`.
    pub fn xml_polled(&self, hosts: usize, renamed: usize) {
        self.counters.xml_polls.fetch_add(1, Relaxed);
        self.counters.xml_hosts.store(hosts as u64, Relaxed);
        self.counters.xml_renamed.store(renamed as u64, Relaxed);
    }

    /// A document not finished (the client stalled or was too slow).
    pub fn xml_unfinished(&mut self, local: SocketAddr, peer: SocketAddr, err: &std::io::Error) {
        self.counters.xml_dropped.fetch_add(1, Relaxed);
        if self.allow("xml_write", peer.ip()).is_some() {
            tracing::warn!(
                "xml_listen {local}: document to {peer} not finished: {err} (counted as xml_dropped)"
            );
        }
    }

    /// The kernel dropped `rise` datagrams at the gateway's listening
    /// sockets since it last looked ([`crate::daemon::drops`]): their
    /// receive buffers were full.
    pub fn kernel_dropped(&mut self, rise: u64, last_minute: u64, since_start: u64) {
        let nowhere = IpAddr::from([0, 0, 0, 0]);
        if let Some(s) = self.allow("kernel_drops", nowhere) {
            tracing::warn!(
                suppressed = %s,
                "the kernel dropped {rise} datagrams at the gateway's listening sockets ({last_minute} in the last minute, {since_start} since the start): their receive buffers were full; raise recv_buffer (and net.core.rmem_max: docs/troubleshooting.md) (`xrd2ganglia status` shows them, logged once per log_interval)"
            );
        }
    }

    /// A connection to the control socket answered with an error (not
    /// the request, too long, too slow, too many at once).
    pub fn control_rejected(&mut self, path: &std::path::Path, why: &str) {
        self.counters.control_rejected.fetch_add(1, Relaxed);
        let anywhere = IpAddr::from([0, 0, 0, 0]);
        if let Some(s) = self.allow("control", anywhere) {
            tracing::warn!(
                suppressed = %s,
                "control socket {}: {why}: answered with an error (counted as control_rejected, logged once per log_interval)",
                path.display(),
            );
        }
    }

    /// A connection to the control socket that could not be accepted.
    pub fn control_accept_failed(&mut self, path: &std::path::Path, err: &std::io::Error) {
        let anywhere = IpAddr::from([0, 0, 0, 0]);
        if let Some(s) = self.allow("control_accept", anywhere) {
            tracing::warn!(
                suppressed = %s,
                "control socket {}: cannot accept: {err}",
                path.display()
            );
        }
    }

    /// A site found no room among the clusters (`max_clusters`): its
    /// servers go to `cluster_name`.
    pub fn cluster_refused(&mut self, from: SocketAddr, site: &str, cap: usize) {
        self.counters.clusters_refused.fetch_add(1, Relaxed);
        if let Some(s) = self.allow("max_clusters", from.ip()) {
            tracing::warn!(%from, site, suppressed = %s, "{cap} clusters named by sites already (max_clusters): this server goes to cluster_name");
        }
    }

    /// How many clusters are named by sites now.
    pub fn site_clusters(&self, count: usize) {
        self.counters.site_clusters.store(count as u64, Relaxed);
    }

    /// Sources evicted at `max_sources` when `from` sent its first
    /// record: `established` of them had reported more than once (or had
    /// saved counters), and `parked` of those keep their counters for
    /// their return. Logged once per `log_interval` like every reason (a
    /// flood of new senders evicts a tenth again and again: a line per
    /// eviction before); `sources_evicted` counts them all.
    pub fn sources_evicted(
        &mut self,
        from: IpAddr,
        count: usize,
        established: usize,
        parked: usize,
        cap: usize,
    ) {
        self.counters
            .sources_evicted
            .fetch_add(count as u64, Relaxed);
        self.counters.sources.fetch_sub(count as u64, Relaxed);
        let single = count - established;
        if let Some(s) = self.allow("evicted", from) {
            tracing::warn!(
                count,
                suppressed = %s,
                "more than {cap} sources (max_sources): forgot the {count} least recently seen, those that had sent a single record first: {single} of them, {established} established ({parked} of which keep their counters for their return)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 34, item 12: one line per reason per interval, whoever
    /// sends (this test said "per sender" before: `b`'s first datagram had
    /// a line of its own), with the count left out and a few of their
    /// addresses.
    #[test]
    fn limiter_allows_one_line_per_interval_per_reason() {
        let mut l = LogLimiter::new(Duration::from_secs(10));
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let t0 = Instant::now();
        assert_eq!(l.allow("x", a, t0), Some(Suppressed::default()));
        assert_eq!(l.allow("x", a, t0 + Duration::from_secs(1)), None);
        assert_eq!(l.allow("x", a, t0 + Duration::from_secs(2)), None);
        assert_eq!(l.allow("x", b, t0), None);
        assert_eq!(l.allow("y", a, t0), Some(Suppressed::default()));
        let next = l.allow("x", a, t0 + Duration::from_secs(11)).unwrap();
        assert_eq!(next.count, 3);
        assert_eq!(next.addresses().collect::<Vec<_>>(), [a, b]);
        assert_eq!(next.to_string(), "3 (from 10.0.0.1, 10.0.0.2, ...)");
        assert_eq!(Suppressed::default().to_string(), "0");
    }

    /// 5,000 senders of one reason: one line, the rest counted, three
    /// named; the limiter holds one entry.
    #[test]
    fn limiter_stays_bounded_and_names_a_few() {
        let mut l = LogLimiter::new(Duration::from_secs(10));
        let t0 = Instant::now();
        let lines = (0..5_000u32)
            .filter(|i| l.allow("x", IpAddr::from(i.to_be_bytes()), t0).is_some())
            .count();
        assert_eq!(lines, 1);
        assert_eq!(l.last.len(), 1);
        let next = l.allow(
            "x",
            IpAddr::from([9, 9, 9, 9]),
            t0 + Duration::from_secs(10),
        );
        let next = next.unwrap();
        assert_eq!(next.count, 4_999);
        assert_eq!(
            next.to_string(),
            "4999 (from 0.0.0.1, 0.0.0.2, 0.0.0.3, ...)"
        );
    }

    /// Issue 37, item 3: lines are limited by the time their holder gives
    /// (the engine's given instant), not by a clock of their own: a line
    /// an hour later by the given time opens a new interval, however
    /// little real time passed.
    #[test]
    fn lines_are_limited_by_the_time_given() {
        let counters = Counters::default();
        let mut events = Events::new(&counters, Duration::from_secs(10));
        let from: SocketAddr = "10.0.0.1:1".parse().unwrap();
        // Any instant will do as the start: what follows is counted from it.
        let t0 = Instant::now() + Duration::from_secs(7200);
        events.at(t0).denied(from);
        events.at(t0 + Duration::from_secs(5)).denied(from);
        assert_eq!(events.limiter.last["denied"].left_out.count, 1);
        events.at(t0 + Duration::from_secs(3600)).denied(from);
        let window = &events.limiter.last["denied"];
        assert_eq!(window.at, t0 + Duration::from_secs(3600));
        assert_eq!(window.left_out.count, 0);
        assert_eq!(counters.denied.load(Relaxed), 3);
    }
}
