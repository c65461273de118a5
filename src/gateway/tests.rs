use super::*;
use crate::config::{FileConfig, Overrides, validate};
use crate::ganglia::xdr::{Packet, Value, decode};

fn settings(extra: &str) -> Settings {
    let file = FileConfig::parse(extra, std::path::Path::new("t")).unwrap();
    validate(
        file,
        "test".into(),
        &Overrides {
            send: vec!["127.0.0.1:9".into()],
            ..Default::default()
        },
    )
    .unwrap()
}

const REC: &str = r#"<statistics tod="1700000100" ver="v5.5.3" src="ds1.example.org:1094" tos="1700000000" pgm="xrootd" ins="anon" pid="77" site="T2_X"><stats id="link"><num>3</num><in>1024</in></stats></statistics>"#;

/// One datagram from `from` at `at` through the pipeline.
fn feed(
    p: &mut Pipeline,
    s: &Settings,
    ev: &mut Events<'_>,
    datagram: &[u8],
    from: &str,
    at: Instant,
) {
    p.encode(datagram, from.parse().unwrap(), at, s, ev);
}

fn metadata_count(p: &Pipeline) -> usize {
    decode_all(p)
        .iter()
        .filter(|p| matches!(p, Packet::Metadata { .. }))
        .count()
}

fn decode_all(p: &Pipeline) -> Vec<Packet> {
    p.packets().map(|b| decode(b).unwrap()).collect()
}

#[test]
fn first_record_sends_metadata_then_values_only() {
    let s = settings("");
    let counters = Counters::default();
    let mut ev = Events::new(&counters, Duration::from_secs(60));
    let mut p = Pipeline::new(&s);
    let from: SocketAddr = "10.0.0.1:40000".parse().unwrap();
    let t0 = Instant::now();
    p.encode(REC.as_bytes(), from, t0, &s, &mut ev);
    let packets = decode_all(&p);
    // heartbeat value, then metadata + value per metric.
    let names: Vec<String> = packets
        .iter()
        .map(|p| match p {
            Packet::Metadata { name, .. } => format!("M {name}"),
            Packet::Value { id, .. } => format!("V {}", id.name),
            Packet::MetadataRequest { .. } => "R".into(),
        })
        .collect();
    assert_eq!(&names[..3], ["V heartbeat", "M xrootd.tod", "V xrootd.tod"]);
    // 8 header attributes + link.num + link.in + derived uptime.
    assert_eq!(packets.len(), 1 + 2 * 11);
    assert!(names.contains(&"M xrootd.link.in".to_string()));
    assert!(names.contains(&"M xrootd.uptime".to_string()));
    match &packets[0] {
        Packet::Value {
            id,
            value,
            packet_id,
            ..
        } => {
            assert_eq!(
                (id.host.as_str(), id.spoof),
                ("10.0.0.1:ds1.example.org", true)
            );
            assert_eq!((*packet_id, value), (132, &Value::UInt(1_700_000_000)));
        }
        other => panic!("{other:?}"),
    }
    match packets
        .iter()
        .find(|p| matches!(p, Packet::Metadata { name, .. } if name == "xrootd.link.in"))
        .unwrap()
    {
        Packet::Metadata {
            value_type,
            units,
            slope,
            tmax,
            dmax,
            extra,
            ..
        } => {
            assert_eq!(
                (value_type.as_str(), units.as_str(), *slope, *tmax, *dmax),
                ("double", "bytes/s", 1, 60, 3600)
            );
            let keys: Vec<_> = extra.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(keys, ["SPOOF_HOST", "GROUP", "DESC", "TITLE"]);
            assert_eq!(extra[0].1, "10.0.0.1:ds1.example.org");
            assert_eq!(extra[1].1, "xrootd.link");
            assert_eq!(extra[3].1, "xrootd: Bytes received");
        }
        _ => unreachable!(),
    }
    for b in p.packets() {
        assert!(b.len() <= xdr::MAX_PACKET);
    }

    // Second record 15 s later: TMAX is now known (23 s), so metadata is resent once with it.
    p.encode(
        REC.as_bytes(),
        from,
        t0 + Duration::from_secs(15),
        &s,
        &mut ev,
    );
    let tmaxes: Vec<u32> = decode_all(&p)
        .iter()
        .filter_map(|p| match p {
            Packet::Metadata { tmax, .. } => Some(*tmax),
            _ => None,
        })
        .collect();
    assert!(
        !tmaxes.is_empty() && tmaxes.iter().all(|t| *t == 23),
        "{tmaxes:?}"
    );

    // Third record: values only (and the heartbeat value).
    p.encode(
        REC.as_bytes(),
        from,
        t0 + Duration::from_secs(30),
        &s,
        &mut ev,
    );
    let packets = decode_all(&p);
    assert!(
        packets.iter().all(|p| matches!(p, Packet::Value { .. })),
        "{packets:?}"
    );
    assert_eq!(packets.len(), 12);

    // After metadata_interval: metadata again.
    p.encode(
        REC.as_bytes(),
        from,
        t0 + Duration::from_secs(76),
        &s,
        &mut ev,
    );
    assert_eq!(metadata_count(&p), 11);
    let snap = counters.snapshot();
    assert_eq!((snap.datagrams, snap.records, snap.parse_errors), (4, 4, 0));
}

