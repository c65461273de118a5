//! The `serve` daemon: sockets, tasks and threads around the engines.
//!
//! The data path, top-down:
//!
//! ```text
//! socket ──> receive ──> engine ───────────────> queue ──> sender ──> gmond
//!            (a task per (crate::engine: parse,  (one per  (a thread per
//!             socket)     map, source state,      channel,  channel: gmond's
//!                         packets)                conflating) queue or a bucket)
//!                      └──> table ──> xml_port ──> gmetad (with xml_listen)
//! ```
//!
//! * [`receive`]: one task per listening socket, each with its own
//!   [`Engine`](crate::engine::Engine); never waits for a send.
//! * [`queue`]: per channel, at most one pending metadata and one pending
//!   value per (host, metric); newer replaces older.
//! * [`sender`]: a thread per channel, following the receive queue of a
//!   gmond on this host ([`follow`]) or paced by a token bucket
//!   (`max_send_rate`, `send_burst`), as its [`pacer`] decides; at stop,
//!   drains for at most `drain_timeout`.
//! * [`table`]: with `xml_listen`, what a gmond fed the same packets
//!   would hold, which [`xml_port`] writes as gmond's XML to each poll:
//!   gmetad polls the gateway, with or without a gmond.
//!
//! Beside them: [`requests`] hears gmond's metadata requests (136) and
//! hands them to the receive tasks, whose answers go through the same
//! queues; [`state_file`] keeps counter continuity across gateway
//! restarts; [`self_metrics`] logs the counters and sends them as the
//! gateway's own metrics; [`control`] answers `xrd2ganglia status` (the
//! receive tasks hand it their sources between two datagrams); [`peer`]
//! keeps two gateways of a pair in step (counter state, XCache totals,
//! the standby's sending); [`recover`] reads back the last values
//! published (`recover_from`) at start; [`bind`] binds every socket.
//!
//! What the engines share is handed to each when it is made
//! ([`Shared`](crate::engine::Shared)), and why they share it: the names
//! of the clusters (one name is one cluster whichever socket its servers
//! send to) and the saved state, each engine its part, which the state
//! file's writer saves and the peer exchange fills and reads.

use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;
use tokio::sync::{oneshot, watch};

use crate::config::Settings;
use crate::engine::Shared;
use crate::engine::packets::{ForgottenHost, PacketBatch};
use crate::events::{Counters, Events};
use crate::ganglia::channel::SendChannel;
use receive::Receiver;
use self_metrics::KernelDrops;
use sender::{Outbox, Senders};
use state_file::StateStore;
use table::HostTable;

/// Opens every channel of the settings: the default ones, then each
/// `[[cluster]]` rule's, in order (as [`Senders::start`] takes them).
pub fn open_channels(settings: &Settings) -> io::Result<Vec<SendChannel>> {
    let rules = settings.grouping.rules.iter().flat_map(|r| &r.channels);
    settings
        .channels
        .iter()
        .chain(rules)
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
    /// Where gmetad polls for gmond's XML (`xml_listen`): bound, listening
    /// only once the gateway can answer ([`xml_port::Warmup`]).
    pub xml: Vec<std::net::TcpListener>,
    /// The `[[cluster]]` rules' own XML ports, each with its port number
    /// (the rule's `port`): bound and listening as `xml`.
    pub rule_xml: Vec<(u32, std::net::TcpListener)>,
    /// Where the peer gateway exchanges state (`peer_listen`).
    pub peer: Vec<std::net::TcpListener>,
    /// Where `xrd2ganglia status` asks (`control_socket`).
    pub control: Option<control::ControlListener>,
}

/// The settings, send queues and XML table in force; replaced whole by
/// a reload.
pub(crate) struct InForce {
    settings: Arc<Settings>,
    outbox: Arc<Outbox>,
    /// What the XML port writes (when `xml_listen` is set); the same
    /// table across reloads.
    table: Option<Arc<HostTable>>,
    /// Nothing is queued for gmond while set: the standby of a pair whose
    /// peer is up ([`peer`]). The same flag across reloads.
    paused: Arc<AtomicBool>,
    /// Dropped with the last task's hold of these settings: what tells
    /// [`retire`] that nothing queues into their senders any more (the
    /// dropped sender of mini-redis's shutdown).
    _held: oneshot::Sender<()>,
}

