//! A real XML record's JSON form, as xrootd 5.9 would write it: what the
//! JSON reader is held to (every fixture must flatten the same both ways).

/// A record's text in the JSON form xrootd 5.9 writes (the header as
/// `XrdStats.cc` does: tod, tos, pid numbers, the rest strings; a section
/// as `"stats_ID":{...}`), with this reader's conventions for what only XML
/// has: a list (`<paths>2<stats id="0">..`) is an array, whose length is
/// the count; text before the first child is the `""` member.
pub(crate) fn xml_to_json(xml: &str) -> String {
    let doc = roxmltree::Document::parse(xml).expect("fixture is XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "statistics");
    let mut out = String::from("{\"statistics\":{");
    let mut first = true;
    let mut sep = |out: &mut String| {
        if !std::mem::take(&mut first) {
            out.push(',');
        }
    };
    for a in root.attributes() {
        sep(&mut out);
        push_string(&mut out, a.name());
        out.push(':');
        if matches!(a.name(), "tod" | "tos" | "pid") && is_integer(a.value()) {
            out.push_str(a.value());
        } else {
            push_string(&mut out, a.value());
        }
    }
    for section in root.children().filter(|n| n.is_element()) {
        assert_eq!(section.tag_name().name(), "stats");
        sep(&mut out);
        push_string(
            &mut out,
            &format!("stats_{}", section.attribute("id").unwrap()),
        );
        out.push(':');
        let has_children = section.children().any(|n| n.is_element());
        if !has_children && own_text(section).is_empty() {
            out.push_str("{}");
        } else {
            body(section, &mut out);
        }
    }
    out.push_str("}}");
    out
}

/// An element's text before its first child, as the XML flattener reads it.
fn own_text(e: roxmltree::Node<'_, '_>) -> String {
    let raw: String = e
        .children()
        .take_while(|n| !n.is_element())
        .filter_map(|n| n.text())
        .collect();
    let t = raw.trim().trim_end_matches('>').trim_end();
    let t = if t.len() >= 2 && t.starts_with('"') && t.ends_with('"') {
        &t[1..t.len() - 1]
    } else {
        t
    };
    t.to_string()
}

fn body(e: roxmltree::Node<'_, '_>, out: &mut String) {
    let kids: Vec<_> = e.children().filter(|n| n.is_element()).collect();
    let own = own_text(e);
    if kids.is_empty() {
        push_value(out, &own);
    } else if kids.iter().all(|k| k.tag_name().name() == "stats") {
        // A list: positional ids, the count is the length.
        assert_eq!(own, kids.len().to_string(), "list count");
        out.push('[');
        for (i, k) in kids.iter().enumerate() {
            assert_eq!(k.attribute("id"), Some(i.to_string().as_str()));
            if i > 0 {
                out.push(',');
            }
            body(*k, out);
        }
        out.push(']');
    } else {
        out.push('{');
        if !own.is_empty() {
            out.push_str("\"\":");
            push_value(out, &own);
            out.push(',');
        }
        for (i, k) in kids.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_string(out, k.tag_name().name());
            out.push(':');
            body(*k, out);
        }
        out.push('}');
    }
}

fn is_integer(v: &str) -> bool {
    let d = v.strip_prefix('-').unwrap_or(v);
    !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()) && (d == "0" || !d.starts_with('0'))
}

/// A number as a number, anything else as a string.
fn push_value(out: &mut String, v: &str) {
    if is_integer(v) {
        out.push_str(v);
    } else {
        push_string(out, v);
    }
}

fn push_string(out: &mut String, v: &str) {
    out.push_str(&serde_json::to_string(v).unwrap());
}
