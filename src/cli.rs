//! The commands, one file each, and how they end.
//!
//! Exit codes, one rule for every command but the gmetric and mpxstats
//! drop-ins (which keep their originals'): 2 when the command cannot start
//! as configured (a bad config file or value, a state file another process
//! owns): starting again changes nothing; 3 when it cannot start now for a
//! reason outside the config that may pass (a send host that does not
//! resolve yet, an address that cannot be bound: in use, or not yet
//! assigned); 1 when something fails after the start; 0 otherwise. The
//! unit restarts on 3, never on 2. A command
//! says which with a [`Failure`]; [`exit_code`] is the one place that
//! prints it and turns it into the exit code. Every command's codes, the
//! drop-ins' too, are listed in `xrd2ganglia::config::docs::EXIT_CODES`
//! (docs/configuration.md shows them; tests/quick/docs.rs reaches each).

pub mod check_config;
pub mod docs;
pub mod dump;
pub mod gmetric;
pub mod gweb;
pub mod logging;
pub mod mpxstats;
pub mod poll;
pub mod replay;
pub mod serve;
pub mod status;

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

use xrd2ganglia::config::{self, ConfigError, Overrides};

/// The command cannot start as configured.
const CANNOT_START: u8 = 2;
/// The command cannot start now, for a reason outside the config that may
/// pass (the unit restarts it).
const CANNOT_START_NOW: u8 = 3;
/// Something failed after the start.
const FAILED: u8 = 1;

/// Why a command did not succeed.
pub enum Failure {
    /// It could not start: exit 2, or 3 where starting again may succeed.
    CannotStart(StartError),
    /// It failed after the start: exit 1.
    Failed(Failed),
    /// It failed after the start and has said why already (`dump`: each
    /// record that is not a summary record, on a line of its own): exit 1.
    AlreadyReported,
}

/// What a command returns: `Ok` is exit 0.
pub type Outcome = Result<(), Failure>;

/// Why a command cannot start as configured. Displays as the line printed
/// on stderr.
pub enum StartError {
    /// The config file, or a value given on the command line, is invalid.
    Config(ConfigError),
    /// The send channels cannot be opened (a host does not resolve).
    Channels(io::Error),
    /// The state file is owned by another process, or its lock cannot be
    /// taken (the gateway's lock error, boxed: only `serve.rs` names the
    /// library's daemon module).
    StateFile(Box<dyn std::error::Error>),
    /// An address cannot be listened on.
    Bind {
        listener: Listener,
        addr: SocketAddr,
        error: io::Error,
    },
    /// The control socket named in the config cannot be made.
    Control { path: PathBuf, error: io::Error },
    /// A file of records cannot be read (`dump`, `replay`).
    Read { path: PathBuf, error: io::Error },
    /// The recording file cannot be made (`dump --record`).
    Record { path: PathBuf, error: io::Error },
    /// The ganglia-web files cannot be made for these settings (`gweb`).
    Gweb(String),
}

/// What something failed at after the start. Displays as the line printed
/// on stderr.
pub enum Failed {
    /// Building the async runtime (`serve`): no matter of configuration,
    /// so not a `StartError`.
    Runtime(io::Error),
    /// Serving (`serve`) or reading records (`dump`).
    Io(io::Error),
    /// Writing the ganglia-web files into `dir` (`gweb`).
    GwebWrite { dir: PathBuf, error: io::Error },
    /// Writing the man pages and completions into `dir` (`generate-docs`).
    Docs { dir: PathBuf, error: io::Error },
    /// No gateway answered on the control socket at `path` (`status`).
    NoGateway { path: PathBuf, why: String },
    /// The gateway at `path` answered, with an error (`status`).
    Refused { path: PathBuf, error: String },
    /// Nothing that serves gmond's XML answered at `addr` (`poll`).
    Poll { addr: String, why: String },
}

/// What listens on an address, as a bind error names it.
#[derive(Clone, Copy)]
pub enum Listener {
    /// xrd.report records (UDP): `listen`, `dump --listen`.
    Reports,
    /// gmond's metadata requests (UDP): `metadata_requests`.
    MetadataRequests,
    /// gmetad's polls (TCP): `xml_listen`.
    Gmetad,
    /// The peer gateway's exchanges (TCP): `peer_listen`.
    Peer,
}

/// The one place a command's outcome becomes a message on stderr and an
/// exit code.
pub fn exit_code(outcome: Outcome) -> ExitCode {
    let code = match outcome {
        Ok(()) => return ExitCode::SUCCESS,
        Err(Failure::CannotStart(e)) => {
            eprintln!("{e}");
            if e.may_pass() {
                CANNOT_START_NOW
            } else {
                CANNOT_START
            }
        }
        Err(Failure::Failed(e)) => {
            eprintln!("{e}");
            FAILED
        }
        Err(Failure::AlreadyReported) => FAILED,
    };
    ExitCode::from(code)
}

