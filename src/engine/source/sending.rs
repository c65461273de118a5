//! What a source sends: a record's packets (its heartbeat, then each
//! metric's metadata when due and its value, counters kept continuous),
//! a report by its template (the fast path), and an answer to gmond.
//! Every packet of a source is appended here, from its own state.

use std::ops::Range;
use std::time::Instant;

use crate::config::Settings;
use crate::mapping::{MappedRecord, Metric};
use crate::summary::SummaryRecord;

use super::super::packets::{PacketBatch, SlotKey};
use super::super::series::{self, Counting};
use super::super::template::{self, Template};
use super::super::{Appending, Context, Due, interval_seconds};
use super::{Source, announced_tmax};

impl Source {
    /// Appends a record's packets: its host's heartbeat first (gmond shows a
    /// host without its metadata, but asks for that metadata, a 136, at every
    /// heartbeat: so it gets gmetric -H's, on the metrics' schedule), then each
    /// metric's. Returns (metadata, values) appended and how many metrics the
    /// source's cap left out.
    pub(in crate::engine) fn append_record(
        &mut self,
        batch: &mut PacketBatch,
        mapped: &MappedRecord,
        now_s: u32,
        settings: &Settings,
    ) -> (u64, u64, usize) {
        let interval_s = interval_seconds(settings);
        let whole = self.refresh_all;
        let mut metadata = u64::from(self.heartbeat_metadata_due(now_s, interval_s));
        if metadata > 0 {
            batch.heartbeat_metadata(&self.host, self.host_key);
        }
        let tos = self.started.map_or(0, |(tos, _)| tos);
        batch.heartbeat_value(&self.host, self.host_key, tos);
        let (mut values, mut capped) = (1u64, 0usize);
        // A name repeated within one record is sent once: a second reading
        // would look like a reset. Which states this record has had, a bit
        // each (one allocation per record on the full path, none per metric,
        // and no field in every metric's state).
        let cap = settings.max_metrics_per_source;
        let mut had = vec![0u64; (self.states.len() + mapped.len()).min(cap).div_ceil(64)];
        for m in mapped.metrics() {
            let Some((at, due)) = self.metric(m.name_key, now_s, interval_s, whole, cap) else {
                capped += 1;
                continue;
            };
            let (word, bit) = (at / 64, 1u64 << (at % 64));
            if word >= had.len() {
                had.resize(word + 1, 0);
            }
            if had[word] & bit != 0 {
                continue;
            }
            had[word] |= bit;
            let due = Due::Report { metadata: due };
            let (m, v) = self.append_metric(batch, at, &m, due, now_s, settings);
            metadata += m;
            values += v;
        }
        // Floors hold for the record they came with only (the first after
        // the start; a watched source's, as each read comes).
        self.floors = None;
        (metadata, values, capped)
    }

    /// Makes the template its next report like this one can take: from its
    /// second report on (a sender seen once, as in a flood of one-shot
    /// senders, costs no template).
    pub(in crate::engine) fn make_template(
        &mut self,
        datagram: &[u8],
        record: &SummaryRecord<'_>,
        mapped: &MappedRecord,
        settings: &Settings,
    ) {
        self.template = None;
        // A watched source takes the full path: its floors are applied there.
        if self.started.is_none() || self.reports < 2 || self.watched.is_some() {
            return;
        }
        let state = template::SourceState {
            spoof: &mapped.host.spoof,
            tmax: self.metadata_tmax,
            heartbeat_meta_at: self.heartbeat_meta_at,
            metric: &|key| {
                let at = self.metric_at(key)?;
                Some((at as u32, self.states.get(at)?.meta_at))
            },
            interval_s: interval_seconds(settings),
        };
        self.template = Template::build(datagram, record, mapped, &state).map(Box::new);
    }

    /// Whether `datagram` matches its template (`holes` then says where
    /// the digits are).
    pub(in crate::engine) fn matches_template(
        &self,
        datagram: &[u8],
        holes: &mut Vec<Range<u32>>,
    ) -> bool {
        self.template
            .as_deref()
            .is_some_and(|t| t.matches(datagram, holes))
    }

