//! The `serve` daemon: receive xrd.report datagrams, send Ganglia packets.
//!
//! One tokio task per listening socket; each owns its parser, mapper and the
//! state of the sources that send to it, so the per-datagram path takes no
//! lock. Per datagram: allow-list check -> [`summary`](crate::summary) ->
//! [`mapping`](crate::mapping) -> schedule (metadata on first sight, when
//! `metadata_interval` has passed for that metric, or when TMAX changes) ->
//! one batch of packets -> every send channel (non-blocking).
//!
//! A separate task logs the counters and sends them to Ganglia as the
//! gateway's own metrics ([`selfmon`](crate::selfmon)).
//!
//! Every record also carries a heartbeat for its spoofed host: metric
//! `heartbeat` as a 132 uint valued with the xrootd's start time (tos), which
//! gmond shows as the host's GMOND_STARTED (measured on gmond 3.7.2: a 133
//! string heartbeat, as gmetric -H sends, shows garbage; no 128 is needed).

use std::collections::HashMap;
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
use crate::ganglia::channel::{SendChannel, Sent};
use crate::ganglia::xdr::{self, Metadata, MetricId};
use crate::mapping::{MappedRecord, Mapper};
use crate::selfmon::{KernelDrops, SelfReporter};
use crate::summary::SummaryParser;
use requests::Request;
use series::{Counting, MetricState};
use state::{SavedSource, StateStore};
use template::Template;

/// Largest datagram we accept: xrootd 5.9+ sends up to 64 KiB.
const MAX_DATAGRAM: usize = 65536;

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
}

/// Settings and channels in force; replaced whole by a reload.
struct Active {
    settings: Settings,
    channels: Vec<SendChannel>,
}

/// A new configuration for a running gateway (SIGHUP): everything but the
/// listening sockets (and `stats_interval`) takes effect at once.
pub struct Reload {
    pub settings: Settings,
    pub channels: Vec<SendChannel>,
}

/// Runs the gateway on already-bound sockets until `shutdown` completes,
/// then handles what is already queued on the sockets and returns. Each
/// [`Reload`] received replaces the settings and channels of every receive
/// task between two datagrams; the sockets stay open, so nothing arriving
/// meanwhile is lost (it waits in the socket buffer).
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
    } = sockets;
    let store = Arc::new(open_state(&settings, sockets.len()));
    let save_every = settings.state_interval;
    let fds: Vec<RawFd> = sockets.iter().map(|s| s.as_raw_fd()).collect();
    let drops = KernelDrops::new(&fds);
    let (active_tx, active_rx) = watch::channel(Arc::new(Active { settings, channels }));
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
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            Some(r) = reloads.recv() => {
                let _ = active_tx.send(Arc::new(Active { settings: r.settings, channels: r.channels }));
                tracing::info!("configuration reloaded");
            }
        }
    }
    let _ = stop_tx.send(true);
    for t in tasks {
        let _ = t.await;
    }
    // Every receive task has handed in its final state.
    if let Err(e) = store.save() {
        tracing::warn!("cannot write the state file {:?}: {e}", store.path());
    }
    tracing::info!("stopped; counters: {}", counters.snapshot());
    Ok(())
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
                        tracing::warn!("cannot write the state file {:?}: {e} (counters will not stay continuous across a gateway restart)", store.path());
                    }
                    Ok(Ok(())) if failing => {
                        failing = false;
                        tracing::info!("state file {:?} written again", store.path());
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
    let mut metadata_at: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = log_tick.tick() => {
                let kernel = drops.read().map(|d| d.to_string()).unwrap_or_else(|| "unknown".into());
                tracing::info!("counters: {} kernel_drops={kernel}", counters.snapshot());
            }
            _ = send_tick.tick() => {
                let a = active.borrow().clone();
                let with_metadata = metadata_at.is_none_or(|t| t.elapsed() >= a.settings.metadata_interval);
                if with_metadata {
                    metadata_at = Some(Instant::now());
                }
                let tmax = ((send_every.as_secs_f64() * 1.5).ceil() as u32).max(1);
                for p in reporter.encode(&counters.snapshot(), drops.read(), with_metadata, tmax, a.settings.dmax) {
                    for ch in &a.channels {
                        // Counted nowhere: the gateway's own report must not move its own counters.
                        let _ = ch.send(p);
                    }
                }
            }
        }
    }
}

