//! Clusters (docs/clusters.md).
//!
//! A piece of the file's key table: `file_keys.rs` says how the pieces
//! join, and the names its entries use are that file's.

/// The entries gathered so far, and this piece's, handed to the next.
macro_rules! clusters_keys {
    ($($before:tt)*) => {
        all_file_keys! {
            $($before)*
            cluster_by_site: bool = false => {
                value: "true or false",
                meaning: "Each distinct `site` (all.sitename) that no `[[cluster]]` rule takes \
                    becomes a Ganglia cluster of its own, named by it (sanitised: letters, digits, \
                    `.`, `_`, `-`; docs/clusters.md). A record without a site, or whose site \
                    sanitises to nothing, goes to `cluster_name`.",
                shipped: "\n\
                    # ---- clusters (docs/clusters.md) -----------------------------------------\n\
                    # One gateway, many Ganglia clusters: each distinct site (all.sitename)\n\
                    # its own cluster, named by it (sanitised: letters, digits, '.', '_', '-').\n\
                    # Servers without a site go to cluster_name.\n",
            },
            max_clusters: usize = DEFAULT_MAX_CLUSTERS => {
                range: Some(count(1, 10_000_000)),
                value: "count",
                meaning: "At most this many clusters named by records' sites at once (by \
                    `cluster_by_site` and `{site}` rules; literal rules' clusters and \
                    `cluster_name` are not counted). A site beyond it goes to `cluster_name`, \
                    counted (`clusters_refused`) and logged once per `log_interval`, and to its \
                    own cluster with its first record after a place is free; a cluster no source \
                    is in any more frees its place.",
                shipped: "\n\
                    # At most this many clusters named by sites at once; a site beyond them\n\
                    # goes to cluster_name (counted as clusters_refused).\n",
            },
            cluster: Vec<ClusterConfig> = Vec::new() => {
                value: "array of tables (`[[cluster]]`: `name`, `sites`, `networks`, `hosts`, \
                    `owner`, `latlong`, `url`, `xml_listen`, `xml_allow`, `[[cluster.channel]]`)",
                meaning: "Rules that put servers in a named cluster, first match wins: `name` \
                    (required), and one or more of `sites` (patterns of `site`, `*` and `?` as \
                    wildcards), `networks` (the sender's address: networks or addresses), `hosts` \
                    (patterns of the host name); a rule matches when each list it gives has a \
                    match. `name = \"{site}\"` makes each matched server's site a cluster of its \
                    own (sanitised as by `cluster_by_site`, counted against `max_clusters`; a \
                    server without a site is not matched). `owner`, `latlong` and `url` are written \
                    in the XML port's `CLUSTER`. `xml_listen` (ADDRESS:PORT list) serves the rule's \
                    clusters, and only them, on ports of their own, to the hosts of the rule's \
                    `xml_allow` (default: the gateway's); `xml_listen` at the top still serves \
                    every cluster, and is required with it. A change of a rule's `xml_listen` \
                    waits for a restart. `[[cluster.channel]]` tables (keys as `[[channel]]`) send \
                    the cluster's packets to its own gmonds instead of the default channels. A \
                    `{site}` rule takes no `owner`, `latlong`, `url` or channels (they describe one \
                    cluster). Servers no rule takes go by site (`cluster_by_site`) or to \
                    `cluster_name`.",
                shipped: "\n\
                    # Rules, first match wins, before cluster_by_site: a named cluster for the\n\
                    # servers whose site (sites, patterns), sender address (networks) or host\n\
                    # name (hosts, patterns) match; every list given must match. owner,\n\
                    # latlong and url go in the XML port's CLUSTER; [[cluster.channel]] tables\n\
                    # (keys as [[channel]]) send the cluster's packets to its own gmond. Tables\n\
                    # go after every plain key (a key below a table belongs to it), e.g.\n\
                    #   [[cluster]]\n\
                    #   name = \"SITEA-xcache\"\n\
                    #   networks = [\"10.1.2.0/24\"]\n\
                    #   owner = \"SITEA storage team\"\n\
                    #   url = \"https://sitea.example/\"\n\
                    # A rule named \"{site}\" makes a cluster per site it takes (as by\n\
                    # cluster_by_site); xml_listen in a rule serves its clusters, and only\n\
                    # them, on a port of their own (a shard's gmetad polls it), to its own\n\
                    # xml_allow (default: the one above), e.g.\n\
                    #   [[cluster]]\n\
                    #   name = \"{site}\"\n\
                    #   sites = [\"T2_*\"]\n\
                    #   xml_listen = [\"0.0.0.0:8661\"]\n",
            },
        }
    };
}
