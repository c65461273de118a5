//! Two gateways of a pair agree on every counter: the merge of a source's
//! counter state with the one its peer sent ([`crate::daemon::peer`] carries
//! them).
//!
//! **Why they diverge.** A counter goes out as `reading + offset`
//! ([`super::series`]), and at a restart or reset `offset += last reading`.
//! A gateway that missed records (it was down, restarted, started with no
//! state file, was cut off from the servers, or lost the last datagram
//! before a restart) takes a smaller offset, for good; gmetad, failing
//! over from one to the other, then reads a drop and draws a wrap.
//!
//! **The rule** is commutative and idempotent in what it publishes (the
//! run and the offsets): merged either way round, the two publish the
//! same, and an exchange repeated changes nothing; so a pair converges in
//! one round trip whatever order exchanges come in. (It is not
//! associative in the readings it keeps, which a third gateway would
//! need: adopting a newer run forgets the old one's reading. A pair has
//! two.) Per source, the two runs are
//! compared by `started` = (tos, pid); per counter (an absent one is a
//! reading and offset of 0):
//!
//! * **the same run**: offset := max(mine, peer's). My last reading stays:
//!   it is my own history of readings, and taking the peer's (perhaps
//!   later) one could make my next, older datagram look like a reset.
//! * **the peer's run is newer** (a larger tos: I missed the restart):
//!   its run is taken; offset := max(peer's, mine + my last reading), the
//!   last sent value of my old run being where the new run continues
//!   from; last reading := 0, so the new run's next reading is never read
//!   as a drop.
//! * **my run is newer**: offset := max(mine, peer's + peer's last reading).
//! * **the same tos, another pid** (a restart within one second): which
//!   came later cannot be told from the runs; the entry whose published
//!   values add up to more is taken as the newer (ties: the larger pid),
//!   so both sides choose the same one, and by the rule above neither
//!   side's values go down.
//! * no run known (a source saved with no start) is older than any run.
//!
//! Offsets only grow under the rule, so a merge never makes a counter go
//! down. What no xrootd can send (a tos more than a day ahead, readings of
//! 2^63 or more, more counters than a source may have) is refused entry by
//! entry and counter by counter, as the state file's are
//! ([`super::saved::check_entry`], [`check`]). And a peer's entry is merged only where it agrees with
//! what this gateway heard itself ([`take`], the trust rule): the run is
//! the server's word, and a raise is what a report this gateway missed
//! could hold; so a peer that lies can stop helping, never make a counter
//! jump by more than the server's own reports allow.

use std::collections::BTreeMap;

use crate::gstream::PfcTotals;

/// How the peer's run compares with mine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Runs {
    Same,
    PeerNewer,
    MineNewer,
}

/// One source's counter state, as the state file and the peer exchange
/// keep it ([`super::saved`] writes and reads it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SavedSource {
    /// (tos, pid) of the program when saved.
    pub started: Option<(u32, u32)>,
    /// (name key, last reading, offset) of each counter.
    pub counters: Vec<(u64, u64, u64)>,
}

/// The sum of what an entry publishes (its counters' readings plus offsets).
fn published(entry: &SavedSource) -> u128 {
    entry
        .counters
        .iter()
        .map(|&(_, raw, off)| u128::from(raw) + u128::from(off))
        .sum()
}

fn compare(mine: &SavedSource, peer: &SavedSource) -> Runs {
    use std::cmp::Ordering::*;
    match (mine.started, peer.started) {
        (a, b) if a == b => Runs::Same,
        (None, Some(_)) => Runs::PeerNewer,
        (Some(_), None) => Runs::MineNewer,
        (Some((mt, mp)), Some((pt, pp))) => match mt.cmp(&pt) {
            Less => Runs::PeerNewer,
            Greater => Runs::MineNewer,
            Equal => match published(mine).cmp(&published(peer)).then(mp.cmp(&pp)) {
                Less => Runs::PeerNewer,
                _ => Runs::MineNewer,
            },
        },
        (None, None) => Runs::Same,
    }
}

