//! What both sides of the exchange share ([`Link`]): the receive tasks
//! to ask, the saved state, the limits of a message, the standby
//! decision (who of the pair sends to gmond) and whether this one is
//! deaf (hears no server its peer hears: its XML port hands gmetad over).

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot, watch};

use super::evidence::Evidence;
use super::message::{HEADER, Heard, Writer};
use super::{Ask, DEAF_AFTER, EVIDENCE_VALID, Merged, PEER_FRESH, STANDBY_AFTER, lock};
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
    /// its peer up and its packets seen in gmond).
    pub paused: Arc<AtomicBool>,
    warned_tie: AtomicBool,
    /// This gateway's own host in gmond (`xrd2ganglia@NAME`).
    pub(super) own_host: String,
    /// What this one hears: the `records` counter when last sampled, and
    /// when it last grew.
    hearing: Mutex<(u64, Option<Instant>)>,
    /// When it started: it cannot have heard a record before.
    started: Instant,
    /// What the peer said it hears, and when it said it.
    peer_heard: Mutex<Option<(Heard, Instant)>>,
    /// What gmond showed of the peer's own host, and when it was read.
    pub(super) evidence: Mutex<Option<(Instant, Evidence)>>,
    /// Whether this one is deaf: true while its peer, up, hears servers
    /// this one has not heard for [`DEAF_AFTER`]; the XML port refuses
    /// polls meanwhile ([`super::super::xml_port::Warmup::hand_over_when`]).
    deaf: watch::Sender<bool>,
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
            own_host: crate::daemon::self_metrics::own_host_name(&crate::ganglia::local_hostname()),
            hearing: Mutex::new((0, None)),
            started: Instant::now(),
            peer_heard: Mutex::new(None),
            evidence: Mutex::new(None),
            deaf: watch::channel(false).0,
        }
    }

    /// Whether this one is deaf, as it changes (for the XML port).
    pub fn deaf(&self) -> watch::Receiver<bool> {
        self.deaf.subscribe()
    }

    /// Takes note of the `records` counter now: whether a server's record
    /// was taken since the last sample.
    pub(super) fn sample(&self, records: u64, now: Instant) {
        let mut h = lock(&self.hearing);
        if records != h.0 {
            *h = (records, Some(now));
        }
    }

    /// When this one last took a server's record (to the last sample).
    fn newest(&self) -> Option<Instant> {
        lock(&self.hearing).1
    }

    /// What this one hears, for the peer (the heard frame).
    pub(super) fn heard(&self, now: Instant) -> Heard {
        Heard {
            newest: self.newest().map(|t| now.saturating_duration_since(t)),
            own_host: self.own_host.clone(),
        }
    }

    /// What the peer said it hears, taken when its frame was read (its
    /// ages count from then).
    pub(super) fn peer_said(&self, heard: Heard, now: Instant) {
        *lock(&self.peer_heard) = Some((heard, now));
    }

    /// The peer's own host in gmond, if it named one that is not this
    /// one's.
    pub(super) fn peer_host(&self) -> Option<String> {
        lock(&self.peer_heard)
            .as_ref()
            .map(|(h, _)| h.own_host.clone())
            .filter(|h| *h != self.own_host)
    }

    /// Whether this one is deaf now: its peer said within [`PEER_FRESH`]
    /// that it took a record more than [`DEAF_AFTER`] after this one's
    /// newest. A peer not heard from, or that hears no more than this
    /// one (both deaf), leaves it answering.
    pub(super) fn judge_hearing(&self, now: Instant) -> bool {
        let peer_newest = match &*lock(&self.peer_heard) {
            Some((h, said)) if now.saturating_duration_since(*said) < PEER_FRESH => {
                h.newest.and_then(|age| said.checked_sub(age))
            }
            _ => None,
        };
        let mine = self.newest().unwrap_or(self.started);
        let deaf = peer_newest.is_some_and(|p| p > mine + DEAF_AFTER);
        if *self.deaf.borrow() != deaf {
            if deaf {
                tracing::warn!(
                    "hearing no server the peer hears (none for {} ms, the peer's newest record is newer): refusing gmetad's polls so that it reads the peer",
                    self.newest().map_or_else(
                        || "ever".into(),
                        |t| now.saturating_duration_since(t).as_millis().to_string()
                    )
                );
            } else {
                tracing::info!(
                    "hearing the servers again (or the peer is not): answering gmetad's polls"
                );
            }
            self.deaf.send_replace(deaf);
        }
        deaf
    }

    /// What `status` shows of the pair.
    pub fn status(&self, now: Instant) -> crate::status::PairStatus {
        let ms =
            |t: Option<Instant>| t.map(|t| now.saturating_duration_since(t).as_millis() as u64);
        let peer = lock(&self.peer_heard).clone();
        crate::status::PairStatus {
            last_exchange_ms: ms(*lock(&self.last_exchange)),
            newest_record_ms: ms(self.newest()),
            peer_newest_record_ms: peer.as_ref().and_then(|(h, said)| {
                h.newest
                    .map(|age| (age + now.saturating_duration_since(*said)).as_millis() as u64)
            }),
            peer_own_host: peer.map(|(h, _)| h.own_host),
            deaf: *self.deaf.borrow(),
            standing_by: self.paused.load(Relaxed),
            evidence: lock(&self.evidence).as_ref().map(|(at, e)| {
                format!(
                    "{e} ({} ms ago)",
                    now.saturating_duration_since(*at).as_millis()
                )
            }),
            held: Vec::new(),
            holding: false,
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

    /// A message begun: its header, then what this one hears (the
    /// [`super::message::Kind::Heard`] frame).
    pub(super) fn writer(&self, mode: &str) -> Writer {
        let mut w = Writer::new(&format!(
            "{HEADER}\t{mode}\t{}\t{}",
            u8::from(self.standby),
            self.drawn
        ));
        w.heard(&self.heard(Instant::now()));
        w
    }

    /// Notes a completed exchange and the peer's standby claim; decides
    /// whether this one sends to gmond.
    pub(super) fn exchanged(&self, claim: (bool, u64)) {
        *lock(&self.peer_claim) = Some(claim);
        *lock(&self.last_exchange) = Some(Instant::now());
        self.saved.set_peer_reachable(true);
        self.decide(Instant::now());
    }

    /// An exchange this one asked failed: the peer is unreachable until
    /// one completes again (a restart seen after a gap is then held for
    /// `recover_from`: [`crate::engine::saved::SavedState::watch`]).
    pub(super) fn failed(&self) {
        self.saved.set_peer_reachable(false);
    }

    /// Whether the peer is reachable now: its last exchange completed,
    /// within [`STANDBY_AFTER`] (pings go every second).
    pub fn reachable(&self, now: Instant) -> bool {
        self.saved.peer_reachable() && self.peer_up(now)
    }

    /// Whether this one would stand by (by the claims), its peer up: then
    /// gmond is read for evidence that the peer's packets arrive.
    pub(super) fn would_stand_by(&self, now: Instant) -> bool {
        let claim = *lock(&self.peer_claim);
        claim.is_some_and(|c| self.stands_by(c)) && self.peer_up(now)
    }

    fn peer_up(&self, now: Instant) -> bool {
        lock(&self.last_exchange).is_some_and(|t| now.saturating_duration_since(t) < STANDBY_AFTER)
    }

    /// Whether this one stands by now: it would by the claims, its peer
    /// has completed an exchange within [`STANDBY_AFTER`], and gmond shows
    /// the peer's own host fresh ([`Evidence`], read within
    /// [`EVIDENCE_VALID`]; where gmond's XML cannot be read, the peer's
    /// word is taken, as the log and `status` say).
    pub fn decide(&self, now: Instant) {
        let Some(claim) = *lock(&self.peer_claim) else {
            self.paused.store(false, Relaxed);
            return;
        };
        let i_stand_by = self.stands_by(claim);
        let peer_up = self.peer_up(now);
        let evidence = lock(&self.evidence).clone();
        let seen = match &evidence {
            Some((at, e)) if now.saturating_duration_since(*at) < EVIDENCE_VALID => e.allows(),
            _ => false,
        };
        let pause = i_stand_by && peer_up && seen;
        if self.paused.swap(pause, Relaxed) != pause {
            if pause {
                tracing::info!(
                    "peer is up and gmond shows its packets ({}): standing by (nothing sent to gmond)",
                    evidence.map(|(_, e)| e.to_string()).unwrap_or_default()
                );
            } else if !peer_up {
                tracing::warn!(
                    "peer silent for {} s: sending to gmond",
                    STANDBY_AFTER.as_secs()
                );
            } else if i_stand_by && !seen {
                tracing::warn!(
                    "no evidence in gmond that the peer's packets arrive ({}): sending to gmond",
                    evidence.map_or_else(|| "none read".into(), |(_, e)| e.to_string())
                );
            }
        }
    }

    /// Whether this one stands by, by the claims alone.
    fn stands_by(&self, (peer_standby, peer_drawn): (bool, u64)) -> bool {
        if self.standby != peer_standby {
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
