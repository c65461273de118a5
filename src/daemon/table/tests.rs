use std::collections::BTreeMap;
use std::io;

use super::*;
use crate::engine::packets::HEARTBEAT;
use crate::engine::tests::Harness;
use crate::ganglia::xdr::Packet;

fn record(host: &str, tos: u32, inb: u64) -> String {
    format!(
        r#"<statistics tod="1700000100" ver="v5.5.3" src="{host}:1094" tos="{tos}" pgm="xrootd" ins="anon" pid="77" site="T2_X"><stats id="link"><num>3</num><in>{inb}</in></stats><stats id="ofs"><role>server</role></stats></statistics>"#
    )
}

/// A host table fed by a pipeline, on one clock.
struct Table {
    t: HostTable,
    r: Harness,
}

impl Table {
    fn new(config: &str, max_hosts: usize) -> Table {
        // The table first: its clock starts before the engine's, so
        // `secs` seconds in are as many for both.
        let t = HostTable::new(max_hosts);
        Table {
            t,
            r: Harness::new(config),
        }
    }

    /// `datagram` from `from`, `secs` seconds in, through the engine
    /// and into the table.
    fn feed(&mut self, datagram: &str, from: &str, secs: u64) {
        self.r.feed(datagram, from, secs);
        let ip = from.parse::<std::net::SocketAddr>().unwrap().ip();
        self.t.take(self.r.engine.batch(), ip, self.r.at(secs));
    }

    /// A [`record`] of `host`.
    fn report(&mut self, host: &str, tos: u32, inb: u64, from: &str, secs: u64) {
        self.feed(&record(host, tos, inb), from, secs);
    }

    fn document(&self, secs: u64) -> (Doc, Written, String) {
        document(&self.t, self.r.at(secs))
    }
}

/// host NAME -> (host attributes, metric NAME -> (attributes + extras)).
type Doc = BTreeMap<
    String,
    (
        BTreeMap<String, String>,
        BTreeMap<String, BTreeMap<String, String>>,
    ),
>;

fn document(t: &HostTable, at: Instant) -> (Doc, Written, String) {
    let mut text = Vec::new();
    let grouping = crate::config::clusters::Grouping::default();
    let cluster = ClusterInfo {
        name: "XRootD",
        host_dmax: 3600,
        grouping: &grouping,
        port: None,
    };
    let w = t
        .write(&cluster, at, &mut |piece| {
            text.extend_from_slice(piece);
            Ok(())
        })
        .unwrap();
    let text = String::from_utf8(text).unwrap();
    assert_eq!(w.bytes, text.len());
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(&text, opts).unwrap();
    let attrs = |n: roxmltree::Node<'_, '_>| -> BTreeMap<String, String> {
        n.attributes()
            .map(|a| (a.name().to_string(), a.value().to_string()))
            .collect()
    };
    let mut out = Doc::new();
    for h in doc.descendants().filter(|n| n.has_tag_name("HOST")) {
        let mut metrics = BTreeMap::new();
        for m in h.children().filter(|n| n.has_tag_name("METRIC")) {
            let mut a = attrs(m);
            for e in m.descendants().filter(|n| n.has_tag_name("EXTRA_ELEMENT")) {
                a.insert(
                    format!("extra:{}", e.attribute("NAME").unwrap()),
                    e.attribute("VAL").unwrap().to_string(),
                );
            }
            metrics.insert(a["NAME"].clone(), a);
        }
        let a = attrs(h);
        assert!(
            out.insert(a["NAME"].clone(), (a, metrics)).is_none(),
            "two HOSTs of one NAME"
        );
    }
    (out, w, text)
}

