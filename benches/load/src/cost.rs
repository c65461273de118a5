//! What each kind of packet costs a real gmond: its CPU per packet, for
//! the packets the gateway sends of N servers' first reports.
//!
//! The packets are the gateway's own ([`Engine`] fed each server's
//! first report, from its own address), sorted by what they do to a
//! gmond that has seen nothing yet, and sent in the order a burst would
//! need them, each kind as a phase of its own, all at one smooth rate:
//!
//! 1. (d) a new host: each host's heartbeat metadata (the first packet the
//!    gateway sends of a host), which creates the host in gmond;
//! 2. (d1) the first heartbeat value of each host;
//! 3. (c) metadata that creates a metric of a known host;
//! 4. (a1) the first value of each metric (after its metadata);
//! 5. (a) a value of a known metric (the same values again);
//! 6. (b) metadata of a known metric (a periodic resend: the same again);
//! 7. (a) values again (a second reading of (a), from a gmond that has
//!    seen every kind).
//!
//! Each phase starts once gmond's receive queue is empty; gmond's CPU is
//! read before it and again when gmond's queue is empty after it: the sum
//! of its threads' run time (/proc/PID/task/*/schedstat, ns) and, as a
//! cross-check, utime + stime (/proc/PID/stat, clock ticks). Drops at
//! gmond's socket are read the same way; a dropped packet cost gmond
//! nothing, so the figure is CPU / (sent - dropped). gmond's idle CPU over
//! the phase's length (measured before the first phase) is subtracted.
//! A fresh gmond per run; the ratios to (a) are taken within each run, so
//! that a machine loaded by others moves both sides of a ratio together.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use xrd2ganglia::engine::Engine;
use xrd2ganglia::events::{Counters, Events};
use xrd2ganglia::ganglia::xdr::{self, Packet};

use crate::gmond::Gmond;
use crate::mmsg::{MmsgSender, paced};
use crate::{Records, clock_ticks, cpu_ticks, free_port, server_ip};

#[derive(Clone, Debug)]
pub struct CostOptions {
    pub servers: usize,
    pub runs: usize,
    /// Packets/s of every phase; 0: keep gmond's receive queue filled
    /// (gmond never waits for a packet, and none is dropped).
    pub rate: f64,
}

/// How often the servers of the steady mix report (as in the poll run).
const STEADY_EVERY: Duration = Duration::from_secs(15);

/// The measured kinds, in the order they are sent.
pub const KINDS: &[(&str, &str)] = &[
    ("d", "new host: its heartbeat metadata"),
    ("d1", "the host's first heartbeat value"),
    ("c", "metadata creating a metric of a known host"),
    ("a1", "first value of a metric (after its metadata)"),
    ("a", "value of a known metric"),
    ("b", "metadata of a known metric (a resend)"),
];

/// One phase of one run.
#[derive(Clone, Debug, Default)]
pub struct Phase {
    pub kind: &'static str,
    pub sent: u64,
    pub drops: u64,
    pub cpu_ns: u64,
    pub ticks: u64,
    /// From the first packet sent to gmond's queue empty again.
    pub took: Duration,
}

impl Phase {
    fn taken(&self) -> u64 {
        self.sent.saturating_sub(self.drops).max(1)
    }

    /// gmond's CPU per packet it took, in us (schedstat).
    pub fn us(&self) -> f64 {
        self.cpu_ns as f64 / 1000.0 / self.taken() as f64
    }
}

#[derive(Clone, Debug, Default)]
pub struct CostRun {
    pub phases: Vec<Phase>,
    pub idle_ns_per_s: f64,
    pub hosts_shown: usize,
    pub metrics_shown: usize,
    pub loadavg: String,
}

impl CostRun {
    /// Per packet of `kind` (the mean of its phases), in us.
    pub fn us(&self, kind: &str) -> Option<f64> {
        let ps: Vec<&Phase> = self.phases.iter().filter(|p| p.kind == kind).collect();
        if ps.is_empty() {
            return None;
        }
        let ns: u64 = ps.iter().map(|p| p.cpu_ns).sum();
        let taken: u64 = ps.iter().map(|p| p.taken()).sum();
        Some(ns as f64 / 1000.0 / taken as f64)
    }

