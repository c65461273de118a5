//! The senders: one thread per send channel, pacing its queue to gmond.
//!
//! gmond reads one datagram at a time, in one thread, from a socket with
//! the system's default receive buffer (about 250 small datagrams), and
//! stops reading while it writes its XML for gmetad: a few hundred packets
//! back to back overflow it, whatever the average rate (measured on gmond
//! 3.7.2; `ganglia-facts.md`, "How much gmond takes"). So the receive tasks
//! never send: they put a record's packets into each channel's
//! [`SendQueue`] (conflating, [`super::queue`]) and go back to their
//! socket. Each channel's sender takes them from there as its
//! [`Pacer`](super::pacer) decides, in one of two ways, chosen once at
//! start and logged ([`Mode`]):
//!
//! * **following gmond's receive queue** ([`super::follow`]), when gmond
//!   is on this host (`follow_gmond_queue`): before each send it asks the
//!   kernel how full gmond's socket is and sends only what fits below
//!   [`hold_at`](super::follow::hold_at) its buffer; while gmond does not read (a
//!   poll), it holds the packets (counted, `send_held`) and sends them
//!   as soon as gmond reads again, as fast as gmond reads. If gmond's
//!   socket is not there (gmond down), the token bucket paces meanwhile.
//! * **a token bucket** otherwise: at most `send_burst` packets back to
//!   back, `max_send_rate` packets per second on average (0: as fast as
//!   the channel takes them), a metadata packet counting as
//!   [`METADATA_COST`](super::pacer::METADATA_COST) value packets and a
//!   host's heartbeat metadata as
//!   [`NEW_HOST_COST`](super::pacer::NEW_HOST_COST) (what gmond spends on
//!   them when they create a metric or a host, measured). To a unicast
//!   address, each packet goes out a second time `resend_after` after the
//!   first (unless a newer one of its metric waits meanwhile; never after
//!   a newer one), if the bucket has room once the new packets are out: a
//!   gmond that was deaf for the first copy (a poll lasts a second or two)
//!   hears the second.
//!
//! The thread only looks at its queue, asks the kernel, and does what the
//! pacer says: sends, sleeps, or waits on its lane for work. At stop the
//! senders get a deadline (`drain_timeout`): what is queued goes out,
//! paced, until the queue is empty or the deadline passes; the rest is
//! counted as unsent and logged. Second copies not yet due are dropped.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::Settings;
use crate::events::{Counters, Events};
use crate::ganglia::channel::{SendChannel, Sent};

use super::follow::GmondQueue;
use super::pacer::{BUCKET_PRICES, Decision, Pace, Pacer, QueueState};
use super::queue::{Outgoing, Prices, SendQueue, give_back_memory};
use crate::engine::clusters;
use crate::engine::packets::{ForgottenHost, PacketBatch};

/// One send channel's queue, and how its sender is woken.
pub struct Lane {
    channel: SendChannel,
    /// The cluster whose packets it sends (a `[[cluster]]` rule's own
    /// channel); None: a default channel, which sends every cluster's
    /// but those that have their own.
    cluster: Option<Box<str>>,
    state: Mutex<LaneState>,
    /// Signalled when the queue stops being empty, and at stop.
    wake: Condvar,
}

struct LaneState {
    queue: SendQueue,
    /// Set at stop: send until the queue is empty or this instant.
    deadline: Option<Instant>,
}

impl Lane {
    fn lock(&self) -> MutexGuard<'_, LaneState> {
        // A panic while holding the lock leaves a queue that is still
        // consistent (every method restores its invariants before returning).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The queue's state, as the pacer takes it.
    fn look(&self, resends: Option<&Resends>) -> QueueState {
        let state = self.lock();
        QueueState {
            queued: state.queue.len(),
            deadline: state.deadline,
            copy_due: resends.and_then(Resends::next_due),
        }
    }

    /// Moves packets for one send from the queue to `out` ([`take`]);
    /// if that drained the queue, frees what only the burst needed and
    /// calls `trim` after the lock is released: a receive task queueing
    /// to this lane meanwhile does not wait on either.
    fn take(
        &self,
        resends: Option<&mut Resends>,
        budget: usize,
        prices: Prices,
        now: Instant,
        out: &mut Outgoing,
        trim: impl FnOnce(),
    ) -> (usize, usize) {
        let (taken, freed) = {
            let mut state = self.lock();
            let taken = take(&mut state.queue, resends, budget, prices, now, out);
            (taken, state.queue.take_freed())
        };
        if let Some(freed) = freed {
            freed.give_back(trim);
        }
        taken
    }

