//! A federation past one gmetad (`--only federation`; docs/clusters.md,
//! issue 38): N simulated servers over S sites, each its own loopback
//! address, each sending the real data-server record (srv_xrootd.xml: 96
//! metrics, 82 numeric; its host, site, tod and byte counters changed per
//! report) into one gateway, first all at once (a federation's burst),
//! then every `interval` seconds with phases spread (steady state).
//!
//! Two gateways in turn, the same fleet into each (the baseline first):
//! * `one port`: `cluster_by_site`, every cluster on its `xml_listen`, as
//!   a federation ran before issue 38;
//! * `shards`: K `[[cluster]]` rules `name = "{site}"`, site i in rule
//!   i % K, each with its own `xml_listen` (and the gateway's port too).
//!
//! Measured per gateway: the burst's socket drops (`recv_buffer` N x 4 KiB:
//! raise `net.core.rmem_max` for the run) and the hosts in the document
//! once it is read; in steady state its CPU and RSS (VmRSS,
//! VmHWM), each port's document polled every `step` seconds by the lab
//! (connect to last byte, bytes, hosts; a host missing from its port, on
//! the wrong one, or whose lag, its TN minus the age of its last report
//! at the poll, is over 2 s, is counted).
//!
//! With `--fed-gmetad`, real gmetads (3.7.2) in steady state, the lab's
//! polls off: with the baseline gateway one gmetad polling its port;
//! with the shards one gmetad per rule port and a top gmetad polling
//! theirs (`scalable on`). Each gmetad's CPU seconds per step (from
//! /proc/PID/stat, and of its busiest thread: a data source's poll, parse
//! and RRD writes are one thread, so near a whole step means it no longer
//! keeps up), measured once its RRDs exist, and its rrd_rootdir's size.

