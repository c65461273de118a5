//! Which Ganglia cluster a source is in, and the names clusters get from
//! records (docs/clusters.md).
//!
//! The choice ([`crate::config::clusters::Grouping::choose`]) is made once
//! per source and kept with it ([`super::source::Source::settle`]): again
//! only at a reload, a new `site` or a new host name, never per datagram.
//! Every packet batch says its source's cluster (an `Arc` clone: no
//! allocation), and the XML table and the send queues go by it.
//!
//! **Names from records are untrusted.** A cluster name is a directory
//! under gmetad's `rrd_rootdir` and part of ganglia-web's URLs, so a site
//! name keeps only letters, digits, `.`, `_` and `-` (anything else becomes
//! `_`), loses leading `.`, `_` and `-` (no `.`, `..`, hidden directory or
//! `__SummaryInfo__`, gmetad's summary directory) and is cut at
//! [`MAX_CLUSTER_NAME`] bytes; nothing left means `cluster_name`. Names
//! that differ only by case are one cluster (one directory on a
//! case-insensitive file system): the first spelling seen names it, and
//! configured names (rules, `cluster_name`) win over sites.
//!
//! **Bounded.** At most `max_clusters` clusters named by sites at once; a
//! site beyond them goes to `cluster_name` (counted, logged). A name no
//! source holds any more frees its place when the set is full.
//!
//! The names are shared by every engine of the gateway (one per receive
//! socket), behind one lock taken only when a source's cluster is chosen.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use crate::config::Settings;
use crate::config::clusters::{Choice, MAX_CLUSTER_NAME};
use crate::events::Events;
use crate::ganglia::path_name::{self, Change};
use crate::mapping::name_key;

/// A cluster other than `cluster_name`.
#[derive(Debug)]
pub struct Cluster {
    /// Its CLUSTER NAME.
    pub name: Box<str>,
    /// Mixed into its hosts' keys in the XML table: one server name in two
    /// clusters is two hosts there. Never 0 (`cluster_name`'s).
    pub key: u64,
    /// Named by a record's site (counted against `max_clusters`), not by
    /// a rule's literal name.
    pub from_site: bool,
    /// The rule port that serves it besides the gateway's
    /// ([`crate::config::clusters::ClusterRule::port`]; [`NO_PORT`]: only
    /// the gateway's). Set by the rule that placed a source in it last,
    /// for every host of the cluster at once.
    port: AtomicU32,
}

/// [`Cluster::port`] of a cluster that only the gateway's port serves.
const NO_PORT: u32 = u32::MAX;

impl Cluster {
    /// The rule port that serves it besides the gateway's (None: none).
    pub fn port(&self) -> Option<u32> {
        Some(self.port.load(Relaxed)).filter(|p| *p != NO_PORT)
    }

    /// Whether a document of `port` (None: the gateway's, every cluster)
    /// holds it.
    pub fn served_on(&self, port: Option<u32>) -> bool {
        port.is_none() || self.port() == port
    }
}

/// A source's cluster: None is `cluster_name`.
pub type ClusterRef = Option<Arc<Cluster>>;

/// The key of the cluster named `name` (never 0, `cluster_name`'s).
pub fn key_for(name: &str) -> u64 {
    name_key(name) | 1
}

/// The key of a source's cluster (0: `cluster_name`).
pub fn key_of(cluster: &ClusterRef) -> u64 {
    cluster.as_ref().map_or(0, |c| c.key)
}

/// The clusters named so far, by their case-folded name.
#[derive(Debug, Default)]
pub struct ClusterNames {
    inner: Mutex<Names>,
}

#[derive(Debug, Default)]
struct Names {
    by_folded: HashMap<Box<str>, Arc<Cluster>>,
    /// How many of them come from sites.
    sites: usize,
}

/// What choosing a source's cluster came to.
pub struct Placed {
    pub cluster: ClusterRef,
    /// The sanitised site name that found no room (`max_clusters`).
    pub refused: Option<String>,
    /// Clusters named by sites now.
    pub site_clusters: usize,
    /// The site as sent and what was changed in it to name its cluster
    /// (`ganglia/path_name.rs`; `Unusable`: `cluster_name`).
    pub renamed: Option<(String, Change)>,
}

/// A site's cluster name, sanitised; None when nothing is left of it.
pub fn site_cluster_name(site: &str) -> Option<String> {
    site_cluster_name_changed(site).0
}

/// A site's cluster name made to keep the one rule of names gmetad
/// makes directories of (`ganglia/path_name.rs`), cut at
/// [`MAX_CLUSTER_NAME`] (None when nothing is left of it), and what was
/// changed.
pub fn site_cluster_name_changed(site: &str) -> (Option<String>, Option<Change>) {
    let mut out = String::with_capacity(site.len().min(MAX_CLUSTER_NAME));
    let change = path_name::push_safe(&mut out, site, MAX_CLUSTER_NAME);
    ((!out.is_empty()).then_some(out), change)
}