/// One receive task: a socket and everything its datagrams need.
struct Receiver {
    active: watch::Receiver<Arc<Active>>,
    counters: Arc<Counters>,
    pipeline: Pipeline,
    /// gmond's metadata requests, when they are listened for.
    requests: Option<tokio::sync::mpsc::Receiver<Request>>,
}

impl Receiver {
    fn new(active: watch::Receiver<Arc<Active>>, counters: Arc<Counters>) -> Receiver {
        let pipeline = Pipeline::new(&active.borrow().settings);
        Receiver {
            active,
            counters,
            pipeline,
            requests: None,
        }
    }

    async fn run(
        mut self,
        socket: UdpSocket,
        mut stop: watch::Receiver<bool>,
        save_every: Duration,
    ) {
        let mut save_tick = tokio::time::interval(save_every);
        save_tick.tick().await;
        let local = socket
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let mut current = self.active.borrow_and_update().clone();
        let mut events = Events::new(&self.counters, current.settings.log_interval);
        let mut buf = vec![0u8; MAX_DATAGRAM];
        loop {
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                _ = save_tick.tick() => self.pipeline.hand_in_state(),
                Some(request) = next_request(&mut self.requests) => {
                    let answered = self.pipeline.answer(&request, Instant::now(), &current.settings);
                    events.metadata_request(&request.host, &request.name, answered);
                    if answered {
                        self.pipeline.batch.send(&current.channels, &mut events, &current.settings).await;
                    }
                }
                Ok(()) = self.active.changed() => {
                    current = self.active.borrow_and_update().clone();
                    self.pipeline.reconfigure(&current.settings);
                    events = Events::new(&self.counters, current.settings.log_interval);
                }
                r = socket.recv_from(&mut buf) => match r {
                    Ok((n, from)) => self.pipeline.handle(&buf[..n], from, Instant::now(), &current.settings, &current.channels, &mut events).await,
                    Err(e) => events.receive_failed(local, &e),
                },
            }
        }
        // Finish what the kernel has already queued for us.
        while let Ok((n, from)) = socket.try_recv_from(&mut buf) {
            self.pipeline
                .handle(
                    &buf[..n],
                    from,
                    Instant::now(),
                    &current.settings,
                    &current.channels,
                    &mut events,
                )
                .await;
        }
        self.pipeline.hand_in_state();
    }
}

/// The next request, or never when requests are not listened for.
async fn next_request(queue: &mut Option<tokio::sync::mpsc::Receiver<Request>>) -> Option<Request> {
    match queue {
        Some(q) => q.recv().await,
        None => std::future::pending().await,
    }
}

/// Everything between a datagram and the packets it becomes.
pub struct Pipeline {
    parser: SummaryParser,
    mapper: Mapper,
    mapped: MappedRecord,
    sources: Sources,
    batch: PacketBatch,
    title: String,
    /// Reference point for the compact per-metric timestamps.
    epoch: Instant,
    /// Use the sources' templates ([`template`]); off only to test that
    /// the fast path equals the full one.
    fast_path: bool,
    /// Where the holes of the last matched template lie in the datagram.
    holes: Vec<std::ops::Range<u32>>,
    /// Records that took the fast path.
    fast_path_hits: u64,
    /// Where sources' counter state is saved and restored from, and this
    /// pipeline's part in it.
    store: Option<(Arc<StateStore>, usize)>,
}

impl Pipeline {
    pub fn new(settings: &Settings) -> Pipeline {
        Pipeline {
            parser: SummaryParser::new(),
            mapper: Mapper::new(settings.metric_name.clone(), settings.group_name.clone()),
            mapped: MappedRecord::default(),
            sources: Sources::default(),
            batch: PacketBatch::default(),
            title: String::new(),
            epoch: Instant::now(),
            fast_path: true,
            holes: Vec::new(),
            fast_path_hits: 0,
            store: None,
        }
    }

    /// Restores sources from `store` when first heard from, and hands their
    /// state in as part `task` ([`hand_in_state`](Self::hand_in_state)).
    pub fn keep_state(&mut self, store: Arc<StateStore>, task: usize) {
        self.store = Some((store, task));
    }