/// What `peer` fails at ([`xrd2ganglia::config::check_peer`]): a name
/// that does not resolve yet may pass (exit 3), the rest is the config's.
pub fn peer_error((e, may_pass): (xrd2ganglia::config::ConfigError, bool)) -> StartError {
    if may_pass {
        StartError::Channels(io::Error::other(e.to_string()))
    } else {
        StartError::Config(e)
    }
}

impl StartError {
    /// Whether starting again may succeed with the same config: a send
    /// host that does not resolve (yet: DNS at boot), an address that
    /// cannot be bound (in use, or not yet assigned to this host).
    fn may_pass(&self) -> bool {
        matches!(self, StartError::Channels(_) | StartError::Bind { .. })
    }
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Config(e) => write!(f, "xrd2ganglia: {e}"),
            StartError::Channels(e) => write!(f, "xrd2ganglia: {e}"),
            StartError::StateFile(e) => write!(f, "xrd2ganglia: {e}"),
            StartError::Bind {
                listener,
                addr,
                error,
            } => {
                let what = listener.what(addr);
                write!(f, "xrd2ganglia: cannot listen {what}: {error}")?;
                if error.kind() == io::ErrorKind::AddrInUse {
                    let (ss, port) = (listener.ss(), addr.port());
                    write!(
                        f,
                        " (`ss {ss} 'sport = :{port}'` shows which process has it)"
                    )?;
                }
                Ok(())
            }
            StartError::Control { path, error } => write!(
                f,
                "xrd2ganglia: cannot make the control socket {} (control_socket): {error}",
                path.display()
            ),
            StartError::Read { path, error } => {
                write!(f, "xrd2ganglia: cannot read {}: {error}", path.display())
            }
            StartError::Record { path, error } => write!(
                f,
                "xrd2ganglia: cannot write the recording {}: {error}",
                path.display()
            ),
            StartError::Gweb(e) => write!(f, "xrd2ganglia gweb: {e}"),
        }
    }
}

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failed::Runtime(e) => write!(f, "xrd2ganglia: cannot start the runtime: {e}"),
            Failed::Io(e) => write!(f, "xrd2ganglia: {e}"),
            Failed::GwebWrite { dir, error } => write!(
                f,
                "xrd2ganglia gweb: cannot write to {}: {error}",
                dir.display()
            ),
            Failed::NoGateway { path, why } => write!(
                f,
                "xrd2ganglia status: no gateway answers on {}: {why}",
                path.display()
            ),
            Failed::Refused { path, error } => write!(
                f,
                "xrd2ganglia status: the gateway on {} answered with an error: {error}",
                path.display()
            ),
            Failed::Poll { addr, why } => write!(f, "xrd2ganglia poll: {addr}: {why}"),
            Failed::Docs { dir, error } => write!(
                f,
                "xrd2ganglia: cannot write docs to {}: {error}",
                dir.display()
            ),
        }
    }
}

impl Listener {
    /// How a bind error names it: "on ADDR", "for gmetad on ADDR (xml_listen)".
    fn what(self, addr: &SocketAddr) -> String {
        match self {
            Listener::Reports => format!("on {addr}"),
            Listener::MetadataRequests => format!("for gmond's metadata requests on {addr}"),
            Listener::Gmetad => format!("for gmetad on {addr} (xml_listen)"),
            Listener::Peer => format!("for the peer gateway on {addr} (peer_listen)"),
        }
    }

    /// The options of the `ss` command that shows which process has its
    /// port.
    fn ss(self) -> &'static str {
        match self {
            Listener::Reports | Listener::MetadataRequests => "-lunp",
            Listener::Gmetad | Listener::Peer => "-ltnp",
        }
    }
}

impl From<StartError> for Failure {
    fn from(e: StartError) -> Failure {
        Failure::CannotStart(e)
    }
}

impl From<Failed> for Failure {
    fn from(e: Failed) -> Failure {
        Failure::Failed(e)
    }
}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Failure {
        Failure::CannotStart(StartError::Config(e))
    }
}

/// The configuration's naming and filters, for commands that send nothing
/// (`dump`, `gweb`). Where the data goes is irrelevant there: settled on
/// the command line, so that neither gmond.conf nor the file's send and
/// xml_listen (a gmetad-polled site has send = false) can stop them.
fn settings_for_naming(config: Option<&Path>) -> Result<config::Settings, ConfigError> {
    let overrides = Overrides {
        no_send: true,
        xml_listen: vec!["127.0.0.1:8649".into()],
        ..Default::default()
    };
    config::load(config, &overrides)
}

/// The log filter: `--log-level` when given (it wins over RUST_LOG, which
/// the shipped sysconfig sets), else RUST_LOG when set, else `default`. A
/// `--log-level` that is no filter cannot start the command.
fn log_filter(log_level: Option<&str>, default: &str) -> Result<EnvFilter, ConfigError> {
    match log_level {
        Some(level) => EnvFilter::try_new(level)
            .map_err(|e| ConfigError(format!("--log-level {level:?}: not a log filter ({e})"))),
        None => Ok(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default))),
    }
}

/// Logs to stderr through `filter` ([`logging`]).
fn init_logging(filter: EnvFilter) {
    logging::init(filter);
}
