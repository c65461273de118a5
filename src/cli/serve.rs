//! `xrd2ganglia serve`: the gateway daemon's life. Owns the state file,
//! binds every listener, opens the send channels, then runs the gateway
//! (the library's `daemon`) until SIGTERM or SIGINT, reloading the
//! configuration on SIGHUP.
//!
//! Every call into the library's `daemon` module is in this file.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};

use xrd2ganglia::config::{self, Settings};
use xrd2ganglia::daemon;
use xrd2ganglia::daemon::control::ControlListener;
use xrd2ganglia::daemon::state_file::{LockError, StateLock};
use xrd2ganglia::events::Counters;
use xrd2ganglia::ganglia::channel::SendChannel;

use super::{Failed, Listener, Outcome, StartError, init_logging, log_filter};
use crate::ConfigArgs;

/// Serves with the settings of `config`, logging at `log_level` (else
/// RUST_LOG, else info), until SIGTERM or SIGINT.
pub fn run(config: ConfigArgs, log_level: Option<&str>) -> Outcome {
    init_logging(log_filter(log_level, "info")?);
    let mut settings = config.load()?;
    config::check_peer(&settings).map_err(super::peer_error)?;
    // Owned before anything is bound or read: a second gateway on the same
    // file is refused before it can save over the first one's sources.
    // Held until the process exits (the kernel releases it on any exit).
    let state_lock = lock_state_file(&mut settings)?;
    let sockets = bind_listeners(&settings)?;
    let channels = open_channels(&settings)?;
    one_malloc_arena();
    daemon::xml_port::raise_open_files_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(Failed::Runtime)?;
    // Caught before "serving" is said: a stop or reload sent as soon as
    // that line shows (by systemd, or a script) is acted on, never fatal.
    let signals = {
        let _in_runtime = runtime.enter();
        Signals::catch()
    };
    log_serving(&settings, &channels);
    let result = runtime.block_on(serve(config, settings, sockets, channels, signals));
    // A poll of the XML port may still be writing to a slow client (its
    // thread would hold the exit for up to its deadline): not waited for.
    runtime.shutdown_timeout(Duration::from_millis(500));
    // The last save is done: the file may have another owner now.
    drop(state_lock);
    result.map_err(|e| Failed::Io(e).into())
}

/// The send channels of `settings` (their hosts resolved), as `serve`,
/// a SIGHUP reload and `check-config` open them.
pub fn open_channels(settings: &Settings) -> Result<Vec<SendChannel>, StartError> {
    daemon::open_channels(settings).map_err(StartError::Channels)
}

/// Takes the state file's lock, if there is a state file. The built-in
/// default that cannot be made (its directory, /var/lib/xrd2ganglia, is
/// not writable: a user's quick look) is given up with a warning, and the
/// gateway runs without one; a state file the file or `--state-file`
/// names must be usable, and one another gateway owns never is.
fn lock_state_file(settings: &mut Settings) -> Result<Option<StateLock>, StartError> {
    let Some(state_file) = settings.state_file.as_deref() else {
        return Ok(None);
    };
    match StateLock::acquire(state_file) {
        Ok(lock) => Ok(Some(lock)),
        // A full disk is a bad day, not a bad config: serve, and save once
        // there is room (exit 2 would keep the unit from restarting it).
        Err(e) if e.is_no_space() => {
            tracing::warn!("{e}: serving; the counter state is not saved until there is room");
            settings.state_lock_pending = true;
            Ok(None)
        }
        Err(e @ LockError::Io { .. }) if settings.state_file_is_default => {
            tracing::warn!("{e}; running without a state file (counters restart with the gateway)");
            settings.state_file = None;
            Ok(None)
        }
        Err(e) => Err(StartError::StateFile(Box::new(e))),
    }
}

/// Binds every listener, in the order a port conflict is reported.
fn bind_listeners(settings: &Settings) -> Result<daemon::Sockets, StartError> {
    let reports = bind_each(
        &settings.listen,
        |a| daemon::bind::reports(a, settings.recv_buffer),
        Listener::Reports,
    )?;
    warn_if_recv_buffer_capped(&reports, settings.recv_buffer);
    Ok(daemon::Sockets {
        reports,
        requests: bind_each(
            &settings.metadata_requests,
            daemon::bind::requests,
            Listener::MetadataRequests,
        )?,
        xml: bind_each(&settings.xml_listen, daemon::bind::xml, Listener::Gmetad)?,
        rule_xml: bind_rule_ports(settings)?,
        peer: bind_each(&settings.peer_listen, daemon::bind::peer, Listener::Peer)?,
        control: bind_control(settings)?,
    })
}

