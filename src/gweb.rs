//! `xrd2ganglia gweb`: ganglia-web files for the metrics `serve` sends.
//!
//! From [`reports`] (what each report shows), the catalog (units) and the
//! naming settings (metric names), [`generate`] writes:
//! * `graph.d/xrootd_<tag>NAME_report.json`: one JSON report per
//!   [`reports::REPORTS`] entry (PHP, `..._report.php`, for one with its
//!   own legend format: ganglia-web prints a JSON report's as `%5.1lf%s`),
//!   and `graph.d/..._report.php` per [`reports::LIST_REPORTS`] entry
//!   (list entries differ per site, so the PHP finds their RRDs when it
//!   draws);
//! * `conf/view_xrootd<_tag>.json`: a view of the whole site (every report
//!   in cluster context, where gmetad's summary gives the site's totals;
//!   for a gateway of many clusters in the grid's, every cluster's sums;
//!   and per-server aggregate graphs, over every cluster);
//! * `conf/cluster_NAME.json`: the reports on the cluster's page and on
//!   each of its hosts' pages, without ganglia-web's standard four; or,
//!   for a gateway of many clusters, `conf/default.json`: the same on
//!   every cluster's pages (a new site's too, with nothing to write).
//!
//! `<tag>` is empty for servers without `-n` (anon), which the files under
//! `packaging/gweb` are for; otherwise the instance names joined by `_`.
//!
//! Here: the site, the JSON reports and the checks. `gweb/names.rs`: every
//! name derived from the site; `gweb/php.rs`: the PHP reports;
//! `gweb/view.rs`: the view and the cluster's file.

mod names;
mod php;
pub mod reports;
mod view;

use std::io;
use std::path::Path;

use serde::Serialize;

use crate::catalog;
use crate::mapping::{NameTemplate, VarFilter};
use names::Names;
use php::{php_per_server_report, php_report, php_series_report};
use reports::{
    COLORS, COUNT_LEGEND, LIST_REPORTS, PER_SERVER, Pgm, REPORTS, Report, STANDARD_REPORTS, Style,
};
use view::{cluster, view};

/// What the files are generated for.
#[derive(Clone, Debug)]
pub struct Site {
    /// The `metric_name` setting.
    pub naming: NameTemplate,
    /// The config's include/exclude: a report may not show what it leaves out.
    pub filter: VarFilter,
    /// xrootd `-n` names; `anon` for servers started without.
    pub instances: Vec<String>,
    /// `all.sitename`, for a `metric_name` with `{site}`.
    pub site: Option<String>,
    /// The Ganglia cluster the servers' hosts are in.
    pub cluster: String,
    /// Keep ganglia-web's standard reports on the cluster's pages (for a
    /// cluster whose hosts also run gmond).
    pub keep_standard_reports: bool,
    /// The reports go on every cluster's pages (`conf/default.json`), not
    /// `cluster`'s alone: for a gateway with many clusters
    /// (`cluster_by_site`, `[[cluster]]`), whose new sites then show them
    /// with nothing written for them (docs/clusters.md).
    pub every_cluster: bool,
}

/// One generated file: its path under the output directory and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct File {
    pub path: String,
    pub text: String,
}

