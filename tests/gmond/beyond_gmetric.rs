//! What no gmetric does, proven against the real Ganglia daemons: graphs
//! that stay right through restarts (gmond + gmetad + rrdtool), answers to
//! gmond's metadata requests, changed-values-only sending on real xrootd
//! report streams, and list entries that expire after DMAX.

use xrd2ganglia_testkit as common;

use std::net::UdpSocket;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::replay::{self, unix_now};
use common::{Gateway, Gmetad, Gmond, Scratch, Xrootd, free_port};

const QUIET: &str = "stats_interval = 0\nself_metrics_interval = 0\nlog_interval = 1\n";

fn link_record(host: &str, tos: u64, pid: u32, inb: u64, tmo: u64) -> String {
    format!(
        r#"<statistics tod="{}" ver="v5.5.3" src="{host}:1094" tos="{tos}" pgm="xrootd" ins="anon" pid="{pid}" site="T2_TEST"><stats id="link"><num>3</num><maxn>9</maxn><tot>{tmo}</tot><in>{inb}</in><out>7</out><ctime>1</ctime><tmo>{tmo}</tmo><stall>0</stall><sfps>0</sfps></stats></statistics>"#,
        unix_now()
    )
}

#[test]
fn restarts_of_xrootd_and_of_the_gateway_draw_no_spike_in_host_or_summary_rrds() {
    let gmond = Gmond::start();
    let gmetad = Gmetad::start(gmond.xml_port, 1);
    replay::restarts_draw_no_spike(&gmetad, "xrd2ganglia-test", "", &|port, config| {
        Gateway::start_on(port, gmond.port, config)
    });
}

#[test]
fn a_restarted_gmond_gets_metadata_at_once_when_the_gateway_hears_its_requests() {
    let (port, xml_port, request_port) = (free_port(), free_port(), free_port());
    let send_channel = format!("udp_send_channel {{ host = 127.0.0.1  port = {request_port} }}");
    let gmond = Gmond::start_full(port, xml_port, "", &send_channel);
    let base = format!("{QUIET}metadata_interval = 600\ndmax = 0\n");
    // One gateway hears gmond's requests; the other (the control) does not.
    let answering = Gateway::start(
        port,
        &format!("{base}metadata_requests = [\"127.0.0.1:{request_port}\"]\n"),
    );
    let silent = Gateway::start(port, &base);
    let tos = unix_now() - 100;
    let send = |i: u64| {
        answering.send_as(
            "127.0.9.1",
            link_record("answered.example", tos, 1, i, i).as_bytes(),
        );
        silent.send_as(
            "127.0.9.2",
            link_record("silent.example", tos, 1, i, i).as_bytes(),
        );
    };
    send(1);
    gmond.wait_for(Duration::from_secs(10), "both hosts", |x| {
        x.has("answered.example", &["xrootd.uptime"]) && x.has("silent.example", &["xrootd.uptime"])
    });
    // gmond restarts and has forgotten every metadata.
    drop(gmond);
    let gmond = Gmond::start_full(port, xml_port, "", &send_channel);
    let restarted = Instant::now();
    let all = [
        "xrootd.link.in",
        "xrootd.link.tmo",
        "xrootd.src",
        "xrootd.uptime",
    ];
    let mut i = 2;
    let back = loop {
        send(i);
        std::thread::sleep(Duration::from_millis(500));
        let x = gmond.xml();
        if x.has("answered.example", &all) {
            break restarted.elapsed();
        }
        assert!(
            restarted.elapsed() < Duration::from_secs(15),
            "metrics not back 15 s after gmond restarted (metadata_interval is 600 s); gateway log: {}",
            answering.proc.log_text()
        );
        i += 1;
    };
    eprintln!("metrics back {back:?} after gmond restarted");
    // The value shown is the latest: gmond kept it and shows it with the metadata.
    send(i + 1);
    let x = gmond.wait_for(Duration::from_secs(15), "the next value", |x| {
        x.hosts
            .get("answered.example")
            .and_then(|h| h.metrics.get("xrootd.link.in"))
            .is_some_and(|m| m.get("VAL") == (i + 1).to_string())
    });
    // The control: nobody answers, its metrics stay invisible until metadata_interval.
    assert!(
        !x.has("silent.example", &["xrootd.link.in"]),
        "the control host came back without answers"
    );
    let log = answering.proc.log_text();
    assert!(log.contains("gmond asked for metadata"), "{log}");
}

