//! Every internal event the gateway counts and logs, defined once.
//!
//! Counters are shared by all receive tasks (relaxed atomics, no locks);
//! each is defined once, in the table of `events/counters.rs`.
//! Log lines are rate-limited per reason, whoever sent: the first one in
//! each `log_interval` is logged, with how many were suppressed since and
//! from which addresses (the first few; `events/limiter.rs`).
//!
//! The events, by where they happen: here, receiving (datagrams, records,
//! g-streams, sources); `events/gmond.rs`, towards gmond (sending, the
//! send queues, gmond's metadata requests); `events/ports.rs`, the ports
//! answered on (the XML port, the peer exchange, the control socket).

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use crate::gstream;
use crate::summary::ParseError;

mod counters;
mod gmond;
mod limiter;
mod ports;

pub use counters::{COUNTERS, CounterKind, CounterSpec, Counters, KERNEL_DROPS, Snapshot};
pub use gmond::GMOND_STALL_WARNING;
pub use limiter::{EXAMPLES, LogLimiter, Suppressed};

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
        .fetch_add(skipped.total() as u64, Relaxed);
    tracing::warn!(
        "state file {}: {skipped} (those counters start again from their readings; every other source keeps its own; counted as state_lines_skipped)",
        file.display()
    );
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

    /// A detailed-stream datagram that cannot be read (a rejected datagram).
    pub fn detailed_failed(&mut self, from: SocketAddr, len: usize, err: &crate::detailed::Error) {
        self.counters.parse_errors.fetch_add(1, Relaxed);
        if let Some(s) = self.allow(err.reason(), from.ip()) {
            tracing::warn!(%from, bytes = len, suppressed = %s, "datagram rejected: {err}");
        }
    }

    /// A detailed-stream packet taken, with what it did; `bad` when its
    /// f-stream records ended at one that does not fit (those before it
    /// were taken).
    pub fn detailed(
        &mut self,
        from: SocketAddr,
        records: u64,
        unmatched: u64,
        bad: Option<&crate::detailed::Error>,
    ) {
        let c = self.counters;
        c.detailed_packets.fetch_add(1, Relaxed);
        c.detailed_records.fetch_add(records, Relaxed);
        if unmatched > 0 {
            c.detailed_unmatched.fetch_add(unmatched, Relaxed);
            if let Some(s) = self.allow("detailed unmatched", from.ip()) {
                tracing::info!(%from, unmatched, suppressed = %s, "detailed stream records of logins or files never announced (or announced again): counted under other; counted as detailed_unmatched");
            }
        }
        if let Some(err) = bad {
            c.parse_errors.fetch_add(1, Relaxed);
            if let Some(s) = self.allow(err.reason(), from.ip()) {
                tracing::warn!(%from, suppressed = %s, "detailed stream records left out: {err} (the records before it were taken)");
            }
        }
    }

    /// Detailed-stream packets of a server lost on the way (a gap in its
    /// sequence numbers).
    pub fn detailed_lost(&mut self, from: SocketAddr, lost: u64) {
        if lost == 0 {
            return;
        }
        self.counters.detailed_lost.fetch_add(lost, Relaxed);
        if let Some(s) = self.allow("detailed lost", from.ip()) {
            tracing::warn!(%from, lost, suppressed = %s, "detailed stream packets lost (a gap in the sequence numbers): what they said is not counted; counted as detailed_lost");
        }
    }

    /// Logins, open files or xrootd runs forgotten at their bound
    /// (`detailed_max_logins`, `max_sources`).
    pub fn detailed_evicted(&mut self, from: SocketAddr, count: u64) {
        if count == 0 {
            return;
        }
        self.counters.detailed_evicted.fetch_add(count, Relaxed);
        if let Some(s) = self.allow("detailed evicted", from.ip()) {
            tracing::warn!(%from, count, suppressed = %s, "detailed stream: logins or open files over detailed_max_logins (or xrootd runs over max_sources) forgotten, the oldest first; counted as detailed_evicted");
        }
    }

    /// How many xrootd runs one engine keeps detailed state for changed.
    pub fn detailed_servers(&self, before: usize, after: usize) {
        let c = &self.counters.detailed_servers;
        if after > before {
            c.fetch_add((after - before) as u64, Relaxed);
        } else {
            c.fetch_sub((before - after) as u64, Relaxed);
        }
    }

    /// xrootd monitoring data the gateway has no use for.
    pub fn monitoring_ignored(&mut self, from: SocketAddr, kind: gstream::Kind) {
        self.counters.monitoring_ignored.fetch_add(1, Relaxed);
        if let Some(s) = self.allow("monitoring", from.ip()) {
            tracing::info!(%from, suppressed = %s, "{kind} ignored: only summary records, pfc's g-stream and the detailed stream's logins and file events become metrics");
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

    /// A restart seen after a gap in what this gateway heard, its peer
    /// unreachable: the server's counters are held until `recover_from`
    /// is read for it (docs/pair.md).
    pub fn restart_held(&mut self, from: SocketAddr, host: &str, program: &str) {
        if let Some(s) = self.allow("restart_held", from.ip()) {
            tracing::warn!(%from, host, program, suppressed = %s, "restart after a gap, the peer unreachable: counters held until recover_from is read (gmetad's polls refused meanwhile)");
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

    /// A site found no room among the clusters (`max_clusters`): its
    /// servers go to `cluster_name`.
    pub fn cluster_refused(&mut self, from: SocketAddr, site: &str, cap: usize) {
        self.counters.clusters_refused.fetch_add(1, Relaxed);
        if let Some(s) = self.allow("max_clusters", from.ip()) {
            tracing::warn!(%from, site, suppressed = %s, "{cap} clusters named by sites already (max_clusters): this server goes to cluster_name");
        }
    }

    /// A name from a record (a host's, a site's as a cluster's, a
    /// metric's) changed to keep the rule of `ganglia/path_name.rs`: it
    /// becomes a directory or file of gmetad's. Counted once per name
    /// taken (a source's, a cluster's, a cached metric name), logged once
    /// per reason per interval.
    pub fn name_changed(
        &mut self,
        from: SocketAddr,
        what: &str,
        sent: &str,
        now: &str,
        change: crate::ganglia::path_name::Change,
    ) {
        self.counters.names_changed.fetch_add(1, Relaxed);
        if let Some(s) = self.allow(change.as_str(), from.ip()) {
            let sent = crate::ganglia::path_name::shown(sent);
            tracing::warn!(%from, suppressed = %s, "{what} name {sent:?} published as {now:?}: {} (a name becomes a directory or file of gmetad's; counted as names_changed)", change.as_str());
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
