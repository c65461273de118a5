//! Load tool: the gateway against the chain it replaces, side by side.
//!
//! Replays real xrootd records (tests/data/records) from many simulated
//! servers, each its own loopback address and each report with new numbers
//! (16 variants per record, and a tod that rises by one per report, so
//! that the sink knows which report a packet's uptime comes from), over
//! UDP, and measures at a counting sink that stands in for gmond:
//!
//! * raw: the loopback limit, pre-encoded value packets blasted to the sink
//!   with no gateway (one `send` per packet, and `sendmmsg` batches);
//! * serve at full speed and at chosen offered rates: records/s, metric
//!   packets/s, records whose last value packet never arrived, as lost (no
//!   later report of the same server arrived either) or superseded (a
//!   later one did: the gateway's conflating send queue replaced the old
//!   values by newer ones, as it should under overload), the gateway's
//!   `packets_conflated`, socket drops, p50/p99 latency from a record's
//!   send to its last value packet (records that arrived), the gateway's
//!   CPU and peak RSS;
//! * receive and parse: XRootD's `mpxstats -f flat` and ours, records/s;
//! * the traditional chain: `mpxstats -f flat | perl` running the real
//!   `gmetric` once per value;
//! * memory: two reports from each of 10,000 sources (steady state, with
//!   their templates), bytes per tracked (host, metric) pair: from VmRSS
//!   once the gateway's counters show everything read and its send queue
//!   empty, and from the peak (VmHWM).
//!
//! `cargo bench --bench load` runs everything (about 3 minutes);
//! `cargo bench --bench load -- --help` lists the options. Under
//! `cargo test` (no `--bench` argument) it runs a smoke pass in seconds and
//! checks that every part works, that no serve run loses a record, and that
//! at a low rate none is lost or superseded either.

use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use xrd2ganglia::config::{FileConfig, Overrides, Settings, validate};
use xrd2ganglia::events::{Counters, Events};
use xrd2ganglia::ganglia::xdr::{self, Packet};
use xrd2ganglia::gateway::Pipeline;

use mmsg::{CountSink, MmsgSender};

// Free ports and scratch directories, as the tests have them.
#[path = "../../tests/common/scratch.rs"]
#[allow(dead_code)]
mod scratch;
use scratch::{Scratch, free_port};

mod e2e;
mod gmond;
mod mmsg;
mod xml;

/// The records replayed, round robin over the simulated servers: an idle and
/// a loaded data server, a manager cmsd with its node list, a proxy cache,
/// and a server with spaces and quotas (the ~2.3 KB record).
const FIXTURES: &[&str] = &["ds_idle", "ds_loaded", "mgr_cmsd", "pfc_loaded", "spaces"];

const USAGE: &str = "cargo bench --bench load -- [options]
  --duration SECS   length of each measured run (default 5)
  --servers N       simulated xrootd servers (default 100)
  --rates LIST      offered records/s for the paced runs, comma-separated
                    (default 1000,2000,5000, plus 80% of the raw rate)
  --sources N       sources for the memory run (default 10000)
  --gmond-servers N simulated servers of the gmond runs (default 1000)
  --ceiling PKTS    skip measuring gmond's ceiling (gmond run (a)), take this
                    (value packets/s)
  --sustain SECS    measured length of the sustained gmond run (default 20)
  --down SECS       how long gmond stays stopped in the restart run (default 10)
  --xml-rps R       records/s of the xml run (default 500)
  --only LIST       runs to do: raw,serve,rates,parse,chain,memory,gmond,xml
  --smoke           the quick pass cargo test runs (gmond runs with 200
                    servers; fails on any drop at gmond or missing or
                    stale metric)";

#[derive(Clone, Debug)]
struct Options {
    duration: Duration,
    servers: usize,
    rates: Vec<u64>,
    sources: usize,
    gmond_servers: usize,
    ceiling: Option<f64>,
    sustain: Duration,
    down: Duration,
    xml_rps: f64,
    only: Vec<String>,
    smoke: bool,
}

impl Options {
    fn parse() -> Options {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let bench = args.iter().any(|a| a == "--bench");
        let mut o = Options {
            duration: Duration::from_secs(5),
            servers: 100,
            rates: vec![1000, 2000, 5000],
            sources: 10_000,
            gmond_servers: 1000,
            ceiling: None,
            sustain: Duration::from_secs(20),
            xml_rps: 500.0,
            down: Duration::from_secs(10),
            only: Vec::new(),
            smoke: !bench,
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut value = || {
                it.next()
                    .cloned()
                    .unwrap_or_else(|| usage(&format!("{a} needs a value")))
            };
            match a.as_str() {
                "--bench" => {}
                "--smoke" => o.smoke = true,
                "--duration" => o.duration = Duration::from_secs_f64(number(&value())),
                "--servers" => o.servers = number(&value()) as usize,
                "--sources" => o.sources = number(&value()) as usize,
                "--gmond-servers" => o.gmond_servers = number(&value()) as usize,
                "--ceiling" => o.ceiling = Some(number(&value())),
                "--xml-rps" => o.xml_rps = number(&value()),
                "--sustain" => o.sustain = Duration::from_secs_f64(number(&value())),
                "--down" => o.down = Duration::from_secs_f64(number(&value())),
                "--rates" => o.rates = value().split(',').map(|r| number(r) as u64).collect(),
                "--only" => o.only = value().split(',').map(str::to_string).collect(),
                "--help" | "-h" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                // cargo test passes its own flags (--nocapture, filters): ignore them.
                other if !bench => {
                    let _ = other;
                }
                other => usage(&format!("unknown option {other}")),
            }
        }
        if o.smoke {
            o.duration = o.duration.min(Duration::from_millis(1500));
            o.servers = o.servers.min(20);
            o.rates = vec![200];
            o.sources = o.sources.min(300);
            o.gmond_servers = o.gmond_servers.min(200);
            o.sustain = o.sustain.min(Duration::from_secs(5));
            o.down = o.down.min(Duration::from_secs(3));
        }
        if o.gmond_servers == 0 || o.servers == 0 {
            usage("--servers and --gmond-servers must be at least 1");
        }
        o
    }

    fn runs(&self, name: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == name)
    }
}

fn number(s: &str) -> f64 {
    s.trim()
        .parse()
        .unwrap_or_else(|_| usage(&format!("not a number: {s}")))
}

fn usage(msg: &str) -> ! {
    eprintln!("load: {msg}\n{USAGE}");
    std::process::exit(2)
}

