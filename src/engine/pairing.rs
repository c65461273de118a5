//! What an engine gives and takes in the peer exchange
//! ([`crate::daemon::peer`]): its sources' entries (all, or those whose
//! run or offsets changed since the peer was last told), their last
//! records, and the peer's entries merged into its live sources by the
//! rule of [`super::merge`]. Called by the receive task that owns the
//! engine, between two datagrams.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::Engine;
use super::merge::Taken;
use super::saved::SavedSource;
use crate::gstream::PfcTotals;

/// One source's entry, as exchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub ip: IpAddr,
    pub program: String,
    pub state: SavedSource,
    /// Its XCache g-stream totals ([`super::merge::merge_pfc`]).
    pub pfc: Option<PfcTotals>,
}

/// A source's last record and how old it is.
#[derive(Clone, Debug)]
pub struct LastRecord {
    pub ip: IpAddr,
    pub age: Duration,
    pub datagram: Vec<u8>,
}

impl Engine {
    /// Its sources' entries: every one, or only those changed since the
    /// last call that asked for changed ones (which clears the mark).
    pub fn peer_entries(&mut self, changed_only: bool, out: &mut Vec<Entry>) {
        for (ip, source) in self.sources.iter_with_ip_mut() {
            if !source.tell_peer(changed_only) {
                continue;
            }
            let state = source.saved();
            if state.started.is_none() && state.counters.is_empty() {
                continue;
            }
            out.push(Entry {
                ip,
                program: source.program().to_string(),
                state,
                pfc: source.pfc(),
            });
        }
    }

    /// Its sources' last records (kept with `peer_listen` or
    /// `metadata_requests`), with their age at `now`.
    pub fn last_records(&self, now: Instant, out: &mut Vec<LastRecord>) {
        for (ip, source) in self.sources.iter() {
            if source.last_record().is_empty() {
                continue;
            }
            out.push(LastRecord {
                ip,
                age: now.saturating_duration_since(source.last_seen()),
                datagram: source.last_record().to_vec(),
            });
        }
    }

    /// Merges a peer's entry into the source it names, if this engine has
    /// it, where it agrees with what this engine heard of the source
    /// ([`super::merge::take`]): Some(the merged entry, g-stream totals
    /// and what came of the peer's claims), else None. `now_unix` is now
    /// in Unix seconds.
    pub fn merge_peer(
        &mut self,
        entry: &Entry,
        now: Instant,
        now_unix: u64,
    ) -> Option<(SavedSource, Option<PfcTotals>, Taken)> {
        let now_s = self.clock.secs(now);
        let cap = self.settings.max_metrics_per_source;
        let source = self
            .sources
            .of_ip_mut(entry.ip)
            .find(|s| s.program() == entry.program)?;
        let ago = now.saturating_duration_since(source.last_seen()).as_secs();
        let times = (now_s, now_unix, now_unix.saturating_sub(ago));
        Some(source.merge_peer(&entry.state, entry.pfc.as_ref(), times, cap))
    }
}