#[test]
fn a_record_is_written_as_gmond_would_hold_it() {
    let mut x = Table::new("", 100);
    x.report("ds1.example.org", 1_700_000_000, 1024, "10.0.0.5:1", 0);
    let (doc, w, _) = x.document(2);
    assert_eq!((w.hosts, w.renamed), (1, 0));
    let (host, metrics) = &doc["ds1.example.org"];
    assert_eq!(host["IP"], "10.0.0.5");
    assert_eq!(host["GMOND_STARTED"], "1700000000");
    assert_eq!(host["TN"], "2");
    assert_eq!(host["TMAX"], "60");
    assert_eq!(host["DMAX"], "3600");
    let m = &metrics["xrootd.link.in"];
    assert_eq!(m["VAL"], "1024");
    assert_eq!(m["TYPE"], "double");
    assert_eq!(m["SLOPE"], "positive");
    assert_eq!(m["UNITS"], "bytes/s");
    assert_eq!(m["TN"], "2");
    assert_eq!(m["TMAX"], "60");
    assert_eq!(m["DMAX"], "3600");
    assert_eq!(m["extra:GROUP"], "xrootd.link");
    assert!(!m["extra:TITLE"].is_empty() && !m["extra:DESC"].is_empty());
    // The packet's addressing is not the metric's: no SPOOF_HOST.
    assert!(!m.contains_key("extra:SPOOF_HOST"), "{m:?}");
    assert_eq!(metrics["xrootd.ofs.role"]["VAL"], "server");
    assert_eq!(metrics["xrootd.ofs.role"]["TYPE"], "string");
    // Every metric the record became, and only those: the heartbeat is not one.
    let sent: std::collections::BTreeSet<String> =
        x.r.packets()
            .into_iter()
            .filter_map(|p| match p {
                Packet::Metadata { id, .. } if id.name != HEARTBEAT => Some(id.name.into_owned()),
                _ => None,
            })
            .collect();
    assert!(sent.len() >= 10, "{sent:?}");
    assert!(sent.iter().eq(metrics.keys()), "{sent:?}");
    assert_eq!(metrics.len(), w.metrics);
}

#[test]
fn values_follow_the_last_report_and_counters_stay_continuous() {
    let mut x = Table::new("", 100);
    x.report("a", 1_700_000_000, 5000, "10.0.0.5:1", 0);
    x.report("a", 1_700_000_000, 6000, "10.0.0.5:1", 10);
    // Restarted: the counter starts from zero, the document continues.
    x.report("a", 1_700_000_500, 70, "10.0.0.5:1", 20);
    let (doc, ..) = x.document(21);
    let (host, metrics) = &doc["a"];
    assert_eq!(metrics["xrootd.link.in"]["VAL"], "6070");
    assert_eq!(metrics["xrootd.link.in"]["TN"], "1");
    assert_eq!(host["GMOND_STARTED"], "1700000500");
    // TMAX follows the report interval (1.5 x 10 s), as in the metadata.
    assert_eq!(metrics["xrootd.link.in"]["TMAX"], "15");
}

#[test]
fn metrics_and_hosts_past_dmax_leave_the_document() {
    let mut x = Table::new("dmax = 120\nmetadata_interval = 60", 100);
    let rec = |with_ofs: bool| {
        let ofs = if with_ofs {
            "<stats id=\"ofs\"><role>server</role></stats>"
        } else {
            ""
        };
        format!(
            r#"<statistics tod="1" ver="v5.5.3" src="s:1094" tos="1700000000" pgm="xrootd" ins="anon" pid="7" site="X"><stats id="link"><num>1</num></stats>{ofs}</statistics>"#
        )
    };
    x.feed(&rec(true), "10.0.0.6:1", 0);
    x.feed(&rec(false), "10.0.0.6:1", 100);
    let (doc, ..) = x.document(110);
    assert!(doc["s"].1.contains_key("xrootd.ofs.role"));
    // The role's last value is 121 s old: past DMAX. The link's is 21 s old.
    let (doc, ..) = x.document(121);
    assert!(!doc["s"].1.contains_key("xrootd.ofs.role"));
    assert!(doc["s"].1.contains_key("xrootd.link.num"));
    // Nothing reported for DMAX: the host goes too.
    let (doc, w, _) = x.document(300);
    assert!(doc.is_empty() && w.hosts == 0, "{doc:?}");
    assert_eq!(x.t.hosts(), 0);
}

