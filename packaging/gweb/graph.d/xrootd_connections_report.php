<?php
/* xrootd_connections_report: 'Connections', with its legend's numbers as %6.2lf.
 * ganglia-web prints a JSON report's as %5.1lf%s, which shows an average
 * of 2/3 of a count as 666.7m.
 * Written by `xrd2ganglia gweb`; run it again rather than editing this.
 * ganglia-web calls graph_xrootd_connections_report() with $rrd_dir set to the host's RRD
 * directory, or in cluster context to __SummaryInfo__ (the site's sums). */
function graph_xrootd_connections_report(&$rrdtool_graph)
{
    global $conf, $rrd_dir, $size;
    $series = array(
        array('xrootd.link.num', '3366cc', 'open', 'LINE2'),
        array('xrootd.link.tot', 'dc3912', 'new', 'LINE2'),
    );
    $format = '%6.2lf';
    $stats = array(
        'now' => array('LAST', 'Now'),
        'min' => array('MINIMUM', 'Min'),
        'avg' => array('AVERAGE', 'Avg'),
        'max' => array('MAXIMUM', 'Max'),
    );
    $width = 0;
    foreach ($series as $s) {
        $width = max($width, strlen($s[2]));
    }
    $defs = '';
    $draw = '';
    $stacked = false;
    foreach ($series as $n => $s) {
        list($metric, $color, $label, $kind) = $s;
        $file = $rrd_dir . '/' . $metric . '.rrd';
        if (!is_file($file)) {
            continue;
        }
        $id = 'a' . $n;
        $defs .= " DEF:'$id'='$file':'sum':AVERAGE ";
        // As graph.php draws JSON reports: the first of a stack an AREA.
        if ($kind === 'STACK' && !$stacked) {
            $kind = 'AREA';
            $stacked = true;
        }
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
    $rrdtool_graph['title'] = 'Connections';
    $rrdtool_graph['vertical-label'] = 'connections, connections/s';
    $rrdtool_graph['lower-limit'] = '0';
    $rrdtool_graph['height'] += ($size == 'medium') ? 28 : 0;
    return $rrdtool_graph;
}