impl InForce {
    /// Settings, send queues and table in force; the receiver learns when
    /// the last hold of them is dropped.
    fn new(
        settings: Arc<Settings>,
        outbox: Arc<Outbox>,
        table: Option<Arc<HostTable>>,
        paused: Arc<AtomicBool>,
    ) -> (InForce, oneshot::Receiver<()>) {
        let (held, released) = oneshot::channel();
        let in_force = InForce {
            settings,
            outbox,
            table,
            paused,
            _held: held,
        };
        (in_force, released)
    }

    /// Sends a batch (queues it for every channel) and takes it into the
    /// XML table: what `ip` (the record's sender) reported, at `now`.
    fn deliver(&self, batch: &PacketBatch, ip: IpAddr, now: Instant, events: &Events<'_>) {
        if !self.paused.load(Relaxed) {
            self.outbox.queue(batch, now, events);
        }
        if let Some(table) = &self.table {
            let evicted = table.take(batch, ip, now);
            events.xml_hosts_evicted(evicted);
        }
    }

    /// Takes out of the send queues and the XML table the hosts of the
    /// sources an engine forgot (`max_sources`): a flood of new sources
    /// leaves at most `max_sources` hosts' packets queued, however far
    /// behind the senders are.
    fn forget(&self, forgotten: &[ForgottenHost], events: &Events<'_>) {
        if forgotten.is_empty() {
            return;
        }
        self.outbox.forget(forgotten, events);
        if let Some(table) = &self.table {
            table.forget(forgotten);
        }
    }
}

/// A new configuration for a running gateway (SIGHUP): every key takes
/// effect at once but those that wait for a restart
/// ([`crate::config::OnSighup::Restart`]).
pub struct Reload {
    pub settings: Settings,
    pub channels: Vec<SendChannel>,
}

/// Runs the gateway on already-bound sockets until `shutdown` completes,
/// then stops receiving (handling what is already queued on the sockets),
/// sends what is queued for at most `drain_timeout`, writes the state file,
/// lets the XML ports (closed at the stop) finish the documents being
/// written, for at most `drain_timeout` from the stop too, and returns. Each [`Reload`] received replaces the settings and senders
/// of every receive task between two datagrams (the old senders drain
/// meanwhile); the sockets stay open, so nothing arriving meanwhile is lost
/// (it waits in the socket buffer).
pub async fn run(
    settings: Settings,
    mut sockets: Sockets,
    channels: Vec<SendChannel>,
    counters: Arc<Counters>,
    shutdown: impl Future<Output = ()>,
    mut reloads: tokio::sync::mpsc::Receiver<Reload>,
) -> io::Result<()> {
    let settings = Arc::new(settings);
    let table = (!sockets.xml.is_empty()).then(|| Arc::new(HostTable::new(table_cap(&settings))));
    let store = Arc::new(open_state(&settings, &counters));
    // The last values published (`recover_from`), before any record.
    recover::recover(&settings, store.state()).await;
    let (stop_tx, stop) = watch::channel(false);
    let (pairing, peer_tasks) =
        Pairing::start(&settings, &store, &table, &counters, &mut sockets, &stop).await;
    let paused = pairing
        .as_ref()
        .map(|p| p.link.paused.clone())
        .unwrap_or_default();
    let mut senders = Senders::start(&settings, channels, counters.clone());
    let (first, mut released) = InForce::new(
        settings.clone(),
        senders.outbox.clone(),
        table.clone(),
        paused.clone(),
    );
    let (in_force_tx, in_force) = watch::channel(Arc::new(first));
    let gateway = Gateway {
        settings: &settings,
        store: &store,
        table: &table,
        in_force: &in_force,
        counters: &counters,
        stop: &stop,
    };
    let (mut tasks, xml_ports) = spawn_tasks(sockets, &gateway, pairing)?;
    tasks.extend(peer_tasks);
    let mut drain_timeout = settings.drain_timeout;
    tokio::pin!(shutdown);
    let mut retired = Vec::new();
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            Some(r) = reloads.recv() => {
                let new = Senders::start(&r.settings, r.channels, counters.clone());
                let old = std::mem::replace(&mut senders, new);
                drain_timeout = r.settings.drain_timeout;
                if let Some(table) = &table {
                    table.set_max_hosts(table_cap(&r.settings));
                }
                let settings = Arc::new(r.settings);
                let outbox = senders.outbox.clone();
                let (new, now_released) = InForce::new(settings, outbox, table.clone(), paused.clone());
                drop(in_force_tx.send_replace(Arc::new(new)));
                let was_released = std::mem::replace(&mut released, now_released);
                retired.push(tokio::spawn(retire(old, was_released, drain_timeout)));
                tracing::info!("configuration reloaded");
            }
        }
    }
    let stopping = Instant::now();
    let _ = stop_tx.send(true);
    for t in tasks {
        let _ = t.await;
    }
    // The XML ports finish the documents being written meanwhile (for at
    // most `drain_timeout` from the stop, as the senders).
    stop_sending(senders, retired, stopping, drain_timeout, &counters).await;
    // Every receive task has handed in its final state.
    if let Err(e) = store.save() {
        state_file::warn_unwritable(&store, &e);
    }
    for t in xml_ports {
        let _ = t.await;
    }
    lock_wait::log();
    tracing::info!("stopped; counters: {}", counters.snapshot());
    Ok(())
}

