//! XCache's g-stream (pfc's file_close records) as metrics of the XCache's
//! own host, next to its summary record's.

use super::*;

/// A real XCache's summary record and g-stream datagrams of one run
/// (xrootd 5.5.3, `tests/data/gstream`: its `stod` is the record's `tos`).
fn capture(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/gstream")
            .join(name),
    )
    .unwrap()
}

/// A JSON g-stream datagram (`send json`) of one file_close record.
fn gstream(stod: u32, hit: u64, miss: u64) -> String {
    format!(
        "{{\"code\":\"g\",\"pseq\":1,\"stod\":{stod},\"gs\":{{\"type\":\"C\"}}}}\n\
         {{\"event\":\"file_close\",\"lfn\":\"/f\",\"b_hit\":{hit},\"b_miss\":{miss},\"b_bypass\":0}}\0"
    )
}

const XCACHE: &str = "10.0.0.3:57117";
/// The g-stream comes from another port of the same address.
const XCACHE_GSTREAM: &str = "10.0.0.3:44659";

fn pfc_values(r: &Harness) -> Vec<(String, String)> {
    r.values()
        .into_iter()
        // The g-stream's `pfc.*`, not the summary's `cache.pfc.*`.
        .filter(|(n, _)| n.contains(".pfc.") && !n.contains(".cache.pfc."))
        .collect()
}

#[test]
fn gstream_totals_become_the_xcaches_metrics() {
    let mut r = Harness::new("");
    r.feed(capture("pfc_summary.xml"), XCACHE, 0);
    assert_eq!(pfc_values(&r), []);
    r.feed(capture("pfc_1.bin"), XCACHE_GSTREAM, 1);
    // Metadata first seen, values: the three closes of pfc_1.bin.
    let packets = r.packets();
    assert_eq!(r.metadata_count(), 4);
    let meta = packets
        .iter()
        .find_map(|p| match p {
            Packet::Metadata { id, meta } if id.name == "xrootd.pfcA.pfc.bytes_hit" => {
                Some((id.host.to_string(), meta.clone()))
            }
            _ => None,
        })
        .expect("bytes_hit metadata");
    assert_eq!(meta.0, "10.0.0.3:vm");
    assert_eq!(
        (&*meta.1.value_type, &*meta.1.units, meta.1.slope),
        ("double", "bytes/s", Slope::Positive)
    );
    let extra: Vec<(&str, &str)> = meta.1.extra.iter().map(|(k, v)| (&**k, &**v)).collect();
    assert_eq!(
        extra,
        [
            ("SPOOF_HOST", "10.0.0.3:vm"),
            ("GROUP", "xrootd.pfcA.pfc"),
            (
                "DESC",
                "Bytes XCache served from its disk cache: b_hit of the file_close records of its g-stream."
            ),
            ("TITLE", "xrootd pfcA: XCache bytes from the cache"),
        ]
    );
    let expect = |files: u64, hit: u64, miss: u64| {
        vec![
            ("xrootd.pfcA.pfc.bytes_bypass".to_string(), "0".to_string()),
            ("xrootd.pfcA.pfc.bytes_hit".into(), hit.to_string()),
            ("xrootd.pfcA.pfc.bytes_miss".into(), miss.to_string()),
            ("xrootd.pfcA.pfc.files".into(), files.to_string()),
        ]
    };
    assert_eq!(pfc_values(&r), expect(3, 10_864_320, 724_288));
    // The next datagram adds to them; metadata is not due again.
    r.feed(capture("pfc_2.bin"), XCACHE_GSTREAM, 2);
    assert_eq!(r.metadata_count(), 0);
    assert_eq!(pfc_values(&r), expect(5, 16_233_248, 855_360));
    // Each record of the XCache carries them too, on the full path and on
    // the fast path alike (an idle cache stays in Ganglia).
    r.feed(capture("pfc_summary.xml"), XCACHE, 3);
    assert_eq!(pfc_values(&r), expect(5, 16_233_248, 855_360));
    let hits = r.engine.fast_path_hits();
    r.feed(capture("pfc_summary.xml"), XCACHE, 6);
    assert_eq!(r.engine.fast_path_hits(), hits + 1);
    assert_eq!(pfc_values(&r), expect(5, 16_233_248, 855_360));
    r.feed(capture("pfc_3.bin"), XCACHE_GSTREAM, 7);
    assert_eq!(pfc_values(&r), expect(8, 19_988_608, 986_432));
    let s = r.snapshot();
    assert_eq!((s.gstream_packets, s.parse_errors, s.records), (3, 0, 3));
}

