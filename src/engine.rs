//! The protocol core: datagrams in, Ganglia packets out. No socket, no
//! clock of its own (every call says what time it is), no lock on the way:
//! the daemon ([`crate::daemon`]) owns the sockets and drives one engine
//! per receive task; tests and `dump` drive it with chosen instants.
//!
//! Per datagram ([`Engine::datagram`]): the allow list, then what it is
//! (a packet of the detailed stream, by its first byte, [`detailed`]; an
//! XCache g-stream, [`xcache`]; other monitoring, ignored; a summary
//! record), then for a record either the source's template, if the record
//! is its last one with new numbers ([`template`]), or the full path:
//! [`summary`](crate::summary) -> [`mapping`](crate::mapping) -> the
//! source's state ([`source`]: metadata schedule, TMAX, restarts; counter
//! continuity and changed-only sending in [`series`]) -> packets
//! ([`packets`], every packet shape built there). The packets are left in
//! a batch that the caller delivers (send queues, XML table).
//!
//! Beside it: gmond's metadata requests are answered from what the
//! sources last sent ([`answer`]); the counters' state is handed to and
//! claimed from [`saved`] (the daemon writes it to the state file), and
//! given to and merged from a peer gateway ([`pairing`], by the rule of
//! [`merge`]).
//!
//! Each step a datagram takes is handed one [`Context`]: the time (as
//! given, and in engine seconds), the settings in force, the saved state
//! and the events to count, borrowed for that datagram.
//!
//! What an engine shares with the gateway's other engines is handed to it
//! when it is made ([`Shared`]), never reached otherwise: the names of the
//! clusters (one name is one cluster whichever socket its servers send to;
//! locked only when a source chooses its cluster) and the saved state
//! (the daemon's state file writer and the peer exchange read and fill it
//! too; taken when a source is first heard from, evicted or handed in).

pub mod answer;
pub mod clock;
pub mod clusters;
mod detailed;
pub mod merge;
pub mod packets;
pub mod pairing;
pub mod saved;
mod series;
mod source;
mod status;
mod template;
mod xcache;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use crate::config::Settings;
use crate::detailed as wire;
use crate::events::Events;
use crate::gstream;
use crate::mapping::{MappedRecord, Mapper};
use crate::status::AddressTally;
use crate::summary::{SummaryParser, SummaryRecord};

use clock::Clock;
use clusters::{ClusterNames, Placing};
use packets::PacketBatch;
use saved::SavedState;
use source::Sources;

pub use answer::Request;

/// Everything between a datagram and the packets it becomes.
pub struct Engine {
    settings: Arc<Settings>,
    parser: SummaryParser,
    mapper: Mapper,
    mapped: MappedRecord,
    sources: Sources,
    batch: PacketBatch,
    /// Compact per-metric timestamps (engine seconds) count from here.
    clock: Clock,
    /// Use the sources' templates ([`template`]); off only to test that
    /// the fast path equals the full one, and for `dump`.
    fast_path: bool,
    /// Where the holes of the last matched template lie in the datagram.
    holes: Vec<std::ops::Range<u32>>,
    /// Records that took the fast path.
    fast_path_hits: u64,
    /// Where sources' counter state is claimed from and handed in to, and
    /// this engine's part in it ([`Shared::saved`]).
    saved: Option<(Arc<SavedState>, usize)>,
    /// XCache g-stream totals: the waiting ones, and scratch to map them.
    xcache: xcache::Totals,
    /// The detailed stream's state per xrootd run ([`detailed`]).
    detailed: detailed::Detailed,
    /// Which of a source's metrics an answer to gmond has sent.
    answered: Vec<bool>,
    /// Senders outside `allow`, and senders of rejected datagrams, for
    /// `status` ([`status`]).
    refused: AddressTally,
    rejected: AddressTally,
    /// The clusters named so far, shared with the gateway's other engines
    /// ([`Shared::clusters`]).
    clusters: Arc<ClusterNames>,
    /// Settings generation: a source whose cluster was chosen under
    /// another chooses again ([`clusters`]).
    epoch: u32,
}

