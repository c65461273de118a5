//! The senders: one thread per send channel, pacing its queue to gmond.
//!
//! gmond reads one datagram at a time, in one thread, from a socket with
//! the system's default receive buffer (about 250 small datagrams), and
//! stops reading while it writes its XML for gmetad: a few hundred packets
//! back to back overflow it, whatever the average rate (measured on gmond
//! 3.7.2; `ganglia-facts.md`, "How much gmond takes"). So the receive tasks
//! never send: they put a record's packets into each channel's
//! [`SendQueue`] (conflating, [`super::queue`]) and go back to their
//! socket. Each channel's sender takes them from there in one of two ways,
//! chosen once at start and logged:
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
//!   [`METADATA_COST`] value packets and a host's heartbeat metadata as
//!   [`NEW_HOST_COST`] (what gmond spends on them when they create a
//!   metric or a host, measured). To a unicast address, each packet
//!   goes out a second time `resend_after` after the first (unless a newer
//!   one of its metric waits meanwhile; never after a newer one), if the
//!   bucket has room once the new packets are out: a gmond that was deaf
//!   for the first copy (a poll lasts a second or two) hears the second.
//!
//! At stop the senders get a deadline (`drain_timeout`): what is queued
//! goes out, paced, until the queue is empty or the deadline passes; the
//! rest is counted as unsent and logged. Second copies not yet due are
//! dropped.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::Settings;
use crate::events::{Counters, Events};
use crate::ganglia::channel::{SendChannel, Sent};

use super::follow::GmondQueue;
use super::queue::{Outgoing, Prices, SendQueue};
use crate::engine::clusters;
use crate::engine::packets::{ForgottenHost, PacketBatch, PacketKind};

/// Packets taken from a queue per lock, unpaced (one to a few sendmmsg calls).
const UNPACED_CHUNK: usize = 256;

/// What a metric's metadata costs in the token bucket, in value packets:
/// what gmond 3.7.2 spends on the metadata that creates a metric, plus
/// what the metric's first value costs it beyond an update (that value
/// creates the metric's value entry: the pair is what a new metric costs).
/// Measured on the 2-core development machine (Firecracker VM, Linux
/// 6.18, a stock gmond on loopback), 2026-11-25, commit 684c0ac: gmond's
/// CPU per packet with its queue kept filled (`cargo bench --bench load
/// -- --only cost --cost-rate 0`, 10 runs; docs/gmond.md, "What each
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
const BUCKET_PRICES: Prices = Prices {
    metadata: METADATA_COST,
    host: NEW_HOST_COST,
};

/// Following gmond's queue, a token is room in that queue
/// ([`BYTES_PER_TOKEN`](super::follow::BYTES_PER_TOKEN)) and a metadata
/// packet takes at most 1,280 bytes of it: two, whatever it creates.
const QUEUE_PRICES: Prices = Prices {
    metadata: 2,
    host: 2,
};

