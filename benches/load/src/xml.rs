//! gmetad polls the gateway (`xml_listen`, `send = false`) against the
//! gateway sending to a stock gmond that gmetad polls, in one run: the
//! same simulated servers at the same rate, each path's document polled
//! while the servers send (the gateway's every second, gmond's every 5 s:
//! a poll of gmond costs it the time it does not read its socket).
//!
//! For each poll and host: lag = its TN in the document - the age, at the
//! poll's start, of the last report it sent. A fresh document has every
//! lag under 2 s (TN is whole seconds).

use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::e2e::{self, Check, Expect, Fleet};
use crate::gmond::{Gmond, Xml};
use crate::{Records, free_port, server_ip};

/// A host whose document lags its last report by more than this is stale.
pub const FRESH_TARGET: f64 = 2.0;

#[derive(Clone, Debug, Default)]
pub struct PathRun {
    pub label: &'static str,
    pub polls: usize,
    pub failed_polls: usize,
    /// Largest lag of any host in any poll (s).
    pub max_lag: Option<f64>,
    /// Hosts over the target, summed over polls, and their polls.
    pub stale: usize,
    /// Hosts that had reported but were not in a poll's document.
    pub missing: usize,
    pub max_poll_s: f64,
    pub bytes: usize,
    /// Drops at gmond's socket (gmond path).
    pub drops: Option<u64>,
    /// The document after the run against every server's last report.
    pub last: Check,
    pub gateway_cpu_s: f64,
    pub records: u64,
    pub seconds: f64,
}

#[derive(Clone, Debug, Default)]
pub struct XmlRun {
    pub servers: usize,
    pub rps: f64,
    pub paths: Vec<PathRun>,
    pub errors: Vec<String>,
}

/// One poll: when it started, how long it took, the document (by IP).
type Poll = (Instant, Duration, Result<Xml, String>);

fn read_doc(port: u16) -> Result<Xml, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).map_err(|e| format!("read: {e}"))?;
    Xml::parse(&String::from_utf8_lossy(&buf))
}

/// Polls `port` every `every` until `stop`.
fn poller(port: u16, every: Duration, stop: Arc<AtomicBool>) -> thread::JoinHandle<Vec<Poll>> {
    thread::spawn(move || {
        let mut polls = Vec::new();
        let t0 = Instant::now();
        let mut k = 1u32;
        while !stop.load(Ordering::Relaxed) {
            let next = t0 + every * k;
            while Instant::now() < next && !stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(20));
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
            k += 1;
            let at = Instant::now();
            let doc = read_doc(port);
            polls.push((at, at.elapsed(), doc));
        }
        polls
    })
}

/// Judges each poll against the servers' send history.
fn judge(p: &mut PathRun, fleet: &Fleet, polls: &[Poll]) {
    for (at, took, doc) in polls {
        p.polls += 1;
        p.max_poll_s = p.max_poll_s.max(took.as_secs_f64());
        let Ok(doc) = doc else {
            p.failed_polls += 1;
            continue;
        };
        p.bytes = p.bytes.max(doc.bytes);
        for s in 0..fleet.len() {
            let Some(sent) = fleet.history[s].iter().rev().find(|t| *t <= at) else {
                continue;
            };
            let Some(host) = doc.hosts.get(&server_ip(s).to_string()) else {
                p.missing += 1;
                continue;
            };
            let lag = host.tn - at.duration_since(*sent).as_secs_f64();
            p.max_lag = Some(p.max_lag.map_or(lag, |m: f64| m.max(lag)));
            if lag > FRESH_TARGET {
                p.stale += 1;
            }
        }
    }
}

/// Both paths at `rps` records/s from `servers` servers for `sustain`.
pub fn run(bin: &Path, servers: usize, rps: f64, sustain: Duration) -> XmlRun {
    let records = Records::load(servers);
    let mut expect = Expect::new(&records);
    let mut out = XmlRun {
        servers,
        rps,
        ..XmlRun::default()
    };
    match one(bin, &records, &mut expect, rps, sustain, true) {
        Ok(p) => out.paths.push(p),
        Err(e) => out.errors.push(format!("xml port: {e}")),
    }
    if let Err(msg) = crate::gmond::installed() {
        out.errors.push(msg);
        return out;
    }
    match one(bin, &records, &mut expect, rps, sustain, false) {
        Ok(p) => out.paths.push(p),
        Err(e) => out.errors.push(format!("gmond: {e}")),
    }
    out
}

