//! Waiting for a condition: polled, with a bound, never a sleep that must
//! be long enough.

use std::time::{Duration, Instant};

/// Waits (at most `within`, looking every 20 ms) until `f` is Some.
pub fn wait_for<T>(what: &str, within: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