use std::collections::HashMap;
use std::io::Read;
use std::net::{Ipv4Addr, TcpStream, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::gateway::{Gateway, clock_ticks, proc_status};
use crate::{free_port, server_ip};

mod gmetads;
pub use gmetads::GmetadRun;

/// A host whose document lags its last report by more than this is stale
/// (TN is whole seconds; as `xml`'s target).
const FRESH_TARGET: f64 = 2.0;

#[derive(Clone, Debug)]
pub struct FedOptions {
    pub servers: usize,
    pub sites: usize,
    pub shards: usize,
    pub interval: Duration,
    pub sustain: Duration,
    pub step: u64,
    pub gmetad: bool,
    pub rras: String,
}

/// One gateway's run.
#[derive(Debug, Default)]
pub struct GatewayRun {
    pub label: String,
    pub burst_s: f64,
    pub burst_drops: u64,
    /// From the burst's first datagram to the socket's queue empty.
    pub burst_read_s: f64,
    /// Hosts in the gateway's document then (the burst's less its drops).
    pub burst_hosts: usize,
    pub cpu_pct: f64,
    pub rss_kib: u64,
    pub hwm_kib: u64,
    pub records: u64,
    pub steady_drops: u64,
    pub ports: Vec<PortRun>,
    pub gmetads: Vec<GmetadRun>,
}

/// The lab's polls of one port.
#[derive(Debug, Default)]
pub struct PortRun {
    pub label: String,
    pub polls: usize,
    pub failed: usize,
    pub max_poll_s: f64,
    pub bytes: usize,
    pub hosts: usize,
    pub missing: usize,
    pub misplaced: usize,
    pub stale: usize,
    pub max_lag: f64,
}

/// Site of server `i`, and the rule (shard) that takes it.
fn site_of(i: usize, o: &FedOptions) -> usize {
    i % o.sites
}
fn shard_of(i: usize, o: &FedOptions) -> usize {
    site_of(i, o) % o.shards
}
fn site_name(site: usize) -> String {
    format!("T2_FED_{site:03}")
}

/// The fleet: server i's k-th report, and when each report was sent.
struct Fleet {
    template: String,
    o: FedOptions,
    history: Mutex<Vec<Vec<Instant>>>,
    sent: Mutex<u64>,
}

impl Fleet {
    fn new(o: &FedOptions) -> Fleet {
        let path = crate::under_test::repo_root().join("tests/data/records/srv_xrootd.xml");
        let template = std::fs::read_to_string(&path).expect("srv_xrootd.xml");
        Fleet {
            template: template.trim_end().to_string(),
            o: o.clone(),
            history: Mutex::new(vec![Vec::new(); o.servers]),
            sent: Mutex::new(0),
        }
    }

    fn record(&self, i: usize, k: u64) -> String {
        let tod = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        self.template
            .replacen("src=\"vm:", &format!("src=\"s{i:05}.example:"), 1)
            .replacen(
                "site=\"TESTSITE\"",
                &format!("site=\"{}\"", site_name(site_of(i, &self.o))),
                1,
            )
            .replacen("tod=\"1795303790\"", &format!("tod=\"{tod}\""), 1)
            .replacen(
                "<in>5248682</in>",
                &format!("<in>{}</in>", 5248682 + k * 60_000),
                1,
            )
            .replacen(
                "<out>5248704</out>",
                &format!("<out>{}</out>", 5248704 + k * 90_000),
                1,
            )
    }

    fn send(&self, i: usize, k: u64, to: u16) {
        let Ok(s) = UdpSocket::bind((server_ip(i), 0)) else {
            return;
        };
        if s.send_to(self.record(i, k).as_bytes(), (Ipv4Addr::LOCALHOST, to))
            .is_ok()
        {
            let now = Instant::now();
            if let Ok(mut h) = self.history.lock() {
                h[i].push(now);
            }
            if let Ok(mut n) = self.sent.lock() {
                *n += 1;
            }
        }
    }

    fn sent(&self) -> u64 {
        self.sent.lock().map(|n| *n).unwrap_or(0)
    }

    /// Every server's report `k` over `within` (zero: all at once).
    fn round(&self, k: u64, within: Duration, to: u16, stop: &AtomicBool) {
        let t0 = Instant::now();
        for i in 0..self.o.servers {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let due = t0 + within.mul_f64(i as f64 / self.o.servers as f64);
            while Instant::now() < due && !stop.load(Ordering::Relaxed) {
                thread::sleep((due - Instant::now()).min(Duration::from_millis(50)));
            }
            self.send(i, k, to);
        }
    }
}

/// The gateway's config: the baseline (every cluster on one port) or the
/// shards (a `{site}` rule per shard, each with its port).
fn config(o: &FedOptions, port: u16, xml_port: u16, shard_ports: &[u16]) -> String {
    let mut c = format!(
        "listen = [\"127.0.0.1:{port}\"]\nxml_listen = [\"127.0.0.1:{xml_port}\"]\nsend = false\n\
         state_file = \"\"\nstats_interval = 0\nself_metrics_interval = 0\n\
         recv_buffer = {}\nmax_sources = {}\nmax_clusters = {}\ncluster_name = \"Federation\"\n",
        (o.servers * 4096).clamp(4 << 20, 1 << 30),
        o.servers + 1000,
        o.sites + 10,
    );
    if shard_ports.is_empty() {
        c.push_str("cluster_by_site = true\n");
    }
    for (s, p) in shard_ports.iter().enumerate() {
        let sites: Vec<String> = (0..o.sites)
            .filter(|site| site % o.shards == s)
            .map(|site| format!("{:?}", site_name(site)))
            .collect();
        c.push_str(&format!(
            "[[cluster]]\nname = \"{{site}}\"\nsites = [{}]\nxml_listen = [\"127.0.0.1:{p}\"]\n",
            sites.join(", ")
        ));
    }
    c
}

/// A document as the lab reads it: its size, and each HOST's TN by its IP
/// (every simulated server has its own).
struct Doc {
    bytes: usize,
    hosts: HashMap<String, f64>,
}

/// One poll: when, how long from connect to the last byte, the document.
type Poll = (Instant, Duration, Result<Doc, String>);

/// Reads the document on `port`; how long from connect to its last byte
/// (what the gateway took to write it; the lab's scan after is not in it).
fn read_doc(port: u16) -> (Duration, Result<Doc, String>) {
    let t0 = Instant::now();
    let read = || -> Result<Vec<u8>, String> {
        let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
        s.set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).map_err(|e| format!("read: {e}"))?;
        Ok(buf)
    };
    let buf = read();
    let took = t0.elapsed();
    (took, buf.map(|b| scan(&b)))
}