/// What an engine shares with the gateway's other engines, handed to it
/// when it is made ([`Engine::with_shared`]).
#[derive(Default)]
pub struct Shared {
    /// The clusters named so far: one name is one cluster whichever
    /// socket its servers send to. Its own, by default.
    pub clusters: Arc<ClusterNames>,
    /// Where sources' counter state is claimed from when first heard from
    /// (and parked when evicted), and this engine's part in it, handed in
    /// with [`Engine::hand_in_state`]. None: nothing kept.
    pub saved: Option<(Arc<SavedState>, usize)>,
}

/// What every step of one datagram is given, borrowed for that datagram.
pub(crate) struct Context<'a, 'e> {
    /// The time the datagram is handled at, as given.
    pub now: Instant,
    /// The same in engine seconds ([`Clock`]).
    pub now_s: u32,
    pub settings: &'a Settings,
    /// Where a new source's counter state is claimed from, and an evicted
    /// one's parked ([`Shared::saved`]).
    pub saved: Option<&'a SavedState>,
    pub events: &'a mut Events<'e>,
}

impl<'a, 'e> Context<'a, 'e> {
    /// From the engine's parts, borrowed apart so that its others stay free.
    fn new(
        now: Instant,
        clock: &Clock,
        settings: &'a Settings,
        saved: &'a Option<(Arc<SavedState>, usize)>,
        events: &'a mut Events<'e>,
    ) -> Context<'a, 'e> {
        Context {
            now,
            now_s: clock.secs(now),
            settings,
            saved: saved.as_ref().map(|(saved, _)| &**saved),
            events,
        }
    }

    /// Appending a source's other metrics on their schedule, or for an answer.
    pub fn appending(&self, answering: bool) -> Appending<'a> {
        Appending {
            now_s: self.now_s,
            settings: self.settings,
            answering,
        }
    }
}

/// How a source's other metrics (XCache's totals, the detailed stream's)
/// are appended: at which engine second, under which settings, and
/// whether for an answer to gmond (every metadata, the values as last
/// sent) or on their schedule.
#[derive(Clone, Copy)]
pub(crate) struct Appending<'a> {
    pub now_s: u32,
    pub settings: &'a Settings,
    pub answering: bool,
}

/// Which of a metric's packets go out.
#[derive(Clone, Copy)]
enum Due {
    /// Its value (unless changed-only sending holds it back), with its
    /// metadata when `metadata` (first sight, or the periodic resend).
    Report { metadata: bool },
    /// Both, for gmond's metadata request: its value as last sent.
    Answer,
}

impl Engine {
    /// An engine on its own: its own cluster names, no saved state.
    pub fn new(settings: Arc<Settings>, now: Instant) -> Engine {
        Engine::with_shared(settings, now, Shared::default())
    }

    /// An engine that shares `shared` with the gateway's other engines.
    pub fn with_shared(settings: Arc<Settings>, now: Instant, shared: Shared) -> Engine {
        Engine {
            parser: SummaryParser::new(),
            mapper: mapper(&settings),
            settings,
            mapped: MappedRecord::default(),
            sources: Sources::default(),
            batch: PacketBatch::default(),
            clock: Clock::new(now),
            fast_path: true,
            holes: Vec::new(),
            fast_path_hits: 0,
            saved: shared.saved,
            xcache: xcache::Totals::default(),
            detailed: detailed::Detailed::default(),
            answered: Vec::new(),
            refused: AddressTally::default(),
            rejected: AddressTally::default(),
            clusters: shared.clusters,
            epoch: 0,
        }
    }

    /// Hands the sources' counter state in (for the state file).
    pub fn hand_in_state(&self) {
        let Some((saved, part)) = &self.saved else {
            return;
        };
        let mut lines = Vec::new();
        for (ip, source) in self.sources.iter() {
            source.write_saved(&mut lines, ip);
        }
        saved.hand_in(*part, lines);
    }

    /// Takes new settings: new names and timing apply to the next record, and
    /// every metric's metadata is sent again then (DMAX or TMAX may differ).
    pub fn reconfigure(&mut self, settings: Arc<Settings>) {
        self.mapper = mapper(&settings);
        self.settings = settings;
        // Every source chooses its cluster again with its next record.
        self.epoch = self.epoch.wrapping_add(1) % (u32::MAX - 1);
        for source in self.sources.iter_mut() {
            source.resend_everything();
        }
    }

    pub fn settings(&self) -> &Arc<Settings> {
        &self.settings
    }

