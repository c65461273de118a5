//! The load tool: xrootd's detailed stream at a site's load (`--only
//! detailed`, docs/detailed.md).
//!
//! `servers` simulated data servers (the real `ds_loaded` record, each
//! from its own 127.x address, one summary every [`SUMMARY_EVERY`]) send,
//! beside their summaries, a detailed stream as xrootd 5.x builds it
//! (section 3 of the monitoring reference, src/detailed.rs): a `=` server
//! packet, four `u` logins (VOs atlas and cms, protocols xroot and http,
//! client domains cern.ch and fnal.gov), then every `flush` one `f` packet
//! (a time record, the closes of the files the last packet opened, and
//! `files` x `flush` opens with user and path, as `fstat lfn ops` sends
//! them), phases spread over the flush interval. Into a real gmond through
//! the built gateway with its default delivery settings (it follows
//! gmond's receive queue), twice: first the summaries alone (the
//! baseline), then summaries and detailed stream. Each: the gateway's CPU
//! over the measured window, drops at its socket and at gmond's, and, once
//! the gateway has drained, gmond's totals of every detailed metric per VO
//! and per protocol against what the servers sent.

use super::*;

use crate::e2e::{gateway, ready_to_poll};
use crate::gmond::Gmond;

/// How often each server sends its summary record.
const SUMMARY_EVERY: Duration = Duration::from_secs(10);
/// The fixture every server sends (an xrootd data server: its `tos` is
/// the stream's `stod`).
const FIXTURE: usize = 1;
/// The logins of each server: user, VO, protocol, client host.
const USERS: [(&str, &str, &str, &str); 4] = [
    ("alice", "atlas", "xroot", "node1.cern.ch"),
    ("bob", "cms", "xroot", "node2.cern.ch"),
    ("carol", "atlas", "http", "wn3.fnal.gov"),
    ("dave", "cms", "http", "wn4.fnal.gov"),
];
const FIELDS: [&str; 6] = [
    "bytes_read",
    "bytes_written",
    "files_opened",
    "files_closed",
    "files_open",
    "users",
];

pub struct DetailedOptions {
    pub servers: usize,
    /// Files each server opens (and closes) a second.
    pub files: u64,
    pub flush: Duration,
    pub sustain: Duration,
}

/// One phase: summaries alone, or with the detailed stream.
#[derive(Debug, Default)]
pub struct Phase {
    pub label: &'static str,
    pub secs: f64,
    pub summaries: u64,
    pub f_packets: u64,
    /// Opens and closes sent.
    pub records: u64,
    pub datagrams: u64,
    /// Summaries, f packets and records sent within the measured window.
    pub window: (u64, u64, u64),
    pub cpu_pct: f64,
    pub gw_drops: u64,
    pub gmond_drops: u64,
    /// The gateway's counters at its stop.
    pub counters: Option<LogLine>,
    /// (list.name.field, sent, in gmond) that differ; empty: all equal.
    pub mismatched: Vec<(String, u64, u64)>,
    /// Totals compared.
    pub compared: usize,
    pub error: Option<String>,
}

/// What one server has sent of its detailed stream.
struct Server {
    stod: u32,
    next_dictid: u32,
    f_seq: u8,
    map_seq: u8,
    /// Files the last packet opened: (dictid, user).
    open: Vec<(u32, usize)>,
}

/// Totals sent, by "list.name.field".
type Totals = HashMap<String, u64>;

fn header(buf: &mut Vec<u8>, code: u8, pseq: u8, stod: u32) {
    buf.clear();
    buf.extend_from_slice(&[code, pseq, 0, 0]);
    buf.extend_from_slice(&stod.to_be_bytes());
}

fn finish(buf: &mut [u8]) {
    let len = u16::try_from(buf.len()).expect("a packet under 64 KiB");
    buf[2..4].copy_from_slice(&len.to_be_bytes());
}

fn record_header(buf: &mut Vec<u8>, kind: u8, flag: u8, size: usize, id: u32) {
    buf.extend_from_slice(&[kind, flag]);
    buf.extend_from_slice(&(size as u16).to_be_bytes());
    buf.extend_from_slice(&id.to_be_bytes());
}