/// The XML table's cap: `max_sources` servers' hosts and the gateway's
/// own (so that a site with exactly `max_sources` servers evicts none).
fn table_cap(settings: &Settings) -> usize {
    settings.max_sources.saturating_add(1)
}

/// Retires the senders a reload replaced: once no task holds the settings
/// they belonged to (a receive task takes the new ones between two
/// datagrams, and until then may still queue into the old senders; the
/// last one to let go drops what `released` waits on), or after
/// `drain_timeout` at most, they send what is queued for at most
/// `drain_timeout`.
async fn retire(senders: Senders, released: oneshot::Receiver<()>, drain_timeout: Duration) {
    let deadline = tokio::time::Instant::from_std(after(Instant::now(), drain_timeout));
    // Nothing is ever sent: the sender's drop is the signal.
    let _ = tokio::time::timeout_at(deadline, released).await;
    senders.drain(after(Instant::now(), drain_timeout)).await;
}

/// `at` + `d`, saturating: a duration from the config (range-checked,
/// each key's `range` in `config::keys`) never panics the daemon where it meets the
/// clock ("overflow when adding duration to instant": exit 101, no state
/// saved, was what `drain_timeout = 18446744073709551615` did at a stop).
pub(crate) fn after(at: Instant, d: Duration) -> Instant {
    at.checked_add(d)
        .or_else(|| at.checked_add(Duration::from_secs(u64::from(u32::MAX))))
        .unwrap_or(at)
}

/// The peer exchange, set up at the start ([`peer`]).
struct Pairing {
    link: Arc<peer::Link>,
    /// Each receive task's end of the exchange's asks.
    asks: Vec<tokio::sync::mpsc::Receiver<peer::Ask>>,
    /// Whether the start-up pull brought the peer's state and records
    /// (the XML port then listens at once).
    pulled: bool,
}

type Tasks = Vec<tokio::task::JoinHandle<()>>;