    /// Turns one datagram, from `from` at `now`, into the packets to send.
    pub fn datagram(
        &mut self,
        datagram: &[u8],
        from: SocketAddr,
        now: Instant,
        events: &mut Events<'_>,
    ) -> &PacketBatch {
        self.batch.clear();
        // What the last datagram forgot, if nobody took it: bounded.
        self.sources.clear_forgotten();
        // Its lines are limited by the time given, as everything here.
        events.at(now);
        events.datagram();
        if !allowed(&self.settings, from.ip()) {
            events.denied(from);
            self.refused.note(from.ip(), now);
            return &self.batch;
        }
        if wire::is_detailed(datagram) {
            self.take_detailed(datagram, from, now, events);
            return &self.batch;
        }
        match gstream::read(datagram) {
            Ok(gstream::Datagram::NotMonitoring) => {}
            Ok(gstream::Datagram::Pfc(totals, instance)) => {
                self.take_gstream(&totals, instance, from, now, events);
                return &self.batch;
            }
            Ok(gstream::Datagram::Other(kind)) => {
                events.monitoring_ignored(from, kind);
                return &self.batch;
            }
            Err(e) => {
                events.gstream_failed(from, datagram.len(), &e);
                self.rejected.note(from.ip(), now);
                return &self.batch;
            }
        }
        if !(self.fast_path && self.fast_path_took(datagram, from, now, events)) {
            self.full_path(datagram, from, now, events);
        }
        &self.batch
    }

    /// Whether a JSON record only repeats, set for set, the XML record its
    /// source sent with the same `tod` (`xrd.report ... all json all` sends
    /// each registered set in both forms every interval). The XML form
    /// wins: it comes first, with every set and the built-in sections under
    /// one `tod`, so nothing waits or is withdrawn, and a site that adds
    /// `json` keeps the names and values it had.
    fn json_repeats_xml(
        sources: &source::Sources,
        program: &str,
        record: &SummaryRecord<'_>,
        from: SocketAddr,
        tod: u64,
    ) -> bool {
        let Some(source) = sources.find(from.ip(), program) else {
            return false;
        };
        let header_len = record.header_len();
        let sets = record
            .vars()
            .skip(header_len)
            .map(|v| v.name.split('.').next().unwrap_or(""));
        source.json_repeats_xml(tod, sets)
    }

    /// Counts and logs the names of the record just mapped that were
    /// changed for gmetad (`ganglia/path_name.rs`): its host's, once per
    /// source and name (not per record), and its metrics' (once per name
    /// the mapper caches).
    fn names_changed(
        sources: &Sources,
        mapped: &MappedRecord,
        mapper: &mut Mapper,
        from: SocketAddr,
        events: &mut Events<'_>,
    ) {
        let host = &mapped.host;
        if let Some(change) = host.renamed {
            let known = sources
                .find(from.ip(), &mapped.program)
                .is_some_and(|s| s.host() == host.spoof);
            if !known {
                events.name_changed(from, "host", &host.sent, &host.name, change);
            }
        }
        while let Some((change, sent, now)) = mapper.take_renamed() {
            events.name_changed(from, "metric", &sent, &now, change);
        }
    }

