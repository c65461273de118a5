//! `xrd2ganglia gweb` and the ganglia-web files it writes: the shipped
//! files are its output, and every report renders through ganglia-web's
//! own graph.php against RRDs a real gmetad wrote from real records.

use xrd2ganglia_testkit as common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{Gmetad, Gweb, Scratch, Site, replay};

const BIN: &str = env!("CARGO_BIN_EXE_xrd2ganglia");

fn gweb(args: &[&str], out: &Path) -> std::process::Output {
    Command::new(BIN)
        .arg("gweb")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

/// Every file under `dir`, by path relative to it, with its bytes.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for sub in std::fs::read_dir(dir).unwrap() {
        let sub = sub.unwrap().path();
        for f in std::fs::read_dir(&sub).unwrap() {
            let f = f.unwrap().path();
            let rel = f.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            files.push((rel, std::fs::read(&f).unwrap()));
        }
    }
    files.sort();
    files
}

#[test]
fn the_shipped_files_are_what_gweb_writes_for_the_shipped_config() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Scratch::new("gweb");
    let o = gweb(
        &[
            "--config",
            manifest.join("conf/xrd2ganglia.toml").to_str().unwrap(),
        ],
        out.path(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let written = tree(out.path());
    let shipped = tree(&manifest.join("packaging/gweb"));
    let names = |t: &[(String, Vec<u8>)]| t.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&shipped), names(&written));
    for ((name, a), (_, b)) in shipped.iter().zip(&written) {
        assert!(
            a == b,
            "packaging/gweb/{name} is not what `xrd2ganglia gweb` writes: run\n  \
             cargo run -- gweb --config conf/xrd2ganglia.toml --out packaging/gweb"
        );
    }
    // It says what it wrote, one path a line.
    let listed = String::from_utf8(o.stdout).unwrap();
    assert_eq!(listed.lines().count(), 16, "{listed}");
    // PHP's own parser accepts the PHP report.
    for (name, _) in written.iter().filter(|(n, _)| n.ends_with(".php")) {
        let lint = Command::new("php")
            .arg("-l")
            .arg(out.path().join(name))
            .output()
            .expect("php (Debian package php-cli; .ci/run installs it)");
        assert!(
            lint.status.success(),
            "{}",
            String::from_utf8_lossy(&lint.stdout)
        );
    }
}