/// Merges the peer's entry of a source into mine (the rule above).
pub fn merge(mine: &mut SavedSource, peer: &SavedSource) {
    let runs = compare(mine, peer);
    // Per key: (my reading, offset), (the peer's reading, offset).
    type Both = ((u64, u64), (u64, u64));
    let mut all: BTreeMap<u64, Both> = BTreeMap::new();
    for &(key, raw, off) in &mine.counters {
        all.entry(key).or_default().0 = (raw, off);
    }
    for &(key, raw, off) in &peer.counters {
        all.entry(key).or_default().1 = (raw, off);
    }
    // My counters keep their order (the engine's), the peer's new ones follow.
    let order: Vec<u64> = mine
        .counters
        .iter()
        .map(|c| c.0)
        .chain(peer.counters.iter().map(|c| c.0))
        .collect();
    let mut out = Vec::with_capacity(all.len());
    for key in order {
        let Some(((m_raw, m_off), (p_raw, p_off))) = all.remove(&key) else {
            continue;
        };
        let (raw, off) = match runs {
            Runs::Same => (m_raw, m_off.max(p_off)),
            Runs::PeerNewer => (0, p_off.max(m_off.saturating_add(m_raw))),
            Runs::MineNewer => (m_raw, m_off.max(p_off.saturating_add(p_raw))),
        };
        if raw != 0 || off != 0 {
            out.push((key, raw, off));
        }
    }
    mine.counters = out;
    if runs == Runs::PeerNewer {
        mine.started = peer.started;
    }
}

/// How far after now a peer may place a run's start (`tos`): a server's
/// clock ahead of this gateway's by more than this is taken for a lie.
pub const CLOCK_SLACK: u64 = 300;

/// The least a raise may be, whatever the counter publishes: one wrap of
/// a C `int` counter ([`super::series`]).
pub const RAISE_FLOOR: u64 = 1 << 32;

/// What this gateway itself knows of a source, against which a peer's
/// entry is checked ([`take`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heard {
    /// Now, in Unix seconds.
    pub now_unix: u64,
    /// When the server last reported to this gateway (Unix seconds), if
    /// it has since this gateway started: its run is then the server's
    /// word, never the peer's.
    pub reported_unix: Option<u64>,
    /// Something happened since the peer last raised it that the peer may
    /// know more of: this gateway first took the source (heard it, or
    /// read it) since its start, saw a restart, a reset or a wrap, or
    /// missed a report. A raise is taken only then.
    pub may_raise: bool,
}

/// What came of a peer's entry ([`take`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Taken {
    /// Claims refused: the entry's run (one), or each counter raised by
    /// more than this gateway's own reports allow.
    pub refused: usize,
    /// Why the first was refused.
    pub why: Option<String>,
    /// The peer's newer run is not merged yet: the server has not reported
    /// it to this gateway, and nothing it heard says it cannot be true.
    pub waiting: bool,
    /// A counter's published value was raised.
    pub raised: bool,
}

