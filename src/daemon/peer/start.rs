//! The start-up: the peer's state pulled before anything is received
//! ([`pull`]), and its last records fed into the XML table as they come,
//! so that the first document is whole ([`Filler`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Link;
use super::asking::ask;
use crate::config::Settings;
use crate::daemon::table::HostTable;
use crate::engine::pairing::LastRecord;
use crate::engine::saved::SavedState;
use crate::engine::{Engine, Shared};
use crate::events::{Counters, Events};

/// The start-up pull: the peer's every entry merged into the saved state
/// (no engine runs yet), and its last records fed, as they come, into
/// `table` ([`Filler`]). How many records came; None if the peer did not
/// answer (logged).
pub async fn pull(
    link: &Link,
    settings: &Arc<Settings>,
    counters: &Counters,
    table: Option<&HostTable>,
) -> Option<usize> {
    let peer = settings.peer.as_deref()?;
    let mut events = Events::new(counters, settings.log_interval);
    let mut filler = table.map(|t| Filler::new(settings, &link.saved, t));
    let mut take = |r: LastRecord| {
        if let Some(f) = &mut filler {
            f.take(&r);
        }
    };
    match ask(link, peer, "pull", &[], &mut take, &mut events).await {
        Ok(records) => {
            tracing::info!(
                "peer {peer}: state pulled ({} sources known now, {records} last records)",
                link.saved.unclaimed(),
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
/// record counts at its age (its host's TN is what it was at the peer);
/// the peer sends the oldest first. The engine is made at the first
/// record (the entries come before the records: merged by then) and
/// dropped after the pull: the receive tasks claim the state as their
/// servers report, and send the same values (the same offsets).
pub struct Filler<'a> {
    settings: &'a Arc<Settings>,
    saved: &'a SavedState,
    table: &'a HostTable,
    engine: Option<Engine>,
    now: Instant,
    oldest: Instant,
    /// Not records this gateway received: counted nowhere.
    counters: Counters,
}

impl<'a> Filler<'a> {
    pub fn new(settings: &'a Arc<Settings>, saved: &'a SavedState, table: &'a HostTable) -> Self {
        let now = Instant::now();
        Filler {
            settings,
            saved,
            table,
            engine: None,
            now,
            oldest: now.checked_sub(Duration::from_secs(3600)).unwrap_or(now),
            counters: Counters::default(),
        }
    }

    fn engine(&mut self) -> &mut Engine {
        let (saved, settings, oldest) = (self.saved, self.settings, self.oldest);
        self.engine.get_or_insert_with(|| {
            let scratch = Arc::new(SavedState::default());
            for ((ip, program), mut state) in saved.unclaimed_entries() {
                // Readings are each side's own; the value sent is reading + offset.
                for c in &mut state.counters {
                    c.1 = 0;
                }
                scratch.merge_unclaimed(ip, &program, &state, usize::MAX, super::unix_now());
            }
            let shared = Shared {
                saved: Some((scratch, 0)),
                ..Shared::default()
            };
            Engine::with_shared(settings.clone(), oldest, shared)
        })
    }

    /// One record, into the table.
    pub fn take(&mut self, r: &LastRecord) {
        let at = self
            .now
            .checked_sub(r.age)
            .unwrap_or(self.now)
            .max(self.oldest);
        self.engine();
        let Some(engine) = self.engine.as_mut() else {
            return;
        };
        let mut events = Events::new(&self.counters, self.settings.log_interval);
        let batch = engine.datagram(&r.datagram, SocketAddr::new(r.ip, 0), at, &mut events);
        self.table.take(batch, r.ip, at);
    }
}
