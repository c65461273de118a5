//! A differential test: the JSON reader against a flattener written over
//! `serde_json::Value`, on any JSON serde_json writes.

use super::{Var, vars_of};
use crate::summary::*;

/// The rules of the module doc, written plainly over a parsed tree.
fn reference_flatten(v: &serde_json::Value) -> Option<(Vec<Var>, usize)> {
    use serde_json::Value;
    fn scalar(v: &Value) -> Option<String> {
        match v {
            Value::Null => Some(String::new()),
            Value::Bool(b) => Some(b.to_string()),
            Value::Number(n) => Some(n.to_string()),
            Value::String(s) => Some(s.clone()),
            _ => None,
        }
    }
    struct Walk {
        out: Vec<Var>,
        entries: Vec<(String, String, usize)>,
    }
    impl Walk {
        fn push(&mut self, name: &str, value: String, entry: Option<usize>) {
            let e = entry.map(|i| {
                let (list, id, field_at) = &self.entries[i];
                (
                    i,
                    list.clone(),
                    id.clone(),
                    name.get(*field_at..).unwrap_or("").to_string(),
                )
            });
            self.out.push((name.to_string(), value, e));
        }
        fn value(&mut self, path: &str, v: &Value, entry: Option<usize>, level: usize) {
            match v {
                Value::Object(m) => {
                    if m.is_empty() && level >= 3 {
                        self.push(path, String::new(), entry);
                    }
                    for (k, v) in m {
                        if k.is_empty()
                            && let Some(s) = scalar(v)
                        {
                            self.push(path, s, entry);
                            continue;
                        }
                        let p = if path.is_empty() {
                            k.clone()
                        } else {
                            format!("{path}.{k}")
                        };
                        self.value(&p, v, entry, level + 1);
                    }
                }
                Value::Array(a) => {
                    self.push(path, a.len().to_string(), entry);
                    for (i, v) in a.iter().enumerate() {
                        let p = if path.is_empty() {
                            i.to_string()
                        } else {
                            format!("{path}.{i}")
                        };
                        self.entries
                            .push((path.to_string(), i.to_string(), p.len() + 1));
                        let e = self.entries.len() - 1;
                        self.value(&p, v, Some(e), level + 1);
                    }
                }
                v => self.push(path, scalar(v).unwrap_or_default(), entry),
            }
        }
    }
    let stats = v
        .as_object()?
        .iter()
        .next()
        .filter(|(k, _)| *k == "statistics")?
        .1;
    let stats = stats.as_object()?;
    let mut w = Walk {
        out: Vec::new(),
        entries: Vec::new(),
    };
    let mut header_len = None;
    for (k, v) in stats {
        let (name, section) = match k.strip_prefix("stats_") {
            Some(n) => (n.to_string(), true),
            None => (k.clone(), false),
        };
        if header_len.is_none() && (section || v.is_object() || v.is_array()) {
            header_len = Some(w.out.len());
        }
        if name.is_empty() && scalar(v).is_some() {
            continue;
        }
        w.value(&name, v, None, 2);
    }
    let header_len = header_len.unwrap_or(w.out.len());
    Some((w.out, header_len))
}

