//! gmetad polls the gateway directly (`xml_listen`): against a real gmetad
//! and its RRDs, and a real gmond fed the same records. (Who may poll, and
//! a document with every name escaped: `src/daemon/tests.rs`, in process;
//! that xmllint finds it valid: here, xmllint being a program.)

use xrd2ganglia_testkit as common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{
    Gateway, Gmetad, Gmond, Scratch, Site, counter, fixture, free_port, replay, wait_for_every,
};

const QUIET: &str = "stats_interval = 0\nself_metrics_interval = 0\nlog_interval = 1\n";
const FIXTURES: &[&str] = &[
    "ds_idle.xml",
    "mgr_cmsd.xml",
    "mgr_xrootd.xml",
    "pfc_loaded.xml",
    "spaces.xml",
    "srv_cmsd.xml",
    "srv_xrootd.xml",
];

/// Fixture `i` as sent by server `srv{i}.example` (the captures all say `vm`).
fn server_record(i: usize) -> Vec<u8> {
    let text = String::from_utf8(fixture(FIXTURES[i])).unwrap();
    text.replacen("src=\"vm:", &format!("src=\"srv{i}.example:"), 1)
        .into_bytes()
}

fn server_ip(i: usize) -> String {
    format!("127.0.9.{}", i + 1)
}

#[test]
fn gmetad_polling_the_gateway_draws_counters_without_spikes_through_restarts() {
    let xml_port = free_port();
    let gmetad = Gmetad::start(xml_port, 1);
    let cluster = "xrd2ganglia-xml";
    replay::restarts_draw_no_spike(
        &gmetad,
        cluster,
        &format!("cluster_name = {cluster:?}\n"),
        &|port, config| Gateway::start_xml(port, xml_port, None, config),
    );
}

/// The document of a cluster and a server whose names need escaping, with
/// the gateway's own metrics, is valid against its own DTD as xmllint
/// reads it (the rest of what `xml_allow` and the escaping must do:
/// `src/daemon/tests.rs`, `only_allowed_clients_get_a_valid_document_with_every_name_escaped`).
#[test]
fn the_document_with_every_name_escaped_is_valid_as_xmllint_reads_it() {
    let cluster = "T2 \"<Ünï & Cø>\"";
    let gw = Gateway::start_xml(
        free_port(),
        free_port(),
        None,
        &format!("stats_interval = 0\nself_metrics_interval = 1\ncluster_name = {cluster:?}\n"),
    );
    let record = String::from_utf8(fixture("ds_idle.xml")).unwrap().replacen(
        "src=\"vm:",
        "src=\"srv0.example:",
        1,
    );
    gw.send_as("127.0.9.1", record.as_bytes());
    // The server's host and the gateway's own, with its metrics.
    let doc = common::wait_for(
        "both hosts in the document",
        Duration::from_secs(15),
        || {
            let text = gw.xml_text();
            let x = common::GangliaXml::parse(&text);
            (x.hosts.contains_key("srv0.example")
                && x.hosts.keys().any(|h| h.starts_with("xrd2ganglia@")))
            .then_some(text)
        },
    );
    assert!(doc.is_ascii(), "non-ASCII written raw");
    assert!(
        doc.contains("<CLUSTER NAME=\"T2 &quot;&lt;&#xDC;n&#xEF; &amp; C&#xF8;&gt;&quot;\""),
        "{doc}"
    );
    let dir = Scratch::new("xmllint");
    let file = dir.path().join("doc.xml");
    std::fs::write(&file, &doc).unwrap();
    let out = Command::new("xmllint")
        .args(["--valid", "--noout"])
        .arg(&file)
        .output()
        .expect("xmllint (libxml2-utils; .ci/run installs it)");
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "xmllint: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn gmetad_keeps_an_rrd_per_numeric_metric_with_the_values_sent() {
    let cluster = "xrd2ganglia-values";
    let site = Site::start(1, &format!("{QUIET}cluster_name = {cluster:?}\n"));
    let (gw, gmetad) = (&site.gateway, site.gmetad());
    // Two addresses that claim one name: gmetad would merge them.
    let twin = |_: ()| server_record(0);
    let sent_at = replay::unix_now();
    for round in 0..3 {
        for i in 0..FIXTURES.len() {
            gw.send_as(&server_ip(i), &server_record(i));
        }
        gw.send_as("127.0.9.99", &twin(()));
        if round < 2 {
            std::thread::sleep(Duration::from_millis(1100));
        }
    }
    let doc = gw.xml();
    assert_eq!(
        doc.hosts.len(),
        FIXTURES.len() + 1,
        "{:?}",
        doc.hosts.keys()
    );
    assert!(doc.hosts.contains_key("srv0.example@127.0.9.99"));
    let mut numeric = 0;
    for (host, h) in &doc.hosts {
        for (name, m) in &h.metrics {
            if m.get("TYPE") == "string" {
                continue;
            }
            numeric += 1;
            let path = gmetad.rrd_path(cluster, host, name);
            gmetad.wait_for_update(&path, sent_at + 2, Duration::from_secs(15));
            // What gmetad stored last is what the document said (counters
            // are stored as rates: their RRD is checked elsewhere).
            if m.get("SLOPE") != "positive" {
                let last = last_value(&path);
                let val: f64 = m.get("VAL").parse().unwrap();
                assert!(
                    (last - val).abs() <= 1e-6 * val.abs().max(1.0),
                    "{host} {name}: RRD has {last}, the document {val}"
                );
            }
        }
    }
    assert!(numeric > 300, "only {numeric} numeric metrics");
    eprintln!(
        "{numeric} numeric metrics on {} hosts, each with its RRD",
        doc.hosts.len()
    );
}