/// Each `<HOST ...>` start tag's IP and TN, by a byte scan: a 650 MB
/// document (20,000 servers) parsed as a tree every 15 s would take the
/// cores the gateway is measured on.
fn scan(doc: &[u8]) -> Doc {
    let attr = |tag: &[u8], name: &[u8]| -> Option<String> {
        let at = tag.windows(name.len()).position(|w| w == name)? + name.len();
        let len = tag[at..].iter().position(|&b| b == b'"')?;
        Some(String::from_utf8_lossy(&tag[at..at + len]).into_owned())
    };
    let mut hosts = HashMap::new();
    let mut rest = doc;
    while let Some(at) = rest.windows(6).position(|w| w == b"<HOST ") {
        rest = &rest[at..];
        let end = rest.iter().position(|&b| b == b'>').unwrap_or(rest.len());
        let tag = &rest[..end];
        if let Some(ip) = attr(tag, b" IP=\"") {
            let tn = attr(tag, b" TN=\"")
                .and_then(|t| t.parse().ok())
                .unwrap_or(0.0);
            hosts.insert(ip, tn);
        }
        rest = &rest[end..];
    }
    Doc {
        bytes: doc.len(),
        hosts,
    }
}

/// Polls `port` every `every` until `stop`.
fn poller(port: u16, every: Duration, stop: Arc<AtomicBool>) -> thread::JoinHandle<Vec<Poll>> {
    thread::spawn(move || {
        let mut polls = Vec::new();
        let t0 = Instant::now();
        let mut k = 1u32;
        loop {
            let next = t0 + every * k;
            while Instant::now() < next && !stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(20));
            }
            if stop.load(Ordering::Relaxed) {
                return polls;
            }
            k += 1;
            let at = Instant::now();
            let (took, doc) = read_doc(port);
            polls.push((at, took, doc));
        }
    })
}

/// Judges one port's polls: `wanted(i)` says whether server i belongs.
fn judge(label: String, polls: &[Poll], fleet: &Fleet, wanted: &dyn Fn(usize) -> bool) -> PortRun {
    let mut p = PortRun {
        label,
        ..PortRun::default()
    };
    let history = fleet.history.lock().map(|h| h.clone()).unwrap_or_default();
    for (at, took, doc) in polls {
        p.polls += 1;
        p.max_poll_s = p.max_poll_s.max(took.as_secs_f64());
        let Ok(doc) = doc else {
            p.failed += 1;
            continue;
        };
        p.bytes = p.bytes.max(doc.bytes);
        p.hosts = p.hosts.max(doc.hosts.len());
        for (i, sent) in history.iter().enumerate() {
            let host = doc.hosts.get(&server_ip(i).to_string());
            if !wanted(i) {
                p.misplaced += usize::from(host.is_some());
                continue;
            }
            let Some(last) = sent.iter().rev().find(|t| *t <= at) else {
                continue;
            };
            let Some(host) = host else {
                p.missing += 1;
                continue;
            };
            let lag = host - at.duration_since(*last).as_secs_f64();
            p.max_lag = p.max_lag.max(lag);
            p.stale += usize::from(lag > FRESH_TARGET);
        }
    }
    p
}

/// Both gateways in turn.
pub fn run(bin: &Path, o: &FedOptions) -> Vec<GatewayRun> {
    [false, true]
        .into_iter()
        .map(|shards| one(bin, o, &Arc::new(Fleet::new(o)), shards))
        .collect()
}

/// One gateway: the burst, then steady state (with real gmetads or the
/// lab's polls).
fn one(bin: &Path, o: &FedOptions, fleet: &Arc<Fleet>, shards: bool) -> GatewayRun {
    let xml_port = free_port();
    let shard_ports: Vec<u16> = if shards {
        (0..o.shards).map(|_| free_port()).collect()
    } else {
        Vec::new()
    };
    let gw = Gateway::start_config(bin, |_, port| config(o, port, xml_port, &shard_ports));
    let mut r = GatewayRun {
        label: if shards {
            format!("{} shard ports", o.shards)
        } else {
            "one port (cluster_by_site)".into()
        },
        ..GatewayRun::default()
    };
    let never = AtomicBool::new(false);
    let t0 = Instant::now();
    fleet.round(0, Duration::ZERO, gw.port, &never);
    r.burst_s = t0.elapsed().as_secs_f64();
    // Read once the socket's queue is empty; what the document then holds.
    while gw.rx_queue() > 0 && t0.elapsed() < Duration::from_secs(60) {
        thread::sleep(Duration::from_millis(10));
    }
    r.burst_read_s = t0.elapsed().as_secs_f64();
    r.burst_drops = gw.socket_drops();
    thread::sleep(Duration::from_millis(500));
    r.burst_hosts = read_doc(xml_port).1.map(|d| d.hosts.len()).unwrap_or(0);
    // Steady state: every server every interval, phases spread.
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (fleet, stop, port, interval) = (fleet.clone(), stop.clone(), gw.port, o.interval);
        thread::spawn(move || {
            let mut k = 1;
            while !stop.load(Ordering::Relaxed) {
                fleet.round(k, interval, port, &stop);
                k += 1;
            }
        })
    };
    if o.gmetad {
        r.gmetads = gmetads::gmetads(o, xml_port, &shard_ports);
    }
    steady(o, fleet, &gw, xml_port, &shard_ports, &mut r);
    stop.store(true, Ordering::Relaxed);
    let _ = sender.join();
    r
}

