//! A rule port's document: its rule's clusters only (docs/clusters.md).

use super::{Table, layout, owned, site_record};

#[test]
fn a_rule_port_writes_its_clusters_only_and_the_gateways_port_all() {
    let mut x = Table::new(
        "xml_listen = [\"127.0.0.1:0\"]\ncluster_by_site = true\n\
         [[cluster]]\nname = \"{site}\"\nsites = [\"T2_*\"]\nxml_listen = [\"127.0.0.1:0\"]\n\
         [[cluster]]\nname = \"XC\"\nsites = [\"XC\"]\nxml_listen = [\"127.0.0.1:0\"]\n",
        100,
    );
    // Two hosts named alike in SITEC (the one heard a second later is
    // written NAME@ADDRESS), which the rule ports pass over, new name and
    // all; then the rules' sites.
    for (i, (host, site)) in [
        ("dup", Some("SITEC")),
        ("dup", Some("SITEC")),
        ("a1", Some("T2_A")),
        ("a2", Some("T2_A")),
        ("b1", Some("T2_B")),
        ("x1", Some("XC")),
        ("n1", None),
        // A second a1 in T2_A, heard a second later: written a1@ADDRESS on
        // its port too.
        ("a1", Some("T2_A")),
    ]
    .into_iter()
    .enumerate()
    {
        let from = format!("10.0.3.{}:1", i + 1);
        x.feed(
            &site_record(host, site, "anon", 1, 1),
            &from,
            u64::from(i == 1 || i == 7),
        );
    }
    let (c, w) = x.clusters_on(1, Some(0));
    assert_eq!(
        layout(&c),
        owned(&[("T2_A", &["a1", "a1@10.0.3.8", "a2"]), ("T2_B", &["b1"])])
    );
    assert_eq!((w.hosts, w.renamed), (4, 1));
    let (c, _) = x.clusters_on(1, Some(1));
    assert_eq!(layout(&c), owned(&[("XC", &["x1"])]));
    let (c, _) = x.clusters(1);
    assert_eq!(
        layout(&c),
        owned(&[
            ("SITEC", &["dup", "dup@10.0.3.2"]),
            ("T2_A", &["a1", "a1@10.0.3.8", "a2"]),
            ("T2_B", &["b1"]),
            ("XC", &["x1"]),
            ("XRootD", &["n1"]),
        ])
    );
}