/// The `[[cluster]]` rules' own XML ports, each with its number.
fn bind_rule_ports(settings: &Settings) -> Result<Vec<(u32, std::net::TcpListener)>, StartError> {
    let mut bound = Vec::new();
    for (port, addrs) in settings.grouping.ports().into_iter().enumerate() {
        let listeners = bind_each(addrs, daemon::bind::xml, Listener::Gmetad)?;
        bound.extend(listeners.into_iter().map(|l| (port as u32, l)));
    }
    Ok(bound)
}

/// The control socket, if there is one. One named in the config must be
/// bound; the default is made where it can be, else the gateway runs
/// without it (a non-root quick look has no /run/xrd2ganglia), saying so
/// once.
fn bind_control(settings: &Settings) -> Result<Option<ControlListener>, StartError> {
    let Some(c) = &settings.control_socket else {
        return Ok(None);
    };
    match daemon::bind::control(&c.path, !c.required) {
        Ok(l) => Ok(Some(l)),
        Err(error) if c.required => Err(StartError::Control {
            path: c.path.clone(),
            error,
        }),
        Err(e) => {
            tracing::warn!(
                "control socket {}: {e}: running without it (`xrd2ganglia status` cannot ask this gateway; set control_socket to a path this user may make, or \"\" for none)",
                c.path.display()
            );
            Ok(None)
        }
    }
}

/// Says once, at warn, when the kernel gave the receive sockets less than
/// `recv_buffer` (it caps SO_RCVBUF at net.core.rmem_max, silently), with
/// the sysctl that lets it grant the size asked.
fn warn_if_recv_buffer_capped(sockets: &[std::net::UdpSocket], asked: usize) {
    let got = sockets
        .iter()
        .filter_map(|s| daemon::bind::recv_buffer_got(s).ok())
        .min();
    if let Some(got) = got.filter(|&got| got < asked) {
        tracing::warn!(
            "recv_buffer: asked for {asked} bytes, the kernel gave {got} (its cap, \
             net.core.rmem_max); to get the size asked: sysctl -w net.core.rmem_max={asked} \
             (and a file in /etc/sysctl.d to keep it), then restart the gateway"
        );
    }
}

/// Binds every address of one kind of `listener`, or says which could not
/// be bound and why.
fn bind_each<T>(
    addrs: &[SocketAddr],
    bind: impl Fn(SocketAddr) -> std::io::Result<T>,
    listener: Listener,
) -> Result<Vec<T>, StartError> {
    addrs
        .iter()
        .map(|&addr| {
            bind(addr).map_err(|error| StartError::Bind {
                listener,
                addr,
                error,
            })
        })
        .collect()
}

/// The line that says the gateway serves, and how.
fn log_serving(settings: &Settings, channels: &[SendChannel]) {
    tracing::info!(
        listen = ?settings.listen,
        channels = ?channels.iter().map(|c| c.label().to_string()).collect::<Vec<_>>(),
        channels_from = %settings.channels_from,
        metadata_requests = ?settings.metadata_requests,
        xml_listen = ?settings.xml_listen,
        send_values = if settings.value_heartbeat.is_some() { "changed" } else { "all" },
        state_file = %settings.state_file.as_deref().unwrap_or(Path::new("")).display(),
        config = %settings.source,
        "xrd2ganglia {} serving",
        env!("CARGO_PKG_VERSION")
    );
    if settings.source == config::TRY_OUT_SOURCE {
        tracing::info!(
            "try-out: feed it with `xrd2ganglia replay tests/data/records/try-out.jsonl`, \
             see its hosts and metrics with `xrd2ganglia poll --metrics` and its sources with \
             `xrd2ganglia status` (README.md, Try it)"
        );
    }
}