    /// Waits until a packet is queued or a stop is set, or until `until`.
    /// (Looked at under the lock the receive tasks queue under: a packet
    /// queued since [`look`](Self::look) ends the wait at once.)
    fn idle(&self, until: Option<Instant>) {
        let nothing = |s: &mut LaneState| s.queue.is_empty() && s.deadline.is_none();
        let state = self.lock();
        // (A poisoned lock is still a consistent queue: see `lock`.)
        match until {
            None => drop(self.wake.wait_while(state, nothing)),
            Some(t) => {
                let left = t.saturating_duration_since(Instant::now());
                drop(self.wake.wait_timeout_while(state, left, nothing));
            }
        }
    }

    fn new(channel: SendChannel, cluster: Option<Box<str>>) -> Lane {
        Lane {
            channel,
            cluster,
            state: Mutex::new(LaneState {
                queue: SendQueue::default(),
                deadline: None,
            }),
            wake: Condvar::new(),
        }
    }
}

/// Where the receive tasks put packets: every send channel's queue.
pub struct Outbox {
    lanes: Vec<Arc<Lane>>,
    /// The clusters that have channels of their own (usually none: then
    /// every batch goes to every lane, with no look at its cluster).
    own: Vec<Box<str>>,
}

/// How full the queues are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Packets pending, all channels.
    pub packets: usize,
    /// Age of the oldest pending packet, any channel.
    pub oldest: Duration,
}

impl Outbox {
    /// Queues a batch for every channel, without waiting for any send.
    pub fn queue(&self, batch: &PacketBatch, now: Instant, events: &Events<'_>) {
        if batch.is_empty() {
            return;
        }
        // A gmond is one cluster: a cluster with channels of its own goes
        // to them only, every other to the default channels.
        let cluster = match (&batch.cluster, self.own.is_empty()) {
            (Some(c), false) => self.own.iter().find(|n| ***n == *c.name),
            _ => None,
        };
        if let Some(old) = batch.moved_from
            && !self.own.is_empty()
        {
            // Moved from another cluster: if that one's gmonds are others,
            // they are told to let its metrics go ([`super::retire`]).
            let old = self.own.iter().find(|n| clusters::key_for(n) == old);
            if old != cluster {
                self.retire(batch, old.map(|n| &**n), now);
            }
        }
        for lane in &self.lanes {
            if lane.cluster.as_ref() != cluster {
                continue;
            }
            let (conflated, was_empty) = {
                let mut state = super::lock_wait::LANE.lock(&lane.state);
                let was_empty = state.queue.is_empty();
                (state.queue.push_batch(batch, now), was_empty)
            };
            if was_empty {
                lane.wake.notify_one();
            }
            events.conflated(conflated);
        }
    }

    /// Queues the batch's metadata with DMAX 1 s for the channels of the
    /// cluster its host left (`old`: its own channels' name; None: the
    /// default channels).
    fn retire(&self, batch: &PacketBatch, old: Option<&str>, now: Instant) {
        let packets = super::retire::packets(batch);
        for lane in self.lanes.iter().filter(|l| l.cluster.as_deref() == old) {
            let was_empty = {
                let mut state = lane.lock();
                let was_empty = state.queue.is_empty();
                for (key, kind, bytes) in packets.entries() {
                    state.queue.push(key, kind, bytes, now);
                }
                was_empty
            };
            if was_empty {
                lane.wake.notify_one();
            }
        }
    }

    /// Drops the pending packets of hosts whose sources were forgotten
    /// (`max_sources`), from every channel; counts them.
    pub fn forget(&self, hosts: &[ForgottenHost], events: &Events<'_>) {
        for lane in &self.lanes {
            let (dropped, freed) = {
                let mut state = lane.lock();
                (state.queue.forget_hosts(hosts), state.queue.take_freed())
            };
            if let Some(freed) = freed {
                freed.give_back(give_back_memory);
            }
            events.forgotten_unsent(dropped);
        }
    }

    pub fn stats(&self, now: Instant) -> QueueStats {
        let mut s = QueueStats::default();
        for lane in &self.lanes {
            let state = lane.lock();
            s.packets += state.queue.len();
            if let Some(t) = state.queue.oldest() {
                s.oldest = s.oldest.max(now.saturating_duration_since(t));
            }
        }
        s
    }

    /// An outbox whose queues nobody sends (tests look at what it holds).
    #[cfg(test)]
    pub(super) fn idle(channels: Vec<SendChannel>) -> Outbox {
        let lanes = channels
            .into_iter()
            .map(|c| Arc::new(Lane::new(c, None)))
            .collect();
        Outbox {
            lanes,
            own: Vec::new(),
        }
    }
}

