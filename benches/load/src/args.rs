//! The load tool's command line (clap): `cargo run --release -p
//! xrd2ganglia-load -- --help` lists it. Turned into [`Options`];
//! `--smoke` caps every size to the quick pass.

use std::path::PathBuf;
use std::time::Duration;

use clap::{CommandFactory, Parser};

use crate::{Options, federation, poll};

/// Load tool: the gateway against the chain it replaces, side by side.
#[derive(Parser, Debug)]
#[command(
    name = "load",
    override_usage = "cargo run --release -p xrd2ganglia-load -- [OPTIONS]"
)]
struct Args {
    /// Length of each measured run
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = secs)]
    duration: Duration,
    /// Simulated xrootd servers
    #[arg(long, value_name = "N", default_value_t = 100)]
    servers: usize,
    /// Offered records/s for the paced runs [default: 1000,2000,5000, plus 80% of the raw rate]
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    rates: Option<Vec<u64>>,
    /// Sources for the memory run
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    sources: usize,
    /// Simulated servers of the gmond runs
    #[arg(long, value_name = "N", default_value_t = 1000)]
    gmond_servers: usize,
    /// Skip measuring gmond's ceiling (gmond run (a)), take this (value packets/s)
    #[arg(long, value_name = "PKTS")]
    ceiling: Option<f64>,
    /// Measured length of the sustained gmond run
    #[arg(long, value_name = "SECS", default_value = "20", value_parser = secs)]
    sustain: Duration,
    /// How long gmond stays stopped in the restart run
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = secs)]
    down: Duration,
    /// Which gmond runs to do [default: a,b,c,d,e; (a) is measured only when (c) or (d) needs it and --ceiling is not given, or when named]
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = ["a", "b", "c", "d", "e"])]
    gmond_runs: Option<Vec<String>>,
    /// Records/s of the xml run
    #[arg(long, value_name = "R", default_value_t = 500.0)]
    xml_rps: f64,
    /// Other connections on the XML port in the hostile run
    #[arg(long, value_name = "N", default_value_t = 1000)]
    hostile: usize,
    /// Connect-and-close per second from two other addresses in the hostile run's churn phase (0: none)
    #[arg(long, value_name = "N", default_value_t = 4000.0)]
    churn: f64,
    /// Hosts in the hostile run's document
    #[arg(long, value_name = "N", default_value_t = 500)]
    hostile_servers: usize,
    /// Settings added to the gateway's file in the gmond runs, ';' between lines (e.g. 'follow_gmond_queue = false': the token bucket, as for a gmond on another host)
    #[arg(long, value_name = "TEXT", default_value = "")]
    gateway_conf: String,
    /// The gateway under test [default: target/<profile>/xrd2ganglia beside this tool, refused if older than its sources]
    #[arg(long, value_name = "PATH")]
    gateway: Option<PathBuf>,
    /// The gateway binary of the gmond runs (an older build, for a before/after comparison) [default: the one under test]
    #[arg(long, value_name = "PATH")]
    gateway_bin: Option<PathBuf>,
    /// Runs to do: raw,serve,rates,parse,chain,memory,gmond,xml,hostile,poll,cost,pair,federation,stall,detailed [default: every one but poll, cost, pair, federation, stall and detailed: those run only when named, and never in the smoke; stall: --gmond-servers servers' reports all at once each second, then 500/s, into a gateway with an XML port read every second, for --sustain SECS: the longest time a receive task waited for a send lane's or an XML table shard's lock (the gateway's debug line at stop); detailed: --gmond-servers servers' summaries and each one's detailed stream (--detailed-files files opened and closed a second) into a real gmond, after a baseline of the summaries alone; pair: --gmond-servers servers every 15 s to a pair of gateways and one alone, --sustain SECS measured, then a failover; about 2 minutes]
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    only: Vec<String>,
    /// Runs of the cost run, a fresh gmond each
    #[arg(long, value_name = "N", default_value_t = 5)]
    cost_runs: usize,
    /// Packets/s of each phase of the cost run (0: keep gmond's receive queue filled, so that it never waits for a packet)
    #[arg(long, value_name = "PKTS", default_value_t = 20_000.0)]
    cost_rate: f64,
    /// Simulated servers of the poll run
    #[arg(long, value_name = "N", default_value_t = 1000)]
    poll_servers: usize,
    /// How often each of them reports
    #[arg(long, value_name = "SECS", default_value = "15", value_parser = positive_secs)]
    poll_interval: Duration,
    /// How often gmetad polls gmond and the gateway
    #[arg(long, value_name = "SECS", default_value = "15", value_parser = positive_secs)]
    poll_every: Duration,
    /// Measured length of each mode
    #[arg(long, value_name = "SECS", default_value = "300", value_parser = positive_secs)]
    poll_duration: Duration,
    /// The gateway's delivery modes, one run each, in order: follow,nofollow,resend,buffer,stock
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "follow,nofollow,resend", value_parser = poll_mode)]
    poll_modes: Vec<String>,
    /// The binary of the stock mode (an older build, for a before/after comparison) [default: the one under test]
    #[arg(long, value_name = "PATH")]
    poll_bin: Option<PathBuf>,
    /// Servers of the federation run (--only federation: a gateway with every site on one port, then one with --fed-shards `{site}` rules each on its own port; the burst, then steady state)
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    fed_servers: usize,
    /// Sites they are spread over
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    fed_sites: u64,
    /// Rules, each a port of its own
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    fed_shards: u64,
    /// How often each server reports
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = secs)]
    fed_interval: Duration,
    /// Steady state measured, per gateway
    #[arg(long, value_name = "SECS", default_value = "120", value_parser = secs)]
    fed_sustain: Duration,
    /// The polls' interval, and the gmetads' step
    #[arg(long, value_name = "SECS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..))]
    fed_step: u64,
    /// Real gmetads too: one on the baseline's port, one per shard port and a top gmetad above them (their CPU per step once their RRDs exist)
    #[arg(long)]
    fed_gmetad: bool,
    /// The gmetads' RRAs line (the default: 2.5 KB an RRD; gmetad's own make 631 KB)
    #[arg(long, value_name = "TEXT", default_value = "RRA:AVERAGE:0.5:1:244")]
    fed_rras: String,
    /// Files each server of the detailed run opens and closes a second (--only detailed: --gmond-servers servers send their summaries and xrootd's detailed stream into the gateway and a real gmond, after a baseline of the summaries alone; --sustain SECS measured)
    #[arg(long, value_name = "N", default_value_t = 50)]
    detailed_files: u64,
    /// How often each server of the detailed run sends an f packet (xrootd's fstat flush)
    #[arg(long, value_name = "SECS", default_value = "1", value_parser = positive_secs)]
    detailed_flush: Duration,
    /// The quick pass .ci/run runs (gmond runs with 200 servers; fails on any drop at gmond or missing or stale metric)
    #[arg(long)]
    smoke: bool,
}