#[test]
fn gweb_refuses_what_cannot_work_with_exit_2_and_a_reason() {
    let dir = Scratch::new("gweb-bad");
    let conf = dir.path().join("site.toml");
    std::fs::write(&conf, "metric_name = \"{site}.{pgm}.{var}\"\n").unwrap();
    let o = gweb(
        &["--config", conf.to_str().unwrap()],
        &dir.path().join("out"),
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "xrd2ganglia gweb: metric_name \"{site}.{pgm}.{var}\" uses {site}: give --site (xrootd's all.sitename)\n"
    );
    assert!(!dir.path().join("out").exists());
    let o = gweb(
        &[
            "--config",
            conf.to_str().unwrap(),
            "--site",
            "T2_X",
            "--instance",
            "ds",
        ],
        &dir.path().join("out"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = std::fs::read_to_string(
        dir.path()
            .join("out/graph.d/xrootd_ds_throughput_report.json"),
    )
    .unwrap();
    assert!(
        report.contains("\"metric\": \"T2_X.xrootd.link.in\""),
        "{report}"
    );
    // A config that leaves out what a report shows.
    std::fs::write(&conf, "exclude = [\"xrootd.err\"]\n").unwrap();
    let o = gweb(
        &["--config", conf.to_str().unwrap()],
        &dir.path().join("out2"),
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "xrd2ganglia gweb: the problems report shows xrootd.err, which the config's exclude leaves out: add it to include\n"
    );
}

/// A site whose gmetad polls the gateway (send = false, an XML port) and
/// whose cluster has its own name: the files are for that cluster. Where
/// the gateway sends, and gmond.conf, do not matter to `gweb`.
#[test]
fn gweb_takes_a_gmetad_polled_sites_config() {
    let dir = Scratch::new("gweb-xml");
    let conf = dir.path().join("site.toml");
    std::fs::write(
        &conf,
        "send = false\nxml_listen = [\"127.0.0.1:8651\"]\ncluster_name = \"T2 Site\"\n",
    )
    .unwrap();
    let o = gweb(&["--config", conf.to_str().unwrap()], dir.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cluster = std::fs::read_to_string(dir.path().join("conf/cluster_T2_Site.json")).unwrap();
    assert!(
        cluster.contains("\"xrootd_throughput_report\""),
        "{cluster}"
    );
    let view = std::fs::read_to_string(dir.path().join("conf/view_xrootd.json")).unwrap();
    assert!(view.contains("\"cluster\": \"T2 Site\""), "{view}");
}

/// Six servers as a site runs them: a data server, a redirector (xrootd
/// and cmsd), two caching proxies (XCache's disk cache, pfc, which counts
/// no hits; a memory cache, rmc, which does), a server with several
/// spaces, and a data server with its cmsd. The real records, each from
/// its own address and name; their instance names become `anon` (servers
/// started without -n, which the shipped reports are for).
const SERVERS: &[(&str, &str, &[&str])] = &[
    ("ds.example", "127.0.9.1", &["records/ds_loaded.xml"]),
    (
        "mgr.example",
        "127.0.9.2",
        &["records/mgr_xrootd.xml", "records/mgr_cmsd.xml"],
    ),
    ("pfc.example", "127.0.9.3", &["gstream/pfc_summary.xml"]),
    ("rmc.example", "127.0.9.6", &["records/rmc_loaded.xml"]),
    ("spaces.example", "127.0.9.4", &["records/spaces.xml"]),
    (
        "srv.example",
        "127.0.9.5",
        &["records/srv_xrootd.xml", "records/srv_cmsd.xml"],
    ),
];
/// The XCache's g-stream: a datagram of its run (`stod` is its record's
/// `tos`) with three file closes, sent every round from its address.
const GSTREAM: (&str, &str) = ("127.0.9.3", "gstream/pfc_1.bin");

/// A file under tests/data.
fn data(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}
const CLUSTER: &str = "XRootD";

/// The detailed stream of ds.example's xrootd (its `stod` is its record's
/// `tos`) in round `round`: two logins (sss in group atlas over xroot,
/// group cms over http), a file each opened and closed, both gone.
/// Every round adds, per round, 3,000,000 bytes read and 1,000,000
/// written for atlas (xroot), 2,000,000 and 500,000 for cms (http).
fn detailed(round: u64) -> Vec<Vec<u8>> {
    const STOD: u32 = 1_795_303_118;
    let packet = |code: u8, pseq: u64, body: &[u8]| {
        let mut p = vec![code, pseq as u8];
        p.extend_from_slice(&((8 + body.len()) as u16).to_be_bytes());
        p.extend_from_slice(&STOD.to_be_bytes());
        p.extend_from_slice(body);
        p
    };
    let rec = |kind: u8, flag: u8, id: u32, body: &[u8]| {
        let mut r = vec![kind, flag];
        r.extend_from_slice(&((8 + body.len()) as u16).to_be_bytes());
        r.extend_from_slice(&id.to_be_bytes());
        r.extend_from_slice(body);
        r
    };
    let base = 1 + 10 * round as u32;
    let mut out = Vec::new();
    let mut files = rec(2, 1, 0, &[0; 16]);
    for (i, (prot, group, read, written)) in [
        ("xroot", "atlas", 3_000_000u64, 1_000_000u64),
        ("http", "cms", 2_000_000, 500_000),
    ]
    .into_iter()
    .enumerate()
    {
        let (user, file) = (base + 2 * i as u32, base + 2 * i as u32 + 1);
        let mut login = user.to_be_bytes().to_vec();
        login.extend_from_slice(
            format!("{prot}/u{user}.1:2@client.example.org\n&p=sss&n=u{user}&h=client.example.org&o=&r=&g={group}&m=").as_bytes(),
        );
        out.push(packet(b'u', 2 * round + i as u64, &login));
        let mut open = 0u64.to_be_bytes().to_vec();
        open.extend_from_slice(&user.to_be_bytes());
        open.extend_from_slice(b"/f\0\0");
        files.extend(rec(1, 1, file, &open));
        let mut close = read.to_be_bytes().to_vec();
        close.extend_from_slice(&0u64.to_be_bytes());
        close.extend_from_slice(&written.to_be_bytes());
        files.extend(rec(0, 0, file, &close));
        files.extend(rec(4, 0, user, &[]));
    }
    out.push(packet(b'f', round, &files));
    out
}

/// Counters that advance every round, by section and tag: each by what
/// the capture holds, plus `step` for those a busier server would move too
/// (the captures' readv, sync, getfile... are 0), so that every series of
/// every report moves. The cache section's counters only multiply: their
/// non-zero values are the proxy's own.
const GROWING: &[(&str, &[&str], u64)] = &[
    ("link", &["in", "out"], 0),
    ("link", &["tot"], 1),
    (
        "xrootd",
        &[
            "open", "rf", "rd", "pr", "rv", "wr", "wv", "sync", "getf", "putf", "misc", "err",
            "rdr", "dly",
        ],
        1,
    ),
    ("cmsm", &["t"], 1),
    ("proc", &["s"], 1),
    ("cache", &["in", "out", "hits", "miss", "pass", "cnt"], 0),
];

/// The record `name` as server `host` sends it in round `round`: its
/// counters at `n * (round + 1) + step * round` (`n` as captured).
fn record(name: &str, host: &str, round: u64) -> Vec<u8> {
    let text = String::from_utf8(data(name)).unwrap();
    let text = text
        .trim_end()
        .replacen("src=\"vm:", &format!("src=\"{host}:"), 1);
    let ins = text
        .split(" ins=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let text = text.replacen(&format!(" ins=\"{ins}\""), " ins=\"anon\"", 1);
    // Section by section: `<stats id="ID"...>...</stats>` (cmsm's node
    // list nests entries as `<stats id="0">`: they are part of it).
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("<stats id=\"") {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let id = rest["<stats id=\"".len()..].split('"').next().unwrap();
        let len = section_len(rest);
        let mut section = rest[..len].to_string();
        for (_, tags, step) in GROWING.iter().filter(|(s, _, _)| *s == id) {
            for tag in *tags {
                section = grow(&section, tag, round, *step);
            }
        }
        out.push_str(&section);
        rest = &rest[len..];
    }
    out.push_str(rest);
    out.into_bytes()
}

/// The length of the `<stats ...>...</stats>` element `text` starts with.
fn section_len(text: &str) -> usize {
    let mut depth = 0;
    let mut at = 0;
    loop {
        let open = text[at..].find("<stats ").map(|i| at + i);
        let close = at + text[at..].find("</stats>").unwrap();
        match open {
            Some(o) if o < close => {
                depth += 1;
                at = o + 1;
            }
            _ => {
                depth -= 1;
                at = close + "</stats>".len();
                if depth == 0 {
                    return at;
                }
            }
        }
    }
}

/// Every `<tag>N` in `section` whose N is the element's own number (ended
/// by its end tag, by a child element, or by 5.5's stray `>`), advanced to
/// round `round`.
fn grow(section: &str, tag: &str, round: u64, step: u64) -> String {
    let open = format!("<{tag}>");
    let mut out = String::new();
    let mut rest = section;
    while let Some(at) = rest.find(&open) {
        out.push_str(&rest[..at + open.len()]);
        rest = &rest[at + open.len()..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && matches!(rest.as_bytes().get(digits), Some(b'<' | b'>')) {
            let n: u64 = rest[..digits].parse().unwrap();
            out.push_str(&(n * (round + 1) + step * round).to_string());
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    out
}

/// The number in `<stats id="SECTION">...<TAG>N</TAG>` of record `name`.
fn record_value(name: &str, section: &str, tag: &str) -> f64 {
    let text = String::from_utf8(data(name)).unwrap();
    let at = text.find(&format!("<stats id=\"{section}\"")).unwrap();
    let rest = &text[at..];
    let rest = &rest[rest.find(&format!("<{tag}>")).unwrap() + tag.len() + 2..];
    rest[..rest.find('<').unwrap()].parse().unwrap()
}

/// A site's worth of real records through the gateway into a real gmetad.
struct Replayed {
    site: Site,
    /// When the first record was sent.
    start: u64,
}

impl Replayed {
    fn gmetad(&self) -> &Gmetad {
        self.site.gmetad()
    }
}

fn site(rounds: u64) -> Replayed {
    let site = Site::start(1, "stats_interval = 0\nself_metrics_interval = 0\n");
    let (gw, gmetad) = (&site.gateway, site.gmetad());
    let probes = [
        ("ds.example", "xrootd.link.in"),
        ("mgr.example", "cmsd.cmsm.sel.t"),
        ("pfc.example", "xrootd.pfc.bytes_hit"),
        ("rmc.example", "xrootd.cache.rmc.rd.hits"),
        ("spaces.example", "xrootd.oss.space.public.free"),
        ("ds.example", "xrootd.detailed.vo.atlas.bytes_read"),
    ];
    let start = replay::unix_now();
    for round in 0..rounds {
        for (host, ip, records) in SERVERS {
            for r in *records {
                gw.send_as(ip, &record(r, host, round));
            }
        }
        gw.send_as(GSTREAM.0, &data(GSTREAM.1));
        for d in detailed(round) {
            gw.send_as("127.0.9.1", &d);
        }
        // gmetad has every server's round before the next one is sent: a
        // poll stamped a second after the round was sent (RRDs keep whole
        // seconds) saw it. So each round is a step of their graphs, however
        // late a poll came on a loaded machine: waiting for the first poll
        // only let a first poll that created hundreds of RRDs run past the
        // 8 s heartbeat, after which the next rounds' growth was unknown and
        // a host's graph read 0 throughout.
        let seen_at = replay::unix_now() + 1;
        for (host, metric) in probes {
            let path = gmetad.rrd_path(CLUSTER, host, metric);
            gmetad.wait_for_update(&path, seen_at, Duration::from_secs(30));
        }
    }
    let end = replay::unix_now();
    let summary = gmetad.summary_rrd_path(CLUSTER, "xrootd.link.in");
    gmetad.wait_for_update(&summary, end, Duration::from_secs(30));
    Replayed { site, start }
}

fn shipped() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/gweb")
}

/// A shipped report: its name, its series' labels and colours in the
/// order they are drawn, and whether they are stacked.
struct Shipped {
    name: String,
    series: Vec<(String, [u8; 3])>,
    stacked: bool,
}

/// Every shipped report of the cluster's and hosts' pages (the PHP
/// report's entries are the records' paths and spaces, coloured in turn
/// from its palette).
fn shipped_reports() -> Vec<Shipped> {
    let rgb = |hex: &str| -> [u8; 3] {
        let n = u32::from_str_radix(hex, 16).unwrap();
        [(n >> 16) as u8, (n >> 8) as u8, n as u8]
    };
    let mut reports = Vec::new();
    for e in std::fs::read_dir(shipped().join("graph.d")).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        // A per-server graph of the view, not a report of the pages: the
        // view's checks draw it.
        if name.ends_with("_per_server_report") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let (series, stacked) = if path.extension().unwrap() == "json" {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["report_name"], name.as_str());
            let series = v["series"].as_array().unwrap();
            (
                series
                    .iter()
                    .map(|s| {
                        (
                            s["label"].as_str().unwrap().to_string(),
                            rgb(s["color"].as_str().unwrap()),
                        )
                    })
                    .collect(),
                series.iter().all(|s| s["type"] == "stack"),
            )
        } else if let Some(rows) = text.split("$series = array(\n").nth(1) {
            // A fixed-series PHP report: `array(METRIC, COLOUR, LABEL, KIND),`.
            let rows: Vec<Vec<&str>> = rows[..rows.find("    );").unwrap()]
                .lines()
                .map(|l| {
                    l.trim()
                        .trim_start_matches("array(")
                        .trim_end_matches("),")
                        .split(", ")
                        .map(|f| f.trim_matches('\''))
                        .collect()
                })
                .collect();
            (
                rows.iter().map(|r| (r[2].to_string(), rgb(r[1]))).collect(),
                rows.iter().all(|r| r[3] == "STACK"),
            )
        } else {
            let palette = text.split("$colors = array(").nth(1).unwrap();
            let palette: Vec<[u8; 3]> = palette[..palette.find(')').unwrap()]
                .split(", ")
                .map(|c| rgb(c.trim_matches('\'')))
                .collect();
            // A path's legend is the path: `/`, not its key `_`. The
            // detailed stream's reports: the VOs and protocols of the
            // replay's logins, and `other`, read then written, stacked.
            let (labels, stacked): (&[&str], bool) = match name.as_str() {
                "xrootd_space_report" => (
                    &[
                        "path /",
                        "path /mem",
                        "space fast",
                        "space legacy",
                        "space public",
                    ],
                    false,
                ),
                "xrootd_vo_bytes_report" => (
                    &[
                        "read atlas",
                        "read cms",
                        "read other",
                        "written atlas",
                        "written cms",
                        "written other",
                    ],
                    true,
                ),
                "xrootd_protocol_bytes_report" => (
                    &[
                        "read http",
                        "read other",
                        "read xroot",
                        "written http",
                        "written other",
                        "written xroot",
                    ],
                    true,
                ),
                other => panic!("a list report the test does not know: {other}"),
            };
            (
                labels
                    .iter()
                    .zip(palette)
                    .map(|(l, c)| (l.to_string(), c))
                    .collect(),
                stacked,
            )
        };
        reports.push(Shipped {
            name,
            series,
            stacked,
        });
    }
    reports.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(reports.len(), 13);
    reports
}

/// Pixels of colour `rgb` in a PNG image.
fn pixels_of(png_bytes: &[u8], rgb: [u8; 3]) -> usize {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let frame = reader.next_frame(&mut buf).unwrap();
    let samples = frame.color_type.samples();
    buf[..frame.buffer_size()]
        .chunks(samples)
        .filter(|p| p[..3] == rgb)
        .count()
}

fn labels(series: &[(String, Vec<f64>)]) -> Vec<String> {
    let mut l: Vec<String> = series
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(l, _)| l.clone())
        .collect();
    l.sort();
    l
}

fn last(series: &[(String, Vec<f64>)], label: &str) -> f64 {
    let (_, v) = series
        .iter()
        .find(|(l, _)| l == label)
        .unwrap_or_else(|| panic!("no series {label:?} in {series:?}"));
    *v.first()
        .unwrap_or_else(|| panic!("{label:?} has no values"))
}

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n";

/// Checks that a connections legend's numbers read as numbers with two
/// decimals (`0.67`, `144.00`), never with an SI prefix (`666.7m`, what
/// ganglia-web's `%5.1lf%s` prints for 2/3); four for each series (Now,
/// Min, Avg, Max).
fn plain_numbers(name: &str, legend: &[(String, Vec<(String, String)>)]) {
    for (label, stats) in legend {
        assert_eq!(stats.len(), 4, "{name}: {label}: {stats:?}");
        for (stat, text) in stats {
            let plain = text.split_once('.').is_some_and(|(i, f)| {
                !i.is_empty()
                    && i.bytes().all(|b| b.is_ascii_digit())
                    && f.len() == 2
                    && f.bytes().all(|b| b.is_ascii_digit())
            });
            assert!(
                plain,
                "{name}: {label} {stat}: {text:?} is not a plain number"
            );
        }
    }
}

/// A graph's legend as real rrdtool renders it: graph.php's command (its
/// `debug=3` page, HTML-decoded) run through `rrdtool graphv` instead of
/// `graph`, which prints each legend text it draws (`legend[N] = "..."`).
/// Each series' label (trimmed), with its numbers: (`Now`, `1.00`), ...
fn rendered_legend(command: &str) -> Vec<(String, Vec<(String, String)>)> {
    let command = command
        .replace("<html><body>", "")
        .replace("</body></html>", "")
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    assert!(command.contains(" graph - "), "{command}");
    let command = command.replacen(" graph - ", " graphv /dev/null ", 1);
    // gmetad may be writing the RRD.
    let out = common::while_locked(|| {
        let mut c = Command::new("sh");
        c.arg("-c").arg(&command);
        c
    });
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{command}: {err}");
    let out = String::from_utf8(out.stdout).unwrap();
    let mut legend: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for line in out.lines().filter(|l| l.starts_with("legend[")) {
        let text = line.split_once(" = \"").unwrap().1.trim_end_matches('"');
        match text.trim().split_once(':') {
            Some((stat, value)) if ["Now", "Min", "Avg", "Max"].contains(&stat) => legend
                .last_mut()
                .unwrap_or_else(|| panic!("a number before any label: {out}"))
                .1
                .push((stat.to_string(), value.trim().to_string())),
            _ => legend.push((text.trim().to_string(), Vec::new())),
        }
    }
    legend
}

/// Each shipped report through ganglia-web's graph.php, in cluster context
/// (the site's totals from gmetad's summary) and on each host, with every
/// series drawn from data; the view's per-server graphs too.
#[test]
fn every_shipped_report_renders_through_graph_php_with_its_series() {
    let site = site(8);
    let gweb = Gweb::new(
        &site.gmetad().rrd_root,
        site.gmetad().interactive_port,
        &shipped(),
    );
    // The replay's minute only, so graph.php reads the 1 s RRA: over its
    // default hour it averages 12 s steps, and a step only partly known
    // (the replay's few seconds) is NaN.
    let window = format!("cs={}&ce={}", site.start - 10, replay::unix_now() + 1);
    // A minute before the replay: no data, so a PNG of it shows each
    // series' colour in its legend only.
    let empty_window = format!("cs={}&ce={}", site.start - 100, site.start - 40);
    for report in shipped_reports() {
        let name = &report.name;
        let mut expected: Vec<String> = report.series.iter().map(|(l, _)| l.clone()).collect();
        expected.sort();
        // The site: every series, from gmetad's __SummaryInfo__.
        let query = format!("c={CLUSTER}&g={name}&z=medium&{window}");
        let (png, _) = gweb.graph(&query);
        assert!(png.starts_with(PNG), "{name}: not a PNG");
        // Its title as rrdtool draws it (graph.php's command, debug=3):
        // the cluster's name, then the report's, no word twice.
        let (command, _) = gweb.graph(&format!("{query}&debug=3"));
        let command = String::from_utf8_lossy(&command).replace("&#039;", "'");
        let title = command
            .split("--title '")
            .nth(1)
            .and_then(|t| t.split('\'').next())
            .unwrap_or_else(|| panic!("{name}: no --title in {command}"));
        assert!(
            title.starts_with(&format!("{CLUSTER} Cluster ")),
            "{name}: {title}"
        );
        let mut words: Vec<String> = title.split_whitespace().map(str::to_lowercase).collect();
        words.sort();
        let n = words.len();
        words.dedup();
        assert_eq!(
            words.len(),
            n,
            "{name}: a word twice in its title {title:?}"
        );
        let series = gweb.series(&query);
        assert_eq!(labels(&series), expected, "{name} (cluster)");
        // Its legend as rrdtool renders it from graph.php's command: each
        // series' label, then its numbers (ganglia-web's Now, Min, Avg,
        // Max). Counts read as numbers: 2/3 of an open connection is
        // 0.67, not ganglia-web's `666.7m` (`%5.1lf%s`).
        let legend = rendered_legend(&command);
        for label in &expected {
            assert!(
                legend.iter().any(|(l, _)| l == label),
                "{name}: no {label:?} in its legend {legend:?}"
            );
        }
        // Its numbers, on the site's graph and on each host's below.
        if name == "xrootd_connections_report" {
            plain_numbers(name, &legend);
            // Max is the export's largest value, to the legend's 2 decimals.
            for (label, v) in &series {
                let peak = v.iter().copied().fold(0.0, f64::max);
                let (_, stats) = legend.iter().find(|(l, _)| l == label).unwrap();
                let max: f64 = stats
                    .iter()
                    .find(|(s, _)| s == "Max")
                    .unwrap()
                    .1
                    .parse()
                    .unwrap();
                assert!(
                    (max - peak).abs() <= 0.005 + 1e-9 * peak,
                    "{name}: {label}: legend Max {max}, export's largest {peak}"
                );
            }
        }
        let values = |label: &str| &series.iter().find(|(l, _)| l == label).unwrap().1;
        // Every series moves, but the schedulers' queues (empty in every
        // capture, a gauge drawn at 0) and XCache's bytes past its cache
        // (0 in every file_close record of the captures).
        for (label, v) in &series {
            // The detailed stream's `other`: every login of the replay
            // has its VO and protocol named.
            if !label.ends_with("queued jobs")
                && label != "past the cache"
                && !label.ends_with(" other")
            {
                assert!(
                    v.iter().any(|x| *x > 0.0),
                    "{name} (cluster): {label} is 0 throughout: {v:?}"
                );
            }
        }
        // The PNG shows them: each series has pixels of its colour beyond
        // its legend's, unless it is too small to see (under 2% of the
        // graph's top) or a later line with the same values covers it.
        let (empty, _) = gweb.graph(&format!("c={CLUSTER}&g={name}&z=medium&{empty_window}"));
        assert!(empty.starts_with(PNG), "{name} without data: not a PNG");
        let top = if report.stacked {
            let points = values(&report.series[0].0).len();
            (0..points)
                .map(|i| {
                    report
                        .series
                        .iter()
                        .map(|(l, _)| values(l).get(i).copied().unwrap_or(0.0))
                        .sum::<f64>()
                })
                .fold(0.0, f64::max)
        } else {
            series
                .iter()
                .flat_map(|(_, v)| v)
                .copied()
                .fold(0.0, f64::max)
        };
        let same = |a: &[f64], b: &[f64]| {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|(x, y)| (x - y).abs() <= 1e-6 * x.abs().max(y.abs()).max(1.0))
        };
        let mut checked = 0;
        for (i, (label, colour)) in report.series.iter().enumerate() {
            let v = values(label);
            let peak = v.iter().copied().fold(0.0, f64::max);
            let covered = !report.stacked
                && report.series[i + 1..]
                    .iter()
                    .any(|(later, _)| same(v, values(later)));
            if peak < 0.02 * top || covered {
                continue;
            }
            let drawn = pixels_of(&png, *colour).saturating_sub(pixels_of(&empty, *colour));
            assert!(
                drawn >= 20,
                "{name} (cluster): {label} (#{colour:02x?}, peak {peak}) has {drawn} pixels in the graph"
            );
            checked += 1;
        }
        assert!(checked > 0, "{name}: no series seen in the PNG");
        // The hosts: between them, every series; each host only its own.
        let mut seen = Vec::new();
        for (host, _, _) in SERVERS {
            let query = format!("c={CLUSTER}&h={host}&g={name}&z=medium&{window}");
            let (png, _) = gweb.graph(&query);
            assert!(png.starts_with(PNG), "{name} on {host}: not a PNG");
            seen.extend(labels(&gweb.series(&query)));
            if name == "xrootd_connections_report" {
                let (command, _) = gweb.graph(&format!("{query}&debug=3"));
                let command = String::from_utf8_lossy(&command).replace("&#039;", "'");
                plain_numbers(name, &rendered_legend(&command));
            }
        }
        seen.sort();
        seen.dedup();
        assert_eq!(seen, expected, "{name} (hosts)");
    }

    // Values: the site's total is the hosts' sum (gauges as the records
    // say), a host's rate is its own; sizes are bytes (KiB x 1024).
    let cluster = |report: &str| gweb.series(&format!("c={CLUSTER}&g={report}&z=medium&{window}"));
    let host = |h: &str, report: &str| {
        gweb.series(&format!("c={CLUSTER}&h={h}&g={report}&z=medium&{window}"))
    };
    let threads = |cmsd: bool| -> f64 {
        SERVERS
            .iter()
            .flat_map(|(_, _, records)| records.iter())
            .filter(|r| r.contains("cmsd") == cmsd)
            .map(|r| record_value(r, "sched", "threads"))
            .sum()
    };
    let xrootd_threads = threads(false);
    let sched = cluster("xrootd_scheduler_report");
    assert_eq!(last(&sched, "xrootd threads"), xrootd_threads);
    assert_eq!(last(&sched, "cmsd threads"), threads(true));
    assert_eq!(
        last(
            &host("ds.example", "xrootd_scheduler_report"),
            "xrootd threads"
        ),
        record_value("records/ds_loaded.xml", "sched", "threads")
    );
    let space = cluster("xrootd_space_report");
    assert_eq!(last(&space, "space public"), public_free_bytes());
    // Counters: rates, which over the replay add up to what the server
    // counted.
    let total = |q: &str, label: &str| {
        let t = gweb.totals(q);
        t.iter()
            .find(|(l, _)| l == label)
            .unwrap_or_else(|| panic!("{label}: {t:?}"))
            .1
    };
    // gmetad stores counters as COUNTER data sources: the rates add up to
    // the growth between the first and the last value it polled. The
    // replay waits for a poll of each round, so that is the growth of
    // rounds 1 to 7; whole rounds, nothing in between. On a loaded
    // machine the first poll, which creates every RRD, can end more than
    // the 8 s heartbeat before the next: round 1's growth is then unknown,
    // which leaves 6.
    let per_round = record_value("records/ds_loaded.xml", "link", "in");
    let ds_in = total(
        &format!("c={CLUSTER}&h=ds.example&g=xrootd_throughput_report&z=medium&{window}"),
        "in",
    );
    let rounds = ds_in / per_round;
    assert!(
        (5.98..=7.02).contains(&rounds) && (rounds - rounds.round()).abs() < 0.02,
        "ds.example read {ds_in} bytes in the graph: {rounds} rounds of {per_round}"
    );
    // The detailed stream: what the replay's logins moved, per VO and
    // per protocol, in whole rounds as the summary's counters.
    for (report, label, per_round) in [
        ("xrootd_vo_bytes_report", "read atlas", 3_000_000.0),
        ("xrootd_vo_bytes_report", "written cms", 500_000.0),
        ("xrootd_protocol_bytes_report", "read http", 2_000_000.0),
        ("xrootd_protocol_bytes_report", "written xroot", 1_000_000.0),
    ] {
        let moved = total(
            &format!("c={CLUSTER}&h=ds.example&g={report}&z=medium&{window}"),
            label,
        ) / per_round;
        assert!(
            (moved - rounds).abs() < 0.02,
            "{report} {label}: {moved} rounds, the summary's link.in {rounds}"
        );
    }
    let site_in = total(
        &format!("c={CLUSTER}&g=xrootd_throughput_report&z=medium&{window}"),
        "in",
    );
    // The site's total is the sum of its hosts' (gmetad sums the values
    // it polled; each host's RRD holds the same polls): equal but for the
    // RRDs' float rounding.
    let mut hosts_in = 0.0;
    for (h, _, _) in SERVERS {
        let q = format!("c={CLUSTER}&h={h}&g=xrootd_throughput_report&z=medium&{window}");
        if gweb.series(&q).iter().any(|(label, _)| label == "in") {
            hosts_in += total(&q, "in");
        }
    }
    assert!(
        hosts_in > ds_in,
        "hosts {hosts_in}, ds.example alone {ds_in}"
    );
    assert!(
        (site_in - hosts_in).abs() <= 1e-6 * hosts_in,
        "site {site_in}, its hosts' sum {hosts_in}"
    );

    // The view: its per-server graphs, one series per server that has the
    // metric, through graph.php's aggregate graphs (gmetad's metric list),
    // or for a count through a PHP report of ours (in the grid's context,
    // as the view asks for it: `c=` empty), for its legend.
    let view: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(shipped().join("conf/view_xrootd.json")).unwrap(),
    )
    .unwrap();
    let mut aggregates = 0;
    let mut php_reports = 0;
    for item in view["items"].as_array().unwrap() {
        let graph = item["graph"].as_str().unwrap_or("");
        let per_server_report = graph.ends_with("_per_server_report");
        if item["aggregate_graph"] != "true" && !per_server_report {
            assert_eq!(item["cluster"], CLUSTER);
            continue;
        }
        let query = if per_server_report {
            php_reports += 1;
            format!("g={graph}&c=&z=medium&{window}")
        } else {
            aggregates += 1;
            format!(
                "hreg[]={}&mreg[]={}&gtype={}&aggregate=1&z=medium&{window}",
                urlencode(item["host_regex"][0]["regex"].as_str().unwrap()),
                urlencode(item["metric_regex"][0]["regex"].as_str().unwrap()),
                item["graph_type"].as_str().unwrap(),
            )
        };
        let (png, _) = gweb.graph(&query);
        assert!(png.starts_with(PNG));
        // One series per (server, metric), its label starting with the server.
        let series = gweb.series(&query);
        let hosts: Vec<String> = labels(&series)
            .iter()
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect();
        let title = if per_server_report {
            "Open connections per server"
        } else {
            item["title"].as_str().unwrap()
        };
        if title.starts_with("Open connections") {
            // A count: its legend as rrdtool renders it from the command
            // graph.php builds (debug=3) reads as numbers, 0.67 and not
            // ganglia-web's `666.7m` (`%5.1lf%s`, what its aggregate
            // graphs print); Max is the export's largest value, to the
            // legend's 2 decimals.
            let (command, _) = gweb.graph(&format!("{query}&debug=3"));
            let command = String::from_utf8_lossy(&command).replace("&#039;", "'");
            let legend = rendered_legend(&command);
            assert_eq!(legend.len(), series.len(), "{title}: {legend:?}");
            plain_numbers(title, &legend);
            for (label, v) in &series {
                let peak = v.iter().copied().fold(0.0, f64::max);
                let (_, stats) = legend
                    .iter()
                    .find(|(l, _)| l == label)
                    .unwrap_or_else(|| panic!("{title}: no {label:?} in {legend:?}"));
                let max: f64 = stats
                    .iter()
                    .find(|(s, _)| s == "Max")
                    .unwrap()
                    .1
                    .parse()
                    .unwrap();
                assert!(
                    (max - peak).abs() <= 0.005 + 1e-9 * peak,
                    "{title}: {label}: legend Max {max}, export's largest {peak}"
                );
            }
        }
        let want: &[&str] = if title.starts_with("Free space") {
            // spaces.example has two paths; the proxies none.
            &[
                "ds.example",
                "mgr.example",
                "spaces.example",
                "spaces.example",
                "srv.example",
            ]
        } else {
            &[
                "ds.example",
                "mgr.example",
                "pfc.example",
                "rmc.example",
                "spaces.example",
                "srv.example",
            ]
        };
        assert_eq!(hosts, want, "{title}");
    }
    // Four per-server graphs: the count's (connections) a PHP report of
    // ours, for its legend, the others ganglia-web's aggregate graphs.
    assert_eq!((aggregates, php_reports), (3, 1));
}

