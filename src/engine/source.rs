//! What the gateway remembers of each xrootd or cmsd it hears from.
//!
//! A source is one program (`pgm`, or `pgm ins`) at one sender address: its
//! spoofed host, its report interval (hence TMAX), its start (to notice a
//! restart), its metrics' state ([`super::series`]) and its template
//! ([`super::template`]). Sources are bounded (`max_sources`: those that
//! sent a single record evicted first, [`Sources::evict`]) and so are their
//! metrics (`max_metrics_per_source`).
//!
//! **Metadata is spread over time.** Servers restarted together report in
//! phase; if each sent its metadata at the same moment every
//! `metadata_interval`, the gateway would make the bursts it exists to
//! avoid. So when a source's metadata goes out as a whole (first sight, a
//! restart), its next periodic resend is brought forward by the source's
//! own [`lead`](Source::lead): sources that started together resend apart
//! from then on. A new TMAX (known from a source's second report on, in
//! phase with every source that started with it) is not worth a resend of
//! its own: the next periodic one carries it, within `metadata_interval`.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::gstream::PfcTotals;
use crate::summary::Header;

use super::clusters::{Chosen, ClusterRef, key_of};
use super::packets::{HostId, PacketBatch};
use super::saved::{self, SavedSource};
use super::series::{self, MetricState};
use super::template::Template;
use crate::key_index::KeyIndex;

/// What the gateway remembers about one xrootd or cmsd.
pub(super) struct Source {
    /// `pgm` or `pgm ins`.
    program: String,
    /// The spoof string its metadata was last sent with.
    host: String,
    /// Its two parts, kept apart: who its batches are about.
    id: Option<Arc<HostId>>,
    /// Its hash: the host part of its packets' send-queue keys.
    host_key: u64,
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
    index: KeyIndex,
    states: Vec<MetricState>,
    /// (tos, pid) of the program, to notice a restart.
    started: Option<(u32, u32)>,
    /// Its counters came from saved state (the state file, or its own
    /// eviction): established from its first record on.
    restored: bool,
    next_prune: u32,
    /// Its last record, for the fast path.
    template: Option<Box<Template>>,
    /// Its last datagram, to answer gmond's metadata requests (kept only
    /// when `metadata_requests` listens).
    last_record: Vec<u8>,
    /// When a metadata request for it was last answered.
    answered_at: Option<Instant>,
    /// Its last report sends every metadata: first sight, a new host
    /// name, or a restart (a new start time, and a gmond may have dropped
    /// it meanwhile).
    refresh_all: bool,
    /// When its heartbeat's metadata was last sent (engine seconds).
    heartbeat_meta_at: u32,
    /// What named its last record's metrics, to name its XCache totals as
    /// its own metrics ([`super::xcache`]).
    naming: Option<Naming>,
    /// An XCache's g-stream, added up since this run of it started.
    pfc: Option<PfcTotals>,
    /// The `tod` of its last XML record (0: none yet) and that record's
    /// sections, space-separated: a JSON datagram of the same `tod` whose
    /// sets all were in it is the same interval's copy (`xrd.report ...
    /// all json all`), not sent again ([`super::Engine`]'s full path).
    xml_tod: u64,
    xml_sections: String,
    /// Its cluster ([`super::clusters`]), chosen at its first record and
    /// again at a reload, a new site or a new host name.
    cluster: ClusterRef,
    /// The engine's settings generation its cluster was chosen under
    /// (`u32::MAX`: not chosen yet).
    cluster_epoch: u32,
    /// Its site's cluster found no room (`max_clusters`): it asks again
    /// with its next record, and keeps no template meanwhile.
    cluster_refused: bool,
    /// Its run or a counter offset changed since the peer was last told
    /// (new to this engine, a restart, a reset or a wrap).
    peer_dirty: bool,
    /// Something happened since the peer last raised it that the peer
    /// may know more of (the above, told; or a report missed): a raise
    /// may be taken ([`super::merge::take`]).
    peer_window: bool,
    /// The last values published of its host's counters, by name key
    /// (read at start from `recover_from`): none of its counters is sent
    /// below them ([`series::MetricState::floor`]). Its first record only.
    pub(super) floors: Option<Arc<saved::Floors>>,
    /// Its last report came after a gap: a report (or more) missed.
    missed: bool,
    /// It restarted after a gap, its peer unreachable: `recover_from` is
    /// read for its host ([`saved::SavedState::watch`]) and its floors
    /// applied as they come, at its records (no template meanwhile).
    /// The answers seen so far, when watched.
    pub(super) watched: Option<u64>,
    /// Its counters' values are held back (not published) until the
    /// first answer: what it would send may be below what gmetad stored.
    pub(super) holding: bool,
}

