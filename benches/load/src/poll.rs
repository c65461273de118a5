//! A site's real load with gmetad polling a real gmond while the servers
//! send, once per delivery mode of the gateway (`--only poll`).
//!
//! N simulated servers report every I seconds (phases spread evenly over
//! the interval, as [`Fleet::run`] does) into `serve` with DEFAULT
//! delivery settings plus the mode's lines ([`MODES`]), which sends to a
//! stock gmond (stock receive buffer). Every P seconds one thread reads
//! gmond's whole XML, as gmetad does, and another the gateway's
//! `xml_listen` port at the same instant, as the reference. Each mode gets
//! a fresh gmond and gateway; the modes run one after another.
//!
//! Which report a value comes from: every report carries its number in its
//! tod (the fixture's tod plus the number, as the sink runs stamp it), so a
//! host's last metric (uptime, tod - tos) names the report whose values a
//! document shows ([`Records::seq_offset`]). At a poll, a host is behind
//! when the report it shows is older than its last report sent at least I
//! seconds before the poll (the value is more than one interval stale);
//! its lag is the poll instant minus the send instant of the report shown
//! (or, if that report was sent after the poll began, of its last report
//! sent before). The last metric says only that the report's last packet
//! arrived: a host showing the same report as the gateway's document polled
//! at the same instant, with another metric's value not that report's, lost
//! packets of it (partial).
//!
//! Packets sent come from the gateway's counters (`stats_interval = 1`):
//! `packets_sent` (every packet handed to the kernel for gmond, second
//! copies included, `packets_resent` of them) where the binary logs it;
//! for a binary without it, an estimate from what it encoded
//! (`metadata_packets + value_packets`) less what it conflated, still
//! queued or failed to send. Drops are gmond's socket's, from
//! /proc/net/udp, before and after the measured run and around each poll.
//!
//! Here: the modes, the figures and a mode's run. `poll/pollers.rs`: the
//! two pollers and what a document shows; `poll/judge.rs`: each poll
//! judged against the send history; `poll/table.rs`: the printed table.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod judge;
mod pollers;
mod table;

use judge::Judge;
use pollers::{Schedule, poller};

use crate::e2e::{self, Fleet, sleep_until};
use crate::gmond::Gmond;
use crate::{LogLine, Records, Scratch, clock_ticks, free_port};

/// One delivery mode: the lines the gateway's config gets on top of the
/// defaults.
pub struct Mode {
    pub name: &'static str,
    pub extra: &'static str,
    /// Runs `--poll-bin`'s binary when given (the one under test if not).
    pub old_bin: bool,
    /// gmond's `udp_recv_channel { buffer = N }` (None: the stock buffer).
    pub gmond_buffer: Option<u32>,
    pub about: &'static str,
}

/// The modes `--poll-modes` chooses from.
pub const MODES: &[Mode] = &[
    Mode {
        name: "follow",
        extra: "",
        old_bin: false,
        gmond_buffer: None,
        about: "defaults: the gateway follows a local gmond's receive queue",
    },
    Mode {
        name: "nofollow",
        extra: "follow_gmond_queue = false\nresend_after = 0",
        old_bin: false,
        gmond_buffer: None,
        about: "the fixed token bucket alone (a gmond on another host, without second copies)",
    },
    Mode {
        name: "resend",
        extra: "follow_gmond_queue = false\nresend_after = 3",
        old_bin: false,
        gmond_buffer: None,
        about: "token bucket, each packet sent again 3 s later (what a gmond on another host gets by default)",
    },
    Mode {
        name: "buffer",
        extra: "follow_gmond_queue = false\nresend_after = 0",
        old_bin: false,
        gmond_buffer: Some(4_194_304),
        about: "token bucket into a gmond with buffer = 4194304 (net.core.rmem_max permitting)",
    },
    Mode {
        name: "stock",
        extra: "",
        old_bin: true,
        gmond_buffer: None,
        about: "no extra lines; with --poll-bin, that (older) binary, for a before/after",
    },
];

pub fn mode(name: &str) -> Option<&'static Mode> {
    MODES.iter().find(|m| m.name == name)
}

/// The targets of `follow` (default settings, local gmond).
pub const DROP_TARGET_PCT: f64 = 0.1;