#[test]
fn bad_and_denied_datagrams_are_counted_and_send_nothing() {
    let s = settings("allow = [\"10.0.0.0/8\"]");
    let counters = Counters::default();
    let mut ev = Events::new(&counters, Duration::from_secs(60));
    let mut p = Pipeline::new(&s);
    let t0 = Instant::now();
    feed(&mut p, &s, &mut ev, REC.as_bytes(), "192.0.2.1:1", t0);
    assert_eq!(p.packets().count(), 0);
    feed(&mut p, &s, &mut ev, b"<statistics><stats", "10.0.0.1:1", t0);
    assert_eq!(p.packets().count(), 0);
    feed(&mut p, &s, &mut ev, REC.as_bytes(), "10.0.0.1:1", t0);
    assert!(p.packets().count() > 0);
    let snap = counters.snapshot();
    assert_eq!(
        (snap.datagrams, snap.denied, snap.parse_errors, snap.records),
        (3, 1, 1, 1)
    );
}

#[test]
fn xrootd_and_cmsd_on_one_host_are_separate_sources() {
    let s = settings("");
    let counters = Counters::default();
    let mut ev = Events::new(&counters, Duration::from_secs(60));
    let mut p = Pipeline::new(&s);
    let t0 = Instant::now();
    feed(&mut p, &s, &mut ev, REC.as_bytes(), "10.0.0.1:1", t0);
    let cmsd = REC.replace("pgm=\"xrootd\"", "pgm=\"cmsd\"");
    feed(&mut p, &s, &mut ev, cmsd.as_bytes(), "10.0.0.1:2", t0);
    assert_eq!(p.sources(), 2);
    let names: Vec<String> = decode_all(&p)
        .into_iter()
        .filter_map(|p| match p {
            Packet::Metadata { name, .. } => Some(name),
            _ => None,
        })
        .collect();
    assert!(names.contains(&"cmsd.link.in".to_string()), "{names:?}");
}

#[test]
fn metrics_per_source_are_capped() {
    let s = settings("max_metrics_per_source = 5");
    let counters = Counters::default();
    let mut ev = Events::new(&counters, Duration::from_secs(60));
    let mut p = Pipeline::new(&s);
    feed(
        &mut p,
        &s,
        &mut ev,
        REC.as_bytes(),
        "10.0.0.1:1",
        Instant::now(),
    );
    // heartbeat + 5 metrics x (metadata + value)
    assert_eq!(p.packets().count(), 11);
    assert_eq!(counters.snapshot().metrics_dropped_cap, 6);
}