/// spaces.xml's space "public": free KiB x 1024.
fn public_free_bytes() -> f64 {
    let text = String::from_utf8(data("records/spaces.xml")).unwrap();
    let at = text.find("<name>public</name>").unwrap();
    let rest = &text[at..];
    let rest = &rest[rest.find("<free>").unwrap() + 6..];
    rest[..rest.find('<').unwrap()].parse::<f64>().unwrap() * 1024.0
}

fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The cluster's page and a host's page show the reports (and not
/// ganglia-web's standard four, which have no data for these hosts); the
/// view lists its graphs.
#[test]
fn the_cluster_and_host_pages_show_the_reports() {
    let site = site(3);
    let gweb = Gweb::new(
        &site.gmetad().rrd_root,
        site.gmetad().interactive_port,
        &shipped(),
    );
    let server = gweb.serve();
    let reports: Vec<String> = shipped_reports().into_iter().map(|r| r.name).collect();
    for query in [
        format!("c={CLUSTER}"),
        format!("c={CLUSTER}&h=ds.example"),
        "tab=v&vn=xrootd".to_string(),
    ] {
        let (status, body) = server.get(&query);
        assert_eq!(status, 200, "?{query}: {body}");
        for r in &reports {
            assert!(body.contains(&format!("g={r}&")), "?{query}: no {r}");
        }
        for standard in ["load_report", "mem_report", "cpu_report", "network_report"] {
            assert!(
                !body.contains(&format!("g={standard}&")),
                "?{query}: shows {standard}"
            );
        }
        let images = gweb.render_images(&body, true);
        assert!(images >= reports.len(), "?{query}: {images} images");
    }
    // Stock settings: the cluster page's per-server graphs are load_one,
    // which the servers' hosts lack (drawn empty), under a stacked graph
    // of it.
    let (_, body) = server.get(&format!("c={CLUSTER}"));
    assert!(body.contains("m=load_one&"), "{body}");
    assert!(body.contains("stacked.php?"), "{body}");
    // docs/ganglia-web.md's settings for a ganglia-web that shows XRootD only: each
    // server's throughput out instead, every one drawn from its data, and
    // no stacked graph.
    gweb.add_conf(&readme_gweb_conf());
    let window = format!("cs={}&ce={}", site.start - 10, replay::unix_now() + 1);
    let (status, body) = server.get(&format!("c={CLUSTER}&{window}"));
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains("m=load_one&"), "{body}");
    assert!(!body.contains("stacked.php?"), "{body}");
    gweb.render_images(&body, true);
    for (host, _, _) in SERVERS {
        let src = body
            .split("src=\"")
            .map(|s| s.split('"').next().unwrap().replace("&amp;", "&"))
            .find(|s| s.contains("m=xrootd.link.out&") && s.contains(&format!("h={host}&")))
            .unwrap_or_else(|| panic!("no throughput graph of {host}: {body}"));
        let query = src.trim_start_matches("./graph.php?");
        let series = gweb.series(query);
        assert!(
            series.iter().any(|(_, v)| v.iter().any(|x| *x > 0.0)),
            "{host}: {series:?}"
        );
    }
    // ganglia-web's metrics cache (hosts and metrics, kept 20 minutes) is
    // this copy's: one shared with another test, an earlier run or the
    // system's would list other hosts, and would hide what a page does
    // when it must ask gmetad (the view's in_array() on PHP 8).
    assert!(
        gweb.dir.join("conf/ganglia_metrics.cache").exists(),
        "the metrics cache is not the private copy's"
    );
}

