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
//! Files: `args.rs` (the command line, clap), `records.rs` (what the
//! servers send), `sink.rs` (the counting sink), `gateway.rs` (the gateway
//! process and its log), `runs.rs` (the runs above), `report.rs`; into a
//! real gmond: `e2e.rs` (runs (b)-(e)), `e2e/` (the ceiling (a), the
//! simulated fleet, the table), `gmond.rs`;
//! gmetad polling the gateway: `xml.rs`; gmetad polling gmond at a site's
//! load, once per delivery mode of the gateway: `poll.rs`; what each kind
//! of packet (a value, a metadata resend, a metadata or a host that gmond
//! has not seen) costs gmond's CPU: `cost.rs`; a federation's sites
//! sharded over ports of the gateway, and over real gmetads under a top
//! gmetad: `federation.rs`; the longest time a receive task waited for a
//! lock while a send queue drains and the XML port is polled: `stall.rs`;
//! xrootd's detailed stream beside the summaries, into a real gmond:
//! `detailed.rs`.
//!
//! A crate of its own (the tests do not compile it), measuring the
//! gateway built beside it (`under_test.rs`): `cargo build --release
//! --workspace`, then `cargo run --release -p xrd2ganglia-load` runs
//! everything but `poll` and `cost` (about 3 minutes); those run only when
//! named (`--only poll`: about 5.5 minutes per mode at its defaults, three
//! modes; `--only cost`: about 30 s per run with gmond's queue kept
//! filled, 2.5 minutes paced); `-- --help` lists the options. With
//! `--smoke` (as .ci/run runs it) a quick pass in about 100 s checks that
//! every part works, that no serve run loses a record, and that at a low
//! rate none is lost or superseded either.

use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use xrd2ganglia::config::{FileConfig, Overrides, Settings, validate};
use xrd2ganglia::engine::Engine;
use xrd2ganglia::events::{Counters, Events};
use xrd2ganglia::ganglia::xdr::{self, Packet};

use mmsg::{CountSink, MmsgSender};

// Free ports, scratch directories and gmond's configuration, as the tests
// have them: the test kit.
use xrd2ganglia_testkit::{Scratch, free_port};

mod args;
mod e2e;
mod gateway;
mod records;
mod report;
mod runs;
mod sink;
mod under_test;

use gateway::*;
use records::*;
use report::*;
use runs::*;
use sink::*;
mod cost;
mod detailed;
mod federation;
mod gmond;
mod hostile;
mod mmsg;
mod pair;
mod poll;
mod stall;
mod xml;

/// The records replayed, round robin over the simulated servers: an idle and
/// a loaded data server, a manager cmsd with its node list, a proxy cache,
/// and a server with spaces and quotas (the ~2.3 KB record).
const FIXTURES: &[&str] = &["ds_idle", "ds_loaded", "mgr_cmsd", "pfc_loaded", "spaces"];

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
    hostile: usize,
    hostile_servers: usize,
    churn: f64,
    only: Vec<String>,
    gmond_runs: Vec<String>,
    gateway_conf: String,
    gateway: Option<PathBuf>,
    gateway_bin: Option<PathBuf>,
    cost_runs: usize,
    cost_rate: f64,
    smoke: bool,
    poll: poll::PollOptions,
    fed: federation::FedOptions,
    detailed_files: u64,
    detailed_flush: Duration,
}

impl Options {
    fn runs(&self, name: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == name)
    }

    /// Runs done only when named (never in the smoke).
    fn named(&self, name: &str) -> bool {
        self.only.iter().any(|o| o == name)
    }
}

/// The gateway's default settings, as the load tool's own encoders use
/// them (they only encode: the send address is never used).
fn default_settings() -> Settings {
    validate(
        FileConfig::default(),
        "load".into(),
        &Overrides {
            send: vec!["127.0.0.1:9".into()],
            ..Default::default()
        },
    )
    .expect("default settings")
}

fn main() {
    let o = Options::parse();
    let bin = under_test::locate(o.gateway.clone());
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

    sink_runs(bin, &records, &o, &mut report);
    tool_runs(bin, &records, &o, &mut report);
    gmond_runs(bin, &o, &mut report);
    finish(&report, &records, &o);
}

