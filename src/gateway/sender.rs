//! The senders: one task per send channel, pacing its queue to gmond.
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

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

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

/// One send channel's queue, and how its sender is woken.
pub struct Lane {
    channel: SendChannel,
    queue: Mutex<SendQueue>,
    wake: Notify,
}

impl Lane {
    fn queue(&self) -> MutexGuard<'_, SendQueue> {
        // A panic while holding the lock leaves a queue that is still
        // consistent (every method restores its invariants before returning).
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
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
                let mut q = lane.queue();
                let was_empty = q.is_empty();
                (q.push_batch(batch, now), was_empty)
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
            let q = lane.queue();
            s.packets += q.len();
            if let Some(t) = q.oldest() {
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
            .map(|channel| {
                Arc::new(Lane {
                    channel,
                    queue: Mutex::new(SendQueue::default()),
                    wake: Notify::new(),
                })
            })
            .collect();
        Outbox { lanes }
    }

    /// The channels' labels, for the start-up log.
    pub fn labels(&self) -> Vec<String> {
        self.lanes
            .iter()
            .map(|l| l.channel.label().to_string())
            .collect()
    }
}

/// The senders of one set of channels (replaced whole by a reload).
pub struct Senders {
    pub outbox: Arc<Outbox>,
    /// None while running; the drain deadline once stopping.
    stop: watch::Sender<Option<Instant>>,
    tasks: Vec<JoinHandle<()>>,
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
    /// Starts a sender task per channel.
    pub fn start(
        settings: &Settings,
        channels: Vec<SendChannel>,
        counters: Arc<Counters>,
    ) -> Senders {
        let pace = Pace {
            rate: settings.max_send_rate,
            burst: settings.send_burst.max(1),
        };
        let (stop, stop_rx) = watch::channel(None);
        let lanes: Vec<Arc<Lane>> = channels
            .into_iter()
            .map(|channel| {
                Arc::new(Lane {
                    channel,
                    queue: Mutex::new(SendQueue::default()),
                    wake: Notify::new(),
                })
            })
            .collect();
        let tasks = lanes
            .iter()
            .map(|lane| {
                tokio::spawn(send_loop(
                    lane.clone(),
                    pace,
                    counters.clone(),
                    settings.log_interval,
                    stop_rx.clone(),
                ))
            })
            .collect();
        Senders {
            outbox: Arc::new(Outbox { lanes }),
            stop,
            tasks,
        }
    }

    /// Sends what is queued until `deadline`, then stops the tasks.
    pub async fn drain(self, deadline: Instant) {
        let _ = self.stop.send(Some(deadline));
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// One channel's sender: takes packets from the lane's queue as the token
/// bucket allows and sends them.
async fn send_loop(
    lane: Arc<Lane>,
    pace: Pace,
    counters: Arc<Counters>,
    log_interval: Duration,
    mut stop: watch::Receiver<Option<Instant>>,
) {
    let mut events = Events::new(&counters, log_interval);
    let mut out = Outgoing::default();
    let mut tokens = pace.burst as f64;
    let mut filled_at = Instant::now();
    loop {
        let deadline = *stop.borrow_and_update();
        let pending = lane.queue().len();
        if pending == 0 {
            if deadline.is_some() {
                return;
            }
            tokio::select! {
                _ = lane.wake.notified() => {}
                _ = stop.changed() => {}
            }
            continue;
        }
        let now = Instant::now();
        if let Some(d) = deadline
            && now >= d
        {
            let unsent = lane.queue().clear();
            events.unsent_at_stop(lane.channel.label(), unsent);
            return;
        }
        let budget = if pace.rate == 0 {
            UNPACED_CHUNK
        } else {
            let elapsed = now.saturating_duration_since(filled_at).as_secs_f64();
            tokens = (tokens + elapsed * pace.rate as f64).min(pace.burst as f64);
            filled_at = now;
            if tokens < 1.0 {
                // The timer's granularity is about a millisecond: a wait
                // shorter than that comes back with a millisecond's tokens.
                let wait = Duration::from_secs_f64((1.0 - tokens) / pace.rate as f64);
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.changed() => {}
                }
                continue;
            }
            tokens as usize
        };
        out.clear();
        let spent = lane.queue().pop(budget, METADATA_COST, &mut out);
        tokens -= spent as f64;
        send(&lane.channel, &out, &mut events);
        if pace.rate == 0 {
            // Let the receive tasks in between chunks.
            tokio::task::yield_now().await;
        }
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
        // the bucket allows in the time it had.
        let allowed = 20.0 + 2000.0 * took.as_secs_f64();
        assert!(got as f64 <= allowed, "{got} sent in {took:?}");
        assert!(got >= 200, "{got} sent in {took:?}");
        assert!(took < Duration::from_millis(400), "{took:?}");
        // Every packet queued was sent, replaced by a newer one, or counted unsent.
        let c = counters.snapshot();
        assert_eq!(got as u64 + c.packets_unsent + c.packets_conflated, 2000);
    }
}
