//! Two gateways of a pair exchange their counter state (`peer`,
//! `peer_listen`), so both publish the same value for every metric of
//! every server whatever either missed. The merge rule and why the two
//! diverge without it: [`crate::engine::merge`].
//!
//! **What is exchanged.** Each source's entry, as the state file writes it
//! (`S` and `C` lines, read with the state file's own line checks: one
//! definition), each XCache's g-stream totals (`P` lines: the directive
//! `xrootd.mongstream ... send` takes one destination, a second `send`
//! replaces the first (`XrdXrootdConfig.cc`, `xmongs`), so only one
//! gateway of a pair hears them), and for a starting peer each source's
//! last record.
//! Text over TCP, one exchange per connection: the asking side sends a
//! header, its entries and a `.` line; the answering side merges them and
//! answers with a header, its entries that differ from the ones it was
//! sent (so both hold the merged entry after one round trip), and for a
//! full exchange every entry the asker did not name, then a `.` line.
//!
//! ```text
//! xrd2ganglia-peer 1 <pull|push|full> <standby 0|1> <number drawn at start>
//! S <ip> <program> <tos> <pid>
//! C <key> <last reading> <offset>
//! P <ip> <program> <stod> <files> <bytes hit> <bytes missed> <bytes bypassed>
//! R <ip> <age ms> <length>      (answers to a pull: the record's bytes follow)
//! .
//! ```
//!
//! **When.** (1) At start, before the XML port listens and before any
//! datagram is read (they wait in the socket's buffer, [`DEADLINE`] at
//! most): a pull of the peer's every entry and last record, merged into
//! the state file's; the records are fed through an engine of their own
//! into the XML table (at their age: a host's TN is what the peer's was),
//! so the first document is what the peer's is and the port listens at
//! once ([`super::xml_port::Warmup`]; a peer that had heard no one, as
//! when both start together, leaves the port to wait for the state file's
//! sources as without a peer). The peer's exchanges are answered from the
//! state file meanwhile, so two gateways that start together do not wait
//! on each other. (2) Every second, the entries whose
//! run or offsets changed (a source new to an engine, a restart, a reset
//! or a wrap: [`Engine::peer_entries`](crate::engine::Engine::peer_entries)),
//! or an empty push every [`PING_EVERY`] to tell the peer this one is up.
//! (3) Every [`FULL_EVERY`], everything (anti-entropy: what a failed push
//! or a partition lost). The peer's entries are merged into live sources
//! by the receive task that owns each source, between two datagrams (as
//! status requests are answered), so the datagram path takes no lock; a
//! source no engine has is merged into the saved state, and claimed from
//! there when first heard.
//!
//! **Bounded.** A whole exchange has [`DEADLINE`]; a message at most
//! `max_sources` x [`BYTES_PER_SOURCE`]; one exchange at a time per
//! address; connections from outside `peer_allow` (by default what
//! `peer` resolves to at start) are closed. Every entry is checked on its
//! own, as the state file's are ([`saved::read_entries`], then
//! [`merge::check`]): a bad one is refused, counted and named, the others
//! are taken; a header, record or end that cannot be read ends the
//! exchange. Sources no engine has wait at most `max_sources`. Whatever
//! the peer sends, offsets only grow (the rule is a max), so it cannot
//! make a counter go down, nor stop the gateway: it costs a counted,
//! rate-limited log line. A failed push is not retried: what it carried
//! goes with the next full exchange.
//!
//! **One gmond, two gateways** (`send = true` on both): one sends, the
//! other stands by (`peer_standby`). The standby hears, counts, merges and
//! answers its XML port as the active one does, and queues nothing for
//! gmond while its peer has completed an exchange within [`STANDBY_AFTER`]
//! (pushes go every [`PING_EVERY`], so a live peer is seen as such
//! whatever the traffic); past that it sends, and it stops again with the
//! next exchange. With both or neither claiming standby, each warns and
//! the one that drew the larger number at its start stands by.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ipnet::IpNet;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::Settings;
use crate::engine::Engine;
use crate::engine::merge;
use crate::engine::pairing::{Entry, LastRecord};
use crate::engine::saved::{SavedSource, SavedState};
use crate::events::{Counters, Events};
use crate::gstream::PfcTotals;
use message::{HEADER, message, parse, read_message};

