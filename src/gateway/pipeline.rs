//! Everything between a datagram and the packets it becomes.
//!
//! Per datagram: allow-list check -> the source's template, if the record
//! is its last one with new numbers ([`super::template`]) -> else
//! [`summary`](crate::summary) -> [`mapping`](crate::mapping) -> per-source
//! state ([`super::source`]): metadata schedule, counter continuity and
//! changed-only sending ([`super::series`]) -> packets
//! ([`super::packets`]), left in a batch for the send queues. Pure apart
//! from the counters: no socket, no clock of its own, so tests drive it
//! with chosen instants.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use crate::config::Settings;
use crate::events::Events;
use crate::gstream::{self, Closes};
use crate::mapping::{HeaderParts, MappedRecord, Mapper};
use crate::summary::{Header, SummaryParser};

use super::Active;
use super::packets::{PacketBatch, SlotKey};
use super::requests::{self, Ask, Request};
use super::sender::Outbox;
use super::series::{self, Counting};
use super::source::{Source, Sources, announced_tmax};
use super::state::{self, StateStore};
use super::template::{self, Template};

/// Pipeline seconds start here, not at zero, so that "`lead` seconds
/// before now" is always a valid time ([`super::source`]).
pub(super) const SECONDS_BASE: u32 = 1 << 24;

/// Pipeline seconds at `now`: from [`SECONDS_BASE`] at `epoch`.
fn seconds(epoch: Instant, now: Instant) -> u32 {
    let elapsed = now.saturating_duration_since(epoch).as_secs();
    SECONDS_BASE.saturating_add(elapsed.min(u64::from(u32::MAX)) as u32)
}

/// `metadata_interval` in pipeline seconds (far below [`SECONDS_BASE`]).
fn interval_seconds(settings: &Settings) -> u32 {
    settings
        .metadata_interval
        .as_secs()
        .min(u64::from(SECONDS_BASE / 2)) as u32
}

/// The pipeline's parts that turn a source's XCache totals into packets,
/// borrowed apart from its sources.
macro_rules! xcache {
    ($p:ident) => {
        XcacheScratch {
            parser: &mut $p.parser,
            mapper: &mut $p.mapper,
            mapped: &mut $p.xcache_mapped,
            synthetic: &mut $p.synthetic,
            title: &mut $p.title,
            batch: &mut $p.batch,
        }
    };
}

/// Everything between a datagram and the packets it becomes.
pub struct Pipeline {
    pub(super) parser: SummaryParser,
    pub(super) mapper: Mapper,
    pub(super) mapped: MappedRecord,
    pub(super) sources: Sources,
    pub(super) batch: PacketBatch,
    pub(super) title: String,
    /// Reference point for the compact per-metric timestamps (pipeline
    /// seconds, [`SECONDS_BASE`] at this instant).
    pub(super) epoch: Instant,
    /// Use the sources' templates ([`template`]); off only to test that
    /// the fast path equals the full one.
    pub(super) fast_path: bool,
    /// Where the holes of the last matched template lie in the datagram.
    pub(super) holes: Vec<std::ops::Range<u32>>,
    /// Records that took the fast path.
    pub(super) fast_path_hits: u64,
    /// Where sources' counter state is saved and restored from, and this
    /// pipeline's part in it.
    pub(super) store: Option<(Arc<StateStore>, usize)>,
    /// XCache g-stream totals of servers that have not sent a summary
    /// record yet, by address, start time and program (when the g-stream
    /// names its instance); at most `max_sources`.
    pub(super) waiting: HashMap<(IpAddr, u32, Option<String>), Closes>,
    /// A source's header with its XCache totals, as a record to map, and
    /// what it maps to (apart from [`mapped`](Self::mapped): the record's).
    pub(super) synthetic: String,
    pub(super) xcache_mapped: MappedRecord,
    /// Which of a source's metrics an answer to gmond has sent.
    pub(super) answered: Vec<bool>,
}