#[test]
fn two_addresses_claiming_one_name_are_kept_apart() {
    let mut x = Table::new("", 100);
    for i in 0..3 {
        x.report("same", 1_700_000_000, 10, "10.0.0.1:1", i * 10);
        x.report("same", 1_700_000_000, 99, "10.0.0.2:1", i * 10 + 1);
    }
    let (doc, w, _) = x.document(25);
    assert_eq!(w.renamed, 1);
    // The first heard keeps the name; the other is named by its address.
    assert_eq!(doc["same"].0["IP"], "10.0.0.1");
    assert_eq!(doc["same"].1["xrootd.link.in"]["VAL"], "10");
    assert_eq!(doc["same@10.0.0.2"].0["IP"], "10.0.0.2");
    assert_eq!(doc["same@10.0.0.2"].1["xrootd.link.in"]["VAL"], "99");
    // The first stops (moved to the second address): once it is down for
    // gmetad (TN over 4 x its TMAX: 60 s, the default, as its metadata
    // said), the name goes to the one reporting.
    for i in 3..27 {
        x.report("same", 1_700_000_000, 99, "10.0.0.2:1", i * 10 + 1);
    }
    // 10.0.0.1's TN is 239 s: still up.
    let (doc, _, _) = x.document(259);
    assert_eq!(doc["same"].0["IP"], "10.0.0.1");
    let (doc, w, _) = x.document(262);
    assert_eq!(w.renamed, 1);
    assert_eq!(doc["same"].0["IP"], "10.0.0.2");
    assert_eq!(doc["same@10.0.0.1"].0["IP"], "10.0.0.1");
}

#[test]
fn an_ipv6_sender_is_written_with_its_real_address() {
    let mut x = Table::new("", 100);
    x.report("v6", 1_700_000_000, 1, "[2001:db8::7]:1", 0);
    x.report("v4m", 1_700_000_000, 1, "[::ffff:10.1.2.3]:1", 0);
    let (doc, ..) = x.document(0);
    assert_eq!(doc["v6"].0["IP"], "2001:db8::7");
    assert_eq!(doc["v4m"].0["IP"], "10.1.2.3");
}

#[test]
fn hosts_are_capped_the_longest_silent_leaving_first() {
    let mut x = Table::new("", 10);
    let mut evicted = 0;
    for i in 0..60u64 {
        x.r.feed(
            record(&format!("h{i}"), 1_700_000_000, 1),
            &format!("10.0.1.{i}:1"),
            i,
        );
        let ip = std::net::IpAddr::from([10, 0, 1, i as u8]);
        evicted += x.t.take(x.r.engine.batch(), ip, x.r.at(i));
        // Never more than the cap (issue 34, item 2: it was the cap and a
        // quarter).
        assert!(x.t.hosts() <= 10, "{} hosts", x.t.hosts());
        let (doc, ..) = x.document(i);
        assert!(doc.len() <= 10, "{} hosts in the document", doc.len());
    }
    assert!(evicted >= 60 - 10, "{evicted}");
    assert_eq!(x.t.hosts() + evicted, 60);
    let (doc, ..) = x.document(60);
    assert!(
        doc.contains_key("h59") && !doc.contains_key("h0"),
        "{:?}",
        doc.keys()
    );
}

#[test]
fn a_big_document_is_written_in_pieces() {
    let mut x = Table::new("", 10_000);
    for i in 0..2000u32 {
        let from = format!("10.{}.{}.{}:1", i >> 16, (i >> 8) & 255, i & 255);
        x.feed(&record(&format!("h{i}"), 1_700_000_000, 1), &from, 0);
    }
    let mut pieces = Vec::new();
    let grouping = crate::config::clusters::Grouping::default();
    let cluster = ClusterInfo {
        name: "XRootD",
        host_dmax: 0,
        grouping: &grouping,
        port: None,
    };
    let w =
        x.t.write(&cluster, x.r.at(0), &mut |piece| {
            pieces.push(piece.len());
            Ok(())
        })
        .unwrap();
    assert_eq!(w.hosts, 2000);
    assert_eq!(pieces.iter().sum::<usize>(), w.bytes);
    assert!(pieces.len() > 5, "{pieces:?}");
    // A piece is at most one host past the chunk size.
    assert!(pieces.iter().all(|&n| n < CHUNK + 8 * 1024), "{pieces:?}");
    // A failing client stops the writing at once.
    let mut calls = 0;
    let result = x.t.write(&cluster, x.r.at(0), &mut |_| {
        calls += 1;
        Err(io::Error::new(io::ErrorKind::TimedOut, "stalled"))
    });
    assert!(result.is_err() && calls == 1);
}

#[test]
fn an_xrootd_and_a_cmsd_from_one_address_are_one_host() {
    let mut x = Table::new("", 100);
    x.report("rdr", 1_700_000_000, 1, "10.0.0.8:1", 0);
    let cmsd = r#"<statistics tod="1" ver="v5.5.3" src="rdr:1213" tos="1700000001" pgm="cmsd" ins="anon" pid="8" site="X"><stats id="cmsm"><role>manager</role></stats></statistics>"#;
    x.feed(cmsd, "10.0.0.8:2", 0);
    let (doc, w, _) = x.document(0);
    assert_eq!(w.hosts, 1, "{:?}", doc.keys());
    let metrics = &doc["rdr"].1;
    assert!(metrics.contains_key("xrootd.link.in") && metrics.contains_key("cmsd.cmsm.role"));
}