mod message;

/// A whole exchange (connect, send, merge, answer) takes at most this.
pub const DEADLINE: Duration = Duration::from_secs(5);
/// Changed entries go out this often.
pub const PUSH_EVERY: Duration = Duration::from_secs(1);
/// With nothing changed, an empty push this often (the peer is up).
pub const PING_EVERY: Duration = Duration::from_secs(2);
/// Everything, this often.
pub const FULL_EVERY: Duration = Duration::from_secs(30);
/// The standby sends to gmond once its peer has completed no exchange
/// for this long (five missed pushes).
pub const STANDBY_AFTER: Duration = Duration::from_secs(10);
/// What one source may take in a message, with `max_sources` its bound.
pub use crate::engine::saved::BYTES_PER_SOURCE;
/// Requests waiting for a receive task.
pub const ASK_QUEUE: usize = 4;

/// What the peer task asks a receive task, answered between two datagrams.
pub enum Ask {
    /// Its entries (every one, or the changed ones) and, for a pull, its
    /// sources' last records.
    Entries {
        changed_only: bool,
        records: bool,
        reply: oneshot::Sender<(Vec<Entry>, Vec<LastRecord>)>,
    },
    /// Merge these into its sources: per entry, the merged one if it has
    /// the source.
    Merge {
        entries: Arc<Vec<Entry>>,
        reply: oneshot::Sender<Vec<Option<Merged>>>,
    },
}

/// A source's entry merged: its state and its g-stream totals.
type Merged = (SavedSource, Option<PfcTotals>);

/// Answers an ask from the engine (the receive task calls it).
pub(super) fn answer(engine: &mut Engine, ask: Ask) {
    match ask {
        Ask::Entries {
            changed_only,
            records,
            reply,
        } => {
            let mut entries = Vec::new();
            engine.peer_entries(changed_only, &mut entries);
            let mut last = Vec::new();
            if records {
                engine.last_records(Instant::now(), &mut last);
            }
            let _ = reply.send((entries, last));
        }
        Ask::Merge { entries, reply } => {
            let now = Instant::now();
            let merged = entries.iter().map(|e| engine.merge_peer(e, now)).collect();
            let _ = reply.send(merged);
        }
    }
}

/// What both sides of the exchange share: the engines, the saved state,
/// the standby decision.
pub struct Link {
    engines: Vec<mpsc::Sender<Ask>>,
    /// Whether the receive tasks run (and answer asks): before, at the
    /// start-up pull, only the saved state is asked and merged into.
    engines_running: AtomicBool,
    saved: Arc<SavedState>,
    max_bytes: usize,
    max_counters: usize,
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
            max_bytes: settings
                .max_sources
                .saturating_mul(BYTES_PER_SOURCE)
                .max(1 << 20),
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

    /// The engines to ask (none before they run).
    fn engines(&self) -> &[mpsc::Sender<Ask>] {
        if self.engines_running.load(Relaxed) {
            &self.engines
        } else {
            &[]
        }
    }

    fn header(&self, mode: &str) -> String {
        format!(
            "{HEADER}\t{mode}\t{}\t{}\n",
            u8::from(self.standby),
            self.drawn
        )
    }

