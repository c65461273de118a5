//! Command-line entry point: the commands and their options (clap), and
//! `main`, which hands each command to its file under `cli/` and turns
//! what it returns into the exit code (`cli::exit_code`: 0, 1 or 2, the
//! rule is written there).

mod cli;

use std::ffi::OsString;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::builder::{OsStringValueParser, TypedValueParser};
use clap::{Parser, Subcommand};

use xrd2ganglia::config::{self, Overrides};

/// XRootD summary monitoring (xrd.report) into Ganglia.
#[derive(Parser)]
#[command(name = "xrd2ganglia", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where settings come from; shared by every command that needs them.
#[derive(clap::Args, Clone)]
struct ConfigArgs {
    /// Config file [default: /etc/xrd2ganglia/xrd2ganglia.toml if it exists, else the built-in try-out settings: loopback only, nothing sent]
    #[arg(short, long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Listen on ADDR:PORT instead of the config's `listen` (repeatable).
    #[arg(short, long, value_name = "ADDR:PORT")]
    listen: Vec<String>,
    /// Send to gmond at HOST:PORT instead of the configured channels (repeatable).
    #[arg(short, long, value_name = "HOST:PORT")]
    send: Vec<String>,
    /// Keep counter state in FILE instead of the config's `state_file` ("": keep none).
    // Parsed as any OsString: clap's PathBuf parser refuses "" as a missing value.
    #[arg(long, value_name = "FILE", value_parser = OsStringValueParser::new().map(PathBuf::from))]
    state_file: Option<PathBuf>,
    /// Serve gmond's XML for gmetad on ADDR:PORT instead of the config's `xml_listen` (repeatable).
    #[arg(long, value_name = "ADDR:PORT")]
    xml_listen: Vec<String>,
    /// Send nothing to gmond (`send = false`): gmetad polls the gateway on `xml_listen`.
    #[arg(long, conflicts_with = "send")]
    no_send: bool,
}

impl ConfigArgs {
    fn load(&self) -> Result<config::Settings, config::ConfigError> {
        let overrides = Overrides {
            listen: self.listen.clone(),
            send: self.send.clone(),
            state_file: self.state_file.clone(),
            xml_listen: self.xml_listen.clone(),
            no_send: self.no_send,
        };
        config::load(self.config.as_deref(), &overrides)
    }
}

