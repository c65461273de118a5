//! One gateway, many Ganglia clusters (docs/clusters.md), against a real
//! gmetad 3.7.2 polling the XML port: its RRD directories and its own XML
//! say what each cluster holds. Expected values come from the records
//! sent, never from our parser.

use xrd2ganglia_testkit as common;

mod shards;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{
    Gateway, Gmond, Gweb, Scratch, Site, clusters_of, free_port, gweb_files, included_reports,
    names as set, parse_ganglia, read_xml, replay::unix_now, wait_for_every,
};

const QUIET: &str = "stats_interval = 0\nself_metrics_interval = 0\nlog_interval = 1\n";
/// What the records' byte counter grows by per second.
const RATE: f64 = 1000.0;

/// A record of `host` at `site` (no site attribute when None): a counter
/// at `inb`, a gauge at 3.
fn record(host: &str, site: Option<&str>, inb: u64) -> String {
    let site = site.map_or(String::new(), |s| format!(" site=\"{s}\""));
    format!(
        r#"<statistics tod="{}" ver="v5.5.3" src="{host}:1094" tos="1700000000" pgm="xrootd" ins="anon" pid="77"{site}><stats id="link"><num>3</num><in>{inb}</in></stats></statistics>"#,
        unix_now()
    )
}

/// A rule that takes SITEA's XCache by its network.
const XCACHE_RULE: &str = "[[cluster]]\nname = \"SITEA-xcache\"\nnetworks = [\"127.0.15.0/24\"]\nowner = \"SITEA storage\"\n";

/// Attribute `attr` of the element reached by `path` (CLUSTER, then HOST,
/// then METRIC, each by its NAME), in any Ganglia XML.
fn attr_at(text: &str, path: &[&str], attr: &str) -> Option<String> {
    let doc = parse_ganglia(text);
    let mut node = doc
        .descendants()
        .find(|n| n.has_tag_name("CLUSTER") && n.attribute("NAME") == path.first().copied())?;
    for (tag, name) in ["HOST", "METRIC"].iter().zip(&path[1..]) {
        node = node
            .children()
            .find(|n| n.has_tag_name(*tag) && n.attribute("NAME") == Some(name))?;
    }
    node.attribute(attr).map(str::to_string)
}

/// Attribute `attr` of CLUSTER `cluster`, in any Ganglia XML.
fn cluster_attr(text: &str, cluster: &str, attr: &str) -> Option<String> {
    attr_at(text, &[cluster], attr)
}

/// Attribute `attr` of HOST `host` in `cluster`, in any Ganglia XML.
fn host_attr(text: &str, cluster: &str, host: &str, attr: &str) -> Option<String> {
    attr_at(text, &[cluster, host], attr)
}

/// The VAL of `metric` of `host` in `cluster`, in any Ganglia XML.
fn value_in(text: &str, cluster: &str, host: &str, metric: &str) -> Option<String> {
    attr_at(text, &[cluster, host, metric], "VAL")
}

