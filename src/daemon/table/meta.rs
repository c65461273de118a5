//! A metric's metadata in the XML table: taken borrowed from the batch
//! that carries its packet, compared with what a host holds, and shared by the hosts that send it
//! alike (interned), so that a periodic resend allocates nothing.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use foldhash::fast::RandomState;

/// A metric's metadata, shared by every host that sends it alike.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Meta {
    pub(super) name: Box<str>,
    pub(super) value_type: Box<str>,
    pub(super) units: Box<str>,
    pub(super) slope: &'static str,
    /// In the order gmond writes them (the packet's reversed), without
    /// the SPOOF_* elements that only address the packet.
    pub(super) extra: Box<[(Box<str>, Box<str>)]>,
    /// Its TMAX and DMAX, as the metadata packet says them: they are
    /// metadata, and sources of one report interval send them alike.
    pub(super) tmax: u32,
    pub(super) dmax: u32,
}

/// A metric's metadata as its batch says it, borrowed from the batch:
/// compared with what a host holds, and hashed to find the shared
/// [`Meta`], before anything is allocated.
pub(super) struct MetaView<'p> {
    pub(super) name: &'p str,
    pub(super) value_type: &'p str,
    pub(super) units: &'p str,
    pub(super) slope: &'static str,
    /// The extra elements in the order gmond writes them (the packet's
    /// reversed: TITLE, DESC, GROUP), without the SPOOF_* ones.
    pub(super) extra: [(&'p str, &'p str); 3],
    pub(super) tmax: u32,
    pub(super) dmax: u32,
}

impl MetaView<'_> {
    /// The extra elements as a [`Meta`] holds them.
    fn extra(&self) -> impl Iterator<Item = (&str, &str)> {
        self.extra.iter().copied()
    }

    pub(super) fn matches(&self, m: &Meta) -> bool {
        *m.name == *self.name
            && *m.value_type == *self.value_type
            && *m.units == *self.units
            && m.slope == self.slope
            && m.tmax == self.tmax
            && m.dmax == self.dmax
            && m.extra.len() == self.extra().count()
            && m.extra
                .iter()
                .zip(self.extra())
                .all(|((k, v), (vk, vv))| **k == *vk && **v == *vv)
    }

    fn hash_with(&self, state: &RandomState) -> u64 {
        let mut h = state.build_hasher();
        for part in [self.name, self.value_type, self.units, self.slope] {
            h.write(part.as_bytes());
            h.write_u8(0xff);
        }
        for (k, v) in self.extra() {
            h.write(k.as_bytes());
            h.write_u8(0xff);
            h.write(v.as_bytes());
            h.write_u8(0xff);
        }
        h.write_u32(self.tmax);
        h.write_u32(self.dmax);
        h.finish()
    }

    fn to_meta(&self) -> Meta {
        Meta {
            name: self.name.into(),
            value_type: self.value_type.into(),
            units: self.units.into(),
            slope: self.slope,
            extra: self.extra().map(|(k, v)| (k.into(), v.into())).collect(),
            tmax: self.tmax,
            dmax: self.dmax,
        }
    }
}

/// The metadata held, by the hash of its fields ([`MetaView::hash_with`],
/// keyed per table). On the rare collision the second metadata is simply
/// not shared.
#[derive(Default)]
pub(super) struct Metas {
    held: Mutex<HashMap<u64, Arc<Meta>, RandomState>>,
    hasher: RandomState,
    /// Size of `held` after its last sweep.
    swept: AtomicUsize,
}

impl Metas {
    /// The shared [`Meta`] that `view` describes, made if new.
    pub(super) fn intern(&self, view: &MetaView<'_>) -> Arc<Meta> {
        let hash = view.hash_with(&self.hasher);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        match held.get(&hash) {
            Some(m) if view.matches(m) => return m.clone(),
            Some(_) => return Arc::new(view.to_meta()),
            None => {}
        }
        // Metadata no host uses any more (a renamed metric, an expired
        // list entry) goes when the set has doubled since the last sweep.
        if held.len() >= 2 * self.swept.load(Relaxed).max(1024) {
            held.retain(|_, m| Arc::strong_count(m) > 1);
            self.swept.store(held.len(), Relaxed);
        }
        let meta = Arc::new(view.to_meta());
        held.insert(hash, meta.clone());
        meta
    }

    /// How many are held, and how many hosts use each (tests).
    #[cfg(test)]
    pub(super) fn uses(&self) -> Vec<usize> {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.values().map(|m| Arc::strong_count(m) - 1).collect()
    }
}
