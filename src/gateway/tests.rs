use super::*;
use std::net::IpAddr;

use crate::config::{FileConfig, Overrides, validate};
use crate::ganglia::xdr::{self, Packet, Value, decode};
use requests::Request;
use source::{Source, Sources};

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

/// The TMAX of every metric's metadata among `packets` (not the heartbeat's).
fn metric_tmaxes(packets: &[Packet]) -> Vec<u32> {
    packets
        .iter()
        .filter_map(|p| match p {
            Packet::Metadata { tmax, name, .. } if name != "heartbeat" => Some(*tmax),
            _ => None,
        })
        .collect()
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
    assert_eq!(
        &names[..4],
        ["M heartbeat", "V heartbeat", "M xrootd.tod", "V xrootd.tod"]
    );
    // The heartbeat's metadata is gmetric -H's (gmond asks for it otherwise).
    match &packets[0] {
        Packet::Metadata {
            value_type,
            slope,
            tmax,
            dmax,
            extra,
            ..
        } => {
            assert_eq!(
                (value_type.as_str(), *slope, *tmax, *dmax),
                ("uint32", 0, 0, 0)
            );
            assert_eq!(extra[1], ("SPOOF_HEARTBEAT".into(), "yes".into()));
        }
        other => panic!("{other:?}"),
    }
    // The heartbeat, then 8 header attributes + link.num + link.in + derived uptime.
    assert_eq!(packets.len(), 2 + 2 * 11);
    assert!(names.contains(&"M xrootd.link.in".to_string()));
    assert!(names.contains(&"M xrootd.uptime".to_string()));
    match &packets[1] {
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

    // Second record 15 s later: TMAX is now known (23 s). It goes out with
    // the next periodic metadata, not at once (every source started with
    // this one would do the same), within the metadata interval (60 s):
    // one record carries all of it, the others values only (12: heartbeat
    // + 11).
    let mut with_metadata = Vec::new();
    for n in 1..=4u64 {
        let at = Duration::from_secs(15 * n);
        p.encode(REC.as_bytes(), from, t0 + at, &s, &mut ev);
        let packets = decode_all(&p);
        let tmaxes = metric_tmaxes(&packets);
        if n == 1 {
            assert!(tmaxes.is_empty(), "{tmaxes:?}");
        }
        if tmaxes.is_empty() {
            assert!(
                packets.iter().all(|p| matches!(p, Packet::Value { .. })),
                "{packets:?}"
            );
            assert_eq!(packets.len(), 12);
        } else {
            assert_eq!(tmaxes, [23; 11], "at {at:?}");
            with_metadata.push(at);
        }
    }
    assert_eq!(with_metadata.len(), 1, "{with_metadata:?}");

    // A metadata_interval after that: metadata again.
    p.encode(
        REC.as_bytes(),
        from,
        t0 + with_metadata[0] + Duration::from_secs(61),
        &s,
        &mut ev,
    );
    assert_eq!(metadata_count(&p), 12);
    let snap = counters.snapshot();
    assert_eq!((snap.datagrams, snap.records, snap.parse_errors), (6, 6, 0));
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
    // heartbeat (metadata + value) + 5 metrics x (metadata + value)
    assert_eq!(p.packets().count(), 12);
    assert_eq!(counters.snapshot().metrics_dropped_cap, 6);
}

#[test]
fn sources_are_bounded_with_lru_eviction() {
    let mut sources = Sources::default();
    let t0 = Instant::now();
    for i in 0..1000u32 {
        let ip = IpAddr::from((0x0a00_0000 + i).to_be_bytes());
        sources.get_or_insert(ip, "xrootd", t0 + Duration::from_millis(i as u64), 100, 4);
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
    // Every name is cut to the same 128 bytes: one metric (its metadata and
    // value, once: a name repeated in a record is sent once) and the
    // heartbeat (metadata and value).
    let n = p.packets().count();
    assert_eq!(n, 4);
    for b in p.packets() {
        assert!(b.len() <= xdr::MAX_PACKET, "{}", b.len());
    }
}

#[test]
fn tmax_follows_the_interval_but_not_one_lost_report() {
    let t0 = Instant::now();
    let mut src = Source::new("xrootd", t0, 4);
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
    assert_eq!(metadata_count(&p), 12);
    let snap = counters.snapshot();
    assert_eq!((snap.restarts, snap.sources), (1, 1));
}

/// Two pipelines on one clock: one with the fast path, one without.
fn fast_and_full(s: &Settings) -> (Pipeline, Pipeline) {
    let (fast, mut full) = (Pipeline::new(s), Pipeline::new(s));
    full.fast_path = false;
    full.epoch = fast.epoch;
    (fast, full)
}

/// A record text (XML, or JSON if it starts with `{`) with its numbers
/// changed: `edits` picks, per digit run, what to do (keep, new digits,
/// leading zero, minus sign, 25 digits), and `shape` now and then changes
/// something else (a text value, a list key, an added element, the start
/// time).
fn mutate(record: &str, edits: &[u8], shape: u8) -> String {
    let json = record.starts_with('{');
    // JSON: the header's numbers (tod, tos, pid) come before the first section.
    let body = record.find("\"stats_").unwrap_or(usize::MAX);
    let mut out = String::with_capacity(record.len() + 16);
    let mut run = 0usize;
    let mut chars = record.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if !c.is_ascii_digit() {
            out.push(c);
            continue;
        }
        let mut digits = c.to_string();
        while let Some(&(_, d)) = chars.peek() {
            if !d.is_ascii_digit() {
                break;
            }
            digits.push(d);
            chars.next();
        }
        let e = edits.get(run % edits.len().max(1)).copied().unwrap_or(0);
        run += 1;
        // Shapes below 100 keep every number plain (the fast path's case)
        // and change only element values (`>123<`): the header (program,
        // start time), entry ids and text stay as they were.
        let element_value = if json {
            at > body
                && out.ends_with(':')
                && chars.peek().is_some_and(|&(_, c)| c == ',' || c == '}')
        } else {
            out.ends_with('>') && chars.peek().is_some_and(|&(_, c)| c == '<')
        };
        let e = match shape {
            0..100 if !element_value => 0,
            0..100 => e % 13,
            _ => e,
        };
        match e % 16 {
            0..=9 => out.push_str(&digits),
            10..=12 => out.push_str(&format!("{}", u64::from(e) * 7919 + digits.len() as u64)),
            13 => out.push_str(&format!("0{digits}")),
            14 => out.push_str(&format!("-{digits}")),
            _ => out.push_str("1234567890123456789012345"),
        }
    }
    if shape < 200 {
        return out;
    }
    match (shape % 4, json) {
        (0, _) => out.replacen("v5.5.3", "v5.6.0", 1),
        (1, false) => out.replacen("tos=\"", "tos=\"1", 1),
        (1, true) => out.replacen("\"tos\":", "\"tos\":1", 1),
        (2, false) => out.replacen(
            "</stats></statistics>",
            "<extra>5</extra></stats></statistics>",
            1,
        ),
        (2, true) => match out.strip_suffix("}}}") {
            Some(head) => format!("{head},\"extra\":5}}}}}}"),
            None => out,
        },
        _ => out.replacen("\"/", "\"/x", 1),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

    /// The fast path sends exactly what the full path sends, and counts
    /// exactly the same, for any sequence of reports of real records (XML,
    /// or their JSON form with its made values: list lengths, an escaped
    /// string) with changing numbers, changing shape, restarts and metadata
    /// falling due.
    #[test]
    fn fast_path_equals_full_path(
        fixture in 0usize..10,
        changed in proptest::bool::ANY,
        steps in proptest::collection::vec(
            (proptest::collection::vec(0u8..=255, 1..8), 0u8..=255, 0u64..90),
            1..14,
        ),
    ) {
        let name = ["ds_idle", "ds_loaded", "mgr_cmsd", "pfc_loaded", "spaces"][fixture % 5];
        let record = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/records")
                .join(format!("{name}.xml")),
        )
        .unwrap();
        let record = if fixture < 5 { record } else { json_form(&record) };
        let s = settings(if changed {
            "metadata_interval = 60\nsend_values = \"changed\"\nvalue_heartbeat = 25\n"
        } else {
            "metadata_interval = 60\n"
        });
        let (c_fast, c_full) = (Counters::default(), Counters::default());
        let (mut ev_fast, mut ev_full) = (
            Events::new(&c_fast, Duration::from_secs(60)),
            Events::new(&c_full, Duration::from_secs(60)),
        );
        let (mut fast, mut full) = fast_and_full(&s);
        let from: SocketAddr = "10.0.0.9:1094".parse().unwrap();
        let mut at = fast.epoch + Duration::from_secs(1);
        // Steady reports right after a steady report (past the first two,
        // which set TMAX): each takes the fast path unless metadata is due,
        // once a minute.
        let (mut pairs, mut last_steady) = (0, false);
        for (i, (edits, shape, gap)) in steps.iter().enumerate() {
            // Mostly plain numbers, unchanged shape, steady 10 s reports.
            let text = if i == 0 { record.clone() } else { mutate(&record, edits, *shape) };
            let gap = if *gap < 70 { 10 } else { *gap };
            let steady = *shape < 100 && gap == 10;
            pairs += usize::from(i >= 3 && steady && last_steady);
            last_steady = steady;
            at += Duration::from_secs(gap);
            fast.encode(text.as_bytes(), from, at, &s, &mut ev_fast);
            full.encode(text.as_bytes(), from, at, &s, &mut ev_full);
            let a: Vec<&[u8]> = fast.packets().collect();
            let b: Vec<&[u8]> = full.packets().collect();
            proptest::prop_assert_eq!(a, b, "step {}", i);
            proptest::prop_assert_eq!(c_fast.snapshot(), c_full.snapshot(), "step {}", i);
        }
        // Not vacuous: steady reports did take the fast path.
        proptest::prop_assert!(pairs < 3 || fast.fast_path_hits > 0, "{} steady pairs, no fast path", pairs);
        proptest::prop_assert_eq!(full.fast_path_hits, 0);
    }
}

/// The JSON form of an XML record, with one escaped string (`info.host`
/// `vm` as `v\u006d`): its value is made, not borrowed.
fn json_form(xml: &str) -> String {
    let json = crate::summary::tests::json::xml_to_json(xml);
    assert!(json.contains("\"host\":\"vm\""));
    json.replace("\"host\":\"vm\"", "\"host\":\"v\\u006d\"")
}

#[test]
fn steady_json_reports_take_the_fast_path() {
    let s = settings("");
    let (c_fast, c_full) = (Counters::default(), Counters::default());
    let (mut ev_fast, mut ev_full) = (
        Events::new(&c_fast, Duration::from_secs(60)),
        Events::new(&c_full, Duration::from_secs(60)),
    );
    let (mut fast, mut full) = fast_and_full(&s);
    let from: SocketAddr = "10.0.0.1:40000".parse().unwrap();
    let xml = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/records/spaces.xml"),
    )
    .unwrap();
    let record = json_form(&xml);
    let t0 = fast.epoch;
    for i in 0..5u64 {
        let text = mutate(&record, &[(i * 3 % 10) as u8, 11, 12], 50);
        let at = t0 + Duration::from_secs(10 * i);
        fast.encode(text.as_bytes(), from, at, &s, &mut ev_fast);
        full.encode(text.as_bytes(), from, at, &s, &mut ev_full);
        assert_eq!(
            fast.packets().collect::<Vec<_>>(),
            full.packets().collect::<Vec<_>>(),
            "report {i}"
        );
    }
    // The first record and the one that fixes TMAX go the full way.
    assert!(fast.fast_path_hits >= 2, "{} fast", fast.fast_path_hits);
    assert_eq!(c_fast.snapshot(), c_full.snapshot());
    // The JSON record becomes the XML record's packets, byte for byte.
    let first = |text: &str| -> Vec<Vec<u8>> {
        let c = Counters::default();
        let mut ev = Events::new(&c, Duration::from_secs(60));
        let mut p = Pipeline::new(&s);
        p.encode(text.as_bytes(), from, p.epoch, &s, &mut ev);
        p.packets().map(<[u8]>::to_vec).collect()
    };
    let (from_json, from_xml) = (first(&record), first(&xml));
    assert!(from_xml.len() > 100, "{} packets", from_xml.len());
    assert_eq!(from_json, from_xml);
}

