//! Answers to gmond's metadata requests (gmetadata_request, packet 136).
//!
//! A gmond that gets a value for a metric it has no metadata for (it was
//! restarted, or dropped the metric) keeps the value unshown and sends a
//! 136 naming the metric on its own send channels (`gmond/gmond.c`). Stock
//! Ganglia answers them only for gmond's own metrics; a gmetric-style
//! sender is left alone until its next metadata, a `metadata_interval`
//! later. The engine answers with every metadata of the host asked about
//! at once, with the values it last sent, at most once per source per
//! [`ANSWER_HOLDOFF`]; the daemon hears the requests
//! ([`crate::daemon::requests`]).
//!
//! An answer parses and maps the source's last datagram again: answers
//! are rare (a gmond restarted), and keeping each source's mapped names
//! instead would cost every source their size for the rare answer.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use crate::ganglia::xdr::{self, Packet};

use crate::config::Settings;
use crate::mapping::{MappedRecord, Mapper};
use crate::summary::SummaryParser;

use super::detailed::Detailed;
use super::packets::PacketBatch;
use super::source::{Source, Sources};
use super::xcache::Totals;
use super::{Appending, Due, Engine};

/// A source answers at most one request in this long: a restarted gmond
/// asks once per value it cannot show, and one answer covers them all.
pub const ANSWER_HOLDOFF: Duration = Duration::from_secs(5);

/// A gmond that asks after this long without a request was (re)started:
/// it has lost every metric's metadata, not only the one it names.
pub const QUIET: Duration = Duration::from_secs(10);

/// What gmond asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// One metric (its whole host is answered).
    Metric(MetricRequest),
    /// Every host: gmond asked after a quiet spell, so it was restarted
    /// and lost them all. Hosts that have not reported since cannot make
    /// it ask; without this they would stay invisible until their next
    /// report (with their last values) or metadata (without).
    Everything,
}

/// The metric_id of one 136.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricRequest {
    /// The spoof string (`ip:name`) the value came with.
    pub host: String,
    pub name: String,
}

/// A well-formed 136, else None.
pub fn parse(datagram: &[u8]) -> Option<MetricRequest> {
    if datagram.get(..4) != Some(&[0, 0, 0, 136]) {
        return None;
    }
    match xdr::decode(datagram).ok()? {
        Packet::Request { id } => Some(MetricRequest {
            host: id.host.into_owned(),
            name: id.name.into_owned(),
        }),
        _ => None,
    }
}

/// The sender address a spoof string's IP part stands for (see
/// [`crate::mapping::ip_text`]: IPv6 is written with `-` for `:`).
pub fn spoof_ip(host: &str) -> Option<IpAddr> {
    let ip = host.split_once(':').map_or(host, |(ip, _)| ip);
    if let Ok(v4) = ip.parse::<Ipv4Addr>() {
        return Some(IpAddr::V4(v4));
    }
    ip.replace('-', ":")
        .parse::<Ipv6Addr>()
        .ok()
        .map(IpAddr::V6)
}

impl Engine {
    /// Answers one metric's request: if it names a metric of a source of
    /// this engine, that source's metadata and last values are left in the
    /// batch, all of them. Returns whether it did. The periodic resend
    /// keeps its schedule (an answer is extra, not a resend).
    pub fn answer(&mut self, request: &MetricRequest, now: Instant) -> bool {
        self.batch.clear();
        let Some(ip) = spoof_ip(&request.host) else {
            return false;
        };
        // The heartbeat is every source's of the host: any of them answers.
        let key = crate::mapping::name_key(&request.name);
        let any = request.name == "heartbeat";
        let (mut answering, sources) = self.answering(now);
        let Some(source) = sources
            .of_ip_mut(ip)
            .find(|s| s.host() == request.host && (any || s.metric_at(key).is_some()))
        else {
            return false;
        };
        answering.source(source, ip, now)
    }