impl ClusterNames {
    /// The cluster `choice` names under `settings`.
    pub fn place(&self, choice: Choice<'_>, settings: &Settings) -> Placed {
        let mut placed = Placed {
            cluster: None,
            refused: None,
            site_clusters: 0,
            renamed: None,
        };
        // `cluster_name` (every source, without rules or by-site) takes no lock.
        if choice == Choice::Default {
            return placed;
        }
        // The site's name, made to keep the rule (once per placing).
        let site_name = match choice {
            Choice::RuleSite(_, site) | Choice::Site(site) => {
                let (name, change) = site_cluster_name_changed(site);
                if let Some(change) = change {
                    placed.renamed = Some((path_name::shown(site).to_string(), change));
                }
                name
            }
            Choice::Default | Choice::Rule(_) => None,
        };
        let mut names = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        placed.site_clusters = names.sites;
        let rules = &settings.grouping.rules;
        // A rule's name, whatever its case, is the rule's cluster.
        let by_site = |name: Option<String>, port: Option<u32>| match name {
            Some(name) => match rules
                .iter()
                .find(|r| !r.by_site && r.name.eq_ignore_ascii_case(&name))
            {
                Some(rule) => Some((rule.name.clone(), false, rule.port)),
                None => Some((name, true, port)),
            },
            None => None,
        };
        let named = match choice {
            Choice::Default => None,
            Choice::Rule(at) => rules.get(at).map(|r| (r.name.clone(), false, r.port)),
            Choice::RuleSite(at, _) => rules.get(at).and_then(|r| by_site(site_name, r.port)),
            Choice::Site(_) => by_site(site_name, None),
        };
        let Some((name, from_site, port)) = named else {
            return placed;
        };
        // Placed by a rule (its port is said), not by `cluster_by_site`.
        let by_rule = !matches!(choice, Choice::Site(_));
        if name.eq_ignore_ascii_case(&settings.cluster_name) {
            return placed;
        }
        let folded: Box<str> = name.to_ascii_lowercase().into();
        if let Some(c) = names.by_folded.get(&folded) {
            // A rule's own spelling replaces a site's; the port of the rule
            // that placed a source last is the cluster's (after a reload
            // that moves a site to another rule, with its next report);
            // `cluster_by_site` keeps the port a rule gave.
            if !by_rule || from_site || !c.from_site {
                if by_rule && c.port() != port {
                    c.port.store(port.unwrap_or(NO_PORT), Relaxed);
                }
                placed.cluster = Some(c.clone());
                return placed;
            }
        }
        let replacing = names.by_folded.get(&folded).is_some_and(|c| c.from_site);
        if from_site && !replacing && names.sites >= settings.grouping.max_clusters {
            // Names no source holds any more make room.
            names.by_folded.retain(|_, c| Arc::strong_count(c) > 1);
            names.sites = names.by_folded.values().filter(|c| c.from_site).count();
            if names.sites >= settings.grouping.max_clusters {
                placed.refused = Some(name);
                placed.site_clusters = names.sites;
                return placed;
            }
        }
        let key = key_for(&name);
        let cluster = Arc::new(Cluster {
            name: name.into(),
            key,
            from_site,
            port: AtomicU32::new(port.unwrap_or(NO_PORT)),
        });
        if let Some(old) = names.by_folded.insert(folded, cluster.clone())
            && old.from_site
        {
            names.sites -= 1;
        }
        if from_site {
            names.sites += 1;
        }
        placed.site_clusters = names.sites;
        placed.cluster = Some(cluster);
        placed
    }
}

/// What a source's cluster is chosen with.
pub(super) struct Placing<'a> {
    pub(super) names: &'a ClusterNames,
    pub(super) settings: &'a Settings,
}

impl Placing<'_> {
    /// The cluster a record of `site`, from `from`, of host `host` goes
    /// to under these settings: the decision, which its source takes
    /// ([`super::source::Source::settle`]). Counted and logged here (a
    /// refusal once per source: `refused_before` says it was).
    pub(super) fn choose(
        &self,
        site: Option<&str>,
        from: SocketAddr,
        host: &str,
        refused_before: bool,
        events: &mut Events<'_>,
    ) -> Chosen {
        let grouping = &self.settings.grouping;
        let choice = grouping.choose(site, from.ip(), host);
        let named = choice != crate::config::clusters::Choice::Default;
        let placed = self.names.place(choice, self.settings);
        if let Some((sent, change)) = &placed.renamed {
            let now = placed
                .cluster
                .as_ref()
                .map_or(&*self.settings.cluster_name, |c| &c.name);
            events.name_changed(from, "site", sent, now, *change);
        }
        if let Some(name) = &placed.refused {
            // Counted and logged once per source refused, not per record.
            if !refused_before {
                events.cluster_refused(from, name, grouping.max_clusters);
            }
        }
        if named {
            events.site_clusters(placed.site_clusters);
        }
        Chosen {
            cluster: placed.cluster,
            refused: placed.refused.is_some(),
        }
    }
}

/// What [`Placing::choose`] decided for a source.
pub(super) struct Chosen {
    pub(super) cluster: ClusterRef,
    /// Its site's own cluster found no room (`max_clusters`).
    pub(super) refused: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn site_names_cannot_escape_or_collide() {
        for (site, want) in [
            ("SITEA", Some("SITEA")),
            ("T2_US_Nebraska", Some("T2_US_Nebraska")),
            ("../x", Some("x")),
            ("..", None),
            (".", None),
            ("/", None),
            ("/etc/passwd", Some("etc_passwd")),
            ("__SummaryInfo__", Some("SummaryInfo__")),
            ("a b\"<&>", Some("a_b____")),
            ("Zürich", Some("Z_rich")),
            ("日本", None),
            ("", None),
        ] {
            assert_eq!(site_cluster_name(site).as_deref(), want, "{site:?}");
        }
        let long = "x".repeat(300);
        assert_eq!(site_cluster_name(&long).unwrap().len(), MAX_CLUSTER_NAME);
    }
}
