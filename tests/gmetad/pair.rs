//! Two gateways, one site (issue 35, docs/pair.md): five servers report to
//! both gateways, as `xrd.report gw1:3333,gw2:3333` makes xrootd do, and a
//! real gmetad 3.7.2 polls both in one `data_source`; then each gateway in
//! turn dies, restarts (with its state, without, at once) while the
//! servers restart or stop, and the RRDs gmetad wrote are read with
//! `rrdtool fetch`. No row of a host or summary RRD may show more than
//! twice the rate the servers' counters grew at (the true rate, from what
//! the replay sent: a missed restart or a fresh gateway would write a wrap
//! of ~4.3e9/step, or 2^64 above 2^32), and gmetad's updates may pause for
//! at most three steps at any failover. Then both gateways send into one
//! real gmond after they diverged: no server's counter may go down there.
//!
//! Every scenario shares one gmetad and one gmond run, in sequence, to
//! stay within a few minutes of wall time. The figures it prints are
//! docs/pair.md's.

use xrd2ganglia_testkit as common;

use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Gateway, Gmetad, Gmond, Scratch, fixture, free_port, replay::unix_now};

/// gmetad's step: the issue's 5 s. The servers report every 2 or 3 s, so
/// between two polls each counter has moved 1-3 times: a row's rate is
/// within (5 +- 3) / (5 -+ 1) of the true one, never 2x.
const STEP: u64 = 5;
const CLUSTER: &str = "T2_PAIR";
const SERVERS: usize = 5;
/// Each server's report interval (xrd.report `every`), seconds.
const EVERY: [u64; SERVERS] = [2, 3, 2, 3, 2];

/// A replayed xrootd: a real record (ds_loaded.xml, xrootd 5.5.3) with
/// its name, start time, pid and link byte counters set; the counters
/// grow at a fixed rate per second of the wall clock, read at each send.
struct Server {
    host: String,
    pid: u32,
    tos: u64,
    /// Counters at `since` (a restart starts them from zero).
    base: u64,
    since: Instant,
    in_rate: f64,
    every: Duration,
    next: Instant,
    /// Unix second it stopped reporting, if it did.
    stopped: Option<u64>,
}

impl Server {
    fn in_bytes(&self, now: Instant) -> u64 {
        self.base + (self.in_rate * now.duration_since(self.since).as_secs_f64()) as u64
    }

    fn record(&self, template: &str, now: Instant) -> String {
        let inb = self.in_bytes(now);
        template
            .replace("@TOD@", &unix_now().to_string())
            .replace("@HOST@", &self.host)
            .replace("@TOS@", &self.tos.to_string())
            .replace("@PID@", &self.pid.to_string())
            .replace("@IN@", &inb.to_string())
            .replace("@OUT@", &(2 * inb).to_string())
    }

    /// A restart: new pid and start time, counters from zero.
    fn restart(&mut self) {
        self.pid += 1;
        self.tos = unix_now();
        self.base = 0;
        self.since = Instant::now();
    }
}

