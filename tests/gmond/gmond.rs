//! End to end against a real gmond 3.7.2: records in, gmond's XML checked.

use xrd2ganglia_testkit as common;

use std::time::Duration;

use common::{Gateway, Gmond, free_port};

/// Settings for tests: short intervals, every sender allowed.
const CONFIG: &str = "metadata_interval = 2\ndmax = 0\nstats_interval = 0\nself_metrics_interval = 0\nlog_interval = 1\n";

fn record(src: &str, pgm: &str, ins: &str, tos: u64, body: &str) -> String {
    format!(
        r#"<statistics tod="{}" ver="v5.5.3" src="{src}" tos="{tos}" pgm="{pgm}" ins="{ins}" pid="4242" site="TESTSITE">{body}<stats id="sgen"><as>0</as><et>0</et><toe>{}</toe></stats></statistics>"#,
        tos + 100,
        tos + 100
    )
}

const LINK: &str = r#"<stats id="link"><num>3</num><maxn>7</maxn><tot>120</tot><in>5242880</in><out>104857600</out><ctime>30</ctime><tmo>-2147483000</tmo><stall>0</stall><sfps>0</sfps></stats>"#;
const OSS: &str = r#"<stats id="oss" v="2"><paths>1<stats id="0"><lp>"/data/"</lp><rp>"/srv/xrd/data/"</rp><tot>1048576</tot><free>524288</free><ino>65536</ino><ifr>60000</ifr></stats></paths><space>0</space></stats>"#;
/// A record whose link.in is `bytes`.
fn link_in(src: &str, bytes: u64) -> String {
    record(
        src,
        "xrootd",
        "anon",
        1_700_000_000,
        &LINK.replace("<in>5242880</in>", &format!("<in>{bytes}</in>")),
    )
}

const PROC: &str =
    r#"<stats id="proc"><usr><s>2</s><u>500000</u></usr><sys><s>1</s><u>250000</u></sys></stats>"#;

#[test]
fn record_becomes_a_host_with_typed_metrics() {
    let gmond = Gmond::start();
    let gw = Gateway::start(gmond.port, CONFIG);
    let rec = record(
        "ds1.example.org:1094",
        "xrootd",
        "anon",
        1_700_000_000,
        &format!("{LINK}{OSS}{PROC}<stats id=\"ofs\"><role>meta manager</role></stats>"),
    );
    gw.send(rec.as_bytes());
    let x = gmond.wait_for(
        Duration::from_secs(10),
        "the whole record of ds1.example.org",
        |x| x.has("ds1.example.org", &["xrootd.uptime"]),
    );
    let host = x.host("ds1.example.org");
    assert_eq!(host.attrs["IP"], "127.0.0.1");
    // The heartbeat (132 uint) carries the xrootd's start time.
    assert_eq!(host.attrs["GMOND_STARTED"], "1700000000");

    let m = x.metric("ds1.example.org", "xrootd.link.in");
    assert_eq!(
        (m.get("VAL"), m.get("TYPE"), m.get("SLOPE"), m.get("UNITS")),
        ("5242880", "double", "positive", "bytes/s")
    );
    assert_eq!(m.extra["GROUP"], "xrootd.link");
    assert_eq!(m.extra["TITLE"], "xrootd: Bytes received");
    assert_eq!(m.extra["SPOOF_HOST"], "127.0.0.1:ds1.example.org");
    assert_eq!(m.get("DMAX"), "0");
    assert_eq!(m.get("TMAX"), "60");

    // int that wrapped negative -> unsigned (a counter: double, as it is
    // kept continuous past 32 bits); gauge -> both; high-water -> both.
    let m = x.metric("ds1.example.org", "xrootd.link.tmo");
    assert_eq!(
        (m.get("VAL"), m.get("TYPE"), m.get("SLOPE")),
        ("2147484296", "double", "positive")
    );
    let m = x.metric("ds1.example.org", "xrootd.link.maxn");
    assert_eq!(
        (m.get("VAL"), m.get("SLOPE"), m.get("UNITS")),
        ("7", "both", "connections")
    );
    // Text keeps its space; slope zero.
    let m = x.metric("ds1.example.org", "xrootd.ofs.role");
    assert_eq!(
        (m.get("VAL"), m.get("TYPE"), m.get("SLOPE")),
        ("meta manager", "string", "zero")
    );
    // List entries by key; a size xrootd reports in KiB (524288), in bytes;
    // the title without parentheses (ganglia-web shows them as `\(`).
    let m = x.metric("ds1.example.org", "xrootd.oss.paths._data_.free");
    assert_eq!(
        (m.get("VAL"), m.get("UNITS"), m.get("SLOPE")),
        ("536870912", "bytes", "both")
    );
    assert_eq!(m.extra["TITLE"], "xrootd: Path space free - /data/");
    assert_eq!(
        x.metric("ds1.example.org", "xrootd.oss.paths._data_.rp")
            .get("VAL"),
        "/srv/xrd/data/"
    );
    // Derived CPU time (ms counter) and uptime.
    let m = x.metric("ds1.example.org", "xrootd.proc.cpu.total");
    assert_eq!(
        (m.get("VAL"), m.get("SLOPE"), m.get("UNITS")),
        ("3750", "positive", "ms/s")
    );
    assert_eq!(
        x.metric("ds1.example.org", "xrootd.uptime").get("VAL"),
        "100"
    );
    // Header attributes, site included.
    assert_eq!(
        x.metric("ds1.example.org", "xrootd.site").get("VAL"),
        "TESTSITE"
    );
    assert!(!host.metrics.contains_key("heartbeat"));
}

