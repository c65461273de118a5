//! The longest time a receive task waited for a lock it shares with a
//! sender thread (a send lane's) or with a poll (an XML table shard's):
//! the receive stall issue 46 asked to measure. Logged at stop, at debug
//! level under the target `xrd2ganglia::lock_wait` (`--log-level
//! info,xrd2ganglia::lock_wait=debug`); the load lab's `stall` run reads it.
//!
//! Free when the lock is free: the lock is tried first (the same atomic
//! operation as taking it), and the clock read only when it is held.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::Instant;

/// One kind of lock's longest wait, in nanoseconds, process-wide.
pub struct LockWait(AtomicU64);

/// Send lanes (receive task against sender thread).
pub static LANE: LockWait = LockWait(AtomicU64::new(0));
/// XML table shards (receive task against a poll's plan and writing).
pub static SHARD: LockWait = LockWait(AtomicU64::new(0));

impl LockWait {
    /// Takes `m` (a poisoned lock's data is still consistent: its users
    /// restore their invariants before they can panic), noting the wait.
    #[inline]
    pub fn lock<'a, T>(&self, m: &'a Mutex<T>) -> MutexGuard<'a, T> {
        match m.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => self.wait(m),
        }
    }

    #[cold]
    fn wait<'a, T>(&self, m: &'a Mutex<T>) -> MutexGuard<'a, T> {
        let t = Instant::now();
        let guard = m.lock().unwrap_or_else(|e| e.into_inner());
        let waited = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.0.fetch_max(waited, Relaxed);
        guard
    }

    /// The longest wait so far, in microseconds.
    pub fn longest_us(&self) -> u64 {
        self.0.load(Relaxed) / 1000
    }
}

/// Logs both (at stop).
pub fn log() {
    tracing::debug!(
        target: "xrd2ganglia::lock_wait",
        "longest lock wait of a receive task: send lane {} us, XML table shard {} us",
        LANE.longest_us(),
        SHARD.longest_us()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_noted_and_a_free_lock_costs_none() {
        let wait = LockWait(AtomicU64::new(0));
        let m = Mutex::new(0);
        *wait.lock(&m) += 1;
        assert_eq!(wait.0.load(Relaxed), 0, "not held: no wait");
        // Held by another thread: the wait lasts until it lets go.
        let held = std::sync::Barrier::new(2);
        let (go, release) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            let (m, held) = (&m, &held);
            s.spawn(move || {
                let _g = m.lock().unwrap();
                held.wait();
                let _ = release.recv();
            });
            held.wait();
            assert!(m.try_lock().is_err(), "held");
            drop(go);
            *wait.wait(m) += 1;
        });
        assert_eq!(*m.lock().unwrap(), 2);
        assert!(wait.0.load(Relaxed) > 0);
        assert_eq!(wait.longest_us(), wait.0.load(Relaxed) / 1000);
    }
}
