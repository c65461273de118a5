//! Delivery into a real gmond: the paced, conflating send queue. (The
//! bounded stop needs no gmond: `src/daemon/tests.rs`. Capacity figures are
//! the load tool's: `cargo run --release -p xrd2ganglia-load -- --only gmond`; these tests
//! check behaviour.)

use xrd2ganglia_testkit as common;

use std::time::{Duration, Instant};

use common::{Gateway, Gmond, fixture};

/// The gateway's last counters line, as `name -> value`.
fn final_counters(log: &str) -> std::collections::HashMap<String, u64> {
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("stopped; counters:"))
        .unwrap_or_else(|| panic!("no final counters line: {log}"));
    line.split_whitespace()
        .filter_map(|f| f.split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

/// A real loaded data server's record, as server `i` would send it.
fn server_record(i: usize) -> Vec<u8> {
    let text = String::from_utf8(fixture("ds_loaded.xml")).unwrap();
    text.replace(
        "src=\"vm:21194\"",
        &format!("src=\"ds{i}.example.org:1094\""),
    )
    .into_bytes()
}

fn server_ip(i: usize) -> String {
    format!("127.0.{}.{}", 1 + i / 250, 1 + i % 250)
}

#[test]
fn a_newer_value_replaces_a_queued_one_and_gmond_shows_the_latest() {
    let gmond = Gmond::start();
    // The token bucket at 100 packets/s: a report of this server is about 110 packets, so
    // reports sent 10 ms apart wait in the queue behind the first.
    let mut gw = Gateway::start(
        gmond.port,
        "follow_gmond_queue = false\nmax_send_rate = 100\nsend_burst = 10\nstats_interval = 0\nself_metrics_interval = 0\n",
    );
    let text = String::from_utf8(server_record(1)).unwrap();
    let link_in = |n: u64| {
        let start = text.find("<in>").unwrap() + 4;
        let end = start + text[start..].find('<').unwrap();
        format!("{}{}{}", &text[..start], 157_410 + n * 1000, &text[end..])
    };
    for n in 0..20 {
        gw.send_as(&server_ip(1), link_in(n).as_bytes());
        std::thread::sleep(Duration::from_millis(10));
    }
    // Every metric of the record (92 and the heartbeat, as `xrd2ganglia
    // dump` lists them: 102 before report times and raw CPU halves were
    // left out by default, 96 before xrootd.aio.num/max, ofs.ser and
    // poll.int, always 0 upstream, were), with its metadata, and link.in
    // at its last value.
    let last = (157_410 + 19 * 1000).to_string();
    let x = gmond.wait_for(Duration::from_secs(20), "every metric, link.in last", |x| {
        x.hosts.get("ds1.example.org").is_some_and(|h| {
            h.metrics.len() == 92
                && h.metrics
                    .get("xrootd.ds.link.in")
                    .is_some_and(|m| m.get("VAL") == last)
        })
    });
    assert_eq!(
        x.metric("ds1.example.org", "xrootd.ds.link.in").get("VAL"),
        last
    );
    let status = gw.proc.terminate();
    assert!(status.success());
    let c = final_counters(&gw.proc.log_text());
    // 20 reports of ~110 value packets: most were replaced while queued.
    assert!(c["packets_conflated"] > 1000, "{c:?}");
    assert_eq!(c["packets_unsent"], 0, "{c:?}");
}

/// Datagrams the kernel dropped at the UDP socket on `port` (the last
/// column of its row in /proc/net/udp: the kernel's count, not ours).
fn drops_at(port: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/udp").unwrap();
    let port = format!(":{port:04X} ");
    table
        .lines()
        .skip(1)
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|a| format!("{a} ").ends_with(&port))
        })
        .map(|l| l.split_whitespace().last().unwrap().parse::<u64>().unwrap())
        .sum()
}

fn signal(pid: u32, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {sig} {pid}");
}

