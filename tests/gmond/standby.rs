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

fn paired(gmond: &Gmond, own: u16, peer: u16, standby: bool) -> Gateway {
    let config = format!(
        "{CONFIG}peer = \"127.0.0.1:{peer}\"\npeer_listen = [\"127.0.0.1:{own}\"]\npeer_standby = {standby}\n"
    );
    Gateway::start(gmond.port, &config)
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
    // The active one crashes; the standby sends once it has heard
    // nothing for 10 s.
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