    /// Hands the sources' counter state to the store (for the state file).
    pub fn hand_in_state(&self) {
        let Some((store, task)) = &self.store else {
            return;
        };
        let mut text = String::new();
        for (ip, list) in &self.sources.by_ip {
            for source in list {
                let counters = source
                    .states
                    .iter()
                    .filter(|m| m.last_raw != 0 || m.offset != 0);
                if source.started.is_none() && counters.clone().next().is_none() {
                    continue;
                }
                state::write_source(&mut text, *ip, &source.program, source.started);
                for m in counters {
                    state::write_counter(&mut text, m.key, m.last_raw, m.offset);
                }
            }
        }
        store.hand_in(*task, text);
    }

    /// Takes new settings: new names and timing apply to the next record, and
    /// every metric's metadata is sent again then (DMAX or TMAX may differ).
    pub fn reconfigure(&mut self, settings: &Settings) {
        self.mapper = Mapper::new(settings.metric_name.clone(), settings.group_name.clone());
        for source in self.sources.by_ip.values_mut().flatten() {
            source.resend_everything();
        }
    }

    /// Handles one datagram: encodes its packets and sends them, paced.
    pub async fn handle(
        &mut self,
        datagram: &[u8],
        from: SocketAddr,
        now: Instant,
        settings: &Settings,
        channels: &[SendChannel],
        events: &mut Events<'_>,
    ) {
        self.encode(datagram, from, now, settings, events);
        self.batch.send(channels, events, settings).await;
    }