/// The conf.php lines docs/ganglia-web.md gives for a ganglia-web that
/// shows XRootD only: its first `php` block.
fn readme_gweb_conf() -> String {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ganglia-web.md"))
            .unwrap();
    let section = &page[page.find("A ganglia-web that shows XRootD only").unwrap()..];
    let block = &section[section.find("```php\n").expect(
        "docs/ganglia-web.md: no php block after \"A ganglia-web that shows XRootD only\"",
    ) + 7..];
    block[..block.find("```").unwrap()].to_string()
}

/// Not a test: the screenshots in README (docs/images), from a site of
/// real records replayed for three minutes with changing rates, drawn by
/// ganglia-web (a private copy) in headless Chromium. gmetad polls every
/// 5 s, as a site's would (1 s polls of 1 s reports alias). Run it with
/// `cargo test --test gweb -- --ignored readme_screenshots`.
#[test]
#[ignore]
fn readme_screenshots() {
    let site = Site::start(5, "stats_interval = 0\nself_metrics_interval = 0\n");
    let (gw, gmetad) = (&site.gateway, site.gmetad());
    let start = replay::unix_now();
    // Counters grow by a varying multiple of what each record holds.
    let mut level = vec![0u64; SERVERS.len()];
    for round in 0..180u64 {
        for (i, (host, ip, records)) in SERVERS.iter().enumerate() {
            let phase = round as f64 / 20.0 + i as f64;
            let load = (4.0 + 3.0 * phase.sin()).round() as u64;
            level[i] += load;
            if *ip == GSTREAM.0 {
                // The XCache closes three files per unit of load.
                for _ in 0..load {
                    gw.send_as(GSTREAM.0, &data(GSTREAM.1));
                }
            }
            for r in *records {
                // CPU: an eighth (user) and a sixteenth (system) of a core
                // per unit of load, not record()'s second per round.
                let text = String::from_utf8(record(r, host, level[i])).unwrap();
                let text = text
                    .replacen(
                        &format!("<usr><s>{}</s>", level[i]),
                        &format!("<usr><s>{}</s>", level[i] / 8),
                        1,
                    )
                    .replacen(
                        &format!("<sys><s>{}</s>", level[i]),
                        &format!("<sys><s>{}</s>", level[i] / 16),
                        1,
                    );
                gw.send_as(ip, text.as_bytes());
            }
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let end = replay::unix_now();
    let gweb = Gweb::new(&gmetad.rrd_root, gmetad.interactive_port, &shipped());
    gweb.add_conf(&readme_gweb_conf());
    let server = gweb.serve();
    let images = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/images");
    std::fs::create_dir_all(&images).unwrap();
    let window = format!("cs={}&ce={}", start + 5, end);
    for (file, query, size) in [
        (
            "gweb-cluster.png",
            format!("c={CLUSTER}&{window}"),
            (1300, 1900),
        ),
        (
            "gweb-host.png",
            format!("c={CLUSTER}&h=mgr.example&{window}"),
            (1300, 1450),
        ),
        (
            "gweb-view.png",
            format!("tab=v&vn=xrootd&{window}"),
            (1300, 2300),
        ),
    ] {
        server.screenshot(&query, size, &images.join(file));
    }
    let log = std::fs::read_to_string(gweb.dir.join("php-server.log")).unwrap();
    assert!(!log.contains("Fatal error"), "{log}");
}

/// Hosts of the view's per-server graphs, and which of them are the
/// gateway's own (`xrd2ganglia@NAME`, in any case) and left out.
const SERVERS_AND_GATEWAYS: &[(&str, bool)] = &[
    ("ds.example", true),
    ("vm", true),
    ("xrd2ganglia.example", true),
    ("XRD2GANGLIA@vm", false),
    ("xrd2ganglia@vm", false),
    ("xrd2ganglia@gw1.example.org", false),
];

/// The hosts a per-server PHP report (`graph.d/NAME.php` under `out`)
/// draws, run by the real php over an RRD tree with each of `hosts` in a
/// cluster (the RRDs empty: the report only looks for them), in the order
/// it draws them.
fn php_report_hosts(out: &Path, name: &str, hosts: &[&str]) -> Vec<String> {
    let dir = Scratch::new("gweb-per-server");
    let php = out.join(format!("graph.d/{name}.php"));
    let rrds = dir.path().join("rrds");
    for host in hosts {
        let d = rrds.join("XRootD").join(host);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("xrootd.link.num.rrd"), b"").unwrap();
    }
    std::fs::create_dir_all(rrds.join("XRootD/__SummaryInfo__")).unwrap();
    let script = format!(
        "$conf = array('rrds' => '{}', 'graph_colors' => array('3366cc'), 'graphreport_stats' => false); $size = 'medium'; include '{}'; $g = array('height' => 100); graph_{name}($g); echo $g['series'];",
        rrds.display(),
        php.display()
    );
    let out = Command::new("php")
        .args(["-r", &script])
        .output()
        .expect("php (php-cli), as ganglia-web runs it");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let series = String::from_utf8_lossy(&out.stdout).into_owned();
    series
        .split(" DEF:")
        .skip(1)
        .map(|d| {
            d.split("/XRootD/")
                .nth(1)
                .and_then(|p| p.split('/').next())
                .unwrap_or_else(|| panic!("{series}"))
                .to_string()
        })
        .collect()
}

/// The view's per-server graphs leave out the gateway's own host (files
/// `xrd2ganglia gweb` writes for the shipped config): an aggregate graph's
/// host_regex, as ganglia-web applies it (PHP's preg_match with `/.../i`,
/// run by the real php), and a PHP report of ours (run by the real php
/// over RRDs) match the servers and not `xrd2ganglia@NAME`. (Moved from
/// src/gweb/tests.rs, which keeps what needs no php.)
#[test]
fn per_server_graphs_leave_out_the_gateways_own_host() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Scratch::new("gweb-view");
    let o = gweb(
        &[
            "--config",
            manifest.join("conf/xrd2ganglia.toml").to_str().unwrap(),
        ],
        out.path(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let view: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("conf/view_xrootd.json")).unwrap())
            .unwrap();
    let mut aggregates = 0;
    let mut php_reports = 0;
    for item in view["items"].as_array().unwrap() {
        let graph = item["graph"].as_str().unwrap_or("");
        if graph.ends_with("_per_server_report") {
            php_reports += 1;
            let hosts: Vec<&str> = SERVERS_AND_GATEWAYS.iter().map(|(h, _)| *h).collect();
            let mut servers: Vec<&str> = SERVERS_AND_GATEWAYS
                .iter()
                .filter(|(_, server)| *server)
                .map(|(h, _)| *h)
                .collect();
            servers.sort();
            assert_eq!(
                php_report_hosts(out.path(), graph, &hosts),
                servers,
                "{graph}"
            );
            continue;
        }
        let Some(regex) = item["host_regex"][0]["regex"].as_str() else {
            continue;
        };
        aggregates += 1;
        let script = format!(
            "foreach (array('ds.example', 'vm', 'xrd2ganglia.example', 'XRD2GANGLIA@vm', 'xrd2ganglia@vm', 'xrd2ganglia@gw1.example.org') as $h) {{ echo preg_match('/{regex}/i', $h); }}"
        );
        let out = Command::new("php")
            .args(["-r", &script])
            .output()
            .expect("php (php-cli), as ganglia-web runs it");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "111000", "{regex}");
    }
    assert_eq!((aggregates, php_reports), (3, 1));
}

