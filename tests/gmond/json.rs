//! End to end against a real gmond: a record in its JSON form (xrootd 5.9+,
//! `xrd.report ... json`) on the same port becomes the same metrics as the
//! XML record: names, values, types, slopes, units, groups, titles.

use xrd2ganglia_testkit as common;

use std::time::Duration;

use common::{Gateway, Gmond};

const CONFIG: &str = "metadata_interval = 2\ndmax = 0\nstats_interval = 0\nself_metrics_interval = 0\nlog_interval = 1\n";

/// A data server's record as XML, from host `HOST`.
const XML: &str = concat!(
    r#"<statistics tod="1700000100" ver="v5.9.1" src="HOST:1094" tos="1700000000" pgm="xrootd" ins="anon" pid="4242" site="TESTSITE">"#,
    r#"<stats id="info"><host>HOST</host><port>1094</port><name>anon</name></stats>"#,
    r#"<stats id="link"><num>3</num><maxn>7</maxn><tot>120</tot><in>5242880</in><out>104857600</out><ctime>30</ctime><tmo>-2147483000</tmo><stall>0</stall><sfps>0</sfps></stats>"#,
    r#"<stats id="proc"><usr><s>2</s><u>500000</u></usr><sys><s>1</s><u>250000</u></sys></stats>"#,
    r#"<stats id="xrootd"><num>12</num><ops><open>6</open><rd>81</rd><wr>3</wr></ops><err>5</err><lgn><num>12</num><ua>12</ua></lgn></stats>"#,
    r#"<stats id="ofs"><role>meta manager</role><opr>1</opr></stats>"#,
    r#"<stats id="oss" v="2"><paths>2<stats id="0"><lp>"/data/"</lp><rp>"/srv/xrd/data/"</rp><tot>1048576</tot><free>524288</free><ino>65536</ino><ifr>60000</ifr></stats><stats id="1"><lp>"/mem/"</lp><rp>"/srv/xrd/mem/"</rp><tot>16384</tot><free>16000</free><ino>100</ino><ifr>90</ifr></stats></paths><space>1<stats id="0"><name>public</name><tot>1048576</tot><free>524288</free><maxf>524288</maxf><fsn>1</fsn><usg>10240</usg><qta>53687091200</qta></stats></space></stats>"#,
    r#"<stats id="pss"><open>3<errs>1</errs></open></stats>"#,
    r#"<stats id="sgen"><as>0</as><et>1</et><toe>1700000100</toe></stats>"#,
    r#"</statistics>"#,
);

/// The same record in the JSON form, written by hand: header numbers
/// unquoted, `stats_ID` sections, lists as arrays (their length is the
/// count), `""` for an element's own value, one string with an escape.
const JSON: &str = concat!(
    r#"{"statistics":{"tod":1700000100,"ver":"v5.9.1","src":"HOST:1094","tos":1700000000,"pgm":"xrootd","ins":"anon","pid":4242,"site":"TESTSITE","#,
    r#""stats_info":{"host":"HOST","port":1094,"name":"anon"},"#,
    r#""stats_link":{"num":3,"maxn":7,"tot":120,"in":5242880,"out":104857600,"ctime":30,"tmo":-2147483000,"stall":0,"sfps":0},"#,
    r#""stats_proc":{"usr":{"s":2,"u":500000},"sys":{"s":1,"u":250000}},"#,
    r#""stats_xrootd":{"num":12,"ops":{"open":6,"rd":81,"wr":3},"err":5,"lgn":{"num":12,"ua":12}},"#,
    r#""stats_ofs":{"role":"meta\u0020manager","opr":1},"#,
    r#""stats_oss":{"paths":[{"lp":"/data/","rp":"/srv/xrd/data/","tot":1048576,"free":524288,"ino":65536,"ifr":60000},{"lp":"/mem/","rp":"/srv/xrd/mem/","tot":16384,"free":16000,"ino":100,"ifr":90}],"space":[{"name":"public","tot":1048576,"free":524288,"maxf":524288,"fsn":1,"usg":10240,"qta":53687091200}]},"#,
    r#""stats_pss":{"open":{"":3,"errs":1}},"#,
    r#""stats_sgen":{"as":0,"et":1,"toe":1700000100}"#,
    "}}\n",
);

