//! A compact clock: instants as seconds (u32) or milliseconds (u64) from
//! an epoch, for the many timestamps the engine, the send queues and the
//! XML table keep per metric. Defined once; nobody keeps a clock of its
//! own: the caller says what time it is.

use std::time::{Duration, Instant};

/// Seconds start here, not at zero, so that "`lead` seconds before now"
/// is always a valid time ([`super::source`]).
pub const SECONDS_BASE: u32 = 1 << 24;

/// The largest time in seconds: `u32::MAX` stays free for "never".
const LAST_SECOND: u32 = u32::MAX - 1;

#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: Instant,
}

impl Clock {
    pub fn new(epoch: Instant) -> Clock {
        Clock { epoch }
    }

    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// Seconds at `now`: [`SECONDS_BASE`] at the epoch (and before it).
    pub fn secs(&self, now: Instant) -> u32 {
        let elapsed = now.saturating_duration_since(self.epoch).as_secs();
        SECONDS_BASE
            .saturating_add(elapsed.min(u64::from(u32::MAX)) as u32)
            .min(LAST_SECOND)
    }

    /// Milliseconds at `now`: 0 at the epoch (and before it).
    pub fn millis(&self, now: Instant) -> u64 {
        let ms = now.saturating_duration_since(self.epoch).as_millis();
        ms.min(u128::from(u64::MAX)) as u64
    }

    /// The instant of [`millis`](Self::millis) `ms`.
    pub fn at_millis(&self, ms: u64) -> Instant {
        self.epoch + Duration::from_millis(ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_start_at_the_base_and_never_reach_never() {
        let t0 = Instant::now();
        let c = Clock::new(t0);
        assert_eq!(c.secs(t0), SECONDS_BASE);
        assert_eq!(c.secs(t0 + Duration::from_secs(90)), SECONDS_BASE + 90);
        assert_eq!(c.secs(t0 - Duration::from_secs(5)), SECONDS_BASE);
        assert_eq!(c.millis(t0 + Duration::from_millis(1500)), 1500);
        assert_eq!(c.at_millis(1500), t0 + Duration::from_millis(1500));
        let far = t0 + Duration::from_secs(u64::from(u32::MAX));
        assert_eq!(c.secs(far), u32::MAX - 1);
    }
}