impl Pipeline {
    pub fn new(settings: &Settings) -> Pipeline {
        Pipeline {
            parser: SummaryParser::new(),
            mapper: Mapper::new(settings.metric_name.clone(), settings.group_name.clone())
                .with_filter(settings.filter.clone()),
            mapped: MappedRecord::default(),
            sources: Sources::default(),
            batch: PacketBatch::default(),
            title: String::new(),
            epoch: Instant::now(),
            fast_path: true,
            holes: Vec::new(),
            fast_path_hits: 0,
            store: None,
            waiting: HashMap::new(),
            synthetic: String::new(),
            xcache_mapped: MappedRecord::default(),
            answered: Vec::new(),
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
        self.mapper = Mapper::new(settings.metric_name.clone(), settings.group_name.clone())
            .with_filter(settings.filter.clone());
        for source in self.sources.by_ip.values_mut().flatten() {
            source.resend_everything();
        }
    }

    /// Handles one datagram: encodes its packets, queues them for every
    /// send channel (never waits: the senders pace them out) and takes
    /// them into the XML table.
    pub(super) fn handle(
        &mut self,
        datagram: &[u8],
        from: SocketAddr,
        now: Instant,
        active: &Active,
        events: &mut Events<'_>,
    ) {
        self.encode(datagram, from, now, &active.settings, events);
        active.deliver(&self.batch, from.ip(), now, events);
    }

    /// Answers what gmond asked for through the send queues: one host
    /// ([`answer`](Self::answer)) or, after a quiet spell, every host
    /// ([`answer_everything`](Self::answer_everything)); counts it.
    pub fn handle_request(
        &mut self,
        request: &Ask,
        now: Instant,
        settings: &Settings,
        outbox: &Outbox,
        events: &mut Events<'_>,
    ) {
        match request {
            Ask::Metric(request) => {
                let answered = self.answer(request, now, settings);
                events.metadata_request(&request.host, &request.name, answered);
                if answered {
                    outbox.queue(&self.batch, now, events);
                }
            }
            Ask::Everything => {
                let hosts = self.answer_everything(now, settings, outbox, events);
                events.everything_asked(hosts);
            }
        }
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
        match gstream::read(datagram) {
            Ok(gstream::Datagram::NotMonitoring) => {}
            Ok(gstream::Datagram::Pfc(closes, inst)) => {
                let program = inst.map(|i| {
                    let mut p = String::new();
                    HeaderParts::new(Some("xrootd"), Some(&i), None).write_program(&mut p);
                    p
                });
                return self.take_gstream(&closes, program, from, now, settings, events);
            }
            Ok(gstream::Datagram::Other(kind)) => return events.monitoring_ignored(from, kind),
            Err(e) => return events.gstream_failed(from, datagram.len(), &e),
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
        events.excluded(self.mapped.excluded.len());
        if self.mapped.rejected_count > 0 {
            events.values_rejected(from, self.mapped.rejected_count, &self.mapped.rejected);
        }
        let header = record.header();
        let number = |v: Option<&str>| v.and_then(|t| t.trim().parse::<u32>().ok()).unwrap_or(0);
        let (tos, pid) = (number(header.tos), number(header.pid));

        let now_s = seconds(self.epoch, now);
        let interval_s = interval_seconds(settings);
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
            source.pfc = None;
        }
        if !self.waiting.is_empty() && is_xrootd(&source.program) {
            for program in [None, Some(source.program.clone())] {
                if let Some(early) = self.waiting.remove(&(from.ip(), tos, program)) {
                    source.pfc.get_or_insert_default().add(&early);
                }
            }
        }
        write_header(&mut source.header, &header);
        // Send every metadata on first sight, when the host it names changed,
        // or the program restarted (a new start time, and a gmond may have
        // dropped it meanwhile). A new TMAX (known from the second report
        // on) goes out with each metric's next periodic metadata, which is
        // spread over time ([`super::source`]): sources that started
        // together learn their TMAX together, and resending everything for
        // it would be their first burst all over again.
        let refresh_all =
            restarted || source.host != self.mapped.host.spoof || source.metadata_tmax == 0;
        if refresh_all {
            source.host.clear();
            source.host.push_str(&self.mapped.host.spoof);
            source.host_key = crate::mapping::name_key(&source.host);
        }
        source.metadata_tmax = tmax;
        if settings.answers_requests() {
            source.last_record.clear();
            source.last_record.extend_from_slice(datagram);
        }
        let spoof = self.mapped.host.spoof.as_str();
        let host_key = source.host_key;

        // Heartbeat for the spoofed host, first. gmond shows it without
        // metadata, but asks for that metadata (a 136 on its send channels)
        // at every heartbeat: so it gets gmetric -H's, on the metrics' schedule.
        let mut metadata_sent = 0u64;
        if refresh_all || source.heartbeat_meta_at == series::NEVER {
            source.heartbeat_meta_at = now_s - source.lead(interval_s);
            self.batch.heartbeat_metadata(spoof, host_key);
            metadata_sent += 1;
        } else if now_s.saturating_sub(source.heartbeat_meta_at) >= interval_s {
            source.heartbeat_meta_at = now_s;
            self.batch.heartbeat_metadata(spoof, host_key);
            metadata_sent += 1;
        }
        self.batch.heartbeat_value(spoof, host_key, tos);

        let mut capped = 0usize;
        let mut values_sent = 1u64;
        for m in self.mapped.metrics() {
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
            let out = Out {
                batch: &mut self.batch,
                title: &mut self.title,
            };
            let (m, v) = append_metric(out, source, at, &m, Due::If(metadata_due), now_s, settings);
            metadata_sent += m;
            values_sent += v;
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
        // Its XCache totals, if it sent any, after its record's metrics.
        let (metadata, values) = xcache!(self).packets(source, from.ip(), now_s, settings, false);
        events.sent(metadata, values);
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
        let now_s = seconds(self.epoch, now);
        let interval_s = interval_seconds(settings);
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
        let excluded = t.excluded;
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
                host_key: source.host_key,
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
        events.excluded(excluded as usize);
        source.prune(now_s, settings.dmax, interval_s);
        events.sent(0, values);
        let (metadata, values) = xcache!(self).packets(source, from.ip(), now_s, settings, false);
        events.sent(metadata, values);
        self.fast_path_hits += 1;
        true
    }

    /// A pfc g-stream datagram: added to the totals of the XCache it came
    /// from (the xrootd of its address whose start time is its `stod` and,
    /// if the g-stream names its instance, whose `program` that is), which
    /// go out as that server's metrics at once and with each of its
    /// records. A server not heard from yet gets them when it is.
    fn take_gstream(
        &mut self,
        closes: &Closes,
        program: Option<String>,
        from: SocketAddr,
        now: Instant,
        settings: &Settings,
        events: &mut Events<'_>,
    ) {
        events.gstream(from, closes.bad_records);
        let now_s = seconds(self.epoch, now);
        let source = self.sources.by_ip.get_mut(&from.ip()).and_then(|list| {
            list.iter_mut().find(|s| {
                s.started.is_some_and(|(tos, _)| tos == closes.stod)
                    && is_xrootd(&s.program)
                    && program.as_ref().is_none_or(|p| *p == s.program)
            })
        });
        let Some(source) = source else {
            let key = (from.ip(), closes.stod, program);
            if self.waiting.len() >= settings.max_sources && !self.waiting.contains_key(&key) {
                events.gstream_unmatched(from, closes.stod);
                return;
            }
            if !self.waiting.contains_key(&key) {
                events.gstream_waiting(from, closes.stod);
            }
            self.waiting.entry(key).or_default().add(closes);
            return;
        };
        source.pfc.get_or_insert_default().add(closes);
        let (metadata, values) = xcache!(self).packets(source, from.ip(), now_s, settings, false);
        events.sent(metadata, values);
    }

    /// Answers gmond's metadata request: if `request` names a metric of a
    /// source of this pipeline, its last record's metadata and values are
    /// left in the batch, all of them, at most once per source per
    /// [`requests::ANSWER_HOLDOFF`]. Returns whether it did. The periodic
    /// resend keeps its schedule (an answer is extra, not a resend).
    pub fn answer(&mut self, request: &Request, now: Instant, settings: &Settings) -> bool {
        self.batch.clear();
        let Some(ip) = requests::spoof_ip(&request.host) else {
            return false;
        };
        // The heartbeat is every source's of the host: any of them answers.
        let key = crate::mapping::name_key(&request.name);
        let any = request.name == "heartbeat";
        let Some(list) = self.sources.by_ip.get_mut(&ip) else {
            return false;
        };
        let Some(at) = list
            .iter()
            .position(|s| s.host == request.host && (any || s.index.contains_key(&key)))
        else {
            return false;
        };
        let mut source = list.swap_remove(at);
        let answered = self.answer_source(&mut source, ip, now, settings);
        self.sources.by_ip.entry(ip).or_default().push(source);
        answered
    }

    /// A gmond lost everything (it asked after a quiet spell: it was
    /// restarted): every source not answered within the holdoff queues its
    /// metadata and last values, host after host. Returns how many did.
    pub fn answer_everything(
        &mut self,
        now: Instant,
        settings: &Settings,
        outbox: &Outbox,
        events: &Events<'_>,
    ) -> usize {
        let mut by_ip = std::mem::take(&mut self.sources.by_ip);
        let mut answered = 0;
        for (ip, list) in &mut by_ip {
            for source in list {
                self.batch.clear();
                if self.answer_source(source, *ip, now, settings) {
                    outbox.queue(&self.batch, now, events);
                    answered += 1;
                }
            }
        }
        self.sources.by_ip = by_ip;
        self.batch.clear();
        answered
    }

    /// Appends `source`'s heartbeat, metadata and last values to the batch,
    /// unless it answered within [`requests::ANSWER_HOLDOFF`] or has no
    /// record kept.
    fn answer_source(
        &mut self,
        source: &mut Source,
        ip: IpAddr,
        now: Instant,
        settings: &Settings,
    ) -> bool {
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
        self.batch.heartbeat_metadata(&source.host, source.host_key);
        if let Some((tos, _)) = source.started {
            self.batch
                .heartbeat_value(&source.host, source.host_key, tos);
        }
        let now_s = seconds(self.epoch, now);
        // Each metric once, as the record's first reading of it went out.
        self.answered.clear();
        self.answered.resize(source.states.len(), false);
        for m in self.mapped.metrics() {
            let Some(&at) = source.index.get(&m.name_key) else {
                continue;
            };
            let at = at as usize;
            if self.answered.get(at).is_none_or(|&done| done) {
                continue;
            }
            self.answered[at] = true;
            let out = Out {
                batch: &mut self.batch,
                title: &mut self.title,
            };
            append_metric(out, source, at, &m, Due::Answer, now_s, settings);
        }
        xcache!(self).packets(source, ip, now_s, settings, true);
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

    /// The last [`encode`](Self::encode)'s packets with their keys, as
    /// the send queues and the XML table take them.
    pub fn batch(&self) -> &PacketBatch {
        &self.batch
    }

    /// The metrics of the last record that took the full path, as mapped
    /// (for `dump`'s notes; `dump` turns the fast path off).
    pub fn mapped(&self) -> &MappedRecord {
        &self.mapped
    }

    /// The metrics the last XCache totals sent were mapped to (a `pfc`
    /// section of the source's own record, with its header's metrics).
    pub fn xcache_mapped(&self) -> &MappedRecord {
        &self.xcache_mapped
    }

    pub fn sources(&self) -> usize {
        self.sources.len
    }
}

/// What turns a source's XCache totals into packets.
struct XcacheScratch<'p> {
    parser: &'p mut SummaryParser,
    mapper: &'p mut Mapper,
    mapped: &'p mut MappedRecord,
    synthetic: &'p mut String,
    title: &'p mut String,
    batch: &'p mut PacketBatch,
}

impl XcacheScratch<'_> {
    /// Appends `source`'s XCache totals (pfc's g-stream, added up) to the
    /// batch, as metrics of its host: named, typed and left out exactly
    /// as the same numbers in a `pfc` section of its own record would be,
    /// each on its metric's schedule (metadata when due, or with
    /// `answering` every metadata, the periodic resend left as it is),
    /// counters kept continuous. Returns (metadata, values) appended.
    fn packets(
        &mut self,
        source: &mut Source,
        ip: IpAddr,
        now_s: u32,
        settings: &Settings,
        answering: bool,
    ) -> (u64, u64) {
        let Some(totals) = source.pfc else {
            return (0, 0);
        };
        if source.header.is_empty() {
            return (0, 0);
        }
        self.synthetic.clear();
        let _ = write!(
            self.synthetic,
            "<statistics {}><stats id=\"pfc\"><files>{}</files><bytes_hit>{}</bytes_hit>\
             <bytes_miss>{}</bytes_miss><bytes_bypass>{}</bytes_bypass></stats></statistics>",
            source.header, totals.files, totals.bytes_hit, totals.bytes_miss, totals.bytes_bypass
        );
        let Ok(record) = self.parser.parse(self.synthetic.as_bytes()) else {
            return (0, 0);
        };
        self.mapper.map(&record, ip, self.mapped);
        let interval_s = interval_seconds(settings);
        let (mut metadata, mut values) = (0, 0);
        for m in self.mapped.metrics() {
            if crate::catalog::section(m.var) != "pfc" {
                continue;
            }
            let found = if answering {
                source
                    .index
                    .get(&m.name_key)
                    .map(|&at| (at as usize, Due::Answer))
            } else {
                source
                    .metric(
                        m.name_key,
                        now_s,
                        interval_s,
                        false,
                        settings.max_metrics_per_source,
                    )
                    .map(|(at, due)| (at, Due::If(due)))
            };
            let Some((at, due)) = found else {
                continue;
            };
            let out = Out {
                batch: self.batch,
                title: self.title,
            };
            let (m, v) = append_metric(out, source, at, &m, due, now_s, settings);
            metadata += m;
            values += v;
        }
        (metadata, values)
    }
}

/// Where [`append_metric`] writes: the batch, and the title it builds.
struct Out<'o> {
    batch: &'o mut PacketBatch,
    title: &'o mut String,
}

