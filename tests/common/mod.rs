//! Test harness: real gmond, real xrootd/cmsd, and the xrd2ganglia binary,
//! each on loopback ports, each stopped when its guard drops.
//!
//! These tests need Debian's ganglia-monitor and xrootd-server packages
//! (`.ci/run` installs them) and root (xrootd runs as `nobody`).

#![allow(dead_code)]

pub mod replay;
mod scratch;

pub use scratch::{Scratch, free_port};

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Read;
use std::net::{TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed on drop.
pub struct Proc {
    pub child: Child,
    pub name: String,
    pub log: PathBuf,
}

impl Proc {
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not stop on SIGTERM",
                self.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn require(binary: &str, package: &str) -> PathBuf {
    for dir in ["/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
        let p = Path::new(dir).join(binary);
        if p.exists() {
            return p;
        }
    }
    panic!("{binary} not found: install Debian's {package} (.ci/run does)");
}

fn spawn(name: &str, mut cmd: Command, log: &Path) -> Proc {
    let out = std::fs::File::create(log).unwrap();
    let err = out.try_clone().unwrap();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
    Proc {
        child,
        name: name.to_string(),
        log: log.to_path_buf(),
    }
}

/// A real gmond: receives on udp `port`, serves XML on tcp `xml_port`.
pub struct Gmond {
    pub proc: Proc,
    pub port: u16,
    pub xml_port: u16,
    pub conf: PathBuf,
    _dir: Scratch,
}

impl Gmond {
    pub fn start() -> Gmond {
        Self::start_with(free_port(), free_port(), "")
    }

    /// `extra_globals` goes into the globals section (e.g. cleanup_threshold).
    pub fn start_with(port: u16, xml_port: u16, extra_globals: &str) -> Gmond {
        let recv = format!("udp_recv_channel {{ port = {port}  bind = 127.0.0.1 }}");
        Self::start_conf(port, xml_port, extra_globals, &recv)
    }

    /// Like `start_with`, plus `extra_sections` appended verbatim to the
    /// file (e.g. a `udp_send_channel`, to capture gmond's 136 requests).
    /// Note: gmond 3.7.2 runs its cleanup only on a "collection tick": every
    /// 60 s while mute (or without any udp_send_channel, which forces mute),
    /// every second when `mute = no` with a send channel and no collection
    /// groups. A test of dmax expiry needs `mute = no` plus a send channel.
    pub fn start_full(
        port: u16,
        xml_port: u16,
        extra_globals: &str,
        extra_sections: &str,
    ) -> Gmond {
        let sections =
            format!("udp_recv_channel {{ port = {port}  bind = 127.0.0.1 }}\n{extra_sections}");
        Self::start_conf(port, xml_port, extra_globals, &sections)
    }

    /// A gmond that joins multicast `group` on the loopback interface.
    pub fn start_multicast(group: &str, port: u16) -> Gmond {
        let recv = format!(
            "udp_recv_channel {{ mcast_join = {group}  port = {port}  bind = {group}  mcast_if = lo }}"
        );
        Self::start_conf(port, free_port(), "", &recv)
    }

    fn start_conf(port: u16, xml_port: u16, extra_globals: &str, recv: &str) -> Gmond {
        let gmond = require("gmond", "ganglia-monitor");
        let dir = Scratch::new("gmond");
        let conf = dir.path().join("gmond.conf");
        std::fs::write(
            &conf,
            format!(
                r#"globals {{
  daemonize = no
  setuid = no
  user = nobody
  debug_level = 0
  mute = yes
  deaf = no
  host_dmax = 0
  cleanup_threshold = 300
  send_metadata_interval = 0
  {extra_globals}
}}
cluster {{ name = "xrd2ganglia-test" }}
{recv}
tcp_accept_channel {{ port = {xml_port}  bind = 127.0.0.1 }}
"#
            ),
        )
        .unwrap();
        let mut cmd = Command::new(gmond);
        cmd.arg("-c").arg(&conf).arg("-f");
        let proc = spawn("gmond", cmd, &dir.path().join("gmond.log"));
        let g = Gmond {
            proc,
            port,
            xml_port,
            conf,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", xml_port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "gmond did not start: {}",
                g.proc.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        g
    }

    /// gmond's XML, as text.
    pub fn xml_text(&self) -> String {
        read_xml(self.xml_port)
    }

    /// gmond's XML, parsed (panics if it is not well-formed).
    pub fn xml(&self) -> GangliaXml {
        GangliaXml::parse(&self.xml_text())
    }

    /// Polls the XML until `ok` holds or `timeout` passes.
    pub fn wait_for(
        &self,
        timeout: Duration,
        what: &str,
        ok: impl Fn(&GangliaXml) -> bool,
    ) -> GangliaXml {
        let deadline = Instant::now() + timeout;
        loop {
            let x = self.xml();
            if ok(&x) {
                return x;
            }
            if Instant::now() > deadline {
                panic!(
                    "timed out waiting for {what}; gmond has hosts {:?}",
                    x.hosts.keys().collect::<Vec<_>>()
                );
            }
            // gmond does not read its UDP socket while it writes this XML:
            // poll gently.
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// One METRIC element.
#[derive(Clone, Debug, Default)]
pub struct XmlMetric {
    pub attrs: BTreeMap<String, String>,
    pub extra: BTreeMap<String, String>,
}

impl XmlMetric {
    pub fn get(&self, k: &str) -> &str {
        self.attrs.get(k).map(String::as_str).unwrap_or("")
    }
}

/// One HOST element.
#[derive(Clone, Debug, Default)]
pub struct XmlHost {
    pub attrs: BTreeMap<String, String>,
    pub metrics: BTreeMap<String, XmlMetric>,
}

/// gmond's XML, hosts by NAME (`NAME@IP` for a second host of the same NAME).
#[derive(Clone, Debug, Default)]
pub struct GangliaXml {
    pub hosts: BTreeMap<String, XmlHost>,
}

impl GangliaXml {
    /// Parses with a strict XML parser: ill-formed XML fails the test.
    pub fn parse(text: &str) -> GangliaXml {
        // gmond's XML has a DOCTYPE with an internal subset; roxmltree needs DTDs allowed.
        let opts = roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        };
        let doc = roxmltree::Document::parse_with_options(text, opts).unwrap_or_else(|e| {
            panic!(
                "gmond XML is not well-formed: {e}\n{}",
                &text[..text.len().min(4000)]
            )
        });
        let mut out = GangliaXml::default();
        for h in doc.descendants().filter(|n| n.has_tag_name("HOST")) {
            let mut host = XmlHost {
                attrs: h
                    .attributes()
                    .map(|a| (a.name().to_string(), a.value().to_string()))
                    .collect(),
                ..Default::default()
            };
            for m in h.children().filter(|n| n.has_tag_name("METRIC")) {
                let mut metric = XmlMetric {
                    attrs: m
                        .attributes()
                        .map(|a| (a.name().to_string(), a.value().to_string()))
                        .collect(),
                    ..Default::default()
                };
                for e in m.descendants().filter(|n| n.has_tag_name("EXTRA_ELEMENT")) {
                    metric.extra.insert(
                        e.attribute("NAME").unwrap_or("").to_string(),
                        e.attribute("VAL").unwrap_or("").to_string(),
                    );
                }
                host.metrics.insert(metric.get("NAME").to_string(), metric);
            }
            // gmond keys hosts by IP; two can share a NAME: keep both.
            let name = host.attrs.get("NAME").cloned().unwrap_or_default();
            let key = if out.hosts.contains_key(&name) {
                format!(
                    "{name}@{}",
                    host.attrs.get("IP").cloned().unwrap_or_default()
                )
            } else {
                name
            };
            out.hosts.insert(key, host);
        }
        out
    }

    /// True if `host` has every one of `metrics`. A record's packets land
    /// one by one; the derived `uptime` is always its last.
    pub fn has(&self, host: &str, metrics: &[&str]) -> bool {
        self.hosts
            .get(host)
            .is_some_and(|h| metrics.iter().all(|m| h.metrics.contains_key(*m)))
    }

    pub fn host(&self, name: &str) -> &XmlHost {
        self.hosts.get(name).unwrap_or_else(|| {
            panic!(
                "no host {name:?} in gmond; hosts: {:?}",
                self.hosts.keys().collect::<Vec<_>>()
            )
        })
    }

    pub fn metric(&self, host: &str, name: &str) -> &XmlMetric {
        let h = self.host(host);
        h.metrics.get(name).unwrap_or_else(|| {
            panic!(
                "no metric {name:?} on {host:?}; it has {:?}",
                h.metrics.keys().collect::<Vec<_>>()
            )
        })
    }
}

/// Everything a TCP server on 127.0.0.1:`port` writes before it closes
/// (gmond's XML port, or the gateway's).
pub fn read_xml(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("connect to 127.0.0.1:{port}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)
        .unwrap_or_else(|e| panic!("read XML from 127.0.0.1:{port}: {e}"));
    String::from_utf8_lossy(&buf).into_owned()
}

/// The gateway binary.
pub struct Gateway {
    pub proc: Proc,
    pub port: u16,
    pub config: PathBuf,
    /// Its XML port, when started with one ([`Gateway::start_xml`]).
    pub xml_port: Option<u16>,
    _dir: Scratch,
}

impl Gateway {
    /// `serve` listening on 127.0.0.1:`port` (and [::1]:`port`), sending to
    /// gmond on 127.0.0.1:`gmond_port`, with `config` as the file's contents.
    pub fn start(gmond_port: u16, config: &str) -> Gateway {
        Self::start_on(free_port(), gmond_port, config)
    }

    pub fn start_on(port: u16, gmond_port: u16, config: &str) -> Gateway {
        Self::launch(
            port,
            &["--send".into(), format!("127.0.0.1:{gmond_port}")],
            config,
        )
    }

    /// `serve` with an XML port on 127.0.0.1:`xml_port` for gmetad, and
    /// sending to gmond on 127.0.0.1:`gmond_port`, or to no gmond at all
    /// (`--no-send`).
    pub fn start_xml(port: u16, xml_port: u16, gmond_port: Option<u16>, config: &str) -> Gateway {
        let mut args = vec!["--xml-listen".to_string(), format!("127.0.0.1:{xml_port}")];
        match gmond_port {
            Some(p) => args.extend(["--send".to_string(), format!("127.0.0.1:{p}")]),
            None => args.push("--no-send".into()),
        }
        let mut g = Self::launch(port, &args, config);
        g.xml_port = Some(xml_port);
        g
    }

    /// The gateway's XML document, as text.
    pub fn xml_text(&self) -> String {
        read_xml(self.xml_port.expect("a gateway started with an XML port"))
    }

    /// The gateway's XML document, parsed (panics if not well-formed).
    pub fn xml(&self) -> GangliaXml {
        GangliaXml::parse(&self.xml_text())
    }

    fn launch(port: u16, args: &[String], config: &str) -> Gateway {
        let dir = Scratch::new("gw");
        let conf = dir.path().join("xrd2ganglia.toml");
        // Each gateway keeps its counter state in its own scratch directory
        // (a top-level key, so before any table of the config).
        let config = if config.contains("state_file") {
            config.to_string()
        } else {
            format!(
                "state_file = {:?}\n{config}",
                dir.path().join("state").display().to_string()
            )
        };
        std::fs::write(&conf, config).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_xrd2ganglia"));
        cmd.args(["serve", "--config"])
            .arg(&conf)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--listen", &format!("[::1]:{port}")])
            .args(args)
            .args(["--log-level", "debug"]);
        let proc = spawn("xrd2ganglia", cmd, &dir.path().join("serve.log"));
        let g = Gateway {
            proc,
            port,
            config: conf,
            xml_port: None,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !g.proc.log_text().contains("serving") {
            assert!(
                Instant::now() < deadline,
                "gateway did not start: {}",
                g.proc.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        g
    }

    /// Sends one datagram from a fresh loopback socket (IPv4 or IPv6).
    pub fn send(&self, datagram: &[u8]) {
        send_from("127.0.0.1:0", &format!("127.0.0.1:{}", self.port), datagram);
    }

    /// Sends from another loopback address: gmond files spoofed hosts by
    /// their IP, so distinct servers need distinct source addresses.
    pub fn send_as(&self, ip: &str, datagram: &[u8]) {
        send_from(
            &format!("{ip}:0"),
            &format!("127.0.0.1:{}", self.port),
            datagram,
        );
    }

    pub fn send_v6(&self, datagram: &[u8]) {
        send_from("[::1]:0", &format!("[::1]:{}", self.port), datagram);
    }
}

pub fn send_from(bind: &str, to: &str, datagram: &[u8]) {
    let s = UdpSocket::bind(bind).unwrap();
    s.send_to(datagram, to).unwrap();
}

/// A real xrootd or cmsd, run as `nobody` (xrootd refuses root).
pub struct Xrootd {
    pub proc: Proc,
}

impl Xrootd {
    /// Runs `program` (xrootd or cmsd) with `config` text; `root` must be
    /// owned by nobody.
    pub fn start(program: &str, name: &str, root: &Path, config: &str) -> Xrootd {
        let bin = require(program, "xrootd-server");
        let cfg = root.join(format!("{name}-{program}.cfg"));
        std::fs::write(&cfg, config).unwrap();
        chown_nobody(root);
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
            .arg(bin)
            .arg("-c")
            .arg(&cfg)
            .args(["-n", name]);
        let proc = spawn(program, cmd, &root.join(format!("{name}-{program}.log")));
        Xrootd { proc }
    }
}

/// Makes `dir` and everything in it owned by nobody.
pub fn chown_nobody(dir: &Path) {
    let st = Command::new("chown")
        .args(["-R", "nobody:nogroup"])
        .arg(dir)
        .status()
        .unwrap();
    assert!(
        st.success(),
        "chown failed: are the tests running as root? (xrootd must run as nobody)"
    );
    // Let nobody traverse to it.
    let mut p = dir.parent();
    while let Some(d) = p {
        if d == Path::new("/") {
            break;
        }
        let _ = Command::new("chmod").arg("o+x").arg(d).status();
        p = d.parent();
    }
}

/// A UDP socket that captures datagrams (a second xrd.report destination).
pub struct Capture {
    pub socket: UdpSocket,
    pub port: u16,
}

impl Capture {
    pub fn new() -> Capture {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = socket.local_addr().unwrap().port();
        socket
            .set_read_timeout(Some(Duration::from_secs(15)))
            .unwrap();
        Capture { socket, port }
    }

    pub fn next(&self) -> Vec<u8> {
        let mut buf = vec![0u8; 65536];
        let (n, _) = self
            .socket
            .recv_from(&mut buf)
            .expect("no datagram captured within 15 s");
        buf.truncate(n);
        buf
    }
}

/// The fixtures captured from real xrootd 5.5.3 (see tests/data/records/README.md).
pub fn fixture(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/records")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A real gmetad 3.7.2 polling one gmond's XML every `step` seconds and
/// writing RRDs under a scratch `rrd_rootdir`; killed on drop.
///
/// What it writes (measured with Debian 12's gmetad 3.7.2 and rrdtool 1.7.2):
/// `<root>/<CLUSTER NAME>/<HOST NAME>/<metric>.rrd` with one DS `sum`, and
/// `<root>/<CLUSTER NAME>/__SummaryInfo__/<metric>.rrd` with DSs `sum`, `num`,
/// both with `--step step`, DS type COUNTER for slope positive (GAUGE for
/// zero/both/unspecified), heartbeat 8 x step, and the finest RRA
/// `AVERAGE:0.5:1:5856`. The directory is the CLUSTER NAME in gmond's XML
/// (not the data_source name) and the HOST NAME (the part after ':' of a
/// spoof). gmetad polls once at start, then every `step` seconds, and
/// stamps each update with the CLUSTER LOCALTIME of that poll.
pub struct Gmetad {
    pub proc: Proc,
    /// The data source's polling interval, which is also the RRDs' step.
    pub step: u64,
    pub rrd_root: PathBuf,
    /// gmetad cannot be told an address: it listens on these ports on every
    /// interface, but answers only trusted hosts (127.0.0.1 here).
    pub xml_port: u16,
    pub interactive_port: u16,
    pub conf: PathBuf,
    _dir: Scratch,
}

impl Gmetad {
    /// Starts gmetad in the foreground (`-d 1`: errors only, no daemon), as
    /// the current user (`setuid off`), polling 127.0.0.1:`gmond_xml_port`.
    pub fn start(gmond_xml_port: u16, step: u64) -> Gmetad {
        assert!(
            step >= 1,
            "gmetad's polling interval is whole seconds, >= 1"
        );
        let gmetad = require("gmetad", "gmetad");
        require("rrdtool", "rrdtool");
        let dir = Scratch::new("gmetad");
        let rrd_root = dir.path().join("rrds");
        // gmetad refuses an rrd_rootdir that its user does not own: ours
        // is made by this process, and gmetad runs as this process's user.
        std::fs::create_dir_all(&rrd_root).unwrap();
        let (xml_port, interactive_port) = (free_port(), free_port());
        let conf = dir.path().join("gmetad.conf");
        std::fs::write(
            &conf,
            format!(
                r#"data_source "xrd2ganglia-test-source" {step} 127.0.0.1:{gmond_xml_port}
setuid off
xml_port {xml_port}
interactive_port {interactive_port}
server_threads 2
trusted_hosts 127.0.0.1
rrd_rootdir "{}"
"#,
                rrd_root.display()
            ),
        )
        .unwrap();
        let mut cmd = Command::new(gmetad);
        cmd.arg("-c").arg(&conf).args(["-d", "1"]);
        let mut proc = spawn("gmetad", cmd, &dir.path().join("gmetad.log"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", xml_port)).is_err() {
            if let Some(status) = proc.child.try_wait().unwrap() {
                panic!("gmetad exited ({status}): {}", proc.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "gmetad did not start: {}",
                proc.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Gmetad {
            proc,
            step,
            rrd_root,
            xml_port,
            interactive_port,
            conf,
            _dir: dir,
        }
    }

    /// A host's RRD: `cluster` is gmond's CLUSTER NAME, `host` the HOST NAME.
    pub fn rrd_path(&self, cluster: &str, host: &str, metric: &str) -> PathBuf {
        self.rrd_root
            .join(cluster)
            .join(host)
            .join(format!("{metric}.rrd"))
    }

    /// The cluster-wide summary RRD (DSs `sum` and `num`).
    pub fn summary_rrd_path(&self, cluster: &str, metric: &str) -> PathBuf {
        self.rrd_root
            .join(cluster)
            .join("__SummaryInfo__")
            .join(format!("{metric}.rrd"))
    }

    /// Waits until `path` exists (gmetad creates an RRD at the first poll
    /// that sees the metric).
    pub fn wait_for_rrd(&self, path: &Path, timeout: Duration) {
        self.poll(
            timeout,
            || path.exists(),
            || format!("no {}", path.display()),
        );
    }

    /// Polls `done` every 100 ms; after `timeout`, fails with `what` and
    /// gmetad's log.
    fn poll(&self, timeout: Duration, done: impl Fn() -> bool, what: impl Fn() -> String) {
        let deadline = Instant::now() + timeout;
        while !done() {
            assert!(
                Instant::now() < deadline,
                "{} after {timeout:?}; gmetad log: {}",
                what(),
                self.proc.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The time of the RRD's last update (`rrdtool last`).
    pub fn last_update(&self, path: &Path) -> u64 {
        let out = rrdtool(&[OsStr::new("last"), path.as_os_str()]);
        out.trim()
            .parse()
            .unwrap_or_else(|e| panic!("rrdtool last {}: {e}: {out:?}", path.display()))
    }

    /// Waits until gmetad has updated `path` at or after `at_least`.
    pub fn wait_for_update(&self, path: &Path, at_least: u64, timeout: Duration) {
        self.wait_for_rrd(path, timeout);
        self.poll(
            timeout,
            || self.last_update(path) >= at_least,
            || {
                format!(
                    "{} last updated at {}, not yet at {at_least}",
                    path.display(),
                    self.last_update(path)
                )
            },
        );
    }

    /// The RRD's step, from `rrdtool info`.
    pub fn rrd_step(&self, path: &Path) -> u64 {
        let info = rrdtool(&[OsStr::new("info"), path.as_os_str()]);
        info.lines()
            .find_map(|l| l.strip_prefix("step = "))
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| panic!("no step in rrdtool info {}:\n{info}", path.display()))
    }

    /// The `sum` DS (the first) of the finest RRA between `start` and `end`
    /// (epoch seconds): `(row time, value)` with unknown (nan) as None. A row
    /// stamped T averages the interval (T - step, T]; a COUNTER DS holds a
    /// rate per second.
    pub fn fetch(&self, path: &Path, start: u64, end: u64) -> Vec<(u64, Option<f64>)> {
        self.fetch_ds(path, "sum", start, end)
    }

    /// Like `fetch`, for the DS named `ds` (`sum`, or `num` in a summary RRD).
    pub fn fetch_ds(&self, path: &Path, ds: &str, start: u64, end: u64) -> Vec<(u64, Option<f64>)> {
        let step = self.rrd_step(path).to_string();
        let (start, end) = (start.to_string(), end.to_string());
        let out = rrdtool(&[
            OsStr::new("fetch"),
            path.as_os_str(),
            OsStr::new("AVERAGE"),
            OsStr::new("-s"),
            OsStr::new(&start),
            OsStr::new("-e"),
            OsStr::new(&end),
            OsStr::new("-r"),
            OsStr::new(&step),
        ]);
        parse_rrd_fetch(&out, ds)
            .unwrap_or_else(|e| panic!("rrdtool fetch {}: {e}:\n{out}", path.display()))
    }
}

/// Runs rrdtool and returns its stdout; panics with stderr on failure.
fn rrdtool(args: &[&OsStr]) -> String {
    let out = Command::new(require("rrdtool", "rrdtool"))
        .args(args)
        .output()
        .expect("run rrdtool");
    assert!(
        out.status.success(),
        "rrdtool {:?} failed: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Parses `rrdtool fetch` output: a header line of DS names, a blank line,
/// then `TIME: v1 v2 ...` rows where unknown is `nan` or `-nan`.
pub fn parse_rrd_fetch(text: &str, ds: &str) -> Result<Vec<(u64, Option<f64>)>, String> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = lines.next().ok_or("empty output")?;
    let col = header
        .split_whitespace()
        .position(|n| n == ds)
        .ok_or_else(|| format!("no DS {ds:?} in header {header:?}"))?;
    lines
        .map(|line| {
            let (t, vals) = line
                .split_once(':')
                .ok_or_else(|| format!("bad row {line:?}"))?;
            let t = t
                .trim()
                .parse()
                .map_err(|e| format!("bad time in {line:?}: {e}"))?;
            let v = vals
                .split_whitespace()
                .nth(col)
                .ok_or_else(|| format!("no column {col} in {line:?}"))?;
            let v: f64 = v
                .parse()
                .map_err(|e| format!("bad value in {line:?}: {e}"))?;
            Ok((t, (!v.is_nan()).then_some(v)))
        })
        .collect()
}
