//! Which cluster a source is in, as the engine chooses it
//! (docs/clusters.md): `{site}` rules and `max_clusters`.

use super::Harness;

/// A record of `host` naming `site`, its counter at `inb`.
fn record(host: &str, site: &str, inb: u64) -> String {
    format!(
        r#"<statistics tod="1700000100" ver="v5.5.3" src="{host}:1094" tos="1700000000" pgm="xrootd" ins="anon" pid="77" site="{site}"><stats id="link"><num>3</num><in>{inb}</in></stats></statistics>"#
    )
}

/// The cluster of the last record's packets (None: `cluster_name`).
fn cluster_of(h: &Harness) -> Option<String> {
    h.engine
        .batch()
        .cluster
        .as_ref()
        .map(|c| c.name.to_string())
}

/// A source refused a cluster by `max_clusters` goes to its own with its
/// next record once a place is free, not at the next reload (issue 38).
#[test]
fn a_refused_source_takes_its_cluster_as_soon_as_there_is_room() {
    let mut h = Harness::new(
        "cluster_by_site = true\nmax_clusters = 1\n[[cluster]]\nname = \"RULED\"\nsites = [\"ZZ\"]\n",
    );
    h.feed(record("a1", "SITEA", 1), "10.0.0.1:1", 0);
    assert_eq!(cluster_of(&h).as_deref(), Some("SITEA"));
    // No room for SITEB: in cluster_name, record after record (the fast
    // path included: the same text, new digits).
    for (i, secs) in [1, 2, 3].into_iter().enumerate() {
        h.feed(record("b1", "SITEB", 10 + i as u64), "10.0.0.2:1", secs);
        assert_eq!(cluster_of(&h), None, "record {i}");
    }
    // Counted once, for the one source refused.
    assert_eq!(h.counters.snapshot().clusters_refused, 1);
    // SITEA's only server goes to a rule's cluster: SITEA's place is free.
    h.feed(record("a1", "ZZ", 2), "10.0.0.1:1", 4);
    assert_eq!(cluster_of(&h).as_deref(), Some("RULED"));
    // SITEB's server is in its own cluster with its next record, with
    // every metadata sent again (a host new to that cluster).
    h.feed(record("b1", "SITEB", 20), "10.0.0.2:1", 5);
    assert_eq!(cluster_of(&h).as_deref(), Some("SITEB"));
    assert!(h.metadata_count() > 0);
    assert_eq!(h.counters.snapshot().clusters_refused, 1);
}

/// `name = "{site}"`: each site the rule takes is a cluster of its own,
/// named as `cluster_by_site` names it; a literal rule's name and
/// `cluster_name` win; a server without a site goes on.
#[test]
fn a_site_rule_names_a_cluster_per_site() {
    let mut h = Harness::new(
        "cluster_name = \"Fed\"\n[[cluster]]\nname = \"T2_lit\"\nsites = [\"T2_LIT_OLD\"]\n[[cluster]]\nname = \"{site}\"\nsites = [\"T2_*\"]\n",
    );
    for (i, (site, want)) in [
        ("T2_A", Some("T2_A")),
        ("T2_../x", Some("T2_.._x")),
        ("T2_Zürich", Some("T2_Z_rich")),
        // The literal rule's cluster, whatever the case.
        ("T2_LIT", Some("T2_lit")),
        ("T2_LIT_OLD", Some("T2_lit")),
        // Not taken by the rule (no cluster_by_site): cluster_name.
        ("SITEC", None),
    ]
    .into_iter()
    .enumerate()
    {
        let from = format!("10.0.1.{}:1", i + 1);
        h.feed(record(&format!("h{i}"), site, 1), &from, 0);
        assert_eq!(cluster_of(&h).as_deref(), want, "{site}");
    }
    let max = "T2_".to_string() + &"x".repeat(100);
    h.feed(record("long", &max, 1), "10.0.2.1:1", 0);
    assert_eq!(cluster_of(&h).map(|c| c.len()), Some(64));
}
