//! The test kit (`xrd2ganglia-testkit`), shared by the integration tests
//! (`tests/*/`), the crate's unit tests and the load lab: real gmond,
//! gmetad, ganglia-web, xrootd/cmsd and the xrd2ganglia binary, each on
//! loopback ports and stopped when its guard drops; a site (the gateway
//! and the gmetads that poll it, `Site`); scratch directories, free ports,
//! the captured records and what waits for a condition.
//!
//! The real components need Debian's ganglia-monitor, gmetad and
//! xrootd-server packages (`.ci/run` installs them) and root (xrootd runs
//! as `nobody`); the quick tier (`tests/quick`) uses none of them.

pub mod child;
mod gmetad;
mod gmond;
mod gmond_conf;
mod grid;
mod gweb;
pub mod markdown;
pub mod releases;
pub mod replay;
mod scratch;
mod site;
pub mod status;
mod wait;

pub use gmetad::{Gmetad, parse_rrd_fetch, rrdtool, while_locked};
pub use gmond::{GangliaXml, Gmond, XmlHost, XmlMetric};
pub use gmond_conf::gmond_conf;
pub use grid::{clusters_of, names, parse_ganglia};
pub use gweb::{Gweb, GwebServer, gweb_files, included_reports};
pub use scratch::{Scratch, free_port};
pub use site::{GmetadOf, Polls, Site};
pub use wait::{wait_for, wait_for_every};

