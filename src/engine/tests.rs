//! The engine, driven with chosen instants: one [`Harness`] per test holds
//! what a receive task holds (settings, an engine, counters).
//!
//! * here: what a record becomes, bad input, sources and their bounds;
//! * [`fast_path`]: the template fast path equals the full path;
//! * [`continuity`]: counters through restarts and wraps, changed-only
//!   sending, the state file;
//! * [`requests`]: gmond's metadata requests, and metadata spread over time;
//! * [`xcache`]: XCache's g-stream as metrics of the XCache's host;
//! * [`clusters`]: `{site}` rules and `max_clusters`.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use std::sync::Arc;

use super::saved::SavedState;
use super::source::{Source, Sources};
use super::{Engine, Shared};
use crate::config::{FileConfig, Overrides, Settings, validate};
use crate::events::{Counters, Events, Snapshot};
use crate::ganglia::xdr::{self, Packet, Slope, Value, decode};

mod clusters;
mod continuity;
mod detailed;
mod eviction;
mod fast_path;
pub(crate) mod requests;
mod typed;
mod xcache;

/// Settings from config text (sending to a port nobody reads).
pub(crate) fn settings(extra: &str) -> Settings {
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

/// What a receive task holds: settings, an engine, counters.
pub(crate) struct Harness {
    pub settings: Arc<Settings>,
    pub engine: Engine,
    pub counters: Counters,
}

impl Harness {
    pub fn new(config: &str) -> Harness {
        Harness::with_shared(config, Shared::default())
    }

    /// One that keeps its sources' state in `saved`, as `serve`'s do.
    pub fn with_saved(config: &str, saved: Arc<SavedState>) -> Harness {
        let saved = Some((saved, 0));
        Harness::with_shared(
            config,
            Shared {
                saved,
                ..Shared::default()
            },
        )
    }

    fn with_shared(config: &str, shared: Shared) -> Harness {
        let settings = Arc::new(settings(config));
        Harness {
            engine: Engine::with_shared(settings.clone(), Instant::now(), shared),
            settings,
            counters: Counters::default(),
        }
    }

    /// `secs` seconds after the engine's start.
    pub fn at(&self, secs: u64) -> Instant {
        self.engine.clock.epoch() + Duration::from_secs(secs)
    }

    /// One datagram from `from` (`ADDR:PORT`), `secs` seconds in; the
    /// packets it became are the engine's.
    pub fn feed(&mut self, datagram: impl AsRef<[u8]>, from: &str, secs: u64) -> &mut Harness {
        let at = self.at(secs);
        self.feed_at(datagram, from.parse().unwrap(), at)
    }

    pub fn feed_at(
        &mut self,
        datagram: impl AsRef<[u8]>,
        from: SocketAddr,
        at: Instant,
    ) -> &mut Harness {
        let mut ev = Events::new(&self.counters, Duration::from_secs(60));
        self.engine.datagram(datagram.as_ref(), from, at, &mut ev);
        self
    }

    /// The last record's packets, decoded (and kept).
    pub fn packets(&self) -> Vec<Packet<'static>> {
        self.engine
            .packets()
            .map(|b| decode(b).unwrap().into_owned())
            .collect()
    }

    /// The last record's value packets: name -> value text.
    pub fn values(&self) -> BTreeMap<String, String> {
        self.packets()
            .into_iter()
            .filter_map(|p| match p {
                Packet::Value {
                    id,
                    value: Value::Str(v),
                    ..
                } => Some((id.name.into_owned(), v.into_owned())),
                _ => None,
            })
            .collect()
    }

    /// How many metadata packets the last record became.
    pub fn metadata_count(&self) -> usize {
        self.packets()
            .iter()
            .filter(|p| matches!(p, Packet::Metadata { .. }))
            .count()
    }

    pub fn snapshot(&self) -> Snapshot {
        self.counters.snapshot()
    }
}

const REC: &str = r#"<statistics tod="1700000100" ver="v5.5.3" src="ds1.example.org:1094" tos="1700000000" pgm="xrootd" ins="anon" pid="77" site="T2_X"><stats id="link"><num>3</num><in>1024</in></stats></statistics>"#;