/// The runs into the counting sink: the loopback limit, then `serve`
/// flat out and at the chosen rates.
fn sink_runs(bin: &Path, records: &Records, o: &Options, report: &mut Report) {
    if o.runs("raw") {
        report.raw_send = Some(raw(records, o, false));
        report.raw_mmsg = Some(raw(records, o, true));
    }
    if o.runs("serve") {
        // Flat out: offered a quarter above what the loopback can carry (a
        // sender blasting without limit would only take the CPU the gateway
        // and the sink need).
        let rate = report
            .raw_best()
            .map(|raw| (raw * 1.25 / records.packets_per_record()) as u64);
        report.serve_max = Some(serve(
            bin,
            records,
            o,
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
                .push(serve(bin, records, o, Some(rate), &label, mode));
        }
    }
}

/// Receive and parse, the chain, memory, the XML port and its hostile
/// clients.
fn tool_runs(bin: &Path, records: &Records, o: &Options, report: &mut Report) {
    if o.runs("parse") {
        report.mpxstats_theirs = mpxstats(Path::new("/usr/bin/mpxstats"), &[], records, o);
        report.mpxstats_ours = mpxstats(bin, &["mpxstats"], records, o);
    }
    if o.runs("chain") {
        report.chain = chain(records, o);
    }
    if o.runs("memory") {
        report.memory = Some(memory(bin, o, false));
    }
    if o.runs("xml") {
        if report.memory.is_none() {
            report.memory = Some(memory(bin, o, false));
        }
        report.memory_xml = Some(memory(bin, o, true));
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
        report.xml = Some(xml::run(bin, servers, rps, sustain));
        println!("load: xml took {:.1} s", t.elapsed().as_secs_f64());
    }
    if o.named("stall") {
        let t = Instant::now();
        let servers = if o.smoke { 200 } else { o.gmond_servers };
        stall::run(bin, servers, o.sustain).print();
        println!("load: stall took {:.1} s", t.elapsed().as_secs_f64());
    }
    if o.runs("hostile") {
        let t = Instant::now();
        let polls = if o.smoke { 3 } else { 20 };
        report.hostile = Some(hostile::run(
            bin,
            o.hostile_servers,
            o.hostile,
            o.churn,
            polls,
        ));
        println!("load: hostile took {:.1} s", t.elapsed().as_secs_f64());
    }
}

/// Into a real gmond (and the runs done only when named: poll, pair, cost).
fn gmond_runs(bin: &Path, o: &Options, report: &mut Report) {
    if o.runs("gmond") {
        let e = e2e::run(
            o.gateway_bin.as_deref().unwrap_or(bin),
            &e2e::E2eOptions {
                servers: o.gmond_servers,
                smoke: o.smoke,
                ceiling: o.ceiling,
                sustain: o.sustain,
                down: o.down,
                runs: o.gmond_runs.clone(),
                gateway_conf: o.gateway_conf.clone(),
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
    // Only when named: at its defaults it takes about a quarter of an
    // hour, and the smoke must stay quick.
    if o.named("poll") {
        let t = Instant::now();
        report.poll = Some(poll::run(bin, &o.poll));
        println!("load: poll took {:.1} s", t.elapsed().as_secs_f64());
    }
    if o.named("pair") {
        let t = Instant::now();
        let p = pair::run(
            bin,
            &pair::PairOptions {
                servers: o.gmond_servers,
                every: Duration::from_secs(15),
                sustain: o.sustain,
            },
        );
        println!("load: pair took {:.1} s", t.elapsed().as_secs_f64());
        p.print();
    }
    if o.named("federation") {
        let t = Instant::now();
        let runs = federation::run(bin, &o.fed);
        println!("load: federation took {:.1} s", t.elapsed().as_secs_f64());
        federation::print(&o.fed, &runs);
    }
    if o.named("detailed") {
        let t = Instant::now();
        let d = detailed::DetailedOptions {
            servers: o.gmond_servers,
            files: o.detailed_files,
            flush: o.detailed_flush,
            sustain: o.sustain,
        };
        let phases = detailed::run(bin, &d);
        println!("load: detailed took {:.1} s", t.elapsed().as_secs_f64());
        detailed::print(&d, &phases);
        let problems: Vec<String> = phases.iter().flat_map(detailed::Phase::problems).collect();
        if !problems.is_empty() {
            eprintln!("load: detailed:\n  {}", problems.join("\n  "));
            std::process::exit(1);
        }
    }
    if o.named("cost") {
        let t = Instant::now();
        let c = cost::run(&cost::CostOptions {
            servers: o.gmond_servers,
            runs: o.cost_runs.max(1),
            rate: o.cost_rate,
        });
        println!("load: cost took {:.1} s", t.elapsed().as_secs_f64());
        c.print();
    }
}

/// The report; the smoke's checks, or a benchmark run that missed a
/// target fails.
fn finish(report: &Report, records: &Records, o: &Options) {
    report.print(records);
    if o.smoke {
        report.check_smoke();
    } else if let Some(missed) = report
        .gmond
        .as_ref()
        .map(|g| g.missed_targets())
        .into_iter()
        .chain(report.hostile.as_ref().map(|h| h.problems(true)))
        .reduce(|mut a, b| {
            a.extend(b);
            a
        })
        && !missed.is_empty()
    {
        // A benchmark run that misses a target fails, as the smoke fails.
        eprintln!("load: targets missed:\n  {}", missed.join("\n  "));
        std::process::exit(1);
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
