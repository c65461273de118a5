//! End to end with real servers: xrootd and cmsd (run as nobody) report to
//! the gateway, xrdcp moves their counters, a real gmond shows the result.

use xrd2ganglia_testkit as common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::UdpSocket;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::releases::{self, Row};
use common::{Capture, Gateway, Gmond, Scratch, XmlHost, XmlMetric, Xrootd, free_port};
use xrd2ganglia::catalog;

const CONFIG: &str =
    "metadata_interval = 2\ndmax = 0\nstats_interval = 0\nself_metrics_interval = 0\n";

/// The XRootD release Debian's packages run here (`xrootd -v`; the test
/// checks the records' `ver`).
const RELEASE: &str = "5.5.3";

fn xrdcp(args: &[&str]) {
    let out = Command::new("xrdcp")
        .args(["-f", "-s"])
        .args(args)
        .output()
        .expect("run xrdcp (xrootd-client)");
    assert!(
        out.status.success(),
        "xrdcp {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `<NAME>N</NAME>` inside `<stats id="SECTION">` of a raw XML record, as a
/// number: read with a string search, not the crate's parser.
fn raw_value(datagram: &[u8], section: &str, name: &str) -> Option<u64> {
    let text = std::str::from_utf8(datagram).ok()?;
    let at = text.find(&format!("<stats id=\"{section}\">"))?;
    let rest = &text[at..];
    let rest = &rest[rest.find(&format!("<{name}>"))? + name.len() + 2..];
    rest[..rest.find('<')?].parse().ok()
}

/// The sections a raw XML record holds (`<stats id="NAME">`, not the
/// numbered list entries), and its `ver`.
fn raw_sections(datagram: &[u8]) -> (BTreeSet<String>, String) {
    let text = std::str::from_utf8(datagram).expect("xrootd sends text");
    let sections = text
        .split("<stats id=\"")
        .skip(1)
        .filter_map(|s| s.split_once('"').map(|(id, _)| id))
        .filter(|id| !id.bytes().all(|b| b.is_ascii_digit()))
        .map(str::to_string)
        .collect();
    let ver = text
        .split_once(" ver=\"")
        .and_then(|(_, r)| r.split_once('"'))
        .map(|(v, _)| v.to_string())
        .expect("a ver attribute");
    (sections, ver)
}

/// What the release table says a record of `RELEASE` holding `sections`
/// must become, named with `prefix` (`xrootd.ds.`): every variable that
/// release sends there unconditionally (header attributes always).
struct Expected<'t> {
    prefix: String,
    /// Variables sent on their own, by metric name.
    plain: BTreeMap<String, &'t Row>,
    /// List fields (`oss.paths.i.free`): sent per entry.
    lists: Vec<&'t Row>,
}

impl<'t> Expected<'t> {
    fn new(table: &'t [Row], prefix: &str, sections: &BTreeSet<String>) -> Expected<'t> {
        let mut e = Expected {
            prefix: prefix.to_string(),
            plain: BTreeMap::new(),
            lists: Vec::new(),
        };
        for row in releases::sent_by(table, RELEASE) {
            if row.when.is_some()
                || !(row.section == "statistics" || sections.contains(&row.section))
            {
                continue;
            }
            match row.list_entry() {
                Some(_) => e.lists.push(row),
                None => {
                    e.plain.insert(format!("{prefix}{}", row.variable), row);
                }
            }
        }
        e
    }

    /// The row a metric of this record is, if the table knows it.
    fn row_of(&self, metric: &str) -> Option<&'t Row> {
        if let Some(row) = self.plain.get(metric) {
            return Some(row);
        }
        let var = metric.strip_prefix(&self.prefix)?;
        self.lists.iter().copied().find(|r| {
            r.list_entry().is_some_and(|(list, field)| {
                var.strip_prefix(list)
                    .and_then(|v| v.strip_prefix('.'))
                    .and_then(|v| v.strip_suffix(field))
                    .is_some_and(|key| key.len() > 1 && key.ends_with('.'))
            })
        })
    }

    /// Whether `host` shows every expected metric: each plain one, and each
    /// list field once per entry its list says it has.
    fn all_shown(&self, host: &XmlHost) -> bool {
        self.plain.keys().all(|n| host.metrics.contains_key(n))
            && self.lists.iter().all(|r| {
                let list = r.list_entry().map_or("", |(list, _)| list);
                let entries = host
                    .metrics
                    .get(&format!("{}{list}", self.prefix))
                    .and_then(|m| m.get("VAL").parse::<usize>().ok());
                let shown = host
                    .metrics
                    .keys()
                    .filter(|k| self.row_of(k).is_some_and(|x| std::ptr::eq(x, *r)))
                    .count();
                entries == Some(shown)
            })
    }
}

/// TYPE and SLOPE of a metric, held to what the table says of its field:
/// a cumulative field is a counter (gmetad graphs a rate: positive, and a
/// double to outgrow 32 bits); text is a string with slope zero; anything
/// else is no counter: both, or zero where the gateway sends an
/// identifier (a pid, a port) as text.
fn check_type_and_slope(name: &str, m: &XmlMetric, row: &Row) {
    let (ty, slope) = (m.get("TYPE"), m.get("SLOPE"));
    if row.cumulative {
        assert_eq!(
            (ty, slope),
            ("double", "positive"),
            "{name}: cumulative ({})",
            row.source
        );
    } else if row.width.is_none() {
        assert_eq!(
            (ty, slope),
            ("string", "zero"),
            "{name}: text ({})",
            row.source
        );
    } else if ty == "string" {
        assert_eq!(slope, "zero", "{name}: an identifier sent as text");
    } else {
        assert!(matches!(ty, "uint32" | "double"), "{name}: TYPE {ty}");
        assert_eq!(slope, "both", "{name}: not cumulative ({})", row.source);
    }
}

#[test]
fn real_xrootd_and_cmsd_reach_gmond() {
    let gmond = Gmond::start();
    // Everything the records hold goes out (no default exclusions): what
    // gmond must show is what the release table says xrootd sends.
    let gw = Gateway::start(gmond.port, &format!("{CONFIG}exclude = []\n"));
    let capture = Capture::new();
    let root = Scratch::new("xrd");
    for d in ["ds/data", "ds/admin", "mgr/admin", "srv/data", "srv/admin"] {
        std::fs::create_dir_all(root.path().join(d)).unwrap();
    }
    let r = root.path().display().to_string();
    let (ds_port, mgr_port, cms_port, srv_port, srv_cms_port) = (
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
    );
    let report = format!("xrd.report 127.0.0.1:{} every 1s all sync", gw.port);

    // Standalone data server, also reporting to our capture socket.
    let ds = Xrootd::start(
        "xrootd",
        "ds",
        root.path(),
        &format!(
            "all.export /\noss.localroot {r}/ds/data\nall.adminpath {r}/ds/admin\nall.pidpath {r}/ds/admin\nxrd.port {ds_port}\n\
             xrd.report 127.0.0.1:{},127.0.0.1:{} every 1s all sync\nall.sitename TESTSITE\n",
            gw.port, capture.port
        ),
    );
    // Manager pair (same host: must not collide) and a subscribed server.
    let mgr_cfg = format!(
        "all.role manager\nall.manager 127.0.0.1:{cms_port}\nall.export /\nall.adminpath {r}/mgr/admin\nall.pidpath {r}/mgr/admin\n\
         all.sitename TESTSITE\ncms.repstats frq\nif exec xrootd\nxrd.port {mgr_port}\nfi\n{report}\n"
    );
    let _mgr_xrd = Xrootd::start("xrootd", "mgr", root.path(), &mgr_cfg);
    let _mgr_cms = Xrootd::start("cmsd", "mgr", root.path(), &mgr_cfg);
    let srv_cfg = format!(
        "all.role server\nall.manager 127.0.0.1:{cms_port}\nall.export /\noss.localroot {r}/srv/data\nall.adminpath {r}/srv/admin\n\
         all.pidpath {r}/srv/admin\nall.sitename TESTSITE\nif exec xrootd\nxrd.port {srv_port}\nelse\nxrd.port {srv_cms_port}\nfi\n{report}\n"
    );
    let _srv_xrd = Xrootd::start("xrootd", "srv", root.path(), &srv_cfg);
    let _srv_cms = Xrootd::start("cmsd", "srv", root.path(), &srv_cfg);

    // Move the data server's counters: 5 MiB up, and back down.
    let _ = capture.next();
    let file = root.path().join("payload.bin");
    let payload: Vec<u8> = (0..5 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&file, &payload).unwrap();
    let url = format!("root://127.0.0.1:{ds_port}//payload.bin");
    xrdcp(&[file.to_str().unwrap(), &url]);
    xrdcp(&[&url, root.path().join("back.bin").to_str().unwrap()]);
    assert_eq!(
        std::fs::read(root.path().join("back.bin")).unwrap(),
        payload
    );

    // A captured record that shows the transfer.
    let deadline = Instant::now() + Duration::from_secs(20);
    let record = loop {
        let d = capture.next();
        let moved = raw_value(&d, "link", "in").is_some_and(|v| v >= 5 << 20)
            && raw_value(&d, "link", "out").is_some_and(|v| v >= 5 << 20);
        if moved {
            break d;
        }
        assert!(
            Instant::now() < deadline,
            "ds never reported the transfer; ds log: {}",
            ds.proc.log_text()
        );
    };
    // What that record must become, from the release table (built from
    // XRootD's source), never from the crate's parser or mapping.
    let (sections, ver) = raw_sections(&record);
    assert_eq!(
        ver,
        format!("v{RELEASE}"),
        "the packaged xrootd is not {RELEASE}"
    );
    let table = releases::load();
    let expected = Expected::new(&table, "xrootd.ds.", &sections);
    for s in [
        "info", "buff", "link", "poll", "proc", "xrootd", "ofs", "oss", "sched", "sgen",
    ] {
        assert!(sections.contains(s), "no {s} section in {sections:?}");
    }
    // What the gateway adds (documented in README): the derived metrics.
    let derived = [
        catalog::DERIVED_UPTIME,
        catalog::DERIVED_CPU_USR,
        catalog::DERIVED_CPU_SYS,
        catalog::DERIVED_CPU_TOTAL,
    ]
    .map(|d| format!("xrootd.ds.{d}"));
    // The host the ds's metrics are filed under.
    let ds_host = |x: &common::GangliaXml| {
        x.hosts
            .iter()
            .find(|(_, h)| h.metrics.contains_key("xrootd.ds.link.in"))
            .map(|(name, _)| name.clone())
    };

    // gmond shows every metric of that record. The gateway got the datagram
    // when the capture socket did: wait for its values, not just the names.
    let x = gmond.wait_for(
        Duration::from_secs(15),
        "every metric of the ds record, after the transfer",
        |x| {
            ds_host(x).is_some_and(|host| {
                let h = &x.hosts[&host];
                expected.all_shown(h)
                    && derived.iter().all(|d| h.metrics.contains_key(d))
                    && ["xrootd.ds.link.in", "xrootd.ds.link.out"].iter().all(|m| {
                        h.metrics
                            .get(*m)
                            .and_then(|m| m.get("VAL").parse::<u64>().ok())
                            .is_some_and(|v| v >= 5 << 20)
                    })
                    // The record's packets are paced: its last ones may
                    // reach gmond a moment after the first.
                    && h.metrics
                        .get("xrootd.ds.xrootd.ops.open")
                        .and_then(|m| m.get("VAL").parse::<u64>().ok())
                        .is_some_and(|v| v >= 1)
            })
        },
    );
    let host = ds_host(&x).unwrap_or_default();
    let h = x.host(&host);
    assert_eq!(h.attrs["IP"], "127.0.0.1");
    let numeric = expected
        .plain
        .values()
        .filter(|r| r.width.is_some())
        .count();
    assert!(
        numeric >= 60,
        "only {numeric} numeric variables in a real ds record, says the table"
    );
    // Every metric of the ds is a variable 5.5.3 sends (or one the gateway
    // derives), with the type and slope its field calls for.
    let mut checked = 0;
    for (name, m) in h
        .metrics
        .iter()
        .filter(|(n, _)| n.starts_with("xrootd.ds."))
    {
        if let Some(var) = name
            .strip_prefix("xrootd.ds.")
            .filter(|v| catalog::is_derived(v))
        {
            // The gateway's own (README): as the catalog describes it.
            let kind = catalog::lookup(var).map(|s| s.kind);
            assert_eq!(
                kind.map(|k| (k.value_type(), k.slope().as_str())),
                Some((m.get("TYPE"), m.get("SLOPE"))),
                "{name}"
            );
            continue;
        }
        let row = expected
            .row_of(name)
            .unwrap_or_else(|| panic!("{name}: {RELEASE} sends no such variable, says the table"));
        check_type_and_slope(name, m, row);
        checked += 1;
    }
    assert!(checked > expected.plain.len(), "{checked} checked");
    let link_in = x.metric(&host, "xrootd.ds.link.in");
    assert!(link_in.get("VAL").parse::<u64>().unwrap() >= 5 << 20);
    assert_eq!(
        (
            link_in.get("TYPE"),
            link_in.get("SLOPE"),
            link_in.get("UNITS")
        ),
        ("double", "positive", "bytes/s")
    );
    assert_eq!(link_in.extra["GROUP"], "xrootd.ds.link");
    assert!(
        x.metric(&host, "xrootd.ds.xrootd.ops.open")
            .get("VAL")
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    assert_eq!(x.metric(&host, "xrootd.ds.site").get("VAL"), "TESTSITE");
    assert_eq!(x.metric(&host, "xrootd.ds.oss.paths").get("VAL"), "1");
    assert!(
        h.metrics
            .keys()
            .any(|k| k.starts_with("xrootd.ds.oss.paths._") && k.ends_with(".free"))
    );

    // The manager's xrootd and cmsd, and the server's, share the host without colliding.
    let x = gmond.wait_for(
        Duration::from_secs(20),
        "manager cmsd with its node list",
        |x| {
            x.hosts.get(&host).is_some_and(|h| {
                ["cmsd.mgr.uptime", "xrootd.mgr.uptime", "cmsd.srv.uptime"]
                    .iter()
                    .all(|m| h.metrics.contains_key(*m))
                    && h.metrics.contains_key("cmsd.mgr.cmsm.sel.t")
                    && h.metrics.contains_key("xrootd.mgr.ofs.role")
                    && h.metrics.contains_key("cmsd.srv.cms.role")
                    && h.metrics
                        .keys()
                        .any(|k| k.starts_with("cmsd.mgr.cmsm.node.") && k.ends_with(".ref.r"))
            })
        },
    );
    assert_eq!(x.metric(&host, "xrootd.mgr.ofs.role").get("VAL"), "manager");
    assert_eq!(x.metric(&host, "cmsd.mgr.cmsm.role").get("VAL"), "M");
    assert_eq!(
        x.metric(&host, "cmsd.mgr.link.num").extra["GROUP"],
        "cmsd.mgr.link"
    );
    assert_ne!(
        x.metric(&host, "cmsd.mgr.proc.cpu.total").extra["TITLE"],
        x.metric(&host, "xrootd.mgr.proc.cpu.total").extra["TITLE"]
    );
    let sel = x.metric(&host, "cmsd.mgr.cmsm.sel.r");
    assert_eq!(
        sel.get("SLOPE"),
        "both",
        "cmsm.sel.r is resummed by cmsd: not a counter"
    );
}

/// One pfc g-stream datagram (`send json insthdr`), read here on its own:
/// its header's `stod`, and the file_close records' (files, b_hit, b_miss,
/// b_bypass) added up.
fn pfc_closes(datagram: &[u8]) -> (u64, [u64; 4]) {
    let text = std::str::from_utf8(datagram).expect("a JSON g-stream is text");
    let text = text.trim_end_matches('\0');
    let mut lines = text.split('\n');
    let header: serde_json::Value =
        serde_json::from_str(lines.next().unwrap()).expect("the g-stream's JSON header");
    assert_eq!(header["code"], "g", "{text}");
    assert_eq!(header["gs"]["type"], "C", "not pfc's g-stream: {text}");
    let stod = header["stod"].as_u64().expect("stod");
    let mut sums = [0u64; 4];
    for line in lines.filter(|l| !l.is_empty()) {
        let r: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("g-stream record {line:?}: {e}"));
        if r["event"] != "file_close" {
            continue;
        }
        sums[0] += 1;
        for (i, k) in ["b_hit", "b_miss", "b_bypass"].iter().enumerate() {
            sums[i + 1] += r[*k].as_u64().unwrap_or_else(|| panic!("{k} in {line}"));
        }
    }
    (stod, sums)
}

/// Forwards what `capture` receives to the gateway, byte for byte, from one
/// loopback socket, keeping a copy: xrootd sends a g-stream to one place only.
fn relay(
    capture: Capture,
    to: u16,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<Vec<u8>>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let out = UdpSocket::bind("127.0.0.1:0").unwrap();
        capture
            .socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut buf = vec![0u8; 65536];
        while !stop.load(Ordering::Relaxed) {
            let Ok((n, _)) = capture.socket.recv_from(&mut buf) else {
                continue;
            };
            seen.lock().unwrap().push(buf[..n].to_vec());
            out.send_to(&buf[..n], ("127.0.0.1", to)).unwrap();
        }
    })
}

