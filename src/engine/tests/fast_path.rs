//! The template fast path sends what the full path sends, byte for byte.

use std::net::SocketAddr;
use std::time::Duration;

use super::{Harness, fixture};

/// Two rigs on one clock: one with the fast path, one without.
fn fast_and_full(config: &str) -> (Harness, Harness) {
    let (fast, mut full) = (Harness::new(config), Harness::new(config));
    full.engine.fast_path = false;
    full.engine.clock = fast.engine.clock;
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
        fixture_no in 0usize..10,
        changed in proptest::bool::ANY,
        steps in proptest::collection::vec(
            (proptest::collection::vec(0u8..=255, 1..8), 0u8..=255, 0u64..90),
            1..14,
        ),
    ) {
        same_packets_both_ways(fixture_no, changed, &steps)?;
    }
}

/// Reports of one real record: the number edits, the shape change and the
/// gap before each.
type Steps = [(Vec<u8>, u8, u64)];

/// The property: `steps` reports of fixture `fixture_no` (0-4 XML, 5-9
/// their JSON form) send the same packets and count the same with the
/// fast path as without.
fn same_packets_both_ways(
    fixture_no: usize,
    changed: bool,
    steps: &Steps,
) -> Result<(), proptest::test_runner::TestCaseError> {
    let name = ["ds_idle", "ds_loaded", "mgr_cmsd", "pfc_loaded", "spaces"][fixture_no % 5];
    let record = fixture(name);
    let record = if fixture_no < 5 {
        record
    } else {
        json_form(&record)
    };
    let (mut fast, mut full) = fast_and_full(if changed {
        "metadata_interval = 60\nsend_values = \"changed\"\nvalue_heartbeat = 25\n"
    } else {
        "metadata_interval = 60\n"
    });
    let from: SocketAddr = "10.0.0.9:1094".parse().unwrap();
    let mut at = fast.at(1);
    // Steady reports right after a steady report (past the first two,
    // which set TMAX): each takes the fast path unless metadata is due,
    // once a minute.
    let (mut pairs, mut last_steady) = (0, false);
    for (i, (edits, shape, gap)) in steps.iter().enumerate() {
        // Mostly plain numbers, unchanged shape, steady 10 s reports.
        let text = if i == 0 {
            record.clone()
        } else {
            mutate(&record, edits, *shape)
        };
        let gap = if *gap < 70 { 10 } else { *gap };
        let steady = *shape < 100 && gap == 10;
        pairs += usize::from(i >= 3 && steady && last_steady);
        last_steady = steady;
        at += Duration::from_secs(gap);
        fast.feed_at(&text, from, at);
        full.feed_at(&text, from, at);
        let a: Vec<&[u8]> = fast.engine.packets().collect();
        let b: Vec<&[u8]> = full.engine.packets().collect();
        proptest::prop_assert_eq!(a, b, "step {}", i);
        proptest::prop_assert_eq!(fast.snapshot(), full.snapshot(), "step {}", i);
    }
    // Not vacuous: steady reports did take the fast path.
    proptest::prop_assert!(
        pairs < 3 || fast.engine.fast_path_hits > 0,
        "{} steady pairs, no fast path",
        pairs
    );
    proptest::prop_assert_eq!(full.engine.fast_path_hits, 0);
    Ok(())
}

/// The cases proptest shrank failures to (proptest-regressions/), replayed
/// as they were found: its seeds replay only while the strategy stays the
/// same, these whatever it becomes.
#[test]
fn recorded_failures_replay() {
    let step = |edits: &[u8]| (edits.to_vec(), 0u8, 0u64);
    let cases: [(usize, &[&[u8]]); 3] = [
        (0, &[&[0], &[0], &[10], &[0], &[36]]),
        (4, &[&[0], &[0], &[166], &[10, 0], &[0]]),
        (0, &[&[0], &[0], &[244], &[0], &[0, 36, 11, 0, 0], &[0]]),
    ];
    for (fixture_no, edits) in cases {
        let steps: Vec<_> = edits.iter().map(|e| step(e)).collect();
        if let Err(e) = same_packets_both_ways(fixture_no, false, &steps) {
            panic!("fixture {fixture_no}, {edits:?}: {e}");
        }
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
    let (mut fast, mut full) = fast_and_full("");
    let xml = fixture("spaces");
    let record = json_form(&xml);
    for i in 0..5u64 {
        let text = mutate(&record, &[(i * 3 % 10) as u8, 11, 12], 50);
        fast.feed(&text, "10.0.0.1:40000", 10 * i);
        full.feed(&text, "10.0.0.1:40000", 10 * i);
        assert_eq!(
            fast.engine.packets().collect::<Vec<_>>(),
            full.engine.packets().collect::<Vec<_>>(),
            "report {i}"
        );
    }
    // The first record and the one that fixes TMAX go the full way.
    assert!(
        fast.engine.fast_path_hits >= 2,
        "{} fast",
        fast.engine.fast_path_hits
    );
    assert_eq!(fast.snapshot(), full.snapshot());
    // The JSON record becomes the XML record's packets, byte for byte.
    let first = |text: &str| -> Vec<Vec<u8>> {
        let mut r = Harness::new("");
        r.feed(text, "10.0.0.1:40000", 0);
        r.engine.packets().map(<[u8]>::to_vec).collect()
    };
    let (from_json, from_xml) = (first(&record), first(&xml));
    assert!(from_xml.len() > 100, "{} packets", from_xml.len());
    assert_eq!(from_json, from_xml);
}

#[test]
fn steady_reports_take_the_fast_path() {
    let mut r = Harness::new("");
    let record = fixture("ds_loaded");
    for i in 0..5u64 {
        let text = mutate(&record, &[(i * 3 % 10) as u8, 11, 12], 200);
        r.feed(text, "10.0.0.1:40000", 10 * i);
    }
    // The first record and the one that fixes TMAX go the full way.
    assert!(
        r.engine.fast_path_hits >= 2,
        "{} fast",
        r.engine.fast_path_hits
    );
    // A restart goes the full way again (and resends metadata).
    let restarted = record.replacen("tos=\"", "tos=\"2", 1);
    let hits = r.engine.fast_path_hits;
    r.feed(restarted, "10.0.0.1:40000", 60);
    assert_eq!(r.engine.fast_path_hits, hits);
    assert!(r.metadata_count() > 50);
}