#[test]
fn observed_interval_sets_tmax_and_values_update() {
    let gmond = Gmond::start();
    let gw = Gateway::start(gmond.port, CONFIG);
    for i in 0..3u64 {
        let link = LINK.replace("<in>5242880</in>", &format!("<in>{}</in>", 1000 + i));
        gw.send(
            record(
                "tm.example.org:1094",
                "xrootd",
                "anon",
                1_700_000_000,
                &link,
            )
            .as_bytes(),
        );
        if i < 2 {
            std::thread::sleep(Duration::from_secs(2));
        }
    }
    let x = gmond.wait_for(Duration::from_secs(10), "link.in 1002 with tmax 3", |x| {
        x.hosts
            .get("tm.example.org")
            .and_then(|h| h.metrics.get("xrootd.link.in"))
            .is_some_and(|m| m.get("VAL") == "1002" && m.get("TMAX") == "3")
    });
    assert!(
        x.metric("tm.example.org", "xrootd.link.in")
            .get("TN")
            .parse::<u32>()
            .unwrap()
            <= 3
    );
}

#[test]
fn ipv6_sender_is_filed_as_its_own_host() {
    let gmond = Gmond::start();
    let gw = Gateway::start(gmond.port, CONFIG);
    gw.send_v6(
        record(
            "v6only.example.org:1094",
            "xrootd",
            "anon",
            1_700_000_001,
            LINK,
        )
        .as_bytes(),
    );
    gw.send_as(
        "127.0.0.2",
        record("v4.example.org:1094", "xrootd", "anon", 1_700_000_002, LINK).as_bytes(),
    );
    let x = gmond.wait_for(Duration::from_secs(10), "both hosts", |x| {
        x.has("v6only.example.org", &["xrootd.uptime"])
            && x.has("v4.example.org", &["xrootd.uptime"])
    });
    // gmond splits the spoof string at its first ':', so ::1 is written --1.
    assert_eq!(x.host("v6only.example.org").attrs["IP"], "--1");
    assert_eq!(
        x.metric("v6only.example.org", "xrootd.link.in").extra["SPOOF_HOST"],
        "--1:v6only.example.org"
    );
    assert_eq!(x.host("v4.example.org").attrs["IP"], "127.0.0.2");
}

#[test]
fn xrootd_and_cmsd_on_one_host_do_not_collide() {
    let gmond = Gmond::start();
    let gw = Gateway::start(gmond.port, CONFIG);
    let xrd = record(
        "both.example.org:1094",
        "xrootd",
        "anon",
        1_700_000_000,
        &LINK.replace("<in>5242880</in>", "<in>111</in>"),
    );
    let cms = record(
        "both.example.org:0",
        "cmsd",
        "anon",
        1_700_000_000,
        &LINK.replace("<in>5242880</in>", "<in>222</in>"),
    );
    let other = record(
        "both.example.org:1095",
        "xrootd",
        "second",
        1_700_000_000,
        &LINK.replace("<in>5242880</in>", "<in>333</in>"),
    );
    for r in [&xrd, &cms, &other] {
        gw.send(r.as_bytes());
    }
    let x = gmond.wait_for(Duration::from_secs(10), "three programs", |x| {
        x.hosts.get("both.example.org").is_some_and(|h| {
            ["xrootd.link.in", "cmsd.link.in", "xrootd.second.link.in"]
                .iter()
                .all(|m| h.metrics.contains_key(*m))
        })
    });
    assert_eq!(
        x.metric("both.example.org", "xrootd.link.in").get("VAL"),
        "111"
    );
    assert_eq!(
        x.metric("both.example.org", "cmsd.link.in").get("VAL"),
        "222"
    );
    assert_eq!(
        x.metric("both.example.org", "xrootd.second.link.in")
            .get("VAL"),
        "333"
    );
    assert_eq!(
        x.metric("both.example.org", "cmsd.link.in").extra["GROUP"],
        "cmsd.link"
    );
    assert_eq!(
        x.metric("both.example.org", "xrootd.second.link.in").extra["GROUP"],
        "xrootd.second.link"
    );
    assert_eq!(x.hosts.len(), 1);
}

