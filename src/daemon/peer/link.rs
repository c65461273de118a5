//! What both sides of the exchange share ([`Link`]): the receive tasks
//! to ask, the saved state, the limits of a message, and the standby
//! decision (who of the pair sends to gmond).

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot};

use super::message::HEADER;
use super::{Ask, Merged, STANDBY_AFTER, lock};
use crate::config::Settings;
use crate::engine::pairing::{Entry, LastRecord};
use crate::engine::saved::SavedState;

/// What both sides of the exchange share: the engines, the saved state,
/// the standby decision.
pub struct Link {
    engines: Vec<mpsc::Sender<Ask>>,
    /// Whether the receive tasks run (and answer asks): before, at the
    /// start-up pull, only the saved state is asked and merged into.
    engines_running: AtomicBool,
    pub(super) saved: Arc<SavedState>,
    pub(super) max_counters: usize,
    max_sources: usize,
    /// This one claims standby; the number it drew at start.
    standby: bool,
    drawn: u64,
    /// The peer's claim and number, from its last exchange.
    peer_claim: Mutex<Option<(bool, u64)>>,
    /// When an exchange with the peer last completed.
    last_exchange: Mutex<Option<Instant>>,
    /// Whether the receive tasks queue nothing for gmond (the standby,
    /// its peer up).
    pub paused: Arc<AtomicBool>,
    warned_tie: AtomicBool,
}

impl Link {
    pub fn new(
        settings: &Settings,
        saved: Arc<SavedState>,
        engines: Vec<mpsc::Sender<Ask>>,
    ) -> Link {
        Link {
            engines,
            engines_running: AtomicBool::new(false),
            saved,
            max_counters: settings.max_metrics_per_source,
            max_sources: settings.max_sources,
            standby: settings.peer_standby,
            drawn: draw(),
            peer_claim: Mutex::new(None),
            last_exchange: Mutex::new(None),
            paused: Arc::default(),
            warned_tie: AtomicBool::new(false),
        }
    }

    /// The receive tasks run: asks go to them from now on.
    pub fn engines_run(&self) {
        self.engines_running.store(true, Relaxed);
    }

    /// The most entries a message may carry: a peer naming more sources
    /// than this gateway may keep is not heard past them.
    pub(super) fn max_entries(&self) -> usize {
        self.max_sources
    }

    /// The engines to ask (none before they run).
    fn engines(&self) -> &[mpsc::Sender<Ask>] {
        if self.engines_running.load(Relaxed) {
            &self.engines
        } else {
            &[]
        }
    }

    pub(super) fn header(&self, mode: &str) -> String {
        format!(
            "{HEADER}\t{mode}\t{}\t{}\n",
            u8::from(self.standby),
            self.drawn
        )
    }

    /// Notes a completed exchange and the peer's standby claim; decides
    /// whether this one sends to gmond.
    pub(super) fn exchanged(&self, claim: (bool, u64)) {
        *lock(&self.peer_claim) = Some(claim);
        *lock(&self.last_exchange) = Some(Instant::now());
        self.decide(Instant::now());
    }

    /// Whether this one stands by now.
    pub fn decide(&self, now: Instant) {
        let Some((peer_standby, peer_drawn)) = *lock(&self.peer_claim) else {
            self.paused.store(false, Relaxed);
            return;
        };
        let i_stand_by = if self.standby != peer_standby {
            self.standby
        } else {
            if !self.warned_tie.swap(true, Relaxed) {
                tracing::warn!(
                    "peer_standby is {} on both gateways of the pair: the one that drew the larger number at its start stands by ({})",
                    self.standby,
                    if self.drawn > peer_drawn {
                        "this one"
                    } else {
                        "the peer"
                    }
                );
            }
            self.drawn > peer_drawn
        };
        let peer_up =
            lock(&self.last_exchange).is_some_and(|t| now.duration_since(t) < STANDBY_AFTER);
        let pause = i_stand_by && peer_up;
        if self.paused.swap(pause, Relaxed) != pause {
            if pause {
                tracing::info!("peer is up: standing by (nothing sent to gmond)");
            } else {
                tracing::warn!(
                    "peer silent for {} s: sending to gmond",
                    STANDBY_AFTER.as_secs()
                );
            }
        }
    }

