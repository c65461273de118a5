//! A private copy of Debian 12's ganglia-web 3.7.5 (package
//! ganglia-webfrontend), made to run on PHP 8.2, reading a test's RRDs and
//! gmetad: graph.php through php-cli, pages through `php -S`. The system's
//! ganglia-web is only read, never changed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::{Proc, Scratch, free_port, require, spawn};

const SYSTEM_GWEB: &str = "/usr/share/ganglia-webfrontend";
const SYSTEM_GWEB_CONF: &str = "/var/lib/ganglia-web/conf";

/// The PHP 8 fixes Debian 12's ganglia-web needs, as the docs ship them
/// and tell a site to apply (docs/ganglia-web.md): applied as is to the
/// copy. A hunk that does not apply fails the harness: another ganglia-web
/// needs the patch looked at again.
const PHP8_PATCH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../docs/ganglia-web-php8.patch"
);

pub struct Gweb {
    pub dir: PathBuf,
    pub root: PathBuf,
    _scratch: Scratch,
}

impl Gweb {
    /// A copy of ganglia-web reading RRDs under `rrds` and gmetad's
    /// interactive port, with `graph_d` and `conf` (directories of a
    /// `xrd2ganglia gweb` output) installed as a site would.
    pub fn new(rrds: &Path, gmetad_interactive_port: u16, gweb_files: &Path) -> Gweb {
        require("php", "php-cli");
        assert!(
            Path::new(SYSTEM_GWEB).join("graph.php").exists(),
            "{SYSTEM_GWEB}/graph.php not found: install Debian's ganglia-webfrontend (.ci/run does)"
        );
        let scratch = Scratch::new("gweb");
        let root = scratch.path().join("gweb");
        copy_tree(Path::new(SYSTEM_GWEB), &root);
        let patch = Command::new(require("patch", "patch"))
            .args(["-p1", "--forward", "--batch", "-d"])
            .arg(&root)
            .stdin(std::fs::File::open(PHP8_PATCH).unwrap())
            .output()
            .unwrap();
        assert!(
            patch.status.success(),
            "{PHP8_PATCH} does not apply to {SYSTEM_GWEB}: {}{}",
            String::from_utf8_lossy(&patch.stdout),
            String::from_utf8_lossy(&patch.stderr)
        );
        let data = crate::checkout().join("tests/data/gweb");
        for f in ["render.php", "router.php"] {
            std::fs::copy(data.join(f), root.join(f)).unwrap();
        }
        // Every path ganglia-web writes (its metrics cache, views, dwoo's
        // templates, events) derives from gweb_confdir in conf_default.php,
        // before conf.php is read: the copy's points at this directory, so
        // nothing of the system's (/var/lib/ganglia-web) is read or written
        // and tests running side by side share nothing.
        let dir = scratch.path().to_path_buf();
        let conf_default = root.join("conf_default.php");
        let text = std::fs::read_to_string(&conf_default).unwrap();
        let system_dir = "$conf['gweb_confdir'] = \"/var/lib/ganglia-web\";";
        assert!(
            text.contains(system_dir),
            "conf_default.php: {system_dir:?} not found; this ganglia-web needs another look"
        );
        std::fs::write(
            &conf_default,
            text.replace(
                system_dir,
                &format!("$conf['gweb_confdir'] = \"{}\";", dir.display()),
            ),
        )
        .unwrap();
        // Debian's conf.php (its JavaScript paths), without the system's
        // /etc override, then this copy's data sources.
        let debian = std::fs::read_to_string(root.join("conf.php")).unwrap();
        let debian = debian.replace(
            "/etc/ganglia-webfrontend/conf.php",
            &dir.join("no-such-conf.php").display().to_string(),
        );
        std::fs::write(root.join("conf_debian.php"), debian).unwrap();
        let conf_dir = dir.join("conf");
        for d in ["conf", "dwoo/compiled", "dwoo/cache"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        // ganglia-web's own conf files as the package installs them
        // (default.json: the standard four reports; never a running site's
        // metrics cache or views), then the generated ones.
        for f in [
            "default.json",
            "view_default.json",
            "events.json",
            "event_color.json",
        ] {
            let from = Path::new(SYSTEM_GWEB_CONF).join(f);
            std::fs::copy(&from, conf_dir.join(f))
                .unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        }
        copy_tree(&gweb_files.join("conf"), &conf_dir);
        copy_tree(&gweb_files.join("graph.d"), &root.join("graph.d"));
        std::fs::write(
            root.join("conf.php"),
            format!(
                r#"<?php
require_once __DIR__ . "/php8_compat.php";
include __DIR__ . "/conf_debian.php";
$conf['rrds'] = "{rrds}";
$conf['ganglia_ip'] = "127.0.0.1";
$conf['ganglia_port'] = {gmetad_interactive_port};
$conf['overlay_events'] = false;
"#,
                rrds = rrds.display(),
            ),
        )
        .unwrap();
        Gweb {
            dir,
            root,
            _scratch: scratch,
        }
    }

    /// Adds `php` (conf.php lines, as a site adds its own) to the copy's
    /// conf.php: it takes effect with the next page or graph.
    pub fn add_conf(&self, php: &str) {
        let path = self.root.join("conf.php");
        let mut conf = std::fs::read_to_string(&path).unwrap();
        conf.push_str(php);
        std::fs::write(&path, conf).unwrap();
    }

    /// graph.php's answer to `query`, reloaded while an RRD it reads is
    /// being written by gmetad ([`crate::while_locked`]).
    fn run_graph(&self, query: &str) -> (Vec<u8>, String) {
        let out = crate::while_locked(|| {
            let mut c = Command::new("php");
            c.arg(self.root.join("render.php"))
                .arg(&self.root)
                .arg(query);
            c
        });
        (
            out.stdout,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// What graph.php answers to `query`: (stdout, stderr).
    pub fn graph(&self, query: &str) -> (Vec<u8>, String) {
        let (out, err) = self.run_graph(query);
        assert!(!err.contains("Fatal error"), "graph.php?{query}: {err}");
        (out, err)
    }

    /// What each series of a report adds up to over the graph's time: the
    /// sum of its values times the export's step (for a rate, the total).
    pub fn totals(&self, query: &str) -> Vec<(String, f64)> {
        let (out, _) = self.graph(&format!("{query}&json=1"));
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let points = s["datapoints"].as_array().unwrap();
                let step = points[1][1].as_f64().unwrap() - points[0][1].as_f64().unwrap();
                let sum: f64 = points.iter().filter_map(|p| p[0].as_f64()).sum();
                (
                    s["metric_name"].as_str().unwrap().trim().to_string(),
                    sum * step,
                )
            })
            .collect()
    }

    /// A report's series as graph.php exports them (`json=1`): (label,
    /// values that are not NaN, last first). None matched: none (stock
    /// graph.php then fails its export: "can't make an xport without
    /// contents").
    pub fn series(&self, query: &str) -> Vec<(String, Vec<f64>)> {
        let (out, err) = self.run_graph(&format!("{query}&json=1"));
        if err.contains("ERROR: can't make an xport without contents") {
            return Vec::new();
        }
        assert!(
            !err.contains("Fatal error"),
            "graph.php?{query}&json=1: {err}"
        );
        let v: serde_json::Value = serde_json::from_slice(&out)
            .unwrap_or_else(|e| panic!("graph.php?{query}&json=1: {e}: {err}"));
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let label = s["metric_name"].as_str().unwrap().trim().to_string();
                let mut values: Vec<f64> = s["datapoints"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|p| p[0].as_f64())
                    .collect();
                values.reverse();
                (label, values)
            })
            .collect()
    }

    /// Every graph.php image of a page (without the per-server, aggregate,
    /// ones unless `aggregates`), asked for as a browser would: each must be
    /// a PNG. How many there were.
    pub fn render_images(&self, body: &str, aggregates: bool) -> usize {
        let mut images = 0;
        for src in body.split("src=\"").skip(1) {
            let src = src.split('"').next().unwrap();
            let Some(query) = src.trim_start_matches("./").strip_prefix("graph.php?") else {
                continue;
            };
            let query = query.replace("&amp;", "&");
            if !aggregates && query.contains("aggregate=1") {
                continue;
            }
            let (png, _) = self.graph(&query);
            assert!(
                png.starts_with(b"\x89PNG\r\n\x1a\n"),
                "graph.php?{query}: not a PNG"
            );
            images += 1;
        }
        images
    }

    /// ganglia-web's pages on 127.0.0.1, served by PHP's own web server.
    pub fn serve(&self) -> GwebServer {
        self.serve_on(free_port())
    }

    /// Like `serve`, on a port chosen before: the URL a gmetad's
    /// `authority` names, written in its gmetad.conf before this copy
    /// could be made (it reads that gmetad's RRDs).
    pub fn serve_on(&self, port: u16) -> GwebServer {
        let mut cmd = Command::new("php");
        // Without the opcode cache: with it (Debian enables it for PHP's
        // own server) a conf.php changed by add_conf is seen up to 2 s
        // late (opcache.revalidate_freq).
        cmd.args(["-d", "opcache.enable=0"])
            .args(["-S", &format!("127.0.0.1:{port}"), "-t"])
            .arg(&self.root)
            .arg(self.root.join("router.php"));
        let proc = spawn("php -S", cmd, &self.dir.join("php-server.log"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "php -S did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        GwebServer { proc, port }
    }
}

pub struct GwebServer {
    pub proc: Proc,
    pub port: u16,
}

impl GwebServer {
    pub fn url(&self, query: &str) -> String {
        format!("http://127.0.0.1:{}/?{query}", self.port)
    }

    /// GET /?`query`: (HTTP status, body).
    pub fn get(&self, query: &str) -> (u16, String) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        write!(
            s,
            "GET /?{query} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        let text = String::from_utf8_lossy(&buf).into_owned();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
        (status, body.to_string())
    }

    /// A screenshot of the page by headless Chromium.
    pub fn screenshot(&self, query: &str, size: (u32, u32), out: &Path) {
        let chromium = require("chromium", "chromium");
        // A profile of its own, and nothing fetched but the page.
        let profile = Scratch::new("chromium");
        let status = Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--virtual-time-budget=10000",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(format!("--window-size={},{}", size.0, size.1))
            .arg(format!("--screenshot={}", out.display()))
            .arg(self.url(query))
            .output()
            .unwrap();
        assert!(
            status.status.success() && out.exists(),
            "chromium: {}",
            String::from_utf8_lossy(&status.stderr)
        );
    }
}

/// What `xrd2ganglia gweb` writes for the gateway's `config`, into `out`
/// (its graph.d and conf, as a site installs them); it must exit 0.
pub fn gweb_files(config: &Path, out: &Path) {
    let run = Command::new(crate::gateway_bin())
        .arg("gweb")
        .arg("--config")
        .arg(config)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
}

/// The reports `gweb` lists for every cluster (its default.json, in
/// `files`): at least one.
pub fn included_reports(files: &Path) -> Vec<String> {
    let default: serde_json::Value =
        serde_json::from_slice(&std::fs::read(files.join("conf/default.json")).unwrap()).unwrap();
    let reports: Vec<String> = default["included_reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    assert!(!reports.is_empty());
    reports
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        // Real files, not links: graph.php refuses reports whose real path
        // is outside its graph.d.
        let meta = std::fs::metadata(e.path()).unwrap();
        if meta.is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}
