use super::*;

fn flat(record: &str) -> Vec<(String, String)> {
    let mut p = SummaryParser::new();
    let r = p
        .parse(record.as_bytes())
        .unwrap_or_else(|e| panic!("{e}: {record}"));
    r.vars()
        .map(|v| (v.name.to_string(), v.value.to_string()))
        .collect()
}

/// Each input fails to parse, for its reason. Returns the parser (one
/// for all of them, as a receive task has) for more checks.
fn assert_errors(cases: &[(&[u8], &str)]) -> SummaryParser {
    let mut p = SummaryParser::new();
    for (input, reason) in cases {
        let text = String::from_utf8_lossy(input);
        let err = p.parse(input).expect_err(&text);
        assert_eq!(err.reason(), *reason, "{err} for {text:?}");
    }
    p
}

/// Each record flattens to its variables, in order.
fn assert_flat(cases: &[(&str, &[(&str, &str)])]) {
    for (record, expected) in cases {
        assert_eq!(flat(record), pairs(expected), "record: {record}");
    }
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// (record, expected variables in order)
const CASES: &[(&str, &[(&str, &str)])] = &[
    // Header attributes in any order (not xrootd's here), all kept in
    // document order (site too).
    (
        r#"<statistics pgm="xrootd" ins="anon" pid="4242" site="T2_XY" tod="1700000010" ver="v5.5.3" src="ds.example.org:1094" tos="1700000000"></statistics>"#,
        &[
            ("pgm", "xrootd"),
            ("ins", "anon"),
            ("pid", "4242"),
            ("site", "T2_XY"),
            ("tod", "1700000010"),
            ("ver", "v5.5.3"),
            ("src", "ds.example.org:1094"),
            ("tos", "1700000000"),
        ],
    ),
    // Sections, nested tags, stats ids.
    (
        r#"<statistics tod="1" pgm="xrootd"><stats id="link"><num>3</num><in>1024</in></stats><stats id="xrootd"><num>7</num><ops><open>2</open><rd>99</rd></ops></stats></statistics>"#,
        &[
            ("tod", "1"),
            ("pgm", "xrootd"),
            ("link.num", "3"),
            ("link.in", "1024"),
            ("xrootd.num", "7"),
            ("xrootd.ops.open", "2"),
            ("xrootd.ops.rd", "99"),
        ],
    ),
    // Lists: a count before children gives the parent its value; quotes stripped.
    (
        r#"<statistics><stats id="oss" v="2"><paths>2<stats id="0"><lp>"/data/"</lp><rp>"/srv/data/"</rp><tot>100</tot><free>40</free><ino>9</ino><ifr> 8</ifr></stats><stats id="1"><lp>"/mem/"</lp><free>1</free></stats></paths><space>0</space></stats></statistics>"#,
        &[
            ("oss.paths", "2"),
            ("oss.paths.0.lp", "/data/"),
            ("oss.paths.0.rp", "/srv/data/"),
            ("oss.paths.0.tot", "100"),
            ("oss.paths.0.free", "40"),
            ("oss.paths.0.ino", "9"),
            ("oss.paths.0.ifr", "8"),
            ("oss.paths.1.lp", "/mem/"),
            ("oss.paths.1.free", "1"),
            ("oss.space", "0"),
        ],
    ),
    // cmsm node list with nested ref.
    (
        r#"<statistics pgm="cmsd"><stats id="cmsm"><role>manager</role><sel><t>5</t><r>3</r><w>2</w></sel><node>2<stats id="0"><host>a.example</host><role>server</role><run>a</run><ref><r>1</r><w>0</w></ref></stats><stats id="1"><host>a.example</host><ref><r>4</r><w>1</w></ref></stats></node></stats></statistics>"#,
        &[
            ("pgm", "cmsd"),
            ("cmsm.role", "manager"),
            ("cmsm.sel.t", "5"),
            ("cmsm.sel.r", "3"),
            ("cmsm.sel.w", "2"),
            ("cmsm.node", "2"),
            ("cmsm.node.0.host", "a.example"),
            ("cmsm.node.0.role", "server"),
            ("cmsm.node.0.run", "a"),
            ("cmsm.node.0.ref.r", "1"),
            ("cmsm.node.0.ref.w", "0"),
            ("cmsm.node.1.host", "a.example"),
            ("cmsm.node.1.ref.r", "4"),
            ("cmsm.node.1.ref.w", "1"),
        ],
    ),
    // cmsm frq: counts before children at two levels.
    (
        r#"<statistics><stats id="cmsm"><frq><add>10<d>2</d></add><rsp>7<m>1</m></rsp><lf>3</lf></frq></stats></statistics>"#,
        &[
            ("cmsm.frq.add", "10"),
            ("cmsm.frq.add.d", "2"),
            ("cmsm.frq.rsp", "7"),
            ("cmsm.frq.rsp.m", "1"),
            ("cmsm.frq.lf", "3"),
        ],
    ),
    // Values with spaces kept whole; empty elements kept with an empty value.
    (
        r#"<statistics><stats id="ofs"><role>meta manager</role><opr>0</opr><x></x><y/></stats></statistics>"#,
        &[
            ("ofs.role", "meta manager"),
            ("ofs.opr", "0"),
            ("ofs.x", ""),
            ("ofs.y", ""),
        ],
    ),
    // Legacy toe on the end tag (2009 edition).
    (
        r#"<statistics tod="100" ver="20090202" src="old:1094" tos="50" pgm="xrootd" ins="anon" pid="9"><stats id="buff"><reqs>1</reqs></stats></statistics toe="101">"#,
        &[
            ("tod", "100"),
            ("ver", "20090202"),
            ("src", "old:1094"),
            ("tos", "50"),
            ("pgm", "xrootd"),
            ("ins", "anon"),
            ("pid", "9"),
            ("buff.reqs", "1"),
            ("toe", "101"),
        ],
    ),
    // sgen.toe (current form).
    (
        r#"<statistics><stats id="sgen"><as>0</as><et>1</et><toe>1700000011</toe></stats></statistics>"#,
        &[
            ("sgen.as", "0"),
            ("sgen.et", "1"),
            ("sgen.toe", "1700000011"),
        ],
    ),
    // xrootd 5.0.0-5.6.9, any proxy cache (pfc or rmc): `<rd><hits>N></hits>`
    // (XrdPosixConfig.cc:566 at v5.6.9, fixed in 5.7.0) must not poison the rest.
    (
        r#"<statistics><stats id="cache" type="rmc"><prerd><in>0</in><hits>0</hits><miss>0</miss></prerd><rd><in>5</in><out>9</out><hits>3></hits><miss>2</miss></rd></stats></statistics>"#,
        &[
            ("cache.prerd.in", "0"),
            ("cache.prerd.hits", "0"),
            ("cache.prerd.miss", "0"),
            ("cache.rd.in", "5"),
            ("cache.rd.out", "9"),
            ("cache.rd.hits", "3"),
            ("cache.rd.miss", "2"),
        ],
    ),
    // SSI: `<mdb>0</mdb</rsp>` closes both elements.
    (
        r#"<statistics><stats id="ssi"><rsp><bad>0</bad><mdb>0</mdb</rsp><res><add>1</add></res></stats></statistics>"#,
        &[
            ("ssi.rsp.bad", "0"),
            ("ssi.rsp.mdb", "0"),
            ("ssi.res.add", "1"),
        ],
    ),
    // 6.0 http plugin: numeric tag names.
    (
        r#"<statistics><stats id="http_plugin"><status><200>12</200><404>1</404></status></stats></statistics>"#,
        &[
            ("http_plugin.status.200", "12"),
            ("http_plugin.status.404", "1"),
        ],
    ),
    // dCache door: other attribute order, extra host attribute, pretty-printed.
    (
        "<statistics pgm=\"xrootd\" host=\"door1\" tod='5' ins=\"anon\">\n  <stats id=\"link\">\n    <num> 4 </num>\n  </stats>\n</statistics>\n",
        &[
            ("pgm", "xrootd"),
            ("host", "door1"),
            ("tod", "5"),
            ("ins", "anon"),
            ("link.num", "4"),
        ],
    ),
    // XML declaration, comments, DOCTYPE with an entity: nothing expanded.
    (
        r#"<?xml version="1.0"?><!DOCTYPE statistics [<!ENTITY x "boom">]><!-- c --><statistics><stats id="info"><host>a&x;b</host></stats></statistics>"#,
        &[("info.host", "a&x;b")],
    ),
    // Trailing bytes after the record are ignored.
    (
        "<statistics><stats id=\"poll\"><att>1</att></stats></statistics>\n\0",
        &[("poll.att", "1")],
    ),
    // Unmatched stray end tag is ignored.
    (
        r#"<statistics><stats id="poll"><att>1</att></bogus><en>2</en></stats></statistics>"#,
        &[("poll.att", "1"), ("poll.en", "2")],
    ),
];

#[test]
fn table_of_records() {
    assert_flat(CASES);
}

#[test]
fn list_entries_carry_list_id_and_field() {
    let mut p = SummaryParser::new();
    let r = p
        .parse(br#"<statistics><stats id="oss"><paths>1<stats id="0"><lp>"/d/"</lp><free>4</free></stats></paths><space>1<stats id="0"><name>public</name></stats></space></stats></statistics>"#)
        .unwrap();
    let vars: Vec<_> = r.vars().collect();
    assert_eq!(vars[0].name, "oss.paths");
    assert_eq!(vars[0].entry, None);
    let free = vars.iter().find(|v| v.name == "oss.paths.0.free").unwrap();
    assert_eq!(
        free.entry,
        Some(ListEntry {
            index: 0,
            list: "oss.paths",
            id: "0",
            field: "free"
        })
    );
    let name = vars.iter().find(|v| v.name == "oss.space.0.name").unwrap();
    assert_eq!(name.entry.unwrap().index, 1);
    assert_eq!(name.entry.unwrap().list, "oss.space");
    assert_eq!(r.entry_count(), 2);
}

#[test]
fn header_reads_attributes_and_either_toe() {
    let mut p = SummaryParser::new();
    let r = p
        .parse(br#"<statistics tod="2" ver="v5" src="h:1094" tos="1" pgm="cmsd" ins="mgr" pid="7" site="S"><stats id="sgen"><toe>3</toe></stats></statistics>"#)
        .unwrap();
    let h = r.header();
    assert_eq!(
        (
            h.tod, h.ver, h.src, h.tos, h.pgm, h.ins, h.pid, h.site, h.toe
        ),
        (
            Some("2"),
            Some("v5"),
            Some("h:1094"),
            Some("1"),
            Some("cmsd"),
            Some("mgr"),
            Some("7"),
            Some("S"),
            Some("3")
        )
    );
    let r = p
        .parse(br#"<statistics tod="2"></statistics toe="9">"#)
        .unwrap();
    assert_eq!(r.header().toe, Some("9"));
}

#[test]
fn errors_say_what_is_wrong() {
    let mut p = assert_errors(&[
        (b"", "empty"),
        (b"  \n", "empty"),
        (b"<html><body/></html>", "not_statistics"),
        (b"hello <statistics/>", "not_statistics"),
        (b"</statistics>", "not_statistics"),
        (b"<!-- only a comment -->", "not_statistics"),
        (
            br#"<statistics tod="1"><stats id="link"><num>1</num>"#,
            "truncated",
        ),
        (br#"<statistics><stats id="link"><num>12"#, "truncated"),
        (br#"<statistics><stats id="link"><num"#, "malformed"),
    ]);
    let deep = format!("<statistics>{}", "<a>".repeat(40));
    assert_eq!(p.parse(deep.as_bytes()).unwrap_err().reason(), "too_deep");
}

#[test]
fn non_utf8_bytes_do_not_lose_the_record() {
    let mut p = SummaryParser::new();
    let r = p
        .parse(b"<statistics><stats id=\"info\"><host>a\xffb</host><port>1094</port></stats></statistics>")
        .unwrap();
    assert_eq!(r.get("info.host"), Some("a\u{fffd}b"));
    assert_eq!(r.get("info.port"), Some("1094"));
}

#[test]
fn parser_is_reusable_across_datagrams() {
    let mut p = SummaryParser::new();
    let a = p
        .parse(br#"<statistics><stats id="link"><num>1</num></stats></statistics>"#)
        .unwrap()
        .len();
    let b = p
        .parse(br#"<statistics><stats id="poll"><att>1</att><en>2</en></stats></statistics>"#)
        .unwrap();
    assert_eq!((a, b.len()), (1, 2));
    assert_eq!(b.get("poll.en"), Some("2"));
    assert_eq!(b.get("link.num"), None);
}

/// Every token of the fast scanner, or None where it hands over to quick-xml.
fn fast_tokens(text: &str) -> Option<Vec<xml::Token>> {
    let mut t = xml::FastTokens::new(text);
    let mut out = Vec::new();
    loop {
        match xml::Tokens::next(&mut t) {
            Ok(xml::Token::Eof) => return Some(out),
            Ok(tok) => out.push(tok),
            Err(_) => return None,
        }
    }
}

/// quick-xml's tokens, up to the first error, merged the way the flattener
/// reads them (adjacent text pieces are one value).
fn reference_tokens(text: &str) -> Vec<xml::Token> {
    let mut t = xml::QuickXmlTokens::new(text);
    let mut out: Vec<xml::Token> = Vec::new();
    while let Ok(tok) = xml::Tokens::next(&mut t) {
        match (out.last_mut(), tok) {
            (_, xml::Token::Eof) => break,
            (Some(xml::Token::Text { end, .. }), xml::Token::Text { end: e, .. }) => *end = e,
            (_, tok) => out.push(tok),
        }
    }
    out
}

#[test]
fn real_records_take_the_fast_path() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/records");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "xml") {
            let text = std::fs::read_to_string(&path).unwrap();
            let fast = fast_tokens(&text).unwrap_or_else(|| panic!("{path:?} fell back"));
            assert_eq!(fast, reference_tokens(&text), "{path:?}");
            seen += 1;
        }
    }
    assert!(seen >= 11, "{seen} records");
}

#[test]
fn the_fast_path_hands_over_what_it_does_not_read() {
    for text in [
        "<?xml version=\"1.0\"?><statistics/>",
        "<statistics><!-- c --></statistics>",
        "<statistics><a>x &amp; y</a></statistics>",
        "<statistics><a><![CDATA[1]]></a></statistics>",
        "\u{feff}<statistics/>",
        "<statistics><a",
        "<statistics>< a>1</a></statistics>",
        "<statistics></ a></statistics>",
    ] {
        assert_eq!(fast_tokens(text), None, "{text:?}");
        // ... and the record still parses exactly as quick-xml reads it:
        // the same variables, or the same error.
        let (mut fast, mut reference) = (SummaryParser::new(), SummaryParser::new());
        let a = fast.parse(text.as_bytes()).map(|r| format!("{r:?}"));
        let b = reference
            .parse_reference(text.as_bytes())
            .map(|r| format!("{r:?}"));
        let show = |r: Result<String, ParseError>| r.map_err(|e| e.to_string());
        assert_eq!(show(a), show(b), "{text:?}");
    }
}

/// Record-shaped text: fragments real records have, and the ones that trip parsers.
fn fragment() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    prop_oneof![
        Just("<statistics tod=\"1\" pgm=\"xrootd\">".to_string()),
        Just("</statistics>".to_string()),
        Just("<stats id=\"link\">".to_string()),
        Just("<stats id='0'>".to_string()),
        Just("</stats>".to_string()),
        Just("<a>".to_string()),
        Just("</a>".to_string()),
        Just("<b/>".to_string()),
        Just("<b />".to_string()),
        Just("<a x=\">\">".to_string()),
        Just("</a y='>'>".to_string()),
        Just("</mdb</rsp>".to_string()),
        Just("<200>".to_string()),
        Just("0>".to_string()),
        Just("\"/data/\"".to_string()),
        Just("&amp;".to_string()),
        Just("<!-- c -->".to_string()),
        Just("<?pi?>".to_string()),
        Just("<".to_string()),
        Just(">".to_string()),
        Just("\"".to_string()),
        Just("'".to_string()),
        Just("/".to_string()),
        "[ a-z0-9\t\n]{0,6}",
        "\\PC{0,4}",
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 3000, ..Default::default() })]

    /// Wherever the fast scanner reads a text, it reads it as quick-xml does,
    /// and the parser's result is the reference flattener's.
    #[test]
    fn fast_path_equals_quick_xml(parts in proptest::collection::vec(fragment(), 0..24)) {
        let text = parts.concat();
        if let Some(fast) = fast_tokens(&text) {
            proptest::prop_assert_eq!(fast, reference_tokens(&text));
        }
        // Text that starts with `{` is the JSON form (tests/gmond/json.rs holds
        // that path to its own reference); the XML reference reads XML only.
        if is_json(text.as_bytes()) {
            return Ok(());
        }
        let mut parser = SummaryParser::new();
        let got = parser.parse(text.as_bytes()).map(|r| format!("{r:?}"));
        let mut reference = Scratch::default();
        let want = xml::flatten_reference(&text, &mut reference).map(|()| {
            format!("{:?}", SummaryRecord {
                text: &text,
                owned: "",
                names: &reference.names,
                slots: &reference.slots,
                entries: &reference.entries,
                header_len: reference.header_len,
                cache_type: reference.cache_type.of(&text),
                sections: &reference.sections,
            })
        });
        proptest::prop_assert_eq!(got, want);
    }
}

pub(crate) mod json;