/// The senders of one set of channels (replaced whole by a reload).
pub struct Senders {
    pub outbox: Arc<Outbox>,
    threads: Vec<JoinHandle<()>>,
}

impl Senders {
    /// Starts a sender per channel, each on a thread of its own: pacing
    /// needs sleeps finer than the async timer's millisecond, and a sender
    /// woken on a receive task's worker would wait for that task to yield.
    pub fn start(
        settings: &Settings,
        channels: Vec<SendChannel>,
        counters: Arc<Counters>,
    ) -> Senders {
        let pace = Pace {
            rate: settings.max_send_rate,
            burst: settings.send_burst.max(1),
            follow: settings.follow_gmond_queue,
            resend_after: settings.resend_after,
        };
        // The default channels first, then each rule's (open_channels).
        let own = settings
            .grouping
            .rules
            .iter()
            .flat_map(|r| r.channels.iter().map(|_| Some(Box::<str>::from(&*r.name))));
        let serves = std::iter::repeat_n(None, settings.channels.len()).chain(own);
        let lanes: Vec<Arc<Lane>> = channels
            .into_iter()
            .zip(serves.chain(std::iter::repeat(None)))
            .map(|(c, cluster)| Arc::new(Lane::new(c, cluster)))
            .collect();
        let own = settings
            .grouping
            .rules
            .iter()
            .filter(|r| !r.channels.is_empty())
            .map(|r| Box::<str>::from(&*r.name))
            .collect();
        let log_interval = settings.log_interval;
        let threads = lanes
            .iter()
            .filter_map(|lane| {
                let (lane, counters) = (lane.clone(), counters.clone());
                let mode = Mode::choose(&lane.channel, pace);
                let spawned = std::thread::Builder::new()
                    .name("xrd2ganglia-send".into())
                    .spawn(move || send_loop(&lane, pace, mode, &counters, log_interval));
                match spawned {
                    Ok(t) => Some(t),
                    Err(e) => {
                        tracing::error!("cannot start a sender thread: {e}");
                        None
                    }
                }
            })
            .collect();
        Senders {
            outbox: Arc::new(Outbox { lanes, own }),
            threads,
        }
    }

    /// Sends what is queued until `deadline`, then stops the senders.
    pub async fn drain(self, deadline: Instant) {
        for lane in &self.outbox.lanes {
            lane.lock().deadline = Some(deadline);
            lane.wake.notify_all();
        }
        let threads = self.threads;
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
    }
}

/// How one channel's sender paces (chosen at start, logged once).
enum Mode {
    /// By the receive queue of the gmond on this host.
    Follow(GmondQueue),
    /// By the token bucket alone; with second copies this long after the
    /// first (unicast only: every member of a multicast group would take
    /// twice the packets).
    Bucket { resend: Option<Duration> },
}

impl Mode {
    fn choose(channel: &SendChannel, pace: Pace) -> Mode {
        let label = channel.label();
        let bucket = match pace.rate {
            0 => "unpaced (max_send_rate = 0)".to_string(),
            rate => format!(
                "paced at {rate} packets/s, {} back to back (max_send_rate, send_burst)",
                pace.burst
            ),
        };
        let why = if pace.follow {
            match GmondQueue::for_target(channel.target()) {
                Ok(mut q) => {
                    let now = match q.level() {
                        Some(_) => String::new(),
                        None => format!("; no socket there yet: {bucket} until there is"),
                    };
                    tracing::info!(
                        channel = label,
                        "follows the receive queue of gmond on this host ({}): holds packets while gmond does not read, sends as fast as it reads{now}",
                        q.source()
                    );
                    return Mode::Follow(q);
                }
                Err(why) => why,
            }
        } else {
            "follow_gmond_queue = false".to_string()
        };
        let multicast = channel.target().ip().is_multicast();
        let (resend, copies) = match pace.resend_after {
            Some(d) if !multicast => (
                Some(d),
                format!(
                    "; each packet sent again after {} s (resend_after)",
                    d.as_secs()
                ),
            ),
            Some(_) => (None, "; no second copies to a multicast group".to_string()),
            None => (None, String::new()),
        };
        tracing::info!(channel = label, "{bucket}{copies} ({why})");
        Mode::Bucket { resend }
    }
}

/// Packets sent once, waiting to be sent a second time (`resend_after`
/// after the first): conflating like the send queue, so bounded by the
/// metrics. A metric sent again before its copy went out has its newer
/// packet copied, at the first one's time: never an older value after a
/// newer one.
struct Resends {
    after: Duration,
    queue: SendQueue,
}

impl Resends {
    fn new(after: Duration) -> Resends {
        Resends {
            after,
            queue: SendQueue::default(),
        }
    }