#[test]
fn hostile_names_and_values_leave_gmond_xml_well_formed() {
    let gmond = Gmond::start();
    let gw = Gateway::start(gmond.port, CONFIG);
    let long = "L".repeat(3000);
    let nasty = "q\"uote&lt;x&gt;&amp;'apos\u{1}\u{7f}\u{e9} > end";
    let hostile = [
        // Host name, program, instance and site from the record.
        r#"<statistics tod="2" src="ev&il<host>&quot;:1094" tos="1" pgm="xr&ootd" ins="i&lt;n" pid="1" site="s&quot;'"><stats id="link"><in>1</in></stats></statistics>"#.to_string(),
        // Tag names, ids and list keys.
        format!(
            r#"<statistics tod="2" src="tags.example:1" tos="1" pgm="xrootd" ins="anon"><stats id="a&b"><c"d>1</c"d><x:y>2</x:y></stats><stats id="oss"><paths>1<stats id="0"><lp>"/{nasty}/"</lp><free>3</free></stats></paths></stats></statistics>"#
        ),
        // Values: string with every special, very long, control bytes.
        format!(
            r#"<statistics tod="2" src="vals.example:1" tos="1" pgm="xrootd" ins="anon"><stats id="ofs"><role>{nasty}</role></stats><stats id="x"><long>{long}</long><ctl>a&#1;b</ctl></stats></statistics>"#
        ),
        // A long hostile host name.
        format!(
            r#"<statistics tod="2" src="{long}:1" tos="1" pgm="{long}" ins="{long}"><stats id="{long}"><{long}>1</{long}></stats></statistics>"#
        ),
    ];
    for (i, h) in hostile.iter().enumerate() {
        gw.send_as(&format!("127.0.1.{}", i + 1), h.as_bytes());
    }
    // Raw bytes: NUL, invalid UTF-8, a quote inside an attribute.
    gw.send_as("127.0.1.9", b"<statistics tod=\"2\" src=\"bin\xff\xfe\0ary:1\" tos=\"1\" pgm=\"xrootd\"><stats id=\"link\"><in>\x005</in><out>1</out></stats></statistics>");
    // A valid record sent right after still arrives.
    gw.send_as(
        "127.0.1.10",
        record(
            "after.example.org:1094",
            "xrootd",
            "anon",
            1_700_000_000,
            LINK,
        )
        .as_bytes(),
    );
    let x = gmond.wait_for(
        Duration::from_secs(10),
        "the valid record after the hostile ones",
        |x| {
            x.hosts
                .get("after.example.org")
                .is_some_and(|h| h.metrics.contains_key("xrootd.link.in"))
        },
    );
    // wait_for parsed the XML strictly; check what gmond shows is safe.
    for (name, host) in &x.hosts {
        assert!(
            name.bytes().all(|b| b.is_ascii_graphic()),
            "host name {name:?}"
        );
        for (metric, m) in &host.metrics {
            assert!(
                metric
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)),
                "metric name {metric:?}"
            );
            assert!(metric.len() <= 128);
            assert!(!metric.contains('/'));
            assert!(
                m.get("VAL").len() <= 256,
                "{metric} VAL {} bytes",
                m.get("VAL").len()
            );
        }
    }
    assert!(
        x.hosts.contains_key("ev_il_host__quot_"),
        "{:?}",
        x.hosts.keys().collect::<Vec<_>>()
    );
    let v = x.metric("vals.example", "xrootd.ofs.role");
    assert_eq!(v.get("VAL"), "q_uote_lt;x_gt;_amp;_apos___ _ end");
    // The line-length limit: every METRIC start tag under 1023 bytes.
    for line in gmond.xml_text().lines() {
        assert!(line.len() < 1023, "gmond line of {} bytes", line.len());
    }
}