/// ds_loaded.xml with markers where each server's values go.
fn template() -> String {
    let real = String::from_utf8(fixture("ds_loaded.xml")).expect("a UTF-8 record");
    let mut t = real;
    for (from, to) in [
        (r#"tod="1795303789""#, r#"tod="@TOD@""#),
        (r#"src="vm:21194""#, r#"src="@HOST@:1094""#),
        (r#"tos="1795303118""#, r#"tos="@TOS@""#),
        (r#"pid="4064""#, r#"pid="@PID@""#),
        // A server started without -n: metrics named xrootd.link.in.
        (r#"ins="ds""#, r#"ins="anon""#),
        ("<host>vm</host>", "<host>@HOST@</host>"),
        ("<in>15748727</in>", "<in>@IN@</in>"),
        ("<out>15748942</out>", "<out>@OUT@</out>"),
    ] {
        assert!(t.contains(from), "ds_loaded.xml has no {from}");
        t = t.replace(from, to);
    }
    t
}

/// The servers, sending every report to both gateways (gw1 first, as
/// XrdStats.cc sends to netDest[0] then netDest[1]) until `stop`.
struct Fleet {
    servers: Mutex<Vec<Server>>,
    ports: [u16; 2],
    stop: AtomicBool,
    /// UDP to that gateway lost: nothing of the servers reaches it.
    lost: [AtomicBool; 2],
}

impl Fleet {
    fn new(ports: [u16; 2]) -> Fleet {
        let now = Instant::now();
        let servers = (0..SERVERS)
            .map(|i| Server {
                host: format!("s{}.pair.example", i + 1),
                pid: 1000 + i as u32,
                tos: unix_now() - 86_400,
                // Above 2^32, as a day's traffic is: a gateway that loses
                // the offset of a restart then draws a 2^64 wrap.
                base: 5_000_000_000 + i as u64 * 1_000_000_000,
                since: now,
                in_rate: 1_000_000.0 * (i + 1) as f64,
                every: Duration::from_secs(EVERY[i]),
                next: now + Duration::from_millis(400 * i as u64),
                stopped: None,
            })
            .collect();
        Fleet {
            servers: Mutex::new(servers),
            ports,
            stop: AtomicBool::new(false),
            lost: [AtomicBool::new(false), AtomicBool::new(false)],
        }
    }

    fn run(&self) {
        let template = template();
        let sockets: Vec<UdpSocket> = (0..SERVERS)
            .map(|i| UdpSocket::bind(format!("127.0.35.{}:0", i + 1)).unwrap())
            .collect();
        while !self.stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            for (s, sock) in self.servers.lock().unwrap().iter_mut().zip(&sockets) {
                if s.stopped.is_some() || now < s.next {
                    continue;
                }
                s.next += s.every;
                let record = s.record(&template, now);
                for (port, lost) in self.ports.iter().zip(&self.lost) {
                    if lost.load(Ordering::Relaxed) {
                        continue;
                    }
                    // A gateway that is down: the datagram is lost, as
                    // xrootd's would be.
                    let _ = sock.send_to(record.as_bytes(), ("127.0.0.1", *port));
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn with(&self, i: usize, f: impl FnOnce(&mut Server)) {
        f(&mut self.servers.lock().unwrap()[i]);
    }

    /// The true rate of `xrootd.link.in` summed over the servers that
    /// reported at some time in (t - STEP, t].
    fn summary_rate(&self, t: u64) -> f64 {
        self.servers
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.stopped.is_none_or(|at| at + STEP > t))
            .map(|s| s.in_rate)
            .sum()
    }

    /// Each server's true rate of `xrootd.link.in`, in order.
    fn rates(&self) -> Vec<f64> {
        self.servers
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.in_rate)
            .collect()
    }

    /// Records per second one gateway receives from all the servers.
    fn records_rate(&self) -> f64 {
        EVERY.iter().map(|e| 1.0 / *e as f64).sum()
    }
}

/// A gateway of the pair, restarted on the same ports under the same host
/// name, with its own state file.
struct Member {
    name: &'static str,
    port: u16,
    xml_port: u16,
    state: PathBuf,
    /// Where it sends (the gmond path), or nothing (`send = false`).
    gmond: Option<u16>,
    extra: String,
    running: Option<Gateway>,
    /// The logs of its runs that ended, each headed by when it ended
    /// (shown when a test fails: a killed run's scratch directory is gone).
    logs: std::cell::RefCell<String>,
}

impl Member {
    fn new(name: &'static str, dir: &Path, gmond: Option<u16>) -> Member {
        Member {
            name,
            port: free_port(),
            xml_port: free_port(),
            state: dir.join(format!("{name}.state")),
            gmond,
            extra: String::new(),
            running: None,
            logs: Default::default(),
        }
    }

    fn config(&self) -> String {
        format!(
            "cluster_name = {CLUSTER:?}\nstate_file = {:?}\nstate_interval = 1\n\
             self_metrics_interval = {STEP}\nstats_interval = 0\nlog_interval = 1\n\
             metadata_interval = 5\ndmax = 0\n{}",
            self.state.display().to_string(),
            self.extra
        )
    }

    fn start(&mut self) {
        assert!(self.running.is_none(), "{} runs already", self.name);
        self.running = Some(Gateway::start_xml_as(
            self.name,
            self.port,
            self.xml_port,
            self.gmond,
            &self.config(),
        ));
    }

    /// Killed (SIGKILL): what a crash or a power cut does.
    fn kill(&mut self) {
        let mut g = self.running.take().expect("a running gateway");
        let _ = g.proc.child.kill();
        let _ = g.proc.child.wait();
        self.keep_log(&g, "killed");
    }

    fn keep_log(&self, g: &Gateway, how: &str) {
        let mut logs = self.logs.borrow_mut();
        logs.push_str(&format!("--- {} {how} at {}\n", self.name, unix_now()));
        logs.push_str(&g.proc.log_text());
    }

    /// Its logs so far, the run still going last.
    fn log(&self) -> String {
        let mut all = self.logs.borrow().clone();
        if let Some(g) = &self.running {
            all.push_str(&format!("--- {} running at {}\n", self.name, unix_now()));
            all.push_str(&g.proc.log_text());
        }
        all
    }

    /// Stopped (SIGTERM) and started again at once: an upgrade.
    fn restart_at_once(&mut self) {
        let mut g = self.running.take().expect("a running gateway");
        assert!(g.proc.terminate().success(), "{}", g.proc.log_text());
        self.keep_log(&g, "stopped");
        self.start();
    }

    /// A fresh machine: no state file.
    fn forget_state(&self) {
        let _ = std::fs::remove_file(&self.state);
    }
}

/// Makes the two a pair: each the other's `peer` (docs/pair.md), `gw2`
/// standing by for gmond when `standby`.
fn pair(gw1: &mut Member, gw2: &mut Member, standby: bool) {
    let (p1, p2) = (free_port(), free_port());
    gw1.extra = format!("peer = \"127.0.0.1:{p2}\"\npeer_listen = [\"127.0.0.1:{p1}\"]\n");
    gw2.extra = format!(
        "peer = \"127.0.0.1:{p1}\"\npeer_listen = [\"127.0.0.1:{p2}\"]\npeer_standby = {standby}\n"
    );
}

/// An RRD's rows, named, with the true rate at each row's time.
type Series<'a> = (
    String,
    Vec<(u64, Option<f64>)>,
    Box<dyn Fn(u64) -> f64 + 'a>,
);

/// One row of the issue's table: a window of time and what it holds.
struct Phase {
    what: &'static str,
    from: u64,
    to: u64,
}

/// Records `rrdtool last` of `rrd` every 250 ms: the times gmetad wrote.
fn watch_updates(gmetad: &Gmetad, rrd: &Path, stop: &AtomicBool, seen: &Mutex<Vec<u64>>) {
    while !stop.load(Ordering::Relaxed) {
        let last = gmetad.last_update(rrd);
        let mut seen = seen.lock().unwrap();
        if seen.last() != Some(&last) {
            seen.push(last);
        }
        drop(seen);
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The longest pause between gmetad's updates that ends in (from, to], or
/// that is still running at `to` (a gmetad stuck on one gateway).
fn longest_pause(updates: &[u64], from: u64, to: u64) -> u64 {
    let mut longest = 0;
    for w in updates.windows(2) {
        if w[1] > from && w[0] < to {
            longest = longest.max(w[1] - w[0]);
        }
    }
    let before_to = updates.iter().rev().find(|&&u| u <= to).copied();
    if let Some(last) = before_to {
        longest = longest.max(to - last);
    }
    longest
}

/// The largest ratio of a known row in (from, to] to its true rate.
fn worst_ratio(rows: &[(u64, Option<f64>)], from: u64, to: u64, truth: impl Fn(u64) -> f64) -> f64 {
    rows.iter()
        .filter(|(t, _)| *t > from && *t <= to)
        .filter_map(|(t, v)| v.map(|v| v / truth(*t)))
        .fold(0.0, f64::max)
}

/// The servers' link counters and how fast each grows against
/// `xrootd.link.in`.
const LINK: [(&str, f64); 2] = [("xrootd.link.in", 1.0), ("xrootd.link.out", 2.0)];

/// Every server's host RRD and the summary, in and out, as gmetad wrote
/// them from `start` to a step past `end`, each with its true rate.
fn server_series<'a>(gmetad: &Gmetad, fleet: &'a Fleet, start: u64, end: u64) -> Vec<Series<'a>> {
    let mut series: Vec<Series> = Vec::new();
    for (i, rate) in fleet.rates().into_iter().enumerate() {
        for (metric, k) in LINK {
            let host = format!("s{}.pair.example", i + 1);
            let path = gmetad.rrd_path(CLUSTER, &host, metric);
            series.push((
                format!("{host} {metric}"),
                gmetad.fetch(&path, start, end + STEP),
                Box::new(move |_| rate * k),
            ));
        }
    }
    for (metric, k) in LINK {
        let path = gmetad.summary_rrd_path(CLUSTER, metric);
        series.push((
            format!("summary {metric}"),
            gmetad.fetch(&path, start, end + STEP),
            Box::new(move |t| k * fleet.summary_rate(t)),
        ));
    }
    series
}

/// One row of the issue's table, printed: what happened, gmetad's
/// longest pause, and the worst ratio of each kind of series (host,
/// summary, own hosts) in (from, to] (a row stamped T averages
/// (T - STEP, T], so rows to a step past `to`); a row above 2x its true
/// rate is a failure of `what`.
fn table_row(
    series: &[Series],
    what: &str,
    (from, to): (u64, u64),
    pause: u64,
    failures: &mut Vec<String>,
) {
    let mut worst: BTreeMap<&str, (f64, &str)> = BTreeMap::new();
    for (name, rows, truth) in series {
        let r = worst_ratio(rows, from, to + STEP, truth);
        let kind = if name.starts_with("summary xrd2ganglia") || name.contains(" xrd2ganglia.") {
            "own hosts"
        } else if name.starts_with("summary") {
            "summary"
        } else {
            "host"
        };
        let e = worst.entry(kind).or_insert((0.0, ""));
        if r > e.0 {
            *e = (r, name);
        }
        if r > 2.0 {
            failures.push(format!("{what}: {name}: {r:.3e} x the true rate: {rows:?}"));
        }
    }
    let shown: Vec<String> = worst
        .iter()
        .map(|(k, (r, name))| format!("{r:.2} {k} ({name})"))
        .collect();
    eprintln!("| {what} | {pause} s | {} |", shown.join(", "));
}

/// Waits until gmetad's summary has every server, and a step more: the
/// summary is a sum, so a server first polled after the others adds its
/// whole counter to the sum in one poll (400x in a "both up" row on a
/// loaded machine, when the servers' first reports came over two polls).
/// Once every server's host RRD exists, a summary update a step later
/// leaves that jump before every row a phase reads (a row stamped T
/// averages (T - STEP, T]).
fn wait_for_every_server(gmetad: &Gmetad, summary: &Path) {
    gmetad.wait_for_rrd(summary, Duration::from_secs(40));
    for i in 1..=SERVERS {
        let host = format!("s{i}.pair.example");
        gmetad.wait_for_rrd(
            &gmetad.rrd_path(CLUSTER, &host, "xrootd.link.in"),
            Duration::from_secs(40),
        );
    }
    gmetad.wait_for_update(summary, unix_now() + STEP + 1, Duration::from_secs(40));
}

/// The hosts under the cluster's RRD directory that hold `metric`.
fn hosts_with(gmetad: &Gmetad, metric: &str) -> Vec<String> {
    let dir = gmetad.rrd_root.join(CLUSTER);
    let mut hosts: Vec<String> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join(format!("{metric}.rrd")).exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|h| h != "__SummaryInfo__")
        .collect();
    hosts.sort();
    hosts
}

/// Sets its flags when dropped, a panic's unwinding included: the threads
/// of a `thread::scope` stop, so the scope ends and the test fails.
struct StopOnDrop<'a>(&'a [&'a AtomicBool]);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        for flag in self.0 {
            flag.store(true, Ordering::Relaxed);
        }
    }
}

fn run_for(secs: u64) {
    std::thread::sleep(Duration::from_secs(secs));
}

#[test]
fn a_pair_fails_over_with_no_gap_and_no_spike_in_gmetads_rrds() {
    let dir = Scratch::new("pair");
    let mut gw1 = Member::new("gw1", dir.path(), None);
    let mut gw2 = Member::new("gw2", dir.path(), None);
    pair(&mut gw1, &mut gw2, false);
    let fleet = Fleet::new([gw1.port, gw2.port]);
    gw1.start();
    gw2.start();
    let gmetad = Gmetad::start_sources(&[gw1.xml_port, gw2.xml_port], STEP);
    let summary_in = gmetad.summary_rrd_path(CLUSTER, "xrootd.link.in");
    let stop = AtomicBool::new(false);
    let updates = Mutex::new(Vec::new());
    let mut phases = Vec::new();
    std::thread::scope(|scope| {
        let flags = [&fleet.stop, &stop];
        let _stop = StopOnDrop(&flags);
        scope.spawn(|| fleet.run());
        wait_for_every_server(&gmetad, &summary_in);
        scope.spawn(|| watch_updates(&gmetad, &summary_in, &stop, &updates));
        let mut phase = |what: &'static str, from: u64| {
            phases.push(Phase {
                what,
                from,
                to: unix_now(),
            })
        };
        let t = unix_now();
        run_for(15);
        phase("both up", t);

        // gmetad reads gw2 in the same poll: gw1's port refuses.
        let t = unix_now();
        gw1.kill();
        run_for(15);
        phase("gw1 killed", t);

        // gw1 back with its state, gw2 killed at once.
        let t = unix_now();
        gw1.start();
        gw2.kill();
        run_for(20);
        phase("gw1 back with its state, gw2 killed at once", t);

        // s1 restarts while gw1 is down: only gw2 sees it.
        gw2.start();
        run_for(10);
        gw1.kill();
        // gw1's state file is 6 s old when s1 restarts: what gw2 adds to
        // s1's counters from then on, gw1 cannot know.
        run_for(6);
        fleet.with(0, Server::restart);
        run_for(6);
        let t = unix_now();
        gw1.start();
        run_for(8);
        gw2.kill();
        run_for(15);
        phase(
            "a server restarted while gw1 was down; gw1 back; gw2 killed",
            t,
        );

        // The same with gw1 a fresh machine: no state file.
        gw2.start();
        run_for(10);
        gw1.kill();
        fleet.with(1, Server::restart);
        run_for(6);
        let t = unix_now();
        gw1.forget_state();
        gw1.start();
        run_for(8);
        gw2.kill();
        run_for(15);
        phase(
            "the same with gw1 replaced by a fresh machine (no state file)",
            t,
        );

        // s5 stops for good while in gw1's state file; gw1 is upgraded
        // (restarted at once) while gw2 is healthy.
        gw2.start();
        run_for(8);
        fleet.with(4, |s| s.stopped = Some(unix_now()));
        run_for(6);
        let t = unix_now();
        gw1.restart_at_once();
        run_for(30);
        phase(
            "gw1 restarted at once (an upgrade), a stopped server in its state file",
            t,
        );

        fleet.stop.store(true, Ordering::Relaxed);
        // The last updates of the RRDs read below.
        let end = unix_now();
        let _ = gmetad_settle(&gmetad, &summary_in, end);
        stop.store(true, Ordering::Relaxed);
    });
    let updates = updates.into_inner().unwrap();
    let start = phases[0].from - 2 * STEP;
    let end = phases.last().map(|p| p.to).unwrap_or(start);

    let fleet = &fleet;
    let mut series = server_series(&gmetad, fleet, start, end);
    // The gateways' own hosts, whatever they are named, and their summary:
    // records/s is at most what the servers sent one gateway.
    let records = fleet.records_rate();
    for host in hosts_with(&gmetad, "xrd2ganglia.records") {
        let path = gmetad.rrd_path(CLUSTER, &host, "xrd2ganglia.records");
        series.push((
            format!("{host} xrd2ganglia.records"),
            gmetad.fetch(&path, start, end + STEP),
            Box::new(move |_| records),
        ));
    }
    let path = gmetad.summary_rrd_path(CLUSTER, "xrd2ganglia.records");
    series.push((
        "summary xrd2ganglia.records".into(),
        gmetad.fetch(&path, start, end + STEP),
        Box::new(move |_| records),
    ));

    // The issue's table, measured.
    let mut failures = Vec::new();
    eprintln!(
        "| what happened | longest pause in gmetad's updates | largest rate written / true rate |"
    );
    eprintln!("|---|---|---|");
    for p in &phases {
        let pause = longest_pause(&updates, p.from, p.to);
        table_row(&series, p.what, (p.from, p.to), pause, &mut failures);
        if pause > 3 * STEP {
            failures.push(format!(
                "{}: gmetad paused {pause} s (step {STEP} s)",
                p.what
            ));
        }
    }
    eprintln!("gmetad's updates (unix s): {updates:?}");
    if !failures.is_empty() {
        eprintln!("{}\n{}", gw1.log(), gw2.log());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Waits (at most 3 steps) for gmetad's update at or after `end`; whether it came.
fn gmetad_settle(gmetad: &Gmetad, rrd: &Path, end: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(3 * STEP);
    while Instant::now() < deadline {
        if gmetad.last_update(rrd) >= end {
            return true;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    false
}

#[test]
fn two_gateways_into_one_gmond_never_show_a_counter_going_down() {
    let gmond = Gmond::start();
    let dir = Scratch::new("pair-gmond");
    let mut gw1 = Member::new("gw1", dir.path(), Some(gmond.port));
    let mut gw2 = Member::new("gw2", dir.path(), Some(gmond.port));
    // One sends, the other stands by (docs/pair.md).
    pair(&mut gw1, &mut gw2, true);
    let fleet = Fleet::new([gw1.port, gw2.port]);
    gw1.start();
    gw2.start();
    let mut decreases: Vec<String> = Vec::new();
    let mut reads = 0;
    std::thread::scope(|scope| {
        let flags = [&fleet.stop];
        let _stop = StopOnDrop(&flags);
        scope.spawn(|| fleet.run());
        run_for(8);
        // They diverge: gw2 misses s1's restart and comes back as a fresh
        // machine, while gw1 keeps s1's counter continuous.
        gw2.kill();
        fleet.with(0, Server::restart);
        run_for(5);
        gw2.forget_state();
        gw2.start();
        let mut last: BTreeMap<String, u64> = BTreeMap::new();
        let end = Instant::now() + Duration::from_secs(20);
        while Instant::now() < end {
            let xml = gmond.xml();
            reads += 1;
            for (host, h) in &xml.hosts {
                let Some(m) = h.metrics.get("xrootd.link.in") else {
                    continue;
                };
                let Ok(v) = m.get("VAL").parse::<u64>() else {
                    continue;
                };
                if let Some(&before) = last.get(host)
                    && v < before
                {
                    decreases.push(format!("{host}: {before} -> {v}"));
                }
                last.insert(host.clone(), v);
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        fleet.stop.store(true, Ordering::Relaxed);
    });
    eprintln!(
        "gmond's xrootd.link.in, read {reads} times in 20 s: {} decreases",
        decreases.len()
    );
    assert!(
        decreases.is_empty(),
        "gmond showed counters going down: {decreases:?}"
    );
}

/// Issue 43, item 3: both gateways of a pair lost at once, state files
/// included (a power cut with state on a local disk, a reinstall), after
/// s1 and s2 restarted (their offsets, 5e9 and 6e9, above 2^32, lived only
/// in the gateways). Both come back with `recover_from` naming gmetad's
/// own xml_port: no row of any host or summary RRD may exceed twice the
/// true rate (before: every restarted server went back to its raw counter,
/// 21-23x, 3.0e11x host and 4.0e10x summary above 2^32), and no host may
/// drop out of the summary (each gateway's port stays closed until every
/// host gmetad knew has reported again: a missing host is a drop of the
/// summary, drawn as a wrap, and fails the same check).
#[test]
fn both_gateways_lost_at_once_continue_from_what_gmetad_stored() {
    let dir = Scratch::new("pair-lost");
    let mut gw1 = Member::new("gw1", dir.path(), None);
    let mut gw2 = Member::new("gw2", dir.path(), None);
    pair(&mut gw1, &mut gw2, false);
    let fleet = Fleet::new([gw1.port, gw2.port]);
    gw1.start();
    gw2.start();
    let gmetad = Gmetad::start_sources(&[gw1.xml_port, gw2.xml_port], STEP);
    let summary_in = gmetad.summary_rrd_path(CLUSTER, "xrootd.link.in");
    let stop = AtomicBool::new(false);
    let updates = Mutex::new(Vec::new());
    let mut lost_at = 0;
    let mut end = 0;
    std::thread::scope(|scope| {
        let flags = [&fleet.stop, &stop];
        let _stop = StopOnDrop(&flags);
        scope.spawn(|| fleet.run());
        wait_for_every_server(&gmetad, &summary_in);
        scope.spawn(|| watch_updates(&gmetad, &summary_in, &stop, &updates));
        // s1 and s2 restart: their counters go on from the gateways'
        // offsets, which gmetad stores (two updates after).
        fleet.with(0, Server::restart);
        fleet.with(1, Server::restart);
        let t = unix_now();
        gmetad.wait_for_update(&summary_in, t + 2 * STEP, Duration::from_secs(40));
        // Both lost at once, with their state.
        gw1.kill();
        gw2.kill();
        gw1.forget_state();
        gw2.forget_state();
        let recover = format!("recover_from = [\"127.0.0.1:{}\"]\n", gmetad.xml_port);
        gw1.extra.push_str(&recover);
        gw2.extra.push_str(&recover);
        lost_at = unix_now();
        gw1.start();
        gw2.start();
        // Five of gmetad's updates after.
        gmetad.wait_for_update(&summary_in, lost_at + 5 * STEP, Duration::from_secs(90));
        fleet.stop.store(true, Ordering::Relaxed);
        end = unix_now();
        stop.store(true, Ordering::Relaxed);
    });
    let updates = updates.into_inner().unwrap();
    let series = server_series(&gmetad, &fleet, lost_at - 2 * STEP, end);
    let mut failures = Vec::new();
    let pause = longest_pause(&updates, lost_at, end);
    let what = "both lost at once (state files too), back with recover_from";
    table_row(&series, what, (lost_at, end), pause, &mut failures);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The smallest ratio of a known row in (from, to] to its true rate.
fn least_ratio(rows: &[(u64, Option<f64>)], from: u64, to: u64, truth: impl Fn(u64) -> f64) -> f64 {
    rows.iter()
        .filter(|(t, _)| *t > from && *t <= to)
        .filter_map(|(t, v)| v.map(|v| v / truth(*t)))
        .fold(f64::INFINITY, f64::min)
}

/// Whether the XML port at `port` answers a whole document now.
fn answers(port: u16) -> bool {
    std::panic::catch_unwind(|| common::read_xml(port))
        .is_ok_and(|doc| doc.trim_end().ends_with("</GANGLIA_XML>"))
}

/// Issue 43.1: UDP to the gateway gmetad reads is lost for 30 s (the
/// servers' datagrams no longer reach it), first gw2, then gw1; then to
/// both for 15 s. The deaf one refuses gmetad's connect within a step, so
/// gmetad reads the other in the same poll: no row of a host or summary
/// RRD above 2x the true rate, none below 0.3x from the step after the
/// loss began (the step gmetad is handed over in) to its end. Both deaf:
/// neither hears more than the other, both answer and gmetad's updates go
/// on. (Before: gw2 answered with its last values, the RRDs read 0 for
/// 30 s, then 6.1-7.2x.)
#[test]
fn a_deaf_gateway_hands_gmetad_over_within_a_step() {
    let dir = Scratch::new("pair-deaf");
    let mut gw1 = Member::new("gw1", dir.path(), None);
    let mut gw2 = Member::new("gw2", dir.path(), None);
    pair(&mut gw1, &mut gw2, false);
    let fleet = Fleet::new([gw1.port, gw2.port]);
    gw1.start();
    gw2.start();
    // gmetad reads gw2 first.
    let gmetad = Gmetad::start_sources(&[gw2.xml_port, gw1.xml_port], STEP);
    let summary_in = gmetad.summary_rrd_path(CLUSTER, "xrootd.link.in");
    let stop = AtomicBool::new(false);
    let updates = Mutex::new(Vec::new());
    // (what, loss began, loss ended, checked)
    let mut phases: Vec<(&str, u64, u64, bool)> = Vec::new();
    let mut both_answered = 0;
    std::thread::scope(|scope| {
        let flags = [&fleet.stop, &stop];
        let _stop = StopOnDrop(&flags);
        scope.spawn(|| fleet.run());
        wait_for_every_server(&gmetad, &summary_in);
        scope.spawn(|| watch_updates(&gmetad, &summary_in, &stop, &updates));
        let t = unix_now();
        run_for(10);
        phases.push(("both hear", t, unix_now(), true));
        for (i, what) in [
            (1, "UDP to gw2 lost for 30 s while gmetad read gw2"),
            (0, "UDP to gw1 lost for 30 s while gmetad read gw1"),
        ] {
            let t = unix_now();
            fleet.lost[i].store(true, Ordering::Relaxed);
            run_for(30);
            fleet.lost[i].store(false, Ordering::Relaxed);
            phases.push((what, t, unix_now(), true));
            run_for(10);
        }
        let t = unix_now();
        fleet.lost[0].store(true, Ordering::Relaxed);
        fleet.lost[1].store(true, Ordering::Relaxed);
        let until = Instant::now() + Duration::from_secs(15);
        while Instant::now() < until {
            if answers(gw1.xml_port) && answers(gw2.xml_port) {
                both_answered += 1;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        fleet.lost[0].store(false, Ordering::Relaxed);
        fleet.lost[1].store(false, Ordering::Relaxed);
        phases.push(("UDP to both lost for 15 s", t, unix_now(), false));
        run_for(15);
        fleet.stop.store(true, Ordering::Relaxed);
        let end = unix_now();
        let _ = gmetad_settle(&gmetad, &summary_in, end);
        stop.store(true, Ordering::Relaxed);
    });
    let updates = updates.into_inner().unwrap();
    let start = phases[0].1 - 2 * STEP;
    let end = unix_now();
    let rates: Vec<f64> = fleet
        .servers
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.in_rate)
        .collect();
    // Each RRD: its name, rows and true rate.
    type Rows = Vec<(u64, Option<f64>)>;
    let mut series: Vec<(String, Rows, f64)> = Vec::new();
    for (i, rate) in rates.iter().enumerate() {
        let host = format!("s{}.pair.example", i + 1);
        let path = gmetad.rrd_path(CLUSTER, &host, "xrootd.link.in");
        series.push((host, gmetad.fetch(&path, start, end), *rate));
    }
    let total: f64 = rates.iter().sum();
    series.push((
        "summary".into(),
        gmetad.fetch(&summary_in, start, end),
        total,
    ));
    let mut failures = Vec::new();
    eprintln!(
        "| what happened | longest pause in gmetad's updates | rows / true rate (host, summary) |"
    );
    eprintln!("|---|---|---|");
    for (what, from, to, checked) in &phases {
        let pause = longest_pause(&updates, *from, *to + STEP);
        let (mut lo, mut hi) = ([f64::INFINITY; 2], [0.0f64; 2]);
        for (name, rows, rate) in &series {
            let k = usize::from(name == "summary");
            // From the step after the loss began to a step after it ended.
            let l = least_ratio(rows, from + STEP, *to, |_| *rate);
            let h = worst_ratio(rows, *from, to + STEP, |_| *rate);
            lo[k] = lo[k].min(l);
            hi[k] = hi[k].max(h);
            if *checked && (l < 0.3 || h > 2.0) {
                failures.push(format!("{what}: {name}: {l:.2}-{h:.2} x: {rows:?}"));
            }
        }
        eprintln!(
            "| {what} | {pause} s | host {:.2}-{:.2}, summary {:.2}-{:.2} |",
            lo[0], hi[0], lo[1], hi[1]
        );
        if pause > 3 * STEP {
            failures.push(format!("{what}: gmetad paused {pause} s"));
        }
    }
    eprintln!("both answered a whole document {both_answered} times of 15 while both were deaf");
    if both_answered < 10 {
        failures.push(format!(
            "both deaf: both answered only {both_answered} times of 15"
        ));
    }
    eprintln!("gmetad's updates (unix s): {updates:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A TCP relay to `to` that the test can cut (each connection then closed
/// at once, as a peer port behind a firewall that resets) and restore.
struct Relay {
    port: u16,
    cut: std::sync::Arc<AtomicBool>,
}

impl Relay {
    fn new(to: u16) -> Relay {
        use std::net::{TcpListener, TcpStream};
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let cut = std::sync::Arc::new(AtomicBool::new(false));
        let is_cut = cut.clone();
        std::thread::spawn(move || {
            for client in l.incoming().flatten() {
                if is_cut.load(Ordering::Relaxed) {
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else {
                    continue;
                };
                for (mut from, mut into) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut into);
                        let _ = into.shutdown(std::net::Shutdown::Write);
                    });
                }
            }
        });
        Relay { port, cut }
    }
}

/// Issue 43, its last gap: the peer link cut, then UDP to gw2 lost for
/// 12 s (gw2 misses s1's last reports) while s1 restarts; gw2 hears again,
/// then gw1 is killed while the link is still down, and gmetad fails over
/// to gw2. gw2 saw s1's restart after a gap with its peer unreachable: it
/// held s1's counters (refusing gmetad meanwhile), read `recover_from`
/// (gmetad's xml_port) and continued from what gmetad stored, reading it
/// again every 2 s while the link stayed cut. No row of a host or the
/// summary above 2x the true rate. (Without: gw2 continued s1 from the
/// last value it heard, 12 s of s1's counting below what gmetad stored
/// from gw1: a decrease, drawn as a wrap; the issue measured 515x and
/// 686x for the same day through a missed push.)
#[test]
fn a_restart_seen_after_a_gap_with_the_link_cut_draws_no_wrap_on_a_failover() {
    let dir = Scratch::new("pair-regap");
    let mut gw1 = Member::new("gw1", dir.path(), None);
    let mut gw2 = Member::new("gw2", dir.path(), None);
    let (p1, p2) = (free_port(), free_port());
    let (to1, to2) = (Relay::new(p1), Relay::new(p2));
    gw1.extra = format!(
        "peer = \"127.0.0.1:{}\"\npeer_listen = [\"127.0.0.1:{p1}\"]\n",
        to2.port
    );
    gw2.extra = format!(
        "peer = \"127.0.0.1:{}\"\npeer_listen = [\"127.0.0.1:{p2}\"]\n",
        to1.port
    );
    // gmetad first (it polls gw1, then gw2), so that both name its
    // xml_port in recover_from.
    let gmetad = Gmetad::start_sources(&[gw1.xml_port, gw2.xml_port], STEP);
    let recover = format!("recover_from = [\"127.0.0.1:{}\"]\n", gmetad.xml_port);
    gw1.extra.push_str(&recover);
    gw2.extra.push_str(&recover);
    let fleet = Fleet::new([gw1.port, gw2.port]);
    gw1.start();
    gw2.start();
    let summary_in = gmetad.summary_rrd_path(CLUSTER, "xrootd.link.in");
    let stop = AtomicBool::new(false);
    let updates = Mutex::new(Vec::new());
    let (mut cut_at, mut killed_at, mut end) = (0, 0, 0);
    std::thread::scope(|scope| {
        let flags = [&fleet.stop, &stop];
        let _stop = StopOnDrop(&flags);
        scope.spawn(|| fleet.run());
        wait_for_every_server(&gmetad, &summary_in);
        scope.spawn(|| watch_updates(&gmetad, &summary_in, &stop, &updates));
        run_for(10);
        cut_at = unix_now();
        to1.cut.store(true, Ordering::Relaxed);
        to2.cut.store(true, Ordering::Relaxed);
        run_for(4);
        // gw2 deaf; s1 restarts meanwhile.
        fleet.lost[1].store(true, Ordering::Relaxed);
        run_for(6);
        fleet.with(0, Server::restart);
        run_for(6);
        fleet.lost[1].store(false, Ordering::Relaxed);
        run_for(12);
        // gw1 dies, the link still down: gmetad reads gw2.
        killed_at = unix_now();
        gw1.kill();
        let t = unix_now();
        gmetad.wait_for_update(&summary_in, t + 4 * STEP, Duration::from_secs(60));
        fleet.stop.store(true, Ordering::Relaxed);
        end = unix_now();
        stop.store(true, Ordering::Relaxed);
    });
    let log = gw2
        .running
        .as_ref()
        .map(|g| g.proc.log_text())
        .unwrap_or_default();
    let updates = updates.into_inner().unwrap();
    let series = server_series(&gmetad, &fleet, cut_at - 2 * STEP, end);
    let mut failures = Vec::new();
    let pause = longest_pause(&updates, killed_at, end);
    let what = "link cut, gw2 deaf 12 s while s1 restarted, gw1 killed with the link down";
    table_row(&series, what, (cut_at, end), pause, &mut failures);
    if pause > 3 * STEP {
        failures.push(format!("gmetad paused {pause} s at the failover"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        log.contains("restart after a gap, the peer unreachable"),
        "gw2 held s1's restart: {log}"
    );
}