    /// A record the long way: parsed, mapped, its source's state updated,
    /// its packets built; and the template for its next report made.
    fn full_path(
        &mut self,
        datagram: &[u8],
        from: SocketAddr,
        now: Instant,
        events: &mut Events<'_>,
    ) {
        let record = match self.parser.parse(datagram) {
            Ok(r) => r,
            Err(e) => {
                self.rejected.note(from.ip(), now);
                return events.parse_failed(from, datagram.len(), &e);
            }
        };
        events.record();
        self.mapper.map(&record, from.ip(), &mut self.mapped);
        Self::names_changed(&self.sources, &self.mapped, &mut self.mapper, from, events);
        let header = record.header();
        let stamp = header.stamp();
        let tod = stamp.tod;
        if is_json(datagram)
            && Self::json_repeats_xml(&self.sources, &self.mapped.program, &record, from, tod)
        {
            // The same interval's sets, already sent from its XML record
            // (`all json all`): counted as left out, nothing sent, the
            // source and its template untouched.
            events.excluded(self.mapped.len() + self.mapped.excluded.len());
            return;
        }
        events.excluded(self.mapped.excluded.len());
        if self.mapped.rejected_count > 0 {
            events.values_rejected(from, self.mapped.rejected_count, &self.mapped.rejected);
        }
        let mut cx = Context::new(now, &self.clock, &self.settings, &self.saved, events);
        let (s, now_s) = (cx.settings, cx.now_s);
        let source = self
            .sources
            .report(from, stamp.run(), &self.mapped, &mut cx);
        let events = &mut *cx.events;
        if source.cluster_due(self.epoch, header.site) {
            let placing = Placing {
                names: &self.clusters,
                settings: s,
            };
            let refused_before = source.refused_before(header.site);
            let chosen = placing.choose(
                header.site,
                from,
                &self.mapped.host.name,
                refused_before,
                events,
            );
            self.batch.moved_from = source.settle(chosen, self.epoch);
        }
        source.head(&mut self.batch);
        source.note_naming(&header);
        if !is_json(datagram) {
            source.note_xml(tod, record.sections());
        }
        self.xcache.claim_waiting(source, from.ip());
        if s.keeps_records() {
            source.keep_record(datagram);
        }
        let (metadata, values, capped) =
            source.append_record(&mut self.batch, &self.mapped, now_s, s);
        if capped > 0 {
            let spoof = &self.mapped.host.spoof;
            events.metric_cap(from, spoof, capped, s.max_metrics_per_source);
        }
        source.prune(now_s, s.dmax, interval_seconds(s));
        events.sent(metadata, values);
        source.forget_template();
        if self.fast_path && capped == 0 && !source.cluster_refused() {
            source.make_template(datagram, &record, &self.mapped, s);
        }
        // Its XCache totals, if it sent any, after its record's metrics;
        // its detailed stream's, if it sends one.
        let (batch, mapper) = (&mut self.batch, &mut self.mapper);
        self.xcache.report(batch, mapper, source, &mut cx);
        self.detailed
            .report(batch, mapper, source, from.ip(), &mut cx);
    }

    /// The fast path: the datagram matches the template of a source of its
    /// sender, and nothing but values changed (same program run, same
    /// TMAX, no metadata due). Returns false, having sent nothing, otherwise.
    fn fast_path_took(
        &mut self,
        datagram: &[u8],
        from: SocketAddr,
        now: Instant,
        events: &mut Events<'_>,
    ) -> bool {
        let mut cx = Context::new(now, &self.clock, &self.settings, &self.saved, events);
        let holes = &mut self.holes;
        let Some(source) = self
            .sources
            .of_ip_mut(from.ip())
            .find(|s| s.matches_template(datagram, holes))
        else {
            return false;
        };
        source.head(&mut self.batch);
        let json = is_json(datagram);
        let Some((values, excluded)) =
            source.report_by_template(datagram, &self.holes, json, &cx, &mut self.batch)
        else {
            return false;
        };
        cx.events.record();
        cx.events.excluded(excluded as usize);
        cx.events.sent(0, values);
        let (batch, mapper) = (&mut self.batch, &mut self.mapper);
        self.xcache.report(batch, mapper, source, &mut cx);
        self.detailed
            .report(batch, mapper, source, from.ip(), &mut cx);
        self.fast_path_hits += 1;
        true
    }

    /// A pfc g-stream datagram: added to the totals of the XCache it came
    /// from, which go out as that server's metrics at once and with each
    /// of its records ([`xcache`]).
    fn take_gstream(
        &mut self,
        totals: &gstream::PfcTotals,
        instance: Option<String>,
        from: SocketAddr,
        now: Instant,
        events: &mut Events<'_>,
    ) {
        events.gstream(from, totals.bad_records);
        let mut cx = Context::new(now, &self.clock, &self.settings, &self.saved, events);
        let program = instance.map(|i| xcache::program_of(&i));
        let Some(source) = self
            .sources
            .xcache_of(from.ip(), totals.stod, program.as_deref())
        else {
            let cap = cx.settings.max_sources;
            return self.xcache.wait(from, totals, program, cap, cx.events);
        };
        source.add_gstream(totals);
        source.head(&mut self.batch);
        self.xcache
            .report(&mut self.batch, &mut self.mapper, source, &mut cx);
    }