/// xrootd 5.5.3's first run in the capture (tests/data/detailed: its `=`,
/// eight logins, the `f` packet of six opens and closes and eight
/// disconnects, then its summary record), as recorded.
fn captured_run() -> Vec<Vec<u8>> {
    let text = String::from_utf8(data("detailed/xrootd-5.5.3.jsonl")).unwrap();
    let run: Vec<Vec<u8>> = text
        .lines()
        .map(|l| xrd2ganglia::recording::parse_entry(l).unwrap().datagram)
        .take_while(|d| d.first() != Some(&b'<'))
        .collect();
    let summary = text
        .lines()
        .map(|l| xrd2ganglia::recording::parse_entry(l).unwrap().datagram)
        .find(|d| d.first() == Some(&b'<'))
        .unwrap();
    assert_eq!(
        run.iter().map(|d| d[0]).collect::<Vec<u8>>(),
        b"=uuuuuuuuf",
        "the capture's first run changed"
    );
    [run, vec![summary]].concat()
}

/// The same traffic again from the same xrootd run, as its next clients
/// would make it: `datagram` (a `u` or `f` packet of [`captured_run`])
/// with every dictid (user and file) moved up by `offset` and its
/// sequence number set to `pseq`.
fn again(datagram: &[u8], offset: u32, pseq: u8) -> Vec<u8> {
    let mut d = datagram.to_vec();
    d[1] = pseq;
    let add = |d: &mut [u8], at: usize| {
        let v = u32::from_be_bytes(d[at..at + 4].try_into().unwrap()) + offset;
        d[at..at + 4].copy_from_slice(&v.to_be_bytes());
    };
    match d[0] {
        b'u' => add(&mut d, 8),
        b'f' => {
            let mut at = 8;
            while at + 8 <= d.len() {
                let (kind, flag) = (d[at], d[at + 1]);
                let size = usize::from(u16::from_be_bytes([d[at + 2], d[at + 3]]));
                if kind != 2 {
                    add(&mut d, at + 4);
                }
                if kind == 1 && flag & 1 != 0 {
                    add(&mut d, at + 16);
                }
                at += size;
            }
        }
        other => panic!("not a u or f packet: {}", other as char),
    }
    d
}