/// A number of seconds, 0 or more.
fn secs(s: &str) -> Result<Duration, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("not a number: {s}"))?;
    Duration::try_from_secs_f64(v).map_err(|_| format!("not a number of seconds: {s}"))
}

/// A positive number of seconds.
fn positive_secs(s: &str) -> Result<Duration, String> {
    match secs(s) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(format!("not a positive number of seconds: {s}")),
    }
}

fn poll_mode(m: &str) -> Result<String, String> {
    match poll::mode(m) {
        Some(_) => Ok(m.to_string()),
        None => {
            let all: Vec<&str> = poll::MODES.iter().map(|m| m.name).collect();
            Err(format!("no poll mode {m:?} (modes: {})", all.join(",")))
        }
    }
}

impl Options {
    /// The command line.
    pub(crate) fn parse() -> Options {
        let mut o = Args::parse().options();
        if o.smoke {
            o.cap_to_smoke();
        }
        if o.gmond_servers == 0 || o.servers == 0 || o.poll.servers == 0 {
            Args::command()
                .error(
                    clap::error::ErrorKind::ValueValidation,
                    "--servers, --gmond-servers and --poll-servers must be at least 1",
                )
                .exit();
        }
        o
    }

    fn cap_to_smoke(&mut self) {
        self.duration = self.duration.min(Duration::from_millis(1500));
        self.servers = self.servers.min(20);
        self.rates = vec![200];
        self.sources = self.sources.min(300);
        self.gmond_servers = self.gmond_servers.min(200);
        self.sustain = self.sustain.min(Duration::from_secs(5));
        self.down = self.down.min(Duration::from_secs(3));
        self.hostile = self.hostile.min(200);
        self.hostile_servers = self.hostile_servers.min(100);
        self.churn = self.churn.min(500.0);
    }
}

impl Args {
    fn options(self) -> Options {
        Options {
            duration: self.duration,
            servers: self.servers,
            rates: self.rates.unwrap_or_else(|| vec![1000, 2000, 5000]),
            sources: self.sources,
            gmond_servers: self.gmond_servers,
            ceiling: self.ceiling,
            sustain: self.sustain,
            down: self.down,
            xml_rps: self.xml_rps,
            hostile: self.hostile,
            hostile_servers: self.hostile_servers,
            churn: self.churn,
            only: self.only,
            gmond_runs: self
                .gmond_runs
                .unwrap_or_else(|| ["a", "b", "c", "d", "e"].map(String::from).to_vec()),
            gateway_conf: self.gateway_conf.replace(';', "\n"),
            gateway: self.gateway,
            gateway_bin: self.gateway_bin,
            cost_runs: self.cost_runs,
            cost_rate: self.cost_rate,
            smoke: self.smoke,
            poll: poll::PollOptions {
                servers: self.poll_servers,
                interval: self.poll_interval,
                every: self.poll_every,
                duration: self.poll_duration,
                modes: self.poll_modes,
                old_bin: self.poll_bin,
            },
            fed: federation::FedOptions {
                servers: self.fed_servers,
                sites: self.fed_sites as usize,
                shards: self.fed_shards as usize,
                interval: self.fed_interval,
                sustain: self.fed_sustain,
                step: self.fed_step,
                gmetad: self.fed_gmetad,
                rras: self.fed_rras,
            },
            detailed_files: self.detailed_files,
            detailed_flush: self.detailed_flush,
        }
    }
}