/// What file `dictid` moved: (read, readv, written).
fn moved(dictid: u32) -> (u64, u64, u64) {
    let j = u64::from(dictid);
    let write = if j % 5 == 0 { 2_000_000 + j % 1000 } else { 0 };
    (1_000_000 + (j % 7) * 4096, (j % 3) * 1000, write)
}

fn add(t: &mut Totals, user: usize, field: &str, v: u64) {
    let (_, vo, protocol, host) = USERS[user];
    let domain = host
        .split_once('.')
        .map_or(host, |(_, d)| d)
        .replace('.', "_");
    for key in [
        format!("vo.{vo}.{field}"),
        format!("protocol.{protocol}.{field}"),
        format!("domain.{domain}.{field}"),
    ] {
        *t.entry(key).or_default() += v;
    }
}

impl Server {
    fn new(records: &Records) -> Server {
        // tos of the fixture: the summary's start time is the stream's.
        let data = &records.data[FIXTURE];
        let key = b" tos=\"";
        let at = data
            .windows(key.len())
            .position(|w| w == key)
            .expect("tos in the fixture")
            + key.len();
        let end = at + data[at..].iter().position(|b| *b == b'"').expect("tos");
        let stod = std::str::from_utf8(&data[at..end])
            .ok()
            .and_then(|t| t.parse().ok())
            .expect("tos is a number");
        Server {
            stod,
            next_dictid: 1,
            f_seq: 0,
            map_seq: 0,
            open: Vec::new(),
        }
    }

    /// The `=` packet and the logins, into `out`.
    fn hello(&mut self, i: usize, out: &mut Vec<Vec<u8>>, t: &mut Totals) {
        let mut b = Vec::new();
        header(&mut b, b'=', self.map_seq, self.stod);
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(
            format!("=/nobody.{i}:1@load{i}\n&site=LOAD&port=1094&inst=ds&pgm=xrootd&ver=v5.5.3")
                .as_bytes(),
        );
        finish(&mut b);
        out.push(b);
        for (u, (name, vo, protocol, host)) in USERS.iter().enumerate() {
            self.map_seq = self.map_seq.wrapping_add(1);
            let mut b = Vec::new();
            header(&mut b, b'u', self.map_seq, self.stod);
            b.extend_from_slice(&self.next_dictid.to_be_bytes());
            self.next_dictid += 1;
            b.extend_from_slice(
                format!(
                    "{protocol}/{name}.{}:{u}@{host}\n&p=gsi&n={name}&h={host}&o={vo}&r=&g=&m=",
                    1000 + i
                )
                .as_bytes(),
            );
            finish(&mut b);
            out.push(b);
            add(t, u, "users", 1);
        }
    }

    /// One `f` packet: the closes of what the last one opened, and `opens`
    /// opens (none on the last packet).
    fn f_packet(&mut self, opens: u64, now: u32, buf: &mut Vec<u8>, t: &mut Totals) {
        header(buf, b'f', self.f_seq, self.stod);
        self.f_seq = self.f_seq.wrapping_add(1);
        let n = self.open.len() as u64 + opens;
        record_header(buf, 2, 0, 16, (n as u32) & 0xffff);
        buf.extend_from_slice(&now.to_be_bytes());
        buf.extend_from_slice(&now.to_be_bytes());
        for (dictid, user) in std::mem::take(&mut self.open) {
            let (read, readv, write) = moved(dictid);
            record_header(buf, 0, 0, 32, dictid);
            for v in [read, readv, write] {
                buf.extend_from_slice(&v.to_be_bytes());
            }
            add(t, user, "bytes_read", read + readv);
            add(t, user, "bytes_written", write);
            add(t, user, "files_closed", 1);
        }
        for _ in 0..opens {
            let dictid = self.next_dictid;
            self.next_dictid += 1;
            let user = (dictid % 4) as usize;
            let lfn = format!("/store/data/run{}/file{dictid}.root", dictid / 1000);
            // Header, size, user, path and its NUL, padded to 8 bytes.
            let size = (8 + 8 + 4 + lfn.len() + 1).div_ceil(8) * 8;
            let rw = moved(dictid).2 > 0;
            record_header(buf, 1, 0x01 | if rw { 0x02 } else { 0 }, size, dictid);
            buf.extend_from_slice(&moved(dictid).0.to_be_bytes());
            buf.extend_from_slice(&(user as u32 + 1).to_be_bytes());
            let start = buf.len();
            buf.extend_from_slice(lfn.as_bytes());
            buf.resize(start + size - 20, 0);
            self.open.push((dictid, user));
            add(t, user, "files_opened", 1);
        }
        finish(buf);
    }
}

