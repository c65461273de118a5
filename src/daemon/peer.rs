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
//! The `H` line (both ways, every exchange: `message::Heard`) says what
//! its sender hears; a gateway that does not know it refuses it as one
//! bad line and takes the rest.
//!
//! ```text
//! xrd2ganglia-peer 1 <pull|push|full> <standby 0|1> <number drawn at start>
//! H <ms since its newest server record, or -> <its own host in gmond>
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
//! on each other. (2) Every [`PUSH_EVERY`], the entries whose
//! run or offsets changed (a source new to an engine, a restart, a reset
//! or a wrap: [`Engine::peer_entries`](crate::engine::Engine::peer_entries)),
//! or an empty push every [`PING_EVERY`] to tell the peer this one is up
//! and what it hears. (3) Every [`FULL_EVERY`], everything (anti-entropy).
//! (4) After a failed exchange (the link cut, the peer down), a probe (an
//! empty push within [`PROBE_DEADLINE`]) every tick, and as soon as one is
//! answered a full exchange: the two agree within a second of the link
//! being back, whatever the failed pushes carried. The peer's entries are merged into live sources
//! by the receive task that owns each source, between two datagrams (as
//! status requests are answered), so the datagram path takes no lock; a
//! source no engine has is merged into the saved state, and claimed from
//! there when first heard.
//!
//! **Bounded.** A whole exchange has [`DEADLINE`]; a message at most
//! `max_sources` x [`BYTES_PER_SOURCE`]; one exchange at a time per
//! address; connections from outside `peer_allow` (by default what
//! `peer` resolves to at start) are closed. Every entry is checked on its
//! own, as the state file's are ([`crate::engine::saved::read_entries`], then
//! [`crate::engine::merge::check`]): a bad one is refused, counted and named, the others
//! are taken; a header, record or end that cannot be read ends the
//! exchange. Sources no engine has wait at most `max_sources`. Whatever
//! the peer sends, offsets only grow (the rule is a max), so it cannot
//! make a counter go down, nor stop the gateway: it costs a counted,
//! rate-limited log line. What a failed push carried goes with the full
//! exchange that follows the first answered probe.
//!
//! **A deaf gateway** hands gmetad over: one whose peer, heard from within
//! [`PEER_FRESH`], took a server's record more than [`DEAF_AFTER`] after
//! this one's newest (sampled every [`HEARD_EVERY`] from the `records`
//! counter: nothing on the datagram path) stops listening on its XML port
//! ([`super::xml_port::Warmup::hand_over_when`]): gmetad's connect is
//! refused and it walks its `data_source` list to the peer. It listens
//! again as soon as it takes a record; two deaf ones both answer.
//!
//! **One gmond, two gateways** (`send = true` on both): one sends, the
//! other stands by (`peer_standby`). The standby hears, counts, merges and
//! answers its XML port as the active one does, and queues nothing for
//! gmond while its peer has completed an exchange within [`STANDBY_AFTER`]
//! (pings go every [`PING_EVERY`], so a live peer is seen as such
//! whatever the traffic) and gmond's XML shows the peer's own host fresh
//! (`peer/evidence.rs`: not on the peer's word alone; the active one
//! sends its host's heartbeat every [`ALIVE_EVERY`]); otherwise it sends.
//! With both or neither claiming standby, each warns and the one that
//! drew the larger number at its start stands by.
//!
//! **Where.** Here: the timings and what the peer task asks a receive
//! task ([`Ask`], [`answer`]). `peer/link.rs`: what both sides share and
//! the standby decision ([`Link`]); `peer/asking.rs`: an exchange asked,
//! the pushes ([`keep_in_step`]); `peer/answering.rs`: the peer port and
//! an exchange answered ([`serve`]); `peer/start.rs`: the start-up pull
//! and the XML table filled from it ([`pull`], [`fill_table`]);
//! `peer/message.rs`: the messages, written and read; `peer/evidence.rs`:
//! gmond's XML read for the standby ([`watch_evidence`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::oneshot;

use crate::engine::Engine;
use crate::engine::pairing::{Entry, LastRecord};
use crate::engine::saved::SavedSource;
use crate::gstream::PfcTotals;

mod answering;
mod asking;
mod evidence;
mod link;
mod message;
mod start;

pub use answering::serve;
pub use asking::{hearing, keep_in_step};
pub use evidence::watch as watch_evidence;
pub use link::Link;
pub use start::{fill_table, pull};

/// A whole exchange (connect, send, merge, answer) takes at most this.
pub const DEADLINE: Duration = Duration::from_secs(5);
/// Changed entries go out this often.
pub const PUSH_EVERY: Duration = Duration::from_secs(1);
/// With nothing changed, an empty push this often (the peer is up, and
/// what this one hears: the `H` line).
pub const PING_EVERY: Duration = Duration::from_secs(1);
/// Everything, this often.
pub const FULL_EVERY: Duration = Duration::from_secs(30);
/// The standby sends to gmond once its peer has completed no exchange
/// for this long (three missed pings): with [`PUSH_EVERY`]'s tick, within
/// 4 s of the active one's last exchange.
pub const STANDBY_AFTER: Duration = Duration::from_secs(3);
/// While the link is down, a probe (an empty push) every [`PUSH_EVERY`],
/// its whole exchange within this: a peer port that drops packets costs
/// at most a tick, so the link is seen back within a second.
pub const PROBE_DEADLINE: Duration = Duration::from_secs(1);
/// A gateway is deaf when its peer took a server's record this much
/// later than its own newest (both take the same servers' records within
/// milliseconds of each other: xrootd sends each report to both at once).
pub const DEAF_AFTER: Duration = Duration::from_millis(1500);
/// What the peer said it hears counts for this long (three pings).
pub const PEER_FRESH: Duration = Duration::from_secs(3);
/// How often the `records` counter is sampled (what this one hears), and
/// the deaf and standby decisions made again.
pub const HEARD_EVERY: Duration = Duration::from_millis(100);
/// A gateway that sends to gmond, paired, sends its own host's heartbeat
/// this often: what the standby reads in gmond ([`evidence`]).
pub const ALIVE_EVERY: Duration = Duration::from_secs(1);
/// Evidence read longer ago than this does not count.
pub const EVIDENCE_VALID: Duration = Duration::from_secs(25);
/// What one source may take in a message, with `max_sources` its bound.
pub use crate::engine::saved::BYTES_PER_SOURCE;
pub use evidence::{EVIDENCE_DEADLINE, EVIDENCE_EVERY, EVIDENCE_MAX_BYTES, EVIDENCE_TN, Evidence};
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
