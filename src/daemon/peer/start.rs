//! The start-up: the peer's state pulled before anything is received
//! ([`pull`]), and its last records fed into the XML table so that the
//! first document is whole ([`fill_table`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Link;
use super::asking::ask;
use crate::config::Settings;
use crate::daemon::table::HostTable;
use crate::engine::Engine;
use crate::engine::pairing::LastRecord;
use crate::engine::saved::SavedState;
use crate::events::{Counters, Events};

/// The start-up pull: the peer's every entry merged into the saved state
/// (no engine runs yet), and its last records. None if the peer did not
/// answer (logged).
pub async fn pull(
    link: &Link,
    settings: &Settings,
    counters: &Counters,
) -> Option<Vec<LastRecord>> {
    let peer = settings.peer.as_deref()?;
    let mut events = Events::new(counters, settings.log_interval);
    match ask(link, peer, "pull", &[], &mut events).await {
        Ok(records) => {
            tracing::info!(
                "peer {peer}: state pulled ({} sources known now, {} last records)",
                link.saved.unclaimed(),
                records.len()
            );
            Some(records)
        }
        Err((addr, e)) => {
            events.at(Instant::now()).peer_failed(addr, &e);
            tracing::warn!(
                "peer {peer}: not pulled at start ({e}): starting from the state file alone"
            );
            None
        }
    }
}

/// Feeds the peer's last records through an engine of their own, with the
/// merged state, into the XML table: the first document is whole. Each
/// record counts at its age (its host's TN is what it was at the peer).
/// The engine is then dropped: the receive tasks claim the state as their
/// servers report, and send the same values (the same offsets).
pub fn fill_table(
    records: &[LastRecord],
    settings: &Arc<Settings>,
    saved: &SavedState,
    table: &HostTable,
) {
    let now = Instant::now();
    // Not records this gateway received: counted nowhere.
    let counters = Counters::default();
    let scratch = Arc::new(SavedState::default());
    for ((ip, program), mut state) in saved.unclaimed_entries() {
        // Readings are each side's own; the value sent is reading + offset.
        for c in &mut state.counters {
            c.1 = 0;
        }
        scratch.merge_unclaimed(ip, &program, &state, usize::MAX);
    }
    let oldest = now.checked_sub(Duration::from_secs(3600)).unwrap_or(now);
    let mut engine = Engine::new(settings.clone(), oldest);
    engine.keep_state(scratch, 0);
    let mut events = Events::new(&counters, settings.log_interval);
    let mut ordered: Vec<&LastRecord> = records.iter().collect();
    ordered.sort_by_key(|r| std::cmp::Reverse(r.age));
    for r in ordered {
        let at = now.checked_sub(r.age).unwrap_or(now).max(oldest);
        let batch = engine.datagram(&r.datagram, SocketAddr::new(r.ip, 0), at, &mut events);
        table.take(batch, r.ip, at);
    }
}