#[test]
fn gmond_down_then_started_receives_within_a_metadata_interval() {
    let port = free_port();
    let xml_port = free_port();
    let gw = Gateway::start(port, CONFIG);
    // No gmond yet: the gateway keeps going (sends fail, counted), and
    // says so.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut i = 0;
    while !gw.proc.log_text().contains("gmond is not listening") {
        assert!(
            std::time::Instant::now() < deadline,
            "no 'gmond is not listening' 10 s into sending to a closed port: {}",
            gw.proc.log_text()
        );
        gw.send(link_in("late.example.org:1094", i).as_bytes());
        std::thread::sleep(Duration::from_millis(100));
        i += 1;
    }
    let gmond = Gmond::start_with(port, xml_port, "");
    // metadata_interval = 2 s: within a few reports the metrics are back.
    let first = i + 10;
    let mut i = first;
    let x = loop {
        gw.send(link_in("late.example.org:1094", i).as_bytes());
        std::thread::sleep(Duration::from_millis(500));
        let x = gmond.xml();
        if x.hosts
            .get("late.example.org")
            .is_some_and(|h| h.metrics.contains_key("xrootd.link.in"))
        {
            break x;
        }
        i += 1;
        assert!(i < first + 20, "metrics did not reappear within 10 s");
    };
    assert!(
        x.metric("late.example.org", "xrootd.link.in")
            .get("VAL")
            .parse::<u64>()
            .unwrap()
            >= first
    );
}

