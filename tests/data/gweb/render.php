<?php
// php-cli in place of a web server: `php render.php GWEB_DIR QUERY` runs
// ganglia-web's graph.php with $_GET = QUERY and writes what it would
// answer (a PNG, or with json=1 the series' data) to stdout.
$gweb = $argv[1];
parse_str($argv[2], $_GET);
$_SERVER['REQUEST_METHOD'] = 'GET';
$_SERVER['SCRIPT_NAME'] = '/graph.php';
chdir($gweb);
include $gweb . '/graph.php';