    /// Every entry this gateway holds (engines and unclaimed), and for a
    /// pull its last records.
    ///
    /// A source both an engine and the saved state hold (the peer's entry
    /// went to the saved state while the engine was hearing the source for
    /// the first time) is the engine's: the saved entry is taken out and
    /// merged into the engine, so it is neither sent twice nor written to
    /// the state file over the engine's newer one.
    pub(super) async fn everything(&self, records: bool) -> (Vec<Entry>, Vec<LastRecord>) {
        let (mut entries, last) = self.ask_entries(false, records).await;
        let held: std::collections::HashSet<(std::net::IpAddr, String)> =
            entries.iter().map(|e| (e.ip, e.program.clone())).collect();
        let mut both = Vec::new();
        for ((ip, program), state) in self.saved.unclaimed_entries() {
            if held.contains(&(ip, program.clone())) {
                if let Some(state) = self.saved.take_unclaimed(ip, &program) {
                    both.push(Entry {
                        ip,
                        program,
                        state,
                        pfc: None,
                    });
                }
                continue;
            }
            entries.push(Entry {
                ip,
                program,
                state,
                pfc: None,
            });
        }
        if !both.is_empty() {
            let _ = self.take(both).await;
        }
        (entries, last)
    }

    pub(super) async fn ask_entries(
        &self,
        changed_only: bool,
        records: bool,
    ) -> (Vec<Entry>, Vec<LastRecord>) {
        let (mut entries, mut last) = (Vec::new(), Vec::new());
        for engine in self.engines() {
            let (reply, rx) = oneshot::channel();
            let ask = Ask::Entries {
                changed_only,
                records,
                reply,
            };
            if engine.send(ask).await.is_ok()
                && let Ok((e, r)) = rx.await
            {
                entries.extend(e);
                last.extend(r);
            }
        }
        (entries, last)
    }

    /// Merges the peer's entries: into the engine that has each source,
    /// else into the saved state (which keeps no g-stream totals: they
    /// come with the next exchange once a receive task has the source).
    /// The entries sent and merged, in order, and the claims refused
    /// ([`crate::engine::merge::take`]).
    pub(super) async fn take(&self, entries: Vec<Entry>) -> (Vec<(Entry, Entry)>, Claims) {
        let entries = Arc::new(entries);
        let mut merged: Vec<Option<Merged>> = vec![None; entries.len()];
        for engine in self.engines() {
            let (reply, rx) = oneshot::channel();
            let ask = Ask::Merge {
                entries: entries.clone(),
                reply,
            };
            if engine.send(ask).await.is_ok()
                && let Ok(m) = rx.await
            {
                for (slot, got) in merged.iter_mut().zip(m) {
                    if slot.is_none() {
                        *slot = got;
                    }
                }
            }
        }
        let mut claims = Claims::default();
        let now_unix = super::unix_now();
        let pairs = entries
            .iter()
            .zip(merged)
            .map(|(e, m)| {
                let (state, pfc, taken) = m.unwrap_or_else(|| {
                    let (state, taken) = self.saved.merge_unclaimed(
                        e.ip,
                        &e.program,
                        &e.state,
                        self.max_sources,
                        now_unix,
                    );
                    (state, None, taken)
                });
                claims.note(e, taken);
                let merged = Entry {
                    ip: e.ip,
                    program: e.program.clone(),
                    state,
                    pfc,
                };
                (e.clone(), merged)
            })
            .collect();
        (pairs, claims)
    }
}

/// The peer's claims refused in one exchange: how many, the first named.
#[derive(Debug, Default)]
pub struct Claims {
    pub refused: usize,
    pub why: String,
}

impl Claims {
    /// Adds another batch's.
    pub fn add(&mut self, other: Claims) {
        self.refused += other.refused;
        if self.why.is_empty() {
            self.why = other.why;
        }
    }

    fn note(&mut self, e: &Entry, taken: crate::engine::merge::Taken) {
        self.refused += taken.refused;
        if let (true, Some(why)) = (self.why.is_empty(), taken.why) {
            self.why = format!("{} {}: {why}", e.ip, e.program);
        }
    }
}

/// A number drawn at start (the standby tie-break): the clock's
/// nanoseconds and the pid, mixed.
fn draw() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    crate::fnv::hash(
        &[
            nanos.to_le_bytes(),
            u64::from(std::process::id()).to_le_bytes(),
        ]
        .concat(),
    )
}
