//! The sender: end to end through real sockets where the kernel is the
//! judge (what arrives, gmond's queue and its drops), and at chosen
//! instants (its pacer over a real send queue, no socket, no sleep) where
//! time is.

use super::*;
use crate::config::file::{DEFAULT_SEND_BURST, DEFAULT_SEND_RATE};
use crate::config::{FileConfig, Overrides, validate};
use crate::daemon::follow::{BYTES_PER_TOKEN, DEFAULT_RCVBUF, MIN_ROOM, hold_at};
use crate::daemon::pacer::METADATA_COST;
use crate::engine::packets::{PacketKind, SlotKey};
use std::net::UdpSocket;

/// Settings sending to a fresh loopback sink, which is returned too.
fn setup(extra: &str) -> (Settings, Vec<SendChannel>, UdpSocket) {
    // A big buffer: everything sent waits there until the test reads it.
    let sink = crate::daemon::bind::reports("127.0.0.1:0".parse().unwrap(), 4 << 20).unwrap();
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

/// What the sink holds, read once the senders have stopped: everything
/// they sent is in its buffer by then (loopback delivers at the send).
fn read_all(sink: &UdpSocket) -> Vec<Vec<u8>> {
    sink.set_nonblocking(true).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    while let Ok(n) = sink.recv(&mut buf) {
        got.push(buf[..n].to_vec());
    }
    got
}

/// Waits until `done` says yes. The bound only ends a test that would
/// otherwise hang: a starved thread gets there later, not never.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < give_up, "never: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpaced_sends_everything_metadata_first_and_drains_at_stop() {
    let (settings, channels, sink) = setup("max_send_rate = 0\n");
    let counters = Arc::new(Counters::default());
    let senders = Senders::start(&settings, channels, counters.clone());
    let events = Events::new(&counters, Duration::from_secs(60));
    senders.outbox.queue(&batch(300), Instant::now(), &events);
    // The drain ends once the queue is empty: the deadline is only for a
    // machine so busy that the sender's thread does not run meanwhile.
    senders
        .drain(Instant::now() + Duration::from_secs(60))
        .await;
    let got = read_all(&sink);
    assert_eq!(got.len(), 600);
    for (m, pair) in got.chunks(2).enumerate() {
        assert_eq!(pair[0], [b'M'; 8]);
        assert_eq!(pair[1], (m as u64).to_be_bytes());
    }
    assert_eq!(counters.snapshot().packets_unsent, 0);
}

/// A sender run at chosen instants: its pacer, a real send queue and its
/// second copies (as `send_loop` has them), and what it sent when.
struct Simulated {
    pacer: Pacer,
    queue: SendQueue,
    resends: Option<Resends>,
    deadline: Option<Instant>,
    now: Instant,
    sent: Vec<(Vec<u8>, Instant)>,
    resent: usize,
    unsent: usize,
    ended: bool,
}

impl Simulated {
    fn new(pace: Pace, t0: Instant) -> Simulated {
        Simulated {
            pacer: Pacer::new(pace, t0),
            queue: SendQueue::starting_at(t0),
            resends: pace.resend_after.map(|after| Resends {
                after,
                queue: SendQueue::starting_at(t0),
            }),
            deadline: None,
            now: t0,
            sent: Vec::new(),
            resent: 0,
            unsent: 0,
            ended: false,
        }
    }

    /// Queues a batch now; how many packets it replaced.
    fn queue(&mut self, batch: &PacketBatch) -> u64 {
        self.queue.push_batch(batch, self.now)
    }

    /// Does what the pacer says until `t` (or the sender's end).
    fn run_until(&mut self, t: Instant) {
        while !self.ended {
            let state = QueueState {
                queued: self.queue.len(),
                deadline: self.deadline,
                copy_due: self.resends.as_ref().and_then(Resends::next_due),
            };
            match self.pacer.next(self.now, None, state).decision {
                Decision::Send { budget, prices } => self.send(budget, prices),
                Decision::Wait(until) | Decision::Hold(until) | Decision::Idle(Some(until))
                    if until <= t =>
                {
                    self.now = until
                }
                Decision::Wait(_) | Decision::Hold(_) | Decision::Idle(_) => {
                    self.now = t;
                    return;
                }
                Decision::GiveUp => {
                    self.unsent += self.queue.clear();
                    self.ended = true;
                }
                Decision::Done => self.ended = true,
            }
        }
    }

