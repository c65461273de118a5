//! A real xrootd 6.1.0's JSON records (tests/data/records-5.9) map as its
//! XML records of the same intervals do, with what XRootD's source says
//! they count. Into a real gmond: tests/gmond/json.rs.

/// Records of a real xrootd 6.1.0 (built from XRootD's source,
/// tests/data/records-5.9/README.md says how), mapped as the gateway maps
/// them: name -> (value, slope).
fn mapped_6_1(file: &str) -> std::collections::BTreeMap<String, (String, String)> {
    use xrd2ganglia::mapping::{
        DEFAULT_GROUP_TEMPLATE, DEFAULT_NAME_TEMPLATE, MappedRecord, Mapper, NameTemplate,
    };
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/records-5.9")
        .join(file);
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut parser = xrd2ganglia::summary::SummaryParser::new();
    let record = parser
        .parse(&data)
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut mapper = Mapper::new(
        NameTemplate::parse(DEFAULT_NAME_TEMPLATE).unwrap(),
        NameTemplate::parse(DEFAULT_GROUP_TEMPLATE).unwrap(),
    );
    let mut out = MappedRecord::default();
    mapper.map(&record, "127.0.0.1".parse().unwrap(), &mut out);
    super::records::all_known(&out, file);
    out.metrics()
        .map(|m| {
            let slope = m.slope().as_str().to_string();
            (m.name.to_string(), (m.value.to_string(), slope))
        })
        .collect()
}

#[test]
fn a_real_xrootd_6_1_sends_json_the_gateway_maps_as_its_xml() {
    // What XRootD's source says http_plugin counts (src/XrdHttp/XrdHttpMon.cc
    // :29-72 in v6.1.0): requests by verb and responses by status, each a
    // running count, so a counter (slope positive) in Ganglia.
    const VERBS: [&str; 13] = [
        "Unknown",
        "Malformed",
        "GET",
        "HEAD",
        "PUT",
        "OPTIONS",
        "PATCH",
        "DELETE",
        "PROPFIND",
        "MKCOL",
        "MOVE",
        "POST",
        "COPY",
    ];
    const STATUSES: [&str; 21] = [
        "100", "200", "201", "202", "206", "207", "302", "307", "400", "401", "403", "404", "405",
        "409", "416", "423", "500", "502", "504", "507", "OTHERS",
    ];
    for n in ["idle", "1", "2", "3"] {
        // One interval of `xrd.report ... all json all`: the XML record
        // and the JSON datagram xrootd sent in the same millisecond.
        let xml = mapped_6_1(&format!("ds-both-6.1.0-xml-{n}.xml"));
        let json = mapped_6_1(&format!("ds-both-6.1.0-json-{n}.json"));
        let plugin = "xrootd.ds-both.http_plugin.";
        let from_json: Vec<_> = json.iter().filter(|(k, _)| k.starts_with(plugin)).collect();
        let from_xml: Vec<_> = xml.iter().filter(|(k, _)| k.starts_with(plugin)).collect();
        assert_eq!(from_json, from_xml, "interval {n}");
        // response.100 is left out by default: always 0 (XrdHttpMon.cc:112).
        let mut expected: Vec<String> = VERBS
            .iter()
            .map(|v| format!("{plugin}request.{v}"))
            .chain(
                STATUSES
                    .iter()
                    .filter(|s| **s != "100")
                    .map(|s| format!("{plugin}response.{s}")),
            )
            .collect();
        expected.sort();
        let names: Vec<&String> = from_json.iter().map(|(k, _)| *k).collect();
        assert_eq!(names, expected.iter().collect::<Vec<_>>(), "interval {n}");
        for (name, (_, slope)) in &from_json {
            assert_eq!(slope, "positive", "{name}");
        }
        // The rest of the JSON datagram is the header's: each as in the XML.
        for (name, v) in json.iter().filter(|(k, _)| !k.starts_with(plugin)) {
            if name.ends_with(".tod") || name.ends_with(".uptime") {
                continue;
            }
            assert_eq!(xml.get(name), Some(v), "{name} in interval {n}");
        }
    }
    // The counts move from one interval to the next as the load made them
    // (GET 3, 5, 7: tests/data/records-5.9/README.md).
    let get = |n: &str| {
        mapped_6_1(&format!("ds-json-6.1.0-json-{n}.json"))
            ["xrootd.ds-json.http_plugin.request.GET"]
            .0
            .clone()
    };
    assert_eq!([get("1"), get("2"), get("3")], ["3", "5", "7"]);
    // Every capture maps with nothing unknown and nothing rejected.
    for entry in std::fs::read_dir(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/records-5.9"),
    )
    .unwrap()
    {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".xml") || name.ends_with(".json") {
            assert!(!mapped_6_1(&name).is_empty(), "{name}");
        }
    }
}