/// The trust rule: merges a peer's entry into mine ([`merge`]) only where
/// it is consistent with what this gateway heard itself (`heard`):
///
/// 1. **The run is the server's word.** For a source the server reports
///    to this gateway, a peer's other run is never merged; a newer one is
///    refused if it cannot be true (a start more than [`CLOCK_SLACK`]
///    ahead of now, or the server reported my run to me more than
///    [`CLOCK_SLACK`] after that start), else it waits for the server's
///    own report, which brings the restart (the entries are then of one
///    run). For a source not heard since this gateway started, a newer
///    run is taken if its start is not more than [`CLOCK_SLACK`] ahead.
/// 2. **A raise is what a missed report could hold.** A counter's
///    published value (reading + offset) goes up in a merge only by what
///    the server counted in reports this gateway missed: the last reading
///    before a restart or reset, or a wrap. So it is taken only while
///    `heard.may_raise`, and by at most what the counter publishes here
///    now (the reports missed cannot have counted more than all those
///    heard) or [`RAISE_FLOOR`], whichever is larger. A counter raised by
///    more is merged as if the peer had not named it, and counted.
///
/// An entry of a source this gateway holds nothing of is taken as it is
/// (the line checks only): there is nothing to hold it against.
pub fn take(mine: &mut SavedSource, peer: &SavedSource, heard: &Heard) -> Taken {
    let mut taken = Taken::default();
    let tos = peer.started.map_or(0, |(tos, _)| u64::from(tos));
    let runs = compare(mine, peer);
    if runs == Runs::PeerNewer && tos > heard.now_unix.saturating_add(CLOCK_SLACK) {
        taken.refused = 1;
        taken.why = Some(format!(
            "a restart {} s in the future (tos {tos})",
            tos - heard.now_unix
        ));
        return taken;
    }
    if mine.started.is_none() && mine.counters.is_empty() {
        merge(mine, peer);
        return taken;
    }
    if runs == Runs::PeerNewer {
        let why = heard
            .reported_unix
            .filter(|&at| at > tos.saturating_add(CLOCK_SLACK))
            .map(|at| {
                format!(
                    "a restart at tos {tos} the server contradicts (it reported its run {:?} {} s later)",
                    mine.started,
                    at - tos
                )
            });
        if let Some(why) = why {
            taken.refused = 1;
            taken.why = Some(why);
            return taken;
        }
        if heard.reported_unix.is_some() {
            taken.waiting = true;
            return taken;
        }
    }
    let mut merged = mine.clone();
    merge(&mut merged, peer);
    let before: BTreeMap<u64, u64> = mine
        .counters
        .iter()
        .map(|&(key, raw, off)| (key, raw.saturating_add(off)))
        .collect();
    let mut refused_keys = Vec::new();
    for &(key, raw, off) in &merged.counters {
        let before = before.get(&key).copied().unwrap_or(0);
        let raise = raw.saturating_add(off).saturating_sub(before);
        if raise == 0 {
            continue;
        }
        let allowed = before.max(RAISE_FLOOR);
        if heard.may_raise && raise <= allowed {
            taken.raised = true;
            continue;
        }
        refused_keys.push(key);
        if taken.why.is_none() {
            taken.why = Some(if heard.may_raise {
                format!(
                    "counter {key:016x} raised by {raise}, more than the {allowed} its own reports allow"
                )
            } else {
                format!(
                    "counter {key:016x} raised by {raise} with no report missed, restart, reset or wrap here since the last raise"
                )
            });
        }
    }
    if !refused_keys.is_empty() {
        taken.refused = refused_keys.len();
        refused_keys.sort_unstable();
        let mut trusted = peer.clone();
        trusted
            .counters
            .retain(|c| refused_keys.binary_search(&c.0).is_err());
        merged = mine.clone();
        merge(&mut merged, &trusted);
    }
    *mine = merged;
    taken
}

/// Whether two entries publish the same: the same run and the same offset
/// for every counter (readings are each side's own history). A merge
/// answers the peer with its merged entry only where they differ.
pub fn agrees(a: &SavedSource, b: &SavedSource) -> bool {
    if a.started != b.started {
        return false;
    }
    let offsets = |e: &SavedSource| -> BTreeMap<u64, u64> {
        e.counters
            .iter()
            .filter(|c| c.2 != 0)
            .map(|c| (c.0, c.2))
            .collect()
    };
    offsets(a) == offsets(b)
}

/// Merges the peer's XCache g-stream totals of a source into mine (its
/// `xrootd.mongstream ... send` takes one destination, so only one gateway
/// of a pair hears them): totals of the same run (`stod`) grow only, so the
/// larger of each; another run's, the newer run's. Totals of a run other
/// than the source's own (`tos`) are not taken.
pub fn merge_pfc(mine: &mut Option<PfcTotals>, peer: Option<&PfcTotals>, tos: Option<u32>) {
    let Some(peer) = peer.filter(|p| Some(p.stod) == tos) else {
        return;
    };
    match mine {
        Some(m) if m.stod == peer.stod => {
            m.files = m.files.max(peer.files);
            m.bytes_hit = m.bytes_hit.max(peer.bytes_hit);
            m.bytes_miss = m.bytes_miss.max(peer.bytes_miss);
            m.bytes_bypass = m.bytes_bypass.max(peer.bytes_bypass);
        }
        Some(m) if m.stod > peer.stod => {}
        _ => *mine = Some(*peer),
    }
}

/// Whether a peer's entry, its fields each valid ([`super::saved::check_entry`]:
/// a start no more than a day ahead, readings and offsets below 2^63,
/// each key once), can be a source's: at most `max_counters` counters.
pub fn check(entry: &SavedSource, max_counters: usize) -> Result<(), &'static str> {
    if entry.counters.len() > max_counters {
        return Err("more counters than max_metrics_per_source");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
