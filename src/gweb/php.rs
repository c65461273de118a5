//! The reports ganglia-web draws by calling PHP (`graph.d/*.php`): a
//! fixed-series report with a legend format of its own, and a report over
//! list entries, which finds their RRDs when it draws.

use std::fmt::Write as _;

use super::names::Names;
use super::reports::{COLORS, ListReport, PerServer, Pgm, Style};
use super::{JsonReport, units};

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

/// The statistics a legend shows, as ganglia-web names them
/// (`$conf['graphreport_stat_items']`), with rrdtool's VDEF function and
/// the legend's word: PHP, for the reports that print their own legend.
const PHP_STATS: &str = r#"    $stats = array(
        'now' => array('LAST', 'Now'),
        'min' => array('MINIMUM', 'Min'),
        'avg' => array('AVERAGE', 'Avg'),
        'max' => array('MAXIMUM', 'Max'),
    );
"#;

/// A series' legend numbers, as ganglia-web's `legendEntry` writes them
/// (a VDEF and a GPRINT per statistic asked for, the line ended) but
/// printed as `$format`: PHP, inside the loop over the series, with
/// `$id` the series' DEF.
const PHP_LEGEND: &str = r#"        if (!empty($conf['graphreport_stats'])) {
            $gprint = array();
            foreach ($stats as $item => $stat) {
                if (in_array($item, $conf['graphreport_stat_items'])) {
                    $draw .= "VDEF:{$id}_$item=$id,{$stat[0]} ";
                    $gprint[] = "GPRINT:'{$id}_$item':'{$stat[1]}\\:$format";
                }
            }
            if (count($gprint) > 0) {
                $draw .= implode("' ", $gprint) . "\\l' ";
            }
        }
"#;

/// The end of a report drawing series with their legends (PHP, inside the
/// loop over the series as it closes): the legend's numbers
/// ([`PHP_LEGEND`]), the series or ganglia-web's "no metrics" rule, the
/// title and vertical label, and the graph returned.
fn php_series_end(title: &str, vlabel: &str) -> String {
    format!(
        r#"{legend}    }}
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
        legend = PHP_LEGEND,
        title = php_str(title),
        vlabel = php_str(vlabel),
    )
}

/// A fixed-series report as PHP, to print its legend's numbers as
/// `format` (ganglia-web prints a JSON report's as `%5.1lf%s`): the
/// series, title and vertical label of its JSON form, drawn as graph.php
/// draws a JSON report (its DEFs, then each line or area with its legend,
/// the stats `graphreport_stats` and `graphreport_stat_items` ask for), so
/// its CSV and JSON export read it alike.
pub(super) fn php_series_report(r: &JsonReport, format: &str) -> String {
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
{stats}    $width = 0;
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
{end}"#,
        title = php_str(r.title),
        format_php = php_str(format),
        stats = PHP_STATS,
        end = php_series_end(r.title, &r.vertical_label),
    )
}

/// The PHP report: ganglia-web calls `graph_NAME(&$rrdtool_graph)` with
/// `$rrd_dir` set to the host's RRD directory (or the cluster's
/// `__SummaryInfo__`); it draws every `PREFIX<key>SUFFIX.rrd` there.
pub(super) fn php_report(r: &ListReport, names: &Names<'_>) -> String {
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
/* {name}: {title}, {shape} per list entry.
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
                . {draw} . $colors[$n % count($colors)] . ":'$label $shown' ";
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
        draw = match r.style {
            Style::Line => "\"LINE2:'$id'#\"",
            Style::Stack => "(($n === 0) ? 'AREA' : 'STACK') . \":'$id'#\"",
        },
        shape = match r.style {
            Style::Line => "one line",
            Style::Stack => "stacked, one area",
        },
    )
}

/// A per-server graph of a count as PHP, to print its legend's numbers
/// as `format` (ganglia-web prints an aggregate graph's as `%5.1lf%s`):
/// drawn as ganglia-web draws the view's aggregate graphs (one series per
/// server that has the metric, of every cluster, every host but the
/// gateway's own, sorted by host, stacked, coloured by
/// `$conf['graph_colors']`), whatever the context it is called in: the
/// servers' RRDs are found under `$conf['rrds']`.
pub(super) fn php_per_server_report(
    key: &str,
    p: &PerServer,
    names: &Names<'_>,
    format: &str,
) -> String {
    let name = names.report(key);
    let metrics = names
        .instances(Pgm::Xrootd)
        .map(|h| php_str(&names.metric(h, p.name_var)))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"<?php
/* {name}: {title}, with its legend's numbers as {format}.
 * ganglia-web prints an aggregate graph's as %5.1lf%s, which shows an
 * average of 2/3 of a count as 666.7m.
 * Written by `xrd2ganglia gweb`; run it again rather than editing this.
 * ganglia-web calls graph_{name}() in any context: it draws every server
 * of every cluster under $conf['rrds'] that has one of the metrics (every
 * host but the gateway's own), stacked, as the view's aggregate graphs. */
function graph_{name}(&$rrdtool_graph)
{{
    global $conf, $size;
    $metrics = array({metrics});
    $own = {own};
    $format = {format_php};
{stats}    $root = $conf['rrds'];
    $found = array();
    $clusters = @scandir($root);
    foreach (($clusters === false ? array() : $clusters) as $cluster) {{
        $hosts = ($cluster[0] === '.' || $cluster === '__SummaryInfo__')
            ? false : @scandir("$root/$cluster");
        foreach (($hosts === false ? array() : $hosts) as $host) {{
            if ($host[0] === '.' || $host === '__SummaryInfo__'
                || strncasecmp($host, $own, strlen($own)) === 0) {{
                continue;
            }}
            foreach ($metrics as $metric) {{
                $file = "$root/$cluster/$host/$metric.rrd";
                if (is_file($file)) {{
                    $label = count($metrics) > 1 ? "$host $metric" : $host;
                    $found[] = array($host, $cluster, $label, $file);
                }}
            }}
        }}
    }}
    sort($found);
    $width = 0;
    foreach ($found as $s) {{
        $width = max($width, strlen($s[2]));
    }}
    $colors = $conf['graph_colors'];
    $defs = '';
    $draw = '';
    foreach ($found as $n => $s) {{
        list($host, $cluster, $label, $file) = $s;
        $id = 'a' . $n;
        $defs .= " DEF:'$id'='$file':'sum':AVERAGE ";
        $kind = ($n === 0) ? 'AREA' : 'STACK';
        $color = $colors[$n % count($colors)];
        $draw .= "$kind:'$id'#$color:'" . str_pad($label, $width) . "' ";
{end}"#,
        title = php_str(p.title),
        own = php_str(crate::daemon::self_metrics::OWN_HOST_PREFIX),
        format_php = php_str(format),
        stats = PHP_STATS,
        end = php_series_end(p.title, units(p.var)),
    )
}