fn counter(m: &common::XmlMetric) -> u64 {
    m.get("VAL")
        .parse()
        .unwrap_or_else(|e| panic!("{:?}: {e}", m.attrs))
}

#[test]
fn real_xcache_gstream_reaches_gmond() {
    let gmond = Gmond::start();
    let mut gw = Gateway::start(gmond.port, CONFIG);
    let root = Scratch::new("xcache");
    for d in ["origin/data", "origin/admin", "xc/cache", "xc/admin"] {
        std::fs::create_dir_all(root.path().join(d)).unwrap();
    }
    let r = root.path().display().to_string();
    let (origin_port, xc_port) = (free_port(), free_port());

    // Three files on the origin, of sizes that are not whole 1 MiB blocks.
    let files = [
        ("f1.dat", 3_000_000usize),
        ("f2.dat", 2_500_000),
        ("f3.dat", 1_500_000),
    ];
    for (i, (name, size)) in files.iter().enumerate() {
        let payload: Vec<u8> = (0..*size as u32)
            .map(|j| (j.wrapping_mul(2654435761).wrapping_add(i as u32) >> 13) as u8)
            .collect();
        std::fs::write(root.path().join("origin/data").join(name), payload).unwrap();
    }

    // The g-stream goes to our capture socket, which relays it to the gateway.
    let capture = Capture::new();
    let cap_port = capture.port;
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let relay = relay(capture, gw.port, stop.clone(), seen.clone());

    // The origin reports too, from the same address, and starts with the
    // XCache (often in the same second: one start time, `tos`, for both):
    // the g-stream must go to the XCache, which its header's instance name
    // (`insthdr`) says, not to the origin.
    let _origin = Xrootd::start(
        "xrootd",
        "origin",
        root.path(),
        &format!(
            "all.export /\noss.localroot {r}/origin/data\nall.adminpath {r}/origin/admin\n\
             all.pidpath {r}/origin/admin\nxrd.port {origin_port}\nall.sitename TESTSITE\n\
             xrd.report 127.0.0.1:{} every 1s all sync\n",
            gw.port
        ),
    );
    // pfc.ram 1g: 5.5.3 refuses less. pfc.prefetch 0: with prefetching,
    // first reads show b_miss = 0.
    let xc = Xrootd::start(
        "xrootd",
        "xc",
        root.path(),
        &format!(
            "all.export /\nofs.osslib libXrdPss.so\npss.origin 127.0.0.1:{origin_port}\n\
             pss.cachelib libXrdPfc.so\npfc.ram 1g\npfc.blocksize 1m\npfc.prefetch 0\n\
             oss.localroot {r}/xc/cache\nall.adminpath {r}/xc/admin\nall.pidpath {r}/xc/admin\n\
             xrd.port {xc_port}\nall.sitename TESTSITE\n\
             xrd.report 127.0.0.1:{} every 1s all sync\n\
             xrootd.mongstream pfc use flush 1s send json insthdr 127.0.0.1:{cap_port}\n",
            gw.port
        ),
    );

    // Both summary records reach gmond, on one host: its name is known.
    let x = gmond.wait_for(Duration::from_secs(15), "the two summaries", |x| {
        x.hosts.values().any(|h| {
            h.metrics.contains_key("xrootd.xc.uptime")
                && h.metrics.contains_key("xrootd.origin.uptime")
        })
    });
    let host = x
        .hosts
        .iter()
        .find(|(_, h)| h.metrics.contains_key("xrootd.xc.uptime"))
        .map(|(n, _)| n.clone())
        .unwrap();
    let origin_tos = x.metric(&host, "xrootd.origin.tos").get("VAL").to_string();

    // What the captured g-stream adds up to: its stods, and (files, b_hit,
    // b_miss, b_bypass).
    let captured = || {
        let seen = seen.lock().unwrap();
        let mut stods = Vec::new();
        let mut sums = [0u64; 4];
        for d in seen.iter().filter(|d| d.starts_with(b"{\"code\":\"g\"")) {
            let (stod, s) = pfc_closes(d);
            stods.push(stod);
            for i in 0..4 {
                sums[i] += s[i];
            }
        }
        (stods, sums)
    };
    // Each file read through the XCache, then again: from the origin, then
    // from its disk cache. pfc keeps a closed file a moment, and a read
    // meanwhile would share its file_close record: the second round waits
    // for the first's records.
    let read_once: u64 = files.iter().map(|(_, s)| *s as u64).sum();
    let mut rounds = Vec::new();
    for round in 1..=2u64 {
        for (name, _) in &files {
            xrdcp(&[&format!("root://127.0.0.1:{xc_port}//{name}"), "/dev/null"]);
        }
        let closes = round * files.len() as u64;
        // pfc sends a file's close record once the file has left the
        // cache's hands (its writes to the cache's disk done): seen taking
        // more than 15 s while another job kept this machine's disk busy.
        // A deadline only: a passing run waits as long as pfc takes.
        let deadline = Instant::now() + Duration::from_secs(60);
        while captured().1[0] < closes {
            assert!(
                Instant::now() < deadline,
                "the g-stream has {:?} after {closes} closes; xc log: {}",
                captured(),
                xc.proc.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let (_, sums) = captured();
        assert_eq!(sums[0], closes, "one file_close record per xrdcp");
        rounds.push(sums);
    }
    let (stods, [files_closed, hit, miss, bypass]) = captured();
    assert!(
        stods.windows(2).all(|w| w[0] == w[1]),
        "one xrootd run: {stods:?}"
    );
    // The g-stream's stod is the XCache's tos, not the origin's.
    assert_eq!(
        x.metric(&host, "xrootd.xc.tos").get("VAL"),
        stods[0].to_string()
    );
    println!(
        "origin tos {origin_tos}, XCache tos {}: {}",
        stods[0],
        if origin_tos == stods[0].to_string() {
            "the same second"
        } else {
            "apart"
        }
    );
    // First reads fetch from the origin. 5.5.3 counts some of a cold
    // read's blocks in b_hit too: at least the bytes of every file, not
    // exactly.
    let [_, cold_hit, cold_miss, _] = rounds[0];
    assert!(cold_miss > 0, "first reads fetch from the origin");
    assert!(
        cold_hit + cold_miss >= read_once,
        "{cold_hit} + {cold_miss} < {read_once}"
    );
    // Second reads come from the cache, every byte.
    assert_eq!(
        (hit - cold_hit, miss - cold_miss),
        (read_once, 0),
        "second reads: {rounds:?}"
    );

    // gmond shows those totals on the XCache's host.
    let pfc = |m: &str| format!("xrootd.xc.pfc.{m}");
    let want = [
        ("files", files_closed),
        ("bytes_hit", hit),
        ("bytes_miss", miss),
        ("bytes_bypass", bypass),
    ];
    let x = gmond.wait_for(Duration::from_secs(15), "the XCache's pfc totals", |x| {
        x.hosts.get(&host).is_some_and(|h| {
            want.iter().all(|(m, v)| {
                h.metrics
                    .get(&pfc(m))
                    .is_some_and(|m| m.get("VAL").parse::<u64>().ok() == Some(*v))
            })
        })
    });
    for (m, v) in want {
        let metric = x.metric(&host, &pfc(m));
        assert_eq!(counter(metric), v, "{m}");
        let units = if m == "files" { "files/s" } else { "bytes/s" };
        assert_eq!(
            (metric.get("TYPE"), metric.get("SLOPE"), metric.get("UNITS")),
            ("double", "positive", units),
            "{m}"
        );
        assert_eq!(metric.extra["GROUP"], "xrootd.xc.pfc", "{m}");
    }
    // The origin sends no g-stream: no pfc metrics of its own, though it
    // shares the XCache's address.
    assert!(
        !x.host(&host)
            .metrics
            .keys()
            .any(|k| k.starts_with("xrootd.origin.pfc.")),
    );

    // Everything the gateway got was read: every g-stream datagram taken
    // and matched to the XCache's run, nothing rejected. Without `noident`,
    // the g-stream's destination also gets a JSON ident datagram
    // (`{"code":"=",...}`, once, at start): ignored, counted.
    stop.store(true, Ordering::Relaxed);
    relay.join().unwrap();
    let seen = seen.lock().unwrap();
    let count = |prefix: &[u8]| seen.iter().filter(|d| d.starts_with(prefix)).count();
    let (gstream, idents) = (count(b"{\"code\":\"g\""), count(b"{\"code\":\"=\""));
    assert_eq!(
        gstream + idents,
        seen.len(),
        "only g-stream and ident datagrams"
    );
    assert!(gw.proc.terminate().success());
    let log = gw.proc.log_text();
    let c: HashMap<String, u64> = log
        .lines()
        .rev()
        .find(|l| l.contains("stopped; counters:"))
        .unwrap_or_else(|| panic!("no final counters line: {log}"))
        .split_whitespace()
        .filter_map(|f| f.split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect();
    assert_eq!(
        (c["gstream_packets"], c["gstream_unmatched"]),
        (gstream as u64, 0),
        "{c:?}"
    );
    assert_eq!(
        (c["parse_errors"], c["monitoring_ignored"]),
        (0, idents as u64),
        "{c:?}"
    );
    assert_eq!(c["values_rejected"], 0, "{c:?}");
    assert!(!log.contains("WARN"), "{log}");
}