impl Pairing {
    /// With a `peer`: answers the peer's exchanges (from the saved state
    /// until the receive tasks run: two gateways that start together ask
    /// each other at once), then pulls its state into the saved state and
    /// its last records into the table, before any receive task runs.
    async fn start(
        settings: &Arc<Settings>,
        store: &StateStore,
        table: &Option<Arc<HostTable>>,
        counters: &Arc<Counters>,
        sockets: &mut Sockets,
        stop: &watch::Receiver<bool>,
    ) -> (Option<Pairing>, Tasks) {
        if settings.peer.is_none() {
            return (None, Vec::new());
        }
        let (txs, asks) = (0..sockets.reports.len())
            .map(|_| tokio::sync::mpsc::channel(peer::ASK_QUEUE))
            .unzip();
        let link = Arc::new(peer::Link::new(settings, store.state().clone(), txs));
        let mut tasks = Vec::new();
        for listener in std::mem::take(&mut sockets.peer) {
            let (link, settings, counters) = (link.clone(), settings.clone(), counters.clone());
            let serve = peer::serve(listener, link, settings, counters, stop.clone());
            tasks.push(tokio::spawn(serve));
        }
        let records = peer::pull(&link, settings, counters, table.as_deref()).await;
        // A peer that had heard no one (it is starting too) leaves the
        // table empty: then the state file's sources are waited for, as
        // without a peer.
        let pulled = records.is_some_and(|r| r > 0 || store.state().unclaimed() == 0);
        let pairing = Pairing { link, asks, pulled };
        (Some(pairing), tasks)
    }
}

/// The gateway's parts every task is made from.
struct Gateway<'a> {
    settings: &'a Arc<Settings>,
    store: &'a Arc<StateStore>,
    table: &'a Option<Arc<HostTable>>,
    in_force: &'a watch::Receiver<Arc<InForce>>,
    counters: &'a Arc<Counters>,
    stop: &'a watch::Receiver<bool>,
}

/// Starts a task per socket: the receive tasks (each with its engine and
/// its part of the saved state), the request listeners, the XML port, the
/// peer exchange, the state file's writer and the self-metrics; the XML
/// ports' tasks apart (at a stop they finish the documents being written).
fn spawn_tasks(
    sockets: Sockets,
    gateway: &Gateway<'_>,
    pairing: Option<Pairing>,
) -> io::Result<(Tasks, Tasks)> {
    let Gateway {
        settings,
        store,
        table,
        in_force,
        counters,
        stop,
    } = *gateway;
    let fds: Vec<RawFd> = sockets.reports.iter().map(|s| s.as_raw_fd()).collect();
    let mut xml_ports = Vec::new();
    let (link, peer_asks, pulled) = match pairing {
        Some(p) => (Some(p.link), p.asks, p.pulled),
        None => (None, Vec::new(), false),
    };
    // The peer's entries go to the engines from before they hear anyone
    // (their asks wait in each task's queue until it runs): merged into
    // the saved state meanwhile, an entry would lie there beside the
    // engine's own source once that source is heard.
    if let Some(link) = &link {
        link.engines_run();
    }
    let listening = Listening {
        requests: !sockets.requests.is_empty(),
        control: sockets.control.is_some(),
    };
    let (mut tasks, request_queues, ask_queues) =
        spawn_receivers(sockets.reports, gateway, listening, peer_asks)?;
    for socket in sockets.requests {
        let (queues, log_interval) = (request_queues.clone(), settings.log_interval);
        let listen = requests::listen(socket, queues, counters.clone(), log_interval, stop.clone());
        tasks.push(tokio::spawn(listen));
    }
    // The gateway's own host, in the table before the XML ports listen.
    let self_metrics = self_metrics::SelfMetrics::start(
        counters.clone(),
        KernelDrops::new(&fds),
        in_force.clone(),
    );
    // A restart seen after a gap, the peer unreachable: `recover_from`
    // read for it; the XML ports refuse while its counters are held.
    let (held_tx, held) = watch::channel(false);
    let holds = link
        .is_some()
        .then(|| recover::Holds::new(store.state().clone(), held.clone()));
    if let Some(link) = &link {
        let floors = recover::keep_floors(
            settings.clone(),
            store.state().clone(),
            link.clone(),
            held_tx,
            stop.clone(),
        );
        tasks.push(tokio::spawn(floors));
    }
    if let Some(table) = table {
        let ports = sockets.xml.into_iter().map(|l| (None, l));
        let ports = ports.chain(sockets.rule_xml.into_iter().map(|(p, l)| (Some(p), l)));
        let peer = link.as_ref().map(|l| (pulled, l.deaf(), held.clone()));
        let port = PortTask {
            table,
            store,
            settings,
            in_force,
            counters,
            stop,
        };
        xml_ports.extend(ports.map(|(rule, listener)| port.spawn(rule, listener, peer.clone())));
    }
    // The kernel's drops at the listening sockets: warned of, and in `status`.
    let drops = Arc::new(drops::DropWatch::new(KernelDrops::new(&fds)));
    let watch = drops::watch(
        drops.clone(),
        counters.clone(),
        settings.log_interval,
        stop.clone(),
    );
    tasks.push(tokio::spawn(watch));
    if let Some(link) = &link {
        tasks.extend(spawn_peer(link, gateway));
    }
    if let Some(listener) = sockets.control {
        let parts = control::Parts {
            asks: ask_queues,
            counters: counters.clone(),
            drops: Some(drops.clone()),
            state: store.path().is_some().then(|| store.clone()),
            pair: link.clone(),
            holds,
        };
        let serve = control::serve(listener, parts, settings.log_interval, stop.clone());
        tasks.push(tokio::spawn(serve));
    }
    if store.path().is_some() {
        let save = state_file::save_every(store.clone(), stop.clone(), settings.state_interval);
        tasks.push(tokio::spawn(save));
    }
    tasks.push(tokio::spawn(self_metrics.run(stop.clone())));
    Ok((tasks, xml_ports))
}