/// A batch with one metric's metadata and value for `host`.
fn one_metric(host: &str, units: &str, title: &str, value: &str) -> PacketBatch {
    use crate::engine::packets::{MetaFields, MetadataOf, SlotKey};
    let key = SlotKey {
        host: crate::fnv::hash(host.as_bytes()),
        metric: crate::fnv::hash(b"xrootd.link.in"),
    };
    let spoof = format!("192.0.2.9:{host}");
    let mut b = PacketBatch::default();
    b.host = Some(crate::engine::packets::HostId::spoofed("192.0.2.9", host));
    b.metadata_of(MetadataOf {
        key,
        host: &spoof,
        spoof: true,
        fields: MetaFields {
            name: "xrootd.link.in",
            value_type: "double",
            units,
            slope: crate::ganglia::xdr::Slope::Positive,
            tmax: 60,
            dmax: 0,
            group: "xrootd",
            desc: "bytes received",
            title,
        },
    });
    b.value_of(key, &spoof, true, "xrootd.link.in", value.as_bytes());
    b
}

#[test]
fn metadata_that_changes_replaces_what_a_host_held_and_alike_is_shared() {
    let t = HostTable::new(100);
    let at = Instant::now();
    let ip: IpAddr = "192.0.2.9".parse().unwrap();
    t.take(&one_metric("a", "bytes/s", "In", "1"), ip, at);
    t.take(&one_metric("b", "bytes/s", "In", "2"), ip, at);
    // The same metadata again (a periodic resend), then changed units and
    // title for host a only.
    t.take(&one_metric("a", "bytes/s", "In", "3"), ip, at);
    t.take(&one_metric("a", "B/s", "Bytes in", "4"), ip, at);
    let (doc, _, _) = document(&t, at);
    let a = &doc["a"].1["xrootd.link.in"];
    let b = &doc["b"].1["xrootd.link.in"];
    assert_eq!(
        (
            a["UNITS"].as_str(),
            a["extra:TITLE"].as_str(),
            a["VAL"].as_str()
        ),
        ("B/s", "Bytes in", "4")
    );
    assert_eq!(
        (
            b["UNITS"].as_str(),
            b["extra:TITLE"].as_str(),
            b["VAL"].as_str()
        ),
        ("bytes/s", "In", "2")
    );
    // Two distinct metadata held, each once: b's is the one a had first.
    assert_eq!(t.metas.uses(), [1, 1]);
}

// ---- clusters (docs/clusters.md) ----

/// A record of `host` naming `site` (no site attribute when None), from
/// instance `ins` of an xrootd started at `tos`.
fn site_record(host: &str, site: Option<&str>, ins: &str, tos: u32, inb: u64) -> String {
    let site = site.map_or(String::new(), |s| format!(" site=\"{s}\""));
    format!(
        r#"<statistics tod="1700000100" ver="v5.5.3" src="{host}:1094" tos="{tos}" pgm="xrootd" ins="{ins}" pid="77"{site}><stats id="link"><num>3</num><in>{inb}</in></stats></statistics>"#
    )
}

/// CLUSTER NAME -> (its attributes, host NAME -> metric NAME -> VAL).
type Clusters = BTreeMap<
    String,
    (
        BTreeMap<String, String>,
        BTreeMap<String, BTreeMap<String, String>>,
    ),
>;

impl Table {
    /// The document as the settings' `cluster_name` and rules write it.
    fn clusters(&self, secs: u64) -> (Clusters, Written) {
        self.clusters_on(secs, None)
    }

