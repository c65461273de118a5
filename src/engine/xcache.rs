//! XCache's g-stream as metrics of the XCache's own host.
//!
//! An XCache's summary records leave its cache section's byte counts at 0;
//! its g-stream (`xrootd.mongstream pfc`) says, per closed file, how many
//! bytes were served from the cache, fetched from the origin and passed by.
//! They are added up per XCache run (the xrootd of the g-stream's address
//! whose start time is its `stod` and, if the g-stream names its instance,
//! whose program that is) and go out as that server's metrics at once and
//! with each of its records: named, typed and left out exactly as the same
//! numbers in a `pfc` section of its own record would be. A server not
//! heard from yet gets them when it is (they wait, bounded by
//! `max_sources`).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use crate::events::Events;
use crate::gstream::PfcTotals;
use crate::mapping::{HeaderParts, MappedRecord, Mapper};

use super::packets::PacketBatch;
use super::source::Source;
use super::{Appending, Context, is_xrootd};

/// A waiting g-stream's XCache: address, start time, program (when the
/// g-stream names its instance).
type Run = (IpAddr, u32, Option<String>);

/// Totals of XCaches not heard from yet, and what the last totals sent
/// were mapped to.
#[derive(Default)]
pub(super) struct Totals {
    waiting: HashMap<Run, PfcTotals>,
    mapped: MappedRecord,
}

/// The program a g-stream's instance name stands for (`xrootd` or
/// `xrootd NAME`, as a summary record's `pgm` and `ins` make it).
pub(super) fn program_of(instance: &str) -> String {
    let mut p = String::new();
    HeaderParts::new(Some("xrootd"), Some(instance), None).write_program(&mut p);
    p
}

impl Totals {
    /// Keeps the totals of an XCache not heard from yet.
    pub(super) fn wait(
        &mut self,
        from: SocketAddr,
        totals: &PfcTotals,
        program: Option<String>,
        cap: usize,
        events: &mut Events<'_>,
    ) {
        let key = (from.ip(), totals.stod, program);
        let known = self.waiting.contains_key(&key);
        if !known && self.waiting.len() >= cap {
            return events.gstream_unmatched(from, totals.stod);
        }
        if !known {
            events.gstream_waiting(from, totals.stod);
        }
        self.waiting.entry(key).or_default().add(totals);
    }

    /// A record of `source` arrived: totals that waited for it are its own.
    pub(super) fn claim_waiting(&mut self, source: &mut Source, ip: IpAddr) {
        if self.waiting.is_empty() || !is_xrootd(source.program()) {
            return;
        }
        let tos = source.started().map_or(0, |(tos, _)| tos);
        for program in [None, Some(source.program().to_string())] {
            if let Some(early) = self.waiting.remove(&(ip, tos, program)) {
                source.claim_gstream(&early);
            }
        }
    }

    /// The metrics the last totals sent were mapped to.
    pub(super) fn mapped(&self) -> &MappedRecord {
        &self.mapped
    }

    /// Appends `source`'s totals to the batch after its record's metrics,
    /// counted as sent.
    pub(super) fn report(
        &mut self,
        batch: &mut PacketBatch,
        mapper: &mut Mapper,
        source: &mut Source,
        cx: &mut Context<'_, '_>,
    ) {
        let (metadata, values) = self.append(batch, mapper, source, cx.appending(false));
        cx.events.sent(metadata, values);
    }

    /// Appends `source`'s totals to the batch, each on its metric's
    /// schedule (metadata when due, or with `answering` every metadata, the
    /// periodic resend left as it is), counters kept continuous. Returns
    /// (metadata, values) appended.
    pub(super) fn append(
        &mut self,
        batch: &mut PacketBatch,
        mapper: &mut Mapper,
        source: &mut Source,
        how: Appending<'_>,
    ) -> (u64, u64) {
        let (Some(totals), Some(naming)) = (source.pfc(), source.naming()) else {
            return (0, 0);
        };
        // As a `pfc` section of its own record would hold them.
        let counts = [
            ("pfc.files", totals.files),
            ("pfc.bytes_hit", totals.bytes_hit),
            ("pfc.bytes_miss", totals.bytes_miss),
            ("pfc.bytes_bypass", totals.bytes_bypass),
        ];
        let parts = naming.parts();
        mapper.map_counts(parts, &counts, &mut self.mapped);
        let (mut metadata, mut values) = (0, 0);
        for m in self.mapped.metrics() {
            if let Some((at, due)) = source.due(m.name_key, how) {
                let (m, v) = source.append_metric(batch, at, &m, due, how.now_s, how.settings);
                metadata += m;
                values += v;
            }
        }
        (metadata, values)
    }
}