#[test]
fn three_sites_are_three_clusters_in_gmetad_with_their_rrds_and_summaries() {
    let site = Site::start(1, &format!("{QUIET}cluster_by_site = true\n{XCACHE_RULE}"));
    let (gw, gmetad) = (&site.gateway, site.gmetad());
    // (address, host, site, the cluster it must be in)
    let servers = [
        ("127.0.11.1", "a1.example", "SITEA", "SITEA"),
        ("127.0.11.2", "a2.example", "SITEA", "SITEA"),
        ("127.0.11.3", "b1.example", "SITEB", "SITEB"),
        ("127.0.11.4", "c1.example", "SITEC", "SITEC"),
        // SITEA's XCache, apart by its network.
        ("127.0.15.1", "xc1.example", "SITEA", "SITEA-xcache"),
    ];
    let start = Instant::now();
    let sent_at = unix_now();
    let mut tick = 0u64;
    let send = |tick: u64| {
        for (ip, host, site, _) in servers {
            gw.send_as(ip, record(host, Some(site), 1_000 + tick * 500).as_bytes());
        }
    };
    // Until gmetad has every host's RRD and every site's summary.
    let wanted: Vec<_> = servers
        .iter()
        .map(|(_, host, _, cluster)| gmetad.rrd_path(cluster, host, "xrootd.link.num"))
        .chain(
            ["SITEA", "SITEB", "SITEC", "SITEA-xcache"]
                .map(|s| gmetad.summary_rrd_path(s, "xrootd.link.num")),
        )
        .collect();
    while !wanted.iter().all(|p| p.exists()) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "gmetad made no {:?} in 30 s; gateway XML: {}\ngmetad log: {}",
            wanted.iter().find(|p| !p.exists()),
            gw.xml_text(),
            gmetad.proc.log_text()
        );
        send(tick);
        tick += 1;
        std::thread::sleep(Duration::from_millis(500));
    }
    for p in &wanted {
        gmetad.wait_for_update(p, sent_at + 1, Duration::from_secs(15));
    }
    // The directories gmetad made: one per site, each with its hosts and
    // its __SummaryInfo__; none for a site's host elsewhere.
    let dirs = |site: &str| -> BTreeSet<String> {
        std::fs::read_dir(gmetad.rrd_root.join(site))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(
        dirs("SITEA"),
        set(&["__SummaryInfo__", "a1.example", "a2.example"])
    );
    assert_eq!(dirs("SITEB"), set(&["__SummaryInfo__", "b1.example"]));
    assert_eq!(dirs("SITEC"), set(&["__SummaryInfo__", "c1.example"]));
    assert_eq!(
        dirs("SITEA-xcache"),
        set(&["__SummaryInfo__", "xc1.example"])
    );
    // SITEA's summary counts its two hosts: num = 2, sum = 2 x 3.
    let summary = gmetad.summary_rrd_path("SITEA", "xrootd.link.num");
    let end = unix_now();
    let num = gmetad.fetch_ds(&summary, "num", end - 10, end);
    let sum = gmetad.fetch(&summary, end - 10, end);
    assert!(num.iter().any(|(_, v)| *v == Some(2.0)), "{num:?}");
    assert!(sum.iter().any(|(_, v)| *v == Some(6.0)), "{sum:?}");
    // gmetad's own XML (what ganglia-web reads) shows the three sites as
    // clusters of its grid, with their hosts, and cluster_name (empty).
    let grid = clusters_of(&read_xml(gmetad.xml_port));
    assert_eq!(
        grid.get("SITEA"),
        Some(&set(&["a1.example", "a2.example"])),
        "{grid:?}"
    );
    assert_eq!(grid.get("SITEB"), Some(&set(&["b1.example"])), "{grid:?}");
    assert_eq!(grid.get("SITEC"), Some(&set(&["c1.example"])), "{grid:?}");
    assert_eq!(grid.get("XRootD"), Some(&set(&[])), "{grid:?}");
    assert_eq!(
        grid.get("SITEA-xcache"),
        Some(&set(&["xc1.example"])),
        "{grid:?}"
    );
    assert_eq!(grid.len(), 5, "{grid:?}");
    let owner = cluster_attr(&read_xml(gmetad.xml_port), "SITEA-xcache", "OWNER");
    assert_eq!(owner.as_deref(), Some("SITEA storage"));

    // ganglia-web (a private copy of Debian's 3.7.5) with what `gweb`
    // writes for the gateway's config: no file per site, yet every site's
    // page shows the XRootD reports and the grid page lists every site.
    let out = Scratch::new("gweb-clusters");
    gweb_files(&gw.config, out.path());
    assert!(!out.path().join("conf/cluster_SITEA.json").exists());
    let reports = included_reports(out.path());
    let gweb = Gweb::new(&gmetad.rrd_root, gmetad.interactive_port, out.path());
    let server = gweb.serve();
    for site in ["SITEA", "SITEB", "SITEC", "SITEA-xcache"] {
        let (status, body) = server.get(&format!("c={site}"));
        assert_eq!(status, 200, "{site}: {body}");
        for r in &reports {
            assert!(
                body.contains(&format!("g={r}&")),
                "{site}'s page has no {r}"
            );
        }
    }
    let (status, grid_page) = server.get("");
    assert_eq!(status, 200, "{grid_page}");
    for site in ["SITEA", "SITEB", "SITEC"] {
        assert!(
            grid_page.contains(&format!("c={site}")),
            "the grid page lacks {site}"
        );
    }
    // The view "xrootd" covers the federation: its reports carry no
    // cluster, so ganglia-web draws them in its "meta" context, from the
    // sums gmetad keeps over every cluster it polls. Its open connections
    // are then every server's: 3 each (the records' <num>), 5 servers in 4
    // clusters, where one cluster's context holds at most SITEA's 6.
    let view: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("conf/view_xrootd.json")).unwrap())
            .unwrap();
    let reports_in_view: Vec<&serde_json::Value> = view["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i.get("graph").is_some())
        .collect();
    assert!(!reports_in_view.is_empty(), "{view}");
    assert!(
        reports_in_view.iter().all(|i| i.get("cluster").is_none()),
        "{view}"
    );
    // gmetad keeps the grid's sums at its own 15-s step: wait for a row
    // that holds every server (a row is known once half its step is).
    let grid_num = gmetad.rrd_root.join("__SummaryInfo__/xrootd.link.num.rrd");
    let first = unix_now() - 60;
    // Every 200 ms: each look is an rrdtool run.
    let known = wait_for_every(
        "a row of the grid's sums",
        Duration::from_secs(60),
        Duration::from_millis(200),
        || {
            gmetad
                .fetch(&grid_num, first, unix_now())
                .into_iter()
                .rfind(|(_, v)| *v == Some(15.0))
        },
    );
    let now = unix_now();
    let (status, view_page) = server.get("tab=v&vn=xrootd");
    assert_eq!(status, 200, "{view_page}");
    let connections = view_page
        .split("src=\"")
        .chain(view_page.split("graph_args\":\""))
        .map(|s| s.split('"').next().unwrap().replace("&amp;", "&"))
        .find(|s| s.contains("g=xrootd_connections_report&"))
        .unwrap_or_else(|| panic!("no connections report in the view: {view_page}"));
    let query = connections
        .trim_start_matches("./")
        .trim_start_matches("graph.php?");
    assert!(!query.contains("c=SITE"), "{query}");
    let series = gweb.series(&format!("{query}&cs={}&ce={now}", known.0 - 60));
    let (_, open) = series
        .iter()
        .find(|(label, _)| label.trim() == "open")
        .unwrap_or_else(|| panic!("no open series: {series:?}"));
    let most = open
        .iter()
        .cloned()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    assert_eq!(most, 15.0, "{series:?}");
}

