//! The events towards gmond: packets sent, refused or held for a full
//! gmond, what the send queues conflated or dropped, and gmond's metadata
//! requests.

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use super::Events;

/// A gmond whose receive queue stays full this long is logged: a poll
/// by gmetad takes a second or two, a gmond that is stopped (SIGSTOP) or
/// hung does not read at all.
pub const GMOND_STALL_WARNING: Duration = Duration::from_secs(10);

impl Events<'_> {
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
        if count > 0 {
            self.counters
                .packets_unsent
                .fetch_add(count as u64, Relaxed);
            tracing::warn!(
                channel,
                count,
                "drain_timeout passed at stop: {count} queued packets not sent"
            );
        }
    }
}