#[derive(Clone, Debug)]
pub struct PollOptions {
    pub servers: usize,
    /// How often each server reports.
    pub interval: Duration,
    /// How often gmetad polls.
    pub every: Duration,
    /// The measured run, per mode.
    pub duration: Duration,
    pub modes: Vec<String>,
    /// The binary of the `stock` mode (default: the one under test).
    pub old_bin: Option<PathBuf>,
}

/// One poll of one document.
#[derive(Clone, Debug, Default)]
pub struct PollFigures {
    /// Since the measured run began.
    pub at_s: f64,
    /// From connect to the document's last byte.
    pub took_s: f64,
    pub error: Option<String>,
    pub bytes: usize,
    /// Hosts with a report sent at least one interval before the poll.
    pub hosts: usize,
    /// Of those, showing an older report than that one.
    pub behind: usize,
    /// Of those, absent (or without their last metric).
    pub missing: usize,
    /// Showing a value that is none of their reports' (should not happen).
    pub unknown: usize,
    /// Largest lag of a host shown (s).
    pub max_lag: Option<f64>,
    /// Reports the most-behind host was behind.
    pub max_reports_behind: u32,
    /// Drops at gmond's socket from just before the connect to just after
    /// the last byte (gmond path).
    pub drops: Option<u64>,
    /// Hosts showing the same report (by their last metric) as the
    /// gateway's document polled at the same instant, but not all of its
    /// values: packets of that report lost (gmond path).
    pub partial: Option<usize>,
    /// Metrics of those hosts with a value not that report's.
    pub values_off: usize,
}

impl PollFigures {
    fn fresh(&self) -> bool {
        self.error.is_none() && self.behind == 0 && self.missing == 0 && self.unknown == 0
    }
}

/// Every poll of one document over a mode's run.
#[derive(Clone, Debug, Default)]
pub struct PathFigures {
    pub polls: Vec<PollFigures>,
}

impl PathFigures {
    fn failed(&self) -> usize {
        self.polls.iter().filter(|p| p.error.is_some()).count()
    }
    fn sum(&self, f: impl Fn(&PollFigures) -> usize) -> usize {
        self.polls.iter().map(f).sum()
    }
    fn max_lag(&self) -> Option<f64> {
        self.polls.iter().filter_map(|p| p.max_lag).reduce(f64::max)
    }
    fn bytes(&self) -> usize {
        self.polls.iter().map(|p| p.bytes).max().unwrap_or(0)
    }
    fn took(&self) -> (f64, f64) {
        let t = self.polls.iter().filter(|p| p.error.is_none());
        let min = t.clone().map(|p| p.took_s).reduce(f64::min).unwrap_or(0.0);
        (min, t.map(|p| p.took_s).fold(0.0, f64::max))
    }
    /// Every host shown within one interval of its report at every poll.
    pub fn fresh(&self) -> bool {
        !self.polls.is_empty() && self.polls.iter().all(PollFigures::fresh)
    }
}

/// One mode's run.
#[derive(Clone, Debug, Default)]
pub struct ModeRun {
    pub mode: &'static str,
    pub bin: PathBuf,
    pub seconds: f64,
    pub records: u64,
    /// Packets the gateway sent to gmond over the run (`packets_sent`, or
    /// the estimate when `sent_estimated`).
    pub sent: Option<u64>,
    pub sent_estimated: bool,
    pub resent: Option<u64>,
    pub held_ms: Option<u64>,
    pub conflated: Option<u64>,
    /// Drops at gmond's socket over the run (once the gateway drained).
    pub drops: u64,
    /// Of those, while a poll of gmond was being written.
    pub drops_in_polls: u64,
    /// Drops at the gateway's own listening socket.
    pub gw_socket_drops: u64,
    /// Whether the gateway had sent everything within 20 s of the end.
    pub drained: bool,
    pub gmond: PathFigures,
    pub xml: PathFigures,
    pub cpu_s: f64,
    pub peak_rss_kib: u64,
}

