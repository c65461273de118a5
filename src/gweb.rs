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

pub mod reports;

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use serde::Serialize;

use crate::catalog;
use crate::mapping::{HeaderParts, NameTemplate, VarFilter};
use reports::{COLORS, LIST_REPORTS, ListReport, Pgm, REPORTS, Report, STANDARD_REPORTS, Style};

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

/// Names derived from the site: reports, view, metrics.
struct Names<'s> {
    site: &'s Site,
    headers: Vec<(Pgm, HeaderParts)>,
    /// `` or `ds_pfc_`: between `xrootd_` and the report key.
    tag: String,
    view: String,
}

impl<'s> Names<'s> {
    fn new(site: &'s Site) -> Result<Names<'s>, String> {
        if site.instances.is_empty() {
            return Err(
                "no instance name: give --instance NAME (anon for servers without -n)".into(),
            );
        }
        if site.naming.uses_site() && site.site.is_none() {
            return Err(format!(
                "metric_name {:?} uses {{site}}: give --site (xrootd's all.sitename)",
                site.naming.as_str()
            ));
        }
        if site.cluster.is_empty()
            || site.cluster.contains('/')
            || site.cluster.chars().any(char::is_control)
        {
            return Err(format!(
                "cluster name {:?}: must be non-empty, without '/' or control characters",
                site.cluster
            ));
        }
        let mut headers = Vec::new();
        let mut ids = Vec::new();
        for ins in &site.instances {
            for pgm in [Pgm::Xrootd, Pgm::Cmsd] {
                let h = HeaderParts::new(Some(pgm.as_str()), Some(ins), site.site.as_deref());
                if headers.iter().any(|(p, o)| *p == pgm && *o == h) {
                    return Err(format!("instance {ins:?} given twice"));
                }
                headers.push((pgm, h));
            }
            // A PHP function name: letters, digits, '_'.
            let id = HeaderParts::new(None, Some(ins), None)
                .ins
                .replace('-', "_");
            if !id.is_empty() {
                ids.push(id);
            }
        }
        let tag = if ids.is_empty() {
            String::new()
        } else {
            format!("{}_", ids.join("_"))
        };
        let view = format!(
            "xrootd{}",
            tag.strip_suffix('_')
                .map(|t| format!("_{t}"))
                .unwrap_or_default()
        );
        Ok(Names {
            site,
            headers,
            tag,
            view,
        })
    }

    fn report(&self, key: &str) -> String {
        format!("xrootd_{}{key}_report", self.tag)
    }

    fn instances(&self, pgm: Pgm) -> impl Iterator<Item = &HeaderParts> {
        self.headers
            .iter()
            .filter(move |(p, _)| *p == pgm)
            .map(|(_, h)| h)
    }

    fn metric(&self, h: &HeaderParts, var: &str) -> String {
        self.site.naming.name_of(h, var)
    }

    /// The legend: the label, after the program when a report shows two
    /// and after the instance when the site has several.
    fn label(&self, pgms: usize, pgm: Pgm, h: &HeaderParts, label: &str) -> String {
        let mut out = String::new();
        if self.site.instances.len() > 1 {
            out.push_str(if h.ins.is_empty() { "anon" } else { &h.ins });
            out.push(' ');
        }
        if pgms > 1 {
            out.push_str(pgm.as_str());
            out.push(' ');
        }
        out.push_str(label);
        out
    }
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

/// A PHP single-quoted string literal.
fn php_str(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// The PHP report's `$lists` rows: `array(PREFIX, SUFFIX, LABEL,
/// IS_PATH),` for each field of each instance.
fn php_lists(r: &ListReport, names: &Names<'_>) -> String {
    let mut pgms: Vec<Pgm> = r.fields.iter().map(|f| f.pgm).collect();
    pgms.sort();
    pgms.dedup();
    let mut lists = String::new();
    for f in r.fields {
        for h in names.instances(f.pgm) {
            let pattern = names.metric(h, &format!("{}.*.{}", f.list, f.field));
            let (prefix, suffix) = pattern.split_once('*').unwrap_or((&pattern, ""));
            let label = names.label(pgms.len(), f.pgm, h, f.label);
            // A path's key is the path with `/` made `_` (`_` is `/`,
            // `_data` is `/data`): its first `_` is shown as the `/` it was.
            let is_path = if f.list == "oss.paths" {
                "true"
            } else {
                "false"
            };
            let _ = writeln!(
                lists,
                "        array({}, {}, {}, {is_path}),",
                php_str(prefix),
                php_str(suffix),
                php_str(&label)
            );
        }
    }
    lists
}

/// A fixed-series report as PHP, to print its legend's numbers as
/// `format` (ganglia-web prints a JSON report's as `%5.1lf%s`): the
/// series, title and vertical label of its JSON form, drawn as graph.php
/// draws a JSON report (its DEFs, then each line or area with its legend,
/// the stats `graphreport_stats` and `graphreport_stat_items` ask for), so
/// its CSV and JSON export read it alike.
fn php_series_report(r: &JsonReport, format: &str) -> String {
    let name = &r.report_name;
    let mut series = String::new();
    for s in &r.series {
        let _ = writeln!(
            series,
            "        array({}, {}, {}, {}),",
            php_str(&s.metric),
            php_str(s.color),
            php_str(&s.label),
            php_str(if s.kind == "stack" { "STACK" } else { "LINE2" })
        );
    }
    format!(
        r#"<?php
/* {name}: {title}, with its legend's numbers as {format}.
 * ganglia-web prints a JSON report's as %5.1lf%s, which shows an average
 * of 2/3 of a count as 666.7m.
 * Written by `xrd2ganglia gweb`; run it again rather than editing this.
 * ganglia-web calls graph_{name}() with $rrd_dir set to the host's RRD
 * directory, or in cluster context to __SummaryInfo__ (the site's sums). */
function graph_{name}(&$rrdtool_graph)
{{
    global $conf, $rrd_dir, $size;
    $series = array(
{series}    );
    $format = {format_php};
    $stats = array(
        'now' => array('LAST', 'Now'),
        'min' => array('MINIMUM', 'Min'),
        'avg' => array('AVERAGE', 'Avg'),
        'max' => array('MAXIMUM', 'Max'),
    );
    $width = 0;
    foreach ($series as $s) {{
        $width = max($width, strlen($s[2]));
    }}
    $defs = '';
    $draw = '';
    $stacked = false;
    foreach ($series as $n => $s) {{
        list($metric, $color, $label, $kind) = $s;
        $file = $rrd_dir . '/' . $metric . '.rrd';
        if (!is_file($file)) {{
            continue;
        }}
        $id = 'a' . $n;
        $defs .= " DEF:'$id'='$file':'sum':AVERAGE ";
        // As graph.php draws JSON reports: the first of a stack an AREA.
        if ($kind === 'STACK' && !$stacked) {{
            $kind = 'AREA';
            $stacked = true;
        }}
        $draw .= "$kind:'$id'#$color:'" . str_pad($label, $width) . "' ";
        if (!empty($conf['graphreport_stats'])) {{
            $gprint = array();
            foreach ($stats as $item => $stat) {{
                if (in_array($item, $conf['graphreport_stat_items'])) {{
                    $draw .= "VDEF:{{$id}}_$item=$id,{{$stat[0]}} ";
                    $gprint[] = "GPRINT:'{{$id}}_$item':'{{$stat[1]}}\\:$format";
                }}
            }}
            if (count($gprint) > 0) {{
                $draw .= implode("' ", $gprint) . "\\l' ";
            }}
        }}
    }}
    if ($defs === '') {{
        $rrdtool_graph['series'] = 'HRULE:1#FFCC33:"No matching metrics detected or RRDs not readable"';
    }} else {{
        $rrdtool_graph['series'] = $defs . ' ' . $draw;
    }}
    $rrdtool_graph['title'] = {title};
    $rrdtool_graph['vertical-label'] = {vlabel};
    $rrdtool_graph['lower-limit'] = '0';
    $rrdtool_graph['height'] += ($size == 'medium') ? 28 : 0;
    return $rrdtool_graph;
}}
"#,
        title = php_str(r.title),
        vlabel = php_str(&r.vertical_label),
        format_php = php_str(format),
    )
}

/// The PHP report: ganglia-web calls `graph_NAME(&$rrdtool_graph)` with
/// `$rrd_dir` set to the host's RRD directory (or the cluster's
/// `__SummaryInfo__`); it draws every `PREFIX<key>SUFFIX.rrd` there.
fn php_report(r: &ListReport, names: &Names<'_>) -> String {
    let name = names.report(r.key);
    let lists = php_lists(r, names);
    let colors = COLORS
        .iter()
        .map(|c| php_str(c))
        .collect::<Vec<_>>()
        .join(", ");
    let vlabel = units(&r.fields[0].catalog_name());
    format!(
        r#"<?php
/* {name}: {title}, one line per list entry.
 * Written by `xrd2ganglia gweb`; run it again rather than editing this.
 * ganglia-web calls graph_{name}() with $rrd_dir set to the host's RRD
 * directory, or in cluster context to __SummaryInfo__ (the site's sums).
 * Entries are found by their RRD's name: PREFIX KEY SUFFIX.rrd. */
function graph_{name}(&$rrdtool_graph)
{{
    global $rrd_dir, $size;
    $lists = array(
{lists}    );
    $colors = array({colors});
    $files = @scandir($rrd_dir);
    if ($files === false) {{
        $files = array();
    }}
    $series = '';
    $n = 0;
    foreach ($lists as $list) {{
        list($prefix, $suffix, $label, $is_path) = $list;
        $keys = array();
        foreach ($files as $file) {{
            $metric = substr($file, 0, -4);
            if (substr($file, -4) !== '.rrd'
                || strlen($metric) <= strlen($prefix) + strlen($suffix)
                || strncmp($metric, $prefix, strlen($prefix)) !== 0
                || substr($metric, -strlen($suffix)) !== $suffix) {{
                continue;
            }}
            $key = substr($metric, strlen($prefix), strlen($metric) - strlen($prefix) - strlen($suffix));
            if (preg_match('/^[A-Za-z0-9_-]+$/', $key)) {{
                $keys[] = $key;
            }}
        }}
        sort($keys);
        foreach ($keys as $key) {{
            $id = 'e' . $n;
            $file = $rrd_dir . '/' . $prefix . $key . $suffix . '.rrd';
            $shown = ($is_path && $key[0] === '_') ? '/' . substr($key, 1) : $key;
            // As graph.php writes JSON reports' series: its CSV and JSON
            // export read them back in this form.
            $series .= "DEF:'$id'='$file':'sum':AVERAGE "
                . "LINE2:'$id'#" . $colors[$n % count($colors)] . ":'$label $shown' ";
            $n++;
        }}
    }}
    if ($series === '') {{
        $series = 'HRULE:1#FFCC33:"No matching metrics detected or RRDs not readable"';
    }}
    $rrdtool_graph['title'] = {title};
    $rrdtool_graph['vertical-label'] = {vlabel};
    $rrdtool_graph['lower-limit'] = '0';
    $rrdtool_graph['height'] += ($size == 'medium') ? 28 : 0;
    $rrdtool_graph['series'] = $series;
    return $rrdtool_graph;
}}
"#,
        title = php_str(r.title),
        vlabel = php_str(vlabel),
    )
}

#[derive(Serialize)]
struct View {
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

/// Per-server graphs in the view: (title, catalog variable, name's variable).
const PER_SERVER: &[(&str, &str, &str)] = &[
    ("Throughput out per server", "link.out", "link.out"),
    ("Throughput in per server", "link.in", "link.in"),
    ("Open connections per server", "link.num", "link.num"),
    (
        "Free space per server and path",
        "oss.paths.i.free",
        "oss.paths.*.free",
    ),
];

fn view(site: &Site, names: &Names<'_>) -> View {
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
    for (title, var, name_var) in PER_SERVER {
        let alternatives: Vec<String> = names
            .instances(Pgm::Xrootd)
            .map(|h| {
                let pattern = names.metric(h, name_var);
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
            title: (*title).to_string(),
            vertical_label: units(var),
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
struct ClusterReports {
    included_reports: Vec<String>,
    excluded_reports: Vec<&'static str>,
}

fn cluster(site: &Site, names: &Names<'_>) -> ClusterReports {
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