#[test]
fn steady_reports_take_the_fast_path() {
    let s = settings("");
    let counters = Counters::default();
    let mut ev = Events::new(&counters, Duration::from_secs(60));
    let mut p = Pipeline::new(&s);
    let from: SocketAddr = "10.0.0.1:40000".parse().unwrap();
    let record = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/records/ds_loaded.xml"),
    )
    .unwrap();
    let t0 = p.epoch;
    for i in 0..5u64 {
        let text = mutate(&record, &[(i * 3 % 10) as u8, 11, 12], 200);
        p.encode(
            text.as_bytes(),
            from,
            t0 + Duration::from_secs(10 * i),
            &s,
            &mut ev,
        );
    }
    // The first record and the one that fixes TMAX go the full way.
    assert!(p.fast_path_hits >= 2, "{} fast", p.fast_path_hits);
    // A restart goes the full way again (and resends metadata).
    let restarted = record.replacen("tos=\"", "tos=\"2", 1);
    let hits = p.fast_path_hits;
    p.encode(
        restarted.as_bytes(),
        from,
        t0 + Duration::from_secs(60),
        &s,
        &mut ev,
    );
    assert_eq!(p.fast_path_hits, hits);
    assert!(metadata_count(&p) > 50);
}

/// The value packets of the last record: name -> value text.
fn values(p: &Pipeline) -> std::collections::BTreeMap<String, String> {
    decode_all(p)
        .into_iter()
        .filter_map(|p| match p {
            Packet::Value {
                id,
                value: Value::Str(v),
                ..
            } => Some((id.name, v)),
            _ => None,
        })
        .collect()
}