impl ModeRun {
    pub fn drop_pct(&self) -> Option<f64> {
        self.sent
            .filter(|&s| s > 0)
            .map(|s| 100.0 * self.drops as f64 / s as f64)
    }
    pub fn cpu_pct(&self) -> f64 {
        100.0 * self.cpu_s / self.seconds.max(1e-9)
    }
    fn drops_ok(&self) -> bool {
        self.drop_pct().is_some_and(|p| p <= DROP_TARGET_PCT)
    }
}

#[derive(Clone, Debug, Default)]
pub struct PollRun {
    pub servers: usize,
    pub interval: Duration,
    pub every: Duration,
    pub duration: Duration,
    pub modes: Vec<ModeRun>,
    /// Modes that could not run, and why.
    pub errors: Vec<String>,
}

/// Every mode of `o`, one after another.
pub fn run(bin: &Path, o: &PollOptions) -> PollRun {
    let mut out = PollRun {
        servers: o.servers,
        interval: o.interval,
        every: o.every,
        duration: o.duration,
        ..PollRun::default()
    };
    if let Err(msg) = crate::gmond::installed() {
        out.errors.push(msg);
        return out;
    }
    let records = Records::load(o.servers);
    for name in &o.modes {
        let Some(m) = mode(name) else {
            out.errors.push(format!("{name}: no such mode"));
            continue;
        };
        let bin = match (&o.old_bin, m.old_bin) {
            (Some(old), true) => old.as_path(),
            _ => bin,
        };
        let t = Instant::now();
        match one(bin, &records, o, m) {
            Ok(r) => out.modes.push(r),
            Err(e) => out.errors.push(format!("{}: {e}", m.name)),
        }
        println!(
            "load: poll mode {} took {:.1} s",
            m.name,
            t.elapsed().as_secs_f64()
        );
    }
    out
}

/// `bin check-config` on the mode's lines: a binary that does not know a
/// key would make `serve` exit 2, which the gateway's start treats as fatal
/// to the whole load run; the other modes should still run.
fn check_mode(bin: &Path, m: &Mode) -> Result<(), String> {
    let dir = Scratch::new("poll-check");
    let conf = dir.0.join("check.toml");
    std::fs::write(
        &conf,
        format!(
            "stats_interval = 1\n{}\n[[channel]]\nhost = \"127.0.0.1\"\nport = 9\n",
            m.extra
        ),
    )
    .map_err(|e| format!("{}: {e}", conf.display()))?;
    let out = Command::new(bin)
        .args(["check-config", "--config"])
        .arg(&conf)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} does not take {:?} ({}): {}",
            bin.display(),
            m.extra,
            out.status,
            // serde's message is the last line, after the TOML excerpt.
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .rfind(|l| !l.trim().is_empty())
                .unwrap_or("")
        ))
    }
}

