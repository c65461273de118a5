<?php
/* xrootd_connections_per_server_report: 'Open connections per server', with its legend's numbers as %6.2lf.
 * ganglia-web prints an aggregate graph's as %5.1lf%s, which shows an
 * average of 2/3 of a count as 666.7m.
 * Written by `xrd2ganglia gweb`; run it again rather than editing this.
 * ganglia-web calls graph_xrootd_connections_per_server_report() in any context: it draws every server
 * of every cluster under $conf['rrds'] that has one of the metrics (every
 * host but the gateway's own), stacked, as the view's aggregate graphs. */
function graph_xrootd_connections_per_server_report(&$rrdtool_graph)
{
    global $conf, $size;
    $metrics = array('xrootd.link.num');
    $own = 'xrd2ganglia@';
    $format = '%6.2lf';
    $stats = array(
        'now' => array('LAST', 'Now'),
        'min' => array('MINIMUM', 'Min'),
        'avg' => array('AVERAGE', 'Avg'),
        'max' => array('MAXIMUM', 'Max'),
    );
    $root = $conf['rrds'];
    $found = array();
    $clusters = @scandir($root);
    foreach (($clusters === false ? array() : $clusters) as $cluster) {
        $hosts = ($cluster[0] === '.' || $cluster === '__SummaryInfo__')
            ? false : @scandir("$root/$cluster");
        foreach (($hosts === false ? array() : $hosts) as $host) {
            if ($host[0] === '.' || $host === '__SummaryInfo__'
                || strncasecmp($host, $own, strlen($own)) === 0) {
                continue;
            }
            foreach ($metrics as $metric) {
                $file = "$root/$cluster/$host/$metric.rrd";
                if (is_file($file)) {
                    $label = count($metrics) > 1 ? "$host $metric" : $host;
                    $found[] = array($host, $cluster, $label, $file);
                }
            }
        }
    }
    sort($found);
    $width = 0;
    foreach ($found as $s) {
        $width = max($width, strlen($s[2]));
    }
    $colors = $conf['graph_colors'];
    $defs = '';
    $draw = '';
    foreach ($found as $n => $s) {
        list($host, $cluster, $label, $file) = $s;
        $id = 'a' . $n;
        $defs .= " DEF:'$id'='$file':'sum':AVERAGE ";
        $kind = ($n === 0) ? 'AREA' : 'STACK';
        $color = $colors[$n % count($colors)];
        $draw .= "$kind:'$id'#$color:'" . str_pad($label, $width) . "' ";
        if (!empty($conf['graphreport_stats'])) {
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
    }
    if ($defs === '') {
        $rrdtool_graph['series'] = 'HRULE:1#FFCC33:"No matching metrics detected or RRDs not readable"';
    } else {
        $rrdtool_graph['series'] = $defs . ' ' . $draw;
    }
    $rrdtool_graph['title'] = 'Open connections per server';
    $rrdtool_graph['vertical-label'] = 'connections';
    $rrdtool_graph['lower-limit'] = '0';
    $rrdtool_graph['height'] += ($size == 'medium') ? 28 : 0;
    return $rrdtool_graph;
}
