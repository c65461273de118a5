//! A federation sharded over gmetads (docs/clusters.md, "A federation over
//! several gmetads"): `{site}` rules, each serving its clusters on a port
//! of its own, polled by real gmetads 3.7.2. What each gmetad wrote (its
//! RRD directories) is compared with the sites the records named.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::common::{
    GmetadOf, Polls, Site, clusters_of, free_port, names as set, read_xml, replay::unix_now,
};
use super::{QUIET, record};

/// The directories under `dir` (cluster or host names).
fn dirs(dir: &std::path::Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_gmetad_polling_a_rule_port_writes_only_that_rules_sites() {
    let (shard_port, other_port) = (free_port(), free_port());
    // Shard A: every T2_ site, a cluster each; one site by a literal rule
    // on a port of its own; the rest by cluster_by_site (the gateway's
    // port only).
    let config = format!(
        "{QUIET}cluster_by_site = true\n\
         [[cluster]]\nname = \"XC\"\nsites = [\"T2_XC\"]\nxml_listen = [\"127.0.0.1:{other_port}\"]\nxml_allow = [\"127.0.0.2\"]\n\
         [[cluster]]\nname = \"{{site}}\"\nsites = [\"T2_*\"]\nxml_listen = [\"127.0.0.1:{shard_port}\"]\n"
    );
    // One gmetad on the gateway's own port, one on the rule's.
    let site = Site::start_with(
        1,
        &config,
        &[
            GmetadOf::polling(&[Polls::Gateway]),
            GmetadOf::polling(&[Polls::Port(shard_port)]),
        ],
    );
    let (gw, all, shard) = (&site.gateway, &site.gmetads[0], &site.gmetads[1]);
    // (address, host, site, its cluster, whether shard A holds it)
    let servers = [
        ("127.0.16.1", "a1.example", Some("T2_A"), "T2_A", true),
        ("127.0.16.2", "a2.example", Some("T2_A"), "T2_A", true),
        ("127.0.16.3", "b1.example", Some("T2_B"), "T2_B", true),
        // Sanitised as cluster_by_site sanitises.
        (
            "127.0.16.4",
            "z1.example",
            Some("T2_Zürich"),
            "T2_Z_rich",
            true,
        ),
        ("127.0.16.5", "x1.example", Some("T2_XC"), "XC", false),
        ("127.0.16.6", "c1.example", Some("SITEC"), "SITEC", false),
        ("127.0.16.7", "n1.example", None, "XRootD", false),
    ];
    let start = Instant::now();
    let mut tick = 0u64;
    let wanted: Vec<_> = servers
        .iter()
        .map(|(_, host, _, cluster, _)| all.rrd_path(cluster, host, "xrootd.link.num"))
        .chain(
            servers
                .iter()
                .filter(|s| s.4)
                .map(|(_, host, _, cluster, _)| shard.rrd_path(cluster, host, "xrootd.link.num")),
        )
        .collect();
    // Until both gmetads have every host's RRD they should have.
    while !wanted.iter().all(|p| p.exists()) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no {:?} in 60 s; the shard port's document: {}\nall: {:?}\nshard: {:?}",
            wanted.iter().find(|p| !p.exists()),
            read_xml(shard_port),
            all.proc.log_text(),
            shard.proc.log_text(),
        );
        for (ip, host, site, _, _) in servers {
            gw.send_as(ip, record(host, site, 1_000 + tick * 500).as_bytes());
        }
        tick += 1;
        std::thread::sleep(Duration::from_millis(500));
    }
    // Two more polls of each after that (waited for by the RRDs' last
    // update, not by a time): anything that should not be in a gmetad
    // would be there by now, as it was in its first poll.
    let probe = shard.rrd_path("T2_A", "a1.example", "xrootd.link.num");
    let now = unix_now();
    shard.wait_for_update(&probe, now + 2, Duration::from_secs(30));
    all.wait_for_update(
        &all.rrd_path("SITEC", "c1.example", "xrootd.link.num"),
        now + 2,
        Duration::from_secs(30),
    );
    // Shard A's gmetad: its sites only, each a cluster with its hosts.
    assert_eq!(
        dirs(&shard.rrd_root),
        set(&["T2_A", "T2_B", "T2_Z_rich", "__SummaryInfo__"])
    );
    assert_eq!(
        dirs(&shard.rrd_root.join("T2_A")),
        set(&["__SummaryInfo__", "a1.example", "a2.example"])
    );
    assert_eq!(
        dirs(&shard.rrd_root.join("T2_B")),
        set(&["__SummaryInfo__", "b1.example"])
    );
    // The gmetad on the gateway's port: every cluster.
    for (_, host, _, cluster, _) in servers {
        assert!(
            dirs(&all.rrd_root.join(cluster)).contains(host),
            "{host} not in {cluster}: {:?}",
            dirs(&all.rrd_root)
        );
    }
    // The rule ports' documents: gmond-style (no GRID), their clusters only.
    let shard_doc = read_xml(shard_port);
    assert!(shard_doc.contains("SOURCE=\"gmond\"") && !shard_doc.contains("<GRID"));
    let c = clusters_of(&shard_doc);
    assert_eq!(
        c.keys().cloned().collect::<BTreeSet<_>>(),
        set(&["T2_A", "T2_B", "T2_Z_rich"])
    );
    assert_eq!(c["T2_A"], set(&["a1.example", "a2.example"]));
    // XC's port answers its own xml_allow (127.0.0.2), not the gateway's
    // (127.0.0.0/8, whence the gmetads poll).
    let c = clusters_of(&read_from("127.0.0.2", other_port).unwrap());
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c["XC"], set(&["x1.example"]));
    let denied = read_from("127.0.0.1", other_port);
    assert!(
        denied.as_ref().map_or(true, |d| !d.contains("<CLUSTER")),
        "127.0.0.1 read XC's port: {:?}",
        denied.map(|d| d.len())
    );
}

/// What a TCP server on 127.0.0.1:`port` writes to a client bound to
/// `ip` before it closes.
fn read_from(ip: &str, port: u16) -> std::io::Result<String> {
    use std::io::Read;
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    let local: std::net::SocketAddr = format!("{ip}:0").parse().unwrap();
    sock.bind(&local.into())?;
    let to: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    sock.connect(&to.into())?;
    let mut stream: std::net::TcpStream = sock.into();
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}
