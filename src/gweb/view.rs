//! The files under `conf/`: the view of the whole site (its reports, and
//! graphs per server) and the reports on a cluster's pages.

use serde::Serialize;

use super::names::Names;
use super::reports::{LIST_REPORTS, PER_SERVER, Pgm, REPORTS, STANDARD_REPORTS};
use super::{Site, units};

#[derive(Serialize)]
pub(super) struct View {
    view_name: String,
    view_type: &'static str,
    default_size: &'static str,
    items: Vec<ViewItem>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ViewItem {
    /// A report in a cluster's context (its `__SummaryInfo__`), or with
    /// no cluster in the grid's (ganglia-web's "meta" context: the
    /// `__SummaryInfo__` at the top of `rrd_rootdir`, which gmetad keeps
    /// as the sum of every cluster it polls).
    Report {
        graph: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        cluster: Option<String>,
    },
    Aggregate {
        aggregate_graph: &'static str,
        host_regex: [Regex; 1],
        metric_regex: [Regex; 1],
        graph_type: &'static str,
        title: String,
        vertical_label: &'static str,
    },
}

#[derive(Serialize)]
struct Regex {
    regex: String,
}

pub(super) fn view(site: &Site, names: &Names<'_>) -> View {
    let mut items: Vec<ViewItem> = REPORTS
        .iter()
        .map(|r| r.key)
        .chain(LIST_REPORTS.iter().map(|r| r.key))
        .map(|key| ViewItem::Report {
            graph: names.report(key),
            // A gateway of many clusters: the federation's totals, every
            // site's (a new one's too) without a file per site.
            cluster: (!site.every_cluster).then(|| site.cluster.clone()),
        })
        .collect();
    for p in PER_SERVER {
        if let Some(key) = p.report {
            // A count: a PHP report of ours, for its legend (it finds
            // every server's RRDs itself, in whatever context).
            items.push(ViewItem::Report {
                graph: names.report(key),
                cluster: None,
            });
            continue;
        }
        let alternatives: Vec<String> = names
            .instances(Pgm::Xrootd)
            .map(|h| {
                let pattern = names.metric(h, p.name_var);
                pattern
                    .split('*')
                    .map(regex_escape)
                    .collect::<Vec<_>>()
                    .join("[A-Za-z0-9_-]+")
            })
            .collect();
        items.push(ViewItem::Aggregate {
            aggregate_graph: "true",
            // Every host but the gateway's own (`xrd2ganglia@NAME`), as
            // ganglia-web reads it: preg_match("/$regex/i", $host).
            host_regex: [Regex {
                regex: format!(
                    "^(?!{})",
                    regex_escape(crate::daemon::self_metrics::OWN_HOST_PREFIX)
                ),
            }],
            metric_regex: [Regex {
                regex: format!("^({})$", alternatives.join("|")),
            }],
            graph_type: "stack",
            title: p.title.to_string(),
            vertical_label: units(p.var),
        });
    }
    View {
        view_name: names.view.clone(),
        view_type: "standard",
        default_size: "medium",
        items,
    }
}

fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if !c.is_ascii_alphanumeric() && c != '_' && c != '-' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[derive(Serialize)]
pub(super) struct ClusterReports {
    pub(super) included_reports: Vec<String>,
    pub(super) excluded_reports: Vec<&'static str>,
}

pub(super) fn cluster(site: &Site, names: &Names<'_>) -> ClusterReports {
    ClusterReports {
        included_reports: REPORTS
            .iter()
            .map(|r| r.key)
            .chain(LIST_REPORTS.iter().map(|r| r.key))
            .map(|k| names.report(k))
            .collect(),
        excluded_reports: if site.keep_standard_reports {
            Vec::new()
        } else {
            STANDARD_REPORTS.to_vec()
        },
    }
}