/// A record of link counters, as xrootd `pid` started at `tos` sends it.
fn link_record(tos: u32, pid: u32, inb: u64, tmo: i64, num: u32) -> String {
    format!(
        r#"<statistics tod="1700000100" ver="v5.5.3" src="ds1.example.org:1094" tos="{tos}" pgm="xrootd" ins="anon" pid="{pid}" site="T2_X"><stats id="link"><num>{num}</num><in>{inb}</in><tmo>{tmo}</tmo></stats></statistics>"#
    )
}

/// A captured real record (`tests/data/records`).
fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/records")
            .join(format!("{name}.xml")),
    )
    .unwrap()
}

/// The TMAX of every metric's metadata among `packets` (not the heartbeat's).
fn metric_tmaxes(packets: &[Packet]) -> Vec<u32> {
    packets
        .iter()
        .filter_map(|p| match p {
            Packet::Metadata { id, meta } if id.name != "heartbeat" => Some(meta.tmax),
            _ => None,
        })
        .collect()
}

#[test]
fn first_record_sends_metadata_then_values_only() {
    let mut r = Harness::new("");
    r.feed(REC, "10.0.0.1:40000", 0);
    let packets = r.packets();
    // heartbeat value, then metadata + value per metric.
    let names: Vec<String> = packets
        .iter()
        .map(|p| match p {
            Packet::Metadata { id, .. } => format!("M {}", id.name),
            Packet::Value { id, .. } => format!("V {}", id.name),
            Packet::Request { .. } => "R".into(),
        })
        .collect();
    // The report time (tod) is left out by default.
    assert_eq!(
        &names[..4],
        ["M heartbeat", "V heartbeat", "M xrootd.ver", "V xrootd.ver"]
    );
    assert!(
        !names.iter().any(|n| n.ends_with(" xrootd.tod")),
        "{names:?}"
    );
    // The heartbeat's metadata is gmetric -H's (gmond asks for it otherwise).
    match &packets[0] {
        Packet::Metadata { meta, .. } => {
            assert_eq!(
                (&*meta.value_type, meta.slope, meta.tmax, meta.dmax),
                ("uint32", Slope::Zero, 0, 0)
            );
            assert_eq!(meta.extra[1], ("SPOOF_HEARTBEAT".into(), "yes".into()));
        }
        other => panic!("{other:?}"),
    }
    // The heartbeat, then 7 header attributes (8 less tod) + link.num +
    // link.in + derived uptime.
    assert_eq!(packets.len(), 2 + 2 * 10);
    assert!(names.contains(&"M xrootd.link.in".to_string()));
    assert!(names.contains(&"M xrootd.uptime".to_string()));
    match &packets[1] {
        p @ Packet::Value { id, value, .. } => {
            assert_eq!((&*id.host, id.spoof), ("10.0.0.1:ds1.example.org", true));
            assert_eq!((p.packet_id(), value), (132, &Value::UInt(1_700_000_000)));
        }
        other => panic!("{other:?}"),
    }
    match packets
        .iter()
        .find(|p| matches!(p, Packet::Metadata { id, .. } if id.name == "xrootd.link.in"))
        .unwrap()
    {
        Packet::Metadata { meta, .. } => {
            assert_eq!(
                (
                    &*meta.value_type,
                    &*meta.units,
                    meta.slope,
                    meta.tmax,
                    meta.dmax
                ),
                ("double", "bytes/s", Slope::Positive, 60, 3600)
            );
            let keys: Vec<_> = meta.extra.iter().map(|(k, _)| k.as_ref()).collect();
            assert_eq!(keys, ["SPOOF_HOST", "GROUP", "DESC", "TITLE"]);
            assert_eq!(meta.extra[0].1, "10.0.0.1:ds1.example.org");
            assert_eq!(meta.extra[1].1, "xrootd.link");
            assert_eq!(meta.extra[3].1, "xrootd: Bytes received");
        }
        _ => unreachable!(),
    }
    for b in r.engine.packets() {
        assert!(b.len() <= xdr::MAX_PACKET);
    }

    // Second record 15 s later: TMAX is now known (23 s). It goes out with
    // the next periodic metadata, not at once (every source started with
    // this one would do the same), within the metadata interval (60 s):
    // one record carries all of it, the others values only (11: heartbeat
    // + 10).
    let mut with_metadata = Vec::new();
    for n in 1..=4u64 {
        let secs = 15 * n;
        let packets = r.feed(REC, "10.0.0.1:40000", secs).packets();
        let tmaxes = metric_tmaxes(&packets);
        if n == 1 {
            assert!(tmaxes.is_empty(), "{tmaxes:?}");
        }
        if tmaxes.is_empty() {
            assert!(
                packets.iter().all(|p| matches!(p, Packet::Value { .. })),
                "{packets:?}"
            );
            assert_eq!(packets.len(), 11);
        } else {
            assert_eq!(tmaxes, [23; 10], "at {secs} s");
            with_metadata.push(secs);
        }
    }
    assert_eq!(with_metadata.len(), 1, "{with_metadata:?}");

    // A metadata_interval after that: metadata again.
    r.feed(REC, "10.0.0.1:40000", with_metadata[0] + 61);
    assert_eq!(r.metadata_count(), 11);
    let snap = r.snapshot();
    assert_eq!((snap.datagrams, snap.records, snap.parse_errors), (6, 6, 0));
}

