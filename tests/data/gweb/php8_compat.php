<?php
// PHP 8 compatibility for Debian 12's ganglia-web 3.7.5, loaded first by
// the test harness's private conf.php (tests/common/gweb.rs). Never part of
// a system's ganglia-web.

// each() was removed in PHP 8; Dwoo, ganglia-web's template engine, uses it
// in several loops.
if (!function_exists('each')) {
    function each(&$array)
    {
        $key = key($array);
        if ($key === null) {
            return false;
        }
        $value = current($array);
        next($array);
        return array(1 => $value, 'value' => $value, 0 => $key, 'key' => $key);
    }
}

// PHP 7 read an undefined constant as its own name, with a warning;
// cluster_view.php writes $cluster[LOCALTIME].
if (!defined('LOCALTIME')) {
    define('LOCALTIME', 'LOCALTIME');
}