/// A receive task's queue of gmond's metadata requests.
type RequestQueue = tokio::sync::mpsc::Sender<crate::engine::Request>;
/// A receive task's queue of `status`'s asks.
type AskQueue = tokio::sync::mpsc::Sender<control::Ask>;

/// Which queues the receive tasks take asks from besides their sockets.
#[derive(Clone, Copy)]
struct Listening {
    /// gmond's metadata requests (`metadata_requests`).
    requests: bool,
    /// `xrd2ganglia status` (`control_socket`).
    control: bool,
}

/// The receive tasks, one per socket of `reports`, their engines sharing
/// the cluster names and the saved state (each its part); with the
/// queues that hand them gmond's requests and `status`'s asks, as
/// `listening` says. `peer_asks`: each task's end of the peer exchange.
fn spawn_receivers(
    reports: Vec<std::net::UdpSocket>,
    gateway: &Gateway<'_>,
    listening: Listening,
    peer_asks: Vec<tokio::sync::mpsc::Receiver<peer::Ask>>,
) -> io::Result<(Tasks, Vec<RequestQueue>, Vec<AskQueue>)> {
    let mut tasks = Vec::new();
    let mut request_queues = Vec::new();
    let mut ask_queues = Vec::new();
    let cluster_names = Arc::new(crate::engine::clusters::ClusterNames::default());
    let mut peer_asks = peer_asks.into_iter();
    for (part, socket) in reports.into_iter().enumerate() {
        let socket = UdpSocket::from_std(socket)?;
        let requests = listening.requests.then(|| {
            let (tx, rx) = tokio::sync::mpsc::channel(requests::QUEUE);
            request_queues.push(tx);
            rx
        });
        let asks = listening.control.then(|| {
            let (tx, rx) = tokio::sync::mpsc::channel(control::ASK_QUEUE);
            ask_queues.push(tx);
            rx
        });
        let shared = Shared {
            clusters: cluster_names.clone(),
            saved: Some((gateway.store.state().clone(), part)),
        };
        let (in_force, counters) = (gateway.in_force.clone(), gateway.counters.clone());
        let mut receiver = Receiver::new(in_force, counters, shared, requests, asks);
        if let Some(asks) = peer_asks.next() {
            receiver.hear_peer(asks);
        }
        let run = receiver.run(
            socket,
            gateway.stop.clone(),
            gateway.settings.state_interval,
        );
        tasks.push(tokio::spawn(run));
    }
    Ok((tasks, request_queues, ask_queues))
}

/// The peer exchange's tasks once the receive tasks run: keeping in step,
/// hearing the peer, and watching gmond's evidence for the standby.
fn spawn_peer(link: &Arc<peer::Link>, gateway: &Gateway<'_>) -> Tasks {
    let (settings, counters, stop) = (gateway.settings, gateway.counters, gateway.stop);
    vec![
        tokio::spawn(peer::keep_in_step(
            link.clone(),
            settings.clone(),
            counters.clone(),
            stop.clone(),
        )),
        tokio::spawn(peer::hearing(link.clone(), counters.clone(), stop.clone())),
        tokio::spawn(peer::watch_evidence(
            link.clone(),
            settings.clone(),
            stop.clone(),
        )),
    ]
}

