//! The `serve` daemon: receive xrd.report datagrams, send Ganglia packets.
//!
//! The data path, top-down, one file per step:
//!
//! ```text
//! socket ──> receive ──> pipeline ──────────────> queue ──> sender ──> gmond
//!            (a task per (parse, map, source      (one per  (a thread per
//!             socket)     state, packets)          channel,  channel: gmond's
//!                                                  conflating) queue or a bucket)
//! ```
//!
//! * [`receive`]: one task per listening socket; never waits for a send.
//! * [`pipeline`]: a datagram -> its packets: the template fast path
//!   ([`template`]) or parse and map; per-source state ([`source`]),
//!   counters and changed-only sending ([`series`]); the packets themselves
//!   are built in one place ([`packets`]).
//! * [`queue`]: per channel, at most one pending metadata and one pending
//!   value per (host, metric); newer replaces older.
//! * [`sender`]: a thread per channel, following the receive queue of a
//!   gmond on this host ([`follow`]) or paced by a token bucket
//!   (`max_send_rate`, `send_burst`); at stop, drains for at most
//!   `drain_timeout`.
//!
//! With `xml_listen`, each batch also goes into the [`table`] (what a gmond
//! would hold, for gmetad), and [`xml_port`] writes it as gmond's XML to
//! each poll: gmetad polls the gateway, with or without a gmond.
//!
//! Beside them: [`requests`] hears gmond's metadata requests (136) and
//! hands them to the receive tasks, whose answers go through the same
//! queues; [`state`] keeps counter continuity across gateway restarts; a
//! task here logs the counters and sends them as the gateway's own metrics
//! ([`selfmon`](crate::selfmon)).

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;
use tokio::sync::watch;

use crate::config::Settings;
use crate::events::{Counters, Events};
use crate::ganglia::channel::SendChannel;
use crate::selfmon::{KernelDrops, SelfReporter};
use packets::PacketBatch;
use receive::Receiver;
use sender::{Outbox, Senders};
use state::StateStore;
use table::HostTable;

pub use pipeline::Pipeline;

/// Binds a listening socket: IPv6 sockets are v6-only so `0.0.0.0:P` and
/// `[::]:P` can both be bound; SO_RCVBUF is raised to absorb bursts.
pub fn bind(addr: SocketAddr, recv_buffer: usize) -> io::Result<std::net::UdpSocket> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    // Best effort: the kernel caps it at net.core.rmem_max.
    let _ = socket.set_recv_buffer_size(recv_buffer);
    socket.bind(&addr.into())?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Opens every channel of the settings.
pub fn open_channels(settings: &Settings) -> io::Result<Vec<SendChannel>> {
    settings
        .channels
        .iter()
        .map(|spec| {
            SendChannel::open(spec)
                .map_err(|e| io::Error::new(e.kind(), format!("send channel {spec}: {e}")))
        })
        .collect()
}

/// The gateway's bound sockets.
pub struct Sockets {
    /// Where xrd.report datagrams arrive.
    pub reports: Vec<std::net::UdpSocket>,
    /// Where gmond's metadata requests arrive (`metadata_requests`).
    pub requests: Vec<std::net::UdpSocket>,
    /// Where gmetad polls for gmond's XML (`xml_listen`).
    pub xml: Vec<std::net::TcpListener>,
}

/// Settings and send queues in force; replaced whole by a reload.
struct Active {
    settings: Settings,
    outbox: Arc<Outbox>,
    /// What the XML port writes (when `xml_listen` is set); the same
    /// table across reloads.
    table: Option<Arc<HostTable>>,
}

impl Active {
    /// Sends a batch (queues it for every channel) and takes it into the
    /// XML table: what `ip` (the record's sender) reported, at `now`.
    fn deliver(&self, batch: &PacketBatch, ip: IpAddr, now: Instant, events: &Events<'_>) {
        self.outbox.queue(batch, now, events);
        if let Some(table) = &self.table {
            let evicted = table.take(batch, ip, now);
            events.xml_hosts_evicted(evicted);
        }
    }
}

/// A new configuration for a running gateway (SIGHUP): every key but those
/// of [`crate::config::RESTART_KEYS`] takes effect at once.
pub struct Reload {
    pub settings: Settings,
    pub channels: Vec<SendChannel>,
}