fn main() {
    let o = Options::parse();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_xrd2ganglia"));
    let records = Records::load(o.servers);
    let mut report = Report::default();
    println!(
        "load: {} servers, {} s per run, records {:?} ({} value packets per round of {} records){}",
        o.servers,
        o.duration.as_secs_f64(),
        FIXTURES,
        records.packets_per_round(),
        FIXTURES.len(),
        if o.smoke { " [smoke]" } else { "" }
    );

    if o.runs("raw") {
        report.raw_send = Some(raw(&records, &o, false));
        report.raw_mmsg = Some(raw(&records, &o, true));
    }
    if o.runs("serve") {
        // Flat out: offered a quarter above what the loopback can carry (a
        // sender blasting without limit would only take the CPU the gateway
        // and the sink need).
        let rate = report
            .raw_best()
            .map(|raw| (raw * 1.25 / records.packets_per_record()) as u64);
        report.serve_max = Some(serve(
            &bin,
            &records,
            &o,
            rate,
            "serve, flat out",
            SinkMode::Polled,
        ));
    }
    if o.runs("rates") {
        // The chosen rates with a sink that wakes on each packet (it must not
        // add naps to a record's latency); 80% of the raw rate with the
        // polled sink the raw rate was measured with.
        let mut rates: Vec<(u64, SinkMode)> =
            o.rates.iter().map(|&r| (r, SinkMode::Blocking)).collect();
        if let Some(raw) = report.raw_best() {
            let r = (raw * 0.8 / records.packets_per_record()) as u64;
            if !o.smoke && r > 0 {
                rates.push((r, SinkMode::Polled));
            }
        }
        for (rate, mode) in rates {
            let label = match mode {
                SinkMode::Blocking => format!("serve at {rate} records/s"),
                SinkMode::Polled => format!("serve at {rate} records/s (80%)"),
            };
            report
                .paced
                .push(serve(&bin, &records, &o, Some(rate), &label, mode));
        }
    }
    if o.runs("parse") {
        report.mpxstats_theirs = mpxstats(Path::new("/usr/bin/mpxstats"), &[], &records, &o);
        report.mpxstats_ours = mpxstats(&bin, &["mpxstats"], &records, &o);
    }
    if o.runs("chain") {
        report.chain = chain(&records, &o);
    }
    if o.runs("memory") {
        report.memory = Some(memory(&bin, &o, false));
    }
    if o.runs("xml") {
        if report.memory.is_none() {
            report.memory = Some(memory(&bin, &o, false));
        }
        report.memory_xml = Some(memory(&bin, &o, true));
        let (servers, rps) = if o.smoke {
            (200, 100.0)
        } else {
            (o.gmond_servers, o.xml_rps)
        };
        let sustain = if o.smoke {
            Duration::from_secs(6)
        } else {
            o.sustain
        };
        let t = Instant::now();
        report.xml = Some(xml::run(&bin, servers, rps, sustain));
        println!("load: xml took {:.1} s", t.elapsed().as_secs_f64());
    }
    if o.runs("gmond") {
        let e = e2e::run(
            &bin,
            &e2e::E2eOptions {
                servers: o.gmond_servers,
                smoke: o.smoke,
                ceiling: o.ceiling,
                sustain: o.sustain,
                down: o.down,
            },
        );
        // gmond missing: the smoke and an explicit --only gmond fail;
        // the full run goes on without it, as for mpxstats and the chain.
        if !o.smoke && o.only.is_empty() && gmond::installed().is_err() {
            println!("load: gmond not installed; the gmond runs are skipped");
        } else {
            report.gmond = Some(e);
        }
    }
    report.print(&records);
    if o.smoke {
        report.check_smoke();
    }
}

// ---------------------------------------------------------------------------
// Records and the packets the gateway makes of them.

struct Records {
    /// Datagram text of each fixture.
    data: Vec<Vec<u8>>,
    /// Per fixture: reports as a server sends them over time, the same
    /// record with other numbers (same digit counts), sent in turn.
    variants: Vec<Vec<Vec<u8>>>,
    /// Per fixture: the steady-state packets of one report (values only).
    packets: Vec<Vec<Vec<u8>>>,
    /// Per fixture: the name of its last value packet (a record's completion).
    last_name: Vec<String>,
    /// `mpxstats -f flat` lines of each fixture.
    flat_lines: Vec<usize>,
    /// Per fixture: where the digits of the `tod` attribute lie (the same
    /// in every variant), and their number.
    tod_at: Vec<std::ops::Range<usize>>,
    tod_base: Vec<u64>,
    /// Per fixture: the last value packet's value minus the report's
    /// sequence number (the last metric is uptime, tod - tos, and each
    /// report's tod is its fixture's plus its number): how the sink tells
    /// which report of a server a completion belongs to.
    seq_offset: Vec<i64>,
    /// The sequence number the next [`offer`] starts at (each report of a
    /// server has a higher one than the last, across runs).
    next_seq: AtomicU64,
    /// Server i sends fixture `i % FIXTURES.len()` from `server_ip(i)`.
    servers: usize,
}

/// Reports per fixture with different numbers.
const VARIANTS: u64 = 16;

/// `record` with every element value's digits replaced by others of the
/// same count (no leading zero): what the next report of a server looks like.
fn vary(record: &[u8], seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(record.len());
    let mut n = seed.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut i = 0;
    while i < record.len() {
        let b = record[i];
        if b.is_ascii_digit() && out.last() == Some(&b'>') {
            let start = i;
            while i < record.len() && record[i].is_ascii_digit() {
                i += 1;
            }
            for k in 0..i - start {
                n ^= n << 13;
                n ^= n >> 7;
                n ^= n << 17;
                let digit = (n % 10) as u8;
                let digit = if k == 0 && i - start > 1 {
                    1 + digit % 9
                } else {
                    digit
                };
                out.push(b'0' + digit);
            }
            continue;
        }
        out.push(b);
        i += 1;
    }
    out
}

/// The digits of the `tod="..."` attribute of a record.
fn tod_digits(record: &[u8]) -> Option<std::ops::Range<usize>> {
    let key = b" tod=\"";
    let start = record.windows(key.len()).position(|w| w == key)? + key.len();
    let len = record[start..].iter().position(|b| !b.is_ascii_digit())?;
    (len > 0 && record.get(start + len) == Some(&b'"')).then_some(start..start + len)
}

fn server_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 10 + (i >> 16) as u8, (i >> 8) as u8, i as u8)
}

impl Records {
    fn load(servers: usize) -> Records {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/records");
        let settings = validate(
            FileConfig::default(),
            "load".into(),
            &Overrides {
                send: vec!["127.0.0.1:9".into()],
                ..Default::default()
            },
        )
        .expect("default settings");
        let counters = Counters::default();
        let mut events = Events::new(&counters, Duration::from_secs(3600));
        let mut r = Records {
            data: Vec::new(),
            variants: Vec::new(),
            packets: Vec::new(),
            last_name: Vec::new(),
            flat_lines: Vec::new(),
            tod_at: Vec::new(),
            tod_base: Vec::new(),
            seq_offset: Vec::new(),
            next_seq: AtomicU64::new(0),
            servers,
        };
        for name in FIXTURES {
            let data = std::fs::read(dir.join(format!("{name}.xml"))).expect("fixture");
            let flat = std::fs::read_to_string(dir.join(format!("{name}.flat"))).expect("flat");
            let mut pipeline = Pipeline::new(&settings);
            let from = SocketAddr::from((server_ip(0), 40000));
            let t0 = Instant::now();
            pipeline.encode(&data, from, t0, &settings, &mut events);
            // Reports 100 ms apart, as in the runs: the second is steady state.
            pipeline.encode(
                &data,
                from,
                t0 + Duration::from_millis(100),
                &settings,
                &mut events,
            );
            let packets: Vec<Vec<u8>> = pipeline.packets().map(<[u8]>::to_vec).collect();
            let last = packets
                .iter()
                .rev()
                .find_map(|p| match xdr::decode(p) {
                    Ok(Packet::Value { id, .. }) => Some(id.name.into_owned()),
                    _ => None,
                })
                .expect("a value packet");
            r.variants
                .push((0..VARIANTS).map(|seed| vary(&data, seed)).collect());
            let tod_at = tod_digits(&data).unwrap_or_else(|| panic!("{name}: no tod attribute"));
            r.tod_base.push(
                std::str::from_utf8(&data[tod_at.clone()])
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .expect("tod"),
            );
            assert!(
                r.variants[r.variants.len() - 1]
                    .iter()
                    .all(|v| tod_digits(v) == Some(tod_at.clone())),
                "{name}: the variants moved tod"
            );
            r.tod_at.push(tod_at);
            r.data.push(data);
            r.packets.push(packets);
            r.last_name.push(last);
            r.flat_lines.push(flat.lines().count());
            let fixture = r.data.len() - 1;
            r.seq_offset.push(r.find_seq_offset(fixture, &settings));
        }
        r
    }