    /// When the oldest copy is due.
    fn next_due(&self) -> Option<Instant> {
        self.queue.oldest().map(|t| t + self.after)
    }

    /// Moves the copies due at `now` to `out` while `budget` lasts, but for
    /// those whose metric has a newer packet in `pending` (it goes out
    /// anyway); returns the tokens spent.
    fn pop_due(
        &mut self,
        now: Instant,
        budget: usize,
        out: &mut Outgoing,
        pending: &SendQueue,
    ) -> usize {
        match now.checked_sub(self.after) {
            Some(cutoff) if budget > 0 => {
                self.queue
                    .pop_queued_by(cutoff, budget, BUCKET_PRICES, out, |key| {
                        pending.contains(key)
                    })
            }
            _ => 0,
        }
    }

    /// Keeps the first `fresh` packets of `out`, sent at `now`, for a copy.
    fn remember(&mut self, out: &Outgoing, fresh: usize, now: Instant) {
        for (key, kind, bytes) in out.entries().take(fresh) {
            self.queue.push(key, kind, bytes, now);
        }
    }
}

/// One channel's sender: does what its pacer decides (sends, sleeps, or
/// waits on the lane for work), until stopped and drained.
fn send_loop(lane: &Lane, pace: Pace, mut mode: Mode, counters: &Counters, log_interval: Duration) {
    let mut events = Events::new(counters, log_interval);
    let mut out = Outgoing::default();
    let mut pacer = Pacer::new(pace, Instant::now());
    let mut resends = match mode {
        Mode::Bucket {
            resend: Some(after),
        } => Some(Resends::new(after)),
        _ => None,
    };
    let (label, target) = (lane.channel.label(), lane.channel.target());
    loop {
        let queue = lane.look(resends.as_ref());
        let now = Instant::now();
        // Asked with the lane unlocked: the receive tasks queue meanwhile.
        let level = match &mut mode {
            Mode::Follow(q) if queue.has_work(now) => q.level(),
            _ => None,
        };
        let step = pacer.next(now, level, queue);
        if let Some(h) = step.held {
            events
                .at(now)
                .held_for_gmond(label, target, h.ms, h.stalled);
        }
        match step.decision {
            Decision::Send { budget, prices } => {
                out.clear();
                let (spent, fresh) = lane.take(
                    resends.as_mut(),
                    budget,
                    prices,
                    now,
                    &mut out,
                    give_back_memory,
                );
                pacer.sent(spent);
                let failed = send(&lane.channel, &out, &mut events);
                events.packets_out(out.len() - failed, out.len() - fresh);
                if let Some(r) = &mut resends {
                    r.remember(&out, fresh, now);
                }
            }
            Decision::Wait(until) | Decision::Hold(until) => {
                std::thread::sleep(until.saturating_duration_since(Instant::now()));
            }
            Decision::Idle(until) => lane.idle(until),
            Decision::GiveUp => {
                let (unsent, freed) = {
                    let mut state = lane.lock();
                    (state.queue.clear(), state.queue.take_freed())
                };
                if let Some(freed) = freed {
                    freed.give_back(give_back_memory);
                }
                events.unsent_at_stop(label, unsent);
                return;
            }
            Decision::Done => return,
        }
    }
}

/// Moves packets from `queue` to `out` while fewer than `budget` tokens
/// are spent, then the second copies due at `now` (but for those whose
/// metric has a newer packet still queued) while the rest lasts. Returns
/// the tokens spent and how many of `out` are first copies.
fn take(
    queue: &mut SendQueue,
    resends: Option<&mut Resends>,
    budget: usize,
    prices: Prices,
    now: Instant,
    out: &mut Outgoing,
) -> (usize, usize) {
    let spent = queue.pop(budget, prices, out);
    let fresh = out.len();
    let resent = resends.map_or(0, |r| {
        r.pop_due(now, budget.saturating_sub(spent), out, queue)
    });
    (spent + resent, fresh)
}

/// Sends what `out` holds; returns how many the kernel did not take.
fn send(channel: &SendChannel, out: &Outgoing, events: &mut Events<'_>) -> usize {
    if out.is_empty() {
        return 0;
    }
    let mut failed = 0;
    channel.send_all(&out.packets(), |r| match r {
        Ok(Sent::Ok) => {}
        Ok(Sent::AfterRefusal) => events
            .at(Instant::now())
            .send_refused(channel.label(), channel.target()),
        Err(e) => {
            failed += 1;
            events
                .at(Instant::now())
                .send_failed(channel.label(), channel.target(), &e);
        }
    });
    failed
}

#[cfg(test)]
mod tests;
