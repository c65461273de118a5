//! Two gateways of a pair sending to one real gmond (3.7.2): one stands by
//! (`peer_standby`), so gmond never sees a counter of a server go down
//! because two gateways sent it, through a restart one of them missed,
//! the active one's crash, and its return.

use xrd2ganglia_testkit as common;

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Gateway, Gmond, free_port};

const CONFIG: &str = "metadata_interval = 2\ndmax = 0\nstats_interval = 0\nself_metrics_interval = 0\nlog_interval = 1\nfollow_gmond_queue = false\nresend_after = 0\n";

fn record(pid: u32, inb: u64) -> String {
    format!(
        r#"<statistics tod="1700000100" ver="v5.5.3" src="ds1.example.org:1094" tos="1700000000" pgm="xrootd" ins="anon" pid="{pid}" site="T2_X"><stats id="link"><num>3</num><in>{inb}</in></stats></statistics>"#
    )
}

/// A gateway of the pair on a machine of its own (its own host,
/// `xrd2ganglia@NAME`, is what the standby reads in gmond), reading
/// gmond's XML where the test's gmond serves it.
fn paired(gmond: &Gmond, own: u16, peer: u16, standby: bool) -> Gateway {
    let name = if standby { "gw2" } else { "gw1" };
    let config = format!(
        "{CONFIG}peer = \"127.0.0.1:{peer}\"\npeer_listen = [\"127.0.0.1:{own}\"]\npeer_standby = {standby}\npeer_gmond_xml = \"127.0.0.1:{}\"\n",
        gmond.xml_port
    );
    Gateway::start_xml_as(name, free_port(), free_port(), Some(gmond.port), &config)
}

