<?php
// Router for `php -S`: ganglia-web's pages load Debian's shared JavaScript
// from /javascript (Apache's javascript-common alias); everything else is
// the private copy's own.
$path = parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);
if (strncmp($path, '/javascript/', 12) === 0) {
    $file = realpath('/usr/share/javascript/' . substr($path, 12));
    if ($file === false || !is_file($file) || strncmp($file, '/usr/share/javascript/', 22) !== 0) {
        http_response_code(404);
        return true;
    }
    $types = array('js' => 'application/javascript', 'css' => 'text/css', 'png' => 'image/png', 'gif' => 'image/gif');
    $ext = pathinfo($file, PATHINFO_EXTENSION);
    header('Content-Type: ' . (isset($types[$ext]) ? $types[$ext] : 'application/octet-stream'));
    readfile($file);
    return true;
}
return false;
