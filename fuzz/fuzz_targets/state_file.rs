//! Any bytes as a state file, read as `serve` reads one (version 2's JSON
//! lines, or version 1's text at the upgrade): nothing may panic; a file
//! read is written again as version 2, which reads back the same state
//! with nothing skipped (what one gateway saved, the next one takes whole).
#![no_main]

use libfuzzer_sys::fuzz_target;
use xrd2ganglia::engine::saved::{Limits, SavedState};

/// 2026-11-27 12:00:00 UTC: a fixed now, so a run is reproducible.
const NOW: Limits = Limits {
    now_unix: 1_795_780_800,
};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok((state, skipped)) = SavedState::read(&text, NOW) else {
        return;
    };
    assert!(skipped.first.len() <= xrd2ganglia::engine::saved::NAMED);
    let _ = skipped.to_string();
    let mut first = state.unclaimed_entries();
    first.sort_by(|a, b| a.0.cmp(&b.0));
    let saved = state.to_text();
    let (again, skipped) = SavedState::read(&saved, NOW).expect("its own file");
    assert!(skipped.is_empty(), "{skipped}\n{saved}");
    let mut second = again.unclaimed_entries();
    second.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(first, second);
    for (_, source) in &second {
        for &(_, reading, offset) in &source.counters {
            assert!(reading < xrd2ganglia::engine::saved::MAX_COUNTER);
            assert!(offset < xrd2ganglia::engine::saved::MAX_COUNTER);
        }
    }
});