/// The steady state measured: the gateway's CPU and memory, the lab's
/// polls of every port (none while real gmetads ran: theirs were the
/// polls).
fn steady(
    o: &FedOptions,
    fleet: &Fleet,
    gw: &Gateway,
    xml_port: u16,
    shard_ports: &[u16],
    r: &mut GatewayRun,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let every = Duration::from_secs(o.step);
    let mut ports = vec![(format!("gateway's port {xml_port}"), xml_port, None)];
    for (s, p) in shard_ports.iter().enumerate() {
        ports.push((format!("shard {s}'s port {p}"), *p, Some(s)));
    }
    let pollers: Vec<_> = ports
        .iter()
        .map(|(_, p, _)| poller(*p, every, stop.clone()))
        .collect();
    let (cpu0, sent0, drops0) = (gw.cpu_ticks(), fleet.sent(), gw.socket_drops());
    let t0 = Instant::now();
    thread::sleep(o.sustain);
    let secs = t0.elapsed().as_secs_f64();
    r.cpu_pct = 100.0 * (gw.cpu_ticks() - cpu0) as f64 / clock_ticks() / secs;
    r.records = fleet.sent() - sent0;
    r.steady_drops = gw.socket_drops() - drops0;
    r.rss_kib = proc_status(gw.pid(), "VmRSS:");
    r.hwm_kib = proc_status(gw.pid(), "VmHWM:");
    stop.store(true, Ordering::Relaxed);
    for ((label, _, shard), poller) in ports.into_iter().zip(pollers) {
        let polls = poller.join().unwrap_or_default();
        let wanted = move |i: usize| shard.is_none_or(|s| shard_of(i, o) == s);
        r.ports.push(judge(label, &polls, fleet, &wanted));
    }
}

/// The table.
pub fn print(o: &FedOptions, runs: &[GatewayRun]) {
    println!();
    println!(
        "federation: {} servers over {} sites (srv_xrootd.xml, every {} s), {} shards, step {} s, {} s steady",
        o.servers,
        o.sites,
        o.interval.as_secs(),
        o.shards,
        o.step,
        o.sustain.as_secs()
    );
    for r in runs {
        println!(
            "{}: burst sent in {:.2} s, read in {:.2} s, {} dropped at the socket, {} hosts in the document; \
             steady: {} records, {} dropped, gateway {:.1}% of a core, RSS {} MiB (peak {} MiB)",
            r.label,
            r.burst_s,
            r.burst_read_s,
            r.burst_drops,
            r.burst_hosts,
            r.records,
            r.steady_drops,
            r.cpu_pct,
            r.rss_kib / 1024,
            r.hwm_kib / 1024
        );
        for p in &r.ports {
            println!(
                "  {}: {} polls ({} failed), longest {:.2} s, {} bytes, {} hosts; missing {}, misplaced {}, stale {} (max lag {:.2} s)",
                p.label,
                p.polls,
                p.failed,
                p.max_poll_s,
                p.bytes,
                p.hosts,
                p.missing,
                p.misplaced,
                p.stale,
                p.max_lag
            );
        }
        for g in &r.gmetads {
            println!(
                "  gmetad {}: {:.2} s CPU per {} s step (busiest thread {:.2} s), RRDs made after {}, {} files, {} MiB",
                g.label,
                g.cpu_per_step,
                o.step,
                g.busiest_thread_per_step,
                g.created_s
                    .map(|s| format!("{s:.0} s"))
                    .unwrap_or_else(|| "- (not within 20 min)".into()),
                g.rrd_files,
                g.rrd_bytes >> 20
            );
        }
    }
}