/// Runs the gateway until SIGTERM or SIGINT, reloading `config` on SIGHUP.
async fn serve(
    config: ConfigArgs,
    settings: Settings,
    sockets: daemon::Sockets,
    channels: Vec<SendChannel>,
    signals: Signals,
) -> std::io::Result<()> {
    let (reload_tx, reloads) = tokio::sync::mpsc::channel(1);
    let started = Started {
        file: settings.effective.clone(),
        rule_ports: settings
            .grouping
            .ports()
            .iter()
            .map(|a| a.to_vec())
            .collect(),
    };
    tokio::spawn(reload_on_sighup(signals.hup, config, started, reload_tx));
    daemon::run(
        settings,
        sockets,
        channels,
        Arc::new(Counters::default()),
        shutdown_signal(signals.stop),
        reloads,
    )
    .await
}

/// What a reload is compared with: the file the gateway started with, and
/// the rule ports it bound.
struct Started {
    file: config::FileConfig,
    rule_ports: Vec<Vec<SocketAddr>>,
}

/// On each SIGHUP, reads the configuration again; a valid one (whose send
/// channels open) replaces the running one, an invalid one is refused with
/// the reason and the old one keeps running.
async fn reload_on_sighup(
    hup: Option<Signal>,
    config: ConfigArgs,
    started: Started,
    reloads: tokio::sync::mpsc::Sender<daemon::Reload>,
) {
    let Some(mut hup) = hup else {
        tracing::warn!("cannot catch SIGHUP: reload needs a restart");
        return;
    };
    while hup.recv().await.is_some() {
        let reload = match reload(&config, &started) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("SIGHUP: new configuration refused, the old one stays: {e}");
                continue;
            }
        };
        tracing::info!(
            channels = ?reload.channels.iter().map(|c| c.label().to_string()).collect::<Vec<_>>(),
            config = %reload.settings.source,
            "SIGHUP: reloading"
        );
        if reloads.send(reload).await.is_err() {
            return;
        }
    }
}

/// The configuration `config` now reads as, with its send channels open;
/// or why it is refused. A changed key that waits for a restart
/// ([`config::OnSighup::Restart`]; compared with the file the gateway
/// `started` with) is logged by name and keeps its running value (and `send = false` is refused while no XML
/// port is open: the data would go nowhere).
fn reload(config: &ConfigArgs, started: &Started) -> Result<daemon::Reload, String> {
    let mut settings = config.load().map_err(|e| e.to_string())?;
    for rule in settings.grouping.keep_ports(&started.rule_ports) {
        tracing::warn!(
            "SIGHUP: {rule}: xml_listen changed: it takes effect at the next restart (its clusters are served on the gateway's xml_listen only until then)"
        );
    }
    let started = &started.file;
    let channels = daemon::open_channels(&settings).map_err(|e| e.to_string())?;
    if !settings.send && started.xml_listen.is_empty() {
        return Err(
            "send = false, and the running gateway has no xml_listen port (that takes a restart)"
                .into(),
        );
    }
    for key in started.changed_keys(&settings.effective) {
        if config::waits_for_restart(key) {
            tracing::warn!(
                "SIGHUP: {key} changed: it takes effect at the next restart (the running value stays)"
            );
        }
    }
    Ok(daemon::Reload { settings, channels })
}

/// The signals `serve` acts on: SIGTERM and SIGINT stop it, SIGHUP reloads
/// the configuration. None where the handler could not be installed.
struct Signals {
    stop: Option<(Signal, Signal)>,
    hup: Option<Signal>,
}

impl Signals {
    /// Installs the handlers (inside the runtime: tokio's signal driver).
    fn catch() -> Signals {
        Signals {
            stop: signal(SignalKind::terminate())
                .ok()
                .zip(signal(SignalKind::interrupt()).ok()),
            hup: signal(SignalKind::hangup()).ok(),
        }
    }
}

/// Completes on SIGTERM or SIGINT.
async fn shutdown_signal(stop: Option<(Signal, Signal)>) {
    let Some((mut term, mut int)) = stop else {
        // Without signal handlers there is nothing to wait for but Ctrl-C.
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: stopping"),
        _ = int.recv() => tracing::info!("SIGINT: stopping"),
    }
}

/// One malloc arena for the daemon. Its receive tasks move between tokio's
/// worker threads, and glibc gives each thread an arena of its own: memory a
/// source freed on one thread is not reused by the next source made on the
/// other. Measured with 100,000 one-shot senders (tests/flood/main.rs): peak RSS
/// 42 MiB in one arena, 42 or 65 MiB (run to run) with the default. The
/// daemon allocates little per datagram, so one arena costs no contention.
fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called before any
    // other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}