/// Which of a metric's packets go out.
#[derive(Clone, Copy)]
enum Due {
    /// Its value (unless changed-only sending holds it back), and its
    /// metadata if due.
    If(bool),
    /// Both, for gmond's metadata request: its value as last sent.
    Answer,
}

/// Appends one metric of `source` (its state at `at`): its metadata when
/// due, then its value, a counter continued past restarts. Every record's
/// metrics and every XCache total go out through here (the fast path's
/// template holds the same packets, cut from these). Returns (metadata,
/// values) appended.
fn append_metric(
    out: Out<'_>,
    source: &mut Source,
    at: usize,
    m: &crate::mapping::Metric<'_>,
    due: Due,
    now_s: u32,
    settings: &Settings,
) -> (u64, u64) {
    let (metadata, answering) = match due {
        Due::If(d) => (d, false),
        Due::Answer => (true, true),
    };
    if metadata {
        out.batch.metadata(
            out.title,
            &source.host,
            source.host_key,
            m,
            &source.program,
            source.metadata_tmax,
            settings.dmax,
        );
    }
    let mut number = [0u8; 20];
    let state = &mut source.states[at];
    let (text, counting) = (m.value.as_bytes(), Counting::of(m.kind));
    let value = if answering {
        // The value as last sent: the state stays as the record left it.
        series::sent_text(state, text, counting, &mut number)
    } else {
        let value = series::counter_text(state, text, counting, &mut number);
        if !state.admit(value, now_s, settings.value_heartbeat, metadata) {
            return (u64::from(metadata), 0);
        }
        value
    };
    let key = SlotKey {
        host: source.host_key,
        metric: m.name_key,
    };
    out.batch.value(&source.host, key, m.name, value);
    (u64::from(metadata), 1)
}

/// Whether a source's program (`pgm` or `pgm ins`) is an xrootd: a cmsd
/// started in the same second has its start time but no cache.
fn is_xrootd(program: &str) -> bool {
    program == "xrootd" || program.starts_with("xrootd ")
}

/// A record's header attributes as `<statistics>` writes them (those that
/// name its metrics and host), for [`XcacheScratch::packets`]. Left empty
/// if a value holds a `"`: it could not be written back.
fn write_header(out: &mut String, header: &Header<'_>) {
    out.clear();
    let attributes = [
        ("src", header.src),
        ("tos", header.tos),
        ("pgm", header.pgm),
        ("ins", header.ins),
        ("pid", header.pid),
        ("site", header.site),
    ];
    for (name, value) in attributes {
        let Some(value) = value else { continue };
        if value.contains('"') {
            out.clear();
            return;
        }
        let _ = write!(out, "{name}=\"{value}\" ");
    }
}
