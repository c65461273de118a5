//! Two gateways of a pair exchange their counter state (`peer`,
//! `peer_listen`), so both publish the same value for every metric of
//! every server whatever either missed. The merge rule and why the two
//! diverge without it: [`crate::engine::merge`]; what of a peer's word is
//! taken (the trust rule): [`crate::engine::merge::take`].
//!
//! **What is exchanged.** Each source's entry, as the state file writes it
//! (one [`crate::engine::saved::schema::Entry`], JSON, read with the state
//! file's own checks: one definition), with each XCache's g-stream totals
//! in it (its `pfc` field: the directive
//! `xrootd.mongstream ... send` takes one destination, a second `send`
//! replaces the first (`XrdXrootdConfig.cc`, `xmongs`), so only one
//! gateway of a pair hears them), and for a starting peer each source's
//! last record. One exchange per connection: the asking side sends a
//! message, the answering side merges its entries as they come and
//! answers with its entries that differ from the ones it was sent (so
//! both hold the merged entry after one round trip), and for a full
//! exchange every entry the asker did not name. Each message says, right
//! after its header, what its sender hears (an `L` frame, both ways,
//! every exchange: [`message::Heard`]): how long ago it took a server's
//! record, and its own host in gmond.
//!
//! A message is frames ([`message`]): a kind byte, a 4-byte big-endian
//! length, at most [`message::MAX_FRAME`] (128 KiB) of payload.
//!
//! ```text
//! H  xrd2ganglia-peer 3 <pull|push|full|answer> <standby 0|1> <number drawn at start>
//! L  <ms since its newest server record, or -> <its own host in gmond, xrd2ganglia@NAME>
//! E  {"ip":..,"program":..,"start":[tos,pid],"counters":[[key,reading,offset],..],"pfc":{..}}
//!                                          an entry (the schema's JSON): its first 128 KiB
//! +  ...                                   the next bytes of the entry before
//! R  <ip> <age ms>\n<the record's bytes>   a last record (answers to a pull)
//! .                                        the end
//! ```
//!
//! **Versions.** Version 3 carries the schema's entries; 2 carried the
//! state file's `S`/`C` lines in the same frames, 1 was text. A peer of
//! another version is refused at its header (counted as `peer_failed`,
//! logged once per `log_interval`: `a peer speaking version 2 of the
//! exchange: ...`), and the answering side writes its own header back so
//! that the older peer's log names this version too. A rolling upgrade
//! is a cut link while the two differ: each publishes what it hears, its
//! state file keeps its counters, and the first exchange once both run one
//! version is a full one (docs/pair.md).
//!
//! **When.** (1) At start, before the XML port listens and before any
//! datagram is read (they wait in the socket's buffer, [`DEADLINE`] at
//! most): a pull of the peer's every entry and last record, merged into
//! the state file's; the records are fed as they come through an engine
//! of their own into the XML table (at their age: a host's TN is what the
//! peer's was), so the first document is what the peer's is and the port
//! listens at once ([`super::xml_port::Warmup`]; a peer that had heard no
//! one, as when both start together, leaves the port to wait for the
//! state file's sources as without a peer). The peer's exchanges are
//! answered from the state file meanwhile, so two gateways that start
//! together do not wait on each other. (2) Every [`PUSH_EVERY`], the entries whose
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
//! **Bounded before parsing.** A frame's length is checked before a byte
//! of it is read; entries are merged a batch of at most
//! [`message::BATCH_BYTES`] (512 KiB) of frames at a time; a message of
//! more entries than `max_sources` is cut there; an entry of more
//! counters than `max_metrics_per_source` is refused whole as its frames
//! come. So one exchange holds at most a frame (128 KiB), the entry being
//! assembled (`max_metrics_per_source` x 61 bytes and 1 KiB: 306 KB at the
//! default 5,000) and a batch (512 KiB of frames, its entries parsed), whatever the
//! message's length and whatever `max_sources` is; at most
//! [`MAX_EXCHANGES`] are answered at once (one per address) and one is
//! asked, so all peers together make the gateway hold at most 5 times
//! that, about 5 MB. A whole exchange has [`DEADLINE`]; connections from
//! outside `peer_allow` (by default what `peer` resolves to at start)
//! are closed. Every entry is checked on its own, as the state file's are
//! ([`crate::engine::saved::read_entry`], then
//! [`crate::engine::merge::check`]), then against what this gateway heard
//! itself ([`crate::engine::merge::take`]): a bad line or claim is
//! refused, counted and named, the rest is taken; a heard frame that
//! cannot be true is refused alone; a header, frame or record that
//! cannot be read ends the exchange. Sources no engine has wait at most
//! `max_sources`. What a failed push carried goes with the full exchange
//! that follows the first answered probe.
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
//! and the XML table filled from it as the records come ([`pull`]);
//! `peer/message.rs`: the frames, written and read (and how to add a
//! kind of information; an entry's fields are `engine/saved/schema.rs`); `peer/evidence.rs`: gmond's XML read for the
//! standby ([`watch_evidence`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::oneshot;

use crate::engine::Engine;
use crate::engine::merge::Taken;
use crate::engine::pairing::{Entry, LastRecord};
use crate::engine::saved::SavedSource;
use crate::gstream::PfcTotals;

mod answering;
mod asking;
mod evidence;
mod link;
pub mod message;
mod start;

pub use answering::serve;
pub use asking::{hearing, keep_in_step};
pub use evidence::watch as watch_evidence;
pub use link::Link;
pub use start::pull;

/// A whole exchange (connect, send, merge, answer) takes at most this.
pub const DEADLINE: Duration = Duration::from_secs(5);
/// Changed entries go out this often.
pub const PUSH_EVERY: Duration = Duration::from_secs(1);
/// With nothing changed, an empty push this often (the peer is up, and
/// what this one hears: the heard frame).
pub const PING_EVERY: Duration = Duration::from_secs(1);
/// Everything, this often.
pub const FULL_EVERY: Duration = Duration::from_secs(30);
/// The standby sends to gmond once its peer has completed no exchange
/// for this long (three missed pings): with [`PUSH_EVERY`]'s tick, within
/// 4 s of the active one's last exchange.
pub const STANDBY_AFTER: Duration = Duration::from_secs(3);
/// Exchanges answered at once, whoever asks (one per address): with a
/// frame, an entry and a batch each ([`message`]), what all peers
/// together can make the gateway hold.
pub const MAX_EXCHANGES: usize = 4;
/// While the link is down, a probe (an empty push) this often ...
pub const PROBE_EVERY: Duration = Duration::from_millis(250);
/// ... its whole exchange within this: a peer port that drops packets
/// (a connect whose SYN is lost waits a second for its retry) costs at
/// most this and a probe's wait, so the link is seen back, and the full
/// exchange made, within a second.
pub const PROBE_DEADLINE: Duration = Duration::from_millis(500);
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

/// A source's entry merged: its state, its g-stream totals and what came
/// of the peer's claims.
type Merged = (SavedSource, Option<PfcTotals>, Taken);

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
            let (now, now_unix) = (Instant::now(), unix_now());
            let merged = entries
                .iter()
                .map(|e| engine.merge_peer(e, now, now_unix))
                .collect();
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