    /// Report `seq` of `fixture` (variant `variant`) with its tod stamped,
    /// into `buf`.
    fn stamp(&self, fixture: usize, variant: usize, seq: u64, buf: &mut Vec<u8>) {
        let variants = &self.variants[fixture];
        buf.clear();
        buf.extend_from_slice(&variants[variant % variants.len()]);
        let at = self.tod_at[fixture].clone();
        let mut tod = self.tod_base[fixture] + seq;
        for b in buf[at].iter_mut().rev() {
            *b = b'0' + (tod % 10) as u8;
            tod /= 10;
        }
        assert_eq!(tod, 0, "tod outgrew its digits");
    }

    /// The value of `fixture`'s last value packet minus the report's
    /// sequence number, checked over a few reports: the sink relies on it.
    fn find_seq_offset(&self, fixture: usize, settings: &Settings) -> i64 {
        let counters = Counters::default();
        let mut events = Events::new(&counters, Duration::from_secs(3600));
        let mut pipeline = Pipeline::new(settings);
        let from = SocketAddr::from((server_ip(0), 40000));
        let t0 = Instant::now();
        let mut buf = Vec::new();
        let mut offset = None;
        for (k, seq) in [0u64, 1, 2, 7, 1000].into_iter().enumerate() {
            self.stamp(fixture, k, seq, &mut buf);
            pipeline.encode(
                &buf,
                from,
                t0 + Duration::from_millis(100 * k as u64),
                settings,
                &mut events,
            );
            let last = pipeline
                .packets()
                .filter_map(|p| match xdr::decode(p) {
                    Ok(Packet::Value { id, value, .. }) => {
                        Some((id.name.into_owned(), value.to_string()))
                    }
                    _ => None,
                })
                .last()
                .expect("a value packet");
            assert_eq!(last.0, self.last_name[fixture], "{}", FIXTURES[fixture]);
            let v: i64 = last.1.parse().unwrap_or_else(|_| {
                panic!(
                    "{}: last value {:?} ({}) is not a number",
                    FIXTURES[fixture], last.1, last.0
                )
            });
            let o = v - seq as i64;
            assert!(
                offset.is_none_or(|x| x == o),
                "{}: the last value packet ({}) does not follow tod, so the sink cannot \
                 tell reports apart",
                FIXTURES[fixture],
                last.0
            );
            offset = Some(o);
        }
        offset.expect("offset")
    }

    fn fixture_of(&self, server: usize) -> usize {
        server % FIXTURES.len()
    }

    fn packets_per_round(&self) -> usize {
        self.packets.iter().map(Vec::len).sum()
    }

    fn packets_per_record(&self) -> f64 {
        self.packets_per_round() as f64 / FIXTURES.len() as f64
    }

    /// Value packets (133) a steady report makes, averaged over the servers.
    fn value_packets_per_record(&self) -> f64 {
        let per_fixture: Vec<usize> = self
            .packets
            .iter()
            .map(|ps| {
                ps.iter()
                    .filter(|p| p.get(..4) == Some(&133u32.to_be_bytes()))
                    .count()
            })
            .collect();
        let n = self.servers.max(1);
        (0..n)
            .map(|s| per_fixture[self.fixture_of(s)])
            .sum::<usize>() as f64
            / n as f64
    }

    fn flat_lines_per_record(&self) -> f64 {
        self.flat_lines.iter().sum::<usize>() as f64 / FIXTURES.len() as f64
    }

    /// One socket per simulated server, bound to its own address.
    fn sockets(&self) -> Vec<UdpSocket> {
        (0..self.servers)
            .map(|i| UdpSocket::bind((server_ip(i), 0)).expect("bind a 127.x address"))
            .collect()
    }
}

// ---------------------------------------------------------------------------
// The sink: counts packets, notes when each record's last value arrived.

/// How the sink waits for packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SinkMode {
    /// Asleep in recv(): woken by each packet, at once. For latency.
    Blocking,
    /// Naps of [`POLL`] when its queue is empty: a sink asleep in recv()
    /// is woken per packet, and on this machine the sender pays for the
    /// wakeup, which would understate what the sender can do. For throughput.
    Polled,
}

/// How long the sink sleeps when its queue is empty.
const POLL: Duration = Duration::from_micros(50);

#[derive(Default)]
struct SinkCounts {
    packets: AtomicU64,
    values: AtomicU64,
    metadata: AtomicU64,
    /// Records whose last value packet arrived.
    completed: AtomicU64,
    /// Records whose last value packet did not arrive, but a later
    /// record's of the same server did (replaced in the gateway's send
    /// queue, or dropped before it).
    superseded: AtomicU64,
}

/// Records sent and not yet completed, per server: (sequence number, send
/// time), oldest first.
type Pending = Vec<Mutex<VecDeque<(u64, Instant)>>>;