/// Every file for `site`, in a fixed order; an error says what to change.
pub fn generate(site: &Site) -> Result<Vec<File>, String> {
    let names = Names::new(site)?;
    check_filter(site)?;
    let mut files = Vec::new();
    for report in REPORTS {
        let drawn = json_report(report, &names);
        files.push(match report.legend {
            None => File {
                path: format!("graph.d/{}.json", names.report(report.key)),
                text: json(&drawn)?,
            },
            Some(format) => File {
                path: format!("graph.d/{}.php", names.report(report.key)),
                text: php_series_report(&drawn, format),
            },
        });
    }
    for report in LIST_REPORTS {
        files.push(File {
            path: format!("graph.d/{}.php", names.report(report.key)),
            text: php_report(report, &names),
        });
    }
    for p in PER_SERVER {
        if let Some(key) = p.report {
            files.push(File {
                path: format!("graph.d/{}.php", names.report(key)),
                text: php_per_server_report(key, p, &names, COUNT_LEGEND),
            });
        }
    }
    files.push(File {
        path: format!("conf/view_{}.json", names.view),
        text: json(&view(site, &names))?,
    });
    if site.every_cluster {
        // ganglia-web reads conf/default.json for every cluster's and
        // host's page, then merges conf/cluster_NAME.json if there is one;
        // the stock file lists the standard four reports.
        let mut reports = cluster(site, &names);
        if site.keep_standard_reports {
            reports
                .included_reports
                .extend(STANDARD_REPORTS.iter().map(|r| r.to_string()));
        }
        reports.excluded_reports.clear();
        files.push(File {
            path: "conf/default.json".into(),
            text: json(&reports)?,
        });
    } else {
        files.push(File {
            path: format!("conf/cluster_{}.json", site.cluster.replace(' ', "_")),
            text: json(&cluster(site, &names))?,
        });
    }
    Ok(files)
}

/// Writes `files` under `dir` (creating `dir/graph.d` and `dir/conf`).
pub fn write(dir: &Path, files: &[File]) -> io::Result<()> {
    for f in files {
        let path = dir.join(&f.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, &f.text)?;
    }
    Ok(())
}

fn units(var: &str) -> &'static str {
    catalog::lookup(var).map(|s| s.units).unwrap_or("")
}

/// A report may not show a variable the config leaves out: its graph would
/// stay empty with nothing to say why.
fn check_filter(site: &Site) -> Result<(), String> {
    let fixed = REPORTS
        .iter()
        .flat_map(|r| r.series.iter().map(move |s| (r.key, s.var.to_string())));
    let listed = LIST_REPORTS
        .iter()
        .flat_map(|r| r.fields.iter().map(move |f| (r.key, f.catalog_name())));
    for (key, var) in fixed.chain(listed) {
        if site.filter.excludes(&var, &var) && !catalog::is_derived(&var) {
            return Err(format!(
                "the {key} report shows {var}, which the config's exclude leaves out: add it to include"
            ));
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct JsonReport {
    report_name: String,
    report_type: &'static str,
    title: &'static str,
    vertical_label: String,
    series: Vec<JsonSeries>,
}

#[derive(Serialize)]
struct JsonSeries {
    metric: String,
    color: &'static str,
    label: String,
    line_width: &'static str,
    #[serde(rename = "type")]
    kind: &'static str,
}

fn json_report(r: &Report, names: &Names<'_>) -> JsonReport {
    let mut pgms: Vec<Pgm> = r.series.iter().map(|s| s.pgm).collect();
    pgms.sort();
    pgms.dedup();
    let mut series = Vec::new();
    for pgm in &pgms {
        for h in names.instances(*pgm) {
            for s in r.series.iter().filter(|s| s.pgm == *pgm) {
                series.push(JsonSeries {
                    metric: names.metric(h, &s.name_var()),
                    color: COLORS[series.len() % COLORS.len()],
                    label: names.label(pgms.len(), *pgm, h, s.label),
                    line_width: "2",
                    kind: match r.style {
                        Style::Line => "line",
                        Style::Stack => "stack",
                    },
                });
            }
        }
    }
    let vertical_label = r.vertical_label.map(str::to_string).unwrap_or_else(|| {
        let mut all: Vec<&str> = Vec::new();
        for s in r.series {
            let u = units(s.var);
            if !all.contains(&u) {
                all.push(u);
            }
        }
        all.join(", ")
    });
    JsonReport {
        report_name: names.report(r.key),
        report_type: "standard",
        title: r.title,
        vertical_label,
        series,
    }
}

fn json<T: Serialize>(value: &T) -> Result<String, String> {
    serde_json::to_string_pretty(value)
        .map(|mut s| {
            s.push('\n');
            s
        })
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