#[test]
fn sigterm_stops_cleanly_and_bad_config_fails_at_start() {
    let gmond = Gmond::start();
    let mut gw = Gateway::start(gmond.port, CONFIG);
    gw.send(b"<not a record>");
    gw.send(
        record(
            "term.example.org:1094",
            "xrootd",
            "anon",
            1_700_000_000,
            LINK,
        )
        .as_bytes(),
    );
    gmond.wait_for(Duration::from_secs(10), "record before SIGTERM", |x| {
        x.hosts.contains_key("term.example.org")
    });
    let status = gw.proc.terminate();
    assert!(
        status.success(),
        "exit status {status:?}: {}",
        gw.proc.log_text()
    );
    let log = gw.proc.log_text();
    assert!(log.contains("SIGTERM: stopping"), "{log}");
    assert!(log.contains("datagrams=2 records=1"), "{log}");
    assert!(log.contains("parse_errors=1"), "{log}");
    assert!(
        log.contains("datagram rejected: not a summary record"),
        "{log}"
    );

    let dir = common::Scratch::new("badcfg");
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, "dmax = 10\nmetadata_interval = 60\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xrd2ganglia"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .args(["--send", "127.0.0.1:9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("xrd2ganglia: dmax = 10: must be 0 (never expire) or longer than metadata_interval (60 s)"), "{err}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xrd2ganglia"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:notaport",
            "--send",
            "127.0.0.1:9",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "xrd2ganglia: --listen = \"127.0.0.1:notaport\": not an ADDRESS:PORT (write IPv6 as [::]:3333)"
    );
}

#[test]
fn sighup_reloads_refuses_bad_config_and_loses_nothing() {
    let gmond = Gmond::start();
    let mut gw = Gateway::start(gmond.port, CONFIG);
    let hup = |gw: &Gateway| {
        let st = std::process::Command::new("kill")
            .args(["-HUP", &gw.proc.child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
    };
    let wait_log = |gw: &Gateway, text: &str, count: usize| {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while gw.proc.log_text().matches(text).count() < count {
            assert!(
                std::time::Instant::now() < deadline,
                "no {text:?} in log: {}",
                gw.proc.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    gw.send(link_in("reload.example.org:1094", 1).as_bytes());
    gmond.wait_for(Duration::from_secs(10), "first name", |x| {
        x.has("reload.example.org", &["xrootd.uptime"])
    });

    // A new metric name template takes effect without a restart.
    std::fs::write(
        &gw.config,
        format!("{CONFIG}metric_name = \"r.{{pgm}}.{{var}}\"\n"),
    )
    .unwrap();
    hup(&gw);
    wait_log(&gw, "SIGHUP: reloading", 1);
    gw.send(link_in("reload.example.org:1094", 2).as_bytes());
    let x = gmond.wait_for(Duration::from_secs(10), "renamed metrics", |x| {
        x.has("reload.example.org", &["r.xrootd.uptime"])
    });
    assert_eq!(
        x.metric("reload.example.org", "r.xrootd.link.in")
            .get("VAL"),
        "2"
    );

    // A bad configuration is refused; the running one stays.
    std::fs::write(&gw.config, "dmax = \"soon\"\n").unwrap();
    hup(&gw);
    wait_log(&gw, "new configuration refused, the old one stays", 1);
    gw.send(link_in("reload.example.org:1094", 3).as_bytes());
    gmond.wait_for(
        Duration::from_secs(10),
        "value 3 under the kept name",
        |x| {
            x.hosts
                .get("reload.example.org")
                .and_then(|h| h.metrics.get("r.xrootd.link.in"))
                .is_some_and(|m| m.get("VAL") == "3")
        },
    );

    // Datagrams that arrive while reloads happen are all handled.
    std::fs::write(&gw.config, CONFIG).unwrap();
    let port = gw.port;
    let sender = std::thread::spawn(move || {
        for i in 0..400u64 {
            common::send_from(
                "127.0.0.1:0",
                &format!("127.0.0.1:{port}"),
                link_in("reload.example.org:1094", 100 + i).as_bytes(),
            );
            if i % 40 == 0 {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    });
    for _ in 0..8 {
        hup(&gw);
        std::thread::sleep(Duration::from_millis(15));
    }
    sender.join().unwrap();
    wait_log(&gw, "SIGHUP: reloading", 2);
    std::thread::sleep(Duration::from_millis(500));
    assert!(gw.proc.terminate().success());
    let log = gw.proc.log_text();
    assert!(
        log.contains("datagrams=403 records=403"),
        "{}",
        log.lines()
            .filter(|l| l.contains("counters"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// A reload names every changed key that waits for a restart, once each,
/// and none of those it applies at once.
#[test]
fn sighup_names_each_changed_key_that_waits_for_a_restart() {
    let gmond = Gmond::start();
    let mut gw = Gateway::start(gmond.port, CONFIG);
    let text = std::fs::read_to_string(&gw.config).unwrap();
    let changed = text.replace("stats_interval = 0", "stats_interval = 7")
        + "state_interval = 9\nmax_send_rate = 1234\nmetric_name = \"r.{pgm}.{var}\"\n";
    std::fs::write(&gw.config, changed).unwrap();
    let st = std::process::Command::new("kill")
        .args(["-HUP", &gw.proc.child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !gw.proc.log_text().contains("configuration reloaded") {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            gw.proc.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(gw.proc.terminate().success());
    let log = gw.proc.log_text();
    let waits = |key: &str| {
        log.matches(&format!(
            "SIGHUP: {key} changed: it takes effect at the next restart (the running value stays)"
        ))
        .count()
    };
    assert_eq!(
        (waits("stats_interval"), waits("state_interval")),
        (1, 1),
        "{log}"
    );
    assert_eq!(log.matches("changed: it takes effect").count(), 2, "{log}");
}

#[test]
fn the_gateway_reports_itself_to_ganglia() {
    let gmond = Gmond::start();
    let gw = Gateway::start(
        gmond.port,
        &CONFIG.replace("self_metrics_interval = 0", "self_metrics_interval = 1"),
    );
    for i in 0..3 {
        gw.send_as(
            "127.0.0.2",
            link_in("monitored.example.org:1094", i).as_bytes(),
        );
    }
    gw.send_as("127.0.0.2", b"garbage");
    // Spoofed as `xrd2ganglia@NAME:xrd2ganglia@NAME` (NAME: this machine's,
    // as gethostname(2) and hostname(1) say): gmond keys it by that text,
    // which no server's address can be, and shows it as IP and NAME.
    let hostname = String::from_utf8(
        std::process::Command::new("hostname")
            .output()
            .expect("hostname(1)")
            .stdout,
    )
    .unwrap();
    let own = format!("xrd2ganglia@{}", hostname.trim());
    // Counters as rates per second over each 1 s interval: the 3 records
    // and the 1 rejection show as a rate above zero in some report.
    let above_zero = |m: Option<&common::XmlMetric>| {
        m.and_then(|m| m.get("VAL").parse::<f64>().ok())
            .is_some_and(|v| v > 0.0)
    };
    let x = gmond.wait_for(Duration::from_secs(10), "the gateway's own metrics", |x| {
        x.hosts.get(&own).is_some_and(|h| {
            above_zero(h.metrics.get("xrd2ganglia.records"))
                && above_zero(h.metrics.get("xrd2ganglia.parse_errors"))
        })
    });
    let me = &x.hosts[&own];
    assert_eq!(me.attrs.get("IP"), Some(&own));
    let records = &me.metrics["xrd2ganglia.records"];
    // Slope both: gmetad makes a GAUGE of it, which a restart or a failover
    // to the other gateway of a pair cannot make wrap (docs/operations.md).
    assert_eq!(
        (
            records.get("TYPE"),
            records.get("SLOPE"),
            records.get("UNITS")
        ),
        ("double", "both", "records/s")
    );
    assert_eq!(records.extra["GROUP"], "xrd2ganglia");
    let sources = &me.metrics["xrd2ganglia.sources"];
    assert_eq!((sources.get("VAL"), sources.get("SLOPE")), ("1", "both"));
    assert!(me.metrics.contains_key("xrd2ganglia.datagrams"));
    // No server's metric is in it, nor its metrics in a server's.
    assert!(me.metrics.keys().all(|m| m.starts_with("xrd2ganglia.")));
    assert!(
        x.hosts
            .iter()
            .filter(|(name, _)| **name != own)
            .all(|(_, h)| h.metrics.keys().all(|m| !m.starts_with("xrd2ganglia.")))
    );
    // The monitored host is a host of its own.
    assert!(x.hosts.contains_key("monitored.example.org"));
}

#[test]
fn gmond_restarted_gets_the_metrics_back_within_a_metadata_interval() {
    let gmond = Gmond::start();
    let (port, xml_port) = (gmond.port, gmond.xml_port);
    let gw = Gateway::start(port, CONFIG);
    gw.send(link_in("restart.example.org:1094", 1).as_bytes());
    gmond.wait_for(Duration::from_secs(10), "before the restart", |x| {
        x.has("restart.example.org", &["xrootd.uptime"])
    });
    // gmond restarts: it has forgotten every metadata.
    drop(gmond);
    let gmond = Gmond::start_with(port, xml_port, "");
    let started = std::time::Instant::now();
    let mut i = 2;
    loop {
        gw.send(link_in("restart.example.org:1094", i).as_bytes());
        std::thread::sleep(Duration::from_millis(250));
        if gmond
            .xml()
            .hosts
            .get("restart.example.org")
            .and_then(|h| h.metrics.get("xrootd.link.in"))
            .is_some_and(|m| m.get("VAL") == i.to_string())
        {
            break;
        }
        i += 1;
        // metadata_interval = 2 s, plus a report or two; a loaded machine
        // may take longer, but without the periodic resend gmond would
        // never show the metric again.
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "metrics not back {:?} after gmond's restart (metadata_interval = 2 s)",
            started.elapsed()
        );
    }
    // The gateway rode through gmond's restart: still running, and it
    // stops cleanly.
    let mut gw = gw;
    assert!(
        gw.proc.child.try_wait().unwrap().is_none(),
        "gateway exited"
    );
    assert!(gw.proc.terminate().success(), "{}", gw.proc.log_text());
}

#[test]
fn only_allowed_senders_are_forwarded() {
    let gmond = Gmond::start();
    let mut gw = Gateway::start(
        gmond.port,
        &format!("{CONFIG}allow = [\"127.0.0.2/32\", \"::1\"]\n"),
    );
    gw.send_as(
        "127.0.0.3",
        link_in("intruder.example.org:1094", 1).as_bytes(),
    );
    gw.send_as(
        "127.0.0.3",
        link_in("intruder.example.org:1094", 2).as_bytes(),
    );
    gw.send_as(
        "127.0.0.2",
        link_in("allowed.example.org:1094", 3).as_bytes(),
    );
    gw.send_v6(link_in("v6.example.org:1094", 4).as_bytes());
    let x = gmond.wait_for(Duration::from_secs(10), "allowed senders", |x| {
        x.has("allowed.example.org", &["xrootd.uptime"])
            && x.has("v6.example.org", &["xrootd.uptime"])
    });
    assert!(!x.hosts.contains_key("intruder.example.org"));
    assert!(gw.proc.terminate().success());
    let log = gw.proc.log_text();
    assert!(log.contains("denied=2"), "{log}");
    assert_eq!(
        log.matches("datagram dropped: sender not in `allow`")
            .count(),
        1,
        "logged once per sender: {log}"
    );
}
