//! The JSON form: hand-written 5.9 records, every real XML fixture against
//! its JSON equivalent, hostile input, and a differential property test
//! against a flattener written over `serde_json::Value`.

use super::super::*;
use super::{assert_errors, assert_flat};
pub(crate) use form::xml_to_json;

mod form;
mod reference;

/// (name, value, entry as (index, list, id, field))
type Var = (String, String, Option<(usize, String, String, String)>);

fn vars_of(r: &SummaryRecord<'_>) -> Vec<Var> {
    r.vars()
        .map(|v| {
            (
                v.name.to_string(),
                v.value.to_string(),
                v.entry.map(|e| {
                    (
                        e.index,
                        e.list.to_string(),
                        e.id.to_string(),
                        e.field.to_string(),
                    )
                }),
            )
        })
        .collect()
}

fn fixtures() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/records");
    let mut v: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn every_real_record_flattens_the_same_from_json() {
    let fixtures = fixtures();
    assert!(fixtures.len() >= 11, "{} fixtures", fixtures.len());
    let (mut xp, mut jp) = (SummaryParser::new(), SummaryParser::new());
    for (name, xml) in &fixtures {
        let json = xml_to_json(xml);
        let x = xp.parse(xml.as_bytes()).unwrap();
        let j = jp
            .parse(json.as_bytes())
            .unwrap_or_else(|e| panic!("{name}: {e}\n{json}"));
        assert_eq!(vars_of(&j), vars_of(&x), "{name}\n{json}");
        assert_eq!(j.header_len(), x.header_len(), "{name}");
        assert_eq!(j.header(), x.header(), "{name}");
        assert_eq!(j.entry_count(), x.entry_count(), "{name}");
        assert!(j.header().toe.is_some(), "{name}: sgen.toe");
    }
}