    /// A report that matched its template: its packets appended, if it is
    /// the same program run, at the same TMAX, with no metadata due.
    /// Returns the values sent and the variables left out, or None (nothing
    /// appended, the full path to take) otherwise.
    pub(in crate::engine) fn report_by_template(
        &mut self,
        datagram: &[u8],
        holes: &[Range<u32>],
        json: bool,
        cx: &Context<'_, '_>,
        batch: &mut PacketBatch,
    ) -> Option<(u64, u32)> {
        let (now, now_s, settings) = (cx.now, cx.now_s, cx.settings);
        let t = self.template.take()?;
        let stamp = t.stamp(datagram, holes);
        // observe() notes the report; if the full path runs after all, it
        // notes it again at the same instant: a zero gap, which is ignored.
        let mut sent = None;
        if self.started == Some(stamp.run())
            && now_s < t.due_at
            && announced_tmax(self.observe(now, settings.tmax), settings) == t.tmax
            && self.metadata_tmax == t.tmax
        {
            if settings.keeps_records() {
                self.keep_record(datagram);
            }
            let values = template::Values {
                states: &mut self.states,
                moved: &mut self.peer_dirty,
                host_key: self.host_key,
                now_s,
                heartbeat: settings.value_heartbeat,
            };
            sent = t.emit(datagram, holes, stamp.tos, values, batch);
            if sent.is_some() && !json {
                // Same text but the holes: the same sections.
                self.xml_tod = stamp.tod;
            }
        }
        let excluded = t.excluded;
        self.template = Some(t);
        let values = sent?;
        self.prune(now_s, settings.dmax, interval_seconds(settings));
        Some((values, excluded))
    }

    /// Where the metric of `key` among the source's other metrics (XCache's
    /// totals, the detailed stream's) stands, and which of its packets go
    /// out: every one for an answer; else on its schedule (None: over
    /// `max_metrics_per_source`).
    pub(in crate::engine) fn due(&mut self, key: u64, how: Appending<'_>) -> Option<(usize, Due)> {
        if how.answering {
            return self.metric_at(key).map(|at| (at, Due::Answer));
        }
        let (interval_s, cap) = (
            interval_seconds(how.settings),
            how.settings.max_metrics_per_source,
        );
        let found = self.metric(key, how.now_s, interval_s, false, cap);
        found.map(|(at, metadata)| (at, Due::Report { metadata }))
    }

    /// Whether an answer to gmond is due at `now`: it has a record kept
    /// and did not answer within [`ANSWER_HOLDOFF`](super::super::answer::ANSWER_HOLDOFF).
    /// If so, the answer is noted as given.
    pub(in crate::engine) fn answer_due(
        &mut self,
        now: Instant,
        holdoff: std::time::Duration,
    ) -> bool {
        if self.last_record.is_empty()
            || self
                .answered_at
                .is_some_and(|t| now.saturating_duration_since(t) < holdoff)
        {
            return false;
        }
        self.answered_at = Some(now);
        true
    }

    /// An answer's heartbeat: its metadata, and its value if the run is known.
    pub(in crate::engine) fn append_heartbeat_answer(&self, batch: &mut PacketBatch) {
        batch.heartbeat_metadata(&self.host, self.host_key);
        if let Some((tos, _)) = self.started {
            batch.heartbeat_value(&self.host, self.host_key, tos);
        }
    }

    /// Appends one metric (its state at `at`): its metadata when due, then
    /// its value, a counter continued past restarts. Every record's metrics,
    /// XCache totals and answers go out through here (the fast path's
    /// template holds the same packets, cut from these). Returns (metadata,
    /// values) appended.
    pub(in crate::engine) fn append_metric(
        &mut self,
        batch: &mut PacketBatch,
        at: usize,
        m: &Metric<'_>,
        due: Due,
        now_s: u32,
        settings: &Settings,
    ) -> (u64, u64) {
        let (metadata, answering) = match due {
            Due::Report { metadata } => (metadata, false),
            Due::Answer => (true, true),
        };
        if metadata {
            let tmax = self.metadata_tmax;
            batch.metadata(
                &self.host,
                self.host_key,
                m,
                &self.program,
                tmax,
                settings.dmax,
            );
        }
        let mut number = [0u8; 20];
        let state = &mut self.states[at];
        let (text, counting) = (m.value.as_bytes(), Counting::of(m.kind));
        let value = if answering {
            // The value as last sent: the state stays as the record left it.
            series::sent_text(state, text, counting, &mut number)
        } else {
            let mut value =
                series::counter_text(state, text, counting, &mut number, &mut self.peer_dirty);
            // Its floor, on the first record after the start (recover_from).
            let floor = self.floors.as_ref().and_then(|f| f.get(&m.name_key));
            if counting != Counting::None
                && series::parse_u64(text).is_some()
                && floor.is_some_and(|&f| state.floor(f))
            {
                self.peer_dirty = true;
                value = series::sent_text(state, text, counting, &mut number);
            }
            // Held: counted, not published (it may be below what gmetad
            // stored; [`Source::holding`]).
            if self.holding && counting != Counting::None {
                return (u64::from(metadata), 0);
            }
            if !state.admit(value, now_s, settings.value_heartbeat, metadata) {
                return (u64::from(metadata), 0);
            }
            value
        };
        let key = SlotKey {
            host: self.host_key,
            metric: m.name_key,
        };
        batch.value(&self.host, key, m.name, value);
        (u64::from(metadata), 1)
    }
}
