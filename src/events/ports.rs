//! The events of the ports the gateway answers on: the XML port (gmetad's
//! polls), the peer exchange and the control socket.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use super::Events;

impl Events<'_> {
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

    /// `refused` of the peer's claims in one exchange refused by the trust
    /// rule ([`crate::engine::merge::take`]), the first named in `why`.
    pub fn peer_claims_refused(&mut self, peer: SocketAddr, refused: usize, why: &str) {
        if refused == 0 {
            return;
        }
        self.counters
            .peer_refused_claims
            .fetch_add(refused as u64, Relaxed);
        if let Some(s) = self.allow("peer_refused_claims", peer.ip()) {
            tracing::warn!(
                suppressed = %s,
                "peer {peer}: {why} (counted as peer_refused_claims; the rest was taken)"
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

    /// At a stop, `count` documents not finished within `drain_timeout`
    /// (`drain`), cut short (logged each time: once per stop).
    pub fn xml_cut_at_stop(&self, local: SocketAddr, count: usize, drain: Duration) {
        self.counters.xml_dropped.fetch_add(count as u64, Relaxed);
        tracing::warn!(
            "xml_listen {local}: stopping: {count} documents not finished within drain_timeout ({} s) cut short (counted as xml_dropped)",
            drain.as_secs_f64()
        );
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
}