/// Runs the gateway on already-bound sockets until `shutdown` completes,
/// then stops receiving (handling what is already queued on the sockets),
/// sends what is queued for at most `drain_timeout`, writes the state file
/// and returns. Each [`Reload`] received replaces the settings and senders
/// of every receive task between two datagrams (the old senders drain
/// meanwhile); the sockets stay open, so nothing arriving meanwhile is lost
/// (it waits in the socket buffer).
pub async fn run(
    settings: Settings,
    sockets: Sockets,
    channels: Vec<SendChannel>,
    counters: Arc<Counters>,
    shutdown: impl Future<Output = ()>,
    mut reloads: tokio::sync::mpsc::Receiver<Reload>,
) -> io::Result<()> {
    let (log_every, send_every) = (settings.stats_interval, settings.self_metrics_interval);
    let log_interval = settings.log_interval;
    let Sockets {
        reports: sockets,
        requests: request_sockets,
        xml: xml_listeners,
    } = sockets;
    let table = (!xml_listeners.is_empty()).then(|| Arc::new(HostTable::new(settings.max_sources)));
    let store = Arc::new(open_state(&settings, sockets.len()));
    let save_every = settings.state_interval;
    let fds: Vec<RawFd> = sockets.iter().map(|s| s.as_raw_fd()).collect();
    let drops = KernelDrops::new(&fds);
    let mut drain_timeout = settings.drain_timeout;
    let mut senders = Senders::start(&settings, channels, counters.clone());
    let outbox = senders.outbox.clone();
    let (active_tx, active_rx) = watch::channel(Arc::new(Active {
        settings,
        outbox,
        table: table.clone(),
    }));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = Vec::new();
    let mut request_queues = Vec::new();
    for (task, socket) in sockets.into_iter().enumerate() {
        let socket = UdpSocket::from_std(socket)?;
        let mut receiver = Receiver::new(active_rx.clone(), counters.clone());
        receiver.pipeline.keep_state(store.clone(), task);
        if !request_sockets.is_empty() {
            let (tx, rx) = tokio::sync::mpsc::channel(requests::QUEUE);
            request_queues.push(tx);
            receiver.requests = Some(rx);
        }
        tasks.push(tokio::spawn(receiver.run(
            socket,
            stop_rx.clone(),
            save_every,
        )));
    }
    for socket in request_sockets {
        tasks.push(tokio::spawn(requests::listen(
            socket,
            request_queues.clone(),
            counters.clone(),
            log_interval,
            stop_rx.clone(),
        )));
    }
    if let Some(table) = &table {
        for listener in xml_listeners {
            tasks.push(tokio::spawn(xml_port::serve(
                listener,
                table.clone(),
                active_rx.clone(),
                counters.clone(),
                stop_rx.clone(),
            )));
        }
    }
    if store.path().is_some() {
        tasks.push(tokio::spawn(save_state(
            store.clone(),
            stop_rx.clone(),
            save_every,
        )));
    }
    tasks.push(tokio::spawn(report_self(
        counters.clone(),
        drops,
        active_rx,
        stop_rx,
        log_every,
        send_every,
    )));
    tokio::pin!(shutdown);
    let mut retired = Vec::new();
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            Some(r) = reloads.recv() => {
                let new = Senders::start(&r.settings, r.channels, counters.clone());
                let old = std::mem::replace(&mut senders, new);
                let outbox = senders.outbox.clone();
                drain_timeout = r.settings.drain_timeout;
                if let Some(table) = &table {
                    table.set_max_hosts(r.settings.max_sources);
                }
                let _ = active_tx.send(Arc::new(Active { settings: r.settings, outbox, table: table.clone() }));
                retired.push(tokio::spawn(old.drain(Instant::now() + drain_timeout)));
                tracing::info!("configuration reloaded");
            }
        }
    }
    let stopping = Instant::now();
    let _ = stop_tx.send(true);
    for t in tasks {
        let _ = t.await;
    }
    // Nothing is queued any more: what is, goes out within the deadline.
    let left = senders.outbox.stats(Instant::now()).packets;
    if left > 0 {
        tracing::info!(
            "stopping: sending {left} queued packets (for at most {} s)",
            drain_timeout.as_secs_f64()
        );
    }
    let senders_outbox = senders.outbox.clone();
    senders.drain(stopping + drain_timeout).await;
    for t in retired {
        let _ = t.await;
    }
    // Every receive task has handed in its final state.
    if let Err(e) = store.save() {
        warn_state_file(&store, &e);
    }
    set_queue(&counters, &senders_outbox);
    tracing::info!("stopped; counters: {}", counters.snapshot());
    Ok(())
}

