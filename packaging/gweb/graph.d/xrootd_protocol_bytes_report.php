<?php
/* xrootd_protocol_bytes_report: 'Bytes by protocol', stacked, one area per list entry.
 * Written by `xrd2ganglia gweb`; run it again rather than editing this.
 * ganglia-web calls graph_xrootd_protocol_bytes_report() with $rrd_dir set to the host's RRD
 * directory, or in cluster context to __SummaryInfo__ (the site's sums).
 * Entries are found by their RRD's name: PREFIX KEY SUFFIX.rrd. */
function graph_xrootd_protocol_bytes_report(&$rrdtool_graph)
{
    global $rrd_dir, $size;
    $lists = array(
        array('xrootd.detailed.protocol.', '.bytes_read', 'read', false),
        array('xrootd.detailed.protocol.', '.bytes_written', 'written', false),
    );
    $colors = array('3366cc', 'dc3912', 'ff9900', '109618', '990099', '0099c6', 'dd4477', '66aa00', 'b82e2e', '316395', '994499', '22aa99');
    $files = @scandir($rrd_dir);
    if ($files === false) {
        $files = array();
    }
    $series = '';
    $n = 0;
    foreach ($lists as $list) {
        list($prefix, $suffix, $label, $is_path) = $list;
        $keys = array();
        foreach ($files as $file) {
            $metric = substr($file, 0, -4);
            if (substr($file, -4) !== '.rrd'
                || strlen($metric) <= strlen($prefix) + strlen($suffix)
                || strncmp($metric, $prefix, strlen($prefix)) !== 0
                || substr($metric, -strlen($suffix)) !== $suffix) {
                continue;
            }
            $key = substr($metric, strlen($prefix), strlen($metric) - strlen($prefix) - strlen($suffix));
            if (preg_match('/^[A-Za-z0-9_-]+$/', $key)) {
                $keys[] = $key;
            }
        }
        sort($keys);
        foreach ($keys as $key) {
            $id = 'e' . $n;
            $file = $rrd_dir . '/' . $prefix . $key . $suffix . '.rrd';
            $shown = ($is_path && $key[0] === '_') ? '/' . substr($key, 1) : $key;
            // As graph.php writes JSON reports' series: its CSV and JSON
            // export read them back in this form.
            $series .= "DEF:'$id'='$file':'sum':AVERAGE "
                . (($n === 0) ? 'AREA' : 'STACK') . ":'$id'#" . $colors[$n % count($colors)] . ":'$label $shown' ";
            $n++;
        }
    }
    if ($series === '') {
        $series = 'HRULE:1#FFCC33:"No matching metrics detected or RRDs not readable"';
    }
    $rrdtool_graph['title'] = 'Bytes by protocol';
    $rrdtool_graph['vertical-label'] = 'bytes/s';
    $rrdtool_graph['lower-limit'] = '0';
    $rrdtool_graph['height'] += ($size == 'medium') ? 28 : 0;
    $rrdtool_graph['series'] = $series;
    return $rrdtool_graph;
}