/// 100 servers' first reports (about 19,400 packets: the stock buffer holds
/// about 250) sent while a real gmond does not read, as while gmetad polls
/// it (here stopped with SIGSTOP, for 2 s); then it reads again. Returns
/// gmond's drops, how many hosts show every metric with link.in as its
/// record says, and the gateway's final counters.
fn deaf_gmond_during_a_burst(config: &str) -> (u64, usize, std::collections::HashMap<String, u64>) {
    let gmond = Gmond::start();
    let mut gw = Gateway::start(
        gmond.port,
        &format!("{config}stats_interval = 0\nself_metrics_interval = 0\n"),
    );
    let before = drops_at(gmond.port);
    let pid = gmond.proc.child.id();
    signal(pid, "-STOP");
    for i in 0..100 {
        gw.send_as(&server_ip(i), &server_record(i));
    }
    std::thread::sleep(Duration::from_secs(2));
    signal(pid, "-CONT");
    // link.in as the record's text says (not as our parser reads it).
    let text = String::from_utf8(server_record(0)).unwrap();
    let start = text.find("<in>").unwrap() + 4;
    let link_in = &text[start..start + text[start..].find('<').unwrap()];
    let whole = |x: &common::GangliaXml, i: usize| {
        x.hosts.get(&format!("ds{i}.example.org")).is_some_and(|h| {
            h.metrics.len() == 92
                && h.metrics
                    .get("xrootd.ds.link.in")
                    .is_some_and(|m| m.get("VAL") == link_in)
        })
    };
    // Everything sent is in gmond within 10 s, or never will be.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut x = gmond.xml();
    while Instant::now() < deadline && !(0..100).all(|i| whole(&x, i)) {
        std::thread::sleep(Duration::from_millis(500));
        x = gmond.xml();
    }
    let hosts = (0..100).filter(|&i| whole(&x, i)).count();
    let status = gw.proc.terminate();
    let log = gw.proc.log_text();
    assert!(status.success(), "{log}");
    (drops_at(gmond.port) - before, hosts, final_counters(&log))
}

#[test]
fn a_gmond_on_this_host_that_stops_reading_loses_nothing() {
    let (drops, hosts, c) = deaf_gmond_during_a_burst("");
    assert_eq!(drops, 0, "{c:?}");
    assert_eq!(hosts, 100, "{c:?}");
    // The sender held (gmond's queue was full for most of the 2 s), and
    // sent every packet once; none was left.
    assert!(c["send_held"] >= 1000, "{c:?}");
    assert_eq!(
        c["packets_sent"],
        c["metadata_packets"] + c["value_packets"],
        "{c:?}"
    );
    assert_eq!((c["packets_unsent"], c["packets_resent"]), (0, 0), "{c:?}");
}

/// The control: the same deafness without following gmond's queue (nor
/// second copies) loses packets, so the test above can fail.
#[test]
fn without_following_its_queue_a_deaf_gmond_drops_packets() {
    let (drops, hosts, c) =
        deaf_gmond_during_a_burst("follow_gmond_queue = false\nresend_after = 0\n");
    assert!(drops > 1000, "{drops} drops; {c:?}");
    assert!(hosts < 100, "{hosts} hosts whole; {c:?}");
    assert_eq!(c["send_held"], 0, "{c:?}");
}

#[test]
fn the_log_says_once_how_each_channel_sends() {
    let gmond = Gmond::start();
    for (config, says) in [
        (
            "",
            "follows the receive queue of gmond on this host (asked of the kernel by netlink sock_diag)",
        ),
        (
            "follow_gmond_queue = false\nresend_after = 3\n",
            "paced at 40000 packets/s, 100 back to back (max_send_rate, send_burst); each packet sent again after 3 s (resend_after) (follow_gmond_queue = false)",
        ),
    ] {
        let mut gw = Gateway::start(gmond.port, &format!("{config}stats_interval = 0\n"));
        gw.proc.terminate();
        let log = gw.proc.log_text();
        assert_eq!(log.matches(says).count(), 1, "{log}");
    }
}