/// The JSON of `spaces.xml` as the converter writes it, checked by hand
/// once: lists as arrays, header numbers unquoted.
#[test]
fn the_converter_writes_lists_as_arrays() {
    let xml = fixtures()
        .into_iter()
        .find(|(n, _)| n == "spaces.xml")
        .unwrap()
        .1;
    let json = xml_to_json(&xml);
    assert!(json.starts_with(r#"{"statistics":{"tod":1795303790,"ver":"v5.5.3","src":"vm:21197","tos":1795303118,"pgm":"xrootd","ins":"spaces","pid":4083,"site":"TESTSITE","stats_info":{"host":"vm","port":21197,"name":"spaces"},"#), "{json}");
    assert!(json.contains(r#""stats_oss":{"paths":[{"lp":"/","rp":"/tmp/xrdcap/spaces/data/","tot":264212084,"free":82922860,"ino":16777216,"ifr":16382660},{"lp":"/mem","#), "{json}");
    assert!(json.contains(r#""space":[{"name":"legacy","#), "{json}");
    assert!(
        json.ends_with(r#""stats_sgen":{"as":0,"et":0,"toe":1795303790}}}"#),
        "{json}"
    );
}

/// A plug-in's set as xrootd 5.9 sends it: the header, one flat set.
const PLUGIN_SET: &str = r#"{"statistics":{"tod":1767225610,"ver":"v5.9.0","src":"ds1.example.org:1094","tos":1767225000,"pgm":"xrootd","ins":"anon","pid":4242,"site":"T2_XY","stats_tpc":{"active":2,"done":17,"fail":0}}}"#;

/// The JSON form of a data server's record: nested objects, lists, an own
/// value, a value with a space.
const DATA_SERVER: &str = r#"{"statistics":{"tod":1700000010,"ver":"v5.9.1","src":"ds.example.org:1094","tos":1700000000,"pgm":"xrootd","ins":"anon","pid":4242,"site":"T2_XY","stats_link":{"num":3,"in":1024},"stats_xrootd":{"num":7,"ops":{"open":2,"rd":99}},"stats_oss":{"paths":[{"lp":"/data/","rp":"/srv/data/","tot":100,"free":40},{"lp":"/mem/","free":1}],"space":[]},"stats_pss":{"open":{"":3,"errs":0}},"stats_ofs":{"role":"meta manager"},"stats_sgen":{"as":0,"et":1,"toe":1700000011}}}"#;

/// A manager cmsd's, pretty-printed, with a trailing newline (as xrootd's
/// query path writes it).
const MANAGER: &str = "{\"statistics\": {\n  \"tod\": 2, \"ver\": \"v5.9.1\", \"src\": \"mgr:1213\", \"tos\": 1,\n  \"pgm\": \"cmsd\", \"ins\": \"mgr\", \"pid\": 7, \"site\": \"S\",\n  \"stats_cmsm\": {\n    \"role\": \"M\",\n    \"node\": [\n      {\"host\": \"a.example\", \"ref\": {\"r\": 1, \"w\": 0}},\n      {\"host\": \"a.example\", \"ref\": {\"r\": 4, \"w\": 1}}\n    ],\n    \"frq\": {\"add\": {\"\": 10, \"d\": 2}, \"lf\": 3}\n  }\n}}\n";

#[test]
fn hand_written_records() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            PLUGIN_SET,
            &[
                ("tod", "1767225610"),
                ("ver", "v5.9.0"),
                ("src", "ds1.example.org:1094"),
                ("tos", "1767225000"),
                ("pgm", "xrootd"),
                ("ins", "anon"),
                ("pid", "4242"),
                ("site", "T2_XY"),
                ("tpc.active", "2"),
                ("tpc.done", "17"),
                ("tpc.fail", "0"),
            ],
        ),
        (
            DATA_SERVER,
            &[
                ("tod", "1700000010"),
                ("ver", "v5.9.1"),
                ("src", "ds.example.org:1094"),
                ("tos", "1700000000"),
                ("pgm", "xrootd"),
                ("ins", "anon"),
                ("pid", "4242"),
                ("site", "T2_XY"),
                ("link.num", "3"),
                ("link.in", "1024"),
                ("xrootd.num", "7"),
                ("xrootd.ops.open", "2"),
                ("xrootd.ops.rd", "99"),
                ("oss.paths", "2"),
                ("oss.paths.0.lp", "/data/"),
                ("oss.paths.0.rp", "/srv/data/"),
                ("oss.paths.0.tot", "100"),
                ("oss.paths.0.free", "40"),
                ("oss.paths.1.lp", "/mem/"),
                ("oss.paths.1.free", "1"),
                ("oss.space", "0"),
                ("pss.open", "3"),
                ("pss.open.errs", "0"),
                ("ofs.role", "meta manager"),
                ("sgen.as", "0"),
                ("sgen.et", "1"),
                ("sgen.toe", "1700000011"),
            ],
        ),
        (
            MANAGER,
            &[
                ("tod", "2"),
                ("ver", "v5.9.1"),
                ("src", "mgr:1213"),
                ("tos", "1"),
                ("pgm", "cmsd"),
                ("ins", "mgr"),
                ("pid", "7"),
                ("site", "S"),
                ("cmsm.role", "M"),
                ("cmsm.node", "2"),
                ("cmsm.node.0.host", "a.example"),
                ("cmsm.node.0.ref.r", "1"),
                ("cmsm.node.0.ref.w", "0"),
                ("cmsm.node.1.host", "a.example"),
                ("cmsm.node.1.ref.r", "4"),
                ("cmsm.node.1.ref.w", "1"),
                ("cmsm.frq.add", "10"),
                ("cmsm.frq.add.d", "2"),
                ("cmsm.frq.lf", "3"),
            ],
        ),
    ];
    assert_flat(cases);
}

/// The hand-written data server record is the XML one, variable for
/// variable, entries included.
#[test]
fn hand_written_json_equals_its_xml() {
    let xml = r#"<statistics tod="1700000010" ver="v5.9.1" src="ds.example.org:1094" tos="1700000000" pgm="xrootd" ins="anon" pid="4242" site="T2_XY"><stats id="link"><num>3</num><in>1024</in></stats><stats id="xrootd"><num>7</num><ops><open>2</open><rd>99</rd></ops></stats><stats id="oss" v="2"><paths>2<stats id="0"><lp>"/data/"</lp><rp>"/srv/data/"</rp><tot>100</tot><free>40</free></stats><stats id="1"><lp>"/mem/"</lp><free>1</free></stats></paths><space>0</space></stats><stats id="pss"><open>3<errs>0</errs></open></stats><stats id="ofs"><role>meta manager</role></stats><stats id="sgen"><as>0</as><et>1</et><toe>1700000011</toe></stats></statistics>"#;
    let (mut xp, mut jp) = (SummaryParser::new(), SummaryParser::new());
    let x = xp.parse(xml.as_bytes()).unwrap();
    let j = jp.parse(DATA_SERVER.as_bytes()).unwrap();
    assert_eq!(vars_of(&j), vars_of(&x));
    assert_eq!((j.header(), j.header_len()), (x.header(), x.header_len()));
    let free = j.vars().find(|v| v.name == "oss.paths.1.free").unwrap();
    assert_eq!(
        free.entry,
        Some(ListEntry {
            index: 1,
            list: "oss.paths",
            id: "1",
            field: "free"
        })
    );
}

#[test]
fn escapes_are_undone_and_plain_strings_borrowed() {
    let record = r#"{"statistics":{"pgm":"xrootd","stats_info":{"host":"a\"b\\c\/d","tab":"x\ty","u":"caf\u00e9 \ud83d\ude00","lone":"\ud800!","low":"\udc00","bad":"C:\data\u12","plain":"as is","num":12,"k\u0065y":1}}}"#;
    let mut p = SummaryParser::new();
    let r = p.parse(record.as_bytes()).unwrap();
    let got: Vec<_> = r.vars().map(|v| (v.name, v.value)).collect();
    assert_eq!(
        got,
        [
            ("pgm", "xrootd"),
            ("info.host", "a\"b\\c/d"),
            ("info.tab", "x\ty"),
            ("info.u", "caf\u{e9} \u{1f600}"),
            ("info.lone", "\u{fffd}!"),
            ("info.low", "\u{fffd}"),
            ("info.bad", "C:\\data\\u12"),
            ("info.plain", "as is"),
            ("info.num", "12"),
            ("info.key", "1"),
        ]
    );
    // Plain values are slices of the datagram; unescaped ones are not.
    for v in r.vars() {
        let inside = offset_in(record.as_bytes(), v.value).is_some();
        let escaped = matches!(
            v.name,
            "info.host" | "info.tab" | "info.u" | "info.lone" | "info.low" | "info.bad"
        );
        assert_eq!(inside, !escaped, "{}", v.name);
    }
    assert_eq!(r.text().as_ptr(), record.as_ptr());
}

#[test]
fn scalars_nulls_duplicates_and_a_trailing_toe() {
    let record = r#"{"statistics":{"tod":5,"pgm":"xrootd","tod":6,"stats_x":{"t":true,"f":false,"n":null,"big":123456789012345678901234567890,"neg":-5,"d":1.500000,"e":2E-3,"nan":-nan,"inf":inf,"z":007,"a":1,"a":2,"e0":{},"arr":[7,[1,2],{}]},"stats_empty":{},"toe":9}}"#;
    let mut p = SummaryParser::new();
    let r = p.parse(record.as_bytes()).unwrap();
    let got: Vec<_> = r.vars().map(|v| (v.name, v.value)).collect();
    assert_eq!(
        got,
        [
            ("tod", "5"),
            ("pgm", "xrootd"),
            ("tod", "6"),
            ("x.t", "true"),
            ("x.f", "false"),
            ("x.n", ""),
            ("x.big", "123456789012345678901234567890"),
            ("x.neg", "-5"),
            ("x.d", "1.500000"),
            ("x.e", "2E-3"),
            ("x.nan", "-nan"),
            ("x.inf", "inf"),
            ("x.z", "007"),
            ("x.a", "1"),
            ("x.a", "2"),
            ("x.e0", ""),
            ("x.arr", "3"),
            ("x.arr.0", "7"),
            ("x.arr.1", "2"),
            ("x.arr.1.0", "1"),
            ("x.arr.1.1", "2"),
            ("x.arr.2", ""),
            ("toe", "9"),
        ]
    );
    assert_eq!(r.header_len(), 3);
    let h = r.header();
    assert_eq!((h.tod, h.toe), (Some("5"), Some("9")));
    // Entries: arr.0, arr.1, arr.1.0, arr.1.1, arr.2 in document order.
    let entries: Vec<_> = r
        .vars()
        .filter_map(|v| v.entry.map(|e| (v.name, e.index, e.list, e.id, e.field)))
        .collect();
    assert_eq!(
        entries,
        [
            ("x.arr.0", 0, "x.arr", "0", ""),
            ("x.arr.1", 1, "x.arr", "1", ""),
            ("x.arr.1.0", 2, "x.arr.1", "0", ""),
            ("x.arr.1.1", 3, "x.arr.1", "1", ""),
            ("x.arr.2", 4, "x.arr", "2", ""),
        ]
    );
    assert_eq!(r.entry_count(), 5);
}

#[test]
fn malformed_json_says_what_is_wrong() {
    let mut p = assert_errors(&[
        (b"{", "truncated"),
        (b" \n{\"stati", "truncated"),
        (b"{\"statistics\"", "truncated"),
        (b"{\"statistics\":", "truncated"),
        (b"{\"statistics\":{\"tod\":1", "truncated"),
        (b"{\"statistics\":{\"tod\":tr", "truncated"),
        (b"{\"statistics\":{\"a\":\"x\\", "truncated"),
        (b"{\"statistics\":{\"stats_link\":{\"num\":1}", "truncated"),
        (b"{}", "not_statistics"),
        (b"{\"stats\":{}}", "not_statistics"),
        (b"{\"statistics\":[]}", "not_statistics"),
        (b"{\"statistics\":5}", "not_statistics"),
        (b"{1:2}", "not_statistics"),
        (b"[{\"statistics\":{}}]", "not_statistics"),
        (b"{\"statistics\" {}}", "malformed"),
        (b"{\"statistics\":{\"a\" 1}}", "malformed"),
        (b"{\"statistics\":{\"a\":1 \"b\":2}}", "malformed"),
        (b"{\"statistics\":{\"a\":}}", "malformed"),
        (b"{\"statistics\":{\"a\":bogus}}", "malformed"),
        (b"{\"statistics\":{\"a\":1,}}", "malformed"),
        (b"{\"statistics\":{1:2}}", "malformed"),
        (b"{\"statistics\":{\"a\":[1,]}}", "malformed"),
        (b"{\"statistics\":{\"a\":[1 2]}}", "malformed"),
        (b"{\"statistics\":{\"a\":{\"b\":1]}}", "malformed"),
        (b"{\"statistics\":{\"a\":'x'}}", "malformed"),
    ]);
    let err = p.parse(b"{\"statistics\":{\"a\" 1}}").unwrap_err();
    assert_eq!(err.to_string(), "malformed JSON at byte 19: expected ':'");
    let err = p.parse(b"{\"hello\":1}").unwrap_err();
    assert!(err.to_string().contains("{\\\"hello\\\":1}"), "{err}");
}

#[test]
fn nesting_is_bounded_without_recursion() {
    let mut p = SummaryParser::new();
    let deep = format!("{{\"statistics\":{{\"stats_a\":{}", "{\"a\":".repeat(40));
    assert_eq!(p.parse(deep.as_bytes()).unwrap_err().reason(), "too_deep");
    let deep = format!("{{\"statistics\":{{\"stats_a\":{}", "[".repeat(100_000));
    assert_eq!(p.parse(deep.as_bytes()).unwrap_err().reason(), "too_deep");
    // As deep as XML allows is fine.
    let depth = MAX_DEPTH - 1;
    let ok = format!(
        "{{\"statistics\":{{\"stats_a\":{}1{}}}}}",
        "{\"a\":".repeat(depth - 1),
        "}".repeat(depth)
    );
    let r = p.parse(ok.as_bytes()).unwrap();
    assert_eq!(r.len(), 1);
    let xml = format!(
        "<statistics><stats id=\"a\">{}1{}</stats></statistics>",
        "<a>".repeat(depth - 1),
        "</a>".repeat(depth - 1)
    );
    let mut xp = SummaryParser::new();
    assert_eq!(
        xp.parse(xml.as_bytes())
            .unwrap()
            .get(r.vars().next().unwrap().name),
        Some("1")
    );
}

#[test]
fn every_cut_of_a_record_is_truncated() {
    let mut p = SummaryParser::new();
    let json = xml_to_json(&fixtures()[0].1);
    // Without its very last `}` the record is whole: what follows
    // `statistics` is not read.
    assert!(p.parse(&json.as_bytes()[..json.len() - 1]).is_ok());
    for cut in 1..json.len() - 1 {
        let err = p.parse(&json.as_bytes()[..cut]).expect_err(&json[..cut]);
        assert_eq!(err.reason(), "truncated", "{err} at {cut}");
    }
    // Trailing bytes after the record are ignored.
    let trailing = format!("{json}\n\0garbage");
    assert!(p.parse(trailing.as_bytes()).is_ok());
}

#[test]
fn non_utf8_bytes_do_not_lose_the_record() {
    let mut p = SummaryParser::new();
    let r = p
        .parse(b"{\"statistics\":{\"stats_info\":{\"host\":\"a\xffb\",\"p\xfe\":1,\"port\":1094}}}")
        .unwrap();
    let got: Vec<_> = r.vars().map(|v| (v.name, v.value)).collect();
    assert_eq!(
        got,
        [
            ("info.host", "a\u{fffd}b"),
            ("info.p\u{fffd}", "1"),
            ("info.port", "1094")
        ]
    );
}

#[test]
fn parser_is_reusable_across_forms() {
    let mut p = SummaryParser::new();
    let a = p.parse(DATA_SERVER.as_bytes()).unwrap().len();
    let b = p
        .parse(br#"<statistics><stats id="poll"><att>1</att></stats></statistics>"#)
        .unwrap();
    assert_eq!(b.len(), 1);
    assert_eq!(b.get("poll.att"), Some("1"));
    assert_eq!(b.entry_count(), 0);
    let c = p.parse(DATA_SERVER.as_bytes()).unwrap();
    assert_eq!(c.len(), a);
    assert_eq!(c.get("oss.paths"), Some("2"));
    assert_eq!(c.entry_count(), 2);
    // The reference parser reads JSON with the same reader.
    let mut r = SummaryParser::new();
    assert_eq!(
        format!("{:?}", r.parse_reference(MANAGER.as_bytes()).unwrap()),
        format!("{:?}", p.parse(MANAGER.as_bytes()).unwrap())
    );
}