    /// Notes a completed exchange and the peer's standby claim; decides
    /// whether this one sends to gmond.
    fn exchanged(&self, claim: (bool, u64)) {
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
    async fn everything(&self, records: bool) -> (Vec<Entry>, Vec<LastRecord>) {
        let (mut entries, last) = self.ask_entries(false, records).await;
        for ((ip, program), state) in self.saved.unclaimed_entries() {
            entries.push(Entry {
                ip,
                program,
                state,
                pfc: None,
            });
        }
        (entries, last)
    }

    async fn ask_entries(
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
    /// The entries sent and merged, in order.
    async fn take(&self, entries: Vec<Entry>) -> Vec<(Entry, Entry)> {
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
        entries
            .iter()
            .zip(merged)
            .map(|(e, m)| {
                let (state, pfc) = m.unwrap_or_else(|| {
                    let state =
                        self.saved
                            .merge_unclaimed(e.ip, &e.program, &e.state, self.max_sources);
                    (state, None)
                });
                let merged = Entry {
                    ip: e.ip,
                    program: e.program.clone(),
                    state,
                    pfc,
                };
                (e.clone(), merged)
            })
            .collect()
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// One exchange as the asking side: sends `entries` in `mode`, merges the
/// answer. The peer's records (a pull) are returned.
async fn ask(
    link: &Link,
    peer: &str,
    mode: &str,
    entries: &[Entry],
    events: &mut Events<'_>,
) -> Result<Vec<LastRecord>, (SocketAddr, String)> {
    let unknown = SocketAddr::from(([0, 0, 0, 0], 0));
    let exchange = async {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host(peer)
            .await
            .map_err(|e| (unknown, format!("cannot resolve {peer}: {e}")))?
            .collect();
        let mut last_error = (unknown, format!("{peer} resolves to nothing"));
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(mut s) => {
                    let out = message(&link.header(mode), entries, &[]);
                    s.write_all(&out).await.map_err(|e| (addr, e.to_string()))?;
                    let bytes = read_message(&mut s, link.max_bytes)
                        .await
                        .map_err(|e| (addr, e.to_string()))?;
                    return Ok((addr, bytes));
                }
                Err(e) => last_error = (addr, format!("connect: {e}")),
            }
        }
        Err(last_error)
    };
    let (addr, bytes) = tokio::time::timeout(DEADLINE, exchange)
        .await
        .map_err(|_| {
            (
                unknown,
                format!("no answer within {} s", DEADLINE.as_secs()),
            )
        })??;
    let msg = parse(&bytes, link.max_counters, unix_now()).map_err(|e| (addr, e))?;
    if msg.mode != "answer" {
        return Err((addr, format!("answered with {:?}", msg.mode)));
    }
    let records = msg.records;
    link.take(msg.entries).await;
    link.exchanged(msg.claim);
    events
        .at(Instant::now())
        .peer_exchanged(addr, msg.refused.lines, &msg.refused.text);
    Ok(records)
}

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
    table: &super::table::HostTable,
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

/// Who may exchange: `peer_allow`, else what `peer` resolves to now.
async fn allowed(settings: &Settings) -> Vec<IpNet> {
    if !settings.peer_allow.is_empty() {
        return settings.peer_allow.clone();
    }
    let Some(peer) = settings.peer.as_deref() else {
        return Vec::new();
    };
    match tokio::net::lookup_host(peer).await {
        Ok(addrs) => addrs.map(|a| IpNet::from(a.ip().to_canonical())).collect(),
        Err(e) => {
            tracing::warn!(
                "peer {peer}: cannot resolve ({e}): no one may exchange until peer_allow says who"
            );
            Vec::new()
        }
    }
}

/// Answers exchanges on `listener` until `stop`.
pub async fn serve(
    listener: std::net::TcpListener,
    link: Arc<Link>,
    settings: Arc<Settings>,
    counters: Arc<Counters>,
    mut stop: watch::Receiver<bool>,
) {
    let local = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let Ok(listener) = TcpListener::from_std(listener) else {
        return;
    };
    let allow = allowed(&settings).await;
    let busy: Arc<Mutex<HashSet<IpAddr>>> = Arc::default();
    let mut events = Events::new(&counters, settings.log_interval);
    loop {
        let (stream, from) = tokio::select! {
            _ = stop.changed() => break,
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let ip = from.ip().to_canonical();
        if !allow.iter().any(|n| n.contains(&ip)) {
            events
                .at(Instant::now())
                .peer_denied(local, from, "not in peer_allow");
            continue;
        }
        if !lock(&busy).insert(ip) {
            events.at(Instant::now()).peer_denied(
                local,
                from,
                "an exchange with that address is under way",
            );
            continue;
        }
        let (link, counters, busy, log_interval) = (
            link.clone(),
            counters.clone(),
            busy.clone(),
            settings.log_interval,
        );
        tokio::spawn(async move {
            let mut events = Events::new(&counters, log_interval);
            let done = tokio::time::timeout(DEADLINE, answer_one(&link, stream, &mut events)).await;
            let failed = match done {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some(format!("not done within {} s", DEADLINE.as_secs())),
            };
            if let Some(e) = failed {
                events.at(Instant::now()).peer_failed(from, &e);
            }
            lock(&busy).remove(&ip);
        });
    }
}

/// One exchange as the answering side.
async fn answer_one(
    link: &Link,
    mut stream: TcpStream,
    events: &mut Events<'_>,
) -> Result<(), String> {
    let from = stream.peer_addr().map_err(|e| e.to_string())?;
    let bytes = read_message(&mut stream, link.max_bytes)
        .await
        .map_err(|e| e.to_string())?;
    let msg = parse(&bytes, link.max_counters, unix_now())?;
    let (entries, records) = match msg.mode.as_str() {
        "pull" => link.everything(true).await,
        "push" | "full" => {
            let named: HashSet<(IpAddr, String)> = msg
                .entries
                .iter()
                .map(|e| (e.ip, e.program.clone()))
                .collect();
            let merged = link.take(msg.entries).await;
            let mut answer: Vec<Entry> = merged
                .into_iter()
                .filter(|(sent, mine)| {
                    !merge::agrees(&sent.state, &mine.state) || sent.pfc != mine.pfc
                })
                .map(|(_, mine)| mine)
                .collect();
            if msg.mode == "full" {
                let (all, _) = link.everything(false).await;
                answer.extend(
                    all.into_iter()
                        .filter(|e| !named.contains(&(e.ip, e.program.clone()))),
                );
            }
            (answer, Vec::new())
        }
        other => return Err(format!("asked with {other:?}")),
    };
    let out = message(&link.header("answer"), &entries, &records);
    stream.write_all(&out).await.map_err(|e| e.to_string())?;
    let _ = stream.shutdown().await;
    link.exchanged(msg.claim);
    events
        .at(Instant::now())
        .peer_exchanged(from, msg.refused.lines, &msg.refused.text);
    Ok(())
}

/// Pushes changed entries every [`PUSH_EVERY`] (an empty push every
/// [`PING_EVERY`]), everything every [`FULL_EVERY`], until `stop`.
pub async fn keep_in_step(
    link: Arc<Link>,
    settings: Arc<Settings>,
    counters: Arc<Counters>,
    mut stop: watch::Receiver<bool>,
) {
    let Some(peer) = settings.peer.clone() else {
        return;
    };
    let mut events = Events::new(&counters, settings.log_interval);
    let mut tick = tokio::time::interval(PUSH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first exchange is a full one: the peer learns what this one's
    // state file held (the start-up pull only went the other way).
    let mut last_push = Instant::now();
    let mut last_full: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = tick.tick() => {}
        }
        let now = Instant::now();
        link.decide(now);
        let full = last_full.is_none_or(|t| now.duration_since(t) >= FULL_EVERY);
        let round = async {
            let (entries, _) = if full {
                link.everything(false).await
            } else {
                link.ask_entries(true, false).await
            };
            if !full && entries.is_empty() && now.duration_since(last_push) < PING_EVERY {
                return false;
            }
            let mode = if full { "full" } else { "push" };
            match ask(&link, &peer, mode, &entries, &mut events).await {
                Ok(_) => {}
                // Tried again at the next tick; what changed meanwhile goes
                // with the next full exchange.
                Err((addr, e)) => events.at(Instant::now()).peer_failed(addr, &e),
            }
            true
        };
        // A stop never waits for an exchange (nor for the receive tasks
        // it asks, which are stopping too).
        let exchanged = tokio::select! {
            _ = stop.changed() => break,
            exchanged = round => exchanged,
        };
        if exchanged {
            last_push = now;
            if full {
                last_full = Some(now);
            }
        }
    }
}