fn link_record(tos: u32, pid: u32, inb: u64, tmo: i64, num: u32) -> String {
    format!(
        r#"<statistics tod="1700000100" ver="v5.5.3" src="ds1.example.org:1094" tos="{tos}" pgm="xrootd" ins="anon" pid="{pid}" site="T2_X"><stats id="link"><num>{num}</num><in>{inb}</in><tmo>{tmo}</tmo></stats></statistics>"#
    )
}

#[test]
fn counters_stay_continuous_across_restarts_resets_and_wraps() {
    for fast in [true, false] {
        let s = settings("");
        let counters = Counters::default();
        let mut ev = Events::new(&counters, Duration::from_secs(60));
        let mut p = Pipeline::new(&s);
        p.set_fast_path(fast);
        let from: SocketAddr = "10.0.0.1:40000".parse().unwrap();
        let t0 = p.epoch;
        let mut t = 0;
        let mut send = |p: &mut Pipeline, rec: String| {
            t += 10;
            p.encode(
                rec.as_bytes(),
                from,
                t0 + Duration::from_secs(t),
                &s,
                &mut ev,
            );
            values(p)
        };
        let top = i64::from(u32::MAX) - 99;
        // Readings as xrootd sends them (tmo is a C int: -100 is 2^32 - 100).
        let steps: [(u32, u64, i64, &str, &str); 8] = [
            (77, 1000, 5, "1000", "5"),
            (77, 2000, 6, "2000", "6"),
            (77, 3000, 7, "3000", "7"),
            // Restart (new pid): readings from zero, sent on from 3000 / 7.
            (78, 100, 1, "3100", "8"),
            (78, 300, 2, "3300", "9"),
            // A reset without a restart: continues as well.
            (78, 50, 3, "3350", "10"),
            // The int counter climbs to 2^32 - 100 (sent as xrootd's %d)...
            (78, 60, top - (1 << 32), "3360", &(top + 7).to_string()),
            // ...and wraps past 2^32 to 20: +120.
            (78, 70, 20, "3370", &(top + 127).to_string()),
        ];
        for (i, (pid, inb, tmo, want_in, want_tmo)) in steps.iter().enumerate() {
            let v = send(&mut p, link_record(1_700_000_000, *pid, *inb, *tmo, 4));
            assert_eq!(v["xrootd.link.in"], *want_in, "step {i}, fast path {fast}");
            assert_eq!(
                v["xrootd.link.tmo"], *want_tmo,
                "step {i}, fast path {fast}"
            );
            // A gauge goes as it came.
            assert_eq!(v["xrootd.link.num"], "4", "step {i}");
        }
    }
}