/// Forwards datagrams to gmond, counting value packets (133) as they pass.
struct CountingRelay {
    port: u16,
    values: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl CountingRelay {
    fn start(gmond_port: u16) -> CountingRelay {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let port = socket.local_addr().unwrap().port();
        let values = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (v, s) = (values.clone(), stop.clone());
        std::thread::spawn(move || {
            let out = UdpSocket::bind("127.0.0.1:0").unwrap();
            let mut buf = [0u8; 2048];
            while !s.load(Ordering::Relaxed) {
                if let Ok(n) = socket.recv(&mut buf) {
                    if buf[..4] == [0, 0, 0, 133] {
                        v.fetch_add(1, Ordering::Relaxed);
                    }
                    let _ = out.send_to(&buf[..n], ("127.0.0.1", gmond_port));
                }
            }
        });
        CountingRelay { port, values, stop }
    }

    fn count(&self) -> u64 {
        self.values.load(Ordering::Relaxed)
    }
}

impl Drop for CountingRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Every metric of every host has TN below TMAX.
fn all_fresh(gmond: &Gmond) -> Result<usize, String> {
    let x = gmond.xml();
    let mut n = 0;
    for (host, h) in &x.hosts {
        for (name, m) in &h.metrics {
            let (tn, tmax): (u64, u64) = (
                m.get("TN").parse().unwrap_or(u64::MAX),
                m.get("TMAX").parse().unwrap_or(0),
            );
            if tn >= tmax {
                return Err(format!("{host} {name}: TN {tn} >= TMAX {tmax}"));
            }
            n += 1;
        }
    }
    Ok(n)
}

#[test]
fn changed_only_sends_fewer_packets_of_real_xrootd_streams_and_keeps_tn_below_tmax() {
    let (g_all, g_changed) = (Gmond::start(), Gmond::start());
    let (r_all, r_changed) = (
        CountingRelay::start(g_all.port),
        CountingRelay::start(g_changed.port),
    );
    let cfg = format!("{QUIET}metadata_interval = 30\ndmax = 0\n");
    let all = Gateway::start(r_all.port, &cfg);
    let changed = Gateway::start(
        r_changed.port,
        &format!("{cfg}send_values = \"changed\"\nvalue_heartbeat = 6\n"),
    );
    let root = Scratch::new("xrd-changed");
    for d in ["data", "admin"] {
        std::fs::create_dir_all(root.path().join(d)).unwrap();
    }
    let r = root.path().display().to_string();
    let xrd_port = free_port();
    let _xrootd = Xrootd::start(
        "xrootd",
        "chg",
        root.path(),
        &format!(
            "all.export /\noss.localroot {r}/data\nall.adminpath {r}/admin\nall.pidpath {r}/admin\nxrd.port {xrd_port}\n\
             xrd.report 127.0.0.1:{},127.0.0.1:{} every 1s all sync\n",
            all.port, changed.port
        ),
    );
    g_changed.wait_for(Duration::from_secs(20), "the xrootd's metrics", |x| {
        x.hosts
            .values()
            .any(|h| h.metrics.contains_key("xrootd.chg.uptime"))
    });
    // Settle: TMAX becomes known and metadata goes out once more.
    std::thread::sleep(Duration::from_secs(4));

    // Idle: nothing moves but the clock.
    let (a0, c0) = (r_all.count(), r_changed.count());
    let idle_end = Instant::now() + Duration::from_secs(12);
    while Instant::now() < idle_end {
        std::thread::sleep(Duration::from_secs(2));
        if let Err(e) = all_fresh(&g_changed) {
            panic!("idle, changed-only: {e}");
        }
    }
    let (a1, c1) = (r_all.count(), r_changed.count());

    // Loaded: files copied in and out all the time.
    let file = root.path().join("payload");
    std::fs::write(&file, vec![7u8; 1 << 20]).unwrap();
    let src = file.display().to_string();
    let load_end = Instant::now() + Duration::from_secs(12);
    let mut n = 0;
    while Instant::now() < load_end {
        let url = format!("root://127.0.0.1:{xrd_port}//f{}", n % 4);
        let ok = Command::new("xrdcp")
            .args(["-f", "-s", &src, &url])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "xrdcp to the test xrootd failed");
        n += 1;
        if n % 10 == 0
            && let Err(e) = all_fresh(&g_changed)
        {
            panic!("loaded, changed-only: {e}");
        }
    }
    let (a2, c2) = (r_all.count(), r_changed.count());
    let metrics = all_fresh(&g_changed).unwrap_or_else(|e| panic!("{e}"));

