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
use std::hash::BuildHasherDefault;
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
use crate::mapping::{KeyHasher, MappedRecord, Mapper};
use crate::selfmon::{KernelDrops, SelfReporter};
use crate::summary::SummaryParser;
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
    sockets: Vec<std::net::UdpSocket>,
    channels: Vec<SendChannel>,
    counters: Arc<Counters>,
    shutdown: impl Future<Output = ()>,
    mut reloads: tokio::sync::mpsc::Receiver<Reload>,
) -> io::Result<()> {
    let (log_every, send_every) = (settings.stats_interval, settings.self_metrics_interval);
    let fds: Vec<RawFd> = sockets.iter().map(|s| s.as_raw_fd()).collect();
    let drops = KernelDrops::new(&fds);
    let (active_tx, active_rx) = watch::channel(Arc::new(Active { settings, channels }));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = Vec::new();
    for socket in sockets {
        let socket = UdpSocket::from_std(socket)?;
        let receiver = Receiver::new(active_rx.clone(), counters.clone());
        tasks.push(tokio::spawn(receiver.run(socket, stop_rx.clone())));
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
    tracing::info!("stopped; counters: {}", counters.snapshot());
    Ok(())
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
}

impl Receiver {
    fn new(active: watch::Receiver<Arc<Active>>, counters: Arc<Counters>) -> Receiver {
        let pipeline = Pipeline::new(&active.borrow().settings);
        Receiver {
            active,
            counters,
            pipeline,
        }
    }

    async fn run(mut self, socket: UdpSocket, mut stop: watch::Receiver<bool>) {
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
                Ok(()) = self.active.changed() => {
                    current = self.active.borrow_and_update().clone();
                    self.pipeline.reconfigure(&current.settings, &events);
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
        }
    }

    /// Takes new settings: new names and timing apply to the next record, and
    /// every metric's metadata is sent again then (DMAX or TMAX may differ).
    pub fn reconfigure(&mut self, settings: &Settings, events: &Events<'_>) {
        self.mapper = Mapper::new(settings.metric_name.clone(), settings.group_name.clone());
        events.sources_forgotten(self.sources.len);
        self.sources = Sources::default();
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
        let (source, created, evicted) =
            self.sources
                .get_or_insert(from.ip(), &self.mapped.program, now, settings.max_sources);
        if evicted > 0 {
            events.sources_evicted(evicted, settings.max_sources);
        }
        if created {
            events.source_added();
        }
        let tmax = source.observe(now, settings.tmax);
        let restarted = source.note_start(tos, pid);
        if restarted {
            events.restarted(
                from,
                &self.mapped.host.spoof,
                &self.mapped.program,
                tos,
                pid,
            );
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
        let spoof = self.mapped.host.spoof.as_str();

        // Heartbeat for the spoofed host: a 132 uint (gmond reads a
        // heartbeat's value as u32 whatever the packet; a 133 string shows
        // garbage) needing no metadata. Its value becomes GMOND_STARTED.
        let hb = MetricId {
            host: spoof,
            name: "heartbeat",
            spoof: true,
        };
        self.batch.push(|out| xdr::encode_uint_value(out, &hb, tos));
        let mut metadata_sent = 0u64;

        let mut capped = 0usize;
        let mut values_sent = 1u64;
        for m in self.mapped.metrics() {
            let id = MetricId {
                host: spoof,
                name: m.name,
                spoof: true,
            };
            match source.metric_due(
                m.name_key,
                now_s,
                interval_s,
                refresh_all,
                settings.max_metrics_per_source,
            ) {
                Due::Capped => {
                    capped += 1;
                    continue;
                }
                Due::No => {}
                Due::Yes => {
                    self.title.clear();
                    m.write_title(&mut self.title, &self.mapped.program);
                    let extra = [
                        ("SPOOF_HOST", spoof),
                        ("GROUP", m.group),
                        ("DESC", m.desc()),
                        ("TITLE", self.title.as_str()),
                    ];
                    let meta = Metadata {
                        value_type: m.value_type(),
                        units: m.units(),
                        slope: m.slope(),
                        tmax,
                        dmax: settings.dmax,
                        extra: &extra,
                    };
                    self.batch.push(|out| xdr::encode_metadata(out, &id, &meta));
                    metadata_sent += 1;
                }
            }
            self.batch
                .push(|out| xdr::encode_string_value(out, &id, m.value));
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
            let metrics = &source.metrics;
            let state = template::SourceState {
                spoof,
                tmax,
                metadata_sent: &|key| metrics.get(&key).copied(),
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
            && source.observe(now, settings.tmax) == t.tmax
            && source.metadata_tmax == t.tmax
        {
            sent = t.emit(datagram, &self.holes, tos, &mut self.batch);
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

enum Due {
    Yes,
    No,
    Capped,
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
    /// Metric name (hashed: 8 bytes instead of the name) -> when its
    /// metadata was last sent (seconds since the pipeline's epoch). A 64-bit
    /// collision between two names of one source would only delay the
    /// second one's first metadata to the next `metadata_interval`.
    metrics: HashMap<u64, u32, BuildHasherDefault<KeyHasher>>,
    /// (tos, pid) of the program, to notice a restart.
    started: Option<(u32, u32)>,
    next_prune: u32,
    /// Its last record, for the fast path.
    template: Option<Box<Template>>,
}

impl Source {
    fn new(program: &str, now: Instant) -> Source {
        Source {
            program: program.to_string(),
            host: String::new(),
            last_seen: now,
            last_report: None,
            reports: 0,
            interval: None,
            slower_gaps: 0,
            metadata_tmax: 0,
            metrics: HashMap::default(),
            started: None,
            next_prune: 0,
            template: None,
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

    fn metric_due(
        &mut self,
        key: u64,
        now_s: u32,
        interval_s: u32,
        force: bool,
        cap: usize,
    ) -> Due {
        let len = self.metrics.len();
        match self.metrics.get_mut(&key) {
            Some(t) => {
                // Forced: once per record (a name repeated in one record is
                // sent once), else when the interval has passed.
                if (force && *t != now_s) || now_s.saturating_sub(*t) >= interval_s {
                    *t = now_s;
                    Due::Yes
                } else {
                    Due::No
                }
            }
            None if len >= cap => Due::Capped,
            None => {
                self.metrics.insert(key, now_s);
                Due::Yes
            }
        }
    }

    /// Forgets metrics not reported for a long time (a list entry that went
    /// away), so they get metadata again if they come back after gmond dropped them.
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
        self.metrics
            .retain(|_, t| now_s.saturating_sub(*t) <= keep_for.max(interval_s * 2));
    }
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
                .push(Source::new(program, now));
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

mod template;
