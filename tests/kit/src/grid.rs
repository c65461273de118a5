//! Any Ganglia XML by its clusters: gmond's, the gateway's (its own port
//! or a rule's), a gmetad's with its GRIDs around them.

use std::collections::{BTreeMap, BTreeSet};

/// `text` parsed with a strict XML parser (the DOCTYPE's internal subset
/// allowed, as Ganglia writes one): ill-formed XML fails the test.
pub fn parse_ganglia(text: &str) -> roxmltree::Document<'_> {
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    roxmltree::Document::parse_with_options(text, opts)
        .unwrap_or_else(|e| panic!("not well-formed: {e}\n{}", &text[..text.len().min(3000)]))
}

/// CLUSTER NAME -> its HOST NAMEs, wherever the CLUSTERs are in `text`.
pub fn clusters_of(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    parse_ganglia(text)
        .descendants()
        .filter(|n| n.has_tag_name("CLUSTER"))
        .map(|c| {
            let hosts = c
                .children()
                .filter(|n| n.has_tag_name("HOST"))
                .map(|h| h.attribute("NAME").unwrap_or("").to_string())
                .collect();
            (c.attribute("NAME").unwrap_or("").to_string(), hosts)
        })
        .collect()
}

/// The set of `names`, as `clusters_of` and a directory listing give them.
pub fn names(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}