struct Sink {
    socket: UdpSocket,
    counts: Arc<SinkCounts>,
    /// Records not yet completed, per server.
    pending: Arc<Pending>,
    latencies: Arc<Mutex<Vec<u32>>>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Sink {
    fn start(records: &Records, mode: SinkMode) -> Sink {
        let socket = big_buffers(UdpSocket::bind("127.0.0.1:0").expect("sink"));
        let counts = Arc::new(SinkCounts::default());
        let pending: Arc<Pending> =
            Arc::new((0..records.servers).map(|_| Mutex::default()).collect());
        let fixture_of: Vec<usize> = (0..records.servers)
            .map(|s| records.fixture_of(s))
            .collect();
        let seq_offset = records.seq_offset.clone();
        let latencies = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let server_of: HashMap<String, usize> = (0..records.servers)
            .map(|i| (server_ip(i).to_string(), i))
            .collect();
        let last_names: Vec<Vec<u8>> = records
            .last_name
            .iter()
            .map(|n| n.as_bytes().to_vec())
            .collect();
        let thread = {
            let (socket, counts, pending, latencies, stop) = (
                socket.try_clone().expect("clone"),
                counts.clone(),
                pending.clone(),
                latencies.clone(),
                stop.clone(),
            );
            match mode {
                SinkMode::Polled => socket.set_nonblocking(true).expect("non-blocking"),
                SinkMode::Blocking => socket
                    .set_read_timeout(Some(Duration::from_millis(50)))
                    .expect("timeout"),
            }
            thread::spawn(move || {
                let mut buf = [0u8; 2048];
                while !stop.load(Ordering::Relaxed) {
                    let Ok(n) = socket.recv(&mut buf) else {
                        if mode == SinkMode::Polled {
                            thread::sleep(POLL);
                        }
                        continue;
                    };
                    let now = Instant::now();
                    counts.packets.fetch_add(1, Ordering::Relaxed);
                    let Some((id, host, name)) = header(&buf[..n]) else {
                        continue;
                    };
                    match id {
                        128 => {
                            counts.metadata.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        133 => counts.values.fetch_add(1, Ordering::Relaxed),
                        _ => continue,
                    };
                    if !last_names.iter().any(|l| l.as_slice() == name) {
                        continue;
                    }
                    let ip = host.split(|&b| b == b':').next().unwrap_or(b"");
                    let Some(&server) = std::str::from_utf8(ip)
                        .ok()
                        .and_then(|ip| server_of.get(ip))
                    else {
                        continue;
                    };
                    // Which report this is: its value (uptime) follows the
                    // report's stamped tod.
                    let Some(seq) = value_of(&buf[..n])
                        .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<i64>().ok())
                        .and_then(|v| u64::try_from(v - seq_offset[fixture_of[server]]).ok())
                    else {
                        continue;
                    };
                    // A (host, metric) leaves the gateway in order: the
                    // server's earlier records still pending will never
                    // complete (their last value was replaced by this one).
                    let mut q = pending[server].lock().expect("pending");
                    let mut superseded = 0;
                    while q.front().is_some_and(|&(s, _)| s < seq) {
                        q.pop_front();
                        superseded += 1;
                    }
                    counts.superseded.fetch_add(superseded, Ordering::Relaxed);
                    // Not pending: a record from before the measured window.
                    if let Some(&(s, sent)) = q.front()
                        && s == seq
                    {
                        q.pop_front();
                        drop(q);
                        counts.completed.fetch_add(1, Ordering::Relaxed);
                        let us = now.duration_since(sent).as_micros().min(u32::MAX as u128);
                        latencies.lock().expect("latencies").push(us as u32);
                    }
                }
            })
        };
        Sink {
            socket,
            counts,
            pending,
            latencies,
            stop,
            thread: Some(thread),
        }
    }

    fn port(&self) -> u16 {
        self.socket.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// Waits until no packet has arrived for `quiet`.
    fn settle(&self, quiet: Duration) {
        let mut last = self.counts.packets.load(Ordering::Relaxed);
        loop {
            thread::sleep(quiet);
            let now = self.counts.packets.load(Ordering::Relaxed);
            if now == last {
                return;
            }
            last = now;
        }
    }

    /// Records sent and neither completed nor superseded.
    fn outstanding(&self) -> u64 {
        self.pending
            .iter()
            .map(|q| q.lock().expect("pending").len() as u64)
            .sum()
    }

    fn reset(&self) {
        for c in [
            &self.counts.packets,
            &self.counts.values,
            &self.counts.metadata,
            &self.counts.completed,
            &self.counts.superseded,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        for q in self.pending.iter() {
            q.lock().expect("pending").clear();
        }
        self.latencies.lock().expect("latencies").clear();
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// (packet id, host, metric name) of a Ganglia packet, borrowed.
fn header(p: &[u8]) -> Option<(u32, &[u8], &[u8])> {
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(p.get(at..at + 4)?.try_into().ok()?))
    };
    let string = |at: usize| -> Option<(&[u8], usize)> {
        let len = word(at)? as usize;
        let s = p.get(at + 4..at + 4 + len)?;
        Some((s, at + 4 + len.div_ceil(4) * 4))
    };
    let id = word(0)?;
    let (host, at) = string(4)?;
    let (name, _) = string(at)?;
    Some((id, host, name))
}

/// The value string of a string value packet (id 133): after the host,
/// the name, the spoof flag and the format string.
fn value_of(p: &[u8]) -> Option<&[u8]> {
    let word = |at: usize| -> Option<usize> {
        Some(u32::from_be_bytes(p.get(at..at + 4)?.try_into().ok()?) as usize)
    };
    let skip = |at: usize| -> Option<usize> { Some(at + 4 + word(at)?.div_ceil(4) * 4) };
    let at = skip(skip(4)?)? + 4; // host, name, spoof
    let at = skip(at)?; // format
    let len = word(at)?;
    p.get(at + 4..at + 4 + len)
}

fn big_buffers(socket: UdpSocket) -> UdpSocket {
    let s = socket2::SockRef::from(&socket);
    let _ = s.set_recv_buffer_size(32 << 20);
    let _ = s.set_send_buffer_size(4 << 20);
    socket
}

/// Socket inodes of process `pid` (from its fd links `socket:[N]`).
fn socket_inodes(pid: u32) -> std::collections::HashSet<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect()
}

/// Rows of /proc/net/udp and /proc/net/udp6 for local `port`: of process
/// `pid`'s sockets, or (None) bound to 127.0.0.1, so that another address's
/// socket that happens to have the same port number is not counted.
fn udp_rows(pid: Option<u32>, port: u16) -> Vec<Vec<String>> {
    let suffix = format!(":{port:04X}");
    let own = format!("0100007F:{port:04X}");
    let inodes = pid.map(socket_inodes);
    ["/proc/net/udp", "/proc/net/udp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|t| {
            t.lines()
                .skip(1)
                .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
                .filter(|c| match &inodes {
                    Some(set) => {
                        c.get(1).is_some_and(|a| a.ends_with(&suffix))
                            && c.get(9).is_some_and(|i| set.contains(i))
                    }
                    None => c.get(1).is_some_and(|a| *a == own),
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Drops column (the last) summed over `rows`.
fn drops_of(rows: &[Vec<String>]) -> u64 {
    rows.iter()
        .filter_map(|c| c.last()?.parse::<u64>().ok())
        .sum()
}

/// Receive queue bytes summed over `rows`.
fn rx_of(rows: &[Vec<String>]) -> u64 {
    rows.iter()
        .filter_map(|c| u64::from_str_radix(c.get(4)?.split(':').nth(1)?, 16).ok())
        .sum()
}

/// Datagrams the kernel dropped at our own socket on 127.0.0.1:`port`.
fn kernel_drops(port: u16) -> u64 {
    drops_of(&udp_rows(None, port))
}

// ---------------------------------------------------------------------------
// Runs.

#[derive(Clone, Debug, Default)]
struct Run {
    label: String,
    offered_rps: Option<f64>,
    sent: u64,
    achieved_rps: f64,
    packets_ps: f64,
    completed: u64,
    socket_drops: u64,
    /// Packets dropped at the sink's own socket (would blur "lost").
    sink_drops: u64,
    /// Packets the gateway could not send (its send_errors counter).
    send_errors: Option<u64>,
    /// Records lost: serve runs, their last value never arrived and no
    /// later record of the server did; other runs, sent minus handled.
    not_forwarded: u64,
    /// Serve runs: records whose last value never arrived but a later
    /// record's of the same server did (only its newer value was sent).
    superseded: Option<u64>,
    /// Serve runs: the gateway's `packets_conflated` (packets replaced in
    /// its send queue by newer ones of the same metric) over the measured
    /// run: its final counters minus its last line before the run.
    conflated: Option<u64>,
    p50_us: Option<u32>,
    p99_us: Option<u32>,
    cpu_pct: Option<f64>,
    /// The gateway's CPU time per forwarded record.
    cpu_us_per_record: Option<f64>,
    peak_rss_kib: Option<u64>,
}

/// (a) The loopback limit: the value packets of the records, straight to
/// the sink, for the run's duration.
fn raw(records: &Records, o: &Options, mmsg: bool) -> Run {
    // The sink only counts (recvmmsg, nothing parsed): the loopback limit,
    // not a parser's.
    let sink = CountSink::start();
    let socket = big_buffers(UdpSocket::bind("127.0.0.1:0").expect("raw sender"));
    socket
        .connect(("127.0.0.1", sink.port()))
        .expect("connect to the sink");
    let all: Vec<Vec<u8>> = records.packets.iter().flatten().cloned().collect();
    let t0 = Instant::now();
    let mut sent = 0u64;
    if mmsg {
        // C speed: sendmmsg from headers built once, 64 packets a call.
        let mut sender = MmsgSender::new(&socket, &all);
        while t0.elapsed() < o.duration {
            sent += sender.send(64) as u64;
        }
    } else {
        while t0.elapsed() < o.duration {
            for p in &all {
                if socket.send(p).is_ok() {
                    sent += 1;
                }
            }
        }
    }
    let elapsed = t0.elapsed();
    sink.settle(Duration::from_millis(200));
    let got = sink.count();
    Run {
        label: if mmsg {
            "raw loopback, sendmmsg (64/call)"
        } else {
            "raw loopback, send"
        }
        .into(),
        sent,
        packets_ps: got as f64 / elapsed.as_secs_f64(),
        achieved_rps: got as f64 / elapsed.as_secs_f64() / records.packets_per_record(),
        sink_drops: kernel_drops(sink.port()),
        ..Run::default()
    }
}

/// A running `xrd2ganglia serve`, its log read as it comes.
struct Gateway {
    child: Child,
    port: u16,
    dir: Scratch,
    log: GwLog,
    exited: bool,
}

/// A counters line of the gateway's log (`counters: k=v ...`, also the
/// final `stopped; counters: ...`): when it arrived and its pairs. Keys the
/// gateway does not log are absent (unknown), not zero.
#[derive(Clone, Debug)]
struct LogLine {
    at: Instant,
    stopped: bool,
    pairs: HashMap<String, String>,
}

impl LogLine {
    fn get(&self, key: &str) -> Option<u64> {
        self.pairs.get(key)?.parse().ok()
    }

    /// Parses a log line; None if it is not a counters line.
    fn parse(line: &str, at: Instant) -> Option<LogLine> {
        let line = strip_ansi(line);
        let (head, rest) = line.split_once("counters:")?;
        Some(LogLine {
            at,
            stopped: head.contains("stopped"),
            pairs: rest
                .split_whitespace()
                .filter_map(|t| t.split_once('='))
                .map(|(k, v)| (k.to_string(), v.trim_end_matches(',').to_string()))
                .collect(),
        })
    }
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ ... final byte in @..~
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) && c != '[' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The gateway's counters lines, stamped on arrival by a reader thread
/// (which also copies the whole log to a file).
#[derive(Clone, Default)]
struct GwLog(Arc<Mutex<Vec<LogLine>>>);

impl GwLog {
    fn start(stderr: std::process::ChildStderr, file: PathBuf) -> GwLog {
        let log = GwLog::default();
        let lines = log.0.clone();
        thread::spawn(move || {
            use std::io::{BufRead, Write};
            let mut out = std::fs::File::create(file).ok();
            let mut reader = std::io::BufReader::new(stderr);
            let mut buf = Vec::new();
            while reader.read_until(b'\n', &mut buf).is_ok_and(|n| n > 0) {
                let at = Instant::now();
                if let Some(f) = out.as_mut() {
                    let _ = f.write_all(&buf);
                }
                if let Some(l) = LogLine::parse(&String::from_utf8_lossy(&buf), at) {
                    lines.lock().unwrap_or_else(|e| e.into_inner()).push(l);
                }
                buf.clear();
            }
        });
        log
    }

    fn all(&self) -> Vec<LogLine> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Lines that arrived after `t`.
    fn since(&self, t: Instant) -> Vec<LogLine> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|l| l.at > t)
            .cloned()
            .collect()
    }

    fn last(&self) -> Option<LogLine> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last()
            .cloned()
    }
}

impl Gateway {
    /// The gateway of the throughput runs: sending to the sink unpaced,
    /// its counters logged every `stats_interval` seconds (0: at stop only).
    fn start(bin: &Path, sink_port: u16, stats_interval: u32) -> Gateway {
        Self::start_with(bin, sink_port, stats_interval, "")
    }

    /// Like `start`, with `extra` top-level settings.
    fn start_with(bin: &Path, sink_port: u16, stats_interval: u32, extra: &str) -> Gateway {
        Gateway::start_config(bin, |_, port| {
            format!(
                "listen = [\"127.0.0.1:{port}\"]\n\
                 metadata_interval = 1800\nstats_interval = {stats_interval}\nself_metrics_interval = 0\n\
                 max_send_rate = 0\nrecv_buffer = 33554432\nmax_sources = 20000\nstate_file = \"\"\n{extra}\n\
                 [[channel]]\nhost = \"127.0.0.1\"\nport = {sink_port}\n"
            )
        })
    }

    /// `serve` with the config `config(its temp dir, its listen port)`.
    fn start_config(bin: &Path, config: impl FnOnce(&Path, u16) -> String) -> Gateway {
        let dir = Scratch::new("gw");
        let port = free_port();
        let conf = dir.0.join("xrd2ganglia.toml");
        std::fs::write(&conf, config(&dir.0, port)).expect("config");
        let mut child = Command::new(bin)
            .args(["serve", "--config"])
            .arg(&conf)
            .args(["--log-level", "info"])
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start xrd2ganglia serve");
        let stderr = child.stderr.take().expect("piped stderr");
        let log = GwLog::start(stderr, dir.0.join("log"));
        let gw = Gateway {
            port,
            dir,
            log,
            exited: false,
            child,
        };
        if !listening(gw.pid(), port) {
            let log = std::fs::read_to_string(gw.dir.0.join("log")).unwrap_or_default();
            eprintln!("load: xrd2ganglia serve did not start:\n{log}");
            std::process::exit(1);
        }
        gw
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// Datagrams the kernel dropped at the gateway's listening socket.
    fn socket_drops(&self) -> u64 {
        drops_of(&udp_rows(Some(self.pid()), self.port))
    }

    fn rx_queue(&self) -> u64 {
        rx_of(&udp_rows(Some(self.pid()), self.port))
    }

    /// SIGTERM by pid; the exit status (None: still running after
    /// `timeout`, then killed) and how long it took.
    fn terminate(&mut self, timeout: Duration) -> (Option<std::process::ExitStatus>, Duration) {
        let t0 = Instant::now();
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.pid() as i32, libc::SIGTERM) };
        let status = wait_timeout(&mut self.child, timeout);
        let took = t0.elapsed();
        if status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        self.exited = true;
        // Let the reader see the last lines.
        thread::sleep(Duration::from_millis(50));
        (status, took)
    }

    /// Stops the gateway (SIGTERM) and returns its final counters line.
    fn stop(mut self) -> Option<LogLine> {
        self.terminate(Duration::from_secs(30));
        self.log.all().into_iter().rev().find(|l| l.stopped)
    }

    fn cpu_ticks(&self) -> u64 {
        cpu_ticks(self.pid())
    }

    fn status_kib(&self, key: &str) -> u64 {
        proc_status(self.pid(), key)
    }
}

/// Pids whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            // After the command name: state, then the parent's pid.
            stat.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<u32>().ok())
                == Some(pid)
        })
        .collect()
}

