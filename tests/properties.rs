//! Properties that hold for any input (proptest): a datagram is parsed or
//! rejected, never a panic; whatever the gateway sends fits gmond's limits
//! and carries only names and text gmond's XML survives.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use xrd2ganglia::config::{FileConfig, Overrides, Settings, validate};
use xrd2ganglia::events::{Counters, Events};
use xrd2ganglia::ganglia::sanitize;
use xrd2ganglia::ganglia::xdr::{self, Packet};
use xrd2ganglia::gateway::Pipeline;
use xrd2ganglia::summary::SummaryParser;

fn settings() -> Settings {
    let overrides = Overrides {
        send: vec!["127.0.0.1:9".into()],
        ..Default::default()
    };
    validate(FileConfig::default(), "prop".into(), &overrides).unwrap()
}

/// Everything the pipeline sends for `datagram` satisfies gmond's limits.
fn check_sent(datagram: &[u8]) -> Result<(), TestCaseError> {
    let s = settings();
    let counters = Counters::default();
    let mut events = Events::new(&counters, Duration::from_secs(3600));
    let mut p = Pipeline::new(&s);
    p.encode(
        datagram,
        "10.0.0.1:1".parse().unwrap(),
        Instant::now(),
        &s,
        &mut events,
    );
    for bytes in p.packets() {
        prop_assert!(bytes.len() <= xdr::MAX_PACKET);
        match xdr::decode(bytes) {
            Ok(Packet::Metadata {
                id, units, extra, ..
            }) => {
                prop_assert!(sanitize::is_clean_name(&id.name), "name {:?}", id.name);
                prop_assert!(sanitize::is_clean_text(&units, sanitize::MAX_TEXT));
                for (k, v) in &extra {
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
        if let (Ok(r), Ok(text)) = (p.parse(&bytes), std::str::from_utf8(&bytes)) {
            // Values are borrowed from the datagram: each is a slice of it.
            for v in r.vars() {
                prop_assert!(text.contains(v.value), "{:?} not in the datagram", v.value);
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
            let _ = p.to_string();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn hostile_records_through_the_pipeline(record in record_like()) {
        // Whatever such a record becomes is safe for gmond.
        check_sent(record.as_bytes())?;
    }
}
