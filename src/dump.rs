//! `xrd2ganglia dump`: what `serve` would send for some records, sent nowhere.
//!
//! Records come from a file or stdin (one per line, as `mpxstats -f xml`
//! writes them, or a single datagram) or from a live UDP port. Each goes
//! through the daemon's own [`Engine`] (same parser, mapping, schedule and
//! encoder), and the packets it produces are decoded back, so what is printed
//! is what gmond would get: host (spoof string), metric, value, type, slope,
//! units, group, TMAX, DMAX. Metadata is only in the packets when it is due;
//! rows for later records reuse what the last metadata said.
//!
//! Variables the catalog does not know, and names that had to be sanitised,
//! are marked (`note` column; `"unknown"` / `"sanitized"` in JSON).

use std::collections::{HashMap, VecDeque};
use std::io::{self, BufRead, Write};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::Settings;
use crate::engine::Engine;
use crate::events::{Counters, Events};
use crate::ganglia::xdr::{self, Metadata, Packet};

/// One metric as gmond would get it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub host: String,
    pub name: String,
    pub value: String,
    #[serde(rename = "type")]
    pub value_type: String,
    pub slope: String,
    pub units: String,
    pub group: String,
    pub title: String,
    pub tmax: u32,
    pub dmax: u32,
    /// The summary variable it came from (empty for the heartbeat).
    pub var: String,
    pub unknown: bool,
    pub sanitized: bool,
    /// The variable's name as the record had it, when it was sanitised.
    pub sanitized_from: Option<String>,
    /// The packet id of the value: 133 (string), or 132 for the heartbeat.
    pub packet: u32,
}

/// Turns records into rows, remembering metadata between records.
pub struct Dumper {
    engine: Engine,
    counters: Counters,
    metadata: Kept,
    started: Instant,
}

/// The last metadata of each host's metrics, kept as decoded: at most
/// `max_hosts` hosts (`dump --listen` hears any sender: what it keeps
/// must not grow for ever), the one whose metadata came first forgotten
/// first.
struct Kept {
    by_host: HashMap<String, HashMap<String, Metadata<'static>>>,
    /// Hosts in the order their first metadata came (front: the oldest).
    order: VecDeque<String>,
    /// The engine's `max_sources` and its own host.
    max_hosts: usize,
}

impl Kept {
    /// Keeps `meta` as the last metadata of `host`'s `name`, forgetting
    /// the oldest host's beyond `max_hosts`.
    fn remember(&mut self, host: String, name: String, meta: Metadata<'static>) {
        if let Some(metrics) = self.by_host.get_mut(&host) {
            metrics.insert(name, meta);
            return;
        }
        self.order.push_back(host.clone());
        self.by_host.insert(host, HashMap::from([(name, meta)]));
        while self.order.len() > self.max_hosts {
            if let Some(oldest) = self.order.pop_front() {
                self.by_host.remove(&oldest);
            }
        }
    }

    fn get(&self, host: &str, name: &str) -> Option<&Metadata<'static>> {
        self.by_host.get(host).and_then(|m| m.get(name))
    }
}

impl Dumper {
    pub fn new(settings: Settings) -> Dumper {
        // The full path for every record: the notes below come from its
        // mapping (the fast path sends the same packets but maps nothing).
        let started = Instant::now();
        let max_hosts = settings.max_sources.saturating_add(1);
        let mut engine = Engine::new(std::sync::Arc::new(settings), started);
        engine.set_fast_path(false);
        Dumper {
            engine,
            counters: Counters::default(),
            metadata: Kept {
                by_host: HashMap::new(),
                order: VecDeque::new(),
                max_hosts,
            },
            started,
        }
    }

