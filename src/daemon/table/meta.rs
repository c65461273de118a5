//! A metric's metadata in the XML table: taken borrowed from the batch
//! that carries its packet, compared with what a host holds, and shared by the hosts that send it
//! alike (interned), so that a periodic resend allocates nothing.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use foldhash::fast::RandomState;

use crate::engine::packets::MetaFields;

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

/// The extra elements of a batch's metadata in the order gmond writes them
/// (the packet's reversed: TITLE, DESC, GROUP), without the SPOOF_* ones
/// that only address the packet.
fn extra_of<'p>(f: &MetaFields<'p>) -> [(&'static str, &'p str); 3] {
    [("TITLE", f.title), ("DESC", f.desc), ("GROUP", f.group)]
}

/// Whether `held` is the metadata a batch says (`f`, borrowed from the
/// batch): compared before anything is allocated.
pub(super) fn same(held: &Meta, f: &MetaFields<'_>) -> bool {
    let extra = extra_of(f);
    *held.name == *f.name
        && *held.value_type == *f.value_type
        && *held.units == *f.units
        && held.slope == f.slope.as_str()
        && held.tmax == f.tmax
        && held.dmax == f.dmax
        && held.extra.len() == extra.len()
        && held
            .extra
            .iter()
            .zip(extra)
            .all(|((k, v), (fk, fv))| **k == *fk && **v == *fv)
}

fn hash_with(f: &MetaFields<'_>, state: &RandomState) -> u64 {
    let mut h = state.build_hasher();
    for part in [f.name, f.value_type, f.units, f.slope.as_str()] {
        h.write(part.as_bytes());
        h.write_u8(0xff);
    }
    for (k, v) in extra_of(f) {
        h.write(k.as_bytes());
        h.write_u8(0xff);
        h.write(v.as_bytes());
        h.write_u8(0xff);
    }
    h.write_u32(f.tmax);
    h.write_u32(f.dmax);
    h.finish()
}

fn to_meta(f: &MetaFields<'_>) -> Meta {
    Meta {
        name: f.name.into(),
        value_type: f.value_type.into(),
        units: f.units.into(),
        slope: f.slope.as_str(),
        extra: extra_of(f)
            .iter()
            .map(|&(k, v)| (k.into(), v.into()))
            .collect(),
        tmax: f.tmax,
        dmax: f.dmax,
    }
}

/// The metadata held, by the hash of its fields ([`hash_with`],
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
    /// The shared [`Meta`] that a batch's metadata `f` says, made if new.
    pub(super) fn intern(&self, f: &MetaFields<'_>) -> Arc<Meta> {
        let hash = hash_with(f, &self.hasher);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        match held.get(&hash) {
            Some(m) if same(m, f) => return m.clone(),
            Some(_) => return Arc::new(to_meta(f)),
            None => {}
        }
        // Metadata no host uses any more (a renamed metric, an expired
        // list entry) goes when the set has doubled since the last sweep.
        if held.len() >= 2 * self.swept.load(Relaxed).max(1024) {
            held.retain(|_, m| Arc::strong_count(m) > 1);
            self.swept.store(held.len(), Relaxed);
        }
        let meta = Arc::new(to_meta(f));
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
