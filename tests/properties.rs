//! Properties that hold for any input (proptest): a datagram is parsed or
//! rejected, never a panic; whatever the gateway sends fits gmond's limits
//! and carries only names and text gmond's XML survives.

use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use xrd2ganglia::config::{FileConfig, Overrides, Settings, validate};
use xrd2ganglia::engine::Engine;
use xrd2ganglia::events::{Counters, Events};
use xrd2ganglia::ganglia::sanitize;
use xrd2ganglia::ganglia::xdr::{self, Packet};
use xrd2ganglia::summary::{SummaryParser, offset_in};

fn settings() -> Settings {
    let overrides = Overrides {
        send: vec!["127.0.0.1:9".into()],
        ..Default::default()
    };
    validate(FileConfig::default(), "prop".into(), &overrides).unwrap()
}

/// Everything the pipeline sends for `datagram` satisfies gmond's limits.
fn check_sent(datagram: &[u8]) -> Result<(), TestCaseError> {
    check_sent_after(None, datagram)
}

/// The same, `datagram` coming after `before` from the same sender.
fn check_sent_after(before: Option<&[u8]>, datagram: &[u8]) -> Result<(), TestCaseError> {
    let s = settings();
    let counters = Counters::default();
    let mut events = Events::new(&counters, Duration::from_secs(3600));
    let mut p = Engine::new(Arc::new(s.clone()), Instant::now());
    let from = "10.0.0.1:1".parse().unwrap();
    if let Some(before) = before {
        p.datagram(before, from, Instant::now(), &mut events);
    }
    p.datagram(datagram, from, Instant::now(), &mut events);
    for bytes in p.packets() {
        prop_assert!(bytes.len() <= xdr::MAX_PACKET);
        match xdr::decode(bytes) {
            Ok(Packet::Metadata { id, meta }) => {
                prop_assert!(sanitize::is_clean_name(&id.name), "name {:?}", id.name);
                prop_assert!(sanitize::is_clean_text(&meta.units, sanitize::MAX_TEXT));
                for (k, v) in meta.extra.iter() {
                    prop_assert!(
                        !v.contains(['"', '<', '&']) && !k.contains(['"', '<', '&']),
                        "{}={:?}",
                        k,
                        v
                    );
                }
            }
            Ok(Packet::Value { id, value, .. }) => {
                prop_assert!(!id.host.contains(['"', '<', '&']));
                prop_assert_eq!(id.host.matches(':').count(), 1, "host {:?}", id.host);
                let v = value.to_string();
                prop_assert!(
                    v.len() <= sanitize::MAX_VALUE && !v.contains(['"', '<', '&']),
                    "value {:?}",
                    v
                );
            }
            other => prop_assert!(false, "unexpected {:?}", other),
        }
    }
    Ok(())
}

