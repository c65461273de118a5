//! FNV-1a, the one non-keyed hash of the crate: metric name keys (stable
//! across processes, so the state file can name a metric by its key), the
//! catalog's index of short fixed names (looked up per variable on the hot
//! path, where SipHash's DoS resistance buys nothing), and changed-only
//! sending's value fingerprints.

use std::hash::{BuildHasherDefault, Hasher};

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0100_0000_01b3;

/// FNV-1a of `bytes`.
pub fn hash(bytes: &[u8]) -> u64 {
    let mut h = OFFSET;
    for b in bytes {
        h = (h ^ u64::from(*b)).wrapping_mul(PRIME);
    }
    h
}

/// FNV-1a as a [`Hasher`], for maps of trusted keys.
#[derive(Default)]
pub struct Fnv(Option<u64>);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0.unwrap_or(OFFSET)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0.unwrap_or(OFFSET);
        for b in bytes {
            h = (h ^ u64::from(*b)).wrapping_mul(PRIME);
        }
        self.0 = Some(h);
    }
}

/// A map keyed by trusted keys, hashed with [`Fnv`].
pub type FnvMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<Fnv>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // FNV-1a 64 test vectors (draft-eastlake-fnv).
        assert_eq!(hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash(b"foobar"), 0x8594_4171_f739_67e8);
        let mut h = Fnv::default();
        h.write(b"foo");
        h.write(b"bar");
        assert_eq!(h.finish(), hash(b"foobar"));
    }
}