    /// A gmond lost everything (it asked after a quiet spell: it was
    /// restarted): every source not answered within the holdoff gives its
    /// metadata and last values to `deliver`, one batch per source.
    /// Returns how many did.
    pub fn answer_everything(
        &mut self,
        now: Instant,
        mut deliver: impl FnMut(&PacketBatch),
    ) -> usize {
        let (mut answering, sources) = self.answering(now);
        let mut answered = 0;
        for (ip, source) in sources.iter_with_ip_mut() {
            answering.batch.clear();
            if answering.source(source, ip, now) {
                deliver(answering.batch);
                answered += 1;
            }
        }
        answering.batch.clear();
        answered
    }

    /// What an answer is made with, and the sources, borrowed apart.
    fn answering(&mut self, now: Instant) -> (Answering<'_>, &mut Sources) {
        let answering = Answering {
            parser: &mut self.parser,
            mapper: &mut self.mapper,
            mapped: &mut self.mapped,
            batch: &mut self.batch,
            xcache: &mut self.xcache,
            detailed: &mut self.detailed,
            answered: &mut self.answered,
            settings: &self.settings,
            now_s: self.clock.secs(now),
        };
        (answering, &mut self.sources)
    }
}

/// The engine's parts an answer is made with.
struct Answering<'e> {
    parser: &'e mut SummaryParser,
    mapper: &'e mut Mapper,
    mapped: &'e mut MappedRecord,
    batch: &'e mut PacketBatch,
    xcache: &'e mut Totals,
    detailed: &'e mut Detailed,
    /// Which of the source's metrics the answer has sent.
    answered: &'e mut Vec<bool>,
    settings: &'e Settings,
    now_s: u32,
}

impl Answering<'_> {
    /// Appends `source`'s heartbeat, metadata and last values to the batch,
    /// unless it answered within [`ANSWER_HOLDOFF`] or has no record kept.
    fn source(&mut self, source: &mut Source, ip: IpAddr, now: Instant) -> bool {
        if !source.answer_due(now, ANSWER_HOLDOFF) {
            return false;
        }
        let Ok(record) = self.parser.parse(source.last_record()) else {
            return false;
        };
        self.mapper.map(&record, ip, self.mapped);
        // To the gmonds of its cluster.
        source.head(self.batch);
        source.append_heartbeat_answer(self.batch);
        let settings = self.settings;
        // Each metric once, as the record's first reading of it went out.
        self.answered.clear();
        self.answered.resize(source.metrics(), false);
        for m in self.mapped.metrics() {
            let Some(at) = source.metric_at(m.name_key) else {
                continue;
            };
            if self.answered.get(at).is_none_or(|&done| done) {
                continue;
            }
            self.answered[at] = true;
            source.append_metric(self.batch, at, &m, Due::Answer, self.now_s, settings);
        }
        let (batch, mapper) = (&mut *self.batch, &mut *self.mapper);
        let how = Appending {
            now_s: self.now_s,
            settings,
            answering: true,
        };
        self.xcache.append(batch, mapper, source, how);
        self.detailed.append(batch, mapper, source, ip, how);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ganglia::xdr::MetricId;

    #[test]
    fn reads_requests_and_nothing_else() {
        let mut out = Vec::new();
        let id = MetricId::new("10.0.0.1:ds1.example.org", "xrootd.link.in", true);
        xdr::encode(&mut out, &Packet::Request { id: id.clone() });
        assert_eq!(
            parse(&out),
            Some(MetricRequest {
                host: "10.0.0.1:ds1.example.org".into(),
                name: "xrootd.link.in".into()
            })
        );
        assert_eq!(parse(&out[..out.len() - 1]), None);
        let mut value = Vec::new();
        xdr::encode(&mut value, &Packet::string_value(id, "5"));
        assert_eq!(parse(&value), None);
        assert_eq!(parse(b""), None);
    }

    #[test]
    fn spoof_ips_map_back_to_senders() {
        assert_eq!(spoof_ip("10.0.0.1:h"), Some("10.0.0.1".parse().unwrap()));
        assert_eq!(
            spoof_ip("2001-db8--7:h.example.org"),
            Some("2001:db8::7".parse().unwrap())
        );
        assert_eq!(spoof_ip("myhost"), None);
    }
}