#[test]
fn json_record_becomes_the_same_metrics_as_xml() {
    let gmond = Gmond::start();
    let gw = Gateway::start(gmond.port, CONFIG);
    let (xml_host, json_host) = ("xml.example.org", "json.example.org");
    // Two servers (a source is its address and program), one after the
    // other as real ones report.
    gw.send_as("127.0.0.1", XML.replace("HOST", xml_host).as_bytes());
    gmond.wait_for(Duration::from_secs(15), "the XML record", |x| {
        x.has(xml_host, &["xrootd.uptime"])
    });
    gw.send_as("127.0.0.2", JSON.replace("HOST", json_host).as_bytes());
    let x = gmond.wait_for(Duration::from_secs(15), "the JSON record", |x| {
        x.has(json_host, &["xrootd.uptime"])
    });
    let (from_xml, from_json) = (x.host(xml_host), x.host(json_host));
    assert_eq!(from_json.attrs["GMOND_STARTED"], "1700000000");

    // Every metric of the XML record, and no other, with the same
    // attributes (the host's own name aside) and extra data.
    let names = |h: &common::XmlHost| h.metrics.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(from_json), names(from_xml));
    // 57 since the report times and the raw CPU halves are left out by
    // default (63 before).
    assert!(
        from_xml.metrics.len() >= 57,
        "{} metrics",
        from_xml.metrics.len()
    );
    let same = |s: &str| {
        s.replace(json_host, xml_host)
            .replace("127.0.0.2:", "127.0.0.1:")
    };
    for (name, m) in &from_xml.metrics {
        let j = &from_json.metrics[name];
        for attr in ["VAL", "TYPE", "SLOPE", "UNITS", "TMAX", "DMAX", "SOURCE"] {
            assert_eq!(same(j.get(attr)), m.get(attr), "{name} {attr}");
        }
        let extra: Vec<_> = j.extra.iter().map(|(k, v)| (k.clone(), same(v))).collect();
        let want: Vec<_> = m
            .extra
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(extra, want, "{name}");
    }

    // What the JSON form had to make: list lengths, entries named by key,
    // the escaped string, the own value.
    let get = |name: &str| x.metric(json_host, name).get("VAL").to_string();
    assert_eq!(get("xrootd.oss.paths"), "2");
    assert_eq!(get("xrootd.oss.space"), "1");
    assert_eq!(get("xrootd.ofs.role"), "meta manager");
    assert_eq!(get("xrootd.pss.open"), "3");
    assert_eq!(get("xrootd.pss.open.errs"), "1");
    let keyed: Vec<_> = from_json
        .metrics
        .keys()
        .filter(|n| n.starts_with("xrootd.oss.") && n.ends_with(".free"))
        .collect();
    assert_eq!(keyed.len(), 3, "{keyed:?}");
    assert!(
        keyed
            .iter()
            .all(|n| !n.contains(".0.") && !n.contains(".1.")),
        "entries named by their key, not position: {keyed:?}"
    );
    let m = x.metric(json_host, "xrootd.link.in");
    assert_eq!(
        (m.get("VAL"), m.get("TYPE"), m.get("SLOPE"), m.get("UNITS")),
        ("5242880", "double", "positive", "bytes/s")
    );
    let m = x.metric(json_host, "xrootd.link.tmo");
    assert_eq!((m.get("VAL"), m.get("TYPE")), ("2147484296", "double"));
}

#[test]
fn bad_json_is_counted_and_the_next_record_still_arrives() {
    let gmond = Gmond::start();
    let gw = Gateway::start(gmond.port, CONFIG);
    for bad in [
        &b"{\"statistics\":{\"tod\":1"[..],
        b"{\"statistics\":{\"a\" 1}}",
        b"{\"hello\":1}",
        b"{\"statistics\":{\"stats_a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}",
    ] {
        gw.send(bad);
    }
    let host = "after.example.org";
    gw.send(JSON.replace("HOST", host).as_bytes());
    gmond.wait_for(Duration::from_secs(15), "the good record", |x| {
        x.has(host, &["xrootd.uptime"])
    });
    let log = gw.proc.log_text();
    assert!(log.contains("malformed JSON at byte"), "{log}");
    assert!(log.contains("truncated record"), "{log}");
}