/// The last value `rrdtool lastupdate` shows for the RRD's one DS.
fn last_value(path: &std::path::Path) -> f64 {
    let text = common::rrdtool(&["lastupdate".as_ref(), path.as_os_str()]);
    text.lines()
        .last()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("rrdtool lastupdate {}: {text}", path.display()))
}

#[test]
fn the_document_matches_what_gmond_writes_for_the_same_records() {
    let gmond = Gmond::start();
    let xml_port = free_port();
    // A stock gmond's buffer holds about 250 datagrams: following its
    // receive queue (the default), a gmond the loaded test machine pauses
    // for a moment loses none of these records' ~1,600 packets (never
    // sent again here).
    let gw = Gateway::start_xml(free_port(), xml_port, Some(gmond.port), QUIET);
    for i in 0..FIXTURES.len() {
        gw.send_as(&server_ip(i), &server_record(i));
    }
    let v6 = String::from_utf8(fixture("srv_xrootd.xml"))
        .unwrap()
        .replacen("src=\"vm:", "src=\"six.example:", 1);
    gw.send_v6(v6.as_bytes());
    let sent = Instant::now();
    let ours = wait_for_every(
        "every host in the document",
        Duration::from_secs(15),
        Duration::from_millis(100),
        || {
            let x = gw.xml();
            (x.hosts.len() == FIXTURES.len() + 1).then_some(x)
        },
    );
    let theirs = gmond.wait_for(Duration::from_secs(15), "every metric", |x| {
        ours.hosts.iter().all(|(name, h)| {
            x.hosts
                .get(name)
                .is_some_and(|g| g.metrics.len() == h.metrics.len())
        })
    });
    let ours = gw.xml();
    assert_eq!(
        theirs.hosts.keys().collect::<Vec<_>>(),
        ours.hosts.keys().collect::<Vec<_>>()
    );
    let mut compared = 0;
    for (name, h) in &ours.hosts {
        let g = &theirs.hosts[name];
        for a in ["NAME", "TAGS", "LOCATION", "GMOND_STARTED"] {
            assert_eq!(h.attrs[a], g.attrs[a], "{name} {a}");
        }
        // The documented differences: the real address (gmond shows the
        // spoof's, where IPv6 is written with '-'), the host's TMAX (its
        // metrics' largest, gmond's is its own host_tmax) and DMAX (ours
        // is `dmax`: hosts leave; gmond's host_dmax is 0 here).
        if name == "six.example" {
            assert_eq!(h.attrs["IP"], "::1");
            assert_eq!(g.attrs["IP"], "--1");
        } else {
            assert_eq!(h.attrs["IP"], g.attrs["IP"], "{name} IP");
        }
        let tmax = h
            .metrics
            .values()
            .map(|m| m.get("TMAX").parse::<u32>().unwrap());
        assert_eq!(h.attrs["TMAX"], tmax.max().unwrap().max(20).to_string());
        assert_eq!(
            (h.attrs["DMAX"].as_str(), g.attrs["DMAX"].as_str()),
            ("3600", "0")
        );
        let reported = |x: &common::XmlHost| x.attrs["REPORTED"].parse::<i64>().unwrap();
        assert!((reported(h) - reported(g)).abs() <= 2, "{name} REPORTED");
        for (metric, m) in &h.metrics {
            let gm = &g.metrics[metric];
            for a in ["NAME", "VAL", "TYPE", "UNITS", "TMAX", "DMAX", "SLOPE"] {
                assert_eq!(m.attrs[a], gm.attrs[a], "{name} {metric} {a}");
            }
            let tn = |x: &common::XmlMetric| x.get("TN").parse::<u32>().unwrap();
            // Heard since the records were sent (a loaded machine may
            // take a while to show them all, so TN grows meanwhile).
            let age = sent.elapsed().as_secs() as u32 + 1;
            assert!(
                tn(m) <= age && tn(gm) <= age,
                "{name} {metric} TN over {age} s"
            );
            // Extra data as gmond's, without the packet's SPOOF_HOST.
            let mut expected = gm.extra.clone();
            assert!(expected.remove("SPOOF_HOST").is_some());
            assert_eq!(m.extra, expected, "{name} {metric} extra data");
            compared += 1;
        }
    }
    assert!(compared > 400, "{compared}");
    eprintln!(
        "{compared} metrics on {} hosts, attribute by attribute",
        ours.hosts.len()
    );
}