/// This host's address for the XML port's gateway host: its first
/// non-loopback IPv4 address (gmond would show the address its packets
/// come from), else loopback.
fn local_ip() -> IpAddr {
    if_addrs::get_if_addrs()
        .ok()
        .and_then(|list| {
            list.into_iter()
                .map(|i| i.ip())
                .find(|ip| ip.is_ipv4() && !ip.is_loopback())
        })
        .unwrap_or(IpAddr::from([127, 0, 0, 1]))
}

/// Notes the send queues' length and age in the counters (gauges).
fn set_queue(counters: &Counters, outbox: &Outbox) {
    let s = outbox.stats(Instant::now());
    counters.set_queue(s.packets, s.oldest);
}

fn warn_state_file(store: &StateStore, e: &io::Error) {
    if let Some(path) = store.path() {
        tracing::warn!(
            "cannot write the state file {}: {e} (counters will not stay continuous across a gateway restart)",
            path.display()
        );
    }
}

/// Reads the state file named in the settings (see [`state`]).
fn open_state(settings: &Settings, tasks: usize) -> StateStore {
    let Some(path) = &settings.state_file else {
        return StateStore::none();
    };
    let (store, read) = StateStore::open(path, tasks);
    match read {
        Ok(n) => tracing::info!(
            "state file {}: {n} sources restored (counters stay continuous across this restart)",
            path.display()
        ),
        Err(e) => tracing::warn!("{e}: starting without saved counter state"),
    }
    store
}

/// Writes the state file every `every` (what the receive tasks handed in).
async fn save_state(store: Arc<StateStore>, mut stop: watch::Receiver<bool>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    let mut failing = false;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = tick.tick() => {
                // Receive tasks hand in on the same period; give them a moment.
                tokio::time::sleep(Duration::from_millis(200)).await;
                let s = store.clone();
                let result = tokio::task::spawn_blocking(move || s.save()).await;
                match result {
                    Ok(Err(e)) if !failing => {
                        failing = true;
                        warn_state_file(&store, &e);
                    }
                    Ok(Ok(())) if failing => {
                        failing = false;
                        if let Some(path) = store.path() {
                            tracing::info!("state file {} written again", path.display());
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

/// Logs the counters every `log_every` and sends them to Ganglia as the
/// gateway's own metrics every `send_every` (zero: never).
async fn report_self(
    counters: Arc<Counters>,
    drops: KernelDrops,
    active: watch::Receiver<Arc<Active>>,
    mut stop: watch::Receiver<bool>,
    log_every: Duration,
    send_every: Duration,
) {
    let never = Duration::from_secs(86_400 * 365);
    let mut log_tick = tokio::time::interval(if log_every.is_zero() {
        never
    } else {
        log_every
    });
    let mut send_tick = tokio::time::interval(if send_every.is_zero() {
        never
    } else {
        send_every
    });
    log_tick.tick().await;
    send_tick.tick().await;
    let mut reporter = SelfReporter::new(crate::ganglia::local_hostname());
    let self_ip = local_ip();
    let mut batch = PacketBatch::default();
    let events = Events::new(&counters, active.borrow().settings.log_interval);
    let mut metadata_at: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = log_tick.tick() => {
                set_queue(&counters, &active.borrow().outbox);
                let kernel = drops.read().map(|d| d.to_string()).unwrap_or_else(|| "unknown".into());
                tracing::info!("counters: {} kernel_drops={kernel}", counters.snapshot());
            }
            _ = send_tick.tick() => {
                let a = active.borrow().clone();
                let now = Instant::now();
                set_queue(&counters, &a.outbox);
                let with_metadata = metadata_at.is_none_or(|t| t.elapsed() >= a.settings.metadata_interval);
                if with_metadata {
                    metadata_at = Some(now);
                }
                let tmax = ((send_every.as_secs_f64() * 1.5).ceil() as u32).max(1);
                reporter.encode(&mut batch, &counters.snapshot(), drops.read(), with_metadata, tmax, a.settings.dmax);
                a.deliver(&batch, self_ip, now, &events);
            }
        }
    }
}

#[cfg(test)]
mod tests;

pub mod follow;
pub mod packets;
mod pipeline;
mod queue;
mod receive;
pub mod requests;
mod sender;
mod series;
mod source;
pub mod state;
pub mod table;
mod template;
pub mod xml_port;
