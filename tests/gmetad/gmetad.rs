//! End to end through a real gmetad 3.7.2 and its RRDs: what a graph shows
//! for a positive-slope (counter) metric that gmetric sends to gmond.
//!
//! gmetad stores slope positive as an RRD COUNTER, so the graph shows a rate
//! per second; a counter that goes down (a restarted xrootd) is taken for a
//! 32-bit wrap and graphed as a spike of about 4.29e9 / interval, on the
//! host's graph and the cluster summary alike. This test documents that
//! problem (issue 8), with the real gmetric binary as the sender, and holds
//! our gmetric drop-in (`xrd2ganglia gmetric`) to it: sending the same
//! values as a host of its own, its RRD shows the same rate and the same
//! spike (a drop-in does what gmetric does; the gateway is what keeps
//! counters continuous, tests/gmond/beyond_gmetric.rs).

use xrd2ganglia_testkit as common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Gmetad, Gmond, Scratch, replay::unix_now};

const GMETRIC: &str = "/usr/bin/gmetric";
/// gmond's CLUSTER NAME in the harness: gmetad's directory for the cluster.
const CLUSTER: &str = "xrd2ganglia-test";
const HOST: &str = "ctr-host";
/// The host our gmetric drop-in sends as.
const OUR_HOST: &str = "ctr-host-ours";
const METRIC: &str = "xrd.test.bytes";
/// The counter's rate, per second.
const RATE: f64 = 1000.0;

/// Sends the counter with the real gmetric as spoofed host 127.0.0.9:HOST,
/// and with our drop-in, the same arguments, as 127.0.0.10:OUR_HOST.
fn gmetric(conf: &Path, value: u64) {
    let args = |host: &str| -> Vec<String> {
        let mut a = vec!["-c".to_string(), conf.display().to_string()];
        a.extend(["-S".into(), host.to_string(), "-n".into(), METRIC.into()]);
        a.extend(["-v".into(), value.to_string(), "-t".into(), "uint32".into()]);
        a.extend(["-s".into(), "positive".into(), "-u".into(), "bytes".into()]);
        a
    };
    let st = Command::new(GMETRIC)
        .args(args(&format!("127.0.0.9:{HOST}")))
        .status()
        .expect("run /usr/bin/gmetric (Debian's ganglia-monitor)");
    assert!(st.success(), "gmetric failed: {st}");
    let st = Command::new(env!("CARGO_BIN_EXE_xrd2ganglia"))
        .arg("gmetric")
        .args(args(&format!("127.0.0.10:{OUR_HOST}")))
        .status()
        .expect("run xrd2ganglia gmetric");
    assert!(st.success(), "xrd2ganglia gmetric failed: {st}");
}

/// Sends `base + RATE x seconds since start` every 200 ms until `done`
/// says stop. The value follows the wall clock, so a late send does not
/// bend the rate.
fn send_counter_until(conf: &Path, base: u64, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    loop {
        let v = base + (RATE * start.elapsed().as_secs_f64()) as u64;
        gmetric(conf, v);
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn known(rows: &[(u64, Option<f64>)], from: u64, to: u64) -> Vec<f64> {
    rows.iter()
        .filter(|(t, _)| (from..=to).contains(t))
        .filter_map(|(_, v)| *v)
        .collect()
}

#[test]
fn counter_rate_and_drop_spike_in_host_and_summary_rrds() {
    let gmond = Gmond::start();
    let gmetad = Gmetad::start(gmond.xml_port, 1);
    let dir = Scratch::new("gmetad-test");
    let conf = dir.path().join("gmetric.conf");
    std::fs::write(
        &conf,
        format!(
            "udp_send_channel {{ host = 127.0.0.1  port = {} }}\n",
            gmond.port
        ),
    )
    .unwrap();
    let host_rrd = gmetad.rrd_path(CLUSTER, HOST, METRIC);
    let our_rrd = gmetad.rrd_path(CLUSTER, OUR_HOST, METRIC);
    let summary_rrd = gmetad.summary_rrd_path(CLUSTER, METRIC);

    // Phase 1: a steady counter, until both RRDs exist and then for 14 more
    // seconds (the window below: 10 rows).
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut created: Option<(u64, Instant)> = None;
    send_counter_until(&conf, 1_000, || {
        if created.is_none() && host_rrd.exists() && our_rrd.exists() && summary_rrd.exists() {
            created = Some((unix_now(), Instant::now()));
        }
        match created {
            Some((_, at)) => at.elapsed() >= Duration::from_secs(14),
            None => {
                assert!(
                    Instant::now() < deadline,
                    "gmetad made no RRDs in 20 s; gmetad log: {}\ngmond XML: {}",
                    gmetad.proc.log_text(),
                    gmond.xml_text()
                );
                false
            }
        }
    });
    let (created_at, _) = created.unwrap();

    // Phase 2: the counter restarts from 100 (as after a server restart).
    let dropped_at = unix_now();
    let drop_started = Instant::now();
    send_counter_until(&conf, 100, || {
        drop_started.elapsed() >= Duration::from_secs(4)
    });
    for rrd in [&host_rrd, &our_rrd, &summary_rrd] {
        gmetad.wait_for_update(rrd, dropped_at + 3, Duration::from_secs(15));
    }

    assert_eq!(
        gmetad.rrd_step(&host_rrd),
        1,
        "the RRD step is the poll interval"
    );
    let end = unix_now();
    // The summary sums both hosts: twice the rate, and two wraps.
    for (rrd, hosts) in [(&host_rrd, 1.0), (&our_rrd, 1.0), (&summary_rrd, 2.0)] {
        let rows = gmetad.fetch(rrd, created_at - 2, end);
        let shown = || format!("{}: {rows:?}", rrd.display());
        // A row stamped T averages (T-1, T]; stay clear of the RRD's first
        // update (a COUNTER's first value has no rate) and of the drop (one
        // update may span two polls).
        let steady = known(&rows, created_at + 3, dropped_at - 2);
        assert!(steady.len() >= 8, "too few known rows: {}", shown());
        // Each update is stamped with the whole second of gmond's LOCALTIME
        // while the value it carries is up to ~1.2 s younger (poll phase
        // plus the 200 ms send period): single rows swing by up to the rate
        // itself, but over N rows the mean is off by less than 1.2 x RATE / N
        // (12% for 10 rows).
        let mean = steady.iter().sum::<f64>() / steady.len() as f64;
        let rate = hosts * RATE;
        assert!(
            (mean - rate).abs() < 0.2 * rate,
            "mean rate {mean}, expected {rate}: {}",
            shown()
        );
        assert!(
            steady.iter().all(|&v| v < 1e8),
            "a spike before the drop: {}",
            shown()
        );
        // The drop 12000 -> 100 reads as a 32-bit wrap: (2^32 - 11900) over
        // the one or two seconds between updates.
        let after = known(&rows, dropped_at - 2, end);
        let spike = after.iter().cloned().fold(0.0, f64::max);
        assert!(spike > 1e8, "no wrap spike after the drop: {}", shown());
        assert!(
            spike < hosts * 4.3e9,
            "spike {spike} above 2^32/s per host: {}",
            shown()
        );
        eprintln!(
            "{}: mean rate {mean:.0}/s over {} rows, spike {spike:.3e}/s",
            rrd.display(),
            steady.len()
        );
    }
}