#[test]
fn a_gstream_before_its_servers_first_record_waits_for_it() {
    let mut r = Harness::new("");
    r.feed(capture("pfc_1.bin"), XCACHE_GSTREAM, 0);
    assert_eq!(r.packets(), []);
    r.feed(capture("pfc_summary.xml"), XCACHE, 1);
    let values = pfc_values(&r);
    assert!(
        values.contains(&("xrootd.pfcA.pfc.bytes_hit".into(), "10864320".into())),
        "{values:?}"
    );
    // Another address, or another run at this address, is another server.
    let mut r = Harness::new("");
    r.feed(capture("pfc_summary.xml"), XCACHE, 0);
    r.feed(capture("pfc_1.bin"), "10.0.0.4:1", 1);
    assert_eq!(r.packets(), []);
    r.feed(gstream(1_795_582_052, 5, 5), XCACHE_GSTREAM, 2);
    assert_eq!(r.packets(), []);
    assert_eq!(r.snapshot().gstream_unmatched, 0);
    // At most max_sources of them wait; more are dropped, counted.
    let mut r = Harness::new("max_sources = 2\n");
    for stod in 1..=3 {
        r.feed(gstream(stod, 1, 1), XCACHE_GSTREAM, 0);
    }
    r.feed(gstream(2, 1, 1), XCACHE_GSTREAM, 0);
    assert_eq!(r.snapshot().gstream_unmatched, 1);
}

#[test]
fn an_xcache_restart_keeps_its_totals_continuous() {
    let mut r = Harness::new("");
    let summary = String::from_utf8(capture("pfc_summary.xml")).unwrap();
    r.feed(&summary, XCACHE, 0);
    r.feed(gstream(1_795_582_051, 1000, 10), XCACHE_GSTREAM, 1);
    // Restarted: a new start time; its g-stream counts from 0 again.
    let restarted = summary
        .replace("tos=\"1795582051\"", "tos=\"1795582099\"")
        .replace("pid=\"22296\"", "pid=\"22400\"");
    r.feed(&restarted, XCACHE, 60);
    r.feed(gstream(1_795_582_099, 300, 3), XCACHE_GSTREAM, 61);
    let values = pfc_values(&r);
    assert!(
        values.contains(&("xrootd.pfcA.pfc.bytes_hit".into(), "1300".into())),
        "{values:?}"
    );
    assert!(
        values.contains(&("xrootd.pfcA.pfc.files".into(), "2".into())),
        "{values:?}"
    );
}

#[test]
fn the_config_names_and_filters_them_as_record_variables() {
    let mut r = Harness::new("metric_name = \"{site}.{pgm}.{var}\"\nexclude = [\"pfc.files\"]\n");
    r.feed(capture("pfc_summary.xml"), XCACHE, 0);
    r.feed(capture("pfc_1.bin"), XCACHE_GSTREAM, 1);
    let names: Vec<String> = pfc_values(&r).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "TESTSITE.xrootd.pfc.bytes_bypass",
            "TESTSITE.xrootd.pfc.bytes_hit",
            "TESTSITE.xrootd.pfc.bytes_miss"
        ]
    );
}

#[test]
fn other_monitoring_data_is_counted_apart_from_bad_input() {
    let mut r = Harness::new("");
    // The binary route's server identification packet ('=', plen 12).
    r.feed(b"=\0\0\x0c\x6b\x06\x68\x63&s=x", XCACHE_GSTREAM, 0);
    // A truncated binary g-stream packet.
    r.feed(b"g\x01\0\x0c\x6b\x06\x68\x63abcd", XCACHE_GSTREAM, 0);
    // A g-stream with a bad record: the rest is taken.
    r.feed(
        "{\"code\":\"g\",\"stod\":9,\"gs\":{\"type\":\"C\"}}\nnot json\0",
        XCACHE_GSTREAM,
        0,
    );
    let s = r.snapshot();
    assert_eq!(
        (
            s.monitoring_ignored,
            s.parse_errors,
            s.gstream_packets,
            s.records
        ),
        (1, 1, 1, 0)
    );
}

/// An origin and its XCache on one host, started in the same second: the
/// g-stream's instance name (`insthdr`) says whose it is.
#[test]
fn the_gstreams_instance_name_tells_servers_of_one_start_apart() {
    let mut r = Harness::new("");
    let summary = String::from_utf8(capture("pfc_summary.xml")).unwrap();
    let origin = summary.replace("ins=\"pfcA\"", "ins=\"origin\"");
    r.feed(&origin, "10.0.0.3:50000", 0);
    r.feed(&summary, XCACHE, 0);
    // A cmsd of that start too: never an XCache.
    let cmsd = summary
        .replace("pgm=\"xrootd\"", "pgm=\"cmsd\"")
        .replace("ins=\"pfcA\"", "ins=\"xc\"");
    r.feed(&cmsd, "10.0.0.3:50001", 0);
    let gs = gstream(1_795_582_051, 7, 1).replacen(
        "\"gs\":",
        "\"src\":{\"site\":\"TESTSITE\",\"host\":\"vm\",\"port\":23302,\"inst\":\"pfcA\"},\"gs\":",
        1,
    );
    r.feed(&gs, XCACHE_GSTREAM, 1);
    assert!(
        pfc_values(&r).contains(&("xrootd.pfcA.pfc.bytes_hit".into(), "7".into())),
        "{:?}",
        r.values()
    );
    // Before its record, it waits for that instance, not the first one
    // of its start.
    let mut r = Harness::new("");
    r.feed(&gs, XCACHE_GSTREAM, 0);
    r.feed(&origin, "10.0.0.3:50000", 1);
    assert_eq!(pfc_values(&r), []);
    r.feed(&summary, XCACHE, 1);
    assert!(
        pfc_values(&r).contains(&("xrootd.pfcA.pfc.bytes_hit".into(), "7".into())),
        "{:?}",
        r.values()
    );
}