    fn send(&mut self, budget: usize, prices: Prices) {
        let mut out = Outgoing::default();
        let (spent, fresh) = take(
            &mut self.queue,
            self.resends.as_mut(),
            budget,
            prices,
            self.now,
            &mut out,
        );
        // A send decision always sends (a queued packet, or a copy due):
        // else the thread would spin.
        assert!(!out.is_empty(), "nothing sent at {:?}", self.now);
        self.pacer.sent(spent);
        let now = self.now;
        self.sent
            .extend(out.entries().map(|(_, _, bytes)| (bytes.to_vec(), now)));
        self.resent += out.len() - fresh;
        if let Some(r) = &mut self.resends {
            r.remember(&out, fresh, now);
        }
    }

    /// Stops at `deadline` (as `Senders::drain`); runs to the end.
    fn stop(&mut self, deadline: Instant) {
        self.deadline = Some(deadline);
        self.run_until(deadline + Duration::from_secs(3600));
        assert!(self.ended);
    }
}

fn pace(rate: u64, burst: usize, resend_after: Option<Duration>) -> Pace {
    Pace {
        rate,
        burst,
        follow: false,
        resend_after,
    }
}

/// Paced, a sender sends its burst, then its rate, never more than the
/// bucket allows in the time it has, and stops at the stop's deadline.
/// (Once a socket test, which could only bound it loosely: a loaded
/// machine starves the thread. Here the instants are chosen.)
#[test]
fn paced_sends_at_most_burst_plus_rate_and_stops_at_the_deadline() {
    let start = Instant::now();
    let mut s = Simulated::new(pace(2000, 20, None), start);
    let mut conflated = s.queue(&batch(500));
    // A second report of the same metrics while the first waits:
    // replaces the queued values, the queue does not grow.
    conflated += s.queue(&batch(500));
    assert!(s.queue.len() <= 1000);
    assert_eq!(s.queue.len(), 1000);
    assert!(conflated >= 900);
    assert_eq!(conflated, 1000);
    s.stop(start + Duration::from_millis(200));
    let took = s.now - start;
    let got = s.sent.len();
    // 20 tokens at once, then 2,000/s: about 420 in 0.2 s, a metadata
    // packet METADATA_COST of them; never more than the bucket allows in
    // the time it had (the last packet may overdraw it).
    let tokens: usize = s
        .sent
        .iter()
        .map(|(p, _)| if p == &[b'M'; 8] { METADATA_COST } else { 1 })
        .sum();
    let allowed = 20.0 + 2000.0 * took.as_secs_f64() + METADATA_COST as f64;
    assert!(tokens as f64 <= allowed, "{tokens} tokens sent in {took:?}");
    // The last send is at 199 ms (the deadline's step gives up): 20 + 2 a
    // millisecond for 199 ms = 418, give or take the last packet's
    // overdraft and a fraction of a token left.
    assert!(
        (418 - METADATA_COST..=418 + METADATA_COST).contains(&tokens),
        "{tokens}"
    );
    assert!(got >= 50, "{got} sent in {took:?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(took, Duration::from_millis(200));
    assert!(s.sent.iter().all(|(_, at)| *at < start + took));
    // Every packet queued was sent, replaced by a newer one, or counted unsent.
    assert_eq!(got as u64 + s.unsent as u64 + conflated, 2000);
}

/// resend_after: each packet goes out a second time that long after the
/// first, and never after a newer one of its metric: a metric sent again
/// meanwhile has its newer packet sent again, in the first one's place.
#[test]
fn resend_after_sends_each_packet_again_unless_a_newer_one_went() {
    // follow_gmond_queue = false, resend_after = 1, the default rate and burst.
    let t0 = Instant::now();
    let second = Duration::from_secs(1);
    let p = pace(DEFAULT_SEND_RATE, DEFAULT_SEND_BURST, Some(second));
    let mut s = Simulated::new(p, t0);
    s.queue(&batch(3));
    s.run_until(t0 + Duration::from_millis(500));
    let first = s.sent.split_off(0);
    // Metric 1 gets a newer value 0.5 s later: its first value is not
    // sent again; the newer one is, in its place.
    let mut newer = PacketBatch::default();
    newer.push(SlotKey { host: 1, metric: 1 }, PacketKind::Value, |o| {
        o.extend_from_slice(b"newer")
    });
    let t1 = s.now;
    s.queue(&newer);
    s.run_until(t0 + Duration::from_secs(3));
    s.stop(s.now);
    let rest = s.sent.clone();
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
    assert!(first.iter().all(|p| p.1 == t0));
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
    assert_eq!(after(&rest[0], t1), Duration::ZERO);
    // Never before resend_after, and at it (to the queue's millisecond).
    assert!(after(&rest[1], t0) >= second);
    assert!(after(&rest[1], t0) < Duration::from_secs(3));
    assert!(rest[1..].iter().all(|p| after(p, t0) == second));
    assert_eq!((first.len() + rest.len(), s.resent), (13, 6));
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
    // Deaf: the queue fills to hold_at, then the sender holds (200 ms of
    // it counted, however late its thread runs).
    wait_until("200 ms held", || counters.snapshot().send_held >= 200);
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
    // gmond reads again: everything arrives, in order. (The timeout only
    // ends a test that would hang; the sender sends as soon as it reads.)
    gmond
        .set_read_timeout(Some(Duration::from_secs(60)))
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

/// A gmond that never reads again: a stop still takes drain_timeout, and
/// what was held is counted unsent. (That it takes no more than that is
/// the pacer's: `a_stop_while_held_takes_drain_timeout_exactly`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_held_takes_at_most_drain_timeout() {
    let gmond = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (settings, channels) = sending_to(&gmond, "");
    let counters = Arc::new(Counters::default());
    let senders = Senders::start(&settings, channels, counters.clone());
    let events = Events::new(&counters, Duration::from_secs(60));
    senders.outbox.queue(&batch(1000), Instant::now(), &events);
    wait_until("the sender holds", || counters.snapshot().send_held > 0);
    let start = Instant::now();
    senders.drain(start + Duration::from_millis(300)).await;
    // Never sooner: the queue is not empty until the deadline gives it up.
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(300), "{took:?}");
    let c = counters.snapshot();
    assert_eq!(queue_of(&gmond).1, 0);
    assert!(c.packets_sent > 50 && c.packets_sent < 300, "{c:?}");
    assert_eq!(c.packets_sent + c.packets_unsent, 2000, "{c:?}");
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

#[test]
fn a_receive_task_queues_while_a_drained_lane_is_trimmed() {
    let (_settings, mut channels, _sink) = setup("");
    let lane = Lane::new(channels.remove(0), None);
    let now = Instant::now();
    // More (host, metric) slots than a drained queue keeps: draining it
    // frees them, and the heap is trimmed.
    lane.lock().queue.push_batch(&batch(5000), now);
    let mut out = Outgoing::default();
    let mut trimmed = false;
    let (spent, fresh) = lane.take(None, usize::MAX, BUCKET_PRICES, now, &mut out, || {
        trimmed = true;
        // What a receive task does meanwhile: it finds the lane free and
        // queues (it would wait for the trim if the lock were held).
        let mut state = lane
            .state
            .try_lock()
            .expect("the lane is locked during the trim");
        state.queue.push_batch(&batch(1), now);
    });
    assert!(trimmed, "a drained burst is trimmed");
    assert_eq!((out.len(), fresh), (10_000, 10_000));
    assert_eq!(spent, 5000 * (BUCKET_PRICES.metadata + 1));
    // The packets queued during the trim wait for the next send.
    assert_eq!(lane.lock().queue.len(), 2);
}