#[test]
fn changed_only_sends_unchanged_values_on_the_heartbeat_and_grows_tmax() {
    let s = settings("send_values = \"changed\"\nvalue_heartbeat = 45\n");
    let counters = Counters::default();
    let mut ev = Events::new(&counters, Duration::from_secs(60));
    let mut p = Pipeline::new(&s);
    let from: SocketAddr = "10.0.0.1:40000".parse().unwrap();
    let t0 = p.epoch;
    // Report n (10 s apart) with link.in at `inb`: the value packets sent.
    let mut report = |n: u64, inb: u64| {
        let rec = link_record(1_700_000_000, 77, inb, 5, 4);
        p.encode(
            rec.as_bytes(),
            from,
            t0 + Duration::from_secs(10 * n),
            &s,
            &mut ev,
        );
        (values(&p), decode_all(&p))
    };
    assert_eq!(report(1, 1000).0.len(), 12);
    // The interval is now known: TMAX = 1.5 x 10 + 45; metadata goes out
    // with it (and takes its values along) with the periodic resend,
    // within 60 s of the first.
    let mut n = 2;
    let tmaxes = loop {
        let tmaxes = metric_tmaxes(&report(n, 1000).1);
        if !tmaxes.is_empty() || n > 7 {
            break tmaxes;
        }
        n += 1;
    };
    assert!(
        !tmaxes.is_empty() && tmaxes.iter().all(|t| *t == 60),
        "{tmaxes:?}"
    );
    // Nothing changed: only the host heartbeat goes out...
    for n in n + 1..n + 4 {
        let (v, all) = report(n, 1000);
        assert!(v.is_empty() && all.len() == 1, "report {n}: {all:?}");
    }
    // ...but what changed does.
    let v = report(n + 4, 1500).0;
    assert_eq!(v.keys().collect::<Vec<_>>(), ["xrootd.link.in"]);
    // 45 s (and more) after they were last sent, unchanged values go out again.
    let v = report(n + 5, 1500).0;
    assert!(
        v.contains_key("xrootd.link.num") && !v.contains_key("xrootd.link.in"),
        "{v:?}"
    );
}