    /// The document of rule port `port` (None: the gateway's).
    fn clusters_on(&self, secs: u64, port: Option<u32>) -> (Clusters, Written) {
        let s = &self.r.settings;
        let cluster = ClusterInfo {
            name: &s.cluster_name,
            host_dmax: 3600,
            grouping: &s.grouping,
            port,
        };
        let mut text = Vec::new();
        let w = self
            .t
            .write(&cluster, self.r.at(secs), &mut |piece| {
                text.extend_from_slice(piece);
                Ok(())
            })
            .unwrap();
        let text = String::from_utf8(text).unwrap();
        let opts = roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        };
        let doc = roxmltree::Document::parse_with_options(&text, opts).unwrap();
        let mut out = Clusters::new();
        for c in doc.descendants().filter(|n| n.has_tag_name("CLUSTER")) {
            let attrs: BTreeMap<String, String> = c
                .attributes()
                .map(|a| (a.name().to_string(), a.value().to_string()))
                .collect();
            let mut hosts = BTreeMap::new();
            for h in c.children().filter(|n| n.has_tag_name("HOST")) {
                let metrics = h
                    .children()
                    .filter(|n| n.has_tag_name("METRIC"))
                    .map(|m| {
                        let get = |k| m.attribute(k).unwrap_or("").to_string();
                        (get("NAME"), get("VAL"))
                    })
                    .collect();
                let name = h.attribute("NAME").unwrap_or("").to_string();
                assert!(
                    hosts.insert(name, metrics).is_none(),
                    "a host twice in one cluster"
                );
            }
            let name = attrs["NAME"].clone();
            assert!(
                out.insert(name, (attrs, hosts)).is_none(),
                "a CLUSTER twice"
            );
        }
        assert_eq!(w.clusters, out.len());
        (out, w)
    }
}

/// The hosts of each cluster, by name.
fn layout(c: &Clusters) -> Vec<(String, Vec<String>)> {
    c.iter()
        .map(|(name, (_, hosts))| (name.clone(), hosts.keys().cloned().collect()))
        .collect()
}

fn owned(layout: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    layout
        .iter()
        .map(|(c, hs)| (c.to_string(), hs.iter().map(|h| h.to_string()).collect()))
        .collect()
}

#[test]
fn by_site_each_site_is_a_cluster_and_the_rest_is_cluster_name() {
    let mut x = Table::new("cluster_by_site = true\n", 100);
    x.feed(
        &site_record("a1", Some("SITEA"), "anon", 1, 10),
        "10.0.0.1:1",
        0,
    );
    x.feed(
        &site_record("a2", Some("SITEA"), "anon", 1, 10),
        "10.0.0.2:1",
        0,
    );
    x.feed(
        &site_record("b1", Some("SITEB"), "anon", 1, 10),
        "10.0.0.3:1",
        0,
    );
    x.feed(
        &site_record("c1", Some("SITEC"), "anon", 1, 10),
        "10.0.0.4:1",
        0,
    );
    x.feed(&site_record("e1", Some(""), "anon", 1, 10), "10.0.0.5:1", 0);
    x.feed(&site_record("n1", None, "anon", 1, 10), "10.0.0.6:1", 0);
    let (c, w) = x.clusters(0);
    assert_eq!(
        layout(&c),
        owned(&[
            ("SITEA", &["a1", "a2"]),
            ("SITEB", &["b1"]),
            ("SITEC", &["c1"]),
            ("XRootD", &["e1", "n1"]),
        ])
    );
    assert_eq!((w.hosts, w.clusters), (6, 4));
    assert_eq!(c["SITEA"].0["OWNER"], "unspecified");
    assert_eq!(c["SITEA"].1["a1"]["xrootd.link.in"], "10");
    // Without cluster_by_site, one cluster as before.
    let mut y = Table::new("", 100);
    y.feed(
        &site_record("a1", Some("SITEA"), "anon", 1, 10),
        "10.0.0.1:1",
        0,
    );
    y.feed(
        &site_record("b1", Some("SITEB"), "anon", 1, 10),
        "10.0.0.3:1",
        0,
    );
    assert_eq!(
        layout(&y.clusters(0).0),
        owned(&[("XRootD", &["a1", "b1"])])
    );
}

#[test]
fn instances_of_one_address_naming_two_sites_are_a_host_in_each() {
    // An origin (-n ds, SITEA) and its XCache (-n pfc, SITEB) on one
    // machine: each instance's metrics in its own site's cluster, under the
    // machine's name in both.
    let mut x = Table::new("cluster_by_site = true\n", 100);
    for t in [0, 10] {
        let inb = 100 + t;
        x.feed(
            &site_record("vm", Some("SITEA"), "ds", 1, inb),
            "10.0.0.9:1",
            t,
        );
        x.feed(
            &site_record("vm", Some("SITEB"), "pfc", 1, inb * 2),
            "10.0.0.9:2",
            t,
        );
    }
    let (c, w) = x.clusters(10);
    assert_eq!(
        layout(&c),
        owned(&[("SITEA", &["vm"]), ("SITEB", &["vm"]), ("XRootD", &[])])
    );
    assert_eq!(w.renamed, 0);
    let a = &c["SITEA"].1["vm"];
    let b = &c["SITEB"].1["vm"];
    assert_eq!(a["xrootd.ds.link.in"], "110");
    assert_eq!(b["xrootd.pfc.link.in"], "220");
    assert!(a.keys().all(|m| !m.contains(".pfc.")), "{a:?}");
    assert!(b.keys().all(|m| !m.contains(".ds.")), "{b:?}");
}