/// User plus system CPU time of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name: utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if !self.exited {
            self.terminate(Duration::from_secs(10));
        }
    }
}

fn proc_status(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// Sends records round robin over the servers at `rate` records/s (None: as
/// fast as possible) for `duration`, noting each one's sequence number and
/// send time for the sink. Each report carries its sequence number in its
/// tod (base + number, rising from one call to the next).
fn offer(
    records: &Records,
    sockets: &[UdpSocket],
    to: SocketAddr,
    rate: Option<u64>,
    duration: Duration,
    pending: Option<&Pending>,
) -> u64 {
    let t0 = Instant::now();
    let first = records.next_seq.load(Ordering::Relaxed);
    let mut buf = Vec::with_capacity(4096);
    let mut i = 0u64;
    loop {
        let now = Instant::now();
        if now.duration_since(t0) >= duration {
            let rounds = i.div_ceil(sockets.len() as u64);
            records.next_seq.store(first + rounds, Ordering::Relaxed);
            return i;
        }
        if let Some(rate) = rate {
            let due = t0 + Duration::from_secs_f64(i as f64 / rate as f64);
            if due > now {
                let wait = due - now;
                if wait > Duration::from_micros(200) {
                    thread::sleep(wait - Duration::from_micros(100));
                }
                continue;
            }
        }
        let server = (i as usize) % sockets.len();
        let round = i / sockets.len() as u64;
        let seq = first + round;
        records.stamp(records.fixture_of(server), round as usize, seq, &mut buf);
        // Pending before it is sent (the sink may see its packets first).
        if let Some(p) = pending {
            p[server]
                .lock()
                .expect("pending")
                .push_back((seq, Instant::now()));
        }
        if sockets[server].send_to(&buf, to).is_ok() {
            i += 1;
        } else if let Some(p) = pending {
            // Not sent: sent again next turn, pending once.
            let mut q = p[server].lock().expect("pending");
            if q.back().is_some_and(|&(s, _)| s == seq) {
                q.pop_back();
            }
        }
    }
}

/// (b) `serve` forwarding every value, at `rate` records/s or flat out.
fn serve(
    bin: &Path,
    records: &Records,
    o: &Options,
    rate: Option<u64>,
    label: &str,
    mode: SinkMode,
) -> Run {
    let sink = Sink::start(records, mode);
    // Counters every second: the last line before the measured window is
    // the baseline of its packets_conflated (the warm-up's are not its).
    let gw = Gateway::start(bin, sink.port(), 1);
    let to = gw.addr();
    let sockets = records.sockets();
    // Warm up: every server's first record (metadata) and a second one.
    for _ in 0..2 {
        offer(
            records,
            &sockets,
            to,
            Some(2000),
            Duration::from_secs_f64(records.servers as f64 / 2000.0),
            None,
        );
    }
    sink.settle(Duration::from_millis(300));
    sink.reset();
    // The gateway is idle: its next counters line is the baseline.
    let settled = Instant::now();
    let baseline = loop {
        if let Some(l) = gw.log.since(settled).into_iter().next() {
            break Some(l);
        }
        if settled.elapsed() > Duration::from_secs(3) {
            break None;
        }
        thread::sleep(Duration::from_millis(20));
    };
    let drops_before = gw.socket_drops();
    let cpu_before = gw.cpu_ticks();
    let t0 = Instant::now();
    let sent = offer(records, &sockets, to, rate, o.duration, Some(&sink.pending));
    let elapsed = t0.elapsed();
    // Rates over the offered window; loss once the gateway has caught up.
    let in_window = (
        sink.counts.completed.load(Ordering::Relaxed),
        sink.counts.packets.load(Ordering::Relaxed),
    );
    sink.settle(Duration::from_millis(300));
    let cpu = (gw.cpu_ticks() - cpu_before) as f64 / clock_ticks();
    let (socket_drops, peak_rss) = (gw.socket_drops() - drops_before, gw.status_kib("VmHWM:"));
    let last = gw.stop();
    let counter = |k: &str| last.as_ref().and_then(|l| l.get(k));
    let completed = sink.counts.completed.load(Ordering::Relaxed);
    let superseded = sink.counts.superseded.load(Ordering::Relaxed);
    let lost = sink.outstanding();
    let mut lat = sink.latencies.lock().expect("latencies").clone();
    lat.sort_unstable();
    let pct = |p: f64| (!lat.is_empty()).then(|| lat[((lat.len() - 1) as f64 * p) as usize]);
    Run {
        label: label.into(),
        offered_rps: Some(sent as f64 / elapsed.as_secs_f64()),
        sent,
        achieved_rps: in_window.0 as f64 / elapsed.as_secs_f64(),
        packets_ps: in_window.1 as f64 / elapsed.as_secs_f64(),
        completed,
        socket_drops,
        sink_drops: kernel_drops(sink.port()),
        send_errors: counter("send_errors"),
        not_forwarded: lost,
        superseded: Some(superseded),
        conflated: counter("packets_conflated").map(|c| {
            c.saturating_sub(
                baseline
                    .as_ref()
                    .and_then(|l| l.get("packets_conflated"))
                    .unwrap_or(0),
            )
        }),
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        cpu_pct: Some(100.0 * cpu / elapsed.as_secs_f64()),
        // Per record the gateway read: a superseded one was parsed and
        // queued as much as one that arrived.
        cpu_us_per_record: (sent > socket_drops).then(|| cpu * 1e6 / (sent - socket_drops) as f64),
        peak_rss_kib: Some(peak_rss),
    }
}

/// mpxstats (XRootD's or ours) receiving records flat out and writing flat
/// text to /dev/null: records handled = sent - dropped at its socket - left
/// in its queue (no reader of its output competes for the CPU).
fn mpxstats(bin: &Path, pre: &[&str], records: &Records, o: &Options) -> Option<Run> {
    if !bin.exists() {
        println!("load: {} not installed; its run is skipped", bin.display());
        return None;
    }
    let port = free_port();
    let mut child = Command::new(bin)
        .args(pre)
        .args(["-p", &port.to_string(), "-f", "flat"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let pid = child.id();
    wait_for_port(pid, port);
    let to = SocketAddr::from(([127, 0, 0, 1], port));
    let sockets = records.sockets();
    let drops = || drops_of(&udp_rows(Some(pid), port));
    let (drops_before, cpu_before) = (drops(), cpu_ticks(pid));
    let t0 = Instant::now();
    let sent = offer(records, &sockets, to, None, o.duration, None);
    let elapsed = t0.elapsed();
    let dropped = drops() - drops_before;
    let queued = rx_of(&udp_rows(Some(pid), port));
    let cpu_s = (cpu_ticks(child.id()) - cpu_before) as f64 / clock_ticks();
    let mean_size = records.data.iter().map(Vec::len).sum::<usize>() / records.data.len();
    let done = sent.saturating_sub(dropped + queued / mean_size.max(1) as u64);
    let _ = child.kill();
    let _ = child.wait();
    Some(Run {
        label: format!(
            "{} {}-f flat",
            bin.file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            pre.iter().map(|p| format!("{p} ")).collect::<String>()
        ),
        offered_rps: Some(sent as f64 / elapsed.as_secs_f64()),
        sent,
        achieved_rps: done as f64 / elapsed.as_secs_f64(),
        completed: done,
        socket_drops: dropped,
        not_forwarded: sent.saturating_sub(done),
        cpu_pct: Some(100.0 * cpu_s / elapsed.as_secs_f64()),
        ..Run::default()
    })
}

/// The chain sites run today: `mpxstats -f flat` piped into Perl that forks
/// the real gmetric once per value, sending to the sink.
fn chain(records: &Records, o: &Options) -> Option<Run> {
    for tool in ["/usr/bin/mpxstats", "/usr/bin/gmetric", "/usr/bin/perl"] {
        if !Path::new(tool).exists() {
            println!("load: {tool} not installed; the chain run is skipped");
            return None;
        }
    }
    let sink = Sink::start(records, SinkMode::Blocking);
    let dir = Scratch::new("chain");
    let conf = dir.0.join("gmond.conf");
    std::fs::write(
        &conf,
        format!(
            "udp_send_channel {{\n  host = 127.0.0.1\n  port = {}\n}}\n",
            sink.port()
        ),
    )
    .expect("gmond.conf");
    // What such scripts do: one gmetric per "name value" line, spoofing the
    // sender (here the record's src), text as string, numbers as double.
    let script = dir.0.join("to-gmetric.pl");
    std::fs::write(
        &script,
        r#"$| = 1; my ($conf) = @ARGV; my $host = "unknown";
while (my $line = <STDIN>) {
  chomp $line; my ($name, $value) = split(/ /, $line, 2);
  next unless defined $value;
  if ($name eq "src") { ($host) = split(/:/, $value); }
  my $type = ($value =~ /^-?[0-9.]+$/) ? "double" : "string";
  system("/usr/bin/gmetric", "-c", $conf, "-n", "xrootd.$name", "-v", $value, "-t", $type, "-S", "127.0.0.1:$host");
}
"#,
    )
    .expect("script");
    let port = free_port();
    let mut mpx = Command::new("/usr/bin/mpxstats")
        .args(["-p", &port.to_string(), "-f", "flat"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let perl = Command::new("/usr/bin/perl")
        .arg(&script)
        .arg(&conf)
        .stdin(mpx.stdout.take()?)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok();
    wait_for_port(mpx.id(), port);
    let to = SocketAddr::from(([127, 0, 0, 1], port));
    let sockets = &records.sockets()[..1];
    // Keep the chain busy for the whole run: a few records up front.
    let sent = offer(
        records,
        sockets,
        to,
        Some(20),
        Duration::from_millis(250),
        None,
    );
    let duration = o.duration.max(Duration::from_secs(3));
    thread::sleep(Duration::from_millis(500));
    let start = sink.counts.values.load(Ordering::Relaxed);
    let t0 = Instant::now();
    thread::sleep(duration);
    let values = sink.counts.values.load(Ordering::Relaxed) - start;
    let elapsed = t0.elapsed();
    let _ = mpx.kill();
    let _ = mpx.wait();
    if let Some(mut p) = perl {
        // Stop perl so it forks no more, then end the gmetric it runs (its
        // children, by pid) and perl itself: nothing outlives the tool.
        // SAFETY: kill(2) on our own child's pid and on its children's.
        unsafe { libc::kill(p.id() as i32, libc::SIGSTOP) };
        for child in children_of(p.id()) {
            unsafe { libc::kill(child as i32, libc::SIGKILL) };
        }
        let _ = p.kill();
        let _ = p.wait();
    }
    let values_ps = values as f64 / elapsed.as_secs_f64();
    Some(Run {
        label: "mpxstats | perl | gmetric per value".into(),
        sent,
        packets_ps: sink.counts.packets.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64(),
        achieved_rps: values_ps / records.flat_lines_per_record(),
        completed: values,
        ..Run::default()
    })
}

#[derive(Clone, Debug, Default)]
struct Memory {
    sources: usize,
    pairs: u64,
    rss_before_kib: u64,
    /// VmRSS once the gateway had read every datagram and its send queue
    /// was empty.
    rss_after_kib: u64,
    /// VmHWM then: the peak, send queue and receive bursts included.
    peak_kib: u64,
    /// Seconds from the last datagram sent to the gateway's counters
    /// showing everything read and `send_queue=0`; None: not within the
    /// timeout (the RSS was read anyway).
    drained_after: Option<f64>,
    /// With an XML port: one poll of the whole document once drained.
    poll: Option<DocPoll>,
}

/// One poll of the gateway's XML document.
#[derive(Clone, Debug, Default)]
struct DocPoll {
    bytes: usize,
    /// Connect to the last byte.
    secs: f64,
    /// VmHWM after it (the document is written in pieces: no copy of it).
    peak_kib: u64,
}

impl Memory {
    fn per_pair(&self, kib: u64) -> f64 {
        (kib.saturating_sub(self.rss_before_kib) * 1024) as f64 / self.pairs.max(1) as f64
    }

    /// Steady state: RSS growth per pair once the send queue is empty.
    fn bytes_per_pair(&self) -> f64 {
        self.per_pair(self.rss_after_kib)
    }

    /// Peak RSS growth per pair.
    fn peak_bytes_per_pair(&self) -> f64 {
        self.per_pair(self.peak_kib)
    }
}

/// Two reports of a loaded data server from each of `o.sources` sources
/// (the second leaves the source in steady state, its template made): RSS
/// growth per tracked (host, metric) pair.
fn memory(bin: &Path, o: &Options, xml: bool) -> Memory {
    let records = Records::load(1);
    let fixture = 1; // ds_loaded
    let per_source = records.packets[fixture].len() as u64 - 1; // minus the heartbeat
    let sink = UdpSocket::bind("127.0.0.1:0").expect("sink");
    // Nobody reads the sink: memory is the question, and the packets are
    // dropped by the kernel at the sink without slowing the gateway.
    // Counters every second: the run waits for `send_queue=0`.
    let xml_port = free_port();
    let extra = if xml {
        format!("xml_listen = [\"127.0.0.1:{xml_port}\"]")
    } else {
        String::new()
    };
    let sink_port = sink.local_addr().map(|a| a.port()).unwrap_or(9);
    let gw = Gateway::start_with(bin, sink_port, 1, &extra);
    let to = gw.addr();
    let t0 = Instant::now();
    let mut offered = 0u64;
    let reports = &records.variants[fixture][..2];
    // The first source grows the per-record buffers to size.
    let s = UdpSocket::bind((server_ip(0), 0)).expect("bind");
    for data in reports {
        offered += u64::from(s.send_to(data, to).is_ok());
    }
    thread::sleep(Duration::from_millis(300));
    let before = gw.status_kib("VmRSS:");
    for i in 1..=o.sources {
        let Ok(s) = UdpSocket::bind((server_ip(i), 0)) else {
            continue;
        };
        for data in reports {
            offered += u64::from(s.send_to(data, to).is_ok());
        }
        if i % 100 == 0 {
            // Let the gateway keep up, so every source is tracked.
            while gw.rx_queue() > 256 * 1024 {
                thread::sleep(Duration::from_millis(1));
            }
        }
    }
    let sent_at = Instant::now();
    while gw.rx_queue() > 0 {
        thread::sleep(Duration::from_millis(10));
    }
    // The send queue may still hold packets when the socket is empty: wait
    // for a counters line with every datagram read and `send_queue=0`
    // (and the next one the same).
    let drained = e2e::drained(&gw, t0, offered, Duration::from_secs(60));
    let (rss_after_kib, peak_kib) = (gw.status_kib("VmRSS:"), gw.status_kib("VmHWM:"));
    let poll = xml.then(|| {
        use std::io::Read;
        let t = Instant::now();
        let mut bytes = 0;
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", xml_port)) {
            let mut buf = vec![0u8; 1 << 16];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                bytes += n;
            }
        }
        DocPoll {
            bytes,
            secs: t.elapsed().as_secs_f64(),
            peak_kib: gw.status_kib("VmHWM:"),
        }
    });
    Memory {
        sources: o.sources,
        pairs: per_source * o.sources as u64,
        rss_before_kib: before,
        rss_after_kib,
        peak_kib,
        drained_after: drained.map(|t| t.saturating_duration_since(sent_at).as_secs_f64()),
        poll,
    }
}

// ---------------------------------------------------------------------------
// Report.

#[derive(Default)]
struct Report {
    raw_send: Option<Run>,
    raw_mmsg: Option<Run>,
    serve_max: Option<Run>,
    paced: Vec<Run>,
    mpxstats_theirs: Option<Run>,
    mpxstats_ours: Option<Run>,
    chain: Option<Run>,
    memory: Option<Memory>,
    gmond: Option<e2e::E2e>,
    /// The memory run again, with an XML port, and one poll of it.
    memory_xml: Option<Memory>,
    xml: Option<xml::XmlRun>,
}

impl Report {
    fn raw_best(&self) -> Option<f64> {
        [&self.raw_send, &self.raw_mmsg]
            .iter()
            .filter_map(|r| r.as_ref().map(|r| r.packets_ps))
            .reduce(f64::max)
    }

    /// The runs of the first table, in order.
    fn runs(&self) -> impl Iterator<Item = &Run> {
        [&self.raw_send, &self.raw_mmsg, &self.serve_max]
            .into_iter()
            .flatten()
            .chain(self.paced.iter())
            .chain(
                [&self.mpxstats_theirs, &self.mpxstats_ours, &self.chain]
                    .into_iter()
                    .flatten(),
            )
    }

    fn print(&self, records: &Records) {
        let opt = |v: Option<u32>| v.map(|v| format!("{v}")).unwrap_or_else(|| "-".into());
        if let (true, Some(e)) = (self.runs().next().is_none(), &self.gmond) {
            e.print();
            return;
        }
        println!();
        let some = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
        println!(
            "{:<42} {:>10} {:>10} {:>11} {:>8} {:>10} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} {:>9}",
            "run",
            "offered/s",
            "records/s",
            "packets/s",
            "lost",
            "superseded",
            "conflated",
            "drops",
            "sendfail",
            "sinkdrop",
            "p50 us",
            "p99 us",
            "cpu %",
            "peak KiB"
        );
        for r in self.runs() {
            println!(
                "{:<42} {:>10} {:>10.0} {:>11.0} {:>8} {:>10} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} {:>9}",
                r.label,
                r.offered_rps
                    .map(|v| format!("{v:.0}"))
                    .unwrap_or_else(|| "-".into()),
                r.achieved_rps,
                r.packets_ps,
                r.not_forwarded,
                some(r.superseded),
                some(r.conflated),
                r.socket_drops,
                some(r.send_errors),
                r.sink_drops,
                opt(r.p50_us),
                opt(r.p99_us),
                r.cpu_pct
                    .map(|v| format!("{v:.0}"))
                    .unwrap_or_else(|| "-".into()),
                some(r.peak_rss_kib),
            );
        }
        if self.serve_max.is_some() || !self.paced.is_empty() {
            for line in [
                "serve runs: lost: a record's last value packet never arrived, nor a later record's of its server",
                "            superseded: it never arrived but a later record's did (only newer values were sent)",
                "            conflated: the gateway's packets_conflated in the run (final minus before, warm-up excluded)",
                "            p50/p99: over the records that arrived",
            ] {
                println!("  {line}");
            }
        }
        println!();
        println!("ratios (targets in brackets):");
        if let (Some(raw), Some(s)) = (self.raw_best(), &self.serve_max) {
            println!(
                "  serve forwarded packets/s / raw loopback    {:>8.2}   [>= 0.80] (raw: counting sink, best of send and sendmmsg)",
                s.packets_ps / raw
            );
        }
        if let Some(us) = self.serve_max.as_ref().and_then(|s| s.cpu_us_per_record) {
            println!(
                "  serve flat out: gateway CPU per record read {:>6.1} us (arrived or superseded)",
                us
            );
        }
        if let (Some(theirs), Some(ours)) = (&self.mpxstats_theirs, &self.mpxstats_ours) {
            println!(
                "  receive+parse: our mpxstats / XRootD's      {:>8.2}   [>= 2]",
                ours.achieved_rps / theirs.achieved_rps.max(1e-9)
            );
        }
        if let (Some(c), Some(s)) = (&self.chain, &self.serve_max) {
            println!(
                "  serve records/s / mpxstats+gmetric chain   {:>8.0}   [>= 500] (chain: {:.1} values/s = {:.3} records/s)",
                s.achieved_rps / c.achieved_rps.max(1e-9),
                c.achieved_rps * records.flat_lines_per_record(),
                c.achieved_rps
            );
        }
        if let Some(r) = self
            .paced
            .iter()
            .find(|r| r.label == "serve at 1000 records/s")
        {
            println!(
                "  p99 latency at 1000 records/s              {:>8} us [< 1000]",
                opt(r.p99_us)
            );
        }
        if let Some(m) = &self.memory {
            println!(
                "  memory: {} sources x {} metrics = {} pairs; VmRSS before {} KiB; {}",
                m.sources,
                m.pairs / m.sources.max(1) as u64,
                m.pairs,
                m.rss_before_kib,
                match m.drained_after {
                    Some(s) => format!("all read and send_queue=0 {s:.1} s after the last send"),
                    None => "NOT drained within 60 s (send_queue not 0): RSS read anyway".into(),
                }
            );
            println!(
                "    steady (VmRSS, queue empty)   {:>8} KiB: {:>6.0} bytes per pair [< 300]",
                m.rss_after_kib,
                m.bytes_per_pair()
            );
            println!(
                "    peak (VmHWM)                  {:>8} KiB: {:>6.0} bytes per pair",
                m.peak_kib,
                m.peak_bytes_per_pair()
            );
        }
        if let Some(m) = &self.memory_xml {
            println!(
                "  memory with an XML port (last values kept for gmetad): {} pairs",
                m.pairs
            );
            println!(
                "    steady (VmRSS, queue empty)   {:>8} KiB: {:>6.0} bytes per pair [< 300]",
                m.rss_after_kib,
                m.bytes_per_pair()
            );
            if let Some(p) = &m.poll {
                println!(
                    "    one poll: {} bytes ({:.1} MB) in {:.2} s; VmHWM after it {} KiB ({:.0} bytes per pair)",
                    p.bytes,
                    p.bytes as f64 / 1e6,
                    p.secs,
                    p.peak_kib,
                    m.per_pair(p.peak_kib)
                );
            }
        }
        if let Some(e) = &self.gmond {
            e.print();
        }
        if let Some(x) = &self.xml {
            x.print();
        }
    }

    /// What the smoke pass must show: every part ran, no serve run lost a
    /// record (flat out, superseded ones are fine: that is overload), and
    /// at a low rate the gateway forwarded every record, none superseded
    /// (the send queue must not hold values back without overload).
    fn check_smoke(&self) {
        let mut failed = Vec::new();
        for r in [&self.raw_send, &self.raw_mmsg, &self.serve_max]
            .into_iter()
            .flatten()
        {
            if r.packets_ps <= 0.0 {
                failed.push(format!("{}: no packets arrived", r.label));
            }
        }
        if let Some(r) = &self.serve_max
            && r.not_forwarded > 0
        {
            failed.push(format!(
                "{}: {} of {} records lost ({} arrived, {} superseded, {} socket drops)",
                r.label,
                r.not_forwarded,
                r.sent,
                r.completed,
                r.superseded.unwrap_or(0),
                r.socket_drops
            ));
        }
        for r in &self.paced {
            if r.completed == 0
                || r.not_forwarded > 0
                || r.superseded != Some(0)
                || r.socket_drops > 0
            {
                failed.push(format!(
                    "{}: {} of {} records arrived, {} lost, {} superseded, {} socket drops",
                    r.label,
                    r.completed,
                    r.sent,
                    r.not_forwarded,
                    r.superseded
                        .map(|v| v.to_string())
                        .unwrap_or_else(|| "?".into()),
                    r.socket_drops
                ));
            }
            if r.p99_us.is_none() {
                failed.push(format!("{}: no latency measured", r.label));
            }
        }
        for r in [&self.mpxstats_theirs, &self.mpxstats_ours, &self.chain]
            .into_iter()
            .flatten()
        {
            if r.completed == 0 {
                failed.push(format!("{}: nothing came out", r.label));
            }
        }
        if let Some(m) = &self.memory {
            if m.rss_after_kib == 0 {
                failed.push("memory: no RSS read".into());
            }
            if m.drained_after.is_none() {
                failed.push("memory: the gateway's send queue did not drain".into());
            }
        }
        if let Some(e) = &self.gmond {
            failed.extend(e.smoke_failures());
        }
        if let Some(x) = &self.xml {
            failed.extend(x.problems());
        }
        if let Some(m) = &self.memory_xml {
            match &m.poll {
                Some(p) if p.bytes > 0 => {}
                _ => failed.push("memory with an XML port: the poll got nothing".into()),
            }
        }
        if !failed.is_empty() {
            eprintln!("load smoke failed:\n  {}", failed.join("\n  "));
            std::process::exit(1);
        }
        println!("load smoke: ok");
    }
}

// ---------------------------------------------------------------------------
// Small helpers.

/// Waits until process `pid` has a UDP socket on `port` (up to 10 s).
fn listening(pid: u32, port: u16) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if !udp_rows(Some(pid), port).is_empty() {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    false
}

fn wait_for_port(pid: u32, port: u16) {
    if !listening(pid, port) {
        eprintln!("load: nothing listens on UDP port {port} after 10 s");
        std::process::exit(1);
    }
}

/// Waits up to `timeout` for `child` to exit.
fn wait_timeout(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let t0 = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if t0.elapsed() > timeout {
            return None;
        }
        thread::sleep(Duration::from_millis(2));
    }
}
