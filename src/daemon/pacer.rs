//! When a channel's sender sends, and how much: a function of the time,
//! the level of gmond's receive queue and the state of the send queue.
//!
//! The sender's thread ([`super::sender`]) asks [`Pacer::next`] what to do
//! and does it: sends what the answer allows, sleeps until the instant it
//! names, or waits on its queue until a packet comes. Here there is no
//! socket, no clock and no sleep (as `Tunn` in boringtun, the core the
//! device loop drives), so the tests drive it with chosen instants.
//!
//! Two ways to pace, whichever the sender can see:
//!
//! * **gmond's receive queue** (a gmond on this host, [`super::follow`]):
//!   what fits below [`hold_at`](super::follow::hold_at) its buffer goes
//!   now; a full queue is held for (gmond is writing its XML for gmetad)
//!   and the time counted (`send_held`).
//! * **a token bucket** otherwise, and while gmond's socket is not there:
//!   at most `send_burst` packets back to back, `max_send_rate` a second
//!   on average (0: unpaced), a metadata packet costing [`METADATA_COST`]
//!   value packets and a host's heartbeat metadata [`NEW_HOST_COST`].
//!
//! At stop the sender has a deadline (`drain_timeout`): no wait the pacer
//! asks for ends after it, and once it has passed what is still queued is
//! given up (counted unsent).

use std::time::{Duration, Instant};

use super::follow::Level;
use super::queue::Prices;

/// Packets taken from a queue per lock, unpaced (one to a few sendmmsg calls).
pub const UNPACED_CHUNK: usize = 256;

/// What a metric's metadata costs in the token bucket, in value packets:
/// what gmond 3.7.2 spends on the metadata that creates a metric, plus
/// what the metric's first value costs it beyond an update (that value
/// creates the metric's value entry: the pair is what a new metric costs).
/// Measured on the 2-core development machine (Firecracker VM, Linux
/// 6.18, a stock gmond on loopback), 2026-11-25, commit 684c0ac: gmond's
/// CPU per packet with its queue kept filled (`cargo run --release -p
/// xrd2ganglia-load -- --only cost --cost-rate 0`, 10 runs; docs/gmond.md, "What each
/// packet costs gmond"): a value update 2.65-2.78 us, a creating metadata
/// 1.85-1.97 x that (1.82-2.16 over the runs), a first value 1.75-1.79 x
/// (1.70-1.95): about 1.9 + 0.8 = 2.7, rounded up. Every metadata is
/// priced so: the sender cannot tell a periodic resend (1.05-1.12 x) from
/// a first sight, and after a gmond restart every metadata it answers is
/// one. At the default metadata_interval that costs 14% of the steady
/// records per second the bucket lets through (a report every 15 s is
/// 101.6 values and 25.1 metadata: 177 tokens instead of 152).
pub const METADATA_COST: usize = 3;

/// What a host's heartbeat metadata costs in the token bucket: it is the
/// first packet of a new host, which creates the host in gmond, and the
/// host's first heartbeat value creates its value entry. Same runs as
/// [`METADATA_COST`]: 2.59-2.79 x a value update (2.45-3.06), the first
/// heartbeat value 1.95-2.11 x (1.79-2.28): about 2.7 + 1.0 = 3.7,
/// rounded up.
pub const NEW_HOST_COST: usize = 4;

/// The token bucket's prices: what gmond's one thread spends.
pub const BUCKET_PRICES: Prices = Prices {
    metadata: METADATA_COST,
    host: NEW_HOST_COST,
};

/// Following gmond's queue, a token is room in that queue
/// ([`BYTES_PER_TOKEN`](super::follow::BYTES_PER_TOKEN)) and a metadata
/// packet takes at most 1,280 bytes of it: two, whatever it creates.
pub const QUEUE_PRICES: Prices = Prices {
    metadata: 2,
    host: 2,
};

/// The shortest pause between two sends: a thread's sleep is about this
/// precise, so packets leave in runs of rate x this (40 at 40,000/s).
/// Also how long a full gmond queue is held for before it is asked again.
pub const TICK: Duration = Duration::from_millis(1);

/// How a channel's sender paces, as configured.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    /// Packets per second (0: unpaced).
    pub rate: u64,
    /// Packets back to back at most (the bucket's size).
    pub burst: usize,
    /// Follow the receive queue of a gmond on this host.
    pub follow: bool,
    /// Send each packet again this long after (where not following).
    pub resend_after: Option<Duration>,
}

/// The send queue as the sender saw it, under its lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueState {
    /// Packets pending.
    pub queued: usize,
    /// Set at stop: send until the queue is empty or this instant.
    pub deadline: Option<Instant>,
    /// When the oldest second copy is due (`resend_after`), if any waits.
    pub copy_due: Option<Instant>,
}

impl QueueState {
    /// Whether there may be something to send at `now` (a packet, or a
    /// copy due, and the stop's deadline not passed): then gmond's queue is
    /// worth asking.
    pub fn has_work(&self, now: Instant) -> bool {
        let due = self.copy_due.is_some_and(|d| d <= now);
        match self.deadline {
            Some(end) => self.queued > 0 && now < end,
            None => self.queued > 0 || due,
        }
    }
}