impl Source {
    /// A source whose first record has `metrics` metrics (its state is
    /// sized for them at once: no regrowth, less fragmentation when many
    /// sources come and go).
    pub(super) fn new(program: &str, now: Instant, metrics: usize) -> Source {
        Source {
            program: program.to_string(),
            host: String::new(),
            id: None,
            host_key: 0,
            last_seen: now,
            last_report: None,
            reports: 0,
            interval: None,
            slower_gaps: 0,
            metadata_tmax: 0,
            index: {
                let mut index = KeyIndex::default();
                index.reserve(0, metrics, |_| 0);
                index
            },
            states: Vec::with_capacity(metrics),
            started: None,
            restored: false,
            next_prune: 0,
            template: None,
            last_record: Vec::new(),
            answered_at: None,
            refresh_all: true,
            heartbeat_meta_at: series::NEVER,
            naming: None,
            pfc: None,
            xml_tod: 0,
            xml_sections: String::new(),
            cluster: None,
            cluster_epoch: u32::MAX,
            cluster_refused: false,
            peer_dirty: true,
            peer_window: true,
            floors: None,
            missed: false,
            watched: None,
            holding: false,
        }
    }

    /// `pgm` or `pgm ins`.
    pub(super) fn program(&self) -> &str {
        &self.program
    }

    /// The spoof string its metadata was last sent with.
    pub(super) fn host(&self) -> &str {
        &self.host
    }

    /// (tos, pid) of its program, once known.
    pub(super) fn started(&self) -> Option<(u32, u32)> {
        self.started
    }

    /// Reports seen (saturating).
    pub(super) fn reports(&self) -> u32 {
        self.reports
    }

    pub(super) fn last_seen(&self) -> Instant {
        self.last_seen
    }

    /// What named its last record's metrics.
    pub(super) fn naming(&self) -> Option<&Naming> {
        self.naming.as_ref()
    }

    /// Its cluster.
    pub(super) fn cluster(&self) -> &ClusterRef {
        &self.cluster
    }

    /// Its XCache's g-stream totals, this run's.
    pub(super) fn pfc(&self) -> Option<PfcTotals> {
        self.pfc
    }

    /// Its last datagram (empty: none kept).
    pub(super) fn last_record(&self) -> &[u8] {
        &self.last_record
    }

    /// Where metric `key`'s state is, if it has one.
    pub(super) fn metric_at(&self, key: u64) -> Option<usize> {
        let states = &self.states;
        let at = self.index.find(key, |at| states[at as usize].key)?;
        Some(at as usize)
    }

    /// How many metrics it keeps state for.
    pub(super) fn metrics(&self) -> usize {
        self.states.len()
    }

    /// Takes what names a record's metrics, from its header.
    pub(super) fn note_naming(&mut self, header: &Header<'_>) {
        Naming::note(&mut self.naming, header);
    }

    /// A g-stream datagram of its XCache run: added to its totals (the
    /// run they belong to kept: the peer exchange compares runs), and the
    /// peer is to be told (only one gateway of a pair hears a g-stream).
    pub(super) fn add_gstream(&mut self, totals: &PfcTotals) {
        let pfc = self.pfc.get_or_insert_default();
        pfc.stod = totals.stod;
        pfc.add(totals);
        self.peer_dirty = true;
    }

    /// Totals of its XCache run that came before its first record.
    pub(super) fn claim_gstream(&mut self, early: &PfcTotals) {
        self.pfc.get_or_insert_default().add(early);
    }

