//! The counter state in memory between the state file and the engines:
//! what the file held and no source has claimed yet (each source claims
//! its own entry when it is first heard), what each receive task handed in
//! last (for the next save), and sources evicted while still worth
//! continuing (parked, bounded). The format and its checks are
//! [`super`]'s.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::engine::merge::{Heard, Taken};

use super::{Limits, SavedSource, Skipped, read_file, write_entry, write_header};

/// What was read and not claimed yet, and what the engines handed in last.
#[derive(Default)]
pub struct SavedState {
    unclaimed: Mutex<HashMap<(IpAddr, String), SavedSource>>,
    parts: Mutex<Vec<Vec<u8>>>,
    /// When the last source was claimed (the XML port's warm-up).
    last_claim: Mutex<Option<Instant>>,
    /// Unclaimed sources a peer raised since the start: once each
    /// ([`crate::engine::merge::take`]).
    raised: Mutex<HashSet<(IpAddr, String)>>,
    /// The last values published, by host (`recover_from`).
    floors: Mutex<HashMap<FloorHost, Arc<Floors>>>,
    /// The hosts of `floors` not heard from since the start (the XML
    /// port's warm-up waits for them as for unclaimed sources).
    floors_unheard: Mutex<HashSet<FloorHost>>,
    /// Hosts whose server restarted after a gap in what this gateway
    /// heard, its peer unreachable (`recover_from` read again for them):
    /// [`Watched`].
    watched: Mutex<HashMap<FloorHost, Watched>>,
    /// Told when a host is watched or a hold ends (the daemon's
    /// `recover_from` task waits on it).
    pub watch_changed: tokio::sync::Notify,
    /// The peer completed its last exchange (the daemon says so): a
    /// restart after a gap is then made good by the exchange, no hold.
    peer_reachable: AtomicBool,
}

/// A host watched ([`SavedState::watch`]): its counters are held (not
/// published) until the first answer, and floored by each answer while
/// the peer stays unreachable.
#[derive(Debug)]
struct Watched {
    /// When the hold began.
    since: Instant,
    /// The highest values read for it so far (None: none read).
    floors: Option<Arc<Floors>>,
    /// Answers given (0: the hold waits for the first).
    answers: u64,
    /// Its source applied the first answer: it publishes again.
    applied: bool,
    /// The peer is back (or nothing is read any more): the source stops
    /// watching at its next record.
    ended: bool,
}

/// What a watched source learns at a record ([`SavedState::watch_news`]).
#[derive(Debug, Default)]
pub struct WatchNews {
    /// Floors to apply now (new since its last look).
    pub floors: Option<Arc<Floors>>,
    /// Answers given so far (the source passes it back next time).
    pub answers: u64,
    /// Still waiting for the first answer: keep holding.
    pub holding: bool,
    /// Watching is over: forget it.
    pub ended: bool,
}

/// A host's last values published, by metric name key: what none of its
/// counters is sent below ([`crate::engine::series::MetricState::floor`]).
pub type Floors = HashMap<u64, u64>;

/// A host of `recover_from`'s document: its server's address and NAME (two
/// servers behind one address are two hosts).
pub type FloorHost = (IpAddr, String);

impl SavedState {
    /// The state a file's text holds (an empty text is an empty state),
    /// checked against the clock now; lines that fail the checks are left
    /// out ([`read`](Self::read) says which).
    pub fn from_text(text: &str) -> Result<SavedState, String> {
        Self::read(text, Limits::at(SystemTime::now())).map(|(state, _)| state)
    }

    /// The state a file's text holds and the lines skipped; an error only
    /// for a text that is not a state file at all (its first line).
    pub fn read(text: &str, limits: Limits) -> Result<(SavedState, Skipped), String> {
        let read = read_file(text, limits)?;
        let sources = read
            .entries
            .into_iter()
            .map(|e| ((e.ip, e.program), e.source))
            .collect();
        let state = SavedState {
            unclaimed: Mutex::new(sources),
            ..SavedState::default()
        };
        Ok((state, read.skipped))
    }

    /// Sources read and not claimed yet.
    pub fn unclaimed(&self) -> usize {
        lock(&self.unclaimed).len()
    }

    /// What the XML port's warm-up waits for: sources read and not
    /// claimed yet, and hosts recovered ([`set_floors`](Self::set_floors))
    /// not heard from yet.
    pub fn awaited(&self) -> usize {
        self.unclaimed() + lock(&self.floors_unheard).len()
    }

    /// The last values published of each host, read at start
    /// (`recover_from`): from now on, what a source of that host first
    /// sends is never below them.
    pub fn set_floors(&self, floors: HashMap<FloorHost, Floors>) {
        *lock(&self.floors_unheard) = floors.keys().cloned().collect();
        *lock(&self.floors) = floors
            .into_iter()
            .map(|(ip, f)| (ip, Arc::new(f)))
            .collect();
    }