/// The checkout this kit is part of (it is `tests/kit` in it): where
/// `tests/data`, `docs` and `conf` are.
pub fn checkout() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The gateway binary cargo built for the test or benchmark running:
/// `target/<profile>/xrd2ganglia`, beside the `deps/` directory the test's
/// own executable is in (cargo builds a package's binaries before its
/// integration tests and benchmarks).
pub fn gateway_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the running test's own path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("a test executable under target/<profile>/deps");
    let bin = profile.join("xrd2ganglia");
    assert!(
        bin.exists(),
        "{} not built: run the tests through cargo",
        bin.display()
    );
    bin
}

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

    /// Like `start_xml`, run under its own host name `uts_host` (in a UTS
    /// namespace of its own, as on a machine of its own: what its own host
    /// is named after). Needs root, as the xrootd tests do.
    pub fn start_xml_as(
        uts_host: &str,
        port: u16,
        xml_port: u16,
        gmond_port: Option<u16>,
        config: &str,
    ) -> Gateway {
        let mut args = vec!["--xml-listen".to_string(), format!("127.0.0.1:{xml_port}")];
        match gmond_port {
            Some(p) => args.extend(["--send".to_string(), format!("127.0.0.1:{p}")]),
            None => args.push("--no-send".into()),
        }
        let mut g = Self::launch_in(Some(uts_host), port, &args, config);
        g.xml_port = Some(xml_port);
        g
    }

    /// The gateway's XML document, as text. The port listens once the
    /// gateway can answer a whole document (its warm-up, after "serving"
    /// is logged): a poll waits for its "listening" line first, as
    /// gmetad's refused poll is followed by another.
    pub fn xml_text(&self) -> String {
        let port = self.xml_port.expect("a gateway started with an XML port");
        let line = format!("xml_listen 127.0.0.1:{port}: listening");
        wait_for("the XML port listening", Duration::from_secs(30), || {
            self.proc.log_text().contains(&line).then_some(())
        });
        read_xml(port)
    }

    /// The gateway's XML document, parsed (panics if not well-formed).
    pub fn xml(&self) -> GangliaXml {
        GangliaXml::parse(&self.xml_text())
    }

    fn launch(port: u16, args: &[String], config: &str) -> Gateway {
        Self::launch_in(None, port, args, config)
    }

    fn launch_in(uts_host: Option<&str>, port: u16, args: &[String], config: &str) -> Gateway {
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
        // And its control socket (`xrd2ganglia status`): the default,
        // /run/xrd2ganglia/control, is one per machine.
        let config = if config.contains("control_socket") {
            config
        } else {
            format!(
                "control_socket = {:?}\n{config}",
                dir.path().join("control").display().to_string()
            )
        };
        std::fs::write(&conf, config).unwrap();
        let bin = gateway_bin();
        let mut cmd = match uts_host {
            // unshare(1) and then sh exec the gateway: its pid is the child's.
            Some(h) => {
                let mut c = Command::new(require("unshare", "util-linux"));
                c.args(["--uts", "sh", "-c", "hostname \"$0\" && exec \"$@\"", h])
                    .arg(&bin);
                c
            }
            None => Command::new(bin),
        };
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

    /// Waits until the gateway has read what it was sent, but for 64 KiB
    /// (its receive queue, as /proc/net/udp shows it): a test that sends
    /// thousands of records at once calls it now and then, so that on a
    /// busy machine none is dropped at the socket (that is not what such a
    /// test tests).
    pub fn wait_until_read(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while udp_rx_queue(self.port).is_some_and(|q| q > 64 * 1024) {
            assert!(
                Instant::now() < deadline,
                "the gateway read nothing for 30 s"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The gateway's last `stopped; counters ...` log line (its counters
    /// at SIGTERM), or "" before it stopped.
    pub fn counters_line(&self) -> String {
        let log = self.proc.log_text();
        log.lines()
            .rev()
            .find(|l| l.contains("stopped; counters"))
            .unwrap_or_default()
            .to_string()
    }

    pub fn send_v6(&self, datagram: &[u8]) {
        send_from("[::1]:0", &format!("[::1]:{}", self.port), datagram);
    }
}

/// Counter `name` (`name=N`) of a `counters` log line; fails the test if
/// the line has none.
pub fn counter(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

/// Bytes waiting in the receive queue of the UDP socket bound to
/// 127.0.0.1:`port`, as /proc/net/udp shows it (None: no such socket).
pub fn udp_rx_queue(port: u16) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/udp").ok()?;
    let local = format!("0100007F:{port:04X}");
    table.lines().skip(1).find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        (cols.get(1) == Some(&local.as_str())).then(|| {
            cols.get(4)?
                .split(':')
                .nth(1)
                .and_then(|q| u64::from_str_radix(q, 16).ok())
        })?
    })
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

    /// Runs the xrootd of a cmake build directory `build` (its `bin/xrootd`
    /// and its plug-ins in `lib/`: an xrootd built from source, e.g. 6.x)
    /// with `config` text, as [`start`](Self::start) does.
    pub fn start_built(build: &Path, name: &str, root: &Path, config: &str) -> Xrootd {
        let bin = build.join("bin/xrootd");
        assert!(bin.is_file(), "no xrootd build at {}", bin.display());
        let cfg = root.join(format!("{name}-xrootd.cfg"));
        std::fs::write(&cfg, config).unwrap();
        chown_nobody(root);
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
            .arg("env")
            .arg(format!("LD_LIBRARY_PATH={}", build.join("lib").display()))
            .arg(bin)
            .arg("-c")
            .arg(&cfg)
            .args(["-n", name]);
        let proc = spawn("xrootd", cmd, &root.join(format!("{name}-xrootd.log")));
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

impl Default for Capture {
    fn default() -> Capture {
        Capture::new()
    }
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
        // A signal (another test's child exiting) may interrupt the wait.
        let n = loop {
            match self.socket.recv_from(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r.expect("no datagram captured within 15 s").0,
            }
        };
        buf.truncate(n);
        buf
    }
}

/// The fixtures captured from real xrootd 5.5.3 (see tests/data/records/README.md).
pub fn fixture(name: &str) -> Vec<u8> {
    let p = checkout().join("tests/data/records").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The sockets bound to UDP `port` (any address, IPv4 or IPv6) in the
/// network namespace of process `pid`, as "socket:[inode]", and whether
/// one of them is that process's.
pub fn udp_bound(pid: u32, port: u16) -> (bool, Vec<String>) {
    let sockets: Vec<String> = ["udp", "udp6"]
        .iter()
        .filter_map(|t| std::fs::read_to_string(format!("/proc/{pid}/net/{t}")).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter_map(|l| {
                    let cols: Vec<&str> = l.split_whitespace().collect();
                    let local_port = cols.get(1)?.rsplit_once(':')?.1;
                    let inode = cols.get(9)?;
                    (u16::from_str_radix(local_port, 16).ok()? == port)
                        .then(|| format!("socket:[{inode}]"))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let owned = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|l| sockets.iter().any(|s| l.to_str() == Some(s.as_str())))
        });
    (owned, sockets)
}