fn wait_log(gw: &Gateway, text: &str, times: usize, within: Duration) {
    let deadline = Instant::now() + within;
    while gw.proc.log_text().matches(text).count() < times {
        assert!(
            Instant::now() < deadline,
            "{text:?} not logged {times} times within {within:?}:\n{}",
            gw.proc.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// gmond's `xrootd.link.in` of the server, if it has it.
fn link_in(gmond: &Gmond) -> Option<u64> {
    let x = gmond.xml();
    x.hosts
        .values()
        .find_map(|h| h.metrics.get("xrootd.link.in"))
        .and_then(|m| m.get("VAL").parse().ok())
}

#[test]
fn one_sends_the_other_stands_by_and_gmond_never_sees_a_counter_go_down() {
    let gmond = Gmond::start();
    let (p1, p2) = (free_port(), free_port());
    let mut gw1 = paired(&gmond, p1, p2, false);
    let gw2 = paired(&gmond, p2, p1, true);
    wait_log(&gw2, "standing by", 1, Duration::from_secs(10));
    // gmond's value, sampled all along.
    let seen = Arc::new(Mutex::new(Vec::<u64>::new()));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (seen, done, xml_port) = (seen.clone(), done.clone(), gmond.xml_port);
        std::thread::spawn(move || {
            while !done.load(Relaxed) {
                let text = common::read_xml(xml_port);
                let x = common::GangliaXml::parse(&text);
                if let Some(v) = x
                    .hosts
                    .values()
                    .find_map(|h| h.metrics.get("xrootd.link.in"))
                    .and_then(|m| m.get("VAL").parse::<u64>().ok())
                {
                    seen.lock().unwrap().push(v);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let both = |gws: &[&Gateway], rec: &str| {
        for gw in gws {
            gw.send(rec.as_bytes());
        }
    };
    let step = Duration::from_millis(700);
    both(&[&gw1, &gw2], &record(77, 1000));
    std::thread::sleep(step);
    both(&[&gw1, &gw2], &record(77, 2000));
    std::thread::sleep(step);
    // gw1 misses the last datagram before the restart.
    both(&[&gw2], &record(77, 3000));
    std::thread::sleep(step);
    let mut reading = 0;
    for _ in 0..6 {
        reading += 100;
        both(&[&gw1, &gw2], &record(78, reading));
        std::thread::sleep(step);
    }
    // The active one crashes; the standby sends once it has completed no
    // exchange for 3 s.
    let _ = gw1.proc.child.kill();
    let _ = gw1.proc.child.wait();
    for _ in 0..20 {
        reading += 100;
        both(&[&gw2], &record(78, reading));
        std::thread::sleep(step);
    }
    wait_log(&gw2, "sending to gmond", 1, Duration::from_secs(1));
    // gw2 publishes run 2 from 3,000 (the end of run 1 it heard).
    let want = 3000 + reading;
    gmond.wait_for(Duration::from_secs(10), "gw2's value", |_| {
        link_in(&gmond) == Some(want)
    });
    // gw1 back (a fresh machine, no state file): it pulls, and the
    // standby stands by again.
    let gw1 = paired(&gmond, p1, p2, false);
    wait_log(&gw2, "standing by", 2, Duration::from_secs(15));
    for _ in 0..5 {
        reading += 100;
        both(&[&gw1, &gw2], &record(78, reading));
        std::thread::sleep(step);
    }
    let want = 3000 + reading;
    gmond.wait_for(Duration::from_secs(10), "gw1's value", |_| {
        link_in(&gmond) == Some(want)
    });
    done.store(true, Relaxed);
    sampler.join().unwrap();
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() > 20, "{seen:?}");
    for w in seen.windows(2) {
        assert!(w[1] >= w[0], "gmond's link.in went down: {seen:?}");
    }
    drop(gw1);
}

/// gmond's `xrootd.link.in`, read every 100 ms until `until` says stop;
/// every value read.
fn sample_until(gmond: &Gmond, mut until: impl FnMut(u64) -> bool, within: Duration) -> Vec<u64> {
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    loop {
        if let Some(v) = link_in(gmond) {
            seen.push(v);
            if until(v) {
                return seen;
            }
        }
        assert!(Instant::now() < deadline, "not within {within:?}: {seen:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A server reporting to the gateways every 200 ms, its reading growing by
/// 100 each time (what it last sent is in `reading`), until `stop`.
fn report_every_200ms(to: &[&Gateway], reading: &std::sync::atomic::AtomicU64, stop: &AtomicBool) {
    while !stop.load(Relaxed) {
        let r = reading.fetch_add(100, Relaxed) + 100;
        for gw in to {
            gw.send(record(78, r).as_bytes());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Issue 43.5: the active one killed, the standby sends within 4 s of the
/// active one's packets stopping (it takes over 3 s after their last
/// exchange; before: 10 s, and gmond's counters froze for 9.7-10.9 s).
/// The active one back: the standby gives way, and gmond's value never
/// goes down.
#[test]
fn the_standby_takes_over_within_4_s_and_gives_way_without_a_decrease() {
    use std::sync::atomic::AtomicU64;
    let gmond = Gmond::start();
    let (p1, p2) = (free_port(), free_port());
    let mut gw1 = paired(&gmond, p1, p2, false);
    let gw2 = paired(&gmond, p2, p1, true);
    wait_log(&gw2, "standing by", 1, Duration::from_secs(15));
    let reading = AtomicU64::new(1000);
    let mut seen = Vec::new();
    let both = [&gw1, &gw2];
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| report_every_200ms(&both, &reading, &stop));
        // gmond has the active one's values.
        seen.extend(sample_until(&gmond, |v| v > 2000, Duration::from_secs(10)));
        stop.store(true, Relaxed);
    });
    let _ = gw1.proc.child.kill();
    let _ = gw1.proc.child.wait();
    let killed = Instant::now();
    let frozen = *seen.last().unwrap();
    let only = [&gw2];
    let stop = AtomicBool::new(false);
    let took = std::thread::scope(|scope| {
        scope.spawn(|| report_every_200ms(&only, &reading, &stop));
        // gmond's value moves again: the standby sends.
        seen.extend(sample_until(
            &gmond,
            |v| v > frozen,
            Duration::from_secs(15),
        ));
        let took = killed.elapsed();
        stop.store(true, Relaxed);
        took
    });
    // gw1 back (its state file kept): the standby gives way.
    let gw1 = paired(&gmond, p1, p2, false);
    let back = [&gw1, &gw2];
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| report_every_200ms(&back, &reading, &stop));
        wait_log(&gw2, "standing by", 2, Duration::from_secs(20));
        let given_way = reading.load(Relaxed);
        // gw1 alone sends now: gmond follows it past the give-way.
        seen.extend(sample_until(
            &gmond,
            |v| v > 3000 + given_way,
            Duration::from_secs(10),
        ));
        stop.store(true, Relaxed);
    });
    eprintln!(
        "the standby's value reached gmond {:.2} s after the active one was killed; {} reads of gmond, no decrease",
        took.as_secs_f64(),
        seen.len()
    );
    for w in seen.windows(2) {
        assert!(w[1] >= w[0], "gmond's link.in went down: {seen:?}");
    }
    assert!(took <= Duration::from_secs(4), "took {took:?}: {seen:?}");
    drop(gw1);
}

/// A peer that answers every exchange claiming to be the active one.
/// `host`: the own host its heard frame (kind `L`) names (None: no heard
/// frame, as an older gateway's).
fn lying_peer(host: Option<&'static str>) -> (u16, Arc<AtomicBool>) {
    use std::io::{Read as _, Write as _};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let done = Arc::new(AtomicBool::new(false));
    let stop = done.clone();
    l.set_nonblocking(true).unwrap();
    // One frame of the exchange (version 2): kind, 4-byte length, payload.
    let frame = |kind: u8, payload: &[u8]| {
        let mut out = vec![kind];
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(payload);
        out
    };
    std::thread::spawn(move || {
        while !stop.load(Relaxed) {
            let Ok((mut s, _)) = l.accept() else {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            // The asker's frames, up to its end frame.
            loop {
                let mut head = [0u8; 5];
                if s.read_exact(&mut head).is_err() {
                    break;
                }
                let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
                let mut payload = vec![0u8; len];
                if s.read_exact(&mut payload).is_err() || head[0] == b'.' {
                    break;
                }
            }
            let mut answer = frame(b'H', b"xrd2ganglia-peer 3\tanswer\t0\t1");
            if let Some(h) = host {
                answer.extend(frame(b'L', format!("0\t{h}").as_bytes()));
            }
            answer.extend(frame(b'.', b""));
            let _ = s.write_all(&answer);
        }
    });
    (port, done)
}

/// Issue 42.3: a peer that answers every exchange claiming to send, but
/// whose packets never reach gmond (its own host is not in gmond's XML,
/// or it names none), cannot silence the gmond path: the standby reads
/// gmond, finds no evidence, and sends (before: 0 packets to gmond).
#[test]
fn a_peer_that_claims_to_send_but_does_not_cannot_silence_the_gmond_path() {
    use std::sync::atomic::AtomicU64;
    for named in [Some("xrd2ganglia@liar"), None] {
        let gmond = Gmond::start();
        let (liar, done) = lying_peer(named);
        let gw = paired(&gmond, free_port(), liar, true);
        // It exchanges with the liar, reads gmond, finds no sign of it.
        wait_log(&gw, "gmond does not show it", 1, Duration::from_secs(15));
        let reading = AtomicU64::new(1000);
        let stop = AtomicBool::new(false);
        let only = [&gw];
        let seen = std::thread::scope(|scope| {
            scope.spawn(|| report_every_200ms(&only, &reading, &stop));
            // gmond has the server's values all the same.
            let seen = sample_until(&gmond, |v| v > 1500, Duration::from_secs(10));
            stop.store(true, Relaxed);
            seen
        });
        let log = gw.proc.log_text();
        assert!(!log.contains("standing by"), "{log}");
        done.store(true, Relaxed);
        eprintln!(
            "a liar naming {named:?}: gmond had the server's value ({seen:?}); the gateway never stood by"
        );
    }
}
