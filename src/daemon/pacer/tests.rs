//! The pacer at chosen instants: no socket, no sleep. The sender driven by
//! it over a real send queue, at chosen instants too, is in
//! `daemon/sender/tests.rs`.

use super::*;
use crate::daemon::follow::DEFAULT_RCVBUF;

fn pace(rate: u64, burst: usize) -> Pace {
    Pace {
        rate,
        burst,
        follow: false,
        resend_after: None,
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

fn queued(n: usize) -> QueueState {
    QueueState {
        queued: n,
        ..QueueState::default()
    }
}

/// A stock gmond's queue: empty, or past hold_at (full).
const EMPTY: Level = Level {
    queued: 0,
    capacity: DEFAULT_RCVBUF,
};
const FULL: Level = Level {
    queued: DEFAULT_RCVBUF,
    capacity: DEFAULT_RCVBUF,
};

/// The bucket itself, at chosen instants: its burst at once, then its
/// rate, exactly.
#[test]
fn the_bucket_gives_its_burst_then_its_rate() {
    let t0 = Instant::now();
    let mut bucket = Bucket::new(pace(2000, 20), t0);
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

/// Unpaced (max_send_rate = 0): a chunk at a time, never a wait.
#[test]
fn unpaced_sends_a_chunk_at_a_time() {
    let t0 = Instant::now();
    let mut p = Pacer::new(pace(0, 1), t0);
    for i in 0..1000 {
        let step = p.next(t0, None, queued(5000));
        assert_eq!(
            step.decision,
            Decision::Send {
                budget: UNPACED_CHUNK,
                prices: BUCKET_PRICES
            },
            "step {i}"
        );
        p.sent(UNPACED_CHUNK);
    }
}

/// With nothing queued the sender waits for a packet, or until the next
/// second copy is due; stopped, it ends, and copies not yet due (or due)
/// are dropped.
#[test]
fn nothing_queued_waits_for_work_or_the_next_copy_and_a_stop_ends_it() {
    let t0 = Instant::now();
    let mut p = Pacer::new(pace(2000, 20), t0);
    let idle = p.next(t0, None, QueueState::default());
    assert_eq!(idle.decision, Decision::Idle(None));
    let due = t0 + Duration::from_secs(1);
    let copy = QueueState {
        copy_due: Some(due),
        ..QueueState::default()
    };
    assert!(!copy.has_work(t0));
    assert_eq!(p.next(t0, None, copy).decision, Decision::Idle(Some(due)));
    // At its time the copy goes, as the bucket allows.
    assert!(copy.has_work(due));
    assert_eq!(
        p.next(due, None, copy).decision,
        Decision::Send {
            budget: 20,
            prices: BUCKET_PRICES
        }
    );
    let stopped = QueueState {
        deadline: Some(due + ms(500)),
        ..copy
    };
    assert!(!stopped.has_work(t0));
    assert_eq!(p.next(t0, None, stopped).decision, Decision::Done);
    assert!(!stopped.has_work(due));
    assert_eq!(p.next(due, None, stopped).decision, Decision::Done);
}

/// At stop: packets queued go until the deadline, paced as before; no wait
/// ends after the deadline, and at it what is left is given up.
#[test]
fn a_stop_gives_up_at_its_deadline_and_no_wait_passes_it() {
    let t0 = Instant::now();
    // One packet a second: the next token is a second away.
    let mut p = Pacer::new(pace(1, 1), t0);
    let end = t0 + ms(300);
    let stopping = QueueState {
        queued: 10,
        deadline: Some(end),
        copy_due: None,
    };
    assert!(stopping.has_work(t0));
    assert_eq!(
        p.next(t0, None, stopping).decision,
        Decision::Send {
            budget: 1,
            prices: BUCKET_PRICES
        }
    );
    p.sent(1);
    assert_eq!(p.next(t0, None, stopping).decision, Decision::Wait(end));
    assert!(!stopping.has_work(end));
    assert_eq!(p.next(end, None, stopping).decision, Decision::GiveUp);
    // Without a stop the same wait is the whole second.
    let mut p = Pacer::new(pace(1, 1), t0);
    p.next(t0, None, queued(10));
    p.sent(1);
    assert_eq!(
        p.next(t0, None, queued(10)).decision,
        Decision::Wait(t0 + Duration::from_secs(1))
    );
}

/// A gmond that never reads again: the sender holds, tick by tick, until
/// the stop's deadline and gives up at it, exactly: a stop while held
/// takes drain_timeout (300 ms here), and every millisecond of it is
/// counted held. (The socket test in `daemon/sender/tests.rs` sees the
/// same through the kernel; this is where its timing is checked.)
#[test]
fn a_stop_while_held_takes_drain_timeout_exactly() {
    let t0 = Instant::now();
    let mut p = Pacer::new(pace(40_000, 100), t0);
    let end = t0 + ms(300);
    let state = QueueState {
        queued: 1000,
        deadline: Some(end),
        copy_due: None,
    };
    let (mut now, mut held_ms) = (t0, 0);
    let took = loop {
        let step = p.next(now, Some(FULL), state);
        held_ms += step.held.map_or(0, |h| h.ms);
        match step.decision {
            Decision::Hold(until) => {
                assert!(until > now && until <= end, "{until:?}");
                now = until;
            }
            Decision::GiveUp => break now - t0,
            other => panic!("{other:?} at {:?}", now - t0),
        }
    };
    assert!(took >= ms(300) && took < Duration::from_secs(2), "{took:?}");
    assert_eq!(took, ms(300));
    assert_eq!(held_ms, 300);
}

/// Following gmond's queue: what fits below hold_at goes (a chunk at most),
/// priced by the room metadata takes there, and the bucket is not spent;
/// a full queue is held for, the time counted at the next step, in whole
/// milliseconds with the rest carried; a queue with room ends the hold.
#[test]
fn following_gmond_sends_what_fits_and_holds_while_it_is_full() {
    let t0 = Instant::now();
    let mut p = Pacer::new(pace(2000, 20), t0);
    let room = p.next(t0, Some(EMPTY), queued(3000));
    // A stock buffer: 124 tokens below hold_at (follow.rs).
    assert_eq!(
        room,
        Step {
            decision: Decision::Send {
                budget: 124,
                prices: QUEUE_PRICES
            },
            held: None
        }
    );
    p.sent(124);
    // The bucket is still full: gmond gone (no socket), it paces.
    assert_eq!(
        p.next(t0, None, queued(3000)).decision,
        Decision::Send {
            budget: 20,
            prices: BUCKET_PRICES
        }
    );
    p.sent(20);
    // Full: hold a tick. Counted when the sender is back, 3 ms later
    // (a busy machine ran it late): 3 ms held, stalled 3 ms.
    let t1 = t0 + ms(10);
    let hold = p.next(t1, Some(FULL), queued(3000));
    assert_eq!(hold.decision, Decision::Hold(t1 + TICK));
    assert_eq!(hold.held, None);
    let again = p.next(t1 + ms(3), Some(FULL), queued(3000));
    assert_eq!(again.decision, Decision::Hold(t1 + ms(4)));
    let held = |ms, stalled| Some(Held { ms, stalled });
    assert_eq!(again.held, held(3, ms(3)));
    // 700 us, then 600 us: 1 ms counted, 300 us carried.
    let t2 = t1 + ms(3) + us(700);
    assert_eq!(p.next(t2, Some(FULL), queued(3000)).held, held(0, us(3700)));
    let t3 = t2 + us(600);
    let sends = p.next(t3, Some(EMPTY), queued(3000));
    assert_eq!(sends.held, held(1, us(4300)));
    assert!(matches!(sends.decision, Decision::Send { budget: 124, .. }));
    // A new hold stalls from its own start.
    let t4 = t3 + ms(100);
    p.next(t4, Some(FULL), queued(3000));
    let later = p.next(t4 + ms(2), Some(FULL), queued(3000));
    assert_eq!(later.held, held(2, ms(2)));
}