/// The shortest pause between two sends: a thread's sleep is about this
/// precise, so packets leave in runs of rate x this (40 at 40,000/s).
const TICK: Duration = Duration::from_millis(1);

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
                let mut state = lane.lock();
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
                for (key, bytes) in &packets {
                    state.queue.push(*key, PacketKind::Metadata, bytes, now);
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
            let dropped = lane.lock().queue.forget_hosts(hosts);
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

/// How a channel's sender paces, as configured.
#[derive(Clone, Copy, Debug)]
struct Pace {
    /// Packets per second (0: unpaced).
    rate: u64,
    /// Packets back to back at most (the bucket's size).
    burst: usize,
    /// Follow the receive queue of a gmond on this host.
    follow: bool,
    /// Send each packet again this long after (where not following).
    resend_after: Option<Duration>,
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

/// The token bucket: `burst` tokens at most, `rate` per second.
struct Bucket {
    pace: Pace,
    tokens: f64,
    filled_at: Instant,
}

impl Bucket {
    fn new(pace: Pace) -> Bucket {
        Bucket {
            pace,
            tokens: pace.burst as f64,
            filled_at: Instant::now(),
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

/// Following gmond's queue: how long the sender has held for a full one.
#[derive(Default)]
struct Held {
    /// Since when gmond's queue has been full (None: it is not).
    since: Option<Instant>,
    /// Held time not yet counted (under a millisecond).
    uncounted_us: u128,
}

impl Held {
    /// Waits a [`TICK`] for gmond to read, and counts it.
    fn wait(&mut self, channel: &SendChannel, now: Instant, events: &mut Events<'_>) {
        let since = *self.since.get_or_insert(now);
        std::thread::sleep(TICK);
        self.uncounted_us += now.elapsed().as_micros();
        let ms = (self.uncounted_us / 1000) as u64;
        self.uncounted_us %= 1000;
        events.at(Instant::now()).held_for_gmond(
            channel.label(),
            channel.target(),
            ms,
            since.elapsed(),
        );
    }
}

/// Waits until there is something to send: a queued packet or a due copy.
/// Returns the stop deadline if one is set, or None when stopped with
/// nothing queued (copies not yet due are dropped).
fn wait_for_work(lane: &Lane, resends: Option<&Resends>) -> Option<Option<Instant>> {
    let mut state = lane.lock();
    loop {
        if !state.queue.is_empty() {
            return Some(state.deadline);
        }
        if state.deadline.is_some() {
            return None;
        }
        match resends.and_then(Resends::next_due) {
            None => state = lane.wake.wait(state).unwrap_or_else(|e| e.into_inner()),
            Some(due) => {
                let now = Instant::now();
                if due <= now {
                    return Some(state.deadline);
                }
                state = lane
                    .wake
                    .wait_timeout(state, due - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
    }
}

/// One channel's sender: takes packets from the lane's queue as its mode
/// allows and sends them, until stopped and drained.
fn send_loop(lane: &Lane, pace: Pace, mut mode: Mode, counters: &Counters, log_interval: Duration) {
    let mut events = Events::new(counters, log_interval);
    let mut out = Outgoing::default();
    let mut bucket = Bucket::new(pace);
    let mut resends = match mode {
        Mode::Bucket {
            resend: Some(after),
        } => Some(Resends {
            after,
            queue: SendQueue::default(),
        }),
        _ => None,
    };
    let mut held = Held::default();
    loop {
        let Some(deadline) = wait_for_work(lane, resends.as_ref()) else {
            return;
        };
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            let unsent = lane.lock().queue.clear();
            events.unsent_at_stop(lane.channel.label(), unsent);
            return;
        }
        // How much may go now (asked with the lane unlocked: the receive
        // tasks queue meanwhile).
        let level = match &mut mode {
            Mode::Follow(q) => q.level(),
            Mode::Bucket { .. } => None,
        };
        let budget = match level {
            // At most a chunk per lock, whatever gmond's buffer.
            Some(level) => match level.room(UNPACED_CHUNK) {
                Some(room) => {
                    held.since = None;
                    room
                }
                None => {
                    held.wait(&lane.channel, now, &mut events);
                    continue;
                }
            },
            None => match bucket.take(now) {
                Ok(tokens) => tokens,
                Err(wait) => {
                    std::thread::sleep(wait);
                    continue;
                }
            },
        };
        out.clear();
        let prices = match level {
            Some(_) => QUEUE_PRICES,
            None => BUCKET_PRICES,
        };
        let (spent, fresh) = {
            let mut state = lane.lock();
            let spent = state.queue.pop(budget, prices, &mut out);
            let fresh = out.len();
            let resent = resends.as_mut().map_or(0, |r| {
                r.pop_due(now, budget.saturating_sub(spent), &mut out, &state.queue)
            });
            (spent + resent, fresh)
        };
        if level.is_none() {
            bucket.spend(spent);
        }
        let failed = send(&lane.channel, &out, &mut events);
        events.packets_out(out.len() - failed, out.len() - fresh);
        if let Some(r) = &mut resends {
            r.remember(&out, fresh, now);
        }
    }
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
mod tests {
    use super::*;
    use crate::config::{FileConfig, Overrides, validate};
    use crate::daemon::follow::{BYTES_PER_TOKEN, DEFAULT_RCVBUF, MIN_ROOM, hold_at};
    use crate::engine::packets::{PacketKind, SlotKey};
    use std::net::UdpSocket;

    /// Settings sending to a fresh loopback sink, which is returned too.
    fn setup(extra: &str) -> (Settings, Vec<SendChannel>, UdpSocket) {
        // A big buffer: the test's reader may be slow to run on a busy machine.
        let sink = crate::daemon::bind::reports("127.0.0.1:0".parse().unwrap(), 4 << 20).unwrap();
        sink.set_nonblocking(false).unwrap();
        sink.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let (settings, channels) = sending_to(&sink, extra);
        (settings, channels, sink)
    }

    /// Settings (the file `extra`) and their channel, sending to `gmond`.
    fn sending_to(gmond: &UdpSocket, extra: &str) -> (Settings, Vec<SendChannel>) {
        let file = FileConfig::parse(extra, std::path::Path::new("t")).unwrap();
        let port = gmond.local_addr().unwrap().port();
        let settings = validate(
            file,
            "test".into(),
            &Overrides {
                send: vec![format!("127.0.0.1:{port}")],
                ..Default::default()
            },
        )
        .unwrap();
        let channels = crate::daemon::open_channels(&settings).unwrap();
        (settings, channels)
    }

    /// `n` metrics of one host, metadata and value each.
    fn batch(n: u64) -> PacketBatch {
        let mut b = PacketBatch::default();
        for m in 0..n {
            let key = SlotKey { host: 1, metric: m };
            b.push(key, PacketKind::Metadata, |o| {
                o.extend_from_slice(&[b'M'; 8])
            });
            b.push(key, PacketKind::Value, |o| {
                o.extend_from_slice(&m.to_be_bytes())
            });
        }
        b
    }

    /// Reads the sink until it is quiet for a second.
    fn receive(sink: UdpSocket) -> std::thread::JoinHandle<Vec<Vec<u8>>> {
        std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut buf = [0u8; 64];
            while let Ok(n) = sink.recv(&mut buf) {
                got.push(buf[..n].to_vec());
            }
            got
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unpaced_sends_everything_metadata_first_and_drains_at_stop() {
        let (settings, channels, sink) = setup("max_send_rate = 0\n");
        let counters = Arc::new(Counters::default());
        let senders = Senders::start(&settings, channels, counters.clone());
        let events = Events::new(&counters, Duration::from_secs(60));
        let sink = receive(sink);
        senders.outbox.queue(&batch(300), Instant::now(), &events);
        senders.drain(Instant::now() + Duration::from_secs(5)).await;
        let got = sink.join().unwrap();
        assert_eq!(got.len(), 600);
        for (m, pair) in got.chunks(2).enumerate() {
            assert_eq!(pair[0], [b'M'; 8]);
            assert_eq!(pair[1], (m as u64).to_be_bytes());
        }
        assert_eq!(counters.snapshot().packets_unsent, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn paced_sends_at_most_burst_plus_rate_and_stops_at_the_deadline() {
        let (settings, channels, sink) =
            setup("max_send_rate = 2000\nsend_burst = 20\nfollow_gmond_queue = false\n");
        let counters = Arc::new(Counters::default());
        let senders = Senders::start(&settings, channels, counters.clone());
        let events = Events::new(&counters, Duration::from_secs(60));
        let sink = receive(sink);
        let start = Instant::now();
        senders.outbox.queue(&batch(500), start, &events);
        // A second report of the same metrics while the first waits:
        // replaces the queued values, the queue does not grow.
        senders.outbox.queue(&batch(500), start, &events);
        assert!(senders.outbox.stats(Instant::now()).packets <= 1000);
        assert!(counters.snapshot().packets_conflated >= 900);
        senders.drain(start + Duration::from_millis(200)).await;
        let took = start.elapsed();
        let packets = sink.join().unwrap();
        let got = packets.len();
        // 20 tokens at once, then 2,000/s: about 420 in 0.2 s, a metadata
        // packet METADATA_COST of them; never more than the bucket allows
        // in the time it had (the last packet may overdraw it). (The lower
        // bounds leave room for a loaded machine that starves the sender's
        // thread.)
        let tokens: usize = packets
            .iter()
            .map(|p| if p == &[b'M'; 8] { METADATA_COST } else { 1 })
            .sum();
        let allowed = 20.0 + 2000.0 * took.as_secs_f64() + METADATA_COST as f64;
        assert!(tokens as f64 <= allowed, "{tokens} tokens sent in {took:?}");
        assert!(got >= 50, "{got} sent in {took:?}");
        assert!(took < Duration::from_secs(1), "{took:?}");
        // Every packet queued was sent, replaced by a newer one, or counted unsent.
        let c = counters.snapshot();
        assert_eq!(got as u64 + c.packets_unsent + c.packets_conflated, 2000);
    }

    /// The bucket itself, at chosen instants: its burst at once, then its
    /// rate, exactly (the socket test above can only bound it below, for a
    /// loaded machine may starve its thread).
    #[test]
    fn the_bucket_gives_its_burst_then_its_rate() {
        let t0 = Instant::now();
        let pace = Pace {
            rate: 2000,
            burst: 20,
            follow: false,
            resend_after: None,
        };
        let mut bucket = Bucket {
            pace,
            tokens: 20.0,
            filled_at: t0,
        };
        let mut spent = 0;
        for ms in 0..=200 {
            if let Ok(n) = bucket.take(t0 + Duration::from_millis(ms)) {
                bucket.spend(n);
                spent += n;
            }
        }
        // 20 at once, then 2 a millisecond for 200 ms (a fraction of a
        // token may be left over).
        assert!((419..=420).contains(&spent), "{spent}");
        // Idle, it fills up to its burst and no further.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(bucket.take(later), Ok(20));
        bucket.spend(20);
        // Empty: how long until the next token, at least a tick.
        assert_eq!(
            bucket.take(later),
            Err(TICK.max(Duration::from_micros(500)))
        );
    }

    /// The sink's row in the kernel's table: (bytes queued, drops).
    fn queue_of(sink: &UdpSocket) -> (u64, u64) {
        let addr = sink.local_addr().unwrap();
        let text = std::fs::read_to_string(crate::proc_udp::TABLES[0]).unwrap();
        let row = crate::proc_udp::rows(&text)
            .find(|r| r.local == addr)
            .unwrap();
        (row.rx_queue, row.drops)
    }

    /// A gmond on this host that stops reading (as while gmetad polls it)
    /// loses nothing: the sender holds what does not fit below hold_at in
    /// its receive queue, whatever max_send_rate says, and sends the rest
    /// as soon as it reads again. The kernel's own drop count is the judge.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deaf_gmond_on_this_host_is_held_for_and_loses_nothing() {
        // The stock buffer a gmond has (212,992 bytes: about 250 packets);
        // 3,000 packets, unpaced, would overflow it twelve times over.
        let gmond = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (settings, channels) = sending_to(&gmond, "max_send_rate = 0\n");
        let counters = Arc::new(Counters::default());
        let senders = Senders::start(&settings, channels, counters.clone());
        let events = Events::new(&counters, Duration::from_secs(60));
        senders.outbox.queue(&batch(1500), Instant::now(), &events);
        // Deaf for 300 ms: the queue fills to hold_at, then the sender holds.
        std::thread::sleep(Duration::from_millis(300));
        let (queued, drops) = queue_of(&gmond);
        assert_eq!(drops, 0);
        let hold = hold_at(DEFAULT_RCVBUF);
        assert!(
            queued <= hold && queued > hold - (MIN_ROOM as u64 + 2) * BYTES_PER_TOKEN,
            "{queued} bytes in gmond's queue"
        );
        let held = counters.snapshot();
        assert!(held.send_held >= 200, "{held:?}");
        assert!(held.packets_sent < 300, "{held:?}");
        // gmond reads again: everything arrives, in order.
        gmond
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        while got.len() < 3000 {
            let n = gmond.recv(&mut buf).expect("the held packets arrive");
            got.push(buf[..n].to_vec());
        }
        for (m, pair) in got.chunks(2).enumerate() {
            assert_eq!(pair[0], [b'M'; 8]);
            assert_eq!(pair[1], (m as u64).to_be_bytes());
        }
        assert_eq!(queue_of(&gmond).1, 0);
        senders.drain(Instant::now() + Duration::from_secs(1)).await;
        let c = counters.snapshot();
        assert_eq!(
            (c.packets_sent, c.packets_unsent, c.packets_resent),
            (3000, 0, 0)
        );
    }

    /// A gmond that never reads again: a stop still takes drain_timeout,
    /// and what was held is counted unsent.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stop_while_held_takes_at_most_drain_timeout() {
        let gmond = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (settings, channels) = sending_to(&gmond, "");
        let counters = Arc::new(Counters::default());
        let senders = Senders::start(&settings, channels, counters.clone());
        let events = Events::new(&counters, Duration::from_secs(60));
        senders.outbox.queue(&batch(1000), Instant::now(), &events);
        std::thread::sleep(Duration::from_millis(100));
        let start = Instant::now();
        senders.drain(start + Duration::from_millis(300)).await;
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_secs(2),
            "{took:?}"
        );
        let c = counters.snapshot();
        assert_eq!(queue_of(&gmond).1, 0);
        assert!(c.packets_sent > 50 && c.packets_sent < 300, "{c:?}");
        assert_eq!(c.packets_sent + c.packets_unsent, 2000, "{c:?}");
    }

    /// resend_after: each packet goes out a second time that long after the
    /// first, and never after a newer one of its metric: a metric sent again
    /// meanwhile has its newer packet sent again, in the first one's place.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn resend_after_sends_each_packet_again_unless_a_newer_one_went() {
        let (settings, channels, sink) = setup("follow_gmond_queue = false\nresend_after = 1\n");
        let counters = Arc::new(Counters::default());
        let senders = Senders::start(&settings, channels, counters.clone());
        let events = Events::new(&counters, Duration::from_secs(60));
        sink.set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        let mut buf = [0u8; 64];
        let mut recv = || {
            sink.recv(&mut buf)
                .map(|n| (buf[..n].to_vec(), Instant::now()))
        };
        let t0 = Instant::now();
        senders.outbox.queue(&batch(3), t0, &events);
        let first: Vec<_> = (0..6).map(|_| recv().unwrap()).collect();
        // Metric 1 gets a newer value 0.5 s later: its first value is not
        // sent again; the newer one is, in its place.
        std::thread::sleep(Duration::from_millis(500));
        let mut newer = PacketBatch::default();
        newer.push(SlotKey { host: 1, metric: 1 }, PacketKind::Value, |o| {
            o.extend_from_slice(b"newer")
        });
        let t1 = Instant::now();
        senders.outbox.queue(&newer, t1, &events);
        let mut rest = Vec::new();
        while let Ok(p) = recv() {
            rest.push(p);
        }
        senders.drain(Instant::now()).await;
        let bytes = |v: &[(Vec<u8>, Instant)]| v.iter().map(|p| p.0.clone()).collect::<Vec<_>>();
        assert_eq!(
            bytes(&first),
            [
                b"MMMMMMMM".to_vec(),
                0u64.to_be_bytes().to_vec(),
                b"MMMMMMMM".to_vec(),
                1u64.to_be_bytes().to_vec(),
                b"MMMMMMMM".to_vec(),
                2u64.to_be_bytes().to_vec(),
            ]
        );
        assert_eq!(
            bytes(&rest),
            [
                b"newer".to_vec(),
                // One second after the first copies, the second ones, with
                // metric 1's newer value in place of its first.
                b"MMMMMMMM".to_vec(),
                0u64.to_be_bytes().to_vec(),
                b"MMMMMMMM".to_vec(),
                b"newer".to_vec(),
                b"MMMMMMMM".to_vec(),
                2u64.to_be_bytes().to_vec(),
            ]
        );
        let after = |p: &(Vec<u8>, Instant), t: Instant| p.1.duration_since(t);
        // Never before resend_after; late only by what a loaded machine
        // takes to run the sender's thread (1,400 ms failed once in a run
        // beside a compile: 3 s is still well short of a second interval).
        assert!(after(&rest[1], t0) >= Duration::from_secs(1));
        assert!(after(&rest[1], t0) < Duration::from_secs(3));
        let c = counters.snapshot();
        assert_eq!((c.packets_sent, c.packets_resent), (13, 6));
    }

    /// A multicast group gets no second copies (every member would take
    /// twice the packets); a unicast address that cannot be followed does.
    #[test]
    fn second_copies_go_to_unicast_channels_only() {
        let pace = Pace {
            rate: 40_000,
            burst: 100,
            follow: true,
            resend_after: Some(Duration::from_secs(3)),
        };
        let group = SendChannel::open(&crate::ganglia::channel::ChannelSpec::unicast(
            "239.2.11.71",
            8649,
        ))
        .unwrap();
        assert!(matches!(
            Mode::choose(&group, pace),
            Mode::Bucket { resend: None }
        ));
        let remote = SendChannel::open(&crate::ganglia::channel::ChannelSpec::unicast(
            "198.51.100.1",
            8649,
        ))
        .unwrap();
        assert!(matches!(
            Mode::choose(&remote, pace),
            Mode::Bucket { resend: Some(d) } if d == Duration::from_secs(3)
        ));
        let local = SendChannel::open(&crate::ganglia::channel::ChannelSpec::unicast(
            "127.0.0.1",
            8649,
        ))
        .unwrap();
        assert!(matches!(Mode::choose(&local, pace), Mode::Follow(_)));
    }
}