    /// The floors of a source of host `name` at `ip` now heard from for
    /// the first time.
    pub fn floors_of(&self, ip: IpAddr, name: &str, now: Instant) -> Option<Arc<Floors>> {
        let key = (ip, name.to_string());
        let floors = lock(&self.floors).get(&key).cloned()?;
        if lock(&self.floors_unheard).remove(&key) {
            *lock(&self.last_claim) = Some(now);
        }
        Some(floors)
    }

    /// The peer completed its last exchange (true) or failed it (false).
    pub fn set_peer_reachable(&self, reachable: bool) {
        self.peer_reachable.store(reachable, Relaxed);
    }

    /// Whether the peer answered its last exchange.
    pub fn peer_reachable(&self) -> bool {
        self.peer_reachable.load(Relaxed)
    }

    /// A source of host `name` at `ip` restarted after a gap in what this
    /// gateway heard, its peer unreachable: its counters are held until
    /// `recover_from` is read for it ([`give`](Self::give)). False (no
    /// hold) when `bound` hosts are watched already.
    pub fn watch(&self, ip: IpAddr, name: &str, now: Instant, bound: usize) -> bool {
        let mut w = lock(&self.watched);
        let key = (ip, name.to_string());
        if w.len() >= bound && !w.contains_key(&key) {
            return false;
        }
        let prior = w.insert(
            key,
            Watched {
                since: now,
                floors: None,
                answers: 0,
                applied: false,
                ended: false,
            },
        );
        // A floor read for an earlier restart still holds (floors only
        // raise); the new hold waits for a new answer all the same.
        if let Some(Watched {
            floors: Some(f), ..
        }) = prior
            && let Some(w) = w.get_mut(&(ip, name.to_string()))
        {
            w.floors = Some(f);
        }
        drop(w);
        self.watch_changed.notify_one();
        true
    }

    /// What a watched source of host `name` at `ip` learns at a record,
    /// having seen `seen` answers: new floors, whether it still holds,
    /// whether watching is over (the entry then goes).
    pub fn watch_news(&self, ip: IpAddr, name: &str, seen: u64) -> WatchNews {
        let mut map = lock(&self.watched);
        let key = (ip, name.to_string());
        let Some(w) = map.get_mut(&key) else {
            return WatchNews {
                ended: true,
                ..WatchNews::default()
            };
        };
        let news = WatchNews {
            floors: (w.answers != seen).then(|| w.floors.clone()).flatten(),
            answers: w.answers,
            holding: w.answers == 0 && !w.ended,
            ended: w.ended,
        };
        let was_pending = !w.applied;
        if !news.holding {
            w.applied = true;
        }
        if w.ended {
            map.remove(&key);
        }
        drop(map);
        if was_pending && !news.holding {
            self.watch_changed.notify_one();
        }
        news
    }

    /// A watched source is gone (evicted): its hold with it.
    pub fn unwatch(&self, ip: IpAddr, name: &str) {
        if lock(&self.watched)
            .remove(&(ip, name.to_string()))
            .is_some()
        {
            self.watch_changed.notify_one();
        }
    }

