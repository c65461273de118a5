//! The kernel's drops at the gateway's own listening sockets, watched:
//! datagrams that arrived while a socket's receive buffer was full, which
//! no counter of the gateway's can see (an unpaced flood of 20,000
//! datagrams showed 3,946 received in `status`, and the 16,054 dropped
//! nowhere). [`DropWatch`] reads them from /proc (through
//! [`KernelDrops`]) every [`SAMPLE`], logs a warning when they rise (once
//! per `log_interval`, [`Events::kernel_dropped`]), and tells `status`
//! how many since the start and in the last minute.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::self_metrics::KernelDrops;
use crate::events::{Counters, Events};
use crate::status::{KernelDropStatus, RECENT};

/// How often the drops are read for the warning (and kept for the last
/// minute's count).
pub const SAMPLE: Duration = Duration::from_secs(5);

/// The drops of the listening sockets, and the readings of the last
/// minute.
pub struct DropWatch {
    drops: KernelDrops,
    /// (when, total) for the last [`RECENT`], oldest first: at most
    /// RECENT / SAMPLE + 1 entries.
    readings: Mutex<VecDeque<(Instant, u64)>>,
}

impl DropWatch {
    pub fn new(drops: KernelDrops) -> DropWatch {
        DropWatch {
            drops,
            readings: Mutex::default(),
        }
    }

    /// As `status` shows them at `now`, read from /proc now; None where
    /// /proc does not tell.
    pub fn status(&self, now: Instant) -> Option<KernelDropStatus> {
        let total = self.drops.read()?;
        let readings = self.readings.lock().unwrap_or_else(|e| e.into_inner());
        // The oldest reading within the last minute (or none yet: a
        // gateway younger than its first reading has all its drops in it).
        let base = readings
            .iter()
            .find(|(at, _)| now.saturating_duration_since(*at) <= RECENT)
            .map_or(0, |(_, v)| *v);
        Some(KernelDropStatus {
            since_start: total,
            last_minute: total.saturating_sub(base),
        })
    }

    /// Reads the drops at `now` and keeps the reading; how many more than
    /// at the last reading.
    fn sample(&self, now: Instant) -> Option<(u64, KernelDropStatus)> {
        let total = self.drops.read()?;
        let mut readings = self.readings.lock().unwrap_or_else(|e| e.into_inner());
        let rise = readings
            .back()
            .map_or(total, |(_, last)| total.saturating_sub(*last));
        readings.push_back((now, total));
        while readings
            .front()
            .is_some_and(|(at, _)| now.saturating_duration_since(*at) > RECENT)
        {
            readings.pop_front();
        }
        let base = readings.front().map_or(0, |(_, v)| *v);
        Some((
            rise,
            KernelDropStatus {
                since_start: total,
                last_minute: total.saturating_sub(base),
            },
        ))
    }
}

/// Reads the drops every [`SAMPLE`] until `stop`; a rise is logged.
pub(super) async fn watch(
    drops: Arc<DropWatch>,
    counters: Arc<Counters>,
    log_interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut events = Events::new(&counters, log_interval);
    let mut tick = tokio::time::interval(SAMPLE);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = tick.tick() => {
                if let Some((rise, now)) = drops.sample(Instant::now())
                    && rise > 0
                {
                    events.at(Instant::now()).kernel_dropped(rise, now.last_minute, now.since_start);
                }
            }
        }
    }
}