/// What each XML port's task (the gateway's and each rule's) is given.
struct PortTask<'a> {
    table: &'a Arc<HostTable>,
    store: &'a Arc<StateStore>,
    settings: &'a Arc<Settings>,
    in_force: &'a watch::Receiver<Arc<InForce>>,
    counters: &'a Arc<Counters>,
    stop: &'a watch::Receiver<bool>,
}

impl PortTask<'_> {
    /// Serves `listener` (a rule's port, or the gateway's when `rule` is
    /// None) once it can answer: after the state file's sources, or after
    /// the peer's pull (`peer`: whether one was pulled) when paired.
    fn spawn(
        &self,
        rule: Option<u32>,
        listener: std::net::TcpListener,
        peer: Option<(bool, watch::Receiver<bool>, watch::Receiver<bool>)>,
    ) -> tokio::task::JoinHandle<()> {
        let started = Instant::now();
        let state = self.store.state().clone();
        let mut warmup = xml_port::Warmup::new(state, started, self.settings.warmup_max);
        if let Some((pulled, deaf, held)) = peer {
            warmup = warmup
                .after_peer(watch::channel(Some(pulled)).1)
                .hand_over_when(deaf)
                .hand_over_while_held(held);
        }
        tokio::spawn(xml_port::serve(
            listener,
            rule,
            self.table.clone(),
            self.in_force.clone(),
            self.counters.clone(),
            warmup,
            self.stop.clone(),
        ))
    }
}

/// Sends what is queued (nothing is queued any more) for at most
/// `drain_timeout` from `stopping`, and lets the senders retired by
/// reloads finish.
async fn stop_sending(
    senders: Senders,
    retired: Vec<tokio::task::JoinHandle<()>>,
    stopping: Instant,
    drain_timeout: Duration,
    counters: &Counters,
) {
    let left = senders.outbox.stats(Instant::now()).packets;
    if left > 0 {
        tracing::info!(
            "stopping: sending {left} queued packets (for at most {} s)",
            drain_timeout.as_secs_f64()
        );
    }
    let outbox = senders.outbox.clone();
    senders.drain(after(stopping, drain_timeout)).await;
    for t in retired {
        let _ = t.await;
    }
    set_queue(counters, &outbox);
}

/// Notes the send queues' length and age in the counters (gauges).
fn set_queue(counters: &Counters, outbox: &Outbox) {
    let s = outbox.stats(Instant::now());
    counters.set_queue(s.packets, s.oldest);
}

/// Reads the state file named in the settings ([`state_file`]).
fn open_state(settings: &Settings, counters: &Counters) -> StateStore {
    let Some(path) = &settings.state_file else {
        return StateStore::none();
    };
    let max_bytes =
        (settings.max_sources as u64).saturating_mul(crate::engine::saved::BYTES_PER_SOURCE as u64);
    let (mut store, read) = StateStore::open(path, max_bytes);
    if settings.state_lock_pending {
        store.lock_at_save();
    }
    match read {
        Ok((n, skipped)) => {
            crate::events::state_lines_skipped(counters, path, &skipped);
            tracing::info!(
                "state file {}: {n} sources restored (counters stay continuous across this restart)",
                path.display()
            );
        }
        Err(e) => tracing::warn!("{e}: starting without saved counter state"),
    }
    // Written once at the start: a full disk or a read-only directory is
    // said now (the log, `status`), not a `state_interval` later.
    store.save_and_say();
    store
}

pub mod bind;
pub mod control;
pub mod drops;
pub mod follow;
pub mod lock_wait;
mod pacer;
pub mod peer;
mod queue;
mod receive;
mod recover;
pub mod requests;
mod retire;
pub mod self_metrics;
mod sender;
pub mod state_file;
pub mod table;
pub mod xml_port;

#[cfg(test)]
mod tests;
