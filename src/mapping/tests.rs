use super::naming::Parts;
use super::value::convert_general;
use super::*;
use crate::summary::SummaryParser;

fn mapper() -> Mapper {
    Mapper::new(
        NameTemplate::parse(DEFAULT_NAME_TEMPLATE).unwrap(),
        NameTemplate::parse(DEFAULT_GROUP_TEMPLATE).unwrap(),
    )
}

fn map(record: &str, ip: &str) -> MappedRecord {
    let mut p = SummaryParser::new();
    let r = p.parse(record.as_bytes()).unwrap();
    let mut out = MappedRecord::default();
    mapper().map(&r, ip.parse().unwrap(), &mut out);
    out
}

fn find<'m>(m: &'m MappedRecord, name: &str) -> Metric<'m> {
    m.metrics().find(|x| x.name == name).unwrap_or_else(|| {
        panic!(
            "no {name} in {:?}",
            m.metrics().map(|x| x.name).collect::<Vec<_>>()
        )
    })
}

const HEAD: &str = r#"<statistics tod="1700000100" ver="v5.5.3" src="ds1.example.org:1094" tos="1700000000" pgm="xrootd" ins="anon" pid="77" site="T2_X">"#;

#[test]
fn host_is_spoofed_from_source_ip_and_src_name() {
    let m = map(&format!("{HEAD}</statistics>"), "10.1.2.3");
    assert_eq!(m.host.spoof, "10.1.2.3:ds1.example.org");
    assert_eq!(
        (m.host.ip.as_str(), m.host.name.as_str()),
        ("10.1.2.3", "ds1.example.org")
    );
    let m = map(&format!("{HEAD}</statistics>"), "::ffff:10.1.2.3");
    assert_eq!(m.host.spoof, "10.1.2.3:ds1.example.org");
    let m = map(&format!("{HEAD}</statistics>"), "2001:db8::7");
    assert_eq!(m.host.spoof, "2001-db8--7:ds1.example.org");
    // Hostile name: no ':' (gmond splits there), no XML specials.
    let m = map(
        r#"<statistics src="a&lt;b:c&quot;:1094" pgm="xrootd"></statistics>"#,
        "10.0.0.1",
    );
    assert_eq!(m.host.spoof, "10.0.0.1:a_lt_b_c_quot_");
    // No src: dCache's host attribute, then the IP.
    let m = map(
        r#"<statistics pgm="xrootd" host="door7"></statistics>"#,
        "10.0.0.1",
    );
    assert_eq!(m.host.name, "door7");
    let m = map(r#"<statistics pgm="xrootd"></statistics>"#, "10.0.0.1");
    assert_eq!(m.host.spoof, "10.0.0.1:10.0.0.1");
}

#[test]
fn names_carry_pgm_and_instance() {
    let m = map(
        &format!("{HEAD}<stats id=\"link\"><in>5</in></stats></statistics>"),
        "10.0.0.1",
    );
    let x = find(&m, "xrootd.link.in");
    assert_eq!(
        (x.value, x.value_type(), x.slope(), x.units()),
        ("5", "double", Slope::Positive, "bytes/s")
    );
    assert_eq!(x.group, "xrootd.link");
    let m = map(
        r#"<statistics pgm="cmsd" ins="mgr" src="h:0"><stats id="link"><in>5</in></stats></statistics>"#,
        "10.0.0.1",
    );
    let x = find(&m, "cmsd.mgr.link.in");
    assert_eq!(x.group, "cmsd.mgr.link");
    assert_eq!(m.program, "cmsd mgr");
}

#[test]
fn list_entries_are_named_by_their_key() {
    let rec = format!(
        "{HEAD}<stats id=\"oss\" v=\"2\"><paths>2<stats id=\"0\"><free>40</free><lp>\"/data/\"</lp></stats><stats id=\"1\"><lp>\"/\"</lp><free>1</free></stats></paths>\
         <space>1<stats id=\"0\"><name>public</name><usg>9</usg></stats></space></stats>\
         <stats id=\"cmsm\"><node>3<stats id=\"0\"><host>n1.example</host><ref><r>1</r></ref></stats><stats id=\"1\"><host>n1.example</host><ref><r>2</r></ref></stats><stats id=\"2\"><ref><r>3</r></ref></stats></node></stats></statistics>"
    );
    let m = map(&rec, "10.0.0.1");
    // Key appears after the value it names: order does not matter.
    // Sizes come in KiB and go in bytes.
    let free = find(&m, "xrootd.oss.paths._data_.free");
    assert_eq!(
        (free.value, free.key, free.units()),
        ("40960", Some("/data/"), "bytes")
    );
    assert_eq!(find(&m, "xrootd.oss.paths._data_.lp").value, "/data/");
    assert_eq!(find(&m, "xrootd.oss.paths._.free").value, "1024");
    assert_eq!(find(&m, "xrootd.oss.paths").value, "2");
    assert_eq!(find(&m, "xrootd.oss.space.public.usg").value, "9216");
    // Same host twice: the index breaks the tie; no key at all: the index.
    assert_eq!(find(&m, "xrootd.cmsm.node.n1_example.ref.r").value, "1");
    assert_eq!(find(&m, "xrootd.cmsm.node.n1_example-1.ref.r").value, "2");
    assert_eq!(find(&m, "xrootd.cmsm.node.2.ref.r").value, "3");
    let mut title = String::new();
    free.write_title(&mut title, &m.program);
    // No parentheses: ganglia-web shows them as `\(`.
    assert_eq!(title, "xrootd: Path space free - /data/");
    let odd = format!(
        "{HEAD}<stats id=\"oss\" v=\"2\"><paths>1<stats id=\"0\"><lp>\"/d(1)/\"</lp><free>1</free></stats></paths></stats></statistics>"
    );
    let m = map(&odd, "10.0.0.1");
    let mut title = String::new();
    find(&m, "xrootd.oss.paths._d_1__.free").write_title(&mut title, &m.program);
    assert_eq!(title, "xrootd: Path space free - /d_1_/");
}

#[test]
fn sizes_in_kib_go_in_bytes_whatever_their_text() {
    let m = map(
        &format!(
            "{HEAD}<stats id=\"oss\" v=\"2\"><space>3<stats id=\"0\"><name>a</name><tot>1.5</tot><free>-3</free></stats><stats id=\"1\"><name>b</name><tot>007</tot></stats><stats id=\"2\"><name>c</name><tot>999999999999999999</tot></stats></space></stats></statistics>"
        ),
        "10.0.0.1",
    );
    assert_eq!(find(&m, "xrootd.oss.space.a.tot").value, "1536");
    assert_eq!(find(&m, "xrootd.oss.space.b.tot").value, "7168");
    // Past 2^64 bytes: the largest, not a wrap.
    assert_eq!(
        find(&m, "xrootd.oss.space.c.tot").value,
        u64::MAX.to_string()
    );
    // A negative size is rejected, not sent.
    assert!(
        m.rejected
            .iter()
            .any(|(name, _, _)| name == "oss.space.0.free"),
        "{:?}",
        m.rejected
    );
}

#[test]
fn int_values_that_wrapped_are_sent_unsigned() {
    let m = map(
        &format!(
            "{HEAD}<stats id=\"link\"><tmo>-2147483000</tmo><num>-1</num></stats><stats id=\"buff\"><mem>-5</mem></stats></statistics>"
        ),
        "10.0.0.1",
    );
    assert_eq!(find(&m, "xrootd.link.tmo").value, "2147484296");
    assert_eq!(find(&m, "xrootd.link.num").value, "4294967295");
    assert_eq!(find(&m, "xrootd.link.num").value_type(), "uint32");
    // int64 gauge keeps its sign (double).
    assert_eq!(find(&m, "xrootd.buff.mem").value, "-5");
}

#[test]
fn counters_only_ever_carry_integers() {
    let m = map(
        &format!(
            "{HEAD}<stats id=\"link\"><in>9.5</in><out>-3</out><tot>abc</tot><ctime>99999999999999999999</ctime><maxn>7</maxn></stats></statistics>"
        ),
        "10.0.0.1",
    );
    for name in [
        "xrootd.link.in",
        "xrootd.link.out",
        "xrootd.link.tot",
        "xrootd.link.ctime",
    ] {
        assert!(
            m.metrics().all(|x| x.name != name),
            "{name} must not be sent"
        );
    }
    assert_eq!(m.rejected_count, 4);
    let why: Vec<_> = m
        .rejected
        .iter()
        .map(|(v, _, b)| (v.as_str(), *b))
        .collect();
    assert_eq!(
        why,
        [
            ("link.in", BadValue::NotAnInteger),
            ("link.out", BadValue::NegativeCounter),
            ("link.tot", BadValue::NotANumber),
            ("link.ctime", BadValue::OutOfRange),
        ]
    );
    assert_eq!(find(&m, "xrootd.link.maxn").value, "7");
    for x in m.metrics().filter(|x| x.slope() == Slope::Positive) {
        assert!(
            x.value.bytes().all(|b| b.is_ascii_digit()),
            "{} = {}",
            x.name,
            x.value
        );
    }
}

#[test]
fn known_broken_values_are_forgiven() {
    let m = map(
        r#"<statistics pgm="xrootd"><stats id="cache" type="pfc"><rd><hits>12></hits></rd></stats></statistics>"#,
        "10.0.0.1",
    );
    assert_eq!(find(&m, "xrootd.cache.pfc.rd.hits").value, "12");
}

/// The cache section's `type` attribute goes into its metric names, after
/// the section (`type="rmc"`: `xrootd.cache.rmc.rd.hits`); the catalog
/// still describes them, and a record without the attribute keeps plain
/// `cache.*` names. The name cache never mixes the two.
#[test]
fn the_cache_type_is_in_the_cache_section_names() {
    let rec = |ty: &str| {
        format!(
            r#"<statistics pgm="xrootd"><stats id="cache"{ty}><rd><hits>7</hits></rd><files><opened>0</opened></files></stats><stats id="link"><in>1</in></stats></statistics>"#
        )
    };
    let mut mapper = mapper();
    let mut p = SummaryParser::new();
    let mut out = MappedRecord::default();
    for (ty, want) in [
        (r#" type="rmc""#, "xrootd.cache.rmc.rd.hits"),
        (r#" type="pfc""#, "xrootd.cache.pfc.rd.hits"),
        ("", "xrootd.cache.rd.hits"),
        (r#" type="rmc""#, "xrootd.cache.rmc.rd.hits"),
        (r#" type="a b""#, "xrootd.cache.rd.hits"),
    ] {
        let text = rec(ty);
        let r = p.parse(text.as_bytes()).unwrap();
        mapper.map(&r, "10.0.0.1".parse().unwrap(), &mut out);
        let names: Vec<&str> = out.metrics().map(|m| m.name).collect();
        assert_eq!(names, ["xrootd.pgm", want, "xrootd.link.in"], "{ty}");
        let m = find(&out, want);
        assert_eq!(
            (m.value, m.units(), m.group),
            ("7", "hits/s", "xrootd.cache")
        );
        // files.opened (always 0) is left out by its catalog name.
        assert_eq!(out.excluded.len(), 1);
    }
}

#[test]
fn unknown_variables_are_still_sent() {
    let m = map(
        r#"<statistics pgm="xrootd"><stats id="newsect"><gauge>1.25</gauge><count>42</count><word>hello world</word><bad>nan</bad></stats></statistics>"#,
        "10.0.0.1",
    );
    let g = find(&m, "xrootd.newsect.gauge");
    assert!(g.is_unknown());
    assert_eq!(
        (g.value, g.value_type(), g.slope()),
        ("1.25", "double", Slope::Both)
    );
    assert_eq!(find(&m, "xrootd.newsect.count").value, "42");
    let w = find(&m, "xrootd.newsect.word");
    assert_eq!(
        (w.value, w.value_type(), w.slope()),
        ("hello world", "string", Slope::Zero)
    );
    // NaN is not a number gmetad can store, and as text it would turn a
    // number metric into a string one: refused (issue 28).
    assert!(m.metrics().all(|x| x.name != "xrootd.newsect.bad"));
    assert_eq!(m.rejected_count, 1);
}

#[test]
fn text_is_sanitised_and_capped() {
    let long = "x".repeat(1000);
    let m = map(
        &format!(
            "<statistics pgm=\"xrootd\"><stats id=\"ofs\"><role>&lt;meta\" manager&gt;</role></stats><stats id=\"x\"><s>{long}</s><bad:name>1</bad:name></stats></statistics>"
        ),
        "10.0.0.1",
    );
    assert_eq!(find(&m, "xrootd.ofs.role").value, "_lt;meta_ manager_gt;");
    assert_eq!(find(&m, "xrootd.x.s").value.len(), sanitize::MAX_VALUE);
    let hostile = m.metrics().find(|x| x.var.starts_with("x.bad")).unwrap();
    assert!(
        hostile.sanitized && sanitize::is_clean_name(hostile.name),
        "{}",
        hostile.name
    );
}

#[test]
fn derived_cpu_and_uptime() {
    let m = map(
        &format!(
            "{HEAD}<stats id=\"proc\"><usr><s>12</s><u>345678</u></usr><sys><s>3</s><u>999999</u></sys></stats></statistics>"
        ),
        "10.0.0.1",
    );
    assert_eq!(find(&m, "xrootd.proc.cpu.usr").value, "12345");
    assert_eq!(find(&m, "xrootd.proc.cpu.sys").value, "3999");
    let total = find(&m, "xrootd.proc.cpu.total");
    assert_eq!(
        (total.value, total.slope(), total.units()),
        ("16344", Slope::Positive, "ms/s")
    );
    let up = find(&m, "xrootd.uptime");
    assert_eq!((up.value, up.group), ("100", "xrootd.info"));
    // The raw halves are left out by default (they are the derived
    // metrics' inputs all the same), and so is the report time; what
    // identifies the run is text.
    let names: Vec<&str> = m.metrics().map(|x| x.name).collect();
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("xrootd.proc.usr") || *n == "xrootd.tod"),
        "{names:?}"
    );
    assert_eq!(m.excluded.len(), 5);
    assert_eq!(find(&m, "xrootd.pid").value_type(), "string");
    assert_eq!(find(&m, "xrootd.tos").value_type(), "string");
    // With nothing excluded, they are sent: the microseconds as a gauge.
    let mut p = SummaryParser::new();
    let text =
        format!("{HEAD}<stats id=\"proc\"><usr><s>12</s><u>345678</u></usr></stats></statistics>");
    let r = p.parse(text.as_bytes()).unwrap();
    let mut all = MappedRecord::default();
    mapper()
        .with_filter(VarFilter {
            include: Vec::new(),
            exclude: Vec::new(),
        })
        .map(&r, "10.0.0.1".parse().unwrap(), &mut all);
    assert_eq!(find(&all, "xrootd.proc.usr.u").slope(), Slope::Both);
    assert_eq!(find(&all, "xrootd.tod").value, "1700000100");
    assert!(all.excluded.is_empty());
}

#[test]
fn templates() {
    assert!(NameTemplate::parse("{pgm}.{nope}").is_err());
    assert!(NameTemplate::parse("{pgm").is_err());
    assert!(NameTemplate::parse("a b.{var}").is_err());
    let t = NameTemplate::parse("xrd_{site}.{pgm}.{ins}.{var}").unwrap();
    let mut out = String::new();
    t.expand(
        &mut out,
        &Parts {
            pgm: "xrootd",
            ins: "",
            site: "T2",
            section: "link",
            var: "link.in",
        },
    );
    assert_eq!(out, "xrd_T2.xrootd.link.in");
    out.clear();
    let t = NameTemplate::parse("{site}.{var}").unwrap();
    t.expand(
        &mut out,
        &Parts {
            pgm: "x",
            ins: "",
            site: "",
            section: "s",
            var: "a.b",
        },
    );
    assert_eq!(out, "a.b");
}

#[test]
fn mapper_reuses_buffers_across_records() {
    let mut p = SummaryParser::new();
    let mut mp = mapper();
    let mut out = MappedRecord::default();
    let first = format!("{HEAD}<stats id=\"link\"><in>1</in><out>2</out></stats></statistics>");
    let r = p.parse(first.as_bytes()).unwrap();
    mp.map(&r, "10.0.0.1".parse().unwrap(), &mut out);
    let n = out.len();
    let r = p
        .parse(br#"<statistics pgm="cmsd"><stats id="link"><in>3</in></stats></statistics>"#)
        .unwrap();
    mp.map(&r, "10.0.0.2".parse().unwrap(), &mut out);
    assert!(n > out.len());
    assert_eq!(
        out.metrics().map(|m| (m.name, m.value)).collect::<Vec<_>>(),
        [("cmsd.pgm", "cmsd"), ("cmsd.link.in", "3")]
    );
}

/// Every metric of a mapping as comparable text (name keys are per mapper).
fn rows(m: &MappedRecord) -> Vec<String> {
    m.metrics()
        .map(|x| format!("{:?}", Metric { name_key: 0, ..x }))
        .collect()
}

#[test]
fn cached_names_follow_context_and_list_keys() {
    // One long-lived mapper (as in the gateway) against a fresh one per
    // record (nothing cached): same result for every record, in any order.
    let records = [
        format!(
            r#"{HEAD}<stats id="link"><in>5</in></stats><stats id="oss"><paths>1<stats id="0"><lp>"/data/"</lp><free>7</free></stats></paths></stats></statistics>"#
        ),
        // Another instance and site: other names for the same variables.
        r#"<statistics tod="1" tos="0" pgm="cmsd" ins="mgr" site="T1"><stats id="link"><in>6</in></stats></statistics>"#.to_string(),
        // The list entry changed its key: names follow the key, not the index.
        format!(
            r#"{HEAD}<stats id="oss"><paths>1<stats id="0"><lp>"/data2/"</lp><free>8</free></stats></paths></stats></statistics>"#
        ),
        // Two entries sharing a key, then one of them renamed.
        format!(
            r#"{HEAD}<stats id="oss"><paths>2<stats id="0"><lp>"/d/"</lp><free>1</free></stats><stats id="1"><lp>"/d/"</lp><free>2</free></stats></paths></stats></statistics>"#
        ),
        format!(
            r#"{HEAD}<stats id="oss"><paths>2<stats id="0"><lp>"/e/"</lp><free>1</free></stats><stats id="1"><lp>"/d/"</lp><free>2</free></stats></paths></stats></statistics>"#
        ),
        // An unknown variable, sent as text, then as a number.
        format!(r#"{HEAD}<stats id="new"><x>abc</x></stats></statistics>"#),
        format!(r#"{HEAD}<stats id="new"><x>12</x></stats></statistics>"#),
    ];
    let mut shared = mapper();
    let mut parser = SummaryParser::new();
    for round in 0..2 {
        for text in &records {
            let r = parser.parse(text.as_bytes()).unwrap();
            let mut cached = MappedRecord::default();
            shared.map(&r, "10.0.0.1".parse().unwrap(), &mut cached);
            let fresh = map(text, "10.0.0.1");
            assert_eq!(rows(&cached), rows(&fresh), "round {round}: {text}");
        }
    }
    let m = map(&records[4], "10.0.0.1");
    assert!(m.metrics().any(|x| x.name == "xrootd.oss.paths._e_.free"));
    assert!(m.metrics().any(|x| x.name == "xrootd.oss.paths._d_.free"));
}

#[test]
fn name_keys_are_stable_and_distinct() {
    let mut mapper = mapper();
    let mut parser = SummaryParser::new();
    let text = format!(r#"{HEAD}<stats id="link"><in>5</in><out>6</out></stats></statistics>"#);
    let mut keys = Vec::new();
    for _ in 0..2 {
        let r = parser.parse(text.as_bytes()).unwrap();
        let mut out = MappedRecord::default();
        mapper.map(&r, "10.0.0.1".parse().unwrap(), &mut out);
        keys.push(
            out.metrics()
                .map(|m| (m.name.to_string(), m.name_key))
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(keys[0], keys[1]);
    let mut distinct: Vec<u64> = keys[0].iter().map(|(_, k)| *k).collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), keys[0].len());
}

#[test]
fn a_flood_of_invented_names_keeps_the_cache_bounded() {
    let mut mapper = mapper();
    let mut parser = SummaryParser::new();
    let mut out = MappedRecord::default();
    for i in 0..(MAX_CACHED_NAMES / 100 + 10) {
        let vars: String = (0..100)
            .map(|j| format!("<v{i}x{j}>1</v{i}x{j}>"))
            .collect();
        let text = format!(r#"{HEAD}<stats id="s">{vars}</stats></statistics>"#);
        let r = parser.parse(text.as_bytes()).unwrap();
        mapper.map(&r, "10.0.0.1".parse().unwrap(), &mut out);
        assert!(mapper.names.len() <= MAX_CACHED_NAMES);
        assert_eq!(
            out.metrics()
                .filter(|m| m.name.starts_with("xrootd.s.v"))
                .count(),
            100
        );
    }
}

proptest::proptest! {
    /// The verbatim path for plain integers sends exactly what parsing and
    /// formatting would, for every kind.
    #[test]
    fn plain_integers_go_out_as_formatting_gives_them(text in "(0|-?[0-9]{1,21}| [0-9]{1,3}|0[0-9]{1,3})") {
        for kind in [Kind::Counter32, Kind::Gauge32, Kind::Counter64, Kind::Gauge64, Kind::Timestamp] {
            let (mut fast, mut general) = (String::new(), String::new());
            let a = convert(&mut fast, Some(kind), &text);
            let b = convert_general(&mut general, Some(kind), &text);
            proptest::prop_assert_eq!((a, &fast), (b, &general), "{:?} {:?}", kind, text);
        }
    }
}

#[test]
fn name_of_gives_the_names_the_mapper_sends_cut_to_max_name() {
    let long = "a".repeat(MAX_NAME);
    let template = format!("{{pgm}}.{long}.{{var}}");
    let mut mp = Mapper::new(
        NameTemplate::parse(&template).unwrap(),
        NameTemplate::parse(DEFAULT_GROUP_TEMPLATE).unwrap(),
    );
    let mut p = SummaryParser::new();
    let record = format!("{HEAD}<stats id=\"link\"><in>1</in></stats></statistics>");
    let r = p.parse(record.as_bytes()).unwrap();
    let mut out = MappedRecord::default();
    mp.map(&r, "10.0.0.1".parse().unwrap(), &mut out);
    let sent = out
        .metrics()
        .find(|m| m.name.starts_with("xrootd.a"))
        .unwrap();
    let header = HeaderParts::new(Some("xrootd"), Some("anon"), Some("T2_X"));
    let named = NameTemplate::parse(&template)
        .unwrap()
        .name_of(&header, "link.in");
    assert_eq!(named.len(), MAX_NAME);
    assert_eq!(named, sent.name);
    // Short names are not touched.
    let t = NameTemplate::parse(DEFAULT_NAME_TEMPLATE).unwrap();
    assert_eq!(t.name_of(&header, "link.in"), "xrootd.link.in");
}

/// A real XCache record of xrootd 6.1.0: the variables XRootD never fills
/// are left out and counted as exclusions (the names read from the
/// record's text), and `include` brings one back.
#[test]
fn always_zero_variables_of_a_real_record_are_counted_exclusions() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/records-5.9/pfc-6.1.0-xml-1.xml"
    ))
    .unwrap();
    // In the record: <files><opened>..<full> (6), <store> used/min/max (3),
    // <pass>..<cnt>, <opcl>..<defero>, <aio><num>..<max>, ofs <ser>,
    // poll <int>, http_plugin <100>; and the 7 report-time/CPU halves.
    for tag in [
        "<opened>", "<used>", "<cnt>", "<defero>", "<ser>", "<int>", "<100>",
    ] {
        assert!(text.contains(tag), "{tag}");
    }
    let mut p = SummaryParser::new();
    let r = p.parse(text.as_bytes()).unwrap();
    let mut out = MappedRecord::default();
    mapper().map(&r, "127.0.0.1".parse().unwrap(), &mut out);
    let vars: Vec<&str> = r.vars().map(|v| v.name).collect();
    let mut excluded: Vec<&str> = out.excluded.iter().map(|&j| vars[j as usize]).collect();
    excluded.sort_unstable();
    let mut want = vec![
        "tod",
        "sgen.toe",
        "proc.usr.s",
        "proc.usr.u",
        "proc.sys.s",
        "proc.sys.u",
        "cache.files.opened",
        "cache.files.closed",
        "cache.files.new",
        "cache.files.del",
        "cache.files.now",
        "cache.files.full",
        "cache.store.used",
        "cache.store.min",
        "cache.store.max",
        "cache.pass.cnt",
        "cache.opcl.defero",
        "xrootd.aio.num",
        "xrootd.aio.max",
        "ofs.ser",
        "poll.int",
        "http_plugin.response.100",
    ];
    want.sort_unstable();
    assert_eq!(excluded, want);
    assert!(out.metrics().all(|m| m.var != "cache.pfc.files.opened"));
    assert!(out.metrics().any(|m| m.var == "cache.pfc.store.size"));

    let mut all = MappedRecord::default();
    mapper()
        .with_filter(VarFilter {
            include: vec![Glob::parse("cache.files.*").unwrap()],
            exclude: VarFilter::default().exclude,
        })
        .map(&r, "127.0.0.1".parse().unwrap(), &mut all);
    assert_eq!(all.excluded.len(), want.len() - 6);
    assert_eq!(find(&all, "xrootd.pfc.cache.pfc.files.opened").value, "0");
}

/// What `std::to_string` of a plug-in's double gives for nan and inf
/// (glibc's `%f`: `nan`, `-nan`, `inf`, `-inf`) is refused per value,
/// counted, and the rest of the record kept.
#[test]
fn nan_and_inf_are_refused_per_value() {
    let rec = format!(
        "{HEAD}<stats id=\"myplug\"><a>nan</a><b>-nan</b><c>inf</c><d>-inf</d><e>1.5</e><f>busy</f></stats><stats id=\"link\"><in>nan</in><num>inf</num><maxn>7</maxn></stats></statistics>"
    );
    let m = map(&rec, "10.0.0.1");
    assert_eq!(m.rejected_count, 6, "{:?}", m.rejected);
    assert!(
        m.rejected.iter().all(|(_, _, b)| *b == BadValue::NotFinite),
        "{:?}",
        m.rejected
    );
    assert_eq!(find(&m, "xrootd.myplug.e").value, "1.5");
    assert_eq!(find(&m, "xrootd.myplug.f").value_type(), "string");
    assert_eq!(find(&m, "xrootd.link.maxn").value, "7");
    for gone in ["a", "b", "c", "d"] {
        let name = format!("xrootd.myplug.{gone}");
        assert!(m.metrics().all(|x| x.name != name), "{name} sent");
    }
}

/// Issue 42, item 1: a metric name is a file of gmetad's (`NAME.rrd`
/// under the host's directory), so it keeps the one rule
/// (`ganglia/path_name.rs`) whatever the template puts first: what comes
/// before its first letter or digit is dropped. Each change is handed to
/// the engine once, when the name is cached. (A name of nothing usable,
/// not sent, takes a variable of only punctuation, which only a JSON
/// record can name: `path_name`'s own table holds the fixer to it.)
#[test]
fn metric_names_keep_the_path_rule_whatever_the_template() {
    let mut mapper = Mapper::new(
        NameTemplate::parse("{site}.{var}").unwrap(),
        NameTemplate::parse(DEFAULT_GROUP_TEMPLATE).unwrap(),
    );
    let mut p = SummaryParser::new();
    let mut out = MappedRecord::default();
    let renamed = |mapper: &mut Mapper| {
        let mut all = Vec::new();
        while let Some(r) = mapper.take_renamed() {
            all.push(r);
        }
        all.into_iter().find(|(_, raw, _)| raw == "link.in")
    };
    for (site, want) in [
        ("T2_X", "T2_X.link.in"),
        ("__SummaryInfo__", "SummaryInfo__.link.in"),
        ("..", "link.in"),
        ("-", "link.in"),
    ] {
        let text = format!(
            "<statistics pgm=\"xrootd\" site=\"{site}\"><stats id=\"link\"><in>5</in></stats></statistics>"
        );
        let r = p.parse(text.as_bytes()).unwrap();
        mapper.map(&r, "10.0.0.1".parse().unwrap(), &mut out);
        let names: Vec<&str> = out
            .metrics()
            .map(|m| m.name)
            .filter(|n| n.ends_with("link.in"))
            .collect();
        assert_eq!(names, [want], "{site:?}");
        let change =
            (site != "T2_X").then(|| (path_name::Change::Leading, "link.in".into(), want.into()));
        assert_eq!(renamed(&mut mapper), change, "{site:?}");
        // Mapped again: the cached name, not handed over again.
        mapper.map(&r, "10.0.0.1".parse().unwrap(), &mut out);
        assert_eq!(renamed(&mut mapper), None);
    }
    // No real record's name is changed: every capture in tests/data
    // (5.5 XML, 6.1 XML and JSON) maps with none handed over.
    let mut mapper = self::mapper();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut mapped = 0;
    for dir in ["records", "records-5.9"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if !path.extension().is_some_and(|e| e == "xml" || e == "json") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap().replace('\n', "");
            let Ok(r) = p.parse(text.as_bytes()) else {
                continue;
            };
            mapper.map(&r, "10.0.0.1".parse().unwrap(), &mut out);
            assert_eq!(mapper.take_renamed(), None, "{}", path.display());
            mapped += 1;
        }
    }
    assert!(mapped > 20, "{mapped} captures");
    // Characters replaced in a variable's name are a change too.
    let r = p
        .parse(b"<statistics pgm=\"xrootd\"><stats id=\"x\"><bad:name>1</bad:name></stats></statistics>")
        .unwrap();
    mapper.map(&r, "10.0.0.1".parse().unwrap(), &mut out);
    let mut all = Vec::new();
    while let Some(r) = mapper.take_renamed() {
        all.push(r);
    }
    assert_eq!(
        all,
        [(
            path_name::Change::Replaced,
            "x.bad:name".to_string(),
            "xrootd.x.bad_name".to_string()
        )]
    );
}
