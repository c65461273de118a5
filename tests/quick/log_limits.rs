//! What an admin reads in the log under a flood: at most one line per
//! reason per `log_interval`, whoever sends (issue 34, item 12: 5,000
//! refused datagrams from 5,000 addresses wrote 5,000 WARN lines; 500
//! refused TCP connections, 500), with how many more were left out and
//! from which addresses.
//!
//! The gateway is started by the test and stopped by its own pid.

use xrd2ganglia_testkit as common;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::status::status_json;
use common::{Gateway, free_port, send_from, wait_for};

/// Waits until the gateway's `counter` (as `status` reads it from its
/// control socket) is `value`: every datagram or connection sent is
/// counted, and the log line of each reason written.
fn wait_counted(gw: &Gateway, counter: &str, value: u64) {
    let socket = gw.config.parent().unwrap().join("control");
    wait_for(
        &format!("{counter} = {value}"),
        Duration::from_secs(10),
        || {
            let counters = &status_json(&socket)["counters"];
            (counters[counter].as_u64() == Some(value)).then_some(())
        },
    );
}

/// A loopback address of its own for sender `i` (127.1.0.1 on).
fn address(net: u8, i: u32) -> String {
    format!("127.{net}.{}.{}", i / 250, i % 250 + 1)
}

/// A TCP connection to `to` from `from` (any port), then closed.
fn connect_from(from: &str, to: SocketAddr) {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let local: SocketAddr = format!("{from}:0").parse().unwrap();
    socket.bind(&local.into()).unwrap();
    socket
        .connect_timeout(&to.into(), Duration::from_secs(5))
        .unwrap();
    let _ = TcpStream::from(socket);
}

#[test]
fn refusals_from_thousands_of_addresses_are_one_line_per_reason() {
    const DATAGRAMS: u32 = 5_000;
    const CONNECTIONS: u32 = 500;
    let xml_port = free_port();
    let mut gw = Gateway::start_xml(
        free_port(),
        xml_port,
        Some(free_port()),
        "allow = [\"10.0.0.0/8\"]\nxml_allow = [\"127.0.0.1/32\"]\nlog_interval = 3600\n\
         stats_interval = 0\nself_metrics_interval = 0\n",
    );
    let to = format!("127.0.0.1:{}", gw.port);
    for i in 0..DATAGRAMS {
        send_from(&format!("{}:0", address(1, i)), &to, b"<statistics/>");
    }
    let xml: SocketAddr = format!("127.0.0.1:{xml_port}").parse().unwrap();
    for i in 0..CONNECTIONS {
        connect_from(&address(2, i), xml);
    }
    // Every one counted before the stop (the counters line at the stop
    // says so too): then the log is whole.
    let deadline = Instant::now() + Duration::from_secs(10);
    wait_counted(&gw, "denied", DATAGRAMS as u64);
    wait_counted(&gw, "xml_denied", CONNECTIONS as u64);
    assert!(gw.proc.terminate().success());
    assert!(Instant::now() < deadline);
    let log = gw.proc.log_text();
    let stopped = log
        .lines()
        .find(|l| l.contains("stopped; counters:"))
        .unwrap_or_else(|| panic!("no counters at the stop: {log}"));
    assert!(
        stopped.contains(&format!(" denied={DATAGRAMS} ")),
        "{stopped}"
    );
    assert!(
        stopped.contains(&format!(" xml_denied={CONNECTIONS} ")),
        "{stopped}"
    );
    let denied = log
        .lines()
        .filter(|l| l.contains("datagram dropped: sender not in `allow`"))
        .count();
    assert_eq!(denied, 1, "one line for {DATAGRAMS} senders:\n{log}");
    let xml_denied = log
        .lines()
        .filter(|l| l.contains("is not in xml_allow"))
        .count();
    assert_eq!(
        xml_denied, 1,
        "one line for {CONNECTIONS} connections:\n{log}"
    );
}

/// A flood of new senders at `max_sources` evicts a tenth again and
/// again (one or two sources at a time at 10): that is one line per
/// `log_interval` too, not one per eviction (found trying issue 34's
/// fixes: 1,300 senders at `max_sources = 1000` wrote 13 lines in 1.3 s;
/// this test's 300 at 10 wrote 145).
#[test]
fn a_flood_of_new_sources_is_one_eviction_line() {
    const SENDERS: u32 = 300;
    let record = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/records/ds_loaded.xml"
    ))
    .unwrap();
    let mut gw = Gateway::start_xml(
        free_port(),
        free_port(),
        None,
        "max_sources = 10\nlog_interval = 3600\nstats_interval = 0\nself_metrics_interval = 0\n",
    );
    let to = format!("127.0.0.1:{}", gw.port);
    for i in 0..SENDERS {
        send_from(&format!("{}:0", address(3, i)), &to, &record);
        if i % 20 == 19 {
            // Paced: each is taken (and evicts), none dropped by the kernel.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    wait_counted(&gw, "records", SENDERS as u64);
    assert!(gw.proc.terminate().success());
    let log = gw.proc.log_text();
    let stopped = log
        .lines()
        .find(|l| l.contains("stopped; counters:"))
        .unwrap_or_else(|| panic!("no counters at the stop: {log}"));
    // Every sender past the first ten evicted one (a tenth of 10).
    let evicted = format!(" sources_evicted={} ", SENDERS - 10);
    assert!(stopped.contains(&evicted), "{evicted}: {stopped}");
    let lines = log
        .lines()
        .filter(|l| l.contains("more than 10 sources (max_sources)"))
        .count();
    assert_eq!(lines, 1, "one line for {} evictions:\n{log}", SENDERS - 10);
}
