//! One host's metrics in the XML table: each one's metadata (shared,
//! [`super::meta`]) and last value.
//!
//! A list found through a [`KeyIndex`] rather than a hash map: the table
//! holds one per host for every host a gateway hears. Entries take 48
//! bytes a metric and the index about 6; the hash map took about 80 (its
//! spare buckets). A new host's list is sized for its first batch, so it
//! does not grow by doubling either.

use std::sync::Arc;

use compact_str::CompactString;

use super::meta::Meta;
use crate::key_index::KeyIndex;

/// Table seconds value of a metric with no value yet.
pub(super) const NEVER: u32 = u32::MAX;

/// One metric of one host.
pub(super) struct Entry {
    /// Its name key (the batch's [`SlotKey::metric`](crate::engine::packets::SlotKey)).
    key: u64,
    /// Its metadata, TMAX and DMAX included (None: its value came first).
    pub(super) meta: Option<Arc<Meta>>,
    pub(super) value: CompactString,
    /// Table seconds of its last value; [`NEVER`] before the first.
    pub(super) value_at: u32,
}

// One per metric of every host: 48 bytes, no padding to spare.
const _: () = assert!(std::mem::size_of::<Entry>() == 48);

impl Entry {
    fn new(key: u64) -> Entry {
        Entry {
            key,
            meta: None,
            value: CompactString::default(),
            value_at: NEVER,
        }
    }

    /// Its TMAX (0 before its metadata).
    pub(super) fn tmax(&self) -> u32 {
        self.meta.as_ref().map_or(0, |m| m.tmax)
    }

    /// Its DMAX (0, for ever, before its metadata).
    pub(super) fn dmax(&self) -> u32 {
        self.meta.as_ref().map_or(0, |m| m.dmax)
    }
}

/// A host's metrics, in the order they came.
#[derive(Default)]
pub(super) struct Metrics {
    entries: Vec<Entry>,
    index: KeyIndex,
}

impl Metrics {
    /// Metric `key`'s entry, made (empty) if new. Inlined into the table's
    /// per-value loop: called there, it took 10% more instructions per
    /// batch (callgrind, `ds_loaded/xml-table`).
    #[inline(always)]
    pub(super) fn entry(&mut self, key: u64) -> &mut Entry {
        let entries = &self.entries;
        let at = match self.index.find(key, |at| entries[at as usize].key) {
            Some(at) => at as usize,
            None => self.push(key),
        };
        &mut self.entries[at]
    }

    /// A metric new to the host (once per metric, not per value: kept out
    /// of [`entry`](Self::entry)'s line).
    #[cold]
    #[inline(never)]
    fn push(&mut self, key: u64) -> usize {
        self.entries.push(Entry::new(key));
        let (entries, at) = (&self.entries, self.entries.len() - 1);
        self.index
            .insert(key, at as u32, entries.len(), |at| entries[at as usize].key);
        at
    }

    /// Room for `metrics` in all, exactly, when it has less (a new host's
    /// first batch says how many it has).
    pub(super) fn reserve_for(&mut self, metrics: usize) {
        let entries = &mut self.entries;
        entries.reserve_exact(metrics.saturating_sub(entries.len()));
        let entries = &self.entries;
        self.index
            .reserve(entries.len(), metrics, |at| entries[at as usize].key);
    }

    /// Removes the metrics of `keys` (in one pass over the host's: a
    /// source's move takes all of its metrics at once).
    pub(super) fn remove_all(&mut self, keys: impl Iterator<Item = u64>) {
        let mut gone: Vec<u64> = keys.collect();
        gone.sort_unstable();
        self.retain(|e| gone.binary_search(&e.key).is_err());
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }

    /// Keeps the entries `keep` says (the index made again if any left).
    pub(super) fn retain(&mut self, keep: impl FnMut(&Entry) -> bool) {
        let before = self.entries.len();
        self.entries.retain(keep);
        if self.entries.len() != before {
            let entries = &self.entries;
            let len = entries.len();
            self.index.rebuild(len, len, |at| entries[at as usize].key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_found_by_key_whatever_order_they_came_in() {
        let mut m = Metrics::default();
        m.reserve_for(3);
        for (key, value) in [(7, "a"), (u64::MAX, "b"), (1, "c")] {
            m.entry(key).value = value.into();
        }
        assert_eq!(m.entries.capacity(), 3);
        assert_eq!(m.entry(7).value, "a");
        assert_eq!(m.entry(u64::MAX).value, "b");
        assert_eq!(m.entry(1).value, "c");
        m.remove_all([7, 8].into_iter());
        let keys: Vec<u64> = m.iter().map(|e| e.key).collect();
        assert_eq!(keys, [u64::MAX, 1], "in the order they came");
        assert_eq!(m.entry(7).value, "", "made again, empty");
    }
}