/// A real xrootd 6.1.0 JSON datagram with a plug-in set added whose
/// doubles `std::to_string` wrote as `nan`, `-nan` and `inf` (bare words,
/// as XrdMonitor.cc writes numbers): those values are refused, counted and
/// logged; the record's other values arrive in a real gmond.
#[test]
fn nan_in_a_json_set_is_refused_and_the_rest_arrives() {
    let gmond = Gmond::start();
    let gw = Gateway::start(gmond.port, CONFIG);
    let real = common::fixture("../records-5.9/ds-json-6.1.0-json-1.json");
    let real = String::from_utf8(real).unwrap();
    let cut = real.rfind("}}").unwrap();
    let data = format!(
        "{},\"stats_myplug\":{{\"rate\":nan,\"temp\":-nan,\"peak\":inf,\"load\":0.250000}}}}}}",
        &real[..cut]
    );
    gw.send(data.as_bytes());
    // From the record's text: ins "ds-json", src "vm:48021", GET 3.
    let host = "vm";
    let x = gmond.wait_for(Duration::from_secs(15), "the record", |x| {
        x.has(host, &["xrootd.ds-json.myplug.load"])
    });
    let h = x.host(host);
    assert_eq!(
        h.metrics["xrootd.ds-json.http_plugin.request.GET"].get("VAL"),
        "3"
    );
    assert_eq!(
        h.metrics["xrootd.ds-json.myplug.load"].get("VAL"),
        "0.250000"
    );
    for gone in ["rate", "temp", "peak"] {
        let name = format!("xrootd.ds-json.myplug.{gone}");
        assert!(!h.metrics.contains_key(&name), "{name} sent");
    }
    // Without the terminal colours.
    let mut log = String::new();
    let mut in_escape = false;
    for c in gw.proc.log_text().chars() {
        match (in_escape, c) {
            (false, '\u{1b}') => in_escape = true,
            (false, c) => log.push(c),
            (true, 'm') => in_escape = false,
            (true, _) => {}
        }
    }
    assert!(
        log.contains("myplug.rate=\"nan\" (not finite)")
            && log.contains("myplug.temp=\"-nan\" (not finite)")
            && log.contains("myplug.peak=\"inf\" (not finite)")
            && log.contains("count=3"),
        "{log}"
    );
}

/// A plug-in's counter described by `[[metric]]` reaches a real gmond with
/// the described type, slope and units; an undescribed one of the same set
/// stays a double with slope both and no units. The datagram is a real
/// xrootd 6.1.0 JSON one with a plug-in set added (no set but
/// `http_plugin`, which the catalog knows, ships in XRootD's tree), its
/// values written as `std::to_string` writes doubles.
#[test]
fn a_plug_in_counter_described_by_the_config_is_sent_as_described() {
    let gmond = Gmond::start();
    let config = format!(
        "{CONFIG}\n[[metric]]\nmatch = \"myplug.requests\"\nslope = \"counter\"\nunits = \"requests/s\"\ntitle = \"My plug-in requests\"\n"
    );
    let gw = Gateway::start(gmond.port, &config);
    let real = common::fixture("../records-5.9/ds-json-6.1.0-json-2.json");
    let real = String::from_utf8(real).unwrap();
    let cut = real.rfind("}}").unwrap();
    let data = format!(
        "{},\"stats_myplug\":{{\"requests\":12.000000,\"level\":0.500000}}}}}}",
        &real[..cut]
    );
    gw.send(data.as_bytes());
    let x = gmond.wait_for(Duration::from_secs(15), "the record", |x| {
        x.has(
            "vm",
            &[
                "xrootd.ds-json.myplug.requests",
                "xrootd.ds-json.myplug.level",
            ],
        )
    });
    let m = x.metric("vm", "xrootd.ds-json.myplug.requests");
    assert_eq!(
        (m.get("VAL"), m.get("TYPE"), m.get("SLOPE"), m.get("UNITS")),
        ("12", "double", "positive", "requests/s")
    );
    assert_eq!(m.extra["TITLE"], "xrootd ds-json: My plug-in requests");
    let m = x.metric("vm", "xrootd.ds-json.myplug.level");
    assert_eq!(
        (m.get("VAL"), m.get("TYPE"), m.get("SLOPE"), m.get("UNITS")),
        ("0.500000", "double", "both", "")
    );
    // The record's own http_plugin counter (GET 5 in json-2's text), as
    // the catalog describes it.
    let m = x.metric("vm", "xrootd.ds-json.http_plugin.request.GET");
    assert_eq!((m.get("VAL"), m.get("SLOPE")), ("5", "positive"));
}