#[derive(Subcommand)]
enum Command {
    /// Receive xrd.report records and send them to gmond as metrics.
    Serve {
        #[command(flatten)]
        config: ConfigArgs,
        /// Log filter (error, warn, info, debug, trace, or a tracing filter) [default: RUST_LOG if set, else info]; given, it wins over RUST_LOG.
        #[arg(long, value_name = "FILTER")]
        log_level: Option<String>,
    },
    /// Ask the running gateway (on its control socket) for its sources,
    /// refused senders and counters.
    Status {
        /// Config file whose `control_socket` to ask [default: as for serve]
        #[arg(short, long, value_name = "FILE", conflicts_with = "socket")]
        config: Option<PathBuf>,
        /// The control socket to ask, instead of the config's `control_socket`.
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
        /// The gateway's answer as one line of JSON (schema: docs/operations.md).
        #[arg(long)]
        json: bool,
    },
    /// Validate a config file and print the effective settings.
    CheckConfig {
        #[command(flatten)]
        config: ConfigArgs,
        /// Checked as serve would take it (check-config logs only warnings), so that serve's options all work here.
        #[arg(long, value_name = "FILTER")]
        log_level: Option<String>,
    },
    /// XRootD's mpxstats: `mpxstats [-f {cgi|flat|xml}] -p PORT [-s] [--compat]`.
    #[command(disable_help_flag = true)]
    Mpxstats {
        /// mpxstats' own options.
        #[arg(allow_hyphen_values = true, trailing_var_arg = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Print what `serve` would send for some records, without sending.
    Dump {
        /// Config file (naming, timing, allow) [default: as for serve]
        #[arg(short, long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// One JSON object per metric per line instead of a table.
        #[arg(long)]
        json: bool,
        /// Receive records on ADDR:PORT instead of reading them.
        #[arg(short, long, value_name = "ADDR:PORT", conflicts_with = "input")]
        listen: Option<SocketAddr>,
        /// Sender address assumed for records read from a file or stdin.
        #[arg(long, value_name = "IP", default_value = "127.0.0.1")]
        from: IpAddr,
        /// File of records, one per line (as `mpxstats -f xml` writes them); `-` or none: stdin.
        input: Option<PathBuf>,
        /// With --listen: also write every datagram received, timestamped, into FILE (a recording for `replay`).
        #[arg(long, value_name = "FILE", requires = "listen")]
        record: Option<PathBuf>,
    },
    /// Send a recording (`dump --listen --record`) to a gateway again, at its pace.
    Replay {
        /// Where to send (the default is where the try-out gateway listens).
        #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:3333")]
        to: SocketAddr,
        /// Send this many times faster than recorded.
        #[arg(long, value_name = "FACTOR", default_value_t = 1.0)]
        speed: f64,
        /// The recording: one datagram per line, timestamped (docs/tools.md).
        file: PathBuf,
    },
    /// Read a gmond-style XML port (gmond's 8649, the gateway's xml_listen,
    /// gmetad's 8651) and print its clusters and hosts, as gmetad sees them.
    Poll {
        /// Also print every host's metrics, with value and units.
        #[arg(long)]
        metrics: bool,
        /// The port to read (the default is the try-out gateway's xml_listen).
        #[arg(value_name = "HOST:PORT", default_value = "127.0.0.1:8659")]
        addr: String,
        /// Seconds the whole exchange may take (connecting and reading the
        /// document to its end); past them poll stops (exit 1).
        #[arg(long, value_name = "SECONDS", default_value_t = cli::poll::DEFAULT_TIMEOUT)]
        timeout: f64,
    },
    /// Write ganglia-web reports, a site view and a cluster file for the
    /// metrics `serve` sends: DIR/graph.d/* go into ganglia-web's graph.d,
    /// DIR/conf/* into its conf directory.
    Gweb {
        /// Config file (metric_name, include/exclude, cluster_name) [default: as for serve]
        #[arg(short, long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The servers' instance name (xrootd/cmsd `-n`); repeatable; `anon` is servers started without -n.
        #[arg(long = "instance", value_name = "NAME", default_value = "anon")]
        instances: Vec<String>,
        /// The servers' all.sitename, if metric_name uses {site}.
        #[arg(long, value_name = "SITE")]
        site: Option<String>,
        /// The Ganglia cluster the servers are in [default: the config's cluster_name].
        #[arg(long, value_name = "NAME")]
        cluster: Option<String>,
        /// Keep ganglia-web's load, memory, CPU and network reports on the cluster's pages (hosts that also run gmond).
        #[arg(long)]
        keep_standard_reports: bool,
        /// Where to write (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
    /// Write man pages and shell completions into DIR (for packaging).
    #[command(hide = true)]
    GenerateDocs {
        /// Where to write them (created if missing).
        dir: PathBuf,
    },
    /// Ganglia's gmetric, as a drop-in: same options, packets, messages and
    /// exit codes (`xrd2ganglia gmetric -h`); also what the binary does when
    /// called through a link named `gmetric`.
    #[command(disable_help_flag = true)]
    Gmetric {
        /// gmetric's own options, parsed the way gmetric parses them.
        #[arg(allow_hyphen_values = true, trailing_var_arg = true, num_args = 0..)]
        args: Vec<OsString>,
    },
}

fn main() -> ExitCode {
    // Called through a link named gmetric or mpxstats: be that tool.
    let mut argv = std::env::args_os();
    let argv0 = argv.next().unwrap_or_default();
    match Path::new(&argv0).file_name().and_then(|n| n.to_str()) {
        Some("gmetric") => return cli::gmetric::run(&argv0.to_string_lossy(), argv.collect()),
        Some("mpxstats") => {
            let args: Vec<String> = argv.map(|a| a.to_string_lossy().into_owned()).collect();
            return cli::mpxstats::run(&args);
        }
        _ => {}
    }
    let outcome = match Cli::parse().command {
        Command::Serve { config, log_level } => cli::serve::run(config, log_level.as_deref()),
        Command::CheckConfig { config, log_level } => {
            cli::check_config::run(&config, log_level.as_deref())
        }
        Command::Status {
            config,
            socket,
            json,
        } => cli::status::run(config, socket, json),
        // The drop-ins keep their originals' messages and exit codes.
        Command::Gmetric { args } => return cli::gmetric::run("xrd2ganglia gmetric", args),
        Command::Mpxstats { args } => return cli::mpxstats::run(&args),
        Command::Dump {
            config,
            json,
            listen,
            from,
            input,
            record,
        } => cli::dump::run(config, json, listen, from, input, record),
        Command::Replay { to, speed, file } => cli::replay::run(&file, to, speed),
        Command::Poll {
            metrics,
            addr,
            timeout,
        } => cli::poll::run(&addr, metrics, timeout),
        Command::Gweb {
            config,
            instances,
            site,
            cluster,
            keep_standard_reports,
            out,
        } => cli::gweb::run(
            config,
            instances,
            site,
            cluster,
            keep_standard_reports,
            &out,
        ),
        Command::GenerateDocs { dir } => cli::docs::run(&dir),
    };
    cli::exit_code(outcome)
}