    /// Turns one datagram into the packets to send (left in the batch).
    pub fn encode(
        &mut self,
        datagram: &[u8],
        from: SocketAddr,
        now: Instant,
        settings: &Settings,
        events: &mut Events<'_>,
    ) {
        self.batch.clear();
        events.datagram();
        if !settings.allow.is_empty() && !settings.allow.iter().any(|n| n.contains(&from.ip())) {
            events.denied(from);
            return;
        }
        if self.fast_path && self.encode_from_template(datagram, from, now, settings, events) {
            return;
        }
        let record = match self.parser.parse(datagram) {
            Ok(r) => r,
            Err(e) => {
                events.parse_failed(from, datagram.len(), &e);
                return;
            }
        };
        events.record();
        self.mapper.map(&record, from.ip(), &mut self.mapped);
        if self.mapped.rejected_count > 0 {
            events.values_rejected(from, self.mapped.rejected_count, &self.mapped.rejected);
        }
        let header = record.header();
        let number = |v: Option<&str>| v.and_then(|t| t.trim().parse::<u32>().ok()).unwrap_or(0);
        let (tos, pid) = (number(header.tos), number(header.pid));

        let now_s = now.saturating_duration_since(self.epoch).as_secs() as u32;
        let interval_s = settings.metadata_interval.as_secs().min(u32::MAX as u64) as u32;
        let (source, created, evicted) = self.sources.get_or_insert(
            from.ip(),
            &self.mapped.program,
            now,
            settings.max_sources,
            self.mapped.len(),
        );
        if evicted > 0 {
            events.sources_evicted(evicted, settings.max_sources);
        }
        if created {
            events.source_added();
            if let Some(saved) = self
                .store
                .as_ref()
                .and_then(|(store, _)| store.claim(from.ip(), &self.mapped.program))
            {
                source.restore(saved, now_s);
            }
        }
        let tmax = announced_tmax(source.observe(now, settings.tmax), settings);
        let restarted = source.note_start(tos, pid);
        if restarted {
            events.restarted(
                from,
                &self.mapped.host.spoof,
                &self.mapped.program,
                tos,
                pid,
            );
            // Its counters count from zero again: continue from what was sent.
            for state in &mut source.states {
                state.restart();
            }
        }
        // Resend every metadata when what it carries changed, or the program
        // restarted (a new start time, and a gmond may have dropped it meanwhile).
        let refresh_all =
            restarted || source.host != self.mapped.host.spoof || source.metadata_tmax != tmax;
        if refresh_all {
            source.host.clear();
            source.host.push_str(&self.mapped.host.spoof);
            source.metadata_tmax = tmax;
        }
        if settings.answers_requests() {
            source.last_record.clear();
            source.last_record.extend_from_slice(datagram);
        }
        let spoof = self.mapped.host.spoof.as_str();

        // Heartbeat for the spoofed host: a 132 uint (gmond reads a
        // heartbeat's value as u32 whatever the packet; a 133 string shows
        // garbage). Its value becomes GMOND_STARTED. gmond shows it without
        // metadata, but asks for that metadata (a 136 on its send channels)
        // at every heartbeat: so it gets gmetric -H's, on the metrics' schedule.
        let hb = MetricId {
            host: spoof,
            name: "heartbeat",
            spoof: true,
        };
        let mut metadata_sent = 0u64;
        if refresh_all
            || source.heartbeat_meta_at == series::NEVER
            || now_s.saturating_sub(source.heartbeat_meta_at) >= interval_s
        {
            source.heartbeat_meta_at = now_s;
            self.batch.push(|out| encode_heartbeat_metadata(out, &hb));
            metadata_sent += 1;
        }
        self.batch.push(|out| xdr::encode_uint_value(out, &hb, tos));

        let mut capped = 0usize;
        let mut values_sent = 1u64;
        let mut number = [0u8; 20];
        for m in self.mapped.metrics() {
            let id = MetricId {
                host: spoof,
                name: m.name,
                spoof: true,
            };
            let Some((at, metadata_due)) = source.metric(
                m.name_key,
                now_s,
                interval_s,
                refresh_all,
                settings.max_metrics_per_source,
            ) else {
                capped += 1;
                continue;
            };
            if !source.states[at].first_in(source.reports) {
                continue;
            }
            if metadata_due {
                push_metadata(
                    &mut self.batch,
                    &mut self.title,
                    &id,
                    &m,
                    &self.mapped.program,
                    tmax,
                    settings.dmax,
                );
                metadata_sent += 1;
            }
            let state = &mut source.states[at];
            let value =
                series::counter_text(state, m.value.as_bytes(), Counting::of(m.kind), &mut number);
            if !state.admit(value, now_s, settings.value_heartbeat, metadata_due) {
                continue;
            }
            self.batch.push(|out| {
                xdr::encode_string_value_prefix(out, &id);
                xdr::append_string(out, value);
            });
            values_sent += 1;
        }
        if capped > 0 {
            events.metric_cap(from, spoof, capped, settings.max_metrics_per_source);
        }
        source.prune(now_s, settings.dmax, interval_s);
        events.sent(metadata_sent, values_sent);

        // The next record like this one takes the fast path: from a
        // source's second report on (a sender seen once, as in a flood of
        // one-shot senders, costs no template).
        source.template = None;
        if self.fast_path && capped == 0 && source.started.is_some() && source.reports >= 2 {
            let (index, states) = (&source.index, &source.states);
            let state = template::SourceState {
                spoof,
                tmax,
                heartbeat_meta_at: source.heartbeat_meta_at,
                metric: &|key| {
                    let at = *index.get(&key)?;
                    Some((at, states.get(at as usize)?.meta_at))
                },
                interval_s,
            };
            let built = Template::build(datagram, &record, &self.mapped, &state);
            source.template = built.map(Box::new);
        }
    }