    /// The hosts watched (for the daemon to read `recover_from` for).
    pub fn watched(&self) -> Vec<FloorHost> {
        lock(&self.watched)
            .iter()
            .filter(|(_, w)| !w.ended)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Whether a watched host waits for its first answer.
    pub fn unanswered(&self) -> bool {
        lock(&self.watched)
            .values()
            .any(|w| w.answers == 0 && !w.ended)
    }

    /// Whether a hold keeps a host's counters from being published now
    /// (the XML port refuses meanwhile): one waits for its first answer,
    /// or has it and its source did not report since; for at most `max`
    /// (a server that never reports again holds nothing for long).
    pub fn holding(&self, now: Instant, max: Duration) -> bool {
        lock(&self.watched)
            .values()
            .any(|w| !w.applied && now.saturating_duration_since(w.since) < max)
    }

    /// The answer to a read of `recover_from`: the values read of each
    /// watched host (a host not in `read` is released with its own
    /// offsets), all given at once.
    pub fn give(&self, read: &HashMap<FloorHost, Floors>) {
        for (key, w) in lock(&self.watched).iter_mut() {
            if let Some(f) = read.get(key) {
                let mut merged = w.floors.as_deref().cloned().unwrap_or_default();
                for (&k, &v) in f {
                    let e = merged.entry(k).or_insert(0);
                    *e = (*e).max(v);
                }
                w.floors = Some(Arc::new(merged));
            }
            w.answers += 1;
        }
    }

    /// Watching ends (the peer is back: the exchange makes the two agree):
    /// every hold is released, each source forgets it at its next record.
    pub fn end_watching(&self) {
        let mut map = lock(&self.watched);
        // Those that hold nothing any more go now; the others when their
        // source next reports (it learns the hold is over).
        map.retain(|_, w| !w.applied);
        for w in map.values_mut() {
            w.ended = true;
        }
    }

    /// The saved state of a source now heard from for the first time, at `now`.
    pub fn claim(&self, ip: IpAddr, program: &str, now: Instant) -> Option<SavedSource> {
        let mut map = lock(&self.unclaimed);
        if map.is_empty() {
            return None;
        }
        let key = (ip, program.to_string());
        let claimed = map.remove(&key);
        if claimed.is_some() {
            lock(&self.raised).remove(&key);
            *lock(&self.last_claim) = Some(now);
        }
        claimed
    }

    /// When a source was last claimed.
    pub fn last_claim(&self) -> Option<Instant> {
        *lock(&self.last_claim)
    }

    /// Merges a peer's entry of a source no engine has claimed, where it
    /// agrees with what this gateway holds of it
    /// ([`crate::engine::merge::take`]: no report heard since the start;
    /// one raise per source), at `now_unix`; returns the merged entry and
    /// what came of the peer's claims. A source new to it is kept only
    /// while fewer than `bound` wait (a peer cannot grow it, nor the state
    /// file, without end).
    pub fn merge_unclaimed(
        &self,
        ip: IpAddr,
        program: &str,
        peer: &SavedSource,
        bound: usize,
        now_unix: u64,
    ) -> (SavedSource, Taken) {
        let mut map = lock(&self.unclaimed);
        let key = (ip, program.to_string());
        if map.len() >= bound && !map.contains_key(&key) {
            return (peer.clone(), Taken::default());
        }
        let mut raised = lock(&self.raised);
        let heard = Heard {
            now_unix,
            reported_unix: None,
            may_raise: !raised.contains(&key),
        };
        let mine = map.entry(key.clone()).or_default();
        let taken = crate::engine::merge::take(mine, peer, &heard);
        if taken.raised {
            raised.insert(key);
        }
        (mine.clone(), taken)
    }

    /// Takes out the unclaimed entry of a source an engine holds already
    /// (a peer's entry merged here while the engine first heard the
    /// source), not counted as a claim.
    pub fn take_unclaimed(&self, ip: IpAddr, program: &str) -> Option<SavedSource> {
        let key = (ip, program.to_string());
        let taken = lock(&self.unclaimed).remove(&key);
        if taken.is_some() {
            lock(&self.raised).remove(&key);
        }
        taken
    }

    /// Every unclaimed entry (for a peer).
    pub fn unclaimed_entries(&self) -> Vec<((IpAddr, String), SavedSource)> {
        lock(&self.unclaimed)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Keeps the state of a source the engine evicted (`max_sources`),
    /// with the unclaimed ones: it is claimed as they are if the source
    /// reports again, and saved with them meanwhile. Kept only while fewer
    /// than `bound` sources wait (the evictions of a flood must not grow
    /// it without end); false when not kept.
    pub fn park(&self, ip: IpAddr, program: &str, source: SavedSource, bound: usize) -> bool {
        let mut map = lock(&self.unclaimed);
        let key = (ip, program.to_string());
        if map.len() >= bound && !map.contains_key(&key) {
            return false;
        }
        map.insert(key, source);
        true
    }

    /// Engine `part` hands in its sources' state (entry lines,
    /// [`crate::engine::Engine::hand_in_state`]).
    pub fn hand_in(&self, part: usize, lines: Vec<u8>) {
        let mut parts = lock(&self.parts);
        if part >= parts.len() {
            parts.resize(part + 1, Vec::new());
        }
        parts[part] = lines;
    }

    /// The file's text: what is unclaimed, then what was handed in. A
    /// source evicted since its engine handed its part in waits with the
    /// unclaimed ones, newer than its entry in that part: the part's entry
    /// is left out (each source once in the file).
    pub fn to_text(&self) -> String {
        let mut text = Vec::new();
        write_header(&mut text);
        let mut waiting = HashSet::new();
        for ((ip, program), saved) in lock(&self.unclaimed).iter() {
            write_entry(
                &mut text,
                *ip,
                program,
                saved.started,
                saved.counters.iter().copied(),
                None,
            );
            waiting.insert((*ip, program.clone()));
        }
        for part in lock(&self.parts).iter() {
            if waiting.is_empty() {
                text.extend_from_slice(part);
                continue;
            }
            for line in part.split_inclusive(|&b| b == b'\n') {
                // Only who the entry is, its counters passed over.
                #[derive(serde::Deserialize)]
                struct Who<'a> {
                    ip: IpAddr,
                    #[serde(borrow)]
                    program: std::borrow::Cow<'a, str>,
                }
                let who = serde_json::from_slice::<Who>(line).ok();
                if !who.is_some_and(|w| waiting.contains(&(w.ip, w.program.into_owned()))) {
                    text.extend_from_slice(line);
                }
            }
        }
        // What was written here and handed in is JSON: UTF-8.
        String::from_utf8(text)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

/// A panic elsewhere while holding it leaves consistent data.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
