//! The mapping's per-name cache: what one variable name maps to in one
//! context (its metric name, group, catalog entry), so that a steady
//! report builds no name; and the metric name's key.

use std::hash::Hasher;

use super::Role;
use crate::catalog::MetricSpec;

/// A metric name's 64-bit key (FNV-1a): the same in every process, so the
/// gateway's state file can name a metric by it. Maps keyed by it hash it
/// again with a random seed.
pub fn name_key(name: &str) -> u64 {
    crate::fnv::hash(name.as_bytes())
}

/// For maps whose keys are already keyed hashes (the name cache): uses
/// them as they are.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Most names cached; past it the cache starts again (hostile senders
/// inventing names cost time, not memory).
pub(super) const MAX_CACHED_NAMES: usize = 32_768;

/// What one variable name maps to, in one context.
pub(super) struct CachedNames {
    pub(super) context: u64,
    /// raw name, list key component, key text, var, metric name, group.
    pub(super) text: String,
    pub(super) ends: [u32; 6],
    pub(super) spec: Option<&'static MetricSpec>,
    pub(super) sanitized: bool,
    pub(super) role: Role,
    pub(super) name_key: u64,
    /// Left out by the filter (derived metrics never are).
    pub(super) excluded: bool,
}

impl CachedNames {
    /// The six parts back to back, and where each ends (what [`part`](Self::part) reads).
    pub(super) fn pack(parts: [&str; 6]) -> (String, [u32; 6]) {
        let mut text = String::with_capacity(parts.iter().map(|p| p.len()).sum());
        let mut ends = [0u32; 6];
        for (i, part) in parts.into_iter().enumerate() {
            text.push_str(part);
            ends[i] = text.len() as u32;
        }
        (text, ends)
    }

    #[inline(always)]
    pub(super) fn part(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        self.text.get(start..self.ends[i] as usize).unwrap_or("")
    }

    #[inline(always)]
    pub(super) fn matches(&self, context: u64, raw: &str, key: &str, key_text: &str) -> bool {
        self.context == context
            && self.part(0) == raw
            && self.part(1) == key
            && self.part(2) == key_text
    }
}