/// Not a test: the screenshot of the detailed stream's two reports in
/// docs/detailed.md (docs/images/gweb-detailed.png): the records of
/// [`readme_screenshots`]' servers and, from a seventh, xrootd 5.5.3's own
/// detailed stream (tests/data/detailed) replayed for three minutes,
/// between one and four times a round (each time the same logins and
/// files again, under new dictids), drawn by ganglia-web (a private
/// copy) in headless Chromium, in a view of the two reports. Their
/// series must hold data: every VO and protocol of the capture, non-zero.
/// Run it with `cargo test --test gmetad -- --ignored detailed_screenshot`.
#[test]
#[ignore]
fn detailed_screenshot() {
    // The unix login's group is `root`; the anonymous HTTP clients have
    // none: their VO comes from the path rule.
    let site = Site::start(
        5,
        "stats_interval = 0\nself_metrics_interval = 0\ndetailed_vo_paths = [\"/data/=dteam\"]\n",
    );
    let (gw, gmetad) = (&site.gateway, site.gmetad());
    const DETAILED_IP: &str = "127.0.9.7";
    const DETAILED_HOST: &str = "det.example";
    // Always sent: what the graphs hold is asserted below, not here.
    const PROBE: &str = "xrootd.detailed.vo.other.bytes_read";
    let run = captured_run();
    let (ident, logins, files, summary) = (&run[0], &run[1..9], &run[9], &run[10]);
    // Named as the other servers are (the shipped reports are for the
    // instance name `anon`).
    let summary = String::from_utf8(summary.clone()).unwrap();
    let (tod, src, ins) = ("tod=\"1795896135\"", "src=\"vm:", " ins=\"det\"");
    for part in [tod, src, ins] {
        assert!(summary.contains(part), "{part}: {summary}");
    }
    let summary = summary
        .replacen(src, &format!("src=\"{DETAILED_HOST}:"), 1)
        .replacen(ins, " ins=\"anon\"", 1);
    let start = replay::unix_now();
    let mut level = vec![0u64; SERVERS.len()];
    let (mut copies, mut map_seq, mut f_seq) = (0u32, 0u8, 0u8);
    for round in 0..180u64 {
        for (i, (host, ip, records)) in SERVERS.iter().enumerate() {
            level[i] += (4.0 + 3.0 * (round as f64 / 20.0 + i as f64).sin()).round() as u64;
            for r in *records {
                gw.send_as(ip, &record(r, host, level[i]));
            }
        }
        // The detailed server: its summary (the source its metrics go
        // with) first, its `=` once, then 1 to 4 times its clients.
        gw.send_as(
            DETAILED_IP,
            summary
                .replace(tod, &format!("tod=\"{}\"", 1_795_896_135 + round))
                .as_bytes(),
        );
        if round == 0 {
            gw.send_as(DETAILED_IP, ident);
        }
        let times = (2.5 + 1.5 * (round as f64 / 15.0).sin()).round() as u32;
        for _ in 0..times {
            let offset = 100 * copies;
            copies += 1;
            for u in logins {
                map_seq = map_seq.wrapping_add(1);
                gw.send_as(DETAILED_IP, &again(u, offset, map_seq));
            }
            gw.send_as(DETAILED_IP, &again(files, offset, f_seq));
            f_seq = f_seq.wrapping_add(1);
        }
        if round == 0 {
            gmetad.wait_for_rrd(
                &gmetad.rrd_path(CLUSTER, DETAILED_HOST, PROBE),
                Duration::from_secs(20),
            );
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let end = replay::unix_now();
    let summary_rrd = gmetad.summary_rrd_path(CLUSTER, PROBE);
    gmetad.wait_for_update(&summary_rrd, end, Duration::from_secs(20));
    let gweb = Gweb::new(&gmetad.rrd_root, gmetad.interactive_port, &shipped());
    gweb.add_conf(&readme_gweb_conf());
    // A view of the two reports, as a site would make one.
    std::fs::write(
        gweb.dir.join("conf/view_who.json"),
        format!(
            r#"{{"view_name": "who", "view_type": "standard", "default_size": "large", "items": [
  {{"graph": "xrootd_vo_bytes_report", "cluster": "{CLUSTER}"}},
  {{"graph": "xrootd_protocol_bytes_report", "cluster": "{CLUSTER}"}}]}}"#
        ),
    )
    .unwrap();
    let window = format!("cs={}&ce={}", start + 5, end);
    // Every VO and protocol of the capture moved bytes in the graphs.
    for (report, want) in [
        (
            "xrootd_vo_bytes_report",
            &[
                "read atlas",
                "written atlas",
                "read cms",
                "read root",
                "read dteam",
            ][..],
        ),
        (
            "xrootd_protocol_bytes_report",
            &["read xroot", "written xroot", "read http"][..],
        ),
    ] {
        let series = gweb.series(&format!("c={CLUSTER}&g={report}&{window}"));
        for label in want {
            let values: Vec<f64> = series
                .iter()
                .filter(|(l, _)| l.trim() == *label)
                .flat_map(|(_, v)| v.iter().copied())
                .filter(|v| v.is_finite())
                .collect();
            assert!(
                values.iter().filter(|v| **v > 0.0).count() > 10,
                "{report}: {label}: {values:?} (series {:?})",
                labels(&series)
            );
        }
    }
    let server = gweb.serve();
    let (status, body) = server.get(&format!("tab=v&vn=who&{window}"));
    assert_eq!(status, 200, "{body}");
    for r in ["xrootd_vo_bytes_report", "xrootd_protocol_bytes_report"] {
        assert!(body.contains(&format!("g={r}&")), "the view lacks {r}");
    }
    let images = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/images");
    std::fs::create_dir_all(&images).unwrap();
    server.screenshot(
        &format!("tab=v&vn=who&{window}"),
        (1300, 560),
        &images.join("gweb-detailed.png"),
    );
    let log = std::fs::read_to_string(gweb.dir.join("php-server.log")).unwrap();
    assert!(!log.contains("Fatal error"), "{log}");
}