    /// The gateway's own count behind metric `at` (the detailed stream's
    /// totals of an xrootd run this engine had not heard from) starts from
    /// 0: the counter continues from what was last sent (after a gateway
    /// restart, from the state file's).
    pub(super) fn restart_metric(&mut self, at: usize) {
        if let Some(state) = self.states.get_mut(at) {
            state.restart();
            self.peer_dirty = true;
        }
    }

    /// Its template goes (the fast path turned off, or a new one to make).
    pub(super) fn forget_template(&mut self) {
        self.template = None;
    }

    /// Whether the peer is to hear of it: with `changed_only`, only if its
    /// run or a counter offset changed since it was last told (the mark is
    /// cleared).
    pub(super) fn tell_peer(&mut self, changed_only: bool) -> bool {
        if changed_only {
            let dirty = std::mem::take(&mut self.peer_dirty);
            self.peer_window |= dirty;
            dirty
        } else {
            true
        }
    }

    /// Merges a peer's entry and g-stream totals into its own, where they
    /// agree with what it heard ([`super::merge::take`]: `reported_unix`,
    /// when the server last reported to it); returns what it holds then
    /// and what came of the peer's claims.
    pub(super) fn merge_peer(
        &mut self,
        state: &SavedSource,
        pfc: Option<&PfcTotals>,
        (now_s, now_unix, reported_unix): (u32, u64, u64),
        cap: usize,
    ) -> (SavedSource, Option<PfcTotals>, super::merge::Taken) {
        let mut mine = self.saved();
        let heard = super::merge::Heard {
            now_unix,
            reported_unix: (self.reports > 0).then_some(reported_unix),
            may_raise: self.peer_window || self.peer_dirty,
        };
        let taken = super::merge::take(&mut mine, state, &heard);
        if !taken.waiting {
            self.peer_window = false;
        }
        self.absorb(&mine, now_s, cap);
        let tos = self.started.map(|(tos, _)| tos);
        super::merge::merge_pfc(&mut self.pfc, pfc, tos);
        (mine, self.pfc, taken)
    }

    /// Whether its cluster is to be chosen (again): none chosen under the
    /// settings of `epoch`, every metadata due (a new host name, a
    /// restart), or its record names another site.
    /// A source refused a place (`max_clusters`) asks again with each
    /// record (it keeps no template: each takes the full path), so it is in
    /// its own cluster as soon as there is room.
    pub(super) fn cluster_due(&self, epoch: u32, site: Option<&str>) -> bool {
        self.cluster_epoch != epoch
            || self.refresh_all
            || self.site_changed(site)
            || self.cluster_refused
    }

    fn site_changed(&self, site: Option<&str>) -> bool {
        self.naming.as_ref().map(|n| n.site()) != Some(site)
    }

    /// Whether it was refused its site's cluster already (the refusal is
    /// counted and logged once per source, not per record), for `site`.
    pub(super) fn refused_before(&self, site: Option<&str>) -> bool {
        self.cluster_refused && !self.site_changed(site)
    }

    /// Whether its site's cluster found no room: it keeps no template.
    pub(super) fn cluster_refused(&self) -> bool {
        self.cluster_refused
    }

    /// Takes the cluster chosen for it under the settings of `epoch`.
    /// Returns the key of the one it left, if it moved: it then sends
    /// every metadata again (its host in the new cluster has none).
    pub(super) fn settle(&mut self, chosen: Chosen, epoch: u32) -> Option<u64> {
        let Chosen { cluster, refused } = chosen;
        self.cluster_refused = refused;
        let (old, new) = (key_of(&self.cluster), key_of(&cluster));
        let moved = self.cluster_epoch != u32::MAX && old != new;
        if moved {
            self.refresh_all = true;
        }
        self.cluster = cluster;
        self.cluster_epoch = epoch;
        moved.then_some(old)
    }

    /// Says in `batch` who its packets are about: its host and cluster.
    pub(super) fn head(&self, batch: &mut PacketBatch) {
        batch.host.clone_from(&self.id);
        batch.cluster.clone_from(&self.cluster);
    }