    /// The rows for one datagram from `from`, or why it was not a record.
    pub fn rows(
        &mut self,
        datagram: &[u8],
        from: SocketAddr,
        at: Duration,
    ) -> Result<Vec<Row>, String> {
        let before = self.counters.snapshot();
        let mut events = Events::new(&self.counters, Duration::from_secs(3600));
        let at = self.started + at;
        self.engine.datagram(datagram, from, at, &mut events);
        let after = self.counters.snapshot();
        if after.denied > before.denied {
            return Err(format!("{from} is not in `allow`"));
        }
        if after.parse_errors > before.parse_errors {
            if let Err(e) = crate::gstream::read(datagram) {
                return Err(e.to_string());
            }
            let mut p = crate::summary::SummaryParser::new();
            return Err(p
                .parse(datagram)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default());
        }
        let notes: HashMap<&str, (&str, bool, Option<&str>)> = self
            .engine
            .xcache_mapped()
            .metrics()
            // The record's own last: it wins where both name a metric.
            .chain(self.engine.mapped().metrics())
            .map(|m| (m.name, (m.var, m.is_unknown(), m.original)))
            .collect();
        let mut rows = Vec::new();
        for bytes in self.engine.packets() {
            match xdr::decode(bytes) {
                Ok(Packet::Metadata { id, meta }) => {
                    self.metadata.remember(
                        id.host.into_owned(),
                        id.name.into_owned(),
                        meta.into_owned(),
                    );
                }
                Ok(packet @ Packet::Value { .. }) => {
                    let packet_id = packet.packet_id();
                    let Packet::Value { id, value, .. } = packet else {
                        continue;
                    };
                    let meta = self.metadata.get(&id.host, &id.name);
                    let (var, unknown, original) = notes
                        .get(id.name.as_ref())
                        .copied()
                        .unwrap_or(("", false, None));
                    let text = |f: for<'m> fn(&'m Metadata<'static>) -> &'m str, default: &str| {
                        meta.map_or(default, f).to_string()
                    };
                    rows.push(Row {
                        host: id.host.into_owned(),
                        name: id.name.into_owned(),
                        value: value.to_string(),
                        // The heartbeat has no metadata: gmond needs none for it.
                        value_type: text(|m| &m.value_type, "uint32"),
                        slope: text(|m| m.slope.as_str(), "zero"),
                        units: text(|m| &m.units, ""),
                        group: text(|m| m.extra("GROUP").unwrap_or(""), ""),
                        title: text(|m| m.extra("TITLE").unwrap_or(""), ""),
                        tmax: meta.map_or(0, |m| m.tmax),
                        dmax: meta.map_or(0, |m| m.dmax),
                        var: var.to_string(),
                        unknown,
                        sanitized: original.is_some(),
                        sanitized_from: original.map(str::to_string),
                        packet: packet_id,
                    });
                }
                Ok(Packet::Request { .. }) | Err(_) => {}
            }
        }
        Ok(rows)
    }
}

impl Dumper {
    /// How many hosts' metadata is kept.
    pub fn hosts_kept(&self) -> usize {
        self.metadata.by_host.len()
    }
}

/// Output style.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    Table,
    Json,
}

/// Writes rows; the table gets a header line per record.
pub fn write_rows(out: &mut dyn Write, rows: &[Row], style: Style) -> io::Result<()> {
    match style {
        Style::Json => {
            for r in rows {
                serde_json::to_writer(&mut *out, r)?;
                out.write_all(b"\n")?;
            }
        }
        Style::Table => {
            let w =
                |f: fn(&Row) -> usize, min: usize| rows.iter().map(f).max().unwrap_or(0).max(min);
            let (wh, wn, wv, wt, wu, wg) = (
                w(|r| r.host.len(), 4),
                w(|r| r.name.len(), 6),
                w(|r| r.value.len().min(40), 5),
                w(|r| r.value_type.len(), 4),
                w(|r| r.units.len(), 5),
                w(|r| r.group.len(), 5),
            );
            writeln!(
                out,
                "{:wh$}  {:wn$}  {:wv$}  {:wt$}  {:10}  {:wu$}  {:wg$}  {:>5}  {:>5}  NOTE",
                "HOST", "METRIC", "VALUE", "TYPE", "SLOPE", "UNITS", "GROUP", "TMAX", "DMAX"
            )?;
            for r in rows {
                let mut note = Vec::new();
                if r.packet == xdr::ID_UINT {
                    note.push("heartbeat (132 uint)".to_string());
                }
                if r.unknown {
                    note.push(format!("unknown variable {}", r.var));
                }
                if let Some(original) = &r.sanitized_from {
                    note.push(format!("sanitized from {original}"));
                }
                let value: String = if r.value.len() > 40 {
                    format!("{}...", &r.value[..37])
                } else {
                    r.value.clone()
                };
                writeln!(
                    out,
                    "{:wh$}  {:wn$}  {:wv$}  {:wt$}  {:10}  {:wu$}  {:wg$}  {:>5}  {:>5}  {}",
                    r.host,
                    r.name,
                    value,
                    r.value_type,
                    r.slope,
                    r.units,
                    r.group,
                    r.tmax,
                    r.dmax,
                    note.join("; ")
                )?;
            }
            writeln!(out)?;
        }
    }
    out.flush()
}