/// What the sender does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Take packets from the queue while fewer than `budget` tokens are
    /// spent, priced so, then the copies due while the rest lasts; send
    /// them; tell the pacer what was spent ([`Pacer::sent`]).
    Send { budget: usize, prices: Prices },
    /// The bucket is empty: sleep until then.
    Wait(Instant),
    /// gmond's queue is full (it is not reading): sleep until then and
    /// ask again. The time is counted at the next step ([`Step::held`]).
    Hold(Instant),
    /// Nothing to send: wait for a packet to be queued (or a stop), or
    /// until this instant, when the next copy is due.
    Idle(Option<Instant>),
    /// The stop's deadline has passed with packets queued: drop them,
    /// counted unsent, and end.
    GiveUp,
    /// Stopped with nothing queued: end (copies not yet due are dropped).
    Done,
}

/// Time held for a full gmond queue, to count ([`Events::held_for_gmond`](crate::events::Events::held_for_gmond)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    /// Whole milliseconds held since the last count (the rest is kept).
    pub ms: u64,
    /// How long gmond has made no room.
    pub stalled: Duration,
}

/// A decision, and the hold that ended with it, if one did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub decision: Decision,
    pub held: Option<Held>,
}

/// One channel's pacing state: the bucket and the hold in progress.
pub struct Pacer {
    bucket: Bucket,
    /// Since when gmond's queue has been full (None: it is not).
    held_since: Option<Instant>,
    /// When the last [`Decision::Hold`] was made (its time not yet counted).
    held_at: Option<Instant>,
    /// Held time not yet counted (under a millisecond).
    uncounted_us: u128,
    /// Whether the last [`Decision::Send`] spends the bucket's tokens
    /// (not when it came from room in gmond's queue).
    from_bucket: bool,
}

impl Pacer {
    /// A pacer whose bucket is full at `now`.
    pub fn new(pace: Pace, now: Instant) -> Pacer {
        Pacer {
            bucket: Bucket::new(pace, now),
            held_since: None,
            held_at: None,
            uncounted_us: 0,
            from_bucket: false,
        }
    }

    /// What to do at `now`, given how full gmond's receive queue is (None:
    /// not followed, or no socket there: the bucket paces) and the send
    /// queue's state.
    pub fn next(&mut self, now: Instant, gmond: Option<Level>, queue: QueueState) -> Step {
        let held = self.count_held(now);
        let decision = self.decide(now, gmond, queue);
        Step { decision, held }
    }

    /// What the last [`Decision::Send`] spent: taken from the bucket if
    /// the bucket allowed it.
    pub fn sent(&mut self, tokens: usize) {
        if self.from_bucket {
            self.bucket.spend(tokens);
        }
    }

    fn decide(&mut self, now: Instant, gmond: Option<Level>, queue: QueueState) -> Decision {
        if queue.queued == 0 {
            if queue.deadline.is_some() {
                return Decision::Done;
            }
            match queue.copy_due {
                None => return Decision::Idle(None),
                Some(due) if due > now => return Decision::Idle(Some(due)),
                Some(_) => {}
            }
        }
        if queue.deadline.is_some_and(|d| now >= d) {
            return Decision::GiveUp;
        }
        // No wait past the stop's deadline: a stop takes drain_timeout.
        let until = |d: Duration| {
            let t = super::after(now, d);
            queue.deadline.map_or(t, |end| t.min(end))
        };
        match gmond {
            // At most a chunk at once, whatever gmond's buffer.
            Some(level) => match level.room(UNPACED_CHUNK) {
                Some(room) => {
                    self.held_since = None;
                    self.from_bucket = false;
                    Decision::Send {
                        budget: room,
                        prices: QUEUE_PRICES,
                    }
                }
                None => {
                    self.held_since.get_or_insert(now);
                    self.held_at = Some(now);
                    Decision::Hold(until(TICK))
                }
            },
            None => match self.bucket.take(now) {
                Ok(tokens) => {
                    self.from_bucket = true;
                    Decision::Send {
                        budget: tokens,
                        prices: BUCKET_PRICES,
                    }
                }
                Err(wait) => Decision::Wait(until(wait)),
            },
        }
    }

    /// The time since the last hold, if the last decision was one.
    fn count_held(&mut self, now: Instant) -> Option<Held> {
        let at = self.held_at.take()?;
        self.uncounted_us += now.saturating_duration_since(at).as_micros();
        let ms = (self.uncounted_us / 1000) as u64;
        self.uncounted_us %= 1000;
        let since = self.held_since.unwrap_or(at);
        Some(Held {
            ms,
            stalled: now.saturating_duration_since(since),
        })
    }
}

/// The token bucket: `burst` tokens at most, `rate` per second.
struct Bucket {
    pace: Pace,
    tokens: f64,
    filled_at: Instant,
}

impl Bucket {
    fn new(pace: Pace, now: Instant) -> Bucket {
        Bucket {
            pace,
            tokens: pace.burst as f64,
            filled_at: now,
        }
    }

    /// Tokens to spend now, or how long to wait for one.
    fn take(&mut self, now: Instant) -> Result<usize, Duration> {
        let Pace { rate, burst, .. } = self.pace;
        if rate == 0 {
            return Ok(UNPACED_CHUNK);
        }
        // An idle bucket fills up to the burst, no further.
        let elapsed = now.saturating_duration_since(self.filled_at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate as f64).min(burst as f64);
        self.filled_at = now;
        if self.tokens < 1.0 {
            let wait = Duration::from_secs_f64((1.0 - self.tokens) / rate as f64);
            let shortest = TICK.min(Duration::from_secs_f64(burst as f64 / 2.0 / rate as f64));
            return Err(wait.max(shortest));
        }
        Ok(self.tokens as usize)
    }

    fn spend(&mut self, tokens: usize) {
        if self.pace.rate > 0 {
            self.tokens -= tokens as f64;
        }
    }
}

#[cfg(test)]
mod tests;