/// Both phases.
pub fn run(bin: &Path, o: &DetailedOptions) -> Vec<Phase> {
    let records = Records::load(o.servers);
    vec![
        phase(bin, &records, o, false),
        phase(bin, &records, o, true),
    ]
}

fn phase(bin: &Path, records: &Records, o: &DetailedOptions, detailed: bool) -> Phase {
    let mut p = Phase {
        label: if detailed {
            "summaries + detailed stream"
        } else {
            "summaries alone (baseline)"
        },
        ..Phase::default()
    };
    let gmond = match Gmond::start(free_port(), free_port(), "") {
        Ok(g) => g,
        Err(e) => {
            p.error = Some(e);
            return p;
        }
    };
    let gw = gateway(bin, gmond.port, o.servers, "");
    let to = gw.addr();
    let sockets = records.sockets();
    let n = o.servers;
    let mut servers: Vec<Server> = (0..n).map(|_| Server::new(records)).collect();
    let mut sent = Totals::new();
    let mut buf = Vec::new();
    let send = |i: usize, b: &[u8], p: &mut Phase| {
        // A full socket buffer of our own: try again (nothing is lost here).
        while sockets[i].send_to(b, to).is_err() {
            thread::sleep(Duration::from_micros(50));
        }
        p.datagrams += 1;
    };
    // Warm-up: every server's first summary (its metadata), and the
    // stream's `=` and logins.
    let mut seq = 0u64;
    for (i, server) in servers.iter_mut().enumerate() {
        records.stamp(FIXTURE, i, seq, &mut buf);
        send(i, &buf, &mut p);
        p.summaries += 1;
        if detailed {
            let mut hello = Vec::new();
            server.hello(i, &mut hello, &mut sent);
            for b in &hello {
                send(i, b, &mut p);
            }
        }
        if i % 100 == 99 {
            thread::sleep(Duration::from_millis(10));
        }
    }
    thread::sleep(Duration::from_secs(2));
    let drops0 = (gw.socket_drops(), gmond.drops());
    let cpu0 = gw.cpu_ticks();
    let opens = (o.files as f64 * o.flush.as_secs_f64()).round() as u64;
    let ticks = (o.sustain.as_secs_f64() / o.flush.as_secs_f64()).ceil() as u64;
    let summary_ticks = (SUMMARY_EVERY.as_secs_f64() / o.flush.as_secs_f64())
        .round()
        .max(1.0) as u64;
    let wall = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as u32)
    };
    let t0 = Instant::now();
    let before = (p.summaries, p.f_packets, p.records);
    let step = o.flush.as_secs_f64() / n as f64;
    // Event e: server e % n, tick e / n, due at e x step; the last tick
    // (closes only) is sent after the window.
    for e in 0..(ticks + 1) * n as u64 {
        let (i, tick) = ((e % n as u64) as usize, e / n as u64);
        let due = t0 + Duration::from_secs_f64(e as f64 * step);
        let now = Instant::now();
        if due > now {
            thread::sleep(due - now);
        }
        if tick < ticks && tick % summary_ticks == summary_ticks - 1 {
            seq += 1;
            records.stamp(FIXTURE, (i + seq as usize) % 16, seq, &mut buf);
            send(i, &buf, &mut p);
            p.summaries += 1;
        }
        if detailed {
            let opens = if tick < ticks { opens } else { 0 };
            let closes = servers[i].open.len() as u64;
            servers[i].f_packet(opens, wall(), &mut buf, &mut sent);
            send(i, &buf, &mut p);
            p.f_packets += 1;
            p.records += opens + closes;
        }
        if tick == ticks - 1 && i == n - 1 {
            // The measured window ends with the last tick that opens.
            p.secs = t0.elapsed().as_secs_f64();
            p.window = (
                p.summaries - before.0,
                p.f_packets - before.1,
                p.records - before.2,
            );
            p.cpu_pct = 100.0 * gw.cpu_ticks().saturating_sub(cpu0) as f64 / clock_ticks() / p.secs;
        }
    }
    let stopped = Instant::now();
    let ready = ready_to_poll(&gw, &gmond, stopped - Duration::from_secs(1), p.datagrams);
    p.gw_drops = gw.socket_drops() - drops0.0;
    p.gmond_drops = gmond.drops() - drops0.1;
    if let Err(e) = ready {
        p.error = Some(e);
    } else if detailed {
        match gmond.xml() {
            Ok(xml) => compare(&xml, &sent, &mut p),
            Err(e) => p.error = Some(e),
        }
    }
    p.counters = gw.stop();
    p
}