#[test]
fn sources_are_bounded_with_lru_eviction() {
    let mut sources = Sources::default();
    let t0 = Instant::now();
    for i in 0..1000u32 {
        let ip = IpAddr::from((0x0a00_0000 + i).to_be_bytes());
        sources.get_or_insert(ip, "xrootd", t0 + Duration::from_millis(i as u64), 100);
        assert!(sources.len <= 100);
    }
    // The most recent one is still there.
    let last = IpAddr::from((0x0a00_0000u32 + 999).to_be_bytes());
    assert!(sources.by_ip.contains_key(&last));
    assert_eq!(
        sources.len,
        sources.by_ip.values().map(Vec::len).sum::<usize>()
    );
}

#[test]
fn largest_metadata_fits_a_packet() {
    // Longest name, host, group, title and description the caps allow.
    let long = "x".repeat(600);
    let rec = format!(
        "<statistics pgm=\"{long}\" ins=\"{long}\" site=\"{long}\" src=\"{long}:1\"><stats id=\"{long}\"><{long}>1</{long}></stats></statistics>"
    );
    let s = settings(
        "group_name = \"{pgm}.{ins}.{site}.{section}\"\nmetric_name = \"{pgm}.{ins}.{site}.{var}\"",
    );
    let counters = Counters::default();
    let mut ev = Events::new(&counters, Duration::from_secs(60));
    let mut p = Pipeline::new(&s);
    feed(
        &mut p,
        &s,
        &mut ev,
        rec.as_bytes(),
        "[2001:db8:1:2:3:4:5:6]:1",
        Instant::now(),
    );
    let n = p.packets().count();
    assert!(n > 4, "{n}");
    for b in p.packets() {
        assert!(b.len() <= xdr::MAX_PACKET, "{}", b.len());
    }
}

#[test]
fn tmax_follows_the_interval_but_not_one_lost_report() {
    let t0 = Instant::now();
    let mut src = Source::new("xrootd", t0);
    let at = |s: u64| t0 + Duration::from_secs(s);
    assert_eq!(src.observe(at(0), 60), 60);
    assert_eq!(src.observe(at(15), 60), 23);
    // One report lost: a 30 s gap does not move TMAX.
    assert_eq!(src.observe(at(45), 60), 23);
    assert_eq!(src.observe(at(60), 60), 23);
    // Faster reports are followed at once.
    assert_eq!(src.observe(at(65), 60), 8);
    // Slower ones after three in a row.
    assert_eq!(src.observe(at(85), 60), 8);
    assert_eq!(src.observe(at(105), 60), 8);
    assert_eq!(src.observe(at(125), 60), 30);
    // Scheduling jitter is rounded away.
    assert_eq!(src.observe(at(145) + Duration::from_millis(300), 60), 30);
}

#[test]
fn a_restart_is_noticed_and_resends_every_metadata() {
    let s = settings("");
    let counters = Counters::default();
    let mut ev = Events::new(&counters, Duration::from_secs(60));
    let mut p = Pipeline::new(&s);
    let from: SocketAddr = "10.0.0.1:40000".parse().unwrap();
    let t0 = Instant::now();
    p.encode(REC.as_bytes(), from, t0, &s, &mut ev);
    p.encode(
        REC.as_bytes(),
        from,
        t0 + Duration::from_secs(15),
        &s,
        &mut ev,
    );
    p.encode(
        REC.as_bytes(),
        from,
        t0 + Duration::from_secs(30),
        &s,
        &mut ev,
    );
    assert_eq!(metadata_count(&p), 0);
    // New tos and pid: the xrootd restarted.
    let restarted = REC
        .replace("tos=\"1700000000\"", "tos=\"1700000050\"")
        .replace("pid=\"77\"", "pid=\"78\"");
    p.encode(
        restarted.as_bytes(),
        from,
        t0 + Duration::from_secs(45),
        &s,
        &mut ev,
    );
    assert_eq!(metadata_count(&p), 11);
    let snap = counters.snapshot();
    assert_eq!((snap.restarts, snap.sources), (1, 1));
}
