//! The senders: one thread per send channel, pacing its queue to gmond.
//!
//! gmond reads one datagram at a time, in one thread, from a socket with
//! the system's default receive buffer (about 250 small datagrams), and
//! stops reading while it writes its XML for gmetad: a few hundred packets
//! back to back overflow it, whatever the average rate (measured on gmond
//! 3.7.2; `ganglia-facts.md`, "How much gmond takes"). So the receive tasks
//! never send: they put a record's packets into each channel's
//! [`SendQueue`] (conflating, [`super::queue`]) and go back to their
//! socket. Each channel's sender owns a token bucket that persists across
//! records: at most `send_burst` packets back to back, `max_send_rate`
//! packets per second on average (0: as fast as the channel takes them),
//! a metadata packet counting as [`METADATA_COST`] value packets.
//!
//! At stop the senders get a deadline (`drain_timeout`): what is queued
//! goes out, paced, until the queue is empty or the deadline passes; the
//! rest is counted as unsent and logged.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::Settings;
use crate::events::{Counters, Events};
use crate::ganglia::channel::{SendChannel, Sent};

use super::packets::PacketBatch;
use super::queue::{Outgoing, SendQueue};

/// Packets taken from a queue per lock, unpaced (one to a few sendmmsg calls).
const UNPACED_CHUNK: usize = 256;

/// What a metadata packet costs in the token bucket, in value packets:
/// gmond spends about twice as long on one (it copies every string and
/// extra element into its tables). Measured on gmond 3.7.2 with a smooth
/// sender: the highest rate without drops was about 20,000/s for metadata
/// packets alone, 40,000/s for values alone and 30,000/s for the two
/// alternating (README, "Delivery into gmond").
pub const METADATA_COST: usize = 2;

/// The shortest pause between two sends: a thread's sleep is about this
/// precise, so packets leave in runs of rate x this (40 at 40,000/s).
const TICK: Duration = Duration::from_millis(1);

/// One send channel's queue, and how its sender is woken.
pub struct Lane {
    channel: SendChannel,
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

    fn new(channel: SendChannel) -> Lane {
        Lane {
            channel,
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
        for lane in &self.lanes {
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
            .map(|c| Arc::new(Lane::new(c)))
            .collect();
        Outbox { lanes }
    }
}

/// The senders of one set of channels (replaced whole by a reload).
pub struct Senders {
    pub outbox: Arc<Outbox>,
    threads: Vec<JoinHandle<()>>,
}

/// Pacing as configured.
#[derive(Clone, Copy, Debug)]
struct Pace {
    /// Packets per second (0: unpaced).
    rate: u64,
    /// Packets back to back at most (the bucket's size).
    burst: usize,
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
        };
        let lanes: Vec<Arc<Lane>> = channels
            .into_iter()
            .map(|c| Arc::new(Lane::new(c)))
            .collect();
        let log_interval = settings.log_interval;
        let threads = lanes
            .iter()
            .filter_map(|lane| {
                let (lane, counters) = (lane.clone(), counters.clone());
                let spawned = std::thread::Builder::new()
                    .name("xrd2ganglia-send".into())
                    .spawn(move || send_loop(&lane, pace, &counters, log_interval));
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
            outbox: Arc::new(Outbox { lanes }),
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

/// One channel's sender: takes packets from the lane's queue as the token
/// bucket allows and sends them, until stopped and drained.
fn send_loop(lane: &Lane, pace: Pace, counters: &Counters, log_interval: Duration) {
    let mut events = Events::new(counters, log_interval);
    let mut out = Outgoing::default();
    let mut tokens = pace.burst as f64;
    let mut filled_at = Instant::now();
    loop {
        let mut state = lane.lock();
        while state.queue.is_empty() {
            if state.deadline.is_some() {
                return;
            }
            state = lane.wake.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        let now = Instant::now();
        if state.deadline.is_some_and(|d| now >= d) {
            let unsent = state.queue.clear();
            drop(state);
            events.unsent_at_stop(lane.channel.label(), unsent);
            return;
        }
        let budget = if pace.rate == 0 {
            UNPACED_CHUNK
        } else {
            // An idle bucket fills up to the burst, no further.
            let elapsed = now.saturating_duration_since(filled_at).as_secs_f64();
            tokens = (tokens + elapsed * pace.rate as f64).min(pace.burst as f64);
            filled_at = now;
            if tokens < 1.0 {
                drop(state);
                let wait = Duration::from_secs_f64((1.0 - tokens) / pace.rate as f64);
                std::thread::sleep(wait.max(TICK.min(Duration::from_secs_f64(
                    pace.burst as f64 / 2.0 / pace.rate as f64,
                ))));
                continue;
            }
            tokens as usize
        };
        out.clear();
        let spent = state.queue.pop(budget, METADATA_COST, &mut out);
        drop(state);
        tokens -= spent as f64;
        send(&lane.channel, &out, &mut events);
    }
}

fn send(channel: &SendChannel, out: &Outgoing, events: &mut Events<'_>) {
    if out.is_empty() {
        return;
    }
    channel.send_all(&out.packets(), |r| match r {
        Ok(Sent::Ok) => {}
        Ok(Sent::AfterRefusal) => events.send_refused(channel.label(), channel.target()),
        Err(e) => events.send_failed(channel.label(), channel.target(), &e),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{FileConfig, Overrides, validate};
    use crate::gateway::packets::{PacketKind, SlotKey};
    use std::net::UdpSocket;

    /// Settings sending to a fresh loopback sink, which is returned too.
    fn setup(extra: &str) -> (Settings, Vec<SendChannel>, UdpSocket) {
        // A big buffer: the test's reader may be slow to run on a busy machine.
        let sink = crate::gateway::bind("127.0.0.1:0".parse().unwrap(), 4 << 20).unwrap();
        sink.set_nonblocking(false).unwrap();
        sink.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let file = FileConfig::parse(extra, std::path::Path::new("t")).unwrap();
        let port = sink.local_addr().unwrap().port();
        let settings = validate(
            file,
            "test".into(),
            &Overrides {
                send: vec![format!("127.0.0.1:{port}")],
                ..Default::default()
            },
        )
        .unwrap();
        let channels = crate::gateway::open_channels(&settings).unwrap();
        (settings, channels, sink)
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
        let (settings, channels, sink) = setup("max_send_rate = 2000\nsend_burst = 20\n");
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
        let got = sink.join().unwrap().len();
        // 20 at once, then 2,000/s: about 420 in 0.2 s; never more than
        // the bucket allows in the time it had. (The lower bounds leave
        // room for a loaded machine that starves the sender's thread.)
        let allowed = 20.0 + 2000.0 * took.as_secs_f64();
        assert!(got as f64 <= allowed, "{got} sent in {took:?}");
        assert!(got >= 100, "{got} sent in {took:?}");
        assert!(took < Duration::from_secs(1), "{took:?}");
        // Every packet queued was sent, replaced by a newer one, or counted unsent.
        let c = counters.snapshot();
        assert_eq!(got as u64 + c.packets_unsent + c.packets_conflated, 2000);
    }
}