/// gmond's sums over hosts of every detailed metric against what was sent
/// (the gauges: 0 files open, the users logged in).
fn compare(xml: &crate::gmond::Xml, sent: &Totals, p: &mut Phase) {
    let mut got = Totals::new();
    for host in xml.hosts.values() {
        for (name, val) in &host.metrics {
            let Some((_, rest)) = name.split_once(".detailed.") else {
                continue;
            };
            let v = val.parse::<f64>().unwrap_or(f64::NAN);
            *got.entry(rest.to_string()).or_default() += v as u64;
        }
    }
    let mut keys: Vec<String> = sent.keys().cloned().collect();
    for list in ["vo", "protocol", "domain"] {
        for f in FIELDS {
            keys.push(format!("{list}.other.{f}"));
        }
    }
    // The gauge of open files of every name that opened some: 0 at the end.
    let open: Vec<String> = sent
        .keys()
        .filter_map(|k| Some(format!("{}.files_open", k.strip_suffix(".files_opened")?)))
        .collect();
    keys.extend(open);
    keys.sort();
    keys.dedup();
    for k in &keys {
        let (s, g) = (
            sent.get(k).copied().unwrap_or(0),
            got.get(k).copied().unwrap_or(0),
        );
        if s != g {
            p.mismatched.push((k.clone(), s, g));
        }
    }
    // Anything in gmond that was never sent.
    for (k, &g) in &got {
        if !keys.contains(k) && g != 0 {
            p.mismatched.push((k.clone(), 0, g));
        }
    }
    p.compared = keys.len();
}

pub fn print(o: &DetailedOptions, phases: &[Phase]) {
    println!(
        "\n== detailed stream: {} servers, {} files/s each opened and closed, one f packet per {} s, a summary every {} s; {} s measured ==",
        o.servers,
        o.files,
        o.flush.as_secs_f64(),
        SUMMARY_EVERY.as_secs(),
        o.sustain.as_secs_f64()
    );
    println!(
        "| run | summaries/s | f packets/s | opens+closes/s | gateway CPU | drops at the gateway's socket | at gmond's | gateway's detailed_lost, parse_errors | gmond's totals |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for p in phases {
        let c = |k: &str| {
            p.counters
                .as_ref()
                .and_then(|l| l.get(k))
                .map_or("?".into(), |v| v.to_string())
        };
        let totals = if let Some(e) = &p.error {
            format!("not read: {e}")
        } else if p.f_packets == 0 {
            "-".into()
        } else if p.mismatched.is_empty() {
            format!("all {} equal to what was sent", p.compared)
        } else {
            format!(
                "{} of {} differ: {:?}",
                p.mismatched.len(),
                p.compared,
                &p.mismatched[..p.mismatched.len().min(6)]
            )
        };
        // Rates over the window (the warm-up and the closing packets aside).
        let per_s = |v: u64| v as f64 / p.secs.max(1e-9);
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.1}% | {} | {} | {}, {} | {} |",
            p.label,
            per_s(p.window.0),
            per_s(p.window.1),
            per_s(p.window.2),
            p.cpu_pct,
            p.gw_drops,
            p.gmond_drops,
            c("detailed_lost"),
            c("parse_errors"),
            totals
        );
    }
}

impl Phase {
    /// What makes the run fail.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(e) = &self.error {
            out.push(format!("{}: {e}", self.label));
        }
        if self.gw_drops > 0 {
            out.push(format!(
                "{}: {} drops at the gateway's socket",
                self.label, self.gw_drops
            ));
        }
        if !self.mismatched.is_empty() {
            out.push(format!("{}: gmond's totals differ", self.label));
        }
        out
    }
}
