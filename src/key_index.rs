//! Where an entry of a list is, found by its 64-bit key: the index of a
//! source's metrics in the engine and of a host's metrics in the XML table.
//!
//! Both are kept for every metric of every server a gateway hears, so the
//! index holds no keys and no entries: only the entries' positions, in an
//! open-addressing table (linear probing) read through the list itself.
//! That is 4 bytes per slot, at most 7/8 full: about 6 bytes a metric,
//! where a hash map of (key, position) took 24 or more. A lookup is a
//! multiply, a shift and, on average, one or two probes: taking a loaded
//! data server's record into the XML table costs 12% more instructions
//! than with the hash map, and a sorted list's binary search cost 40%
//! more (docs/benchmarks.md).
//!
//! Kept hand-written rather than `hashbrown::HashTable<u32>` (issue 46),
//! which does the same job (slots of positions, probed by a hash the
//! caller gives): its control byte per slot and 16 trailing ones make
//! 5 bytes a slot where this has 4, in two indexes per (host, metric),
//! and that crossed the 200 bytes per (host, metric) an XML port may
//! cost. Both builds alternated on 2026-11-28 (commit 904622d and the
//! same with this file on `HashTable<u32>`, a folded multiply as its
//! hash), `cargo run --release -p xrd2ganglia-load -- --gateway BIN
//! --only memory,xml`, 920,000 pairs, resident bytes per pair: with an
//! XML port 197 and 197 here, 201 and 201 with hashbrown; without, 141 and 141
//! here, 143 and 143 with hashbrown (docs/benchmarks.md, "Issue 46").
//!
//! The keys are stable hashes of names a sender chooses; the slot is
//! taken from the key times an odd multiplier drawn per process, so a
//! sender cannot pick names that pile up in one run of slots.

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// A slot with no entry.
const EMPTY: u32 = u32::MAX;
/// The fewest slots a non-empty index has.
const MIN_SLOTS: usize = 8;

/// Positions of a list's entries by key. The list says each entry's key
/// (`key_at`); the index is told of every change to the list.
#[derive(Debug, Default)]
pub struct KeyIndex {
    slots: Box<[u32]>,
}

/// This process's multiplier (odd, random).
fn multiplier() -> u64 {
    static MUL: OnceLock<u64> = OnceLock::new();
    *MUL.get_or_init(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x9e37_79b9_7f4a_7c15);
        h.finish() | 1
    })
}

/// Slots for `len` entries: a power of two, at most 7/8 full.
fn slots_for(len: usize) -> usize {
    (len + len / 7 + 1).next_power_of_two().max(MIN_SLOTS)
}

impl KeyIndex {
    /// The position of the entry with `key`, if any.
    #[inline]
    pub fn find(&self, key: u64, key_at: impl Fn(u32) -> u64) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let pos = self.slots[i];
            if pos == EMPTY {
                return None;
            }
            if key_at(pos) == key {
                return Some(pos);
            }
            i = (i + 1) & mask;
        }
    }

    /// The list's entry at `pos` has `key` (pushed: the list now has
    /// `len` entries, `pos` among them, and no other one with `key`).
    pub fn insert(&mut self, key: u64, pos: u32, len: usize, key_at: impl Fn(u32) -> u64) {
        if self.slots.len() < slots_for(len) {
            self.rebuild(len, len, key_at);
        } else {
            self.place(key, pos);
        }
    }

    /// Made again for the list's `len` entries (after some were removed),
    /// with room for `room` (at least `len`). Of two entries of one key,
    /// the first is found.
    pub fn rebuild(&mut self, len: usize, room: usize, key_at: impl Fn(u32) -> u64) {
        self.slots = if room.max(len) == 0 {
            Box::default()
        } else {
            vec![EMPTY; slots_for(room.max(len))].into_boxed_slice()
        };
        for pos in 0..len as u32 {
            let key = key_at(pos);
            if self.find(key, &key_at).is_none() {
                self.place(key, pos);
            }
        }
    }

    /// Room for `room` entries in all, for a list of `len` now (about to
    /// take many at once: one rebuild, not one per doubling).
    pub fn reserve(&mut self, len: usize, room: usize, key_at: impl Fn(u32) -> u64) {
        if self.slots.len() < slots_for(room) {
            self.rebuild(len, room, key_at);
        }
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        let bits = self.slots.len().trailing_zeros();
        (key.wrapping_mul(multiplier()) >> (64 - bits)) as usize
    }

    fn place(&mut self, key: u64, pos: u32) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        while self.slots[i] != EMPTY {
            i = (i + 1) & mask;
        }
        self.slots[i] = pos;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_entry_and_nothing_else() {
        let mut keys: Vec<u64> = Vec::new();
        let mut index = KeyIndex::default();
        // Keys whose two halves are equal: alike in their low and high bits.
        for i in 0..1000u64 {
            keys.push(i << 32 | i);
            let len = keys.len();
            index.insert(i << 32 | i, len as u32 - 1, len, |p| keys[p as usize]);
        }
        for (pos, &key) in keys.iter().enumerate() {
            assert_eq!(index.find(key, |p| keys[p as usize]), Some(pos as u32));
        }
        assert_eq!(index.find(7, |p| keys[p as usize]), None);
        assert!(index.slots.len() <= 2048, "{}", index.slots.len());
        // Half removed, the rest moved down: found at their new places.
        keys.retain(|k| k % 2 == 0);
        index.rebuild(keys.len(), keys.len(), |p| keys[p as usize]);
        for (pos, &key) in keys.iter().enumerate() {
            assert_eq!(index.find(key, |p| keys[p as usize]), Some(pos as u32));
        }
        assert_eq!(index.find(1 << 32 | 1, |p| keys[p as usize]), None);
        // Emptied.
        keys.clear();
        index.rebuild(0, 0, |p| keys[p as usize]);
        assert_eq!(index.find(0, |p| keys[p as usize]), None);
    }

    #[test]
    fn reserved_room_is_not_rebuilt_while_filled() {
        let keys: Vec<u64> = (0..92).map(|k| k * 0x1234_5678_9abc).collect();
        let mut index = KeyIndex::default();
        index.reserve(0, 92, |p| keys[p as usize]);
        assert_eq!(index.slots.len(), 128, "92 entries, at most 7/8 full");
        let at = index.slots.as_ptr();
        for pos in 0..92 {
            index.insert(keys[pos], pos as u32, pos + 1, |p| keys[p as usize]);
        }
        assert_eq!(index.slots.as_ptr(), at);
        for pos in 0..92 {
            assert_eq!(
                index.find(keys[pos], |p| keys[p as usize]),
                Some(pos as u32)
            );
        }
    }
}