#[test]
fn bad_and_denied_datagrams_are_counted_and_send_nothing() {
    let mut r = Harness::new("allow = [\"10.0.0.0/8\"]");
    assert_eq!(r.feed(REC, "192.0.2.1:1", 0).engine.packets().count(), 0);
    assert_eq!(
        r.feed(b"<statistics><stats", "10.0.0.1:1", 0)
            .engine
            .packets()
            .count(),
        0
    );
    assert!(r.feed(REC, "10.0.0.1:1", 0).engine.packets().count() > 0);
    let snap = r.snapshot();
    assert_eq!(
        (snap.datagrams, snap.denied, snap.parse_errors, snap.records),
        (3, 1, 1, 1)
    );
}

#[test]
fn xrootd_and_cmsd_on_one_host_are_separate_sources() {
    let mut r = Harness::new("");
    r.feed(REC, "10.0.0.1:1", 0);
    r.feed(
        REC.replace("pgm=\"xrootd\"", "pgm=\"cmsd\""),
        "10.0.0.1:2",
        0,
    );
    assert_eq!(r.engine.sources(), 2);
    let names: Vec<String> = r
        .packets()
        .into_iter()
        .filter_map(|p| match p {
            Packet::Metadata { id, .. } => Some(id.name.into_owned()),
            _ => None,
        })
        .collect();
    assert!(names.contains(&"cmsd.link.in".to_string()), "{names:?}");
}

#[test]
fn metrics_per_source_are_capped() {
    let mut r = Harness::new("max_metrics_per_source = 5");
    r.feed(REC, "10.0.0.1:1", 0);
    // heartbeat (metadata + value) + 5 metrics x (metadata + value); of
    // the 10 metrics (tod left out), 5 over the cap.
    assert_eq!(r.engine.packets().count(), 12);
    assert_eq!(r.snapshot().metrics_dropped_cap, 5);
    assert_eq!(r.snapshot().variables_excluded, 1);
}

#[test]
fn sources_are_bounded_with_lru_eviction() {
    let mut sources = Sources::default();
    let t0 = Instant::now();
    for i in 0..1000u32 {
        let ip = IpAddr::from((0x0a00_0000 + i).to_be_bytes());
        let at = t0 + Duration::from_millis(i as u64);
        sources.get_or_insert(ip, "xrootd", at, 100, 4, &mut |_, _| {});
        assert!(sources.len() <= 100);
    }
    // The most recent one is still there.
    let last = IpAddr::from((0x0a00_0000u32 + 999).to_be_bytes());
    assert!(sources.has_ip(last));
    assert_eq!(sources.len(), sources.iter().count());
}