fn one(
    bin: &Path,
    records: &Records,
    expect: &mut Expect,
    rps: f64,
    sustain: Duration,
    xml: bool,
) -> Result<PathRun, String> {
    let xml_port = free_port();
    let (gmond, gw, port, every, label) = if xml {
        let gw = e2e::gateway(
            bin,
            9,
            records.servers,
            &format!("send = false\nxml_listen = [\"127.0.0.1:{xml_port}\"]"),
        );
        (
            None,
            gw,
            xml_port,
            Duration::from_secs(1),
            "gmetad polls the gateway",
        )
    } else {
        let gmond = Gmond::start(free_port(), free_port(), "")?;
        let gw = e2e::gateway(bin, gmond.port, records.servers, "");
        let port = gmond.xml_port;
        (
            Some(gmond),
            gw,
            port,
            Duration::from_secs(5),
            "gmetad polls gmond",
        )
    };
    let mut fleet = Fleet::new(records, gw.addr());
    let interval = Duration::from_secs_f64(records.servers as f64 / rps);
    // Every server's first report (with its metadata) over one interval.
    fleet.run(rps, interval);
    let stop = Arc::new(AtomicBool::new(false));
    let polls = poller(port, every, stop.clone());
    let cpu0 = gw.cpu_ticks();
    let records0 = fleet.total();
    let t0 = Instant::now();
    fleet.run(rps, sustain);
    let seconds = t0.elapsed().as_secs_f64();
    let cpu = gw.cpu_ticks().saturating_sub(cpu0) as f64 / crate::clock_ticks();
    stop.store(true, Ordering::Relaxed);
    let polls = polls.join().map_err(|_| "poller panicked".to_string())?;
    let mut p = PathRun {
        label,
        gateway_cpu_s: cpu,
        records: fleet.total() - records0,
        seconds,
        ..PathRun::default()
    };
    judge(&mut p, &fleet, &polls);
    // The document once the servers stopped (and the queue, for gmond, drained).
    if !xml {
        let _ = e2e::drained(&gw, Instant::now(), fleet.total(), Duration::from_secs(20));
    }
    let doc = read_doc(port)?;
    p.last = e2e::check(&fleet, expect, &doc, None);
    p.drops = gmond.as_ref().map(Gmond::drops);
    Ok(p)
}

impl XmlRun {
    pub fn print(&self) {
        println!();
        println!(
            "gmetad polls the gateway, against gmetad polls gmond: {} simulated servers at {:.0} records/s, \
             default settings; lag = TN in the document - age of the host's last report at the poll",
            self.servers, self.rps
        );
        println!(
            "{:<28} {:>8} {:>6} {:>9} {:>11} {:>9} {:>10} {:>12} {:>9} {:>8} {:>12}",
            "path",
            "rec/s",
            "polls",
            "max lag",
            "stale/host",
            "missing",
            "max poll",
            "doc bytes",
            "drops",
            "CPU s",
            "last values"
        );
        for p in &self.paths {
            println!(
                "{:<28} {:>8} {:>6} {:>9} {:>11} {:>9} {:>10} {:>12} {:>9} {:>8.2} {:>12}",
                p.label,
                format!("{:.0}", p.records as f64 / p.seconds.max(1e-9)),
                format!(
                    "{}{}",
                    p.polls,
                    if p.failed_polls > 0 {
                        format!(" ({} failed)", p.failed_polls)
                    } else {
                        String::new()
                    }
                ),
                p.max_lag
                    .map(|l| format!("{l:.2} s"))
                    .unwrap_or_else(|| "-".into()),
                p.stale,
                p.missing,
                format!("{:.2} s", p.max_poll_s),
                p.bytes,
                p.drops.map(|d| d.to_string()).unwrap_or_else(|| "-".into()),
                p.gateway_cpu_s,
                format!("{}/{}", p.last.metrics_last, p.last.metrics),
            );
        }
        for e in &self.errors {
            println!("  not run: {e}");
        }
    }

    /// The XML path's promises: every host fresh in every poll, every
    /// last value in the final document.
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = self.errors.clone();
        if let Some(p) = self.paths.iter().find(|p| p.label.contains("gateway")) {
            if p.polls == 0 || p.failed_polls > 0 {
                out.push(format!("xml: {} polls, {} failed", p.polls, p.failed_polls));
            }
            if p.stale > 0 || p.missing > 0 {
                out.push(format!(
                    "xml: {} stale and {} missing hosts over {} polls (max lag {:?})",
                    p.stale, p.missing, p.polls, p.max_lag
                ));
            }
            if !p.last.all_last() {
                out.push(format!(
                    "xml: {}/{} last values ({})",
                    p.last.metrics_last,
                    p.last.metrics,
                    p.last.example.clone().unwrap_or_default()
                ));
            }
        } else {
            out.push("xml: the gateway path did not run".into());
        }
        out
    }
}