    /// Packets of `kind` gmond took per second of wall time (with its
    /// queue kept filled: its intake on this machine as loaded then).
    pub fn intake(&self, kind: &str) -> Option<f64> {
        let ps: Vec<&Phase> = self.phases.iter().filter(|p| p.kind == kind).collect();
        let secs: f64 = ps.iter().map(|p| p.took.as_secs_f64()).sum();
        let taken: u64 = ps.iter().map(|p| p.taken()).sum();
        (!ps.is_empty() && secs > 0.0).then(|| taken as f64 / secs)
    }

    pub fn ticks_us(&self, kind: &str) -> Option<f64> {
        let ps: Vec<&Phase> = self.phases.iter().filter(|p| p.kind == kind).collect();
        let ticks: u64 = ps.iter().map(|p| p.ticks).sum();
        let taken: u64 = ps.iter().map(|p| p.taken()).sum();
        (!ps.is_empty()).then(|| ticks as f64 / clock_ticks() * 1e6 / taken as f64)
    }

    pub fn drops(&self) -> u64 {
        self.phases.iter().map(|p| p.drops).sum()
    }
}

/// The packets of steady reports (default settings), per report.
#[derive(Clone, Debug, Default)]
pub struct SteadyMix {
    pub every: Duration,
    pub reports: u64,
    pub values: f64,
    pub metadata: f64,
    pub hosts: f64,
}