#[test]
fn largest_metadata_fits_a_packet() {
    // Longest name, host, group, title and description the caps allow.
    let long = "x".repeat(600);
    let rec = format!(
        "<statistics pgm=\"{long}\" ins=\"{long}\" site=\"{long}\" src=\"{long}:1\"><stats id=\"{long}\"><{long}>1</{long}></stats></statistics>"
    );
    let mut r = Harness::new(
        "group_name = \"{pgm}.{ins}.{site}.{section}\"\nmetric_name = \"{pgm}.{ins}.{site}.{var}\"",
    );
    r.feed(rec, "[2001:db8:1:2:3:4:5:6]:1", 0);
    // Every name is cut to the same 128 bytes: one metric (its metadata and
    // value, once: a name repeated in a record is sent once) and the
    // heartbeat (metadata and value).
    assert_eq!(r.engine.packets().count(), 4);
    for b in r.engine.packets() {
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
    let mut r = Harness::new("");
    for secs in [0, 15, 30] {
        r.feed(REC, "10.0.0.1:40000", secs);
    }
    assert_eq!(r.metadata_count(), 0);
    // New tos and pid: the xrootd restarted.
    let restarted = REC
        .replace("tos=\"1700000000\"", "tos=\"1700000050\"")
        .replace("pid=\"77\"", "pid=\"78\"");
    r.feed(restarted, "10.0.0.1:40000", 45);
    assert_eq!(r.metadata_count(), 11);
    let snap = r.snapshot();
    assert_eq!((snap.restarts, snap.sources), (1, 1));
}

/// A real xrootd 6.1.0 with `xrd.report ... all json all`
/// (tests/data/records-5.9, ds-both): every interval the XML record and
/// then a JSON datagram with the same `tod` and the same `http_plugin` set.
/// Each http_plugin metric goes out once per interval, from the XML
/// record; the JSON copy is counted as left out. Expected values from the
/// captures' text (GET 3, 5, 7).
#[test]
fn a_set_sent_as_xml_and_json_in_one_interval_is_sent_once() {
    let read = |name: &str| {
        std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/records-5.9")
                .join(name),
        )
        .unwrap()
    };
    let get = "xrootd.ds-both.http_plugin.request.GET";
    for fast in [true, false] {
        let mut r = Harness::new("");
        r.engine.set_fast_path(fast);
        let mut secs = 0;
        for (n, want_get) in [("1", "3"), ("2", "5"), ("3", "7")] {
            let xml = read(&format!("ds-both-6.1.0-xml-{n}.xml"));
            let json = read(&format!("ds-both-6.1.0-json-{n}.json"));
            let text = String::from_utf8(xml.clone()).unwrap();
            assert!(text.contains(&format!("<GET>{want_get}</GET>")));
            let jtext = String::from_utf8(json.clone()).unwrap();
            assert!(jtext.contains(&format!("\"GET\":{want_get},")));
            // Both of one interval carry the same tod.
            let tod = |t: &str, key: &str| {
                let at = t.find(key).unwrap() + key.len();
                t[at..at + 10].to_string()
            };
            assert_eq!(tod(&text, "tod=\""), tod(&jtext, "\"tod\":"));

            secs += 5;
            let before = r.snapshot().variables_excluded;
            let v = r.feed(&xml, "127.0.0.1:35482", secs).values();
            assert_eq!(v[get], want_get, "interval {n}, fast path {fast}");
            let from_xml = r.snapshot().variables_excluded - before;
            // The JSON copy: nothing sent; each of its variables counted
            // (the header's 8 and the set's 13 verbs and 21 statuses, and
            // uptime, derived).
            let before = r.snapshot().variables_excluded;
            r.feed(&json, "127.0.0.1:35482", secs);
            assert!(r.packets().is_empty(), "interval {n}: {:?}", r.values());
            assert_eq!(
                r.snapshot().variables_excluded - before,
                8 + 13 + 21 + 1,
                "interval {n}"
            );
            assert!(from_xml > 0);
        }
        if fast {
            // The JSON copies left the XML record's template alone: the
            // third record takes the fast path (the second still learns
            // the interval, a new TMAX).
            assert!(
                r.engine.fast_path_hits() >= 1,
                "{}",
                r.engine.fast_path_hits()
            );
        }
    }
    // A JSON-only source (`json all`, ds-json) is sent as ever.
    let mut r = Harness::new("");
    let v = r
        .feed(read("ds-json-6.1.0-json-1.json"), "127.0.0.1:37877", 5)
        .values();
    assert_eq!(v["xrootd.ds-json.http_plugin.request.GET"], "3");
}