#[test]
fn a_host_whose_site_changes_moves_with_its_counters_continuous() {
    let mut x = Table::new("cluster_by_site = true\n", 100);
    x.feed(
        &site_record("h1", Some("SITEA"), "anon", 1, 1000),
        "10.0.0.1:1",
        0,
    );
    x.feed(
        &site_record("h1", Some("SITEA"), "anon", 1, 2000),
        "10.0.0.1:1",
        10,
    );
    x.feed(
        &site_record("h1", Some("SITEA"), "anon", 1, 3000),
        "10.0.0.1:1",
        20,
    );
    x.feed(
        &site_record("b1", Some("SITEB"), "anon", 1, 5),
        "10.0.0.2:1",
        20,
    );
    let (c, _) = x.clusters(20);
    assert_eq!(c["SITEA"].1["h1"]["xrootd.link.in"], "3000");
    // The same run of the server, now naming SITEB.
    x.feed(
        &site_record("h1", Some("SITEB"), "anon", 1, 4000),
        "10.0.0.1:1",
        30,
    );
    let (c, w) = x.clusters(30);
    // SITEA is written empty a while: gmetad sees its host leave.
    assert_eq!(
        layout(&c),
        owned(&[("SITEA", &[]), ("SITEB", &["b1", "h1"]), ("XRootD", &[])])
    );
    assert_eq!(w.hosts, 2);
    let h1 = &c["SITEB"].1["h1"];
    assert_eq!(h1["xrootd.link.in"], "4000", "{h1:?}");
    assert_eq!(
        h1["xrootd.link.num"], "3",
        "its metadata came along: {h1:?}"
    );
    // And back, by the fast path's template no more than by the full path.
    x.feed(
        &site_record("h1", Some("SITEA"), "anon", 1, 5000),
        "10.0.0.1:1",
        40,
    );
    x.feed(
        &site_record("h1", Some("SITEA"), "anon", 1, 6000),
        "10.0.0.1:1",
        50,
    );
    let (c, _) = x.clusters(50);
    assert_eq!(
        layout(&c),
        owned(&[("SITEA", &["h1"]), ("SITEB", &["b1"]), ("XRootD", &[])])
    );
    assert_eq!(c["SITEA"].1["h1"]["xrootd.link.in"], "6000");
}

const RULES: &str = r#"cluster_by_site = true
[[cluster]]
name = "SITEA-xcache"
networks = ["10.1.2.0/24"]
owner = "SITEA ops & co"
latlong = "N40.82 W96.70"
url = "https://sitea.example/"
[[cluster]]
name = "redirectors"
hosts = ["rdr*"]
[[cluster]]
name = "never"
hosts = ["rdr*"]
"#;

#[test]
fn rules_split_a_sites_xcache_by_network_first_match_winning() {
    let mut x = Table::new(RULES, 100);
    x.feed(
        &site_record("d1", Some("SITEA"), "anon", 1, 1),
        "10.1.1.1:1",
        0,
    );
    x.feed(
        &site_record("d2", Some("SITEA"), "anon", 1, 1),
        "10.1.1.2:1",
        0,
    );
    x.feed(
        &site_record("xc1", Some("SITEA"), "anon", 1, 1),
        "10.1.2.5:1",
        0,
    );
    // An address in the network and a name both rules match: the first rule.
    x.feed(
        &site_record("rdr2", Some("SITEA"), "anon", 1, 1),
        "10.1.2.6:1",
        0,
    );
    x.feed(
        &site_record("rdr1", Some("SITEB"), "anon", 1, 1),
        "10.2.0.1:1",
        0,
    );
    let (c, _) = x.clusters(0);
    assert_eq!(
        layout(&c),
        owned(&[
            ("SITEA", &["d1", "d2"]),
            ("SITEA-xcache", &["rdr2", "xc1"]),
            ("XRootD", &[]),
            ("redirectors", &["rdr1"]),
        ])
    );
    // A site spelled as a rule's name in another case, heard before any
    // server of the rule, is in the rule's cluster: never two directories
    // that a case-insensitive file system would make one.
    let mut y = Table::new(RULES, 100);
    y.feed(
        &site_record("r9", Some("REDIRECTORS"), "anon", 1, 1),
        "10.3.0.1:1",
        0,
    );
    y.feed(
        &site_record("rdr1", Some("SITEB"), "anon", 1, 1),
        "10.2.0.1:1",
        0,
    );
    assert_eq!(
        layout(&y.clusters(0).0),
        owned(&[("XRootD", &[]), ("redirectors", &["r9", "rdr1"])])
    );
    let attrs = &c["SITEA-xcache"].0;
    assert_eq!(attrs["OWNER"], "SITEA ops & co");
    assert_eq!(attrs["LATLONG"], "N40.82 W96.70");
    assert_eq!(attrs["URL"], "https://sitea.example/");
    assert_eq!(c["redirectors"].0["URL"], "unspecified");
}

