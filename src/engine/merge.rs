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
//! down; a peer that lies can at worst make values jump up, and [`check`]
//! refuses what no xrootd can send (a tos in the future, values beyond
//! [`MAX_COUNTER`], more counters than a source may have).

use std::collections::BTreeMap;

use super::saved::SavedSource;

/// The largest reading or offset taken from a peer: 2^62 (4.6e18 bytes,
/// 146 years at 1 GB/s). Above it a value is a lie or garbage, and the
/// sums of the rule stay far from u64's end.
pub const MAX_COUNTER: u64 = 1 << 62;

/// How far a tos may lie in the future of this host's clock (the server's
/// clock may run ahead of ours).
pub const TOS_SLACK: u32 = 3600;

/// How the peer's run compares with mine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Runs {
    Same,
    PeerNewer,
    MineNewer,
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

/// Whether a peer's entry can be true: a tos no later than `now_unix` +
/// [`TOS_SLACK`], readings and offsets up to [`MAX_COUNTER`], at most
/// `max_counters` counters, each named once. Why not, if not.
pub fn check(entry: &SavedSource, now_unix: u64, max_counters: usize) -> Result<(), &'static str> {
    if let Some((tos, _)) = entry.started
        && u64::from(tos) > now_unix.saturating_add(u64::from(TOS_SLACK))
    {
        return Err("a start time in the future");
    }
    if entry.counters.len() > max_counters {
        return Err("more counters than max_metrics_per_source");
    }
    if entry
        .counters
        .iter()
        .any(|&(_, raw, off)| raw > MAX_COUNTER || off > MAX_COUNTER)
    {
        return Err("a counter beyond 2^62");
    }
    let mut keys: Vec<u64> = entry.counters.iter().map(|c| c.0).collect();
    keys.sort_unstable();
    if keys.windows(2).any(|w| w[0] == w[1]) {
        return Err("a counter named twice");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
