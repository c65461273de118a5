//! Any bytes as a peer's message, read a frame at a time as the exchange
//! reads one (frames bounded before they are read, entries in the
//! schema, checked as the state file's): nothing may panic; every entry
//! taken holds what a source may (at most the counters allowed, each
//! below 2^63, each key once); written again, they read back the same
//! with nothing refused.
#![no_main]

use std::collections::HashSet;

use libfuzzer_sys::fuzz_target;
use xrd2ganglia::daemon::peer::message::{self, HEADER};
use xrd2ganglia::engine::saved::MAX_COUNTER;

/// A fixed now (2026-11-27 12:00:00 UTC), so a run is reproducible.
const NOW: u64 = 1_795_780_800;
/// Counters an entry may have (small, so that the bound is reached).
const MAX_COUNTERS: usize = 100;

fuzz_target!(|data: &[u8]| {
    let Ok(msg) = message::parse(data, MAX_COUNTERS, NOW) else {
        return;
    };
    for e in &msg.entries {
        assert!(e.state.counters.len() <= MAX_COUNTERS);
        let mut keys = HashSet::new();
        for &(key, reading, offset) in &e.state.counters {
            assert!(reading < MAX_COUNTER && offset < MAX_COUNTER);
            assert!(keys.insert(key), "key {key:016x} twice");
        }
    }
    let again = message::message(&format!("{HEADER}\tfull\t0\t1"), &msg.entries, &[]);
    let back = message::parse(&again, MAX_COUNTERS, NOW).expect("its own message");
    assert_eq!(back.refused.lines, 0, "{}", back.refused.text);
    assert_eq!(back.entries, msg.entries);
});