fn arb_json() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    use serde_json::Value;
    let key = prop_oneof![
        Just(String::new()),
        "stats_[a-z]{1,3}",
        "[a-z0-9]{1,4}",
        "[ -~]{0,4}",
        "\\PC{0,3}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[ -~]{0,6}".prop_map(Value::String),
        "[\\x00-\\x1f\"\\\\/\u{e9}\u{1f600}a]{0,6}".prop_map(Value::String),
    ];
    let tree = leaf.prop_recursive(5, 48, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    proptest::collection::vec(
        (
            prop_oneof![Just("tod".to_string()), "stats_[a-z]{1,4}", "[a-z]{1,4}"],
            tree,
        ),
        0..6,
    )
    .prop_map(|m| {
        let mut root = serde_json::Map::new();
        root.insert("statistics".into(), Value::Object(m.into_iter().collect()));
        Value::Object(root)
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, ..Default::default() })]

    /// Whatever serde_json writes, this reader flattens as the module doc
    /// says (escapes, nesting, lists, own values, header).
    #[test]
    fn flattens_what_serde_json_writes(v in arb_json(), ascii in proptest::bool::ANY) {
        let mut text = serde_json::to_string(&v).unwrap();
        if ascii {
            // The same value with every non-ASCII char escaped (pairs for
            // those past U+FFFF): only strings hold them.
            text = text
                .chars()
                .map(|c| match c {
                    c if c.is_ascii() => c.to_string(),
                    c => c
                        .encode_utf16(&mut [0; 2])
                        .iter()
                        .map(|u| format!("\\u{u:04x}"))
                        .collect(),
                })
                .collect();
        }
        let mut p = SummaryParser::new();
        let r = p.parse(text.as_bytes());
        let (want, header_len) = reference_flatten(&v).unwrap();
        match r {
            Ok(r) => {
                proptest::prop_assert_eq!(vars_of(&r), want, "{}", text);
                proptest::prop_assert_eq!(r.header_len(), header_len);
            }
            Err(e) => proptest::prop_assert_eq!(e.reason(), "too_deep", "{}: {}", e, text),
        }
    }
}

/// Any bytes after `{"statistics":{` parse or fail cleanly, and every
/// value is in the datagram or was made from it. Counts how many cases
/// parsed: the assertions below run only for those.
#[test]
fn json_shaped_bytes_never_panic() {
    use proptest::strategy::Strategy as _;
    let strategy = proptest::collection::vec(
        proptest::prop_oneof![
            proptest::strategy::Just("{".to_string()),
            proptest::strategy::Just("}".to_string()),
            proptest::strategy::Just("[".to_string()),
            proptest::strategy::Just("]".to_string()),
            proptest::strategy::Just(",".to_string()),
            proptest::strategy::Just(":".to_string()),
            proptest::strategy::Just("\"stats_a\":".to_string()),
            proptest::strategy::Just("\"\":".to_string()),
            proptest::strategy::Just("\"\\u".to_string()),
            proptest::strategy::Just("\\".to_string()),
            proptest::strategy::Just("\"".to_string()),
            proptest::strategy::Just("null".to_string()),
            proptest::strategy::Just("-1.5e3".to_string()),
            "[ a-z0-9\t\n]{0,6}",
            "\\PC{0,4}",
        ],
        0..32,
    );
    let parsed = std::cell::Cell::new(0u32);
    let cases = 2000;
    let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases,
        failure_persistence: None,
        ..Default::default()
    });
    runner
        .run(&strategy.boxed(), |parts| {
            let text = format!("{{\"statistics\":{{{}", parts.concat());
            let mut p = SummaryParser::new();
            if let Ok(r) = p.parse(text.as_bytes()) {
                parsed.set(parsed.get() + 1);
                // Made, not borrowed: a list's length or an entry's position
                // (at most one per part), or a string with an escape undone.
                let made = |v: &str| {
                    v.parse::<usize>().is_ok_and(|n| n <= parts.len()) || text.contains('\\')
                };
                for v in r.vars() {
                    proptest::prop_assert!(
                        crate::summary::offset_in(text.as_bytes(), v.value).is_some()
                            || made(v.value),
                        "{:?} of {} neither in nor made from {}",
                        v.value,
                        v.name,
                        text
                    );
                    if let Some(e) = v.entry {
                        proptest::prop_assert!(
                            text.contains(e.list.rsplit('.').next().unwrap_or("")) || made(e.id),
                            "entry {:?} of {}",
                            e,
                            text
                        );
                    }
                }
                let h = r.header();
                for value in [
                    h.tod, h.ver, h.src, h.tos, h.pgm, h.ins, h.pid, h.site, h.toe,
                ]
                .into_iter()
                .flatten()
                {
                    proptest::prop_assert!(
                        crate::summary::offset_in(text.as_bytes(), value).is_some() || made(value),
                        "header {:?} of {}",
                        value,
                        text
                    );
                }
            }
            Ok(())
        })
        .unwrap();
    // Measured: 149 of 2000 (7.5%: most token runs are not JSON).
    assert!(
        parsed.get() >= cases / 20,
        "{} of {cases} parsed",
        parsed.get()
    );
}