/// The longest line `dump` reads as a record: a record is one UDP
/// datagram (at most 65,507 bytes), so a longer line is not one; it
/// stops the reading (an endless line must not take the host's memory).
pub const MAX_RECORD_LINE: usize = 64 << 10;

/// Dumps every record of `input` (one per line), as if sent from `from`.
/// A line longer than [`MAX_RECORD_LINE`] ends it with an error (kind
/// `InvalidData`) that names the record and the bound.
pub fn from_reader(
    dumper: &mut Dumper,
    input: &mut dyn BufRead,
    from: IpAddr,
    style: Style,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> io::Result<usize> {
    let mut bad = 0;
    let mut line = Vec::new();
    let mut n = 0u64;
    let mut parser = crate::summary::SummaryParser::new();
    let mut first_tod = None;
    loop {
        let next = crate::lines::read_line(input, &mut line, MAX_RECORD_LINE)?;
        if next == crate::lines::Next::End {
            break;
        }
        let record = &line[..];
        if next == crate::lines::Next::TooLong {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "record {}: longer than {}, the most one record (one UDP datagram) \
                     can be: not one record per line",
                    n + 1,
                    crate::lines::size(MAX_RECORD_LINE)
                ),
            ));
        }
        if record.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        n += 1;
        // A record "arrives" at its own tod, so TMAX follows the real report interval.
        let tod = parser
            .parse(record)
            .ok()
            .and_then(|r| r.header().tod.and_then(|t| t.trim().parse::<u64>().ok()));
        let at = match (tod, *first_tod.get_or_insert(tod.unwrap_or(0))) {
            (Some(t), first) => Duration::from_secs(t.saturating_sub(first)),
            (None, _) => Duration::ZERO,
        };
        match dumper.rows(record, SocketAddr::new(from, 0), at) {
            Ok(rows) => write_rows(out, &rows, style)?,
            Err(e) => {
                bad += 1;
                writeln!(err, "xrd2ganglia dump: record {n}: {e}")?;
            }
        }
    }
    Ok(bad)
}

/// Dumps datagrams arriving on `socket` until `out` is closed; with
/// `record`, also writes each datagram there as it arrived (a recording:
/// [`crate::recording`]), before it is dumped.
pub fn from_socket(
    dumper: &mut Dumper,
    socket: &UdpSocket,
    style: Style,
    out: &mut dyn Write,
    err: &mut dyn Write,
    mut record: Option<&mut dyn Write>,
) -> io::Result<()> {
    let mut buf = vec![0u8; 65536];
    let started = Instant::now();
    loop {
        let (n, from) = socket.recv_from(&mut buf)?;
        if let Some(r) = record.as_deref_mut() {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            crate::recording::write_entry(r, now, from, &buf[..n])?;
        }
        match dumper.rows(&buf[..n], from, started.elapsed()) {
            Ok(rows) => write_rows(out, &rows, style)?,
            Err(e) => writeln!(err, "xrd2ganglia dump: {from}: {e}")?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 42: `dump --listen` hears any sender; the metadata it keeps
    /// to label rows is bounded by `max_sources` (and the gateway's own
    /// host), whatever number of hosts sends, and the newest are labelled.
    #[test]
    fn the_metadata_kept_is_bounded_by_max_sources() {
        let settings = crate::engine::tests::settings("max_sources = 2");
        let mut dumper = Dumper::new(settings);
        for i in 0..10u32 {
            let record = format!(
                r#"<statistics tod="1700000100" ver="v5.5.3" src="ds{i}.example.org:1094" tos="1700000000" pgm="xrootd" ins="anon" pid="{i}" site="S"><stats id="link"><in>{i}</in></stats></statistics>"#
            );
            let from = SocketAddr::from(([127, 0, 0, 1], 1000 + i as u16));
            let rows = dumper
                .rows(record.as_bytes(), from, Duration::ZERO)
                .unwrap();
            let link = rows.iter().find(|r| r.name == "xrootd.link.in").unwrap();
            assert_eq!(
                (link.slope.as_str(), link.units.as_str()),
                ("positive", "bytes/s")
            );
            assert!(
                dumper.hosts_kept() <= 3,
                "{} hosts kept",
                dumper.hosts_kept()
            );
        }
        assert_eq!(dumper.hosts_kept(), 3);
    }
}