fn one(
    bin: &Path,
    records: &Records,
    o: &PollOptions,
    m: &'static Mode,
) -> Result<ModeRun, String> {
    check_mode(bin, m)?;
    let gmond = Gmond::start_buffered(free_port(), free_port(), "", m.gmond_buffer)?;
    let xml_port = free_port();
    let gw = e2e::gateway(
        bin,
        gmond.port,
        records.servers,
        &format!("xml_listen = [\"127.0.0.1:{xml_port}\"]\n{}", m.extra),
    );
    let mut fleet = Fleet::new(records, gw.addr());
    let rps = records.servers as f64 / o.interval.as_secs_f64();
    let mut buf = Vec::with_capacity(4096);
    // Every server's first report (with its metadata) over one interval.
    run_stamped(&mut fleet, rps, o.interval, &mut buf);

    let drops0 = gmond.drops();
    let cpu0 = gw.cpu_ticks();
    let records0 = fleet.total();
    let t0 = Instant::now();
    let line0 = gw.log.last();
    let schedule = Schedule {
        t0,
        every: o.every,
        until: t0 + o.duration,
    };
    let naming = records.last_name.clone();
    let gmond_polls = poller(
        gmond.xml_port,
        schedule,
        Some((gmond.pid(), gmond.port)),
        naming.clone(),
    );
    let xml_polls = poller(xml_port, schedule, None, naming);
    run_stamped(&mut fleet, rps, o.duration, &mut buf);
    let t1 = Instant::now();
    let cpu_s = gw.cpu_ticks().saturating_sub(cpu0) as f64 / clock_ticks();
    let gmond_polls = gmond_polls
        .join()
        .map_err(|_| "gmond poller panicked".to_string())?;
    let xml_polls = xml_polls
        .join()
        .map_err(|_| "xml poller panicked".to_string())?;
    // Everything sent and read before the drops and counters are taken.
    let drained = e2e::drained(&gw, t1, fleet.total(), Duration::from_secs(20)).is_some();
    gmond.wait_read(Duration::from_secs(2));
    let drops = gmond.drops().saturating_sub(drops0);
    let line1 = gw.log.last();
    let counts = Counts::between(line0.as_ref(), line1.as_ref());
    let judge = Judge {
        fleet: &fleet,
        interval: o.interval,
        t0,
    };
    let gmond_f = judge.path(&gmond_polls, Some(&xml_polls));
    let drops_in_polls = gmond_f.polls.iter().filter_map(|p| p.drops).sum();
    Ok(ModeRun {
        mode: m.name,
        bin: bin.to_path_buf(),
        seconds: t1.duration_since(t0).as_secs_f64(),
        records: fleet.total() - records0,
        sent: counts.sent,
        sent_estimated: counts.estimated,
        resent: counts.resent,
        held_ms: counts.held_ms,
        conflated: counts.conflated,
        drops,
        drops_in_polls,
        gw_socket_drops: gw.socket_drops(),
        drained,
        gmond: gmond_f,
        xml: judge.path(&xml_polls, None),
        cpu_s,
        peak_rss_kib: gw.status_kib("VmHWM:"),
    })
}

/// [`Fleet::run`], each report stamped with its number in its tod (as
/// `runs::offer` stamps the sink runs' reports): the fleet's own reports
/// cycle through 16 variants with the fixture's tod, which tells at most
/// 16 reports apart; the number tells every one.
fn run_stamped(fleet: &mut Fleet, rps: f64, duration: Duration, buf: &mut Vec<u8>) {
    let t0 = Instant::now();
    let mut i = 0u64;
    while t0.elapsed() < duration {
        sleep_until(t0 + Duration::from_secs_f64(i as f64 / rps));
        let s = fleet.next;
        fleet.next = (fleet.next + 1) % fleet.len();
        let k = fleet.sent[s];
        fleet
            .records
            .stamp(fleet.records.fixture_of(s), k as usize, u64::from(k), buf);
        if fleet.sockets[s].send_to(buf, fleet.to).is_ok() {
            let now = Instant::now();
            fleet.sent[s] += 1;
            fleet.last[s] = Some(now);
            fleet.history[s].push(now);
            fleet.total += 1;
        }
        i += 1;
    }
}

// ---------------------------------------------------------------------------
// The gateway's counters over the run.

struct Counts {
    sent: Option<u64>,
    estimated: bool,
    resent: Option<u64>,
    held_ms: Option<u64>,
    conflated: Option<u64>,
}

impl Counts {
    /// The counters' growth from `a` (the last line before the run; None:
    /// from the start) to `b` (the last line once drained).
    fn between(a: Option<&LogLine>, b: Option<&LogLine>) -> Counts {
        let delta = |k: &str| {
            let end = b?.get(k)?;
            Some(end.saturating_sub(a.and_then(|a| a.get(k)).unwrap_or(0)))
        };
        let level = |l: Option<&LogLine>, k: &str| l.and_then(|l| l.get(k)).unwrap_or(0);
        let counted = delta("packets_sent");
        // Without `packets_sent`: encoded, less what never left (replaced
        // in the queue, still queued, failed).
        let estimate = || {
            let encoded = delta("metadata_packets")? + delta("value_packets")?;
            let queued = level(b, "send_queue") as i64 - level(a, "send_queue") as i64;
            let gone = delta("packets_conflated").unwrap_or(0) + delta("send_errors").unwrap_or(0);
            Some((encoded as i64 - gone as i64 - queued).max(0) as u64)
        };
        Counts {
            estimated: counted.is_none(),
            sent: counted.or_else(estimate),
            resent: delta("packets_resent"),
            held_ms: delta("send_held"),
            conflated: delta("packets_conflated"),
        }
    }
}