fn serve(args: &[&str]) -> (Option<i32>, String) {
    let dir = Scratch::new("xmlstart");
    // No control socket: the default's path is one per machine.
    let quiet = dir.path().join("quiet.toml");
    std::fs::write(&quiet, "control_socket = \"\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_xrd2ganglia"))
        .arg("serve")
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .arg("--state-file")
        .arg(dir.path().join("state"))
        .arg("--config")
        .arg(&quiet)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_gateway_that_would_deliver_nowhere_or_cannot_listen_does_not_start() {
    let (code, err) = serve(&["--no-send"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        err.trim(),
        "xrd2ganglia: --no-send and no xml_listen: the data would go nowhere (poll the gateway with xml_listen, or send to gmond)"
    );
    let (code, err) = serve(&["--no-send", "--send", "127.0.0.1:9"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("'--no-send' cannot be used with '--send"),
        "{err}"
    );
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap();
    let (code, err) = serve(&["--no-send", "--xml-listen", &addr.to_string()]);
    assert_eq!(code, Some(3), "{err}");
    let in_use = std::io::Error::from_raw_os_error(libc::EADDRINUSE);
    let port = addr.port();
    // A TCP port: the hint is ss's TCP listing.
    assert!(
        err.lines().any(|l| l
            == format!(
                "xrd2ganglia: cannot listen for gmetad on {addr} (xml_listen): {in_use} (`ss -ltnp 'sport = :{port}'` shows which process has it)"
            )),
        "{err}"
    );
}

/// Out of file descriptors (its limit lowered to 64 while it runs, as a
/// site's `LimitNOFILE` could be reached): clients that connect and never
/// read hold descriptors, accepts fail, and yet a poll gets the whole
/// document (the connection that made the least progress makes way), the
/// failures are counted, and the gateway stops cleanly.
#[test]
fn out_of_descriptors_a_poll_still_gets_the_whole_document() {
    let xml_port = free_port();
    let mut gw = Gateway::start_xml(free_port(), xml_port, None, QUIET);
    // Several servers: a document of some 100 KB, more than an unread
    // client's 4 KiB receive buffer and the gateway's 16 KiB send buffer
    // take, so each unread connection stays open (and holds its descriptor).
    for i in 0..FIXTURES.len() {
        gw.send_as(&server_ip(i), &server_record(i));
    }
    let whole = wait_for_every(
        "every server in the document",
        Duration::from_secs(10),
        Duration::from_millis(100),
        || {
            let doc = gw.xml();
            (doc.hosts.len() == FIXTURES.len()).then_some(doc)
        },
    );
    let metrics: usize = whole.hosts.values().map(|h| h.metrics.len()).sum();
    let pid = gw.proc.child.id() as libc::pid_t;
    let limit = libc::rlimit {
        rlim_cur: 64,
        rlim_max: 64,
    };
    // SAFETY: prlimit on a child of this process, with a valid rlimit and
    // no old-limit pointer.
    let rc = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &limit, std::ptr::null_mut()) };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
    let unread: Vec<std::net::TcpStream> = (0..100)
        .map(|_| {
            let s =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            s.set_recv_buffer_size(4096).unwrap();
            s.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], xml_port)).into())
                .unwrap();
            s.into()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let doc = gw.xml();
    let polled = started.elapsed();
    assert_eq!(doc.hosts.len(), FIXTURES.len());
    assert_eq!(
        doc.hosts.values().map(|h| h.metrics.len()).sum::<usize>(),
        metrics
    );
    drop(unread);
    assert!(gw.proc.terminate().success(), "{}", gw.proc.log_text());
    let counters = gw.counters_line();
    let field = |name: &str| counter(&counters, name);
    assert!(field("xml_accept_failed") >= 1, "{counters}");
    assert!(field("xml_evicted") >= 1, "{counters}");
    eprintln!(
        "out of descriptors: the poll took {polled:?}; {} accepts failed, {} evicted",
        field("xml_accept_failed"),
        field("xml_evicted")
    );
}
