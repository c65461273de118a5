//! Real records captured from xrootd 5.5.3 and 6.1.0 (tests/data/records)
//! into a real gmond: cache metrics carry their type.

use xrd2ganglia_testkit as common;

/// Into a real gmond: a memory cache's record (xrootd 5.5.3,
/// `<stats id="cache" type="rmc">`) and an XCache's (6.1.0, `type="pfc"`)
/// become cache metrics that carry their type, with the values the
/// records' text has; no cache metric goes without it.
#[test]
fn the_cache_type_reaches_gmond_in_the_names() {
    use std::time::Duration;
    let gmond = common::Gmond::start();
    let gw = common::Gateway::start(
        gmond.port,
        "stats_interval = 0\nself_metrics_interval = 0\ndmax = 0\n",
    );
    let rmc = common::fixture("rmc_loaded.xml");
    let pfc = common::fixture("../records-5.9/pfc-6.1.0-xml-1.xml");
    let text = |d: &[u8]| String::from_utf8(d.to_vec()).unwrap();
    // From the records' text.
    assert!(text(&rmc).contains(r#"<stats id="cache" type="rmc"><prerd>"#));
    assert!(text(&rmc).contains("<hits>1499></hits><miss>487</miss>"));
    assert!(text(&pfc).contains(r#"<stats id="cache" type="pfc"><prerd>"#));
    assert!(text(&pfc).contains("<opcl><odefer>2</odefer>"));
    assert!(text(&pfc).contains("<store><size>0</size>"));
    gw.send(&rmc);
    gw.send(&pfc);
    let x = gmond.wait_for(Duration::from_secs(15), "both records", |x| {
        x.has(
            "vm",
            &[
                "xrootd.rmc.cache.rmc.rd.hits",
                "xrootd.pfc.cache.pfc.opcl.odefer",
            ],
        )
    });
    let m = x.metric("vm", "xrootd.rmc.cache.rmc.rd.hits");
    assert_eq!(
        (m.get("VAL"), m.get("SLOPE"), m.get("UNITS")),
        ("1499", "positive", "hits/s")
    );
    assert_eq!(
        x.metric("vm", "xrootd.rmc.cache.rmc.rd.miss").get("VAL"),
        "487"
    );
    assert_eq!(
        x.metric("vm", "xrootd.pfc.cache.pfc.opcl.odefer")
            .get("VAL"),
        "2"
    );
    assert_eq!(
        x.metric("vm", "xrootd.pfc.cache.pfc.store.size").get("VAL"),
        "0"
    );
    let host = x.host("vm");
    let untyped: Vec<&String> = host
        .metrics
        .keys()
        .filter(|n| {
            n.contains(".cache.") && !n.contains(".cache.rmc.") && !n.contains(".cache.pfc.")
        })
        .collect();
    assert!(untyped.is_empty(), "{untyped:?}");
}