/// Record-shaped text built from hostile pieces.
fn record_like() -> impl Strategy<Value = String> {
    let word = "[a-z0-9:<>&\"'/ .\\-_]{0,6}";
    let value = "[ -~\u{1}\u{7f}\u{e9}]{0,24}";
    let attr = (word, value).prop_map(|(k, v)| format!(" {k}=\"{v}\""));
    let leaf = (word, value).prop_map(|(t, v)| format!("<{t}>{v}</{t}>"));
    let entry = (0u8..4, prop::collection::vec(leaf.clone(), 0..4))
        .prop_map(|(i, l)| format!("<stats id=\"{i}\">{}</stats>", l.concat()));
    let list = (word, 0u8..5, prop::collection::vec(entry, 0..4))
        .prop_map(|(t, n, e)| format!("<{t}>{n}{}</{t}>", e.concat()));
    let section = (word, prop::collection::vec(prop_oneof![leaf, list], 0..5))
        .prop_map(|(id, body)| format!("<stats id=\"{id}\">{}</stats>", body.concat()));
    (
        prop::collection::vec(attr, 0..8),
        prop::collection::vec(section, 0..5),
    )
        .prop_map(|(attrs, sections)| {
            format!(
                "<statistics{}>{}</statistics>",
                attrs.concat(),
                sections.concat()
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn any_bytes_parse_or_fail_cleanly(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let mut p = SummaryParser::new();
        let json = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
        if let (Ok(r), Ok(_)) = (p.parse(&bytes), std::str::from_utf8(&bytes)) {
            // Values are borrowed from the datagram: each is a slice of it
            // (a JSON record also makes some: unescaped strings, lengths).
            for v in r.vars() {
                prop_assert!(
                    json || offset_in(&bytes, v.value).is_some(),
                    "{:?} not in the datagram",
                    v.value
                );
            }
        }
    }

    #[test]
    fn any_bytes_through_the_pipeline(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        check_sent(&bytes)?;
    }

    #[test]
    fn any_bytes_through_the_xdr_decoder(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        if let Ok(p) = xdr::decode(&bytes) {
            // What decodes encodes to what decodes the same (as text: a
            // NaN float is not equal to itself).
            let mut again = Vec::new();
            xdr::encode(&mut again, &p);
            let back = xdr::decode(&again).expect("our encoding decodes");
            prop_assert_eq!(back.to_string(), p.to_string());
        }
    }
}

/// The JSON form built from hostile pieces: odd keys and strings (escapes,
/// quotes, markup), lists, own values, bare words.
fn json_like() -> impl Strategy<Value = String> {
    let string = prop_oneof![
        "[a-z0-9:<>&'/ .\\-_]{0,6}".prop_map(|s| format!("\"{s}\"")),
        Just("\"a\\\"b\"".to_string()),
        Just("\"\\u003c\\u0026\\ud83d\\ude00\"".to_string()),
        Just("\"\\ud800\"".to_string()),
        "[ -~\u{1}\u{e9}]{0,12}".prop_map(|s| serde_json::to_string(&s).unwrap()),
    ];
    let scalar = prop_oneof![
        string.clone(),
        Just("-5".to_string()),
        Just("12345678901234567890123".to_string()),
        Just("1.5e300".to_string()),
        Just("nan".to_string()),
        Just("null".to_string()),
        Just("true".to_string()),
        (0u64..5_000_000_000).prop_map(|n| n.to_string()),
    ];
    let member = (string.clone(), scalar.clone()).prop_map(|(k, v)| format!("{k}:{v}"));
    let object =
        prop::collection::vec(member.clone(), 0..4).prop_map(|m| format!("{{{}}}", m.join(",")));
    let list = prop::collection::vec(prop_oneof![object.clone(), scalar.clone()], 0..4)
        .prop_map(|e| format!("[{}]", e.join(",")));
    let inner = prop_oneof![
        member,
        (string.clone(), object).prop_map(|(k, v)| format!("{k}:{v}")),
        (string.clone(), list).prop_map(|(k, v)| format!("{k}:{v}")),
        scalar.prop_map(|v| format!("\"\":{v}")),
    ];
    let section =
        ("[a-z_.:<&\"]{0,5}", prop::collection::vec(inner, 0..5)).prop_map(|(id, body)| {
            format!(
                "{}:{{{}}}",
                serde_json::to_string(&format!("stats_{id}")).unwrap(),
                body.join(",")
            )
        });
    let header = ("[a-z]{1,4}", string).prop_map(|(k, v)| format!("\"{k}\":{v}"));
    (
        prop::collection::vec(header, 0..8),
        prop::collection::vec(section, 0..5),
    )
        .prop_map(|(header, sections)| {
            let members: Vec<String> = header.into_iter().chain(sections).collect();
            format!("{{\"statistics\":{{{}}}}}", members.join(","))
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn hostile_records_through_the_pipeline(record in record_like()) {
        // Whatever such a record becomes is safe for gmond.
        check_sent(record.as_bytes())?;
    }

    #[test]
    fn an_xcache_gstream_after_hostile_records(
        record in record_like(),
        tos in 0u32..3,
        lines in prop::collection::vec("[ -~]{0,40}", 0..4),
    ) {
        // Its g-stream's totals go out named from the record's header:
        // safe for gmond whatever that header holds.
        let record = record.replacen("<statistics", &format!("<statistics tos=\"{tos}\""), 1);
        let gstream = format!(
            "{{\"code\":\"g\",\"stod\":{tos},\"gs\":{{\"type\":\"C\"}}}}\n\
             {{\"event\":\"file_close\",\"b_hit\":5}}\n{}",
            lines.join("\n")
        );
        check_sent_after(Some(record.as_bytes()), gstream.as_bytes())?;
    }

    #[test]
    fn hostile_json_records_through_the_pipeline(record in json_like()) {
        // It is a record (never malformed), and safe for gmond.
        let mut p = SummaryParser::new();
        prop_assert!(p.parse(record.as_bytes()).is_ok(), "{}", record);
        check_sent(record.as_bytes())?;
    }
}
