//! Waiting for a condition: polled, with a bound, never a sleep that must
//! be long enough.

use std::time::{Duration, Instant};

/// Waits (at most `within`, looking every 20 ms) until `f` is Some.
pub fn wait_for<T>(what: &str, within: Duration, f: impl FnMut() -> Option<T>) -> T {
    wait_for_every(what, within, Duration::from_millis(20), f)
}

/// Like `wait_for`, looking every `every`: for a look that costs a process
/// (rrdtool, a poll of gmetad), which every 20 ms would take a core.
pub fn wait_for_every<T>(
    what: &str,
    within: Duration,
    every: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(every);
    }
}