#[test]
fn counter_state_survives_a_gateway_restart_through_the_state_file() {
    let dir = std::env::temp_dir().join(format!("x2g-gwstate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("state");
    let _ = std::fs::remove_file(&path);
    let s = settings("");
    let counters = Counters::default();
    let mut ev = Events::new(&counters, Duration::from_secs(60));
    let from: SocketAddr = "10.0.0.1:40000".parse().unwrap();
    let feed = |p: &mut Pipeline, ev: &mut Events<'_>, n: u64, rec: String| {
        p.encode(
            rec.as_bytes(),
            from,
            p.epoch + Duration::from_secs(10 * n),
            &s,
            ev,
        );
        values(p)
    };
    // First gateway: an xrootd restart gives link.in an offset of 5000.
    let (store, _) = state::StateStore::open(&path, 1);
    let mut first = Pipeline::new(&s);
    first.keep_state(Arc::new(store), 0);
    feed(
        &mut first,
        &mut ev,
        1,
        link_record(1_700_000_000, 77, 5000, 1, 4),
    );
    feed(
        &mut first,
        &mut ev,
        2,
        link_record(1_700_000_000, 78, 100, 1, 4),
    );
    first.hand_in_state();
    first.store.as_ref().unwrap().0.save().unwrap();

    // Second gateway, same xrootd: the offset is still applied.
    let (store, read) = state::StateStore::open(&path, 1);
    assert_eq!(read, Ok(1));
    let mut second = Pipeline::new(&s);
    second.keep_state(Arc::new(store), 0);
    let v = feed(
        &mut second,
        &mut ev,
        1,
        link_record(1_700_000_000, 78, 200, 1, 4),
    );
    assert_eq!(v["xrootd.link.in"], "5200");
    second.hand_in_state();
    second.store.as_ref().unwrap().0.save().unwrap();

    // Third gateway: the xrootd restarted while no gateway ran.
    let (store, _) = state::StateStore::open(&path, 1);
    let mut third = Pipeline::new(&s);
    third.keep_state(Arc::new(store), 0);
    let v = feed(
        &mut third,
        &mut ev,
        1,
        link_record(1_700_000_000, 79, 30, 1, 4),
    );
    assert_eq!(v["xrootd.link.in"], "5230");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_metadata_request_is_answered_with_the_hosts_metadata_once_per_holdoff() {
    let s = settings("metadata_requests = [\"127.0.0.1:8650\"]\n");
    let counters = Counters::default();
    let mut ev = Events::new(&counters, Duration::from_secs(60));
    let mut p = Pipeline::new(&s);
    let from: SocketAddr = "10.0.0.1:40000".parse().unwrap();
    let t0 = p.epoch;
    let rec = |pid, inb| link_record(1_700_000_000, pid, inb, 1, 4);
    p.encode(rec(77, 5000).as_bytes(), from, t0, &s, &mut ev);
    p.encode(
        rec(78, 10).as_bytes(),
        from,
        t0 + Duration::from_secs(10),
        &s,
        &mut ev,
    );
    let request = |name: &str| Request {
        host: "10.0.0.1:ds1.example.org".into(),
        name: name.into(),
    };
    // Unknown host or metric: nothing.
    assert!(!p.answer(
        &Request {
            host: "10.0.0.2:other".into(),
            name: "xrootd.link.in".into()
        },
        t0 + Duration::from_secs(11),
        &s
    ));
    assert!(!p.answer(&request("xrootd.nope"), t0 + Duration::from_secs(11), &s));
    assert_eq!(p.packets().count(), 0);
    // A known one: every metadata of the host, each with its value as last sent.
    assert!(p.answer(&request("xrootd.link.in"), t0 + Duration::from_secs(11), &s));
    assert_eq!(metadata_count(&p), 13);
    assert_eq!(values(&p)["xrootd.link.in"], "5010");
    // Asked again at once (gmond asks once per value): already answered.
    assert!(!p.answer(
        &request("xrootd.link.num"),
        t0 + Duration::from_secs(12),
        &s
    ));
    assert!(p.answer(
        &request("xrootd.link.num"),
        t0 + Duration::from_secs(17),
        &s
    ));
    // A heartbeat's request stands for the whole host.
    assert!(p.answer(&request("heartbeat"), t0 + Duration::from_secs(23), &s));
    assert_eq!(metadata_count(&p), 13);
}

#[test]
fn an_answer_does_not_postpone_the_periodic_metadata() {
    let s = settings("metadata_requests = [\"127.0.0.1:8650\"]\n");
    let counters = Counters::default();
    let mut ev = Events::new(&counters, Duration::from_secs(60));
    let mut p = Pipeline::new(&s);
    let from: SocketAddr = "10.0.0.1:40000".parse().unwrap();
    let t0 = p.epoch;
    let rec = link_record(1_700_000_000, 77, 5000, 1, 4);
    // Reports every 10 s; the metadata goes out with the first and, once
    // TMAX is known, with one record within the next 30 s.
    let mut sent_at = Vec::new();
    let mut answered = false;
    for n in 0..20u64 {
        let at = t0 + Duration::from_secs(10 * n);
        p.encode(rec.as_bytes(), from, at, &s, &mut ev);
        if metadata_count(&p) > 0 {
            sent_at.push(10 * n);
        }
        // Right after the second sending, gmond asks: answered in full...
        if sent_at.len() == 2 && !answered {
            let request = Request {
                host: "10.0.0.1:ds1.example.org".into(),
                name: "xrootd.link.in".into(),
            };
            assert!(p.answer(&request, at + Duration::from_secs(1), &s));
            assert_eq!(metadata_count(&p), 13);
            answered = true;
        }
    }
    // ...and the periodic resend still comes metadata_interval (60 s)
    // after the second sending, not 60 s after the answer.
    assert!(sent_at.len() >= 3, "{sent_at:?}");
    assert_eq!(sent_at[2] - sent_at[1], 60, "{sent_at:?}");
}

#[test]
fn sources_that_start_together_send_their_metadata_apart() {
    let s = settings("");
    let counters = Counters::default();
    let mut ev = Events::new(&counters, Duration::from_secs(60));
    let mut p = Pipeline::new(&s);
    let t0 = p.epoch;
    // 200 servers, all restarted together, reporting every 10 s in phase.
    let servers = 200u32;
    let mut per_report: Vec<usize> = Vec::new();
    for n in 0..16u64 {
        let mut metadata = 0;
        for i in 0..servers {
            let from = SocketAddr::from((u32::to_be_bytes(0x0a00_0000 + i), 40000));
            let rec = link_record(1_700_000_000, 77, 1000 * n, 1, 4)
                .replace("ds1.example.org", &format!("ds{i}.example.org"));
            let at = t0 + Duration::from_secs(10 * n);
            p.encode(rec.as_bytes(), from, at, &s, &mut ev);
            metadata += metadata_count(&p);
        }
        per_report.push(metadata);
    }
    let all = servers as usize * 13;
    // First sight: all of it, necessarily (values need their metadata).
    assert_eq!(per_report[0], all);
    // The second report, which makes TMAX known, does not resend it; the
    // first periodic resend comes 30 to 60 s after the first sight,
    // spread over the reports in between, and so do the ones after it.
    assert_eq!(per_report[1..4].iter().sum::<usize>(), 0, "{per_report:?}");
    assert_eq!(
        per_report[4..7].iter().sum::<usize>(),
        all,
        "{per_report:?}"
    );
    assert!(
        per_report[1..].iter().all(|&n| n < all / 2),
        "{per_report:?}"
    );
    assert_eq!(
        per_report[7..13].iter().sum::<usize>(),
        all,
        "{per_report:?}"
    );
}

#[test]
fn a_quiet_spell_then_a_request_answers_every_host_once() {
    let s = settings("metadata_requests = [\"127.0.0.1:8650\"]\n");
    let counters = Counters::default();
    let mut ev = Events::new(&counters, Duration::from_secs(60));
    let mut p = Pipeline::new(&s);
    let t0 = p.epoch;
    for i in 0..50u32 {
        let from = SocketAddr::from((u32::to_be_bytes(0x0a00_0000 + i), 40000));
        let rec = link_record(1_700_000_000, 77, 5000, 1, 4)
            .replace("ds1.example.org", &format!("ds{i}.example.org"));
        p.encode(rec.as_bytes(), from, t0, &s, &mut ev);
    }
    let outbox = sender::Outbox::idle(open_channels(&s).unwrap());
    let at = t0 + Duration::from_secs(3);
    p.handle_request(&requests::Ask::Everything, at, &s, &outbox, &mut ev);
    // 50 hosts: heartbeat metadata and value, 12 metadata and 12 values each.
    assert_eq!(outbox.stats(at).packets, 50 * 26);
    assert_eq!(counters.snapshot().requests_answered, 50);
    // The requests that follow (one per value gmond cannot show) are
    // already answered.
    let request = Request {
        host: "10.0.0.7:ds7.example.org".into(),
        name: "xrootd.link.in".into(),
    };
    p.handle_request(
        &requests::Ask::Metric(request.clone()),
        at,
        &s,
        &outbox,
        &mut ev,
    );
    assert_eq!(outbox.stats(at).packets, 50 * 26);
    assert!(p.answer(&request, at + requests::ANSWER_HOLDOFF, &s));
}