    /// Notes an XML record of `tod` with these sections (no allocation
    /// once the string has grown to them).
    pub(super) fn note_xml<'a>(&mut self, tod: u64, sections: impl Iterator<Item = &'a str>) {
        self.xml_tod = tod;
        self.xml_sections.clear();
        for s in sections {
            self.xml_sections.push_str(s);
            self.xml_sections.push(' ');
        }
    }

    /// Whether a JSON datagram of `tod` carrying `sets` repeats what this
    /// source's XML record of the same `tod` carried.
    pub(super) fn json_repeats_xml<'a>(
        &self,
        tod: u64,
        mut sets: impl Iterator<Item = &'a str>,
    ) -> bool {
        self.xml_tod != 0
            && self.xml_tod == tod
            && sets.all(|set| {
                self.xml_sections
                    .split(' ')
                    .any(|s| !s.is_empty() && s == set)
            })
    }

    /// Notes a report at `now`; returns the TMAX to announce: 1.5 x the
    /// report interval (one late report is not "stale"), or `default` until
    /// an interval has been seen. The interval follows a faster schedule at
    /// once but a slower one only after three slower gaps in a row, so a lost
    /// report does not change TMAX (which resends every metadata) twice.
    pub(super) fn observe(&mut self, now: Instant, default: u32) -> u32 {
        let gap = self.last_report.map(|t| now.saturating_duration_since(t));
        // A report missed (the rule below, on the gap before rounding, so
        // that a silence over a day counts too). A zero gap is the same
        // report noted again (the fast path gave way to the full one).
        match (gap, self.interval) {
            (Some(g), _) if g < Duration::from_millis(500) => {}
            (Some(g), Some(i)) => self.missed = g.as_secs_f64() > f64::from(i + i / 2) + 0.5,
            _ => self.missed = false,
        }
        self.last_report = Some(now);
        self.reports = self.reports.saturating_add(1);
        self.last_seen = now;
        // Reports come on whole seconds: round the gap.
        let gap = gap
            .filter(|g| *g >= Duration::from_millis(500) && *g <= Duration::from_secs(86_400))
            .map(|g| g.as_secs_f64().round() as u32);
        if let Some(gap) = gap {
            // A report missed: the peer may have heard what it held.
            if self.interval.is_some_and(|i| gap > i + i / 2) {
                self.peer_window = true;
            }
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

    /// Whether the heartbeat's metadata goes out with this report: with
    /// every metadata, else every `interval_s`.
    fn heartbeat_metadata_due(&mut self, now_s: u32, interval_s: u32) -> bool {
        if self.refresh_all || self.heartbeat_meta_at == series::NEVER {
            self.heartbeat_meta_at = now_s - self.lead(interval_s);
            true
        } else if now_s.saturating_sub(self.heartbeat_meta_at) >= interval_s {
            self.heartbeat_meta_at = now_s;
            true
        } else {
            false
        }
    }

    /// Keeps its last datagram, to answer gmond's metadata requests.
    pub(super) fn keep_record(&mut self, datagram: &[u8]) {
        self.last_record.clear();
        self.last_record.extend_from_slice(datagram);
    }

    /// Whether it has continuity to lose: it has reported more than once,
    /// or its counters were restored. Eviction takes sources that sent a
    /// single record first ([`Sources::evict`]).
    pub(super) fn established(&self) -> bool {
        self.reports >= 2 || self.restored
    }

    /// Its counter state as the state file keeps it (None for a source
    /// with no start and no counter).
    fn to_saved(&self) -> Option<SavedSource> {
        let counters: Vec<(u64, u64, u64)> = self
            .states
            .iter()
            .filter(|m| m.last_raw != 0 || m.offset != 0)
            .map(|m| (m.key, m.last_raw, m.offset))
            .collect();
        if self.started.is_none() && counters.is_empty() {
            return None;
        }
        Some(SavedSource {
            started: self.started,
            counters,
        })
    }

    /// Appends its counter state as the state file keeps it (nothing for a
    /// source with no start and no counter).
    pub(super) fn write_saved(&self, out: &mut Vec<u8>, ip: IpAddr) {
        let counters = self
            .states
            .iter()
            .filter(|m| m.last_raw != 0 || m.offset != 0);
        if self.started.is_none() && counters.clone().next().is_none() {
            return;
        }
        let counters = counters.map(|m| (m.key, m.last_raw, m.offset));
        saved::write_entry(out, ip, &self.program, self.started, counters, None);
    }

    /// Its counter state as the state file and the peer take it.
    pub(super) fn saved(&self) -> SavedSource {
        SavedSource {
            started: self.started,
            counters: self
                .states
                .iter()
                .filter(|m| m.last_raw != 0 || m.offset != 0)
                .map(|m| (m.key, m.last_raw, m.offset))
                .collect(),
        }
    }

    /// Takes a merged entry ([`super::merge`]): its run, and each counter's
    /// reading and offset (a counter new to it is made, up to `cap`).
    fn absorb(&mut self, merged: &SavedSource, now_s: u32, cap: usize) {
        if self.started != merged.started {
            // A run it had not heard of: its XCache totals were the old run's.
            self.started = merged.started;
            self.pfc = None;
            self.template = None;
        }
        for &(key, last_raw, offset) in &merged.counters {
            let at = match self.metric_at(key) {
                Some(at) => at,
                None if self.states.len() >= cap => continue,
                None => self.add_state(MetricState::new(key, now_s)),
            };
            let m = &mut self.states[at];
            m.last_raw = last_raw;
            m.offset = offset;
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
    /// (a name repeated in one record is skipped by the caller). Sent on
    /// first sight or forced, its next periodic resend comes
    /// [`lead`](Self::lead) seconds early.
    pub(super) fn metric(
        &mut self,
        key: u64,
        now_s: u32,
        interval_s: u32,
        force: bool,
        cap: usize,
    ) -> Option<(usize, bool)> {
        let at = match self.metric_at(key) {
            Some(at) => at,
            None if self.states.len() >= cap => return None,
            None => self.add_state(MetricState::new(key, now_s)),
        };
        let lead = self.lead(interval_s);
        let t = &mut self.states[at].meta_at;
        let whole = *t == series::NEVER || force;
        let due = whole || now_s.saturating_sub(*t) >= interval_s;
        if whole {
            *t = now_s - lead;
        } else if due {
            *t = now_s;
        }
        Some((at, due))
    }

    /// How much earlier than `metadata_interval` the first periodic resend
    /// after a whole send comes: a fixed share of half the interval, from
    /// the host's hash, so sources that start together resend apart.
    fn lead(&self, interval_s: u32) -> u32 {
        (self.host_key % u64::from((interval_s / 2).max(1))) as u32
    }

    /// Forgets metrics not reported for a long time (a list entry that went
    /// away), so they get metadata again if they come back after gmond
    /// dropped them. The template's places into `states` go with them.
    pub(super) fn prune(&mut self, now_s: u32, dmax: u32, interval_s: u32) {
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
        let states = &self.states;
        let len = states.len();
        self.index.rebuild(len, len, |at| states[at as usize].key);
    }

    /// Takes over what the state file kept of this source: its start and
    /// its counters (their metadata is still to be sent).
    fn restore(&mut self, saved: SavedSource, now_s: u32) {
        self.started = saved.started;
        self.restored = true;
        for (key, last_raw, offset) in saved.counters {
            if self.metric_at(key).is_some() {
                continue;
            }
            let mut m = MetricState::new(key, now_s);
            m.last_raw = last_raw;
            m.offset = offset;
            self.add_state(m);
        }
    }

    /// A metric new to it (no state of its key yet); returns its place.
    #[cold]
    #[inline(never)]
    fn add_state(&mut self, state: MetricState) -> usize {
        let key = state.key;
        self.states.push(state);
        let (states, at) = (&self.states, self.states.len() - 1);
        self.index
            .insert(key, at as u32, states.len(), |at| states[at as usize].key);
        at
    }

    /// A reload: every metadata is sent again with the next record (names,
    /// DMAX or TMAX may differ); counters stay continuous.
    pub(super) fn resend_everything(&mut self) {
        self.template = None;
        self.heartbeat_meta_at = series::NEVER;
        self.metadata_tmax = 0;
        for s in &mut self.states {
            s.meta_at = series::NEVER;
        }
    }
}

mod naming;
mod sending;
mod sources;

pub(super) use naming::Naming;

pub(super) use sources::{Sources, announced_tmax};