#[test]
fn hostile_sites_stay_inside_rrd_rootdir() {
    let site = Site::start(1, &format!("{QUIET}cluster_by_site = true\n"));
    let (gw, gmetad) = (&site.gateway, site.gmetad());
    // (site as sent, the cluster directory it must land in)
    let hostile = [
        ("../x", "x"),
        ("__SummaryInfo__", "SummaryInfo__"),
        ("..", "XRootD"),
        ("Zürich", "Z_rich"),
        ("日本", "XRootD"),
        ("", "XRootD"),
        ("xrootd", "XRootD"),
    ];
    let host = |i: usize| format!("evil{i}.example");
    let start = Instant::now();
    loop {
        for (i, (site, _)) in hostile.iter().enumerate() {
            let ip = format!("127.0.12.{}", i + 1);
            gw.send_as(&ip, record(&host(i), Some(site), 1_000).as_bytes());
        }
        let done = hostile
            .iter()
            .enumerate()
            .all(|(i, (_, dir))| gmetad.rrd_path(dir, &host(i), "xrootd.link.num").exists());
        if done {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "not every host's RRD in its directory after 30 s: {:?}\ngateway XML: {}",
            std::fs::read_dir(&gmetad.rrd_root)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect::<Vec<_>>(),
            gw.xml_text()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Nothing beside rrd_rootdir, and in it only the clusters named above
    // (and gmetad's grid summary).
    let outside = gmetad.rrd_root.parent().unwrap();
    assert!(!outside.join("x").exists());
    let top: BTreeSet<String> = std::fs::read_dir(&gmetad.rrd_root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        top,
        set(&["SummaryInfo__", "XRootD", "Z_rich", "__SummaryInfo__", "x"])
    );
    // The site named __SummaryInfo__ did not land in the grid's summary.
    assert!(
        !gmetad
            .rrd_root
            .join("__SummaryInfo__")
            .join(host(1))
            .exists()
    );
}

#[test]
fn ten_thousand_invented_sites_are_bounded_by_max_clusters() {
    // The gateway alone: a gmetad would spend minutes on 10,000 hosts' RRDs.
    let xml_port = free_port();
    let gw = Gateway::start_xml(
        free_port(),
        xml_port,
        None,
        &format!("{QUIET}cluster_by_site = true\nmax_clusters = 100\n"),
    );
    let n = 10_000;
    for i in 0..n {
        let ip = format!("127.1.{}.{}", i / 250, i % 250 + 1);
        let site = format!("invented-{i}");
        gw.send_as(&ip, record(&format!("h{i}"), Some(&site), 1).as_bytes());
        if i % 100 == 99 {
            // Leave the gateway time to read: these are 10,000 senders
            // at once, not a test of the socket buffer.
            gw.wait_until_read();
        }
    }
    // Every 200 ms: each look parses 10,000 hosts' XML.
    let doc = wait_for_every(
        "10,000 hosts in the XML",
        Duration::from_secs(30),
        Duration::from_millis(200),
        || {
            let c = clusters_of(&gw.xml_text());
            (c.values().map(BTreeSet::len).sum::<usize>() == n).then_some(c)
        },
    );
    // 100 sites got a cluster; every other host is in cluster_name.
    assert_eq!(
        doc.len(),
        101,
        "{:?}",
        doc.keys().take(5).collect::<Vec<_>>()
    );
    assert_eq!(doc["XRootD"].len(), n - 100);
    let log = gw.proc.log_text();
    assert!(
        log.contains("100 clusters named by sites already (max_clusters)"),
        "{}",
        &log[log.len().saturating_sub(3000)..]
    );
}

#[test]
fn a_host_whose_site_changes_moves_to_its_new_cluster_without_a_counter_spike() {
    let site = Site::start(1, &format!("{QUIET}cluster_by_site = true\n"));
    let (gw, gmetad) = (&site.gateway, site.gmetad());
    let (ip, host) = ("127.0.13.1", "mover.example");
    let begun = Instant::now();
    // The counter follows the wall clock at RATE per second, whatever the
    // site: one run of the server throughout.
    let send = |site: &str| {
        let inb = 1_000_000 + (RATE * begun.elapsed().as_secs_f64()) as u64;
        gw.send_as(ip, record(host, Some(site), inb).as_bytes());
    };
    let old_rrd = gmetad.rrd_path("SITEA", host, "xrootd.link.in");
    let new_rrd = gmetad.rrd_path("SITEB", host, "xrootd.link.in");
    while !old_rrd.exists() || begun.elapsed() < Duration::from_secs(4) {
        assert!(
            begun.elapsed() < Duration::from_secs(30),
            "no {}",
            old_rrd.display()
        );
        send("SITEA");
        std::thread::sleep(Duration::from_millis(250));
    }
    let moved = Instant::now();
    let moved_at = unix_now();
    let at_move = 1_000_000.0 + RATE * begun.elapsed().as_secs_f64();
    while moved.elapsed() < Duration::from_secs(12) {
        send("SITEB");
        std::thread::sleep(Duration::from_millis(250));
    }
    gmetad.wait_for_update(&new_rrd, moved_at + 10, Duration::from_secs(15));
    // In one place: the gateway's document has it in SITEB only (and
    // SITEA, empty, for gmetad to see it leave).
    let ours = clusters_of(&gw.xml_text());
    assert_eq!(ours.get("SITEB"), Some(&set(&[host])), "{ours:?}");
    assert_eq!(ours.get("SITEA"), Some(&set(&[])), "{ours:?}");
    // gmetad keeps a host that left a cluster as it keeps one that stopped
    // reporting (down after 4 x TMAX, gone after its DMAX): fresh in SITEB,
    // silent since the move in SITEA.
    let gmetad_xml = read_xml(gmetad.xml_port);
    let tn = |cluster: &str| -> u64 {
        host_attr(&gmetad_xml, cluster, host, "TN")
            .unwrap_or_else(|| panic!("{host} not in {cluster}: {:?}", clusters_of(&gmetad_xml)))
            .parse()
            .unwrap()
    };
    assert!(tn("SITEB") <= 3, "TN {} in SITEB", tn("SITEB"));
    assert!(tn("SITEA") >= 10, "TN {} in SITEA", tn("SITEA"));
    // Its counter went on from where it was (gmetad's XML holds the value
    // the record sent, not one counted from zero again).
    let val: f64 = value_in(&read_xml(gmetad.xml_port), "SITEB", host, "xrootd.link.in")
        .expect("the counter in SITEB")
        .parse()
        .unwrap();
    let now = 1_000_000.0 + RATE * begun.elapsed().as_secs_f64();
    assert!(
        val >= at_move && val <= now,
        "counter {val}: at the move it was {at_move}, now {now}"
    );
    // Its rate in the new cluster's RRD is RATE from the first known row:
    // no spike. The spikes this guards against are three orders of
    // magnitude out: a counter counted from zero again is a decrease, which
    // gmetad's COUNTER writes as a wrap (about 4.3e9 per step), and a
    // counter that jumped by its value is 1e6 in one row. A fair row is
    // within a factor of 3: gmetad stamps each update with our document's
    // LOCALTIME in whole seconds, so at this 1-s step a row holds between
    // half and twice a second's counts when a poll is late (a CI run wrote
    // 1752 then 1251 for 1000), plus the age of the last record (sent every
    // 250 ms).
    let end = unix_now();
    let rows = gmetad.fetch(&new_rrd, moved_at, end);
    let known: Vec<f64> = rows.iter().filter_map(|(_, v)| *v).collect();
    assert!(known.len() >= 5, "{rows:?}");
    for v in &known {
        assert!(
            (RATE / 3.0..=3.0 * RATE).contains(v),
            "rate {v} in {}, sent {RATE}: {rows:?}",
            new_rrd.display()
        );
    }
    // Over the rows together the whole-second stamps cancel but for the two
    // ends: the mean is RATE within two seconds' counts over the rows.
    let mean = known.iter().sum::<f64>() / known.len() as f64;
    assert!(
        (mean - RATE).abs() <= 2.0 * RATE / known.len() as f64,
        "mean rate {mean} over {} rows, sent {RATE}: {rows:?}",
        known.len()
    );
    // And the old one stopped being updated about when it moved.
    assert!(gmetad.last_update(&old_rrd) <= moved_at + 3);
}

#[test]
fn a_cluster_with_channels_of_its_own_reaches_only_its_gmond() {
    // Two real gmonds: the default channel's, and SITEB's own.
    let default_gmond = Gmond::start();
    let siteb_gmond = Gmond::start();
    let config = format!(
        "{QUIET}cluster_by_site = true\n[[cluster]]\nname = \"SITEB\"\nsites = [\"SITEB\"]\n[[cluster.channel]]\nhost = \"127.0.0.1\"\nport = {}\n",
        siteb_gmond.port
    );
    let gw = Gateway::start(default_gmond.port, &config);
    let servers = [
        ("127.0.14.1", "a1.example", "SITEA"),
        ("127.0.14.2", "b1.example", "SITEB"),
        ("127.0.14.3", "b2.example", "SITEB"),
        ("127.0.14.4", "c1.example", "SITEC"),
    ];
    for round in 0..3 {
        for (ip, host, site) in servers {
            gw.send_as(ip, record(host, Some(site), 1_000 + round).as_bytes());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let metrics = ["xrootd.link.num", "xrootd.link.in"];
    let siteb = siteb_gmond.wait_for(Duration::from_secs(15), "SITEB's hosts", |x| {
        x.has("b1.example", &metrics) && x.has("b2.example", &metrics)
    });
    let default = default_gmond.wait_for(Duration::from_secs(15), "the other hosts", |x| {
        x.has("a1.example", &metrics) && x.has("c1.example", &metrics)
    });
    // Each has only its own: by_site sends SITEA and SITEC to the default
    // channel (a gmond is one cluster: they are one there).
    let names = |x: &common::GangliaXml| x.hosts.keys().cloned().collect::<BTreeSet<_>>();
    assert_eq!(names(&siteb), set(&["b1.example", "b2.example"]));
    assert_eq!(names(&default), set(&["a1.example", "c1.example"]));
    assert_eq!(
        siteb.metric("b1.example", "xrootd.link.in").get("VAL"),
        "1002"
    );
}

#[test]
fn a_host_that_moves_leaves_its_old_gmond_at_its_next_cleanup() {
    // SITEB's own gmond runs its cleanup every second (unmuted with a send
    // channel, cleanup_threshold 1: tests/beyond_gmetric.rs has the same)
    // and forgets a host silent for 15 s (host_dmax; Debian's gmond.conf
    // says 0, never); the gateway's dmax is the default hour.
    let (port, xml_port, sink) = (free_port(), free_port(), free_port());
    let siteb_gmond = Gmond::start_full(
        port,
        xml_port,
        "mute = no\n  cleanup_threshold = 1\n  host_dmax = 15",
        &format!("udp_send_channel {{ host = 127.0.0.1  port = {sink} }}"),
    );
    let default_gmond = Gmond::start();
    let config = format!(
        "{QUIET}cluster_by_site = true\n[[cluster]]\nname = \"SITEB\"\nsites = [\"SITEB\"]\n[[cluster.channel]]\nhost = \"127.0.0.1\"\nport = {port}\n"
    );
    let gw = Gateway::start(default_gmond.port, &config);
    let (ip, host) = ("127.0.17.1", "mover.example");
    let metrics = ["xrootd.link.num", "xrootd.link.in"];
    let mut inb = 1_000;
    let mut send = |site: &str| {
        gw.send_as(ip, record(host, Some(site), inb).as_bytes());
        inb += 500;
    };
    for _ in 0..3 {
        send("SITEB");
        std::thread::sleep(Duration::from_millis(500));
    }
    siteb_gmond.wait_for(Duration::from_secs(15), "the host in SITEB", |x| {
        x.has(host, &metrics)
    });
    // Its site changes: SITEA, by site, on the default channel.
    let moved = Instant::now();
    send("SITEA");
    // Until SITEB's gmond holds the host without metrics. Bound: gmond's
    // cleanup runs every second here, and drops a metric 1 s after the
    // metadata that says DMAX 1; the host itself goes 15 s after the last
    // packet about it (host_dmax), which must not come first (without the
    // DMAX-1 metadata it does: the metrics stay their dmax, an hour).
    let gone = loop {
        let x = siteb_gmond.xml();
        let left = x.hosts.get(host).map(|h| h.metrics.len());
        assert!(
            left.is_some(),
            "{host} left SITEB's gmond by host_dmax ({:?} after it moved), its metrics never",
            moved.elapsed()
        );
        if left == Some(0) {
            break moved.elapsed();
        }
        send("SITEA");
        std::thread::sleep(Duration::from_millis(500));
    };
    eprintln!("{host}'s metrics left SITEB's gmond {gone:?} after the move");
    // In the default gmond, with its metrics.
    default_gmond.wait_for(Duration::from_secs(15), "the host in SITEA", |x| {
        x.has(host, &metrics)
    });
    // In SITEB's, gmond keeps the host itself, without metrics, until its
    // host_dmax after the last packet about it (the DMAX-1 metadata, sent
    // after the move): nothing the gateway could send shortens that. Not
    // before 15 s (gmond's rule); at most 45 s (a busy machine).
    let host_gone = loop {
        if !siteb_gmond.xml().hosts.contains_key(host) {
            break moved.elapsed();
        }
        assert!(
            moved.elapsed() < Duration::from_secs(45),
            "{host} still in SITEB's gmond 45 s after it moved (host_dmax 15 s)"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    eprintln!("{host} itself left SITEB's gmond {host_gone:?} after the move (host_dmax 15 s)");
    assert!(host_gone >= Duration::from_secs(15), "{host_gone:?}");
}