    /// A detailed-stream datagram ([`crate::detailed`]): into its xrootd
    /// run's state ([`detailed`]), whose metrics then go out with that
    /// server's, if it has sent a summary record here.
    fn take_detailed(
        &mut self,
        datagram: &[u8],
        from: SocketAddr,
        now: Instant,
        events: &mut Events<'_>,
    ) {
        let packet = match wire::decode(datagram) {
            Ok(p) => p,
            Err(e) => {
                self.rejected.note(from.ip(), now);
                return events.detailed_failed(from, datagram.len(), &e);
            }
        };
        let header = packet.header;
        let taken = matches!(packet.body, wire::Body::User { .. } | wire::Body::Files(_));
        let s = &*self.settings;
        let before = self.detailed.servers();
        let mut dropped = 0;
        let (tally, bad) =
            self.detailed
                .take(packet, from, now, &s.detailed, s.max_sources, &mut dropped);
        events.detailed_servers(before, self.detailed.servers());
        events.detailed_evicted(from, tally.evicted + dropped as u64);
        events.detailed_lost(from, tally.lost);
        if !taken {
            // `=`, and the streams nothing is made of: read for their
            // sequence numbers only.
            return events.monitoring_ignored(from, gstream::Kind::Packet(header.code));
        }
        events.detailed(from, tally.records, tally.unmatched, bad.as_ref());
        let mut cx = Context::new(now, &self.clock, &self.settings, &self.saved, events);
        self.detailed.report_after_packet(
            &mut self.batch,
            &mut self.mapper,
            &mut self.sources,
            from.ip(),
            header.stod,
            &mut cx,
        );
    }

    /// Turns the template fast path off (or on again): for `dump` and for
    /// benchmarks of the full path. The packets are the same either way.
    pub fn set_fast_path(&mut self, on: bool) {
        self.fast_path = on;
        if !on {
            for source in self.sources.iter_mut() {
                source.forget_template();
            }
        }
    }

    /// How many records took the template fast path.
    pub fn fast_path_hits(&self) -> u64 {
        self.fast_path_hits
    }

    /// The packets of the last call, with their keys, as the send queues
    /// and the XML table take them.
    pub fn batch(&self) -> &PacketBatch {
        &self.batch
    }

    /// The hosts whose sources the last datagram made it forget
    /// (`max_sources`), for the daemon to take out of the send queues and
    /// the table before the datagram's packets go in.
    pub fn forgotten(&self) -> &[packets::ForgottenHost] {
        self.sources.forgotten()
    }

    /// The packets of the last call, for tests and dry runs.
    pub fn packets(&self) -> impl Iterator<Item = &[u8]> {
        self.batch.iter()
    }

    /// The metrics of the last record that took the full path, as mapped
    /// (for `dump`'s notes; `dump` turns the fast path off).
    pub fn mapped(&self) -> &MappedRecord {
        &self.mapped
    }

    /// The metrics the last XCache totals sent were mapped to.
    pub fn xcache_mapped(&self) -> &MappedRecord {
        self.xcache.mapped()
    }

    /// Sources known now.
    pub fn sources(&self) -> usize {
        self.sources.len()
    }
}

/// The JSON form (5.9+) starts with `{` after blanks; XML never does.
fn is_json(datagram: &[u8]) -> bool {
    datagram.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

fn mapper(settings: &Settings) -> Mapper {
    Mapper::new(settings.metric_name.clone(), settings.group_name.clone())
        .with_filter(settings.filter.clone())
        .with_site_metrics(settings.site_metrics.clone())
}

/// `metadata_interval` in engine seconds (far below [`clock::SECONDS_BASE`]).
fn interval_seconds(settings: &Settings) -> u32 {
    settings
        .metadata_interval
        .as_secs()
        .min(u64::from(clock::SECONDS_BASE / 2)) as u32
}

/// Whether a source's program (`pgm` or `pgm ins`) is an xrootd: a cmsd
/// started in the same second has its start time but no cache.
fn is_xrootd(program: &str) -> bool {
    program == "xrootd" || program.starts_with("xrootd ")
}

/// Whether `allow` lets `ip` in (an empty list lets everyone in).
fn allowed(settings: &Settings, ip: IpAddr) -> bool {
    settings.allow.is_empty() || settings.allow.iter().any(|n| n.contains(&ip))
}

#[cfg(test)]
pub(crate) mod tests;
