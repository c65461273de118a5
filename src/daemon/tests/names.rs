//! Issue 42, item 1: a server's name from the network is never a path as
//! it is. Records with hostile `src` names and sites, through a whole
//! gateway in this process: the names its XML port writes and the spoof
//! strings gmond gets all keep the one rule (`ganglia/path_name.rs`),
//! each change counted and logged. (A real gmetad walking its
//! `rrd_rootdir`: tests/gmetad/names.rs.)

use std::collections::BTreeSet;

use super::{Bound, Packet, Sink, WITHIN, captured, log, parse, wait_for};
use crate::ganglia::path_name;

/// A record of `ds_idle.xml` from server `src` of site `site`.
fn record(src: &str, site: &str) -> String {
    captured("ds_idle.xml")
        .replacen("src=\"vm:21194\"", &format!("src=\"{src}:1094\""), 1)
        .replacen("site=\"TESTSITE\"", &format!("site=\"{site}\""), 1)
}

/// (sender, src host, site, the HOST NAME expected, its CLUSTER NAME expected).
fn hostile() -> Vec<(&'static str, String, &'static str, String, &'static str)> {
    let long = "x".repeat(300);
    vec![
        (
            "127.0.9.1",
            "..".into(),
            "SITEA",
            "127.0.9.1".into(),
            "SITEA",
        ),
        (
            "127.0.9.2",
            ".".into(),
            "SITEA",
            "127.0.9.2".into(),
            "SITEA",
        ),
        (
            "127.0.9.3",
            "__SummaryInfo__".into(),
            "SITEA",
            "SummaryInfo__".into(),
            "SITEA",
        ),
        // No name in `src`: the record's `info.host` (`vm`), as before.
        ("127.0.9.4", "".into(), "SITEA", "vm".into(), "SITEA"),
        ("127.0.9.5", "../../x".into(), "SITEA", "x".into(), "SITEA"),
        ("127.0.9.6", "a\tb".into(), "SITEA", "a_b".into(), "SITEA"),
        ("127.0.9.7", long, "SITEA", "x".repeat(128), "SITEA"),
        // Hostile sites: their clusters' names keep the rule too.
        ("127.0.9.8", "srv8".into(), "..", "srv8".into(), "XRootD"),
        (
            "127.0.9.9",
            "srv9".into(),
            "__SummaryInfo__",
            "srv9".into(),
            "SummaryInfo__",
        ),
        ("127.0.9.10", "srv10".into(), ".", "srv10".into(), "XRootD"),
    ]
}

#[test]
fn hostile_names_reach_the_xml_port_and_gmond_as_safe_path_components() {
    log::capture();
    let sink = Sink::new();
    let gw = Bound::new(
        "stats_interval = 0\nself_metrics_interval = 0\nlog_interval = 1\ncluster_by_site = true\n",
        &[sink.addr],
        true,
        None,
    )
    .start();
    let cases = hostile();
    for (ip, src, site, _, _) in &cases {
        gw.send_as(ip, &record(src, site));
    }
    // (cluster, host) of every HOST the XML port writes, once all are in.
    let written: BTreeSet<(String, String)> =
        wait_for("every host in the document", WITHIN, || {
            let doc = gw.poll_from("127.0.0.1:0");
            let parsed = parse(&doc);
            let hosts: BTreeSet<(String, String)> = parsed
                .descendants()
                .filter(|n| n.has_tag_name("HOST"))
                .map(|h| {
                    let cluster = h.parent().and_then(|c| c.attribute("NAME")).unwrap_or("");
                    (
                        cluster.to_string(),
                        h.attribute("NAME").unwrap().to_string(),
                    )
                })
                .collect();
            (hosts.len() >= cases.len()).then_some(hosts)
        });
    let want: BTreeSet<(String, String)> = cases
        .iter()
        .map(|(_, _, _, host, cluster)| (cluster.to_string(), host.clone()))
        .collect();
    assert_eq!(written, want);
    for (cluster, host) in &written {
        assert_eq!(path_name::check(cluster), Ok(()), "{cluster:?}");
        assert_eq!(path_name::check(host), Ok(()), "{host:?}");
    }
    // gmond gets the same names, as `ip:name`.
    let spoofs: BTreeSet<String> = sink.wait("every host's spoof", WITHIN, |packets| {
        let hosts: BTreeSet<String> = packets
            .iter()
            .filter_map(|p| match p {
                Packet::Metadata { id, .. } | Packet::Value { id, .. } => Some(id.host.to_string()),
                _ => None,
            })
            .collect();
        (hosts.len() >= cases.len()).then_some(hosts)
    });
    let want: BTreeSet<String> = cases
        .iter()
        .map(|(ip, _, _, host, _)| format!("{ip}:{host}"))
        .collect();
    assert_eq!(spoofs, want);
    // Counted: 6 host names and 3 sites changed; each once, however many
    // records follow (a source's name is counted when it is taken).
    for (ip, src, site, _, _) in &cases {
        gw.send_as(ip, &record(src, site));
    }
    let (_, counters) = gw.stop();
    assert_eq!(counters.names_changed, 9, "{counters}");
    // Logged once per reason (log_interval = 1 s: these came within it,
    // unless the machine is very slow; at least one line per reason).
    for why in [
        "nothing usable is left of it",
        "what came before its first letter or digit was dropped",
        "characters other than letters",
        "it was cut at its longest",
    ] {
        assert!(
            !log::lines_with(&["name", "published as", why]).is_empty(),
            "no line says {why:?}"
        );
    }
    assert!(
        !log::lines_with(&["host name \"..\" published as \"127.0.9.1\""]).is_empty(),
        "{:?}",
        log::lines_with(&["published as"])
    );
}