#[derive(Clone, Debug, Default)]
pub struct Cost {
    pub servers: usize,
    pub rate: f64,
    pub steady: SteadyMix,
    /// Packets of each kind per run.
    pub counts: Vec<(&'static str, usize)>,
    pub runs: Vec<CostRun>,
    pub errors: Vec<String>,
}

/// The gateway's packets of every server's first report, by kind:
/// (heartbeat metadata, heartbeat values, metric metadata, metric values).
pub(crate) struct FirstSight {
    pub hosts: Vec<Vec<u8>>,
    pub heartbeats: Vec<Vec<u8>>,
    pub metadata: Vec<Vec<u8>>,
    pub values: Vec<Vec<u8>>,
}

pub(crate) fn first_sight(records: &Records) -> FirstSight {
    let settings = crate::default_settings();
    let counters = Counters::default();
    let mut events = Events::new(&counters, Duration::from_secs(3600));
    let mut pipeline = Engine::new(std::sync::Arc::new(settings.clone()), Instant::now());
    let t0 = Instant::now();
    let mut f = FirstSight {
        hosts: Vec::new(),
        heartbeats: Vec::new(),
        metadata: Vec::new(),
        values: Vec::new(),
    };
    for s in 0..records.servers {
        let report = &records.variants[records.fixture_of(s)][0];
        let from = std::net::SocketAddr::from((server_ip(s), 40000));
        pipeline.datagram(report, from, t0, &mut events);
        for p in pipeline.packets() {
            let heartbeat = |name: &str| name == xrd2ganglia::engine::packets::HEARTBEAT;
            let to = match xdr::decode(p) {
                Ok(Packet::Metadata { id, .. }) if heartbeat(&id.name) => &mut f.hosts,
                Ok(Packet::Metadata { .. }) => &mut f.metadata,
                Ok(Packet::Value { id, .. }) if heartbeat(&id.name) => &mut f.heartbeats,
                Ok(Packet::Value { .. }) => &mut f.values,
                _ => continue,
            };
            to.push(p.to_vec());
        }
    }
    f
}

/// What a server's reports after its first become, averaged over 20
/// minutes of reports every `every` (one server per fixture, default
/// settings, the pipeline's clock simulated): how much of a steady load
/// is metadata (periodic resends, every `metadata_interval`).
pub(crate) fn steady_mix(records: &Records, every: Duration) -> SteadyMix {
    let settings = crate::default_settings();
    let counters = Counters::default();
    let mut events = Events::new(&counters, Duration::from_secs(3600));
    let mut pipeline = Engine::new(std::sync::Arc::new(settings.clone()), Instant::now());
    let t0 = Instant::now();
    let mut m = SteadyMix {
        every,
        ..SteadyMix::default()
    };
    let rounds = (1200.0 / every.as_secs_f64()) as u32;
    for k in 0..=rounds {
        for s in 0..crate::FIXTURES.len() {
            let variants = &records.variants[records.fixture_of(s)];
            let from = std::net::SocketAddr::from((server_ip(s), 40000));
            let at = t0 + every * k;
            pipeline.datagram(
                &variants[k as usize % variants.len()],
                from,
                at,
                &mut events,
            );
            if k == 0 {
                continue;
            }
            m.reports += 1;
            for p in pipeline.packets() {
                match xdr::decode(p) {
                    Ok(Packet::Metadata { id, .. })
                        if id.name == xrd2ganglia::engine::packets::HEARTBEAT =>
                    {
                        m.hosts += 1.0
                    }
                    Ok(Packet::Metadata { .. }) => m.metadata += 1.0,
                    Ok(Packet::Value { .. }) => m.values += 1.0,
                    _ => {}
                }
            }
        }
    }
    let n = m.reports.max(1) as f64;
    m.values /= n;
    m.metadata /= n;
    m.hosts /= n;
    m
}

pub fn run(o: &CostOptions) -> Cost {
    let mut cost = Cost {
        servers: o.servers,
        rate: o.rate,
        ..Cost::default()
    };
    if let Err(msg) = crate::gmond::installed() {
        cost.errors.push(msg);
        return cost;
    }
    let records = Records::load(o.servers);
    let f = first_sight(&records);
    cost.steady = steady_mix(&records, STEADY_EVERY);
    cost.counts = vec![
        ("d", f.hosts.len()),
        ("d1", f.heartbeats.len()),
        ("c", f.metadata.len()),
        ("a1", f.values.len()),
        ("a", f.values.len()),
        ("b", f.metadata.len()),
    ];
    for i in 0..o.runs {
        let t = Instant::now();
        match one_run(&f, o) {
            Ok(r) => {
                println!(
                    "load: cost run {} of {} took {:.1} s (load {}): {}",
                    i + 1,
                    o.runs,
                    t.elapsed().as_secs_f64(),
                    r.loadavg,
                    KINDS
                        .iter()
                        .filter_map(|(k, _)| Some(format!("{k} {:.2} us", r.us(k)?)))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                cost.runs.push(r);
            }
            Err(e) => cost.errors.push(format!("run {}: {e}", i + 1)),
        }
    }
    cost
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn one_run(f: &FirstSight, o: &CostOptions) -> Result<CostRun, String> {
    let gmond = Gmond::start(free_port(), free_port(), "")?;
    let socket = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    socket
        .connect(("127.0.0.1", gmond.port))
        .map_err(|e| e.to_string())?;
    let mut r = CostRun {
        loadavg: loadavg(),
        ..CostRun::default()
    };
    // gmond's own ticking while idle (its timers), to subtract.
    std::thread::sleep(Duration::from_millis(300));
    let (idle0, t) = (gmond.cpu_ns(), Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    r.idle_ns_per_s = (gmond.cpu_ns() - idle0) as f64 / t.elapsed().as_secs_f64();
    let phases: [(&'static str, &Vec<Vec<u8>>); 7] = [
        ("d", &f.hosts),
        ("d1", &f.heartbeats),
        ("c", &f.metadata),
        ("a1", &f.values),
        ("a", &f.values),
        ("b", &f.metadata),
        ("a", &f.values),
    ];
    for (kind, packets) in phases {
        let phase = send_phase(&gmond, &socket, packets, o.rate, r.idle_ns_per_s)?;
        r.phases.push(Phase { kind, ..phase });
    }
    let xml = gmond.xml()?;
    r.hosts_shown = xml.hosts.len();
    r.metrics_shown = xml.hosts.values().map(|h| h.metrics.len()).sum();
    Ok(r)
}

/// Sends `packets` once at `rate` and reads what gmond spent on them.
fn send_phase(
    gmond: &Gmond,
    socket: &UdpSocket,
    packets: &[Vec<u8>],
    rate: f64,
    idle_ns_per_s: f64,
) -> Result<Phase, String> {
    gmond.wait_read(Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(100));
    let (ns0, ticks0, drops0) = (gmond.cpu_ns(), cpu_ticks(gmond.pid()), gmond.drops());
    let t0 = Instant::now();
    let mut sender = MmsgSender::new(socket, packets);
    let sent = if rate > 0.0 {
        paced(
            &mut sender,
            rate,
            Duration::from_secs(600),
            packets.len() as u64,
        )
        .0
    } else {
        filled(&mut sender, gmond, packets.len())?
    };
    gmond.wait_read(Duration::from_secs(10));
    // The last packet read is being handled: give it a moment.
    std::thread::sleep(Duration::from_millis(20));
    let took = t0.elapsed();
    let idle = (idle_ns_per_s * took.as_secs_f64()) as u64;
    Ok(Phase {
        kind: "",
        sent,
        drops: gmond.drops() - drops0,
        cpu_ns: (gmond.cpu_ns() - ns0).saturating_sub(idle),
        ticks: cpu_ticks(gmond.pid()) - ticks0,
        took,
    })
}

/// Sends `count` packets keeping gmond's receive queue between 40 and 100
/// KiB (of its 208 KiB): gmond always has the next packet waiting (no
/// sleep and wakeup per packet: what it spends when it is behind, as in a
/// burst), and none is dropped. Returns the packets sent.
fn filled(sender: &mut MmsgSender<'_>, gmond: &Gmond, count: usize) -> Result<u64, String> {
    let target = std::net::SocketAddr::from(([127, 0, 0, 1], gmond.port));
    let mut queue = xrd2ganglia::daemon::follow::GmondQueue::for_target(target)?;
    // A metadata packet takes up to 1,280 bytes of the queue.
    const TOP: u64 = 100 * 1024;
    const LOW: u64 = 40 * 1024;
    let mut sent = 0;
    let t0 = Instant::now();
    while sent < count {
        let queued = queue.level().map_or(0, |l| l.queued);
        if queued < LOW {
            let k = (((TOP - queued) / 1280) as usize).min(count - sent);
            sent += sender.send(k);
        } else {
            std::thread::sleep(Duration::from_micros(100));
        }
        if t0.elapsed() > Duration::from_secs(600) {
            return Err("gmond did not take the packets within 600 s".into());
        }
    }
    Ok(sent as u64)
}

/// Median, min and max.
fn spread(mut v: Vec<f64>) -> Option<(f64, f64, f64)> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some((median, v[0], v[n - 1]))
}

impl Cost {
    /// Per run, `kind`'s cost relative to (a)'s in that run.
    pub fn ratios(&self, kind: &str) -> Vec<f64> {
        self.runs
            .iter()
            .filter_map(|r| Some(r.us(kind)? / r.us("a")?))
            .collect()
    }

    pub fn print(&self) {
        println!();
        println!(
            "gmond's CPU per packet by kind: the gateway's packets of {} servers' first reports, \
             {}, a fresh stock gmond per run, {} runs",
            self.servers,
            if self.rate > 0.0 {
                format!("{:.0} packets/s", self.rate)
            } else {
                "gmond's queue kept filled (40-100 KiB)".into()
            },
            self.runs.len()
        );
        println!(
            "{:<48} {:>8} {:>26} {:>22} {:>12}",
            "kind",
            "packets",
            "us/packet median (min-max)",
            "x (a) median (min-max)",
            "stat us/pkt"
        );
        for (k, what) in KINDS {
            let n = self
                .counts
                .iter()
                .find(|(c, _)| c == k)
                .map_or(0, |(_, n)| *n);
            let us = spread(self.runs.iter().filter_map(|r| r.us(k)).collect());
            let x = spread(self.ratios(k));
            let ticks = spread(self.runs.iter().filter_map(|r| r.ticks_us(k)).collect());
            let intake = spread(self.runs.iter().filter_map(|r| r.intake(k)).collect());
            let fmt = |s: Option<(f64, f64, f64)>, p: usize| {
                s.map_or("-".into(), |(m, lo, hi)| {
                    format!("{m:.p$} ({lo:.p$}-{hi:.p$})")
                })
            };
            println!(
                "{:<48} {:>8} {:>26} {:>22} {:>12} {:>22}",
                format!("({k}) {what}"),
                n,
                fmt(us, 2),
                fmt(x, 2),
                ticks.map_or("-".into(), |(m, _, _)| format!("{m:.2}")),
                intake.map_or("-".into(), |(m, lo, hi)| format!(
                    "{:.0}k ({:.0}k-{:.0}k)",
                    m / 1e3,
                    lo / 1e3,
                    hi / 1e3
                ))
            );
        }
        let m = &self.steady;
        println!(
            "steady reports (one every {} s, default settings, {} reports): per report {:.1} values, \
             {:.1} metric metadata, {:.2} heartbeat metadata",
            m.every.as_secs(),
            m.reports,
            m.values,
            m.metadata,
            m.hosts
        );
        for (i, r) in self.runs.iter().enumerate() {
            println!(
                "  run {}: load {}, gmond idle {:.2} ms/s, drops {}, gmond showed {} hosts, {} metrics; {}",
                i + 1,
                r.loadavg,
                r.idle_ns_per_s / 1e6,
                r.drops(),
                r.hosts_shown,
                r.metrics_shown,
                r.phases
                    .iter()
                    .map(|p| format!("{} {:.2} ({} drops)", p.kind, p.us(), p.drops))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        for e in &self.errors {
            println!("  could not run: {e}");
        }
    }
}