#[test]
fn a_new_rule_at_a_reload_moves_hosts_at_their_next_record() {
    let mut x = Table::new("cluster_by_site = true\n", 100);
    x.feed(
        &site_record("d1", Some("SITEA"), "anon", 1, 1),
        "10.1.1.1:1",
        0,
    );
    x.feed(
        &site_record("xc1", Some("SITEA"), "anon", 1, 7),
        "10.1.2.5:1",
        0,
    );
    x.feed(
        &site_record("xc1", Some("SITEA"), "anon", 1, 8),
        "10.1.2.5:1",
        10,
    );
    let new = Arc::new(crate::engine::tests::settings(RULES));
    x.r.engine.reconfigure(new.clone());
    x.r.settings = new;
    x.feed(
        &site_record("xc1", Some("SITEA"), "anon", 1, 9),
        "10.1.2.5:1",
        20,
    );
    let (c, _) = x.clusters(20);
    assert_eq!(
        layout(&c),
        owned(&[
            ("SITEA", &["d1"]),
            ("SITEA-xcache", &["xc1"]),
            ("XRootD", &[])
        ])
    );
    assert_eq!(c["SITEA-xcache"].1["xc1"]["xrootd.link.in"], "9");
}

#[test]
fn hostile_sites_stay_inside_rrd_rootdir_and_are_bounded() {
    let mut x = Table::new("cluster_by_site = true\nmax_clusters = 5\n", 1000);
    let sites = [
        ("../x", "x"),
        ("__SummaryInfo__", "SummaryInfo__"),
        ("..", "XRootD"),
        ("/", "XRootD"),
        ("日本", "XRootD"),
        ("xrootd", "XRootD"),
        ("SiteA", "SiteA"),
        ("SITEA", "SiteA"),
        ("a b;c|d", "a_b_c_d"),
    ];
    for (i, (site, _)) in sites.iter().enumerate() {
        let from = format!("10.0.1.{}:1", i + 1);
        x.feed(
            &site_record(&format!("h{i}"), Some(site), "anon", 1, 1),
            &from,
            0,
        );
    }
    let (c, _) = x.clusters(0);
    for (i, (site, cluster)) in sites.iter().enumerate() {
        let host = format!("h{i}");
        assert!(
            c.get(*cluster)
                .is_some_and(|(_, hosts)| hosts.contains_key(&host)),
            "site {site:?}: {host} not in {cluster}: {:?}",
            layout(&c)
        );
    }
    assert_eq!(c.len(), 5, "{:?}", layout(&c));
    assert_eq!(x.r.counters.snapshot().clusters_refused, 0);
    // Two more sites fill max_clusters; the rest go to cluster_name, counted.
    for i in 0..100 {
        let from = format!("10.0.2.{}:1", i + 1);
        x.feed(
            &site_record(
                &format!("f{i}"),
                Some(&format!("invented{i}")),
                "anon",
                1,
                1,
            ),
            &from,
            0,
        );
    }
    let (c, _) = x.clusters(0);
    assert_eq!(c.len(), 6, "{:?}", c.keys());
    assert_eq!(c["XRootD"].1.len(), 4 + 99);
    assert_eq!(x.r.counters.snapshot().clusters_refused, 99);
    assert_eq!(x.r.counters.snapshot().site_clusters, 5);
}

mod ports;