    /// The fast path: the datagram matches the template of a source of its
    /// sender, and nothing but values changed (same program run, same
    /// TMAX, no metadata due). Returns false, having sent nothing, otherwise.
    fn encode_from_template(
        &mut self,
        datagram: &[u8],
        from: SocketAddr,
        now: Instant,
        settings: &Settings,
        events: &mut Events<'_>,
    ) -> bool {
        let Some(list) = self.sources.by_ip.get_mut(&from.ip()) else {
            return false;
        };
        let now_s = now.saturating_duration_since(self.epoch).as_secs() as u32;
        let interval_s = settings.metadata_interval.as_secs().min(u32::MAX as u64) as u32;
        let holes = &mut self.holes;
        let Some(source) = list.iter_mut().find(|s| {
            s.template
                .as_deref()
                .is_some_and(|t| t.matches(datagram, holes))
        }) else {
            return false;
        };
        let Some(t) = source.template.take() else {
            return false;
        };
        let (tos, pid) = t.start(datagram, &self.holes);
        // observe() notes the report; if the full path runs after all, it
        // notes it again at the same instant: a zero gap, which is ignored.
        let mut sent = None;
        if source.started == Some((tos, pid))
            && now_s < t.due_at
            && announced_tmax(source.observe(now, settings.tmax), settings) == t.tmax
            && source.metadata_tmax == t.tmax
        {
            if settings.answers_requests() {
                source.last_record.clear();
                source.last_record.extend_from_slice(datagram);
            }
            let values = template::Values {
                states: &mut source.states,
                now_s,
                heartbeat: settings.value_heartbeat,
            };
            sent = t.emit(datagram, &self.holes, tos, values, &mut self.batch);
        }
        source.template = Some(t);
        let Some(values) = sent else {
            return false;
        };
        events.record();
        source.prune(now_s, settings.dmax, interval_s);
        events.sent(0, values);
        self.fast_path_hits += 1;
        true
    }

    /// Answers gmond's metadata request: if `request` names a metric of a
    /// source of this pipeline, its last record's metadata and values go
    /// out at once (left in the batch), all of them, at most once per
    /// source per [`requests::ANSWER_HOLDOFF`]. Returns whether it did.
    pub fn answer(&mut self, request: &Request, now: Instant, settings: &Settings) -> bool {
        self.batch.clear();
        let Some(ip) = requests::spoof_ip(&request.host) else {
            return false;
        };
        // The heartbeat is every source's of the host: any of them answers.
        let key = crate::mapping::name_key(&request.name);
        let any = request.name == "heartbeat";
        let Some(source) = self.sources.by_ip.get_mut(&ip).and_then(|list| {
            list.iter_mut()
                .find(|s| s.host == request.host && (any || s.index.contains_key(&key)))
        }) else {
            return false;
        };
        if source.last_record.is_empty()
            || source
                .answered_at
                .is_some_and(|t| now.saturating_duration_since(t) < requests::ANSWER_HOLDOFF)
        {
            return false;
        }
        source.answered_at = Some(now);
        let Ok(record) = self.parser.parse(&source.last_record) else {
            return false;
        };
        self.mapper.map(&record, ip, &mut self.mapped);
        let now_s = now.saturating_duration_since(self.epoch).as_secs() as u32;
        let spoof = source.host.as_str();
        let hb = MetricId {
            host: spoof,
            name: "heartbeat",
            spoof: true,
        };
        self.batch.push(|out| encode_heartbeat_metadata(out, &hb));
        source.heartbeat_meta_at = now_s;
        let mut number = [0u8; 20];
        for m in self.mapped.metrics() {
            let Some(&at) = source.index.get(&m.name_key) else {
                continue;
            };
            let id = MetricId {
                host: spoof,
                name: m.name,
                spoof: true,
            };
            push_metadata(
                &mut self.batch,
                &mut self.title,
                &id,
                &m,
                &self.mapped.program,
                source.metadata_tmax,
                settings.dmax,
            );
            let state = &mut source.states[at as usize];
            state.meta_at = now_s;
            // The value as last sent: this record's reading plus the offset.
            let value = match (Counting::of(m.kind), series::parse_u64(m.value.as_bytes())) {
                (Counting::None, _) | (_, None) => m.value.as_bytes(),
                (_, Some(raw)) => series::format_u64(&mut number, raw.saturating_add(state.offset)),
            };
            self.batch.push(|out| {
                xdr::encode_string_value_prefix(out, &id);
                xdr::append_string(out, value);
            });
        }
        // Templates hold when metadata falls due next: build anew.
        source.template = None;
        true
    }

    /// Turns the template fast path off (or on again): for `dump` and for
    /// benchmarks of the full path. The packets are the same either way.
    pub fn set_fast_path(&mut self, on: bool) {
        self.fast_path = on;
        if !on {
            for source in self.sources.by_ip.values_mut().flatten() {
                source.template = None;
            }
        }
    }

    /// How many records took the template fast path.
    pub fn fast_path_hits(&self) -> u64 {
        self.fast_path_hits
    }

    /// The packets of the last [`encode`](Self::encode), for tests and dry runs.
    pub fn packets(&self) -> impl Iterator<Item = &[u8]> {
        self.batch.iter()
    }