    let cut = |all: u64, changed: u64| 100.0 * (1.0 - changed as f64 / all.max(1) as f64);
    let (idle_cut, load_cut) = (cut(a1 - a0, c1 - c0), cut(a2 - a1, c2 - c1));
    eprintln!(
        "value packets, idle 12 s: all {} changed {} ({idle_cut:.0}% fewer); loaded 12 s ({n} copies): all {} changed {} ({load_cut:.0}% fewer); {metrics} metrics, every TN < TMAX",
        a1 - a0,
        c1 - c0,
        a2 - a1,
        c2 - c1
    );
    assert!(a1 - a0 > 500, "too few reports while idle: {}", a1 - a0);
    // Measured 80% idle (three runs: 232-234 of 1152) and 58-60% loaded
    // (463-479 of 1152, 86-149 copies in 12 s): README's figures. The
    // idle cut is the record's own (its counters do not move); the loaded
    // one falls as more copies run, hence its wider margin.
    assert!(idle_cut >= 75.0, "idle: only {idle_cut:.0}% fewer packets");
    assert!(
        load_cut >= 50.0,
        "loaded: only {load_cut:.0}% fewer packets"
    );
    // Both gmonds show the same metrics for the server.
    let names = |g: &Gmond| -> Vec<String> {
        let x = g.xml();
        x.hosts
            .values()
            .filter(|h| h.metrics.contains_key("xrootd.chg.uptime"))
            .flat_map(|h| h.metrics.keys().cloned())
            .collect()
    };
    assert_eq!(names(&g_all), names(&g_changed));
}

fn spaces_record(host: &str, tos: u64, spaces: &[&str], i: u64) -> String {
    let mut body = String::new();
    for (k, name) in spaces.iter().enumerate() {
        body.push_str(&format!(
            r#"<stats id="{k}"><name>{name}</name><tot>1000000</tot><free>{}</free><maxf>500000</maxf><fsn>1</fsn><usg>{i}</usg></stats>"#,
            1000 - i
        ));
    }
    format!(
        r#"<statistics tod="{}" ver="v5.5.3" src="{host}:1094" tos="{tos}" pgm="xrootd" ins="anon" pid="5" site="T2_TEST"><stats id="oss" v="2"><paths>0</paths><space>{}{body}</space></stats><stats id="link"><in>{i}</in></stats></statistics>"#,
        unix_now(),
        spaces.len()
    )
}

#[test]
fn a_space_no_longer_reported_expires_after_dmax_and_the_host_stays() {
    const DMAX: u64 = 5;
    // gmond runs its cleanup every second only unmuted with a send channel.
    let (port, xml_port, sink) = (free_port(), free_port(), free_port());
    let gmond = Gmond::start_full(
        port,
        xml_port,
        "mute = no\n  cleanup_threshold = 1",
        &format!("udp_send_channel {{ host = 127.0.0.1  port = {sink} }}"),
    );
    let gw = Gateway::start(
        port,
        &format!("{QUIET}metadata_interval = 2\ndmax = {DMAX}\n"),
    );
    let tos = unix_now() - 100;
    let both = ["public", "scratch"];
    let gone = "xrootd.oss.space.scratch.usg";
    let kept = "xrootd.oss.space.public.usg";
    let mut i = 1;
    for _ in 0..4 {
        gw.send_as(
            "127.0.10.1",
            spaces_record("spaces.example", tos, &both, i).as_bytes(),
        );
        i += 1;
        std::thread::sleep(Duration::from_secs(1));
    }
    gmond.wait_for(Duration::from_secs(10), "both spaces", |x| {
        x.has("spaces.example", &[gone, kept])
    });
    let x = gmond.xml();
    assert_eq!(
        x.metric("spaces.example", gone).get("DMAX"),
        DMAX.to_string()
    );
    // scratch is no longer reported; the rest goes on every second.
    let last = Instant::now();
    let mut seen_after = Duration::ZERO;
    loop {
        gw.send_as(
            "127.0.10.1",
            spaces_record("spaces.example", tos, &["public"], i).as_bytes(),
        );
        i += 1;
        std::thread::sleep(Duration::from_secs(1));
        let x = gmond.xml();
        assert!(
            x.has("spaces.example", &[kept, "xrootd.link.in", "xrootd.uptime"]),
            "the host's other metrics went too"
        );
        if !x.has("spaces.example", &[gone]) {
            break;
        }
        seen_after = last.elapsed();
        assert!(
            seen_after < Duration::from_secs(DMAX + 10),
            "{gone} still in gmond {seen_after:?} after its last report (dmax {DMAX})"
        );
    }
    // It stayed while its DMAX had not passed since its last metadata.
    assert!(
        seen_after >= Duration::from_secs(2),
        "{gone} went after {seen_after:?}, before dmax"
    );
    // It stays gone, and the host keeps reporting.
    std::thread::sleep(Duration::from_secs(2));
    gw.send_as(
        "127.0.10.1",
        spaces_record("spaces.example", tos, &["public"], i).as_bytes(),
    );
    std::thread::sleep(Duration::from_millis(500));
    let x = gmond.xml();
    assert!(!x.has("spaces.example", &[gone]));
    assert!(x.has("spaces.example", &[kept]));
}
