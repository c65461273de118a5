//! A real gmetad (3.7.2) writing RRDs, and rrdtool to read them.

use std::ffi::OsStr;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use super::{Proc, Scratch, free_port, require, spawn};

/// The name of the data source of a gmetad [`Gmetad::start`] starts.
pub(crate) const SOURCE: &str = "xrd2ganglia-test-source";

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
        Self::start_sources(&[gmond_xml_port], step)
    }

    /// Like `start`, with every port of `xml_ports` (127.0.0.1) as an
    /// address of the one data source, in that order: gmetad polls the
    /// last one that answered and walks the list from the top when it
    /// cannot connect (a pair of gateways, docs/pair.md).
    pub fn start_sources(xml_ports: &[u16], step: u64) -> Gmetad {
        Self::start_grid(&[(SOURCE, xml_ports)], step, "")
    }

    /// A gmetad of a hierarchy (docs/clusters.md, a federation): one
    /// `data_source` per `(name, ports)` of `sources` (127.0.0.1, each
    /// polled every `step` seconds), and `extra` gmetad.conf lines
    /// (`gridname`, `authority`, `scalable`). Its own `xml_port` is what a
    /// gmetad above it polls.
    pub fn start_grid(sources: &[(&str, &[u16])], step: u64, extra: &str) -> Gmetad {
        let data_sources: String = sources
            .iter()
            .map(|(name, ports)| {
                let addresses: Vec<String> =
                    ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
                format!("data_source {name:?} {step} {}\n", addresses.join(" "))
            })
            .collect();
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
                r#"{data_sources}{extra}
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

/// How long a read of an RRD waits for gmetad's update to let go of it.
const LOCKED_AT_MOST: Duration = Duration::from_secs(10);

/// Runs the command `make` gives, again while it fails with "could not
/// lock RRD" (for at most [`LOCKED_AT_MOST`]), and returns its output.
/// rrdtool 1.7 locks an RRD to read it too, and does not wait for the
/// lock: a read (`rrdtool last`, `fetch`, graph.php's `rrdtool graph`)
/// that meets gmetad's update of the file fails (315 of 2,000 `rrdtool
/// last` beside a loop of `rrdtool update` on this machine; once a gmetad
/// pair test's 3 minutes), and ganglia-web shows a broken graph until the
/// next reload.
pub fn while_locked(mut make: impl FnMut() -> Command) -> Output {
    let deadline = Instant::now() + LOCKED_AT_MOST;
    loop {
        let out = make().output().expect("run the command");
        let locked = String::from_utf8_lossy(&out.stderr).contains("could not lock RRD");
        if !locked || Instant::now() >= deadline {
            return out;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs rrdtool and returns its stdout ([`while_locked`]); panics with
/// stderr on failure.
pub fn rrdtool(args: &[&OsStr]) -> String {
    let out = while_locked(|| {
        let mut c = Command::new(require("rrdtool", "rrdtool"));
        c.args(args);
        c
    });
    assert!(
        out.status.success(),
        "rrdtool {args:?} failed: {}",
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