    /// The metrics of the last record that took the full path, as mapped
    /// (for `dump`'s notes; `dump` turns the fast path off).
    pub fn mapped(&self) -> &MappedRecord {
        &self.mapped
    }

    pub fn sources(&self) -> usize {
        self.sources.len
    }
}

/// Encoded packets of one datagram, back to back.
#[derive(Default)]
struct PacketBatch {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl PacketBatch {
    fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
    }

    /// Appends one packet; a packet over [`xdr::MAX_PACKET`] is never sent
    /// (the sanitiser's caps make that impossible; this keeps it so).
    fn push(&mut self, encode: impl FnOnce(&mut Vec<u8>)) {
        let start = self.data.len();
        encode(&mut self.data);
        if self.data.len() - start > xdr::MAX_PACKET {
            tracing::error!(
                bytes = self.data.len() - start,
                "packet over 1464 bytes not sent"
            );
            self.data.truncate(start);
            return;
        }
        self.ends.push(self.data.len());
    }

    fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let p = &self.data[start..end];
            start = end;
            p
        })
    }

    /// Sends every packet to every channel. gmond reads its socket with the
    /// system's default receive buffer, a few hundred datagrams at Linux
    /// defaults: a batch longer than `send_burst` (the first sight of a big
    /// record, thousands of list entries) goes out in bursts, paced to
    /// `max_send_rate`, so gmond is not overrun and the records after it are
    /// not dropped on gmond's side. Ordinary records are one burst.
    async fn send(&self, channels: &[SendChannel], events: &mut Events<'_>, settings: &Settings) {
        let burst = settings.send_burst.max(1);
        let pause = match settings.max_send_rate {
            0 => Duration::ZERO,
            rate => Duration::from_secs_f64(burst as f64 / rate as f64),
        };
        let packets: Vec<&[u8]> = self.iter().collect();
        for (i, chunk) in packets.chunks(burst).enumerate() {
            if i > 0 && !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            for ch in channels {
                ch.send_all(chunk, |r| match r {
                    Ok(Sent::Ok) => {}
                    Ok(Sent::AfterRefusal) => events.send_refused(ch.label(), ch.target()),
                    Err(e) => events.send_failed(ch.label(), ch.target(), &e),
                });
            }
        }
    }
}

/// What the gateway remembers about one xrootd or cmsd.
struct Source {
    /// `pgm` or `pgm ins`.
    program: String,
    /// The spoof string its metadata was last sent with.
    host: String,
    last_seen: Instant,
    last_report: Option<Instant>,
    /// Reports seen (saturating).
    reports: u32,
    /// Report interval in seconds, once two reports have been seen.
    interval: Option<u32>,
    /// Consecutive gaps longer than `interval`.
    slower_gaps: u8,
    /// The TMAX its metadata was last sent with.
    metadata_tmax: u32,
    /// Metric name key -> its place in `states`. The key is a 64-bit hash
    /// of the name: a collision between two names of one source would
    /// merge their state (only a sender inventing names could hurt itself).
    index: HashMap<u64, u32, foldhash::fast::RandomState>,
    states: Vec<MetricState>,
    /// (tos, pid) of the program, to notice a restart.
    started: Option<(u32, u32)>,
    next_prune: u32,
    /// Its last record, for the fast path.
    template: Option<Box<Template>>,
    /// Its last datagram, to answer gmond's metadata requests (kept only
    /// when `metadata_requests` listens).
    last_record: Vec<u8>,
    /// When a metadata request for it was last answered.
    answered_at: Option<Instant>,
    /// When its heartbeat's metadata was last sent (pipeline seconds).
    heartbeat_meta_at: u32,
}

impl Source {
    /// A source whose first record has `metrics` metrics (its state is
    /// sized for them at once: no regrowth, less fragmentation when many
    /// sources come and go).
    fn new(program: &str, now: Instant, metrics: usize) -> Source {
        Source {
            program: program.to_string(),
            host: String::new(),
            last_seen: now,
            last_report: None,
            reports: 0,
            interval: None,
            slower_gaps: 0,
            metadata_tmax: 0,
            index: HashMap::with_capacity_and_hasher(metrics, Default::default()),
            states: Vec::with_capacity(metrics),
            started: None,
            next_prune: 0,
            template: None,
            last_record: Vec::new(),
            answered_at: None,
            heartbeat_meta_at: series::NEVER,
        }
    }

    /// Notes a report at `now`; returns the TMAX to announce: 1.5 x the
    /// report interval (one late report is not "stale"), or `default` until
    /// an interval has been seen. The interval follows a faster schedule at
    /// once but a slower one only after three slower gaps in a row, so a lost
    /// report does not change TMAX (which resends every metadata) twice.
    fn observe(&mut self, now: Instant, default: u32) -> u32 {
        let gap = self.last_report.map(|t| now.saturating_duration_since(t));
        self.last_report = Some(now);
        self.reports = self.reports.saturating_add(1);
        self.last_seen = now;
        // Reports come on whole seconds: round the gap.
        let gap = gap
            .filter(|g| *g >= Duration::from_millis(500) && *g <= Duration::from_secs(86_400))
            .map(|g| g.as_secs_f64().round() as u32);
        if let Some(gap) = gap {
            match self.interval {
                Some(known) if gap > known => {
                    self.slower_gaps += 1;
                    if self.slower_gaps >= 3 {
                        self.interval = Some(gap);
                        self.slower_gaps = 0;
                    }
                }
                _ => {
                    self.interval = Some(gap);
                    self.slower_gaps = 0;
                }
            }
        }
        match self.interval {
            Some(interval) => ((f64::from(interval) * 1.5).ceil() as u32).max(1),
            None => default,
        }
    }

    /// Notes the program's start time and pid; true if they changed (the
    /// xrootd restarted: counters start again from zero).
    fn note_start(&mut self, tos: u32, pid: u32) -> bool {
        let restarted = self.started.is_some_and(|s| s != (tos, pid));
        self.started = Some((tos, pid));
        restarted
    }

    /// The state of metric `key` (created if new) and whether its metadata
    /// is due; None when it is new and the source is at `cap`. Metadata is
    /// due on first sight, when `interval_s` has passed, and when `force`d
    /// (once per record: a name repeated in one record is sent once).
    fn metric(
        &mut self,
        key: u64,
        now_s: u32,
        interval_s: u32,
        force: bool,
        cap: usize,
    ) -> Option<(usize, bool)> {
        let at = match self.index.get(&key) {
            Some(&at) => at as usize,
            None if self.states.len() >= cap => return None,
            None => {
                self.index.insert(key, self.states.len() as u32);
                self.states.push(MetricState::new(key, now_s));
                self.states.len() - 1
            }
        };
        let t = &mut self.states[at].meta_at;
        let due =
            *t == series::NEVER || (force && *t != now_s) || now_s.saturating_sub(*t) >= interval_s;
        if due {
            *t = now_s;
        }
        Some((at, due))
    }

    /// Forgets metrics not reported for a long time (a list entry that went
    /// away), so they get metadata again if they come back after gmond
    /// dropped them. The template's places into `states` go with them.
    fn prune(&mut self, now_s: u32, dmax: u32, interval_s: u32) {
        if now_s < self.next_prune {
            return;
        }
        self.next_prune = now_s + interval_s;
        let keep_for = if dmax == 0 {
            interval_s.saturating_mul(10)
        } else {
            dmax.min(interval_s.saturating_mul(10))
        };
        let keep_for = keep_for.max(interval_s.saturating_mul(2));
        let before = self.states.len();
        self.states
            .retain(|s| now_s.saturating_sub(s.seen_at) <= keep_for);
        if self.states.len() != before {
            self.reindex();
        }
    }

    fn reindex(&mut self) {
        self.template = None;
        self.index.clear();
        for (i, s) in self.states.iter().enumerate() {
            self.index.insert(s.key, i as u32);
        }
    }

    /// Takes over what the state file kept of this source: its start and
    /// its counters (their metadata is still to be sent).
    fn restore(&mut self, saved: SavedSource, now_s: u32) {
        self.started = saved.started;
        for (key, last_raw, offset) in saved.counters {
            if self.index.contains_key(&key) {
                continue;
            }
            let mut m = MetricState::new(key, now_s);
            m.last_raw = last_raw;
            m.offset = offset;
            self.index.insert(key, self.states.len() as u32);
            self.states.push(m);
        }
    }

    /// A reload: every metadata is sent again with the next record (names,
    /// DMAX or TMAX may differ); counters stay continuous.
    fn resend_everything(&mut self) {
        self.template = None;
        self.heartbeat_meta_at = series::NEVER;
        self.metadata_tmax = 0;
        for s in &mut self.states {
            s.meta_at = series::NEVER;
        }
    }
}

/// TMAX as announced: with changed-only sending, an unchanged value may go
/// `value_heartbeat` seconds unsent, so TMAX grows by as much and gmond's
/// TN stays below it.
fn announced_tmax(base: u32, settings: &Settings) -> u32 {
    base.saturating_add(settings.value_heartbeat.unwrap_or(0))
}

/// Appends the heartbeat's metadata, as `gmetric -S HOST -H` sends it.
fn encode_heartbeat_metadata(out: &mut Vec<u8>, id: &MetricId<'_>) {
    let extra = [("SPOOF_HOST", id.host), ("SPOOF_HEARTBEAT", "yes")];
    let meta = Metadata {
        value_type: "uint32",
        units: "",
        slope: xdr::Slope::Zero,
        tmax: 0,
        dmax: 0,
        extra: &extra,
    };
    xdr::encode_metadata(out, id, &meta);
}

/// Appends a metric's metadata (128) packet.
fn push_metadata(
    batch: &mut PacketBatch,
    title: &mut String,
    id: &MetricId<'_>,
    m: &crate::mapping::Metric<'_>,
    program: &str,
    tmax: u32,
    dmax: u32,
) {
    title.clear();
    m.write_title(title, program);
    let extra = [
        ("SPOOF_HOST", id.host),
        ("GROUP", m.group),
        ("DESC", m.desc()),
        ("TITLE", title.as_str()),
    ];
    let meta = Metadata {
        value_type: m.value_type(),
        units: m.units(),
        slope: m.slope(),
        tmax,
        dmax,
        extra: &extra,
    };
    batch.push(|out| xdr::encode_metadata(out, id, &meta));
}

/// Sources by sender IP (a handful per IP: xrootd, cmsd, instances).
#[derive(Default)]
struct Sources {
    by_ip: HashMap<IpAddr, Vec<Source>>,
    len: usize,
}

impl Sources {
    /// The source, created if new; evicts the least recently seen tenth
    /// when over `cap`. Returns it, whether it is new, and how many were evicted.
    fn get_or_insert(
        &mut self,
        ip: IpAddr,
        program: &str,
        now: Instant,
        cap: usize,
        metrics: usize,
    ) -> (&mut Source, bool, usize) {
        let exists = self
            .by_ip
            .get(&ip)
            .is_some_and(|v| v.iter().any(|s| s.program == program));
        let mut evicted = 0;
        if !exists {
            if self.len >= cap {
                evicted = self.evict(cap);
            }
            self.by_ip
                .entry(ip)
                .or_default()
                .push(Source::new(program, now, metrics));
            self.len += 1;
        }
        let list = self.by_ip.entry(ip).or_default();
        let at = list.iter().position(|s| s.program == program).unwrap_or(0);
        (&mut list[at], !exists, evicted)
    }

    fn evict(&mut self, cap: usize) -> usize {
        let target = cap - cap / 10 - 1;
        let mut seen: Vec<Instant> = self.by_ip.values().flatten().map(|s| s.last_seen).collect();
        if seen.len() <= target {
            return 0;
        }
        let drop = seen.len() - target;
        let (_, cutoff, _) = seen.select_nth_unstable(drop - 1);
        let cutoff = *cutoff;
        let mut removed = 0;
        for list in self.by_ip.values_mut() {
            list.retain(|s| {
                let keep = s.last_seen > cutoff || removed >= drop;
                if !keep {
                    removed += 1;
                }
                keep
            });
        }
        self.by_ip.retain(|_, l| !l.is_empty());
        self.len -= removed;
        removed
    }
}

#[cfg(test)]
mod tests;

pub mod requests;
mod series;
pub mod state;
mod template;
